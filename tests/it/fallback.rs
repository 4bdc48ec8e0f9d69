//! Anthropic's server-side fallback in the live decoder (issue 21, "Refusals and
//! fallback"): a `fallback` content block means the model before it declined and the
//! API retried on a fallback model within the same response; the thinking and the
//! calls before it were dropped by the API, so no result will come for those calls.
//! The decoder withdraws them ([`Event::CallWithdrawn`]) and the tracker and a fed
//! [`Log`] must then agree with a log built from scratch in which each dropped call is
//! an assistant record (what the Anthropic file reader makes of a finished message),
//! checked against the seed's reference (`reference::is_legal_cut`).
//!
//! No recorded stream with a `fallback` block exists (the shared recordings have none;
//! vercel/ai's `anthropic-fallback*.chunks.txt` are hand-made and were skipped, see
//! `tests/fixtures/streams/SOURCES.md`), so the streams here are built by hand from the
//! documented shape: the block is `{"type": "fallback", "from": {"model": ...}, "to":
//! {"model": ...}, "trigger": {"type": "refusal", "category": ...}}` (Anthropic SDKs'
//! `BetaFallbackBlock`; <https://platform.claude.com/docs/en/build-with-claude/refusals-and-fallback>),
//! one content block among the others, with monotonic indexes (the SDKs' refusal
//! fallback middleware splices the fallback model's events onto the stream the same
//! way).

use cutpoint::compact::{self, Entry, Log, Options, Payload};
use cutpoint::stream::decode::{Decoded, Detail, Feed, StreamError, StreamFormat, decode_all};
use cutpoint::testing::reference;
use cutpoint::{AppendError, CallId, Event, EventError, Record, RecordKind, Tracker};
use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::streams::appended;

/// One content block of a hand-built Anthropic message.
#[derive(Clone, Debug)]
enum Block {
    Text,
    Thinking,
    /// A client `tool_use` with this id.
    Call(String),
    /// A `server_tool_use` with this id, answered in the stream by its result block.
    ServerPair(String),
    /// A `server_tool_use` with this id and no result (yet).
    ServerCall(String),
    Fallback,
}

fn sse(event: &str, data: &str) -> String {
    format!("event: {event}\ndata: {data}\n\n")
}

/// The fallback block as documented (see the module docs).
const FALLBACK_BLOCK: &str = r#"{"type":"fallback","from":{"model":"claude-fable-5"},"to":{"model":"claude-opus-4-8"},"trigger":{"type":"refusal","category":"cyber"}}"#;

/// The SSE bytes of one message holding `blocks`, ending with `stop_reason`.
fn stream(blocks: &[Block], stop_reason: &str) -> String {
    let mut out = sse(
        "message_start",
        r#"{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-fable-5","content":[],"stop_reason":null,"usage":{"input_tokens":120,"output_tokens":1}}}"#,
    );
    let mut index = 0;
    let mut block = |out: &mut String, start: &str, deltas: &[&str]| {
        out.push_str(&sse(
            "content_block_start",
            &format!(r#"{{"type":"content_block_start","index":{index},"content_block":{start}}}"#),
        ));
        for d in deltas {
            out.push_str(&sse(
                "content_block_delta",
                &format!(r#"{{"type":"content_block_delta","index":{index},"delta":{d}}}"#),
            ));
        }
        out.push_str(&sse(
            "content_block_stop",
            &format!(r#"{{"type":"content_block_stop","index":{index}}}"#),
        ));
        index += 1;
    };
    for b in blocks {
        match b {
            Block::Text => block(
                &mut out,
                r#"{"type":"text","text":""}"#,
                &[r#"{"type":"text_delta","text":"Let me look at that."}"#],
            ),
            Block::Thinking => block(
                &mut out,
                r#"{"type":"thinking","thinking":"","signature":""}"#,
                &[
                    r#"{"type":"thinking_delta","thinking":"The user wants the file."}"#,
                    r#"{"type":"signature_delta","signature":"EqQBCgIYAhIM"}"#,
                ],
            ),
            Block::Call(id) => block(
                &mut out,
                &format!(r#"{{"type":"tool_use","id":"{id}","name":"bash","input":{{}}}}"#),
                &[r#"{"type":"input_json_delta","partial_json":"{\"command\":\"ls\"}"}"#],
            ),
            Block::ServerPair(id) | Block::ServerCall(id) => {
                block(
                    &mut out,
                    &format!(
                        r#"{{"type":"server_tool_use","id":"{id}","name":"web_search","input":{{}}}}"#
                    ),
                    &[r#"{"type":"input_json_delta","partial_json":"{\"query\":\"rust\"}"}"#],
                );
                if matches!(b, Block::ServerPair(_)) {
                    block(
                        &mut out,
                        &format!(
                            r#"{{"type":"web_search_tool_result","tool_use_id":"{id}","content":[]}}"#
                        ),
                        &[],
                    );
                }
            }
            Block::Fallback => block(&mut out, FALLBACK_BLOCK, &[]),
        }
    }
    out.push_str(&sse(
        "message_delta",
        &format!(
            r#"{{"type":"message_delta","delta":{{"stop_reason":"{stop_reason}","stop_sequence":null}},"usage":{{"output_tokens":90}}}}"#
        ),
    ));
    out.push_str(&sse("message_stop", r#"{"type":"message_stop"}"#));
    out
}

/// The records the message's blocks become, built from the blocks alone (not from the
/// decoder): one record per block, bound to the message's first; a call before the
/// message's last `fallback` block (not answered in the stream) is an assistant
/// record, as the Anthropic reader reads a finished message; a server call answered
/// in the stream stays a call and its result block is its result.
fn reference_records(blocks: &[Block]) -> Vec<Record> {
    let last_fallback = blocks.iter().rposition(|b| matches!(b, Block::Fallback));
    let mut out = Vec::new();
    for (k, b) in blocks.iter().enumerate() {
        let dropped = last_fallback.is_some_and(|f| k < f);
        match b {
            Block::Text | Block::Thinking | Block::Fallback => out.push(Record::assistant(0)),
            Block::Call(id) | Block::ServerCall(id) if dropped => {
                let _ = id;
                out.push(Record::assistant(0));
            }
            Block::Call(id) | Block::ServerCall(id) => out.push(Record::tool_use(id.as_str(), 0)),
            Block::ServerPair(id) => {
                out.push(Record::tool_use(id.as_str(), 0));
                out.push(Record::tool_result(id.as_str(), 0));
            }
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, r)| if i > 0 { r.bound_to_previous() } else { r })
        .collect()
}

fn decode(bytes: &str) -> Vec<Decoded> {
    let (items, error) = decode_all(StreamFormat::AnthropicSse, bytes.as_bytes());
    assert!(error.is_none(), "{error:?}");
    items
}

/// The tracker's legal cuts and pending calls equal the reference's over `records`.
fn assert_matches_reference(t: &Tracker, records: &[Record], what: &str) {
    t.assert_invariants();
    assert_eq!(t.len(), records.len(), "{what}: records");
    for c in 0..=records.len() {
        assert_eq!(
            t.is_legal_cut(c),
            reference::is_legal_cut(records, c),
            "{what}: cut {c} of {records:?}"
        );
    }
    let mut pending: Vec<String> = t.pending_calls().iter().map(|p| p.id.to_string()).collect();
    let mut expected: Vec<String> = reference::pending_calls_at(records, records.len())
        .into_iter()
        .map(str::to_owned)
        .collect();
    pending.sort();
    expected.sort();
    assert_eq!(pending, expected, "{what}: pending calls");
}

/// The kinds and bindings of a log's records.
fn shapes(records: impl IntoIterator<Item = Record>) -> Vec<(RecordKind, bool)> {
    records
        .into_iter()
        .map(|r| (r.kind().clone(), r.is_bound_to_previous()))
        .collect()
}

#[test]
fn a_fallback_withdraws_the_calls_before_it_and_keeps_those_after() {
    let blocks = [
        Block::Thinking,
        Block::Text,
        Block::Call("toolu_A".into()),
        Block::Fallback,
        Block::Text,
        Block::Call("toolu_B".into()),
    ];
    let items = decode(&stream(&blocks, "tool_use"));
    // The decoder says what it dropped, in order, before the fallback record opens.
    let dropped: Vec<(usize, Option<String>, Option<Event>)> = items
        .iter()
        .filter_map(|d| match &d.detail {
            Detail::Dropped {
                records_after,
                call_id,
            } => Some((
                *records_after,
                call_id.as_ref().map(CallId::to_string),
                d.event.clone(),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        dropped,
        [
            (2, None, None),
            (
                0,
                Some("toolu_A".to_owned()),
                Some(Event::CallWithdrawn(CallId::from("toolu_A")))
            ),
        ]
    );

    // A bare tracker, after the user's message.
    let mut records = vec![Record::user(100)];
    records.extend(reference_records(&blocks));
    let mut t = Tracker::new();
    t.append(Record::user(100)).unwrap();
    for item in &items {
        t.feed(item).expect("feeds");
    }
    assert_matches_reference(&t, &records, "after the stream");
    assert_eq!(t.pending_count(), 1, "only toolu_B waits");
    assert!(!t.is_legal_cut(t.len()));
    // toolu_B's result makes the end legal; toolu_A's id stays used.
    t.append(Record::tool_result("toolu_B", 30)).unwrap();
    records.push(Record::tool_result("toolu_B", 30));
    assert_matches_reference(&t, &records, "after toolu_B's result");
    assert!(t.is_legal_cut(t.len()));
    assert!(matches!(
        t.append(Record::tool_use("toolu_A", 5)),
        Err(AppendError::DuplicateCall { .. })
    ));
    let appended = t.append(Record::tool_result("toolu_A", 5)).unwrap();
    assert_eq!(appended.anomaly, Some(cutpoint::Anomaly::DuplicateResult));

    // A log fed the same items: the dropped call is an assistant record without
    // payload, the dropped thinking is no longer reasoning, the fallback block is kept.
    let mut log = Log::new();
    log.append(Entry::from(Record::user(100))).unwrap();
    for item in &items {
        log.feed(item).expect("feeds");
        log.assert_invariants();
    }
    assert_matches_reference(log.tracker(), &records[..records.len() - 1], "the log");
    let e = log.entries();
    assert_eq!(e[3].record.kind(), &RecordKind::Assistant);
    assert!(e[3].record.is_bound_to_previous());
    assert_eq!(e[3].payload, Payload::None);
    assert_eq!(e[1].reasoning(), None, "the dropped thinking");
    assert_eq!(e[4].payload, Payload::Kept, "the fallback block");
    assert!(matches!(e[6].record.kind(), RecordKind::ToolUse(id) if id == "toolu_B"));
    assert_eq!(
        log.tool_group_count(),
        1,
        "toolu_B's message is still a tool group"
    );
    // The same as a log built from scratch from the finished records.
    let mut rebuilt = Log::new();
    rebuilt.append(Entry::from(Record::user(100))).unwrap();
    for entry in appended_entries(&items) {
        rebuilt.append(entry).unwrap();
    }
    assert_eq!(log.entries(), rebuilt.entries());
    assert_eq!(
        log.tracker().legal_cuts().collect::<Vec<_>>(),
        rebuilt.tracker().legal_cuts().collect::<Vec<_>>()
    );
    assert_eq!(
        (
            log.message_count(),
            log.turn_count(),
            log.tool_group_count()
        ),
        (
            rebuilt.message_count(),
            rebuilt.turn_count(),
            rebuilt.tool_group_count()
        )
    );
    // No pairing violation but the call still running.
    let report = compact::validate(log.entries(), Options::allowing_pending());
    assert!(
        report
            .violations
            .iter()
            .all(|v| matches!(v, compact::Violation::PendingAtEnd { call_id, .. } if call_id == "toolu_B")),
        "{:?}",
        report.violations
    );
    // A result for the withdrawn call is refused, naming it; nothing changes.
    let before = log.entries().len();
    let err = log
        .append(Entry::from(Record::tool_result("toolu_A", 5)))
        .unwrap_err();
    assert_eq!(
        err,
        AppendError::ResultForWithdrawnCall {
            call_id: CallId::from("toolu_A"),
            at: before
        }
    );
    assert!(err.to_string().contains("toolu_A"), "{err}");
    let err = log
        .handle(Event::Record(Record::tool_result("toolu_A", 5)))
        .unwrap_err();
    assert!(matches!(
        err,
        EventError::Append(AppendError::ResultForWithdrawnCall { .. })
    ));
    assert_eq!(log.entries().len(), before);
    log.append(Entry::from(Record::tool_result("toolu_B", 30)))
        .unwrap();
    assert!(log.tracker().is_legal_cut(log.len()));
}

/// The finished entries of one decoded stream (the records the items make, with what
/// the fallback dropped read as the reader reads it).
fn appended_entries(items: &[Decoded]) -> Vec<Entry> {
    appended(items).entries().iter().cloned().collect()
}

#[test]
fn a_fallback_as_the_first_block_drops_nothing() {
    // A refusal before any output: the fallback block opens the message.
    let blocks = [Block::Fallback, Block::Call("toolu_1".into())];
    let items = decode(&stream(&blocks, "tool_use"));
    assert!(
        !items
            .iter()
            .any(|d| matches!(d.detail, Detail::Dropped { .. }))
    );
    let mut t = Tracker::new();
    for item in &items {
        t.feed(item).unwrap();
    }
    assert_matches_reference(&t, &reference_records(&blocks), "fallback first");
    assert_eq!(t.pending_count(), 1);
}

#[test]
fn every_fallback_drops_what_came_before_it_once() {
    // Two hops: the second drops the first fallback model's call too; an answered
    // server call is not withdrawn (its result came), an unanswered one is.
    let blocks = [
        Block::Call("toolu_1".into()),
        Block::ServerPair("srvtoolu_1".into()),
        Block::Fallback,
        Block::Thinking,
        Block::Call("toolu_2".into()),
        Block::ServerCall("srvtoolu_2".into()),
        Block::Fallback,
        Block::Call("toolu_3".into()),
    ];
    let items = decode(&stream(&blocks, "tool_use"));
    let withdrawn: Vec<String> = items
        .iter()
        .filter_map(|d| match &d.event {
            Some(Event::CallWithdrawn(id)) => Some(id.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(withdrawn, ["toolu_1", "toolu_2", "srvtoolu_2"]);
    let mut t = Tracker::new();
    let mut log = Log::new();
    for item in &items {
        t.feed(item).unwrap();
        log.feed(item).unwrap();
    }
    let records = reference_records(&blocks);
    assert_matches_reference(&t, &records, "two hops");
    assert_matches_reference(log.tracker(), &records, "two hops, log");
    assert_eq!(
        shapes(log.entries().iter().map(|e| e.record.clone())),
        shapes(records)
    );
}

#[test]
fn malformed_fallback_blocks_are_errors_naming_the_event() {
    for (block, says) in [
        (
            r#"{"type":"fallback","to":{"model":"claude-opus-4-8"}}"#,
            "without `from`",
        ),
        (
            r#"{"type":"fallback","from":{"model":"claude-fable-5"}}"#,
            "without `to`",
        ),
        (
            r#"{"type":"fallback","from":"claude-fable-5","to":{"model":"m"}}"#,
            "`from` is not",
        ),
        (
            r#"{"type":"fallback","from":{"model":"a"},"to":{}}"#,
            "`to` names no model",
        ),
        (
            r#"{"type":"fallback","from":{"model":"a"},"to":{"model":7}}"#,
            "`to` is not",
        ),
    ] {
        let good = stream(
            &[Block::Call("toolu_1".into()), Block::Fallback],
            "end_turn",
        );
        let bytes = good.replace(FALLBACK_BLOCK, block);
        let (items, error) = decode_all(StreamFormat::AnthropicSse, bytes.as_bytes());
        let Some(StreamError::Malformed { event, message, .. }) = &error else {
            panic!("{block}: {error:?}");
        };
        // message_start, then the call's start, delta and stop: the fallback's start
        // is event 5 (events count from 1).
        assert_eq!(*event, 5, "{block}");
        assert!(message.contains(says), "{block}: {message}");
        assert!(
            error.unwrap().to_string().starts_with("event 5 "),
            "{block}"
        );
        // Nothing was withdrawn on the word of a malformed block.
        let mut t = Tracker::new();
        for item in &items {
            t.feed(item).unwrap();
        }
        assert_eq!(t.pending_count(), 1, "{block}");
    }
}

fn block() -> impl Strategy<Value = Block> {
    // A small id alphabet per message, made unique by position below.
    prop_oneof![
        2 => Just(Block::Text),
        2 => Just(Block::Thinking),
        3 => Just(Block::Call(String::new())),
        1 => Just(Block::ServerPair(String::new())),
        1 => Just(Block::ServerCall(String::new())),
        2 => Just(Block::Fallback),
    ]
}

/// A turn: the assistant's message, then which of its pending client calls get a
/// result (a bit per call, in order) before the next user message.
fn turns() -> impl Strategy<Value = Vec<(Vec<Block>, Vec<bool>)>> {
    proptest::collection::vec(
        (
            proptest::collection::vec(block(), 1..10),
            proptest::collection::vec(any::<bool>(), 10),
        ),
        1..4,
    )
}

proptest! {
    #![proptest_config(Config { cases: 256, ..Config::default() })]

    /// Generated conversations whose messages fall back at random points: after every
    /// message and every batch of results, the tracker fed by the decoder and the
    /// log fed the same items agree with the reference over the records built from
    /// scratch (dropped calls as assistant records), and the log with one appended
    /// from the finished records.
    #[test]
    fn random_fallbacks_agree_with_the_reference(turns in turns()) {
        let mut t = Tracker::new();
        let mut log = Log::new();
        let mut records: Vec<Record> = Vec::new();
        for (turn, (blocks, answers)) in turns.into_iter().enumerate() {
            let blocks: Vec<Block> = blocks
                .into_iter()
                .enumerate()
                .map(|(k, b)| match b {
                    Block::Call(_) => Block::Call(format!("toolu_{turn}_{k}")),
                    Block::ServerPair(_) => Block::ServerPair(format!("srvtoolu_{turn}_{k}")),
                    Block::ServerCall(_) => Block::ServerCall(format!("srvtoolu_{turn}_{k}")),
                    b => b,
                })
                .collect();
            let user = Record::user(50);
            t.append(user.clone()).unwrap();
            log.append(Entry::from(user.clone())).unwrap();
            records.push(user);
            let items = decode(&stream(&blocks, "tool_use"));
            for item in &items {
                t.feed(item).expect("the tracker takes every item");
                log.feed(item).expect("the log takes every item");
            }
            log.assert_invariants();
            records.extend(reference_records(&blocks));
            assert_matches_reference(&t, &records, "after the message");
            assert_matches_reference(log.tracker(), &records, "the log, after the message");
            prop_assert_eq!(
                shapes(log.entries().iter().map(|e| e.record.clone())),
                shapes(records.iter().cloned()),
            );
            // The log equals one appended from scratch from the finished records.
            let start = log.len() - appended(&items).len();
            prop_assert_eq!(
                log.entries().iter().skip(start).cloned().collect::<Vec<_>>(),
                appended_entries(&items)
            );
            // Some of the client calls still pending get their result.
            let pending: Vec<CallId> = t
                .pending_calls()
                .iter()
                .filter(|p| p.id.as_str().starts_with("toolu_"))
                .map(|p| p.id.clone())
                .collect();
            for (k, id) in pending.into_iter().enumerate() {
                if answers[k % answers.len()] {
                    let result = Record::tool_result(id, 20);
                    let result = if records.last().is_some_and(|r| matches!(r.kind(), RecordKind::ToolResult(_))) {
                        result.bound_to_previous()
                    } else {
                        result
                    };
                    t.append(result.clone()).unwrap();
                    log.append(Entry::from(result.clone())).unwrap();
                    records.push(result);
                }
            }
            assert_matches_reference(&t, &records, "after the results");
            assert_matches_reference(log.tracker(), &records, "the log, after the results");
            prop_assert_eq!(
                (log.message_count(), log.turn_count(), log.tool_group_count()),
                {
                    let rebuilt = Log::from_entries(log.entries().iter().cloned()).unwrap();
                    (rebuilt.message_count(), rebuilt.turn_count(), rebuilt.tool_group_count())
                }
            );
        }
    }
}
