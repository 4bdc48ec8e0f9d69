//! The policy on the incremental tracker: fed as the history grows (no rebuild),
//! deferring on calls in flight and naming them, every strategy and preset, the
//! ledger kept, each output checked by the one checker.

use cutpoint::compact::pipeline::{Preset, Settings as PipelineSettings};
use cutpoint::compact::strategy::Kind;
use cutpoint::policy::Decision;
use cutpoint_rig::{CutpointMemory, CutpointPolicy, Settings, check, synth};
use rig_core::completion::Message;
use rig_core::id::ConversationId;
use rig_core::message::{AssistantContent, AssistantMessage, Text, UserContent};
use rig_memory::{
    ConversationMemory, HeuristicTokenCounter, InMemoryConversationMemory, MemoryPolicy,
    PolicyMemory,
};

const BUDGET: u64 = 6_000;

/// A turn-by-turn feed of `messages` (as rig's memory grows: a user message, then
/// each assistant/result pair): the policy's output after each, checked.
/// Returns how many turns compacted.
fn feed(policy: &CutpointPolicy, messages: &[Message], ledger: bool) -> usize {
    let counter = HeuristicTokenCounter::default();
    let mut upto = 0;
    let mut turns = 0;
    let mut compacted = 0;
    while upto < messages.len() {
        let step = if turns % 3 == 0 { 1 } else { 2 };
        let next = (upto + step).min(messages.len());
        let (out, turn) = policy.run(&messages[..next]).unwrap();
        assert!(!turn.rebuilt, "turn {turns}: rebuilt");
        compacted += usize::from(
            turn.report
                .as_ref()
                .is_some_and(|r| r.tokens_after < r.tokens_before),
        );
        assert_eq!(turn.appended, next - upto, "turn {turns}: appended");
        let c = check(&messages[..next], &out, BUDGET, &counter);
        assert_eq!(c.broken_pairs, 0, "turn {turns}: {:?}", c.first);
        assert_eq!(c.pending_dropped, 0, "turn {turns}: {:?}", c.first);
        if ledger {
            assert_eq!(c.arguments_lost, 0, "turn {turns}: {:?}", c.first);
        }
        upto = next;
        turns += 1;
    }
    compacted
}

#[test]
fn every_preset_fed_turn_by_turn_keeps_pairs_pending_calls_and_ledger() {
    let messages = synth::session(7, 400, true);
    for preset in Preset::ALL {
        let policy = CutpointPolicy::with_settings(Settings::new(BUDGET).preset(preset));
        // Gentle and balanced keep every call's ledger line; aggressive may drop calls
        // (slide, truncate) to meet the budget.
        let compacted = feed(&policy, &messages, preset != Preset::Aggressive);
        assert!(compacted > 0, "{preset}: never compacted");
        let (out, turn) = policy.run(&messages).unwrap();
        assert_eq!(turn.appended, 0);
        let c = check(&messages, &out, BUDGET, &HeuristicTokenCounter::default());
        assert!(
            c.calls_removed > 0 || preset == Preset::Gentle,
            "{preset}: {c:?}"
        );
        if preset == Preset::Aggressive {
            assert!(c.budget_met, "{preset}: {c:?}");
        }
    }
}

#[test]
fn every_strategy_alone_keeps_pairs_and_pending_calls() {
    let messages = synth::session(8, 300, true);
    for kind in Kind::ALL {
        let strategy = PipelineSettings::new().strategy(kind);
        let policy = CutpointPolicy::with_settings(Settings::new(BUDGET).strategy(strategy));
        // Truncate drops calls without a trace and digest shortens arguments: only the
        // summarizing strategies promise the ledger.
        let compacted = feed(&policy, &messages, kind == Kind::Summarize);
        assert!(compacted > 0, "{kind:?}: never compacted");
        let out = policy.apply(messages.clone()).unwrap();
        let c = check(&messages, &out, BUDGET, &HeuristicTokenCounter::default());
        assert!(
            c.tokens_out < total_tokens(&messages),
            "{kind:?} reclaimed nothing: {c:?}"
        );
    }
}

fn total_tokens(messages: &[Message]) -> u64 {
    let counter = HeuristicTokenCounter::default();
    messages
        .iter()
        .map(|m| rig_memory::TokenCounter::count(&counter, m) as u64)
        .sum()
}

/// A first turn whose assistant message is large and ends in calls still running: no
/// legal cut past the pinned system prompt until they land.
fn in_flight() -> Vec<Message> {
    let mut m = vec![Message::System {
        content: "You are a coding agent.".to_owned(),
    }];
    let mut rng = synth::Rng::new(5);
    let calls = [
        synth::call(&mut rng, 900_001),
        synth::call(&mut rng, 900_002),
    ];
    let mut content = vec![AssistantContent::Text(Text::new("x ".repeat(20_000)))];
    content.extend(calls.iter().cloned().map(AssistantContent::ToolCall));
    m.push(Message::Assistant(AssistantMessage::new(content)));
    m
}

#[test]
fn defers_naming_the_calls_in_flight_then_compacts_when_they_land() {
    let mut messages = in_flight();
    let policy = CutpointPolicy::new(BUDGET);
    let (out, turn) = policy.run(&messages).unwrap();
    let Decision::Wait(wait) = &turn.decision else {
        panic!("expected a deferral, got {:?}", turn.decision);
    };
    let ids: Vec<String> = wait.waiting_on.iter().map(ToString::to_string).collect();
    assert_eq!(turn.waiting_on(), ids);
    assert_eq!(ids.len(), 2, "{wait}");
    assert!(ids.iter().all(|id| id.starts_with("call_90000")), "{ids:?}");
    let c = check(&messages, &out, BUDGET, &HeuristicTokenCounter::default());
    assert_eq!((c.broken_pairs, c.pending_dropped), (0, 0), "{c:?}");
    // The results land, the model answers: a legal cut past the calls exists now.
    let Message::Assistant(last) = messages.last().unwrap().clone() else {
        unreachable!()
    };
    let mut rng = synth::Rng::new(6);
    let results = last
        .content
        .iter()
        .filter_map(|c| match c {
            AssistantContent::ToolCall(call) => {
                Some(UserContent::ToolResult(synth::result(&mut rng, call)))
            }
            _ => None,
        })
        .collect();
    messages.push(Message::User { content: results });
    messages.push(Message::Assistant(AssistantMessage::new(vec![
        AssistantContent::Text(Text::new("done")),
    ])));
    let (out, turn) = policy.run(&messages).unwrap();
    assert!(
        matches!(turn.decision, Decision::CompactNow(_)),
        "{:?}",
        turn.decision
    );
    assert!(!turn.rebuilt);
    let c = check(&messages, &out, BUDGET, &HeuristicTokenCounter::default());
    assert!(c.pairs_and_ledger_ok(), "{c:?}");
}

#[test]
fn a_history_that_does_not_extend_the_last_one_is_rebuilt() {
    let a = synth::session(10, 60, false);
    let b = synth::session(11, 60, false);
    let policy = CutpointPolicy::new(BUDGET);
    assert!(!policy.run(&a).unwrap().1.rebuilt);
    assert!(policy.run(&b).unwrap().1.rebuilt);
    // Shorter than before: rebuilt too.
    assert!(policy.run(&b[..30]).unwrap().1.rebuilt);
    let (out, turn) = policy.run(&b).unwrap();
    assert!(!turn.rebuilt);
    let c = check(&b, &out, BUDGET, &HeuristicTokenCounter::default());
    assert!(c.pairs_and_ledger_ok(), "{c:?}");
}

#[test]
fn a_refused_history_is_a_policy_error_naming_the_message() {
    let mut m = synth::session(12, 10, false);
    let Some(Message::Assistant(t)) = m.iter().find(|m| matches!(m, Message::Assistant(t) if t.content.iter().any(|c| matches!(c, AssistantContent::ToolCall(_))))).cloned() else {
        unreachable!()
    };
    m.push(Message::Assistant(t)); // the same call ids again
    let at = m.len() - 1;
    let err = CutpointPolicy::new(BUDGET)
        .apply(m)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("message {at}")), "{err}");
    assert!(err.contains("already used"), "{err}");
}

#[tokio::test]
async fn memory_backends_load_the_compacted_history_and_keep_the_full_one() {
    let messages = synth::session(13, 300, false);
    let id = ConversationId::new("c1");
    let cut = CutpointMemory::new(InMemoryConversationMemory::new(), BUDGET);
    // The one-line change: the same backend, cutpoint's policy instead of a window.
    let wrapped = PolicyMemory::new(
        InMemoryConversationMemory::new(),
        CutpointPolicy::new(BUDGET),
    );
    let mut fed = 0;
    for chunk in messages.chunks(3) {
        cut.append(&id, chunk.to_vec()).await.unwrap();
        wrapped.append(&id, chunk.to_vec()).await.unwrap();
        fed += chunk.len();
        let a = cut.load(&id).await.unwrap();
        let b = wrapped.load(&id).await.unwrap();
        assert_eq!(
            a, b,
            "after {fed} messages: both routes render the same history"
        );
        let c = check(
            &messages[..fed],
            &a,
            BUDGET,
            &HeuristicTokenCounter::default(),
        );
        assert!(c.pairs_and_ledger_ok(), "after {fed}: {c:?}");
    }
    assert!(cut.last_turn().unwrap().report.is_some());
    assert_eq!(
        cut.inner().load(&id).await.unwrap(),
        messages,
        "the backend keeps everything"
    );
    cut.clear(&id).await.unwrap();
    assert!(cut.load(&id).await.unwrap().is_empty());
}
