//! Appending records: realistic sessions (string call ids) in lenient and strict mode,
//! and records without ids, at 10^3..10^7 records; and the cost of fingerprinting one call id, the per-record work
//! a tool record adds. Inputs are built before timing; each iteration appends the whole
//! log to a fresh tracker, so throughput is records per second of `append` alone
//! (including dropping the ids the tracker no longer needs, which a caller pays too).
//! The filled tracker and the emptied input vector are returned from the timed routine,
//! so criterion drops them outside the clock: freeing hundreds of MB at 10^7 is not
//! part of appending (earlier runs timed it).

use std::hash::BuildHasher;
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use cutpoint::testing::synth::Session;
use cutpoint::{Mode, Tracker};
use std::hint::black_box;

const SIZES: [usize; 5] = [1_000, 10_000, 100_000, 1_000_000, 10_000_000];

fn append(c: &mut Criterion) {
    let mut group = c.benchmark_group("append");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for n in SIZES {
        if n >= 1_000_000 {
            // One iteration takes 0.1-1 s here: fewer samples, same statistics.
            group.sample_size(10);
        }
        group.throughput(Throughput::Elements(n as u64));
        let realistic = Session::records(7, n);
        group.bench_function(format!("realistic/{n}"), |b| {
            b.iter_batched(
                || realistic.clone(),
                |mut records| {
                    let mut t = Tracker::new();
                    for r in records.drain(..) {
                        t.append(r).expect("valid");
                    }
                    black_box(t.legal_cut_count());
                    (t, records)
                },
                BatchSize::PerIteration,
            )
        });
        // Strict mode checks pairing at admission: the id's fingerprint is computed once
        // per append and shared by admission and the call book (it was computed twice).
        group.bench_function(format!("realistic_strict/{n}"), |b| {
            b.iter_batched(
                || realistic.clone(),
                |mut records| {
                    let mut t = Tracker::new().in_mode(Mode::Strict);
                    for r in records.drain(..) {
                        t.append(r).expect("valid");
                    }
                    black_box(t.legal_cut_count());
                    (t, records)
                },
                BatchSize::PerIteration,
            )
        });
        drop(realistic);
        group.bench_function(format!("no_ids/{n}"), |b| {
            // Per iteration, so each tracker is freed (outside the clock) before the
            // next starts and its memory is reused, as a long-running agent process
            // reuses it; `iter_with_large_drop` keeps a whole sample's trackers alive,
            // and appending then measures the kernel handing out fresh pages.
            b.iter_batched(
                || (),
                |()| {
                    let mut t = Tracker::new();
                    for i in 0..n as u64 {
                        let r = Session::plain_record(i);
                        t.append(r).expect("valid");
                    }
                    black_box(t.legal_cut_count());
                    t
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

/// One call id's fingerprint: what `CallBook` does today (two seeded passes of
/// foldhash's quality hash) against one seeded pass of a 128-bit hash (xxh3-128), on
/// the ids of a realistic session (30 bytes, `toolu_` + 24 characters).
fn fingerprint(c: &mut Criterion) {
    let ids: Vec<String> = Session::records(7, 20_000)
        .iter()
        .filter_map(|r| r.call_id().map(|id| id.to_string()))
        .take(4096)
        .collect();
    let mut group = c.benchmark_group("fingerprint");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    group.throughput(Throughput::Elements(ids.len() as u64));
    let seeds = [0x1234_5678_9abc_def0_u64, 0x0fed_cba9_8765_4321];
    group.bench_function("two_foldhash_quality", |b| {
        let s0 = foldhash::quality::FixedState::with_seed(seeds[0]);
        let s1 = foldhash::quality::FixedState::with_seed(seeds[1]);
        b.iter(|| {
            let mut acc = 0u64;
            for id in &ids {
                acc ^= s0.hash_one(id.as_str()) ^ s1.hash_one(id.as_str()).rotate_left(7);
            }
            black_box(acc)
        })
    });
    group.bench_function("one_foldhash_quality", |b| {
        let s0 = foldhash::quality::FixedState::with_seed(seeds[0]);
        b.iter(|| {
            let mut acc = 0u64;
            for id in &ids {
                acc ^= s0.hash_one(id.as_str());
            }
            black_box(acc)
        })
    });
    group.bench_function("xxh3_128", |b| {
        b.iter(|| {
            let mut acc = 0u128;
            for id in &ids {
                acc ^= xxhash_rust::xxh3::xxh3_128_with_seed(id.as_bytes(), seeds[0]);
            }
            black_box(acc)
        })
    });
    group.finish();
}

criterion_group!(benches, append, fingerprint);
criterion_main!(benches);
