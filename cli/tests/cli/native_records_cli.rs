//! `cutpoint compact --target` and `--strategy` on records JSONL holding a provider's
//! native `compaction` record: it and every line before it come out byte-identical,
//! the live history after it is compacted, and a bad value is refused with its line.

use crate::common;

use common::{cutpoint, text};

/// Old history, the compaction record, then a live history with two large results.
const LOG: &str = r#"{"kind":"user","tokens":4000}
{"kind":"tool_use","call_id":"old","tokens":20,"name":"bash","arguments":{"command":"ls"}}
{"kind":"tool_result","call_id":"old","tokens":6000,"status":"ok","content":"src"}
{"kind":"assistant","tokens":900,"compaction":"anthropic"}
{"kind":"user","tokens":100}
{"kind":"assistant","tokens":50}
{"kind":"tool_use","call_id":"a","tokens":20,"bound":true,"name":"bash","arguments":{"command":"pytest -x"}}
{"kind":"tool_result","call_id":"a","tokens":3000,"status":"error","content":"3 failed\nmore"}
{"kind":"assistant","tokens":40}
{"kind":"user","tokens":80}
{"kind":"tool_use","call_id":"b","tokens":20,"name":"grep","arguments":{"pattern":"TODO"}}
{"kind":"tool_result","call_id":"b","tokens":2000,"status":"ok","content":"src/a.rs:1: TODO"}
{"kind":"assistant","tokens":40}
"#;

/// The first four lines: the history and the compaction record.
fn head() -> String {
    LOG.lines().take(4).map(|l| format!("{l}\n")).collect()
}

fn assert_kept(stdout: &[u8], what: &str) {
    let out = text(stdout);
    assert!(out.starts_with(&head()), "{what}: {out}");
    assert!(out.len() < LOG.len(), "{what}: nothing compacted: {out}");
    let clean = cutpoint(&["check", "--format", "records", "-"], out.as_bytes());
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{what}: {}",
        text(&clean.stdout)
    );
}

#[test]
fn compact_target_keeps_the_compaction_record_and_the_history_before_it() {
    // A target inside the old history: the region starts after the compaction.
    let out = cutpoint(
        &[
            "compact",
            "--target",
            "16000",
            "--forward",
            "--format",
            "records",
            "-",
        ],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_kept(&out.stdout, "--target");
    assert!(text(&out.stdout).contains(r#""call_id":"a""#));
}

#[test]
fn every_strategy_keeps_the_compaction_record_and_the_history_before_it() {
    let mut met = 0;
    for strategy in [
        "clear",
        "clear-thinking",
        "digest",
        "summarize",
        "slide",
        "truncate",
        "pipeline",
    ] {
        let out = cutpoint(
            &[
                "compact",
                "--strategy",
                strategy,
                "--budget",
                "13500",
                "--format",
                "records",
                "-",
            ],
            LOG.as_bytes(),
        );
        match out.status.code() {
            Some(0) => {
                assert_kept(&out.stdout, strategy);
                met += 1;
            }
            // The budget cannot be met without touching the pinned history.
            Some(3) => assert!(out.stdout.is_empty(), "{strategy}"),
            other => panic!("{strategy}: {other:?} {}", text(&out.stderr)),
        }
    }
    // digest, summarize, slide and truncate meet it after the compaction.
    assert!(met >= 4, "{met} strategies met the budget");
    // Without the compaction record, truncate would reach the old history: with it,
    // the budget under the pinned 10,920 tokens cannot be met.
    let truncate = |log: &str| {
        let args = ["compact", "--strategy", "truncate", "--budget", "10000"];
        cutpoint(
            &[&args[..], &["--format", "records", "-"]].concat(),
            log.as_bytes(),
        )
    };
    let out = truncate(LOG);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out.stdout));
    assert!(out.stdout.is_empty());
    let out = truncate(&LOG.replace(r#","compaction":"anthropic""#, ""));
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn an_unknown_compaction_value_is_refused_with_its_line() {
    let bad = LOG.replace(r#""compaction":"anthropic""#, r#""compaction":"gemini""#);
    let out = cutpoint(
        &["compact", "--target", "16000", "--format", "records", "-"],
        bad.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains(":4:") && err.contains("gemini"), "{err}");
}
