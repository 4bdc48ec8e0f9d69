//! The bytes a framer has received and not consumed yet, and the frames it cuts from
//! them: shared by the SSE and the JSON framers.

/// The bytes received and not consumed yet, and the stream offset of the first one.
#[derive(Default, Debug)]
pub(crate) struct Buffer {
    bytes: Vec<u8>,
    pos: usize,
    base: u64,
}

impl Buffer {
    /// Appends `more`, first dropping what was consumed. **O(len(more) + unconsumed)**.
    pub(crate) fn push(&mut self, more: &[u8]) {
        if self.pos > 0 {
            self.bytes.drain(..self.pos);
            self.base += self.pos as u64;
            self.pos = 0;
        }
        self.bytes.extend_from_slice(more);
    }

    /// The unconsumed bytes. **O(1)**.
    pub(crate) fn rest(&self) -> &[u8] {
        &self.bytes[self.pos..]
    }

    /// Consumes `n` bytes (at most what is left). **O(1)**.
    pub(crate) fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.bytes.len());
    }

    /// Consumes `n` bytes and returns them. **O(1)**.
    pub(crate) fn take(&mut self, n: usize) -> &[u8] {
        let start = self.pos;
        self.consume(n);
        &self.bytes[start..self.pos]
    }

    /// Stream offset of the first unconsumed byte. **O(1)**.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes held (consumed ones included until the next push). **O(1)**.
    pub(crate) fn held(&self) -> usize {
        self.bytes.len()
    }
}

/// One frame: a provider event's JSON text (or `[DONE]`), with where it came from; an
/// SSE event is one (its fields borrow the framer until its next call).
pub(crate) struct Frame<'a> {
    /// The SSE `event:` name; empty for JSON framings and unnamed events.
    pub(crate) name: &'a str,
    /// The event's data.
    pub(crate) data: &'a str,
    /// 1-based number of the frame in the stream.
    pub(crate) number: u64,
    /// Byte offset where it starts.
    pub(crate) offset: u64,
    /// Whether the input ended inside it: an SSE event whose last line had no line
    /// end, dispatched at the end of input. Its data may be cut short.
    pub(crate) unterminated: bool,
}
