//! One pipeline pass (the gentle preset: clear old tool results oldest first, then
//! digest old tool groups, until the log is back under 40% of its budget) on seeded
//! realistic sessions of 10^3 to 10^6 messages, against a straightforward
//! implementation of the same decisions that sums the log's tokens again after every
//! exclusion, as the Agent Framework and LangChain do, in the same run.
//!
//! The budget is 125% of the log, so the gentle stages fire (above 50%) and must
//! reclaim about two thirds of it: the work grows with the log. cutpoint's pass reads
//! the prefix sums, edits sizes in place and replaces all groups in one batch: its
//! time should grow with the log, no faster. The re-summing pass is quadratic: criterion
//! samples it up to 10^4 messages; at 10^5 it is timed once (about a minute); 10^6 would
//! take hours.
//!
//! Run: `cargo bench --bench pipeline`; the ratio is printed at the end.

use std::time::{Duration, Instant};

use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use cutpoint::compact::pipeline::Preset;
use cutpoint::compact::strategy::CLEARED_RESULT_TEXT;
use cutpoint::compact::{
    Entry, Log, Payload, ResultStatus, Unit, estimate_summary_tokens, estimate_tokens, first_line,
};
use cutpoint::testing::synth::{Rng, Session};
use cutpoint::{Record, RecordKind};

/// A session of `messages` messages (a message starts at every unbound record), with
/// tool names, arguments and result text.
fn session(messages: usize) -> Vec<Entry> {
    let mut rng = Rng::new(messages as u64);
    let mut out = Vec::new();
    let mut count = 0;
    for r in Session::new(7) {
        if !r.is_bound_to_previous() {
            if count == messages {
                break;
            }
            count += 1;
        }
        let payload = match r.kind() {
            RecordKind::ToolUse(id) => Payload::Call {
                name: Some("bash".to_owned()),
                arguments: Some(format!(
                    r#"{{"command":"run {id}","n":{}}}"#,
                    rng.range(0, 99)
                )),
            },
            RecordKind::ToolResult(id) => Payload::Result {
                status: Some(ResultStatus::Ok),
                content: Some(format!("{id} ok\nmore")),
            },
            _ => Payload::None,
        };
        out.push(Entry::new(r, payload));
    }
    out
}

/// The straightforward pass: the same decisions as the gentle preset's clear and
/// digest stages (keep the last 8 tool uses and the last 8 tool groups, oldest first,
/// stop at 40% of the budget), with the log's total summed again after every
/// exclusion and every collapse splicing the vector.
fn resumming(mut log: Vec<Entry>, budget: u64) -> Vec<Entry> {
    let target = budget * 2 / 5;
    let total = |log: &[Entry]| log.iter().map(|e| e.record.tokens()).sum::<u64>();
    let placeholder = estimate_tokens(CLEARED_RESULT_TEXT);
    // Clear: results of calls older than the last 8 tool uses (and the last 8 groups).
    let group_starts: Vec<usize> = (0..log.len())
        .filter(|&i| {
            matches!(log[i].record.kind(), RecordKind::Assistant)
                && log
                    .get(i + 1)
                    .is_some_and(|n| matches!(n.record.kind(), RecordKind::ToolUse(_)))
        })
        .collect();
    let floor = group_starts
        .len()
        .checked_sub(8)
        .map_or(0, |k| group_starts[k]);
    let uses: Vec<usize> = (0..log.len())
        .filter(|&i| matches!(log[i].record.kind(), RecordKind::ToolUse(_)))
        .collect();
    let kept_from = uses.len().checked_sub(8).map_or(0, |k| uses[k]).min(floor);
    for i in 1..kept_from {
        if total(&log) <= target {
            return log;
        }
        if matches!(log[i].record.kind(), RecordKind::ToolResult(_))
            && log[i].record.tokens() > placeholder
        {
            log[i].record = log[i].record.clone().with_tokens(placeholder);
        }
    }
    // Digest: each group (assistant message with calls, then its results), oldest
    // first, collapsed into one summary entry.
    let mut i = 1;
    while i < log.len() {
        if total(&log) <= target {
            break;
        }
        let starts_group = matches!(log[i].record.kind(), RecordKind::Assistant)
            && log
                .get(i + 1)
                .is_some_and(|n| matches!(n.record.kind(), RecordKind::ToolUse(_)));
        let remaining = log[i..]
            .iter()
            .filter(|e| matches!(e.record.kind(), RecordKind::Assistant))
            .count();
        if !starts_group || remaining <= 8 {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < log.len() && log[j].record.is_bound_to_previous() {
            j += 1;
        }
        while j < log.len() && matches!(log[j].record.kind(), RecordKind::ToolResult(_)) {
            j += 1;
        }
        let units: Vec<Unit> = log[i..j]
            .iter()
            .filter_map(|e| match (e.record.kind(), &e.payload) {
                (RecordKind::ToolUse(id), Payload::Call { name, arguments }) => Some(Unit {
                    tool: name.clone(),
                    arguments: arguments.clone(),
                    first_line: Some(first_line("ok")),
                    ..Unit::bare(id.clone())
                }),
                _ => None,
            })
            .collect();
        let tokens = estimate_summary_tokens(None, &units);
        let ids = units.iter().map(|u| u.call_id.clone());
        let summary = Entry::new(Record::summary(ids, tokens), Payload::summary(None, units));
        log.splice(i..j, [summary]);
        i += 1;
    }
    log
}

fn pipeline(c: &mut Criterion) {
    let mut group = c.benchmark_group("pipeline_pass");
    group.sample_size(10);
    group.measurement_time(Duration::from_secs(8));
    let mut ratios = Vec::new();
    for &messages in &[1_000usize, 10_000, 100_000, 1_000_000] {
        let entries = session(messages);
        let log = Log::from_entries(entries.iter().cloned()).expect("a valid session");
        let budget = log.tracker().total_tokens() * 5 / 4;
        let preset = Preset::Gentle.pipeline(budget);
        // Check once that both reach the target, and time one pass of each by hand
        // for the ratio (criterion's own numbers are printed above it).
        let mut l = log.clone();
        let t0 = Instant::now();
        let report = preset.run(&mut l);
        let ours = t0.elapsed();
        assert!(
            report.tokens_after <= budget * 2 / 5 + budget / 50,
            "{:?}",
            report.steps
        );
        group.bench_with_input(BenchmarkId::new("cutpoint", messages), &log, |b, log| {
            b.iter_batched(
                || log.clone(),
                |mut l| {
                    preset.run(&mut l);
                    l
                },
                BatchSize::LargeInput,
            )
        });
        if messages <= 100_000 {
            let t0 = Instant::now();
            let out = resumming(entries.clone(), budget);
            let theirs = t0.elapsed();
            let after: u64 = out.iter().map(|e| e.record.tokens()).sum();
            assert!(after <= budget * 2 / 5 + budget / 50);
            ratios.push((messages, ours, theirs));
            // Criterion's ten samples of the quadratic pass at 10^5 would take minutes:
            // that size is timed once, above.
            if messages <= 10_000 {
                group.bench_with_input(
                    BenchmarkId::new("resumming", messages),
                    &entries,
                    |b, entries| {
                        b.iter_batched(
                            || entries.clone(),
                            |e| resumming(e, budget),
                            BatchSize::LargeInput,
                        )
                    },
                );
            }
        } else {
            ratios.push((messages, ours, Duration::ZERO));
        }
    }
    group.finish();
    println!("\none gentle pipeline pass (single timed run each, same process):");
    println!("| messages | cutpoint | re-summing | ratio |");
    println!("|---|---|---|---|");
    for (messages, ours, theirs) in ratios {
        if theirs.is_zero() {
            println!("| {messages} | {ours:.2?} | (not run) | |");
        } else {
            println!(
                "| {messages} | {ours:.2?} | {theirs:.2?} | {:.0}x |",
                theirs.as_secs_f64() / ours.as_secs_f64()
            );
        }
    }
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
