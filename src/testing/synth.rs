//! Synthetic agent sessions, deterministic from a seed: for benchmarks, examples and
//! tests that need realistic logs of any length.
//!
//! The shape follows real agent transcripts: a large first user record (system prompt
//! and task), then turns of a short user message and one to several assistant rounds;
//! each round is assistant text followed by 0-4 parallel tool calls (bound to the
//! text, as in one provider message) whose results come back in shuffled order (bound
//! together, as in one user message). Token sizes range from tens to thousands, with a
//! heavy tail for tool results. Call ids look like provider ids (`toolu_` + 24 chars).

use crate::record::Record;

/// A small, fast, seeded generator (xorshift64*). Not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed` (any value, 0 included). **O(1)**.
    pub fn new(seed: u64) -> Self {
        // splitmix64 of the seed: nearby seeds give unrelated streams, and the state is
        // never zero (xorshift's one fixed point).
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)) | 1)
    }

    /// The next 64 random bits. **O(1)**.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A number in `lo..=hi` (`lo <= hi`). **O(1)**.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// `true` with probability `p`. **O(1)**.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 > 1.0 - p
    }
}

/// A stream of realistic session records. Every call is answered within its round, so
/// the stream is a valid log at every round boundary; [`Session::records`] cuts it at
/// a fixed count, which may leave the last round's calls pending, as mid-turn.
#[derive(Clone, Debug)]
pub struct Session {
    rng: Rng,
    next_call: u64,
    queue: std::collections::VecDeque<Record>,
    started: bool,
}

impl Session {
    /// A session from `seed`. **O(1)**.
    pub fn new(seed: u64) -> Self {
        Session {
            rng: Rng::new(seed),
            next_call: 0,
            queue: std::collections::VecDeque::new(),
            started: false,
        }
    }

    /// Record `i` of the id-free sequence the benchmarks append: user and assistant
    /// records in turn, tens to hundreds of tokens. **O(1)**, no allocation.
    pub fn plain_record(i: u64) -> Record {
        if i % 2 == 0 {
            Record::user(i % 500)
        } else {
            Record::assistant(i % 700)
        }
    }

    /// The first `n` records of the session from `seed`. **O(n)**.
    pub fn records(seed: u64, n: usize) -> Vec<Record> {
        Session::new(seed).take(n).collect()
    }

    fn call_id(&mut self) -> String {
        self.next_call += 1;
        // Provider-like: a fixed prefix and 24 characters.
        format!("toolu_{:08x}{:016x}", self.next_call, self.rng.next_u64())
    }

    fn turn(&mut self) {
        let rng = &mut self.rng;
        let user = if self.started {
            rng.range(10, 400)
        } else {
            rng.range(1_500, 6_000)
        };
        self.started = true;
        self.queue.push_back(Record::user(user));
        let rounds = self.rng.range(1, 6);
        for _ in 0..rounds {
            let text = self.rng.range(20, 800);
            self.queue.push_back(Record::assistant(text));
            let calls = match self.rng.range(0, 9) {
                0 | 1 => 0,
                2..=5 => 1,
                6 | 7 => 2,
                8 => 3,
                _ => 4,
            };
            let ids: Vec<String> = (0..calls).map(|_| self.call_id()).collect();
            for id in &ids {
                let args = self.rng.range(15, 300);
                self.queue
                    .push_back(Record::tool_use(id.as_str(), args).bound_to_previous());
            }
            let mut order: Vec<usize> = (0..ids.len()).collect();
            for i in (1..order.len()).rev() {
                let j = self.rng.range(0, i as u64) as usize;
                order.swap(i, j);
            }
            for (k, &i) in order.iter().enumerate() {
                let size = if self.rng.chance(0.15) {
                    self.rng.range(2_000, 12_000)
                } else {
                    self.rng.range(20, 1_500)
                };
                let result = Record::tool_result(ids[i].as_str(), size);
                self.queue.push_back(if k > 0 {
                    result.bound_to_previous()
                } else {
                    result
                });
            }
        }
        let closing = self.rng.range(20, 600);
        self.queue.push_back(Record::assistant(closing));
    }
}

impl Iterator for Session {
    type Item = Record;

    /// **O(1)** amortized.
    fn next(&mut self) -> Option<Record> {
        if self.queue.is_empty() {
            self.turn();
        }
        self.queue.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Tracker;

    #[test]
    fn sessions_are_deterministic_and_valid() {
        let a = Session::records(42, 5_000);
        assert!(a == Session::records(42, 5_000), "same seed, same session");
        assert!(
            a != Session::records(43, 5_000),
            "another seed, another session"
        );
        let t = Tracker::from_records(a).expect("generated logs are accepted");
        assert_eq!(t.anomalies(), crate::Anomalies::default());
        assert!(
            t.legal_cut_count() > 500,
            "realistic logs have many legal cuts"
        );
        let calls = t.completed_calls() + t.pending_count();
        assert!(calls > 1_000, "and many calls: {calls}");
    }
}
