//! The token estimate's error against what the providers reported, on every real
//! transcript that reports usage (the fixtures, and `../shared/data/transcripts/`
//! when it is beside the checkout): at each model call the file reports
//! ([`format::usage_points`]), the estimate of the request (the live history before
//! the call's first message) against the reported input tokens, counting opaque
//! payloads as text (as cutpoint did before [`TokenCounter::count_json`]) and at their
//! fixed cost, and after each session's own [`Calibration`]. The tables are printed
//! (`cargo test --test it usage_error -- --nocapture`) and recorded in
//! docs/formats.md; only exact facts are asserted.

#![cfg(feature = "formats")]

use std::collections::BTreeMap;

use cutpoint::format::{self, ByteEstimate, Calibration, Format, TokenCounter, UsagePoint};

/// The byte estimate with opaque payloads counted as text: cutpoint's count before
/// [`TokenCounter::count_json`] discounted them.
struct AsText;

impl TokenCounter for AsText {
    fn count(&self, text: &str) -> u64 {
        ByteEstimate.count(text)
    }
    fn count_json(&self, json: &str) -> u64 {
        ByteEstimate.count(json)
    }
}

/// The real transcripts with their format: the originals of ../shared when they are
/// there, then the fixtures not among them (excerpts keep a name of their own).
fn real_transcripts() -> Vec<(String, Format, String)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut out: Vec<(String, Format, String)> = Vec::new();
    for (tag, dir) in [
        ("shared", root.join("../shared/data/transcripts")),
        ("fixtures", root.join("tests/fixtures/transcripts")),
    ] {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        let mut paths: Vec<_> = entries.map(|e| e.expect("an entry").path()).collect();
        paths.sort();
        for path in paths {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            if name.ends_with(".md") || out.iter().any(|(n, _, _)| n.ends_with(&*name)) {
                continue;
            }
            let text = std::fs::read_to_string(&path).expect("readable");
            if let Ok(format) = format::detect(&text) {
                out.push((format!("{tag}/{name}"), format, text));
            }
        }
    }
    out
}

/// Mean and max of `|relative error|`, and the mean signed error, over `points`.
fn summary(points: &[UsagePoint]) -> (f64, f64, f64) {
    let n = points.len().max(1) as f64;
    let abs: Vec<f64> = points.iter().map(|p| p.relative_error().abs()).collect();
    let mean = abs.iter().sum::<f64>() / n;
    let max = abs.iter().copied().fold(0.0, f64::max);
    let bias = points.iter().map(UsagePoint::relative_error).sum::<f64>() / n;
    (mean, max, bias)
}

/// `points` with each estimate replaced by its session's calibrated count.
fn calibrated(points: &[UsagePoint]) -> Vec<UsagePoint> {
    let c = Calibration::fit(points).expect("points");
    points
        .iter()
        .map(|p| {
            let mut q = *p;
            q.estimated = c.apply(p.estimated);
            q
        })
        .collect()
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn cells((mean, max, bias): (f64, f64, f64)) -> String {
    format!("{} | {} | {:+.1}%", pct(mean), pct(max), 100.0 * bias)
}

/// The cells of one row: as text (mean abs, max abs, mean), calibrated (mean abs,
/// max abs), then the same with the fixed cost.
fn row(columns: &[Vec<UsagePoint>; 4]) -> String {
    let cal = |p: &[UsagePoint]| {
        let (mean, max, _) = summary(p);
        format!("{} | {}", pct(mean), pct(max))
    };
    format!(
        "{} | {} | {} | {}",
        cells(summary(&columns[0])),
        cal(&columns[1]),
        cells(summary(&columns[2])),
        cal(&columns[3])
    )
}

/// Every real transcript that reports usage: name, format, its usage points with
/// payloads counted as text and with the default count.
type Points = (String, Format, Vec<UsagePoint>, Vec<UsagePoint>);

fn points_by_file() -> Vec<Points> {
    real_transcripts()
        .into_iter()
        .filter_map(|(name, format, text)| {
            let before = format::read(&text, format, &AsText).ok()?;
            let after = format::read(&text, format, &ByteEstimate).ok()?;
            let (b, a) = (
                format::usage_points(&text, &before),
                format::usage_points(&text, &after),
            );
            (!a.is_empty()).then_some((name, format, b, a))
        })
        .collect()
}

#[test]
fn usage_error_on_every_real_transcript() {
    let files = points_by_file();
    let header = "points | as text: mean abs | max abs | mean | calibrated mean abs | max abs | \
                  fixed cost: mean abs | max abs | mean | calibrated mean abs | max abs";
    let rule = "---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|";
    println!("| file | {header} | overhead | scale |\n|---|{rule}---:|---:|");
    // Per format: files, and each column's points (as text, calibrated, fixed cost,
    // calibrated).
    let mut by_format: BTreeMap<&str, (usize, [Vec<UsagePoint>; 4])> = BTreeMap::new();
    for (name, format, before, after) in &files {
        let columns = [
            before.clone(),
            calibrated(before),
            after.clone(),
            calibrated(after),
        ];
        let c = Calibration::fit(after).expect("points");
        println!(
            "| {name} | {} | {} | {:.0} | {:.2} |",
            after.len(),
            row(&columns),
            c.overhead,
            c.scale
        );
        let entry = by_format.entry(format.name()).or_default();
        entry.0 += 1;
        for (all, these) in entry.1.iter_mut().zip(columns) {
            all.extend(these);
        }
    }
    println!("\n| format | files | {header} |\n|---|---:|{rule}");
    for (format, (n, columns)) in &by_format {
        println!(
            "| {format} | {n} | {} | {} |",
            columns[0].len(),
            row(columns)
        );
    }
    // Exact facts: the fixtures that report usage give points in each such format;
    // both counts see the same calls, in log order, one point per call.
    for format in ["claude-code", "codex"] {
        assert!(
            by_format.get(format).is_some_and(|(_, c)| !c[2].is_empty()),
            "{format}: no usage point"
        );
    }
    for (name, _, before, after) in &files {
        assert!(after.iter().all(|p| p.reported > 0), "{name}");
        assert!(
            after.windows(2).all(|w| w[0].message < w[1].message),
            "{name}: points in log order, one per call"
        );
        let calls = |p: &[UsagePoint]| {
            p.iter()
                .map(|p| (p.message, p.reported))
                .collect::<Vec<_>>()
        };
        assert_eq!(calls(before), calls(after), "{name}");
    }
}

fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/transcripts")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A signature costs its fixed 8 tokens, on a real record: line 7 of the
/// interleaved-parallel fixture is one thinking block of 558 bytes, 392 of them its
/// signature. Counted by hand (python, the block's compact JSON): the 166 bytes
/// around the signature are ceil(166 / 4) = 42 tokens, plus 8: 50; the whole block as
/// text was ceil(558 / 4) = 140.
#[test]
fn a_real_signature_costs_its_fixed_tokens() {
    let text = fixture("claude-code__entireio-cli__1a-8a83a35a9b-0-interleaved-parallel.jsonl");
    for (counter, expected) in [(&ByteEstimate as &dyn TokenCounter, 50), (&AsText, 140)] {
        let t = format::read(&text, Format::ClaudeCode, counter).expect("reads");
        let (block, tokens) = t
            .messages
            .iter()
            .find_map(|m| {
                let k = m.block_lines.iter().position(|&l| l == 7)?;
                m.blocks.get(k).cloned()
            })
            .expect("a block at line 7");
        assert_eq!(block, format::Block::Reasoning);
        assert_eq!(tokens, expected);
    }
}

/// A rewrite that keeps a tail leaves no stale usage behind, on the writer's own
/// output of a real Claude Code session: the kept records still carry the usage of
/// the longer request (byte for byte), but the boundary names them as its
/// `preservedSegment`, which Claude Code zeroes on load, and the reader does the same.
/// A call after the compaction is the context again.
#[test]
fn a_rewrite_leaves_no_stale_usage() {
    use cutpoint::compact::Window;
    use cutpoint::testing::writers as rewrite;
    let text = fixture("claude-code__claude-reliability__coverage-test-fix.jsonl");
    let t = format::read(&text, Format::ClaudeCode, &ByteEstimate).expect("reads");
    let before = format::reported_context_tokens(&text, Format::ClaudeCode).expect("usage");
    assert!(before >= 22_899, "{before}");
    let total = t.live_tokens();
    let window = Window::new(total / 2).lookback(total);
    let done = rewrite::compact(&t, &text, &window, 0, "Summary.")
        .expect("compacts")
        .expect("something to compact");
    let out = &done.text;
    let kept = format::read(out, Format::ClaudeCode, &ByteEstimate).expect("reads back");
    // The tail holds assistant records with the old usage, and the last of them is
    // the one the original reported.
    let last_usage = text
        .lines()
        .rev()
        .find(|l| l.contains("\"type\":\"assistant\"") && l.contains("\"usage\""))
        .expect("an assistant record with usage");
    assert!(
        out.contains(last_usage),
        "the last record is kept byte for byte"
    );
    assert!(out.contains("\"preservedSegment\""));
    // The reader no longer reports it, nor any kept record's usage as a point.
    assert_eq!(
        format::reported_context_tokens(out, Format::ClaudeCode),
        None
    );
    assert!(!format::usage_points(&text, &t).is_empty());
    assert_eq!(format::usage_points(out, &kept), []);
    // The next call reports the compacted context.
    let tail = out
        .lines()
        .rev()
        .find_map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).ok()?;
            v["uuid"].as_str().map(str::to_owned)
        })
        .expect("a uuid");
    let resumed = format!(
        "{out}{}\n",
        serde_json::json!({
            "type": "assistant", "uuid": "after-resume", "parentUuid": tail,
            "message": {"id": "msg_after", "role": "assistant",
                "content": [{"type": "text", "text": "continued"}],
                "usage": {"input_tokens": 3, "cache_creation_input_tokens": 5000,
                    "cache_read_input_tokens": 0, "output_tokens": 7}}
        })
    );
    assert_eq!(
        format::reported_context_tokens(&resumed, Format::ClaudeCode),
        Some(5010)
    );
    let t = format::read(&resumed, Format::ClaudeCode, &ByteEstimate).expect("reads");
    let points = format::usage_points(&resumed, &t);
    assert_eq!(points.len(), 1, "{points:?}");
    assert_eq!(points[0].reported, 5003);
    assert_eq!(t.messages[points[0].message].line, resumed.lines().count());
}

/// A rewrite of a real Codex rollout ends with the `token_count` Codex writes after
/// its own compaction: `last_token_usage` zero but `total_tokens`, the compacted
/// history's estimate in the session's calibrated units; `total_token_usage` carried.
/// The reader reports it instead of the kept events' pre-rewrite context, and it is
/// no usage point (no input reported) and no message.
#[test]
fn a_codex_rewrite_recounts_the_context_as_codex_does() {
    use cutpoint::compact::Window;
    use cutpoint::testing::writers as rewrite;
    let text = fixture("codex__localpush__rollout-12-41-04-parallel7.jsonl");
    let t = format::read(&text, Format::CodexRollout, &ByteEstimate).expect("reads");
    let stale = format::reported_context_tokens(&text, Format::CodexRollout).expect("usage");
    assert_eq!(stale, 115_058);
    let total = t.live_tokens();
    let window = Window::new(total / 2).lookback(total);
    let done = rewrite::compact(&t, &text, &window, 0, "Summary.")
        .expect("compacts")
        .expect("something to compact");
    let out = &done.text;
    let back = format::read(out, Format::CodexRollout, &ByteEstimate).expect("reads back");
    let calibration = Calibration::of(&text, &t).expect("the rollout reports usage");
    // The writer counts its summary at the summary estimate (ledger included), a
    // little above what reading it back counts: the context is the calibrated count
    // of an estimate between the read-back one and 10% above it.
    let expected = format::reported_context_tokens(out, Format::CodexRollout).expect("recounted");
    let live = back.live_tokens();
    assert!(
        (live..=live + live / 10).any(|e| calibration.apply(e) == expected),
        "{expected}: not the calibrated count of {live} to {}",
        live + live / 10
    );
    assert!(expected < stale, "{expected} vs {stale}");
    let last: serde_json::Value =
        serde_json::from_str(out.lines().last().expect("a line")).expect("JSON");
    let original_last = text
        .lines()
        .rev()
        .find(|l| l.contains("\"token_count\"") && !l.contains("\"info\":null"))
        .expect("a token_count");
    let original_last: serde_json::Value = serde_json::from_str(original_last).expect("JSON");
    let info = &last["payload"]["info"];
    assert_eq!(last["type"], "event_msg");
    assert_eq!(last["payload"]["type"], "token_count");
    assert_eq!(
        info["total_token_usage"],
        original_last["payload"]["info"]["total_token_usage"]
    );
    assert_eq!(
        info["last_token_usage"],
        serde_json::json!({"input_tokens": 0, "cached_input_tokens": 0, "output_tokens": 0,
            "reasoning_output_tokens": 0, "total_tokens": expected})
    );
    // Not a message, not a usage point: what the rewrite kept reads as before.
    let without = out[..out.trim_end().rfind('\n').expect("lines") + 1].to_owned();
    let plain = format::read(&without, Format::CodexRollout, &ByteEstimate).expect("reads");
    assert_eq!(back.messages.len(), plain.messages.len());
    assert_eq!(
        format::usage_points(out, &back),
        format::usage_points(&without, &plain)
    );
}
