//! Bad input never panics: truncated and corrupted transcripts go through detection,
//! every reader, validation, the tracker and rendering, and come out as values or
//! errors.

#![cfg(feature = "formats")]

use cutpoint::format::{self, ByteEstimate, Format};
use cutpoint::testing::writers as compact;
use proptest::prelude::*;

const SMALL: [&str; 3] = [
    "codex__localpush__rollout-13-19-38-trailing-call.jsonl",
    "claude-code__spotter__4d5611e5-agent-acompact-e1f845.jsonl",
    "openhands__wrong_initial_state.json",
];

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/transcripts/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

const CHAT: &str = r#"[{"role":"user","content":"q"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"b","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"b","content":"x"},{"role":"tool","tool_call_id":"a","content":"y"},{"role":"assistant","content":"done"}]"#;

/// Everything a caller may do with a text, none of which may panic.
fn exercise(text: &str) {
    let _ = format::detect(text);
    for f in Format::ALL {
        let Ok(t) = format::read(text, f, &ByteEstimate) else {
            continue;
        };
        let _ = format::rules::check_messages(t.format, &t.messages);
        let Ok(cuts) = t.legal_message_cuts() else {
            continue;
        };
        for (i, &cut) in cuts.iter().enumerate().take(4) {
            let head = cuts[..=i].first().copied().unwrap_or(0);
            let _ = compact::render(&t, text, head, cut, "s");
        }
        let _ = compact::render(&t, text, 0, t.messages.len() + 1, "s");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn truncated_and_corrupted_inputs_do_not_panic(
        which in 0..=SMALL.len(),
        cut in 0.0f64..1.0,
        flip in proptest::option::of((0.0f64..1.0, any::<u8>())),
    ) {
        let text = if which == SMALL.len() { CHAT.to_owned() } else { fixture(SMALL[which]) };
        let mut bytes = text.into_bytes();
        let keep = (bytes.len() as f64 * cut) as usize;
        bytes.truncate(keep);
        if let Some((at, b)) = flip {
            if !bytes.is_empty() {
                let i = ((bytes.len() - 1) as f64 * at) as usize;
                bytes[i] = if b.is_ascii() { b } else { b'"' };
            }
        }
        let text = String::from_utf8_lossy(&bytes).into_owned();
        exercise(&text);
    }
}

#[test]
fn every_prefix_of_a_chat_log_is_handled() {
    for end in 0..=CHAT.len() {
        exercise(&CHAT[..end]);
    }
}
