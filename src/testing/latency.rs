//! Memory latency of this machine, measured in the same run as the numbers compared
//! with it: one dependent random load from an array much larger than the caches.
//!
//! [`DependentLoads`] is a random cyclic permutation (Sattolo's algorithm) of `u32`
//! slots; following it visits every slot once in a random order, each load's address
//! coming from the previous load, so loads cannot overlap and hardware prefetchers
//! cannot guess the next line. The time per step is one main-memory load (page walk
//! included, as for any random access into a large heap).

use std::hint::black_box;
use std::time::Instant;

use super::synth::Rng;

/// A pointer chase over a random cyclic permutation. **O(slots)** memory (4 bytes per
/// slot), **O(slots)** random writes to build.
pub struct DependentLoads {
    next: Vec<u32>,
}

impl DependentLoads {
    /// A chase over `bytes` of memory (256 MB is several times any cache of today's
    /// machines). **O(bytes / 4)**.
    pub fn new(bytes: usize, seed: u64) -> Self {
        let slots = (bytes / 4).clamp(2, u32::MAX as usize);
        let mut next: Vec<u32> = (0..slots as u32).collect();
        let mut rng = Rng::new(seed);
        // Sattolo: a uniformly random permutation with exactly one cycle.
        for i in (1..slots).rev() {
            let j = (rng.next_u64() % i as u64) as usize;
            next.swap(i, j);
        }
        DependentLoads { next }
    }

    /// Nanoseconds per dependent load over `loads` steps of the chase (after a warm-up
    /// of `loads / 8`). **O(loads)**.
    pub fn ns_per_load(&self, loads: usize) -> f64 {
        let mut at = 0u32;
        for _ in 0..loads / 8 {
            at = self.next[at as usize];
        }
        let start = Instant::now();
        for _ in 0..loads {
            at = self.next[at as usize];
        }
        let took = start.elapsed();
        black_box(at);
        took.as_nanos() as f64 / loads.max(1) as f64
    }

    /// One step of the chase from `at`, for a caller that times its own loop. **O(1)**.
    #[inline]
    pub fn step(&self, at: u32) -> u32 {
        self.next[at as usize]
    }
}
