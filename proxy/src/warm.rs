//! The incremental decision: a request of a session judged on the session's reading
//! of its last request plus a reading of what is new, not read whole.
//!
//! A request whose history starts, element for element (bytes), with the session's,
//! and whose other members the reader reads (`system`, `tools`, ...) are the bytes
//! they were, reads as the session's messages followed by the messages of its new
//! elements: the library's reader makes each message of its element alone (and
//! decides from the element before it only whether a Responses item is bound to a
//! reasoning item). So only the new elements are read, in a document of their own
//! (with the element before them, for that binding), and the rules are checked on
//! the messages held plus the new ones: **O(new elements)** to read, **O(blocks)** to
//! check (no JSON), and one **O(len)** syntax scan and byte comparison, where a whole
//! reading is **O(len)** of JSON parsing. Only the decisions
//! that need no rewrite are made here (forward as it came; continue a compacted
//! session within the budget); anything else (a broken request, one over the budget,
//! one that does not continue the session) is decided as from scratch, by the same
//! code a session-less request goes through, so both paths give one decision
//! (`proxy/tests/it/incremental.rs` checks it request by request).

use cutpoint::format::{ByteEstimate, Message, ToolChange, check_rules};
use serde_json::value::RawValue;

use crate::body::{Members, history_key};
use crate::session::{Session, SessionKey, Side};
use crate::{Decision, Mode, Route};

/// A request body parsed as far as the session needs: an object whose keys are
/// distinct, and its history's elements as their bytes.
pub(crate) struct Request<'a> {
    pub(crate) members: Members<'a>,
    history: &'static str,
}

impl<'a> Request<'a> {
    /// `body` parsed, or `None` when it is not UTF-8, not a JSON object, has a key
    /// twice, or holds no array under the route's history key. **O(len)**: one pass
    /// of JSON syntax over the body (serde_json's raw values check the syntax as
    /// `decide` does), the history read as its elements in the same pass.
    pub(crate) fn parse(route: Route, body: &'a [u8]) -> Option<Request<'a>> {
        let text = std::str::from_utf8(body).ok()?;
        let history = history_key(route);
        let members = Members::split(text, history).ok()?;
        if !members.distinct() {
            return None;
        }
        members.elements(history)?;
        Some(Request { members, history })
    }

    /// The history's elements. **O(1)**.
    pub(crate) fn items(&self) -> &[&'a RawValue] {
        self.members.elements(self.history).unwrap_or_default()
    }

    /// The session's key when no header names one: the route and the
    /// conversation's start (its first history element, and `system` or
    /// `instructions`). **O(len of what is hashed)**.
    pub(crate) fn key(&self, route: Route) -> SessionKey {
        let system = self
            .members
            .get("system")
            .or_else(|| self.members.get("instructions"));
        SessionKey::of([
            route.name().as_bytes(),
            b"start".as_slice(),
            self.items()
                .first()
                .map_or(b"".as_slice(), |r| r.get().as_bytes()),
            system.map_or(b"".as_slice(), |r| r.get().as_bytes()),
        ])
    }
}

/// The key of the session a request's header names: the route and the name.
/// **O(len(name))**.
pub(crate) fn named_key(route: Route, name: &[u8]) -> SessionKey {
    SessionKey::of([route.name().as_bytes(), b"header".as_slice(), name])
}

/// The messages the reader makes of `new`, the elements after `before` (the element
/// before them, if any), and the tool changes they hold, by message index from 0 at
/// `new[0]`. `None` when the reader refuses one of them (a whole reading then names
/// it). **O(len(new))**, plus `before` for Responses.
fn read_new(
    route: Route,
    before: Option<&str>,
    new: &[&RawValue],
) -> Option<(Vec<Message>, Vec<ToolChange>)> {
    if new.is_empty() {
        return Some((Vec::new(), Vec::new()));
    }
    // Only Responses decides a message from the one before it (an item right after
    // a `reasoning` item is bound to it: the reader's `build::finish`).
    let before = before.filter(|_| route == Route::OpenAiResponses);
    let skip = usize::from(before.is_some());
    let mut doc = String::with_capacity(
        new.iter().map(|r| r.get().len() + 1).sum::<usize>()
            + before.map_or(0, |b| b.len() + 1)
            + 16,
    );
    doc.push_str("{\"");
    doc.push_str(history_key(route));
    doc.push_str("\":[");
    for (i, e) in before
        .into_iter()
        .chain(new.iter().map(|r| r.get()))
        .enumerate()
    {
        if i > 0 {
            doc.push(',');
        }
        doc.push_str(e);
    }
    doc.push_str("]}");
    let read = cutpoint::format::read(&doc, route.format(), &ByteEstimate).ok()?;
    if read.messages.len() != new.len() + skip {
        return None;
    }
    let tools = read
        .tools
        .into_iter()
        .filter(|c| c.message >= skip)
        .map(|mut c| {
            c.message -= skip;
            c
        })
        .collect();
    Some((read.messages.into_iter().skip(skip).collect(), tools))
}

/// Appends `new` and its reading to `side`. **O(new)**.
fn extend(side: &mut Side, new: &[&RawValue], messages: Vec<Message>, tools: &[ToolChange]) {
    let base = side.elements.len();
    for (e, m) in new.iter().zip(messages) {
        side.push(e.get(), m);
    }
    side.transcript
        .tools
        .extend(tools.iter().cloned().map(|mut c| {
            c.message += base;
            c
        }));
}

/// Why [`decide`] left a request to the path that reads it whole.
pub(crate) enum Declined {
    /// Not one this path decides (see the module doc); `prior` is as it was.
    Scratch,
    /// A continuation of a compacted session, over the budget: the client's request
    /// keeps the rules, and `prior`'s client side is extended by its new elements (the
    /// reading a whole read of the request would make, positions aside), so the path
    /// that compacts the continuation need not read and check the request again. The
    /// first `n` elements of that side are `prior`'s.
    OverBudget {
        /// `prior`'s client elements before this request's.
        n: usize,
    },
}

/// The decision on `request` (of `route`) as the next request of `prior`, made on
/// `prior`'s reading and a reading of the new elements only, with `prior` extended to
/// the session after it; [`Declined`] when it is not one this path decides: the
/// caller decides it from scratch.
/// **O(new elements)** to read, **O(blocks)** to check, **O(len)** to compare the
/// prefix and to write a continued body.
pub(crate) fn decide(
    mode: &Mode,
    route: Route,
    request: &Request<'_>,
    prior: &mut Session,
) -> Result<Decision, Declined> {
    if prior.route != route || !prior.head.matches(route, &request.members) {
        return Err(Declined::Scratch);
    }
    let items = request.items();
    let n = prior.client.elements.len();
    if items.len() < n
        || !items[..n]
            .iter()
            .zip(&prior.client.elements)
            .all(|(a, b)| a.get() == &**b)
    {
        return Err(Declined::Scratch);
    }
    let new = &items[n..];
    let before = prior.client.elements.last().map(|e| &**e);
    let (messages, tools) = read_new(route, before, new).ok_or(Declined::Scratch)?;
    // The forwarded history's new messages, when the element before them is not the
    // client's (Responses binding), are read after its own last element.
    let forwarded_reading = match &prior.forwarded {
        Some(f) if route == Route::OpenAiResponses && f.elements.last().map(|e| &**e) != before => {
            Some(read_new(route, f.elements.last().map(|e| &**e), new).ok_or(Declined::Scratch)?)
        }
        Some(_) => Some((messages.clone(), tools.clone())),
        None => None,
    };
    extend(&mut prior.client, new, messages, &tools);
    let answer = prior.answer.take();
    let undo = |prior: &mut Session| {
        prior.client.truncate(n);
        prior.answer = answer;
    };
    if !check_rules(&prior.client.transcript).is_empty() {
        undo(prior);
        return Err(Declined::Scratch);
    }
    let Mode::Compact(c) = mode else {
        // Forwarded as it came: what the provider saw is the client's history.
        prior.forwarded = None;
        return Ok(Decision::Forward);
    };
    let tokens_before = prior.client.transcript.live_tokens();
    let Some((f_messages, f_tools)) = forwarded_reading else {
        // Forwarded as the client sent it so far: within the budget it goes as it
        // came; over it, the pipeline reads it whole.
        if tokens_before > c.budget() {
            undo(prior);
            return Err(Declined::Scratch);
        }
        return Ok(Decision::Forward);
    };
    let Some(forwarded) = prior.forwarded.as_mut() else {
        // `forwarded_reading` is `Some` only with a forwarded history.
        undo(prior);
        return Err(Declined::Scratch);
    };
    let m = forwarded.elements.len();
    extend(forwarded, new, f_messages, &f_tools);
    let tokens_after = forwarded.transcript.live_tokens();
    let over = tokens_after > c.budget();
    if over || !check_rules(&forwarded.transcript).is_empty() {
        forwarded.truncate(m);
        if over {
            // The client's side stays extended: the compaction path takes it (and
            // makes a session of its own, so the followed answer is not needed).
            return Err(Declined::OverBudget { n });
        }
        undo(prior);
        return Err(Declined::Scratch);
    }
    let mut history = String::with_capacity(
        forwarded
            .elements
            .iter()
            .map(|e| e.len() + 1)
            .sum::<usize>()
            + 2,
    );
    history.push('[');
    for (i, e) in forwarded.elements.iter().enumerate() {
        if i > 0 {
            history.push(',');
        }
        history.push_str(e);
    }
    history.push(']');
    let body =
        crate::body::continued_body(route, &request.members, &history, &forwarded.transcript);
    Ok(Decision::Continued {
        body: body.into(),
        tokens_before,
        tokens_after,
        deferred: None,
    })
}
