//! Issue 16 end to end: the verdicts of the newer real files, Gemini CLI sessions,
//! one-line request bodies, tau-bench results files, deferrals in message space,
//! `compact --keep`, and a Claude Code rewrite that keeps its chain.

use crate::common::{cutpoint, exits, root, text};

/// Runs `args` on `stdin`: exit 2, and stderr says `what`.
fn refused(args: &[&str], stdin: &[u8], what: &str) {
    exits(args, stdin, 2, what);
}

/// The JSON lines of an output.
fn json_lines(out: &[u8]) -> Vec<serde_json::Value> {
    text(out)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect()
}

fn fixture(name: &str) -> String {
    root("tests/fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

const CLEAN: [&str; 9] = [
    "claude-code__entireio-cli__1a-8a83a35a9b-0-interleaved-parallel.jsonl",
    "claude-code__entireio-cli__6a-54c404f24f-0-interleaved-parallel-lines-127-139.jsonl",
    "claude-code__entireio-cli__82-060566ec4b-0-result-after-text.jsonl",
    "claude-code__codemie-code__subagent-agent-a485154.jsonl",
    "claude-code__codemie-code__incremental-simple-turn-2-summaries.jsonl",
    "gemini-cli-session__codemie-code__session-2025-12-01T21-45-5b959dae.json",
    "openai-chat__tau-bench__gpt-4o-airline-traj173.json",
    "openai-chat__tau-bench__gpt-4o-airline-traj173-one-line.json",
    "openai-chat__tau-bench__gpt-4o-airline-traj196-reused-ids.json",
];
const IN_FLIGHT: &str =
    "claude-code__entireio-cli__26-95fc81fb3d-0-inflight-at-compact-lines-528-559.jsonl";
const ORPHAN_AND_PENDING: &str =
    "claude-code__entireio-cli__ec-38b74f08e3-3-orphan-interrupts.jsonl";

#[test]
fn the_newer_real_files_get_their_verdicts() {
    let files: Vec<String> = CLEAN.iter().map(|f| fixture(f)).collect();
    let mut args = vec!["check", "--json"];
    args.extend(files.iter().map(String::as_str));
    let out = cutpoint(&args, b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let formats: Vec<&str> = v["files"]
        .as_array()
        .expect("files")
        .iter()
        .map(|f| f["format"].as_str().expect("format"))
        .collect();
    assert_eq!(
        formats,
        [
            "claude-code",
            "claude-code",
            "claude-code",
            "claude-code",
            "claude-code",
            "gemini-cli",
            "openai-chat",
            "openai-chat",
            "openai-chat"
        ]
    );

    // The call in flight at Claude Code's compaction: reported even with
    // --allow-pending, on its own line, without the provider's error.
    let file = fixture(IN_FLIGHT);
    for extra in [&[][..], &["--allow-pending"][..]] {
        let mut args = vec!["check"];
        args.extend_from_slice(extra);
        args.push(&file);
        let out = cutpoint(&args, b"");
        assert_eq!(out.status.code(), Some(1));
        let lines = text(&out.stdout);
        assert!(
            lines.starts_with(&format!(
                "{file}:6: compaction/call-open-when-compacted: toolu_012F8XWXYYV3iE2nWAjnQkPP the call was still in flight"
            )),
            "{lines}"
        );
        assert_eq!(lines.lines().count(), 1);
    }

    // An orphan on line 1, a call pending on line 234 (not 232, where its message
    // starts).
    let file = fixture(ORPHAN_AND_PENDING);
    let out = cutpoint(&["check", &file], b"");
    assert_eq!(out.status.code(), Some(1));
    let lines = text(&out.stdout);
    assert!(
        lines.contains(&format!(
            "{file}:1: anthropic/unexpected-tool-result: toolu_01UP5eJfu9eDH6NfgkgTSAUU"
        )),
        "{lines}"
    );
    assert!(
        lines.contains(&format!(
            "{file}:234: anthropic/tool-use-without-result: toolu_01B4ubmeEgL1EjtGHRo2upyd"
        )),
        "{lines}"
    );
    let out = cutpoint(&["check", "--allow-pending", &file], b"");
    assert_eq!(text(&out.stdout).lines().count(), 1);
}

#[test]
fn shapes_no_format_claims_exit_two_saying_what_was_seen() {
    let results = fixture("chat-wrapper__tau-bench__gpt-4o-airline-first-2.json");
    refused(
        &["check", &results],
        b"",
        "a tau-bench results file: 2 task records",
    );
    let unknown = r#"{"items":1,"input":[{"type":"hologram","call_id":"c"}]}"#;
    refused(&["check", "-"], unknown.as_bytes(), "\"hologram\"");
}

#[test]
fn a_one_line_request_body_is_read_as_its_provider_format_from_stdin_too() {
    let body = std::fs::read(fixture(
        "openai-chat__tau-bench__gpt-4o-airline-traj173-one-line.json",
    ))
    .expect("fixture");
    let out = cutpoint(&["stats", "--json", "-"], &body);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(v["format"], "openai-chat");
    assert_eq!(v["tool_pairs"], 13);
    // An ambiguous one-line body (plain text messages) is a document the detection
    // cannot tell, not a bad records line.
    let plain = r#"{"messages":[{"role":"user","content":"hi"}]}"#;
    refused(&["check", "-"], plain.as_bytes(), "cannot tell the format");
}

#[test]
fn deferrals_name_messages_with_token_distances_and_help_describes_the_walk() {
    let file = fixture("claude-code__entireio-cli__82-060566ec4b-0-result-after-text.jsonl");
    let out = cutpoint(
        &["cut", "--target", "15000", "--lookback", "10", &file],
        b"",
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    let err = text(&out.stderr);
    assert!(err.starts_with("cutpoint: deferred: no legal "), "{err}");
    assert!(err.contains("message"), "{err}");
    assert!(!err.contains("record"), "{err}");
    assert!(err.contains("tokens short of the target"), "{err}");
    assert!(err.contains("tokens past the target"), "{err}");
    // The same through compact.
    let out = cutpoint(
        &["compact", "--target", "15000", "--lookback", "10", &file],
        b"",
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stderr).contains("nearest legal cut below: message "));
    let help = cutpoint(&["cut", "--help"], b"");
    let help = text(&help.stdout);
    assert!(
        help.contains("counts that record's own tokens first"),
        "{help}"
    );
}

#[test]
fn compact_keep_is_the_target_counted_from_the_end() {
    let file = fixture("claude-code__entireio-cli__1a-8a83a35a9b-0-interleaved-parallel.jsonl");
    let stats = cutpoint(&["stats", "--json", &file], b"");
    let v: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("JSON");
    let total = v["tokens"].as_u64().expect("tokens");
    let keep = 20_000u64;
    let by_keep = cutpoint(
        &[
            "compact",
            "--keep",
            &keep.to_string(),
            "--lookback",
            "50000",
            &file,
        ],
        b"",
    );
    let by_target = cutpoint(
        &[
            "compact",
            "--target",
            &(total - keep).to_string(),
            "--lookback",
            "50000",
            &file,
        ],
        b"",
    );
    assert_eq!(by_keep.status.code(), Some(0), "{}", text(&by_keep.stderr));
    assert_eq!(by_keep.stdout, by_target.stdout);
    assert_eq!(by_keep.stderr, by_target.stderr);
    // Records JSONL too.
    let log = "{\"kind\":\"user\",\"tokens\":100}\n{\"kind\":\"assistant\",\"tokens\":100}\n{\"kind\":\"user\",\"tokens\":100}\n";
    let out = cutpoint(&["compact", "--keep", "150"], log.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("compact records 0..1"),
        "{}",
        text(&out.stderr)
    );
    // One of the two, not both.
    let out = cutpoint(&["compact", "--keep", "1", "--target", "1"], log.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    let out = cutpoint(&["compact"], log.as_bytes());
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_compacted_claude_code_session_mirrors_claude_codes_own_compaction() {
    let file = fixture("claude-code__claude-reliability__python-to-rust-port.jsonl");
    let out = cutpoint(
        &["compact", "--keep", "10000", "--lookback", "50000", &file],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = json_lines(&out.stdout);
    let s = lines
        .iter()
        .position(|v| v["isCompactSummary"] == true)
        .expect("a summary record");
    let (boundary, summary) = (&lines[s - 1], &lines[s]);
    assert_eq!(boundary["type"], "system");
    assert_eq!(boundary["subtype"], "compact_boundary");
    // Nothing pinned: the boundary starts the chain, as Claude Code writes it.
    assert!(boundary["parentUuid"].is_null());
    assert!(boundary["compactMetadata"]["preTokens"].is_u64());
    assert_eq!(summary["parentUuid"], boundary["uuid"]);
    assert!(summary["uuid"].is_string());
    assert_eq!(summary["sessionId"], lines[0]["sessionId"]);
    // The next record with a uuid chains to the summary.
    let next = lines[s + 1..]
        .iter()
        .find(|v| v["uuid"].is_string())
        .expect("a retained record");
    assert_eq!(next["parentUuid"], summary["uuid"]);
    let back = cutpoint(&["check", "-"], &out.stdout);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back.stdout));

    // The first message pinned: it stays live, so the summary is an ordinary user
    // record chained to it (a boundary after it would end its history, for Claude
    // Code and for cutpoint's reader alike).
    let out = cutpoint(
        &[
            "compact",
            "--keep",
            "10000",
            "--lookback",
            "50000",
            "--keep-head",
            "1",
            &file,
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let lines = json_lines(&out.stdout);
    let s = lines
        .iter()
        .position(|v| {
            v["message"]["content"]
                .as_str()
                .is_some_and(|c| c.contains("Tool calls summarized"))
        })
        .expect("a summary record");
    assert!(lines.iter().all(|v| v["subtype"] != "compact_boundary"));
    assert!(lines[s]["isCompactSummary"].is_null());
    let head = lines[..s]
        .iter()
        .rfind(|v| v["uuid"].is_string())
        .expect("a pinned record");
    assert_eq!(lines[s]["parentUuid"], head["uuid"]);
    let back = cutpoint(&["check", "-"], &out.stdout);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back.stdout));
}

#[test]
fn a_gemini_cli_session_is_counted_cut_and_compacted_in_its_shape() {
    let file = fixture("gemini-cli-session__codemie-code__session-2025-12-01T21-45-5b959dae.json");
    let out = cutpoint(&["stats", "--json", "--format", "gemini-cli", &file], b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        (v["format"].as_str(), v["tool_pairs"].as_u64()),
        (Some("gemini-cli"), Some(10))
    );
    let out = cutpoint(
        &["cut", "--target", "12000", "--lookback", "20000", &file],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let cut: usize = text(&out.stdout).trim().parse().expect("a message index");
    assert!(cut > 0 && cut <= 14);
    let out = cutpoint(
        &["compact", "--keep", "3000", "--lookback", "20000", &file],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert!(v["messages"].as_array().is_some_and(|m| m.len() < 14));
    let back = cutpoint(&["check", "-"], &out.stdout);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back.stdout));
    let again = cutpoint(
        &["compact", "--keep", "500", "--lookback", "20000", "-"],
        &out.stdout,
    );
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    let back = cutpoint(&["stats", "--json", "-"], &again.stdout);
    let v: serde_json::Value = serde_json::from_slice(&back.stdout).expect("JSON");
    assert_eq!(v["format"], "gemini-cli");
}
