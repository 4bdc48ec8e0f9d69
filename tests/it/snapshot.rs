//! Durable state: a snapshot restored, a tracker rebuilt from the log, and the live
//! tracker agree, now and on every record after; a corrupt or incompatible snapshot is
//! a clear error.
#![cfg(feature = "serde")]

use cutpoint::testing::Observe;
use cutpoint::{AppendError, Limits, Mode, Record, Snapshot, SnapshotError, Tracker};
use proptest::prelude::*;
use serde_json::{Value, json};

/// The tracker's observable state, defined once in the library.
fn observe(t: &Tracker) -> cutpoint::testing::Observation {
    t.observe()
}

/// Through JSON and back, as a caller storing it would.
fn round_trip(t: &Tracker) -> Tracker {
    let text = serde_json::to_string(&t.snapshot()).unwrap();
    Tracker::restore(serde_json::from_str(&text).unwrap()).unwrap()
}

fn sample() -> Tracker {
    let mut t = Tracker::new();
    for r in [
        Record::user(100),
        Record::tool_use("done", 10),
        Record::tool_result("done", 500),
        Record::tool_result("early", 5), // lenient: an orphan so far
        Record::assistant(30),
        Record::tool_use("open", 10).bound_to_previous(),
    ] {
        t.append(r).unwrap();
    }
    t
}

#[test]
fn a_restored_tracker_answers_and_goes_on_as_the_live_one() {
    let live = sample();
    let mut restored = round_trip(&live);
    assert_eq!(observe(&restored), observe(&live));
    restored.assert_invariants();
    assert_eq!(
        restored.select_legal_cut(300, 1000),
        live.select_legal_cut(300, 1000)
    );
    // The answered call is known only by its fingerprint: the restored tracker must
    // fingerprint with the same seeds to see the reuse.
    assert!(matches!(
        restored.append(Record::tool_use("done", 1)),
        Err(AppendError::DuplicateCall {
            first_use: None,
            ..
        })
    ));
    assert!(matches!(
        restored.append(Record::tool_use("open", 1)),
        Err(AppendError::DuplicateCall {
            first_use: Some(5),
            ..
        })
    ));
    // The early result still waits for its call; the call revokes cuts back to it.
    let late = restored.append(Record::tool_use("early", 1)).unwrap();
    assert_eq!(
        late.anomaly,
        Some(cutpoint::Anomaly::UseAfterResult { first_result: 3 })
    );
    assert_eq!(
        restored.append(Record::tool_result("open", 1)).unwrap().at,
        7
    );
    assert_eq!(restored.legal_cuts().collect::<Vec<_>>(), [0, 1, 3, 8]);
}

#[test]
fn caps_and_mode_survive_a_snapshot() {
    let mut limits = Limits::default();
    limits.max_open_calls = 1;
    let mut t = Tracker::with_limits(limits).in_mode(Mode::Strict);
    t.append(Record::tool_use("a", 1)).unwrap();
    let mut restored = round_trip(&t);
    assert_eq!(restored.limits(), &limits);
    assert_eq!(restored.mode(), Mode::Strict);
    assert!(matches!(
        restored.append(Record::tool_use("b", 1)),
        Err(AppendError::LimitExceeded { .. })
    ));
    assert!(matches!(
        restored.append(Record::tool_result("zzz", 1)),
        Err(AppendError::LimitExceeded { .. }) | Err(AppendError::Violation(_))
    ));
}

#[test]
fn an_empty_tracker_round_trips() {
    let restored = round_trip(&Tracker::new());
    assert!(restored.is_empty());
    assert_eq!(restored.legal_cuts().collect::<Vec<_>>(), [0]);
    assert_eq!(Tracker::new().snapshot().len(), 0);
}

/// `sample()`'s snapshot as JSON, edited by `edit`, resealed unless `reseal` is false.
fn edited(edit: impl FnOnce(&mut Value), reseal: bool) -> Result<Tracker, SnapshotError> {
    let mut value = serde_json::to_value(sample().snapshot()).unwrap();
    edit(&mut value);
    let mut snapshot: Snapshot = serde_json::from_value(value).unwrap();
    if reseal {
        snapshot.reseal();
    }
    Tracker::restore(snapshot)
}

#[test]
fn an_incompatible_snapshot_says_so() {
    let err = edited(|v| v["version"] = json!(2), false).unwrap_err();
    assert_eq!(
        err,
        SnapshotError::UnsupportedVersion {
            found: 2,
            supported: 1
        }
    );
    assert_eq!(
        err.to_string(),
        "snapshot version 2 is not supported (this build reads version 1); rebuild the tracker from the log"
    );
    // A later layout that adds fields still decodes, and is named by its version.
    let err = edited(
        |v| {
            v["version"] = json!(3);
            v["compaction_shift"] = json!(12);
        },
        false,
    )
    .unwrap_err();
    assert_eq!(
        err,
        SnapshotError::UnsupportedVersion {
            found: 3,
            supported: 1
        }
    );
    let err = edited(|v| v["format"] = json!("something.else"), false).unwrap_err();
    assert!(matches!(err, SnapshotError::NotASnapshot { .. }), "{err}");
}

#[test]
fn a_corrupted_value_fails_the_checksum() {
    let err = edited(|v| v["sums"][2] = json!(611), false).unwrap_err();
    assert!(matches!(err, SnapshotError::Checksum { .. }), "{err}");
    assert!(err.to_string().starts_with("snapshot is corrupt: checksum"));
    let err = edited(|v| v["seeds"][0] = json!(7), false).unwrap_err();
    assert!(matches!(err, SnapshotError::Checksum { .. }), "{err}");
}

#[test]
fn truncated_or_mistyped_snapshots_are_decoding_errors() {
    let text = serde_json::to_string(&sample().snapshot()).unwrap();
    assert!(serde_json::from_str::<Snapshot>(&text[..text.len() / 2]).is_err());
    assert!(serde_json::from_str::<Snapshot>("{\"format\":1}").is_err());
    assert!(serde_json::from_str::<Snapshot>("[]").is_err());
}

type Edit = Box<dyn FnOnce(&mut Value)>;

#[test]
fn an_impossible_state_names_its_fault() {
    let cases: Vec<(Edit, &str)> = vec![
        (
            Box::new(|v| v["sums"][3] = json!(0)),
            "prefix token sum decreases at record 3",
        ),
        (
            Box::new(|v| v["cuts"] = json!([1, 2])),
            "cut 0 is not listed as legal",
        ),
        (
            Box::new(|v| v["cuts"] = json!([0, 3, 1])),
            "legal cuts do not increase: 3 then 1",
        ),
        (
            Box::new(|v| v["cuts"] = json!([0, 1, 9])),
            "legal cut 9 lies past the log's 6 records",
        ),
        (
            Box::new(|v| v["cuts"] = json!([0, 1, 6])),
            "cut 6 (the end) is legal while 1 calls are pending",
        ),
        (
            Box::new(|v| v["pending"][0][1] = json!(0)),
            "legal cut 4 lies after pending call \"open\" at record 0",
        ),
        (
            Box::new(|v| v["pending"][0][1] = json!(40)),
            "pending call \"open\" at record 40 lies past the log's 6 records",
        ),
        (
            Box::new(|v| v["early"][0][0] = json!("open")),
            "call id \"open\" is listed twice",
        ),
        (
            Box::new(|v| v["early"][0][0] = json!("")),
            "early result at record 3 has an empty id",
        ),
        (
            Box::new(|v| {
                let first = v["completed"][0].clone();
                v["completed"].as_array_mut().unwrap().push(first);
            }),
            "is listed twice",
        ),
    ];
    for (edit, want) in cases {
        match edited(edit, true) {
            Err(SnapshotError::Inconsistent(what)) => {
                assert!(
                    what.to_string().contains(want),
                    "got {what:?}, want {want:?}"
                )
            }
            other => panic!("want {want:?}, got {other:?}"),
        }
    }
}

fn record() -> impl Strategy<Value = Record> {
    let id = prop::sample::select(vec!["a", "b", "c", "d", "e"]);
    prop_oneof![
        1 => (0u64..100).prop_map(Record::user),
        1 => (0u64..100, any::<bool>()).prop_map(|(t, b)| {
            let r = Record::assistant(t);
            if b { r.bound_to_previous() } else { r }
        }),
        3 => (id.clone(), 0u64..100).prop_map(|(i, t)| Record::tool_use(i, t)),
        3 => (id, 0u64..100).prop_map(|(i, t)| Record::tool_result(i, t)),
    ]
}

/// What an append did, comparable across trackers with different seeds.
fn outcome(r: Result<cutpoint::Appended, AppendError>) -> Result<cutpoint::Appended, String> {
    r.map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1_000))]

    /// Live, snapshot-restored (at a random point) and rebuilt-from-the-log trackers
    /// agree after every record, refusals included.
    #[test]
    fn live_restored_and_rebuilt_agree(
        records in prop::collection::vec(record(), 0..80),
        split in any::<prop::sample::Index>(),
        strict in any::<bool>(),
    ) {
        let mode = if strict { Mode::Strict } else { Mode::Lenient };
        let split = split.index(records.len() + 1);
        let mut live = Tracker::new().in_mode(mode);
        let mut accepted = Vec::new();
        let mut restored = None;
        for (i, r) in records.iter().enumerate() {
            if i == split {
                restored = Some(round_trip(&live));
            }
            let got = outcome(live.append(r.clone()));
            if let Some(t) = restored.as_mut() {
                prop_assert_eq!(outcome(t.append(r.clone())), got.clone(), "record {}", i);
                prop_assert_eq!(observe(t), observe(&live));
                t.assert_invariants();
            }
            if got.is_ok() {
                accepted.push(r.clone());
            }
        }
        let restored = restored.unwrap_or_else(|| round_trip(&live));
        let rebuilt = Tracker::from_records(accepted.clone()).unwrap().in_mode(mode);
        prop_assert_eq!(observe(&restored), observe(&live));
        prop_assert_eq!(observe(&rebuilt), observe(&live));
        // A restored tracker snapshots exactly as the live one (same seeds, same contents).
        let (a, b) = (serde_json::to_value(live.snapshot()).unwrap(), serde_json::to_value(restored.snapshot()).unwrap());
        prop_assert_eq!(a, b);
        for cut in 0..=accepted.len() {
            prop_assert_eq!(restored.is_legal_cut(cut), cutpoint::testing::reference::is_legal_cut(&accepted, cut));
        }
    }
}

/// The state other features add survives too: an open (streaming) record, and the later
/// duplicates of a result still waiting for its call that compaction relies on.
#[test]
fn open_records_and_compacted_early_results_round_trip() {
    let mut t = Tracker::new();
    for r in [
        Record::user(100),
        Record::tool_result("x", 5), // waits for its call
        Record::user(7),
        Record::tool_result("x", 6), // a duplicate, which takes over if the first goes
        Record::user(8),
    ] {
        t.append(r).unwrap();
    }
    // Compact away the first early result: the duplicate at 3 becomes the one waiting.
    t.replace_region(1, 3, 2).unwrap();
    t.open(Record::assistant(3)).unwrap();
    t.grow(4).unwrap();
    let mut restored = round_trip(&t);
    assert_eq!(observe(&restored), observe(&t));
    assert_eq!(restored.open_record(), t.open_record());
    restored.assert_invariants();
    // Both go on the same way: close, then the call for "x" arrives, which must revoke
    // the cuts between the surviving early result and the call.
    for tracker in [&mut t, &mut restored] {
        tracker.close().unwrap();
        tracker.append(Record::tool_use("x", 1)).unwrap();
        tracker.assert_invariants();
    }
    assert_eq!(observe(&restored), observe(&t));
    assert!(
        !t.is_legal_cut(3),
        "the cut between the result and its call is illegal"
    );
}
