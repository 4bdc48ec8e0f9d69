//! Everything a caller can observe of a tracker, as one comparable value: what the
//! model tests, snapshot tests, compaction tests and fuzz targets compare when they
//! claim two trackers (live and rebuilt, before and after a refused record, live and
//! restored) are the same. Written once here so that every such claim means the same.

use crate::core::{Anomalies, Limits, Mode, Tracker};

/// A tracker's observable state.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Observation {
    /// Number of records.
    pub len: usize,
    /// Total tokens.
    pub total: u64,
    /// Tokens of each record.
    pub record_tokens: Vec<u64>,
    /// The legal cuts, in order.
    pub cuts: Vec<usize>,
    /// Pending calls as `(id, position)`, in log order.
    pub pending: Vec<(String, usize)>,
    /// Anomaly counts. Compaction drops records and so changes these relative to a
    /// rebuild; such comparisons clear them first.
    pub anomalies: Anomalies,
    /// Number of answered calls remembered.
    pub completed: usize,
    /// Position of the open (still streaming) record, if any.
    pub open: Option<usize>,
    /// The caps in force.
    pub limits: Limits,
    /// Strict or lenient.
    pub mode: Mode,
}

/// What can be observed of a value, as one comparable [`Observation`]: a method on
/// [`Tracker`] for tests and fuzzers (`use cutpoint::testing::Observe`).
pub trait Observe {
    /// The observable state. **O(n)**.
    fn observe(&self) -> Observation;
}

impl Observe for Tracker {
    fn observe(&self) -> Observation {
        Observation {
            len: self.len(),
            total: self.total_tokens(),
            record_tokens: (0..self.len())
                .filter_map(|i| self.record_tokens(i))
                .collect(),
            cuts: self.legal_cuts().collect(),
            pending: self
                .pending_calls()
                .iter()
                .map(|p| (p.id.to_string(), p.at))
                .collect(),
            anomalies: self.anomalies(),
            completed: self.completed_calls(),
            open: self.open_record(),
            limits: *self.limits(),
            mode: self.mode(),
        }
    }
}

impl Observation {
    /// The same observation with the anomaly counts cleared, for comparing a compacted
    /// tracker with one rebuilt from the compacted log. **O(1)**.
    #[must_use]
    pub fn without_anomalies(mut self) -> Self {
        self.anomalies = Anomalies::default();
        self
    }
}
