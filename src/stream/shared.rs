//! The shared handle: [`Shared`], the [`Live`] values it shares and the [`Tracked`]
//! stream wrapper. See the [module docs](super) for the locking rules.

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
/// See the [module docs](super) for the locking rules.
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
