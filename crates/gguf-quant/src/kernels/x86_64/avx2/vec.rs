//! AVX2 float kernels: the F16 weight dot product, and the kernels of [`crate::vec`] (the f16
//! dot product, multiply-add and scale of attention over an f16 KV cache, SwiGLU with ggml's
//! vectorised `expf`), each in ggml's AVX2 order, bit for bit as the scalar twins in `vec`.

use std::arch::x86_64::*;

use half::f16;

use super::common::{f16_at, hsum};

safe_wrapper!(f16_f16, f16_f16_avx2, F16);

vec_kernels!(dot_f16_avx2, mad_f16_avx2, scale_f16_avx2, swiglu_avx2);

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
    let t0 = _mm_add_ps(
        _mm256_castps256_ps128(acc[0]),
        _mm256_extractf128_ps(acc[0], 1),
    );
    let t1 = _mm_hadd_ps(t0, t0);
    let mut sum = f64::from(_mm_cvtss_f32(_mm_hadd_ps(t1, t1)));
    for k in np..n {
        // SAFETY: k < n.
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
