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
    /// As [`Shorten`](ArgumentPolicy::Shorten), and the marker of a cut field also
    /// names a 64-bit FNV-1a hash of the field's full value
    /// (`…[N more chars, fnv1a64 HEX]`), so that two calls whose long arguments differ
    /// past the cut stay told apart and a value can be checked against the original.
    /// The `digest` strategy's default.
    ShortenWithHash {
        /// The longest string field kept whole.
        max_chars: usize,
    },
}

/// The 64-bit FNV-1a hash, fed piece by piece: stable across runs and platforms, for
/// digests and markers a reader may recompute (not for hash tables). **O(len)**.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fnv1a(u64);

impl Fnv1a {
    pub(crate) fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    pub(crate) fn eat(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub(crate) fn finish(self) -> u64 {
        self.0
    }
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
        ArgumentPolicy::Shorten { max_chars } => shorten(arguments, max_chars, false),
        ArgumentPolicy::ShortenWithHash { max_chars } => shorten(arguments, max_chars, true),
    }
}

#[cfg(feature = "formats")]
fn shorten(arguments: &str, max_chars: usize, hash: bool) -> String {
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
                let more = chars - max_chars;
                *s = if hash {
                    let mut h = Fnv1a::new();
                    h.eat(s.as_bytes());
                    format!("{kept}…[{more} more chars, fnv1a64 {:016x}]", h.finish())
                } else {
                    format!("{kept}…[{more} more chars]")
                };
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
fn shorten(arguments: &str, _max_chars: usize, _hash: bool) -> String {
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

/// A token estimate for `text`: one token per four bytes, rounded up, as
/// `format::ByteEstimate` counts. What the strategies count for the text they write
/// (placeholders, digests, ledgers) when the caller gives no count. **O(1)**.
pub fn estimate_tokens(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// A rough token count for a summary of `prose` and `units`: a quarter of its bytes
/// (40 bytes of ledger framing per unit), at least 1. What `cutpoint compact` counts
/// for a summary record, and the strategies for their digests and ledgers.
/// **O(units)**.
pub fn estimate_summary_tokens(prose: Option<&str>, units: &[Unit]) -> u64 {
    let bytes: usize = prose.map_or(0, str::len)
        + units
            .iter()
            .map(|u| {
                40 + u.call_id.len()
                    + u.tool.as_deref().map_or(0, str::len)
                    + u.arguments.as_deref().map_or(0, str::len)
                    + u.first_line.as_deref().map_or(0, str::len)
            })
            .sum::<usize>();
    (bytes as u64 / 4).max(1)
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
        // With the hash: the marker names the full value's hash, so values that differ
        // only past the cut stay apart.
        let other = args.replace(
            &format!(r#""content":"{long}""#),
            &format!(r#""content":"{long}y""#),
        );
        let hashed =
            |a: &str| shorten_arguments(a, ArgumentPolicy::ShortenWithHash { max_chars: 10 });
        let v: serde_json::Value = serde_json::from_str(&hashed(&args)).unwrap();
        let mut h = Fnv1a::new();
        h.eat(long.as_bytes());
        assert_eq!(
            v["content"],
            format!("xxxxxxxxxx…[40 more chars, fnv1a64 {:016x}]", h.finish())
        );
        assert_eq!(v["command"], long.as_str());
        assert_ne!(hashed(&args), hashed(&other));
        assert_eq!(hashed("[1,2]"), "[1,2]");
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
