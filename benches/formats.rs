//! Reading real agent transcripts (Claude Code session JSONL, Codex rollout JSONL) into
//! messages and records, against serde_json's own parse of the same bytes in the same
//! run: every line into a `serde_json::Value` (what a naive reader does) and every line
//! skipped as `IgnoredAny` (the floor: tokenizing without building anything).
//! Throughput is bytes per second of the input.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use cutpoint::format::{self, ByteEstimate, Format};
use serde::de::IgnoredAny;
use std::hint::black_box;

const FIXTURES: &[(&str, Format)] = &[
    (
        "claude-code__spotter__4d5611e5-main.jsonl",
        Format::ClaudeCode,
    ),
    (
        "codex__localpush__rollout-12-54-34-compacted.jsonl",
        Format::CodexRollout,
    ),
];

fn read_fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/transcripts/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn formats(c: &mut Criterion) {
    let mut group = c.benchmark_group("read_transcript");
    for &(name, fmt) in FIXTURES {
        let text = read_fixture(name);
        let short = fmt.name();
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("cutpoint/{short}"), |b| {
            b.iter(|| {
                let t = format::read(black_box(&text), fmt, &ByteEstimate).expect("fixture reads");
                black_box(t.total_tokens())
            })
        });
        group.bench_function(format!("serde_json_value/{short}"), |b| {
            b.iter(|| {
                let mut n = 0usize;
                for line in black_box(&text).lines().filter(|l| !l.trim().is_empty()) {
                    let v: serde_json::Value = serde_json::from_str(line).expect("valid JSON");
                    n += v.is_object() as usize;
                }
                n
            })
        });
        group.bench_function(format!("serde_json_ignored/{short}"), |b| {
            b.iter(|| {
                for line in black_box(&text).lines().filter(|l| !l.trim().is_empty()) {
                    let _: IgnoredAny = serde_json::from_str(line).expect("valid JSON");
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, formats);
criterion_main!(benches);
