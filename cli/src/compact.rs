//! `cutpoint compact`: replace the region before the legal cut nearest the target by
//! one summary and print the compacted log, in the input's format.

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::json;

use cutpoint::compact::pipeline::Choice;
use cutpoint::compact::strategy::Kind;
use cutpoint::compact::{ArgumentPolicy, Direction, Unit, Window};
use cutpoint::format::loaded::{SummarizeError, SummaryCount, SummaryOptions, ThinkingStep};
use cutpoint::format::{ByteEstimate, EditError, Loaded, RewriteError};

use crate::exit;
use crate::guard::InputOptions;
use crate::source::{self, FormatArg, Records};
use cutpoint::format::CalibratedBudget;

/// Arguments of `cutpoint compact`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Tokens to compact, counted from the start of the log (head included).
    #[arg(
        long,
        value_name = "TOKENS",
        required_unless_present_any = ["keep", "strategy", "budget"],
        conflicts_with_all = ["keep", "strategy", "budget"]
    )]
    target: Option<u64>,
    /// Keep the most recent TOKENS verbatim instead: the target is the log's tokens
    /// minus TOKENS (the live history's, for the provider formats), and the walk back
    /// from it keeps at least that much.
    #[arg(long, value_name = "TOKENS", conflicts_with_all = ["strategy", "budget"])]
    keep: Option<u64>,
    /// How far the cut may move from the target, in tokens [default: 15% of the
    /// target]. Walking back, the walk starts at the record where the target is
    /// reached and counts that record's own tokens first, then each record before it,
    /// while the sum stays within TOKENS; with --forward, the cut may compact at most
    /// TOKENS more than the target.
    #[arg(long, value_name = "TOKENS")]
    lookback: Option<u64>,
    /// Records pinned at the front (system prompt, first user message); messages for
    /// the provider formats.
    #[arg(long, value_name = "N", default_value_t = 0)]
    keep_head: usize,
    /// Move forward to the nearest legal cut past the target instead of walking back
    /// (always, with --budget and no --strategy).
    #[arg(long)]
    forward: bool,
    /// Prose for the summary (its ledger always lists every covered pair).
    #[arg(long, value_name = "TEXT")]
    summary: Option<String>,
    /// Tokens to count for the summary record [default: about a quarter of its bytes]
    /// (records JSONL only: a provider format's summary message is counted as written;
    /// refused there, and with a --strategy other than summarize).
    #[arg(long, value_name = "TOKENS")]
    summary_tokens: Option<u64>,
    /// Cut string argument fields longer than this (never commands, paths, queries) in
    /// the summary's ledger, in every format; a later compaction carries them on as
    /// written. One summary only (--target, --keep, --budget, --strategy summarize):
    /// refused with another --strategy, whose ledgers keep arguments verbatim.
    #[arg(long, value_name = "CHARS")]
    shorten_arguments: Option<usize>,
    /// Input format: auto, records, anthropic, openai-chat, openai-responses, gemini,
    /// claude-code, codex or gemini-cli. The provider formats keep their shape: the pinned head (in
    /// messages) verbatim, one summary message, the retained messages byte-identical.
    #[arg(long, value_name = "FORMAT", default_value = "auto", value_parser = source::parse_format)]
    format: FormatArg,
    #[command(flatten)]
    input: InputOptions,
    #[command(flatten)]
    strategy: crate::strategy::StrategyArgs,
    /// The log to read; `-` or nothing reads stdin.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

impl Args {
    /// The flags of the one summary route (a window, a summary count) that another
    /// `--strategy` does not read, refused by name rather than ignored. **O(1)**.
    fn one_summary_flags(&self, strategy: &'static str) -> Result<(), String> {
        let given = [
            ("--lookback", self.lookback.is_some()),
            ("--forward", self.forward),
            ("--shorten-arguments", self.shorten_arguments.is_some()),
            ("--summary-tokens", self.summary_tokens.is_some()),
        ];
        match given.iter().find(|(_, on)| *on) {
            Some((flag, _)) => Err(format!(
                "cutpoint: {flag} applies to one summary (--target, --keep, --budget or --strategy summarize), not to --strategy {strategy}"
            )),
            None => Ok(()),
        }
    }

    /// The compaction window the flags describe for a log of `total` tokens
    /// (`keep_head` in records).
    fn window(&self, total: u64) -> Window {
        let target = match (self.target, self.keep) {
            (Some(target), _) => target,
            (None, keep) => total.saturating_sub(keep.unwrap_or(0)),
        };
        let mut window = Window::new(target).keep_head(self.keep_head);
        if let Some(lookback) = self.lookback {
            window = window.lookback(lookback);
        }
        if self.forward {
            window = window.direction(Direction::Forward);
        }
        if let Some(max_chars) = self.shorten_arguments {
            window = window.arguments(ArgumentPolicy::Shorten { max_chars });
        }
        window
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let mut source = match source::open(args.file.as_deref(), args.format) {
        Ok(s) => s,
        Err(e) => return exit::bad_input(&e),
    };
    match (source.format(args.format), args.strategy.strategy) {
        (Err(e), _) => exit::bad_input(&e),
        // `summarize` means one thing everywhere: one summary within the budget
        // (`Loaded::summarize`), as with `--budget` and no strategy, and as Python's
        // `strategy="summarize"`; the pipelines' summarize stage runs in their presets.
        (Ok(format), Some(Choice::One(Kind::Summarize))) => {
            if let Err(why) = args.strategy.summarize_flags() {
                return exit::bad_input(&why);
            }
            let Some(budget) = args.strategy.budget_tokens() else {
                return exit::bad_input(
                    "cutpoint: --strategy summarize needs --budget or --context-window with --max-output (--target makes one summary at a target)",
                );
            };
            let name = source.name.clone();
            match source.load(format, Records::Judged(&args.input), &ByteEstimate) {
                Ok(loaded) => match args.strategy.calibrated(&loaded, &name) {
                    Ok(c) => compact(&name, &loaded, &args, Some(budget), c),
                    Err(code) => code,
                },
                Err(e) => exit::bad_input(&e),
            }
        }
        (Ok(format), Some(choice)) => match args
            .one_summary_flags(choice.name())
            .and_then(|()| args.strategy.stage_flags(choice, args.summary.is_some()))
        {
            Err(why) => exit::bad_input(&why),
            Ok(()) => crate::strategy::run(
                source,
                format,
                &args.strategy,
                choice,
                args.keep_head,
                args.summary.as_deref(),
                &args.input,
            ),
        },
        (Ok(format), None) => {
            if args.strategy.calibrated && args.strategy.budget.is_none() {
                return exit::bad_input(
                    "cutpoint: --calibrated reads a budget in the provider's tokens: give --budget (--target and --keep are in cutpoint's estimate)",
                );
            }
            let name = source.name.clone();
            match source.load(format, Records::Judged(&args.input), &ByteEstimate) {
                Ok(loaded) => match args.strategy.calibrated(&loaded, &name) {
                    Ok(c) => compact(&name, &loaded, &args, args.strategy.budget, c),
                    Err(code) => code,
                },
                Err(e) => exit::bad_input(&e),
            }
        }
    }
}

/// One summary at the target, or with a `budget` (`--budget`, or `--strategy summarize`
/// with `--budget` or `--context-window`) the one that brings the log within it
/// ([`Loaded::summarize`], Python's `summarize` too), the log printed in its format:
/// records JSONL with the summary's units as `covers`; the provider formats with the
/// pinned head (in messages) verbatim, one summary message, the retained messages
/// byte-identical. With `--report`, one JSON line on stderr says what was done.
/// `calibrated` (`--calibrated`) puts the budget in the estimate's units.
fn compact(
    name: &str,
    loaded: &Loaded<'_>,
    args: &Args,
    budget: Option<u64>,
    calibrated: Option<CalibratedBudget>,
) -> ExitCode {
    if args.summary_tokens.is_some() && !loaded.takes_summary_count() {
        return exit::bad_input(&format!(
            "cutpoint: {name}: --summary-tokens applies to records JSONL: a {} summary message is counted as it is written",
            loaded.format()
        ));
    }
    let budget = calibrated.as_ref().map_or(budget, |c| Some(c.estimate));
    let budget_reported = calibrated.as_ref().map(|c| c.reported);
    let fixed = args.summary_tokens.map(|n| move |_: &[Unit]| n);
    let count = fixed.as_ref().map(|f| f as SummaryCount<'_>);
    let report = |line: serde_json::Value| {
        if args.strategy.report {
            eprintln!("{line}");
        }
    };
    let opts = match budget {
        Some(budget) => {
            // The cut moves forward from the target the budget asks for, as far as
            // it must.
            let mut window = args.window(0).direction(Direction::Forward);
            window.lookback_tokens = Some(args.lookback.unwrap_or(u64::MAX));
            SummaryOptions::within(budget, window)
        }
        None => SummaryOptions::at(args.window(loaded.live_tokens())),
    }
    .keep_head(args.keep_head)
    .summary(args.summary.as_deref())
    .summary_tokens(count)
    .keep_thinking_valid(!args.strategy.allow_invalidated_thinking);
    let done = match loaded.summarize(&opts, &ByteEstimate) {
        Ok(Some(done)) => done,
        Ok(None) => {
            let before = loaded.live_tokens();
            let budget = opts.budget.unwrap_or_default();
            report(json!({
                "strategy": "summarize",
                "outcome": if before <= budget { "within-budget" } else { "no-progress" },
                "budget": budget,
                "budget_reported": budget_reported,
                "tokens_before": before,
                "tokens_after": before,
                "met_budget": before <= budget,
            }));
            if before <= budget {
                eprintln!(
                    "cutpoint: within budget already ({before} <= {budget} tokens): the log is unchanged"
                );
                let _ = io::stdout().lock().write_all(loaded.text().as_bytes());
                return ExitCode::SUCCESS;
            }
            eprintln!(
                "cutpoint: over budget: {before} tokens, the budget is {budget}, and no summary makes the log smaller"
            );
            return ExitCode::from(exit::DEFER);
        }
        Err(SummarizeError::Rewrite(RewriteError::Deferred(report))) => {
            eprintln!("cutpoint: deferred: {report}");
            return ExitCode::from(exit::DEFER);
        }
        Err(SummarizeError::Rewrite(RewriteError::Plan(why))) => {
            eprintln!("cutpoint: deferred: {why}");
            return ExitCode::from(exit::DEFER);
        }
        Err(SummarizeError::Thinking(e @ EditError::ThinkingBound { .. })) => {
            eprintln!("cutpoint: {name}: {e}");
            return ExitCode::from(exit::DEFER);
        }
        Err(e) => return exit::bad_input(&format!("{name}: {e}")),
    };
    crate::strategy::warn_invalidated(&done.invalidated);
    let met = opts.budget.is_none_or(|b| done.tokens_after <= b);
    let simple = done.thinking == ThinkingStep::Simple;
    report(json!({
        "strategy": "summarize",
        "outcome": "ran",
        "budget": opts.budget,
        "budget_reported": budget_reported,
        "tokens_before": done.tokens_before,
        "tokens_after": done.tokens_after,
        "met_budget": met,
        "passes": done.passes,
        "summarized_calls": done.summary.ledger.len(),
        "head": (!simple).then_some(done.summary.head),
        "cut": (!simple).then_some(done.summary.cut),
        "invalidated_thinking": done.invalidated.len(),
        "simple_compaction": simple,
        "thinking_stripped": done.thinking == ThinkingStep::Stripped,
    }));
    if let Some(budget) = opts.budget {
        if done.tokens_after > budget {
            eprintln!(
                "cutpoint: over budget: {} tokens left, the budget is {budget} (the best of {} summaries)",
                done.tokens_after, done.passes
            );
            return ExitCode::from(exit::DEFER);
        }
    }
    if simple {
        crate::strategy::note_simple();
    } else {
        eprintln!("cutpoint: {}", done.done);
    }
    // A closed stdout (`| head`) is not worth a panic.
    let _ = io::stdout().lock().write_all(done.summary.text.as_bytes());
    ExitCode::SUCCESS
}
