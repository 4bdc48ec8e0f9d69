//! `cutpoint check`: records JSONL against the five conditions of safe compaction
//! ([`cutpoint::compact::validate`]), one `FILE:LINE: kind: call_id` per violation;
//! the provider formats against their provider's rules
//! ([`cutpoint::format::check_rules`]), `FILE:LINE: rule: call_id text`; with
//! `--before ORIGINAL`, each file as a rewrite of ORIGINAL
//! ([`cutpoint::format::check_against`]: the latest thinking, a provider compaction,
//! reasoning before its item).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use cutpoint::format::{self, Finding, IndexSpace};
use serde_json::json;

use crate::exit;
use crate::source::{self, FormatArg, Records};

/// Arguments of `cutpoint check`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Input format: auto, records, anthropic, openai-chat, openai-responses, gemini,
    /// claude-code, codex or gemini-cli.
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = source::parse_format)]
    format: FormatArg,
    /// Calls still unanswered at the very end of a log are not violations (a turn in
    /// flight). A call left unanswered while the log moved on always is one.
    #[arg(long)]
    allow_pending: bool,
    /// One JSON document on stdout instead of lines.
    #[arg(long)]
    json: bool,
    /// Check each file as a rewrite of ORIGINAL (the log before compaction or editing,
    /// in the same provider format): also what must come back exactly as received
    /// (the latest assistant message's thinking, a provider compaction, a reasoning
    /// item before its item).
    #[arg(long, value_name = "ORIGINAL")]
    before: Option<PathBuf>,
    #[command(flatten)]
    caps: crate::guard::Caps,
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
/// provider formats against their provider's rules, and against the log `before` it
/// was rewritten from when given. Records logs are read under `limits` (the provider
/// formats are parsed whole).
pub(crate) fn check_file(
    path: &Path,
    before: Option<&Path>,
    format: FormatArg,
    allow_pending: bool,
    limits: cutpoint::Limits,
) -> Checked {
    match read_and_check(path, before, format, allow_pending, limits) {
        Ok(checked) => checked,
        Err(message) => Checked::Unreadable(message),
    }
}

fn read_and_check(
    path: &Path,
    before: Option<&Path>,
    format: FormatArg,
    allow_pending: bool,
    limits: cutpoint::Limits,
) -> Result<Checked, String> {
    let mut source = source::open(Some(path), format)?;
    let resolved = source.format(format)?;
    let loaded = source.load(resolved, Records::Unjudged(limits), &format::ByteEstimate)?;
    let checked = match before {
        None => loaded.check(None, allow_pending),
        Some(original) => {
            loaded
                .comparable()
                .map_err(|e| format!("{}: {e}", path.display()))?;
            let mut original = source::open(Some(original), FormatArg(Some(resolved)))?;
            let original =
                original.load(resolved, Records::Unjudged(limits), &format::ByteEstimate)?;
            loaded.check(Some(&original), allow_pending)
        }
    }
    .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(Checked::Read {
        format: checked.format,
        messages: checked.messages,
        violations: checked.violations.iter().map(line_of).collect(),
        digest: checked.digest,
    })
}

/// A finding as a printed line: the text after the call id is the provider's error
/// text and whether the call is pending or was left behind (nothing, for records).
fn line_of(v: &Finding) -> Line {
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
        message: (v.space == IndexSpace::Messages).then_some(v.at),
        rule: v.rule,
        call_id: v.call_id.as_ref().map(|c| c.to_string()),
        pending_at_end: v.pending_at_end,
        text: v
            .display
            .strip_prefix(&prefix)
            .unwrap_or_default()
            .to_owned(),
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
        let checked = check_file(
            path,
            args.before.as_deref(),
            args.format,
            args.allow_pending,
            args.caps.limits(),
        );
        match checked {
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
        ExitCode::from(exit::BAD_INPUT)
    } else if dirty {
        ExitCode::from(exit::VIOLATIONS)
    } else {
        ExitCode::SUCCESS
    }
}
