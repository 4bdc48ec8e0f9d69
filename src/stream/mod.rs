//! The async adapter (feature `stream`): a handle that tasks share, feed and query
//! concurrently, futures that wait for a legal cut, and a `Stream` wrapper that tracks
//! a turn as it streams.
//!
//! The handle is generic over what it shares: a bare [`Tracker`](crate::Tracker), or what an agent
//! loop really owns, a compaction [`Log`](crate::compact::Log) (records with their payloads beside the
//! tracker), so one structure is fed, compacted in place and awaited on, and nothing
//! is kept in step by hand. Anything that holds a tracker and takes events can be
//! shared ([`Live`]).
//!
//! Thin glue around the sync core: every operation is one short call under a lock,
//! and waiters are woken through a [`tokio::sync::Notify`] after each change. Nothing
//! here reads a clock or does I/O; any executor works (tokio is used only for its
//! `Notify`, which needs no runtime).
//!
//! ```text
//!   provider stream ─▶ Tracked<S, T> ─┐               ┌─▶ legal_cut_ready(at).await
//!   tool tasks ──────── handle(event) ┼─▶ Shared<T> ──┤   (woken on every change)
//!   compaction ───── update(|log| ..) ┘   Mutex<T>    └─▶ read(|log| ..)
//! ```
//!
//! ```
//! use cutpoint::compact::{Entry, Log, Payload};
//! use cutpoint::stream::Shared;
//! use cutpoint::{Event, Record};
//!
//! # futures::executor::block_on(async {
//! let shared = Shared::new(Log::new());
//! shared.handle(Event::Record(Record::user(100)))?;
//! let call = Payload::Call { name: Some("bash".into()), arguments: Some("{}".into()) };
//! shared.update(|log| log.append(Entry::new(Record::tool_use("toolu_1", 20), call)))?;
//! // A compaction waiting for the call to land: the next legal cut past it.
//! let ready = shared.legal_cut_ready(2);
//! shared.update(|log| log.append(Entry::from(Record::tool_result("toolu_1", 900))))?;
//! assert_eq!(ready.await, 3);
//! assert_eq!(shared.read(|log| log.len()), 3);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! With the `formats` feature, [`Decoding`] and [`ReadDecoding`] feed a provider's
//! streaming response (a `Stream` of byte chunks, or an `AsyncRead`) through a
//! [`Decoder`](crate::stream::decode::Decoder) into a shared tracker or log, so that
//! [`Shared::legal_cut_ready`] wakes when a streamed call's result lands.
//!
//! # Locking
//!
//! One `std::sync::Mutex` guards the shared value. Every method takes it, does **O(1)**
//! to **O(log n)** work (or the work of the closure you pass to [`Shared::read`] /
//! [`Shared::update`]) and releases it before returning: **no lock is ever held
//! across an `.await`**, so a blocking mutex is the right tool (tokio's docs recommend
//! it for short critical sections). Keep closures short; do I/O and summarizing
//! outside (plan under the lock, summarize outside it, apply under it: a plan made
//! stale meanwhile is refused by [`Log::apply`](crate::compact::Log::apply)).
//!
//! A panic inside a closure does not make the handle unusable: the lock's poison flag
//! is ignored because the core's own operations never leave it half-changed (a
//! refused operation changes nothing). A closure that panics halfway through its own
//! sequence of changes leaves whatever it had done.
//!
//! # Positions
//!
//! Positions are those of the shared tracker. A compaction (through
//! [`Shared::update`], in place with [`Log::apply`](crate::compact::Log::apply) or [`Tracker::replace_region`](crate::Tracker::replace_region))
//! renumbers them; a waiter for a position of the old numbering should be dropped and
//! recreated from a fresh decision ([`Log::compactions`](crate::compact::Log::compactions) tells when).

//!
//! # Modules by feature
//!
//! The handle ([`Shared`], [`Tracked`]) needs the `stream` feature (tokio's `Notify`);
//! the sans-IO stream decoders ([`decode`]) need only `formats`; the adapters that feed
//! an async byte stream through a decoder into a handle ([`Decoding`],
//! [`ReadDecoding`]) need both.

#[cfg(feature = "formats")]
pub mod decode;
#[cfg(all(feature = "stream", feature = "formats"))]
mod decoding;
#[cfg(feature = "stream")]
mod shared;

#[cfg(all(feature = "stream", feature = "formats"))]
pub use decoding::{Chunk, Decoding, FeedError, ReadDecoding};
#[cfg(feature = "stream")]
pub use shared::{Live, Shared, Tracked};
