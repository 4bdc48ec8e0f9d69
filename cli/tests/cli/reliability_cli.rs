//! Hostile files through the `cutpoint` binary: every fault is `FILE:LINE: message`
//! with exit status 2; nothing panics, hangs, overflows the stack or wraps a number.

use std::path::PathBuf;
use std::process::{Command, Output};

use cutpoint::testing::synth::Rng;

/// Writes `bytes` to a file named `name` under the test's temp dir; returns its path.
fn file(name: &str, bytes: &[u8]) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    std::fs::write(&path, bytes).expect("the temp dir is writable");
    path
}

fn cut(path: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_cutpoint"))
        .args(["cut", "--target", "1000", "--lookback", "1000"])
        .args(extra)
        .arg(path)
        .output()
        .expect("the binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Runs `bytes` as file `name`; expects exit 2 and an error starting `NAME:LINE: `
/// and containing `want`.
fn rejects(name: &str, bytes: &[u8], extra: &[&str], line: usize, want: &str) {
    let path = file(name, bytes);
    let out = cut(&path, extra);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{name}: {err}");
    let prefix = format!("{}:{line}: ", path.display());
    assert!(
        err.starts_with(&prefix),
        "{name}: want {prefix:?}…, got {err:?}"
    );
    assert!(err.contains(want), "{name}: want {want:?} in {err:?}");
    assert_eq!(err.lines().count(), 1, "{name}: one line: {err:?}");
    assert!(out.stdout.is_empty());
}

const OK: &str = "{\"kind\":\"user\",\"tokens\":1}\n";

#[test]
fn malformed_records_name_file_and_line() {
    let cases: &[(&str, &str, &str)] = &[
        ("invalid_json", "{\"kind\":\"user\",", "EOF while parsing"),
        (
            "unknown_kind",
            "{\"kind\":\"system\",\"tokens\":1}",
            "kind must be one of user, assistant, tool_use, tool_result, summary, not \"system\"",
        ),
        (
            "missing_tokens",
            "{\"kind\":\"user\"}",
            "missing field `tokens`",
        ),
        ("missing_kind", "{\"tokens\":1}", "missing field `kind`"),
        (
            "mistyped_tokens",
            "{\"kind\":\"user\",\"tokens\":\"12\"}",
            "invalid type: string",
        ),
        // Not serde_json's bare "expected value": what a kind must be, and where.
        (
            "mistyped_kind",
            "{\"kind\":7,\"tokens\":1}",
            "kind must be one of user, assistant, tool_use, tool_result, summary, not 7 (column 9)",
        ),
        (
            "kind_as_object",
            "{\"kind\":{\"user\":null},\"tokens\":1}",
            "kind must be one of user, assistant, tool_use, tool_result, summary, not an object",
        ),
        (
            "float_tokens",
            "{\"kind\":\"user\",\"tokens\":1.5}",
            "invalid type: floating point",
        ),
        (
            "negative_tokens",
            "{\"kind\":\"user\",\"tokens\":-3}",
            "invalid value: integer `-3`",
        ),
        (
            "too_many_tokens",
            "{\"kind\":\"user\",\"tokens\":18446744073709551616}",
            "invalid type: floating point",
        ),
        (
            "missing_call_id",
            "{\"kind\":\"tool_use\",\"tokens\":1}",
            "tool_use record has no call_id",
        ),
        (
            "null_call_id",
            "{\"kind\":\"tool_result\",\"call_id\":null,\"tokens\":1}",
            "tool_result record has no call_id",
        ),
        (
            "empty_call_id",
            "{\"kind\":\"tool_use\",\"call_id\":\"\",\"tokens\":1}",
            "empty call_id",
        ),
        (
            "mistyped_call_id",
            "{\"kind\":\"tool_use\",\"call_id\":5,\"tokens\":1}",
            "invalid type: integer",
        ),
        (
            "array_line",
            "[1,2,3]",
            "a record is a JSON object with `kind` and `tokens`, not an array",
        ),
        (
            "record_as_array",
            "[\"user\",null,5]",
            "a record is a JSON object with `kind` and `tokens`, not an array",
        ),
        (
            "bare_string",
            "\"user\"",
            "invalid type: string \"user\", expected a record: a JSON object",
        ),
    ];
    for (name, bad, want) in cases {
        let text = format!("{OK}\n{bad}\n{OK}");
        rejects(name, text.as_bytes(), &[], 3, want);
    }
}

#[test]
fn binary_garbage_is_an_error_on_its_line() {
    let mut bytes = OK.as_bytes().to_vec();
    bytes.extend_from_slice(&[0x00, 0xff, 0xfe, 0x80, b'{', 0x07, b'\n']);
    rejects("garbage", &bytes, &[], 2, "not UTF-8");
    rejects("nul", b"\0\0\0\0", &[], 1, "expected value");
}

#[test]
fn huge_lines_are_refused_without_reading_them_whole() {
    let line = format!(
        "{{\"kind\":\"user\",\"tokens\":1,\"pad\":\"{}\"}}\n",
        "x".repeat(200)
    );
    rejects(
        "long_line",
        format!("{OK}{line}").as_bytes(),
        &["--max-line-bytes", "100"],
        2,
        "longer than 100 bytes",
    );
    // Past the default 1 MiB cap, and with no newline at all.
    let huge = vec![b'x'; (1 << 20) + 10];
    rejects("huge_line", &huge, &[], 1, "longer than 1048576 bytes");
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    // A million opening brackets, as the whole line and inside a field: the reader
    // refuses each at its first bracket instead of descending.
    let deep = format!("{OK}{}\n", "[".repeat(1_000_000));
    rejects(
        "deep_array",
        deep.as_bytes(),
        &[],
        2,
        "a record is a JSON object with `kind` and `tokens`, not an array (column 1)",
    );
    let deep = format!("{OK}{{\"kind\":{}\n", "[".repeat(1_000_000));
    rejects(
        "deep_kind",
        deep.as_bytes(),
        &[],
        2,
        "kind must be one of user, assistant, tool_use, tool_result, summary, not an array",
    );
    let deep = format!(
        "{OK}{{\"kind\":\"tool_use\",\"tokens\":1,\"call_id\":{}\n",
        "[".repeat(1_000_000)
    );
    rejects(
        "deep_field",
        deep.as_bytes(),
        &[],
        2,
        "invalid type: sequence",
    );
    let deep = format!(
        "{OK}{{\"kind\":\"user\",\"tokens\":1,\"x\":{}1{}}}\n",
        "{\"a\":".repeat(100_000),
        "}".repeat(100_000)
    );
    rejects("deep_object", deep.as_bytes(), &[], 2, "unknown field `x`");
}

#[test]
fn token_sums_past_u64_are_errors_not_wraps() {
    let max = u64::MAX;
    let text = format!(
        "{{\"kind\":\"user\",\"tokens\":{max}}}\n{{\"kind\":\"user\",\"tokens\":0}}\n{{\"kind\":\"user\",\"tokens\":1}}\n"
    );
    rejects(
        "overflow",
        text.as_bytes(),
        &[],
        3,
        "would overflow the log's total of 18446744073709551615",
    );
}

#[test]
fn an_empty_file_is_an_empty_log() {
    for (name, bytes) in [("empty", &b""[..]), ("blank", &b"\n\n  \r\n"[..])] {
        let out = cut(&file(name, bytes), &[]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", stderr(&out));
        assert_eq!(String::from_utf8_lossy(&out.stdout), "0\n");
    }
}

const PAIRS: &str = r#"{"kind":"user","tokens":1}
{"kind":"tool_use","call_id":"a","tokens":1}
{"kind":"tool_result","call_id":"a","tokens":1}
"#;

#[test]
fn a_repeated_call_id_names_both_lines() {
    // Answered first: the tracker keeps only a fingerprint; the CLI keeps the line.
    let text = format!("{PAIRS}{OK}{{\"kind\":\"tool_use\",\"call_id\":\"a\",\"tokens\":1}}\n");
    rejects(
        "reused_answered",
        text.as_bytes(),
        &[],
        5,
        "tool_use id \"a\" repeats the tool_use on line 2",
    );
    // Still pending.
    let text = format!(
        "{OK}{{\"kind\":\"tool_use\",\"call_id\":\"b\",\"tokens\":1}}\n\n{{\"kind\":\"tool_use\",\"call_id\":\"b\",\"tokens\":1}}\n"
    );
    rejects(
        "reused_pending",
        text.as_bytes(),
        &[],
        4,
        "repeats the tool_use on line 2",
    );
}

#[test]
fn strict_refuses_pairing_violations_that_lenient_accepts() {
    let duplicate = format!("{PAIRS}{{\"kind\":\"tool_result\",\"call_id\":\"a\",\"tokens\":1}}\n");
    let orphan = format!("{OK}{{\"kind\":\"tool_result\",\"call_id\":\"z\",\"tokens\":1}}\n");
    let late = format!(
        "{{\"kind\":\"tool_result\",\"call_id\":\"z\",\"tokens\":1}}\n{OK}{{\"kind\":\"tool_use\",\"call_id\":\"z\",\"tokens\":1}}\n"
    );
    for (name, text) in [("dup", &duplicate), ("orphan", &orphan), ("late", &late)] {
        let out = cut(&file(&format!("lenient_{name}"), text.as_bytes()), &[]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "lenient accepts {name}: {}",
            stderr(&out)
        );
    }
    rejects(
        "strict_dup",
        duplicate.as_bytes(),
        &["--strict"],
        4,
        "tool_result \"a\" repeats the tool_result on line 3",
    );
    rejects(
        "strict_orphan",
        orphan.as_bytes(),
        &["--strict"],
        2,
        "no tool_use before it",
    );
    // Strict refuses the orphan at line 1 before the late call can come.
    rejects(
        "strict_late",
        late.as_bytes(),
        &["--strict"],
        1,
        "orphan result",
    );
}

#[test]
fn caps_are_flags_and_name_themselves() {
    rejects(
        "cap_records",
        PAIRS.as_bytes(),
        &["--max-records", "2"],
        3,
        "3 records would pass the cap of 2 (--max-records)",
    );
    rejects(
        "cap_id",
        PAIRS.as_bytes(),
        &["--max-call-id-bytes", "0"],
        2,
        "1 call id bytes would pass the cap of 0 (--max-call-id-bytes)",
    );
    let two_open = "{\"kind\":\"tool_use\",\"call_id\":\"a\",\"tokens\":1}\n{\"kind\":\"tool_use\",\"call_id\":\"b\",\"tokens\":1}\n";
    rejects(
        "cap_open",
        two_open.as_bytes(),
        &["--max-open-calls", "1"],
        2,
        "(--max-open-calls)",
    );
    let long_id = format!(
        "{{\"kind\":\"tool_use\",\"call_id\":\"{}\",\"tokens\":1}}\n",
        "i".repeat(300)
    );
    rejects(
        "default_id_cap",
        long_id.as_bytes(),
        &[],
        1,
        "300 call id bytes would pass the cap of 256",
    );
}

#[test]
fn unreadable_inputs_exit_two() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let out = cut(&dir, &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        // Format detection reads the whole input first, so a directory fails before any
        // line is read: the error names the path, not a line.
        stderr(&out).starts_with(&format!("{}: cannot read", dir.display())),
        "{}",
        stderr(&out)
    );
    let out = cut(&dir.join("no-such-file.jsonl"), &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot open"), "{}", stderr(&out));
}

/// Seeded mutations of a valid log (bytes flipped, dropped, duplicated, lines cut):
/// the binary answers 0, 2 or 3 and never panics.
#[test]
fn mutated_logs_never_panic() {
    let base = cutpoint::testing::synth::Session::records(7, 60);
    let mut text = Vec::new();
    for r in &base {
        cutpoint::format::records::write_line(&mut text, r).unwrap();
    }
    let mut rng = Rng::new(0x7e57);
    for case in 0..60 {
        let mut bytes = text.clone();
        for _ in 0..rng.range(1, 6) {
            let i = rng.range(0, bytes.len() as u64) as usize;
            match rng.range(0, 4) {
                0 => bytes[i] = rng.next_u64() as u8,
                1 => {
                    bytes.remove(i);
                }
                2 => bytes.insert(i, bytes[i]),
                _ => bytes.truncate(i),
            }
            if bytes.is_empty() {
                break;
            }
        }
        let out = cut(&file("mutated", &bytes), &[]);
        let err = stderr(&out);
        assert!(
            matches!(out.status.code(), Some(0 | 2 | 3)),
            "case {case}: {err}"
        );
        assert!(!err.contains("panicked"), "case {case}: {err}");
        if out.status.code() == Some(2) {
            assert!(err.contains("mutated:"), "case {case}: {err}");
        }
    }
}
