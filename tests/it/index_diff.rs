//! The index's query path against the specification's rescan, answer for answer.
//!
//! `Tracker::select_legal_cut` no longer finds the lookback floor to answer: it checks
//! whether the nearest legal cut clears the floor from the sums on the lines it has
//! just read, and finds the floor only to explain a deferral; the sums and the bitmap
//! live in chunked storage. This pins that the answers are exactly the rescan's: the
//! seed's selector over every cut's legality by the reference's definitions (one sweep
//! per log, itself checked against `reference::is_legal_cut`), and for one query in
//! eight the literal `cutpoint::testing::reference::select_legal_cut` too (O(n) per cut
//! it tests: asking it everything took 55 of the 70 seconds of the whole `it` binary):
//! the cut, or the deferral with its target index, floor and nearest legal cuts (the
//! nearest, not just legal ones); and the same for the
//! position queries the compaction layer uses, on generated logs (with damage: results
//! before their calls, stray results, calls left open), on every real transcript, and
//! after batches of region replacements, removals and token edits.

use crate::transcripts::{FIXTURES, fixture};
use cutpoint::format::{self, ByteEstimate};
use cutpoint::testing::reference;
use cutpoint::testing::synth::{Rng, Session};
use cutpoint::{CallId, Defer, Record, RecordKind, Replacement, Tracker};
use std::collections::HashMap;

/// One query in this many is also asked of the literal reference.
const LITERAL_EVERY: usize = 8;

/// Prefix sums of `records`: `sums[c]` is the tokens of records `..c`.
fn sums(records: &[Record]) -> Vec<u64> {
    let mut out = vec![0];
    for r in records {
        out.push(out.last().copied().unwrap_or(0) + r.tokens());
    }
    out
}

/// The rescan's floor for target record `t`: the smallest `j <= t` with
/// `tokens(j..=t) <= lookback`, or `t`.
fn floor(sums: &[u64], t: usize, lookback: u64) -> usize {
    (0..=t)
        .find(|&j| sums[t + 1] - sums[j] <= lookback)
        .unwrap_or(t)
}

/// Every cut's legality by the reference's definitions, in one sweep instead of the
/// reference's **O(n)** per cut: a cut is illegal when a call's first use lies before
/// it and its first result does not (`reference::pending_calls_at`: `first_use < cut
/// <= first_result`, or to the end without a result), when a call has a result before
/// it and a use at or after it (`reference::orphan_results_at`: `first_result < cut <=
/// last_use`), or when the record at it is bound to the one before. **O(n)**. Checked
/// against `reference::is_legal_cut` in [`assert_queries_match`].
fn legality(records: &[Record]) -> Vec<bool> {
    #[derive(Default)]
    struct Seen {
        first_use: Option<usize>,
        last_use: usize,
        first_result: Option<usize>,
    }
    let n = records.len();
    let mut ids: HashMap<&str, Seen> = HashMap::new();
    for (i, r) in records.iter().enumerate() {
        match r.kind() {
            RecordKind::ToolUse(id) => {
                let seen = ids.entry(id.as_str()).or_default();
                seen.first_use.get_or_insert(i);
                seen.last_use = i;
            }
            RecordKind::ToolResult(id) => {
                ids.entry(id.as_str())
                    .or_default()
                    .first_result
                    .get_or_insert(i);
            }
            _ => {}
        }
    }
    // Each illegal stretch `lo..=hi` as +1 at `lo` and -1 past `hi`.
    let mut delta = vec![0i64; n + 2];
    let mut mark = |lo: usize, hi: usize| {
        if lo <= hi {
            delta[lo] += 1;
            delta[hi + 1] -= 1;
        }
    };
    for seen in ids.values() {
        if let Some(first_use) = seen.first_use {
            mark(first_use + 1, seen.first_result.unwrap_or(n).min(n));
            if let Some(first_result) = seen.first_result {
                mark(first_result + 1, seen.last_use);
            }
        }
    }
    let mut open = 0;
    (0..=n)
        .map(|c| {
            open += delta[c];
            open == 0 && !(c > 0 && records.get(c).is_some_and(Record::is_bound_to_previous))
        })
        .collect()
}

/// What a deferral says that the rescan decides: the target index, the floor, and the
/// nearest legal cuts below the floor and above the target.
type Deferral = (usize, usize, Option<usize>, Option<usize>);

fn deferral(d: &Defer) -> Deferral {
    (
        d.target_index,
        d.floor,
        d.nearest_legal_below,
        d.nearest_legal_above,
    )
}

/// The reference's answer (`reference::select_legal_cut`: the seed's floor walk and
/// backward search, `len` only when it is legal) computed over `legal`: the cut, or the
/// [`Deferral`]. **O(n)** per query.
fn rescan(legal: &[bool], sums: &[u64], target: u64, lookback: u64) -> Result<usize, Deferral> {
    let len = legal.len() - 1;
    let target_index = if target >= sums[len] {
        if legal[len] {
            return Ok(len);
        }
        len - 1
    } else {
        (0..len).find(|&i| sums[i + 1] >= target).unwrap_or(0)
    };
    let floor = floor(sums, target_index, lookback);
    match (floor..=target_index).rev().find(|&c| legal[c]) {
        Some(cut) => Ok(cut),
        None => Err((
            target_index,
            floor,
            (0..floor).rev().find(|&c| legal[c]),
            (target_index + 1..=len).find(|&c| legal[c]),
        )),
    }
}

/// The forward search's answer over `legal` (`Tracker::select_legal_cut_forward`):
/// the first legal cut at or past the cut wanted (the first whose prefix reaches the
/// target, `len` for a target covering the log) that compacts at most `target +
/// lookahead`, or the [`Deferral`]: the cut wanted as floor and target index, the
/// nearest legal cut strictly below it, the first legal one from it on. **O(n)**.
fn rescan_forward(
    legal: &[bool],
    sums: &[u64],
    target: u64,
    lookahead: u64,
) -> Result<usize, Deferral> {
    let len = legal.len() - 1;
    let wanted = if target >= sums[len] {
        len
    } else {
        (0..len)
            .find(|&i| sums[i + 1] >= target)
            .map_or(0, |i| i + 1)
    };
    let above = (wanted..=len).find(|&c| legal[c]);
    match above {
        Some(c) if sums[c] <= target.saturating_add(lookahead) => Ok(c),
        _ => Err((wanted, wanted, (0..wanted).rev().find(|&c| legal[c]), above)),
    }
}

/// Every query at `targets` × `lookbacks` against the rescan over the log's legality
/// ([`legality`], [`rescan`]), and one query in [`LITERAL_EVERY`] against the literal
/// `reference::select_legal_cut` too (at **O(n)** per cut it tests, and per cut of the
/// log for a deferral's nearest cuts, all of them took a minute); `what` names the log.
fn assert_queries_match(t: &Tracker, records: &[Record], rng: &mut Rng, what: &str) {
    assert_eq!(t.len(), records.len(), "{what}");
    let s = sums(records);
    let total = *s.last().unwrap_or(&0);
    assert_eq!(t.total_tokens(), total, "{what}");
    let legal = legality(records);
    if records.len() <= 1_500 {
        let want: Vec<bool> = (0..=records.len())
            .map(|c| reference::is_legal_cut(records, c))
            .collect();
        assert_eq!(
            legal, want,
            "{what}: the sweep's legality against the reference"
        );
    } else {
        for _ in 0..64 {
            let c = rng.range(0, records.len() as u64) as usize;
            assert_eq!(
                legal[c],
                reference::is_legal_cut(records, c),
                "{what}: cut {c}"
            );
        }
    }
    let mut targets: Vec<u64> = (0..30).map(|_| rng.range(0, total + 1)).collect();
    // Targets on and next to record boundaries, where `first_reaching` changes.
    for _ in 0..10 {
        let c = rng.range(0, records.len() as u64) as usize;
        targets.extend([s[c], s[c] + 1, s[c].saturating_sub(1)]);
    }
    targets.extend([0, 1, total, total.saturating_add(5), u64::MAX]);
    let mut asked = 0usize;
    for target in targets {
        for lookback in [0, 50, 700, 20_000, rng.range(0, total + 1), u64::MAX] {
            let at = format!("{what}: target {target} lookback {lookback}");
            let got = t
                .select_legal_cut(target, lookback)
                .map_err(|d| deferral(&d));
            assert_eq!(got, rescan(&legal, &s, target, lookback), "{at}");
            let forward = t
                .select_legal_cut_forward(target, lookback)
                .map_err(|d| deferral(&d));
            assert_eq!(
                forward,
                rescan_forward(&legal, &s, target, lookback),
                "{at}: forward"
            );
            asked += 1;
            if asked % LITERAL_EVERY == 0 {
                let literal = reference::select_legal_cut(records, target, lookback)
                    .map_err(|d| deferral(&d));
                assert_eq!(got, literal, "{at}: literal");
            }
            if target <= total {
                let want_first = (0..records.len()).find(|&i| s[i + 1] >= target);
                assert_eq!(t.first_record_reaching(target), want_first, "{at}");
            }
        }
    }
    // Position queries at random positions.
    for _ in 0..100 {
        let p = rng.range(0, records.len() as u64) as usize;
        assert_eq!(t.tokens_before(p), Some(s[p]), "{what}: tokens_before({p})");
        let before = t.legal_cut_at_or_before(p);
        assert!(
            before <= p && t.is_legal_cut(before),
            "{what}: at_or_before({p})"
        );
        assert!(
            (before + 1..=p).all(|c| !t.is_legal_cut(c)),
            "{what}: at_or_before({p})"
        );
        if let Some(after) = t.legal_cut_at_or_after(p) {
            assert!(
                after >= p && t.is_legal_cut(after),
                "{what}: at_or_after({p})"
            );
        }
    }
    let want: Vec<usize> = (0..=records.len()).filter(|&c| legal[c]).collect();
    assert_eq!(
        t.legal_cuts().collect::<Vec<_>>(),
        want,
        "{what}: legal cuts"
    );
}

/// A realistic session with damage: results moved (a little) before their call, stray
/// results.
fn damaged(seed: u64, n: usize) -> Vec<Record> {
    let mut rng = Rng::new(seed);
    let mut out: Vec<Record> = Vec::new();
    for r in Session::records(seed, n) {
        if rng.chance(0.03) {
            out.push(Record::tool_result(format!("ghost{}", rng.range(0, 9)), 5));
        }
        if matches!(r.kind(), RecordKind::ToolResult(_)) && rng.chance(0.02) && !out.is_empty() {
            // Within the last 30 records: the rescan tests every cut of an illegal
            // stretch at O(n) each, so stretches of thousands would take minutes.
            let back = rng.range(0, (out.len() as u64 - 1).min(30)) as usize;
            let at = out.len() - 1 - back;
            out.insert(at, r);
            continue;
        }
        out.push(r);
    }
    out
}

/// The records `t` accepted, appended one by one.
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

/// Random disjoint regions between legal cuts; some long (whole blocks of 64 go),
/// some removed.
fn regions(t: &Tracker, rng: &mut Rng) -> Vec<Replacement> {
    let cuts: Vec<usize> = t.legal_cuts().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < cuts.len() {
        if rng.chance(0.1) {
            let span = if rng.chance(0.3) { 200 } else { 4 };
            let j = (i + 1 + rng.range(0, span) as usize).min(cuts.len() - 1);
            out.push(if rng.chance(0.3) {
                Replacement::removal(cuts[i], cuts[j])
            } else {
                Replacement::summary(cuts[i], cuts[j], rng.range(0, 3_000))
            });
            i = j + usize::from(rng.chance(0.5));
        } else {
            i += rng.range(1, 40) as usize;
        }
    }
    out
}

/// The records after `regions` (each summary covers its region's calls).
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

/// `records` with record `i` holding `tokens` for each edit.
fn retoken(records: &[Record], edits: &[(usize, u64)]) -> Vec<Record> {
    let mut out = records.to_vec();
    for &(i, tokens) in edits {
        out[i] = out[i].clone().with_tokens(tokens);
    }
    out
}

#[test]
fn generated_logs_answer_as_the_rescan() {
    for seed in 0..16u64 {
        let n = [10, 200, 1_500, 4_000][seed as usize % 4];
        let (t, recs) = accepted(damaged(seed, n));
        t.assert_invariants();
        let mut rng = Rng::new(seed + 77);
        assert_queries_match(&t, &recs, &mut rng, &format!("seed {seed}, {n} records"));
    }
}

#[test]
fn after_replacements_and_token_edits_answer_as_the_rescan() {
    for seed in 0..6u64 {
        let n = [300, 1_500, 3_000][seed as usize % 3];
        let (mut t, mut recs) = accepted(damaged(seed, n));
        let mut rng = Rng::new(seed + 5);
        for round in 0..3 {
            let batch = regions(&t, &mut rng);
            t.replace_regions(&batch)
                .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
            recs = apply(&recs, &batch);
            t.assert_invariants();
            let what = format!("seed {seed} round {round} after {} regions", batch.len());
            assert_queries_match(&t, &recs, &mut rng, &what);
            // Token edits: a few scattered records, some growing past u32 within a
            // block (the wide block layout).
            if !recs.is_empty() {
                let mut at: Vec<usize> = (0..1 + rng.range(0, 6) as usize)
                    .map(|_| rng.range(0, recs.len() as u64 - 1) as usize)
                    .collect();
                at.sort_unstable();
                at.dedup();
                let edits: Vec<(usize, u64)> = at
                    .into_iter()
                    .map(|i| {
                        let tokens = if rng.chance(0.2) {
                            u64::from(u32::MAX) + rng.range(0, 1_000)
                        } else {
                            rng.range(0, 2_000)
                        };
                        (i, tokens)
                    })
                    .collect();
                t.set_tokens(&edits)
                    .unwrap_or_else(|e| panic!("seed {seed} round {round}: {e}"));
                recs = retoken(&recs, &edits);
                t.assert_invariants();
                assert_queries_match(&t, &recs, &mut rng, &format!("{what}, token edits"));
            }
            // Appending after the edits keeps the index exact.
            for r in Session::records(seed + 1_000 + round, 150) {
                let r = match r.kind() {
                    RecordKind::ToolUse(id) => Record::tool_use(format!("{id}-{round}"), 9),
                    RecordKind::ToolResult(id) => Record::tool_result(format!("{id}-{round}"), 9),
                    _ => r,
                };
                if t.append(r.clone()).is_ok() {
                    recs.push(r);
                }
            }
            t.assert_invariants();
            assert_queries_match(&t, &recs, &mut rng, &format!("{what}, appended"));
        }
    }
}

#[test]
fn real_transcripts_answer_as_the_rescan() {
    for (name, fmt) in FIXTURES {
        let text = fixture(name);
        let transcript =
            format::read(&text, fmt, &ByteEstimate).unwrap_or_else(|e| panic!("{name}: {e}"));
        let (records, _) = transcript.records(0);
        let (mut t, mut recs) = accepted(records);
        let mut rng = Rng::new(11);
        assert_queries_match(&t, &recs, &mut rng, name);
        // A compaction of the front and one further in, as the compaction layer does.
        let batch = regions(&t, &mut rng);
        if !batch.is_empty() {
            t.replace_regions(&batch)
                .unwrap_or_else(|e| panic!("{name}: {e}"));
            recs = apply(&recs, &batch);
            t.assert_invariants();
            assert_queries_match(&t, &recs, &mut rng, &format!("{name}, compacted"));
        }
    }
}
