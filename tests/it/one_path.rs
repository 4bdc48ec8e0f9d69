//! One path from a transcript to a compaction and back (issue 24), tested on its own
//! output: every strategy and preset, on every real transcript (tests/fixtures, and
//! ../shared/data/transcripts when it is beside the checkout) and on generated
//! documents of every JSON-document format, run two and three times:
//!
//! - a run whose budget is met is a fixed point: run again with the same budget, it
//!   returns its input byte for byte (`compact(compact(x, B), B) == compact(x, B)`);
//! - ledgers are data: every ledger entry of the input (an earlier summary's or
//!   digest's units, as call id, tool, arguments, status and first line) is in the
//!   output verbatim, and every call of the input that is no longer a call is in the
//!   output's ledger with its arguments (never "arguments lost"), unless `truncate`
//!   dropped it by name;
//! - earlier summaries' prose is carried forward;
//! - the output is clean by cutpoint's own judgement: no provider rule broken that the
//!   input kept, by `check` and by `check --before` (`format::check_against`).

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

use cutpoint::CallId;
use cutpoint::compact::Unit;
use cutpoint::compact::pipeline::{Pipeline, Preset, Progress};
use cutpoint::compact::strategy::{
    Clear, ClearThinking, Digest, LedgerOnly, Slide, Strategy, Summarize, Truncate,
};
use cutpoint::format::{self, Block, ByteEstimate, Format, Transcript, check_against, check_rules};
use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::strategies_formats::{conversation, document};

/// The pipelines every case runs: each strategy alone and each preset, at `budget`.
pub(crate) fn pipelines(budget: u64) -> Vec<(String, Pipeline)> {
    let mut out: Vec<(String, Pipeline)> = [
        Strategy::Clear(Clear::default()),
        Strategy::ClearThinking(ClearThinking::default()),
        Strategy::Digest(Digest::default()),
        Strategy::Summarize(Summarize::default()),
        Strategy::Slide(Slide::default()),
        Strategy::Truncate(Truncate::default()),
    ]
    .into_iter()
    .map(|s| (s.kind().name().to_owned(), Pipeline::one(s, Some(budget))))
    .collect();
    for preset in Preset::ALL {
        out.push((format!("pipeline:{preset}"), preset.pipeline(budget)));
    }
    out
}

/// What a transcript says about its calls: the arguments of each call it holds, and
/// every ledger unit of its summaries, by call id (a reused id, as SWE-agent reuses
/// them, has several), and its summaries' prose.
#[derive(Default)]
struct Facts {
    calls: HashMap<CallId, Vec<String>>,
    units: HashMap<CallId, Vec<Unit>>,
    prose: Vec<String>,
}

fn facts(t: &Transcript) -> Facts {
    let mut f = Facts::default();
    for m in &t.messages {
        for (b, _) in &m.blocks {
            match b {
                Block::Call { id, arguments, .. } => {
                    f.calls
                        .entry(id.clone())
                        .or_default()
                        .push(arguments.clone());
                }
                Block::Summary(parts) => {
                    for u in &parts.units {
                        f.units
                            .entry(u.call_id.clone())
                            .or_default()
                            .push(u.clone());
                    }
                    if !parts.prose.trim().is_empty() {
                        f.prose.push(parts.prose.clone());
                    }
                }
                _ => {}
            }
        }
    }
    f
}

/// The rules a violation list names, preserved thinking's prefix binding
/// (`reasoning/prefix-changed`) included: keep-thinking-valid is on by default, so no
/// output invalidates a thinking block or reasoning item the input had valid.
fn rule_names(v: &[format::RuleViolation]) -> BTreeSet<&'static str> {
    v.iter().map(|v| v.rule.name()).collect()
}

/// One run of `pipeline` on `text`: the output text, whether it met the budget, and
/// its rounds. `None` when keep-thinking-valid (on by default) refuses it; the oracle:
/// only where no simple compaction could keep the thinking valid either, because a
/// call is still in flight at the end (its turn's thinking goes back with its result)
/// or the live history holds a kept item (a wall the summary cannot cover).
pub(crate) fn run(
    case: &str,
    text: &str,
    format: Format,
    pipeline: &Pipeline,
) -> Option<(String, bool, usize)> {
    let t = format::read(text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{case}: {e}"));
    match cutpoint::testing::writers::run(
        &t,
        text,
        pipeline,
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    ) {
        Ok(done) => Some((done.text, done.report.met_budget(), done.rounds)),
        Err(e @ format::EditError::ThinkingBound { .. }) => {
            assert!(
                may_refuse(&t),
                "{case}: refused, though a simple compaction could keep the thinking valid: {e}"
            );
            None
        }
        Err(e) => panic!("{case}: {e}"),
    }
}

/// Whether keep-thinking-valid may refuse a compaction of `t`: a call in flight at its
/// end, or a kept item in its live history. **O(len)**.
pub(crate) fn may_refuse(t: &format::Transcript) -> bool {
    let (tracker, _) = t.tracker().expect("the tracker takes the transcript");
    let built = cutpoint::testing::writers::log_of(t).expect("the log of the transcript");
    !tracker.pending_calls().is_empty() || built.log.entries().iter().any(|e| e.kept())
}

/// Every property of one output `after` of `before`, for the pipeline `name`.
fn check_output(case: &str, name: &str, format: Format, before: &str, after: &str) {
    let b = format::read(before, format, &ByteEstimate).unwrap();
    let a = format::read(after, format, &ByteEstimate)
        .unwrap_or_else(|e| panic!("{case}: the output does not read back: {e}"));
    let (fb, fa) = (facts(&b), facts(&a));
    let truncating = name == "truncate" || name == "pipeline:aggressive";
    // Ledger entries of the input are carried verbatim.
    let none = Vec::new();
    for (id, units) in &fb.units {
        let now = fa.units.get(id).unwrap_or(&none);
        for unit in units {
            if !now.contains(unit) && !truncating {
                panic!(
                    "{case}: the ledger entry of {id} is lost or changed: {unit:?}, now {now:?}"
                );
            }
        }
    }
    // A call that went is in the ledger, with its arguments.
    for (id, arguments) in &fb.calls {
        let kept = fa.calls.get(id).map_or(0, Vec::len);
        let gone = arguments.len().saturating_sub(kept);
        if gone == 0 {
            continue;
        }
        let before = fb.units.get(id).map_or(0, Vec::len);
        let now = fa.units.get(id).unwrap_or(&none);
        if now.len() < before + gone {
            assert!(
                truncating,
                "{case}: call {id} is neither kept nor in a ledger"
            );
            continue;
        }
        for u in now {
            let kept = u
                .arguments
                .as_deref()
                .unwrap_or_else(|| panic!("{case}: {id}: arguments lost"));
            // Verbatim, or shortened by the digest's policy (long string fields cut
            // with a marker saying how much).
            assert!(
                arguments.iter().any(|a| a == kept)
                    || kept.contains("more chars")
                    || fb.units.get(id).is_some_and(|b| b.contains(u)),
                "{case}: {id}: arguments {kept:?} are not the call's {arguments:?}"
            );
        }
    }
    assert!(
        !after.contains("(arguments lost)") || before.contains("(arguments lost)"),
        "{case}: the output says arguments lost"
    );
    // Earlier summaries' prose is carried forward.
    if !truncating && name != "slide" {
        for p in &fb.prose {
            let first = p.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
            assert!(
                fa.prose.iter().any(|q| q.contains(first)),
                "{case}: an earlier summary's prose is lost: {first:?}"
            );
        }
    }
    // Clean by check and check --before: no rule the input kept is broken.
    let had = rule_names(&check_rules(&b));
    let now = rule_names(&check_rules(&a));
    let new: Vec<_> = now.difference(&had).collect();
    assert!(new.is_empty(), "{case}: check: new violations {new:?}");
    let against = rule_names(&check_against(&b, &a));
    let new: Vec<_> = against.difference(&had).collect();
    assert!(
        new.is_empty(),
        "{case}: check --before: new violations {new:?}"
    );
}

/// Two and three passes of every pipeline on `text` at budgets of 60% and 30% of
/// its live tokens.
fn passes(label: &str, text: &str, format: Format) {
    let t = format::read(text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{label}: {e}"));
    let live = t.live_tokens();
    for percent in [60u64, 30] {
        let budget = (live * percent / 100).max(1);
        for (name, pipeline) in pipelines(budget) {
            let case = format!("{label} {name} at {percent}% ({budget} tokens)");
            let Some((once, met, _)) = run(&case, text, format, &pipeline) else {
                continue;
            };
            check_output(&case, &name, format, text, &once);
            // Never larger: an output that does not shrink the log is not made.
            let after = format::read(&once, format, &ByteEstimate)
                .unwrap_or_else(|e| panic!("{case}: {e}"))
                .live_tokens();
            assert!(
                after < live || once == text,
                "{case}: {live} tokens became {after}"
            );
            if met {
                // The fixed point.
                let (twice, met2, rounds) = run(&case, &once, format, &pipeline)
                    .unwrap_or_else(|| panic!("{case}: the second pass is refused"));
                assert!(met2, "{case}: the second pass is over budget");
                assert_eq!(rounds, 0, "{case}: the second pass ran");
                assert!(twice == once, "{case}: the second pass changed the output");
            }
            // A third pass at a smaller budget, on the first pass's output: what the
            // first wrote is carried forward.
            let smaller: Vec<_> = pipelines((budget * 2 / 3).max(1))
                .into_iter()
                .filter(|(n, _)| *n == name)
                .collect();
            let Some((third, _, _)) = run(&case, &once, format, &smaller[0].1) else {
                continue;
            };
            check_output(
                &format!("{case}, then at 2/3"),
                &name,
                format,
                &once,
                &third,
            );
        }
    }
}

/// The real transcripts: the repository's fixtures, and those in
/// ../shared/data/transcripts (beside the checkout) when it is there.
pub(crate) fn real() -> Vec<(String, String, Format)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut dirs: Vec<PathBuf> = vec![root.join("tests/fixtures/transcripts")];
    let shared = root.join("../shared/data/transcripts");
    if shared.is_dir() {
        dirs.push(shared);
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for dir in dirs {
        let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e != "md"))
            .collect();
        names.sort();
        for path in names {
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !seen.insert(name.clone()) {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            match format::detect(&text) {
                Ok(Format::Records) | Err(_) => continue,
                Ok(format) => out.push((name, text, format)),
            }
        }
    }
    out
}

fn real_of(formats: &[Format]) {
    let all = real();
    let mut ran = 0;
    for (name, text, format) in all.iter().filter(|(_, _, f)| formats.contains(f)) {
        passes(name, text, *format);
        ran += 1;
    }
    assert!(ran > 0, "no real transcript of {formats:?}");
}

#[test]
fn real_claude_code_transcripts_compact_to_a_fixed_point_and_keep_every_ledger_entry() {
    real_of(&[Format::ClaudeCode]);
}

#[test]
fn real_codex_transcripts_compact_to_a_fixed_point_and_keep_every_ledger_entry() {
    real_of(&[Format::CodexRollout]);
}

#[test]
fn real_chat_and_gemini_transcripts_compact_to_a_fixed_point_and_keep_every_ledger_entry() {
    real_of(&[Format::OpenAiChat, Format::GeminiCli]);
}

proptest! {
    #![proptest_config(Config { cases: crate::cases(12), ..Config::default() })]
    #[test]
    fn generated_documents_compact_to_a_fixed_point_and_keep_every_ledger_entry(
        seed in any::<u64>(),
        n in 20usize..160,
    ) {
        let conv = conversation(seed, n);
        for format in [
            Format::AnthropicMessages,
            Format::OpenAiChat,
            Format::OpenAiResponses,
            Format::Gemini,
        ] {
            let text = document(format, &conv);
            passes(&format!("generated {format} seed {seed} n {n}"), &text, format);
        }
    }
}

fn fixture(name: &str) -> (String, Transcript) {
    crate::transcripts::read(name)
}

fn run_preset(text: &str, t: &Transcript, budget: u64) -> format::Compacted {
    cutpoint::testing::writers::run(
        t,
        text,
        &Preset::Balanced.pipeline(budget),
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    )
    .unwrap()
}

/// The pipeline's read-back round on a real Claude Code session (at 25% of its
/// tokens) re-summarized the 71 digests its first round wrote and wrote 76 of 77
/// calls as `? (arguments lost) => (no result)`: the second builder read an earlier
/// summary's units as bare ids. A run now stops after a round that counted what it
/// wrote exactly, and such a round found nothing more to do here, so the second pass
/// is run on the output with half the budget, as a later compaction would be: it
/// folds the first pass's digests and summary into its own, and every ledger entry
/// of the first pass is in the second's output verbatim.
#[test]
fn a_read_back_round_never_loses_the_arguments_its_first_round_wrote() {
    let (text, t) = fixture("claude-code__spotter__4d5611e5-main.jsonl");
    let ledgers = |out: &str| -> Vec<String> {
        let back = format::read(out, Format::ClaudeCode, &ByteEstimate).unwrap();
        back.messages
            .iter()
            .flat_map(|m| &m.blocks)
            .filter_map(|(b, _)| match b {
                Block::Summary(p) => Some(p.units.iter().map(|u| format!("{u:?}"))),
                _ => None,
            })
            .flatten()
            .collect()
    };
    let mut folded = 0;
    for percent in [25, 40, 60] {
        let budget = t.live_tokens() * percent / 100;
        let once = run_preset(&text, &t, budget);
        let first = ledgers(&once.text);
        assert!(!first.is_empty(), "{percent}%: the output holds ledgers");
        let back = format::read(&once.text, Format::ClaudeCode, &ByteEstimate).unwrap();
        let twice = run_preset(&once.text, &back, budget / 2);
        folded += usize::from(twice.report.ran().any(|r| r.summaries > 0));
        for (k, done) in [&once, &twice].into_iter().enumerate() {
            assert!(
                !done.text.contains("(arguments lost)"),
                "{percent}%, pass {}",
                k + 1
            );
        }
        let second = ledgers(&twice.text);
        let missing: Vec<&String> = first.iter().filter(|u| !second.contains(u)).collect();
        assert!(missing.is_empty(), "{percent}%: {missing:?}");
    }
    assert!(folded > 0, "no second pass summarized the first's ledgers");
}

/// A second run with the budget the first met was not a no-op: it summarized again
/// and turned every ledger line of the first pass into `(arguments lost)`.
#[test]
fn a_log_within_its_budget_comes_back_byte_for_byte() {
    for name in [
        "claude-code__spotter__4d5611e5-main.jsonl",
        "openai-chat__tau-bench__gpt-4o-airline-traj173.json",
        "codex__localpush__rollout-12-41-04-parallel7.jsonl",
    ] {
        let (text, t) = fixture(name);
        let (budget, once) = [40, 60, 80]
            .into_iter()
            .map(|p| t.live_tokens() * p / 100)
            .map(|b| (b, run_preset(&text, &t, b)))
            .find(|(_, done)| done.report.met_budget())
            .unwrap_or_else(|| panic!("{name}: no budget met"));
        let back = format::read(&once.text, t.format, &ByteEstimate).unwrap();
        let twice = run_preset(&once.text, &back, budget);
        assert_eq!(twice.rounds, 0, "{name}");
        assert!(twice.report.was_within_budget(), "{name}");
        assert!(twice.text == once.text, "{name}: changed");
    }
}

/// The Codex session that ends on an open call, `pipeline` at 40%: the summary of a
/// region without tool calls was a user message with empty `input_text`, which Codex
/// forwards as it is.
#[test]
fn a_summary_of_a_region_without_calls_is_never_an_empty_message() {
    let (text, t) = fixture("codex__localpush__rollout-13-19-38-trailing-call.jsonl");
    let done = run_preset(&text, &t, t.live_tokens() * 40 / 100);
    assert!(
        done.report.ran().any(|r| r.summaries > 0),
        "a summary is written"
    );
    assert!(
        !done.text.contains(r#""text":"""#),
        "an empty text: {}",
        done.text
    );
    let back = format::read(&done.text, Format::CodexRollout, &ByteEstimate).unwrap();
    assert!(
        back.messages
            .iter()
            .any(|m| matches!(m.blocks.first(), Some((Block::Summary(_), _)))),
        "the summary reads back as one"
    );
}

/// Claude Code drops an `isCompactSummary` record that does not follow its
/// `compact_boundary` (30 digests written that way reached the model as none), so
/// digests and inner summaries are ordinary user records, and a summary that opens the
/// live history is written as Claude Code writes its own compaction: a boundary with
/// `compactMetadata.preservedSegment` naming the kept tail, then the summary.
#[test]
fn claude_code_rewrites_are_written_as_claude_code_writes_its_own_compaction() {
    let name = "claude-code__claude-reliability__python-to-rust-port.jsonl";
    let (text, t) = fixture(name);
    let live = t.live_tokens();
    let lines = |s: &str| -> Vec<serde_json::Value> {
        s.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    };
    // Digests: ordinary user records, chained.
    let digest = cutpoint::testing::writers::run(
        &t,
        &text,
        &Pipeline::one(Strategy::Digest(Digest::default()), Some(live * 80 / 100)),
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    )
    .unwrap();
    let out = lines(&digest.text);
    let digests: Vec<_> = out
        .iter()
        .filter(|l| {
            l["message"]["content"]
                .as_str()
                .is_some_and(|c| c.contains("Tool calls summarized"))
        })
        .collect();
    assert!(!digests.is_empty(), "{name}: digests written");
    for d in &digests {
        assert!(d.get("isCompactSummary").is_none(), "{d}");
        assert!(d["uuid"].is_string() && d["parentUuid"].is_string(), "{d}");
    }
    // A summary of the oldest region: boundary, summary, the kept tail relinked.
    let summary = cutpoint::testing::writers::run(
        &t,
        &text,
        &Pipeline::one(
            Strategy::Summarize(Summarize::default()),
            Some(live * 60 / 100),
        ),
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    )
    .unwrap();
    let out = lines(&summary.text);
    let b = out
        .iter()
        .position(|l| l["subtype"] == "compact_boundary")
        .expect("a boundary");
    assert!(out[b]["parentUuid"].is_null());
    let s = &out[b + 1];
    assert_eq!(s["isCompactSummary"], true);
    assert_eq!(s["parentUuid"], out[b]["uuid"]);
    let seg = &out[b]["compactMetadata"]["preservedSegment"];
    assert_eq!(seg["anchorUuid"], s["uuid"], "{seg}");
    let head = out[b + 2..].iter().find(|l| l["uuid"].is_string()).unwrap();
    assert_eq!(seg["headUuid"], head["uuid"]);
    assert_eq!(
        head["parentUuid"], s["uuid"],
        "the kept tail is linked to the summary"
    );
    let tail = out.iter().rev().find(|l| l["uuid"].is_string()).unwrap();
    assert_eq!(seg["tailUuid"], tail["uuid"]);
    // Read back, the summary opens the live history.
    let back = format::read(&summary.text, Format::ClaudeCode, &ByteEstimate).unwrap();
    let first = &back.messages[back.live_from()];
    assert!(first.starts_history);
    assert!(matches!(first.blocks.first(), Some((Block::Summary(_), _))));
    // Compacted again, smaller: the segment of the last boundary names lines that are
    // in the file (a head the second pass summarized is renamed to what is there).
    for percent in [40, 25] {
        let again = cutpoint::testing::writers::run(
            &back,
            &summary.text,
            &Pipeline::one(
                Strategy::Summarize(Summarize::default()),
                Some(live * percent / 100),
            ),
            0,
            &mut Progress::new(),
            &mut LedgerOnly,
            &ByteEstimate,
        )
        .unwrap();
        let out = lines(&again.text);
        let uuids: HashSet<&str> = out.iter().filter_map(|l| l["uuid"].as_str()).collect();
        let b = out
            .iter()
            .rposition(|l| l["subtype"] == "compact_boundary")
            .expect("a boundary");
        let seg = &out[b]["compactMetadata"]["preservedSegment"];
        for key in ["headUuid", "anchorUuid", "tailUuid"] {
            let u = seg[key]
                .as_str()
                .unwrap_or_else(|| panic!("{percent}%: {key} in {seg}"));
            assert!(
                uuids.contains(u),
                "{percent}%: {key} {u} is not in the file"
            );
        }
    }
}

/// CI's generated case (seed 9311586446782852039, n 39): `clear-thinking` at 60% of
/// an Anthropic document changed the latest assistant message's thinking.
#[test]
fn clear_thinking_keeps_the_latest_thinking_of_a_generated_anthropic_log() {
    let conv = conversation(9311586446782852039, 39);
    let text = document(Format::AnthropicMessages, &conv);
    passes(
        "generated anthropic seed 9311586446782852039 n 39",
        &text,
        Format::AnthropicMessages,
    );
}

/// A compaction whose output reads back no smaller than its input is not made: the
/// summary of a short first message, in the provider's message shape, is larger than
/// the message (a stage sizes what it writes by its text). The driver wrote it before
/// (1016 tokens became 1022 on a generated log); now the input comes back and the
/// step says why.
#[test]
fn a_compaction_that_would_grow_the_log_is_not_made() {
    let text = r#"[{"role":"system","content":"Be brief."},{"role":"user","content":"list the files"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"ls","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c1","content":"a.txt b.txt"},{"role":"assistant","content":"Two files."},{"role":"user","content":"thanks"}]"#;
    let t = format::read(text, Format::OpenAiChat, &ByteEstimate).unwrap();
    let live = t.live_tokens();
    let pipeline = Pipeline::one(Strategy::Summarize(Summarize::default()), Some(live - 1));
    let done = cutpoint::testing::writers::run(
        &t,
        text,
        &pipeline,
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    )
    .unwrap();
    let after = format::read(&done.text, Format::OpenAiChat, &ByteEstimate)
        .unwrap()
        .live_tokens();
    assert!(after <= live, "{live} tokens became {after}");
    if done.text == text {
        assert_eq!(done.report.tokens_after, live);
        assert!(done.report.ran().all(|r| r.edits.is_empty()));
        assert!(
            done.report.blocked().any(|n| matches!(
                n.reason,
                cutpoint::compact::strategy::Blocked::NotSmaller { .. }
            )),
            "{:?}",
            done.report
        );
    } else {
        assert!(after < live);
    }
}
