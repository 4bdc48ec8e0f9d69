//! Records JSONL with payloads: tool names, arguments, results and summary lines
//! round-trip byte for byte; payload fields on the wrong kind are errors.

use cutpoint::compact::{Entry, Payload};
use cutpoint::format::records::{Reader, parse_entry, write_entry};

#[test]
fn entries_with_payloads_and_summaries_round_trip() {
    let text = concat!(
        r#"{"kind":"tool_use","call_id":"a","tokens":4,"name":"bash","arguments":{"command":"ls -l","n":[1,2]}}"#,
        "\n",
        r#"{"kind":"tool_result","call_id":"a","tokens":5,"status":"error","content":"no\nway"}"#,
        "\n",
        r#"{"kind":"summary","tokens":9,"text":"did things","covers":[{"call_id":"b","name":"grep","arguments":null,"status":"ok","first_line":"x"},{"call_id":"c"}]}"#,
        "\n",
    );
    let entries: Vec<Entry> = Reader::new(text.as_bytes())
        .entries()
        .map(|e| e.unwrap().1)
        .collect();
    assert_eq!(
        entries[0].payload,
        Payload::Call {
            name: Some("bash".into()),
            arguments: Some(r#"{"command":"ls -l","n":[1,2]}"#.into())
        }
    );
    let units = entries[2].units();
    assert_eq!(entries[2].record.kind().covered(), ["b", "c"]);
    assert_eq!(
        units[0].arguments.as_deref(),
        Some("null"),
        "present null is kept"
    );
    assert_eq!(units[1].arguments, None, "absent is lost");
    let mut out = Vec::new();
    for e in &entries {
        write_entry(&mut out, e).unwrap();
    }
    assert_eq!(String::from_utf8(out).unwrap(), text);
}

#[test]
fn payload_fields_on_the_wrong_kind_and_bad_summaries_are_errors() {
    for (bad, want) in [
        (
            r#"{"kind":"tool_result","call_id":"a","tokens":1,"name":"x"}"#,
            "line 1: tool_result record has a `name` field; only tool_use records carry one",
        ),
        (
            r#"{"kind":"summary","tokens":1}"#,
            "line 1: summary record has no `covers` list",
        ),
        (
            r#"{"kind":"summary","call_id":"a","tokens":1,"covers":[]}"#,
            "line 1: summary record has a call_id",
        ),
        (
            r#"{"kind":"summary","tokens":1,"covers":[{"call_id":"a","x":1}]}"#,
            "line 1: unknown field `x`",
        ),
    ] {
        let err = parse_entry(bad, 1).unwrap_err().to_string();
        assert!(err.starts_with(want), "{bad}: {err}");
    }
}
