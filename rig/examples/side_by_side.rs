//! rig-memory's policies and cutpoint's, side by side in one process on the same
//! histories (generated sessions of 10^3 and 10^4 messages, each ending with calls in
//! flight, and the real OpenAI Chat transcripts as rig messages), each output judged by
//! one checker (`cutpoint_rig::check`). Prints the markdown table of docs/rig.md.
//!
//! ```text
//! cargo run --release -p cutpoint-rig --example side_by_side
//! ```

use cutpoint_rig::compare::{rows, table};
use cutpoint_rig::synth;
use rig_memory::{HeuristicTokenCounter, TokenCounter};

#[path = "../tests/it/fixtures.rs"]
#[allow(dead_code, unreachable_pub)]
mod fixtures;

fn main() {
    let mut all = Vec::new();
    for (seed, n) in [(31u64, 1_000usize), (32, 10_000)] {
        let messages = synth::session(seed, n, true);
        all.extend(rows(&format!("synthetic {n}"), &messages, 16_000));
    }
    let counter = HeuristicTokenCounter::default();
    for (name, _, messages) in fixtures::openai_chat() {
        let total: u64 = messages.iter().map(|m| counter.count(m) as u64).sum();
        all.extend(rows(&name, &messages, total / 3));
    }
    print!("{}", table(&all));
}
