//! A simulated long agent session, compacted safely while turns are in flight.
//!
//! A fake model streams assistant text and parallel tool calls as deltas; the tools run
//! concurrently with random latencies and their results land out of order; large
//! results push the log over budget mid-turn. After every event the loop asks the
//! [`TriggerPolicy`]: it compacts when a legal cut exists, and defers while calls are in
//! flight, waiting on [`SharedTracker::legal_cut_ready`] for the next safe point (the
//! moment the last pending result lands) instead of polling.
//!
//! Compaction is simulated: records `head..cut` become one summary record and the
//! tracker is rebuilt from the new log. After every compaction the log is validated
//! with the core's pairing checks (`reference::is_legal_cut` and a pairing validator
//! below); any failure makes the program exit non-zero.
//!
//! No network; time is tokio's paused clock, so the run is deterministic from its seed
//! and takes well under a second:
//!
//! ```text
//! cargo run --release --example agent_loop [SEED]
//! ```
//!
//! To swap in a real compactor, replace [`Agent::compact`] (the plan is a
//! [`PlannedCut`]) and [`validate`].

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cutpoint::policy::{Decision, PlannedCut, TriggerPolicy};
use cutpoint::reference;
use cutpoint::stream::{SharedTracker, Tracked};
use cutpoint::synth::Rng;
use cutpoint::{Event, Record, RecordKind, Tracker};
use futures::StreamExt;
use futures::channel::mpsc::{UnboundedSender, unbounded};

/// The context budget the policy works against.
const BUDGET: u64 = 60_000;
/// The seed used when none is given: its session defers five times mid-turn.
pub(crate) const DEFAULT_SEED: u64 = 2;
/// Agent turns (user message, rounds of tool calls, a final answer) to simulate.
const TURNS: usize = 30;

/// How the run went.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// One line per compaction, deferral and validation failure, in order.
    pub(crate) lines: Vec<String>,
    /// Compactions done.
    pub(crate) compactions: usize,
    /// Deferrals announced.
    pub(crate) deferrals: usize,
    /// Validation failures (the program exits non-zero when any).
    pub(crate) failures: usize,
    /// Events the loop consumed.
    pub(crate) events: usize,
}

type Waiter = Pin<Box<dyn Future<Output = usize> + Send>>;

/// The loop's state: the transcript it keeps beside the tracker, and the turn it is in.
struct Agent {
    rng: Rng,
    tx: UnboundedSender<Event>,
    shared: SharedTracker,
    policy: TriggerPolicy,
    /// The transcript (sizes and pairing only; a real loop keeps payloads too).
    log: Vec<Record>,
    /// Whether the last record is still streaming.
    open: bool,
    /// Calls whose tool_use has opened and whose result has not landed: id -> turn.
    in_flight: BTreeMap<String, usize>,
    turn: usize,
    rounds_left: u64,
    next_call: u64,
    out: Outcome,
    /// The calls a deferral waits for, to name them when it completes.
    deferred_on: Option<Vec<String>>,
}

/// `record` with another token count.
fn with_tokens(record: &Record, tokens: u64) -> Record {
    let r = Record::new(record.kind().clone(), tokens);
    if record.is_bound_to_previous() {
        r.bound_to_previous()
    } else {
        r
    }
}

/// Sends `script` (delay before each event, in ms) from a task of its own, as a
/// provider's stream or a tool would.
fn spawn_script(tx: &UnboundedSender<Event>, script: Vec<(u64, Event)>) {
    let tx = tx.clone();
    tokio::spawn(async move {
        for (delay, event) in script {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            // The loop owns the receiver until the end; a send after it stopped is moot.
            let _ = tx.unbounded_send(event);
        }
    });
}

impl Agent {
    fn line(&mut self, line: String) {
        println!("{line}");
        self.out.lines.push(line);
    }

    fn fail(&mut self, what: String) {
        self.out.failures += 1;
        let line = format!("validation FAILED: {what}");
        eprintln!("{line}");
        self.out.lines.push(line);
    }

    /// Starts a turn: a user message, then the first model round.
    fn start_turn(&mut self) {
        self.turn += 1;
        let user = if self.turn == 1 {
            self.rng.range(2_500, 4_000) // system prompt and task: pinned
        } else {
            self.rng.range(20, 400)
        };
        self.rounds_left = self.rng.range(1, 4);
        spawn_script(&self.tx, vec![(0, Event::Record(Record::user(user)))]);
        self.start_round();
    }

    /// One model message streamed as deltas: text, then parallel calls (none in the
    /// turn's final round), then the usage report and the end of the message.
    fn start_round(&mut self) {
        let calls = if self.rounds_left == 0 {
            0
        } else {
            self.rounds_left -= 1;
            self.rng.range(1, 4)
        };
        let mut script = vec![(self.rng.range(5, 40), Event::Opened(Record::assistant(0)))];
        let mut last_estimate = 0;
        for _ in 0..self.rng.range(2, 8) {
            let d = self.rng.range(5, 80);
            last_estimate += d;
            script.push((self.rng.range(1, 15), Event::Delta { tokens: d }));
        }
        script.push((1, Event::Closed));
        for _ in 0..calls {
            self.next_call += 1;
            let id = format!(
                "toolu_{:02}_{:04x}",
                self.next_call,
                self.rng.next_u64() & 0xffff
            );
            // The id comes with the block start: pending from here on.
            let open = Record::tool_use(id, 0).bound_to_previous();
            script.push((self.rng.range(1, 10), Event::Opened(open)));
            last_estimate = 0;
            for _ in 0..self.rng.range(1, 5) {
                let d = self.rng.range(5, 60);
                last_estimate += d;
                script.push((self.rng.range(1, 10), Event::Delta { tokens: d }));
            }
            script.push((1, Event::Closed));
        }
        // The provider's exact count for the last block replaces the running estimate.
        let exact = last_estimate + self.rng.range(0, 6);
        script.push((1, Event::UsageReported { tokens: exact }));
        script.push((1, Event::TurnEnded));
        spawn_script(&self.tx, script);
    }

    /// The model's message is complete: run its calls concurrently, each with its own
    /// latency and result size; they land in whatever order they finish.
    fn dispatch_tools(&mut self) {
        let calls: Vec<String> = self
            .log
            .iter()
            .rev()
            .take_while(|r| !matches!(r.kind(), RecordKind::Assistant))
            .filter_map(|r| match r.kind() {
                RecordKind::ToolUse(id) => Some(id.to_string()),
                _ => None,
            })
            .collect();
        // The results of one round form one user message: the first to land starts it,
        // the others are bound to it (no cut between them).
        let landed = Arc::new(AtomicUsize::new(0));
        for id in calls {
            let latency = self.rng.range(20, 900);
            let size = if self.rng.chance(0.12) {
                self.rng.range(8_000, 24_000) // a file dump, a long test log
            } else {
                self.rng.range(50, 2_500)
            };
            self.in_flight.insert(id.clone(), self.turn);
            let (tx, landed) = (self.tx.clone(), landed.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(latency)).await;
                let result = Record::tool_result(id, size);
                let result = if landed.fetch_add(1, Ordering::Relaxed) > 0 {
                    result.bound_to_previous()
                } else {
                    result
                };
                let _ = tx.unbounded_send(Event::Record(result));
            });
        }
    }

    /// Mirrors one tracked event into the transcript and moves the session on.
    /// Returns `false` once the last turn is over.
    fn apply(&mut self, event: &Event) -> bool {
        match event {
            Event::Record(r) => {
                self.log.push(r.clone());
                if let RecordKind::ToolResult(id) = r.kind() {
                    self.in_flight.remove(id.as_str());
                    if self.in_flight.is_empty() {
                        // The round's last result: call the model again.
                        self.start_round();
                    }
                }
            }
            Event::Opened(r) => {
                if let RecordKind::ToolUse(id) = r.kind() {
                    // In flight from its block start: its result is owed from now on.
                    self.in_flight.insert(id.to_string(), self.turn);
                }
                self.log.push(r.clone());
                self.open = true;
            }
            Event::Delta { tokens } => {
                if let Some(last) = self.log.last_mut() {
                    *last = with_tokens(last, last.tokens() + tokens);
                }
            }
            Event::UsageReported { tokens } => {
                if let Some(last) = self.log.last_mut() {
                    *last = with_tokens(last, *tokens);
                }
            }
            Event::Closed => self.open = false,
            Event::TurnEnded => {
                self.dispatch_tools();
                if self.in_flight.is_empty() {
                    // A message without calls is the turn's final answer.
                    if self.turn == TURNS {
                        return false;
                    }
                    self.start_turn();
                }
            }
            _ => {}
        }
        true
    }

    /// Asks the policy and acts: compacts, or defers and returns the waiter.
    fn consult(&mut self, why: &str) -> Option<Waiter> {
        match self.shared.read(|t| self.policy.decide(t)) {
            Decision::CompactNow(plan) => {
                self.compact(plan, why);
                None
            }
            Decision::Defer(d) => {
                self.out.deferrals += 1;
                let line = format!(
                    "turn {}: deferred compaction at {} tokens (threshold {}): {d}",
                    self.turn,
                    d.total_tokens,
                    self.policy.threshold_tokens()
                );
                self.line(line);
                self.deferred_on = Some(d.waiting_on.iter().map(|id| id.to_string()).collect());
                Some(Box::pin(self.shared.legal_cut_ready(d.resume_at)))
            }
            _ => None,
        }
    }

    /// Simulated compaction: records `head..cut` become one summary record, and the
    /// tracker is rebuilt from the new transcript (O(n); fine for an example, and it
    /// re-derives the pairing from scratch, as the seed asks on re-entry).
    fn compact(&mut self, plan: PlannedCut, why: &str) {
        let len = self.log.len();
        // Check the plan against the reference before touching anything.
        for c in [plan.head, plan.cut] {
            if c > len || !reference::is_legal_cut(&self.log, c) || (self.open && c == len) {
                self.fail(format!("turn {}: planned cut {c} is not legal", self.turn));
                return;
            }
        }
        let summary = (plan.compacted_tokens / 12).clamp(150, 2_000);
        let mut log = Vec::with_capacity(len - (plan.cut - plan.head) + 1);
        log.extend_from_slice(&self.log[..plan.head]);
        log.push(Record::user(summary));
        log.extend_from_slice(&self.log[plan.cut..]);
        let rebuilt = match rebuild(&log, self.open) {
            Ok(t) => t,
            Err(e) => {
                self.fail(format!("turn {}: rebuilding the tracker: {e}", self.turn));
                return;
            }
        };
        let after = rebuilt.total_tokens();
        self.log = log;
        self.shared.update(|t| *t = rebuilt);
        self.out.compactions += 1;
        let mut line = format!(
            "turn {}: compacted records {}..{} ({} tokens) into a {summary}-token summary{}; log {} -> {after} tokens",
            self.turn,
            plan.head,
            plan.cut,
            plan.compacted_tokens,
            if plan.past_target {
                " at the next safe point past the target"
            } else {
                ""
            },
            plan.total_tokens,
        );
        if let Some(ids) = self.deferred_on.take() {
            let _ = write!(line, "; {why}, after waiting on {}", ids.join(", "));
        }
        match validate(&self.log, self.open, &self.in_flight, &self.shared) {
            Ok(()) => {
                line.push_str("; log valid");
                self.line(line);
            }
            Err(e) => {
                self.line(line);
                self.fail(format!("turn {}: after compaction: {e}", self.turn));
            }
        }
    }
}

/// A tracker for `log`, its last record left open when `open`.
fn rebuild(log: &[Record], open: bool) -> Result<Tracker, cutpoint::AppendError> {
    let closed = if open { log.len() - 1 } else { log.len() };
    let mut t = Tracker::from_records(log[..closed].iter().cloned())?;
    if open {
        t.open(log[closed].clone())?;
    }
    Ok(t)
}

/// The pairing checks of the seed's conditions 1-3 over the whole transcript, calls in
/// flight excepted, and the tracker's agreement with the reference on every cut.
/// **O(n²)** (the reference rescans per cut): fine after each compaction.
fn validate(
    log: &[Record],
    open: bool,
    in_flight: &BTreeMap<String, usize>,
    shared: &SharedTracker,
) -> Result<(), String> {
    let mut uses: HashMap<&str, usize> = HashMap::new();
    let mut results: HashMap<&str, usize> = HashMap::new();
    for (i, r) in log.iter().enumerate() {
        match r.kind() {
            RecordKind::ToolUse(id) => {
                if let Some(first) = uses.insert(id, i) {
                    return Err(format!("record {i}: tool_use {id} repeats record {first}"));
                }
            }
            RecordKind::ToolResult(id) => {
                let Some(&u) = uses.get(id.as_str()) else {
                    return Err(format!("record {i}: tool_result {id} without its tool_use"));
                };
                if let Some(first) = results.insert(id, i) {
                    return Err(format!(
                        "record {i}: second tool_result {id} (first {first})"
                    ));
                }
                // Condition 3: inside the turn of its call (no assistant text between).
                if let Some(a) =
                    (u + 1..i).find(|&k| matches!(log[k].kind(), RecordKind::Assistant))
                {
                    return Err(format!(
                        "record {i}: tool_result {id} lands after assistant record {a}, outside its turn"
                    ));
                }
            }
            _ => {}
        }
    }
    for (id, &u) in &uses {
        if !results.contains_key(id) && !in_flight.contains_key(*id) {
            return Err(format!(
                "tool_use {id} at record {u} has no result and is not in flight"
            ));
        }
    }
    if let Some(id) = in_flight.keys().find(|id| !uses.contains_key(id.as_str())) {
        return Err(format!(
            "call {id} is in flight but its tool_use was compacted away"
        ));
    }
    shared.read(|t| {
        t.assert_invariants();
        for c in 0..=log.len() {
            let want = reference::is_legal_cut(log, c) && !(open && c == log.len());
            if t.is_legal_cut(c) != want {
                return Err(format!(
                    "tracker says cut {c} is {}legal, the reference disagrees",
                    if want { "il" } else { "" }
                ));
            }
        }
        let total: u64 = log.iter().map(Record::tokens).sum();
        if t.total_tokens() != total {
            return Err(format!(
                "tracker counts {} tokens, the log {total}",
                t.total_tokens()
            ));
        }
        Ok(())
    })
}

/// Waits on the deferred compaction's waiter, if any.
async fn wait(waiter: &mut Option<Waiter>) -> usize {
    match waiter {
        Some(w) => w.await,
        None => std::future::pending().await,
    }
}

/// What woke the loop.
enum Step {
    SafePoint(usize),
    Event(Option<Result<(Event, cutpoint::Handled), cutpoint::EventError>>),
}

/// Runs the whole session from `seed`. Deterministic: tools' latencies are drawn from
/// the seed and time is tokio's (paused, in `main` and the test) clock.
pub(crate) async fn run(seed: u64) -> Outcome {
    let (tx, rx) = unbounded::<Event>();
    let shared = SharedTracker::default();
    let policy = TriggerPolicy::new(BUDGET)
        .threshold(0.8)
        .and_then(|p| p.keep(0.3))
        .and_then(|p| p.lookback(0.15))
        .expect("constant fractions are in range")
        .pinned_head(1);
    let mut agent = Agent {
        rng: Rng::new(seed),
        tx,
        shared: shared.clone(),
        policy,
        log: Vec::new(),
        open: false,
        in_flight: BTreeMap::new(),
        turn: 0,
        rounds_left: 0,
        next_call: 0,
        out: Outcome::default(),
        deferred_on: None,
    };
    println!(
        "agent_loop: seed {seed}, {TURNS} turns, budget {BUDGET} tokens, compaction at {} tokens",
        policy.threshold_tokens()
    );
    let mut tracked = Tracked::new(rx, shared.clone());
    let mut waiter: Option<Waiter> = None;
    agent.start_turn();
    let mut running = true;
    loop {
        let step = tokio::select! {
            // The safe point first: compact there before the next event moves on.
            biased;
            cut = wait(&mut waiter), if waiter.is_some() => Step::SafePoint(cut),
            item = tracked.next() => Step::Event(item),
        };
        match step {
            Step::SafePoint(cut) => {
                let why = format!("legal cut {cut} ready");
                waiter = agent.consult(&why);
            }
            Step::Event(Some(Ok((event, _handled)))) => {
                agent.out.events += 1;
                running = agent.apply(&event) && running;
                if waiter.is_none() {
                    waiter = agent.consult("at once");
                }
                if !running {
                    // No more events will come: close the channel so the stream ends.
                    agent.tx.close_channel();
                }
            }
            Step::Event(Some(Err(e))) => agent.fail(format!("event refused: {e}")),
            Step::Event(None) => break,
        }
    }
    if waiter.is_some() {
        agent.fail("a deferred compaction never reached a safe point".to_owned());
    }
    agent.out
}

#[tokio::main(flavor = "current_thread", start_paused = true)]
async fn main() {
    let seed = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let out = run(seed).await;
    println!(
        "done: {} events, {} compactions, {} deferrals, {} validation failures",
        out.events, out.compactions, out.deferrals, out.failures
    );
    if out.failures > 0 {
        std::process::exit(1);
    }
}
