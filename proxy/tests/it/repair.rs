//! Repair mode: a request whose faults can be fixed without losing a call is fixed and
//! forwarded (an unanswered call answered with an aborted error result, a result with
//! no call anywhere dropped); what is forwarded keeps the rules, holds every call of
//! the request and every untouched message byte for byte, and a second repair of it
//! changes nothing; anything else is refused as check mode refuses it.

use std::collections::BTreeSet;

use cutpoint::compact::ABORTED_RESULT_TEXT;
use cutpoint::format::{ByteEstimate, check_rules};
use cutpoint_proxy::{Config, Decision, Mode, Route};
use proptest::prelude::*;
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::support::*;

fn repair_config(upstream: &StandIn) -> Config {
    let mut config = upstream.config();
    config.mode = Mode::Repair;
    config
}

/// The history's elements of `body` as their bytes.
fn raw_history(body: &str, key: &str) -> Vec<String> {
    let top: std::collections::HashMap<String, &RawValue> =
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let items: Vec<&RawValue> = serde_json::from_str(top[key].get()).unwrap();
    items.iter().map(|r| r.get().to_owned()).collect()
}

/// Every call id of a body of `route`.
fn calls(route: Route, body: &str) -> BTreeSet<String> {
    let v: Value = serde_json::from_str(body).unwrap();
    let mut ids = BTreeSet::new();
    let key = if route == Route::OpenAiResponses {
        "input"
    } else {
        "messages"
    };
    for m in v[key].as_array().unwrap() {
        for b in m["content"].as_array().into_iter().flatten() {
            if b["type"] == "tool_use" {
                ids.insert(b["id"].as_str().unwrap().to_owned());
            }
        }
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            ids.insert(c["id"].as_str().unwrap().to_owned());
        }
        if m["type"] == "function_call" || m["type"] == "custom_tool_call" {
            ids.insert(m["call_id"].as_str().unwrap().to_owned());
        }
    }
    ids
}

/// The properties of a repaired body: it keeps the rules, holds every call of the
/// request, and repairing it again forwards it as it is.
fn assert_repaired(route: Route, request: &str, body: &str) {
    let back = cutpoint::format::read(body, route.format(), &ByteEstimate)
        .unwrap_or_else(|e| panic!("{e}\n{body}"));
    assert_eq!(check_rules(&back), vec![], "{body}");
    assert_eq!(calls(route, body), calls(route, request), "a call was lost");
    assert_eq!(
        Mode::Repair.decide(route, body.as_bytes()),
        Decision::Forward
    );
    assert_eq!(
        Mode::Check.decide(route, body.as_bytes()),
        Decision::Forward
    );
}

#[tokio::test]
async fn an_anthropic_call_left_unanswered_is_answered_as_aborted_and_forwarded() {
    let upstream = StandIn::json(r#"{"type":"message"}"#).await;
    let proxy = Running::start(repair_config(&upstream)).await;
    let answer = post(
        &proxy,
        "/v1/messages",
        &[("x-api-key", "k")],
        ANTHROPIC_BROKEN,
    )
    .await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let got = upstream.received();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].headers["x-api-key"], "k");
    let body = std::str::from_utf8(&got[0].body).unwrap();
    assert_repaired(Route::AnthropicMessages, ANTHROPIC_BROKEN, body);
    let v: Value = serde_json::from_str(body).unwrap();
    let repaired = &v["messages"][2]["content"];
    assert_eq!(
        repaired,
        &json!([
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": ABORTED_RESULT_TEXT, "is_error": true},
            {"type": "text", "text": "Never mind, what about Rome?"},
        ])
    );
    // The untouched messages, and the body's other members, as they came.
    let (before, after) = (
        raw_history(ANTHROPIC_BROKEN, "messages"),
        raw_history(body, "messages"),
    );
    assert_eq!(before[..2], after[..2]);
    assert!(body.starts_with(r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"messages":["#));
    assert_eq!(proxy.proxy.metrics().repairs(), 1);
    assert!(
        proxy
            .proxy
            .metrics()
            .render()
            .contains("cutpoint_proxy_repairs_total 1\n")
    );
}

#[tokio::test]
async fn an_openai_chat_call_left_unanswered_gets_a_tool_message() {
    let upstream = StandIn::json(r#"{"object":"chat.completion"}"#).await;
    let proxy = Running::start(repair_config(&upstream)).await;
    let answer = post(&proxy, "/v1/chat/completions", &[], CHAT_BROKEN).await;
    assert_eq!(answer.status, 200, "{}", answer.text());
    let got = upstream.received();
    let body = std::str::from_utf8(&got[0].body).unwrap();
    assert_repaired(Route::OpenAiChat, CHAT_BROKEN, body);
    let (before, after) = (
        raw_history(CHAT_BROKEN, "messages"),
        raw_history(body, "messages"),
    );
    assert_eq!(after.len(), 4);
    assert_eq!(
        serde_json::from_str::<Value>(&after[2]).unwrap(),
        json!({"role": "tool", "tool_call_id": "call_abc", "content": ABORTED_RESULT_TEXT})
    );
    assert_eq!(
        [&before[0], &before[1], &before[2]],
        [&after[0], &after[1], &after[3]]
    );
}

#[test]
fn a_responses_orphan_output_is_dropped_and_an_unanswered_call_answered() {
    let orphan = r#"{"model":"gpt-5","input":[{"type":"message","role":"user","content":"hi"},{"type":"function_call_output","call_id":"call_zz","output":"42"}]}"#;
    let Decision::Repaired {
        body,
        answered,
        dropped,
    } = Mode::Repair.decide(Route::OpenAiResponses, orphan.as_bytes())
    else {
        panic!(
            "{:?}",
            Mode::Repair.decide(Route::OpenAiResponses, orphan.as_bytes())
        )
    };
    assert_eq!((answered, dropped), (vec![], vec!["call_zz".to_owned()]));
    let body = std::str::from_utf8(&body).unwrap();
    assert_eq!(
        body,
        r#"{"model":"gpt-5","input":[{"type":"message","role":"user","content":"hi"}]}"#
    );
    assert_repaired(Route::OpenAiResponses, orphan, body);

    let unanswered = r#"{"model":"gpt-5","input":[{"type":"message","role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},{"type":"function_call","call_id":"call_2","name":"g","arguments":"{}"},{"type":"function_call_output","call_id":"call_2","output":"ok"}]}"#;
    let Decision::Repaired { body, answered, .. } =
        Mode::Repair.decide(Route::OpenAiResponses, unanswered.as_bytes())
    else {
        panic!()
    };
    assert_eq!(answered, ["call_1"]);
    let body = std::str::from_utf8(&body).unwrap();
    assert_repaired(Route::OpenAiResponses, unanswered, body);
    let items = raw_history(body, "input");
    assert_eq!(
        serde_json::from_str::<Value>(&items[3]).unwrap(),
        json!({"type": "function_call_output", "call_id": "call_1", "output": ABORTED_RESULT_TEXT})
    );
}

#[tokio::test]
async fn what_repair_cannot_fix_is_refused_as_check_refuses_it_and_never_forwarded() {
    let upstream = StandIn::json("{}").await;
    let proxy = Running::start(repair_config(&upstream)).await;
    // A result two messages after its call: out of place, not moved.
    let misplaced = r#"{"model":"m","max_tokens":9,"messages":[{"role":"user","content":"go"},{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{}}]},{"role":"user","content":"wait"},{"role":"assistant","content":"ok"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"r"}]}]}"#;
    // A tool message for a call, after a user message: out of place, not moved.
    let late = r#"{"model":"gpt-4o","messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"user","content":"y"},{"role":"tool","tool_call_id":"c1","content":"a"}]}"#;
    for (path, body) in [("/v1/messages", misplaced), ("/v1/chat/completions", late)] {
        let answer = post(&proxy, path, &[], body).await;
        assert_eq!(answer.status, 400, "{path}: {}", answer.text());
        assert!(answer.headers.contains_key("x-cutpoint-refused"));
        assert!(answer.text().contains("not repaired"), "{}", answer.text());
    }
    assert!(upstream.received().is_empty());
    assert_eq!(proxy.proxy.metrics().repairs(), 0);
}

/// Real requests (a Claude Code session, a Codex rollout) with their last result
/// taken out: repaired back to a request that differs from the real one only in that
/// result's text.
#[test]
fn real_requests_missing_their_last_result_are_repaired_in_place() {
    for (route, name) in [
        (
            Route::AnthropicMessages,
            "anthropic-request__claude-reliability__python-to-rust-port.json",
        ),
        (
            Route::OpenAiResponses,
            "openai-responses-request__localpush__rollout-12-41-04-parallel7.json",
        ),
        (
            Route::OpenAiChat,
            "openai-chat__tau-bench__gpt-4o-airline-traj173.json",
        ),
    ] {
        let text = String::from_utf8(fixture(name)).unwrap();
        let mut v: Value = serde_json::from_str(&text).unwrap();
        let key = if route == Route::OpenAiResponses {
            "input"
        } else {
            "messages"
        };
        let history = v[key].as_array_mut().unwrap();
        // The last result, taken out.
        let gone = match route {
            Route::AnthropicMessages => {
                let at = history
                    .iter()
                    .rposition(|m| {
                        m["content"]
                            .as_array()
                            .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
                    })
                    .unwrap();
                let content = history[at]["content"].as_array_mut().unwrap();
                let k = content
                    .iter()
                    .position(|b| b["type"] == "tool_result")
                    .unwrap();
                let id = content[k]["tool_use_id"].as_str().unwrap().to_owned();
                content.remove(k);
                if content.is_empty() {
                    content.push(json!({"type": "text", "text": "(interrupted)"}));
                }
                id
            }
            Route::OpenAiChat => {
                let at = history.iter().rposition(|m| m["role"] == "tool").unwrap();
                history.remove(at)["tool_call_id"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            }
            Route::OpenAiResponses => {
                let at = history
                    .iter()
                    .rposition(|m| m["type"] == "function_call_output")
                    .unwrap();
                history.remove(at)["call_id"].as_str().unwrap().to_owned()
            }
            _ => unreachable!("the three routes"),
        };
        let broken = v.to_string();
        assert!(matches!(
            Mode::Check.decide(route, broken.as_bytes()),
            Decision::Refuse(_)
        ));
        let decision = Mode::Repair.decide(route, broken.as_bytes());
        let Decision::Repaired {
            body,
            answered,
            dropped,
        } = decision
        else {
            panic!("{name}: {decision:?}")
        };
        assert_eq!((answered, dropped), (vec![gone.clone()], vec![]), "{name}");
        let body = std::str::from_utf8(&body).unwrap();
        assert_repaired(route, &broken, body);
        assert_eq!(body.matches(ABORTED_RESULT_TEXT).count(), 1, "{name}");
        // Every element of the broken history is in the repaired one, in order,
        // byte for byte, but the one repaired.
        let (before, after) = (raw_history(&broken, key), raw_history(body, key));
        let changed = before.iter().filter(|m| !after.contains(m)).count();
        assert!(changed <= 1, "{name}: {changed} elements changed");
        assert!(after.len() <= before.len() + 1, "{name}");
    }
}

/// A generated break of a real request: some results taken out, some results for
/// calls that do not exist put in.
fn break_request(route: Route, text: &str, take: &[prop::sample::Index], orphans: usize) -> String {
    let mut v: Value = serde_json::from_str(text).unwrap();
    let key = if route == Route::OpenAiResponses {
        "input"
    } else {
        "messages"
    };
    let history = v[key].as_array_mut().unwrap();
    let results: Vec<usize> = (0..history.len())
        .filter(|&i| match route {
            Route::OpenAiChat => history[i]["role"] == "tool",
            Route::OpenAiResponses => history[i]["type"] == "function_call_output",
            Route::AnthropicMessages => history[i]["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result")),
            _ => unreachable!("the three routes"),
        })
        .collect();
    let mut gone: Vec<usize> = take
        .iter()
        .map(|i| results[i.index(results.len())])
        .collect();
    gone.sort_unstable();
    gone.dedup();
    for &at in gone.iter().rev() {
        match route {
            Route::AnthropicMessages => {
                let content = history[at]["content"].as_array_mut().unwrap();
                let k = content
                    .iter()
                    .position(|b| b["type"] == "tool_result")
                    .unwrap();
                content.remove(k);
                if content.is_empty() {
                    content.push(json!({"type": "text", "text": "(interrupted)"}));
                }
            }
            _ => {
                history.remove(at);
            }
        }
    }
    for k in 0..orphans {
        let id = format!("orphan_{k}");
        let at = history.len() / (k + 2);
        let item = match route {
            Route::AnthropicMessages => {
                // At the head of a user message's content, as a stale result is sent.
                if let Some(m) = history[at..]
                    .iter_mut()
                    .find(|m| m["role"] == "user" && m["content"].is_array())
                {
                    m["content"].as_array_mut().unwrap().insert(
                        0,
                        json!({"type": "tool_result", "tool_use_id": id, "content": "stale"}),
                    );
                }
                continue;
            }
            Route::OpenAiChat => json!({"role": "tool", "tool_call_id": id, "content": "stale"}),
            Route::OpenAiResponses => {
                json!({"type": "function_call_output", "call_id": id, "output": "stale"})
            }
            _ => unreachable!("the three routes"),
        };
        history.insert(at, item);
    }
    v.to_string()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// On real requests broken at random: repair forwards only what keeps the rules
    /// and holds every call, and a second repair changes nothing; it never forwards
    /// what check refuses without repairing it (a refusal says why it was not
    /// repaired: on Responses, an orphan dropped before a reasoning item changes that
    /// item's prefix, so it is refused).
    #[test]
    fn repair_on_real_requests_broken_at_random(
        which in 0usize..3,
        take in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        orphans in 0usize..3,
    ) {
        let (route, name) = [
            (Route::AnthropicMessages, "anthropic-request__claude-reliability__python-to-rust-port.json"),
            (Route::OpenAiResponses, "openai-responses-request__localpush__rollout-12-41-04-parallel7.json"),
            (Route::OpenAiChat, "openai-chat__tau-bench__gpt-4o-airline-traj173.json"),
        ][which];
        let text = String::from_utf8(fixture(name)).unwrap();
        let broken = break_request(route, &text, &take, orphans);
        match Mode::Repair.decide(route, broken.as_bytes()) {
            Decision::Repaired { body, answered, dropped } => {
                prop_assert!(!answered.is_empty() || !dropped.is_empty());
                prop_assert_eq!(dropped.len(), orphans);
                assert_repaired(route, &broken, std::str::from_utf8(&body).unwrap());
            }
            Decision::Forward => prop_assert_eq!(Mode::Check.decide(route, broken.as_bytes()), Decision::Forward),
            Decision::Refuse(r) => {
                prop_assert!(r.message.contains("not repaired"), "{}", r.message);
                prop_assert!(matches!(Mode::Check.decide(route, broken.as_bytes()), Decision::Refuse(_)));
            }
            other => prop_assert!(false, "{:?}", other),
        }
    }
}
