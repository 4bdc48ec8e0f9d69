//! Streaming records as events: each record of a realistic session is opened, grown by
//! four deltas and closed (six events), straight into a `Tracker` and through the
//! `stream` feature's `SharedTracker` (an uncontended lock per event). Inputs are built
//! before timing; throughput is events per second.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use cutpoint::testing::synth::Session;
use cutpoint::{Event, Record, Tracker};
use std::hint::black_box;

/// The session's records as events: open with no tokens, four deltas, close.
fn events(n: usize) -> Vec<Event> {
    let mut out = Vec::with_capacity(n * 6);
    for r in Session::records(7, n) {
        let tokens = r.tokens();
        let open = Record::new(r.kind().clone(), 0);
        out.push(Event::Opened(if r.is_bound_to_previous() {
            open.bound_to_previous()
        } else {
            open
        }));
        for k in 0..4 {
            out.push(Event::Delta {
                tokens: tokens / 4 + u64::from(k == 3) * (tokens % 4),
            });
        }
        out.push(Event::Closed);
    }
    out
}

fn stream_events(c: &mut Criterion) {
    let mut group = c.benchmark_group("events");
    for &n in &[1_000usize, 100_000] {
        let input = events(n);
        group.throughput(Throughput::Elements(input.len() as u64));
        group.bench_function(format!("tracker/{n}_records"), |b| {
            b.iter_batched(
                || input.clone(),
                |events| {
                    let mut t = Tracker::new();
                    for e in events {
                        t.handle(e).expect("valid");
                    }
                    black_box(t.legal_cut_count())
                },
                BatchSize::LargeInput,
            )
        });
        #[cfg(feature = "stream")]
        group.bench_function(format!("shared/{n}_records"), |b| {
            b.iter_batched(
                || input.clone(),
                |events| {
                    let shared = cutpoint::stream::Shared::<Tracker>::default();
                    for e in events {
                        shared.handle(e).expect("valid");
                    }
                    black_box(shared.read(Tracker::legal_cut_count))
                },
                BatchSize::LargeInput,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, stream_events);
criterion_main!(benches);
