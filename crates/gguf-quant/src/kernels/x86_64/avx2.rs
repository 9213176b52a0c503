//! AVX2 + FMA + F16C dot products for the common weight types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0,
//! IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, F16).
//!
//! Integer parts are exact, as in the scalar kernels; the float accumulation runs in eight
//! lanes and is summed at the end, so results differ from the scalar twins only by the order of
//! float additions (tests bound the difference; see `tests` below).
//!
//! The kernels walk the blocks through raw pointers: with slice iterators the bounds and
//! iterator bookkeeping cost up to a third of the throughput on short rows.

use std::arch::x86_64::*;

use super::super::{DotFn, RowsFn};
use crate::dequant::k_scale_min;
use crate::grids::KVALUES_IQ4NL;
use crate::GgmlType;

/// Whether this CPU runs these kernels (checked once by the dispatcher).
pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// The AVX2 kernel for weights of type `ty`, if this CPU has AVX2, FMA and F16C and there is one.
pub(crate) fn kernel(ty: GgmlType) -> Option<DotFn> {
    if !available() {
        return None;
    }
    Some(match ty {
        GgmlType::Q8_0 => q8_0_q8_0,
        GgmlType::Q4_0 => q4_0_q8_0,
        GgmlType::Q4_1 => q4_1_q8_1,
        GgmlType::Q4_K => q4_k_q8_k,
        GgmlType::Q6_K => q6_k_q8_k,
        GgmlType::Q5_0 => q5_0_q8_0,
        GgmlType::Q5_1 => q5_1_q8_1,
        GgmlType::IQ4_NL => iq4_nl_q8_0,
        GgmlType::IQ4_XS => iq4_xs_q8_k,
        GgmlType::Q5_K => q5_k_q8_k,
        GgmlType::Q3_K => q3_k_q8_k,
        GgmlType::Q2_K => q2_k_q8_k,
        GgmlType::F16 => f16_f16,
        _ => return None,
    })
}

/// The AVX2 kernel that computes several rows per call for weights of type `ty`, if there is one.
pub(crate) fn rows_kernel(ty: GgmlType) -> Option<RowsFn> {
    if !available() {
        return None;
    }
    Some(match ty {
        GgmlType::Q8_0 => q8_0_q8_0_rows,
        GgmlType::Q4_0 => q4_0_q8_0_rows,
        GgmlType::Q4_1 => q4_1_q8_1_rows,
        GgmlType::Q6_K => q6_k_q8_k_rows,
        GgmlType::Q4_K => q4_k_q8_k_rows,
        _ => return None,
    })
}

safe_wrapper!(q8_0_q8_0, q8_0_q8_0_avx2, Q8_0, rows: q8_0_q8_0_rows, group: 4);
safe_wrapper!(q4_0_q8_0, q4_0_q8_0_avx2, Q4_0, rows: q4_0_q8_0_rows, group: 4);
safe_wrapper!(q4_1_q8_1, q4_1_q8_1_avx2, Q4_1, rows: q4_1_q8_1_rows, group: 4);
safe_wrapper!(q4_k_q8_k, q4_k_q8_k_avx2, Q4_K, rows: q4_k_q8_k_rows, group: 1);
safe_wrapper!(q6_k_q8_k, q6_k_q8_k_avx2, Q6_K, rows: q6_k_q8_k_rows, group: 1);
safe_wrapper!(q5_0_q8_0, q5_0_q8_0_avx2, Q5_0);
safe_wrapper!(q5_1_q8_1, q5_1_q8_1_avx2, Q5_1);
safe_wrapper!(iq4_nl_q8_0, iq4_nl_q8_0_avx2, IQ4_NL);
safe_wrapper!(iq4_xs_q8_k, iq4_xs_q8_k_avx2, IQ4_XS);
safe_wrapper!(q5_k_q8_k, q5_k_q8_k_avx2, Q5_K);
safe_wrapper!(q3_k_q8_k, q3_k_q8_k_avx2, Q3_K);
safe_wrapper!(q2_k_q8_k, q2_k_q8_k_avx2, Q2_K);
safe_wrapper!(f16_f16, f16_f16_avx2, F16);

/// Sum of the eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// The eight 6-bit sub-block scales of a K-quant block as i16, in both 128-bit lanes, for
/// [`scaled_sub_blocks`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k_scales(sc: [u8; 8]) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(i64::from_le_bytes(sc))))
}

/// Sub-blocks `2k` (unsigned `q0` < 128 times signed `y0`) and `2k + 1` (`q1`, `y1`) of 32
/// values, each sum weighted by its scale from [`k_scales`], as eight i32 lane sums (the inner
/// step of Q4_K and Q5_K).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scaled_sub_blocks(
    q0: __m256i,
    y0: __m256i,
    q1: __m256i,
    y1: __m256i,
    scales: __m256i,
    k: usize,
) -> __m256i {
    // Scale j in every i16 lane: one byte shuffle.
    let scale = |j: usize| {
        let (lo, hi) = ((2 * j) as u8, (2 * j + 1) as u8);
        let pick = i64::from_le_bytes([lo, hi, lo, hi, lo, hi, lo, hi]);
        _mm256_shuffle_epi8(scales, _mm256_set1_epi64x(pick))
    };
    let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(q0, y0), scale(2 * k));
    let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(q1, y1), scale(2 * k + 1));
    _mm256_add_epi32(p0, p1)
}

/// The eight sums of 32 consecutive values of a Q8_K block (pairs of its 16-value `bsums`), as
/// i16 (|sum| <= 32 * 128).
///
/// # Safety
/// `q8k` must point to a Q8_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8k_sums32(q8k: *const u8) -> __m128i {
    // SAFETY: the bsums are bytes 260..292 of the block (caller); the load is unaligned.
    let bsums = unsafe { _mm256_loadu_si256(q8k.add(260).cast()) };
    _mm_hadd_epi16(
        _mm256_castsi256_si128(bsums),
        _mm256_extracti128_si256::<1>(bsums),
    )
}

/// Σ_j m_j * sums32[j] (the K-quant min correction) in four i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k_min_products(mn: [u8; 8], sums32: __m128i) -> __m128i {
    _mm_madd_epi16(
        _mm_cvtepu8_epi16(_mm_cvtsi64_si128(i64::from_le_bytes(mn))),
        sums32,
    )
}

/// What Q4_K and Q5_K blocks share against a Q8_K block with scale `da`: `d * da` for the
/// sub-block sums, the eight 6-bit scales as i16 ([`k_scales`]), and `acc_mins` plus the min
/// correction `dmin * da * Σ_j m_j * sums32[j]` (kept in four lanes until the end).
///
/// # Safety
/// `bw` must point to a Q4_K or Q5_K block (`d`, `dmin` and 12 scale bytes first).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn k_block_head(
    bw: *const u8,
    da: __m256,
    sums32: __m128i,
    acc_mins: __m128,
) -> (__m256, __m256i, __m128) {
    // SAFETY: the caller guarantees the block's first 16 bytes.
    let (d, dmin, (sc, mn)) = unsafe {
        (
            _mm256_mul_ps(da, f16_splat(bw)),
            _mm256_mul_ps(da, f16_splat(bw.add(2))),
            k_scale_min(std::slice::from_raw_parts(bw.add(4), 12)),
        )
    };
    let mins = _mm_fmadd_ps(
        _mm256_castps256_ps128(dmin),
        _mm_cvtepi32_ps(k_min_products(mn, sums32)),
        acc_mins,
    );
    (d, k_scales(sc), mins)
}

/// Sum of the four lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum4(v: __m128) -> f32 {
    let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Eight i32 lane sums of the products of 32 signed bytes `x` and `y`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_i8(x: __m256i, y: __m256i) -> __m256i {
    // maddubs needs an unsigned left operand: move x's sign onto y.
    let pairs = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
}

/// Eight i32 lane sums of the products of 32 unsigned bytes `u` (< 128) and signed bytes `y`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn dot_u8_i8(u: __m256i, y: __m256i) -> __m256i {
    _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1))
}

/// The 32 nibbles of 16 bytes, low nibbles (elements 0..16) first.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn nibbles(b: __m128i) -> __m256i {
    _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(b, 4), b),
        _mm256_set1_epi8(0x0F),
    )
}

/// The product of the two little-endian f16 values at `a` and `b`, broadcast to eight lanes.
///
/// Each value is broadcast as f16 and converted in all eight lanes at once (two instructions
/// each), rather than assembled in a register, converted and broadcast after the product.
///
/// # Safety
/// `a` and `b` must each point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_product(a: *const u8, b: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 2 readable bytes at each pointer.
    let (x, y) = unsafe {
        (
            a.cast::<i16>().read_unaligned(),
            b.cast::<i16>().read_unaligned(),
        )
    };
    _mm256_mul_ps(
        _mm256_cvtph_ps(_mm_set1_epi16(x)),
        _mm256_cvtph_ps(_mm_set1_epi16(y)),
    )
}

/// One little-endian f16 at `a` as f32.
///
/// Broadcast, then converted: building the vector with `_mm_cvtsi32_si128` lets LLVM insert
/// the value into whatever register is at hand (`vpinsrw`), often an accumulator, which chains
/// every block's conversion to the previous block's sum.
///
/// # Safety
/// `a` must point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_at(a: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes.
    let x = unsafe { a.cast::<i16>().read_unaligned() };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(x)))
}

/// The little-endian f16 at `a` as f32, in all eight lanes (a broadcast load and one
/// conversion; using every lane keeps LLVM from narrowing it to `vpinsrw`, see [`f16_at`]).
///
/// # Safety
/// `a` must point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_splat(a: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 2 readable bytes.
    let x = unsafe { a.cast::<i16>().read_unaligned() };
    _mm256_cvtph_ps(_mm_set1_epi16(x))
}

/// Asks for the cache line `ahead` bytes past `p` (0: none). Kernels that compute a group of
/// rows pass the group's size in bytes, so each block prefetches the same block of the next
/// group, and the rows stream in from L3 or memory while these are computed (Q8_0 mat-vec
/// 576x1536: 21 to 24 GB/s).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn prefetch(p: *const u8, ahead: usize) {
    if ahead != 0 {
        // A prefetch never faults, so the address may lie past the matrix (it does for the
        // last group); `wrapping_add` keeps computing it free of undefined behaviour.
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(ahead).cast());
    }
}

/// # Safety
/// Each of `ws` points to `blocks` Q8_0 blocks, and so does `a`. `ahead`: see [`prefetch`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_q8_0_avx2<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    // SAFETY: `two_accumulators` calls this only for r < R and i < blocks, so block i of each
    // operand is in bounds (caller); loads are unaligned.
    let block = |r: usize, i: usize| unsafe {
        let (bw, ba) = (ws[r].add(i * 34), a.add(i * 34));
        prefetch(bw, ahead);
        let x = _mm256_loadu_si256(bw.add(2).cast());
        let y = _mm256_loadu_si256(ba.add(2).cast());
        (f16_product(bw, ba), _mm256_cvtepi32_ps(dot_i8(x, y)))
    };
    two_accumulators(blocks, block)
}

/// Sums `d * v` over the blocks of each of `R` rows (`block(row, i)`), two blocks per step into
/// two accumulators per row, so consecutive fused multiply-adds do not wait on each other.
/// Every row is summed in the same order whatever `R` is, so a row's result does not depend on
/// the rows computed beside it.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn two_accumulators<const R: usize>(
    blocks: usize,
    block: impl Fn(usize, usize) -> (__m256, __m256),
) -> [f32; R] {
    let mut acc0 = [_mm256_setzero_ps(); R];
    let mut acc1 = [_mm256_setzero_ps(); R];
    let mut i = 0;
    while i + 1 < blocks {
        for r in 0..R {
            let (d0, v0) = block(r, i);
            let (d1, v1) = block(r, i + 1);
            acc0[r] = _mm256_fmadd_ps(d0, v0, acc0[r]);
            acc1[r] = _mm256_fmadd_ps(d1, v1, acc1[r]);
        }
        i += 2;
    }
    if i < blocks {
        for (r, acc) in acc0.iter_mut().enumerate() {
            let (d0, v0) = block(r, i);
            *acc = _mm256_fmadd_ps(d0, v0, *acc);
        }
    }
    let mut sums = [0f32; R];
    for r in 0..R {
        sums[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
    }
    sums
}

/// The products `d_w * d_a` of the f16 scales that start four consecutive blocks of each
/// operand (blocks `w_size` and `a_size` bytes long), as four f32 lanes.
///
/// # Safety
/// `w` and `a` must point to four such blocks each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_products4(w: *const u8, w_size: usize, a: *const u8, a_size: usize) -> __m128 {
    let gather = |p: *const u8, size: usize| {
        let mut bits = 0u64;
        for k in 0..4 {
            // SAFETY: the caller guarantees four blocks, each starting with 2 readable bytes.
            let x = unsafe { p.add(k * size).cast::<u16>().read_unaligned() };
            bits |= u64::from(x) << (16 * k);
        }
        _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64))
    };
    _mm_mul_ps(gather(w, w_size), gather(a, a_size))
}

/// Sums `d_i * v_i` over the blocks, where `d_i` is the product of the f16 scales that start
/// block i of `w` and `a` and `v_i` the eight i32 lane sums `block(i)`. Four blocks per step
/// share one f16 conversion per operand for their scales (7% faster for Q5_0 than converting
/// each block's pair on its own) and feed two accumulators.
///
/// # Safety
/// `w` and `a` must point to `blocks` blocks of `w_size` and `a_size` bytes, each starting
/// with its f16 scale.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scaled_blocks(
    blocks: usize,
    w: *const u8,
    w_size: usize,
    a: *const u8,
    a_size: usize,
    block: impl Fn(usize) -> __m256i,
) -> f32 {
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let v = |i: usize| _mm256_cvtepi32_ps(block(i));
    let mut i = 0;
    while i + 4 <= blocks {
        // SAFETY: blocks i..i + 4 of each operand are in bounds (caller).
        let d = unsafe { f16_products4(w.add(i * w_size), w_size, a.add(i * a_size), a_size) };
        acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(d), v(i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehdup_ps(d)), v(i + 1), acc1);
        acc0 = _mm256_fmadd_ps(_mm256_broadcastss_ps(_mm_movehl_ps(d, d)), v(i + 2), acc0);
        acc1 = _mm256_fmadd_ps(
            _mm256_broadcastss_ps(_mm_shuffle_ps::<0xFF>(d, d)),
            v(i + 3),
            acc1,
        );
        i += 4;
    }
    while i < blocks {
        // SAFETY: block i of each operand is in bounds (caller).
        let d = unsafe { f16_product(w.add(i * w_size), a.add(i * a_size)) };
        acc0 = _mm256_fmadd_ps(d, v(i), acc0);
        i += 1;
    }
    hsum(_mm256_add_ps(acc0, acc1))
}

/// # Safety
/// Each of `ws` points to `blocks` Q4_0 blocks and `a` to `blocks` Q8_0 blocks. `ahead`: see [`prefetch`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_q8_0_avx2<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let eight = _mm256_set1_epi8(8);
    // SAFETY: `two_accumulators` calls this only for r < R and i < blocks, so block i of each
    // operand is in bounds (caller); loads are unaligned.
    let block = |r: usize, i: usize| unsafe {
        let (bw, ba) = (ws[r].add(i * 18), a.add(i * 34));
        // One prefetch per 36 bytes (a cache line holds 3.6 blocks).
        if i.is_multiple_of(2) {
            prefetch(bw, ahead);
        }
        let q = nibbles(_mm_loadu_si128(bw.add(2).cast()));
        let y = _mm256_loadu_si256(ba.add(2).cast());
        // Pair sums of (q - 8) * y as q * y - 8 * y (each exact in i16: |q y| <= 15 * 128).
        // The 8 * y term depends on the activations only, so rows computed together share
        // it, and no sign juggling is needed since q is unsigned.
        let pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(eight, y));
        let v = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));
        (f16_product(bw, ba), _mm256_cvtepi32_ps(v))
    };
    two_accumulators(blocks, block)
}

/// # Safety
/// Each of `ws` points to `blocks` Q4_1 blocks and `a` to `blocks` Q8_1 blocks. `ahead`: see [`prefetch`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_q8_1_avx2<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    let mut mins = [0f32; R];
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned.
        unsafe {
            let ba = a.add(i * 36);
            let ads = _mm_cvtph_ps(_mm_cvtsi32_si128(ba.cast::<i32>().read_unaligned()));
            let y = _mm256_loadu_si256(ba.add(4).cast());
            for r in 0..R {
                let bw = ws[r].add(i * 20);
                prefetch(bw, ahead);
                // Lanes 0 and 1: d_w * d_a and m_w * s_a, from one conversion per operand.
                let wdm = _mm_cvtph_ps(_mm_cvtsi32_si128(bw.cast::<i32>().read_unaligned()));
                let p = _mm_mul_ps(wdm, ads);
                mins[r] += _mm_cvtss_f32(_mm_movehdup_ps(p));
                let d = _mm256_broadcastss_ps(p);
                let q = nibbles(_mm_loadu_si128(bw.add(4).cast()));
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8_i8(q, y)), acc[r]);
            }
        }
    }
    let mut sums = [0f32; R];
    for r in 0..R {
        sums[r] = hsum(acc[r]) + mins[r];
    }
    sums
}

/// # Safety
/// Each of `ws` points to `blocks` Q4_K blocks and `a` to `blocks` Q8_K blocks. `ahead`: see
/// [`prefetch`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_q8_k_avx2<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    _ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    let mut acc_mins = [_mm_setzero_ps(); R];
    let mask = _mm256_set1_epi8(0x0F);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the block's fields (d, dmin, scales at 4..16, qs at 16..144; the Q8_K
        // scale at 0..4, values at 4..260, bsums at 260..292).
        unsafe {
            let ba = a.add(i * 292);
            let da = _mm256_set1_ps(ba.cast::<f32>().read_unaligned());
            let ys = ba.add(4);
            let sums32 = q8k_sums32(ba);
            for r in 0..R {
                let bw = ws[r].add(i * 144);
                let (d, scales, mins) = k_block_head(bw, da, sums32, acc_mins[r]);
                acc_mins[r] = mins;
                let qs = bw.add(16);
                let mut sumi = _mm256_setzero_si256();
                for k in 0..4 {
                    let q = _mm256_loadu_si256(qs.add(32 * k).cast());
                    let y_lo = _mm256_loadu_si256(ys.add(64 * k).cast());
                    let y_hi = _mm256_loadu_si256(ys.add(64 * k + 32).cast());
                    let q_lo = _mm256_and_si256(q, mask);
                    let q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                    let p = scaled_sub_blocks(q_lo, y_lo, q_hi, y_hi, scales, k);
                    sumi = _mm256_add_epi32(sumi, p);
                }
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc[r]);
            }
        }
    }
    let mut sums = [0f32; R];
    for r in 0..R {
        sums[r] = hsum(acc[r]) - hsum4(acc_mins[r]);
    }
    sums
}

/// # Safety
/// Each of `ws` points to `blocks` Q6_K blocks and `a` to `blocks` Q8_K blocks. `ahead`: see [`prefetch`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_q8_k_avx2<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    let m4 = _mm256_set1_epi8(0x0F);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the fields (ql 0..128, qh 128..192, scales 192..208, d 208..210; the
        // Q8_K scale at 0..4, values at 4..260, bsums at 260..292).
        unsafe {
            let ba = a.add(i * 292);
            let ys = ba.add(4);
            let bsums = _mm256_loadu_si256(ba.add(260).cast());
            for r in 0..R {
                let bw = ws[r].add(i * 210);
                // A Q6_K block spans four cache lines.
                for line in 0..4 {
                    prefetch(bw.add(64 * line), ahead);
                }
                let (ql, qh) = (bw, bw.add(128));
                let d = _mm256_mul_ps(
                    _mm256_set1_ps(ba.cast::<f32>().read_unaligned()),
                    f16_splat(bw.add(208)),
                );
                let sc16 = _mm_loadu_si128(bw.add(192).cast());
                let sc = _mm256_broadcastsi128_si256(sc16);
                // The stored q is the value plus 32: Σ s_j (q - 32) y = Σ s_j q y - 32 Σ s_j b_j
                // over the 16-value sums b_j of y (Q8_K's bsums), one madd for the block.
                let offset =
                    _mm256_slli_epi32(_mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc16)), 5);
                let mut sumi = _mm256_setzero_si256();
                for h in 0..2 {
                    let l1 = _mm256_loadu_si256(ql.add(64 * h).cast());
                    let l2 = _mm256_loadu_si256(ql.add(64 * h + 32).cast());
                    let hb = _mm256_loadu_si256(qh.add(32 * h).cast());
                    // Six-bit values of the four 32-value groups: low nibble | two high bits.
                    let groups = [
                        _mm256_or_si256(
                            _mm256_and_si256(l1, m4),
                            _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x03)), 4),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(l2, m4),
                            _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x0C)), 2),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                            _mm256_and_si256(hb, _mm256_set1_epi8(0x30)),
                        ),
                        _mm256_or_si256(
                            _mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                            _mm256_srli_epi16(
                                _mm256_and_si256(hb, _mm256_set1_epi8(0xC0u8 as i8)),
                                2,
                            ),
                        ),
                    ];
                    let mut p = [_mm256_setzero_si256(); 4];
                    for (g, q) in groups.into_iter().enumerate() {
                        let y = _mm256_loadu_si256(ys.add(128 * h + 32 * g).cast());
                        // [s(2j) x 8, s(2j+1) x 8] as i16, j = 4h + g: each scale byte
                        // picked into the high byte of every i16 of its lane, then shifted
                        // down with its sign. (A 128-bit pick widened by `vpmovsxbw` is what
                        // ggml does, but LLVM turns that pick into three shuffles.)
                        let j = (4 * h + g) as u8;
                        let (lo, hi) = (2 * j, 2 * j + 1);
                        let pick = _mm256_set_epi64x(
                            i64::from_le_bytes([0x80, hi, 0x80, hi, 0x80, hi, 0x80, hi]),
                            i64::from_le_bytes([0x80, hi, 0x80, hi, 0x80, hi, 0x80, hi]),
                            i64::from_le_bytes([0x80, lo, 0x80, lo, 0x80, lo, 0x80, lo]),
                            i64::from_le_bytes([0x80, lo, 0x80, lo, 0x80, lo, 0x80, lo]),
                        );
                        let sv = _mm256_srai_epi16(_mm256_shuffle_epi8(sc, pick), 8);
                        p[g] = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), sv);
                    }
                    sumi = _mm256_add_epi32(
                        sumi,
                        _mm256_add_epi32(
                            _mm256_add_epi32(p[0], p[1]),
                            _mm256_add_epi32(p[2], p[3]),
                        ),
                    );
                }
                let sumi = _mm256_sub_epi32(sumi, offset);
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc[r]);
            }
        }
    }
    let mut sums = [0f32; R];
    for r in 0..R {
        sums[r] = hsum(acc[r]);
    }
    sums
}

/// 0xFF in byte `j` where bit `j` of `bits` is set, else 0 (the fifth bits of Q5_0/Q5_1).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn bit_bytes(bits: u32) -> __m256i {
    // Byte j takes byte j / 8 of `bits`: every dword holds all four, and each 128-bit lane
    // picks bytes 0, 1 (low lane) or 2, 3 (high lane) of its own copy.
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select)
}

/// # Safety
/// `w` points to `blocks` Q5_0 blocks and `a` to `blocks` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_q8_0_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let high = _mm256_set1_epi8(0xF0u8 as i8);
    // SAFETY: `scaled_blocks` calls this only for i < blocks, so block i of each operand is in
    // bounds (caller); loads are unaligned and stay within the fields (qh 2..6, qs 6..22; the
    // Q8_0 values 2..34).
    let block = |i: usize| unsafe {
        let (bw, ba) = (w.add(i * 22), a.add(i * 34));
        let qh = bw.add(2).cast::<u32>().read_unaligned().to_le();
        // q - 16 in -16..16: the nibble when the fifth bit is set, else nibble - 16, which as
        // an i8 is the nibble with the top four bits set.
        let x = _mm256_or_si256(
            nibbles(_mm_loadu_si128(bw.add(6).cast())),
            _mm256_andnot_si256(bit_bytes(qh), high),
        );
        dot_i8(x, _mm256_loadu_si256(ba.add(2).cast()))
    };
    // SAFETY: the caller's guarantee, and both block types start with their f16 scale.
    unsafe { scaled_blocks(blocks, w, 22, a, 34, block) }
}

/// # Safety
/// `w` points to `blocks` Q5_1 blocks and `a` to `blocks` Q8_1 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_1_q8_1_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let fifth = _mm256_set1_epi8(0x10);
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0f32;
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and stay
        // within the fields (d, m 0..4, qh 4..8, qs 8..24; the Q8_1 d, s 0..4, values 4..36).
        unsafe {
            let (bw, ba) = (w.add(i * 24), a.add(i * 36));
            // Lanes 0 and 1: d_w * d_a and m_w * s_a, from one conversion per operand.
            let wdm = _mm_cvtph_ps(_mm_cvtsi32_si128(bw.cast::<i32>().read_unaligned()));
            let ads = _mm_cvtph_ps(_mm_cvtsi32_si128(ba.cast::<i32>().read_unaligned()));
            let p = _mm_mul_ps(wdm, ads);
            mins += _mm_cvtss_f32(_mm_movehdup_ps(p));
            let d = _mm256_broadcastss_ps(p);
            let qh = bw.add(4).cast::<u32>().read_unaligned().to_le();
            // q in 0..32: the nibble plus 16 where the fifth bit is set.
            let q = _mm256_or_si256(
                nibbles(_mm_loadu_si128(bw.add(8).cast())),
                _mm256_and_si256(bit_bytes(qh), fifth),
            );
            let y = _mm256_loadu_si256(ba.add(4).cast());
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8_i8(q, y)), acc);
        }
    }
    hsum(acc) + mins
}

/// `kvalues_iq4nl` in both 128-bit lanes, for `_mm256_shuffle_epi8` lookups by nibble.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn iq4nl_table() -> __m256i {
    // SAFETY: the table is a static of 16 i8; the load is unaligned.
    let t = unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()) };
    _mm256_broadcastsi128_si256(t)
}

/// # Safety
/// `w` points to `blocks` IQ4_NL blocks and `a` to `blocks` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_nl_q8_0_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let table = iq4nl_table();
    // SAFETY: `scaled_blocks` calls this only for i < blocks, so block i of each operand is in
    // bounds (caller); loads are unaligned.
    let block = |i: usize| unsafe {
        let (bw, ba) = (w.add(i * 18), a.add(i * 34));
        // Grid values are in -127..=113, so |x| and |y| <= 127 and the maddubs pair sums
        // (<= 2 * 127 * 127) cannot saturate.
        let x = _mm256_shuffle_epi8(table, nibbles(_mm_loadu_si128(bw.add(2).cast())));
        dot_i8(x, _mm256_loadu_si256(ba.add(2).cast()))
    };
    // SAFETY: the caller's guarantee, and both block types start with their f16 scale.
    unsafe { scaled_blocks(blocks, w, 18, a, 34, block) }
}

/// The scales of sub-blocks `j` and `j + 1` (bytes `j`, `j + 1` of `sc16`, signed) as 16 i16
/// lanes: eight of scale `j`, then eight of scale `j + 1`, matching the i16 pair sums of 32
/// values whose first 16 belong to sub-block `j`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scale_pair(sc16: __m128i, j: usize) -> __m256i {
    let j = j as u8;
    let pick = _mm_set_epi64x(i64::from_ne_bytes([j + 1; 8]), i64::from_ne_bytes([j; 8]));
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc16, pick))
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
        // within the fields (d 0..2, scales_h 2..4, scales_l 4..8, qs 8..136; the Q8_K scale at
        // 0..4 and values at 4..260).
        unsafe {
            let (bw, ba) = (w.add(i * 136), a.add(i * 292));
            let d = _mm256_mul_ps(
                f16_splat(bw),
                _mm256_set1_ps(ba.cast::<f32>().read_unaligned()),
            );
            // The eight 6-bit sub-block scales as bytes: the 4-bit low parts (nibbles of
            // scales_l) and the 2-bit high parts (of scales_h), spread a word at a time.
            let mut lo = u64::from(bw.add(4).cast::<u32>().read_unaligned().to_le());
            lo = (lo | (lo << 16)) & 0x0000_FFFF_0000_FFFF;
            lo = (lo | (lo << 8)) & 0x00FF_00FF_00FF_00FF;
            lo = (lo | (lo << 4)) & 0x0F0F_0F0F_0F0F_0F0F;
            let mut hi = u64::from(bw.add(2).cast::<u16>().read_unaligned().to_le());
            hi = (hi | (hi << 24)) & 0x0000_00FF_0000_00FF;
            hi = (hi | (hi << 12)) & 0x000F_000F_000F_000F;
            hi = (hi | (hi << 6)) & 0x0303_0303_0303_0303;
            // ls - 32 in -32..32, as i8.
            let sc = _mm_sub_epi8(
                _mm_cvtsi64_si128((lo | (hi << 4)) as i64),
                _mm_set1_epi8(32),
            );
            let (qs, ys) = (bw.add(8), ba.add(4));
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

/// # Safety
/// `w` points to `blocks` Q5_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_k_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_mins = _mm_setzero_ps();
    let mask = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the block's fields (d, dmin, scales at 4..16, qh at 16..48, qs at
        // 48..176; the Q8_K scale at 0..4, values at 4..260, bsums at 260..292).
        unsafe {
            let (bw, ba) = (w.add(i * 176), a.add(i * 292));
            let da = _mm256_set1_ps(ba.cast::<f32>().read_unaligned());
            let (d, scales, mins) = k_block_head(bw, da, q8k_sums32(ba), acc_mins);
            acc_mins = mins;
            let (qs, ys) = (bw.add(48), ba.add(4));
            // Bits 2k and 2k+1 of qh[l] are the fifth bits of elements 64k + l and 64k + 32 + l;
            // shifting the whole vector right by 2 per step keeps them at bits 0 and 1 of each
            // byte (at most 7 bits of shift, so no bit of the next byte reaches them).
            let mut hb = _mm256_loadu_si256(bw.add(16).cast());
            let mut sumi = _mm256_setzero_si256();
            for k in 0..4 {
                let q = _mm256_loadu_si256(qs.add(32 * k).cast());
                let y_lo = _mm256_loadu_si256(ys.add(64 * k).cast());
                let y_hi = _mm256_loadu_si256(ys.add(64 * k + 32).cast());
                // q in 0..32, so the maddubs pair sums (<= 2 * 31 * 128) and their products
                // with 6-bit scales cannot overflow.
                let q_lo = _mm256_or_si256(
                    _mm256_and_si256(q, mask),
                    _mm256_slli_epi16(_mm256_and_si256(hb, one), 4),
                );
                let q_hi = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(q, 4), mask),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4),
                );
                hb = _mm256_srli_epi16(hb, 2);
                let p = scaled_sub_blocks(q_lo, y_lo, q_hi, y_hi, scales, k);
                sumi = _mm256_add_epi32(sumi, p);
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc) - hsum4(acc_mins)
}

/// # Safety
/// `w` points to `blocks` Q3_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3_k_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let mut acc = _mm256_setzero_ps();
    let m3 = _mm256_set1_epi8(3);
    let one = _mm256_set1_epi8(1);
    let four = _mm256_set1_epi8(4);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the fields (hmask 0..32, qs 32..96, scales 96..108, d 108..110; the
        // Q8_K scale at 0..4 and values at 4..260).
        unsafe {
            let (bw, ba) = (w.add(i * 110), a.add(i * 292));
            let d = _mm256_mul_ps(
                f16_splat(bw.add(108)),
                _mm256_set1_ps(ba.cast::<f32>().read_unaligned()),
            );
            // The sixteen 6-bit scales, unpacked a word at a time, minus 32 (as i8).
            let sc = bw.add(96);
            let a0 = sc.cast::<u32>().read_unaligned().to_le();
            let a1 = sc.add(4).cast::<u32>().read_unaligned().to_le();
            let tmp = sc.add(8).cast::<u32>().read_unaligned().to_le();
            let sc16 = _mm_sub_epi8(
                _mm_set_epi32(
                    (((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4)) as i32,
                    (((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4)) as i32,
                    ((a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4)) as i32,
                    ((a0 & KMASK2) | ((tmp & KMASK1) << 4)) as i32,
                ),
                _mm_set1_epi8(32),
            );
            // Bit 4h + s of hmask[l] is the high bit of element 128h + 32s + l; shifting right
            // by one per step keeps it at bit 0 of each byte (at most 7 bits of shift).
            let mut hb = _mm256_loadu_si256(bw.cast());
            let ys = ba.add(4);
            let mut sumi = _mm256_setzero_si256();
            for h in 0..2 {
                let mut q = _mm256_loadu_si256(bw.add(32 + 32 * h).cast());
                for s in 0..4 {
                    // Value q2 - 4 * !hbit = (q2 | hbit << 2) - 4, computed as
                    // (q2 | hbit << 2) * y - 4 * y with the unsigned part (0..8) in maddubs; both
                    // pair sums and their difference fit in i16 (|.| <= 2 * 7 * 128).
                    let u = _mm256_or_si256(
                        _mm256_and_si256(q, m3),
                        _mm256_slli_epi16(_mm256_and_si256(hb, one), 2),
                    );
                    q = _mm256_srli_epi16(q, 2);
                    hb = _mm256_srli_epi16(hb, 1);
                    let y = _mm256_loadu_si256(ys.add(128 * h + 32 * s).cast());
                    let p =
                        _mm256_sub_epi16(_mm256_maddubs_epi16(u, y), _mm256_maddubs_epi16(four, y));
                    let sv = scale_pair(sc16, 8 * h + 2 * s);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sv));
                }
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc)
}

/// # Safety
/// `w` points to `blocks` Q2_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_k_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_mins = _mm256_setzero_ps();
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0x0F);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the fields (scales 0..16, qs 16..80, d 80..82, dmin 82..84; the Q8_K
        // scale at 0..4, values at 4..260, bsums at 260..292).
        unsafe {
            let (bw, ba) = (w.add(i * 84), a.add(i * 292));
            let da = ba.cast::<f32>().read_unaligned();
            let dall = _mm256_mul_ps(_mm256_set1_ps(da), f16_splat(bw.add(80)));
            let dmin = _mm256_mul_ps(_mm256_set1_ps(da), f16_splat(bw.add(82)));
            let sc = _mm_loadu_si128(bw.cast());
            // Σ_j bsums[j] * (sc[j] >> 4): |bsum| <= 16 * 128 and mins < 16, exact in i32.
            let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
            let bsums = _mm256_loadu_si256(ba.add(260).cast());
            acc_mins = _mm256_fmadd_ps(
                dmin,
                _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)),
                acc_mins,
            );
            let scales = _mm_and_si128(sc, m4);
            let ys = ba.add(4);
            let mut sumi = _mm256_setzero_si256();
            for k in 0..2 {
                // Bits 2s of q2[32k + l] are element 128k + 32s + l; shifting right by two per
                // step keeps them at bits 0 and 1 of each byte (at most 6 bits of shift).
                let mut q = _mm256_loadu_si256(bw.add(16 + 32 * k).cast());
                for s in 0..4 {
                    let x = _mm256_and_si256(q, m3);
                    q = _mm256_srli_epi16(q, 2);
                    let y = _mm256_loadu_si256(ys.add(128 * k + 32 * s).cast());
                    let sv = scale_pair(scales, 8 * k + 2 * s);
                    sumi =
                        _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), sv));
                }
            }
            acc = _mm256_fmadd_ps(dall, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc) - hsum(acc_mins)
}

/// # Safety
/// `w` and `a` point to `n` little-endian f16 values each.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_f16_avx2(n: usize, w: *const u8, a: *const u8) -> f32 {
    // Products of two f16 values are exact in f32; four accumulators of eight lanes hide the
    // latency of the fused multiply-adds.
    // SAFETY: called below only with i + 8 <= n, so the 16 bytes at element i of each operand
    // are in bounds (caller); loads are unaligned.
    let prod = |i: usize| unsafe {
        (
            _mm256_cvtph_ps(_mm_loadu_si128(w.add(2 * i).cast())),
            _mm256_cvtph_ps(_mm_loadu_si128(a.add(2 * i).cast())),
        )
    };
    let mut acc = [_mm256_setzero_ps(); 4];
    let mut i = 0;
    while i + 32 <= n {
        for (k, acc) in acc.iter_mut().enumerate() {
            let (x, y) = prod(i + 8 * k);
            *acc = _mm256_fmadd_ps(x, y, *acc);
        }
        i += 32;
    }
    while i + 8 <= n {
        let (x, y) = prod(i);
        acc[0] = _mm256_fmadd_ps(x, y, acc[0]);
        i += 8;
    }
    let mut sum = hsum(_mm256_add_ps(
        _mm256_add_ps(acc[0], acc[1]),
        _mm256_add_ps(acc[2], acc[3]),
    ));
    while i < n {
        // SAFETY: i < n, so element i of each operand is in bounds (caller).
        sum += unsafe { f16_at(w.add(2 * i)) * f16_at(a.add(2 * i)) };
        i += 1;
    }
    sum
}

/// Quantizes activations to Q8_0 (`with_sum == false`) or Q8_1 (`true`: the block also stores
/// `d * Σq`) as ggml's x86 `quantize_row_q8_0`/`q8_1` do: the inverse scale is `127 / amax` and
/// values round to nearest even. These are the bytes llama.cpp's matrix products use on an AVX2
/// machine; they differ from the reference quantizer's (`1 / (amax / 127)`, ties away from
/// zero) in a few values per thousand. Returns `false` when this CPU lacks AVX2/FMA/F16C
/// (nothing written).
pub(crate) fn quantize_q8(x: &[f32], out: &mut [u8], with_sum: bool) -> bool {
    if !available() {
        return false;
    }
    let size = if with_sum { 36 } else { 34 };
    for (xb, yb) in x.chunks_exact(32).zip(out.chunks_exact_mut(size)) {
        // SAFETY: AVX2/FMA/F16C were detected above; `xb` holds 32 floats and `yb` `size` bytes.
        unsafe { quantize_q8_block(xb.as_ptr(), yb.as_mut_ptr(), with_sum) };
    }
    true
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
/// Returns `false` when this CPU lacks AVX2/FMA/F16C (nothing written).
pub(crate) fn quantize_q8_k(x: &[f32], out: &mut [u8]) -> bool {
    if !available() {
        return false;
    }
    for (xb, yb) in x.chunks_exact(256).zip(out.chunks_exact_mut(292)) {
        // SAFETY: AVX2/FMA/F16C were detected above; `xb` holds 256 floats and `yb` 292 bytes.
        let done = unsafe { quantize_q8_k_block(xb.as_ptr(), yb.as_mut_ptr()) };
        if !done {
            crate::quant::quantize_row(GgmlType::Q8_K, xb, yb).ok();
        }
    }
    true
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::simd_tests::{
        activation_test_rows, activations, assert_same_as_reference,
        assert_within_reordering_bound, weights, Rng,
    };

    #[test]
    fn activation_quantizers_match_the_references_byte_for_byte() {
        if !available() {
            eprintln!("skipping: no AVX2/FMA/F16C on this CPU");
            return;
        }
        // Q8_0 and Q8_1 follow ggml's AVX2 quantizers instead (tests/activation_quant.rs).
        for x in activation_test_rows(&mut Rng(0xACE1_2345_6789_0001)) {
            let mut q8_k = vec![0u8; x.len() / 256 * 292];
            assert!(quantize_q8_k(&x, &mut q8_k));
            assert_same_as_reference(GgmlType::Q8_K, &x, &q8_k);
        }
    }

    /// Every AVX2 kernel against its scalar twin (see `assert_within_reordering_bound`).
    #[test]
    fn avx2_matches_scalar_within_reordering_bound() {
        if !available() {
            eprintln!("skipping: no AVX2/FMA on this CPU");
            return;
        }
        let cases: &[(GgmlType, &[usize])] = &[
            (GgmlType::Q8_0, &[0]),
            (GgmlType::Q4_0, &[0]),
            (GgmlType::Q4_1, &[0, 2]),
            (GgmlType::Q4_K, &[0, 2]),
            (GgmlType::Q6_K, &[208]),
            (GgmlType::Q5_0, &[0]),
            (GgmlType::Q5_1, &[0, 2]),
            (GgmlType::IQ4_NL, &[0]),
            (GgmlType::IQ4_XS, &[0]),
            (GgmlType::Q5_K, &[0, 2]),
            (GgmlType::Q3_K, &[108]),
            (GgmlType::Q2_K, &[80, 82]),
            // Every F16 value is a "scale": finite, 2^-10 .. 2^2 in magnitude.
            (GgmlType::F16, &[0]),
        ];
        let mut rng = Rng(0x1234_5678_9ABC_DEF1);
        for &(ty, offsets) in cases {
            let simd = kernel(ty).expect("AVX2 kernel");
            // Row lengths of 1, 3, 7 and 45 blocks (or values, for F16) reach every tail of
            // the kernels' multi-block steps.
            let per = ty.block_size() as usize;
            for n in [256usize, 1024, 4096]
                .into_iter()
                .chain([1, 3, 7, 45].map(|k| k * per))
            {
                for _ in 0..20 {
                    let w = weights(ty, n, offsets, &mut rng);
                    let a = activations(ty, n, &mut rng);
                    assert_within_reordering_bound(ty, n, &w, &a, simd(n, &w, &a), "avx2");
                }
            }
        }
    }
}
