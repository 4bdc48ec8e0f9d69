//! `select_legal_cut` at 10^3..10^7 records of a seeded realistic session, random
//! targets:
//!
//! - `tracker`: the tracker as it is (blocks of 64 `u32` sums under an upper level of
//!   their bases, the legal cuts as a bitmap; see `src/core/index/`);
//! - `sampled`: the same query on the same data through `cutpoint::search`'s
//!   multi-level `SampledIndex` over plain `u64` vectors and a sorted list of cuts (the
//!   earlier prototype);
//! - `sampled_bitmap`: as `sampled`, but the legal cuts as one bit per position (the
//!   largest legal cut at or before the target record is found in the target's word,
//!   or by scanning back word by word): the prototype the tracker's bitmap came from;
//! - `reference`: the seed's rescan (`cutpoint::reference`) at 10^3..10^5, for the
//!   speed-up.
//!
//! The `sampled` and `sampled_bitmap` answers are checked against the tracker's before
//! timing.
//!
//! The `query_latency` group times one query at a time: each target is drawn from a
//! generator inside the loop and made to depend on the previous answer (through a zero
//! the compiler cannot see), so queries cannot overlap and the targets never repeat
//! into warm cache lines; `dram_load` beside it is one dependent random load from a
//! 256 MB random cyclic permutation (`cutpoint::testing::latency`), measured in the
//! same run, so `query_latency / dram_load` is the query's cost in dependent DRAM loads.
//! A tracker whose heap is larger than that chase (10^8 records) gets
//! `dram_load_at_size/N` too, a chase over as much memory as the tracker holds: on a
//! virtual machine a load's cost grows with the memory touched, past every cache.
//!
//! `CUTPOINT_QUERY_SIZES=1000,10000000` limits the sizes built (criterion's filter
//! only skips the timing, not building the logs).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
#[path = "support/sampled.rs"]
#[allow(dead_code, reason = "this bench uses part of the prototype")]
mod sampled;
use cutpoint::Tracker;
use cutpoint::testing::latency::DependentLoads;
use cutpoint::testing::reference;
use cutpoint::testing::synth::{Rng, Session};
use sampled::{SampledIndex, partition_point_from_end};
use std::hint::black_box;

/// Seeded random targets across the log.
fn targets(total: u64, count: usize) -> Vec<u64> {
    let mut rng = Rng::new(99);
    (0..count).map(|_| rng.range(0, total - 1)).collect()
}

/// The seed's lookback, 15% of a budget: here a fixed 20k tokens.
const LOOKBACK: u64 = 20_000;

/// `select_legal_cut` for targets below the total, on `cutpoint::search`.
struct Sampled {
    sums: SampledIndex<u64>,
    cuts: SampledIndex<u32>,
}

impl Sampled {
    fn new(tracker: &Tracker) -> Self {
        let sums = (1..=tracker.len())
            .map(|c| tracker.tokens_before(c).expect("in the log"))
            .collect();
        let cuts = tracker.legal_cuts().map(|c| c as u32).collect();
        Sampled {
            sums: SampledIndex::from_vec(sums),
            cuts: SampledIndex::from_vec(cuts),
        }
    }

    fn select(&self, target: u64, lookback: u64) -> Option<usize> {
        let sums = self.sums.as_slice();
        let t = self.sums.partition_point(|&s| s < target);
        let floor = match sums[t].checked_sub(lookback).filter(|&th| th > 0) {
            None => 0,
            Some(threshold) => {
                (1 + partition_point_from_end(&sums[..t], |&s| s < threshold)).min(t)
            }
        };
        let i = self.cuts.partition_point(|&c| c as usize <= t);
        let best = self.cuts.as_slice()[i - 1] as usize;
        (best >= floor).then_some(best)
    }
}

/// Legal cuts as a bitmap: bit `p` set when cut `p` is legal.
struct CutBits(Vec<u64>);

impl CutBits {
    fn new(tracker: &Tracker) -> Self {
        let mut words = vec![0u64; tracker.len() / 64 + 1];
        for c in tracker.legal_cuts() {
            words[c / 64] |= 1 << (c % 64);
        }
        CutBits(words)
    }

    /// The largest legal cut `<= pos`; cut 0 is always legal, so the scan ends.
    fn at_or_before(&self, pos: usize) -> usize {
        let mut w = pos / 64;
        let mut bits = self.0[w] & (u64::MAX >> (63 - pos % 64));
        while bits == 0 {
            w -= 1;
            bits = self.0[w];
        }
        w * 64 + 63 - bits.leading_zeros() as usize
    }
}

impl Sampled {
    fn select_bitmap(&self, bits: &CutBits, target: u64, lookback: u64) -> Option<usize> {
        let sums = self.sums.as_slice();
        let t = self.sums.partition_point(|&s| s < target);
        let floor = match sums[t].checked_sub(lookback).filter(|&th| th > 0) {
            None => 0,
            Some(threshold) => {
                (1 + partition_point_from_end(&sums[..t], |&s| s < threshold)).min(t)
            }
        };
        let best = bits.at_or_before(t);
        (best >= floor).then_some(best)
    }
}

/// The sizes to build: `CUTPOINT_QUERY_SIZES` (comma-separated) or 10^3..10^7.
fn sizes() -> Vec<usize> {
    match std::env::var("CUTPOINT_QUERY_SIZES") {
        Ok(list) => list
            .split(',')
            .filter_map(|s| s.trim().parse().ok())
            .collect(),
        Err(_) => vec![1_000, 10_000, 100_000, 1_000_000, 10_000_000],
    }
}

fn query(c: &mut Criterion) {
    let mut group = c.benchmark_group("select_legal_cut");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    for n in sizes() {
        let records = Session::records(7, n);
        let tracker = Tracker::from_records(records.clone()).expect("valid");
        let ts = targets(tracker.total_tokens(), 1 << 12);
        let sampled = Sampled::new(&tracker);
        let bits = CutBits::new(&tracker);
        for &t in &ts {
            let want = tracker.select_legal_cut(t, LOOKBACK).ok();
            assert_eq!(sampled.select(t, LOOKBACK), want, "target {t}");
            assert_eq!(
                sampled.select_bitmap(&bits, t, LOOKBACK),
                want,
                "target {t}"
            );
        }
        group.bench_with_input(BenchmarkId::new("tracker", n), &ts, |b, ts| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % ts.len();
                black_box(tracker.select_legal_cut(ts[i], LOOKBACK).ok())
            })
        });
        group.bench_with_input(BenchmarkId::new("sampled", n), &ts, |b, ts| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % ts.len();
                black_box(sampled.select(ts[i], LOOKBACK))
            })
        });
        group.bench_with_input(BenchmarkId::new("sampled_bitmap", n), &ts, |b, ts| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % ts.len();
                black_box(sampled.select_bitmap(&bits, ts[i], LOOKBACK))
            })
        });
        if n <= 100_000 {
            if n == 100_000 {
                // About a millisecond per query: the minimum sample count suffices.
                group.sample_size(10);
            }
            group.bench_with_input(BenchmarkId::new("reference", n), &ts, |b, ts| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % ts.len();
                    black_box(reference::select_legal_cut(&records, ts[i], LOOKBACK).ok())
                })
            });
            group.sample_size(100);
        }
        drop(records);
    }
    group.finish();
}

/// The pointer chase of `dram_load`: far larger than the caches.
const CHASE_BYTES: usize = 256 << 20;

/// One query at a time at fresh random targets, beside one dependent DRAM load.
fn latency(c: &mut Criterion) {
    let mut group = c.benchmark_group("query_latency");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    let chase = DependentLoads::new(CHASE_BYTES, 5);
    group.bench_function("dram_load", |b| {
        let mut at = 0u32;
        b.iter(|| {
            at = chase.step(at);
            at
        })
    });
    drop(chase);
    for n in sizes() {
        let tracker = Tracker::from_records(Session::records(7, n)).expect("valid");
        let total = tracker.total_tokens();
        let zero = black_box(0u64);
        group.bench_function(BenchmarkId::new("tracker", n), |b| {
            let mut rng = Rng::new(42);
            let mut last = 0u64;
            b.iter(|| {
                // `last & zero` is 0, but only at run time: the next target waits for
                // this answer.
                let t = (rng.next_u64() % total) ^ (last & zero);
                let got = tracker.select_legal_cut(t, LOOKBACK);
                last = match got {
                    Ok(c) => c as u64,
                    Err(d) => d.floor as u64,
                };
                last
            })
        });
        // Past the chase's size, one dependent load over as much memory as the
        // tracker holds too: on a virtual machine a load costs more as the memory
        // touched grows, past every cache (docs/performance.md, "The unit").
        let footprint = tracker.heap_bytes();
        if footprint > CHASE_BYTES {
            drop(tracker);
            let chase = DependentLoads::new(footprint, 5);
            group.bench_function(BenchmarkId::new("dram_load_at_size", n), |b| {
                let mut at = 0u32;
                b.iter(|| {
                    at = chase.step(at);
                    at
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, latency, query);
criterion_main!(benches);
