//! Compacting an OpenAI Chat log with parallel calls at every token budget never
//! yields a log that breaks a rule of providers.md.

#![cfg(feature = "formats")]

use cutpoint::compact::{Direction, Window};
use cutpoint::format::{self, ByteEstimate, Format};
use cutpoint::testing::writers::{self as rewrite, RewriteError};

/// A chat log: a system message, then `turns` turns of a user message, an assistant
/// message with 1..=3 parallel calls (answered in a rotated order), and a reply.
fn chat_log(turns: usize) -> String {
    let mut items = vec![r#"{"role":"system","content":"You are a weather bot."}"#.to_owned()];
    for t in 0..turns {
        items.push(format!(r#"{{"role":"user","content":"Question {t}"}}"#));
        let n = 1 + t % 3;
        let calls: Vec<String> = (0..n)
            .map(|k| {
                format!(
                    r#"{{"id":"call_{t}_{k}","type":"function","function":{{"name":"get_weather","arguments":"{{\"city\":\"C{t}{k}\"}}"}}}}"#
                )
            })
            .collect();
        items.push(format!(
            r#"{{"role":"assistant","content":null,"tool_calls":[{}]}}"#,
            calls.join(",")
        ));
        for k in (0..n).map(|k| (k + t) % n) {
            items.push(format!(
                r#"{{"role":"tool","tool_call_id":"call_{t}_{k}","content":"{}"}}"#,
                "x".repeat(40 * (k + 1))
            ));
        }
        items.push(format!(r#"{{"role":"assistant","content":"Answer {t}"}}"#));
    }
    format!("[\n{}\n]\n", items.join(",\n"))
}

#[test]
fn every_budget_yields_a_log_the_provider_accepts() {
    let text = chat_log(9);
    let t = format::read(&text, Format::OpenAiChat, &ByteEstimate).expect("reads");
    assert!(format::rules::check_messages(t.format, &t.messages).is_empty());
    let total = t.total_tokens();
    let (mut rendered, mut deferred) = (0, 0);
    for target in 0..=total + 1 {
        for lookback in [None, Some(30), Some(u64::MAX)] {
            for forward in [false, true] {
                for keep_head in [0, 1] {
                    let mut policy = Window::new(target);
                    if let Some(l) = lookback {
                        policy = policy.lookback(l);
                    }
                    if forward {
                        policy = policy.direction(Direction::Forward);
                    }
                    let done = match rewrite::compact(&t, &text, &policy, keep_head, "Summary.") {
                        Ok(Some(done)) => done,
                        Ok(None) => continue,
                        Err(RewriteError::Deferred(_) | RewriteError::Plan(_)) => {
                            deferred += 1;
                            continue;
                        }
                        Err(e) => panic!("target {target}: {e}"),
                    };
                    let case = format!(
                        "target {target} lookback {lookback:?} forward {forward} head {keep_head}"
                    );
                    check(&t, &text, &done, &case);
                    rendered += 1;
                }
            }
        }
    }
    assert!(
        rendered > 1000 && deferred > 0,
        "rendered {rendered}, deferred {deferred}"
    );
}

/// The compacted log re-reads as OpenAI Chat with no violation: the head verbatim,
/// one user summary message with every summarized call in its ledger, the retained
/// messages byte-identical.
fn check(t: &format::Transcript, text: &str, done: &rewrite::Rewritten, case: &str) {
    let out = &done.text;
    let back = format::read(out, Format::OpenAiChat, &ByteEstimate).expect("re-reads");
    let v = format::rules::check_messages(back.format, &back.messages);
    assert!(v.is_empty(), "{case}: {v:?}");
    let (head, cut) = (done.head, done.cut);
    assert!(head <= cut, "{case}");
    assert_eq!(
        back.messages.len(),
        head + 1 + t.messages.len() - cut,
        "{case}"
    );
    for i in 0..head {
        assert_eq!(
            &out[back.messages[i].spans[0].clone()],
            &text[t.messages[i].spans[0].clone()]
        );
    }
    let summary = &back.messages[head];
    assert_eq!(summary.role, format::Role::User, "{case}");
    for (i, m) in t.messages[cut..].iter().enumerate() {
        let copy = &back.messages[head + 1 + i];
        assert_eq!(
            &out[copy.spans[0].clone()],
            &text[m.spans[0].clone()],
            "{case}"
        );
    }
    for m in &t.messages[head..cut] {
        for (_, id, _) in m.calls() {
            assert!(
                out.contains(&format!("- {id} get_weather")),
                "{case}: {id} in the ledger"
            );
        }
    }
    assert_eq!(
        done.ledger.len(),
        t.messages[head..cut]
            .iter()
            .map(|m| m.calls().count())
            .sum::<usize>()
    );
}
