//! A rig agent with tools, compacting mid-turn, against a loopback stand-in for its
//! provider: a tiny HTTP/1.1 server on 127.0.0.1 answering OpenAI Chat Completions
//! requests from a script (no network, no key). Every request body the agent sends is
//! recorded and checked with cutpoint's provider rules (`cutpoint::format::check_rules`
//! on the OpenAI Chat body); the program exits non-zero on any violation, or when no
//! request was compacted mid-turn with a call in flight.
//!
//! The agent is an ordinary rig-agent agent; cutpoint comes in with one line
//! (`.add_hook(CutpointHook::new(BUDGET))`): before every model call, the hook runs
//! cutpoint's policy on the run's history. Before a call that sends tool results, that
//! history ends with the assistant message whose calls the results answer (from the
//! history's side, the calls are in flight): cutpoint compacts what lies before them
//! and keeps them, so the request pairs every result with its call.
//!
//! ```text
//! cargo run -p cutpoint-rig --example rig_agent_loopback
//! ```

use std::sync::{Arc, Mutex};

use cutpoint::compact::strategy::CLEARED_RESULT_TEXT;
use cutpoint::format::{self, ByteEstimate, Format};
use cutpoint_rig::{CutpointHook, Turn};
use rig_agent::AgentBuilder;
use rig_agent::agent::{AgentHook, CompletionCallAction, CompletionCallEvent, HookContext};
use rig_core::providers::openai::OpenAIConfig;
use rig_core::tool::{PortableTool, ToolExecutionError};
use rig_memory::InMemoryConversationMemory;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// The context budget cutpoint keeps the history under.
const BUDGET: u64 = 2_000;
/// Prompts sent, each a run of three model calls (two rounds of tool calls, then an
/// answer).
const PROMPTS: usize = 3;

/// A tool that reads a "file": a large output, to push the history over budget.
struct ReadFile;

#[derive(Deserialize)]
struct PathArgs {
    path: String,
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct ToolFailed(String);

impl PortableTool for ReadFile {
    const NAME: &'static str = "read_file";
    type Args = PathArgs;
    type Output = String;
    type Error = ToolFailed;

    fn description(&self) -> String {
        "Read a file of the repository".to_owned()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    }

    async fn call(&self, args: PathArgs) -> Result<String, ToolFailed> {
        Ok(format!("// {}\n{}", args.path, "fn cut() {}\n".repeat(160)))
    }
}

/// A tool that runs a command; fails for `false`.
struct Bash;

#[derive(Deserialize)]
struct CommandArgs {
    command: String,
}

impl PortableTool for Bash {
    const NAME: &'static str = "bash";
    type Args = CommandArgs;
    type Output = String;
    type Error = ToolFailed;

    fn description(&self) -> String {
        "Run a shell command".to_owned()
    }

    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
    }

    async fn call(&self, args: CommandArgs) -> Result<String, ToolFailed> {
        if args.command == "false" {
            return Err(ToolFailed("exit 1".to_owned()));
        }
        Ok(format!(
            "$ {}\nok: 12 passed\n{}",
            args.command,
            "test t ... ok\n".repeat(60)
        ))
    }

    fn map_error(&self, error: ToolFailed) -> ToolExecutionError {
        ToolExecutionError::from_error(error)
    }
}

/// The hook the agent runs: cutpoint's, observed (what each call's compaction did).
struct Observed {
    inner: CutpointHook,
    turns: Arc<Mutex<Vec<Turn>>>,
}

impl AgentHook for Observed {
    async fn on_completion_call(
        &self,
        ctx: &HookContext,
        event: CompletionCallEvent<'_>,
    ) -> CompletionCallAction {
        let action = self.inner.on_completion_call(ctx, event).await;
        if let Some(turn) = self.inner.policy().last_turn() {
            self.turns.lock().expect("not poisoned").push(turn);
        }
        action
    }
}

/// The scripted model: the response to a request body, by how far its run is (tool
/// results since the last user message).
fn respond(body: &Value, n: usize) -> Value {
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    let since_user = messages
        .iter()
        .rev()
        .take_while(|m| m["role"] != "user")
        .filter(|m| m["role"] == "tool")
        .count();
    let message = match since_user {
        0 => json!({"role": "assistant", "content": "Reading the sources.", "tool_calls": [
            {"id": format!("call_{n}_a"), "type": "function", "function": {"name": "read_file", "arguments": format!("{{\"path\":\"src/m{n}.rs\"}}")}},
            {"id": format!("call_{n}_b"), "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"cargo test\"}"}}
        ]}),
        2 => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{n}_c"), "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"false\"}"}}
        ]}),
        _ => json!({"role": "assistant", "content": format!("Done with request {n}.")}),
    };
    let finish = if message.get("tool_calls").is_some() {
        "tool_calls"
    } else {
        "stop"
    };
    json!({
        "id": format!("chatcmpl-{n}"),
        "object": "chat.completion",
        "created": 0,
        "model": "stand-in",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
    })
}

/// Serves OpenAI Chat Completions on `listener` from the script, recording each body.
async fn serve(listener: TcpListener, bodies: Arc<Mutex<Vec<String>>>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            return;
        };
        let bodies = bodies.clone();
        tokio::spawn(async move {
            let mut stream = BufReader::new(stream);
            loop {
                // Request line and headers.
                let mut length = 0usize;
                let mut line = String::new();
                let mut first = true;
                loop {
                    line.clear();
                    match stream.read_line(&mut line).await {
                        Ok(0) | Err(_) => return,
                        Ok(_) => {}
                    }
                    if first {
                        first = false;
                        continue;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    if let Some((k, v)) = line.split_once(':')
                        && k.eq_ignore_ascii_case("content-length")
                    {
                        length = v.trim().parse().unwrap_or(0);
                    }
                }
                let mut body = vec![0; length];
                if stream.read_exact(&mut body).await.is_err() {
                    return;
                }
                let body = String::from_utf8_lossy(&body).into_owned();
                let n = {
                    let mut b = bodies.lock().expect("not poisoned");
                    b.push(body.clone());
                    b.len()
                };
                let parsed: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
                let reply = respond(&parsed, n).to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                    reply.len()
                );
                let out = stream.get_mut();
                if out.write_all(head.as_bytes()).await.is_err()
                    || out.write_all(reply.as_bytes()).await.is_err()
                {
                    return;
                }
            }
        });
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}/v1", listener.local_addr().expect("its address"));
    let bodies = Arc::new(Mutex::new(Vec::new()));
    tokio::spawn(serve(listener, bodies.clone()));

    let model = OpenAIConfig::new("loopback-stand-in")
        .with_base_url(url.clone())
        .client()
        .chat("stand-in");
    let turns = Arc::new(Mutex::new(Vec::new()));
    let agent = AgentBuilder::new(model)
        .preamble("You are a coding agent.")
        .default_max_turns(8)
        .memory(InMemoryConversationMemory::new())
        .tool(ReadFile)
        .tool(Bash)
        // The one line cutpoint adds (here observed, to report what it did):
        .add_hook(Observed {
            inner: CutpointHook::new(BUDGET),
            turns: turns.clone(),
        })
        .build();

    let mut failures = 0;
    for p in 0..PROMPTS {
        let prompt = format!("Step {p}: read the module and run the tests.");
        match agent.prompt(prompt).conversation("session").await {
            Ok(reply) => println!("prompt {p}: {}", reply.output()),
            Err(e) => {
                eprintln!("prompt {p}: the agent failed: {e}");
                failures += 1;
            }
        }
    }

    // Every request the agent sent, checked by the provider rules.
    let bodies = bodies.lock().expect("not poisoned").clone();
    let turns = turns.lock().expect("not poisoned").clone();
    let mut compacted_mid_turn = 0;
    for (i, body) in bodies.iter().enumerate() {
        let t = match format::read(body, Format::OpenAiChat, &ByteEstimate) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("request {i}: not an OpenAI Chat body: {e}");
                failures += 1;
                continue;
            }
        };
        let violations = format::check_rules(&t);
        let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        let messages = parsed["messages"].as_array().cloned().unwrap_or_default();
        let summarized = body.contains("Tool calls summarized");
        let cleared = body.contains(CLEARED_RESULT_TEXT);
        let mid_turn = messages.last().is_some_and(|m| m["role"] == "tool");
        // The hook ran once before each request: its pass for this one.
        let pass = turns.get(i);
        let in_flight = pass.map(|t| t.in_flight.clone()).unwrap_or_default();
        let reclaimed = pass
            .and_then(|t| t.report.as_ref())
            .map_or(0, |r| r.tokens_before.saturating_sub(r.tokens_after));
        if (summarized || cleared) && mid_turn && reclaimed > 0 && !in_flight.is_empty() {
            compacted_mid_turn += 1;
        }
        let mut what = String::new();
        if summarized {
            what.push_str(", ledger summary");
        }
        if cleared {
            what.push_str(", results cleared");
        }
        if mid_turn {
            what.push_str(", sends tool results");
        }
        if reclaimed > 0 {
            what.push_str(&format!(
                ", compacted just before ({reclaimed} tokens) with {} in flight",
                in_flight.join(", ")
            ));
        }
        println!(
            "request {i}: {} messages{what}; provider rules: {}",
            messages.len(),
            if violations.is_empty() {
                "ok".to_owned()
            } else {
                format!("{} violations", violations.len())
            }
        );
        for v in violations {
            eprintln!("request {i}: VIOLATION {v}");
            failures += 1;
        }
    }
    for (i, t) in turns.iter().enumerate() {
        let waiting = t.waiting_on();
        println!(
            "model call {i}: appended {} messages, {}{}",
            t.appended,
            match &t.report {
                Some(r) => format!("compacted {} -> {} tokens", r.tokens_before, r.tokens_after),
                None => "nothing to do".to_owned(),
            },
            if waiting.is_empty() {
                String::new()
            } else {
                format!(", deferred on {}", waiting.join(", "))
            }
        );
    }

    // The checker can fail: a request whose tool results lost their call.
    if let Some(body) = bodies.iter().find(|b| b.contains("\"role\":\"tool\"")) {
        let mut v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
        if let Some(m) = v["messages"].as_array_mut() {
            m.retain(|m| m.get("tool_calls").is_none());
        }
        let broken = format::read(&v.to_string(), Format::OpenAiChat, &ByteEstimate)
            .map(|t| format::check_rules(&t).len())
            .unwrap_or(0);
        if broken == 0 {
            eprintln!("the provider rules missed a request with orphaned tool results");
            failures += 1;
        }
    }
    if compacted_mid_turn == 0 {
        eprintln!("no request was compacted mid-turn with a call in flight");
        failures += 1;
    }
    println!(
        "done: {} requests, {compacted_mid_turn} compacted mid-turn, {failures} failures",
        bodies.len()
    );
    if failures > 0 {
        std::process::exit(1);
    }
}
