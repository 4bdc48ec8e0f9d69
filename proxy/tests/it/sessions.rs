//! Sessions in compact mode: once the proxy compacted a conversation, its next
//! request (the client's full history again, the provider's answer and a new turn
//! after it) is forwarded as the history the proxy forwarded before, extended, so the
//! provider sees an append-only conversation; over the budget again, the pipeline
//! runs on that continuation, carrying the earlier summary forward; the table is
//! bounded and evicts the least recently used.

use cutpoint::compact::pipeline::Settings;
use cutpoint::format::{ByteEstimate, Format, check_rules};
use cutpoint_proxy::{Compaction, Config, Decision, Mode, Route, Session};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::support::*;

fn compact_mode(budget: u64) -> Mode {
    let mut settings = Settings::new();
    settings.budget = Some(budget);
    Mode::Compact(Box::new(Compaction::new(&settings).unwrap()))
}

/// A budget that compacts `first` (the first of 60%, 70%, 80% of its tokens the
/// pipeline meets).
fn budget_for(first: &str) -> u64 {
    let total = tokens(first);
    [60, 70, 80]
        .into_iter()
        .map(|p| total * p / 100)
        .find(|&b| {
            matches!(
                compact_mode(b).decide(Route::AnthropicMessages, first.as_bytes()),
                Decision::Compacted { .. }
            )
        })
        .expect("a budget the pipeline meets")
}

fn tokens(body: &str) -> u64 {
    cutpoint::format::read(body, Format::AnthropicMessages, &ByteEstimate)
        .unwrap()
        .live_tokens()
}

/// The history elements of an Anthropic body, as their bytes.
fn history(body: &[u8]) -> Vec<String> {
    let top: std::collections::HashMap<String, &RawValue> = serde_json::from_slice(body).unwrap();
    let items: Vec<&RawValue> = serde_json::from_str(top["messages"].get()).unwrap();
    items.iter().map(|r| r.get().to_owned()).collect()
}

/// The real Claude Code request (`proxy/tests/fixtures/SOURCES.md`) cut after `upto`
/// messages: the client's request at an earlier turn.
fn turn(upto: usize) -> String {
    let text = String::from_utf8(fixture(
        "anthropic-request__claude-reliability__python-to-rust-port.json",
    ))
    .unwrap();
    let mut v: Value = serde_json::from_str(&text).unwrap();
    let messages = v["messages"].as_array_mut().unwrap();
    messages.truncate(upto);
    assert_eq!(messages[upto - 1]["role"], "user");
    v.to_string()
}

/// The message counts of three turns of the session, each ending in a user message.
fn turns() -> [usize; 3] {
    let text = String::from_utf8(fixture(
        "anthropic-request__claude-reliability__python-to-rust-port.json",
    ))
    .unwrap();
    let v: Value = serde_json::from_str(&text).unwrap();
    let n = v["messages"].as_array().unwrap().len();
    let user_at = |from: usize| {
        (from..n)
            .find(|&i| v["messages"][i]["role"] == "user")
            .unwrap()
            + 1
    };
    [user_at(n / 2), user_at(n * 3 / 4), n]
}

fn call_ids(body: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(body).unwrap();
    let mut ids: Vec<String> = text
        .match_indices("toolu_")
        .map(|(at, _)| {
            text[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect()
        })
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

#[test]
fn a_compacted_session_continues_what_the_provider_saw_and_carries_its_summary() {
    let [t1, t2, t3] = turns();
    let first = turn(t1);
    let budget = budget_for(&first);
    let mode = compact_mode(budget);
    // Turn 1: compacted from scratch, and remembered.
    let (d1, m1) = mode.decide_in(Route::AnthropicMessages, first.as_bytes(), None);
    let Decision::Compacted { body: b1, .. } = &d1 else {
        panic!("{d1:?}")
    };
    let m1 = m1.expect("a compacted session is remembered");
    assert_eq!(elements(&m1), remembered(&first, b1));
    // A short next turn (the provider's short answer, a short question), and a retry
    // of the same request: continued, byte for byte the provider's view extended,
    // no pipeline run.
    let mut v: Value = serde_json::from_str(&first).unwrap();
    let messages = v["messages"].as_array_mut().unwrap();
    messages.push(
        serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}),
    );
    messages.push(serde_json::json!({"role": "user", "content": "Thanks. Next?"}));
    let short = v.to_string();
    for (client, new) in [(&short, 2), (&first, 0)] {
        let (d, m) = mode.decide_in(
            Route::AnthropicMessages,
            client.as_bytes(),
            Some(m1.clone()),
        );
        let Decision::Continued {
            body,
            deferred: None,
            ..
        } = &d
        else {
            panic!("{d:?}")
        };
        let (h1, h, c) = (history(b1), history(body), history(client.as_bytes()));
        assert_eq!(h.len(), h1.len() + new);
        assert_eq!(h[..h1.len()], h1[..]);
        assert_eq!(h[h1.len()..], c[t1..]);
        assert_eq!(elements(&m.unwrap()), (c, Some(h)));
    }
    // Turn 2: the client's full history, and more. Forwarded as turn 1's forwarded
    // history, extended: byte for byte the provider's view, with the new messages.
    let second = turn(t2);
    let (d2, m2) = mode.decide_in(Route::AnthropicMessages, second.as_bytes(), Some(m1));
    let sent2 = match &d2 {
        Decision::Continued { body, .. } | Decision::Compacted { body, .. } => body.clone(),
        other => panic!("{other:?}"),
    };
    let (h1, h2, client2) = (history(b1), history(&sent2), history(second.as_bytes()));
    if let Decision::Continued { tokens_after, .. } = &d2 {
        assert!(*tokens_after <= budget);
        assert_eq!(h2[..h1.len()], h1[..], "the provider's view, extended");
        assert_eq!(
            h2[h1.len()..],
            client2[t1..],
            "the new messages, as the client sent them"
        );
    }
    let back = cutpoint::format::read(
        std::str::from_utf8(&sent2).unwrap(),
        Format::AnthropicMessages,
        &ByteEstimate,
    )
    .unwrap();
    assert_eq!(check_rules(&back), vec![]);
    // Every call the client's history holds is in what was forwarded (in a ledger or
    // raw): none forgotten by the second compaction.
    assert_eq!(call_ids(&sent2), call_ids(second.as_bytes()));
    let m2 = m2.expect("remembered again");
    assert_eq!(m2.client().len(), t2);
    // Turn 3, over the budget again: compacted from the continuation, its output
    // keeping the calls of every earlier turn.
    let third = turn(t3);
    let (d3, m3) = mode.decide_in(Route::AnthropicMessages, third.as_bytes(), Some(m2));
    let sent3 = match &d3 {
        Decision::Continued { body, .. } | Decision::Compacted { body, .. } => body.clone(),
        other => panic!("{other:?}"),
    };
    assert_eq!(call_ids(&sent3), call_ids(third.as_bytes()));
    assert!(
        tokens(std::str::from_utf8(&sent3).unwrap()) <= budget
            || matches!(
                d3,
                Decision::Continued {
                    deferred: Some(_),
                    ..
                }
            )
    );
    assert!(m3.is_some());
    // Both later turns are continuations: at least one was compacted again on its
    // continuation (the third is over the budget by then).
    assert!(
        matches!(d3, Decision::Compacted { .. }) || matches!(d2, Decision::Compacted { .. }),
        "{d2:?} {d3:?}"
    );
}

/// A task budget through a compacted session: the compaction passes `remaining`
/// (what is left after the history it read), and every continued request carries
/// that `remaining` in the client's `output_config`, the rest of it as the client
/// sent it; `check --before` finds nothing to say of either.
#[test]
fn a_compacted_session_carries_its_task_budget_forward() {
    let [t1, _, _] = turns();
    let with_budget = |body: &str| {
        let mut v: Value = serde_json::from_str(body).unwrap();
        v["output_config"] = serde_json::json!({"effort": "high", "task_budget": {"type": "tokens", "total": 500000}});
        v.to_string()
    };
    let first = with_budget(&turn(t1));
    let budget = budget_for(&first);
    let mode = compact_mode(budget);
    let (d1, m1) = mode.decide_in(Route::AnthropicMessages, first.as_bytes(), None);
    let Decision::Compacted { body: b1, .. } = &d1 else {
        panic!("{d1:?}")
    };
    let config = |body: &[u8]| -> Value {
        serde_json::from_slice::<Value>(body).unwrap()["output_config"].clone()
    };
    let left = 500000 - tokens(&first);
    assert_eq!(config(b1)["task_budget"]["remaining"], left);
    assert_eq!(config(b1)["effort"], "high");
    let read = |body: &[u8]| {
        cutpoint::format::read(
            std::str::from_utf8(body).unwrap(),
            Format::AnthropicMessages,
            &ByteEstimate,
        )
        .unwrap()
    };
    assert_eq!(
        cutpoint::format::check_against(&read(first.as_bytes()), &read(b1)),
        vec![]
    );
    let mut v: Value = serde_json::from_str(&first).unwrap();
    let messages = v["messages"].as_array_mut().unwrap();
    messages.push(
        serde_json::json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}),
    );
    messages.push(serde_json::json!({"role": "user", "content": "Thanks. Next?"}));
    let next = v.to_string();
    // Decided incrementally and from scratch alike.
    for incremental in [true, false] {
        let (d, _, warm) = match incremental {
            true => mode.decide_in_traced(Route::AnthropicMessages, next.as_bytes(), m1.clone()),
            false => {
                let (d, m) = mode.decide_in_from_scratch(
                    Route::AnthropicMessages,
                    next.as_bytes(),
                    m1.as_ref(),
                );
                (d, m, false)
            }
        };
        assert_eq!(warm, incremental);
        let Decision::Continued { body, .. } = &d else {
            panic!("{d:?}")
        };
        assert_eq!(
            config(body)["task_budget"]["remaining"],
            left,
            "incremental: {incremental}"
        );
        assert_eq!(config(body)["task_budget"]["total"], 500000);
        assert_eq!(config(body)["effort"], "high");
    }
}

/// What turn 1 remembers: the client's history and the forwarded one.
fn remembered(client: &str, forwarded: &[u8]) -> (Vec<String>, Option<Vec<String>>) {
    (history(client.as_bytes()), Some(history(forwarded)))
}

/// The elements a session holds: the client's, and the forwarded ones.
fn elements(s: &Session) -> (Vec<String>, Option<Vec<String>>) {
    let strings = |e: &[Box<str>]| e.iter().map(|e| e.to_string()).collect::<Vec<_>>();
    (strings(s.client()), s.forwarded().map(strings))
}

#[test]
fn a_request_that_does_not_continue_the_session_is_decided_from_scratch() {
    let [t1, t2, _] = turns();
    let first = turn(t1);
    let mode = compact_mode(budget_for(&first));
    let (_, m1) = mode.decide_in(Route::AnthropicMessages, first.as_bytes(), None);
    let m1 = m1.unwrap();
    // The client edited an early message: not a continuation.
    let mut v: Value = serde_json::from_str(&turn(t2)).unwrap();
    v["messages"][0]["content"] = Value::from("a different start");
    let edited = v.to_string();
    let (d, _) = mode.decide_in(
        Route::AnthropicMessages,
        edited.as_bytes(),
        Some(m1.clone()),
    );
    assert_eq!(d, mode.decide(Route::AnthropicMessages, edited.as_bytes()));
    // A broken request is refused as from scratch, and the session forgotten.
    let broken = ANTHROPIC_BROKEN;
    let (d, m) = mode.decide_in(Route::AnthropicMessages, broken.as_bytes(), Some(m1));
    assert!(matches!(d, Decision::Refuse(_)));
    assert!(m.is_none());
}

#[tokio::test]
async fn over_http_the_second_turn_extends_the_first_and_the_table_stays_bounded() {
    let [t1, t2, _] = turns();
    let first = turn(t1);
    let upstream = StandIn::json(r#"{"type":"message"}"#).await;
    let mut config: Config = upstream.config();
    config.mode = compact_mode(budget_for(&first));
    config.max_sessions = 2;
    let proxy = Running::start(config).await;
    let session = [("x-cutpoint-session", "s-1")];
    assert_eq!(
        post(&proxy, "/v1/messages", &session, first.clone())
            .await
            .status,
        200
    );
    assert_eq!(
        post(&proxy, "/v1/messages", &session, turn(t2))
            .await
            .status,
        200
    );
    let got = upstream.received();
    let (h1, h2) = (history(&got[0].body), history(&got[1].body));
    if proxy.proxy.metrics().continued() == 1 {
        assert_eq!(h2[..h1.len()], h1[..]);
    } else {
        assert_eq!(proxy.proxy.metrics().compactions(), 2);
    }
    assert!(
        proxy
            .proxy
            .metrics()
            .render()
            .contains("cutpoint_proxy_sessions_continued_total")
    );
    let (held, bytes, evicted) = proxy.proxy.sessions();
    assert_eq!((held, evicted), (1, 0));
    // More sessions than the cap: the least recently used go, and what is held stays
    // within two sessions' worth.
    for k in 2..=6 {
        let name = format!("s-{k}");
        let answer = post(
            &proxy,
            "/v1/messages",
            &[("x-cutpoint-session", name.as_str())],
            first.clone(),
        )
        .await;
        assert_eq!(answer.status, 200);
    }
    let (held_after, bytes_after, evicted_after) = proxy.proxy.sessions();
    assert_eq!((held_after, evicted_after), (2, 4));
    assert!(
        bytes_after <= 2 * bytes.max(1) * 2,
        "{bytes_after} after, {bytes} for one"
    );
}

/// Check mode keeps sessions too: a conversation's next turn is read only where it
/// is new, forwarded byte for byte, and `/metrics` counts and times it.
#[tokio::test]
async fn over_http_a_next_turn_in_check_mode_is_decided_incrementally() {
    let [t1, t2, _] = turns();
    let upstream = StandIn::json(r#"{"type":"message"}"#).await;
    let proxy = Running::start(upstream.config()).await;
    for body in [turn(t1), turn(t2)] {
        let answer = post(&proxy, "/v1/messages", &[], body.clone()).await;
        assert_eq!(answer.status, 200);
        assert_eq!(upstream.received().last().unwrap().body, body.as_bytes());
    }
    let m = proxy.proxy.metrics();
    assert_eq!(m.incremental(), 1);
    assert_eq!((m.decide(true).count(), m.decide(false).count()), (1, 1));
    assert_eq!(m.added().count(), 2);
    let text = m.render();
    assert!(text.contains("cutpoint_proxy_sessions_incremental_total 1\n"));
    assert!(text.contains("cutpoint_proxy_decide_seconds_count{path=\"incremental\"} 1\n"));
    // Keyed by the conversation's start (no header): one session, holding turn 2.
    let (held, _, evicted) = proxy.proxy.sessions();
    assert_eq!((held, evicted), (1, 0));
}
