//! The proxy's counters, in the Prometheus text format: plain atomics, small maps for
//! refusals by reason and deferrals by cause (their keys are static names), and
//! latency histograms ([`Histogram`]).

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use crate::DeferCause;
use crate::histogram::Histogram;

/// Counters of one proxy, shared by every connection. Each update is **O(1)** (a
/// refusal: **O(log reasons)** under a lock held for the insert only).
#[derive(Debug, Default)]
pub struct Metrics {
    requests: AtomicU64,
    read: AtomicU64,
    forwarded: AtomicU64,
    compactions: AtomicU64,
    repairs: AtomicU64,
    continued: AtomicU64,
    incremental: AtomicU64,
    answers_followed: AtomicU64,
    answer_calls: AtomicU64,
    answer_stream_errors: AtomicU64,
    answer_compactions_broken: AtomicU64,
    answer_calls_carried: AtomicU64,
    answer_calls_missing: AtomicU64,
    deferrals: AtomicU64,
    tokens_saved: AtomicU64,
    upstream_errors: AtomicU64,
    upstream_timeouts: AtomicU64,
    refused: Mutex<BTreeMap<&'static str, u64>>,
    deferred: Mutex<BTreeMap<&'static str, u64>>,
    added: Histogram,
    first_byte: Histogram,
    decide_incremental: Histogram,
    decide_whole: Histogram,
}

/// One series of a histogram: its labels, and it.
type Series<'a> = (&'a str, &'a Histogram);

/// A duration measured ([`Metrics::time`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Took {
    /// From a provider route's request arriving to its forwarding upstream: reading
    /// the body, deciding, and waiting for a blocking thread to decide on.
    Added,
    /// From a provider route's request arriving to the first byte of its answer's
    /// body handed back (the upstream's time included).
    FirstByte,
    /// One decision, on its session's reading (`true`) or reading the request whole.
    Decide { incremental: bool },
}

/// One thing counted.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Count {
    /// A request received (the proxy's own `/metrics` aside).
    Request,
    /// A request of a provider route, its body read.
    Read,
    /// A request sent upstream (read or passed through).
    Forwarded,
    /// A request compacted before forwarding, and the tokens it saved.
    Compaction(u64),
    /// A request repaired before forwarding.
    Repair,
    /// A request of a remembered session forwarded as its continuation.
    Continued,
    /// A request decided on its session's reading, only its new elements read.
    Incremental,
    /// A streamed answer decoded to its end, and the calls it asked the agent to run.
    AnswerFollowed(u64),
    /// A streamed answer that does not decode.
    AnswerStreamError,
    /// A streamed answer to a request ending in a Responses `compaction_trigger` that
    /// did not hold exactly one `compaction` output item.
    AnswerCompactionBroken,
    /// The calls a session's followed answer asked for that its next request
    /// carries, and those it does not.
    AnswerCallsCarried { carried: u64, missing: u64 },
    /// A request over the budget forwarded without a compaction, and why.
    Deferral(DeferCause),
    /// The upstream could not be reached, or failed mid-request.
    UpstreamError,
    /// The upstream did not accept a connection, or did not start its response, in
    /// time.
    UpstreamTimeout,
}

impl Metrics {
    /// Counts one event. **O(1)**.
    pub(crate) fn count(&self, what: Count) {
        let counter = match what {
            Count::Request => &self.requests,
            Count::Read => &self.read,
            Count::Forwarded => &self.forwarded,
            Count::Compaction(saved) => {
                self.tokens_saved.fetch_add(saved, Relaxed);
                &self.compactions
            }
            Count::Repair => &self.repairs,
            Count::Continued => &self.continued,
            Count::Incremental => &self.incremental,
            Count::AnswerFollowed(calls) => {
                self.answer_calls.fetch_add(calls, Relaxed);
                &self.answers_followed
            }
            Count::AnswerStreamError => &self.answer_stream_errors,
            Count::AnswerCompactionBroken => &self.answer_compactions_broken,
            Count::AnswerCallsCarried { carried, missing } => {
                self.answer_calls_carried.fetch_add(carried, Relaxed);
                self.answer_calls_missing.fetch_add(missing, Relaxed);
                return;
            }
            Count::Deferral(cause) => {
                let mut map = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
                *map.entry(cause.name()).or_default() += 1;
                &self.deferrals
            }
            Count::UpstreamError => &self.upstream_errors,
            Count::UpstreamTimeout => &self.upstream_timeouts,
        };
        counter.fetch_add(1, Relaxed);
    }

    /// Records how long something took. **O(log buckets)**.
    pub(crate) fn time(&self, what: Took, d: Duration) {
        match what {
            Took::Added => &self.added,
            Took::FirstByte => &self.first_byte,
            Took::Decide { incremental: true } => &self.decide_incremental,
            Took::Decide { incremental: false } => &self.decide_whole,
        }
        .observe(d);
    }

    /// From a provider route's request arriving to its forwarding upstream: what the
    /// proxy adds before the upstream sees the request. **O(1)**.
    pub fn added(&self) -> &Histogram {
        &self.added
    }

    /// From a provider route's request arriving to the first byte of its answer's
    /// body handed back, the upstream's time included. **O(1)**.
    pub fn first_byte(&self) -> &Histogram {
        &self.first_byte
    }

    /// The decisions' own time, on their session's reading (`true`) or reading the
    /// request whole. **O(1)**.
    pub fn decide(&self, incremental: bool) -> &Histogram {
        match incremental {
            true => &self.decide_incremental,
            false => &self.decide_whole,
        }
    }

    /// Requests over the budget forwarded without a compaction for `cause` so far.
    /// **O(log causes)**.
    pub fn deferrals(&self, cause: DeferCause) -> u64 {
        let map = self.deferred.lock().unwrap_or_else(|p| p.into_inner());
        map.get(cause.name()).copied().unwrap_or(0)
    }

    /// Counts a refusal for `reason`. **O(log reasons)**.
    pub(crate) fn refused(&self, reason: &'static str) {
        // A poisoned lock only means a panic elsewhere mid-insert: the map is whole.
        let mut map = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        *map.entry(reason).or_default() += 1;
    }

    /// Requests refused for `reason` so far. **O(log reasons)**.
    pub fn refusals(&self, reason: &str) -> u64 {
        let map = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        map.get(reason).copied().unwrap_or(0)
    }

    /// Requests compacted before forwarding so far. **O(1)**.
    pub fn compactions(&self) -> u64 {
        self.compactions.load(Relaxed)
    }

    /// Requests repaired before forwarding so far. **O(1)**.
    pub fn repairs(&self) -> u64 {
        self.repairs.load(Relaxed)
    }

    /// Requests forwarded as a remembered session's continuation so far. **O(1)**.
    pub fn continued(&self) -> u64 {
        self.continued.load(Relaxed)
    }

    /// Requests decided incrementally (on their session's reading, only their new
    /// history elements read) so far. **O(1)**.
    pub fn incremental(&self) -> u64 {
        self.incremental.load(Relaxed)
    }

    /// Streamed answers decoded to their end so far. **O(1)**.
    pub fn answers_followed(&self) -> u64 {
        self.answers_followed.load(Relaxed)
    }

    /// Tool calls those answers asked the agent to run. **O(1)**.
    pub fn answer_calls(&self) -> u64 {
        self.answer_calls.load(Relaxed)
    }

    /// Streamed answers that did not decode so far. **O(1)**.
    pub fn answer_stream_errors(&self) -> u64 {
        self.answer_stream_errors.load(Relaxed)
    }

    /// Streamed answers to a `compaction_trigger` that did not hold exactly one
    /// `compaction` item, so far. **O(1)**.
    pub fn answer_compactions_broken(&self) -> u64 {
        self.answer_compactions_broken.load(Relaxed)
    }

    /// Calls followed answers asked for that their session's next request carries,
    /// and those it does not, so far. **O(1)**.
    pub fn answer_calls_carried(&self) -> (u64, u64) {
        (
            self.answer_calls_carried.load(Relaxed),
            self.answer_calls_missing.load(Relaxed),
        )
    }

    /// Requests whose upstream timed out so far (answered 504). **O(1)**.
    pub fn upstream_timeouts(&self) -> u64 {
        self.upstream_timeouts.load(Relaxed)
    }

    /// Requests sent upstream so far. **O(1)**.
    pub fn forwarded(&self) -> u64 {
        self.forwarded.load(Relaxed)
    }

    /// The counters in the Prometheus text exposition format. **O(reasons)**.
    pub fn render(&self) -> String {
        let mut out = String::new();
        let counters = [
            (
                "requests",
                "Requests received (the proxy's own /metrics aside).",
                &self.requests,
            ),
            (
                "read",
                "Requests of a provider route, their bodies read (up to the cap) and checked.",
                &self.read,
            ),
            ("forwarded", "Requests sent upstream.", &self.forwarded),
            (
                "compactions",
                "Requests compacted before forwarding.",
                &self.compactions,
            ),
            (
                "repairs",
                "Requests repaired before forwarding (calls answered as aborted, orphan results dropped).",
                &self.repairs,
            ),
            (
                "sessions_continued",
                "Requests of a remembered session forwarded as the history forwarded before, extended.",
                &self.continued,
            ),
            (
                "sessions_incremental",
                "Requests decided on their session's reading of the request before, only their new history elements read and checked.",
                &self.incremental,
            ),
            (
                "answers_followed",
                "Streamed answers decoded to their end by the live decoder of their route.",
                &self.answers_followed,
            ),
            (
                "answer_calls",
                "Tool calls the followed answers asked the agent to run.",
                &self.answer_calls,
            ),
            (
                "answer_stream_errors",
                "Streamed answers that do not decode (passed through as they came).",
                &self.answer_stream_errors,
            ),
            (
                "answer_compactions_broken",
                "Streamed OpenAI Responses answers to a request ending in a compaction_trigger that did not hold exactly one compaction output item (passed through as they came).",
                &self.answer_compactions_broken,
            ),
            (
                "answer_calls_carried",
                "Calls a followed answer asked for that its session's next request (decided incrementally) carries back.",
                &self.answer_calls_carried,
            ),
            (
                "answer_calls_missing",
                "Calls a followed answer asked for that its session's next request (decided incrementally) does not carry.",
                &self.answer_calls_missing,
            ),
            (
                "deferrals",
                "Requests over the budget forwarded as they came (no legal rewrite).",
                &self.deferrals,
            ),
            (
                "tokens_saved",
                "Estimated live-history tokens removed by compaction.",
                &self.tokens_saved,
            ),
            (
                "upstream_errors",
                "Requests whose upstream could not be reached or failed (answered 502).",
                &self.upstream_errors,
            ),
            (
                "upstream_timeouts",
                "Requests whose upstream did not accept a connection or start its response in time (answered 504).",
                &self.upstream_timeouts,
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(out, "# HELP cutpoint_proxy_{name}_total {help}");
            let _ = writeln!(out, "# TYPE cutpoint_proxy_{name}_total counter");
            let _ = writeln!(out, "cutpoint_proxy_{name}_total {}", value.load(Relaxed));
        }
        let labelled = [
            (
                "refused",
                "reason",
                "Requests answered by the proxy and not forwarded, by rule or reason.",
                &self.refused,
            ),
            (
                "deferred",
                "cause",
                "Requests over the budget forwarded without a compaction, by cause.",
                &self.deferred,
            ),
        ];
        for (name, label, help, map) in labelled {
            let _ = writeln!(out, "# HELP cutpoint_proxy_{name}_total {help}");
            let _ = writeln!(out, "# TYPE cutpoint_proxy_{name}_total counter");
            let map = map.lock().unwrap_or_else(|p| p.into_inner());
            for (value, n) in map.iter() {
                let _ = writeln!(
                    out,
                    "cutpoint_proxy_{name}_total{{{label}=\"{value}\"}} {n}"
                );
            }
        }
        let histograms: [(&str, &str, &[Series<'_>]); 3] = [
            (
                "added_seconds",
                "From a provider route's request arriving to its forwarding upstream (body read, decision, queueing): the latency the proxy adds before the upstream sees it.",
                &[("", &self.added)],
            ),
            (
                "first_byte_seconds",
                "From a provider route's request arriving to the first byte of its answer's body handed back, the upstream's time included.",
                &[("", &self.first_byte)],
            ),
            (
                "decide_seconds",
                "One decision's own time: on its session's reading, only the new history elements read (path=incremental), or the request read whole (path=whole).",
                &[
                    ("path=\"incremental\"", &self.decide_incremental),
                    ("path=\"whole\"", &self.decide_whole),
                ],
            ),
        ];
        for (name, help, series) in histograms {
            let _ = writeln!(out, "# HELP cutpoint_proxy_{name} {help}");
            let _ = writeln!(out, "# TYPE cutpoint_proxy_{name} histogram");
            for (labels, h) in series {
                h.render(&mut out, &format!("cutpoint_proxy_{name}"), labels);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_every_counter_and_each_reason() {
        let m = Metrics::default();
        m.count(Count::Request);
        m.count(Count::Compaction(120));
        m.count(Count::Repair);
        m.refused("anthropic/tool-use-without-result");
        m.refused("anthropic/tool-use-without-result");
        let text = m.render();
        assert!(text.contains("cutpoint_proxy_requests_total 1\n"));
        assert!(text.contains("cutpoint_proxy_compactions_total 1\n"));
        assert!(text.contains("cutpoint_proxy_tokens_saved_total 120\n"));
        assert!(text.contains("cutpoint_proxy_repairs_total 1\n"));
        assert!(text.contains(
            "cutpoint_proxy_refused_total{reason=\"anthropic/tool-use-without-result\"} 2\n"
        ));
        assert_eq!(m.refusals("anthropic/tool-use-without-result"), 2);
    }

    #[test]
    fn renders_deferral_causes_and_the_histograms() {
        let m = Metrics::default();
        m.count(Count::Deferral(DeferCause::ThinkingBound));
        m.count(Count::Deferral(DeferCause::ThinkingBound));
        m.count(Count::Deferral(DeferCause::BudgetNotMet));
        m.time(Took::Added, Duration::from_micros(300));
        m.time(
            Took::Decide { incremental: true },
            Duration::from_micros(40),
        );
        let text = m.render();
        assert!(text.contains("cutpoint_proxy_deferrals_total 3\n"));
        assert!(text.contains("cutpoint_proxy_deferred_total{cause=\"thinking-bound\"} 2\n"));
        assert!(text.contains("cutpoint_proxy_deferred_total{cause=\"budget-not-met\"} 1\n"));
        assert_eq!(m.deferrals(DeferCause::ThinkingBound), 2);
        assert!(text.contains("# TYPE cutpoint_proxy_added_seconds histogram\n"));
        assert!(text.contains("cutpoint_proxy_added_seconds_bucket{le=\"0.0005\"} 1\n"));
        assert!(text.contains("cutpoint_proxy_added_seconds_count 1\n"));
        assert!(text.contains("cutpoint_proxy_first_byte_seconds_count 0\n"));
        assert!(text.contains(
            "cutpoint_proxy_decide_seconds_bucket{path=\"incremental\",le=\"0.00005\"} 1\n"
        ));
        assert!(text.contains("cutpoint_proxy_decide_seconds_count{path=\"whole\"} 0\n"));
    }
}
