//! `cutpoint bench`: every measure is printed, as a number, and bad sizes are refused.
//! No timing is asserted: only that each line is there and parses.

use std::process::Command;

fn bench(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_cutpoint"))
        .arg("bench")
        .args(args)
        .output()
        .expect("the binary runs")
}

/// The first number after `label` on its line.
fn number_after(out: &str, label: &str) -> f64 {
    let line = out
        .lines()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no line {label:?} in:\n{out}"));
    line[label.len()..]
        .split_whitespace()
        .find_map(|w| w.trim_end_matches(['x', ':', ',']).parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no number on {line:?}"))
}

#[test]
fn prints_every_measure_for_the_requested_size() {
    let out = bench(&["--records", "3000", "--reference-records", "400"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = String::from_utf8(out.stdout).expect("utf-8");
    assert_eq!(number_after(&out, "session"), 3000.0, "{out}");
    for label in [
        "append, realistic (string call ids)",
        "append, without call ids",
        "select_legal_cut at 3000 records",
        "memory (Tracker::heap_bytes)",
        "reference rescan at 400 records",
    ] {
        let value = number_after(&out, label);
        assert!(value.is_finite() && value > 0.0, "{label}: {value}\n{out}");
    }
    // Bytes per record is at least the 8-byte prefix sum each record costs.
    assert!(
        number_after(&out, "memory (Tracker::heap_bytes)") >= 8.0,
        "{out}"
    );
}

#[test]
fn a_session_larger_than_the_chase_is_also_given_in_loads_of_its_size() {
    // 120,000 records hold more than 1 MiB of tracker.
    let args = ["--records", "120000", "--reference-records", "100"];
    let out = bench(&[&args[..], &["--chase-mib", "1"]].concat());
    assert!(out.status.success());
    let out = String::from_utf8(out.stdout).expect("utf-8");
    let unit = number_after(&out, "one dependent load at the session's size");
    assert!(unit.is_finite() && unit > 0.0, "{out}");
    let line = out
        .lines()
        .find(|l| l.ends_with("loads of the session's size"))
        .unwrap_or_else(|| panic!("no query in loads of the session's size:\n{out}"));
    assert!(
        line.starts_with("select_legal_cut at 120000 records"),
        "{line}"
    );
    // The default chase (256 MiB) is larger than this session: no second unit.
    let out = bench(&args);
    assert!(out.status.success());
    let out = String::from_utf8(out.stdout).expect("utf-8");
    assert!(!out.contains("session's size"), "{out}");
}

#[test]
fn the_reference_size_is_capped_by_the_session() {
    let out = bench(&["--records", "200"]);
    assert!(out.status.success());
    let out = String::from_utf8(out.stdout).expect("utf-8");
    assert!(out.contains("reference rescan at 200 records"), "{out}");
}

#[test]
fn zero_records_is_refused() {
    let out = bench(&["--records", "0"]);
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--records"));
}
