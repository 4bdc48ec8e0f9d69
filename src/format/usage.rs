//! The provider's own token counts, where a transcript file records them.

use serde::Deserialize;

use super::json_doc::lines;
use super::{Block, Format, Message, Role, Transcript};

/// The size of the context at the last model call, as the provider reported it: for
/// Claude Code, the last assistant record's `message.usage` (input, cache creation,
/// cache read and output tokens); for Codex, the last `token_count` event's
/// `last_token_usage.total_tokens`. `None` for other formats or when the file holds
/// no usage. Such numbers count what the provider saw (system prompt, tool
/// definitions, unredacted text), so they can exceed the transcript's own estimate by
/// far.
///
/// Claude Code's own reckoning after a compaction is followed: only records after the
/// last `compact_boundary` count (the earlier ones are no longer the context), and
/// not those of its `preservedSegment`, whose usage Claude Code zeroes on load (it
/// was reported for the longer request before the compaction). So a file compacted
/// by Claude Code, or by cutpoint, reports `None` until a call after the compaction
/// reports real numbers. **O(len)** in the worst case; it reads lines from the end
/// and stops at the first usage (a file naming a `preservedSegment` parses each line
/// once more to find it).
pub fn reported_context_tokens(text: &str, format: Format) -> Option<u64> {
    let all: Vec<std::ops::Range<usize>> = match format {
        Format::ClaudeCode | Format::CodexRollout => lines(text).map(|(_, span)| span).collect(),
        _ => return None,
    };
    if format == Format::ClaudeCode {
        let kept = preserved_segments(text);
        let from = all
            .iter()
            .rposition(|span| is_compact_boundary(&text[span.clone()]))
            .map_or(0, |k| k + 1);
        return all[from..].iter().rev().find_map(|span| {
            if kept.iter().any(|k| k.contains(&span.start)) {
                return None;
            }
            claude_code(&text[span.clone()])
        });
    }
    all.into_iter().rev().find_map(|span| codex(&text[span]))
}

/// Whether a Claude Code line is a `compact_boundary` record: the word searched for
/// first, so only such lines are parsed. **O(1)** unless the line names one, then
/// **O(line)**.
fn is_compact_boundary(line: &str) -> bool {
    line.contains("\"compact_boundary\"") && super::claude_code::is_compact_boundary(line)
}

/// The `message.usage` of a Claude Code line, and whether the line is an assistant
/// record. **O(len)** of the line; a line that does not mention `usage` is not parsed.
fn claude_code_usage(line: &str) -> Option<(bool, AnthropicUsage)> {
    #[derive(Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        kind: Option<String>,
        message: Option<Msg>,
    }
    #[derive(Deserialize)]
    struct Msg {
        usage: Option<AnthropicUsage>,
    }
    if !line.contains("\"usage\"") {
        return None;
    }
    let parsed: Line = serde_json::from_str(line).ok()?;
    let assistant = parsed.kind.as_deref() == Some("assistant");
    Some((assistant, parsed.message?.usage?))
}

/// The context a Claude Code assistant record reports: its input (cached included)
/// and output tokens.
fn claude_code(line: &str) -> Option<u64> {
    match claude_code_usage(line)? {
        // A usage of 0 is no report: a synthetic message, or one whose stale usage a
        // rewrite (or Claude Code on load) zeroed; the one before it still holds.
        (true, u) => Some(u.input().saturating_add(u.output_tokens)).filter(|&n| n > 0),
        (false, _) => None,
    }
}

/// The `last_token_usage` of a Codex `token_count` line, and whether the line is an
/// `event_msg` (as Codex writes it). **O(len)** of the line; a line that does not
/// mention `token_count` is not parsed.
fn codex_last_usage(line: &str) -> Option<(bool, LastUsage)> {
    #[derive(Deserialize)]
    struct Line {
        #[serde(rename = "type")]
        kind: Option<String>,
        payload: Option<Payload>,
    }
    #[derive(Deserialize)]
    struct Payload {
        #[serde(rename = "type")]
        kind: Option<String>,
        info: Option<Info>,
    }
    #[derive(Deserialize)]
    struct Info {
        last_token_usage: Option<LastUsage>,
    }
    if !line.contains("\"token_count\"") {
        return None;
    }
    let parsed: Line = serde_json::from_str(line).ok()?;
    let payload = parsed.payload?;
    if payload.kind.as_deref() != Some("token_count") {
        return None;
    }
    let event = parsed.kind.as_deref() == Some("event_msg");
    Some((event, payload.info?.last_token_usage?))
}

/// Codex's `last_token_usage`: the last model call's counts.
#[derive(Deserialize)]
struct LastUsage {
    total_tokens: Option<u64>,
    input_tokens: Option<u64>,
}

/// The context a Codex `token_count` line reports: its `total_tokens`.
fn codex(line: &str) -> Option<u64> {
    codex_last_usage(line)?.1.total_tokens
}

/// One model call whose input a transcript file reports: the request was the live
/// history before message [`message`](UsagePoint::message) (from the last message
/// before it that starts a history), and the provider counted `reported` input tokens
/// for it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct UsagePoint {
    /// The index of the first message the call produced.
    pub message: usize,
    /// The input tokens the provider reported: Claude Code `message.usage`
    /// `input_tokens + cache_creation_input_tokens + cache_read_input_tokens`; Codex
    /// `last_token_usage.input_tokens` (cached included); Gemini CLI `tokens.input`.
    pub reported: u64,
    /// The transcript's estimate of the same request: the tokens of its messages.
    pub estimated: u64,
}

impl UsagePoint {
    /// The estimate's error relative to the reported count, `(estimated - reported) /
    /// reported`: negative when the estimate is under. **O(1)**.
    pub fn relative_error(&self) -> f64 {
        (self.estimated as f64 - self.reported as f64) / self.reported.max(1) as f64
    }
}

/// Every model call of `t` (read from `text`) whose input the file reports, in log
/// order: Claude Code assistant messages (the `usage` of a message's first record),
/// Codex `token_count` events (one per model response: the run of model items just
/// before the event), Gemini CLI `gemini` messages (`tokens.input`). Empty for other
/// formats, and calls reported as 0 input tokens (API errors, synthetic messages) are
/// left out. **O(len + messages)**: one parse of each assistant record or event.
pub fn usage_points(text: &str, t: &Transcript) -> Vec<UsagePoint> {
    let mut points: Vec<(usize, u64)> = Vec::new();
    match t.format {
        Format::ClaudeCode | Format::GeminiCli => {
            let kept = match t.format {
                Format::ClaudeCode => preserved_segments(text),
                _ => Vec::new(),
            };
            for (i, m) in t.messages.iter().enumerate() {
                if m.role != Role::Assistant {
                    continue;
                }
                let Some(span) = m.spans.first() else {
                    continue;
                };
                // Claude Code zeroes a kept segment's usage on load: it was reported
                // for the longer request before the compaction.
                if kept.iter().any(|k| k.contains(&span.start)) {
                    continue;
                }
                let Some(raw) = text.get(span.clone()) else {
                    continue;
                };
                let reported = match t.format {
                    Format::ClaudeCode => claude_code_input(raw),
                    _ => gemini_cli_input(raw),
                };
                if let Some(r) = reported {
                    points.push((i, r));
                }
            }
        }
        Format::CodexRollout => {
            // Messages are in file order; `next` is the first message after the event.
            let mut next = 0;
            for (_, span) in lines(text) {
                let line = &text[span.clone()];
                while t
                    .messages
                    .get(next)
                    .and_then(|m| m.spans.first())
                    .is_some_and(|s| s.start < span.start)
                {
                    next += 1;
                }
                let Some(reported) = codex_input(line) else {
                    continue;
                };
                // The response is the run of model items right before the event; an
                // event after inputs repeats the last one.
                let mut first = next;
                while first > 0 && is_model_output(&t.messages[first - 1]) {
                    first -= 1;
                }
                if first < next && points.last().is_none_or(|&(m, _)| m != first) {
                    points.push((first, reported));
                }
            }
        }
        _ => {}
    }
    points
        .into_iter()
        .filter(|&(_, r)| r > 0)
        .map(|(message, reported)| {
            let from = t.messages[..message]
                .iter()
                .rposition(|m| m.starts_history)
                .unwrap_or(0);
            let estimated = t.messages[from..message]
                .iter()
                .fold(0u64, |a, m| a.saturating_add(m.tokens()));
            UsagePoint {
                message,
                reported,
                estimated,
            }
        })
        .collect()
}

/// The byte ranges of the records a Claude Code `compact_boundary` keeps
/// (`compactMetadata.preservedSegment`: from the record `headUuid` to the record
/// `tailUuid`, in file order), whose `usage` Claude Code zeroes on load. **O(len)**
/// when the file names no segment (one substring search); otherwise one parse of
/// each line per segment.
fn preserved_segments(text: &str) -> Vec<std::ops::Range<usize>> {
    #[derive(Deserialize)]
    struct Boundary {
        #[serde(rename = "compactMetadata")]
        metadata: Option<Metadata>,
    }
    #[derive(Deserialize)]
    struct Metadata {
        #[serde(rename = "preservedSegment")]
        segment: Option<Segment>,
    }
    #[derive(Deserialize)]
    struct Segment {
        #[serde(rename = "headUuid")]
        head: Option<String>,
        #[serde(rename = "tailUuid")]
        tail: Option<String>,
    }
    #[derive(Deserialize)]
    struct Uuid<'a> {
        #[serde(borrow, default)]
        uuid: Option<&'a str>,
    }
    if !text.contains("\"preservedSegment\"") {
        return Vec::new();
    }
    let spans: Vec<std::ops::Range<usize>> = lines(text).map(|(_, span)| span).collect();
    let uuid_of = |span: &std::ops::Range<usize>| {
        serde_json::from_str::<Uuid<'_>>(&text[span.clone()])
            .ok()
            .and_then(|u| u.uuid)
    };
    let mut out = Vec::new();
    for (k, span) in spans.iter().enumerate() {
        let line = &text[span.clone()];
        if !line.contains("\"preservedSegment\"") || !is_compact_boundary(line) {
            continue;
        }
        let Some(Segment {
            head: Some(head),
            tail: Some(tail),
        }) = serde_json::from_str::<Boundary>(line)
            .ok()
            .and_then(|b| b.metadata?.segment)
        else {
            continue;
        };
        let after = &spans[k + 1..];
        let Some(h) = after.iter().position(|s| uuid_of(s) == Some(head.as_str())) else {
            continue;
        };
        if let Some(t) = after[h..]
            .iter()
            .position(|s| uuid_of(s) == Some(tail.as_str()))
        {
            out.push(after[h].start..after[h + t].end);
        }
    }
    out
}

/// Whether a Responses item is something the model produced (reasoning, an assistant
/// message, a call), not an input. **O(1)**.
fn is_model_output(m: &Message) -> bool {
    m.follows_reasoning() || matches!(m.blocks.first(), Some((Block::Reasoning, _)))
}

/// Anthropic's `usage` counts (absent fields are 0).
#[derive(Deserialize)]
struct AnthropicUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    cache_creation_input_tokens: u64,
    #[serde(default)]
    cache_read_input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
}

impl AnthropicUsage {
    /// The input the provider counted, cached and cache-written included. **O(1)**.
    fn input(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.cache_creation_input_tokens)
            .saturating_add(self.cache_read_input_tokens)
    }
}

/// The input a Claude Code line's `message.usage` reports, on any line.
fn claude_code_input(line: &str) -> Option<u64> {
    Some(claude_code_usage(line)?.1.input())
}

fn gemini_cli_input(element: &str) -> Option<u64> {
    #[derive(Deserialize)]
    struct Element {
        tokens: Option<Tokens>,
    }
    #[derive(Deserialize)]
    struct Tokens {
        input: Option<u64>,
    }
    if !element.contains("\"tokens\"") {
        return None;
    }
    serde_json::from_str::<Element>(element).ok()?.tokens?.input
}

/// The input a Codex `token_count` event reports: its `input_tokens`.
fn codex_input(line: &str) -> Option<u64> {
    match codex_last_usage(line)? {
        (true, last) => last.input_tokens,
        (false, _) => None,
    }
}

/// A per-session correction of the token estimate, fitted to what the provider
/// reported: `reported ≈ overhead + scale × estimated` at every [`UsagePoint`] of a
/// transcript, by least squares. `overhead` stands for what each request holds
/// besides the transcript's messages (system prompt, tool definitions), `scale` for
/// the tokenizer's ratio to the estimate (and what the file redacts). Budgets use it
/// when asked to (`cutpoint compact --calibrated`, Python's `calibrated=True`): a
/// budget in the provider's reported tokens is turned into the estimate's units by
/// [`estimate_for`](Calibration::estimate_for).
#[derive(Clone, Copy, PartialEq, Debug)]
#[non_exhaustive]
pub struct Calibration {
    /// The usage points it was fitted to (at least one).
    pub points: usize,
    /// Reported tokens per estimated token.
    pub scale: f64,
    /// Reported tokens at an estimate of 0 (may be negative when the fit says so).
    pub overhead: f64,
}

impl Calibration {
    /// The least-squares fit to `points`. With fewer than two distinct estimates (or
    /// a fit whose scale is not positive) the scale is 1 and the overhead the mean
    /// difference `reported - estimated`. `None` when `points` is empty: the file
    /// reports no usage. **O(points)**.
    pub fn fit(points: &[UsagePoint]) -> Option<Calibration> {
        if points.is_empty() {
            return None;
        }
        let n = points.len() as f64;
        let mean = |f: &dyn Fn(&UsagePoint) -> f64| points.iter().map(f).sum::<f64>() / n;
        let (me, mr) = (mean(&|p| p.estimated as f64), mean(&|p| p.reported as f64));
        let var = mean(&|p| (p.estimated as f64 - me).powi(2));
        let cov = mean(&|p| (p.estimated as f64 - me) * (p.reported as f64 - mr));
        let scale = if var > 0.0 { cov / var } else { 0.0 };
        let (scale, overhead) = if scale > 0.0 && scale.is_finite() {
            (scale, mr - scale * me)
        } else {
            (1.0, mr - me)
        };
        Some(Calibration {
            points: points.len(),
            scale,
            overhead,
        })
    }

    /// The fit to the usage points of `t`, read from `text` ([`usage_points`]).
    /// `None` when the file reports no usage (formats other than Claude Code, Codex
    /// and Gemini CLI, or no call with a reported input). **O(len + messages)**.
    pub fn of(text: &str, t: &Transcript) -> Option<Calibration> {
        Calibration::fit(&usage_points(text, t))
    }

    /// The calibrated count for an estimate of `estimated` tokens, rounded, at least
    /// 0. **O(1)**.
    pub fn apply(&self, estimated: u64) -> u64 {
        let v = (self.overhead + self.scale * estimated as f64).round();
        if v > 0.0 { v as u64 } else { 0 }
    }

    /// The largest estimate whose calibrated count is at most `reported`: a budget
    /// in the provider's tokens, in the estimate's units. `None` when even an
    /// estimate of 0 counts more than `reported` (the session's overhead alone is
    /// over it). The scale is positive ([`fit`](Calibration::fit) makes it so), so
    /// [`apply`](Calibration::apply) never falls as the estimate grows. **O(1)**.
    pub fn estimate_for(&self, reported: u64) -> Option<u64> {
        if self.apply(0) > reported {
            return None;
        }
        // The exact inverse, then a step either way to undo the float rounding.
        let guess = ((reported as f64 - self.overhead) / self.scale).floor();
        let mut e = if guess.is_finite() && guess > 0.0 {
            (guess as u64).min(u64::MAX / 2)
        } else {
            0
        };
        // A few steps at most for any budget a context window has (f64 is exact far
        // past 2^40); bounded all the same, so an absurd budget costs O(1) too.
        let mut steps = 0;
        while e > 0 && self.apply(e) > reported && steps < 64 {
            e -= 1;
            steps += 1;
        }
        while e > 0 && self.apply(e) > reported {
            // Far from any real budget: halve towards a safe answer.
            e /= 2;
        }
        steps = 0;
        while steps < 64 && e < u64::MAX / 2 && self.apply(e + 1) <= reported {
            e += 1;
            steps += 1;
        }
        Some(e)
    }
}

/// A budget in the provider's reported tokens and the estimate it stands for
/// ([`Loaded::calibrated_budget`](super::Loaded::calibrated_budget)).
#[derive(Clone, Copy, PartialEq, Debug)]
#[non_exhaustive]
pub struct CalibratedBudget {
    /// The budget asked for, in the provider's reported tokens.
    pub reported: u64,
    /// The largest estimate the fit counts within it: the budget to compact to.
    pub estimate: u64,
    /// The session's fit.
    pub fit: Calibration,
}

/// Why a budget in reported tokens has no estimate.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum CalibrateError {
    /// The file reports no input tokens to fit against.
    #[error(
        "a budget in the provider's tokens needs the input tokens the provider reported, and this {format} log reports none (Claude Code, Codex and Gemini CLI files that report usage)"
    )]
    NoUsage {
        /// The log's format.
        format: &'static str,
    },
    /// What each request holds besides the messages (system prompt, tools) is
    /// already over the budget: no compaction of the messages meets it.
    #[error(
        "over budget: the session's overhead alone (system prompt, tools: about {overhead} reported tokens, fitted to {points} usage points) is over the budget of {reported}"
    )]
    OverheadOverBudget {
        /// The budget, in reported tokens.
        reported: u64,
        /// The fit's count for an empty history.
        overhead: u64,
        /// The usage points fitted.
        points: usize,
    },
}

impl Calibration {
    /// `reported` in the estimate's units ([`estimate_for`](Calibration::estimate_for)).
    /// **O(1)**.
    ///
    /// # Errors
    /// [`CalibrateError::OverheadOverBudget`] when an empty history already counts
    /// more than `reported`.
    pub fn budget(&self, reported: u64) -> Result<CalibratedBudget, CalibrateError> {
        match self.estimate_for(reported) {
            Some(estimate) => Ok(CalibratedBudget {
                reported,
                estimate,
                fit: *self,
            }),
            None => Err(CalibrateError::OverheadOverBudget {
                reported,
                overhead: self.apply(0),
                points: self.points,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::{ByteEstimate, read};

    fn point(estimated: u64, reported: u64) -> UsagePoint {
        UsagePoint {
            message: 0,
            reported,
            estimated,
        }
    }

    #[test]
    fn estimate_for_is_the_largest_estimate_within_the_reported_budget() {
        let fits = [
            Calibration::fit(&[point(100, 5130), point(200, 5260)]).expect("points"),
            Calibration::fit(&[point(100, 200), point(200, 300), point(300, 500)]).expect("points"),
            Calibration::fit(&[point(10, 50), point(10, 70)]).expect("points"),
            Calibration::fit(&[point(1000, 10)]).expect("points"),
            Calibration {
                points: 1,
                scale: 0.37,
                overhead: -12.6,
            },
        ];
        for c in fits {
            assert_eq!(c.estimate_for(0).is_some(), c.apply(0) == 0, "{c:?}");
            for reported in (0..20_000).step_by(7).chain([10u64.pow(12)]) {
                match c.estimate_for(reported) {
                    None => assert!(c.apply(0) > reported, "{c:?} {reported}"),
                    Some(e) => {
                        assert!(c.apply(e) <= reported, "{c:?} {reported} {e}");
                        assert!(c.apply(e + 1) > reported, "{c:?} {reported} {e}");
                    }
                }
            }
        }
        // The overhead alone over the budget: no estimate fits.
        let c = Calibration::fit(&[point(100, 5130), point(200, 5260)]).expect("points");
        assert_eq!(c.estimate_for(4999), None);
        assert_eq!(c.estimate_for(5000), Some(0));
        assert_eq!(c.estimate_for(5130), Some(100));
        // Absurd budgets answer at once, with an estimate no smaller than a real one's.
        for c in [
            c,
            Calibration {
                points: 1,
                scale: 1e-9,
                overhead: 0.0,
            },
        ] {
            let e = c.estimate_for(u64::MAX).expect("fits");
            assert!(
                e >= c.estimate_for(10u64.pow(12)).expect("fits"),
                "{c:?} {e}"
            );
        }
    }

    #[test]
    fn calibration_fits_an_affine_session_exactly() {
        assert_eq!(Calibration::fit(&[]), None);
        let points: Vec<UsagePoint> = (1..6).map(|k| point(k * 100, 5000 + k * 130)).collect();
        let c = Calibration::fit(&points).expect("points");
        assert_eq!(c.points, 5);
        assert!((c.scale - 1.3).abs() < 1e-9, "{c:?}");
        assert!((c.overhead - 5000.0).abs() < 1e-6, "{c:?}");
        assert!(points.iter().all(|p| c.apply(p.estimated) == p.reported));
        // One estimate only: the mean difference.
        let c = Calibration::fit(&[point(10, 50), point(10, 70)]).expect("points");
        assert_eq!((c.scale, c.overhead), (1.0, 50.0));
        assert_eq!(c.apply(0), 50);
        // A falling fit is no scale: the mean difference again; never below 0.
        let c = Calibration::fit(&[point(10, 100), point(20, 50)]).expect("points");
        assert_eq!((c.scale, c.overhead), (1.0, 60.0));
        let c = Calibration::fit(&[point(100, 10)]).expect("points");
        assert_eq!(c.apply(0), 0);
    }

    /// A set that no line fits, against the fit worked by hand: estimates 100, 200,
    /// 300 (mean 200), reported 200, 300, 500 (mean 1000/3); covariance (100 ×
    /// 400/3 + 100 × 500/3) / 3 = 10,000, variance 20,000 / 3, so the scale is 1.5 and
    /// the overhead 1000/3 - 1.5 × 200 = 100/3.
    #[test]
    fn calibration_is_the_least_squares_fit() {
        let points = [point(100, 200), point(200, 300), point(300, 500)];
        let c = Calibration::fit(&points).expect("points");
        assert!((c.scale - 1.5).abs() < 1e-12, "{c:?}");
        assert!((c.overhead - 100.0 / 3.0).abs() < 1e-9, "{c:?}");
        // Residuals +16.7, -33.3, +16.7: 183.3, 333.3, 483.3 before rounding.
        let fitted: Vec<u64> = points.iter().map(|p| c.apply(p.estimated)).collect();
        assert_eq!(fitted, [183, 333, 483]);
    }

    #[test]
    fn the_reported_context_restarts_at_a_compaction() {
        let usage = |n: u64| format!(r#""usage":{{"input_tokens":{n},"output_tokens":1}}"#);
        let assistant = |uuid: &str, n: u64| {
            format!(
                r#"{{"type":"assistant","uuid":"{uuid}","message":{{"id":"{uuid}","role":"assistant","content":[{{"type":"text","text":"x"}}],{}}}}}"#,
                usage(n)
            )
        };
        let boundary = r#"{"type":"system","subtype":"compact_boundary","uuid":"b","compactMetadata":{"trigger":"auto","preTokens":9000}}"#;
        let summary = r#"{"type":"user","uuid":"s","parentUuid":"b","isCompactSummary":true,"message":{"role":"user","content":"summary"}}"#;
        let before = assistant("a1", 9000);
        let after = assistant("a2", 300);
        // No call since Claude Code's own compaction: the old usage is not the context.
        let text = [before.as_str(), boundary, summary].join("\n") + "\n";
        assert_eq!(reported_context_tokens(&text, Format::ClaudeCode), None);
        let text = [before.as_str(), boundary, summary, &after].join("\n") + "\n";
        assert_eq!(
            reported_context_tokens(&text, Format::ClaudeCode),
            Some(301)
        );
        // A boundary quoted in a message is no boundary.
        let quoted = r#"{"type":"user","uuid":"q","message":{"role":"user","content":"\"compact_boundary\""}}"#;
        let text = [before.as_str(), quoted].join("\n") + "\n";
        assert_eq!(
            reported_context_tokens(&text, Format::ClaudeCode),
            Some(9001)
        );
    }

    #[test]
    fn usage_points_name_the_call_and_its_request() {
        let text = concat!(
            r#"{"type":"user","uuid":"u1","message":{"role":"user","content":"hi there"}}"#,
            "\n",
            r#"{"type":"assistant","uuid":"a1","parentUuid":"u1","message":{"id":"m1","role":"assistant","content":[{"type":"text","text":"hello"}],"usage":{"input_tokens":3,"cache_creation_input_tokens":100,"cache_read_input_tokens":20,"output_tokens":9}}}"#,
            "\n",
            r#"{"type":"user","uuid":"u2","parentUuid":"a1","message":{"role":"user","content":"again"}}"#,
            "\n",
            r#"{"type":"assistant","uuid":"a2","parentUuid":"u2","message":{"id":"m2","role":"assistant","content":[{"type":"text","text":"ok"}],"usage":{"input_tokens":0,"output_tokens":0}}}"#,
            "\n",
        );
        let t = read(text, Format::ClaudeCode, &ByteEstimate).expect("reads");
        let points = usage_points(text, &t);
        // The second call reported nothing (an API error's shape): left out.
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].message, 1);
        assert_eq!(points[0].reported, 123);
        assert_eq!(points[0].estimated, t.messages[0].tokens());
        assert!(
            usage_points(
                "[]",
                &read("[]", Format::AnthropicMessages, &ByteEstimate).expect("reads")
            )
            .is_empty()
        );
    }

    #[test]
    fn a_kept_segments_usage_is_stale() {
        let usage = r#""usage":{"input_tokens":5,"cache_read_input_tokens":9000}"#;
        let lines = [
            r#"{"type":"system","subtype":"compact_boundary","parentUuid":null,"uuid":"b","compactMetadata":{"trigger":"manual","preTokens":9000,"preservedSegment":{"headUuid":"u2","anchorUuid":"s","tailUuid":"a2"}}}"#.to_owned(),
            r#"{"type":"user","uuid":"s","parentUuid":"b","isCompactSummary":true,"message":{"role":"user","content":"summary"}}"#.to_owned(),
            r#"{"type":"user","uuid":"u2","parentUuid":"s","message":{"role":"user","content":"kept"}}"#.to_owned(),
            format!(r#"{{"type":"assistant","uuid":"a2","parentUuid":"u2","message":{{"id":"m2","role":"assistant","content":[{{"type":"text","text":"kept too"}}],{usage}}}}}"#),
            r#"{"type":"user","uuid":"u3","parentUuid":"a2","message":{"role":"user","content":"new"}}"#.to_owned(),
            format!(r#"{{"type":"assistant","uuid":"a3","parentUuid":"u3","message":{{"id":"m3","role":"assistant","content":[{{"type":"text","text":"fresh"}}],{usage}}}}}"#),
        ];
        let text = lines.join("\n") + "\n";
        let t = read(&text, Format::ClaudeCode, &ByteEstimate).expect("reads");
        let points = usage_points(&text, &t);
        // Only the call after the kept segment: its usage is the compacted request's.
        assert_eq!(points.len(), 1, "{points:?}");
        assert_eq!(t.messages[points[0].message].line, 6);
        // Without the segment, both calls count.
        let plain = text.replace(
            r#","preservedSegment":{"headUuid":"u2","anchorUuid":"s","tailUuid":"a2"}"#,
            "",
        );
        let t = read(&plain, Format::ClaudeCode, &ByteEstimate).expect("reads");
        assert_eq!(usage_points(&plain, &t).len(), 2);
    }
}
