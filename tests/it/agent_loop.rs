//! Runs `examples/agent_loop.rs`'s session (its `run`, which `main` wraps: the program
//! exits non-zero exactly when `failures > 0`) and checks what the issue asks it to
//! show: at least one compaction through the real compaction layer and one mid-turn
//! deferral naming its calls, every deferral completed by a compaction at the next safe
//! point, zero validation failures (after every compaction and at the end), the same
//! output from the same seed.
#![cfg(feature = "stream")]

#[expect(dead_code, reason = "the example's `main` only runs as a program")]
#[path = "../../examples/agent_loop.rs"]
mod example;

/// The call ids a deferral line names (`... waiting on a, b; resumes ...`).
fn waited_ids(line: &str) -> Vec<&str> {
    let Some((_, rest)) = line.split_once("waiting on ") else {
        return Vec::new();
    };
    let ids = rest.split(';').next().unwrap_or("");
    ids.split(", ").filter(|id| !id.is_empty()).collect()
}

/// The number after `(N tokens, ` in a compaction line: the calls its summary covers.
fn covered_calls(line: &str) -> usize {
    let calls = line
        .split_once(" tokens, ")
        .and_then(|(_, rest)| rest.split_once(" calls)"))
        .map(|(n, _)| n);
    calls
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no call count in {line}"))
}

fn check(seed: u64, out: &example::Outcome) {
    assert_eq!(out.failures, 0, "seed {seed}: {:#?}", out.lines);
    assert!(
        !out.lines.iter().any(|l| l.contains("FAILED")),
        "seed {seed}: {:#?}",
        out.lines
    );
    let deferred: Vec<usize> = (0..out.lines.len())
        .filter(|&i| out.lines[i].contains("deferred"))
        .collect();
    assert_eq!(deferred.len(), out.deferrals);
    let compacted: Vec<&String> = out
        .lines
        .iter()
        .filter(|l| l.contains("compacted"))
        .collect();
    assert_eq!(compacted.len(), out.compactions);
    for line in &compacted {
        assert!(line.ends_with("; log valid"), "seed {seed}: {line}");
    }
    // Each summary folds the one before (the region starts right after the pinned
    // head, where the previous summary sits): the ledger only grows, no call is lost.
    let covered: Vec<usize> = compacted.iter().map(|l| covered_calls(l)).collect();
    assert!(
        covered.windows(2).all(|w| w[0] <= w[1]),
        "seed {seed}: covered calls shrank: {covered:?}"
    );
    for i in deferred {
        let line = &out.lines[i];
        let ids = waited_ids(line);
        assert!(
            line.contains("calls in flight") && !ids.is_empty(),
            "seed {seed}: a mid-turn deferral names its calls: {line}"
        );
        for id in &ids {
            assert!(id.starts_with("toolu_"), "seed {seed}: not a call id: {id}");
        }
        // Completed at the safe point, before anything else is reported.
        let next = out.lines.get(i + 1).map_or("", String::as_str);
        assert!(
            next.contains("compacted") && next.contains("ready, after waiting on"),
            "seed {seed}: deferral not completed at the next safe point: {line} / {next}"
        );
        for id in ids {
            assert!(next.contains(id), "seed {seed}: {id} missing from {next}");
        }
    }
    // The session ends with every call answered, and the validator agrees.
    let last = out.lines.last().map_or("", String::as_str);
    assert!(
        last.starts_with("final log: ") && last.ends_with("; valid"),
        "seed {seed}: {last}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_example_compacts_and_defers_mid_turn_with_a_valid_log() {
    // The seed `cargo run --example agent_loop` uses.
    let seed = example::DEFAULT_SEED;
    let out = example::run(seed).await;
    check(seed, &out);
    assert!(out.compactions >= 1, "{:#?}", out.lines);
    assert!(out.deferrals >= 1, "{:#?}", out.lines);
    let again = example::run(seed).await;
    assert_eq!(again.lines, out.lines, "deterministic from its seed");
    assert_eq!(again.events, out.events);
}

#[tokio::test(start_paused = true)]
async fn other_seeds_keep_the_log_valid_too() {
    let mut deferrals = 0;
    for seed in 0..10 {
        let out = example::run(seed).await;
        check(seed, &out);
        assert!(out.compactions >= 1, "seed {seed}");
        deferrals += out.deferrals;
        let again = example::run(seed).await;
        assert_eq!(again.lines, out.lines, "seed {seed}: deterministic");
    }
    assert!(
        deferrals >= 10,
        "mid-turn deferrals are common: {deferrals}"
    );
}
