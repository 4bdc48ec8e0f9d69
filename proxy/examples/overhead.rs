//! What the proxy adds to a request's round trip, measured over loopback in one run:
//! a stand-in upstream answering `{}` at once, the same requests sent to it directly
//! and through the proxy (check mode, sessions off, so each is read whole),
//! interleaved, a fixed count of each. Prints p50 and p99 per body. Bounded in count;
//! loopback only.
//!
//! `cargo run --release -p cutpoint-proxy --example overhead [ROUNDS]`

use std::convert::Infallible;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use cutpoint_proxy::{Config, Proxy};
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

/// Starts the stand-in upstream: reads each request whole, answers `{}`.
async fn stand_in() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let service = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                let _ = req.into_body().collect().await;
                Ok::<_, Infallible>(hyper::Response::new(Full::new(Bytes::from_static(b"{}"))))
            });
            tokio::spawn(http1::Builder::new().serve_connection(TokioIo::new(stream), service));
        }
    });
    addr
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let k = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[k.min(sorted.len() - 1)]
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(500);
    let upstream = stand_in().await;
    let mut config = Config::new(format!("http://{upstream}").parse().expect("url"));
    // Sessions off: each request read whole. With them on, the same body sent again
    // is a retry of its session, read from the session (benches/latency.rs's
    // `next_turn` measures a session's next request).
    config.max_sessions = 0;
    let proxy = Arc::new(Proxy::new(config).expect("proxy"));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let via = listener.local_addr().expect("addr");
    tokio::spawn(cutpoint_proxy::serve(
        listener,
        proxy,
        std::future::pending(),
    ));
    let fixtures = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/");
    let read = |name: &str| std::fs::read(format!("{fixtures}{name}")).expect("fixture");
    let small =
        br#"{"model":"m","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}"#.to_vec();
    let bodies = [
        ("anthropic, 1 message", "/v1/messages", small),
        (
            "anthropic, real Claude Code request (78 messages)",
            "/v1/messages",
            read("anthropic-request__claude-reliability__python-to-rust-port.json"),
        ),
        (
            "openai-responses, real Codex request (287 items)",
            "/v1/responses",
            read("openai-responses-request__localpush__rollout-12-41-04-parallel7.json"),
        ),
    ];
    let client: Client<_, Full<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    println!("{rounds} requests each, direct and through the proxy, interleaved");
    println!("| body | bytes | direct p50 | proxy p50 | direct p99 | proxy p99 |");
    println!("|---|---|---|---|---|---|");
    for (name, path, body) in bodies {
        let body = Bytes::from(body);
        let mut times = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
        for round in 0..rounds + 20 {
            for (k, addr) in [upstream, via].into_iter().enumerate() {
                let req = hyper::Request::post(format!("http://{addr}{path}"))
                    .header("content-type", "application/json")
                    .body(Full::new(body.clone()))
                    .expect("request");
                let start = Instant::now();
                let response = client.request(req).await.expect("answer");
                assert_eq!(response.status(), 200, "{name}");
                let _ = response.into_body().collect().await.expect("body");
                // The first 20 rounds warm the connections up.
                if round >= 20 {
                    times[k].push(start.elapsed());
                }
            }
        }
        for t in &mut times {
            t.sort();
        }
        let us = |d: Duration| format!("{} µs", d.as_micros());
        println!(
            "| {name} | {} | {} | {} | {} | {} |",
            body.len(),
            us(percentile(&times[0], 0.5)),
            us(percentile(&times[1], 0.5)),
            us(percentile(&times[0], 0.99)),
            us(percentile(&times[1], 0.99)),
        );
    }
}
