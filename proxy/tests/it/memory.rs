//! The proxy process's memory in compact mode with many more sessions than its
//! table holds: the `cutpoint-proxy` binary (the dev build `cargo test` makes, so
//! that nothing else in the test process counts), loopback only, bounded in count.
//! Its resident memory is read from `/proc/PID/status` (Linux). Times are reported
//! (`-- --nocapture`), never judged.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{Empty, Full};

use crate::load::{HANG, MARK, counter, pad, reply};
use crate::support::*;

/// The header carrying a request's id in the memory test: in compact mode the
/// upstream gets a rewritten body, so the id goes where nothing rewrites it.
const LOAD_ID: &str = "x-load-id";

/// The memory test's stand-in: answers the request whose header says `id` with
/// [`reply`] (streamed when it asks for a stream), whatever its body.
fn respond_by_header(got: &Received) -> Response<Reply> {
    let Some(id) = got
        .headers
        .get(LOAD_ID)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    else {
        return Response::builder().status(500).body(full("no id")).unwrap();
    };
    let streamed = serde_json::from_slice::<serde_json::Value>(&got.body)
        .ok()
        .and_then(|v| v["stream"].as_bool())
        .unwrap_or(false);
    let body = answer_to(id, streamed);
    let kind = if streamed {
        "text/event-stream"
    } else {
        "application/json"
    };
    Response::builder()
        .header("content-type", kind)
        .body(full(body))
        .unwrap()
}

/// The memory test's answer to request `id`: a well-formed Anthropic stream (which
/// the proxy follows to its end) when `streamed`, a message otherwise.
fn answer_to(id: u64, streamed: bool) -> Bytes {
    if !streamed {
        return Bytes::from(reply(id, "/v1/messages", false).concat());
    }
    let events = [
        format!(
            r#"{{"type":"message_start","message":{{"id":"msg_{id}","type":"message","role":"assistant","content":[],"model":"m","stop_reason":null,"usage":{{"input_tokens":10,"output_tokens":1}}}}}}"#
        ),
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#
            .to_owned(),
        format!(
            r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":"Answer to {MARK}{id}."}}}}"#
        ),
        r#"{"type":"content_block_stop","index":0}"#.to_owned(),
        r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":5}}"#
            .to_owned(),
        r#"{"type":"message_stop"}"#.to_owned(),
    ];
    let mut text = String::new();
    for e in events {
        let kind = serde_json::from_str::<serde_json::Value>(&e).unwrap()["type"]
            .as_str()
            .unwrap()
            .to_owned();
        text.push_str(&format!("event: {kind}\ndata: {e}\n\n"));
    }
    Bytes::from(text)
}

/// Turn `turn` of generated conversation `c`: an Anthropic request of `turn` tool
/// rounds (two calls each, results of 1 to 3 KB), its history the one before it
/// extended, as an agent sends it.
fn conversation_turn(c: u64, turn: u64) -> Bytes {
    let mut messages = vec![format!(
        r#"{{"role":"user","content":"conversation {c}: find where the parser fails"}}"#
    )];
    for t in 0..turn {
        let calls: Vec<String> = (0..2)
            .map(|k| {
                format!(
                    r#"{{"type":"tool_use","id":"toolu_{c}_{t}_{k}","name":"read_file","input":{{"path":"src/f{t}_{k}.rs"}}}}"#
                )
            })
            .collect();
        messages.push(format!(
            r#"{{"role":"assistant","content":[{{"type":"text","text":"Step {t}."}},{}]}}"#,
            calls.join(",")
        ));
        let results: Vec<String> = (0..2)
            .map(|k| {
                format!(
                    r#"{{"type":"tool_result","tool_use_id":"toolu_{c}_{t}_{k}","content":"{}"}}"#,
                    pad(
                        c * 1000 + t * 10 + k,
                        1000 + ((c + t + k) % 3) as usize * 1000
                    )
                )
            })
            .collect();
        messages.push(format!(
            r#"{{"role":"user","content":[{}]}}"#,
            results.join(",")
        ));
    }
    Bytes::from(format!(
        r#"{{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":{},"system":"You are a coding agent.","messages":[{}]}}"#,
        turn % 2 == 0,
        messages.join(",")
    ))
}

/// The resident memory of process `pid`, from `/proc/PID/status` (`VmRSS`).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("its status");
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kb * 1024
}

/// Conversations the memory test sends before it measures (three times the table).
const WARM_UP: u64 = 48;
/// And after: twelve times the table more.
const MORE: u64 = 192;
/// Sessions the proxy's table holds.
const TABLE: u64 = 16;
/// Turns per conversation.
const TURNS: u64 = 9;
/// The budget: the last turns are over it, and the pipeline meets it.
const BUDGET: u64 = 6000;
/// Conversations in flight at once.
const AT_ONCE: u64 = 16;

/// The `cutpoint-proxy` binary (the dev build `cargo test` makes) in compact mode,
/// its session table of [`TABLE`], and many more conversations than that through it,
/// [`AT_ONCE`] at a time, each turn continuing the one before: answers all arrive
/// and are the stand-in's for that request, the upstream gets each request once,
/// the table stays at its cap, and the process's resident memory after the warm-up
/// (the table full and evicting) stays flat while twelve tables' worth of sessions
/// more come and go. The memory bound is generous (allocator slack, the blocking
/// pool's threads); a leak of the sessions would pass it. Times are reported, never
/// judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_in_compact_mode_stays_flat_after_eviction() {
    use std::process::{Command, Stdio};

    let upstream = StandIn::start(respond_by_header).await;
    // A free loopback port for the binary (taken back just before it binds).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutpoint-proxy"))
        .args([
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--upstream",
            &format!("http://{}", upstream.addr),
            "--mode",
            "compact",
            "--budget",
            &BUDGET.to_string(),
            "--max-sessions",
            &TABLE.to_string(),
        ])
        .env("RUST_LOG", "error")
        .stderr(Stdio::null())
        .spawn()
        .expect("the proxy binary starts");
    let pid = child.id();
    let base = format!("http://127.0.0.1:{port}");
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .is_err()
    {
        assert!(started.elapsed() < HANG, "the proxy never listened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let metrics = |base: String| async move {
        let response = client::<Empty<Bytes>>()
            .get(format!("{base}/metrics").parse().unwrap())
            .await
            .expect("metrics");
        whole(response).await.text()
    };
    // Conversations `from..to`, AT_ONCE at a time, each its turns in order.
    let run = |from: u64, to: u64| {
        let base = base.clone();
        async move {
            let mut requests = 0;
            for batch in (from..to).step_by(AT_ONCE as usize) {
                let tasks: Vec<_> = (batch..(batch + AT_ONCE).min(to))
                    .map(|c| {
                        let base = base.clone();
                        tokio::spawn(async move {
                            let client = client::<Full<Bytes>>();
                            for turn in 0..TURNS {
                                let id = c * 100 + turn;
                                let req = Request::post(format!("{base}/v1/messages"))
                                    .header("content-type", "application/json")
                                    .header(LOAD_ID, id.to_string())
                                    .body(Full::new(conversation_turn(c, turn)))
                                    .unwrap();
                                let answer =
                                    whole(client.request(req).await.expect("an answer")).await;
                                assert_eq!(answer.status, 200, "{id}: {}", answer.text());
                                assert!(
                                    answer.body == answer_to(id, turn % 2 == 0),
                                    "request {id} got another answer, or a changed one"
                                );
                            }
                        })
                    })
                    .collect();
                for t in tasks {
                    tokio::time::timeout(HANG, t)
                        .await
                        .expect("a conversation ends")
                        .expect("its checks passed");
                    requests += TURNS;
                }
            }
            requests
        }
    };
    let rss_start = rss_bytes(pid);
    let mut requests = run(0, WARM_UP).await;
    let rss_warm = rss_bytes(pid);
    let text_warm = metrics(base.clone()).await;
    let start = Instant::now();
    requests += run(WARM_UP, WARM_UP + MORE).await;
    let took = start.elapsed();
    let rss_after = rss_bytes(pid);
    let text = metrics(base.clone()).await;
    let _ = child.kill();
    let _ = child.wait();

    assert_eq!(upstream.received().len() as u64, requests);
    for (name, n) in [
        ("cutpoint_proxy_requests_total", requests),
        ("cutpoint_proxy_forwarded_total", requests),
        ("cutpoint_proxy_sessions", TABLE),
        ("cutpoint_proxy_upstream_errors_total", 0),
        ("cutpoint_proxy_answer_stream_errors_total", 0),
    ] {
        assert_eq!(counter(&text, name), n, "{name} in\n{text}");
    }
    let evicted = counter(&text, "cutpoint_proxy_sessions_evicted_total");
    assert!(evicted >= WARM_UP + MORE - TABLE, "{evicted} evicted");
    assert!(
        counter(&text, "cutpoint_proxy_compactions_total") > 0,
        "{text}"
    );
    assert!(counter(&text, "cutpoint_proxy_sessions_continued_total") > 0);
    let mib = |b: u64| b as f64 / (1 << 20) as f64;
    let held = counter(&text, "cutpoint_proxy_session_bytes");
    eprintln!(
        "memory: RSS {:.1} MiB at start, {:.1} MiB after {WARM_UP} conversations (table of {TABLE} full), {:.1} MiB after {MORE} more ({} requests in {:.1} s); the table's estimate {:.2} MiB then {:.2} MiB; {} evicted",
        mib(rss_start),
        mib(rss_warm),
        mib(rss_after),
        MORE * TURNS,
        took.as_secs_f64(),
        mib(counter(&text_warm, "cutpoint_proxy_session_bytes")),
        mib(held),
        evicted,
    );
    eprintln!(
        "memory: compactions {}, continued {}, incremental {}, answers followed {}",
        counter(&text, "cutpoint_proxy_compactions_total"),
        counter(&text, "cutpoint_proxy_sessions_continued_total"),
        counter(&text, "cutpoint_proxy_sessions_incremental_total"),
        counter(&text, "cutpoint_proxy_answers_followed_total"),
    );
    // Twelve tables' worth of sessions came and went: flat means within a bound
    // well below what they held: with every evicted session leaked on purpose (a
    // `mem::forget` in the table), RSS grew 16.4 MiB here and this failed; as it
    // is, it grows 1 to 3 MiB.
    let growth = rss_after.saturating_sub(rss_warm);
    assert!(
        growth < 8 << 20,
        "RSS grew by {:.1} MiB after eviction",
        mib(growth)
    );
}
