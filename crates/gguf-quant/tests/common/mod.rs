//! Helpers shared by the reference tests (included with `mod common;`).
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

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
