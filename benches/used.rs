//! The set of used call ids: inserting N random fingerprints (none repeated) into one
//! `hashbrown` set (what `CallBook` used before) and into `UsedIds` (a small recent
//! table, frozen tables and a Bloom filter), at N = 10^5, 10^6, 3*10^6, in one run.
//! Both use the same pass-through hasher (the fingerprint's first word). Each iteration
//! fills a fresh set; the filled set is returned so criterion drops it outside the
//! clock. Heap bytes per key of both are printed before each size.

use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::Duration;

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use cutpoint::testing::UsedIds;
use std::hint::black_box;

const SIZES: [usize; 3] = [100_000, 1_000_000, 3_000_000];

/// A fingerprint as the plain set stores it: hashed by its first word only.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key(u64, u64);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0);
    }
}

#[derive(Default)]
struct PassThrough(u64);

impl Hasher for PassThrough {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u64 words are hashed")
    }
    fn write_u64(&mut self, word: u64) {
        self.0 ^= word;
    }
}

type PlainSet = hashbrown::HashSet<Key, BuildHasherDefault<PassThrough>>;

/// splitmix64: seeded, uniformly mixed words, as the keyed fingerprints are.
fn words(n: usize, seed: u64) -> Vec<[u64; 2]> {
    let mut x = seed;
    let mut next = move || {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..n).map(|_| [next(), next()]).collect()
}

/// Bytes of a `hashbrown` table of 16-byte keys with this capacity (as `CallBook`
/// estimated it): buckets of 17 bytes plus a trailing group of 16 control bytes.
fn plain_bytes(set: &PlainSet) -> usize {
    let buckets = (set.capacity() * 8 / 7).next_power_of_two();
    buckets * 17 + 16
}

fn insert(c: &mut Criterion) {
    let mut group = c.benchmark_group("used");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.sample_size(10);
    for n in SIZES {
        let input = words(n, 0x5eed ^ n as u64);
        {
            let mut plain = PlainSet::default();
            let mut used = UsedIds::new();
            for &[a, b] in &input {
                plain.insert(Key(a, b));
                used.insert_words([a, b]);
            }
            println!(
                "used/{n}: heap bytes per key: hashbrown {:.2}, UsedIds {:.2}",
                plain_bytes(&plain) as f64 / n as f64,
                used.heap_bytes() as f64 / n as f64
            );
        }
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("hashbrown/{n}"), |b| {
            b.iter_batched(
                || (),
                |()| {
                    let mut set = PlainSet::default();
                    let mut fresh = 0usize;
                    for &[a, b] in &input {
                        fresh += usize::from(set.insert(Key(a, b)));
                    }
                    black_box(fresh);
                    set
                },
                BatchSize::PerIteration,
            )
        });
        group.bench_function(format!("used_ids/{n}"), |b| {
            b.iter_batched(
                || (),
                |()| {
                    let mut set = UsedIds::new();
                    let mut fresh = 0usize;
                    for &w in &input {
                        fresh += usize::from(set.insert_words(w));
                    }
                    black_box(fresh);
                    set
                },
                BatchSize::PerIteration,
            )
        });
    }
    group.finish();
}

criterion_group!(benches, insert);
criterion_main!(benches);
