//! Arbitrary bytes as a transcript of every provider format, as the CLI's and the
//! proxy's input path reads one: detection, each reader (a text that reads is no
//! `mismatch`), the provider rules, the legal cuts, the session's usage calibration,
//! and one summary within half the budget, whose output must read back in its own
//! format. No panic, no hang; every failure is an error value.
//!
//! Seeds (`fuzz/seeds/transcripts`): a small document of each JSON format written
//! for this target, and `head-of-NAME`, the first lines (under 3.5 KB) of real
//! transcript `tests/fixtures/transcripts/NAME`, whose origin and license
//! `tests/fixtures/transcripts/SOURCES.md` gives.
//!
//! Run: `cargo +nightly fuzz run transcripts` (from the repository root).
#![no_main]

use cutpoint::compact::Window;
use cutpoint::format::loaded::SummaryOptions;
use cutpoint::format::{self, ByteEstimate, Format, Loaded};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let detected = format::detect(text).ok();
    for f in Format::ALL {
        let Ok(t) = format::read(text, f, &ByteEstimate) else {
            continue;
        };
        // `read` asks a document whether it is of another kind only when it fails to
        // read: one that reads must be no mismatch.
        if let Some(e) = format::mismatch(text, f) {
            panic!("{f:?} read a text that mismatch calls {e}");
        }
        let _ = format::rules::check_messages(t.format, &t.messages);
        let _ = t.legal_message_cuts();
    }
    let Some(f) = detected else {
        return;
    };
    let Ok(loaded) = Loaded::read(text, f, &ByteEstimate) else {
        return;
    };
    let _ = loaded.calibrated_budget(1000);
    let budget = loaded.live_tokens() / 2;
    let opts = SummaryOptions::within(budget, Window::new(0));
    if let Ok(Some(done)) = loaded.summarize(&opts, &ByteEstimate) {
        // What a writer wrote reads back in its format.
        if let Err(e) = format::read(&done.summary.text, f, &ByteEstimate) {
            if f != Format::Records {
                panic!("a summary of {f:?} does not read back: {e}");
            }
        }
    }
});
