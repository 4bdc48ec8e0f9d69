//! The prefix-binding model: which thinking blocks (Anthropic preserved thinking) and
//! reasoning items (OpenAI Responses) an edit of the log invalidates.
//!
//! A thinking block is bound to its **prefix**: what the provider's request holds
//! before it (the top-level `system` and `tools`, [`Transcript::head_print`], every
//! earlier message of the live history, and the earlier blocks of its own message).
//! A block stays valid across a rewrite only when it is sent back byte-identical and
//! its prefix is the same as when it was produced, with one allowance: thinking may
//! be removed as a contiguous oldest-first run (the oldest thinking blocks, none
//! kept between them). So an edit at position p (a message edited, reordered,
//! removed or inserted, `system` or `tools` changed, a thinking block left out from
//! between others) invalidates every thinking block after p. Anthropic refuses the
//! request (400, or drops the blocks silently with `drop_block`); OpenAI's newer
//! models drop the reasoning silently, and refuse an item with a server `id` whose
//! reasoning item went (strip the id).

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use crate::format::{Block, Format, Message, Transcript};

/// A block of the log after a rewrite that its provider no longer accepts as it was
/// produced (see [`invalidated_thinking`]).
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct Invalidated {
    /// The message of the log after that holds it.
    pub message: usize,
    /// The block, in [`Message::blocks`].
    pub block: usize,
    /// Its 1-based line.
    pub line: usize,
    /// The first message of the log after whose prefix differs from the log before
    /// (the edit that invalidated it); `None` when the block itself is new or edited.
    pub changed_at: Option<usize>,
    /// An OpenAI Responses item with a server `id` (not a reasoning item) whose
    /// reasoning item was dropped or invalidated: refused until the `id` is stripped.
    pub server_id: bool,
}

/// The thinking blocks (Anthropic Messages, Claude Code) and reasoning items (OpenAI
/// Responses, Codex) of `after`, a rewrite of `before`, that the rewrite invalidates,
/// in log order, with the Responses items whose server `id` is refused because their
/// reasoning went; empty for the other formats. A pure function of the two logs:
/// strategies can call it on a planned output to say what it would invalidate.
/// **O(blocks)** expected, of both logs.
pub fn invalidated_thinking(before: &Transcript, after: &Transcript) -> Vec<Invalidated> {
    let responses = match after.format {
        Format::AnthropicMessages | Format::ClaudeCode => false,
        Format::OpenAiResponses | Format::CodexRollout => true,
        _ => return Vec::new(),
    };
    // The oldest-first run of removed thinking: the longest run of `before`'s oldest
    // reasoning blocks that `after` no longer holds. Removing it is allowed. Blocks of
    // the same bytes (a thought thought twice) make "which copy went" ambiguous: the
    // run is then also read by copies (the oldest copies are the ones gone), and the
    // reading that invalidates less is the answer (bytes cannot tell them apart, for
    // the provider either).
    let kept: HashSet<u64> = reasoning(after).map(|(_, _, p)| p).collect();
    let by_bytes: HashSet<(usize, usize)> = reasoning(before)
        .take_while(|(_, _, p)| !kept.contains(p))
        .map(|(i, k, _)| (i, k))
        .collect();
    let mut gone: HashMap<u64, isize> = HashMap::new();
    for (_, _, p) in reasoning(before) {
        *gone.entry(p).or_default() += 1;
    }
    for (_, _, p) in reasoning(after) {
        *gone.entry(p).or_default() -= 1;
    }
    let by_copies: HashSet<(usize, usize)> = reasoning(before)
        .take_while(|(_, _, p)| {
            let left = gone.entry(*p).or_default();
            *left -= 1;
            *left >= 0
        })
        .map(|(i, k, _)| (i, k))
        .collect();
    let first = judge(before, after, &by_bytes, responses);
    if by_copies == by_bytes || first.is_empty() {
        return first;
    }
    let second = judge(before, after, &by_copies, responses);
    if second.len() < first.len() {
        second
    } else {
        first
    }
}

/// [`invalidated_thinking`] with the reasoning blocks of `before` at `skip` left out
/// (the removed oldest-first run). **O(blocks)** expected, of both logs.
fn judge(
    before: &Transcript,
    after: &Transcript,
    skip: &HashSet<(usize, usize)>,
    responses: bool,
) -> Vec<Invalidated> {
    let was = prefixes(before, skip);
    let now = prefixes(after, &HashSet::new());
    // Where the prefixes part: the first element of `after` that differs (`after`
    // extends `before` when that is past `before`'s end).
    let parted = was
        .elements
        .iter()
        .zip(&now.elements)
        .position(|(a, b)| a.1 != b.1)
        .unwrap_or(was.elements.len().min(now.elements.len()));
    let extends = parted >= was.elements.len();
    let changed_at = if extends {
        None
    } else {
        now.elements.get(parted).map(|e| e.0)
    };
    let mut valid_at: HashMap<u64, HashSet<u64>> = HashMap::new();
    for (&(i, k), &(h, _)) in &was.at {
        valid_at
            .entry(before.messages[i].prints[k])
            .or_default()
            .insert(h);
    }
    let mut out = Vec::new();
    let mut dead: HashSet<(usize, usize)> = HashSet::new();
    for (i, k, p) in reasoning(after) {
        let (h, e) = now.at.get(&(i, k)).copied().unwrap_or_default();
        let Some(hashes) = valid_at.get(&p) else {
            // Produced after everything `before` holds (appended): nothing to judge.
            if extends && e >= was.elements.len() {
                continue;
            }
            out.push(entry(after, i, k, None, false));
            dead.insert((i, k));
            continue;
        };
        if !hashes.contains(&h) {
            out.push(entry(after, i, k, changed_at, false));
            dead.insert((i, k));
        }
    }
    if responses {
        refused_ids(before, after, &dead, changed_at, &mut out);
        out.sort_by_key(|v| (v.message, v.block));
    }
    out
}

fn entry(
    t: &Transcript,
    i: usize,
    k: usize,
    changed_at: Option<usize>,
    server_id: bool,
) -> Invalidated {
    Invalidated {
        message: i,
        block: k,
        line: t.messages[i].block_line(k),
        changed_at,
        server_id,
    }
}

/// The reasoning blocks of the live history, in order: (message, block, print).
fn reasoning(t: &Transcript) -> impl Iterator<Item = (usize, usize, u64)> + '_ {
    live(t).flat_map(|(i, m)| {
        m.blocks
            .iter()
            .enumerate()
            .filter(|(k, (b, _))| matches!(b, Block::Reasoning) && m.prints[*k] != 0)
            .map(move |(k, _)| (i, k, m.prints[k]))
    })
}

fn live(t: &Transcript) -> impl Iterator<Item = (usize, &Message)> + '_ {
    t.messages.iter().enumerate().skip(t.live_from())
}

/// Each element of a log's prefix sequence with the message it belongs to, and the
/// rolling hash of the prefix before each block.
struct Prefixes {
    /// (message, element): a message's start (its role) and each block's print.
    elements: Vec<(usize, u64)>,
    /// (message, block) -> hash of every element before the block, and the block's
    /// element index.
    at: HashMap<(usize, usize), (u64, usize)>,
}

fn roll(h: u64, e: u64) -> u64 {
    let mut s = std::hash::DefaultHasher::new();
    (h, e).hash(&mut s);
    s.finish()
}

/// The prefix sequence of `t`'s live history: the head, then for each message its
/// start and its blocks, leaving out the reasoning blocks at the (message, block)
/// positions in `skip` (and a message left with nothing). **O(blocks)**.
fn prefixes(t: &Transcript, skip: &HashSet<(usize, usize)>) -> Prefixes {
    let mut elements = vec![(t.live_from(), t.head_print)];
    let mut at = HashMap::new();
    let mut h = roll(0, t.head_print);
    for (i, m) in live(t) {
        let shown: Vec<usize> = (0..m.blocks.len())
            .filter(|&k| !(matches!(m.blocks[k].0, Block::Reasoning) && skip.contains(&(i, k))))
            .collect();
        if shown.is_empty() {
            continue;
        }
        let start = 0x5eed ^ m.role as u64;
        elements.push((i, start));
        h = roll(h, start);
        for k in shown {
            at.insert((i, k), (h, elements.len()));
            let p = m.prints[k];
            elements.push((i, p));
            h = roll(h, p);
        }
    }
    Prefixes { elements, at }
}

/// The print of each item (a block with a print that is no reasoning) of `blocks`
/// (`(block, print)` in log order) -> the prints of the reasoning blocks right before
/// it; `None` once it came without one (then any place is fine). `binds(r)`: whether
/// a reasoning block of print `r` binds the item after it. **O(blocks)** expected.
pub(super) fn followed_reasoning<'b>(
    blocks: impl Iterator<Item = (&'b Block, u64)>,
    binds: impl Fn(u64) -> bool,
) -> HashMap<u64, Option<HashSet<u64>>> {
    let mut needs: HashMap<u64, Option<HashSet<u64>>> = HashMap::new();
    let mut previous: Option<(&Block, u64)> = None;
    for (b, p) in blocks {
        if p != 0 && !matches!(b, Block::Reasoning) {
            let r = match previous {
                Some((Block::Reasoning, r)) if binds(r) => Some(r),
                _ => None,
            };
            let e = needs.entry(p).or_insert_with(|| r.map(|_| HashSet::new()));
            match (e.as_mut(), r) {
                (Some(set), Some(r)) => {
                    set.insert(r);
                }
                (Some(_), None) => *e = None,
                (None, _) => {}
            }
        }
        previous = Some((b, p));
    }
    needs
}

/// The Responses items of `after` with a server `id` that followed a reasoning item
/// in `before` which, in `after`, is gone from before them or invalidated.
fn refused_ids(
    before: &Transcript,
    after: &Transcript,
    dead: &HashSet<(usize, usize)>,
    changed_at: Option<usize>,
    out: &mut Vec<Invalidated>,
) {
    let blocks = live(before).flat_map(|(_, m)| m.blocks.iter().zip(&m.prints));
    let needs = followed_reasoning(blocks.map(|((b, _), &p)| (b, p)), |_| true);
    let mut previous: Option<(usize, usize, &Block, u64)> = None;
    for (i, m) in live(after) {
        for (k, (b, _)) in m.blocks.iter().enumerate() {
            let p = m.prints[k];
            if m.signed.contains(&k) && !matches!(b, Block::Reasoning) {
                if let Some(Some(r)) = needs.get(&p) {
                    let kept = previous.is_some_and(|(pi, pk, pb, pp)| {
                        matches!(pb, Block::Reasoning)
                            && r.contains(&pp)
                            && !dead.contains(&(pi, pk))
                    });
                    if !kept {
                        out.push(entry(after, i, k, changed_at, true));
                    }
                }
            }
            previous = Some((i, k, b, p));
        }
    }
}
