//! Every SIMD kernel against its scalar twin. The cases are the dispatch tables themselves:
//! each test walks the [`IsaKernels`] of every instruction set this CPU has (whatever
//! `GGUF_FORCE_ISA` says), so a kernel added to a table is tested without being listed
//! here, and one whose type has no rule here for random blocks, or whose quantizer has no
//! twin, fails the tests instead of going untested.
//!
//! One file per kind of kernel:
//!
//! - `dots`: the one-row dot products (legacy types, K-quants, i-quants: every type with a
//!   kernel) and the several-rows kernels;
//! - `legacy_gemm`: the GEMM tiles of the legacy types;
//! - `kquant_gemm`: the tiled GEMMs of the K-quants (and IQ4_XS);
//! - `activation_quant`: the activation quantizers;
//! - `vec_kernels`: the float kernels of [`crate::kernels::vec`] (f16 dot products and
//!   multiply-adds, `expf`, SwiGLU, the attention GEMM and softmax);
//! - `gelu`: GELU and GeGLU, on inputs that reach every branch of ggml's rules.
//!
//! The helpers here (random blocks of every type with their scales tamed, activations, the
//! row lengths that reach every tail, the reordering bound) are shared by all of them, and
//! by the ISA modules' own tests for what only they claim (NEON's K-quant kernels equal their
//! twins bit for bit).

mod activation_quant;
mod dots;
mod gelu;
mod kquant_gemm;
mod legacy_gemm;
mod vec_kernels;

use std::mem::offset_of;

use super::{kernel_for, simd, vec_dot_type, Isa, IsaKernels};
use crate::blocks::*;
use crate::GgmlType;

/// xorshift64, so failures reproduce. (Unit tests keep their own; the integration tests share
/// `tests/common`.)
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

/// The SIMD instruction sets this CPU has, with their tables.
fn simd_isas() -> Vec<(Isa, IsaKernels)> {
    Isa::ALL
        .into_iter()
        .filter_map(|isa| Some((isa, simd(isa)?)))
        .collect()
}

/// Every ggml type.
fn all_types() -> impl Iterator<Item = GgmlType> {
    (0..64u32).filter_map(GgmlType::from_id_opt)
}

/// A random f16 of magnitude 2^-10 .. 2^2 (either sign), as little-endian bytes.
fn random_scale(rng: &mut Rng) -> [u8; 2] {
    let bits = (5 + (rng.next() % 12) as u16) << 10 | (rng.next() as u16 & 0x83FF);
    bits.to_le_bytes()
}

/// Makes the scales of one random block of `ty` finite and moderate, so that dot products
/// are finite: each f16 field of its layout (`crate::blocks`) becomes a [`random_scale`].
/// Panics for a type without a rule, so that a new SIMD kernel cannot skip its test.
fn tame_block(ty: GgmlType, block: &mut [u8], rng: &mut Rng) {
    use GgmlType::*;
    let f16_fields = match ty {
        // Every F16 value is a "scale" (a block is one value); F32 and BF16 values are random
        // in [-1, 1).
        F16 => vec![0],
        F32 => {
            block.copy_from_slice(&rng.unit().to_le_bytes());
            return;
        }
        BF16 => {
            let bits = (rng.unit().to_bits() >> 16) as u16;
            block.copy_from_slice(&bits.to_le_bytes());
            return;
        }
        Q4_0 => vec![offset_of!(BlockQ4_0, d)],
        Q4_1 => vec![offset_of!(BlockQ4_1, d), offset_of!(BlockQ4_1, m)],
        Q5_0 => vec![offset_of!(BlockQ5_0, d)],
        Q5_1 => vec![offset_of!(BlockQ5_1, d), offset_of!(BlockQ5_1, m)],
        Q8_0 => vec![offset_of!(BlockQ8_0, d)],
        Q2_K => vec![offset_of!(BlockQ2K, d), offset_of!(BlockQ2K, dmin)],
        Q3_K => vec![offset_of!(BlockQ3K, d)],
        Q4_K => vec![offset_of!(BlockQ4K, d), offset_of!(BlockQ4K, dmin)],
        Q5_K => vec![offset_of!(BlockQ5K, d), offset_of!(BlockQ5K, dmin)],
        Q6_K => vec![offset_of!(BlockQ6K, d)],
        IQ2_XXS => vec![offset_of!(BlockIq2Xxs, d)],
        IQ2_XS => vec![offset_of!(BlockIq2Xs, d)],
        IQ2_S => vec![offset_of!(BlockIq2S, d)],
        IQ3_XXS => vec![offset_of!(BlockIq3Xxs, d)],
        IQ3_S => vec![offset_of!(BlockIq3S, d)],
        IQ1_S => vec![offset_of!(BlockIq1S, d)],
        IQ4_NL => vec![offset_of!(BlockIq4Nl, d)],
        IQ4_XS => vec![offset_of!(BlockIq4Xs, d)],
        TQ1_0 => vec![offset_of!(BlockTq1_0, d)],
        TQ2_0 => vec![offset_of!(BlockTq2_0, d)],
        Q1_0 => vec![offset_of!(BlockQ1_0, d)],
        Q2_0 => vec![offset_of!(BlockQ2_0, d)],
        // The f16 scale is spread over the top nibbles of the four u16 `scales`.
        IQ1_M => {
            let d = u16::from_le_bytes(random_scale(rng));
            for k in 0..4 {
                let hi = offset_of!(BlockIq1M, scales) + 2 * k + 1;
                block[hi] = (block[hi] & 0x0F) | (((d >> (4 * k)) & 0x0F) as u8) << 4;
            }
            return;
        }
        // E8M0 exponents 2^-10 .. 2^9.
        MXFP4 => {
            block[offset_of!(BlockMxfp4, e)] = 118 + (rng.next() % 20) as u8;
            return;
        }
        // UE4M3 scales below the NaN code 0x7F.
        NVFP4 => {
            for d in &mut block[offset_of!(BlockNvfp4, d)..][..4] {
                *d &= 0x6F;
            }
            return;
        }
        _ => panic!("{ty}: no rule for random blocks of this type in simd_tests::tame_block"),
    };
    for at in f16_fields {
        block[at..at + 2].copy_from_slice(&random_scale(rng));
    }
}

/// Random weight blocks of `ty` for `n` values, their scales tamed ([`tame_block`]).
pub(crate) fn weights(ty: GgmlType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let size = ty.type_size() as usize;
    let mut w: Vec<u8> = (0..n / ty.block_size() as usize * size)
        .map(|_| rng.next() as u8)
        .collect();
    for block in w.chunks_exact_mut(size) {
        tame_block(ty, block, rng);
    }
    w
}

/// Activations for weights of `ty`: `n` random values in [-4, 4) quantized to its
/// `vec_dot_type`.
pub(crate) fn activations(ty: GgmlType, n: usize, rng: &mut Rng) -> Vec<u8> {
    let x: Vec<f32> = (0..n).map(|_| rng.unit() * 4.0).collect();
    let mut a = Vec::new();
    super::quantize_activations(ty, &x, &mut a).unwrap();
    a
}

/// Calls `check(n, w, a)` on random weights of `ty` and activations, for rows of 1, 2, 3, 5,
/// 7, 8, 33, 45 and 128 blocks and of 256, 1024 and 4096 values, which reach every tail of
/// the kernels' multi-block steps.
pub(crate) fn for_random_rows(
    ty: GgmlType,
    rng: &mut Rng,
    mut check: impl FnMut(usize, &[u8], &[u8]),
) {
    let per = ty.block_size() as usize;
    let lengths = [1, 2, 3, 5, 7, 8, 33, 45, 128]
        .map(|k| k * per)
        .into_iter()
        .chain([256, 1024, 4096].into_iter().filter(|n| n % per == 0));
    for n in lengths {
        for _ in 0..10 {
            let w = weights(ty, n, rng);
            let a = activations(ty, n, rng);
            check(n, &w, &a);
        }
    }
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
    isa: Isa,
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
        "{ty} n={n}: scalar {scalar} vs {} {simd} (bound {bound:e})",
        isa.name()
    );
}

/// The random blocks are usable for every type with a dot kernel: finite when dequantized,
/// with a finite scalar dot product (so a SIMD kernel added for any of them is tested on
/// meaningful values).
#[test]
fn random_blocks_are_finite_for_every_type_with_a_kernel() {
    let mut rng = Rng(0xF1F1_7E57_0000_0001);
    for ty in all_types() {
        let Some(scalar) = kernel_for(ty, Isa::Scalar) else {
            continue;
        };
        let n = 4 * ty.block_size().max(256) as usize;
        let w = weights(ty, n, &mut rng);
        let a = activations(ty, n, &mut rng);
        let mut wf = vec![0f32; n];
        crate::dequantize_row(ty, &w, &mut wf).unwrap();
        assert!(wf.iter().all(|v| v.is_finite()), "{ty}: non-finite weights");
        assert!(scalar(n, &w, &a).is_finite(), "{ty}: non-finite dot");
    }
}
