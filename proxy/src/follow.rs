//! Following a streamed answer: a copy of each chunk the upstream sends goes through
//! the library's live stream decoder of the route, while the chunk itself goes on to
//! the agent unchanged. The decoder sees what the provider answered (its records, the
//! calls it asks the agent to run) and names a stream that does not decode (the event
//! and byte); the agent gets the provider's bytes either way, as the direct path
//! would give them: the proxy reports a broken answer, it does not alter one.
//!
//! The decoded records go into a library [`Tracker`] as they arrive; at the end of
//! an answer to a request of a session, the calls still pending in it (what the
//! provider asked the agent to run) feed the session ([`Sessions::feed`]), so that
//! the session's next request can be held against what the provider said.
//!
//! One rule is the answer's own: a Responses request whose last input item is a
//! `compaction_trigger` is answered by exactly one `compaction` output item. An answer
//! that holds none or several is counted (`_answer_compactions_broken_total`) and
//! logged, and passed on as it came.

use std::sync::{Arc, Mutex};

use cutpoint::Tracker;
use cutpoint::stream::decode::{Content, Decoder, Detail, Feed, StreamFormat};

use crate::Route;
use crate::metrics::{Count, Metrics};
use crate::session::{Followed, SessionKey, Sessions};

/// The decoder of one answer, and what it has seen.
pub(crate) struct Follow {
    route: Route,
    /// `None` once the stream failed to decode (the rest passes through unread).
    decoder: Option<Decoder>,
    metrics: Arc<Metrics>,
    /// Calls the answer asked the agent to run.
    calls: u64,
    /// The answer's records; `None` once it refused one (the answer still decodes
    /// and is counted, but feeds no session).
    tracker: Option<Tracker>,
    /// The session the answer feeds, if its request had one.
    session: Option<(Arc<Mutex<Sessions>>, SessionKey)>,
    /// The request ended in a `compaction_trigger`: the answer must hold exactly one
    /// `compaction` output item.
    asks_compaction: bool,
    /// The `compaction` output items the answer opened.
    compactions: u64,
}

impl Follow {
    /// A decoder for an answer of `route` to a request that ended in a Responses
    /// `compaction_trigger` when `asks_compaction` ([`asks_compaction`]). **O(1)**.
    pub(crate) fn new(
        route: Route,
        metrics: Arc<Metrics>,
        session: Option<(Arc<Mutex<Sessions>>, SessionKey)>,
        asks_compaction: bool,
    ) -> Self {
        let format = match route {
            Route::AnthropicMessages => StreamFormat::AnthropicSse,
            Route::OpenAiChat => StreamFormat::OpenAiChatStream,
            Route::OpenAiResponses => StreamFormat::OpenAiResponsesStream,
        };
        Follow {
            route,
            decoder: Some(Decoder::new(format)),
            metrics,
            calls: 0,
            tracker: Some(Tracker::new()),
            session,
            asks_compaction,
            compactions: 0,
        }
    }

    /// A copy of the next chunk. **O(len)** (the decoder's work on it).
    pub(crate) fn push(&mut self, bytes: &[u8]) {
        if let Some(d) = &mut self.decoder {
            d.push(bytes);
            self.drain();
        }
    }

    /// Takes every item the decoder has; on an error, counts and logs it and stops
    /// decoding.
    fn drain(&mut self) {
        let Some(d) = &mut self.decoder else {
            return;
        };
        loop {
            match d.next() {
                Ok(Some(item)) => {
                    match &item.detail {
                        Detail::Opened(Content::Call { server: false, .. }) => self.calls += 1,
                        Detail::Opened(Content::Other { kind, .. }) if kind == "compaction" => {
                            self.compactions += 1;
                        }
                        _ => {}
                    }
                    if let Some(t) = &mut self.tracker {
                        if t.feed(&item).is_err() {
                            self.tracker = None;
                        }
                    }
                }
                Ok(None) => return,
                Err(e) => {
                    self.metrics.count(Count::AnswerStreamError);
                    tracing::warn!(
                        route = self.route.name(),
                        error = %e,
                        "the answer stream does not decode; passed through as it came"
                    );
                    self.decoder = None;
                    return;
                }
            }
        }
    }
}

impl Drop for Follow {
    /// The end of the answer (or of the agent's interest in it): the decoder
    /// finishes, and the answer is counted.
    fn drop(&mut self) {
        if let Some(d) = &mut self.decoder {
            d.finish();
            self.drain();
        }
        if self.decoder.is_none() {
            return;
        }
        self.metrics.count(Count::AnswerFollowed(self.calls));
        if self.asks_compaction && self.compactions != 1 {
            self.metrics.count(Count::AnswerCompactionBroken);
            tracing::warn!(
                route = self.route.name(),
                rule = "openai-responses/compaction-output-count",
                compactions = self.compactions,
                "a compaction_trigger was answered by {} compaction items, not exactly one; passed through as it came",
                self.compactions
            );
        }
        if let (Some(tracker), Some((sessions, key))) = (&self.tracker, &self.session) {
            let calls = tracker
                .pending_calls()
                .into_iter()
                .map(|p| p.id.clone())
                .collect();
            let mut table = sessions.lock().unwrap_or_else(|p| p.into_inner());
            table.feed(*key, Followed { calls });
        }
    }
}

/// Whether `body`, a Responses request, ends its `input` with a
/// `compaction_trigger` item. **O(len)**, and O(1) past a substring search for a body
/// that never names one (or is not UTF-8).
pub(crate) fn asks_compaction(route: Route, body: &[u8]) -> bool {
    use serde_json::value::RawValue;
    #[derive(serde::Deserialize)]
    struct Body<'a> {
        #[serde(borrow, default)]
        input: Option<Vec<&'a RawValue>>,
    }
    #[derive(serde::Deserialize)]
    struct Item {
        #[serde(rename = "type", default)]
        kind: Option<String>,
    }
    if route != Route::OpenAiResponses {
        return false;
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return false;
    };
    if !text.contains("compaction_trigger") {
        return false;
    }
    serde_json::from_str::<Body<'_>>(text)
        .ok()
        .and_then(|b| b.input?.last().copied())
        .and_then(|last| serde_json::from_str::<Item>(last.get()).ok())
        .is_some_and(|item| item.kind.as_deref() == Some("compaction_trigger"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random bytes, and a real stream cut anywhere with a byte changed: never a
    /// panic; a decoded answer or a counted error, one of the two, per answer.
    #[test]
    fn hostile_stream_bytes_are_counted_not_a_panic() {
        let real = include_bytes!(
            "../tests/fixtures/anthropic-sse__anthropics-anthropic-sdk-python__tool_use_response.txt"
        );
        let metrics = Arc::new(Metrics::default());
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n.max(1)
        };
        let runs = 300;
        for run in 0..runs {
            let route = [
                Route::AnthropicMessages,
                Route::OpenAiChat,
                Route::OpenAiResponses,
            ][run % 3];
            let mut bytes = real.to_vec();
            match run % 3 {
                0 => bytes = (0..next(400)).map(|_| next(256) as u8).collect(),
                1 => {
                    let at = next(bytes.len() as u64) as usize;
                    bytes[at] = next(256) as u8;
                }
                _ => bytes.truncate(next(bytes.len() as u64) as usize),
            }
            let mut f = Follow::new(route, Arc::clone(&metrics), None, false);
            let mut at = 0;
            while at < bytes.len() {
                let to = (at + 1 + next(64) as usize).min(bytes.len());
                f.push(&bytes[at..to]);
                at = to;
            }
        }
        assert_eq!(
            metrics.answers_followed() + metrics.answer_stream_errors(),
            runs as u64
        );
        assert!(metrics.answer_stream_errors() > 0);
        // The real stream whole: one answer, its one call.
        let m = Arc::new(Metrics::default());
        drop({
            let mut f = Follow::new(Route::AnthropicMessages, Arc::clone(&m), None, false);
            f.push(real);
            f
        });
        assert_eq!(
            (
                m.answers_followed(),
                m.answer_calls(),
                m.answer_stream_errors()
            ),
            (1, 1, 0)
        );
    }
    /// A Responses stream whose output is `items` (their JSON), each added and done.
    fn responses_stream(items: &[&str]) -> Vec<u8> {
        let mut out = String::new();
        let mut event = |data: String| {
            let kind = serde_json::from_str::<serde_json::Value>(&data).expect("JSON")["type"]
                .as_str()
                .expect("a type")
                .to_owned();
            out.push_str(&format!("event: {kind}\ndata: {data}\n\n"));
        };
        event(r#"{"type":"response.created","response":{"id":"resp_1","output":[]}}"#.to_owned());
        for (i, item) in items.iter().enumerate() {
            event(format!(
                r#"{{"type":"response.output_item.added","output_index":{i},"item":{item}}}"#
            ));
            event(format!(
                r#"{{"type":"response.output_item.done","output_index":{i},"item":{item}}}"#
            ));
        }
        event(
            r#"{"type":"response.completed","response":{"id":"resp_1","status":"completed"}}"#
                .to_owned(),
        );
        out.into_bytes()
    }

    /// Issue 21: an answer to a `compaction_trigger` holds exactly one `compaction`
    /// item; none or two are counted (and passed on), one is not, and an answer to
    /// any other request is never held to it.
    #[test]
    fn a_compaction_trigger_is_answered_by_exactly_one_compaction() {
        let compaction = r#"{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAAB"}"#;
        let text = r#"{"type":"message","id":"msg_1","role":"assistant","content":[]}"#;
        for (items, asks, broken) in [
            (vec![compaction], true, 0),
            (vec![], true, 1),
            (vec![text], true, 1),
            (vec![compaction, compaction], true, 1),
            (vec![], false, 0),
            (vec![compaction, compaction], false, 0),
        ] {
            let m = Arc::new(Metrics::default());
            drop({
                let mut f = Follow::new(Route::OpenAiResponses, Arc::clone(&m), None, asks);
                f.push(&responses_stream(&items));
                f
            });
            assert_eq!(m.answer_stream_errors(), 0, "{items:?}");
            assert_eq!(m.answers_followed(), 1, "{items:?}");
            assert_eq!(
                m.answer_compactions_broken(),
                broken,
                "{items:?} asks {asks}"
            );
        }
    }

    #[test]
    fn a_request_asks_for_a_compaction_when_its_last_input_item_is_the_trigger() {
        let asks = |body: &str| asks_compaction(Route::OpenAiResponses, body.as_bytes());
        assert!(asks(
            r#"{"model":"m","input":[{"role":"user","content":"hi"},{"type":"compaction_trigger"}]}"#
        ));
        assert!(!asks(
            r#"{"input":[{"type":"compaction_trigger"},{"role":"user","content":"hi"}]}"#
        ));
        assert!(!asks(
            r#"{"input":[{"role":"user","content":"compaction_trigger"}]}"#
        ));
        assert!(!asks(r#"{"input":"compaction_trigger"}"#));
        assert!(!asks(r#"{"input":[{"type":"compaction_trigger"}"#));
        assert!(!asks_compaction(
            Route::AnthropicMessages,
            br#"{"input":[{"type":"compaction_trigger"}]}"#
        ));
        assert!(!asks_compaction(Route::OpenAiResponses, b"\xff\xfe"));
    }
}
