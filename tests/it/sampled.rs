//! The `SampledIndex` prototype that the query and search benches measure the tracker
//! against (`benches/support/sampled.rs`; not part of the library): its own tests.

#[path = "../../benches/support/sampled.rs"]
#[expect(dead_code, reason = "only the prototype's own tests run here")]
mod prototype;
