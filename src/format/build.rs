//! From messages to records: which messages a provider binds to the one before, the
//! record sequence the tracker reads, and the live history as a compaction [`Log`]
//! (the one Transcript -> Log builder, [`log_of`]).

use std::collections::{HashMap, HashSet};

use super::{Block, Format, Role, Transcript, gemini};
use crate::compact::{Entry, Log, Payload, Unit};
use crate::{AppendError, CallId, Record};

/// Assigns Gemini's missing ids and marks the messages a provider binds to the one
/// before them. **O(blocks)**.
///
/// - OpenAI Chat: a `tool` message (the run of tool messages stays with the assistant
///   message that called; a retained log never starts with one).
/// - OpenAI Responses and Codex: the item after a `reasoning` item ("Item 'rs_…' of
///   type 'reasoning' was provided without its required following item").
/// - Gemini: a function response turn ("function response turn comes immediately
///   after a function call turn").
/// - Anthropic and Claude Code: thinking blocks and their `tool_use` share a message,
///   which is bound already; nothing more.
///
/// A message holding a provider's [`Block::Compaction`] starts a new history, and a
/// message that starts a new history (after a compaction boundary) is never bound.
/// (The records also bind an Anthropic mid-conversation `system` message to the
/// messages on both sides of it: see [`entries`].)
pub(crate) fn finish(t: &mut Transcript) {
    if t.format == Format::Gemini {
        gemini::assign_ids(&mut t.messages);
    }
    let mut after_reasoning = false;
    for m in &mut t.messages {
        let bound = match t.format {
            Format::OpenAiChat => m.role == Role::Tool,
            Format::OpenAiResponses | Format::CodexRollout => after_reasoning,
            Format::Gemini => m.results().next().is_some(),
            _ => m.bound,
        };
        // A provider's compaction (Anthropic `compaction` block, Responses
        // `compaction` item): the live history starts at the message holding it.
        m.starts_history |= m.has_compaction();
        m.bound = bound && !m.starts_history;
        after_reasoning = matches!(m.blocks.last(), Some((Block::Reasoning, _)));
    }
}

/// See [`Transcript::records`].
pub(crate) fn records(t: &Transcript, from: usize) -> (Vec<Record>, Vec<usize>) {
    let built = walk(t, from, false);
    let records = built.entries.into_iter().map(|e| e.record).collect();
    (records, built.owner)
}

/// A transcript's live history as a compaction [`Log`], with where each record came
/// from.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct TranscriptLog {
    /// The log: one entry per block of the live history, with the payload facts a
    /// strategy needs (tool names and arguments, first lines of results, thinking).
    pub log: Log,
    /// The message of each record.
    pub owner: Vec<usize>,
    /// The block of each record within its message.
    pub block: Vec<usize>,
    /// Records to pin at the front: the message that opens the live history after a
    /// compaction boundary (a Codex `compacted` item, Claude Code's summary), which a
    /// strategy must not edit or summarize away.
    pub pinned: usize,
    /// `id#N` -> `id`, for the calls whose reused id the log renamed: a ledger names a
    /// call as the transcript spells it.
    pub renamed: HashMap<CallId, CallId>,
}

impl TranscriptLog {
    /// The id call `id` of the log has in the transcript (a renamed reused id's
    /// original). **O(1)**.
    #[cfg(feature = "testing")]
    pub fn original(&self, id: &CallId) -> CallId {
        self.renamed.get(id).unwrap_or(id).clone()
    }
}

/// The log of `t`'s live history, each record with its payload: calls with their
/// tool name and arguments, results with their first line, thinking and reasoning as
/// [`Payload::Reasoning`] (signed: providers sign it, or bind it to what follows), an
/// earlier summary's prose and units carried as data, control items, the blocks
/// that loaded a tool and the turn a code-execution script waits on (its last
/// assistant message and the answer) as [`Payload::Kept`] (walls no strategy
/// touches). The one
/// Transcript -> Log builder: `--target` rewrites and the strategies both read a
/// transcript through it. **O(records)**.
///
/// # Errors
/// The tracker's [`AppendError`] (a log too long or too large).
pub fn log_of(t: &Transcript) -> Result<TranscriptLog, AppendError> {
    let from = t.live_from();
    let built = walk(t, from, true);
    let log = Log::from_entries(built.entries)?;
    let pinned = match t.messages.get(from) {
        Some(first) if first.starts_history || first.role == Role::Compacted => {
            built.owner.iter().take_while(|&&m| m == from).count()
        }
        _ => 0,
    };
    Ok(TranscriptLog {
        log,
        owner: built.owner,
        block: built.block,
        pinned,
        renamed: built.renamed,
    })
}

/// Entries, the message and block index of each, and the original id of every
/// renamed call.
struct Built {
    entries: Vec<Entry>,
    owner: Vec<usize>,
    /// The block of each entry within its message.
    block: Vec<usize>,
    /// `id#N` -> `id`, for the calls whose id came back.
    renamed: HashMap<CallId, CallId>,
}

/// `id#n` for the smallest `n` at or past `*n` that no record carries yet (an earlier
/// compaction's ledger may list a renamed `id#n` itself), leaving `*n` there.
/// **O(k)** for `k` suffixes taken.
fn fresh(id: &CallId, n: &mut usize, seen: &HashSet<CallId>) -> CallId {
    *n = (*n).max(2);
    loop {
        let candidate = CallId::from(format!("{id}#{n}"));
        if !seen.contains(&candidate) {
            return candidate;
        }
        *n += 1;
    }
}

fn walk(t: &Transcript, from: usize, payloads: bool) -> Built {
    let mut entries = Vec::new();
    let mut owner = Vec::new();
    let mut blocks = Vec::new();
    let mut renamed = HashMap::new();
    // Original id -> the id its records carry: a reused id (OpenAI Chat pairs calls
    // with the run of tool messages right after them, so SWE-agent reuses ids across
    // turns) gets a `#N` suffix from its second call on, and the results after it
    // follow the renamed call. An earlier summary's units count as calls.
    let mut current: HashMap<CallId, CallId> = HashMap::new();
    let mut uses: HashMap<CallId, usize> = HashMap::new();
    // Every id the tracker has seen, for summaries (whose ids must be new).
    let mut seen: HashSet<CallId> = HashSet::new();
    // The blocks that loaded a tool: kept where they are ([`Payload::Kept`]).
    let loaders: HashSet<(usize, usize)> = t
        .tools
        .iter()
        .filter(|c| c.loaded && c.message >= from)
        .map(|c| (c.message, c.block))
        .collect();
    // An Anthropic mid-conversation `system` message (not the first of the live
    // history) is placed right after a user or tool-result turn and right before an
    // assistant turn: it is bound to both, so no cut falls beside it.
    let glued = |i: usize| {
        t.format == Format::AnthropicMessages
            && i > from
            && t.messages.get(i).is_some_and(|m| m.role == Role::System)
    };
    // Anthropic programmatic tool calling: a code-execution script waits on the
    // calls of the last assistant message, which the message after it answers; the
    // request carries both to the script, so neither is summarized or edited.
    let script = super::rules::waiting_script(&t.messages)
        .map(|(a, _)| a)
        .filter(|&a| a >= from);
    let waiting = |i: usize| script.is_some_and(|a| i == a || i == a + 1);
    for (index, m) in t.messages.iter().enumerate().skip(from) {
        let glued_here = glued(index) || (index > 0 && glued(index - 1));
        for (k, (block, tokens)) in m.blocks.iter().enumerate() {
            // A Codex `compacted` history replacement is sent back as it is: its
            // calls and results carry no payload a strategy could edit.
            let editable = m.role != Role::Compacted;
            let plain = || match m.role {
                Role::Assistant | Role::Item => Record::assistant(*tokens),
                _ => Record::user(*tokens),
            };
            let (record, payload) = match block {
                Block::Call {
                    id,
                    name,
                    arguments,
                } if !id.is_empty() => {
                    let n = uses.entry(id.clone()).or_insert(0);
                    *n += 1;
                    let renamed_id = if *n == 1 && !seen.contains(id) {
                        id.clone()
                    } else {
                        let r = fresh(id, n, &seen);
                        renamed.insert(r.clone(), id.clone());
                        r
                    };
                    current.insert(id.clone(), renamed_id.clone());
                    seen.insert(renamed_id.clone());
                    let payload = (payloads && editable).then(|| Payload::Call {
                        name: (!name.is_empty()).then(|| name.clone()),
                        arguments: Some(arguments.clone()),
                    });
                    (Record::tool_use(renamed_id, *tokens), payload)
                }
                Block::Result { id, first_line } if !id.is_empty() => {
                    let renamed_id = current.get(id).unwrap_or(id).clone();
                    seen.insert(renamed_id.clone());
                    let payload = (payloads && editable).then(|| Payload::Result {
                        status: None,
                        content: Some(first_line.clone()),
                    });
                    (Record::tool_result(renamed_id, *tokens), payload)
                }
                Block::Summary(parts) => {
                    // Its units count as calls: an id it covers again (a reused id, or
                    // one the log already holds) is renamed as a reused call is.
                    let mut units: Vec<Unit> = Vec::with_capacity(parts.units.len());
                    for u in parts.units.iter().filter(|u| !u.call_id.is_empty()) {
                        let n = uses.entry(u.call_id.clone()).or_insert(0);
                        *n += 1;
                        let id = if *n == 1 && !seen.contains(&u.call_id) {
                            u.call_id.clone()
                        } else {
                            fresh(&u.call_id, n, &seen)
                        };
                        if !seen.insert(id.clone()) {
                            continue;
                        }
                        if id != u.call_id {
                            renamed.insert(id.clone(), u.call_id.clone());
                        }
                        current.insert(u.call_id.clone(), id.clone());
                        units.push(Unit {
                            call_id: id,
                            ..u.clone()
                        });
                    }
                    let record = Record::summary(units.iter().map(|u| u.call_id.clone()), *tokens);
                    let payload = payloads.then(|| Payload::Summary {
                        text: Some(parts.prose.clone()),
                        units,
                        orphans: parts.orphans.clone(),
                    });
                    (record, payload)
                }
                // Thinking and reasoning of an editable message: the clear-thinking
                // strategy's target (signed: providers sign it, or bind it to what
                // follows).
                Block::Reasoning
                    if payloads && editable && matches!(m.role, Role::Assistant | Role::Item) =>
                {
                    (plain(), Some(Payload::Reasoning { signed: true }))
                }
                _ => (plain(), None),
            };
            // A control item, or a block that loaded a tool: a wall the strategies keep
            // where it is, its record's kind (and pairing) unchanged.
            let kept = matches!(block, Block::Control(_))
                || loaders.contains(&(index, k))
                || waiting(index);
            let payload = if payloads && kept {
                Some(Payload::Kept)
            } else {
                payload
            };
            let bound = !entries.is_empty() && (k > 0 || m.bound || glued_here);
            let record = if bound {
                record.bound_to_previous()
            } else {
                record
            };
            entries.push(Entry::new(record, payload.unwrap_or_default()));
            owner.push(index);
            blocks.push(k);
        }
    }
    Built {
        entries,
        owner,
        block: blocks,
        renamed,
    }
}
