//! Gemini `streamGenerateContent`: response chunks (`candidates[0].content.parts`,
//! `finishReason`, `usageMetadata`) as SSE (`alt=sse`), a JSON array, or one object
//! per line; an error object ends the stream.
//!
//! The stream is one response (one model message), its records bound to the first.
//! Consecutive text parts make one text record, thought parts (`thought: true`) one
//! thinking record; each `functionCall` part is a call: complete in one part (`args`),
//! or streamed (`willContinue: true`, then parts of `partialArgs` — values at JSON
//! paths, strings in pieces — until a part without `willContinue`, often an empty
//! `functionCall: {}`). Streamed arguments are assembled into one JSON object (keys
//! in the order they came). A `thoughtSignature` goes with the part's record. Calls
//! without an `id` get `NAME#R.K` (response `R` of the stream, record `K` of the
//! response), as the Gemini reader names them by message and part. `usageMetadata`
//! comes with every chunk; the last one's `candidatesTokenCount +
//! thoughtsTokenCount` replaces the estimate when the response ends: at the end of
//! input (or of the JSON array) after a `finishReason`; without one, the stream was
//! interrupted. Under `MAX_TOKENS` a call still streaming stays open, flagged
//! truncated.

use serde::Deserialize;
use serde_json::value::RawValue;

use super::buffer::Frame;
use super::emit::{Emitter, Piece};
use super::{At, Content, ErrorBody, Provider, RawUsage, StreamError, Usage};
use crate::CallId;
use crate::format::gemini::{Call, Part, PartialArg, placeholder_id};
use crate::format::json_doc::{JsonStr, opt_str};

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow, default)]
    candidates: Option<Vec<Candidate<'a>>>,
    #[serde(rename = "usageMetadata", default)]
    usage: Option<RawUsage>,
    #[serde(borrow, default)]
    error: Option<ErrorBody<'a>>,
}

#[derive(Deserialize)]
struct Candidate<'a> {
    #[serde(default)]
    index: Option<u64>,
    #[serde(borrow, default)]
    content: Option<CandidateContent<'a>>,
    #[serde(rename = "finishReason", borrow, default)]
    finish_reason: Option<JsonStr<'a>>,
}

#[derive(Deserialize)]
struct CandidateContent<'a> {
    #[serde(borrow, default)]
    parts: Option<Vec<Part<'a>>>,
}

/// The response being read.
#[derive(Default)]
pub(crate) struct State {
    /// The open call's streamed arguments, while `willContinue` holds.
    streaming: Option<Args>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
}

impl Provider for State {
    fn frame(&mut self, frame: &Frame<'_>, out: &mut Emitter) -> Result<(), StreamError> {
        let at = At::of(frame);
        let chunk: Chunk<'_> = serde_json::from_str(frame.data).map_err(|e| at.json(&e))?;
        if let Some(e) = &chunk.error {
            return Err(at.provider_error(Some(e), "error", ""));
        }
        if out.begin_response() {
            *self = State::default();
        }
        let candidate = chunk
            .candidates
            .into_iter()
            .flatten()
            .find(|c| c.index.unwrap_or(0) == 0);
        if let Some(candidate) = candidate {
            let parts = candidate.content.and_then(|c| c.parts).unwrap_or_default();
            for part in parts {
                self.part(at, out, part)?;
            }
            if let Some(reason) = opt_str(&candidate.finish_reason) {
                self.finish_reason = Some(reason.to_owned());
            }
        }
        if let Some(u) = chunk.usage {
            self.usage = Some(u.usage());
        }
        Ok(())
    }

    /// The end of input ends the response.
    fn finish(&mut self, out: &mut Emitter) -> Result<(), StreamError> {
        self.end(out);
        Ok(())
    }

    /// The JSON array ended: so did the response.
    fn end_of_array(&mut self, out: &mut Emitter) {
        self.end(out);
    }
}

impl State {
    fn part(&mut self, at: At, out: &mut Emitter, part: Part<'_>) -> Result<(), StreamError> {
        let signature = at.string(part.signature)?;
        let signature = opt_str(&signature).filter(|s| !s.is_empty());
        if let Some(call) = part.call {
            return self.call(at, out, call, signature);
        }
        if let Some((kind, raw)) = part
            .code
            .map(|c| ("executableCode", c))
            .or(part.code_result.map(|c| ("codeExecutionResult", c)))
        {
            self.close(at, out)?;
            out.open_with(at, Content::other(kind), out.records() > 0, Some(raw.get()))?;
            out.close();
            return Ok(());
        }
        let text = at.string(part.text)?;
        let Some(text) = opt_str(&text) else {
            return Ok(());
        };
        let thinking = part.thought == Some(true);
        if text.is_empty() && signature.is_none() {
            return Ok(());
        }
        if !out.continues_text(thinking) {
            self.close(at, out)?;
            out.open_text(at, thinking)?;
        }
        out.piece(at, Piece::Text, text)?;
        if let Some(s) = signature {
            out.piece(at, Piece::Signature, s)?;
        }
        Ok(())
    }

    fn call(
        &mut self,
        at: At,
        out: &mut Emitter,
        call: Call<'_>,
        signature: Option<&str>,
    ) -> Result<(), StreamError> {
        let name = opt_str(&call.name).filter(|n| !n.is_empty());
        if name.is_none() {
            // The rest of a streamed call; without one streaming, nothing to add to.
            let Some(args) = self.streaming.as_mut() else {
                return Ok(());
            };
            for p in call.partial.iter().flatten() {
                let piece = args
                    .apply(p, out.caps().max_calls)
                    .map_err(|m| at.malformed(m))?;
                out.piece(at, Piece::Text, &piece)?;
            }
            if let Some(s) = signature {
                out.piece(at, Piece::Signature, s)?;
            }
            if call.will_continue != Some(true) {
                self.close(at, out)?;
            }
            return Ok(());
        }
        let name = name.unwrap_or_default();
        self.close(at, out)?;
        let id = match opt_str(&call.id).filter(|id| !id.is_empty()) {
            Some(id) => CallId::from(id),
            None => placeholder_id(name, out.response_index(), out.records()),
        };
        let args = call.args.map(RawValue::get);
        out.open_call(
            at,
            out.records() > 0,
            id,
            name,
            (false, false),
            signature,
            args,
        )?;
        if call.partial.is_some() || call.will_continue == Some(true) {
            let mut args = Args::default();
            for p in call.partial.iter().flatten() {
                let piece = args
                    .apply(p, out.caps().max_calls)
                    .map_err(|m| at.malformed(m))?;
                out.piece(at, Piece::Text, &piece)?;
            }
            self.streaming = Some(args);
        }
        if call.will_continue != Some(true) {
            self.close(at, out)?;
        }
        Ok(())
    }

    /// Closes the open record; a streamed call gets its assembled arguments.
    fn close(&mut self, at: At, out: &mut Emitter) -> Result<(), StreamError> {
        if let Some(args) = self.streaming.take() {
            out.replace_arguments(at, &args.render())?;
        }
        out.close();
        Ok(())
    }

    fn end(&mut self, out: &mut Emitter) {
        if !out.responding() {
            return;
        }
        let Some(reason) = self.finish_reason.take() else {
            out.end(None, false, false);
            return;
        };
        let length = reason == "MAX_TOKENS";
        if let Some(args) = self.streaming.as_ref() {
            let rendered = args.render();
            // Rendering fits the record cap: the pieces it is made of did.
            if out
                .replace_arguments(
                    At {
                        event: 0,
                        offset: 0,
                    },
                    &rendered,
                )
                .is_ok()
                && !length
            {
                self.streaming = None;
                out.close();
            }
        }
        if let Some(u) = self.usage.take() {
            out.usage(u);
        }
        out.end(Some(reason), true, length);
    }
}

/// A JSON value assembled from `partialArgs`: objects keep their keys in the order
/// they came.
#[derive(Debug)]
enum Node {
    Object(Vec<(String, Node)>),
    Array(Vec<Node>),
    String(String),
    /// A number, `true`, `false` or `null`, as JSON text.
    Raw(String),
}

/// One step of a `jsonPath`.
enum Step {
    Key(String),
    Index(usize),
}

/// Streamed arguments: the object so far, and the path whose string continues.
#[derive(Default)]
struct Args {
    root: Option<Node>,
    continues: Option<String>,
}

impl Args {
    /// Puts one partial argument in place and returns its text (what is counted).
    /// **O(path + siblings)**.
    fn apply(&mut self, p: &PartialArg<'_>, max_depth: usize) -> Result<String, String> {
        let path = p.path.as_str();
        let steps = parse_path(path, max_depth)?;
        let (value, text) = if let Some(s) = &p.string {
            (None, s.as_str().to_owned())
        } else if let Some(n) = p.number {
            (Some(Node::Raw(n.get().to_owned())), n.get().to_owned())
        } else if let Some(b) = p.boolean {
            (Some(Node::Raw(b.to_string())), b.to_string())
        } else if p.null.is_some() {
            (Some(Node::Raw("null".to_owned())), "null".to_owned())
        } else {
            return Err(format!("partialArgs at {path:?} without a value"));
        };
        let appending = self.continues.as_deref() == Some(path);
        let root = self.root.get_or_insert_with(|| Node::Object(Vec::new()));
        let slot = place(root, &steps).map_err(|m| format!("partialArgs at {path:?}: {m}"))?;
        match value {
            Some(v) => *slot = v,
            None => match slot {
                Node::String(s) if appending => s.push_str(&text),
                other => *other = Node::String(text.clone()),
            },
        }
        self.continues = (p.will_continue == Some(true)).then(|| path.to_owned());
        Ok(text)
    }

    /// The arguments' JSON text (`{}` when nothing came). **O(size)**.
    fn render(&self) -> String {
        let mut out = String::new();
        match &self.root {
            Some(root) => render(root, &mut out),
            None => out.push_str("{}"),
        }
        out
    }
}

/// The steps of a path such as `$.recipe.steps[9]` or `$['a.b'][0]`.
fn parse_path(path: &str, max_depth: usize) -> Result<Vec<Step>, String> {
    let Some(mut rest) = path.strip_prefix('$') else {
        return Err(format!("jsonPath {path:?} does not start with `$`"));
    };
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if steps.len() >= max_depth {
            return Err(format!(
                "jsonPath {path:?} is deeper than {max_depth} steps"
            ));
        }
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            steps.push(Step::Key(r[..end].to_owned()));
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("['").or_else(|| rest.strip_prefix("[\"")) {
            let quote = if rest.as_bytes()[1] == b'\'' {
                "']"
            } else {
                "\"]"
            };
            let end = r
                .find(quote)
                .ok_or_else(|| format!("jsonPath {path:?}: an unclosed key"))?;
            steps.push(Step::Key(r[..end].to_owned()));
            rest = &r[end + 2..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r
                .find(']')
                .ok_or_else(|| format!("jsonPath {path:?}: an unclosed index"))?;
            let index = r[..end]
                .parse::<usize>()
                .map_err(|_| format!("jsonPath {path:?}: {:?} is not an index", &r[..end]))?;
            steps.push(Step::Index(index));
            rest = &r[end + 1..];
        } else {
            return Err(format!("jsonPath {path:?}: unexpected {rest:?}"));
        }
    }
    Ok(steps)
}

/// The node at `steps` under `node`, made as needed: an index may name an element or
/// the one after the last, never further (so hostile indices cannot allocate).
fn place<'n>(mut node: &'n mut Node, steps: &[Step]) -> Result<&'n mut Node, String> {
    for step in steps {
        node = match step {
            Step::Key(key) => {
                if !matches!(node, Node::Object(_)) {
                    *node = Node::Object(Vec::new());
                }
                let Node::Object(fields) = node else {
                    return Err("not an object".to_owned());
                };
                let at = match fields.iter().position(|(k, _)| k == key) {
                    Some(at) => at,
                    None => {
                        fields.push((key.clone(), Node::Raw("null".to_owned())));
                        fields.len() - 1
                    }
                };
                &mut fields[at].1
            }
            Step::Index(index) => {
                if !matches!(node, Node::Array(_)) {
                    *node = Node::Array(Vec::new());
                }
                let Node::Array(items) = node else {
                    return Err("not an array".to_owned());
                };
                if *index > items.len() {
                    return Err(format!(
                        "index {index} skips past the array's end ({})",
                        items.len()
                    ));
                }
                if *index == items.len() {
                    items.push(Node::Raw("null".to_owned()));
                }
                &mut items[*index]
            }
        };
    }
    Ok(node)
}

fn render(node: &Node, out: &mut String) {
    match node {
        Node::Object(fields) => {
            out.push('{');
            for (i, (k, v)) in fields.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_string(k, out);
                out.push(':');
                render(v, out);
            }
            out.push('}');
        }
        Node::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                render(v, out);
            }
            out.push(']');
        }
        Node::String(s) => push_string(s, out),
        Node::Raw(r) => out.push_str(r),
    }
}

fn push_string(s: &str, out: &mut String) {
    // Serializing a string cannot fail.
    out.push_str(&serde_json::to_string(s).unwrap_or_default());
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arg(path: &str, string: Option<&str>, number: Option<&str>, cont: bool) -> String {
        let mut json = format!(r#"{{"jsonPath":{}"#, serde_json::to_string(path).unwrap());
        if let Some(s) = string {
            json += &format!(r#","stringValue":{}"#, serde_json::to_string(s).unwrap());
        }
        if let Some(n) = number {
            json += &format!(r#","numberValue":{n}"#);
        }
        if cont {
            json += r#","willContinue":true"#;
        }
        json + "}"
    }

    #[test]
    fn partial_args_assemble_in_order_with_strings_in_pieces() {
        let mut args = Args::default();
        for json in [
            arg("$.recipe.name", Some("Pan"), None, true),
            arg("$.recipe.name", Some("cakes"), None, true),
            arg("$.recipe.name", Some(""), None, false),
            arg("$.recipe.steps[0]", Some("Mix"), None, false),
            arg("$.recipe.steps[1]", Some("Fry"), None, false),
            arg("$['a.b'][0].x", None, Some("0.5"), false),
        ] {
            let p: PartialArg<'_> = serde_json::from_str(&json).unwrap();
            args.apply(&p, 64).unwrap();
        }
        assert_eq!(
            args.render(),
            r#"{"recipe":{"name":"Pancakes","steps":["Mix","Fry"]},"a.b":[{"x":0.5}]}"#
        );
        let past_end = arg("$.recipe.steps[5]", Some("x"), None, false);
        let p: PartialArg<'_> = serde_json::from_str(&past_end).unwrap();
        assert!(args.apply(&p, 64).is_err(), "an index past the end");
        let no_root = arg("recipe", Some("x"), None, false);
        let p: PartialArg<'_> = serde_json::from_str(&no_root).unwrap();
        assert!(args.apply(&p, 64).is_err(), "no `$`");
        assert!(parse_path("$.a.b.c", 2).is_err(), "too deep");
    }
}
