//! Compaction over random logs and policies: the compacted log breaks no condition the
//! input kept, compacting again keeps the pairing structure, and the tracker updated
//! in place equals a tracker rebuilt from the compacted log.

use cutpoint::compact::Options;
use cutpoint::compact::{
    ApplyError, Atom, Change, Direction, Entry, Log, Payload, ResultStatus, Window, repair,
};
use cutpoint::compact::{Report, validate};
use cutpoint::testing::Observe;
use cutpoint::testing::reference;
use cutpoint::testing::synth::{Rng, Session};
use cutpoint::{Record, RecordKind, ReplaceError, Tracker};
use proptest::prelude::*;
use proptest::test_runner::Config;

/// The tracker's observable state, anomaly counts aside (compaction drops records,
/// and with them the anomalies a rebuild would count). Defined once in the library.
fn observe(t: &Tracker) -> cutpoint::testing::Observation {
    t.observe().without_anomalies()
}

fn with_payload(record: Record, rng: &mut Rng) -> Entry {
    let payload = match record.kind() {
        RecordKind::ToolUse(id) if rng.chance(0.8) => Payload::Call {
            name: Some("bash".to_owned()),
            arguments: Some(format!(r#"{{"command":"run {id}"}}"#)),
        },
        RecordKind::ToolResult(_) if rng.chance(0.8) => Payload::Result {
            status: Some(if rng.chance(0.2) {
                ResultStatus::Error
            } else {
                ResultStatus::Ok
            }),
            content: Some("first line\nsecond".to_owned()),
        },
        _ => Payload::None,
    };
    Entry::new(record, payload)
}

/// A realistic session of `n` records, damaged at `damage` rate: records dropped
/// (orphaning results, leaving calls unanswered), results repeated or moved before
/// their call, stray results. The rest of the session (clean, fresh ids) is returned
/// too, to append after compacting.
fn random_log(seed: u64, n: usize, damage: f64) -> (Vec<Entry>, Vec<Entry>) {
    let mut rng = Rng::new(seed ^ 0xdead_beef);
    let mut session = Session::new(seed);
    let mut out: Vec<Entry> = Vec::new();
    for record in session.by_ref().take(n) {
        if rng.chance(damage) {
            match rng.range(0, 3) {
                0 => continue,
                1 if matches!(record.kind(), RecordKind::ToolResult(_)) => {
                    out.push(with_payload(record.clone(), &mut rng));
                }
                2 if matches!(record.kind(), RecordKind::ToolResult(_)) && !out.is_empty() => {
                    let at = rng.range(0, out.len() as u64) as usize;
                    out.insert(at, with_payload(record, &mut rng));
                    continue;
                }
                _ => out.push(Entry::from(Record::tool_result(
                    format!("ghost{}", rng.next_u64() % 50),
                    7,
                ))),
            }
        }
        out.push(with_payload(record, &mut rng));
    }
    let rest = session
        .take(60)
        .map(|r| with_payload(r, &mut rng))
        .collect();
    (out, rest)
}

/// Appends what the tracker accepts (repeated call ids are refused and skipped).
fn build(entries: Vec<Entry>) -> Log {
    let mut log = Log::new();
    for e in entries {
        let _ = log.append(e);
    }
    log.assert_invariants();
    log
}

fn policy(total: u64, rng: &mut Rng) -> Window {
    let target = rng.range(0, total + total / 10 + 1);
    let mut p = Window::new(target).keep_head(rng.range(0, 4) as usize);
    if rng.chance(0.5) {
        p = p.lookback(rng.range(0, total / 3 + 1));
    }
    if rng.chance(0.4) {
        p = p.direction(Direction::Forward);
    }
    p
}

/// Violation kinds by the seed's condition they break.
const CONDITIONS: [&[&str]; 4] = [
    &["unanswered-call", "pending-at-end"],
    &["orphan-result", "duplicate-result", "duplicate-call"],
    &["result-before-use", "result-after-next-turn"],
    &["argument-loss"],
];

pub(crate) fn check(log: &Log) -> Report {
    validate(log.entries(), Options::allowing_pending())
}

/// Every condition that held `before` holds `after` (shared with the strategy tests).
pub(crate) fn assert_no_new_violations(before: &Report, after: &Report) {
    for (i, kinds) in CONDITIONS.iter().enumerate() {
        let count = |r: &Report| kinds.iter().map(|k| r.count(k)).sum::<usize>();
        if count(before) == 0 {
            assert_eq!(
                count(after),
                0,
                "condition {} held before compaction: {:?}",
                i + 1,
                after.violations
            );
        }
    }
}

/// The tracker updated in place equals one rebuilt from the entries, and both agree
/// with the seed's legality on every cut.
fn assert_same_as_rebuilt(log: &Log) {
    log.assert_invariants();
    let rebuilt = Log::from_entries(log.entries().iter().cloned())
        .expect("a compacted log is accepted from scratch");
    rebuilt.assert_invariants();
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

/// Compacts once under `policy`; `false` when it deferred or had nothing to do.
fn compact(log: &mut Log, policy: &Window, rng: &mut Rng) -> bool {
    let Ok(plan) = log.plan(policy) else {
        return false;
    };
    let t = log.tracker();
    assert!(t.is_legal_cut(plan.region.start) && t.is_legal_cut(plan.region.end));
    assert!(plan.region.start >= policy.keep_head.min(t.len()));
    // Every record of the region is in exactly one atom; pairs are whole.
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
            Atom::Text { at } | Atom::Summary { at, .. } | Atom::DroppedResult { at, .. } => {
                mark(*at)
            }
            _ => panic!("unknown atom"),
        }
    }
    assert!(seen.iter().all(|&n| n == 1), "atoms partition the region");
    let empty = plan.region.is_empty();
    let applied = log
        .apply(&plan, Some("summary".to_owned()), rng.range(0, 200))
        .expect("a fresh plan applies");
    assert_eq!(applied.summary_at.is_none(), empty);
    !empty
}

/// Returns how many compactions were applied.
fn run_case(seed: u64, n: usize, damage: f64) -> usize {
    let mut rng = Rng::new(seed);
    let (entries, rest) = random_log(seed, n, damage);
    let mut log = build(entries);
    let before = check(&log);
    let p1 = policy(log.tracker().total_tokens(), &mut rng);
    let mut applied = usize::from(compact(&mut log, &p1, &mut rng));
    let once = check(&log);
    assert_no_new_violations(&before, &once);
    assert_eq!(
        once.structure, before.structure,
        "compaction keeps every call once"
    );
    assert_same_as_rebuilt(&log);

    // Re-entry in the same turn: plan again from the log itself.
    let p2 = policy(log.tracker().total_tokens(), &mut rng);
    applied += usize::from(compact(&mut log, &p2, &mut rng));
    let twice = check(&log);
    assert_no_new_violations(&before, &twice);
    assert_eq!(twice.structure, once.structure, "twice equals once");
    assert_same_as_rebuilt(&log);

    // Calls for results that came without one: a result compacted away leaves its
    // call pending; a kept one (moved down by the compaction) makes the cuts between
    // them illegal. Both must match the rebuilt tracker.
    for k in 0..50 {
        if rng.chance(0.3) {
            let _ = log.append(Entry::from(Record::tool_use(format!("ghost{k}"), 3)));
        }
    }
    assert_same_as_rebuilt(&log);

    // The session goes on after compaction.
    for e in rest {
        let _ = log.append(e);
    }
    assert_same_as_rebuilt(&log);
    let p3 = policy(log.tracker().total_tokens(), &mut rng);
    applied += usize::from(compact(&mut log, &p3, &mut rng));
    assert_same_as_rebuilt(&log);
    applied
}

proptest! {
    #![proptest_config(Config { cases: crate::cases(400), ..Config::default() })]

    #[test]
    fn compaction_keeps_conditions_structure_and_tracker(
        seed in any::<u64>(),
        n in 0usize..250,
        damage in prop_oneof![Just(0.0), 0.0f64..0.15],
    ) {
        run_case(seed, n, damage);
    }

    #[test]
    fn repair_fixes_what_it_lists_and_is_idempotent(seed in any::<u64>(), n in 0usize..200) {
        let (entries, _) = random_log(seed, n, 0.1);
        let broken = validate(&entries, Options::strict());
        let (fixed, report) = repair(entries, true);
        let after = validate(&fixed, Options::strict());
        for kind in ["unanswered-call", "pending-at-end", "orphan-result", "duplicate-result"] {
            prop_assert_eq!(after.count(kind), 0, "{} left: {:?}", kind, after.violations);
        }
        let listed = |f: fn(&Change) -> bool| report.changes.iter().filter(|c| f(c)).count();
        prop_assert_eq!(
            listed(|c| matches!(c, Change::InsertedAborted { .. })),
            broken.count("unanswered-call") + broken.count("pending-at-end")
        );
        prop_assert_eq!(
            listed(|c| matches!(c, Change::DroppedOrphan { .. })) +
            listed(|c| matches!(c, Change::DroppedDuplicate { .. })),
            broken.count("orphan-result") + broken.count("duplicate-result")
        );
        let (again, report2) = repair(fixed.clone(), true);
        prop_assert!(report2.changes.is_empty());
        prop_assert_eq!(again, fixed);
    }
}

#[test]
fn realistic_sessions_compact_repeatedly_in_place() {
    let mut applied = 0;
    for seed in 0..30 {
        applied += run_case(seed, 2_000, 0.0);
        applied += run_case(seed, 300, 0.05);
    }
    // The properties above mean little if compaction rarely happens.
    assert!(applied > 90, "only {applied} of 180 compactions applied");
}

#[test]
fn a_small_log_compacts_to_the_expected_summary() {
    let mut log = Log::new();
    let rec = [
        Entry::from(Record::user(1_000)),
        Entry::from(Record::assistant(50)),
        Entry::new(
            Record::tool_use("a", 20).bound_to_previous(),
            Payload::Call {
                name: Some("bash".into()),
                arguments: Some(r#"{"command":"pytest -x"}"#.into()),
            },
        ),
        Entry::new(
            Record::tool_result("a", 3_000),
            Payload::Result {
                status: Some(ResultStatus::Error),
                content: Some("3 failed\n...".into()),
            },
        ),
        Entry::from(Record::assistant(40)),
        Entry::from(Record::tool_use("b", 20).bound_to_previous()),
    ];
    for e in rec {
        log.append(e).unwrap();
    }
    // A target inside the pair with a lookback shorter than the result defers.
    assert!(log.plan(&Window::new(3_000).keep_head(1)).is_err());
    // Compacting ~4,100 tokens after the pinned first record: the region is 1..4.
    let plan = log.plan(&Window::new(4_100).keep_head(1)).unwrap();
    assert_eq!(plan.region, 1..4);
    assert_eq!(
        plan.covered().map(|c| c.as_str()).collect::<Vec<_>>(),
        ["a"]
    );
    let applied = log.apply(&plan, None, 25).unwrap();
    assert_eq!(applied.removed_tokens, 3_070);
    assert_eq!(log.len(), 4);
    let units = log.entries()[1].units();
    assert_eq!(units.len(), 1);
    assert_eq!(units[0].tool.as_deref(), Some("bash"));
    assert_eq!(
        units[0].arguments.as_deref(),
        Some(r#"{"command":"pytest -x"}"#)
    );
    assert_eq!(units[0].status, Some(ResultStatus::Error));
    assert_eq!(units[0].first_line.as_deref(), Some("3 failed"));
    assert_eq!(log.tracker().total_tokens(), 1_000 + 25 + 40 + 20);
    // `b` is still in flight: a later result for `a` is a duplicate, a later call
    // with id `a` is refused.
    assert!(log.append(Entry::from(Record::tool_use("a", 1))).is_err());
    assert_same_as_rebuilt(&log);
    // The plan is stale now.
    assert!(matches!(
        log.apply(&plan, None, 1),
        Err(ApplyError::StalePlan { .. })
    ));
}

#[test]
fn replace_region_refuses_bad_regions_and_changes_nothing() {
    let mut t = Tracker::from_records([
        Record::user(10),
        Record::tool_use("a", 1),
        Record::tool_result("a", 1),
        Record::user(u64::MAX - 100),
    ])
    .unwrap();
    let before = observe(&t);
    assert!(matches!(
        t.replace_region(1, 2, 1),
        Err(ReplaceError::NotALegalCut { at: 2, .. })
    ));
    assert!(matches!(
        t.replace_region(1, 1, 1),
        Err(ReplaceError::EmptyRegion { .. })
    ));
    assert!(matches!(
        t.replace_region(1, 9, 1),
        Err(ReplaceError::OutOfRange { .. })
    ));
    assert!(matches!(
        t.replace_region(1, 3, 1_000),
        Err(ReplaceError::TokenOverflow { .. })
    ));
    assert_eq!(observe(&t), before);
    t.assert_invariants();
}

#[test]
fn a_walk_back_that_cannot_find_a_cut_defers() {
    let log = Log::from_entries([
        Entry::from(Record::user(10)),
        Entry::from(Record::tool_use("a", 10)),
        Entry::from(Record::tool_result("a", 1_000)),
    ])
    .unwrap();
    // Target inside the pair, lookback too short to reach cut 1.
    assert!(log.plan(&Window::new(500).lookback(10)).is_err());
    // Forward: the nearest cut past the target, within reach.
    let plan = log
        .plan(&Window::new(500).lookback(600).direction(Direction::Forward))
        .unwrap();
    assert_eq!(plan.region, 0..3);
}

#[test]
fn summaries_count_their_calls_as_answered_and_must_cover_new_ids() {
    let mut t = Tracker::from_records([Record::user(5), Record::tool_use("a", 1)]).unwrap();
    let before = observe(&t);
    for ids in [vec!["a"], vec!["x", "x"], vec!["y", ""]] {
        let summary = Record::summary(ids.iter().map(|&i| i.into()), 9);
        assert!(t.append(summary).is_err(), "{ids:?}");
        assert_eq!(observe(&t), before, "a refused summary changes nothing");
    }
    t.append(Record::tool_result("a", 1)).unwrap();
    t.append(Record::summary(["s".into(), "q".into()], 9))
        .unwrap();
    assert!(t.is_legal_cut(t.len()), "a summary leaves nothing pending");
    assert_eq!(t.completed_calls(), 3);
    // A later result with a covered id is a duplicate; a later call is refused.
    let dup = t.append(Record::tool_result("s", 1)).unwrap();
    assert_eq!(dup.anomaly, Some(cutpoint::Anomaly::DuplicateResult));
    assert!(matches!(
        t.append(Record::tool_use("q", 1)),
        Err(cutpoint::AppendError::DuplicateCall {
            first_use: None,
            ..
        })
    ));
    t.assert_invariants();
}

/// Regression for the fuzz finding kept in `fuzz/seeds/compaction/regression-*`: the
/// region holds a `tool_result` whose call never came, and a duplicate of it lies after
/// the region. Compaction drops the first; the duplicate must take its place, so that
/// a `tool_use` with that id arriving later is a use after its result (cuts between
/// them revoked), exactly as in a tracker rebuilt from the compacted log. Before
/// `EarlyResult::later` the in-place tracker forgot the id and left the call pending.
#[test]
fn an_early_result_compacted_away_hands_over_to_its_duplicate_after_the_region() {
    let records = [
        Record::user(1),
        Record::tool_result("x", 1),
        Record::tool_result("x", 1),
        Record::user(1),
        Record::tool_result("x", 1),
    ];
    let compacted = |summary_tokens| {
        [
            Record::summary([], summary_tokens),
            Record::user(1),
            Record::tool_result("x", 1),
            Record::tool_use("x", 1),
        ]
    };

    // The tracker alone, through its public in-place update.
    let mut t = Tracker::from_records(records.clone()).unwrap();
    t.replace_region(0, 3, 7).unwrap();
    t.append(Record::tool_use("x", 1)).unwrap();
    t.assert_invariants();
    let rebuilt = Tracker::from_records(compacted(7)).unwrap();
    assert_eq!(observe(&t), observe(&rebuilt));
    assert!(t.pending_calls().is_empty(), "x was answered at record 2");
    assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 1, 2, 4]);
    assert_eq!(
        rebuilt.legal_cuts().collect::<Vec<_>>(),
        (0..=4)
            .filter(|&c| reference::is_legal_cut(&compacted(7), c))
            .collect::<Vec<_>>()
    );

    // The same through the log: plan, apply, then the call.
    let mut log = Log::from_entries(records.into_iter().map(Entry::from)).unwrap();
    let plan = log.plan(&Window::new(4).lookback(0)).unwrap();
    assert_eq!(plan.region, 0..3);
    log.apply(&plan, None, 7).unwrap();
    log.append(Entry::from(Record::tool_use("x", 1))).unwrap();
    assert_same_as_rebuilt(&log);
    assert!(log.tracker().pending_calls().is_empty());
}
