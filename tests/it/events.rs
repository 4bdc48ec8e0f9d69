//! Model tests for open (streaming) records: a log streamed as `open, delta*, close`
//! (with usage reports replacing estimates) must leave the tracker exactly as appending
//! the finished records does, and while a record is open no cut after it may be legal.
//! The oracle is the seed's reference (`reference::is_legal_cut`) over the records so
//! far, the open one included at its current size.

use cutpoint::testing::Observe;
use cutpoint::testing::reference;
use cutpoint::{AppendError, CallId, Event, EventError, Handled, Record, RecordKind, Tracker};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// Everything a caller can observe of a tracker (the library's one definition), plus
/// the answers to a grid of queries.
#[derive(PartialEq, Debug)]
struct Observed {
    state: cutpoint::testing::Observation,
    selections: Vec<Result<usize, cutpoint::Defer>>,
}

fn observe(t: &Tracker) -> Observed {
    let total = t.total_tokens();
    let selections = [0, 1, total / 3, total / 2, total, u64::MAX]
        .into_iter()
        .flat_map(|target| [0, 5, total / 4, u64::MAX].map(|l| t.select_legal_cut(target, l)))
        .collect();
    Observed {
        state: t.observe(),
        selections,
    }
}

/// How one record is streamed.
#[derive(Clone, Debug)]
enum Shape {
    /// Appended whole.
    Whole,
    /// Opened with `first` tokens, then the rest in `deltas` chunks.
    Streamed { first_share: u8, deltas: u8 },
    /// Streamed with a wrong running estimate, fixed by a usage report before closing.
    FixedBeforeClose { estimate: u64 },
    /// Streamed with a wrong estimate, fixed by a usage report after closing.
    FixedAfterClose { estimate: u64 },
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        1 => Just(Shape::Whole),
        3 => (any::<u8>(), 0u8..5).prop_map(|(first_share, deltas)| Shape::Streamed { first_share, deltas }),
        1 => (0u64..300).prop_map(|estimate| Shape::FixedBeforeClose { estimate }),
        1 => (0u64..300).prop_map(|estimate| Shape::FixedAfterClose { estimate }),
    ]
}

/// Anything goes, as in tests/model.rs: a small id alphabet so ids collide, results
/// before uses, duplicates, unanswered calls, bound records.
fn adversarial_log() -> impl Strategy<Value = Vec<(Record, Shape)>> {
    let tokens = prop_oneof![Just(0u64), 0u64..8, 0u64..200];
    let op = (
        0u8..4,
        0u8..6,
        tokens,
        proptest::bool::weighted(0.2),
        shape(),
    );
    proptest::collection::vec(op, 0..30).prop_map(|ops| {
        ops.into_iter()
            .map(|(kind, id, tokens, bound, shape)| {
                let id = CallId::from(format!("c{id}"));
                let record = match kind {
                    0 => Record::user(tokens),
                    1 => Record::assistant(tokens),
                    2 => Record::tool_use(id, tokens),
                    _ => Record::tool_result(id, tokens),
                };
                let record = if bound {
                    record.bound_to_previous()
                } else {
                    record
                };
                (record, shape)
            })
            .collect()
    })
}

/// `record` with `tokens` instead of its own size.
fn resized(record: &Record, tokens: u64) -> Record {
    let r = Record::new(record.kind().clone(), tokens);
    if record.is_bound_to_previous() {
        r.bound_to_previous()
    } else {
        r
    }
}

/// While the last record of `log` is open: the tracker's cuts are exactly the
/// reference's below `len`, and no cut after the open record is legal.
fn check_open(t: &Tracker, log: &[Record]) {
    t.assert_invariants();
    let len = log.len();
    assert_eq!(t.open_record(), Some(len - 1));
    assert!(!t.is_legal_cut(len), "no cut after an open record is legal");
    assert!(t.legal_cut_at_or_after(len).is_none());
    for c in 0..len {
        assert_eq!(
            t.is_legal_cut(c),
            reference::is_legal_cut(log, c),
            "cut {c} of {log:?} (last open)"
        );
    }
    assert_eq!(
        t.total_tokens(),
        log.iter().map(Record::tokens).sum::<u64>()
    );
    let all = t.select_legal_cut(u64::MAX, u64::MAX);
    assert!(
        all.is_ok_and(|c| c < len),
        "selector never reaches past an open record"
    );
    if let RecordKind::ToolUse(id) = log[len - 1].kind() {
        // An open call is pending from its first event, unless its result came first.
        let answered_before = log[..len - 1]
            .iter()
            .any(|r| matches!(r.kind(), RecordKind::ToolResult(x) if x == id));
        assert_eq!(
            t.pending_calls().iter().any(|p| p.id == id),
            !answered_before,
            "open tool_use {id} is pending"
        );
    }
}

fn ok(handled: Result<Handled, EventError>) -> Handled {
    handled.unwrap_or_else(|e| panic!("event refused: {e}"))
}

fn stream_and_compare(records: Vec<(Record, Shape)>) {
    let mut appended = Tracker::new();
    let mut streamed = Tracker::new();
    let mut log: Vec<Record> = Vec::new();
    for (record, shape) in records {
        let full = record.tokens();
        let want = appended.append(record.clone());
        if let Err(e) = want {
            // Refused whole, refused when opened: same error, nothing changes.
            assert!(matches!(e, AppendError::DuplicateCall { .. }), "{e}");
            let before = observe(&streamed);
            assert_eq!(
                streamed.handle(Event::Opened(record)),
                Err(EventError::Append(e))
            );
            assert_eq!(observe(&streamed), before);
            continue;
        }
        match shape {
            Shape::Whole => {
                ok(streamed.handle(Event::Record(record.clone())));
                log.push(record);
            }
            Shape::Streamed {
                first_share,
                deltas,
            } => {
                let first = full * u64::from(first_share) / 255;
                ok(streamed.handle(Event::Opened(resized(&record, first))));
                log.push(resized(&record, first));
                let mut sent = first;
                for k in 0..deltas {
                    let left = full - sent;
                    let d = if k + 1 == deltas { left } else { left / 2 };
                    let h = ok(streamed.handle(Event::Delta { tokens: d }));
                    sent += d;
                    assert_eq!(
                        h,
                        Handled::Grew {
                            at: log.len() - 1,
                            tokens: sent
                        }
                    );
                    *log.last_mut().unwrap() = resized(&record, sent);
                    check_open(&streamed, &log);
                }
                if sent != full {
                    // No deltas: the whole size came with the open.
                    ok(streamed.handle(Event::Delta {
                        tokens: full - sent,
                    }));
                    *log.last_mut().unwrap() = resized(&record, full);
                }
                check_open(&streamed, &log);
                ok(streamed.handle(Event::Closed));
            }
            Shape::FixedBeforeClose { estimate } => {
                ok(streamed.handle(Event::Opened(resized(&record, estimate))));
                log.push(resized(&record, estimate));
                check_open(&streamed, &log);
                ok(streamed.handle(Event::UsageReported { tokens: full }));
                *log.last_mut().unwrap() = record.clone();
                check_open(&streamed, &log);
                ok(streamed.handle(Event::Closed));
            }
            Shape::FixedAfterClose { estimate } => {
                ok(streamed.handle(Event::Opened(resized(&record, estimate))));
                log.push(resized(&record, estimate));
                check_open(&streamed, &log);
                ok(streamed.handle(Event::Closed));
                streamed.assert_invariants();
                ok(streamed.handle(Event::UsageReported { tokens: full }));
                *log.last_mut().unwrap() = record.clone();
            }
        }
        streamed.assert_invariants();
        assert_eq!(observe(&streamed), observe(&appended), "after {log:?}");
        let turn = streamed.handle(Event::TurnEnded);
        assert_eq!(
            turn,
            Ok(Handled::TurnEnded {
                len: log.len(),
                pending: appended.pending_count()
            })
        );
    }
    for c in 0..=log.len() + 1 {
        assert_eq!(
            streamed.is_legal_cut(c),
            c <= log.len() && reference::is_legal_cut(&log, c),
            "cut {c} of {log:?}"
        );
    }
}

proptest! {
    #![proptest_config(Config { cases: 3_000, failure_persistence: None, ..Config::default() })]

    #[test]
    fn streamed_records_equal_appended_records(records in adversarial_log()) {
        stream_and_compare(records);
    }
}

/// Appends `ops` (a record, and whether to withdraw the latest pending call after it)
/// and checks [`Tracker::withdraw_call`]'s documented promise against the reference
/// over the log with each withdrawn call's record as an assistant record (same size
/// and binding), built from scratch: exact (every cut, the pending calls) when every
/// record after the call is bound to the previous one, the only case a stream decoder
/// withdraws (and every withdrawal before it was exact); otherwise safe (no cut legal
/// that the reference forbids) and exact at the end.
fn withdraw_and_compare(ops: Vec<(Record, bool)>) {
    let mut t = Tracker::new();
    let mut log: Vec<Record> = Vec::new();
    let mut exact = true;
    for (record, withdraw) in ops {
        if t.append(record.clone()).is_ok() {
            log.push(record);
        }
        let Some((id, at)) = t
            .pending_calls()
            .into_iter()
            .max_by_key(|p| p.at)
            .map(|p| (p.id.clone(), p.at))
        else {
            continue;
        };
        if !withdraw {
            continue;
        }
        // Exact while every withdrawal so far was: an inexact one leaves cuts behind.
        exact &= log[at + 1..].iter().all(Record::is_bound_to_previous);
        let before_withdrawal = t.observe();
        let r = Record::assistant(log[at].tokens());
        log[at] = if log[at].is_bound_to_previous() {
            r.bound_to_previous()
        } else {
            r
        };
        assert_eq!(
            ok(t.handle(Event::CallWithdrawn(id.clone()))),
            Handled::Withdrawn {
                at,
                end_is_legal: reference::is_legal_cut(&log, log.len()),
            }
        );
        t.assert_invariants();
        // Withdrawing it again is refused and changes nothing.
        let before = t.observe();
        assert_eq!(
            t.handle(Event::CallWithdrawn(id.clone())),
            Err(EventError::NotPending {
                call_id: id.clone()
            })
        );
        assert_eq!(t.observe(), before);
        assert_ne!(before, before_withdrawal);
        let len = log.len();
        for c in 0..=len {
            let want = reference::is_legal_cut(&log, c);
            if exact || c == len {
                assert_eq!(t.is_legal_cut(c), want, "cut {c} of {log:?}");
            } else {
                assert!(!t.is_legal_cut(c) || want, "cut {c} of {log:?}");
            }
        }
        let mut pending: Vec<&str> = t.pending_calls().iter().map(|p| p.id.as_str()).collect();
        let mut want: Vec<&str> = reference::pending_calls_at(&log, len).into_iter().collect();
        pending.sort_unstable();
        want.sort_unstable();
        // The reference counts ids with no result before the end; the tracker refuses
        // reused ids, so the sets agree.
        let pending: Vec<String> = pending.into_iter().map(str::to_owned).collect();
        let want: Vec<String> = want.into_iter().map(str::to_owned).collect();
        assert_eq!(pending, want, "{log:?}");
    }
    // Whatever came after, the cuts decided since a withdrawal are the reference's.
    t.assert_invariants();
    assert_eq!(
        t.is_legal_cut(log.len()),
        reference::is_legal_cut(&log, log.len())
    );
}

/// Logs whose assistant messages are mostly bound together (so withdrawals are
/// usually exact), with the adversarial kinds and ids.
fn withdrawal_log() -> impl Strategy<Value = Vec<(Record, bool)>> {
    (
        adversarial_log(),
        proptest::collection::vec(proptest::bool::weighted(0.3), 30),
    )
        .prop_map(|(records, withdraw)| {
            records
                .into_iter()
                .zip(withdraw)
                .map(|((r, _), w)| {
                    let bound =
                        matches!(r.kind(), RecordKind::ToolUse(_) | RecordKind::Assistant) && w;
                    (if bound { r.bound_to_previous() } else { r }, w)
                })
                .collect()
        })
}

proptest! {
    #![proptest_config(Config { cases: 2_000, failure_persistence: None, ..Config::default() })]

    #[test]
    fn withdrawn_calls_agree_with_the_reference(ops in withdrawal_log()) {
        withdraw_and_compare(ops);
    }
}

/// The mid-turn shape: an assistant message whose calls stream, then results landing
/// out of order. The cut after the last call's close stays illegal until every result
/// is in, and becomes legal with the last one.
#[test]
fn the_cut_after_a_streamed_turn_opens_with_its_last_result() {
    let mut t = Tracker::new();
    ok(t.handle(Event::Record(Record::user(1_000))));
    ok(t.handle(Event::Opened(Record::assistant(0))));
    ok(t.handle(Event::Delta { tokens: 50 }));
    assert!(!t.is_legal_cut(2), "the text is still streaming");
    assert_eq!(
        ok(t.handle(Event::Closed)),
        Handled::Closed {
            at: 1,
            cut_after_is_legal: true
        }
    );
    for id in ["a", "b", "c"] {
        ok(t.handle(Event::Opened(Record::tool_use(id, 0).bound_to_previous())));
        assert!(t.pending_calls().iter().any(|p| p.id == id));
        ok(t.handle(Event::Delta { tokens: 20 }));
        ok(t.handle(Event::Closed));
        t.assert_invariants();
    }
    ok(t.handle(Event::TurnEnded));
    assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 1]);
    for (k, id) in ["c", "a", "b"].into_iter().enumerate() {
        let h = ok(t.handle(Event::Record(Record::tool_result(id, 500))));
        let last = k == 2;
        assert!(matches!(h, Handled::Appended(a) if a.cut_after_is_legal == last));
        assert_eq!(t.legal_cut_at_or_after(2), last.then_some(8));
        t.assert_invariants();
    }
}

/// A record that grows after a compaction has shifted the stored sums must land on the
/// true totals (the sums are stored relative to a shift; growing must respect it).
#[test]
fn growing_after_a_compaction_keeps_sums_exact() {
    use cutpoint::{Record, Tracker};
    let mut t = Tracker::from_records([
        Record::user(1_000),
        Record::tool_use("a", 10),
        Record::tool_result("a", 5_000),
        Record::user(50),
    ])
    .expect("valid");
    t.replace_region(1, 3, 20).expect("legal region");
    t.open(Record::assistant(5)).expect("opens");
    t.grow(7).expect("grows");
    t.set_last_tokens(40).expect("usage reported");
    t.close().expect("closes");
    t.assert_invariants();
    let rebuilt = Tracker::from_records([
        Record::user(1_000),
        Record::user(20),
        Record::user(50),
        Record::assistant(40),
    ])
    .expect("valid");
    assert_eq!(t.total_tokens(), rebuilt.total_tokens());
    for c in 0..=t.len() {
        assert_eq!(t.tokens_before(c), rebuilt.tokens_before(c), "cut {c}");
        assert_eq!(t.is_legal_cut(c), rebuilt.is_legal_cut(c), "cut {c}");
    }
}
