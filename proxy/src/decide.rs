//! The proxy's sans-IO core: what to do with one request body. No sockets, no
//! clock, no runtime: [`Mode::decide`] takes the bytes and says forward, forward a
//! rewrite, or refuse; the HTTP layer ([`Proxy`](crate::Proxy)) only carries it out.

use bytes::Bytes;
use cutpoint::compact::pipeline::{Choice, Pipeline, Progress, Settings};
use cutpoint::compact::strategy::LedgerOnly;
use cutpoint::format::EditError;
use cutpoint::format::{ByteEstimate, Finding, LoadError, Loaded};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::body::{Members, history_key};
use crate::session::Remembered;
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
    Deferred {
        /// Why (a pipeline's reason, or a rewrite that did not pass the checks).
        reason: String,
    },
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
        deferred: Option<String>,
    },
    /// Answer the request with this error; do not forward it.
    Refuse(Refusal),
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

impl Mode {
    /// Decides what to do with `body`, a request for `route`: read it with the
    /// library's reader of the route's format, refuse it when it breaks a provider
    /// rule ([`Loaded::check`], as `cutpoint check` does) naming the rule, the
    /// message index and the call id; in compact mode, over the budget, compact it
    /// ([`Loaded::run`], as `cutpoint compact --strategy pipeline` does). Never
    /// panics on any input. **O(len)** to read and check, plus what the pipeline
    /// costs when it runs.
    pub fn decide(&self, route: Route, body: &[u8]) -> Decision {
        let text = match std::str::from_utf8(body) {
            Ok(text) => text,
            Err(e) => {
                return Decision::Refuse(Refusal::bad_request(
                    "not-utf8",
                    format!(
                        "cutpoint proxy: the request body is not UTF-8 (invalid byte at offset {})",
                        e.valid_up_to()
                    ),
                ));
            }
        };
        // The syntax first, so that a malformed body is named by line and column
        // whatever the reader would have made of it.
        if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(text) {
            return Decision::Refuse(Refusal::bad_request(
                "invalid-json",
                format!("cutpoint proxy: the request body is not valid JSON: {e}"),
            ));
        }
        let top = match text.trim_start().starts_with('{') {
            true => serde_json::from_str::<Top<'_>>(text).ok(),
            false => None,
        };
        let Some(top) = top else {
            return Decision::Refuse(Refusal::bad_request(
                "invalid-request",
                "cutpoint proxy: the request body is not a JSON object".to_owned(),
            ));
        };
        if route == Route::OpenAiResponses && top.without_history() {
            return Decision::Forward;
        }
        let loaded = match Loaded::read(text, route.format(), &ByteEstimate) {
            Ok(loaded) => loaded,
            Err(e) => return Decision::Refuse(unreadable(&e)),
        };
        let violations = match loaded.check(None, false) {
            Ok(checked) => checked.violations,
            // Only a records log compared with an original is not comparable.
            Err(_) => Vec::new(),
        };
        if let Some(first) = violations.first() {
            return match self {
                Mode::Repair => repaired(route, text, &loaded, &violations),
                _ => Decision::Refuse(broken(route, first, violations.len())),
            };
        }
        match self {
            Mode::Check | Mode::Repair => Decision::Forward,
            Mode::Compact(c) => compact(c, route, text, &loaded),
        }
    }

    /// [`decide`](Mode::decide) for a request of a session whose last compacted
    /// request the proxy remembers (`prior`), and what to remember after it (`None`:
    /// forget the session). Compact mode only (the other modes remember nothing):
    ///
    /// - a request whose history starts, element for element, with `prior`'s client
    ///   history, and that keeps the rules, is forwarded as `prior`'s forwarded
    ///   history followed by the request's new elements ([`Decision::Continued`]):
    ///   what the provider saw, extended, so the thinking and reasoning it answered
    ///   with stay bound to their prefix; over the budget, the pipeline runs on that
    ///   continuation (its own earlier output, the summary carried forward), and its
    ///   output is checked against the continuation, what the provider saw;
    /// - any other request is decided from scratch, and remembered when compacted.
    ///
    /// **O(len)** plus the pipeline when it runs.
    pub fn decide_in(
        &self,
        route: Route,
        body: &[u8],
        prior: Option<&Remembered>,
    ) -> (Decision, Option<Remembered>) {
        let Mode::Compact(c) = self else {
            return (self.decide(route, body), None);
        };
        let fresh = || {
            let decision = self.decide(route, body);
            let remembered = match &decision {
                Decision::Compacted { body: out, .. } => {
                    match (history_of(route, body), history_of(route, out)) {
                        (Some(original), Some(forwarded)) => Some(Remembered {
                            original,
                            forwarded,
                        }),
                        _ => None,
                    }
                }
                _ => None,
            };
            (decision, remembered)
        };
        let Some(prior) = prior else {
            return fresh();
        };
        let Ok(text) = std::str::from_utf8(body) else {
            return fresh();
        };
        let Ok(top) = serde_json::from_str::<Members<'_>>(text) else {
            return fresh();
        };
        let key = history_key(route);
        let Some(items) = top
            .get(key)
            .and_then(|h| serde_json::from_str::<Vec<&RawValue>>(h.get()).ok())
        else {
            return fresh();
        };
        let n = prior.original.len();
        let continues = items.len() >= n
            && items[..n]
                .iter()
                .zip(&prior.original)
                .all(|(a, b)| a.get() == b);
        if !continues {
            return fresh();
        }
        // The client's request keeps the rules on its own, as check mode judges it.
        let Ok(client) = Loaded::read(text, route.format(), &ByteEstimate) else {
            return fresh();
        };
        if client
            .check(None, false)
            .is_ok_and(|c| !c.violations.is_empty())
        {
            return fresh();
        }
        let forwarded: Vec<String> = prior
            .forwarded
            .iter()
            .cloned()
            .chain(items[n..].iter().map(|r| r.get().to_owned()))
            .collect();
        let original: Vec<String> = items.iter().map(|r| r.get().to_owned()).collect();
        let continued = top.write_with(key, &format!("[{}]", forwarded.join(",")));
        let Ok(loaded) = Loaded::read(&continued, route.format(), &ByteEstimate) else {
            return fresh();
        };
        if loaded
            .check(None, false)
            .is_ok_and(|c| !c.violations.is_empty())
        {
            return fresh();
        }
        let tokens_before = client.live_tokens();
        let after = loaded.live_tokens();
        let continued_as_is = |deferred: Option<String>, forwarded: Vec<String>| {
            (
                Decision::Continued {
                    body: Bytes::from(continued.clone()),
                    tokens_before,
                    tokens_after: after,
                    deferred,
                },
                Some(Remembered {
                    original: original.clone(),
                    forwarded,
                }),
            )
        };
        if after <= c.budget {
            return continued_as_is(None, forwarded);
        }
        match compact(c, route, &continued, &loaded) {
            Decision::Compacted {
                body: out,
                tokens_after,
                ..
            } => match history_of(route, &out) {
                Some(again) => (
                    Decision::Compacted {
                        body: out,
                        tokens_before,
                        tokens_after,
                    },
                    Some(Remembered {
                        original,
                        forwarded: again,
                    }),
                ),
                None => continued_as_is(
                    Some("the compaction's history does not parse".to_owned()),
                    forwarded,
                ),
            },
            Decision::Deferred { reason } => continued_as_is(Some(reason), forwarded),
            _ => continued_as_is(None, forwarded),
        }
    }
}

/// The history elements of a request body of `route`, as their bytes; `None` when
/// it is not an object holding one. **O(len)**.
fn history_of(route: Route, body: &[u8]) -> Option<Vec<String>> {
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
/// checks, else the request as it came. **O(len)** plus the pipeline.
fn compact(c: &Compaction, route: Route, text: &str, loaded: &Loaded<'_>) -> Decision {
    let before = loaded.live_tokens();
    if before <= c.budget {
        return Decision::Forward;
    }
    let done = match loaded.run(
        &c.pipeline,
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    ) {
        Ok(done) => done,
        Err(e @ EditError::ThinkingBound { .. }) => {
            return Decision::Deferred {
                reason: e.to_string(),
            };
        }
        Err(e) => {
            return Decision::Deferred {
                reason: format!("the pipeline failed: {e}"),
            };
        }
    };
    if !done.report.met_budget() || done.text == text {
        let mut why: Vec<String> = done.report.blocked().map(|b| b.to_string()).collect();
        why.dedup();
        return Decision::Deferred {
            reason: format!(
                "{} tokens left over the budget of {}{}",
                done.report.tokens_after,
                c.budget,
                match why.is_empty() {
                    true => String::new(),
                    false => format!(" ({})", why.join("; ")),
                }
            ),
        };
    }
    // Never forward a rewrite the provider would refuse: read it back and check it on
    // its own and as a rewrite of the request.
    let back = match Loaded::read(&done.text, route.format(), &ByteEstimate) {
        Ok(back) => back,
        Err(e) => {
            return Decision::Deferred {
                reason: format!("the rewrite does not read back: {e}"),
            };
        }
    };
    let mut findings = Vec::new();
    for against in [None, Some(loaded)] {
        if let Ok(checked) = back.check(against, false) {
            findings.extend(checked.violations);
        }
    }
    if let Some(first) = findings.first() {
        return Decision::Deferred {
            reason: format!("the rewrite breaks {}: {}", first.rule, first.text),
        };
    }
    Decision::Compacted {
        tokens_after: back.live_tokens(),
        body: Bytes::from(done.text),
        tokens_before: before,
    }
}
