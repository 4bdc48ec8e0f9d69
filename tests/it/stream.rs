//! The async adapter on tokio's test runtime: deferral that waits for the last pending
//! result, queries concurrent with appends, cancelled waiters, out-of-order results.
//! No test asserts on time: paused time only orders the simulated tools.
#![cfg(feature = "stream")]

use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use cutpoint::stream::{Shared, Tracked};
use cutpoint::testing::synth::Session;
use cutpoint::{Event, EventError, Handled, OpenEvent, Record, Tracker};
use futures::{FutureExt, StreamExt, poll};

/// A user message and an assistant message with `ids.len()` parallel calls, streamed;
/// returns the position right after the last call.
fn start_turn(shared: &Shared, ids: &[&str]) -> usize {
    shared.handle(Event::Record(Record::user(2_000))).unwrap();
    shared.handle(Event::Opened(Record::assistant(0))).unwrap();
    shared.handle(Event::Delta { tokens: 120 }).unwrap();
    shared.handle(Event::Closed).unwrap();
    for id in ids {
        shared
            .handle(Event::Opened(Record::tool_use(*id, 5).bound_to_previous()))
            .unwrap();
        shared.handle(Event::Delta { tokens: 40 }).unwrap();
        shared.handle(Event::Closed).unwrap();
    }
    shared.handle(Event::TurnEnded).unwrap();
    shared.read(Tracker::len)
}

#[tokio::test(start_paused = true)]
async fn deferral_resolves_exactly_when_the_last_pending_result_lands() {
    let shared = Shared::<Tracker>::default();
    let after_calls = start_turn(&shared, &["a", "b", "c"]);
    // A compaction wanting to cut at or past the calls must wait for all three.
    let mut ready = Box::pin(shared.legal_cut_ready(after_calls));
    assert_eq!(poll!(&mut ready), Poll::Pending);
    for (k, id) in ["b", "c", "a"].into_iter().enumerate() {
        shared.append(Record::tool_result(id, 800)).unwrap();
        if k < 2 {
            assert_eq!(poll!(&mut ready), Poll::Pending, "{k} results in, not all");
        }
    }
    // The last result: the cut after it (len) is legal, and the waiter has it.
    let len = shared.read(Tracker::len);
    assert_eq!(poll!(&mut ready), Poll::Ready(len));

    // The same with the results landing from concurrent tools: the waiter wakes after
    // the last result and before anything later happens.
    let shared = Shared::<Tracker>::default();
    let after_calls = start_turn(&shared, &["x", "y", "z"]);
    let order = Arc::new(Mutex::new(Vec::new()));
    let waiter = {
        let (shared, order) = (shared.clone(), order.clone());
        tokio::spawn(async move {
            let cut = shared.legal_cut_ready(after_calls).await;
            let (len, pending) = shared.read(|t| (t.len(), t.pending_count()));
            order.lock().unwrap().push(format!("ready {cut} len {len}"));
            assert_eq!(pending, 0);
        })
    };
    let mut tools = Vec::new();
    for (id, ms) in [("x", 30), ("y", 90), ("z", 10)] {
        let (shared, order) = (shared.clone(), order.clone());
        tools.push(tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            shared.append(Record::tool_result(id, 500)).unwrap();
            order.lock().unwrap().push(format!("result {id}"));
        }));
    }
    let later = {
        let (shared, order) = (shared.clone(), order.clone());
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(500)).await;
            shared.append(Record::user(10)).unwrap();
            order.lock().unwrap().push("next turn".to_owned());
        })
    };
    for t in tools {
        t.await.unwrap();
    }
    waiter.await.unwrap();
    later.await.unwrap();
    let end = after_calls + 3;
    assert_eq!(
        *order.lock().unwrap(),
        [
            "result z".to_owned(),
            "result x".to_owned(),
            "result y".to_owned(),
            format!("ready {end} len {end}"),
            "next turn".to_owned(),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_waiter_below_the_pending_calls_resolves_at_once() {
    let shared = Shared::<Tracker>::default();
    start_turn(&shared, &["a"]);
    // Cut 1 (after the user message) is legal already.
    assert_eq!(shared.legal_cut_ready(1).now_or_never(), Some(1));
    // An open record delays the cut after it until it closes, pending calls or not.
    shared.append(Record::tool_result("a", 10)).unwrap();
    let len = shared.read(Tracker::len);
    shared.handle(Event::Opened(Record::assistant(0))).unwrap();
    let mut ready = Box::pin(shared.legal_cut_ready(len + 1));
    assert_eq!(poll!(&mut ready), Poll::Pending);
    shared.handle(Event::Delta { tokens: 9 }).unwrap();
    assert_eq!(poll!(&mut ready), Poll::Pending, "still open");
    shared.handle(Event::Closed).unwrap();
    assert_eq!(poll!(&mut ready), Poll::Ready(len + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_run_concurrently_with_appends() {
    let records = Session::records(11, 20_000);
    let shared = Shared::<Tracker>::default();
    let writer = {
        let (shared, records) = (shared.clone(), records.clone());
        tokio::spawn(async move {
            for (i, r) in records.into_iter().enumerate() {
                shared.append(r).unwrap();
                if i % 64 == 0 {
                    tokio::task::yield_now().await;
                }
            }
        })
    };
    // A waiter for the end of the log, resolved by the writer's last legal cut.
    let last_legal = Tracker::from_records(records.clone())
        .unwrap()
        .legal_cuts()
        .last()
        .unwrap();
    let waiter = tokio::spawn(shared.legal_cut_ready(last_legal));
    let reader = {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut last_len = 0;
            let mut queries = 0u64;
            loop {
                let len = shared.read(|t| {
                    let total = t.total_tokens();
                    let cut = t.select_legal_cut(total / 2, total / 4);
                    if let Ok(c) = cut {
                        assert!(t.is_legal_cut(c), "a selected cut is legal");
                    }
                    // What the reader sees is a whole tracker: never half an append.
                    assert_eq!(
                        t.legal_cuts().last() == Some(t.len()),
                        t.pending_count() == 0
                    );
                    t.len()
                });
                assert!(len >= last_len, "the log only grows: {last_len} then {len}");
                last_len = len;
                queries += 1;
                if len == 20_000 {
                    return queries;
                }
                tokio::task::yield_now().await;
            }
        })
    };
    writer.await.unwrap();
    let queries = reader.await.unwrap();
    assert!(queries > 0);
    assert_eq!(waiter.await.unwrap(), last_legal);
    let alone = Tracker::from_records(records).unwrap();
    let shared_cuts: Vec<usize> = shared.read(|t| t.legal_cuts().collect());
    assert_eq!(shared_cuts, alone.legal_cuts().collect::<Vec<_>>());
    shared.read(Tracker::assert_invariants);
}

#[tokio::test(start_paused = true)]
async fn cancelling_the_waiting_future_is_safe() {
    let shared = Shared::<Tracker>::default();
    let after = start_turn(&shared, &["a", "b"]);

    // Polled once (registered), then dropped.
    let mut first = Box::pin(shared.legal_cut_ready(after));
    assert_eq!(poll!(&mut first), Poll::Pending);
    drop(first);
    // Cancelled by a timeout, as a loop with a deadline would.
    let timed_out =
        tokio::time::timeout(Duration::from_millis(50), shared.legal_cut_ready(after)).await;
    assert!(timed_out.is_err());
    // Cancelled by losing a select.
    tokio::select! {
        _ = shared.legal_cut_ready(after) => panic!("no legal cut yet"),
        () = tokio::time::sleep(Duration::from_millis(10)) => {}
    }

    // A surviving waiter and a new one both resolve; the handle still works.
    let mut survivor = Box::pin(shared.legal_cut_ready(after));
    assert_eq!(poll!(&mut survivor), Poll::Pending);
    shared.append(Record::tool_result("a", 1)).unwrap();
    let fresh = shared.legal_cut_ready(after);
    shared.append(Record::tool_result("b", 1)).unwrap();
    let len = shared.read(Tracker::len);
    assert_eq!(fresh.await, len);
    assert_eq!(survivor.await, len);
    shared.read(Tracker::assert_invariants);
}

#[tokio::test(start_paused = true)]
async fn out_of_order_results_through_the_stream_adapter() {
    let (tx, rx) = futures::channel::mpsc::unbounded::<Event>();
    let shared = Shared::<Tracker>::default();
    let mut tracked = Tracked::new(rx, shared.clone());
    let ids = ["t0", "t1", "t2", "t3"];
    let model = {
        let tx = tx.clone();
        tokio::spawn(async move {
            tx.unbounded_send(Event::Record(Record::user(100))).unwrap();
            tx.unbounded_send(Event::Opened(Record::assistant(0)))
                .unwrap();
            tx.unbounded_send(Event::Delta { tokens: 10 }).unwrap();
            tx.unbounded_send(Event::Closed).unwrap();
            for id in ids {
                tx.unbounded_send(Event::Opened(Record::tool_use(id, 0).bound_to_previous()))
                    .unwrap();
                tx.unbounded_send(Event::Delta { tokens: 7 }).unwrap();
                tx.unbounded_send(Event::Closed).unwrap();
            }
            tx.unbounded_send(Event::TurnEnded).unwrap();
        })
    };
    model.await.unwrap();
    // Tools finish in the reverse of their call order.
    for (k, id) in ids.into_iter().enumerate() {
        let tx = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(100 - 20 * k as u64)).await;
            tx.unbounded_send(Event::Record(Record::tool_result(id, 300)))
                .unwrap();
        });
    }
    // A bad event from a confused loop: refused, the stream goes on.
    tx.unbounded_send(Event::Closed).unwrap();
    drop(tx);

    let mut landed = Vec::new();
    let mut refused = 0;
    while let Some(item) = tracked.next().await {
        match item {
            Ok((Event::Record(r), Handled::Appended(a))) if r.call_id().is_some() => {
                landed.push(r.call_id().unwrap().to_string());
                let pending = shared.read(Tracker::pending_count);
                assert_eq!(pending, ids.len() - landed.len());
                assert_eq!(a.cut_after_is_legal, pending == 0);
            }
            Ok(_) => {}
            Err(e) => {
                assert!(matches!(
                    e,
                    EventError::NotOpen {
                        event: OpenEvent::Close,
                        ..
                    }
                ));
                refused += 1;
            }
        }
    }
    assert_eq!(refused, 1);
    assert_eq!(landed, ["t3", "t2", "t1", "t0"]);
    let t = shared.cloned();
    t.assert_invariants();
    assert_eq!(t.len(), 2 + 4 + 4);
    // Legal: before the turn, after the user message, after the last result only.
    assert_eq!(t.legal_cuts().collect::<Vec<_>>(), [0, 1, 10]);
    assert_eq!(t.total_tokens(), 100 + 10 + 4 * 7 + 4 * 300);
}
