//! The one place decoded items are made: the record lifecycle every provider shares
//! (open, pieces counted as they come, close), usage replacing the estimate, and the
//! end of a response. The providers only say what happened.

use std::collections::VecDeque;

use super::{At, Caps, Content, Decoded, Detail, Ending, StreamError, Usage};
use crate::format::TokenCounter;
use crate::{CallId, Event, Record};

/// The open record: its content so far, its tokens, its bytes.
struct Open {
    content: Content,
    tokens: u64,
    bytes: usize,
}

/// The current response's records, for usage: how many, and their tokens.
#[derive(Default)]
struct Response {
    /// Responses started in this stream (the current one is `started - 1`).
    started: usize,
    records: usize,
    /// Tokens of its closed records, and of the last one closed.
    closed_tokens: u64,
    last_closed: u64,
}

/// Makes the decoded items and queues them for [`Decoder::next`](super::Decoder::next).
pub(crate) struct Emitter {
    queue: VecDeque<Decoded>,
    counter: Box<dyn TokenCounter + Send + Sync>,
    caps: Caps,
    open: Option<Open>,
    response: Response,
    /// A response started and has not ended.
    responding: bool,
}

/// Where a piece of a streamed record goes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Piece {
    /// Text, thinking text, a call's arguments, a server result's content: counted.
    Text,
    /// A signature (thinking, Gemini thought signatures): opaque, not counted.
    Signature,
}

impl Emitter {
    pub(crate) fn new(counter: Box<dyn TokenCounter + Send + Sync>, caps: Caps) -> Self {
        Emitter {
            queue: VecDeque::new(),
            counter,
            caps,
            open: None,
            response: Response::default(),
            responding: false,
        }
    }

    pub(crate) fn set_counter(&mut self, counter: Box<dyn TokenCounter + Send + Sync>) {
        self.counter = counter;
    }

    pub(crate) fn set_caps(&mut self, caps: Caps) {
        self.caps = caps;
    }

    pub(crate) fn caps(&self) -> Caps {
        self.caps
    }

    /// The next queued item. **O(1)**.
    pub(crate) fn pop(&mut self) -> Option<Decoded> {
        self.queue.pop_front()
    }

    /// Whether no item is queued. **O(1)**.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    fn emit(&mut self, event: Option<Event>, detail: Detail) {
        self.queue.push_back(Decoded { event, detail });
    }

    /// Tokens of `text` by the counter. **O(len)** at most.
    pub(crate) fn count(&self, text: &str) -> u64 {
        self.counter.count(text)
    }

    /// A new response starts. A record left open by the previous one is the caller's
    /// to close ([`Feed::abort_open`](super::Feed::abort_open)); the decoder forgets it.
    /// **O(1)**.
    pub(crate) fn start_response(&mut self) {
        self.responding = true;
        self.open = None;
        self.response = Response {
            started: self.response.started + 1,
            ..Response::default()
        };
    }

    /// Starts a response unless one is in progress; `true` when it started one (the
    /// provider then starts its own state afresh). **O(1)**.
    pub(crate) fn begin_response(&mut self) -> bool {
        let starts = !self.responding;
        if starts {
            self.start_response();
        }
        starts
    }

    /// Whether a response started and has not ended ([`end`](Emitter::end)).
    /// **O(1)**.
    pub(crate) fn responding(&self) -> bool {
        self.responding
    }

    /// Number of the current response in the stream, from 0. **O(1)**.
    pub(crate) fn response_index(&self) -> usize {
        self.response.started.saturating_sub(1)
    }

    /// Records of the current response so far. **O(1)**.
    pub(crate) fn records(&self) -> usize {
        self.response.records
    }

    /// The open record's content. **O(1)**.
    pub(crate) fn open_content(&self) -> Option<&Content> {
        self.open.as_ref().map(|o| &o.content)
    }

    /// The open record's content, to change what is not counted (a signature, a
    /// truncation flag). **O(1)**.
    pub(crate) fn open_content_mut(&mut self) -> Option<&mut Content> {
        self.open.as_mut().map(|o| &mut o.content)
    }

    /// Opens a record for `content` (a `tool_use` for a call, a `tool_result` for a
    /// server result, an assistant record otherwise) with `tokens` so far. **O(1)**
    /// plus copying the content.
    pub(crate) fn open(
        &mut self,
        at: At,
        content: Content,
        bound: bool,
        tokens: u64,
    ) -> Result<(), StreamError> {
        if self.open.is_some() {
            return Err(at.malformed("a block starts while another is still open"));
        }
        let record = match &content {
            Content::Call { id, .. } => Record::tool_use(id.clone(), tokens),
            Content::ServerResult { id, .. } => Record::tool_result(id.clone(), tokens),
            _ => Record::assistant(tokens),
        };
        let record = if bound {
            record.bound_to_previous()
        } else {
            record
        };
        let bytes = content_bytes(&content);
        self.check(at, bytes)?;
        self.emit(Some(Event::Opened(record)), Detail::Opened(content.clone()));
        self.open = Some(Open {
            content,
            tokens,
            bytes,
        });
        self.response.records += 1;
        Ok(())
    }

    fn check(&self, at: At, bytes: usize) -> Result<(), StreamError> {
        if bytes > self.caps.max_record_bytes {
            return Err(at.too_large(self.caps.max_record_bytes, "record"));
        }
        Ok(())
    }

    /// Whether the open record is a text (or, with `thinking`, a thinking) record that
    /// a run of text pieces continues. **O(1)**.
    pub(crate) fn continues_text(&self, thinking: bool) -> bool {
        match self.open_content() {
            Some(Content::Thinking { .. }) => thinking,
            Some(Content::Text { .. }) => !thinking,
            _ => false,
        }
    }

    /// Opens a text (or thinking) record, bound to the response's earlier records.
    /// **O(1)**.
    pub(crate) fn open_text(&mut self, at: At, thinking: bool) -> Result<(), StreamError> {
        let content = if thinking {
            Content::thinking(None, false)
        } else {
            Content::text()
        };
        self.open(at, content, self.records() > 0, 0)
    }

    /// Opens a record for `content` whose first piece of text (a text block's, a
    /// server result's content) came with its start. **O(len(initial))**.
    pub(crate) fn open_with(
        &mut self,
        at: At,
        content: Content,
        bound: bool,
        initial: Option<&str>,
    ) -> Result<(), StreamError> {
        self.open(at, content, bound, 0)?;
        match initial {
            Some(text) => self.piece(at, Piece::Text, text),
            None => Ok(()),
        }
    }

    /// Opens a call's `tool_use` record, its name counted, with the `arguments` that
    /// came with its start as its first piece; a server call, or a programmatic one
    /// ([`Content::Call`]), as its start says. **O(len(name) + len(arguments))**.
    #[expect(
        clippy::too_many_arguments,
        reason = "a call's start says all of these, in every provider's stream"
    )]
    pub(crate) fn open_call(
        &mut self,
        at: At,
        bound: bool,
        id: CallId,
        name: &str,
        (server, programmatic): (bool, bool),
        signature: Option<&str>,
        arguments: Option<&str>,
    ) -> Result<(), StreamError> {
        let content = Content::Call {
            id,
            name: name.to_owned(),
            arguments: String::new(),
            server,
            signature: signature.map(str::to_owned),
            truncated: false,
            programmatic,
        };
        self.open(at, content, bound, self.counter.count(name))?;
        match arguments {
            Some(text) => self.piece(at, Piece::Text, text),
            None => Ok(()),
        }
    }

    /// Adds a piece to the open record: text is counted and emitted as a delta.
    /// **O(len)**.
    pub(crate) fn piece(&mut self, at: At, piece: Piece, text: &str) -> Result<(), StreamError> {
        let Some(open) = self.open.as_ref() else {
            return Err(at.malformed("a delta arrives while no block is open"));
        };
        if text.is_empty() {
            return Ok(());
        }
        let bytes = open.bytes.saturating_add(text.len());
        self.check(at, bytes)?;
        let tokens = match piece {
            Piece::Text => self.counter.count(text),
            Piece::Signature => 0,
        };
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        open.bytes = bytes;
        match (piece, &mut open.content) {
            (Piece::Text, Content::Text { text: t })
            | (Piece::Text, Content::Thinking { text: t, .. })
            | (Piece::Text, Content::Call { arguments: t, .. })
            | (Piece::Text, Content::ServerResult { content: t, .. }) => t.push_str(text),
            (Piece::Signature, Content::Thinking { signature, .. })
            | (Piece::Signature, Content::Call { signature, .. }) => {
                signature.get_or_insert_with(String::new).push_str(text);
            }
            _ => {}
        }
        if tokens > 0 {
            open.tokens = open.tokens.saturating_add(tokens);
            self.emit(Some(Event::Delta { tokens }), Detail::None);
        }
        Ok(())
    }

    /// Sets the open call's arguments to the provider's final text (Responses
    /// `function_call_arguments.done`, `output_item.done`). When no piece came before,
    /// the text is counted as one piece. **O(len)**.
    pub(crate) fn final_arguments(&mut self, at: At, full: &str) -> Result<(), StreamError> {
        let Some(Open {
            content: Content::Call { arguments, .. },
            ..
        }) = self.open.as_mut()
        else {
            return Ok(());
        };
        if arguments.is_empty() {
            return self.piece(at, Piece::Text, full);
        }
        if arguments == full {
            return Ok(());
        }
        self.replace_arguments(at, full)
    }

    /// Adds a piece of text to the open record whose `tokens` were counted already
    /// (OpenAI Chat calls that waited behind the open one). **O(len)**.
    pub(crate) fn counted_piece(
        &mut self,
        at: At,
        text: &str,
        tokens: u64,
    ) -> Result<(), StreamError> {
        self.replace_arguments_or_text(at, text, true)?;
        if let Some(open) = self.open.as_mut() {
            if tokens > 0 {
                open.tokens = open.tokens.saturating_add(tokens);
                self.emit(Some(Event::Delta { tokens }), Detail::None);
            }
        }
        Ok(())
    }

    /// Sets the open call's arguments to `full` without counting it (Gemini
    /// `partialArgs`, counted piece by piece, rendered as one object). **O(len)**.
    pub(crate) fn replace_arguments(&mut self, at: At, full: &str) -> Result<(), StreamError> {
        self.replace_arguments_or_text(at, full, false)
    }

    fn replace_arguments_or_text(
        &mut self,
        at: At,
        text: &str,
        append: bool,
    ) -> Result<(), StreamError> {
        let Some(open) = self.open.as_ref() else {
            return Err(at.malformed("a delta arrives while no block is open"));
        };
        let bytes = if append {
            open.bytes.saturating_add(text.len())
        } else {
            open.bytes
                .saturating_sub(match &open.content {
                    Content::Call { arguments, .. } => arguments.len(),
                    _ => 0,
                })
                .saturating_add(text.len())
        };
        self.check(at, bytes)?;
        let Some(open) = self.open.as_mut() else {
            return Ok(());
        };
        open.bytes = bytes;
        match &mut open.content {
            Content::Call { arguments: t, .. }
            | Content::Text { text: t }
            | Content::Thinking { text: t, .. } => {
                if !append {
                    t.clear();
                }
                t.push_str(text);
            }
            _ => {}
        }
        Ok(())
    }

    /// Closes the open record, if any, with its complete content. **O(content)**.
    pub(crate) fn close(&mut self) {
        if let Some(open) = self.open.take() {
            self.response.closed_tokens = self.response.closed_tokens.saturating_add(open.tokens);
            self.response.last_closed = open.tokens;
            self.emit(Some(Event::Closed), Detail::Closed(open.content));
        }
    }

    /// Record `index` of the current response (from 0) was dropped by the provider
    /// ([`Detail::Dropped`]): a call still waiting for its result (`call_id`), which
    /// the tracker stops waiting for ([`Event::CallWithdrawn`]), or thinking (`None`).
    /// **O(1)** plus copying the id.
    pub(crate) fn dropped(&mut self, index: usize, call_id: Option<CallId>) {
        let records_after = self.response.records.saturating_sub(index + 1);
        let event = call_id.clone().map(Event::CallWithdrawn);
        self.emit(
            event,
            Detail::Dropped {
                records_after,
                call_id,
            },
        );
    }

    /// The provider's usage: the response's last record takes the output tokens its
    /// earlier records did not count (at least 0). **O(1)**.
    pub(crate) fn usage(&mut self, usage: Usage) {
        let Some(output) = usage.output_tokens.filter(|_| self.response.records > 0) else {
            self.emit(None, Detail::Usage(usage));
            return;
        };
        let r = &mut self.response;
        let earlier = match &self.open {
            Some(_) => r.closed_tokens,
            None => r.closed_tokens - r.last_closed,
        };
        let last = output.saturating_sub(earlier);
        match self.open.as_mut() {
            Some(open) => open.tokens = last,
            None => {
                r.closed_tokens = earlier + last;
                r.last_closed = last;
            }
        }
        self.emit(
            Some(Event::UsageReported { tokens: last }),
            Detail::Usage(usage),
        );
    }

    /// The response ended. When the provider said so (`complete`), an open record that
    /// is not a call closes; a call stays open, flagged truncated when a
    /// `length_limited` stop cut it. [`Event::TurnEnded`] only when nothing is left
    /// open. **O(1)** plus copying what is left open.
    pub(crate) fn end(
        &mut self,
        stop_reason: Option<String>,
        complete: bool,
        length_limited: bool,
    ) {
        self.responding = false;
        if complete && !matches!(self.open_content(), Some(Content::Call { .. })) {
            self.close();
        }
        if length_limited {
            if let Some(Content::Call { truncated, .. }) = self.open_content_mut() {
                *truncated = true;
            }
        }
        let left_open = self.open_content().cloned();
        let event = (complete && left_open.is_none()).then_some(Event::TurnEnded);
        self.emit(
            event,
            Detail::Ended(Ending {
                stop_reason,
                complete,
                left_open,
            }),
        );
    }
}

/// Bytes a content holds. **O(1)**.
fn content_bytes(content: &Content) -> usize {
    match content {
        Content::Text { text } => text.len(),
        Content::Thinking {
            text, signature, ..
        } => text.len() + signature.as_ref().map_or(0, String::len),
        Content::Call {
            name,
            arguments,
            signature,
            ..
        } => name.len() + arguments.len() + signature.as_ref().map_or(0, String::len),
        Content::ServerResult { kind, content, .. } => kind.len() + content.len(),
        Content::Other { kind, loads } => kind.len() + loads.iter().map(String::len).sum::<usize>(),
    }
}
