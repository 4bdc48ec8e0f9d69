//! Appending records: realistic sessions (string call ids) and records without ids.
//! Inputs are built before timing; each iteration appends the whole log to a fresh
//! tracker, so throughput is records per second of `append` alone.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use cutpoint::synth::Session;
use cutpoint::{Record, Tracker};
use std::hint::black_box;

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    for &n in &[1_000usize, 100_000, 1_000_000] {
        group.throughput(Throughput::Elements(n as u64));
        let realistic = Session::records(7, n);
        group.bench_function(format!("realistic/{n}"), |b| {
            b.iter_batched(
                || realistic.clone(),
                |records| {
                    let mut t = Tracker::new();
                    for r in records {
                        t.append(r).expect("valid");
                    }
                    black_box(t.legal_cut_count())
                },
                BatchSize::LargeInput,
            )
        });
        group.bench_function(format!("no_ids/{n}"), |b| {
            b.iter(|| {
                let mut t = Tracker::new();
                for i in 0..n as u64 {
                    let r = if i % 2 == 0 {
                        Record::user(i % 500)
                    } else {
                        Record::assistant(i % 700)
                    };
                    t.append(r).expect("valid");
                }
                black_box(t.legal_cut_count())
            })
        });
    }
    group.finish();
}

criterion_group!(benches, append);
criterion_main!(benches);
