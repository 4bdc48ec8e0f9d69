//! The set of used call ids (`UsedIds`: a small recent table, frozen runs grouped by a
//! counting sort, a block filter over the runs) against a plain `HashSet`, insert for
//! insert: the layout changed (frozen hash tables became flat runs) and only the
//! answers must not. Small recent tables force hundreds of freezes and several filter
//! doublings; fingerprints sharing a word (one filter block, one run group) and true
//! repeats of old ids are common by construction.

use std::collections::HashSet;

use cutpoint::testing::UsedIds;
use cutpoint::testing::synth::Rng;
use proptest::prelude::*;

/// A word from a small pool, so repeats and shared words are frequent.
fn word(rng: &mut Rng, pool: u64) -> u64 {
    // An odd multiplier spreads the pool over all 64 bits (the run groups and filter
    // blocks use the top bits).
    (rng.range(0, pool - 1) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn inserts_agree_with_a_hash_set(
        seed in any::<u64>(),
        buckets in prop_oneof![Just(8usize), Just(16), Just(64), Just(1024)],
        pool in prop_oneof![Just(16u64), Just(300), Just(100_000)],
        shared in 0u32..4,
        steps in 1usize..6_000,
    ) {
        let mut rng = Rng::new(seed);
        let mut used = UsedIds::with_recent_buckets(buckets);
        let mut oracle = HashSet::new();
        for _ in 0..steps {
            let (mut a, mut b) = (word(&mut rng, pool), word(&mut rng, pool));
            // Sometimes one word is a constant: one filter block for all, or one hash
            // chain in the recent table.
            match (shared, rng.range(0, 3)) {
                (1, 0) => a = 7,
                (2, 0) => b = 7,
                (3, 0) => b &= 0xffff,
                _ => {}
            }
            let before = used.heap_bytes();
            let fresh = used.insert_words([a, b]);
            prop_assert_eq!(fresh, oracle.insert((a, b)), "insert of {:?}", (a, b));
            if !fresh {
                prop_assert_eq!(used.heap_bytes(), before, "a refusal changes nothing");
            }
            prop_assert_eq!(used.len(), oracle.len());
        }
        // Every member is refused again, however old.
        for &(a, b) in &oracle {
            prop_assert!(!used.insert_words([a, b]));
        }
        prop_assert_eq!(used.len(), oracle.len());
    }
}

/// At the real size: 300,000 fresh random ids (10 freezes of the 28,672-id recent
/// table, several filter doublings), then every one of them again, and fresh ones
/// between: exactly the repeats are refused.
#[test]
fn full_size_set_refuses_exactly_the_repeats() {
    let mut rng = Rng::new(20);
    let mut used = UsedIds::new();
    let ids: Vec<[u64; 2]> = (0..300_000)
        .map(|_| [rng.next_u64(), rng.next_u64()])
        .collect();
    for id in &ids {
        assert!(used.insert_words(*id), "fresh {id:?}");
    }
    for (i, id) in ids.iter().enumerate() {
        assert!(!used.insert_words(*id), "repeat {i}");
        // Either word alone is not the id.
        assert!(used.insert_words([id[0], !id[1]]));
        assert!(used.insert_words([!id[0], id[1]]));
    }
    assert_eq!(used.len(), 900_000);
}
