//! Sessions: what the proxy read of a conversation's last request, and what it
//! forwarded for it, so that the conversation's next request is read and checked
//! only where it is new, and, once compacted, continues what the provider saw.
//!
//! An agent sends its whole history on every turn: the last request's history, the
//! provider's answer, and what is new (tool results, a question). So the proxy keeps,
//! per session, the last request's history elements (their bytes) and the library's
//! reading of them (the transcript's messages, [`Transcript`]); a request whose
//! history starts, element for element, with those bytes is read only from where
//! it is new, and judged on the messages read before plus the new ones
//! ([`Mode::decide_in`](crate::Mode::decide_in)): the same decision as reading it
//! whole, at the cost of its new elements.
//!
//! Once the proxy compacts a request, the provider has seen the compacted history,
//! and what it answers next is bound to it: preserved thinking signs a thinking block
//! over its whole prefix, and a Responses reasoning item follows it. The client, which
//! never saw the compaction, sends its own full history again, with that answer after
//! it. So a session also keeps the history forwarded instead (its elements and their
//! reading); the next request is forwarded as that history followed by what is new:
//! an append-only extension of what the provider saw. Over the budget again, the
//! pipeline runs on that extension (compacting its own output, the earlier summary
//! carried forward), not on the client's history.
//!
//! The table is sans-IO and bounded: at most `max_sessions` sessions, each at most
//! `max_session_bytes` (an estimate of what it holds, [`Session::bytes`]; a larger
//! one is not remembered), the least recently used evicted first. A request takes
//! its session out of the table ([`Sessions::take`]) and puts the next one back
//! ([`Sessions::remember`]): a second request of the same session while the first is
//! being decided finds none, and is decided as a conversation's first.

use std::collections::{BTreeMap, HashMap};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::mem::size_of;

use cutpoint::CallId;
use cutpoint::format::{Block, Message, Transcript};
use serde_json::value::RawValue;

use crate::Route;
use crate::body::{Members, history_key};

/// The members of a request body the library's reader reads besides its history
/// (`json_doc`'s holder: the other history keys, `previous_response_id`, the
/// prefix's `system`, `instructions` and `tools`, `output_config`'s task budget, and
/// the `container` a code-execution script waits in). A session's reading holds for
/// a later request only when these are the bytes they were.
const HEAD: [&str; 10] = [
    "messages",
    "input",
    "contents",
    "history",
    "previous_response_id",
    "system",
    "instructions",
    "tools",
    "output_config",
    "container",
];

/// The head members of a request, as their bytes (`None`: absent), in [`HEAD`]'s
/// order, the route's history key left out.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct Head(Vec<Option<Box<str>>>);

impl Head {
    /// The head of `members`, a body of `route`. **O(members)**.
    pub(crate) fn of(route: Route, members: &Members<'_>) -> Head {
        let key = history_key(route);
        Head(
            HEAD.iter()
                .filter(|&&k| k != key)
                .map(|&k| members.get(k).map(|r| Box::from(r.get())))
                .collect(),
        )
    }

    /// Whether `members` hold the same head bytes. **O(head bytes)**.
    pub(crate) fn matches(&self, route: Route, members: &Members<'_>) -> bool {
        let key = history_key(route);
        HEAD.iter()
            .filter(|&&k| k != key)
            .zip(&self.0)
            .all(|(&k, held)| members.get(k).map(RawValue::get) == held.as_deref())
    }

    fn bytes(&self) -> usize {
        self.0
            .iter()
            .map(|h| size_of::<Option<Box<str>>>() + h.as_ref().map_or(0, |h| h.len()))
            .sum()
    }
}

/// One history of a session, as the proxy read it: its elements' bytes and the
/// library's reading of them, one message per element.
///
/// The messages are what the reader makes of each element, and what it decides of a
/// message from the one before it (a Responses item bound to the reasoning item
/// before it); their positions (lines, byte spans) are those of the request that
/// brought each one, not of any one text. So a side is for judging and counting
/// (rules, tokens), never for rewriting: a rewrite reads the request whole.
#[derive(Clone, Debug)]
pub(crate) struct Side {
    pub(crate) elements: Vec<Box<str>>,
    pub(crate) transcript: Transcript,
    /// [`Side::bytes`], kept as elements come and go.
    bytes: usize,
}

/// An estimate of the memory `message`, read from `element`, holds: its structure,
/// and at most the element's bytes for the strings copied out of it (ids, names,
/// arguments, first lines, summary prose). **O(1)**.
fn message_bytes(element: &str, message: &Message) -> usize {
    size_of::<Message>()
        + message.blocks.len() * (size_of::<(Block, u64)>() + 2 * size_of::<u64>())
        + message.spans.len() * 2 * size_of::<usize>()
        + (message.signed.len() + message.notes.len()) * 2 * size_of::<usize>()
        + 2 * element.len()
        + size_of::<Box<str>>()
}

impl Side {
    /// The side of `elements` read as `transcript` (one message per element: a JSON
    /// document's reading). `None` when the counts differ. **O(elements)**.
    pub(crate) fn new(elements: Vec<Box<str>>, transcript: Transcript) -> Option<Side> {
        if elements.len() != transcript.messages.len() {
            return None;
        }
        let bytes = elements
            .iter()
            .zip(&transcript.messages)
            .map(|(e, m)| message_bytes(e, m))
            .sum();
        Some(Side {
            elements,
            transcript,
            bytes,
        })
    }

    /// Appends one element and its message. **O(1)** amortized.
    pub(crate) fn push(&mut self, element: &str, message: Message) {
        self.bytes += message_bytes(element, &message);
        self.elements.push(Box::from(element));
        self.transcript.messages.push(message);
    }

    /// Drops every element from `n` on, and the tool changes of their messages: what
    /// [`push`](Side::push) added undone. **O(dropped + tool changes)**.
    pub(crate) fn truncate(&mut self, n: usize) {
        for (e, m) in self.elements[n..]
            .iter()
            .zip(&self.transcript.messages[n..])
        {
            self.bytes -= message_bytes(e, m);
        }
        self.elements.truncate(n);
        self.transcript.messages.truncate(n);
        self.transcript.tools.retain(|c| c.message < n);
    }

    /// The estimate of what it holds. **O(1)**.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// What the provider answered a session's last request, as the proxy followed its
/// stream: the calls it asked the agent to run (pending in the answer's
/// [`Tracker`](cutpoint::Tracker) at its end), in the order they opened.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Followed {
    pub(crate) calls: Vec<CallId>,
}

impl Followed {
    /// The calls the answer asked the agent to run. **O(1)**.
    pub fn calls(&self) -> &[CallId] {
        &self.calls
    }

    fn bytes(&self) -> usize {
        self.calls
            .iter()
            .map(|c| size_of::<CallId>() + c.len())
            .sum()
    }
}

/// What a session remembers of its last request: the members the reader read besides
/// the history, the client's history (bytes and reading), and, when the proxy
/// forwarded another history for it (compacted, or continued from an earlier
/// compaction), that history; and what the provider answered it, once the proxy
/// followed the answer to its end ([`Sessions::feed`]).
///
/// Made by [`Mode::decide_in`](crate::Mode::decide_in) for a request it forwarded
/// (as it came, compacted or continued), or by [`Session::read`].
#[derive(Clone, Debug)]
pub struct Session {
    pub(crate) route: Route,
    pub(crate) head: Head,
    pub(crate) client: Side,
    pub(crate) forwarded: Option<Side>,
    pub(crate) answer: Option<Followed>,
}

impl Session {
    /// The session of a request of `route` whose body was `client` and that was
    /// forwarded as `forwarded` (`None`: as it came): both read whole, with the
    /// library's reader of the route's format. `None` when a body is not an object
    /// whose history the reader reads. **O(len)**.
    pub fn read(route: Route, client: &[u8], forwarded: Option<&[u8]>) -> Option<Session> {
        let text = std::str::from_utf8(client).ok()?;
        let members: Members<'_> = serde_json::from_str(text).ok()?;
        let side = |text: &str| {
            let members: Members<'_> = serde_json::from_str(text).ok()?;
            let items: Vec<&RawValue> =
                serde_json::from_str(members.get(history_key(route))?.get()).ok()?;
            let transcript =
                cutpoint::format::read(text, route.format(), &cutpoint::format::ByteEstimate)
                    .ok()?;
            Side::new(
                items.iter().map(|r| Box::from(r.get())).collect(),
                transcript,
            )
        };
        let forwarded = match forwarded {
            Some(body) => Some(side(std::str::from_utf8(body).ok()?)?),
            None => None,
        };
        Some(Session {
            route,
            head: Head::of(route, &members),
            client: side(text)?,
            forwarded,
            answer: None,
        })
    }

    /// The route it was read for. **O(1)**.
    pub fn route(&self) -> Route {
        self.route
    }

    /// The client's history elements, as their bytes. **O(1)**.
    pub fn client(&self) -> &[Box<str>] {
        &self.client.elements
    }

    /// The history elements forwarded instead, when not the client's. **O(1)**.
    pub fn forwarded(&self) -> Option<&[Box<str>]> {
        self.forwarded.as_ref().map(|s| &s.elements[..])
    }

    /// What the provider answered its last request, once followed to its end.
    /// **O(1)**.
    pub fn answer(&self) -> Option<&Followed> {
        self.answer.as_ref()
    }

    /// How many of `answer`'s calls the messages from `from` on hold, and how many
    /// they do not: whether the client carried back what the provider asked for.
    /// **O(new blocks + calls)**.
    pub(crate) fn carried(&self, from: usize, answer: &Followed) -> (u64, u64) {
        let held: std::collections::HashSet<&CallId> = self
            .client
            .transcript
            .messages
            .get(from..)
            .unwrap_or_default()
            .iter()
            .flat_map(|m| m.calls().map(|(_, id, _)| id))
            .collect();
        let carried = answer.calls.iter().filter(|c| held.contains(c)).count() as u64;
        (carried, answer.calls.len() as u64 - carried)
    }

    /// The library's reading of the client's history and of the forwarded one: one
    /// message per element, their positions those of the request each came in
    /// ([`Side`]). For tests that compare it with a whole reading. **O(1)**.
    #[doc(hidden)]
    pub fn messages(&self) -> (&[Message], Option<&[Message]>) {
        (
            &self.client.transcript.messages,
            self.forwarded.as_ref().map(|s| &s.transcript.messages[..]),
        )
    }

    /// An estimate of the memory it holds, in bytes: the elements' bytes twice (the
    /// bytes, and at most as much copied into the reading), and the reading's
    /// structure. **O(1)**.
    pub fn bytes(&self) -> usize {
        self.head.bytes()
            + self.client.bytes()
            + self.forwarded.as_ref().map_or(0, Side::bytes)
            + self.answer.as_ref().map_or(0, Followed::bytes)
    }

    /// Checks what the rest of the crate relies on: one message per element on
    /// each side, and the byte estimate what the elements and messages add up to.
    /// Panics otherwise. **O(elements)**.
    #[doc(hidden)]
    pub fn assert_invariants(&self) {
        for side in std::iter::once(&self.client).chain(&self.forwarded) {
            assert_eq!(side.elements.len(), side.transcript.messages.len());
            let bytes: usize = side
                .elements
                .iter()
                .zip(&side.transcript.messages)
                .map(|(e, m)| message_bytes(e, m))
                .sum();
            assert_eq!(side.bytes, bytes);
            assert!(
                side.transcript
                    .tools
                    .iter()
                    .all(|c| c.message < side.elements.len())
            );
        }
    }
}

/// A session's key: the `x-cutpoint-session` header the client sent, or a hash of the
/// route and the conversation's start (its first history element and the body's
/// `system` / `instructions` member), so that a client sending no header still finds
/// its session. Two conversations with the same start share a key; the history check
/// tells them apart (a request that does not continue the remembered history is
/// decided from scratch), at the cost of the reuse.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, PartialOrd, Ord)]
pub struct SessionKey(u64);

impl SessionKey {
    /// The key for `parts`, hashed in order. **O(len)**.
    pub fn of<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> Self {
        let mut h = DefaultHasher::new();
        for p in parts {
            p.len().hash(&mut h);
            p.hash(&mut h);
        }
        SessionKey(h.finish())
    }
}

/// The bounded table of sessions, least recently used evicted first.
#[derive(Debug)]
pub struct Sessions {
    max_sessions: usize,
    max_session_bytes: usize,
    max_total_bytes: usize,
    tick: u64,
    slots: HashMap<SessionKey, (u64, Session)>,
    /// Use order: tick of last use -> key.
    order: BTreeMap<u64, SessionKey>,
    bytes: usize,
    evicted: u64,
}

/// Why [`Sessions::remember`] did not keep a session.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kept {
    /// Remembered.
    Yes,
    /// Over `max_session_bytes` (or the whole table's cap): forgotten instead.
    TooLarge,
    /// Sessions are off (`max_sessions` is 0).
    Off,
}

impl Sessions {
    /// An empty table holding at most `max_sessions` sessions, each at most
    /// `max_session_bytes` and all together at most `max_total_bytes` by their
    /// estimate. **O(1)**.
    pub fn new(max_sessions: usize, max_session_bytes: usize, max_total_bytes: usize) -> Self {
        Sessions {
            max_sessions,
            max_session_bytes,
            max_total_bytes,
            tick: 0,
            slots: HashMap::new(),
            order: BTreeMap::new(),
            bytes: 0,
            evicted: 0,
        }
    }

    /// Takes `key`'s session out of the table: the request deciding with it puts the
    /// next one back ([`remember`](Sessions::remember)). **O(log sessions)**.
    pub fn take(&mut self, key: SessionKey) -> Option<Session> {
        let (used, session) = self.slots.remove(&key)?;
        self.order.remove(&used);
        self.bytes -= session.bytes();
        Some(session)
    }

    /// Remembers `session` for `key`, replacing what it held, as the most recently
    /// used, evicting the least recently used sessions while at `max_sessions` or
    /// while the table's bytes and the session's would pass `max_total_bytes`.
    /// Returns whether it was kept, and the sessions it replaced and evicted, for the
    /// caller to drop (outside a lock: a session is many allocations).
    /// **O(log sessions)** per session evicted.
    pub fn remember(&mut self, key: SessionKey, session: Session) -> (Kept, Vec<Session>) {
        let mut gone: Vec<Session> = self.take(key).into_iter().collect();
        if self.max_sessions == 0 {
            gone.push(session);
            return (Kept::Off, gone);
        }
        let size = session.bytes();
        if size > self.max_session_bytes.min(self.max_total_bytes) {
            gone.push(session);
            return (Kept::TooLarge, gone);
        }
        while self.slots.len() >= self.max_sessions
            || self.bytes.saturating_add(size) > self.max_total_bytes
        {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            if let Some((_, s)) = self.slots.remove(&oldest) {
                self.bytes -= s.bytes();
                self.evicted += 1;
                gone.push(s);
            }
        }
        self.tick += 1;
        self.order.insert(self.tick, key);
        self.slots.insert(key, (self.tick, session));
        self.bytes += size;
        (Kept::Yes, gone)
    }

    /// Gives `key`'s session, when the table holds it, what the provider answered its
    /// last request (replacing an earlier answer); `false` when it holds none (taken
    /// by a request in flight, evicted, or never kept). Its use order is left as
    /// it was. **O(calls)**.
    pub fn feed(&mut self, key: SessionKey, answer: Followed) -> bool {
        let Some((_, session)) = self.slots.get_mut(&key) else {
            return false;
        };
        self.bytes -= session.bytes();
        session.answer = Some(answer);
        self.bytes += session.bytes();
        true
    }

    /// Forgets `key`'s session, if any, returning it for the caller to drop.
    /// **O(log sessions)**.
    pub fn forget(&mut self, key: SessionKey) -> Option<Session> {
        self.take(key)
    }

    /// Sessions held. **O(1)**.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// Whether none is held. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    /// The estimate of what the sessions held hold ([`Session::bytes`]), at most
    /// `max_total_bytes` (an answer fed to a held session may add its calls' ids).
    /// **O(1)**.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Sessions evicted so far. **O(1)**.
    pub fn evicted(&self) -> u64 {
        self.evicted
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session of one user message of `n` characters.
    fn s(n: usize) -> Session {
        let body = format!(
            r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#,
            "x".repeat(n)
        );
        Session::read(Route::AnthropicMessages, body.as_bytes(), None).unwrap()
    }

    /// Against a naive model (a Vec in use order): the same sessions held, the same
    /// evicted, the byte count exact, never over the caps.
    #[test]
    fn the_table_is_a_bounded_lru_as_a_naive_list_is() {
        // xorshift64: a fixed sequence.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let cap_bytes = s(30).bytes();
        for (cap, total) in [
            (0usize, usize::MAX),
            (1, usize::MAX),
            (2, usize::MAX),
            (5, usize::MAX),
            (5, 2 * cap_bytes),
        ] {
            let mut t = Sessions::new(cap, cap_bytes, total);
            let mut naive: Vec<(SessionKey, usize)> = Vec::new();
            for _ in 0..2000 {
                let key = SessionKey(next(8));
                if next(2) == 0 {
                    // A request: takes its session, and puts it back.
                    let got = t.take(key);
                    let at = naive.iter().position(|(k, _)| *k == key);
                    assert_eq!(got.as_ref().map(Session::bytes), at.map(|i| naive[i].1));
                    if let Some(i) = at {
                        naive.remove(i);
                    }
                    if let Some(session) = got {
                        session.assert_invariants();
                        let size = session.bytes();
                        assert_eq!(t.remember(key, session).0, Kept::Yes);
                        naive.push((key, size));
                    }
                } else {
                    let session = s(next(60) as usize);
                    let size = session.bytes();
                    let (kept, _) = t.remember(key, session);
                    naive.retain(|(k, _)| *k != key);
                    match kept {
                        Kept::Yes => {
                            while naive.len() >= cap
                                || naive.iter().map(|(_, b)| b).sum::<usize>() + size > total
                            {
                                naive.remove(0);
                            }
                            naive.push((key, size));
                        }
                        Kept::TooLarge => assert!(size > cap_bytes.min(total)),
                        Kept::Off => assert_eq!(cap, 0),
                    }
                }
                assert_eq!(t.len(), naive.len());
                assert!(t.len() <= cap);
                assert_eq!(t.bytes(), naive.iter().map(|(_, b)| b).sum::<usize>());
                assert!(t.bytes() <= (cap * cap_bytes).min(total));
            }
        }
    }

    /// An answer feeds the session the table holds, and counts in its bytes; none
    /// is fed to a session taken out or never kept.
    #[test]
    fn an_answer_feeds_a_held_session_only() {
        let mut t = Sessions::new(4, 1 << 20, usize::MAX);
        let (key, other) = (SessionKey(1), SessionKey(2));
        t.remember(key, s(10));
        let before = t.bytes();
        let answer = Followed {
            calls: vec![CallId::from("toolu_1")],
        };
        assert!(t.feed(key, answer.clone()));
        assert!(!t.feed(other, answer.clone()));
        assert!(t.bytes() > before);
        let taken = t.take(key).unwrap();
        assert_eq!(taken.answer(), Some(&answer));
        assert_eq!(t.bytes(), 0);
        assert!(!t.feed(key, answer));
    }

    /// Pushing and truncating keep the estimate and the counts; a truncation undoes
    /// the pushes exactly.
    #[test]
    fn a_side_truncated_is_the_side_it_was() {
        let mut session = s(10);
        let before = (session.bytes(), session.client.elements.clone());
        let more = s(20);
        let message = more.client.transcript.messages[0].clone();
        session.client.push(&more.client.elements[0], message);
        session.assert_invariants();
        assert!(session.bytes() > before.0);
        session.client.truncate(1);
        session.assert_invariants();
        assert_eq!((session.bytes(), session.client.elements.clone()), before);
    }
}
