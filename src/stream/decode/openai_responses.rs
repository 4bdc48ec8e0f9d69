//! OpenAI Responses streaming: `response.created`, `response.output_item.added` /
//! `done`, text, argument and reasoning deltas, `response.completed` / `incomplete` /
//! `failed`, `error`; several responses back to back (an agent loop's recording).
//!
//! Each output item is one record, as the Responses reader makes one message of each
//! input item: `function_call` (and the other call items paired by `call_id`,
//! `apply_patch_call` too) a `tool_use` record, as is an `mcp_approval_request` (by
//! its `id`, which the client's `mcp_approval_response` answers) and a
//! `tool_search_call` with a `call_id` (a server call when `execution` is `server`,
//! answered by the `tool_search_output` in the same stream, a `tool_result`
//! record); `reasoning` and `message` assistant records, any other item
//! (`web_search_call`, `configuration_update`, ...) a plain assistant record. The item
//! after a `reasoning` item is bound to it (the API refuses one without the other).
//! The final `arguments` of `function_call_arguments.done` / `output_item.done` are
//! kept. The response's `output_tokens` replaces the estimate at its end.

use serde::Deserialize;

use super::buffer::Frame;
use super::emit::{Emitter, Piece};
use super::{At, Content, ErrorBody, Provider, RawUsage, StreamError};
use crate::CallId;
use crate::format::json_doc::{JsonStr, opt_str, string_or_json};
use crate::format::openai_responses::{Item, ItemKind};

#[derive(Deserialize)]
struct Ev<'a> {
    #[serde(rename = "type", borrow)]
    kind: JsonStr<'a>,
    #[serde(borrow, default)]
    item: Option<Item<'a>>,
    #[serde(borrow, default)]
    item_id: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    delta: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    arguments: Option<JsonStr<'a>>,
    #[serde(borrow, default)]
    response: Option<Response<'a>>,
    #[serde(borrow, default)]
    error: Option<ErrorBody<'a>>,
}

#[derive(Deserialize)]
struct Response<'a> {
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(borrow, default)]
    error: Option<ErrorBody<'a>>,
    #[serde(borrow, default)]
    incomplete_details: Option<Incomplete<'a>>,
}

#[derive(Deserialize)]
struct Incomplete<'a> {
    #[serde(borrow, default)]
    reason: Option<JsonStr<'a>>,
}

/// The response being read.
#[derive(Default)]
pub(crate) struct State {
    /// The open item's id, to match deltas to it.
    open_item: Option<String>,
    /// The last item opened was a `reasoning` item: the next one binds to it.
    after_reasoning: bool,
}

impl Provider for State {
    fn frame(&mut self, frame: &Frame<'_>, out: &mut Emitter) -> Result<(), StreamError> {
        let at = At::of(frame);
        let ev: Ev<'_> = serde_json::from_str(frame.data).map_err(|e| at.json(&e))?;
        let kind = ev.kind.as_str();
        match kind {
            "response.created" => self.start(out),
            "response.output_item.added" => {
                if out.begin_response() {
                    *self = State::default();
                }
                let item = ev
                    .item
                    .ok_or_else(|| at.malformed("output_item.added without an item"))?;
                out.close();
                self.open(at, out, &item)?;
            }
            "response.output_text.delta"
            | "response.refusal.delta"
            | "response.function_call_arguments.delta"
            | "response.custom_tool_call_input.delta"
            | "response.reasoning_summary_text.delta"
            | "response.reasoning_text.delta" => {
                self.check_item(at, opt_str(&ev.item_id))?;
                if let Some(delta) = opt_str(&ev.delta) {
                    out.piece(at, Piece::Text, delta)?;
                }
            }
            "response.function_call_arguments.done" => {
                self.check_item(at, opt_str(&ev.item_id))?;
                if let Some(arguments) = opt_str(&ev.arguments) {
                    out.final_arguments(at, arguments)?;
                }
            }
            "response.output_item.done" => {
                let item = ev
                    .item
                    .ok_or_else(|| at.malformed("output_item.done without an item"))?;
                self.check_item(at, opt_str(&item.id))?;
                if self.open_item.is_none() {
                    // An item announced whole: open it now.
                    self.open(at, out, &item)?;
                }
                // The item was classified when it opened; its final arguments or
                // signature complete the record.
                match item.classify() {
                    Ok(ItemKind::Call {
                        arguments: Some(args),
                        ..
                    }) => out.final_arguments(at, &string_or_json(Some(args)))?,
                    Ok(ItemKind::Reasoning) => {
                        if let (Some(sig), Some(Content::Thinking { signature, .. })) =
                            (opt_str(&item.encrypted_content), out.open_content_mut())
                        {
                            *signature = Some(sig.to_owned());
                        }
                    }
                    // A server tool search whose tools come only when it is done.
                    _ => {
                        if let Some(Content::Other { kind, loads }) = out.open_content_mut() {
                            if loads.is_empty() {
                                *loads = search_loads(kind, item.tools);
                            }
                        }
                    }
                }
                out.close();
                self.open_item = None;
            }
            "response.completed" | "response.incomplete" => {
                let response = ev.response;
                if let Some(u) = response.as_ref().and_then(|r| r.usage) {
                    out.usage(u.usage());
                }
                let reason = response
                    .as_ref()
                    .and_then(|r| r.incomplete_details.as_ref())
                    .and_then(|d| opt_str(&d.reason))
                    .map(str::to_owned);
                let length = reason.as_deref() == Some("max_output_tokens");
                let stop = reason.or_else(|| Some(kind.trim_start_matches("response.").to_owned()));
                out.end(stop, true, length);
                self.open_item = None;
            }
            "response.failed" => {
                let error = ev.response.as_ref().and_then(|r| r.error.as_ref());
                return Err(at.provider_error(error, "failed", ""));
            }
            "error" => {
                // The error's fields stand under `error`, or in the event itself
                // (whose `type` is the event's, not the error's).
                let top = match &ev.error {
                    Some(_) => None,
                    None => Some(ErrorBody {
                        kind: None,
                        ..serde_json::from_str(frame.data).map_err(|e| at.json(&e))?
                    }),
                };
                return Err(at.provider_error(ev.error.as_ref().or(top.as_ref()), "error", ""));
            }
            // response.in_progress, content parts, summary parts, `.done` texts,
            // server-tool progress events, and event types added later.
            _ => {}
        }
        Ok(())
    }

    /// The end of input: a response still streaming is interrupted.
    fn finish(&mut self, out: &mut Emitter) -> Result<(), StreamError> {
        if out.responding() {
            out.end(None, false, false);
        }
        Ok(())
    }
}

impl State {
    fn start(&mut self, out: &mut Emitter) {
        out.start_response();
        *self = State::default();
    }

    /// A delta names the open item (when it names one).
    fn check_item(&self, at: At, item_id: Option<&str>) -> Result<(), StreamError> {
        match (item_id, &self.open_item) {
            (Some(id), Some(open)) if id != open => Err(at.malformed(format!(
                "an event for item {id:?} while item {open:?} is open"
            ))),
            _ => Ok(()),
        }
    }

    /// Opens the record of an output item, classified as the Responses reader
    /// classifies an input item.
    fn open(&mut self, at: At, out: &mut Emitter, item: &Item<'_>) -> Result<(), StreamError> {
        let kind = item.kind();
        let bound = self.after_reasoning;
        self.after_reasoning = kind == "reasoning";
        self.open_item = Some(opt_str(&item.id).unwrap_or_default().to_owned());
        let (content, initial) = match item.classify().map_err(|m| at.malformed(m))? {
            ItemKind::Call {
                id,
                name,
                arguments,
                server,
            } => {
                let arguments = arguments.map(|a| string_or_json(Some(a)));
                let id = CallId::from(id);
                return out.open_call(
                    at,
                    bound,
                    id,
                    name,
                    (server, false),
                    None,
                    arguments.as_deref(),
                );
            }
            // The only output a response streams: a server's tool search.
            ItemKind::Result { id, .. } if kind == "tool_search_output" => {
                (Content::server_result(id, kind), item.tools)
            }
            ItemKind::Reasoning => {
                let signature = opt_str(&item.encrypted_content).map(str::to_owned);
                (Content::thinking(signature, false), None)
            }
            ItemKind::Message => (Content::text(), None),
            _ => {
                let mut content = Content::other(kind);
                if let Content::Other { loads, .. } = &mut content {
                    *loads = search_loads(kind, item.tools);
                }
                (content, None)
            }
        };
        out.open_with(at, content, bound, initial)
    }
}

/// The tools a server-run `tool_search_output` item (of type `kind`, with `tools`)
/// loads, by name (`format::openai_responses::tool_names`); empty for any other item
/// and for tools that are not a JSON array. **O(tools)**.
fn search_loads(kind: &str, tools: Option<&str>) -> Vec<String> {
    if kind != "tool_search_output" {
        return Vec::new();
    }
    tools
        .and_then(|raw| serde_json::from_str::<Vec<serde_json::Value>>(raw).ok())
        .map(|tools| {
            crate::format::openai_responses::tool_names(&tools)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}
