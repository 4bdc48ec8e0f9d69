//! cutpoint as rig's memory policy: the incremental tracker under a rig history, one
//! pipeline of strategies over it, and the trigger policy's decision (compact now at
//! the nearest legal cut, or defer naming the calls in flight).
//!
//! Two ways in, one engine ([`Session`]):
//! - [`CutpointPolicy`] is a [`rig_memory::MemoryPolicy`]: wherever rig takes a
//!   policy (`PolicyMemory::new(backend, policy)`, `CompactingMemory`,
//!   `InMemoryConversationMemory::with_filter(policy.into_filter())`), so an agent
//!   changes one line. rig hands a policy the whole history on every load; the policy
//!   keeps its session between loads and appends only the messages past the ones it
//!   saw (checked by comparing the last message it saw, **O(one message)**), rebuilding
//!   only when the history is not an extension of the last one (another conversation,
//!   a cleared one).
//! - [`CutpointMemory`] is a [`rig_memory::ConversationMemory`] wrapping any backend:
//!   it sees rig's appends themselves, so a load costs the new messages and the
//!   compacted history rendered, never a read of the whole backend (once per
//!   conversation and process, the first load).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cutpoint::compact::pipeline::{Pipeline, PipelineReport, Preset};
use cutpoint::compact::strategy::Strategy;
use cutpoint::policy::{Compactor, Decision, TriggerPolicy};
use rig_core::completion::Message;
use rig_core::id::ConversationId;
use rig_core::wasm_compat::WasmBoxedFuture;
use rig_memory::{
    ConversationMemory, HeuristicTokenCounter, MemoryError, MemoryPolicy, TokenCounter,
};

use crate::convert::{ConvertError, History};

/// What one compaction pass did.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Turn {
    /// The trigger policy's decision on the history before the pass, **O(log n)**:
    /// nothing to do, compact at the nearest legal cut (`CompactNow`, its cut), or
    /// wait (`Wait`, naming the calls in flight that every later legal cut needs).
    pub decision: Decision,
    /// The pipeline's run, when the decision was not `Nothing`. On a `Wait` the
    /// pipeline still runs: its strategies act only at legal cuts and never touch a
    /// pending call, so what they reclaim before the calls in flight is safe.
    pub report: Option<PipelineReport>,
    /// The calls in flight when the pass ran (tool uses without a result in the
    /// history), in log order: every strategy left them, and their messages, alone.
    pub in_flight: Vec<String>,
    /// Messages appended since the last pass.
    pub appended: usize,
    /// Whether the history was rebuilt from the messages given (they did not extend
    /// the ones seen before).
    pub rebuilt: bool,
}

impl Turn {
    /// The calls the decision waits for (empty unless it defers). **O(k)**.
    pub fn waiting_on(&self) -> Vec<String> {
        match &self.decision {
            Decision::Wait(w) => w.waiting_on.iter().map(ToString::to_string).collect(),
            _ => Vec::new(),
        }
    }
}

/// What a [`CutpointPolicy`] does: its budget, pipeline and trigger. Cheap to clone.
#[derive(Clone)]
pub struct Settings {
    budget: u64,
    pipeline: Pipeline,
    trigger: TriggerPolicy,
    counter: Arc<dyn TokenCounter>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("budget", &self.budget)
            .field("pipeline", &self.pipeline)
            .field("trigger", &self.trigger)
            .finish()
    }
}

impl Settings {
    /// A budget of `budget` tokens, the balanced preset, rig-memory's
    /// [`HeuristicTokenCounter`], the first record pinned. **O(1)**.
    pub fn new(budget: u64) -> Self {
        let mut s = Settings {
            budget,
            pipeline: Preset::Balanced.pipeline(budget),
            trigger: TriggerPolicy::new(budget),
            counter: Arc::new(HeuristicTokenCounter::default()),
        };
        s.align_trigger();
        s
    }

    /// One of the pipeline's presets. **O(1)**.
    #[must_use]
    pub fn preset(mut self, preset: Preset) -> Self {
        self.pipeline = preset.pipeline(self.budget);
        self.align_trigger();
        self
    }

    /// One strategy alone, firing above the budget and stopping once it fits.
    /// **O(1)**.
    #[must_use]
    pub fn strategy(mut self, strategy: Strategy) -> Self {
        self.pipeline = Pipeline::one(strategy, Some(self.budget));
        self.align_trigger();
        self
    }

    /// Any pipeline. **O(1)**.
    #[must_use]
    pub fn pipeline(mut self, pipeline: Pipeline) -> Self {
        self.pipeline = pipeline;
        self.align_trigger();
        self
    }

    /// Counts tokens with `counter` (use the one the rest of the agent uses).
    /// **O(1)**.
    #[must_use]
    pub fn counter(mut self, counter: impl TokenCounter + 'static) -> Self {
        self.counter = Arc::new(counter);
        self
    }

    /// The budget. **O(1)**.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// The pipeline. **O(1)**.
    pub fn pipeline_ref(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The trigger fires where the pipeline's gentlest stage does (its lowest token
    /// threshold), keeps 40% raw and pins the first record. **O(stages)**.
    fn align_trigger(&mut self) {
        let budget = self.budget.max(1);
        let lowest = self
            .pipeline
            .stages
            .iter()
            .filter_map(|s| s.trigger.token_threshold(Some(budget)))
            .min()
            .unwrap_or(budget);
        let threshold = (lowest as f64 / budget as f64).clamp(0.0, 1.0);
        let keep = (threshold / 2.0).min(0.4);
        self.trigger = TriggerPolicy::new(budget)
            .threshold(threshold)
            .and_then(|p| p.keep(keep))
            .unwrap_or_else(|_| TriggerPolicy::new(budget))
            .pinned_head(1);
    }
}

/// One conversation under compaction: its [`History`], the pipeline's memory of
/// passes that made no progress, and the trigger. The sans-IO engine behind
/// [`CutpointPolicy`] and [`CutpointMemory`].
#[derive(Debug)]
pub struct Session {
    history: History,
    compactor: Compactor,
    trigger: TriggerPolicy,
    appended: usize,
}

impl Session {
    /// An empty session. **O(1)**.
    pub fn new(settings: &Settings) -> Self {
        Session {
            history: History::new(settings.counter.clone()),
            compactor: Compactor::new(settings.pipeline.clone()),
            trigger: settings.trigger,
            appended: 0,
        }
    }

    /// Appends one message. **O(parts)**.
    ///
    /// # Errors
    /// As [`History::push`].
    pub fn push(&mut self, message: Message) -> Result<(), ConvertError> {
        self.appended += 1;
        self.history.push(message)
    }

    /// The history. **O(1)**.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Decides (**O(log n)**, plus **O(k log k)** over `k` pending calls when it
    /// defers) and, unless there is nothing to do, runs the pipeline (what its stages
    /// cost) and replays it onto the rig parts.
    ///
    /// # Errors
    /// [`ConvertError::Mismatch`] if the pipeline's report does not fit the parts (a
    /// bug, never expected).
    pub fn compact(&mut self) -> Result<Turn, ConvertError> {
        let tracker = self.history.log().tracker();
        let decision = self.trigger.decide(tracker);
        let in_flight = tracker
            .pending_calls()
            .iter()
            .map(|p| p.id.to_string())
            .collect();
        let report = match decision {
            Decision::Nothing => None,
            _ => {
                let done = self
                    .compactor
                    .run(self.history.log_mut(), None)
                    .map_err(|e| ConvertError::Mismatch {
                        step: 0,
                        what: e.to_string(),
                    })?;
                self.history.replay(&done.report)?;
                Some(done.report)
            }
        };
        let appended = std::mem::take(&mut self.appended);
        Ok(Turn {
            decision,
            report,
            in_flight,
            appended,
            rebuilt: false,
        })
    }

    /// The compacted history as rig messages. **O(records)**.
    pub fn messages(&self) -> Vec<Message> {
        self.history.messages()
    }
}

fn policy_error(e: ConvertError) -> MemoryError {
    MemoryError::Policy(e.to_string())
}

/// A [`MemoryPolicy`] on cutpoint's incremental tracker and pipeline: replace rig's
/// `TokenWindowMemory::new(budget, counter)` by `CutpointPolicy::new(budget)`.
///
/// ```
/// use cutpoint_rig::CutpointPolicy;
/// use rig_memory::{InMemoryConversationMemory, PolicyMemory};
/// let memory = PolicyMemory::new(InMemoryConversationMemory::new(), CutpointPolicy::new(8_000));
/// # let _ = memory;
/// ```
///
/// One policy follows one conversation incrementally; given another conversation's
/// history it rebuilds (correct, not incremental). For many conversations use
/// [`CutpointMemory`].
pub struct CutpointPolicy {
    settings: Settings,
    state: Mutex<PolicyState>,
}

struct PolicyState {
    session: Session,
    /// Messages of the caller's history fed so far, and the last of them.
    fed: usize,
    last: Option<Message>,
    turn: Option<Turn>,
}

impl std::fmt::Debug for CutpointPolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CutpointPolicy")
            .field("settings", &self.settings)
            .finish()
    }
}

impl CutpointPolicy {
    /// A budget of `budget` tokens with [`Settings::new`]'s defaults. **O(1)**.
    pub fn new(budget: u64) -> Self {
        CutpointPolicy::with_settings(Settings::new(budget))
    }

    /// Any settings. **O(1)**.
    pub fn with_settings(settings: Settings) -> Self {
        let session = Session::new(&settings);
        CutpointPolicy {
            settings,
            state: Mutex::new(PolicyState {
                session,
                fed: 0,
                last: None,
                turn: None,
            }),
        }
    }

    /// The settings. **O(1)**.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// What the last [`apply`](MemoryPolicy::apply) did. **O(report)** (a clone).
    pub fn last_turn(&self) -> Option<Turn> {
        self.state.lock().ok().and_then(|s| s.turn.clone())
    }

    /// Feeds `messages` (the caller's whole history) and compacts: **O(new messages +
    /// one message compared)** to feed (only the new messages are cloned), then
    /// [`Session::compact`], then the rendering.
    ///
    /// # Errors
    /// [`MemoryError::Policy`] naming the message and part the tracker refused.
    pub fn run(&self, messages: &[Message]) -> Result<(Vec<Message>, Turn), MemoryError> {
        let mut state = self
            .state
            .lock()
            .map_err(|e| MemoryError::Internal(e.to_string()))?;
        let extends = messages.len() >= state.fed
            && match (&state.last, state.fed.checked_sub(1)) {
                (Some(last), Some(i)) => messages.get(i) == Some(last),
                (None, None) => true,
                _ => false,
            };
        let rebuilt = !extends;
        let skip = if extends {
            state.fed
        } else {
            state.session = Session::new(&self.settings);
            0
        };
        state.fed = messages.len();
        state.last = messages.last().cloned();
        for m in &messages[skip..] {
            if let Err(e) = state.session.push(m.clone()) {
                // The history no longer follows the caller's: start over next time.
                state.fed = 0;
                state.last = None;
                state.session = Session::new(&self.settings);
                return Err(policy_error(e));
            }
        }
        let mut turn = state.session.compact().map_err(policy_error)?;
        turn.rebuilt = rebuilt;
        state.turn = Some(turn.clone());
        Ok((state.session.messages(), turn))
    }
}

impl MemoryPolicy for CutpointPolicy {
    fn apply(&self, messages: Vec<Message>) -> Result<Vec<Message>, MemoryError> {
        self.run(&messages).map(|(kept, _)| kept)
    }
}

/// A [`ConversationMemory`] that keeps a compacting [`Session`] per conversation
/// beside `inner` (which keeps the full history, as before): appends go to both, a
/// load returns the compacted history.
///
/// ```
/// use cutpoint_rig::CutpointMemory;
/// use rig_memory::InMemoryConversationMemory;
/// let memory = CutpointMemory::new(InMemoryConversationMemory::new(), 8_000);
/// # let _ = memory;
/// ```
pub struct CutpointMemory<M> {
    inner: M,
    settings: Settings,
    sessions: Mutex<HashMap<ConversationId, Session>>,
    last: Mutex<Option<Turn>>,
}

impl<M> std::fmt::Debug for CutpointMemory<M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CutpointMemory")
            .field("settings", &self.settings)
            .finish()
    }
}

impl<M> CutpointMemory<M> {
    /// `inner` with a budget of `budget` tokens and [`Settings::new`]'s defaults.
    /// **O(1)**.
    pub fn new(inner: M, budget: u64) -> Self {
        CutpointMemory::with_settings(inner, Settings::new(budget))
    }

    /// `inner` with any settings. **O(1)**.
    pub fn with_settings(inner: M, settings: Settings) -> Self {
        CutpointMemory {
            inner,
            settings,
            sessions: Mutex::new(HashMap::new()),
            last: Mutex::new(None),
        }
    }

    /// The wrapped backend. **O(1)**.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// What the last load's compaction did. **O(report)** (a clone).
    pub fn last_turn(&self) -> Option<Turn> {
        self.last.lock().ok().and_then(|t| t.clone())
    }

    fn lock(
        &self,
    ) -> Result<std::sync::MutexGuard<'_, HashMap<ConversationId, Session>>, MemoryError> {
        self.sessions
            .lock()
            .map_err(|e| MemoryError::Internal(e.to_string()))
    }

    /// Compacts the tracked session of `id` and renders it, if there is one.
    fn load_tracked(&self, id: &ConversationId) -> Result<Option<Vec<Message>>, MemoryError> {
        let mut sessions = self.lock()?;
        let Some(session) = sessions.get_mut(id) else {
            return Ok(None);
        };
        let turn = session.compact().map_err(policy_error)?;
        let out = session.messages();
        if let Ok(mut last) = self.last.lock() {
            *last = Some(turn);
        }
        Ok(Some(out))
    }
}

impl<M: ConversationMemory> ConversationMemory for CutpointMemory<M> {
    fn load<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
    ) -> WasmBoxedFuture<'a, Result<Vec<Message>, MemoryError>> {
        Box::pin(async move {
            if let Some(out) = self.load_tracked(conversation_id)? {
                return Ok(out);
            }
            // First load in this process: read the backend once.
            let messages = self.inner.load(conversation_id).await?;
            let mut session = Session::new(&self.settings);
            for m in messages {
                session.push(m).map_err(policy_error)?;
            }
            self.lock()?
                .entry(conversation_id.clone())
                .or_insert(session);
            Ok(self.load_tracked(conversation_id)?.unwrap_or_default())
        })
    }

    fn append<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
        messages: Vec<Message>,
    ) -> WasmBoxedFuture<'a, Result<(), MemoryError>> {
        Box::pin(async move {
            self.inner.append(conversation_id, messages.clone()).await?;
            let mut sessions = self.lock()?;
            if let Some(session) = sessions.get_mut(conversation_id) {
                for m in messages {
                    if let Err(e) = session.push(m) {
                        // Out of step with the backend: read it again on the next load.
                        sessions.remove(conversation_id);
                        return Err(policy_error(e));
                    }
                }
            }
            Ok(())
        })
    }

    fn clear<'a>(
        &'a self,
        conversation_id: &'a ConversationId,
    ) -> WasmBoxedFuture<'a, Result<(), MemoryError>> {
        Box::pin(async move {
            self.inner.clear(conversation_id).await?;
            self.lock()?.remove(conversation_id);
            Ok(())
        })
    }
}

/// A rig-agent hook that compacts the history before every model call of a run,
/// mid-turn included: `AgentBuilder::new(model).add_hook(CutpointHook::new(budget))`.
///
/// Before a call that sends tool results, the history the hook sees ends with the
/// assistant message whose calls those results answer: from the history's side,
/// those calls are in flight. The policy keeps them (every strategy cuts only at
/// legal cuts), and when no legal cut is near the target it defers, naming them
/// ([`Turn::waiting_on`]); the results sent with the request then pair.
pub struct CutpointHook {
    policy: CutpointPolicy,
}

impl std::fmt::Debug for CutpointHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CutpointHook")
            .field("policy", &self.policy)
            .finish()
    }
}

impl CutpointHook {
    /// A budget of `budget` tokens with [`Settings::new`]'s defaults. **O(1)**.
    pub fn new(budget: u64) -> Self {
        CutpointHook::with_settings(Settings::new(budget))
    }

    /// Any settings. **O(1)**.
    pub fn with_settings(settings: Settings) -> Self {
        CutpointHook {
            policy: CutpointPolicy::with_settings(settings),
        }
    }

    /// The policy (its [`last_turn`](CutpointPolicy::last_turn) says what the last
    /// call's compaction did). **O(1)**.
    pub fn policy(&self) -> &CutpointPolicy {
        &self.policy
    }
}

impl rig_agent::agent::AgentHook for CutpointHook {
    fn on_completion_call(
        &self,
        _ctx: &rig_agent::agent::HookContext,
        event: rig_agent::agent::CompletionCallEvent<'_>,
    ) -> impl Future<Output = rig_agent::agent::CompletionCallAction>
    + rig_core::wasm_compat::WasmCompatSend {
        use rig_agent::agent::CompletionCallAction;
        use rig_agent::agent::RequestPatch;
        // Incremental: the run's history extends the one seen at the previous call.
        let action = match self.policy.run(event.history) {
            Ok((history, _)) => CompletionCallAction::Patch(RequestPatch::new().history(history)),
            Err(e) => CompletionCallAction::Stop(format!("cutpoint: {e}")),
        };
        async move { action }
    }
}
