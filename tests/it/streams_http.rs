//! Real HTTP: a loopback server (hyper, 127.0.0.1 on a free port) replays each of
//! the 29 recordings in random chunk splits (seeded); a real streaming client
//! (reqwest) reads it and feeds the decoder into a shared log as the bytes arrive.
//! The log and its tracker must equal those built by appending the finished records
//! of the same recording decoded in one piece; a provider error must arrive as the
//! same error after the same items. Then `examples/live_stream.rs`'s agent loop runs
//! against the same server. Deterministic (seeded splits) and bounded (timeouts).
#![cfg(feature = "stream")]

use std::time::Duration;

use cutpoint::compact::Log;
use cutpoint::stream::decode::decode_all;
use cutpoint::stream::{FeedError, Shared};
use cutpoint::testing::Observe;

use crate::streams::{appended, recordings};

#[expect(dead_code, reason = "the example's `main` only runs as a program")]
#[path = "../../examples/live_stream.rs"]
mod example;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_recording_over_loopback_http_equals_the_finished_transcript() {
    let all = recordings();
    let bodies: Vec<Vec<u8>> = all.iter().map(|(_, _, b)| b.clone()).collect();
    let client = example::client();
    for seed in [1u64, 2, 3] {
        let addr = example::serve(bodies.clone(), seed)
            .await
            .expect("a loopback port");
        for (n, (name, format, bytes)) in all.iter().enumerate() {
            let shared = Shared::new(Log::new());
            let url = format!("http://{addr}/{n}");
            let (items, error) = tokio::time::timeout(
                Duration::from_secs(30),
                example::stream_into(&client, &url, *format, shared.clone()),
            )
            .await
            .unwrap_or_else(|_| panic!("{name}: timed out"));
            let (whole, whole_error) = decode_all(*format, bytes);
            assert_eq!(items, whole, "{name} (seed {seed}): the items");
            match (error, whole_error) {
                (None, None) => {}
                (Some(FeedError::Decode(e)), Some(w)) => assert_eq!(e, w, "{name}"),
                (e, w) => panic!("{name}: {e:?} against {w:?}"),
            }
            let live = shared.cloned();
            live.assert_invariants();
            let rebuilt = appended(&whole);
            assert_eq!(
                live.tracker().observe(),
                rebuilt.tracker().observe(),
                "{name} (seed {seed})"
            );
            assert_eq!(live.entries(), rebuilt.entries(), "{name} (seed {seed})");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiter_wakes_when_the_streamed_calls_result_lands() {
    let (name, format, bytes) = recordings()
        .into_iter()
        .find(|(n, _, _)| n.contains("f82268f2"))
        .expect("the parallel Chat calls recording");
    let addr = example::serve(vec![bytes], 9).await.expect("a port");
    let shared = Shared::new(Log::new());
    shared
        .update(|log| log.append(cutpoint::Record::user(100).into()))
        .unwrap();
    // Waiting for a cut past the user message: none while the turn streams and runs.
    let ready = tokio::spawn(shared.legal_cut_ready(2));
    let (_, error) = example::stream_into(
        &example::client(),
        &format!("http://{addr}/0"),
        format,
        shared.clone(),
    )
    .await;
    assert!(error.is_none(), "{name}: {error:?}");
    let pending: Vec<String> = shared.read(|log| {
        log.tracker()
            .pending_calls()
            .iter()
            .map(|p| p.id.to_string())
            .collect()
    });
    assert_eq!(pending.len(), 2);
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!ready.is_finished(), "no legal cut while the calls run");
    shared
        .update(|log| log.append(cutpoint::Record::tool_result(pending[1].as_str(), 50).into()))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert!(!ready.is_finished(), "one call still runs");
    shared
        .update(|log| log.append(cutpoint::Record::tool_result(pending[0].as_str(), 50).into()))
        .unwrap();
    let cut = tokio::time::timeout(Duration::from_secs(10), ready)
        .await
        .expect("wakes")
        .expect("runs");
    assert_eq!(cut, 5, "after both results");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_agent_loop_runs_against_the_loopback_server() {
    for seed in [1, 7, 42] {
        let (lines, failures) = tokio::time::timeout(Duration::from_secs(60), example::run(seed))
            .await
            .expect("the loop ends");
        assert_eq!(failures, 0, "{lines:#?}");
        assert!(lines.iter().any(|l| l.contains("aborted")), "{lines:#?}");
        assert!(lines.iter().any(|l| l.contains("compacted")), "{lines:#?}");
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.contains("ready after the last result"))
                .count(),
            5
        );
    }
}
