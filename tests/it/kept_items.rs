//! Control items and the tool manifest through compaction (issue 21, items 2 and 3):
//! every strategy and preset, run through `format::edit::run`, and the `--target`
//! route (`format::rewrite::compact`) keep the control items where they were sent
//! (never summarized, dropped, moved or edited), the blocks that loaded a tool, and
//! the latest Responses `configuration_update`, on logs written from the documented
//! shapes. The mechanism underneath, `Payload::Kept` (a wall no region covers and no
//! in-place edit touches), is tested on generated logs against a naive oracle: the
//! kept entries, in order, are the same before and after every step.

use std::collections::BTreeSet;

use cutpoint::compact::pipeline::{Preset, Progress};
use cutpoint::compact::strategy::{
    Clear, ClearThinking, Digest, Floors, Goal, LedgerOnly, Slide, Strategy, Summarize, Truncate,
};
use cutpoint::compact::{
    ApplyError, EditError, Entry, Log, Payload, Rewrite, Window, summary_text,
};
use cutpoint::format::{
    self, Block, ByteEstimate, Format, Role, Rule, TokenCounter, Transcript, check_against,
    check_rules,
};
use cutpoint::stream::decode::{Content, Detail};
use cutpoint::testing::synth::Rng;
use cutpoint::testing::writers::{self as rewrite, RewriteError};
use cutpoint::{Record, RecordKind};
use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::one_path::pipelines;

fn read(text: &str, format: Format) -> Transcript {
    format::read(text, format, &ByteEstimate).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

/// A JSON array of the elements.
fn doc(elements: &[String]) -> String {
    format!("[{}]", elements.join(",\n"))
}

fn big(what: &str, n: usize) -> String {
    format!("{what}: {}", "lorem ipsum dolor sit amet ".repeat(n))
}

/// An Anthropic Messages history from the documented shapes: a `tool_search_tool_result`
/// loading `get_weather`, an ordinary `tool_result` loading `get_forecast` by a
/// `tool_reference`, mid-conversation `system` entries with a `tool_addition` and an
/// `output_config` and a `clear_at`, signed thinking, and large tool results around
/// them. With `walls` false: the same conversation without any of them (the
/// loading results hold plain text, the system entries are gone). With `tight`, each
/// system entry sits between large tool groups (the placement rules then keep them).
fn anthropic(walls: bool, tight: bool) -> String {
    let user = |t: &str| format!(r#"{{"role":"user","content":"{t}"}}"#);
    let think = |n: usize| {
        format!(
            r#"{{"type":"thinking","thinking":"{}","signature":"sig{n}"}}"#,
            big("think", 4)
        )
    };
    let call = |id: &str, name: &str, n: usize| {
        format!(
            r#"{{"role":"assistant","content":[{},{{"type":"tool_use","id":"{id}","name":"{name}","input":{{"path":"src/{id}.rs"}}}}]}}"#,
            think(n)
        )
    };
    let result = |id: &str, n: usize| {
        format!(
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"{id}","content":"{}"}}]}}"#,
            big(id, n)
        )
    };
    let say =
        |t: &str| format!(r#"{{"role":"assistant","content":[{{"type":"text","text":"{t}"}}]}}"#);
    let search = if walls {
        r#"{"role":"assistant","content":[{"type":"server_tool_use","id":"srvtoolu_s","name":"tool_search_tool_regex","input":{"query":"weather"}},{"type":"tool_search_tool_result","tool_use_id":"srvtoolu_s","content":{"type":"tool_search_tool_search_result","tool_references":[{"type":"tool_reference","tool_name":"get_weather"}]}},{"type":"text","text":"found it"}]}"#.to_owned()
    } else {
        say("found it")
    };
    let loaded = if walls {
        r#"{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_f","content":[{"type":"tool_reference","tool_name":"get_forecast"}]}]}"#.to_owned()
    } else {
        result("toolu_f", 1)
    };
    let add = r#"{"role":"system","content":[{"type":"text","text":"You can now file issues."},{"type":"tool_addition","tool_reference":{"type":"tool_reference","tool_name":"create_issue"}}]}"#.to_owned();
    let output =
        r#"{"role":"system","content":[{"type":"output_config","effort":"low"}]}"#.to_owned();
    let clear_at = r#"{"role":"system","content":[{"type":"clear_at","text":"Tool results before this point may be cleared."}]}"#.to_owned();
    let mut m = vec![
        user("fix the build"),
        call("toolu_a", "read_file", 1),
        result("toolu_a", 60),
        say("read it"),
        user("find a weather tool"),
        search,
        user("and the forecast"),
        call("toolu_f", "tool_search", 2),
        loaded,
    ];
    if tight {
        // Each system entry between a large tool group and the next: the placement
        // rules keep the turns on both sides of it.
        m.extend(walls.then(|| add.clone()));
        m.extend([call("toolu_b", "read_file", 3), result("toolu_b", 60)]);
        m.extend([say("read that too"), user("go on")]);
        m.extend(walls.then(|| output.clone()));
        m.extend([call("toolu_c", "bash", 4), result("toolu_c", 60)]);
        m.extend([call("toolu_d", "bash", 5), result("toolu_d", 60)]);
        m.extend(walls.then(|| clear_at.clone()));
        m.extend([say("built"), user("thanks, one more")]);
    } else {
        // Each system entry between short turns.
        m.extend(walls.then(|| add.clone()));
        m.extend([say("I can file issues now"), user("go on")]);
        m.extend([call("toolu_b", "read_file", 3), result("toolu_b", 60)]);
        m.extend([say("read that too"), user("next")]);
        m.extend(walls.then(|| output.clone()));
        m.extend([say("ok"), user("build it")]);
        m.extend([call("toolu_c", "bash", 4), result("toolu_c", 60)]);
        m.extend([call("toolu_d", "bash", 5), result("toolu_d", 60)]);
        m.extend([say("built"), user("thanks")]);
        m.extend(walls.then(|| clear_at.clone()));
        m.extend([say("sure"), user("one more")]);
    }
    m.extend([
        call("toolu_e", "bash", 6),
        result("toolu_e", 30),
        say("done"),
    ]);
    doc(&m)
}

/// [`anthropic`]'s conversation as a request object naming its `container` and a task
/// budget, ending on
/// the turn a code-execution script waits on: a programmatic call (with `walls`; a
/// direct one without) and the message answering it.
fn anthropic_script(walls: bool) -> String {
    let history = anthropic(walls, false);
    let caller = if walls {
        "code_execution_20260120"
    } else {
        "direct"
    };
    let script = [
        r#"{"role":"user","content":"count the rows"}"#.to_owned(),
        format!(
            r#"{{"role":"assistant","content":[{{"type":"server_tool_use","id":"srvtoolu_c","name":"code_execution","input":{{"code":"rows = await query()"}}}},{{"type":"tool_use","id":"toolu_q","name":"query","input":{{}},"caller":{{"type":"{caller}","tool_id":"srvtoolu_c"}}}}]}}"#
        ),
        format!(
            r#"{{"role":"user","content":[{{"type":"tool_result","tool_use_id":"toolu_q","content":"{}"}}]}}"#,
            big("rows", 20)
        ),
    ];
    let messages = format!(
        "{},\n{}]",
        history.trim_end_matches(']'),
        script.join(",\n")
    );
    format!(
        r#"{{"model":"claude-opus-4-7","max_tokens":1024,"container":"container_011","output_config":{{"effort":"high","task_budget":{{"type":"tokens","total":64000}}}},"messages":{messages}}}"#
    )
}

/// An OpenAI Responses input from the documented shapes: an old and a latest
/// `configuration_update`, a `tool_search_call` / `tool_search_output` loading
/// `get_weather`, large function outputs, and (with `trigger`) a `compaction_trigger`
/// as the last input item. With `walls` false: the same without the control items,
/// the search output listing no tool.
fn responses(walls: bool, trigger: bool) -> String {
    let user = |t: &str| {
        format!(
            r#"{{"type":"message","role":"user","content":[{{"type":"input_text","text":"{t}"}}]}}"#
        )
    };
    let say = |t: &str| {
        format!(
            r#"{{"type":"message","role":"assistant","content":[{{"type":"output_text","text":"{t}"}}]}}"#
        )
    };
    let call = |id: &str| {
        format!(
            r#"{{"type":"function_call","call_id":"{id}","name":"bash","arguments":"{{\"cmd\":\"make {id}\"}}"}}"#
        )
    };
    let out = |id: &str, n: usize| {
        format!(
            r#"{{"type":"function_call_output","call_id":"{id}","output":"{}"}}"#,
            big(id, n)
        )
    };
    let tools = if walls {
        r#"[{"type":"function","name":"get_weather","parameters":{}}]"#
    } else {
        "[]"
    };
    let mut m = vec![user("fix the build")];
    if walls {
        m.push(
            r#"{"type":"configuration_update","id":"cu_1","reasoning":{"effort":"low"}}"#.into(),
        );
    }
    m.extend([
        call("call_a"),
        out("call_a", 60),
        r#"{"type":"tool_search_call","call_id":"call_s","execution":"client","arguments":{"query":"weather"},"status":"completed"}"#.into(),
        format!(r#"{{"type":"tool_search_output","call_id":"call_s","execution":"client","tools":{tools}}}"#),
        say("found a tool"),
        user("go on"),
        call("call_b"),
        out("call_b", 60),
    ]);
    if walls {
        m.push(
            r#"{"type":"configuration_update","id":"cu_2","reasoning":{"effort":"high"}}"#.into(),
        );
    }
    m.extend([
        call("call_c"),
        out("call_c", 60),
        say("built"),
        user("one more"),
        call("call_d"),
        out("call_d", 30),
        say("done"),
    ]);
    if walls && trigger {
        m.push(r#"{"type":"compaction_trigger"}"#.into());
    }
    doc(&m)
}

/// The documented logs, each with its wall-free twin: (name, format, log, twin).
fn logs() -> Vec<(&'static str, Format, String, String)> {
    vec![
        (
            "anthropic",
            Format::AnthropicMessages,
            anthropic(true, false),
            anthropic(false, false),
        ),
        (
            "anthropic-tight",
            Format::AnthropicMessages,
            anthropic(true, true),
            anthropic(false, true),
        ),
        (
            "anthropic+script",
            Format::AnthropicMessages,
            anthropic_script(true),
            anthropic_script(false),
        ),
        (
            "responses",
            Format::OpenAiResponses,
            responses(true, false),
            responses(false, false),
        ),
        (
            "responses+trigger",
            Format::OpenAiResponses,
            responses(true, true),
            responses(false, false),
        ),
    ]
}

/// The rules of a list, but preserved thinking's prefix binding (every client-side
/// strategy but keep-thinking-valid edits the prefix and says so: issue 21, item 1,
/// tested in `reasoning_strategies`).
fn names(v: &[format::RuleViolation]) -> BTreeSet<&'static str> {
    v.iter()
        .filter(|v| v.rule != Rule::ThinkingPrefixChanged)
        .map(|v| v.rule.name())
        .collect()
}

/// What a compaction must keep of `before` in `after`: no control item lost, no tool
/// unloaded, the turn a code-execution script waits on sent as it was, no other rule
/// broken that `before` kept.
fn assert_kept(case: &str, before: &Transcript, after: &Transcript) {
    if before.names_container == Some(true) {
        let tail = |t: &Transcript| -> Vec<Vec<u64>> {
            t.messages[t.messages.len() - 2..]
                .iter()
                .map(|m| m.prints.to_vec())
                .collect()
        };
        assert_eq!(tail(after), tail(before), "{case}: the script's turn");
        assert_eq!(after.names_container, Some(true), "{case}: the container");
    }
    // A task budget: carried (what is left after the history the compaction read, at
    // most), or the history only appended to.
    if let Some(budget) = before.task_budget {
        let left = after.task_budget.and_then(|b| b.remaining);
        let most = budget.remaining_after(before.live_tokens());
        assert!(
            left.is_none() || left <= most,
            "{case}: remaining {left:?}, at most {most:?}"
        );
    }
    let found = check_against(before, after);
    assert!(
        !found
            .iter()
            .any(|v| matches!(v.rule, Rule::ControlItemLost | Rule::ToolUnloaded)),
        "{case}: {found:#?}"
    );
    let was = names(&check_rules(before));
    let now: BTreeSet<_> = names(&found).difference(&was).copied().collect();
    assert!(now.is_empty(), "{case}: new findings {now:?}: {found:#?}");
    assert_eq!(after.loaded_tools(), before.loaded_tools(), "{case}");
    // Where the control items were: each control block of `before` is in `after`,
    // byte for byte, in the same order, with the same blocks around it in its message.
    let controls = |t: &Transcript| -> Vec<Vec<u64>> {
        t.messages
            .iter()
            .filter(|m| m.blocks.iter().any(|(b, _)| matches!(b, Block::Control(_))))
            .map(|m| m.prints.to_vec())
            .collect()
    };
    assert_eq!(
        controls(after),
        controls(before),
        "{case}: control messages"
    );
    // A retained log that started with a user message still does (Anthropic rule 6):
    // a kept record at the front of what went keeps the user turn before it.
    let first = |t: &Transcript| t.messages.get(t.live_from()).map(|m| m.role);
    if first(before) == Some(Role::User) {
        assert_eq!(
            first(after),
            Some(Role::User),
            "{case}: the log starts with"
        );
    }
}

fn tokens(text: &str, format: Format) -> u64 {
    read(text, format).live_tokens()
}

/// One run of `pipeline` on `text` (`one_path`'s): the output, and whether it met the
/// budget; `None` when keep-thinking-valid refuses it (where `one_path::run`'s oracle
/// allows).
fn run(
    text: &str,
    format: Format,
    pipeline: &cutpoint::compact::pipeline::Pipeline,
) -> Option<(String, bool)> {
    crate::one_path::run(format.name(), text, format, pipeline).map(|(out, met, _)| (out, met))
}

#[test]
fn the_documented_logs_hold_their_walls() {
    for (name, format, text, twin) in logs() {
        let t = read(&text, format);
        assert!(check_rules(&t).is_empty(), "{name}: {:#?}", check_rules(&t));
        assert!(!t.loaded_tools().is_empty(), "{name}");
        assert!(read(&twin, format).loaded_tools().is_empty(), "{name}");
        let built = cutpoint::testing::writers::log_of(&t).unwrap();
        let kept = built.log.entries().iter().filter(|e| e.kept()).count();
        let expected = match name {
            // get_weather, get_forecast, tool_addition, output_config, clear_at.
            "anthropic" | "anthropic-tight" => 5,
            // ... and the script's turn: the code execution, its call, the answer.
            "anthropic+script" => 8,
            // two configuration_updates, the search output.
            "responses" => 3,
            _ => 4,
        };
        assert_eq!(kept, expected, "{name}");
    }
}

/// Every strategy and preset at a few budgets: nothing the rules name is lost, and
/// the budget is met wherever the same pipeline meets it on the wall-free twin with
/// room for what the walls keep (each kept record with the records bound to it, up to
/// the legal cuts around it) and twice the size of an empty summary message per
/// stretch between them: a region split around `w` walls is up to `w + 1` summaries,
/// each written somewhat larger than the strategies estimate it (the summary's
/// envelope in the provider's shape), where the twin writes one. Not on the tight log, where the placement
/// rules keep the large tool groups beside each system entry.
#[test]
fn every_strategy_and_preset_keeps_control_items_and_loaded_tools() {
    let mut met = 0;
    let mut runs = 0;
    let mut refused = 0;
    for (name, format, text, twin) in logs() {
        let before = read(&text, format);
        let total = tokens(&text, format);
        // What the walls keep: every record between the legal cuts around a kept one
        // (its pair, the turns a system entry is bound to), and how many such units.
        let built = cutpoint::testing::writers::log_of(&before).unwrap();
        let (log, t) = (&built.log, built.log.tracker());
        let mut units: Vec<(usize, usize)> = Vec::new();
        for &p in log.kept_positions() {
            let (a, b) = (
                t.legal_cut_at_or_before(p),
                t.legal_cut_at_or_after(p + 1).unwrap_or(log.len()),
            );
            match units.last_mut() {
                Some(last) if last.1 >= a => last.1 = last.1.max(b),
                _ => units.push((a, b)),
            }
        }
        let weight: u64 = units
            .iter()
            .map(|&(a, b)| t.tokens_before(b).unwrap() - t.tokens_before(a).unwrap())
            .sum();
        let walls = units.len() as u64;
        let envelope =
            ByteEstimate.count(&format::summary_message(format, &summary_text("", &[]), 0));
        for percent in [85, 60, 40, 25] {
            let budget = total * percent / 100;
            for (p, pipeline) in pipelines(budget) {
                let case = format!("{name} {p} at {percent}%");
                let Some((out, ok)) = run(&text, format, &pipeline) else {
                    refused += 1;
                    continue;
                };
                assert_kept(&case, &before, &read(&out, format));
                runs += 1;
                met += usize::from(ok);
                let twin_budget = budget.saturating_sub(weight + (walls + 1) * 2 * envelope);
                let twin_pipeline = pipelines(twin_budget)
                    .into_iter()
                    .find(|(q, _)| *q == p)
                    .unwrap()
                    .1;
                let twin_ok = run(&twin, format, &twin_pipeline).is_some_and(|(_, ok)| ok);
                // `summarize` chooses its region by its estimate of the summaries it
                // writes, which their written envelope exceeds by a little in each
                // stretch: within 5% of the budget where the twin meets its own.
                let slack = if p == "summarize" { budget / 20 } else { 0 };
                let size = tokens(&out, format);
                assert!(
                    ok || !twin_ok || size <= budget + slack,
                    "{case}: the twin meets {twin_budget}, this misses {budget} ({size} tokens)"
                );
                // A second compaction, on the output, keeps them too.
                if let Some((again, _)) = run(&out, format, &pipeline) {
                    assert_kept(&format!("{case}, again"), &before, &read(&again, format));
                }
            }
        }
    }
    eprintln!("kept_items: {met} of {runs} runs met their budget, {refused} refused");
}

/// The `--target` route: one summary, planned by `Log::plan`, never over a wall.
#[test]
fn the_target_route_keeps_control_items_and_loaded_tools() {
    let mut written = 0;
    for (name, format, text, _) in logs() {
        let t = read(&text, format);
        let total = t.live_tokens();
        for percent in [10, 30, 50, 70, 90] {
            for keep_head in [0, 1] {
                let window = Window::new(total * percent / 100).lookback(total);
                let case = format!("{name} --target {percent}% head {keep_head}");
                match rewrite::compact(&t, &text, &window, keep_head, "Summary.") {
                    Ok(Some(done)) => {
                        assert_kept(&case, &t, &read(&done.text, format));
                        written += 1;
                    }
                    Ok(None) | Err(RewriteError::Deferred(_) | RewriteError::Plan(_)) => {}
                    Err(e) => panic!("{case}: {e}"),
                }
            }
        }
    }
    assert!(written >= 10, "{written} rewrites written");
}

// ---- the mechanism, on generated logs --------------------------------------------------

/// A generated log with about one record in `1 / share` kept (any kind).
fn with_walls(seed: u64, n: usize, share: f64) -> Log {
    let mut rng = Rng::new(seed ^ 0x6a11);
    let base = crate::strategies::generated(seed, n, 0.0);
    Log::from_entries(base.into_entries().into_iter().map(|e| {
        let wall = !matches!(e.record.kind(), RecordKind::Summary(_)) && rng.chance(share);
        if wall {
            Entry::new(e.record, Payload::Kept)
        } else {
            e
        }
    }))
    .unwrap()
}

/// The naive oracle: the kept entries, in order.
fn walls(log: &Log) -> Vec<Entry> {
    log.entries().iter().filter(|e| e.kept()).cloned().collect()
}

fn every_strategy() -> Vec<Strategy> {
    vec![
        Strategy::Clear(Clear::default().keep_tool_uses(0)),
        Strategy::ClearThinking(ClearThinking::default()),
        Strategy::Digest(Digest::default()),
        Strategy::Summarize(Summarize::default()),
        Strategy::Slide(Slide::default()),
        Strategy::Truncate(Truncate::default()),
    ]
}

proptest! {
    #![proptest_config(Config::with_cases(crate::cases(48)))]

    #[test]
    fn no_step_covers_moves_or_edits_a_kept_record(
        seed in any::<u64>(),
        n in 10usize..160,
        share in 0.0f64..0.2,
        percent in 0u64..100,
        keep_head in 0usize..3,
    ) {
        let base = with_walls(seed, n, share);
        let oracle = walls(&base);
        let total = base.tracker().total_tokens();
        let goal = Goal::within(Floors::none().keep_head(keep_head)).target(total * percent / 100);
        for strategy in every_strategy() {
            let mut log = base.clone();
            let ran = strategy.run(&mut log, &goal).is_ok();
            log.assert_invariants();
            prop_assert_eq!(&walls(&log), &oracle, "{}", strategy.kind());
            // With no pinned head, what `truncate` and `slide` leave starts with a user
            // message (a summary is written as one) when the log did, walls at the
            // front or not.
            let user_first = |l: &Log| l.entries().front().is_none_or(|e| matches!(e.record.kind(), RecordKind::User | RecordKind::Summary(_)));
            if ran && keep_head == 0 && matches!(strategy, Strategy::Truncate(_) | Strategy::Slide(_)) && user_first(&base) {
                prop_assert!(user_first(&log), "{}: starts with {:?}", strategy.kind(), log.entries().front().map(|e| e.record.kind()));
            }
            // Kept records are where the log says they are.
            let at: Vec<usize> = log.entries().iter().enumerate().filter(|(_, e)| e.kept()).map(|(i, _)| i).collect();
            prop_assert_eq!(log.kept_positions(), &at[..]);
        }
        for preset in Preset::ALL {
            let mut log = base.clone();
            let _ = preset.pipeline(total * percent / 100).run_with(&mut log, &mut Progress::new(), &mut LedgerOnly);
            log.assert_invariants();
            prop_assert_eq!(&walls(&log), &oracle, "{}", preset);
        }
        // `around_kept` against the naive split: the maximal runs of consecutive
        // spans between legal cuts that hold no kept record.
        let t = base.tracker();
        let (a, b) = (t.legal_cut_at_or_after(0).unwrap_or(0), t.legal_cut_at_or_before(base.len()));
        let cuts: Vec<usize> = (a..=b.max(a)).filter(|&c| t.is_legal_cut(c)).collect();
        let mut naive = Vec::new();
        let mut run: Option<usize> = None;
        for w in cuts.windows(2) {
            if base.entries().range(w[0]..w[1]).all(|e| !e.kept()) {
                run.get_or_insert(w[0]);
            } else if let Some(s) = run.take() {
                naive.push(s..w[0]);
            }
        }
        if let (Some(s), Some(&last)) = (run, cuts.last()) {
            naive.push(s..last);
        }
        prop_assert_eq!(base.around_kept(a, b.max(a)), naive);
    }
}

proptest! {
    #![proptest_config(Config::with_cases(crate::cases(64)))]

    /// The trigger policy's plan against the naive oracle: `decide` sees no kept
    /// records, so `plan` narrows its cut to the wall-free stretch of most tokens (the
    /// oldest of equal ones), found here by scanning every legal cut, or waits when
    /// there is none; what it plans applies, and the walls stay.
    #[test]
    fn the_trigger_policy_plans_around_kept_records(
        seed in any::<u64>(),
        n in 10usize..160,
        share in 0.0f64..0.3,
        threshold in 0.05f64..0.9,
        keep in 0.0f64..0.5,
        head in 0usize..3,
    ) {
        use cutpoint::policy::{Decision, Planned, TriggerPolicy, WaitReason};
        let base = with_walls(seed, n, share);
        let total = base.tracker().total_tokens().max(1);
        let policy = TriggerPolicy::new(total).threshold(threshold).unwrap().keep(keep).unwrap().pinned_head(head);
        let t = base.tracker();
        let decided = policy.decide(t);
        let planned = policy.plan(&base);
        match (decided, planned) {
            (Decision::Nothing, Planned::Nothing) => {}
            (Decision::Wait(a), Planned::Wait(b)) => prop_assert_eq!(a, b),
            (Decision::CompactNow(d), p) => {
                let tokens = |r: &std::ops::Range<usize>| t.tokens_before(r.end).unwrap() - t.tokens_before(r.start).unwrap();
                let cuts: Vec<usize> = (d.head..=d.cut).filter(|&c| t.is_legal_cut(c)).collect();
                let mut best: Option<std::ops::Range<usize>> = None;
                for (i, &a) in cuts.iter().enumerate() {
                    for &b in &cuts[i + 1..] {
                        if base.entries().range(a..b).any(|e| e.kept()) {
                            break;
                        }
                        let r = a..b;
                        if best.as_ref().is_none_or(|x| tokens(&r) > tokens(x)) {
                            best = Some(r);
                        }
                    }
                }
                match (best.filter(|r| tokens(r) > 0 || base.kept_in(d.head..d.cut).is_none()), p) {
                    (Some(want), Planned::CompactNow { cut, plan }) => {
                        prop_assert_eq!(cut.head..cut.cut, want.clone());
                        prop_assert_eq!(plan.region.clone(), want.clone());
                        prop_assert_eq!(cut.compacted_tokens, tokens(&want));
                        prop_assert!(base.kept_in(want).is_none());
                        let mut log = base.clone();
                        log.apply(&plan, Some("summary".into()), 10).unwrap();
                        log.assert_invariants();
                        prop_assert_eq!(walls(&log), walls(&base));
                    }
                    (None, Planned::Wait(w)) => {
                        prop_assert_eq!(w.reason, WaitReason::Kept { at: base.kept_in(d.head..d.cut).unwrap() });
                    }
                    (want, got) => prop_assert!(false, "want {:?}, planned {:?}", want, got),
                }
            }
            (d, p) => prop_assert!(false, "decide says {:?}, plan says {:?}", d, p),
        }
    }
}

#[test]
fn the_log_refuses_to_cover_or_edit_a_kept_record() {
    let mut log = Log::from_entries([
        Entry::from(Record::user(10)),
        Entry::from(Record::assistant(50)),
        Entry::new(Record::user(5), Payload::Kept),
        Entry::from(Record::assistant(50)),
        Entry::from(Record::user(10)),
    ])
    .unwrap();
    assert_eq!(log.kept_in(0..5), Some(2));
    assert_eq!(log.kept_in(3..5), None);
    assert_eq!(log.around_kept(0, 5), [0..2, 3..5]);
    assert!(matches!(
        log.plan_region(1..4, Default::default()),
        Err(ApplyError::Kept { at: 2, .. })
    ));
    assert!(matches!(
        log.rewrite_entries(vec![Rewrite {
            at: 2,
            tokens: 1,
            payload: Payload::None
        }]),
        Err(EditError::Kept { at: 2 })
    ));
    // A region before it moves it back, and the log still knows where it is.
    let plan = log.plan_region(0..2, Default::default()).unwrap();
    log.apply(&plan, None, 3).unwrap();
    assert_eq!(log.kept_positions(), [1]);
    log.assert_invariants();
    // `Log::plan` narrows a window over it to the largest stretch beside it.
    let plan = log.plan(&Window::new(60).lookback(100)).unwrap();
    assert!(
        log.kept_in(plan.region.clone()).is_none(),
        "{:?}",
        plan.region
    );
}

// ---- The live decoders keep what the file readers keep -------------------------------

/// The records of a recorded response fed live into a [`Log`], with the contents
/// that closed them (one per record, in order). A recording that ends in a provider
/// error (a rate limit, a token limit) gives what it decoded before the error.
fn live_log(bytes: &[u8], format: cutpoint::stream::decode::StreamFormat) -> (Log, Vec<Content>) {
    use cutpoint::stream::decode::Feed;
    let (items, _provider_error) = crate::streams::decode_split(format, bytes, &[]);
    let mut log = Log::new();
    let mut closed = Vec::new();
    for item in &items {
        log.feed(item).unwrap();
        if let Detail::Closed(c) = &item.detail {
            closed.push(c.clone());
        }
    }
    (log, closed)
}

/// The same response as a file the agent sends back next: a user question, then the
/// response's blocks (Anthropic) or output items (Responses), as the provider's own
/// shapes give them.
fn as_file(format: Format, bytes: &[u8], closed: &[Content]) -> String {
    match format {
        Format::AnthropicMessages => {
            let blocks: Vec<serde_json::Value> = closed
                .iter()
                .map(|c| match c {
                    Content::Text { text } => serde_json::json!({"type": "text", "text": text}),
                    Content::Call {
                        id,
                        name,
                        arguments,
                        server,
                        ..
                    } => serde_json::json!({
                        "type": if *server { "server_tool_use" } else { "tool_use" },
                        "id": id.as_str(),
                        "name": name,
                        "input": serde_json::from_str::<serde_json::Value>(arguments).unwrap(),
                    }),
                    Content::ServerResult { id, kind, content } => serde_json::json!({
                        "type": kind,
                        "tool_use_id": id.as_str(),
                        "content": serde_json::from_str::<serde_json::Value>(content).unwrap(),
                    }),
                    other => panic!("not in this recording: {other:?}"),
                })
                .collect();
            serde_json::json!([
                {"role": "user", "content": "What is the USD to EUR rate?"},
                {"role": "assistant", "content": blocks},
            ])
            .to_string()
        }
        _ => {
            // Each output item as `response.output_item.done` gives it whole.
            let mut items = vec![serde_json::json!(
                {"role": "user", "content": "What is the USD to EUR rate?"}
            )];
            for line in String::from_utf8_lossy(bytes).lines() {
                let Some(data) = line.strip_prefix("data: ") else {
                    continue;
                };
                let Ok(v) = serde_json::from_str::<serde_json::Value>(data) else {
                    continue;
                };
                if v["type"] == "response.output_item.done" {
                    items.push(v["item"].clone());
                }
            }
            serde_json::Value::Array(items).to_string()
        }
    }
}

#[test]
fn the_live_decoders_keep_the_results_that_loaded_a_tool_as_the_file_readers_do() {
    let recordings = crate::streams::recordings();
    let mut loading = 0;
    for (name, stream, bytes) in &recordings {
        let (log, closed) = live_log(bytes, *stream);
        let kept: Vec<usize> = log.kept_positions().to_vec();
        // The oracle: a result holding a tool reference, or a tool search's output
        // naming tools.
        let loads = |c: &Content| match c {
            Content::ServerResult { content, .. } => content.contains(r#""type":"tool_reference""#),
            Content::Other { kind, .. } => kind == "tool_search_output",
            _ => false,
        };
        let want: Vec<usize> = (0..closed.len()).filter(|&i| loads(&closed[i])).collect();
        assert_eq!(kept, want, "{name}: kept entries");
        if want.is_empty() {
            continue;
        }
        loading += 1;
        // The file reader, on the same response sent back, keeps the same blocks.
        let format = match name.split("__").next() {
            Some("anthropic-sse") => Format::AnthropicMessages,
            _ => Format::OpenAiResponses,
        };
        let text = as_file(format, bytes, &closed);
        let t = read(&text, format);
        let file = cutpoint::testing::writers::log_of(&t).unwrap();
        let file_kept: Vec<usize> = file.log.kept_positions().iter().map(|&k| k - 1).collect();
        assert_eq!(
            file_kept, want,
            "{name}: the file reader's kept entries\n{text}"
        );
        // And no compaction covers it: a region over it is refused.
        let at = want[0];
        let end = (at + 1..=log.len())
            .find(|&e| log.tracker().is_legal_cut(e))
            .unwrap_or(log.len());
        assert!(
            matches!(
                log.plan_region(0..end, Default::default()),
                Err(ApplyError::Kept { .. }) | Err(ApplyError::Region(_))
            ),
            "{name}: a region over the kept entry {at} is planned"
        );
    }
    // The two real recordings that load a tool: Anthropic's and OpenAI Responses' tool
    // search (pydantic-ai's cassettes).
    assert_eq!(loading, 2);
}
