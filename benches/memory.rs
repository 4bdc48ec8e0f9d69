//! Heap bytes per record, counted by a wrapping global allocator (`stats_alloc`), at
//! 10^3..10^7 records of a seeded realistic session; and `Tracker::heap_bytes`, the
//! tracker's own estimate, beside it. Not a criterion bench: memory is a count, not a
//! timing. `cargo bench --bench memory` prints one line per size.
//!
//! The session is generated inside the counted region and dropped before the count is
//! read, so the net bytes left are exactly what the tracker holds (its vectors, its
//! hash tables and the ids of calls still pending).

use std::alloc::System;

use cutpoint::Tracker;
use cutpoint::testing::synth::Session;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

fn main() {
    // `cargo bench` passes `--bench`; a size list may follow, e.g. `-- 1000000`.
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1_000, 10_000, 100_000, 1_000_000, 10_000_000]
    } else {
        sizes
    };
    println!(
        "{:>10} {:>14} {:>12} {:>14} {:>9} {:>11} {:>10}",
        "records",
        "counted bytes",
        "bytes/record",
        "heap_bytes()",
        "estimate",
        "legal cuts",
        "calls"
    );
    for n in sizes {
        let region = Region::new(GLOBAL);
        let mut session = Session::new(7);
        let mut tracker = Tracker::new();
        for record in session.by_ref().take(n) {
            if let Err(e) = tracker.append(record) {
                eprintln!("memory bench: generated record refused: {e}");
                std::process::exit(1);
            }
        }
        drop(session);
        let stats = region.change();
        // stats_alloc already folds reallocations into these two (growth into
        // `bytes_allocated`, shrinking into `bytes_deallocated`).
        let counted = stats.bytes_allocated as i64 - stats.bytes_deallocated as i64;
        let estimate = tracker.heap_bytes() as i64;
        println!(
            "{:>10} {:>14} {:>12.2} {:>14} {:>8.1}% {:>11} {:>10}",
            n,
            counted,
            counted as f64 / n as f64,
            estimate,
            100.0 * (estimate - counted) as f64 / counted as f64,
            tracker.legal_cut_count(),
            tracker.completed_calls() + tracker.pending_count(),
        );
        drop(tracker);
    }
}
