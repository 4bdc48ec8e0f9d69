//! `cutpoint cut --for anthropic-compaction|openai-compaction` and `cutpoint check
//! --before`, end to end.

use crate::common;

use std::io::Write;
use std::process::{Command, Output};

fn fixture(name: &str) -> String {
    common::root("tests/fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

fn cutpoint(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutpoint"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const SPOTTER: &str = "claude-code__spotter__4d5611e5-main.jsonl";
const COMPACTED: &str = "codex__localpush__rollout-12-54-34-compacted.jsonl";

#[test]
fn cut_for_native_compaction_prints_what_the_library_answers() {
    use cutpoint::format::{self, ByteEstimate, Keep, NativeCompaction};
    let file = fixture(SPOTTER);
    let input = std::fs::read_to_string(&file).unwrap();
    let t = format::read(&input, Format::ClaudeCode, &ByteEstimate).unwrap();
    for (flag, value, keep) in [
        ("--keep", "0", Keep::Tokens(0)),
        ("--keep", "20000", Keep::Tokens(20_000)),
        ("--keep-turns", "1", Keep::Turns(1)),
    ] {
        let out = cutpoint(&["cut", "--for", "anthropic-compaction", flag, value, &file]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        let want = format::keep_recent_cut(&t, NativeCompaction::Anthropic, keep)
            .unwrap()
            .cut;
        assert_eq!(text(&out.stdout).trim(), want.to_string());
    }
    // Keeping more than the log holds: exit 3, the reason on stderr.
    let out = cutpoint(&[
        "cut",
        "--for",
        "anthropic-compaction",
        "--keep",
        "999999999",
        &file,
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("every cut keeps fewer tokens"));
    // OpenAI: nothing after the latest compaction item may go.
    let codex = fixture(COMPACTED);
    let out = cutpoint(&["cut", "--for", "openai-compaction", "--keep", "1", &codex]);
    assert_eq!(out.status.code(), Some(0));
    let t = format::read(
        &std::fs::read_to_string(&codex).unwrap(),
        Format::CodexRollout,
        &ByteEstimate,
    )
    .unwrap();
    assert_eq!(text(&out.stdout).trim(), t.live_from().to_string());
}

use cutpoint::format::Format;

#[test]
fn cut_for_needs_an_amount_and_refuses_bad_names_and_target_flags() {
    let file = fixture(SPOTTER);
    let out = cutpoint(&["cut", "--for", "anthropic-compaction", &file]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--keep TOKENS or --keep-turns N"));
    let out = cutpoint(&["cut", "--for", "gemini-compaction", "--keep", "1", &file]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("anthropic-compaction or openai-compaction"));
    let out = cutpoint(&[
        "cut",
        "--for",
        "anthropic-compaction",
        "--keep",
        "1",
        "--target",
        "5",
        &file,
    ]);
    assert_eq!(out.status.code(), Some(2));
    let out = cutpoint(&["cut", "--keep", "1", &file]);
    assert_eq!(out.status.code(), Some(2), "--keep without --for");
}

#[test]
fn check_before_names_the_latest_thinking_changed() {
    let original = r#"{"messages": [
{"role":"user","content":"go"},
{"role":"assistant","content":[{"type":"thinking","thinking":"plan","signature":"sig"},{"type":"tool_use","id":"t1","name":"ls","input":{}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"ok"}]}
]}"#;
    let edited = original.replace(r#""thinking":"plan""#, r#""thinking":"plan!""#);
    let dir = std::env::temp_dir().join(format!("cutpoint-before-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (a, b) = (dir.join("original.json"), dir.join("edited.json"));
    std::fs::File::create(&a)
        .unwrap()
        .write_all(original.as_bytes())
        .unwrap();
    std::fs::File::create(&b)
        .unwrap()
        .write_all(edited.as_bytes())
        .unwrap();
    let (a, b) = (a.display().to_string(), b.display().to_string());
    // Alone, the edited file breaks no rule; against its original it does.
    let out = cutpoint(&["check", &b]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = cutpoint(&["check", "--before", &a, &b]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with(&format!("{b}:3: anthropic/latest-thinking-modified: messages.1.content.0: `thinking` or `redacted_thinking` blocks in the latest assistant message cannot be modified")),
        "{stdout}"
    );
    // The original against itself is clean.
    let out = cutpoint(&["check", "--before", &a, &a]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}
