//! `cutpoint compact --strategy ...` end to end: every strategy and the pipeline on
//! records JSONL and on real transcripts, the output read back clean by `check`, exit 3
//! (and nothing on stdout) when the budget cannot be met, the `--report` JSON lines,
//! and `clear_at_least` all or nothing.

use crate::common;

use common::{cutpoint, exits, root, text};

/// A session of three turns: a large result, thinking, and a call in the last one.
const LOG: &str = r#"{"kind":"user","tokens":1000}
{"kind":"assistant","tokens":300,"reasoning":"signed"}
{"kind":"tool_use","call_id":"a","tokens":20,"bound":true,"name":"bash","arguments":{"command":"pytest -x"}}
{"kind":"tool_result","call_id":"a","tokens":3000,"status":"error","content":"3 failed\nmore"}
{"kind":"assistant","tokens":40}
{"kind":"user","tokens":80}
{"kind":"assistant","tokens":200,"reasoning":"plain"}
{"kind":"tool_use","call_id":"b","tokens":20,"bound":true,"name":"grep","arguments":{"pattern":"TODO"}}
{"kind":"tool_result","call_id":"b","tokens":2000,"status":"ok","content":"src/a.rs:1: TODO"}
{"kind":"assistant","tokens":40}
{"kind":"user","tokens":60}
{"kind":"assistant","tokens":100,"reasoning":"signed"}
{"kind":"tool_use","call_id":"c","tokens":20,"bound":true,"name":"bash","arguments":{"command":"cargo test"}}
{"kind":"tool_result","call_id":"c","tokens":500,"status":"ok","content":"ok"}
"#;

fn check_clean(log: &str, format: &str) {
    let out = cutpoint(
        &["check", "--allow-pending", "--format", format, "-"],
        log.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}{log}", text(&out.stdout));
}

#[test]
fn every_strategy_prints_a_log_that_check_reads_back_clean() {
    for strategy in [
        "clear",
        "clear-thinking",
        "digest",
        "summarize",
        "slide",
        "truncate",
    ] {
        // summarize is one summary within a budget: it needs one.
        let budget: &[&str] = if strategy == "summarize" {
            &["--budget", "2000"]
        } else {
            &[]
        };
        let args = ["compact", "--strategy", strategy, "--keep-head", "1"];
        // clear's own flag, to clear only (the others refuse it by name).
        let keep: &[&str] = if strategy == "clear" {
            &["--keep-tool-uses", "1"]
        } else {
            &[]
        };
        let out = cutpoint(&[&args[..], keep, budget, &["-"]].concat(), LOG.as_bytes());
        assert_eq!(
            out.status.code(),
            Some(0),
            "{strategy}: {}",
            text(&out.stderr)
        );
        let log = text(&out.stdout);
        assert!(
            log.lines().count() > usize::from(strategy != "truncate"),
            "{strategy}: {log}"
        );
        check_clean(&log, "records");
        // Every call id is still there, unless truncate named it.
        for id in ["\"a\"", "\"b\"", "\"c\""] {
            assert!(
                log.contains(id) || strategy == "truncate",
                "{strategy}: {id} vanished: {log}"
            );
        }
    }
}

#[test]
fn clear_replaces_old_results_keeps_the_last_and_excluded_tools() {
    let out = cutpoint(
        &[
            "compact",
            "--strategy",
            "clear",
            "--keep-tool-uses",
            "1",
            "--exclude-tools",
            "grep",
            "--clear-tool-inputs",
            "--report",
            "-",
        ],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = text(&out.stdout);
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines[3].contains(r#""content":"[tool result cleared to save context]""#),
        "{}",
        lines[3]
    );
    assert!(lines[2].contains(r#""arguments":{}"#), "{}", lines[2]);
    assert_eq!(lines[8], LOG.lines().nth(8).unwrap(), "grep is excluded");
    assert_eq!(
        lines[13],
        LOG.lines().nth(13).unwrap(),
        "the last tool use is kept"
    );
    let report: Vec<serde_json::Value> = text(&out.stderr)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    assert_eq!(report[0]["strategy"], "clear");
    assert_eq!(report[0]["outcome"], "ran");
    assert_eq!(report[0]["cleared_results"], 1);
    assert_eq!(report[0]["left_alone"]["excluded-tool"], 1);
    assert_eq!(report[1]["met_budget"], true);
}

#[test]
fn an_unmet_clear_at_least_changes_nothing() {
    let canonical: String = {
        // The log as cutpoint writes it: compacting nothing prints the same bytes.
        let out = cutpoint(
            &[
                "compact",
                "--strategy",
                "truncate",
                "--keep-head",
                "99",
                "-",
            ],
            LOG.as_bytes(),
        );
        text(&out.stdout)
    };
    let out = cutpoint(
        &[
            "compact",
            "--strategy",
            "clear",
            "--keep-tool-uses",
            "0",
            "--clear-at-least",
            "999999",
            "--report",
            "-",
        ],
        canonical.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), canonical, "byte-identical");
    assert!(
        text(&out.stderr).contains(r#""reason":"below-clear-at-least""#),
        "{}",
        text(&out.stderr)
    );
    // With a budget the clear cannot meet: exit 3, nothing on stdout.
    let out = cutpoint(
        &[
            "compact",
            "--strategy",
            "clear",
            "--keep-tool-uses",
            "0",
            "--clear-at-least",
            "999999",
            "--budget",
            "100",
            "-",
        ],
        canonical.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(text(&out.stdout), "");
    assert!(
        text(&out.stderr).contains("clear_at_least"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn over_budget_exits_three_and_names_what_blocks() {
    let out = cutpoint(
        &[
            "compact",
            "--strategy",
            "digest",
            "--budget",
            "10",
            "--keep-head",
            "1",
            "--report",
            "-",
        ],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    let err = text(&out.stderr);
    assert!(err.contains(r#""met_budget":false"#), "{err}");
    assert!(err.contains("over budget"), "{err}");
    // Within budget: exit 0.
    let out = cutpoint(
        &[
            "compact",
            "--strategy",
            "pipeline",
            "--preset",
            "aggressive",
            "--context-window",
            "9000",
            "--max-output",
            "4000",
            "-",
        ],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    check_clean(&text(&out.stdout), "records");
}

#[test]
fn bad_flag_combinations_are_refused() {
    let out = cutpoint(
        &["compact", "--strategy", "clear", "--target", "5", "-"],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(2));
    exits(
        &["compact", "--strategy", "squash", "-"],
        LOG.as_bytes(),
        2,
        "unknown strategy",
    );
    let out = cutpoint(&["compact", "--strategy", "pipeline", "-"], LOG.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    // --budget with no --strategy is one summary within the budget; not with a target.
    let out = cutpoint(
        &["compact", "--budget", "5", "--target", "9", "-"],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(2), "--budget with --target");
    let out = cutpoint(
        &["compact", "--budget", "5", "--keep", "9", "-"],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(2), "--budget with --keep");
}

#[test]
fn real_transcripts_come_back_in_their_format_and_check_clean() {
    for (file, format) in [
        (
            "claude-code__claude-reliability__python-to-rust-port.jsonl",
            "claude-code",
        ),
        (
            "codex__localpush__rollout-12-41-04-parallel7.jsonl",
            "codex",
        ),
        (
            "chat__swe-agent__marshmallow-1867-function_calling_replace.traj",
            "openai-chat",
        ),
    ] {
        let path = root(&format!("tests/fixtures/transcripts/{file}"));
        let input = std::fs::read_to_string(&path).unwrap();
        for strategy in ["clear", "digest", "summarize", "pipeline"] {
            // The preset is a pipeline's (the others refuse it by name).
            let preset: &[&str] = if strategy == "pipeline" {
                &["--preset", "aggressive"]
            } else {
                &[]
            };
            let args = [
                "compact",
                "--strategy",
                strategy,
                "--keep-head",
                "1",
                "--budget",
                "100000000",
            ];
            let out = cutpoint(
                &[&args[..], preset, &[path.to_str().unwrap()]].concat(),
                b"",
            );
            assert_eq!(
                out.status.code(),
                Some(0),
                "{file} {strategy}: {}",
                text(&out.stderr)
            );
            let log = text(&out.stdout);
            if strategy == "pipeline" {
                assert_eq!(log, input, "{file}: within budget, nothing changes");
            }
            check_clean(&log, format);
        }
        let out = cutpoint(
            &[
                "compact",
                "--strategy",
                "digest",
                "--keep-head",
                "1",
                path.to_str().unwrap(),
            ],
            b"",
        );
        assert!(
            text(&out.stdout).len() < input.len(),
            "{file}: a digest is smaller"
        );
    }
}

#[test]
fn summarize_takes_its_prose_from_summary_and_keeps_the_ledger() {
    let out = cutpoint(
        &[
            "compact",
            "--strategy",
            "summarize",
            "--keep-head",
            "1",
            "--budget",
            "2000",
            "--summary",
            "ran the tests twice",
            "-",
        ],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = text(&out.stdout);
    let summary = log.lines().nth(1).expect("a summary line");
    assert!(
        summary.contains(r#""text":"ran the tests twice""#),
        "{summary}"
    );
    assert!(
        summary.contains(r#""call_id":"a""#) && summary.contains(r#""call_id":"b""#),
        "{summary}"
    );
    assert!(
        log.contains(r#""call_id":"c""#),
        "the last turn is kept: {log}"
    );
    check_clean(&log, "records");
}

/// The real transcripts in `tests/fixtures/transcripts`, sorted, each as its file
/// name, its path and what `stats --json` says of it; a file `stats` does not read as
/// one transcript (a tau-bench results file) is left out.
fn transcript_stats() -> Vec<(String, String, serde_json::Value)> {
    let mut files: Vec<_> = std::fs::read_dir(root("tests/fixtures/transcripts"))
        .expect("the fixtures")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.extension().is_some_and(|e| e != "md"))
        .collect();
    files.sort();
    files
        .into_iter()
        .filter_map(|path| {
            let file = path.file_name()?.to_string_lossy().into_owned();
            let p = path.to_str()?.to_owned();
            let stats = cutpoint(&["stats", "--json", &p], b"");
            (stats.status.code() == Some(0)).then(|| {
                let v = serde_json::from_slice(&stats.stdout).expect("stats --json");
                (file, p, v)
            })
        })
        .collect()
}

/// `summarize` means one thing (issue 24): `--strategy summarize --budget B` is the
/// one summary that `--budget B` alone makes, and Python's `strategy="summarize"`
/// (`python/tests/test_cli_parity.py` holds the Python side), byte for byte on every
/// real transcript, with a `--report` line that says what was done; it needs a
/// budget, and refuses `--keep-turns`, a floor it could not keep, by name.
#[test]
fn strategy_summarize_is_the_one_summary_route() {
    let mut compared = 0;
    for (file, path, v) in transcript_stats() {
        let p = path.as_str();
        let budget = (v["tokens"].as_u64().expect("tokens") / 2)
            .max(1)
            .to_string();
        let strategy = cutpoint(
            &[
                "compact",
                "--strategy",
                "summarize",
                "--report",
                "--budget",
                &budget,
                p,
            ],
            b"",
        );
        let alone = cutpoint(&["compact", "--budget", &budget, p], b"");
        assert_eq!(strategy.status.code(), alone.status.code(), "{file}");
        assert_eq!(text(&strategy.stdout), text(&alone.stdout), "{file}");
        if strategy.status.code() == Some(0) {
            compared += 1;
            let line = text(&strategy.stderr);
            let report = line
                .lines()
                .find(|l| l.starts_with('{'))
                .unwrap_or_else(|| panic!("{file}: no report line in {line}"));
            let v: serde_json::Value = serde_json::from_str(report).expect("a JSON line");
            assert_eq!(v["strategy"], "summarize", "{file}");
            assert!(
                v["outcome"] == "ran" || v["outcome"] == "within-budget",
                "{file}: {v}"
            );
            assert_eq!(v["met_budget"], true, "{file}: {v}");
        }
    }
    assert!(compared > 3, "only {compared} transcripts compacted");
    exits(
        &["compact", "--strategy", "summarize", "-"],
        LOG.as_bytes(),
        2,
        "needs --budget",
    );
    exits(
        &[
            "compact",
            "--strategy",
            "summarize",
            "--budget",
            "2000",
            "--keep-turns",
            "1",
            "-",
        ],
        LOG.as_bytes(),
        2,
        "--keep-turns does not apply",
    );
}

/// The tokens `stats` counts for a log.
fn stats_tokens(log: &[u8]) -> u64 {
    let out = cutpoint(&["stats", "--json", "-"], log);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats --json");
    v["tokens"].as_u64().expect("tokens")
}

/// `compact [--strategy S] --budget B -`; no `--strategy` for an empty `strategy`.
fn budget_args<'a>(strategy: &'a str, budget: &'a str) -> Vec<&'a str> {
    let mut args = vec!["compact"];
    if !strategy.is_empty() {
        args.extend(["--strategy", strategy]);
    }
    args.extend(["--budget", budget, "-"]);
    args
}

/// A budget met is met by the printed log, as `stats` reads it back: the strategies
/// size their digests and summaries by an estimate, and the written JSON can read
/// larger, so the run goes again on its output or says it is over budget (exit 3).
#[test]
fn a_budget_met_holds_for_the_output_read_back() {
    let dir = root("tests/fixtures/transcripts");
    let mut exits = std::collections::BTreeMap::new();
    for name in [
        "codex__localpush__rollout-12-47-42-orphan-call.jsonl",
        "claude-code__spotter__4d5611e5-main.jsonl",
        "gemini-cli-session__codemie-code__session-2025-12-01T21-45-5b959dae.json",
        "openai-chat__tau-bench__gpt-4o-airline-traj196-reused-ids.json",
    ] {
        let input = std::fs::read(dir.join(name)).unwrap();
        let total = stats_tokens(&input);
        // "": no --strategy, one summary within the budget (Python's `summarize`).
        for strategy in ["clear", "digest", "summarize", "slide", "pipeline", ""] {
            for share in [60, 80] {
                let budget = (total * share / 100).to_string();
                let out = cutpoint(&budget_args(strategy, &budget), &input);
                let code = out.status.code();
                *exits.entry(code).or_insert(0) += 1;
                match code {
                    Some(0) => assert!(
                        stats_tokens(&out.stdout) <= total * share / 100,
                        "{name} {strategy} {budget}: the output reads over the budget"
                    ),
                    Some(3) => assert!(out.stdout.is_empty(), "{name} {strategy}"),
                    other => panic!("{name} {strategy}: exit {other:?}: {}", text(&out.stderr)),
                }
            }
        }
    }
    assert!(exits.get(&Some(0)).copied().unwrap_or(0) >= 10, "{exits:?}");
}

/// The fixed point from the command line, records JSONL and every provider format:
/// a second `compact [--strategy S] --budget B` on the output of a first that met `B`
/// prints its input byte for byte, exits 0 and says the log is within budget.
#[test]
fn compacting_an_output_again_with_its_budget_changes_nothing() {
    let files = [
        root("examples/data/session.jsonl"),
        root(
            "tests/fixtures/transcripts/claude-code__claude-reliability__python-to-rust-port.jsonl",
        ),
        root("tests/fixtures/transcripts/codex__localpush__rollout-12-41-04-parallel7.jsonl"),
        root("tests/fixtures/transcripts/openai-chat__tau-bench__gpt-4o-airline-traj173.json"),
    ];
    let mut fixed = 0;
    for file in &files {
        let input = std::fs::read(file).unwrap();
        let stats = cutpoint(&["stats", "--json", "-"], &input);
        let v: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
        let total = v["tokens"].as_u64().unwrap();
        for strategy in [
            "clear",
            "digest",
            "summarize",
            "slide",
            "truncate",
            "pipeline",
            "",
        ] {
            for percent in [40, 70] {
                let budget = (total * percent / 100).to_string();
                let args = budget_args(strategy, &budget);
                let once = cutpoint(&args, &input);
                if once.status.code() != Some(0) {
                    continue;
                }
                let twice = cutpoint(&args, &once.stdout);
                let case = format!("{} {strategy} at {percent}%", file.display());
                assert_eq!(twice.status.code(), Some(0), "{case}");
                assert!(
                    twice.stdout == once.stdout,
                    "{case}: the second pass changed it"
                );
                let err = text(&twice.stderr);
                assert!(err.contains("within budget already"), "{case}: {err}");
                fixed += 1;
            }
        }
    }
    assert!(fixed >= 20, "only {fixed} first passes met their budget");
}

/// Keep-thinking-valid (preserved thinking's prefix binding), on by default: on a
/// real Claude Code session with signed thinking, a summarize or digest at 60% whose
/// output with `--allow-invalidated-thinking` `check --before` reports as
/// `reasoning/prefix-changed` (and says so itself, with the same count) is written by
/// default, and with `--keep-thinking-valid`, with those blocks stripped and nothing
/// reported; a summary at a target (`--target`) is kept valid the same way. On a Codex
/// rollout that is one long turn, where no reasoning item can be stripped, the output
/// is a simple compaction (every call of the input in its ledger, nothing invalid); on
/// a Claude Code session with a call in flight, exit 3 naming the message, nothing on
/// stdout.
#[test]
fn keep_thinking_valid_strips_invalidated_thinking_or_exits_three() {
    let prefix_changed = |original: &str, output: &[u8], label: &str| -> usize {
        let path = std::env::temp_dir().join(format!(
            "cutpoint-keep-thinking-{label}-{}",
            std::process::id()
        ));
        std::fs::write(&path, output).unwrap();
        let out = cutpoint(
            &[
                "check",
                "--allow-pending",
                "--before",
                original,
                &path.display().to_string(),
            ],
            b"",
        );
        let _ = std::fs::remove_file(&path);
        text(&out.stdout)
            .matches("reasoning/prefix-changed")
            .count()
    };
    let tokens = |file: &str| -> u64 {
        let out = cutpoint(&["stats", file], b"");
        text(&out.stdout)
            .lines()
            .find_map(|l| l.strip_prefix("tokens: "))
            .and_then(|n| n.trim().parse().ok())
            .expect("stats prints tokens")
    };
    // The count in the warning a printed output comes with, if any.
    let warned = |stderr: &[u8]| -> Option<usize> {
        let err = text(stderr);
        let rest = err.split("warning: the output invalidates ").nth(1)?;
        rest.split_whitespace().next()?.parse().ok()
    };
    let claude = root("tests/fixtures/transcripts/claude-code__spotter__4d5611e5-main.jsonl")
        .display()
        .to_string();
    let budget = (tokens(&claude) * 60 / 100).to_string();
    for strategy in ["summarize", "digest"] {
        let args = [
            "compact",
            "--strategy",
            strategy,
            "--budget",
            &budget,
            &claude,
        ];
        let mut allow = args.to_vec();
        allow.push("--allow-invalidated-thinking");
        let plain = cutpoint(&allow, b"");
        assert_eq!(plain.status.code(), Some(0), "{}", text(&plain.stderr));
        let changed = prefix_changed(&claude, &plain.stdout, strategy);
        assert!(
            changed > 0,
            "{strategy}: the plain output invalidates thinking (the check can fail)"
        );
        // The plain run says so itself, with the count `check --before` finds.
        assert_eq!(
            warned(&plain.stderr),
            Some(changed),
            "{strategy}: {}",
            text(&plain.stderr)
        );
        let mut keep = args.to_vec();
        keep.push("--keep-thinking-valid");
        let kept = cutpoint(&keep, b"");
        assert_eq!(kept.status.code(), Some(0), "{}", text(&kept.stderr));
        // The default is the setting.
        let default = cutpoint(&args, b"");
        assert_eq!(
            default.stdout, kept.stdout,
            "{strategy}: the default keeps thinking valid"
        );
        assert_eq!(
            prefix_changed(&claude, &kept.stdout, strategy),
            0,
            "{strategy}"
        );
        assert_eq!(warned(&kept.stderr), None, "{}", text(&kept.stderr));
        assert!(
            kept.stdout.len() < plain.stdout.len(),
            "{strategy}: thinking stripped"
        );
    }
    // One summary at a target says the same of what it writes.
    let target = (tokens(&claude) * 60 / 100).to_string();
    let at_target = cutpoint(
        &[
            "compact",
            "--target",
            &target,
            "--allow-invalidated-thinking",
            &claude,
        ],
        b"",
    );
    assert_eq!(
        at_target.status.code(),
        Some(0),
        "{}",
        text(&at_target.stderr)
    );
    let changed = prefix_changed(&claude, &at_target.stdout, "target");
    assert_eq!(
        warned(&at_target.stderr).unwrap_or(0),
        changed,
        "{}",
        text(&at_target.stderr)
    );
    assert!(
        changed > 0,
        "the summary at the target invalidates thinking"
    );
    // And --keep-thinking-valid strips it there too, in the same code.
    let kept = cutpoint(
        &[
            "compact",
            "--target",
            &target,
            "--keep-thinking-valid",
            &claude,
        ],
        b"",
    );
    assert_eq!(kept.status.code(), Some(0), "{}", text(&kept.stderr));
    assert_eq!(prefix_changed(&claude, &kept.stdout, "target-kept"), 0);
    assert_eq!(warned(&kept.stderr), None, "{}", text(&kept.stderr));
    assert!(kept.stdout.len() < at_target.stdout.len());
    let default = cutpoint(&["compact", "--target", &target, &claude], b"");
    assert_eq!(
        default.stdout, kept.stdout,
        "the default keeps the summary's thinking valid"
    );
    let codex =
        root("tests/fixtures/transcripts/codex__localpush__rollout-12-41-04-parallel7.jsonl")
            .display()
            .to_string();
    let budget = (tokens(&codex) * 60 / 100).to_string();
    let out = cutpoint(
        &[
            "compact",
            "--strategy",
            "summarize",
            "--budget",
            &budget,
            &codex,
        ],
        b"",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("simple compaction instead"), "{err}");
    assert_eq!(prefix_changed(&codex, &out.stdout, "codex-simple"), 0);
    // Every call of the input is in the simple compaction's ledger (OpenAI's call ids
    // are `call_` and 24 characters; `call_id` and `function_call_output` are keys).
    let ids = |bytes: &[u8]| -> std::collections::BTreeSet<String> {
        text(bytes)
            .split("call_")
            .skip(1)
            .map(|rest| {
                rest.chars()
                    .take_while(char::is_ascii_alphanumeric)
                    .collect::<String>()
            })
            .filter(|id| id.len() == 24)
            .collect()
    };
    let input = std::fs::read(&codex).unwrap();
    assert_eq!(ids(&out.stdout), ids(&input), "a call is lost");
    // The same with allowed invalidated thinking is the summary the stage wrote, and
    // it invalidates reasoning.
    let allowed = cutpoint(
        &[
            "compact",
            "--strategy",
            "summarize",
            "--budget",
            &budget,
            "--allow-invalidated-thinking",
            &codex,
        ],
        b"",
    );
    assert_eq!(allowed.status.code(), Some(0), "{}", text(&allowed.stderr));
    assert!(prefix_changed(&codex, &allowed.stdout, "codex-allowed") > 0);
    // A call in flight at the end keeps its turn: no simple compaction can help.
    let inflight = root(
        "tests/fixtures/transcripts/claude-code__entireio-cli__ec-38b74f08e3-3-orphan-interrupts.jsonl",
    )
    .display()
    .to_string();
    let budget = (tokens(&inflight) * 70 / 100).to_string();
    let out = cutpoint(
        &[
            "compact",
            "--strategy",
            "pipeline",
            "--budget",
            &budget,
            &inflight,
        ],
        b"",
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{err}");
    assert!(out.stdout.is_empty());
    assert!(
        err.contains("cannot be stripped") && err.contains("a call is still in flight"),
        "{err}"
    );
}

/// `--calibrated`: a budget in the provider's reported tokens is the session's fit
/// inverted (the largest estimate the fit counts within it, checked here against the
/// fit `stats` prints), and nothing else: each route writes the same bytes as with
/// that estimate as its budget. Every real transcript that reports usage; a file that
/// reports none, a target, and an overhead over the budget are refused by name.
#[test]
fn calibrated_budgets_are_the_fit_inverted_and_nothing_else() {
    let mut compacted = 0;
    let mut calibrated_files = 0;
    for (file, path, v) in transcript_stats() {
        let p = path.as_str();
        let fit = &v["estimate_calibration"];
        if fit.is_null() {
            // No usage reported: refused by name, nothing written.
            let out = cutpoint(&["compact", "--calibrated", "--budget", "1000", p], b"");
            assert_eq!(out.status.code(), Some(2), "{file}");
            assert!(out.stdout.is_empty(), "{file}");
            let err = text(&out.stderr);
            assert!(
                err.contains("--calibrated") && err.contains("reports none"),
                "{file}: {err}"
            );
            continue;
        }
        calibrated_files += 1;
        let (scale, overhead) = (
            fit["scale"].as_f64().unwrap(),
            fit["overhead"].as_f64().unwrap(),
        );
        let apply = |e: u64| (overhead + scale * e as f64).round().max(0.0) as u64;
        let tokens = v["tokens"].as_u64().expect("tokens");
        // Budgets that need a compaction, one that is met already, one under the overhead.
        for reported in [
            apply(tokens * 6 / 10),
            apply(tokens * 8 / 10),
            apply(tokens * 2),
        ] {
            let reported_s = reported.to_string();
            for route in [
                &["--strategy", "summarize"][..],
                &[],
                &["--strategy", "pipeline", "--preset", "balanced"],
                &["--strategy", "clear"],
            ] {
                let mut args = vec![
                    "compact",
                    "--report",
                    "--calibrated",
                    "--budget",
                    &reported_s,
                ];
                if route.is_empty() {
                    args.remove(1); // --report needs a strategy
                }
                args.extend_from_slice(route);
                args.push(p);
                let out = cutpoint(&args, b"");
                let err = text(&out.stderr);
                let estimate: u64 = err
                    .split(" reported tokens is ")
                    .nth(1)
                    .and_then(|s| s.split(' ').next())
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| panic!("{file} {route:?}: no calibration line in {err}"));
                // The fit inverted: the largest estimate within the budget.
                assert!(
                    apply(estimate) <= reported,
                    "{file}: {estimate} for {reported}"
                );
                assert!(
                    apply(estimate + 1) > reported,
                    "{file}: {estimate} for {reported}"
                );
                if !route.is_empty() {
                    let line = err
                        .lines()
                        .find(|l| l.starts_with("{\"calibration\""))
                        .unwrap_or_else(|| panic!("{file}: no calibration report in {err}"));
                    let c: serde_json::Value = serde_json::from_str(line).expect("JSON");
                    assert_eq!(c["calibration"]["budget_estimate"], estimate, "{file}");
                    assert_eq!(c["calibration"]["budget_reported"], reported, "{file}");
                }
                // And nothing else: the same bytes and status as that estimate's budget.
                let estimate_s = estimate.to_string();
                let mut plain = vec!["compact", "--budget", &estimate_s];
                plain.extend_from_slice(route);
                plain.push(p);
                let direct = cutpoint(&plain, b"");
                assert_eq!(
                    out.status.code(),
                    direct.status.code(),
                    "{file} {route:?}: {err}"
                );
                assert!(
                    out.stdout == direct.stdout,
                    "{file} {route:?}: outputs differ"
                );
                if out.status.code() == Some(0) && out.stdout != std::fs::read(p).unwrap() {
                    compacted += 1;
                }
            }
        }
        // The overhead alone over the budget: exit 3, nothing written, the reason named.
        if overhead >= 2.0 {
            let under = (apply(0) - 1).to_string();
            let out = cutpoint(&["compact", "--calibrated", "--budget", &under, p], b"");
            assert_eq!(out.status.code(), Some(3), "{file}");
            assert!(out.stdout.is_empty(), "{file}");
            assert!(text(&out.stderr).contains("overhead alone"), "{file}");
        }
    }
    assert!(
        calibrated_files >= 5,
        "only {calibrated_files} files report usage"
    );
    assert!(
        compacted >= 5,
        "only {compacted} calibrated compactions wrote a change"
    );
    // A target is in the estimate's units: refused with --calibrated.
    exits(
        &["compact", "--calibrated", "--target", "100", "-"],
        LOG.as_bytes(),
        2,
        "--calibrated",
    );
    // Records JSONL reports no usage.
    exits(
        &[
            "compact",
            "--calibrated",
            "--strategy",
            "clear",
            "--budget",
            "900",
            "-",
        ],
        LOG.as_bytes(),
        2,
        "reports none",
    );
}

/// A strategy's own options given to a strategy that does not run it (clear's to
/// digest, a preset to clear, summary prose to slide) are refused by name, as the
/// Python binding refuses them (`test_option_errors_name_what_the_strategy_takes`);
/// before, the CLI ran as if they were absent (exit 0). Each strategy still takes
/// its own: clear its four, a pipeline those and its preset and prose, summarize
/// its prose.
#[test]
fn a_strategys_options_are_refused_by_the_strategies_that_do_not_read_them() {
    let options: [(&str, &[&str]); 6] = [
        ("keep-tool-uses", &["--keep-tool-uses", "2"]),
        ("clear-at-least", &["--clear-at-least", "5"]),
        ("exclude-tools", &["--exclude-tools", "bash"]),
        ("clear-tool-inputs", &["--clear-tool-inputs"]),
        ("preset", &["--preset", "gentle"]),
        ("summary", &["--summary", "x"]),
    ];
    let clear = [
        "keep-tool-uses",
        "clear-at-least",
        "exclude-tools",
        "clear-tool-inputs",
    ];
    let takes = |strategy: &str, option: &str| match strategy {
        "clear" => clear.contains(&option),
        "pipeline" => true,
        "summarize" => option == "summary",
        _ => false,
    };
    for strategy in [
        "clear",
        "clear-thinking",
        "digest",
        "slide",
        "truncate",
        "summarize",
        "pipeline",
    ] {
        for (option, flag) in options {
            let mut args = vec!["compact", "--strategy", strategy, "--budget", "2000"];
            args.extend(flag);
            args.push("-");
            if takes(strategy, option) {
                let out = cutpoint(&args, LOG.as_bytes());
                assert_ne!(
                    out.status.code(),
                    Some(2),
                    "{args:?}: {}",
                    text(&out.stderr)
                );
            } else {
                exits(
                    &args,
                    LOG.as_bytes(),
                    2,
                    &format!("--strategy {strategy} takes no --{option}; its options: --budget"),
                );
            }
        }
    }
}

/// Over budget, the message says why for every stage: one that made no progress gives
/// its reason, and one that ran and stopped short of its target says what it left
/// alone (or that nothing more was eligible). Before, a `clear` that cleared all it
/// might said only "over budget: 23244 tokens left, the budget is 14759", and
/// `truncate` held back by the latest request or the floors said it had stopped for
/// its target.
#[test]
fn over_budget_says_what_a_stage_that_stopped_short_left_alone() {
    let session = root("examples/data/session.jsonl");
    let traj = root(
        "tests/fixtures/transcripts/chat__swe-agent__marshmallow-1867-function_calling_replace.traj",
    );
    let cases = [
        // Cleared all it might: the last tool uses stay.
        (
            "clear",
            "14759",
            &session,
            "(clear: stopped short, left alone 3 kept-recent)",
        ),
        // Ran and left nothing it might have taken.
        (
            "digest",
            "5000",
            &session,
            "(digest: stopped short, nothing more eligible)",
        ),
        // The region ends at the last user turn before the floors ...
        (
            "truncate",
            "5000",
            &session,
            "(truncate: stopped short, left alone 1 floor)",
        ),
        // ... or at the latest request, which stays.
        (
            "truncate",
            "3507",
            &traj,
            "(truncate: stopped short, left alone 1 kept-recent)",
        ),
    ];
    for (strategy, budget, file, says) in cases {
        let file = file.to_str().unwrap();
        let args = ["compact", "--strategy", strategy, "--budget", budget, file];
        let out = cutpoint(&args, b"");
        assert_eq!(out.status.code(), Some(3), "{args:?}");
        let err = text(&out.stderr);
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
