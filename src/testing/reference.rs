//! The seed's reference algorithm, transcribed: a naive rescan per query.
//!
//! This is the oracle the tracker is tested against and the baseline the benchmarks
//! measure. It is deliberately the seed's code, loop for loop: each candidate cut
//! rescans the log, so one query costs **O(n · w)** for a window of `w` cuts. Do not
//! use it in production; use [`Tracker`](crate::Tracker).
//!
//! [`select_legal_cut_seed`] is the seed verbatim. [`select_legal_cut`] differs in one
//! documented way, the same way the tracker does: when the target covers the whole
//! log it returns `len` only if `len` is legal, and otherwise walks back from the last
//! record.

use std::collections::HashSet;

use crate::core::Defer;
use crate::record::{CallId, Record, RecordKind};

/// The seed's `pending_calls_at`: ids of `tool_use`s before `cut` with no
/// `tool_result` before `cut`. **O(n)**.
pub fn pending_calls_at(records: &[Record], cut: usize) -> HashSet<&str> {
    let mut used = HashSet::new();
    let mut satisfied = HashSet::new();
    for r in &records[..cut] {
        match r.kind() {
            RecordKind::ToolUse(id) => {
                used.insert(id.as_str());
            }
            RecordKind::ToolResult(id) => {
                satisfied.insert(id.as_str());
            }
            _ => {}
        }
    }
    used.retain(|id| !satisfied.contains(id));
    used
}

/// The seed's `orphan_results_at`: ids of `tool_result`s before `cut` whose `tool_use`
/// lies at or after `cut`. **O(n)**.
pub fn orphan_results_at(records: &[Record], cut: usize) -> HashSet<&str> {
    let used_after: HashSet<&CallId> = use_ids(&records[cut..]).collect();
    result_ids(&records[..cut])
        .filter(|id| used_after.contains(id))
        .map(CallId::as_str)
        .collect()
}

/// The ids of the `tool_use`s among `records`, in order. **O(n)** to run through.
fn use_ids(records: &[Record]) -> impl Iterator<Item = &CallId> {
    records.iter().filter_map(|r| match r.kind() {
        RecordKind::ToolUse(id) => Some(id),
        _ => None,
    })
}

/// The ids of the `tool_result`s among `records`, in order. **O(n)** to run through.
fn result_ids(records: &[Record]) -> impl Iterator<Item = &CallId> {
    records.iter().filter_map(|r| match r.kind() {
        RecordKind::ToolResult(id) => Some(id),
        _ => None,
    })
}

/// Whether `cut` is legal: both sets above are empty, and the record at `cut` (if any)
/// is not bound to the one before it (an extension of the seed: the seed has no bound
/// records). **O(n)**. `cut <= records.len()`.
pub fn is_legal_cut(records: &[Record], cut: usize) -> bool {
    pending_calls_at(records, cut).is_empty()
        && orphan_results_at(records, cut).is_empty()
        && !starts_bound(records, cut)
}

/// Whether the record at `cut` is bound to the previous one (so `cut` splits a message).
fn starts_bound(records: &[Record], cut: usize) -> bool {
    cut > 0 && records.get(cut).is_some_and(Record::is_bound_to_previous)
}

/// The seed's `select_legal_cut`, verbatim (including returning `len` whenever the
/// target covers the log, pending calls or not). Errors carry the same facts as the
/// tracker's [`Defer`]. **O(n · w)**.
///
/// # Errors
/// [`Defer`] when no legal cut lies within the lookback.
pub fn select_legal_cut_seed(
    records: &[Record],
    target_tokens: u64,
    max_lookback_tokens: u64,
) -> Result<usize, Defer> {
    let total: u128 = records.iter().map(|r| u128::from(r.tokens())).sum();
    if u128::from(target_tokens) >= total {
        return Ok(records.len());
    }
    let mut target_index = 0;
    let mut acc: u128 = 0;
    for (i, r) in records.iter().enumerate() {
        acc += u128::from(r.tokens());
        if acc >= u128::from(target_tokens) {
            target_index = i;
            break;
        }
    }
    search(
        records,
        target_tokens,
        max_lookback_tokens,
        target_index,
        target_index,
    )
}

/// The seed's selector with the one difference the tracker makes: when the target
/// covers the whole log, `len` is returned only if it is a legal cut; otherwise the
/// search walks back from the last record. **O(n · w)**.
///
/// # Errors
/// [`Defer`] when no legal cut lies within the lookback.
pub fn select_legal_cut(
    records: &[Record],
    target_tokens: u64,
    max_lookback_tokens: u64,
) -> Result<usize, Defer> {
    let total: u128 = records.iter().map(|r| u128::from(r.tokens())).sum();
    if u128::from(target_tokens) >= total {
        let len = records.len();
        if is_legal_cut(records, len) {
            return Ok(len);
        }
        // len is illegal, so the log is not empty.
        return search(records, target_tokens, max_lookback_tokens, len - 1, len);
    }
    select_legal_cut_seed(records, target_tokens, max_lookback_tokens)
}

/// The seed's floor walk and backward search from `target_index`.
fn search(
    records: &[Record],
    target_tokens: u64,
    lookback: u64,
    target_index: usize,
    wanted: usize,
) -> Result<usize, Defer> {
    let mut floor_index = target_index;
    let mut acc: u128 = 0;
    for j in (0..=target_index).rev() {
        acc += u128::from(records[j].tokens());
        if acc > u128::from(lookback) {
            break;
        }
        floor_index = j;
    }
    for cut in (floor_index..=target_index).rev() {
        if starts_bound(records, cut) {
            continue;
        }
        if !pending_calls_at(records, cut).is_empty() {
            continue;
        }
        if !orphan_results_at(records, cut).is_empty() {
            continue;
        }
        return Ok(cut);
    }
    let nearest_legal_below = (0..floor_index).rev().find(|&c| is_legal_cut(records, c));
    let nearest_legal_above =
        (target_index + 1..=records.len()).find(|&c| is_legal_cut(records, c));
    Err(Defer {
        target_tokens,
        lookback_tokens: lookback,
        target_index,
        floor: floor_index,
        nearest_legal_below,
        nearest_legal_above,
        waiting_on: unanswered_before(records, wanted),
    })
}

/// Calls before `cut` with no result anywhere in the log, in log order. **O(n)**.
fn unanswered_before(records: &[Record], cut: usize) -> Vec<CallId> {
    let answered: HashSet<&CallId> = result_ids(records).collect();
    use_ids(&records[..cut])
        .filter(|id| !answered.contains(id))
        .cloned()
        .collect()
}
