//! Float vector kernels the forward pass needs besides mat-vec, each computing what ggml's
//! x86 AVX2 build computes, in the same order: the f16 dot product and multiply-add of
//! attention over an f16 KV cache, and SwiGLU with ggml's vectorised `expf`.
//!
//! This module holds the scalar twins, which give the same bits as the SIMD versions, and the
//! safe dispatch: the SIMD versions live with their instruction set's other kernels
//! (`kernels::x86_64::avx2::vec`), are chosen once, like the dot products, and are tested bit for
//! bit against the twins (`kernels::simd_tests`).

use std::sync::OnceLock;

use half::f16;

/// The kernels behind this module's functions, on one instruction set. Each takes slices of
/// equal length (it reads only as many values as the shorter one holds).
#[derive(Clone, Copy)]
pub(crate) struct VecKernels {
    /// See [`dot_f16`].
    pub(crate) dot_f16: fn(&[f16], &[f16]) -> f32,
    /// See [`mad_f16`].
    pub(crate) mad_f16: fn(&mut [f16], &[f16], f32),
    /// See [`scale_f16`].
    pub(crate) scale_f16: fn(&mut [f16], f32),
    /// See [`swiglu`].
    pub(crate) swiglu: fn(&mut [f32], &[f32]),
}

/// The scalar twins.
pub(crate) const SCALAR: VecKernels = VecKernels {
    dot_f16: dot_f16_scalar,
    mad_f16: mad_f16_scalar,
    scale_f16: scale_f16_scalar,
    swiglu: swiglu_scalar,
};

/// The kernels of this process's instruction set (chosen once).
fn kernels() -> &'static VecKernels {
    static KERNELS: OnceLock<VecKernels> = OnceLock::new();
    KERNELS.get_or_init(|| {
        crate::kernels::simd(crate::isa())
            .and_then(|k| k.vec)
            .unwrap_or(SCALAR)
    })
}

/// `Σ a[i] * b[i]` as `ggml_vec_dot_f16` (AVX2): four accumulators of eight lanes over 32
/// elements per step, fused multiply-adds, reduced pairwise; a tail of fewer than 32 elements
/// added in f64.
pub fn dot_f16(a: &[f16], b: &[f16]) -> f32 {
    let n = a.len().min(b.len());
    (kernels().dot_f16)(&a[..n], &b[..n])
}

fn dot_f16_scalar(a: &[f16], b: &[f16]) -> f32 {
    let n = a.len().min(b.len());
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
    (kernels().mad_f16)(&mut acc[..n], &x[..n], s);
}

fn mad_f16_scalar(acc: &mut [f16], x: &[f16], s: f32) {
    for (a, &v) in acc.iter_mut().zip(x) {
        *a = f16::from_f32(v.to_f32().mul_add(s, a.to_f32()));
    }
}

/// `acc[i] = f16(acc[i] * s)`, as `ggml_vec_scale_f16`.
pub fn scale_f16(acc: &mut [f16], s: f32) {
    (kernels().scale_f16)(acc, s);
}

fn scale_f16_scalar(acc: &mut [f16], s: f32) {
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
    (kernels().swiglu)(&mut gate[..n], &up[..n]);
}

fn swiglu_scalar(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
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

#[cfg(test)]
mod tests {
    use super::*;

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
