//! AVX2 float kernels: the F16 weight dot product, and the kernels of [`crate::vec`] (the f16
//! dot product, multiply-add and scale of attention over an f16 KV cache, SwiGLU with ggml's
//! vectorised `expf`, GELU and GeGLU through ggml's f16 GELU table, the f32 product and the
//! softmax of tiled flash attention), each in ggml's AVX2 order, bit for bit as the scalar
//! twins in `vec`.

use std::arch::x86_64::*;

use half::f16;

use super::common::{f16_at, hsum};
use crate::vec::{geglu_one, gelu_one, gelu_table, GELU_TABLE_LEN};

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
