//! `select_legal_cut`: the tracker at 10^3..10^6 records against the seed's rescan
//! (`cutpoint::reference`) at 10^3..10^4, on the same seeded sessions and targets.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use cutpoint::synth::{Rng, Session};
use cutpoint::{Tracker, reference};
use std::hint::black_box;

/// Seeded random targets across the log, and the seed's default lookback idea: 15% of
/// a typical budget, here a fixed 20k tokens.
fn targets(total: u64, count: usize) -> Vec<u64> {
    let mut rng = Rng::new(99);
    (0..count).map(|_| rng.range(0, total)).collect()
}

const LOOKBACK: u64 = 20_000;

fn query(c: &mut Criterion) {
    let mut group = c.benchmark_group("select_legal_cut");
    for &n in &[1_000usize, 10_000, 100_000, 1_000_000] {
        let records = Session::records(7, n);
        let tracker = Tracker::from_records(records.clone()).expect("valid");
        let ts = targets(tracker.total_tokens(), 1024);
        group.bench_with_input(BenchmarkId::new("tracker", n), &ts, |b, ts| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) % ts.len();
                black_box(tracker.select_legal_cut(ts[i], LOOKBACK).ok())
            })
        });
        if n <= 10_000 {
            group.bench_with_input(BenchmarkId::new("reference", n), &ts, |b, ts| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) % ts.len();
                    black_box(reference::select_legal_cut(&records, ts[i], LOOKBACK).ok())
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, query);
criterion_main!(benches);
