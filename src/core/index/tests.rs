//! Unit tests of the index against linear scans.

use super::*;

fn sums(tokens: &[u64]) -> PrefixSums {
    let mut s = PrefixSums::default();
    let mut acc = 0;
    for &t in tokens {
        acc += t;
        s.push(acc);
    }
    s
}

/// The seed's loop, written out, to pin `floor` to it.
fn seed_floor(tokens: &[u64], t: usize, lookback: u64) -> usize {
    let mut floor = t;
    let mut acc = 0;
    for j in (0..=t).rev() {
        acc += tokens[j];
        if acc > lookback {
            break;
        }
        floor = j;
    }
    floor
}

#[test]
fn floor_matches_the_seed_loop() {
    let tokens = [5, 0, 3, 0, 0, 7, 1, 10, 0, 2];
    let s = sums(&tokens);
    for t in 0..tokens.len() {
        for lookback in 0..30 {
            assert_eq!(
                s.floor(t, lookback),
                seed_floor(&tokens, t, lookback),
                "t={t} lookback={lookback}"
            );
        }
    }
}

/// Offsets at the edge of `u32` (exactly `u32::MAX`, and one past it, which widens
/// the block) search like any others.
#[test]
fn offsets_at_the_edge_of_u32_search_exactly() {
    let max = u64::from(u32::MAX);
    for tokens in [
        vec![max, 0, 1],
        vec![1, max - 1, 0, 2],
        vec![max + 1, 0, 3],
        vec![0; 70],
    ] {
        let s = sums(&tokens);
        s.check().unwrap();
        let all: Vec<u64> = (0..s.len()).map(|i| s.at(i)).collect();
        for target in [0, 1, max - 1, max, max + 1, max + 2, max + 5, s.total() + 1] {
            let want = all.iter().take_while(|&&v| v < target).count();
            assert_eq!(s.first_reaching(target), want, "{tokens:?} target {target}");
            let (routes, _) = s.first_reaching_by_every_route(target);
            assert_eq!(routes, [want; 3], "{tokens:?} target {target}");
        }
    }
}

#[test]
fn first_reaching_is_the_first_inclusive_sum_at_or_above() {
    let s = sums(&[0, 4, 0, 6]);
    assert_eq!(s.first_reaching(0), 0);
    assert_eq!(s.first_reaching(1), 1);
    assert_eq!(s.first_reaching(4), 1);
    assert_eq!(s.first_reaching(5), 3);
    assert_eq!(s.first_reaching(10), 3);
    assert_eq!(s.first_reaching(11), 4);
}

#[test]
fn revoke_removes_only_cuts_above_the_floor() {
    let mut c = LegalCuts::default();
    for p in [1, 2, 5, 6] {
        c.push(p);
    }
    c.revoke_after(2);
    assert_eq!(c.iter().collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(c.at_or_before(9), 2);
    assert_eq!(c.at_or_before(1), 1);
    assert_eq!(c.at_or_after(2), Some(2));
    assert_eq!(c.at_or_after(3), None);
    assert!(c.contains(1) && !c.contains(5));
}

#[test]
fn replace_keeps_sums_and_cuts_exact_on_either_side() {
    for (start, end) in [(1, 4), (5, 8), (0, 9), (3, 9), (0, 2)] {
        let tokens = [5u64, 0, 3, 0, 0, 7, 1, 10, 0, 2];
        let mut s = sums(&tokens);
        s.replace_many(&[Replacement::summary(start, end, 4)]);
        let mut want: Vec<u64> = tokens[..start].to_vec();
        want.push(4);
        want.extend_from_slice(&tokens[end..]);
        let got: Vec<u64> = (0..s.len()).map(|i| s.record(i)).collect();
        assert_eq!(got, want, "region {start}..{end}");
        s.check().unwrap();
        s.push(s.total() + 6);
        assert_eq!(s.record(s.len() - 1), 6);
        assert_eq!(s.first_reaching(s.total()), s.len() - 1);

        let mut c = LegalCuts::default();
        for p in [1, 2, 3, 4, 5, 8, 9, 10] {
            c.push(p);
        }
        if !(c.contains(start) && c.contains(end)) {
            continue;
        }
        c.replace_many(&[Replacement::summary(start, end, 0)]);
        let down = end - start - 1;
        let want: Vec<usize> = [0, 1, 2, 3, 4, 5, 8, 9, 10]
            .into_iter()
            .filter(|&p| p <= start || p >= end)
            .map(|p| if p >= end { p - down } else { p })
            .collect();
        assert_eq!(c.iter().collect::<Vec<_>>(), want, "region {start}..{end}");
        c.check(10 - down).unwrap();
        c.push(11 - down);
        assert_eq!(c.last(), 11 - down);
        assert!(c.contains(start) && c.contains(start + 1));
    }
}

/// Long indexes (many blocks, a wide block, a long stretch without legal cuts)
/// answer every search like a linear scan, through compactions that move the head
/// and ones that move the tail.
#[test]
fn long_indexes_search_like_a_scan_across_replace() {
    let n = 40_000;
    let mut tokens: Vec<u64> = (0..n as u64)
        .map(|i| i % 7 + (i % 13 == 0) as u64 * 50)
        .collect();
    // One absurd record: its block's offsets no longer fit in u32.
    tokens[700] = 5_000_000_000;
    let mut s = sums(&tokens);
    let mut c = LegalCuts::default();
    // A stretch of 2,000 positions without legal cuts.
    for p in (1..=n).filter(|p| p % 50 != 0 && !(1_000..3_000).contains(p)) {
        c.push(p);
    }
    let check = |s: &PrefixSums, c: &LegalCuts| {
        s.check().unwrap();
        c.check(s.len()).unwrap();
        let all: Vec<u64> = (0..s.len()).map(|i| s.at(i)).collect();
        let cuts: Vec<usize> = c.iter().collect();
        assert_eq!(cuts.len(), c.len());
        let mut back: Vec<usize> = c.iter().rev().collect();
        back.reverse();
        assert_eq!(back, cuts, "iterating from the back agrees");
        for k in 0..200u64 {
            let target = k * s.total() / 199;
            let want = all.iter().take_while(|&&v| v < target).count();
            assert_eq!(s.first_reaching(target), want, "target {target}");
            let (routes, _) = s.first_reaching_by_every_route(target);
            assert_eq!(routes, [want; 3], "target {target}");
            let pos = (k as usize * 997) % (s.len() + 1);
            let want = cuts.iter().copied().filter(|&p| p <= pos).max();
            assert_eq!(Some(c.at_or_before(pos)), want, "pos {pos}");
            let want = cuts.iter().copied().find(|&p| p >= pos);
            assert_eq!(c.at_or_after(pos), want, "pos {pos}");
            assert_eq!(c.contains(pos), cuts.contains(&pos), "pos {pos}");
            if pos < s.len() {
                let seed: Vec<u64> = (0..s.len()).map(|i| s.record(i)).collect();
                for lookback in [0, 40, 300, 10_000, 6_000_000_000] {
                    assert_eq!(
                        s.floor(pos, lookback),
                        seed_floor(&seed, pos, lookback),
                        "pos {pos} lookback {lookback}"
                    );
                }
            }
        }
    };
    check(&s, &c);
    for extra in 1..=200u64 {
        s.push(s.total() + extra);
        c.push(n + extra as usize);
    }
    c.revoke_after(n + 70);
    check(&s, &c);
    // A region from a legal cut near the front: the head side moves.
    s.replace_many(&[Replacement::summary(1, 901, 9)]);
    c.replace_many(&[Replacement::summary(1, 901, 0)]);
    check(&s, &c);
    // One near the back: the tail side moves.
    let (a, b) = (c.at_or_before(s.len() - 400), c.at_or_before(s.len() - 10));
    s.replace_many(&[Replacement::summary(a, b, 5)]);
    c.replace_many(&[Replacement::summary(a, b, 0)]);
    check(&s, &c);
    // One that swallows the stretch without cuts and the wide block.
    let (a, b) = (
        c.at_or_before(50),
        c.at_or_after(3_000 - 899).expect("a cut"),
    );
    s.replace_many(&[Replacement::summary(a, b, 77)]);
    c.replace_many(&[Replacement::summary(a, b, 0)]);
    check(&s, &c);
    // Growing the last record (an open record) keeps the sums exact.
    s.set_last(s.total() + 10);
    check(&s, &c);
}

/// A small deterministic generator for the tests below.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn all_sums(s: &PrefixSums) -> Vec<u64> {
    (0..s.len()).map(|i| s.at(i)).collect()
}

/// Token counts as a plain vector, the linear rebuild the in-place edits must equal.
fn records_of(s: &PrefixSums) -> Vec<u64> {
    (0..s.len()).map(|i| s.record(i)).collect()
}

/// `set_tokens` equals a linear rebuild with the new sizes, on logs of every length
/// around block edges, before and after a compaction has moved the head and the
/// shift, with narrow and wide blocks, edits spread or bunched at either end.
#[test]
fn set_tokens_equals_a_linear_rebuild() {
    let mut rng = Lcg(7);
    for case in 0..400 {
        let n = match case % 4 {
            0 => rng.next(10) as usize + 1,
            1 => rng.next(200) as usize + 60,
            2 => rng.next(3) as usize + 63,
            _ => rng.next(5_000) as usize + 1,
        };
        let big = case % 7 == 0;
        let tokens: Vec<u64> = (0..n)
            .map(|_| {
                if big && rng.next(20) == 0 {
                    u64::from(u32::MAX) + rng.next(1_000)
                } else {
                    rng.next(3_000)
                }
            })
            .collect();
        let mut s = sums(&tokens);
        // Half the cases after a compaction, so that head and shift are not trivial.
        if case % 2 == 1 && n > 3 {
            let start = rng.next(n as u64 / 2) as usize;
            let end = start + 1 + rng.next((n - start - 1) as u64) as usize;
            s.replace_many(&[Replacement::summary(start, end, rng.next(500))]);
            s.check().unwrap();
        }
        // Built before the edits, so that they must keep it exact (`check`).
        s.first_reaching_by_every_route(1);
        let before = records_of(&s);
        let k = rng.next(s.len() as u64).min(40) as usize + 1;
        let mut at: Vec<usize> = (0..k)
            .map(|_| match case % 3 {
                0 => rng.next(s.len() as u64) as usize,
                1 => rng.next(s.len().min(70) as u64) as usize,
                _ => s.len() - 1 - rng.next(s.len().min(70) as u64) as usize,
            })
            .collect();
        at.sort_unstable();
        at.dedup();
        let edits: Vec<(usize, u64)> = at.iter().map(|&i| (i, rng.next(4_000))).collect();
        let mut want = before.clone();
        for &(i, t) in &edits {
            want[i] = t;
        }
        s.set_tokens(&edits);
        s.check().unwrap_or_else(|e| panic!("case {case}: {e}"));
        assert_eq!(records_of(&s), want, "case {case}");
        assert_eq!(all_sums(&s), all_sums(&sums(&want)), "case {case}");
        // Searches agree with the rebuild, through the upper level too.
        let rebuilt = sums(&want);
        for _ in 0..20 {
            let target = rng.next(s.total() + 2);
            let want = rebuilt.first_reaching(target);
            assert_eq!(s.first_reaching(target), want);
            assert_eq!(s.first_reaching_by_every_route(target).0, [want; 3]);
        }
    }
}

/// The records of a log after `regions`: each region becomes its summary, or nothing.
fn replaced(tokens: &[u64], regions: &[Replacement]) -> Vec<u64> {
    let mut out = Vec::new();
    let mut at = 0;
    for r in regions {
        out.extend_from_slice(&tokens[at..r.start]);
        out.extend(r.summary_tokens);
        at = r.end;
    }
    out.extend_from_slice(&tokens[at..]);
    out
}

/// Random sorted, disjoint regions of `0..n` (some touching), some removed.
fn random_regions(rng: &mut Lcg, n: usize, cuts: &[usize]) -> Vec<Replacement> {
    let mut out = Vec::new();
    let mut i = 0;
    while i + 1 < cuts.len() {
        if rng.next(3) == 0 {
            let j = i + 1 + rng.next(3).min((cuts.len() - 2 - i) as u64) as usize;
            let (start, end) = (cuts[i], cuts[j]);
            debug_assert!(end <= n);
            out.push(if rng.next(3) == 0 {
                Replacement::removal(start, end)
            } else {
                Replacement::summary(start, end, rng.next(300))
            });
            i = j + usize::from(rng.next(2) == 0);
        } else {
            i += 1;
        }
    }
    out
}

/// Batched replacement equals the linear rebuild, for sums and legal cuts, whichever
/// side moves.
#[test]
fn replace_many_equals_a_linear_rebuild() {
    let mut rng = Lcg(11);
    for case in 0..600 {
        let n = match case % 3 {
            0 => rng.next(12) as usize + 1,
            1 => rng.next(300) as usize + 1,
            _ => rng.next(3_000) as usize + 1,
        };
        let tokens: Vec<u64> = (0..n).map(|_| rng.next(1_000)).collect();
        let mut s = sums(&tokens);
        // Legal cuts: 0, n and a random subset.
        let mut cut_list: Vec<usize> = (1..n).filter(|_| rng.next(3) > 0).collect();
        cut_list.insert(0, 0);
        cut_list.push(n);
        let mut c = LegalCuts::default();
        for &p in &cut_list[1..] {
            c.push(p);
        }
        let regions = random_regions(&mut rng, n, &cut_list);
        if regions.is_empty() {
            continue;
        }
        let want_tokens = replaced(&tokens, &regions);
        s.first_reaching_by_every_route(1);
        s.replace_many(&regions);
        s.check().unwrap_or_else(|e| panic!("case {case}: {e}"));
        // Searches after the replacement, by every route (the upper levels rebuilt).
        let want_sums = all_sums(&sums(&want_tokens));
        for _ in 0..10 {
            let target = rng.next(s.total() + 2);
            let want = want_sums.iter().take_while(|&&v| v < target).count();
            assert_eq!(s.first_reaching_by_every_route(target).0, [want; 3]);
        }
        assert_eq!(records_of(&s), want_tokens, "case {case}: {regions:?}");
        // The cuts: every old cut outside the regions' insides, renumbered.
        let remap = Remap::new(&regions);
        let mut want_cuts: Vec<usize> = cut_list.iter().filter_map(|&p| remap.cut(p)).collect();
        want_cuts.dedup();
        c.replace_many(&regions);
        c.check(want_tokens.len())
            .unwrap_or_else(|e| panic!("case {case}: {e}"));
        assert_eq!(
            c.iter().collect::<Vec<_>>(),
            want_cuts,
            "case {case}: {regions:?}"
        );
        for (i, _) in tokens.iter().enumerate() {
            if let Some(j) = remap.record(i) {
                assert_eq!(want_tokens[j], tokens[i], "record {i} moves to {j}");
            }
        }
    }
}

/// The `near` level names the target's block exactly or says it cannot (then the
/// group's bases decide): on groups whose spans need every scale from 0 to 48 bits,
/// with targets on, just before and just after every block's base, the routes agree
/// with a scan; targets just past a base are the ones that read the bases, and a
/// random target almost never does.
#[test]
fn the_near_level_names_the_block_or_defers_to_the_bases() {
    let mut rng = Lcg(23);
    // 64 records a block, so that block `b`'s base is the sum of the first `64 b`.
    let mut tokens = Vec::new();
    for group in 0..40u32 {
        // Each group's blocks take a span of about 2^(16 + group) tokens (past 2^48
        // the span overflows a u64 sum across groups; cap the scale at 48 bits).
        let span = 1u64 << (16 + group.min(32));
        for _ in 0..64 * 64 {
            let t = rng.next(span / 64 / 64 * 2 + 1);
            tokens.push(t);
        }
    }
    // Some blocks with no tokens at all (equal bases), and one enormous record.
    tokens[64 * 64 * 3..64 * 64 * 3 + 64 * 5].fill(0);
    tokens[64 * 64 * 7 + 10] = 1 << 50;
    let mut s = sums(&tokens);
    s.check().unwrap();
    let all = all_sums(&s);
    let scan = |target: u64| all.iter().take_while(|&&v| v < target).count();
    let (mut deferred, mut named) = (0, 0);
    for b in 0..s.len() / 64 {
        let base = if b == 0 { 0 } else { all[64 * b - 1] };
        for target in [base.saturating_sub(1), base, base + 1, base + 2] {
            let (routes, fell_back) = s.first_reaching_by_every_route(target);
            assert_eq!(routes, [scan(target); 3], "block {b} target {target}");
            if target == base + 1 {
                deferred += usize::from(fell_back);
            }
        }
    }
    for _ in 0..20_000 {
        let target = rng.next(s.total() + 2);
        let (routes, fell_back) = s.first_reaching_by_every_route(target);
        assert_eq!(routes, [scan(target); 3], "target {target}");
        named += usize::from(!fell_back);
    }
    assert!(
        deferred > s.len() / 64 / 2,
        "{deferred} targets past a base deferred"
    );
    assert!(
        named > 19_000,
        "{named} of 20,000 random targets named their block"
    );
    // Pushes widen a group's scale as its span grows: still exact.
    for k in 0..64 * 64 * 2 {
        s.push(s.total() + (1u64 << (k % 40)));
    }
    s.check().unwrap();
}

/// A log past the size at which searches take the `near` route by default (2^17
/// blocks, 8.4 million records) answers like a scan, through token edits and a
/// compaction that keep or rebuild its levels.
#[test]
fn a_log_past_the_near_gate_searches_like_a_scan() {
    let n = (1 << 17) * 64 + 5_000;
    let mut rng = Lcg(31);
    let tokens: Vec<u64> = (0..n).map(|_| rng.next(40)).collect();
    let mut s = sums(&tokens);
    let probe = |s: &PrefixSums, rng: &mut Lcg| {
        let all = all_sums(s);
        for k in 0..400 {
            let target = if k % 2 == 0 {
                rng.next(s.total() + 2)
            } else {
                // Just past a block's base: the targets that defer to the bases.
                let b = rng.next((s.len() / 64) as u64) as usize;
                all[(64 * b).saturating_sub(1)] + 1
            };
            let want = all.iter().take_while(|&&v| v < target).count();
            assert_eq!(s.first_reaching(target), want, "target {target}");
        }
    };
    probe(&s, &mut rng);
    // Edits near the front (the later blocks move through the shift) and near the
    // back (they move themselves), with the levels built.
    s.set_tokens(&[(3, 1_000_000), (70_000, 0), (70_001, 5)]);
    s.set_tokens(&[(n - 9_000, 123_456), (n - 1, 7)]);
    s.check().unwrap();
    probe(&s, &mut rng);
    // A compaction drops the levels; the next search rebuilds them.
    s.replace_many(&[Replacement::summary(10, 2_000_000, 900)]);
    s.check().unwrap();
    probe(&s, &mut rng);
    s.check().unwrap();
}
