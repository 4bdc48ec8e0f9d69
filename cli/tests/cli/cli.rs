//! The `cutpoint` binary end to end: exit codes, stdout, and `FILE:LINE:` errors.

use crate::common;

use common::{cutpoint, text};

const LOG: &str = r#"{"kind":"user","tokens":100}
{"kind":"tool_use","call_id":"a","tokens":10}
{"kind":"tool_result","call_id":"a","tokens":500}
{"kind":"user","tokens":50}
{"kind":"assistant","tokens":30}
{"kind":"tool_use","call_id":"b","tokens":10,"bound":true}
"#;

#[test]
fn prints_the_cut_and_exits_zero() {
    let out = cutpoint(
        &["cut", "--target", "300", "--lookback", "1000", "-"],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "1\n");
}

#[test]
fn defers_with_exit_three_and_names_the_pending_call() {
    // The whole log is asked for, but `b` is in flight, so cut 6 is illegal; cut 5
    // would split the assistant message from its call, and the lookback stops there.
    let out = cutpoint(
        &["cut", "--target", "100000", "--lookback", "20"],
        LOG.as_bytes(),
    );
    assert_eq!(out.status.code(), Some(3));
    assert!(out.stdout.is_empty());
    let err = text(&out.stderr);
    assert!(
        err.contains("deferred") && err.contains("waiting on b"),
        "{err}"
    );
}

#[test]
fn reads_the_readme_example_file() {
    let path = common::root("examples/data/session.jsonl");
    let path = path.to_str().expect("a UTF-8 path");
    let out = cutpoint(
        &["cut", "--target", "40000", "--lookback", "8000", path],
        b"",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let cut: usize = text(&out.stdout).trim().parse().expect("a number");
    assert!(cut > 0);
}

#[test]
fn bad_input_names_file_and_line_and_exits_two() {
    let cases: [(&str, &str); 6] = [
        (
            "{\"kind\":\"user\",\"tokens\":1}\n{\"kind\":\"robot\",\"tokens\":1}\n",
            "<stdin>:2: kind must be one of user, assistant, tool_use, tool_result, summary, not \"robot\" (column 15)",
        ),
        (
            "{\"kind\":\"user\",\"tokens\":1}\n{oops\n",
            "<stdin>:2: key must be a string",
        ),
        (
            "{\"kind\":\"tool_use\",\"tokens\":1}\n",
            "<stdin>:1: tool_use record has no call_id",
        ),
        (
            "{\"kind\":\"tool_use\",\"call_id\":\"a\",\"tokens\":1}\n\n{\"kind\":\"tool_use\",\"call_id\":\"a\",\"tokens\":1}\n",
            "<stdin>:3: tool_use id \"a\" repeats the tool_use on line 1",
        ),
        (
            "{\"kind\":\"user\",\"tokens\":18446744073709551615}\n{\"kind\":\"user\",\"tokens\":1}\n",
            "<stdin>:2: record 1: 1 tokens would overflow",
        ),
        ("\u{0}\u{1}binary\u{ff}", "<stdin>:1: "),
    ];
    for (input, want) in cases {
        let out = cutpoint(
            &["cut", "--target", "1", "--lookback", "1"],
            input.as_bytes(),
        );
        assert_eq!(out.status.code(), Some(2), "{input:?}");
        let err = text(&out.stderr);
        assert!(
            err.starts_with(want),
            "{input:?}: got {err:?}, want {want:?}"
        );
    }
}

#[test]
fn a_missing_file_is_bad_input() {
    let out = cutpoint(
        &[
            "cut",
            "--target",
            "1",
            "--lookback",
            "1",
            "/no/such/file.jsonl",
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("/no/such/file.jsonl: cannot open"));
}

#[test]
fn an_empty_log_cuts_at_zero() {
    let out = cutpoint(&["cut", "--target", "10", "--lookback", "0"], b"");
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout), "0\n");
}
