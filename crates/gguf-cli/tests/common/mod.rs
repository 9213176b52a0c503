//! What the `gguf` binary's tests share.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `gguf` binary under test.
pub fn gguf() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gguf"))
}

/// A file of the repository's `fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
}

/// The names in `dir`, sorted.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
