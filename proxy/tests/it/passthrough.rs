//! What the proxy passes through: streamed answers byte for byte and as they arrive,
//! upstream statuses and error bodies unchanged, every other path unread, streams in
//! flight finished on shutdown.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::Response;
use http_body_util::channel::{Channel, Sender};
use http_body_util::{BodyExt, Full};
use tokio::sync::mpsc;

use crate::support::*;

/// Guards a wait that a broken proxy would never end (it is no timing assertion:
/// a working proxy answers in milliseconds).
const HANG: Duration = Duration::from_secs(20);

/// A stand-in that answers every request with a stream whose sender it hands out.
async fn streaming_upstream() -> (
    StandIn,
    mpsc::UnboundedReceiver<Sender<Bytes, std::convert::Infallible>>,
) {
    let (senders, rx) = mpsc::unbounded_channel();
    let senders = Arc::new(Mutex::new(senders));
    let upstream = StandIn::start(move |_| {
        let (tx, body) = Channel::<Bytes>::new(16);
        let _ = senders.lock().unwrap().send(tx);
        Response::builder()
            .header("content-type", "text/event-stream")
            .header("request-id", "req_stand_in")
            .body(body.boxed_unsync())
            .unwrap()
    })
    .await;
    (upstream, rx)
}

#[tokio::test]
async fn a_recorded_anthropic_stream_comes_back_byte_identical() {
    let (upstream, mut senders) = streaming_upstream().await;
    let proxy = Running::start(upstream.config()).await;
    let recorded = fixture("anthropic-sse__anthropics-anthropic-sdk-python__tool_use_response.txt");
    let feeding = {
        let recorded = recorded.clone();
        tokio::spawn(async move {
            let mut tx = senders.recv().await.expect("the upstream was called");
            // Cut anywhere, as the network does: mid-line, mid-event, mid-character.
            for chunk in recorded.chunks(37) {
                tx.send_data(Bytes::copy_from_slice(chunk))
                    .await
                    .expect("send");
            }
        })
    };
    let answer = tokio::time::timeout(HANG, post(&proxy, "/v1/messages", &[], ANTHROPIC_OK))
        .await
        .expect("the stream ends");
    feeding.await.unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.headers["content-type"], "text/event-stream");
    assert_eq!(answer.headers["request-id"], "req_stand_in");
    assert_eq!(
        answer.body, recorded,
        "the stream changed on its way through"
    );
    assert_eq!(upstream.received()[0].body, ANTHROPIC_OK.as_bytes());
    // A copy went through the live decoder: one answer, its one tool call.
    let m = proxy.proxy.metrics();
    wait_until(|| m.answers_followed() == 1).await;
    assert_eq!((m.answer_calls(), m.answer_stream_errors()), (1, 0));
}

/// Waits (up to [`HANG`]) for what the proxy does once a body is dropped, after the
/// agent has read it: no timing assertion, a guard against a hang.
async fn wait_until(done: impl Fn() -> bool) {
    tokio::time::timeout(HANG, async {
        while !done() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the answer's decoder finished");
}

/// Hostile answer bytes (a stream whose event is not JSON, then bytes that are not
/// UTF-8): passed to the agent byte for byte, as the direct path would; the decoder
/// names the fault in the log and counts it; nothing panics.
#[tokio::test]
async fn a_stream_that_does_not_decode_passes_through_and_is_counted() {
    let (upstream, mut senders) = streaming_upstream().await;
    let proxy = Running::start(upstream.config()).await;
    let hostile: &[u8] = b"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\"\n\ndata: \xff\xfe{]\n\n";
    let feeding = tokio::spawn(async move {
        let mut tx = senders.recv().await.expect("the upstream was called");
        for chunk in hostile.chunks(9) {
            tx.send_data(Bytes::copy_from_slice(chunk))
                .await
                .expect("send");
        }
    });
    let answer = tokio::time::timeout(HANG, post(&proxy, "/v1/messages", &[], ANTHROPIC_OK))
        .await
        .expect("the stream ends");
    feeding.await.unwrap();
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, hostile);
    let m = proxy.proxy.metrics();
    wait_until(|| m.answer_stream_errors() == 1).await;
    assert_eq!(m.answers_followed(), 0);
}

#[tokio::test]
async fn a_recorded_openai_chat_stream_comes_back_byte_identical() {
    let (upstream, mut senders) = streaming_upstream().await;
    let proxy = Running::start(upstream.config()).await;
    let recorded = fixture(
        "openai-chat-stream__pydantic-pydantic-ai__test_complex_agent_run.yaml.interaction0.sse",
    );
    let feeding = {
        let recorded = recorded.clone();
        tokio::spawn(async move {
            let mut tx = senders.recv().await.expect("the upstream was called");
            for chunk in recorded.chunks(61) {
                tx.send_data(Bytes::copy_from_slice(chunk))
                    .await
                    .expect("send");
            }
        })
    };
    let answer = tokio::time::timeout(HANG, post(&proxy, "/v1/chat/completions", &[], CHAT_OK))
        .await
        .expect("the stream ends");
    feeding.await.unwrap();
    assert_eq!(answer.body, recorded);
    let m = proxy.proxy.metrics();
    wait_until(|| m.answers_followed() == 1).await;
    assert_eq!(m.answer_stream_errors(), 0);
}

#[tokio::test]
async fn the_answer_is_streamed_as_it_arrives_not_buffered() {
    let (upstream, mut senders) = streaming_upstream().await;
    let proxy = Running::start(upstream.config()).await;
    let req = http::Request::post(proxy.url("/v1/messages"))
        .body(Full::new(Bytes::from_static(ANTHROPIC_OK.as_bytes())))
        .unwrap();
    let response = client().request(req).await.expect("headers come first");
    let mut tx = senders.recv().await.unwrap();
    let mut body = response.into_body();
    tx.send_data(Bytes::from_static(b"event: message_start\n"))
        .await
        .unwrap();
    // The upstream has sent one chunk and holds the rest back: a buffering proxy
    // would wait for the end and never deliver it.
    let first = tokio::time::timeout(HANG, body.frame())
        .await
        .expect("the first chunk arrived before the upstream finished")
        .expect("a frame")
        .expect("no error");
    assert_eq!(first.into_data().unwrap(), "event: message_start\n");
    tx.send_data(Bytes::from_static(b"data: {}\n\n"))
        .await
        .unwrap();
    drop(tx);
    let rest = body.collect().await.unwrap().to_bytes();
    assert_eq!(rest, "data: {}\n\n");
}

#[tokio::test]
async fn upstream_errors_pass_through_unchanged() {
    let overloaded =
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let upstream = StandIn::start(move |_| {
        Response::builder()
            .status(529)
            .header("content-type", "application/json")
            .header("retry-after", "7")
            .body(full(overloaded))
            .unwrap()
    })
    .await;
    let proxy = Running::start(upstream.config()).await;
    let answer = post(&proxy, "/v1/messages", &[], ANTHROPIC_OK).await;
    assert_eq!(answer.status, 529);
    assert_eq!(answer.headers["retry-after"], "7");
    assert_eq!(answer.text(), overloaded);
}

#[tokio::test]
async fn other_paths_and_methods_pass_through_unread() {
    let upstream = StandIn::json(r#"{"data":[]}"#).await;
    let proxy = Running::start(upstream.config()).await;
    let got = whole(
        client::<http_body_util::Empty<Bytes>>()
            .get(proxy.url("/v1/models?limit=5").parse().unwrap())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(got.text(), r#"{"data":[]}"#);
    // Not JSON, but not a route the proxy reads: it goes as it came.
    let answer = post(&proxy, "/v1/messages/count_tokens", &[], "not json").await;
    assert_eq!(answer.status, 200);
    let received = upstream.received();
    assert_eq!(received[0].path, "/v1/models?limit=5");
    assert_eq!(received[0].method, http::Method::GET);
    assert_eq!(received[1].body, "not json");
}

/// Codex 0.169 first asks for a WebSocket on `GET /v1/responses` (the real-client
/// harness, `tests/clients/proxy_clients.py`). The proxy cannot carry an upgraded
/// connection, and what went over one would bypass its checks; forwarded with its
/// `upgrade` header stripped, it reached the upstream as a plain GET, whose answer
/// decides whether Codex falls back to `POST /v1/responses` (426 at once; 404 or 405
/// after seven retries; 400 not at all). So the proxy answers 426 itself, in OpenAI's
/// shape, and forwards nothing.
#[tokio::test]
async fn a_websocket_upgrade_is_answered_426_and_not_forwarded() {
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(upstream.config()).await;
    let req = http::Request::get(proxy.url("/v1/responses"))
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .header("authorization", "Bearer sk-test")
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let got = whole(client().request(req).await.expect("the proxy answers")).await;
    assert_eq!(got.status, 426);
    assert_eq!(got.headers["x-cutpoint-refused"], "upgrade");
    assert_eq!(got.json()["error"]["type"], "invalid_request_error");
    assert!(upstream.received().is_empty());
    // Without an upgrade the same path still passes through.
    let got = whole(
        client::<http_body_util::Empty<Bytes>>()
            .get(proxy.url("/v1/responses/resp_1").parse().unwrap())
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(got.status, 200);
    assert_eq!(upstream.received()[0].path, "/v1/responses/resp_1");
}

#[tokio::test]
async fn an_upstream_base_path_prefixes_every_request() {
    let upstream = StandIn::json("{}").await;
    let config = cutpoint_proxy::Config::new(
        format!("http://{}/gateway/", upstream.addr)
            .parse()
            .unwrap(),
    );
    let proxy = Running::start(config).await;
    post(&proxy, "/v1/messages?beta=true", &[], ANTHROPIC_OK).await;
    assert_eq!(
        upstream.received()[0].path,
        "/gateway/v1/messages?beta=true"
    );
}

#[tokio::test]
async fn an_unreachable_upstream_is_a_502_in_the_provider_shape() {
    // A port bound and released: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = cutpoint_proxy::Config::new(format!("http://{port}").parse().unwrap());
    let proxy = Running::start(config).await;
    let answer = post(&proxy, "/v1/messages", &[], ANTHROPIC_OK).await;
    assert_eq!(answer.status, 502);
    assert_eq!(answer.json()["type"], "error");
}

/// An upstream that accepts the connection and reads the request but never answers:
/// past the first-byte timeout the agent gets a 504 in the provider's shape, and
/// nothing waits longer. The streamed body itself is never timed (the stream tests
/// above hold theirs back under the default timeout).
#[tokio::test]
async fn an_upstream_that_does_not_answer_in_time_is_a_504_in_the_provider_shape() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((stream, _)) = silent.accept().await {
            open.push(stream);
        }
    });
    let mut config = cutpoint_proxy::Config::new(format!("http://{addr}").parse().unwrap());
    config.first_byte_timeout = Some(Duration::from_millis(200));
    let proxy = Running::start(config).await;
    for (path, body) in [
        ("/v1/messages", ANTHROPIC_OK),
        ("/v1/chat/completions", CHAT_OK),
    ] {
        let answer = tokio::time::timeout(HANG, post(&proxy, path, &[], body))
            .await
            .expect("answered, not hung");
        assert_eq!(answer.status, 504, "{}", answer.text());
        assert_eq!(answer.headers["x-cutpoint-upstream"], "upstream-timeout");
        let v = answer.json();
        let message = match path {
            "/v1/messages" => {
                assert_eq!(v["type"], "error");
                v["error"]["message"].as_str().unwrap().to_owned()
            }
            _ => {
                assert_eq!(v["error"]["code"], "upstream-timeout");
                v["error"]["message"].as_str().unwrap().to_owned()
            }
        };
        assert!(
            message.contains("no response from the upstream within 200ms"),
            "{message}"
        );
    }
    let m = proxy.proxy.metrics();
    assert_eq!(m.upstream_timeouts(), 2);
    assert!(
        m.render()
            .contains("cutpoint_proxy_upstream_errors_total 0\n")
    );
    held.abort();
}

/// An upstream whose accept queue is full (a listener with a backlog of one that
/// never accepts, two connections waiting in it): the kernel drops the proxy's SYN,
/// and past the connect timeout the agent gets a 504. Loopback only.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn an_upstream_that_does_not_accept_in_time_is_a_504() {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = socket.local_addr().unwrap();
    let listener = socket.listen(1).unwrap();
    // Fill its accept queue: connections complete until it is full, then hang.
    let mut waiting = Vec::new();
    while let Ok(Ok(stream)) = tokio::time::timeout(
        Duration::from_millis(300),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    {
        waiting.push(stream);
        assert!(waiting.len() < 64, "the accept queue never filled");
    }
    let mut config = cutpoint_proxy::Config::new(format!("http://{addr}").parse().unwrap());
    config.connect_timeout = Some(Duration::from_millis(200));
    let proxy = Running::start(config).await;
    let answer = tokio::time::timeout(HANG, post(&proxy, "/v1/messages", &[], ANTHROPIC_OK))
        .await
        .expect("answered, not hung");
    assert_eq!(answer.status, 504, "{}", answer.text());
    assert!(
        answer.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no connection from the upstream within 200ms"),
        "{}",
        answer.text()
    );
    assert_eq!(proxy.proxy.metrics().upstream_timeouts(), 1);
    drop((listener, waiting));
}

#[tokio::test]
async fn shutdown_lets_a_stream_in_flight_finish() {
    let (upstream, mut senders) = streaming_upstream().await;
    let mut proxy = Running::start(upstream.config()).await;
    let req = http::Request::post(proxy.url("/v1/messages"))
        .body(Full::new(Bytes::from_static(ANTHROPIC_OK.as_bytes())))
        .unwrap();
    let response = client().request(req).await.unwrap();
    let mut tx = senders.recv().await.unwrap();
    tx.send_data(Bytes::from_static(b"event: a\n\n"))
        .await
        .unwrap();
    let mut body = response.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    proxy.stop();
    // Shut down asked: the stream goes on to its end.
    tx.send_data(Bytes::from_static(b"event: b\n\n"))
        .await
        .unwrap();
    drop(tx);
    let rest = tokio::time::timeout(HANG, body.collect())
        .await
        .expect("ends")
        .unwrap()
        .to_bytes();
    assert_eq!([first, rest].concat(), b"event: a\n\nevent: b\n\n");
    tokio::time::timeout(HANG, proxy.stopped())
        .await
        .expect("the proxy stops once its streams are done")
        .unwrap();
}

/// A followed answer feeds its session: the calls it asked for are held against the
/// session's next request, decided incrementally, which carries them back (counted
/// carried) or does not (counted missing); neither changes what is forwarded.
#[tokio::test]
async fn a_followed_answer_feeds_its_session_and_the_next_request_is_held_against_it() {
    let (upstream, mut senders) = streaming_upstream().await;
    let proxy = Running::start(upstream.config()).await;
    let recorded = fixture("anthropic-sse__anthropics-anthropic-sdk-python__tool_use_response.txt");
    // Every request is answered with the recorded stream: one call,
    // toolu_01NRLabsLyVHZPKxbKvkfSMn.
    let feeding = {
        let recorded = recorded.clone();
        tokio::spawn(async move {
            while let Some(mut tx) = senders.recv().await {
                for chunk in recorded.chunks(61) {
                    if tx.send_data(Bytes::copy_from_slice(chunk)).await.is_err() {
                        break;
                    }
                }
            }
        })
    };
    let first: serde_json::Value = serde_json::from_str(ANTHROPIC_OK).unwrap();
    let with = |extra: &[serde_json::Value]| {
        let mut v = first.clone();
        v["messages"]
            .as_array_mut()
            .unwrap()
            .extend_from_slice(extra);
        v.to_string()
    };
    let call = serde_json::json!({"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_01NRLabsLyVHZPKxbKvkfSMn", "name": "get_weather", "input": {"location": "San Francisco, CA"}}]});
    let result = serde_json::json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01NRLabsLyVHZPKxbKvkfSMn", "content": "15 C"}]});
    let bodies = [
        first.to_string(),
        // The answer carried back with its result.
        with(&[call.clone(), result.clone()]),
        // The next answer's call not carried: the client went on without it.
        with(&[
            call,
            result,
            serde_json::json!({"role": "assistant", "content": "Done."}),
            serde_json::json!({"role": "user", "content": "Thanks."}),
        ]),
    ];
    let m = proxy.proxy.metrics();
    for (k, body) in bodies.iter().enumerate() {
        let answer = tokio::time::timeout(HANG, post(&proxy, "/v1/messages", &[], body.clone()))
            .await
            .expect("the stream ends");
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, recorded);
        assert_eq!(upstream.received()[k].body, body.as_bytes());
        wait_until(|| m.answers_followed() == k as u64 + 1).await;
    }
    assert_eq!(m.incremental(), 2);
    assert_eq!(m.answer_calls_carried(), (1, 1));
    let text = m.render();
    assert!(text.contains("cutpoint_proxy_answer_calls_carried_total 1\n"));
    assert!(text.contains("cutpoint_proxy_answer_calls_missing_total 1\n"));
    feeding.abort();
}

/// Issue 21: a Responses request that ends in a `compaction_trigger` is answered by
/// exactly one `compaction` item. An answer with two passes through byte for byte
/// and is counted; the same answer to a request without the trigger is not.
#[tokio::test]
async fn a_compaction_trigger_answered_twice_is_counted_and_passed_on() {
    let item = r#"{"type":"compaction","id":"cmp_1","encrypted_content":"gAAAAB"}"#;
    let mut stream = String::from(
        "event: response.created\ndata: {\"type\":\"response.created\",\"response\":{\"id\":\"resp_1\",\"output\":[]}}\n\n",
    );
    for i in 0..2 {
        for kind in ["added", "done"] {
            stream.push_str(&format!(
                "event: response.output_item.{kind}\ndata: {{\"type\":\"response.output_item.{kind}\",\"output_index\":{i},\"item\":{item}}}\n\n"
            ));
        }
    }
    stream.push_str("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"resp_1\",\"status\":\"completed\"}}\n\n");
    let (upstream, mut senders) = streaming_upstream().await;
    let proxy = Running::start(upstream.config()).await;
    let m = proxy.proxy.metrics();
    let trigger = r#"{"model":"m","stream":true,"input":[{"role":"user","content":"hi"},{"type":"compaction_trigger"}]}"#;
    let plain = r#"{"model":"m","stream":true,"input":[{"role":"user","content":"hi"}]}"#;
    // The upstream answers each request with the same two-compaction stream.
    let feeding = {
        let stream = stream.clone();
        tokio::spawn(async move {
            for _ in 0..2 {
                let mut tx = senders.recv().await.expect("the upstream was called");
                tx.send_data(Bytes::from(stream.clone()))
                    .await
                    .expect("send");
            }
        })
    };
    for (n, body) in [trigger, plain].into_iter().enumerate() {
        let answer = tokio::time::timeout(HANG, post(&proxy, "/v1/responses", &[], body))
            .await
            .expect("the stream ends");
        assert_eq!(answer.status, 200);
        assert_eq!(answer.body, stream.as_bytes(), "the stream changed");
        wait_until(|| m.answers_followed() == n as u64 + 1).await;
        assert_eq!(m.answer_compactions_broken(), 1, "after request {n}");
        assert_eq!(m.answer_stream_errors(), 0);
    }
    feeding.await.unwrap();
}
