//! `cutpoint watch`: a recorded or live provider stream, read as it arrives, and one
//! JSON line per state change of the tracker it feeds.

use std::fs::File;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use cutpoint::Tracker;
use cutpoint::stream::decode::{
    Content, Decoded, Decoder, Detail, Feed, StreamError, StreamFormat,
};
use serde_json::{Value, json};

use crate::exit;

/// Arguments of `cutpoint watch`.
#[derive(clap::Args)]
pub(crate) struct Args {
    /// The stream's format: anthropic-sse, openai-chat-stream, openai-responses-stream
    /// or gemini-stream.
    #[arg(long, value_name = "FORMAT", value_parser = parse_stream_format)]
    format: StreamFormat,
    /// The stream; `-` or nothing reads stdin as it arrives.
    #[arg(value_name = "FILE")]
    file: Option<PathBuf>,
}

fn parse_stream_format(name: &str) -> Result<StreamFormat, String> {
    StreamFormat::from_name(name).ok_or_else(|| {
        format!(
            "unknown stream format {name:?}; one of: {}",
            StreamFormat::ALL.map(StreamFormat::name).join(", ")
        )
    })
}

/// What the lines report, kept beside the tracker.
struct Watch {
    tracker: Tracker,
    /// Legal cuts so far, to report each new one.
    legal_cuts: usize,
    tool_calls: usize,
    interrupted: bool,
}

impl Watch {
    /// The lines one decoded item makes, after feeding it.
    fn lines(&mut self, item: &Decoded) -> Result<Vec<Value>, String> {
        self.tracker.feed(item).map_err(|e| e.to_string())?;
        let at = self.tracker.len().saturating_sub(1);
        let mut out = Vec::new();
        match &item.detail {
            Detail::Opened(Content::Call {
                id,
                name,
                server,
                programmatic,
                ..
            }) => {
                self.tool_calls += 1;
                out.push(json!({"event": "call_opened", "record": at, "call_id": id.as_str(), "name": name, "server": server, "programmatic": programmatic}));
            }
            Detail::Closed(Content::Call { id, arguments, .. }) => {
                out.push(json!({"event": "arguments_complete", "record": at, "call_id": id.as_str(), "arguments": arguments}));
            }
            Detail::Closed(Content::ServerResult { id, .. }) => {
                out.push(json!({"event": "call_answered", "record": at, "call_id": id.as_str()}));
            }
            Detail::Dropped {
                records_after,
                call_id: Some(id),
            } => {
                // An Anthropic `fallback`: the API dropped this call; no result comes.
                let record = self.tracker.len().saturating_sub(records_after + 1);
                out.push(json!({"event": "call_withdrawn", "record": record, "call_id": id.as_str(), "pending": self.tracker.pending_count()}));
            }
            Detail::Usage(u) => {
                out.push(json!({
                    "event": "usage",
                    "record": item.event.as_ref().map(|_| at),
                    "input_tokens": u.input_tokens,
                    "output_tokens": u.output_tokens,
                    "reasoning_tokens": u.reasoning_tokens,
                    "tokens": self.tracker.total_tokens(),
                }));
            }
            Detail::Ended(e) => {
                self.interrupted |= !e.complete;
                if let Some(Content::Call { id, truncated, .. }) = &e.left_open {
                    out.push(json!({"event": "call_left_open", "record": at, "call_id": id.as_str(), "truncated": truncated, "reason": if *truncated { "length limit" } else { "stream ended" }}));
                }
                out.push(json!({"event": "turn_ended", "stop_reason": e.stop_reason, "complete": e.complete, "pending": self.tracker.pending_count()}));
            }
            _ => {}
        }
        let cuts = self.tracker.legal_cut_count();
        if cuts > self.legal_cuts {
            for cut in self.tracker.legal_cuts().skip(self.legal_cuts) {
                out.push(json!({"event": "legal_cut", "cut": cut, "tokens_before": self.tracker.tokens_before(cut)}));
            }
        }
        self.legal_cuts = cuts;
        Ok(out)
    }
}

pub(crate) fn run(args: Args) -> ExitCode {
    let (name, mut input): (String, Box<dyn Read>) = match args.file.as_deref() {
        Some(path) if path.as_os_str() != "-" => {
            let name = path.display().to_string();
            match File::open(path) {
                Ok(f) => (name, Box::new(f)),
                Err(e) => return exit::bad_input(&format!("{name}: cannot open: {e}")),
            }
        }
        _ => ("<stdin>".to_owned(), Box::new(io::stdin().lock())),
    };
    let mut decoder = Decoder::new(args.format);
    let mut watch = Watch {
        tracker: Tracker::new(),
        legal_cuts: 1,
        tool_calls: 0,
        interrupted: false,
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let mut buf = vec![0u8; 1 << 16];
    let mut eof = false;
    let failure = loop {
        if !eof {
            match input.read(&mut buf) {
                Ok(0) => {
                    eof = true;
                    decoder.finish();
                }
                Ok(n) => decoder.push(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return exit::bad_input(&format!("{name}: cannot read: {e}")),
            }
        }
        let mut stop = None;
        loop {
            match decoder.next() {
                Ok(Some(item)) => match watch.lines(&item) {
                    Ok(lines) => {
                        for line in lines {
                            let _ = writeln!(out, "{line}");
                        }
                    }
                    Err(e) => {
                        stop = Some(Err(format!("{name}: event {}: {e}", decoder.events())));
                        break;
                    }
                },
                Ok(None) => break,
                Err(e) => {
                    stop = Some(Ok(e));
                    break;
                }
            }
        }
        let _ = out.flush();
        match stop {
            Some(Err(message)) => return exit::bad_input(&message),
            Some(Ok(e)) => break Some(e),
            None if eof => break None,
            None => {}
        }
    };
    let t = &watch.tracker;
    let mut code = 0;
    if let Some(e) = &failure {
        match e {
            StreamError::Provider {
                kind,
                message,
                event,
                offset,
            } => {
                let _ = writeln!(
                    out,
                    "{}",
                    json!({"event": "provider_error", "kind": kind, "message": message, "stream_event": event, "byte": offset})
                );
                eprintln!("{name}: {e}");
                code = exit::VIOLATIONS;
            }
            // Cut off inside an event (a dropped connection, a file copied while
            // written): the response ended early, as a stream that stops between
            // events does, not bad input.
            StreamError::Truncated { .. } => {
                eprintln!("{name}: the stream ended before the response did: {e}");
                code = exit::VIOLATIONS;
            }
            other => {
                let _ = out.flush();
                return exit::bad_input(&format!("{name}: {other}"));
            }
        }
    }
    if let Some(at) = t.open_record() {
        if let Some(p) = t.pending_calls().iter().find(|p| p.at == at) {
            if failure.is_some() {
                let _ = writeln!(
                    out,
                    "{}",
                    json!({"event": "call_left_open", "record": at, "call_id": p.id.as_str(), "truncated": false, "reason": match failure {
                        Some(StreamError::Truncated { .. }) => "stream cut short",
                        _ => "stream failed",
                    }})
                );
            }
        }
    }
    if watch.interrupted && code == 0 {
        eprintln!("{name}: the stream ended before the response did");
        code = exit::VIOLATIONS;
    }
    let _ = writeln!(
        out,
        "{}",
        json!({
            "totals": true,
            "records": t.len(),
            "tool_calls": watch.tool_calls,
            "open_calls": t.pending_count(),
            "open_record": t.open_record(),
            "tokens": t.total_tokens(),
            "legal_cuts": t.legal_cut_count(),
            "events": decoder.events(),
            "bytes": decoder.offset(),
        })
    );
    let _ = out.flush();
    ExitCode::from(code)
}
