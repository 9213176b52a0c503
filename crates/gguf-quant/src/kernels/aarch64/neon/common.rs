//! What the NEON kernels share: unaligned loads, exact byte products and f16/f32 reads.

use std::arch::aarch64::*;

/// The little-endian f16 at `p` as f32, exactly (the shared table lookup).
///
/// # Safety
/// `p` must point to 2 readable bytes.
#[inline(always)]
pub(super) unsafe fn f16_at(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes at `p`; u8 has no alignment requirement.
    crate::fp::f16_at(unsafe { std::slice::from_raw_parts(p, 2) })
}

/// The little-endian f32 at `p`.
///
/// # Safety
/// `p` must point to 4 readable bytes.
#[inline(always)]
pub(super) unsafe fn f32_at(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 4 readable bytes; `[u8; 4]` has alignment 1.
    f32::from_le_bytes(unsafe { p.cast::<[u8; 4]>().read() })
}

/// 16 signed bytes at `p`.
///
/// # Safety
/// `p` must point to 16 readable bytes.
#[inline]
#[target_feature(enable = "neon")]
pub(super) unsafe fn load_i8(p: *const u8) -> int8x16_t {
    // SAFETY: the caller guarantees 16 readable bytes; `vld1q_s8` needs only byte alignment.
    unsafe { vld1q_s8(p.cast()) }
}

/// 16 unsigned bytes at `p`.
///
/// # Safety
/// `p` must point to 16 readable bytes.
#[inline]
#[target_feature(enable = "neon")]
pub(super) unsafe fn load_u8(p: *const u8) -> uint8x16_t {
    // SAFETY: the caller guarantees 16 readable bytes; `vld1q_u8` needs only byte alignment.
    unsafe { vld1q_u8(p) }
}

/// Four i32 lane sums of the products of 16 signed bytes `x` and `y` added to `acc` (lane `k`
/// gains the products of elements 2k, 2k+1, 8+2k, 9+2k; each i16 product is exact).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn dot_i8(acc: int32x4_t, x: int8x16_t, y: int8x16_t) -> int32x4_t {
    let acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(x), vget_low_s8(y)));
    vpadalq_s16(acc, vmull_high_s8(x, y))
}

/// `acc` plus the products of 16 signed bytes `x` and `y`, in eight i16 lanes: lane `l` gains
/// `x[l] * y[l] + x[8 + l] * y[8 + l]`. The caller keeps the lane sums within i16.
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn mla_i8(acc: int16x8_t, x: int8x16_t, y: int8x16_t) -> int16x8_t {
    vmlal_high_s8(vmlal_s8(acc, vget_low_s8(x), vget_low_s8(y)), x, y)
}

/// The eight i16 lanes of `p` times `scale`, added to the eight i32 lanes `acc` (exact).
#[inline]
#[target_feature(enable = "neon")]
pub(super) fn add_scaled(acc: [int32x4_t; 2], p: int16x8_t, scale: i16) -> [int32x4_t; 2] {
    [
        vmlal_n_s16(acc[0], vget_low_s16(p), scale),
        vmlal_high_n_s16(acc[1], p, scale),
    ]
}
