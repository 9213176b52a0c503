//! Shared by the tests that use the real models.

use std::path::PathBuf;

/// The cached real model `name` (`$GGUF_CACHE` or `~/.cache/gguf`), or `None` (the test is
/// skipped) when it is missing, unless `GGUF_REQUIRE_MODELS=1`, where that fails.
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
        std::env::var("GGUF_REQUIRE_MODELS").as_deref() != Ok("1"),
        "{} is missing and GGUF_REQUIRE_MODELS=1",
        path.display()
    );
    eprintln!(
        "skipping: {} not cached (run `cargo xtask models`)",
        path.display()
    );
    None
}
