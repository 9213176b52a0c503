//! AVX2 + FMA dot products for the hot weight types (Q4_0, Q4_1, Q8_0, Q4_K, Q6_K).
//!
//! Integer parts are exact, as in the scalar kernels; the float accumulation runs in eight
//! lanes and is summed at the end, so results differ from the scalar twins only by the order of
//! float additions (tests bound the difference; see `tests` below).

use std::arch::x86_64::*;

use super::super::DotFn;
use crate::fp::f16_at;
use crate::GgmlType;

/// Whether this CPU runs these kernels (checked once by the dispatcher).
pub(crate) fn available() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma")
}

/// The AVX2 kernel for weights of type `ty`, if this CPU has AVX2 and FMA and there is one.
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
// `available()` confirmed AVX2 and FMA; lengths were checked by the public entry points.
macro_rules! safe_wrapper {
    ($name:ident, $inner:ident) => {
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            // SAFETY: see the comment above the macro: the CPU supports AVX2 and FMA, and
            // `w`/`a` hold exactly the blocks for `n` elements (the inner kernel reads only
            // within them).
            unsafe { $inner(n, w, a) }
        }
    };
}

safe_wrapper!(q8_0_q8_0, q8_0_q8_0_avx2);
safe_wrapper!(q4_0_q8_0, q4_0_q8_0_avx2);
safe_wrapper!(q4_1_q8_1, q4_1_q8_1_avx2);
safe_wrapper!(q4_k_q8_k, q4_k_q8_k_avx2);
safe_wrapper!(q6_k_q8_k, q6_k_q8_k_avx2);

#[inline(always)]
unsafe fn load256(p: &[u8]) -> __m256i {
    debug_assert!(p.len() >= 32);
    // SAFETY: the caller passes at least 32 readable bytes; the load is unaligned.
    unsafe { _mm256_loadu_si256(p.as_ptr().cast()) }
}

#[inline(always)]
unsafe fn load128(p: &[u8]) -> __m128i {
    debug_assert!(p.len() >= 16);
    // SAFETY: the caller passes at least 16 readable bytes; the load is unaligned.
    unsafe { _mm_loadu_si128(p.as_ptr().cast()) }
}

/// Sum of the eight lanes.
#[inline(always)]
unsafe fn hsum(v: __m256) -> f32 {
    // SAFETY: register-only arithmetic; AVX is enabled in every caller.
    unsafe {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_movehdup_ps(s));
        _mm_cvtss_f32(s)
    }
}

/// Eight i32 lane sums of the products of 32 signed bytes `x` and `y`.
#[inline(always)]
unsafe fn dot_i8(x: __m256i, y: __m256i) -> __m256i {
    // SAFETY: register-only arithmetic; AVX2 is enabled in every caller.
    unsafe {
        // maddubs needs an unsigned left operand: move x's sign onto y.
        let ax = _mm256_sign_epi8(x, x);
        let sy = _mm256_sign_epi8(y, x);
        let pairs = _mm256_maddubs_epi16(ax, sy);
        _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
    }
}

/// Eight i32 lane sums of the products of 32 unsigned bytes `u` (< 128) and signed bytes `y`.
#[inline(always)]
unsafe fn dot_u8_i8(u: __m256i, y: __m256i) -> __m256i {
    // SAFETY: register-only arithmetic; AVX2 is enabled in every caller.
    unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(u, y), _mm256_set1_epi16(1)) }
}

/// The 32 nibbles of a 16-byte Q4 block, low nibbles first: element j, j + 16 order.
#[inline(always)]
unsafe fn unpack_nibbles(qs: &[u8]) -> __m256i {
    // SAFETY: 16 readable bytes (caller); register arithmetic otherwise.
    unsafe {
        let b = load128(qs);
        let hi = _mm_srli_epi16(b, 4);
        _mm256_and_si256(_mm256_set_m128i(hi, b), _mm256_set1_epi8(0x0F))
    }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn q8_0_q8_0_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    for (bw, ba) in w.chunks_exact(34).zip(a.chunks_exact(34)).take(n / 32) {
        let d = _mm256_set1_ps(f16_at(bw) * f16_at(ba));
        // SAFETY: each block has 32 value bytes after its 2-byte scale.
        let (x, y) = unsafe { (load256(&bw[2..]), load256(&ba[2..])) };
        // SAFETY: AVX2 is enabled for this function.
        let s = unsafe { dot_i8(x, y) };
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    // SAFETY: AVX is enabled for this function.
    unsafe { hsum(acc) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn q4_0_q8_0_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let eight = _mm256_set1_epi8(8);
    for (bw, ba) in w.chunks_exact(18).zip(a.chunks_exact(34)).take(n / 32) {
        let d = _mm256_set1_ps(f16_at(bw) * f16_at(ba));
        // SAFETY: a Q4_0 block has 16 nibble bytes after its scale; Q8_0 has 32 values.
        let (q, y) = unsafe { (unpack_nibbles(&bw[2..]), load256(&ba[2..])) };
        let x = _mm256_sub_epi8(q, eight);
        // SAFETY: AVX2 is enabled for this function.
        let s = unsafe { dot_i8(x, y) };
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    // SAFETY: AVX is enabled for this function.
    unsafe { hsum(acc) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn q4_1_q8_1_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut mins = 0f32;
    for (bw, ba) in w.chunks_exact(20).zip(a.chunks_exact(36)).take(n / 32) {
        let d = _mm256_set1_ps(f16_at(bw) * f16_at(ba));
        mins += f16_at(&bw[2..]) * f16_at(&ba[2..]);
        // SAFETY: a Q4_1 block has 16 nibble bytes after scale and min; Q8_1 has 32 values
        // after scale and sum.
        let (q, y) = unsafe { (unpack_nibbles(&bw[4..]), load256(&ba[4..])) };
        // SAFETY: AVX2 is enabled for this function.
        let s = unsafe { dot_u8_i8(q, y) };
        acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(s), acc);
    }
    // SAFETY: AVX is enabled for this function.
    unsafe { hsum(acc) + mins }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn q4_k_q8_k_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_mins = 0f32;
    let mask = _mm256_set1_epi8(0x0F);
    for (bw, ba) in w.chunks_exact(144).zip(a.chunks_exact(292)).take(n / 256) {
        let da = f32::from_le_bytes([ba[0], ba[1], ba[2], ba[3]]);
        let d = da * f16_at(bw);
        let dmin = da * f16_at(&bw[2..]);
        let (sc, mn) = crate::dequant::k_scale_min(&bw[4..16]);
        let (qs, ys, bsums) = (&bw[16..144], &ba[4..260], &ba[260..292]);
        let mut min_sum = 0i32;
        for (j, &m) in mn.iter().enumerate() {
            let b0 = i16::from_le_bytes([bsums[4 * j], bsums[4 * j + 1]]);
            let b1 = i16::from_le_bytes([bsums[4 * j + 2], bsums[4 * j + 3]]);
            min_sum += i32::from(m) * (i32::from(b0) + i32::from(b1));
        }
        acc_mins += dmin * min_sum as f32;
        let mut sumi = _mm256_setzero_si256();
        for k in 0..4 {
            // SAFETY: 32 nibble bytes per 64 values and 64 activation bytes are in range.
            let (q, y_lo, y_hi) = unsafe {
                (
                    load256(&qs[32 * k..]),
                    load256(&ys[64 * k..]),
                    load256(&ys[64 * k + 32..]),
                )
            };
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
    // SAFETY: AVX is enabled for this function.
    unsafe { hsum(acc) - acc_mins }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn q6_k_q8_k_avx2(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let m4 = _mm256_set1_epi8(0x0F);
    let m2 = _mm256_set1_epi8(0x03);
    let k32 = _mm256_set1_epi8(32);
    for (bw, ba) in w.chunks_exact(210).zip(a.chunks_exact(292)).take(n / 256) {
        let (ql, qh, scales) = (&bw[0..128], &bw[128..192], &bw[192..208]);
        let d = f32::from_le_bytes([ba[0], ba[1], ba[2], ba[3]]) * f16_at(&bw[208..]);
        let ys = &ba[4..260];
        let mut sumi = _mm256_setzero_si256();
        for h in 0..2 {
            // SAFETY: 64 + 32 weight bytes and 128 activation bytes per half are in range.
            let (l1, l2, hb) = unsafe {
                (
                    load256(&ql[64 * h..]),
                    load256(&ql[64 * h + 32..]),
                    load256(&qh[32 * h..]),
                )
            };
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
                // SAFETY: 32 activation bytes of this group are in range.
                let y = unsafe { load256(&ys[128 * h + 32 * g..]) };
                // (q - 32) * y, computed as q * y - 32 * y so maddubs sees an unsigned q.
                let p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, y), _mm256_maddubs_epi16(k32, y));
                let s0 = i16::from(scales[8 * h + 2 * g] as i8);
                let s1 = i16::from(scales[8 * h + 2 * g + 1] as i8);
                let sv = _mm256_set_m128i(_mm_set1_epi16(s1), _mm_set1_epi16(s0));
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sv));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    // SAFETY: AVX is enabled for this function.
    unsafe { hsum(acc) }
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
