//! Issue 24, item 8 and item 4's Claude Code ordering case, end to end: what every
//! subcommand says about a file it cannot read, interrupted Codex turns, a target
//! inside the first live message, capped id lists, and a Claude Code result written
//! before the line holding its call (fixtures in tests/fixtures/readers, see
//! SOURCES.md there).

use crate::common::{self, cutpoint, text};

fn readers(name: &str) -> String {
    common::root("tests/fixtures/readers")
        .join(name)
        .display()
        .to_string()
}

fn transcripts(name: &str) -> String {
    common::root("tests/fixtures/transcripts")
        .join(name)
        .display()
        .to_string()
}

const COPILOT: &str = "copilot-cli-events.jsonl";
const ABORTED: &str = "codex-turn-aborted.jsonl";
const RESULT_FIRST: &str = "claude-code-result-before-use.jsonl";

/// The argument lists of every subcommand that reads a log, for `file`.
fn readers_of(file: &str) -> Vec<Vec<String>> {
    let f = file.to_owned();
    [
        vec!["stats"],
        vec!["check"],
        vec!["check", "--allow-pending"],
        vec!["cut", "--target", "10", "--lookback", "5"],
        vec!["cut", "--for", "anthropic-compaction", "--keep", "10"],
        vec!["compact", "--target", "10"],
        vec!["compact", "--strategy", "clear", "--budget", "10"],
        vec!["compact", "--strategy", "pipeline", "--budget", "10"],
    ]
    .into_iter()
    .map(|a| {
        let mut a: Vec<String> = a.into_iter().map(str::to_owned).collect();
        a.push(f.clone());
        a
    })
    .collect()
}

fn run(args: &[String]) -> std::process::Output {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    cutpoint(&args, b"")
}

#[test]
fn an_unknown_json_lines_kind_gets_the_same_answer_from_every_subcommand() {
    let file = readers(COPILOT);
    for args in readers_of(&file) {
        let out = run(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!("{file}: cannot tell the format")),
            "{args:?}: {err}"
        );
        // What was seen: the lines' `type`s.
        assert!(
            err.contains("\"session.start\"") && err.contains("\"user.message\""),
            "{args:?}: {err}"
        );
        assert!(!err.contains("unknown field"), "{args:?}: {err}");
    }
}

#[test]
fn a_format_named_for_a_file_of_another_kind_says_so() {
    let copilot = readers(COPILOT);
    let array = transcripts("openai-chat__tau-bench__gpt-4o-airline-traj173.json");
    // A JSON array (OpenHands events), once `EOF while parsing a list`.
    let list = transcripts("openhands__wrong_initial_state.json");
    let claude = transcripts("claude-code__claude-reliability__coverage-test-fix.jsonl");
    let cases = [
        ("claude-code", copilot.clone()),
        ("codex", copilot.clone()),
        ("claude-code", array.clone()),
        ("claude-code", list.clone()),
        ("records", list.clone()),
        ("codex", array.clone()),
        ("codex", claude.clone()),
        ("anthropic", claude.clone()),
        ("gemini-cli", copilot.clone()),
        // Records JSONL named is streamed, judged by its first 64 KiB, which end
        // inside a line of these two (once read as records: `unknown field`).
        (
            "records",
            transcripts("codex__localpush__rollout-12-41-04-parallel7.jsonl"),
        ),
        (
            "records",
            transcripts("claude-code__spotter__4d5611e5-main.jsonl"),
        ),
    ];
    for (format, file) in cases {
        for sub in [&["stats"][..], &["check"], &["compact", "--target", "10"]] {
            let mut args: Vec<&str> = sub.to_vec();
            args.extend(["--format", format, &file]);
            let out = cutpoint(&args, b"");
            let err = text(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("{file}: not {format} input")),
                "{args:?}: {err}"
            );
            assert!(!err.contains("EOF while parsing"), "{args:?}: {err}");
            assert!(!err.contains("unknown field"), "{args:?}: {err}");
        }
    }
}

/// A file that starts with a byte order mark (as some editors save JSON) is read
/// without it, with a note: every subcommand answers what it answers for the file
/// without one, byte for byte, in every format, named or detected.
#[test]
fn a_byte_order_mark_is_skipped_with_a_note() {
    let files = [
        transcripts("claude-code__claude-reliability__coverage-test-fix.jsonl"),
        transcripts("codex__localpush__rollout-13-19-38-trailing-call.jsonl"),
        transcripts("openai-chat__tau-bench__gpt-4o-airline-traj173.json"),
        transcripts("gemini-cli-session__codemie-code__session-2025-12-01T21-45-5b959dae.json"),
        common::root("examples/data/session.jsonl")
            .display()
            .to_string(),
    ];
    for file in files {
        let plain = std::fs::read(&file).unwrap();
        let mut marked = b"\xEF\xBB\xBF".to_vec();
        marked.extend_from_slice(&plain);
        let format = cutpoint(&["stats", "--json", "-"], &plain);
        let format = text(&format.stdout);
        let format = format
            .split("\"format\":\"")
            .nth(1)
            .and_then(|f| f.split('"').next())
            .unwrap_or_else(|| panic!("{file}: {format}"))
            .to_owned();
        let mut runs = readers_of("-");
        runs.push(vec![
            "check".into(),
            "--format".into(),
            format.clone(),
            "-".into(),
        ]);
        for args in runs {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let want = cutpoint(&args, &plain);
            let got = cutpoint(&args, &marked);
            let err = text(&got.stderr);
            assert_eq!(
                got.status.code(),
                want.status.code(),
                "{file} {args:?}: {err}"
            );
            assert_eq!(got.stdout, want.stdout, "{file} {args:?}");
            assert!(
                err.starts_with(
                    "cutpoint: <stdin>: skipped the byte order mark (U+FEFF) the input starts with"
                ),
                "{file} {args:?}: {err}"
            );
            assert_eq!(
                err.split_once('\n').map(|(_, rest)| rest).unwrap_or(""),
                text(&want.stderr),
                "{file} {args:?}"
            );
        }
    }
}

#[test]
fn an_interrupted_codex_turn_is_not_a_violation() {
    let file = readers(ABORTED);
    for flags in [&[][..], &["--allow-pending"]] {
        let mut args = vec!["check"];
        args.extend(flags);
        args.push(&file);
        let out = cutpoint(&args, b"");
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
    }
    // Its compactions inherit nothing.
    for strategy in ["clear", "summarize", "pipeline"] {
        let out = cutpoint(
            &["compact", "--strategy", strategy, "--budget", "300", &file],
            b"",
        );
        assert!(
            matches!(out.status.code(), Some(0 | 3)),
            "{strategy}: {}",
            text(&out.stderr)
        );
        if out.status.code() == Some(0) {
            let dir = std::env::temp_dir().join(format!(
                "cutpoint-aborted-{strategy}-{}",
                std::process::id()
            ));
            std::fs::write(&dir, &out.stdout).unwrap();
            let path = dir.display().to_string();
            let check = cutpoint(&["check", &path], b"");
            let before = violations(&["check", "--before", &file, &path]);
            let _ = std::fs::remove_file(&dir);
            assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
            assert!(before.is_empty(), "{strategy}: {before:?}");
        }
    }
}

#[test]
fn a_target_inside_the_first_live_message_defers_like_one_a_message_later() {
    let file = transcripts("claude-code__spotter__4d5611e5-main.jsonl");
    // Message 123 (the `isCompactSummary` record, about 4,000 tokens) opens the live
    // history; 6,000 lands in message 133, which already deferred.
    for target in ["100", "3000", "6000"] {
        let out = cutpoint(&["compact", "--target", target, &file], b"");
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "target {target}: {err}");
        assert!(err.starts_with("cutpoint: deferred: "), "{err}");
        assert!(
            err.contains("defer compaction to the turn boundary"),
            "{err}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn deferrals_list_at_most_ten_ids_and_a_count() {
    let mut log = String::new();
    for i in 0..231 {
        log.push_str(&format!(
            "{{\"kind\":\"tool_use\",\"call_id\":\"call_{i:03}\",\"tokens\":10}}\n"
        ));
    }
    for args in [
        &[
            "cut",
            "--target",
            "5000",
            "--lookback",
            "50",
            "--format",
            "records",
        ][..],
        &["compact", "--target", "5000", "--format", "records"],
    ] {
        let out = cutpoint(args, log.as_bytes());
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{err}");
        assert!(err.contains("waiting on call_000, call_001"), "{err}");
        assert!(err.contains("call_009 \u{2026} and 221 more"), "{err}");
        assert!(!err.contains("call_010"), "{err}");
    }
}

#[test]
fn a_result_before_its_call_survives_clear_thinking() {
    let file = readers(RESULT_FIRST);
    let out = cutpoint(&["check", &file], b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stdout));
    let out = cutpoint(&["compact", "--strategy", "clear-thinking", &file], b"");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("(1 edits)"),
        "{}",
        text(&out.stderr)
    );
    let path = std::env::temp_dir().join(format!("cutpoint-result-first-{}", std::process::id()));
    std::fs::write(&path, &out.stdout).unwrap();
    let path = path.display().to_string();
    let check = cutpoint(&["check", &path], b"");
    let before = cutpoint(&["check", "--before", &file, &path], b"");
    let _ = std::fs::remove_file(&path);
    assert_eq!(check.status.code(), Some(0), "{}", text(&check.stdout));
    assert_eq!(before.status.code(), Some(0), "{}", text(&before.stdout));
}

/// The violations `check` prints for `args`, as `rule call_id` (lines shift in a
/// rewrite; what breaks does not).
fn violations(args: &[&str]) -> Vec<String> {
    let out = cutpoint(args, b"");
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{args:?}: {}",
        text(&out.stderr)
    );
    let mut v: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| {
            let mut words = l.split(": ").skip(1);
            let rule = words.next().unwrap_or("").to_owned();
            let id = words.next().and_then(|w| w.split(' ').next()).unwrap_or("");
            format!("{rule} {id}")
        })
        // Preserved thinking's prefix binding: every client-side strategy edits the
        // prefix of the reasoning after it, and the provider-aware mode that avoids it
        // (issue 21, item 1) is not built yet; `tests/it/reasoning_strategies.rs`
        // counts those, by strategy.
        .filter(|v| !v.starts_with("reasoning/prefix-changed "))
        .collect();
    v.sort();
    v
}

/// Issue 24 item 4 on this branch's readers: every strategy's output (and the
/// `--keep` route's) of every real transcript fixture passes `check` and `check
/// --before ORIGINAL` with nothing the original did not already break. The failures
/// are listed together.
#[test]
fn every_strategy_output_of_every_real_fixture_is_clean_by_check_and_check_before() {
    let dir = common::root("tests/fixtures/transcripts");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("the fixtures")
        .map(|e| e.expect("an entry").path().display().to_string())
        .filter(|p| !p.ends_with("SOURCES.md"))
        .collect();
    files.push(readers(RESULT_FIRST));
    files.push(readers(ABORTED));
    files.sort();
    let tmp = std::env::temp_dir().join(format!("cutpoint-sweep-{}", std::process::id()));
    let out_path = tmp.display().to_string();
    let (mut failures, mut runs) = (Vec::new(), 0);
    for file in &files {
        let original = cutpoint(&["check", file], b"");
        if original.status.code() == Some(2) {
            continue; // not a transcript cutpoint reads (the tau-bench results file)
        }
        let before = violations(&["check", file]);
        let stats = cutpoint(&["stats", "--json", file], b"");
        let tokens = serde_json::from_slice::<serde_json::Value>(&stats.stdout)
            .ok()
            .and_then(|v| v["tokens"].as_u64())
            .expect("stats prints tokens");
        let budget = (tokens * 2 / 5).to_string();
        let keep = (tokens / 2).to_string();
        let routes: Vec<Vec<&str>> = [
            "clear",
            "clear-thinking",
            "digest",
            "summarize",
            "slide",
            "truncate",
            "pipeline",
        ]
        .iter()
        .map(|s| vec!["compact", "--strategy", s, "--budget", &budget])
        .chain(std::iter::once(vec!["compact", "--keep", &keep]))
        .collect();
        for route in routes {
            let mut args = route.clone();
            args.push(file);
            let out = cutpoint(&args, b"");
            if out.status.code() != Some(0) {
                continue; // deferred, or the budget cannot be met: no output to judge
            }
            runs += 1;
            std::fs::write(&tmp, &out.stdout).expect("a temporary file");
            for check in [
                vec!["check", &out_path],
                vec!["check", "--before", file, &out_path],
            ] {
                let after = violations(&check);
                let new: Vec<&String> = after.iter().filter(|v| !before.contains(v)).collect();
                if !new.is_empty() {
                    failures.push(format!("{} {route:?} {check:?}: {new:?}", file));
                }
            }
        }
    }
    let _ = std::fs::remove_file(&tmp);
    assert!(runs > 50, "only {runs} outputs were judged");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
