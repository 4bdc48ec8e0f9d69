//! The tracker's in-place edits against rebuilds: a batch of region replacements
//! (summaries and removals) and a batch of token edits leave the tracker equal to one
//! appended from scratch with the edited records, and agreeing with the
//! specification's legality on every cut; refused batches change nothing.

use cutpoint::testing::synth::{Rng, Session};
use cutpoint::testing::{Observe, reference};
use cutpoint::{CallId, Record, RecordKind, ReplaceError, Replacement, TokensError, Tracker};

/// A realistic session with some damage: results moved before their call, stray
/// results, a call left open at the end.
fn records(seed: u64, n: usize) -> Vec<Record> {
    let mut rng = Rng::new(seed);
    let mut out: Vec<Record> = Vec::new();
    for r in Session::records(seed, n) {
        if rng.chance(0.03) {
            out.push(Record::tool_result(format!("ghost{}", rng.range(0, 9)), 5));
        }
        if matches!(r.kind(), RecordKind::ToolResult(_)) && rng.chance(0.02) && !out.is_empty() {
            let at = rng.range(0, out.len() as u64) as usize;
            out.insert(at, r);
            continue;
        }
        out.push(r);
    }
    out
}

fn accepted(records: Vec<Record>) -> (Tracker, Vec<Record>) {
    let mut t = Tracker::new();
    let mut kept = Vec::new();
    for r in records {
        if t.append(r.clone()).is_ok() {
            kept.push(r);
        }
    }
    (t, kept)
}

/// Random disjoint regions between legal cuts, in order, some touching, some removed.
fn regions(t: &Tracker, rng: &mut Rng) -> Vec<Replacement> {
    let cuts: Vec<usize> = t.legal_cuts().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < cuts.len() {
        if rng.chance(0.3) {
            let j = (i + 1 + rng.range(0, 4) as usize).min(cuts.len() - 1);
            out.push(if rng.chance(0.3) {
                Replacement::removal(cuts[i], cuts[j])
            } else {
                Replacement::summary(cuts[i], cuts[j], rng.range(0, 300))
            });
            i = j + usize::from(rng.chance(0.5));
        } else {
            i += rng.range(1, 6) as usize;
        }
    }
    out
}

/// The records after `regions`: each summary covers the calls of its region (uses
/// and earlier summaries' ids), in log order.
fn apply(records: &[Record], regions: &[Replacement]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut at = 0;
    for r in regions {
        out.extend_from_slice(&records[at..r.start]);
        if let Some(tokens) = r.summary_tokens {
            let covered: Vec<CallId> = records[r.start..r.end]
                .iter()
                .flat_map(|rec| match rec.kind() {
                    RecordKind::ToolUse(id) => vec![id.clone()],
                    RecordKind::Summary(ids) => ids.to_vec(),
                    _ => vec![],
                })
                .collect();
            out.push(Record::summary(covered, tokens));
        }
        at = r.end;
    }
    out.extend_from_slice(&records[at..]);
    out
}

/// Every cut against the specification's rules (quadratic: small logs only; larger
/// ones are compared with a rebuild, whose cuts the model tests pin).
fn assert_legal_cuts_match(t: &Tracker, records: &[Record]) {
    if records.len() > 400 {
        return;
    }
    for c in 0..=records.len() {
        assert_eq!(
            t.is_legal_cut(c),
            reference::is_legal_cut(records, c),
            "cut {c}"
        );
    }
}

#[test]
fn batched_replacement_equals_a_rebuild() {
    for seed in 0..120u64 {
        let mut rng = Rng::new(seed);
        let n = [30, 300, 3_000][seed as usize % 3];
        let (mut t, recs) = accepted(records(seed, n));
        let mut recs = recs;
        let mut removes = false;
        for round in 0..3 {
            let batch = regions(&t, &mut rng);
            removes |= batch.iter().any(|r| r.summary_tokens.is_none());
            t.replace_regions(&batch)
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            t.assert_invariants();
            recs = apply(&recs, &batch);
            let rebuilt = Tracker::from_records(recs.clone()).expect("accepted from scratch");
            let mut live = t.observe().without_anomalies();
            let mut want = rebuilt.observe().without_anomalies();
            if removes {
                // A removed region's ids stay used in place; a rebuild never saw them.
                live.completed = 0;
                want.completed = 0;
            }
            assert_eq!(live, want, "seed {seed} round {round}: {batch:?}");
            assert_legal_cuts_match(&t, &recs);
            // Appending after the batch behaves as appending to the rebuild.
            let mut rebuilt = rebuilt;
            for r in Session::records(seed + 1_000, 40) {
                let r = match r.kind() {
                    RecordKind::ToolUse(id) => Record::tool_use(format!("{id}-{round}"), 9),
                    RecordKind::ToolResult(id) => Record::tool_result(format!("{id}-{round}"), 9),
                    _ => r,
                };
                assert_eq!(
                    t.append(r.clone()).is_ok(),
                    rebuilt.append(r.clone()).is_ok()
                );
                recs.push(r);
            }
            t.assert_invariants();
            assert_legal_cuts_match(&t, &recs);
        }
    }
}

#[test]
fn refused_batches_change_nothing() {
    let (mut t, _) = accepted(Session::records(3, 400));
    let before = t.observe();
    let cuts: Vec<usize> = t.legal_cuts().collect();
    let (a, b, c) = (cuts[2], cuts[5], cuts[9]);
    let not_legal = (a + 1..b)
        .find(|&p| !t.is_legal_cut(p))
        .expect("an illegal cut");
    let refusals = [
        (
            vec![Replacement::summary(a, c, 5), Replacement::summary(b, c, 5)],
            ReplaceError::Overlapping {
                start: b,
                previous_end: c,
            },
        ),
        (
            vec![Replacement::summary(a, b, 1), Replacement::removal(c, c)],
            ReplaceError::EmptyRegion { start: c, end: c },
        ),
        (
            vec![Replacement::removal(a, not_legal)],
            ReplaceError::NotALegalCut {
                at: not_legal,
                which: cutpoint::RegionEnd::End,
            },
        ),
        (
            vec![Replacement::summary(a, t.len() + 1, 1)],
            ReplaceError::OutOfRange {
                end: t.len() + 1,
                len: t.len(),
            },
        ),
    ];
    for (batch, want) in refusals {
        assert_eq!(t.replace_regions(&batch), Err(want));
        assert_eq!(t.observe(), before);
    }
    assert!(matches!(
        t.replace_regions(&[Replacement::summary(a, b, u64::MAX)]),
        Err(ReplaceError::TokenOverflow { .. })
    ));
    assert_eq!(t.observe(), before);
    assert_eq!(
        t.set_tokens(&[(3, 1), (3, 2)]),
        Err(TokensError::NotIncreasing { at: 3, previous: 3 })
    );
    assert_eq!(
        t.set_tokens(&[(t.len(), 1)]),
        Err(TokensError::OutOfRange {
            at: t.len(),
            len: t.len()
        })
    );
    assert!(matches!(
        t.set_tokens(&[(0, u64::MAX)]),
        Err(TokensError::TokenOverflow { .. })
    ));
    assert_eq!(t.observe(), before);
}

#[test]
fn token_edits_equal_a_rebuild_through_compactions() {
    for seed in 0..60u64 {
        let mut rng = Rng::new(seed ^ 0x5eed);
        let (mut t, mut recs) = accepted(records(seed, 2_000));
        for round in 0..4 {
            if round % 2 == 1 {
                let batch = regions(&t, &mut rng);
                t.replace_regions(&batch).expect("legal regions");
                recs = apply(&recs, &batch);
            }
            let mut at: Vec<usize> = (0..rng.range(1, 200))
                .map(|_| rng.range(0, recs.len() as u64 - 1) as usize)
                .collect();
            at.sort_unstable();
            at.dedup();
            let edits: Vec<(usize, u64)> = at.iter().map(|&i| (i, rng.range(0, 2_000))).collect();
            let total = t.set_tokens(&edits).expect("valid edits");
            for &(i, tokens) in &edits {
                recs[i] = recs[i].clone().with_tokens(tokens);
            }
            t.assert_invariants();
            let rebuilt = Tracker::from_records(recs.clone()).expect("accepted");
            assert_eq!(total, rebuilt.total_tokens());
            let (mut live, mut want) = (
                t.observe().without_anomalies(),
                rebuilt.observe().without_anomalies(),
            );
            live.completed = 0;
            want.completed = 0;
            assert_eq!(live, want, "seed {seed} round {round}");
            for target in (0..20).map(|k| k * total / 19) {
                assert_eq!(
                    t.select_legal_cut(target, 1_000),
                    rebuilt.select_legal_cut(target, 1_000),
                    "target {target}"
                );
            }
        }
    }
}
