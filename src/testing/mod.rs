//! Test aids, hidden from the docs and built only with the `testing` feature: seeded
//! synthetic sessions ([`synth`]), the specification's reference algorithm
//! ([`reference`](mod@reference)) and a tracker's observable state as one value ([`observe`]). The
//! crate's own tests, benches, examples, fuzz targets and the CLI's `bench` use them;
//! they are not part of the stable API.

pub mod latency;
pub mod observe;
pub mod reference;
pub mod synth;

/// The transcript writers beneath [`Loaded::run`](crate::format::Loaded::run) and
/// [`Loaded::summarize`](crate::format::Loaded::summarize), for tests that drive them
/// directly: the live history's compaction log ([`log_of`](writers::log_of)), a
/// pipeline's run ([`run`](writers::run)), steps written back ([`write`](writers::write)),
/// one summary at a window ([`compact`](writers::compact)) or between message
/// boundaries ([`render`](writers::render), [`ledger`](writers::ledger)).
#[cfg(feature = "formats")]
pub mod writers {
    pub use crate::format::build::{TranscriptLog, log_of};
    pub use crate::format::edit::{run, write};
    pub use crate::format::rewrite::{compact, ledger, render};
    pub use crate::format::{Boundary, Compacted, EditError, RewriteError, Rewritten};
}

pub use crate::core::calls::UsedIds;
pub use observe::{Observation, Observe};
