//! Check mode: a request that breaks a provider rule is answered in the provider's
//! own error shape, naming the rule, the call id and the message, and never
//! forwarded; a well-formed one goes upstream byte for byte.

use crate::support::*;

#[tokio::test]
async fn anthropic_tool_use_without_result_is_refused_in_anthropic_shape_and_not_forwarded() {
    let upstream = StandIn::json(r#"{"type":"message"}"#).await;
    let proxy = Running::start(upstream.config()).await;
    let answer = post(
        &proxy,
        "/v1/messages",
        &[("x-api-key", "sk-ant-test")],
        ANTHROPIC_BROKEN,
    )
    .await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.headers["x-cutpoint-refused"],
        "anthropic/tool-use-without-result"
    );
    let json = answer.json();
    assert_eq!(json["type"], "error");
    assert_eq!(json["error"]["type"], "invalid_request_error");
    let message = json["error"]["message"].as_str().unwrap();
    for part in [
        "anthropic/tool-use-without-result",
        "messages.1",
        "toolu_01A",
        "`tool_result`",
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
    assert!(
        upstream.received().is_empty(),
        "a refused request reached the upstream"
    );
    assert_eq!(
        proxy
            .proxy
            .metrics()
            .refusals("anthropic/tool-use-without-result"),
        1
    );
    assert_eq!(proxy.proxy.metrics().forwarded(), 0);
}

#[tokio::test]
async fn openai_chat_call_without_response_is_refused_in_openai_shape_and_not_forwarded() {
    let upstream = StandIn::json(r#"{"object":"chat.completion"}"#).await;
    let proxy = Running::start(upstream.config()).await;
    let answer = post(&proxy, "/v1/chat/completions", &[], CHAT_BROKEN).await;
    assert_eq!(answer.status, 400);
    let json = answer.json();
    assert_eq!(json["error"]["type"], "invalid_request_error");
    assert_eq!(
        json["error"]["code"],
        "openai-chat/tool-call-without-response"
    );
    assert!(json["error"]["param"].is_null());
    let message = json["error"]["message"].as_str().unwrap();
    for part in [
        "messages.1",
        "call_abc",
        "must be followed by tool messages",
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
    assert!(upstream.received().is_empty());
}

#[tokio::test]
async fn openai_responses_output_without_call_is_refused() {
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(upstream.config()).await;
    let body = r#"{"model":"gpt-5","input":[{"type":"message","role":"user","content":"hi"},{"type":"function_call_output","call_id":"call_zz","output":"42"}]}"#;
    let answer = post(&proxy, "/v1/responses", &[], body).await;
    assert_eq!(answer.status, 400);
    let json = answer.json();
    assert_eq!(json["error"]["code"], "openai-responses/no-tool-call");
    let message = json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("input.1") && message.contains("call_zz"),
        "{message}"
    );
    assert!(upstream.received().is_empty());
}

#[tokio::test]
async fn a_well_formed_request_goes_upstream_byte_for_byte() {
    let upstream = StandIn::json(r#"{"ok":true}"#).await;
    let proxy = Running::start(upstream.config()).await;
    for (path, body) in [
        ("/v1/messages", ANTHROPIC_OK),
        ("/v1/chat/completions", CHAT_OK),
    ] {
        let answer = post(&proxy, path, &[], body).await;
        assert_eq!(answer.status, 200, "{}", answer.text());
        assert_eq!(answer.text(), r#"{"ok":true}"#);
    }
    // A Responses request whose input is a plain string holds no history to check.
    let plain = r#"{"model":"gpt-5","input":"hello"}"#;
    assert_eq!(post(&proxy, "/v1/responses", &[], plain).await.status, 200);
    let got = upstream.received();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0].path, "/v1/messages");
    assert_eq!(got[0].body, ANTHROPIC_OK.as_bytes());
    assert_eq!(got[1].body, CHAT_OK.as_bytes());
    assert_eq!(got[2].body, plain.as_bytes());
}

#[tokio::test]
async fn authentication_and_provider_headers_reach_the_upstream_unchanged() {
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(upstream.config()).await;
    let headers = [
        ("authorization", "Bearer sk-proj-abc123"),
        ("x-api-key", "sk-ant-api03-xyz"),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "interleaved-thinking-2025-05-14"),
        ("openai-organization", "org-1"),
        ("user-agent", "claude-cli/2.1.39"),
    ];
    post(&proxy, "/v1/messages", &headers, ANTHROPIC_OK).await;
    post(&proxy, "/v1/models?limit=5", &headers, "").await;
    let got = upstream.received();
    assert_eq!(got.len(), 2);
    for r in &got {
        for (k, v) in headers {
            assert_eq!(r.headers[k], v, "{k} on {}", r.path);
        }
        assert_eq!(r.headers["host"], upstream.addr.to_string());
    }
}

#[tokio::test]
async fn malformed_json_is_refused_naming_the_place() {
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(upstream.config()).await;
    let body = "{\"model\":\"claude-sonnet-4-5\",\n\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},]}";
    let answer = post(&proxy, "/v1/messages", &[], body).await;
    assert_eq!(answer.status, 400);
    let message = answer.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("not valid JSON") && message.contains("line 2 column"),
        "{message}"
    );
    let answer = post(&proxy, "/v1/chat/completions", &[], "[1,2]").await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"]["code"], "invalid-request");
    let answer = post(&proxy, "/v1/chat/completions", &[], r#"{"model":"gpt-4o"}"#).await;
    assert_eq!(answer.status, 400, "no messages: the reader says so");
    assert!(upstream.received().is_empty());
}

#[tokio::test]
async fn a_body_over_the_cap_gets_413_whether_declared_or_streamed() {
    let upstream = StandIn::json("{}").await;
    let mut config = upstream.config();
    config.max_body_bytes = 1024;
    let proxy = Running::start(config).await;
    let big = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "x".repeat(4000)
    );
    let answer = post(&proxy, "/v1/messages", &[], big.clone()).await;
    assert_eq!(answer.status, 413);
    assert_eq!(answer.json()["error"]["type"], "request_too_large");
    // No content-length: a chunked body, cut off by the cap as it is read.
    let (mut tx, body) = http_body_util::channel::Channel::<bytes::Bytes>::new(4);
    let req = http::Request::post(proxy.url("/v1/chat/completions"))
        .body(body)
        .unwrap();
    let sending = tokio::spawn(async move {
        for chunk in big.as_bytes().chunks(500) {
            if tx
                .send_data(bytes::Bytes::copy_from_slice(chunk))
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let answer = whole(client().request(req).await.expect("answer")).await;
    assert_eq!(answer.status, 413);
    assert_eq!(answer.json()["error"]["code"], "body-too-large");
    let _ = sending.await;
    assert!(upstream.received().is_empty());
    assert_eq!(proxy.proxy.metrics().refusals("body-too-large"), 2);
}

#[tokio::test]
async fn a_compressed_body_is_refused_not_forwarded_unchecked() {
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(upstream.config()).await;
    let answer = post(
        &proxy,
        "/v1/messages",
        &[("content-encoding", "gzip")],
        bytes::Bytes::from_static(b"\x1f\x8b"),
    )
    .await;
    assert_eq!(answer.status, 415);
    assert!(upstream.received().is_empty());
}

#[tokio::test]
async fn metrics_count_requests_refusals_and_forwards() {
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(upstream.config()).await;
    post(&proxy, "/v1/messages", &[], ANTHROPIC_BROKEN).await;
    post(&proxy, "/v1/messages", &[], ANTHROPIC_OK).await;
    let response = client::<http_body_util::Empty<bytes::Bytes>>()
        .get(proxy.url("/metrics").parse().unwrap())
        .await
        .unwrap();
    let metrics = whole(response).await;
    assert_eq!(metrics.status, 200);
    let text = metrics.text();
    for line in [
        "cutpoint_proxy_requests_total 2\n",
        "cutpoint_proxy_forwarded_total 1\n",
        "cutpoint_proxy_refused_total{reason=\"anthropic/tool-use-without-result\"} 1\n",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
    assert_eq!(upstream.received().len(), 1, "/metrics is the proxy's own");
    // The latency histograms: the forwarded request's added time and time to its
    // answer's first byte, and both decisions' own time (each read whole: two
    // conversations).
    for line in [
        "# TYPE cutpoint_proxy_added_seconds histogram\n",
        "cutpoint_proxy_added_seconds_bucket{le=\"+Inf\"} 1\n",
        "cutpoint_proxy_added_seconds_count 1\n",
        "cutpoint_proxy_first_byte_seconds_count 1\n",
        "cutpoint_proxy_decide_seconds_count{path=\"whole\"} 2\n",
        "cutpoint_proxy_decide_seconds_count{path=\"incremental\"} 0\n",
    ] {
        assert!(text.contains(line), "{line:?} not in\n{text}");
    }
}

/// Anthropic programmatic tool calling: the request answering a code-execution
/// script's call names the script's `container` (the provider's own text otherwise);
/// with it, the request goes upstream untouched.
#[tokio::test]
async fn a_script_answered_without_its_container_is_refused_and_with_it_forwarded() {
    let upstream = StandIn::json(r#"{"type":"message"}"#).await;
    let proxy = Running::start(upstream.config()).await;
    let messages = r#""messages":[{"role":"user","content":"count the rows"},{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_c","name":"code_execution","input":{"code":"q()"}},{"type":"tool_use","id":"toolu_q","name":"query","input":{},"caller":{"type":"code_execution_20260120","tool_id":"srvtoolu_c"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"3 rows"}]}]"#;
    let without = format!(r#"{{"model":"claude-opus-4-7","max_tokens":64,{messages}}}"#);
    let answer = post(&proxy, "/v1/messages", &[], without.clone()).await;
    assert_eq!(answer.status, 400);
    assert_eq!(
        answer.headers["x-cutpoint-refused"],
        "anthropic/programmatic-container-missing"
    );
    let message = answer.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    for part in [
        "container_id is required when there are pending tool uses generated by code execution with tools.",
        "messages.1",
        "toolu_q",
    ] {
        assert!(message.contains(part), "{part:?} not in {message:?}");
    }
    assert!(upstream.received().is_empty());
    let with = format!(
        r#"{{"model":"claude-opus-4-7","max_tokens":64,"container":"container_011",{messages}}}"#
    );
    let answer = post(&proxy, "/v1/messages", &[], with.clone()).await;
    assert_eq!(answer.status, 200);
    assert_eq!(upstream.received().len(), 1);
    assert_eq!(&upstream.received()[0].body[..], with.as_bytes());
}
