//! Building summary units: a pair's call and result, condensed without losing what
//! is needed to interpret the result (the seed's condition 4).

use super::{Entry, Payload, ResultStatus, Unit};
use crate::record::CallId;

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
    /// Needs the `jsonl` feature (serde_json); without it arguments stay verbatim.
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

#[cfg(feature = "jsonl")]
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

#[cfg(not(feature = "jsonl"))]
fn shorten(arguments: &str, _max_chars: usize) -> String {
    arguments.to_owned()
}

/// The longest first line a unit keeps, in characters.
const FIRST_LINE_CHARS: usize = 200;

/// The first non-blank line of `content`, cut to a readable length. **O(len)**.
pub(crate) fn first_line(content: &str) -> String {
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

#[cfg(all(test, feature = "jsonl"))]
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
