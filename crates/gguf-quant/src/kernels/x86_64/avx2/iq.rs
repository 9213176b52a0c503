//! AVX2 dot products of the i-quants: IQ4_NL (against Q8_0) and IQ4_XS (against Q8_K).

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::common::{
    dot_i8, f16_splat, hsum, nibbles, q8k_scale, scale_pair, scaled_blocks, Maddubs,
};
use crate::blocks::{BlockIq4Nl, BlockIq4Xs, BlockQ8K, BlockQ8_0};
use crate::grids::KVALUES_IQ4NL;

safe_wrapper!(iq4_nl_q8_0, iq4_nl_q8_0_avx2, IQ4_NL);
safe_wrapper!(iq4_xs_q8_k, iq4_xs_q8_k_avx2, IQ4_XS);

/// `kvalues_iq4nl` in both 128-bit lanes, for `_mm256_shuffle_epi8` lookups by nibble.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn iq4nl_table() -> __m256i {
    // SAFETY: the table is a static of 16 i8; the load is unaligned.
    let t = unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()) };
    _mm256_broadcastsi128_si256(t)
}

/// # Safety
/// `w` points to `blocks` IQ4_NL blocks and `a` to `blocks` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_nl_q8_0_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let table = iq4nl_table();
    const W: usize = size_of::<BlockIq4Nl>();
    const A: usize = size_of::<BlockQ8_0>();
    // SAFETY: `scaled_blocks` calls this only for i < blocks, so block i of each operand is in
    // bounds (caller); loads are unaligned.
    let block = |i: usize| unsafe {
        let (bw, ba) = (w.add(i * W), a.add(i * A));
        // Grid values are in -127..=113, so |x| and |y| <= 127 and the maddubs pair sums
        // (<= 2 * 127 * 127) cannot saturate.
        let q = _mm_loadu_si128(bw.add(offset_of!(BlockIq4Nl, qs)).cast());
        let x = _mm256_shuffle_epi8(table, nibbles(q));
        dot_i8::<Maddubs>(
            x,
            _mm256_loadu_si256(ba.add(offset_of!(BlockQ8_0, qs)).cast()),
        )
    };
    const _: () = assert!(offset_of!(BlockIq4Nl, d) == 0 && offset_of!(BlockQ8_0, d) == 0);
    // SAFETY: the caller's guarantee, and both block types start with their f16 scale.
    unsafe { scaled_blocks::<true>(blocks, w, W, a, A, block) }
}

/// # Safety
/// `w` points to `blocks` IQ4_XS blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_xs_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let table = iq4nl_table();
    let m4 = _mm256_set1_epi8(0x0F);
    let mut acc = _mm256_setzero_ps();
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and stay
        // within the fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockIq4Xs>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let d = _mm256_mul_ps(
                f16_splat(bw.add(offset_of!(BlockIq4Xs, d))),
                _mm256_set1_ps(q8k_scale(ba)),
            );
            // The eight 6-bit sub-block scales as bytes: the 4-bit low parts (nibbles of
            // scales_l) and the 2-bit high parts (of scales_h), spread a word at a time.
            let scales_l = bw.add(offset_of!(BlockIq4Xs, scales_l));
            let mut lo = u64::from(scales_l.cast::<u32>().read_unaligned().to_le());
            lo = (lo | (lo << 16)) & 0x0000_FFFF_0000_FFFF;
            lo = (lo | (lo << 8)) & 0x00FF_00FF_00FF_00FF;
            lo = (lo | (lo << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
            let scales_h = bw.add(offset_of!(BlockIq4Xs, scales_h));
            let mut hi = u64::from(scales_h.cast::<u16>().read_unaligned().to_le());
            hi = (hi | (hi << 24)) & 0x0000_00FF_0000_00FF;
            hi = (hi | (hi << 12)) & 0x000F_000F_000F_000F;
            hi = (hi | (hi << 6)) & 0x0303_0303_0303_0303;
            // ls - 32 in -32..32, as i8.
            let sc = _mm_sub_epi8(
                _mm_cvtsi64_si128((lo | (hi << 4)) as i64),
                _mm_set1_epi8(32),
            );
            let qs = bw.add(offset_of!(BlockIq4Xs, qs));
            let ys = ba.add(offset_of!(BlockQ8K, qs));
            // Σ_ib (ls_ib - 32) * Σ x * y is exact in i32: grid values are in -127..=113, so
            // the maddubs pair sums (<= 2 * 127 * 127) cannot saturate, and 32 products per
            // sub-block times |ls - 32| <= 32 over 8 sub-blocks stay below 2^28.
            let mut sumi = _mm256_setzero_si256();
            for p in 0..4 {
                // Sub-blocks 2p and 2p + 1 side by side: low nibbles are their elements 0..16,
                // high nibbles 16..32; the activations are regrouped to match.
                let q = _mm256_loadu_si256(qs.add(32 * p).cast());
                let x_lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
                let x_hi =
                    _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
                let y0 = _mm256_loadu_si256(ys.add(64 * p).cast());
                let y1 = _mm256_loadu_si256(ys.add(64 * p + 32).cast());
                let y_lo = _mm256_permute2x128_si256::<0x20>(y0, y1);
                let y_hi = _mm256_permute2x128_si256::<0x31>(y0, y1);
                let sv = scale_pair(sc, 2 * p);
                let p_lo = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(
                        _mm256_sign_epi8(x_lo, x_lo),
                        _mm256_sign_epi8(y_lo, x_lo),
                    ),
                    sv,
                );
                let p_hi = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(
                        _mm256_sign_epi8(x_hi, x_hi),
                        _mm256_sign_epi8(y_hi, x_hi),
                    ),
                    sv,
                );
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc)
}
