//! The live stream decoders on the 29 recorded provider streams in
//! `tests/fixtures/streams/` (see its `SOURCES.md`): each decodes with the calls,
//! thinking blocks, usage and ending it holds (asserted one by one); random chunk
//! splits give the same items as one chunk; streaming into a log equals appending the
//! finished records; truncated recordings leave their calls open with no cut after
//! them; error streams and malformed events give errors that name the event and byte;
//! interleaved OpenAI Chat calls keep the pairing invariant.

use cutpoint::compact::{self, Entry, Log, Options, Payload, ResultStatus};
use cutpoint::stream::decode::{
    Caps, Content, Decoded, Decoder, Detail, Feed, StreamError, StreamFormat, decode_all,
};
use cutpoint::testing::Observe;
use cutpoint::{Event, Record, RecordKind};
use proptest::prelude::*;

pub(crate) fn fixture_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/streams")
}

/// Every recording: its file name, format and bytes.
pub(crate) fn recordings() -> Vec<(String, StreamFormat, Vec<u8>)> {
    let mut out: Vec<_> = std::fs::read_dir(fixture_dir())
        .expect("the fixtures folder")
        .map(|e| e.expect("an entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains("__"))
        })
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let format = StreamFormat::from_name(name.split("__").next().unwrap())
                .unwrap_or_else(|| panic!("{name}: a stream format prefix"));
            (name, format, std::fs::read(&p).expect("readable"))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn recording(name: &str) -> (StreamFormat, Vec<u8>) {
    let (_, f, b) = recordings()
        .into_iter()
        .find(|(n, _, _)| n.contains(name))
        .unwrap_or_else(|| panic!("no recording {name}"));
    (f, b)
}

/// Decodes `bytes` pushed in the chunks that `cuts` (sorted offsets) make.
pub(crate) fn decode_split(
    format: StreamFormat,
    bytes: &[u8],
    cuts: &[usize],
) -> (Vec<Decoded>, Option<StreamError>) {
    let mut d = Decoder::new(format);
    let mut items = Vec::new();
    let mut from = 0;
    let ends = cuts.iter().copied().chain([bytes.len()]);
    for to in ends {
        let to = to.clamp(from, bytes.len());
        d.push(&bytes[from..to]);
        from = to;
        loop {
            match d.next() {
                Ok(Some(i)) => items.push(i),
                Ok(None) => break,
                Err(e) => return (items, Some(e)),
            }
        }
    }
    d.finish();
    loop {
        match d.next() {
            Ok(Some(i)) => items.push(i),
            Ok(None) => return (items, None),
            Err(e) => return (items, Some(e)),
        }
    }
}

/// What a decoded stream holds, for the one-by-one assertions.
#[derive(Debug, Default)]
struct Summary {
    /// Record kinds in order: `text`, `thinking`, `call NAME`, `server_call NAME`,
    /// `server_result`, `other KIND`; `+` before a record bound to the previous one.
    records: Vec<String>,
    /// Calls as closed (or left open): id, name, arguments, truncated.
    calls: Vec<(String, String, String, bool)>,
    /// Thinking blocks: text length, signed, redacted.
    thinking: Vec<(usize, bool, bool)>,
    /// Output tokens of each usage report.
    usage: Vec<Option<u64>>,
    /// Endings: stop reason, complete, something left open.
    endings: Vec<(Option<String>, bool, bool)>,
    turn_ends: usize,
}

fn summary(items: &[Decoded]) -> Summary {
    let mut s = Summary::default();
    for item in items {
        if let Some(Event::Opened(r)) = &item.event {
            let Detail::Opened(c) = &item.detail else {
                panic!("Opened without its content")
            };
            let kind = match c {
                Content::Text { .. } => "text".to_owned(),
                Content::Thinking { .. } => "thinking".to_owned(),
                Content::Call {
                    name,
                    server: false,
                    ..
                } => format!("call {name}"),
                Content::Call { name, .. } => format!("server_call {name}"),
                Content::ServerResult { .. } => "server_result".to_owned(),
                Content::Other { kind, .. } => format!("other {kind}"),
                _ => "?".to_owned(),
            };
            let bound = if r.is_bound_to_previous() { "+" } else { "" };
            s.records.push(format!("{bound}{kind}"));
        }
        match &item.detail {
            Detail::Closed(Content::Call {
                id,
                name,
                arguments,
                truncated,
                ..
            }) => s
                .calls
                .push((id.to_string(), name.clone(), arguments.clone(), *truncated)),
            Detail::Closed(Content::Thinking {
                text,
                signature,
                redacted,
            }) => s
                .thinking
                .push((text.len(), signature.is_some(), *redacted)),
            Detail::Usage(u) => s.usage.push(u.output_tokens),
            Detail::Ended(e) => {
                if let Some(Content::Call {
                    id,
                    name,
                    arguments,
                    truncated,
                    ..
                }) = &e.left_open
                {
                    s.calls
                        .push((id.to_string(), name.clone(), arguments.clone(), *truncated));
                }
                s.endings
                    .push((e.stop_reason.clone(), e.complete, e.left_open.is_some()));
            }
            _ => {}
        }
        if item.event == Some(Event::TurnEnded) {
            s.turn_ends += 1;
        }
    }
    s
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

fn call(id: &str, name: &str, args: &str) -> (String, String, String, bool) {
    (id.to_owned(), name.to_owned(), args.to_owned(), false)
}

fn end(reason: &str) -> Vec<(Option<String>, bool, bool)> {
    vec![(Some(reason.to_owned()), true, false)]
}

/// Decodes a recording in one chunk: its summary and error.
fn decoded(name: &str) -> (Summary, Option<StreamError>) {
    let (format, bytes) = recording(name);
    let (items, err) = decode_all(format, &bytes);
    (summary(&items), err)
}

#[test]
fn anthropic_recordings_decode_with_their_calls_thinking_and_usage() {
    let (s, e) = decoded("anthropic-sdk-python__tool_use_response");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["text", "+call get_weather"]));
    assert_eq!(
        s.calls,
        [call(
            "toolu_01NRLabsLyVHZPKxbKvkfSMn",
            "get_weather",
            r#"{"location": "Paris"}"#
        )]
    );
    assert_eq!(s.usage, [Some(65)]);
    assert_eq!((s.endings, s.turn_ends), (end("tool_use"), 1));

    let (s, e) = decoded("incomplete_partial_json_response");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["text", "+call make_file"]));
    assert_eq!(s.calls.len(), 1);
    let (id, name, args, truncated) = &s.calls[0];
    assert_eq!(
        (id.as_str(), name.as_str(), *truncated),
        ("toolu_01EKqbqmZrGRXy18eN7m9kvY", "make_file", true)
    );
    assert!(
        args.starts_with(r#"{"filename": "taxes.txt", "lines_of_text": ["#)
            && args.ends_with("\n\"Filing taxes")
    );
    assert!(
        serde_json::from_str::<serde_json::Value>(args).is_err(),
        "cut off mid-JSON"
    );
    assert_eq!(s.usage, [Some(124)]);
    assert_eq!(s.endings, [(Some("max_tokens".to_owned()), true, true)]);
    assert_eq!(s.turn_ends, 0, "no turn end while the call is open");

    let (s, e) = decoded("llm-anthropic__test_tools");
    assert_eq!(e, None);
    assert_eq!(
        s.records,
        strs(&[
            "call pelican_name_generator",
            "+call pelican_name_generator"
        ])
    );
    assert_eq!(
        s.calls,
        [
            call(
                "toolu_01LtHJmixrs9NcWQkK8hu8hj",
                "pelican_name_generator",
                "{}"
            ),
            call(
                "toolu_01N8a4jWyf116qKTMqKKmjyt",
                "pelican_name_generator",
                "{}"
            )
        ]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(62)], end("tool_use")));

    let (s, e) = decoded("thinking_display_regression");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["thinking", "+call fixed_version"]));
    assert_eq!(s.thinking.len(), 1);
    assert!(
        s.thinking[0].0 > 0 && s.thinking[0].1 && !s.thinking[0].2,
        "{:?}",
        s.thinking
    );
    assert_eq!(
        s.calls,
        [call(
            "toolu_01825dXWLSoJwCst1qTsiWdb",
            "fixed_version",
            "{}"
        )]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(92)], end("tool_use")));

    let (s, e) = decoded("anthropic_native_tool_search_streaming");
    assert_eq!(e, None);
    assert_eq!(
        s.records,
        strs(&[
            "text",
            "+server_call tool_search_tool_bm25",
            "+server_result",
            "+text",
            "+call get_exchange_rate"
        ])
    );
    assert_eq!(
        s.calls,
        [
            call(
                "srvtoolu_01S5swZdBmTzLDVzwcT5LbHp",
                "tool_search_tool_bm25",
                r#"{"query": "USD EUR exchange rate currency conversion"}"#
            ),
            call(
                "toolu_01EFn5wTNBYA8Reni8rbmnHT",
                "get_exchange_rate",
                r#"{"from_currency": "USD", "to_currency": "EUR"}"#
            )
        ]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(175)], end("tool_use")));

    let (s, e) = decoded("thinking_part_redacted_stream");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["thinking", "+thinking", "+text"]));
    assert_eq!(
        s.thinking.iter().map(|t| (t.1, t.2)).collect::<Vec<_>>(),
        [(true, true), (true, true)]
    );
    assert!(s.calls.is_empty());
    assert_eq!(s.endings, end("end_turn"));
    assert_eq!(s.usage.len(), 1);

    let (s, e) = decoded("code_execution_tool_stream");
    assert_eq!(e, None);
    assert_eq!(
        s.records,
        strs(&[
            "thinking",
            "+text",
            "+server_call bash_code_execution",
            "+server_result",
            "+text"
        ])
    );
    assert_eq!(s.thinking.len(), 1);
    assert!(s.thinking[0].1, "signed");
    assert_eq!(s.calls[0].1, "bash_code_execution");
    assert_eq!((s.usage, s.endings), (vec![Some(304)], end("end_turn")));

    let (s, e) = decoded("anthropic-tool-no-args");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["text", "+call updateIssueList"]));
    assert_eq!(
        s.calls,
        [call(
            "toolu_01QE1WLsSVp5hy5Q3GmGTmjP",
            "updateIssueList",
            "{}"
        )]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(48)], end("tool_use")));
}

#[test]
fn openai_chat_recordings_decode_with_their_calls_and_usage() {
    let (s, e) = decoded("f82268f2fefd5cfbc7eeb59c297688be");
    assert_eq!(e, None);
    assert_eq!(
        s.records,
        strs(&["call GetWeatherArgs", "+call get_stock_price"])
    );
    assert_eq!(
        s.calls,
        [
            call(
                "call_JMW1whyEaYG438VE1OIflxA2",
                "GetWeatherArgs",
                r#"{"city": "Edinburgh", "country": "GB", "units": "c"}"#
            ),
            call(
                "call_DNYTawLBoN8fj3KN6qU9N1Ou",
                "get_stock_price",
                r#"{"ticker": "AAPL", "exchange": "NASDAQ"}"#
            )
        ]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(60)], end("tool_calls")));

    let (s, e) = decoded("4cc50a6135d254573a502310e6af1246");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["text"]));
    assert!(s.calls.is_empty());
    assert_eq!(
        (s.usage, s.endings, s.turn_ends),
        (vec![Some(1)], end("length"), 1)
    );

    let (s, e) = decoded("test_complex_agent_run_in_flow.yaml.interaction1");
    assert_eq!(e, None);
    assert_eq!(
        s.calls,
        [
            call(
                "call_NS4iQj14cDFwc0BnrKqDHavt",
                "get_weather",
                r#"{"city": "Mexico City"}"#
            ),
            call("call_SkGkkGDvHQEEk0CGbnAh2AQw", "get_product_name", "{}")
        ]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(44)], end("tool_calls")));

    let (s, e) = decoded("test_complex_agent_run.yaml.interaction0");
    assert_eq!(e, None);
    assert_eq!(
        s.calls,
        [
            call("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country", "{}"),
            call("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name", "{}")
        ]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(40)], end("tool_calls")));

    let (s, e) = decoded("test_complex_agent_run.yaml.interaction2");
    assert_eq!(e, None);
    assert_eq!(s.calls.len(), 1);
    assert_eq!(s.calls[0].1, "final_result");
    assert_eq!(s.calls[0].2.len(), 229, "53 pieces, 229 characters");
    assert!(serde_json::from_str::<serde_json::Value>(&s.calls[0].2).is_ok());
    assert_eq!((s.usage, s.endings), (vec![Some(62)], end("tool_calls")));

    let (s, e) = decoded("test_tool_use_failed_error_streaming");
    assert_eq!(s.records, strs(&["thinking"]));
    match e {
        Some(StreamError::Provider {
            kind,
            message,
            event,
            ..
        }) => {
            assert_eq!(kind, "invalid_request_error");
            assert!(
                message.starts_with("Tool call validation failed"),
                "{message}"
            );
            assert_eq!(event, 95, "93 reasoning deltas, then the error");
        }
        other => panic!("{other:?}"),
    }

    let (s, e) = decoded("test_openrouter_stream_error");
    assert_eq!(s.records, strs(&["thinking"]));
    assert!(
        matches!(&e, Some(StreamError::Provider { kind, message, .. }) if kind == "400" && message == "Token limit reached"),
        "{e:?}"
    );
}

#[test]
fn openai_responses_recordings_decode_with_their_items_and_usage() {
    let (s, e) = decoded("openai-reasoning-encrypted-content");
    assert_eq!(e, None);
    assert_eq!(
        s.records,
        strs(&[
            "thinking",
            "+call calculator",
            "call calculator",
            "call calculator",
            "text"
        ])
    );
    assert_eq!(
        s.calls,
        [
            call(
                "call_AB6AaRZ1FYZB2RwS6A5vbdqn",
                "calculator",
                r#"{"a":12,"b":7,"op":"add"}"#
            ),
            call(
                "call_Q6pW65MUgW9vF59BmItYGos3",
                "calculator",
                r#"{"a":19,"b":3,"op":"multiply"}"#
            ),
            call(
                "call_Zl5vIMnD7dVAjgU6FkhmiCZh",
                "calculator",
                r#"{"a":57,"b":10,"op":"multiply"}"#
            )
        ]
    );
    assert_eq!(s.thinking.len(), 1);
    assert!(
        s.thinking[0].0 > 100 && s.thinking[0].1,
        "summary text and encrypted content"
    );
    assert_eq!(
        s.usage,
        [Some(28), Some(26), Some(26), Some(12)],
        "four responses"
    );
    assert_eq!(s.turn_ends, 4);

    let (s, e) = decoded("openai-error.1");
    assert!(s.records.is_empty());
    assert!(
        matches!(&e, Some(StreamError::Provider { kind, event: 3, .. }) if kind == "insufficient_quota"),
        "{e:?}"
    );

    let (s, e) = decoded("phase_streamed_on_part_start");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["thinking", "+text", "call get_capital"]));
    assert_eq!(
        s.calls,
        [call(
            "call_LabG58Uhrq9kZvR52BYKjToD",
            "get_capital",
            r#"{"country":"PotatoLand"}"#
        )]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(69)], end("completed")));

    let (s, e) = decoded("test_openai_responses_streaming_usage");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["thinking", "+call final_result"]));
    assert_eq!(
        s.calls,
        [call(
            "call_CWXgs68YprAjp6t0371hiPOI",
            "final_result",
            r#"{"result":6666}"#
        )]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(469)], end("completed")));

    let (s, e) = decoded("test_openai_responses_stream.yaml");
    assert_eq!(e, None);
    assert_eq!(
        s.calls,
        [call(
            "call_kL0PCQV7M2WMoVX8V8OtYSAL",
            "get_capital",
            r#"{"country":"France"}"#
        )]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(16)], end("completed")));

    let (s, e) = decoded("openai_native_tool_search_streaming");
    assert_eq!(e, None);
    assert_eq!(
        s.records,
        strs(&[
            "other tool_search_call",
            "other tool_search_output",
            "call get_exchange_rate"
        ])
    );
    assert_eq!(
        s.calls,
        [call(
            "call_CeXueyTqEJ1rgm84BHSwNPz8",
            "get_exchange_rate",
            r#"{"from_currency":"USD","to_currency":"EUR"}"#
        )]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(47)], end("completed")));

    let (s, e) = decoded("test_responses_tool_use_streaming");
    assert_eq!(e, None);
    assert_eq!(
        s.calls,
        [call(
            "call_sVidsfFJ6zlzRpelrPkTPlpd",
            "multiply",
            r#"{"a":1231,"b":2331}"#
        )]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(23)], end("completed")));
}

#[test]
fn gemini_recordings_decode_in_all_three_framings() {
    let (s, e) = decoded("google-stream-no-args-tool-call");
    assert_eq!(e, None);
    assert_eq!(
        s.records,
        strs(&[
            "thinking",
            "+call read_theme",
            "+call read_screen",
            "+call read_screen",
            "+call read_screen"
        ])
    );
    assert_eq!(
        s.calls,
        [
            call("read_theme#0.1", "read_theme", ""),
            call("read_screen#0.2", "read_screen", r#"{"id":"A"}"#),
            call("read_screen#0.3", "read_screen", r#"{"id":"B"}"#),
            call("read_screen#0.4", "read_screen", r#"{"id":"C"}"#)
        ]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(58 + 183)], end("STOP")));

    let (s, e) = decoded("google-vertex-stream-tool-call-arguments-nested");
    assert_eq!(e, None);
    assert_eq!(s.records, strs(&["call cookRecipe"]));
    let args: serde_json::Value = serde_json::from_str(&s.calls[0].2).expect("assembled JSON");
    assert_eq!(args["recipe"]["ingredients"][0]["name"], "Lasagna noodles");
    assert_eq!(
        args["recipe"]["steps"][9],
        "Let stand for 15 minutes before serving."
    );
    assert_eq!((s.usage, s.endings), (vec![Some(684 + 1026)], end("STOP")));

    let (s, e) = decoded("missing-terminal-function-call");
    assert_eq!(e, None);
    assert_eq!(
        s.calls,
        [call(
            "writeItems#0.0",
            "writeItems",
            r#"{"operations":[{"action":"add","description":"Fresh red apple","itemid":"apple_001","price":0.5},{"action":"add","description":"Ripe yellow banana","itemid":"banana_001","price":0.3}]}"#
        )]
    );
    assert_eq!(s.endings, end("STOP"));

    let (s, e) = decoded("google-tool-call-gemini3");
    assert_eq!(e, None);
    assert_eq!(
        s.calls,
        [call(
            "weather#0.0",
            "weather",
            r#"{"location":"San Francisco"}"#
        )]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(15 + 804)], end("STOP")));

    let (s, e) = decoded("test_google_streaming_tool_call_thought_signature");
    assert_eq!(e, None, "CRLF SSE");
    assert_eq!(s.calls, [call("get_country#0.0", "get_country", "{}")]);
    assert_eq!(s.endings, end("STOP"));

    let (s, e) = decoded("llm-gemini__test_tools");
    assert_eq!(e, None, "a pretty-printed JSON array");
    assert_eq!(
        s.records,
        strs(&["thinking", "+call pelican_name_generator"])
    );
    assert_eq!(
        s.calls,
        [call(
            "pelican_name_generator#0.1",
            "pelican_name_generator",
            "{}"
        )]
    );
    assert_eq!(s.endings, end("STOP"));

    let (s, e) = decoded("crewAI");
    assert_eq!(e, None);
    assert_eq!(
        s.calls,
        [
            call(
                "get_current_temperature#0.0",
                "get_current_temperature",
                r#"{"city": "Paris"}"#
            ),
            call(
                "get_current_temperature#0.1",
                "get_current_temperature",
                r#"{"city": "London"}"#
            )
        ]
    );
    assert_eq!((s.usage, s.endings), (vec![Some(14)], end("STOP")));
}

#[test]
fn every_recording_is_covered_above() {
    // 29 recordings: 8 Anthropic, 7 Chat, 7 Responses, 7 Gemini.
    let all = recordings();
    assert_eq!(all.len(), 29);
    for f in StreamFormat::ALL {
        let n = all.iter().filter(|(_, g, _)| *g == f).count();
        assert_eq!(
            n,
            if f == StreamFormat::AnthropicSse {
                8
            } else {
                7
            },
            "{f}"
        );
    }
}

/// The entries of the finished transcript: every record complete with its final size
/// and payload, built from the items alone, and the record left open (if any).
pub(crate) fn finished(items: &[Decoded]) -> (Vec<Entry>, Option<Entry>) {
    let mut done: Vec<Entry> = Vec::new();
    let mut open: Option<Entry> = None;
    for item in items {
        match (&item.event, &item.detail) {
            (Some(Event::Opened(r)), Detail::Opened(c)) => {
                let payload = match c {
                    Content::Call { name, .. } => Payload::Call {
                        name: Some(name.clone()),
                        arguments: None,
                    },
                    other => other.payload(),
                };
                open = Some(Entry::new(r.clone(), payload));
            }
            (Some(Event::Delta { tokens }), _) => {
                let e = open.as_mut().expect("a delta for an open record");
                e.record = e.record.clone().with_tokens(e.record.tokens() + tokens);
            }
            (Some(Event::Closed), Detail::Closed(c)) => {
                let mut e = open.take().expect("a close for an open record");
                e.payload = c.payload();
                done.push(e);
            }
            (Some(Event::UsageReported { tokens }), _) => {
                let e = open
                    .as_mut()
                    .or(done.last_mut())
                    .expect("a record to resize");
                e.record = e.record.clone().with_tokens(*tokens);
            }
            (
                _,
                Detail::Dropped {
                    records_after,
                    call_id,
                },
            ) => {
                // A record the provider dropped (an Anthropic `fallback` followed it),
                // as the Anthropic reader reads it: a call becomes an assistant record
                // with its binding and size, thinking loses its reasoning payload.
                let at = done.len() - 1 - records_after;
                let e = &mut done[at];
                if call_id.is_some() {
                    let r = Record::assistant(e.record.tokens());
                    e.record = if e.record.is_bound_to_previous() {
                        r.bound_to_previous()
                    } else {
                        r
                    };
                    if !e.kept() {
                        e.payload = Payload::None;
                    }
                } else if e.reasoning().is_some() {
                    e.payload = Payload::None;
                }
            }
            (None, Detail::Ended(end)) => {
                if let (Some(c @ Content::Call { .. }), Some(e)) = (&end.left_open, open.as_mut()) {
                    e.payload = c.payload();
                }
            }
            _ => {}
        }
    }
    (done, open)
}

/// A log built by appending the finished records (and opening the one left open).
pub(crate) fn appended(items: &[Decoded]) -> Log {
    let (done, open) = finished(items);
    let mut log = Log::from_entries(done).expect("the finished records append");
    if let Some(e) = open {
        log.open(e).expect("the open record opens");
    }
    log
}

/// Feeds `items` into a log, checking after each that the log is consistent and that
/// no cut after a pending call, or after an open record, is legal.
pub(crate) fn fed(items: &[Decoded]) -> Log {
    let mut log = Log::new();
    for item in items {
        log.feed(item).expect("the decoded items feed");
        log.assert_invariants();
        let t = log.tracker();
        let mut blocked: Vec<usize> = t.pending_calls().iter().map(|p| p.at).collect();
        blocked.extend(t.open_record());
        if let Some(first) = blocked.iter().min() {
            assert!(
                t.legal_cuts().all(|c| c <= *first),
                "a legal cut after the call or open record at {first}: {:?}",
                t.legal_cuts().collect::<Vec<_>>()
            );
        }
    }
    log
}

#[test]
fn streaming_each_recording_into_a_log_equals_appending_the_finished_records() {
    let mut signed_in_all = 0;
    for (name, format, bytes) in recordings() {
        let (items, _) = decode_all(format, &bytes);
        let live = fed(&items);
        let rebuilt = appended(&items);
        assert_eq!(
            live.tracker().observe(),
            rebuilt.tracker().observe(),
            "{name}"
        );
        assert_eq!(live.entries(), rebuilt.entries(), "{name}");
        // The log is a valid compaction log: calls pending (their tools run now) or
        // left open are allowed; nothing else.
        let report = compact::validate(live.entries(), Options::allowing_pending());
        assert!(
            report
                .violations
                .iter()
                .all(|v| matches!(v, compact::Violation::ArgumentLoss { .. })),
            "{name}: {:?}",
            report.violations
        );
        // Every thinking record streamed is reasoning to the compaction layer (so
        // clear-thinking finds it), signed when the provider signed it.
        let opened = items
            .iter()
            .filter(|d| matches!(&d.detail, Detail::Opened(Content::Thinking { .. })))
            .count();
        let signed = items
            .iter()
            .filter(|d| {
                matches!(&d.detail, Detail::Closed(Content::Thinking { signature, redacted, .. })
                    if signature.is_some() || *redacted)
            })
            .count();
        let reasoning: Vec<bool> = live
            .entries()
            .iter()
            .filter_map(|e| e.reasoning())
            .collect();
        assert_eq!(reasoning.len(), opened, "{name}");
        assert_eq!(reasoning.iter().filter(|s| **s).count(), signed, "{name}");
        signed_in_all += signed;
        // The same through a bare tracker.
        let mut tracker = cutpoint::Tracker::new();
        for item in &items {
            tracker.feed(item).expect("feeds");
        }
        assert_eq!(tracker.observe(), live.tracker().observe(), "{name}");
    }
    assert!(
        signed_in_all >= 3,
        "signed thinking in the recordings: {signed_in_all}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any chunk split gives the same items and the same error as one chunk.
    #[test]
    fn any_chunk_split_decodes_the_same(pick in 0usize..29, cuts in prop::collection::vec(0usize..50_000, 0..40)) {
        let all = recordings();
        let (name, format, bytes) = &all[pick % all.len()];
        let mut cuts: Vec<usize> = cuts.into_iter().map(|c| c % (bytes.len() + 1)).collect();
        cuts.sort_unstable();
        let whole = decode_all(*format, bytes);
        let split = decode_split(*format, bytes, &cuts);
        prop_assert_eq!(&split, &whole, "{}", name);
    }

    /// One byte at a time, the hardest split, for every recording in turn.
    #[test]
    fn byte_by_byte_decodes_the_same(pick in 0usize..29) {
        let all = recordings();
        let (name, format, bytes) = &all[pick % all.len()];
        let cuts: Vec<usize> = (1..bytes.len()).collect();
        prop_assert_eq!(&decode_split(*format, bytes, &cuts), &decode_all(*format, bytes), "{}", name);
    }
}

#[test]
fn truncated_recordings_leave_their_calls_open_and_no_cut_after_them() {
    for (name, format, bytes) in recordings() {
        // Cut at every line end: inside calls, between events, before the end.
        let ends: Vec<usize> = bytes
            .iter()
            .enumerate()
            .filter(|(_, b)| **b == b'\n')
            .map(|(i, _)| i + 1)
            .collect();
        for &cut in &ends {
            let (items, err) = decode_all(format, &bytes[..cut]);
            if matches!(err, Some(StreamError::Provider { .. })) {
                continue;
            }
            let mut log = fed(&items);
            let t = log.tracker();
            // Every call opened but not closed is the open record: pending, nothing
            // after it legal.
            let opened_calls = items
                .iter()
                .filter(|i| matches!(&i.detail, Detail::Opened(Content::Call { .. })))
                .count();
            let closed_calls = items
                .iter()
                .filter(|i| matches!(&i.detail, Detail::Closed(Content::Call { .. })))
                .count();
            if opened_calls > closed_calls {
                let at = t
                    .open_record()
                    .unwrap_or_else(|| panic!("{name} cut at {cut}: an open call"));
                assert!(
                    t.pending_calls().iter().any(|p| p.at == at),
                    "{name} cut at {cut}"
                );
                assert!(t.legal_cuts().all(|c| c <= at));
                // Aborting closes it with the repair's aborted result; then the cut
                // after the result is legal when nothing else is pending.
                let id = log.abort_open().expect("aborts").expect("a call");
                let last = log.entries().back().unwrap();
                assert_eq!(last.record.kind(), &RecordKind::ToolResult(id));
                assert_eq!(last.record.tokens(), compact::ABORTED_RESULT_TOKENS);
                assert!(
                    matches!(&last.payload, Payload::Result { status: Some(ResultStatus::Aborted), content: Some(c) } if c == compact::ABORTED_RESULT_TEXT)
                );
                log.assert_invariants();
                let t = log.tracker();
                assert_eq!(
                    t.is_legal_cut(t.len()),
                    t.pending_count() == 0,
                    "{name} cut at {cut}"
                );
            }
            // Whatever was cut, the ending (if any) says the stream was interrupted
            // unless the provider had ended the response.
            let last_end = items.iter().rev().find_map(|i| match &i.detail {
                Detail::Ended(e) => Some(e.clone()),
                _ => None,
            });
            if cut < ends.last().copied().unwrap_or(0) && format == StreamFormat::AnthropicSse {
                assert!(
                    last_end.is_none_or(|e| !e.complete || e.stop_reason.is_some()),
                    "{name} cut at {cut}"
                );
            }
        }
    }
}

/// A recording cut inside a line (a dropped connection, a file copied while it was
/// written) ends in [`StreamError::Truncated`], naming the event cut, or decodes as
/// far as it came: never a malformed event. Before, an SSE event whose JSON was cut
/// was "not a valid event: EOF while parsing a string" (`cutpoint watch`: exit 2, bad
/// input). A cut right after a line's end is the test above.
#[test]
fn a_recording_cut_inside_a_line_is_truncated_not_malformed() {
    for (name, format, bytes) in recordings() {
        let (_, whole) = decode_all(format, &bytes);
        if matches!(
            whole,
            Some(StreamError::Malformed { .. } | StreamError::Framing { .. })
        ) {
            continue;
        }
        // Inside each line: one byte in, and halfway.
        let mut cuts = Vec::new();
        let mut start = 0;
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' {
                if i > start + 1 {
                    cuts.extend([start + 1, start + (i - start) / 2]);
                }
                start = i + 1;
            }
        }
        for cut in cuts {
            let (_, err) = decode_all(format, &bytes[..cut]);
            match err {
                None | Some(StreamError::Truncated { .. } | StreamError::Provider { .. }) => {}
                Some(e) => panic!("{name} cut at {cut}: {e}"),
            }
        }
    }
}

#[test]
fn a_call_cut_by_max_tokens_is_flagged_left_open_and_aborted_like_repair() {
    let (format, bytes) = recording("incomplete_partial_json_response");
    let (items, err) = decode_all(format, &bytes);
    assert_eq!(err, None);
    let mut log = fed(&items);
    assert_eq!(log.tracker().open_record(), Some(1));
    assert_eq!(log.tracker().legal_cuts().collect::<Vec<_>>(), [0]);
    // The left-open call keeps the arguments that came.
    let Payload::Call {
        arguments: Some(args),
        ..
    } = &log.entries()[1].payload
    else {
        panic!("{:?}", log.entries()[1].payload)
    };
    assert!(args.ends_with("\"Filing taxes"));
    assert_eq!(
        log.abort_open(),
        Ok(Some("toolu_01EKqbqmZrGRXy18eN7m9kvY".into()))
    );
    assert_eq!(log.abort_open(), Ok(None), "nothing open any more");
    assert_eq!(log.tracker().legal_cuts().collect::<Vec<_>>(), [0, 3]);
    let report = compact::validate(log.entries(), Options::strict());
    assert!(report.is_clean(), "{:?}", report.violations);
    // repair would have inserted the same result.
    let mut cut = log.entries().iter().cloned().collect::<Vec<_>>();
    let inserted = cut.pop().unwrap();
    let (repaired, _) = compact::repair(cut, true);
    assert_eq!(repaired.last(), Some(&inserted));
}

#[test]
fn error_streams_give_errors_after_the_items_before_them() {
    for name in [
        "openai-error.1",
        "test_openrouter_stream_error",
        "test_tool_use_failed_error_streaming",
    ] {
        let (format, bytes) = recording(name);
        let mut d = Decoder::new(format);
        d.push(&bytes);
        d.finish();
        let mut n = 0;
        let err = loop {
            match d.next() {
                Ok(Some(_)) => n += 1,
                Ok(None) => panic!("{name}: no error"),
                Err(e) => break e,
            }
        };
        assert!(matches!(err, StreamError::Provider { .. }), "{name}: {err}");
        assert!(
            err.to_string().contains(&format!("event {}", err.event())),
            "{err}"
        );
        assert!((err.offset() as usize) < bytes.len());
        assert_eq!(d.next(), Ok(None), "done after the error");
        assert!(n > 0 || name == "openai-error.1");
    }
}

#[test]
fn malformed_events_name_the_event_and_byte() {
    let cases: [(StreamFormat, &str, u64, u64); 6] = [
        (
            StreamFormat::AnthropicSse,
            "data: {\"type\":\"message_start\"}\n\ndata: {nope}\n\n",
            2,
            32,
        ),
        (
            StreamFormat::AnthropicSse,
            "data: {\"type\":\"message_start\"}\n\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n",
            2,
            32,
        ),
        (
            StreamFormat::OpenAiChatStream,
            "data: {\"choices\":7}\n\n",
            1,
            0,
        ),
        (
            StreamFormat::OpenAiResponsesStream,
            "{\"type\":\"response.created\"}\n{\"type\":\"response.output_item.added\"}\n",
            2,
            28,
        ),
        (
            StreamFormat::GeminiStream,
            "[{\"candidates\":[]},\n{\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"partialArgs\":[{\"jsonPath\":\"x\",\"stringValue\":\"\"}]}}]}}]}]",
            2,
            20,
        ),
        (StreamFormat::GeminiStream, "[{}, 7]", 2, 5),
    ];
    for (format, text, event, offset) in cases {
        let (_, err) = decode_all(format, text.as_bytes());
        let err = err.unwrap_or_else(|| panic!("{format}: {text}: no error"));
        assert_eq!(
            (err.event(), err.offset()),
            (event, offset),
            "{format}: {text}: {err}"
        );
        assert!(
            err.to_string()
                .starts_with(&format!("event {event} (byte {offset}): ")),
            "{err}"
        );
    }
    // A stream cut inside a JSON object says so.
    let (_, err) = decode_all(StreamFormat::GeminiStream, b"[{\"candidates\":");
    assert_eq!(
        err,
        Some(StreamError::Truncated {
            event: 1,
            offset: 1
        })
    );
}

/// Found by the `stream_decoders` fuzz target: a Gemini array's `]` followed by stray
/// bytes in the same chunk must end the response just as when the `]` ends a chunk.
#[test]
fn bytes_after_a_gemini_array_error_after_the_ending_in_any_split() {
    let text = b"[ {}]{";
    let whole = decode_all(StreamFormat::GeminiStream, text);
    assert!(
        matches!(whole.0.as_slice(), [d] if matches!(d.detail, Detail::Ended(_))),
        "{whole:?}"
    );
    let err = whole.1.clone().expect("trailing bytes are an error");
    assert_eq!((err.event(), err.offset()), (2, 5), "{err}");
    for cut in 0..=text.len() {
        assert_eq!(
            decode_split(StreamFormat::GeminiStream, text, &[cut]),
            whole,
            "cut at {cut}"
        );
    }
}

#[test]
fn caps_stop_hostile_streams_instead_of_buffering() {
    let mut caps = Caps::default();
    caps.max_event_bytes = 1 << 10;
    caps.max_record_bytes = 1 << 12;
    caps.max_calls = 4;
    let decode = |format, bytes: &[u8]| {
        let mut d = Decoder::new(format).with_caps(caps);
        let mut err = None;
        for chunk in bytes.chunks(100) {
            d.push(chunk);
            assert!(d.buffered() <= (1 << 10) + 200, "held {}", d.buffered());
            loop {
                match d.next() {
                    Ok(Some(_)) => {}
                    Ok(None) => break,
                    Err(e) => {
                        err = Some(e);
                        break;
                    }
                }
            }
            if err.is_some() {
                break;
            }
        }
        err
    };
    // An endless line.
    let endless = vec![b'a'; 10_000];
    assert!(matches!(
        decode(StreamFormat::AnthropicSse, &endless),
        Some(StreamError::TooLarge { what: "event", .. })
    ));
    // An endless JSON object.
    let mut object = b"{\"a\":\"".to_vec();
    object.extend(vec![b'x'; 10_000]);
    assert!(matches!(
        decode(StreamFormat::GeminiStream, &object),
        Some(StreamError::TooLarge { what: "event", .. })
    ));
    // A record growing past its cap by small deltas.
    let mut text = String::from(
        "data: {\"type\":\"message_start\"}\n\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
    );
    for _ in 0..100 {
        text += &format!(
            "data: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{}\"}}}}\n\n",
            "y".repeat(100)
        );
    }
    assert!(matches!(
        decode(StreamFormat::AnthropicSse, text.as_bytes()),
        Some(StreamError::TooLarge { what: "record", .. })
    ));
    // More parallel calls than the cap.
    let mut chat = String::new();
    for i in 0..10 {
        chat += &format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"c{i}\",\"function\":{{\"name\":\"f\",\"arguments\":\"{{\"}}}}]}}}}]}}\n\n"
        );
    }
    assert!(matches!(
        decode(StreamFormat::OpenAiChatStream, chat.as_bytes()),
        Some(StreamError::TooLarge { what: "calls", .. })
    ));
}

/// The Chat recording with two parallel calls, its argument chunks interleaved by
/// index: (0, 1, 0, 1, ...).
fn interleaved_chat() -> (Vec<u8>, Vec<u8>) {
    let (_, bytes) = recording("f82268f2fefd5cfbc7eeb59c297688be");
    let text = String::from_utf8(bytes.clone()).unwrap();
    let events: Vec<&str> = text
        .split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .collect();
    let (mut zero, mut one, mut rest_head, mut rest_tail) = (vec![], vec![], vec![], vec![]);
    for e in &events {
        if e.contains("\"tool_calls\":[{\"index\":0") {
            zero.push(*e);
        } else if e.contains("\"tool_calls\":[{\"index\":1") {
            one.push(*e);
        } else if zero.is_empty() {
            rest_head.push(*e);
        } else {
            rest_tail.push(*e);
        }
    }
    assert!(
        zero.len() > 5 && one.len() > 5,
        "{} and {}",
        zero.len(),
        one.len()
    );
    let mut mixed = rest_head.clone();
    for k in 0..zero.len().max(one.len()) {
        mixed.extend(zero.get(k));
        mixed.extend(one.get(k));
    }
    mixed.extend(rest_tail);
    (bytes, (mixed.join("\n\n") + "\n\n").into_bytes())
}

#[test]
fn interleaved_parallel_chat_calls_come_out_whole_in_index_order() {
    let (sequential, interleaved) = interleaved_chat();
    let format = StreamFormat::OpenAiChatStream;
    let (a, ea) = decode_all(format, &sequential);
    let (b, eb) = decode_all(format, &interleaved);
    assert_eq!((ea, eb), (None, None));
    let (sa, sb) = (summary(&a), summary(&b));
    assert_eq!(sa.calls, sb.calls, "the same calls, arguments whole");
    assert_eq!(sa.records, sb.records);
    // The same tokens: the waiting call's pieces were counted as they came.
    let total = |items: &[Decoded]| fed(items).tracker().observe();
    assert_eq!(total(&a), total(&b));
    // While interleaved, the second call waited: it opens only once the first closes.
    let opened: Vec<usize> = b
        .iter()
        .enumerate()
        .filter(|(_, i)| matches!(i.event, Some(Event::Opened(_))))
        .map(|(k, _)| k)
        .collect();
    let first_close = b
        .iter()
        .position(|i| i.event == Some(Event::Closed))
        .unwrap();
    assert!(opened[1] > first_close);
    // Any chunking of the interleaved stream gives the same.
    for step in [1, 7, 64, 1000] {
        let cuts: Vec<usize> = (step..interleaved.len()).step_by(step).collect();
        assert_eq!(decode_split(format, &interleaved, &cuts), (b.clone(), None));
    }
}

#[test]
fn a_piece_for_a_call_already_closed_is_an_error() {
    let chunk = |i: u64, id: &str, args: &str| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"{id}\",\"function\":{{\"name\":\"f\",\"arguments\":{}}}}}]}}}}]}}\n\n",
            serde_json::to_string(args).unwrap()
        )
    };
    let text = chunk(0, "a", "{}") + &chunk(1, "b", "{") + &chunk(0, "", "x");
    let (items, err) = decode_all(StreamFormat::OpenAiChatStream, text.as_bytes());
    assert!(
        matches!(err, Some(StreamError::Malformed { event: 3, .. })),
        "{err:?}"
    );
    // Call a closed when b started (its arguments were whole), b is open.
    assert_eq!(summary(&items).calls, [call("a", "f", "{}")]);
}

#[test]
fn chat_length_cut_leaves_the_last_call_open_and_flagged() {
    let chunk = |i: u64, args: &str| {
        format!(
            "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{i},\"id\":\"c{i}\",\"function\":{{\"name\":\"f\",\"arguments\":{}}}}}]}}}}]}}\n\n",
            serde_json::to_string(args).unwrap()
        )
    };
    let text = chunk(0, "{\"a\":1}")
        + &chunk(1, "{\"b\":")
        + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n"
        + "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":30}}\n\ndata: [DONE]\n\n";
    let (items, err) = decode_all(StreamFormat::OpenAiChatStream, text.as_bytes());
    assert_eq!(err, None);
    let s = summary(&items);
    assert_eq!(
        s.calls,
        [
            call("c0", "f", "{\"a\":1}"),
            ("c1".into(), "f".into(), "{\"b\":".into(), true)
        ]
    );
    assert_eq!(s.endings, [(Some("length".to_owned()), true, true)]);
    let mut log = fed(&items);
    assert_eq!(
        log.tracker().total_tokens(),
        30,
        "usage replaced the estimate"
    );
    assert_eq!(log.tracker().open_record(), Some(1));
    assert_eq!(log.abort_open(), Ok(Some("c1".into())));
    assert_eq!(log.tracker().pending_count(), 1, "c0 waits for its tool");
}

#[test]
fn an_interrupted_stream_ends_incomplete_with_what_it_had() {
    let (format, bytes) = recording("f82268f2fefd5cfbc7eeb59c297688be");
    let cut = bytes.len() / 2;
    let (items, err) = decode_all(format, &bytes[..cut]);
    // Cut inside an event: the stream was cut short (was `Malformed` before stop 44).
    assert!(
        matches!(err, None | Some(StreamError::Truncated { .. })),
        "{err:?}"
    );
    let ended = items.iter().rev().find_map(|i| match &i.detail {
        Detail::Ended(e) => Some(e.clone()),
        _ => None,
    });
    if err.is_none() {
        let e = ended.expect("an ending");
        assert!(!e.complete);
        assert!(matches!(e.left_open, Some(Content::Call { .. })));
    }
    let live = fed(&items);
    assert_eq!(
        live.tracker().observe(),
        appended(&items).tracker().observe()
    );
}

#[test]
fn stream_formats_round_trip_their_names() {
    for f in StreamFormat::ALL {
        assert_eq!(StreamFormat::from_name(f.name()), Some(f));
    }
    assert_eq!(StreamFormat::from_name("anthropic"), None);
    let _ = Record::user(0);
}

/// The calls a stream decodes to, in order: id, name, arguments.
fn streamed_calls(items: &[Decoded]) -> Vec<(String, String, String)> {
    items
        .iter()
        .filter_map(|d| match &d.detail {
            Detail::Closed(Content::Call {
                id,
                name,
                arguments,
                ..
            }) => Some((id.to_string(), name.clone(), arguments.clone())),
            Detail::Ended(e) => match &e.left_open {
                Some(Content::Call {
                    id,
                    name,
                    arguments,
                    ..
                }) => Some((id.to_string(), name.clone(), arguments.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// The calls the OpenAI Responses file reader reads from `items` (output items as
/// the stream's `response.output_item.done` events carry them), in order.
fn read_calls(items: &[serde_json::Value]) -> Vec<(String, String, String)> {
    use cutpoint::format::{self, Block, ByteEstimate, Format};
    let text = serde_json::to_string(items).expect("JSON");
    let t = format::read(&text, Format::OpenAiResponses, &ByteEstimate).expect("reads");
    t.messages
        .iter()
        .flat_map(|m| &m.blocks)
        .filter_map(|(b, _)| match b {
            Block::Call {
                id,
                name,
                arguments,
            } => Some((id.to_string(), name.clone(), arguments.clone())),
            _ => None,
        })
        .collect()
}

/// The `item` of every `response.output_item.done` event of a Responses stream.
fn done_items(bytes: &[u8]) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter_map(|l| {
            let json = l.strip_prefix("data:").unwrap_or(l).trim();
            serde_json::from_str::<serde_json::Value>(json).ok()
        })
        .filter(|v| v["type"] == "response.output_item.done")
        .map(|v| v["item"].clone())
        .collect()
}

/// The live decoder classifies a Responses output item through the reader's own
/// code: every recorded stream's calls are the calls the file reader reads from the
/// same items, and a shell call's `action` is its arguments on both routes (the
/// decoder used to read none).
#[test]
fn responses_streams_and_the_file_reader_see_the_same_calls() {
    let mut compared = 0;
    for (name, format, bytes) in recordings() {
        if format != StreamFormat::OpenAiResponsesStream {
            continue;
        }
        let (items, _) = decode_all(format, &bytes);
        let done = done_items(&bytes);
        assert_eq!(streamed_calls(&items), read_calls(&done), "{name}");
        compared += read_calls(&done).len();
    }
    assert!(compared >= 3, "the recordings hold calls: {compared}");

    let shell = serde_json::json!({
        "type": "local_shell_call", "id": "lsh_1", "call_id": "call_sh",
        "status": "completed",
        "action": {"type": "exec", "command": ["ls", "-l"]},
    });
    let mcp = serde_json::json!({
        "type": "mcp_approval_request", "id": "mcpr_1", "name": "deploy",
        "server_label": "ops", "arguments": "{\"env\":\"prod\"}",
    });
    let mut stream = String::from("data: {\"type\":\"response.created\"}\n\n");
    for item in [&shell, &mcp] {
        for kind in ["added", "done"] {
            let ev =
                serde_json::json!({"type": format!("response.output_item.{kind}"), "item": item});
            stream.push_str(&format!("data: {ev}\n\n"));
        }
    }
    stream.push_str("data: {\"type\":\"response.completed\",\"response\":{}}\n\n");
    let (items, err) = decode_all(StreamFormat::OpenAiResponsesStream, stream.as_bytes());
    assert_eq!(err, None);
    let calls = streamed_calls(&items);
    let action = shell["action"].to_string();
    assert_eq!(calls, read_calls(&[shell, mcp]));
    assert_eq!(
        calls[0],
        ("call_sh".to_owned(), "local_shell_call".to_owned(), action)
    );
}
