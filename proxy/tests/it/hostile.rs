//! Hostile request bodies: random bytes, valid requests cut short or with a byte
//! changed, deep nesting, and generated histories of every block kind with clashing
//! ids. Never a panic; a refusal is a well-shaped provider error; a request that
//! breaks a rule is never forwarded (checked against the library's reader and rules
//! run directly, the naive oracle); a rewrite forwarded keeps the rules.

use bytes::Bytes;
use cutpoint::compact::pipeline::Settings;
use cutpoint::format::{ByteEstimate, check_rules};
use cutpoint_proxy::{Compaction, Decision, Mode, Route, Session};
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config as RunnerConfig, TestRunner};
use serde_json::{Value, json};

use crate::support::*;

const ROUTES: [Route; 3] = [
    Route::AnthropicMessages,
    Route::OpenAiChat,
    Route::OpenAiResponses,
];

fn valid_bodies() -> Vec<&'static str> {
    vec![
        ANTHROPIC_OK,
        ANTHROPIC_BROKEN,
        CHAT_OK,
        CHAT_BROKEN,
        r#"{"model":"gpt-5","input":[{"type":"message","role":"user","content":"hi"},{"type":"reasoning","id":"rs_1","summary":[]},{"type":"function_call","call_id":"call_1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"call_1","output":"ok"}]}"#,
    ]
}

/// One generated block or message part, of any provider, with ids from a small set
/// so that calls and results clash, repeat and go missing.
fn part() -> impl Strategy<Value = Value> {
    let id = prop_oneof![Just("a"), Just("b"), Just(""), Just("toolu_x")];
    prop_oneof![
        "[a-z ]{0,12}".prop_map(|t| json!({"type": "text", "text": t})),
        id.clone()
            .prop_map(|i| json!({"type": "tool_use", "id": i, "name": "f", "input": {}})),
        id.clone()
            .prop_map(|i| json!({"type": "tool_result", "tool_use_id": i, "content": "r"})),
        Just(json!({"type": "thinking", "thinking": "t", "signature": "sig"})),
        Just(json!({"type": "compaction", "content": "c"})),
        id.clone().prop_map(
            |i| json!({"type": "function_call", "call_id": i, "name": "f", "arguments": "{}"})
        ),
        id.clone()
            .prop_map(|i| json!({"type": "function_call_output", "call_id": i, "output": "o"})),
        Just(json!({"type": "reasoning", "id": "rs_1", "summary": []})),
        Just(json!(null)),
        Just(json!(7)),
    ]
}

/// One generated message or item: a role (or none, or a wrong type), and content
/// that is a string, a list of parts, or Chat's `tool_calls` / `tool_call_id`.
fn message() -> impl Strategy<Value = Value> {
    let role = prop_oneof![
        Just(json!("user")),
        Just(json!("assistant")),
        Just(json!("tool")),
        Just(json!("system")),
        Just(json!(3)),
    ];
    let id = prop_oneof![Just("a"), Just("b"), Just("")];
    prop_oneof![
        (role.clone(), prop::collection::vec(part(), 0..4)).prop_map(|(r, c)| json!({"role": r, "content": c})),
        (role.clone(), "[a-z]{0,6}").prop_map(|(r, t)| json!({"role": r, "content": t})),
        id.clone().prop_map(|i| json!({"role": "assistant", "content": null, "tool_calls": [{"id": i, "type": "function", "function": {"name": "f", "arguments": "{}"}}]})),
        id.prop_map(|i| json!({"role": "tool", "tool_call_id": i, "content": "x"})),
        part(),
    ]
}

/// A hostile body.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let valid = valid_bodies();
    let n = valid.len();
    prop_oneof![
        1 => prop::collection::vec(any::<u8>(), 0..200),
        2 => (0..n, any::<prop::sample::Index>())
            .prop_map(move |(i, cut)| { let b = valid_bodies()[i].as_bytes(); b[..cut.index(b.len() + 1)].to_vec() }),
        2 => (0..n, any::<prop::sample::Index>(), any::<u8>()).prop_map(|(i, at, byte)| {
            let mut b = valid_bodies()[i].as_bytes().to_vec();
            let k = at.index(b.len());
            b[k] = byte;
            b
        }),
        1 => (1usize..3000).prop_map(|depth| format!("{{\"messages\":{}", "[".repeat(depth)).into_bytes()),
        4 => (prop::collection::vec(message(), 0..12), prop_oneof![Just("messages"), Just("input")])
            .prop_map(|(m, key)| json!({"model": "m", key: m}).to_string().into_bytes()),
    ]
}

fn compact_mode() -> Mode {
    let mut s = Settings::new();
    s.budget = Some(40);
    Mode::Compact(Box::new(Compaction::new(&s).unwrap()))
}

/// The property of one decision on `bytes` for `route`.
fn judge(mode: &Mode, route: Route, bytes: &[u8]) -> Result<(), TestCaseError> {
    judge_decision(route, bytes, mode.decide(route, bytes))?;
    // And as the next request of a session: one whose history is the body's first
    // elements (so that the body continues it), or a fixed one, each as forwarded
    // as it came and as compacted into a summary. Incrementally and from scratch,
    // one decision, and the same session after it.
    for prior in priors(route, bytes) {
        let (decision, session) = mode.decide_in(route, bytes, Some(prior.clone()));
        let (scratch, scratch_session) = mode.decide_in_from_scratch(route, bytes, Some(&prior));
        prop_assert_eq!(&decision, &scratch);
        prop_assert_eq!(
            session
                .as_ref()
                .map(|s| (s.client().to_vec(), s.forwarded().map(<[_]>::to_vec))),
            scratch_session
                .as_ref()
                .map(|s| (s.client().to_vec(), s.forwarded().map(<[_]>::to_vec)))
        );
        if let Some(s) = &session {
            s.assert_invariants();
        }
        judge_decision(route, bytes, decision)?;
    }
    Ok(())
}

/// Sessions `bytes` may be the next request of: its own first half of history
/// elements (when it has a history), and a fixed one-message history; each as
/// forwarded as it came and as compacted into a summary.
fn priors(route: Route, bytes: &[u8]) -> Vec<Session> {
    let key = match route {
        Route::OpenAiResponses => "input",
        _ => "messages",
    };
    let doc = |elements: &[&str]| format!(r#"{{"model":"m","{key}":[{}]}}"#, elements.join(","));
    let summary = match route {
        Route::OpenAiResponses => {
            r#"{"type":"message","role":"user","content":"Earlier conversation, compacted."}"#
        }
        _ => r#"{"role":"user","content":"Earlier conversation, compacted."}"#,
    };
    let mut histories = vec![vec![
        r#"{"role":"user","content":"What is the weather in Paris?"}"#.to_owned(),
    ]];
    let own: Option<Vec<String>> = serde_json::from_slice::<Value>(bytes)
        .ok()
        .and_then(|v| v.get(key).and_then(|h| h.as_array()).cloned())
        .map(|h| h[..h.len() / 2].iter().map(Value::to_string).collect());
    // Not the body's bytes (serde_json writes them anew), so only a body written by
    // serde_json itself continues it: the generated ones.
    histories.extend(own);
    let mut out = Vec::new();
    for h in histories {
        let h: Vec<&str> = h.iter().map(String::as_str).collect();
        let client = doc(&h);
        out.extend(Session::read(route, client.as_bytes(), None));
        out.extend(Session::read(
            route,
            client.as_bytes(),
            Some(doc(&[summary]).as_bytes()),
        ));
    }
    out
}

/// The property of `decision` on `bytes` for `route`.
fn judge_decision(route: Route, bytes: &[u8], decision: Decision) -> Result<(), TestCaseError> {
    // The naive oracle: the library's reader and rules, run directly.
    let broken = std::str::from_utf8(bytes)
        .ok()
        .and_then(|t| cutpoint::format::read(t, route.format(), &ByteEstimate).ok())
        .is_some_and(|t| !check_rules(&t).is_empty());
    match &decision {
        Decision::Refuse(r) => {
            prop_assert!([400, 413, 415].contains(&r.status.as_u16()));
            let shape: Value = serde_json::from_slice(&r.body(route)).unwrap();
            if route.is_anthropic() {
                prop_assert_eq!(&shape["type"], "error");
                prop_assert!(shape["error"]["message"].is_string());
            } else {
                prop_assert_eq!(&shape["error"]["code"], r.reason);
            }
        }
        Decision::Repaired { body, .. } => {
            prop_assert!(broken, "a request that keeps the rules was repaired");
            let text = std::str::from_utf8(body).unwrap();
            let back = cutpoint::format::read(text, route.format(), &ByteEstimate).unwrap();
            prop_assert_eq!(check_rules(&back), vec![]);
        }
        Decision::Continued { body, .. } => {
            prop_assert!(!broken);
            let text = std::str::from_utf8(body).unwrap();
            let back = cutpoint::format::read(text, route.format(), &ByteEstimate).unwrap();
            prop_assert_eq!(check_rules(&back), vec![]);
        }
        Decision::Compacted { body, .. } => {
            prop_assert!(!broken);
            let text = std::str::from_utf8(body).unwrap();
            let back = cutpoint::format::read(text, route.format(), &ByteEstimate).unwrap();
            prop_assert_eq!(check_rules(&back), vec![]);
        }
        Decision::Forward | Decision::Deferred { .. } => {
            prop_assert!(
                !broken,
                "a rule-breaking request would be forwarded: {:?}",
                String::from_utf8_lossy(bytes)
            );
        }
        _ => {}
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn hostile_bodies_are_refused_cleanly_or_forwarded_only_when_they_keep_the_rules(bytes in body()) {
        for route in ROUTES {
            judge(&Mode::Check, route, &bytes)?;
            judge(&Mode::Repair, route, &bytes)?;
            judge(&compact_mode(), route, &bytes)?;
        }
    }
}

/// Through the proxy over loopback: a refused body never reaches the upstream; a
/// forwarded one reaches it byte for byte.
#[test]
fn over_http_a_refused_body_is_never_forwarded() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let upstream = StandIn::json("{}").await;
        let proxy = Running::start(upstream.config()).await;
        let mut runner = TestRunner::new(RunnerConfig::with_cases(48));
        let strategy = body();
        let cases: Vec<Vec<u8>> = (0..48)
            .map(|_| strategy.new_tree(&mut runner).unwrap().current())
            .collect();
        for (k, bytes) in cases.into_iter().enumerate() {
            let path = ["/v1/messages", "/v1/chat/completions", "/v1/responses"][k % 3];
            let before = upstream.received().len();
            let answer = post(&proxy, path, &[], Bytes::from(bytes.clone())).await;
            let got = upstream.received();
            if answer.headers.contains_key("x-cutpoint-refused") {
                assert_eq!(
                    got.len(),
                    before,
                    "refused, yet forwarded: {:?}",
                    String::from_utf8_lossy(&bytes)
                );
                assert!(serde_json::from_slice::<Value>(&answer.body).is_ok());
            } else {
                assert_eq!(answer.status, 200, "{}", answer.text());
                assert_eq!(got.len(), before + 1);
                assert_eq!(got[before].body, bytes, "forwarded changed");
            }
        }
    });
}
