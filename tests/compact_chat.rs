//! Compacting an OpenAI Chat log with parallel calls at every token budget never
//! yields a log that breaks a rule of providers.md.

#![cfg(feature = "formats")]

use cutpoint::format::{self, ByteEstimate, Format, compact};

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
    assert!(format::validate(t.format, &t.messages).is_empty());
    let (tracker, owner) = t.tracker().expect("fits");
    let head = 1; // the system message stays pinned
    let (mut rendered, mut deferred) = (0, 0);
    for target in 0..=tracker.total_tokens() + 1 {
        for lookback in [0, 30, 200, u64::MAX] {
            let Ok(cut) = tracker.select_legal_cut(target, lookback) else {
                deferred += 1;
                continue;
            };
            let cut = t.message_at(&owner, cut);
            if cut < head {
                continue;
            }
            let out = compact::render(&t, &text, head, cut, "Summary.")
                .unwrap_or_else(|e| panic!("target {target}: legal cut {cut} refused: {e}"));
            let back = format::read(&out, Format::OpenAiChat, &ByteEstimate).expect("re-reads");
            let v = format::validate(back.format, &back.messages);
            assert!(
                v.is_empty(),
                "target {target} lookback {lookback} cut {cut}: {v:?}"
            );
            // The head, the summary (a user message), then the retained messages.
            assert_eq!(back.messages.len(), head + 1 + t.messages.len() - cut);
            assert_eq!(
                &out[back.messages[0].spans[0].clone()],
                &text[t.messages[0].spans[0].clone()]
            );
            assert!(back.messages[head].blocks.len() == 1);
            for (i, m) in t.messages[cut..].iter().enumerate() {
                let copy = &back.messages[head + 1 + i];
                assert_eq!(&out[copy.spans[0].clone()], &text[m.spans[0].clone()]);
            }
            // Every summarized call is in the ledger with its first result line.
            for m in &t.messages[head..cut] {
                for (_, id, _) in m.calls() {
                    assert!(
                        out.contains(&format!("- {id} get_weather")),
                        "{id} in the ledger"
                    );
                }
            }
            rendered += 1;
        }
    }
    assert!(
        rendered > 100 && deferred > 0,
        "rendered {rendered}, deferred {deferred}"
    );
}
