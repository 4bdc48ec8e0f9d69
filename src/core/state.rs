//! A tracker's whole state as plain data, for snapshots (feature `serde`): what
//! [`Tracker::export`] hands out and [`Tracker::import`] rebuilds a tracker from,
//! refusing any state no tracker can be in. The serialized form, its version and
//! checksum live in `src/snapshot.rs`; the core only knows its own parts.

use super::calls::{CallBook, Fingerprint};
use super::config::{Limits, Mode};
use super::index::{LegalCuts, MAX_RECORDS, PrefixSums};
use super::invariants::{Broken, Part};
use super::tracker::{Anomalies, Tracker};
use crate::record::CallId;

/// A tracker's state. Positions are record indexes; ids of open calls are strings,
/// answered calls are fingerprints under `seeds`.
#[derive(Clone, PartialEq, Eq, Debug)]
pub(crate) struct State {
    pub(crate) seeds: [u64; 2],
    /// Inclusive prefix token sums, one per record.
    pub(crate) sums: Vec<u64>,
    /// The legal cuts, increasing, 0 first.
    pub(crate) cuts: Vec<u32>,
    /// `(id, position of its tool_use)`, in log order.
    pub(crate) pending: Vec<(String, u32)>,
    /// `(id, position of its first result, positions of its later results)`, in log
    /// order.
    pub(crate) early: Vec<(String, u32, Vec<u32>)>,
    /// Fingerprints of completed calls (answered, covered or withdrawn), sorted.
    pub(crate) completed: Vec<[u64; 2]>,
    /// Orphan results, duplicate results, uses after result.
    pub(crate) anomalies: [u64; 3],
    pub(crate) limits: Limits,
    pub(crate) mode: Mode,
    /// Whether the last record is still open (streaming).
    pub(crate) last_open: bool,
}

impl Tracker {
    /// The tracker's state. **O(n + k log k)** for `n` records and `k` calls.
    pub(crate) fn export(&self) -> State {
        let len = self.len();
        let mut pending: Vec<(String, u32)> = self
            .calls
            .pending()
            .map(|p| (p.id.to_string(), p.at))
            .collect();
        pending.sort_unstable_by_key(|p| p.1);
        let mut early: Vec<(String, u32, Vec<u32>)> = self
            .calls
            .early()
            .map(|e| (e.id.to_string(), e.first_at, e.later.clone()))
            .collect();
        early.sort_unstable_by_key(|e| e.1);
        let mut completed: Vec<[u64; 2]> = self.calls.completed().map(|f| f.words()).collect();
        completed.sort_unstable();
        let a = self.anomalies;
        State {
            seeds: self.calls.seeds(),
            sums: (1..=len).map(|c| self.sums.before(c)).collect(),
            // Cuts are at most MAX_RECORDS == u32::MAX.
            cuts: self.cuts.iter().map(|c| c as u32).collect(),
            pending,
            early,
            completed,
            anomalies: [a.orphan_results, a.duplicate_results, a.uses_after_result],
            limits: self.limits,
            mode: self.mode,
            last_open: self.last_open,
        }
    }

    /// A tracker in `state`: it answers every query as the exported one did and goes
    /// on from there. Every invariant is checked ([`Tracker::check_invariants`]), after
    /// the checks the parts need to be built at all. **O(n + k)** expected.
    ///
    /// # Errors
    /// [`Broken`], naming the first fault found.
    pub(crate) fn import(state: State) -> Result<Tracker, Broken> {
        let bad = |part, what: String| Err(Broken::new(part, what));
        let len = state.sums.len();
        if len > MAX_RECORDS {
            return bad(
                Part::PrefixSums,
                format!("{len} records, more than a log holds"),
            );
        }
        let mut sums = PrefixSums::default();
        for (i, &s) in state.sums.iter().enumerate() {
            if s < sums.total() {
                return bad(
                    Part::PrefixSums,
                    format!("prefix token sum decreases at record {i}"),
                );
            }
            sums.push(s);
        }
        if state.cuts.first() != Some(&0) {
            return bad(Part::LegalCuts, "cut 0 is not listed as legal".to_owned());
        }
        let mut cuts = LegalCuts::default();
        for w in state.cuts.windows(2) {
            if w[1] <= w[0] {
                return bad(
                    Part::LegalCuts,
                    format!("legal cuts do not increase: {} then {}", w[0], w[1]),
                );
            }
            cuts.push(w[1] as usize);
        }
        let last_cut = cuts.last();
        if last_cut > len {
            return bad(
                Part::LegalCuts,
                format!("legal cut {last_cut} lies past the log's {len} records"),
            );
        }
        let mut book = CallBook::with_seeds(state.seeds);
        for (id, at) in state.pending {
            check_call(&id, at, len, "pending call")?;
            if !book.insert_pending(CallId::from(id.as_str()), at) {
                return bad(Part::Calls, format!("call id {id:?} is listed twice"));
            }
        }
        for (id, at, later) in state.early {
            check_call(&id, at, len, "early result")?;
            let mut previous = at;
            for &l in &later {
                if l <= previous || l as usize >= len {
                    return bad(
                        Part::Calls,
                        format!(
                            "later result of {id:?} at record {l} is not after {previous} and inside the log of {len}"
                        ),
                    );
                }
                previous = l;
            }
            if !book.insert_early(CallId::from(id.as_str()), at, later) {
                return bad(Part::Calls, format!("call id {id:?} is listed twice"));
            }
        }
        for words in state.completed {
            if !book.insert_completed(Fingerprint::from_words(words)) {
                return bad(
                    Part::Calls,
                    format!(
                        "answered call {:#x}{:016x} is listed twice",
                        words[0], words[1]
                    ),
                );
            }
        }
        let [orphan_results, duplicate_results, uses_after_result] = state.anomalies;
        let tracker = Tracker {
            sums,
            cuts,
            calls: book,
            anomalies: Anomalies {
                orphan_results,
                duplicate_results,
                uses_after_result,
            },
            last_open: state.last_open,
            limits: state.limits,
            mode: state.mode,
        };
        tracker.check_invariants()?;
        Ok(tracker)
    }
}

/// An open call's id is non-empty and its position inside the log.
fn check_call(id: &str, at: u32, len: usize, what: &str) -> Result<(), Broken> {
    if id.is_empty() {
        return Err(Broken::new(
            Part::Calls,
            format!("{what} at record {at} has an empty id"),
        ));
    }
    if at as usize >= len {
        return Err(Broken::new(
            Part::Calls,
            format!("{what} {id:?} at record {at} lies past the log's {len} records"),
        ));
    }
    Ok(())
}
