//! One `Tracker::replace_region` on a realistic session of N records, for counting the
//! instructions it executes (a deterministic measure, unlike time on a shared machine):
//!
//! ```sh
//! cargo build --release --example compaction_work
//! valgrind --tool=callgrind --toggle-collect='*Tracker*replace_regions*' \
//!     target/release/examples/compaction_work 1000000 100
//! ```
//!
//! The region starts at the first legal cut after a one-record pinned head and ends at
//! the first legal cut at least `removed` records later, as in `benches/compaction.rs`.

use cutpoint::Tracker;
use cutpoint::testing::synth::Session;

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let removed: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(100);
    let mut tracker = match Tracker::from_records(Session::records(7, n)) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("generated session refused: {e}");
            std::process::exit(1);
        }
    };
    let Some(start) = tracker.legal_cut_at_or_after(1) else {
        eprintln!("no legal cut after the head");
        std::process::exit(1);
    };
    let Some(end) = tracker.legal_cut_at_or_after(start + removed) else {
        eprintln!("no legal cut {removed} records after {start}");
        std::process::exit(1);
    };
    if let Err(e) = tracker.replace_region(start, end, 500) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    println!(
        "replaced records {start}..{end} of {n}: {} records left",
        tracker.len()
    );
}
