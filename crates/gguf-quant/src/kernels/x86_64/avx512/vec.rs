//! AVX-512 versions of two of [`crate::kernels::vec`]'s kernels, the ones attention runs once per
//! cached token: the f16 dot product (query · key) and the f16 multiply-add (value rows into the
//! output). Both give AVX2's bits (`avx2::vec`, ggml's AVX2 order): the dot product keeps AVX2's
//! four eight-lane accumulators as two 512-bit ones (accumulators 0 and 1 side by side, then 2 and
//! 3) and reduces them in AVX2's order; the multiply-add is lane-wise, so its width does not show.

use std::arch::x86_64::*;

use half::f16;

use super::super::avx2::vec::{dot_f16_finish, glibc_expf, mad_rows_chunk, F16Lanes};
use super::gemm::low_high;
use crate::kernels::vec::VecKernels;

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
        mad_f16_rows: Some(|acc, heads, values, stride, rescales, weights| {
            // SAFETY: the CPU has AVX-512 F and AVX2, FMA, F16C (as above); `vec::mad_f16_rows`
            // checked that `acc` holds `heads` accumulators, `values` a row of as many values
            // per `heads` weights, `stride` apart, and `rescales` as many as `weights`.
            unsafe {
                mad_f16_rows_avx512(
                    acc.len() / heads,
                    heads,
                    acc.as_mut_ptr(),
                    values.as_ptr(),
                    stride,
                    rescales,
                    weights,
                )
            }
        }),
        dot_f16_rows: Some(|out, rows, stride, queries, heads| {
            // SAFETY: the CPU has AVX-512 F and AVX2, FMA, F16C (as above); `vec::dot_f16_rows`
            // checked that `queries` holds `heads` queries, `out` as many scores per row, and
            // `rows` that many rows of a query's length, `stride` apart.
            unsafe {
                dot_f16_rows_avx512(
                    out.len() / heads,
                    out.as_mut_ptr(),
                    rows.as_ptr(),
                    stride,
                    queries.len() / heads,
                    heads,
                    queries.as_ptr(),
                )
            }
        }),
        exp_f32: |x| {
            // SAFETY: the CPU has AVX-512 F and AVX2, FMA, F16C (as above); the slice holds
            // `x.len()` values.
            unsafe { exp_f32_avx512(x.len(), x.as_mut_ptr()) }
        },
        gemm_f32: |c, a, b, m, k, n| {
            crate::kernels::vec::check_gemm(c, a, b, m, k, n);
            // SAFETY: as above; the check makes the slices hold `m * n`, `m * k` and `k * n`
            // values.
            unsafe { gemm_f32_avx512(m, k, n, c.as_mut_ptr(), a.as_ptr(), b.as_ptr()) }
        },
        ..base
    }
}

/// `c += a·b` (row-major `m × k` times `k × n`) as `vec::gemm_f32`: every element one chain of
/// fused multiply-adds over `k` in order, which no blocking changes, so AVX2's bits. Blocks
/// of eight rows (then one at a time) by 32 columns (then 16, then the rest under a mask);
/// sixteen accumulators hide the latency, and a block reads each `b` row once for eight rows.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C; `c`, `a` and `b` point to `m * n`, `m * k` and
/// `k * n` values.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_f32_avx512(m: usize, k: usize, n: usize, c: *mut f32, a: *const f32, b: *const f32) {
    let mut i = 0;
    while i + 8 <= m {
        // SAFETY: rows i..i + 8 of `c` and `a` are in bounds (caller).
        unsafe { gemm_rows::<8>(k, n, c.add(i * n), a.add(i * k), b) };
        i += 8;
    }
    while i < m {
        // SAFETY: row i of `c` and `a` is in bounds (caller).
        unsafe { gemm_rows::<1>(k, n, c.add(i * n), a.add(i * k), b) };
        i += 1;
    }
}

/// [`gemm_f32_avx512`] for `R` rows.
///
/// # Safety
/// As [`gemm_f32_avx512`]'s, for `R` rows of `c` and `a`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn gemm_rows<const R: usize>(k: usize, n: usize, c: *mut f32, a: *const f32, b: *const f32) {
    let mut j = 0;
    while j + 32 <= n {
        // SAFETY: columns j..j + 32 of the R rows of `c` and of the k rows of `b`, and the
        // R * k values of `a`, are in bounds (caller); loads and stores are unaligned.
        unsafe {
            let mut acc = [[_mm512_setzero_ps(); 2]; R];
            for (r, acc) in acc.iter_mut().enumerate() {
                acc[0] = _mm512_loadu_ps(c.add(r * n + j));
                acc[1] = _mm512_loadu_ps(c.add(r * n + j + 16));
            }
            for l in 0..k {
                let b0 = _mm512_loadu_ps(b.add(l * n + j));
                let b1 = _mm512_loadu_ps(b.add(l * n + j + 16));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm512_set1_ps(*a.add(r * k + l));
                    acc[0] = _mm512_fmadd_ps(x, b0, acc[0]);
                    acc[1] = _mm512_fmadd_ps(x, b1, acc[1]);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                _mm512_storeu_ps(c.add(r * n + j), acc[0]);
                _mm512_storeu_ps(c.add(r * n + j + 16), acc[1]);
            }
        }
        j += 32;
    }
    while j < n {
        // Sixteen columns, or the last n - j under a mask (masked-off lanes are neither read
        // nor written).
        let lanes = (n - j).min(16);
        let mask: __mmask16 = if lanes == 16 { !0 } else { (1 << lanes) - 1 };
        // SAFETY: as above, for the `lanes` columns from j.
        unsafe {
            let mut acc = [_mm512_setzero_ps(); R];
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = _mm512_maskz_loadu_ps(mask, c.add(r * n + j));
            }
            for l in 0..k {
                let b0 = _mm512_maskz_loadu_ps(mask, b.add(l * n + j));
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm512_fmadd_ps(_mm512_set1_ps(*a.add(r * k + l)), b0, *acc);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                _mm512_mask_storeu_ps(c.add(r * n + j), mask, *acc);
            }
        }
        j += lanes;
    }
}

/// `x[i] = expf(x[i])` with glibc's bits (`vec::exp_f32`; the algorithm and its constants in
/// `avx2::vec::glibc_expf`), sixteen values at a time as
/// two vectors of eight doubles; the values glibc handles apart (`|x| >= 88`, infinities,
/// NaN) and the last `n % 16` go through libm's `expf` itself.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C; `x` points to `n` values.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn exp_f32_avx512(n: usize, x: *mut f32) {
    use glibc_expf::*;
    let f = |bits: u64| _mm512_set1_pd(f64::from_bits(bits));
    let (inv_ln2_n, shift, one) = (f(INV_LN2_N), f(SHIFT), _mm512_set1_pd(1.0));
    let (c0, c1, c2) = (f(POLY[0]), f(POLY[1]), f(POLY[2]));
    // SAFETY: TABLE holds 32 u64, four runs of eight; the loads are unaligned.
    let table: [__m512i; 4] =
        std::array::from_fn(|q| unsafe { _mm512_loadu_si512(TABLE.as_ptr().add(8 * q).cast()) });
    let exp8 = |v: __m256| {
        let xd = _mm512_cvtps_pd(v);
        let kd = _mm512_fmadd_pd(inv_ln2_n, xd, shift);
        let ki = _mm512_castpd_si512(kd);
        let kd = _mm512_sub_pd(kd, shift);
        let r = _mm512_fmsub_pd(inv_ln2_n, xd, kd);
        // Entry ki % 32: from the low or the high sixteen by bit 4.
        let low = _mm512_permutex2var_epi64(table[0], ki, table[1]);
        let high = _mm512_permutex2var_epi64(table[2], ki, table[3]);
        let upper = _mm512_test_epi64_mask(ki, _mm512_set1_epi64(16));
        let t = _mm512_mask_blend_epi64(upper, low, high);
        let s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64::<47>(ki)));
        let z = _mm512_fmadd_pd(r, c0, c1);
        let r2 = _mm512_mul_pd(r, r);
        let y = _mm512_fmadd_pd(r, c2, one);
        let y = _mm512_fmadd_pd(z, r2, y);
        _mm512_cvtpd_ps(_mm512_mul_pd(y, s))
    };
    let top = _mm512_set1_epi32(SPECIAL_TOP as i32);
    let mut i = 0;
    while i + 16 <= n {
        // SAFETY: i + 16 <= n; the load and the store are unaligned.
        unsafe {
            let v = _mm512_loadu_ps(x.add(i));
            let abs_top = _mm512_and_si512(
                _mm512_srli_epi32::<20>(_mm512_castps_si512(v)),
                _mm512_set1_epi32(0x7ff),
            );
            let special = _mm512_cmpge_epi32_mask(abs_top, top);
            let (lo, hi) = low_high(v);
            let e = _mm512_castps256_ps512(exp8(lo));
            let e = _mm512_castpd_ps(_mm512_insertf64x4::<1>(
                _mm512_castps_pd(e),
                _mm256_castps_pd(exp8(hi)),
            ));
            if special != 0 {
                let mut inputs = [0f32; 16];
                _mm512_storeu_ps(inputs.as_mut_ptr(), v);
                _mm512_storeu_ps(x.add(i), e);
                for (k, v) in inputs.iter().enumerate() {
                    if special & (1 << k) != 0 {
                        *x.add(i + k) = v.exp();
                    }
                }
            } else {
                _mm512_storeu_ps(x.add(i), e);
            }
        }
        i += 16;
    }
    for k in i..n {
        // SAFETY: k < n.
        unsafe { *x.add(k) = (*x.add(k)).exp() };
    }
}

/// `out[r * heads + h] = dot_f16_avx512(row r, query h)` for `m` rows. When the length is
/// 32, 64, 128 or 256 (no scalar tail), up to four heads at a time and sixteen rows at a time:
/// each key vector is widened once for all the heads (the queries once for all the rows), and
/// each row's sixteen-lane sum is reduced with the others' in one transposed tree
/// ([`reduce_sixteen`]), so each score has `dot_f16_avx512`'s bits. Other rows and lengths go
/// one by one.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C; `out` points to `m * heads` values, `rows` to
/// `m` rows of `n` values `stride` apart, `queries` to `heads * n` values.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dot_f16_rows_avx512(
    m: usize,
    out: *mut f32,
    rows: *const f16,
    stride: usize,
    n: usize,
    heads: usize,
    queries: *const f16,
) {
    let mut h0 = 0;
    while h0 < heads {
        let group = (heads - h0).min(4);
        let scores = Scores {
            out,
            heads,
            h0,
            rows,
            stride,
            m,
        };
        // SAFETY: heads h0..h0 + group exist (caller), each query of n = 16V values.
        let done = unsafe {
            let q = queries.add(h0 * n);
            match (n, group) {
                (32, 1) => dot_rows_heads::<1, 2>(scores, q),
                (32, 2) => dot_rows_heads::<2, 2>(scores, q),
                (32, 3) => dot_rows_heads::<3, 2>(scores, q),
                (32, _) => dot_rows_heads::<4, 2>(scores, q),
                (64, 1) => dot_rows_heads::<1, 4>(scores, q),
                (64, 2) => dot_rows_heads::<2, 4>(scores, q),
                (64, 3) => dot_rows_heads::<3, 4>(scores, q),
                (64, _) => dot_rows_heads::<4, 4>(scores, q),
                (128, 1) => dot_rows_heads::<1, 8>(scores, q),
                (128, 2) => dot_rows_heads::<2, 8>(scores, q),
                (128, 3) => dot_rows_heads::<3, 8>(scores, q),
                (128, _) => dot_rows_heads::<4, 8>(scores, q),
                (256, 1) => dot_rows_heads::<1, 16>(scores, q),
                (256, 2) => dot_rows_heads::<2, 16>(scores, q),
                (256, 3) => dot_rows_heads::<3, 16>(scores, q),
                (256, _) => dot_rows_heads::<4, 16>(scores, q),
                _ => 0,
            }
        };
        for r in done..m {
            for h in h0..h0 + group {
                // SAFETY: row r < m holds n values, query h < heads too, and score
                // r * heads + h is in `out` (caller).
                unsafe {
                    *out.add(r * heads + h) =
                        dot_f16_avx512(n, rows.add(r * stride), queries.add(h * n))
                }
            }
        }
        h0 += group;
    }
}

/// Where [`dot_rows_heads`] reads its `m` rows and writes the scores of heads from `h0`.
#[derive(Clone, Copy)]
struct Scores {
    out: *mut f32,
    heads: usize,
    h0: usize,
    rows: *const f16,
    stride: usize,
    m: usize,
}

/// Scores of `H` heads (queries of `16V` values from `queries`) for the rows of
/// [`dot_f16_rows_avx512`], sixteen at a time; returns how many rows it scored (the rest are
/// fewer than sixteen).
///
/// # Safety
/// As [`dot_f16_rows_avx512`]'s, with `n = 16V`, `V` even, and `queries` at head `h0`'s query
/// with `h0 + H <= heads`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn dot_rows_heads<const H: usize, const V: usize>(at: Scores, queries: *const f16) -> usize {
    let load = |p: *const f16, i: usize| {
        // SAFETY: i + 16 <= 16V = n (the loops below); the load is unaligned.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.add(i).cast())) }
    };
    let q: [[__m512; V]; H] = std::array::from_fn(|h| {
        // SAFETY: H queries of 16V values (caller).
        let query = unsafe { queries.add(h * 16 * V) };
        std::array::from_fn(|v| load(query, 16 * v))
    });
    let mut r = 0;
    while r + 16 <= at.m {
        let mut sums = [[_mm512_setzero_ps(); 16]; H];
        for j in 0..16 {
            // SAFETY: row r + j < m holds n values (caller).
            let row = unsafe { at.rows.add((r + j) * at.stride) };
            let mut acc = [[_mm512_setzero_ps(); 2]; H];
            for v in (0..V).step_by(2) {
                let (k0, k1) = (load(row, 16 * v), load(row, 16 * v + 16));
                for (acc, q) in acc.iter_mut().zip(&q) {
                    acc[0] = _mm512_fmadd_ps(k0, q[v], acc[0]);
                    acc[1] = _mm512_fmadd_ps(k1, q[v + 1], acc[1]);
                }
            }
            for (sums, acc) in sums.iter_mut().zip(&acc) {
                sums[j] = _mm512_add_ps(acc[0], acc[1]);
            }
        }
        for (h, sums) in sums.iter().enumerate() {
            let mut scores = [0f32; 16];
            // SAFETY: 16 floats fit `scores`; the store is unaligned.
            unsafe { _mm512_storeu_ps(scores.as_mut_ptr(), reduce_sixteen(sums)) };
            for (j, &s) in scores.iter().enumerate() {
                // SAFETY: score (r + j) * heads + h0 + h is in `out` (caller).
                unsafe { *at.out.add((r + j) * at.heads + at.h0 + h) = s };
            }
        }
        r += 16;
    }
    r
}

/// The sixteen lanes of each of sixteen vectors summed as [`dot_f16_finish`] sums AVX2's
/// accumulator (after `dot_f16_avx512` has added its two halves): lanes `j` and `j + 8`, then
/// `j` and `j + 4`, then `(0 + 1) + (2 + 3)`. Lane `k` of the result is vector `k`'s sum. The
/// tree is transposed (each step adds lanes of two vectors at once), but every addition adds
/// the same two numbers as the one-vector tree, so the bits are the same.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn reduce_sixteen(sums: &[__m512; 16]) -> __m512 {
    // Lanes j and j + 8 of each vector, two vectors a result: [vector 2k | vector 2k + 1].
    let halves: [__m512; 8] = std::array::from_fn(|k| {
        let (a, b) = (sums[2 * k], sums[2 * k + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x44>(a, b),
            _mm512_shuffle_f32x4::<0xEE>(a, b),
        )
    });
    // Lanes j and j + 4: four vectors a result, one per 128-bit lane.
    let quarters: [__m512; 4] = std::array::from_fn(|k| {
        let (a, b) = (halves[2 * k], halves[2 * k + 1]);
        _mm512_add_ps(
            _mm512_shuffle_f32x4::<0x88>(a, b),
            _mm512_shuffle_f32x4::<0xDD>(a, b),
        )
    });
    // Lanes 0 + 1 and 2 + 3 (vectors 4k + l and 4k + 4 + l in 128-bit lane l)...
    let pairs: [__m512; 2] = std::array::from_fn(|k| {
        let (a, b) = (quarters[2 * k], quarters[2 * k + 1]);
        _mm512_add_ps(
            _mm512_shuffle_ps::<0x88>(a, b),
            _mm512_shuffle_ps::<0xDD>(a, b),
        )
    });
    // ...then their sum, which leaves vector 4k + l in lane 4l + k: transposed back.
    let (a, b) = (pairs[0], pairs[1]);
    let total = _mm512_add_ps(
        _mm512_shuffle_ps::<0x88>(a, b),
        _mm512_shuffle_ps::<0xDD>(a, b),
    );
    let order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    _mm512_permutexvar_ps(order, total)
}

/// `vec::mad_f16_rows` with the accumulators held in registers, up to four heads at a time
/// and `K` vectors of 16 values (from each accumulator) at a time, across all the rows: each
/// value row is widened once for the heads, and each step rounds to f16 and back in the
/// register (`vcvtps2ph` + `vcvtph2ps`), which is what storing and reloading the f16 does, so
/// the numbers are `scale_f16`'s and `mad_f16`'s row by row. The heads' chains of dependent
/// steps run side by side.
///
/// # Safety
/// The CPU has AVX-512 F, AVX2, FMA and F16C; `acc` points to `heads * n` values, and
/// `values` to `weights.len() / heads` rows of `n` values, `stride` apart; `rescales` is as
/// long as `weights`, a multiple of `heads`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn mad_f16_rows_avx512(
    n: usize,
    heads: usize,
    acc: *mut f16,
    values: *const f16,
    stride: usize,
    rescales: &[Option<f32>],
    weights: &[f32],
) {
    let mut h0 = 0;
    while h0 < heads {
        let group = (heads - h0).min(4);
        let rows = Rows {
            values,
            stride,
            heads,
            h0,
            rescales,
            weights,
        };
        // SAFETY: accumulators h0..h0 + group are in `acc` (caller).
        unsafe {
            match group {
                1 => mad_heads::<1>(n, acc.add(h0 * n), rows),
                2 => mad_heads::<2>(n, acc.add(h0 * n), rows),
                3 => mad_heads::<3>(n, acc.add(h0 * n), rows),
                _ => mad_heads::<4>(n, acc.add(h0 * n), rows),
            }
        }
        h0 += group;
    }
}

/// The value rows and softmax steps of [`mad_f16_rows_avx512`], for heads from `h0`.
#[derive(Clone, Copy)]
struct Rows<'a> {
    values: *const f16,
    stride: usize,
    heads: usize,
    h0: usize,
    rescales: &'a [Option<f32>],
    weights: &'a [f32],
}

impl Rows<'_> {
    fn count(&self) -> usize {
        self.weights.len() / self.heads
    }

    /// Head `h0 + h`'s rescale and weight at row `r`.
    fn step(&self, r: usize, h: usize) -> (Option<f32>, f32) {
        let i = r * self.heads + self.h0 + h;
        (self.rescales[i], self.weights[i])
    }
}

/// Heads `h0..h0 + H` of [`mad_f16_rows_avx512`], their `n` values each at `acc`.
///
/// # Safety
/// As [`mad_f16_rows_avx512`]'s, with `acc` at head `h0`'s accumulator and `h0 + H <= heads`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn mad_heads<const H: usize>(n: usize, acc: *mut f16, rows: Rows<'_>) {
    let mut c = 0;
    while c + 64 <= n {
        // SAFETY: values c..c + 64 of each accumulator and of every row are in bounds (caller).
        unsafe { mad_chunk::<4, H>(n, acc.add(c), c, rows) };
        c += 64;
    }
    while c + 16 <= n {
        // SAFETY: values c..c + 16 of each accumulator and of every row are in bounds (caller).
        unsafe { mad_chunk::<1, H>(n, acc.add(c), c, rows) };
        c += 16;
    }
    if c < n {
        // The last n % 16 values, row by row as `mad_f16_avx512`'s scalar tail computes them.
        for h in 0..H {
            for r in 0..rows.count() {
                let (rescale, w) = rows.step(r, h);
                for k in c..n {
                    // SAFETY: k < n, in accumulator h and in row r (caller).
                    unsafe {
                        let a = acc.add(h * n + k);
                        if let Some(s) = rescale {
                            *a = f16::from_f32((*a).to_f32() * s);
                        }
                        let v = *rows.values.add(r * rows.stride + k);
                        *a = f16::from_f32(v.to_f32().mul_add(w, (*a).to_f32()));
                    }
                }
            }
        }
    }
}

impl F16Lanes for __m512 {
    const LANES: usize = 16;
    #[inline(always)]
    unsafe fn load_f16(p: *const f16) -> Self {
        // SAFETY: AVX-512 F, and 16 values at `p` (caller); the load is unaligned.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(p.cast())) }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut f16) {
        // SAFETY: as `load_f16`'s; the store is unaligned.
        unsafe { _mm256_storeu_si256(p.cast(), _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self)) }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        // SAFETY: the CPU has AVX-512 F (caller).
        unsafe { _mm512_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn round_f16(self) -> Self {
        // SAFETY: the CPU has AVX-512 F (caller).
        unsafe { _mm512_cvtph_ps(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self)) }
    }
    #[inline(always)]
    unsafe fn mul(self, s: Self) -> Self {
        // SAFETY: the CPU has AVX-512 F (caller).
        unsafe { _mm512_mul_ps(self, s) }
    }
    #[inline(always)]
    unsafe fn mul_add(self, w: Self, acc: Self) -> Self {
        // SAFETY: the CPU has AVX-512 F (caller).
        unsafe { _mm512_fmadd_ps(self, w, acc) }
    }
}

/// Values `c..c + 16K` of `H` accumulators (`n` apart from `acc`) through every row, with
/// AVX2's [`mad_rows_chunk`] on 512-bit vectors.
///
/// # Safety
/// As [`mad_heads`]'s, for values `c..c + 16K`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn mad_chunk<const K: usize, const H: usize>(
    n: usize,
    acc: *mut f16,
    c: usize,
    rows: Rows<'_>,
) {
    let step = |r: usize, h: usize| rows.step(r, h);
    // SAFETY: the CPU has AVX-512 F (this function's features); the values are there (caller).
    unsafe {
        let values = rows.values.add(c);
        mad_rows_chunk::<__m512, H, K>(n, acc, values, rows.stride, rows.count(), step)
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
