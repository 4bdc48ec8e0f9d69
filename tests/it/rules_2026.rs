//! The providers' rules of late 2026 (issue 21), by fault injection on logs written from
//! the documented shapes: each rule is caught when broken and each documented repair
//! is accepted. The shapes and sources are in `docs/providers.md`; the prefix-binding
//! model in `docs/reasoning.md`.

use cutpoint::CallId;
use cutpoint::format::{
    self, Block, ByteEstimate, Control, Format, Rule, Transcript, check_against, check_rules,
    invalidated_thinking,
};
use cutpoint::stream::decode::{Content, Detail, StreamFormat, decode_all};

fn read(text: &str, format: Format) -> Transcript {
    format::read(text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn rules(t: &Transcript) -> Vec<Rule> {
    check_rules(t).into_iter().map(|v| v.rule).collect()
}

fn against(before: &str, after: &str, format: Format) -> Vec<Rule> {
    check_against(&read(before, format), &read(after, format))
        .into_iter()
        .map(|v| v.rule)
        .collect()
}

fn has(rules: &[Rule], rule: Rule) -> bool {
    rules.contains(&rule)
}

/// A JSON array of the elements.
fn doc(elements: &[&str]) -> String {
    format!("[{}]", elements.join(",\n"))
}

// ---- A. OpenAI Responses items and pairs ---------------------------------------------

const USER: &str = r#"{"type":"message","role":"user","content":"fix the bug"}"#;
const PATCH: &str = r#"{"type":"apply_patch_call","call_id":"call_p1","status":"completed","operation":{"type":"update_file","path":"a.rs","diff":"@@ -1 +1 @@"}}"#;
const PATCH_OUT: &str = r#"{"type":"apply_patch_call_output","call_id":"call_p1","status":"completed","output":"applied"}"#;
const APPROVAL: &str = r#"{"type":"mcp_approval_request","id":"mcpr_1","server_label":"gh","name":"create_issue","arguments":"{\"title\":\"x\"}"}"#;
const APPROVED: &str =
    r#"{"type":"mcp_approval_response","approval_request_id":"mcpr_1","approve":true}"#;
const SEARCH: &str = r#"{"type":"tool_search_call","call_id":"call_s1","execution":"client","arguments":{"query":"weather"},"status":"completed"}"#;
const SEARCH_OUT: &str = r#"{"type":"tool_search_output","call_id":"call_s1","execution":"client","tools":[{"type":"function","name":"get_weather","parameters":{}}]}"#;
const DONE: &str =
    r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"done"}]}"#;

#[test]
fn responses_new_pairs_are_read_as_calls_and_results() {
    let text = doc(&[
        USER, PATCH, PATCH_OUT, APPROVAL, APPROVED, SEARCH, SEARCH_OUT, DONE,
    ]);
    let t = read(&text, Format::OpenAiResponses);
    let call = |i: usize| match &t.messages[i].blocks[0].0 {
        Block::Call { id, .. } => id.clone(),
        b => panic!("message {i}: {b:?}"),
    };
    let result = |i: usize| match &t.messages[i].blocks[0].0 {
        Block::Result { id, .. } => id.clone(),
        b => panic!("message {i}: {b:?}"),
    };
    assert_eq!(call(1), CallId::from("call_p1"));
    assert_eq!(result(2), CallId::from("call_p1"));
    assert_eq!(call(3), CallId::from("mcpr_1"));
    assert_eq!(result(4), CallId::from("mcpr_1"));
    assert_eq!(call(5), CallId::from("call_s1"));
    assert_eq!(result(6), CallId::from("call_s1"));
    assert!(rules(&t).is_empty(), "{:?}", check_rules(&t));
    // No legal cut splits a pair: each one falls outside every call..result span.
    let cuts = t.legal_message_cuts().expect("a tracker");
    for (c, r) in [(1, 2), (3, 4), (5, 6)] {
        assert!(!cuts.contains(&r), "cut {r} splits {c}..{r}: {cuts:?}");
    }
    // The search output loads its tools: the tool manifest.
    assert_eq!(t.loaded_tools(), ["get_weather"]);
}

#[test]
fn responses_new_pairs_split_are_caught() {
    for (call, output) in [
        (PATCH, PATCH_OUT),
        (APPROVAL, APPROVED),
        (SEARCH, SEARCH_OUT),
    ] {
        let no_output = read(&doc(&[USER, call, DONE]), Format::OpenAiResponses);
        assert!(has(&rules(&no_output), Rule::ResponsesNoOutput), "{call}");
        let no_call = read(&doc(&[USER, output, DONE]), Format::OpenAiResponses);
        assert!(has(&rules(&no_call), Rule::ResponsesNoCall), "{output}");
        // The repair: both sides kept together.
        let whole = read(&doc(&[USER, call, output, DONE]), Format::OpenAiResponses);
        assert!(rules(&whole).is_empty(), "{:?}", check_rules(&whole));
    }
    // A server-run tool search without a call_id pairs with nothing: plain items.
    let server = r#"{"type":"tool_search_call","id":"ts_1","execution":"server","arguments":{},"status":"completed"}"#;
    let t = read(&doc(&[USER, server, DONE]), Format::OpenAiResponses);
    assert_eq!(t.messages[1].blocks[0].0, Block::Text);
    assert!(rules(&t).is_empty());
    // A response names the request it answers.
    let bad = r#"{"type":"mcp_approval_response","approve":true}"#;
    assert!(format::read(&doc(&[USER, bad]), Format::OpenAiResponses, &ByteEstimate).is_err());
}

const TRIGGER: &str = r#"{"type":"compaction_trigger"}"#;

#[test]
fn compaction_trigger_is_the_last_input_item_without_an_id() {
    let t = read(&doc(&[USER, DONE, TRIGGER]), Format::OpenAiResponses);
    assert_eq!(
        t.messages[2].blocks[0].0,
        Block::Control(Control::CompactionTrigger)
    );
    assert!(t.messages[2].is_pinned(0));
    assert!(rules(&t).is_empty(), "{:?}", check_rules(&t));
    for faulted in [
        doc(&[USER, TRIGGER, DONE]),
        doc(&[USER, DONE, r#"{"type":"compaction_trigger","id":"ct_1"}"#]),
    ] {
        let t = read(&faulted, Format::OpenAiResponses);
        assert_eq!(
            rules(&t),
            [Rule::ResponsesCompactionTriggerMisplaced],
            "{faulted}"
        );
    }
    // Never persisted: a rollout that holds one breaks the rule.
    let rollout = [
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"message","role":"user","content":[{"type":"input_text","text":"hi"}]}}"#,
        r#"{"timestamp":"t","type":"response_item","payload":{"type":"compaction_trigger"}}"#,
    ]
    .join("\n");
    let t = read(&rollout, Format::CodexRollout);
    assert!(has(&rules(&t), Rule::ResponsesCompactionTriggerMisplaced));
}

#[test]
fn the_latest_configuration_update_survives_a_compaction() {
    let old = r#"{"type":"configuration_update","id":"cu_1","reasoning":{"effort":"low"}}"#;
    let latest = r#"{"type":"configuration_update","id":"cu_2","reasoning":{"effort":"high"}}"#;
    let before = doc(&[USER, old, DONE, latest, USER, DONE]);
    let t = read(&before, Format::OpenAiResponses);
    assert!(t.messages[3].is_pinned(0));
    assert!(against(&before, &before, Format::OpenAiResponses).is_empty());
    // The latest dropped: caught.
    let lost = doc(&[USER, old, DONE, USER, DONE]);
    assert_eq!(
        against(&before, &lost, Format::OpenAiResponses),
        [Rule::ControlItemLost]
    );
    // The repair: an older one may go, the latest is carried forward.
    let kept = doc(&[latest, USER, DONE]);
    assert!(
        against(&before, &kept, Format::OpenAiResponses).is_empty(),
        "{:?}",
        check_against(
            &read(&before, Format::OpenAiResponses),
            &read(&kept, Format::OpenAiResponses)
        )
    );
}

fn sse(events: &[&str]) -> Vec<u8> {
    events
        .iter()
        .map(|e| format!("data: {e}\n\n"))
        .collect::<String>()
        .into_bytes()
}

#[test]
fn the_live_responses_decoder_pairs_the_new_items_as_the_reader_does() {
    let added = |item: &str| {
        format!(r#"{{"type":"response.output_item.added","output_index":0,"item":{item}}}"#)
    };
    let done = |item: &str| {
        format!(r#"{{"type":"response.output_item.done","output_index":0,"item":{item}}}"#)
    };
    let server_search = r#"{"type":"tool_search_call","id":"ts_2","call_id":"call_s2","execution":"server","arguments":{"query":"db"},"status":"completed"}"#;
    let server_out = r#"{"type":"tool_search_output","id":"tso_2","call_id":"call_s2","execution":"server","tools":[{"type":"function","name":"query_db"}]}"#;
    let mut events = vec![r#"{"type":"response.created","response":{}}"#.to_owned()];
    for item in [PATCH, APPROVAL, SEARCH, server_search, server_out] {
        events.push(added(item));
        events.push(done(item));
    }
    events.push(r#"{"type":"response.completed","response":{"usage":{"input_tokens":10,"output_tokens":5}}}"#.to_owned());
    let refs: Vec<&str> = events.iter().map(String::as_str).collect();
    let (items, err) = decode_all(StreamFormat::OpenAiResponsesStream, &sse(&refs));
    assert!(err.is_none(), "{err:?}");
    let closed: Vec<Content> = items
        .into_iter()
        .filter_map(|d| match d.detail {
            Detail::Closed(c) => Some(c),
            _ => None,
        })
        .collect();
    let calls: Vec<(String, bool)> = closed
        .iter()
        .filter_map(|c| match c {
            Content::Call { id, server, .. } => Some((id.to_string(), *server)),
            _ => None,
        })
        .collect();
    assert_eq!(
        calls,
        [
            ("call_p1".to_owned(), false),
            ("mcpr_1".to_owned(), false),
            ("call_s1".to_owned(), false),
            ("call_s2".to_owned(), true),
        ]
    );
    assert!(
        closed
            .iter()
            .any(|c| matches!(c, Content::ServerResult { id, .. } if id.as_str() == "call_s2"))
    );
    // The patch's operation is its arguments, as the file reader keeps them.
    assert!(closed.iter().any(
        |c| matches!(c, Content::Call { id, arguments, .. } if id.as_str() == "call_p1" && arguments.contains("update_file"))
    ));
}

// ---- B. Anthropic mid-conversation system messages and control items -----------------

const A_USER: &str = r#"{"role":"user","content":"hi"}"#;
const A_ASSISTANT: &str = r#"{"role":"assistant","content":[{"type":"text","text":"hello"}]}"#;
const A_SYSTEM: &str = r#"{"role":"system","content":"Answer in French from now on."}"#;
const A_CALL: &str =
    r#"{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"ls","input":{}}]}"#;
const A_RESULT: &str = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.rs"}]}"#;
const A_SERVER: &str = r#"{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{"query":"x"}}]}"#;

fn anthropic(elements: &[&str]) -> Vec<Rule> {
    rules(&read(&doc(elements), Format::AnthropicMessages))
}

#[test]
fn system_messages_placed_by_the_rules_are_accepted() {
    for ok in [
        vec![A_USER, A_SYSTEM, A_ASSISTANT],
        vec![A_USER, A_ASSISTANT, A_USER, A_SYSTEM],
        vec![A_USER, A_CALL, A_RESULT, A_SYSTEM, A_ASSISTANT],
        vec![A_USER, A_SERVER, A_SYSTEM, A_ASSISTANT],
    ] {
        assert!(anthropic(&ok).is_empty(), "{ok:?}: {:?}", anthropic(&ok));
    }
}

#[test]
fn each_misplaced_system_message_is_caught() {
    for bad in [
        vec![A_SYSTEM, A_USER, A_ASSISTANT],                   // first
        vec![A_USER, A_SYSTEM, A_SYSTEM, A_ASSISTANT],         // two in a row
        vec![A_USER, A_ASSISTANT, A_SYSTEM, A_USER],           // after a plain assistant turn
        vec![A_USER, A_SYSTEM, A_USER, A_ASSISTANT],           // before a user turn
        vec![A_USER, A_CALL, A_SYSTEM, A_RESULT, A_ASSISTANT], // between tool_use and result
    ] {
        let found = anthropic(&bad);
        assert!(
            has(&found, Rule::AnthropicSystemMessagePlacement),
            "{bad:?}: {found:?}"
        );
    }
}

const ADD_TOOL: &str = r#"{"role":"system","content":[{"type":"text","text":"You can now file issues."},{"type":"tool_addition","tool_reference":{"type":"tool_reference","tool_name":"create_issue"}}]}"#;

#[test]
fn control_items_are_pinned_and_must_survive() {
    let before = doc(&[A_USER, ADD_TOOL, A_ASSISTANT, A_USER, A_ASSISTANT]);
    let t = read(&before, Format::AnthropicMessages);
    assert!(check_rules(&t).is_empty(), "{:?}", check_rules(&t));
    assert_eq!(t.messages[1].blocks[0].0, Block::Text);
    assert_eq!(
        t.messages[1].blocks[1].0,
        Block::Control(Control::ToolAddition)
    );
    assert!(t.messages[1].is_pinned(1) && !t.messages[1].is_pinned(0));
    assert_eq!(t.loaded_tools(), ["create_issue"]);
    // Summarized away: the control item and the tool it added are lost.
    let after = doc(&[A_USER, A_ASSISTANT]);
    let found = against(&before, &after, Format::AnthropicMessages);
    assert!(has(&found, Rule::ControlItemLost), "{found:?}");
    assert!(has(&found, Rule::ToolUnloaded), "{found:?}");
    // The repair: the control message kept where it was.
    let kept = doc(&[A_USER, ADD_TOOL, A_ASSISTANT]);
    assert!(against(&before, &kept, Format::AnthropicMessages).is_empty());
    // A removal unloads the tool.
    let remove = r#"{"role":"system","content":[{"type":"tool_removal","tool_reference":{"type":"tool_reference","tool_name":"create_issue"}}]}"#;
    let t = read(
        &doc(&[A_USER, ADD_TOOL, A_ASSISTANT, A_USER, remove, A_ASSISTANT]),
        Format::AnthropicMessages,
    );
    assert!(t.loaded_tools().is_empty());
}

// ---- C. The prefix-binding model --------------------------------------------------------

/// An assistant turn with a signed thinking block and a call, then its result.
fn turn(n: usize) -> [String; 2] {
    [
        format!(
            r#"{{"role":"assistant","content":[{{"type":"thinking","thinking":"plan {n}","signature":"sig{n}"}},{{"type":"tool_use","id":"toolu_{n}","name":"read","input":{{"n":{n}}}}}]}}"#
        ),
        format!(
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_{n}","content":"result {n}"}}]}}"#
        ),
    ]
}

fn conversation(system: &str, turns: &[[String; 2]]) -> String {
    let mut messages = vec![r#"{"role":"user","content":"start"}"#.to_owned()];
    for t in turns {
        messages.extend(t.iter().cloned());
    }
    format!(
        r#"{{"system":"{system}","messages":[{}]}}"#,
        messages.join(",\n")
    )
}

/// The (message, block) of each invalidated block.
fn invalid(before: &str, after: &str, format: Format) -> Vec<(usize, usize)> {
    invalidated_thinking(&read(before, format), &read(after, format))
        .into_iter()
        .map(|v| (v.message, v.block))
        .collect()
}

fn strip_thinking(turn: &[String; 2]) -> [String; 2] {
    let a = turn[0].clone();
    let start = a.find(r#"{"type":"thinking""#).expect("a thinking block");
    let end = a[start..].find("},").expect("its end") + start + 2;
    [format!("{}{}", &a[..start], &a[end..]), turn[1].clone()]
}

#[test]
fn an_edit_invalidates_every_thinking_block_after_it() {
    let turns: Vec<[String; 2]> = (1..=3).map(turn).collect();
    let before = conversation("Be careful.", &turns);
    let a = Format::AnthropicMessages;
    // Append-only: nothing invalidated.
    let mut more = turns.clone();
    more.push(turn(4));
    assert!(invalid(&before, &conversation("Be careful.", &more), a).is_empty());
    assert!(invalid(&before, &before, a).is_empty());
    // The first turn's result cleared: the thinking of turns 2 and 3 (messages 3, 5).
    let mut cleared = turns.clone();
    cleared[0][1] = cleared[0][1].replace("result 1", "[cleared]");
    let after = conversation("Be careful.", &cleared);
    assert_eq!(invalid(&before, &after, a), [(3, 0), (5, 0)]);
    let found = check_against(&read(&before, a), &read(&after, a));
    let v = found
        .iter()
        .find(|v| v.rule == Rule::ThinkingPrefixChanged)
        .expect("the rule");
    assert!(
        v.text.starts_with("messages.3.content.0: Invalid `signature` in `thinking` block. The block is bound to a different conversation."),
        "{}",
        v.text
    );
    // `system` changed: every thinking block.
    let after = conversation("Be brief.", &turns);
    assert_eq!(invalid(&before, &after, a), [(1, 0), (3, 0), (5, 0)]);
    // A thinking block edited: it and the ones after it.
    let mut edited = turns.clone();
    edited[1][0] = edited[1][0].replace("plan 2", "plan two");
    assert_eq!(
        invalid(&before, &conversation("Be careful.", &edited), a),
        [(3, 0), (5, 0)]
    );
}

#[test]
fn thinking_removed_oldest_first_invalidates_nothing() {
    let turns: Vec<[String; 2]> = (1..=3).map(turn).collect();
    let before = conversation("Be careful.", &turns);
    let a = Format::AnthropicMessages;
    // The documented repair: thinking stripped oldest-first (turn 1, then 1 and 2).
    let one = vec![
        strip_thinking(&turns[0]),
        turns[1].clone(),
        turns[2].clone(),
    ];
    assert!(invalid(&before, &conversation("Be careful.", &one), a).is_empty());
    let two = vec![
        strip_thinking(&turns[0]),
        strip_thinking(&turns[1]),
        turns[2].clone(),
    ];
    assert!(invalid(&before, &conversation("Be careful.", &two), a).is_empty());
    // Stripped from every kept turn: nothing left to invalidate.
    let all: Vec<[String; 2]> = turns.iter().map(strip_thinking).collect();
    assert!(invalid(&before, &conversation("Be careful.", &all), a).is_empty());
    // Simple compaction: one user message with the summary and the next instruction.
    let simple = r#"{"system":"Be careful.","messages":[{"role":"user","content":"Summary: read 1..3. Next: write the report."}]}"#;
    assert!(invalid(&before, simple, a).is_empty());
    // Not oldest-first: turn 2's thinking removed, turn 1's kept: turn 3 invalid.
    let gap = vec![
        turns[0].clone(),
        strip_thinking(&turns[1]),
        turns[2].clone(),
    ];
    assert_eq!(
        invalid(&before, &conversation("Be careful.", &gap), a),
        [(5, 0)]
    );
}

/// Thinking blocks of the same bytes (a model that thinks the same thought twice): the
/// oldest copies are the ones an oldest-first removal takes, so stripping them
/// invalidates nothing, and removing a later copy while an older one stays is a gap.
/// (The first model matched by bytes alone: a copy left later made the run empty and
/// every kept block invalid.)
#[test]
fn thinking_of_the_same_bytes_removed_oldest_first_invalidates_nothing() {
    let same = |n: usize| {
        let [a, r] = turn(n);
        [
            a.replace(&format!("plan {n}"), "plan")
                .replace(&format!("sig{n}"), "sig"),
            r,
        ]
    };
    let turns: Vec<[String; 2]> = (1..=3).map(same).collect();
    let before = conversation("Be careful.", &turns);
    let a = Format::AnthropicMessages;
    let two = vec![
        strip_thinking(&turns[0]),
        strip_thinking(&turns[1]),
        turns[2].clone(),
    ];
    assert!(invalid(&before, &conversation("Be careful.", &two), a).is_empty());
    let gap = vec![
        turns[0].clone(),
        strip_thinking(&turns[1]),
        turns[2].clone(),
    ];
    assert_eq!(
        invalid(&before, &conversation("Be careful.", &gap), a),
        [(5, 0)]
    );
}

#[test]
fn a_responses_item_with_a_server_id_whose_reasoning_went_is_refused() {
    let items = |user: &str| {
        doc(&[
            &format!(r#"{{"type":"message","role":"user","content":"{user}"}}"#),
            r#"{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA"}"#,
            r#"{"type":"function_call","id":"fc_1","call_id":"call_1","name":"ls","arguments":"{}"}"#,
            r#"{"type":"function_call_output","call_id":"call_1","output":"a.rs"}"#,
        ])
    };
    let r = Format::OpenAiResponses;
    let before = items("list files");
    assert!(invalid(&before, &before, r).is_empty());
    // The user message edited: the reasoning is dropped, the call's server id refused.
    let after = items("list the files");
    let v = invalidated_thinking(&read(&before, r), &read(&after, r));
    assert_eq!(
        v.iter()
            .map(|v| (v.message, v.block, v.server_id))
            .collect::<Vec<_>>(),
        [(1, 0, false), (2, 0, true)]
    );
    assert_eq!(v[0].changed_at, Some(0));
    // The repair: strip the call's id (the reasoning is still dropped, silently).
    let stripped = after.replace(r#""id":"fc_1","#, "");
    let v = invalidated_thinking(&read(&before, r), &read(&stripped, r));
    assert_eq!(v.len(), 1);
    assert!(!v[0].server_id);
}

// ---- D. fallback blocks, programmatic calls, the tool manifest --------------------------

#[test]
fn a_call_before_the_final_fallback_is_not_pending() {
    let with = r#"{"role":"assistant","content":[{"type":"thinking","thinking":"t","signature":"s"},{"type":"tool_use","id":"toolu_9","name":"rm","input":{}},{"type":"fallback","model":"claude-opus-5"},{"type":"text","text":"I can help with something else."}]}"#;
    let t = read(&doc(&[A_USER, with, A_USER]), Format::AnthropicMessages);
    assert!(check_rules(&t).is_empty(), "{:?}", check_rules(&t));
    assert_eq!(t.messages[1].blocks[1].0, Block::Text);
    assert_eq!(t.messages[1].blocks[2].0, Block::Control(Control::Fallback));
    assert!(t.messages[1].is_pinned(2));
    // Without the fallback the same call is left unanswered.
    let without = with.replace(r#"{"type":"fallback","model":"claude-opus-5"},"#, "");
    assert!(has(
        &anthropic(&[A_USER, &without, A_USER]),
        Rule::AnthropicToolUseWithoutResult
    ));
    // The fallback block dropped by a rewrite: caught.
    let before = doc(&[A_USER, with, A_USER]);
    let after = doc(&[A_USER, &without, A_USER]);
    assert!(has(
        &against(&before, &after, Format::AnthropicMessages),
        Rule::ControlItemLost
    ));
}

#[test]
fn a_programmatic_call_is_answered_by_results_alone() {
    let call = r#"{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_c","name":"code_execution","input":{"code":"q()"}},{"type":"tool_use","id":"toolu_q","name":"query","input":{},"caller":{"type":"code_execution_20260120","tool_id":"srvtoolu_c"}}]}"#;
    let alone = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"3 rows"}]}"#;
    let with_text = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"3 rows"},{"type":"text","text":"also check x"}]}"#;
    assert!(anthropic(&[A_USER, call, alone]).is_empty());
    assert_eq!(
        anthropic(&[A_USER, call, with_text]),
        [Rule::AnthropicProgrammaticResultNotAlone]
    );
    // A direct call may be answered with text after its results.
    let direct = call.replace("code_execution_20260120", "direct");
    assert!(anthropic(&[A_USER, &direct, with_text]).is_empty());
}

/// A code-execution script's call, and the message answering it.
const SCRIPT_CALL: &str = r#"{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_c","name":"code_execution","input":{"code":"q()"}},{"type":"tool_use","id":"toolu_q","name":"query","input":{},"caller":{"type":"code_execution_20260120","tool_id":"srvtoolu_c"}}]}"#;
const SCRIPT_ANSWER: &str = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"3 rows"}]}"#;

/// A request object holding `messages` and, when given, a `container` member.
fn request(container: Option<&str>, messages: &[&str]) -> String {
    let container = container.map_or(String::new(), |c| format!(r#""container":{c},"#));
    format!(
        r#"{{"model":"claude-opus-4-7","max_tokens":1024,{container}"messages":[{}]}}"#,
        messages.join(",")
    )
}

#[test]
fn a_request_answering_a_waiting_script_names_its_container() {
    let rules_of = |text: &str| rules(&read(text, Format::AnthropicMessages));
    // The documented repair: the container id of the response that made the call.
    let named = request(
        Some(r#""container_011""#),
        &[A_USER, SCRIPT_CALL, SCRIPT_ANSWER],
    );
    assert!(rules_of(&named).is_empty());
    for missing in [
        request(None, &[A_USER, SCRIPT_CALL, SCRIPT_ANSWER]),
        request(Some("null"), &[A_USER, SCRIPT_CALL, SCRIPT_ANSWER]),
    ] {
        let t = read(&missing, Format::AnthropicMessages);
        let found = check_rules(&t);
        assert_eq!(
            found.iter().map(|v| v.rule).collect::<Vec<_>>(),
            [Rule::AnthropicProgrammaticContainerMissing],
            "{missing}"
        );
        let v = &found[0];
        assert_eq!(
            (v.message, v.call_id.as_ref().map(CallId::as_str)),
            (1, Some("toolu_q"))
        );
        // The provider's own text first.
        assert!(v.text.starts_with("container_id is required when there are pending tool uses generated by code execution with tools."), "{}", v.text);
    }
    // A script answered in an earlier turn waits on nothing; a direct call needs no
    // container; a bare array of messages cannot say whether the request names one.
    let done = request(
        None,
        &[A_USER, SCRIPT_CALL, SCRIPT_ANSWER, A_ASSISTANT, A_USER],
    );
    assert!(rules_of(&done).is_empty());
    let direct = SCRIPT_CALL.replace("code_execution_20260120", "direct");
    assert!(rules_of(&request(None, &[A_USER, &direct, SCRIPT_ANSWER])).is_empty());
    assert!(anthropic(&[A_USER, SCRIPT_CALL, SCRIPT_ANSWER]).is_empty());
}

#[test]
fn a_rewrite_sends_the_answer_a_waiting_script_expects() {
    let before = request(
        Some(r#""c""#),
        &[A_USER, A_ASSISTANT, A_USER, SCRIPT_CALL, SCRIPT_ANSWER],
    );
    // Kept (the history before it summarized): accepted.
    let summary = r#"{"role":"user","content":"Earlier conversation, compacted."}"#;
    let kept = request(Some(r#""c""#), &[summary, SCRIPT_CALL, SCRIPT_ANSWER]);
    assert!(against(&before, &kept, Format::AnthropicMessages).is_empty());
    // The turn summarized away, or its answer replaced: caught.
    let gone = request(Some(r#""c""#), &[summary]);
    let edited = request(Some(r#""c""#), &[summary, SCRIPT_CALL, A_USER]);
    for after in [gone, edited] {
        assert!(
            has(
                &against(&before, &after, Format::AnthropicMessages),
                Rule::AnthropicProgrammaticAnswerLost
            ),
            "{after}"
        );
    }
}

/// The live Anthropic decoder reads a `caller` as the file reader does: the call a
/// script made is `programmatic`, and fed into a [`Log`](cutpoint::compact::Log) it is
/// kept (no compaction covers it, so its answer stays bound to it); a direct call is
/// not.
#[test]
fn the_live_decoder_keeps_a_programmatic_call() {
    use cutpoint::compact::{Entry, Log};
    use cutpoint::stream::decode::Feed;
    let stream = |caller: &str| {
        sse(&[
            r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"usage":{"input_tokens":10,"output_tokens":1}}}"#,
            r#"{"type":"content_block_start","index":0,"content_block":{"type":"server_tool_use","id":"srvtoolu_c","name":"code_execution","input":{}}}"#,
            r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"code\":\"rows = await query()\"}"}}"#,
            r#"{"type":"content_block_stop","index":0}"#,
            &format!(
                r#"{{"type":"content_block_start","index":1,"content_block":{{"type":"tool_use","id":"toolu_q","name":"query","input":{{}},"caller":{caller}}}}}"#
            ),
            r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"table\":\"t\"}"}}"#,
            r#"{"type":"content_block_stop","index":1}"#,
            r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":30}}"#,
            r#"{"type":"message_stop"}"#,
        ])
    };
    for (caller, programmatic) in [
        (
            r#"{"type":"code_execution_20260120","tool_id":"srvtoolu_c"}"#,
            true,
        ),
        (r#"{"type":"direct"}"#, false),
        ("null", false),
    ] {
        let (items, err) = decode_all(StreamFormat::AnthropicSse, &stream(caller));
        assert!(err.is_none(), "{err:?}");
        let mut log = Log::new();
        log.append(Entry::from(cutpoint::Record::user(40))).unwrap();
        for item in &items {
            log.feed(item).unwrap();
        }
        // Said when the call opens and when it closes.
        let said: Vec<bool> = items
            .iter()
            .filter_map(|d| match &d.detail {
                Detail::Opened(Content::Call {
                    id, programmatic, ..
                })
                | Detail::Closed(Content::Call {
                    id, programmatic, ..
                }) if id.as_str() == "toolu_q" => Some(*programmatic),
                _ => None,
            })
            .collect();
        assert_eq!(said, [programmatic, programmatic], "{caller}");
        // The agent answers it. The script's server call stays open until the script
        // ends (its result comes in a later response), which already holds every cut
        // after it; the programmatic call is kept besides, a wall of its own.
        log.append(Entry::from(cutpoint::Record::tool_result("toolu_q", 5)))
            .unwrap();
        let kept = log.kept_positions().to_vec();
        assert_eq!(
            kept,
            if programmatic { vec![2] } else { vec![] },
            "{caller}"
        );
        assert_eq!(log.kept_in(0..log.len()), programmatic.then_some(2));
    }
}

/// Claude Code records of a turn in which a code-execution script calls a tool: the
/// response (with its container's expiry) and the result, written at `written`.
fn claude_code_script(expires_at: &str, written: &str) -> String {
    [
        r#"{"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","timestamp":"2026-11-30T10:00:00.000Z","message":{"role":"user","content":"count the rows"}}"#.to_owned(),
        format!(r#"{{"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","timestamp":"2026-11-30T10:00:05.000Z","message":{{"id":"msg_1","type":"message","role":"assistant","container":{{"id":"container_011","expires_at":"{expires_at}"}},"content":[{{"type":"server_tool_use","id":"srvtoolu_c","name":"code_execution","input":{{"code":"q()"}}}},{{"type":"tool_use","id":"toolu_q","name":"query","input":{{}},"caller":{{"type":"code_execution_20260120","tool_id":"srvtoolu_c"}}}}]}}}}"#),
        format!(r#"{{"type":"user","uuid":"u2","parentUuid":"a1","sessionId":"s","timestamp":"{written}","message":{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_q","content":"3 rows"}}]}}}}"#),
    ]
    .join("\n")
        + "\n"
}

#[test]
fn a_waiting_scripts_results_come_before_its_container_expires() {
    let rules_of = |text: &str| rules(&read(text, Format::ClaudeCode));
    // In time (also across time zones: 10:04:00Z is 11:04:00+01:00).
    for (expires, written) in [
        ("2026-11-30T10:04:35.000Z", "2026-11-30T10:04:00.000Z"),
        ("2026-11-30T10:04:35.123456Z", "2026-11-30T10:04:35.123Z"),
        ("2026-11-30T11:04:35+01:00", "2026-11-30T10:04:00.000Z"),
    ] {
        let text = claude_code_script(expires, written);
        assert!(rules_of(&text).is_empty(), "{expires} {written}");
    }
    // Late: caught at the result, naming the call and by how much.
    let late = claude_code_script("2026-11-30T10:04:35.000Z", "2026-11-30T10:09:00.000Z");
    let t = read(&late, Format::ClaudeCode);
    let found = check_rules(&t);
    assert_eq!(
        found.iter().map(|v| v.rule).collect::<Vec<_>>(),
        [Rule::AnthropicProgrammaticContainerExpired]
    );
    assert_eq!(
        (found[0].line, found[0].call_id.as_ref().map(CallId::as_str)),
        (3, Some("toolu_q"))
    );
    assert!(found[0].text.contains("265s after"), "{}", found[0].text);
    // A later turn moved on: the script is not waiting any more.
    let moved_on = late.clone()
        + r#"{"type":"assistant","uuid":"a2","parentUuid":"u2","sessionId":"s","timestamp":"2026-11-30T10:09:05.000Z","message":{"id":"msg_2","type":"message","role":"assistant","content":[{"type":"text","text":"3 rows"}]}}"#
        + "\n";
    assert!(rules_of(&moved_on).is_empty());
    // Times that are not RFC 3339 (or absurd) say nothing: no note, no finding, no panic.
    for bad in [
        "",
        "yesterday",
        "2026-13-30T10:00:00Z",
        "2026-11-30T10:00:00",
        "9999999999-11-30T10:00:00Z",
        "2026-11-30T10:00:00.Z",
        "2026-11-30T10:00:00+99:00",
        "２０２６-11-30T10:00:00Z",
    ] {
        let text = claude_code_script(bad, "2026-11-30T10:09:00.000Z");
        assert!(rules_of(&text).is_empty(), "{bad}");
        let text = claude_code_script("2026-11-30T10:04:35.000Z", bad);
        assert!(rules_of(&text).is_empty(), "{bad}");
    }
}

#[test]
fn the_tool_manifest_is_kept_by_a_compaction() {
    let search = r#"{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_s","name":"tool_search_tool_regex","input":{"query":"weather"}},{"type":"tool_search_tool_result","tool_use_id":"srvtoolu_s","content":{"type":"tool_search_tool_search_result","tool_references":[{"type":"tool_reference","tool_name":"get_weather"}]}}]}"#;
    let loaded_by_result = r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_reference","tool_name":"get_forecast"}]}]}"#;
    let before = doc(&[
        A_USER,
        search,
        A_USER,
        A_CALL,
        loaded_by_result,
        A_ASSISTANT,
    ]);
    let t = read(&before, Format::AnthropicMessages);
    assert!(check_rules(&t).is_empty(), "{:?}", check_rules(&t));
    assert_eq!(t.loaded_tools(), ["get_forecast", "get_weather"]);
    let after = doc(&[A_USER, A_CALL, loaded_by_result, A_ASSISTANT]);
    let found = check_against(&t, &read(&after, Format::AnthropicMessages));
    let lost: Vec<&str> = found
        .iter()
        .filter(|v| v.rule == Rule::ToolUnloaded)
        .map(|v| v.text.as_str())
        .collect();
    assert_eq!(lost.len(), 1, "{found:?}");
    assert!(lost[0].contains("`get_weather`"));
    // The repair: the loading block kept.
    assert!(against(&before, &before, Format::AnthropicMessages).is_empty());
}

// ---- real transcripts ------------------------------------------------------------------

/// The real transcripts: the fixtures, and the full originals of
/// `../shared/data/transcripts/` where the workspace has them (the large originals
/// are not in the repository; the fixtures hold excerpts of them).
fn real_transcripts() -> Vec<(String, Format, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out = Vec::new();
    for dir in [
        root.join("tests/fixtures/transcripts"),
        root.join("../shared/data/transcripts"),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.expect("an entry").path();
            let name = path.display().to_string();
            if name.ends_with(".md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            if let Ok(format) = format::detect(&text) {
                out.push((name, format, text));
            }
        }
    }
    out
}

const RULES_2026: [Rule; 10] = [
    Rule::AnthropicTaskBudgetNotCarried,
    Rule::AnthropicSystemMessagePlacement,
    Rule::AnthropicProgrammaticResultNotAlone,
    Rule::ResponsesCompactionTriggerMisplaced,
    Rule::ThinkingPrefixChanged,
    Rule::ControlItemLost,
    Rule::ToolUnloaded,
    Rule::AnthropicProgrammaticContainerMissing,
    Rule::AnthropicProgrammaticContainerExpired,
    Rule::AnthropicProgrammaticAnswerLost,
];

#[test]
fn real_transcripts_break_none_of_the_2026_rules() {
    let logs = real_transcripts();
    assert!(logs.len() >= 20, "{} transcripts", logs.len());
    let mut thinking = 0;
    for (name, format, text) in &logs {
        let t = read(text, *format);
        let alone = check_rules(&t);
        assert!(
            alone.iter().all(|v| !RULES_2026.contains(&v.rule)),
            "{name}: {alone:#?}"
        );
        assert_eq!(check_against(&t, &t), alone, "{name}");
        assert!(invalidated_thinking(&t, &t).is_empty(), "{name}");
        // Thinking stripped oldest-first, one block at a time, invalidates nothing
        // (an oracle by construction: the documented allowance).
        let blocks: Vec<(usize, usize)> = t
            .messages
            .iter()
            .enumerate()
            .skip(t.live_from())
            .flat_map(|(i, m)| {
                m.blocks
                    .iter()
                    .enumerate()
                    .filter(|(_, (b, _))| matches!(b, Block::Reasoning))
                    .map(move |(k, _)| (i, k))
            })
            .collect();
        thinking += blocks.len();
        if t.format.is_json_document() || blocks.is_empty() {
            continue;
        }
        // JSONL (Claude Code, Codex): a thinking record is one line; drop the oldest
        // one's line, and then a later one's instead (not oldest-first).
        let line_of = |(i, k): (usize, usize)| t.messages[i].block_line(k);
        let without_line = |line: usize| -> String {
            text.lines()
                .enumerate()
                .filter(|(n, _)| n + 1 != line)
                .map(|(_, l)| format!("{l}\n"))
                .collect()
        };
        // A Claude Code record holds one block; a Codex line one item (or a whole
        // `compacted` history, which is not removed).
        let removable = |(i, _): (usize, usize)| {
            t.format == Format::ClaudeCode || t.messages[i].blocks.len() == 1
        };
        if removable(blocks[0]) {
            let after = read(&without_line(line_of(blocks[0])), *format);
            let v = invalidated_thinking(&t, &after);
            assert!(v.is_empty(), "{name}: oldest thinking dropped: {v:?}");
        }
        if blocks.len() > 2 && removable(blocks[1]) {
            let after = read(&without_line(line_of(blocks[1])), *format);
            let v = invalidated_thinking(&t, &after);
            assert!(
                !v.is_empty(),
                "{name}: a thinking block between others dropped"
            );
        }
    }
    println!(
        "{} real transcripts, {thinking} thinking blocks / reasoning items",
        logs.len()
    );
}

/// The prefix-binding model spelled out without hashing: each log as its explicit
/// sequence of prefix elements (the head; each message's role and its blocks' bytes),
/// every thinking block of `after` looked for in `before` at a position with the same
/// explicit prefix. The (message, block) of each invalidated block, servers ids left
/// out.
fn naive_invalidated(before: &Transcript, after: &Transcript) -> Vec<(usize, usize)> {
    use std::collections::HashSet;
    let reasoning = |t: &Transcript| -> Vec<u64> {
        t.messages[t.live_from()..]
            .iter()
            .flat_map(|m| {
                m.blocks
                    .iter()
                    .zip(&m.prints)
                    .filter(|((b, _), p)| matches!(b, Block::Reasoning) && **p != 0)
                    .map(|(_, p)| *p)
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let kept: HashSet<u64> = reasoning(after).into_iter().collect();
    let skip: HashSet<u64> = reasoning(before)
        .into_iter()
        .take_while(|p| !kept.contains(p))
        .collect();
    // (element, Some((message, block, print)) for a reasoning block)
    type Elem = (String, Option<(usize, usize, u64)>);
    let seq = |t: &Transcript, skip: &HashSet<u64>| -> Vec<Elem> {
        let mut out = vec![(format!("head {}", t.head_print), None)];
        for (i, m) in t.messages.iter().enumerate().skip(t.live_from()) {
            let shown: Vec<usize> = (0..m.blocks.len())
                .filter(|&k| {
                    !(matches!(m.blocks[k].0, Block::Reasoning) && skip.contains(&m.prints[k]))
                })
                .collect();
            if shown.is_empty() {
                continue;
            }
            out.push((format!("start {:?}", m.role), None));
            for k in shown {
                let r = matches!(m.blocks[k].0, Block::Reasoning) && m.prints[k] != 0;
                out.push((
                    format!("block {}", m.prints[k]),
                    r.then_some((i, k, m.prints[k])),
                ));
            }
        }
        out
    };
    let was = seq(before, &skip);
    let now = seq(after, &HashSet::new());
    let names = |s: &[Elem]| s.iter().map(|e| e.0.clone()).collect::<Vec<_>>();
    let (was_names, now_names) = (names(&was), names(&now));
    let extends =
        now_names.len() >= was_names.len() && now_names[..was_names.len()] == was_names[..];
    let mut out = Vec::new();
    for (e, (_, r)) in now.iter().enumerate() {
        let Some((i, k, p)) = *r else { continue };
        let known = was.iter().any(|(_, w)| w.is_some_and(|w| w.2 == p));
        let valid = was
            .iter()
            .enumerate()
            .any(|(f, (_, w))| w.is_some_and(|w| w.2 == p) && was_names[..f] == now_names[..e]);
        let appended = extends && e >= was.len() && !known;
        if !(valid || appended) {
            out.push((i, k));
        }
    }
    out
}

#[test]
fn the_prefix_model_agrees_with_a_naive_oracle_on_edited_real_logs() {
    use cutpoint::testing::synth::Rng;
    let mut compared = 0;
    let mut invalid = 0;
    for (name, format, text) in real_transcripts() {
        if !matches!(format, Format::ClaudeCode | Format::CodexRollout) {
            continue;
        }
        let before = read(&text, format);
        let lines: Vec<&str> = text.lines().collect();
        let mut rng = Rng::new(name.len() as u64 ^ 0x21);
        for _ in 0..8 {
            // One random edit of the lines: removed, duplicated, or two swapped.
            let mut edited: Vec<&str> = lines.clone();
            let a = rng.range(0, lines.len() as u64 - 1) as usize;
            let b = rng.range(0, lines.len() as u64 - 1) as usize;
            match rng.range(0, 2) {
                0 => {
                    edited.remove(a);
                }
                1 => edited.insert(a, lines[a]),
                _ => edited.swap(a, b),
            }
            let edited = edited.join("\n");
            let Ok(after) = format::read(&edited, format, &ByteEstimate) else {
                continue;
            };
            let ours: Vec<(usize, usize)> = invalidated_thinking(&before, &after)
                .into_iter()
                .filter(|v| !v.server_id)
                .map(|v| (v.message, v.block))
                .collect();
            assert_eq!(ours, naive_invalidated(&before, &after), "{name}");
            compared += 1;
            invalid += ours.len();
        }
    }
    assert!(compared > 50, "{compared} edits compared");
    assert!(invalid > 0, "no edit invalidated anything");
    println!("{compared} edited real logs, {invalid} blocks invalidated");
}

/// cutpoint's own compactions carry the budget: `remaining` is what is left after
/// the history the compaction read (Claude Code's rule after its own compaction),
/// the budget object's other members as they were; a second compaction counts down
/// from the first one's `remaining`; one that changes nothing writes nothing.
#[test]
fn a_compaction_carries_the_task_budget_it_was_given() {
    use cutpoint::compact::Window;
    use cutpoint::testing::writers;
    let a = Format::AnthropicMessages;
    let long = |n: usize| {
        format!(
            r#"{{"role":"user","content":"{} {}"}}"#,
            n,
            "lorem ipsum ".repeat(40)
        )
    };
    let said = |n: usize| format!(r#"{{"role":"assistant","content":"answer {n}"}}"#);
    let messages: Vec<String> = (0..8).flat_map(|n| [long(n), said(n)]).collect();
    for budget in [
        r#"{"type":"tokens","total":64000}"#,
        r#"{ "type" : "tokens", "total" : 64000 }"#,
        r#"{"type":"tokens","total":64000,"remaining":30000}"#,
    ] {
        let text = format!(
            r#"{{"model":"claude-opus-4-7","output_config":{{"effort":"high","task_budget":{budget}}},"messages":[{}]}}"#,
            messages.join(",")
        );
        let t = read(&text, a);
        let start = t.task_budget.unwrap().remaining.unwrap_or(64000);
        let window = Window::new(t.live_tokens() / 2).lookback(t.live_tokens());
        let once = writers::compact(&t, &text, &window, 0, "Summary.")
            .unwrap()
            .unwrap()
            .text;
        let after = read(&once, a);
        assert_eq!(
            after.task_budget.and_then(|b| b.remaining),
            Some(start - t.live_tokens()),
            "{once}"
        );
        assert_eq!(after.task_budget.unwrap().total, Some(64000));
        assert!(check_against(&t, &after).is_empty(), "{once}");
        assert!(once.contains(r#""effort":"high""#));
        // Again, on its own output: from the first `remaining` down.
        let window = Window::new(after.live_tokens() / 2).lookback(after.live_tokens());
        if let Some(twice) = writers::compact(&after, &once, &window, 0, "Summary.").unwrap() {
            let again = read(&twice.text, a);
            assert_eq!(
                again.task_budget.and_then(|b| b.remaining),
                Some(start - t.live_tokens() - after.live_tokens()),
                "{}",
                twice.text
            );
            assert!(check_against(&after, &again).is_empty());
        }
    }
    // Not a task budget: an error naming the place, not a silent pass.
    let bad = r#"{"output_config":{"task_budget":{"total":"lots"}},"messages":[]}"#;
    let e = format::read(bad, a, &ByteEstimate).unwrap_err().to_string();
    assert!(e.contains("task_budget"), "{e}");
}

#[test]
fn a_task_budget_carries_remaining_after_a_client_compaction() {
    let a = Format::AnthropicMessages;
    let budget = |remaining: &str| {
        format!(
            r#""output_config":{{"effort":"high","task_budget":{{"type":"tokens","total":64000{remaining}}}}}"#
        )
    };
    let before = format!(
        r#"{{{},"messages":[{A_USER},{A_ASSISTANT},{A_USER},{A_ASSISTANT}]}}"#,
        budget("")
    );
    let t = read(&before, a);
    assert_eq!(t.task_budget.and_then(|b| b.total), Some(64000));
    // Appending: no compaction, nothing to carry.
    let appended = format!(
        r#"{{{},"messages":[{A_USER},{A_ASSISTANT},{A_USER},{A_ASSISTANT},{A_USER}]}}"#,
        budget("")
    );
    assert!(against(&before, &appended, a).is_empty());
    // A client compaction without `remaining`: caught.
    let compacted = format!(
        r#"{{{},"messages":[{{"role":"user","content":"Summary: said hello twice."}}]}}"#,
        budget("")
    );
    assert_eq!(
        against(&before, &compacted, a),
        [Rule::AnthropicTaskBudgetNotCarried]
    );
    // The documented repair: `remaining` passed.
    let carried = compacted.replace("64000}", r#"64000,"remaining":51000}"#);
    assert!(against(&before, &carried, a).is_empty(), "{carried}");
}
