//! AVX2 float kernels: the F16 weight dot product, and the kernels of [`crate::kernels::vec`] (the
//! f16 dot product, multiply-add and scale of attention over an f16 KV cache, SwiGLU with ggml's
//! vectorised `expf`, GELU and GeGLU through ggml's f16 GELU table, the f32 product and the softmax
//! of tiled flash attention), each in ggml's AVX2 order, bit for bit as the scalar twins in `vec`.

use std::arch::x86_64::*;

use half::f16;

use super::common::{f16_at, hsum};
use crate::kernels::vec::{geglu_one, gelu_one, gelu_table, GELU_TABLE_LEN};

safe_wrapper!(f16_f16, f16_f16_avx2, F16);

vec_kernels!(
    dot_f16_avx2,
    mad_f16_avx2,
    scale_f16_avx2,
    swiglu_avx2,
    gelu_avx2,
    geglu_avx2,
    gemm_f32_avx2,
    soft_max_f32_avx2
);

/// The table of this module's `crate::kernels::vec` kernels: `KERNELS` with the batched attention
/// kernels.
pub(super) fn kernels() -> crate::kernels::vec::VecKernels {
    crate::kernels::vec::VecKernels {
        dot_f16_rows: Some(|out, rows, stride, queries, heads| {
            // SAFETY: the CPU has AVX2, FMA and F16C (this table is handed out only after
            // `available()`); `vec::dot_f16_rows` checked that `queries` holds `heads`
            // queries, `out` as many scores per row, and `rows` that many rows of a query's
            // length, `stride` apart.
            unsafe {
                dot_f16_rows_avx2(
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
        mad_f16_rows: Some(|acc, heads, values, stride, rescales, weights| {
            // SAFETY: as above; `vec::mad_f16_rows` checked that `acc` holds `heads`
            // accumulators, `values` a row of as many values per `heads` weights, `stride`
            // apart, and `rescales` as many as `weights`.
            unsafe {
                mad_f16_rows_avx2(
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
        exp_f32: |x| {
            // SAFETY: as above; the slice holds `x.len()` values.
            unsafe { exp_f32_avx2(x.len(), x.as_mut_ptr()) }
        },
        ..KERNELS
    }
}

/// `out[r * heads + h] = dot_f16_avx2(row r, query h)` for `m` rows: eight rows at a time when
/// the length is a nonzero multiple of 32 (no scalar tail), each row's accumulators added as
/// `dot_f16_avx2` adds them and the eight rows' lanes then summed in one transposed tree whose
/// every addition adds the same two numbers as [`dot_f16_finish`]'s (lanes `j` and `j + 4`,
/// then `(0 + 1) + (2 + 3)`); other rows and lengths one by one.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `out` points to `m * heads` values, `rows` to `m` rows of
/// `n` values `stride` apart, `queries` to `heads * n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f16_rows_avx2(
    m: usize,
    out: *mut f32,
    rows: *const f16,
    stride: usize,
    n: usize,
    heads: usize,
    queries: *const f16,
) {
    let load = |p: *const f16, i: usize| {
        // SAFETY: i + 8 <= n (the loops below); the load is unaligned.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.add(i).cast())) }
    };
    let mut r = 0;
    if n.is_multiple_of(32) && n > 0 {
        let order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
        while r + 8 <= m {
            for h in 0..heads {
                // SAFETY: query h < heads holds n values (caller).
                let q = unsafe { queries.add(h * n) };
                let sums: [__m256; 8] = std::array::from_fn(|j| {
                    // SAFETY: row r + j < m holds n values (caller).
                    let row = unsafe { rows.add((r + j) * stride) };
                    let mut acc = [_mm256_setzero_ps(); 4];
                    let mut i = 0;
                    while i < n {
                        for (k, acc) in acc.iter_mut().enumerate() {
                            *acc = _mm256_fmadd_ps(load(row, i + 8 * k), load(q, i + 8 * k), *acc);
                        }
                        i += 32;
                    }
                    _mm256_add_ps(_mm256_add_ps(acc[0], acc[2]), _mm256_add_ps(acc[1], acc[3]))
                });
                // Lanes j and j + 4, two rows a vector: [row 2k | row 2k + 1].
                let halves: [__m256; 4] = std::array::from_fn(|k| {
                    let (a, b) = (sums[2 * k], sums[2 * k + 1]);
                    _mm256_add_ps(
                        _mm256_permute2f128_ps::<0x20>(a, b),
                        _mm256_permute2f128_ps::<0x31>(a, b),
                    )
                });
                // Lanes 0 + 1 and 2 + 3, then their sums: rows [0, 2, 4, 6 | 1, 3, 5, 7].
                let pairs = [
                    _mm256_hadd_ps(halves[0], halves[1]),
                    _mm256_hadd_ps(halves[2], halves[3]),
                ];
                let total = _mm256_hadd_ps(pairs[0], pairs[1]);
                let mut scores = [0f32; 8];
                // SAFETY: 8 floats fit `scores`; the store is unaligned.
                unsafe {
                    _mm256_storeu_ps(scores.as_mut_ptr(), _mm256_permutevar8x32_ps(total, order))
                };
                for (j, &s) in scores.iter().enumerate() {
                    // SAFETY: score (r + j) * heads + h is in `out` (caller).
                    unsafe { *out.add((r + j) * heads + h) = s };
                }
            }
            r += 8;
        }
    }
    while r < m {
        for h in 0..heads {
            // SAFETY: row r < m holds n values, query h < heads too, and score r * heads + h is
            // in `out` (caller).
            unsafe {
                *out.add(r * heads + h) = dot_f16_avx2(n, rows.add(r * stride), queries.add(h * n))
            }
        }
        r += 1;
    }
}

/// `vec::mad_f16_rows` with the accumulators in registers, up to four heads and up to eight
/// vectors' worth of values at a time, across all the rows: each value row is widened once
/// for the heads, and each step rounds to f16 and back in the register, which is what storing
/// and reloading the f16 does, so the numbers are `scale_f16_avx2`'s and `mad_f16_avx2`'s row
/// by row; the heads' chains of dependent steps run side by side. The last `n % 16` values go
/// row by row as `mad_f16_avx2` computes them.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `acc` points to `heads * n` values, and `values` to
/// `weights.len() / heads` rows of `n` values, `stride` apart; `rescales` is as long as
/// `weights`, a multiple of `heads`.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mad_f16_rows_avx2(
    n: usize,
    heads: usize,
    acc: *mut f16,
    values: *const f16,
    stride: usize,
    rescales: &[Option<f32>],
    weights: &[f32],
) {
    let rows = weights.len() / heads;
    let mut h0 = 0;
    while h0 < heads {
        let group = (heads - h0).min(4);
        let step = |r: usize, h: usize| {
            let i = r * heads + h0 + h;
            (rescales[i], weights[i])
        };
        // As many values of each head at a time as eight vectors hold across the group (64
        // for one head, 32 for two to four), then sixteen.
        let wide = if group == 1 { 64 } else { 32 };
        let mut c = 0;
        while c + 16 <= n {
            let width = if c + wide <= n { wide } else { 16 };
            // SAFETY: values c..c + width of accumulators h0..h0 + group and of every row are
            // in bounds (caller).
            unsafe {
                let at = acc.add(h0 * n + c);
                let v = values.add(c);
                match (group, width) {
                    (1, 64) => mad_rows_chunk::<__m256, 1, 8>(n, at, v, stride, rows, step),
                    (2, 32) => mad_rows_chunk::<__m256, 2, 4>(n, at, v, stride, rows, step),
                    (3, 32) => mad_rows_chunk::<__m256, 3, 4>(n, at, v, stride, rows, step),
                    (4, 32) => mad_rows_chunk::<__m256, 4, 4>(n, at, v, stride, rows, step),
                    (1, _) => mad_rows_chunk::<__m256, 1, 2>(n, at, v, stride, rows, step),
                    (2, _) => mad_rows_chunk::<__m256, 2, 2>(n, at, v, stride, rows, step),
                    (3, _) => mad_rows_chunk::<__m256, 3, 2>(n, at, v, stride, rows, step),
                    _ => mad_rows_chunk::<__m256, 4, 2>(n, at, v, stride, rows, step),
                }
            }
            c += width;
        }
        if c < n {
            for h in 0..group {
                for r in 0..rows {
                    let (rescale, w) = step(r, h);
                    // SAFETY: values c..n of accumulator h0 + h and of row r are in bounds
                    // (caller).
                    unsafe {
                        let a = acc.add((h0 + h) * n + c);
                        if let Some(s) = rescale {
                            scale_f16_avx2(n - c, a, s);
                        }
                        mad_f16_avx2(n - c, a, values.add(r * stride + c), w);
                    }
                }
            }
        }
        h0 += group;
    }
}

/// An f32 vector of one x86 width, as [`mad_rows_chunk`] uses it: `LANES` values widened
/// from f16, rounded to f16 and back, stored as f16.
///
/// The methods are `#[inline(always)]` and carry no target features themselves: they are
/// inlined into the kernels that do (AVX2's here, AVX-512's in `avx512::vec`), which is where
/// their intrinsics compile.
pub(in crate::kernels::x86_64) trait F16Lanes: Copy {
    /// Values per vector.
    const LANES: usize;
    /// The `LANES` f16 at `p`, widened.
    ///
    /// # Safety
    /// The CPU has the vector's instruction set; `p` points to `LANES` values.
    unsafe fn load_f16(p: *const f16) -> Self;
    /// `self` rounded to f16 at `p`.
    ///
    /// # Safety
    /// As [`F16Lanes::load_f16`]'s.
    unsafe fn store_f16(self, p: *mut f16);
    /// `x` in every lane.
    ///
    /// # Safety
    /// The CPU has the vector's instruction set.
    unsafe fn splat(x: f32) -> Self;
    /// `self` rounded to f16 and widened back, lane by lane: what a store and a reload give.
    ///
    /// # Safety
    /// As [`F16Lanes::splat`]'s.
    unsafe fn round_f16(self) -> Self;
    /// `self · s`, lane by lane.
    ///
    /// # Safety
    /// As [`F16Lanes::splat`]'s.
    unsafe fn mul(self, s: Self) -> Self;
    /// `fma(self, w, acc)`, lane by lane.
    ///
    /// # Safety
    /// As [`F16Lanes::splat`]'s.
    unsafe fn mul_add(self, w: Self, acc: Self) -> Self;
}

impl F16Lanes for __m256 {
    const LANES: usize = 8;
    #[inline(always)]
    unsafe fn load_f16(p: *const f16) -> Self {
        // SAFETY: AVX2 and F16C, and 8 values at `p` (caller); the load is unaligned.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }
    #[inline(always)]
    unsafe fn store_f16(self, p: *mut f16) {
        // SAFETY: as `load_f16`'s; the store is unaligned.
        unsafe { _mm_storeu_si128(p.cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self)) }
    }
    #[inline(always)]
    unsafe fn splat(x: f32) -> Self {
        // SAFETY: the CPU has AVX (caller).
        unsafe { _mm256_set1_ps(x) }
    }
    #[inline(always)]
    unsafe fn round_f16(self) -> Self {
        // SAFETY: the CPU has F16C (caller).
        unsafe { _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(self)) }
    }
    #[inline(always)]
    unsafe fn mul(self, s: Self) -> Self {
        // SAFETY: the CPU has AVX (caller).
        unsafe { _mm256_mul_ps(self, s) }
    }
    #[inline(always)]
    unsafe fn mul_add(self, w: Self, acc: Self) -> Self {
        // SAFETY: the CPU has FMA (caller).
        unsafe { _mm256_fmadd_ps(self, w, acc) }
    }
}

/// `K` vectors of values of `H` accumulators (`n` apart from `acc`) through `rows` value rows
/// (`stride` apart from `values`), the registers holding the accumulators across all the rows:
/// `step(r, h)` is head `h`'s rescale and weight at row `r`. Each value row is widened once for
/// the heads; each step rounds to f16 and back in the register, which is what storing and
/// reloading the f16 does, so the numbers are `scale_f16`'s and `mad_f16`'s row by row. The
/// heads' chains of dependent steps run side by side.
///
/// # Safety
/// The CPU has `V`'s instruction set (the caller's target features; this function is always
/// inlined into it); `K · V::LANES` values at `acc + h · n` (`h < H`) and at
/// `values + r · stride` (`r < rows`).
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn mad_rows_chunk<
    V: F16Lanes,
    const H: usize,
    const K: usize,
>(
    n: usize,
    acc: *mut f16,
    values: *const f16,
    stride: usize,
    rows: usize,
    step: impl Fn(usize, usize) -> (Option<f32>, f32),
) {
    let lanes = V::LANES;
    let mut a: [[V; K]; H] = std::array::from_fn(|h| {
        std::array::from_fn(|k| {
            // SAFETY: the instruction set, and the values of accumulator h (caller).
            unsafe { V::load_f16(acc.add(h * n + lanes * k)) }
        })
    });
    for r in 0..rows {
        let v: [V; K] = std::array::from_fn(|k| {
            // SAFETY: the instruction set, and the values of row r (caller).
            unsafe { V::load_f16(values.add(r * stride + lanes * k)) }
        });
        for (h, a) in a.iter_mut().enumerate() {
            let (rescale, w) = step(r, h);
            // SAFETY: the instruction set (caller).
            unsafe {
                if let Some(s) = rescale {
                    let vs = V::splat(s);
                    for a in a.iter_mut() {
                        *a = a.mul(vs).round_f16();
                    }
                }
                let vw = V::splat(w);
                for (a, &v) in a.iter_mut().zip(&v) {
                    *a = v.mul_add(vw, *a).round_f16();
                }
            }
        }
    }
    for (h, a) in a.iter().enumerate() {
        for (k, a) in a.iter().enumerate() {
            // SAFETY: as the loads above.
            unsafe { a.store_f16(acc.add(h * n + lanes * k)) };
        }
    }
}

/// `x[i] = expf(x[i])` with glibc's bits (`vec::exp_f32`; the algorithm and its constants in
/// [`glibc_expf`]), eight values at a time as two vectors of four doubles; the values glibc
/// handles apart (`|x| >= 88`, infinities, NaN) and the last `n % 8` go through libm's `expf`
/// itself.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `x` points to `n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn exp_f32_avx2(n: usize, x: *mut f32) {
    use glibc_expf::*;
    let f = |bits: u64| _mm256_set1_pd(f64::from_bits(bits));
    let (inv_ln2_n, shift, one) = (f(INV_LN2_N), f(SHIFT), _mm256_set1_pd(1.0));
    let (c0, c1, c2) = (f(POLY[0]), f(POLY[1]), f(POLY[2]));
    let exp4 = |v: __m128| {
        let xd = _mm256_cvtps_pd(v);
        let kd = _mm256_fmadd_pd(inv_ln2_n, xd, shift);
        let ki = _mm256_castpd_si256(kd);
        let kd = _mm256_sub_pd(kd, shift);
        let r = _mm256_fmsub_pd(inv_ln2_n, xd, kd);
        let index = _mm256_and_si256(ki, _mm256_set1_epi64x(31));
        // SAFETY: every index is below 32, in TABLE.
        let t = unsafe { _mm256_i64gather_epi64::<8>(TABLE.as_ptr().cast(), index) };
        let s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64::<47>(ki)));
        let z = _mm256_fmadd_pd(r, c0, c1);
        let r2 = _mm256_mul_pd(r, r);
        let y = _mm256_fmadd_pd(r, c2, one);
        let y = _mm256_fmadd_pd(z, r2, y);
        _mm256_cvtpd_ps(_mm256_mul_pd(y, s))
    };
    let top = _mm256_set1_epi32(SPECIAL_TOP as i32 - 1);
    let mut i = 0;
    while i + 8 <= n {
        // SAFETY: i + 8 <= n; the load and the store are unaligned.
        unsafe {
            let v = _mm256_loadu_ps(x.add(i));
            let abs_top = _mm256_and_si256(
                _mm256_srli_epi32::<20>(_mm256_castps_si256(v)),
                _mm256_set1_epi32(0x7ff),
            );
            let special = _mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(abs_top, top)));
            let e = _mm256_set_m128(
                exp4(_mm256_extractf128_ps::<1>(v)),
                exp4(_mm256_castps256_ps128(v)),
            );
            let mut inputs = [0f32; 8];
            _mm256_storeu_ps(inputs.as_mut_ptr(), v);
            _mm256_storeu_ps(x.add(i), e);
            if special != 0 {
                for (k, v) in inputs.iter().enumerate() {
                    if special & (1 << k) != 0 {
                        *x.add(i + k) = v.exp();
                    }
                }
            }
        }
        i += 8;
    }
    for k in i..n {
        // SAFETY: k < n.
        unsafe { *x.add(k) = (*x.add(k)).exp() };
    }
}

/// glibc's `expf` for x86-64 CPUs with FMA (`__expf_fma`, glibc 2.28 and later: Arm's
/// optimized-routines algorithm as GCC contracts it there): with `N = 32`,
/// `k = round(x · N/ln 2)` (by adding and subtracting 1.5 · 2^52 within one FMA),
/// `r = x · N/ln 2 - k` (one FMA), `2^(k/N)` from a table of `2^(i/N)` and the exponent bits,
/// and `2^(r/N) ≈ (C0·r + C1)·r² + (C2·r + 1)` in three FMAs, all in f64, rounded to f32 once.
/// The AVX-512 kernel shares these.
pub(in crate::kernels::x86_64) mod glibc_expf {
    /// `N / ln 2`.
    pub(in crate::kernels::x86_64) const INV_LN2_N: u64 = 0x4047_1547_652b_82fe;
    /// `1.5 · 2^52`: added to a double below 2^51 in magnitude, it rounds to an integer.
    pub(in crate::kernels::x86_64) const SHIFT: u64 = 0x4338_0000_0000_0000;
    /// The polynomial's coefficients for `r` scaled by `N` (`C0`, `C1`, `C2`).
    pub(in crate::kernels::x86_64) const POLY: [u64; 3] = [
        0x3ebc_6af8_4b91_2394,
        0x3f2e_bfce_50fa_c4f3,
        0x3f96_2e42_ff0c_52d6,
    ];
    /// Entry `i`: the bits of `2^(i/N)` minus `i << 47`, so that adding `k << 47` for any `k`
    /// with `k % N = i` gives the bits of `2^(k/N)`.
    pub(in crate::kernels::x86_64) const TABLE: [u64; 32] = [
        0x3ff0000000000000,
        0x3fefd9b0d3158574,
        0x3fefb5586cf9890f,
        0x3fef9301d0125b51,
        0x3fef72b83c7d517b,
        0x3fef54873168b9aa,
        0x3fef387a6e756238,
        0x3fef1e9df51fdee1,
        0x3fef06fe0a31b715,
        0x3feef1a7373aa9cb,
        0x3feedea64c123422,
        0x3feece086061892d,
        0x3feebfdad5362a27,
        0x3feeb42b569d4f82,
        0x3feeab07dd485429,
        0x3feea47eb03a5585,
        0x3feea09e667f3bcd,
        0x3fee9f75e8ec5f74,
        0x3feea11473eb0187,
        0x3feea589994cce13,
        0x3feeace5422aa0db,
        0x3feeb737b0cdc5e5,
        0x3feec49182a3f090,
        0x3feed503b23e255d,
        0x3feee89f995ad3ad,
        0x3feeff76f2fb5e47,
        0x3fef199bdd85529c,
        0x3fef3720dcef9069,
        0x3fef5818dcfba487,
        0x3fef7c97337b9b5f,
        0x3fefa4afa2a490da,
        0x3fefd0765b6e4540,
    ];
    /// The top 12 bits of `|x|` from which glibc leaves the main path (`|x| >= 88`, infinities
    /// and NaN), handled there by special cases.
    pub(in crate::kernels::x86_64) const SPECIAL_TOP: u32 = 0x42b;
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

/// # Safety
/// The CPU has AVX2, FMA and F16C; `a` and `b` point to `n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn dot_f16_avx2(n: usize, a: *const f16, b: *const f16) -> f32 {
    let np = n & !31;
    let mut acc = [_mm256_setzero_ps(); 4];
    let load = |p: *const f16, i: usize| {
        // SAFETY: i + 8 <= np <= n (caller's bound).
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.add(i).cast())) }
    };
    let mut i = 0;
    while i < np {
        for (j, a_j) in acc.iter_mut().enumerate() {
            *a_j = _mm256_fmadd_ps(load(a, i + 8 * j), load(b, i + 8 * j), *a_j);
        }
        i += 32;
    }
    acc[0] = _mm256_add_ps(acc[0], acc[2]);
    acc[1] = _mm256_add_ps(acc[1], acc[3]);
    acc[0] = _mm256_add_ps(acc[0], acc[1]);
    // SAFETY: the caller's guarantee.
    unsafe { dot_f16_finish(acc[0], n, np, a, b) }
}

/// The end of ggml's AVX2 `ggml_vec_dot_f16`, from its accumulators already added into one
/// (`acc`): its eight lanes summed, widened to f64, then the values `np..n` (at most 31) added
/// one by one in f64.
///
/// # Safety
/// `a` and `b` point to `n` values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn dot_f16_finish(
    acc: __m256,
    n: usize,
    np: usize,
    a: *const f16,
    b: *const f16,
) -> f32 {
    let t0 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    let t1 = _mm_hadd_ps(t0, t0);
    let mut sum = f64::from(_mm_cvtss_f32(_mm_hadd_ps(t1, t1)));
    for k in np..n {
        // SAFETY: k < n (caller).
        let (x, y) = unsafe { ((*a.add(k)).to_f32(), (*b.add(k)).to_f32()) };
        sum += f64::from(x * y);
    }
    sum as f32
}

/// `acc[i] = f16(op(f32(acc[i]), i))` for the `n` values at `acc`, rounding to nearest even:
/// eight at a time with `lanes` (`op` on values `i..i + 8`), the last `n % 8` with `one`.
///
/// # Safety
/// `acc` points to `n` values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn map_f16(
    n: usize,
    acc: *mut f16,
    lanes: impl Fn(__m256, usize) -> __m256,
    one: impl Fn(f32, usize) -> f32,
) {
    let np = n & !7;
    let mut i = 0;
    while i < np {
        // SAFETY: i + 8 <= n.
        unsafe {
            let y = _mm256_cvtph_ps(_mm_loadu_si128(acc.add(i).cast()));
            let r = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(lanes(y, i));
            _mm_storeu_si128(acc.add(i).cast(), r);
        }
        i += 8;
    }
    for k in np..n {
        // SAFETY: k < n.
        unsafe { *acc.add(k) = f16::from_f32(one((*acc.add(k)).to_f32(), k)) };
    }
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `acc` and `x` point to `n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn mad_f16_avx2(n: usize, acc: *mut f16, x: *const f16, s: f32) {
    let vs = _mm256_set1_ps(s);
    // SAFETY: `map_f16` passes indices of `n` values, eight from `i` or one at `k` (caller).
    let lanes =
        |y, i| unsafe { _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128(x.add(i).cast())), vs, y) };
    // SAFETY: as above.
    let one = |y, k| unsafe { (*x.add(k)).to_f32().mul_add(s, y) };
    // SAFETY: the caller's guarantee.
    unsafe { map_f16(n, acc, lanes, one) }
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `acc` points to `n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn scale_f16_avx2(n: usize, acc: *mut f16, s: f32) {
    let vs = _mm256_set1_ps(s);
    // SAFETY: the caller's guarantee.
    unsafe { map_f16(n, acc, |y, _| _mm256_mul_ps(y, vs), |y, _| y * s) }
}

/// `ggml_v_expf` on eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn expf8(x: __m256) -> __m256 {
    let c = |bits: u32| _mm256_set1_ps(f32::from_bits(bits));
    let r = c(0x4b40_0000);
    let z = _mm256_fmadd_ps(x, c(0x3fb8_aa3b), r);
    let n = _mm256_sub_ps(z, r);
    let b = _mm256_fnmadd_ps(n, c(0x35bf_be8e), _mm256_fnmadd_ps(n, c(0x3f31_7200), x));
    let e = _mm256_slli_epi32::<23>(_mm256_castps_si256(z));
    let k = _mm256_castsi256_ps(_mm256_add_epi32(
        e,
        _mm256_castps_si256(_mm256_set1_ps(1.0)),
    ));
    let abs_n = _mm256_andnot_ps(_mm256_set1_ps(-0.0), n);
    let cmask = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(126.0)));
    let u = _mm256_mul_ps(b, b);
    let j = _mm256_fmadd_ps(
        _mm256_fmadd_ps(
            _mm256_fmadd_ps(c(0x3c07_2010), b, c(0x3d2b_9f17)),
            u,
            _mm256_fmadd_ps(c(0x3e2a_af33), b, c(0x3eff_fedb)),
        ),
        u,
        _mm256_mul_ps(c(0x3f7f_fff6), b),
    );
    if _mm256_movemask_ps(_mm256_castsi256_ps(cmask)) == 0 {
        return _mm256_fmadd_ps(j, k, k);
    }
    let g = _mm256_and_si256(
        _mm256_castps_si256(_mm256_cmp_ps::<_CMP_LE_OQ>(n, _mm256_setzero_ps())),
        _mm256_set1_epi32(0x8200_0000u32 as i32),
    );
    let s1 = _mm256_castsi256_ps(_mm256_add_epi32(g, _mm256_set1_epi32(0x7f00_0000)));
    let s2 = _mm256_castsi256_ps(_mm256_sub_epi32(e, g));
    let d = _mm256_castps_si256(_mm256_cmp_ps::<_CMP_GT_OQ>(abs_n, _mm256_set1_ps(192.0)));
    _mm256_or_ps(
        _mm256_and_ps(_mm256_castsi256_ps(d), _mm256_mul_ps(s1, s1)),
        _mm256_andnot_ps(
            _mm256_castsi256_ps(d),
            _mm256_or_ps(
                _mm256_and_ps(
                    _mm256_castsi256_ps(cmask),
                    _mm256_mul_ps(_mm256_fmadd_ps(s2, j, s2), s1),
                ),
                _mm256_andnot_ps(_mm256_castsi256_ps(cmask), _mm256_fmadd_ps(k, j, k)),
            ),
        ),
    )
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `gate` and `up` point to `n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn swiglu_avx2(n: usize, gate: *mut f32, up: *const f32) {
    let nv = n & !7;
    let one = _mm256_set1_ps(1.0);
    let mut i = 0;
    while i < nv {
        // SAFETY: i + 8 <= n.
        unsafe {
            let x = _mm256_loadu_ps(gate.add(i));
            let silu = _mm256_div_ps(
                x,
                _mm256_add_ps(one, expf8(_mm256_sub_ps(_mm256_setzero_ps(), x))),
            );
            _mm256_storeu_ps(gate.add(i), _mm256_mul_ps(silu, _mm256_loadu_ps(up.add(i))));
        }
        i += 8;
    }
    for k in nv..n {
        // SAFETY: k < n.
        unsafe {
            let x = *gate.add(k);
            *gate.add(k) = (x / (1.0 + (-x).exp())) * *up.add(k);
        }
    }
}

/// The GELU of eight lanes by `vec::gelu_one`'s rules, before the last step: returns `v`, which
/// holds `x` in the lanes at or above 10 and the table's GELU in all others, and the mask of the
/// lanes at or below -10 (all ones there), which the caller turns to +0.0 after any product.
///
/// The table's GELU of a lane is `f32(table[f16(x)])`: `vcvtps2ph` rounds to nearest even, as
/// `f16::from_f32` does (ggml's `_cvtss_sh(x, 0)` too); the sixteen-bit indices are widened to
/// 32 bits and `vpgatherdd` reads the 32-bit word at byte `2 * index` of the table (its entry
/// and the next; the table's padding entry keeps the read at index 0xFFFF inside it), of which
/// the low 16 bits are the entry. Lanes outside (-10, 10) are converted and looked up too (an
/// infinity or a value beyond the f16 range becomes an f16 infinity, NaN an f16 NaN: indices
/// like any other), and their results discarded by the blends. NaN lanes fail both comparisons
/// and keep the table's value, as in the scalar twin.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn gelu_parts8(table: &[u16; GELU_TABLE_LEN], x: __m256) -> (__m256, __m256) {
    let index = _mm256_cvtepu16_epi32(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x));
    // SAFETY: every index is at most 0xFFFF (zero-extended sixteen-bit values), so each
    // four-byte read, at byte 2 * index, ends at byte 2 * 0xFFFF + 4 = 2 * GELU_TABLE_LEN at
    // most: inside the table. The gather has no alignment requirement.
    let words = unsafe { _mm256_i32gather_epi32::<2>(table.as_ptr().cast(), index) };
    let entries = _mm256_and_si256(words, _mm256_set1_epi32(0xFFFF));
    // Pack the eight 32-bit entries (at most 0xFFFF, so the unsigned saturation keeps them) to
    // sixteen bits: `packus` works within 128-bit halves, giving entries 0..4 in quadword 0 and
    // 4..8 in quadword 2.
    let packed = _mm256_permute4x64_epi64::<0b00_00_10_00>(_mm256_packus_epi32(entries, entries));
    let gelu = _mm256_cvtph_ps(_mm256_castsi256_si128(packed));
    let high = _mm256_cmp_ps::<_CMP_GE_OQ>(x, _mm256_set1_ps(10.0));
    let low = _mm256_cmp_ps::<_CMP_LE_OQ>(x, _mm256_set1_ps(-10.0));
    (_mm256_blendv_ps(gelu, x, high), low)
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `x` points to `n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gelu_avx2(n: usize, x: *mut f32) {
    let table = gelu_table();
    let nv = n & !7;
    let mut i = 0;
    while i < nv {
        // SAFETY: i + 8 <= n; loads and stores are unaligned.
        unsafe {
            let (v, low) = gelu_parts8(table, _mm256_loadu_ps(x.add(i)));
            _mm256_storeu_ps(x.add(i), _mm256_andnot_ps(low, v));
        }
        i += 8;
    }
    for k in nv..n {
        // SAFETY: k < n.
        unsafe { *x.add(k) = gelu_one(table, *x.add(k)) };
    }
}

/// # Safety
/// The CPU has AVX2, FMA and F16C; `gate` and `up` point to `n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn geglu_avx2(n: usize, gate: *mut f32, up: *const f32) {
    let table = gelu_table();
    let nv = n & !7;
    let mut i = 0;
    while i < nv {
        // SAFETY: i + 8 <= n; loads and stores are unaligned.
        unsafe {
            let (v, low) = gelu_parts8(table, _mm256_loadu_ps(gate.add(i)));
            // One product per lane, as the scalar twin: x * up at or above 10, the table's
            // GELU * up below; then +0.0 at or below -10 whatever the product was.
            let y = _mm256_mul_ps(v, _mm256_loadu_ps(up.add(i)));
            _mm256_storeu_ps(gate.add(i), _mm256_andnot_ps(low, y));
        }
        i += 8;
    }
    for k in nv..n {
        // SAFETY: k < n.
        unsafe { *gate.add(k) = geglu_one(table, *gate.add(k), *up.add(k)) };
    }
}

/// `c += a·b` (row-major `m × k` times `k × n`), every element one chain of fused
/// multiply-adds over `k` in order, as `vec::gemm_f32`: blocks of six rows (one at a time for
/// the rest) by sixteen columns (then eight, then one at a time), as ggml's `simd_gemm`
/// blocks them on AVX2. Twelve accumulators hide the multiply-adds' latency; a block reads
/// each `b` row once for six rows of `a`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `c`, `a` and `b` point to `m * n`, `m * k` and `k * n`
/// values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_f32_avx2(m: usize, k: usize, n: usize, c: *mut f32, a: *const f32, b: *const f32) {
    let mut i = 0;
    while i + 6 <= m {
        // SAFETY: rows i..i + 6 of `c` and `a` are in bounds (caller).
        unsafe { gemm_rows::<6>(k, n, c.add(i * n), a.add(i * k), b) };
        i += 6;
    }
    while i < m {
        // SAFETY: row i of `c` and `a` is in bounds (caller).
        unsafe { gemm_rows::<1>(k, n, c.add(i * n), a.add(i * k), b) };
        i += 1;
    }
}

/// [`gemm_f32_avx2`] for `R` rows.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `c`, `a` and `b` point to `R * n`, `R * k` and `k * n`
/// values.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn gemm_rows<const R: usize>(k: usize, n: usize, c: *mut f32, a: *const f32, b: *const f32) {
    let mut j = 0;
    while j + 16 <= n {
        // SAFETY: columns j..j + 16 of the R rows of `c` and of the k rows of `b`, and the
        // R * k values of `a`, are in bounds (caller); loads and stores are unaligned.
        unsafe {
            let mut acc = [[_mm256_setzero_ps(); 2]; R];
            for (r, acc) in acc.iter_mut().enumerate() {
                acc[0] = _mm256_loadu_ps(c.add(r * n + j));
                acc[1] = _mm256_loadu_ps(c.add(r * n + j + 8));
            }
            for l in 0..k {
                let b0 = _mm256_loadu_ps(b.add(l * n + j));
                let b1 = _mm256_loadu_ps(b.add(l * n + j + 8));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = _mm256_set1_ps(*a.add(r * k + l));
                    acc[0] = _mm256_fmadd_ps(x, b0, acc[0]);
                    acc[1] = _mm256_fmadd_ps(x, b1, acc[1]);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                _mm256_storeu_ps(c.add(r * n + j), acc[0]);
                _mm256_storeu_ps(c.add(r * n + j + 8), acc[1]);
            }
        }
        j += 16;
    }
    while j + 8 <= n {
        // SAFETY: as above, for columns j..j + 8.
        unsafe {
            let mut acc = [_mm256_setzero_ps(); R];
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = _mm256_loadu_ps(c.add(r * n + j));
            }
            for l in 0..k {
                let b0 = _mm256_loadu_ps(b.add(l * n + j));
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc = _mm256_fmadd_ps(_mm256_set1_ps(*a.add(r * k + l)), b0, *acc);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                _mm256_storeu_ps(c.add(r * n + j), *acc);
            }
        }
        j += 8;
    }
    while j < n {
        for r in 0..R {
            // SAFETY: column j < n of row r < R of `c`, and the values of `a` and `b` read,
            // are in bounds (caller).
            unsafe {
                let mut acc = *c.add(r * n + j);
                for l in 0..k {
                    acc = (*a.add(r * k + l)).mul_add(*b.add(l * n + j), acc);
                }
                *c.add(r * n + j) = acc;
            }
        }
        j += 1;
    }
}

/// `x[i] = expf(x[i] - max)` and their sum, as `vec::soft_max_f32` (`ggml_vec_soft_max_f32`):
/// eight lanes at a time with ggml's `expf`, each eight summed across the lanes and added in
/// f64; the tail with libm's.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `x` points to `n` values.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn soft_max_f32_avx2(n: usize, x: *mut f32, max: f32) -> f64 {
    let nv = n & !7;
    let vmax = _mm256_set1_ps(max);
    let mut sum = 0f64;
    let mut i = 0;
    while i < nv {
        // SAFETY: i + 8 <= n.
        unsafe {
            let v = expf8(_mm256_sub_ps(_mm256_loadu_ps(x.add(i)), vmax));
            _mm256_storeu_ps(x.add(i), v);
            sum += f64::from(hsum(v));
        }
        i += 8;
    }
    while i < n {
        // SAFETY: i < n.
        unsafe {
            let v = (*x.add(i) - max).exp();
            *x.add(i) = v;
            sum += f64::from(v);
        }
        i += 1;
    }
    sum
}
