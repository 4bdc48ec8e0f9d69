//! The async adapter (feature `stream`): a shared tracker handle that tasks feed and
//! query concurrently, futures that wait for a legal cut, and a `Stream` wrapper that
//! tracks a turn as it streams.
//!
//! Thin glue around the sync core: every operation is one short call into
//! [`Tracker`] under a lock, and waiters are woken through a [`tokio::sync::Notify`]
//! after each change. Nothing here reads a clock or does I/O; any executor works (tokio
//! is used only for its `Notify`, which needs no runtime).
//!
//! ```text
//!   provider stream ─▶ Tracked<S> ─┐                  ┌─▶ legal_cut_ready(at).await
//!   tool tasks ───── handle(event) ┼─▶ SharedTracker ─┤   (woken on every change)
//!                                  │  Mutex<Tracker>  └─▶ read(|t| t.select_legal_cut(..))
//! ```
//!
//! # Locking
//!
//! One `std::sync::Mutex` guards the tracker. Every method takes it, does **O(1)** to
//! **O(log n)** work (or the work of the closure you pass to [`SharedTracker::read`] /
//! [`SharedTracker::update`]) and releases it before returning: **no lock is ever held
//! across an `.await`**, so a blocking mutex is the right tool (tokio's docs recommend
//! it for short critical sections). Keep closures short; do I/O and summarising outside.
//!
//! A panic inside a closure does not make the handle unusable: the lock's poison flag
//! is ignored because the tracker's own operations never leave it half-changed (a
//! refused operation changes nothing), so its invariants hold whatever a closure did.
//!
//! # Positions
//!
//! Positions are those of the tracker behind the handle. A compaction (through
//! [`SharedTracker::update`], in place with [`Tracker::replace_region`] or by replacing
//! the tracker) renumbers them; a waiter for a position of the old numbering should be
//! dropped and recreated from a fresh decision (`tests/policy_plan.rs` shows why).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, ready};

use futures_core::Stream;
use tokio::sync::Notify;

use crate::error::AppendError;
use crate::event::{Event, EventError, Handled};
use crate::record::Record;
use crate::tracker::{Appended, Tracker};

/// A [`Tracker`] shared between tasks: one feeds it events, others query it or wait for
/// a legal cut. Cloning the handle is **O(1)** (an `Arc`); all clones see one tracker.
///
/// See the [module docs](self) for the locking rules.
#[derive(Clone, Default)]
pub struct SharedTracker {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    tracker: Mutex<Tracker>,
    changed: Notify,
}

impl std::fmt::Debug for SharedTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.read(|t| f.debug_tuple("SharedTracker").field(t).finish())
    }
}

impl SharedTracker {
    /// Shares `tracker`. **O(1)**.
    pub fn new(tracker: Tracker) -> Self {
        SharedTracker {
            inner: Arc::new(Inner {
                tracker: Mutex::new(tracker),
                changed: Notify::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Tracker> {
        // See "Locking" in the module docs for why poison is ignored.
        self.inner
            .tracker
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Applies one event ([`Tracker::handle`]) and wakes the waiters. **O(1)**
    /// amortized under the lock.
    ///
    /// # Errors
    /// As [`Tracker::handle`]; a refused event changes nothing and wakes no one.
    pub fn handle(&self, event: Event) -> Result<Handled, EventError> {
        let handled = self.lock().handle(event)?;
        self.inner.changed.notify_waiters();
        Ok(handled)
    }

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

    /// Runs `query` on the tracker under the lock and returns its answer. The lock is
    /// held for exactly the closure's run.
    pub fn read<R>(&self, query: impl FnOnce(&Tracker) -> R) -> R {
        query(&self.lock())
    }

    /// Runs `change` on the tracker under the lock, then wakes the waiters (whether or
    /// not anything changed). This is how a compaction reaches the tracker, in place
    /// (`shared.update(|t| t.replace_region(start, end, summary_tokens))`, as
    /// `examples/agent_loop.rs` does) or by replacing it (`shared.update(|t| *t = rebuilt)`).
    pub fn update<R>(&self, change: impl FnOnce(&mut Tracker) -> R) -> R {
        let answer = change(&mut self.lock());
        self.inner.changed.notify_waiters();
        answer
    }

    /// A copy of the tracker, to plan a compaction without holding the lock.
    /// **O(n)** under the lock.
    pub fn snapshot(&self) -> Tracker {
        self.lock().clone()
    }

    /// Resolves to `ready`'s first `Some` answer. `ready` runs under the lock once now
    /// and once after each change to the tracker (each event, append or update), so it
    /// must be short; between changes the future sleeps. If no change ever makes `ready`
    /// answer, the future never resolves: wrap it in a timeout or `select!` when that
    /// can happen.
    ///
    /// # Cancellation safety
    /// Cancel-safe: dropping the future at any `.await` point loses nothing and leaves
    /// the handle, and every other waiter, as they were. The future holds no lock while
    /// pending, only a registration with the `Notify`, which dropping removes.
    pub fn wait_until<T, F>(&self, mut ready: F) -> impl Future<Output = T> + Send + 'static
    where
        F: FnMut(&Tracker) -> Option<T> + Send + 'static,
        T: Send + 'static,
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

    /// Resolves to the smallest legal cut `>= at` as soon as one exists: at once if
    /// there is one, otherwise on the change that creates it (typically the moment the
    /// last pending result lands, or a record before `at` closes). This is how a
    /// deferred compaction waits for the next safe point instead of polling. Each wake
    /// costs one **O(log n)** query under the lock.
    ///
    /// Never resolves if no such cut ever appears (for instance when the caller never
    /// delivers the pending results): wrap it in a timeout or `select!` when that can
    /// happen.
    ///
    /// # Cancellation safety
    /// Cancel-safe, as [`wait_until`](SharedTracker::wait_until): drop it at any time
    /// and create a new one later; nothing is lost.
    pub fn legal_cut_ready(&self, at: usize) -> impl Future<Output = usize> + Send + 'static {
        self.wait_until(move |t| t.legal_cut_at_or_after(at))
    }
}

pin_project_lite::pin_project! {
    /// A [`Stream`] of events tracked as they pass: each event is applied to the shared
    /// tracker when it arrives, and yielded with what it did. Like tokio-util's
    /// `FramedRead` around a decoder, it only forwards: the work is
    /// [`SharedTracker::handle`].
    ///
    /// A refused event is yielded as an `Err` and the stream goes on (the tracker is
    /// unchanged by it); stop on the first error if your loop cannot recover.
    ///
    /// # Cancellation safety
    /// `next()` on this stream is cancel-safe: an event is applied in the same `poll`
    /// that yields it, so dropping a pending `next()` loses no event and applies none
    /// twice. Dropping the stream leaves the tracker with every event yielded so far.
    #[must_use = "streams do nothing unless polled"]
    #[derive(Debug)]
    pub struct Tracked<S> {
        #[pin]
        events: S,
        tracker: SharedTracker,
    }
}

impl<S> Tracked<S> {
    /// Tracks `events` into `tracker`. **O(1)**.
    pub fn new(events: S, tracker: SharedTracker) -> Self {
        Tracked { events, tracker }
    }

    /// The shared tracker the events go to. **O(1)**.
    pub fn tracker(&self) -> &SharedTracker {
        &self.tracker
    }

    /// The inner stream, leaving the tracker as it is. **O(1)**.
    pub fn into_inner(self) -> S {
        self.events
    }
}

impl<S: Stream<Item = Event>> Stream for Tracked<S> {
    /// The event and what it did, or why it was refused.
    type Item = Result<(Event, Handled), EventError>;

    /// **O(1)** amortized per event, plus cloning its call id.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let Some(event) = ready!(this.events.poll_next(cx)) else {
            return Poll::Ready(None);
        };
        let handled = this.tracker.handle(event.clone());
        Poll::Ready(Some(handled.map(|h| (event, h))))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.events.size_hint()
    }
}
