//! `cutpoint check` and `cutpoint compact` end to end: exit codes, `FILE:LINE:` output,
//! and a compacted log that `check` reads back clean.

use crate::common;

use common::{cutpoint, exits, text};

const LOG: &str = r#"{"kind":"user","tokens":1000}
{"kind":"assistant","tokens":50}
{"kind":"tool_use","call_id":"a","tokens":20,"bound":true,"name":"bash","arguments":{"command":"pytest -x"}}
{"kind":"tool_result","call_id":"a","tokens":3000,"status":"error","content":"3 failed\nmore"}
{"kind":"assistant","tokens":40}
{"kind":"tool_use","call_id":"b","tokens":20,"bound":true}
"#;

#[test]
fn check_a_clean_log_exits_zero_and_a_pending_call_is_reported_unless_allowed() {
    let out = cutpoint(&["check", "--allow-pending", "-"], LOG.as_bytes());
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    let out = cutpoint(&["check"], LOG.as_bytes());
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(text(&out.stdout), "<stdin>:6: pending-at-end: b\n");
}

#[test]
fn check_prints_each_violation_with_its_line() {
    let broken = format!(
        "{LOG}{}\n\n{}\n",
        r#"{"kind":"tool_result","call_id":"ghost","tokens":5}"#,
        r#"{"kind":"tool_result","call_id":"a","tokens":5}"#
    );
    let out = cutpoint(&["check", "--allow-pending"], broken.as_bytes());
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "<stdin>:7: orphan-result: ghost\n<stdin>:9: duplicate-result: a\n"
    );
    assert!(text(&out.stderr).contains("2 violations"));
}

#[test]
fn check_reports_bad_input_with_exit_two() {
    let out = cutpoint(
        &["check"],
        b"{\"kind\":\"user\",\"tokens\":1}\n{\"kind\":\"user\",\"tokens\":1,\"name\":\"x\"}\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("<stdin>:2: user record has a `name` field"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn compact_prints_a_log_that_check_reads_back_clean() {
    let out = cutpoint(
        &[
            "compact",
            "--target",
            "4100",
            "--keep-head",
            "1",
            "--summary",
            "ran the tests",
        ],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let log = text(&out.stdout);
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 4, "{log}");
    assert_eq!(lines[0], r#"{"kind":"user","tokens":1000}"#);
    assert!(
        lines[1].starts_with(r#"{"kind":"summary","tokens":"#),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].ends_with(r#""text":"ran the tests","covers":[{"call_id":"a","name":"bash","arguments":{"command":"pytest -x"},"status":"error","first_line":"3 failed"}]}"#),
        "{}",
        lines[1]
    );
    let back = cutpoint(&["check", "--allow-pending"], log.as_bytes());
    assert_eq!(back.status.code(), Some(0), "{}", text(&back.stdout));
    // Compacting the compacted log again (re-entry) folds the summary, still clean.
    let again = cutpoint(
        &[
            "compact",
            "--target",
            "100000",
            "--lookback",
            "100000",
            "--keep-head",
            "1",
        ],
        log.as_bytes(),
    );
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    let back = cutpoint(&["check", "--allow-pending"], &again.stdout);
    assert_eq!(back.status.code(), Some(0), "{}", text(&back.stdout));
    assert!(text(&again.stdout).contains(r#""call_id":"a""#));
}

#[test]
fn compact_defers_with_exit_three_and_refuses_bad_input_with_two() {
    let out = exits(
        &["compact", "--target", "3000", "--lookback", "10"],
        LOG.as_bytes(),
        3,
        "deferred",
    );
    assert_eq!(text(&out.stdout), "");
    let dup = format!(
        "{LOG}{}\n",
        r#"{"kind":"tool_use","call_id":"a","tokens":1}"#
    );
    let out = cutpoint(&["compact", "--target", "10"], dup.as_bytes());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with("<stdin>:7: "),
        "{}",
        text(&out.stderr)
    );
}

/// `check` takes `cut`'s caps (not `--strict`: it reports pairing violations instead of
/// refusing them), and still reads a log whose pairing is broken.
#[test]
fn check_holds_its_input_to_the_caps() {
    let wants = [
        (
            vec!["--max-records", "5"],
            6,
            "6 records would pass the cap of 5 (--max-records)",
        ),
        (
            vec!["--max-call-id-bytes", "0"],
            3,
            "1 call id bytes would pass the cap of 0 (--max-call-id-bytes)",
        ),
        (
            vec!["--max-open-calls", "0"],
            3,
            "1 open calls would pass the cap of 0 (--max-open-calls)",
        ),
        (vec!["--max-line-bytes", "40"], 3, "longer than 40 bytes"),
    ];
    for (flags, line, want) in wants {
        let args: Vec<&str> = ["check", "--allow-pending"]
            .into_iter()
            .chain(flags.iter().copied())
            .collect();
        let out = cutpoint(&args, LOG.as_bytes());
        assert_eq!(
            out.status.code(),
            Some(2),
            "{flags:?}: {}",
            text(&out.stderr)
        );
        let err = text(&out.stderr);
        assert!(
            err.starts_with(&format!("<stdin>:{line}: ")),
            "{flags:?}: {err}"
        );
        assert!(err.trim_end().ends_with(want), "{flags:?}: {err}");
    }
    // At the caps, a broken log is read and its violations reported: the reused id
    // counts as a record, not as a refusal.
    let dup = format!(
        "{LOG}{}\n",
        r#"{"kind":"tool_use","call_id":"a","tokens":1}"#
    );
    let out = cutpoint(
        &["check", "--max-records", "7", "--max-open-calls", "1"],
        dup.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "<stdin>:6: pending-at-end: b\n<stdin>:7: duplicate-call: a\n"
    );
    let out = cutpoint(&["check", "--max-records", "6"], dup.as_bytes());
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).starts_with("<stdin>:7: 7 records would pass"));
}

/// `compact` takes `cut`'s caps and `--strict`.
#[test]
fn compact_holds_its_input_to_the_caps_and_strict_mode() {
    let args = ["compact", "--target", "4100", "--keep-head", "1"];
    let run = |extra: &[&str], input: &str| {
        let all: Vec<&str> = args.iter().chain(extra).copied().collect();
        cutpoint(&all, input.as_bytes())
    };
    let out = run(&["--max-records", "5"], LOG);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "<stdin>:6: 6 records would pass the cap of 5 (--max-records)\n"
    );
    let out = run(&["--max-call-id-bytes", "0"], LOG);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("<stdin>:3: 1 call id bytes"));
    // A second result for `a`: lenient compacts it, strict refuses it naming both lines.
    let dup = LOG.replacen(
        "{\"kind\":\"assistant\",\"tokens\":40}",
        "{\"kind\":\"tool_result\",\"call_id\":\"a\",\"tokens\":5}",
        1,
    );
    assert_eq!(run(&[], &dup).status.code(), Some(0));
    let out = run(&["--strict"], &dup);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr),
        "<stdin>:5: tool_result \"a\" repeats the tool_result on line 4 (--strict)\n"
    );
    assert_eq!(text(&out.stdout), "");
}

/// The one summary route's flags (`--lookback`, `--forward`, `--shorten-arguments`,
/// `--summary-tokens`) are refused by name with any other `--strategy`, which reads
/// none of them: before, each was accepted and ignored (exit 0, the same bytes as
/// without it). `--strategy summarize` is the one summary route and takes them.
#[test]
fn one_summary_flags_are_refused_by_the_other_strategies() {
    let flags: [&[&str]; 4] = [
        &["--lookback", "100"],
        &["--forward"],
        &["--shorten-arguments", "20"],
        &["--summary-tokens", "9"],
    ];
    for strategy in ["pipeline", "clear", "digest", "truncate"] {
        for flag in flags {
            let mut args = vec!["compact", "--strategy", strategy, "--budget", "2000"];
            args.extend(flag);
            args.push("-");
            exits(
                &args,
                LOG.as_bytes(),
                2,
                &format!("{} applies to one summary", flag[0]),
            );
        }
    }
    for flag in flags {
        let mut args = vec!["compact", "--strategy", "summarize", "--budget", "2000"];
        args.extend(flag);
        args.push("-");
        let out = cutpoint(&args, LOG.as_bytes());
        assert_ne!(
            out.status.code(),
            Some(2),
            "{flag:?}: {}",
            text(&out.stderr)
        );
    }
}

/// `--summary-tokens` sets the count of a records summary; a provider format's
/// summary message is counted as it is written, so there the flag is refused by name
/// (before, it was ignored: exit 0, the bytes of a run without it).
#[test]
fn summary_tokens_counts_a_records_summary_and_is_refused_for_a_transcript() {
    let out = cutpoint(
        &[
            "compact",
            "--target",
            "4000",
            "--forward",
            "--summary-tokens",
            "77",
            "-",
        ],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let summary = text(&out.stdout)
        .lines()
        .find(|l| l.contains(r#""kind":"summary""#))
        .map(str::to_owned)
        .expect("a summary record");
    assert!(summary.contains(r#""tokens":77"#), "{summary}");
    let claude =
        common::root("tests/fixtures/transcripts/claude-code__spotter__4d5611e5-main.jsonl");
    let path = claude.to_str().expect("a UTF-8 path");
    exits(
        &[
            "compact",
            "--target",
            "5000",
            "--summary-tokens",
            "77",
            path,
        ],
        b"",
        2,
        "--summary-tokens applies to records JSONL",
    );
}

/// `--shorten-arguments` shortens the summary's ledger in a provider format too (the
/// help said "records JSONL only" while the Claude Code ledger was shortened), and the
/// output is its own input: clean by `check --before` the original, and a second
/// compaction carries the shortened arguments on as they were written.
#[test]
fn shortened_arguments_are_written_in_a_transcript_and_carried_on() {
    let input =
        common::root("tests/fixtures/transcripts/claude-code__spotter__4d5611e5-main.jsonl");
    let input = input.to_str().expect("a UTF-8 path");
    let whole = cutpoint(&["compact", "--target", "5000", input], b"");
    let short = cutpoint(
        &[
            "compact",
            "--target",
            "5000",
            "--shorten-arguments",
            "20",
            input,
        ],
        b"",
    );
    assert_eq!(short.status.code(), Some(0), "{}", text(&short.stderr));
    assert_ne!(text(&short.stdout), text(&whole.stdout));
    // The Edit call's strings, cut at 20 characters, with what was left out counted.
    let ledger_line = |out: &str, id: &str| -> String {
        let at = out.find(id).unwrap_or_else(|| panic!("{id} in the ledger"));
        let rest = &out[at..];
        // Up to the ledger's next line, or the end of the JSON string that holds it.
        let end = [rest.find("\\n"), rest.find("\",\"")]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(rest.len());
        rest[..end].to_owned()
    };
    let id = "toolu_01U7yfRx8AD7MahegovUwexY";
    let first = ledger_line(&text(&short.stdout), id);
    assert!(first.contains("more chars]"), "{first}");
    assert!(!ledger_line(&text(&whole.stdout), id).contains("more chars]"));
    let dir = std::env::temp_dir().join(format!("cutpoint-shorten-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let once = dir.join("once.jsonl");
    std::fs::write(&once, &short.stdout).expect("written");
    let once = once.to_str().expect("a UTF-8 path");
    let checked = cutpoint(&["check", "--before", input, once], b"");
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked.stdout));
    let again = cutpoint(&["compact", "--target", "20000", once], b"");
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(ledger_line(&text(&again.stdout), id), first);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A forward deferral names the nearest legal cut below the cut it wanted (before,
/// that cut itself, "0 tokens short" of a target it passes), and a search with no
/// lookahead limit (`--budget`'s) says that nothing past the target is legal yet
/// instead of printing an 18446744073709551615-token lookahead.
#[test]
fn forward_deferrals_name_the_cuts_around_the_one_wanted() {
    let clean = r#"{"kind":"user","tokens":100}
{"kind":"assistant","tokens":50}
{"kind":"assistant","tokens":100}
{"kind":"user","tokens":100}
{"kind":"assistant","tokens":100}
"#;
    exits(
        &[
            "compact",
            "--target",
            "300",
            "--forward",
            "--lookback",
            "45",
            "-",
        ],
        clean.as_bytes(),
        3,
        "within the 45-token lookahead past it; defer compaction to the turn boundary; nearest legal cut below: record 3 (50 tokens short of the target); nearest legal cut above: record 4 (50 tokens past the target)",
    );
    // The example session ends on a call in flight: no cut past the target is legal.
    let session = common::root("examples/data/session.jsonl");
    let out = exits(
        &["compact", "--budget", "0", session.to_str().expect("UTF-8")],
        b"",
        3,
        "no legal cut from record 102 on yet, where the target of 98395 tokens is reached; defer compaction to the turn boundary; waiting on toolu_900",
    );
    assert!(!text(&out.stderr).contains(&u64::MAX.to_string()));
}
