//! Cost per turn as the history grows: one turn appends an assistant message (text and
//! tool calls) and its results to rig's memory, then loads the history the next
//! request sends. rig-memory's policies (behind `PolicyMemory`, which loads the whole
//! backend and applies the policy) against cutpoint's (`CutpointMemory`, which feeds
//! the tracker only the new messages; and `CutpointPolicy` behind `PolicyMemory`, the
//! one-line change). Same generated sessions, same counter; compare the ratios within
//! one run.
//!
//! ```text
//! cargo bench -p cutpoint-rig --bench rig_turn -- --warm-up-time 1 --measurement-time 2
//! CUTPOINT_RIG_SIZES=100000 cargo bench -p cutpoint-rig --bench rig_turn -- --warm-up-time 1 --measurement-time 2
//! ```
//!
//! `CUTPOINT_RIG_SIZES` (comma-separated message counts) replaces the default sizes,
//! 10^3 and 10^4; each sample's setup (a memory of that many messages and its first
//! load) is outside the timing but not free, so larger sizes take minutes.

use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cutpoint_rig::{CutpointMemory, CutpointPolicy, synth};
use futures::executor::block_on;
use rig_core::completion::Message;
use rig_core::id::ConversationId;
use rig_memory::{
    ConversationMemory, HeuristicTokenCounter, InMemoryConversationMemory, PolicyMemory,
    SlidingWindowMemory, TokenWindowMemory,
};

const BUDGET: u64 = 16_000;
/// Turns measured past the starting size before the memory is built again.
const TURNS: usize = 500;

/// A contender: its name and how to make a fresh memory.
type Contender = (&'static str, fn() -> Box<dyn ConversationMemory>);

fn contenders() -> Vec<Contender> {
    vec![
        ("rig-memory TokenWindowMemory", || {
            Box::new(PolicyMemory::new(
                InMemoryConversationMemory::new(),
                TokenWindowMemory::new(BUDGET as usize, HeuristicTokenCounter::default()),
            ))
        }),
        ("rig-memory SlidingWindowMemory(40)", || {
            Box::new(PolicyMemory::new(
                InMemoryConversationMemory::new(),
                SlidingWindowMemory::last_messages(40),
            ))
        }),
        ("cutpoint CutpointMemory", || {
            Box::new(CutpointMemory::new(
                InMemoryConversationMemory::new(),
                BUDGET,
            ))
        }),
        ("cutpoint CutpointPolicy in PolicyMemory", || {
            Box::new(PolicyMemory::new(
                InMemoryConversationMemory::new(),
                CutpointPolicy::new(BUDGET),
            ))
        }),
    ]
}

/// The history's turns after its first `n` messages: (assistant, results) pairs.
fn turns(messages: &[Message], n: usize) -> Vec<Vec<Message>> {
    messages[n..]
        .chunks(2)
        .filter(|c| c.len() == 2)
        .map(<[Message]>::to_vec)
        .collect()
}

/// The history sizes measured: `CUTPOINT_RIG_SIZES` when set, else 10^3 and 10^4.
fn sizes() -> Vec<usize> {
    match std::env::var("CUTPOINT_RIG_SIZES") {
        Ok(v) => v
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .unwrap_or_else(|e| panic!("CUTPOINT_RIG_SIZES: {n:?}: {e}"))
            })
            .collect(),
        Err(_) => vec![1_000, 10_000],
    }
}

fn per_turn(c: &mut Criterion) {
    let mut group = c.benchmark_group("turn");
    group.sample_size(10);
    let id = ConversationId::new("bench");
    for n in sizes() {
        let messages = synth::session(n as u64, n + 2 * TURNS + 8, false);
        let steps = turns(&messages, n);
        for (name, make) in contenders() {
            group.bench_with_input(BenchmarkId::new(name, n), &n, |b, &n| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    let mut done = 0u64;
                    while done < iters {
                        // A memory holding the first n messages, loaded once (a
                        // process's first load), outside the timing.
                        let memory = make();
                        block_on(memory.append(&id, messages[..n].to_vec())).unwrap();
                        block_on(memory.load(&id)).unwrap();
                        for step in steps.iter().take((iters - done) as usize) {
                            let step = step.clone();
                            let start = Instant::now();
                            block_on(memory.append(&id, step)).unwrap();
                            let out = block_on(memory.load(&id)).unwrap();
                            total += start.elapsed();
                            std::hint::black_box(out);
                            done += 1;
                        }
                    }
                    total
                });
            });
        }
    }
    group.finish();
}

criterion_group!(benches, per_turn);
criterion_main!(benches);
