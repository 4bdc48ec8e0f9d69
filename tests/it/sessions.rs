//! Real sessions read right (issue 16), one test per point, on the fixtures taken
//! from real files (tests/fixtures/transcripts/SOURCES.md): Claude Code messages
//! rebuilt as the request was built, violations on the line of the offending block,
//! calls left open at a runtime's compaction, Gemini CLI sessions, detection of
//! unknown shapes and one-line request bodies, deferrals in message space, rewrites
//! that fold earlier summaries, keep every call id once and keep Claude Code's
//! `parentUuid` chain, and `compact --keep`'s window.

#![cfg(feature = "formats")]

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::transcripts::fixture;

use cutpoint::compact::{SummaryParts, Window};
use cutpoint::format::{
    self, Block, ByteEstimate, DeferReport, Format, Role, Rule, RuleViolation, Transcript,
};
use cutpoint::testing::writers::{self as rewrite, RewriteError, Rewritten};

fn read_text(text: &str) -> Transcript {
    let f = format::detect(text).unwrap_or_else(|e| panic!("{e}"));
    format::read(text, f, &ByteEstimate).unwrap_or_else(|e| panic!("{e}"))
}

fn read(name: &str) -> (String, Transcript) {
    let text = fixture(name);
    let t = read_text(&text);
    (text, t)
}

fn check(t: &Transcript) -> Vec<RuleViolation> {
    format::check_rules(t)
}

const INTERLEAVED: &str = "claude-code__entireio-cli__1a-8a83a35a9b-0-interleaved-parallel.jsonl";
const INTERLEAVED_CUT: &str =
    "claude-code__entireio-cli__6a-54c404f24f-0-interleaved-parallel-lines-127-139.jsonl";
const RESULT_AND_TEXT: &str = "claude-code__entireio-cli__82-060566ec4b-0-result-after-text.jsonl";
const ORPHAN_AND_PENDING: &str =
    "claude-code__entireio-cli__ec-38b74f08e3-3-orphan-interrupts.jsonl";
const IN_FLIGHT: &str =
    "claude-code__entireio-cli__26-95fc81fb3d-0-inflight-at-compact-lines-528-559.jsonl";
const GEMINI_CLI: &str = "gemini-cli-session__codemie-code__session-2025-12-01T21-45-5b959dae.json";
const TAU: &str = "openai-chat__tau-bench__gpt-4o-airline-traj173.json";
const TAU_ONE_LINE: &str = "openai-chat__tau-bench__gpt-4o-airline-traj173-one-line.json";
const TAU_REUSED: &str = "openai-chat__tau-bench__gpt-4o-airline-traj196-reused-ids.json";
const TAU_RESULTS: &str = "chat-wrapper__tau-bench__gpt-4o-airline-first-2.json";

/// Every fixture with its verdict: `(rule, call id, line, pending at end)`.
#[allow(clippy::type_complexity)]
fn verdicts() -> Vec<(&'static str, Format, Vec<(Rule, &'static str, usize, bool)>)> {
    vec![
        (INTERLEAVED, Format::ClaudeCode, vec![]),
        (INTERLEAVED_CUT, Format::ClaudeCode, vec![]),
        (RESULT_AND_TEXT, Format::ClaudeCode, vec![]),
        (
            ORPHAN_AND_PENDING,
            Format::ClaudeCode,
            vec![
                (
                    Rule::AnthropicUnexpectedToolResult,
                    "toolu_01UP5eJfu9eDH6NfgkgTSAUU",
                    1,
                    false,
                ),
                (
                    Rule::AnthropicToolUseWithoutResult,
                    "toolu_01B4ubmeEgL1EjtGHRo2upyd",
                    234,
                    true,
                ),
            ],
        ),
        (
            IN_FLIGHT,
            Format::ClaudeCode,
            vec![(
                Rule::CallOpenAtCompaction,
                "toolu_012F8XWXYYV3iE2nWAjnQkPP",
                6,
                false,
            )],
        ),
        (
            "claude-code__codemie-code__subagent-agent-a485154.jsonl",
            Format::ClaudeCode,
            vec![],
        ),
        (
            "claude-code__codemie-code__incremental-simple-turn-2-summaries.jsonl",
            Format::ClaudeCode,
            vec![],
        ),
        (GEMINI_CLI, Format::GeminiCli, vec![]),
        (TAU, Format::OpenAiChat, vec![]),
        (TAU_ONE_LINE, Format::OpenAiChat, vec![]),
        (TAU_REUSED, Format::OpenAiChat, vec![]),
    ]
}

#[test]
fn the_copied_real_files_get_their_verdicts() {
    for (name, want_format, want) in verdicts() {
        let (_, t) = read(name);
        assert_eq!(t.format, want_format, "{name}");
        let got: Vec<(Rule, String, usize, bool)> = check(&t)
            .into_iter()
            .map(|v| {
                let id = v.call_id.map(|c| c.to_string()).unwrap_or_default();
                (v.rule, id, v.line, v.pending_at_end)
            })
            .collect();
        let want: Vec<(Rule, String, usize, bool)> = want
            .into_iter()
            .map(|(r, id, line, p)| (r, id.to_owned(), line, p))
            .collect();
        assert_eq!(got, want, "{name}");
    }
    let err = format::detect(&fixture(TAU_RESULTS))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("a tau-bench results file: 2 task records"),
        "{err}"
    );
}

/// Point 1: parallel `tool_use` records sharing `message.id`, interleaved with their
/// results, are one assistant message answered by one user message, as `stats`
/// counts them.
#[test]
fn interleaved_parallel_calls_are_one_message_and_its_answer() {
    for name in [INTERLEAVED, INTERLEAVED_CUT] {
        let (_, t) = read(name);
        assert!(check(&t).is_empty(), "{name}: {:?}", check(&t));
        // Every assistant message with calls is followed by one user message holding
        // exactly their results.
        for (i, m) in t.messages.iter().enumerate() {
            let calls: BTreeSet<&str> = m.calls().map(|(_, id, _)| id.as_str()).collect();
            if calls.is_empty() {
                continue;
            }
            let next = &t.messages[i + 1];
            let results: BTreeSet<&str> = next.results().map(|(_, id)| id.as_str()).collect();
            assert_eq!(calls, results, "{name}: message {i}");
        }
    }
    // 1a: the message at line 73 holds the four calls of lines 73, 74, 76, 79; its
    // answer the results of lines 75, 77, 78, 80, in that order.
    let (_, t) = read(INTERLEAVED);
    let m = t
        .messages
        .iter()
        .position(|m| m.line == 73)
        .expect("line 73");
    let lines = |m: &format::Message| {
        (0..m.blocks.len())
            .map(|k| m.block_line(k))
            .collect::<Vec<_>>()
    };
    assert_eq!(lines(&t.messages[m]), [73, 74, 76, 79]);
    assert_eq!(lines(&t.messages[m + 1]), [75, 77, 78, 80]);
    // The two interleaved messages are one span of the file: no cut between them.
    assert!(t.messages[m + 1].bound);
    let cuts = t.legal_message_cuts().expect("tracker");
    assert!(!cuts.contains(&(m + 1)) && cuts.contains(&m) && cuts.contains(&(m + 2)));
}

/// Point 2: a user record holding a result and text typed while tools ran: the
/// rebuilt user message has the results first, as the request had them.
#[test]
fn results_come_before_text_typed_while_tools_ran() {
    let (_, t) = read(RESULT_AND_TEXT);
    assert!(check(&t).is_empty(), "{:?}", check(&t));
    let m = t
        .messages
        .iter()
        .find(|m| m.spans.len() == 5 && m.results().count() == 5)
        .expect("the answer to the five parallel calls");
    let kinds: Vec<(bool, usize)> = m
        .blocks
        .iter()
        .enumerate()
        .map(|(k, (b, _))| (matches!(b, Block::Result { .. }), m.block_line(k)))
        .collect();
    assert_eq!(
        kinds,
        [
            (true, 111),
            (true, 114),
            (true, 117),
            (true, 120),
            (true, 123),
            (false, 117)
        ]
    );
}

/// Point 3: a violation names the line of the record holding the offending block.
#[test]
fn violations_name_the_line_of_the_offending_record() {
    let (_, t) = read(ORPHAN_AND_PENDING);
    let v = check(&t);
    let pending = v
        .iter()
        .find(|v| v.rule == Rule::AnthropicToolUseWithoutResult)
        .expect("the pending call");
    // The message starts with a thinking record (232) and a text record (233).
    assert_eq!(t.messages[pending.message].line, 232);
    assert_eq!(pending.line, 234);
}

/// Point 4: a call in flight when Claude Code's own compaction fired is reported,
/// but not as the provider's error, and not as pending.
#[test]
fn a_call_open_at_the_runtimes_compaction_is_reported_without_a_provider_error() {
    let (_, t) = read(IN_FLIGHT);
    let v = check(&t);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::CallOpenAtCompaction);
    assert!(!v[0].pending_at_end);
    assert!(v[0].text.contains("still in flight"), "{}", v[0].text);
    assert!(
        v[0].text.contains("new history starts at line 9"),
        "{}",
        v[0].text
    );
    assert!(v[0].text.contains("the provider no longer receives it"));
    assert!(!v[0].text.contains("tool_use` ids were found"));
    assert_eq!(t.messages[t.live_from()].line, 9);
}

/// Point 5: Gemini CLI sessions are read, checked, counted and compacted in their
/// own shape; unknown item types and tau-bench results files are no format.
#[test]
fn gemini_cli_sessions_are_a_format_and_unknown_shapes_are_none() {
    let (text, t) = read(GEMINI_CLI);
    assert_eq!(t.format, Format::GeminiCli);
    assert_eq!(t.messages.len(), 14);
    let calls: usize = t.messages.iter().map(|m| m.calls().count()).sum();
    let results: usize = t.messages.iter().map(|m| m.results().count()).sum();
    assert_eq!((calls, results), (10, 10));
    assert!(check(&t).is_empty());
    // Every message with calls is one unit: no cut inside it.
    assert_eq!(t.legal_message_cuts().expect("tracker").len(), 15);
    // A result removed: Gemini's rule, on the line of the call's record.
    let broken = text.replacen(
        "\"result\": [\n            {\n              \"functionResponse\": {\n                \"id\": \"list_directory-1764625554423-6b5d2c6179cc4\"",
        "\"result_dropped\": [\n            {\n              \"functionResponse\": {\n                \"id\": \"list_directory-1764625554423-6b5d2c6179cc4\"",
        1,
    );
    assert_ne!(broken, text);
    let b = format::read(&broken, Format::GeminiCli, &ByteEstimate).expect("reads");
    let v = check(&b);
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!(v[0].rule, Rule::GeminiResponseNotAfterCall);
    let call_line = 1 + text[..text.find("\"id\": \"list_directory-").expect("id")]
        .matches('\n')
        .count()
        - 1;
    assert_eq!(v[0].line, call_line, "the line where the toolCall starts");
    // The same shape with an item type no format knows: no format, naming it.
    let unknown = text.replace("\"type\": \"gemini\"", "\"type\": \"robot\"");
    let err = format::detect(&unknown).unwrap_err().to_string();
    assert!(err.contains("\"robot\""), "{err}");
    // Compacted in its own shape, read back clean.
    let done = compact(&t, &text, 1, 2, 0).expect("compacts");
    let back = format::read(&done.text, Format::GeminiCli, &ByteEstimate).expect("re-reads");
    assert!(check(&back).is_empty());
    let v: serde_json::Value = serde_json::from_str(&done.text).expect("JSON");
    assert_eq!(v["sessionId"], "5b959dae-8655-4cd1-b10f-720b8c336ea2");
    let summary = &v["messages"][done.head];
    assert_eq!(summary["type"], "user");
    assert!(summary["id"].is_string() && summary["timestamp"].is_string());
}

/// Point 6: a request body on one line is its provider's document, read exactly as
/// the same body written over many lines.
#[test]
fn a_one_line_request_body_is_its_provider_format() {
    let (_, one) = read(TAU_ONE_LINE);
    let (_, many) = read(TAU);
    assert_eq!(one.format, Format::OpenAiChat);
    assert_eq!(one.messages.len(), many.messages.len());
    let ids = |t: &Transcript| -> Vec<String> {
        t.messages
            .iter()
            .flat_map(|m| m.calls().map(|(_, id, _)| id.to_string()))
            .collect()
    };
    assert_eq!(ids(&one), ids(&many));
    assert_eq!(
        one.legal_message_cuts().expect("tracker"),
        many.legal_message_cuts().expect("tracker")
    );
    assert!(format::is_one_line_document(&fixture(TAU_ONE_LINE)));
    assert!(!format::is_one_line_document(&fixture(TAU)));
    assert!(!format::is_one_line_document(
        "{\"kind\":\"user\",\"tokens\":1}\n"
    ));
}

/// Point 7: a deferral names legal message cuts, with their token distance from the
/// target.
#[test]
fn deferrals_name_legal_message_cuts_and_their_distance() {
    let (_, t) = read(RESULT_AND_TEXT);
    let (tracker, owner) = t.tracker().expect("tracker");
    let legal = t.legal_message_cuts().expect("tracker");
    let mut seen = 0;
    for target in (0..tracker.total_tokens()).step_by(97) {
        let Err(defer) = tracker.select_legal_cut(target, 50) else {
            continue;
        };
        seen += 1;
        let report = DeferReport::messages(&defer, &tracker, &t, &owner);
        let tokens_before = |m: usize| -> u64 {
            t.messages[t.live_from()..m]
                .iter()
                .map(format::Message::tokens)
                .sum()
        };
        if let Some(below) = report.below {
            assert!(legal.contains(&below.at), "{report}");
            assert_eq!(below.distance, target - tokens_before(below.at), "{report}");
        }
        if let Some(above) = report.above {
            assert!(legal.contains(&above.at), "{report}");
            assert_eq!(above.distance, tokens_before(above.at) - target, "{report}");
        }
        let text = report.to_string();
        assert!(text.contains("message"), "{text}");
        assert!(!text.contains("record"), "{text}");
        assert!(text.contains("tokens short of the target"), "{text}");
    }
    assert!(seen > 10, "{seen} deferrals");
}

/// A compaction of `t` at `num/den` of its live tokens (or, when the legal cut
/// there leaves nothing to summarize, at the first of 3/4, 9/10 and all of them that
/// does), walking back as far as it takes, `keep_head` messages pinned.
fn compact(t: &Transcript, text: &str, num: u64, den: u64, keep_head: usize) -> Option<Rewritten> {
    let total = t.live_tokens();
    let targets = [total / den * num, total / 4 * 3, total / 10 * 9, total];
    targets
        .into_iter()
        .filter(|&x| x >= total / den * num)
        .find_map(|target| {
            let window = Window::new(target).lookback(total);
            match rewrite::compact(t, text, &window, keep_head, "Summary.") {
                Ok(done) => done,
                Err(RewriteError::Deferred(_) | RewriteError::Plan(_)) => None,
                Err(e) => panic!("{e}"),
            }
        })
}

/// Every call of a transcript, by id, as often as it is made: the calls of its
/// messages and the units of its summaries.
fn calls(t: &Transcript) -> BTreeMap<String, usize> {
    let mut out = BTreeMap::new();
    for m in &t.messages {
        for (b, _) in &m.blocks {
            match b {
                Block::Call { id, .. } => *out.entry(id.to_string()).or_insert(0) += 1,
                Block::Summary(parts) => {
                    for u in &parts.units {
                        *out.entry(u.call_id.to_string()).or_insert(0) += 1;
                    }
                }
                _ => {}
            }
        }
    }
    out
}

fn keyset(t: &Transcript) -> BTreeSet<(&'static str, Option<String>)> {
    check(t)
        .into_iter()
        .map(|v| (v.rule.name(), v.call_id.map(|c| c.to_string())))
        .collect()
}

/// Point 8: compacting twice keeps every call id exactly once (the second summary
/// folds the first), breaks no rule the input kept, and, for Claude Code, keeps the
/// `parentUuid` chain from the last record through the summary to the head.
#[test]
fn compacting_twice_keeps_every_call_once_and_the_claude_code_chain() {
    let files = [
        "claude-code__claude-reliability__coverage-test-fix.jsonl",
        "claude-code__claude-reliability__python-to-rust-port.jsonl",
        "claude-code__spotter__4d5611e5-main.jsonl",
        "claude-code__codemie-code__subagent-agent-a485154.jsonl",
        INTERLEAVED,
        RESULT_AND_TEXT,
        ORPHAN_AND_PENDING,
        IN_FLIGHT,
        "codex__localpush__rollout-12-41-04-parallel7.jsonl",
        "codex__localpush__rollout-12-47-42-orphan-call.jsonl",
        "codex__localpush__rollout-12-54-34-compacted.jsonl",
        "codex__localpush__rollout-13-19-38-trailing-call.jsonl",
        GEMINI_CLI,
        "chat__swe-agent__marshmallow-1867-function_calling_replace.traj",
        TAU,
        TAU_REUSED,
    ];
    let mut chains = 0;
    for name in files {
        let (text, t) = read(name);
        for keep_head in [0, 1] {
            let case = format!("{name} keep_head {keep_head}");
            let Some(first) = compact(&t, &text, 1, 2, keep_head) else {
                panic!("{case}: the first compaction defers");
            };
            let t1 = read_text(&first.text);
            assert_eq!(calls(&t1), calls(&t), "{case}: first pass");
            // Where the first summary shares a message with the pinned head (Claude
            // Code merges a user record into the user message before it, as it sends
            // them), it is pinned with the head and kept verbatim beside the second;
            // past such a head, what is left may be only a call in flight.
            let pinned_first = t1.messages[t1.live_from()..]
                .iter()
                .position(|m| m.blocks.iter().any(|(b, _)| matches!(b, Block::Summary(_))))
                .is_some_and(|at| at < keep_head);
            let Some(second) = compact(&t1, &first.text, 3, 4, keep_head) else {
                assert!(pinned_first, "{case}: the second compaction defers");
                continue;
            };
            let t2 = read_text(&second.text);
            assert_eq!(calls(&t2), calls(&t), "{case}: second pass");
            // The first summary was folded, not kept beside the second.
            let summaries = |t: &Transcript| {
                t.messages[t.live_from()..]
                    .iter()
                    .flat_map(|m| &m.blocks)
                    .filter(|(b, _)| matches!(b, Block::Summary(_)))
                    .count()
            };
            // One summary more than the input's live history held, or as many when
            // the first pass folded one of them; the second pass folds the first.
            let before = summaries(&t);
            assert!(
                summaries(&t1) == before + 1 || (before > 0 && summaries(&t1) == before),
                "{case}: {} then {}",
                before,
                summaries(&t1)
            );
            assert_eq!(
                summaries(&t2),
                summaries(&t1) + usize::from(pinned_first),
                "{case}"
            );
            // A folded first summary's units are in the second's ledger.
            assert!(
                pinned_first || second.ledger.len() >= first.ledger.len(),
                "{case}"
            );
            assert!(
                keyset(&t2).is_subset(&keyset(&t)),
                "{case}: {:?}",
                keyset(&t2)
            );
            if t.format == Format::ClaudeCode && chain_is_whole(&text) {
                for (out, done) in [(&first.text, &first), (&second.text, &second)] {
                    chain_runs_through_the_summary_to_the_head(out, done, keep_head, &case);
                }
                chains += 1;
            }
        }
    }
    // The Claude Code files whose own chain is whole, each at two heads.
    assert!(chains >= 8, "{chains} chains followed");
}

/// Whether following `parentUuid` from the last record of a Claude Code file ends at
/// `null` (some real files are slices whose links leave the file).
fn chain_is_whole(text: &str) -> bool {
    let lines: Vec<serde_json::Value> = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let by_uuid: HashMap<&str, &serde_json::Value> = lines
        .iter()
        .filter_map(|v| Some((v["uuid"].as_str()?, v)))
        .collect();
    let Some(mut at) = lines.iter().rev().find(|v| v["uuid"].is_string()) else {
        return false;
    };
    for _ in 0..=lines.len() {
        match at["parentUuid"].as_str() {
            None => return true,
            Some(p) => match by_uuid.get(p) {
                Some(v) => at = v,
                None => return false,
            },
        }
    }
    false
}

/// Follows `parentUuid` from the last record of `out`: it reaches the summary
/// cutpoint wrote, then its `compact_boundary`, and ends at `null`, never at a record
/// the file lacks. A pinned head stays live: the summary after it is an ordinary user
/// record (a boundary there would end the head's history, for cutpoint's reader and
/// for Claude Code), whose chain runs on into the head.
fn chain_runs_through_the_summary_to_the_head(
    out: &str,
    done: &Rewritten,
    keep_head: usize,
    case: &str,
) {
    let lines: Vec<serde_json::Value> = out
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("JSON lines"))
        .collect();
    let mut by_uuid: HashMap<&str, (usize, &serde_json::Value)> = HashMap::new();
    for (i, v) in lines.iter().enumerate() {
        if let Some(u) = v["uuid"].as_str() {
            by_uuid.insert(u, (i, v));
        }
    }
    let pinned = keep_head > 0 && done.head > 0;
    let summary_at = lines
        .iter()
        .rposition(|v| {
            (pinned || v["isCompactSummary"] == true)
                && v["message"]["content"]
                    .as_str()
                    .is_some_and(|c| SummaryParts::parse(c).is_some())
        })
        .unwrap_or_else(|| panic!("{case}: cutpoint's summary record"));
    let boundaries = lines
        .iter()
        .filter(|v| v["subtype"] == "compact_boundary")
        .count();
    // One boundary per summary: a folded summary's boundary went with it.
    assert_eq!(
        boundaries,
        lines
            .iter()
            .filter(|v| v["isCompactSummary"] == true)
            .count(),
        "{case}"
    );
    let last = lines
        .iter()
        .rposition(|v| v["uuid"].is_string())
        .expect("a record with a uuid");
    let mut at = last;
    let mut path = vec![at];
    while let Some(parent) = lines[at]["parentUuid"].as_str() {
        let (i, _) = by_uuid
            .get(parent)
            .copied()
            .unwrap_or_else(|| panic!("{case}: parentUuid {parent} names no record"));
        assert!(path.len() <= lines.len(), "{case}: a cycle");
        at = i;
        path.push(at);
    }
    let s = path
        .iter()
        .position(|&i| i == summary_at)
        .unwrap_or_else(|| panic!("{case}: the chain from the last record misses the summary"));
    if pinned {
        let after = &path[s + 1..];
        assert!(
            !after.is_empty(),
            "{case}: the chain goes on into the pinned head"
        );
        assert!(after.iter().all(|&i| i < summary_at), "{case}");
        assert!(
            lines[summary_at..]
                .iter()
                .all(|v| v["subtype"] != "compact_boundary"),
            "{case}: no boundary after a pinned head"
        );
        return;
    }
    let boundary = &lines[summary_at - 1];
    assert_eq!(boundary["subtype"], "compact_boundary", "{case}");
    assert_eq!(lines[summary_at]["parentUuid"], boundary["uuid"], "{case}");
    assert_eq!(
        path.get(s + 1),
        Some(&(summary_at - 1)),
        "{case}: then the boundary"
    );
    assert!(path.len() == s + 2, "{case}: the boundary starts the chain");
    assert!(boundary["parentUuid"].is_null(), "{case}");
}

/// Point 8: an earlier summary is folded (Claude Code's prose kept, cutpoint's units
/// kept), a Codex `compacted` item is pinned, and orphan results inside the region
/// are listed as orphans.
#[test]
fn earlier_summaries_fold_compacted_items_stay_and_orphans_are_listed() {
    // Claude Code's own summary, at the start of the live history, is folded.
    let (text, t) = read(IN_FLIGHT);
    let done = compact(&t, &text, 1, 2, 0).expect("compacts");
    assert_eq!(done.head, t.live_from());
    let back = read_text(&done.text);
    let Some((Block::Summary(parts), _)) = back.messages[back.live_from()].blocks.first() else {
        panic!("a summary opens the live history");
    };
    assert!(
        parts
            .prose
            .starts_with("This session is being continued from a previous conversation"),
        "{}",
        parts.prose
    );
    assert!(parts.prose.ends_with("Summary."));
    // The in-flight call of the replaced history stays reported, once.
    assert_eq!(keyset(&back), keyset(&t));
    // Claude Code's boundary was replaced by cutpoint's (one per summary).
    assert_eq!(done.text.matches("\"compact_boundary\"").count(), 1);

    // A Codex compacted item stays where it is.
    let name = "codex__localpush__rollout-12-54-34-compacted.jsonl";
    let (text, t) = read(name);
    let done = compact(&t, &text, 1, 2, 0).expect("compacts");
    assert_eq!(done.head, t.live_from() + 1);
    let back = read_text(&done.text);
    assert_eq!(back.messages[back.live_from()].role, Role::Compacted);
    assert_eq!(
        back.messages[back.live_from()].spans[0].clone().len(),
        t.messages[t.live_from()].spans[0].clone().len()
    );

    // The result on line 1 answers no call in the file: listed as an orphan.
    let (text, t) = read(ORPHAN_AND_PENDING);
    let done = compact(&t, &text, 1, 2, 0).expect("compacts");
    assert_eq!(done.head, 0);
    let ids: Vec<String> = done.orphans.iter().map(|o| o.call_id.to_string()).collect();
    assert_eq!(ids, ["toolu_01UP5eJfu9eDH6NfgkgTSAUU"]);
    let back = read_text(&done.text);
    let Some((Block::Summary(parts), _)) = back.messages[back.live_from()].blocks.first() else {
        panic!("a summary opens the live history");
    };
    assert_eq!(parts.orphans, done.orphans);
    assert!(
        done.text
            .contains("Tool results without their call (orphans")
    );
    // Compacted again, the orphan stays listed.
    let again = compact(&back, &done.text, 3, 4, 0).expect("compacts");
    let ids: Vec<String> = again
        .orphans
        .iter()
        .map(|o| o.call_id.to_string())
        .collect();
    assert_eq!(ids, ["toolu_01UP5eJfu9eDH6NfgkgTSAUU"]);
}

/// Point 9 in the library: a window whose target is the live tokens minus `keep`
/// keeps at least `keep` tokens verbatim, and the legal cut nearest that target.
#[test]
fn keeping_the_most_recent_tokens_keeps_at_least_that_many() {
    let (text, t) = read(INTERLEAVED);
    let total = t.live_tokens();
    let legal = t.legal_message_cuts().expect("tracker");
    for keep in [0, 1_000, 10_000, total / 2, total - 1] {
        let window = Window::new(total - keep).lookback(total);
        let Some(done) = rewrite::compact(&t, &text, &window, 0, "S.").expect("compacts") else {
            continue;
        };
        let kept: u64 = t.messages[done.cut..]
            .iter()
            .map(format::Message::tokens)
            .sum();
        assert!(kept >= keep, "keep {keep}: kept {kept}");
        // No legal cut between the chosen one and the target keeps less.
        let next = legal.iter().find(|&&c| c > done.cut).copied();
        if let Some(next) = next {
            let kept_next: u64 = t.messages[next..].iter().map(format::Message::tokens).sum();
            assert!(kept_next < keep, "keep {keep}: cut {next} was nearer");
        }
    }
}
