//! Golden tests per provider format: small hand-written logs (parallel calls included)
//! with their exact legal cuts (message indices), detection, violations and the
//! provider error text, and a compaction forced at every message boundary.

#![cfg(feature = "formats")]

use cutpoint::format::{self, ByteEstimate, Format, Rule, Transcript};
use cutpoint::testing::writers::{self as compact, RewriteError};

fn read(text: &str, format: Format) -> Transcript {
    format::read(text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{e}"))
}

/// The legal cuts as message indices, after checking that every legal record cut
/// falls where a message starts (never between two blocks of one message).
fn cuts(t: &Transcript) -> Vec<usize> {
    let (tracker, owner) = t.tracker().expect("records fit the tracker");
    for c in tracker.legal_cuts() {
        if c > 0 && c < owner.len() {
            assert_ne!(owner[c - 1], owner[c], "record cut {c} splits a message");
        }
    }
    t.legal_message_cuts().expect("records fit the tracker")
}

/// `(rule, call id, pending_at_end, message)` of each violation.
fn violations(t: &Transcript) -> Vec<(Rule, String, bool, usize)> {
    format::rules::check_messages(t.format, &t.messages)
        .into_iter()
        .map(|v| {
            (
                v.rule,
                v.call_id.map(|c| c.to_string()).unwrap_or_default(),
                v.pending_at_end,
                v.message,
            )
        })
        .collect()
}

/// Removes the message at `index` from a JSON array text given as one element per line.
fn without_line(text: &str, index: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut kept: Vec<String> = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        if i != index + 1 {
            kept.push((*l).to_owned());
        }
    }
    // Keep the JSON valid: no trailing comma before the closing bracket.
    let joined = kept.join("\n");
    joined.replace(",\n]", "\n]")
}

/// Keeps messages `..n` of a JSON array text given as one element per line.
fn first(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut body = lines[1..=n].join("\n");
    if body.ends_with(',') {
        body.pop();
    }
    format!("[\n{body}\n]")
}

const ANTHROPIC: &str = r#"[
{"role":"user","content":"What's the weather in Paris and London?"},
{"role":"assistant","content":[{"type":"thinking","thinking":"Two cities.","signature":"sig"},{"type":"text","text":"Checking both."},{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{"city":"Paris"}},{"type":"tool_use","id":"toolu_2","name":"get_weather","input":{"city":"London"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_2","content":"Rain, 12C\nwind 20 km/h"},{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"Sunny, 22C"}]}]},
{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"uv index"}},{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"text","text":"Paris is sunny, London rainy."}]},
{"role":"user","content":"Thanks"}
]"#;

#[test]
fn anthropic_parallel_calls_thinking_and_server_tools() {
    assert_eq!(
        format::detect(ANTHROPIC).ok(),
        Some(Format::AnthropicMessages)
    );
    let t = read(ANTHROPIC, Format::AnthropicMessages);
    assert_eq!(t.messages.len(), 5);
    assert_eq!(t.messages[1].calls().count(), 2);
    assert_eq!(cuts(&t), [0, 1, 3, 4, 5]);
    assert!(violations(&t).is_empty());
    // Wrapped in an object, the same.
    let wrapped = format!(r#"{{"model":"claude","max_tokens":1,"messages":{ANTHROPIC}}}"#);
    assert_eq!(
        cuts(&read(&wrapped, Format::AnthropicMessages)),
        [0, 1, 3, 4, 5]
    );

    // Results dropped while the conversation went on: rule 1, twice, not pending.
    let t = read(&without_line(ANTHROPIC, 2), Format::AnthropicMessages);
    assert_eq!(
        violations(&t),
        [
            (
                Rule::AnthropicToolUseWithoutResult,
                "toolu_1".into(),
                false,
                1
            ),
            (
                Rule::AnthropicToolUseWithoutResult,
                "toolu_2".into(),
                false,
                1
            ),
        ]
    );
    let v = format::rules::check_messages(t.format, &t.messages);
    assert!(v[0].text.starts_with("messages.1: `tool_use` ids were found without `tool_result` blocks immediately after: toolu_1."));
    // The log ends on the calls: pending at the end.
    let t = read(&first(ANTHROPIC, 2), Format::AnthropicMessages);
    assert!(violations(&t).iter().all(|v| v.2), "{:?}", violations(&t));
    assert_eq!(violations(&t).len(), 2);
    // The calls dropped instead: rule 2 for each result.
    let t = read(&without_line(ANTHROPIC, 1), Format::AnthropicMessages);
    let v = format::rules::check_messages(t.format, &t.messages);
    assert_eq!(v.len(), 2);
    assert_eq!(v[0].rule, Rule::AnthropicUnexpectedToolResult);
    assert!(v[0].text.starts_with(
        "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks: toolu_2."
    ));
}

#[test]
fn anthropic_system_message_cannot_open_messages() {
    let text = r#"[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]"#;
    let t = read(text, Format::AnthropicMessages);
    assert_eq!(
        violations(&t),
        [(
            Rule::AnthropicSystemMessagePlacement,
            String::new(),
            false,
            0
        )]
    );
}

#[test]
fn anthropic_text_before_a_result_breaks_rule_three() {
    let text = r#"[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"ls","input":{}}]},
{"role":"user","content":[{"type":"text","text":"here"},{"type":"tool_result","tool_use_id":"t1","content":"a"}]}]"#;
    let t = read(text, Format::AnthropicMessages);
    assert_eq!(
        violations(&t),
        [(Rule::AnthropicResultAfterText, "t1".into(), false, 1)]
    );
}

const CHAT: &str = r#"[
{"role":"system","content":"You are terse."},
{"role":"user","content":"Weather in Paris and London?"},
{"role":"assistant","content":null,"tool_calls":[{"id":"call_a","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}},{"id":"call_b","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"London\"}"}}]},
{"role":"tool","tool_call_id":"call_b","content":"Rain"},
{"role":"tool","tool_call_id":"call_a","content":"Sunny\nUV 5"},
{"role":"assistant","content":"Paris sunny, London rain."},
{"role":"user","content":"Thanks"}
]"#;

#[test]
fn openai_chat_parallel_calls() {
    assert_eq!(format::detect(CHAT).ok(), Some(Format::OpenAiChat));
    let t = read(CHAT, Format::OpenAiChat);
    assert_eq!(cuts(&t), [0, 1, 2, 5, 6, 7]);
    assert!(violations(&t).is_empty());

    // One answer missing while the log moved on.
    let t = read(&without_line(CHAT, 4), Format::OpenAiChat);
    assert_eq!(
        violations(&t),
        [(Rule::ChatCallWithoutResponse, "call_a".into(), false, 2)]
    );
    let v = &format::rules::check_messages(t.format, &t.messages)[0];
    assert_eq!(
        v.text,
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: call_a"
    );
    // The log stops after one answer: the other is pending at the end.
    let t = read(&first(CHAT, 4), Format::OpenAiChat);
    assert_eq!(
        violations(&t),
        [(Rule::ChatCallWithoutResponse, "call_a".into(), true, 2)]
    );
    // The assistant message dropped: both tool messages answer nothing.
    let t = read(&without_line(CHAT, 2), Format::OpenAiChat);
    assert_eq!(
        violations(&t),
        [
            (Rule::ChatToolWithoutCalls, "call_b".into(), false, 2),
            (Rule::ChatToolWithoutCalls, "call_a".into(), false, 3),
        ]
    );
    // A tool message answering a call of another message.
    let text = CHAT.replace(r#""tool_call_id":"call_b""#, r#""tool_call_id":"call_x""#);
    let t = read(&text, Format::OpenAiChat);
    assert_eq!(
        violations(&t),
        [
            (Rule::ChatCallWithoutResponse, "call_b".into(), false, 2),
            (Rule::ChatToolCallIdNotFound, "call_x".into(), false, 3),
        ]
    );
}

const RESPONSES: &str = r#"[
{"type":"message","role":"user","content":[{"type":"input_text","text":"List and read."}]},
{"type":"reasoning","id":"rs_1","summary":[]},
{"type":"function_call","id":"fc_1","call_id":"call_1","name":"ls","arguments":"{}"},
{"type":"function_call","id":"fc_2","call_id":"call_2","name":"cat","arguments":"{\"f\":\"a\"}"},
{"type":"function_call_output","call_id":"call_2","output":"contents of a"},
{"type":"function_call_output","call_id":"call_1","output":"a\nb"},
{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search","query":"x"}},
{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Done."}]}
]"#;

#[test]
fn openai_responses_reasoning_binds_its_call_and_web_search_needs_no_output() {
    assert_eq!(
        format::detect(RESPONSES).ok(),
        Some(Format::OpenAiResponses)
    );
    let t = read(RESPONSES, Format::OpenAiResponses);
    assert_eq!(cuts(&t), [0, 1, 6, 7, 8]);
    assert!(violations(&t).is_empty());
    let t = read(&without_line(RESPONSES, 5), Format::OpenAiResponses);
    assert_eq!(
        violations(&t),
        [(Rule::ResponsesNoOutput, "call_1".into(), false, 2)]
    );
    let t = read(&first(RESPONSES, 5), Format::OpenAiResponses);
    assert_eq!(
        violations(&t),
        [(Rule::ResponsesNoOutput, "call_1".into(), true, 2)]
    );
    let t = read(&without_line(RESPONSES, 3), Format::OpenAiResponses);
    let v = format::rules::check_messages(t.format, &t.messages);
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].rule, Rule::ResponsesNoCall);
    assert_eq!(
        v[0].text,
        "No tool call found for function call output with call_id call_2."
    );
    // Continuing a stored conversation: outputs may answer calls made before.
    let text = r#"{"previous_response_id":"resp_1","input":[{"type":"function_call_output","call_id":"call_0","output":"x"}]}"#;
    let t = read(text, Format::OpenAiResponses);
    assert!(format::check_rules(&t).is_empty());
    assert_eq!(
        violations(&t)[0].0,
        Rule::ResponsesNoCall,
        "without the chain it would be"
    );
    // Reasoning as the very last item: its following item is still to come.
    let t = read(&first(RESPONSES, 2), Format::OpenAiResponses);
    assert_eq!(
        violations(&t),
        [(
            Rule::ResponsesReasoningWithoutFollower,
            String::new(),
            true,
            1
        )]
    );
}

const GEMINI: &str = r#"{"contents":[
{"role":"user","parts":[{"text":"Weather in Paris and London?"}]},
{"role":"model","parts":[{"functionCall":{"name":"get_weather","args":{"city":"Paris"}}},{"functionCall":{"name":"get_weather","args":{"city":"London"}}}]},
{"role":"user","parts":[{"functionResponse":{"name":"get_weather","response":{"result":"Sunny"}}},{"functionResponse":{"name":"get_weather","response":{"result":"Rain"}}}]},
{"role":"model","parts":[{"text":"Sunny and rainy."}]}
]}"#;

#[test]
fn gemini_parallel_calls_without_ids_pair_by_order() {
    assert_eq!(format::detect(GEMINI).ok(), Some(Format::Gemini));
    let t = read(GEMINI, Format::Gemini);
    let ids: Vec<String> = t.messages[2]
        .results()
        .map(|(_, id)| id.to_string())
        .collect();
    assert_eq!(ids, ["get_weather#1.0", "get_weather#1.1"]);
    assert_eq!(cuts(&t), [0, 1, 3, 4]);
    assert!(violations(&t).is_empty());
    // One response part missing.
    let text = GEMINI.replace(
        r#",{"functionResponse":{"name":"get_weather","response":{"result":"Rain"}}}"#,
        "",
    );
    let t = read(&text, Format::Gemini);
    assert_eq!(
        violations(&t),
        [(
            Rule::GeminiPartCountMismatch,
            "get_weather#1.1".into(),
            false,
            1
        )]
    );
    // The log starts with the call turn.
    let text = GEMINI.replace(
        r#"{"role":"user","parts":[{"text":"Weather in Paris and London?"}]},"#,
        "",
    );
    let t = read(&text, Format::Gemini);
    assert_eq!(violations(&t)[0].0, Rule::GeminiCallTurnFirst);
}

#[test]
fn plain_text_logs_are_not_guessed() {
    let err = format::detect(r#"[{"role":"user","content":"hi"}]"#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("cannot tell the format") && err.contains("openai-chat, openai-responses"),
        "{err}"
    );
}

/// For each format: a compaction forced at every message boundary either is refused
/// (an illegal boundary) or yields a log of the same format with no violation, whose
/// retained messages are byte-identical, and whose summary carries the ledger.
#[test]
fn compaction_at_every_boundary_is_legal_or_refused() {
    for (text, f) in [
        (ANTHROPIC, Format::AnthropicMessages),
        (CHAT, Format::OpenAiChat),
        (RESPONSES, Format::OpenAiResponses),
        (GEMINI, Format::Gemini),
    ] {
        let t = read(text, f);
        let legal = cuts(&t);
        for cut in 0..=t.messages.len() {
            match compact::render(&t, text, 0, cut, "Earlier: weather questions.") {
                Err(e) => {
                    assert!(
                        !legal.contains(&cut),
                        "{f}: {cut} is legal but refused: {e}"
                    );
                }
                Ok(out) => {
                    assert!(legal.contains(&cut), "{f}: {cut} is illegal but rendered");
                    if cut == 0 {
                        // Nothing to summarize: no summary of nothing is written.
                        assert_eq!(out, text, "{f}");
                        continue;
                    }
                    let back = read(&out, f);
                    assert!(
                        violations(&back).is_empty(),
                        "{f} cut {cut}: {:?}\n{out}",
                        violations(&back)
                    );
                    for m in &t.messages[cut..] {
                        assert!(out.contains(&text[m.spans[0].clone()]), "{f} cut {cut}");
                    }
                    let ledger = compact::ledger(&t, 0..cut).expect("a legal range");
                    let summary = cutpoint::compact::SummaryParts::new(
                        "Earlier: weather questions.".into(),
                        ledger,
                        Vec::new(),
                    )
                    .text();
                    assert!(
                        serde_json::to_string(&summary)
                            .is_ok_and(|s| out.contains(&s[1..s.len() - 1]))
                    );
                }
            }
        }
    }
    let t = read(CHAT, Format::OpenAiChat);
    let short = &CHAT[..CHAT.len() / 2];
    assert!(matches!(
        compact::render(&t, short, 0, 2, "s"),
        Err(RewriteError::InputMismatch { .. })
    ));
    let ledger = compact::ledger(&t, 0..5).expect("a legal range");
    let summary = cutpoint::compact::summary_text("S.", &ledger);
    assert_eq!(
        summary,
        "S.\n\nTool calls summarized (call id, tool, arguments, first line of result):\n- call_a get_weather {\"city\":\"Paris\"} => Sunny\n- call_b get_weather {\"city\":\"London\"} => Rain"
    );
}

const CLAUDE_CODE: &str = r#"{"type":"queue-operation","operation":"dequeue","sessionId":"s"}
{"type":"user","uuid":"u1","sessionId":"s","message":{"role":"user","content":"Read both files"}}
{"type":"assistant","uuid":"a1","sessionId":"s","message":{"id":"msg_1","role":"assistant","content":[{"type":"thinking","thinking":"two reads","signature":"x"}]}}
{"type":"assistant","uuid":"a2","sessionId":"s","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_a","name":"Read","input":{"file_path":"a"}}]}}
{"type":"progress","uuid":"p1","sessionId":"s","data":{}}
{"type":"assistant","uuid":"sa1","isSidechain":true,"sessionId":"s","message":{"id":"msg_s","role":"assistant","content":[{"type":"tool_use","id":"toolu_side","name":"Grep","input":{}}]}}
{"type":"assistant","uuid":"a3","sessionId":"s","message":{"id":"msg_1","role":"assistant","content":[{"type":"tool_use","id":"toolu_b","name":"Read","input":{"file_path":"b"}}]}}
{"type":"user","uuid":"r1","sessionId":"s","sourceToolAssistantUUID":"a2","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_a","content":"A"}]}}
{"type":"user","uuid":"r2","sessionId":"s","sourceToolAssistantUUID":"a3","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_b","content":"B"}]}}
{"type":"assistant","uuid":"a4","sessionId":"s","message":{"id":"msg_2","role":"assistant","content":[{"type":"text","text":"Both read."}]}}
{"type":"system","subtype":"compact_boundary","uuid":"c1","sessionId":"s","compactMetadata":{"trigger":"auto","preTokens":100}}
{"type":"user","uuid":"u2","sessionId":"s","isCompactSummary":true,"message":{"role":"user","content":"Summary of the above"}}
{"type":"assistant","uuid":"a5","sessionId":"s","message":{"id":"msg_3","role":"assistant","content":[{"type":"tool_use","id":"toolu_c","name":"Bash","input":{"command":"ls"}}]}}
{"type":"user","uuid":"r3","sessionId":"s","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_c","content":"x\ny"}]}}
{"type":"assistant","uuid":"a6","sessionId":"s","message":{"id":"msg_4","role":"assistant","content":[{"type":"text","text":"Done."}]}}
"#;

#[test]
fn claude_code_records_merge_into_api_messages_and_a_boundary_restarts_history() {
    assert_eq!(format::detect(CLAUDE_CODE).ok(), Some(Format::ClaudeCode));
    let t = read(CLAUDE_CODE, Format::ClaudeCode);
    let shape: Vec<(usize, usize, usize, bool)> = t
        .messages
        .iter()
        .map(|m| {
            (
                m.line,
                m.calls().count(),
                m.results().count(),
                m.starts_history,
            )
        })
        .collect();
    assert_eq!(
        shape,
        [
            (2, 0, 0, false),
            (3, 2, 0, false), // thinking + two tool_use of msg_1; progress, sidechain skipped
            (8, 0, 2, false), // two tool_result records, one user message
            (10, 0, 0, false),
            (12, 0, 0, true), // the summary after the compact_boundary
            (13, 1, 0, false),
            (14, 0, 1, false),
            (15, 0, 0, false),
        ]
    );
    assert_eq!(t.messages[1].spans.len(), 3);
    assert_eq!(t.live_from(), 4);
    // Cuts only in the live history: before the summary, the call, after the pair.
    assert_eq!(cuts(&t), [4, 5, 7, 8]);
    assert!(violations(&t).is_empty());
    // Drop toolu_b's result: the call is left unanswered while the log moved on, in
    // a history the compact_boundary replaced: reported, without the provider's error
    // (the provider no longer receives that history), on the line of its record.
    let broken: String = CLAUDE_CODE
        .lines()
        .filter(|l| !l.contains(r#""uuid":"r2""#))
        .map(|l| format!("{l}\n"))
        .collect();
    let t = read(&broken, Format::ClaudeCode);
    assert_eq!(
        violations(&t),
        [(Rule::CallOpenAtCompaction, "toolu_b".into(), false, 1)]
    );
    let v = &format::rules::check_messages(t.format, &t.messages)[0];
    assert_eq!(
        v.line, 7,
        "the line of toolu_b's record, not of the message's first"
    );
    assert!(
        v.text.contains("the provider no longer receives it"),
        "{}",
        v.text
    );
    assert!(!v.text.contains("tool_use` ids were found"), "{}", v.text);
    // The same defect after the boundary is the provider's error.
    let broken = CLAUDE_CODE.replace(
        "{\"type\":\"user\",\"uuid\":\"r3\"",
        "{\"type\":\"user\",\"uuid\":\"r3x\",\"message\":{\"role\":\"user\",\"content\":\"no result\"}}\n{\"type\":\"ignored\",\"uuid\":\"r3\"",
    );
    let t = read(&broken, Format::ClaudeCode);
    assert_eq!(
        violations(&t),
        [(
            Rule::AnthropicToolUseWithoutResult,
            "toolu_c".into(),
            false,
            5
        )]
    );
}

const CODEX: &str = r#"{"timestamp":"t0","type":"session_meta","payload":{"id":"s"}}
{"timestamp":"t1","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"old"}]}}
{"timestamp":"t2","type":"response_item","payload":{"type":"function_call","name":"exec","arguments":"{}","call_id":"call_old"}}
{"timestamp":"t3","type":"compacted","payload":{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"old"}]},{"type":"compaction","encrypted_content":"e"}]}}
{"timestamp":"t4","type":"event_msg","payload":{"type":"context_compacted"}}
{"timestamp":"t5","type":"response_item","payload":{"type":"reasoning","summary":[],"encrypted_content":"r"}}
{"timestamp":"t6","type":"response_item","payload":{"type":"function_call","name":"exec","arguments":"{\"cmd\":\"ls\"}","call_id":"call_1"}}
{"timestamp":"t7","type":"response_item","payload":{"type":"custom_tool_call","name":"apply_patch","input":"*** Begin Patch","call_id":"call_2"}}
{"timestamp":"t8","type":"response_item","payload":{"type":"custom_tool_call_output","call_id":"call_2","output":"ok"}}
{"timestamp":"t9","type":"response_item","payload":{"type":"function_call_output","call_id":"call_1","output":"a\nb"}}
{"timestamp":"t10","type":"response_item","payload":{"type":"web_search_call","status":"completed","action":{"type":"search","query":"q"}}}
{"timestamp":"t11","type":"response_item","payload":{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}}
"#;

/// A `compacted` line's replacement items carry their server `id` as a
/// `response_item` line's item does: each such block is signed (before, the
/// replacement history's were never marked).
#[test]
fn codex_compacted_replacement_items_with_a_server_id_are_signed() {
    let text = concat!(
        r#"{"timestamp":"t0","type":"session_meta","payload":{"id":"s"}}"#,
        "\n",
        r#"{"timestamp":"t1","type":"compacted","payload":{"message":"","replacement_history":[{"type":"message","role":"user","content":[{"type":"input_text","text":"old"}]},{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"r"},{"type":"message","id":"msg_2","role":"assistant","content":[{"type":"output_text","text":"ok"}]}]}}"#,
        "\n",
        r#"{"timestamp":"t2","type":"response_item","payload":{"type":"message","id":"msg_3","role":"assistant","content":[{"type":"output_text","text":"hi"}]}}"#,
        "\n",
    );
    let t = read(text, Format::CodexRollout);
    assert_eq!(t.messages.len(), 2);
    assert_eq!(t.messages[0].blocks.len(), 3);
    assert_eq!(t.messages[0].signed, [1, 2]);
    assert_eq!(t.messages[1].signed, [0]);
}

#[test]
fn codex_compacted_line_replaces_history_and_web_search_needs_no_output() {
    assert_eq!(format::detect(CODEX).ok(), Some(Format::CodexRollout));
    let t = read(CODEX, Format::CodexRollout);
    assert_eq!(t.messages.len(), 10);
    assert_eq!(
        t.live_from(),
        2,
        "the compacted line opens the live history"
    );
    assert_eq!(t.messages[2].line, 4);
    // The reasoning item stays with its call; the two calls are open until line 10.
    assert_eq!(cuts(&t), [2, 3, 8, 9, 10]);
    // call_old was in flight when the history was replaced: reported, not pending,
    // and not as the provider's error (the provider no longer receives it).
    assert_eq!(
        violations(&t),
        [(Rule::CallOpenAtCompaction, "call_old".into(), false, 1)]
    );
    let v = &format::rules::check_messages(t.format, &t.messages)[0];
    assert!(v.text.contains("still in flight"), "{}", v.text);
    assert!(
        v.text.contains("new history starts at line 4"),
        "{}",
        v.text
    );
    // Messages 3..8: the reasoning item, both calls and both outputs (4 is bound to
    // the reasoning before it, so not a legal end).
    assert!(compact::ledger(&t, 4..8).is_err());
    let ledger = compact::ledger(&t, 3..8).expect("a legal range");
    let lines: Vec<(String, String, Option<String>)> = ledger
        .into_iter()
        .map(|e| {
            (
                e.call_id.to_string(),
                e.arguments.unwrap_or_default(),
                e.first_line,
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            ("call_1".into(), r#"{"cmd":"ls"}"#.into(), Some("a".into())),
            ("call_2".into(), "*** Begin Patch".into(), Some("ok".into())),
        ]
    );
}
