//! Issue 24's reader cases through the library (the CLI's side is in
//! `cli/tests/cli/readers_cli.rs`): interrupted Codex turns, a Claude Code result
//! written before the line of its call, and what `format::read` says of input of
//! another kind. Fixtures in `tests/fixtures/readers` (see SOURCES.md there).

#![cfg(feature = "formats")]

use std::path::PathBuf;

use cutpoint::format::{
    self, Block, ByteEstimate, Format, FormatError, Rule, TokenCounter, Transcript,
};

fn fixture(dir: &str, name: &str) -> String {
    let path: PathBuf = [env!("CARGO_MANIFEST_DIR"), "tests/fixtures", dir, name]
        .iter()
        .collect();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read(text: &str, format: Format) -> Transcript {
    format::read(text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{e}"))
}

const ABORTED: &str = "codex-turn-aborted.jsonl";
const RESULT_FIRST: &str = "claude-code-result-before-use.jsonl";

#[test]
fn a_reasoning_item_before_codexs_turn_aborted_note_is_no_violation() {
    let text = fixture("readers", ABORTED);
    let t = read(&text, Format::CodexRollout);
    let notes: Vec<usize> = (0..t.messages.len())
        .filter(|&i| t.messages[i].aborts_turn)
        .collect();
    assert_eq!(notes.len(), 1, "one interrupt note");
    let before = &t.messages[notes[0] - 1];
    assert!(matches!(before.blocks.last(), Some((Block::Reasoning, _))));
    assert_eq!(format::check_rules(&t), Vec::new());
    assert_eq!(format::check_against(&t, &t), Vec::new());
}

#[test]
fn a_reasoning_item_before_any_other_user_message_still_is_one() {
    // The same file with the note's text typed by the user: the rule holds again.
    let text = fixture("readers", ABORTED).replace(
        "<turn_aborted>\\nThe user interrupted",
        "Stop. \\nThe user interrupted",
    );
    let t = read(&text, Format::CodexRollout);
    assert!(t.messages.iter().all(|m| !m.aborts_turn));
    let rules: Vec<Rule> = format::check_rules(&t).iter().map(|v| v.rule).collect();
    assert_eq!(rules, [Rule::ResponsesReasoningWithoutFollower]);
}

/// The file with every line holding a `thinking` block left out (what
/// `clear-thinking` does to a finished turn).
fn without_thinking(text: &str) -> String {
    text.lines()
        .filter(|l| !l.contains("\"type\":\"thinking\""))
        .map(|l| format!("{l}\n"))
        .collect()
}

/// Each call's message index and the message index of its result.
fn pairs(t: &Transcript) -> Vec<(String, usize, usize)> {
    let mut out = Vec::new();
    for (i, m) in t.messages.iter().enumerate() {
        for (_, id, _) in m.calls() {
            let answer = t
                .messages
                .iter()
                .position(|r| r.results().any(|(_, r)| r == id))
                .expect("every call of the fixture is answered");
            out.push((id.to_string(), i, answer));
        }
    }
    out
}

#[test]
fn a_result_written_before_its_call_pairs_with_or_without_the_lines_between() {
    let text = fixture("readers", RESULT_FIRST);
    for (what, text) in [
        ("as written", text.clone()),
        ("no thinking", without_thinking(&text)),
    ] {
        let t = read(&text, Format::ClaudeCode);
        assert_eq!(format::check_rules(&t), Vec::new(), "{what}");
        for (id, call, result) in pairs(&t) {
            assert_eq!(result, call + 1, "{what}: {id}");
        }
        // Every line is in exactly one message, and every block has its line.
        let mut spans: Vec<_> = t.messages.iter().flat_map(|m| m.spans.clone()).collect();
        spans.sort_by_key(|s| s.start);
        assert_eq!(spans.len(), text.lines().count(), "{what}");
        for m in &t.messages {
            assert_eq!(m.block_lines.len(), m.blocks.len());
            assert_eq!(m.prints.len(), m.blocks.len());
        }
    }
    // The original against its thinking-free rewrite: only what a rewrite may drop.
    let before = read(&text, Format::ClaudeCode);
    let after = read(&without_thinking(&text), Format::ClaudeCode);
    assert_eq!(format::check_against(&before, &after), Vec::new());
}

#[test]
fn input_of_another_kind_is_named_as_such() {
    let copilot = fixture("readers", "copilot-cli-events.jsonl");
    let array = fixture(
        "transcripts",
        "openai-chat__tau-bench__gpt-4o-airline-traj173.json",
    );
    let list = fixture("transcripts", "openhands__wrong_initial_state.json");
    let claude = fixture(
        "transcripts",
        "claude-code__claude-reliability__coverage-test-fix.jsonl",
    );
    match format::detect(&copilot) {
        Err(FormatError::Undetected { why }) => {
            assert!(why.contains("\"session.start\""), "{why}");
        }
        other => panic!("{other:?}"),
    }
    for (text, format, says) in [
        (
            &copilot,
            Format::ClaudeCode,
            "a format cutpoint does not read",
        ),
        (
            &copilot,
            Format::CodexRollout,
            "a format cutpoint does not read",
        ),
        (&copilot, Format::Records, "a format cutpoint does not read"),
        (&copilot, Format::GeminiCli, "not one JSON document"),
        (
            &array,
            Format::ClaudeCode,
            "one JSON document, not JSON lines",
        ),
        (&array, Format::Records, "one JSON document, not JSON lines"),
        (&list, Format::ClaudeCode, "a JSON array, one JSON document"),
        (
            &list,
            Format::CodexRollout,
            "a JSON array, one JSON document",
        ),
        (&claude, Format::CodexRollout, "claude-code lines"),
        (&claude, Format::AnthropicMessages, "claude-code lines"),
    ] {
        match format::read(text, format, &ByteEstimate) {
            Err(e @ FormatError::Mismatch { .. }) => {
                let shown = e.to_string();
                assert!(
                    shown.starts_with(&format!("not {format} input: ")),
                    "{shown}"
                );
                assert!(shown.contains(says), "{format}: {shown}");
            }
            Err(other) => panic!("{format}: {other}"),
            Ok(t) => panic!("{format}: read {} messages", t.messages.len()),
        }
    }
    // The ones it reads as say so.
    let e = format::read(&array, Format::ClaudeCode, &ByteEstimate).unwrap_err();
    assert!(e.to_string().contains("pass --format openai-chat"), "{e}");
}

/// A Claude Code line is read with its message in one pass when the message is an
/// object; every other shape takes the two-pass path, which must say the same as it
/// always did: the line, `message:`, and what is wrong, or skip a line of a kind that
/// holds no message to read.
#[test]
fn claude_code_lines_read_in_one_pass_say_what_two_passes_said() {
    let user =
        r#"{"type":"user","uuid":"u1","parentUuid":null,"message":{"role":"user","content":"hi"}}"#;
    let cases: [(&str, Option<&str>); 10] = [
        // A message that is no object, on a line that is read: an error on that line.
        (
            r#"{"type":"user","uuid":"u2","parentUuid":"u1","message":"text"}"#,
            Some("line 2: message: invalid type: string \"text\", expected struct Msg (column 6)"),
        ),
        // A message object of the wrong shape: the same.
        (
            r#"{"type":"assistant","uuid":"u2","parentUuid":"u1","message":{"role":7}}"#,
            Some(
                "line 2: message: invalid type: integer `7`, expected a borrowed string (column 9)",
            ),
        ),
        // Lines of other kinds are skipped whatever their message holds.
        (r#"{"type":"summary","message":[1,2]}"#, None),
        (r#"{"type":"progress","message":{"role":7}}"#, None),
        // An assistant message without blocks counts its whole text.
        (
            r#"{"type":"assistant","uuid":"u2","parentUuid":"u1","message":{"role":"assistant","content":[]}}"#,
            None,
        ),
        // A summary record counts its message's text.
        (
            r#"{"type":"user","isCompactSummary":true,"uuid":"u2","parentUuid":"u1","message":{"role":"user","content":"This session is being continued. Summary: x"}}"#,
            None,
        ),
        // The same with its text in a block (the content split in the line's pass, the
        // message read again for its text).
        (
            r#"{"type":"user","isCompactSummary":true,"uuid":"u2","parentUuid":"u1","message":{"role":"user","content":[{"type":"text","text":"Summary: x"}]}}"#,
            None,
        ),
        // A block that is no object, in a content split in the line's pass: the error
        // names the block as when the content was read on its own.
        (
            r#"{"type":"assistant","uuid":"u2","parentUuid":"u1","message":{"role":"assistant","content":[5]}}"#,
            Some(
                "line 2: message.content.0: invalid type: integer `5`, expected struct RawBlock (column 1)",
            ),
        ),
        // A content that is no array and no string.
        (
            r#"{"type":"user","uuid":"u2","parentUuid":"u1","message":{"role":"user","content":{"a":1}}}"#,
            None,
        ),
        // A string content with escapes (the slow path), counted as its JSON text.
        (
            r#"{"type":"user","uuid":"u2","parentUuid":"u1","message":{"role":"user","content":"a\nb \"c\""}}"#,
            None,
        ),
    ];
    for (line, error) in cases {
        let text = format!("{user}\n{line}\n");
        match (
            format::read(&text, Format::ClaudeCode, &ByteEstimate),
            error,
        ) {
            (Err(e), Some(want)) => assert_eq!(e.to_string(), want, "{line}"),
            (Ok(t), None) => {
                // The tokens of the second line's message are those of its text.
                let message = line
                    .split_once(r#""message":"#)
                    .map(|(_, m)| &m[..m.len() - 1]);
                let counted: u64 = t.messages.iter().skip(1).map(|m| m.tokens()).sum();
                if t.messages.len() > 1 {
                    let m = message.expect("a message");
                    assert_eq!(counted, ByteEstimate.count_json(m), "{line}");
                }
            }
            (got, want) => panic!("{line}: {:?} where {want:?}", got.map(|t| t.messages.len())),
        }
    }
}
