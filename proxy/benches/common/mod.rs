//! What the benches share: the fixtures, and a real request cut back to the turn
//! before it (the session's previous request).

use std::collections::HashMap;

use bytes::Bytes;
use serde_json::Value;
use serde_json::value::RawValue;

/// A fixture of `proxy/tests/fixtures`.
pub(crate) fn fixture(name: &str) -> Bytes {
    let path = format!("{}/tests/fixtures/{name}", env!("CARGO_MANIFEST_DIR"));
    Bytes::from(std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}")))
}

/// The request before `body` in its session: its history cut back to the last
/// turn's end before its own (after a user message or a tool's output that no other
/// output follows), every other byte as it was.
pub(crate) fn previous_turn(body: &[u8], key: &str) -> Bytes {
    let text = std::str::from_utf8(body).expect("UTF-8");
    let top: HashMap<String, &RawValue> = serde_json::from_str(text).expect("an object");
    let history = top[key].get();
    let start = history.as_ptr() as usize - text.as_ptr() as usize;
    let items: Vec<&RawValue> = serde_json::from_str(history).expect("an array");
    let values: Vec<Value> = items
        .iter()
        .map(|r| serde_json::from_str(r.get()).expect("JSON"))
        .collect();
    let output = |v: &Value| {
        v["role"] == "tool"
            || v["type"]
                .as_str()
                .is_some_and(|t| t.ends_with("_call_output"))
    };
    let k = (0..values.len() - 1)
        .rev()
        .find(|&i| (values[i]["role"] == "user" || output(&values[i])) && !output(&values[i + 1]))
        .expect("an earlier turn")
        + 1;
    let elements: Vec<&str> = items[..k].iter().map(|r| r.get()).collect();
    Bytes::from(format!(
        "{}[{}]{}",
        &text[..start],
        elements.join(","),
        &text[start + history.len()..]
    ))
}
