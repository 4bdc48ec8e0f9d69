//! The compaction strategies written back into provider formats (`format::edit`), on
//! generated transcripts of every JSON-document format and on every real transcript
//! in tests/fixtures/transcripts: the output reads back in its own format, breaks no
//! provider rule the input kept, keeps every call id (as a call, or in a digest's or
//! summary's ledger) unless `truncate` named it, and keeps every message no strategy
//! touched byte for byte.

use std::collections::BTreeSet;

use cutpoint::RecordKind;
use cutpoint::compact::pipeline::{Pipeline, Preset, Progress, Step};
use cutpoint::compact::strategy::{
    CLEARED_RESULT_TEXT, Clear, ClearInputs, ClearThinking, Digest, Edit, Floors, Goal, LedgerOnly,
    Slide, StepReport, Strategy, Summarize, Truncate,
};
use cutpoint::compact::{Direction, Window};
use cutpoint::format::loaded::SummaryOptions;
use cutpoint::format::{self, ByteEstimate, Format, Loaded, Transcript, check_rules};
use cutpoint::testing::synth::{Rng, Session};
use cutpoint::testing::writers::{log_of, write};
use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{Value, json};

use crate::transcripts::{FIXTURES, read as read_fixture};

/// One message of a generated conversation: who, and its blocks.
pub(crate) enum Part {
    Text(String),
    Thinking(String),
    Call {
        id: String,
        name: String,
        args: Value,
    },
    Result {
        id: String,
        name: String,
        output: String,
    },
}

/// A synth session grouped into messages (records bound together share one).
pub(crate) fn conversation(seed: u64, n: usize) -> Vec<(bool, Vec<Part>)> {
    let mut rng = Rng::new(seed ^ 0xf0f0);
    let mut messages: Vec<(bool, Vec<Part>)> = Vec::new();
    let mut names = std::collections::HashMap::new();
    for r in Session::records(seed, n) {
        let user_side = matches!(r.kind(), RecordKind::User | RecordKind::ToolResult(_));
        let words = |k: u64| "lorem ipsum ".repeat((k / 12).max(1) as usize);
        let part = match r.kind() {
            RecordKind::User => Part::Text(words(r.tokens() * 4)),
            RecordKind::Assistant if rng.chance(0.3) => Part::Thinking(words(r.tokens() * 4)),
            RecordKind::Assistant => Part::Text(words(r.tokens() * 4)),
            RecordKind::ToolUse(id) => {
                let name = ["bash", "read_file", "grep"][rng.range(0, 2) as usize].to_owned();
                names.insert(id.to_string(), name.clone());
                Part::Call {
                    id: id.to_string(),
                    name,
                    args: json!({"command": format!("run {id}"), "content": words(r.tokens() * 4)}),
                }
            }
            RecordKind::ToolResult(id) => Part::Result {
                id: id.to_string(),
                name: names.get(id.as_str()).cloned().unwrap_or_default(),
                output: format!("{id} done\n{}", words(r.tokens() * 4)),
            },
            _ => continue,
        };
        match messages.last_mut() {
            Some((side, parts)) if r.is_bound_to_previous() && *side == user_side => {
                parts.push(part)
            }
            _ => messages.push((user_side, vec![part])),
        }
    }
    messages
}

/// The conversation as a request body of `format`.
pub(crate) fn document(format: Format, conversation: &[(bool, Vec<Part>)]) -> String {
    let mut out: Vec<Value> = Vec::new();
    for (user, parts) in conversation {
        match format {
            Format::AnthropicMessages => {
                let blocks: Vec<Value> = parts
                    .iter()
                    .map(|p| match p {
                        Part::Text(t) => json!({"type": "text", "text": t}),
                        Part::Thinking(t) => {
                            json!({"type": "thinking", "thinking": t, "signature": "sig"})
                        }
                        Part::Call { id, name, args } => {
                            json!({"type": "tool_use", "id": id, "name": name, "input": args})
                        }
                        Part::Result { id, output, .. } => {
                            json!({"type": "tool_result", "tool_use_id": id, "content": output})
                        }
                    })
                    .collect();
                out.push(
                    json!({"role": if *user { "user" } else { "assistant" }, "content": blocks}),
                );
            }
            Format::OpenAiChat => {
                if *user {
                    for p in parts {
                        out.push(match p {
                            Part::Result { id, output, .. } => {
                                json!({"role": "tool", "tool_call_id": id, "content": output})
                            }
                            Part::Text(t) | Part::Thinking(t) => {
                                json!({"role": "user", "content": t})
                            }
                            Part::Call { .. } => continue,
                        });
                    }
                } else {
                    let text: Vec<&str> = parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Text(t) => Some(t.as_str()),
                            _ => None,
                        })
                        .collect();
                    let calls: Vec<Value> = parts
                        .iter()
                        .filter_map(|p| match p {
                            Part::Call { id, name, args } => Some(json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}})),
                            _ => None,
                        })
                        .collect();
                    let mut m = json!({"role": "assistant", "content": if text.is_empty() { Value::Null } else { text.join("\n").into() }});
                    if !calls.is_empty() {
                        m["tool_calls"] = calls.into();
                    }
                    out.push(m);
                }
            }
            Format::OpenAiResponses => {
                for (k, p) in parts.iter().enumerate() {
                    out.push(match p {
                        Part::Text(t) if *user => json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": t}]}),
                        Part::Text(t) => json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": t}]}),
                        Part::Thinking(t) => json!({"type": "reasoning", "id": format!("rs_{}_{k}", out.len()), "summary": [{"type": "summary_text", "text": t}]}),
                        Part::Call { id, name, args } => json!({"type": "function_call", "call_id": id, "name": name, "arguments": args.to_string()}),
                        Part::Result { id, output, .. } => json!({"type": "function_call_output", "call_id": id, "output": output}),
                    });
                }
            }
            _ => {
                let gparts: Vec<Value> = parts
                    .iter()
                    .map(|p| match p {
                        Part::Text(t) => json!({"text": t}),
                        Part::Thinking(t) => json!({"text": t, "thought": true}),
                        Part::Call { id, name, args } => json!({"functionCall": {"name": name, "args": args, "id": id}}),
                        Part::Result { id, name, output } => json!({"functionResponse": {"name": name, "response": {"output": output}, "id": id}}),
                    })
                    .collect();
                out.push(json!({"role": if *user { "user" } else { "model" }, "parts": gparts}));
            }
        }
    }
    match format {
        Format::Gemini => serde_json::to_string_pretty(&json!({"contents": out})).unwrap(),
        _ => serde_json::to_string_pretty(&out).unwrap(),
    }
}

pub(crate) fn strategies(rng: &mut Rng) -> Vec<Strategy> {
    vec![
        Strategy::Clear(
            Clear::default()
                .keep_tool_uses(rng.range(0, 4) as usize)
                .clear_inputs(if rng.chance(0.5) {
                    ClearInputs::All
                } else {
                    ClearInputs::None
                }),
        ),
        Strategy::ClearThinking(ClearThinking::default()),
        Strategy::Digest(Digest::default()),
        Strategy::Summarize(Summarize::default()),
        Strategy::Slide(Slide::default()),
        Strategy::Truncate(Truncate::default()),
    ]
}

/// The uuid of each Claude Code line that has one, with its parent, in file order.
fn chain_lines(text: &str) -> Vec<(String, Option<String>)> {
    text.lines()
        .filter_map(|l| {
            let v: Value = serde_json::from_str(l).ok()?;
            let uuid = v["uuid"].as_str()?.to_owned();
            Some((uuid, v["parentUuid"].as_str().map(str::to_owned)))
        })
        .collect()
}

/// A Claude Code rewrite opens no gap in the `parentUuid` chain that the input did not
/// have, and a gap of the input (a parent in no line of the file, which Claude Code
/// bridges to the latest line before it) still follows the same line: where that
/// line went, the writer names the line it bridges to instead (Claude Code 2.1.328
/// does not bridge again, `docs/clients.md`, fixture `ec-38b74f08e3`).
pub(crate) fn assert_no_new_gap(name: &str, input: &str, out: &str) {
    let before = chain_lines(input);
    let after = chain_lines(out);
    let known_in = |set: &[(String, Option<String>)], u: &str| set.iter().any(|(v, _)| v == u);
    let previous = |set: &[(String, Option<String>)], u: &str| -> Option<String> {
        let i = set.iter().position(|(v, _)| v == u)?;
        i.checked_sub(1).map(|j| set[j].0.clone())
    };
    for (uuid, parent) in &after {
        let Some(parent) = parent else { continue };
        if known_in(&after, parent) {
            continue;
        }
        assert!(
            !known_in(&before, parent),
            "{name}: line {uuid}: its parent {parent} was in the input and is not in the output"
        );
        assert_eq!(
            previous(&after, uuid),
            previous(&before, uuid),
            "{name}: line {uuid}: its parent {parent} is in no line, and the line before it changed"
        );
    }
}

/// Claude Code reads the last assistant record's `message.usage` as the size of the
/// context (to decide when to compact): after the first line a rewrite changed (or a
/// line it dropped), that usage was reported for a history no longer sent, so every
/// assistant line after it (but lines of the same message, and those of a preserved
/// segment, which Claude Code zeroes on load) reports 0; the lines before are the
/// input's. Checked on every Claude Code rewrite.
pub(crate) fn assert_no_stale_usage(name: &str, input: &str, out: &str) {
    let parse = |l: &str| serde_json::from_str::<Value>(l).ok();
    let uuid_of = |v: &Value| v["uuid"].as_str().map(str::to_owned);
    let input_lines: Vec<(Option<String>, &str)> = input
        .lines()
        .map(|l| (parse(l).as_ref().and_then(uuid_of), l))
        .collect();
    let at: std::collections::HashMap<String, usize> = input_lines
        .iter()
        .enumerate()
        .filter_map(|(i, (u, _))| u.clone().map(|u| (u, i)))
        .collect();
    let counts = |v: &Value| -> u64 {
        [
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        ]
        .iter()
        .filter_map(|k| v["message"]["usage"][*k].as_u64())
        .sum()
    };
    // Whether a line has changed yet, and the message ids of the lines up to the first
    // that did (a message's lines may interleave with the results of its calls).
    let mut changed = false;
    let mut before: std::collections::HashSet<String> = std::collections::HashSet::new();
    let mut last: Option<usize> = None;
    for line in out.lines() {
        let Some(v) = parse(line) else { continue };
        if v["subtype"] == "compact_boundary" && !v["compactMetadata"]["preservedSegment"].is_null()
        {
            // Claude Code zeroes the kept segment itself.
            return;
        }
        let Some(u) = uuid_of(&v) else { continue };
        let id = v["message"]["id"].as_str().map(str::to_owned);
        if changed {
            if v["type"] == "assistant" && id.as_ref().is_some_and(|id| !before.contains(id)) {
                assert_eq!(
                    counts(&v),
                    0,
                    "{name}: line {u} keeps stale usage after a change"
                );
            }
            continue;
        }
        match at.get(&u) {
            Some(&i) => {
                // A line with a uuid dropped before this one is a change.
                let from = last.map_or(0, |l| l + 1);
                let skipped = input_lines[from.min(i)..i].iter().any(|(u, _)| u.is_some());
                changed = skipped || input_lines[i].1 != line;
                last = Some(i);
            }
            None => changed = true,
        }
        before.extend(id);
    }
}

fn rule_names(t: &Transcript) -> BTreeSet<&'static str> {
    check_rules(t).iter().map(|v| v.rule.name()).collect()
}

/// Runs `steps` of strategies on `text` (read as `format`), writes the result back
/// and checks every property; returns the output.
pub(crate) fn check_edit(
    name: &str,
    text: &str,
    format: Format,
    plan: &[(Strategy, Goal)],
) -> String {
    let t = format::read(text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut built = log_of(&t).unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut log = built.log.clone();
    let mut reports: Vec<StepReport> = Vec::new();
    for (strategy, goal) in plan {
        let mut goal = *goal;
        goal.floors.keep_head = goal.floors.keep_head.max(built.pinned);
        if let Ok(r) = strategy.run(&mut log, &goal) {
            reports.push(r);
        }
    }
    let steps: Vec<&StepReport> = reports.iter().collect();
    let out = write(&t, text, &built, &steps, &log).unwrap_or_else(|e| panic!("{name}: {e}"));
    let back = format::read(&out, format, &ByteEstimate)
        .unwrap_or_else(|e| panic!("{name}: the output does not read back: {e}\n{out}"));
    // No provider rule broken that the input kept.
    let before = rule_names(&t);
    for rule in rule_names(&back) {
        assert!(
            before.contains(rule),
            "{name}: {rule} is new: {:#?}",
            check_rules(&back)
        );
    }
    if format == Format::ClaudeCode {
        assert_no_new_gap(name, text, &out);
        assert_no_stale_usage(name, text, &out);
    }
    // Every call id still there, as a call or in a ledger, unless truncate named it.
    let dropped: BTreeSet<String> = reports
        .iter()
        .flat_map(|r| r.dropped_calls.iter().map(|id| id.to_string()))
        .collect();
    for m in &t.messages[t.live_from()..] {
        for (_, id, _) in m.calls() {
            let id = id.to_string();
            let base = id.split('#').next().unwrap_or(&id).to_owned();
            if dropped.contains(&id) {
                continue;
            }
            assert!(out.contains(&base), "{name}: call {id} vanished");
        }
    }
    // Messages no step touched are byte-identical.
    let touched: BTreeSet<usize> = {
        // Records of the first step's log map to messages; later steps work on
        // renumbered logs, so only the single-step case is checked exactly.
        let mut set = BTreeSet::new();
        if let [only] = steps.as_slice() {
            for e in &only.edits {
                match e {
                    Edit::ClearedResult { at }
                    | Edit::ClearedInput { at }
                    | Edit::ClearedThinking { at } => {
                        set.insert(built.owner[*at]);
                    }
                    Edit::Replaced { start, end } | Edit::Removed { start, end } => {
                        set.extend(built.owner[*start..*end].iter().copied());
                    }
                    _ => {}
                }
            }
        }
        set
    };
    if steps.len() <= 1 {
        // Claude Code lines may differ in `parentUuid` (a dropped parent's children are
        // re-linked) and in stale usage zeroed (`assert_no_stale_usage`) alone.
        let unlinked = |line: &str| -> String {
            if format != Format::ClaudeCode {
                return line.to_owned();
            }
            match serde_json::from_str::<Value>(line) {
                Ok(Value::Object(mut map)) => {
                    map.remove("parentUuid");
                    if let Some(Value::Object(message)) = map.get_mut("message") {
                        message.remove("usage");
                    }
                    Value::Object(map).to_string()
                }
                _ => line.to_owned(),
            }
        };
        let written: std::collections::HashSet<String> = back
            .messages
            .iter()
            .flat_map(|m| m.spans.iter().map(|s| unlinked(&out[s.clone()])))
            .collect();
        for (m, message) in t.messages.iter().enumerate() {
            if touched.contains(&m) {
                continue;
            }
            for span in &message.spans {
                assert!(
                    written.contains(&unlinked(&text[span.clone()])),
                    "{name}: message {m} changed"
                );
            }
        }
    }
    // What one step reports it did is in the output: each cleared result's
    // placeholder, each cleared thinking block gone.
    if let [only] = steps.as_slice() {
        let placeholders = |s: &str| s.matches(CLEARED_RESULT_TEXT).count();
        let cleared = only
            .edits
            .iter()
            .filter(|e| matches!(e, Edit::ClearedResult { .. }))
            .count();
        assert_eq!(
            placeholders(&out) - placeholders(text),
            cleared,
            "{name}: {} cleared results reported, not all written",
            cleared
        );
        let thinking = |t: &Transcript| {
            t.messages
                .iter()
                .flat_map(|m| &m.blocks)
                .filter(|(b, _)| matches!(b, format::Block::Reasoning))
                .count()
        };
        let dropped = only
            .edits
            .iter()
            .filter(|e| matches!(e, Edit::ClearedThinking { .. }))
            .count();
        let regions = only
            .edits
            .iter()
            .any(|e| matches!(e, Edit::Replaced { .. } | Edit::Removed { .. }));
        if !regions {
            assert_eq!(
                thinking(&t) - thinking(&back),
                dropped,
                "{name}: {dropped} thinking blocks reported cleared"
            );
        }
    }
    // The edited log itself stays valid.
    log.assert_invariants();
    built.log = log;
    out
}

proptest! {
    #![proptest_config(Config { cases: crate::cases(24), ..Config::default() })]

    #[test]
    fn strategies_write_back_into_every_document_format(seed in any::<u64>(), n in 1usize..200) {
        let conversation = conversation(seed, n);
        let mut rng = Rng::new(seed);
        for format in [Format::AnthropicMessages, Format::OpenAiChat, Format::OpenAiResponses, Format::Gemini] {
            let text = document(format, &conversation);
            let total = format::read(&text, format, &ByteEstimate).unwrap().total_tokens();
            for strategy in strategies(&mut rng) {
                let floors = Floors::none().keep_head(rng.range(0, 2) as usize).min_turns(rng.range(0, 2) as usize);
                let goal = if rng.chance(0.5) { Goal::within(floors).target(rng.range(0, total)) } else { Goal::within(floors) };
                check_edit(format.name(), &text, format, &[(strategy, goal)]);
            }
            // Two steps in a row, and a whole preset.
            let s = strategies(&mut rng);
            let plan = [(s[0].clone(), Goal::default()), (s[2].clone(), Goal::default()), (s[3].clone(), Goal::default())];
            check_edit(format.name(), &text, format, &plan);
            let preset = Preset::ALL[rng.range(0, 2) as usize].pipeline(total / 3);
            let plan: Vec<(Strategy, Goal)> = preset.stages.iter().map(|s| {
                let mut g = Goal::within(preset.floors);
                g.target_tokens = s.target_tokens(preset.budget);
                (s.strategy.clone(), g)
            }).collect();
            check_edit(format.name(), &text, format, &plan);
        }
    }
}

/// The stages of `preset` towards `budget` tokens as (strategy, goal) steps.
pub(crate) fn preset_plan(preset: Preset, budget: u64) -> Vec<(Strategy, Goal)> {
    let pipeline = preset.pipeline(budget);
    pipeline
        .stages
        .iter()
        .map(|s| {
            let mut g = Goal::within(pipeline.floors);
            g.target_tokens = s.target_tokens(pipeline.budget);
            (s.strategy.clone(), g)
        })
        .collect()
}

/// Every real transcript in tests/fixtures/transcripts a format claims, every
/// strategy alone and every preset: read back clean of new rule violations, every call
/// id kept or named, every reported edit written.
#[test]
fn strategies_write_back_every_real_transcript() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n != "SOURCES.md")
        .collect();
    files.sort();
    let mut formats = BTreeSet::new();
    for name in &files {
        let name = name.as_str();
        let text = crate::transcripts::fixture(name);
        let Ok(format) = format::detect(&text) else {
            continue;
        };
        if format == Format::Records {
            continue;
        }
        formats.insert(format.name());
        let t =
            format::read(&text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{name}: {e}"));
        let total = t.total_tokens();
        let mut rng = Rng::new(name.len() as u64);
        for strategy in strategies(&mut rng) {
            for goal in [
                Goal::within(Floors::none().keep_head(1)),
                Goal::within(Floors::none().keep_head(1)).target(total / 2),
            ] {
                check_edit(name, &text, format, &[(strategy.clone(), goal)]);
            }
        }
        for preset in Preset::ALL {
            check_edit(name, &text, format, &preset_plan(preset, total / 4));
        }
    }
    for f in [
        Format::ClaudeCode,
        Format::CodexRollout,
        Format::OpenAiChat,
        Format::GeminiCli,
    ] {
        assert!(formats.contains(f.name()), "no fixture of {f}: {formats:?}");
    }
}

/// A Claude Code user message rebuilt from two lines, the result's line after the
/// text typed while the tool ran (the reader puts the result first): clearing the
/// result edits the result's line, not the text's.
#[test]
fn a_result_read_ahead_of_earlier_text_is_cleared_on_its_own_line() {
    let lines = [
        json!({"type":"user","uuid":"u1","parentUuid":null,"sessionId":"s","message":{"role":"user","content":"do it"}}),
        json!({"type":"assistant","uuid":"a1","parentUuid":"u1","sessionId":"s","message":{"id":"m1","role":"assistant","content":[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"ls"}}]}}),
        json!({"type":"user","uuid":"u2","parentUuid":"a1","sessionId":"s","message":{"role":"user","content":[{"type":"text","text":"typed while it ran"}]}}),
        json!({"type":"user","uuid":"u3","parentUuid":"u2","sessionId":"s","sourceToolAssistantUUID":"a1","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"x".repeat(4000)}]}}),
        json!({"type":"assistant","uuid":"a2","parentUuid":"u3","sessionId":"s","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"done"}]}}),
        json!({"type":"user","uuid":"u4","parentUuid":"a2","sessionId":"s","message":{"role":"user","content":"next"}}),
    ];
    let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let t = format::read(&text, Format::ClaudeCode, &ByteEstimate).unwrap();
    assert!(
        matches!(t.messages[2].blocks[0].0, format::Block::Result { .. }),
        "the reader puts the result first"
    );
    let clear = Strategy::Clear(Clear::default().keep_tool_uses(0));
    let out = check_edit(
        "rebuilt",
        &text,
        Format::ClaudeCode,
        &[(clear, Goal::default())],
    );
    let out: Vec<&str> = out.lines().collect();
    assert!(out[3].contains(CLEARED_RESULT_TEXT), "{}", out[3]);
    assert!(!out[3].contains("xxxx"), "{}", out[3]);
    assert_eq!(out[2], lines[2].to_string());
}

/// A pipeline run through `Progress` on a real transcript's log: a second run on the
/// unchanged log repeats no stage that made no progress.
#[test]
fn no_pass_repeats_without_progress_on_real_transcripts() {
    for (name, _) in FIXTURES {
        let (_, t) = read_fixture(name);
        let mut log = log_of(&t).unwrap().log;
        let pipeline = Preset::Aggressive.pipeline(t.total_tokens() / 10);
        let mut progress = Progress::new();
        let mut last = pipeline.run_with(&mut log, &mut progress, &mut LedgerOnly);
        for _ in 0..8 {
            let changes = log.changes();
            last = pipeline.run_with(&mut log, &mut progress, &mut LedgerOnly);
            if log.changes() == changes {
                break;
            }
        }
        let again = pipeline.run_with(&mut log, &mut progress, &mut LedgerOnly);
        for (i, s) in last.steps.iter().enumerate() {
            if matches!(s, Step::NoProgress(_) | Step::Stalled(_)) {
                assert!(
                    matches!(again.steps[i], Step::Stalled(_)),
                    "{name}: stage {i} ran again"
                );
            }
        }
        log.assert_invariants();
    }
}

/// `strategy` alone on `loaded` with `budget`, the thinking step off.
fn run_alone(loaded: &Loaded<'_>, strategy: Strategy, budget: u64) -> format::Compacted {
    let mut pipeline = Pipeline::one(strategy, Some(budget));
    pipeline.keep_thinking_valid = false;
    loaded
        .run(
            &pipeline,
            0,
            &mut Progress::new(),
            &mut LedgerOnly,
            &ByteEstimate,
        )
        .unwrap_or_else(|e| panic!("{} {budget}: {e}", loaded.format()))
}

/// `strategy` alone on `loaded` (a real transcript of `format`) with `budget`, the
/// thinking step off: the first step that edited, how many did, and the output's
/// own count read back with the same counter. `None` when nothing was edited.
fn one_step(
    loaded: &Loaded<'_>,
    format: Format,
    strategy: Strategy,
    budget: u64,
) -> Option<(u64, usize, u64)> {
    let done = run_alone(loaded, strategy, budget);
    let edited: Vec<&StepReport> = done.report.ran().filter(|r| !r.edits.is_empty()).collect();
    let step = edited.first()?;
    let back = format::read(&done.text, format, &ByteEstimate).unwrap();
    assert_eq!(
        done.report.tokens_after,
        back.live_tokens(),
        "{format} {budget}"
    );
    Some((step.tokens_after, edited.len(), back.live_tokens()))
}

/// `clear` counts what it writes: on every real transcript, with inputs cleared or
/// not, at budgets from 90% to 10% of the live history, the step's own count after
/// clearing is the output's as read back with the same counter, so the run needs
/// one round (a second edits nothing), and a result whose cleared form would read
/// back no smaller is left alone. Before, the placeholder's estimate missed each
/// block's envelope (15-30 tokens a result): the step said 7443 -> 5111 where the
/// output read 5569, and 141 Codex results were cleared for 4 tokens.
#[test]
fn clear_counts_what_it_writes_on_real_transcripts() {
    for (name, format) in FIXTURES {
        let (text, t) = read_fixture(name);
        let loaded = Loaded::read(&text, format, &ByteEstimate).unwrap();
        let live = t.live_tokens();
        for inputs in [ClearInputs::None, ClearInputs::All] {
            for pct in [90, 60, 30, 10] {
                let clear = Clear::default()
                    .keep_tool_uses(1)
                    .clear_inputs(inputs.clone());
                let budget = live * pct / 100;
                let Some((step, rounds, back)) =
                    one_step(&loaded, format, Strategy::Clear(clear), budget)
                else {
                    continue;
                };
                let at = format!("{name} {pct}% {inputs:?}");
                assert_eq!(rounds, 1, "{at}");
                assert_eq!(step, back, "{at}: the step's count is not the output's");
                assert!(back < live, "{at}");
            }
        }
    }
}

/// `digest`, `summarize` and `slide` count what they write as well: each digest,
/// summary or ledger is sized as the summary message the writer writes, read with the same counter
/// (`Summarizer::written_tokens`), so the step's count is the output's, in one
/// round. Claude Code is the exception, on the safe side: there the output reads
/// back at most the step's count (a dropped line's tokens are attributed by the
/// reader to the message its line belonged to, and a summary that opens the history
/// writes a `compact_boundary` that takes what is before it out of the live count).
#[test]
fn digest_summarize_and_slide_count_what_they_write_on_real_transcripts() {
    let mut off = Vec::new();
    for (name, format) in FIXTURES {
        let (text, t) = read_fixture(name);
        let loaded = Loaded::read(&text, format, &ByteEstimate).unwrap();
        let live = t.live_tokens();
        for strategy in [
            Strategy::Digest(Digest::default()),
            Strategy::Summarize(Summarize::default()),
            Strategy::Slide(Slide::default()),
        ] {
            for pct in [90, 60, 30] {
                let kind = strategy.kind();
                let Some((step, rounds, back)) =
                    one_step(&loaded, format, strategy.clone(), live * pct / 100)
                else {
                    continue;
                };
                let exact = step == back && rounds == 1;
                let safe = format == Format::ClaudeCode && back <= step;
                if !exact && !safe {
                    off.push(format!(
                        "{name} {kind:?} {pct}%: step {step} read back {back} ({rounds} rounds)"
                    ));
                }
            }
        }
    }
    assert!(off.is_empty(), "{}", off.join("\n"));
}

/// Each strategy, and the one summary route, meets every budget that it meets when
/// run as far as it goes (a budget of 0), on every real transcript, from 10% to 90% of its live history: a
/// strategy that chooses its region by the estimate and then counts what it writes
/// must not stop short of a budget within its reach. Before, `slide`'s estimate chose
/// its turn and that was final: tau-bench traj173 at 30% of its 5614 tokens stopped
/// at 1699 against a budget of 1684, where one more turn brings it to 1527. And
/// `summarize` chose its region by the ledger's estimate (24 budgets missed, on the
/// Codex session ending on an open call from 35% to 90%, and on tau-bench): its
/// summary read back larger than estimated, and the next round found summarizing the
/// summary alone "smaller" by the estimate and stopped there, 13-35 tokens over.
#[test]
fn every_strategy_meets_every_budget_within_its_reach_on_real_transcripts() {
    let run = |loaded: &Loaded<'_>, strategy: &Strategy, budget: u64| {
        run_alone(loaded, strategy.clone(), budget)
            .report
            .tokens_after
    };
    let mut missed = Vec::new();
    let mut checked = 0;
    for (name, text, format) in crate::one_path::real() {
        let loaded = Loaded::read(&text, format, &ByteEstimate).unwrap();
        let live = loaded.live_tokens();
        for strategy in [
            Strategy::Clear(Clear::default()),
            Strategy::Digest(Digest::default()),
            Strategy::Summarize(Summarize::default()),
            Strategy::Slide(Slide::default()),
            Strategy::Truncate(Truncate::default()),
        ] {
            let furthest = run(&loaded, &strategy, 0);
            for pct in (10..=90).step_by(5) {
                let budget = live * pct / 100;
                if budget < furthest {
                    continue;
                }
                checked += 1;
                let after = run(&loaded, &strategy, budget);
                if after > budget {
                    let kind = strategy.kind();
                    missed.push(format!(
                        "{name} {kind:?} {pct}%: {after} > {budget}, {furthest} reachable"
                    ));
                }
            }
        }
    }
    // The one summary route (`compact --strategy summarize`, `compact --budget`,
    // Python's `summarize`): the cut moves forward until the log fits.
    for (name, text, format) in crate::one_path::real() {
        let loaded = Loaded::read(&text, format, &ByteEstimate).unwrap();
        let live = loaded.live_tokens();
        let window = Window::new(0)
            .direction(Direction::Forward)
            .lookback(u64::MAX);
        let summarize = |budget: u64| {
            let opts = SummaryOptions::within(budget, window.clone()).keep_thinking_valid(false);
            match loaded.summarize(&opts, &ByteEstimate) {
                Ok(Some(done)) => Some(done.tokens_after.min(live)),
                Ok(None) => Some(live),
                Err(_) => None,
            }
        };
        let Some(furthest) = summarize(0) else {
            continue;
        };
        for pct in (10..=90).step_by(5) {
            let budget = live * pct / 100;
            if budget < furthest {
                continue;
            }
            checked += 1;
            match summarize(budget) {
                Some(after) if after <= budget => {}
                after => missed.push(format!(
                    "{name} one summary {pct}%: {after:?} > {budget}, {furthest} reachable"
                )),
            }
        }
    }
    assert!(checked > 300, "{checked} budgets within reach");
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

#[test]
fn a_cleared_anthropic_result_keeps_its_block_and_everything_else() {
    let text = r#"[
  {"role":"user","content":"list the files"},
  {"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s1"},{"type":"tool_use","id":"toolu_1","name":"bash","input":{"command":"ls -la"}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a very long listing that goes on and on and on and on and on and on and on"}]},
  {"role":"assistant","content":"done"},
  {"role":"user","content":"thanks"}
]"#;
    let t = format::read(text, Format::AnthropicMessages, &ByteEstimate).unwrap();
    let built = log_of(&t).unwrap();
    let mut log = built.log.clone();
    let clear = Clear::default()
        .keep_tool_uses(0)
        .clear_inputs(ClearInputs::All);
    let r1 = clear.run(&mut log, &Goal::default()).unwrap();
    let r2 = ClearThinking::default()
        .run(&mut log, &Goal::default())
        .unwrap();
    let out = write(&t, text, &built, &[&r1, &r2], &log).unwrap();
    assert_eq!(
        out,
        r#"[
  {"role":"user","content":"list the files"},
  {"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"bash","input":{}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"[tool result cleared to save context]"}]},
  {"role":"assistant","content":"done"},
  {"role":"user","content":"thanks"}
]"#
    );
}

/// SWE-agent reuses call ids across turns; the reader renames the second use `id#2`
/// for the tracker, but a compaction's ledger names every call as the transcript
/// spells it (as `--target` rewrites do), so the same id may be listed twice.
/// Compacting the output again must read such a ledger (the reader renames its second
/// unit as it renames a reused call) and compact again.
#[test]
fn a_log_with_reused_ids_compacts_again_after_its_ledger_named_a_reused_id() {
    let name = "chat__swe-agent__marshmallow-1867-function_calling_replace.traj";
    let (text, t) = read_fixture(name);
    let once = cutpoint::testing::writers::run(
        &t,
        &text,
        &Preset::Balanced.pipeline(5_000),
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    )
    .unwrap();
    assert!(
        !once.text.contains("#2"),
        "the ledger names calls as the transcript spells them"
    );
    let back = format::read(&once.text, Format::OpenAiChat, &ByteEstimate).unwrap();
    log_of(&back).expect("the output reads as a log");
    let twice = cutpoint::testing::writers::run(
        &back,
        &once.text,
        &Preset::Balanced.pipeline(2_500),
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    )
    .expect("compacts again");
    let again = format::read(&twice.text, Format::OpenAiChat, &ByteEstimate).unwrap();
    log_of(&again).expect("and reads back again");
}
