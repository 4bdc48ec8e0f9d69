//! The async adapter (feature `stream`): a handle that tasks share, feed and query
//! concurrently, futures that wait for a legal cut, and a `Stream` wrapper that tracks
//! a turn as it streams.
//!
//! The handle is generic over what it shares: a bare [`Tracker`], or what an agent
//! loop really owns, a compaction [`Log`] (records with their payloads beside the
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
//! [`Decoder`](crate::format::live::Decoder) into a shared tracker or log, so that
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
//! stale meanwhile is refused by [`Log::apply`]).
//!
//! A panic inside a closure does not make the handle unusable: the lock's poison flag
//! is ignored because the core's own operations never leave it half-changed (a
//! refused operation changes nothing). A closure that panics halfway through its own
//! sequence of changes leaves whatever it had done.
//!
//! # Positions
//!
//! Positions are those of the shared tracker. A compaction (through
//! [`Shared::update`], in place with [`Log::apply`] or [`Tracker::replace_region`])
//! renumbers them; a waiter for a position of the old numbering should be dropped and
//! recreated from a fresh decision ([`Log::compactions`] tells when).

#[cfg(feature = "formats")]
mod live;

#[cfg(feature = "formats")]
pub use live::{Chunk, Decoding, FeedError, ReadDecoding};

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, ready};

use futures_core::Stream;
use tokio::sync::Notify;

use crate::compact::Log;
use crate::{AppendError, Appended, Event, EventError, Handled, Record, Tracker};

/// What a [`Shared`] handle can share and feed: a value that holds a [`Tracker`] and
/// takes [`Event`]s. Implemented for [`Tracker`] and [`Log`].
pub trait Live: AsRef<Tracker> {
    /// Applies one event of a live turn; a refused event changes nothing.
    ///
    /// # Errors
    /// As [`Tracker::handle`].
    fn handle(&mut self, event: Event) -> Result<Handled, EventError>;
}

impl Live for Tracker {
    fn handle(&mut self, event: Event) -> Result<Handled, EventError> {
        Tracker::handle(self, event)
    }
}

impl Live for Log {
    fn handle(&mut self, event: Event) -> Result<Handled, EventError> {
        Log::handle(self, event)
    }
}

/// A value shared between tasks (a [`Tracker`] by default, or a [`Log`]): one feeds it
/// events, others query it, compact it, or wait for a legal cut. Cloning the handle is
/// **O(1)** (an `Arc`); all clones share one value.
///
/// See the [module docs](self) for the locking rules.
pub struct Shared<T = Tracker> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    value: Mutex<T>,
    changed: Notify,
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Shared {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T: Default> Default for Shared<T> {
    fn default() -> Self {
        Shared::new(T::default())
    }
}

impl<T: AsRef<Tracker>> std::fmt::Debug for Shared<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.read(|v| f.debug_tuple("Shared").field(v.as_ref()).finish())
    }
}

impl<T> Shared<T> {
    /// Shares `value`. **O(1)**.
    pub fn new(value: T) -> Self {
        Shared {
            inner: Arc::new(Inner {
                value: Mutex::new(value),
                changed: Notify::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, T> {
        // See "Locking" in the module docs for why poison is ignored.
        self.inner
            .value
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Runs `query` on the shared value under the lock and returns its answer. The
    /// lock is held for exactly the closure's run.
    pub fn read<R>(&self, query: impl FnOnce(&T) -> R) -> R {
        query(&self.lock())
    }

    /// Runs `change` on the shared value under the lock, then wakes the waiters
    /// (whether or not anything changed). This is how records with payloads and
    /// compactions reach a shared [`Log`] (`shared.update(|log| log.apply(&plan, text,
    /// tokens))`), or a compaction a shared tracker
    /// (`shared.update(|t| t.replace_region(start, end, summary_tokens))`).
    pub fn update<R>(&self, change: impl FnOnce(&mut T) -> R) -> R {
        let answer = change(&mut self.lock());
        self.inner.changed.notify_waiters();
        answer
    }

    /// A copy of the shared value, to work on without holding the lock. **O(n)**
    /// under the lock.
    pub fn cloned(&self) -> T
    where
        T: Clone,
    {
        self.lock().clone()
    }

    /// Resolves to `ready`'s first `Some` answer. `ready` runs under the lock once now
    /// and once after each change (each event, append or update), so it must be short;
    /// between changes the future sleeps. If no change ever makes `ready` answer, the
    /// future never resolves: wrap it in a timeout or `select!` when that can happen.
    ///
    /// # Cancellation safety
    /// Cancel-safe: dropping the future at any `.await` point loses nothing and leaves
    /// the handle, and every other waiter, as they were. The future holds no lock while
    /// pending, only a registration with the `Notify`, which dropping removes.
    pub fn wait_until<R, F>(&self, mut ready: F) -> impl Future<Output = R> + Send + 'static
    where
        T: Send + 'static,
        F: FnMut(&T) -> Option<R> + Send + 'static,
        R: Send + 'static,
    {
        let shared = self.clone();
        async move {
            loop {
                let notified = shared.inner.changed.notified();
                let mut notified = std::pin::pin!(notified);
                // Register before looking, so a change between the look and the await
                // still wakes this future (`notify_waiters` wakes enabled waiters only).
                notified.as_mut().enable();
                if let Some(answer) = shared.read(&mut ready) {
                    return answer;
                }
                notified.await;
            }
        }
    }
}

impl<T: Live> Shared<T> {
    /// Applies one event ([`Live::handle`]) and wakes the waiters. **O(1)** amortized
    /// under the lock.
    ///
    /// # Errors
    /// As [`Tracker::handle`]; a refused event changes nothing and wakes no one.
    pub fn handle(&self, event: Event) -> Result<Handled, EventError> {
        let handled = self.lock().handle(event)?;
        self.inner.changed.notify_waiters();
        Ok(handled)
    }

    /// Resolves to the smallest legal cut `>= at` as soon as one exists: at once if
    /// there is one, otherwise on the change that creates it (typically the moment the
    /// last pending result lands, or a record before `at` closes). This is how a
    /// deferred compaction waits for the next safe point instead of polling. Each wake
    /// costs one **O(1 + gap / 64)** query under the lock.
    ///
    /// Never resolves if no such cut ever appears (for instance when the caller never
    /// delivers the pending results): wrap it in a timeout or `select!` when that can
    /// happen.
    ///
    /// # Cancellation safety
    /// Cancel-safe, as [`wait_until`](Shared::wait_until): drop it at any time and
    /// create a new one later; nothing is lost.
    pub fn legal_cut_ready(&self, at: usize) -> impl Future<Output = usize> + Send + 'static
    where
        T: Send + 'static,
    {
        self.wait_until(move |v: &T| v.as_ref().legal_cut_at_or_after(at))
    }
}

impl Shared<Tracker> {
    /// Appends a complete record ([`Tracker::append`]) and wakes the waiters. **O(1)**
    /// amortized under the lock.
    ///
    /// # Errors
    /// As [`Tracker::append`]; a refused record changes nothing and wakes no one.
    pub fn append(&self, record: Record) -> Result<Appended, AppendError> {
        let appended = self.lock().append(record)?;
        self.inner.changed.notify_waiters();
        Ok(appended)
    }
}

pin_project_lite::pin_project! {
    /// A [`Stream`] of events tracked as they pass: each event is applied to the shared
    /// value (a tracker or a log) when it arrives, and yielded with what it did. Like
    /// tokio-util's `FramedRead` around a decoder, it only forwards: the work is
    /// [`Shared::handle`].
    ///
    /// A refused event is yielded as an `Err` and the stream goes on (the tracker is
    /// unchanged by it); stop on the first error if your loop cannot recover.
    ///
    /// # Cancellation safety
    /// `next()` on this stream is cancel-safe: an event is applied in the same `poll`
    /// that yields it, so dropping a pending `next()` loses no event and applies none
    /// twice. Dropping the stream leaves the shared value with every event yielded so
    /// far.
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct Tracked<S, T: AsRef<Tracker> = Tracker> {
        #[pin]
        events: S,
        shared: Shared<T>,
    }
}

impl<S, T: AsRef<Tracker>> Tracked<S, T> {
    /// Tracks `events` into `shared`. **O(1)**.
    pub fn new(events: S, shared: Shared<T>) -> Self {
        Tracked { events, shared }
    }

    /// The shared value the events go to. **O(1)**.
    pub fn shared(&self) -> &Shared<T> {
        &self.shared
    }

    /// The inner stream, leaving the tracker as it is. **O(1)**.
    pub fn into_inner(self) -> S {
        self.events
    }
}

impl<S: Stream<Item = Event>, T: Live> Stream for Tracked<S, T> {
    /// The event and what it did, or why it was refused.
    type Item = Result<(Event, Handled), EventError>;

    /// **O(1)** amortized per event, plus cloning its call id.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let Some(event) = ready!(this.events.poll_next(cx)) else {
            return Poll::Ready(None);
        };
        let handled = this.shared.handle(event.clone());
        Poll::Ready(Some(handled.map(|h| (event, h))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.events.size_hint()
    }
}
