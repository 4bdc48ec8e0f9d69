//! Searching prefix token sums: `slice::partition_point` against the contenders the
//! performance issue lists, on the prefix sums of one seeded realistic session, at
//! 10^3..10^7 elements, with the same seeded random targets, in one run.
//!
//! - `partition_point`: the baseline, what `PrefixSums::first_reaching` does today.
//! - `sampled32` / `sampled64`: `SampledIndex` (the prototype in `benches/support/sampled.rs`) at two fanouts (the
//!   one kept; 16 and 128 lost to both in an earlier run).
//! - `eytzinger`: BFS layout, branch-free descent, no prefetch (see `search`'s docs).
//! - `interpolation`: a guess from the line through the first and last sums, then a
//!   gallop and a bisection.
//! - `one_load`: a single load at a random position: the floor any search of an array
//!   this size pays (one cache or DRAM round trip), for scale.
//!
//! Every contender's answers are checked against `partition_point` before timing.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
#[path = "support/sampled.rs"]
#[allow(dead_code, reason = "this bench uses part of the prototype")]
mod sampled;
use cutpoint::testing::synth::{Rng, Session};
use sampled::SampledIndex;
use std::hint::black_box;
use std::time::Duration;

const SIZES: [usize; 5] = [1_000, 10_000, 100_000, 1_000_000, 10_000_000];

/// Inclusive prefix sums of the first `n` records of seeded session 7.
fn prefix_sums(n: usize) -> Vec<u64> {
    Session::new(7)
        .take(n)
        .scan(0u64, |acc, r| {
            *acc += r.tokens();
            Some(*acc)
        })
        .collect()
}

fn targets(total: u64, count: usize) -> Vec<u64> {
    let mut rng = Rng::new(99);
    (0..count).map(|_| rng.range(0, total)).collect()
}

/// The sorted array in Eytzinger (BFS) order, 1-based, with each slot's sorted rank.
struct Eytzinger {
    keys: Vec<u64>,
    rank: Vec<u32>,
}

impl Eytzinger {
    fn new(sorted: &[u64]) -> Self {
        let n = sorted.len();
        let mut e = Eytzinger {
            keys: vec![0; n + 1],
            rank: vec![0; n + 1],
        };
        // In-order walk of the implicit tree (children of k: 2k, 2k + 1) hands out the
        // sorted elements in order.
        let mut next = 0;
        let mut stack = Vec::new();
        let mut k = 1;
        while k <= n || !stack.is_empty() {
            while k <= n {
                stack.push(k);
                k *= 2;
            }
            let top = stack.pop().expect("non-empty");
            e.keys[top] = sorted[next];
            e.rank[top] = next as u32;
            next += 1;
            k = 2 * top + 1;
        }
        e
    }

    /// Number of elements `< target`.
    fn partition_point_lt(&self, target: u64) -> usize {
        let n = self.keys.len() - 1;
        let mut k = 1;
        while k <= n {
            k = 2 * k + usize::from(self.keys[k] < target);
        }
        // Undo the right turns after the last left turn: that node is the first
        // element >= target (0 when there is none).
        k >>= k.trailing_ones() + 1;
        if k == 0 { n } else { self.rank[k] as usize }
    }
}

/// A guess from the straight line through the first and last sums, then a gallop
/// towards the answer and a bisection of the last gap.
fn interpolation_lt(seq: &[u64], target: u64) -> usize {
    let n = seq.len();
    let (Some(&first), Some(&last)) = (seq.first(), seq.last()) else {
        return 0;
    };
    if target <= first {
        return 0;
    }
    if target > last {
        return n;
    }
    let span = u128::from(last - first).max(1);
    let guess = (u128::from(target - first) * (n as u128 - 1) / span) as usize;
    let guess = guess.min(n - 1);
    let mut step = 1;
    if seq[guess] < target {
        // Answer in guess + 1..=n: gallop right.
        let mut lo = guess + 1;
        loop {
            let probe = (lo + step - 1).min(n - 1);
            if seq[probe] >= target {
                return lo + seq[lo..probe].partition_point(|&s| s < target);
            }
            if probe == n - 1 {
                return n;
            }
            lo = probe + 1;
            step *= 2;
        }
    } else {
        // Answer in 0..=guess: gallop left.
        let mut hi = guess;
        loop {
            let probe = hi.saturating_sub(step);
            if seq[probe] < target {
                return probe + 1 + seq[probe + 1..hi].partition_point(|&s| s < target);
            }
            if probe == 0 {
                return 0;
            }
            hi = probe;
            step *= 2;
        }
    }
}

fn search(c: &mut Criterion) {
    let mut group = c.benchmark_group("search");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));
    let full = prefix_sums(*SIZES.last().expect("sizes"));
    for n in SIZES {
        let seq = full[..n].to_vec();
        let ts = targets(seq[n - 1], 1 << 14);
        let s32 = SampledIndex::<u64, 32>::from_vec(seq.clone());
        let s64 = SampledIndex::<u64, 64>::from_vec(seq.clone());
        let eyt = Eytzinger::new(&seq);
        for &t in &ts {
            let want = seq.partition_point(|&s| s < t);
            assert_eq!(s32.partition_point(|&s| s < t), want);
            assert_eq!(s64.partition_point(|&s| s < t), want);
            assert_eq!(eyt.partition_point_lt(t), want);
            assert_eq!(interpolation_lt(&seq, t), want);
        }
        let positions: Vec<usize> = {
            let mut rng = Rng::new(5);
            (0..ts.len())
                .map(|_| rng.range(0, n as u64 - 1) as usize)
                .collect()
        };

        macro_rules! contender {
            ($name:literal, $inputs:expr, |$t:ident| $body:expr) => {
                group.bench_with_input(BenchmarkId::new($name, n), &$inputs, |b, inputs| {
                    let mut i = 0;
                    b.iter(|| {
                        i = (i + 1) & (inputs.len() - 1);
                        let $t = inputs[i];
                        black_box($body)
                    })
                });
            };
        }
        contender!("partition_point", ts, |t| seq.partition_point(|&s| s < t));
        contender!("sampled32", ts, |t| s32.partition_point(|&s| s < t));
        contender!("sampled64", ts, |t| s64.partition_point(|&s| s < t));
        contender!("eytzinger", ts, |t| eyt.partition_point_lt(t));
        contender!("interpolation", ts, |t| interpolation_lt(&seq, t));
        contender!("one_load", positions, |p| seq[p]);

        // Latency rather than throughput: each target depends on the previous answer,
        // so one search cannot overlap the next (as when queries come one at a time).
        macro_rules! chained {
            ($name:literal, |$t:ident| $body:expr) => {
                group.bench_with_input(BenchmarkId::new($name, n), &ts, |b, ts| {
                    let mut i = 0;
                    let mut prev = 0usize;
                    b.iter(|| {
                        i = (i + 1) & (ts.len() - 1);
                        let $t = ts[i] ^ (prev as u64 & 1);
                        prev = $body;
                        prev
                    })
                });
            };
        }
        chained!("chained/partition_point", |t| seq
            .partition_point(|&s| s < t));
        chained!("chained/sampled32", |t| s32.partition_point(|&s| s < t));
        chained!("chained/sampled64", |t| s64.partition_point(|&s| s < t));
        chained!("chained/one_load", |t| seq[t as usize % n] as usize);
    }
    group.finish();
}

criterion_group!(benches, search);
criterion_main!(benches);
