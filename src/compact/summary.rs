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
pub(crate) const FIRST_LINE_CHARS: usize = 200;

/// The first non-blank line of `content`, trimmed and cut to 200 characters (with an
/// ellipsis): what a summary unit keeps of a result, in every format. **O(len)**.
pub fn first_line(content: &str) -> String {
    let line = content
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    // A line of no more bytes than that has no more characters; past the first
    // FIRST_LINE_CHARS characters, a longer one is cut at a character's start (one
    // copy; the count stops there).
    if line.len() <= FIRST_LINE_CHARS {
        return line.to_owned();
    }
    match nth_char_start(line, FIRST_LINE_CHARS) {
        Some(end) => {
            let mut cut = String::with_capacity(end + '…'.len_utf8());
            cut.push_str(&line[..end]);
            cut.push('…');
            cut
        }
        None => line.to_owned(),
    }
}

/// Where the character after the first `n` of `text` starts (`char_indices().nth(n)`),
/// `None` when `text` has no more than `n`. **O(n)**, and no character decoded when the
/// first `n` bytes are ASCII (one vectorized check): the common case of a long line.
pub(crate) fn nth_char_start(text: &str, n: usize) -> Option<usize> {
    if text.len() > n && text.as_bytes()[..n].is_ascii() {
        return Some(n);
    }
    text.char_indices().nth(n).map(|(at, _)| at)
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
    summary_tokens_of_bytes(prose.map_or(0, str::len) + units.iter().map(unit_bytes).sum::<usize>())
}

/// What one unit adds to [`estimate_summary_tokens`]'s byte count. **O(1)**.
pub(crate) fn unit_bytes(u: &Unit) -> usize {
    40 + u.call_id.len()
        + u.tool.as_deref().map_or(0, str::len)
        + u.arguments.as_deref().map_or(0, str::len)
        + u.first_line.as_deref().map_or(0, str::len)
}

/// [`estimate_summary_tokens`] of a summary of `bytes` bytes (prose and
/// [`unit_bytes`] of its units). **O(1)**.
pub(crate) fn summary_tokens_of_bytes(bytes: usize) -> u64 {
    (bytes as u64 / 4).max(1)
}

/// The heading of a summary's ledger.
pub(crate) const LEDGER_HEADING: &str =
    "Tool calls summarized (call id, tool, arguments, first line of result):";

/// What the ledger heading is followed by when no tool call was summarized.
const NO_UNITS: &str = " none";

/// The heading of a summary's list of orphan results.
const ORPHAN_HEADING: &str =
    "Tool results without their call (orphans; call id => first line of result):";

/// A ledger line starts with this (after a line break).
const ITEM: &str = "\n- ";

impl Unit {
    /// The unit as one ledger line, without the leading `- `:
    /// `CALL_ID TOOL ARGUMENTS => FIRST LINE OF RESULT`. The result's line is prefixed
    /// with `error: ` or `aborted: ` for those statuses; a unit without a tool name
    /// shows `?`, lost arguments `(arguments lost)`, no result `(no result)`.
    /// Arguments are written verbatim, except that arguments that would not read back
    /// as themselves (holding a line break followed by `- `, as a patch does, or
    /// ` => `, as code does, or starting with `"`) are written as a JSON string
    /// literal; an ok result whose first line starts like a status (`error: `…) is
    /// prefixed `ok: `. So [`SummaryParts::parse`] reads every unit back exactly as
    /// it was: a ledger is carried forward verbatim, pass after pass. **O(len)**.
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
            "{} {} ",
            self.call_id,
            self.tool.as_deref().unwrap_or("?")
        )?;
        match self.arguments.as_deref() {
            None => f.write_str(LOST)?,
            Some(a) if needs_quoting(a) => write_json_string(f, a)?,
            Some(a) => f.write_str(a)?,
        }
        let first = self.first_line.as_deref();
        // An ok result whose line would read as a status or as no result says so.
        let status = match (status, first) {
            ("", Some(l)) if self.status.is_some() && reads_as_status(l) => "ok: ",
            (s, _) => s,
        };
        write!(f, " => {status}{}", first.unwrap_or(NO_RESULT))
    }
}

/// What a unit whose arguments were lost writes in their place.
const LOST: &str = "(arguments lost)";

/// What a unit without a result writes in its place.
const NO_RESULT: &str = "(no result)";

/// Whether arguments are written as a JSON string literal: when written as they are
/// they would not read back as themselves (a line break followed by `- ` would start
/// a new item, ` => ` would end them early, a leading `"` would read as a literal, or
/// they would read as lost). **O(len)**.
fn needs_quoting(a: &str) -> bool {
    a.contains(ITEM) || a.contains(" => ") || a.starts_with('"') || a == LOST
}

/// Whether a result's first line, written after ` => `, would read as a status
/// prefix or as no result. **O(1)**.
fn reads_as_status(line: &str) -> bool {
    ["ok: ", "error: ", "aborted: "]
        .iter()
        .any(|p| line.starts_with(p))
        || line == NO_RESULT
}

/// Reads the JSON string literal at the start of `s`: its value and the rest of `s`
/// after it; `None` if `s` does not start with a well-formed one. **O(len)**.
fn read_json_string(s: &str) -> Option<(String, &str)> {
    let mut chars = s.strip_prefix('"')?.char_indices();
    let mut out = String::new();
    let body = &s[1..];
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((out, &body[i + 1..])),
            '\\' => {
                let (_, e) = chars.next()?;
                match e {
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    '/' => out.push('/'),
                    'n' => out.push('\n'),
                    'r' => out.push('\r'),
                    't' => out.push('\t'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'u' => {
                        let hex = |chars: &mut std::str::CharIndices<'_>| {
                            let mut v = 0u32;
                            for _ in 0..4 {
                                v = v * 16 + chars.next()?.1.to_digit(16)?;
                            }
                            Some(v)
                        };
                        let hi = hex(&mut chars)?;
                        let code = if (0xd800..0xdc00).contains(&hi) {
                            if chars.next()?.1 != '\\' || chars.next()?.1 != 'u' {
                                return None;
                            }
                            let lo = hex(&mut chars)?;
                            if !(0xdc00..0xe000).contains(&lo) {
                                return None;
                            }
                            0x10000 + ((hi - 0xd800) << 10) + (lo - 0xdc00)
                        } else {
                            hi
                        };
                        out.push(char::from_u32(code)?);
                    }
                    _ => return None,
                }
            }
            c => out.push(c),
        }
    }
    None
}

/// `s` as a JSON string literal. **O(len)**.
fn write_json_string(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_char('"')?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\r' => f.write_str("\\r")?,
            '\t' => f.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(f, "\\u{:04x}", c as u32)?,
            c => f.write_char(c)?,
        }
    }
    f.write_char('"')
}

/// A result a summarized region held without its call (an orphan, or a second result
/// of a call answered before): the summary lists it, so it is not dropped without a
/// word.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Orphan {
    /// The id the result answers.
    pub call_id: CallId,
    /// The first line of the result, when known.
    pub first_line: Option<String>,
}

impl fmt::Display for Orphan {
    /// `CALL_ID => FIRST LINE` (`(no text)` without one).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} => {}",
            self.call_id,
            self.first_line.as_deref().unwrap_or("(no text)")
        )
    }
}

/// A summary's text in parts: its prose, the ledger of the tool pairs it covers, and
/// the orphan results of its region. [`text`](SummaryParts::text) writes it (always
/// with the ledger heading, so that a later compaction finds it again, even with no
/// units); [`parse`](SummaryParts::parse) reads it back, so an earlier summary inside
/// a region is folded into the new one rather than summarized away.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
#[non_exhaustive]
pub struct SummaryParts {
    /// Prose from the summarizer (and folded earlier summaries), possibly empty.
    pub prose: String,
    /// The covered tool pairs, in log order.
    pub units: Vec<Unit>,
    /// The region's results without their call, in log order.
    pub orphans: Vec<Orphan>,
}

impl SummaryParts {
    /// Parts with `prose`, `units` and `orphans`. **O(1)**.
    pub fn new(prose: String, units: Vec<Unit>, orphans: Vec<Orphan>) -> Self {
        SummaryParts {
            prose,
            units,
            orphans,
        }
    }

    /// The summary's text: the prose, a blank line, the ledger heading and one
    /// `- ` line per unit (the heading says `none` when there is no unit), then, when
    /// there are orphans, a blank line, their heading and one `- CALL_ID => LINE` line
    /// each. **O(len)**.
    pub fn text(&self) -> String {
        render(&self.prose, &self.units, &self.orphans, true)
    }

    /// The parts of a text [`text`](SummaryParts::text) (or [`summary_text`], with
    /// units) wrote; `None` when `text` holds no ledger. Writing the parts again gives
    /// the same text. **O(len)**.
    pub fn parse(text: &str) -> Option<SummaryParts> {
        let at = if text.starts_with(LEDGER_HEADING) {
            0
        } else {
            text.find(&format!("\n\n{LEDGER_HEADING}"))? + 2
        };
        let prose = text[..at].strip_suffix("\n\n").unwrap_or(&text[..at]);
        let mut rest = &text[at + LEDGER_HEADING.len()..];
        let none = rest.starts_with(NO_UNITS);
        if none {
            rest = &rest[NO_UNITS.len()..];
        }
        let (units_text, orphans_text) = match rest.find(&format!("\n\n{ORPHAN_HEADING}")) {
            Some(o) => (&rest[..o], Some(&rest[o + 2 + ORPHAN_HEADING.len()..])),
            None => (rest, None),
        };
        let units = if none {
            if !units_text.is_empty() {
                return None;
            }
            Vec::new()
        } else {
            items(units_text)?
                .map(parse_unit)
                .collect::<Option<Vec<Unit>>>()?
        };
        let orphans = match orphans_text {
            None => Vec::new(),
            Some(t) => items(t)?.map(parse_orphan).collect::<Option<Vec<_>>>()?,
        };
        Some(SummaryParts {
            prose: prose.to_owned(),
            units,
            orphans,
        })
    }
}

/// The items of a list written as `\n- A\n- B`; `None` unless it starts with one.
fn items(text: &str) -> Option<impl Iterator<Item = &str>> {
    let body = text.strip_prefix(ITEM)?;
    Some(body.split(ITEM))
}

fn parse_unit(line: &str) -> Option<Unit> {
    let (id, rest) = line.split_once(' ')?;
    let (tool, rest) = rest.split_once(' ')?;
    let (arguments, result) = if rest.starts_with('"') {
        let (a, after) = read_json_string(rest)?;
        (Some(a), after.strip_prefix(" => ")?)
    } else {
        let (a, result) = rest.split_once(" => ")?;
        ((a != LOST).then(|| a.to_owned()), result)
    };
    let (status, first) = if let Some(r) = result.strip_prefix("error: ") {
        (Some(ResultStatus::Error), Some(r))
    } else if let Some(r) = result.strip_prefix("aborted: ") {
        (Some(ResultStatus::Aborted), Some(r))
    } else if let Some(r) = result.strip_prefix("ok: ") {
        (Some(ResultStatus::Ok), Some(r))
    } else if result == NO_RESULT {
        (None, None)
    } else {
        (Some(ResultStatus::Ok), Some(result))
    };
    Some(Unit {
        call_id: CallId::from(id),
        tool: (tool != "?").then(|| tool.to_owned()),
        arguments,
        status,
        first_line: first.map(str::to_owned),
    })
}

fn parse_orphan(line: &str) -> Option<Orphan> {
    let (id, first) = line.split_once(" => ")?;
    Some(Orphan {
        call_id: CallId::from(id),
        first_line: (first != "(no text)").then(|| first.to_owned()),
    })
}

/// The one writer of a summary's text (see [`SummaryParts::text`]); `heading` says
/// whether to write the ledger heading when there is no unit. **O(len)**.
fn render(prose: &str, units: &[Unit], orphans: &[Orphan], heading: bool) -> String {
    let mut text = prose.to_owned();
    if heading || !units.is_empty() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(LEDGER_HEADING);
        if units.is_empty() {
            text.push_str(NO_UNITS);
        }
        for unit in units {
            let _ = write!(text, "{ITEM}{unit}");
        }
    }
    if !orphans.is_empty() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(ORPHAN_HEADING);
        for orphan in orphans {
            let _ = write!(text, "{ITEM}{orphan}");
        }
    }
    text
}

/// A summary's text: `prose`, then (when there are units) a blank line, a heading and
/// one line per unit, `- ` followed by its [ledger line](Unit::ledger_line). Written
/// by the one renderer of a summary's text, as [`SummaryParts::text`] is (which also
/// lists orphans, and always writes the heading). **O(len)**.
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
    render(prose, units, &[], false)
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

    proptest::proptest! {
        /// The cut falls on the first line's 200th character, as counting and
        /// collecting characters put it: lines of one- to four-byte characters about
        /// that long.
        #[test]
        fn first_line_cuts_where_the_characters_say(
            blank in proptest::sample::select(vec!["", "\n  \n", " "]),
            pieces in proptest::collection::vec(
                proptest::sample::select(vec!["a", "é", "€", "😀", " "]),
                190..215,
            ),
        ) {
            let content = format!("{blank}{}\nnext", pieces.concat());
            let line = content.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
            let want = if line.chars().count() > FIRST_LINE_CHARS {
                line.chars().take(FIRST_LINE_CHARS).chain(['…']).collect()
            } else {
                line.to_owned()
            };
            proptest::prop_assert_eq!(first_line(&content), want);
        }

        /// The ASCII shortcut finds the character `char_indices` finds: texts mostly
        /// ASCII, with a character of two to four bytes before, at or after the cut.
        #[test]
        fn nth_char_start_is_char_indices_nth(
            ascii in 0usize..40,
            wide in proptest::sample::select(vec!["", "é", "€", "😀"]),
            tail in 0usize..6,
            n in 0usize..50,
        ) {
            let text = format!("{}{wide}{}", "a".repeat(ascii), "b".repeat(tail));
            proptest::prop_assert_eq!(
                nth_char_start(&text, n),
                text.char_indices().nth(n).map(|(at, _)| at),
                "{:?} {}", text, n
            );
        }
    }
}

#[cfg(test)]
mod parts_tests {
    use super::*;

    fn unit(id: &str, arguments: Option<&str>, first: Option<&str>) -> Unit {
        Unit {
            tool: Some("bash".into()),
            arguments: arguments.map(str::to_owned),
            status: first.map(|_| ResultStatus::Ok),
            first_line: first.map(str::to_owned),
            ..Unit::bare(id.into())
        }
    }

    #[test]
    fn parts_round_trip_through_their_text() {
        let cases = [
            SummaryParts::default(),
            SummaryParts::new("Earlier.".into(), Vec::new(), Vec::new()),
            SummaryParts::new(
                "Line one\n\nline two".into(),
                vec![
                    unit("call_1", Some(r#"{"a":"x => y"}"#), Some("ok => fine")),
                    unit("call_2", Some("{\n  \"pretty\": 1\n}"), None),
                    unit("call_3", None, Some("")),
                    unit("call_4", Some(""), Some("error: looks like an error")),
                ],
                vec![Orphan {
                    call_id: "toolu_x".into(),
                    first_line: Some("rejected".into()),
                }],
            ),
            SummaryParts::new(
                String::new(),
                Vec::new(),
                vec![Orphan {
                    call_id: "a".into(),
                    first_line: None,
                }],
            ),
        ];
        for parts in cases {
            let text = parts.text();
            let back = SummaryParts::parse(&text).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(back.text(), text);
            assert_eq!(back.prose, parts.prose);
            let ids = |p: &SummaryParts| {
                p.units
                    .iter()
                    .map(|u| u.call_id.clone())
                    .collect::<Vec<_>>()
            };
            assert_eq!(ids(&back), ids(&parts), "{text}");
            assert_eq!(back.orphans.len(), parts.orphans.len());
        }
        assert_eq!(SummaryParts::parse("just prose"), None);
    }

    #[test]
    fn arguments_with_list_lines_are_escaped_so_every_item_is_one_line() {
        let patch = "*** Begin Patch\n- old line\n+ new line";
        let parts = SummaryParts::new(
            "P.".into(),
            vec![
                unit("c1", Some(patch), Some("done")),
                unit("c2", Some("{}"), None),
            ],
            Vec::new(),
        );
        let text = parts.text();
        assert!(
            text.contains(r#"c1 bash "*** Begin Patch\n- old line\n+ new line" => done"#),
            "{text}"
        );
        let back = SummaryParts::parse(&text).expect("parses");
        assert_eq!(back.units.len(), 2);
        assert_eq!(back.text(), text);
        // The summary_text of the same units is the same ledger.
        assert_eq!(summary_text("P.", &parts.units), text);
    }
}
