//! Opening the input and reading records, with errors as `FILE:LINE: what is wrong`.

use std::fs::File;
use std::io::{self, BufRead, BufReader};
use std::path::Path;
use std::process::ExitCode;

use clap::ValueEnum;
use cutpoint::compact::{Entry, Log};
use cutpoint::jsonl::Reader;
use cutpoint::{Limits, Tracker};

use super::guard::{CallLines, CapGauge, InputOptions, cap_message};

/// Input formats the CLI reads.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub(crate) enum Format {
    /// cutpoint's records JSONL: {"kind":"tool_use","call_id":"a","tokens":12} per line.
    Records,
}

/// An opened input and the name to print in errors.
pub(crate) struct Input {
    pub(crate) name: String,
    pub(crate) reader: Box<dyn BufRead>,
}

/// Opens `file`, or stdin for `-` or none.
pub(crate) fn open(file: Option<&Path>) -> Result<Input, String> {
    match file {
        Some(path) if path.as_os_str() != "-" => {
            let name = path.display().to_string();
            let file = File::open(path).map_err(|e| format!("{name}: cannot open: {e}"))?;
            Ok(Input {
                name,
                reader: Box::new(BufReader::with_capacity(1 << 16, file)),
            })
        }
        _ => Ok(Input {
            name: "<stdin>".to_owned(),
            reader: Box::new(io::stdin().lock()),
        }),
    }
}

/// Reads records JSONL into a tracker under the caps and mode of `options`. Errors read
/// `FILE:LINE: what is wrong`; a repeated call id names the earlier line too.
pub(crate) fn read_tracker(input: Input, options: &InputOptions) -> Result<Tracker, String> {
    let Input { name, reader } = input;
    let limits = options.limits();
    let mut tracker = Tracker::with_limits(limits).in_mode(options.mode());
    let mut lines = CallLines::default();
    for item in Reader::new(reader).max_line_bytes(limits.max_line_bytes) {
        let (line, record) = item.map_err(|e| located(&name, &e))?;
        match tracker.append(record.clone()) {
            Ok(_) => lines.accepted(&record, line),
            Err(e) => return Err(format!("{name}:{line}: {}", lines.explain(&e))),
        }
    }
    Ok(tracker)
}

/// A log read with its payloads, and the input line of each entry.
pub(crate) struct Read {
    /// The entries, in log order.
    pub(crate) entries: Vec<Entry>,
    /// `lines[i]` is the 1-based input line of `entries[i]`.
    pub(crate) lines: Vec<usize>,
}

impl Read {
    /// The input line of record `at`, or one past the last line for `at == len`.
    pub(crate) fn line(&self, at: usize) -> usize {
        self.lines
            .get(at)
            .copied()
            .unwrap_or_else(|| self.lines.last().map_or(1, |l| l + 1))
    }
}

/// Reads a whole log with its payloads, in `format`, without judging its pairing
/// (a broken log is still read), but held to `limits` as `cut` is (see
/// [`CapGauge`]). The one place that knows the input formats: a new format is a new
/// arm here. Errors read `FILE:LINE: what is wrong`.
pub(crate) fn read_entries(input: Input, format: Format, limits: Limits) -> Result<Read, String> {
    let Input { name, reader } = input;
    let mut entries = Vec::new();
    let mut lines = Vec::new();
    let mut gauge = CapGauge::new(limits);
    match format {
        Format::Records => {
            let reader = Reader::new(reader).max_line_bytes(limits.max_line_bytes);
            for item in reader.entries() {
                let (line, entry) = item.map_err(|e| located(&name, &e))?;
                gauge
                    .admit(&entry.record)
                    .map_err(|e| format!("{name}:{line}: {}", cap_message(&e)))?;
                entries.push(entry);
                lines.push(line);
            }
        }
    }
    Ok(Read { entries, lines })
}

/// Reads a whole log with its payloads into a [`Log`] under the caps and mode of
/// `options`, for compacting it. Returns the name to print in messages and the log.
/// Errors read `FILE:LINE: what is wrong`; a repeated call id names the earlier line.
pub(crate) fn read_log(
    input: Input,
    format: Format,
    options: &InputOptions,
) -> Result<(String, Log), String> {
    let Input { name, reader } = input;
    let limits = options.limits();
    let mut log = Log::with_limits(limits, options.mode());
    let mut lines = CallLines::default();
    match format {
        Format::Records => {
            let reader = Reader::new(reader).max_line_bytes(limits.max_line_bytes);
            for item in reader.entries() {
                let (line, entry) = item.map_err(|e| located(&name, &e))?;
                let record = entry.record.clone();
                match log.append(entry) {
                    Ok(_) => lines.accepted(&record, line),
                    Err(e) => return Err(format!("{name}:{line}: {}", lines.explain(&e))),
                }
            }
        }
    }
    Ok((name, log))
}

/// `FILE:LINE: what is wrong` for a records read error.
fn located(name: &str, e: &cutpoint::jsonl::ReadError) -> String {
    let line = e.line();
    let text = e.to_string();
    let rest = text
        .strip_prefix(&format!("line {line}: "))
        .unwrap_or(&text);
    format!("{name}:{line}: {rest}")
}

/// Prints `message` on stderr and returns the bad-input exit status.
pub(crate) fn bad_input(message: &str) -> ExitCode {
    eprintln!("{message}");
    ExitCode::from(super::EXIT_BAD_INPUT)
}
