//! Steady-state cost per turn of `CutpointMemory` on a generated session of N messages
//! (default 10^5): one setup (the history appended and loaded once), then 40 turns of
//! an assistant message and its results, each followed by the load the next request
//! sends. Prints the setup time and the mean per turn. Made for profiling (the
//! criterion bench's samples are one turn after a setup each):
//!
//! ```text
//! cargo build --release -p cutpoint-rig --example turn_profile
//! target/release/examples/turn_profile 100000
//! perf record -D 3500 --call-graph dwarf target/release/examples/turn_profile 100000
//! ```

use cutpoint_rig::{CutpointMemory, synth};
use futures::executor::block_on;
use rig_core::id::ConversationId;
use rig_memory::{ConversationMemory, InMemoryConversationMemory};
use std::time::Instant;

fn main() {
    let n: usize = match std::env::args().nth(1) {
        Some(a) => a.parse().unwrap_or_else(|e| panic!("messages: {a:?}: {e}")),
        None => 100_000,
    };
    let turns = 40;
    let messages = synth::session(n as u64, n + 2 * turns + 8, false);
    let id = ConversationId::new("p");
    let memory = CutpointMemory::new(InMemoryConversationMemory::new(), 16_000);
    let t = Instant::now();
    block_on(memory.append(&id, messages[..n].to_vec())).unwrap();
    block_on(memory.load(&id)).unwrap();
    eprintln!("setup {:?}", t.elapsed());
    let t = Instant::now();
    for step in messages[n..].chunks(2).filter(|c| c.len() == 2).take(turns) {
        block_on(memory.append(&id, step.to_vec())).unwrap();
        std::hint::black_box(block_on(memory.load(&id)).unwrap());
    }
    eprintln!("per turn {:?}", t.elapsed() / turns as u32);
}
