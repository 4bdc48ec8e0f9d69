//! `cutpoint bench`: measure this machine on a generated realistic session, so a user
//! can check the README's performance table on their own hardware.
//!
//! Wall-clock timings of whole loops (not criterion's statistics): the best of three
//! runs for the append rates at up to 10^6 records, one run above; query latencies are
//! means over seeded random targets. `cargo bench` gives the careful numbers.

use std::hint::black_box;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cutpoint::Tracker;
use cutpoint::testing::reference;
use cutpoint::testing::synth::{Rng, Session};

/// Arguments of `cutpoint bench`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// Records in the generated session (append rate, query latency and memory are
    /// measured at this size).
    #[arg(long, value_name = "N", default_value_t = 1_000_000,
          value_parser = clap::value_parser!(u64).range(1..=cutpoint::MAX_RECORDS as u64))]
    records: u64,
    /// Records for the comparison with the specification's rescan, whose queries cost
    /// O(records x window): keep it small.
    #[arg(long, value_name = "N", default_value_t = 100_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    reference_records: u64,
    /// Seed of the generated session.
    #[arg(long, default_value_t = 7)]
    seed: u64,
}

/// The lookback of every query: 20k tokens, about 15% of a large budget.
const LOOKBACK: u64 = 20_000;
/// Tracker queries timed per size.
const QUERIES: usize = 100_000;

pub(crate) fn run(args: Args) -> ExitCode {
    match measure(&args) {
        Ok(report) => {
            // A closed stdout (`| head`) is not worth a panic.
            let _ = io::stdout().lock().write_all(report.as_bytes());
            ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("cutpoint: bench: {message}");
            ExitCode::FAILURE
        }
    }
}

fn measure(args: &Args) -> Result<String, String> {
    let n = usize::try_from(args.records).map_err(|_| "--records too large".to_owned())?;
    let records = Session::records(args.seed, n);
    let runs = if n <= 1_000_000 { 3 } else { 1 };

    let mut report = String::new();
    let mut line = |label: &str, value: String| {
        report.push_str(&format!("{label:<44}{value}\n"));
    };

    // Append, realistic: clone outside the clock, keep the fastest run.
    let mut best = Duration::MAX;
    let mut tracker = Tracker::new();
    for _ in 0..runs {
        let input = records.clone();
        let start = Instant::now();
        let mut t = Tracker::new();
        for (at, record) in input.into_iter().enumerate() {
            t.append(record)
                .map_err(|e| format!("generated record {at} refused: {e}"))?;
        }
        best = best.min(start.elapsed());
        tracker = t;
    }
    let calls = tracker.completed_calls() + tracker.pending_count();
    line(
        "session",
        format!(
            "{n} records (seed {}), {calls} calls, {} legal cuts, {} tokens",
            args.seed,
            tracker.legal_cut_count(),
            tracker.total_tokens()
        ),
    );
    line("append, realistic (string call ids)", rate(n, best));

    let mut best = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        let mut t = Tracker::new();
        for i in 0..n as u64 {
            let r = Session::plain_record(i);
            t.append(r)
                .map_err(|e| format!("record {i} without id refused: {e}"))?;
        }
        black_box(t.len());
        best = best.min(start.elapsed());
    }
    line("append, without call ids", rate(n, best));

    let per_query = tracker_query_ns(&tracker, args.seed);
    line(
        &format!("select_legal_cut at {n} records"),
        format!("{per_query:.0} ns/query (mean over {QUERIES} random targets)"),
    );
    line(
        "memory (Tracker::heap_bytes)",
        format!("{:.1} bytes/record", tracker.heap_bytes() as f64 / n as f64),
    );
    drop(tracker);

    // The reference, on a prefix small enough for its O(n x window) queries.
    let m = n.min(args.reference_records as usize);
    let prefix = &records[..m];
    let small = Tracker::from_records(prefix.iter().cloned())
        .map_err(|e| format!("generated prefix refused: {e}"))?;
    let fast = tracker_query_ns(&small, args.seed);
    let targets = random_targets(small.total_tokens(), args.seed, 1 << 10);
    let start = Instant::now();
    let mut done = 0;
    while done < targets.len() && (done < 10 || start.elapsed() < Duration::from_secs(1)) {
        black_box(reference::select_legal_cut(prefix, targets[done], LOOKBACK).ok());
        done += 1;
    }
    let slow = start.elapsed().as_nanos() as f64 / done as f64;
    line(
        &format!("reference rescan at {m} records"),
        format!(
            "{} per query against {fast:.0} ns: {:.0}x faster",
            human_ns(slow),
            slow / fast
        ),
    );
    Ok(report)
}

/// Mean nanoseconds of `select_legal_cut` over seeded random targets.
fn tracker_query_ns(tracker: &Tracker, seed: u64) -> f64 {
    let targets = random_targets(tracker.total_tokens(), seed, QUERIES);
    let start = Instant::now();
    for &t in &targets {
        black_box(tracker.select_legal_cut(t, LOOKBACK).ok());
    }
    start.elapsed().as_nanos() as f64 / targets.len() as f64
}

fn random_targets(total: u64, seed: u64, count: usize) -> Vec<u64> {
    let mut rng = Rng::new(seed ^ 0x7a46_e7a5);
    (0..count)
        .map(|_| rng.range(0, total.saturating_sub(1)))
        .collect()
}

fn rate(n: usize, took: Duration) -> String {
    let secs = took.as_secs_f64().max(1e-9);
    format!(
        "{:.1} M records/s ({:.1} ns/record)",
        n as f64 / secs / 1e6,
        secs * 1e9 / n as f64
    )
}

fn human_ns(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.1} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}
