//! `cutpoint bench`: measure this machine on a generated realistic session, so a user
//! can check the README's performance table on their own hardware.
//!
//! Wall-clock timings of whole loops (not criterion's statistics): the best of three
//! runs for the append rates at up to 10^6 records, one run above; query latencies are
//! means over seeded random targets, at every power of ten up to the session, and also
//! as a multiple of one dependent DRAM load measured in the same run (a pointer chase
//! over a 256 MB random cyclic permutation, `--chase-mib`; a session whose tracker is
//! larger is also given in loads of a chase as large as its heap, since on a virtual
//! machine a load costs more as the memory touched grows). The input is generated in
//! batches outside the clock, so `--records 100000000` needs only the tracker's memory
//! (about 1.2 GB) and one batch. `cargo bench` gives the careful numbers.

use std::hint::black_box;
use std::io::{self, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use cutpoint::testing::latency::DependentLoads;
use cutpoint::testing::reference;
use cutpoint::testing::synth::{Rng, Session};
use cutpoint::{Limits, Record, Tracker};

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
    /// Memory the pointer chase that measures one dependent load runs over, in MiB:
    /// larger than this machine's caches. A session whose tracker is larger gets a
    /// second chase over as much memory as the tracker holds.
    #[arg(long, value_name = "MIB", default_value_t = 256,
          value_parser = clap::value_parser!(u64).range(1..=65_536))]
    chase_mib: u64,
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

/// Records generated per batch while appending: generation stays outside the clock
/// and the input never has to fit in memory at once (10^8 records of input would be
/// several GB).
const BATCH: usize = 1 << 20;

fn measure(args: &Args) -> Result<String, String> {
    let n = usize::try_from(args.records).map_err(|_| "--records too large".to_owned())?;
    let chase_bytes = (args.chase_mib as usize) << 20;
    let runs = if n <= 1_000_000 { 3 } else { 1 };

    let mut report = String::new();
    let mut line = |label: &str, value: String| {
        report.push_str(&format!("{label:<44}{value}\n"));
    };

    // One dependent DRAM load, measured now: the unit the query is reported in.
    let load_ns = dependent_load_ns(chase_bytes, args.seed);
    line(
        "one dependent DRAM load",
        format!(
            "{load_ns:.0} ns (pointer chase over a {} MB random cycle)",
            args.chase_mib
        ),
    );

    // Append, realistic: generated in batches outside the clock, fastest run kept.
    // The generated session is trusted input; the default records cap (2^24) would
    // refuse `--records 100000000`.
    let mut best = Duration::MAX;
    let mut tracker = Tracker::with_limits(Limits::unbounded());
    for _ in 0..runs {
        let mut session = Session::new(args.seed);
        let mut t = Tracker::with_limits(Limits::unbounded());
        let mut took = Duration::ZERO;
        let mut at = 0;
        while at < n {
            let batch: Vec<Record> = session.by_ref().take(BATCH.min(n - at)).collect();
            let start = Instant::now();
            for record in batch {
                t.append(record)
                    .map_err(|e| format!("generated record {at} refused: {e}"))?;
                at += 1;
            }
            took += start.elapsed();
        }
        best = best.min(took);
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
    line(
        "memory (Tracker::heap_bytes)",
        format!("{:.1} bytes/record", tracker.heap_bytes() as f64 / n as f64),
    );

    // The query at every power of ten up to the session, then at the session.
    let mut sizes: Vec<usize> = std::iter::successors(Some(1_000usize), |s| s.checked_mul(10))
        .take_while(|&s| s < n)
        .collect();
    sizes.push(n);
    let mut session_query_ns = 0.0;
    for &size in &sizes {
        let (ns, overlapped) = if size == n {
            (
                query_latency_ns(&tracker, args.seed),
                tracker_query_ns(&tracker, args.seed),
            )
        } else {
            let small = Tracker::from_records(Session::new(args.seed).take(size))
                .map_err(|e| format!("generated prefix refused: {e}"))?;
            (
                query_latency_ns(&small, args.seed),
                tracker_query_ns(&small, args.seed),
            )
        };
        if size == n {
            session_query_ns = ns;
        }
        line(
            &format!("select_legal_cut at {size} records"),
            format!(
                "{ns:.0} ns/query = {:.2} DRAM loads (one at a time); {overlapped:.0} ns back to back",
                ns / load_ns
            ),
        );
    }
    // A session larger than the chase: one dependent load over as much memory as the
    // tracker holds, too, measured after its queries (so it cannot disturb them). On
    // a virtual machine a load costs more as the memory touched grows, past any
    // cache (the guest's and the host's page tables are walked for each), so the
    // query at the session's size is also given in loads of that size: the unit's
    // own growth, told apart from the query's.
    let footprint = tracker.heap_bytes();
    if footprint > chase_bytes {
        let unit = dependent_load_ns(footprint, args.seed);
        line(
            "one dependent load at the session's size",
            format!(
                "{unit:.0} ns (pointer chase over {} MB, the tracker's heap)",
                footprint >> 20
            ),
        );
        line(
            &format!("select_legal_cut at {n} records"),
            format!("{:.2} loads of the session's size", session_query_ns / unit),
        );
    }
    drop(tracker);

    let mut best = Duration::MAX;
    for _ in 0..runs {
        let start = Instant::now();
        let mut t = Tracker::with_limits(Limits::unbounded());
        for i in 0..n as u64 {
            let r = Session::plain_record(i);
            t.append(r)
                .map_err(|e| format!("record {i} without id refused: {e}"))?;
        }
        black_box(t.len());
        best = best.min(start.elapsed());
    }
    line("append, without call ids", rate(n, best));

    // The reference, on a prefix small enough for its O(n x window) queries.
    let m = n.min(args.reference_records as usize);
    let prefix: Vec<Record> = Session::new(args.seed).take(m).collect();
    let small = Tracker::from_records(prefix.iter().cloned())
        .map_err(|e| format!("generated prefix refused: {e}"))?;
    let fast = tracker_query_ns(&small, args.seed);
    let targets = random_targets(small.total_tokens(), args.seed, 1 << 10);
    let start = Instant::now();
    let mut done = 0;
    while done < targets.len() && (done < 10 || start.elapsed() < Duration::from_secs(1)) {
        black_box(reference::select_legal_cut(&prefix, targets[done], LOOKBACK).ok());
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

/// Nanoseconds of one dependent load over `bytes` of memory: a pointer chase built,
/// followed 2 million steps, and freed. **O(bytes)**.
fn dependent_load_ns(bytes: usize, seed: u64) -> f64 {
    DependentLoads::new(bytes, seed).ns_per_load(2_000_000)
}

/// Mean nanoseconds of `select_legal_cut` over seeded random targets, back to back
/// (independent queries may overlap in the CPU).
fn tracker_query_ns(tracker: &Tracker, seed: u64) -> f64 {
    let targets = random_targets(tracker.total_tokens(), seed, QUERIES);
    let start = Instant::now();
    for &t in &targets {
        black_box(tracker.select_legal_cut(t, LOOKBACK).ok());
    }
    start.elapsed().as_nanos() as f64 / targets.len() as f64
}

/// Mean nanoseconds of `select_legal_cut` one at a time: each target drawn in the loop
/// (never repeating into warm lines) and made to wait for the previous answer through
/// a zero the compiler cannot see, so queries cannot overlap: the latency, comparable
/// with one dependent load.
fn query_latency_ns(tracker: &Tracker, seed: u64) -> f64 {
    let total = tracker.total_tokens().max(1);
    let zero = black_box(0u64);
    let mut rng = Rng::new(seed ^ 0x51ed_270b);
    let mut last = 0u64;
    let start = Instant::now();
    for _ in 0..QUERIES {
        let t = (rng.next_u64() % total) ^ (last & zero);
        last = match tracker.select_legal_cut(t, LOOKBACK) {
            Ok(c) => c as u64,
            Err(d) => d.floor as u64,
        };
    }
    let took = start.elapsed();
    black_box(last);
    took.as_nanos() as f64 / QUERIES as f64
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
