//! Float vector kernels the forward pass needs besides mat-vec, each computing what ggml's
//! x86 AVX2 build computes, in the same order: the f16 dot product and multiply-add of
//! attention over an f16 KV cache, SwiGLU with ggml's vectorised `expf`, and GELU and GeGLU
//! through ggml's f16 GELU table.
//!
//! This module holds the scalar twins, which give the same bits as the SIMD versions, and the
//! safe dispatch: the SIMD versions live with their instruction set's other kernels
//! (`kernels::x86_64::avx2::vec`, `kernels::aarch64::neon::vec`), are chosen once, like the dot
//! products, and are tested bit for bit against the twins (`kernels::simd_tests::vec_kernels`).

use std::sync::OnceLock;

use half::f16;

/// A [`gemm_f32`] kernel: `(c, a, b, m, k, n)`.
pub(crate) type GemmF32Fn = fn(&mut [f32], &[f32], &[f32], usize, usize, usize);

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
    /// See [`gelu`].
    pub(crate) gelu: fn(&mut [f32]),
    /// See [`geglu`].
    pub(crate) geglu: fn(&mut [f32], &[f32]),
    /// See [`gemm_f32`]; the table's entry checks the lengths itself.
    pub(crate) gemm_f32: GemmF32Fn,
    /// See [`soft_max_f32`].
    pub(crate) soft_max_f32: fn(&mut [f32], f32) -> f64,
    /// See [`mad_f16_rows`]; `None` runs [`scale_f16`] and [`mad_f16`] row by row. The table's
    /// entry gets checked lengths.
    pub(crate) mad_f16_rows: Option<MadRowsFn>,
    /// See [`dot_f16_rows`]; `None` runs [`dot_f16`] row by row. The table's entry gets
    /// checked lengths.
    pub(crate) dot_f16_rows: Option<DotRowsFn>,
    /// See [`exp_f32`].
    pub(crate) exp_f32: fn(&mut [f32]),
}

/// A [`dot_f16_rows`] kernel: `(out, rows, stride, queries, heads)`, with lengths checked
/// as there.
pub(crate) type DotRowsFn = fn(&mut [f32], &[f16], usize, &[f16], usize);

/// A [`mad_f16_rows`] kernel: `(acc, heads, values, stride, rescales, weights)`, with
/// lengths checked as there and `rescales` as long as `weights`.
pub(crate) type MadRowsFn = fn(&mut [f16], usize, &[f16], usize, &[Option<f32>], &[f32]);

/// The scalar twins.
pub(crate) const SCALAR: VecKernels = VecKernels {
    dot_f16: dot_f16_scalar,
    mad_f16: mad_f16_scalar,
    scale_f16: scale_f16_scalar,
    swiglu: swiglu_scalar,
    gelu: gelu_scalar,
    geglu: geglu_scalar,
    gemm_f32: gemm_f32_scalar,
    soft_max_f32: soft_max_f32_scalar,
    mad_f16_rows: None,
    dot_f16_rows: None,
    exp_f32: exp_f32_scalar,
};

/// The kernels of this process's instruction set (chosen once).
fn kernels() -> &'static VecKernels {
    static KERNELS: OnceLock<VecKernels> = OnceLock::new();
    KERNELS.get_or_init(|| {
        super::simd(super::isa())
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

/// `out[r * heads + h] = dot_f16(row r, query h)`: `queries` holds `heads` queries of
/// `n = queries.len() / heads` values back to back, and `rows[r * stride..]` the `n` values of
/// row `r`, for the `out.len() / heads` rows. This is attention scoring the query heads that
/// share a KV head against their cached keys; the bits are [`dot_f16`]'s, row by row and head
/// by head (an instruction set may score several rows and heads at once).
///
/// # Panics
/// If `heads` is 0 or does not divide `queries.len()` and `out.len()`, if `stride < n`, or if
/// `rows` does not hold the rows.
///
/// ```
/// use gguf_quant::vec::{dot_f16, dot_f16_rows};
/// use half::f16;
/// let keys: Vec<f16> = (0..3 * 4).map(|i| f16::from_f32(i as f32)).collect();
/// let one = [f16::ONE, f16::ZERO, f16::ONE];
/// let mut scores = [0f32; 3];
/// dot_f16_rows(&mut scores, &keys, 4, &one, 1);
/// assert_eq!(scores, [2.0, 10.0, 18.0]);
/// assert_eq!(scores[1], dot_f16(&keys[4..7], &one));
///
/// // Two queries: row by row, each row's scores side by side.
/// let two = [f16::ONE, f16::ZERO, f16::ONE, f16::ZERO, f16::ONE, f16::ZERO];
/// let mut scores = [0f32; 6];
/// dot_f16_rows(&mut scores, &keys, 4, &two, 2);
/// assert_eq!(scores, [2.0, 1.0, 10.0, 5.0, 18.0, 9.0]);
/// ```
pub fn dot_f16_rows(out: &mut [f32], rows: &[f16], stride: usize, queries: &[f16], heads: usize) {
    assert!(heads > 0 && queries.len().is_multiple_of(heads) && out.len().is_multiple_of(heads));
    let (n, m) = (queries.len() / heads, out.len() / heads);
    if m == 0 {
        return;
    }
    assert!(stride >= n && rows.len() >= (m - 1) * stride + n);
    let k = kernels();
    match k.dot_f16_rows {
        Some(f) => f(out, rows, stride, queries, heads),
        None => {
            for (r, scores) in out.chunks_exact_mut(heads).enumerate() {
                let row = &rows[r * stride..r * stride + n];
                for (o, q) in scores.iter_mut().zip(queries.chunks_exact(n)) {
                    *o = (k.dot_f16)(row, q);
                }
            }
        }
    }
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

/// Value rows into `heads` accumulators one after another, as attention accumulates them:
/// `acc` holds the accumulators back to back (`n = acc.len() / heads` values each), and for
/// row `r` (`values[r * stride..]`, `n` values) and head `h`, with `i = r * heads + h`, first
/// [`scale_f16`]`(acc_h, s)` when `rescales[i]` is `Some(s)`, then
/// [`mad_f16`]`(acc_h, row, weights[i])`. The numbers are those of those calls; an instruction
/// set may keep the accumulators in registers between rows (the f16 rounding after each step
/// included) and update several heads with each row it loads.
///
/// # Panics
/// If `heads` is 0 or does not divide `acc.len()` and `weights.len()`, if `rescales` is
/// shorter than `weights`, or if `values` does not hold the rows.
pub fn mad_f16_rows(
    acc: &mut [f16],
    heads: usize,
    values: &[f16],
    stride: usize,
    rescales: &[Option<f32>],
    weights: &[f32],
) {
    assert!(heads > 0 && acc.len().is_multiple_of(heads) && weights.len().is_multiple_of(heads));
    assert!(rescales.len() >= weights.len());
    let (n, rows) = (acc.len() / heads, weights.len() / heads);
    if rows == 0 {
        return;
    }
    assert!(stride >= n && values.len() >= (rows - 1) * stride + n);
    let k = kernels();
    match k.mad_f16_rows {
        Some(f) => f(
            acc,
            heads,
            values,
            stride,
            &rescales[..weights.len()],
            weights,
        ),
        None => {
            for (h, acc) in acc.chunks_exact_mut(n).enumerate() {
                for r in 0..rows {
                    if let Some(s) = rescales[r * heads + h] {
                        (k.scale_f16)(acc, s);
                    }
                    (k.mad_f16)(
                        acc,
                        &values[r * stride..r * stride + n],
                        weights[r * heads + h],
                    );
                }
            }
        }
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

/// The number of entries of [`gelu_table`]: one per f16 bit pattern, then one of padding.
pub(crate) const GELU_TABLE_LEN: usize = (1 << 16) + 1;

/// ggml's `ggml_table_gelu_f16`, built on first use and kept for the life of the process:
/// entry `h` is [`gelu_f32`] of the f16 whose bits are `h`, rounded to f16 (nearest even), as
/// bits. The 65536 entries are followed by one zero entry of padding, so that a 4-byte read at
/// any entry (the AVX2 kernels gather 32-bit words at `2 * h` and keep the low 16 bits) stays
/// inside the table.
pub(crate) fn gelu_table() -> &'static [u16; GELU_TABLE_LEN] {
    static TABLE: OnceLock<Box<[u16; GELU_TABLE_LEN]>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = vec![0u16; GELU_TABLE_LEN];
        for (bits, entry) in (0..=u16::MAX).zip(table.iter_mut()) {
            *entry = f16::from_f32(gelu_f32(f16::from_bits(bits).to_f32())).to_bits();
        }
        table
            .into_boxed_slice()
            .try_into()
            .expect("GELU_TABLE_LEN entries")
    })
}

/// ggml's `ggml_gelu_f32`, the tanh approximation
/// `0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x²)))` in f32, as GCC compiles it on FMA
/// machines: `1 + (0.044715 x)·x` contracted into one fused multiply-add, the other operations
/// rounded one by one, left to right, with libm's `tanhf`. (The contraction changes no entry of
/// the table once rounded to f16, for any input in (-10, 10), but is kept as ggml computes it.)
fn gelu_f32(x: f32) -> f32 {
    const GELU_COEF_A: f32 = 0.044715;
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    let inner = (GELU_COEF_A * x).mul_add(x, 1.0);
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * inner).tanh())
}

/// The table's GELU of `x`: `f32(table[f16(x)])`, `x` rounded to f16 to nearest even.
#[inline(always)]
fn gelu_lookup(table: &[u16; GELU_TABLE_LEN], x: f32) -> f32 {
    f16::from_bits(table[usize::from(f16::from_f32(x).to_bits())]).to_f32()
}

/// One value of [`gelu`] (`table` is [`gelu_table`]); the SIMD kernels' tails use it.
#[inline(always)]
pub(crate) fn gelu_one(table: &[u16; GELU_TABLE_LEN], x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        gelu_lookup(table, x)
    }
}

/// One value of [`geglu`] (`table` is [`gelu_table`]); the SIMD kernels' tails use it.
#[inline(always)]
pub(crate) fn geglu_one(table: &[u16; GELU_TABLE_LEN], x: f32, u: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x * u
    } else {
        gelu_lookup(table, x) * u
    }
}

/// `x[i] = gelu(x[i])`, as ggml's CPU backend computes `ggml_gelu` (`ggml_vec_gelu_f32` with
/// `GGML_GELU_FP16`): at or below -10, +0.0; at or above 10, `x` itself; otherwise (NaN
/// included, since its comparisons are false) the tanh-approximated GELU looked up in ggml's
/// table of every f16 input (`ggml_table_gelu_f16`), so the input is rounded to f16 (nearest
/// even) and the GELU is the f32 formula's result rounded to f16.
pub fn gelu(x: &mut [f32]) {
    (kernels().gelu)(x);
}

fn gelu_scalar(x: &mut [f32]) {
    let table = gelu_table();
    for v in x {
        *v = gelu_one(table, *v);
    }
}

/// `gate[i] = gelu(gate[i]) * up[i]`, GeGLU as ggml's CPU backend computes it
/// (`ggml_vec_geglu_f32` with `GGML_GELU_FP16`): [`gelu`]'s table lookup times `up[i]`; at or
/// below -10, +0.0 whatever `up[i]` is; at or above 10, `gate[i] * up[i]`.
pub fn geglu(gate: &mut [f32], up: &[f32]) {
    let n = gate.len().min(up.len());
    (kernels().geglu)(&mut gate[..n], &up[..n]);
}

fn geglu_scalar(gate: &mut [f32], up: &[f32]) {
    let table = gelu_table();
    for (g, &u) in gate.iter_mut().zip(up) {
        *g = geglu_one(table, *g, u);
    }
}

/// `c += a·b` for row-major `a` (`m × k`), `b` (`k × n`) and `c` (`m × n`), as ggml's
/// `simd_gemm` (the products of its tiled flash attention): every `c[i][j]` is one chain of
/// fused multiply-adds over `l = 0..k` in order, `c[i][j] = fma(a[i][l], b[l][j], c[i][j])`.
/// Blocking changes only which elements are computed together, never an element's order, so
/// any blocking gives these bits.
///
/// # Panics
/// If a slice is shorter than its shape.
pub fn gemm_f32(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    (kernels().gemm_f32)(c, a, b, m, k, n);
}

/// The lengths [`gemm_f32`]'s kernels need, checked.
pub(crate) fn check_gemm(c: &[f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    let (cn, an, bn) = (m.checked_mul(n), m.checked_mul(k), k.checked_mul(n));
    assert!(
        cn.is_some_and(|x| x <= c.len())
            && an.is_some_and(|x| x <= a.len())
            && bn.is_some_and(|x| x <= b.len()),
        "gemm_f32: slices of {}, {}, {} for {m}x{k} times {k}x{n}",
        c.len(),
        a.len(),
        b.len()
    );
}

fn gemm_f32_scalar(c: &mut [f32], a: &[f32], b: &[f32], m: usize, k: usize, n: usize) {
    check_gemm(c, a, b, m, k, n);
    for i in 0..m {
        for j in 0..n {
            let mut acc = c[i * n + j];
            for l in 0..k {
                acc = a[i * k + l].mul_add(b[l * n + j], acc);
            }
            c[i * n + j] = acc;
        }
    }
}

/// `x[i] = expf(x[i])`, each value as libm's `expf` gives it: glibc's on an x86-64 CPU with
/// FMA (`__expf_fma`, the `expf` llama.cpp's attention softmax calls there), which an
/// instruction set may compute several values at a time with the same operations.
///
/// ```
/// let mut x = [0.0f32, -1.0, f32::NEG_INFINITY];
/// gguf_quant::vec::exp_f32(&mut x);
/// assert_eq!(x, [1.0, (-1.0f32).exp(), 0.0]);
/// ```
pub fn exp_f32(x: &mut [f32]) {
    (kernels().exp_f32)(x)
}

fn exp_f32_scalar(x: &mut [f32]) {
    for v in x {
        *v = v.exp();
    }
}

/// `x[i] = expf(x[i] - max)`, returning `Σ x[i]`, as `ggml_vec_soft_max_f32` (AVX2): ggml's
/// vectorised `expf` ([`ggml_expf`]) on the first `n & !7` values and each group of eight
/// summed in f32 as the AVX2 horizontal add pairs them (lanes `i` and `i + 4`, then `i` and
/// `i + 2`, then the two halves), the group sums accumulated in f64; the tail with libm's
/// `expf`, each value added in f64. `-inf` inputs give +0.
pub fn soft_max_f32(x: &mut [f32], max: f32) -> f64 {
    (kernels().soft_max_f32)(x, max)
}

fn soft_max_f32_scalar(x: &mut [f32], max: f32) -> f64 {
    let nv = x.len() & !7;
    let (groups, tail) = x.split_at_mut(nv);
    let mut sum = 0f64;
    for g in groups.chunks_exact_mut(8) {
        for v in g.iter_mut() {
            *v = ggml_expf(*v - max);
        }
        let lanes = [g[0] + g[4], g[1] + g[5], g[2] + g[6], g[3] + g[7]];
        sum += f64::from((lanes[0] + lanes[2]) + (lanes[1] + lanes[3]));
    }
    for v in tail {
        *v = (*v - max).exp();
        sum += f64::from(*v);
    }
    sum
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

    /// The softmax's exponentials are ggml's `expf` of `x - max`, masked entries give +0, and
    /// the returned sum is theirs (up to the grouping).
    #[test]
    fn soft_max_exponentiates_and_sums() {
        let mut x: Vec<f32> = (0..21).map(|i| i as f32 * 0.25 - 3.0).collect();
        x[5] = f32::NEG_INFINITY;
        let max = 2.0;
        let expected: Vec<f32> = x.iter().map(|&v| ggml_expf(v - max)).collect();
        let sum = soft_max_f32(&mut x, max);
        assert_eq!(x[5].to_bits(), 0);
        for (i, (a, b)) in x.iter().zip(&expected).enumerate() {
            // The tail (from 16) uses libm's expf, within an ulp of ggml's.
            assert!((a - b).abs() <= 2e-7 * b, "{i}: {a} vs {b}");
        }
        let direct: f64 = x.iter().map(|&v| f64::from(v)).sum();
        assert!((sum - direct).abs() < 1e-6 * direct, "{sum} vs {direct}");
    }

    /// Each element of `gemm_f32` is the fused multiply-add chain over `k`, added to `c`.
    #[test]
    fn gemm_is_one_fma_chain_per_element() {
        let (m, k, n) = (7, 5, 19);
        let a: Vec<f32> = (0..m * k).map(|i| (i as f32 * 0.37).sin()).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32 * 0.11).cos()).collect();
        let mut c: Vec<f32> = (0..m * n).map(|i| i as f32 * 0.01).collect();
        let c0 = c.clone();
        gemm_f32(&mut c, &a, &b, m, k, n);
        for i in 0..m {
            for j in 0..n {
                let chain = (0..k).fold(c0[i * n + j], |acc, l| {
                    a[i * k + l].mul_add(b[l * n + j], acc)
                });
                assert_eq!(c[i * n + j].to_bits(), chain.to_bits(), "{i},{j}");
            }
        }
    }

    /// Entries of the GELU table against values made with numpy 2.4 (float32 arithmetic,
    /// ggml's formula): `x` the float16 of the entry's bits widened to float32,
    /// `inner = fma(float32(0.044715) * x, x, 1)` rounded once (computed exactly with Python's
    /// `fractions` and rounded to the nearest float32, ties to even),
    /// `y = 0.5 * x * (1 + tanh(float32(0.7978845608) * x * inner))` in float32 with `tanh` taken
    /// in float64 and rounded to float32, then `np.float16(y)` (nearest even). `tanh` in float64
    /// agrees with glibc's `tanhf` (which ggml and `f32::tanh` call) on every entry; numpy's own
    /// float32 `tanh` is an ulp off on 234 of them, among them 0xBF45 below (it gives 0xAC07).
    /// The cases include f16 rounding ties (0x0001 and 0x0003: exactly half an f16 step, to
    /// even), subnormal results, -0.0, the largest f16 inputs and infinity.
    #[test]
    fn gelu_table_entries_match_numpy() {
        let table = gelu_table();
        let known: [(u16, u16); 21] = [
            (0x0000, 0x0000), // 0
            (0x8000, 0x8000), // -0
            (0x0001, 0x0000), // 2^-24: gelu = 2^-25, a tie, to even (0)
            (0x0002, 0x0001), // 2^-23
            (0x0003, 0x0002), // 3 * 2^-24: gelu = 1.5 * 2^-24, a tie, to even
            (0x03FF, 0x0200), // largest f16 subnormal
            (0x2E66, 0x2AE8), // 0.0999755859375
            (0x3800, 0x3588), // 0.5
            (0xB800, 0xB0F0), // -0.5
            (0x3C00, 0x3ABB), // 1
            (0xBC00, 0xB115), // -1
            (0x4000, 0x3FD2), // 2
            (0xBF45, 0xAC06), // -1.8173828125 (numpy's float32 tanh: 0xAC07)
            (0xC200, 0x9B73), // -3
            (0xC500, 0x8005), // -5: a subnormal result
            (0x48FF, 0x48FF), // 9.9921875
            (0xC8FF, 0x8000), // -9.9921875
            (0x4900, 0x4900), // 10
            (0x7BFF, 0x7BFF), // 65504
            (0xFBFF, 0x8000), // -65504
            (0x7C00, 0x7C00), // +inf
        ];
        for (x, y) in known {
            let got = table[usize::from(x)];
            assert_eq!(got, y, "gelu table[{x:#06x}] = {got:#06x}, numpy {y:#06x}");
        }
        assert_eq!(table[1 << 16], 0, "padding entry");
    }

    /// The branches around the table: at or below -10 +0.0 (whatever the gate's `up`), at or
    /// above 10 the input (times `up`), however large: the f16 conversion never sees a value it
    /// would round to infinity (such values are beyond ±10).
    #[test]
    fn gelu_and_geglu_bypass_the_table_outside_ten() {
        let big = [10.0f32, 65504.0, 65520.0, 1e30, f32::MAX, f32::INFINITY];
        for x in big {
            let mut v = [x, -x];
            gelu(&mut v);
            assert_eq!(v[0].to_bits(), x.to_bits(), "gelu({x})");
            assert_eq!(v[1].to_bits(), 0f32.to_bits(), "gelu(-{x})");
            let mut g = [x, -x, -x, -x];
            geglu(&mut g, &[0.5, -1.0, f32::NAN, f32::INFINITY]);
            assert_eq!(g[0].to_bits(), (x * 0.5).to_bits(), "geglu({x}, 0.5)");
            for (k, v) in g[1..].iter().enumerate() {
                assert_eq!(v.to_bits(), 0f32.to_bits(), "geglu(-{x}) #{k}");
            }
        }
        // Just inside: the table (f16(9.999) is 10, whose entry is 10).
        let mut v = [9.999f32, -9.999, f32::NAN];
        gelu(&mut v);
        assert_eq!(v[0], 10.0);
        assert_eq!(v[1].to_bits(), (-0f32).to_bits());
        assert!(v[2].is_nan());
    }

    /// Inside (-10, 10) `gelu` is the formula at the input rounded to f16, within the f16
    /// rounding of the result (half an f16 ulp: 2^-11 relative, 2^-25 absolute below f16's
    /// normal range); `geglu` is `gelu` times `up`, and +0.0 at or below -10.
    #[test]
    fn gelu_is_the_formula_within_f16_rounding() {
        let x: Vec<f32> = (-1200..=1200).map(|i| i as f32 / 100.0).collect();
        let mut y = x.clone();
        gelu(&mut y);
        let up: Vec<f32> = x.iter().map(|v| 1.0 - v / 7.0).collect();
        let mut g = x.clone();
        geglu(&mut g, &up);
        for ((&x, &y), (&g, &u)) in x.iter().zip(&y).zip(g.iter().zip(&up)) {
            if x.abs() < 10.0 {
                let exact = gelu_f32(f16::from_f32(x).to_f32());
                let bound = (exact.abs() / 2048.0).max(1.0 / (1 << 25) as f32);
                assert!(
                    (y - exact).abs() <= bound,
                    "gelu({x}) = {y}, formula {exact}"
                );
            }
            assert_eq!(g.to_bits(), if x <= -10.0 { 0 } else { (y * u).to_bits() });
        }
    }
}
