//! Compaction strategies and pipelines on arbitrary logs: records (thinking, calls and
//! results with payloads, bound records, repeated and stray ids) interleaved with
//! strategy steps and pipeline runs under arbitrary goals, floors and presets, and
//! dead calls closed. After each step: no condition that held breaks, every call id is
//! still there unless truncate named it, the floors' records are untouched, a repeated
//! step changes nothing, a no-progress answer changed nothing, and the log (tracker
//! edited in place, shape) equals one rebuilt from its entries.
//!
//! Run: `cargo +nightly fuzz run pipeline` (from the repository root).
#![no_main]

use std::collections::BTreeSet;

use arbitrary::Arbitrary;
use cutpoint::compact::pipeline::{Preset, Progress, Step};
use cutpoint::compact::strategy::{
    Clear, ClearInputs, ClearThinking, Digest, Floors, Goal, LedgerOnly, Slide, Strategy,
    Summarize, Truncate,
};
use cutpoint::compact::{Age, Entry, Log, Options, Payload, Report, ResultStatus, validate};
use cutpoint::testing::Observe;
use cutpoint::{CallId, Record, RecordKind};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    User(u16),
    Assistant(u16, bool, Option<bool>),
    Use(u8, u16, bool, u8),
    Result(u8, u16, bool, bool),
    Step {
        strategy: u8,
        keep: u8,
        target: Option<u32>,
        keep_head: u8,
        min_turns: u8,
        min_groups: u8,
    },
    Pipeline {
        preset: u8,
        budget: u32,
        twice: bool,
    },
    CloseDead(u8),
}

fn id(n: u8) -> String {
    format!("call_{}", n % 24)
}

fn bind(record: Record, bound: bool) -> Record {
    if bound {
        record.bound_to_previous()
    } else {
        record
    }
}

/// Violation kinds by the specification's condition they break.
const CONDITIONS: [&[&str]; 4] = [
    &["unanswered-call", "pending-at-end"],
    &["orphan-result", "duplicate-result", "duplicate-call"],
    &["result-before-use", "result-after-next-turn"],
    &["argument-loss"],
];

fn check(log: &Log) -> Report {
    validate(log.entries(), Options::allowing_pending())
}

fn ids(log: &Log) -> BTreeSet<CallId> {
    let mut out = BTreeSet::new();
    for e in log.entries() {
        match e.record.kind() {
            RecordKind::ToolUse(id) => {
                out.insert(id.clone());
            }
            RecordKind::Summary(covered) => out.extend(covered.iter().cloned()),
            _ => {}
        }
    }
    out
}

fn assert_kept(before: &Report, after: &Report) {
    for (i, kinds) in CONDITIONS.iter().enumerate() {
        let count = |r: &Report| kinds.iter().map(|k| r.count(k)).sum::<usize>();
        if count(before) == 0 {
            assert_eq!(
                count(after),
                0,
                "condition {} broke: {:?}",
                i + 1,
                after.violations
            );
        }
    }
}

fn assert_same_as_rebuilt(log: &Log, removed: bool) {
    log.assert_invariants();
    let rebuilt = Log::from_entries(log.entries().iter().cloned())
        .expect("a compacted log is accepted from scratch");
    let (mut live, mut want) = (
        log.tracker().observe().without_anomalies(),
        rebuilt.tracker().observe().without_anomalies(),
    );
    if removed {
        live.completed = 0;
        want.completed = 0;
    }
    assert_eq!(live, want);
    assert_eq!(log.turn_count(), rebuilt.turn_count());
    assert_eq!(log.tool_group_count(), rebuilt.tool_group_count());
    assert_eq!(log.message_count(), rebuilt.message_count());
}

fn strategy(n: u8, keep: u8) -> Strategy {
    let keep = usize::from(keep % 5);
    match n % 7 {
        0 => Strategy::Clear(Clear::default().keep_tool_uses(keep)),
        1 => Strategy::Clear(
            Clear::default()
                .keep_tool_uses(keep)
                .clear_at_least(keep as u64 * 500)
                .exclude_tools(["grep"])
                .clear_inputs(ClearInputs::All),
        ),
        2 => Strategy::ClearThinking(ClearThinking::default().keep_turns(keep)),
        3 => Strategy::Digest(Digest::default().max_argument_chars(keep * 10)),
        4 => Strategy::Summarize(Summarize::default()),
        5 => Strategy::Slide(Slide::default().keep_turns(keep)),
        _ => Strategy::Truncate(Truncate::default()),
    }
}

fn bytes(log: &Log) -> Vec<u8> {
    let mut out = Vec::new();
    for e in log.entries() {
        cutpoint::format::records::write_entry(&mut out, e).expect("in memory");
    }
    out
}

fuzz_target!(|ops: Vec<Op>| {
    let mut log = Log::new();
    let mut removed = false;
    let mut progress = Progress::new();
    for op in ops.into_iter().take(300) {
        let entry = match op {
            Op::User(t) => Entry::from(Record::user(u64::from(t))),
            Op::Assistant(t, b, thinking) => Entry::new(
                bind(Record::assistant(u64::from(t)), b),
                thinking.map_or(Payload::None, |signed| Payload::Reasoning { signed }),
            ),
            Op::Use(i, t, b, tool) => Entry::new(
                bind(Record::tool_use(id(i), u64::from(t)), b),
                Payload::Call {
                    name: Some(["bash", "grep", "read"][usize::from(tool % 3)].to_owned()),
                    arguments: Some(format!(
                        "{{\"command\":\"run {i}\",\"content\":\"{}\"}}",
                        "x".repeat(usize::from(tool))
                    )),
                },
            ),
            Op::Result(i, t, b, ok) => Entry::new(
                bind(Record::tool_result(id(i), u64::from(t)), b),
                Payload::Result {
                    status: Some(if ok {
                        ResultStatus::Ok
                    } else {
                        ResultStatus::Error
                    }),
                    content: Some("first\nsecond".to_owned()),
                },
            ),
            Op::Step {
                strategy: s,
                keep,
                target,
                keep_head,
                min_turns,
                min_groups,
            } => {
                let s = strategy(s, keep);
                let floors = Floors::none()
                    .keep_head(usize::from(keep_head % 6))
                    .min_turns(usize::from(min_turns % 4))
                    .min_tool_groups(usize::from(min_groups % 4));
                let goal = match target {
                    Some(t) => Goal::within(floors).target(u64::from(t)),
                    None => Goal::within(floors),
                };
                let (before, before_ids, before_bytes) = (check(&log), ids(&log), bytes(&log));
                let recent = floors.recent_from(&log);
                let len = log.len();
                let tail: Vec<Entry> = log.entries().range(recent.min(len)..).cloned().collect();
                match s.run(&mut log, &goal) {
                    Err(_) => assert_eq!(bytes(&log), before_bytes, "no progress changes nothing"),
                    Ok(report) => {
                        removed |= !report.dropped_calls.is_empty();
                        let after = check(&log);
                        assert_kept(&before, &after);
                        let after_ids = ids(&log);
                        for id in &before_ids {
                            assert!(
                                after_ids.contains(id) || report.dropped_calls.contains(id),
                                "{id} vanished"
                            );
                        }
                        let now: Vec<Entry> = log
                            .entries()
                            .range(log.len() - tail.len()..)
                            .cloned()
                            .collect();
                        assert_eq!(now, tail, "the floors' tail is untouched");
                        let again = bytes(&log);
                        if let Ok(r) = s.run(&mut log, &goal) {
                            assert!(r.edits.is_empty(), "a repeated step changed {:?}", r.edits);
                        }
                        assert_eq!(bytes(&log), again, "idempotent");
                    }
                }
                assert_same_as_rebuilt(&log, removed);
                continue;
            }
            Op::Pipeline {
                preset,
                budget,
                twice,
            } => {
                let pipeline = Preset::ALL[usize::from(preset % 3)].pipeline(u64::from(budget));
                let before = check(&log);
                let report = pipeline.run_with(&mut log, &mut progress, &mut LedgerOnly);
                removed |= report
                    .steps
                    .iter()
                    .any(|s| matches!(s, Step::Ran(r) if !r.dropped_calls.is_empty()));
                assert_kept(&before, &check(&log));
                if twice {
                    let changes = log.changes();
                    let again = pipeline.run_with(&mut log, &mut progress, &mut LedgerOnly);
                    if log.changes() == changes {
                        for (i, s) in again.steps.iter().enumerate() {
                            assert!(
                                !matches!(s, Step::Ran(r) if !r.edits.is_empty()),
                                "stage {i} changed nothing yet ran"
                            );
                        }
                    }
                }
                assert_same_as_rebuilt(&log, removed);
                continue;
            }
            Op::CloseDead(age) => {
                let stale = log.stale_calls(&Age::Records(u64::from(age % 16)));
                let ids: Vec<CallId> = stale.iter().map(|s| s.call_id.clone()).collect();
                let before = check(&log);
                if log.abort_calls(&ids).is_ok() {
                    let after = check(&log);
                    let open = |r: &Report| r.count("pending-at-end") + r.count("unanswered-call");
                    assert!(
                        open(&after) <= open(&before),
                        "closing opened calls: {:?}",
                        after.violations
                    );
                    for kind in [
                        "orphan-result",
                        "duplicate-result",
                        "result-before-use",
                        "result-after-next-turn",
                    ] {
                        assert!(
                            after.count(kind) <= before.count(kind),
                            "closing made a {kind}: {:?}",
                            after.violations
                        );
                    }
                    assert!(
                        log.tracker()
                            .pending_calls()
                            .iter()
                            .all(|p| !ids.contains(p.id))
                    );
                }
                assert_same_as_rebuilt(&log, removed);
                continue;
            }
        };
        let _ = log.append(entry);
        log.assert_invariants();
    }
    assert_same_as_rebuilt(&log, removed);
});
