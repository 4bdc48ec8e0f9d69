//! Splitting a JSON document into its messages without copying them: each element is
//! a borrowed [`RawValue`] whose byte span in the input is kept for re-emission.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;

use serde::Deserialize;
use serde::de::{self, Deserializer, Visitor};
use serde_json::value::RawValue;

use super::{Format, FormatError};

/// The messages of a JSON document and where their array lies.
pub(crate) struct Doc<'a> {
    pub(crate) elements: Vec<&'a RawValue>,
    /// The array, brackets included.
    pub(crate) array_span: Range<usize>,
    /// Whether the object names a `previous_response_id` (OpenAI Responses): the
    /// input continues a stored conversation, whose calls it may answer.
    pub(crate) previous_response: bool,
    /// The fingerprint of the object's `system`, `instructions` and `tools` (what a
    /// provider's prefix holds before the messages), 0 when it has none.
    pub(crate) head_print: u64,
    /// `output_config.task_budget` of the object (Anthropic task budgets).
    pub(crate) task_budget: Option<super::TaskBudget>,
    /// Whether the object names a `container` (Anthropic programmatic tool calling);
    /// `None` for a bare array, which cannot say.
    pub(crate) names_container: Option<bool>,
}

/// The keys an object may hold its messages under, most specific first. `M` is how a
/// message array is read: [`Items`] on the one pass of the fast path, `&RawValue` on
/// the pass that explains a member that is no array (or an empty one).
#[derive(Deserialize)]
struct Holder<'a, M> {
    #[serde(default = "none")]
    messages: Option<M>,
    #[serde(default = "none")]
    input: Option<M>,
    #[serde(default = "none")]
    contents: Option<M>,
    #[serde(default = "none")]
    history: Option<M>,
    #[serde(borrow, default)]
    previous_response_id: Option<&'a RawValue>,
    #[serde(borrow, default)]
    system: Option<&'a RawValue>,
    #[serde(borrow, default)]
    instructions: Option<&'a RawValue>,
    #[serde(borrow, default)]
    tools: Option<&'a RawValue>,
    #[serde(borrow, default)]
    output_config: Option<OutputConfig<'a>>,
    #[serde(borrow, default)]
    container: Option<&'a RawValue>,
}

fn none<M>() -> Option<M> {
    None
}

/// A member read as a message array: its elements, borrowed, split in the same pass
/// that reads the object around them; `Other` for a member of another kind (which
/// [`split`] reads again to say what it is).
pub(crate) type Items<'a> = Inline<Vec<&'a RawValue>, true>;

#[derive(Deserialize)]
struct OutputConfig<'a> {
    #[serde(borrow, default)]
    task_budget: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Budget {
    #[serde(default)]
    total: Option<u64>,
    #[serde(default)]
    remaining: Option<u64>,
}

/// The array of messages of `text`: the document itself, or the array under
/// `messages` / `input` / `contents` (or SWE-agent's `history`). **O(len)**.
pub(crate) fn split(text: &str, format: Format) -> Result<Doc<'_>, FormatError> {
    let start = text.trim_start();
    if !start.starts_with('{') {
        // A bare array: split as it is read.
        let elements: Vec<&RawValue> = serde_json::from_str(text).map_err(|e| invalid(&e))?;
        let array_span = text.len() - start.len()..text.trim_end().len();
        return Ok(Doc {
            elements,
            array_span,
            previous_response: false,
            head_print: 0,
            task_budget: None,
            names_container: None,
        });
    }
    // One pass reads the object and splits its message array; a member that is no
    // array, or an empty one, is read again as raw text to say what it is and where.
    let holder: Holder<'_, Items<'_>> = serde_json::from_str(text).map_err(|e| invalid(&e))?;
    let chosen = preferred(
        format,
        [
            holder.messages,
            holder.input,
            holder.contents,
            holder.history,
        ],
    );
    let fast = match chosen {
        Some(Inline::Read(elements)) => array_around(text, &elements).map(|span| (elements, span)),
        _ => None,
    };
    let (elements, array_span) = match fast {
        Some(fast) => fast,
        None => {
            let raw: Holder<'_, &RawValue> = serde_json::from_str(text).map_err(|e| invalid(&e))?;
            let array = preferred(format, [raw.messages, raw.input, raw.contents, raw.history])
                .ok_or_else(|| FormatError::Invalid {
                    line: 1,
                    message:
                        "the object holds no `messages`, `input`, `contents` or `history` array"
                            .to_owned(),
                })?;
            let array_span = span_of(text, array);
            let elements: Vec<&RawValue> =
                serde_json::from_str(array.get()).map_err(|e| FormatError::Invalid {
                    line: line_at(text, array_span.start),
                    message: format!("the messages are not a JSON array of objects: {e}"),
                })?;
            (elements, array_span)
        }
    };
    let previous_response = holder
        .previous_response_id
        .is_some_and(|r| r.get() != "null");
    let head: Vec<&str> = [holder.system, holder.instructions, holder.tools]
        .iter()
        .map(|r| r.map_or("", |r| r.get()))
        .collect();
    let mut task_budget = None;
    if let Some(raw) = holder.output_config.as_ref().and_then(|o| o.task_budget) {
        let b: Budget = serde_json::from_str(raw.get()).map_err(|e| FormatError::Invalid {
            line: line_at(text, span_of(text, raw).start),
            message: format!("`output_config.task_budget` is not a task budget: {e}"),
        })?;
        let at = span_of(text, raw);
        task_budget = Some(super::TaskBudget {
            total: b.total,
            remaining: b.remaining,
            at: (at.start, at.end),
        });
    }
    let names_container = Some(holder.container.is_some_and(|r| r.get() != "null"));
    let head_print = if head.iter().any(|h| !h.is_empty()) {
        super::fingerprint(&head.join("\u{0}"))
    } else {
        0
    };
    Ok(Doc {
        elements,
        array_span,
        previous_response,
        head_print,
        task_budget,
        names_container,
    })
}

/// The span of the JSON array (brackets included) whose elements, read from
/// `text`, are `elements`; `None` when there are none (an empty array's place is not
/// in its elements) or they are not borrowed from `text`. **O(whitespace)**: only
/// A value's JSON text: a [`RawValue`]'s, or the text a walk took of it.
pub(crate) trait JsonText {
    /// The text. **O(1)**.
    fn json(&self) -> &str;
}

impl JsonText for &RawValue {
    fn json(&self) -> &str {
        self.get()
    }
}

impl JsonText for &str {
    fn json(&self) -> &str {
        self
    }
}

/// whitespace lies between a bracket and the element beside it.
pub(crate) fn array_around(text: &str, elements: &[impl JsonText]) -> Option<Range<usize>> {
    let first = offset_in(text, elements.first()?.json())?;
    let last = elements.last()?.json();
    let last = offset_in(text, last)? + last.len();
    let open = text[..first].trim_end().strip_suffix('[')?.len();
    let after = text[last..].trim_start();
    after
        .starts_with(']')
        .then(|| open..text.len() - after.len() + 1)
}

/// The member that holds the messages, of `[messages, input, contents, history]`:
/// the first present in the order `format` prefers. **O(1)**.
fn preferred<M>(format: Format, [messages, input, contents, history]: [Option<M>; 4]) -> Option<M> {
    let order = match format {
        Format::OpenAiResponses => [input, messages, contents, history],
        Format::Gemini => [contents, messages, input, history],
        _ => [messages, history, input, contents],
    };
    order.into_iter().flatten().next()
}

/// The JSON text of member `key` of the object `text`; `None` when `text` is no
/// JSON object (or spells a key with escapes) or has no such member. **O(len)**: one
/// syntax pass, no tree.
pub(crate) fn member<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.get(field(text, key).ok()??)
}

/// The byte range of member `name`'s value in the JSON object `text`, if it has one;
/// an error when `text` is no JSON object (or spells a key with escapes). **O(len)**:
/// one syntax pass, no tree.
pub(crate) fn field(text: &str, name: &str) -> Result<Option<Range<usize>>, String> {
    let map: std::collections::HashMap<&str, &RawValue> =
        serde_json::from_str(text).map_err(|e| format!("not a JSON object: {e}"))?;
    Ok(map.get(name).map(|raw| span_of(text, raw)))
}

/// The byte range of `raw` inside `text`, which it was borrowed from. **O(1)**.
pub(crate) fn span_of(text: &str, raw: &RawValue) -> Range<usize> {
    let start = (raw.get().as_ptr() as usize).saturating_sub(text.as_ptr() as usize);
    start..start + raw.get().len()
}

/// The 1-based line of any byte offset of a text: the offsets where its lines start,
/// found in one forward pass, then a binary search per lookup. Reading a JSON document
/// asks for the line of every message and block; counting newlines from the start for
/// each would be quadratic in the file.
pub(crate) struct LineIndex {
    /// Byte offset just past each `\n`, in increasing order.
    starts: Vec<usize>,
}

impl LineIndex {
    /// The index of `text`. **O(len)**.
    pub(crate) fn new(text: &str) -> LineIndex {
        let starts = memchr::memchr_iter(b'\n', text.as_bytes())
            .map(|i| i + 1)
            .collect();
        LineIndex { starts }
    }

    /// The 1-based line holding byte `offset`. **O(log lines)**.
    pub(crate) fn line(&self, offset: usize) -> usize {
        1 + self.starts.partition_point(|&s| s <= offset)
    }
}

/// The 1-based line holding byte `offset` of `text`, for one lookup (an error's
/// place). **O(offset)**; repeated lookups use a [`LineIndex`].
pub(crate) fn line_at(text: &str, offset: usize) -> usize {
    let end = offset.min(text.len());
    1 + text.as_bytes()[..end]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Where `part` (a slice borrowed from `text`) starts in `text`, or `None` when it is
/// not part of it. **O(1)**.
pub(crate) fn offset_in(text: &str, part: &str) -> Option<usize> {
    let start = (part.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    (start + part.len() <= text.len()).then_some(start)
}

fn invalid(e: &serde_json::Error) -> FormatError {
    let message = e.to_string();
    let core = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(core, _)| core);
    FormatError::Invalid {
        line: e.line().max(1),
        message: format!("{core} (column {})", e.column()),
    }
}

/// Iterates the non-blank lines of `text` as `(1-based line, byte range without the
/// line ending)`. **O(len)**.
pub(crate) fn lines(text: &str) -> impl Iterator<Item = (usize, Range<usize>)> + '_ {
    // The line ends found with `memchr` (vectorized; `str::split` is not).
    let ends = memchr::memchr_iter(b'\n', text.as_bytes()).map(|i| i + 1);
    let last = (!text.is_empty() && !text.ends_with('\n')).then_some(text.len());
    let mut start = 0;
    ends.chain(last).enumerate().filter_map(move |(i, end)| {
        let piece = &text[start..end];
        let at = start;
        start = end;
        let body = piece.trim_end_matches(['\n', '\r']);
        (!body.trim().is_empty()).then(|| (i + 1, at..at + body.len()))
    })
}

/// A serde_json error as `what (column N)`.
pub(crate) fn describe(e: &serde_json::Error) -> String {
    let message = e.to_string();
    let core = message
        .rsplit_once(" at line ")
        .map_or(message.as_str(), |(core, _)| core);
    format!("{core} (column {})", e.column())
}

/// The visitor methods of a member read in the pass of the object around it that
/// answer `$other` for the values the member does not take: scalars, strings (a
/// visitor may still take a borrowed one) and null.
macro_rules! other_for_the_rest {
    ($other:expr) => {
        fn visit_bool<E>(self, _: bool) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_str<E>(self, _: &str) -> Result<Self::Value, E> {
            Ok($other)
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok($other)
        }
    };
}

/// A member read straight into `T` when it is an object (an array when `ARRAY`), in
/// the pass that reads the object around it; `Other` when it is a JSON value of
/// another kind. A reader that needs the member's own text, or must say what is
/// wrong with it, reads the line again with the member as a [`RawValue`] (the slow
/// path, for the rare line): so a line's common case costs one pass where
/// raw-then-parse cost two.
pub(crate) enum Inline<T, const ARRAY: bool = false> {
    Read(T),
    Other,
}

impl<'de, T: Deserialize<'de>, const ARRAY: bool> Deserialize<'de> for Inline<T, ARRAY> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, const ARRAY: bool>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const ARRAY: bool> Visitor<'de> for V<T, ARRAY> {
            type Value = Inline<T, ARRAY>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                if !ARRAY {
                    return T::deserialize(de::value::MapAccessDeserializer::new(map))
                        .map(Inline::Read);
                }
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(Inline::Other)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                if ARRAY {
                    return T::deserialize(de::value::SeqAccessDeserializer::new(seq))
                        .map(Inline::Read);
                }
                while seq.next_element::<de::IgnoredAny>()?.is_some() {}
                Ok(Inline::Other)
            }
            other_for_the_rest!(Inline::Other);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A message's `content` read in the pass that reads the message: an array split into
/// its elements, or a string without escapes (serde hands it over as a slice of the
/// input, so [`InlineContent::literal`] finds its JSON text, quotes included); `Other` for
/// anything else (a string with escapes, an object, a number), which a reader reads
/// again with the member as a [`RawValue`] (the slow path).
pub(crate) enum InlineContent<'a> {
    Split(Vec<&'a str>),
    Str(&'a str),
    Other,
}

impl<'a> InlineContent<'a> {
    /// The JSON text of a [`InlineContent::Str`] in `text`, the input it was read from: the
    /// string's bytes and the quotes around them; `None` when they are not there (an
    /// empty string serde did not hand over in place). **O(1)**.
    pub(crate) fn literal(text: &'a str, s: &'a str) -> Option<&'a str> {
        let start = offset_in(text, s)?.checked_sub(1)?;
        let literal = text.get(start..start + s.len() + 2)?;
        (literal.starts_with('"') && literal.ends_with('"')).then_some(literal)
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for InlineContent<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = InlineContent<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(item) = seq.next_element::<&'de RawValue>()? {
                    items.push(item.get());
                }
                Ok(InlineContent::Split(items))
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(InlineContent::Str(v))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                while map
                    .next_entry::<de::IgnoredAny, de::IgnoredAny>()?
                    .is_some()
                {}
                Ok(InlineContent::Other)
            }
            other_for_the_rest!(InlineContent::Other);
        }
        d.deserialize_any(V(std::marker::PhantomData))
    }
}

/// A JSON string, borrowed from the input unless it has escapes. It accepts and
/// rejects exactly what `String` does (with the same error messages), without
/// allocating for plain strings. (`Option<Cow<str>>` would always allocate: serde
/// borrows a `Cow` only as a direct field.)
#[derive(Debug, PartialEq)]
pub(crate) struct JsonStr<'a>(Cow<'a, str>);

impl<'a> JsonStr<'a> {
    /// The contents of a string literal written without escapes. **O(1)**.
    pub(crate) fn borrowed(plain: &'a str) -> JsonStr<'a> {
        JsonStr(Cow::Borrowed(plain))
    }

    /// The string. **O(1)**.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }
}

/// The string of an optional [`JsonStr`]. **O(1)**.
pub(crate) fn opt_str<'s>(s: &'s Option<JsonStr<'_>>) -> Option<&'s str> {
    s.as_ref().map(JsonStr::as_str)
}

impl<'de: 'a, 'a> Deserialize<'de> for JsonStr<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<'a>(std::marker::PhantomData<&'a ()>);
        impl<'de: 'a, 'a> Visitor<'de> for V<'a> {
            type Value = JsonStr<'a>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Borrowed(v)))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Owned(v.to_owned())))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
                Ok(JsonStr(Cow::Owned(v)))
            }
            fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
                match std::str::from_utf8(v) {
                    Ok(s) => Ok(JsonStr(Cow::Owned(s.to_owned()))),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Bytes(v), &self)),
                }
            }
        }
        d.deserialize_string(V(std::marker::PhantomData))
    }
}

/// The first line of a result's content: a string, or the first `text` of an array of
/// blocks (`{"type":"text","text":…}` or `{"text":…}`), or of an object's `text` /
/// `output` / `content` / `result`; otherwise the first line of the JSON text itself.
/// **O(first line)** for a string (the rest of a long output is never unescaped),
/// **O(len)** of the structure for arrays and objects (their strings are skipped, not
/// copied).
///
/// With `capped`, a string whose first line is long may come back as the line a unit
/// keeps of it ([`capped_line`]).
fn first_line_with(raw: Option<&str>, capped: bool) -> String {
    let Some(raw) = raw else {
        return String::new();
    };
    first_line_of_raw(raw, 0, capped).unwrap_or_else(|| raw.lines().next().unwrap_or("").to_owned())
}

/// The first line of a tool result's content as every summary unit keeps it
/// ([`compact::first_line`](crate::compact::first_line): the first non-blank line,
/// trimmed and capped), read as [`first_line_with`] reads it: only the first line is
/// unescaped, unless the content starts with blank lines, and of a long first line
/// only the first [`LINE_WINDOW`] bytes when they decide it. **O(min(first line,
/// LINE_WINDOW))** in the usual case. `raw` is the content's JSON text, which must
/// be valid JSON (a [`RawValue`]'s, or a value of a text serde_json validated).
pub(crate) fn result_line(raw: Option<&str>) -> String {
    result_line_with(raw, true)
}

/// [`result_line`]; without `capped`, every first line is unescaped whole.
fn result_line_with(raw: Option<&str>, capped: bool) -> String {
    // A capped line ("…" after its first characters) is its own unit line.
    let line = first_line_with(raw, capped);
    if !line.trim().is_empty() {
        return crate::compact::first_line(&line);
    }
    // Blank first lines: the line a unit keeps lies further in, so read the text.
    match raw.and_then(string_of) {
        Some(text) => crate::compact::first_line(&text),
        None => String::new(),
    }
}

/// How deep [`first_line_of_raw`] looks into nested arrays and objects.
const MAX_DEPTH: usize = 4;

/// The first line of `text`, the text of a `RawValue` (so valid JSON): a string's, or
/// that of the first element of an array, or of an object's first `text` / `output` /
/// `content` / `result` member (in that order), that has one; the members read as a
/// struct of those four fields reads them (a `null` is no member; a name given twice
/// gives nothing). Arrays and objects are walked with [`valid`]'s scanner, not parsed
/// again. **O(len)** of the structure.
fn first_line_of_raw(text: &str, depth: usize, capped: bool) -> Option<String> {
    const FIELDS: [&str; 4] = ["text", "output", "content", "result"];
    match text.as_bytes().first()? {
        b'"' => first_line_of_string(text, capped),
        b'[' if depth < MAX_DEPTH => valid::elements(text)?
            .into_iter()
            .find_map(|i| first_line_of_raw(i, depth + 1, capped)),
        b'{' if depth < MAX_DEPTH => {
            let mut fields: [Option<Option<&str>>; 4] = [None; 4];
            for (key, value) in valid::members(text)? {
                if key.contains('\\') {
                    // A name with an escape may still be one of the four: let serde
                    // read the object.
                    return first_line_of_fields(text, depth, capped, first_line_of_raw);
                }
                if let Some(k) = FIELDS.iter().position(|f| *f == key) {
                    if fields[k].is_some() {
                        return None;
                    }
                    fields[k] = Some((value != "null").then_some(value));
                }
            }
            fields
                .into_iter()
                .flatten()
                .flatten()
                .find_map(|v| first_line_of_raw(v, depth + 1, capped))
        }
        _ => None,
    }
}

/// [`first_line_of_raw`] for an object, read by serde_json as a struct of the four
/// fields, each field's value read by `next`. **O(len)**.
fn first_line_of_fields(
    text: &str,
    depth: usize,
    capped: bool,
    next: fn(&str, usize, bool) -> Option<String>,
) -> Option<String> {
    #[derive(Deserialize)]
    struct Fields<'a> {
        #[serde(borrow, default)]
        text: Option<&'a RawValue>,
        #[serde(borrow, default)]
        output: Option<&'a RawValue>,
        #[serde(borrow, default)]
        content: Option<&'a RawValue>,
        #[serde(borrow, default)]
        result: Option<&'a RawValue>,
    }
    let f: Fields<'_> = serde_json::from_str(text).ok()?;
    [f.text, f.output, f.content, f.result]
        .into_iter()
        .flatten()
        .find_map(|v| next(v.get(), depth + 1, capped))
}

/// Walking JSON text that serde_json has already validated (the text of a `RawValue`):
/// the members of an object and the elements of an array as slices of the text, with
/// strings skipped by `memchr` and nothing checked twice. On anything a valid text
/// cannot hold the walk gives `None` (never a panic), and the caller reads the text the
/// slow way or gives up.
pub(crate) mod valid {
    /// The index past the string whose opening quote is at `i`. **O(len)** of the
    /// string.
    ///
    /// One search per quote, not per escape: a quote ends the string when an even
    /// number of backslashes stands before it (the opening quote, no backslash,
    /// bounds the count), so a text dense with `\n` costs no more than a plain one.
    fn string_end(b: &[u8], start: usize) -> Option<usize> {
        let mut i = start + 1;
        loop {
            let quote = i + memchr::memchr(b'"', b.get(i..)?)?;
            let escapes = b[start + 1..quote]
                .iter()
                .rev()
                .take_while(|&&c| c == b'\\')
                .count();
            if escapes % 2 == 0 {
                return Some(quote + 1);
            }
            i = quote + 1;
        }
    }

    fn skip_blanks(b: &[u8], mut i: usize) -> usize {
        while b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    }

    /// The index past the value starting at `i`. **O(len)** of the value.
    fn value_end(b: &[u8], mut i: usize) -> Option<usize> {
        match *b.get(i)? {
            b'"' => string_end(b, i),
            b'[' | b'{' => {
                let mut depth = 0usize;
                loop {
                    match *b.get(i)? {
                        b'"' => {
                            i = string_end(b, i)?;
                            continue;
                        }
                        b'[' | b'{' => depth += 1,
                        b']' | b'}' => {
                            depth = depth.checked_sub(1)?;
                            if depth == 0 {
                                return Some(i + 1);
                            }
                        }
                        _ => {}
                    }
                    i += 1;
                }
            }
            _ => {
                while b
                    .get(i)
                    .is_some_and(|c| !matches!(c, b',' | b']' | b'}') && !c.is_ascii_whitespace())
                {
                    i += 1;
                }
                Some(i)
            }
        }
    }

    /// A reading position in a valid JSON text (a [`RawValue`](serde_json::value::RawValue)'s,
    /// or an element [`split`](super::split) took from a document serde_json read): a
    /// pull reader that walks the text once, descending into the values a reader
    /// wants and skipping the rest, with every value's text at hand. Nothing is
    /// checked that a valid text always has right; anything a valid text cannot hold
    /// ends the walk with `None`, never a panic (so on invalid text the answer may
    /// be wrong, never unsafe). The cursor always rests on a value or a delimiter,
    /// never on whitespace.
    pub(crate) struct Cursor<'a> {
        text: &'a str,
        i: usize,
    }

    impl<'a> Cursor<'a> {
        /// A cursor on the value `text` holds. **O(leading blanks)**.
        pub(crate) fn new(text: &'a str) -> Cursor<'a> {
            Cursor {
                text,
                i: skip_blanks(text.as_bytes(), 0),
            }
        }

        /// The first byte of the value at the cursor. **O(1)**.
        pub(crate) fn peek(&self) -> Option<u8> {
            self.text.as_bytes().get(self.i).copied()
        }

        /// Moves past the value at the cursor and gives its text. **O(len)** of
        /// the value.
        pub(crate) fn value(&mut self) -> Option<&'a str> {
            let b = self.text.as_bytes();
            let start = self.i;
            let end = value_end(b, start)?;
            self.i = skip_blanks(b, end);
            self.text.get(start..end)
        }

        /// The value at the cursor when it is a string written without escapes (its
        /// contents, between the quotes), or `null` (`Some(None)`); `None` for
        /// anything else, which the caller reads some other way. **O(len)** of the
        /// string.
        pub(crate) fn plain_str(&mut self) -> Option<Option<&'a str>> {
            let text = self.value()?;
            if text == "null" {
                return Some(None);
            }
            let inner = text.strip_prefix('"')?.strip_suffix('"')?;
            (!inner.contains('\\')).then_some(Some(inner))
        }

        /// Walks the object at the cursor: `member` is given each name as written
        /// (without its quotes, escapes as they are) with the cursor on its value,
        /// which it must move past (by [`value`](Self::value) or by descending into
        /// it). Gives the object's text. `None` if the value is no object, or
        /// `member` gives `None` or leaves the cursor anywhere but past one value.
        /// **O(len)** of the object.
        pub(crate) fn object(
            &mut self,
            mut member: impl FnMut(&'a str, &mut Cursor<'a>) -> Option<()>,
        ) -> Option<&'a str> {
            let start = self.i;
            let end = self.list(b'{', b'}', |c| {
                let b = c.text.as_bytes();
                let end = string_end(b, c.i)?;
                let key = c.text.get(c.i + 1..end - 1)?;
                c.i = skip_blanks(b, end);
                if b.get(c.i) != Some(&b':') {
                    return None;
                }
                c.i = skip_blanks(b, c.i + 1);
                member(key, c)
            })?;
            self.text.get(start..end)
        }

        /// Walks the object at the cursor as a struct with the member `names` reads
        /// it: `member` is given the index in `names` of each member named there,
        /// with the cursor on its value, which it must move past; other members are
        /// skipped. `None` (serde reads the text) when a name is written with
        /// escapes (it may be one of `names`) or one of `names` is given twice (serde
        /// refuses it), and as for [`object`](Self::object). At most 64 names.
        /// **O(len)** of the object, and `names` searched per member.
        pub(crate) fn struct_members(
            &mut self,
            names: &[&str],
            mut member: impl FnMut(usize, &mut Cursor<'a>) -> Option<()>,
        ) -> Option<&'a str> {
            let mut seen = 0u64;
            self.object(|key, c| {
                let Some(k) = names.iter().position(|n| *n == key) else {
                    return (!key.contains('\\')).then(|| c.value().map(drop))?;
                };
                if seen & 1 << k != 0 {
                    return None;
                }
                seen |= 1 << k;
                member(k, c)
            })
        }

        /// Walks the array at the cursor: `element` is called with the cursor on each
        /// element, which it must move past. Gives the array's text. `None` as for
        /// [`object`](Self::object). **O(len)** of the array.
        pub(crate) fn array(
            &mut self,
            element: impl FnMut(&mut Cursor<'a>) -> Option<()>,
        ) -> Option<&'a str> {
            let start = self.i;
            let end = self.list(b'[', b']', element)?;
            self.text.get(start..end)
        }

        /// The array at the cursor, each element read by `element`, or `null`
        /// (`Some(None)`, as serde reads an optional array). **O(len)** of the array.
        pub(crate) fn nullable_array<T>(
            &mut self,
            mut element: impl FnMut(&mut Cursor<'a>) -> Option<T>,
        ) -> Option<Option<Vec<T>>> {
            if self.peek()? == b'n' {
                return (self.value()? == "null").then_some(None);
            }
            let mut out = Vec::new();
            self.array(|c| {
                out.push(element(c)?);
                Some(())
            })?;
            Some(Some(out))
        }

        /// The comma-separated list between `open` and `close` at the cursor, each
        /// item read by `item`; the cursor ends past `close` and the blanks after
        /// it, and the index past `close` is returned.
        fn list(
            &mut self,
            open: u8,
            close: u8,
            mut item: impl FnMut(&mut Cursor<'a>) -> Option<()>,
        ) -> Option<usize> {
            let b = self.text.as_bytes();
            if b.get(self.i) != Some(&open) {
                return None;
            }
            self.i = skip_blanks(b, self.i + 1);
            if b.get(self.i) == Some(&close) {
                let end = self.i + 1;
                self.i = skip_blanks(b, end);
                return Some(end);
            }
            loop {
                let at = self.i;
                item(self)?;
                if self.i == at {
                    return None;
                }
                match *b.get(self.i)? {
                    b',' => self.i = skip_blanks(b, self.i + 1),
                    c if c == close => {
                        let end = self.i + 1;
                        self.i = skip_blanks(b, end);
                        return Some(end);
                    }
                    _ => return None,
                }
            }
        }
    }

    /// Sets a member a walk reads once: `None` (the walk leaves the text to serde,
    /// which refuses a member given twice, `null` or not) when it was set already.
    /// **O(1)**.
    pub(crate) fn once<T>(slot: &mut Option<T>, value: T) -> Option<()> {
        slot.is_none().then(|| *slot = Some(value))
    }

    /// A value's text, `None` for `null` (an optional member's reading of it).
    pub(crate) fn non_null(text: &str) -> Option<&str> {
        (text != "null").then_some(text)
    }

    /// The members of the object `text`: (name as written, without quotes; value).
    pub(crate) fn members(text: &str) -> Option<Vec<(&str, &str)>> {
        let mut out = Vec::new();
        Cursor::new(text).object(|key, c| {
            out.push((key, c.value()?));
            Some(())
        })?;
        Some(out)
    }

    /// The elements of the array `text`.
    pub(crate) fn elements(text: &str) -> Option<Vec<&str>> {
        let mut out = Vec::new();
        Cursor::new(text).array(|c| {
            out.push(c.value()?);
            Some(())
        })?;
        Some(out)
    }
}

/// Raw bytes of a string literal's first line after which [`first_line_of_string`],
/// when capped, tries to decide the line a unit keeps from those bytes alone.
const LINE_WINDOW: usize = 320;

/// The first line of a JSON string literal, unescaping only that line: the literal is
/// cut at its first `\n` or `\r` escape (or closing quote) and the prefix parsed.
/// With `capped`, a first line that runs past [`LINE_WINDOW`] bytes may instead come
/// back as the line a unit keeps of it, read from its first bytes ([`capped_line`]).
fn first_line_of_string(literal: &str, capped: bool) -> Option<String> {
    let bytes = literal.as_bytes();
    let mut i = 1;
    let mut window = if capped { LINE_WINDOW } else { usize::MAX };
    while i < bytes.len() {
        // Plain bytes up to the next escape or quote are stepped over in one search.
        let next = memchr::memchr2(b'\\', b'"', &bytes[i..]).map_or(bytes.len(), |k| i + k);
        if next >= window {
            // The first position at or past the window, as a byte-by-byte step meets it.
            let at = i.max(window);
            window = usize::MAX;
            if at < bytes.len() {
                if let Some(line) = capped_line(literal, at) {
                    return Some(line);
                }
            }
        }
        i = next;
        match bytes.get(i) {
            Some(b'\\') => match bytes.get(i + 1) {
                Some(b'n' | b'r') => break,
                // Past the four digits, so that `i` never stops inside an escape.
                Some(b'u') => i += 6,
                _ => i += 2,
            },
            _ => break,
        }
    }
    prefix_text(literal.get(..i.min(bytes.len()))?)
}

/// The text of a string literal's first bytes `prefix` (its opening quote included),
/// as serde_json reads them closed by a quote: [`unescape`] where that answers,
/// serde_json on a closed copy where it does not. **O(len)**.
fn prefix_text(prefix: &str) -> Option<String> {
    unescape(prefix.get(1..)?)
        .or_else(|| serde_json::from_str::<String>(&format!("{prefix}\"")).ok())
}

/// The text of the JSON string literal `literal` (quotes included), as
/// `serde_json::from_str::<String>` reads it, without its per-escape cost: [`unescape`]
/// where that answers, serde_json where it does not. **O(len)**.
pub(crate) fn string_of(literal: &str) -> Option<String> {
    literal
        .strip_prefix('"')
        .and_then(|l| l.strip_suffix('"'))
        .and_then(unescape)
        .or_else(|| serde_json::from_str::<String>(literal).ok())
}

/// The text of a JSON string literal's contents `body` (between its quotes), where it
/// is a plain one: `Some` only when serde_json reads `"body"` as that same text, `None`
/// when it would refuse it and for every case it leaves to serde_json (a quote or a
/// control character in `body`, an unknown escape, a `\u` escape that is not four hex
/// digits or a lone surrogate). One search per escape, each escape one match: on the
/// strings of a tau-bench document (JSON written inside strings, a `\"` every few
/// bytes) two thirds of the instructions of serde_json's unescaping. **O(len)**.
pub(crate) fn unescape(body: &str) -> Option<String> {
    // Fixed-size chunks fold without a branch per byte (vectorized).
    let control = |chunk: &[u8]| chunk.iter().fold(false, |c, &x| c | (x < 0x20));
    if body.as_bytes().chunks(32).any(control) {
        return None;
    }
    let mut out = String::with_capacity(body.len());
    let mut rest = body;
    loop {
        let Some(k) = memchr::memchr2(b'\\', b'"', rest.as_bytes()) else {
            out.push_str(rest);
            return Some(out);
        };
        // `k` is an ASCII byte's index, so a character boundary.
        out.push_str(&rest[..k]);
        let tail = &rest.as_bytes()[k..];
        if tail[0] == b'"' {
            return None;
        }
        let (c, len) = escape(tail)?;
        out.push(c);
        rest = &rest[k + len..];
    }
}

/// The character of the escape at the start of `tail` (a backslash) and its length in
/// bytes; `None` where [`unescape`] leaves the escape to serde_json. **O(1)**.
fn escape(tail: &[u8]) -> Option<(char, usize)> {
    Some(match *tail.get(1)? {
        b'"' => ('"', 2),
        b'\\' => ('\\', 2),
        b'/' => ('/', 2),
        b'b' => ('\u{8}', 2),
        b'f' => ('\u{c}', 2),
        b'n' => ('\n', 2),
        b'r' => ('\r', 2),
        b't' => ('\t', 2),
        b'u' => {
            let unit = hex4(tail.get(2..6)?)?;
            match unit {
                0xD800..=0xDBFF => {
                    let low = tail.get(6..8).filter(|e| *e == b"\\u").and(tail.get(8..12));
                    let low = hex4(low?)?;
                    if !(0xDC00..=0xDFFF).contains(&low) {
                        return None;
                    }
                    let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                    (char::from_u32(c)?, 12)
                }
                // A lone low surrogate is no character.
                _ => (char::from_u32(unit)?, 6),
            }
        }
        _ => return None,
    })
}

/// Four hex digits' value. **O(1)**.
fn hex4(digits: &[u8]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0u32, |v, &d| Some(v << 4 | char::from(d).to_digit(16)?))
}

/// The line a summary unit keeps of a string literal whose first line runs on past
/// byte `end` ([`compact::first_line`](crate::compact::first_line) of its text: the
/// first line, trimmed, its first `FIRST_LINE_CHARS` (200) characters and "…"), when
/// the literal's bytes up to `end` decide it: they hold no line break (as a `\u`
/// escape), more than 200 characters after the line's leading blanks, and something
/// not blank after the 200th. `None` otherwise (then the whole first line is read).
/// A one-line JSON tool output, a whole document escaped into one string, was
/// unescaped whole to keep 200 characters of it. **O(end)**.
fn capped_line(literal: &str, mut end: usize) -> Option<String> {
    use crate::compact::FIRST_LINE_CHARS;
    // Inside a character: on to its end (its bytes are never a backslash or a quote).
    while end < literal.len() && !literal.is_char_boundary(end) {
        end += 1;
    }
    // A surrogate pair cut in two fails here, and the whole line is read.
    let text = prefix_text(literal.get(..end)?)?;
    if text.contains(['\n', '\r']) {
        return None;
    }
    let line = text.trim_start();
    let cut = crate::compact::nth_char_start(line, FIRST_LINE_CHARS)?;
    if line[cut..].chars().all(char::is_whitespace) {
        return None;
    }
    let mut kept = line[..cut].to_owned();
    kept.push('…');
    Some(kept)
}

/// The text of a message's content or of a text part: a JSON string, or the `text`
/// of each element of an array (blocks, parts) joined by blank lines, or the `text`
/// of an object; otherwise the JSON text itself. **O(len)**.
pub(crate) fn text_of(raw: &str) -> String {
    #[derive(Deserialize)]
    struct Text<'a> {
        #[serde(borrow, default)]
        text: Option<&'a RawValue>,
    }
    let texts = |raws: Vec<&RawValue>| {
        raws.into_iter()
            .filter_map(|r| match r.get().as_bytes().first() {
                Some(b'"') => string_of(r.get()),
                _ => serde_json::from_str::<Text<'_>>(r.get())
                    .ok()?
                    .text
                    .and_then(|t| string_of(t.get())),
            })
            .collect::<Vec<String>>()
            .join("\n\n")
    };
    match raw.trim_start().as_bytes().first() {
        Some(b'"') => string_of(raw).unwrap_or_else(|| raw.to_owned()),
        Some(b'[') => {
            serde_json::from_str::<Vec<&RawValue>>(raw).map_or_else(|_| raw.to_owned(), texts)
        }
        Some(b'{') => serde_json::from_str::<&RawValue>(raw)
            .map_or_else(|_| raw.to_owned(), |r| texts(vec![r])),
        _ => raw.to_owned(),
    }
}

/// The text of a JSON string value, or the JSON text itself for anything else
/// (`raw` is a value's JSON text). **O(len)**.
pub(crate) fn string_or_json(raw: Option<&str>) -> String {
    match raw {
        None => String::new(),
        Some(raw) => string_of(raw).unwrap_or_else(|| raw.to_owned()),
    }
}

/// An optional member kept as its JSON text, for `#[serde(deserialize_with)]`: read
/// as a [`RawValue`] (so validated, and `null` is `None`), so that a struct read by
/// serde and one walked by [`valid::Cursor`] hold the same `&str`. **O(len)**.
pub(crate) fn raw_text<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<&'a str>, D::Error> {
    Option::<&'a RawValue>::deserialize(d).map(|r| r.map(RawValue::get))
}

/// [`raw_text`] for an optional array: its elements' JSON texts. **O(len)**.
pub(crate) fn raw_texts<'de: 'a, 'a, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<&'a str>>, D::Error> {
    let raw = Option::<Vec<&'a RawValue>>::deserialize(d)?;
    Ok(raw.map(|r| r.into_iter().map(RawValue::get).collect()))
}

/// Strategies of JSON texts for the property tests that hold a [`valid::Cursor`]
/// walk to serde_json's reading of the same text.
#[cfg(test)]
pub(crate) mod generate {
    use proptest::prelude::*;
    use proptest::test_runner::TestCaseError;

    /// The real transcript `name` of `tests/fixtures/transcripts/`.
    pub(crate) fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/transcripts/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    /// Holds a walk to serde on the generated `text` (which must be JSON): when
    /// `walk` takes the text, `parse` (serde's reading) must give the same.
    pub(crate) fn walk_agrees<'a, W, E>(
        text: &'a str,
        walk: impl FnOnce(&'a str) -> Option<W>,
        parse: impl FnOnce(&'a str) -> Result<W, E>,
    ) -> Result<(), TestCaseError>
    where
        W: PartialEq + std::fmt::Debug,
        E: std::fmt::Display,
    {
        let _: &serde_json::value::RawValue = serde_json::from_str(text)
            .map_err(|e| TestCaseError::fail(format!("generated no JSON: {e}: {text}")))?;
        if let Some(walked) = walk(text) {
            let parsed = parse(text).map_err(|e| {
                TestCaseError::fail(format!("{text}: walked {walked:?}, serde says {e}"))
            })?;
            prop_assert_eq!(walked, parsed, "{}", text);
        }
        Ok(())
    }

    /// One of `options`, as a strategy of JSON texts.
    pub(crate) fn one_of(options: &[&'static str]) -> impl Strategy<Value = String> + use<> {
        proptest::sample::select(options.to_vec()).prop_map(str::to_owned)
    }

    /// Mostly one of `usual`, at times one of `odd` (what the walk leaves to serde,
    /// or what serde refuses): so that most generated messages are walked whole.
    pub(crate) fn mostly(
        usual: &[&'static str],
        odd: &[&'static str],
    ) -> impl Strategy<Value = String> + use<> {
        prop_oneof![40 => one_of(usual), 1 => one_of(odd)]
    }

    /// An object of `members` (name, value), in any order, at times with one
    /// member given twice, blanks between the tokens at times.
    pub(crate) fn object(
        members: Vec<BoxedStrategy<(String, String)>>,
    ) -> impl Strategy<Value = String> {
        let blank = mostly(&["", " "], &["\n  ", "\t"]);
        (
            members
                .into_iter()
                .map(|m| proptest::option::weighted(0.75, m))
                .collect::<Vec<_>>()
                .prop_shuffle(),
            any::<proptest::sample::Index>(),
            proptest::bool::weighted(0.02),
            blank,
        )
            .prop_map(|(members, twice, dup, w)| {
                let mut members: Vec<(String, String)> = members.into_iter().flatten().collect();
                if dup && !members.is_empty() {
                    let again = members[twice.index(members.len())].clone();
                    members.push(again);
                }
                let body: Vec<String> = members
                    .iter()
                    .map(|(k, v)| format!("{w}\"{k}\"{w}:{w}{v}"))
                    .collect();
                format!("{{{}{w}}}", body.join(","))
            })
    }

    /// A member: one of `names`, with a value of `value`.
    pub(crate) fn member(
        names: impl Strategy<Value = String> + 'static,
        value: impl Strategy<Value = String> + 'static,
    ) -> BoxedStrategy<(String, String)> {
        (names, value).boxed()
    }

    /// An array of zero to three `item`s.
    pub(crate) fn array(item: impl Strategy<Value = String>) -> impl Strategy<Value = String> {
        proptest::collection::vec(item, 0..4).prop_map(|items| format!("[{}]", items.join(", ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_content_is_the_raw_member_read_in_one_pass() {
        #[derive(Deserialize)]
        struct Raw<'a> {
            #[serde(borrow)]
            content: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        struct Read<'a> {
            #[serde(borrow)]
            content: Option<InlineContent<'a>>,
        }
        // (message, what the one pass reads: the literal, the elements, or `None` for
        // the slow path)
        let cases = [
            (r#"{"content":"plain"}"#, Some(vec![r#""plain""#])),
            (
                r#"{"content" :  "spaced out" }"#,
                Some(vec![r#""spaced out""#]),
            ),
            (r#"{"content":""}"#, Some(vec![r#""""#])),
            (r#"{"content":"a\nb"}"#, None),
            (r#"{"content":"\u00e9"}"#, None),
            (
                r#"{"content":[1, {"x":"y"} ,[]]}"#,
                Some(vec!["1", r#"{"x":"y"}"#, "[]"]),
            ),
            (r#"{"content":[]}"#, Some(vec![])),
            (r#"{"content":{"a":[1]}}"#, None),
            (r#"{"content":7}"#, None),
            (r#"{"content":true}"#, None),
        ];
        for (text, want) in cases {
            let raw: Raw<'_> = serde_json::from_str(text).expect("test JSON");
            let read: Read<'_> = serde_json::from_str(text).expect("test JSON");
            let got: Option<Vec<&str>> = match read.content.expect("present") {
                InlineContent::Str(s) => InlineContent::literal(text, s).map(|l| vec![l]),
                InlineContent::Split(items) => Some(items),
                InlineContent::Other => None,
            };
            assert_eq!(got, want, "{text}");
            // What the one pass reads is the raw member's own text.
            if let (Some(got), Some(raw)) = (got, raw.content) {
                match raw.get().strip_prefix('[') {
                    Some(_) => {
                        let items: Vec<&RawValue> = serde_json::from_str(raw.get()).expect("array");
                        assert_eq!(got, items.iter().map(|i| i.get()).collect::<Vec<_>>());
                    }
                    None => assert_eq!(got, vec![raw.get()], "{text}"),
                }
            }
        }
        // Null and absent are no content.
        let read: Read<'_> = serde_json::from_str(r#"{"content":null}"#).expect("test JSON");
        assert!(read.content.is_none());
    }

    fn first(json: &str) -> String {
        let raw: &RawValue = serde_json::from_str(json).expect("test JSON");
        first_line_with(Some(raw.get()), false)
    }

    /// The two-pass reading `split` replaced: the array as raw text, then its elements.
    fn split_twice(text: &str, format: Format) -> Option<(Vec<Range<usize>>, Range<usize>)> {
        let array: &RawValue = if text.trim_start().starts_with('{') {
            let h: Holder<'_, &RawValue> = serde_json::from_str(text).ok()?;
            preferred(format, [h.messages, h.input, h.contents, h.history])?
        } else {
            serde_json::from_str(text).ok()?
        };
        let elements: Vec<&RawValue> = serde_json::from_str(array.get()).ok()?;
        let spans = elements.iter().map(|e| span_of(text, e)).collect();
        Some((spans, span_of(text, array)))
    }

    #[test]
    fn one_pass_split_finds_what_two_passes_found() {
        let docs = [
            r#"[{"role":"user"}]"#,
            " \n [ {\"a\":1} ,\n\t{\"b\":[1,{\"c\":\"]\"}]} ] \n",
            "[]",
            "  [ ]  ",
            r#"{"messages":[{"role":"user","content":"x"}],"system":"s"}"#,
            "{\"model\":\"m\",\"messages\" :\n[\n  {\"k\":\"[\\\"]\"},\n  2, \"s\", null, [[]]\n\n]\n, \"tools\": []}",
            r#"{"messages":[]}"#,
            r#"{"messages":"no array","history":[{}]}"#,
            r#"{"messages":null,"history":[{"x":1}]}"#,
            r#"{"input":[{"type":"message"}],"messages":[{"a":1},{"b":2}]}"#,
            r#"{"contents":[{"parts":[]}],"input":[1]}"#,
            r#"{"history":{"not":"an array"}}"#,
            r#"{"other":1}"#,
            r#"{"messages":[1,2}"#,
        ];
        for text in docs {
            for format in [Format::OpenAiChat, Format::OpenAiResponses, Format::Gemini] {
                let once = split(text, format).ok().map(|d| {
                    (
                        d.elements.iter().map(|e| span_of(text, e)).collect(),
                        d.array_span,
                    )
                });
                assert_eq!(once, split_twice(text, format), "{format:?} {text:?}");
            }
        }
    }

    #[test]
    fn lines_are_split_inclusive_lines_without_blank_ones() {
        for text in [
            "",
            "\n",
            "a",
            "a\n",
            "a\r\nb",
            "\n\n a \n\r\n\tb\r\n\n",
            " \n{}\n  \n[]",
            "é\nü\r\n",
        ] {
            let mut offset = 0;
            let want: Vec<(usize, Range<usize>)> = text
                .split_inclusive('\n')
                .enumerate()
                .filter_map(|(i, piece)| {
                    let start = offset;
                    offset += piece.len();
                    let body = piece.trim_end_matches(['\n', '\r']);
                    (!body.trim().is_empty()).then(|| (i + 1, start..start + body.len()))
                })
                .collect();
            assert_eq!(lines(text).collect::<Vec<_>>(), want, "{text:?}");
        }
    }

    #[test]
    fn json_str_reads_like_string_and_borrows_plain_strings() {
        for json in [
            r#""plain""#,
            r#""esc\"aped\n""#,
            r#""\u00e9""#,
            "null",
            "1",
            "[]",
            "{}",
        ] {
            let ours = serde_json::from_str::<JsonStr<'_>>(json).map(|s| s.as_str().to_owned());
            let std = serde_json::from_str::<String>(json);
            match (ours, std) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{json}"),
                (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{json}"),
                (a, b) => panic!("{json}: {a:?} vs {b:?}"),
            }
        }
        let plain: JsonStr<'_> = serde_json::from_str(r#""plain""#).expect("a string");
        assert!(matches!(plain.0, Cow::Borrowed("plain")));
    }

    #[test]
    fn line_index_agrees_with_counting_newlines() {
        for text in ["", "a", "\n", "a\nb", "a\n\nbc\n", "\r\n{\n}\n"] {
            let index = LineIndex::new(text);
            for offset in 0..=text.len() + 1 {
                assert_eq!(
                    index.line(offset),
                    line_at(text, offset),
                    "{text:?} at {offset}"
                );
            }
        }
    }

    #[test]
    fn first_lines_of_strings_blocks_and_objects() {
        assert_eq!(first(r#""Sunny\nUV 5""#), "Sunny");
        assert_eq!(first(r#""a\\nb\r\nc""#), "a\\nb");
        assert_eq!(first(r#""\u00e9t\u00e9\"q\"\nx""#), "été\"q\"");
        assert_eq!(first(r#""""#), "");
        assert_eq!(first(r#""\nsecond""#), "");
        assert_eq!(first(r#""tab\there\nx""#), "tab\there");
        assert_eq!(first(r#""ünï\ncode""#), "ünï");
        assert_eq!(
            first(r#"[{"type":"image"},{"type":"text","text":"one\ntwo"}]"#),
            "one"
        );
        assert_eq!(first(r#"{"result":"r1\nr2","other":1}"#), "r1");
        assert_eq!(
            first(r#"{"output":{"content":[{"text":"deep\nx"}]}}"#),
            "deep"
        );
        assert_eq!(first("42"), "42");
        assert_eq!(first(r#"{"a":1}"#), r#"{"a":1}"#);
        assert_eq!(first_line_with(None, false), "");
    }

    #[test]
    fn result_lines_are_the_units_first_lines() {
        let unit = |json: &str| {
            let raw: &RawValue = serde_json::from_str(json).expect("test JSON");
            result_line(Some(raw.get()))
        };
        assert_eq!(unit(r#""  Sunny  \nUV 5""#), "Sunny");
        assert_eq!(unit(r#""\n\n  second\nthird""#), "second");
        assert_eq!(unit(&format!("{:?}", "y".repeat(300))).chars().count(), 201);
        assert_eq!(unit(r#"[{"type":"text","text":"one\ntwo"}]"#), "one");
        assert_eq!(result_line(None), "");
    }

    /// `text` as a JSON string literal, each character written as itself or, where
    /// `escape` says so, as `\uXXXX` (a surrogate pair beyond the BMP); quotes,
    /// backslashes and control characters always escaped.
    fn literal(text: &str, escape: &[bool]) -> String {
        let mut out = String::from('"');
        for (k, c) in text.chars().enumerate() {
            match c {
                c if escape[k % escape.len()] || ((c as u32) < 0x20 && !"\n\r".contains(c)) => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        out.push_str(&format!("\\u{unit:04x}"));
                    }
                }
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                c => out.push(c),
            }
        }
        out.push('"');
        out
    }

    /// `first_line_of_string` as it was before it searched: a step per byte, serde_json
    /// unescaping the prefix. The oracle of the search and of [`unescape`] in it.
    fn first_line_stepped(literal: &str) -> Option<String> {
        let bytes = literal.as_bytes();
        let mut i = 1;
        while i < bytes.len() {
            match bytes[i] {
                b'\\' => match bytes.get(i + 1) {
                    Some(b'n' | b'r') => break,
                    Some(b'u') => i += 6,
                    _ => i += 2,
                },
                b'"' => break,
                _ => i += 1,
            }
        }
        let prefix = literal.get(..i.min(bytes.len()))?;
        serde_json::from_str::<String>(&format!("{prefix}\"")).ok()
    }

    /// Pieces of string literals' contents, well formed and not: every escape, `\u`
    /// escapes of surrogate pairs, lone and mismatched surrogates, bad hex, unknown
    /// escapes, a raw quote, raw control characters, a trailing backslash.
    const PIECES: [&str; 30] = [
        "a",
        "plain text ",
        " ",
        "é",
        "😀",
        "\u{3000}",
        "\\\"",
        "\\\\",
        "\\/",
        "\\b",
        "\\f",
        "\\n",
        "\\r",
        "\\t",
        "\\u00e9",
        "\\u0000",
        "\\u000A",
        "\\uD83D\\uDE00",
        "\\ud83d",
        "\\udc00",
        "\\uD83D\\u0041",
        "\\uD83Dx",
        "\\uZZZZ",
        "\\u12",
        "\\x",
        "\\U0041",
        "\\u+123",
        "\"",
        "\u{1}",
        "\\",
    ];

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(5_000))]
        /// [`unescape`] answers only what serde_json answers, and [`string_of`] answers
        /// exactly what serde_json answers, on literals well formed and not.
        #[test]
        fn unescape_reads_as_serde_json_reads(
            pieces in proptest::collection::vec((0usize..PIECES.len(), 1usize..4), 0..16),
            raw in "[ -~]{0,6}",
        ) {
            let body: String = pieces.iter().map(|&(k, n)| PIECES[k].repeat(n)).collect();
            for body in [body.clone(), format!("{body}{raw}")] {
                let literal = format!("\"{body}\"");
                let serde = serde_json::from_str::<String>(&literal).ok();
                if let Some(fast) = unescape(&body) {
                    proptest::prop_assert_eq!(Some(fast), serde.clone(), "{}", literal);
                }
                proptest::prop_assert_eq!(string_of(&literal), serde.clone(), "{}", literal);
                proptest::prop_assert_eq!(string_of(&format!(" {literal}\n")), serde, "{}", literal);
                proptest::prop_assert_eq!(
                    first_line_of_string(&literal, false),
                    first_line_stepped(&literal),
                    "{}", literal
                );
            }
        }
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1_000))]
        /// The window reads what the whole first line gives, on strings around and
        /// past it: blanks before and after, line breaks (escaped, and as `\u000a`),
        /// escapes of every kind, characters of one to four bytes and surrogate pairs
        /// that may straddle the window's edge; bare, and inside a result object.
        #[test]
        fn the_windowed_line_is_the_whole_lines(
            pieces in proptest::collection::vec((0usize..9, 1usize..500), 0..12),
            escape in proptest::collection::vec(proptest::prelude::any::<bool>(), 1..7),
        ) {
            const PIECES: [&str; 9] = ["a", " ", "\t", "\n", "\r", "é", "😀", "\"", "\u{3000}"];
            let text: String = pieces.iter().map(|&(k, n)| PIECES[k].repeat(n)).collect();
            let lit = literal(&text, &escape);
            for json in [lit.clone(), format!("{{\"output\":{lit}}}")] {
                let raw: &RawValue = serde_json::from_str(&json).expect("a literal");
                proptest::prop_assert_eq!(
                    result_line_with(Some(raw.get()), true),
                    result_line_with(Some(raw.get()), false),
                    "{}", json
                );
            }
        }
    }

    /// `first_line_of_raw` as it read arrays and objects before [`valid`]: serde_json
    /// parsed them again, as a list of raw values and as a struct of the four fields.
    fn first_line_parsed(text: &str, depth: usize, capped: bool) -> Option<String> {
        match text.as_bytes().first()? {
            b'"' => first_line_of_string(text, capped),
            b'[' if depth < MAX_DEPTH => {
                let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
                items
                    .into_iter()
                    .find_map(|i| first_line_parsed(i.get(), depth + 1, capped))
            }
            b'{' if depth < MAX_DEPTH => {
                first_line_of_fields(text, depth, capped, first_line_parsed)
            }
            _ => None,
        }
    }

    /// JSON texts shaped like tool results: strings with line breaks and escapes,
    /// scalars, and arrays and objects nested a few deep whose names repeat, include the
    /// four fields, are written with escapes, and are spaced every way JSON allows.
    fn result_json() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(r#""one\ntwo""#.to_owned()),
            Just(r#""  \n\n  later line""#.to_owned()),
            Just(r#""q\"uote \\ back \u00e9 \ud83d\ude00""#.to_owned()),
            Just(r#""]}{[,:""#.to_owned()),
            Just(r#""ends in a backslash \\""#.to_owned()),
            Just(r#""\\\"\\\\""#.to_owned()),
            Just(r#""""#.to_owned()),
            Just("-12.5e3".to_owned()),
            Just("true".to_owned()),
            Just("null".to_owned()),
            "[a-z ]{0,12}".prop_map(|t| format!("\"{t}\"")),
        ];
        let blank = prop_oneof![Just(""), Just(" "), Just("\n\t "), Just("\r\n")];
        leaf.prop_recursive(4, 40, 5, move |inner| {
            let name = prop_oneof![
                Just("text"),
                Just("output"),
                Just("content"),
                Just("result"),
                Just("type"),
                Just("te\\u0078t"),
                Just("out\\\"put"),
                Just("Text"),
            ];
            prop_oneof![
                (proptest::collection::vec((inner.clone(), blank.clone()), 0..5)).prop_map(
                    |items| format!(
                        "[{}]",
                        items
                            .iter()
                            .map(|(v, w)| format!("{w}{v}{w}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                ),
                (proptest::collection::vec((name, inner, blank.clone()), 0..5)).prop_map(
                    |members| format!(
                        "{{{}}}",
                        members
                            .iter()
                            .map(|(k, v, w)| format!("{w}\"{k}\"{w}:{w}{v}{w}"))
                            .collect::<Vec<_>>()
                            .join(",")
                    )
                ),
            ]
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2_000))]
        /// The scanner reads arrays and objects as serde_json's second parse read them.
        #[test]
        fn the_scanned_first_line_is_the_parsed_ones(json in result_json()) {
            let raw: &RawValue = serde_json::from_str(&json).expect("generated JSON");
            for capped in [false, true] {
                proptest::prop_assert_eq!(
                    first_line_of_raw(raw.get(), 0, capped),
                    first_line_parsed(raw.get(), 0, capped),
                    "{}", json
                );
            }
        }
    }

    #[test]
    fn the_scanner_splits_valid_json_as_serde_does() {
        let text = r#"{ "a" : [1, "x\"]", {"b":{}}] , "c\"d":null,"e":-1.5e3 }"#;
        assert_eq!(
            valid::members(text),
            Some(vec![
                ("a", r#"[1, "x\"]", {"b":{}}]"#),
                ("c\\\"d", "null"),
                ("e", "-1.5e3"),
            ])
        );
        assert_eq!(
            valid::elements(r#"[1, "x\"]", {"b":{}}]"#),
            Some(vec!["1", r#""x\"]""#, r#"{"b":{}}"#])
        );
        assert_eq!(valid::elements("[ ]"), Some(vec![]));
        // What no valid text holds gives `None`, not a panic.
        for broken in ["{", "[1,", r#"{"a" 1}"#, r#"{"a":"#, "[\"x", "{\"a\":1]"] {
            let _ = valid::members(broken);
            let _ = valid::elements(broken);
        }
    }

    #[test]
    fn a_long_first_line_is_read_from_the_window() {
        let long = format!("\"  {}\"", "{\\\"k\\\": 1}, ".repeat(300));
        let kept = first_line_of_string(&long, true).expect("a line");
        assert_eq!(kept.chars().count(), 201);
        assert!(
            kept.starts_with("{\"k\": 1}") && kept.ends_with('…'),
            "{kept}"
        );
        let plain = format!("\"{}\"", "x".repeat(2000));
        assert_eq!(
            capped_line(&plain, LINE_WINDOW),
            Some(format!("{}…", "x".repeat(200)))
        );
        assert_eq!(
            first_line_of_string("\"short\"", true).as_deref(),
            Some("short")
        );
        // A line break, or only blanks past the 200th character: not decided.
        let broken = format!("\"{}\\n{}\"", "x".repeat(300), "y".repeat(2000));
        assert_eq!(capped_line(&broken, 400), None);
        assert_eq!(first_line_of_string(&broken, true), Some("x".repeat(300)));
        let blank_tail = format!("\"{}{}\"", "x".repeat(200), " ".repeat(2000));
        assert_eq!(capped_line(&blank_tail, LINE_WINDOW), None);
    }

    #[test]
    fn the_line_index_agrees_with_counting_from_the_start() {
        let text = "[\n{\"a\":1},\n\n{\"b\":\"x\\ny\"},{\"c\":2}\n]";
        let index = LineIndex::new(text);
        for offset in (0..=text.len() + 2).chain([3, 0, 9, 40]) {
            let naive = 1 + text.as_bytes()[..offset.min(text.len())]
                .iter()
                .filter(|&&b| b == b'\n')
                .count();
            assert_eq!(line_at(text, offset), naive, "offset {offset}");
            assert_eq!(index.line(offset.min(text.len())), naive, "offset {offset}");
        }
    }
}
