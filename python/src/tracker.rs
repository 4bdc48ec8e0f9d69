//! The tracker and its vocabulary for Python: `Record`, `Event`, `Tracker` and the
//! values its methods return (`Appended`, `Handled`, `PendingCall`, `Anomalies`).
//! Every method is a thin call into `cutpoint::Tracker`; costs are the library's.

use cutpoint::{
    Anomaly, Appended, CallId, Event, Handled, Limits, Mode, Record, RecordKind, Tracker,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;

use crate::errors::{self, guarded};

/// The record kinds, as `Record.kind` spells them.
const KINDS: &str = "user, assistant, tool_use, tool_result, summary";

/// One record of a log: a kind, a token count, the call id of a tool record, and
/// whether it is bound to the record before it (the same provider message: no cut
/// between them). Immutable.
#[pyclass(frozen, eq, module = "cutpoint._native", name = "Record")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyRecord {
    pub(crate) inner: Record,
}

#[pymethods]
impl PyRecord {
    /// `Record(kind, tokens, call_id=None, bound=False, covers=None)`. `kind` is one of
    /// user, assistant, tool_use, tool_result, summary; tool records need `call_id`,
    /// others refuse it; a summary lists the call ids it `covers`. **O(covers)**.
    #[new]
    #[pyo3(signature = (kind, tokens, call_id = None, bound = false, covers = None))]
    fn new(
        kind: &str,
        tokens: u64,
        call_id: Option<String>,
        bound: bool,
        covers: Option<Vec<String>>,
    ) -> PyResult<Self> {
        let kind = match (kind, call_id, covers) {
            ("tool_use", Some(id), None) => RecordKind::ToolUse(CallId::from(id)),
            ("tool_result", Some(id), None) => RecordKind::ToolResult(CallId::from(id)),
            ("tool_use" | "tool_result", None, _) => {
                return Err(PyValueError::new_err(format!(
                    "a {kind} record needs a call_id"
                )));
            }
            ("summary", None, covers) => RecordKind::Summary(
                covers
                    .unwrap_or_default()
                    .into_iter()
                    .map(CallId::from)
                    .collect(),
            ),
            ("user", None, None) => RecordKind::User,
            ("assistant", None, None) => RecordKind::Assistant,
            ("user" | "assistant" | "summary" | "tool_use" | "tool_result", _, _) => {
                return Err(PyValueError::new_err(format!(
                    "a {kind} record takes {}",
                    match kind {
                        "summary" => "covers, not call_id",
                        "tool_use" | "tool_result" => "call_id, not covers",
                        _ => "neither call_id nor covers",
                    }
                )));
            }
            (other, _, _) => {
                return Err(PyValueError::new_err(format!(
                    "unknown record kind {other:?}; one of: {KINDS}"
                )));
            }
        };
        let record = Record::new(kind, tokens);
        Ok(PyRecord {
            inner: if bound {
                record.bound_to_previous()
            } else {
                record
            },
        })
    }

    /// A user turn (or any input that is not a tool result). **O(1)**.
    #[staticmethod]
    fn user(tokens: u64) -> Self {
        PyRecord {
            inner: Record::user(tokens),
        }
    }

    /// Assistant output that is not a tool call. **O(1)**.
    #[staticmethod]
    fn assistant(tokens: u64) -> Self {
        PyRecord {
            inner: Record::assistant(tokens),
        }
    }

    /// A tool call with id `call_id`. **O(len)** of the id.
    #[staticmethod]
    fn tool_use(call_id: &str, tokens: u64) -> Self {
        PyRecord {
            inner: Record::tool_use(call_id, tokens),
        }
    }

    /// The result of the call with id `call_id`. **O(len)** of the id.
    #[staticmethod]
    fn tool_result(call_id: &str, tokens: u64) -> Self {
        PyRecord {
            inner: Record::tool_result(call_id, tokens),
        }
    }

    /// A summary standing for a compacted region, covering the calls `covers` as
    /// whole pairs. **O(covers)**.
    #[staticmethod]
    fn summary(covers: Vec<String>, tokens: u64) -> Self {
        PyRecord {
            inner: Record::summary(covers.into_iter().map(CallId::from), tokens),
        }
    }

    /// The same record, bound to the one before it. **O(1)**.
    fn bound_to_previous(&self) -> Self {
        PyRecord {
            inner: self.inner.clone().bound_to_previous(),
        }
    }

    /// `user`, `assistant`, `tool_use`, `tool_result` or `summary`. **O(1)**.
    #[getter]
    fn kind(&self) -> &'static str {
        self.inner.kind().name()
    }

    /// The record's token count. **O(1)**.
    #[getter]
    fn tokens(&self) -> u64 {
        self.inner.tokens()
    }

    /// The call id of a tool record, else `None`. **O(len)** of the id.
    #[getter]
    fn call_id(&self) -> Option<String> {
        self.inner.call_id().map(ToString::to_string)
    }

    /// Whether the record is bound to the one before it. **O(1)**.
    #[getter]
    fn bound(&self) -> bool {
        self.inner.is_bound_to_previous()
    }

    /// The call ids a summary covers (empty for other kinds). **O(covers)**.
    #[getter]
    fn covers(&self) -> Vec<String> {
        match self.inner.kind() {
            RecordKind::Summary(ids) => ids.iter().map(ToString::to_string).collect(),
            _ => Vec::new(),
        }
    }

    fn __repr__(&self) -> String {
        let mut out = format!("Record({:?}, {}", self.kind(), self.tokens());
        if let Some(id) = self.call_id() {
            out.push_str(&format!(", call_id={id:?}"));
        }
        if self.bound() {
            out.push_str(", bound=True");
        }
        if matches!(self.inner.kind(), RecordKind::Summary(_)) {
            out.push_str(&format!(", covers={:?}", self.covers()));
        }
        out.push(')');
        out
    }
}

/// One step of a live turn, for `Tracker.handle`. Immutable.
#[pyclass(frozen, eq, module = "cutpoint._native", name = "Event")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyEvent {
    inner: Event,
}

#[pymethods]
impl PyEvent {
    /// A complete record in one piece. **O(1)**.
    #[staticmethod]
    fn record(record: &PyRecord) -> Self {
        PyEvent {
            inner: Event::Record(record.inner.clone()),
        }
    }

    /// A record starts streaming (its kind and call id are known now). **O(1)**.
    #[staticmethod]
    fn opened(record: &PyRecord) -> Self {
        PyEvent {
            inner: Event::Opened(record.inner.clone()),
        }
    }

    /// The open record grew by `tokens`. **O(1)**.
    #[staticmethod]
    fn delta(tokens: u64) -> Self {
        PyEvent {
            inner: Event::Delta { tokens },
        }
    }

    /// The open record is complete. **O(1)**.
    #[staticmethod]
    fn closed() -> Self {
        PyEvent {
            inner: Event::Closed,
        }
    }

    /// The provider reported the exact size of the last record. **O(1)**.
    #[staticmethod]
    fn usage_reported(tokens: u64) -> Self {
        PyEvent {
            inner: Event::UsageReported { tokens },
        }
    }

    /// The model's turn ended; no record may be left open. **O(1)**.
    #[staticmethod]
    fn turn_ended() -> Self {
        PyEvent {
            inner: Event::TurnEnded,
        }
    }

    /// The provider dropped the pending call `call_id` (an Anthropic `fallback`
    /// block): it waits for no result any more. **O(1)**.
    #[staticmethod]
    fn call_withdrawn(call_id: String) -> Self {
        PyEvent {
            inner: Event::CallWithdrawn(CallId::from(call_id)),
        }
    }

    /// `record`, `opened`, `delta`, `closed`, `usage_reported`, `turn_ended` or
    /// `call_withdrawn`. **O(1)**.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.inner {
            Event::Record(_) => "record",
            Event::Opened(_) => "opened",
            Event::Delta { .. } => "delta",
            Event::Closed => "closed",
            Event::UsageReported { .. } => "usage_reported",
            Event::TurnEnded => "turn_ended",
            Event::CallWithdrawn(_) => "call_withdrawn",
            _ => "other",
        }
    }

    /// The tokens of a `delta` or `usage_reported` event. **O(1)**.
    #[getter]
    fn tokens(&self) -> Option<u64> {
        match self.inner {
            Event::Delta { tokens } | Event::UsageReported { tokens } => Some(tokens),
            _ => None,
        }
    }

    fn __repr__(&self) -> String {
        match &self.inner {
            Event::Record(r) | Event::Opened(r) => format!(
                "Event.{}({})",
                self.kind(),
                PyRecord { inner: r.clone() }.__repr__()
            ),
            Event::Delta { tokens } | Event::UsageReported { tokens } => {
                format!("Event.{}({tokens})", self.kind())
            }
            _ => format!("Event.{}()", self.kind()),
        }
    }
}

/// The name of an anomaly, and the earlier result's position for a use after it.
fn anomaly_parts(a: Option<Anomaly>) -> (Option<&'static str>, Option<usize>) {
    match a {
        None => (None, None),
        Some(Anomaly::OrphanResult) => (Some("orphan_result"), None),
        Some(Anomaly::DuplicateResult) => (Some("duplicate_result"), None),
        Some(Anomaly::UseAfterResult { first_result }) => {
            (Some("use_after_result"), Some(first_result))
        }
        Some(_) => (Some("other"), None),
    }
}

/// What an accepted append (or open) did.
#[pyclass(frozen, eq, get_all, module = "cutpoint._native", name = "Appended")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyAppended {
    /// The record's position.
    at: usize,
    /// Whether the cut right after it (`at + 1`) is legal now.
    cut_after_is_legal: bool,
    /// `None`, or what was unusual: `orphan_result`, `duplicate_result`,
    /// `use_after_result`.
    anomaly: Option<&'static str>,
    /// For `use_after_result`: the position of the earlier result.
    first_result: Option<usize>,
}

impl From<Appended> for PyAppended {
    fn from(a: Appended) -> Self {
        let (anomaly, first_result) = anomaly_parts(a.anomaly);
        PyAppended {
            at: a.at,
            cut_after_is_legal: a.cut_after_is_legal,
            anomaly,
            first_result,
        }
    }
}

#[pymethods]
impl PyAppended {
    fn __repr__(&self) -> String {
        format!(
            "Appended(at={}, cut_after_is_legal={}, anomaly={})",
            self.at,
            py_bool(self.cut_after_is_legal),
            py_opt_str(self.anomaly)
        )
    }
}

/// What `Tracker.handle` did with an event. Fields that do not apply to `kind` are
/// `None`.
#[pyclass(frozen, eq, get_all, module = "cutpoint._native", name = "Handled")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyHandled {
    /// `appended`, `opened`, `grew`, `closed`, `resized` or `turn_ended`.
    kind: &'static str,
    /// The record concerned (all kinds but `turn_ended`).
    at: Option<usize>,
    /// Whether the cut after the record is legal now (`appended`, `opened`, `closed`).
    cut_after_is_legal: Option<bool>,
    /// The record's size now (`grew`, `resized`).
    tokens: Option<u64>,
    /// The anomaly of an appended or opened record, if any.
    anomaly: Option<&'static str>,
    /// Records in the log (`turn_ended`).
    len: Option<usize>,
    /// Calls still in flight (`turn_ended`).
    pending: Option<usize>,
}

impl From<Handled> for PyHandled {
    fn from(h: Handled) -> Self {
        let blank = PyHandled {
            kind: "turn_ended",
            at: None,
            cut_after_is_legal: None,
            tokens: None,
            anomaly: None,
            len: None,
            pending: None,
        };
        match h {
            Handled::Appended(a) | Handled::Opened(a) => PyHandled {
                kind: if matches!(h, Handled::Appended(_)) {
                    "appended"
                } else {
                    "opened"
                },
                at: Some(a.at),
                cut_after_is_legal: Some(a.cut_after_is_legal),
                anomaly: anomaly_parts(a.anomaly).0,
                ..blank
            },
            Handled::Grew { at, tokens } => PyHandled {
                kind: "grew",
                at: Some(at),
                tokens: Some(tokens),
                ..blank
            },
            Handled::Closed {
                at,
                cut_after_is_legal,
            } => PyHandled {
                kind: "closed",
                at: Some(at),
                cut_after_is_legal: Some(cut_after_is_legal),
                ..blank
            },
            Handled::Resized { at, tokens } => PyHandled {
                kind: "resized",
                at: Some(at),
                tokens: Some(tokens),
                ..blank
            },
            // `cut_after_is_legal`: whether the end of the log is legal now.
            Handled::Withdrawn { at, end_is_legal } => PyHandled {
                kind: "withdrawn",
                at: Some(at),
                cut_after_is_legal: Some(end_is_legal),
                ..blank
            },
            Handled::TurnEnded { len, pending } => PyHandled {
                len: Some(len),
                pending: Some(pending),
                ..blank
            },
            _ => PyHandled {
                kind: "other",
                ..blank
            },
        }
    }
}

#[pymethods]
impl PyHandled {
    fn __repr__(&self) -> String {
        let mut fields = Vec::new();
        if let Some(at) = self.at {
            fields.push(format!("at={at}"));
        }
        if let Some(c) = self.cut_after_is_legal {
            fields.push(format!("cut_after_is_legal={}", py_bool(c)));
        }
        if let Some(t) = self.tokens {
            fields.push(format!("tokens={t}"));
        }
        if let Some(a) = self.anomaly {
            fields.push(format!("anomaly={a:?}"));
        }
        if let Some(l) = self.len {
            fields.push(format!("len={l}"));
        }
        if let Some(p) = self.pending {
            fields.push(format!("pending={p}"));
        }
        format!("Handled({:?}, {})", self.kind, fields.join(", "))
    }
}

/// A call whose `tool_use` was appended and whose `tool_result` was not.
#[pyclass(frozen, eq, get_all, module = "cutpoint._native", name = "PendingCall")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyPendingCall {
    /// The call's id.
    call_id: String,
    /// Position of its `tool_use`.
    at: usize,
}

#[pymethods]
impl PyPendingCall {
    fn __repr__(&self) -> String {
        format!("PendingCall(call_id={:?}, at={})", self.call_id, self.at)
    }
}

/// Counts of the anomalies a lenient tracker accepted.
#[pyclass(frozen, eq, get_all, module = "cutpoint._native", name = "Anomalies")]
#[derive(Clone, PartialEq)]
pub(crate) struct PyAnomalies {
    /// Results that arrived before any `tool_use` with their id.
    orphan_results: u64,
    /// Results for an id that already had one.
    duplicate_results: u64,
    /// Calls whose result came before them.
    uses_after_result: u64,
}

#[pymethods]
impl PyAnomalies {
    fn __repr__(&self) -> String {
        format!(
            "Anomalies(orphan_results={}, duplicate_results={}, uses_after_result={})",
            self.orphan_results, self.duplicate_results, self.uses_after_result
        )
    }
}

/// Python's spelling of a bool.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Python's spelling of an optional string.
fn py_opt_str(s: Option<&str>) -> String {
    s.map_or_else(|| "None".to_owned(), |s| format!("{s:?}"))
}

/// An incremental index of the legal compaction cuts of a conversation log (the
/// library's `Tracker`). Cut `c` keeps records `c..` and compacts `..c`; it is legal
/// when no tool call/result pair straddles it, and record `c` is not bound to record
/// `c - 1`.
#[pyclass(module = "cutpoint._native", name = "Tracker")]
pub(crate) struct PyTracker {
    inner: Tracker,
}

#[pymethods]
impl PyTracker {
    /// An empty tracker. `strict=True` refuses records that break pairing (orphan or
    /// duplicate results, a call after its result) instead of counting them; the caps
    /// default to the library's. **O(1)**.
    #[new]
    #[pyo3(signature = (*, strict = false, max_records = None, max_open_calls = None, max_call_id_bytes = None))]
    fn new(
        strict: bool,
        max_records: Option<usize>,
        max_open_calls: Option<usize>,
        max_call_id_bytes: Option<usize>,
    ) -> Self {
        let mut limits = Limits::default();
        if let Some(v) = max_records {
            limits.max_records = v;
        }
        if let Some(v) = max_open_calls {
            limits.max_open_calls = v;
        }
        if let Some(v) = max_call_id_bytes {
            limits.max_call_id_bytes = v;
        }
        let mode = if strict { Mode::Strict } else { Mode::Lenient };
        PyTracker {
            inner: Tracker::with_limits(limits).in_mode(mode),
        }
    }

    /// Appends one finished record. **O(1)** amortized. A refused record (an
    /// `AppendError`) leaves the tracker unchanged.
    fn append(&mut self, py: Python<'_>, record: &PyRecord) -> PyResult<PyAppended> {
        guarded(py, || {
            self.inner
                .append(record.inner.clone())
                .map(Into::into)
                .map_err(|e| errors::append(py, &e))
        })
    }

    /// Appends `records` in order and returns how many were appended. **O(n)**. On a
    /// refused record it raises that record's `AppendError` (its `at` says which);
    /// the records before it stay appended.
    fn extend(&mut self, py: Python<'_>, records: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut count = 0;
        for item in records.try_iter()? {
            let item = item?;
            let record = item.cast::<PyRecord>().map_err(|_| {
                PyTypeError::new_err(format!(
                    "Tracker.extend takes Records; item {count} is a {}",
                    item.get_type()
                        .name()
                        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
                ))
            })?;
            self.append(py, &record.get().clone())?;
            count += 1;
        }
        Ok(count)
    }

    /// Opens a record that streams in (a `tool_use` is pending from now on); no cut
    /// after it is legal until it closes. **O(1)** amortized.
    fn open(&mut self, py: Python<'_>, record: &PyRecord) -> PyResult<PyAppended> {
        guarded(py, || {
            self.inner
                .open(record.inner.clone())
                .map(Into::into)
                .map_err(|e| errors::append(py, &e))
        })
    }

    /// The open record grew by `tokens`; returns its size now. **O(1)**.
    fn grow(&mut self, py: Python<'_>, tokens: u64) -> PyResult<u64> {
        guarded(py, || {
            self.inner.grow(tokens).map_err(|e| errors::event(py, &e))
        })
    }

    /// Closes the open record; returns whether the cut after it is legal now. **O(1)**
    /// amortized.
    fn close(&mut self, py: Python<'_>) -> PyResult<bool> {
        guarded(py, || self.inner.close().map_err(|e| errors::event(py, &e)))
    }

    /// The provider's usage report: the last record (open or closed) counts `tokens`.
    /// **O(1)**.
    fn set_last_tokens(&mut self, py: Python<'_>, tokens: u64) -> PyResult<()> {
        guarded(py, || {
            self.inner
                .set_last_tokens(tokens)
                .map_err(|e| errors::event(py, &e))
        })
    }

    /// Handles one event of a live turn. **O(1)** amortized. A refused event leaves the
    /// tracker unchanged.
    fn handle(&mut self, py: Python<'_>, event: &PyEvent) -> PyResult<PyHandled> {
        guarded(py, || {
            self.inner
                .handle(event.inner.clone())
                .map(Into::into)
                .map_err(|e| errors::event(py, &e))
        })
    }

    /// The legal cut nearest the token target, walking back at most `lookback_tokens`
    /// (the specification's selector). Raises `DeferError` (naming the calls it waits
    /// for) when no legal cut lies in the window. **O(log n)**.
    fn select_legal_cut(
        &self,
        py: Python<'_>,
        target_tokens: u64,
        lookback_tokens: u64,
    ) -> PyResult<usize> {
        guarded(py, || {
            self.inner
                .select_legal_cut(target_tokens, lookback_tokens)
                .map_err(|d| errors::defer(py, &d))
        })
    }

    /// The smallest legal cut that compacts at least `target_tokens`, moving forward at
    /// most `lookahead_tokens` past the target. Raises `DeferError` otherwise.
    /// **O(log n)**.
    fn select_legal_cut_forward(
        &self,
        py: Python<'_>,
        target_tokens: u64,
        lookahead_tokens: u64,
    ) -> PyResult<usize> {
        guarded(py, || {
            self.inner
                .select_legal_cut_forward(target_tokens, lookahead_tokens)
                .map_err(|d| errors::defer(py, &d))
        })
    }

    /// Whether cut `cut` splits no pair (`False` past the end). **O(1)**.
    fn is_legal_cut(&self, cut: usize) -> bool {
        self.inner.is_legal_cut(cut)
    }

    /// The largest legal cut at or before `pos`. **O(1 + gap / 64)**.
    fn legal_cut_at_or_before(&self, pos: usize) -> usize {
        self.inner.legal_cut_at_or_before(pos)
    }

    /// The smallest legal cut at or after `pos`, or `None` if none exists yet.
    /// **O(1 + gap / 64)**.
    fn legal_cut_at_or_after(&self, pos: usize) -> Option<usize> {
        self.inner.legal_cut_at_or_after(pos)
    }

    /// Every legal cut, increasing. **O(cuts)**.
    fn legal_cuts(&self) -> Vec<usize> {
        self.inner.legal_cuts().collect()
    }

    /// The calls still waiting for their result, in log order. **O(k log k)** for `k`
    /// pending calls.
    fn pending_calls(&self) -> Vec<PyPendingCall> {
        self.inner
            .pending_calls()
            .into_iter()
            .map(|p| PyPendingCall {
                call_id: p.id.to_string(),
                at: p.at,
            })
            .collect()
    }

    /// Replaces records `start..end` (both legal cuts) by one summary of
    /// `summary_tokens` tokens. Raises `ReplaceError` otherwise (the tracker is then
    /// unchanged). **O(removed / 64 + min(start, len - end) + 64)**.
    fn replace_region(
        &mut self,
        py: Python<'_>,
        start: usize,
        end: usize,
        summary_tokens: u64,
    ) -> PyResult<()> {
        guarded(py, || {
            self.inner
                .replace_region(start, end, summary_tokens)
                .map_err(|e| errors::replace(py, &e))
        })
    }

    /// Tokens of records `0..cut` (`None` past the end). **O(1)**.
    fn tokens_before(&self, cut: usize) -> Option<u64> {
        self.inner.tokens_before(cut)
    }

    /// Tokens of record `index` (`None` past the end). **O(1)**.
    fn record_tokens(&self, index: usize) -> Option<u64> {
        self.inner.record_tokens(index)
    }

    /// Tokens of all records. **O(1)**.
    #[getter]
    fn total_tokens(&self) -> u64 {
        self.inner.total_tokens()
    }

    /// Number of calls waiting for their result. **O(1)**.
    #[getter]
    fn pending_count(&self) -> usize {
        self.inner.pending_count()
    }

    /// Position of the open record, if the last record is still streaming. **O(1)**.
    #[getter]
    fn open_record(&self) -> Option<usize> {
        self.inner.open_record()
    }

    /// Whether the tracker refuses pairing violations. **O(1)**.
    #[getter]
    fn strict(&self) -> bool {
        self.inner.mode() == Mode::Strict
    }

    /// Counts of the anomalies accepted so far. **O(1)**.
    #[getter]
    fn anomalies(&self) -> PyAnomalies {
        let a = self.inner.anomalies();
        PyAnomalies {
            orphan_results: a.orphan_results,
            duplicate_results: a.duplicate_results,
            uses_after_result: a.uses_after_result,
        }
    }

    fn __len__(&self) -> usize {
        self.inner.len()
    }

    fn __repr__(&self) -> String {
        format!(
            "Tracker(len={}, total_tokens={}, legal_cuts={}, pending={})",
            self.inner.len(),
            self.inner.total_tokens(),
            self.inner.legal_cut_count(),
            self.inner.pending_count()
        )
    }
}
