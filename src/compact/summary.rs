//! Summary units and their ledger: a pair's call and result, condensed without losing
//! what is needed to interpret the result (the specification's condition 4), and the
//! one renderer that writes a summary's ledger lines, whatever writes the summary
//! (records JSONL keeps the units as structured `covers`; every provider rewrite and
//! the examples use [`summary_text`]).

use std::fmt::{self, Write as _};

use super::{Entry, Payload, ResultStatus, Unit};
use crate::CallId;

/// How arguments are written into a summary's units.
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub enum ArgumentPolicy {
    /// Verbatim, always safe.
    #[default]
    Verbatim,
    /// String fields of a JSON object longer than `max_chars` are cut to that length
    /// (with a marker saying how much was cut), except the fields that say *what* was
    /// done: [`PROTECTED_FIELDS`] (command strings, paths, queries, URLs, patterns),
    /// which are kept whole. Arguments that are not a JSON object are kept verbatim.
    /// Needs the `formats` feature (serde_json); without it arguments stay verbatim.
    Shorten {
        /// The longest string field kept whole.
        max_chars: usize,
    },
}

/// Argument fields a shortening policy never cuts: dropping them is the seed's
/// "deletion wearing a retention's clothes".
pub const PROTECTED_FIELDS: &[&str] = &[
    "command",
    "cmd",
    "path",
    "file_path",
    "filepath",
    "paths",
    "query",
    "q",
    "url",
    "pattern",
    "glob",
    "file",
    "filename",
    "notebook_path",
    "uri",
    "workdir",
    "cwd",
];

/// `arguments` under `policy`. **O(len)**.
pub fn shorten_arguments(arguments: &str, policy: ArgumentPolicy) -> String {
    match policy {
        ArgumentPolicy::Verbatim => arguments.to_owned(),
        ArgumentPolicy::Shorten { max_chars } => shorten(arguments, max_chars),
    }
}

#[cfg(feature = "formats")]
fn shorten(arguments: &str, max_chars: usize) -> String {
    let Ok(serde_json::Value::Object(mut map)) = serde_json::from_str(arguments) else {
        return arguments.to_owned();
    };
    let mut changed = false;
    for (key, value) in map.iter_mut() {
        if PROTECTED_FIELDS.contains(&key.as_str()) {
            continue;
        }
        if let serde_json::Value::String(s) = value {
            let chars = s.chars().count();
            if chars > max_chars {
                let kept: String = s.chars().take(max_chars).collect();
                *s = format!("{kept}…[{} more chars]", chars - max_chars);
                changed = true;
            }
        }
    }
    if changed {
        serde_json::Value::Object(map).to_string()
    } else {
        arguments.to_owned()
    }
}

#[cfg(not(feature = "formats"))]
fn shorten(arguments: &str, _max_chars: usize) -> String {
    arguments.to_owned()
}

/// The longest first line a unit keeps, in characters.
const FIRST_LINE_CHARS: usize = 200;

/// The first non-blank line of `content`, trimmed and cut to 200 characters (with an
/// ellipsis): what a summary unit keeps of a result, in every format. **O(len)**.
pub fn first_line(content: &str) -> String {
    let line = content
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if line.chars().count() > FIRST_LINE_CHARS {
        let mut cut: String = line.chars().take(FIRST_LINE_CHARS).collect();
        cut.push('…');
        cut
    } else {
        line.to_owned()
    }
}

/// The unit of the pair `call` (a `tool_use` entry) and `result` (its first result).
/// A call recorded without arguments gets `Some("null")`: nothing was lost. **O(len)**.
pub(crate) fn pair_unit(id: &CallId, call: &Entry, result: &Entry, policy: ArgumentPolicy) -> Unit {
    let (tool, arguments) = match &call.payload {
        Payload::Call { name, arguments } => (
            name.clone(),
            Some(
                arguments
                    .as_deref()
                    .map_or_else(|| "null".to_owned(), |a| shorten_arguments(a, policy)),
            ),
        ),
        _ => (None, Some("null".to_owned())),
    };
    let (status, first) = match &result.payload {
        Payload::Result { status, content } => (
            status.or(Some(ResultStatus::Ok)),
            content.as_deref().map(first_line),
        ),
        _ => (None, None),
    };
    Unit {
        call_id: id.clone(),
        tool,
        arguments,
        status,
        first_line: first,
    }
}

/// The heading of a summary's ledger.
const LEDGER_HEADING: &str =
    "Tool calls summarized (call id, tool, arguments, first line of result):";

impl Unit {
    /// The unit as one ledger line, without the leading `- `:
    /// `CALL_ID TOOL ARGUMENTS => FIRST LINE OF RESULT`. The result's line is prefixed
    /// with `error: ` or `aborted: ` for those statuses; a unit without a tool name
    /// shows `?`, lost arguments `(arguments lost)`, no result `(no result)`.
    /// **O(len)**.
    pub fn ledger_line(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Unit {
    /// See [`Unit::ledger_line`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = match self.status {
            Some(ResultStatus::Error) => "error: ",
            Some(ResultStatus::Aborted) => "aborted: ",
            _ => "",
        };
        write!(
            f,
            "{} {} {} => {status}{}",
            self.call_id,
            self.tool.as_deref().unwrap_or("?"),
            self.arguments.as_deref().unwrap_or("(arguments lost)"),
            self.first_line.as_deref().unwrap_or("(no result)")
        )
    }
}

/// A summary's text: `prose`, then (when there are units) a blank line, a heading and
/// one line per unit, `- ` followed by its [ledger line](Unit::ledger_line). The one
/// place a summary's ledger is written. **O(len)**.
///
/// ```
/// use cutpoint::compact::{ResultStatus, Unit, summary_text};
/// let unit = Unit {
///     status: Some(ResultStatus::Error),
///     first_line: Some("3 failed".into()),
///     tool: Some("bash".into()),
///     arguments: Some(r#"{"command":"pytest -x"}"#.into()),
///     ..Unit::bare("call_1".into())
/// };
/// assert_eq!(
///     summary_text("Ran the tests.", &[unit]),
///     "Ran the tests.\n\nTool calls summarized (call id, tool, arguments, first line of result):\n\
///      - call_1 bash {\"command\":\"pytest -x\"} => error: 3 failed"
/// );
/// ```
pub fn summary_text(prose: &str, units: &[Unit]) -> String {
    let mut text = prose.to_owned();
    if !units.is_empty() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(LEDGER_HEADING);
        for unit in units {
            let _ = write!(text, "\n- {unit}");
        }
    }
    text
}

#[cfg(all(test, feature = "formats"))]
mod tests {
    use super::*;

    #[test]
    fn shortening_cuts_long_fields_but_never_protected_ones() {
        let long = "x".repeat(50);
        let args = format!(r#"{{"command":"{long}","content":"{long}","n":3}}"#);
        let out = shorten_arguments(&args, ArgumentPolicy::Shorten { max_chars: 10 });
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            v["command"],
            long.as_str(),
            "the command string is kept whole"
        );
        assert_eq!(v["content"], "xxxxxxxxxx…[40 more chars]");
        assert_eq!(v["n"], 3);
        assert_eq!(shorten_arguments(&args, ArgumentPolicy::Verbatim), args);
        assert_eq!(
            shorten_arguments("not json", ArgumentPolicy::Shorten { max_chars: 1 }),
            "not json"
        );
    }

    #[test]
    fn first_line_skips_blank_lines_and_caps_length() {
        assert_eq!(
            first_line("\n  \n  exit 1: 3 failed\nmore"),
            "exit 1: 3 failed"
        );
        assert_eq!(
            first_line(&"y".repeat(300)).chars().count(),
            FIRST_LINE_CHARS + 1
        );
        assert_eq!(first_line(""), "");
    }
}
