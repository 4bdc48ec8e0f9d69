//! `cutpoint stats`: the shape of a log and how compactable it is.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cutpoint::format::{self, Block};
use serde_json::json;

use crate::exit;
use crate::source::{self, FormatArg, Tokenizer};

/// Arguments of `cutpoint stats`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Input format: auto, records, anthropic, openai-chat, openai-responses, gemini,
    /// claude-code, codex or gemini-cli.
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = source::parse_format)]
    format: FormatArg,
    /// How tokens are counted.
    #[arg(long, value_enum, default_value_t = Tokenizer::Bytes)]
    tokenizer: Tokenizer,
    /// One JSON object on stdout instead of lines.
    #[arg(long)]
    json: bool,
    /// The log; `-` or nothing reads stdin.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> ExitCode {
    let loaded = match source::load(args.file.as_deref()) {
        Ok(l) => l,
        Err(e) => return exit::bad_input(&e),
    };
    let counter = match args.tokenizer.counter() {
        Ok(c) => c,
        Err(e) => return exit::bad_input(&e),
    };
    let read = loaded
        .text()
        .and_then(|_| loaded.format(args.format))
        .and_then(|format| loaded.transcript(format, counter.as_ref()));
    let transcript = match read {
        Ok(t) => t,
        Err(e) => return exit::bad_input(&e),
    };
    let (tracker, owner) = match transcript.tracker() {
        Ok(t) => t,
        Err(e) => return exit::bad_input(&format!("{}: {e}", loaded.name)),
    };
    let calls = transcript
        .messages
        .iter()
        .flat_map(|m| m.blocks.iter())
        .filter(|(b, _)| matches!(b, Block::Call { .. }))
        .count();
    let results = transcript
        .messages
        .iter()
        .map(|m| m.results().count())
        .sum::<usize>();
    // Pairs: per call id, as many as it has both calls and results (an id reused
    // while its first call is unanswered makes one pair, not two).
    let mut per_id: std::collections::HashMap<&str, (usize, usize)> =
        std::collections::HashMap::new();
    for m in &transcript.messages {
        for (_, id, _) in m.calls() {
            per_id.entry(id.as_str()).or_default().0 += 1;
        }
        for (_, id) in m.results() {
            per_id.entry(id.as_str()).or_default().1 += 1;
        }
    }
    let pairs: usize = per_id.values().map(|&(c, r)| c.min(r)).sum();
    // The longest stretch between two consecutive legal cuts: what can never be split.
    let cuts: Vec<usize> = tracker.legal_cuts().collect();
    let mut longest = (0usize, 0u64, 0usize); // (records, tokens, from record)
    let mut previous = 0usize;
    for &c in cuts.iter().chain(std::iter::once(&tracker.len())) {
        let span = c.saturating_sub(previous);
        let tokens =
            tracker.tokens_before(c).unwrap_or(0) - tracker.tokens_before(previous).unwrap_or(0);
        if tokens > longest.1 || (tokens == longest.1 && span > longest.0) {
            longest = (span, tokens, previous);
        }
        previous = c;
    }
    let live = transcript.live_from();
    let longest_from = transcript.message_at(&owner, longest.2);
    let longest_to = transcript.message_at(&owner, longest.2 + longest.0);
    let report = json!({
        "file": loaded.name,
        "format": transcript.format.name(),
        "messages": transcript.messages.len(),
        "live_from_message": live,
        "records": tracker.len(),
        "tool_calls": calls,
        "tool_results": results,
        "tool_pairs": pairs,
        "pending_calls": tracker.pending_count(),
        "tokens": tracker.total_tokens(),
        "tokens_all_messages": transcript.total_tokens(),
        "provider_reported_context_tokens":
            format::reported_context_tokens(loaded.text().unwrap_or(""), transcript.format),
        // The session's fit of the estimate to the reported input tokens (null when
        // the file reports none): `reported ≈ overhead + scale × estimate`.
        "estimate_calibration": format::Calibration::of(loaded.text().unwrap_or(""), &transcript)
            .map(|c| json!({"points": c.points, "scale": c.scale, "overhead": c.overhead})),
        "token_counter": format!("{:?}", args.tokenizer).to_lowercase(),
        "legal_cuts": tracker.legal_cut_count(),
        "longest_pending_span": {
            "records": longest.0,
            "tokens": longest.1,
            "messages": longest_to - longest_from,
            "from_message": longest_from,
        },
    });
    let stdout = io::stdout();
    let mut out = stdout.lock();
    if args.json {
        let _ = writeln!(out, "{report}");
    } else if let Some(map) = report.as_object() {
        for (k, v) in map {
            let _ = writeln!(out, "{k}: {v}");
        }
    }
    ExitCode::SUCCESS
}
