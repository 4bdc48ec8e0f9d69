//! `cutpoint compact`: replace the region before the legal cut nearest the target by
//! one summary record and print the compacted log.

use std::io::{self, BufWriter, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cutpoint::compact::{ArgumentPolicy, Direction, Policy, Unit};

use super::formats::{self, FormatArg};
use super::input::{self, Format};

/// Arguments of `cutpoint compact`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Tokens to compact, counted from the start of the log (head included).
    #[arg(long, value_name = "TOKENS")]
    target: u64,
    /// How far from the target the cut may move, in tokens [default: 15% of the target].
    #[arg(long, value_name = "TOKENS")]
    lookback: Option<u64>,
    /// Records pinned at the front (system prompt, first user message); messages for
    /// the provider formats.
    #[arg(long, value_name = "N", default_value_t = 0)]
    keep_head: usize,
    /// Move forward to the nearest legal cut past the target instead of walking back.
    #[arg(long)]
    forward: bool,
    /// Prose for the summary record (its units always list every covered pair).
    #[arg(long, value_name = "TEXT")]
    summary: Option<String>,
    /// Tokens to count for the summary record [default: about a quarter of its bytes]
    /// (records JSONL only).
    #[arg(long, value_name = "TOKENS")]
    summary_tokens: Option<u64>,
    /// Cut string argument fields longer than this (never commands, paths, queries)
    /// (records JSONL only; the provider formats' ledger keeps arguments verbatim).
    #[arg(long, value_name = "CHARS")]
    shorten_arguments: Option<usize>,
    /// Input format. The provider formats keep their shape: the pinned head (in
    /// messages) verbatim, one summary message, the retained messages byte-identical.
    #[arg(long, value_enum, default_value_t = FormatArg::Auto)]
    format: FormatArg,
    #[command(flatten)]
    input: super::guard::InputOptions,
    /// The log to read; `-` or nothing reads stdin.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

/// A rough token count for a summary: a quarter of its bytes, at least 1.
fn estimate(text: Option<&str>, units: &[Unit]) -> u64 {
    let bytes: usize = text.map_or(0, str::len)
        + units
            .iter()
            .map(|u| {
                40 + u.call_id.len()
                    + u.tool.as_deref().map_or(0, str::len)
                    + u.arguments.as_deref().map_or(0, str::len)
                    + u.first_line.as_deref().map_or(0, str::len)
            })
            .sum::<usize>();
    (bytes as u64 / 4).max(1)
}

pub(crate) fn run(args: Args) -> ExitCode {
    // Provider formats (named, or detected) take their own way; records and anything
    // no format claims (so that its errors name the line) go on below.
    let opened = match formats::load_bytes(args.file.as_deref()) {
        Ok(loaded) => match formats::resolve(&loaded, args.format) {
            Err(e) => return input::bad_input(&e),
            Ok(format) if format != cutpoint::format::Format::Records => {
                let request = super::compact_formats::Request {
                    target: args.target,
                    lookback: args.lookback,
                    keep_head: args.keep_head,
                    forward: args.forward,
                    summary: args.summary,
                };
                return match formats::into_text(loaded) {
                    Ok(text) => super::compact_formats::run(text, format, request),
                    Err(e) => input::bad_input(&e),
                };
            }
            _ => Ok(input::Input {
                name: loaded.name,
                reader: Box::new(io::Cursor::new(loaded.bytes)),
            }),
        },
        Err(e) => Err(e),
    };
    let (name, mut log) =
        match opened.and_then(|i| input::read_log(i, Format::Records, &args.input)) {
            Ok(read) => read,
            Err(message) => return input::bad_input(&message),
        };
    let mut policy = Policy::new(args.target).keep_head(args.keep_head);
    if let Some(lookback) = args.lookback {
        policy = policy.lookback(lookback);
    }
    if args.forward {
        policy = policy.direction(Direction::Forward);
    }
    if let Some(max_chars) = args.shorten_arguments {
        policy = policy.arguments(ArgumentPolicy::Shorten { max_chars });
    }
    let plan = match log.plan(&policy) {
        Ok(plan) => plan,
        Err(deferral) => {
            eprintln!("cutpoint: deferred: {deferral}");
            return ExitCode::from(super::EXIT_DEFER);
        }
    };
    let tokens = args
        .summary_tokens
        .unwrap_or_else(|| estimate(args.summary.as_deref(), &log.units(&plan)));
    eprintln!("cutpoint: {plan}");
    if let Err(e) = log.apply(&plan, args.summary, tokens) {
        return input::bad_input(&format!("{name}: {e}"));
    }
    let mut out = BufWriter::new(io::stdout().lock());
    for entry in log.entries() {
        if cutpoint::jsonl::write_entry(&mut out, entry).is_err() {
            // A closed stdout (`| head`): stop quietly.
            return ExitCode::SUCCESS;
        }
    }
    let _ = out.flush();
    ExitCode::SUCCESS
}
