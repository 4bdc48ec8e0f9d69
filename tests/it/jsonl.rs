//! Records JSONL reading: every kind, blank lines, errors that name the line and the
//! fault (mistyped kinds and whole-line arrays included), hostile lines, round trips.

use cutpoint::Record;
use cutpoint::format::records::{ReadError, Reader, write_line};

fn read(text: &str) -> Vec<Result<(usize, Record), String>> {
    Reader::new(text.as_bytes())
        .map(|r| r.map_err(|e| e.to_string()))
        .collect()
}

#[test]
fn reads_every_kind_and_skips_blank_lines() {
    let got = read(
        "{\"kind\":\"user\",\"tokens\":5}\n\n{\"kind\":\"tool_use\",\"call_id\":\"a\",\"tokens\":1}\r\n{\"kind\":\"tool_result\",\"call_id\":\"a\",\"tokens\":2}\n{\"kind\":\"assistant\",\"call_id\":null,\"tokens\":0}",
    );
    assert_eq!(
        got,
        vec![
            Ok((1, Record::user(5))),
            Ok((3, Record::tool_use("a", 1))),
            Ok((4, Record::tool_result("a", 2))),
            Ok((5, Record::assistant(0))),
        ]
    );
}

#[test]
fn empty_input_is_an_empty_log() {
    assert!(read("").is_empty());
}

#[test]
fn errors_name_the_line_and_the_fault() {
    let cases = [
        (
            "{\"kind\":\"tool\",\"tokens\":1}",
            "line 2: kind must be one of user, assistant, tool_use, tool_result, summary, not \"tool\" (column 14)",
        ),
        (
            "{\"kind\":\"user\",\"tokens\":-1}",
            "line 2: invalid value: integer `-1`",
        ),
        (
            "{\"kind\":\"user\",\"tokens\":18446744073709551616}",
            "line 2: invalid type: floating point",
        ),
        (
            "{\"kind\":\"tool_use\",\"tokens\":1}",
            "line 2: tool_use record has no call_id",
        ),
        (
            "{\"kind\":\"tool_result\",\"call_id\":\"\",\"tokens\":1}",
            "line 2: tool_result record has an empty call_id",
        ),
        (
            "{\"kind\":\"user\",\"call_id\":\"x\",\"tokens\":1}",
            "line 2: user record has a call_id",
        ),
        ("{\"kind\":\"user\"}", "line 2: missing field `tokens`"),
        (
            "{\"kind\":\"user\",\"tokens\":1,\"extra\":1}",
            "line 2: unknown field `extra`",
        ),
        (
            "{\"kind\":\"user\",\"tokens\":\"1\"}",
            "line 2: invalid type: string",
        ),
        ("not json", "line 2: expected"),
        // A mistyped kind says what a kind must be (serde's own: "expected value").
        (
            "{\"kind\":7}",
            "line 2: kind must be one of user, assistant, tool_use, tool_result, summary, not 7 (column 9)",
        ),
        (
            "{\"tokens\":1,\"kind\":null}",
            "line 2: kind must be one of user, assistant, tool_use, tool_result, summary, not null",
        ),
        (
            "{\"kind\":{\"user\":null},\"tokens\":1}",
            "line 2: kind must be one of user, assistant, tool_use, tool_result, summary, not an object",
        ),
        (
            "{\"kind\":[\"user\"],\"tokens\":1}",
            "line 2: kind must be one of user, assistant, tool_use, tool_result, summary, not an array",
        ),
        // A whole line that is not an object, an array included (serde would read
        // `["user",null,5]` as a user record).
        (
            "[1,2]",
            "line 2: a record is a JSON object with `kind` and `tokens`, not an array",
        ),
        (
            " [\"user\",null,5]",
            "line 2: a record is a JSON object with `kind` and `tokens`, not an array",
        ),
        (
            "\"user\"",
            "line 2: invalid type: string \"user\", expected a record: a JSON object with `kind` and `tokens`",
        ),
    ];
    for (bad, want) in cases {
        let got = read(&format!(
            "{{\"kind\":\"user\",\"tokens\":1}}\n{bad}\n{{\"kind\":\"user\",\"tokens\":1}}"
        ));
        assert_eq!(got.len(), 2, "reading stops at the first error: {bad}");
        let err = got[1].as_ref().unwrap_err();
        assert!(err.starts_with(want), "{bad}: got {err:?}, want {want:?}");
    }
}

#[test]
fn huge_lines_and_garbage_are_errors_not_allocations() {
    let huge = format!(
        "{{\"kind\":\"user\",\"tokens\":1,\"pad\":\"{}\"}}",
        "x".repeat(100)
    );
    let got: Vec<_> = Reader::new(huge.as_bytes()).max_line_bytes(50).collect();
    assert!(matches!(
        got[..],
        [Err(ReadError::LineTooLong { line: 1, max: 50 })]
    ));
    let garbage: &[u8] = &[0xff, 0xfe, b'{', b'\n'];
    let got: Vec<_> = Reader::new(garbage).collect();
    assert!(matches!(got[..], [Err(ReadError::Invalid { line: 1, .. })]));
    let deep = "[".repeat(100_000);
    let got: Vec<_> = Reader::new(deep.as_bytes()).collect();
    assert!(matches!(got[..], [Err(ReadError::Invalid { line: 1, .. })]));
}

#[test]
fn write_then_read_round_trips() {
    let records = [
        Record::user(3),
        Record::tool_use("x\"y", 4),
        Record::tool_result("x\"y", 5).bound_to_previous(),
        Record::assistant(6),
    ];
    let mut out = Vec::new();
    for r in &records {
        write_line(&mut out, r).unwrap();
    }
    let back: Vec<Record> = Reader::new(&out[..]).map(|r| r.unwrap().1).collect();
    assert_eq!(back, records);
}
