//! `cutpoint check` over every format: provider-rule violations as
//! `FILE:LINE: rule: call_id text`.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cutpoint::format::{self, Violation};
use serde_json::json;

use super::formats::{self, FormatArg};
use super::{check, input};

/// Arguments of `cutpoint check`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Input format.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    /// Calls still unanswered at the very end of a log are not violations (a turn in
    /// flight). A call left unanswered while the log moved on always is one.
    #[arg(long)]
    allow_pending: bool,
    /// One JSON document on stdout instead of lines.
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    caps: super::guard::Caps,
    /// The logs to check; `-` or none reads stdin.
    #[arg(value_name = "FILE")]
    files: Vec<PathBuf>,
}

/// One violation as `check` prints it: `FILE:LINE: rule: call_id text`.
pub(crate) struct Line {
    line: usize,
    message: Option<usize>,
    rule: &'static str,
    call_id: Option<String>,
    pending_at_end: bool,
    text: String,
}

/// Outcome of checking one file.
pub(crate) enum Checked {
    /// The file was read: its format, size, violations (after `--allow-pending`) and,
    /// for records, the digest of its pairing structure.
    Read {
        format: format::Format,
        messages: usize,
        violations: Vec<Line>,
        digest: Option<u64>,
    },
    /// The file could not be read; the message says why.
    Unreadable(String),
}

/// Checks one file (`-` for stdin): reads it as `format` (detected for `auto`) and
/// validates it: records JSONL against the five conditions of safe compaction, the
/// provider formats against their provider's rules.
/// Records logs are read under `limits` (the provider formats are parsed whole).
pub(crate) fn check_file(
    path: &Path,
    format: FormatArg,
    allow_pending: bool,
    limits: cutpoint::Limits,
) -> Checked {
    let loaded = match formats::load_bytes(Some(path)) {
        Ok(l) => l,
        Err(e) => return Checked::Unreadable(e),
    };
    let resolved = match formats::resolve(&loaded, format) {
        Ok(f) => f,
        Err(e) => return Checked::Unreadable(e),
    };
    if resolved == format::Format::Records {
        let input = input::Input {
            name: loaded.name,
            reader: Box::new(io::Cursor::new(loaded.bytes)),
        };
        return match check::check_records(input, allow_pending, limits) {
            Err(e) => Checked::Unreadable(e),
            Ok(report) => Checked::Read {
                format: resolved,
                messages: report.records,
                violations: report
                    .violations
                    .into_iter()
                    .map(|v| Line {
                        line: v.line,
                        message: None,
                        rule: v.kind,
                        call_id: Some(v.call_id),
                        pending_at_end: v.pending_at_end,
                        text: String::new(),
                    })
                    .collect(),
                digest: Some(report.digest),
            },
        };
    }
    let transcript = match formats::into_text(loaded)
        .and_then(|l| formats::parse_as(&l, resolved, &format::ByteEstimate))
    {
        Ok(t) => t,
        Err(e) => return Checked::Unreadable(e),
    };
    let mut violations = format::validate_transcript(&transcript);
    if allow_pending {
        violations.retain(|v| !v.pending_at_end);
    }
    Checked::Read {
        format: transcript.format,
        messages: transcript.messages.len(),
        violations: violations.iter().map(line_of).collect(),
        digest: None,
    }
}

/// A provider-rule violation as a printed line: the text after the call id is the
/// provider's error text and whether the call is pending or was left behind.
fn line_of(v: &Violation) -> Line {
    let shown = v.to_string();
    let prefix = format!(
        "{}: {}: {}",
        v.line,
        v.rule,
        v.call_id
            .as_ref()
            .map(|c| format!("{c} "))
            .unwrap_or_default()
    );
    Line {
        line: v.line,
        message: Some(v.message),
        rule: v.rule.name(),
        call_id: v.call_id.as_ref().map(|c| c.to_string()),
        pending_at_end: v.pending_at_end,
        text: shown.strip_prefix(&prefix).unwrap_or(&shown).to_owned(),
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let mut unreadable = false;
    let mut dirty = false;
    let mut reports = Vec::new();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let stdin = [PathBuf::from("-")];
    let files = if args.files.is_empty() {
        &stdin[..]
    } else {
        &args.files[..]
    };
    for path in files {
        let name = match path.as_os_str() == "-" {
            true => "<stdin>".to_owned(),
            false => path.display().to_string(),
        };
        match check_file(path, args.format, args.allow_pending, args.caps.limits()) {
            Checked::Unreadable(message) => {
                unreadable = true;
                eprintln!("{message}");
                reports.push(json!({"file": name, "error": message}));
            }
            Checked::Read {
                format,
                messages,
                violations,
                digest,
            } => {
                dirty |= !violations.is_empty();
                if args.json {
                    let list: Vec<_> = violations
                        .iter()
                        .map(|v| {
                            json!({
                                "line": v.line,
                                "message": v.message,
                                "rule": v.rule,
                                "call_id": v.call_id,
                                "pending_at_end": v.pending_at_end,
                                "text": v.text,
                            })
                        })
                        .collect();
                    reports.push(json!({
                        "file": name,
                        "format": format.name(),
                        "messages": messages,
                        "violations": list,
                    }));
                } else {
                    for v in &violations {
                        // A closed stdout (`| head`) is not worth a panic.
                        let _ = write!(out, "{name}:{}: {}:", v.line, v.rule);
                        if let Some(id) = &v.call_id {
                            let _ = write!(out, " {id}");
                        }
                        if !v.text.is_empty() {
                            let _ = write!(out, " {}", v.text);
                        }
                        let _ = writeln!(out);
                    }
                }
                if !violations.is_empty() {
                    let n = violations.len();
                    let s = if n == 1 { "" } else { "s" };
                    match digest {
                        Some(d) => {
                            eprintln!("{name}: {n} violation{s} (pairing structure {d:016x})")
                        }
                        None => eprintln!("{name}: {n} violation{s}"),
                    }
                }
            }
        }
    }
    if args.json {
        let _ = writeln!(
            out,
            "{}",
            json!({"clean": !dirty && !unreadable, "files": reports})
        );
    }
    if unreadable {
        ExitCode::from(super::EXIT_BAD_INPUT)
    } else if dirty {
        ExitCode::from(super::EXIT_VIOLATIONS)
    } else {
        ExitCode::SUCCESS
    }
}
