//! What the `gguf` binary's tests share beyond `gguf-test-support`.

use std::process::Command;

/// The `gguf` binary under test.
pub fn gguf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gguf"))
}
