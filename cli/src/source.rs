//! The one input loader of every subcommand: a file (or stdin) read whole, its format
//! told apart, and read as what the subcommand needs: records JSONL into a tracker, a
//! compaction log or plain entries, or a provider format into a transcript. Errors
//! read `FILE:LINE: what is wrong` (or `FILE: what is wrong`).

use std::fs::File;
use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::Path;

use cutpoint::Limits;
use cutpoint::compact::{Entry, Log};
use cutpoint::format::records::{ReadError, Reader};
use cutpoint::format::{self, ByteEstimate, Format, Loaded, TokenCounter, Transcript};

use crate::guard::{CallLines, CapGauge, InputOptions, cap_message};

/// `--format`: a format's name (as [`Format::name`] spells it), or `auto`.
pub(crate) fn parse_format(name: &str) -> Result<FormatArg, String> {
    if name == "auto" {
        return Ok(FormatArg(None));
    }
    Format::from_name(name)
        .map(|f| FormatArg(Some(f)))
        .ok_or_else(|| {
            format!(
                "unknown format {name:?}; one of: auto, {}",
                Format::ALL.map(Format::name).join(", ")
            )
        })
}

/// A `--format` value: a named format, or `None` for `auto` (tell it from the input).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FormatArg(pub(crate) Option<Format>);

/// `--tokenizer`: how tokens are counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Tokenizer {
    /// One token per four bytes of JSON text (fast, no vocabulary).
    #[default]
    Bytes,
    /// OpenAI's o200k_base byte-pair encoding (feature `tiktoken`).
    #[cfg(feature = "tiktoken")]
    O200k,
}

impl Tokenizer {
    /// The counter this names.
    pub(crate) fn counter(self) -> Result<Box<dyn TokenCounter>, String> {
        match self {
            Tokenizer::Bytes => Ok(Box::new(ByteEstimate)),
            #[cfg(feature = "tiktoken")]
            Tokenizer::O200k => Ok(Box::new(format::O200kBase::new()?)),
        }
    }
}

/// An input, and the name to print in errors.
pub(crate) struct Source {
    pub(crate) name: String,
    body: Body,
}

/// What an input holds: its bytes read whole (to tell formats apart and to parse JSON
/// documents), or, for records JSONL named with `--format records`, a stream read line
/// by line, so that a runaway stream is held to the caps without being buffered.
enum Body {
    Whole(Vec<u8>),
    Stream(Box<dyn BufRead>),
}

/// Opens `file` (or stdin for `-` / none) for a subcommand asked for `format`: records
/// JSONL named as such is streamed, anything else read whole ([`load`]).
pub(crate) fn open(file: Option<&Path>, format: FormatArg) -> Result<Source, String> {
    if format.0 != Some(Format::Records) {
        return load(file);
    }
    let (name, reader): (String, Box<dyn BufRead>) = match file {
        Some(path) if path.as_os_str() != "-" => {
            let name = path.display().to_string();
            let f = File::open(path).map_err(|e| format!("{name}: cannot open: {e}"))?;
            (name, Box::new(BufReader::with_capacity(1 << 16, f)))
        }
        _ => ("<stdin>".to_owned(), Box::new(io::stdin().lock())),
    };
    let mut reader = reader;
    // What the stream starts with (one buffer, not consumed): a JSON document or JSON
    // lines of another kind are named as such, as a whole input would be.
    let mut head = reader
        .fill_buf()
        .map_err(|e| format!("{name}: cannot read: {e}"))?;
    if head.starts_with(BYTE_ORDER_MARK) {
        skipped_byte_order_mark(&name);
        reader.consume(BYTE_ORDER_MARK.len());
        head = reader
            .fill_buf()
            .map_err(|e| format!("{name}: cannot read: {e}"))?;
    }
    let text = match std::str::from_utf8(head) {
        Ok(text) => text,
        // The buffer may end inside a character: judge the whole ones before it.
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or(""),
    };
    if let Some(e) = format::mismatch(text, Format::Records) {
        return Err(format!("{name}: {e}"));
    }
    Ok(Source {
        name,
        body: Body::Stream(reader),
    })
}

/// UTF-8's byte order mark, which some editors write first and JSON allows nowhere
/// (RFC 8259, section 8.1: a parser may ignore one). The library refuses a text that
/// starts with it, by name; the CLI reads the file without it.
const BYTE_ORDER_MARK: &[u8] = b"\xEF\xBB\xBF";

/// Says on stderr that `name`'s byte order mark was skipped: whatever a subcommand
/// writes from the input is written without it.
fn skipped_byte_order_mark(name: &str) {
    eprintln!(
        "cutpoint: {name}: skipped the byte order mark (U+FEFF) the input starts with; \
         JSON allows none, so what is written from it has none"
    );
}

/// Inputs larger than this get a progress line on a terminal.
const PROGRESS_BYTES: u64 = 8 << 20;

/// Reads `file` (or stdin for `-` / none) whole, with a progress line on a terminal
/// for large files. Errors read `FILE: what is wrong`.
pub(crate) fn load(file: Option<&Path>) -> Result<Source, String> {
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
    if bytes.starts_with(BYTE_ORDER_MARK) {
        skipped_byte_order_mark(&name);
        bytes.drain(..BYTE_ORDER_MARK.len());
    }
    Ok(Source {
        name,
        body: Body::Whole(bytes),
    })
}

/// Records JSONL read with payloads, without judging pairing, and the input line of
/// each entry.
struct Entries {
    /// The entries, in log order.
    entries: Vec<Entry>,
    /// `lines[i]` is the 1-based input line of `entries[i]`.
    lines: Vec<usize>,
}

/// How a job reads records JSONL ([`Source::load`]).
pub(crate) enum Records<'o> {
    /// Judged by a tracker with the caps and mode of the options (`cut`, `compact`).
    Judged(&'o InputOptions),
    /// As it is, its pairing not judged, held to the caps (`check`).
    Unjudged(Limits),
}

impl Source {
    /// The input's format: the one named; for `auto`, the detected one. Input no
    /// format claims is read as records JSONL (whose reader names the bad line) only
    /// when it may be records: not UTF-8, a line that is no JSON object, or a line with
    /// a `kind`. Anything else (a JSON document, JSON lines of a kind cutpoint does not
    /// read) gets the detection error, saying what was seen, as `FILE: cannot tell the
    /// format ...`: the same answer from every subcommand.
    pub(crate) fn format(&self, arg: FormatArg) -> Result<Format, String> {
        match arg.0 {
            Some(f) => Ok(f),
            None => format::detect_input(self.bytes()).map_err(|e| format!("{}: {e}", self.name)),
        }
    }

    /// The input as text. Errors read `FILE: not UTF-8 ...`.
    pub(crate) fn text(&self) -> Result<&str, String> {
        std::str::from_utf8(self.bytes()).map_err(|e| {
            format!(
                "{}: not UTF-8 text (invalid byte at offset {})",
                self.name,
                e.valid_up_to()
            )
        })
    }

    /// The input read as `format` into a transcript, counting tokens with `counter`.
    /// Errors read `FILE:LINE: FORMAT: what is wrong`.
    pub(crate) fn transcript(
        &self,
        format: Format,
        counter: &dyn TokenCounter,
    ) -> Result<Transcript, String> {
        let name = &self.name;
        format::read(self.text()?, format, counter).map_err(|e| match e {
            format::FormatError::Invalid { line, message } => {
                format!("{name}:{line}: {format}: {message}")
            }
            other => format!("{name}: {other}"),
        })
    }

    /// The input read as `format` for a job ([`Loaded`]): records JSONL judged into
    /// a compaction log under the caps and mode of `options`, or as it is under
    /// `limits` for `check` (see [`Records`]); any other format into a transcript
    /// counted with `counter`. The one place the CLI tells records JSONL from the
    /// other formats, past [`open`]. Errors read `FILE:LINE: what is wrong`.
    pub(crate) fn load(
        &mut self,
        format: Format,
        records: Records<'_>,
        counter: &dyn TokenCounter,
    ) -> Result<Loaded<'_>, String> {
        if format != Format::Records {
            let transcript = self.transcript(format, counter)?;
            return Ok(Loaded::Transcript {
                transcript,
                input: self.text()?,
            });
        }
        Ok(match records {
            Records::Judged(options) => {
                let log = self.log(options)?;
                // Every line read is UTF-8, so the whole input is (empty when streamed).
                let input = std::str::from_utf8(self.bytes()).unwrap_or("");
                Loaded::Records {
                    log: Box::new(log),
                    input,
                }
            }
            Records::Unjudged(limits) => {
                let read = self.entries(limits)?;
                Loaded::Unjudged {
                    entries: read.entries,
                    lines: read.lines,
                }
            }
        })
    }

    /// Records JSONL with payloads into a compaction log under the caps and mode of
    /// `options`. A repeated call id names the earlier line too.
    fn log(&mut self, options: &InputOptions) -> Result<Log, String> {
        let limits = options.limits();
        let mut log = Log::with_limits(limits, options.mode());
        let mut lines = CallLines::default();
        let (name, reader) = self.reader();
        let reader = Reader::new(reader).max_line_bytes(limits.max_line_bytes);
        for item in reader.entries() {
            let (line, entry) = item.map_err(|e| located(&name, &e))?;
            let record = entry.record.clone();
            match log.append(entry) {
                Ok(_) => lines.accepted(&record, line),
                Err(e) => return Err(format!("{name}:{line}: {}", lines.explain(&e))),
            }
        }
        Ok(log)
    }

    /// Records JSONL with payloads, without judging its pairing (a broken log is still
    /// read), but held to `limits` as [`log`](Source::log) is (see [`CapGauge`]).
    fn entries(&mut self, limits: Limits) -> Result<Entries, String> {
        let mut entries = Vec::new();
        let mut lines = Vec::new();
        let mut gauge = CapGauge::new(limits);
        let (name, reader) = self.reader();
        let reader = Reader::new(reader).max_line_bytes(limits.max_line_bytes);
        for item in reader.entries() {
            let (line, entry) = item.map_err(|e| located(&name, &e))?;
            gauge
                .admit(&entry.record)
                .map_err(|e| format!("{name}:{line}: {}", cap_message(&e)))?;
            entries.push(entry);
            lines.push(line);
        }
        Ok(Entries { entries, lines })
    }

    /// The whole input's bytes; empty for a stream (whose format was named).
    pub(crate) fn bytes(&self) -> &[u8] {
        match &self.body {
            Body::Whole(bytes) => bytes,
            Body::Stream(_) => &[],
        }
    }

    /// The name and a line reader over the input.
    fn reader(&mut self) -> (String, Box<dyn BufRead + '_>) {
        let reader: Box<dyn BufRead + '_> = match &mut self.body {
            Body::Whole(bytes) => Box::new(&bytes[..]),
            Body::Stream(reader) => Box::new(reader),
        };
        (self.name.clone(), reader)
    }
}

/// `FILE:LINE: what is wrong` for a records read error.
fn located(name: &str, e: &ReadError) -> String {
    let line = e.line();
    let text = e.to_string();
    let rest = text
        .strip_prefix(&format!("line {line}: "))
        .unwrap_or(&text);
    format!("{name}:{line}: {rest}")
}
