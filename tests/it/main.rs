//! The library's integration tests, as one test binary (one link instead of one per
//! file): model tests against the specification's code, events and streaming,
//! compaction and validation, policies, caps and modes, snapshots, the formats and the
//! real transcripts, and the layering of the source tree.

mod agent_loop;
mod compact;
mod compact_chat;
mod edits;
mod events;
mod fallback;
mod faults;
mod format_golden;
mod format_robustness;
mod index_diff;
mod jsonl;
mod jsonl_entries;
mod kept_items;
mod layout;
mod liveness;
mod loaded;
mod native_cut;
mod native_records;
mod one_path;
mod policy;
mod policy_plan;
mod readers_cases;
mod reasoning_strategies;
mod reliability;
mod reliability_hashing;
mod rules_2026;
mod sampled;
mod sessions;
mod snapshot;
mod strategies;
mod strategies_formats;
mod stream;
mod streams;
mod streams_http;
mod transcripts;
mod usage_error;
mod used_ids;
mod validate;

/// `n` property-test cases, times `CUTPOINT_CASES` when it is set (a whole number):
/// CI runs `n`; `CUTPOINT_CASES=50 cargo test --test it` runs fifty times as many
/// generated cases, to search further than one run does.
pub fn cases(n: u32) -> u32 {
    let scale = std::env::var("CUTPOINT_CASES")
        .ok()
        .and_then(|v| v.parse::<u32>().ok())
        .unwrap_or(1)
        .max(1);
    n.saturating_mul(scale)
}
