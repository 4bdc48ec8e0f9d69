//! Provider streams fed into a [`Shared`] value as they arrive (features `stream` and
//! `formats`): adapters from a `Stream` of byte chunks (an HTTP client's body stream)
//! and from a `tokio::io::AsyncRead`, through a [`Decoder`], into a shared tracker or
//! [`compact::Log`](crate::compact::Log), so that
//! [`legal_cut_ready`](Shared::legal_cut_ready) wakes the moment a streamed call's
//! result lands.
//!
//! Both are thin: bytes go into the decoder in the poll that reads them, and each
//! decoded item is fed ([`Feed::feed`]) under the shared value's lock, waking its
//! waiters, in the poll that yields it.
//!
//! ```
//! use bytes::Bytes;
//! use cutpoint::compact::Log;
//! use cutpoint::stream::decode::{Decoder, StreamFormat};
//! use cutpoint::stream::{Decoding, Shared};
//! use futures::StreamExt;
//!
//! # futures::executor::block_on(async {
//! let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\ndata: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n";
//! let chunks = futures::stream::iter(body.as_bytes().chunks(10).map(Bytes::copy_from_slice).collect::<Vec<_>>());
//! let shared = Shared::new(Log::new());
//! let decoder = Decoder::new(StreamFormat::OpenAiChatStream);
//! let mut items = Decoding::new(chunks, decoder, shared.clone());
//! while let Some(item) = items.next().await {
//!     item?;
//! }
//! // The call was streamed into the shared log; it waits for its result.
//! let ready = shared.legal_cut_ready(1);
//! shared.update(|log| log.append(cutpoint::Record::tool_result("call_1", 40).into()))?;
//! assert_eq!(ready.await, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Cancellation safety
//!
//! `next()` on either adapter is cancel-safe. A chunk (or a read) is pushed into the
//! decoder in the same poll that receives it, and an item is fed to the shared value
//! in the same poll that yields it: dropping a pending `next()` loses no byte and
//! feeds no item twice, and a later `next()` goes on where it stopped. Dropping the
//! adapter drops the bytes the decoder held for the event it was reading (at most one
//! event); the shared value keeps every item fed so far, and a record the stream left
//! open stays open there until [`Feed::abort_open`] closes it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use futures_core::Stream;
use tokio::io::{AsyncRead, ReadBuf};

use super::Shared;
use crate::stream::decode::{Decoded, Decoder, Feed, StreamError};
use crate::{EventError, Tracker};

/// Why an adapter stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FeedError {
    /// The stream could not be decoded, or carried a provider error.
    #[error(transparent)]
    Decode(#[from] StreamError),
    /// The shared value refused a decoded item (the item is in the error).
    #[error("{error}")]
    Refused {
        /// The tracker's reason.
        error: EventError,
        /// The item refused.
        item: Box<Decoded>,
    },
    /// Reading the bytes failed.
    #[error("reading the stream: {0}")]
    Read(#[from] io::Error),
    /// The byte stream yielded an error.
    #[error("reading the stream: {0}")]
    Source(Box<dyn std::error::Error + Send + Sync>),
}

/// A chunk of a byte stream: [`Bytes`], or an HTTP client's `Result<Bytes, E>`.
pub trait Chunk {
    /// The bytes, or the source's error.
    ///
    /// # Errors
    /// The source's error, boxed.
    fn into_bytes(self) -> Result<Bytes, Box<dyn std::error::Error + Send + Sync>>;
}

impl Chunk for Bytes {
    fn into_bytes(self) -> Result<Bytes, Box<dyn std::error::Error + Send + Sync>> {
        Ok(self)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> Chunk for Result<Bytes, E> {
    fn into_bytes(self) -> Result<Bytes, Box<dyn std::error::Error + Send + Sync>> {
        self.map_err(|e| Box::new(e) as _)
    }
}

/// The decoder and the shared value, between polls: what both adapters share.
struct Pump<T> {
    decoder: Decoder,
    shared: Shared<T>,
    /// An error was yielded: nothing more comes.
    done: bool,
    /// The source ended (the decoder was told so).
    ended: bool,
}

impl<T> Pump<T> {
    fn new(decoder: Decoder, shared: Shared<T>) -> Self {
        Pump {
            decoder,
            shared,
            done: false,
            ended: false,
        }
    }
}

/// What one read of an adapter's source did.
enum Read {
    /// Bytes went into the decoder, or nothing did but the source may be read again.
    Again,
    /// The source ended.
    Ended,
    /// The source failed.
    Failed(FeedError),
}

impl<T: Feed> Pump<T> {
    /// One poll of an adapter: the next item already decodable (fed), else `read`
    /// pushes the source's next bytes into the decoder and it tries again; the end
    /// after an error or the source's end. The loop the module docs' cancellation
    /// safety is about, written once for both adapters.
    fn poll(
        &mut self,
        mut read: impl FnMut(&mut Decoder) -> Poll<Read>,
    ) -> Poll<Option<Result<Decoded, FeedError>>> {
        loop {
            if let Some(item) = self.drain() {
                return Poll::Ready(Some(item));
            }
            if self.done || self.ended {
                return Poll::Ready(None);
            }
            match ready!(read(&mut self.decoder)) {
                Read::Again => {}
                Read::Ended => {
                    self.ended = true;
                    self.decoder.finish();
                }
                Read::Failed(e) => {
                    self.done = true;
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }

    /// The next item already decodable, fed to the shared value; `None` when more
    /// bytes are needed. After an error, `None` for ever.
    fn drain(&mut self) -> Option<Result<Decoded, FeedError>> {
        if self.done {
            return None;
        }
        let result = match self.decoder.next() {
            Ok(Some(item)) => match self.shared.update(|value| value.feed(&item)) {
                Ok(_) => Ok(item),
                Err(error) => Err(FeedError::Refused {
                    error,
                    item: Box::new(item),
                }),
            },
            Ok(None) => return None,
            Err(e) => Err(FeedError::Decode(e)),
        };
        self.done = result.is_err();
        Some(result)
    }
}

pin_project_lite::pin_project! {
    /// A `Stream` of byte chunks decoded into a [`Shared`] value: yields each
    /// [`Decoded`] item after feeding it. Ends after the last item of the stream, or
    /// after the first error (yielded as `Err`). See the [module docs](self) for
    /// cancellation safety.
    #[must_use = "streams do nothing unless polled"]
    pub struct Decoding<S, T = Tracker> {
        #[pin]
        bytes: S,
        pump: Pump<T>,
    }
}

impl<S, T> std::fmt::Debug for Decoding<S, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoding")
            .field("decoder", &self.pump.decoder)
            .finish_non_exhaustive()
    }
}

impl<R, T> std::fmt::Debug for ReadDecoding<R, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadDecoding")
            .field("decoder", &self.pump.decoder)
            .finish_non_exhaustive()
    }
}

impl<S, T> Decoding<S, T> {
    /// Decodes `bytes` with `decoder` into `shared`. **O(1)**.
    pub fn new(bytes: S, decoder: Decoder, shared: Shared<T>) -> Self {
        Decoding {
            bytes,
            pump: Pump::new(decoder, shared),
        }
    }

    /// The shared value the items go to. **O(1)**.
    pub fn shared(&self) -> &Shared<T> {
        &self.pump.shared
    }

    /// The decoder (its offset, events read, the open record). **O(1)**.
    pub fn decoder(&self) -> &Decoder {
        &self.pump.decoder
    }
}

impl<S, T> Stream for Decoding<S, T>
where
    S: Stream,
    S::Item: Chunk,
    T: Feed,
{
    type Item = Result<Decoded, FeedError>;

    /// **O(bytes of the chunk)** to push it, **O(1)** amortized per item fed.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let mut source = this.bytes;
        this.pump.poll(|decoder| {
            Poll::Ready(match ready!(source.as_mut().poll_next(cx)) {
                Some(chunk) => match chunk.into_bytes() {
                    Ok(bytes) => {
                        decoder.push(&bytes);
                        Read::Again
                    }
                    Err(e) => Read::Failed(FeedError::Source(e)),
                },
                None => Read::Ended,
            })
        })
    }
}

pin_project_lite::pin_project! {
    /// A `tokio::io::AsyncRead` decoded into a [`Shared`] value, as [`Decoding`]
    /// does for a stream of chunks (reads of up to 16 KiB). See the
    /// [module docs](self) for cancellation safety.
    #[must_use = "streams do nothing unless polled"]
    pub struct ReadDecoding<R, T = Tracker> {
        #[pin]
        reader: R,
        pump: Pump<T>,
        buf: Box<[u8]>,
    }
}

impl<R, T> ReadDecoding<R, T> {
    /// Decodes what `reader` reads with `decoder` into `shared`. **O(1)** (one 16 KiB
    /// buffer).
    pub fn new(reader: R, decoder: Decoder, shared: Shared<T>) -> Self {
        ReadDecoding {
            reader,
            pump: Pump::new(decoder, shared),
            buf: vec![0; 16 << 10].into_boxed_slice(),
        }
    }

    /// The shared value the items go to. **O(1)**.
    pub fn shared(&self) -> &Shared<T> {
        &self.pump.shared
    }
}

impl<R, T> Stream for ReadDecoding<R, T>
where
    R: AsyncRead,
    T: Feed,
{
    type Item = Result<Decoded, FeedError>;

    /// **O(bytes read)** to push them, **O(1)** amortized per item fed.
    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.project();
        let (mut reader, space) = (this.reader, this.buf);
        this.pump.poll(|decoder| {
            let mut buf = ReadBuf::new(space);
            Poll::Ready(match ready!(reader.as_mut().poll_read(cx, &mut buf)) {
                Ok(()) if buf.filled().is_empty() => Read::Ended,
                Ok(()) => {
                    decoder.push(buf.filled());
                    Read::Again
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => Read::Again,
                Err(e) => Read::Failed(FeedError::Read(e)),
            })
        })
    }
}
