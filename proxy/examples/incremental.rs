//! A session's next request decided incrementally against reading it whole, timed in
//! one run and interleaved round by round, so that the machine's load weighs on each
//! path alike: for the real next-turn requests of Claude Code and Codex (check mode)
//! and a compacted session's next turn continued (compact mode), ROUNDS rounds of
//! `decide` (no sessions), `from_scratch` (read whole, the session kept) and
//! `incremental`, in turn. Prints p50 and p99 of each. Sans-IO: no sockets.
//!
//! `cargo run --release -p cutpoint-proxy --example incremental [ROUNDS]`

use std::hint::black_box;
use std::time::{Duration, Instant};

use cutpoint::compact::pipeline::Settings;
use cutpoint_proxy::{Compaction, Decision, Mode, Route, Session};

#[path = "../benches/common/mod.rs"]
mod common;

fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort_unstable();
    let rank = ((p * times.len() as f64).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

/// A compact mode in which `next` continues, incrementally within the budget, the
/// session `previous` was compacted in.
fn continuing(route: Route, previous: &[u8], next: &[u8]) -> (Mode, Session) {
    let tokens = cutpoint::format::read(
        std::str::from_utf8(previous).expect("UTF-8"),
        route.format(),
        &cutpoint::format::ByteEstimate,
    )
    .expect("a request")
    .live_tokens();
    for share in [50, 60, 70, 80, 90] {
        let mut settings = Settings::new();
        settings.budget = Some(tokens * share / 100);
        let mode = Mode::Compact(Box::new(Compaction::new(&settings).expect("a budget")));
        let (first, Some(session)) = mode.decide_in(route, previous, None) else {
            continue;
        };
        let (next_decision, _, incremental) =
            mode.decide_in_traced(route, next, Some(session.clone()));
        if matches!(first, Decision::Compacted { .. })
            && incremental
            && matches!(next_decision, Decision::Continued { deferred: None, .. })
        {
            return (mode, session);
        }
    }
    panic!("no budget continues the session")
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(300);
    let claude = common::fixture("anthropic-request__claude-reliability__python-to-rust-port.json");
    let codex =
        common::fixture("openai-responses-request__localpush__rollout-12-41-04-parallel7.json");
    let cases = [
        (
            "claude_code",
            Route::AnthropicMessages,
            "messages",
            &claude,
            false,
        ),
        ("codex", Route::OpenAiResponses, "input", &codex, false),
        (
            "claude_code, compacted",
            Route::AnthropicMessages,
            "messages",
            &claude,
            true,
        ),
    ];
    for (name, route, key, next, compacted) in cases {
        let previous = common::previous_turn(next, key);
        let (mode, session) = match compacted {
            false => {
                let mode = Mode::Check;
                let (_, s) = mode.decide_in(route, &previous, None);
                (mode, s.expect("a session"))
            }
            true => continuing(route, &previous, next),
        };
        let (mut whole, mut scratch, mut warm) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..rounds {
            // Each output is dropped after its timing, as the incremental one is.
            if !compacted {
                let start = Instant::now();
                let out = black_box(mode.decide(route, next));
                whole.push(start.elapsed());
                drop(out);
            }
            let start = Instant::now();
            let out = black_box(mode.decide_in_from_scratch(route, next, Some(&session)));
            scratch.push(start.elapsed());
            drop(out);
            let prior = Some(session.clone());
            let start = Instant::now();
            let out = black_box(mode.decide_in(route, next, prior));
            warm.push(start.elapsed());
            drop(out);
        }
        let us = |d: Duration| d.as_secs_f64() * 1e6;
        let line = |what: &str, t: &mut Vec<Duration>| {
            if t.is_empty() {
                return String::new();
            }
            format!(
                "{what} p50 {:.0} us p99 {:.0} us; ",
                us(percentile(t, 0.5)),
                us(percentile(t, 0.99))
            )
        };
        let ratio = us(percentile(&mut scratch, 0.5)) / us(percentile(&mut warm, 0.5));
        println!(
            "{name} ({} bytes, {rounds} rounds): {}{}{}from scratch / incremental at p50: {ratio:.1}",
            next.len(),
            line("decide", &mut whole),
            line("from_scratch", &mut scratch),
            line("incremental", &mut warm),
        );
    }
}
