//! Compact mode: a long real history over the budget reaches the upstream smaller,
//! well paired, carrying the summary's ledger, every other field untouched; under
//! the budget it goes as it came.

use cutpoint::compact::pipeline::Settings;
use cutpoint::format::{ByteEstimate, Format, check_against, check_rules};
use cutpoint_proxy::{Compaction, Config, Mode};
use serde_json::{Value, json};

use crate::support::*;

/// A Chat Completions request around the real tau-bench trajectory's messages, with
/// the fields an SDK sends beside them.
fn tau_bench_request() -> String {
    let traj: Value = serde_json::from_slice(&fixture(
        "openai-chat__tau-bench__gpt-4o-airline-traj173.json",
    ))
    .unwrap();
    json!({
        "model": "gpt-4o",
        "temperature": 0.0,
        "stream": true,
        "tools": [{"type": "function", "function": {"name": "get_reservation_details", "parameters": {"type": "object", "properties": {"reservation_id": {"type": "string"}}}}}],
        "messages": traj["messages"],
    })
    .to_string()
}

fn compact_mode(budget: u64) -> Mode {
    let mut settings = Settings::new();
    settings.budget = Some(budget);
    Mode::Compact(Box::new(Compaction::new(&settings).unwrap()))
}

fn live_tokens(body: &str, format: Format) -> u64 {
    cutpoint::format::read(body, format, &ByteEstimate)
        .unwrap()
        .live_tokens()
}

/// A long Anthropic request in the shape Claude Code sends: a system prompt, tools,
/// and `turns` turns of a question, a call with its argument, a long result, and an
/// answer; the last user message asks the next question.
fn long_anthropic_request(turns: usize) -> String {
    let mut messages = Vec::new();
    for t in 0..turns {
        messages.push(json!({"role": "user", "content": format!("Step {t}: read src/module_{t}.rs and tell me what it does.")}));
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("I will read src/module_{t}.rs.")},
            {"type": "tool_use", "id": format!("toolu_{t:04}"), "name": "Read", "input": {"file_path": format!("/repo/src/module_{t}.rs")}},
        ]}));
        let source: String = (0..40)
            .map(|l| format!("fn item_{t}_{l}() -> u32 {{ {l} }}\n"))
            .collect();
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_{t:04}"), "content": source},
        ]}));
        messages.push(json!({"role": "assistant", "content": [{"type": "text", "text": format!("module_{t} defines 40 small functions.")}]}));
    }
    messages.push(json!({"role": "user", "content": "Now summarize the whole crate."}));
    json!({
        "model": "claude-sonnet-4-5",
        "max_tokens": 8192,
        "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": [{"name": "Read", "description": "Reads a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}}],
        "messages": messages,
    })
    .to_string()
}

/// Every field but the history, as JSON.
fn beside(body: &[u8], history: &str) -> Value {
    let mut v: Value = serde_json::from_slice(body).unwrap();
    v.as_object_mut().unwrap().remove(history);
    v
}

/// The call ids of a request's tool calls (Chat `tool_calls`, Anthropic `tool_use`).
fn call_ids(body: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(body).unwrap();
    let mut ids = Vec::new();
    for m in v["messages"].as_array().unwrap() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            ids.push(c["id"].as_str().unwrap().to_owned());
        }
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_use" {
                ids.push(b["id"].as_str().unwrap().to_owned());
            }
        }
    }
    ids
}

/// Sends `body` through a compact-mode proxy with `budget`; what the upstream got.
async fn through(path: &str, body: &str, budget: u64) -> (Received, Running) {
    let upstream = StandIn::json("{}").await;
    let mut config: Config = upstream.config();
    config.mode = compact_mode(budget);
    let proxy = Running::start(config).await;
    let answer = post(
        &proxy,
        path,
        &[("authorization", "Bearer sk-test")],
        body.to_owned(),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let mut got = upstream.received();
    assert_eq!(got.len(), 1);
    (got.remove(0), proxy)
}

/// What every compacted request must be: smaller, within the budget, keeping the
/// provider's rules, carrying the ledger, every call of the original still named,
/// every other field and the last message as they were.
fn assert_compacted(original: &str, sent: &Received, format: Format, budget: u64) {
    let sent_text = std::str::from_utf8(&sent.body).unwrap();
    assert!(sent.body.len() < original.len(), "not smaller");
    assert!(live_tokens(sent_text, format) <= budget);
    let transcript = cutpoint::format::read(sent_text, format, &ByteEstimate).unwrap();
    assert_eq!(
        check_rules(&transcript),
        vec![],
        "the forwarded request breaks a rule"
    );
    let before = cutpoint::format::read(original, format, &ByteEstimate).unwrap();
    assert_eq!(
        check_against(&before, &transcript),
        vec![],
        "not a legal rewrite of the request"
    );
    assert!(
        sent_text.contains("Tool calls summarized"),
        "no ledger in {sent_text}"
    );
    for id in call_ids(original) {
        assert!(sent_text.contains(&id), "call {id} lost");
    }
    assert_eq!(
        beside(&sent.body, "messages"),
        beside(original.as_bytes(), "messages")
    );
    let last = |b: &[u8]| {
        serde_json::from_slice::<Value>(b).unwrap()["messages"]
            .as_array()
            .unwrap()
            .last()
            .cloned()
    };
    assert_eq!(last(&sent.body), last(original.as_bytes()));
    assert_eq!(sent.headers["authorization"], "Bearer sk-test");
}

#[tokio::test]
async fn a_real_openai_chat_history_over_the_budget_reaches_the_upstream_compacted() {
    let body = tau_bench_request();
    let budget = live_tokens(&body, Format::OpenAiChat) * 2 / 3;
    let (sent, proxy) = through("/v1/chat/completions", &body, budget).await;
    assert_compacted(&body, &sent, Format::OpenAiChat, budget);
    assert_eq!(proxy.proxy.metrics().compactions(), 1);
}

#[tokio::test]
async fn a_long_anthropic_history_over_the_budget_reaches_the_upstream_compacted() {
    let body = long_anthropic_request(30);
    let budget = live_tokens(&body, Format::AnthropicMessages) / 2;
    let (sent, _proxy) = through("/v1/messages", &body, budget).await;
    assert_compacted(&body, &sent, Format::AnthropicMessages, budget);
}

/// The request Claude Code sends for the next turn of a real session (derived from a
/// real Claude Code transcript: `proxy/tests/fixtures/SOURCES.md`).
fn claude_code_request() -> String {
    String::from_utf8(fixture(
        "anthropic-request__claude-reliability__python-to-rust-port.json",
    ))
    .unwrap()
}

#[tokio::test]
async fn a_real_claude_code_request_passes_check_mode_byte_for_byte() {
    let body = claude_code_request();
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(upstream.config()).await;
    let answer = post(
        &proxy,
        "/v1/messages",
        &[("x-api-key", "sk-ant-test")],
        body.clone(),
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    assert_eq!(upstream.received()[0].body, body.as_bytes());
}

#[tokio::test]
async fn a_real_claude_code_session_over_the_budget_reaches_the_upstream_compacted() {
    let body = claude_code_request();
    let budget = live_tokens(&body, Format::AnthropicMessages) / 2;
    let (sent, proxy) = through("/v1/messages", &body, budget).await;
    assert_compacted(&body, &sent, Format::AnthropicMessages, budget);
    assert_eq!(proxy.proxy.metrics().compactions(), 1);
}

/// The Responses request Codex sends for the next turn of a real session (derived
/// from a real Codex rollout: `proxy/tests/fixtures/SOURCES.md`).
fn codex_request(name: &str) -> String {
    String::from_utf8(fixture(&format!(
        "openai-responses-request__localpush__{name}.json"
    )))
    .unwrap()
}

#[tokio::test]
async fn a_real_codex_session_over_the_budget_reaches_the_upstream_compacted() {
    let body = codex_request("rollout-12-41-04-parallel7");
    let budget = live_tokens(&body, Format::OpenAiResponses) / 2;
    let (sent, _proxy) = through("/v1/responses", &body, budget).await;
    let text = std::str::from_utf8(&sent.body).unwrap();
    assert!(sent.body.len() < body.len());
    assert!(live_tokens(text, Format::OpenAiResponses) <= budget);
    let back = cutpoint::format::read(text, Format::OpenAiResponses, &ByteEstimate).unwrap();
    assert_eq!(check_rules(&back), vec![]);
    let before = cutpoint::format::read(&body, Format::OpenAiResponses, &ByteEstimate).unwrap();
    assert_eq!(
        check_against(&before, &back),
        vec![],
        "reasoning or compaction broken"
    );
    assert_eq!(
        beside(&sent.body, "input"),
        beside(body.as_bytes(), "input")
    );
    let calls: Vec<String> = serde_json::from_str::<Value>(&body).unwrap()["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| i["call_id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(calls.len(), 118);
    for id in calls {
        assert!(text.contains(&id), "call {id} lost");
    }
}

#[tokio::test]
async fn a_real_codex_session_with_a_call_never_answered_is_refused() {
    let body = codex_request("rollout-12-47-42-orphan-call");
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(upstream.config()).await;
    let answer = post(
        &proxy,
        "/v1/responses",
        &[("authorization", "Bearer sk-test")],
        body,
    )
    .await;
    assert_eq!(answer.status, 400);
    let json = answer.json();
    assert_eq!(json["error"]["code"], "openai-responses/no-tool-output");
    let message = json["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("input.436") && message.contains("call_BpTazJ89W9PntRqGPwDNfwEY"),
        "{message}"
    );
    assert!(
        message.contains("No tool output found for function call"),
        "{message}"
    );
    assert!(upstream.received().is_empty());
}

#[tokio::test]
async fn within_the_budget_the_request_goes_as_it_came() {
    let body = long_anthropic_request(5);
    let budget = live_tokens(&body, Format::AnthropicMessages) + 1;
    let (sent, proxy) = through("/v1/messages", &body, budget).await;
    assert_eq!(sent.body, body.as_bytes());
    assert_eq!(proxy.proxy.metrics().compactions(), 0);
}

#[tokio::test]
async fn a_budget_no_legal_rewrite_meets_is_deferred_and_the_request_goes_as_it_came() {
    let body = tau_bench_request();
    let (sent, proxy) = through("/v1/chat/completions", &body, 10).await;
    assert_eq!(sent.body, body.as_bytes());
    let text = proxy.proxy.metrics().render();
    assert!(
        text.contains("cutpoint_proxy_deferrals_total 1\n"),
        "{text}"
    );
    // Counted by cause: the floors keep what is left over the budget.
    assert!(
        text.contains("cutpoint_proxy_deferred_total{cause=\"budget-not-met\"} 1\n"),
        "{text}"
    );
    assert_eq!(
        proxy
            .proxy
            .metrics()
            .deferrals(cutpoint_proxy::DeferCause::BudgetNotMet),
        1
    );
}

#[tokio::test]
async fn compact_mode_still_refuses_a_broken_request() {
    let upstream = StandIn::json("{}").await;
    let mut config = upstream.config();
    config.mode = compact_mode(10);
    let proxy = Running::start(config).await;
    let answer = post(&proxy, "/v1/messages", &[], ANTHROPIC_BROKEN).await;
    assert_eq!(answer.status, 400);
    assert!(upstream.received().is_empty());
}

#[test]
fn compaction_needs_a_budget() {
    assert!(Compaction::new(&Settings::new()).is_err());
    let mut s = Settings::new();
    s.context_window = Some(200_000);
    s.max_output = Some(32_000);
    assert_eq!(Compaction::new(&s).unwrap().budget(), 168_000);
}
