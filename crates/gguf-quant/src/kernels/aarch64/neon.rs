//! NEON dot products for the hot weight types (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K).
//!
//! Plain NEON only, which every aarch64 CPU has: signed byte products widen to i16 with
//! `vmull_s8`/`vmlal_s8` and then to i32, so integer parts are exact, as in the scalar kernels.
//! (The `dotprod` extension's `vdotq_s32` would save a few instructions per 16 bytes, but its
//! Rust intrinsic is not stable yet.)
//!
//! Float results:
//! - Q8_0, Q4_0, Q4_1: each block's term is computed with the scalar twin's operations (same
//!   products, same fused multiply-add), but the terms are summed in four lanes, four blocks per
//!   step, and the lanes added at the end; results differ from the scalar twins only by the
//!   order of float additions (`kernels::simd_tests` bounds the difference).
//! - Q4_K, Q6_K: the integer sums land in the same eight lanes (element index mod 8) as in
//!   ggml's generic C, and every float operation is the scalar twin's, in its order, so the
//!   results are bit-identical to the scalar kernels (tested).
//!
//! The kernels walk the blocks through raw pointers, as the AVX2 ones do: with slice iterators
//! the bounds and iterator bookkeeping cost a good part of the throughput on short rows.

use std::arch::aarch64::*;
use std::mem::offset_of;

use crate::blocks::{
    BlockQ4K, BlockQ4_0, BlockQ4_1, BlockQ6K, BlockQ8K, BlockQ8_0, BlockQ8_1, K_SCALE_SIZE,
};
use crate::dequant::k_scale_min;
use crate::kernels::{DotFn, IsaKernels};
use crate::GgmlType;

/// Whether this CPU runs these kernels (NEON is part of every aarch64 Linux target).
fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

/// This module's kernels, if this CPU has NEON. Every safe function of this module runs NEON
/// code: they are reachable from outside only through this table.
pub(crate) fn kernels() -> Option<IsaKernels> {
    available().then_some(IsaKernels {
        dot,
        rows: |_| None,
        quantize: |_| None,
        vec: None,
    })
}

/// The NEON kernel for weights of type `ty`, if there is one.
fn dot(ty: GgmlType) -> Option<DotFn> {
    Some(match ty {
        GgmlType::Q8_0 => q8_0_q8_0,
        GgmlType::Q4_0 => q4_0_q8_0,
        GgmlType::Q4_1 => q4_1_q8_1,
        GgmlType::Q4_K => q4_k_q8_k,
        GgmlType::Q6_K => q6_k_q8_k,
        _ => return None,
    })
}

safe_wrapper!(q8_0_q8_0, q8_0_q8_0_neon, Q8_0);
safe_wrapper!(q4_0_q8_0, q4_0_q8_0_neon, Q4_0);
safe_wrapper!(q4_1_q8_1, q4_1_q8_1_neon, Q4_1);
safe_wrapper!(q4_k_q8_k, q4_k_q8_k_neon, Q4_K);
safe_wrapper!(q6_k_q8_k, q6_k_q8_k_neon, Q6_K);

/// The little-endian f16 at `p` as f32, exactly (the shared table lookup).
///
/// # Safety
/// `p` must point to 2 readable bytes.
#[inline(always)]
unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes at `p`; u8 has no alignment requirement.
    crate::fp::f16_at(unsafe { std::slice::from_raw_parts(p, 2) })
}

/// The little-endian f32 at `p`.
///
/// # Safety
/// `p` must point to 4 readable bytes.
#[inline(always)]
unsafe fn f32_at(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 4 readable bytes; `[u8; 4]` has alignment 1.
    f32::from_le_bytes(unsafe { p.cast::<[u8; 4]>().read() })
}

/// 16 signed bytes at `p`.
///
/// # Safety
/// `p` must point to 16 readable bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_i8(p: *const u8) -> int8x16_t {
    // SAFETY: the caller guarantees 16 readable bytes; `vld1q_s8` needs only byte alignment.
    unsafe { vld1q_s8(p.cast()) }
}

/// 16 unsigned bytes at `p`.
///
/// # Safety
/// `p` must point to 16 readable bytes.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load_u8(p: *const u8) -> uint8x16_t {
    // SAFETY: the caller guarantees 16 readable bytes; `vld1q_u8` needs only byte alignment.
    unsafe { vld1q_u8(p) }
}

/// Four i32 lane sums of the products of 16 signed bytes `x` and `y` added to `acc` (lane `k`
/// gains the products of elements 2k, 2k+1, 8+2k, 9+2k; each i16 product is exact).
#[inline]
#[target_feature(enable = "neon")]
fn dot_i8(acc: int32x4_t, x: int8x16_t, y: int8x16_t) -> int32x4_t {
    let acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    vpadalq_s16(acc, vmull_high_s8(x, y))
}

/// `acc` plus the products of 16 signed bytes `x` and `y`, in eight i16 lanes: lane `l` gains
/// `x[l] * y[l] + x[8 + l] * y[8 + l]`. The caller keeps the lane sums within i16.
#[inline]
#[target_feature(enable = "neon")]
fn mla_i8(acc: int16x8_t, x: int8x16_t, y: int8x16_t) -> int16x8_t {
    vmlal_high_s8(vmlal_s8(acc, vget_low_s8(x), vget_low_s8(y)), x, y)
}

/// The eight i16 lanes of `p` times `scale`, added to the eight i32 lanes `acc` (exact).
#[inline]
#[target_feature(enable = "neon")]
fn add_scaled(acc: [int32x4_t; 2], p: int16x8_t, scale: i16) -> [int32x4_t; 2] {
    [
        vmlal_n_s16(acc[0], vget_low_s16(p), scale),
        vmlal_high_n_s16(acc[1], p, scale),
    ]
}

/// Sums the terms of the 32-element block types, four blocks per step. `block(i)` gives block
/// i's two float parameters and its integer dot product in four i32 lanes; `term` turns four
/// blocks' parameters and exact sums (as f32) into their four terms, lane by lane. The four
/// lanes are summed at the end; a last partial step pads with zero blocks, whose terms are 0.
#[inline]
#[target_feature(enable = "neon")]
fn four_blocks(
    blocks: usize,
    block: impl Fn(usize) -> ([f32; 2], int32x4_t),
    term: impl Fn(float32x4_t, float32x4_t, float32x4_t) -> float32x4_t,
) -> f32 {
    let step = |i: usize, count: usize| {
        let mut s = [vdupq_n_s32(0); 4];
        let (mut p0, mut p1) = ([0f32; 4], [0f32; 4]);
        for k in 0..count {
            let (p, sk) = block(i + k);
            (p0[k], p1[k], s[k]) = (p[0], p[1], sk);
        }
        // Lane k: the whole integer sum of block i + k (at most 32 * 2^14 in magnitude, so
        // its conversion to f32 is exact).
        let s = vpaddq_s32(vpaddq_s32(s[0], s[1]), vpaddq_s32(s[2], s[3]));
        // SAFETY: `p0` and `p1` are local arrays of four f32.
        let (p0, p1) = unsafe { (vld1q_f32(p0.as_ptr()), vld1q_f32(p1.as_ptr())) };
        term(vcvtq_f32_s32(s), p0, p1)
    };
    let mut acc = vdupq_n_f32(0.0);
    let mut i = 0;
    while i + 4 <= blocks {
        acc = vaddq_f32(acc, step(i, 4));
        i += 4;
    }
    if i < blocks {
        acc = vaddq_f32(acc, step(i, blocks - i));
    }
    vaddvq_f32(acc)
}

/// # Safety
/// `w` and `a` point to `blocks` Q8_0 blocks each.
#[target_feature(enable = "neon")]
unsafe fn q8_0_q8_0_neon(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    const SIZE: usize = size_of::<BlockQ8_0>();
    const D: usize = offset_of!(BlockQ8_0, d);
    const QS: usize = offset_of!(BlockQ8_0, qs);
    // SAFETY: `four_blocks` calls this only for i < blocks, so block i of each operand is in
    // bounds (caller); loads are unaligned.
    let block = |i: usize| unsafe {
        let (bw, ba) = (w.add(i * SIZE), a.add(i * SIZE));
        let s = dot_i8(vdupq_n_s32(0), load_i8(bw.add(QS)), load_i8(ba.add(QS)));
        let s = dot_i8(s, load_i8(bw.add(QS + 16)), load_i8(ba.add(QS + 16)));
        ([f16_at(bw.add(D)) * f16_at(ba.add(D)), 0.0], s)
    };
    // Scalar: `sumi as f32 * (d_w * d_a)`.
    four_blocks(blocks, block, |s, d, _| vmulq_f32(s, d))
}

/// # Safety
/// `w` points to `blocks` Q4_0 blocks and `a` to `blocks` Q8_0 blocks.
#[target_feature(enable = "neon")]
unsafe fn q4_0_q8_0_neon(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mask = vdupq_n_u8(0x0F);
    let eight = vdupq_n_s8(8);
    // SAFETY: `four_blocks` calls this only for i < blocks, so block i of each operand is in
    // bounds (caller); loads are unaligned.
    let block = |i: usize| unsafe {
        let bw = w.add(i * size_of::<BlockQ4_0>());
        let (ba, ys) = (a.add(i * size_of::<BlockQ8_0>()), offset_of!(BlockQ8_0, qs));
        let q = load_u8(bw.add(offset_of!(BlockQ4_0, qs)));
        // Low nibbles are elements 0..16, high nibbles 16..32.
        let lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, mask)), eight);
        let hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8::<4>(q)), eight);
        let s = dot_i8(vdupq_n_s32(0), lo, load_i8(ba.add(ys)));
        let s = dot_i8(s, hi, load_i8(ba.add(ys + 16)));
        let dw = f16_at(bw.add(offset_of!(BlockQ4_0, d)));
        ([dw, f16_at(ba.add(offset_of!(BlockQ8_0, d)))], s)
    };
    // Scalar: `sumi as f32 * d_w * d_a`.
    four_blocks(blocks, block, |s, dw, da| vmulq_f32(vmulq_f32(s, dw), da))
}

/// # Safety
/// `w` points to `blocks` Q4_1 blocks and `a` to `blocks` Q8_1 blocks.
#[target_feature(enable = "neon")]
unsafe fn q4_1_q8_1_neon(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mask = vdupq_n_u8(0x0F);
    // SAFETY: `four_blocks` calls this only for i < blocks, so block i of each operand is in
    // bounds (caller); loads are unaligned.
    let block = |i: usize| unsafe {
        let bw = w.add(i * size_of::<BlockQ4_1>());
        let (ba, ys) = (a.add(i * size_of::<BlockQ8_1>()), offset_of!(BlockQ8_1, qs));
        let q = load_u8(bw.add(offset_of!(BlockQ4_1, qs)));
        // Nibbles 0..16 fit in i8.
        let lo = vreinterpretq_s8_u8(vandq_u8(q, mask));
        let hi = vreinterpretq_s8_u8(vshrq_n_u8::<4>(q));
        let s = dot_i8(vdupq_n_s32(0), lo, load_i8(ba.add(ys)));
        let s = dot_i8(s, hi, load_i8(ba.add(ys + 16)));
        let d = f16_at(bw.add(offset_of!(BlockQ4_1, d))) * f16_at(ba.add(offset_of!(BlockQ8_1, d)));
        let m = f16_at(bw.add(offset_of!(BlockQ4_1, m))) * f16_at(ba.add(offset_of!(BlockQ8_1, s)));
        ([d, m], s)
    };
    // Scalar: `d.mul_add(sumi as f32, m)`, one rounding.
    four_blocks(blocks, block, |s, d, m| vfmaq_f32(m, d, s))
}

/// # Safety
/// `w` points to `blocks` Q4_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "neon")]
unsafe fn q4_k_q8_k_neon(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mask = vdupq_n_u8(0x0F);
    let mut sums = [vdupq_n_f32(0.0); 2];
    let mut sumf = 0f32;
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the block's fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ4K>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let packed = bw.add(offset_of!(BlockQ4K, scales));
            let (scales, mins) = k_scale_min(std::slice::from_raw_parts(packed, K_SCALE_SIZE));
            // Σ_j bsums[j] * mins[j / 2]: the pair sums |bsums[2j] + bsums[2j+1]| <= 2 * 16 *
            // 128 fit in i16, their products with 6-bit mins in i32.
            let bsums = ba.add(offset_of!(BlockQ8K, bsums));
            let b0 = vreinterpretq_s16_u8(load_u8(bsums));
            let b1 = vreinterpretq_s16_u8(load_u8(bsums.add(16)));
            let pairs = vpaddq_s16(b0, b1);
            let mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins.as_ptr())));
            let min_sums = vmlal_high_s16(
                vmull_s16(vget_low_s16(pairs), vget_low_s16(mins)),
                pairs,
                mins,
            );
            let sumi = vaddvq_s32(min_sums);
            // aux32[l] = Σ_j scale_j * Σ (q * y over the elements of sub-block j with index
            // l mod 8), as ggml's generic C keeps it. Per sub-block, the i16 lane sums hold
            // four products of at most 15 * 128 each.
            let (qs, ys) = (
                bw.add(offset_of!(BlockQ4K, qs)),
                ba.add(offset_of!(BlockQ8K, qs)),
            );
            let mut aux = [vdupq_n_s32(0); 2];
            for k in 0..4 {
                let q0 = load_u8(qs.add(32 * k));
                let q1 = load_u8(qs.add(32 * k + 16));
                let y = ys.add(64 * k);
                // Low nibbles: elements 64k + 0..32 (sub-block 2k); high: 64k + 32..64.
                let lo = mla_i8(
                    vdupq_n_s16(0),
                    vreinterpretq_s8_u8(vandq_u8(q0, mask)),
                    load_i8(y),
                );
                let lo = mla_i8(
                    lo,
                    vreinterpretq_s8_u8(vandq_u8(q1, mask)),
                    load_i8(y.add(16)),
                );
                let hi = mla_i8(
                    vdupq_n_s16(0),
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(q0)),
                    load_i8(y.add(32)),
                );
                let hi = mla_i8(
                    hi,
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(q1)),
                    load_i8(y.add(48)),
                );
                aux = add_scaled(aux, lo, i16::from(scales[2 * k]));
                aux = add_scaled(aux, hi, i16::from(scales[2 * k + 1]));
            }
            // Scalar: sums[l] = d.mul_add(aux32[l] as f32, sums[l]); sumf -= dmin * sumi (FMA).
            let da = f32_at(ba.add(offset_of!(BlockQ8K, d)));
            let d = vdupq_n_f32(f16_at(bw.add(offset_of!(BlockQ4K, d))) * da);
            sums[0] = vfmaq_f32(sums[0], d, vcvtq_f32_s32(aux[0]));
            sums[1] = vfmaq_f32(sums[1], d, vcvtq_f32_s32(aux[1]));
            let dmin = f16_at(bw.add(offset_of!(BlockQ4K, dmin))) * da;
            sumf = (-dmin).mul_add(sumi as f32, sumf);
        }
    }
    add_lanes_in_order(sumf, sums)
}

/// `start` plus the eight lanes of `v`, one at a time in lane order (as the scalar kernels end).
#[inline]
#[target_feature(enable = "neon")]
fn add_lanes_in_order(start: f32, v: [float32x4_t; 2]) -> f32 {
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` is a local array of eight f32, four written from each vector.
    unsafe {
        vst1q_f32(lanes.as_mut_ptr(), v[0]);
        vst1q_f32(lanes.as_mut_ptr().add(4), v[1]);
    }
    let mut sum = start;
    for x in lanes {
        sum += x;
    }
    sum
}

/// # Safety
/// `w` points to `blocks` Q6_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "neon")]
unsafe fn q6_k_q8_k_neon(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let m4 = vdupq_n_u8(0x0F);
    let m30 = vdupq_n_u8(0x30);
    let k32 = vdupq_n_s8(32);
    let mut sums = [vdupq_n_f32(0.0); 2];
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ6K>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let ql = bw.add(offset_of!(BlockQ6K, ql));
            let qh = bw.add(offset_of!(BlockQ6K, qh));
            let scales = bw.add(offset_of!(BlockQ6K, scales));
            let ys = ba.add(offset_of!(BlockQ8K, qs));
            let mut aux = [vdupq_n_s32(0); 2];
            for h in 0..2 {
                let l = [0, 16, 32, 48].map(|o| load_u8(ql.add(64 * h + o)));
                let hb = [0, 16].map(|o| load_u8(qh.add(32 * h + o)));
                for t in 0..2 {
                    // Elements 128h + 32g + 16t + 0..16: the low or high nibbles of ql and
                    // bits 2g, 2g+1 of qh, moved to bits 4 and 5.
                    let groups = [
                        vorrq_u8(vandq_u8(l[t], m4), vandq_u8(vshlq_n_u8::<4>(hb[t]), m30)),
                        vorrq_u8(
                            vandq_u8(l[t + 2], m4),
                            vandq_u8(vshlq_n_u8::<2>(hb[t]), m30),
                        ),
                        vorrq_u8(vshrq_n_u8::<4>(l[t]), vandq_u8(hb[t], m30)),
                        vorrq_u8(
                            vshrq_n_u8::<4>(l[t + 2]),
                            vandq_u8(vshrq_n_u8::<2>(hb[t]), m30),
                        ),
                    ];
                    for (g, q) in groups.into_iter().enumerate() {
                        // q - 32 in -32..32; the i16 lane sums hold two products of at most
                        // 32 * 128 each.
                        let x = vsubq_s8(vreinterpretq_s8_u8(q), k32);
                        let at = 128 * h + 32 * g + 16 * t;
                        let p = mla_i8(vdupq_n_s16(0), x, load_i8(ys.add(at)));
                        let scale = i16::from(scales.add(at / 16).cast::<i8>().read());
                        aux = add_scaled(aux, p, scale);
                    }
                }
            }
            // Scalar: sums[l] += d * aux32[l] as f32 (no FMA).
            let da = f32_at(ba.add(offset_of!(BlockQ8K, d)));
            let d = vdupq_n_f32(f16_at(bw.add(offset_of!(BlockQ6K, d))) * da);
            sums[0] = vaddq_f32(sums[0], vmulq_f32(d, vcvtq_f32_s32(aux[0])));
            sums[1] = vaddq_f32(sums[1], vmulq_f32(d, vcvtq_f32_s32(aux[1])));
        }
    }
    add_lanes_in_order(0.0, sums)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::simd_tests::{for_random_rows, Rng};
    use crate::kernels::{kernel_for, Isa};

    /// The K-quant kernels keep ggml's eight integer lanes and its float operations in order,
    /// so they agree with the scalar twins bit for bit (beyond the reordering bound that
    /// `simd_tests` checks for every kernel).
    #[test]
    fn neon_k_quants_match_scalar_bit_for_bit() {
        let mut rng = Rng(0x0F1E_2D3C_4B5A_6978);
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let simd = dot(ty).expect("NEON kernel");
            let scalar = kernel_for(ty, Isa::Scalar).expect("scalar twin");
            for_random_rows(ty, &mut rng, |n, w, a| {
                let (s, v) = (scalar(n, w, a), simd(n, w, a));
                assert_eq!(
                    s.to_bits(),
                    v.to_bits(),
                    "{ty} n={n}: scalar {s} vs neon {v}"
                );
            });
        }
    }
}
