//! Provider rules, one file per provider: each violation names the provider's own rule and the
//! error text the provider returns (see `providers.md`), with the message, its line
//! and the call id.

use std::fmt;

use std::collections::{HashMap, HashSet};

use super::{Format, Message, Transcript};
use crate::CallId;

mod against;
mod prefix;

pub use against::check_against;
pub(crate) use anthropic::waiting_script;
pub use prefix::{Invalidated, invalidated_thinking};
mod anthropic;
mod gemini;
mod gemini_cli;
mod openai_chat;
mod openai_responses;
mod records;

/// A provider rule a log can break. Non-exhaustive: later versions check more.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Rule {
    /// Anthropic rule 1: every `tool_use` of assistant message i has a `tool_result`
    /// in message i+1.
    AnthropicToolUseWithoutResult,
    /// Anthropic rule 2: every `tool_result` answers a `tool_use` of the immediately
    /// previous assistant message.
    AnthropicUnexpectedToolResult,
    /// Anthropic rule 3: in a user message the `tool_result` blocks come first.
    AnthropicResultAfterText,
    /// Anthropic mid-conversation system messages: a `{"role":"system"}` entry of
    /// `messages` is not first; comes right after a user (or tool-result) turn, or
    /// an assistant turn ending in a server tool use; comes before an assistant turn
    /// or at the end; never follows another one (so never between a `tool_use` and
    /// its `tool_result`).
    AnthropicSystemMessagePlacement,
    /// Anthropic programmatic tool calling: the user message answering a `tool_use`
    /// whose `caller` is a server code-execution tool holds only `tool_result`
    /// blocks.
    AnthropicProgrammaticResultNotAlone,
    /// Anthropic programmatic tool calling: a request that answers the calls a
    /// code-execution script made (the last assistant message's programmatic
    /// `tool_use`s, answered in the message after it) names the script's
    /// `container`. Checked on request objects ([`Transcript::names_container`]).
    AnthropicProgrammaticContainerMissing,
    /// Anthropic programmatic tool calling: the results of the calls a code-execution
    /// script made (the last assistant message's) were written after the script's
    /// container expired ([`Note::ContainerExpiresAt`](super::Note::ContainerExpiresAt),
    /// [`Note::WrittenAt`](super::Note::WrittenAt): Claude Code records carry both).
    AnthropicProgrammaticContainerExpired,
    /// Anthropic programmatic tool calling: the log before answers the calls a
    /// code-execution script waits on (its last assistant message's, in the message
    /// after it); the log after does not send those answers right after those calls
    /// (a compaction summarized or edited the turn). Needs the log before and after
    /// ([`check_against`]).
    AnthropicProgrammaticAnswerLost,
    /// OpenAI Responses `compaction_trigger`: the last input item of a request, with
    /// no `id`, never persisted (so never in a Codex rollout).
    ResponsesCompactionTriggerMisplaced,
    /// Preserved thinking (Anthropic) and reasoning items (OpenAI): a thinking block
    /// or reasoning item of the log after is bound to its prefix, which the rewrite
    /// changed ([`invalidated_thinking`]); or a Responses item with a server `id`
    /// lost its reasoning item. Needs the log before and after ([`check_against`]).
    ThinkingPrefixChanged,
    /// A control item of the log before (an Anthropic `tool_addition`,
    /// `tool_removal`, `output_config`, `clear_at` or `fallback` block; the latest
    /// OpenAI `configuration_update`) is missing from, or changed in, the log after:
    /// control items stay where they were sent. Needs the log before and after
    /// ([`check_against`]).
    ControlItemLost,
    /// The tool manifest: a tool the log before loaded (by a `tool_reference`, a
    /// `tool_addition`, a `tool_search_output`) is not loaded in the log after: the
    /// block that loaded it was cleared or summarized. Needs the log before and after
    /// ([`check_against`]).
    ToolUnloaded,
    /// Anthropic task budgets: a request that rewrote the history of one with an
    /// `output_config.task_budget` (a client compaction) passes `remaining`, what is
    /// left of the budget; without it the model's countdown restarts at `total`. Needs
    /// the log before and after ([`check_against`]).
    AnthropicTaskBudgetNotCarried,
    /// OpenAI Chat rule 1: each call id is answered in the run of tool messages right
    /// after the assistant message.
    ChatCallWithoutResponse,
    /// OpenAI Chat rule 2: a `tool` message follows an assistant message with `tool_calls`.
    ChatToolWithoutCalls,
    /// OpenAI Chat rule 3: the `tool_call_id` belongs to that assistant message.
    ChatToolCallIdNotFound,
    /// OpenAI Responses rule 1: every call has an output with the same `call_id`.
    ResponsesNoOutput,
    /// OpenAI Responses rule 2: every output has its call.
    ResponsesNoCall,
    /// OpenAI Responses rule 3: a `reasoning` item is followed by the item it precedes.
    ResponsesReasoningWithoutFollower,
    /// Gemini rule 1: a function response turn comes immediately after a function call turn.
    GeminiResponseNotAfterCall,
    /// Gemini rule 2: a function call turn comes right after a user turn or a function
    /// response turn, so a log cannot start with one.
    GeminiCallTurnFirst,
    /// Gemini rule 3: as many function response parts as function call parts.
    GeminiPartCountMismatch,
    /// Pairing (records JSONL): a `tool_use` without a `tool_result` after it.
    UnansweredCall,
    /// Pairing (records JSONL): a `tool_result` with no `tool_use` before it.
    OrphanResult,
    /// Pairing: a second result for one call id.
    DuplicateResult,
    /// Two calls share an id, so their results cannot be told apart. Checked for
    /// every format but OpenAI Chat and Gemini (Gemini CLI too), which pair a call with the turn right
    /// after it and so allow an id to come back in a later turn.
    DuplicateCallId,
    /// A call never answered in a history that the runtime's own compaction (a Claude
    /// Code `compact_boundary`, a Codex `compacted` line) later replaced. The provider
    /// no longer receives that history, so no request fails on it; but the call's
    /// outcome is lost, and when the call was still in flight as the compaction fired,
    /// that is the very failure cutpoint prevents.
    CallOpenAtCompaction,
    /// Anthropic compaction: a `compaction` block goes first (threshold compaction:
    /// the response begins with it; on-demand: first in `messages`). One that is not
    /// the first block of its message is refused (`compaction_block_misplaced`).
    AnthropicCompactionMisplaced,
    /// Anthropic on-demand compaction: exactly one compaction block is sent. A second
    /// one is not refused: the API ignores everything before the latest, the earlier
    /// summary included (silent).
    AnthropicCompactionRepeated,
    /// Anthropic compaction: messages the compaction summarized are removed. One left
    /// after the block (the same block bytes, or a call with the same id as one before
    /// the block) is sent twice: not refused (silent).
    AnthropicSummarizedAfterCompaction,
    /// Anthropic rule 1 of thinking: the latest assistant message's `thinking` /
    /// `redacted_thinking` blocks go back exactly as received. Needs the log before
    /// and after ([`check_against`]).
    AnthropicLatestThinkingModified,
    /// A provider compaction (Anthropic `compaction` block, OpenAI `compaction` item)
    /// of the log before is missing from, or changed in, the log after: the summary is
    /// gone (Anthropic: not refused, silent) or the opaque item was modified. Needs the
    /// log before and after ([`check_against`]).
    CompactionLost,
    /// OpenAI Responses compaction: items before the most recent `compaction` item may
    /// be dropped, not edited; one in the log after matches no item of the log before.
    /// Needs the log before and after ([`check_against`]).
    ResponsesEditedBeforeCompaction,
    /// Gemini thought signatures: in the current turn, the first `functionCall` part of
    /// each model step carries its `thoughtSignature`. Checked when the log holds any
    /// signature (a thinking model's log); earlier turns are not checked.
    GeminiMissingThoughtSignature,
    /// OpenAI Responses: in the current turn (after the last user message), an item the
    /// model produced right after a `reasoning` item (a call, an assistant message)
    /// goes back with that reasoning item before it; reasoning of earlier turns may be
    /// dropped. Needs the log before and after ([`check_against`]).
    ResponsesItemWithoutReasoning,
}

impl Rule {
    /// The rule's short name, as `check` prints it. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            Rule::AnthropicToolUseWithoutResult => "anthropic/tool-use-without-result",
            Rule::AnthropicUnexpectedToolResult => "anthropic/unexpected-tool-result",
            Rule::AnthropicResultAfterText => "anthropic/tool-result-after-text",
            Rule::AnthropicSystemMessagePlacement => "anthropic/system-message-placement",
            Rule::AnthropicProgrammaticResultNotAlone => "anthropic/programmatic-result-not-alone",
            Rule::AnthropicProgrammaticContainerMissing => {
                "anthropic/programmatic-container-missing"
            }
            Rule::AnthropicProgrammaticContainerExpired => {
                "anthropic/programmatic-container-expired"
            }
            Rule::AnthropicProgrammaticAnswerLost => "anthropic/programmatic-answer-lost",
            Rule::ResponsesCompactionTriggerMisplaced => {
                "openai-responses/compaction-trigger-misplaced"
            }
            Rule::ThinkingPrefixChanged => "reasoning/prefix-changed",
            Rule::ControlItemLost => "compaction/control-item-lost",
            Rule::ToolUnloaded => "compaction/tool-unloaded",
            Rule::AnthropicTaskBudgetNotCarried => "anthropic/task-budget-remaining-missing",
            Rule::ChatCallWithoutResponse => "openai-chat/tool-call-without-response",
            Rule::ChatToolWithoutCalls => "openai-chat/tool-without-tool-calls",
            Rule::ChatToolCallIdNotFound => "openai-chat/tool-call-id-not-found",
            Rule::ResponsesNoOutput => "openai-responses/no-tool-output",
            Rule::ResponsesNoCall => "openai-responses/no-tool-call",
            Rule::ResponsesReasoningWithoutFollower => {
                "openai-responses/reasoning-without-following-item"
            }
            Rule::GeminiResponseNotAfterCall => "gemini/response-not-after-call",
            Rule::GeminiCallTurnFirst => "gemini/call-turn-first",
            Rule::GeminiPartCountMismatch => "gemini/part-count-mismatch",
            Rule::UnansweredCall => "pairing/unanswered-call",
            Rule::OrphanResult => "pairing/orphan-result",
            Rule::DuplicateResult => "pairing/duplicate-result",
            Rule::DuplicateCallId => "pairing/duplicate-call-id",
            Rule::CallOpenAtCompaction => "compaction/call-open-when-compacted",
            Rule::AnthropicCompactionMisplaced => "anthropic/compaction-block-misplaced",
            Rule::AnthropicCompactionRepeated => "anthropic/compaction-block-repeated",
            Rule::AnthropicSummarizedAfterCompaction => {
                "anthropic/summarized-message-after-compaction"
            }
            Rule::AnthropicLatestThinkingModified => "anthropic/latest-thinking-modified",
            Rule::CompactionLost => "compaction/provider-compaction-lost",
            Rule::ResponsesEditedBeforeCompaction => "openai-responses/edited-before-compaction",
            Rule::GeminiMissingThoughtSignature => "gemini/missing-thought-signature",
            Rule::ResponsesItemWithoutReasoning => "openai-responses/item-without-reasoning",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One broken rule.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct RuleViolation {
    /// The rule.
    pub rule: Rule,
    /// Index of the message that breaks it (0-based, in file order).
    pub message: usize,
    /// 1-based line of the input that holds the offending block (the record holding
    /// it in JSONL, where one message may span several records).
    pub line: usize,
    /// The call id concerned, if any.
    pub call_id: Option<CallId>,
    /// For an unanswered call: `true` when nothing but calls, results and reasoning
    /// follow it (the call is still in flight at the very end of the log); `false` when
    /// the log moved on without its answer, which is always a defect.
    pub pending_at_end: bool,
    /// The provider's error text for it, filled in.
    pub text: String,
}

impl fmt::Display for RuleViolation {
    /// `LINE: rule: call_id text`, the `check` output without the file name.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: ", self.line, self.rule)?;
        if let Some(id) = &self.call_id {
            write!(f, "{id} ")?;
        }
        f.write_str(&self.text)?;
        if self.pending_at_end {
            f.write_str(" (pending at the end of the log)")
        } else if matches!(
            self.rule,
            Rule::AnthropicToolUseWithoutResult
                | Rule::ChatCallWithoutResponse
                | Rule::ResponsesNoOutput
                | Rule::UnansweredCall
        ) {
            f.write_str(" (left unanswered while the log moved on)")
        } else {
            Ok(())
        }
    }
}

/// Checks `messages` against the rules of `format`'s provider (Claude Code:
/// Anthropic; Codex: OpenAI Responses; records: pairing only), plus duplicate call
/// ids where the format pairs by id across the whole log (see
/// [`Rule::DuplicateCallId`]). Histories separated by a compaction boundary
/// ([`Message::starts_history`]) are checked each on their own; a call never answered
/// in a history a later boundary replaced is reported as
/// [`Rule::CallOpenAtCompaction`] (the provider no longer receives that history), not
/// with the provider's error. Provider compaction (Anthropic) and Gemini's thought
/// signatures are checked over the whole log. Violations come in message order.
/// **O(blocks)** expected.
pub fn check_messages(format: Format, messages: &[Message]) -> Vec<RuleViolation> {
    let mut out = Vec::new();
    match format {
        Format::AnthropicMessages | Format::ClaudeCode => {
            anthropic::compaction(messages, &mut out);
            anthropic::container_expired(messages, &mut out);
        }
        Format::Gemini => gemini::signatures(messages, false, &mut out),
        Format::OpenAiResponses | Format::CodexRollout => {
            openai_responses::compaction_trigger(format, messages, &mut out)
        }
        _ => {}
    }
    let mut start = 0;
    while start < messages.len() {
        let end = messages[start + 1..]
            .iter()
            .position(|m| m.starts_history)
            .map_or(messages.len(), |p| start + 1 + p);
        let seg = Segment::new(messages, start, end);
        let first = out.len();
        match format {
            Format::AnthropicMessages | Format::ClaudeCode => anthropic::check(&seg, &mut out),
            Format::OpenAiChat => openai_chat::check(&seg, &mut out),
            Format::OpenAiResponses | Format::CodexRollout => {
                openai_responses::check(&seg, &mut out)
            }
            Format::Gemini => gemini::check(&seg, &mut out),
            Format::GeminiCli => gemini_cli::check(&seg, &mut out),
            Format::Records => records::check(&seg, &mut out),
        }
        if !seg.last {
            for v in &mut out[first..] {
                replaced_history(&seg, v);
            }
        }
        if !matches!(
            format,
            Format::OpenAiChat | Format::Gemini | Format::GeminiCli
        ) {
            duplicate_calls(&seg, &mut out);
        }
        start = end;
    }
    out.sort_by_key(|v| v.message);
    out
}

/// [`check_messages`] for a whole transcript: the same, except that an OpenAI Responses
/// request that names a `previous_response_id` may answer, before its first history
/// boundary, calls this input does not hold ("every output has its call, in the input
/// or in the `previous_response_id` chain"). **O(blocks)** expected.
pub fn check_rules(t: &Transcript) -> Vec<RuleViolation> {
    let mut out = check_messages(t.format, &t.messages);
    if t.continues_previous_response {
        let first_boundary = t
            .messages
            .iter()
            .skip(1)
            .position(|m| m.starts_history)
            .map_or(t.messages.len(), |p| p + 1);
        out.retain(|v| !(v.rule == Rule::ResponsesNoCall && v.message < first_boundary));
    }
    if t.format == Format::AnthropicMessages && t.names_container == Some(false) {
        anthropic::container_missing(&t.messages, &mut out);
        out.sort_by_key(|v| v.message);
    }
    out
}

/// The messages of one history: `messages[start..end]`.
pub(crate) struct Segment<'a> {
    pub(crate) messages: &'a [Message],
    pub(crate) start: usize,
    pub(crate) end: usize,
    /// Whether this history runs to the end of the log.
    pub(crate) last: bool,
    /// The last message answering each call id.
    last_result: HashMap<&'a CallId, usize>,
}

impl<'a> Segment<'a> {
    pub(crate) fn new(messages: &'a [Message], start: usize, end: usize) -> Self {
        let mut last_result = HashMap::new();
        for (i, m) in messages.iter().enumerate().take(end).skip(start) {
            for (_, id) in m.results() {
                last_result.insert(id, i);
            }
        }
        Segment {
            messages,
            start,
            end,
            last: end == messages.len(),
            last_result,
        }
    }

    pub(crate) fn get(&self, i: usize) -> Option<&Message> {
        (self.start..self.end)
            .contains(&i)
            .then(|| &self.messages[i])
    }

    pub(crate) fn indices(&self) -> std::ops::Range<usize> {
        self.start..self.end
    }

    /// Whether a call unanswered at message `i` is still in flight at the very end:
    /// this is the last history and the call is [in flight at the history's
    /// end](Segment::in_flight_at_end).
    pub(crate) fn pending_at_end(&self, i: usize) -> bool {
        self.last && self.in_flight_at_end(i)
    }

    /// Whether nothing moved the history on after message `i`: no later message of
    /// this history has text, and no call comes after a result that came after `i`
    /// (which would be a new step of the agent).
    pub(crate) fn in_flight_at_end(&self, i: usize) -> bool {
        let mut saw_result = false;
        for m in &self.messages[i + 1..self.end] {
            if m.has_text() || (saw_result && m.calls().next().is_some()) {
                return false;
            }
            saw_result |= m.results().next().is_some();
        }
        true
    }

    /// Whether some message after `i` answers `id`.
    pub(crate) fn answered_after(&self, i: usize, id: &CallId) -> bool {
        self.last_result.get(id).is_some_and(|&r| r > i)
    }

    /// Whether call `id` of message `i`, not answered where its format wants it, is
    /// still in flight at the very end: no later message answers it either, and
    /// [nothing moved the log on](Segment::pending_at_end) after `i`.
    pub(crate) fn still_pending(&self, i: usize, id: &CallId) -> bool {
        !self.answered_after(i, id) && self.pending_at_end(i)
    }

    /// Reports each call of message `i` whose id `answers` (the results where its
    /// format wants them) does not hold, as `rule` with `text` for the id, pending
    /// when [still in flight](Segment::still_pending). **O(calls of `i`)**, plus the
    /// walk to the end for each one reported.
    pub(crate) fn unanswered_calls(
        &self,
        i: usize,
        answers: &HashSet<&CallId>,
        rule: Rule,
        out: &mut Vec<RuleViolation>,
        text: impl Fn(&CallId) -> String,
    ) {
        for (k, id, _) in self.messages[i].calls() {
            if !answers.contains(id) {
                let pending = self.still_pending(i, id);
                out.push(self.violation(rule, (i, k), Some(id), pending, text(id)));
            }
        }
    }

    /// The whole log as one segment (for the rules checked across histories).
    pub(crate) fn whole(messages: &'a [Message]) -> Self {
        Segment::new(messages, 0, messages.len())
    }

    /// A violation of `rule` by block `k` of message `i` (its line is the block's).
    pub(crate) fn violation(
        &self,
        rule: Rule,
        (i, k): (usize, usize),
        call_id: Option<&CallId>,
        pending_at_end: bool,
        text: String,
    ) -> RuleViolation {
        RuleViolation {
            rule,
            message: i,
            line: self.messages[i].block_line(k),
            call_id: call_id.cloned(),
            pending_at_end,
            text,
        }
    }
}

/// A pairing violation's rule, with its provider text for the call id.
type Wording = (Rule, fn(&CallId) -> String);

/// Pairing by id across a history, for the formats that pair that way (records,
/// OpenAI Responses), each with its own wording: every call answered by a later
/// message, every result answering an earlier call and, where the format refuses a
/// second one, only once.
struct ById {
    /// A call no later message answers.
    unanswered: Wording,
    /// A result no earlier message called.
    orphan: Wording,
    /// A second result for one call, where the format refuses it.
    duplicate: Option<Wording>,
}

impl ById {
    /// Checks `seg`: in message order, a message's calls before its results.
    /// **O(blocks)** expected.
    fn check(&self, seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
        let mut called: HashSet<&CallId> = HashSet::new();
        let mut answered: HashSet<&CallId> = HashSet::new();
        for i in seg.indices() {
            let m = &seg.messages[i];
            for (k, id, _) in m.calls() {
                called.insert(id);
                if !seg.answered_after(i, id) {
                    let (rule, text) = self.unanswered;
                    out.push(seg.violation(
                        rule,
                        (i, k),
                        Some(id),
                        seg.pending_at_end(i),
                        text(id),
                    ));
                }
            }
            for (k, id) in m.results() {
                let broken = if !called.contains(id) {
                    Some(self.orphan)
                } else {
                    self.duplicate.filter(|_| !answered.insert(id))
                };
                if let Some((rule, text)) = broken {
                    out.push(seg.violation(rule, (i, k), Some(id), false, text(id)));
                }
            }
        }
    }
}

/// Two calls with one id in one history.
fn duplicate_calls(seg: &Segment<'_>, out: &mut Vec<RuleViolation>) {
    let mut first: HashMap<&CallId, (usize, usize)> = HashMap::new();
    for i in seg.indices() {
        for (k, id, _) in seg.messages[i].calls() {
            if let Some(&(f, fk)) = first.get(id) {
                out.push(seg.violation(
                    Rule::DuplicateCallId,
                    (i, k),
                    Some(id),
                    false,
                    format!(
                        "call id already used by the call in message {f} (line {})",
                        seg.messages[f].block_line(fk)
                    ),
                ));
            } else {
                first.insert(id, (i, k));
            }
        }
    }
}

/// Rewrites a violation of a history a later compaction boundary replaced: a call
/// that no message of the history answers is [`Rule::CallOpenAtCompaction`], with a
/// text that says the provider no longer receives it (instead of the provider's
/// error, which no next request would return).
fn replaced_history(seg: &Segment<'_>, v: &mut RuleViolation) {
    let Some(id) = v.call_id.as_ref() else {
        return;
    };
    let is_call = seg.messages[v.message].calls().any(|(_, c, _)| c == id);
    if !is_call || seg.answered_after(v.message, id) {
        return;
    }
    let restart = seg.messages.get(seg.end).map_or(0, |m| m.line);
    let when = if seg.in_flight_at_end(v.message) {
        "was still in flight when the runtime's compaction replaced this history"
    } else {
        "was left unanswered, and the runtime's compaction later replaced this history"
    };
    v.rule = Rule::CallOpenAtCompaction;
    v.pending_at_end = false;
    v.text = format!(
        "the call {when} (the new history starts at line {restart}): the provider no longer receives it, so no request fails on it, but the call's outcome is lost to the summary that replaced it"
    );
}
