//! The framings a provider stream comes in, told apart by its first byte, and cut into
//! frames (one provider event each):
//!
//! - **SSE** (anything else): `event:` / `data:` blocks ([`sse`](super::sse)).
//! - **JSON array** (`[`): Gemini `streamGenerateContent` without `alt=sse`, a streamed
//!   (often pretty-printed) array of response objects.
//! - **JSON values** (`{`): one object after another, usually one per line (the
//!   recorders of the Vercel AI SDK store SSE `data` payloads so).
//!
//! A leading byte order mark and leading whitespace are skipped. The bytes of one frame
//! are capped ([`Caps::max_event_bytes`](super::Caps::max_event_bytes)).

use memchr::{memchr2, memchr3};

use super::buffer::{Buffer, Frame};
use super::sse::SseFramer;
use super::{At, StreamError};

/// Where a JSON framer is, outside a value.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Place {
    /// Array framing, before `[`.
    BeforeArray,
    /// Array framing, after `[` or `,`: an element or `]` comes.
    Element,
    /// Array framing, after an element: `,` or `]` comes.
    AfterElement,
    /// Array framing, after `]`: only whitespace may follow.
    AfterArray,
    /// JSON values, one after another.
    Values,
}

/// Cuts a JSON array of objects, or a sequence of objects, into one object per frame,
/// scanning each byte once (the scan state survives between chunks).
pub(crate) struct JsonFramer {
    place: Place,
    /// Inside an object: bytes of it scanned so far (from its `{`).
    scanned: Option<usize>,
    depth: u32,
    in_string: bool,
    escaped: bool,
    number: u64,
    max_event: usize,
}

impl JsonFramer {
    fn new(array: bool, max_event: usize) -> Self {
        JsonFramer {
            place: if array {
                Place::BeforeArray
            } else {
                Place::Values
            },
            scanned: None,
            depth: 0,
            in_string: false,
            escaped: false,
            number: 0,
            max_event,
        }
    }

    /// The next complete object, consuming it; `Ok(None)` when more input is needed.
    /// **O(bytes scanned)**, each byte once.
    fn next<'b>(
        &mut self,
        input: &'b mut Buffer,
        eof: bool,
    ) -> Result<Option<Frame<'b>>, StreamError> {
        loop {
            let Some(scanned) = self.scanned else {
                // Between objects: whitespace, and the array's punctuation.
                let rest = input.rest();
                let Some(skip) = rest.iter().position(|b| !b.is_ascii_whitespace()) else {
                    input.consume(rest.len());
                    return Ok(None);
                };
                input.consume(skip);
                let offset = input.offset();
                let byte = input.rest()[0];
                let bad = |what: &str| StreamError::Framing {
                    event: self.number + 1,
                    offset,
                    message: format!("{what}, found {:?}", char::from(byte)),
                };
                match (self.place, byte) {
                    (Place::BeforeArray, b'[') => self.place = Place::Element,
                    (Place::BeforeArray, _) => return Err(bad("expected `[`")),
                    (Place::Element | Place::Values, b'{') => {
                        self.scanned = Some(0);
                        continue;
                    }
                    (Place::Element | Place::AfterElement, b']') => self.place = Place::AfterArray,
                    (Place::AfterElement, b',') => self.place = Place::Element,
                    (Place::AfterArray, _) => {
                        return Err(bad("bytes after the end of the JSON array"));
                    }
                    (Place::Element | Place::Values, _) => {
                        return Err(bad("expected a JSON object"));
                    }
                    (Place::AfterElement, _) => return Err(bad("expected `,` or `]`")),
                }
                input.consume(1);
                continue;
            };
            // Inside an object: find where it ends.
            let rest = input.rest();
            let mut i = scanned;
            let end = loop {
                if i >= rest.len() {
                    break None;
                }
                if self.in_string {
                    if self.escaped {
                        self.escaped = false;
                        i += 1;
                        continue;
                    }
                    match memchr2(b'"', b'\\', &rest[i..]) {
                        Some(k) if rest[i + k] == b'\\' => {
                            self.escaped = true;
                            i += k + 1;
                        }
                        Some(k) => {
                            self.in_string = false;
                            i += k + 1;
                        }
                        None => i = rest.len(),
                    }
                } else {
                    match memchr3(b'"', b'{', b'}', &rest[i..]) {
                        Some(k) => {
                            let at = i + k;
                            i = at + 1;
                            match rest[at] {
                                b'"' => self.in_string = true,
                                b'{' => self.depth += 1,
                                _ => {
                                    self.depth -= 1;
                                    if self.depth == 0 {
                                        break Some(i);
                                    }
                                }
                            }
                        }
                        None => i = rest.len(),
                    }
                }
            };
            let offset = input.offset();
            let here = At {
                event: self.number + 1,
                offset,
            };
            let Some(end) = end else {
                if i > self.max_event {
                    return Err(here.too_large(self.max_event, "event"));
                }
                self.scanned = Some(i);
                if eof {
                    return Err(StreamError::Truncated {
                        event: self.number + 1,
                        offset,
                    });
                }
                return Ok(None);
            };
            if end > self.max_event {
                return Err(here.too_large(self.max_event, "event"));
            }
            self.scanned = None;
            self.number += 1;
            if self.place == Place::Element {
                self.place = Place::AfterElement;
            }
            let number = self.number;
            let bytes = input.take(end);
            let data = std::str::from_utf8(bytes).map_err(|e| StreamError::Framing {
                event: number,
                offset: offset + e.valid_up_to() as u64,
                message: "the stream is not UTF-8 text".to_owned(),
            })?;
            return Ok(Some(Frame {
                name: "",
                data,
                number,
                offset,
                unterminated: false,
            }));
        }
    }
}

/// The framing of a stream, once its first byte told it.
enum Framing {
    Undecided,
    Sse(SseFramer),
    Json(JsonFramer),
}

/// A stream's bytes cut into frames, whatever the framing.
pub(crate) struct Frames {
    input: Buffer,
    framing: Framing,
    eof: bool,
    max_event: usize,
}

impl Frames {
    /// No bytes yet; one frame may hold at most `max_event` bytes. **O(1)**.
    pub(crate) fn new(max_event: usize) -> Self {
        Frames {
            input: Buffer::default(),
            framing: Framing::Undecided,
            eof: false,
            max_event,
        }
    }

    /// Takes more bytes. **O(len + unconsumed)**.
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if !self.eof {
            self.input.push(bytes);
        }
    }

    /// Marks the end of input. **O(1)**.
    pub(crate) fn finish(&mut self) {
        self.eof = true;
    }

    /// Whether the end of input was marked. **O(1)**.
    pub(crate) fn at_eof(&self) -> bool {
        self.eof
    }

    /// Stream offset of the first byte not consumed yet. **O(1)**.
    pub(crate) fn offset(&self) -> u64 {
        self.input.offset()
    }

    /// Bytes held in the buffer. **O(1)**.
    pub(crate) fn held(&self) -> usize {
        self.input.held()
    }

    /// Frames read so far. **O(1)**.
    pub(crate) fn frames(&self) -> u64 {
        match &self.framing {
            Framing::Undecided => 0,
            Framing::Sse(f) => f.events(),
            Framing::Json(f) => f.number,
        }
    }

    /// Whether the stream is a JSON array whose `]` was read. **O(1)**.
    pub(crate) fn array_closed(&self) -> bool {
        matches!(&self.framing, Framing::Json(f) if f.place == Place::AfterArray)
    }

    /// The next frame; `Ok(None)` when more input is needed, or at the end of input
    /// when nothing is left. **O(bytes consumed)**.
    pub(crate) fn next(&mut self) -> Result<Option<Frame<'_>>, StreamError> {
        if matches!(self.framing, Framing::Undecided) {
            let rest = self.input.rest();
            const BOM: &[u8] = b"\xEF\xBB\xBF";
            if self.input.offset() == 0 && !rest.is_empty() && BOM.starts_with(rest) && !self.eof {
                return Ok(None);
            }
            if self.input.offset() == 0 && rest.starts_with(BOM) {
                self.input.consume(BOM.len());
            }
            let rest = self.input.rest();
            let Some(skip) = rest.iter().position(|b| !b.is_ascii_whitespace()) else {
                self.input.consume(rest.len());
                return Ok(None);
            };
            let first = rest[skip];
            self.input.consume(skip);
            self.framing = match first {
                b'[' => Framing::Json(JsonFramer::new(true, self.max_event)),
                b'{' => Framing::Json(JsonFramer::new(false, self.max_event)),
                _ => Framing::Sse(SseFramer::new(self.max_event)),
            };
        }
        match &mut self.framing {
            Framing::Undecided => Ok(None),
            Framing::Sse(f) => f.next(&mut self.input, self.eof),
            Framing::Json(f) => f.next(&mut self.input, self.eof),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(text: &[u8], step: usize) -> Result<Vec<(String, u64)>, StreamError> {
        let mut f = Frames::new(1 << 20);
        let mut out = Vec::new();
        let mut chunks = text.chunks(step.max(1));
        loop {
            while let Some(frame) = f.next()? {
                out.push((frame.data.to_owned(), frame.offset));
            }
            if f.at_eof() {
                return Ok(out);
            }
            match chunks.next() {
                Some(c) => f.push(c),
                None => f.finish(),
            }
        }
    }

    #[test]
    fn a_json_array_splits_into_its_objects_in_any_chunking() {
        let text = b"\xEF\xBB\xBF [{\"a\":\"}{\\\"\"},\r\n {\"b\":{\"c\":[1,{}]}}\n]\n";
        let want = vec![
            ("{\"a\":\"}{\\\"\"}".to_owned(), 5),
            ("{\"b\":{\"c\":[1,{}]}}".to_owned(), 21),
        ];
        for step in 1..=text.len() {
            assert_eq!(frames(text, step).expect("valid"), want, "chunks of {step}");
        }
    }

    #[test]
    fn json_values_one_per_line() {
        let text = b"{\"x\":1}\n{\"y\":\"\\\\\"}\n";
        for step in 1..=text.len() {
            let got = frames(text, step).expect("valid");
            assert_eq!(got.len(), 2);
            assert_eq!(got[1], ("{\"y\":\"\\\\\"}".to_owned(), 8));
        }
    }

    #[test]
    fn broken_json_framing_names_the_byte() {
        for (text, offset) in [(&b"[{} {}]"[..], 4), (&b"[{}] x"[..], 5), (&b"{} 7"[..], 3)] {
            match frames(text, 2) {
                Err(StreamError::Framing { offset: o, .. }) => assert_eq!(o, offset, "{text:?}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert!(matches!(
            frames(b"{\"a\":", 2),
            Err(StreamError::Truncated {
                event: 1,
                offset: 0
            })
        ));
    }
}
