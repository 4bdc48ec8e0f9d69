//! `select_legal_cut` at 10^3..10^7 records of a seeded realistic session, random
//! targets:
//!
//! - `tracker`: the tracker as it is (three binary searches: target record, lookback
//!   floor, legal cut);
//! - `sampled`: the same query on the same data through `cutpoint::search` (sampled
//!   index for the target record and the legal cut, a gallop back from the target for
//!   the floor): what the tracker will cost once its index uses them;
//! - `reference`: the seed's rescan (`cutpoint::reference`) at 10^3..10^5, for the
//!   speed-up.
//!
//! The `sampled` answers are checked against the tracker's before timing.

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cutpoint::search::{SampledIndex, partition_point_from_end};
use cutpoint::synth::{Rng, Session};
use cutpoint::{Tracker, reference};
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

fn query(c: &mut Criterion) {
    let mut group = c.benchmark_group("select_legal_cut");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    for n in [1_000usize, 10_000, 100_000, 1_000_000, 10_000_000] {
        let records = Session::records(7, n);
        let tracker = Tracker::from_records(records.clone()).expect("valid");
        let ts = targets(tracker.total_tokens(), 1 << 12);
        let sampled = Sampled::new(&tracker);
        for &t in &ts {
            assert_eq!(
                sampled.select(t, LOOKBACK),
                tracker.select_legal_cut(t, LOOKBACK).ok(),
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

criterion_group!(benches, query);
criterion_main!(benches);
