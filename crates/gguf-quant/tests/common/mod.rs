//! Helpers shared by the reference tests (included with `mod common;`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Deterministic xorshift64*: failures reproduce.
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
    /// Uniform in [-1, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

pub fn required() -> bool {
    std::env::var("GGUF_REQUIRE_MODELS").is_ok_and(|v| v == "1")
}

/// Whether `python3 -c "import gguf"` works; panics when it does not and the reference is required.
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

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/quants.py")
}

fn run(mode: &str, type_name: &str, input: &[u8], dir: &Path) -> Vec<u8> {
    let (src, dst) = (
        dir.join(format!("{type_name}.in")),
        dir.join(format!("{type_name}.out")),
    );
    std::fs::write(&src, input).unwrap();
    let out = Command::new("python3")
        .arg(script())
        .args([mode, type_name])
        .arg(&src)
        .arg(&dst)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "quants.py {mode} {type_name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::read(&dst).unwrap()
}

/// gguf-py's dequantization of `blocks`.
pub fn py_dequantize(type_name: &str, blocks: &[u8], dir: &Path) -> Vec<f32> {
    run("dequantize", type_name, blocks, dir)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// gguf-py's quantization of `values`.
pub fn py_quantize(type_name: &str, values: &[f32], dir: &Path) -> Vec<u8> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    run("quantize", type_name, &bytes, dir)
}

/// Bitwise equality, except that any NaN equals any NaN.
pub fn same_bits(a: f32, b: f32) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())
}
