//! The incremental decision against the decision from scratch, request by request:
//! multi-turn sessions (the real Claude Code, Codex and tau-bench histories cut at
//! every turn, and generated conversations of the three APIs with retries, edits,
//! broken turns, changed `system` and `tools`, duplicate keys, shortened histories)
//! decided in every mode twice, by `Mode::decide_in` (only the new elements read,
//! when the request continues its session) and by `Mode::decide_in_from_scratch`
//! (every request read whole), each with the session its own path left. Both must
//! give the same decision, forwarded bytes included, and the same session after it;
//! and a session's reading must be what a whole reading of the request makes of it
//! (positions aside).

use std::collections::HashMap;

use cutpoint::compact::pipeline::Settings;
use cutpoint::format::{Block, ByteEstimate, Message, Note, Role};
use cutpoint_proxy::{Compaction, Decision, Mode, Route, Session};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use crate::support::*;

fn compact_mode(budget: u64) -> Mode {
    let mut settings = Settings::new();
    settings.budget = Some(budget);
    Mode::Compact(Box::new(Compaction::new(&settings).unwrap()))
}

/// What a reading says of a message, its positions (lines, spans) aside.
type Unplaced = (
    Role,
    Vec<(Block, u64)>,
    bool,
    bool,
    Vec<u64>,
    Vec<usize>,
    bool,
    Vec<(usize, Note)>,
);

fn unplaced(m: &Message) -> Unplaced {
    (
        m.role,
        m.blocks.clone(),
        m.bound,
        m.starts_history,
        m.prints.to_vec(),
        m.signed.clone(),
        m.aborts_turn,
        m.notes.clone(),
    )
}

fn all_unplaced(messages: &[Message]) -> Vec<Unplaced> {
    messages.iter().map(unplaced).collect()
}

/// A session's elements: the client's and the forwarded ones.
type Held = (Vec<Box<str>>, Option<Vec<Box<str>>>);

fn held(s: &Session) -> Held {
    (s.client().to_vec(), s.forwarded().map(<[_]>::to_vec))
}

/// Decisions made so far, by path.
#[derive(Default, Debug)]
struct Tally {
    requests: usize,
    incremental: usize,
    continued: usize,
    compacted: usize,
    refused: usize,
}

/// One conversation through one mode, both ways.
struct Both<'m> {
    mode: &'m Mode,
    route: Route,
    warm: Option<Session>,
    scratch: Option<Session>,
    tally: Tally,
}

impl<'m> Both<'m> {
    fn new(mode: &'m Mode, route: Route) -> Self {
        Both {
            mode,
            route,
            warm: None,
            scratch: None,
            tally: Tally::default(),
        }
    }

    /// Decides `body` both ways and checks that they agree.
    fn send(&mut self, body: &str, what: &str) {
        let bytes = body.as_bytes();
        let (decision, session, incremental) =
            self.mode
                .decide_in_traced(self.route, bytes, self.warm.take());
        let (scratch, scratch_session) =
            self.mode
                .decide_in_from_scratch(self.route, bytes, self.scratch.as_ref());
        assert_eq!(
            decision, scratch,
            "{what}: the incremental decision differs ({:?}, request {})",
            self.route, self.tally.requests
        );
        assert_eq!(
            session.as_ref().map(held),
            scratch_session.as_ref().map(held),
            "{what}: the sessions after differ (request {})",
            self.tally.requests
        );
        if let (Some(s), Some(t)) = (&session, &scratch_session) {
            s.assert_invariants();
            let (client, forwarded) = s.messages();
            let (client_s, forwarded_s) = t.messages();
            assert_eq!(all_unplaced(client), all_unplaced(client_s), "{what}");
            assert_eq!(
                forwarded.map(all_unplaced),
                forwarded_s.map(all_unplaced),
                "{what}"
            );
            // And what a whole reading of the request makes of it.
            let whole = cutpoint::format::read(body, self.route.format(), &ByteEstimate).unwrap();
            assert_eq!(
                all_unplaced(client),
                all_unplaced(&whole.messages),
                "{what}"
            );
        }
        // Sessions change no decision in check and repair mode.
        if !matches!(self.mode, Mode::Compact(_)) {
            assert_eq!(decision, self.mode.decide(self.route, bytes), "{what}");
        }
        self.tally.requests += 1;
        self.tally.incremental += usize::from(incremental);
        match &decision {
            Decision::Continued { .. } => self.tally.continued += 1,
            Decision::Compacted { .. } => self.tally.compacted += 1,
            Decision::Refuse(_) => self.tally.refused += 1,
            _ => {}
        }
        self.warm = session;
        self.scratch = scratch_session;
    }
}

/// A real request's body with its history cut to its first `k` elements, every
/// other byte as it was.
struct Cuts {
    text: String,
    /// Where the history array starts and ends.
    span: (usize, usize),
    elements: Vec<String>,
}

impl Cuts {
    fn of(name: &str, key: &str) -> Cuts {
        let text = String::from_utf8(fixture(name)).unwrap();
        let top: HashMap<String, &RawValue> = serde_json::from_str(&text).unwrap();
        let history = top[key].get();
        let start = history.as_ptr() as usize - text.as_ptr() as usize;
        let items: Vec<&RawValue> = serde_json::from_str(history).unwrap();
        let elements = items.iter().map(|r| r.get().to_owned()).collect();
        let span = (start, start + history.len());
        Cuts {
            text,
            span,
            elements,
        }
    }

    fn upto(&self, k: usize) -> String {
        format!(
            "{}[{}]{}",
            &self.text[..self.span.0],
            self.elements[..k].join(","),
            &self.text[self.span.1..]
        )
    }

    /// The history's lengths at which a client sends a request: after a user
    /// message or a tool's output, unless another output follows.
    fn turns(&self) -> Vec<usize> {
        let values: Vec<Value> = self
            .elements
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        let output = |v: &Value| {
            v["role"] == "tool"
                || v["type"]
                    .as_str()
                    .is_some_and(|t| t.ends_with("_call_output"))
        };
        (0..values.len())
            .filter(|&i| {
                (values[i]["role"] == "user" || output(&values[i]))
                    && values.get(i + 1).is_none_or(|next| !output(next))
            })
            .map(|i| i + 1)
            .collect()
    }

    fn tokens(&self, route: Route) -> u64 {
        cutpoint::format::read(&self.text, route.format(), &ByteEstimate)
            .unwrap()
            .live_tokens()
    }
}

/// The modes every session goes through: check, repair, and compact at budgets that
/// compact mid-session (a share of the whole history's tokens) and one that never
/// does.
fn modes(total: u64) -> Vec<Mode> {
    vec![
        Mode::Check,
        Mode::Repair,
        compact_mode(total * 3 / 10),
        compact_mode(total * 6 / 10),
        compact_mode(u64::MAX / 4),
    ]
}

/// A real history sent turn by turn (and each turn twice: a client's retry).
fn real_session(name: &str, key: &str, route: Route) -> Tally {
    let cuts = Cuts::of(name, key);
    let turns = cuts.turns();
    assert!(turns.len() > 5, "{name}: {} turns", turns.len());
    let mut total = Tally::default();
    for mode in modes(cuts.tokens(route)) {
        let mut both = Both::new(&mode, route);
        for (t, &k) in turns.iter().enumerate() {
            let body = cuts.upto(k);
            both.send(&body, name);
            if t % 7 == 3 {
                both.send(&body, name);
            }
        }
        let budget = match &mode {
            Mode::Compact(c) => c.budget().to_string(),
            _ => "-".to_owned(),
        };
        eprintln!("{name}, budget {budget}: {:?}", both.tally);
        total.requests += both.tally.requests;
        total.incremental += both.tally.incremental;
        total.continued += both.tally.continued;
        total.compacted += both.tally.compacted;
        total.refused += both.tally.refused;
    }
    total
}

#[test]
fn real_claude_code_turns_decided_incrementally_as_from_scratch() {
    let t = real_session(
        "anthropic-request__claude-reliability__python-to-rust-port.json",
        "messages",
        Route::AnthropicMessages,
    );
    // Every turn but each session's first continues its session: the incremental
    // path decides most of them, and the compacted sessions continue.
    assert!(t.incremental * 2 > t.requests, "{t:?}");
    assert!(t.compacted > 0 && t.continued > 0, "{t:?}");
}

#[test]
fn real_codex_turns_decided_incrementally_as_from_scratch() {
    let t = real_session(
        "openai-responses-request__localpush__rollout-12-41-04-parallel7.json",
        "input",
        Route::OpenAiResponses,
    );
    assert!(t.incremental * 2 > t.requests, "{t:?}");
    assert!(t.compacted > 0, "{t:?}");
}

#[test]
fn real_chat_turns_decided_incrementally_as_from_scratch() {
    let t = real_session(
        "openai-chat__tau-bench__gpt-4o-airline-traj173.json",
        "messages",
        Route::OpenAiChat,
    );
    assert!(t.incremental * 2 > t.requests, "{t:?}");
}

/// xorshift64: a fixed sequence.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }

    fn one_in(&mut self, n: u64) -> bool {
        self.below(n) == 0
    }
}

/// One step of a generated conversation: what the assistant answered and what the
/// client sends after it, as history elements of `route`.
fn step(route: Route, rng: &mut Rng, s: usize) -> Vec<Value> {
    let calls = rng.below(4) as usize;
    let text = |n: u64| "word ".repeat(1 + n as usize);
    let ids: Vec<String> = (0..calls).map(|c| format!("call_{s}_{c}")).collect();
    let mut out = Vec::new();
    match route {
        Route::AnthropicMessages => {
            let mut content = Vec::new();
            if rng.one_in(2) {
                content.push(json!({"type": "thinking", "thinking": text(rng.below(20)), "signature": format!("sig{s}")}));
            }
            if calls == 0 || rng.one_in(2) {
                content.push(json!({"type": "text", "text": text(rng.below(30))}));
            }
            for id in &ids {
                content.push(json!({"type": "tool_use", "id": id, "name": "read", "input": {"path": text(rng.below(3))}}));
            }
            out.push(json!({"role": "assistant", "content": content}));
            if calls == 0 {
                out.push(json!({"role": "user", "content": text(rng.below(10))}));
            } else {
                let results: Vec<Value> = ids
                    .iter()
                    .map(|id| json!({"type": "tool_result", "tool_use_id": id, "content": text(rng.below(200))}))
                    .collect();
                out.push(json!({"role": "user", "content": results}));
            }
        }
        Route::OpenAiChat => {
            if calls == 0 {
                out.push(json!({"role": "assistant", "content": text(rng.below(30))}));
                out.push(json!({"role": "user", "content": text(rng.below(10))}));
            } else {
                let tool_calls: Vec<Value> = ids
                    .iter()
                    .map(|id| json!({"id": id, "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}))
                    .collect();
                out.push(json!({"role": "assistant", "content": null, "tool_calls": tool_calls}));
                for id in &ids {
                    out.push(json!({"role": "tool", "tool_call_id": id, "content": text(rng.below(200))}));
                }
            }
        }
        _ => {
            if rng.one_in(2) {
                out.push(json!({"type": "reasoning", "id": format!("rs_{s}"), "summary": [], "encrypted_content": text(rng.below(10))}));
            }
            if calls == 0 {
                out.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text(rng.below(30))}]}));
                out.push(
                    json!({"type": "message", "role": "user", "content": text(rng.below(10))}),
                );
            } else {
                for id in &ids {
                    out.push(json!({"type": "function_call", "call_id": id, "name": "read", "arguments": "{}"}));
                }
                for id in &ids {
                    out.push(json!({"type": "function_call_output", "call_id": id, "output": text(rng.below(200))}));
                }
            }
        }
    }
    out
}

/// A request of `route` holding `history`, with `system` (or `instructions`) and
/// the other members a client sends.
fn body(route: Route, history: &[Value], system: &str, extra: &str) -> String {
    let h: Vec<String> = history.iter().map(Value::to_string).collect();
    let h = h.join(",");
    match route {
        Route::AnthropicMessages => format!(
            r#"{{"model":"claude","max_tokens":1024,{extra}"system":{},"stream":true,"messages":[{h}]}}"#,
            Value::from(system)
        ),
        Route::OpenAiChat => {
            format!(r#"{{"model":"gpt-4o",{extra}"stream":true,"messages":[{h}]}}"#)
        }
        _ => format!(
            r#"{{"model":"gpt-5",{extra}"instructions":{},"stream":true,"input":[{h}]}}"#,
            Value::from(system)
        ),
    }
}

/// Generated conversations of every API, with the requests a real client or a
/// hostile one may send mid-session.
#[test]
fn generated_sessions_decided_incrementally_as_from_scratch() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut total = Tally::default();
    for route in [
        Route::AnthropicMessages,
        Route::OpenAiChat,
        Route::OpenAiResponses,
    ] {
        for conversation in 0..4 {
            let steps = 10 + rng.below(8) as usize;
            let mut history = match route {
                Route::OpenAiChat => vec![
                    json!({"role": "system", "content": "You are an agent."}),
                    json!({"role": "user", "content": format!("task {conversation}")}),
                ],
                Route::OpenAiResponses => vec![
                    json!({"type": "message", "role": "user", "content": format!("task {conversation}")}),
                ],
                _ => vec![json!({"role": "user", "content": format!("task {conversation}")})],
            };
            let mut turns = vec![history.clone()];
            for s in 0..steps {
                history.extend(step(route, &mut rng, s));
                turns.push(history.clone());
            }
            let total_tokens = cutpoint::format::read(
                &body(route, &history, "sys", ""),
                route.format(),
                &ByteEstimate,
            )
            .unwrap()
            .live_tokens();
            for mode in modes(total_tokens) {
                let mut both = Both::new(&mode, route);
                let mut system = "sys".to_owned();
                for turn in &turns {
                    let what = format!("{route:?} conversation {conversation}");
                    match rng.below(14) {
                        // A retry, and then the turn.
                        0 => both.send(&body(route, turn, &system, ""), &what),
                        // An early message edited: not a continuation.
                        1 if turn.len() > 2 => {
                            let mut edited = turn.clone();
                            edited[turn.len() / 2] = match route {
                                Route::OpenAiResponses => {
                                    json!({"type": "message", "role": "user", "content": "edited"})
                                }
                                _ => json!({"role": "user", "content": "edited"}),
                            };
                            both.send(&body(route, &edited, &system, ""), &what);
                        }
                        // A broken turn: the last element's results dropped, or an
                        // orphan result appended.
                        2 => {
                            let mut broken = turn.clone();
                            broken.pop();
                            both.send(&body(route, &broken, &system, ""), &what);
                        }
                        3 => {
                            let mut broken = turn.clone();
                            broken.push(match route {
                                Route::AnthropicMessages => json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "nowhere", "content": "x"}]}),
                                Route::OpenAiChat => json!({"role": "tool", "tool_call_id": "nowhere", "content": "x"}),
                                _ => json!({"type": "function_call_output", "call_id": "nowhere", "output": "x"}),
                            });
                            both.send(&body(route, &broken, &system, ""), &what);
                        }
                        // The system prompt or the tools changed from now on.
                        4 => system.push_str(" more"),
                        5 => both.send(
                            &body(route, turn, &system, r#""tools":[{"name":"read"}],"#),
                            &what,
                        ),
                        // A key twice; a previous_response_id.
                        6 => both.send(&body(route, turn, &system, r#""model":"again","#), &what),
                        7 => both.send(
                            &body(route, turn, &system, r#""previous_response_id":"resp_1","#),
                            &what,
                        ),
                        _ => {}
                    }
                    both.send(&body(route, turn, &system, ""), &what);
                }
                total.requests += both.tally.requests;
                total.incremental += both.tally.incremental;
                total.continued += both.tally.continued;
                total.compacted += both.tally.compacted;
                total.refused += both.tally.refused;
            }
        }
    }
    eprintln!("generated: {total:?}");
    assert!(total.incremental * 3 > total.requests, "{total:?}");
    assert!(
        total.continued > 0 && total.compacted > 0 && total.refused > 0,
        "{total:?}"
    );
}
