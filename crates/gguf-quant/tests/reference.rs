//! Bit-exactness against the Python `gguf` package (`gguf.quants`): dequantization of random
//! blocks of every type it supports (the i-quants are in iq_reference.rs), and quantization of
//! varied inputs for every type it can quantize.

mod common;

use common::{py_dequantize, py_quantize, same_bits};
use gguf_quant::{dequantize_row, quantize_row, GgmlType};
use gguf_test_support::{python_gguf_available, Rng};

/// Byte offsets of each type's f16 scale fields, which must hold finite values.
fn f16_fields(ty: GgmlType) -> &'static [usize] {
    use GgmlType::*;
    match ty {
        Q4_0 | Q5_0 | Q8_0 => &[0],
        Q4_1 | Q5_1 | Q4_K | Q5_K => &[0, 2],
        Q2_K => &[80, 82],
        Q3_K => &[108],
        Q6_K => &[208],
        TQ1_0 => &[52],
        TQ2_0 => &[64],
        _ => &[],
    }
}

/// `n` random blocks of `ty` whose scales are finite normal f16 values (2^-14 .. 2^4).
fn random_blocks(ty: GgmlType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let size = ty.type_size() as usize;
    let mut bytes = rng.bytes(n * size);
    for block in bytes.chunks_exact_mut(size) {
        for &at in f16_fields(ty) {
            let exponent = 1 + rng.below(19) as u16; // biased exponent 1..=19
            let bits =
                ((rng.next() as u16) & 0x8000) | (exponent << 10) | (rng.next() as u16 & 0x3FF);
            block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
        }
    }
    bytes
}

#[test]
fn dequantize_matches_gguf_py() {
    if !python_gguf_available() {
        return;
    }
    use GgmlType::*;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0xD15EA5E);
    for ty in [
        F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, TQ1_0, TQ2_0, MXFP4,
        NVFP4,
    ] {
        let blocks = if ty.block_size() == 1 { 4096 } else { 512 };
        let bytes = random_blocks(ty, blocks, &mut rng);
        let expected = py_dequantize(ty.name(), &bytes, dir.path());
        let mut ours = vec![0f32; blocks * ty.block_size() as usize];
        dequantize_row(ty, &bytes, &mut ours).unwrap();
        assert_eq!(ours.len(), expected.len(), "{ty}");
        for (i, (a, b)) in ours.iter().zip(&expected).enumerate() {
            assert!(
                same_bits(*a, *b),
                "{ty}: element {i}: ours {a:e} ({:#x}), gguf-py {b:e} ({:#x})",
                a.to_bits(),
                b.to_bits()
            );
        }
    }
}

/// Inputs that exercise the quantizers: ordinary values, zeros, constants, ties, huge and tiny
/// (subnormal) magnitudes, one outlier per block.
fn varied_inputs(block: usize, rng: &mut Rng) -> Vec<f32> {
    let mut v = Vec::new();
    for kind in 0..12 {
        for _ in 0..8 {
            let start = v.len();
            for j in 0..block {
                let x = match kind {
                    0 => rng.unit(),
                    1 => rng.unit() * 1000.0,
                    2 => 0.0,
                    3 => 0.75,
                    4 => -3.5,
                    5 => rng.unit() * 1e-3,
                    6 => rng.unit() * 1e-40, // subnormal
                    7 => rng.unit() * 3e4,
                    8 => (rng.below(5) as f32 - 2.0) * 0.5, // exact ties
                    9 => {
                        if j == 7 {
                            100.0
                        } else {
                            rng.unit()
                        }
                    }
                    10 => (j as f32 - block as f32 / 2.0) / 8.0,
                    _ => rng.unit() * rng.unit() * 20.0,
                };
                v.push(x);
            }
            if kind == 9 {
                v[start + 3] = -100.0; // same magnitude as the maximum, later
            }
        }
    }
    v
}

#[test]
fn quantize_matches_gguf_py() {
    if !python_gguf_available() {
        return;
    }
    use GgmlType::*;
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x0B5E55ED);
    for ty in [F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, TQ1_0, TQ2_0, MXFP4] {
        let block = if ty.block_size() == 1 {
            32
        } else {
            ty.block_size() as usize
        };
        let x = varied_inputs(block, &mut rng);
        let expected = py_quantize(ty.name(), &x, dir.path());
        let mut ours = vec![0u8; expected.len()];
        quantize_row(ty, &x, &mut ours).unwrap();
        let size = ty.type_size() as usize * (block / ty.block_size() as usize);
        for (i, (a, b)) in ours.chunks(size).zip(expected.chunks(size)).enumerate() {
            assert_eq!(
                a,
                b,
                "{ty}: block {i} of input {:?}",
                &x[i * block..(i + 1) * block]
            );
        }
    }
}
