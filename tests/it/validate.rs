//! The validator: each violation kind on a log built to have exactly that defect, and
//! nothing on clean logs.

use cutpoint::compact::{CallState, Options, Violation, validate, validate_records};
use cutpoint::compact::{Entry, Payload, Unit};
use cutpoint::testing::synth::Session;
use cutpoint::{CallId, Record};

fn u(id: &str) -> Record {
    Record::tool_use(id, 10)
}
fn r(id: &str) -> Record {
    Record::tool_result(id, 20)
}
fn a() -> Record {
    Record::assistant(5)
}
fn user() -> Record {
    Record::user(5)
}
fn summary(ids: &[&str]) -> Record {
    Record::summary(ids.iter().map(|&i| CallId::from(i)), 30)
}

/// The clean log every defect is made from: two turns, parallel calls, a summary.
fn clean() -> Vec<Record> {
    vec![
        user(),
        summary(&["s1", "s2"]),
        a(),
        u("a"),
        u("b"),
        r("b"),
        r("a"),
        a(),
        u("c"),
        r("c"),
        user(),
        a(),
    ]
}

/// Exactly one violation, and it is the one wanted.
fn only(log: &[Record], want: Violation) {
    let report = validate_records(log, Options::strict());
    assert_eq!(report.violations, std::slice::from_ref(&want), "{log:?}");
    assert_eq!(report.count(want.kind()), 1);
    assert!(!report.is_clean());
}

#[test]
fn clean_logs_report_nothing() {
    let report = validate_records(&clean(), Options::strict());
    assert!(report.is_clean(), "{:?}", report.violations);
    for seed in 0..20 {
        // Cut at a round boundary: a generated session is clean there.
        let mut log = Session::records(seed, 3_000);
        while !matches!(log.last(), Some(rec) if rec.kind().name() == "assistant" && !rec.is_bound_to_previous())
        {
            log.pop();
        }
        let report = validate_records(&log, Options::strict());
        assert!(
            report.is_clean(),
            "seed {seed}: {:?}",
            report.violations.first()
        );
    }
}

#[test]
fn unanswered_call_while_the_log_moved_on() {
    let mut log = clean();
    log.remove(9); // c's result; the user and assistant after it move on
    only(
        &log,
        Violation::UnansweredCall {
            call_id: "c".into(),
            at: 8,
            moved_on_at: 10,
        },
    );
}

#[test]
fn pending_at_the_end_is_told_apart_and_can_be_allowed() {
    let mut log = clean();
    log.push(u("d"));
    only(
        &log,
        Violation::PendingAtEnd {
            call_id: "d".into(),
            at: 12,
        },
    );
    assert!(validate_records(&log, Options::allowing_pending()).is_clean());
    // A user record after it does not start a new assistant turn: still pending.
    log.push(user());
    assert!(validate_records(&log, Options::allowing_pending()).is_clean());
}

#[test]
fn orphan_result() {
    let mut log = clean();
    log.insert(10, r("ghost"));
    only(
        &log,
        Violation::OrphanResult {
            call_id: "ghost".into(),
            at: 10,
        },
    );
}

#[test]
fn duplicate_result() {
    let mut log = clean();
    log.insert(7, r("a"));
    only(
        &log,
        Violation::DuplicateResult {
            call_id: "a".into(),
            at: 7,
            first_at: 6,
            by_summary: false,
        },
    );
}

#[test]
fn result_for_a_call_a_summary_covers_is_a_duplicate() {
    let mut log = clean();
    log.insert(2, r("s1"));
    only(
        &log,
        Violation::DuplicateResult {
            call_id: "s1".into(),
            at: 2,
            first_at: 1,
            by_summary: true,
        },
    );
}

#[test]
fn duplicate_call_raw_and_summarized() {
    let mut log = clean();
    // The straddling pair of the seed's third signature: summarized and kept raw.
    log[8] = u("s2");
    log[9] = r("s2");
    let report = validate_records(&log, Options::strict());
    assert_eq!(
        report.violations,
        [
            Violation::DuplicateCall {
                call_id: "s2".into(),
                at: 8,
                first_at: 1
            },
            Violation::DuplicateResult {
                call_id: "s2".into(),
                at: 9,
                first_at: 1,
                by_summary: true
            },
        ]
    );
    let twice = report
        .structure
        .calls
        .iter()
        .find(|(id, _, _)| *id == "s2")
        .map(|c| c.1);
    assert_eq!(twice, Some(2), "the structure counts the call twice");
}

#[test]
fn result_before_use() {
    let mut log = clean();
    log.swap(8, 9); // c's result, then c
    only(
        &log,
        Violation::ResultBeforeUse {
            call_id: "c".into(),
            at: 8,
            use_at: 9,
        },
    );
}

#[test]
fn result_after_the_next_assistant_turn() {
    let mut log = clean();
    let result = log.remove(6); // a's result moves past the assistant turn at 7
    log.insert(7, result);
    only(
        &log,
        Violation::ResultAfterNextTurn {
            call_id: "a".into(),
            at: 7,
            use_at: 3,
            turn_at: 6,
        },
    );
}

fn unit(id: &str, arguments: Option<&str>) -> Unit {
    let mut unit = Unit::bare(id.into());
    unit.arguments = arguments.map(str::to_owned);
    unit
}

#[test]
fn argument_loss_is_a_summary_unit_without_arguments() {
    let entries = |second: Option<&str>| -> Vec<Entry> {
        clean()
            .into_iter()
            .enumerate()
            .map(|(i, rec)| {
                if i == 1 {
                    Entry::new(
                        rec,
                        Payload::summary(
                            None,
                            vec![
                                unit("s1", Some(r#"{"command":"pytest -x"}"#)),
                                unit("s2", second),
                            ],
                        ),
                    )
                } else {
                    Entry::from(rec)
                }
            })
            .collect()
    };
    let good = entries(Some("null"));
    assert!(validate(&good, Options::strict()).is_clean());
    let bad = entries(None);
    let report = validate(&bad, Options::strict());
    assert_eq!(
        report.violations,
        [Violation::ArgumentLoss {
            call_id: "s2".into(),
            at: 1
        }]
    );
    // Records alone cannot see arguments: nothing to report there.
    assert!(validate_records(&clean(), Options::strict()).is_clean());
}

#[test]
fn structure_lists_each_call_once_with_its_state() {
    let mut log = clean();
    log.push(u("z"));
    let s = validate_records(&log, Options::allowing_pending()).structure;
    let ids: Vec<(&str, u32, CallState)> = s
        .calls
        .iter()
        .map(|(id, n, st)| (id.as_str(), *n, *st))
        .collect();
    assert_eq!(
        ids,
        [
            ("a", 1, CallState::Answered),
            ("b", 1, CallState::Answered),
            ("c", 1, CallState::Answered),
            ("s1", 1, CallState::Answered),
            ("s2", 1, CallState::Answered),
            ("z", 1, CallState::Unanswered),
        ]
    );
    let mut other = log.clone();
    other.pop();
    assert_ne!(
        s.digest(),
        validate_records(&other, Options::strict())
            .structure
            .digest()
    );
}

#[test]
fn violations_print_position_kind_and_id() {
    let mut log = clean();
    log.insert(10, r("ghost"));
    let v = &validate_records(&log, Options::strict()).violations[0];
    assert_eq!(v.to_string(), "record 10: orphan-result: ghost");
}
