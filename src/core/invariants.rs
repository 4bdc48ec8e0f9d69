//! The tracker's invariants, checked in one place: [`Tracker::check_invariants`]
//! names the first one broken ([`Broken`]); `assert_invariants` panics with it (tests
//! and fuzzers call it after every step); snapshot restore runs it on what it read.
//! The invariants themselves are listed in [`Tracker`]'s type docs.

use std::fmt;

use super::ensure::ensure;
use super::tracker::Tracker;

/// Which part of a tracker an invariant concerns.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Part {
    /// The prefix token sums.
    PrefixSums,
    /// The legal-cut index.
    LegalCuts,
    /// The call book: pending calls, early results, used ids.
    Calls,
    /// How the parts agree with each other.
    Tracker,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Part::PrefixSums => "prefix sums",
            Part::LegalCuts => "legal cuts",
            Part::Calls => "call book",
            Part::Tracker => "tracker",
        })
    }
}

/// A broken invariant: which part, and what is wrong, in words.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("{part}: {detail}")]
pub struct Broken {
    /// The part whose invariant fails.
    pub part: Part,
    /// What is wrong.
    pub detail: String,
}

impl Broken {
    pub(crate) fn new(part: Part, detail: impl Into<String>) -> Self {
        Broken {
            part,
            detail: detail.into(),
        }
    }
}

impl Tracker {
    /// Checks every invariant listed in the type docs that can be checked without the
    /// records themselves, and names the first that fails. **O(n)**. For tests,
    /// fuzzers and snapshot restore; the model tests also compare every cut to the
    /// specification's code.
    ///
    /// # Errors
    /// [`Broken`], naming the part and what is wrong.
    #[doc(hidden)]
    pub fn check_invariants(&self) -> Result<(), Broken> {
        let len = self.len();
        self.sums
            .check()
            .map_err(|d| Broken::new(Part::PrefixSums, d))?;
        self.cuts
            .check(len)
            .map_err(|d| Broken::new(Part::LegalCuts, d))?;
        self.calls
            .check(len)
            .map_err(|d| Broken::new(Part::Calls, d))?;
        if crate::core::mutant("ignore_pending") {
            // The mutant breaks these on purpose; let the model tests catch it instead.
            return Ok(());
        }
        self.check_agreement()
            .map_err(|d| Broken::new(Part::Tracker, d))
    }

    /// How the parts agree: cut `len` and the pending calls, the open record.
    fn check_agreement(&self) -> Result<(), String> {
        let len = self.len();
        let last_cut = self.legal_cut_at_or_before(len);
        let nothing_open = self.pending_count() == 0 && self.open_record().is_none();
        ensure!(
            (last_cut == len) == nothing_open,
            "cut {len} (the end) is {} while {} calls are pending and the last record is {}",
            if last_cut == len { "legal" } else { "illegal" },
            self.pending_count(),
            if self.open_record().is_some() {
                "open"
            } else {
                "closed"
            },
        );
        ensure!(
            self.open_record().is_none() || len > 0,
            "the last record is open in an empty log"
        );
        for p in self.pending_calls() {
            // Rule (a): no cut after a pending call is legal.
            ensure!(
                last_cut <= p.at,
                "legal cut {last_cut} lies after pending call {:?} at record {}",
                p.id.as_str(),
                p.at
            );
        }
        Ok(())
    }

    /// [`check_invariants`](Tracker::check_invariants), panicking with the first broken
    /// invariant. **O(n)**. For tests and fuzzers.
    #[doc(hidden)]
    #[track_caller]
    pub fn assert_invariants(&self) {
        if let Err(broken) = self.check_invariants() {
            panic!("tracker invariant broken: {broken}");
        }
    }
}
