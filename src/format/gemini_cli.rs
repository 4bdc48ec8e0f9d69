//! Gemini CLI session files: one JSON document
//! `{"sessionId", "projectHash", "startTime", "lastUpdated", "messages": [...]}` whose
//! messages are `{"id", "timestamp", "type": "user" | "gemini", "content", ...}`. A
//! `gemini` message holds the model's text, its `thoughts`, and its `toolCalls`, each
//! `{"id", "name", "args", "result": [{"functionResponse": {"id", "name",
//! "response"}}], "status", ...}`: the call and its result in one record. On resume
//! the CLI sends such a message as a `model` turn with the `functionCall` parts and a
//! `user` turn with the `functionResponse` parts, so one message here is one call
//! turn and its response turn, never split. `info`, `error` and `warning` messages
//! are the CLI's own notes (system messages here).

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::valid::{Cursor, non_null, once};
use super::json_doc::{Inline, Items, JsonStr, array_around, describe, opt_str, result_line};
use super::{Block, Parsed, Role, TokenCounter, gemini, summary_in};
use crate::CallId;

#[derive(Deserialize)]
struct Msg<'a> {
    #[serde(rename = "type", borrow, default)]
    kind: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    content: Option<&'a RawValue>,
    #[serde(rename = "toolCalls", borrow, default)]
    tool_calls: Option<Vec<&'a RawValue>>,
    #[serde(borrow, default)]
    thoughts: Option<&'a RawValue>,
}

/// The message types of a Gemini CLI session.
pub(crate) const TYPES: [&str; 5] = ["user", "gemini", "info", "error", "warning"];

/// A message as the reader sees it: each member's JSON text, its calls taken apart.
/// Read by [`Read::scanned`] in one walk of the text, or by serde_json
/// ([`Read::parsed`], the definition, for what the walk does not take).
#[derive(Debug, PartialEq)]
struct Read<'a> {
    role: Role,
    content: Option<&'a str>,
    thoughts: Option<&'a str>,
    calls: Vec<CallRead<'a>>,
}

/// A `toolCalls` entry as the reader sees it.
#[derive(Debug, PartialEq)]
struct CallRead<'a> {
    /// The entry's JSON text.
    raw: &'a str,
    name: Option<JsonStr<'a>>,
    id: Option<JsonStr<'a>>,
    args: Option<&'a str>,
    /// The `result`'s JSON text; `None` when absent or `null`.
    result: Option<&'a str>,
    /// The result's parts (the elements of an array, else the result itself), each
    /// with its `functionResponse`'s id and `response` when the part reads as a
    /// Gemini part that has one.
    parts: Vec<(&'a str, Option<Answer<'a>>)>,
}

/// A part's `functionResponse`: its id and its `response`'s JSON text.
type Answer<'a> = (Option<JsonStr<'a>>, Option<&'a str>);

/// The role a message type gives. **O(1)**.
fn role_of(kind: Option<&str>) -> Result<Role, String> {
    match kind {
        Some("user") => Ok(Role::User),
        Some("gemini") => Ok(Role::Assistant),
        Some("info" | "error" | "warning") => Ok(Role::System),
        other => Err(format!("unknown message type {other:?}")),
    }
}

impl<'a> Read<'a> {
    /// The message `text`, which must be valid JSON (an element of the document
    /// serde_json split), walked once with [`Cursor`]: `None` for anything the walk
    /// leaves to [`Read::parsed`] (a name or id written with escapes, a member
    /// given twice, a value of a type the struct would refuse, streamed
    /// `partialArgs`, a `functionCall` part, an unknown message type), which then
    /// reads it, errors included. When it gives a `Read`, it is the one `parsed`
    /// gives (`tests::the_walk_reads_what_serde_reads`). **O(len)**, each byte
    /// passed once (the parts' `functionResponse.response` too).
    fn scanned(text: &'a str) -> Option<Read<'a>> {
        let (mut kind, mut content, mut thoughts, mut calls) = (None, None, None, None);
        Cursor::new(text).object(|key, c| {
            match key {
                "type" => once(&mut kind, c.plain_str()?)?,
                "content" => once(&mut content, non_null(c.value()?))?,
                "thoughts" => once(&mut thoughts, non_null(c.value()?))?,
                "toolCalls" => once(&mut calls, c.nullable_array(CallRead::scanned)?)?,
                // A name with escapes may be one of the above: serde reads it.
                _ if key.contains('\\') => return None,
                _ => {
                    c.value()?;
                }
            }
            Some(())
        })?;
        Some(Read {
            role: role_of(kind.flatten()).ok()?,
            content: content.flatten(),
            thoughts: thoughts.flatten(),
            calls: calls.flatten().unwrap_or_default(),
        })
    }

    /// The message `text` read by serde_json: the definition of a message, and the
    /// reading of what [`Read::scanned`] leaves. **O(len)**, a call's bytes
    /// passed three or four times.
    ///
    /// # Errors
    /// What is wrong, as serde_json says it (`toolCalls.K` for call `K`), or an
    /// unknown message type.
    fn parsed(text: &'a str) -> Result<Read<'a>, String> {
        let msg: Msg<'a> = serde_json::from_str(text).map_err(|e| describe(&e))?;
        let role = role_of(opt_str(&msg.kind))?;
        let mut calls = Vec::new();
        for (k, raw) in msg.tool_calls.unwrap_or_default().into_iter().enumerate() {
            let (call, parts) = read_call(raw.get(), k)?;
            let parts = parts
                .into_iter()
                .map(|part| {
                    let answer = match serde_json::from_str::<gemini::Part<'_>>(part) {
                        Ok(gemini::Part {
                            response: Some(r), ..
                        }) => Some((r.id, r.response.map(RawValue::get))),
                        _ => None,
                    };
                    (part, answer)
                })
                .collect();
            calls.push(CallRead {
                raw: raw.get(),
                name: call.name,
                id: call.id,
                args: call.args.map(RawValue::get),
                result: call.result,
                parts,
            });
        }
        Ok(Read {
            role,
            content: msg.content.map(RawValue::get),
            thoughts: msg.thoughts.map(RawValue::get),
            calls,
        })
    }
}

impl<'a> CallRead<'a> {
    /// The `toolCalls` entry at `c`, walked as [`Read::scanned`] walks a message.
    fn scanned(c: &mut Cursor<'a>) -> Option<CallRead<'a>> {
        let (mut name, mut id, mut args, mut result) = (None, None, None, None);
        let (mut partial, mut will_continue) = (None, None);
        let mut parts = Vec::new();
        let raw = c.object(|key, c| {
            match key {
                "name" => once(&mut name, c.plain_str()?.map(JsonStr::borrowed))?,
                "id" => once(&mut id, c.plain_str()?.map(JsonStr::borrowed))?,
                "args" => once(&mut args, non_null(c.value()?))?,
                // Streamed arguments are not a session's: the struct reads them.
                "partialArgs" => once(&mut partial, (c.value()? == "null").then_some(())?)?,
                "willContinue" => once(&mut will_continue, boolean(c.value()?)?)?,
                "result" => {
                    let text = if c.peek()? == b'[' {
                        c.array(|c| {
                            parts.push(part_answer(c)?);
                            Some(())
                        })?
                    } else if c.peek()? == b'n' {
                        c.value()?
                    } else {
                        let part = part_answer(c)?;
                        let text = part.0;
                        parts.push(part);
                        text
                    };
                    once(&mut result, non_null(text))?;
                }
                _ if key.contains('\\') => return None,
                _ => {
                    c.value()?;
                }
            }
            Some(())
        })?;
        Some(CallRead {
            raw,
            name: name.flatten(),
            id: id.flatten(),
            args: args.flatten(),
            result: result.flatten(),
            parts,
        })
    }
}

/// The part at `c`, moved past: its text, and its `functionResponse`'s id and
/// response as [`gemini::Part`] reads them (`None`: the part has none, or does not
/// read as a part); `None` when the walk leaves the part to serde (an array, which
/// serde may read as a struct; a `functionCall`; a member given twice; a name with
/// escapes; a response that is no object).
fn part_answer<'a>(c: &mut Cursor<'a>) -> Option<(&'a str, Option<Answer<'a>>)> {
    match c.peek()? {
        b'{' => {}
        b'[' => return None,
        // A string, number or null is no part: serde refuses it.
        _ => return Some((c.value()?, None)),
    }
    let mut seen = [false; 7];
    let mut response = None;
    let text = c.object(|key, c| {
        let slot = match key {
            "text" => 0,
            "thought" => 1,
            "thoughtSignature" | "thought_signature" => 2,
            "functionCall" | "function_call" => 3,
            "functionResponse" | "function_response" => 4,
            "executableCode" => 5,
            "codeExecutionResult" => 6,
            _ if key.contains('\\') => return None,
            _ => {
                c.value()?;
                return Some(());
            }
        };
        if std::mem::replace(&mut seen[slot], true) {
            return None;
        }
        match slot {
            1 => boolean(c.value()?).map(drop)?,
            3 => (c.value()? == "null").then_some(())?,
            4 if c.peek()? == b'{' => response = Some(answer(c)?),
            4 => (c.value()? == "null").then_some(())?,
            _ => drop(c.value()?),
        }
        Some(())
    })?;
    Some((text, response))
}

/// The `functionResponse` object at `c`, as [`gemini::Response`] reads it.
fn answer<'a>(c: &mut Cursor<'a>) -> Option<Answer<'a>> {
    let (mut name, mut id, mut response) = (None, None, None);
    c.object(|key, c| {
        match key {
            "name" => once(&mut name, c.plain_str()?.map(drop))?,
            "id" => once(&mut id, c.plain_str()?.map(JsonStr::borrowed))?,
            "response" => once(&mut response, non_null(c.value()?))?,
            _ if key.contains('\\') => return None,
            _ => drop(c.value()?),
        }
        Some(())
    })?;
    Some((id.flatten(), response.flatten()))
}

/// An optional `bool` member's text read: `None` when serde would refuse it.
fn boolean(text: &str) -> Option<Option<bool>> {
    match text {
        "true" => Some(Some(true)),
        "false" => Some(Some(false)),
        "null" => Some(None),
        _ => None,
    }
}

/// Parses message `index` of a session. A call without an id gets `name#index.k`
/// (call `k` of the message); a response without one answers its own call.
/// **O(len)**.
pub(crate) fn message<'a>(
    text: &'a str,
    index: usize,
    counter: &dyn TokenCounter,
) -> Result<Parsed<'a>, String> {
    let msg = match Read::scanned(text) {
        Some(read) => read,
        None => Read::parsed(text)?,
    };
    let role = msg.role;
    let mut blocks = Vec::new();
    if let Some(t) = msg.thoughts.filter(|t| !matches!(*t, "null" | "[]")) {
        blocks.push((Block::Reasoning, counter.count_json(t), t));
    }
    if let Some(c) = msg
        .content
        .filter(|c| !matches!(*c, "null" | "\"\"" | "[]"))
    {
        let block = match role {
            Role::User => summary_in(c).unwrap_or(Block::Text),
            _ => Block::Text,
        };
        blocks.push((block, counter.count_json(c), c));
    }
    let mut results = Vec::new();
    for (k, call) in msg.calls.into_iter().enumerate() {
        let name = opt_str(&call.name).unwrap_or_default();
        let id = opt_str(&call.id)
            .filter(|id| !id.is_empty())
            .map_or_else(|| gemini::placeholder_id(name, index, k), CallId::from);
        // The call's own bytes: the record without its result.
        let call_tokens = counter
            .count_json(call.raw)
            .saturating_sub(call.result.map_or(0, |r| counter.count_json(r)));
        blocks.push((
            Block::Call {
                id: id.clone(),
                name: name.to_owned(),
                arguments: call.args.map(str::to_owned).unwrap_or_default(),
            },
            call_tokens.max(1),
            call.raw,
        ));
        let Some(result) = call.result else {
            continue;
        };
        let mut answered = false;
        for (part, answer) in call.parts {
            let Some((answers, response)) = answer else {
                continue;
            };
            let answers = opt_str(&answers)
                .filter(|r| !r.is_empty())
                .map_or_else(|| id.clone(), CallId::from);
            results.push((
                Block::Result {
                    id: answers,
                    first_line: result_line(response),
                },
                counter.count_json(part),
                part,
            ));
            answered = true;
        }
        if !answered {
            // A result without a functionResponse part (text, a string): still the
            // call's answer.
            results.push((
                Block::Result {
                    id,
                    first_line: result_line(Some(result)),
                },
                counter.count_json(result),
                result,
            ));
        }
    }
    // The response turn follows the call turn.
    blocks.extend(results);
    if blocks.is_empty() {
        blocks.push((Block::Text, counter.count_json(text), text));
    }
    Ok(Parsed {
        role,
        blocks,
        signed: Vec::new(),
    })
}

/// A `toolCalls` entry (`k` of its message): the call, its `result`'s JSON text,
/// and the result's parts (the elements of an array, else the result itself). The
/// common case, a result array with elements, in one pass: the parts split as the
/// call is read. Any other result, or an error, is read the old way (the call with
/// its result raw, then the result's array), which names what is wrong. **O(len)**.
fn read_call(raw: &str, k: usize) -> Result<(gemini::Call<'_, &str>, Vec<&str>), String> {
    if let Ok(call) = serde_json::from_str::<gemini::Call<'_, Items<'_>>>(raw) {
        match call.result {
            None => return Ok((call.with_result(None), Vec::new())),
            Some(Inline::Read(ref parts)) => {
                if let Some(at) = array_around(raw, parts) {
                    let parts: Vec<&str> = parts.iter().map(|p| p.get()).collect();
                    return Ok((call.with_result(raw.get(at)), parts));
                }
            }
            Some(Inline::Other) => {}
        }
    }
    let call: gemini::Call<'_> =
        serde_json::from_str(raw).map_err(|e| format!("toolCalls.{k}: {}", describe(&e)))?;
    let result = call.result.map(RawValue::get);
    let parts: Vec<&str> = match result {
        Some(r) if r.starts_with('[') => serde_json::from_str::<Vec<&RawValue>>(r)
            .map_err(|e| format!("toolCalls.{k}.result: {}", describe(&e)))?
            .into_iter()
            .map(RawValue::get)
            .collect(),
        Some(r) => vec![r],
        None => Vec::new(),
    };
    Ok((call.with_result(result), parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call's name, its result's text and the result's parts.
    type CallParts<'a> = (Option<String>, Option<&'a str>, Vec<&'a str>);

    /// What `read_call` gave before it had a one-pass case: the call with its result
    /// raw, then the result's array read again.
    fn two_passes(raw: &str) -> Result<CallParts<'_>, String> {
        let call: gemini::Call<'_> = serde_json::from_str(raw).map_err(|e| describe(&e))?;
        let result = call.result.map(RawValue::get);
        let parts = match result {
            Some(r) if r.starts_with('[') => serde_json::from_str::<Vec<&RawValue>>(r)
                .map_err(|e| describe(&e))?
                .into_iter()
                .map(RawValue::get)
                .collect(),
            Some(r) => vec![r],
            None => Vec::new(),
        };
        Ok((opt_str(&call.name).map(str::to_owned), result, parts))
    }

    #[test]
    fn a_call_read_in_one_pass_is_the_call_read_in_two() {
        for raw in [
            r#"{"id":"c1","name":"ls","args":{},"result":[{"functionResponse":{"id":"c1","response":{"output":"a"}}}]}"#,
            "{\"name\":\"ls\",\"result\" : [ {\"functionResponse\":{}} ,\n {\"text\":\"]\"} ] ,\"status\":\"ok\"}",
            r#"{"name":"ls","result":[]}"#,
            r#"{"name":"ls","result":"just text"}"#,
            r#"{"name":"ls","result":{"functionResponse":{"response":{}}}}"#,
            r#"{"name":"ls","result":null}"#,
            r#"{"name":"ls"}"#,
            r#"{"name":"ls","result":[1,2}"#,
            r#"{"name":7,"result":[{}]}"#,
        ] {
            let one = read_call(raw, 0)
                .map(|(c, parts)| (opt_str(&c.name).map(str::to_owned), c.result, parts));
            let two = two_passes(raw);
            match (one, two) {
                (Ok(a), Ok(b)) => assert_eq!(a, b, "{raw}"),
                (Err(a), Err(b)) => assert!(a.ends_with(&b), "{raw}: {a} / {b}"),
                (a, b) => panic!("{raw}: {a:?} / {b:?}"),
            }
        }
    }

    use crate::format::json_doc::generate::{array, member, mostly, object, one_of, walk_agrees};
    use proptest::prelude::*;

    fn string() -> impl Strategy<Value = String> + use<> {
        mostly(
            &[
                "\"c1\"",
                "\"\"",
                "\"ls\"",
                "null",
                "\"list_directory-17646-6b5d\"",
            ],
            &["\"c\\u0031\"", "\"Listed 5\\nitems\"", "7", "{}"],
        )
    }

    fn value() -> impl Strategy<Value = String> + use<> {
        one_of(&[
            "\"c1\"",
            "null",
            "\"a\\\"b\"",
            "\"a\\\\\"",
            "\"\\\\\\\"\\\\\"",
            "{}",
            "{\"output\":\"a\\nb\"}",
            "[1, {\"x\": [\"]\"]}]",
            "true",
            "-1.5e3",
        ])
    }

    fn part() -> impl Strategy<Value = String> {
        let response = object(vec![
            member(one_of(&["id"]), string()),
            member(one_of(&["name"]), string()),
            member(one_of(&["response"]), value()),
            member(mostly(&["extra"], &["i\\u0064"]), value()),
        ]);
        let response = prop_oneof![40 => response, 1 => one_of(&["null", "[\"ls\", {}]", "\"x\""])];
        let part = object(vec![
            member(
                mostly(&["functionResponse"], &["function_response"]),
                response,
            ),
            member(one_of(&["text"]), value()),
            member(
                one_of(&["thought"]),
                mostly(&["true", "false", "null"], &["\"yes\""]),
            ),
            member(one_of(&["thoughtSignature", "thought_signature"]), string()),
            member(
                mostly(&["functionCall"], &["function_call"]),
                mostly(&["null"], &["{\"name\":\"ls\"}"]),
            ),
            member(
                one_of(&["executableCode", "codeExecutionResult", "other"]),
                value(),
            ),
        ]);
        prop_oneof![
            40 => part,
            1 => one_of(&["\"text\"", "null", "3", "[null, null, null, null, {\"id\": \"x\"}]"]),
        ]
    }

    fn call() -> impl Strategy<Value = String> {
        let result = prop_oneof![
            6 => array(part()),
            2 => part(),
            1 => one_of(&["null", "[]", "\"done\""]),
        ];
        let call = object(vec![
            member(one_of(&["id"]), string()),
            member(one_of(&["name"]), string()),
            member(one_of(&["args"]), value()),
            member(one_of(&["result"]), result),
            member(one_of(&["partialArgs"]), mostly(&["null"], &["[]"])),
            member(
                one_of(&["willContinue"]),
                mostly(&["true", "false", "null"], &["1"]),
            ),
            member(mostly(&["status", "displayName"], &["n\\u0061me"]), value()),
        ]);
        prop_oneof![40 => call, 1 => one_of(&["[\"ls\", \"c1\"]", "{}"])]
    }

    fn message() -> impl Strategy<Value = String> {
        let kind = mostly(
            &[
                "\"user\"",
                "\"gemini\"",
                "\"info\"",
                "\"error\"",
                "\"warning\"",
            ],
            &["\"bogus\"", "null", "\"gem\\u0069ni\"", "3"],
        );
        let calls = prop_oneof![40 => array(call()), 1 => one_of(&["null", "\"x\"", "[]"])];
        prop_oneof![
            40 => object(vec![
                member(one_of(&["type"]), kind),
                member(one_of(&["content"]), prop_oneof![value(), one_of(&["\"\"", "[]"])]),
                member(one_of(&["thoughts"]), prop_oneof![value(), one_of(&["[]"])]),
                member(one_of(&["toolCalls"]), calls),
                member(mostly(&["id", "timestamp"], &["t\\u0079pe"]), value()),
            ]),
            1 => one_of(&["[\"gemini\"]", "[]"]),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]
        /// Whatever the one walk reads, serde_json reads the same; what it leaves,
        /// serde reads (errors included).
        #[test]
        fn the_walk_reads_what_serde_reads(text in message()) {
            walk_agrees(&text, Read::scanned, Read::parsed)?;
        }
    }

    #[test]
    fn the_walk_reads_the_real_session_whole() {
        let text = include_str!(
            "../../tests/fixtures/transcripts/gemini-cli-session__codemie-code__session-2025-12-01T21-45-5b959dae.json"
        );
        let doc = crate::format::json_doc::split(text, crate::format::Format::GeminiCli)
            .expect("the fixture reads");
        assert!(!doc.elements.is_empty());
        for raw in doc.elements {
            let walked = Read::scanned(raw.get());
            assert!(walked.is_some(), "left to serde: {}", raw.get());
            assert_eq!(walked.ok_or(String::new()), Read::parsed(raw.get()));
        }
    }
}
