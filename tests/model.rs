//! Model tests: random logs through the tracker and through the seed's reference
//! algorithm, which must agree on every cut's legality and every query.
//!
//! Three oracles, from cheap to literal:
//! - `reference::is_legal_cut` (the seed's `pending_calls_at` / `orphan_results_at`) for
//!   every cut of every log;
//! - `grid_oracle`: the seed's selector loops over that legality vector, for a full grid
//!   of targets and lookbacks per log;
//! - `reference::select_legal_cut` itself, on a sample of queries per log.
//!
//! Run with `RUSTFLAGS='--cfg cutpoint_mutant' CUTPOINT_MUTANT=ignore_pending` (or `ignore_orphan`)
//! and these tests must fail: `scripts/mutants.sh` checks that they do.

use cutpoint::testing::Observe;
use cutpoint::testing::reference;
use cutpoint::{AppendError, CallId, Defer, Record, RecordKind, Tracker};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// The tracker's observable state, defined once in the library.
fn observe(t: &Tracker) -> cutpoint::testing::Observation {
    t.observe()
}

/// Feeds `records` to a fresh tracker, checking invariants and the newest cut after
/// every step. Records the tracker refuses (repeated call ids) are dropped from the
/// returned log, after checking the refusal changed nothing.
fn build(records: Vec<Record>) -> (Tracker, Vec<Record>) {
    let mut tracker = Tracker::new();
    let mut kept: Vec<Record> = Vec::with_capacity(records.len());
    for record in records {
        let before = observe(&tracker);
        match tracker.append(record.clone()) {
            Ok(appended) => {
                kept.push(record);
                assert_eq!(appended.at, kept.len() - 1);
                assert_eq!(
                    appended.cut_after_is_legal,
                    reference::is_legal_cut(&kept, kept.len()),
                    "newest cut of {kept:?}"
                );
            }
            Err(AppendError::DuplicateCall { call_id, at, .. }) => {
                assert_eq!(at, kept.len());
                assert!(
                    kept.iter()
                        .any(|r| matches!(r.kind(), RecordKind::ToolUse(id) if *id == call_id)),
                    "a refused id {call_id} was used before"
                );
                assert_eq!(
                    observe(&tracker),
                    before,
                    "a refused append changes nothing"
                );
            }
            Err(other) => panic!("unexpected refusal {other}"),
        }
        tracker.assert_invariants();
    }
    (tracker, kept)
}

/// The seed's selector loops over a precomputed legality vector (with cutpoint's
/// deviation for targets that cover the log). Linear scans, no binary search.
fn grid_oracle(
    records: &[Record],
    legal: &[bool],
    target: u64,
    lookback: u64,
) -> Result<usize, (usize, usize)> {
    let total: u128 = records.iter().map(|r| u128::from(r.tokens())).sum();
    let len = records.len();
    let target_index = if u128::from(target) >= total {
        if legal[len] {
            return Ok(len);
        }
        len - 1
    } else {
        let mut acc: u128 = 0;
        let mut idx = 0;
        for (i, r) in records.iter().enumerate() {
            acc += u128::from(r.tokens());
            if acc >= u128::from(target) {
                idx = i;
                break;
            }
        }
        idx
    };
    let mut floor = target_index;
    let mut acc: u128 = 0;
    for j in (0..=target_index).rev() {
        acc += u128::from(records[j].tokens());
        if acc > u128::from(lookback) {
            break;
        }
        floor = j;
    }
    (floor..=target_index)
        .rev()
        .find(|&c| legal[c])
        .ok_or((target_index, floor))
}

/// Targets worth asking: 0, every prefix boundary and its neighbours, the total and
/// beyond.
fn interesting_targets(records: &[Record]) -> Vec<u64> {
    let mut targets = vec![0, 1, u64::MAX];
    let mut acc = 0u64;
    for r in records {
        acc += r.tokens();
        targets.extend([acc.saturating_sub(1), acc, acc + 1]);
    }
    targets.sort_unstable();
    targets.dedup();
    targets
}

fn interesting_lookbacks(records: &[Record]) -> Vec<u64> {
    let total: u64 = records.iter().map(Record::tokens).sum();
    let mut l = vec![0, 1, 3, 10, total / 4, total / 2, total, u64::MAX];
    l.sort_unstable();
    l.dedup();
    l
}

/// The whole comparison for one log. `samples` picks which grid queries also go to the
/// literal reference.
fn check_log(records: Vec<Record>, samples: &[(usize, usize)]) {
    let (tracker, log) = build(records);
    let legal: Vec<bool> = (0..=log.len())
        .map(|c| reference::is_legal_cut(&log, c))
        .collect();
    for (c, &want) in legal.iter().enumerate() {
        assert_eq!(
            tracker.is_legal_cut(c),
            want,
            "legality of cut {c} in {log:?}"
        );
    }
    assert!(!tracker.is_legal_cut(log.len() + 1));
    assert_eq!(
        tracker.legal_cut_count(),
        legal.iter().filter(|&&l| l).count()
    );
    let pending_now: Vec<String> = reference::pending_calls_at(&log, log.len())
        .into_iter()
        .map(str::to_owned)
        .collect();
    let mut tracked: Vec<String> = tracker
        .pending_calls()
        .iter()
        .map(|p| p.id.to_string())
        .collect();
    let mut expected = pending_now;
    expected.sort();
    tracked.sort();
    assert_eq!(tracked, expected, "pending calls of {log:?}");

    let targets = interesting_targets(&log);
    let lookbacks = interesting_lookbacks(&log);
    for &target in &targets {
        for &lookback in &lookbacks {
            let got = tracker.select_legal_cut(target, lookback);
            let want = grid_oracle(&log, &legal, target, lookback);
            match (&got, want) {
                (Ok(g), Ok(w)) => {
                    assert_eq!(*g, w, "target {target} lookback {lookback} on {log:?}")
                }
                (Err(d), Err((t, f))) => {
                    assert_eq!(
                        (d.target_index, d.floor),
                        (t, f),
                        "defer window, target {target} lookback {lookback} on {log:?}"
                    )
                }
                _ => panic!(
                    "tracker {got:?} vs oracle {want:?}, target {target} lookback {lookback} on {log:?}"
                ),
            }
            if let Ok(cut) = got {
                assert!(legal[cut], "a returned cut is legal");
            }
        }
    }
    for &(ti, li) in samples {
        let target = targets[ti % targets.len()];
        let lookback = lookbacks[li % lookbacks.len()];
        let got = tracker.select_legal_cut(target, lookback);
        let want: Result<usize, Defer> = reference::select_legal_cut(&log, target, lookback);
        assert_eq!(
            got, want,
            "reference, target {target} lookback {lookback} on {log:?}"
        );
        // Where the seed and cutpoint are meant to agree, they do.
        let total: u64 = log.iter().map(Record::tokens).sum();
        if target < total || legal[log.len()] {
            assert_eq!(
                got,
                reference::select_legal_cut_seed(&log, target, lookback)
            );
        }
    }
}

/// One assistant round of a realistic session: optional user and assistant text, 0-4
/// parallel calls whose results come back in any order, some maybe never.
#[derive(Clone, Debug)]
struct Round {
    user: Option<u64>,
    assistant: Option<u64>,
    calls: Vec<(u64, u64)>,
    result_order: Vec<usize>,
    unanswered: usize,
    interleave: bool,
    /// One provider message per side: the calls bound to the assistant text, the
    /// results bound together (Anthropic's shape).
    grouped: bool,
}

fn tokens() -> impl Strategy<Value = u64> {
    prop_oneof![3 => 1u64..50, 2 => Just(0u64), 1 => 50u64..5000]
}

fn round() -> impl Strategy<Value = Round> {
    (
        proptest::option::of(tokens()),
        proptest::option::of(tokens()),
        proptest::collection::vec((tokens(), tokens()), 0..=4),
        0usize..=4,
        any::<bool>(),
        any::<u64>(),
        any::<bool>(),
    )
        .prop_map(
            |(user, assistant, calls, unanswered_roll, interleave, shuffle, grouped)| {
                let mut result_order: Vec<usize> = (0..calls.len()).collect();
                // A deterministic shuffle from the drawn seed.
                let mut s = shuffle | 1;
                for i in (1..result_order.len()).rev() {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    result_order.swap(i, (s % (i as u64 + 1)) as usize);
                }
                // Rarely leave calls unanswered (a defect mid-log, or pending at the end).
                let unanswered = if unanswered_roll == 4 {
                    calls.len().min(1 + (shuffle as usize % 2))
                } else {
                    0
                };
                Round {
                    user,
                    assistant,
                    calls,
                    result_order,
                    unanswered,
                    interleave,
                    grouped,
                }
            },
        )
}

fn realistic_log(rounds: Vec<Round>, last_open: bool) -> Vec<Record> {
    let mut records = Vec::new();
    let n = rounds.len();
    for (i, r) in rounds.into_iter().enumerate() {
        if let Some(t) = r.user {
            records.push(Record::user(t));
        }
        if let Some(t) = r.assistant {
            records.push(Record::assistant(t));
        }
        let id = |j: usize| format!("toolu_{i:02}_{j}");
        let skip = if last_open && i + 1 == n {
            r.calls.len() / 2 + r.unanswered
        } else {
            r.unanswered
        };
        let answered: Vec<usize> = r.result_order.iter().copied().skip(skip).collect();
        if r.interleave {
            // Each call answered before the next is made (sequential tools).
            for (j, &(use_t, _)) in r.calls.iter().enumerate() {
                records.push(Record::tool_use(id(j), use_t));
                if answered.contains(&j) {
                    records.push(Record::tool_result(id(j), r.calls[j].1));
                }
            }
        } else {
            let bind = |record: Record, first: bool| {
                if r.grouped && !first {
                    record.bound_to_previous()
                } else {
                    record
                }
            };
            for (j, &(use_t, _)) in r.calls.iter().enumerate() {
                records.push(bind(
                    Record::tool_use(id(j), use_t),
                    j == 0 && r.assistant.is_none(),
                ));
            }
            for (k, &j) in answered.iter().enumerate() {
                records.push(bind(Record::tool_result(id(j), r.calls[j].1), k == 0));
            }
        }
    }
    records
}

/// Anything goes: results before their use, orphans, duplicates of both kinds, calls
/// never answered, zero-token records, from a small id alphabet so ids collide often.
fn adversarial_log() -> impl Strategy<Value = Vec<Record>> {
    let tokens = prop_oneof![Just(0u64), 0u64..8, 0u64..200];
    let op = (0u8..4, 0u8..6, tokens, proptest::bool::weighted(0.2));
    proptest::collection::vec(op, 0..40).prop_map(|ops| {
        ops.into_iter()
            .map(|(kind, id, tokens, bound)| {
                let id = CallId::from(format!("c{id}"));
                let record = match kind {
                    0 => Record::user(tokens),
                    1 => Record::assistant(tokens),
                    2 => Record::tool_use(id, tokens),
                    _ => Record::tool_result(id, tokens),
                };
                if bound {
                    record.bound_to_previous()
                } else {
                    record
                }
            })
            .collect()
    })
}

fn samples() -> impl Strategy<Value = Vec<(usize, usize)>> {
    proptest::collection::vec((any::<usize>(), any::<usize>()), 2..6)
}

proptest! {
    #![proptest_config(Config { cases: 10_000, failure_persistence: None, ..Config::default() })]

    #[test]
    fn realistic_sessions_agree_with_the_reference(
        rounds in proptest::collection::vec(round(), 0..10),
        last_open in any::<bool>(),
        samples in samples(),
    ) {
        check_log(realistic_log(rounds, last_open), &samples);
    }

    #[test]
    fn adversarial_logs_agree_with_the_reference(records in adversarial_log(), samples in samples()) {
        check_log(records, &samples);
    }
}

#[test]
fn empty_log() {
    check_log(Vec::new(), &[(0, 0), (1, 1), (2, 7)]);
    let t = Tracker::new();
    assert_eq!(t.select_legal_cut(0, 0), Ok(0));
    assert_eq!(t.select_legal_cut(u64::MAX, u64::MAX), Ok(0));
}
