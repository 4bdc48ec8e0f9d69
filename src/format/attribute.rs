//! Which step of a rewrite invalidated which thinking. The prefix-binding model
//! ([`invalidated_thinking`](super::invalidated_thinking)) judges a rewrite as a whole;
//! a pipeline's report also says, on each step, how many of the blocks it invalidates
//! lie after that step's first edit ([`StepReport::invalidated_thinking`]): an edit at a
//! position invalidates the thinking bound to every prefix that holds it.
//!
//! Clearing thinking is judged apart: an oldest-first run of cleared thinking
//! invalidates nothing, so a step is blamed for the thinking it clears only where no
//! other edit comes before the block.

use std::cell::Cell;
use std::collections::{HashMap, VecDeque};

use super::build::TranscriptLog;
use super::{Invalidated, Transcript};
use crate::compact::replay::{InPlace, replay};
use crate::compact::strategy::StepReport;

/// A block of the transcript a log was built from: (message, block).
type At = (usize, usize);

/// Where a step first touched the log it ran on, in blocks of the transcript the log
/// was built from.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct Touched {
    /// The first block it edited in place, summarized or dropped, other than by
    /// clearing thinking.
    first: Option<At>,
    /// The first thinking block it cleared.
    first_thinking: Option<At>,
}

/// Per step of `steps` (in the order they ran on `built.log`), where it first touched
/// the transcript `built` was read from. **O(records + edits)** per step. A step that
/// does not replay (it cannot happen for steps the writer wrote) touches nothing.
pub(crate) fn touched(built: &TranscriptLog, steps: &[&StepReport]) -> Vec<Touched> {
    let at = |r: usize| (built.owner[r], built.block[r]);
    // Each record of the current log stands for the first original record it covers.
    let mut items: Vec<usize> = (0..built.owner.len()).collect();
    let mut out = Vec::with_capacity(steps.len());
    for step in steps {
        let (first, first_thinking) = (Cell::new(None::<At>), Cell::new(None::<At>));
        let earlier = |slot: &Cell<Option<At>>, b: At| {
            slot.set(Some(slot.get().map_or(b, |a| a.min(b))));
        };
        let next = replay(
            std::mem::take(&mut items),
            [*step],
            |&mut r, how| {
                let slot = if how == InPlace::ClearedThinking {
                    &first_thinking
                } else {
                    &first
                };
                earlier(slot, at(r));
                Ok(())
            },
            |covered, summary| {
                let r = *covered.iter().min()?;
                earlier(&first, at(r));
                summary.then_some(r)
            },
        );
        out.push(Touched {
            first: first.get(),
            first_thinking: first_thinking.get(),
        });
        match next {
            Ok(next) => items = next,
            Err(_) => break,
        }
    }
    out.resize(steps.len(), Touched::default());
    out
}

/// For each step of a round that rewrote `before` into `after`, how many of
/// `invalidated` (blocks of `after` that the rewrite invalidates) lie after the step's
/// first edit of `before`; a block no edit comes before is counted on the steps whose
/// cleared thinking comes before it. Blocks are found in `before` by their print (a
/// kept block keeps its bytes), in order. **O(blocks + invalidated x steps)**.
pub(crate) fn per_step(
    before: &Transcript,
    after: &Transcript,
    invalidated: &[Invalidated],
    touched: &[Touched],
) -> Vec<usize> {
    let mut counts = vec![0; touched.len()];
    if invalidated.is_empty() {
        return counts;
    }
    let mut by_print: HashMap<u64, VecDeque<At>> = HashMap::new();
    for (i, m) in before.messages.iter().enumerate().skip(before.live_from()) {
        for (k, p) in m.prints.iter().enumerate() {
            by_print.entry(*p).or_default().push_back((i, k));
        }
    }
    for inv in invalidated {
        let print = after
            .messages
            .get(inv.message)
            .and_then(|m| m.prints.get(inv.block));
        let Some(at) = print.and_then(|p| by_print.get_mut(p)?.pop_front()) else {
            continue;
        };
        let mut blamed = false;
        for (count, t) in counts.iter_mut().zip(touched) {
            if t.first.is_some_and(|f| f < at) {
                *count += 1;
                blamed = true;
            }
        }
        if !blamed {
            for (count, t) in counts.iter_mut().zip(touched) {
                if t.first_thinking.is_some_and(|f| f < at) {
                    *count += 1;
                }
            }
        }
    }
    counts
}
