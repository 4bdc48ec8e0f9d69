//! A simulated long agent session, compacted safely while turns are in flight.
//!
//! A fake model streams assistant text and parallel tool calls as deltas; the tools run
//! concurrently with random latencies and their results land out of order; large
//! results push the log over budget mid-turn. After every event the loop asks the
//! [`TriggerPolicy`] for a plan ([`TriggerPolicy::plan`]): it compacts when a legal cut
//! exists, and defers while calls are in flight, waiting on
//! [`Shared::legal_cut_ready`] for the next safe point (the moment the last pending
//! result lands) instead of polling.
//!
//! The loop holds ONE structure: a compaction [`Log`] (every record with its payload,
//! beside the tracker over the records) shared as [`Shared<Log>`](Shared). Events
//! (with the payloads of calls and results) go into it, the policy plans on it, the
//! compaction applies to it in place ([`Log::apply`]: the policy's [`Plan`] of region,
//! pair atoms and retained tail), and deferred compactions await
//! [`Shared::legal_cut_ready`] on it. Nothing is rebuilt and nothing is kept in step
//! by hand. Summaries carry an argument-faithful ledger of the calls they cover,
//! written by the one ledger renderer ([`summary_text`]). After every compaction (and
//! at the end) the log is checked with [`validate`]: calls pending at the end are
//! legitimate mid-turn; any other violation, a changed pairing structure, or a tracker
//! that disagrees with the specification's code is a failure, and the program exits
//! non-zero.
//!
//! No network; time is tokio's paused clock, so the run is deterministic from its seed
//! and takes well under a second:
//!
//! ```text
//! cargo run --release --example agent_loop [SEED]
//! ```
//!
//! To plug in a real summarizer, replace [`Agent::summarize`]: it gets the plan's units
//! (one per pair) and returns the prose and the summary's token count. It runs outside
//! the lock; a plan made stale meanwhile is refused by [`Log::apply`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use cutpoint::compact::{
    Entry, Log, Options, PairingStructure, Payload, Plan, ResultStatus, summary_text, validate,
};
use cutpoint::policy::{Planned, PlannedCut, TriggerPolicy};
use cutpoint::stream::Shared;
use cutpoint::testing::reference;
use cutpoint::testing::synth::Rng;
use cutpoint::{Event, Record, RecordKind};
use futures::StreamExt;
use futures::channel::mpsc::{UnboundedSender, unbounded};

/// The context budget the policy works against.
const BUDGET: u64 = 60_000;
/// The seed used when none is given: its session defers several times mid-turn.
pub(crate) const DEFAULT_SEED: u64 = 2;
/// Agent turns (user message, rounds of tool calls, a final answer) to simulate.
const TURNS: usize = 30;

/// How the run went.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    /// One line per compaction, deferral and validation failure, in order, then the
    /// final validation's line.
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

/// What the provider's stream and the tools send the loop: an event, with the payload
/// of the record it opens or appends (a call's tool and arguments, a result's status
/// and output).
type Message = (Event, Payload);

/// The loop's state: the shared transcript, the turn it is in, and a deferred
/// compaction's waiter.
struct Agent {
    rng: Rng,
    tx: UnboundedSender<Message>,
    /// The transcript, records with payloads beside their tracker: fed, planned on,
    /// compacted and awaited, all through this one handle.
    shared: Shared<Log>,
    policy: TriggerPolicy,
    /// Calls whose tool_use has opened and whose result has not landed: id -> turn.
    in_flight: BTreeMap<String, usize>,
    turn: usize,
    rounds_left: u64,
    next_call: u64,
    out: Outcome,
    /// A deferred compaction's wait for a legal cut, in the positions of the log as it
    /// was when the policy deferred; and the calls it waits for, to name them.
    waiter: Option<Waiter>,
    deferred_on: Option<Vec<String>>,
}

/// Sends `script` (delay before each event, in ms) from a task of its own, as a
/// provider's stream or a tool would. Events without a payload of their own carry
/// `Payload::None`.
fn spawn_script(tx: &UnboundedSender<Message>, script: Vec<(u64, Event, Payload)>) {
    let tx = tx.clone();
    tokio::spawn(async move {
        for (delay, event, payload) in script {
            tokio::time::sleep(Duration::from_millis(delay)).await;
            // The loop owns the receiver until the end; a send after it stopped is moot.
            let _ = tx.unbounded_send((event, payload));
        }
    });
}

/// A scripted event without a payload.
fn step(delay: u64, event: Event) -> (u64, Event, Payload) {
    (delay, event, Payload::None)
}

/// One of `items`, drawn from `rng`.
fn pick<'a>(rng: &mut Rng, items: &[&'a str]) -> &'a str {
    items[(rng.next_u64() % items.len() as u64) as usize]
}

/// A tool call the fake model makes: its name and arguments (JSON text).
fn tool_call(rng: &mut Rng) -> (&'static str, String) {
    let file = pick(rng, &["lib", "tracker", "index", "calls", "policy", "main"]);
    let (tool, args) = match rng.range(0, 3) {
        0 => (
            "bash",
            format!(
                r#""command":"cargo {}""#,
                pick(rng, &["test", "build", "clippy"])
            ),
        ),
        1 => ("read_file", format!(r#""path":"src/{file}.rs""#)),
        2 => ("grep", format!(r#""pattern":"fn {file}","path":"src""#)),
        _ => (
            "edit_file",
            format!(r#""path":"src/{file}.rs","old":"todo","new":"done""#),
        ),
    };
    (tool, format!("{{{args}}}"))
}

/// What a tool returns: its status and output.
fn tool_result(rng: &mut Rng, tool: &str) -> Payload {
    let failed = rng.chance(0.15);
    let content = match (tool, failed) {
        ("bash", false) => format!("exit 0: {} passed\n...", rng.range(5, 300)),
        ("bash", true) => format!("exit 101: {} failed\n...", rng.range(1, 9)),
        (_, true) => "error: no such file or directory".to_owned(),
        ("grep", _) => format!("{} matches\n...", rng.range(0, 40)),
        ("edit_file", _) => "applied 1 hunk".to_owned(),
        _ => format!("// {} lines\n...", rng.range(20, 900)),
    };
    let status = [ResultStatus::Ok, ResultStatus::Error][usize::from(failed)];
    Payload::Result {
        status: Some(status),
        content: Some(content),
    }
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
        spawn_script(&self.tx, vec![step(0, Event::Record(Record::user(user)))]);
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
        let mut script = vec![step(
            self.rng.range(5, 40),
            Event::Opened(Record::assistant(0)),
        )];
        let mut last_estimate = 0;
        for _ in 0..self.rng.range(2, 8) {
            let d = self.rng.range(5, 80);
            last_estimate += d;
            script.push(step(self.rng.range(1, 15), Event::Delta { tokens: d }));
        }
        script.push(step(1, Event::Closed));
        for _ in 0..calls {
            self.next_call += 1;
            let id = format!(
                "toolu_{:02}_{:04x}",
                self.next_call,
                self.rng.next_u64() & 0xffff
            );
            let (tool, arguments) = tool_call(&mut self.rng);
            let call = Payload::Call {
                name: Some(tool.to_owned()),
                arguments: Some(arguments),
            };
            // The id comes with the block start: pending from here on.
            let open = Record::tool_use(id, 0).bound_to_previous();
            script.push((self.rng.range(1, 10), Event::Opened(open), call));
            last_estimate = 0;
            for _ in 0..self.rng.range(1, 5) {
                let d = self.rng.range(5, 60);
                last_estimate += d;
                script.push(step(self.rng.range(1, 10), Event::Delta { tokens: d }));
            }
            script.push(step(1, Event::Closed));
        }
        // The provider's exact count for the last block replaces the running estimate.
        let exact = last_estimate + self.rng.range(0, 6);
        script.push(step(1, Event::UsageReported { tokens: exact }));
        script.push(step(1, Event::TurnEnded));
        spawn_script(&self.tx, script);
    }

    /// The model's message is complete: run its calls concurrently, each with its own
    /// latency and result size; they land in whatever order they finish.
    fn dispatch_tools(&mut self) {
        let calls: Vec<(String, String)> = self.shared.read(|log| {
            log.entries()
                .iter()
                .rev()
                .take_while(|e| !matches!(e.record.kind(), RecordKind::Assistant))
                .filter_map(|e| match (e.record.kind(), &e.payload) {
                    (RecordKind::ToolUse(id), Payload::Call { name, .. }) => {
                        Some((id.to_string(), name.clone().unwrap_or_default()))
                    }
                    _ => None,
                })
                .collect()
        });
        // The results of one round form one user message: the first to land starts it,
        // the others are bound to it (no cut between them).
        let landed = Arc::new(AtomicUsize::new(0));
        for (id, tool) in calls {
            let latency = self.rng.range(20, 900);
            let size = if self.rng.chance(0.12) {
                self.rng.range(8_000, 24_000) // a file dump, a long test log
            } else {
                self.rng.range(50, 2_500)
            };
            let payload = tool_result(&mut self.rng, &tool);
            self.in_flight.insert(id.clone(), self.turn);
            let (tx, landed) = (self.tx.clone(), landed.clone());
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(latency)).await;
                let mut result = Record::tool_result(id, size);
                if landed.fetch_add(1, Ordering::Relaxed) > 0 {
                    result = result.bound_to_previous();
                }
                let _ = tx.unbounded_send((Event::Record(result), payload));
            });
        }
    }

    /// Applies one event, with its payload, to the shared transcript and moves the
    /// session on. Returns `false` once the last turn is over.
    fn apply(&mut self, event: Event, payload: Payload) -> bool {
        let applied = match event {
            Event::Record(r) => {
                // Complete records here are user messages and tool results.
                let id = r.call_id().map(ToString::to_string);
                let appended = self
                    .shared
                    .update(|log| log.append(Entry::new(r, payload)))
                    .map(drop);
                if let Some(id) = id {
                    self.in_flight.remove(&id);
                    if self.in_flight.is_empty() {
                        // The round's last result: call the model again.
                        self.start_round();
                    }
                }
                appended.map_err(|e| e.to_string())
            }
            Event::Opened(r) => {
                if let RecordKind::ToolUse(id) = r.kind() {
                    // In flight from its block start: its result is owed from now on.
                    self.in_flight.insert(id.to_string(), self.turn);
                }
                self.shared
                    .update(|log| log.open(Entry::new(r, payload)))
                    .map(drop)
                    .map_err(|e| e.to_string())
            }
            Event::TurnEnded => {
                let handled = self.shared.handle(Event::TurnEnded).map(drop);
                self.dispatch_tools();
                if self.in_flight.is_empty() {
                    // A message without calls is the turn's final answer.
                    if self.turn == TURNS {
                        return false;
                    }
                    self.start_turn();
                }
                handled.map_err(|e| e.to_string())
            }
            other => self
                .shared
                .handle(other)
                .map(drop)
                .map_err(|e| e.to_string()),
        };
        if let Err(e) = applied {
            self.fail(format!("turn {}: the log refused an event: {e}", self.turn));
        }
        true
    }

    /// Asks the policy and acts: compacts, or defers and sets the waiter.
    fn consult(&mut self, why: &str) {
        let policy = self.policy;
        match self.shared.read(|log| policy.plan(log)) {
            Planned::CompactNow { cut, plan } => self.compact(&cut, &plan, why),
            Planned::Wait(d) => {
                self.out.deferrals += 1;
                let line = format!(
                    "turn {}: deferred compaction at {} tokens (threshold {}): {d}",
                    self.turn,
                    d.total_tokens,
                    self.policy.threshold_tokens()
                );
                self.line(line);
                self.deferred_on = Some(d.waiting_on.iter().map(|id| id.to_string()).collect());
                self.waiter = Some(Box::pin(self.shared.legal_cut_ready(d.resume_at)));
            }
            _ => {}
        }
    }

    /// A stand-in for an LLM summarizer, run outside the lock: prose naming what the
    /// region did, and the summary's size (prose plus the ledger of its units as
    /// [`summary_text`] writes it, about 4 characters a token).
    fn summarize(&self, plan: &Plan) -> (String, u64) {
        let units = self.shared.read(|log| log.units(plan));
        let failed = units
            .iter()
            .filter(|u| u.status == Some(ResultStatus::Error))
            .count();
        let text = format!(
            "Earlier work up to turn {}: {} tool calls ({failed} failed); ledger below.",
            self.turn,
            units.len()
        );
        let chars = summary_text(&text, &units).len();
        (text, (chars / 4) as u64 + 16)
    }

    /// Compacts `plan`'s region into one summary record, in place in the shared log
    /// (records, payloads and tracker at once), then validates.
    fn compact(&mut self, cut: &PlannedCut, plan: &Plan, why: &str) {
        let before = self
            .shared
            .read(|log| validate(log.entries(), Options::allowing_pending()));
        let (text, summary_tokens) = self.summarize(plan);
        let applied = self
            .shared
            .update(|log| log.apply(plan, Some(text), summary_tokens));
        let applied = match applied {
            Ok(applied) => applied,
            Err(e) => {
                self.fail(format!("turn {}: applying {plan}: {e}", self.turn));
                return;
            }
        };
        let (start, end) = (plan.region.start, plan.region.end);
        // Positions from before this compaction are stale. Any waiter was made in the
        // old numbering: drop it; the policy recreates one in the new numbering if it
        // still has to wait.
        self.waiter = None;
        self.out.compactions += 1;
        let after = self.shared.read(|log| log.tracker().total_tokens());
        let mut line = format!(
            "turn {}: compacted records {start}..{end} ({} tokens, {} calls) into a {summary_tokens}-token summary{}; log {} -> {after} tokens",
            self.turn,
            applied.removed_tokens,
            applied.covered_calls,
            if cut.past_target {
                " at the next safe point past the target"
            } else {
                ""
            },
            cut.total_tokens,
        );
        if let Some(ids) = self.deferred_on.take() {
            let _ = write!(line, "; {why}, after waiting on {}", ids.join(", "));
        }
        match self.check(Some(&before.structure)) {
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

    /// Validates the log ([`validate`], pending calls at the end allowed) and checks
    /// that its pairing structure is `structure` (when given), that the calls it holds
    /// pending are exactly those in flight, and that its tracker agrees with the
    /// specification's code on every cut. **O(n²)** (the reference rescans per cut):
    /// fine after each compaction.
    fn check(&self, structure: Option<&PairingStructure>) -> Result<(), String> {
        self.shared.read(|log| {
            let report = validate(log.entries(), Options::allowing_pending());
            if let Some(v) = report.violations.first() {
                return Err(format!("{} violations, first {v}", report.violations.len()));
            }
            if structure.is_some_and(|s| *s != report.structure) {
                return Err("the pairing structure changed".to_owned());
            }
            let t = log.tracker();
            let pending: BTreeSet<String> =
                t.pending_calls().iter().map(|p| p.id.to_string()).collect();
            if !pending.iter().eq(self.in_flight.keys()) {
                return Err(format!(
                    "pending calls {pending:?}, in flight {:?}",
                    self.in_flight.keys().collect::<Vec<_>>()
                ));
            }
            let records: Vec<Record> = log.entries().iter().map(|e| e.record.clone()).collect();
            let open = t.open_record().is_some();
            for c in 0..=records.len() {
                let want = reference::is_legal_cut(&records, c) && !(open && c == records.len());
                if t.is_legal_cut(c) != want {
                    return Err(format!(
                        "cut {c}: reference {want}, the log's tracker {}",
                        t.is_legal_cut(c)
                    ));
                }
            }
            Ok(())
        })
    }
}

/// Waits on the deferred compaction's waiter, if any.
async fn wait(waiter: &mut Option<Waiter>) -> usize {
    match waiter {
        Some(w) => w.await,
        None => std::future::pending().await,
    }
}

/// What woke the loop.
enum Wake {
    SafePoint(usize),
    Message(Option<Message>),
}

/// Runs the whole session from `seed`. Deterministic: tools' latencies are drawn from
/// the seed and time is tokio's (paused, in `main` and the test) clock.
pub(crate) async fn run(seed: u64) -> Outcome {
    let (tx, mut rx) = unbounded::<Message>();
    let shared = Shared::new(Log::new());
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
        in_flight: BTreeMap::new(),
        turn: 0,
        rounds_left: 0,
        next_call: 0,
        out: Outcome::default(),
        waiter: None,
        deferred_on: None,
    };
    println!(
        "agent_loop: seed {seed}, {TURNS} turns, budget {BUDGET} tokens, compaction at {} tokens",
        policy.threshold_tokens()
    );
    agent.start_turn();
    let mut running = true;
    loop {
        let wake = tokio::select! {
            // The safe point first: compact there before the next event moves on.
            biased;
            cut = wait(&mut agent.waiter), if agent.waiter.is_some() => Wake::SafePoint(cut),
            message = rx.next() => Wake::Message(message),
        };
        match wake {
            Wake::SafePoint(cut) => {
                // Resolved: the future is spent. Plan again on the log as it is now.
                agent.waiter = None;
                agent.consult(&format!("legal cut {cut} ready"));
            }
            Wake::Message(Some((event, payload))) => {
                agent.out.events += 1;
                running = agent.apply(event, payload) && running;
                if agent.waiter.is_none() {
                    agent.consult("at once");
                }
                if !running {
                    // No more events will come: close the channel so the stream ends.
                    agent.tx.close_channel();
                }
            }
            Wake::Message(None) => break,
        }
    }
    if agent.waiter.is_some() {
        agent.fail("a deferred compaction never reached a safe point".to_owned());
    }
    // The session is over: nothing may be pending now.
    let (report, records, tokens) = shared.read(|log| {
        let report = validate(log.entries(), Options::strict());
        (report, log.len(), log.tracker().total_tokens())
    });
    let calls = report.structure.calls.len();
    match report.violations.first() {
        None => agent.line(format!(
            "final log: {records} records, {tokens} tokens, {calls} calls; valid"
        )),
        Some(v) => agent.fail(format!("final log: {v}")),
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
