//! `cutpoint compact --strategy ...`: one compaction strategy, or a pipeline of them,
//! run towards a token budget, the log printed in the input's format; `--report`
//! prints a JSON line per step on stderr.

use std::io::{self, BufWriter, Write};
use std::process::ExitCode;

use cutpoint::compact::pipeline::{Pipeline, PipelineReport, Preset, Progress, Step};
use cutpoint::compact::strategy::{
    Clear, ClearInputs, ClearThinking, Digest, Floors, Kind, NoProgress, Prose, Slide, Strategy,
    Summarize, SummaryRequest, Truncate,
};
use cutpoint::format::edit;
use cutpoint::format::records::write_entry;
use cutpoint::format::{ByteEstimate, Format};
use serde_json::{Value, json};

use crate::exit;
use crate::guard::InputOptions;
use crate::source::Source;

/// `--strategy`: a strategy's name or `pipeline`.
pub(crate) fn parse_strategy(name: &str) -> Result<Choice, String> {
    if name == "pipeline" {
        return Ok(Choice::Pipeline);
    }
    Kind::from_name(name).map(Choice::One).ok_or_else(|| {
        format!(
            "unknown strategy {name:?}; one of: {}, pipeline",
            Kind::ALL.map(Kind::name).join(", ")
        )
    })
}

/// What `--strategy` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Choice {
    /// One strategy.
    One(Kind),
    /// The pipeline of `--preset`.
    Pipeline,
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
    /// (each old tool group becomes one ledger message), summarize (the oldest region
    /// becomes one summary), slide (whole oldest turns go, their calls in a ledger),
    /// truncate (the oldest region goes, its calls named: the last resort), or
    /// pipeline (the --preset's strategies in order).
    #[arg(long, value_name = "STRATEGY", value_parser = parse_strategy)]
    pub(crate) strategy: Option<Choice>,
    /// Tokens the log must fit in. Exit 3 when it cannot without breaking a rule or a
    /// floor [default with --context-window: the window less --max-output].
    #[arg(long, value_name = "TOKENS", requires = "strategy")]
    budget: Option<u64>,
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
    /// Print a JSON report of each step on stderr.
    #[arg(long, requires = "strategy")]
    report: bool,
}

impl StrategyArgs {
    fn budget(&self) -> Option<u64> {
        self.budget.or_else(|| {
            self.context_window
                .zip(self.max_output)
                .map(|(w, m)| w.saturating_sub(m))
        })
    }

    fn clear(&self, base: Clear) -> Clear {
        let mut clear = base;
        if let Some(n) = self.keep_tool_uses {
            clear = clear.keep_tool_uses(n);
        }
        if let Some(t) = self.clear_at_least {
            clear = clear.clear_at_least(t);
        }
        if !self.exclude_tools.is_empty() {
            clear = clear.exclude_tools(self.exclude_tools.iter().cloned());
        }
        match self.clear_tool_inputs.as_deref() {
            None => clear,
            Some("") => clear.clear_inputs(ClearInputs::All),
            Some(list) => clear.clear_inputs(ClearInputs::Tools(
                list.split(',').map(str::to_owned).collect(),
            )),
        }
    }

    /// The strategy `kind` with the flags applied.
    fn strategy(&self, kind: Kind) -> Strategy {
        let turns = self.keep_turns;
        match kind {
            Kind::Clear => Strategy::Clear(self.clear(Clear::default())),
            Kind::ClearThinking => {
                Strategy::ClearThinking(turns.map_or_else(ClearThinking::default, |n| {
                    ClearThinking::default().keep_turns(n)
                }))
            }
            Kind::Digest => Strategy::Digest(Digest::default()),
            Kind::Slide => Strategy::Slide(
                turns.map_or_else(Slide::default, |n| Slide::default().keep_turns(n)),
            ),
            Kind::Truncate => Strategy::Truncate(Truncate::default()),
            _ => Strategy::Summarize(Summarize::default()),
        }
    }

    /// The pipeline the flags describe, floors from `keep_head` records.
    fn pipeline(&self, choice: Choice, keep_head: usize) -> Pipeline {
        let budget = self.budget();
        let mut pipeline = match choice {
            Choice::Pipeline => {
                let mut p = self
                    .preset
                    .unwrap_or(Preset::Balanced)
                    .pipeline(budget.unwrap_or(u64::MAX));
                for stage in &mut p.stages {
                    if let Strategy::Clear(c) = &stage.strategy {
                        stage.strategy = Strategy::Clear(self.clear(c.clone()));
                    } else if matches!(stage.strategy.kind(), Kind::Slide | Kind::ClearThinking)
                        && self.keep_turns.is_some()
                    {
                        stage.strategy = self.strategy(stage.strategy.kind());
                    }
                }
                p.budget = budget;
                p
            }
            Choice::One(kind) => Pipeline::one(self.strategy(kind), budget),
        };
        let mut floors = if choice == Choice::Pipeline {
            pipeline.floors
        } else {
            Floors::none()
        };
        floors.keep_head = floors.keep_head.max(keep_head);
        if let Some(n) = self.keep_turns {
            floors.min_turns = n;
        }
        pipeline.floors = floors;
        pipeline
    }
}

/// Runs the strategy flags on `source`: records JSONL through a [`Log`], the provider
/// formats through `format::edit`. `keep_head` counts records for records JSONL,
/// messages otherwise.
pub(crate) fn run(
    source: Source,
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
    if choice == Choice::Pipeline && args.budget().is_none() {
        return exit::bad_input(
            "cutpoint: --strategy pipeline needs --budget or --context-window with --max-output",
        );
    }
    if format == Format::Records {
        let mut log = match source.log(input) {
            Ok(log) => log,
            Err(message) => return exit::bad_input(&message),
        };
        let pipeline = args.pipeline(choice, keep_head);
        let report = pipeline.run_with(&mut log, &mut progress, &mut prose);
        return finish(args, &report, || {
            let mut out = BufWriter::new(io::stdout().lock());
            for entry in log.entries() {
                if write_entry(&mut out, entry).is_err() {
                    return;
                }
            }
            let _ = out.flush();
        });
    }
    let transcript = match source.transcript(format, &ByteEstimate) {
        Ok(t) => t,
        Err(e) => return exit::bad_input(&e),
    };
    let Ok(text) = source.text() else {
        return exit::bad_input(&format!("{name}: not UTF-8 text"));
    };
    // The pinned head counts messages of the live history here.
    let pipeline = args.pipeline(choice, 0);
    match edit::run(
        &transcript,
        text,
        &pipeline,
        keep_head,
        &mut progress,
        &mut prose,
        &ByteEstimate,
    ) {
        Ok(done) => finish(args, &done.report, || {
            let _ = io::stdout().lock().write_all(done.text.as_bytes());
        }),
        Err(e) => exit::bad_input(&format!("{name}: {e}")),
    }
}

/// Prints the report (JSON lines with `--report`, one line otherwise) and the log,
/// and picks the exit status: 3, with nothing on stdout, when the budget is not met.
fn finish(args: &StrategyArgs, report: &PipelineReport, print: impl FnOnce()) -> ExitCode {
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
        print();
        return ExitCode::SUCCESS;
    }
    // Each reason once, though several rounds may have met it.
    let mut why: Vec<String> = Vec::new();
    for reason in report.blocked().map(ToString::to_string) {
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
