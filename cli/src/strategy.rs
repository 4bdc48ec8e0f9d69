//! `cutpoint compact --strategy ...`: one compaction strategy, or a pipeline of them,
//! run towards a token budget, the log printed in the input's format; `--report`
//! prints a JSON line per step on stderr.

use std::io::{self, Write};
use std::process::ExitCode;

pub(crate) use cutpoint::compact::pipeline::Choice;
use cutpoint::compact::pipeline::{PipelineReport, Preset, Progress, Settings, Step};
use cutpoint::compact::strategy::{ClearInputs, Kind, NoProgress, Prose, SummaryRequest};
use cutpoint::format::{
    ByteEstimate, CalibrateError, CalibratedBudget, Format, Invalidated, Loaded,
};
use serde_json::{Value, json};

use crate::exit;
use crate::guard::InputOptions;
use crate::source::{Records, Source};

/// `--strategy`: a strategy's name or `pipeline`.
pub(crate) fn parse_strategy(name: &str) -> Result<Choice, String> {
    Choice::from_name(name).ok_or_else(|| {
        format!(
            "unknown strategy {name:?}; one of: {}, pipeline",
            Kind::ALL.map(Kind::name).join(", ")
        )
    })
}

/// `--preset`.
fn parse_preset(name: &str) -> Result<Preset, String> {
    Preset::from_name(name).ok_or_else(|| {
        format!(
            "unknown preset {name:?}; one of: {}",
            Preset::ALL.map(Preset::name).join(", ")
        )
    })
}

/// The strategy flags of `cutpoint compact`.
#[derive(clap::Args, Debug)]
pub(crate) struct StrategyArgs {
    /// Compact with a strategy instead of one summary at --target: clear (tool results
    /// become a placeholder), clear-thinking (thinking of finished turns goes), digest
    /// (each old tool group becomes one ledger message), summarize (one summary, its
    /// cut the nearest legal one that brings the log within the budget: as --budget
    /// alone, and Python's `summarize`), slide (whole oldest turns go, their calls in a ledger),
    /// truncate (the oldest region goes, its calls named: the last resort), or
    /// pipeline (the --preset's strategies in order).
    #[arg(long, value_name = "STRATEGY", value_parser = parse_strategy)]
    pub(crate) strategy: Option<Choice>,
    /// Tokens the log must fit in. Exit 3 when it cannot without breaking a rule or a
    /// floor [default with --context-window: the window less --max-output]. With no
    /// --strategy: one summary, its cut moved forward until the log fits (Python's
    /// `summarize` with a budget).
    #[arg(long, value_name = "TOKENS")]
    pub(crate) budget: Option<u64>,
    /// clear: the most recent tool uses kept whole [default: 3].
    #[arg(long, value_name = "N", requires = "strategy")]
    keep_tool_uses: Option<usize>,
    /// clear: clear at least this many tokens, or nothing at all.
    #[arg(long, value_name = "TOKENS", requires = "strategy")]
    clear_at_least: Option<u64>,
    /// clear: never clear the results of these tools.
    #[arg(long, value_name = "A,B", value_delimiter = ',', requires = "strategy")]
    exclude_tools: Vec<String>,
    /// clear: clear the cleared calls' inputs too (all tools, or the tools listed).
    #[arg(long, value_name = "A,B", num_args = 0..=1, default_missing_value = "", requires = "strategy")]
    clear_tool_inputs: Option<String>,
    /// The most recent user turns always kept (a floor for every strategy; slide and
    /// clear-thinking keep at least these).
    #[arg(long, value_name = "N", requires = "strategy")]
    keep_turns: Option<usize>,
    /// pipeline: gentle, balanced or aggressive [default: balanced].
    #[arg(long, value_name = "PRESET", value_parser = parse_preset, requires = "strategy")]
    preset: Option<Preset>,
    /// The model's context window, in tokens (the budget is the window less
    /// --max-output).
    #[arg(long, value_name = "N", requires_all = ["strategy", "max_output"])]
    context_window: Option<u64>,
    /// The most tokens the model may output.
    #[arg(long, value_name = "N", requires = "context_window")]
    max_output: Option<u64>,
    /// Keep every thinking block and reasoning item valid for its provider's prefix
    /// binding (Anthropic preserved thinking, OpenAI reasoning items), the default:
    /// strip those whose prefix the compaction changed; where that would take the
    /// current turn's or the latest assistant message's thinking, write a simple
    /// compaction instead (the whole history in one summary, the next instruction
    /// kept); exit 3 when a call is still in flight. With --target or a strategy.
    #[arg(long, conflicts_with = "allow_invalidated_thinking")]
    pub(crate) keep_thinking_valid: bool,
    /// Write the output as the compaction made it, even where it invalidates
    /// thinking bound to its prefix (for a caller that sends it with Anthropic's
    /// `drop_block`, or to a provider that does not check): a warning on stderr says
    /// how many blocks.
    #[arg(long)]
    pub(crate) allow_invalidated_thinking: bool,
    /// Read the budget (--budget, or --context-window less --max-output) in the
    /// provider's reported tokens: the session's fit of cutpoint's estimate to the
    /// input tokens the file reports (`cutpoint stats`' `estimate_calibration`: the
    /// system prompt and tools as an overhead, the tokenizer as a scale) turns it into
    /// the estimate's units. Claude Code, Codex and Gemini CLI files that report
    /// usage; exit 2 for a file that reports none, 3 when the overhead alone is over
    /// the budget.
    #[arg(long)]
    pub(crate) calibrated: bool,
    /// Print a JSON report of each step on stderr.
    #[arg(long, requires = "strategy")]
    pub(crate) report: bool,
}

impl StrategyArgs {
    /// The budget the flags give: `--budget`, or `--context-window` less
    /// `--max-output`. **O(1)**.
    pub(crate) fn budget_tokens(&self) -> Option<u64> {
        self.settings().budget()
    }

    /// `--strategy summarize` is one summary within the budget (as Python's
    /// `strategy="summarize"`): `--keep-turns`, a floor it has no way to keep, is
    /// refused. **O(1)**.
    pub(crate) fn summarize_flags(&self) -> Result<(), String> {
        // A floor it cannot keep is refused, not ignored; so are the options of the
        // strategies it does not run (clear's, a pipeline's preset).
        if self.keep_turns.is_some() {
            return Err("cutpoint: --keep-turns does not apply to --strategy summarize (one summary within the budget: --keep-head pins messages at the front, and the cut is the nearest legal one that meets the budget)".to_owned());
        }
        // What the one summary route reads, for the message.
        const TAKES: [&str; 11] = [
            "budget",
            "keep_head",
            "lookback",
            "forward",
            "summary",
            "summary_tokens",
            "shorten_arguments",
            "context_window",
            "max_output",
            "keep_thinking_valid",
            "calibrated",
        ];
        self.unread("summarize", &TAKES, false)
    }

    /// The options of the strategies (clear's, a pipeline's preset and summary
    /// prose; `summary`: whether `--summary` was given) that `choice` does not read
    /// ([`Choice::options`], the Python binding's table too), refused by name rather
    /// than ignored. **O(1)**.
    pub(crate) fn stage_flags(&self, choice: Choice, summary: bool) -> Result<(), String> {
        self.unread(choice.name(), choice.options(), summary)
    }

    /// The first of the strategies' own options given and not in `takes`.
    fn unread(&self, strategy: &str, takes: &[&str], summary: bool) -> Result<(), String> {
        let given = [
            ("keep_tool_uses", self.keep_tool_uses.is_some()),
            ("clear_at_least", self.clear_at_least.is_some()),
            ("exclude_tools", !self.exclude_tools.is_empty()),
            ("clear_tool_inputs", self.clear_tool_inputs.is_some()),
            ("preset", self.preset.is_some()),
            ("summary", summary),
        ];
        let flag = |option: &str| format!("--{}", option.replace('_', "-"));
        match given
            .iter()
            .find(|(option, on)| *on && !takes.contains(option))
        {
            None => Ok(()),
            Some((option, _)) => Err(format!(
                "cutpoint: --strategy {strategy} takes no {}; its options: {}",
                flag(option),
                takes.iter().map(|o| flag(o)).collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// With `--calibrated`, the budget in the estimate's units
    /// ([`Loaded::calibrated_budget`]), said on stderr (a JSON line with `--report`);
    /// `Ok(None)` without it. `Err` is the exit status, its reason printed: 2 with no
    /// budget or no usage in the file, 3 when the session's overhead alone is over the
    /// budget. **O(len + messages)**.
    pub(crate) fn calibrated(
        &self,
        loaded: &Loaded<'_>,
        name: &str,
    ) -> Result<Option<CalibratedBudget>, ExitCode> {
        if !self.calibrated {
            return Ok(None);
        }
        let Some(reported) = self.budget_tokens() else {
            return Err(exit::bad_input(
                "cutpoint: --calibrated reads a budget in the provider's tokens: give --budget, or --context-window with --max-output",
            ));
        };
        match loaded.calibrated_budget(reported) {
            Ok(c) => {
                if self.report {
                    eprintln!("{}", json!({ "calibration": calibration_json(&c) }));
                }
                eprintln!(
                    "cutpoint: calibrated: a budget of {reported} reported tokens is {} estimated (reported ≈ {:.0} + {:.3} × estimated, {} usage points)",
                    c.estimate, c.fit.overhead, c.fit.scale, c.fit.points
                );
                Ok(Some(c))
            }
            Err(e @ CalibrateError::NoUsage { .. }) => Err(exit::bad_input(&format!(
                "cutpoint: {name}: --calibrated: {e}"
            ))),
            Err(e) => {
                eprintln!("cutpoint: {name}: {e}");
                Err(ExitCode::from(exit::DEFER))
            }
        }
    }

    /// The flags as the library's settings. **O(excluded tools)**.
    fn settings(&self) -> Settings {
        let mut s = Settings::new();
        s.budget = self.budget;
        s.context_window = self.context_window;
        s.max_output = self.max_output;
        s.keep_tool_uses = self.keep_tool_uses;
        s.clear_at_least = self.clear_at_least;
        s.exclude_tools.clone_from(&self.exclude_tools);
        s.clear_inputs = self.clear_tool_inputs.as_deref().map(|list| match list {
            "" => ClearInputs::All,
            list => ClearInputs::Tools(list.split(',').map(str::to_owned).collect()),
        });
        s.keep_turns = self.keep_turns;
        s.preset = self.preset;
        // On unless the caller allows invalidated thinking (the flag says the default).
        s.keep_thinking_valid = self.keep_thinking_valid || !self.allow_invalidated_thinking;
        s
    }
}

/// A calibrated budget as the reports print it. **O(1)**.
pub(crate) fn calibration_json(c: &CalibratedBudget) -> Value {
    json!({
        "points": c.fit.points,
        "scale": c.fit.scale,
        "overhead": c.fit.overhead,
        "budget_reported": c.reported,
        "budget_estimate": c.estimate,
    })
}

/// Runs the strategy flags on `source` ([`Loaded::run`](cutpoint::format::Loaded::run)):
/// records JSONL on its log, the provider formats through `format::edit`.
/// `keep_head` counts records for records JSONL, messages of the live history
/// otherwise.
pub(crate) fn run(
    mut source: Source,
    format: Format,
    args: &StrategyArgs,
    choice: Choice,
    keep_head: usize,
    summary: Option<&str>,
    input: &InputOptions,
) -> ExitCode {
    // `--summary` is the prose of the summarize stages; their ledger is kept either way.
    let mut prose = |_: &SummaryRequest<'_>| summary.map_or_else(Prose::none, Prose::text);
    let mut progress = Progress::new();
    let name = source.name.clone();
    if choice == Choice::Pipeline && args.settings().budget().is_none() {
        return exit::bad_input(
            "cutpoint: --strategy pipeline needs --budget or --context-window with --max-output",
        );
    }
    let loaded = match source.load(format, Records::Judged(input), &ByteEstimate) {
        Ok(loaded) => loaded,
        Err(e) => return exit::bad_input(&e),
    };
    let mut settings = args.settings();
    match args.calibrated(&loaded, &name) {
        Ok(Some(c)) => {
            settings.budget = Some(c.estimate);
            settings.context_window = None;
        }
        Ok(None) => {}
        Err(code) => return code,
    }
    let pipeline = settings.pipeline(choice, 0);
    match loaded.run(
        &pipeline,
        keep_head,
        &mut progress,
        &mut prose,
        &ByteEstimate,
    ) {
        Ok(done) => finish(args, &done.report, &done.invalidated, done.simple, || {
            let mut out = io::stdout().lock();
            // A closed stdout (`| head`) is not worth a panic.
            let _ = out.write_all(done.text.as_bytes());
            let _ = out.flush();
        }),
        Err(e @ cutpoint::format::EditError::ThinkingBound { .. }) => {
            eprintln!("cutpoint: {name}: {e}");
            ExitCode::from(exit::DEFER)
        }
        Err(e) => exit::bad_input(&format!("{name}: {e}")),
    }
}

/// Prints the report (JSON lines with `--report`, one line otherwise) and the log,
/// and picks the exit status: 3, with nothing on stdout, when the budget is not met.
///
/// An output that invalidates thinking or reasoning for its provider's prefix binding
/// is said so on stderr (`invalidated_thinking` in the `--report` line), with the
/// first such block: the provider refuses it, or drops it silently.
fn finish(
    args: &StrategyArgs,
    report: &PipelineReport,
    invalidated: &[Invalidated],
    simple: bool,
    print: impl FnOnce(),
) -> ExitCode {
    if report.was_within_budget() {
        if args.report {
            eprintln!(
                "{}",
                json!({
                    "outcome": "within-budget",
                    "budget": report.budget,
                    "tokens_before": report.tokens_before,
                    "tokens_after": report.tokens_after,
                    "met_budget": true,
                })
            );
        } else {
            eprintln!(
                "cutpoint: within budget already ({} <= {} tokens): the log is unchanged",
                report.tokens_before,
                report.budget.unwrap_or(0)
            );
        }
        print();
        return ExitCode::SUCCESS;
    }
    if simple {
        note_simple();
    }
    if args.report {
        let mut err = io::stderr().lock();
        for step in &report.steps {
            let _ = writeln!(err, "{}", step_json(step));
        }
        let _ = writeln!(
            err,
            "{}",
            json!({
                "budget": report.budget,
                "tokens_before": report.tokens_before,
                "tokens_after": report.tokens_after,
                "met_budget": report.met_budget(),
                "invalidated_thinking": invalidated.len(),
                "simple_compaction": simple,
            })
        );
    } else {
        for step in &report.steps {
            match step {
                Step::Ran(r) if !r.edits.is_empty() => eprintln!(
                    "cutpoint: {}: {} -> {} tokens ({} edits)",
                    r.kind,
                    r.tokens_before,
                    r.tokens_after,
                    r.edits.len()
                ),
                Step::NoProgress(n) => eprintln!("cutpoint: {n}"),
                _ => {}
            }
        }
    }
    if report.met_budget() {
        warn_invalidated(invalidated);
        print();
        return ExitCode::SUCCESS;
    }
    // Each reason once, though several rounds may have met it: a stage that made
    // no progress says why; one that ran and stopped short of its target, what it
    // left alone (or that nothing more was eligible).
    let mut why: Vec<String> = Vec::new();
    let short = report
        .ran()
        .filter(|r| !r.met_target && !r.edits.is_empty());
    let reasons = short
        .map(|r| {
            if r.left_alone.is_empty() {
                format!("{}: stopped short, nothing more eligible", r.kind)
            } else {
                format!("{}: stopped short, left alone {}", r.kind, r.left_alone)
            }
        })
        .chain(report.blocked().map(ToString::to_string));
    for reason in reasons {
        if !why.contains(&reason) {
            why.push(reason);
        }
    }
    eprintln!(
        "cutpoint: over budget: {} tokens left, the budget is {}{}",
        report.tokens_after,
        report.budget.unwrap_or(0),
        if why.is_empty() {
            String::new()
        } else {
            format!(" ({})", why.join("; "))
        }
    );
    ExitCode::from(exit::DEFER)
}

/// Says on stderr that the output is a simple compaction, and why.
pub(crate) fn note_simple() {
    eprintln!(
        "cutpoint: the compaction would have changed the prefix of thinking that must go back as it was (the current turn's, or the latest assistant message's), so the output is a simple compaction instead: the whole history past the pinned head in one summary, every call in its ledger, the next instruction kept if the log ends on one (--allow-invalidated-thinking writes the compaction as it was)"
    );
}

/// Says on stderr that a printed output invalidates thinking or reasoning bound to
/// its prefix, naming the first such block. Nothing when there is none.
pub(crate) fn warn_invalidated(invalidated: &[Invalidated]) {
    let Some(first) = invalidated.first() else {
        return;
    };
    eprintln!(
        "cutpoint: warning: the output invalidates {} thinking block(s) or reasoning item(s) bound to their prefix (the first on line {}, message {}{}): the provider refuses them or drops them (written so because of --allow-invalidated-thinking)",
        invalidated.len(),
        first.line,
        first.message,
        first
            .changed_at
            .map(|m| format!(", whose prefix changed at message {m}"))
            .unwrap_or_default()
    );
}

fn left_alone(r: &cutpoint::compact::strategy::LeftAlone) -> Value {
    Value::Object(
        r.iter()
            .map(|(why, n)| (why.name().to_owned(), n.into()))
            .collect(),
    )
}

fn no_progress(n: &NoProgress) -> Value {
    json!({
        "strategy": n.kind.name(),
        "outcome": "no-progress",
        "reason": n.reason.name(),
        "detail": n.reason.to_string(),
        "tokens": n.tokens,
        "left_alone": left_alone(&n.left_alone),
    })
}

/// One step as a JSON object.
fn step_json(step: &Step) -> Value {
    match step {
        Step::Ran(r) => json!({
            "strategy": r.kind.name(),
            "outcome": "ran",
            "tokens_before": r.tokens_before,
            "tokens_after": r.tokens_after,
            "records_before": r.records_before,
            "records_after": r.records_after,
            "cleared_results": r.cleared_results,
            "cleared_inputs": r.cleared_inputs,
            "cleared_thinking": r.cleared_thinking,
            "invalidated_thinking": r.invalidated_thinking,
            "summaries": r.summaries,
            "summarized_calls": r.summarized_calls,
            "dropped_turns": r.dropped_turns,
            "dropped_calls": r.dropped_calls.iter().map(|id| id.as_str()).collect::<Vec<_>>(),
            "met_target": r.met_target,
            "left_alone": left_alone(&r.left_alone),
        }),
        Step::NoProgress(n) => no_progress(n),
        Step::NotTriggered(k) => json!({"strategy": k.name(), "outcome": "not-triggered"}),
        Step::Stalled(k) => json!({"strategy": k.name(), "outcome": "stalled"}),
        other => json!({"strategy": other.kind().name(), "outcome": "other"}),
    }
}
