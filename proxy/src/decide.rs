//! The proxy's sans-IO core: what to do with one request body. No sockets, no
//! clock, no runtime: [`Mode::decide`] takes the bytes and says forward, forward a
//! rewrite, or refuse; the HTTP layer ([`Proxy`](crate::Proxy)) only carries it out.

use bytes::Bytes;
use cutpoint::compact::pipeline::{Choice, Pipeline, Progress, Settings};
use cutpoint::compact::strategy::LedgerOnly;
use cutpoint::format::{ByteEstimate, EditError, Finding, LoadError, Loaded, Transcript};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::body::{Members, history_key};
use crate::session::Session;
use crate::{Refusal, Route};

/// What the proxy does with the requests it reads.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum Mode {
    /// Refuse a request that breaks a provider rule; forward the rest unchanged.
    #[default]
    Check,
    /// As `Check`, but a request whose faults can be fixed without losing a call is
    /// fixed and forwarded: an unanswered call gets an aborted error result, a result
    /// whose call is nowhere in the request is dropped (the module `repair` says
    /// exactly which rules). The fix is read back and checked, on its own and as a
    /// rewrite of the request; anything else is refused as `Check` refuses it.
    Repair,
    /// As `Check`, and compact a request over the budget with the one pipeline
    /// before forwarding it.
    Compact(Box<Compaction>),
}

/// The compaction of [`Mode::Compact`]: the pipeline `cutpoint compact --strategy
/// pipeline` runs, built from the same [`Settings`].
#[derive(Clone, Debug)]
pub struct Compaction {
    pipeline: Pipeline,
    budget: u64,
}

/// [`Compaction::new`] was given no budget.
#[derive(Clone, Copy, PartialEq, Eq, Debug, thiserror::Error)]
#[error("compact mode needs a budget: --budget, or --context-window with --max-output")]
#[non_exhaustive]
pub struct NoBudget;

impl Compaction {
    /// The pipeline of `settings` ([`Settings::pipeline`] with [`Choice::Pipeline`]),
    /// keeping every thinking block and reasoning item valid for its prefix binding
    /// (a proxy rewrites what the provider verifies). **O(stages)**.
    ///
    /// # Errors
    /// [`NoBudget`] when `settings` names no budget.
    pub fn new(settings: &Settings) -> Result<Self, NoBudget> {
        let budget = settings.budget().ok_or(NoBudget)?;
        let mut settings = settings.clone();
        settings.keep_thinking_valid = true;
        Ok(Compaction {
            pipeline: settings.pipeline(Choice::Pipeline, 0),
            budget,
        })
    }

    /// The budget, in tokens. **O(1)**.
    pub fn budget(&self) -> u64 {
        self.budget
    }
}

/// What to do with one request body ([`Mode::decide`]).
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Decision {
    /// Forward the body as it came: it keeps the rules, and is within the budget or
    /// no mode asked to compact it (or it holds no history to read).
    Forward,
    /// Forward this body instead: the request compacted to the budget. It was read
    /// back and keeps the provider's rules, and the rules of a rewrite of the
    /// original (latest thinking, provider compaction, reasoning before its item).
    Compacted {
        /// The rewritten body: only its history differs from the request's.
        body: Bytes,
        /// Live-history tokens before (estimated: a quarter of the bytes).
        tokens_before: u64,
        /// And after.
        tokens_after: u64,
    },
    /// Over the budget, but no rewrite could be forwarded: the body goes as it came.
    Deferred(Deferral),
    /// Forward this body instead: the request repaired ([`Mode::Repair`]). It was read
    /// back and keeps the provider's rules, and the rules of a rewrite of the
    /// original; every call of the request is in it.
    Repaired {
        /// The repaired body: only its history differs from the request's, and of
        /// the history only the messages repaired.
        body: Bytes,
        /// The calls answered with an aborted result, in history order.
        answered: Vec<String>,
        /// The call ids of the results dropped (no call of theirs in the request).
        dropped: Vec<String>,
    },
    /// Forward this body instead: a request of a session the proxy compacted before
    /// ([`Mode::decide_in`]), as the history the proxy forwarded then followed by the
    /// request's new elements. It keeps the provider's rules.
    Continued {
        /// The continued body: the request's members, and the remembered forwarded
        /// history followed by the request's new history elements.
        body: Bytes,
        /// Live-history tokens of the request as the client sent it.
        tokens_before: u64,
        /// And of the continued body.
        tokens_after: u64,
        /// Over the budget, why the pipeline did not run or its output was not
        /// forwarded (the continuation is forwarded instead).
        deferred: Option<Deferral>,
    },
    /// Answer the request with this error; do not forward it.
    Refuse(Refusal),
}

/// Why a request over the budget was forwarded without a compaction: as it came
/// ([`Decision::Deferred`]), or as its session's continuation
/// ([`Decision::Continued`]).
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Deferral {
    /// What kept the pipeline's output from being forwarded, as a metrics label.
    pub cause: DeferCause,
    /// Why, in words (the pipeline's reason, or the rule a rewrite would break).
    pub reason: String,
}

/// What kept a compaction from being forwarded ([`Deferral`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum DeferCause {
    /// Any compaction would change the prefix of thinking the provider binds to it
    /// (the latest assistant message carries signed thinking).
    ThinkingBound,
    /// The pipeline did not meet the budget: the floors protect what is left, or no
    /// strategy made progress.
    BudgetNotMet,
    /// The pipeline failed on the request.
    PipelineFailed,
    /// Its output did not read back.
    RewriteUnreadable,
    /// Its output would break a provider rule, on its own or as a rewrite.
    RewriteBreaksRule,
}

impl DeferCause {
    /// Its name, as `/metrics` labels it. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            DeferCause::ThinkingBound => "thinking-bound",
            DeferCause::BudgetNotMet => "budget-not-met",
            DeferCause::PipelineFailed => "pipeline-failed",
            DeferCause::RewriteUnreadable => "rewrite-unreadable",
            DeferCause::RewriteBreaksRule => "rewrite-breaks-rule",
        }
    }
}

/// The top-level keys the library's reader takes a history from. A Responses request
/// may send its `input` as a plain string, or none at all (a stored prompt, a
/// conversation): such a request holds no history to check.
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(borrow, default)]
    input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    messages: Option<&'a RawValue>,
    #[serde(borrow, default)]
    contents: Option<&'a RawValue>,
    #[serde(borrow, default)]
    history: Option<&'a RawValue>,
}

impl Top<'_> {
    /// Whether a Responses request holds no history: its `input` is a string, or it
    /// names no history at all. **O(1)**.
    fn without_history(&self) -> bool {
        match self.input {
            Some(input) => input.get().starts_with('"'),
            None => self.messages.is_none() && self.contents.is_none() && self.history.is_none(),
        }
    }
}

/// A decision on a request read whole, and what was read to make it.
pub(crate) struct Whole {
    pub(crate) decision: Decision,
    /// The request's reading, when it was read and keeps the rules.
    pub(crate) client: Option<Transcript>,
    /// A compaction's reading of the body forwarded instead.
    pub(crate) output: Option<Transcript>,
}

impl Whole {
    fn only(decision: Decision) -> Whole {
        Whole {
            decision,
            client: None,
            output: None,
        }
    }
}

/// The transcript of a reading of a JSON document (every route's). **O(1)**.
pub(crate) fn transcript(loaded: Loaded<'_>) -> Option<Transcript> {
    match loaded {
        Loaded::Transcript { transcript, .. } => Some(transcript),
        _ => None,
    }
}

impl Mode {
    /// Decides what to do with `body`, a request for `route`: read it with the
    /// library's reader of the route's format, refuse it when it breaks a provider
    /// rule ([`Loaded::check`], as `cutpoint check` does) naming the rule, the
    /// message index and the call id; in compact mode, over the budget, compact it
    /// ([`Loaded::run`], as `cutpoint compact --strategy pipeline` does). Never
    /// panics on any input. **O(len)** to read and check, plus what the pipeline
    /// costs when it runs.
    pub fn decide(&self, route: Route, body: &[u8]) -> Decision {
        self.whole(route, body).decision
    }

    /// [`decide`](Mode::decide), keeping what it read.
    pub(crate) fn whole(&self, route: Route, body: &[u8]) -> Whole {
        let text = match std::str::from_utf8(body) {
            Ok(text) => text,
            Err(e) => {
                return Whole::only(Decision::Refuse(Refusal::bad_request(
                    "not-utf8",
                    format!(
                        "cutpoint proxy: the request body is not UTF-8 (invalid byte at offset {})",
                        e.valid_up_to()
                    ),
                )));
            }
        };
        // The syntax first, so that a malformed body is named by line and column
        // whatever the reader would have made of it.
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
            return Whole::only(Decision::Refuse(Refusal::bad_request(
                "invalid-json",
                format!("cutpoint proxy: the request body is not valid JSON: {e}"),
            )));
        }
        let top = match text.trim_start().starts_with('{') {
            true => serde_json::from_str::<Top<'_>>(text).ok(),
            false => None,
        };
        let Some(top) = top else {
            return Whole::only(Decision::Refuse(Refusal::bad_request(
                "invalid-request",
                "cutpoint proxy: the request body is not a JSON object".to_owned(),
            )));
        };
        if route == Route::OpenAiResponses && top.without_history() {
            return Whole::only(Decision::Forward);
        }
        let loaded = match Loaded::read(text, route.format(), &ByteEstimate) {
            Ok(loaded) => loaded,
            Err(e) => return Whole::only(Decision::Refuse(unreadable(&e))),
        };
        let violations = match loaded.check(None, false) {
            Ok(checked) => checked.violations,
            // Only a records log compared with an original is not comparable.
            Err(_) => Vec::new(),
        };
        if let Some(first) = violations.first() {
            return Whole::only(match self {
                Mode::Repair => repaired(route, text, &loaded, &violations),
                _ => Decision::Refuse(broken(route, first, violations.len())),
            });
        }
        let (decision, output) = match self {
            Mode::Check | Mode::Repair => (Decision::Forward, None),
            Mode::Compact(c) => compact(c, route, text, &loaded),
        };
        Whole {
            decision,
            client: transcript(loaded),
            output,
        }
    }

    /// [`decide`](Mode::decide) for the next request of a session (`prior`: what the
    /// proxy read and forwarded for the session's last request), and the session
    /// after it (`None`: forget it). The same decision as
    /// [`decide_in_from_scratch`](Mode::decide_in_from_scratch), made incrementally:
    /// a request whose history starts, element for element (bytes), with `prior`'s,
    /// and whose other members the reader reads are the bytes they were, is read only
    /// from its first new element on, and checked on `prior`'s reading plus the new
    /// messages. It is decided so when it keeps the rules and needs no rewrite
    /// (forwarded as it came, or a compacted session continued within the budget);
    /// anything else is decided from scratch.
    ///
    /// Every mode remembers the sessions it forwards; compact mode also what it
    /// forwarded instead. Never panics on any input. **O(new elements)** to read and
    /// **O(blocks)** to check on the incremental path (plus **O(len)** to scan the
    /// syntax, compare bytes and write a continued body); **O(len)** plus the
    /// pipeline otherwise.
    pub fn decide_in(
        &self,
        route: Route,
        body: &[u8],
        prior: Option<Session>,
    ) -> (Decision, Option<Session>) {
        let request = crate::warm::Request::parse(route, body);
        let (decision, session, _) = self.decide_parsed(route, body, request.as_ref(), prior);
        (decision, session)
    }

    /// [`decide_in`](Mode::decide_in), and whether it was decided incrementally
    /// (for tests and benches that check the path taken). **O(len)** to parse, plus
    /// the decision.
    #[doc(hidden)]
    pub fn decide_in_traced(
        &self,
        route: Route,
        body: &[u8],
        prior: Option<Session>,
    ) -> (Decision, Option<Session>, bool) {
        let request = crate::warm::Request::parse(route, body);
        self.decide_parsed(route, body, request.as_ref(), prior)
    }

    /// [`decide_in`](Mode::decide_in) on a body parsed already (`None`: it did not
    /// parse as a session's request), and whether it was decided incrementally.
    pub(crate) fn decide_parsed(
        &self,
        route: Route,
        body: &[u8],
        request: Option<&crate::warm::Request<'_>>,
        prior: Option<Session>,
    ) -> (Decision, Option<Session>, bool) {
        match (request, prior) {
            (Some(request), Some(mut prior)) => {
                let checked = match crate::warm::decide(self, route, request, &mut prior) {
                    Ok(decision) => return (decision, Some(prior), true),
                    Err(crate::warm::Declined::Scratch) => None,
                    // The client's side read and checked already: only the
                    // continuation is read whole, to compact it.
                    Err(crate::warm::Declined::OverBudget { n }) => Some(n),
                };
                let (decision, session) =
                    self.scratch_checked(route, body, Some(request), Some(&prior), checked);
                (decision, session, false)
            }
            (request, prior) => {
                let (decision, session) = self.scratch(route, body, request, prior.as_ref());
                (decision, session, false)
            }
        }
    }
}

/// The history elements of a request body of `route`, as their bytes; `None` when
/// it is not an object holding one. **O(len)**.
pub(crate) fn history_of(route: Route, body: &[u8]) -> Option<Vec<String>> {
    let text = std::str::from_utf8(body).ok()?;
    let top: Members<'_> = serde_json::from_str(text).ok()?;
    let items: Vec<&RawValue> = serde_json::from_str(top.get(history_key(route))?.get()).ok()?;
    Some(items.iter().map(|r| r.get().to_owned()).collect())
}

/// The refusal of a body the reader could not read: the reader's message names the
/// line and the message.
fn unreadable(e: &LoadError) -> Refusal {
    Refusal::bad_request(
        "invalid-request",
        format!("cutpoint proxy: the request's history cannot be read: {e}"),
    )
}

/// The refusal of a body that breaks a rule: the provider's own text, with the rule,
/// the call id and the message index (`messages.N`, or `input.N` for Responses).
fn broken(route: Route, first: &Finding, count: usize) -> Refusal {
    let array = match route {
        Route::OpenAiResponses => "input",
        _ => "messages",
    };
    let call = first
        .call_id
        .as_ref()
        .map(|c| format!(", call {c}"))
        .unwrap_or_default();
    let more = match count {
        1 => String::new(),
        n => format!(" ({} more violations)", n - 1),
    };
    Refusal::bad_request(
        first.rule,
        format!(
            "cutpoint proxy: rule {} broken at {array}.{}{call}: {}{more}",
            first.rule, first.at, first.text
        ),
    )
}

/// Repair mode on a request that breaks a rule: the repaired body when every finding
/// is one repair fixes and the fix passes the checks (on its own and as a rewrite of
/// the request), else the refusal of check mode, saying why it was not repaired.
/// **O(len)**.
fn repaired(route: Route, text: &str, loaded: &Loaded<'_>, violations: &[Finding]) -> Decision {
    let refuse = |why: &dyn std::fmt::Display| {
        let mut refusal = broken(route, &violations[0], violations.len());
        refusal.message = format!("{} (repair mode: not repaired: {why})", refusal.message);
        Decision::Refuse(refusal)
    };
    let done = match crate::repair::repair(route, text, violations) {
        Ok(done) => done,
        Err(e) => return refuse(&e),
    };
    let back = match Loaded::read(&done.body, route.format(), &ByteEstimate) {
        Ok(back) => back,
        Err(e) => return refuse(&format!("the repair does not read back: {e}")),
    };
    for against in [None, Some(loaded)] {
        if let Ok(checked) = back.check(against, false) {
            if let Some(f) = checked.violations.first() {
                return refuse(&format!(
                    "the repaired request would break {} at {}: {}",
                    f.rule, f.at, f.text
                ));
            }
        }
    }
    Decision::Repaired {
        body: Bytes::from(done.body),
        answered: done.answered,
        dropped: done.dropped,
    }
}

/// Compact mode on a request that keeps the rules: within the budget it goes as it
/// came; over it, the pipeline's output goes when it meets the budget and passes the
/// checks, else the request as it came. With a compaction, the reading of its
/// output. **O(len)** plus the pipeline.
pub(crate) fn compact(
    c: &Compaction,
    route: Route,
    text: &str,
    loaded: &Loaded<'_>,
) -> (Decision, Option<Transcript>) {
    let before = loaded.live_tokens();
    if before <= c.budget {
        return (Decision::Forward, None);
    }
    let deferred =
        |cause: DeferCause, reason: String| (Decision::Deferred(Deferral { cause, reason }), None);
    let done = match loaded.run(
        &c.pipeline,
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    ) {
        Ok(done) => done,
        Err(e @ EditError::ThinkingBound { .. }) => {
            return deferred(DeferCause::ThinkingBound, e.to_string());
        }
        Err(e) => {
            return deferred(
                DeferCause::PipelineFailed,
                format!("the pipeline failed: {e}"),
            );
        }
    };
    if !done.report.met_budget() || done.text == text {
        let mut why: Vec<String> = done.report.blocked().map(|b| b.to_string()).collect();
        why.dedup();
        return deferred(
            DeferCause::BudgetNotMet,
            format!(
                "{} tokens left over the budget of {}{}",
                done.report.tokens_after,
                c.budget,
                match why.is_empty() {
                    true => String::new(),
                    false => format!(" ({})", why.join("; ")),
                }
            ),
        );
    }
    // Never forward a rewrite the provider would refuse: read it back and check it on
    // its own and as a rewrite of the request.
    let back = match Loaded::read(&done.text, route.format(), &ByteEstimate) {
        Ok(back) => back,
        Err(e) => {
            return deferred(
                DeferCause::RewriteUnreadable,
                format!("the rewrite does not read back: {e}"),
            );
        }
    };
    let mut findings = Vec::new();
    for against in [None, Some(loaded)] {
        if let Ok(checked) = back.check(against, false) {
            findings.extend(checked.violations);
        }
    }
    if let Some(first) = findings.first() {
        return deferred(
            DeferCause::RewriteBreaksRule,
            format!("the rewrite breaks {}: {}", first.rule, first.text),
        );
    }
    let tokens_after = back.live_tokens();
    let reading = transcript(back);
    (
        Decision::Compacted {
            tokens_after,
            body: Bytes::from(done.text),
            tokens_before: before,
        },
        reading,
    )
}
