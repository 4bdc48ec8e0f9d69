//! The decision alone (sans-IO, no sockets): a session's next request decided on the
//! session's reading (only its new elements read) against reading it whole, in one
//! run.
//!
//! - `next_turn/{decide,from_scratch,incremental}/BODY` (check mode): the real
//!   request Claude Code (78 messages, 65 KB) or Codex (287 items, 42 KB) sends for
//!   a next turn, as the next request of a session holding the turn before it (two
//!   and three elements back). `decide` is the decision without sessions (what the
//!   proxy did for every request before), `from_scratch` reads it whole and keeps the
//!   session (a conversation's first request, or one that does not continue its
//!   session), `incremental` reads only the new elements.
//! - `continued/{from_scratch,incremental}/claude_code` (compact mode): the same
//!   request when the session's previous one was compacted: forwarded as the
//!   compacted history followed by the new elements, within the budget.
//! - `over_budget/{session,read_and_check}/claude_code`: the same request when the
//!   session's previous one (half as long) was compacted and the continuation is over
//!   the budget again, so the pipeline runs on it (`session`); and the request read
//!   and checked whole (`read_and_check`, check mode without a session): the most a
//!   compaction started from the session's reading instead of the continuation's
//!   text could save.
//!
//! `cargo bench -p cutpoint-proxy --bench decide`

mod common;

use std::time::Duration;

use bytes::Bytes;
use criterion::{BatchSize, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cutpoint::compact::pipeline::Settings;
use cutpoint_proxy::{Compaction, Decision, Mode, Route, Session};

use common::{fixture, previous_turn};

fn compact_mode(budget: u64) -> Mode {
    let mut settings = Settings::new();
    settings.budget = Some(budget);
    Mode::Compact(Box::new(Compaction::new(&settings).expect("a budget")))
}

/// A compact mode and the session in which `next` is continued, incrementally,
/// within the budget: the first budget (a share of `previous`'s tokens) at which
/// `previous` is compacted and `next` continues it.
fn continuing(route: Route, previous: &[u8], next: &[u8]) -> (Mode, Session) {
    let tokens = cutpoint::format::read(
        std::str::from_utf8(previous).expect("UTF-8"),
        route.format(),
        &cutpoint::format::ByteEstimate,
    )
    .expect("a request")
    .live_tokens();
    for share in [50, 60, 70, 80, 90] {
        let mode = compact_mode(tokens * share / 100);
        let (first, Some(session)) = mode.decide_in(route, previous, None) else {
            continue;
        };
        if !matches!(first, Decision::Compacted { .. }) {
            continue;
        }
        let (next_decision, _, incremental) =
            mode.decide_in_traced(route, next, Some(session.clone()));
        if incremental && matches!(next_decision, Decision::Continued { deferred: None, .. }) {
            return (mode, session);
        }
    }
    panic!("no budget continues the session")
}

fn decide(c: &mut Criterion) {
    let requests: [(&str, Route, &str, Bytes); 2] = [
        (
            "claude_code",
            Route::AnthropicMessages,
            "messages",
            fixture("anthropic-request__claude-reliability__python-to-rust-port.json"),
        ),
        (
            "codex",
            Route::OpenAiResponses,
            "input",
            fixture("openai-responses-request__localpush__rollout-12-41-04-parallel7.json"),
        ),
    ];

    let mut group = c.benchmark_group("next_turn");
    let check = Mode::Check;
    for (name, route, key, next) in &requests {
        let route = *route;
        let previous = previous_turn(next, key);
        let (_, session) = check.decide_in(route, &previous, None);
        let session = session.expect("a session");
        // The path each one takes, once, outside the timing.
        let (d, _, incremental) = check.decide_in_traced(route, next, Some(session.clone()));
        assert!(incremental && d == Decision::Forward);
        group.throughput(Throughput::Bytes(next.len() as u64));
        group.bench_with_input(BenchmarkId::new("decide", name), next, |b, next| {
            b.iter(|| check.decide(route, next));
        });
        group.bench_with_input(BenchmarkId::new("from_scratch", name), next, |b, next| {
            b.iter(|| check.decide_in_from_scratch(route, next, Some(&session)));
        });
        group.bench_with_input(BenchmarkId::new("incremental", name), next, |b, next| {
            b.iter_batched(
                || Some(session.clone()),
                |prior| check.decide_in(route, next, prior),
                BatchSize::SmallInput,
            );
        });
    }
    group.finish();

    let mut group = c.benchmark_group("continued");
    let (name, route, key, next) = &requests[0];
    let route = *route;
    let previous = previous_turn(next, key);
    let (mode, session) = continuing(route, &previous, next);
    group.throughput(Throughput::Bytes(next.len() as u64));
    group.bench_with_input(BenchmarkId::new("from_scratch", name), next, |b, next| {
        b.iter(|| mode.decide_in_from_scratch(route, next, Some(&session)));
    });
    group.bench_with_input(BenchmarkId::new("incremental", name), next, |b, next| {
        b.iter_batched(
            || Some(session.clone()),
            |prior| mode.decide_in(route, next, prior),
            BatchSize::SmallInput,
        );
    });
    group.finish();

    let mut group = c.benchmark_group("over_budget");
    let (name, route, key, next) = &requests[0];
    let route = *route;
    let tokens = |body: &[u8]| {
        cutpoint::format::read(
            std::str::from_utf8(body).expect("UTF-8"),
            route.format(),
            &cutpoint::format::ByteEstimate,
        )
        .expect("a request")
        .live_tokens()
    };
    let mut previous = previous_turn(next, key);
    while tokens(&previous) * 2 > tokens(next) {
        previous = previous_turn(&previous, key);
    }
    let (mode, session) = [60, 70, 80, 90]
        .into_iter()
        .find_map(|share| {
            let mode = compact_mode(tokens(&previous) * share / 100);
            let (first, session) = mode.decide_in(route, &previous, None);
            let session = session.filter(|_| matches!(first, Decision::Compacted { .. }))?;
            let (again, _, incremental) = mode.decide_in_traced(route, next, Some(session.clone()));
            (!incremental && matches!(again, Decision::Compacted { .. })).then_some((mode, session))
        })
        .expect("a budget that compacts both turns");
    group.throughput(Throughput::Bytes(next.len() as u64));
    group.bench_with_input(BenchmarkId::new("session", name), next, |b, next| {
        b.iter_batched(
            || Some(session.clone()),
            |prior| mode.decide_in(route, next, prior),
            BatchSize::SmallInput,
        );
    });
    group.bench_with_input(BenchmarkId::new("read_and_check", name), next, |b, next| {
        b.iter(|| check.decide(route, next));
    });
    group.finish();
}

criterion_group! {
    name = benches;
    // Short by default: CI only builds it (`cargo bench --no-run`).
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = decide
}
criterion_main!(benches);
