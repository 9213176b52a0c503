//! Test support shared by the per-ISA kernel tests: random operands and the bound within
//! which a SIMD kernel must agree with its scalar twin.

use super::{kernel_for, quantize_activations, vec_dot_type, Isa};
use crate::GgmlType;

/// xorshift64, so failures reproduce.
pub(crate) struct Rng(pub u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Uniform in [-1, 1).
    pub(crate) fn unit(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}

/// Random weight blocks whose f16 scales (at `scale_offsets`) are finite, 2^-10 .. 2^2.
pub(crate) fn weights(ty: GgmlType, n: usize, scale_offsets: &[usize], rng: &mut Rng) -> Vec<u8> {
    let size = ty.type_size() as usize;
    let mut w: Vec<u8> = (0..n / ty.block_size() as usize * size)
        .map(|_| rng.next() as u8)
        .collect();
    for block in w.chunks_exact_mut(size) {
        for &at in scale_offsets {
            let bits = (5 + (rng.next() % 12) as u16) << 10 | (rng.next() as u16 & 0x83FF);
            block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
        }
    }
    w
}

/// Activations for weights of `ty`: `n` random values in [-4, 4) quantized to its
/// `vec_dot_type`.
pub(crate) fn activations(ty: GgmlType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let x: Vec<f32> = (0..n).map(|_| rng.unit() * 4.0).collect();
    let mut a = Vec::new();
    quantize_activations(ty, &x, &mut a).unwrap();
    a
}

/// Asserts that `simd`, a SIMD kernel's result for (`w`, `a`), agrees with the scalar twin.
///
/// SIMD and scalar kernels compute the same block terms (exact integer sums times the same
/// scale products) and differ only in the order the float terms are added. Reordering a sum of
/// `k` terms changes it by at most about k·ε·Σ|terms|; the terms are bounded by Σ|wᵢ·aᵢ| over
/// the dequantized values plus the K-quants' separate min terms, so we allow 1e-4 of that
/// magnitude (k ≤ 128 blocks here gives ~1.5e-5 in theory; the rest covers min-term
/// cancellation). Measured differences are around 1e-8 of it.
pub(crate) fn assert_within_reordering_bound(
    ty: GgmlType,
    n: usize,
    w: &[u8],
    a: &[u8],
    simd: f32,
    isa: &str,
) {
    let scalar = kernel_for(ty, Isa::Scalar).expect("scalar twin")(n, w, a);
    let mut wf = vec![0f32; n];
    let mut af = vec![0f32; n];
    crate::dequantize_row(ty, w, &mut wf).unwrap();
    crate::dequantize_row(vec_dot_type(ty), a, &mut af).unwrap();
    let magnitude: f64 = wf
        .iter()
        .zip(&af)
        .map(|(p, q)| f64::from(p.abs()) * f64::from(q.abs()))
        .sum();
    let bound = 1e-4 * (magnitude + f64::from(scalar.abs())) + 1e-30;
    assert!(
        (f64::from(scalar) - f64::from(simd)).abs() <= bound,
        "{ty} n={n}: scalar {scalar} vs {isa} {simd} (bound {bound:e})"
    );
}

/// Rows of 4096 activations that exercise an activation quantizer: several magnitudes
/// (subnormal to large), ties between +m and -m (the first sets the sign), values at exactly
/// half a step, zeros, a constant, and NaN and infinities.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))] // only x86_64 has SIMD quantizers yet
pub(crate) fn activation_test_rows(rng: &mut Rng) -> Vec<Vec<f32>> {
    let mut rows: Vec<Vec<f32>> = [1.0f32, 1e-3, 300.0, 3e4, 1e-40, 1e-38]
        .into_iter()
        .map(|scale| (0..4096).map(|_| rng.unit() * scale).collect())
        .collect();
    let mut ties: Vec<f32> = (0..4096).map(|_| rng.unit()).collect();
    ties[7] = -3.0;
    ties[9] = 3.0;
    ties[300] = 3.0;
    ties[301] = -3.0;
    rows.push(ties);
    rows.push(
        (0..4096)
            .map(|i| ((i % 255) as f32 - 127.0) * 0.5)
            .collect(),
    );
    rows.push(vec![0.0; 4096]);
    rows.push(vec![-2.5; 4096]);
    let mut special: Vec<f32> = (0..4096).map(|_| rng.unit()).collect();
    special[5] = f32::NAN;
    special[100] = f32::INFINITY;
    special[200] = f32::NEG_INFINITY;
    special[600] = f32::INFINITY;
    special[1200] = f32::NEG_INFINITY;
    rows.push(special);
    rows
}

/// Asserts that an activation quantizer wrote the same bytes as `ty`'s reference quantizer for
/// `x`, naming the first differing block and byte.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn assert_same_as_reference(ty: GgmlType, x: &[f32], ours: &[u8]) {
    let mut reference = vec![0u8; ours.len()];
    crate::quantize_row(ty, x, &mut reference).unwrap();
    let size = ty.type_size() as usize;
    if let Some(b) = (0..ours.len() / size)
        .find(|&b| ours[b * size..(b + 1) * size] != reference[b * size..(b + 1) * size])
    {
        let at = (0..size)
            .find(|&i| ours[b * size + i] != reference[b * size + i])
            .unwrap_or(0);
        panic!(
            "{ty}: block {b}, byte {at}: ours {} reference {} (input {:?})",
            ours[b * size + at],
            reference[b * size + at],
            &x[b * ty.block_size() as usize..(b + 1) * ty.block_size() as usize]
        );
    }
}
