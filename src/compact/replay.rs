//! Replaying a run's step reports onto what stands beside the log's records: a
//! transcript's blocks (`format::edit`), rig's message parts (`cutpoint-rig`), any
//! caller's own items. One place decides what a [`StepReport`]'s positions mean, so
//! every adapter maps an edit to the same item.
//!
//! The positions of a step's edits and regions are those of the log as that step
//! found it (before any of its own edits); the regions of one step do not overlap.

use super::strategy::{Edit, StepReport};

/// What an in-place edit did to the record it names.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum InPlace {
    /// The tool result now holds the placeholder ([`Edit::ClearedResult`]).
    ClearedResult,
    /// The call now has `{}` for arguments ([`Edit::ClearedInput`]).
    ClearedInput,
    /// The thinking record was cleared ([`Edit::ClearedThinking`]).
    ClearedThinking,
}

/// A step report that does not fit the items it is replayed on (it came from another
/// log, or the items were not one per record).
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[error("step {step}: {what}")]
#[non_exhaustive]
pub struct ReplayError {
    /// Which step (0-based, in the order given).
    pub step: usize,
    /// What did not fit.
    pub what: String,
}

/// Replays `steps`, in order, onto `items` (one per record of the log the first step
/// ran on), and returns one item per record of the log the last step left:
///
/// - an in-place edit calls `edit` on the item at its position (an `Err` from it is
///   the step's error: say why the item cannot take it);
/// - a region (`Replaced` or `Removed`) calls `region` with the items it covers, in
///   order, and `true` when the region became one summary record; what `region`
///   returns (`Some` for a summary, whose record then stands where the region
///   started) takes their place.
///
/// **O(items + edits)** per step that has a region (one pass over the items for all
/// of a step's regions), **O(edits)** for a step without one.
///
/// # Errors
/// [`ReplayError`] when a position is out of range, regions overlap or are empty,
/// `edit` refuses, or a summary region yields no item.
pub fn replay<'a, T>(
    mut items: Vec<T>,
    steps: impl IntoIterator<Item = &'a StepReport>,
    mut edit: impl FnMut(&mut T, InPlace) -> Result<(), String>,
    mut region: impl FnMut(&[T], bool) -> Option<T>,
) -> Result<Vec<T>, ReplayError> {
    let mut regions: Vec<(usize, usize, bool)> = Vec::new();
    let mut buffer: Vec<T> = Vec::new();
    for (step, report) in steps.into_iter().enumerate() {
        let fail = |what: String| ReplayError { step, what };
        regions.clear();
        for e in &report.edits {
            let (at, how) = match e {
                Edit::ClearedResult { at } => (*at, InPlace::ClearedResult),
                Edit::ClearedInput { at } => (*at, InPlace::ClearedInput),
                Edit::ClearedThinking { at } => (*at, InPlace::ClearedThinking),
                Edit::Replaced { start, end } => {
                    regions.push((*start, *end, true));
                    continue;
                }
                Edit::Removed { start, end } => {
                    regions.push((*start, *end, false));
                    continue;
                }
            };
            let len = items.len();
            let item = items
                .get_mut(at)
                .ok_or_else(|| fail(format!("{e:?} is past the {len} records")))?;
            edit(item, how).map_err(|why| fail(format!("{e:?}: {why}")))?;
        }
        if regions.is_empty() {
            continue;
        }
        regions.sort_unstable_by_key(|r| r.0);
        let len = items.len();
        let mut old = std::mem::take(&mut items)
            .into_iter()
            .enumerate()
            .peekable();
        let mut at = 0;
        for &(start, end, summary) in &regions {
            if start >= end || end > len || start < at {
                return Err(fail(format!(
                    "region {start}..{end} of {len} records (the previous ended at {at})"
                )));
            }
            while let Some((_, item)) = old.next_if(|(i, _)| *i < start) {
                items.push(item);
            }
            buffer.clear();
            while let Some((_, item)) = old.next_if(|(i, _)| *i < end) {
                buffer.push(item);
            }
            match (region(&buffer, summary), summary) {
                (Some(item), true) => items.push(item),
                (None, false) => {}
                (Some(_), false) => {
                    return Err(fail(format!(
                        "region {start}..{end} was removed, yet an item was given for it"
                    )));
                }
                (None, true) => {
                    return Err(fail(format!(
                        "region {start}..{end} became a summary, yet no item was given for it"
                    )));
                }
            }
            at = end;
        }
        items.extend(old.map(|(_, item)| item));
    }
    Ok(items)
}
