//! Writing the compaction strategies' edits back into a transcript in its own format:
//! results cleared, inputs cleared, thinking dropped, runs of messages replaced by a
//! digest or summary message, or dropped. Every message nothing touched is copied
//! byte for byte; an edited one changes only the values edited (a block's content, a
//! call's arguments) or loses a block; a summary message is written in the provider's
//! shape by [`summary_message`](super::summary_message), its text by
//! the one ledger renderer ([`SummaryParts::text`]), always with its heading.
//!
//! ```text
//!   Transcript ──log_of──▶ TranscriptLog { Log, record → message/block } ──strategies──▶
//!       StepReports (their Edits) + the Log after ──write──▶ the transcript, edited
//! ```
//!
//! Positions: the strategies' [`Edit`](crate::compact::strategy::Edit)s name records of the log as it was before each
//! step; [`write()`] replays them on a map from the log's records to the transcript's
//! messages and blocks ([`Transcript::records`]'s owner map), so every edit lands on
//! the block it was made on. Regions always start and end at message boundaries (legal
//! cuts), so a message is kept, summarized or dropped whole. Formats: Anthropic
//! Messages, OpenAI Chat, OpenAI Responses, Gemini, Claude Code (whose records chain
//! by `parentUuid`: a dropped line's children are re-linked to the line before it, a
//! summary line gets a `uuid` of its own) and Codex. Records JSONL is written from the
//! log itself ([`records::write_entry`](super::records::write_entry)).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::attribute::{self, Touched};
use super::build::{TranscriptLog, log_of};
use super::json_doc::{field, lines, span_of};
use super::{Block, Format, Role, TokenCounter, Transcript, claude_code, codex, shape, usage};
use crate::compact::pipeline::{Pipeline, PipelineReport, Progress, Step};
use crate::compact::replay::InPlace;
use crate::compact::strategy::{
    Blocked, CLEARED_RESULT_TEXT, ClearedSizes, Floors, LeftAlone, NoProgress, Prose, StepReport,
    Strategy, Summarizer, SummaryRequest,
};
use crate::compact::{Entry, Log, Payload, SummaryParts};
use crate::compact::{Orphan, Unit};
use crate::{AppendError, CallId};

/// A pipeline run on a transcript, written back in the transcript's format.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Compacted {
    /// The transcript after the run, in its own format (the input, byte for byte,
    /// when no stage changed anything).
    pub text: String,
    /// What each stage did, round after round (see [`Loaded::run`](super::Loaded::run)); `tokens_after` is the
    /// output's live history read back with the caller's counter, not the
    /// strategies' estimate.
    pub report: PipelineReport,
    /// How many times the pipeline ran: 0 when the transcript met the budget already
    /// (the text is the input), 1, or more when the written output read back over the
    /// budget.
    pub rounds: usize,
    /// The thinking blocks and reasoning items of the text that the run invalidates
    /// for their provider's prefix binding ([`invalidated_thinking`](super::invalidated_thinking)):
    /// the provider refuses them, or drops them silently. Empty with
    /// [`Pipeline::keep_thinking_valid`], which strips them, and when nothing was
    /// written; the CLI says so on stderr. **O(blocks)** to compute, once per run.
    pub invalidated: Vec<super::Invalidated>,
    /// [`Pipeline::keep_thinking_valid`] could not keep the pipeline's output: its
    /// edits changed the prefix of thinking that can be neither sent changed nor
    /// stripped (the current turn's, the latest assistant message's), so the text is
    /// a simple compaction of the input instead: the whole live history past the
    /// pinned head in one summary, the next instruction kept after it. The report's
    /// steps are that one summary.
    pub simple: bool,
}

/// The most rounds [`Loaded::run`](super::Loaded::run) makes to bring a written output under its budget.
pub const MAX_ROUNDS: usize = 3;

/// Runs `pipeline` on the live history of `t` (read from `input`) and writes the
/// result back in `t`'s format: the one way the CLI and the bindings run strategies
/// on a provider transcript. `keep_head` pins the first messages of the live history
/// (with the message a compaction boundary opens it with, always); the pipeline's
/// own `floors.keep_head` is in records of the log and the larger of the two holds.
/// `progress` remembers stalled stages across runs on the same transcript;
/// `summarizer` writes the summarize stages' prose.
///
/// The strategies size what they write (placeholders, digests, summaries with their
/// prose) as it is written, read with `counter` (the counter `t` was read with), so
/// their count is the output's (on Claude Code, at least the output's). The output
/// is read back with `counter` all the same, and the report's `tokens_after` is that
/// count; while it is over the pipeline's budget, and the last round changed
/// something and counted less than the output reads (a strategy that could not
/// size what it wrote and fell back to its estimate), the pipeline runs again on
/// the output, at most [`MAX_ROUNDS`] rounds in all. A budget the report says is
/// met therefore holds for the text returned. A transcript within its budget
/// already is returned byte for byte, with a report of no steps
/// ([`PipelineReport::was_within_budget`]): so a run on its own output changes
/// nothing. An output that reads back no smaller than the input is not made either:
/// the input comes back, each step that ran turned into a [`NoProgress`] with
/// [`Blocked::NotSmaller`]. **O(len + edits)** per round plus what
/// the stages cost.
///
/// # Errors
/// [`EditError`]: the transcript's records refused by the tracker, a message that
/// cannot be re-read, an output that does not read back, or records JSONL (run the
/// pipeline on a [`Log`] instead).
pub fn run(
    t: &Transcript,
    input: &str,
    pipeline: &Pipeline,
    keep_head: usize,
    progress: &mut Progress,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
) -> Result<Compacted, EditError> {
    if t.format == Format::Records {
        return Err(EditError::Unsupported(t.format));
    }
    // The fixed point: a transcript within its budget is returned as it is, so a
    // compaction run on its own output changes nothing.
    let live = t.live_tokens();
    if pipeline.budget.is_some_and(|b| live <= b) {
        return Ok(Compacted {
            text: input.to_owned(),
            report: PipelineReport::within_budget(live, pipeline.budget),
            rounds: 0,
            invalidated: Vec::new(),
            simple: false,
        });
    }
    let (mut report, mut text, touched) =
        round(t, input, pipeline, keep_head, progress, summarizer, counter)?;
    let mut rounds = 1;
    let mut last_after = u64::MAX;
    let reread = |text: &str| {
        super::read(text, t.format, counter).map_err(|e| EditError::Reread(e.to_string()))
    };
    // The output as read back; at the loop's end, of `text` as it is returned.
    let mut back;
    // Per later round: the transcript it ran on, where each of its steps first
    // touched it, and where its steps start in the report (the first round ran on `t`).
    let mut later: Vec<(Transcript, Vec<Touched>, usize)> = Vec::new();
    loop {
        back = reread(&text)?;
        // What the round's steps counted, against the output as read back.
        let counted = report.tokens_after;
        report.tokens_after = back.live_tokens();
        let changed = report.ran().any(|r| !r.edits.is_empty());
        let over = report.budget.is_some_and(|b| report.tokens_after > b);
        // A round that did not shrink the output as read back (a summary folded
        // into one of the same size) ends the rounds.
        let shrank = report.tokens_after < last_after;
        last_after = report.tokens_after;
        // So does a round whose steps counted no less than the output reads: every
        // stage stopped with the truth (or more) in hand, and said why (a step that
        // stopped short, by what it left alone); another round on the output finds
        // nothing more (it never did, on 783 runs of the presets over the real
        // transcripts, once the strategies sized what they write as written).
        let undercounted = report.tokens_after > counted;
        if !over || !changed || !shrank || !undercounted || rounds == MAX_ROUNDS {
            break;
        }
        // Stalls remembered on the last round's log mean nothing on a new one.
        let (next, out, next_touched) = round(
            &back,
            &text,
            pipeline,
            keep_head,
            &mut Progress::new(),
            summarizer,
            counter,
        )?;
        rounds += 1;
        let progressed = next.ran().any(|r| !r.edits.is_empty());
        let start = report.steps.len();
        report.steps.extend(next.steps);
        if !progressed {
            break;
        }
        // What this round's steps counted, for the check at the top.
        report.tokens_after = next.tokens_after;
        text = out;
        later.push((back, next_touched, start));
    }
    if report.tokens_after >= live && report.ran().any(|r| !r.edits.is_empty()) {
        // A compaction that does not shrink the log is not made: what the stages
        // wrote read back no smaller than what it replaced (a summary or digest of a
        // short region, in the provider's message shape). The input comes back, and
        // each step that ran says why it was not made.
        let reason = Blocked::NotSmaller {
            before: live,
            after: report.tokens_after,
        };
        for step in &mut report.steps {
            if let Step::Ran(r) = step {
                *step = Step::NoProgress(NoProgress {
                    kind: r.kind,
                    reason: reason.clone(),
                    tokens: live,
                    left_alone: LeftAlone::default(),
                });
            }
        }
        report.tokens_after = live;
        return Ok(Compacted {
            text: input.to_owned(),
            report,
            rounds,
            invalidated: Vec::new(),
            simple: false,
        });
    }
    // What the written output invalidates, and on each step, how much of it follows its
    // first edit of the transcript its round ran on.
    let mut invalidated = super::invalidated_thinking(t, &back);
    let first_end = later
        .first()
        .map_or(report.steps.len(), |(_, _, start)| *start);
    blame(
        t,
        &back,
        &invalidated,
        &touched,
        &mut report.steps[..first_end],
    );
    for (k, (input_k, touched_k, start)) in later.iter().enumerate() {
        let end = later.get(k + 1).map_or(report.steps.len(), |(_, _, s)| *s);
        blame(
            input_k,
            &back,
            &invalidated,
            touched_k,
            &mut report.steps[*start..end],
        );
    }
    drop(later);
    let mut simple = false;
    if pipeline.keep_thinking_valid {
        let head = (keep_head, pipeline.floors.keep_head);
        let valid = keep_valid(t, input, head, text, back, summarizer, counter)?;
        (text, back, simple) = (valid.text, valid.back, valid.simple);
        report.tokens_after = back.live_tokens();
        if simple {
            // The pipeline's edits were not written: the report is the one summary.
            report.steps.clear();
        }
        report.steps.extend(valid.step.map(Step::Ran));
        invalidated = super::invalidated_thinking(t, &back);
    }
    Ok(Compacted {
        text,
        report,
        rounds,
        invalidated,
        simple,
    })
}

/// What [`keep_valid`] made of a rewrite.
pub(crate) struct Valid {
    /// The rewrite, its thinking valid.
    pub(crate) text: String,
    /// `text` as read back.
    pub(crate) back: Transcript,
    /// The step that made it valid: `clear-thinking` (invalidated thinking stripped),
    /// or the one `summarize` of a simple compaction; `None` when it was valid.
    pub(crate) step: Option<StepReport>,
    /// Whether `text` is a simple compaction of the original ([`simple_compaction`])
    /// instead of the rewrite.
    pub(crate) simple: bool,
}

/// [`Pipeline::keep_thinking_valid`] on `text`, a rewrite of `t` (read from `input`;
/// `back` is `text` as read back with `counter`): the invalidated thinking stripped
/// ([`keep_thinking_valid`]) or, where that would take thinking that must go back as
/// it was (the current turn's, the latest assistant message's), a simple compaction
/// of `t` instead ([`simple_compaction`], its prose by `summarizer`; `head` pins
/// messages of the live history and records of its log, as [`run`]'s `keep_head` and
/// the pipeline's `floors.keep_head` do); then the refused server ids
/// ([`strip_refused_ids`]). The one place both routes (a pipeline, a summary at a
/// target) keep thinking valid. **O(len)** of the output, plus **O(len)** of `t` for a
/// simple compaction.
///
/// # Errors
/// [`EditError::ThinkingBound`] when neither keeps the thinking valid (a call still
/// in flight: the end of the log is no legal cut, and the turn's thinking goes back
/// with its result); an output that does not read back.
pub(crate) fn keep_valid(
    t: &Transcript,
    input: &str,
    head: (usize, usize),
    mut text: String,
    mut back: Transcript,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
) -> Result<Valid, EditError> {
    let reread = |text: &str| {
        super::read(text, t.format, counter).map_err(|e| EditError::Reread(e.to_string()))
    };
    let mut step = None;
    let mut simple = false;
    match keep_thinking_valid(t, &back, &text) {
        Ok(None) => {}
        Ok(Some((out, s))) => {
            text = out;
            back = reread(&text)?;
            step = Some(s);
        }
        Err(bound @ EditError::ThinkingBound { .. }) => {
            let Some((out, out_back, s)) = simple_compaction(t, input, head, summarizer, counter)?
            else {
                return Err(bound);
            };
            (text, back, step, simple) = (out, out_back, Some(s), true);
        }
        Err(e) => return Err(e),
    }
    // Then the Responses items whose reasoning went (the run's, or the strip's): their
    // server `id` is refused, so it goes.
    if let Some(out) = strip_refused_ids(t, &back, &text)? {
        text = out;
        back = reread(&text)?;
    }
    Ok(Valid {
        text,
        back,
        step,
        simple,
    })
}

/// Simple compaction, the way out of preserved thinking's prefix binding that
/// Anthropic documents for a client-side compaction (and the shape of Codex's and
/// Claude Code's own): the whole live history of `t` past the pinned head
/// (`head.0` messages, `head.1` records, and a message a compaction boundary opens it
/// with) becomes
/// one summary, the pipeline's `summarize` stage with no floors but the next
/// instruction: when the log ends on a user message that answers no call, that
/// message is kept after the summary. So no thinking block or reasoning item is left
/// after a changed prefix, and no call is lost (each is in the ledger). `None` when it
/// would not help: nothing lies past the head, or what is kept still holds
/// invalidated thinking (a call in flight keeps its turn, which is no legal cut; a
/// kept item, such as a block that loaded a tool, stands between stretches). **O(len)**
/// of `t` plus the summarizer.
///
/// # Errors
/// An output that does not read back; the writer's errors.
fn simple_compaction(
    t: &Transcript,
    input: &str,
    (keep_head, head_records): (usize, usize),
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
) -> Result<Option<(String, Transcript, StepReport)>, EditError> {
    let next_instruction = t.messages.last().is_some_and(|m| {
        m.role == Role::User
            && !m
                .blocks
                .iter()
                .any(|(b, _)| matches!(b, Block::Result { .. }))
    }) && t.messages.len() > t.live_from();
    let summarize = Strategy::Summarize(crate::compact::strategy::Summarize::default());
    let pipeline = Pipeline::one(summarize, None).floors(
        Floors::none()
            .keep_head(head_records)
            .min_turns(usize::from(next_instruction)),
    );
    let (report, text, _) = round(
        t,
        input,
        &pipeline,
        keep_head,
        &mut Progress::new(),
        summarizer,
        counter,
    )?;
    let Some(step) = report.ran().find(|r| !r.edits.is_empty()).cloned() else {
        return Ok(None);
    };
    let back =
        super::read(&text, t.format, counter).map_err(|e| EditError::Reread(e.to_string()))?;
    let still = super::invalidated_thinking(t, &back)
        .into_iter()
        .any(|i| !i.server_id);
    Ok((!still).then_some((text, back, step)))
}

/// [`Pipeline::keep_thinking_valid`] on `text`, a rewrite of `t`: strips the thinking
/// blocks and reasoning items it invalidates ([`super::invalidated_thinking`]; all of
/// them come after the first message the rewrite changed, so what is left is valid),
/// through the one writer, as a `clear-thinking` step. `None` when nothing is
/// invalid. Items whose server `id` is refused are [`strip_refused_ids`]'s. `back`
/// is `text` as read back. **O(len)** of the output.
///
/// # Errors
/// [`EditError::ThinkingBound`] when the current turn's or the latest assistant
/// message's thinking is among them; a write error of the output.
fn keep_thinking_valid(
    t: &Transcript,
    back: &Transcript,
    text: &str,
) -> Result<Option<(String, StepReport)>, EditError> {
    let invalid: Vec<_> = super::invalidated_thinking(t, back)
        .into_iter()
        .filter(|i| !i.server_id)
        .collect();
    if invalid.is_empty() {
        return Ok(None);
    }
    // What cannot be stripped: the current turn's thinking (sent back while the turn
    // uses tools; OpenAI refuses an item of it without its reasoning) and the latest
    // assistant message's (sent back as received).
    let turn = back
        .messages
        .iter()
        .rposition(|m| {
            m.role == Role::User
                && !m
                    .blocks
                    .iter()
                    .any(|(b, _)| matches!(b, Block::Result { .. }))
        })
        .unwrap_or(0);
    // Anthropic's rule on the latest assistant message (OpenAI has none: reasoning of
    // a finished turn may go).
    let latest = match t.format {
        Format::AnthropicMessages | Format::ClaudeCode => back
            .messages
            .iter()
            .rposition(|m| m.role == Role::Assistant)
            .unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    if let Some(i) = invalid.iter().find(|i| i.message >= turn.min(latest)) {
        return Err(EditError::ThinkingBound {
            message: i.message,
            line: i.line,
            changed_at: i.changed_at,
        });
    }
    let blocks: std::collections::HashSet<(usize, usize)> =
        invalid.iter().map(|i| (i.message, i.block)).collect();
    let built = log_of(back)?;
    let positions: Vec<usize> = (0..built.log.len())
        .filter(|&k| blocks.contains(&(built.owner[k], built.block[k])))
        .collect();
    let mut log = built.log.clone();
    let Some(step) = crate::compact::strategy::clear_thinking::clear_at(&mut log, &positions)
    else {
        return Err(EditError::Mismatch(format!(
            "{} invalidated thinking blocks name no thinking record of the output",
            invalid.len()
        )));
    };
    let out = write(back, text, &built, &[&step], &log)?;
    Ok(Some((out, step)))
}

/// [`Pipeline::keep_thinking_valid`]'s last step on `text`, a rewrite of `t` (`back`
/// as read back): every OpenAI Responses or Codex item with a server `id` whose
/// reasoning item the rewrite dropped or invalidated (which OpenAI refuses) loses its
/// `id` field, every other byte kept. `None` when there is none. **O(len)** of the
/// output.
///
/// # Errors
/// [`EditError::Message`] when such an item is not a JSON object with an `id`.
fn strip_refused_ids(
    t: &Transcript,
    back: &Transcript,
    text: &str,
) -> Result<Option<String>, EditError> {
    let mut splices: Splices = Vec::new();
    for i in super::invalidated_thinking(t, back) {
        if !i.server_id {
            continue;
        }
        let Some(span) = back.messages.get(i.message).and_then(|m| m.spans.first()) else {
            continue;
        };
        let line = &text[span.clone()];
        // A Codex line holds the item under `payload`.
        let item = match back.format {
            Format::CodexRollout => field(line, "payload")
                .map_err(|detail| EditError::Message {
                    message: i.message,
                    detail,
                })?
                .unwrap_or(0..0),
            _ => 0..line.len(),
        };
        let id = without_field(&line[item.clone()], "id").map_err(|detail| EditError::Message {
            message: i.message,
            detail,
        })?;
        if let Some(removed) = id {
            let at = span.start + item.start;
            splices.push((at + removed.start..at + removed.end, String::new()));
        }
    }
    splices.sort_unstable_by_key(|(r, _)| r.start);
    splices.dedup_by_key(|(r, _)| r.start);
    Ok((!splices.is_empty()).then(|| splice(text, splices)))
}

/// The bytes of the JSON object `text` to remove to drop its field `name`: the key,
/// its value and the comma that separated it from its neighbour, every other byte
/// kept; `None` when the object has no such field. **O(len)**.
///
/// # Errors
/// When `text` is not a JSON object.
fn without_field(text: &str, name: &str) -> Result<Option<Range<usize>>, String> {
    let Some(value) = field(text, name)? else {
        return Ok(None);
    };
    let key = serde_json::to_string(name).map_err(|e| e.to_string())?;
    let before = text[..value.start].trim_end();
    let key_start = before
        .strip_suffix(':')
        .map(str::trim_end)
        .and_then(|b| b.strip_suffix(key.as_str()))
        .map(str::len)
        .ok_or_else(|| format!("field {key} is not written as {key}: value"))?;
    let after = &text[value.end..];
    let rest = after.trim_start();
    Ok(Some(match rest.strip_prefix(',') {
        // A field followed by another: up to the next key.
        Some(next) => key_start..text.len() - next.trim_start().len(),
        // The last field: with the comma before it.
        None => match text[..key_start].trim_end().strip_suffix(',') {
            Some(head) => head.len()..value.end,
            None => key_start..value.end,
        },
    }))
}

/// Sets, on each step that ran in a round on `before`, how many of `invalidated` (the
/// blocks of `after`, the run's output, that it invalidates) follow its first edit
/// ([`StepReport::invalidated_thinking`]); `touched` is where each of them first
/// touched `before`. **O(blocks + invalidated x steps)**.
fn blame(
    before: &Transcript,
    after: &Transcript,
    invalidated: &[super::Invalidated],
    touched: &[Touched],
    steps: &mut [Step],
) {
    let counts = attribute::per_step(before, after, invalidated, touched);
    let ran = steps.iter_mut().filter_map(|s| match s {
        Step::Ran(r) => Some(r),
        _ => None,
    });
    for (step, count) in ran.zip(counts) {
        step.invalidated_thinking = count;
    }
}

/// One round of [`run`]: the pipeline on `t`'s log, written back, and where each step
/// that ran first touched `t`.
fn round(
    t: &Transcript,
    input: &str,
    pipeline: &Pipeline,
    keep_head: usize,
    progress: &mut Progress,
    summarizer: &mut dyn Summarizer,
    counter: &dyn TokenCounter,
) -> Result<(PipelineReport, String, Vec<Touched>), EditError> {
    let built = log_of(t)?;
    let mut pipeline = pipeline.clone();
    let clears = |p: &Pipeline| {
        p.stages
            .iter()
            .any(|s| matches!(s.strategy, Strategy::Clear(_)))
    };
    if clears(&pipeline) {
        if let Some(sizes) = cleared_sizes(t, input, &built, counter) {
            let sizes = Arc::new(sizes);
            for stage in &mut pipeline.stages {
                if let Strategy::Clear(clear) = &mut stage.strategy {
                    clear.sizes = Some(Arc::clone(&sizes));
                }
            }
        }
    }
    let head_message = t.live_from().saturating_add(keep_head);
    let head = built
        .owner
        .partition_point(|&m| m < head_message)
        .max(built.pinned);
    pipeline.floors.keep_head = pipeline.floors.keep_head.max(head);
    let mut log = built.log.clone();
    let mut written = Written {
        inner: summarizer,
        format: t.format,
        counter,
        renamed: &built.renamed,
    };
    let report = pipeline.run_with(&mut log, progress, &mut written);
    let steps: Vec<&StepReport> = report.ran().collect();
    let text = write(t, input, &built, &steps, &log)?;
    let touched = attribute::touched(&built, &steps);
    Ok((report, text, touched))
}

/// What each call's result and input of `built` (the live history of `t`) count once
/// cleared, as written and read back: the live history written once with every
/// result and every input cleared (the writer [`Clear`](crate::compact::strategy::Clear)'s
/// edits go through), read back with `counter`, each cleared block's count keyed by
/// its call's id in the log. Clearing leaves every message and block where it was,
/// so block `k` of message `m` is the same block on both sides; where the read-back
/// does not line up so, or the text cannot be written, `None` (the strategy's
/// estimates hold). **O(len)**: one write and one read.
fn cleared_sizes(
    t: &Transcript,
    input: &str,
    built: &TranscriptLog,
    counter: &dyn TokenCounter,
) -> Option<ClearedSizes> {
    let mut plans: Vec<BTreeMap<usize, InPlace>> = vec![BTreeMap::new(); t.messages.len()];
    let mut cleared: Vec<(usize, usize, bool, &CallId)> = Vec::new();
    for (r, entry) in built.log.entries().iter().enumerate() {
        let (m, k) = (built.owner[r], built.block[r]);
        let (how, is_result, id) = match (&entry.payload, entry.record.call_id()) {
            (Payload::Result { .. }, Some(id)) => (InPlace::ClearedResult, true, id),
            (Payload::Call { .. }, Some(id)) => (InPlace::ClearedInput, false, id),
            _ => continue,
        };
        plans[m].insert(k, how);
        cleared.push((m, k, is_result, id));
    }
    if cleared.is_empty() {
        return None;
    }
    let plans: Vec<MessagePlan> = plans.into_iter().map(MessagePlan::Keep).collect();
    let text = if t.array_span.is_some() {
        write_document(t, input, &plans)
    } else {
        write_lines(t, input, &plans)
    }
    .ok()?;
    let back = super::read(&text, t.format, counter).ok()?;
    let lined_up = back.messages.len() == t.messages.len()
        && cleared
            .iter()
            .all(|&(m, _, _, _)| back.messages[m].blocks.len() == t.messages[m].blocks.len());
    if !lined_up {
        return None;
    }
    let mut sizes = ClearedSizes::new();
    for (m, k, is_result, id) in cleared {
        let tokens = back.messages[m].blocks[k].1;
        if is_result {
            sizes.result(id.clone(), tokens);
        } else {
            sizes.input(id.clone(), tokens);
        }
    }
    Some(sizes)
}

/// Why an edited transcript could not be written.
#[derive(Clone, PartialEq, Eq, Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// The tracker refused the transcript's records.
    #[error(transparent)]
    Tracker(#[from] AppendError),
    /// The edits do not fit the transcript (they were made on another log).
    #[error("the edits do not fit this transcript: {0}")]
    Mismatch(String),
    /// A message could not be re-read to edit it.
    #[error("message {message}: {detail}")]
    Message {
        /// The message.
        message: usize,
        /// What went wrong.
        detail: String,
    },
    /// The written output does not read back in its own format (a bug: please
    /// report it with the input).
    #[error("the output does not read back: {0}")]
    Reread(String),
    /// Records JSONL is written from the log, not edited as a transcript.
    #[error("{0} transcripts are written from the log, not edited")]
    Unsupported(Format),
    /// [`Pipeline::keep_thinking_valid`]: the run changed the prefix of thinking of the
    /// current turn or of the latest assistant message, which can be neither sent
    /// changed (the provider refuses it, or drops it with `drop_block`) nor stripped
    /// (the latest assistant message's thinking goes back as it was received; a turn
    /// still using tools sends its thinking back; an OpenAI item of the current turn
    /// comes with its reasoning), and no simple compaction keeps it valid either (a
    /// call still in flight keeps its turn; a kept item stands in the history).
    #[error(
        "message {message} (line {line}): thinking of the current turn or the latest assistant message is bound to its prefix, which this compaction changes{}: its signature would no longer verify, it cannot be stripped, and no simple compaction keeps it (a call is still in flight, or a kept item stands between): compact once the call is answered, or write it anyway (--allow-invalidated-thinking; keep_thinking_valid off) and send it with drop_block",
        changed_at.map(|m| format!(" from message {m} on")).unwrap_or_default()
    )]
    ThinkingBound {
        /// The message of the output that holds it.
        message: usize,
        /// Its 1-based line in the output.
        line: usize,
        /// The first message of the output whose prefix differs.
        changed_at: Option<usize>,
    },
}

/// What became of an original record.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fate {
    Kept,
    /// In the region of summary `k`.
    Summarized(usize),
    Removed,
}

/// Where a record of the current log came from.
#[derive(Clone, Copy, Debug)]
enum Origin {
    Record(usize),
    Summary(usize),
}

/// The steps replayed on the original records.
struct Replay {
    fate: Vec<Fate>,
    edits: Vec<Option<InPlace>>,
    /// Per summary: its position in the log after all steps (if it survived).
    summary_at: Vec<Option<usize>>,
}

fn replay(n: usize, steps: &[&StepReport], after: &Log) -> Result<Replay, EditError> {
    let mut fate = vec![Fate::Kept; n];
    let mut edits: Vec<Option<InPlace>> = vec![None; n];
    // Per summary: the original records its region covers.
    let mut ranges: Vec<Range<usize>> = Vec::new();
    let origin = crate::compact::replay::replay(
        (0..n).map(Origin::Record).collect(),
        steps.iter().copied(),
        |o, how| match o {
            Origin::Record(i) => {
                edits[*i] = Some(how);
                Ok(())
            }
            Origin::Summary(_) => Err("it names a summary, not a record of the transcript".into()),
        },
        |covered, summary| {
            let bounds = |o: &Origin| match o {
                Origin::Record(i) => *i..*i + 1,
                Origin::Summary(k) => ranges[*k].clone(),
            };
            let (first, last) = (covered.first()?, covered.last()?);
            let covered = bounds(first).start..bounds(last).end;
            let k = ranges.len();
            for f in &mut fate[covered.clone()] {
                if *f != Fate::Removed {
                    *f = if summary {
                        Fate::Summarized(k)
                    } else {
                        Fate::Removed
                    };
                }
            }
            ranges.push(covered);
            summary.then_some(Origin::Summary(k))
        },
    )
    .map_err(|e| EditError::Mismatch(e.to_string()))?;
    if origin.len() != after.len() {
        return Err(EditError::Mismatch(format!(
            "the steps leave {} records, the log holds {}",
            origin.len(),
            after.len()
        )));
    }
    let mut summary_at = vec![None; ranges.len()];
    for (pos, o) in origin.iter().enumerate() {
        if let Origin::Summary(k) = o {
            summary_at[*k] = Some(pos);
        }
    }
    Ok(Replay {
        fate,
        edits,
        summary_at,
    })
}

/// Writes `t` (read from `input`) with the edits of `steps` (in the order they ran on
/// `built.log`; `after` is the log they left), in `t`'s own format: untouched messages
/// byte for byte, edited ones with only their edited values changed, each summarized
/// run of messages as one summary message where it started, dropped runs gone. For
/// JSONL formats, lines that are not messages are kept, except those inside a run
/// that was summarized or dropped. **O(len + edits)**.
///
/// # Errors
/// [`EditError`] when the edits do not fit `t` (made on another log), a message
/// cannot be re-read, or `t` is records JSONL.
pub fn write(
    t: &Transcript,
    input: &str,
    built: &TranscriptLog,
    steps: &[&StepReport],
    after: &Log,
) -> Result<String, EditError> {
    if t.format == Format::Records {
        return Err(EditError::Unsupported(t.format));
    }
    let n = built.owner.len();
    let replay = replay(n, steps, after)?;
    let from = t.live_from();
    // Per live message: its records.
    let mut records_of: Vec<Range<usize>> = vec![0..0; t.messages.len()];
    for (r, &m) in built.owner.iter().enumerate() {
        if records_of[m].is_empty() {
            records_of[m] = r..r + 1;
        } else {
            records_of[m].end = r + 1;
        }
    }
    let mut plans: Vec<MessagePlan> = Vec::with_capacity(t.messages.len());
    let mut first_of_summary: Vec<bool> = vec![true; replay.summary_at.len()];
    for (m, records) in records_of.iter().enumerate() {
        if m < from || records.is_empty() {
            plans.push(MessagePlan::Keep(BTreeMap::new()));
            continue;
        }
        let fate = replay.fate[records.start];
        if records.clone().any(|r| replay.fate[r] != fate) {
            return Err(EditError::Mismatch(format!(
                "message {m} is cut through by a region"
            )));
        }
        plans.push(match fate {
            Fate::Kept => MessagePlan::Keep(
                records
                    .clone()
                    .filter_map(|r| replay.edits[r].map(|e| (built.block[r], e)))
                    .collect(),
            ),
            Fate::Removed => MessagePlan::Drop,
            Fate::Summarized(k) => {
                let first = std::mem::replace(&mut first_of_summary[k], false);
                match (first, replay.summary_at[k]) {
                    (true, Some(at)) => {
                        let (parts, tokens) = summary_of(after.entries().get(at), &built.renamed)?;
                        // Always with the ledger heading (`none` when no call was
                        // summarized): a summary of text alone is never an empty
                        // message, and a later compaction reads it back as a summary.
                        MessagePlan::Summary((parts.text(), tokens))
                    }
                    _ => MessagePlan::Drop,
                }
            }
        });
    }
    if t.array_span.is_some() {
        return write_document(t, input, &plans);
    }
    let mut out = write_lines(t, input, &plans)?;
    let changed = plans
        .iter()
        .any(|p| !matches!(p, MessagePlan::Keep(edits) if edits.is_empty()));
    if t.format == Format::CodexRollout && changed {
        // Codex: the context it resumes with is the compacted history's, as after its
        // own compaction: the compacted log's tokens (the summary at its summary
        // estimate), put in the provider's units by the session's calibration where
        // the file reports usage.
        let estimate = after
            .entries()
            .iter()
            .skip(after.live_from())
            .fold(0u64, |a, e| a.saturating_add(e.record.tokens()));
        let tokens = usage::Calibration::of(input, t).map_or(estimate, |c| c.apply(estimate));
        codex::recount(&mut out, tokens);
    }
    Ok(out)
}

/// The parts and tokens of the summary entry `entry`, its units and orphans named as
/// the transcript spells their calls (a renamed reused id by its original).
pub(crate) fn summary_of(
    entry: Option<&Entry>,
    renamed: &HashMap<CallId, CallId>,
) -> Result<(SummaryParts, u64), EditError> {
    entry
        .and_then(|e| Some((parts_of(&e.payload, renamed)?, e.record.tokens())))
        .ok_or_else(|| {
            EditError::Mismatch("a summarized region has no summary record in the log".to_owned())
        })
}

/// The parts the writer writes for a summary payload, its calls named as the
/// transcript spells them; `None` for another payload. **O(len)** of the summary.
fn parts_of(payload: &Payload, renamed: &HashMap<CallId, CallId>) -> Option<SummaryParts> {
    let original = |id: &CallId| renamed.get(id).unwrap_or(id).clone();
    let Payload::Summary {
        text,
        units,
        orphans,
    } = payload
    else {
        return None;
    };
    let units = units
        .iter()
        .map(|u| Unit {
            call_id: original(&u.call_id),
            ..u.clone()
        })
        .collect();
    let orphans = orphans
        .iter()
        .map(|o| Orphan {
            call_id: original(&o.call_id),
            ..o.clone()
        })
        .collect();
    Some(SummaryParts::new(
        text.clone().unwrap_or_default(),
        units,
        orphans,
    ))
}

/// The caller's summarizer, with what a summary counts once written into `format`
/// ([`Summarizer::written_tokens`]): the summary message in the format's shape
/// ([`shape::summary_message`]; the context fields a writer copies from a neighbour
/// sit outside what any reader counts) read alone with `counter`. **O(len)** of the
/// summary per question.
struct Written<'a> {
    inner: &'a mut dyn Summarizer,
    format: Format,
    counter: &'a dyn TokenCounter,
    renamed: &'a HashMap<CallId, CallId>,
}

impl Summarizer for Written<'_> {
    fn summarize(&mut self, request: &SummaryRequest<'_>) -> Prose {
        self.inner.summarize(request)
    }

    fn written_tokens(&mut self, summary: &Payload) -> Option<u64> {
        let text = parts_of(summary, self.renamed)?.text();
        let message = shape::summary_message(self.format, &text, 0);
        let alone = if self.format.is_json_document() {
            format!("[{message}]")
        } else {
            message
        };
        super::read(&alone, self.format, self.counter)
            .ok()
            .map(|t| t.live_tokens())
    }
}

/// What to write for one message.
enum MessagePlan {
    /// Keep it, with these block edits (by block index).
    Keep(BTreeMap<usize, InPlace>),
    /// Write a summary message (text, tokens) in its place.
    Summary((String, u64)),
    /// Drop it.
    Drop,
}

fn placeholder() -> String {
    serde_json::to_string(CLEARED_RESULT_TEXT).unwrap_or_else(|_| "\"\"".to_owned())
}

/// One JSON document: every byte kept but the elements edited, replaced or dropped
/// (a dropped element takes the separator before it along).
fn write_document(t: &Transcript, input: &str, plans: &[MessagePlan]) -> Result<String, EditError> {
    let spans: Vec<Range<usize>> = t
        .messages
        .iter()
        .map(|m| m.spans.first().cloned().unwrap_or(0..0))
        .collect();
    let mut new: Vec<Option<Option<String>>> = Vec::with_capacity(plans.len());
    for (m, (message, plan)) in t.messages.iter().zip(plans).enumerate() {
        let text = input
            .get(spans[m].clone())
            .ok_or_else(|| EditError::Message {
                message: m,
                detail: "its bytes are not in the input".to_owned(),
            })?;
        // None: unchanged; Some(None): dropped; Some(Some(text)): rewritten.
        new.push(match plan {
            MessagePlan::Drop => Some(None),
            MessagePlan::Summary((summary, tokens)) => Some(Some(
                shape::summary_record(t.format, summary, *tokens, text).to_string(),
            )),
            MessagePlan::Keep(edits) if edits.is_empty() => None,
            MessagePlan::Keep(edits) => Some(
                edit_message(t.format, message, text, edits)
                    .map_err(|detail| EditError::Message { message: m, detail })?,
            ),
        });
    }
    let first_kept = new.iter().position(|n| !matches!(n, Some(None)));
    let mut splices = Vec::new();
    for (m, change) in new.into_iter().enumerate() {
        match change {
            None => {}
            Some(Some(text)) => splices.push((spans[m].clone(), text)),
            Some(None) => match first_kept {
                // Dropped before the first kept element: up to where it starts.
                Some(f) if m < f => {
                    if m == 0 {
                        splices.push((spans[0].start..spans[f].start, String::new()));
                    }
                }
                Some(_) => splices.push((spans[m - 1].end..spans[m].end, String::new())),
                None => {
                    if m == 0 {
                        let last = spans.len() - 1;
                        splices.push((spans[0].start..spans[last].end, String::new()));
                    }
                }
            },
        }
    }
    if !splices.is_empty() {
        splices.extend(budget_carried(t, input));
    }
    Ok(splice(input, splices))
}

/// An Anthropic request's task budget through a client compaction (one that
/// rewrites its history): `remaining` set to what is left after the history read
/// ([`TaskBudget::remaining_after`](super::TaskBudget::remaining_after), the
/// history's tokens by the transcript's counter), so the model's countdown does
/// not restart at `total`. The budget object's other members keep their bytes.
/// `None` without a budget. **O(len of the budget object)**.
fn budget_carried(t: &Transcript, input: &str) -> Option<(Range<usize>, String)> {
    let budget = t.task_budget?;
    let remaining = budget.remaining_after(t.live_tokens())?;
    let at = budget.at.0..budget.at.1;
    let raw = input.get(at.clone())?;
    let text = match budget.remaining {
        // Written again, with the new value (its members in key order).
        Some(_) => {
            let mut map: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(raw).ok()?;
            map.insert("remaining".to_owned(), remaining.into());
            serde_json::to_string(&map).ok()?
        }
        None => {
            let open = raw.trim_end().strip_suffix('}')?.trim_end();
            let comma = if open.ends_with('{') { "" } else { "," };
            format!("{open}{comma}\"remaining\":{remaining}}}")
        }
    };
    Some((at, text))
}

/// Edits one element of a JSON-document format; `None` when no block is left.
fn edit_message(
    format: Format,
    message: &super::Message,
    text: &str,
    edits: &BTreeMap<usize, InPlace>,
) -> Result<Option<String>, String> {
    match format {
        Format::AnthropicMessages => edit_content(text, "content", edits, &AnthropicBlock),
        Format::Gemini => edit_content(text, "parts", edits, &GeminiPart),
        Format::OpenAiChat => edit_chat(message, text, edits).map(Some),
        Format::OpenAiResponses => edit_item(text, edits),
        Format::GeminiCli => edit_gemini_cli(message, text, edits).map(Some),
        other => Err(format!("{other} messages are JSON lines")),
    }
}

/// Applies `splices` (disjoint ranges of `text`) to `text`. **O(len)**.
fn splice(text: &str, mut splices: Splices) -> String {
    splices.sort_unstable_by_key(|(r, _)| r.start);
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, with) in splices {
        out.push_str(&text[at..range.start]);
        out.push_str(&with);
        at = range.end;
    }
    out.push_str(&text[at..]);
    out
}

/// Byte ranges of a text and what replaces each.
type Splices = Vec<(Range<usize>, String)>;

/// The token counts Claude Code reads from a record's `message.usage`.
const USAGE_COUNTS: [&str; 4] = [
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
];

/// `line`, a Claude Code record, with the token counts of its `message.usage` (and of
/// its `cache_creation` breakdown) set to 0, every other byte kept: what Claude Code
/// does on load to the usage of a kept segment, whose requests a compaction changed.
/// `None` when the line has no usage, or none with a count above 0. **O(line)**.
fn zero_usage(line: &str) -> Option<String> {
    let message = field(line, "message").ok()??;
    let usage = field(&line[message.clone()], "usage").ok()??;
    let base = message.start + usage.start;
    let text = &line[base..message.start + usage.end];
    let mut splices = Splices::new();
    // Each count in `object` (at `at` in the line) that is above 0, as a splice to 0.
    let mut zero = |object: &str, at: usize, keys: &[&str]| {
        let Ok(map) = serde_json::from_str::<HashMap<&str, &RawValue>>(object) else {
            return;
        };
        for (key, raw) in map {
            if (keys.is_empty() || keys.contains(&key))
                && raw.get().parse::<u64>().is_ok_and(|n| n > 0)
            {
                let r = span_of(object, raw);
                splices.push((at + r.start..at + r.end, "0".to_owned()));
            }
        }
    };
    zero(text, base, &USAGE_COUNTS);
    if let Ok(Some(cache)) = field(text, "cache_creation") {
        zero(&text[cache.clone()], base + cache.start, &[]);
    }
    (!splices.is_empty()).then(|| splice(line, splices))
}

/// How one block of a content array is edited.
trait BlockShape {
    /// Splices for `edit` of the block `text`, or `None` when the block is dropped.
    fn edit(&self, text: &str, edit: InPlace) -> Result<Option<Splices>, String>;
}

/// An Anthropic (and Claude Code) content block.
struct AnthropicBlock;

impl BlockShape for AnthropicBlock {
    fn edit(&self, text: &str, edit: InPlace) -> Result<Option<Splices>, String> {
        Ok(match edit {
            InPlace::ClearedThinking => None,
            InPlace::ClearedResult => Some(
                field(text, "content")?
                    .map(|r| vec![(r, placeholder())])
                    .unwrap_or_default(),
            ),
            InPlace::ClearedInput => Some(
                field(text, "input")?
                    .map(|r| vec![(r, "{}".to_owned())])
                    .unwrap_or_default(),
            ),
        })
    }
}

/// A Gemini part.
struct GeminiPart;

impl BlockShape for GeminiPart {
    fn edit(&self, text: &str, edit: InPlace) -> Result<Option<Splices>, String> {
        let inner = |outer: &[&str], name: &str, with: String| -> Result<Splices, String> {
            for o in outer {
                if let Some(r) = field(text, o)? {
                    if let Some(v) = field(&text[r.clone()], name)? {
                        return Ok(vec![(r.start + v.start..r.start + v.end, with)]);
                    }
                }
            }
            Ok(Vec::new())
        };
        Ok(match edit {
            InPlace::ClearedThinking => None,
            InPlace::ClearedResult => Some(inner(
                &["functionResponse", "function_response"],
                "response",
                format!("{{\"result\":{}}}", placeholder()),
            )?),
            InPlace::ClearedInput => Some(inner(
                &["functionCall", "function_call"],
                "args",
                "{}".to_owned(),
            )?),
        })
    }
}

/// Edits the blocks of the array in field `name` of object `text`; `None` when no
/// block is left.
fn edit_content(
    text: &str,
    name: &str,
    edits: &BTreeMap<usize, InPlace>,
    shape: &dyn BlockShape,
) -> Result<Option<String>, String> {
    let Some(content) = field(text, name)? else {
        return Err(format!("no `{name}` to edit"));
    };
    let array = &text[content.clone()];
    let elements: Vec<&RawValue> =
        serde_json::from_str(array).map_err(|e| format!("`{name}` is not an array: {e}"))?;
    let mut kept: Vec<String> = Vec::with_capacity(elements.len());
    let mut dropped = false;
    for (k, raw) in elements.iter().enumerate() {
        let block = raw.get();
        match edits.get(&k) {
            None => kept.push(block.to_owned()),
            Some(&edit) => match shape.edit(block, edit)? {
                None => dropped = true,
                Some(splices) => kept.push(splice(block, splices)),
            },
        }
    }
    if kept.is_empty() {
        return Ok(None);
    }
    let new_array = if dropped {
        format!("[{}]", kept.join(","))
    } else {
        // Same elements: splice each in place, keeping the array's own whitespace.
        let mut splices = Vec::new();
        for (raw, new) in elements.iter().zip(&kept) {
            if raw.get() != new {
                splices.push((span_of(array, raw), new.clone()));
            }
        }
        splice(array, splices)
    };
    Ok(Some(splice(text, vec![(content, new_array)])))
}

/// An OpenAI Chat message: a tool message's `content`, or `tool_calls[j]`'s
/// arguments (`j` counting the message's calls).
fn edit_chat(
    message: &super::Message,
    text: &str,
    edits: &BTreeMap<usize, InPlace>,
) -> Result<String, String> {
    let mut splices = Vec::new();
    if edits.values().any(|e| *e == InPlace::ClearedResult) {
        if let Some(r) = field(text, "content")? {
            splices.push((r, placeholder()));
        }
    }
    let inputs: Vec<usize> = edits
        .iter()
        .filter(|(_, e)| **e == InPlace::ClearedInput)
        .map(|(k, _)| {
            message.blocks[..*k]
                .iter()
                .filter(|(b, _)| matches!(b, Block::Call { .. }))
                .count()
        })
        .collect();
    if !inputs.is_empty() {
        let Some(calls) = field(text, "tool_calls")? else {
            return Err("no `tool_calls` to edit".to_owned());
        };
        let list: Vec<&RawValue> =
            serde_json::from_str(&text[calls.clone()]).map_err(|e| format!("tool_calls: {e}"))?;
        for j in inputs {
            let Some(call) = list.get(j) else {
                return Err(format!("no tool call {j}"));
            };
            let call_span = span_of(text, call);
            if let Some(f) = field(call.get(), "function")? {
                let function = &call.get()[f.clone()];
                if let Some(a) = field(function, "arguments")? {
                    let at = call_span.start + f.start;
                    splices.push((at + a.start..at + a.end, "\"{}\"".to_owned()));
                }
            }
        }
    }
    Ok(splice(text, splices))
}

/// A Gemini CLI message, its blocks as the reader gives them: `thoughts`, `content`,
/// one call per `toolCalls` entry, then one result per `functionResponse` part of
/// their `result`s (or the whole `result` when it has none). Thinking cleared is
/// `thoughts: []`; a cleared result keeps its `functionResponse` (id and name) with a
/// placeholder `response`; a cleared input is `args: {}`. **O(len)**.
fn edit_gemini_cli(
    message: &super::Message,
    text: &str,
    edits: &BTreeMap<usize, InPlace>,
) -> Result<String, String> {
    // Where each call's and each result's JSON is, in reading order.
    let mut calls: Vec<Range<usize>> = Vec::new();
    let mut results: Vec<(Range<usize>, bool)> = Vec::new();
    if let Some(list) = field(text, "toolCalls")? {
        let elements: Vec<&RawValue> =
            serde_json::from_str(&text[list.clone()]).map_err(|e| format!("toolCalls: {e}"))?;
        for raw in elements {
            let call = span_of(text, raw);
            let Some(result) = field(raw.get(), "result")? else {
                calls.push(call);
                continue;
            };
            let result_text = &raw.get()[result.clone()];
            let at = call.start + result.start;
            let parts: Vec<&RawValue> = if result_text.starts_with('[') {
                serde_json::from_str(result_text).map_err(|e| format!("result: {e}"))?
            } else {
                Vec::new()
            };
            let mut answered = false;
            for part in parts {
                if let Some(response) = field(part.get(), "functionResponse")? {
                    let p = span_of(result_text, part);
                    let start = at + p.start + response.start;
                    results.push((start..at + p.start + response.end, true));
                    answered = true;
                }
            }
            if !answered && result_text != "null" {
                results.push((at..at + result_text.len(), false));
            }
            calls.push(call);
        }
    }
    let mut splices: Splices = Vec::new();
    let (mut nth_call, mut nth_result) = (0, 0);
    for (k, (block, _)) in message.blocks.iter().enumerate() {
        let edit = edits.get(&k).copied();
        match block {
            Block::Call { .. } => {
                let call = calls.get(nth_call).cloned();
                nth_call += 1;
                if edit == Some(InPlace::ClearedInput) {
                    let call = call.ok_or_else(|| format!("no tool call {}", nth_call - 1))?;
                    if let Some(args) = field(&text[call.clone()], "args")? {
                        let at = call.start;
                        splices.push((at + args.start..at + args.end, "{}".to_owned()));
                    }
                }
            }
            Block::Result { .. } => {
                let result = results.get(nth_result).cloned();
                nth_result += 1;
                if edit == Some(InPlace::ClearedResult) {
                    let (range, part) =
                        result.ok_or_else(|| format!("no tool result {}", nth_result - 1))?;
                    if !part {
                        splices.push((range, placeholder()));
                    } else if let Some(r) = field(&text[range.clone()], "response")? {
                        let at = range.start;
                        splices.push((
                            at + r.start..at + r.end,
                            format!("{{\"result\":{}}}", placeholder()),
                        ));
                    }
                }
            }
            Block::Reasoning if edit == Some(InPlace::ClearedThinking) => {
                if let Some(r) = field(text, "thoughts")? {
                    splices.push((r, "[]".to_owned()));
                }
            }
            _ => {}
        }
    }
    Ok(splice(text, splices))
}

/// An OpenAI Responses item (one block); `None` when it is dropped.
fn edit_item(text: &str, edits: &BTreeMap<usize, InPlace>) -> Result<Option<String>, String> {
    let mut splices = Vec::new();
    for edit in edits.values() {
        match edit {
            InPlace::ClearedThinking => return Ok(None),
            InPlace::ClearedResult => {
                if let Some(r) = field(text, "output")? {
                    splices.push((r, placeholder()));
                }
            }
            InPlace::ClearedInput => {
                if let Some(r) = field(text, "arguments")? {
                    splices.push((r, "\"{}\"".to_owned()));
                } else if let Some(r) = field(text, "input")? {
                    splices.push((r, "\"\"".to_owned()));
                }
            }
        }
    }
    Ok(Some(splice(text, splices)))
}

/// The fields of a Claude Code line that chain it.
#[derive(Deserialize)]
struct Chain<'a> {
    #[serde(default)]
    uuid: Option<String>,
    #[serde(rename = "parentUuid", borrow, default)]
    parent: Option<&'a RawValue>,
}

/// A JSONL format, line by line.
fn write_lines(t: &Transcript, input: &str, plans: &[MessagePlan]) -> Result<String, EditError> {
    // Which message (and which of its lines) each line belongs to.
    let mut line_of: HashMap<usize, (usize, usize)> = HashMap::new();
    for (m, message) in t.messages.iter().enumerate() {
        for (j, span) in message.spans.iter().enumerate() {
            line_of.insert(span.start, (m, j));
        }
    }
    // Byte ranges of the runs that were summarized or dropped: lines inside go.
    let mut gone: Vec<Range<usize>> = Vec::new();
    let mut run: Option<Range<usize>> = None;
    let claude = t.format == Format::ClaudeCode;
    for (m, (message, plan)) in t.messages.iter().zip(plans).enumerate() {
        let (Some(first), Some(last)) = (message.spans.first(), message.spans.last()) else {
            continue;
        };
        if matches!(plan, MessagePlan::Keep(_)) {
            gone.extend(run.take());
        } else {
            run = Some(match run {
                Some(r) => r.start..last.end.max(r.end),
                // Claude Code: a summary that opens the live history folds the
                // summary Claude Code wrote there; its `compact_boundary` gives way
                // to the one written below (one boundary per summary).
                None if claude && m == t.live_from() && matches!(plan, MessagePlan::Summary(_)) => {
                    claude_code::boundary_before(input, first.start)..last.end
                }
                None => first.start..last.end,
            });
        }
    }
    gone.extend(run);
    let inside = |at: usize| gone.iter().any(|g| g.contains(&at));
    // Claude Code: the usage an assistant record reports after the first message the
    // rewrite changed was reported for a history that is no longer sent, and Claude
    // Code reads the last one as the context's size (to decide when to compact).
    // Zeroed, as Claude Code zeroes a kept segment's usage on load (which it does
    // itself, so not inside one).
    let first_change = plans
        .iter()
        .position(|p| !matches!(p, MessagePlan::Keep(e) if e.is_empty()));
    let stale = |m: usize| {
        claude && first_change.is_some_and(|c| m > c) && t.messages[m].role == Role::Assistant
    };
    let mut chain = Chainer::new(claude, input);
    let mut out = String::with_capacity(input.len());
    // A Claude Code compaction written: where its boundary line goes in `out`, its
    // links, the tokens before, the neighbour it takes its context from; and where
    // the kept segment after its summary starts in `out`.
    let mut boundary: Option<(usize, claude_code::BoundaryLinks, u64, String)> = None;
    let mut segment_from: Option<usize> = None;
    for (line_no, span) in lines(input) {
        let body = &input[span.clone()];
        let Some(&(m, j)) = line_of.get(&span.start) else {
            if inside(span.start) {
                chain.forget(body);
            } else {
                chain.emit(&mut out, body, true);
            }
            continue;
        };
        match &plans[m] {
            MessagePlan::Drop => chain.forget(body),
            MessagePlan::Summary((summary, tokens)) => {
                if j == 0 {
                    // Claude Code: a summary that opens the live history is written as
                    // Claude Code writes its own compaction (a `compact_boundary`, then
                    // the `isCompactSummary` record), so that Claude Code sends it;
                    // any other summary or digest is an ordinary user message (Claude
                    // Code drops an `isCompactSummary` record that is not the one
                    // after its boundary).
                    let compaction = claude && m == t.live_from();
                    let mut parent = chain.last_uuid.clone();
                    // Claude Code: the summary line's uuid, which a boundary names as
                    // its segment's anchor.
                    let own_uuid = claude
                        .then(|| shape::uuid(summary, &["summary line", &span.start.to_string()]));
                    if compaction {
                        let links = claude_code::BoundaryLinks {
                            parent: None,
                            logical: chain.last_uuid.clone(),
                            uuid: shape::uuid(
                                summary,
                                &["compact_boundary", &span.start.to_string()],
                            ),
                            anchor: own_uuid.clone().unwrap_or_default(),
                            preserved: None,
                        };
                        parent = Some(links.uuid.clone());
                        boundary = Some((out.len(), links, t.live_tokens(), body.to_owned()));
                    }
                    let line = summary_line(
                        t.format,
                        body,
                        summary,
                        *tokens,
                        &parent,
                        own_uuid.as_deref(),
                        compaction,
                    )
                    .map_err(|detail| EditError::Message { message: m, detail })?;
                    chain.forget(body);
                    chain.emit(&mut out, &line, false);
                    if compaction {
                        segment_from = Some(out.len());
                    }
                    if claude {
                        // The summary line's own uuid follows the dropped line's.
                        if let Ok(line) = serde_json::from_str::<Chain<'_>>(body) {
                            if let Some(u) = line.uuid {
                                chain.relink.insert(u, chain.last_uuid.clone());
                            }
                        }
                    }
                } else {
                    chain.forget(body);
                }
            }
            MessagePlan::Keep(edits) => {
                let mut line = if edits.is_empty() {
                    Some(body.to_owned())
                } else {
                    edit_line(t, m, line_no, body, edits)
                        .map_err(|detail| EditError::Message { message: m, detail })?
                };
                if stale(m) && segment_from.is_none() {
                    if let Some(zeroed) = line.as_deref().and_then(zero_usage) {
                        line = Some(zeroed);
                    }
                }
                match line {
                    Some(line) => chain.emit(&mut out, &line, true),
                    None => chain.forget(body),
                }
            }
        }
    }
    if let Some((at, mut links, tokens, neighbour)) = boundary {
        links.preserved =
            segment_from.and_then(|from| claude_code::first_and_last_uuid(&out[from..]));
        let mut line = claude_code::compact_boundary(links, tokens, &neighbour).to_string();
        line.push('\n');
        out.insert_str(at, &line);
    }
    if claude {
        claude_code::refresh_preserved_segment(&mut out);
    }
    if !input.ends_with('\n') && out.ends_with('\n') && !input.is_empty() {
        out.pop();
    }
    Ok(out)
}

/// The `parentUuid` chain of a Claude Code file as its lines are written (a no-op for
/// the other formats): a line whose parent was dropped is re-linked to the line its
/// parent followed, and a line whose parent is in no line of the input (Claude Code
/// bridges such a gap to the latest line before it) gets that bridge written out when
/// the line before it was dropped: Claude Code 2.1.328 does not bridge it again to the
/// line before that, and its walk from the leaf stops there (measured: 13 messages sent
/// instead of 81, `tests/clients`, fixture `ec-38b74f08e3`).
struct Chainer<'a> {
    claude: bool,
    input: &'a str,
    /// Dropped lines' uuids, and the line each one's children now follow.
    relink: HashMap<String, Option<String>>,
    /// The latest written line with a uuid.
    last_uuid: Option<String>,
    /// Whether the latest line with a uuid was dropped.
    after_drop: bool,
    /// Every uuid of the input, collected the first time a line's parent is in doubt.
    known: Option<HashSet<String>>,
}

impl<'a> Chainer<'a> {
    fn new(claude: bool, input: &'a str) -> Self {
        Chainer {
            claude,
            input,
            relink: HashMap::new(),
            last_uuid: None,
            after_drop: false,
            known: None,
        }
    }

    /// Whether `uuid` names a line of the input. **O(len)** of the input the first
    /// time, **O(1)** after.
    fn known(&mut self, uuid: &str) -> bool {
        let input = self.input;
        self.known
            .get_or_insert_with(|| {
                lines(input)
                    .filter_map(|(_, span)| {
                        serde_json::from_str::<Chain<'_>>(&input[span]).ok()?.uuid
                    })
                    .collect()
            })
            .contains(uuid)
    }

    /// Writes a line (and its newline), its parent re-linked or its gap bridged (only
    /// for a line of the input, `verbatim`), and makes it the latest line with a uuid.
    fn emit(&mut self, out: &mut String, line: &str, verbatim: bool) {
        let mut line = std::borrow::Cow::Borrowed(line);
        if self.claude {
            if let Ok(chain) = serde_json::from_str::<Chain<'_>>(&line) {
                let patch = chain.parent.and_then(|raw| {
                    let parent = serde_json::from_str::<Option<String>>(raw.get()).ok()??;
                    let to = match self.relink.get(&parent).cloned() {
                        Some(to) => to,
                        None if verbatim && self.after_drop && !self.known(&parent) => {
                            self.last_uuid.clone()
                        }
                        None => return None,
                    };
                    let value = to
                        .as_ref()
                        .map_or_else(|| "null".to_owned(), |u| format!("{u:?}"));
                    Some((span_of(&line, raw), value))
                });
                if chain.uuid.is_some() {
                    self.last_uuid.clone_from(&chain.uuid);
                    self.after_drop = false;
                }
                if let Some((span, value)) = patch {
                    line = std::borrow::Cow::Owned(splice(&line, vec![(span, value)]));
                }
            }
        }
        out.push_str(&line);
        out.push('\n');
    }

    /// A dropped line: its children will point to the line before it.
    fn forget(&mut self, line: &str) {
        if !self.claude {
            return;
        }
        if let Ok(chain) = serde_json::from_str::<Chain<'_>>(line) {
            if let Some(u) = chain.uuid {
                self.relink.insert(u, self.last_uuid.clone());
                self.after_drop = true;
            }
        }
    }
}

/// The summary line written in place of the line `first` (the first of its run):
/// for Claude Code, an `isCompactSummary` record when it is the summary of a
/// `compaction` (after its boundary), else an ordinary user record, with `uuid` (Claude
/// Code's, given by the caller, who names it in the boundary too) and `parent`.
fn summary_line(
    format: Format,
    first: &str,
    text: &str,
    tokens: u64,
    parent: &Option<String>,
    uuid: Option<&str>,
    compaction: bool,
) -> Result<String, String> {
    let mut value = shape::summary_record(format, text, tokens, first);
    if let serde_json::Value::Object(map) = &mut value {
        if format == Format::ClaudeCode && !compaction {
            map.remove("isCompactSummary");
            map.remove("isVisibleInTranscriptOnly");
        }
        if let Some(uuid) = uuid {
            map.insert("uuid".to_owned(), uuid.into());
            map.insert(
                "parentUuid".to_owned(),
                parent.clone().map_or(serde_json::Value::Null, Into::into),
            );
        }
    }
    Ok(value.to_string())
}

/// Edits line `line_no` (1-based) of message `m` (Claude Code: the blocks on that
/// line; Codex: the item); `None` when nothing is left on the line.
fn edit_line(
    t: &Transcript,
    m: usize,
    line_no: usize,
    line: &str,
    edits: &BTreeMap<usize, InPlace>,
) -> Result<Option<String>, String> {
    match t.format {
        Format::CodexRollout => {
            let Some(payload) = field(line, "payload")? else {
                return Err("no payload".to_owned());
            };
            Ok(edit_item(&line[payload.clone()], edits)?
                .map(|item| splice(line, vec![(payload, item)])))
        }
        Format::ClaudeCode => {
            let Some(message) = field(line, "message")? else {
                return Err("no message".to_owned());
            };
            let local =
                claude_code_line_edits(&t.messages[m], line_no, &line[message.clone()], edits)?;
            if local.is_empty() {
                return Ok(Some(line.to_owned()));
            }
            Ok(
                edit_content(&line[message.clone()], "content", &local, &AnthropicBlock)?
                    .map(|msg| splice(line, vec![(message, msg)])),
            )
        }
        other => Err(format!("{other} is not a JSON lines format")),
    }
}

/// The edits of `message`'s blocks that fall on line `line_no`, keyed by the
/// block's position in that line's content array (`api_message`, the line's
/// `message` object). The reader puts a rebuilt message's results first, ahead of
/// text read from earlier lines, so a block's place in the message does not give its
/// place in the line; within one line, results keep their order and so do the other
/// blocks, so the k-th result block of the line is the line's k-th `tool_result`
/// element, and likewise for the rest. **O(blocks of the message + elements of the
/// line)**.
fn claude_code_line_edits(
    message: &super::Message,
    line_no: usize,
    api_message: &str,
    edits: &BTreeMap<usize, InPlace>,
) -> Result<BTreeMap<usize, InPlace>, String> {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow, default)]
        kind: Option<std::borrow::Cow<'a, str>>,
    }
    let on_line = |k: &usize| message.block_lines.get(*k) == Some(&line_no);
    if !edits.keys().any(on_line) {
        return Ok(BTreeMap::new());
    }
    // Positions of the line's elements, results and the rest apart.
    let (mut results, mut others) = (Vec::new(), Vec::new());
    match field(api_message, "content")? {
        Some(content) if api_message[content.clone()].starts_with('[') => {
            let elements: Vec<&RawValue> =
                serde_json::from_str(&api_message[content]).map_err(|e| format!("content: {e}"))?;
            for (at, raw) in elements.iter().enumerate() {
                let kind: Kind<'_> = serde_json::from_str(raw.get()).unwrap_or(Kind { kind: None });
                if kind.kind.as_deref() == Some("tool_result") {
                    results.push(at);
                } else {
                    others.push(at);
                }
            }
        }
        _ => others.push(0),
    }
    let mut local = BTreeMap::new();
    let (mut nth_result, mut nth_other) = (0, 0);
    for (k, (block, _)) in message.blocks.iter().enumerate() {
        if !on_line(&k) {
            continue;
        }
        let (list, nth) = if matches!(block, Block::Result { .. }) {
            (&results, &mut nth_result)
        } else {
            (&others, &mut nth_other)
        };
        let at = list.get(*nth).copied();
        *nth += 1;
        if let Some(&edit) = edits.get(&k) {
            let at = at.ok_or_else(|| {
                format!("line {line_no}: block {k} is not among the line's content blocks")
            })?;
            local.insert(at, edit);
        }
    }
    Ok(local)
}

#[cfg(test)]
mod tests {
    use super::zero_usage;

    #[test]
    fn zero_usage_sets_counts_to_zero_and_keeps_every_other_byte() {
        let line = r#"{"type":"assistant","message":{"id":"m","usage":{"output_tokens":7, "input_tokens":3,"cache_creation":{"ephemeral_5m_input_tokens":2},"service_tier":"standard","cache_read_input_tokens":0}},"uuid":"u"}"#;
        let want = r#"{"type":"assistant","message":{"id":"m","usage":{"output_tokens":0, "input_tokens":0,"cache_creation":{"ephemeral_5m_input_tokens":0},"service_tier":"standard","cache_read_input_tokens":0}},"uuid":"u"}"#;
        assert_eq!(zero_usage(line).as_deref(), Some(want));
        // Nothing to zero: no usage, or every count already 0; not JSON: left alone.
        assert_eq!(zero_usage(want), None);
        assert_eq!(zero_usage(r#"{"message":{"id":"m"}}"#), None);
        assert_eq!(zero_usage("{not json"), None);
    }
}
