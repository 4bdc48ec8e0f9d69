//! # cutpoint
//!
//! Keeps an LLM agent's conversation log safe to compact, even while a turn is in
//! flight.
//!
//! A transcript is not a string of tokens but a sequence of typed [`Record`]s with
//! referential integrity: every `tool_use` has exactly one `tool_result` with the same
//! id. A compaction cut that lands between them leaves an orphaned result or an
//! unanswered call, which strict providers reject and lenient ones paper over by
//! letting the model invent the missing call. cutpoint indexes the **legal cuts** (the
//! positions that split no pair) as records stream in, and answers "where is the nearest
//! legal cut to my token target" in **O(log n)**.
//!
//! ```text
//!   records ──append──▶ Tracker ──────────────▶ select_legal_cut(target, lookback)
//!   (one at a time,      │ prefix token sums        │
//!    O(1) amortized)     │ pending calls (by id)    ├─▶ Ok(cut): compact ..cut, keep cut..
//!                        │ legal cuts (bitmap)      └─▶ Err(Defer): wait for the turn
//!                        ▼                               boundary; says what blocks
//!                 is_legal_cut, pending_calls, anomalies
//! ```
//!
//! # Layers
//!
//! ```text
//!   format (feature formats) ─┐      readers, provider rules, rewriting in a format
//!   stream ───────────────────┼─▶ compact ─▶ core (Tracker, Record)
//!   policy ───────────────────┘      plans, apply, summaries, validation, repair
//! ```
//!
//! - The root holds the core: [`Tracker`] and its vocabulary ([`Record`], [`Event`],
//!   [`Limits`], [`Mode`], the errors). It is sans-IO: no files, clock, network or
//!   async runtime, and it knows nothing of the layers above it.
//! - [`compact`]: a [`Log`](compact::Log) of records with their payloads beside a
//!   tracker; plans that never split a pair, summaries with an argument-faithful
//!   ledger, in-place apply, [validation](compact::validate()) and repair.
//! - [`policy`]: when to compact, where, or what to wait for.
//! - [`stream`]: live provider streams. With feature `stream`, a handle shared between
//!   tasks, generic over what it shares (a tracker, or a whole [`Log`](compact::Log)),
//!   with futures that wait for the next legal cut; with feature `formats`, the sans-IO
//!   decoders ([`stream::decode`]) that turn a provider's streamed response into tracker
//!   events (they read blocks through the format readers' own code).
//! - [`format`](mod@format) (feature `formats`): provider formats and agent transcript files, read
//!   into one model, checked against the providers' rules, and written back compacted.
//!
//! Features: `formats`, `serde` (snapshots) and `stream` are on by default;
//! `tiktoken` adds a real BPE token counter. The command-line tool is the workspace's
//! `cutpoint-cli` crate, so library users get no CLI dependencies.
//!
//! ```
//! use cutpoint::{Record, Tracker};
//!
//! let mut log = Tracker::new();
//! log.append(Record::user(1_000))?;
//! log.append(Record::assistant(200))?;
//! log.append(Record::tool_use("call_1", 50))?;
//! log.append(Record::tool_result("call_1", 4_000))?;
//! log.append(Record::tool_use("call_2", 50))?; // still running
//!
//! // Cuts 3 and 4 would split the pair; 5 would compact a call still in flight.
//! assert!(log.is_legal_cut(2) && !log.is_legal_cut(3) && !log.is_legal_cut(5));
//! // Compact about 3,000 tokens: the target lands inside the pair, so walk back to 2.
//! assert_eq!(log.select_legal_cut(3_000, 5_000)?, 2);
//! // Ask for everything: `len` is illegal while call_2 runs, so the answer is 4.
//! assert_eq!(log.select_legal_cut(u64::MAX, 5_000)?, 4);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod core;
mod record;
#[cfg(feature = "serde")]
mod snapshot;

pub mod compact;
#[cfg(feature = "formats")]
pub mod format;
pub mod policy;
#[cfg(any(feature = "stream", feature = "formats"))]
pub mod stream;
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod testing;

pub use crate::core::{
    Anomalies, Anomaly, AppendError, Appended, Broken, CallRecord, Defer, Event, EventError,
    Handled, Limit, Limits, MAX_RECORDS, Mode, OpenEvent, Part, PendingCall, RegionEnd,
    ReplaceError, Replacement, StrictViolation, TokensError, Tracker,
};
pub use record::{CallId, Record, RecordKind};
#[cfg(feature = "serde")]
pub use snapshot::{Snapshot, SnapshotError};

/// The README's library example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The design document's examples, compiled and run as doctests.
#[doc = include_str!("../docs/design.md")]
#[cfg(doctest)]
pub struct DesignDoctests;
