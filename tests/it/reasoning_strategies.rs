//! Every compaction strategy, alone and in every preset, respects the reasoning rules
//! (issue 13) on the real Claude Code transcripts with thinking and the real Codex
//! rollouts with reasoning items, written back in their own format: checked against
//! the original ([`format::check_against`]), the output breaks no rule the original
//! kept. Each file is also cut at the request that sends back its latest assistant
//! message with thinking, where that message's thinking must come back unchanged, and
//! natively compacted (a Claude Code file with a `compaction` block inserted at a legal
//! cut), where the block must come back byte for byte.

use std::collections::{BTreeMap, BTreeSet};

use cutpoint::compact::pipeline::Preset;
use cutpoint::compact::strategy::{ClearThinking, Floors, Goal, Strategy};
use cutpoint::format::{
    self, Block, ByteEstimate, Format, Rule, check_against, check_rules, invalidated_thinking,
};
use cutpoint::testing::synth::Rng;
use cutpoint::testing::writers::log_of;

use crate::faults::{Case, NEW_RULES, compacted_variant, latest_thinking, transcript_cases};
use crate::strategies_formats::{check_edit, preset_plan, strategies};

/// The fixtures with thinking (Claude Code) or reasoning items (Codex), and for each
/// the request that sends back its latest assistant message with thinking.
fn logs() -> Vec<Case> {
    let mut out = Vec::new();
    for case in transcript_cases() {
        if !matches!(case.format, Format::ClaudeCode | Format::CodexRollout) {
            continue;
        }
        let t = case.read();
        let reasoning = t
            .messages
            .iter()
            .any(|m| m.blocks.iter().any(|(b, _)| matches!(b, Block::Reasoning)));
        if !reasoning {
            continue;
        }
        // Natively compacted: the compaction block must come back byte for byte.
        if let Some(variant) = compacted_variant(&case) {
            out.push(variant);
        }
        if let Some((_, request)) = latest_thinking(&case, &t) {
            out.push(Case {
                name: format!("{} (request)", case.name),
                format: case.format,
                text: request,
            });
        }
        out.push(case);
    }
    out
}

/// Runs `plan` on `case`, writes it back and checks the output against the original.
/// Preserved thinking's prefix binding ([`Rule::ThinkingPrefixChanged`], issue 21) is
/// not yet honoured by the strategies (every client-side edit of the prefix
/// invalidates the thinking after it): the blocks each output invalidates are counted
/// into `invalidated` by strategy instead (docs/reasoning.md records the numbers).
fn respects_the_rules(
    case: &Case,
    plan: &[(Strategy, Goal)],
    invalidated: &mut BTreeMap<String, (usize, usize)>,
) {
    let out = check_edit(&case.name, &case.text, case.format, plan);
    let before = case.read();
    let after = format::read(&out, case.format, &ByteEstimate).expect("reads back");
    let kept: BTreeSet<&str> = check_rules(&before).iter().map(|v| v.rule.name()).collect();
    let name = plan
        .iter()
        .map(|(s, _)| s.kind().to_string())
        .collect::<Vec<_>>()
        .join("+");
    let e = invalidated
        .entry(format!("{} {name}", case.format))
        .or_default();
    e.0 += 1;
    e.1 += invalidated_thinking(&before, &after).len();
    for v in check_against(&before, &after) {
        if v.rule == Rule::ThinkingPrefixChanged {
            continue;
        }
        assert!(
            !NEW_RULES.contains(&v.rule) && kept.contains(v.rule.name()),
            "{}: {:?}: {v}",
            case.name,
            plan.iter().map(|(s, _)| s.kind()).collect::<Vec<_>>()
        );
    }
}

#[test]
fn every_strategy_keeps_thinking_and_reasoning_rules_on_real_files() {
    let logs = logs();
    let formats: BTreeSet<&str> = logs.iter().map(|c| c.format.name()).collect();
    assert_eq!(formats.len(), 2, "Claude Code and Codex files");
    assert!(logs.iter().any(|c| c.name.ends_with("(request)")));
    assert!(logs.iter().any(|c| c.name.ends_with("+compaction")));
    let mut cleared = 0;
    let mut invalidated = BTreeMap::new();
    for case in &logs {
        let t = case.read();
        let total = t.total_tokens();
        let mut rng = Rng::new(case.name.len() as u64);
        let mut all = strategies(&mut rng);
        all.push(Strategy::ClearThinking(ClearThinking::default()));
        for strategy in all {
            for goal in [
                Goal::within(Floors::none()),
                Goal::within(Floors::none()).target(0),
                Goal::within(Floors::none().keep_head(1)).target(total / 2),
            ] {
                respects_the_rules(case, &[(strategy.clone(), goal)], &mut invalidated);
            }
        }
        for preset in Preset::ALL {
            respects_the_rules(case, &preset_plan(preset, total / 4), &mut invalidated);
        }
        // clear-thinking has work to do on these files: it is not vacuously clean.
        let mut built = log_of(&t).expect("a log");
        let goal = Goal::within(Floors::none().keep_head(built.pinned)).target(0);
        if let Ok(report) = ClearThinking::default().run(&mut built.log, &goal) {
            cleared += report.cleared_thinking;
        }
    }
    assert!(cleared > 0, "no thinking was cleared anywhere");
    // The record for docs/reasoning.md: outputs, and thinking blocks / reasoning
    // items they invalidate, per format and strategy.
    for (name, (runs, blocks)) in &invalidated {
        println!("| {name} | {runs} | {blocks} |");
    }
}

/// `Pipeline::keep_thinking_valid` on the same files, through the one path
/// (`format::edit::run`), every strategy and preset at 60% and 30% of the live
/// tokens: each output invalidates no thinking block or reasoning item (but the
/// Responses items whose server id the rule reports, which this does not strip), breaks no rule
/// the original kept, and keeps the latest assistant message's thinking as it was; or
/// the run is refused with `EditError::ThinkingBound`, naming that message. Without
/// the setting, the same runs invalidate blocks (so the check can fail). The counts
/// are docs/reasoning.md's.
#[test]
fn keep_thinking_valid_strips_what_a_rewrite_invalidates_or_refuses() {
    use cutpoint::compact::pipeline::{Pipeline, Progress};
    use cutpoint::compact::strategy::LedgerOnly;
    use cutpoint::testing::writers::{EditError, run};
    let mut rows: BTreeMap<String, [usize; 6]> = BTreeMap::new();
    for case in logs() {
        let t = case.read();
        let live = t.live_tokens();
        for percent in [60u64, 30] {
            let budget = (live * percent / 100).max(1);
            let pipelines = crate::one_path::pipelines(budget);
            for (name, pipeline) in pipelines {
                let label = format!("{} {name} at {percent}%", case.name);
                let go = |p: &Pipeline| {
                    run(
                        &t,
                        &case.text,
                        p,
                        0,
                        &mut Progress::new(),
                        &mut LedgerOnly,
                        &ByteEstimate,
                    )
                };
                let plain = go(&pipeline.clone().keep_thinking_valid(false))
                    .unwrap_or_else(|e| panic!("{label}: {e}"));
                let plain_back = format::read(&plain.text, case.format, &ByteEstimate).unwrap();
                let row = rows.entry(format!("{} {name}", case.format)).or_default();
                row[0] += 1;
                row[4] += usize::from(plain.report.met_budget());
                row[1] += invalidated_thinking(&t, &plain_back)
                    .iter()
                    .filter(|i| !i.server_id)
                    .count();
                match go(&pipeline.clone().keep_thinking_valid(true)) {
                    Ok(done) => {
                        let after = format::read(&done.text, case.format, &ByteEstimate)
                            .unwrap_or_else(|e| panic!("{label}: reads back: {e}"));
                        // Nothing invalid is left, server-id items included (their
                        // `id` is stripped).
                        let left = invalidated_thinking(&t, &after);
                        assert!(left.is_empty(), "{label}: still invalid: {left:?}");
                        let kept: BTreeSet<&str> =
                            check_rules(&t).iter().map(|v| v.rule.name()).collect();
                        for v in check_against(&t, &after) {
                            assert!(
                                !NEW_RULES.contains(&v.rule) && kept.contains(v.rule.name()),
                                "{label}: {v}"
                            );
                        }
                        if done.report.met_budget() {
                            row[2] += 1;
                        }
                        row[5] += usize::from(done.simple);
                    }
                    Err(EditError::ThinkingBound { message, .. }) => {
                        // After it (in the plain output) no user text and no assistant
                        // message but its own: it is in the current turn, or it is the
                        // latest assistant message.
                        let later = &plain_back.messages[message + 1..];
                        let in_turn = !later.iter().any(|m| {
                            m.role == format::Role::User
                                && m.blocks
                                    .iter()
                                    .all(|(b, _)| !matches!(b, Block::Result { .. }))
                        });
                        let latest = case.format == Format::ClaudeCode
                            && plain_back.messages[message].role == format::Role::Assistant
                            && !later.iter().any(|m| m.role == format::Role::Assistant);
                        assert!(
                            in_turn || latest,
                            "{label}: message {message} is neither in the current turn nor the latest assistant message"
                        );
                        // And no simple compaction could keep it valid either.
                        assert!(
                            crate::one_path::may_refuse(&t),
                            "{label}: refused, though a simple compaction could keep the thinking valid"
                        );
                        row[3] += 1;
                    }
                    Err(e) => panic!("{label}: {e}"),
                }
            }
        }
    }
    let invalid_without: usize = rows.values().map(|r| r[1]).sum();
    assert!(
        invalid_without > 0,
        "the runs without the setting invalidate blocks"
    );
    println!(
        "| format, strategy | outputs | without: blocks invalidated | without: budget met | with: budget met | with: simple compaction | with: refused |"
    );
    for (name, [runs, without, met, refused, met_without, simple]) in &rows {
        println!("| {name} | {runs} | {without} | {met_without} | {met} | {simple} | {refused} |");
    }
}

/// `keep_thinking_valid` strips the server `id` of every OpenAI Responses item whose
/// reasoning item went (OpenAI refuses such an item until its `id` is stripped),
/// every other byte of the item kept: here a `clear` of the first turn's result
/// changes the prefix of the second turn's reasoning, which is stripped, and the
/// call after it keeps its `call_id` but loses its `id`. The real rollouts carry no
/// server ids, so this log is written from the documented shapes.
#[test]
fn keep_thinking_valid_strips_the_server_id_of_an_item_whose_reasoning_went() {
    let big = "x".repeat(4000);
    let items = [
        r#"{"type":"message","role":"user","content":"list the files"}"#.to_owned(),
        r#"{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"gAAA1"}"#.to_owned(),
        r#"{"type":"function_call","id":"fc_1","call_id":"call_1","name":"ls","arguments":"{}"}"#
            .to_owned(),
        format!(r#"{{"type":"function_call_output","call_id":"call_1","output":"{big}"}}"#),
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"Many."}]}"#
            .to_owned(),
        r#"{"type":"message","role":"user","content":"count them"}"#.to_owned(),
        r#"{"type":"reasoning","id":"rs_2","summary":[],"encrypted_content":"gAAA2"}"#.to_owned(),
        r#"{"type":"function_call","id":"fc_2","call_id":"call_2","name":"wc","arguments":"{}"}"#
            .to_owned(),
        r#"{"type":"function_call_output","call_id":"call_2","output":"4000"}"#.to_owned(),
        r#"{"type":"message","role":"assistant","content":[{"type":"output_text","text":"4000."}]}"#
            .to_owned(),
        r#"{"type":"message","role":"user","content":"thanks"}"#.to_owned(),
    ];
    // The same items as a Responses input and as a Codex rollout's lines: the
    // rollout reader marks an item with a server id as the Responses reader does.
    let rollout: Vec<String> = items
        .iter()
        .map(|item| {
            format!(r#"{{"timestamp":"2026-02-23T11:41:32.240Z","type":"response_item","payload":{item}}}"#)
        })
        .collect();
    for (f, text) in [
        (Format::OpenAiResponses, format!("[{}]", items.join(",\n"))),
        (Format::CodexRollout, rollout.join("\n") + "\n"),
    ] {
        strips_the_server_id(f, &text);
    }
}

/// [`keep_thinking_valid_strips_the_server_id_of_an_item_whose_reasoning_went`] on
/// one format.
fn strips_the_server_id(f: Format, text: &str) {
    use cutpoint::compact::pipeline::{Pipeline, Progress};
    use cutpoint::compact::strategy::{Clear, LedgerOnly};
    let text = text.to_owned();
    let t = format::read(&text, f, &ByteEstimate).unwrap();
    let live = t.live_tokens();
    let clear = Strategy::Clear(Clear::default().keep_tool_uses(1));
    let run = |pipeline: &Pipeline| {
        cutpoint::testing::writers::run(
            &t,
            &text,
            pipeline,
            0,
            &mut Progress::new(),
            &mut LedgerOnly,
            &ByteEstimate,
        )
        .unwrap()
    };
    let plain = Pipeline::one(clear, Some(live / 2)).keep_thinking_valid(false);
    let without = run(&plain);
    let back = format::read(&without.text, f, &ByteEstimate).unwrap();
    assert!(
        invalidated_thinking(&t, &back).iter().any(|i| !i.server_id),
        "the clear invalidates the second turn's reasoning"
    );
    let done = run(&plain.clone().keep_thinking_valid(true));
    let after = format::read(&done.text, f, &ByteEstimate).unwrap();
    assert_eq!(invalidated_thinking(&t, &after), []);
    assert!(
        check_against(&t, &after)
            .iter()
            .all(|v| v.rule != Rule::ThinkingPrefixChanged),
        "{:?}",
        check_against(&t, &after)
    );
    // The call lost its id, and nothing else.
    assert!(!done.text.contains(r#""id":"rs_2""#));
    assert!(!done.text.contains(r#""id":"fc_2""#));
    assert!(
        done.text.contains(
            r#"{"type":"function_call","call_id":"call_2","name":"wc","arguments":"{}"}"#
        ),
        "{}",
        done.text
    );
}

/// Each step's `invalidated_thinking` (issue 21, item 1: the step reports say what a
/// planned edit invalidates), on the same files, every strategy and preset at 60% and
/// 30%, written as the strategies made it: every block the output invalidates is
/// counted on a step whose edits come before it (in whichever round), no step counts
/// more than the output invalidates, a step that edited nothing counts none, and the
/// steps of the same run with thinking kept valid carry the same counts (the blocks
/// its last, stripping step then clears). Some step must count something, or the
/// check could not fail.
#[test]
fn every_step_says_what_thinking_it_invalidates() {
    use cutpoint::compact::pipeline::{Progress, Step};
    use cutpoint::compact::strategy::{Kind, LedgerOnly, StepReport};
    use cutpoint::testing::writers::run;
    let mut blamed = 0usize;
    for case in logs() {
        let t = case.read();
        let live = t.live_tokens();
        for percent in [60u64, 30] {
            let budget = (live * percent / 100).max(1);
            for (name, pipeline) in crate::one_path::pipelines(budget) {
                let label = format!("{} {name} at {percent}%", case.name);
                let go = |on: bool| {
                    run(
                        &t,
                        &case.text,
                        &pipeline.clone().keep_thinking_valid(on),
                        0,
                        &mut Progress::new(),
                        &mut LedgerOnly,
                        &ByteEstimate,
                    )
                };
                let plain = go(false).unwrap_or_else(|e| panic!("{label}: {e}"));
                let ran: Vec<&StepReport> = plain.report.ran().collect();
                let total = plain.invalidated.iter().filter(|i| !i.server_id).count();
                for r in &ran {
                    assert!(
                        r.invalidated_thinking <= plain.invalidated.len(),
                        "{label}: {r:?}"
                    );
                    if r.edits.is_empty() {
                        assert_eq!(r.invalidated_thinking, 0, "{label}: {r:?}");
                    }
                    blamed += r.invalidated_thinking;
                }
                let counted: usize = ran.iter().map(|r| r.invalidated_thinking).sum();
                assert!(counted >= total, "{label}: {counted} counted of {total}");
                // Kept valid: the same steps, then (when something was invalid) the
                // strip, which invalidates nothing itself.
                let Ok(valid) = go(true) else { continue };
                if valid.simple {
                    continue;
                }
                let steps: Vec<usize> = valid
                    .report
                    .steps
                    .iter()
                    .filter_map(|s| match s {
                        Step::Ran(r) => Some(r.invalidated_thinking),
                        _ => None,
                    })
                    .collect();
                let plain_steps: Vec<usize> = ran.iter().map(|r| r.invalidated_thinking).collect();
                assert_eq!(&steps[..plain_steps.len()], &plain_steps[..], "{label}");
                let strip = valid.report.ran().nth(plain_steps.len());
                if let Some(strip) = strip {
                    assert_eq!(strip.kind, Kind::ClearThinking, "{label}");
                    assert_eq!(strip.invalidated_thinking, 0, "{label}");
                }
            }
        }
    }
    assert!(
        blamed > 0,
        "no step invalidated anything: the check cannot fail"
    );
}
