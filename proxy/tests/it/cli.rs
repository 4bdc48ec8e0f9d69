//! The `cutpoint-proxy` binary's arguments.

/// The compact mode's flags given without `--mode compact` (the default mode is
/// check) are refused by name, exit 2, before anything listens: the proxy used to
/// start in check mode and never compact, as if the budget had not been given.
#[test]
fn compact_flags_without_the_compact_mode_are_refused() {
    use std::process::Command;

    for (mode, flags) in [
        (None, &["--budget", "1000"][..]),
        (Some("repair"), &["--preset", "gentle"][..]),
        (
            Some("check"),
            &["--context-window", "1000", "--max-output", "10"][..],
        ),
    ] {
        let mut args = vec![
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "http://127.0.0.1:9",
        ];
        if let Some(mode) = mode {
            args.extend(["--mode", mode]);
        }
        args.extend(flags);
        let out = Command::new(env!("CARGO_BIN_EXE_cutpoint-proxy"))
            .args(&args)
            .env("RUST_LOG", "error")
            .output()
            .expect("the proxy binary runs");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(&format!(
                "{} applies to --mode compact, and the mode is {}",
                flags[0],
                mode.unwrap_or("check")
            )),
            "{args:?}: {err}"
        );
    }
}
