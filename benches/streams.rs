//! Live stream decoding (`stream::decode::Decoder`) per provider, on the recorded
//! streams of `tests/fixtures/streams/` (the error streams left out), against
//! serde_json parsing the same `data:` payloads into a `serde_json::Value` (what a
//! naive decoder does before any framing or assembly), in the same run; and decoded
//! items fed into a `Tracker` (events per second). Throughput is bytes of the
//! recordings for both decode groups, so their ratio is the decoder's speed relative
//! to serde_json's.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cutpoint::Tracker;
use cutpoint::stream::decode::{Decoder, Feed, StreamFormat};
use serde_json::value::RawValue;
use std::hint::black_box;

/// The recordings of `format`, without the error streams, each `copies` times.
fn recordings(format: StreamFormat) -> Vec<Vec<u8>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/streams");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .expect("the fixtures")
        .map(|e| {
            e.expect("an entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|n| n.starts_with(&format!("{}__", format.name())) && !n.contains("error"))
        .collect();
    names.sort();
    names
        .iter()
        .map(|n| std::fs::read(dir.join(n)).expect("readable"))
        .collect()
}

/// The JSON payloads of a recording: SSE `data:` lines, JSON lines, or the elements
/// of a JSON array.
fn payloads(bytes: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(bytes).expect("UTF-8");
    if text.trim_start().starts_with('[') {
        let items: Vec<Box<RawValue>> = serde_json::from_str(text).expect("a JSON array");
        return items.into_iter().map(|r| r.get().to_owned()).collect();
    }
    text.lines()
        .map(str::trim)
        .filter_map(|l| {
            l.strip_prefix("data:")
                .map(str::trim)
                .or(l.starts_with('{').then_some(l))
        })
        .filter(|d| *d != "[DONE]")
        .map(str::to_owned)
        .collect()
}

fn decode(format: StreamFormat, bytes: &[u8]) -> usize {
    let mut d = Decoder::new(format);
    d.push(bytes);
    d.finish();
    let mut n = 0;
    while let Ok(Some(item)) = d.next() {
        n += usize::from(item.event.is_some());
    }
    n
}

fn streams(c: &mut Criterion) {
    for format in StreamFormat::ALL {
        let recs = recordings(format);
        let bytes: u64 = recs.iter().map(|r| r.len() as u64).sum();
        let data: Vec<Vec<String>> = recs.iter().map(|r| payloads(r)).collect();
        let events: usize = recs.iter().map(|r| decode(format, r)).sum();
        let short = format.name();

        let mut group = c.benchmark_group(format!("stream_decode/{short}"));
        group.throughput(Throughput::Bytes(bytes));
        group.bench_function("cutpoint", |b| {
            b.iter(|| {
                recs.iter()
                    .map(|r| decode(format, black_box(r)))
                    .sum::<usize>()
            })
        });
        group.bench_function("serde_json_value", |b| {
            b.iter(|| {
                let mut n = 0usize;
                for rec in &data {
                    for p in rec {
                        let v: serde_json::Value =
                            serde_json::from_str(black_box(p)).expect("JSON");
                        n += usize::from(v.is_object());
                    }
                }
                n
            })
        });
        group.finish();

        let mut group = c.benchmark_group(format!("stream_events/{short}"));
        group.throughput(Throughput::Elements(events as u64));
        group.bench_function("decode_into_tracker", |b| {
            b.iter(|| {
                let mut total = 0u64;
                for r in &recs {
                    let mut d = Decoder::new(format);
                    let mut t = Tracker::new();
                    d.push(black_box(r));
                    d.finish();
                    while let Ok(Some(item)) = d.next() {
                        let _ = t.feed(&item);
                    }
                    total += t.total_tokens();
                }
                total
            })
        });
        group.finish();
    }
}

criterion_group!(benches, streams);
criterion_main!(benches);
