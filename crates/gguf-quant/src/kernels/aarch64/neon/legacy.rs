//! NEON dot products of the legacy 32-element quants: Q8_0, Q4_0 (against Q8_0) and Q4_1
//! (against Q8_1), four blocks per step.

use std::arch::aarch64::*;
use std::mem::offset_of;

use super::common::{dot_i8, f16_at, load_i8, load_u8};
use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ8_0, BlockQ8_1};

safe_wrapper!(q8_0_q8_0, q8_0_q8_0_neon, Q8_0);
safe_wrapper!(q4_0_q8_0, q4_0_q8_0_neon, Q4_0);
safe_wrapper!(q4_1_q8_1, q4_1_q8_1_neon, Q4_1);

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
