//! The real transcripts in tests/fixtures/transcripts (see SOURCES.md there): each
//! gets the right verdict, and every legal cut the tracker reports on each is a
//! message boundary whose compaction breaks no provider rule.

#![cfg(feature = "formats")]

use std::collections::BTreeSet;
use std::path::PathBuf;

use cutpoint::format::{self, ByteEstimate, Format, Rule, RuleViolation as Violation, Transcript};
use cutpoint::testing::writers as compact;

/// The text of fixture `name` (also used by `sessions.rs`).
pub(crate) fn fixture(name: &str) -> String {
    let path: PathBuf = [
        env!("CARGO_MANIFEST_DIR"),
        "tests/fixtures/transcripts",
        name,
    ]
    .iter()
    .collect();
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Every fixture this crate reads, with its format.
pub(crate) const FIXTURES: [(&str, Format); 9] = [
    (
        "chat__swe-agent__marshmallow-1867-function_calling_replace.traj",
        Format::OpenAiChat,
    ),
    (
        "claude-code__claude-reliability__coverage-test-fix.jsonl",
        Format::ClaudeCode,
    ),
    (
        "claude-code__claude-reliability__python-to-rust-port.jsonl",
        Format::ClaudeCode,
    ),
    (
        "claude-code__spotter__4d5611e5-agent-acompact-e1f845.jsonl",
        Format::ClaudeCode,
    ),
    (
        "claude-code__spotter__4d5611e5-main.jsonl",
        Format::ClaudeCode,
    ),
    (
        "codex__localpush__rollout-12-41-04-parallel7.jsonl",
        Format::CodexRollout,
    ),
    (
        "codex__localpush__rollout-12-47-42-orphan-call.jsonl",
        Format::CodexRollout,
    ),
    (
        "codex__localpush__rollout-12-54-34-compacted.jsonl",
        Format::CodexRollout,
    ),
    (
        "codex__localpush__rollout-13-19-38-trailing-call.jsonl",
        Format::CodexRollout,
    ),
];

pub(crate) fn read(name: &str) -> (String, Transcript) {
    let text = fixture(name);
    let format = format::detect(&text).unwrap_or_else(|e| panic!("{name}: {e}"));
    let t = format::read(&text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{name}: {e}"));
    (text, t)
}

#[test]
fn detection_names_each_fixture_format() {
    for (name, want) in FIXTURES {
        assert_eq!(format::detect(&fixture(name)).ok(), Some(want), "{name}");
    }
    let err = format::detect(&fixture("openhands__wrong_initial_state.json")).unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("cannot tell the format"), "{text}");
    for f in Format::ALL {
        assert!(text.contains(f.name()), "the error lists {f}: {text}");
    }
}

#[test]
fn orphan_call_file_has_exactly_one_call_left_behind() {
    let (_, t) = read("codex__localpush__rollout-12-47-42-orphan-call.jsonl");
    let v = format::rules::check_messages(t.format, &t.messages);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].rule, Rule::ResponsesNoOutput);
    assert_eq!(
        v[0].call_id.as_deref(),
        Some("call_BpTazJ89W9PntRqGPwDNfwEY")
    );
    assert!(!v[0].pending_at_end, "the session moved on after it");
    assert_eq!(v[0].line, 826);
    assert_eq!(
        v[0].text,
        "No tool output found for function call call_BpTazJ89W9PntRqGPwDNfwEY."
    );
}

#[test]
fn trailing_call_file_ends_on_one_pending_call() {
    let (_, t) = read("codex__localpush__rollout-13-19-38-trailing-call.jsonl");
    let v = format::rules::check_messages(t.format, &t.messages);
    assert_eq!(v.len(), 1, "{v:#?}");
    assert_eq!(v[0].rule, Rule::ResponsesNoOutput);
    assert_eq!(
        v[0].call_id.as_deref(),
        Some("call_UtYwHmwWekzvq83m8Rb9K8jJ")
    );
    assert!(v[0].pending_at_end);
    assert_eq!(v[0].message, t.messages.len() - 1);
}

#[test]
fn the_other_transcripts_are_clean() {
    for (name, _) in FIXTURES {
        if name.contains("orphan-call") || name.contains("trailing-call") {
            continue;
        }
        let (_, t) = read(name);
        let v = format::rules::check_messages(t.format, &t.messages);
        assert!(v.is_empty(), "{name}: {v:#?}");
    }
}

#[test]
fn pairs_and_history_boundaries_are_read_as_the_sources_describe() {
    let count = |t: &Transcript| {
        let calls: usize = t.messages.iter().map(|m| m.calls().count()).sum();
        let results: usize = t.messages.iter().map(|m| m.results().count()).sum();
        (calls, results)
    };
    let (_, t) = read("claude-code__spotter__4d5611e5-main.jsonl");
    assert_eq!(count(&t), (150, 150));
    assert!(
        t.live_from() > 0,
        "the compact_boundary starts a new history"
    );
    let (_, t) = read("codex__localpush__rollout-12-47-42-orphan-call.jsonl");
    assert_eq!(count(&t), (144, 143));
    let (_, t) = read("codex__localpush__rollout-12-54-34-compacted.jsonl");
    assert_eq!(count(&t), (365, 365));
    assert_eq!(t.messages.iter().filter(|m| m.starts_history).count(), 1);
    let (_, t) = read("claude-code__claude-reliability__python-to-rust-port.jsonl");
    assert_eq!(count(&t), (39, 39));
    // Parallel tool_use records sharing message.id are one assistant message.
    assert!(t.messages.iter().any(|m| m.calls().count() == 2));
    let (_, t) = read("codex__localpush__rollout-12-41-04-parallel7.jsonl");
    assert_eq!(count(&t), (118, 118));
}

fn keyset(v: &[Violation]) -> BTreeSet<(&'static str, Option<String>)> {
    v.iter()
        .map(|v| (v.rule.name(), v.call_id.as_deref().map(str::to_owned)))
        .collect()
}

/// Every legal cut of every fixture: a message boundary (the record before it belongs
/// to an earlier message), and compacting there (nothing pinned in the live history)
/// yields a log that re-reads in the same format with no violation the original
/// did not have, and the retained messages byte-identical.
#[test]
fn every_legal_cut_is_a_message_boundary_that_breaks_no_rule() {
    for (name, _) in FIXTURES {
        let (text, t) = read(name);
        let before = keyset(&format::rules::check_messages(t.format, &t.messages));
        let (tracker, owner) = t.tracker().expect("the tracker takes the records");
        // A Codex `compacted` message opening the live history is pinned, never
        // summarized.
        let live = t.live_from();
        let head = match t.messages.get(live) {
            Some(m) if m.role == format::Role::Compacted => live + 1,
            _ => live,
        };
        for cut in tracker.legal_cuts() {
            if cut > 0 && cut < owner.len() {
                assert_ne!(
                    owner[cut - 1],
                    owner[cut],
                    "{name}: cut {cut} splits a message"
                );
            }
            let m = t.message_at(&owner, cut);
            if m < head {
                continue;
            }
            let out = compact::render(&t, &text, head, m, "Summary.")
                .unwrap_or_else(|e| panic!("{name}: cut {m}: {e}"));
            if m == head {
                // Nothing to summarize: no summary of nothing is written.
                assert_eq!(out, text, "{name}");
                continue;
            }
            let back = format::read(&out, t.format, &ByteEstimate)
                .unwrap_or_else(|e| panic!("{name}: cut {m}: re-read: {e}"));
            let after = keyset(&format::rules::check_messages(back.format, &back.messages));
            assert!(
                after.is_subset(&before),
                "{name}: cut at message {m} adds {:?}",
                after.difference(&before).collect::<Vec<_>>()
            );
            // Byte-identical retained messages: the spans of the compacted log end with
            // the retained messages' spans. (The summary may merge with a retained
            // user message into one message, as the provider merges them.) Claude Code
            // lines keep every byte but a `parentUuid` that named a dropped line, which
            // names the summary instead.
            let spans = |msgs: &[format::Message], src: &str| -> Vec<String> {
                msgs.iter()
                    .flat_map(|msg| {
                        msg.spans.iter().map(|s| {
                            let line = &src[s.clone()];
                            if t.format != Format::ClaudeCode {
                                return line.to_owned();
                            }
                            let mut v: serde_json::Value =
                                serde_json::from_str(line).expect("a JSON line");
                            if let Some(o) = v.as_object_mut() {
                                o.remove("parentUuid");
                            }
                            v.to_string()
                        })
                    })
                    .collect()
            };
            let want = spans(&t.messages[m..], &text);
            let got = spans(&back.messages[head..], &out);
            assert!(
                got.len() > want.len(),
                "{name}: cut {m}: the summary is there"
            );
            assert_eq!(got[got.len() - want.len()..], want[..], "{name}: cut {m}");
            assert_eq!(
                spans(&back.messages[..head], &out),
                spans(&t.messages[..head], &text)
            );
        }
    }
}
