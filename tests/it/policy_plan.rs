//! The trigger policy's plans ([`TriggerPolicy::plan`]) on realistic sessions cut at
//! any point (mid-turn included, the last record possibly still streaming): the plan
//! is the decision's cut, the compaction layer applies it, and the validator finds
//! nothing it did not find before, with the pairing structure and every call's
//! arguments kept.

use std::collections::{BTreeSet, HashMap};

use cutpoint::compact::Options;
use cutpoint::compact::{ApplyError, Entry, Log, Payload, ResultStatus};
use cutpoint::compact::{Report, validate};
use cutpoint::policy::{Decision, Planned, TriggerPolicy};
use cutpoint::testing::reference;
use cutpoint::testing::synth::Session;
use cutpoint::{Record, RecordKind};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn arguments(id: &str) -> String {
    format!(r#"{{"command":"run {id}","path":"src/{id}.rs","note":"why {id} runs"}}"#)
}

fn entry(record: Record) -> Entry {
    let payload = match record.kind() {
        RecordKind::ToolUse(id) => Payload::Call {
            name: Some("bash".to_owned()),
            arguments: Some(arguments(id)),
        },
        RecordKind::ToolResult(id) => Payload::Result {
            status: Some(ResultStatus::Ok),
            content: Some(format!("{id}: ok\nmore")),
        },
        _ => Payload::None,
    };
    Entry::new(record, payload)
}

/// What the validator reports, without positions (compaction renumbers them).
fn findings(report: &Report) -> BTreeSet<(&'static str, String)> {
    report
        .violations
        .iter()
        .map(|v| (v.kind(), v.call_id().to_string()))
        .collect()
}

/// Plans with `policy`, checks the plan against `decide`, applies it, and checks the
/// log after. Returns whether it compacted.
fn plan_apply_validate(log: &mut Log, policy: TriggerPolicy) -> bool {
    let decision = policy.decide(log.tracker());
    let planned = policy.plan(log);
    let (cut, plan) = match (decision, planned) {
        (Decision::Nothing, Planned::Nothing) => return false,
        (Decision::Wait(a), Planned::Wait(b)) => {
            assert_eq!(a, b, "the same deferral");
            return false;
        }
        (Decision::CompactNow(a), Planned::CompactNow { cut, plan }) => {
            assert_eq!(a, cut, "the same cut");
            (cut, plan)
        }
        (d, p) => panic!("decide says {d:?}, plan says {p:?}"),
    };
    assert_eq!(plan.region, cut.head..cut.cut);
    assert_eq!(plan.region_tokens, cut.compacted_tokens);
    assert_eq!(plan.len, log.len());
    let before = validate(log.entries(), Options::allowing_pending());
    let pending_before: Vec<String> = log
        .tracker()
        .pending_calls()
        .iter()
        .map(|p| p.id.to_string())
        .collect();
    let covered: Vec<String> = plan.covered().map(|c| c.to_string()).collect();
    let applied = log
        .apply(&plan, Some("summary".to_owned()), 25)
        .expect("a plan from the policy applies");
    log.assert_invariants();
    assert_eq!(applied.summary_at, Some(cut.head));
    assert_eq!(applied.removed_tokens, cut.compacted_tokens);
    let after = validate(log.entries(), Options::allowing_pending());
    assert!(
        findings(&after).is_subset(&findings(&before)),
        "new violations: {:?} (before {:?})",
        after.violations,
        before.violations
    );
    assert_eq!(after.structure, before.structure, "pairing structure kept");
    // Calls in flight stay raw: none is summarized, each still pending.
    let pending_after: Vec<String> = log
        .tracker()
        .pending_calls()
        .iter()
        .map(|p| p.id.to_string())
        .collect();
    assert_eq!(pending_after, pending_before);
    // Argument-faithful: the summary lists every covered call with its arguments
    // verbatim (earlier summaries folded in, unit by unit).
    let summary = &log.entries()[cut.head];
    let units = summary.units();
    assert_eq!(
        units
            .iter()
            .map(|u| u.call_id.to_string())
            .collect::<Vec<_>>(),
        covered
    );
    for u in &units {
        assert_eq!(u.arguments.as_deref(), Some(arguments(&u.call_id).as_str()));
    }
    // The tracker updated in place agrees with the reference on the compacted log.
    let records: Vec<Record> = log.entries().iter().map(|e| e.record.clone()).collect();
    let open = log.tracker().open_record().is_some();
    for c in 0..=records.len() {
        let want = reference::is_legal_cut(&records, c) && !(open && c == records.len());
        assert_eq!(log.tracker().is_legal_cut(c), want, "cut {c}");
    }
    // The plan is spent.
    assert!(matches!(
        log.apply(&plan, None, 25),
        Err(ApplyError::StalePlan { .. })
    ));
    true
}

proptest! {
    #![proptest_config(Config { cases: 500, failure_persistence: None, ..Config::default() })]

    #[test]
    fn plans_from_the_policy_apply_and_keep_the_log_valid(
        seed in any::<u64>(),
        n in 0usize..300,
        extra in 0u8..4,
        extra_tokens in 0u64..3_000,
        budget in 1_000u64..60_000,
        threshold in 0.1f64..1.0,
        keep in 0.0f64..0.6,
        lookback in 0.0f64..0.3,
        pinned in 0usize..3,
    ) {
        let mut log = Log::from_entries(Session::records(seed, n).into_iter().map(entry)).unwrap();
        let open = match extra {
            0 => None,
            1 => Some(Record::assistant(extra_tokens)),
            2 => Some(Record::tool_use("toolu_streaming", extra_tokens)),
            _ => Some(Record::tool_use("toolu_streaming", extra_tokens).bound_to_previous()),
        };
        if let Some(r) = open {
            log.open(entry(r)).unwrap();
        }
        let policy = TriggerPolicy::new(budget)
            .threshold(threshold).unwrap()
            .keep(keep).unwrap()
            .lookback(lookback).unwrap()
            .pinned_head(pinned);
        // Re-entry: plan again on the compacted log, as a loop does when the
        // threshold fires again in the same turn.
        for _ in 0..3 {
            if !plan_apply_validate(&mut log, policy) {
                break;
            }
        }
    }
}

/// Mid-turn, through the compaction layer: the plan defers naming the call in flight;
/// once its result lands the plan covers both pairs and the summary carries their
/// arguments; positions taken before the compaction are stale.
#[test]
fn a_deferred_plan_compacts_at_the_next_safe_point() {
    let policy = TriggerPolicy::new(10_000)
        .threshold(0.6)
        .unwrap()
        .keep(0.3)
        .unwrap()
        .lookback(0.05)
        .unwrap()
        .pinned_head(1);
    let mut log = Log::new();
    log.append(entry(Record::user(2_000))).unwrap();
    log.append(entry(Record::assistant(300))).unwrap();
    for id in ["a", "b"] {
        log.append(entry(Record::tool_use(id, 40).bound_to_previous()))
            .unwrap();
    }
    assert_eq!(policy.plan(&log), Planned::Nothing);
    log.append(entry(Record::tool_result("b", 5_000))).unwrap();
    let Planned::Wait(d) = policy.plan(&log) else {
        panic!("{:?}", policy.plan(&log))
    };
    assert_eq!(d.waiting_on, ["a"]);
    assert_eq!(d.resume_at, 5);
    log.append(entry(Record::tool_result("a", 100).bound_to_previous()))
        .unwrap();
    let Planned::CompactNow { cut, plan } = policy.plan(&log) else {
        panic!("{:?}", policy.plan(&log))
    };
    assert!(cut.past_target);
    assert_eq!(plan.region, 1..6);
    assert_eq!(
        plan.covered().map(|c| c.as_str()).collect::<Vec<_>>(),
        ["a", "b"]
    );
    assert_eq!(log.compactions(), 0);
    log.apply(&plan, None, 60).unwrap();
    assert_eq!(log.compactions(), 1);
    assert!(validate(log.entries(), Options::strict()).is_clean());
    // Position 5 (the old resume point) no longer exists: the log has 2 records.
    assert_eq!(log.len(), 2);
    let args: HashMap<String, Option<String>> = log.entries()[1]
        .units()
        .into_iter()
        .map(|u| (u.call_id.to_string(), u.arguments))
        .collect();
    assert_eq!(args["a"].as_deref(), Some(arguments("a").as_str()));
    assert_eq!(args["b"].as_deref(), Some(arguments("b").as_str()));
}

/// The argument policy set on the trigger policy reaches the summary.
#[cfg(feature = "formats")]
#[test]
fn the_argument_policy_reaches_the_summary() {
    use cutpoint::compact::ArgumentPolicy;
    let policy = TriggerPolicy::new(1_000)
        .threshold(0.5)
        .unwrap()
        .keep(0.0)
        .unwrap()
        .arguments(ArgumentPolicy::Shorten { max_chars: 4 });
    let long = "x".repeat(40);
    let mut log = Log::new();
    log.append(Entry::new(
        Record::tool_use("c", 10),
        Payload::Call {
            name: Some("write".to_owned()),
            arguments: Some(format!(r#"{{"path":"{long}","content":"{long}"}}"#)),
        },
    ))
    .unwrap();
    log.append(entry(Record::tool_result("c", 900))).unwrap();
    let Planned::CompactNow { plan, .. } = policy.plan(&log) else {
        panic!("{:?}", policy.plan(&log))
    };
    log.apply(&plan, None, 10).unwrap();
    let units = log.entries()[0].units();
    let args = units[0].arguments.as_deref().unwrap();
    assert!(args.contains(&long), "the path is kept whole: {args}");
    assert!(args.contains("xxxx…[36 more chars]"), "content cut: {args}");
}

/// Positions shift down after an in-place compaction: a waiter made before it waits
/// for a position of the old numbering (here one the shorter log has not reached
/// when the last pending result lands), while the one recreated from the policy's new
/// deferral resolves right then. Dropping and recreating waiters is the rule.
#[cfg(feature = "stream")]
#[tokio::test]
async fn waiters_are_recreated_after_an_in_place_compaction() {
    use cutpoint::Tracker;
    use cutpoint::stream::Shared;
    use futures::poll;
    use std::task::Poll;

    let policy = TriggerPolicy::new(10_000)
        .threshold(0.8)
        .unwrap()
        .keep(0.1)
        .unwrap()
        .lookback(0.01)
        .unwrap()
        .pinned_head(1);
    let shared = Shared::<Tracker>::default();
    let mut log = Log::new();
    let mut add = |r: Record| {
        shared.append(r.clone()).unwrap();
        log.append(entry(r)).unwrap();
    };
    add(Record::user(1_000));
    add(Record::assistant(100));
    add(Record::tool_use("a", 10).bound_to_previous());
    add(Record::tool_result("a", 3_000));
    add(Record::assistant(100));
    add(Record::tool_use("b", 10).bound_to_previous());
    add(Record::tool_use("c", 10).bound_to_previous());
    add(Record::tool_result("c", 8_000));
    let Planned::Wait(d) = policy.plan(&log) else {
        panic!("{:?}", policy.plan(&log))
    };
    assert_eq!(
        (d.waiting_on.as_slice(), d.resume_at),
        (&["b".into()][..], 8)
    );
    let mut stale = Box::pin(shared.legal_cut_ready(d.resume_at));
    // Another path (a caller's own region, e.g. a hard limit) compacts the answered
    // round 1..4 in place, in the log and in the shared tracker.
    let plan = log.plan_region(1..4, Default::default()).unwrap();
    log.apply(&plan, None, 50).unwrap();
    shared.update(|t| t.replace_region(1, 4, 50)).unwrap();
    let Planned::Wait(d) = policy.plan(&log) else {
        panic!("{:?}", policy.plan(&log))
    };
    assert_eq!(d.resume_at, 6, "the new numbering");
    let mut fresh = Box::pin(shared.legal_cut_ready(d.resume_at));
    assert_eq!(poll!(&mut fresh), Poll::Pending);
    assert_eq!(poll!(&mut stale), Poll::Pending);
    // The last pending result lands: the next safe point is the log's end, 7.
    let b = Record::tool_result("b", 20).bound_to_previous();
    shared.append(b.clone()).unwrap();
    log.append(entry(b)).unwrap();
    assert_eq!(fresh.await, 7);
    assert_eq!(
        poll!(&mut stale),
        Poll::Pending,
        "the old position 8 lies past the shorter log"
    );
    let Planned::CompactNow { cut, plan } = policy.plan(&log) else {
        panic!("{:?}", policy.plan(&log))
    };
    assert_eq!((cut.head, cut.cut), (1, 7));
    log.apply(&plan, None, 80).unwrap();
    assert!(validate(log.entries(), Options::strict()).is_clean());
}
