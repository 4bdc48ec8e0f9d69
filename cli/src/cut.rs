//! `cutpoint cut`: print the legal cut nearest a token target, or (`--for`) the
//! keep-recent cut for a provider's native compaction.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cutpoint::format::{self, DeferReport, Keep, NativeCompaction};

use crate::exit;
use crate::guard::InputOptions;
use crate::source::{self, FormatArg, Records, Tokenizer};

/// Arguments of `cutpoint cut`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Tokens to compact: the search starts at the record where the prefix sum first
    /// reaches this.
    #[arg(long, value_name = "TOKENS", required_unless_present = "native")]
    target: Option<u64>,
    /// How far the walk back from the target may go, in tokens. The walk starts at the
    /// record where the target is reached and counts that record's own tokens first,
    /// then each record before it, while the sum stays within TOKENS; the largest legal
    /// cut in what it covered is printed, or the command defers (exit 3). A lookback
    /// smaller than the target record itself searches that record alone.
    #[arg(long, value_name = "TOKENS", required_unless_present = "native")]
    lookback: Option<u64>,
    /// The keep-recent cut for a provider's own compaction instead:
    /// anthropic-compaction or openai-compaction (with --keep or --keep-turns). The
    /// messages before the printed message index go to the provider's compaction; the
    /// cut keeps every call with its result, thinking with its tool use, a reasoning
    /// item with its item, and (Anthropic) a first kept message whose role differs from
    /// the last summarized one and is not a system message; OpenAI drops only items
    /// before its latest compaction item.
    #[arg(long = "for", id = "native", value_name = "KIND", value_parser = parse_native, conflicts_with_all = ["target", "lookback"])]
    native: Option<NativeCompaction>,
    /// With --for: keep at least TOKENS of the most recent messages verbatim.
    #[arg(
        long,
        value_name = "TOKENS",
        requires = "native",
        conflicts_with = "keep_turns"
    )]
    keep: Option<u64>,
    /// With --for: keep at least the N most recent user turns verbatim.
    #[arg(long, value_name = "N", requires = "native", value_parser = clap::value_parser!(u64).range(1..))]
    keep_turns: Option<u64>,
    /// Input format: auto, records, anthropic, openai-chat, openai-responses, gemini,
    /// claude-code, codex or gemini-cli. For records JSONL the cut is a record index; for the other
    /// formats it is a message index (records before it may be compacted).
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = source::parse_format)]
    format: FormatArg,
    /// How tokens are counted (provider formats; records carry their own counts).
    #[arg(long, value_enum, default_value_t = Tokenizer::Bytes)]
    tokenizer: Tokenizer,
    #[command(flatten)]
    input: InputOptions,
    /// The log to read; `-` or nothing reads stdin.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

pub(crate) fn run(args: Args) -> ExitCode {
    match cut(&args) {
        Err(message) => exit::bad_input(&message),
        Ok(Ok(cut)) => {
            // A closed stdout (`| head`) is not worth a panic.
            let _ = writeln!(io::stdout().lock(), "{cut}");
            ExitCode::SUCCESS
        }
        Ok(Err(Refused::Deferred(report))) => {
            eprintln!("cutpoint: deferred: {report}");
            ExitCode::from(exit::DEFER)
        }
        Ok(Err(Refused::NoCut(why))) => {
            eprintln!("cutpoint: {why}");
            ExitCode::from(exit::DEFER)
        }
    }
}

fn parse_native(name: &str) -> Result<NativeCompaction, String> {
    NativeCompaction::from_name(name).ok_or_else(|| {
        format!("unknown compaction {name:?}: use anthropic-compaction or openai-compaction")
    })
}

/// Why no cut is printed, though the input was read.
enum Refused {
    /// No legal cut near the target yet.
    Deferred(DeferReport),
    /// No keep-recent cut meets the provider's conditions (`--for`).
    NoCut(String),
}

/// The cut (a record index for records JSONL; for the provider formats the tracker
/// runs over the live history's records and the cut is the first retained message),
/// or why there is none, in the same index space
/// ([`Loaded::select_cut`](cutpoint::format::Loaded::select_cut)).
fn cut(args: &Args) -> Result<Result<usize, Refused>, String> {
    let mut source = source::open(args.file.as_deref(), args.format)?;
    let format = source.format(args.format)?;
    if let Some(kind) = args.native {
        let keep = match (args.keep, args.keep_turns) {
            (Some(tokens), None) => Keep::Tokens(tokens),
            (None, Some(turns)) => Keep::Turns(usize::try_from(turns).unwrap_or(usize::MAX)),
            _ => return Err("--for needs --keep TOKENS or --keep-turns N".to_owned()),
        };
        let counter = args.tokenizer.counter()?;
        let loaded = source.load(format, Records::Judged(&args.input), counter.as_ref())?;
        return match loaded
            .native_cut(kind, keep)
            .map_err(|e| format!("--for {kind} needs a provider format; {e}"))?
        {
            Ok(c) => Ok(Ok(c.cut)),
            Err(e @ format::NativeCutError::NoCut { .. }) => Ok(Err(Refused::NoCut(e.to_string()))),
            Err(e) => Err(e.to_string()),
        };
    }
    let (Some(target), Some(lookback)) = (args.target, args.lookback) else {
        return Err("cut needs --target and --lookback (or --for)".to_owned());
    };
    let counter = args.tokenizer.counter()?;
    let loaded = source.load(format, Records::Judged(&args.input), counter.as_ref())?;
    Ok(loaded
        .select_cut(target, lookback)
        .map_err(|e| e.to_string())?
        .map_err(Refused::Deferred))
}
