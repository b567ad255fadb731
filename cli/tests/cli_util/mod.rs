//! The `connect-offsets` binary run as a user runs it (without `CONNECT_OFFSETS_STORE` from the
//! environment), and what the command-line tests check of its output.
#![allow(dead_code)]

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

/// `connect-offsets ARGS`.
pub fn cli(args: &[&str]) -> Output {
    command(args).output().expect("run connect-offsets")
}

/// `connect-offsets ARGS` with `input` on its stdin.
pub fn cli_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run connect-offsets");
    child.stdin.take().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `connect-offsets ARGS`: (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (i32, String, String) {
    let out = cli(args);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Exit 0; returns stdout.
pub fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        text(&out.stderr)
    );
    text(&out.stdout)
}

/// Exit 1 and an error naming `what`; returns stderr.
pub fn refused(out: &Output, what: &str) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(what), "expected `{what}` in: {err}");
    err
}

fn command(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_connect-offsets"));
    c.args(args).env_remove("CONNECT_OFFSETS_STORE");
    c
}
