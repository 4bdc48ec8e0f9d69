//! `compact` with the library's strategies other than the one-summary `summarize`:
//! `clear`, `clear-thinking`, `digest`, `slide`, `truncate`, or a preset `pipeline`.
//! Each runs as a [`Pipeline`] (one stage toward the budget, or the preset's stages)
//! by the library's one driver (`format::Loaded::run`): on records JSONL through a
//! `compact::Log`, on every other format through `format::edit::run`, which writes
//! the result back in the input's format. The options and the step reports mirror the CLI's `compact --strategy` flags and its
//! `--report` lines (`cli/src/strategy.rs`), so both say the same things.

use cutpoint::compact::pipeline::{Pipeline, PipelineReport, Preset, Progress, Settings, Step};
use cutpoint::compact::strategy::{
    CLEARED_RESULT_TEXT, ClearInputs, LeftAlone, NoProgress, Prose, SummaryRequest,
};
use cutpoint::format::{CalibratedBudget, Format};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList};

use crate::errors;
use crate::formats::{Counter, calibrated_budget, flag, load};

pub(crate) use cutpoint::compact::pipeline::Choice;

/// The options of the strategies, named as the CLI's flags are (`--keep-tool-uses`
/// is `keep_tool_uses`, ...).
#[derive(Default)]
pub(crate) struct Options {
    budget: Option<u64>,
    /// The budget is in the provider's reported tokens (the CLI's `--calibrated`).
    pub(crate) calibrated: bool,
    keep_head: usize,
    keep_turns: Option<usize>,
    preset: Option<Preset>,
    keep_tool_uses: Option<usize>,
    clear_at_least: Option<u64>,
    exclude_tools: Vec<String>,
    clear_inputs: Option<ClearInputs>,
    summary: Option<String>,
    context_window: Option<u64>,
    max_output: Option<u64>,
    keep_thinking_valid: bool,
}

/// A non-negative integer option: a `TypeError` for a value that is not an int, a
/// `ValueError` for a negative or too large one. **O(1)**.
pub(crate) fn count<T: for<'a, 'py> FromPyObject<'a, 'py>>(
    key: &str,
    value: &Bound<'_, PyAny>,
) -> PyResult<T> {
    if !value.is_instance_of::<PyInt>() || value.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{key} must be an int, not {}",
            value.get_type().name()?
        )));
    }
    value.extract::<T>().map_err(|_| {
        PyValueError::new_err(format!(
            "{key} must be a non-negative integer that fits in 64 bits, not {value}"
        ))
    })
}

/// A list of tool names. **O(n)**.
fn names(key: &str, value: &Bound<'_, PyAny>) -> PyResult<Vec<String>> {
    if value.is_instance_of::<pyo3::types::PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{key} must be a list of tool names, not a str"
        )));
    }
    value
        .try_iter()
        .and_then(|items| {
            items
                .map(|i| i.and_then(|i| i.extract::<String>()))
                .collect()
        })
        .map_err(|_| PyTypeError::new_err(format!("{key} must be a list of tool names (str)")))
}

impl Options {
    /// Reads `options` for `choice` (`None` values are unset). **O(options)**.
    ///
    /// # Errors
    /// `TypeError` for an option `choice` does not take, a missing budget for a
    /// pipeline, or a value of the wrong type; `ValueError` for a bad value.
    pub(crate) fn from_dict(choice: Choice, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        // Keep-thinking-valid is on by default, as in the CLI and the library.
        let mut out = Options {
            keep_thinking_valid: true,
            ..Options::default()
        };
        for (key, value) in options.into_iter().flat_map(|o| o.iter()) {
            let key: String = key.extract()?;
            if !choice.options().contains(&key.as_str()) {
                return Err(PyTypeError::new_err(format!(
                    "strategy {:?} takes no option {key:?}; it takes: {}",
                    choice.name(),
                    choice.options().join(", ")
                )));
            }
            if value.is_none() {
                continue;
            }
            match key.as_str() {
                "budget" => out.budget = Some(count(&key, &value)?),
                "keep_head" => out.keep_head = count(&key, &value)?,
                "keep_turns" => out.keep_turns = Some(count(&key, &value)?),
                "keep_tool_uses" => out.keep_tool_uses = Some(count(&key, &value)?),
                "clear_at_least" => out.clear_at_least = Some(count(&key, &value)?),
                "context_window" => out.context_window = Some(count(&key, &value)?),
                "max_output" => out.max_output = Some(count(&key, &value)?),
                "exclude_tools" => out.exclude_tools = names(&key, &value)?,
                "clear_tool_inputs" => {
                    out.clear_inputs = Some(if value.is_instance_of::<PyBool>() {
                        if value.extract::<bool>()? {
                            ClearInputs::All
                        } else {
                            ClearInputs::None
                        }
                    } else {
                        ClearInputs::Tools(names(&key, &value)?)
                    });
                }
                "summary" => out.summary = Some(value.extract()?),
                "keep_thinking_valid" => out.keep_thinking_valid = flag(&key, &value)?,
                "calibrated" => out.calibrated = flag(&key, &value)?,
                "preset" => {
                    let name: String = value.extract()?;
                    out.preset = Some(Preset::from_name(&name).ok_or_else(|| {
                        PyValueError::new_err(format!(
                            "unknown preset {name:?}; one of: {}",
                            Preset::ALL.map(Preset::name).join(", ")
                        ))
                    })?);
                }
                other => {
                    return Err(PyTypeError::new_err(format!(
                        "strategy {:?} takes no option {other:?}",
                        choice.name()
                    )));
                }
            }
        }
        match (out.context_window, out.max_output) {
            (Some(_), None) => {
                return Err(PyTypeError::new_err(
                    "context_window needs max_output (the budget is the window less the output)",
                ));
            }
            (None, Some(_)) => {
                return Err(PyTypeError::new_err("max_output needs context_window"));
            }
            _ => {}
        }
        if out.calibrated && out.budget().is_none() {
            return Err(PyTypeError::new_err(
                "calibrated=True reads a budget in the provider's tokens: give budget= (or context_window= with max_output=)",
            ));
        }
        if choice == Choice::Pipeline && out.budget().is_none() {
            return Err(PyTypeError::new_err(
                "strategy \"pipeline\" needs budget= (or context_window= with max_output=)",
            ));
        }
        Ok(out)
    }

    /// The options as the library's settings. **O(excluded tools)**.
    fn settings(&self) -> Settings {
        let mut s = Settings::new();
        s.budget = self.budget;
        s.context_window = self.context_window;
        s.max_output = self.max_output;
        s.keep_tool_uses = self.keep_tool_uses;
        s.clear_at_least = self.clear_at_least;
        s.exclude_tools.clone_from(&self.exclude_tools);
        s.clear_inputs.clone_from(&self.clear_inputs);
        s.keep_turns = self.keep_turns;
        s.preset = self.preset;
        s.keep_thinking_valid = self.keep_thinking_valid;
        s
    }

    /// The budget: `budget`, else the context window less the output. **O(1)**.
    pub(crate) fn budget(&self) -> Option<u64> {
        self.settings().budget()
    }

    /// The pipeline the options describe (as the CLI's), floors from `keep_head`
    /// records, the clear placeholder counted by `counter` when the caller gave one.
    /// **O(stages)**.
    fn pipeline(
        &self,
        choice: Choice,
        keep_head: usize,
        counter: &Counter<'_>,
        calibrated: Option<&CalibratedBudget>,
    ) -> Pipeline {
        let mut settings = self.settings();
        if let Some(c) = calibrated {
            settings.budget = Some(c.estimate);
            settings.context_window = None;
        }
        settings.placeholder_tokens = counter.count(CLEARED_RESULT_TEXT);
        settings.pipeline(choice, keep_head)
    }
}

/// What a pipeline run came to.
pub(crate) struct Ran {
    /// The log after the run in the input's format, `None` when nothing was edited.
    pub(crate) text: Option<String>,
    /// The budget asked for (the report's may be lower: see [`run`]), in the
    /// estimate's units when it was calibrated.
    pub(crate) budget: Option<u64>,
    /// The calibrated budget, with `calibrated=True`.
    pub(crate) calibrated: Option<CalibratedBudget>,
    /// Tokens of the live history before the run, as `count_tokens` counts them.
    pub(crate) tokens_before: u64,
    /// Tokens after, as `count_tokens` counts the output: the records' own counts
    /// for records JSONL; for the other formats the output read back with the
    /// caller's counter (the report's steps count the text the strategies wrote by
    /// the library's estimate, so they can differ by that text's estimate error).
    pub(crate) tokens_after: u64,
    /// The run's report: the steps of every round.
    pub(crate) report: PipelineReport,
    /// How many times the pipeline ran (more than once when an output read back
    /// over the budget: [`format::edit::run`](cutpoint::format::edit::run)).
    pub(crate) rounds: usize,
    /// How many thinking blocks and reasoning items the output invalidates for their
    /// provider's prefix binding (`format::edit::Compacted::invalidated`).
    pub(crate) invalidated: usize,
    /// Whether the output is a simple compaction (`format::edit::Compacted::simple`).
    pub(crate) simple: bool,
}

impl Ran {
    /// Whether the output fits the budget (always, without one). **O(1)**.
    pub(crate) fn met_budget(&self) -> bool {
        self.budget.is_none_or(|b| self.tokens_after <= b)
    }
}

/// The summarize stages' prose: the `summary` option (counted by the caller's
/// counter when there is one), else none (the ledger alone).
fn prose<'a>(
    opts: &'a Options,
    counter: &Counter<'_>,
) -> impl FnMut(&SummaryRequest<'_>) -> Prose + 'a {
    let tokens = opts.summary.as_deref().and_then(|s| counter.count(s));
    move |_: &SummaryRequest<'_>| match &opts.summary {
        None => Prose::none(),
        Some(s) => {
            let mut p = Prose::text(s.clone());
            p.tokens = tokens;
            p
        }
    }
}

/// Whether a run edited anything. **O(steps)**.
fn edited(report: &PipelineReport) -> bool {
    report.ran().any(|r| !r.edits.is_empty())
}

/// Runs `choice` with `opts` on `text` (in `format`) by the library's one driver
/// ([`Loaded::run`](cutpoint::format::Loaded::run), as the CLI does): records JSONL
/// on its `compact::Log`, the other formats through `format::edit::run`, which
/// reads its output back with the caller's counter and runs again on it while it is
/// over the budget (at most `format::edit::MAX_ROUNDS` rounds). `keep_head` counts
/// records for records JSONL, messages otherwise. **O(len)** per round plus what the
/// stages cost.
pub(crate) fn run(
    py: Python<'_>,
    text: &str,
    format: Format,
    choice: Choice,
    opts: &Options,
    counter: &Counter<'_>,
) -> PyResult<Ran> {
    let loaded = load(py, text, format, counter)?;
    let calibrated = match opts.budget() {
        Some(reported) if opts.calibrated => Some(calibrated_budget(py, &loaded, reported)?),
        _ => None,
    };
    // The pinned head counts records or messages of the live history, in `run`.
    let pipeline = opts.pipeline(choice, 0, counter, calibrated.as_ref());
    let mut prose = prose(opts, counter);
    counter.take_error()?;
    let done = loaded.run(
        &pipeline,
        opts.keep_head,
        &mut Progress::new(),
        &mut prose,
        counter.get(),
    );
    counter.take_error()?;
    let done = done.map_err(|e| errors::edit(py, &e))?;
    let tokens_before = loaded.live_tokens();
    let edited = edited(&done.report);
    Ok(Ran {
        tokens_after: if edited {
            done.report.tokens_after
        } else {
            tokens_before
        },
        text: edited.then_some(done.text),
        budget: calibrated
            .as_ref()
            .map_or(opts.budget(), |c| Some(c.estimate)),
        calibrated,
        tokens_before,
        report: done.report,
        rounds: done.rounds,
        invalidated: if edited { done.invalidated.len() } else { 0 },
        simple: done.simple,
    })
}

fn left_alone<'py>(py: Python<'py>, r: &LeftAlone) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (why, n) in r.iter() {
        d.set_item(why.name(), n)?;
    }
    Ok(d)
}

fn no_progress<'py>(py: Python<'py>, n: &NoProgress) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("strategy", n.kind.name())?;
    d.set_item("outcome", "no-progress")?;
    d.set_item("reason", n.reason.name())?;
    d.set_item("detail", n.reason.to_string())?;
    d.set_item("tokens", n.tokens)?;
    d.set_item("left_alone", left_alone(py, &n.left_alone)?)?;
    Ok(d)
}

/// One step as a dict with the fields of the CLI's `--report` line. **O(fields +
/// dropped calls)**.
fn step<'py>(py: Python<'py>, step: &Step) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    match step {
        Step::Ran(r) => {
            d.set_item("strategy", r.kind.name())?;
            d.set_item("outcome", "ran")?;
            d.set_item("tokens_before", r.tokens_before)?;
            d.set_item("tokens_after", r.tokens_after)?;
            d.set_item("records_before", r.records_before)?;
            d.set_item("records_after", r.records_after)?;
            d.set_item("cleared_results", r.cleared_results)?;
            d.set_item("cleared_inputs", r.cleared_inputs)?;
            d.set_item("cleared_thinking", r.cleared_thinking)?;
            d.set_item("invalidated_thinking", r.invalidated_thinking)?;
            d.set_item("summaries", r.summaries)?;
            d.set_item("summarized_calls", r.summarized_calls)?;
            d.set_item("dropped_turns", r.dropped_turns)?;
            let dropped: Vec<&str> = r.dropped_calls.iter().map(|id| id.as_str()).collect();
            d.set_item("dropped_calls", dropped)?;
            d.set_item("met_target", r.met_target)?;
            d.set_item("left_alone", left_alone(py, &r.left_alone)?)?;
            Ok(d)
        }
        Step::NoProgress(n) => no_progress(py, n),
        Step::NotTriggered(k) => {
            d.set_item("strategy", k.name())?;
            d.set_item("outcome", "not-triggered")?;
            Ok(d)
        }
        Step::Stalled(k) => {
            d.set_item("strategy", k.name())?;
            d.set_item("outcome", "stalled")?;
            Ok(d)
        }
        other => {
            d.set_item("strategy", other.kind().name())?;
            d.set_item("outcome", "other")?;
            Ok(d)
        }
    }
}

/// The report's steps as a list of dicts. **O(steps)**.
pub(crate) fn steps<'py>(py: Python<'py>, report: &PipelineReport) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for s in &report.steps {
        list.append(step(py, s)?)?;
    }
    Ok(list)
}
