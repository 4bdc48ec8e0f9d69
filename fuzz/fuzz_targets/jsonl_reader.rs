//! Arbitrary bytes into the records JSONL reader, then into a tracker, as the CLI's
//! input path does: no panic, no hang, errors name a line inside the input, reading
//! stops at the first error, and what was read writes back to the same records.
//! The bytes are also tried as a tracker snapshot (JSON, checksum resealed): a restore
//! either fails with
//! an error or gives a tracker whose invariants hold and that goes on appending.
#![no_main]

use cutpoint::format::records::{Reader, write_line};
use cutpoint::{Limits, Mode, Record, Snapshot, Tracker};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&flags, data)) = data.split_first() else {
        return;
    };
    let lines = data.split(|&b| b == b'\n').count();
    let max_line = if flags & 1 == 1 { 64 } else { 1 << 20 };
    let mut limits = Limits::default();
    limits.max_call_id_bytes = 32;
    limits.max_open_calls = 8;
    let mode = if flags & 2 == 2 {
        Mode::Strict
    } else {
        Mode::Lenient
    };
    let mut tracker = Tracker::with_limits(limits).in_mode(mode);
    let mut records: Vec<Record> = Vec::new();
    let mut last_line = 0;
    let mut items = Reader::new(data).max_line_bytes(max_line);
    for item in &mut items {
        match item {
            Ok((line, record)) => {
                assert!(line > last_line && line <= lines, "line {line} of {lines}");
                last_line = line;
                if tracker.append(record.clone()).is_ok() {
                    records.push(record);
                }
                tracker.assert_invariants();
            }
            Err(e) => {
                assert!(e.line() >= 1 && e.line() <= lines.max(1), "{e} of {lines}");
                assert!(e.to_string().starts_with(&format!("line {}: ", e.line())));
                break;
            }
        }
    }
    assert!(items.next().is_none(), "reading stops after an error");
    let mut out = Vec::new();
    for r in &records {
        write_line(&mut out, r).expect("writing to a Vec");
    }
    let back: Vec<Record> = Reader::new(&out[..])
        .map(|r| r.expect("what was written reads back").1)
        .collect();
    assert_eq!(back, records);

    if let Ok(mut snapshot) = serde_json::from_slice::<Snapshot>(data) {
        // Past the checksum, to reach the consistency checks.
        snapshot.reseal();
        if let Ok(mut restored) = Tracker::restore(snapshot) {
            restored.assert_invariants();
            for r in [
                Record::tool_use("fuzz", 1),
                Record::tool_result("fuzz", 1),
                Record::user(1),
            ] {
                let _ = restored.append(r);
                restored.assert_invariants();
            }
        }
    }
});
