//! Runs `examples/agent_loop.rs`'s session (its `run`, which `main` wraps: the program
//! exits non-zero exactly when `failures > 0`) and checks what the issue asks it to
//! show: at least one compaction and one mid-turn deferral, every deferral completed at
//! the next safe point, zero validation failures, the same output from the same seed.
#![cfg(feature = "stream")]

#[expect(dead_code, reason = "the example's `main` only runs as a program")]
#[path = "../examples/agent_loop.rs"]
mod agent_loop;

/// The call ids a deferral line names (`... waiting on a, b; resumes ...`).
fn waited_ids(line: &str) -> Vec<&str> {
    let Some((_, rest)) = line.split_once("waiting on ") else {
        return Vec::new();
    };
    let ids = rest.split(';').next().unwrap_or("");
    ids.split(", ").collect()
}

fn check(seed: u64, out: &agent_loop::Outcome) {
    assert_eq!(out.failures, 0, "seed {seed}: {:#?}", out.lines);
    let deferred: Vec<usize> = (0..out.lines.len())
        .filter(|&i| out.lines[i].contains("deferred"))
        .collect();
    assert_eq!(deferred.len(), out.deferrals);
    assert_eq!(
        out.lines.iter().filter(|l| l.contains("compacted")).count(),
        out.compactions
    );
    for i in deferred {
        let line = &out.lines[i];
        let ids = waited_ids(line);
        assert!(
            line.contains("calls in flight") && !ids.is_empty(),
            "seed {seed}: a mid-turn deferral names its calls: {line}"
        );
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
}

#[tokio::test(start_paused = true)]
async fn the_example_compacts_and_defers_mid_turn_with_a_valid_log() {
    // The seed `cargo run --example agent_loop` uses.
    let seed = agent_loop::DEFAULT_SEED;
    let out = agent_loop::run(seed).await;
    check(seed, &out);
    assert!(out.compactions >= 1, "{:#?}", out.lines);
    assert!(out.deferrals >= 1, "{:#?}", out.lines);
    let again = agent_loop::run(seed).await;
    assert_eq!(again.lines, out.lines, "deterministic from its seed");
    assert_eq!(again.events, out.events);
}

#[tokio::test(start_paused = true)]
async fn other_seeds_keep_the_log_valid_too() {
    let mut deferrals = 0;
    for seed in 0..10 {
        let out = agent_loop::run(seed).await;
        check(seed, &out);
        assert!(out.compactions >= 1, "seed {seed}");
        deferrals += out.deferrals;
    }
    assert!(
        deferrals >= 10,
        "mid-turn deferrals are common: {deferrals}"
    );
}
