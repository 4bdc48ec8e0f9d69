//! The compaction strategies and pipelines on generated logs (realistic sessions with
//! payloads, thinking, calls in flight at the end, and damaged ones): the output keeps
//! every condition the input kept; every call id of the input is still there
//! (retained, cleared in place, or in a digest's or summary's ledger) unless
//! `truncate` named it; floors hold; running again changes nothing; an unmet
//! `clear_at_least` leaves the log byte-identical; no pass repeats without progress;
//! the tracker edited in place equals one rebuilt from the output.

use std::collections::BTreeSet;

use cutpoint::compact::pipeline::{Pipeline, Preset, Progress, Stage, Step, Target, Trigger};
use cutpoint::compact::strategy::{
    Blocked, Clear, ClearInputs, ClearThinking, Digest, Edit, Floors, Goal, Kind, Prose, Slide,
    StepReport, Strategy, Summarize, SummaryRequest, Truncate,
};
use cutpoint::compact::{Entry, Log, Payload, ResultStatus, Unit, summary_text};
use cutpoint::format::records::write_entry;
use cutpoint::testing::synth::{Rng, Session};
use cutpoint::testing::{Observe, reference};
use cutpoint::{CallId, Record, RecordKind};
use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::compact::{assert_no_new_violations, check};

const TOOLS: [&str; 4] = ["bash", "read_file", "write_file", "grep"];

/// A payload like a real agent's: tool names, arguments with a long field now and
/// then, multi-line results, thinking (signed or not) before calls.
fn with_payload(record: Record, rng: &mut Rng) -> Entry {
    let payload = match record.kind() {
        RecordKind::ToolUse(id) => {
            let tool = TOOLS[rng.range(0, 3) as usize];
            let long = "x".repeat(rng.range(0, 600) as usize);
            Payload::Call {
                name: Some(tool.to_owned()),
                arguments: Some(format!(
                    r#"{{"command":"run {id}","path":"src/{id}.rs","content":"{long}"}}"#
                )),
            }
        }
        RecordKind::ToolResult(id) => Payload::Result {
            status: Some(if rng.chance(0.2) {
                ResultStatus::Error
            } else {
                ResultStatus::Ok
            }),
            content: Some(format!("{id}: {} lines\nmore output", rng.range(1, 500))),
        },
        RecordKind::Assistant if rng.chance(0.35) => Payload::Reasoning {
            signed: rng.chance(0.5),
        },
        _ => Payload::None,
    };
    Entry::new(record, payload)
}

/// A session of `n` records with payloads; `damage` drops records and adds stray or
/// repeated results (the tracker refuses nothing it accepts from a real log).
pub(crate) fn generated(seed: u64, n: usize, damage: f64) -> Log {
    let mut rng = Rng::new(seed ^ 0xa11ce);
    let mut log = Log::new();
    for record in Session::records(seed, n) {
        if rng.chance(damage) {
            match rng.range(0, 2) {
                0 => continue,
                1 if matches!(record.kind(), RecordKind::ToolResult(_)) => {
                    let _ = log.append(with_payload(record.clone(), &mut rng));
                }
                _ => {
                    let _ = log.append(Entry::from(Record::tool_result(
                        format!("ghost{}", rng.range(0, 30)),
                        7,
                    )));
                }
            }
        }
        let _ = log.append(with_payload(record, &mut rng));
    }
    log.assert_invariants();
    log
}

/// Every call id the log holds: its calls and the calls its summaries cover.
fn call_ids(log: &Log) -> BTreeSet<CallId> {
    let mut ids = BTreeSet::new();
    for e in log.entries() {
        match e.record.kind() {
            RecordKind::ToolUse(id) => {
                ids.insert(id.clone());
            }
            RecordKind::Summary(covered) => ids.extend(covered.iter().cloned()),
            _ => {}
        }
    }
    ids
}

fn bytes(log: &Log) -> Vec<u8> {
    let mut out = Vec::new();
    for e in log.entries() {
        write_entry(&mut out, e).expect("writes to memory");
    }
    out
}

/// The tracker edited in place equals one rebuilt from the entries and agrees with
/// the specification's legality on every cut (small logs).
fn assert_same_as_rebuilt(log: &Log, removed: bool) {
    log.assert_invariants();
    let rebuilt = Log::from_entries(log.entries().iter().cloned())
        .expect("a compacted log is accepted from scratch");
    let (mut live, mut want) = (
        log.tracker().observe().without_anomalies(),
        rebuilt.tracker().observe().without_anomalies(),
    );
    if removed {
        live.completed = 0;
        want.completed = 0;
    }
    assert_eq!(live, want);
    assert_eq!(log.message_count(), rebuilt.message_count());
    assert_eq!(
        log.turn_starts().collect::<Vec<_>>(),
        rebuilt.turn_starts().collect::<Vec<_>>()
    );
    assert_eq!(
        log.tool_group_starts().collect::<Vec<_>>(),
        rebuilt.tool_group_starts().collect::<Vec<_>>()
    );
    if log.len() <= 300 {
        let records: Vec<Record> = log.entries().iter().map(|e| e.record.clone()).collect();
        for c in 0..=records.len() {
            assert_eq!(
                log.tracker().is_legal_cut(c),
                reference::is_legal_cut(&records, c),
                "cut {c}"
            );
        }
    }
}

/// Every property of one strategy step on `log` under `goal`; returns the report.
fn check_step(
    log: &mut Log,
    strategy: &Strategy,
    goal: &Goal,
    removed_before: bool,
) -> Option<StepReport> {
    let before_entries: Vec<Entry> = log.entries().iter().cloned().collect();
    let before_bytes = bytes(log);
    let before = check(log);
    let before_ids = call_ids(log);
    let recent = goal.floors.recent_from(log);
    let keep_head = goal.floors.keep_head.min(log.len());
    let len_before = log.len();
    let total_before = log.tracker().total_tokens();
    let what = format!("{:?}", strategy.kind());
    let outcome = strategy.run(log, goal);
    let report = match outcome {
        Err(none) => {
            assert_eq!(none.kind, strategy.kind());
            assert_eq!(
                bytes(log),
                before_bytes,
                "{what}: no progress changes nothing"
            );
            assert_eq!(none.tokens, total_before);
            return None;
        }
        Ok(report) => report,
    };
    // Sizes.
    assert_eq!(report.tokens_before, total_before, "{what}");
    assert_eq!(report.tokens_after, log.tracker().total_tokens(), "{what}");
    assert!(
        report.tokens_after <= report.tokens_before,
        "{what}: never grows"
    );
    assert_eq!(report.records_after, log.len());
    assert_eq!(report.met_target, goal.met(report.tokens_after));
    if report.edits.is_empty() {
        assert_eq!(
            bytes(log),
            before_bytes,
            "{what}: nothing to do, nothing done"
        );
    }
    // Conditions.
    let after = check(log);
    assert_no_new_violations(&before, &after);
    // Call ids: all still there, unless truncate named them.
    let after_ids = call_ids(log);
    let dropped: BTreeSet<CallId> = report.dropped_calls.iter().cloned().collect();
    for id in &before_ids {
        assert!(
            after_ids.contains(id) || dropped.contains(id),
            "{what}: call {id} vanished"
        );
    }
    if strategy.kind() == Kind::Truncate {
        assert!(dropped.iter().all(|id| !after_ids.contains(id)));
    } else {
        assert!(dropped.is_empty());
        assert_eq!(
            after.structure, before.structure,
            "{what}: the pairing structure is kept"
        );
    }
    // Floors: the pinned head and the protected tail are untouched.
    let after_entries: Vec<Entry> = log.entries().iter().cloned().collect();
    assert_eq!(
        after_entries[..keep_head],
        before_entries[..keep_head],
        "{what}: pinned head"
    );
    let tail = len_before - recent.min(len_before);
    assert_eq!(
        after_entries[after_entries.len() - tail..],
        before_entries[len_before - tail..],
        "{what}: the floors' tail"
    );
    // Kinds never change in place; clearing keeps pairing.
    if matches!(strategy.kind(), Kind::Clear | Kind::ClearThinking) {
        assert_eq!(after_entries.len(), before_entries.len());
        for (a, b) in after_entries.iter().zip(&before_entries) {
            assert_eq!(a.record.kind(), b.record.kind());
            assert_eq!(
                a.record.is_bound_to_previous(),
                b.record.is_bound_to_previous()
            );
        }
    }
    assert_same_as_rebuilt(log, removed_before || strategy.kind() == Kind::Truncate);
    // Idempotence: the same step again changes nothing.
    let again_bytes = bytes(log);
    match strategy.run(log, goal) {
        Err(_) => {}
        Ok(again) => assert!(
            again.edits.is_empty(),
            "{what}: a second run did {:?}",
            again.edits
        ),
    }
    assert_eq!(bytes(log), again_bytes, "{what}: idempotent");
    Some(report)
}

fn strategies(rng: &mut Rng) -> Vec<Strategy> {
    let mut clear = Clear::default()
        .keep_tool_uses(rng.range(0, 6) as usize)
        .clear_at_least(if rng.chance(0.2) {
            rng.range(0, 20_000)
        } else {
            0
        });
    if rng.chance(0.3) {
        clear = clear.exclude_tools(["grep"]);
    }
    clear = clear.clear_inputs(match rng.range(0, 2) {
        0 => ClearInputs::None,
        1 => ClearInputs::All,
        _ => ClearInputs::Tools(vec!["write_file".into()]),
    });
    vec![
        Strategy::Clear(clear),
        Strategy::ClearThinking(ClearThinking::default().keep_turns(rng.range(0, 3) as usize)),
        Strategy::Digest(Digest::default().max_argument_chars(rng.range(10, 300) as usize)),
        Strategy::Summarize(Summarize::default()),
        Strategy::Slide(Slide::default().keep_turns(rng.range(0, 3) as usize)),
        Strategy::Truncate(Truncate::default()),
    ]
}

fn goal(total: u64, rng: &mut Rng) -> Goal {
    let floors = Floors::none()
        .keep_head(rng.range(0, 3) as usize)
        .min_turns(rng.range(0, 3) as usize)
        .min_tool_groups(rng.range(0, 4) as usize);
    let goal = Goal::within(floors);
    if rng.chance(0.7) {
        goal.target(rng.range(0, total))
    } else {
        goal
    }
}

fn run_strategies(seed: u64, n: usize, damage: f64) {
    let mut rng = Rng::new(seed);
    let base = generated(seed, n, damage);
    for strategy in strategies(&mut rng) {
        let mut log = base.clone();
        let g = goal(log.tracker().total_tokens(), &mut rng);
        check_step(&mut log, &strategy, &g, false);
        // And on what another strategy left.
        let mut log = base.clone();
        let first = &strategies(&mut rng)[rng.range(0, 5) as usize];
        let g = goal(log.tracker().total_tokens(), &mut rng);
        let removed = first.run(&mut log, &g).is_ok_and(|r| {
            !r.dropped_calls.is_empty() || r.edits.iter().any(|e| matches!(e, Edit::Removed { .. }))
        });
        let g = goal(log.tracker().total_tokens(), &mut rng);
        check_step(&mut log, &strategy, &g, removed);
    }
}

/// `compact::replay::replay` of a run's steps onto the original records' positions
/// names, for every record the run left, the original record it is (same kind and
/// call id, in-place edits marked where the report says) or a summary of the run.
fn assert_replays(
    original: &Log,
    report: &cutpoint::compact::pipeline::PipelineReport,
    after: &Log,
) {
    use cutpoint::compact::replay::{InPlace, replay};
    let items: Vec<Option<(usize, Option<InPlace>)>> =
        (0..original.len()).map(|i| Some((i, None))).collect();
    let out = replay(
        items,
        report.ran(),
        |item, how| match item {
            Some((_, edited)) => {
                *edited = Some(how);
                Ok(())
            }
            None => Err("a summary".into()),
        },
        |_, summary| summary.then_some(None),
    )
    .expect("the run's own report replays");
    assert_eq!(out.len(), after.len(), "one item per record left");
    for (pos, item) in out.iter().enumerate() {
        let now = &after.entries()[pos].record;
        match item {
            Some((i, edited)) => {
                let was = &original.entries()[*i].record;
                assert_eq!(now.kind(), was.kind(), "record {pos} is original {i}");
                if edited.is_none() {
                    assert_eq!(now.tokens(), was.tokens(), "record {pos} was not edited");
                }
            }
            None => assert!(
                matches!(now.kind(), RecordKind::Summary(_)),
                "record {pos} stands for a summarized region"
            ),
        }
    }
}

/// Every stage of a pipeline run obeys the step properties; the run ends within the
/// budget or says why not; a second run on the unchanged log runs no stalled stage.
fn run_pipeline(seed: u64, n: usize, damage: f64) {
    let mut rng = Rng::new(seed ^ 0x919e);
    let mut log = generated(seed, n, damage);
    let original = log.clone();
    let before = check(&log);
    let before_ids = call_ids(&log);
    let total = log.tracker().total_tokens();
    let preset = Preset::ALL[rng.range(0, 2) as usize];
    let budget = rng.range(total / 10, total + 1);
    let pipeline = preset.pipeline(budget);
    let mut progress = Progress::new();
    let report = pipeline.run_with(
        &mut log,
        &mut progress,
        &mut cutpoint::compact::strategy::LedgerOnly,
    );
    assert_eq!(report.steps.len(), pipeline.stages.len());
    assert_eq!(report.tokens_after, log.tracker().total_tokens());
    assert_replays(&original, &report, &log);
    assert_no_new_violations(&before, &check(&log));
    let dropped: BTreeSet<CallId> = report
        .steps
        .iter()
        .filter_map(|s| match s {
            Step::Ran(r) => Some(r.dropped_calls.iter().cloned()),
            _ => None,
        })
        .flatten()
        .collect();
    let after_ids = call_ids(&log);
    assert!(
        before_ids
            .iter()
            .all(|id| after_ids.contains(id) || dropped.contains(id))
    );
    assert_same_as_rebuilt(&log, !dropped.is_empty() || preset == Preset::Aggressive);
    if !report.met_budget() {
        assert!(
            report.blocked().next().is_some()
                || report
                    .steps
                    .iter()
                    .any(|s| matches!(s, Step::Ran(r) if !r.met_target)),
            "{preset}: over budget without saying why: {:?}",
            report.steps
        );
    }
    // No pass repeats without progress: runs on a log nobody else changes reach a
    // run that changes nothing within a few runs; after it, every stage that made no
    // progress is skipped, and nothing changes.
    let mut last = report;
    let mut converged = false;
    for _ in 0..pipeline.stages.len() + 2 {
        let changes = log.changes();
        last = pipeline.run_with(
            &mut log,
            &mut progress,
            &mut cutpoint::compact::strategy::LedgerOnly,
        );
        log.assert_invariants();
        if log.changes() == changes {
            converged = true;
            break;
        }
    }
    assert!(
        converged,
        "{preset}: the runs never settle: {:?}",
        last.steps
    );
    let unchanged = bytes(&log);
    let again = pipeline.run_with(
        &mut log,
        &mut progress,
        &mut cutpoint::compact::strategy::LedgerOnly,
    );
    for (i, step) in last.steps.iter().enumerate() {
        if matches!(step, Step::NoProgress(_) | Step::Stalled(_)) {
            assert!(
                matches!(again.steps[i], Step::Stalled(_)),
                "stage {i} ran again"
            );
        }
    }
    assert_eq!(bytes(&log), unchanged);
}

proptest! {
    #![proptest_config(Config { cases: crate::cases(64), ..Config::default() })]

    #[test]
    fn strategies_keep_conditions_ids_floors_and_are_idempotent(
        seed in any::<u64>(),
        n in 0usize..400,
        damaged in any::<bool>(),
    ) {
        run_strategies(seed, n, if damaged { 0.05 } else { 0.0 });
    }

    #[test]
    fn pipelines_keep_conditions_and_never_repeat_without_progress(
        seed in any::<u64>(),
        n in 0usize..600,
        damaged in any::<bool>(),
    ) {
        run_pipeline(seed, n, if damaged { 0.05 } else { 0.0 });
    }
}

/// `Log::units_estimate` is `estimate_summary_tokens` of `Log::units`, on generated
/// logs that hold earlier summaries (a pipeline ran on them first), for regions
/// between every pair of legal cuts sampled.
#[test]
fn the_units_estimate_is_the_estimate_of_the_units() {
    use cutpoint::compact::{ArgumentPolicy, estimate_summary_tokens};
    let mut checked = 0;
    for seed in 0..24u64 {
        let mut log = generated(seed, 300 + 40 * seed as usize, 0.0);
        let total = log.tracker().total_tokens();
        let _ = Preset::Balanced.pipeline(total / 3).run(&mut log);
        let _ = log.append(Entry::from(Record::user(10)));
        let cuts: Vec<usize> = log.tracker().legal_cuts().collect();
        let mut rng = Rng::new(seed);
        for _ in 0..40 {
            let a = cuts[rng.range(0, cuts.len() as u64 - 1) as usize];
            let b = cuts[rng.range(0, cuts.len() as u64 - 1) as usize];
            let (start, end) = (a.min(b), a.max(b));
            for arguments in [
                ArgumentPolicy::Verbatim,
                ArgumentPolicy::Shorten { max_chars: 12 },
            ] {
                let Ok(plan) = log.plan_region(start..end, arguments) else {
                    continue;
                };
                assert_eq!(
                    log.units_estimate(&plan),
                    estimate_summary_tokens(None, &log.units(&plan)),
                    "seed {seed}, region {start}..{end}"
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 500, "{checked} regions");
}

#[test]
fn long_sessions_compact_within_budget() {
    for seed in 0..4 {
        let mut log = generated(seed, 20_000, 0.0);
        let total = log.tracker().total_tokens();
        for preset in [Preset::Balanced, Preset::Aggressive] {
            let mut l = log.clone();
            let report = preset.pipeline(total / 5).run(&mut l);
            assert!(report.met_budget(), "{preset}: {:?}", report.steps);
            l.assert_invariants();
        }
        run_strategies(seed, 3_000, 0.0);
        let _ = Preset::Gentle.pipeline(total / 2).run(&mut log);
        log.assert_invariants();
    }
}

/// A small log where each strategy's outcome is known exactly.
fn small() -> Log {
    let call = |id: &str, tool: &str| {
        Entry::new(
            Record::tool_use(id, 20).bound_to_previous(),
            Payload::Call {
                name: Some(tool.into()),
                arguments: Some(format!(r#"{{"command":"{tool} {id}"}}"#)),
            },
        )
    };
    let result = |id: &str, tokens: u64| {
        Entry::new(
            Record::tool_result(id, tokens),
            Payload::Result {
                status: Some(ResultStatus::Ok),
                content: Some(format!("{id} output\nmore")),
            },
        )
    };
    let thinking = |tokens: u64| {
        Entry::new(
            Record::assistant(tokens),
            Payload::Reasoning { signed: true },
        )
    };
    Log::from_entries([
        Entry::from(Record::user(1_000)),   // 0: task (turn 1)
        thinking(300),                      // 1
        call("a", "bash"),                  // 2
        result("a", 4_000),                 // 3
        Entry::from(Record::assistant(50)), // 4
        call("b", "grep"),                  // 5
        result("b", 3_000),                 // 6
        Entry::from(Record::user(80)),      // 7: turn 2
        thinking(200),                      // 8
        call("c", "bash"),                  // 9
        result("c", 2_000),                 // 10
        Entry::from(Record::user(60)),      // 11: turn 3 (current)
        thinking(100),                      // 12
        call("d", "bash"),                  // 13
        result("d", 1_000),                 // 14
    ])
    .expect("a valid log")
}

#[test]
fn clear_keeps_the_last_tool_uses_and_excluded_tools() {
    let mut log = small();
    let report = Clear::default()
        .keep_tool_uses(1)
        .exclude_tools(["grep"])
        .clear_inputs(ClearInputs::All)
        .run(&mut log, &Goal::default())
        .unwrap();
    assert_eq!((report.cleared_results, report.cleared_inputs), (2, 2));
    assert_eq!(
        report.edits,
        [
            Edit::ClearedInput { at: 2 },
            Edit::ClearedResult { at: 3 },
            Edit::ClearedInput { at: 9 },
            Edit::ClearedResult { at: 10 },
        ]
    );
    assert_eq!(
        report
            .left_alone
            .count(cutpoint::compact::strategy::Skip::ExcludedTool),
        1
    );
    let e = log.entries();
    assert_eq!(e[6].record.tokens(), 3_000, "grep is excluded");
    assert_eq!(e[14].record.tokens(), 1_000, "the last tool use is kept");
    assert!(
        matches!(&e[3].payload, Payload::Result { content: Some(c), .. } if c == cutpoint::compact::strategy::CLEARED_RESULT_TEXT)
    );
    assert!(matches!(&e[2].payload, Payload::Call { arguments: Some(a), .. } if a == "{}"));
    // A cleared result still answers its call.
    assert!(check(&log).is_clean());
    assert_eq!(
        report.tokens_before - report.tokens_after,
        4_000 + 2_000 - 2 * 10 + 2 * (20 - 12)
    );
}

#[test]
fn clear_at_least_is_all_or_nothing() {
    let mut log = small();
    let before = bytes(&log);
    let none = Clear::default()
        .keep_tool_uses(1)
        .clear_at_least(100_000)
        .run(&mut log, &Goal::default())
        .unwrap_err();
    assert!(matches!(
        none.reason,
        Blocked::BelowClearAtLeast {
            at_least: 100_000,
            available: 8_970
        }
    ));
    assert_eq!(bytes(&log), before, "byte-identical");
    // With a target it clears oldest first, but at least `clear_at_least`.
    let total = log.tracker().total_tokens();
    let report = Clear::default()
        .keep_tool_uses(0)
        .clear_at_least(5_000)
        .run(&mut log, &Goal::default().target(total - 1))
        .unwrap();
    assert_eq!(
        report.cleared_results, 2,
        "4,000 is not 5,000: the next goes too"
    );
}

#[test]
fn clear_thinking_never_touches_the_current_turn() {
    let mut log = small();
    let report = ClearThinking::default()
        .run(&mut log, &Goal::default())
        .unwrap();
    assert_eq!(
        report.edits,
        [
            Edit::ClearedThinking { at: 1 },
            Edit::ClearedThinking { at: 8 }
        ]
    );
    assert_eq!(
        log.entries()[12].record.tokens(),
        100,
        "the current turn's thinking"
    );
    assert_eq!(log.entries()[1].record.tokens(), 0);
    assert_eq!(
        report
            .left_alone
            .count(cutpoint::compact::strategy::Skip::CurrentTurn),
        1
    );
    let again = ClearThinking::default()
        .run(&mut log, &Goal::default())
        .unwrap_err();
    assert_eq!(again.reason, Blocked::NothingEligible);
    // Keeping two turns keeps turn 2's thinking too.
    let mut log = small();
    let report = ClearThinking::default()
        .keep_turns(2)
        .run(&mut log, &Goal::default())
        .unwrap();
    assert_eq!(report.edits, [Edit::ClearedThinking { at: 1 }]);
}

#[test]
fn digest_keeps_ids_arguments_status_and_first_lines() {
    let mut log = small();
    let report = Digest::default()
        .run(
            &mut log,
            &Goal::within(Floors::none().keep_head(1).min_turns(1)),
        )
        .unwrap();
    // Groups 1..4 (thinking + a), 4..7 (b) and 8..11 (c); turn 3 is the floor. Group
    // 1..4 holds only assistant records, calls and results.
    assert_eq!(
        report.edits,
        [
            Edit::Replaced { start: 1, end: 4 },
            Edit::Replaced { start: 4, end: 7 },
            Edit::Replaced { start: 8, end: 11 },
        ]
    );
    let RecordKind::Summary(ids) = log.entries()[1].record.kind() else {
        panic!("a digest at 1")
    };
    assert_eq!(ids.len(), 1);
    let Payload::Summary { units, text, .. } = &log.entries()[1].payload else {
        panic!("a digest payload")
    };
    assert_eq!(text, &None);
    assert_eq!(
        units[0],
        Unit {
            call_id: "a".into(),
            tool: Some("bash".into()),
            arguments: Some(r#"{"command":"bash a"}"#.into()),
            status: Some(ResultStatus::Ok),
            first_line: Some("a output".into()),
        }
    );
    assert!(summary_text("", units).contains(r#"- a bash {"command":"bash a"} => a output"#));
    assert_eq!(log.len(), 15 - 2 - 2 - 2);
    // A digest of a digest changes nothing.
    let again = Digest::default()
        .run(
            &mut log,
            &Goal::within(Floors::none().keep_head(1).min_turns(1)),
        )
        .unwrap_err();
    assert!(matches!(
        again.reason,
        Blocked::Floors { .. } | Blocked::NothingEligible
    ));
}

#[test]
fn summarize_calls_the_hook_and_keeps_the_ledger() {
    let mut log = small();
    let mut asked = Vec::new();
    let mut hook = |r: &SummaryRequest<'_>| {
        asked.push(
            r.units
                .iter()
                .map(|u| u.call_id.to_string())
                .collect::<Vec<_>>(),
        );
        Prose::text("The agent ran a, b and c.")
    };
    let report = Summarize::default()
        .run_with(
            &mut log,
            &Goal::within(Floors::none().keep_head(1).min_turns(1)),
            &mut hook,
        )
        .unwrap();
    assert_eq!(asked, [["a", "b", "c"]]);
    assert_eq!(report.edits, [Edit::Replaced { start: 1, end: 11 }]);
    assert_eq!(report.dropped_turns, 1);
    let Payload::Summary { text, units, .. } = &log.entries()[1].payload else {
        panic!()
    };
    assert_eq!(text.as_deref(), Some("The agent ran a, b and c."));
    assert_eq!(units.len(), 3);
}

#[test]
fn summarize_runs_an_async_hook() {
    struct Model;
    impl cutpoint::compact::strategy::AsyncSummarizer for Model {
        async fn summarize(&mut self, r: &SummaryRequest<'_>) -> Prose {
            Prose::text(format!("{} calls", r.units.len()))
        }
    }
    let mut log = small();
    let total = log.tracker().total_tokens();
    let pipeline = Pipeline::new()
        .floors(Floors::none().keep_head(1))
        .stage(Stage::new(
            Strategy::Summarize(Summarize::default()),
            Trigger::TokensAbove(total / 2),
        ));
    let report =
        futures::executor::block_on(pipeline.run_async(&mut log, &mut Progress::new(), &mut Model));
    let Step::Ran(step) = &report.steps[0] else {
        panic!("{:?}", report.steps)
    };
    assert!(step.tokens_after <= total / 2);
    assert!(
        matches!(&log.entries()[1].payload, Payload::Summary { text: Some(t), .. } if t.ends_with("calls"))
    );
}

#[test]
fn slide_drops_whole_turns_into_a_ledger_and_keeps_at_least_n() {
    let mut log = small();
    let report = Slide::default()
        .keep_turns(1)
        .run(&mut log, &Goal::within(Floors::none().keep_head(1)))
        .unwrap();
    // Turn 1's rest and turn 2 go; their calls a, b, c stay in a ledger.
    assert_eq!(report.edits, [Edit::Replaced { start: 1, end: 11 }]);
    assert_eq!(report.dropped_turns, 1);
    assert_eq!(log.turn_count(), 2, "the task and the kept turn");
    let again = Slide::default()
        .keep_turns(1)
        .run(&mut log, &Goal::within(Floors::none().keep_head(1)))
        .unwrap_err();
    assert!(
        matches!(again.reason, Blocked::NotSmaller { .. }),
        "{again}"
    );
    // A target stops at the first turn start that meets it.
    let mut log = small();
    let total = log.tracker().total_tokens();
    let report = Slide::default()
        .keep_turns(1)
        .run(
            &mut log,
            &Goal::within(Floors::none().keep_head(1)).target(total - 7_000),
        )
        .unwrap();
    assert_eq!(report.edits, [Edit::Replaced { start: 1, end: 7 }]);
}

#[test]
fn truncate_names_every_call_it_drops() {
    let mut log = small();
    let total = log.tracker().total_tokens();
    let report = Truncate::default()
        .run(
            &mut log,
            &Goal::within(Floors::none().keep_head(1)).target(total - 5_000),
        )
        .unwrap();
    assert_eq!(report.edits, [Edit::Removed { start: 1, end: 7 }]);
    assert_eq!(report.dropped_calls, [CallId::from("a"), CallId::from("b")]);
    assert_eq!(report.summaries, 0);
    assert!(check(&log).is_clean());
    // Without a pinned head the retained log starts with a user message.
    let mut log = small();
    let report = Truncate::default()
        .run(&mut log, &Goal::default().target(total - 100))
        .unwrap();
    assert_eq!(report.edits, [Edit::Removed { start: 0, end: 7 }]);
    // With no target, or one out of reach, the latest request and what follows stay:
    // never an empty log, never one without the current turn.
    for goal in [Goal::default(), Goal::default().target(1)] {
        let mut log = small();
        let report = Truncate::default().run(&mut log, &goal).unwrap();
        assert_eq!(report.edits, [Edit::Removed { start: 0, end: 11 }]);
        assert_eq!(log.len(), 4);
        assert!(check(&log).is_clean());
    }
    // A log of one turn has nothing truncate may drop.
    let mut log = Log::from_entries(small().entries().iter().take(7).cloned()).unwrap();
    let none = Truncate::default()
        .run(&mut log, &Goal::default())
        .unwrap_err();
    assert_eq!(none.reason, Blocked::NothingEligible);
    assert_eq!(log.len(), 7);
}

#[test]
fn pending_calls_and_floors_are_typed_no_progress() {
    // A call in flight right after the head: no legal cut past it.
    let mut log = Log::from_entries([
        Entry::from(Record::user(100)),
        Entry::from(Record::assistant(10)),
        Entry::from(Record::tool_use("x", 10).bound_to_previous()),
        Entry::from(Record::user(5_000)),
    ])
    .unwrap();
    let none = Summarize::default()
        .run(&mut log, &Goal::within(Floors::none().keep_head(1)))
        .unwrap_err();
    assert_eq!(
        none.reason,
        Blocked::PendingCalls {
            waiting_on: vec!["x".into()]
        }
    );
    let mut log = small();
    let none = Digest::default()
        .run(&mut log, &Goal::within(Floors::none().min_tool_groups(4)))
        .unwrap_err();
    assert_eq!(none.reason, Blocked::Floors { protected_from: 1 });
    let none = Truncate::default()
        .run(&mut log, &Goal::within(Floors::none().min_turns(9)))
        .unwrap_err();
    assert!(
        matches!(
            none.reason,
            Blocked::Floors { .. } | Blocked::NothingEligible
        ),
        "{none}"
    );
}

#[test]
fn a_trigger_that_does_not_fire_runs_nothing_and_targets_stop_early() {
    let log = small();
    let total = log.tracker().total_tokens();
    let pipeline = Pipeline::new()
        .stage(Stage::new(
            Strategy::default_of(Kind::Clear),
            Trigger::TokensAbove(total),
        ))
        .stage(
            Stage::new(
                Strategy::Clear(Clear::default().keep_tool_uses(0)),
                Trigger::All(vec![
                    Trigger::MessagesAbove(3),
                    Trigger::TurnsAbove(2),
                    Trigger::ToolGroupsAbove(3),
                ]),
            )
            .target(Target::Tokens(total - 3_000)),
        );
    let mut l = log.clone();
    let report = pipeline.run(&mut l);
    assert!(matches!(report.steps[0], Step::NotTriggered(Kind::Clear)));
    let Step::Ran(step) = &report.steps[1] else {
        panic!("{:?}", report.steps)
    };
    assert_eq!(step.cleared_results, 1, "the oldest result is enough");
    assert!(step.tokens_after <= total - 3_000);
}

/// The properties above are not vacuous: over many generated logs every strategy
/// makes progress often, and each kind of no-progress answer shows up.
#[test]
fn every_strategy_makes_progress_on_generated_logs() {
    let mut progressed = std::collections::HashMap::new();
    let mut blocked = BTreeSet::new();
    for seed in 0..150u64 {
        let mut rng = Rng::new(seed);
        let base = generated(
            seed,
            50 + (seed as usize * 7) % 400,
            if seed % 3 == 0 { 0.05 } else { 0.0 },
        );
        for strategy in strategies(&mut rng) {
            let mut log = base.clone();
            let g = goal(log.tracker().total_tokens(), &mut rng);
            if let Some(r) = check_step(&mut log, &strategy, &g, false) {
                if !r.edits.is_empty() {
                    *progressed.entry(r.kind).or_insert(0) += 1;
                }
            } else if let Err(none) = strategy.run(&mut log, &g) {
                blocked.insert(none.reason.name());
            }
        }
    }
    for kind in Kind::ALL {
        let n = progressed.get(&kind).copied().unwrap_or(0);
        assert!(n >= 30, "{kind} made progress on only {n} of 150 logs");
    }
    for reason in [
        "floors",
        "nothing-eligible",
        "below-clear-at-least",
        "pending-calls",
    ] {
        assert!(
            blocked.contains(reason),
            "no {reason} answer seen: {blocked:?}"
        );
    }
}
