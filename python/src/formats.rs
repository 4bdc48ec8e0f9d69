//! Whole logs for Python: `check` (provider rules), `legal_cuts`, `detect`, and
//! `compact`, which dispatches on a strategy name. Logs arrive as the text the
//! library's readers take (the Python side serializes lists of dicts), and compacted
//! logs leave as text in the same format.

use std::cell::RefCell;

use cutpoint::compact::{
    ArgumentPolicy, Direction, Unit, Window, estimate_summary_tokens, summary_text,
};
use cutpoint::format::loaded::{
    SummarizeError, Summarized, SummaryCount, SummaryOptions, ThinkingStep,
};
use cutpoint::format::{
    self, ByteEstimate, CalibratedBudget, Format, Loaded, TokenCounter, Transcript,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::errors::{self, guarded};
use crate::strategies::{self, Choice, Options};

/// Every strategy `compact` knows, in the order the docs list them.
pub(crate) const STRATEGIES: [&str; 7] = [
    "clear",
    "clear-thinking",
    "digest",
    "summarize",
    "slide",
    "truncate",
    "pipeline",
];

/// The strategies this build implements: all of them.
pub(crate) const AVAILABLE: [&str; 7] = STRATEGIES;

/// The strategies `compact` can run.
enum Strategy {
    /// Replace the region between the pinned head and a legal cut by one summary
    /// message whose ledger keeps every covered pair (`format::rewrite::compact`;
    /// `compact::Log::plan` + `apply` for records), in passes toward a budget.
    Summarize,
    /// One of the library's other strategies, or a preset pipeline, run as a
    /// `compact::pipeline::Pipeline` (see `strategies`).
    Pipeline(Choice),
}

/// The strategy named `name`, or a `ValueError` naming them all. **O(1)**.
fn strategy(name: &str) -> PyResult<Strategy> {
    if name == "summarize" {
        return Ok(Strategy::Summarize);
    }
    Choice::from_name(name)
        .map(Strategy::Pipeline)
        .ok_or_else(|| {
            PyValueError::new_err(format!(
                "unknown strategy {name:?}; one of: {}",
                STRATEGIES.join(", ")
            ))
        })
}

/// The format named `name` (`auto`: told from `text`). **O(len)** for `auto`, else
/// **O(1)**.
fn format_of(py: Python<'_>, text: &str, name: &str) -> PyResult<Format> {
    if name == "auto" {
        // As the CLI judges it: input no format claims that may be records JSONL is
        // read as records, whose reader names the bad line.
        return format::detect_input(text.as_bytes()).map_err(|e| errors::format(py, &e));
    }
    Format::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!(
            "unknown format {name:?}; one of: auto, {}",
            Format::ALL.map(Format::name).join(", ")
        ))
    })
}

/// A Python callable `str -> int` as a token counter. The first error it raises (or a
/// result that is not a non-negative int) is kept and raised once the reader is done;
/// counts after it are 0.
pub(crate) struct PyCounter<'py> {
    count: Bound<'py, PyAny>,
    error: RefCell<Option<PyErr>>,
}

impl TokenCounter for PyCounter<'_> {
    fn count(&self, text: &str) -> u64 {
        if self.error.borrow().is_some() {
            return 0;
        }
        match self.count.call1((text,)).and_then(|n| n.extract::<u64>()) {
            Ok(n) => n,
            Err(e) => {
                *self.error.borrow_mut() = Some(e);
                0
            }
        }
    }
}

/// The counter to read with: the caller's, or the library's byte estimate.
pub(crate) enum Counter<'py> {
    Bytes(ByteEstimate),
    Python(PyCounter<'py>),
}

impl<'py> Counter<'py> {
    fn new(token_counter: Option<Bound<'py, PyAny>>) -> Self {
        match token_counter {
            None => Counter::Bytes(ByteEstimate),
            Some(count) => Counter::Python(PyCounter {
                count,
                error: RefCell::new(None),
            }),
        }
    }

    pub(crate) fn get(&self) -> &dyn TokenCounter {
        match self {
            Counter::Bytes(b) => b,
            Counter::Python(p) => p,
        }
    }

    /// The caller's count of `text`, `None` without a Python counter (the library
    /// then estimates it as it does for every text it writes). An error is kept for
    /// [`take_error`](Counter::take_error). **O(len)** plus the callable.
    pub(crate) fn count(&self, text: &str) -> Option<u64> {
        match self {
            Counter::Python(p) => Some(p.count(text)),
            Counter::Bytes(_) => None,
        }
    }

    /// The error the Python counter raised, if any. **O(1)**.
    pub(crate) fn take_error(&self) -> PyResult<()> {
        match self {
            Counter::Python(p) => p.error.borrow_mut().take().map_or(Ok(()), Err),
            Counter::Bytes(_) => Ok(()),
        }
    }
}

/// Reads `text` as `format` with `counter`, raising the counter's error first.
/// **O(len)**.
pub(crate) fn read(
    py: Python<'_>,
    text: &str,
    format: Format,
    counter: &Counter<'_>,
) -> PyResult<Transcript> {
    let t = format::read(text, format, counter.get());
    counter.take_error()?;
    t.map_err(|e| errors::format(py, &e))
}

/// Reads `text` as `format` for a job ([`Loaded::read`]): records JSONL into a
/// compaction log, any other format into a transcript counted with `counter`,
/// raising the counter's error first. **O(len)**.
pub(crate) fn load<'a>(
    py: Python<'_>,
    text: &'a str,
    format: Format,
    counter: &Counter<'_>,
) -> PyResult<Loaded<'a>> {
    let loaded = Loaded::read(text, format, counter.get());
    counter.take_error()?;
    loaded.map_err(|e| errors::load(py, &e))
}

/// One violation, as `check` reports it.
#[pyclass(frozen, eq, get_all, module = "cutpoint._native", name = "Violation")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyViolation {
    /// The rule's short name (`openai-chat/tool-call-without-response`, ...).
    rule: &'static str,
    /// Index of the message that breaks it (0-based, in log order).
    message: usize,
    /// 1-based line of the input where that message starts.
    line: usize,
    /// The call id concerned, if any.
    call_id: Option<String>,
    /// For an unanswered call: whether nothing but calls, results and reasoning follow
    /// it (still in flight at the very end of the log).
    pending_at_end: bool,
    /// The provider's error text for it.
    text: String,
    /// The library's one-line rendering (`LINE: rule: call_id text ...`).
    display: String,
}

#[pymethods]
impl PyViolation {
    fn __str__(&self) -> String {
        self.display.clone()
    }

    fn __repr__(&self) -> String {
        format!(
            "Violation(rule={:?}, message={}, line={}, call_id={}, pending_at_end={})",
            self.rule,
            self.message,
            self.line,
            self.call_id
                .as_deref()
                .map_or_else(|| "None".to_owned(), |c| format!("{c:?}")),
            if self.pending_at_end { "True" } else { "False" }
        )
    }
}

/// The name of the format `text` is in (`auto`'s answer). **O(len)** for a JSON
/// document, **O(sample)** for JSON lines.
#[pyfunction]
pub(crate) fn detect(py: Python<'_>, text: &str) -> PyResult<&'static str> {
    guarded(py, || {
        format::detect(text)
            .map(Format::name)
            .map_err(|e| errors::format(py, &e))
    })
}

/// The violations of the log `text` in `format`, in log order, as the CLI's
/// `check` finds them ([`Loaded::check`]): the provider's rules, or for records
/// JSONL the five conditions of safe compaction. **O(len)**.
#[pyfunction]
#[pyo3(signature = (text, format = "auto"))]
pub(crate) fn check(py: Python<'_>, text: &str, format: &str) -> PyResult<Vec<PyViolation>> {
    guarded(py, || {
        let format = format_of(py, text, format)?;
        let loaded =
            Loaded::read_unjudged(text, format, &ByteEstimate).map_err(|e| errors::load(py, &e))?;
        let checked = loaded
            .check(None, false)
            .map_err(|e| errors::cutpoint(py, e.to_string()))?;
        Ok(checked
            .violations
            .into_iter()
            .map(|v| PyViolation {
                rule: v.rule,
                message: v.at,
                line: v.line,
                call_id: v.call_id.as_ref().map(ToString::to_string),
                pending_at_end: v.pending_at_end,
                display: v.display,
                text: v.text,
            })
            .collect())
    })
}

/// The legal cuts of the log's live history, as message indices (records for the
/// records format), increasing. **O(len)**.
#[pyfunction]
#[pyo3(signature = (text, format = "auto"))]
pub(crate) fn legal_cuts(py: Python<'_>, text: &str, format: &str) -> PyResult<Vec<usize>> {
    guarded(py, || {
        let format = format_of(py, text, format)?;
        let t = read(py, text, format, &Counter::new(None))?;
        t.legal_message_cuts().map_err(|e| errors::append(py, &e))
    })
}

/// Tokens of the log's live history (after its last compaction boundary), counted
/// as `compact` counts them: with `token_counter` (`str -> int`, called once per
/// content block's JSON text), else the library's estimate of a token per 4 bytes.
/// **O(len)**.
#[pyfunction]
#[pyo3(signature = (text, format = "auto", token_counter = None))]
pub(crate) fn count_tokens<'py>(
    py: Python<'py>,
    text: &str,
    format: &str,
    token_counter: Option<Bound<'py, PyAny>>,
) -> PyResult<u64> {
    let counter = Counter::new(token_counter);
    guarded(py, || {
        let format = format_of(py, text, format)?;
        let t = read(py, text, format, &counter)?;
        Ok(live_tokens(&t))
    })
}

/// The options of the `summarize` strategy.
struct Summarize {
    /// Tokens the compacted log may hold at most (the live history).
    budget: Option<u64>,
    /// Tokens to compact, counted from the start (head included).
    target: Option<u64>,
    /// How far the cut may move from the target.
    lookback: Option<u64>,
    /// Messages (records, for the records format) pinned at the front.
    keep_head: usize,
    /// Prose that heads the summary's ledger (the CLI's `--summary`); by default the
    /// CLI's ([`Loaded::summarize`]'s): "Earlier conversation, compacted." on the
    /// provider formats, none for records JSONL.
    summary: Option<String>,
    /// Which way to move from the target.
    direction: Option<Direction>,
    /// Keep thinking valid for its provider's prefix binding (the CLI's default; its
    /// `--allow-invalidated-thinking` is `False`).
    keep_thinking_valid: bool,
    /// The budget is in the provider's reported tokens (the CLI's `--calibrated`).
    calibrated: bool,
    /// Tokens to count for the records summary (the CLI's `--summary-tokens`);
    /// refused on a provider format, whose summary message is counted as written.
    summary_tokens: Option<u64>,
    /// Cut string argument fields longer than this in the ledger (the CLI's
    /// `--shorten-arguments`).
    shorten_arguments: Option<usize>,
}

/// The options `summarize` takes, for the error that names an unknown one.
const SUMMARIZE_OPTIONS: &str = "budget, context_window, max_output, target, lookback, keep_head, summary, direction, keep_thinking_valid, calibrated, summary_tokens, shorten_arguments";

impl Summarize {
    /// Reads the options from `options` (`None` values are unset). **O(options)**.
    fn from_options(options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        let mut out = Summarize {
            budget: None,
            target: None,
            lookback: None,
            keep_head: 0,
            summary: None,
            direction: None,
            keep_thinking_valid: true,
            calibrated: false,
            summary_tokens: None,
            shorten_arguments: None,
        };
        let Some(options) = options else {
            return Ok(out);
        };
        // `budget`, else the context window less the output (as the CLI's and the
        // pipeline's).
        let (mut window, mut output) = (None::<u64>, None::<u64>);
        for (key, value) in options.iter() {
            let key: String = key.extract()?;
            if value.is_none() {
                continue;
            }
            match key.as_str() {
                "budget" => out.budget = Some(strategies::count(&key, &value)?),
                "target" => out.target = Some(strategies::count(&key, &value)?),
                "lookback" => out.lookback = Some(strategies::count(&key, &value)?),
                "keep_head" => out.keep_head = strategies::count(&key, &value)?,
                "summary" => out.summary = Some(value.extract()?),
                "keep_thinking_valid" => out.keep_thinking_valid = flag(&key, &value)?,
                "calibrated" => out.calibrated = flag(&key, &value)?,
                "context_window" => window = Some(strategies::count(&key, &value)?),
                "max_output" => output = Some(strategies::count(&key, &value)?),
                "summary_tokens" => out.summary_tokens = Some(strategies::count(&key, &value)?),
                "shorten_arguments" => {
                    out.shorten_arguments = Some(strategies::count(&key, &value)?)
                }
                "direction" => {
                    let name: String = value.extract()?;
                    out.direction = Some(match name.as_str() {
                        "back" => Direction::WalkBack,
                        "forward" => Direction::Forward,
                        other => {
                            return Err(PyValueError::new_err(format!(
                                "direction must be \"back\" or \"forward\", not {other:?}"
                            )));
                        }
                    });
                }
                other => {
                    return Err(PyTypeError::new_err(format!(
                        "strategy \"summarize\" takes no option {other:?}; it takes: {SUMMARIZE_OPTIONS}"
                    )));
                }
            }
        }
        match (window, output) {
            (Some(w), Some(o)) => out.budget = out.budget.or(Some(w.saturating_sub(o))),
            (Some(_), None) => {
                return Err(PyTypeError::new_err(
                    "context_window needs max_output (the budget is the window less the output)",
                ));
            }
            (None, Some(_)) => {
                return Err(PyTypeError::new_err("max_output needs context_window"));
            }
            (None, None) => {}
        }
        if out.calibrated && out.budget.is_none() {
            return Err(PyTypeError::new_err(
                "calibrated=True reads a budget in the provider's tokens: give budget= (or context_window= with max_output=; a target is in cutpoint's estimate)",
            ));
        }
        match (out.budget, out.target) {
            (None, None) => Err(PyTypeError::new_err(
                "strategy \"summarize\" needs budget= (tokens to keep at most; or context_window= with max_output=) or target= (tokens to compact)",
            )),
            (Some(_), Some(_)) => Err(PyTypeError::new_err(
                "strategy \"summarize\" takes budget= or target=, not both",
            )),
            _ => Ok(out),
        }
    }

    /// The window for a token target: with a budget, forward (compact at least the
    /// target) with no limit on how far unless a lookback is given; with a target,
    /// the library's defaults (walk back, 15% lookback). **O(1)**.
    fn window(&self, target: u64) -> Window {
        let budgeted = self.budget.is_some();
        let mut window = Window::new(target).direction(self.direction.unwrap_or(if budgeted {
            Direction::Forward
        } else {
            Direction::WalkBack
        }));
        match (self.lookback, budgeted) {
            (Some(l), _) => window = window.lookback(l),
            (None, true) => window = window.lookback(u64::MAX),
            (None, false) => {}
        }
        if let Some(max_chars) = self.shorten_arguments {
            window = window.arguments(ArgumentPolicy::Shorten { max_chars });
        }
        window
    }
}

/// What a compaction did, before it becomes a Python dict.
struct Outcome {
    /// The compacted log, or `None` when nothing changed.
    text: Option<String>,
    /// First summarized message (record), and first retained one.
    head: usize,
    cut: usize,
    /// Tokens of the live history before and after.
    tokens_before: u64,
    tokens_after: u64,
    /// Tokens of the summarized region.
    summarized_tokens: u64,
    /// The summarized pairs.
    ledger: Vec<Unit>,
    /// The summary message (line) as JSON text.
    summary: Option<String>,
    /// How many thinking blocks and reasoning items the output invalidates for their
    /// provider's prefix binding (`format::loaded::Summarized::invalidated`).
    invalidated: usize,
    /// Whether the text is a simple compaction (keep-thinking-valid's way out): then
    /// `head`, `cut`, `ledger` and `summary` describe the summary it replaced, not
    /// the text, and are left out.
    simple: bool,
    /// Whether keep-thinking-valid stripped thinking from the retained messages (so
    /// they are not the input's bytes: Python reads the text back whole).
    stripped: bool,
    /// The calibrated budget, with `calibrated=True`.
    calibrated: Option<CalibratedBudget>,
}

impl Outcome {
    fn unchanged(tokens: u64, calibrated: Option<CalibratedBudget>) -> Self {
        Outcome {
            calibrated,
            text: None,
            head: 0,
            cut: 0,
            tokens_before: tokens,
            tokens_after: tokens,
            summarized_tokens: 0,
            ledger: Vec::new(),
            summary: None,
            invalidated: 0,
            simple: false,
            stripped: false,
        }
    }
}

/// Tokens of the live history of `t`. **O(messages)**.
pub(crate) fn live_tokens(t: &Transcript) -> u64 {
    t.messages[t.live_from()..]
        .iter()
        .fold(0u64, |a, m| a.saturating_add(m.tokens()))
}

/// `summarize` on any format: the library's one summary route ([`Loaded::summarize`],
/// the CLI's `compact --target` and `compact --budget` with no `--strategy`): the same
/// code, the same bytes. The records summary counts its text with `counter`.
/// **O(len)** per pass.
fn summarize(
    py: Python<'_>,
    text: &str,
    format: Format,
    opts: &Summarize,
    counter: &Counter<'_>,
) -> PyResult<Outcome> {
    let loaded = load(py, text, format, counter)?;
    if opts.summary_tokens.is_some() && !loaded.takes_summary_count() {
        return Err(PyValueError::new_err(format!(
            "summary_tokens applies to records JSONL: a {} summary message is counted as it is written",
            loaded.format()
        )));
    }
    // The records summary's count: `summary_tokens` when given, else the caller's
    // counter, else the library's estimate (as the CLI's, so that both write the same
    // bytes).
    let count = |units: &[Unit]| {
        opts.summary_tokens.unwrap_or_else(|| {
            counter
                .count(&summary_text(opts.summary.as_deref().unwrap_or(""), units))
                .unwrap_or_else(|| estimate_summary_tokens(opts.summary.as_deref(), units))
        })
    };
    let before = loaded.live_tokens();
    let calibrated = match opts.budget {
        Some(reported) if opts.calibrated => Some(calibrated_budget(py, &loaded, reported)?),
        _ => None,
    };
    let budget = calibrated
        .as_ref()
        .map_or(opts.budget, |c| Some(c.estimate));
    let window = opts.window(opts.target.unwrap_or(0));
    let request = match budget {
        Some(budget) => SummaryOptions::within(budget, window),
        None => SummaryOptions::at(window),
    }
    .keep_head(opts.keep_head)
    .summary(opts.summary.as_deref())
    .summary_tokens(Some(&count as SummaryCount<'_>))
    .keep_thinking_valid(opts.keep_thinking_valid);
    let done = loaded.summarize(&request, counter.get());
    counter.take_error()?;
    let best = match done {
        Ok(done) => done.filter(Summarized::shrank),
        // A deferral (no legal cut, the head still open) raises `DeferError`.
        Err(SummarizeError::Rewrite(e)) => return Err(errors::rewrite(py, &e)),
        Err(SummarizeError::Thinking(e)) => return Err(errors::edit(py, &e)),
        Err(e) => return Err(errors::cutpoint(py, e.to_string())),
    };
    let Some(d) = best else {
        return Ok(Outcome::unchanged(before, calibrated));
    };
    let s = d.summary;
    Ok(Outcome {
        head: s.head,
        cut: s.cut,
        tokens_before: before,
        tokens_after: d.tokens_after,
        summarized_tokens: s.tokens,
        ledger: s.ledger,
        summary: d.message,
        text: Some(s.text),
        invalidated: d.invalidated.len(),
        simple: d.thinking == ThinkingStep::Simple,
        stripped: d.thinking == ThinkingStep::Stripped,
        calibrated,
    })
}

/// `reported` (a budget in the provider's tokens) in the estimate's units by the
/// session's calibration ([`Loaded::calibrated_budget`], the CLI's `--calibrated`).
///
/// # Errors
/// `CutpointError` naming why: the log reports no usage, or the session's overhead
/// alone is over the budget (the CLI's exit 2 and exit 3).
pub(crate) fn calibrated_budget(
    py: Python<'_>,
    loaded: &Loaded<'_>,
    reported: u64,
) -> PyResult<CalibratedBudget> {
    loaded
        .calibrated_budget(reported)
        .map_err(|e| errors::cutpoint(py, e.to_string()))
}

/// A calibrated budget as Python's results give it (the fields of the CLI's
/// `--report` line `{"calibration": ...}`), or `None`. **O(1)**.
pub(crate) fn calibration_dict<'py>(
    py: Python<'py>,
    c: Option<&CalibratedBudget>,
) -> PyResult<Option<Bound<'py, PyDict>>> {
    let Some(c) = c else { return Ok(None) };
    let d = PyDict::new(py);
    d.set_item("points", c.fit.points)?;
    d.set_item("scale", c.fit.scale)?;
    d.set_item("overhead", c.fit.overhead)?;
    d.set_item("budget_reported", c.reported)?;
    d.set_item("budget_estimate", c.estimate)?;
    Ok(Some(d))
}

/// A Python bool option, refused by name when it is anything else. **O(1)**.
pub(crate) fn flag(key: &str, value: &Bound<'_, PyAny>) -> PyResult<bool> {
    if !value.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "{key} must be a bool, not {}",
            value.get_type().name()?
        )));
    }
    value.extract()
}

/// Compacts the log `text` (in `format`) with `strategy` and its `options`; returns a
/// dict: `strategy`, `changed`, `text` (the compacted log in the input's format,
/// `None` when unchanged), `budget`, `tokens_before`, `tokens_after`, `met_budget`,
/// `steps` (one dict per pipeline stage, the fields of the CLI's `--report` lines;
/// `[]` for `summarize`), and for `summarize` only (`None` or `[]` otherwise):
/// `head`, `cut`, `summarized_tokens`, `ledger` (dicts: `call_id`, `tool`,
/// `arguments`, `status`, `first_line`), `summary` (the summary message as JSON
/// text), and `invalidated_thinking` (how many thinking blocks and reasoning items the
/// output invalidates for their provider's prefix binding; 0 with
/// `keep_thinking_valid`). **O(len)** per pass for `summarize` (at most `cutpoint::format::loaded::BUDGET_PASSES` passes to meet
/// a budget); **O(len)** plus what the stages cost for the others.
#[pyfunction]
#[pyo3(signature = (text, format = "auto", strategy = "summarize", options = None, token_counter = None))]
pub(crate) fn compact<'py>(
    py: Python<'py>,
    text: &str,
    format: &str,
    strategy: &str,
    options: Option<Bound<'py, PyDict>>,
    token_counter: Option<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyDict>> {
    let chosen = self::strategy(strategy)?;
    let counter = Counter::new(token_counter);
    let dict = PyDict::new(py);
    dict.set_item("strategy", strategy)?;
    match chosen {
        Strategy::Summarize => {
            let opts = Summarize::from_options(options.as_ref())?;
            let outcome = guarded(py, || {
                let format = format_of(py, text, format)?;
                summarize(py, text, format, &opts, &counter)
            })?;
            dict.set_item("changed", outcome.text.is_some())?;
            dict.set_item("text", outcome.text)?;
            let budget = outcome
                .calibrated
                .as_ref()
                .map_or(opts.budget, |c| Some(c.estimate));
            dict.set_item("budget", budget)?;
            dict.set_item(
                "calibration",
                calibration_dict(py, outcome.calibrated.as_ref())?,
            )?;
            dict.set_item("tokens_before", outcome.tokens_before)?;
            dict.set_item("tokens_after", outcome.tokens_after)?;
            dict.set_item(
                "met_budget",
                budget.is_none_or(|b| outcome.tokens_after <= b),
            )?;
            dict.set_item("steps", PyList::empty(py))?;
            dict.set_item("rounds", 1)?;
            dict.set_item("summarized_tokens", outcome.summarized_tokens)?;
            let ledger = PyList::empty(py);
            for unit in &outcome.ledger {
                let u = PyDict::new(py);
                u.set_item("call_id", unit.call_id.as_str())?;
                u.set_item("tool", unit.tool.as_deref())?;
                u.set_item("arguments", unit.arguments.as_deref())?;
                u.set_item("status", unit.status.map(|s| s.name()))?;
                u.set_item("first_line", unit.first_line.as_deref())?;
                ledger.append(u)?;
            }
            dict.set_item("ledger", ledger)?;
            let simple = outcome.simple;
            dict.set_item("head", if simple { None } else { Some(outcome.head) })?;
            dict.set_item("cut", if simple { None } else { Some(outcome.cut) })?;
            dict.set_item("summary", outcome.summary)?;
            dict.set_item("invalidated_thinking", outcome.invalidated)?;
            dict.set_item("simple_compaction", simple)?;
            dict.set_item("thinking_stripped", outcome.stripped)?;
        }
        Strategy::Pipeline(choice) => {
            let opts = Options::from_dict(choice, options.as_ref())?;
            let ran = guarded(py, || {
                let format = format_of(py, text, format)?;
                strategies::run(py, text, format, choice, &opts, &counter)
            })?;
            let report = &ran.report;
            dict.set_item("changed", ran.text.is_some())?;
            dict.set_item("text", ran.text.as_deref())?;
            dict.set_item("budget", ran.budget)?;
            dict.set_item(
                "calibration",
                calibration_dict(py, ran.calibrated.as_ref())?,
            )?;
            dict.set_item("tokens_before", ran.tokens_before)?;
            dict.set_item("tokens_after", ran.tokens_after)?;
            dict.set_item("met_budget", ran.met_budget())?;
            dict.set_item("steps", strategies::steps(py, report)?)?;
            dict.set_item("rounds", ran.rounds)?;
            dict.set_item("head", py.None())?;
            dict.set_item("cut", py.None())?;
            dict.set_item("summarized_tokens", py.None())?;
            dict.set_item("ledger", PyList::empty(py))?;
            dict.set_item("summary", py.None())?;
            dict.set_item("invalidated_thinking", ran.invalidated)?;
            dict.set_item("simple_compaction", ran.simple)?;
            dict.set_item("thinking_stripped", false)?;
        }
    }
    Ok(dict)
}
