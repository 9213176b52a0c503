//! Bit-exactness of the reference quantizers against ggml itself: `tests/data/<TYPE>.ref` is
//! what ggml's `quantize_row_<type>_ref` wrote for `tests/data/quant_input.f32` (see
//! `tests/data/README.md`). Every type listed must be implemented: a missing kernel fails.

use std::path::PathBuf;

use gguf_quant::{quantize_row, GgmlType};

/// Every type with a committed ggml reference output.
const TYPES: &[GgmlType] = &[
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::Q8_1,
    GgmlType::NVFP4,
    GgmlType::Q1_0,
    GgmlType::Q2_0,
    GgmlType::Q4_0,
    GgmlType::Q8_0,
    GgmlType::MXFP4,
];

/// The input's categories, in order, each `CATEGORY_LEN` values (8 blocks of 256); see
/// `tests/data/README.md`.
const CATEGORIES: &[&str] = &[
    "uniform [-1, 1)",
    "uniform x1000",
    "zeros",
    "constant",
    "multiples of 0.5",
    "tiny (1e-3)",
    "subnormal (1e-40)",
    "large (3e4)",
    "one outlier per block",
    "ramp",
    "product of two uniforms x20",
    "gaussian",
    "sub-blocks of 16 with mixed magnitudes",
    "positive",
    "negative",
    "small integers",
];
const CATEGORY_LEN: usize = 2048;

fn data(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn input() -> Vec<f32> {
    let bytes = data("quant_input.f32");
    assert_eq!(bytes.len(), CATEGORIES.len() * CATEGORY_LEN * 4);
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// Quantizes the whole input as one row and compares it with ggml's bytes; returns a
/// description of the first differing block, if any.
fn check(ty: GgmlType, x: &[f32]) -> Result<(), String> {
    let name = ty.name();
    let expected = data(&format!("{name}.ref"));
    let (bs, ts) = (ty.block_size() as usize, ty.type_size() as usize);
    assert_eq!(
        x.len() % bs,
        0,
        "{name}: input is not a whole number of blocks"
    );
    assert_eq!(
        expected.len(),
        x.len() / bs * ts,
        "{name}: reference file has the wrong length"
    );
    let mut out = vec![0u8; expected.len()];
    quantize_row(ty, x, &mut out).map_err(|e| format!("{name}: {e}"))?;
    let mismatched: Vec<usize> = out
        .chunks_exact(ts)
        .zip(expected.chunks_exact(ts))
        .enumerate()
        .filter(|(_, (a, b))| a != b)
        .map(|(i, _)| i)
        .collect();
    let Some(&first) = mismatched.first() else {
        return Ok(());
    };
    let (ours, theirs) = (
        &out[first * ts..(first + 1) * ts],
        &expected[first * ts..(first + 1) * ts],
    );
    Err(format!(
        "{name}: {} of {} blocks differ; first is block {first} (elements {}..{}, input \
         category \"{}\")\n  ours: {ours:02x?}\n  ggml: {theirs:02x?}",
        mismatched.len(),
        out.len() / ts,
        first * bs,
        (first + 1) * bs,
        CATEGORIES[first * bs / CATEGORY_LEN],
    ))
}

#[test]
fn quantize_row_matches_ggml_reference() {
    let x = input();
    let failures: Vec<String> = TYPES.iter().filter_map(|&ty| check(ty, &x).err()).collect();
    for f in &failures {
        eprintln!("{f}\n");
    }
    assert!(
        failures.is_empty(),
        "{} of {} types differ from ggml:\n{}",
        failures.len(),
        TYPES.len(),
        failures
            .iter()
            .map(|f| f.lines().next().unwrap_or_default())
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// IQ4_NL's all-zero blocks keep the previous block's levels, as in ggml; the reference file
/// only pins that down if the input does not start with one.
#[test]
fn reference_input_starts_with_a_nonzero_block() {
    let x = input();
    assert!(x[..32].iter().any(|&v| v.abs() >= 1e-15));
}

/// Dequantization of the types gguf-py lacks, bit for bit against ggml's `dequantize_row_*`
/// (vectors in tests/data/dequant/).
#[test]
fn dequantize_matches_ggml_where_gguf_py_has_no_reference() {
    let dir = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/dequant");
    for ty in [
        gguf_quant::GgmlType::Q1_0,
        gguf_quant::GgmlType::Q2_0,
        gguf_quant::GgmlType::Q8_K,
    ] {
        let blocks = std::fs::read(dir.join(format!("{}.blocks", ty.name()))).unwrap();
        let expected: Vec<f32> = std::fs::read(dir.join(format!("{}.f32", ty.name())))
            .unwrap()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let mut ours = vec![0f32; expected.len()];
        gguf_quant::dequantize_row(ty, &blocks, &mut ours).unwrap();
        for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{ty}: element {i}: ours {a}, ggml {b}"
            );
        }
    }
}
