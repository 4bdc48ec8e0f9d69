//! cutpoint's records JSONL format: one record per line, the specification's `Record`
//! as JSON. The one place this format is read and written: line by line
//! ([`parse_line`], [`parse_entry`], [`Reader`], [`write_line`], [`write_entry`]), and
//! as a [`Transcript`](super::Transcript) of one message per record
//! ([`read`](super::read) with [`Format::Records`](super::Format::Records)).
//!
//! ```text
//! {"kind":"user","tokens":1200}
//! {"kind":"tool_use","call_id":"a","tokens":12}
//! {"kind":"tool_result","call_id":"a","tokens":800}
//! ```
//!
//! `kind` is one of `user`, `assistant`, `tool_use`, `tool_result`, `summary`; `tokens`
//! a non-negative integer below 2^64; `call_id` a non-empty string, required on tool
//! records and absent or `null` on the others; `bound: true` binds a record to the one
//! before it. Unknown fields are errors, so that a typo is never silently dropped.
//! Blank lines are skipped; an empty input is an empty log. Every error names its line.
//!
//! Optional payload fields, read by [`parse_entry`] and [`Reader::entries`] (and
//! ignored by [`parse_line`]): `name` and `arguments` (any JSON value, kept verbatim)
//! on `tool_use`; `status` (`ok`, `error`, `aborted`) and `content` (a string) on
//! `tool_result`. A `summary` line has no `call_id`; it lists the pairs it covers in
//! `covers`, each `{"call_id", "name"?, "arguments"?, "status"?, "first_line"?}`, and
//! may carry `text` and `orphans` (the results its region held without their call,
//! each `{"call_id", "first_line"?}`; not covered calls). An `assistant` record may carry `reasoning` (`plain` or `signed`):
//! it is a thinking / reasoning block (with a signature), which the `clear-thinking`
//! strategy clears in finished turns. An `assistant` record may instead carry
//! `compaction` (`anthropic` or `openai`): it is a provider's native compaction (an
//! Anthropic `compaction` block, an OpenAI `compaction` item), never `bound`; the live
//! history starts at the latest one, which is pinned with everything before it
//! ([`Log::live_from`](crate::compact::Log::live_from)):
//!
//! ```text
//! {"kind":"assistant","tokens":900,"compaction":"anthropic"}
//! ```
//!
//! ```text
//! {"kind":"summary","tokens":40,"covers":[{"call_id":"a","name":"bash","arguments":{"command":"ls"},"status":"ok","first_line":"src"}]}
//! ```

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use serde_json::value::RawValue;

use crate::compact::{Entry, NativeCompaction, Orphan, Payload, ResultStatus, Unit};
use crate::{CallId, Record, RecordKind};

pub(crate) mod transcript;

/// The longest line read, by default: 1 MiB. A records line is a few dozen bytes; a
/// longer one is not this format.
pub const DEFAULT_MAX_LINE_BYTES: usize = 1 << 20;

/// What went wrong reading records JSONL, and on which line (1-based).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    /// The input could not be read.
    #[error("line {line}: cannot read: {source}")]
    Io {
        /// The line being read.
        line: usize,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A line is not a valid record.
    #[error("line {line}: {message}")]
    Invalid {
        /// The offending line.
        line: usize,
        /// What is wrong with it.
        message: String,
    },
    /// A line is longer than the limit.
    #[error("line {line}: longer than {max} bytes")]
    LineTooLong {
        /// The offending line.
        line: usize,
        /// The limit.
        max: usize,
    },
}

impl ReadError {
    /// The 1-based line the error is on. **O(1)**.
    pub fn line(&self) -> usize {
        match self {
            ReadError::Io { line, .. }
            | ReadError::Invalid { line, .. }
            | ReadError::LineTooLong { line, .. } => *line,
        }
    }
}

#[derive(Serialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Kind {
    User,
    Assistant,
    ToolUse,
    ToolResult,
    Summary,
}

const KINDS: [(&str, Kind); 5] = [
    ("user", Kind::User),
    ("assistant", Kind::Assistant),
    ("tool_use", Kind::ToolUse),
    ("tool_result", Kind::ToolResult),
    ("summary", Kind::Summary),
];

/// `kind` is read from a string only: serde's derived enum would also take
/// `{"user":null}`, and answers a number with a bare "expected value".
impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

impl KindVisitor {
    fn wrong<E: serde::de::Error>(got: impl std::fmt::Display) -> E {
        E::custom(format_args!(
            "kind must be one of user, assistant, tool_use, tool_result, summary, not {got}"
        ))
    }
}

impl<'de> serde::de::Visitor<'de> for KindVisitor {
    type Value = Kind;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("kind: one of user, assistant, tool_use, tool_result, summary")
    }
    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Kind, E> {
        KINDS
            .iter()
            .find(|(name, _)| *name == v)
            .map(|&(_, kind)| kind)
            .ok_or_else(|| Self::wrong(format_args!("{v:?}")))
    }
    fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Kind, E> {
        Err(Self::wrong(v))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Kind, E> {
        Err(Self::wrong(v))
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Kind, E> {
        Err(Self::wrong(v))
    }
    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Kind, E> {
        Err(Self::wrong(v))
    }
    fn visit_unit<E: serde::de::Error>(self) -> Result<Kind, E> {
        Err(Self::wrong("null"))
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, _: A) -> Result<Kind, A::Error> {
        Err(Self::wrong("an array"))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, _: A) -> Result<Kind, A::Error> {
        Err(Self::wrong("an object"))
    }
}

#[derive(Serialize, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Status {
    Ok,
    Error,
    Aborted,
}

impl From<Status> for ResultStatus {
    fn from(s: Status) -> Self {
        match s {
            Status::Ok => ResultStatus::Ok,
            Status::Error => ResultStatus::Error,
            Status::Aborted => ResultStatus::Aborted,
        }
    }
}

fn status_out(s: ResultStatus) -> Status {
    match s {
        ResultStatus::Error => Status::Error,
        ResultStatus::Aborted => Status::Aborted,
        _ => Status::Ok,
    }
}

/// A field that is present (even as `null`) deserializes to `Some(raw JSON)`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a record: a JSON object with `kind` and `tokens`"
)]
struct Line<'a> {
    kind: Kind,
    #[serde(default, borrow)]
    call_id: Option<std::borrow::Cow<'a, str>>,
    tokens: u64,
    #[serde(default)]
    bound: bool,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    arguments: Option<Box<RawValue>>,
    #[serde(default)]
    status: Option<Status>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    covers: Option<Vec<UnitLine>>,
    #[serde(default)]
    orphans: Option<Vec<OrphanLine>>,
    #[serde(default)]
    reasoning: Option<Reasoning>,
    #[serde(default)]
    compaction: Option<Native>,
}

/// `compaction` on an assistant record: whose native compaction it is.
#[derive(Serialize, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Native {
    Anthropic,
    Openai,
}

impl From<Native> for NativeCompaction {
    fn from(n: Native) -> Self {
        match n {
            Native::Anthropic => NativeCompaction::Anthropic,
            Native::Openai => NativeCompaction::OpenAi,
        }
    }
}

fn native_out(n: NativeCompaction) -> Native {
    match n {
        NativeCompaction::OpenAi => Native::Openai,
        _ => Native::Anthropic,
    }
}

/// `reasoning` on an assistant record: a thinking / reasoning block, `signed` when it
/// carries a signature.
#[derive(Serialize, Deserialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
enum Reasoning {
    Plain,
    Signed,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct UnitLine {
    call_id: String,
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "present")]
    arguments: Option<Box<RawValue>>,
    #[serde(default)]
    status: Option<Status>,
    #[serde(default)]
    first_line: Option<String>,
}

/// An orphan result a summary lists: `{"call_id", "first_line"?}`.
#[derive(Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct OrphanLine {
    call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    first_line: Option<String>,
}

#[derive(Serialize)]
struct OutLine<'a> {
    kind: Kind,
    #[serde(skip_serializing_if = "Option::is_none")]
    call_id: Option<&'a str>,
    tokens: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    bound: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    covers: Option<Vec<UnitOut<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    orphans: Option<Vec<OrphanLine>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<Reasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    compaction: Option<Native>,
}

#[derive(Serialize)]
struct UnitOut<'a> {
    call_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    arguments: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status: Option<Status>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_line: Option<&'a str>,
}

/// JSON text kept verbatim when it is valid JSON, written as a JSON string otherwise.
fn raw(text: &str) -> Option<Box<RawValue>> {
    RawValue::from_string(text.to_owned())
        .or_else(|_| serde_json::value::to_raw_value(text))
        .ok()
}

/// Parses one line (without its newline) as a record, ignoring payload fields. `line`
/// is used in errors only. **O(len)**.
///
/// # Errors
/// [`ReadError::Invalid`] naming what is wrong: bad JSON, an unknown kind, a missing or
/// mistyped field, a negative or too large token count, a missing or empty call id, a
/// payload field on a kind that cannot carry it.
pub fn parse_line(text: &str, line: usize) -> Result<Record, ReadError> {
    parse_entry(text, line).map(|e| e.record)
}

/// Parses one line (without its newline) as an entry: the record and its payload.
/// `line` is used in errors only. **O(len)**.
///
/// # Errors
/// As [`parse_line`].
pub fn parse_entry(text: &str, line: usize) -> Result<Entry, ReadError> {
    let invalid = |message: String| ReadError::Invalid { line, message };
    if text.starts_with('\u{feff}') {
        return Err(invalid(super::detect::BYTE_ORDER_MARK.to_owned()));
    }
    // serde would read a struct from an array too (`["user",null,5]`): refuse it here.
    if text.trim_start().starts_with('[') {
        return Err(invalid(
            "a record is a JSON object with `kind` and `tokens`, not an array (column 1)"
                .to_owned(),
        ));
    }
    let parsed: Line<'_> = serde_json::from_str(text).map_err(|e| invalid(describe(&e)))?;
    let kind = parsed.kind;
    let only = |field: &str, present: bool, allowed: &[&str]| -> Result<(), ReadError> {
        if present && !allowed.contains(&kind_name(&kind)) {
            return Err(ReadError::Invalid {
                line,
                message: format!(
                    "{} record has a `{field}` field; only {} records carry one",
                    kind_name(&kind),
                    allowed.join(" and ")
                ),
            });
        }
        Ok(())
    };
    only("name", parsed.name.is_some(), &["tool_use"])?;
    only("arguments", parsed.arguments.is_some(), &["tool_use"])?;
    only("status", parsed.status.is_some(), &["tool_result"])?;
    only("content", parsed.content.is_some(), &["tool_result"])?;
    only("text", parsed.text.is_some(), &["summary"])?;
    only("covers", parsed.covers.is_some(), &["summary"])?;
    only("orphans", parsed.orphans.is_some(), &["summary"])?;
    only("reasoning", parsed.reasoning.is_some(), &["assistant"])?;
    only("compaction", parsed.compaction.is_some(), &["assistant"])?;
    if parsed.compaction.is_some() {
        if parsed.reasoning.is_some() {
            return Err(invalid(
                "assistant record has both `reasoning` and `compaction`; a record is one or the other"
                    .to_owned(),
            ));
        }
        if parsed.bound {
            return Err(invalid(
                "compaction record is bound to the record before it; the live history starts at a compaction record, so it cannot be"
                    .to_owned(),
            ));
        }
    }
    let (record, payload) = match (kind, parsed.call_id) {
        (Kind::User, None) => (Record::user(parsed.tokens), Payload::None),
        (Kind::Assistant, None) => (
            Record::assistant(parsed.tokens),
            match (parsed.reasoning, parsed.compaction) {
                (Some(r), _) => Payload::Reasoning {
                    signed: matches!(r, Reasoning::Signed),
                },
                (None, Some(native)) => Payload::Compaction(native.into()),
                (None, None) => Payload::None,
            },
        ),
        (Kind::Summary, None) => {
            let Some(covers) = parsed.covers else {
                return Err(invalid("summary record has no `covers` list".to_owned()));
            };
            let mut units = Vec::with_capacity(covers.len());
            for u in covers {
                if u.call_id.is_empty() {
                    return Err(invalid("summary covers an empty call_id".to_owned()));
                }
                units.push(Unit {
                    call_id: CallId::from(u.call_id),
                    tool: u.name,
                    arguments: u.arguments.map(|a| a.get().to_owned()),
                    status: u.status.map(ResultStatus::from),
                    first_line: u.first_line,
                });
            }
            let mut orphans = Vec::new();
            for o in parsed.orphans.unwrap_or_default() {
                if o.call_id.is_empty() {
                    return Err(invalid(
                        "summary lists an orphan with an empty call_id".to_owned(),
                    ));
                }
                orphans.push(Orphan {
                    call_id: CallId::from(o.call_id),
                    first_line: o.first_line,
                });
            }
            let record = Record::summary(units.iter().map(|u| u.call_id.clone()), parsed.tokens);
            (
                record,
                Payload::Summary {
                    text: parsed.text,
                    units,
                    orphans,
                },
            )
        }
        (kind @ (Kind::User | Kind::Assistant | Kind::Summary), Some(id)) => {
            return Err(invalid(format!(
                "{} record has a call_id ({id:?}); only tool_use and tool_result carry one",
                kind_name(&kind)
            )));
        }
        (kind @ (Kind::ToolUse | Kind::ToolResult), None) => {
            return Err(invalid(format!(
                "{} record has no call_id",
                kind_name(&kind)
            )));
        }
        (kind @ (Kind::ToolUse | Kind::ToolResult), Some(id)) if id.is_empty() => {
            return Err(invalid(format!(
                "{} record has an empty call_id",
                kind_name(&kind)
            )));
        }
        (Kind::ToolUse, Some(id)) => {
            let payload = if parsed.name.is_some() || parsed.arguments.is_some() {
                Payload::Call {
                    name: parsed.name,
                    arguments: parsed.arguments.map(|a| a.get().to_owned()),
                }
            } else {
                Payload::None
            };
            (Record::tool_use(id.into_owned(), parsed.tokens), payload)
        }
        (Kind::ToolResult, Some(id)) => {
            let payload = if parsed.status.is_some() || parsed.content.is_some() {
                Payload::Result {
                    status: parsed.status.map(ResultStatus::from),
                    content: parsed.content,
                }
            } else {
                Payload::None
            };
            (Record::tool_result(id.into_owned(), parsed.tokens), payload)
        }
    };
    let record = if parsed.bound {
        record.bound_to_previous()
    } else {
        record
    };
    Ok(Entry::new(record, payload))
}

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::User => "user",
        Kind::Assistant => "assistant",
        Kind::ToolUse => "tool_use",
        Kind::ToolResult => "tool_result",
        Kind::Summary => "summary",
    }
}

/// serde_json's message without its " at line 1 column N" tail (we name the line), but
/// with the column kept.
fn describe(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let core = text
        .rsplit_once(" at line ")
        .map_or(text.as_str(), |(core, _)| core);
    format!("{core} (column {})", e.column())
}

/// Writes `record` as one JSONL line, newline included. A summary is written with
/// bare units (its call ids only). **O(len)**.
///
/// # Errors
/// Whatever writing to `out` returns.
pub fn write_line<W: std::io::Write>(out: W, record: &Record) -> std::io::Result<()> {
    write_entry(out, &Entry::from(record.clone()))
}

/// Writes `entry` as one JSONL line with its payload, newline included. **O(len)**.
///
/// # Errors
/// Whatever writing to `out` returns.
pub fn write_entry<W: std::io::Write>(mut out: W, entry: &Entry) -> std::io::Result<()> {
    let record = &entry.record;
    let (kind, call_id) = match record.kind() {
        RecordKind::ToolUse(id) => (Kind::ToolUse, Some(id.as_str())),
        RecordKind::ToolResult(id) => (Kind::ToolResult, Some(id.as_str())),
        RecordKind::Summary(_) => (Kind::Summary, None),
        RecordKind::Assistant => (Kind::Assistant, None),
        _ => (Kind::User, None),
    };
    let mut line = OutLine {
        kind,
        call_id,
        tokens: record.tokens(),
        bound: record.is_bound_to_previous(),
        name: None,
        arguments: None,
        status: None,
        content: None,
        text: None,
        covers: None,
        orphans: None,
        reasoning: None,
        compaction: None,
    };
    let units;
    match (&entry.payload, record.kind()) {
        (Payload::Call { name, arguments }, RecordKind::ToolUse(_)) => {
            line.name = name.as_deref();
            line.arguments = arguments.as_deref().and_then(raw);
        }
        (Payload::Result { status, content }, RecordKind::ToolResult(_)) => {
            line.status = status.map(status_out);
            line.content = content.as_deref();
        }
        (Payload::Summary { text, orphans, .. }, RecordKind::Summary(_)) => {
            line.text = text.as_deref();
            line.orphans = (!orphans.is_empty()).then(|| {
                orphans
                    .iter()
                    .map(|o| OrphanLine {
                        call_id: o.call_id.to_string(),
                        first_line: o.first_line.clone(),
                    })
                    .collect()
            });
        }
        (Payload::Reasoning { signed }, RecordKind::Assistant) => {
            line.reasoning = Some(if *signed {
                Reasoning::Signed
            } else {
                Reasoning::Plain
            });
        }
        (Payload::Compaction(native), RecordKind::Assistant) => {
            line.compaction = Some(native_out(*native));
        }
        _ => {}
    }
    if matches!(record.kind(), RecordKind::Summary(_)) {
        units = entry.units();
        line.covers = Some(
            units
                .iter()
                .map(|u| UnitOut {
                    call_id: u.call_id.as_str(),
                    name: u.tool.as_deref(),
                    arguments: u.arguments.as_deref().and_then(raw),
                    status: u.status.map(status_out),
                    first_line: u.first_line.as_deref(),
                })
                .collect(),
        );
    }
    serde_json::to_writer(&mut out, &line)?;
    out.write_all(b"\n")
}

/// Reads records JSONL line by line, yielding `(line number, record)`. Lines are read
/// into one reused buffer, so memory stays bounded by the longest line, which is capped
/// (see [`Reader::max_line_bytes`]). **O(1)** per byte read.
pub struct Reader<R> {
    input: R,
    buf: Vec<u8>,
    line: usize,
    max_line_bytes: usize,
    done: bool,
}

impl<R: BufRead> Reader<R> {
    /// A reader over `input` with the default line cap ([`DEFAULT_MAX_LINE_BYTES`]).
    pub fn new(input: R) -> Self {
        Reader {
            input,
            buf: Vec::new(),
            line: 0,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            done: false,
        }
    }

    /// Sets the longest line accepted, in bytes (newline excluded).
    #[must_use]
    pub fn max_line_bytes(mut self, max: usize) -> Self {
        self.max_line_bytes = max;
        self
    }

    /// Reads the next line into `buf`; `Ok(false)` at the end. Stops reading a line once
    /// it passes the cap, so a huge line costs no more memory than the cap.
    fn next_line(&mut self) -> Result<bool, ReadError> {
        self.buf.clear();
        self.line += 1;
        let line = self.line;
        let limit = self.max_line_bytes.saturating_add(2) as u64;
        let read = std::io::Read::take(&mut self.input, limit)
            .read_until(b'\n', &mut self.buf)
            .map_err(|source| ReadError::Io { line, source })?;
        if read == 0 {
            return Ok(false);
        }
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                self.buf.pop();
            }
        }
        if self.buf.len() > self.max_line_bytes {
            return Err(ReadError::LineTooLong {
                line,
                max: self.max_line_bytes,
            });
        }
        Ok(true)
    }
}

impl<R: BufRead> Reader<R> {
    /// Reads entries (records with their payloads) instead of records.
    pub fn entries(self) -> Entries<R> {
        Entries(self)
    }

    fn next_parsed<T>(
        &mut self,
        parse: fn(&str, usize) -> Result<T, ReadError>,
    ) -> Option<Result<(usize, T), ReadError>> {
        while !self.done {
            match self.next_line() {
                Ok(false) => self.done = true,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(true) => {
                    let line = self.line;
                    let text = match std::str::from_utf8(&self.buf) {
                        Ok(text) => text,
                        Err(e) => {
                            self.done = true;
                            return Some(Err(ReadError::Invalid {
                                line,
                                message: format!(
                                    "not UTF-8 text (invalid byte at column {})",
                                    e.valid_up_to() + 1
                                ),
                            }));
                        }
                    };
                    if text.trim().is_empty() {
                        continue;
                    }
                    let result = parse(text, line).map(|r| (line, r));
                    if result.is_err() {
                        self.done = true;
                    }
                    return Some(result);
                }
            }
        }
        None
    }
}

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<(usize, Record), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_parsed(parse_line)
    }
}

/// Reads records JSONL as entries, yielding `(line number, entry)`; see
/// [`Reader::entries`]. **O(1)** per byte read.
pub struct Entries<R>(Reader<R>);

impl<R: BufRead> Iterator for Entries<R> {
    type Item = Result<(usize, Entry), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next_parsed(parse_entry)
    }
}
