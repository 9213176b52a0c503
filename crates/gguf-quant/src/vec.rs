//! Float vector kernels the forward pass needs besides mat-vec, each computing what ggml's
//! x86 AVX2 build computes, in the same order: the f16 dot product and multiply-add of
//! attention over an f16 KV cache, and SwiGLU with ggml's vectorised `expf`. Each has an AVX2
//! version (chosen at run time, like the dot products) and a scalar twin that gives the same
//! bits; tests compare them.

use half::f16;

#[cfg(target_arch = "x86_64")]
use crate::kernels::{isa, Isa};

/// `Σ a[i] * b[i]` as `ggml_vec_dot_f16` (AVX2): four accumulators of eight lanes over 32
/// elements per step, fused multiply-adds, reduced pairwise; a tail of fewer than 32 elements
/// added in f64.
pub fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    let n = a.len().min(b.len());
    #[cfg(target_arch = "x86_64")]
    if isa() == Isa::Avx2 {
        // SAFETY: AVX2, FMA and F16C were detected; both slices hold `n` elements.
        return unsafe { avx2::dot_f16(n, a.as_ptr(), b.as_ptr()) };
    }
    dot_f16_scalar(&a[..n], &b[..n])
}

fn dot_f16_scalar(a: &[f16], b: &[f16]) -> f32 {
    let n = a.len();
    let np = n & !31;
    let mut acc = [[0f32; 8]; 4];
    for base in (0..np).step_by(32) {
        for (j, lanes) in acc.iter_mut().enumerate() {
            for (lane, v) in lanes.iter_mut().enumerate() {
                let i = base + j * 8 + lane;
                *v = a[i].to_f32().mul_add(b[i].to_f32(), *v);
            }
        }
    }
    let mut x = [0f32; 8];
    for (lane, v) in x.iter_mut().enumerate() {
        *v = (acc[0][lane] + acc[2][lane]) + (acc[1][lane] + acc[3][lane]);
    }
    let t = [x[0] + x[4], x[1] + x[5], x[2] + x[6], x[3] + x[7]];
    let mut sum = f64::from((t[0] + t[1]) + (t[2] + t[3]));
    for i in np..n {
        sum += f64::from(a[i].to_f32() * b[i].to_f32());
    }
    sum as f32
}

/// `acc[i] = f16(x[i] * s + acc[i])` (fused), as `ggml_vec_mad_f16`.
pub fn mad_f16(acc: &mut [f16], x: &[f16], s: f32) {
    let n = acc.len().min(x.len());
    #[cfg(target_arch = "x86_64")]
    if isa() == Isa::Avx2 {
        // SAFETY: AVX2, FMA and F16C were detected; both slices hold `n` elements.
        unsafe { avx2::mad_f16(n, acc.as_mut_ptr(), x.as_ptr(), s) };
        return;
    }
    for (a, &v) in acc[..n].iter_mut().zip(x) {
        *a = f16::from_f32(v.to_f32().mul_add(s, a.to_f32()));
    }
}

/// `acc[i] = f16(acc[i] * s)`, as `ggml_vec_scale_f16`.
pub fn scale_f16(acc: &mut [f16], s: f32) {
    #[cfg(target_arch = "x86_64")]
    if isa() == Isa::Avx2 {
        // SAFETY: AVX2, FMA and F16C were detected; the slice holds `acc.len()` elements.
        unsafe { avx2::scale_f16(acc.len(), acc.as_mut_ptr(), s) };
        return;
    }
    for a in acc.iter_mut() {
        *a = f16::from_f32(a.to_f32() * s);
    }
}

/// `dst[i] = f16(src[i])`, rounding to nearest even.
pub fn f32_to_f16(src: &[f32], dst: &mut [f16]) {
    use half::slice::HalfFloatSliceExt;
    let n = src.len().min(dst.len());
    dst[..n].convert_from_f32_slice(&src[..n]);
}

/// `dst[i] = f32(src[i])`.
pub fn f16_to_f32(src: &[f16], dst: &mut [f32]) {
    use half::slice::HalfFloatSliceExt;
    let n = src.len().min(dst.len());
    src[..n].convert_to_f32_slice(&mut dst[..n]);
}

/// ggml's vectorised `expf` (`ggml_v_expf`, from ARM's optimized routines), one lane: its
/// results differ from libm's `expf` in the last bits.
pub fn ggml_expf(x: f32) -> f32 {
    let f = f32::from_bits;
    let r = f(0x4b40_0000);
    let z = x.mul_add(f(0x3fb8_aa3b), r);
    let n = z - r;
    let b = (-n).mul_add(f(0x35bf_be8e), (-n).mul_add(f(0x3f31_7200), x));
    let e = z.to_bits().wrapping_shl(23);
    let k = f(e.wrapping_add(1f32.to_bits()));
    let u = b * b;
    let j = f(0x3c07_2010)
        .mul_add(b, f(0x3d2b_9f17))
        .mul_add(u, f(0x3e2a_af33).mul_add(b, f(0x3eff_fedb)))
        .mul_add(u, f(0x3f7f_fff6) * b);
    if n.abs() <= 126.0 {
        return j.mul_add(k, k);
    }
    let g: u32 = if n <= 0.0 { 0x8200_0000 } else { 0 };
    let s1 = f(g.wrapping_add(0x7f00_0000));
    let s2 = f(e.wrapping_sub(g));
    if n.abs() > 192.0 {
        s1 * s1
    } else {
        s2.mul_add(j, s2) * s1
    }
}

/// `gate[i] = silu(gate[i]) * up[i]` with `silu(x) = x / (1 + expf(-x))`, as
/// `ggml_vec_swiglu_f32` (AVX2, ggml's vectorised `expf`; a tail of fewer than 8 with libm's).
pub fn swiglu(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    #[cfg(target_arch = "x86_64")]
    if isa() == Isa::Avx2 {
        // SAFETY: AVX2, FMA and F16C were detected; both slices hold `n` elements.
        unsafe { avx2::swiglu(n, gate.as_mut_ptr(), up.as_ptr()) };
        return;
    }
    swiglu_scalar(&mut gate[..n], &up[..n]);
}

fn swiglu_scalar(gate: &mut [f32], up: &[f32]) {
    let n = gate.len();
    let nv = n & !7;
    for i in 0..n {
        let x = gate[i];
        let e = if i < nv {
            ggml_expf(0.0 - x)
        } else {
            (-x).exp()
        };
        gate[i] = (x / (1.0 + e)) * up[i];
    }
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use half::f16;

    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `a` and `b` point to `n` values.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn dot_f16(n: usize, a: *const f16, b: *const f16) -> f32 {
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

    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `acc` and `x` point to `n` values.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn mad_f16(n: usize, acc: *mut f16, x: *const f16, s: f32) {
        let np = n & !7;
        let vs = _mm256_set1_ps(s);
        let mut i = 0;
        while i < np {
            // SAFETY: i + 8 <= n.
            unsafe {
                let y = _mm256_cvtph_ps(_mm_loadu_si128(acc.add(i).cast()));
                let v = _mm256_cvtph_ps(_mm_loadu_si128(x.add(i).cast()));
                let r = _mm256_fmadd_ps(v, vs, y);
                _mm_storeu_si128(
                    acc.add(i).cast(),
                    _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r),
                );
            }
            i += 8;
        }
        for k in np..n {
            // SAFETY: k < n.
            unsafe {
                let y = (*acc.add(k)).to_f32();
                *acc.add(k) = f16::from_f32((*x.add(k)).to_f32().mul_add(s, y));
            }
        }
    }

    /// # Safety
    /// The CPU has AVX2, FMA and F16C; `acc` points to `n` values.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn scale_f16(n: usize, acc: *mut f16, s: f32) {
        let np = n & !7;
        let vs = _mm256_set1_ps(s);
        let mut i = 0;
        while i < np {
            // SAFETY: i + 8 <= n.
            unsafe {
                let y = _mm256_cvtph_ps(_mm_loadu_si128(acc.add(i).cast()));
                let r = _mm256_mul_ps(y, vs);
                _mm_storeu_si128(
                    acc.add(i).cast(),
                    _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(r),
                );
            }
            i += 8;
        }
        for k in np..n {
            // SAFETY: k < n.
            unsafe { *acc.add(k) = f16::from_f32((*acc.add(k)).to_f32() * s) };
        }
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
    pub(super) unsafe fn swiglu(n: usize, gate: *mut f32, up: *const f32) {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn values(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed | 1;
        (0..n)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 17;
                s ^= s << 5;
                (s as f32 / u32::MAX as f32 - 0.5) * 8.0
            })
            .collect()
    }

    fn halves(v: &[f32]) -> Vec<f16> {
        v.iter().map(|&x| f16::from_f32(x)).collect()
    }

    #[test]
    fn simd_kernels_equal_their_scalar_twins_bit_for_bit() {
        for n in [0usize, 1, 7, 8, 31, 32, 33, 64, 100, 128, 257] {
            let (a, b) = (halves(&values(n, 3)), halves(&values(n, 5)));
            assert_eq!(
                dot_f16(&a, &b).to_bits(),
                dot_f16_scalar(&a, &b).to_bits(),
                "dot {n}"
            );

            let mut acc = halves(&values(n, 7));
            let mut twin = acc.clone();
            mad_f16(&mut acc, &a, 0.37);
            for (t, &x) in twin.iter_mut().zip(&a) {
                *t = f16::from_f32(x.to_f32().mul_add(0.37, t.to_f32()));
            }
            assert_eq!(acc, twin, "mad {n}");
            scale_f16(&mut acc, 0.61);
            for t in twin.iter_mut() {
                *t = f16::from_f32(t.to_f32() * 0.61);
            }
            assert_eq!(acc, twin, "scale {n}");

            let mut gate = values(n, 11);
            gate.iter_mut().enumerate().for_each(|(i, g)| {
                if i % 9 == 0 {
                    *g *= 40.0; // reach the saturating branches of expf
                }
            });
            let up = values(n, 13);
            let mut twin = gate.clone();
            swiglu(&mut gate, &up);
            swiglu_scalar(&mut twin, &up);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&gate), bits(&twin), "swiglu {n}");
        }
    }

    #[test]
    fn ggml_expf_is_close_to_libm() {
        for i in -2000..2000 {
            let x = i as f32 * 0.05;
            let (a, b) = (ggml_expf(x), x.exp());
            // Relative error for normal results; subnormal ones lose precision in both.
            if b.is_infinite() {
                assert!(a.is_infinite(), "{x}: {a}");
                continue;
            }
            let err = if b >= f32::MIN_POSITIVE {
                ((a - b) / b).abs()
            } else {
                (a - b).abs() / f32::MIN_POSITIVE
            };
            assert!(err < 4e-7, "{x}: {a} vs {b}");
        }
        assert_eq!(ggml_expf(-200.0), 0.0);
        assert!(ggml_expf(200.0).is_infinite());
    }
}
