//! Many sessions at once through one proxy, bounded in count (64 sessions of 8
//! requests, and 8 broken requests among them), loopback only: every answer arrives
//! whole and is the one the stand-in sent for that very request, every request
//! reaches the stand-in byte for byte and exactly once, every broken one is refused
//! and never forwarded, and `/metrics` agrees with the counts. Each request is also
//! sent to a second stand-in directly, in the same run, and the round trips and
//! times to first byte of both paths are reported (p50, p99), with the proxy's own
//! histograms. No timing assertion: the times are
//! printed (`-- --nocapture`), never judged. The process's memory under many
//! sessions is `memory.rs`.

use std::collections::{HashMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Frame;

use crate::support::*;

/// Concurrent sessions, each its own client (its own connections), as separate
/// agents are.
const SESSIONS: u64 = 64;
/// Well-formed requests per session, sent one after the other.
const PER_SESSION: u64 = 8;
/// Sessions (the first ones) that also send one broken request among their own.
const BROKEN: u64 = 8;

/// Guards a wait that a broken proxy would never end (no timing assertion: the
/// whole test takes a second or two).
pub(crate) const HANG: Duration = Duration::from_secs(120);

/// What every request carries, followed by its id; the stand-in echoes the id.
pub(crate) const MARK: &str = "cutpoint-load-";

/// The id a body carries after [`MARK`]. **O(len)**.
fn id_of(body: &[u8]) -> Option<u64> {
    let at = body
        .windows(MARK.len())
        .position(|w| w == MARK.as_bytes())?
        + MARK.len();
    let digits: String = body[at..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .map(|&b| char::from(b))
        .collect();
    digits.parse().ok()
}

/// One request of the test, as sent.
#[derive(Clone, Debug)]
struct Sent {
    id: u64,
    path: &'static str,
    body: Bytes,
}

/// Filler of `n` bytes, different per id, for bodies of different sizes.
pub(crate) fn pad(id: u64, n: usize) -> String {
    let word = format!("line {id} of a tool's output; ");
    word.repeat(n / word.len() + 1)[..n].to_owned()
}

/// A well-formed request of one of the three APIs, of `pairs` answered tool calls
/// with results of `result_bytes` each, carrying `id`.
fn request(id: u64) -> Sent {
    // Streamed or not independently of the API (which is `id % 3`).
    let stream = id % 4 != 0;
    let pairs = (id % 11) as usize;
    let result_bytes = (id % 7) as usize * 700;
    // Two real requests among them: what Claude Code and Codex send for a next turn
    // (proxy/tests/fixtures/SOURCES.md), tens of KB, the id put in a field the
    // rules do not read.
    match id % 16 {
        5 => {
            let fixture =
                fixture("anthropic-request__claude-reliability__python-to-rust-port.json");
            return Sent {
                id,
                path: "/v1/messages",
                body: insert_after_brace(
                    &fixture,
                    &format!(r#""metadata":{{"user_id":"{MARK}{id}"}},"#),
                ),
            };
        }
        11 => {
            let fixture =
                fixture("openai-responses-request__localpush__rollout-12-41-04-parallel7.json");
            return Sent {
                id,
                path: "/v1/responses",
                body: insert_after_brace(&fixture, &format!(r#""user":"{MARK}{id}","#)),
            };
        }
        _ => {}
    }
    let result = pad(id, result_bytes);
    let (path, body) = match id % 3 {
        0 => {
            let mut messages = vec![format!(
                r#"{{"role":"user","content":"{MARK}{id}: where does the parser fail?"}}"#
            )];
            for j in 0..pairs {
                messages.push(format!(
                    r#"{{"role":"assistant","content":[{{"type":"text","text":"Step {j}."}},{{"type":"tool_use","id":"toolu_{id}_{j}","name":"read_file","input":{{"path":"src/f{j}.rs"}}}}]}}"#
                ));
                messages.push(format!(
                    r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{id}_{j}","content":"{result}"}}]}}"#
                ));
            }
            (
                "/v1/messages",
                format!(
                    r#"{{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":{stream},"messages":[{}]}}"#,
                    messages.join(",")
                ),
            )
        }
        1 => {
            let mut messages = vec![
                r#"{"role":"system","content":"You are a coding agent."}"#.to_owned(),
                format!(r#"{{"role":"user","content":"{MARK}{id}: where does the parser fail?"}}"#),
            ];
            for j in 0..pairs {
                messages.push(format!(
                    r#"{{"role":"assistant","content":null,"tool_calls":[{{"id":"call_{id}_{j}","type":"function","function":{{"name":"read_file","arguments":"{{\"path\":\"src/f{j}.rs\"}}"}}}}]}}"#
                ));
                messages.push(format!(
                    r#"{{"role":"tool","tool_call_id":"call_{id}_{j}","content":"{result}"}}"#
                ));
            }
            (
                "/v1/chat/completions",
                format!(
                    r#"{{"model":"gpt-4o","stream":{stream},"messages":[{}]}}"#,
                    messages.join(",")
                ),
            )
        }
        _ => {
            let mut input = vec![format!(
                r#"{{"type":"message","role":"user","content":"{MARK}{id}: where does the parser fail?"}}"#
            )];
            for j in 0..pairs {
                input.push(format!(
                    r#"{{"type":"function_call","call_id":"call_{id}_{j}","name":"read_file","arguments":"{{\"path\":\"src/f{j}.rs\"}}"}}"#
                ));
                input.push(format!(
                    r#"{{"type":"function_call_output","call_id":"call_{id}_{j}","output":"{result}"}}"#
                ));
            }
            (
                "/v1/responses",
                format!(
                    r#"{{"model":"gpt-5","stream":{stream},"input":[{}]}}"#,
                    input.join(",")
                ),
            )
        }
    };
    Sent {
        id,
        path,
        body: Bytes::from(body),
    }
}

/// `json` (an object) with `field` put first. **O(len)**.
fn insert_after_brace(json: &[u8], field: &str) -> Bytes {
    assert_eq!(json.first(), Some(&b'{'));
    let mut out = Vec::with_capacity(json.len() + field.len());
    out.push(b'{');
    out.extend_from_slice(field.as_bytes());
    out.extend_from_slice(&json[1..]);
    Bytes::from(out)
}

/// An Anthropic request with a `tool_result` that answers no `tool_use`.
fn broken(id: u64) -> Sent {
    Sent {
        id,
        path: "/v1/messages",
        body: Bytes::from(format!(
            r#"{{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{{"role":"user","content":"{MARK}{id}: hi"}},{{"role":"assistant","content":"Hello."}},{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_ghost_{id}","content":"42"}}]}}]}}"#
        )),
    }
}

/// The answer the stand-in sends to request `id` on `path`: an SSE stream in
/// several chunks, cut mid-event, when `streamed`; one JSON body otherwise. Unique
/// per request, so an answer delivered to the wrong request is caught.
pub(crate) fn reply(id: u64, path: &str, streamed: bool) -> Vec<Bytes> {
    if !streamed {
        return vec![Bytes::from(format!(
            r#"{{"id":"reply_{id}","path":"{path}","content":[{{"type":"text","text":"Answer to {MARK}{id}."}}]}}"#
        ))];
    }
    let mut text = format!(
        "event: message_start\ndata: {{\"type\":\"message_start\",\"message\":{{\"id\":\"reply_{id}\",\"path\":\"{path}\"}}}}\n\n"
    );
    for part in 0..3 + id % 5 {
        text.push_str(&format!(
            "event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"part {part} of the answer to {MARK}{id}\"}}}}\n\n"
        ));
    }
    text.push_str("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n");
    let size = 40 + (id % 23) as usize;
    text.as_bytes()
        .chunks(size)
        .map(Bytes::copy_from_slice)
        .collect()
}

/// The stand-in's answer: the chunks of [`reply`] for the id the request carries,
/// each after a short pause when streamed; 500 for a request with no id.
fn respond(got: &Received) -> Response<Reply> {
    let Some(id) = id_of(&got.body) else {
        return Response::builder()
            .status(500)
            .body(full("no request id"))
            .unwrap();
    };
    let streamed = serde_json::from_slice::<serde_json::Value>(&got.body)
        .ok()
        .and_then(|v| v["stream"].as_bool())
        .unwrap_or(false);
    let chunks = reply(id, &got.path, streamed);
    if !streamed {
        return Response::builder()
            .header("content-type", "application/json")
            .body(full(chunks.concat()))
            .unwrap();
    }
    let body = Paced {
        chunks: chunks.into(),
        pause: Duration::from_millis(1 + id % 3),
        sleep: None,
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(body.boxed_unsync())
        .unwrap()
}

/// A streamed answer: its chunks one at a time, each after `pause`, made inside the
/// body's own poll. Not a `Channel` body fed by a spawned task: on a multi-threaded
/// runtime that one can end before its last chunk (http-body-util 0.1.5: `poll_frame`
/// finds the frame queue empty, the sender then sends its last chunk and drops, and
/// the same poll sees the sender gone and ends the body cleanly, the chunk unread).
/// This test once failed so, an answer whole but for its last 34 bytes, which the
/// stand-in itself had dropped.
struct Paced {
    chunks: VecDeque<Bytes>,
    pause: Duration,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl hyper::body::Body for Paced {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.chunks.is_empty() {
            return Poll::Ready(None);
        }
        let pause = this.pause;
        let sleep = this
            .sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(pause)));
        if sleep.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        this.sleep = None;
        Poll::Ready(this.chunks.pop_front().map(|c| Ok(Frame::data(c))))
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.is_empty()
    }
}

/// Sends `sent` to `base` (the proxy, or the stand-in directly) with `client` and
/// reads the answer whole, timing it: to its first body byte, and to its end.
async fn send(
    client: &hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        Full<Bytes>,
    >,
    base: &str,
    sent: &Sent,
) -> Timed {
    let req = Request::post(format!("{base}{}", sent.path))
        .header("content-type", "application/json")
        .body(Full::new(sent.body.clone()))
        .unwrap();
    let start = Instant::now();
    let response = client.request(req).await.expect("the proxy answers");
    let (parts, mut body) = response.into_parts();
    let mut bytes = Vec::new();
    let mut first_byte = None;
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame.expect("the body").into_data() {
            first_byte.get_or_insert_with(|| start.elapsed());
            bytes.extend_from_slice(&data);
        }
    }
    let total = start.elapsed();
    Timed {
        answer: Answer {
            status: parts.status,
            headers: parts.headers,
            body: Bytes::from(bytes),
        },
        first_byte: first_byte.unwrap_or(total),
        total,
    }
}

/// An answer and how long it took.
struct Timed {
    answer: Answer,
    /// To its first body byte.
    first_byte: Duration,
    /// To its end.
    total: Duration,
}

/// The times of one path: round trips of answers sent whole (at once), and times to
/// first byte of streamed ones.
#[derive(Default)]
struct Times {
    round_trip: Vec<Duration>,
    first_byte: Vec<Duration>,
}

impl Times {
    fn add(&mut self, streamed: bool, t: &Timed) {
        match streamed {
            true => self.first_byte.push(t.first_byte),
            false => self.round_trip.push(t.total),
        }
    }
}

/// The nearest-rank `p` percentile of `times` (sorted here).
fn percentile(times: &mut [Duration], p: f64) -> Duration {
    times.sort_unstable();
    let rank = ((p * times.len() as f64).ceil() as usize).clamp(1, times.len());
    times[rank - 1]
}

/// A line of the report: p50 and p99 of both paths, and what the proxy added.
fn report(what: &str, direct: &mut [Duration], proxy: &mut [Duration]) {
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let (d50, d99) = (percentile(direct, 0.5), percentile(direct, 0.99));
    let (p50, p99) = (percentile(proxy, 0.5), percentile(proxy, 0.99));
    eprintln!(
        "load: {what} ({} each): direct p50 {:.0} us p99 {:.0} us; proxy p50 {:.0} us p99 {:.0} us; added p50 {:.0} us p99 {:.0} us",
        direct.len(),
        us(d50),
        us(d99),
        us(p50),
        us(p99),
        us(p50) - us(d50),
        us(p99) - us(d99),
    );
}

/// The value of the counter line `name` in a Prometheus text.
pub(crate) fn counter(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("{name} not in\n{text}"))
        .parse()
        .expect("a count")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_sessions_at_once_get_their_own_answers_and_the_upstream_gets_every_request_once() {
    let upstream = StandIn::start(respond).await;
    // The direct path: the same stand-in, its own instance, so that what each
    // received is counted apart.
    let direct = StandIn::start(respond).await;
    let direct_base = format!("http://{}", direct.addr);
    let mut proxy = Running::start(upstream.config()).await;
    let base = proxy.url("");
    let sessions: Vec<_> = (0..SESSIONS)
        .map(|s| {
            let (base, direct_base) = (base.clone(), direct_base.clone());
            tokio::spawn(async move {
                let client = client::<Full<Bytes>>();
                let mut forwarded = Vec::new();
                let (mut via_direct, mut via_proxy) = (Times::default(), Times::default());
                for k in 0..PER_SESSION {
                    // The broken request comes mid-session, while the other
                    // sessions' requests are in flight.
                    if s < BROKEN && k == PER_SESSION / 2 {
                        let bad = broken(1_000_000 + s);
                        let answer = send(&client, &base, &bad).await.answer;
                        assert_eq!(answer.status, 400, "{}", answer.text());
                        assert_eq!(
                            answer.headers["x-cutpoint-refused"],
                            "anthropic/unexpected-tool-result"
                        );
                        assert_eq!(answer.json()["type"], "error", "{}", answer.text());
                    }
                    let sent = request(s * 100 + k);
                    // Both paths in turn, which first alternating.
                    let (proxied, straight) = if k % 2 == 0 {
                        let p = send(&client, &base, &sent).await;
                        (p, send(&client, &direct_base, &sent).await)
                    } else {
                        let d = send(&client, &direct_base, &sent).await;
                        (send(&client, &base, &sent).await, d)
                    };
                    let answer = &proxied.answer;
                    assert_eq!(answer.status, 200, "{}: {}", sent.id, answer.text());
                    let streamed = serde_json::from_slice::<serde_json::Value>(&sent.body).unwrap()
                        ["stream"]
                        .as_bool()
                        .unwrap_or(false);
                    assert!(
                        answer.body == reply(sent.id, sent.path, streamed).concat(),
                        "request {} got another answer, or a changed one:\n{}",
                        sent.id,
                        answer.text()
                    );
                    assert_eq!(straight.answer.body, answer.body);
                    via_proxy.add(streamed, &proxied);
                    via_direct.add(streamed, &straight);
                    forwarded.push(sent);
                }
                (forwarded, via_direct, via_proxy)
            })
        })
        .collect();
    let mut sent = Vec::new();
    let (mut via_direct, mut via_proxy) = (Times::default(), Times::default());
    for session in sessions {
        let (done, d, p) = tokio::time::timeout(HANG, session)
            .await
            .expect("every session ends")
            .expect("a session's checks passed");
        sent.extend(done);
        via_direct.round_trip.extend(d.round_trip);
        via_direct.first_byte.extend(d.first_byte);
        via_proxy.round_trip.extend(p.round_trip);
        via_proxy.first_byte.extend(p.first_byte);
    }
    let good = SESSIONS * PER_SESSION;
    assert_eq!(sent.len() as u64, good);
    assert!(
        sent.iter().filter(|s| s.body.len() > 40_000).count() >= 32,
        "the real requests of tens of KB are among them"
    );

    // The upstream received each well-formed request once, byte for byte, and no
    // broken one.
    let received = upstream.received();
    assert_eq!(
        received.len() as u64,
        good,
        "one upstream request per request"
    );
    let mut by_id: HashMap<u64, &Received> = HashMap::new();
    for got in &received {
        let id = id_of(&got.body).expect("an id");
        assert!(id < 1_000_000, "broken request {id} was forwarded");
        assert!(by_id.insert(id, got).is_none(), "{id} forwarded twice");
    }
    for s in &sent {
        let got = by_id.get(&s.id).expect("forwarded");
        assert_eq!(got.method, http::Method::POST);
        assert_eq!(got.path, s.path);
        assert!(got.body == s.body, "request {} changed on its way", s.id);
    }

    // The counters agree.
    let response = client::<Empty<Bytes>>()
        .get(proxy.url("/metrics").parse().unwrap())
        .await
        .expect("metrics");
    let metrics = whole(response).await.text();
    let total = good + BROKEN;
    for (name, n) in [
        ("cutpoint_proxy_requests_total", total),
        ("cutpoint_proxy_read_total", total),
        ("cutpoint_proxy_forwarded_total", good),
        ("cutpoint_proxy_upstream_errors_total", 0),
        ("cutpoint_proxy_compactions_total", 0),
        ("cutpoint_proxy_deferrals_total", 0),
        (
            "cutpoint_proxy_refused_total{reason=\"anthropic/unexpected-tool-result\"}",
            BROKEN,
        ),
    ] {
        assert_eq!(counter(&metrics, name), n, "{name} in\n{metrics}");
    }
    assert_eq!(
        metrics.matches("cutpoint_proxy_refused_total{").count(),
        1,
        "no other refusal:\n{metrics}"
    );
    assert_eq!(proxy.proxy.metrics().forwarded(), good);
    assert_eq!(direct.received().len() as u64, good);

    // The times, reported, never judged.
    report(
        "round trip, answered whole at once",
        &mut via_direct.round_trip,
        &mut via_proxy.round_trip,
    );
    report(
        "time to first byte, streamed",
        &mut via_direct.first_byte,
        &mut via_proxy.first_byte,
    );
    let m = proxy.proxy.metrics();
    let bound = |h: &cutpoint_proxy::Histogram, q: f64| {
        h.quantile(q).map_or("-".to_owned(), |d| {
            format!("{:.0} us", d.as_secs_f64() * 1e6)
        })
    };
    eprintln!(
        "load: the proxy's /metrics (bucket bounds): added p50 <= {} p99 <= {}; decision read whole p50 <= {} p99 <= {}; incremental {}",
        bound(m.added(), 0.5),
        bound(m.added(), 0.99),
        bound(m.decide(false), 0.5),
        bound(m.decide(false), 0.99),
        m.decide(true).count(),
    );
    tokio::time::timeout(HANG, proxy.stopped())
        .await
        .expect("the proxy shuts down")
        .expect("cleanly");
}
