//! What the workspace's tests and benches share, so that each helper exists once: the cached
//! real models (skipped when missing, unless `GGUF_REQUIRE_MODELS=1`), the committed fixtures,
//! a seeded pseudo-random generator, the probe for the Python reference package, and small
//! helpers for files and reference data.
//!
//! Only ever a `[dev-dependencies]` entry (and xtask's, whose fixtures draw from the same
//! generator); never published.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub mod alloc;

/// Whether a missing real model or reference tool must fail the test rather than skip it:
/// `GGUF_REQUIRE_MODELS=1`, which CI sets.
pub fn required() -> bool {
    std::env::var("GGUF_REQUIRE_MODELS").is_ok_and(|v| v == "1")
}

/// The cached real model `name` (in `gguf_hub::cache_dir()`, where `gguf pull NAME` and
/// `cargo xtask models` put it), or `None`, after a note on stderr, for the caller to skip.
///
/// # Panics
///
/// When the model is missing and [`required`].
pub fn real_model(name: &str) -> Option<PathBuf> {
    cached(gguf_hub::cache_dir().join(format!("{name}.gguf")))
}

/// `path` if it exists; else a skip note, or with [`required`] a panic.
fn cached(path: PathBuf) -> Option<PathBuf> {
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

/// The path of a real legacy (pre-GGUF) file in the cache's `legacy/` directory
/// (`cargo xtask models` fetches them), if it is there.
///
/// # Panics
///
/// When the file is missing and [`required`].
pub fn legacy_file(name: &str) -> Option<PathBuf> {
    cached(gguf_hub::cache_dir().join("legacy").join(name))
}

/// The directory of a real Hugging Face checkpoint in the cache's `hf/` directory
/// (`cargo xtask models` fetches them), if it is there.
///
/// # Panics
///
/// When it is missing and [`required`].
pub fn hf_checkpoint(name: &str) -> Option<PathBuf> {
    cached(gguf_hub::cache_dir().join("hf").join(name))
}

/// Whether `python3 -c "import gguf, numpy"` works, so the tests against the reference
/// implementation (the Python `gguf` package) can run; a note on stderr when it does not.
///
/// # Panics
///
/// When it does not work and [`required`].
pub fn python_gguf_available() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "import gguf, numpy"])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok || !required(),
        "python3 with the gguf package is required (pip install gguf)"
    );
    if !ok {
        eprintln!("skipping: python3 -c 'import gguf' failed (pip install gguf)");
    }
    ok
}

/// The workspace's `fixtures/` directory (written by `cargo xtask fixtures`).
pub fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// The path of a file (or directory) of `fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    fixtures().join(name)
}

/// The bytes of a file of `fixtures/`.
///
/// # Panics
///
/// When it cannot be read, saying how to write the fixtures.
pub fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = fixture(name);
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `cargo xtask fixtures`)", path.display()))
}

/// The names in `dir`, sorted.
///
/// # Panics
///
/// When `dir` cannot be read.
pub fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Runs `cmd` to completion and returns its output.
///
/// # Panics
///
/// When it cannot start or does not succeed; the message is its stderr.
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{:?}: {e}", cmd.get_program()));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A JSON array of token ids, as the reference files store them.
///
/// # Panics
///
/// When `v` is not an array of unsigned integers.
pub fn token_ids(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array of ids: {v}"))
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect()
}

/// FNV-1a, 64-bit, as 16 hex digits: the hash the reference files record for their inputs.
pub fn fnv1a64(data: &[u8]) -> String {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for &b in data {
        h ^= b as u64;
        h = h.wrapping_mul(0x100_0000_01B3);
    }
    format!("{h:016x}")
}

/// A small deterministic pseudo-random generator (xorshift64*), so failures reproduce and
/// generated fixtures never change.
#[derive(Debug, Clone)]
pub struct Rng(pub u64);

impl Rng {
    /// A generator for `seed`, spread so that nearby seeds give unrelated streams (and never
    /// the all-zero state xorshift cannot leave).
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// The next 64 random bits.
    // Not `Iterator::next`: the stream never ends, and callers want the bits, not an `Option`.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A value in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    /// Uniform in [-1, 1), from 24 random bits (exactly representable).
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// `n` random bytes.
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generator_keeps_its_stream() {
        // Committed fixtures and the tests' inputs are drawn from it: these values must not
        // change (computed independently, in Python).
        let mut rng = Rng(1);
        assert_eq!(
            [rng.next(), rng.next(), rng.next()],
            [
                0x47E4_CE4B_896C_DD1D,
                0xABCF_A6A8_E079_651D,
                0xB9D1_0D8F_EB73_1F57
            ]
        );
        let mut rng = Rng::new(7);
        assert_eq!(rng.unit(), -0.194_370_87);
        assert_eq!(rng.0, 0xFDF5_31E0_8E88_EBE3);
    }

    #[test]
    fn fnv1a64_of_known_inputs() {
        assert_eq!(fnv1a64(b""), "cbf29ce484222325");
        assert_eq!(fnv1a64(b"a"), "af63dc4c8601ec8c");
    }
}
