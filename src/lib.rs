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
//!                        │ legal cuts (sorted)      └─▶ Err(Defer): wait for the turn
//!                        ▼                               boundary; says what blocks
//!                 is_legal_cut, pending_calls, anomalies
//! ```
//!
//! The core ([`Tracker`]) is sans-IO: no files, clock, network or async runtime.
//! [`reference`](mod@reference) holds the specification's naive algorithm, which the tracker is tested
//! against. With the `jsonl` feature, [`jsonl`] reads the records JSONL format.
//!
//! Live turns: records can stream in open (see [`event`](mod@event): open, grow by
//! deltas, close, as [`Event`]s for [`Tracker::handle`]); the [`policy`] says when to
//! compact, where, or what to wait for; with the `stream` feature, [`stream`](mod@stream)
//! shares a tracker between tasks and waits for the next legal cut
//! (`legal_cut_ready`).
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

mod calls;
mod error;
mod fp_map;
mod index;
mod limits;
mod mode;
mod observe;
mod record;
#[cfg(feature = "serde")]
mod snapshot;
mod tracker;
mod used;

pub mod compact;
#[cfg(feature = "formats")]
pub mod format;
pub mod validate;

pub mod event;
#[cfg(feature = "jsonl")]
pub mod jsonl;
pub mod policy;
pub mod reference;
pub mod search;
#[cfg(feature = "stream")]
pub mod stream;
pub mod synth;

pub use error::{AppendError, Defer};
pub use event::{Event, EventError, Handled};
pub use index::MAX_RECORDS;
pub use limits::{Limit, Limits};
pub use mode::{Mode, StrictViolation};
#[doc(hidden)]
pub use observe::Observation;
pub use record::{CallId, Record, RecordKind};
#[cfg(feature = "serde")]
pub use snapshot::{Snapshot, SnapshotError};
pub use tracker::{Anomalies, Anomaly, Appended, PendingCall, Tracker};
#[doc(hidden)]
pub use used::UsedIds;
pub use validate::{Report, Violation, validate, validate_records};

/// The README's library example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
