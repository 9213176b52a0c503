//! Shared helpers for the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;

/// The workspace's `fixtures/` directory.
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

pub fn fixture(name: &str) -> Vec<u8> {
    let path = fixtures().join(name);
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures`)", path.display()))
}

/// Whether a missing model or reference tool must fail the test rather than skip it (CI sets it).
pub fn required() -> bool {
    std::env::var("GGUF_REQUIRE_MODELS").is_ok_and(|v| v == "1")
}

/// A cached real model (`gguf pull NAME` / `cargo xtask models` put it there), or `None` to skip.
pub fn real_model(name: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os("GGUF_CACHE").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/gguf"),
    };
    let path = dir.join(format!("{name}.gguf"));
    if path.exists() {
        return Some(path);
    }
    assert!(
        !required(),
        "{} is missing and GGUF_REQUIRE_MODELS=1: run `cargo xtask models`",
        path.display()
    );
    eprintln!(
        "skipping: {} not cached (run `cargo xtask models`)",
        path.display()
    );
    None
}

/// A small deterministic pseudo-random generator (xorshift64*), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}
