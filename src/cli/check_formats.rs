//! `cutpoint check` over every format: provider-rule violations as
//! `FILE:LINE: rule: call_id text`.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cutpoint::format::{self, Violation};
use serde_json::json;

use super::formats::{self, FormatArg};

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
    /// The logs to check; `-` reads stdin.
    #[arg(value_name = "FILE", required = true)]
    files: Vec<PathBuf>,
}

/// Outcome of checking one file.
pub(crate) enum Checked {
    /// The file was read: its format and violations (after `--allow-pending`).
    Read {
        format: format::Format,
        messages: usize,
        violations: Vec<Violation>,
    },
    /// The file could not be read; the message says why.
    Unreadable(String),
}

/// Checks one file: reads it as `format` and validates it against its provider's rules.
pub(crate) fn check_file(
    path: &std::path::Path,
    format: FormatArg,
    allow_pending: bool,
) -> Checked {
    let loaded = match formats::load(Some(path)) {
        Ok(l) => l,
        Err(e) => return Checked::Unreadable(e),
    };
    let transcript = match formats::parse(&loaded, format) {
        Ok(t) => t,
        Err(e) => return Checked::Unreadable(e),
    };
    let mut violations = format::validate(transcript.format, &transcript.messages);
    if allow_pending {
        violations.retain(|v| !v.pending_at_end);
    }
    Checked::Read {
        format: transcript.format,
        messages: transcript.messages.len(),
        violations,
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let mut unreadable = false;
    let mut dirty = false;
    let mut reports = Vec::new();
    let stdout = io::stdout();
    let mut out = stdout.lock();
    for path in &args.files {
        let name = path.display().to_string();
        match check_file(path, args.format, args.allow_pending) {
            Checked::Unreadable(message) => {
                unreadable = true;
                eprintln!("{message}");
                reports.push(json!({"file": name, "error": message}));
            }
            Checked::Read {
                format,
                messages,
                violations,
            } => {
                dirty |= !violations.is_empty();
                if args.json {
                    let list: Vec<_> = violations
                        .iter()
                        .map(|v| {
                            json!({
                                "line": v.line,
                                "message": v.message,
                                "rule": v.rule.name(),
                                "call_id": v.call_id.as_deref(),
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
                        let _ = writeln!(out, "{name}:{v}");
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
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
