//! The library's errors as Python exceptions: each Rust error becomes an instance of
//! a class of `cutpoint._errors` (pure Python, so the classes carry docstrings and
//! plain keyword constructors), with the Rust variant's facts as attributes. One
//! function per error family; nothing else builds an exception.

use std::panic::{AssertUnwindSafe, catch_unwind};

use cutpoint::compact::PlanError;
use cutpoint::format::RewriteError;
use cutpoint::format::{DeferReport, FormatError};
use cutpoint::{AppendError, Defer, EventError, ReplaceError, StrictViolation};
use pyo3::prelude::*;
use pyo3::types::PyDict;

/// The module that defines the exception classes.
const ERRORS_MODULE: &str = "cutpoint._errors";

/// An instance of `cutpoint._errors.<class>(message, **facts)` as an error to raise.
/// When the class cannot be had (the package is broken), the import error itself.
/// **O(facts)**.
fn raise(py: Python<'_>, class: &str, message: String, facts: &[(&str, Fact)]) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let kwargs = PyDict::new(py);
        for (key, value) in facts {
            match value {
                Fact::Int(v) => kwargs.set_item(*key, *v)?,
                Fact::Str(v) => kwargs.set_item(*key, v)?,
                Fact::Bool(v) => kwargs.set_item(*key, *v)?,
                Fact::Strs(v) => kwargs.set_item(*key, v)?,
                Fact::None => kwargs.set_item(*key, py.None())?,
            }
        }
        let class = py.import(ERRORS_MODULE)?.getattr(class)?;
        Ok(PyErr::from_value(class.call((message,), Some(&kwargs))?))
    };
    build().unwrap_or_else(|e| e)
}

/// One fact of an error, as Python will see it.
enum Fact {
    Int(u64),
    Str(String),
    Bool(bool),
    Strs(Vec<String>),
    None,
}

impl From<usize> for Fact {
    fn from(v: usize) -> Self {
        Fact::Int(v as u64)
    }
}

impl From<u64> for Fact {
    fn from(v: u64) -> Self {
        Fact::Int(v)
    }
}

impl From<bool> for Fact {
    fn from(v: bool) -> Self {
        Fact::Bool(v)
    }
}

impl From<&str> for Fact {
    fn from(v: &str) -> Self {
        Fact::Str(v.to_owned())
    }
}

impl<T: Into<Fact>> From<Option<T>> for Fact {
    fn from(v: Option<T>) -> Self {
        v.map_or(Fact::None, Into::into)
    }
}

/// Where a search for a legal cut looked, and what it found, as `DeferError`'s facts.
struct Searched {
    message: String,
    target_tokens: u64,
    lookback_tokens: u64,
    target_index: usize,
    floor: usize,
    below: Option<usize>,
    above: Option<usize>,
    waiting_on: Vec<String>,
}

/// `DeferError` with reason `no_legal_cut`. **O(waiting)**.
fn no_legal_cut(py: Python<'_>, s: Searched) -> PyErr {
    raise(
        py,
        "DeferError",
        s.message,
        &[
            ("reason", "no_legal_cut".into()),
            ("target_tokens", s.target_tokens.into()),
            ("lookback_tokens", s.lookback_tokens.into()),
            ("target_index", s.target_index.into()),
            ("floor", s.floor.into()),
            ("nearest_legal_below", s.below.into()),
            ("nearest_legal_above", s.above.into()),
            ("waiting_on", Fact::Strs(s.waiting_on)),
        ],
    )
}

/// `DeferError` for the selector's "no legal cut here". **O(waiting)**.
pub(crate) fn defer(py: Python<'_>, d: &Defer) -> PyErr {
    no_legal_cut(
        py,
        Searched {
            message: d.to_string(),
            target_tokens: d.target_tokens,
            lookback_tokens: d.lookback_tokens,
            target_index: d.target_index,
            floor: d.floor,
            below: d.nearest_legal_below,
            above: d.nearest_legal_above,
            waiting_on: d.waiting_on.iter().map(ToString::to_string).collect(),
        },
    )
}

/// `DeferError` for a rewrite's deferral, told in messages of the transcript (records
/// of the file, for records JSONL): `floor` and `target_index` are the lowest and
/// highest cut searched (both the message holding the target when the walk covered
/// no message start). **O(waiting)**.
pub(crate) fn defer_report(py: Python<'_>, d: &DeferReport) -> PyErr {
    let (floor, target_index) = d.searched.unwrap_or((d.target_at, d.target_at));
    no_legal_cut(
        py,
        Searched {
            message: d.to_string(),
            target_tokens: d.target_tokens,
            lookback_tokens: d.lookback_tokens,
            target_index,
            floor,
            below: d.below.map(|c| c.at),
            above: d.above.map(|c| c.at),
            waiting_on: d.waiting_on.iter().map(ToString::to_string).collect(),
        },
    )
}

/// `DeferError` for a plan that must wait: no legal cut in the window, or a pinned
/// head that does not end at a legal cut yet. **O(waiting)**.
pub(crate) fn plan(py: Python<'_>, e: &PlanError) -> PyErr {
    match e {
        PlanError::NoLegalCut(d) => defer(py, d),
        PlanError::HeadOpen { keep_head } => raise(
            py,
            "DeferError",
            e.to_string(),
            &[
                ("reason", "head_open".into()),
                ("keep_head", (*keep_head).into()),
            ],
        ),
        other => raise(py, "CutpointError", other.to_string(), &[]),
    }
}

/// The name of a strict-mode violation, as `AppendError.violation` spells it. **O(1)**.
fn strict_name(v: &StrictViolation) -> &'static str {
    match v {
        StrictViolation::OrphanResult { .. } => "orphan_result",
        StrictViolation::DuplicateResult { .. } => "duplicate_result",
        StrictViolation::UseAfterResult { .. } => "use_after_result",
        _ => "other",
    }
}

/// `AppendError` with the variant's name and facts. **O(1)**.
pub(crate) fn append(py: Python<'_>, e: &AppendError) -> PyErr {
    let message = e.to_string();
    let facts: Vec<(&str, Fact)> = match e {
        AppendError::DuplicateCall {
            call_id,
            at,
            first_use,
        } => vec![
            ("variant", "duplicate_call".into()),
            ("at", (*at).into()),
            ("call_id", call_id.as_str().into()),
            ("first_use", (*first_use).into()),
        ],
        AppendError::CoveredIdSeen { call_id, at } => vec![
            ("variant", "covered_id_seen".into()),
            ("at", (*at).into()),
            ("call_id", call_id.as_str().into()),
        ],
        AppendError::EmptyCallId { at, kind } => vec![
            ("variant", "empty_call_id".into()),
            ("at", (*at).into()),
            ("record_kind", kind.to_string().as_str().into()),
        ],
        AppendError::TokenOverflow { at, tokens, total } => vec![
            ("variant", "token_overflow".into()),
            ("at", (*at).into()),
            ("tokens", (*tokens).into()),
            ("total", (*total).into()),
        ],
        AppendError::RecordOpen { at, open_at } => vec![
            ("variant", "record_open".into()),
            ("at", (*at).into()),
            ("open_at", (*open_at).into()),
        ],
        AppendError::LimitExceeded {
            at,
            limit,
            max,
            value,
        } => vec![
            ("variant", "limit_exceeded".into()),
            ("at", (*at).into()),
            ("limit", limit.field().into()),
            ("max", (*max).into()),
            ("value", (*value).into()),
        ],
        AppendError::Violation(v) => {
            let first_result = match v {
                StrictViolation::DuplicateResult { first_result, .. } => *first_result,
                StrictViolation::UseAfterResult { first_result, .. } => Some(*first_result),
                _ => None,
            };
            vec![
                ("variant", "violation".into()),
                ("at", v.at().into()),
                ("call_id", v.call_id().as_str().into()),
                ("violation", strict_name(v).into()),
                ("first_result", first_result.into()),
            ]
        }
        AppendError::Full { at } => vec![("variant", "full".into()), ("at", (*at).into())],
        AppendError::ResultForWithdrawnCall { call_id, at } => vec![
            ("variant", "result_for_withdrawn_call".into()),
            ("call_id", call_id.as_str().into()),
            ("at", (*at).into()),
        ],
        _ => vec![("variant", "other".into())],
    };
    raise(py, "AppendError", message, &facts)
}

/// `EventError` with the variant's facts, or `AppendError` for a refused record.
/// **O(1)**.
pub(crate) fn event(py: Python<'_>, e: &EventError) -> PyErr {
    let message = e.to_string();
    let facts: Vec<(&str, Fact)> = match e {
        EventError::Append(a) => return append(py, a),
        EventError::NotOpen { event, len } => vec![
            ("variant", "not_open".into()),
            ("event", event.to_string().as_str().into()),
            ("len", (*len).into()),
        ],
        EventError::TurnEndedWhileOpen { open_at } => vec![
            ("variant", "turn_ended_while_open".into()),
            ("open_at", (*open_at).into()),
        ],
        EventError::EmptyLog { tokens } => vec![
            ("variant", "empty_log".into()),
            ("tokens", (*tokens).into()),
        ],
        EventError::TokenOverflow { at, tokens, before } => vec![
            ("variant", "token_overflow".into()),
            ("at", (*at).into()),
            ("tokens", (*tokens).into()),
            ("before", (*before).into()),
        ],
        EventError::NotPending { call_id } => vec![
            ("variant", "not_pending".into()),
            ("call_id", call_id.as_str().into()),
        ],
        _ => vec![("variant", "other".into())],
    };
    raise(py, "EventError", message, &facts)
}

/// `ReplaceError` with the variant's facts. **O(1)**.
pub(crate) fn replace(py: Python<'_>, e: &ReplaceError) -> PyErr {
    let message = e.to_string();
    let facts: Vec<(&str, Fact)> = match e {
        ReplaceError::NotALegalCut { at, which } => vec![
            ("variant", "not_a_legal_cut".into()),
            ("at", (*at).into()),
            ("which", which.to_string().as_str().into()),
        ],
        ReplaceError::EmptyRegion { start, end } => vec![
            ("variant", "empty_region".into()),
            ("start", (*start).into()),
            ("end", (*end).into()),
        ],
        ReplaceError::OutOfRange { end, len } => vec![
            ("variant", "out_of_range".into()),
            ("end", (*end).into()),
            ("len", (*len).into()),
        ],
        ReplaceError::TokenOverflow {
            summary_tokens,
            kept,
        } => vec![
            ("variant", "token_overflow".into()),
            ("summary_tokens", (*summary_tokens).into()),
            ("kept", (*kept).into()),
        ],
        _ => vec![("variant", "other".into())],
    };
    raise(py, "ReplaceError", message, &facts)
}

/// `FormatError` naming the line (1-based) and what is wrong; `line` is `None` when
/// the format could not be told. **O(1)**.
pub(crate) fn format(py: Python<'_>, e: &FormatError) -> PyErr {
    match e {
        FormatError::Invalid { line, message } => raise(
            py,
            "FormatError",
            e.to_string(),
            &[
                ("line", (*line).into()),
                ("detail", message.as_str().into()),
            ],
        ),
        // The library's text names the CLI's flag; Python passes `format=`.
        FormatError::Undetected { why } => raise(
            py,
            "FormatError",
            e.to_string().replace("pass --format", "pass format="),
            &[("line", Fact::None), ("detail", why.as_str().into())],
        ),
        FormatError::Mismatch { why, .. } => raise(
            py,
            "FormatError",
            e.to_string().replace("pass --format", "pass format="),
            &[("line", Fact::None), ("detail", why.as_str().into())],
        ),
        other => raise(py, "FormatError", other.to_string(), &[]),
    }
}

/// A `FormatError` for a records JSONL line (`format::records::ReadError`): `line`,
/// and what is wrong as `detail`, without the line (as for every other format).
/// **O(1)**.
pub(crate) fn records(py: Python<'_>, e: &cutpoint::format::records::ReadError) -> PyErr {
    let text = e.to_string();
    let detail = text
        .strip_prefix(&format!("line {}: ", e.line()))
        .unwrap_or(&text);
    raise(
        py,
        "FormatError",
        text.clone(),
        &[("line", e.line().into()), ("detail", detail.into())],
    )
}

/// The error of a log that could not be loaded (`format::LoadError`). **O(1)**.
pub(crate) fn load(py: Python<'_>, e: &cutpoint::format::LoadError) -> PyErr {
    match e {
        cutpoint::format::LoadError::Records(r) => records(py, r),
        cutpoint::format::LoadError::Refused(a) => append(py, a),
        cutpoint::format::LoadError::Format(f) => format(py, f),
        other => raise(py, "FormatError", other.to_string(), &[]),
    }
}

/// The error of a rewrite: a deferral, a refused record, or a boundary the
/// transcript does not allow. **O(waiting)**.
pub(crate) fn rewrite(py: Python<'_>, e: &RewriteError) -> PyErr {
    match e {
        RewriteError::Plan(p) => plan(py, p),
        RewriteError::Deferred(d) => defer_report(py, d),
        RewriteError::Tracker(a) => append(py, a),
        other => raise(py, "CutpointError", other.to_string(), &[]),
    }
}

/// The error of a transcript rewrite: `DeferError` with reason `thinking_bound` for
/// keep-thinking-valid's refusal (the CLI's exit 3), a refused record as
/// `AppendError`, `CutpointError` otherwise. **O(1)**.
pub(crate) fn edit(py: Python<'_>, e: &cutpoint::format::EditError) -> PyErr {
    use cutpoint::format::EditError;
    match e {
        EditError::ThinkingBound { message, line, .. } => raise(
            py,
            "DeferError",
            e.to_string(),
            &[
                ("reason", "thinking_bound".into()),
                ("message_index", (*message).into()),
                ("line", (*line).into()),
            ],
        ),
        EditError::Tracker(a) => append(py, a),
        other => cutpoint(py, other.to_string()),
    }
}

/// A plain `CutpointError` with `message`. **O(1)**.
pub(crate) fn cutpoint(py: Python<'_>, message: String) -> PyErr {
    raise(py, "CutpointError", message, &[])
}

/// Runs `f`, turning a Rust panic (a bug: the library never panics on input) into a
/// `CutpointError` instead of pyo3's `PanicException`, which `except Exception` does
/// not catch. **O(1)** around `f`.
pub(crate) fn guarded<T>(py: Python<'_>, f: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(result) => result,
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            Err(cutpoint(
                py,
                format!("internal error (a bug in cutpoint, please report it): {what}"),
            ))
        }
    }
}
