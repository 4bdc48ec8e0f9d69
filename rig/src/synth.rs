//! Seeded synthetic rig sessions, for this crate's tests, benches and examples (not a
//! stable API): a system prompt, then turns of a user message and rounds of an
//! assistant message (text, sometimes reasoning, one to three parallel tool calls)
//! answered by one user message of results (some errors), ending in a final answer.

use rig_core::completion::Message;
use rig_core::message::{
    AssistantContent, AssistantMessage, Reasoning, Text, ToolCall, ToolFunction, ToolName,
    ToolResult, ToolResultContent, UserContent,
};
use serde_json::json;

/// A small, fast, seeded generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded. **O(1)**.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 bits. **O(1)**.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// In `lo..=hi`. **O(1)**.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p`. **O(1)**.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

fn filler(rng: &mut Rng, words: u64) -> String {
    const WORDS: [&str; 8] = [
        "the", "test", "passes", "file", "index", "cut", "call", "log",
    ];
    let n = rng.range(words / 2, words);
    let mut s = String::new();
    for i in 0..n {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[(rng.next_u64() % 8) as usize]);
    }
    s
}

/// A tool call with a fresh id. **O(1)**.
pub fn call(rng: &mut Rng, n: u64) -> ToolCall {
    let (name, args) = match rng.range(0, 2) {
        0 => (
            "bash",
            json!({"command": format!("cargo test t{}", rng.range(0, 999))}),
        ),
        1 => (
            "read_file",
            json!({"path": format!("src/m{}.rs", rng.range(0, 99))}),
        ),
        _ => (
            "grep",
            json!({"pattern": format!("fn f{}", rng.range(0, 99)), "path": "src"}),
        ),
    };
    let name = ToolName::new(name).expect("the names above are not empty");
    ToolCall::from_wire(
        format!("call_{n:06}_{:04x}", rng.next_u64() & 0xffff),
        ToolFunction::new(name, args),
    )
}

/// The result of `call`: text, sometimes large, sometimes an error. **O(size)**.
pub fn result(rng: &mut Rng, call: &ToolCall) -> ToolResult {
    let words = if rng.chance(0.1) { 1_500 } else { 120 };
    let text = format!("{}\n{}", rng.range(0, 300), filler(rng, words));
    let content = vec![ToolResultContent::Text(Text::new(text))];
    if rng.chance(0.15) {
        call.error_result(content)
    } else {
        call.result(content)
    }
}

/// A session of about `messages` messages from `seed`. With `pending`, it ends with
/// an assistant message whose calls have no results yet (tools still running).
/// **O(messages)**.
pub fn session(seed: u64, messages: usize, pending: bool) -> Vec<Message> {
    let mut rng = Rng::new(seed);
    let mut out = vec![Message::System {
        content: format!("You are a coding agent. {}", filler(&mut rng, 200)),
    }];
    let mut n = 0;
    while out.len() < messages.max(2) {
        out.push(Message::User {
            content: vec![UserContent::Text(Text::new(filler(&mut rng, 40)))],
        });
        for _ in 0..rng.range(1, 4) {
            let mut content = Vec::new();
            if rng.chance(0.3) {
                content.push(AssistantContent::Reasoning(Reasoning::new(filler(
                    &mut rng, 60,
                ))));
            }
            content.push(AssistantContent::Text(Text::new(filler(&mut rng, 30))));
            let calls: Vec<ToolCall> = (0..rng.range(1, 3))
                .map(|_| {
                    n += 1;
                    call(&mut rng, n)
                })
                .collect();
            content.extend(calls.iter().cloned().map(AssistantContent::ToolCall));
            out.push(Message::Assistant(AssistantMessage::new(content)));
            out.push(Message::User {
                content: calls
                    .iter()
                    .map(|c| UserContent::ToolResult(result(&mut rng, c)))
                    .collect(),
            });
        }
        out.push(Message::Assistant(AssistantMessage::new(vec![
            AssistantContent::Text(Text::new(filler(&mut rng, 50))),
        ])));
    }
    if pending {
        out.push(Message::User {
            content: vec![UserContent::Text(Text::new("run the tests again"))],
        });
        let calls = (0..2)
            .map(|_| {
                n += 1;
                AssistantContent::ToolCall(call(&mut rng, n))
            })
            .collect();
        out.push(Message::Assistant(AssistantMessage::new(calls)));
    }
    out
}
