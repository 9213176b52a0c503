//! The i-quant kernels against the reference, the Python `gguf` package: a few hundred
//! pseudo-random blocks of each type (finite normal f16 scales, every other bit random),
//! dequantized by both and compared bit for bit. Skipped when `python3 -c "import gguf"` fails,
//! unless GGUF_REQUIRE_MODELS=1.

mod common;

use common::py_dequantize;
use gguf_quant::{dequantize_row, GgmlType};
use gguf_test_support::{python_gguf_available, Rng};

const TYPES: [GgmlType; 9] = [
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
];

/// Random blocks per type, plus the two all-zero and all-ones blocks.
const RANDOM_BLOCKS: usize = 400;

/// A finite normal f16 of either sign with magnitude in [2^-10, 2^4).
fn scale_bits(rng: &mut Rng) -> u16 {
    let r = rng.next();
    let sign = ((r >> 40) & 1) as u16;
    let exponent = 5 + (r >> 20) % 14; // biased: 2^-10 ..= 2^3
    let mantissa = (r & 0x3ff) as u16;
    (sign << 15) | ((exponent as u16) << 10) | mantissa
}

/// Stores the f16 scale `bits` in a block of `ty`.
fn set_scale(ty: GgmlType, block: &mut [u8], bits: u16) {
    if ty == GgmlType::IQ1_M {
        // The top nibble of each of the four LE u16 `scales` (bytes 48..56) holds one nibble of
        // the f16, lowest first; the other 12 bits of each are the 3-bit sub-block scales.
        for k in 0..4 {
            let at = 48 + 2 * k + 1;
            let nibble = ((bits >> (4 * k)) & 0xf) as u8;
            block[at] = (block[at] & 0x0f) | (nibble << 4);
        }
    } else {
        block[..2].copy_from_slice(&bits.to_le_bytes());
    }
}

fn blocks(ty: GgmlType, seed: u64) -> Vec<u8> {
    let ts = ty.type_size() as usize;
    let mut rng = Rng(seed);
    let mut bytes = Vec::with_capacity((RANDOM_BLOCKS + 2) * ts);
    // Edge blocks: all index/sign/scale bits clear, then all set (scale 1.0, resp. -0.5).
    for (fill, scale) in [(0x00u8, 0x3c00u16), (0xff, 0xb800)] {
        let mut b = vec![fill; ts];
        set_scale(ty, &mut b, scale);
        bytes.extend_from_slice(&b);
    }
    for _ in 0..RANDOM_BLOCKS {
        let mut b: Vec<u8> = (0..ts).map(|_| rng.next() as u8).collect();
        let s = scale_bits(&mut rng);
        set_scale(ty, &mut b, s);
        bytes.extend_from_slice(&b);
    }
    bytes
}

#[test]
fn iquants_match_gguf_py_bit_for_bit() {
    if !python_gguf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    for (i, ty) in TYPES.into_iter().enumerate() {
        let bytes = blocks(ty, 0x9E37_79B9_7F4A_7C15 ^ (i as u64 + 1));
        let n = bytes.len() / ty.type_size() as usize * ty.block_size() as usize;
        let mut ours = vec![0f32; n];
        dequantize_row(ty, &bytes, &mut ours).unwrap();
        let theirs = py_dequantize(ty.name(), &bytes, dir.path());
        assert_eq!(theirs.len(), n, "{}: reference length", ty.name());
        assert!(
            ours.iter().all(|v| v.is_finite()),
            "{}: non-finite output",
            ty.name()
        );
        let bad: Vec<usize> = (0..n)
            .filter(|&j| ours[j].to_bits() != theirs[j].to_bits())
            .collect();
        if let Some(&j) = bad.first() {
            let bs = ty.block_size() as usize;
            failures.push(format!(
                "{}: {} of {n} values differ; first at block {} element {}: ours {:e} ({:#010x}), gguf-py {:e} ({:#010x})",
                ty.name(),
                bad.len(),
                j / bs,
                j % bs,
                ours[j],
                ours[j].to_bits(),
                theirs[j],
                theirs[j].to_bits(),
            ));
        } else {
            eprintln!(
                "{}: {} blocks, {n} values bit-exact",
                ty.name(),
                RANDOM_BLOCKS + 2
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
