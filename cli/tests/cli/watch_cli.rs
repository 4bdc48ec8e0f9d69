//! `cutpoint watch` over the recorded provider streams: one JSON line per state
//! change and a totals line, exit codes (0 ended normally, 1 provider error or
//! interrupted, 2 bad input naming the event and byte), and stdin read as it arrives.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::common::{cutpoint, root, text};

fn streams() -> Vec<(String, String)> {
    let dir = root("tests/fixtures/streams");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("the fixtures")
        .map(|e| e.expect("an entry").path())
        .filter(|p| p.to_string_lossy().contains("__"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let format = name.split("__").next().unwrap().to_owned();
            (p.to_string_lossy().into_owned(), format)
        })
        .collect();
    out.sort();
    out
}

fn lines(stdout: &[u8]) -> Vec<Value> {
    text(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect()
}

fn count(lines: &[Value], event: &str) -> usize {
    lines.iter().filter(|l| l["event"] == event).count()
}

#[test]
fn every_recording_is_watched_to_its_totals() {
    for (path, format) in streams() {
        let out = cutpoint(&["watch", "--format", &format, &path], b"");
        let code = out.status.code();
        let lines = lines(&out.stdout);
        let totals = lines.last().expect("a totals line");
        assert_eq!(totals["totals"], true, "{path}");
        let error = path.contains("error");
        assert_eq!(
            code,
            Some(if error { 1 } else { 0 }),
            "{path}: {}",
            text(&out.stderr)
        );
        assert_eq!(
            count(&lines, "provider_error"),
            usize::from(error),
            "{path}"
        );
        // Every call opened has its arguments complete, or is reported left open.
        let opened = count(&lines, "call_opened");
        assert_eq!(totals["tool_calls"], opened, "{path}");
        assert_eq!(
            opened,
            count(&lines, "arguments_complete") + count(&lines, "call_left_open"),
            "{path}"
        );
        // Open calls are the client calls not answered: server calls are answered
        // in the stream.
        let server = lines
            .iter()
            .filter(|l| l["event"] == "call_opened" && l["server"] == true)
            .count();
        assert_eq!(server, count(&lines, "call_answered"), "{path}");
        assert_eq!(totals["open_calls"], opened - server, "{path}");
        if !error {
            assert!(count(&lines, "usage") >= 1, "{path}");
            assert!(count(&lines, "turn_ended") >= 1, "{path}");
            let last_usage = lines.iter().rev().find(|l| l["event"] == "usage").unwrap();
            assert_eq!(
                last_usage["tokens"], totals["tokens"],
                "{path}: the last usage sets the total"
            );
        }
    }
}

#[test]
fn a_call_cut_by_max_tokens_is_reported_left_open() {
    let path = root(
        "tests/fixtures/streams/anthropic-sse__anthropics-anthropic-sdk-python__incomplete_partial_json_response.txt",
    );
    let out = cutpoint(
        &[
            "watch",
            "--format",
            "anthropic-sse",
            &path.to_string_lossy(),
        ],
        b"",
    );
    assert_eq!(out.status.code(), Some(0));
    let lines = lines(&out.stdout);
    let left = lines
        .iter()
        .find(|l| l["event"] == "call_left_open")
        .expect("left open");
    assert_eq!(left["call_id"], "toolu_01EKqbqmZrGRXy18eN7m9kvY");
    assert_eq!(left["truncated"], true);
    let totals = lines.last().unwrap();
    assert_eq!(
        (
            totals["open_calls"].as_u64(),
            totals["open_record"].as_u64(),
            totals["tokens"].as_u64()
        ),
        (Some(1), Some(1), Some(124))
    );
}

#[test]
fn bad_input_exits_2_naming_the_event_and_byte() {
    let out = cutpoint(
        &["watch", "--format", "anthropic-sse", "-"],
        b"data: {\"type\":\"message_start\"}\n\ndata: {oops\n\n",
    );
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        text(&out.stderr).trim(),
        "<stdin>: event 2 (byte 32): not a valid event: key must be a string (column 2)"
    );
    let out = cutpoint(&["watch", "--format", "gemini-stream"], b"[{\"a\":1} 7]");
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("event 2 (byte 9)"),
        "{}",
        text(&out.stderr)
    );
    let out = cutpoint(&["watch", "--format", "anthropic"], b"");
    assert_eq!(out.status.code(), Some(2), "an unknown stream format");
    assert!(text(&out.stderr).contains("anthropic-sse"));
    // The input ends before the response does: exit 1, with what it had.
    let out = cutpoint(&["watch", "--format", "anthropic-sse"], b"data: {\"type\":\"message_start\"}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t1\",\"name\":\"f\",\"input\":{}}}\n\n");
    assert_eq!(out.status.code(), Some(1));
    let lines = lines(&out.stdout);
    assert!(
        lines
            .iter()
            .any(|l| l["event"] == "call_left_open" && l["reason"] == "stream ended")
    );
}

/// A stream cut inside an event (a dropped connection, a file copied while written)
/// ended before the response did: exit 1 with what it had, the open call left open,
/// the totals, and the event named; once exit 2, "not a valid event: EOF while
/// parsing a string", as if the provider had sent a broken event.
#[test]
fn a_stream_cut_inside_an_event_ended_early() {
    let stream = concat!(
        r#"data: {"type":"message_start"}"#,
        "\n\n",
        r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t1","name":"f","input":{}}}"#,
        "\n\n",
        r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a"#,
    );
    {
        let out = cutpoint(
            &["watch", "--format", "anthropic-sse", "-"],
            stream.as_bytes(),
        );
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert_eq!(
            err.trim(),
            "<stdin>: the stream ended before the response did: event 3 (byte 148): the input ended inside this event"
        );
        let lines = lines(&out.stdout);
        assert!(
            lines
                .iter()
                .any(|l| l["event"] == "call_left_open" && l["reason"] == "stream cut short"),
            "{lines:?}"
        );
        assert_eq!(lines.last().unwrap()["totals"], true);
    }
    // Every recording cut halfway through a line in its second half.
    for (path, format) in streams() {
        let bytes = std::fs::read(&path).unwrap();
        let half = bytes.len() / 2;
        let Some(nl) = bytes[half..].iter().position(|b| *b == b'\n') else {
            continue;
        };
        let next = bytes[half + nl + 1..].iter().position(|b| *b == b'\n');
        let Some(len) = next.filter(|&l| l > 8) else {
            continue;
        };
        let cut = half + nl + 1 + len / 2;
        let out = cutpoint(&["watch", "--format", &format, "-"], &bytes[..cut]);
        let err = text(&out.stderr);
        assert_ne!(out.status.code(), Some(2), "{path} cut at {cut}: {err}");
        assert_eq!(lines(&out.stdout).last().unwrap()["totals"], true, "{path}");
    }
}

#[test]
fn stdin_is_read_as_it_arrives() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutpoint"))
        .args(["watch", "--format", "openai-chat-stream"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starts");
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line.expect("a line")).is_err() {
                break;
            }
        }
    });
    let first = "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":\"call_1\",\"function\":{\"name\":\"ls\",\"arguments\":\"{}\"}}]}}]}\n\n";
    stdin.write_all(first.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // The call is reported before the rest of the stream exists.
    let line = rx
        .recv_timeout(Duration::from_secs(20))
        .expect("a line while stdin is open");
    assert!(
        line.contains("call_opened") && line.contains("call_1"),
        "{line}"
    );
    stdin
        .write_all(b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\ndata: [DONE]\n\n")
        .unwrap();
    drop(stdin);
    let rest: Vec<String> = rx.iter().collect();
    reader.join().unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(0));
    assert!(rest.iter().any(|l| l.contains("arguments_complete")));
    assert!(
        rest.last().unwrap().contains("\"open_calls\":1"),
        "{rest:?}"
    );
}
