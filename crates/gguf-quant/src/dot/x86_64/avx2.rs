//! AVX2 + FMA + F16C dot products for the hot weight types (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K).
//!
//! Integer parts are exact, as in the scalar kernels; the float accumulation runs in eight
//! lanes and is summed at the end, so results differ from the scalar twins only by the order of
//! float additions (tests bound the difference; see `tests` below).
//!
//! The kernels walk the blocks through raw pointers: with slice iterators the bounds and
//! iterator bookkeeping cost up to a third of the throughput on short rows.

use std::arch::x86_64::*;

use super::super::DotFn;
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
        _ => return None,
    })
}

// Each safe wrapper is reachable only through `kernel`, which returns it only after
// `available()` confirmed AVX2, FMA and F16C; the public entry points checked that `w` and `a`
// hold exactly the blocks for `n` elements.
macro_rules! safe_wrapper {
    ($name:ident, $inner:ident, $w_block:expr, $a_block:expr, $elements:expr) => {
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let blocks = n / $elements;
            assert!(w.len() >= blocks * $w_block && a.len() >= blocks * $a_block);
            // SAFETY: see the comment above the macro; the assert makes the block count the
            // kernel reads from each pointer a bound check, so even a wrong caller cannot
            // make it read out of bounds.
            unsafe { $inner(blocks, w.as_ptr(), a.as_ptr()) }
        }
    };
}

safe_wrapper!(q8_0_q8_0, q8_0_q8_0_avx2, 34, 34, 32);
safe_wrapper!(q4_0_q8_0, q4_0_q8_0_avx2, 18, 34, 32);
safe_wrapper!(q4_1_q8_1, q4_1_q8_1_avx2, 20, 36, 32);
safe_wrapper!(q4_k_q8_k, q4_k_q8_k_avx2, 144, 292, 256);
safe_wrapper!(q6_k_q8_k, q6_k_q8_k_avx2, 210, 292, 256);

/// Sum of the eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
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
/// # Safety
/// `a` and `b` must each point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_product(a: *const u8, b: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 2 readable bytes at each pointer.
    let (x, y) = unsafe {
        (
            a.cast::<u16>().read_unaligned(),
            b.cast::<u16>().read_unaligned(),
        )
    };
    let v = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(x) | (i32::from(y) << 16)));
    _mm256_broadcastss_ps(_mm_mul_ss(v, _mm_movehdup_ps(v)))
}

/// One little-endian f16 at `a` as f32.
///
/// # Safety
/// `a` must point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_at(a: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes.
    let x = unsafe { a.cast::<u16>().read_unaligned() };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(x))))
}

/// # Safety
/// `w` and `a` point to `blocks` Q8_0 blocks each.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_q8_0_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    // SAFETY: `two_accumulators` calls this only for i < blocks, so block i of each operand is
    // in bounds (caller); loads are unaligned.
    let block = |i: usize| unsafe {
        let (bw, ba) = (w.add(i * 34), a.add(i * 34));
        let x = _mm256_loadu_si256(bw.add(2).cast());
        let y = _mm256_loadu_si256(ba.add(2).cast());
        (f16_product(bw, ba), _mm256_cvtepi32_ps(dot_i8(x, y)))
    };
    two_accumulators(blocks, block)
}

/// Sums `d * v` over the blocks, two blocks per step into two accumulators, so consecutive
/// fused multiply-adds do not wait on each other.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn two_accumulators(blocks: usize, block: impl Fn(usize) -> (__m256, __m256)) -> f32 {
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let mut i = 0;
    while i + 1 < blocks {
        let (d0, v0) = block(i);
        let (d1, v1) = block(i + 1);
        acc0 = _mm256_fmadd_ps(d0, v0, acc0);
        acc1 = _mm256_fmadd_ps(d1, v1, acc1);
        i += 2;
    }
    if i < blocks {
        let (d0, v0) = block(i);
        acc0 = _mm256_fmadd_ps(d0, v0, acc0);
    }
    hsum(_mm256_add_ps(acc0, acc1))
}

/// # Safety
/// `w` points to `blocks` Q4_0 blocks and `a` to `blocks` Q8_0 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_q8_0_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let eight = _mm256_set1_epi8(8);
    // SAFETY: `two_accumulators` calls this only for i < blocks, so block i of each operand is
    // in bounds (caller); loads are unaligned.
    let block = |i: usize| unsafe {
        let (bw, ba) = (w.add(i * 18), a.add(i * 34));
        let x = _mm256_sub_epi8(nibbles(_mm_loadu_si128(bw.add(2).cast())), eight);
        let y = _mm256_loadu_si256(ba.add(2).cast());
        (f16_product(bw, ba), _mm256_cvtepi32_ps(dot_i8(x, y)))
    };
    two_accumulators(blocks, block)
}

/// # Safety
/// `w` points to `blocks` Q4_1 blocks and `a` to `blocks` Q8_1 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_q8_1_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0f32;
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned.
        unsafe {
            let (bw, ba) = (w.add(i * 20), a.add(i * 36));
            // Lanes 0 and 1: d_w * d_a and m_w * s_a, from one conversion per operand.
            let wdm = _mm_cvtph_ps(_mm_cvtsi32_si128(bw.cast::<i32>().read_unaligned()));
            let ads = _mm_cvtph_ps(_mm_cvtsi32_si128(ba.cast::<i32>().read_unaligned()));
            let p = _mm_mul_ps(wdm, ads);
            mins += _mm_cvtss_f32(_mm_movehdup_ps(p));
            let d = _mm256_broadcastss_ps(p);
            let q = nibbles(_mm_loadu_si128(bw.add(4).cast()));
            let y = _mm256_loadu_si256(ba.add(4).cast());
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(dot_u8_i8(q, y)), acc);
        }
    }
    hsum(acc) + mins
}

/// # Safety
/// `w` points to `blocks` Q4_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_mins = _mm256_setzero_ps();
    let mask = _mm256_set1_epi8(0x0F);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the block's fields (d, dmin, scales at 4..16, qs at 16..144; the Q8_K
        // scale at 0..4, values at 4..260, bsums at 260..292).
        unsafe {
            let (bw, ba) = (w.add(i * 144), a.add(i * 292));
            let da = ba.cast::<f32>().read_unaligned();
            let d = da * f16_at(bw);
            let dmin = da * f16_at(bw.add(2));
            let (sc, mn) = k_scales(bw.add(4));
            // Σ_j m_j * (bsums[2j] + bsums[2j+1]), kept in eight lanes until the end.
            let pair_sums =
                _mm256_madd_epi16(_mm256_loadu_si256(ba.add(260).cast()), _mm256_set1_epi16(1));
            let mins32 = _mm256_cvtepu8_epi32(_mm_cvtsi64_si128(mn as i64));
            acc_mins = _mm256_fmadd_ps(
                _mm256_set1_ps(dmin),
                _mm256_cvtepi32_ps(_mm256_mullo_epi32(pair_sums, mins32)),
                acc_mins,
            );
            let sc = sc.to_le_bytes();
            let (qs, ys) = (bw.add(16), ba.add(4));
            let mut sumi = _mm256_setzero_si256();
            for k in 0..4 {
                let q = _mm256_loadu_si256(qs.add(32 * k).cast());
                let y_lo = _mm256_loadu_si256(ys.add(64 * k).cast());
                let y_hi = _mm256_loadu_si256(ys.add(64 * k + 32).cast());
                let q_lo = _mm256_and_si256(q, mask);
                let q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                let p_lo = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(q_lo, y_lo),
                    _mm256_set1_epi16(i16::from(sc[2 * k])),
                );
                let p_hi = _mm256_madd_epi16(
                    _mm256_maddubs_epi16(q_hi, y_hi),
                    _mm256_set1_epi16(i16::from(sc[2 * k + 1])),
                );
                sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p_lo, p_hi));
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc) - hsum(acc_mins)
}

/// The eight 6-bit scales and eight 6-bit mins of a Q4_K/Q5_K block (12 bytes at `p`), each
/// as eight bytes of a little-endian u64, unpacked a word at a time.
///
/// # Safety
/// `p` must point to 12 readable bytes.
#[inline]
unsafe fn k_scales(p: *const u8) -> (u64, u64) {
    // SAFETY: the caller guarantees 12 readable bytes; reads are unaligned.
    let (w0, w1, w2) = unsafe {
        (
            p.cast::<u32>().read_unaligned().to_le(),
            p.add(4).cast::<u32>().read_unaligned().to_le(),
            p.add(8).cast::<u32>().read_unaligned().to_le(),
        )
    };
    let sc_lo = w0 & 0x3F3F_3F3F;
    let mn_lo = w1 & 0x3F3F_3F3F;
    let sc_hi = (w2 & 0x0F0F_0F0F) | ((w0 >> 2) & 0x3030_3030);
    let mn_hi = ((w2 >> 4) & 0x0F0F_0F0F) | ((w1 >> 2) & 0x3030_3030);
    (
        u64::from(sc_lo) | (u64::from(sc_hi) << 32),
        u64::from(mn_lo) | (u64::from(mn_hi) << 32),
    )
}

/// # Safety
/// `w` points to `blocks` Q6_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    let k32 = _mm256_set1_epi8(32);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the fields (ql 0..128, qh 128..192, scales 192..208, d 208..210; the
        // Q8_K scale at 0..4 and values at 4..260).
        unsafe {
            let (bw, ba) = (w.add(i * 210), a.add(i * 292));
            let (ql, qh, scales) = (bw, bw.add(128), bw.add(192));
            let d = ba.cast::<f32>().read_unaligned() * f16_at(bw.add(208));
            let ys = ba.add(4);
            let sc16 = _mm_loadu_si128(scales.cast());
            let mut sumi = _mm256_setzero_si256();
            for h in 0..2 {
                let l1 = _mm256_loadu_si256(ql.add(64 * h).cast());
                let l2 = _mm256_loadu_si256(ql.add(64 * h + 32).cast());
                let hb = _mm256_loadu_si256(qh.add(32 * h).cast());
                let groups = [
                    _mm256_or_si256(
                        _mm256_and_si256(l1, m4),
                        _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(l2, m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4),
                    ),
                    _mm256_or_si256(
                        _mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                        _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4),
                    ),
                ];
                for (g, q) in groups.into_iter().enumerate() {
                    let y = _mm256_loadu_si256(ys.add(128 * h + 32 * g).cast());
                    // (q - 32) * y, as q * y - 32 * y so maddubs sees an unsigned q.
                    let p =
                        _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(k32, y));
                    // [s(2j) x 8, s(2j+1) x 8] as i16, j = 4h + g.
                    let j = (4 * h + g) as i8;
                    let pick = _mm_set_epi64x(
                        i64::from_ne_bytes([(2 * j + 1) as u8; 8]),
                        i64::from_ne_bytes([(2 * j) as u8; 8]),
                    );
                    let sv = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc16, pick));
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sv));
                }
            }
            acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::{kernel_for, quantize_activations, Isa};

    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn unit(&mut self) -> f32 {
            (self.next() >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }
    }

    /// Random weight blocks whose f16 scales (at `scale_offsets`) are finite, 2^-10 .. 2^2.
    fn weights(ty: GgmlType, n: usize, scale_offsets: &[usize], rng: &mut Rng) -> Vec<u8> {
        let size = ty.type_size() as usize;
        let mut w: Vec<u8> = (0..n / ty.block_size() as usize * size)
            .map(|_| rng.next() as u8)
            .collect();
        for block in w.chunks_exact_mut(size) {
            for &at in scale_offsets {
                let bits = (5 + (rng.next() % 12) as u16) << 10 | (rng.next() as u16 & 0x83FF);
                block[at..at + 2].copy_from_slice(&bits.to_le_bytes());
            }
        }
        w
    }

    /// SIMD and scalar kernels compute the same block terms (exact integer sums times the same
    /// scale products) and differ only in the order the float terms are added. Reordering a sum
    /// of `k` terms changes it by at most about k * eps * (sum of |terms|); the terms are bounded
    /// by the sum of |w_i * a_i| over the dequantized values plus the K-quants' separate min
    /// terms, so we allow 1e-4 of that magnitude (k <= 64 blocks here gives ~8e-6 in theory; the
    /// rest covers min-term cancellation).
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
        ];
        let mut rng = Rng(0x1234_5678_9ABC_DEF1);
        for &(ty, offsets) in cases {
            let simd = kernel(ty).expect("AVX2 kernel");
            let scalar = kernel_for(ty, Isa::Scalar).expect("scalar twin");
            for n in [256usize, 1024, 4096] {
                for _ in 0..20 {
                    let w = weights(ty, n, offsets, &mut rng);
                    let x: Vec<f32> = (0..n).map(|_| rng.unit() * 4.0).collect();
                    let mut a = Vec::new();
                    quantize_activations(ty, &x, &mut a).unwrap();
                    let (s, v) = (scalar(n, &w, &a), simd(n, &w, &a));
                    let mut wf = vec![0f32; n];
                    let mut af = vec![0f32; n];
                    crate::dequantize_row(ty, &w, &mut wf).unwrap();
                    crate::dequantize_row(crate::vec_dot_type(ty), &a, &mut af).unwrap();
                    let magnitude: f64 = wf
                        .iter()
                        .zip(&af)
                        .map(|(p, q)| f64::from(p.abs()) * f64::from(q.abs()))
                        .sum();
                    let bound = 1e-4 * (magnitude + f64::from(s.abs())) + 1e-30;
                    assert!(
                        (f64::from(s) - f64::from(v)).abs() <= bound,
                        "{ty} n={n}: scalar {s} vs avx2 {v} (bound {bound:e})"
                    );
                }
            }
        }
    }
}
