//! Random operation sequences through the tracker, checked against the seed's
//! reference after every step: the newest cut's legality on every append, the selector
//! on every query, every cut at the end; `assert_invariants()` after each step; a
//! refused append changes nothing. Caps and strict mode are drawn too, summaries meet
//! the caps (covered calls count as answered calls against the records cap), and
//! snapshots are taken and restored mid-stream.
#![no_main]

use arbitrary::Arbitrary;
use cutpoint::testing::{Observe, reference};
use cutpoint::{AppendError, Limits, Mode, Record, Tracker};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    User(u16),
    Assistant(u16, bool),
    Use(u8, u16, bool),
    Result(u8, u16, bool),
    /// Token counts near u64::MAX, to reach the overflow check.
    Huge(u64),
    /// An id past the call-id cap.
    LongId(bool),
    Strict(bool),
    Query(u32, u32),
    QueryAll(u16),
    Snapshot,
    /// A summary covering these ids (255: one past the call-id cap).
    Summary(Vec<u8>, u16),
}

#[derive(Arbitrary, Debug)]
struct Input {
    max_records: u8,
    max_open_calls: u8,
    ops: Vec<Op>,
}

/// Ids from a small alphabet so that pairs, duplicates and orphans are common.
fn id(n: u8) -> String {
    format!("call_{}", n % 12)
}

/// The tracker's observable state, defined once in the library.
fn observe(t: &Tracker) -> cutpoint::testing::Observation {
    t.observe()
}

fn bind(record: Record, bound: bool) -> Record {
    if bound {
        record.bound_to_previous()
    } else {
        record
    }
}

fuzz_target!(|input: Input| {
    let mut limits = Limits::default();
    // 0 means "the default"; small caps otherwise, so they are reached.
    if input.max_records > 0 {
        limits.max_records = usize::from(input.max_records);
    }
    if input.max_open_calls > 0 {
        limits.max_open_calls = usize::from(input.max_open_calls % 16);
    }
    limits.max_call_id_bytes = 16;
    let mut tracker = Tracker::with_limits(limits);
    let mut kept: Vec<Record> = Vec::new();
    for op in input.ops.into_iter().take(256) {
        let record = match op {
            Op::User(t) => Record::user(u64::from(t)),
            Op::Assistant(t, b) => bind(Record::assistant(u64::from(t)), b),
            Op::Use(i, t, b) => bind(Record::tool_use(id(i), u64::from(t)), b),
            Op::Result(i, t, b) => bind(Record::tool_result(id(i), u64::from(t)), b),
            Op::Huge(t) => Record::user(u64::MAX - (t % 1024)),
            Op::LongId(is_use) => {
                let long = "x".repeat(17);
                if is_use {
                    Record::tool_use(long, 1)
                } else {
                    Record::tool_result(long, 1)
                }
            }
            Op::Summary(ids, t) => Record::summary(
                ids.iter().take(8).map(|&n| {
                    if n == 255 {
                        "x".repeat(17).into()
                    } else {
                        id(n).into()
                    }
                }),
                u64::from(t),
            ),
            Op::Strict(on) => {
                tracker.set_mode(if on { Mode::Strict } else { Mode::Lenient });
                continue;
            }
            Op::Query(target, lookback) => {
                let (target, lookback) = (u64::from(target) % 70_000, u64::from(lookback) % 70_000);
                assert_eq!(
                    tracker.select_legal_cut(target, lookback),
                    reference::select_legal_cut(&kept, target, lookback),
                    "select_legal_cut({target}, {lookback})"
                );
                continue;
            }
            Op::QueryAll(lookback) => {
                let lookback = u64::from(lookback);
                assert_eq!(
                    tracker.select_legal_cut(u64::MAX, lookback),
                    reference::select_legal_cut(&kept, u64::MAX, lookback)
                );
                continue;
            }
            Op::Snapshot => {
                let text =
                    serde_json::to_string(&tracker.snapshot()).expect("a snapshot serializes");
                let back: cutpoint::Snapshot = serde_json::from_str(&text).expect("and reads back");
                let restored = Tracker::restore(back).expect("a fresh snapshot restores");
                assert_eq!(observe(&restored), observe(&tracker));
                assert_eq!(restored.limits(), tracker.limits());
                assert_eq!(restored.mode(), tracker.mode());
                tracker = restored;
                tracker.assert_invariants();
                continue;
            }
        };
        let before = observe(&tracker);
        let covers = match record.kind() {
            cutpoint::RecordKind::Summary(ids) => Some(ids.len()),
            _ => None,
        };
        let answered_cap = limits.max_records.min(cutpoint::MAX_RECORDS);
        match tracker.append(record.clone()) {
            Ok(appended) => {
                if let Some(k) = covers {
                    assert!(
                        before.completed + k <= answered_cap,
                        "a summary past the cap"
                    );
                    assert_eq!(tracker.completed_calls(), before.completed + k);
                }
                kept.push(record);
                assert_eq!(appended.at, kept.len() - 1);
                assert_eq!(
                    appended.cut_after_is_legal,
                    reference::is_legal_cut(&kept, kept.len())
                );
                if tracker.mode() == Mode::Strict {
                    assert_eq!(appended.anomaly, None, "strict accepts no anomaly");
                }
            }
            Err(e) => {
                assert_eq!(observe(&tracker), before, "refused ({e}) yet changed");
                match e {
                    AppendError::Violation(v) => assert_eq!(tracker.mode(), Mode::Strict, "{v}"),
                    AppendError::LimitExceeded {
                        limit: cutpoint::Limit::AnsweredCalls,
                        value,
                        ..
                    } => {
                        assert_eq!(Some(value - before.completed), covers);
                        assert!(value > answered_cap);
                    }
                    AppendError::LimitExceeded { .. }
                    | AppendError::DuplicateCall { .. }
                    | AppendError::CoveredIdSeen { .. }
                    | AppendError::TokenOverflow { .. } => {}
                    other => panic!("unexpected refusal: {other}"),
                }
            }
        }
        tracker.assert_invariants();
    }
    for cut in 0..=kept.len() {
        assert_eq!(
            tracker.is_legal_cut(cut),
            reference::is_legal_cut(&kept, cut),
            "cut {cut} of {kept:?}"
        );
    }
});
