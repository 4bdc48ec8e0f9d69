//! A session's next request decided reading it whole: the reference the incremental
//! path (`warm.rs`) is tested against, and what decides every request that path
//! does not (a conversation's first, one that breaks a rule, one over the budget,
//! one that does not continue its session).

use bytes::Bytes;
use cutpoint::format::{ByteEstimate, Loaded};

use crate::decide::{DeferCause, Deferral, compact, history_of, transcript};
use crate::session::{Head, Session, Side};
use crate::warm::Request;
use crate::{Decision, Mode, Route};

impl Mode {
    /// [`decide_in`](Mode::decide_in) reading every request whole: the reference the
    /// incremental path is tested against, and what decides a request it does not.
    ///
    /// - In compact mode, a request whose history starts, element for element, with
    ///   `prior`'s client history when `prior` forwarded another history, and that
    ///   keeps the rules, is forwarded as `prior`'s forwarded history followed by the
    ///   request's new elements ([`Decision::Continued`]): what the provider saw,
    ///   extended, so the thinking and reasoning it answered with stay bound to their
    ///   prefix; over the budget, the pipeline runs on that continuation (its own
    ///   earlier output, the summary carried forward), and its output is checked
    ///   against the continuation, what the provider saw;
    /// - any other request is decided as [`decide`](Mode::decide) decides it, and
    ///   remembered when forwarded.
    ///
    /// **O(len)** plus the pipeline when it runs.
    pub fn decide_in_from_scratch(
        &self,
        route: Route,
        body: &[u8],
        prior: Option<&Session>,
    ) -> (Decision, Option<Session>) {
        let request = Request::parse(route, body);
        self.scratch(route, body, request.as_ref(), prior)
    }

    /// [`decide_in_from_scratch`](Mode::decide_in_from_scratch) on a body parsed
    /// already (`None`: it did not parse as a session's request).
    pub(crate) fn scratch(
        &self,
        route: Route,
        body: &[u8],
        request: Option<&Request<'_>>,
        prior: Option<&Session>,
    ) -> (Decision, Option<Session>) {
        self.scratch_checked(route, body, request, prior, None)
    }

    /// [`scratch`](Mode::scratch), where `checked` is `Some(n)` when the incremental
    /// path has read and checked the client's request already
    /// ([`Declined::OverBudget`](crate::warm::Declined::OverBudget)): `prior`'s client
    /// side is the request's reading, its first `n` elements `prior`'s own; the
    /// request is not read whole again, only the continuation, to compact it.
    /// **O(len)** plus the pipeline.
    pub(crate) fn scratch_checked(
        &self,
        route: Route,
        body: &[u8],
        request: Option<&Request<'_>>,
        prior: Option<&Session>,
        checked: Option<usize>,
    ) -> (Decision, Option<Session>) {
        let fresh = || self.fresh(route, body, request);
        let Mode::Compact(c) = self else {
            return fresh();
        };
        let Some((prior, prior_forwarded)) = prior
            .filter(|p| p.route == route)
            .and_then(|p| Some((p, p.forwarded.as_ref()?)))
        else {
            return fresh();
        };
        let Some(request) = request else {
            return fresh();
        };
        // A request is parsed only when it is UTF-8.
        let Ok(text) = std::str::from_utf8(body) else {
            return fresh();
        };
        let (top, items) = (&request.members, request.items());
        let n = checked.unwrap_or(prior.client.elements.len());
        let continues = items.len() >= n
            && items[..n]
                .iter()
                .zip(&prior.client.elements)
                .all(|(a, b)| a.get() == &**b);
        if !continues {
            return fresh();
        }
        // The client's request keeps the rules on its own, as check mode judges it:
        // checked already on the incremental path, or read and checked here.
        let (tokens_before, client_side) = match checked {
            Some(_) => (
                prior.client.transcript.live_tokens(),
                Some(prior.client.clone()),
            ),
            None => {
                let Some(client) = kept_rules(route, text) else {
                    return fresh();
                };
                let tokens = client.live_tokens();
                let side = transcript(client)
                    .and_then(|t| Side::new(items.iter().map(|r| Box::from(r.get())).collect(), t));
                (tokens, side)
            }
        };
        let forwarded: Vec<&str> = prior_forwarded
            .elements
            .iter()
            .map(|e| &**e)
            .chain(items[n..].iter().map(|r| r.get()))
            .collect();
        let continued = crate::body::continued_body(
            route,
            top,
            &format!("[{}]", forwarded.join(",")),
            &prior_forwarded.transcript,
        );
        let Some(loaded) = kept_rules(route, &continued) else {
            return fresh();
        };

        let after = loaded.live_tokens();
        let outcome = match after <= c.budget() {
            true => None,
            false => Some(compact(c, route, &continued, &loaded)),
        };
        let head = Head::of(route, top);
        let session = |forwarded: Option<Side>| {
            Some(Session {
                route,
                head: head.clone(),
                client: client_side.clone()?,
                forwarded: Some(forwarded?),
                answer: None,
            })
        };
        let as_is = transcript(loaded)
            .and_then(|t| Side::new(forwarded.iter().map(|&e| Box::from(e)).collect(), t));
        let continued_as_is = |deferred: Option<Deferral>| {
            (
                Decision::Continued {
                    body: Bytes::from(continued.clone()),
                    tokens_before,
                    tokens_after: after,
                    deferred,
                },
                session(as_is.clone()),
            )
        };
        match outcome {
            None => continued_as_is(None),
            Some((
                Decision::Compacted {
                    body: out,
                    tokens_after,
                    ..
                },
                back,
            )) => match history_of(route, &out) {
                Some(again) => {
                    let forwarded =
                        back.and_then(|t| Side::new(again.into_iter().map(Box::from).collect(), t));
                    (
                        Decision::Compacted {
                            body: out,
                            tokens_before,
                            tokens_after,
                        },
                        session(forwarded),
                    )
                }
                None => continued_as_is(Some(Deferral {
                    cause: DeferCause::RewriteUnreadable,
                    reason: "the compaction's history does not parse".to_owned(),
                })),
            },
            Some((Decision::Deferred(deferral), _)) => continued_as_is(Some(deferral)),
            Some(_) => continued_as_is(None),
        }
    }

    /// [`decide`](Mode::decide), and the session of a request forwarded (as it came,
    /// or compacted), when `request` parsed as a session's. **O(len)** plus the
    /// pipeline.
    fn fresh(
        &self,
        route: Route,
        body: &[u8],
        request: Option<&Request<'_>>,
    ) -> (Decision, Option<Session>) {
        let whole = self.whole(route, body);
        let forwarded = match &whole.decision {
            Decision::Forward | Decision::Deferred(_) => None,
            Decision::Compacted { body: out, .. } => {
                let Some(side) = whole.output.and_then(|t| {
                    let elements = history_of(route, &out[..])?;
                    Side::new(elements.into_iter().map(Box::from).collect(), t)
                }) else {
                    return (whole.decision, None);
                };
                Some(side)
            }
            _ => return (whole.decision, None),
        };
        let session = whole.client.zip(request).and_then(|(t, request)| {
            Some(Session {
                route,
                head: Head::of(route, &request.members),
                client: Side::new(
                    request.items().iter().map(|r| Box::from(r.get())).collect(),
                    t,
                )?,
                forwarded,
                answer: None,
            })
        });
        (whole.decision, session)
    }
}

/// `text` read with the reader of `route`'s format, when it reads and keeps the
/// provider's rules on its own, as check mode judges it. **O(len)**.
fn kept_rules(route: Route, text: &str) -> Option<Loaded<'_>> {
    let loaded = Loaded::read(text, route.format(), &ByteEstimate).ok()?;
    let broken = loaded
        .check(None, false)
        .is_ok_and(|c| !c.violations.is_empty());
    (!broken).then_some(loaded)
}
