//! Strategies in order, gentlest first, each under a trigger and with a target; hard
//! floors; presets from gentle to aggressive; and a memory of the passes that made no
//! progress, so that none runs again until the log changes.
//!
//! ```text
//!   for each stage, in order (each at most once per run: no loop, ever):
//!     stalled on this very log before? ──▶ Step::Stalled   (Progress remembers)
//!     trigger does not fire?           ──▶ Step::NotTriggered
//!     strategy.run(goal = floors + the stage's target)
//!        ├─▶ Step::Ran(StepReport)
//!        └─▶ Step::NoProgress(why)  ──▶ remembered until the log changes
//! ```
//!
//! Triggers read the log's counters and the tracker's total (**O(1)** each); each
//! stage costs what its strategy costs. Nothing re-sums the log between stages.
//!
//! ```
//! use cutpoint::compact::pipeline::{Pipeline, Preset};
//! use cutpoint::compact::{Entry, Log};
//! use cutpoint::testing::synth::Session;
//! let mut log = Log::from_entries(Session::records(1, 2_000).into_iter().map(Entry::from))?;
//! let budget = log.tracker().total_tokens() / 3;
//! let report = Preset::Balanced.pipeline(budget).run(&mut log);
//! assert!(report.tokens_after <= budget);
//! log.assert_invariants();
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::fmt;

use super::Log;
use super::strategy::{
    AsyncSummarizer, Clear, ClearInputs, ClearThinking, Digest, Floors, Goal, Kind, LedgerOnly,
    NoProgress, Slide, StepReport, Strategy, Summarize, Summarizer, Truncate,
};

/// When a stage runs. Every trigger is read in **O(1)** (the tracker's total and the
/// log's counters, see [`Log::turn_starts`]).
#[derive(Clone, PartialEq, Debug)]
#[non_exhaustive]
pub enum Trigger {
    /// Every run.
    Always,
    /// The log holds more than this many tokens.
    TokensAbove(u64),
    /// More than this many messages.
    MessagesAbove(usize),
    /// More than this many user turns.
    TurnsAbove(usize),
    /// More than this many tool groups.
    ToolGroupsAbove(usize),
    /// More than this fraction of the pipeline's input budget (never without one).
    FractionAbove(f64),
    /// Every one fires.
    All(Vec<Trigger>),
    /// At least one fires.
    Any(Vec<Trigger>),
}

impl Trigger {
    /// Whether the trigger fires on `log`, given the input budget. **O(1)** per
    /// trigger.
    pub fn fires(&self, log: &Log, budget: Option<u64>) -> bool {
        let total = log.tracker().total_tokens();
        match self {
            Trigger::Always => true,
            Trigger::TokensAbove(t) => total > *t,
            Trigger::MessagesAbove(n) => log.message_count() > *n,
            Trigger::TurnsAbove(n) => log.turn_count() > *n,
            Trigger::ToolGroupsAbove(n) => log.tool_group_count() > *n,
            Trigger::FractionAbove(f) => budget.is_some_and(|b| total > fraction_of(b, *f)),
            Trigger::All(ts) => ts.iter().all(|t| t.fires(log, budget)),
            Trigger::Any(ts) => ts.iter().any(|t| t.fires(log, budget)),
        }
    }

    /// The token size at or below which the trigger's token conditions no longer fire
    /// (`None` when it has none): a token trigger's threshold; for [`Trigger::Any`]
    /// the lowest of its conditions', for [`Trigger::All`] the highest. **O(size)**.
    pub fn token_threshold(&self, budget: Option<u64>) -> Option<u64> {
        match self {
            Trigger::TokensAbove(t) => Some(*t),
            Trigger::FractionAbove(f) => budget.map(|b| fraction_of(b, *f)),
            Trigger::Any(ts) => ts.iter().filter_map(|t| t.token_threshold(budget)).min(),
            Trigger::All(ts) => ts.iter().filter_map(|t| t.token_threshold(budget)).max(),
            _ => None,
        }
    }
}

/// `f` of `budget`, rounded down (budgets are far below 2^53, where f64 is exact).
fn fraction_of(budget: u64, f: f64) -> u64 {
    (budget as f64 * f.clamp(0.0, 1.0)).floor() as u64
}

/// Where a stage stops.
#[derive(Clone, PartialEq, Debug, Default)]
#[non_exhaustive]
pub enum Target {
    /// Once the stage's trigger no longer fires on tokens (its
    /// [`token_threshold`](Trigger::token_threshold)); everything the strategy may when
    /// the trigger has no token condition.
    #[default]
    TriggerClears,
    /// Once the log holds at most this many tokens.
    Tokens(u64),
    /// Once the log holds at most this fraction of the input budget.
    Fraction(f64),
    /// Everything the strategy may, within the floors.
    Everything,
}

/// One step of a pipeline: a strategy, when it runs, and where it stops.
#[derive(Clone, PartialEq, Debug)]
#[non_exhaustive]
pub struct Stage {
    /// The strategy.
    pub strategy: Strategy,
    /// When it runs.
    pub trigger: Trigger,
    /// Where it stops.
    pub target: Target,
}

impl Stage {
    /// `strategy`, run when `trigger` fires, until it no longer does. **O(1)**.
    pub fn new(strategy: Strategy, trigger: Trigger) -> Self {
        Stage {
            strategy,
            trigger,
            target: Target::TriggerClears,
        }
    }

    /// Stops at `target` instead. **O(1)**.
    #[must_use]
    pub fn target(mut self, target: Target) -> Self {
        self.target = target;
        self
    }

    /// The token target for `budget`. **O(1)** (plus the trigger's size).
    pub fn target_tokens(&self, budget: Option<u64>) -> Option<u64> {
        match &self.target {
            Target::TriggerClears => self.trigger.token_threshold(budget),
            Target::Tokens(t) => Some(*t),
            Target::Fraction(f) => budget.map(|b| fraction_of(b, *f)),
            Target::Everything => None,
        }
    }
}

/// Gentle to aggressive: which strategies run, their settings and floors. Gentle
/// stages (clear thinking, clear results, digest) fire above 50% of the input
/// budget and stop at 40%; aggressive ones (summarize, slide, truncate) fire above
/// 80% and stop at 60% (50% for [`Preset::Aggressive`]). The pinned head is the first
/// record (the system prompt or task).
///
/// | preset | stages | floor: recent tool groups kept | tool uses kept by `clear` |
/// |---|---|---|---|
/// | gentle | clear-thinking, clear, digest | 8 | 8 |
/// | balanced | + summarize | 4 | 4 |
/// | aggressive | + summarize, slide, truncate | 2 | 2 |
///
/// No preset has a floor of whole user turns: an agent session is often one user turn
/// of hundreds of tool calls, which such a floor would keep whole (the point of a
/// legal cut is compacting inside a turn). `slide` keeps its own last turn, and
/// clear-thinking never touches the current turn.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[non_exhaustive]
pub enum Preset {
    /// In-place clearing and digests only: every call's ledger line survives, nothing
    /// is summarized away.
    Gentle,
    /// Gentle, then a ledger summary of the oldest region.
    Balanced,
    /// Balanced, then sliding whole turns out and, last, truncation.
    Aggressive,
}

impl Preset {
    /// Every preset, gentlest first.
    pub const ALL: [Preset; 3] = [Preset::Gentle, Preset::Balanced, Preset::Aggressive];

    /// `gentle`, `balanced` or `aggressive`. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Gentle => "gentle",
            Preset::Balanced => "balanced",
            Preset::Aggressive => "aggressive",
        }
    }

    /// The preset named `name`. **O(1)**.
    pub fn from_name(name: &str) -> Option<Preset> {
        Preset::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The pipeline for an input budget of `budget` tokens. **O(1)**.
    pub fn pipeline(self, budget: u64) -> Pipeline {
        let gentle = |strategy: Strategy| {
            Stage::new(strategy, Trigger::FractionAbove(0.5)).target(Target::Fraction(0.4))
        };
        let (groups, keep_uses, down) = match self {
            Preset::Gentle => (8, 8, 0.6),
            Preset::Balanced => (4, 4, 0.6),
            Preset::Aggressive => (2, 2, 0.5),
        };
        let aggressive = |strategy: Strategy| {
            Stage::new(strategy, Trigger::FractionAbove(0.8)).target(Target::Fraction(down))
        };
        let mut stages = vec![
            gentle(Strategy::ClearThinking(ClearThinking::default())),
            gentle(Strategy::Clear(Clear::default().keep_tool_uses(keep_uses))),
            gentle(Strategy::Digest(Digest::default())),
        ];
        if self != Preset::Gentle {
            stages.push(aggressive(Strategy::Summarize(Summarize::default())));
        }
        if self == Preset::Aggressive {
            stages.push(aggressive(Strategy::Slide(Slide::default())));
            stages.push(aggressive(Strategy::Truncate(Truncate::default())));
        }
        Pipeline {
            stages,
            floors: Floors::none().keep_head(1).min_tool_groups(groups),
            budget: Some(budget),
            keep_thinking_valid: true,
        }
    }

    /// The pipeline for a model's context window: the input budget is the window
    /// less the maximum output (the Agent Framework's context-window preset).
    /// **O(1)**.
    pub fn for_context_window(self, window: u64, max_output: u64) -> Pipeline {
        self.pipeline(window.saturating_sub(max_output))
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Strategies in order, with floors and an input budget.
#[derive(Clone, PartialEq, Debug)]
#[non_exhaustive]
pub struct Pipeline {
    /// The stages, gentlest first.
    pub stages: Vec<Stage>,
    /// Floors every stage keeps.
    pub floors: Floors,
    /// The input budget the fractions refer to, and the size a run tries to reach.
    pub budget: Option<u64>,
    /// A transcript rewrite ([`Loaded::run`](crate::format::Loaded::run)) keeps
    /// every thinking block and reasoning item it writes valid for its provider's
    /// prefix binding (Anthropic preserved thinking, OpenAI reasoning items): those
    /// whose prefix the run changed are stripped, and a run that would change the
    /// prefix of the latest assistant message's thinking is refused
    /// ([`EditError::ThinkingBound`](crate::format::EditError::ThinkingBound)).
    /// On by default: a log without signed thinking or reasoning items has nothing it
    /// applies to, and on one that has, an output the provider refuses (or whose
    /// thinking it drops) is not what a compaction is for. Where stripping would take
    /// the current turn's or the latest assistant message's thinking, the run writes
    /// a simple compaction instead ([`Compacted::simple`](crate::format::Compacted::simple)).
    /// Off, the output is written as the stages made it, the invalidated blocks listed
    /// ([`Compacted::invalidated`](crate::format::Compacted::invalidated)) and
    /// reported by `check --before` as `reasoning/prefix-changed` (for a caller that
    /// sends it with Anthropic's `drop_block`). A [`Log`] run ignores it.
    pub keep_thinking_valid: bool,
}

impl Default for Pipeline {
    /// No stages, no floors, no budget, [`keep_thinking_valid`](Pipeline::keep_thinking_valid)
    /// on. **O(1)**.
    fn default() -> Self {
        Pipeline {
            stages: Vec::new(),
            floors: Floors::none(),
            budget: None,
            keep_thinking_valid: true,
        }
    }
}

/// What one stage of a run did.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Step {
    /// It ran and shrank the log (or found its target met already).
    Ran(StepReport),
    /// It could not shrink the log; the log is unchanged, and the stage will not run
    /// again before the log changes.
    NoProgress(NoProgress),
    /// Its trigger did not fire.
    NotTriggered(Kind),
    /// It made no progress on this very log before (the [`Progress`] memory), so it
    /// was not run again.
    Stalled(Kind),
}

impl Step {
    /// The stage's strategy. **O(1)**.
    pub fn kind(&self) -> Kind {
        match self {
            Step::Ran(r) => r.kind,
            Step::NoProgress(n) => n.kind,
            Step::NotTriggered(k) | Step::Stalled(k) => *k,
        }
    }
}

/// What a run did, stage by stage.
#[derive(Clone, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub struct PipelineReport {
    /// One step per stage, in order.
    pub steps: Vec<Step>,
    /// Tokens before the run.
    pub tokens_before: u64,
    /// Tokens after.
    pub tokens_after: u64,
    /// The input budget, if any.
    pub budget: Option<u64>,
}

impl PipelineReport {
    /// The report of a run that found the log within `budget` already (`tokens`
    /// tokens): no steps, nothing changed. **O(1)**.
    pub fn within_budget(tokens: u64, budget: Option<u64>) -> Self {
        PipelineReport {
            steps: Vec::new(),
            tokens_before: tokens,
            tokens_after: tokens,
            budget,
        }
    }

    /// Whether nothing ran because the log met the budget before the run (see
    /// [`Pipeline::run_to_budget`]). **O(1)**.
    pub fn was_within_budget(&self) -> bool {
        self.steps.is_empty() && self.budget.is_some_and(|b| self.tokens_before <= b)
    }

    /// Whether the log is within the budget (always, without one). **O(1)**.
    pub fn met_budget(&self) -> bool {
        self.budget.is_none_or(|b| self.tokens_after <= b)
    }

    /// The reports of the stages that ran, in order: what a provider rewrite
    /// replays (`format::edit`). **O(stages)**.
    pub fn ran(&self) -> impl Iterator<Item = &StepReport> + '_ {
        self.steps.iter().filter_map(|s| match s {
            Step::Ran(r) => Some(r),
            _ => None,
        })
    }

    /// The no-progress answers of the run: why it stopped short. **O(stages)**.
    pub fn blocked(&self) -> impl Iterator<Item = &NoProgress> + '_ {
        self.steps.iter().filter_map(|s| match s {
            Step::NoProgress(n) => Some(n),
            _ => None,
        })
    }
}

/// Which stages made no progress on which log: the memory that keeps a pass that
/// made no progress from running again until the log changes (Codex compacting again
/// and again without progress, codex #23585). Keyed by [`Log::changes`]; keep one per
/// log and pipeline.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Progress {
    /// Per stage: the log's change count when it last made no progress.
    stalled: Vec<Option<u64>>,
}

impl Progress {
    /// A fresh memory. **O(1)**.
    pub fn new() -> Self {
        Progress::default()
    }

    /// Whether stage `i` made no progress on `log` as it is now. **O(1)**.
    pub fn is_stalled(&self, i: usize, log: &Log) -> bool {
        self.stalled.get(i).copied().flatten() == Some(log.changes())
    }

    fn set(&mut self, i: usize, value: Option<u64>) {
        if self.stalled.len() <= i {
            self.stalled.resize(i + 1, None);
        }
        self.stalled[i] = value;
    }
}

impl Pipeline {
    /// An empty pipeline. **O(1)**.
    pub fn new() -> Self {
        Pipeline::default()
    }

    /// One strategy as a pipeline: with a budget, a stage that fires above it and
    /// stops once the log fits; without one, a stage that always runs and takes all it
    /// may. No floors (set them with [`floors`](Pipeline::floors)). **O(1)**.
    ///
    /// ```
    /// use cutpoint::compact::pipeline::{Pipeline, Target, Trigger};
    /// use cutpoint::compact::strategy::{Strategy, Truncate};
    /// let p = Pipeline::one(Strategy::Truncate(Truncate::default()), Some(8_000));
    /// assert_eq!(p.budget, Some(8_000));
    /// assert_eq!(p.stages[0].trigger, Trigger::TokensAbove(8_000));
    /// assert_eq!(p.stages[0].target, Target::Tokens(8_000));
    /// ```
    pub fn one(strategy: Strategy, budget: Option<u64>) -> Self {
        let target = budget.map_or(Target::Everything, Target::Tokens);
        let trigger = budget.map_or(Trigger::Always, Trigger::TokensAbove);
        Pipeline {
            stages: vec![Stage::new(strategy, trigger).target(target)],
            floors: Floors::none(),
            budget,
            keep_thinking_valid: true,
        }
    }

    /// Adds a stage. **O(1)** amortized.
    #[must_use]
    pub fn stage(mut self, stage: Stage) -> Self {
        self.stages.push(stage);
        self
    }

    /// Sets the floors. **O(1)**.
    #[must_use]
    pub fn floors(mut self, floors: Floors) -> Self {
        self.floors = floors;
        self
    }

    /// Sets the input budget. **O(1)**.
    #[must_use]
    pub fn budget(mut self, tokens: u64) -> Self {
        self.budget = Some(tokens);
        self
    }

    /// Sets [`keep_thinking_valid`](Pipeline::keep_thinking_valid). **O(1)**.
    #[must_use]
    pub fn keep_thinking_valid(mut self, on: bool) -> Self {
        self.keep_thinking_valid = on;
        self
    }

    /// Runs every stage once, in order, the summarize stages writing the ledger only,
    /// with a fresh [`Progress`]. See the module docs; each stage costs what its
    /// strategy costs.
    pub fn run(&self, log: &mut Log) -> PipelineReport {
        self.run_with(log, &mut Progress::new(), &mut LedgerOnly)
    }

    /// Runs every stage once, in order, skipping those `progress` remembers stalled
    /// on this log, `summarizer` writing the summaries' prose. Costs what the stages'
    /// strategies cost, plus **O(1)** per trigger.
    pub fn run_with(
        &self,
        log: &mut Log,
        progress: &mut Progress,
        summarizer: &mut dyn Summarizer,
    ) -> PipelineReport {
        let tokens_before = log.tracker().total_tokens();
        let mut steps = Vec::with_capacity(self.stages.len());
        for (i, stage) in self.stages.iter().enumerate() {
            let step = match self.prepare(i, stage, log, progress) {
                Err(step) => *step,
                Ok(goal) => {
                    let outcome = stage.strategy.run_with(log, &goal, summarizer);
                    Self::remember(i, outcome, log, progress)
                }
            };
            steps.push(step);
        }
        self.report(steps, tokens_before, log)
    }

    /// Brings `log` within the budget: when it is within it already, nothing runs and the log is left exactly as it was,
    /// with a report of no steps; otherwise [`run_with`](Pipeline::run_with). This is
    /// what `cutpoint compact --strategy` and the Python binding run, and what makes a
    /// compaction a fixed point: running it on its own output (which meets the
    /// budget) changes nothing. Without a budget it is `run_with`. Costs **O(1)** for
    /// a log within budget, else what `run_with` costs.
    pub fn run_to_budget(
        &self,
        log: &mut Log,
        progress: &mut Progress,
        summarizer: &mut dyn Summarizer,
    ) -> PipelineReport {
        let tokens = log.tracker().total_tokens();
        if self.budget.is_some_and(|b| tokens <= b) {
            return PipelineReport::within_budget(tokens, self.budget);
        }
        self.run_with(log, progress, summarizer)
    }

    /// As [`run_with`](Pipeline::run_with), awaiting an asynchronous summarizer for
    /// the summarize stages (the other stages run synchronously). Same cost, plus the
    /// summarizer.
    pub async fn run_async<S: AsyncSummarizer>(
        &self,
        log: &mut Log,
        progress: &mut Progress,
        summarizer: &mut S,
    ) -> PipelineReport {
        let tokens_before = log.tracker().total_tokens();
        let mut steps = Vec::with_capacity(self.stages.len());
        for (i, stage) in self.stages.iter().enumerate() {
            let step = match self.prepare(i, stage, log, progress) {
                Err(step) => *step,
                Ok(goal) => {
                    let outcome = match &stage.strategy {
                        Strategy::Summarize(s) => s.run_async(log, &goal, summarizer).await,
                        other => other.run(log, &goal),
                    };
                    Self::remember(i, outcome, log, progress)
                }
            };
            steps.push(step);
        }
        self.report(steps, tokens_before, log)
    }

    /// The goal of stage `i`, or the step it makes without running.
    fn prepare(
        &self,
        i: usize,
        stage: &Stage,
        log: &Log,
        progress: &Progress,
    ) -> Result<Goal, Box<Step>> {
        let kind = stage.strategy.kind();
        if progress.is_stalled(i, log) {
            return Err(Box::new(Step::Stalled(kind)));
        }
        if !stage.trigger.fires(log, self.budget) {
            return Err(Box::new(Step::NotTriggered(kind)));
        }
        Ok(Goal {
            floors: self.floors,
            target_tokens: stage.target_tokens(self.budget),
        })
    }

    fn remember(
        i: usize,
        outcome: Result<StepReport, NoProgress>,
        log: &Log,
        progress: &mut Progress,
    ) -> Step {
        match outcome {
            Ok(report) => {
                progress.set(i, None);
                Step::Ran(report)
            }
            Err(none) => {
                progress.set(i, Some(log.changes()));
                Step::NoProgress(none)
            }
        }
    }

    fn report(&self, steps: Vec<Step>, tokens_before: u64, log: &Log) -> PipelineReport {
        PipelineReport {
            steps,
            tokens_before,
            tokens_after: log.tracker().total_tokens(),
            budget: self.budget,
        }
    }
}

/// One strategy, or a preset's pipeline: what a caller (the CLI's `--strategy`, the
/// Python binding's `strategy=`) asks [`Settings::pipeline`] for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[non_exhaustive]
pub enum Choice {
    /// One strategy, toward the budget (as far as it may without one).
    One(Kind),
    /// The stages of [`Settings::preset`] (balanced by default).
    Pipeline,
}

impl Choice {
    /// The choice named `name`: a strategy's [`Kind::name`] or `pipeline`. **O(1)**.
    pub fn from_name(name: &str) -> Option<Choice> {
        match name {
            "pipeline" => Some(Choice::Pipeline),
            other => Kind::from_name(other).map(Choice::One),
        }
    }

    /// Its name, as [`from_name`](Choice::from_name) reads it. **O(1)**.
    pub fn name(self) -> &'static str {
        match self {
            Choice::One(kind) => kind.name(),
            Choice::Pipeline => "pipeline",
        }
    }

    /// The [`Settings`] it reads, named as the Python binding's options are (the
    /// CLI's flags are these with dashes): the floors and the budget for every
    /// strategy, clear's four for clear and for a pipeline (whose presets clear),
    /// and a pipeline's preset and summary prose. A front end refuses any other
    /// option by name rather than ignore it. (`summarize` as a choice is the one
    /// summary route, whose options are `format::loaded::SummaryOptions`.) **O(1)**.
    pub fn options(self) -> &'static [&'static str] {
        // The floors and the budget (every strategy), clear's four (clear and a
        // pipeline), a pipeline's preset and prose: each choice reads a prefix.
        const ALL: [&str; 13] = [
            "budget",
            "keep_head",
            "keep_turns",
            "context_window",
            "max_output",
            "keep_thinking_valid",
            "calibrated",
            "keep_tool_uses",
            "clear_at_least",
            "exclude_tools",
            "clear_tool_inputs",
            "preset",
            "summary",
        ];
        match self {
            Choice::One(Kind::Clear) => &ALL[..11],
            Choice::Pipeline => &ALL,
            Choice::One(_) => &ALL[..7],
        }
    }
}

/// What a caller sets on a strategy or a pipeline, named as the CLI's flags and the
/// Python binding's options name them; [`Settings::pipeline`] turns them into the
/// [`Pipeline`] to run, so both front ends build the same one.
#[derive(Clone, PartialEq, Debug)]
#[non_exhaustive]
pub struct Settings {
    /// Tokens the log must fit in.
    pub budget: Option<u64>,
    /// With [`max_output`](Settings::max_output): the budget is the window less
    /// the output, when no `budget` is set.
    pub context_window: Option<u64>,
    /// The most tokens the model may output.
    pub max_output: Option<u64>,
    /// `clear`: the most recent tool uses kept whole.
    pub keep_tool_uses: Option<usize>,
    /// `clear`: clear at least this many tokens, or nothing.
    pub clear_at_least: Option<u64>,
    /// `clear`: tools whose results are never cleared.
    pub exclude_tools: Vec<String>,
    /// `clear`: clear the cleared calls' inputs too.
    pub clear_inputs: Option<ClearInputs>,
    /// `clear`: what the placeholder costs, when the caller counts it.
    pub placeholder_tokens: Option<u64>,
    /// The most recent user turns always kept (a floor for every stage; slide and
    /// clear-thinking keep at least these).
    pub keep_turns: Option<usize>,
    /// The pipeline's preset (balanced by default).
    pub preset: Option<Preset>,
    /// [`Pipeline::keep_thinking_valid`] (on by default).
    pub keep_thinking_valid: bool,
}

impl Default for Settings {
    /// Every strategy's defaults, no budget, [`keep_thinking_valid`](Settings::keep_thinking_valid)
    /// on. **O(1)**.
    fn default() -> Self {
        Settings {
            budget: None,
            context_window: None,
            max_output: None,
            keep_tool_uses: None,
            clear_at_least: None,
            exclude_tools: Vec::new(),
            clear_inputs: None,
            placeholder_tokens: None,
            keep_turns: None,
            preset: None,
            keep_thinking_valid: true,
        }
    }
}

impl Settings {
    /// No settings: every strategy's defaults, no budget. **O(1)**.
    pub fn new() -> Self {
        Settings::default()
    }

    /// The budget: [`budget`](Settings::budget), else the context window less the
    /// output. **O(1)**.
    pub fn budget(&self) -> Option<u64> {
        self.budget.or_else(|| {
            self.context_window
                .zip(self.max_output)
                .map(|(w, m)| w.saturating_sub(m))
        })
    }

    /// `base` with the `clear` settings applied. **O(excluded tools)**.
    fn clear(&self, base: Clear) -> Clear {
        let mut clear = base;
        if let Some(n) = self.keep_tool_uses {
            clear = clear.keep_tool_uses(n);
        }
        if let Some(t) = self.clear_at_least {
            clear = clear.clear_at_least(t);
        }
        if !self.exclude_tools.is_empty() {
            clear = clear.exclude_tools(self.exclude_tools.iter().cloned());
        }
        if let Some(which) = &self.clear_inputs {
            clear = clear.clear_inputs(which.clone());
        }
        if let Some(tokens) = self.placeholder_tokens {
            clear.placeholder_tokens = tokens;
        }
        clear
    }

    /// The strategy `kind` with the settings applied. **O(excluded tools)**.
    pub fn strategy(&self, kind: Kind) -> Strategy {
        let turns = self.keep_turns;
        match kind {
            Kind::Clear => Strategy::Clear(self.clear(Clear::default())),
            Kind::ClearThinking => {
                Strategy::ClearThinking(turns.map_or_else(ClearThinking::default, |n| {
                    ClearThinking::default().keep_turns(n)
                }))
            }
            Kind::Digest => Strategy::Digest(Digest::default()),
            Kind::Slide => Strategy::Slide(
                turns.map_or_else(Slide::default, |n| Slide::default().keep_turns(n)),
            ),
            Kind::Truncate => Strategy::Truncate(Truncate::default()),
            _ => Strategy::Summarize(Summarize::default()),
        }
    }

    /// The pipeline `choice` with the settings applied, toward
    /// [`budget`](Settings::budget()): one strategy ([`Pipeline::one`], no floors but
    /// these), or the preset's stages with their floors (clear's settings on its
    /// clear stage, `keep_turns` on slide and clear-thinking). Floors: `keep_head`
    /// records pinned, `keep_turns` turns kept. **O(stages + excluded tools)**.
    ///
    /// ```
    /// use cutpoint::compact::pipeline::{Choice, Settings};
    /// use cutpoint::compact::strategy::{Kind, Strategy};
    /// let mut s = Settings::new();
    /// s.context_window = Some(200_000);
    /// s.max_output = Some(32_000);
    /// s.keep_tool_uses = Some(5);
    /// let p = s.pipeline(Choice::One(Kind::Clear), 1);
    /// assert_eq!(p.budget, Some(168_000));
    /// assert_eq!(p.floors.keep_head, 1);
    /// assert!(matches!(&p.stages[0].strategy, Strategy::Clear(c) if c.keep_tool_uses == 5));
    /// ```
    pub fn pipeline(&self, choice: Choice, keep_head: usize) -> Pipeline {
        let budget = self.budget();
        let mut pipeline = match choice {
            Choice::Pipeline => {
                let mut p = self
                    .preset
                    .unwrap_or(Preset::Balanced)
                    .pipeline(budget.unwrap_or(u64::MAX));
                for stage in &mut p.stages {
                    if let Strategy::Clear(c) = &stage.strategy {
                        stage.strategy = Strategy::Clear(self.clear(c.clone()));
                    } else if matches!(stage.strategy.kind(), Kind::Slide | Kind::ClearThinking)
                        && self.keep_turns.is_some()
                    {
                        stage.strategy = self.strategy(stage.strategy.kind());
                    }
                }
                p.budget = budget;
                p
            }
            Choice::One(kind) => Pipeline::one(self.strategy(kind), budget),
        };
        pipeline.floors.keep_head = pipeline.floors.keep_head.max(keep_head);
        if let Some(n) = self.keep_turns {
            pipeline.floors.min_turns = n;
        }
        pipeline.keep_thinking_valid = self.keep_thinking_valid;
        pipeline
    }
}
