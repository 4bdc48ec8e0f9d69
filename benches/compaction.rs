//! Applying a compaction in place (`Tracker::replace_region`): the cost must follow the
//! removed region, not the log. Each case removes a region of fixed size right after a
//! one-record pinned head, from logs of 10^4 to 10^6 records (realistic seeded
//! sessions); the tracker is cloned outside the timed routine. Flat times across log
//! sizes for one region size, and times that grow with the region, are the claim.
//!
//! Criterion clones a batch of trackers before timing the batch, so each routine runs
//! on a tracker that is cold in the caches: at 10^6 records the few dozen cache lines a
//! compaction touches come from main memory, at 10^4 from L2/L3. That, not work, is why
//! times still rise with the log. The work itself is flat: `examples/compaction_work.rs`
//! counts the instructions of one `replace_region` under callgrind (numbers in the
//! README: the same count at 10^4, 10^5 and 10^6 records).

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use cutpoint::Tracker;
use cutpoint::testing::synth::Session;

fn compaction(c: &mut Criterion) {
    let mut group = c.benchmark_group("replace_region");
    group.sample_size(30);
    for &n in &[10_000usize, 100_000, 1_000_000] {
        let tracker = Tracker::from_records(Session::records(7, n)).expect("valid");
        for &removed in &[100usize, 1_000, 5_000] {
            // The region runs from the pinned head to the legal cut nearest past it.
            let start = tracker
                .legal_cut_at_or_after(1)
                .expect("a legal cut after the head");
            let Some(end) = tracker.legal_cut_at_or_after(start + removed) else {
                continue;
            };
            group.bench_with_input(
                BenchmarkId::new(format!("removed_{removed}"), n),
                &(start, end),
                |b, &(start, end)| {
                    b.iter_batched(
                        || tracker.clone(),
                        |mut t| {
                            t.replace_region(start, end, 500).expect("legal region");
                            // Returned, so criterion drops it outside the timing.
                            t
                        },
                        BatchSize::LargeInput,
                    )
                },
            );
        }
    }
    group.finish();
}

criterion_group!(benches, compaction);
criterion_main!(benches);
