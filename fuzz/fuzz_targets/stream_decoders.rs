//! Arbitrary bytes, pushed in arbitrary splits, into each of the four stream decoders:
//! no panic, no hang, buffering bounded by the caps, the same items and error as one
//! chunk, errors naming an event and a byte inside the input, and the items feed a
//! tracker and a compaction log whose invariants hold (or are refused whole).
#![no_main]

use cutpoint::Tracker;
use cutpoint::compact::Log;
use cutpoint::stream::decode::{Caps, Decoder, Feed, StreamFormat, decode_all};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&seed, data)) = data.split_first() else {
        return;
    };
    let mut caps = Caps::default();
    caps.max_event_bytes = 512;
    caps.max_record_bytes = 1024;
    caps.max_calls = 8;
    for format in StreamFormat::ALL {
        // Split points from the seed byte: chunks of 1..=16 bytes, varying.
        let mut decoder = Decoder::new(format).with_caps(caps);
        let mut items = Vec::new();
        let mut error = None;
        let mut at = 0;
        let mut step = usize::from(seed % 16) + 1;
        while at < data.len() && error.is_none() {
            let end = (at + step).min(data.len());
            decoder.push(&data[at..end]);
            at = end;
            step = step % 16 + 1;
            assert!(decoder.buffered() <= 512 + 16 + 3, "{}", decoder.buffered());
            loop {
                match decoder.next() {
                    Ok(Some(item)) => items.push(item),
                    Ok(None) => break,
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
        }
        if error.is_none() {
            decoder.finish();
            loop {
                match decoder.next() {
                    Ok(Some(item)) => items.push(item),
                    Ok(None) => break,
                    Err(e) => {
                        error = Some(e);
                        break;
                    }
                }
            }
        }
        if let Some(e) = &error {
            assert!(e.offset() <= data.len() as u64, "{e}");
            assert!(e.event() >= 1, "{e}");
        }
        // One chunk, default caps: the same, unless a cap stopped the split run.
        if !matches!(error, Some(cutpoint::stream::decode::StreamError::TooLarge { .. })) {
            let whole = decode_all(format, data);
            if !matches!(whole.1, Some(cutpoint::stream::decode::StreamError::TooLarge { .. })) {
                assert_eq!((items.clone(), error.clone()), whole);
            }
        }
        let mut tracker = Tracker::new();
        let mut log = Log::new();
        for item in &items {
            let a = tracker.feed(item).is_ok();
            let b = log.feed(item).is_ok();
            assert_eq!(a, b);
            tracker.assert_invariants();
            log.assert_invariants();
        }
        let _ = log.abort_open();
        log.assert_invariants();
    }
});
