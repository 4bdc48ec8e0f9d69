//! The keep-recent cut for a provider's own compaction: where to split a transcript
//! so that the provider summarizes the messages before the cut and the client keeps
//! the ones after it verbatim (Anthropic leaves this choice to the client; see
//! `providers.md`, "Provider-native compaction").

use std::fmt;

use super::{Block, Role, Transcript};
use crate::AppendError;

pub use crate::compact::NativeCompaction;

impl NativeCompaction {
    /// The name the CLI uses (`cut --for NAME`). **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            NativeCompaction::Anthropic => "anthropic-compaction",
            NativeCompaction::OpenAi => "openai-compaction",
        }
    }

    /// The kind named `name` (as [`NativeCompaction::name`] spells it). **O(1)**.
    pub fn from_name(name: &str) -> Option<NativeCompaction> {
        [NativeCompaction::Anthropic, NativeCompaction::OpenAi]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

impl fmt::Display for NativeCompaction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How much of the recent history to keep verbatim.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Keep {
    /// At least this many tokens of the most recent messages.
    Tokens(u64),
    /// At least this many of the most recent user turns (a user message that is not
    /// only tool results starts one).
    Turns(usize),
}

/// A keep-recent cut: messages `..cut` go to the provider's compaction, `cut..` are
/// kept verbatim.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct NativeCut {
    /// The first kept message (a message index of the whole transcript).
    pub cut: usize,
    /// Tokens of the live history before the cut (what the provider summarizes).
    pub summarized_tokens: u64,
    /// Tokens kept verbatim.
    pub kept_tokens: u64,
}

/// Why no keep-recent cut exists.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NativeCutError {
    /// No cut meets the provider's conditions and keeps what was asked.
    #[error("no cut for {kind} keeps {keep}: {why}")]
    NoCut {
        /// For whose compaction.
        kind: NativeCompaction,
        /// What was to be kept, as asked (`N tokens`, `N turns`).
        keep: String,
        /// What stood in the way.
        why: String,
    },
    /// The tracker refused the transcript's records.
    #[error(transparent)]
    Tracker(#[from] AppendError),
}

/// The keep-recent cut of `t` for `kind`'s native compaction: the latest cut that keeps
/// what `keep` asks, among the cuts that meet the provider's conditions:
///
/// - a legal cut of the live history ([`Transcript::legal_message_cuts`]): no call
///   open before it, each call and its result on one side, thinking with its tool use,
///   a reasoning item with its item;
/// - something to summarize (after the start of the live history) and something kept;
/// - Anthropic: the first kept message's role differs from the last summarized one's,
///   and it is not a system message;
/// - OpenAI: only items before the most recent `compaction` item may be dropped, so
///   when the transcript holds one the cut is that item's message, whatever `keep`
///   asks.
///
/// **O(records)**: one tracker over the live history.
///
/// # Errors
/// [`NativeCutError::NoCut`] naming what stood in the way; the tracker's
/// [`AppendError`].
pub fn keep_recent_cut(
    t: &Transcript,
    kind: NativeCompaction,
    keep: Keep,
) -> Result<NativeCut, NativeCutError> {
    let live = t.live_from();
    let n = t.messages.len();
    let asked = match keep {
        Keep::Tokens(k) => format!("{k} tokens"),
        Keep::Turns(k) => format!("{k} turns"),
    };
    let no_cut = |why: &str| NativeCutError::NoCut {
        kind,
        keep: asked.clone(),
        why: why.to_owned(),
    };
    // Tokens from each message to the end.
    let mut suffix = vec![0u64; n + 1];
    for i in (0..n).rev() {
        suffix[i] = suffix[i + 1].saturating_add(t.messages[i].tokens());
    }
    let cut_at = |cut: usize| NativeCut {
        cut,
        summarized_tokens: suffix[live.min(cut)] - suffix[cut],
        kept_tokens: suffix[cut],
    };
    if kind == NativeCompaction::OpenAi && t.messages.get(live).is_some_and(|m| m.has_compaction())
    {
        return Ok(cut_at(live));
    }
    let candidates: Vec<usize> = t
        .legal_message_cuts()?
        .into_iter()
        .filter(|&c| c > live && c < n)
        .filter(|&c| match kind {
            NativeCompaction::Anthropic => {
                let (first, last) = (&t.messages[c], &t.messages[c - 1]);
                first.role != last.role && first.role != Role::System
            }
            NativeCompaction::OpenAi => true,
        })
        .collect();
    if candidates.is_empty() {
        return Err(no_cut(
            "no legal cut after the start of the live history meets the provider's conditions",
        ));
    }
    let limit = match keep {
        Keep::Tokens(k) => candidates
            .iter()
            .rev()
            .find(|&&c| suffix[c] >= k)
            .copied()
            .ok_or_else(|| no_cut("every cut keeps fewer tokens"))?,
        Keep::Turns(k) => {
            let starts: Vec<usize> = (live..n)
                .filter(|&i| {
                    let m = &t.messages[i];
                    m.role == Role::User
                        && m.blocks
                            .iter()
                            .any(|(b, _)| !matches!(b, Block::Result { .. }))
                })
                .collect();
            let Some(&start) = starts.len().checked_sub(k.max(1)).map(|s| &starts[s]) else {
                return Err(no_cut("the live history holds fewer user turns"));
            };
            candidates
                .iter()
                .rev()
                .find(|&&c| c <= start)
                .copied()
                .ok_or_else(|| no_cut("no cut falls at or before the first kept turn"))?
        }
    };
    Ok(cut_at(limit))
}
