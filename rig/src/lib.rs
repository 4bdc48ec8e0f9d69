//! cutpoint inside rig: lossless conversions between rig's [`Message`]s and
//! cutpoint's records ([`convert`]), and a rig memory policy on cutpoint's incremental
//! tracker and compaction pipeline ([`policy`]).
//!
//! An agent on rig-memory changes one line:
//!
//! ```
//! use cutpoint_rig::CutpointPolicy;
//! use rig_memory::{InMemoryConversationMemory, PolicyMemory};
//! // was: PolicyMemory::new(InMemoryConversationMemory::new(), TokenWindowMemory::new(8_000, counter))
//! let memory = PolicyMemory::new(InMemoryConversationMemory::new(), CutpointPolicy::new(8_000));
//! # let _ = memory;
//! ```
//!
//! Built against rig-core 0.44.0 and rig-memory 0.44.0 (pinned; see `docs/rig.md`).
//!
//! [`Message`]: rig_core::completion::Message
#![forbid(unsafe_code)]

pub mod check;
#[doc(hidden)]
pub mod compare;
pub mod convert;
pub mod policy;
#[doc(hidden)]
pub mod synth;

pub use check::{Checked, check};
pub use convert::{ConvertError, History};
pub use policy::{CutpointHook, CutpointMemory, CutpointPolicy, Session, Settings, Turn};
