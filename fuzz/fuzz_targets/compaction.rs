//! Compaction plan/apply/validate on random logs (the compaction module of issue 3):
//! random records and compactions interleaved; after each compaction the atoms
//! partition the region, no condition that held before breaks, the pairing structure
//! is kept (re-entry included), and the tracker updated in place equals one rebuilt
//! from the compacted log and agrees with the seed's legality on every cut.
//!
//! Run: `cargo +nightly fuzz run compaction` (from the repository root).
#![no_main]

use arbitrary::Arbitrary;
use cutpoint::compact::{
    Atom, Direction, Entry, Log, Options, Payload, Report, ResultStatus, Window, validate,
};
use cutpoint::testing::{Observe, reference};
use cutpoint::{Record, Tracker};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    User(u16),
    Assistant(u16, bool),
    Use(u8, u16, bool, bool),
    Result(u8, u16, bool, bool),
    Compact {
        target: u32,
        lookback: Option<u32>,
        keep_head: u8,
        forward: bool,
        summary_tokens: u16,
    },
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

/// Violation kinds by the seed's condition they break (as tests/it/compact.rs groups them).
const CONDITIONS: [&[&str]; 4] = [
    &["unanswered-call", "pending-at-end"],
    &["orphan-result", "duplicate-result", "duplicate-call"],
    &["result-before-use", "result-after-next-turn"],
    &["argument-loss"],
];

fn check(log: &Log) -> Report {
    validate(log.entries(), Options::allowing_pending())
}

/// The tracker's observable state, anomaly counts aside (compaction drops records,
/// and with them the anomalies a rebuild would count). Defined once in the library.
fn observe(t: &Tracker) -> cutpoint::testing::Observation {
    t.observe().without_anomalies()
}

fn assert_same_as_rebuilt(log: &Log) {
    log.assert_invariants();
    let rebuilt = Log::from_entries(log.entries().iter().cloned())
        .expect("a compacted log is accepted from scratch");
    assert_eq!(observe(log.tracker()), observe(rebuilt.tracker()));
    let records: Vec<Record> = log.entries().iter().map(|e| e.record.clone()).collect();
    for c in 0..=records.len() {
        assert_eq!(
            log.tracker().is_legal_cut(c),
            reference::is_legal_cut(&records, c),
            "cut {c}"
        );
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut log = Log::new();
    let mut before = check(&log);
    for op in ops.into_iter().take(200) {
        let entry = match op {
            Op::User(t) => Entry::from(Record::user(u64::from(t))),
            Op::Assistant(t, b) => Entry::from(bind(Record::assistant(u64::from(t)), b)),
            Op::Use(i, t, b, args) => Entry::new(
                bind(Record::tool_use(id(i), u64::from(t)), b),
                if args {
                    Payload::Call {
                        name: Some("bash".to_owned()),
                        arguments: Some(format!("{{\"command\":\"run {i}\"}}")),
                    }
                } else {
                    Payload::None
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
            Op::Compact {
                target,
                lookback,
                keep_head,
                forward,
                summary_tokens,
            } => {
                let mut policy =
                    Window::new(u64::from(target)).keep_head(usize::from(keep_head % 8));
                if let Some(l) = lookback {
                    policy = policy.lookback(u64::from(l));
                }
                if forward {
                    policy = policy.direction(Direction::Forward);
                }
                let Ok(plan) = log.plan(&policy) else {
                    continue;
                };
                let t = log.tracker();
                assert!(t.is_legal_cut(plan.region.start) && t.is_legal_cut(plan.region.end));
                let mut seen = vec![0u8; plan.region.len()];
                for atom in &plan.atoms {
                    let mut mark = |at: usize| seen[at - plan.region.start] += 1;
                    match atom {
                        Atom::Pair {
                            use_at, result_at, ..
                        } => {
                            mark(*use_at);
                            mark(*result_at);
                        }
                        Atom::Text { at }
                        | Atom::Summary { at, .. }
                        | Atom::DroppedResult { at, .. } => mark(*at),
                        _ => panic!("unknown atom"),
                    }
                }
                assert!(seen.iter().all(|&n| n == 1), "atoms partition the region");
                log.apply(&plan, Some("summary".to_owned()), u64::from(summary_tokens))
                    .expect("a fresh plan applies");
                let after = check(&log);
                for (i, kinds) in CONDITIONS.iter().enumerate() {
                    let count = |r: &Report| kinds.iter().map(|k| r.count(k)).sum::<usize>();
                    if count(&before) == 0 {
                        assert_eq!(
                            count(&after),
                            0,
                            "condition {} broke: {:?}",
                            i + 1,
                            after.violations
                        );
                    }
                }
                assert_eq!(
                    after.structure, before.structure,
                    "compaction keeps every call once"
                );
                assert_same_as_rebuilt(&log);
                before = after;
                continue;
            }
        };
        if log.append(entry).is_ok() {
            before = check(&log);
        }
        log.assert_invariants();
    }
    assert_same_as_rebuilt(&log);
});
