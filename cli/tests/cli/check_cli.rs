//! `cutpoint check`, `stats` and `cut` over the real transcripts, end to end.

use crate::common;

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> String {
    let path: PathBuf = common::root("tests/fixtures/transcripts").join(name);
    path.display().to_string()
}

fn cutpoint(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutpoint"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

const ORPHAN: &str = "codex__localpush__rollout-12-47-42-orphan-call.jsonl";
const TRAILING: &str = "codex__localpush__rollout-13-19-38-trailing-call.jsonl";
const CLEAN: [&str; 7] = [
    "chat__swe-agent__marshmallow-1867-function_calling_replace.traj",
    "claude-code__claude-reliability__coverage-test-fix.jsonl",
    "claude-code__claude-reliability__python-to-rust-port.jsonl",
    "claude-code__spotter__4d5611e5-agent-acompact-e1f845.jsonl",
    "claude-code__spotter__4d5611e5-main.jsonl",
    "codex__localpush__rollout-12-41-04-parallel7.jsonl",
    "codex__localpush__rollout-12-54-34-compacted.jsonl",
];

#[test]
fn clean_transcripts_exit_zero() {
    let files: Vec<String> = CLEAN.iter().map(|f| fixture(f)).collect();
    let mut args = vec!["check"];
    args.extend(files.iter().map(String::as_str));
    let out = cutpoint(&args);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn the_orphan_call_is_one_violation_even_with_allow_pending() {
    let file = fixture(ORPHAN);
    for extra in [&[][..], &["--allow-pending"][..]] {
        let mut args = vec!["check"];
        args.extend_from_slice(extra);
        args.push(&file);
        let out = cutpoint(&args);
        assert_eq!(out.status.code(), Some(1));
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1, "{text}");
        assert!(
            lines[0].starts_with(&format!(
                "{file}:826: openai-responses/no-tool-output: call_BpTazJ89W9PntRqGPwDNfwEY No tool output found"
            )),
            "{text}"
        );
        assert!(lines[0].ends_with("(left unanswered while the log moved on)"));
    }
}

#[test]
fn the_trailing_call_is_pending_and_allowed_with_allow_pending() {
    let file = fixture(TRAILING);
    let out = cutpoint(&["check", "--format", "codex", &file]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stdout(&out).contains("call_UtYwHmwWekzvq83m8Rb9K8jJ"));
    assert!(stdout(&out).contains("(pending at the end of the log)"));
    let out = cutpoint(&["check", "--allow-pending", &file]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn json_output_and_unreadable_files() {
    let orphan = fixture(ORPHAN);
    let openhands = fixture("openhands__wrong_initial_state.json");
    let out = cutpoint(&["check", "--json", &orphan, &openhands]);
    assert_eq!(out.status.code(), Some(2), "unreadable input wins");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
    assert_eq!(doc["clean"], false);
    let v = &doc["files"][0]["violations"][0];
    assert_eq!(v["call_id"], "call_BpTazJ89W9PntRqGPwDNfwEY");
    assert_eq!(v["pending_at_end"], false);
    assert_eq!(v["line"], 826);
    assert!(
        doc["files"][1]["error"]
            .as_str()
            .unwrap_or("")
            .contains("cannot tell the format")
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("pass --format with one of: records, anthropic"),
        "{err}"
    );
    let out = cutpoint(&["check", "/no/such/file"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A call id used again while its first call is unanswered: one pair and one call
/// pending, not two pairs (every call whose id had a result was counted as paired).
#[test]
fn stats_counts_a_reused_pending_id_as_one_pair() {
    let dir = std::env::temp_dir().join(format!("cutpoint-stats-reuse-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("log.jsonl");
    std::fs::write(
        &path,
        concat!(
            "{\"kind\":\"user\",\"tokens\":5}\n",
            "{\"kind\":\"tool_use\",\"call_id\":\"a\",\"tokens\":3}\n",
            "{\"kind\":\"tool_use\",\"call_id\":\"a\",\"tokens\":3}\n",
            "{\"kind\":\"tool_result\",\"call_id\":\"a\",\"tokens\":3}\n",
        ),
    )
    .unwrap();
    let out = cutpoint(&["stats", "--json", path.to_str().unwrap()]);
    std::fs::remove_dir_all(&dir).ok();
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["tool_calls"], 2);
    assert_eq!(doc["tool_results"], 1);
    assert_eq!(doc["tool_pairs"], 1);
    assert_eq!(doc["pending_calls"], 1);
}

#[test]
fn stats_reports_pairs_cuts_and_the_longest_pending_span() {
    let out = cutpoint(&["stats", "--json", &fixture(ORPHAN)]);
    assert_eq!(out.status.code(), Some(0));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(doc["format"], "codex");
    assert_eq!(doc["tool_calls"], 144);
    assert_eq!(doc["tool_pairs"], 143);
    assert_eq!(doc["pending_calls"], 1);
    assert_eq!(doc["messages"], 445);
    // After the orphan no cut is legal: the span runs from it to the end.
    let span = &doc["longest_pending_span"];
    let from = span["from_message"].as_u64().unwrap_or(0);
    assert_eq!(from + span["messages"].as_u64().unwrap_or(0), 445);
    assert!(doc["legal_cuts"].as_u64().unwrap_or(0) > 100);
    // The provider's own count of the last call's context, from the token_count events.
    assert!(
        doc["provider_reported_context_tokens"]
            .as_u64()
            .unwrap_or(0)
            > 10_000
    );
    let out = cutpoint(&[
        "stats",
        "--json",
        &fixture("claude-code__claude-reliability__coverage-test-fix.jsonl"),
    ]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    // The last assistant record's usage: input 0 + cache 271 + 22628 + output.
    assert!(
        doc["provider_reported_context_tokens"]
            .as_u64()
            .unwrap_or(0)
            >= 22_899
    );
    // The session's calibration: one point per assistant message with usage.
    let calibration = &doc["estimate_calibration"];
    assert_eq!(calibration["points"], 14);
    assert!(calibration["scale"].as_f64().unwrap_or(0.0) > 0.0);
    let out = cutpoint(&["stats", "--json", &fixture(CLEAN[0])]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(doc["provider_reported_context_tokens"].is_null());
    assert!(doc["estimate_calibration"].is_null());
}

#[test]
fn cut_prints_a_message_index_for_provider_formats() {
    let file = fixture("codex__localpush__rollout-12-41-04-parallel7.jsonl");
    let out = cutpoint(&["cut", "--target", "5000", "--lookback", "2000", &file]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cut: usize = stdout(&out).trim().parse().expect("a message index");
    assert!(cut > 0 && cut < 286, "{cut}");
    let again = cutpoint(&[
        "cut",
        "--format",
        "codex",
        "--target",
        "5000",
        "--lookback",
        "2000",
        &file,
    ]);
    assert_eq!(stdout(&again), stdout(&out));
    // Deferral: every cut after the orphan is illegal.
    let out = cutpoint(&[
        "cut",
        "--target",
        "15900",
        "--lookback",
        "10",
        &fixture(ORPHAN),
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("call_BpTazJ89W9PntRqGPwDNfwEY"));
}

#[test]
fn compact_keeps_the_shape_and_check_reads_it_back_clean() {
    for (name, target) in [
        ("codex__localpush__rollout-12-41-04-parallel7.jsonl", "4000"),
        (
            "claude-code__claude-reliability__python-to-rust-port.jsonl",
            "6000",
        ),
        (
            "chat__swe-agent__marshmallow-1867-function_calling_replace.traj",
            "4000",
        ),
    ] {
        let file = fixture(name);
        let out = cutpoint(&[
            "compact",
            "--target",
            target,
            "--lookback",
            "3000",
            "--keep-head",
            "1",
            "--summary",
            "Earlier work, summarized.",
            &file,
        ]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let original = std::fs::read_to_string(&file).expect("fixture");
        assert!(
            out.stdout.len() < original.len(),
            "{name}: something was compacted"
        );
        let text = stdout(&out);
        assert!(text.contains("Earlier work, summarized."), "{name}");
        assert!(text.contains("Tool calls summarized"), "{name}");
        if name.ends_with(".jsonl") {
            // The summary line carries its neighbours' timestamp.
            let line = text
                .lines()
                .find(|l| l.contains("Tool calls summarized"))
                .unwrap_or("");
            assert!(
                line.contains("\"timestamp\":\"2026-"),
                "{name}: {line:.200}"
            );
        }
        let back = common::cutpoint(&["check", "-"], &out.stdout);
        assert_eq!(back.status.code(), Some(0), "{name}: {}", stdout(&back));
    }
}

#[test]
fn compact_defers_with_exit_three_while_a_call_is_open() {
    // Only the orphan's own neighbourhood is in the window: every cut there is illegal.
    let out = cutpoint(&[
        "compact",
        "--format",
        "codex",
        "--target",
        "15900",
        "--lookback",
        "10",
        &fixture(ORPHAN),
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("deferred"));
}

/// An OpenAI Chat log with parallel calls (1 to 3 per turn, answered out of order).
fn parallel_chat(turns: usize) -> String {
    let mut items = vec![r#"{"role":"system","content":"Weather bot."}"#.to_owned()];
    for t in 0..turns {
        items.push(format!(r#"{{"role":"user","content":"Q{t}"}}"#));
        let n = 1 + t % 3;
        let calls: Vec<String> = (0..n)
            .map(|k| format!(r#"{{"id":"c{t}_{k}","type":"function","function":{{"name":"w","arguments":"{{\"k\":{k}}}"}}}}"#))
            .collect();
        items.push(format!(
            r#"{{"role":"assistant","content":null,"tool_calls":[{}]}}"#,
            calls.join(",")
        ));
        for k in (0..n).rev() {
            items.push(format!(
                r#"{{"role":"tool","tool_call_id":"c{t}_{k}","content":"{}"}}"#,
                "r".repeat(30 * (k + 1))
            ));
        }
        items.push(format!(r#"{{"role":"assistant","content":"A{t}"}}"#));
    }
    format!("[{}]", items.join(",\n"))
}

#[test]
fn compact_openai_chat_at_every_budget_passes_check() {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("parallel_chat.json");
    std::fs::write(&path, parallel_chat(6)).expect("temp file");
    let file = path.display().to_string();
    let stats = cutpoint(&["stats", "--json", &file]);
    let doc: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("JSON");
    let total = doc["tokens"].as_u64().expect("tokens");
    let (mut compacted, mut deferred) = (0, 0);
    for target in (0..=total + 1).step_by(3) {
        let target = target.to_string();
        let out = cutpoint(&[
            "compact",
            "--format",
            "openai-chat",
            "--target",
            &target,
            "--lookback",
            "40",
            "--keep-head",
            "1",
            &file,
        ]);
        match out.status.code() {
            Some(0) => compacted += 1,
            Some(3) => {
                deferred += 1;
                continue;
            }
            other => panic!("target {target}: exit {other:?}"),
        }
        let back = common::cutpoint(&["check", "--format", "openai-chat", "-"], &out.stdout);
        assert_eq!(
            back.status.code(),
            Some(0),
            "target {target}: {}",
            stdout(&back)
        );
    }
    assert!(
        compacted > 20 && deferred > 0,
        "{compacted} compacted, {deferred} deferred"
    );
}
