//! Every SIMD kernel against its scalar twin. The cases are the dispatch tables themselves:
//! each test walks the [`IsaKernels`] of every instruction set this CPU has (whatever
//! `GGUF_FORCE_ISA` says), so a kernel added to a table is tested without being listed
//! here, and one whose type has no rule here for random blocks, or whose quantizer has no
//! twin, fails the tests instead of going untested.
//!
//! The ISA modules' own tests use the helpers below for what only they claim (NEON's K-quant
//! kernels equal their twins bit for bit).

use std::mem::offset_of;

use half::f16;

use super::{kernel_for, simd, vec_dot_type, GemmFn, Isa, IsaKernels};
use crate::blocks::*;
use crate::quant::QuantFn;
use crate::vec::VecKernels;
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

/// Every SIMD dot kernel against its scalar twin (see [`assert_within_reordering_bound`]).
#[test]
fn simd_dot_kernels_match_scalar_within_reordering_bound() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for (isa, k) in simd_isas() {
        let types: Vec<GgmlType> = all_types().filter(|&ty| (k.dot)(ty).is_some()).collect();
        assert!(!types.is_empty(), "{}: no dot kernels", isa.name());
        for ty in types {
            let simd = (k.dot)(ty).unwrap();
            for_random_rows(ty, &mut rng, |n, w, a| {
                assert_within_reordering_bound(ty, n, w, a, simd(n, w, a), isa);
            });
        }
    }
}

/// The x86 dot kernels (AVX2's, and the AVX-512 table's) equal the portable kernels in AVX2's
/// order (`lanes`, which the scalar ISA runs) bit for bit, so a machine without AVX2, or with
/// AVX-512, computes the same numbers for these types. (NEON's kernels keep their own order,
/// within the bound above.)
#[test]
fn x86_dot_kernels_equal_the_portable_ones_bit_for_bit() {
    let mut rng = Rng(0x1A2E_5000_0000_0001);
    for isa in [Isa::Avx2, Isa::AvxVnni, Isa::Avx512] {
        let Some(k) = simd(isa) else {
            eprintln!("skipping {}: not on this CPU", isa.name());
            continue;
        };
        let mut checked = 0;
        for ty in all_types() {
            let (Some(simd), Some(portable)) = ((k.dot)(ty), super::lanes::dot(ty)) else {
                continue;
            };
            for_random_rows(ty, &mut rng, |n, w, a| {
                let (s, p) = (simd(n, w, a), portable(n, w, a));
                assert_eq!(
                    s.to_bits(),
                    p.to_bits(),
                    "{ty} n={n}: {} {s} vs portable {p}",
                    isa.name()
                );
            });
            checked += 1;
        }
        assert_eq!(
            checked,
            12,
            "{}: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, Q2_K..Q6_K and IQ4_XS",
            isa.name()
        );
    }
}

/// Every several-rows kernel equals its ISA's one-row kernel bit for bit, row by row, for
/// counts of rows that fill the kernels' groups and leave a remainder.
#[test]
fn simd_rows_kernels_equal_their_one_row_kernels_bit_for_bit() {
    let mut rng = Rng(0x0BAD_5EED_1234_5678);
    for (isa, k) in simd_isas() {
        for ty in all_types() {
            let Some(rows) = (k.rows)(ty) else { continue };
            let dot = (k.dot)(ty).expect("a rows kernel without a one-row kernel");
            let n = 3 * ty.block_size() as usize;
            let row_bytes = crate::row_bytes(ty, n).unwrap();
            for count in [1, 3, 4, 9] {
                let w = weights(ty, n * count, &mut rng);
                let a = activations(ty, n, &mut rng);
                let mut out = vec![0f32; count];
                rows(n, &w, row_bytes, &a, &mut out);
                for (r, &y) in out.iter().enumerate() {
                    let one = dot(n, &w[r * row_bytes..(r + 1) * row_bytes], &a);
                    assert_eq!(
                        y.to_bits(),
                        one.to_bits(),
                        "{} {ty}: row {r} of {count}: {y} vs {one}",
                        isa.name()
                    );
                }
            }
        }
    }
}

/// Whether each output of llama.cpp's batched product of `ty` on this ISA is what its one-row
/// `vec_dot` gives, so that a GEMM kernel for it must equal the ISA's one-row kernel: Q4_1 and
/// Q5_1 (no tinyBLAS for them), and Q4_0, Q5_0 and Q8_0, whose AVX2 `vec_dot` sums in
/// tinyBLAS's order (one accumulator, the same lane sum). Not IQ4_NL, whose `vec_dot` pairs
/// its blocks into two accumulators.
fn batch_follows_vec_dot(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0
    )
}

/// `rows` random weight rows of `n` values of `ty` and `batch` activation rows, each row
/// followed by `pad` unused bytes: (weights, row stride, activations, activation stride).
fn gemm_operands(
    ty: GgmlType,
    n: usize,
    rows: usize,
    batch: usize,
    pad: usize,
    rng: &mut Rng,
) -> (Vec<u8>, usize, Vec<u8>, usize) {
    let row_bytes = crate::row_bytes(ty, n).unwrap() + pad;
    let act_row = crate::row_bytes(vec_dot_type(ty), n).unwrap() + pad;
    let mut w = Vec::with_capacity(rows * row_bytes);
    for _ in 0..rows {
        w.extend(weights(ty, n, rng));
        w.extend((0..pad).map(|_| rng.next() as u8));
    }
    let mut a = Vec::with_capacity(batch * act_row);
    for _ in 0..batch {
        a.extend(activations(ty, n, rng));
        a.extend((0..pad).map(|_| rng.next() as u8));
    }
    (w, row_bytes, a, act_row)
}

/// Runs a [`GemmFn`](super::GemmFn) into `batch` output rows of `rows` values.
fn run_gemm_legacy(
    gemm: super::GemmFn,
    n: usize,
    (w, row_bytes, a, act_row): (&[u8], usize, &[u8], usize),
    rows: usize,
    batch: usize,
) -> Vec<Vec<f32>> {
    let mut out = vec![vec![f32::NAN; rows]; batch];
    let mut slices: Vec<&mut [f32]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
    gemm(n, w, row_bytes, a, act_row, &mut slices);
    out
}

/// Every SIMD GEMM kernel equals its scalar twin (`lanes`) bit for bit on random shapes:
/// 1 to 18 blocks per row, batches of 2 to 9 activation rows, row counts that do not fill the
/// kernels' tiles, rows with and without padding. Its outputs do not depend on the tiling
/// either: the product of a few of the weight rows with two of the activation rows gives the
/// same bits. Where llama.cpp's batched products run its one-row `vec_dot`
/// ([`batch_follows_vec_dot`]), each output also equals the ISA's one-row kernel.
#[test]
fn simd_legacy_gemm_kernels_equal_their_twins_bit_for_bit() {
    let mut rng = Rng(0x6E33_0000_5EED_0001);
    for (isa, k) in simd_isas() {
        let name = isa.name();
        for ty in all_types() {
            let Some(gemm) = (k.gemm)(ty) else { continue };
            if super::kq_gemm::tiled_twin(ty).is_some() {
                continue; // the K-quants' test below
            }
            let twin = super::lanes::gemm(ty)
                .unwrap_or_else(|| panic!("{name}: a {ty} GEMM kernel without a scalar twin"));
            let shapes = [
                (1, 2),
                (3, 3),
                (5, 2),
                (7, 5),
                (4, 7),
                (13, 9),
                (8, 4),
                (9, 6),
            ];
            for blocks in [1, 2, 3, 7, 18] {
                let n = blocks * ty.block_size() as usize;
                for (case, &(rows, batch)) in shapes.iter().enumerate() {
                    let pad = if case % 2 == 1 { 6 } else { 0 };
                    let (w, rb, a, ar) = gemm_operands(ty, n, rows, batch, pad, &mut rng);
                    let ours = run_gemm_legacy(gemm, n, (&w, rb, &a, ar), rows, batch);
                    let theirs = run_gemm_legacy(twin, n, (&w, rb, &a, ar), rows, batch);
                    let bits = |o: &[Vec<f32>]| -> Vec<Vec<u32>> {
                        o.iter()
                            .map(|r| r.iter().map(|v| v.to_bits()).collect())
                            .collect()
                    };
                    assert_eq!(
                        bits(&ours),
                        bits(&theirs),
                        "{name} {ty}: {rows} rows x {batch}, {blocks} blocks: {ours:?} vs twin {theirs:?}"
                    );
                    // Weight rows r0.. (another tile alignment) against activation rows b and
                    // b0 (another batch).
                    let (r0, b0) = (rows / 2, batch - 1);
                    for b in 0..batch - 1 {
                        let mut pair = a[b * ar..(b + 1) * ar].to_vec();
                        pair.extend_from_slice(&a[b0 * ar..(b0 + 1) * ar]);
                        let part =
                            run_gemm_legacy(gemm, n, (&w[r0 * rb..], rb, &pair, ar), rows - r0, 2);
                        for (got, want) in part.iter().zip([&ours[b], &ours[b0]]) {
                            assert_eq!(
                                bits(std::slice::from_ref(got)),
                                bits(std::slice::from_ref(&want[r0..].to_vec())),
                                "{name} {ty}: rows {r0}.. with activation rows {b} and {b0}"
                            );
                        }
                    }
                    if batch_follows_vec_dot(ty) {
                        let dot = (k.dot)(ty).expect("a GEMM kernel without a one-row kernel");
                        for (b, o) in ours.iter().enumerate() {
                            for (r, y) in o.iter().enumerate() {
                                let one = dot(
                                    n,
                                    &w[r * rb..r * rb + rb - pad],
                                    &a[b * ar..b * ar + ar - pad],
                                );
                                assert_eq!(
                                    y.to_bits(),
                                    one.to_bits(),
                                    "{name} {ty}: row {r} x activation {b}: {y} vs one-row {one}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The scalar twin of `isa`'s GEMM kernel for weights of `ty`, and the batch from which the
/// kernel follows it (below, it equals the ISA's row-by-row kernels). Panics for a kernel
/// without one, so that it cannot ship untested.
fn gemm_twin(isa: Isa, ty: GgmlType) -> (GemmFn, usize) {
    match (isa, super::kq_gemm::tiled_twin(ty)) {
        (Isa::Avx2 | Isa::AvxVnni | Isa::Avx512, Some(twin)) => (twin, super::kq_gemm::MIN_BATCH),
        _ => panic!("{}: a {ty} GEMM kernel without a scalar twin", isa.name()),
    }
}

/// Weight rows `rows` of `w` against every activation row of `a` (`act_row` bytes each) with
/// `gemm`, as `matmul` calls it: `out[b][r]`.
fn run_gemm(
    gemm: GemmFn,
    n: usize,
    w: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    a: &[u8],
    act_row: usize,
) -> Vec<Vec<f32>> {
    let batch = a.len() / act_row;
    let mut out = vec![vec![f32::NAN; rows.len()]; batch];
    let mut views: Vec<&mut [f32]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
    gemm(
        n,
        &w[rows.start * row_bytes..],
        row_bytes,
        a,
        act_row,
        &mut views,
    );
    out
}

/// Every K-quant GEMM kernel equals its scalar twin bit for bit from the twin's batch floor up,
/// and the ISA's row-by-row kernels below it (AVX2's: the portable batched product at every
/// batch), on random shapes: batches of 2 to 20 activation
/// rows, weight rows that fill no tile evenly; and each result is the same whatever rows are
/// computed with it (so the thread split cannot change it).
#[test]
fn simd_gemm_kernels_equal_their_twins_bit_for_bit() {
    let mut rng = Rng(0x6E33_0000_7117_ED00);
    for (isa, k) in simd_isas() {
        for ty in all_types() {
            let Some(gemm) = (k.gemm)(ty) else { continue };
            if super::kq_gemm::tiled_twin(ty).is_none() {
                continue; // the legacy types' test above
            }
            let (twin, floor) = gemm_twin(isa, ty);
            // The scalar ISA's batched product, which must give the same bits at every batch.
            let portable = super::lanes::gemm(ty)
                .unwrap_or_else(|| panic!("{ty}: no portable batched product"));
            let per = ty.block_size() as usize;
            let act = vec_dot_type(ty);
            for (blocks, rows) in [(1, 1), (3, 5), (2, 17), (1, 35), (4, 9)] {
                let n = blocks * per.max(256);
                let row_bytes = crate::row_bytes(ty, n).unwrap();
                let act_row = crate::row_bytes(act, n).unwrap();
                let w = weights(ty, n * rows, &mut rng);
                for batch in 2..=20 {
                    let a: Vec<u8> = (0..batch)
                        .flat_map(|_| activations(ty, n, &mut rng))
                        .collect();
                    let ours = run_gemm(gemm, n, &w, row_bytes, 0..rows, &a, act_row);
                    let theirs: Vec<Vec<f32>> = if batch >= floor {
                        run_gemm(twin, n, &w, row_bytes, 0..rows, &a, act_row)
                    } else {
                        (0..batch)
                            .map(|b| {
                                let mut o = vec![0f32; rows];
                                let ab = &a[b * act_row..(b + 1) * act_row];
                                match (k.rows)(ty) {
                                    Some(f) => f(n, &w, row_bytes, ab, &mut o),
                                    None => {
                                        let dot = (k.dot)(ty).unwrap();
                                        for (r, y) in o.iter_mut().enumerate() {
                                            *y = dot(n, &w[r * row_bytes..(r + 1) * row_bytes], ab);
                                        }
                                    }
                                }
                                o
                            })
                            .collect()
                    };
                    let bits = |v: &[Vec<f32>]| -> Vec<Vec<u32>> {
                        v.iter()
                            .map(|o| o.iter().map(|x| x.to_bits()).collect())
                            .collect()
                    };
                    assert_eq!(
                        bits(&ours),
                        bits(&theirs),
                        "{} {ty}: {rows} rows of {n} x batch {batch}",
                        isa.name()
                    );
                    if matches!(isa, Isa::Avx2 | Isa::AvxVnni | Isa::Avx512) {
                        let scalar = run_gemm(portable, n, &w, row_bytes, 0..rows, &a, act_row);
                        assert_eq!(bits(&ours), bits(&scalar), "{ty}: portable, batch {batch}");
                    }
                    // The rows from 1 on, computed without row 0, give the same bits.
                    if rows > 1 {
                        let rest = run_gemm(gemm, n, &w, row_bytes, 1..rows, &a, act_row);
                        for (o, r) in ours.iter().zip(&rest) {
                            let (o, r) = (&o[1..], r.as_slice());
                            assert!(
                                o.iter().zip(r).all(|(x, y)| x.to_bits() == y.to_bits()),
                                "{ty}: split"
                            );
                        }
                    }
                }
            }
        }
    }
}

/// The scalar twin of `isa`'s quantizer of activation type `act`. Panics for a quantizer
/// without one, so that it cannot ship untested.
fn quantizer_twin(isa: Isa, act: GgmlType) -> QuantFn {
    match (isa, act) {
        (Isa::Avx2 | Isa::AvxVnni | Isa::Avx512, GgmlType::Q8_0 | GgmlType::Q8_1)
        | (_, GgmlType::Q8_K) => {
            super::activations::kernel(act).expect("portable activation quantizer")
        }
        _ => panic!("{}: a {act} quantizer without a scalar twin", isa.name()),
    }
}

/// Rows of 4096 activations that exercise an activation quantizer: several magnitudes
/// (subnormal to large), ties between +m and -m (the first sets the sign), values at exactly
/// half a step, zeros, a constant, and NaN and infinities.
fn activation_test_rows(rng: &mut Rng) -> Vec<Vec<f32>> {
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

/// Every SIMD activation quantizer writes its twin's bytes (the reference quantizer's for Q8_K;
/// ggml's x86 code for Q8_0 and Q8_1, which `tests/activation_quant.rs` also checks against
/// libggml-cpu's output). The first differing block and byte are named.
#[test]
fn simd_activation_quantizers_match_their_twins_byte_for_byte() {
    let mut rng = Rng(0xACE1_2345_6789_0001);
    let rows = activation_test_rows(&mut rng);
    for (isa, k) in simd_isas() {
        for act in all_types() {
            let Some(simd) = (k.quantize)(act) else {
                continue;
            };
            let twin = quantizer_twin(isa, act);
            let size = act.type_size() as usize;
            for x in &rows {
                let bytes = crate::row_bytes(act, x.len()).unwrap();
                let (mut ours, mut theirs) = (vec![0u8; bytes], vec![0u8; bytes]);
                simd(x, &mut ours);
                twin(x, &mut theirs);
                if let Some(at) = (0..bytes).find(|&i| ours[i] != theirs[i]) {
                    let b = at / size;
                    let per = act.block_size() as usize;
                    panic!(
                        "{} {act}: block {b}, byte {}: ours {} twin {} (input {:?})",
                        isa.name(),
                        at % size,
                        ours[at],
                        theirs[at],
                        &x[b * per..(b + 1) * per]
                    );
                }
            }
        }
    }
}

/// Every table's fused value accumulation (`vec::mad_f16_rows`) equals the scalar twins'
/// `scale_f16` and `mad_f16` called row by row and head by head, bit for bit: rows with and
/// without a rescale (one of them 0, as the first position's is), widths that fill 64-, 16- and
/// 1-value steps, padded rows, one head and several (in groups of four and fewer).
#[test]
fn simd_mad_f16_rows_equal_the_row_by_row_twins_bit_for_bit() {
    let twin = crate::vec::SCALAR;
    let mut rng = Rng(0x5EED_F00D_0000_0031);
    let mut tested = 0;
    for (isa, k) in simd_isas() {
        let Some(rows_kernel) = k.vec.and_then(|v| v.mad_f16_rows) else {
            continue;
        };
        for n in [1usize, 15, 16, 17, 64, 80, 100, 256] {
            for heads in [1usize, 2, 3, 4, 7] {
                let stride = n + (n % 3);
                let rows = 37;
                let values: Vec<f16> = (0..rows * stride)
                    .map(|_| f16::from_f32(rng.unit() * 2.0))
                    .collect();
                let steps = rows * heads;
                let weights: Vec<f32> = (0..steps).map(|_| rng.unit().abs()).collect();
                let rescales: Vec<Option<f32>> = (0..steps)
                    .map(|i| match (i / heads) % 5 {
                        _ if i < heads => Some(0.0),
                        1 if i % 2 == 0 => Some(rng.unit().abs()),
                        2 if i % 2 == 1 => Some(rng.unit().abs()),
                        _ => None,
                    })
                    .collect();
                let mut acc: Vec<f16> = (0..n * heads).map(|_| f16::from_f32(rng.unit())).collect();
                let mut theirs = acc.clone();
                rows_kernel(&mut acc, heads, &values, stride, &rescales, &weights);
                for (h, theirs) in theirs.chunks_exact_mut(n).enumerate() {
                    for r in 0..rows {
                        if let Some(s) = rescales[r * heads + h] {
                            (twin.scale_f16)(theirs, s);
                        }
                        let row = &values[r * stride..r * stride + n];
                        (twin.mad_f16)(theirs, row, weights[r * heads + h]);
                    }
                }
                let bits = |v: &[f16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&acc),
                    bits(&theirs),
                    "{} mad_f16_rows {n} x {heads}",
                    isa.name()
                );
                tested += 1;
            }
        }
    }
    // AVX2 and AVX-512 have the kernel; on a CPU without them nothing here runs it.
    assert_eq!(tested > 0, simd(Isa::Avx2).is_some());
}

/// Every table's batched scoring (`vec::dot_f16_rows`) equals the scalar twin's `dot_f16` row
/// by row and head by head, bit for bit: row counts around the batch of 16, lengths with and
/// without a tail of fewer than 32 values, padded rows, one query and several (in groups of
/// four and fewer), and large values among small (where the order of the additions shows).
#[test]
fn simd_dot_f16_rows_equal_the_row_by_row_twin_bit_for_bit() {
    let twin = crate::vec::SCALAR;
    let mut rng = Rng(0x5EED_F00D_0000_0032);
    let mut tested = 0;
    for (isa, k) in simd_isas() {
        let Some(rows_kernel) = k.vec.and_then(|v| v.dot_f16_rows) else {
            continue;
        };
        for n in [1usize, 31, 32, 64, 100, 128, 256, 512] {
            for (m, heads) in [
                (1usize, 1usize),
                (15, 2),
                (16, 1),
                (17, 3),
                (40, 4),
                (33, 7),
            ] {
                let stride = n + (n % 3) + 8;
                let rows: Vec<f16> = (0..m * stride)
                    .map(|i| f16::from_f32(rng.unit() * if i % 7 == 0 { 300.0 } else { 2.0 }))
                    .collect();
                let queries: Vec<f16> = (0..n * heads)
                    .map(|_| f16::from_f32(rng.unit() * 3.0))
                    .collect();
                let mut ours = vec![f32::NAN; m * heads];
                rows_kernel(&mut ours, &rows, stride, &queries, heads);
                for (i, &o) in ours.iter().enumerate() {
                    let (r, h) = (i / heads, i % heads);
                    let row = &rows[r * stride..r * stride + n];
                    let t = (twin.dot_f16)(row, &queries[h * n..(h + 1) * n]);
                    let name = isa.name();
                    assert_eq!(
                        o.to_bits(),
                        t.to_bits(),
                        "{name} dot_f16_rows {n}: row {r}/{m}, head {h}/{heads}"
                    );
                }
                tested += 1;
            }
        }
    }
    // AVX2 and AVX-512 have the kernel; on a CPU without them nothing here runs it.
    assert_eq!(tested > 0, simd(Isa::Avx2).is_some());
}

/// Every table's `vec::exp_f32` gives libm's `expf` bit for bit (the scalar twin calls it):
/// every 997th f32 from -104 to 0 (where attention's softmax arguments lie), random bit
/// patterns of every exponent, and glibc's special cases and their edges (`|x| >= 88`,
/// underflow to subnormals and to 0, overflow, infinities, NaN, zeros), in vectors of every
/// length around sixteen.
#[test]
fn simd_exp_f32_equals_libm_bit_for_bit() {
    let mut rng = Rng(0x5EED_F00D_0000_0033);
    let mut inputs: Vec<f32> = Vec::new();
    let (low, high) = ((-104f32).to_bits(), 0x8000_0000u32);
    inputs.extend((high..=low).step_by(997).map(f32::from_bits));
    inputs.extend((0..200_000).map(|_| f32::from_bits(rng.next() as u32)));
    for edge in [
        88.0f32, 88.72283, 88.72284, -88.0, -103.27, -103.28, -103.97, -103.98,
    ] {
        for d in -3i32..=3 {
            inputs.push(f32::from_bits(edge.to_bits().wrapping_add_signed(d)));
        }
    }
    inputs.extend([
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
    ]);
    let mut tested = 0;
    for (isa, k) in simd_isas() {
        let Some(simd) = k.vec else { continue };
        for len in [1usize, 15, 16, 17, 33] {
            for chunk in inputs
                .chunks(len)
                .take(if len == 16 { usize::MAX } else { 2000 })
            {
                let mut ours = chunk.to_vec();
                (simd.exp_f32)(&mut ours);
                for (&x, &o) in chunk.iter().zip(&ours) {
                    let libm = x.exp();
                    assert!(
                        o.to_bits() == libm.to_bits() || (o.is_nan() && libm.is_nan()),
                        "{} exp_f32({x:e} = {:#x}): {o:e} vs libm {libm:e}",
                        isa.name(),
                        x.to_bits()
                    );
                }
            }
        }
        tested += 1;
    }
    assert!(tested > 0 || simd_isas().is_empty());
}

/// Every SIMD table's `crate::vec` kernels equal the scalar twins bit for bit.
#[test]
fn simd_vec_kernels_equal_their_scalar_twins_bit_for_bit() {
    let twin = crate::vec::SCALAR;
    let mut rng = Rng(0x5EED_F00D_0000_0007);
    let mut values = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.unit() * 4.0).collect() };
    let halves = |v: Vec<f32>| -> Vec<f16> { v.into_iter().map(f16::from_f32).collect() };
    for (isa, k) in simd_isas() {
        let Some(simd) = k.vec else { continue };
        let name = isa.name();
        for n in [0usize, 1, 7, 8, 31, 32, 33, 64, 100, 128, 257] {
            let (a, b) = (halves(values(n)), halves(values(n)));
            let (s, t) = ((simd.dot_f16)(&a, &b), (twin.dot_f16)(&a, &b));
            assert_eq!(s.to_bits(), t.to_bits(), "{name} dot_f16 {n}: {s} vs {t}");

            let mut acc = halves(values(n));
            let mut theirs = acc.clone();
            (simd.mad_f16)(&mut acc, &a, 0.37);
            (twin.mad_f16)(&mut theirs, &a, 0.37);
            assert_eq!(acc, theirs, "{name} mad_f16 {n}");
            (simd.scale_f16)(&mut acc, 0.61);
            (twin.scale_f16)(&mut theirs, 0.61);
            assert_eq!(acc, theirs, "{name} scale_f16 {n}");

            let mut gate = values(n);
            for (i, g) in gate.iter_mut().enumerate() {
                match i % 9 {
                    // expf's saturating branches (|x| up to 160)...
                    0 => *g *= 40.0,
                    // ...and its scaled one (expf(-x) near 2^126, where x / (1 + expf(-x))
                    // is still a normal number), from both sides of the switch.
                    4 => *g -= 87.5,
                    _ => {}
                }
            }
            let up = values(n);
            let mut theirs = gate.clone();
            (simd.swiglu)(&mut gate, &up);
            (twin.swiglu)(&mut theirs, &up);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&gate), bits(&theirs), "{name} swiglu {n}");
        }
        check_gelu_kernels(name, &simd, &twin, &mut Rng(0x6E1F_0000_0000_0011));
        check_attention_kernels(name, &simd, &twin, &mut Rng(0xA77E_0000_0000_0013));
    }
}

/// `gemm_f32` and `soft_max_f32` of `simd` equal the twins' bit for bit: products of every
/// row count around the blockings (1, 4, 6, 8 rows) and column counts around the vector
/// widths and masked tails,
/// accumulating into non-zero `c`; softmax over lengths with and without tails, with `-inf`
/// (masked) entries and differences large enough for `expf`'s saturating branches.
fn check_attention_kernels(name: &str, simd: &VecKernels, twin: &VecKernels, rng: &mut Rng) {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for m in [0usize, 1, 2, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17] {
        for k in [0usize, 1, 3, 8, 64] {
            for n in [0usize, 1, 3, 4, 7, 8, 9, 16, 17, 24, 31, 32, 33, 48, 64, 65] {
                let a: Vec<f32> = (0..m * k).map(|_| rng.unit() * 3.0).collect();
                let b: Vec<f32> = (0..k * n).map(|_| rng.unit() * 3.0).collect();
                let c: Vec<f32> = (0..m * n).map(|_| rng.unit()).collect();
                let (mut ours, mut theirs) = (c.clone(), c);
                (simd.gemm_f32)(&mut ours, &a, &b, m, k, n);
                (twin.gemm_f32)(&mut theirs, &a, &b, m, k, n);
                assert_eq!(bits(&ours), bits(&theirs), "{name} gemm_f32 {m}x{k}x{n}");
            }
        }
    }
    for n in [0usize, 1, 7, 8, 9, 16, 63, 64, 65, 200] {
        let x: Vec<f32> = (0..n)
            .map(|i| match i % 11 {
                3 => f32::NEG_INFINITY,
                5 => -100.0 - rng.unit().abs() * 100.0,
                7 => -86.0 - rng.unit().abs() * 2.0,
                _ => rng.unit() * 8.0,
            })
            .collect();
        let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let (mut ours, mut theirs) = (x.clone(), x);
        let (s, t) = (
            (simd.soft_max_f32)(&mut ours, max),
            (twin.soft_max_f32)(&mut theirs, max),
        );
        assert_eq!(
            s.to_bits(),
            t.to_bits(),
            "{name} soft_max_f32 {n}: {s} vs {t}"
        );
        assert_eq!(bits(&ours), bits(&theirs), "{name} soft_max_f32 {n}");
    }
}

/// Inputs for GELU that reach every branch of ggml's rules and every case of the f16 rounding
/// before the table: exactly ±10 and their neighbours, values just inside ±10 that round to an
/// f16 of ±10, ±0, f32 subnormals (to f16 zero), f16 subnormals and ties between them, ties
/// between normal f16 values, the largest f16 and values rounding to f16 infinity (beyond ±10,
/// so never looked up), huge values, infinities, NaNs of both signs with several payloads; then
/// every f16 value widened (every table entry, the last included: 0xFFFF is a NaN that the
/// AVX2 gather reads with the padding entry), then random values in [-12, 12).
fn gelu_gates(rng: &mut Rng) -> (Vec<f32>, usize) {
    let ten_down = f32::from_bits(10f32.to_bits() - 1);
    let ten_up = f32::from_bits(10f32.to_bits() + 1);
    let mut specials = vec![
        -10.0,
        10.0,
        ten_down,
        ten_up,
        -ten_down,
        -ten_up,
        9.997,
        -9.997,
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        2f32.powi(-25),
        3.0 * 2f32.powi(-25),
        -3.0 * 2f32.powi(-25),
        6.0e-8,
        6.1e-5,
        -6.1e-5,
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        -(1.0 + 2f32.powi(-11)),
        0.5,
        -0.5,
        2.5,
        -2.5,
        65504.0,
        -65504.0,
        65519.0,
        65520.0,
        -65520.0,
        1e30,
        -1e30,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7F80_0001),
        f32::from_bits(0xFFC0_1234),
        f32::from_bits(0x7FBF_FFFF),
    ];
    let n_specials = specials.len();
    specials.extend((0..=u16::MAX).map(|h| f16::from_bits(h).to_f32()));
    specials.extend((0..1003).map(|_| rng.unit() * 12.0));
    (specials, n_specials)
}

/// `up` for [`gelu_gates`]: random in [-2, 2), with zeros, infinities and NaN. Where the gate
/// is NaN, `up` is not: a product of two NaNs may return either payload, as the compiler
/// orders the operands (Rust and C leave it open), so no twin can promise its bits.
fn gelu_ups(gates: &[f32], rng: &mut Rng) -> Vec<f32> {
    gates
        .iter()
        .map(|g| match rng.next() % 16 {
            0 => 0.0,
            1 => -0.0,
            2 => f32::INFINITY,
            3 => f32::NEG_INFINITY,
            4 if !g.is_nan() => f32::NAN,
            _ => rng.unit() * 2.0,
        })
        .collect()
}

/// `gelu` and `geglu` of `simd` equal the twins' bit for bit on [`gelu_gates`]: the whole run
/// (its length leaves a tail), and the special values from every start within a vector for
/// lengths around the vector widths (so each lands in every lane and in tails).
fn check_gelu_kernels(name: &str, simd: &VecKernels, twin: &VecKernels, rng: &mut Rng) {
    let (gates, n_specials) = gelu_gates(rng);
    assert_ne!(gates.len() % 8, 0);
    let ups = gelu_ups(&gates, rng);
    let check = |g: &[f32], u: &[f32], what: &str| {
        let (mut ours, mut theirs) = (g.to_vec(), g.to_vec());
        (simd.gelu)(&mut ours);
        (twin.gelu)(&mut theirs);
        if let Some(i) = (0..g.len()).find(|&i| ours[i].to_bits() != theirs[i].to_bits()) {
            panic!(
                "{name} gelu {what}, value {i} ({:#010x}): {:#010x} vs twin {:#010x}",
                g[i].to_bits(),
                ours[i].to_bits(),
                theirs[i].to_bits()
            );
        }
        let (mut ours, mut theirs) = (g.to_vec(), g.to_vec());
        (simd.geglu)(&mut ours, u);
        (twin.geglu)(&mut theirs, u);
        if let Some(i) = (0..g.len()).find(|&i| ours[i].to_bits() != theirs[i].to_bits()) {
            panic!(
                "{name} geglu {what}, value {i} ({:#010x} * {:#010x}): {:#010x} vs twin {:#010x}",
                g[i].to_bits(),
                u[i].to_bits(),
                ours[i].to_bits(),
                theirs[i].to_bits()
            );
        }
    };
    check(&gates, &ups, "all");
    let lengths = [0, 1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 24, 25];
    for start in 0..8 {
        for len in lengths.into_iter().chain([n_specials - start]) {
            let (g, u) = (&gates[start..start + len], &ups[start..start + len]);
            check(g, u, &format!("specials {start}..{}", start + len));
        }
    }
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
