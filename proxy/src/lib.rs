//! `cutpoint-proxy`: cutpoint in the HTTP path between an agent and its provider.
//!
//! Every agent that sends its history to Anthropic or OpenAI over HTTP takes a base
//! URL (`ANTHROPIC_BASE_URL`, `OPENAI_BASE_URL`, an SDK's `base_url`). Pointed at this
//! proxy, each request of the three provider APIs it reads (`POST /v1/messages`,
//! `/v1/chat/completions`, `/v1/responses`) is checked by the provider's tool-call
//! rules before the provider sees it, and in compact mode compacted at a legal cut
//! when it passes a budget:
//!
//! ```text
//! agent ──request──▶ Proxy::handle ──▶ Mode::decide(route, body) ──▶ Forward / Compacted ──▶ upstream
//!                         │                                   └──▶ Refuse: 400 in the provider's shape
//! agent ◀──response, streamed as it arrives, byte for byte──────────────────────────────── upstream
//! ```
//!
//! - [`Mode::decide`] is the sans-IO core: bytes in, a [`Decision`] out.
//! - [`Mode::decide_in`] decides a conversation's next request on its [`Session`]
//!   (what the proxy read of the last one): only the new history elements are read,
//!   and the decision is the one [`Mode::decide_in_from_scratch`] makes reading the
//!   request whole. The [`Sessions`] table bounds them; a followed answer feeds its
//!   session ([`Followed`]).
//! - [`Proxy::handle`] is the mountable handler: a `Request` in, a `Response` out,
//!   for any body type, so a Rust service can route to it from its own router.
//! - [`serve`] runs it on a listener with graceful shutdown (streams in flight finish).
//!
//! Mounted in a service of one's own (any body type whose chunks are [`Bytes`]):
//!
//! ```no_run
//! use std::sync::Arc;
//! use cutpoint_proxy::{Config, Proxy};
//!
//! # fn mount() -> Result<(), Box<dyn std::error::Error>> {
//! let proxy = Arc::new(Proxy::new(Config::new("https://api.anthropic.com".parse()?))?);
//! let service = hyper::service::service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
//!     let proxy = Arc::clone(&proxy);
//!     // `false`: the service serves (or not) its own /metrics, from `proxy.metrics()`.
//!     async move { Ok::<_, std::convert::Infallible>(proxy.handle(request, false).await) }
//! });
//! # let _ = service;
//! # Ok(())
//! # }
//! ```
//!
//! Headers pass through untouched, authentication included, and are never logged;
//! only the hop-by-hop ones (`connection`, `transfer-encoding`, ...) and `host` are
//! the proxy's own, and `content-length` is recomputed for a body it read. Every
//! other path and method passes through unread, its body streamed; a request to
//! upgrade the connection (a WebSocket) is answered 426 and not forwarded.

#![forbid(unsafe_code)]

mod body;
#[cfg(feature = "cli")]
pub mod cli;
mod decide;
mod follow;
mod histogram;
mod metrics;
mod refusal;
mod repair;
mod route;
mod scratch;
mod session;
mod upstream;
mod warm;

use std::convert::Infallible;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Request, Response, StatusCode, Uri};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Body;
use tokio::net::TcpListener;

pub use decide::{Compaction, Decision, DeferCause, Deferral, Mode, NoBudget};
pub use histogram::Histogram;
pub use metrics::Metrics;
pub use refusal::Refusal;
pub use route::Route;
pub use session::{Followed, Kept, Session, SessionKey, Sessions};
pub use upstream::UpstreamError;

use metrics::{Count, Took};

/// The error type of the bodies the proxy sends and forwards.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The body of every response [`Proxy::handle`] returns (and of the requests it
/// sends upstream): the upstream's body streamed, or one the proxy made.
pub type ProxyBody = UnsyncBoxBody<Bytes, BoxError>;

/// The default cap on a request body the proxy reads: 32 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 32 << 20;

/// The default cap on sessions remembered (compact mode): 256.
pub const DEFAULT_MAX_SESSIONS: usize = 256;

/// The default cap on one session's remembered history: 8 MiB by its estimate
/// ([`Session::bytes`]: the client's history and the one forwarded instead, with
/// their readings).
pub const DEFAULT_MAX_SESSION_BYTES: usize = 8 << 20;

/// The default cap on all sessions together: 256 MiB by their estimate, so that a
/// proxy in front of many long conversations holds a bounded amount whatever
/// [`DEFAULT_MAX_SESSIONS`] times [`DEFAULT_MAX_SESSION_BYTES`] would allow (2 GiB).
pub const DEFAULT_MAX_SESSIONS_TOTAL_BYTES: usize = 256 << 20;

/// The default time the upstream has to accept a connection: 10 s.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The default time the upstream has to start its response (status and headers)
/// once the request is sent: 10 minutes, the Anthropic and OpenAI SDKs' own request
/// timeout (a request that does not stream is answered only when the model is done).
pub const DEFAULT_FIRST_BYTE_TIMEOUT: Duration = Duration::from_secs(600);

/// The request header naming a session ([`Sessions`]); without it, a session is
/// keyed by a hash of the conversation's start.
pub const SESSION_HEADER: &str = "x-cutpoint-session";

/// How a [`Proxy`] is set up.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Config {
    /// Where requests go: a base URL (`https://api.anthropic.com`,
    /// `http://127.0.0.1:9000/prefix`); a request's path and query are appended to it.
    pub upstream: Uri,
    /// Check only, or compact too.
    pub mode: Mode,
    /// The largest request body of a provider route the proxy reads; a larger one is
    /// answered 413 and not forwarded.
    pub max_body_bytes: usize,
    /// The most sessions remembered ([`Sessions`]; in every mode: a session's next
    /// request is read only where it is new), the least recently used evicted
    /// first; 0 remembers none (each request read whole, as [`Mode::decide`] does).
    pub max_sessions: usize,
    /// The most bytes one session remembers, by its estimate ([`Session::bytes`]);
    /// a larger one is not remembered.
    pub max_session_bytes: usize,
    /// The most bytes all sessions remember together, by the same estimate; the least
    /// recently used are evicted to stay within it.
    pub max_sessions_total_bytes: usize,
    /// How long the upstream has to accept a connection (`None`: no limit); past it,
    /// the request is answered 504 in the provider's shape.
    pub connect_timeout: Option<Duration>,
    /// How long the upstream has to start its response (status and headers) once
    /// the request is sent (`None`: no limit); past it, 504. A streamed body is never
    /// timed: once it starts, it flows as long as the upstream sends.
    pub first_byte_timeout: Option<Duration>,
}

impl Config {
    /// Check mode in front of `upstream`, with the default body cap. **O(1)**.
    pub fn new(upstream: Uri) -> Self {
        Config {
            upstream,
            mode: Mode::Check,
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_sessions: DEFAULT_MAX_SESSIONS,
            max_session_bytes: DEFAULT_MAX_SESSION_BYTES,
            max_sessions_total_bytes: DEFAULT_MAX_SESSIONS_TOTAL_BYTES,
            connect_timeout: Some(DEFAULT_CONNECT_TIMEOUT),
            first_byte_timeout: Some(DEFAULT_FIRST_BYTE_TIMEOUT),
        }
    }
}

/// The proxy: its configuration, its upstream client and its counters. Share it
/// behind an [`Arc`]; [`handle`](Proxy::handle) takes `&self`.
#[derive(Debug)]
pub struct Proxy {
    config: Config,
    /// `config.mode`, shared with the blocking tasks that decide.
    mode: Arc<Mode>,
    upstream: upstream::Upstream,
    /// Shared with the answers' decoders, which count when a stream ends.
    metrics: Arc<Metrics>,
    /// Compact mode's sessions, shared with the blocking tasks that decide.
    sessions: Arc<Mutex<Sessions>>,
}

impl Proxy {
    /// A proxy for `config`: its HTTPS client (rustls with the ring provider and the
    /// Mozilla roots; plain HTTP for an `http://` upstream). **O(roots)**.
    ///
    /// # Errors
    /// [`UpstreamError`] when the upstream URL has no scheme or host, or TLS cannot be
    /// set up.
    pub fn new(config: Config) -> Result<Self, UpstreamError> {
        Ok(Proxy {
            upstream: upstream::Upstream::new(
                &config.upstream,
                upstream::Timeouts {
                    connect: config.connect_timeout,
                    first_byte: config.first_byte_timeout,
                },
            )?,
            mode: Arc::new(config.mode.clone()),
            sessions: Arc::new(Mutex::new(Sessions::new(
                config.max_sessions,
                config.max_session_bytes,
                config.max_sessions_total_bytes,
            ))),
            config,
            metrics: Arc::new(Metrics::default()),
        })
    }

    /// Its counters. **O(1)**.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Its configuration. **O(1)**.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// [`Metrics::render`], and the session table's gauges: sessions held, the
    /// estimate of their bytes ([`Session::bytes`]), and sessions evicted so far.
    /// What `/metrics` answers. **O(reasons + buckets)**.
    pub fn render_metrics(&self) -> String {
        use std::fmt::Write;
        let mut out = self.metrics.render();
        let (held, bytes, evicted) = self.sessions();
        for (name, kind, help, value) in [
            ("sessions", "gauge", "Sessions held.", held as u64),
            (
                "session_bytes",
                "gauge",
                "An estimate of the bytes the sessions held hold (their history elements and readings).",
                bytes as u64,
            ),
            (
                "sessions_evicted_total",
                "counter",
                "Sessions evicted, least recently used first, to stay within --max-sessions.",
                evicted,
            ),
        ] {
            let _ = writeln!(out, "# HELP cutpoint_proxy_{name} {help}");
            let _ = writeln!(out, "# TYPE cutpoint_proxy_{name} {kind}");
            let _ = writeln!(out, "cutpoint_proxy_{name} {value}");
        }
        out
    }

    /// Sessions remembered now, their bytes, and sessions evicted so far. **O(1)**
    /// (a lock).
    pub fn sessions(&self) -> (usize, usize, u64) {
        let s = self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        (s.len(), s.bytes(), s.evicted())
    }

    /// Answers one request: a provider route's body is read (up to the cap) and
    /// decided on ([`Mode::decide`]); a refusal is answered in the provider's error
    /// shape and never forwarded; a request to upgrade the connection (`upgrade`
    /// header: a WebSocket) is answered 426 and never forwarded; anything else goes
    /// upstream, and the upstream's
    /// answer comes back as it arrives, status, headers and body unchanged. `GET
    /// /metrics` is answered with [`Metrics::render`] when `serve_metrics`. Never
    /// fails: an upstream that cannot be reached is a 502 in the provider's shape.
    /// **O(len(body))** plus [`Mode::decide`] for a provider route, which runs on
    /// tokio's blocking pool (so the handler needs a tokio runtime, as hyper-util's
    /// client does); **O(1)** per chunk otherwise.
    pub async fn handle<B>(&self, request: Request<B>, serve_metrics: bool) -> Response<ProxyBody>
    where
        B: Body<Data = Bytes> + Send + 'static,
        B::Error: Into<BoxError>,
    {
        if serve_metrics && request.uri().path() == "/metrics" {
            return plain(StatusCode::OK, self.render_metrics());
        }
        let arrived = Instant::now();
        self.metrics.count(Count::Request);
        let route = Route::of(request.method(), request.uri().path());
        if request.headers().contains_key(header::UPGRADE) {
            // A WebSocket (Codex asks for one on `GET /v1/responses`): an upgraded
            // connection is not carried, and what went over it would pass unchecked.
            // 426 makes the client fall back to plain HTTP at once; forwarded without its
            // `upgrade`, the upstream's answer to a plain GET decided (Codex 0.169 falls
            // back at once on a 426, after seven retries on a 404 or 405, not on a 400).
            // In the shape of the API the path belongs to, whatever the method.
            let shape = Route::of(&http::Method::POST, request.uri().path());
            return self.refuse(
                shape.unwrap_or(Route::OpenAiChat),
                Refusal {
                    status: StatusCode::UPGRADE_REQUIRED,
                    reason: "upgrade",
                    message: "cutpoint proxy: connection upgrades (WebSocket) are not proxied; send the request over plain HTTP".to_owned(),
                },
            );
        }
        let (parts, body) = request.into_parts();
        let Some(route) = route else {
            tracing::debug!(method = %parts.method, path = parts.uri.path(), "passed through");
            return self
                .forward(parts, body.map_err(Into::into).boxed_unsync(), None)
                .await;
        };
        self.metrics.count(Count::Read);
        let bytes = match self.read_body(&parts.headers, body).await {
            Ok(bytes) => bytes,
            Err(refusal) => return self.refuse(route, refusal),
        };
        // Reading, checking and compacting a history is CPU work of **O(len)** and
        // more: off the async workers, so that the streams they carry never wait on
        // it. A panic there (a bug) refuses the request; it is never forwarded.
        let (mode, body) = (Arc::clone(&self.mode), bytes.clone());
        // Sessions off: nothing to build or keep.
        let sessions = (self.config.max_sessions > 0).then(|| Arc::clone(&self.sessions));
        let named = parts
            .headers
            .get(SESSION_HEADER)
            .map(|v| v.as_bytes().to_vec());
        let metrics = Arc::clone(&self.metrics);
        let (decision, session) = tokio::task::spawn_blocking(move || decide_in_session(&mode, sessions.as_deref(), &metrics, route, &body, named.as_deref()))
            .await
            .unwrap_or_else(|e| {
                tracing::error!(route = route.name(), error = %e, "the decision failed");
                (Decision::Refuse(Refusal {
                    status: StatusCode::INTERNAL_SERVER_ERROR,
                    reason: "internal-error",
                    message: "cutpoint proxy: the request could not be checked (an internal error); it was not forwarded".to_owned(),
                }), None)
            });
        let read = Some(Read {
            route,
            arrived,
            session,
            asks_compaction: follow::asks_compaction(route, &bytes),
        });
        match decision {
            Decision::Refuse(refusal) => self.refuse(route, refusal),
            Decision::Forward => self.forward(parts, full(bytes), read).await,
            Decision::Deferred(deferral) => {
                self.metrics.count(Count::Deferral(deferral.cause));
                tracing::warn!(route = route.name(), cause = deferral.cause.name(), reason = %deferral.reason, "over the budget, forwarded as it came");
                self.forward(parts, full(bytes), read).await
            }
            Decision::Repaired {
                body,
                answered,
                dropped,
            } => {
                self.metrics.count(Count::Repair);
                tracing::info!(route = route.name(), ?answered, ?dropped, "repaired");
                self.forward(parts, full(body), read).await
            }
            Decision::Continued {
                body,
                tokens_before,
                tokens_after,
                deferred,
            } => {
                self.metrics.count(Count::Continued);
                if let Some(deferral) = &deferred {
                    self.metrics.count(Count::Deferral(deferral.cause));
                    tracing::warn!(route = route.name(), cause = deferral.cause.name(), reason = %deferral.reason, "over the budget, the session continued as it was");
                }
                self.shrunk(route, tokens_before, tokens_after, "session continued");
                self.forward(parts, full(body), read).await
            }
            Decision::Compacted {
                body,
                tokens_before,
                tokens_after,
            } => {
                self.shrunk(route, tokens_before, tokens_after, "compacted");
                self.forward(parts, full(body), read).await
            }
        }
    }

    /// Counts and logs a request forwarded smaller than it came. **O(1)**.
    fn shrunk(&self, route: Route, tokens_before: u64, tokens_after: u64, what: &'static str) {
        self.metrics.count(Count::Compaction(
            tokens_before.saturating_sub(tokens_after),
        ));
        tracing::info!(route = route.name(), tokens_before, tokens_after, "{what}");
    }

    /// The body of a provider route's request, whole: refused when its
    /// `content-length` or its bytes pass the cap (413), when it is compressed (415:
    /// the proxy cannot read it), or when reading it fails. **O(len)**.
    async fn read_body<B>(&self, headers: &HeaderMap, body: B) -> Result<Bytes, Refusal>
    where
        B: Body<Data = Bytes>,
        B::Error: Into<BoxError>,
    {
        let max = self.config.max_body_bytes;
        let too_large = || Refusal {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            reason: "body-too-large",
            message: format!("cutpoint proxy: the request body is over the cap of {max} bytes"),
        };
        if let Some(encoding) = headers.get(header::CONTENT_ENCODING) {
            if encoding.as_bytes() != b"identity" {
                return Err(Refusal {
                    status: StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    reason: "content-encoding",
                    message: format!(
                        "cutpoint proxy: cannot read a request body with content-encoding {}",
                        String::from_utf8_lossy(encoding.as_bytes())
                    ),
                });
            }
        }
        let declared = headers
            .get(header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|n| n > max as u64) {
            return Err(too_large());
        }
        match Limited::new(body, max).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) => {
                let e: BoxError = e;
                if e.downcast_ref::<LengthLimitError>().is_some() {
                    Err(too_large())
                } else {
                    Err(Refusal::bad_request(
                        "body-read-error",
                        format!("cutpoint proxy: the request body could not be read: {e}"),
                    ))
                }
            }
        }
    }

    /// The refusal answered in `route`'s provider shape, counted and logged.
    fn refuse(&self, route: Route, refusal: Refusal) -> Response<ProxyBody> {
        self.metrics.refused(refusal.reason);
        tracing::info!(
            route = route.name(),
            status = refusal.status.as_u16(),
            reason = refusal.reason,
            "refused"
        );
        let mut response = Response::new(full(refusal.body(route)));
        *response.status_mut() = refusal.status;
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Ok(reason) = HeaderValue::from_str(refusal.reason) {
            headers.insert(HeaderName::from_static("x-cutpoint-refused"), reason);
        }
        response
    }

    /// Sends the request upstream and streams the answer back; a failure to reach it
    /// is a 502 in the read route's shape (OpenAI's for a path passed through). For a
    /// request the proxy read (`read`), the time it added and the time to the
    /// answer's first byte are measured, and a successful streamed answer followed.
    async fn forward(
        &self,
        parts: http::request::Parts,
        body: ProxyBody,
        read: Option<Read>,
    ) -> Response<ProxyBody> {
        self.metrics.count(Count::Forwarded);
        if let Some(read) = &read {
            self.metrics.time(Took::Added, read.arrived.elapsed());
        }
        let route = read.as_ref().map(|r| r.route);
        match self.upstream.send(parts, body, read.is_some()).await {
            Ok(response) => match read {
                Some(read) => {
                    // A copy of each chunk through the route's live decoder when it
                    // is a stream; the chunk itself goes on unchanged.
                    let mut follow = is_stream(&response).then(|| {
                        let session = read.session.map(|k| (Arc::clone(&self.sessions), k));
                        follow::Follow::new(
                            read.route,
                            Arc::clone(&self.metrics),
                            session,
                            read.asks_compaction,
                        )
                    });
                    let (parts, body) = response.into_parts();
                    let metrics = Arc::clone(&self.metrics);
                    let mut first = Some(read.arrived);
                    let body = body
                        .map_frame(move |frame| {
                            if let Some(data) = frame.data_ref() {
                                if let Some(arrived) = first.take() {
                                    metrics.time(Took::FirstByte, arrived.elapsed());
                                }
                                if let Some(f) = &mut follow {
                                    f.push(data);
                                }
                            }
                            frame
                        })
                        .boxed_unsync();
                    Response::from_parts(parts, body)
                }
                None => response,
            },
            Err(e) => {
                let (status, reason, message) = match &e {
                    upstream::SendError::Timeout { .. } => {
                        self.metrics.count(Count::UpstreamTimeout);
                        tracing::warn!(error = %e, "upstream timed out");
                        (
                            StatusCode::GATEWAY_TIMEOUT,
                            "upstream-timeout",
                            format!("cutpoint proxy: the upstream timed out: {e}"),
                        )
                    }
                    upstream::SendError::Failed(_) => {
                        self.metrics.count(Count::UpstreamError);
                        tracing::warn!(error = %e, "upstream unreachable");
                        (
                            StatusCode::BAD_GATEWAY,
                            "upstream-unreachable",
                            format!("cutpoint proxy: the upstream could not be reached: {e}"),
                        )
                    }
                };
                let refusal = Refusal {
                    status,
                    reason,
                    message,
                };
                let mut response =
                    Response::new(full(refusal.body(route.unwrap_or(Route::OpenAiChat))));
                *response.status_mut() = status;
                let headers = response.headers_mut();
                headers.insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                if let Ok(reason) = HeaderValue::from_str(reason) {
                    headers.insert(HeaderName::from_static("x-cutpoint-upstream"), reason);
                }
                response
            }
        }
    }
}

/// A request of a provider route the proxy read, as it goes upstream.
struct Read {
    route: Route,
    /// When it arrived.
    arrived: Instant,
    /// The session it was remembered in, which its followed answer feeds.
    session: Option<SessionKey>,
    /// It ends in a Responses `compaction_trigger` (its answer must hold exactly one
    /// `compaction` item).
    asks_compaction: bool,
}

/// Whether `response` is a successful event stream (an answer the live decoders
/// read). **O(1)**.
fn is_stream(response: &Response<ProxyBody>) -> bool {
    response.status() == StatusCode::OK
        && response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"))
}

/// A whole body the proxy holds.
fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes)
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A plain-text response (the metrics).
fn plain(status: StatusCode, text: String) -> Response<ProxyBody> {
    let mut response = Response::new(full(Bytes::from(text)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4"),
    );
    response
}

/// [`Mode::decide_in`] with the session table (`None`: sessions off, every request
/// decided as [`Mode::decide`] decides it): the session keyed by `named` (the
/// [`SESSION_HEADER`]) or by the conversation's start, taken out of the table,
/// decided with, and the next one remembered (or none, forgotten) after; returns
/// the decision and the key of the session remembered, for its answer to feed. A
/// request decided incrementally is held against the session's followed answer:
/// the calls it asked for that the new messages carry, and those they do not, are
/// counted. The table's lock is held only to take, store and feed, never while
/// deciding; what it evicts is dropped after the lock. **O(len)** to parse, plus
/// the decision.
fn decide_in_session(
    mode: &Mode,
    sessions: Option<&Mutex<Sessions>>,
    metrics: &Metrics,
    route: Route,
    body: &[u8],
    named: Option<&[u8]>,
) -> (Decision, Option<SessionKey>) {
    let start = Instant::now();
    let Some(sessions) = sessions else {
        let decision = mode.decide(route, body);
        metrics.time(Took::Decide { incremental: false }, start.elapsed());
        return (decision, None);
    };
    let request = warm::Request::parse(route, body);
    let key = match (named, &request) {
        (Some(name), _) => Some(warm::named_key(route, name)),
        (None, Some(r)) => Some(r.key(route)),
        (None, None) => None,
    };
    let Some(key) = key else {
        let decision = mode.decide(route, body);
        metrics.time(Took::Decide { incremental: false }, start.elapsed());
        return (decision, None);
    };
    let lock = || sessions.lock().unwrap_or_else(|p| p.into_inner());
    let mut prior = lock().take(key);
    // What the provider answered the session's last request, held against what the
    // client sends back once the decision is made (it never changes the decision).
    let answer = prior
        .as_mut()
        .and_then(|p| Some((p.client().len(), p.answer.take()?)));
    let (decision, session, incremental) = mode.decide_parsed(route, body, request.as_ref(), prior);
    metrics.time(Took::Decide { incremental }, start.elapsed());
    if incremental {
        metrics.count(Count::Incremental);
        if let (Some((from, answer)), Some(s)) = (&answer, &session) {
            let (carried, missing) = s.carried(*from, answer);
            metrics.count(Count::AnswerCallsCarried { carried, missing });
        }
    }
    let (kept, _dropped) = match session {
        Some(s) => lock().remember(key, s),
        None => (Kept::Off, lock().forget(key).into_iter().collect()),
    };
    (decision, (kept == Kept::Yes).then_some(key))
}

/// Serves `proxy` on `listener` over HTTP/1.1, with `/metrics`, until `shutdown`
/// resolves; then stops accepting and waits for every connection in flight, its
/// streamed answers included, to finish (hyper-util's graceful shutdown). A failed
/// accept (out of file descriptors) is logged and retried.
///
/// # Errors
/// None today: the `Result` leaves room for a listener that can fail for good.
pub async fn serve(
    listener: TcpListener,
    proxy: Arc<Proxy>,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    use hyper_util::server::graceful::GracefulShutdown;

    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        // Each chunk of a streamed answer goes to the agent when the upstream's
        // arrives, not held back for the ACK of the previous one (Nagle's algorithm
        // and the agent's delayed ACK stall a small write up to 40 ms on Linux).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "TCP_NODELAY not set");
        }
        let proxy = Arc::clone(&proxy);
        let service = service_fn(move |request| {
            let proxy = Arc::clone(&proxy);
            async move { Ok::<_, Infallible>(proxy.handle(request, true).await) }
        });
        let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        });
    }
    tracing::info!(
        connections = graceful.count(),
        "shutting down: waiting for connections in flight"
    );
    graceful.shutdown().await;
    Ok(())
}
