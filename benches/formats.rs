//! Reading transcripts. Two groups:
//!
//! - `read_transcript`: the largest real agent transcript of every format the fixtures
//!   hold (Claude Code session JSONL, Codex rollout JSONL, a SWE-agent OpenAI Chat
//!   trajectory, a Gemini CLI session document; then two one-line documents, an OpenAI
//!   Chat trajectory and an Anthropic request body) into messages and records, against
//!   serde_json's own parse of the same bytes in the same run: into a
//!   `serde_json::Value` (what a naive reader does) and skipped as `IgnoredAny` (the
//!   floor: tokenizing without building anything), line by line for JSON lines, the
//!   whole text for a JSON document. Throughput is bytes per second of the input.
//! - `read_scaling`: every format at 10^3, 10^4 and 10^5 messages of a generated session
//!   (seeded), read and checked against its provider's rules (what `cutpoint check`
//!   does). Throughput is messages per second: linear reading keeps it flat as the log
//!   grows (JSON documents used to count newlines from the start for every message).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use cutpoint::format::{self, ByteEstimate, Format};
use serde::de::IgnoredAny;
use serde_json::json;
use std::hint::black_box;
use std::time::Duration;

/// (label, file under the repository root, format). The last two are one line of JSON
/// each, as a proxy reads a request body: a document's reader used to ask first
/// whether such a text was JSON lines, which cost two parses before its own.
const FIXTURES: &[(&str, &str, Format)] = &[
    (
        "claude-code",
        "tests/fixtures/transcripts/claude-code__spotter__4d5611e5-main.jsonl",
        Format::ClaudeCode,
    ),
    (
        "codex",
        "tests/fixtures/transcripts/codex__localpush__rollout-12-54-34-compacted.jsonl",
        Format::CodexRollout,
    ),
    (
        "openai-chat",
        "tests/fixtures/transcripts/chat__swe-agent__marshmallow-1867-function_calling_replace.traj",
        Format::OpenAiChat,
    ),
    (
        "gemini-cli",
        "tests/fixtures/transcripts/gemini-cli-session__codemie-code__session-2025-12-01T21-45-5b959dae.json",
        Format::GeminiCli,
    ),
    (
        "openai-chat-one-line",
        "tests/fixtures/transcripts/openai-chat__tau-bench__gpt-4o-airline-traj173-one-line.json",
        Format::OpenAiChat,
    ),
    (
        "anthropic-request",
        "proxy/tests/fixtures/anthropic-request__claude-reliability__python-to-rust-port.json",
        Format::AnthropicMessages,
    ),
];

/// The JSON texts serde_json parses for the baselines: the lines of a JSON lines
/// file, or the whole of a JSON document.
fn json_texts(text: &str, fmt: Format) -> Vec<&str> {
    if fmt.is_json_document() {
        vec![text]
    } else {
        text.lines().filter(|l| !l.trim().is_empty()).collect()
    }
}

fn read_fixture(path: &str) -> String {
    let path = format!("{}/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn formats(c: &mut Criterion) {
    let mut group = c.benchmark_group("read_transcript");
    for &(short, path, fmt) in FIXTURES {
        let text = read_fixture(path);
        group.throughput(Throughput::Bytes(text.len() as u64));
        group.bench_function(format!("cutpoint/{short}"), |b| {
            b.iter(|| {
                let t = format::read(black_box(&text), fmt, &ByteEstimate).expect("fixture reads");
                black_box(t.total_tokens())
            })
        });
        let texts = json_texts(&text, fmt);
        group.bench_function(format!("serde_json_value/{short}"), |b| {
            b.iter(|| {
                let mut n = 0usize;
                for line in black_box(&texts) {
                    let v: serde_json::Value = serde_json::from_str(line).expect("valid JSON");
                    n += v.is_object() as usize;
                }
                n
            })
        });
        group.bench_function(format!("serde_json_ignored/{short}"), |b| {
            b.iter(|| {
                for line in black_box(&texts) {
                    let _: IgnoredAny = serde_json::from_str(line).expect("valid JSON");
                }
            })
        });
    }
    group.finish();
}

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A session of about `messages` messages (as `format` counts them) in `format`:
/// turns of a user question, an assistant message with 1 to 3 parallel calls, their
/// results and a short answer, with multi-line results so that line numbers matter.
/// JSON documents hold one element per line. Deterministic for a seed.
fn session(format: Format, messages: usize, seed: u64) -> String {
    let mut rng = Rng(seed | 1);
    let mut out: Vec<String> = Vec::new();
    let mut count = 0usize;
    let mut turn = 0usize;
    let mut parent = String::from("root");
    while count < messages {
        turn += 1;
        let k = 1 + rng.below(3) as usize;
        let ids: Vec<String> = (0..k).map(|j| format!("call_{turn}_{j}")).collect();
        let question = format!(
            "question {turn}: {}",
            "why ".repeat(1 + rng.below(20) as usize)
        );
        let result = |j: usize| format!("line one of {j}\nline two\n{}", "x".repeat(20 + j * 7));
        let args = |j: usize| json!({"command": format!("ls dir{turn}/{j}")});
        match format {
            Format::AnthropicMessages => {
                out.push(json!({"role": "user", "content": question}).to_string());
                let mut blocks = vec![json!({"type": "text", "text": "Checking."})];
                blocks.extend(ids.iter().enumerate().map(|(j, id)| {
                    json!({"type": "tool_use", "id": id, "name": "bash", "input": args(j)})
                }));
                out.push(json!({"role": "assistant", "content": blocks}).to_string());
                let results: Vec<_> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| json!({"type": "tool_result", "tool_use_id": id, "content": result(j)}))
                    .collect();
                out.push(json!({"role": "user", "content": results}).to_string());
                out.push(json!({"role": "assistant", "content": "Done."}).to_string());
                count += 4;
            }
            Format::OpenAiChat => {
                out.push(json!({"role": "user", "content": question}).to_string());
                let calls: Vec<_> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| json!({"id": id, "type": "function", "function": {"name": "bash", "arguments": args(j).to_string()}}))
                    .collect();
                out.push(
                    json!({"role": "assistant", "content": null, "tool_calls": calls}).to_string(),
                );
                for (j, id) in ids.iter().enumerate() {
                    out.push(
                        json!({"role": "tool", "tool_call_id": id, "content": result(j)})
                            .to_string(),
                    );
                }
                out.push(json!({"role": "assistant", "content": "Done."}).to_string());
                count += 3 + k;
            }
            Format::OpenAiResponses | Format::CodexRollout => {
                let mut items = vec![
                    json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": question}]}),
                ];
                items.push(json!({"type": "reasoning", "summary": [], "encrypted_content": "e"}));
                for (j, id) in ids.iter().enumerate() {
                    items.push(json!({"type": "function_call", "name": "bash", "arguments": args(j).to_string(), "call_id": id}));
                }
                for (j, id) in ids.iter().enumerate() {
                    items.push(
                        json!({"type": "function_call_output", "call_id": id, "output": result(j)}),
                    );
                }
                items.push(json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Done."}]}));
                count += items.len();
                for item in items {
                    out.push(if format == Format::CodexRollout {
                        json!({"timestamp": "t", "type": "response_item", "payload": item})
                            .to_string()
                    } else {
                        item.to_string()
                    });
                }
            }
            Format::Gemini => {
                out.push(json!({"role": "user", "parts": [{"text": question}]}).to_string());
                let calls: Vec<_> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| json!({"functionCall": {"name": "bash", "args": args(j), "id": id}}))
                    .collect();
                out.push(json!({"role": "model", "parts": calls}).to_string());
                let responses: Vec<_> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| json!({"functionResponse": {"name": "bash", "response": {"output": result(j)}, "id": id}}))
                    .collect();
                out.push(json!({"role": "user", "parts": responses}).to_string());
                out.push(json!({"role": "model", "parts": [{"text": "Done."}]}).to_string());
                count += 4;
            }
            Format::GeminiCli => {
                out.push(json!({"id": format!("u{turn}"), "timestamp": "t", "type": "user", "content": question}).to_string());
                let calls: Vec<_> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| json!({"id": id, "name": "bash", "args": args(j), "status": "success",
                        "result": [{"functionResponse": {"id": id, "name": "bash", "response": {"output": result(j)}}}]}))
                    .collect();
                out.push(json!({"id": format!("g{turn}"), "timestamp": "t", "type": "gemini", "content": "", "toolCalls": calls}).to_string());
                out.push(json!({"id": format!("d{turn}"), "timestamp": "t", "type": "gemini", "content": "Done."}).to_string());
                count += 3;
            }
            Format::ClaudeCode => {
                let mut record = |kind: &str,
                                  message: serde_json::Value,
                                  extra: serde_json::Value| {
                    let uuid = format!("r{}", out.len());
                    let mut v = json!({"type": kind, "uuid": uuid, "parentUuid": parent, "sessionId": "s", "message": message});
                    if let (Some(map), serde_json::Value::Object(more)) = (v.as_object_mut(), extra)
                    {
                        map.extend(more);
                    }
                    out.push(v.to_string());
                    parent = uuid.clone();
                    uuid
                };
                record(
                    "user",
                    json!({"role": "user", "content": question}),
                    json!({}),
                );
                let mid = format!("msg_{turn}");
                let uses: Vec<String> = ids
                    .iter()
                    .enumerate()
                    .map(|(j, id)| {
                        record(
                            "assistant",
                            json!({"id": mid, "role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Bash", "input": args(j)}]}),
                            json!({}),
                        )
                    })
                    .collect();
                for (j, id) in ids.iter().enumerate() {
                    record(
                        "user",
                        json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": result(j)}]}),
                        json!({"sourceToolAssistantUUID": uses[j]}),
                    );
                }
                record(
                    "assistant",
                    json!({"id": format!("msg_{turn}_done"), "role": "assistant", "content": [{"type": "text", "text": "Done."}]}),
                    json!({}),
                );
                count += 4;
            }
            _ => {
                out.push(json!({"kind": "user", "tokens": 40}).to_string());
                for (j, id) in ids.iter().enumerate() {
                    let mut r = json!({"kind": "tool_use", "call_id": id, "tokens": 20});
                    if j > 0 {
                        r["bound"] = json!(true);
                    }
                    out.push(r.to_string());
                }
                for id in &ids {
                    out.push(
                        json!({"kind": "tool_result", "call_id": id, "tokens": 200}).to_string(),
                    );
                }
                out.push(json!({"kind": "assistant", "tokens": 30}).to_string());
                count += 2 + 2 * k;
            }
        }
    }
    let body = out.join("\n");
    match format {
        Format::AnthropicMessages | Format::OpenAiChat => {
            format!("{{\"messages\": [\n{}\n]}}\n", out.join(",\n"))
        }
        Format::OpenAiResponses => format!("{{\"input\": [\n{}\n]}}\n", out.join(",\n")),
        Format::Gemini => format!("{{\"contents\": [\n{}\n]}}\n", out.join(",\n")),
        Format::GeminiCli => format!(
            "{{\"sessionId\": \"s\", \"projectHash\": \"h\", \"messages\": [\n{}\n]}}\n",
            out.join(",\n")
        ),
        _ => body + "\n",
    }
}

fn scaling(c: &mut Criterion) {
    let mut group = c.benchmark_group("read_scaling");
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for fmt in Format::ALL {
        for messages in [1_000usize, 10_000, 100_000] {
            let text = session(fmt, messages, 0x5eed ^ messages as u64);
            let t = format::read(&text, fmt, &ByteEstimate).expect("the generated session reads");
            assert!(format::check_rules(&t).is_empty(), "{fmt}: a clean session");
            group.throughput(Throughput::Elements(t.messages.len() as u64));
            group.bench_with_input(BenchmarkId::new(fmt.name(), messages), &text, |b, text| {
                b.iter(|| {
                    let t = format::read(black_box(text), fmt, &ByteEstimate).expect("reads");
                    black_box(format::check_rules(&t).len())
                })
            });
        }
    }
    group.finish();
}

criterion_group!(benches, formats, scaling);
criterion_main!(benches);
