//! Hostile call ids: ids chosen to collide under a fixed weak hash neither slow the
//! tracker's tables into a list (see the bucket-spread test in src/calls.rs) nor
//! confuse pairing: every call is answered by its own result and no other.

use cutpoint::{Anomaly, AppendError, Record, Tracker};

/// Java's `String.hashCode` (h = 31 h + c), a classic fixed hash that id-flooding
/// attacks target.
fn java_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |h, c| {
        h.wrapping_mul(31).wrapping_add(i32::from(c as i16))
    })
}

/// `2^blocks` distinct ids, all with one Java hash: "Aa" and "BB" hash alike, and so
/// does every string made of those blocks.
fn colliding_ids(blocks: u32) -> Vec<String> {
    (0..1u32 << blocks)
        .map(|bits| {
            (0..blocks)
                .map(|b| if bits >> b & 1 == 1 { "BB" } else { "Aa" })
                .collect()
        })
        .collect()
}

#[test]
fn the_ids_really_collide_under_the_weak_hash() {
    let ids = colliding_ids(12);
    assert_eq!(ids.len(), 4096);
    let h = java_hash(&ids[0]);
    assert!(ids.iter().all(|id| java_hash(id) == h));
    let mut unique = ids.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), ids.len());
}

#[test]
fn colliding_ids_pair_exactly() {
    let ids = colliding_ids(12);
    let mut t = Tracker::new();
    for (i, id) in ids.iter().enumerate() {
        let a = t.append(Record::tool_use(id.as_str(), 1)).unwrap();
        assert_eq!((a.at, a.anomaly), (i, None), "call {id}");
    }
    assert_eq!(t.pending_count(), ids.len());
    // Every reuse is caught and names the right first position.
    for (i, id) in ids.iter().enumerate().step_by(97) {
        match t.append(Record::tool_use(id.as_str(), 1)) {
            Err(AppendError::DuplicateCall { first_use, .. }) => assert_eq!(first_use, Some(i)),
            other => panic!("{id}: {other:?}"),
        }
    }
    // Answer in reverse: each result closes its own call and only that one.
    for (k, id) in ids.iter().enumerate().rev() {
        let a = t.append(Record::tool_result(id.as_str(), 1)).unwrap();
        assert_eq!(a.anomaly, None, "result {id}");
        assert_eq!(t.pending_count(), k);
        assert_eq!(a.cut_after_is_legal, k == 0);
    }
    assert_eq!(t.completed_calls(), ids.len());
    assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 2 * ids.len()]);
    // A second result for any of them is a duplicate; a colliding id never used is an
    // orphan, not mistaken for one of its 4,096 look-alikes.
    assert_eq!(
        t.append(Record::tool_result(ids[7].as_str(), 1))
            .unwrap()
            .anomaly,
        Some(Anomaly::DuplicateResult)
    );
    let stranger: String = colliding_ids(13).pop().unwrap();
    assert_eq!(java_hash(&stranger), java_hash(&format!("{}Aa", ids[0])));
    assert_eq!(
        t.append(Record::tool_result(stranger, 1)).unwrap().anomaly,
        Some(Anomaly::OrphanResult)
    );
    t.assert_invariants();
}
