//! The records JSONL format: one record per line, the seed's `Record` as JSON.
//!
//! ```text
//! {"kind":"user","tokens":1200}
//! {"kind":"tool_use","call_id":"a","tokens":12}
//! {"kind":"tool_result","call_id":"a","tokens":800}
//! ```
//!
//! `kind` is one of `user`, `assistant`, `tool_use`, `tool_result`; `tokens` a
//! non-negative integer below 2^64; `call_id` a non-empty string, required on tool
//! records and absent or `null` on the others. Unknown fields are errors, so that a
//! typo is never silently dropped. Blank lines are skipped; an empty input is an empty
//! log. Every error names its line.

use std::io::BufRead;

use serde::{Deserialize, Serialize};

use crate::record::{Record, RecordKind};

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

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Kind {
    User,
    Assistant,
    ToolUse,
    ToolResult,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Line<'a> {
    kind: Kind,
    #[serde(default, borrow)]
    call_id: Option<std::borrow::Cow<'a, str>>,
    tokens: u64,
    #[serde(default)]
    bound: bool,
}

#[derive(Serialize)]
struct OutLine<'a> {
    kind: Kind,
    #[serde(skip_serializing_if = "Option::is_none")]
    call_id: Option<&'a str>,
    tokens: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    bound: bool,
}

/// Parses one line (without its newline) as a record. `line` is used in errors only.
/// **O(len)**.
///
/// # Errors
/// [`ReadError::Invalid`] naming what is wrong: bad JSON, an unknown kind, a missing or
/// mistyped field, a negative or too large token count, a missing or empty call id.
pub fn parse_line(text: &str, line: usize) -> Result<Record, ReadError> {
    let invalid = |message: String| ReadError::Invalid { line, message };
    let parsed: Line<'_> = serde_json::from_str(text).map_err(|e| invalid(describe(&e)))?;
    let record = match (parsed.kind, parsed.call_id) {
        (Kind::User, None) => Record::user(parsed.tokens),
        (Kind::Assistant, None) => Record::assistant(parsed.tokens),
        (kind @ (Kind::User | Kind::Assistant), Some(id)) => {
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
        (Kind::ToolUse, Some(id)) => Record::tool_use(id.into_owned(), parsed.tokens),
        (Kind::ToolResult, Some(id)) => Record::tool_result(id.into_owned(), parsed.tokens),
    };
    Ok(if parsed.bound {
        record.bound_to_previous()
    } else {
        record
    })
}

fn kind_name(kind: &Kind) -> &'static str {
    match kind {
        Kind::User => "user",
        Kind::Assistant => "assistant",
        Kind::ToolUse => "tool_use",
        Kind::ToolResult => "tool_result",
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

/// Writes `record` as one JSONL line, newline included. **O(len)**.
///
/// # Errors
/// Whatever writing to `out` returns.
pub fn write_line<W: std::io::Write>(mut out: W, record: &Record) -> std::io::Result<()> {
    let (kind, call_id) = match record.kind() {
        RecordKind::User => (Kind::User, None),
        RecordKind::Assistant => (Kind::Assistant, None),
        RecordKind::ToolUse(id) => (Kind::ToolUse, Some(id.as_str())),
        RecordKind::ToolResult(id) => (Kind::ToolResult, Some(id.as_str())),
    };
    let line = OutLine {
        kind,
        call_id,
        tokens: record.tokens(),
        bound: record.is_bound_to_previous(),
    };
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

impl<R: BufRead> Iterator for Reader<R> {
    type Item = Result<(usize, Record), ReadError>;

    fn next(&mut self) -> Option<Self::Item> {
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
                    let result = parse_line(text, line).map(|r| (line, r));
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

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Vec<Result<(usize, Record), String>> {
        Reader::new(text.as_bytes())
            .map(|r| r.map_err(|e| e.to_string()))
            .collect()
    }

    #[test]
    fn reads_every_kind_and_skips_blank_lines() {
        let got = read(
            "{\"kind\":\"user\",\"tokens\":5}\n\n{\"kind\":\"tool_use\",\"call_id\":\"a\",\"tokens\":1}\r\n{\"kind\":\"tool_result\",\"call_id\":\"a\",\"tokens\":2}\n{\"kind\":\"assistant\",\"call_id\":null,\"tokens\":0}",
        );
        assert_eq!(
            got,
            vec![
                Ok((1, Record::user(5))),
                Ok((3, Record::tool_use("a", 1))),
                Ok((4, Record::tool_result("a", 2))),
                Ok((5, Record::assistant(0))),
            ]
        );
    }

    #[test]
    fn empty_input_is_an_empty_log() {
        assert!(read("").is_empty());
    }

    #[test]
    fn errors_name_the_line_and_the_fault() {
        let cases = [
            (
                "{\"kind\":\"tool\",\"tokens\":1}",
                "line 2: unknown variant `tool`",
            ),
            (
                "{\"kind\":\"user\",\"tokens\":-1}",
                "line 2: invalid value: integer `-1`",
            ),
            (
                "{\"kind\":\"user\",\"tokens\":18446744073709551616}",
                "line 2: invalid type: floating point",
            ),
            (
                "{\"kind\":\"tool_use\",\"tokens\":1}",
                "line 2: tool_use record has no call_id",
            ),
            (
                "{\"kind\":\"tool_result\",\"call_id\":\"\",\"tokens\":1}",
                "line 2: tool_result record has an empty call_id",
            ),
            (
                "{\"kind\":\"user\",\"call_id\":\"x\",\"tokens\":1}",
                "line 2: user record has a call_id",
            ),
            ("{\"kind\":\"user\"}", "line 2: missing field `tokens`"),
            (
                "{\"kind\":\"user\",\"tokens\":1,\"extra\":1}",
                "line 2: unknown field `extra`",
            ),
            (
                "{\"kind\":\"user\",\"tokens\":\"1\"}",
                "line 2: invalid type: string",
            ),
            ("not json", "line 2: expected"),
        ];
        for (bad, want) in cases {
            let got = read(&format!(
                "{{\"kind\":\"user\",\"tokens\":1}}\n{bad}\n{{\"kind\":\"user\",\"tokens\":1}}"
            ));
            assert_eq!(got.len(), 2, "reading stops at the first error: {bad}");
            let err = got[1].as_ref().unwrap_err();
            assert!(err.starts_with(want), "{bad}: got {err:?}, want {want:?}");
        }
    }

    #[test]
    fn huge_lines_and_garbage_are_errors_not_allocations() {
        let huge = format!(
            "{{\"kind\":\"user\",\"tokens\":1,\"pad\":\"{}\"}}",
            "x".repeat(100)
        );
        let got: Vec<_> = Reader::new(huge.as_bytes()).max_line_bytes(50).collect();
        assert!(matches!(
            got[..],
            [Err(ReadError::LineTooLong { line: 1, max: 50 })]
        ));
        let garbage: &[u8] = &[0xff, 0xfe, b'{', b'\n'];
        let got: Vec<_> = Reader::new(garbage).collect();
        assert!(matches!(got[..], [Err(ReadError::Invalid { line: 1, .. })]));
        let deep = "[".repeat(100_000);
        let got: Vec<_> = Reader::new(deep.as_bytes()).collect();
        assert!(matches!(got[..], [Err(ReadError::Invalid { line: 1, .. })]));
    }

    #[test]
    fn write_then_read_round_trips() {
        let records = [
            Record::user(3),
            Record::tool_use("x\"y", 4),
            Record::tool_result("x\"y", 5).bound_to_previous(),
            Record::assistant(6),
        ];
        let mut out = Vec::new();
        for r in &records {
            write_line(&mut out, r).unwrap();
        }
        let back: Vec<Record> = Reader::new(&out[..]).map(|r| r.unwrap().1).collect();
        assert_eq!(back, records);
    }
}
