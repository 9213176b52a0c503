//! AVX-512 versions of two of [`crate::vec`]'s kernels, the ones attention runs once per cached
//! token: the f16 dot product (query · key) and the f16 multiply-add (value rows into the
//! output). Both give AVX2's bits (`avx2::vec`, ggml's AVX2 order): the dot product keeps
//! AVX2's four eight-lane accumulators as two 512-bit ones (accumulators 0 and 1 side by side,
//! then 2 and 3) and reduces them in AVX2's order; the multiply-add is lane-wise, so its width
//! does not show.

use std::arch::x86_64::*;

use half::f16;

use super::super::avx2::vec::dot_f16_finish;
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
        mad_f16_rows: Some(|acc, values, stride, rescales, weights| {
            // SAFETY: the CPU has AVX-512 F and AVX2, FMA, F16C (as above); `vec::mad_f16_rows`
            // checked that `values` holds `weights.len()` rows of `acc.len()` values, `stride`
            // apart, and `rescales` one per row.
            unsafe {
                mad_f16_rows_avx512(
                    acc.len(),
                    acc.as_mut_ptr(),
                    values.as_ptr(),
                    stride,
                    rescales,
                    weights,
                )
            }
        }),
        ..base
    }
}

/// `vec::mad_f16_rows` with `acc` held in registers, `K` vectors of 16 values (from `acc`) at a
/// time, across all the rows: each step rounds to f16 and back in the register
/// (`vcvtps2ph` + `vcvtph2ps`), which is what storing and reloading the f16 does, so the
/// numbers are `scale_f16`'s and `mad_f16`'s row by row.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C; `acc` points to `n` values, and `values` to
/// `weights.len()` rows of `n` values, `stride` apart; `rescales` is as long as `weights`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn mad_f16_rows_avx512(
    n: usize,
    acc: *mut f16,
    values: *const f16,
    stride: usize,
    rescales: &[Option<f32>],
    weights: &[f32],
) {
    let mut c = 0;
    while c + 64 <= n {
        // SAFETY: values c..c + 64 of `acc` and of every row are in bounds (caller).
        unsafe { mad_rows_chunk::<4>(acc.add(c), values.add(c), stride, rescales, weights) };
        c += 64;
    }
    while c + 16 <= n {
        // SAFETY: values c..c + 16 of `acc` and of every row are in bounds (caller).
        unsafe { mad_rows_chunk::<1>(acc.add(c), values.add(c), stride, rescales, weights) };
        c += 16;
    }
    if c < n {
        // The last n % 16 values, row by row as `mad_f16_avx512`'s scalar tail computes them.
        for (r, (&rescale, &w)) in rescales.iter().zip(weights).enumerate() {
            for k in c..n {
                // SAFETY: k < n, in `acc` and in row r.
                unsafe {
                    let mut a = *acc.add(k);
                    if let Some(s) = rescale {
                        a = f16::from_f32(a.to_f32() * s);
                    }
                    let v = *values.add(r * stride + k);
                    *acc.add(k) = f16::from_f32(v.to_f32().mul_add(w, a.to_f32()));
                }
            }
        }
    }
}

/// Values `0..16K` of `acc` through every row (see [`mad_f16_rows_avx512`]).
///
/// # Safety
/// As [`mad_f16_rows_avx512`]'s, for `16K` values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn mad_rows_chunk<const K: usize>(
    acc: *mut f16,
    values: *const f16,
    stride: usize,
    rescales: &[Option<f32>],
    weights: &[f32],
) {
    let round = |x: __m512| _mm512_cvtph_ps(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x));
    // SAFETY: 16K values at `acc` (caller); the loads are unaligned.
    let mut a: [__m512; K] = std::array::from_fn(|k| unsafe {
        _mm512_cvtph_ps(_mm256_loadu_si256(acc.add(16 * k).cast()))
    });
    for (r, (&rescale, &w)) in rescales.iter().zip(weights).enumerate() {
        if let Some(s) = rescale {
            let vs = _mm512_set1_ps(s);
            for a in &mut a {
                *a = round(_mm512_mul_ps(*a, vs));
            }
        }
        let vw = _mm512_set1_ps(w);
        for (k, a) in a.iter_mut().enumerate() {
            // SAFETY: 16K values of row r (caller); the load is unaligned.
            let v = unsafe {
                _mm512_cvtph_ps(_mm256_loadu_si256(values.add(r * stride + 16 * k).cast()))
            };
            *a = round(_mm512_fmadd_ps(v, vw, *a));
        }
    }
    for (k, a) in a.iter().enumerate() {
        // SAFETY: as the loads above; the store is unaligned.
        unsafe {
            _mm256_storeu_si256(
                acc.add(16 * k).cast(),
                _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(*a),
            )
        };
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
    // SAFETY: the caller's guarantee.
    unsafe { dot_f16_finish(_mm256_add_ps(low, high), n, np, a, b) }
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
