//! The weights of the 32-value types as `vpdpbusd` takes them: each signed value `x` as the
//! unsigned byte `x + 128` (see `gemm::lane_sums`), straight from the block's bits, for one
//! block (256 bits) or two blocks (512 bits, the first in the low half: consecutive blocks of a
//! row, or the same block of two rows). Element `k` of a block is byte `k` of its half, as
//! AVX2's unpacking has it.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::super::avx2::common::nibbles;
use crate::blocks::{BlockQ4_0, BlockQ5_0, BlockQ8_0};

/// The 32 nibbles of the 16 bytes at `p0` and of those at `p1`, each block's low nibbles
/// (elements 0..16) first.
///
/// # Safety
/// Both pointers must point to 16 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn nibbles_pair(p0: *const u8, p1: *const u8) -> __m512i {
    // SAFETY: the caller's guarantee; the loads are unaligned.
    let both = unsafe { _mm256_loadu2_m128i(p1.cast(), p0.cast()) };
    // [p0, p1, p0 >> 4, p1 >> 4], then in element order [p0, p0 >> 4, p1, p1 >> 4].
    let z = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(both), _mm256_srli_epi16(both, 4));
    let z = _mm512_shuffle_i64x2::<0b11_01_10_00>(z, z);
    _mm512_and_si512(z, _mm512_set1_epi8(0x0F))
}

/// Q8_0: the values of the blocks at `p0` and `p1`.
///
/// # Safety
/// `p0` and `p1` must point to whole Q8_0 blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn q8_0_pair(p0: *const u8, p1: *const u8) -> __m512i {
    const QS: usize = offset_of!(BlockQ8_0, qs);
    // SAFETY: the caller's guarantee; the loads are unaligned.
    let (lo, hi) = unsafe {
        (
            _mm256_loadu_si256(p0.add(QS).cast()),
            _mm256_loadu_si256(p1.add(QS).cast()),
        )
    };
    let both = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi);
    _mm512_xor_si512(both, _mm512_set1_epi8(-128))
}

/// Q8_0: the values at `p`.
///
/// # Safety
/// `p` must point to a whole Q8_0 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn q8_0_one(p: *const u8) -> __m256i {
    // SAFETY: the caller's guarantee; the load is unaligned.
    let x = unsafe { _mm256_loadu_si256(p.add(offset_of!(BlockQ8_0, qs)).cast()) };
    _mm256_xor_si256(x, _mm256_set1_epi8(-128))
}

/// Q4_0 (`x = q - 8`, so `x + 128 = q + 120`): the blocks at `p0` and `p1`.
///
/// # Safety
/// `p0` and `p1` must point to whole Q4_0 blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn q4_0_pair(p0: *const u8, p1: *const u8) -> __m512i {
    const QS: usize = offset_of!(BlockQ4_0, qs);
    // SAFETY: the caller's guarantee.
    let q = unsafe { nibbles_pair(p0.add(QS), p1.add(QS)) };
    _mm512_add_epi8(q, _mm512_set1_epi8(120))
}

/// Q4_0: the block at `p`.
///
/// # Safety
/// `p` must point to a whole Q4_0 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn q4_0_one(p: *const u8) -> __m256i {
    // SAFETY: the caller's guarantee; the load is unaligned.
    let q = unsafe { _mm_loadu_si128(p.add(offset_of!(BlockQ4_0, qs)).cast()) };
    _mm256_add_epi8(nibbles(q), _mm256_set1_epi8(120))
}

/// The fifth bits of the Q5_0 block at `p` (bit `k`: element `k`).
///
/// # Safety
/// `p` must point to a whole Q5_0 block.
#[inline]
unsafe fn q5_0_high_bits(p: *const u8) -> u32 {
    // SAFETY: the caller's guarantee; the read is unaligned.
    unsafe {
        p.add(offset_of!(BlockQ5_0, qh))
            .cast::<u32>()
            .read_unaligned()
            .to_le()
    }
}

/// Q5_0 (`x = q - 16`, `q` the nibble plus 16 times the fifth bit, so `x + 128` is the nibble
/// with 0x80 above it where the fifth bit is set and 0x70 where it is clear): the blocks at
/// `p0` and `p1`.
///
/// # Safety
/// `p0` and `p1` must point to whole Q5_0 blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn q5_0_pair(p0: *const u8, p1: *const u8) -> __m512i {
    const QS: usize = offset_of!(BlockQ5_0, qs);
    // SAFETY: the caller's guarantee.
    let (q, bits) = unsafe {
        (
            nibbles_pair(p0.add(QS), p1.add(QS)),
            u64::from(q5_0_high_bits(p0)) | u64::from(q5_0_high_bits(p1)) << 32,
        )
    };
    let high = _mm512_mask_blend_epi8(bits, _mm512_set1_epi8(0x70), _mm512_set1_epi8(-128));
    _mm512_or_si512(q, high)
}

/// Q5_0: the block at `p`.
///
/// # Safety
/// `p` must point to a whole Q5_0 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) unsafe fn q5_0_one(p: *const u8) -> __m256i {
    // SAFETY: the caller's guarantee; the load is unaligned.
    let (q, bits) = unsafe {
        (
            _mm_loadu_si128(p.add(offset_of!(BlockQ5_0, qs)).cast()),
            q5_0_high_bits(p),
        )
    };
    let high = _mm256_mask_blend_epi8(bits, _mm256_set1_epi8(0x70), _mm256_set1_epi8(-128));
    _mm256_or_si256(nibbles(q), high)
}
