//! Test aids, hidden from the docs and built only with the `testing` feature: seeded
//! synthetic sessions ([`synth`]), the specification's reference algorithm
//! ([`reference`](mod@reference)) and a tracker's observable state as one value ([`observe`]). The
//! crate's own tests, benches, examples, fuzz targets and the CLI's `bench` use them;
//! they are not part of the stable API.

pub mod latency;
pub mod observe;
pub mod reference;
pub mod synth;

pub use crate::core::calls::UsedIds;
pub use observe::{Observation, Observe};
