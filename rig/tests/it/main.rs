//! cutpoint-rig's integration tests: one binary, one module per concern.

mod fixtures;
mod policy;
mod roundtrip;
mod side_by_side;
