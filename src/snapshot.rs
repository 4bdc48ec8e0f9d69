//! Snapshots: a tracker's whole state as plain data, to store and restore (feature
//! `serde`).
//!
//! A [`Snapshot`] serializes with any serde format. It holds the prefix token sums,
//! the legal cuts, the open calls (their ids as strings), the 128-bit fingerprints of
//! the answered calls **and the two per-tracker seeds those fingerprints were made
//! with** (a restored tracker must fingerprint new ids exactly as the old one did, or a
//! reused id would go unnoticed), the anomaly counts, the caps and the mode.
//!
//! Restoring checks the format tag, the version ([`Snapshot::VERSION`]), a checksum
//! over the contents, and every invariant of the tracker's type docs that the state
//! can show on its own (`Tracker::check_invariants`); any failure is a [`SnapshotError`] and no tracker. What a
//! snapshot cannot show is whether it agrees with a log it does not hold: rebuild from
//! the log ([`Tracker::from_records`]) when in doubt; the two agree (tested).
//!
//! Size: about 12 bytes per record plus 16 per answered call, before encoding.
//!
//! Versions: the layout is versioned ([`Snapshot::VERSION`]) and unknown fields are
//! ignored, so a newer snapshot that only adds fields still decodes and is refused
//! with [`SnapshotError::UnsupportedVersion`]; one whose fields changed shape fails in
//! the decoder first, with the decoder's message.

use serde::{Deserialize, Serialize};

use crate::core::{Broken, Limits, Mode, State, Tracker};

const FORMAT: &str = "cutpoint.tracker";

/// A tracker's state, serializable. Made by [`Tracker::snapshot`], turned back into a
/// tracker by [`Tracker::restore`]. Equal trackers give equal snapshots.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Snapshot {
    format: String,
    version: u32,
    checksum: u64,
    seeds: [u64; 2],
    /// Inclusive prefix token sums, one per record.
    sums: Vec<u64>,
    cuts: Vec<u32>,
    /// `(id, position of its tool_use)`, in log order.
    pending: Vec<(String, u32)>,
    /// `(id, position of its first result, positions of its later results)`, in log
    /// order.
    early: Vec<(String, u32, Vec<u32>)>,
    /// Fingerprints of answered calls, sorted.
    completed: Vec<[u64; 2]>,
    /// Orphan results, duplicate results, uses after result.
    anomalies: [u64; 3],
    limits: Limits,
    mode: Mode,
    /// Whether the last record is still open (streaming).
    last_open: bool,
}

/// Why a snapshot could not be restored.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SnapshotError {
    /// The data is not a cutpoint tracker snapshot.
    #[error("not a cutpoint tracker snapshot (format {found:?}, expected {FORMAT:?})")]
    NotASnapshot {
        /// The format tag found.
        found: String,
    },
    /// Written by a version of cutpoint whose snapshot layout this one cannot read.
    #[error(
        "snapshot version {found} is not supported (this build reads version {supported}); rebuild the tracker from the log"
    )]
    UnsupportedVersion {
        /// The version found.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The contents do not match the checksum stored with them.
    #[error("snapshot is corrupt: checksum {stored:#018x} stored, {computed:#018x} computed")]
    Checksum {
        /// The checksum stored.
        stored: u64,
        /// The checksum of the contents.
        computed: u64,
    },
    /// The contents are not a state any tracker can be in: the first broken
    /// invariant.
    #[error("snapshot is corrupt: {0}")]
    Inconsistent(Broken),
}

impl Snapshot {
    /// The snapshot layout this build writes and reads.
    pub const VERSION: u32 = 1;

    /// The snapshot's layout version. **O(1)**.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// Records in the snapshotted log. **O(1)**.
    pub fn len(&self) -> usize {
        self.sums.len()
    }

    /// Whether the snapshotted log is empty. **O(1)**.
    pub fn is_empty(&self) -> bool {
        self.sums.is_empty()
    }

    /// Recomputes the stored checksum after the contents were edited, so that tests and
    /// fuzzers can reach the consistency checks behind it. A test aid (feature
    /// `testing`), not for production use.
    #[cfg(feature = "testing")]
    #[doc(hidden)]
    pub fn reseal(&mut self) {
        self.checksum = self.compute_checksum();
    }

    /// FNV-1a over every field but the checksum, in a fixed order. Deterministic across
    /// builds and platforms (unlike the tracker's seeded hashes). **O(size)**.
    fn compute_checksum(&self) -> u64 {
        let mut h = Fnv::new();
        h.str(&self.format);
        h.u64(u64::from(self.version));
        h.u64(self.seeds[0]);
        h.u64(self.seeds[1]);
        h.u64(self.sums.len() as u64);
        self.sums.iter().for_each(|&s| h.u64(s));
        h.u64(self.cuts.len() as u64);
        self.cuts.iter().for_each(|&c| h.u64(u64::from(c)));
        h.u64(self.pending.len() as u64);
        for (id, at) in &self.pending {
            h.str(id);
            h.u64(u64::from(*at));
        }
        h.u64(self.early.len() as u64);
        for (id, at, later) in &self.early {
            h.str(id);
            h.u64(u64::from(*at));
            h.u64(later.len() as u64);
            later.iter().for_each(|&l| h.u64(u64::from(l)));
        }
        h.u64(u64::from(self.last_open));
        h.u64(self.completed.len() as u64);
        for [a, b] in &self.completed {
            h.u64(*a);
            h.u64(*b);
        }
        self.anomalies.iter().for_each(|&a| h.u64(a));
        let l = &self.limits;
        for v in [
            l.max_records,
            l.max_open_calls,
            l.max_call_id_bytes,
            l.max_line_bytes,
        ] {
            h.u64(v as u64);
        }
        h.u64(match self.mode {
            Mode::Lenient => 0,
            Mode::Strict => 1,
        });
        h.0
    }
}

/// 64-bit FNV-1a: a fixed, simple checksum against accidental corruption (not an
/// adversary: anyone can recompute it).
struct Fnv(u64);

impl Fnv {
    fn new() -> Self {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    fn u64(&mut self, v: u64) {
        self.bytes(&v.to_le_bytes());
    }
    fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.bytes(s.as_bytes());
    }
}

impl Tracker {
    /// The tracker's whole state as a [`Snapshot`]. **O(n + k log k)** for `n` records
    /// and `k` calls.
    pub fn snapshot(&self) -> Snapshot {
        let state = self.export();
        let mut snapshot = Snapshot {
            format: FORMAT.to_owned(),
            version: Snapshot::VERSION,
            checksum: 0,
            seeds: state.seeds,
            sums: state.sums,
            cuts: state.cuts,
            pending: state.pending,
            early: state.early,
            completed: state.completed,
            anomalies: state.anomalies,
            limits: state.limits,
            mode: state.mode,
            last_open: state.last_open,
        };
        snapshot.checksum = snapshot.compute_checksum();
        snapshot
    }

    /// A tracker in the state `snapshot` holds: it answers every query as the
    /// snapshotted one did and goes on from there. **O(n + k)** expected.
    ///
    /// # Errors
    /// [`SnapshotError`]: not a snapshot, an unsupported version, a checksum mismatch,
    /// or contents no tracker can hold (it names the first fault found).
    pub fn restore(snapshot: Snapshot) -> Result<Tracker, SnapshotError> {
        if snapshot.format != FORMAT {
            return Err(SnapshotError::NotASnapshot {
                found: snapshot.format,
            });
        }
        if snapshot.version != Snapshot::VERSION {
            return Err(SnapshotError::UnsupportedVersion {
                found: snapshot.version,
                supported: Snapshot::VERSION,
            });
        }
        let computed = snapshot.compute_checksum();
        if computed != snapshot.checksum {
            return Err(SnapshotError::Checksum {
                stored: snapshot.checksum,
                computed,
            });
        }
        let state = State {
            seeds: snapshot.seeds,
            sums: snapshot.sums,
            cuts: snapshot.cuts,
            pending: snapshot.pending,
            early: snapshot.early,
            completed: snapshot.completed,
            anomalies: snapshot.anomalies,
            limits: snapshot.limits,
            mode: snapshot.mode,
            last_open: snapshot.last_open,
        };
        Tracker::import(state).map_err(SnapshotError::Inconsistent)
    }
}
