//! Helpers shared by the tests that run the `cutpoint` binary.

use std::io::Write;
use std::process::{Command, Output, Stdio};

/// Runs the built `cutpoint` binary with `args`, feeding `stdin`, and waits for it.
pub(crate) fn cutpoint(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cutpoint"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    if let Some(mut input) = child.stdin.take() {
        // A binary that exits before reading all of stdin closes the pipe; that is
        // the binary's answer, not a test failure.
        let _ = input.write_all(stdin);
    }
    child.wait_with_output().expect("the binary ends")
}

/// Output bytes as text, lossily.
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path inside the workspace root (fixtures and examples live there, beside the
/// library).
pub(crate) fn root(path: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(path)
}

/// Runs `args` on `stdin` and checks that it exits with `code` and says `what` on
/// stderr. Returns the output for further checks.
pub(crate) fn exits(args: &[&str], stdin: &[u8], code: i32, what: &str) -> Output {
    let out = cutpoint(args, stdin);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{err}{}", text(&out.stdout));
    assert!(err.contains(what), "{err}");
    out
}
