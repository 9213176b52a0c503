//! What the `gguf` binary's tests share beyond `gguf-test-support`.

// Each test file uses only part of this.
#![allow(dead_code)]

use std::process::Command;

/// The `gguf` binary under test.
pub fn gguf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gguf"))
}

/// Runs `cmd`, which must fail; its exit code and its stderr.
pub fn refused(cmd: &mut Command) -> (Option<i32>, String) {
    let o = cmd.output().unwrap();
    assert!(!o.status.success(), "{cmd:?} succeeded");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
