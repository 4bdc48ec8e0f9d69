//! The sans-IO core: the incremental legal-cut [`Tracker`] and its vocabulary.
//!
//! Nothing here reads a file, a clock or the network, or needs an async runtime, and
//! nothing here knows about compaction, formats, streaming, policies, snapshots or
//! the CLI: those layers are built on this one (a test checks the imports).
//!
//! - [`tracker`]: the type, its queries; `tracker/input.rs` is the only place its
//!   state changes, `tracker/admit.rs` the one admission check.
//! - `index`: prefix token sums and the legal-cut bitmap, in blocks of 64 records.
//! - `calls`: the call book (pending calls, early results, used ids by fingerprint).
//! - [`config`], [`event`], [`error`]: the types the tracker speaks.
//! - [`invariants`]: the invariants, checked in one place.

pub(crate) mod calls;
pub(crate) mod config;
mod ensure;
pub(crate) mod error;
pub(crate) mod event;
pub(crate) mod index;
pub(crate) mod invariants;
mod outcome;
#[cfg(feature = "serde")]
mod state;
pub(crate) mod tracker;

pub use config::{Limit, Limits, Mode};
pub use error::{
    AppendError, CallRecord, Defer, EventError, OpenEvent, RegionEnd, ReplaceError,
    StrictViolation, TokensError,
};
pub use event::{Event, Handled};
pub use index::{MAX_RECORDS, Replacement};
pub use invariants::{Broken, Part};
pub use outcome::{Anomaly, Appended};
#[cfg(feature = "serde")]
pub(crate) use state::State;
pub use tracker::{Anomalies, PendingCall, Tracker};

/// Whether the legality rule `rule` is switched off in this build: only in the
/// mutants' builds (`scripts/mutants.sh`: `--cfg cutpoint_mutant`, the rule named by
/// the `CUTPOINT_MUTANT` environment variable at compile time), never in a normal
/// one, where it is the constant `false`. One cfg for every mutant, so that the
/// mutants share their dependencies' build and only this crate is rebuilt for each.
#[inline(always)]
pub(crate) fn mutant(rule: &str) -> bool {
    #[cfg(cutpoint_mutant)]
    {
        option_env!("CUTPOINT_MUTANT") == Some(rule)
    }
    #[cfg(not(cutpoint_mutant))]
    {
        let _ = rule;
        false
    }
}
