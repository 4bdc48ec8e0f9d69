//! What the proxy adds to a request, over loopback, against the direct path in the
//! same run: a stand-in upstream (hyper) and the proxy in front of it (check mode)
//! started once in one tokio runtime; each request sent to the stand-in directly and
//! through the proxy.
//!
//! - `round_trip/{direct,proxy}/BODY`: one request at a time, answered `{}` at once,
//!   the answer read whole.
//! - `ttfb/{direct,proxy}/BODY`: one request at a time, answered with a recorded
//!   Anthropic stream in chunks: the time to its first body frame (the rest is read
//!   outside the timing).
//! - `concurrent32/{direct,proxy}/BODY`: 32 requests in flight at once, answered
//!   `{}`; the reported time is per request (a batch's time over 32).
//!
//! - `next_turn/{direct,proxy_whole,proxy}/BODY`: one request at a time, answered
//!   `{}`, each the next turn of its session (`x-cutpoint-session`): the session's
//!   previous request is sent first, outside the timing, then the timed one, which
//!   continues it. `proxy_whole` has sessions off (every request read whole),
//!   `proxy` reads only the new elements.
//!
//! Bodies, as in `examples/overhead.rs`: a one-message Anthropic request, and the real
//! requests Claude Code (78 messages, 65 KB) and Codex (287 items, 42 KB) send for a
//! next turn (`tests/fixtures`). The first three groups go through a proxy with
//! sessions off, so that each request is read whole, as a conversation's first is
//! (the same body sent again would be a retry of its session, read from the session).
//! Loopback only; short by default (CI builds it only):
//! `cargo bench -p cutpoint-proxy --bench latency`.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cutpoint_proxy::{Config, Proxy};
use http_body_util::{BodyExt, Full};
use hyper::body::Frame;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

mod common;
use common::{fixture, previous_turn};

/// Requests in flight at once in the concurrent group.
const IN_FLIGHT: usize = 32;

/// The header asking the stand-in for a streamed answer (it passes the proxy as any
/// end-to-end header does).
const STREAM: &str = "x-bench-stream";

type Agent = Client<HttpConnector, Full<Bytes>>;

/// Starts the stand-in upstream: reads each request whole, answers `{}` at once, or
/// A streamed answer: its chunks one frame at a time, made in the body's own poll.
/// Not a `Channel` fed by a spawned task: on this multi-threaded runtime that one can
/// end before its last chunk (see `proxy/tests/it/load.rs`, `Paced`).
struct Chunks(VecDeque<Bytes>);

impl hyper::body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(self.0.pop_front().map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_empty()
    }
}

/// `sse` in chunks of 200 bytes when asked for a stream.
async fn stand_in(sse: Bytes) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            // As a provider's server does: a chunk of a stream goes out when written,
            // not held back for the previous one's ACK (Nagle's algorithm).
            let _ = stream.set_nodelay(true);
            let sse = sse.clone();
            let service = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let sse = sse.clone();
                async move {
                    let streamed = req.headers().contains_key(STREAM);
                    let _ = req.into_body().collect().await;
                    if !streamed {
                        let body = Full::new(Bytes::from_static(b"{}")).boxed_unsync();
                        return Ok::<_, Infallible>(hyper::Response::new(body));
                    }
                    let body = Chunks(
                        (0..sse.len())
                            .step_by(200)
                            .map(|at| sse.slice(at..(at + 200).min(sse.len())))
                            .collect(),
                    );
                    let response = hyper::Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(body.boxed_unsync())
                        .expect("response");
                    Ok(response)
                }
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

/// The stand-in, the proxies in front of it (sessions off and on), and the agent's
/// client, on one runtime.
struct Setup {
    runtime: Runtime,
    direct: SocketAddr,
    /// Sessions off: every request read whole.
    whole: SocketAddr,
    /// Sessions on (the default).
    proxy: SocketAddr,
    client: Agent,
}

/// A proxy (check mode) in front of `upstream`, with `max_sessions`, serving on a
/// loopback port.
async fn proxy(upstream: SocketAddr, max_sessions: usize) -> SocketAddr {
    let mut config = Config::new(format!("http://{upstream}").parse().expect("url"));
    config.max_sessions = max_sessions;
    let proxy = Arc::new(Proxy::new(config).expect("proxy"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let via = listener.local_addr().expect("addr");
    tokio::spawn(cutpoint_proxy::serve(
        listener,
        proxy,
        std::future::pending(),
    ));
    via
}

impl Setup {
    fn start() -> Setup {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let sse = fixture("anthropic-sse__anthropics-anthropic-sdk-python__tool_use_response.txt");
        let (direct, whole, proxy, client) = runtime.block_on(async {
            let direct = stand_in(sse).await;
            let whole = proxy(direct, 0).await;
            let sessions = proxy(direct, cutpoint_proxy::DEFAULT_MAX_SESSIONS).await;
            // The agent's side on TCP_NODELAY too, so that only the proxy's own
            // sockets differ between the two paths.
            let mut http = HttpConnector::new();
            http.set_nodelay(true);
            let client: Agent = Client::builder(TokioExecutor::new()).build(http);
            (direct, whole, sessions, client)
        });
        Setup {
            runtime,
            direct,
            whole,
            proxy,
            client,
        }
    }
}

fn request(
    addr: SocketAddr,
    path: &str,
    body: &Bytes,
    streamed: bool,
) -> hyper::Request<Full<Bytes>> {
    let mut req = hyper::Request::post(format!("http://{addr}{path}"))
        .header("content-type", "application/json")
        .header(cutpoint_proxy::SESSION_HEADER, "bench");
    if streamed {
        req = req.header(STREAM, "1");
    }
    req.body(Full::new(body.clone())).expect("request")
}

/// One round trip, the answer read whole.
async fn round_trip(client: &Agent, addr: SocketAddr, path: &str, body: &Bytes) {
    let response = client
        .request(request(addr, path, body, false))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    let _ = response.into_body().collect().await.expect("the body");
}

/// One streamed request: the time to the first body frame; the rest is read after.
async fn first_byte(client: &Agent, addr: SocketAddr, path: &str, body: &Bytes) -> Duration {
    let start = Instant::now();
    let response = client
        .request(request(addr, path, body, true))
        .await
        .expect("an answer");
    assert_eq!(response.status(), 200);
    let mut body = response.into_body();
    let first = body.frame().await.expect("a frame").expect("no error");
    let ttfb = start.elapsed();
    assert!(first.is_data());
    let _ = body.collect().await.expect("the rest");
    ttfb
}

fn latency(c: &mut Criterion) {
    let setup = Setup::start();
    let small = Bytes::from_static(
        br#"{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#,
    );
    let bodies = [
        ("small", "/v1/messages", small),
        (
            "claude_code",
            "/v1/messages",
            fixture("anthropic-request__claude-reliability__python-to-rust-port.json"),
        ),
        (
            "codex",
            "/v1/responses",
            fixture("openai-responses-request__localpush__rollout-12-41-04-parallel7.json"),
        ),
    ];
    let paths = [("direct", setup.direct), ("proxy", setup.whole)];
    let (runtime, client) = (&setup.runtime, &setup.client);

    let mut group = c.benchmark_group("round_trip");
    for (name, path, body) in &bodies {
        group.throughput(Throughput::Bytes(body.len() as u64));
        for (via, addr) in paths {
            group.bench_with_input(BenchmarkId::new(via, name), body, |b, body| {
                b.iter_custom(|iters| {
                    runtime.block_on(async {
                        let start = Instant::now();
                        for _ in 0..iters {
                            round_trip(client, addr, path, body).await;
                        }
                        start.elapsed()
                    })
                });
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("ttfb");
    for (name, path, body) in &bodies[..2] {
        for (via, addr) in paths {
            group.bench_with_input(BenchmarkId::new(via, name), body, |b, body| {
                b.iter_custom(|iters| {
                    runtime.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            total += first_byte(client, addr, path, body).await;
                        }
                        total
                    })
                });
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group("next_turn");
    let turns = [(&bodies[1], "messages"), (&bodies[2], "input")];
    let next_paths = [
        ("direct", setup.direct),
        ("proxy_whole", setup.whole),
        ("proxy", setup.proxy),
    ];
    for ((name, path, next), key) in turns {
        let previous = previous_turn(next, key);
        group.throughput(Throughput::Bytes(next.len() as u64));
        for (via, addr) in next_paths {
            group.bench_with_input(BenchmarkId::new(via, name), next, |b, next| {
                b.iter_custom(|iters| {
                    runtime.block_on(async {
                        let mut total = Duration::ZERO;
                        for _ in 0..iters {
                            // The session's previous turn, outside the timing: a
                            // shorter history than the session's, so read whole.
                            round_trip(client, addr, path, &previous).await;
                            let start = Instant::now();
                            round_trip(client, addr, path, next).await;
                            total += start.elapsed();
                        }
                        total
                    })
                });
            });
        }
    }
    group.finish();

    let mut group = c.benchmark_group(format!("concurrent{IN_FLIGHT}"));
    // Per request: each iteration is a batch of IN_FLIGHT, its time divided by it.
    group.throughput(Throughput::Elements(1));
    for (name, path, body) in &bodies[..2] {
        for (via, addr) in paths {
            group.bench_with_input(BenchmarkId::new(via, name), body, |b, body| {
                b.iter_custom(|iters| {
                    runtime.block_on(async {
                        let start = Instant::now();
                        for _ in 0..iters {
                            let mut batch = JoinSet::new();
                            for _ in 0..IN_FLIGHT {
                                let (client, body) = (client.clone(), body.clone());
                                let path = *path;
                                batch.spawn(async move {
                                    round_trip(&client, addr, path, &body).await;
                                });
                            }
                            while let Some(done) = batch.join_next().await {
                                done.expect("a request");
                            }
                        }
                        start.elapsed() / IN_FLIGHT as u32
                    })
                });
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    // Short by default: CI only builds it (`cargo bench --no-run`); lengthen a run
    // with `-- --measurement-time 10 --sample-size 50`.
    config = Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));
    targets = latency
}
criterion_main!(benches);
