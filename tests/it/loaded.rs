//! `format::Loaded`, the one entry point per job for every format: on records JSONL
//! each job is what the front ends ran on their own before (the tracker's cut, the
//! plan and apply, the pipeline on the log, the validator), on the other formats the
//! transcript's; a whole read and an unjudged read of the same records agree; input
//! of another kind read as records is the reader's mismatch, as for every format.

use cutpoint::compact::pipeline::{Pipeline, Progress};
use cutpoint::compact::strategy::{Clear, LedgerOnly, Strategy as Compaction};
use cutpoint::compact::{self, Direction, Entry, Log, Options, Window, estimate_summary_tokens};
use cutpoint::format::loaded::SummaryOptions;
use cutpoint::format::records::{Reader, write_entry};
use cutpoint::format::{self, ByteEstimate, Format, FormatError, LoadError, Loaded};
use proptest::prelude::*;

/// One records line: a kind and tokens, a call id for tool records.
fn line() -> impl Strategy<Value = String> {
    (0u8..6, 1u64..400, 0u8..6).prop_map(|(kind, tokens, id)| match kind {
        0 => format!(r#"{{"kind":"user","tokens":{tokens}}}"#),
        1 => format!(r#"{{"kind":"assistant","tokens":{tokens}}}"#),
        2 => format!(r#"{{"kind":"assistant","tokens":{tokens},"reasoning":"signed"}}"#),
        3 => format!(
            r#"{{"kind":"tool_use","call_id":"c{id}","tokens":{tokens},"name":"bash","arguments":{{"command":"ls {id}"}}}}"#
        ),
        _ => format!(
            r#"{{"kind":"tool_result","call_id":"c{id}","tokens":{tokens},"status":"ok","content":"out {id}\nmore"}}"#
        ),
    })
}

/// A records log of generated lines, blank lines among them.
fn records() -> impl Strategy<Value = String> {
    prop::collection::vec((line(), any::<bool>()), 0..40).prop_map(|lines| {
        let mut text = String::new();
        for (line, blank) in lines {
            if blank {
                text.push('\n');
            }
            text.push_str(&line);
            text.push('\n');
        }
        text
    })
}

fn entries(text: &str) -> (Vec<Entry>, Vec<usize>) {
    Reader::new(text.as_bytes())
        .entries()
        .map(|item| item.expect("generated lines are records"))
        .map(|(line, entry)| (entry, line))
        .unzip()
}

fn written(log: &Log) -> String {
    let mut out = Vec::new();
    for entry in log.entries() {
        write_entry(&mut out, entry).expect("a Vec takes every byte");
    }
    String::from_utf8(out).expect("JSON is UTF-8")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(crate::cases(96)))]

    /// `check` on records JSONL is the validator, each violation at the input line
    /// of its record (blank lines counted), the pairing digest beside.
    #[test]
    fn records_check_is_the_validator_at_input_lines(text in records(), allow in any::<bool>()) {
        let (all, lines) = entries(&text);
        let options = if allow { Options::allowing_pending() } else { Options::strict() };
        let want = compact::validate(&all, options);
        let loaded = Loaded::read_unjudged(&text, Format::Records, &ByteEstimate).unwrap();
        let got = loaded.check(None, allow).unwrap();
        prop_assert_eq!(got.format, Format::Records);
        prop_assert_eq!(got.messages, all.len());
        prop_assert_eq!(got.digest, Some(want.structure.digest()));
        let got: Vec<_> = got
            .violations
            .iter()
            .map(|f| (f.rule, f.at, f.line, f.call_id.clone(), f.pending_at_end, f.display.clone()))
            .collect();
        let want: Vec<_> = want
            .violations
            .iter()
            .map(|v| {
                let line = lines.get(v.at()).copied().unwrap_or_else(|| lines.last().map_or(1, |l| l + 1));
                (v.kind(), v.at(), line, Some(v.call_id().clone()), matches!(v, compact::Violation::PendingAtEnd { .. }), format!("{line}: {}: {}", v.kind(), v.call_id()))
            })
            .collect();
        prop_assert_eq!(got, want);
        // A records log is never compared with an original.
        prop_assert!(loaded.comparable().is_err());
        prop_assert!(loaded.check(Some(&loaded), allow).is_err());
    }

    /// The jobs on records JSONL read whole (judged) are what the CLI ran on the log
    /// before, and an unjudged read of the same text gives the same answers.
    #[test]
    fn records_jobs_are_the_logs_own(text in records(), target in 0u64..4000, budget in 1u64..4000) {
        let (all, _) = entries(&text);
        let Ok(log) = Log::from_entries(all.iter().cloned()) else {
            // A reused call id: the judged read refuses it as the log does.
            let refused = Loaded::read(&text, Format::Records, &ByteEstimate);
            prop_assert!(matches!(refused, Err(LoadError::Refused(_))), "{refused:?}");
            return Ok(());
        };
        let whole = Loaded::read(&text, Format::Records, &ByteEstimate).unwrap();
        let unjudged = Loaded::read_unjudged(&text, Format::Records, &ByteEstimate).unwrap();
        prop_assert_eq!(whole.live_tokens(), log.tracker().total_tokens());
        prop_assert_eq!(unjudged.live_tokens(), log.tracker().total_tokens());
        let (from, sums) = whole.live_prefix();
        prop_assert_eq!(from, 0);
        prop_assert_eq!(sums.len(), log.len() + 1);
        for (at, sum) in sums.iter().enumerate() {
            prop_assert_eq!(Some(*sum), log.tracker().tokens_before(at));
        }

        // The cut: the tracker's, in records.
        let lookback = target / 3;
        let want = log.tracker().select_legal_cut(target, lookback).map_err(|d| d.target_index);
        for loaded in [&whole, &unjudged] {
            let got = loaded.select_cut(target, lookback).unwrap();
            prop_assert_eq!(got.as_ref().map_err(|r| r.target_at).copied(), want);
        }
        prop_assert!(whole.native_cut(format::NativeCompaction::Anthropic, format::Keep::Turns(1)).is_err());

        // One summary: the plan and its apply, written line by line.
        let window = Window::new(target);
        let mut by_hand = log.clone();
        let summarized = whole.summarize(&SummaryOptions::at(window.clone()), &ByteEstimate);
        match by_hand.plan(&window) {
            Ok(plan) if !plan.region.is_empty() => {
                let tokens = estimate_summary_tokens(None, &by_hand.units(&plan));
                by_hand.apply(&plan, None, tokens).unwrap();
                let summarized = summarized.unwrap().expect("a summary without a budget");
                let done = &summarized.summary;
                prop_assert_eq!(&done.text, &written(&by_hand));
                prop_assert_eq!((done.head, done.cut), (plan.region.start, plan.region.end));
                prop_assert_eq!(&summarized.done, &plan.to_string());
                let again = unjudged.summarize(&SummaryOptions::at(window.clone()), &ByteEstimate).unwrap().unwrap();
                prop_assert_eq!(&again.summary.text, &done.text);
            }
            Ok(_) => {}
            Err(_) => prop_assert!(summarized.is_err()),
        }

        // A pipeline: run to its budget on the log; the input itself when nothing
        // was edited.
        let pipeline = Pipeline::one(Compaction::Clear(Clear::default().keep_tool_uses(1)), Some(budget));
        let mut by_hand = log.clone();
        let report = pipeline.run_to_budget(&mut by_hand, &mut Progress::new(), &mut LedgerOnly);
        let done = whole.run(&pipeline, 0, &mut Progress::new(), &mut LedgerOnly, &ByteEstimate).unwrap();
        let edited = report.ran().any(|r| !r.edits.is_empty());
        if edited || text.is_empty() {
            prop_assert_eq!(&done.text, &written(&by_hand));
        } else {
            prop_assert_eq!(&done.text, &text);
        }
        prop_assert_eq!(&done.report, &report);
        prop_assert_eq!(done.rounds, usize::from(!report.was_within_budget()));
        // Unjudged, nothing holds the input: the log is written back.
        let again = unjudged.run(&pipeline, 0, &mut Progress::new(), &mut LedgerOnly, &ByteEstimate).unwrap();
        prop_assert_eq!(again.text, written(&by_hand));
    }
}

#[test]
fn input_of_another_kind_read_as_records_is_the_readers_mismatch() {
    let body = r#"[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]"#;
    let want = format::read(body, Format::Records, &ByteEstimate)
        .unwrap_err()
        .to_string();
    assert!(want.starts_with("not records input"), "{want}");
    for got in [
        Loaded::read(body, Format::Records, &ByteEstimate),
        Loaded::read_unjudged(body, Format::Records, &ByteEstimate),
    ] {
        match got {
            Err(LoadError::Format(e @ FormatError::Mismatch { .. })) => {
                assert_eq!(e.to_string(), want)
            }
            other => panic!("{other:?}"),
        }
    }
}

/// A text that starts with a byte order mark is told so by name, by detection and by
/// every reader (serde_json's own word would be "expected value" at column 1, and
/// detection would see records JSONL in it).
#[test]
fn a_byte_order_mark_is_named_by_detection_and_every_reader() {
    let bodies = [
        (Format::Records, "{\"kind\":\"user\",\"tokens\":3}\n"),
        (Format::OpenAiChat, r#"[{"role": "user", "content": "hi"}]"#),
        (
            Format::AnthropicMessages,
            r#"{"messages": [{"role": "user", "content": "hi"}]}"#,
        ),
        (
            Format::ClaudeCode,
            "{\"type\":\"user\",\"uuid\":\"u1\",\"message\":{\"role\":\"user\",\"content\":\"hi\"}}\n",
        ),
    ];
    for (format, body) in bodies {
        let marked = format!("\u{feff}{body}");
        let named = |e: &dyn std::fmt::Display| {
            let e = e.to_string();
            assert!(e.contains("byte order mark (U+FEFF)"), "{format}: {e}");
        };
        format::read(body, format, &ByteEstimate).unwrap();
        named(&format::read(&marked, format, &ByteEstimate).unwrap_err());
        named(&format::detect(&marked).unwrap_err());
        named(&format::detect_input(marked.as_bytes()).unwrap_err());
        named(&format::mismatch(&marked, format).unwrap());
        named(&Loaded::read(&marked, format, &ByteEstimate).unwrap_err());
    }
    let line = "\u{feff}{\"kind\":\"user\",\"tokens\":3}";
    let e = format::records::parse_entry(line, 1)
        .unwrap_err()
        .to_string();
    assert!(e.contains("byte order mark (U+FEFF)"), "{e}");
    let e = Reader::new(line.as_bytes())
        .next()
        .unwrap()
        .unwrap_err()
        .to_string();
    assert!(e.contains("line 1") && e.contains("byte order mark"), "{e}");
}

/// JSON lines of empty objects are said to be that, not "lines with keys " and nothing.
#[test]
fn lines_of_empty_objects_are_named_as_such() {
    let e = format::detect("{}\n{}\n").unwrap_err().to_string();
    assert!(e.contains("2 lines, each an empty object"), "{e}");
}

#[test]
fn the_other_formats_run_and_check_as_the_transcript_does() {
    let text = r#"[
  {"role": "user", "content": "list the files"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
    "function": {"name": "ls", "arguments": "{}"}}]},
  {"role": "tool", "tool_call_id": "c1", "content": "a.txt b.txt c.txt d.txt e.txt f.txt g.txt h.txt i.txt"},
  {"role": "assistant", "content": "Nine files."},
  {"role": "user", "content": "thanks"},
  {"role": "assistant", "content": null, "tool_calls": [{"id": "c2", "type": "function",
    "function": {"name": "ls", "arguments": "{}"}}]}
]"#;
    let t = format::read(text, Format::OpenAiChat, &ByteEstimate).unwrap();
    let loaded = Loaded::read(text, Format::OpenAiChat, &ByteEstimate).unwrap();
    let pipeline = Pipeline::one(Compaction::Clear(Clear::default().keep_tool_uses(0)), None);
    let want = cutpoint::testing::writers::run(
        &t,
        text,
        &pipeline,
        0,
        &mut Progress::new(),
        &mut LedgerOnly,
        &ByteEstimate,
    )
    .unwrap();
    let got = loaded
        .run(
            &pipeline,
            0,
            &mut Progress::new(),
            &mut LedgerOnly,
            &ByteEstimate,
        )
        .unwrap();
    assert_eq!(got.text, want.text);
    let checked = loaded.check(None, false).unwrap();
    let rules: Vec<_> = format::check_rules(&t)
        .iter()
        .map(|v| v.to_string())
        .collect();
    assert!(!rules.is_empty());
    assert_eq!(
        checked
            .violations
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        rules
    );
    assert!(loaded.check(None, true).unwrap().violations.is_empty());
    assert!(loaded.check(Some(&loaded), false).is_ok());
    assert_eq!(loaded.select_cut(40, 40).unwrap().ok(), {
        let (tracker, owner) = t.tracker().unwrap();
        tracker
            .select_legal_cut(40, 40)
            .ok()
            .map(|c| t.message_at(&owner, c))
    });
}

/// The transcripts of the fixtures in a JSON lines format (Claude Code, Codex), by
/// name.
fn json_lines_fixtures() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/transcripts");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .expect("the fixtures")
        .map(|e| e.expect("an entry").path())
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?.to_owned();
            (name.starts_with("claude-code__") || name.starts_with("codex__"))
                .then(|| (name, std::fs::read_to_string(&p).expect("readable")))
        })
        .collect();
    out.sort();
    out
}

/// `Summarized::message` of a JSON lines transcript is the summary's own lines: a
/// retained record the reader merges into the summary's message (a Claude Code user
/// record after it) is not part of it. Each line is written verbatim in the output,
/// and none comes from the input's retained region.
#[test]
fn a_json_lines_summary_message_is_the_summarys_own_lines() {
    let mut summaries = 0;
    for (name, text) in json_lines_fixtures() {
        let format = format::detect(&text).expect("a detected format");
        let loaded = Loaded::read(&text, format, &ByteEstimate).expect("reads");
        let live = loaded.live_tokens();
        let mut budgets: Vec<u64> = [30, 45, 55, 60, 70, 85]
            .iter()
            .map(|share| (live * share / 100).max(1))
            .collect();
        // Where Python's `compact_report` once got two records back as its summary.
        if name == "claude-code__claude-reliability__coverage-test-fix.jsonl" {
            budgets.push(1881);
        }
        // The library's default window, and Python's and the CLI's for a budget
        // (forward, no limit on how far).
        let forward = Window::new(0)
            .direction(Direction::Forward)
            .lookback(u64::MAX);
        for (budget, window) in budgets
            .into_iter()
            .flat_map(|b| [(b, Window::new(0)), (b, forward.clone())])
        {
            let opts = SummaryOptions::within(budget, window);
            let Ok(Some(done)) = loaded.summarize(&opts, &ByteEstimate) else {
                continue;
            };
            let Some(message) = &done.message else {
                continue;
            };
            summaries += 1;
            let Loaded::Transcript { transcript: t, .. } = &loaded else {
                unreachable!("a provider format")
            };
            // The retained records: the input's lines from the cut on (none when the
            // cut is the end). The writer may drop lines there that are no message
            // (a Claude Code kept segment), so they are not the output's last lines;
            // what is checked is that none of them is in the summary's message.
            let retained: Vec<&str> = t
                .messages
                .get(done.summary.cut)
                .map_or(Vec::new(), |m| text[m.spans[0].start..].lines().collect());
            let out: Vec<&str> = done.summary.text.lines().collect();
            for line in message.lines() {
                assert!(out.contains(&line), "{name} at {budget}: not in the output");
                assert!(
                    !retained.contains(&line),
                    "{name} at {budget}: a retained line in the summary message"
                );
                serde_json::from_str::<serde_json::Value>(line)
                    .unwrap_or_else(|e| panic!("{name} at {budget}: {e}"));
            }
            assert!(message.contains(format::loaded::DEFAULT_SUMMARY), "{name}");
        }
    }
    assert!(summaries >= 20, "only {summaries} summaries");
}

/// `Loaded::calibrated_budget` is the session's fit inverted, and names why when
/// there is none: no usage in the log, or an overhead over the budget.
#[test]
fn a_calibrated_budget_is_the_fit_inverted() {
    let mut fitted = 0;
    for (name, text) in json_lines_fixtures() {
        let format = format::detect(&text).expect("a detected format");
        let loaded = Loaded::read(&text, format, &ByteEstimate).expect("reads");
        let Some(fit) = loaded.calibration() else {
            assert!(matches!(
                loaded.calibrated_budget(1000),
                Err(format::CalibrateError::NoUsage { .. })
            ));
            continue;
        };
        fitted += 1;
        for reported in [
            fit.apply(0),
            fit.apply(1000),
            fit.apply(loaded.live_tokens()),
            10u64.pow(7),
        ] {
            let c = loaded
                .calibrated_budget(reported)
                .expect("within the overhead");
            assert_eq!((c.reported, c.fit), (reported, fit), "{name}");
            assert!(fit.apply(c.estimate) <= reported, "{name}");
            assert!(fit.apply(c.estimate + 1) > reported, "{name}");
        }
        if fit.apply(0) > 0 {
            let under = fit.apply(0) - 1;
            assert_eq!(
                loaded.calibrated_budget(under),
                Err(format::CalibrateError::OverheadOverBudget {
                    reported: under,
                    overhead: fit.apply(0),
                    points: fit.points
                }),
                "{name}"
            );
        }
    }
    assert!(fitted >= 5, "only {fitted} files report usage");
    let records = Loaded::read(
        "{\"kind\":\"user\",\"tokens\":5}\n",
        Format::Records,
        &ByteEstimate,
    )
    .expect("reads");
    let e = records.calibrated_budget(100).unwrap_err();
    assert!(e.to_string().contains("records log reports none"), "{e}");
}
