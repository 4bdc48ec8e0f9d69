//! Tokens reclaimed by each compaction strategy and by the presets on real transcripts,
//! as the markdown table in `docs/strategies.md`.
//!
//! ```sh
//! cargo run --release --example strategy_table -- tests/fixtures/transcripts
//! ```
//!
//! Each transcript is read in its own format (tokens: a quarter of each block's JSON
//! bytes) into a compaction log. Each strategy runs alone with its defaults, the first
//! message pinned (and the message that opens the live history after a compaction
//! boundary), no target: everything it may. Each preset runs as a pipeline whose budget
//! is the transcript's own size, so its gentle stages (above 50%) and aggressive ones
//! (above 80%) fire. Every result is written back in the transcript's format and read
//! again; the table says "rules!" if that broke a provider rule the input kept (it
//! never has) and "—" with the reason when the strategy could not reclaim anything.
//! Deterministic: the same files give the same table.

use std::collections::BTreeSet;
use std::path::Path;

use cutpoint::compact::pipeline::Preset;
use cutpoint::compact::strategy::{Floors, Goal, Kind, StepReport, Strategy};
use cutpoint::format::{self, ByteEstimate, Transcript, check_rules};
use cutpoint::testing::writers::{TranscriptLog, log_of, write};

/// The cell for a run that left `after` of `before` tokens, checked by writing `steps`
/// back into the transcript.
fn cell(
    t: &Transcript,
    text: &str,
    built: &TranscriptLog,
    steps: &[&StepReport],
    after: &cutpoint::compact::Log,
) -> String {
    let before = built.log.tracker().total_tokens();
    let now = after.tracker().total_tokens();
    let out = match write(t, text, built, steps, after) {
        Ok(out) => out,
        Err(e) => return format!("error: {e}"),
    };
    let back = match format::read(&out, t.format, &ByteEstimate) {
        Ok(back) => back,
        Err(e) => return format!("unreadable: {e}"),
    };
    let kept: BTreeSet<&str> = check_rules(t).iter().map(|v| v.rule.name()).collect();
    if check_rules(&back)
        .iter()
        .any(|v| !kept.contains(v.rule.name()))
    {
        return "rules!".to_owned();
    }
    let reclaimed = before - now;
    format!(
        "{reclaimed} ({:.0}%)",
        100.0 * reclaimed as f64 / before.max(1) as f64
    )
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "tests/fixtures/transcripts".to_owned());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x != "md"))
        .collect();
    files.sort();
    print!("| transcript | tokens |");
    for kind in Kind::ALL {
        print!(" {kind} |");
    }
    for preset in Preset::ALL {
        print!(" {preset} |");
    }
    println!();
    println!(
        "|---|---|{}",
        "---|".repeat(Kind::ALL.len() + Preset::ALL.len())
    );
    for path in files {
        let name = Path::new(&path)
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let t = match format::detect(&text).and_then(|f| format::read(&text, f, &ByteEstimate)) {
            Ok(t) => t,
            Err(_) => {
                println!(
                    "| {name} | not a supported format |{}",
                    " |".repeat(Kind::ALL.len() + Preset::ALL.len())
                );
                continue;
            }
        };
        let built = match log_of(&t) {
            Ok(b) => b,
            Err(e) => {
                println!("| {name} | {e} |");
                continue;
            }
        };
        let total = built.log.tracker().total_tokens();
        print!("| {name} | {total} |");
        let floors = Floors::none().keep_head(built.pinned.max(1));
        for kind in Kind::ALL {
            let mut log = built.log.clone();
            match Strategy::default_of(kind).run(&mut log, &Goal::within(floors)) {
                Ok(r) => print!(" {} |", cell(&t, &text, &built, &[&r], &log)),
                Err(none) => print!(" — ({}) |", none.reason.name()),
            }
        }
        for preset in Preset::ALL {
            let mut pipeline = preset.pipeline(total);
            pipeline.floors.keep_head = pipeline.floors.keep_head.max(built.pinned);
            let mut log = built.log.clone();
            let report = pipeline.run(&mut log);
            let steps: Vec<&StepReport> = report.ran().collect();
            print!(" {} |", cell(&t, &text, &built, &steps, &log));
        }
        println!();
    }
}
