//! Liveness: a call whose tool died is closed with the synthesized "aborted" result
//! (the one repair inserts) once it is older than a caller-given age, in records or in
//! the caller's clock; an interim result keeps it alive; the closed log validates and
//! compacts again.

use cutpoint::compact::pipeline::{Pipeline, Stage, Step, Trigger};
use cutpoint::compact::strategy::{Floors, Strategy, Summarize};
use cutpoint::compact::{
    ABORTED_RESULT_TEXT, Age, Entry, Log, Options, Payload, ResultStatus, validate,
};
use cutpoint::policy::Compactor;
use cutpoint::{CallId, Record, RecordKind};

fn log_with_dead_call(after: usize) -> Log {
    let mut log = Log::new();
    log.append(Entry::from(Record::user(1_000))).unwrap();
    log.append(Entry::from(Record::assistant(100))).unwrap();
    log.append(Entry::from(
        Record::tool_use("dead", 20).bound_to_previous(),
    ))
    .unwrap();
    log.append(Entry::from(Record::tool_use("ok", 20).bound_to_previous()))
        .unwrap();
    log.append(Entry::from(Record::tool_result("ok", 500)))
        .unwrap();
    for i in 0..after {
        log.append(Entry::from(Record::user(200 + i as u64)))
            .unwrap();
    }
    log
}

#[test]
fn a_dead_call_is_closed_where_its_answer_belongs() {
    let mut log = log_with_dead_call(3);
    // Five records came after the call.
    assert!(log.stale_calls(&Age::Records(5)).is_empty());
    let stale = log.stale_calls(&Age::Records(4));
    assert_eq!(stale.len(), 1);
    assert_eq!(
        (stale[0].call_id.as_str(), stale[0].at, stale[0].age),
        ("dead", 2, 5)
    );
    // Every cut after the call is illegal while it is pending.
    assert_eq!(log.tracker().legal_cut_at_or_before(log.len()), 1);
    let at = log.abort_calls(&[CallId::from("dead")]).unwrap();
    assert_eq!(at, [5], "after its message and the results that follow it");
    log.assert_invariants();
    let e = &log.entries()[5];
    assert!(matches!(e.record.kind(), RecordKind::ToolResult(id) if id == "dead"));
    assert!(
        matches!(&e.payload, Payload::Result { status: Some(ResultStatus::Aborted), content: Some(c) } if c == ABORTED_RESULT_TEXT)
    );
    assert!(validate(log.entries(), Options::strict()).is_clean());
    assert_eq!(log.tracker().legal_cut_at_or_before(log.len()), log.len());
    // Closing again does nothing.
    assert!(log.abort_calls(&[CallId::from("dead")]).unwrap().is_empty());
}

#[test]
fn a_call_in_the_last_turn_is_closed_by_an_append_and_interim_results_keep_it_alive() {
    let mut log = log_with_dead_call(0);
    let dead = CallId::from("dead");
    assert!(log.note_interim(&dead), "pending");
    assert!(!log.note_interim(&CallId::from("ok")), "answered");
    for _ in 0..3 {
        log.append(Entry::from(Record::tool_result("other", 1)))
            .unwrap();
    }
    // 5 records after the call, but only 3 since its interim result.
    assert!(log.stale_calls(&Age::Records(3)).is_empty());
    assert_eq!(log.stale_calls(&Age::Records(2)).len(), 1);
    // By the caller's clock: heard from at 100, now 250.
    let heard = |id: &CallId| (id == "dead").then_some(100);
    let clock = |now| Age::Clock {
        now,
        max: 120,
        last_heard: &heard,
    };
    assert!(log.stale_calls(&clock(200)).is_empty());
    assert_eq!(log.stale_calls(&clock(250))[0].age, 150);
    let len = log.len();
    assert_eq!(
        log.abort_calls(&[dead]).unwrap(),
        [len],
        "appended at the end"
    );
    log.assert_invariants();
    let report = validate(log.entries(), Options::strict());
    assert_eq!(
        report.count("unanswered-call") + report.count("pending-at-end"),
        0
    );
}

#[test]
fn the_compactor_closes_dead_calls_and_compaction_resumes() {
    let mut log = log_with_dead_call(6);
    let pipeline = Pipeline::new()
        .floors(Floors::none().keep_head(1).min_turns(1))
        .budget(1_500)
        .stage(Stage::new(
            Strategy::Summarize(Summarize::default()),
            Trigger::TokensAbove(1_500),
        ));
    let mut stuck = Compactor::new(pipeline.clone());
    let first = stuck.run(&mut log, None).unwrap();
    assert!(matches!(first.report.steps[0], Step::NoProgress(_)));
    assert!(!first.report.met_budget());
    let again = stuck.run(&mut log, None).unwrap();
    assert!(
        matches!(again.report.steps[0], Step::Stalled(_)),
        "no repeat without progress"
    );
    let mut live = Compactor::new(pipeline).dead_after(Age::Records(4));
    let done = live.run(&mut log, None).unwrap();
    assert_eq!(done.aborted.len(), 1);
    assert!(done.report.met_budget(), "{:?}", done.report.steps);
    log.assert_invariants();
    assert!(validate(log.entries(), Options::strict()).is_clean());
}
