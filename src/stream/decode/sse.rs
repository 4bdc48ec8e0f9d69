//! Server-sent events framing (the WHATWG `text/event-stream` rules), sans-IO: bytes in
//! any chunk split, events out.
//!
//! - Lines end with CRLF, LF or CR; a CR that ends the bytes seen so far waits to see
//!   whether an LF follows (so a CRLF split across chunks is one line end).
//! - `:` starts a comment line (OpenRouter's `: OPENROUTER PROCESSING` keep-alives).
//! - `field: value` (one leading space of the value dropped); `data` lines accumulate,
//!   joined by `\n`; `event` names the event; `id`, `retry` and unknown fields are
//!   ignored. A blank line dispatches the event; an event without `data` is dropped.
//! - At the end of input, a last line without its line end and an event without its
//!   blank line are complete (the Anthropic SDK's recordings end right after the last
//!   `data:` line).
//!
//! The bytes of one event (its data plus the line being read) are capped: past
//! [`Caps::max_event_bytes`](super::Caps::max_event_bytes) the framer stops with
//! [`StreamError::TooLarge`](super::StreamError::TooLarge) instead of buffering on.

use memchr::memchr2;

use super::buffer::{Buffer, Frame};
use super::{At, StreamError};

/// The SSE framer's state between calls: the event being read.
pub(crate) struct SseFramer {
    data: String,
    name: String,
    has_data: bool,
    /// The last call returned an event borrowing `data` and `name`: clear them first.
    returned: bool,
    /// Byte offset of the first line of the event being read.
    start: Option<u64>,
    number: u64,
    /// The last line ended with a CR at the end of the bytes seen: skip one LF.
    skip_lf: bool,
    /// The input ended inside the event's last line (no line end after it).
    cut: bool,
    max_event: usize,
}

impl SseFramer {
    /// A framer capping one event at `max_event` bytes. **O(1)**.
    pub(crate) fn new(max_event: usize) -> Self {
        SseFramer {
            data: String::new(),
            name: String::new(),
            has_data: false,
            returned: false,
            start: None,
            number: 0,
            skip_lf: false,
            cut: false,
            max_event,
        }
    }

    /// Events dispatched so far. **O(1)**.
    pub(crate) fn events(&self) -> u64 {
        self.number
    }

    /// The next complete event in `input`, consuming its lines; `Ok(None)` when more
    /// input is needed (or, at `eof`, when there is nothing left). **O(bytes consumed)**.
    pub(crate) fn next<'s>(
        &'s mut self,
        input: &mut Buffer,
        eof: bool,
    ) -> Result<Option<Frame<'s>>, StreamError> {
        if self.returned {
            self.data.clear();
            self.name.clear();
            self.has_data = false;
            self.returned = false;
            self.start = None;
            self.cut = false;
        }
        loop {
            if self.skip_lf {
                match input.rest().first() {
                    Some(&b) => {
                        if b == b'\n' {
                            input.consume(1);
                        }
                        self.skip_lf = false;
                    }
                    None if eof => self.skip_lf = false,
                    None => return Ok(None),
                }
            }
            let rest = input.rest();
            let (line_len, end_len) = match memchr2(b'\n', b'\r', rest) {
                Some(i) if rest[i] == b'\r' => match rest.get(i + 1) {
                    Some(b'\n') => (i, 2),
                    Some(_) => (i, 1),
                    None => {
                        self.skip_lf = true;
                        (i, 1)
                    }
                },
                Some(i) => (i, 1),
                None => {
                    if self.data.len().saturating_add(rest.len()) > self.max_event {
                        return Err(self.too_large(input.offset()));
                    }
                    if !eof {
                        return Ok(None);
                    }
                    if rest.is_empty() {
                        return Ok(self.dispatch());
                    }
                    self.cut = true;
                    (rest.len(), 0)
                }
            };
            let offset = input.offset();
            let line = &rest[..line_len];
            let line = std::str::from_utf8(line).map_err(|e| StreamError::Framing {
                event: self.number + 1,
                offset: offset + e.valid_up_to() as u64,
                message: "the stream is not UTF-8 text".to_owned(),
            })?;
            if line.is_empty() {
                input.consume(end_len);
                if self.has_data {
                    return Ok(self.dispatch());
                }
                self.name.clear();
                self.start = None;
                continue;
            }
            let (field, value) = match line.find(':') {
                Some(0) => ("", ""),
                Some(i) => {
                    let v = &line[i + 1..];
                    (&line[..i], v.strip_prefix(' ').unwrap_or(v))
                }
                None => (line, ""),
            };
            if self.start.is_none() && !field.is_empty() {
                self.start = Some(offset);
            }
            match field {
                "data" => {
                    if self.data.len() + value.len() + 1 > self.max_event {
                        return Err(self.too_large(offset));
                    }
                    if self.has_data {
                        self.data.push('\n');
                    }
                    self.data.push_str(value);
                    self.has_data = true;
                }
                "event" => {
                    if value.len() > self.max_event {
                        return Err(self.too_large(offset));
                    }
                    self.name.clear();
                    self.name.push_str(value);
                }
                _ => {}
            }
            input.consume(line_len + end_len);
        }
    }

    /// The event read so far, if it has data. **O(1)**.
    fn dispatch(&mut self) -> Option<Frame<'_>> {
        if !self.has_data {
            return None;
        }
        self.number += 1;
        self.returned = true;
        Some(Frame {
            name: &self.name,
            data: &self.data,
            number: self.number,
            offset: self.start.unwrap_or(0),
            unterminated: self.cut,
        })
    }

    fn too_large(&self, offset: u64) -> StreamError {
        let at = At {
            event: self.number + 1,
            offset: self.start.unwrap_or(offset),
        };
        at.too_large(self.max_event, "event")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every event of `text` pushed in chunks of `step` bytes: (name, data, offset).
    fn events(text: &[u8], step: usize) -> Vec<(String, String, u64)> {
        let mut framer = SseFramer::new(1 << 20);
        let mut input = Buffer::default();
        let mut out = Vec::new();
        let mut chunks = text.chunks(step.max(1)).peekable();
        loop {
            let eof = chunks.peek().is_none();
            while let Some(e) = framer.next(&mut input, eof).expect("valid") {
                out.push((e.name.to_owned(), e.data.to_owned(), e.offset));
            }
            match chunks.next() {
                Some(c) => input.push(c),
                None => break,
            }
        }
        out
    }

    #[test]
    fn line_ends_comments_multiline_data_and_a_missing_blank_line() {
        let text = b": keep-alive\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\ndata: x\rdata: y\r\rid: 7\ndata\n\nevent: b\ndata: last";
        let want = vec![
            ("a".to_owned(), "one\ntwo".to_owned(), 14),
            (String::new(), "x\ny".to_owned(), 47),
            (String::new(), String::new(), 64),
            ("b".to_owned(), "last".to_owned(), 76),
        ];
        for step in 1..=text.len() {
            assert_eq!(events(text, step), want, "chunks of {step}");
        }
    }

    #[test]
    fn an_event_without_data_is_dropped_and_its_name_forgotten() {
        assert_eq!(
            events(b"event: ping\n\ndata: d\n\n", 3),
            vec![(String::new(), "d".to_owned(), 13)]
        );
    }

    #[test]
    fn an_oversized_event_is_refused_without_buffering_on() {
        let mut framer = SseFramer::new(16);
        let mut input = Buffer::default();
        input.push(b"data: 0123456789\ndata: 0123456789\n");
        let err = framer.next(&mut input, false).err().expect("too large");
        assert!(matches!(
            err,
            StreamError::TooLarge {
                event: 1,
                offset: 0,
                cap: 16,
                ..
            }
        ));
        let mut framer = SseFramer::new(16);
        let mut input = Buffer::default();
        input.push(&[b'x'; 40]);
        assert!(
            framer.next(&mut input, false).is_err(),
            "a line without end"
        );
    }

    #[test]
    fn invalid_utf8_names_its_byte() {
        let mut framer = SseFramer::new(1 << 10);
        let mut input = Buffer::default();
        input.push(b"data: ok\n\ndata: \xff\n\n");
        assert!(framer.next(&mut input, false).expect("first").is_some());
        match framer.next(&mut input, false) {
            Err(StreamError::Framing {
                event: 2,
                offset: 16,
                ..
            }) => {}
            other => panic!("{:?}", other.map(|e| e.map(|e| e.data.to_owned()))),
        }
    }
}
