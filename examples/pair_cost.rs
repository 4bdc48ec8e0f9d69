//! The cost of pair-atomicity, measured: how much less a pairing-legal compaction
//! removes than a pairing-blind token cut would, and how often it must defer.
//!
//! ```sh
//! cargo run --release --example pair_cost -- tests/fixtures/transcripts
//! ```
//!
//! For every session (generated ones from `cutpoint::testing::synth`, and the real Claude Code
//! and Codex transcripts in the given folder), compaction fires at evenly spaced
//! moments as the log grows (mid-turn moments included). At each moment and budget
//! `b`, the compactor must bring the log down to `b` of its tokens: the target is
//! `(1 - b) · total`, the first record is pinned, the lookback is 15% of the target
//! (the seed's suggestion). The *blind* cut is the seed's target index (the first
//! record whose prefix reaches the target), cut there whatever it splits; the *legal*
//! cut is `Tracker::select_legal_cut`, walking back. Reported per budget:
//!
//! - **less compacted**: `Σ (blind − legal) / Σ blind` tokens removed, over the
//!   moments that did not defer;
//! - **with deferrals**: the same, with a deferred moment counted as compacting
//!   nothing (what a caller that cannot wait for the turn boundary loses);
//! - **deferred**: the share of moments with no legal cut in the lookback;
//! - **blind cut illegal**: the share of moments where the blind cut splits a pair
//!   or a message (what a pairing-blind compactor would have broken).
//!
//! A second table does the same for the forward direction: the nearest legal cut
//! that compacts at least the target (within the lookback past it), against a blind
//! cut right after the target record.
//!
//! The transcripts are read ad hoc: `tool_use`/`tool_result` blocks and text of
//! Claude Code session lines (blocks of one message bound together), and Codex
//! rollout `response_item`s (a reasoning item bound to what follows it; a `compacted`
//! line replaces the history). Tokens are about a quarter of each item's JSON bytes.

use std::path::{Path, PathBuf};

use cutpoint::testing::synth::Session;
use cutpoint::{Record, Tracker};
use serde_json::Value;

const BUDGETS: [u64; 7] = [30, 40, 50, 60, 70, 80, 90];
const MOMENTS: usize = 60;

#[derive(Default, Clone, Copy)]
struct Tally {
    /// Forward direction: blind tokens through the target record, legal tokens.
    fwd_blind: u128,
    fwd_legal: u128,
    fwd_deferred: u64,
    blind: u128,
    blind_all: u128,
    legal: u128,
    moments: u64,
    deferred: u64,
    illegal_blind: u64,
}

fn tokens_of(v: &Value) -> u64 {
    (v.to_string().len() as u64 / 4).max(1)
}

/// Measures one session at `MOMENTS` moments for every budget.
fn measure(records: &[Record], tallies: &mut [Tally; BUDGETS.len()]) {
    let mut tracker = Tracker::new();
    let step = (records.len() / MOMENTS).max(1);
    for (i, record) in records.iter().enumerate() {
        if tracker.append(record.clone()).is_err() {
            continue; // a repeated call id: skipped, as a tracker user would
        }
        if (i + 1) % step != 0 || tracker.len() < 4 {
            continue;
        }
        let total = tracker.total_tokens();
        let head = tracker.legal_cut_at_or_after(1).unwrap_or(tracker.len());
        let head_tokens = tracker.tokens_before(head).unwrap_or(0);
        for (b, tally) in BUDGETS.iter().zip(tallies.iter_mut()) {
            let target = total - total * b / 100;
            let lookback = target * 15 / 100;
            // The seed's target index: the first record whose prefix reaches the target.
            let blind_cut = (0..=tracker.len())
                .find(|&c| tracker.tokens_before(c + 1).is_none_or(|t| t >= target))
                .unwrap_or(tracker.len())
                .min(tracker.len());
            let blind = tracker.tokens_before(blind_cut).unwrap_or(0);
            if blind <= head_tokens {
                continue; // nothing past the pinned head to compact
            }
            tally.moments += 1;
            tally.blind_all += u128::from(blind - head_tokens);
            if !tracker.is_legal_cut(blind_cut) {
                tally.illegal_blind += 1;
            }
            // Forward: the nearest legal cut that compacts at least the target.
            let through = (blind_cut + 1).min(tracker.len());
            let fwd_blind = tracker.tokens_before(through).unwrap_or(0);
            let fwd = tracker
                .legal_cut_at_or_after(through)
                .and_then(|c| tracker.tokens_before(c))
                .filter(|&t| t <= target.saturating_add(lookback));
            match fwd {
                Some(t) => {
                    tally.fwd_blind += u128::from(fwd_blind - head_tokens);
                    tally.fwd_legal += u128::from(t - head_tokens);
                }
                None => tally.fwd_deferred += 1,
            }
            match tracker.select_legal_cut(target, lookback) {
                Ok(cut) => {
                    let legal = tracker.tokens_before(cut).unwrap_or(0).max(head_tokens);
                    tally.blind += u128::from(blind - head_tokens);
                    tally.legal += u128::from(legal - head_tokens);
                }
                Err(_) => tally.deferred += 1,
            }
        }
    }
}

/// Records of a Claude Code session JSONL.
fn claude_code(text: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let mut last_message: Option<String> = None;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let kind = v["type"].as_str().unwrap_or("");
        if kind != "user" && kind != "assistant" {
            continue;
        }
        let message = &v["message"];
        let id = message["id"].as_str().map(str::to_owned);
        // Lines of one assistant message (same message.id) are bound together.
        let mut bound = kind == "assistant" && id.is_some() && id == last_message;
        last_message = if kind == "assistant" { id } else { None };
        let blocks: Vec<Value> = match &message["content"] {
            Value::String(s) => vec![Value::String(s.clone())],
            Value::Array(a) => a.clone(),
            _ => continue,
        };
        for block in &blocks {
            let tokens = tokens_of(block);
            let record = match (kind, block["type"].as_str()) {
                ("assistant", Some("tool_use")) => match block["id"].as_str() {
                    Some(id) => Record::tool_use(id, tokens),
                    None => continue,
                },
                ("user", Some("tool_result")) => match block["tool_use_id"].as_str() {
                    Some(id) => Record::tool_result(id, tokens),
                    None => continue,
                },
                ("assistant", _) => Record::assistant(tokens),
                _ => Record::user(tokens),
            };
            out.push(if bound {
                record.bound_to_previous()
            } else {
                record
            });
            bound = true;
        }
    }
    out
}

/// Records of one Codex response item; `bound` when a reasoning item precedes it.
fn codex_item(item: &Value, bound: bool) -> Option<Record> {
    let tokens = tokens_of(item);
    let call_id = item["call_id"].as_str();
    let record = match item["type"].as_str()? {
        "message" if item["role"] == "assistant" => Record::assistant(tokens),
        "message" => Record::user(tokens),
        "reasoning" => Record::assistant(tokens),
        "function_call" | "custom_tool_call" | "local_shell_call" => {
            Record::tool_use(call_id?, tokens)
        }
        "function_call_output" | "custom_tool_call_output" => Record::tool_result(call_id?, tokens),
        _ => return None,
    };
    Some(if bound {
        record.bound_to_previous()
    } else {
        record
    })
}

/// Records of a Codex rollout JSONL.
fn codex(text: &str) -> Vec<Record> {
    let mut out = Vec::new();
    let mut after_reasoning = false;
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match v["type"].as_str() {
            Some("response_item") => {
                let item = &v["payload"];
                if let Some(r) = codex_item(item, after_reasoning) {
                    out.push(r);
                    after_reasoning = item["type"] == "reasoning";
                }
            }
            Some("compacted") => {
                // The history is replaced: measure from the replacement on.
                out.clear();
                after_reasoning = false;
                if let Value::Array(items) = &v["payload"]["replacement_history"] {
                    for item in items {
                        if let Some(r) = codex_item(item, after_reasoning) {
                            out.push(r);
                            after_reasoning = item["type"] == "reasoning";
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

fn transcripts(dir: &Path) -> Vec<(String, Vec<Record>)> {
    let mut found = Vec::new();
    let Ok(read) = std::fs::read_dir(dir) else {
        eprintln!(
            "pair_cost: cannot read {}; transcripts skipped",
            dir.display()
        );
        return found;
    };
    let mut paths: Vec<PathBuf> = read.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let records = if name.starts_with("claude-code__") {
            claude_code(&text)
        } else if name.starts_with("codex__") {
            codex(&text)
        } else {
            continue;
        };
        found.push((name, records));
    }
    found
}

fn pct(num: u128, den: u128) -> String {
    if den == 0 {
        "–".to_owned()
    } else {
        format!("{:.1}%", num as f64 * 100.0 / den as f64)
    }
}

fn main() {
    let dir = std::env::args().nth(1).map_or_else(
        || PathBuf::from("tests/fixtures/transcripts"),
        PathBuf::from,
    );
    let mut generated = [Tally::default(); BUDGETS.len()];
    for seed in 0..20 {
        measure(&Session::records(seed, 2_000), &mut generated);
    }
    let mut real = [Tally::default(); BUDGETS.len()];
    for (name, records) in transcripts(&dir) {
        let calls = records
            .iter()
            .filter(|r| r.kind().name() == "tool_use")
            .count();
        eprintln!("{name}: {} records, {calls} calls", records.len());
        measure(&records, &mut real);
    }
    println!(
        "| budget kept | generated: less compacted | with deferrals | deferred | blind cut illegal | transcripts: less compacted | with deferrals | deferred | blind cut illegal |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for (i, b) in BUDGETS.iter().enumerate() {
        let (g, r) = (generated[i], real[i]);
        println!(
            "| {b}% | {} | {} | {} | {} | {} | {} | {} | {} |",
            pct(g.blind - g.legal, g.blind),
            pct(g.blind_all - g.legal, g.blind_all),
            pct(g.deferred.into(), g.moments.into()),
            pct(g.illegal_blind.into(), g.moments.into()),
            pct(r.blind - r.legal, r.blind),
            pct(r.blind_all - r.legal, r.blind_all),
            pct(r.deferred.into(), r.moments.into()),
            pct(r.illegal_blind.into(), r.moments.into()),
        );
    }
    println!(
        "\nForward (`Direction::Forward`: the nearest legal cut compacting at least the target, within the lookback past it):\n"
    );
    println!(
        "| budget kept | generated: more compacted than blind | deferred | transcripts: more compacted than blind | deferred |"
    );
    println!("|---|---|---|---|---|");
    for (i, b) in BUDGETS.iter().enumerate() {
        let (g, r) = (generated[i], real[i]);
        println!(
            "| {b}% | {} | {} | {} | {} |",
            pct(g.fwd_legal - g.fwd_blind, g.fwd_blind),
            pct(g.fwd_deferred.into(), g.moments.into()),
            pct(r.fwd_legal - r.fwd_blind, r.fwd_blind),
            pct(r.fwd_deferred.into(), r.moments.into()),
        );
    }
    let moments = |t: &[Tally]| t.iter().map(|x| x.moments).sum::<u64>();
    println!(
        "\n{} generated moments (20 sessions × 2,000 records), {} transcript moments.",
        moments(&generated),
        moments(&real)
    );
}
