//! The trigger policy's guarantees, on realistic sessions cut at any point (mid-turn
//! included, with the last record possibly still streaming), against the reference's
//! legality.

use cutpoint::policy::{Decision, TriggerPolicy, WaitReason};
use cutpoint::testing::reference;
use cutpoint::testing::synth::Session;
use cutpoint::{Record, Tracker};
use proptest::prelude::*;
use proptest::test_runner::Config;

fn check(records: Vec<Record>, open_extra: Option<Record>, policy: TriggerPolicy) {
    let mut t = Tracker::from_records(records.clone()).unwrap();
    let mut log = records;
    if let Some(r) = open_extra {
        t.open(r.clone()).unwrap();
        log.push(r);
    }
    let len = log.len();
    let total: u64 = log.iter().map(Record::tokens).sum();
    // The reference's legality, with no cut after an open record.
    let legal = |c: usize| {
        c <= len && reference::is_legal_cut(&log, c) && !(c == len && t.open_record().is_some())
    };
    let decision = policy.decide(&t);
    if total < policy.threshold_tokens() {
        assert_eq!(decision, Decision::Nothing);
        return;
    }
    match decision {
        Decision::Nothing => panic!("over the threshold ({total}) yet nothing to do"),
        Decision::CompactNow(plan) => {
            assert!(legal(plan.head), "head {} is legal", plan.head);
            assert!(legal(plan.cut), "cut {} is legal", plan.cut);
            assert!(plan.head < plan.cut);
            let compacted: u64 = log[plan.head..plan.cut].iter().map(Record::tokens).sum();
            assert_eq!(plan.compacted_tokens, compacted);
            assert_eq!(plan.total_tokens, total);
            // The head is the first legal cut at or after the pinned records.
            let pinned = PINNED.min(len);
            assert_eq!(Some(plan.head), (pinned..=len).find(|&c| legal(c)));
        }
        Decision::Wait(d) => {
            assert!(
                !(d.resume_at..=len).any(legal),
                "a legal cut >= {} exists, the waiter would resolve at once",
                d.resume_at
            );
            // The first legal cut at or after the pinned records.
            let head = (PINNED.min(len)..=len).find(|&c| legal(c));
            assert!(
                !legal(len) || head == Some(len),
                "the end of the log is legal past the head: no reason to wait"
            );
            let mut want: Vec<String> = reference::pending_calls_at(&log, len)
                .into_iter()
                .map(str::to_owned)
                .collect();
            let mut got: Vec<String> = d.waiting_on.iter().map(|id| id.to_string()).collect();
            want.sort();
            got.sort();
            assert_eq!(got, want, "waits on exactly the calls in flight");
            match d.reason {
                WaitReason::CallsInFlight => assert!(!got.is_empty()),
                WaitReason::RecordOpen { at } => assert_eq!(Some(at), t.open_record()),
                WaitReason::NothingAfterHead => {
                    assert_eq!(head, Some(len), "nothing lies after the head")
                }
                _ => {}
            }
        }
        _ => panic!("unknown decision"),
    }
}

/// Records pinned by every policy in these tests.
const PINNED: usize = 1;

proptest! {
    #![proptest_config(Config { cases: 2_000, failure_persistence: None, ..Config::default() })]

    #[test]
    fn decisions_are_legal_and_deferrals_wait_for_something(
        seed in any::<u64>(),
        n in 0usize..400,
        extra in 0u8..4,
        extra_tokens in 0u64..3_000,
        budget in 1_000u64..60_000,
        threshold in 0.1f64..1.0,
        keep in 0.0f64..0.6,
        lookback in 0.0f64..0.3,
    ) {
        let records = Session::records(seed, n);
        let open_extra = match extra {
            0 => None,
            1 => Some(Record::assistant(extra_tokens)),
            2 => Some(Record::tool_use("toolu_streaming", extra_tokens)),
            _ => Some(Record::tool_use("toolu_streaming", extra_tokens).bound_to_previous()),
        };
        let policy = TriggerPolicy::new(budget)
            .threshold(threshold).unwrap()
            .keep(keep).unwrap()
            .lookback(lookback).unwrap()
            .pinned_head(PINNED);
        check(records, open_extra, policy);
    }
}

#[test]
fn fractions_outside_the_budget_are_refused() {
    let p = TriggerPolicy::new(1_000);
    assert_eq!(p.threshold(1.5).unwrap_err().name, "threshold");
    assert_eq!(p.keep(-0.1).unwrap_err().name, "keep");
    assert!(p.lookback(f64::NAN).is_err());
    assert_eq!(p.threshold(0.5).unwrap().threshold_tokens(), 500);
}

/// Mid-turn: over budget while calls run, the policy defers naming them; when the last
/// result lands it compacts at the new safe point, past its target.
#[test]
fn defers_mid_turn_then_compacts_at_the_next_safe_point() {
    let policy = TriggerPolicy::new(10_000)
        .threshold(0.6)
        .unwrap()
        .keep(0.3)
        .unwrap()
        .lookback(0.05)
        .unwrap()
        .pinned_head(1);
    let mut t = Tracker::new();
    t.append(Record::user(2_000)).unwrap();
    t.append(Record::assistant(300)).unwrap();
    t.append(Record::tool_use("a", 40).bound_to_previous())
        .unwrap();
    t.append(Record::tool_use("b", 40).bound_to_previous())
        .unwrap();
    assert_eq!(policy.decide(&t), Decision::Nothing);
    t.append(Record::tool_result("b", 5_000)).unwrap();
    let Decision::Wait(d) = policy.decide(&t) else {
        panic!("{:?}", policy.decide(&t))
    };
    assert_eq!(d.reason, WaitReason::CallsInFlight);
    assert_eq!(d.waiting_on, ["a"]);
    assert_eq!(d.resume_at, 5);
    assert!(d.to_string().contains("waiting on a"), "{d}");
    t.append(Record::tool_result("a", 100).bound_to_previous())
        .unwrap();
    let Decision::CompactNow(plan) = policy.decide(&t) else {
        panic!("{:?}", policy.decide(&t))
    };
    assert_eq!((plan.head, plan.cut, plan.past_target), (1, 6, true));
    assert_eq!(plan.compacted_tokens, 300 + 80 + 5_100);
}
