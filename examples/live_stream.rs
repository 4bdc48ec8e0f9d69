//! An agent loop against real HTTP streams: a loopback server (hyper, bound to
//! 127.0.0.1 on a free port) replays recorded Anthropic streaming responses, split
//! into random chunks, one per model turn; a real streaming HTTP client (reqwest)
//! reads each response and feeds it, as it arrives, through the stream decoder into
//! one [`Shared<Log>`](Shared). While a turn's calls run, a compaction waits on
//! [`Shared::legal_cut_ready`] and wakes when the last result lands; then the
//! [`TriggerPolicy`] compacts if the log is over budget. A turn whose stream leaves a
//! call open (cut off by `max_tokens`) gets the call aborted, as `compact::repair`
//! would. Every compaction is checked with [`validate`]; any failure exits non-zero.
//!
//! ```text
//! cargo run --example live_stream [SEED]
//! ```
//!
//! The recordings come from `tests/fixtures/streams/` (their sources are in its
//! `SOURCES.md`); the server and client are the ones `tests/it/streams_http.rs`
//! drives over all 29 recordings.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use cutpoint::compact::{Entry, Log, Options, Payload, ResultStatus, validate};
use cutpoint::policy::{Planned, TriggerPolicy};
use cutpoint::stream::decode::{Decoded, Decoder, Detail, Feed, StreamFormat};
use cutpoint::stream::{Decoding, FeedError, Shared};
use cutpoint::testing::synth::Rng;
use cutpoint::{Record, RecordKind};
use futures::StreamExt;
use http_body_util::StreamBody;
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

/// The recordings the loop's model "answers" with, one per turn, in order.
const TURNS: [&str; 5] = [
    "anthropic-sse__anthropics-anthropic-sdk-python__tool_use_response.txt",
    "anthropic-sse__simonw-llm-anthropic__test_tools.yaml.interaction0.sse",
    "anthropic-sse__anthropics-anthropic-sdk-python__incomplete_partial_json_response.txt",
    "anthropic-sse__pydantic-pydantic-ai__test_anthropic_native_tool_search_streaming.yaml.interaction0.sse",
    "anthropic-sse__pydantic-pydantic-ai__test_anthropic_code_execution_tool_stream.yaml.interaction0.sse",
];

/// Reads a recording of `tests/fixtures/streams/`.
pub(crate) fn fixture(name: &str) -> Vec<u8> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/streams")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `bytes` cut into 1 to 64 random chunks (empty ones too), from `seed`.
pub(crate) fn chunks(bytes: &[u8], seed: u64) -> Vec<Bytes> {
    let mut rng = Rng::new(seed);
    let n = rng.range(1, 64) as usize;
    let mut cuts: Vec<usize> = (1..n)
        .map(|_| rng.range(0, bytes.len() as u64) as usize)
        .collect();
    cuts.sort_unstable();
    let mut out = Vec::new();
    let mut from = 0;
    for to in cuts.into_iter().chain([bytes.len()]) {
        out.push(Bytes::copy_from_slice(&bytes[from..to]));
        from = to;
    }
    out
}

/// Starts a loopback HTTP/1.1 server that answers `GET /N` with `bodies[N]`, as a
/// chunked stream of random splits (seeded by `seed` and `N`, one task yield between
/// chunks so they leave as separate writes). It runs until the runtime stops.
pub(crate) async fn serve(bodies: Vec<Vec<u8>>, seed: u64) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let bodies = Arc::new(bodies);
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let bodies = Arc::clone(&bodies);
            tokio::spawn(async move {
                let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
                    let n: usize = request
                        .uri()
                        .path()
                        .trim_start_matches('/')
                        .parse()
                        .unwrap_or(usize::MAX);
                    let body = bodies.get(n).cloned().unwrap_or_default();
                    let parts =
                        chunks(&body, seed ^ (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                    let frames = futures::stream::iter(parts).then(|chunk| async move {
                        tokio::task::yield_now().await;
                        Ok::<_, Infallible>(Frame::data(chunk))
                    });
                    let mut response = hyper::Response::new(StreamBody::new(frames));
                    if n >= bodies.len() {
                        *response.status_mut() = hyper::StatusCode::NOT_FOUND;
                    }
                    async move { Ok::<_, Infallible>(response) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(socket), service)
                    .await;
            });
        }
    });
    Ok(addr)
}

/// Requests `url` and decodes the streamed body, as it arrives, into `shared`:
/// every item fed, or the error that stopped it (with the items before it).
pub(crate) async fn stream_into<T: Feed>(
    client: &reqwest::Client,
    url: &str,
    format: StreamFormat,
    shared: Shared<T>,
) -> (Vec<Decoded>, Option<FeedError>) {
    let response = match client.get(url).send().await {
        Ok(r) => r,
        Err(e) => return (Vec::new(), Some(FeedError::Source(Box::new(e)))),
    };
    let mut items = Vec::new();
    let mut decoding = Decoding::new(response.bytes_stream(), Decoder::new(format), shared);
    while let Some(item) = decoding.next().await {
        match item {
            Ok(item) => items.push(item),
            Err(e) => return (items, Some(e)),
        }
    }
    (items, None)
}

/// A client for the loopback server: no proxy, bounded waits.
pub(crate) fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("a client without TLS builds")
}

/// Runs the loop: turns of (user message, streamed model response, tools), compacting
/// under a small budget. Returns the lines it printed and the failures it found.
pub(crate) async fn run(seed: u64) -> (Vec<String>, usize) {
    let mut lines = Vec::new();
    let mut failures = 0;
    let bodies: Vec<Vec<u8>> = TURNS.iter().map(|n| fixture(n)).collect();
    let addr = serve(bodies, seed).await.expect("a loopback port");
    let client = client();
    let shared = Shared::new(Log::new());
    let policy = TriggerPolicy::new(1_200).pinned_head(1);
    let mut rng = Rng::new(seed);
    for turn in 0..TURNS.len() {
        shared
            .update(|log| log.append(Entry::from(Record::user(150))))
            .expect("a user record appends");
        let url = format!("http://{addr}/{turn}");
        let (items, error) =
            stream_into(&client, &url, StreamFormat::AnthropicSse, shared.clone()).await;
        if let Some(e) = error {
            lines.push(format!("turn {turn}: stream failed: {e}"));
            failures += 1;
            continue;
        }
        // A call the stream left open (max_tokens): abort it, as repair would.
        let left_open = items
            .iter()
            .any(|i| matches!(&i.detail, Detail::Ended(e) if e.left_open.is_some()));
        if left_open {
            let aborted = shared
                .update(|log| log.abort_open())
                .expect("aborting appends");
            lines.push(format!(
                "turn {turn}: call {} cut off by max_tokens: aborted",
                aborted.map(|c| c.to_string()).unwrap_or_default()
            ));
        }
        // The calls to run: pending now, in the order they were made.
        let pending: Vec<_> = shared.read(|log| {
            log.tracker()
                .pending_calls()
                .iter()
                .map(|p| (p.id.clone(), p.at))
                .collect()
        });
        let len = shared.read(|log| log.len());
        lines.push(format!(
            "turn {turn}: {} records streamed, {} calls to run",
            items
                .iter()
                .filter(|i| matches!(i.event, Some(cutpoint::Event::Opened(_))))
                .count(),
            pending.len()
        ));
        // A compaction waiting for the next safe point: the end of this turn's calls.
        let ready = tokio::spawn(shared.legal_cut_ready(len));
        let mut order = pending.clone();
        for i in (1..order.len()).rev() {
            order.swap(i, rng.range(0, i as u64) as usize);
        }
        for (k, (id, _)) in order.iter().enumerate() {
            tokio::task::yield_now().await;
            if ready.is_finished() && k < order.len() {
                lines.push(format!(
                    "turn {turn}: FAIL: a legal cut before call {id} answered"
                ));
                failures += 1;
            }
            let result = Entry::new(
                Record::tool_result(id.clone(), rng.range(200, 900)),
                Payload::Result {
                    status: Some(ResultStatus::Ok),
                    content: Some(format!("result of {id}")),
                },
            );
            shared
                .update(|log| log.append(result))
                .expect("a result appends");
        }
        let cut = tokio::time::timeout(Duration::from_secs(30), ready)
            .await
            .expect("the waiter wakes")
            .expect("the waiter runs");
        lines.push(format!(
            "turn {turn}: legal cut {cut} ready after the last result"
        ));
        // Compact if over budget.
        let planned = shared.read(|log| policy.plan(log));
        if let Planned::CompactNow { cut, plan } = planned {
            let before =
                shared.read(|log| validate(log.entries(), Options::allowing_pending()).structure);
            let covered = plan.covered().count();
            let applied = shared.update(|log| {
                log.apply(&plan, Some(format!("turns before record {}", cut.cut)), 60)
            });
            let report = shared.read(|log| validate(log.entries(), Options::allowing_pending()));
            if applied.is_err() || !report.is_clean() || report.structure != before {
                lines.push(format!(
                    "turn {turn}: FAIL: compaction {applied:?}: {:?}",
                    report.violations
                ));
                failures += 1;
            } else {
                lines.push(format!(
                    "turn {turn}: compacted records {}..{} ({covered} calls)",
                    cut.head, cut.cut
                ));
            }
        }
    }
    let summaries = shared.read(|log| {
        log.entries()
            .iter()
            .filter(|e| matches!(e.record.kind(), RecordKind::Summary(_)))
            .count()
    });
    lines.push(format!(
        "done: {} records, {} tokens, {summaries} summaries, {failures} failures",
        shared.read(|log| log.len()),
        shared.read(|log| log.tracker().total_tokens())
    ));
    (lines, failures)
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(7);
    let (lines, failures) = run(seed).await;
    for line in lines {
        println!("{line}");
    }
    if failures > 0 {
        std::process::ExitCode::FAILURE
    } else {
        std::process::ExitCode::SUCCESS
    }
}
