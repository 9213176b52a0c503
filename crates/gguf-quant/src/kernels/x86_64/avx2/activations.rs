//! ggml's x86 activation quantizers: Q8_0 and Q8_1 as llama.cpp's AVX2 build quantizes them,
//! and Q8_K with the reference quantizer's bytes.

use std::arch::x86_64::*;

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
    let size = if with_sum { 36 } else { 34 };
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
/// `x` points to 32 readable floats and `y` to 34 (Q8_0) or 36 (Q8_1) writable bytes.
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
    // Pack 32 i32 lanes to i8 in element order (packs interleave 128-bit lanes; permute back).
    let p16a = _mm256_packs_epi32(q[0], q[1]);
    let p16b = _mm256_packs_epi32(q[2], q[3]);
    let p8 = _mm256_packs_epi16(p16a, p16b);
    let p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    let values_at = if with_sum { 4 } else { 2 };
    // SAFETY: 34 or 36 bytes are writable at `y` (caller); stores are unaligned.
    unsafe {
        y.cast::<[u8; 2]>().write(crate::fp::f16_bytes(d));
        if with_sum {
            let all = _mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3]));
            let s = _mm_add_epi32(
                _mm256_castsi256_si128(all),
                _mm256_extracti128_si256(all, 1),
            );
            let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
            let sum = _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
            y.add(2)
                .cast::<[u8; 2]>()
                .write(crate::fp::f16_bytes(d * sum as f32));
        }
        _mm256_storeu_si256(y.add(values_at).cast(), p8);
    }
}

/// Quantizes activations to Q8_K exactly as the reference quantizer does (same bytes). Blocks
/// holding a NaN or an infinity, all-zero blocks and blocks whose inverse scale overflows go
/// through the scalar reference.
pub(super) fn quantize_q8_k(x: &[f32], out: &mut [u8]) {
    for (xb, yb) in x.chunks_exact(256).zip(out.chunks_exact_mut(292)) {
        // SAFETY: the CPU has AVX2/FMA/F16C (see `quantize_q8`); `xb` holds 256 floats and `yb`
        // 292 bytes.
        let done = unsafe { quantize_q8_k_block(xb.as_ptr(), yb.as_mut_ptr()) };
        if !done {
            crate::quant::quantize_row(GgmlType::Q8_K, xb, yb).ok();
        }
    }
}

/// One Q8_K block; `false` (nothing written) for the cases left to the scalar reference.
///
/// # Safety
/// `x` points to 256 readable floats and `y` to 292 writable bytes.
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
    // SAFETY: 292 bytes are writable at `y` (caller): d at 0..4, values at 4..260, bsums at
    // 260..292; stores are unaligned.
    unsafe {
        y.cast::<[u8; 4]>().write((1.0 / iscale).to_le_bytes());
        for g in 0..8 {
            // Saturating packs clamp to 127 as the reference's `min(127)` does (values never
            // fall below -127 here).
            let p16a = _mm256_packs_epi32(q[4 * g], q[4 * g + 1]);
            let p16b = _mm256_packs_epi32(q[4 * g + 2], q[4 * g + 3]);
            let p8 = _mm256_packs_epi16(p16a, p16b);
            let p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
            _mm256_storeu_si256(y.add(4 + 32 * g).cast(), p8);
        }
        // Sums of each 16 stored values (after the clamp), from the stored bytes.
        for g in 0..16 {
            let bytes = _mm_loadu_si128(y.add(4 + 16 * g).cast());
            let wide = _mm256_cvtepi8_epi16(bytes);
            let pairs = _mm256_madd_epi16(wide, _mm256_set1_epi16(1));
            let s = _mm_add_epi32(
                _mm256_castsi256_si128(pairs),
                _mm256_extracti128_si256(pairs, 1),
            );
            let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
            let sum = _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32(s, 1)));
            y.add(260 + 2 * g)
                .cast::<[u8; 2]>()
                .write((sum as i16).to_le_bytes());
        }
    }
    true
}
