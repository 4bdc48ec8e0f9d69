//! Records JSONL `compaction` records (a provider's native compaction): read and
//! written back byte for byte, bad values refused with their line, and the plain rule
//! held by every plan, strategy and preset on generated logs with a compaction record
//! in the middle: the live history starts at the latest one, and it and every record
//! before it stay byte-identical and inside no plan.

use cutpoint::Record;
use cutpoint::compact::pipeline::{Preset, Progress};
use cutpoint::compact::strategy::{Floors, Goal, Kind, LedgerOnly, Strategy};
use cutpoint::compact::{
    ApplyError, ArgumentPolicy, Direction, EditError, Entry, Log, NativeCompaction, Payload,
    Rewrite, Window,
};
use cutpoint::format::records::{ReadError, Reader, parse_entry, write_entry};
use cutpoint::testing::synth::Rng;
use proptest::prelude::*;
use proptest::test_runner::Config;

use crate::strategies::generated;

fn line(entry: &Entry) -> String {
    let mut out = Vec::new();
    write_entry(&mut out, entry).expect("writes to memory");
    String::from_utf8(out).expect("JSON is UTF-8")
}

fn bytes(log: &Log) -> Vec<String> {
    log.entries().iter().map(line).collect()
}

fn compaction(provider: NativeCompaction, tokens: u64) -> Entry {
    Entry::new(Record::assistant(tokens), Payload::Compaction(provider))
}

#[test]
fn compaction_records_round_trip() {
    let text = "{\"kind\":\"user\",\"tokens\":10}\n\
                {\"kind\":\"assistant\",\"tokens\":900,\"compaction\":\"anthropic\"}\n\
                {\"kind\":\"assistant\",\"tokens\":5,\"bound\":true}\n\
                {\"kind\":\"assistant\",\"tokens\":700,\"compaction\":\"openai\"}\n";
    let entries: Vec<Entry> = Reader::new(text.as_bytes())
        .entries()
        .map(|r| r.expect("valid").1)
        .collect();
    assert_eq!(entries[1].compaction(), Some(NativeCompaction::Anthropic));
    assert_eq!(entries[3].compaction(), Some(NativeCompaction::OpenAi));
    assert_eq!(entries[0].compaction(), None);
    assert_eq!(entries[2].compaction(), None);
    let written: String = entries.iter().map(line).collect();
    assert_eq!(written, text);
    let log = Log::from_entries(entries).expect("accepted");
    assert_eq!(log.live_from(), 3);
    assert_eq!(log.pinned_head(0), 4);
    assert_eq!(log.pinned_head(9), 4, "at most the log's length");
}

#[test]
fn bad_compaction_records_name_their_line() {
    let text = "{\"kind\":\"user\",\"tokens\":10}\n\n\
                {\"kind\":\"assistant\",\"tokens\":9,\"compaction\":\"gemini\"}\n";
    let err = Reader::new(text.as_bytes())
        .entries()
        .find_map(Result::err)
        .expect("refused");
    assert_eq!(err.line(), 3);
    let message = err.to_string();
    assert!(message.starts_with("line 3: "), "{message}");
    assert!(message.contains("gemini"), "{message}");
    assert!(
        message.contains("anthropic") && message.contains("openai"),
        "{message}"
    );
    for (bad, says) in [
        (
            r#"{"kind":"tool_use","call_id":"a","tokens":1,"compaction":"openai"}"#,
            "only assistant records carry one",
        ),
        (
            r#"{"kind":"assistant","tokens":1,"compaction":"openai","reasoning":"plain"}"#,
            "both `reasoning` and `compaction`",
        ),
        (
            r#"{"kind":"assistant","tokens":1,"compaction":"anthropic","bound":true}"#,
            "cannot be",
        ),
        (
            r#"{"kind":"assistant","tokens":1,"compaction":7}"#,
            "column",
        ),
    ] {
        match parse_entry(bad, 4) {
            Err(e @ ReadError::Invalid { line: 4, .. }) => {
                assert!(e.to_string().contains(says), "{bad}: {e}");
            }
            other => panic!("{bad}: {other:?}"),
        }
    }
}

/// A generated log with a compaction record inserted at `at` (and, when `earlier` is
/// set, another one before it); `None` when the tracker refuses the result.
fn with_compaction(seed: u64, n: usize, at: usize, earlier: Option<usize>) -> Option<Log> {
    let mut entries = generated(seed, n, 0.0).into_entries();
    let at = at.min(entries.len());
    entries.insert(at, compaction(NativeCompaction::Anthropic, 1_500));
    if let Some(e) = earlier.filter(|&e| e < at) {
        entries.insert(e, compaction(NativeCompaction::OpenAi, 800));
    }
    Log::from_entries(entries).ok()
}

/// The plain rule: the latest record that says `compaction`, found by a scan.
fn latest_compaction(log: &Log) -> Option<usize> {
    log.entries()
        .iter()
        .rposition(|e| matches!(e.payload, Payload::Compaction(_)))
}

/// `after` keeps every record of `before` up to and including `c` byte for byte, and
/// its live history still starts at `c`.
fn assert_history_kept(before: &[String], after: &Log, c: usize, what: &str) {
    let now = bytes(after);
    assert!(now.len() > c, "{what}: the compaction record is gone");
    assert_eq!(
        &now[..=c],
        &before[..=c],
        "{what}: changed at or before {c}"
    );
    assert_eq!(latest_compaction(after), Some(c), "{what}");
    assert_eq!(after.live_from(), c, "{what}");
    after.assert_invariants();
}

fn run_all(seed: u64, n: usize, at: usize, earlier: Option<usize>) -> Result<(), TestCaseError> {
    let Some(log) = with_compaction(seed, n, at, earlier) else {
        return Err(TestCaseError::reject("tracker refused"));
    };
    let c = latest_compaction(&log).expect("inserted");
    prop_assert_eq!(log.live_from(), c);
    let before = bytes(&log);
    let total = log.tracker().total_tokens();
    let mut rng = Rng::new(seed ^ 0xc0);
    // Plans under any window never cover the compaction record or anything before it.
    for _ in 0..8 {
        let window = Window::new(rng.range(0, total + 1))
            .keep_head(rng.range(0, 4) as usize)
            .direction(if rng.chance(0.5) {
                Direction::Forward
            } else {
                Direction::WalkBack
            });
        if let Ok(plan) = log.plan(&window) {
            prop_assert!(
                plan.region.is_empty() || plan.region.start > c,
                "plan {:?} covers the compaction at {}",
                plan.region,
                c
            );
            let mut applied = log.clone();
            if applied.apply(&plan, None, 10).is_ok() {
                assert_history_kept(&before, &applied, c, "plan + apply");
            }
        }
    }
    // A region chosen by hand that reaches back to it is refused, the log unchanged.
    let t = log.tracker();
    let start = t.legal_cut_at_or_before(c);
    if let Some(end) = t.legal_cut_at_or_after(c + 1) {
        match log.plan_region(start..end, ArgumentPolicy::Verbatim) {
            Err(ApplyError::Pinned { compaction_at, .. }) => prop_assert_eq!(compaction_at, c),
            other => prop_assert!(false, "{:?}", other),
        }
    }
    let mut edited = log.clone();
    let at_or_before = rng.range(0, c as u64) as usize;
    let refused = edited.rewrite_entries(vec![Rewrite {
        at: at_or_before,
        tokens: 0,
        payload: Payload::None,
    }]);
    prop_assert!(
        matches!(refused, Err(EditError::Pinned { compaction_at, .. }) if compaction_at == c),
        "{:?}",
        refused
    );
    prop_assert_eq!(bytes(&edited), before.clone());
    // Every strategy, defaults, under no floors and random ones, with and without a
    // target.
    for kind in Kind::ALL {
        for floors in [
            Floors::none(),
            Floors::none()
                .keep_head(rng.range(0, 3) as usize)
                .min_turns(rng.range(0, 2) as usize),
        ] {
            let mut goal = Goal::within(floors);
            if rng.chance(0.5) {
                goal = goal.target(rng.range(0, total + 1));
            }
            let mut after = log.clone();
            let _ = Strategy::default_of(kind).run(&mut after, &goal);
            assert_history_kept(&before, &after, c, kind.name());
        }
    }
    // Strategies work after it exactly as on the same log with plain records in its
    // place and the head pinned past it (the plain rule, as an oracle).
    let plain = Log::from_entries(log.entries().iter().map(|e| match e.payload {
        Payload::Compaction(_) => Entry::from(e.record.clone()),
        _ => e.clone(),
    }))
    .expect("same records");
    for kind in Kind::ALL {
        let floors = Floors::none().min_turns(rng.range(0, 2) as usize);
        let mut after = log.clone();
        let ran = Strategy::default_of(kind).run(&mut after, &Goal::within(floors));
        let mut oracle = plain.clone();
        let pinned = floors.keep_head(c + 1);
        let expected = Strategy::default_of(kind).run(&mut oracle, &Goal::within(pinned));
        prop_assert_eq!(ran.is_ok(), expected.is_ok(), "{}", kind.name());
        prop_assert_eq!(
            &bytes(&after)[c + 1..],
            &bytes(&oracle)[c + 1..],
            "{}",
            kind.name()
        );
    }
    // Every preset.
    for preset in Preset::ALL {
        let mut after = log.clone();
        let budget = rng.range(0, total + 1);
        let _ = preset
            .pipeline(budget)
            .run_with(&mut after, &mut Progress::new(), &mut LedgerOnly);
        assert_history_kept(&before, &after, c, preset.name());
    }
    Ok(())
}

proptest! {
    #![proptest_config(Config { cases: crate::cases(48), ..Config::default() })]
    #[test]
    fn plans_strategies_and_presets_keep_the_compaction_and_what_is_before_it(
        seed in any::<u64>(),
        n in 4usize..120,
        at in 0usize..130,
        earlier in proptest::option::of(0usize..130),
    ) {
        run_all(seed, n, at, earlier)?;
    }
}

/// Without a compaction record nothing more is pinned: a plan starts at the log's
/// start.
#[test]
fn without_a_compaction_record_nothing_more_is_pinned() {
    let log = generated(7, 80, 0.0);
    assert_eq!(log.live_from(), 0);
    assert_eq!(log.pinned_head(0), 0);
    assert_eq!(log.pinned_head(3), 3);
    let total = log.tracker().total_tokens();
    let plan = log
        .plan(&Window::new(total / 2).direction(Direction::Forward))
        .expect("a legal cut past half");
    assert_eq!(plan.region.start, 0);
    assert!(!plan.region.is_empty());
}
