//! OpenAI Chat Completions: `{"role":…,"content":…,"tool_calls":[…]}` and
//! `{"role":"tool","tool_call_id":…,"content":…}`. SWE-agent trajectories store the
//! same messages with `tool_call_ids` (a list) on tool messages; both are read.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::json_doc::valid::{Cursor, non_null, once};
use super::json_doc::{
    JsonStr, describe, opt_str, raw_text, raw_texts, result_line, string_or_json,
};
use super::{Block, Parsed, Role, TokenCounter, summary_in};
use crate::CallId;

/// A message as the reader sees it: read by serde_json (the definition), or walked
/// once by [`Msg::scanned`].
#[derive(Debug, Deserialize, PartialEq)]
struct Msg<'a> {
    #[serde(borrow)]
    role: JsonStr<'a>,
    #[serde(borrow, default, deserialize_with = "raw_text")]
    content: Option<&'a str>,
    #[serde(borrow, default, deserialize_with = "raw_texts")]
    tool_calls: Option<Vec<&'a str>>,
    #[serde(borrow, default)]
    tool_call_id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    tool_call_ids: Option<Vec<JsonStr<'a>>>,
}

impl<'a> Msg<'a> {
    /// The message `text`, which must be valid JSON (an element of a document
    /// serde_json split), walked once with [`Cursor`]; `None` for what the walk
    /// leaves to serde (no object, no `role`, a name or string written with escapes,
    /// a member given twice, a value of a type serde would refuse). When it gives a
    /// message, it is the one serde gives (`tests::the_walk_reads_what_serde_reads`).
    /// The calls are kept as their text and read one by one ([`call`]), as serde's
    /// reading keeps them. **O(len)**, each byte passed once.
    fn scanned(text: &'a str) -> Option<Msg<'a>> {
        let (mut role, mut content, mut calls, mut id, mut ids) = (None, None, None, None, None);
        Cursor::new(text).object(|key, c| {
            match key {
                "role" => once(&mut role, c.plain_str()??)?,
                "content" => once(&mut content, non_null(c.value()?))?,
                "tool_calls" => once(&mut calls, c.nullable_array(Cursor::value)?)?,
                "tool_call_id" => once(&mut id, c.plain_str()?.map(JsonStr::borrowed))?,
                "tool_call_ids" => {
                    let read = c.nullable_array(|c| c.plain_str()?.map(JsonStr::borrowed))?;
                    once(&mut ids, read)?;
                }
                // A name with escapes may be one of the above: serde reads it.
                _ if key.contains('\\') => return None,
                _ => drop(c.value()?),
            }
            Some(())
        })?;
        Some(Msg {
            role: JsonStr::borrowed(role?),
            content: content.flatten(),
            tool_calls: calls.flatten(),
            tool_call_id: id.flatten(),
            tool_call_ids: ids.flatten(),
        })
    }
}

/// A tool call as the reader sees it: its id, and its function's name and
/// arguments' JSON text (`None` without a function).
type CallRead<'a> = (
    Option<JsonStr<'a>>,
    Option<(Option<JsonStr<'a>>, Option<&'a str>)>,
);

/// Call `k` of a message, its JSON text `raw`: walked once when it can be
/// ([`call_scanned`]), read as a [`ToolCall`] otherwise (the definition, and every
/// error). **O(len)**.
///
/// # Errors
/// What serde_json says is wrong with the call, after `tool_calls.K: `.
fn call(raw: &str, k: usize) -> Result<CallRead<'_>, String> {
    if let Some(read) = call_scanned(raw) {
        return Ok(read);
    }
    let call: ToolCall<'_> =
        serde_json::from_str(raw).map_err(|e| format!("tool_calls.{k}: {}", describe(&e)))?;
    Ok((
        call.id,
        call.function
            .map(|f| (f.name, f.arguments.map(RawValue::get))),
    ))
}

/// The tool call `raw` (valid JSON) walked with [`Cursor`], as [`Msg::scanned`]
/// walks a message: `None` for what it leaves to serde. **O(len)**.
fn call_scanned(raw: &str) -> Option<CallRead<'_>> {
    let (mut index, mut id, mut function) = (None, None, None);
    Cursor::new(raw).object(|key, c| {
        match key {
            // Serde reads an index as a `u64`: digits that fit one, or `null`.
            "index" => {
                let text = c.value()?;
                let fits = text == "null" || text.parse::<u64>().is_ok();
                once(&mut index, fits.then_some(())?)?;
            }
            "id" => once(&mut id, c.plain_str()?.map(JsonStr::borrowed))?,
            "function" if c.peek()? == b'n' => {
                c.value()?;
                once(&mut function, None)?;
            }
            "function" => {
                let (mut name, mut arguments) = (None, None);
                c.object(|key, c| {
                    match key {
                        "name" => once(&mut name, c.plain_str()?.map(JsonStr::borrowed))?,
                        "arguments" => once(&mut arguments, non_null(c.value()?))?,
                        _ if key.contains('\\') => return None,
                        _ => drop(c.value()?),
                    }
                    Some(())
                })?;
                once(&mut function, Some((name.flatten(), arguments.flatten())))?;
            }
            _ if key.contains('\\') => return None,
            _ => drop(c.value()?),
        }
        Some(())
    })?;
    Some((id.flatten(), function.flatten()))
}

/// One tool call of a message, or a piece of one in a stream's delta (by its
/// `index`; the live decoder reads the same struct).
#[derive(Deserialize)]
pub(crate) struct ToolCall<'a> {
    #[serde(default)]
    pub(crate) index: Option<u64>,
    #[serde(borrow, default)]
    pub(crate) id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) function: Option<Function<'a>>,
}

/// A tool call's `function`: its name, and its arguments (a JSON string, or a
/// gateway's JSON object).
#[derive(Deserialize)]
pub(crate) struct Function<'a> {
    #[serde(borrow, default)]
    pub(crate) name: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    pub(crate) arguments: Option<&'a RawValue>,
}

/// Parses one Chat Completions message. **O(len)**.
pub(crate) fn message<'a>(text: &'a str, counter: &dyn TokenCounter) -> Result<Parsed<'a>, String> {
    let msg = match Msg::scanned(text) {
        Some(msg) => msg,
        None => serde_json::from_str(text).map_err(|e| describe(&e))?,
    };
    let role = match msg.role.as_str() {
        "user" => Role::User,
        "assistant" => Role::Assistant,
        "system" | "developer" => Role::System,
        "tool" | "function" => Role::Tool,
        other => return Err(format!("unknown role {other:?}")),
    };
    let mut blocks = Vec::new();
    if role == Role::Tool {
        let ids: Vec<JsonStr<'_>> = match (msg.tool_call_id, msg.tool_call_ids) {
            (Some(id), _) => vec![id],
            (None, Some(ids)) => ids,
            (None, None) => return Err("tool message without a tool_call_id".to_owned()),
        };
        if ids.is_empty() || ids.iter().any(|id| id.as_str().is_empty()) {
            return Err("tool message with an empty tool_call_id".to_owned());
        }
        let first_line = result_line(msg.content);
        let share = counter.count_json(text).div_ceil(ids.len() as u64);
        for id in ids {
            blocks.push((
                Block::Result {
                    id: CallId::from(id.as_str()),
                    first_line: first_line.clone(),
                },
                share,
                text,
            ));
        }
        return Ok(Parsed {
            role,
            blocks,
            signed: Vec::new(),
        });
    }
    let has_content = msg
        .content
        .is_some_and(|c| !matches!(c, "null" | "\"\"" | "[]"));
    let calls = msg.tool_calls.unwrap_or_default();
    if has_content || calls.is_empty() {
        let tokens = msg.content.map_or(1, |c| counter.count_json(c));
        // A user message holding cutpoint's ledger is an earlier summary.
        let block = match (role, msg.content) {
            (Role::User, Some(c)) => summary_in(c).unwrap_or(Block::Text),
            _ => Block::Text,
        };
        blocks.push((block, tokens, msg.content.unwrap_or(text)));
    }
    for (k, raw) in calls.into_iter().enumerate() {
        let (id, function) = call(raw, k)?;
        let id = opt_str(&id)
            .filter(|id| !id.is_empty())
            .ok_or_else(|| format!("tool_calls.{k}: a tool call without an id"))?;
        let (name, arguments) = match function {
            Some((name, arguments)) => (
                opt_str(&name).unwrap_or_default().to_owned(),
                string_or_json(arguments),
            ),
            None => (String::new(), String::new()),
        };
        blocks.push((
            Block::Call {
                id: CallId::from(id),
                name,
                arguments,
            },
            counter.count_json(raw),
            raw,
        ));
    }
    Ok(Parsed {
        role,
        blocks,
        signed: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::json_doc::generate::{
        array, fixture, member, mostly, object, one_of, walk_agrees,
    };
    use proptest::prelude::*;

    fn string() -> impl Strategy<Value = String> {
        mostly(
            &["\"call_1\"", "\"\"", "\"read_file\"", "null"],
            &["\"c\\u0031\"", "\"a\\nb\"", "7", "{}", "[]"],
        )
    }

    fn value() -> impl Strategy<Value = String> {
        one_of(&[
            "\"{\\\"path\\\": \\\"a.py\\\"}\"",
            "\"ends in \\\\\"",
            "null",
            "\"\"",
            "[{\"type\": \"text\", \"text\": \"hi\\nthere\"}]",
            "[]",
            "{\"k\": [1, -2.5e3, true]}",
        ])
    }

    fn tool_call() -> impl Strategy<Value = String> {
        let function = object(vec![
            member(mostly(&["name"], &["n\\u0061me"]), string()),
            member(one_of(&["arguments"]), value()),
            member(one_of(&["other"]), value()),
        ]);
        let call = object(vec![
            member(
                one_of(&["index"]),
                mostly(
                    &["0", "3", "null"],
                    &["-1", "1.5", "18446744073709551616", "\"2\""],
                ),
            ),
            member(mostly(&["id"], &["i\\u0064"]), string()),
            member(
                one_of(&["function"]),
                prop_oneof![12 => function, 1 => one_of(&["null", "[]", "\"f\""])],
            ),
            member(one_of(&["type"]), one_of(&["\"function\""])),
        ]);
        prop_oneof![20 => call, 1 => one_of(&["[\"call_1\"]", "null", "3"])]
    }

    fn message() -> impl Strategy<Value = String> {
        let role = mostly(
            &["\"user\"", "\"assistant\"", "\"tool\"", "\"system\""],
            &["null", "\"r\\u006fle\"", "3"],
        );
        let ids = prop_oneof![8 => array(string()), 1 => one_of(&["null", "\"x\""])];
        let calls = prop_oneof![8 => array(tool_call()), 1 => one_of(&["null", "\"x\"", "{}"])];
        prop_oneof![
            30 => object(vec![
                member(one_of(&["role"]), role),
                member(one_of(&["content"]), value()),
                member(one_of(&["tool_calls"]), calls),
                member(one_of(&["tool_call_id"]), string()),
                member(one_of(&["tool_call_ids"]), ids),
                member(mostly(&["name", "agent"], &["t\\u006fol_calls"]), value()),
            ]),
            1 => one_of(&["[\"user\"]", "null"]),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5_000))]
        /// Whatever the one walk reads, serde_json reads the same.
        #[test]
        fn the_walk_reads_what_serde_reads(text in message(), raw in tool_call()) {
            walk_agrees(&text, Msg::scanned, serde_json::from_str::<Msg<'_>>)?;
            walk_agrees(&raw, call_scanned, |raw| {
                let call: ToolCall<'_> = serde_json::from_str(raw)?;
                let function = call.function.map(|f| (f.name, f.arguments.map(RawValue::get)));
                Ok::<_, serde_json::Error>((call.id, function))
            })?;
        }
    }

    /// Every message of the real Chat transcripts is walked whole.
    #[test]
    fn the_walk_reads_the_real_transcripts_whole() {
        let mut messages = 0;
        for path in [
            "chat__swe-agent__marshmallow-1867-function_calling_replace.traj",
            "openai-chat__tau-bench__gpt-4o-airline-traj173-one-line.json",
        ] {
            let text = fixture(path);
            let doc = crate::format::json_doc::split(&text, crate::format::Format::OpenAiChat)
                .expect("the fixture reads");
            for raw in doc.elements {
                let walked = Msg::scanned(raw.get());
                assert!(walked.is_some(), "{path}: left to serde: {}", raw.get());
                let parsed: Msg<'_> = serde_json::from_str(raw.get()).expect("a message");
                assert_eq!(walked.as_ref(), Some(&parsed), "{path}");
                for (k, call) in parsed
                    .tool_calls
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                {
                    assert!(
                        call_scanned(call).is_some(),
                        "{path}: call {k} left to serde"
                    );
                }
                messages += 1;
            }
        }
        assert!(messages > 20, "{messages} messages");
    }
}
