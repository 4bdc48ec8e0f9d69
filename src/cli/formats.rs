//! What the provider-format subcommands share: `--format`, reading a whole file into
//! a [`Transcript`], and its tracker.

use std::fs::File;
use std::io::{self, IsTerminal, Read, Write};
use std::path::Path;

use clap::ValueEnum;
use cutpoint::Tracker;
use cutpoint::format::{self, ByteEstimate, Format, TokenCounter, Transcript};

/// `--format` of the provider-format subcommands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FormatArg {
    /// Tell the format from the input (the default).
    Auto,
    /// cutpoint's records JSONL.
    Records,
    /// Anthropic Messages: JSON array or {"messages": [...]}.
    Anthropic,
    /// OpenAI Chat Completions: JSON array or {"messages": [...]}.
    OpenaiChat,
    /// OpenAI Responses input items: JSON array or {"input": [...]}.
    OpenaiResponses,
    /// Google Gemini contents: JSON array or {"contents": [...]}.
    Gemini,
    /// Claude Code session JSONL.
    ClaudeCode,
    /// Codex rollout JSONL.
    Codex,
}

impl FormatArg {
    /// The format asked for; `None` for `auto`.
    pub(crate) fn format(self) -> Option<Format> {
        Some(match self {
            FormatArg::Auto => return None,
            FormatArg::Records => Format::Records,
            FormatArg::Anthropic => Format::AnthropicMessages,
            FormatArg::OpenaiChat => Format::OpenAiChat,
            FormatArg::OpenaiResponses => Format::OpenAiResponses,
            FormatArg::Gemini => Format::Gemini,
            FormatArg::ClaudeCode => Format::ClaudeCode,
            FormatArg::Codex => Format::CodexRollout,
        })
    }
}

/// `--tokenizer`: how tokens are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub(crate) enum Tokenizer {
    /// One token per four bytes of JSON text (fast, no vocabulary).
    #[default]
    Bytes,
    /// OpenAI's o200k_base byte-pair encoding (feature `tiktoken`).
    #[cfg(feature = "tiktoken")]
    O200k,
}

/// The counter for `tokenizer`.
pub(crate) fn counter(tokenizer: Tokenizer) -> Result<Box<dyn TokenCounter>, String> {
    match tokenizer {
        Tokenizer::Bytes => Ok(Box::new(ByteEstimate)),
        #[cfg(feature = "tiktoken")]
        Tokenizer::O200k => Ok(Box::new(format::O200kBase::new()?)),
    }
}

/// A file read whole, and the name to print.
pub(crate) struct Loaded {
    pub(crate) name: String,
    pub(crate) text: String,
}

/// A file read whole as bytes (maybe not UTF-8), and the name to print.
pub(crate) struct LoadedBytes {
    pub(crate) name: String,
    pub(crate) bytes: Vec<u8>,
}

/// Files larger than this get a progress line on a terminal.
const PROGRESS_BYTES: u64 = 8 << 20;

/// Reads `file` (or stdin for `-` / none) whole as text. Errors read
/// `FILE: what is wrong`.
pub(crate) fn load(file: Option<&Path>) -> Result<Loaded, String> {
    into_text(load_bytes(file)?)
}

/// Reads `file` (or stdin for `-` / none) whole, with a progress line on a terminal
/// for large files. Errors read `FILE: what is wrong`.
pub(crate) fn load_bytes(file: Option<&Path>) -> Result<LoadedBytes, String> {
    let (name, mut reader, size): (String, Box<dyn Read>, u64) = match file {
        Some(path) if path.as_os_str() != "-" => {
            let name = path.display().to_string();
            let f = File::open(path).map_err(|e| format!("{name}: cannot open: {e}"))?;
            let size = f.metadata().map(|m| m.len()).unwrap_or(0);
            (name, Box::new(f), size)
        }
        _ => ("<stdin>".to_owned(), Box::new(io::stdin().lock()), 0),
    };
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    let progress = size > PROGRESS_BYTES && io::stderr().is_terminal();
    let mut chunk = vec![0u8; 1 << 20];
    loop {
        let n = match reader.read(&mut chunk) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(format!("{name}: cannot read: {e}")),
        };
        bytes.extend_from_slice(&chunk[..n]);
        if progress {
            let pct = (bytes.len() as u64).saturating_mul(100) / size.max(1);
            let _ = write!(io::stderr(), "\rreading {name}: {pct:>3}%");
        }
    }
    if progress {
        let _ = writeln!(io::stderr(), "\rreading {name}: done");
    }
    Ok(LoadedBytes { name, bytes })
}

/// The format of `bytes`: `format` when named; for `auto`, the detected one. Input no
/// format claims goes to records JSONL (whose reader names the bad line) unless it is
/// a JSON document, for which the detection error (listing the formats) is returned
/// as `FILE: cannot tell the format ...`.
pub(crate) fn resolve(loaded: &LoadedBytes, format: FormatArg) -> Result<Format, String> {
    if let Some(f) = format.format() {
        return Ok(f);
    }
    let Ok(text) = std::str::from_utf8(&loaded.bytes) else {
        return Ok(Format::Records);
    };
    match format::detect(text) {
        Ok(f) => Ok(f),
        Err(e) => {
            let trimmed = text.trim_start();
            let first_line = trimmed.lines().next().unwrap_or("");
            let json_lines = serde_json::from_str::<serde::de::IgnoredAny>(first_line).is_ok()
                && first_line.starts_with('{');
            if !json_lines && (trimmed.starts_with('[') || trimmed.starts_with('{')) {
                Err(format!("{}: {e}", loaded.name))
            } else {
                Ok(Format::Records)
            }
        }
    }
}

/// Turns loaded bytes into text. Errors read `FILE: not UTF-8 ...`.
pub(crate) fn into_text(loaded: LoadedBytes) -> Result<Loaded, String> {
    let LoadedBytes { name, bytes } = loaded;
    let text = String::from_utf8(bytes).map_err(|e| {
        format!(
            "{name}: not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })?;
    Ok(Loaded { name, text })
}

/// Parses a loaded file as `format` (detecting it for `auto`), counting tokens with
/// `counter`. Errors read `FILE:LINE: what is wrong` or `FILE: cannot tell the format ...`.
pub(crate) fn parse_counting(
    loaded: &Loaded,
    format: FormatArg,
    counter: &dyn TokenCounter,
) -> Result<Transcript, String> {
    let name = &loaded.name;
    let format = match format.format() {
        Some(f) => f,
        None => format::detect(&loaded.text).map_err(|e| format!("{name}: {e}"))?,
    };
    parse_as(loaded, format, counter)
}

/// Parses a loaded file as `format`. Errors read `FILE:LINE: what is wrong`.
pub(crate) fn parse_as(
    loaded: &Loaded,
    format: Format,
    counter: &dyn TokenCounter,
) -> Result<Transcript, String> {
    let name = &loaded.name;
    format::read(&loaded.text, format, counter).map_err(|e| match e {
        format::FormatError::Invalid { line, message } => {
            format!("{name}:{line}: {format}: {message}")
        }
        other => format!("{name}: {other}"),
    })
}

/// The tracker over the live history (from the last compaction boundary) and, for
/// each record, the index of the message holding it.
pub(crate) fn tracker(t: &Transcript) -> Result<(Tracker, Vec<usize>), String> {
    t.tracker().map_err(|e| e.to_string())
}

/// The message index a record cut falls at.
pub(crate) fn message_at(t: &Transcript, owner: &[usize], cut: usize) -> usize {
    t.message_at(owner, cut)
}
