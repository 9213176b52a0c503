//! AVX-512 versions of two of [`crate::vec`]'s kernels, the ones attention runs once per cached
//! token: the f16 dot product (query · key) and the f16 multiply-add (value rows into the
//! output). Both give AVX2's bits (`avx2::vec`, ggml's AVX2 order): the dot product keeps
//! AVX2's four eight-lane accumulators as two 512-bit ones (accumulators 0 and 1 side by side,
//! then 2 and 3) and reduces them in AVX2's order; the multiply-add is lane-wise, so its width
//! does not show.

use std::arch::x86_64::*;

use half::f16;

use crate::vec::VecKernels;

/// AVX2's table `base` with this module's kernels in place of its f16 dot product and
/// multiply-add.
pub(super) fn kernels(base: VecKernels) -> VecKernels {
    VecKernels {
        dot_f16: |a, b| {
            let n = a.len().min(b.len());
            // SAFETY: the CPU has AVX-512 F and AVX2, FMA, F16C (this table is handed out only
            // after `available()`); both slices hold `n` values.
            unsafe { dot_f16_avx512(n, a.as_ptr(), b.as_ptr()) }
        },
        mad_f16: |acc, x, s| {
            let n = acc.len().min(x.len());
            // SAFETY: as for `dot_f16`.
            unsafe { mad_f16_avx512(n, acc.as_mut_ptr(), x.as_ptr(), s) }
        },
        ..base
    }
}

/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C; `a` and `b` point to `n` values.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dot_f16_avx512(n: usize, a: *const f16, b: *const f16) -> f32 {
    let np = n & !31;
    // Lanes 0..8: AVX2's accumulator 0 (and 2), lanes 8..16: its accumulator 1 (and 3).
    let (mut acc01, mut acc23) = (_mm512_setzero_ps(), _mm512_setzero_ps());
    let load = |p: *const f16, i: usize| {
        // SAFETY: i + 16 <= np <= n (caller's bound); the load is unaligned.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.add(i).cast())) }
    };
    let mut i = 0;
    while i < np {
        acc01 = _mm512_fmadd_ps(load(a, i), load(b, i), acc01);
        acc23 = _mm512_fmadd_ps(load(a, i + 16), load(b, i + 16), acc23);
        i += 32;
    }
    // AVX2: acc0 += acc2, acc1 += acc3, acc0 += acc1, then its eight lanes.
    let s = _mm512_add_ps(acc01, acc23);
    let low = _mm512_castps512_ps256(s);
    let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s)));
    let acc0 = _mm256_add_ps(low, high);
    let t0 = _mm_add_ps(_mm256_castps256_ps128(acc0), _mm256_extractf128_ps(acc0, 1));
    let t1 = _mm_hadd_ps(t0, t0);
    let mut sum = f64::from(_mm_cvtss_f32(_mm_hadd_ps(t1, t1)));
    for k in np..n {
        // SAFETY: k < n.
        let (x, y) = unsafe { ((*a.add(k)).to_f32(), (*b.add(k)).to_f32()) };
        sum += f64::from(x * y);
    }
    sum as f32
}

/// `acc[i] = f16(f32(acc[i]) + f32(x[i]) * s)` (one fused multiply-add, rounded to nearest
/// even), sixteen values at a time.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C; `acc` and `x` point to `n` values.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn mad_f16_avx512(n: usize, acc: *mut f16, x: *const f16, s: f32) {
    let vs = _mm512_set1_ps(s);
    let np = n & !15;
    let mut i = 0;
    while i < np {
        // SAFETY: i + 16 <= n (caller's bound); the loads and the store are unaligned.
        unsafe {
            let y = _mm512_cvtph_ps(_mm256_loadu_si256(acc.add(i).cast()));
            let v = _mm512_cvtph_ps(_mm256_loadu_si256(x.add(i).cast()));
            let r = _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm512_fmadd_ps(v, vs, y));
            _mm256_storeu_si256(acc.add(i).cast(), r);
        }
        i += 16;
    }
    for k in np..n {
        // SAFETY: k < n.
        unsafe {
            *acc.add(k) = f16::from_f32((*x.add(k)).to_f32().mul_add(s, (*acc.add(k)).to_f32()))
        };
    }
}
