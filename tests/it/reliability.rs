//! Limits and modes: caps refuse what would pass them, strict mode refuses pairing
//! violations, and a refused record leaves the tracker exactly as it was.

use cutpoint::testing::Observe;
use cutpoint::{
    Anomaly, AppendError, CallId, Limit, Limits, Mode, Record, RecordKind, StrictViolation, Tracker,
};
use proptest::prelude::*;

/// The tracker's observable state, defined once in the library.
fn observe(t: &Tracker) -> cutpoint::testing::Observation {
    t.observe()
}

/// Appends `record`, expecting a refusal, and checks the tracker did not change.
fn refused(t: &mut Tracker, record: Record) -> AppendError {
    let before = observe(t);
    let err = t.append(record).expect_err("the record must be refused");
    assert_eq!(
        observe(t),
        before,
        "a refused record changes nothing ({err})"
    );
    t.assert_invariants();
    err
}

fn limits(f: impl FnOnce(&mut Limits)) -> Limits {
    let mut l = Limits::default();
    f(&mut l);
    l
}

#[test]
fn defaults_are_the_documented_ones() {
    let l = Limits::default();
    assert_eq!(l.max_records, 1 << 24);
    assert_eq!(l.max_open_calls, 1 << 16);
    assert_eq!(l.max_call_id_bytes, 256);
    assert_eq!(l.max_line_bytes, 1 << 20);
    assert_eq!(Tracker::new().limits(), &l);
    assert_eq!(Tracker::new().mode(), Mode::Lenient);
}

#[test]
fn record_cap_refuses_the_record_past_it() {
    let mut t = Tracker::with_limits(limits(|l| l.max_records = 3));
    t.append(Record::user(1)).unwrap();
    t.append(Record::tool_use("a", 1)).unwrap();
    t.append(Record::tool_result("a", 1)).unwrap();
    let err = refused(&mut t, Record::user(5));
    assert_eq!(
        err,
        AppendError::LimitExceeded {
            at: 3,
            limit: Limit::Records,
            max: 3,
            value: 4
        }
    );
    assert_eq!(
        err.to_string(),
        "record 3: 4 records would pass the cap of 3 (Limits::max_records)"
    );
    // Raising the cap lets the stream go on.
    t.set_limits(limits(|l| l.max_records = 4));
    assert_eq!(t.append(Record::user(5)).unwrap().at, 3);
}

#[test]
fn call_id_cap_counts_bytes_on_both_tool_kinds() {
    let mut t = Tracker::with_limits(limits(|l| l.max_call_id_bytes = 8));
    t.append(Record::tool_use("12345678", 1)).unwrap();
    // Nine bytes, five characters: bytes are what memory costs.
    let long = "ééé123";
    assert_eq!(long.len(), 9);
    for record in [Record::tool_use(long, 1), Record::tool_result(long, 1)] {
        let err = refused(&mut t, record);
        assert_eq!(
            err,
            AppendError::LimitExceeded {
                at: 1,
                limit: Limit::CallIdBytes,
                max: 8,
                value: 9
            }
        );
    }
    assert_eq!(t.pending_count(), 1);
}

#[test]
fn open_call_cap_refuses_only_records_that_open_a_call() {
    let mut t = Tracker::with_limits(limits(|l| l.max_open_calls = 2));
    t.append(Record::tool_use("a", 1)).unwrap();
    t.append(Record::tool_result("early", 1)).unwrap(); // lenient: an early result
    // At the cap: a new call and a new orphan result are refused...
    for (record, what) in [
        (Record::tool_use("c", 1), "a new call"),
        (Record::tool_result("d", 1), "a new orphan"),
    ] {
        let err = refused(&mut t, record);
        assert_eq!(
            err,
            AppendError::LimitExceeded {
                at: 2,
                limit: Limit::OpenCalls,
                max: 2,
                value: 3
            },
            "{what}"
        );
    }
    // ...a reused call id is still the duplicate it is...
    assert!(matches!(
        refused(&mut t, Record::tool_use("a", 1)),
        AppendError::DuplicateCall { .. }
    ));
    // ...and records that close a call, or open nothing, are accepted.
    t.append(Record::tool_result("a", 1)).unwrap(); // answers a
    t.append(Record::tool_result("a", 1)).unwrap(); // duplicate: opens nothing
    t.append(Record::tool_use("b", 1)).unwrap(); // back to 2 open
    t.append(Record::tool_use("early", 1)).unwrap(); // answers the early result
    t.append(Record::user(1)).unwrap();
    assert_eq!(t.pending_count(), 1);
    t.assert_invariants();
}

#[test]
fn summary_ids_meet_the_call_id_cap() {
    let mut t = Tracker::with_limits(limits(|l| l.max_call_id_bytes = 8));
    t.append(Record::user(1)).unwrap();
    let err = refused(
        &mut t,
        Record::summary(["12345678".into(), "ééé123".into()], 5),
    );
    assert_eq!(
        err,
        AppendError::LimitExceeded {
            at: 1,
            limit: Limit::CallIdBytes,
            max: 8,
            value: 9
        }
    );
    t.append(Record::summary(["12345678".into()], 5)).unwrap();
    assert_eq!(t.completed_calls(), 1);
}

/// A summary opens no call, so the open-call cap lets it through; but each id it
/// covers is an answered call to remember, counted against the records cap.
#[test]
fn summaries_count_against_the_records_cap_not_the_open_call_cap() {
    let mut t = Tracker::with_limits(limits(|l| {
        l.max_records = 5;
        l.max_open_calls = 1;
    }));
    t.append(Record::tool_use("a", 1)).unwrap(); // one open call: at the cap
    t.append(Record::summary(["s".into(), "t".into()], 5))
        .unwrap();
    t.append(Record::tool_result("a", 1)).unwrap(); // three answered calls
    let err = refused(
        &mut t,
        Record::summary(["u".into(), "v".into(), "w".into()], 5),
    );
    assert_eq!(
        err,
        AppendError::LimitExceeded {
            at: 3,
            limit: Limit::AnsweredCalls,
            max: 5,
            value: 6
        }
    );
    assert_eq!(
        err.to_string(),
        "record 3: 6 answered calls would pass the cap of 5 (Limits::max_records)"
    );
    // Exactly at the cap is fine; an empty summary adds no call.
    t.append(Record::summary(["u".into(), "v".into()], 5))
        .unwrap();
    assert_eq!(t.completed_calls(), 5);
    t.append(Record::summary([], 5)).unwrap();
    // Now the log itself is full.
    assert!(matches!(
        refused(&mut t, Record::summary([], 5)),
        AppendError::LimitExceeded {
            limit: Limit::Records,
            ..
        }
    ));
    t.assert_invariants();
}

/// A runaway stream of fresh calls that are never answered: memory stops growing at
/// the cap, whatever the stream's length.
#[test]
fn a_runaway_stream_is_held_at_the_cap() {
    let mut t = Tracker::with_limits(limits(|l| l.max_open_calls = 1_000));
    let mut refusals = 0;
    for i in 0..50_000 {
        let id = format!("{i:0>200}");
        if t.append(Record::tool_use(id, 1)).is_err() {
            refusals += 1;
        }
    }
    assert_eq!(t.pending_count(), 1_000);
    assert_eq!(refusals, 49_000);
    // 1,000 ids of 200 bytes plus tables: well under 1 MiB.
    assert!(t.heap_bytes() < 1 << 20, "{} bytes held", t.heap_bytes());
}

#[test]
fn unbounded_limits_lift_every_cap() {
    let mut t = Tracker::with_limits(Limits::unbounded());
    t.append(Record::tool_use("x".repeat(100_000), 1)).unwrap();
    assert_eq!(t.limits().max_records, cutpoint::MAX_RECORDS);
}

#[test]
fn strict_mode_refuses_an_orphan_result() {
    let mut t = Tracker::new().in_mode(Mode::Strict);
    t.append(Record::user(3)).unwrap();
    let err = refused(&mut t, Record::tool_result("ghost", 7));
    assert_eq!(
        err,
        AppendError::Violation(StrictViolation::OrphanResult {
            call_id: CallId::from("ghost"),
            at: 1
        })
    );
    assert_eq!(
        err.to_string(),
        "record 1: tool_result \"ghost\" has no tool_use before it (orphan result)"
    );
    // The call may still come, and then its result is accepted.
    t.append(Record::tool_use("ghost", 1)).unwrap();
    t.append(Record::tool_result("ghost", 7)).unwrap();
    assert_eq!(t.anomalies(), cutpoint::Anomalies::default());
}

#[test]
fn strict_mode_refuses_a_duplicate_result() {
    let mut t = Tracker::new().in_mode(Mode::Strict);
    t.append(Record::tool_use("a", 1)).unwrap();
    t.append(Record::tool_result("a", 1)).unwrap();
    let err = refused(&mut t, Record::tool_result("a", 1));
    assert_eq!(
        err,
        AppendError::Violation(StrictViolation::DuplicateResult {
            call_id: CallId::from("a"),
            at: 2,
            first_result: None
        })
    );
}

#[test]
fn strict_mode_refuses_a_call_after_its_result_and_names_the_result() {
    // Accept an orphan leniently, then turn strict: the late call is refused.
    let mut t = Tracker::new();
    t.append(Record::tool_result("late", 1)).unwrap();
    t.append(Record::user(1)).unwrap();
    t.set_mode(Mode::Strict);
    let err = refused(&mut t, Record::tool_use("late", 1));
    assert_eq!(
        err,
        AppendError::Violation(StrictViolation::UseAfterResult {
            call_id: CallId::from("late"),
            at: 2,
            first_result: 0
        })
    );
    // A second result for the waiting id is a duplicate naming the first.
    let err = refused(&mut t, Record::tool_result("late", 1));
    assert_eq!(
        err,
        AppendError::Violation(StrictViolation::DuplicateResult {
            call_id: CallId::from("late"),
            at: 2,
            first_result: Some(0)
        })
    );
    assert!(
        err.to_string()
            .ends_with("repeats an earlier result at record 0")
    );
}

#[test]
fn lenient_mode_accepts_and_records_each_violation() {
    let mut t = Tracker::new();
    assert_eq!(
        t.append(Record::tool_result("x", 1)).unwrap().anomaly,
        Some(Anomaly::OrphanResult)
    );
    assert_eq!(
        t.append(Record::tool_result("x", 1)).unwrap().anomaly,
        Some(Anomaly::DuplicateResult)
    );
    assert_eq!(
        t.append(Record::tool_use("x", 1)).unwrap().anomaly,
        Some(Anomaly::UseAfterResult { first_result: 0 })
    );
    let a = t.anomalies();
    assert_eq!(
        (a.orphan_results, a.duplicate_results, a.uses_after_result),
        (1, 1, 1)
    );
    // Cuts 1 and 2 would orphan the first result from its late call.
    assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 3]);
}

#[test]
fn both_modes_refuse_a_reused_call_id_and_an_empty_one() {
    for mode in [Mode::Lenient, Mode::Strict] {
        let mut t = Tracker::new().in_mode(mode);
        t.append(Record::tool_use("a", 1)).unwrap();
        assert!(matches!(
            refused(&mut t, Record::tool_use("a", 1)),
            AppendError::DuplicateCall {
                first_use: Some(0),
                ..
            }
        ));
        assert!(matches!(
            refused(&mut t, Record::tool_result("", 1)),
            AppendError::EmptyCallId { .. }
        ));
    }
}

fn adversarial_record() -> impl Strategy<Value = Record> {
    let id = prop::sample::select(vec!["a", "b", "c", "d"]);
    // Summaries cover ids of their own, or the calls' (then refused as already seen).
    let covered = prop::sample::select(vec!["a", "s1", "s2", "s3", "s4", "s5", "s6"]);
    prop_oneof![
        4 => (0u64..50).prop_map(Record::user),
        4 => (0u64..50).prop_map(Record::assistant),
        4 => (id.clone(), 0u64..50).prop_map(|(i, t)| Record::tool_use(i, t)),
        4 => (id, 0u64..50).prop_map(|(i, t)| Record::tool_result(i, t)),
        1 => (prop::collection::vec(covered, 0..4), 0u64..50)
            .prop_map(|(ids, t)| Record::summary(ids.into_iter().map(CallId::from), t)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Strict mode keeps exactly the records lenient mode would accept without an
    /// anomaly, refusing the others untouched: a strict tracker equals a lenient one
    /// fed only the records strict accepted, and that log is anomaly-free.
    #[test]
    fn strict_refuses_exactly_the_anomalies(records in prop::collection::vec(adversarial_record(), 0..60)) {
        let mut strict = Tracker::new().in_mode(Mode::Strict);
        let mut accepted = Vec::new();
        for record in records {
            let mut probe = strict.clone();
            probe.set_mode(Mode::Lenient);
            let lenient = probe.append(record.clone());
            let before = observe(&strict);
            match strict.append(record.clone()) {
                Ok(appended) => {
                    prop_assert_eq!(appended.anomaly, None);
                    prop_assert_eq!(lenient.map(|a| a.anomaly), Ok(None));
                    accepted.push(record);
                }
                Err(AppendError::Violation(v)) => {
                    prop_assert_eq!(observe(&strict), before);
                    prop_assert_eq!(v.at(), strict.len());
                    prop_assert_eq!(Some(v.call_id()), record.call_id());
                    let anomaly = lenient.expect("lenient accepts what strict calls a violation").anomaly;
                    prop_assert!(anomaly.is_some(), "{} is no anomaly leniently", v);
                }
                Err(other) => {
                    prop_assert_eq!(observe(&strict), before);
                    prop_assert_eq!(lenient.unwrap_err(), other);
                }
            }
            strict.assert_invariants();
        }
        // What strict mode accepted, rebuilt in strict mode: the same tracker.
        let mut rebuilt = Tracker::new().in_mode(Mode::Strict);
        for r in accepted.iter().cloned() {
            rebuilt.append(r).unwrap();
        }
        prop_assert_eq!(observe(&rebuilt), observe(&strict));
        prop_assert_eq!(rebuilt.anomalies(), cutpoint::Anomalies::default());
        for cut in 0..=accepted.len() {
            prop_assert_eq!(strict.is_legal_cut(cut), cutpoint::testing::reference::is_legal_cut(&accepted, cut));
        }
        prop_assert!(!accepted.iter().any(|r| matches!(r.kind(), RecordKind::ToolResult(id) if id.is_empty())));
    }
}

/// Open calls of a log, the naive way: uses with no result after them, plus results
/// whose use has not come yet (first result per id); and the answered calls (answered
/// by a result or a late use, or covered by a summary).
fn open_calls(log: &[Record]) -> (Vec<String>, Vec<String>, Vec<String>) {
    let (mut pending, mut early, mut done) = (Vec::new(), Vec::<String>::new(), Vec::new());
    for r in log {
        match r.kind() {
            RecordKind::ToolUse(id) => {
                let id = id.to_string();
                if let Some(i) = early.iter().position(|e| *e == id) {
                    early.remove(i);
                    done.push(id);
                } else {
                    pending.push(id);
                }
            }
            RecordKind::ToolResult(id) => {
                let id = id.to_string();
                if let Some(i) = pending.iter().position(|p| *p == id) {
                    pending.remove(i);
                    done.push(id);
                } else if !done.contains(&id) && !early.contains(&id) {
                    early.push(id);
                }
            }
            RecordKind::Summary(ids) => done.extend(ids.iter().map(|i| i.to_string())),
            _ => {}
        }
    }
    (pending, early, done)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2_000))]

    /// Under random small caps, a record is refused for a cap exactly when the naive
    /// count says it would pass it, and otherwise treated as an uncapped tracker treats it.
    #[test]
    fn caps_refuse_exactly_what_passes_them(
        records in prop::collection::vec(adversarial_record(), 0..60),
        max_records in 0usize..50,
        max_open in 0usize..5,
    ) {
        let mut t = Tracker::with_limits(limits(|l| {
            l.max_records = max_records;
            l.max_open_calls = max_open;
        }));
        let mut accepted: Vec<Record> = Vec::new();
        for record in records {
            let (pending, early, done) = open_calls(&accepted);
            let id = record.call_id().map(|i| i.to_string());
            let opens = match (record.kind(), &id) {
                (RecordKind::ToolUse(_), Some(id)) => !early.contains(id) && !pending.contains(id) && !done.contains(id),
                (RecordKind::ToolResult(_), Some(id)) => !pending.contains(id) && !done.contains(id) && !early.contains(id),
                _ => false,
            };
            let mut uncapped = t.clone();
            uncapped.set_limits(Limits::unbounded());
            let free = uncapped.append(record.clone());
            let got = t.append(record.clone());
            let covers = match record.kind() {
                RecordKind::Summary(ids) => Some(ids.len()),
                _ => None,
            };
            if accepted.len() >= max_records {
                prop_assert!(matches!(got, Err(AppendError::LimitExceeded { limit: Limit::Records, .. })), "{:?}", got);
            } else if let Some(k) = covers.filter(|k| done.len() + k > max_records) {
                prop_assert_eq!(got, Err(AppendError::LimitExceeded {
                    at: accepted.len(), limit: Limit::AnsweredCalls, max: max_records, value: done.len() + k,
                }));
            } else if opens && pending.len() + early.len() >= max_open {
                prop_assert_eq!(got, Err(AppendError::LimitExceeded {
                    at: accepted.len(), limit: Limit::OpenCalls, max: max_open, value: max_open + 1,
                }));
            } else {
                prop_assert_eq!(&got, &free);
                if got.is_ok() {
                    accepted.push(record);
                }
            }
            // The cap holds at every step.
            prop_assert!(t.pending_count() + open_calls(&accepted).1.len() <= max_open);
            prop_assert_eq!(t.completed_calls(), open_calls(&accepted).2.len());
            t.assert_invariants();
        }
    }
}
