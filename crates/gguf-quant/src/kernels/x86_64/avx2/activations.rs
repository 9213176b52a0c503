//! ggml's x86 activation quantizers: Q8_0 and Q8_1 as llama.cpp's AVX2 build quantizes them,
//! and Q8_K with the reference quantizer's bytes.

use std::arch::x86_64::*;
use std::mem::offset_of;

use crate::blocks::{BlockQ8K, BlockQ8_0, BlockQ8_1, QK_K};
use crate::GgmlType;

/// Quantizes activations to Q8_0 as ggml's x86 `quantize_row_q8_0` does: the inverse scale is
/// `127 / amax` and values round to nearest even. These are the bytes llama.cpp's matrix
/// products use on an AVX2 machine; they differ from the reference quantizer's
/// (`1 / (amax / 127)`, ties away from zero) in a few values per thousand.
pub(super) fn quantize_q8_0(x: &[f32], out: &mut [u8]) {
    quantize_q8(x, out, false);
}

/// Quantizes activations to Q8_1 as ggml's x86 `quantize_row_q8_1` does: [`quantize_q8_0`]'s
/// values, and the block also stores `d * Σq`.
pub(super) fn quantize_q8_1(x: &[f32], out: &mut [u8]) {
    quantize_q8(x, out, true);
}

fn quantize_q8(x: &[f32], out: &mut [u8], with_sum: bool) {
    let size = if with_sum {
        size_of::<BlockQ8_1>()
    } else {
        size_of::<BlockQ8_0>()
    };
    for (xb, yb) in x.chunks_exact(32).zip(out.chunks_exact_mut(size)) {
        // SAFETY: the CPU has AVX2/FMA/F16C (this module's functions are handed out only by
        // `kernels()`, after `available()`); `xb` holds 32 floats and `yb` `size` bytes.
        unsafe { quantize_q8_block(xb.as_ptr(), yb.as_mut_ptr(), with_sum) };
    }
}

/// One Q8_0 or Q8_1 block, instruction for instruction as ggml's AVX2 code (including what
/// `maxps` does with NaN and what the saturating packs do with out-of-range values).
///
/// # Safety
/// `x` points to 32 readable floats and `y` to a writable Q8_0 (or, `with_sum`, Q8_1) block.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_q8_block(x: *const f32, y: *mut u8, with_sum: bool) {
    // SAFETY: 32 floats are readable at `x` (caller); loads are unaligned.
    let v = unsafe {
        [
            _mm256_loadu_ps(x),
            _mm256_loadu_ps(x.add(8)),
            _mm256_loadu_ps(x.add(16)),
            _mm256_loadu_ps(x.add(24)),
        ]
    };
    let sign = _mm256_set1_ps(-0.0);
    let mut max = _mm256_andnot_ps(sign, v[0]);
    for &v in &v[1..] {
        max = _mm256_max_ps(max, _mm256_andnot_ps(sign, v));
    }
    let m = _mm_max_ps(_mm256_extractf128_ps(max, 1), _mm256_castps256_ps128(max));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    let d = amax / 127.0;
    let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
    let idv = _mm256_set1_ps(id);
    let mut q = [_mm256_setzero_si256(); 4];
    for (q, &v) in q.iter_mut().zip(&v) {
        let r = _mm256_round_ps(_mm256_mul_ps(v, idv), _MM_FROUND_TO_NEAREST_INT);
        *q = _mm256_cvtps_epi32(r);
    }
    let p8 = pack_i8(q);
    let values_at = if with_sum {
        offset_of!(BlockQ8_1, qs)
    } else {
        offset_of!(BlockQ8_0, qs)
    };
    // SAFETY: the block is writable at `y` (caller); stores are unaligned.
    unsafe {
        y.add(offset_of!(BlockQ8_0, d))
            .cast::<[u8; 2]>()
            .write(crate::fp::f16_bytes(d));
        if with_sum {
            let all = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            y.add(offset_of!(BlockQ8_1, s))
                .cast::<[u8; 2]>()
                .write(crate::fp::f16_bytes(d * hsum_i32(all) as f32));
        }
        _mm256_storeu_si256(y.add(values_at).cast(), p8);
    }
}

// `quantize_q8_block` writes both block types' scale at the same place.
const _: () = assert!(offset_of!(BlockQ8_0, d) == offset_of!(BlockQ8_1, d));

/// The 32 i32 lanes of `q` as saturated i8 in element order (the packs interleave the 128-bit
/// lanes; a permutation puts them back).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn pack_i8(q: [__m256i; 4]) -> __m256i {
    let p16a = _mm256_packs_epi32(q[0], q[1]);
    let p16b = _mm256_packs_epi32(q[2], q[3]);
    let p8 = _mm256_packs_epi16(p16a, p16b);
    _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7))
}

/// The wrapping sum of the eight i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)))
}

/// Quantizes activations to Q8_K exactly as the reference quantizer does (same bytes). Blocks
/// holding a NaN or an infinity, all-zero blocks and blocks whose inverse scale overflows go
/// through the scalar reference.
pub(super) fn quantize_q8_k(x: &[f32], out: &mut [u8]) {
    for (xb, yb) in x
        .chunks_exact(QK_K)
        .zip(out.chunks_exact_mut(size_of::<BlockQ8K>()))
    {
        // SAFETY: the CPU has AVX2/FMA/F16C (see `quantize_q8`); `xb` holds 256 floats and `yb`
        // a Q8_K block.
        let done = unsafe { quantize_q8_k_block(xb.as_ptr(), yb.as_mut_ptr()) };
        if !done {
            crate::quant::quantize_row(GgmlType::Q8_K, xb, yb).ok();
        }
    }
}

/// One Q8_K block; `false` (nothing written) for the cases left to the scalar reference.
///
/// # Safety
/// `x` points to 256 readable floats and `y` to a writable Q8_K block.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn quantize_q8_k_block(x: *const f32, y: *mut u8) -> bool {
    let abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFF_FFFF));
    let inf = _mm256_set1_ps(f32::INFINITY);
    let mut v = [_mm256_setzero_ps(); 32];
    let mut max = _mm256_setzero_ps();
    let mut bad = _mm256_setzero_ps();
    for (k, v) in v.iter_mut().enumerate() {
        // SAFETY: 256 floats are readable at `x` (caller); loads are unaligned.
        *v = unsafe { _mm256_loadu_ps(x.add(8 * k)) };
        let a = _mm256_and_ps(*v, abs_mask);
        // NaN is unordered and infinity equals infinity: both flag the block.
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(a, inf, _CMP_NLT_UQ));
        max = _mm256_max_ps(max, a);
    }
    if _mm256_movemask_ps(bad) != 0 {
        return false;
    }
    let m = _mm_max_ps(_mm256_castps256_ps128(max), _mm256_extractf128_ps(max, 1));
    let m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    let amax = _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
    if amax == 0.0 {
        return false;
    }
    // The reference keeps the first value of largest magnitude, with its sign.
    let target = _mm256_set1_ps(amax);
    let mut signed_max = amax;
    for (k, &v) in v.iter().enumerate() {
        let hits = _mm256_movemask_ps(_mm256_cmp_ps(
            _mm256_and_ps(v, abs_mask),
            target,
            _CMP_EQ_OQ,
        ));
        if hits != 0 {
            // SAFETY: lane `hits.trailing_zeros()` of vector k is element 8k + lane < 256.
            signed_max = unsafe { x.add(8 * k + hits.trailing_zeros() as usize).read() };
            break;
        }
    }
    let iscale = -127.0 / signed_max;
    if !iscale.is_finite() {
        // A subnormal maximum: the reference's bit-trick rounding of infinite products is left
        // to the scalar path.
        return false;
    }
    let scale = _mm256_set1_ps(iscale);
    // Round to nearest, ties to even: the reference's `nearest_int` for |values| < 2^22.
    let mut q = [_mm256_setzero_si256(); 32];
    for (q, &v) in q.iter_mut().zip(&v) {
        *q = _mm256_cvtps_epi32(_mm256_mul_ps(scale, v));
    }
    let (qs, bsums) = (offset_of!(BlockQ8K, qs), offset_of!(BlockQ8K, bsums));
    // SAFETY: the block is writable at `y` (caller); stores are unaligned.
    unsafe {
        y.add(offset_of!(BlockQ8K, d))
            .cast::<[u8; 4]>()
            .write((1.0 / iscale).to_le_bytes());
        for g in 0..8 {
            // Saturating packs clamp to 127 as the reference's `min(127)` does (values never
            // fall below -127 here).
            let p8 = pack_i8([q[4 * g], q[4 * g + 1], q[4 * g + 2], q[4 * g + 3]]);
            _mm256_storeu_si256(y.add(qs + 32 * g).cast(), p8);
        }
        // Sums of each 16 stored values (after the clamp), from the stored bytes.
        for g in 0..16 {
            let bytes = _mm_loadu_si128(y.add(qs + 16 * g).cast());
            let wide = _mm256_cvtepi8_epi16(bytes);
            let sum = hsum_i32(_mm256_madd_epi16(wide, _mm256_set1_epi16(1)));
            y.add(bsums + 2 * g)
                .cast::<[u8; 2]>()
                .write((sum as i16).to_le_bytes());
        }
    }
    true
}
