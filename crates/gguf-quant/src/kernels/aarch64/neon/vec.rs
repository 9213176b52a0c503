//! NEON twins of the float kernels of [`crate::kernels::vec`]: the f16 dot product, multiply-add
//! and scale of attention over an f16 KV cache, SwiGLU with ggml's vectorised `expf`, GELU and
//! GeGLU through ggml's f16 GELU table, and the f32 product and softmax of tiled flash attention.
//! Each performs the scalar twin's float operations in the scalar twin's order (which is ggml's
//! AVX2 order: eight-lane accumulators become two vectors of four), so the results are the same
//! bits (tested by `kernels::simd_tests`).
//!
//! f16 values convert with `fcvtl`/`fcvtn`, base aarch64 instructions, through inline assembly:
//! the intrinsics take `float16x4_t`, which stable Rust lacks.

use std::arch::aarch64::*;
use std::arch::asm;

use half::f16;

use crate::kernels::vec::{geglu_one, gelu_one, gelu_table, GELU_TABLE_LEN};

vec_kernels!(
    dot_f16_neon,
    mad_f16_neon,
    scale_f16_neon,
    swiglu_neon,
    gelu_neon,
    geglu_neon,
    gemm_f32_neon,
    soft_max_f32_neon
);

/// Four f16 (their bits) as f32, exactly (`fcvtl`).
#[inline]
#[target_feature(enable = "neon")]
fn widen(h: uint16x4_t) -> float32x4_t {
    let r: float32x4_t;
    // SAFETY: `fcvtl` is a base aarch64 SIMD instruction that reads and writes registers only.
    unsafe {
        asm!("fcvtl {r:v}.4s, {h:v}.4h", r = out(vreg) r, h = in(vreg) h,
             options(pure, nomem, nostack));
    }
    r
}

/// Four f32 as f16 bits, rounded to nearest even (`fcvtn`, as `f16::from_f32`).
#[inline]
#[target_feature(enable = "neon")]
fn narrow(v: float32x4_t) -> uint16x4_t {
    let r: uint16x4_t;
    // SAFETY: `fcvtn` is a base aarch64 SIMD instruction that reads and writes registers only;
    // it rounds as the FPCR says, which is to nearest even unless a program changed it.
    unsafe {
        asm!("fcvtn {r:v}.4h, {v:v}.4s", r = out(vreg) r, v = in(vreg) v,
             options(pure, nomem, nostack));
    }
    r
}

/// The four f16 at `p` as f32.
///
/// # Safety
/// `p` must point to 4 readable values.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn load4(p: *const f16) -> float32x4_t {
    // SAFETY: 4 values are readable at `p` (caller); `vld1_u16` needs 2-byte alignment, which
    // `f16` has.
    widen(unsafe { vld1_u16(p.cast()) })
}

/// # Safety
/// `a` and `b` point to `n` values.
#[target_feature(enable = "neon")]
unsafe fn dot_f16_neon(n: usize, a: *const f16, b: *const f16) -> f32 {
    let np = n & !31;
    // Accumulator j of the scalar twin (eight lanes) is `acc[2j]` (lanes 0..4) and `acc[2j + 1]`
    // (lanes 4..8).
    let mut acc = [vdupq_n_f32(0.0); 8];
    let mut i = 0;
    while i < np {
        for (k, acc) in acc.iter_mut().enumerate() {
            // SAFETY: i + 4k + 4 <= np <= n (caller's bound).
            let (x, y) = unsafe { (load4(a.add(i + 4 * k)), load4(b.add(i + 4 * k))) };
            *acc = vfmaq_f32(*acc, x, y);
        }
        i += 32;
    }
    // x = (acc0 + acc2) + (acc1 + acc3), lanes 0..4 and 4..8; t = x[0..4] + x[4..8].
    let lo = vaddq_f32(vaddq_f32(acc[0], acc[4]), vaddq_f32(acc[2], acc[6]));
    let hi = vaddq_f32(vaddq_f32(acc[1], acc[5]), vaddq_f32(acc[3], acc[7]));
    let t = vaddq_f32(lo, hi);
    let (t0, t1) = (vgetq_lane_f32::<0>(t), vgetq_lane_f32::<1>(t));
    let (t2, t3) = (vgetq_lane_f32::<2>(t), vgetq_lane_f32::<3>(t));
    let mut sum = f64::from((t0 + t1) + (t2 + t3));
    for k in np..n {
        // SAFETY: k < n.
        let (x, y) = unsafe { ((*a.add(k)).to_f32(), (*b.add(k)).to_f32()) };
        sum += f64::from(x * y);
    }
    sum as f32
}

/// `acc[i] = f16(op(f32(acc[i]), i))` for the `n` values at `acc`, rounding to nearest even:
/// four at a time with `lanes` (`op` on values `i..i + 4`), the last `n % 4` with `one`.
///
/// # Safety
/// `acc` points to `n` values.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn map_f16(
    n: usize,
    acc: *mut f16,
    lanes: impl Fn(float32x4_t, usize) -> float32x4_t,
    one: impl Fn(f32, usize) -> f32,
) {
    let np = n & !3;
    let mut i = 0;
    while i < np {
        // SAFETY: i + 4 <= n.
        unsafe { vst1_u16(acc.add(i).cast(), narrow(lanes(load4(acc.add(i)), i))) };
        i += 4;
    }
    for k in np..n {
        // SAFETY: k < n.
        unsafe { *acc.add(k) = f16::from_f32(one((*acc.add(k)).to_f32(), k)) };
    }
}

/// # Safety
/// `acc` and `x` point to `n` values.
#[target_feature(enable = "neon")]
unsafe fn mad_f16_neon(n: usize, acc: *mut f16, x: *const f16, s: f32) {
    let vs = vdupq_n_f32(s);
    // SAFETY: `map_f16` passes indices of `n` values, four from `i` or one at `k` (caller).
    let lanes = |y, i| unsafe { vfmaq_f32(y, load4(x.add(i)), vs) };
    // SAFETY: as above.
    let one = |y, k| unsafe { (*x.add(k)).to_f32().mul_add(s, y) };
    // SAFETY: the caller's guarantee.
    unsafe { map_f16(n, acc, lanes, one) }
}

/// # Safety
/// `acc` points to `n` values.
#[target_feature(enable = "neon")]
unsafe fn scale_f16_neon(n: usize, acc: *mut f16, s: f32) {
    let vs = vdupq_n_f32(s);
    // SAFETY: the caller's guarantee.
    unsafe { map_f16(n, acc, |y, _| vmulq_f32(y, vs), |y, _| y * s) }
}

/// `ggml_v_expf` on four lanes: `vec::ggml_expf`'s operations, lane by lane.
#[inline]
#[target_feature(enable = "neon")]
fn expf4(x: float32x4_t) -> float32x4_t {
    let c = |bits: u32| vreinterpretq_f32_u32(vdupq_n_u32(bits));
    let r = c(0x4b40_0000);
    let z = vfmaq_f32(r, x, c(0x3fb8_aa3b));
    let n = vsubq_f32(z, r);
    let b = vfmsq_f32(vfmsq_f32(x, n, c(0x3f31_7200)), n, c(0x35bf_be8e));
    let e = vshlq_n_u32::<23>(vreinterpretq_u32_f32(z));
    let k = vreinterpretq_f32_u32(vaddq_u32(e, vreinterpretq_u32_f32(vdupq_n_f32(1.0))));
    let u = vmulq_f32(b, b);
    let j = vfmaq_f32(
        vmulq_f32(c(0x3f7f_fff6), b),
        vfmaq_f32(
            vfmaq_f32(c(0x3eff_fedb), c(0x3e2a_af33), b),
            vfmaq_f32(c(0x3d2b_9f17), c(0x3c07_2010), b),
            u,
        ),
        u,
    );
    let big = vcagtq_f32(n, vdupq_n_f32(126.0));
    if vmaxvq_u32(big) == 0 {
        return vfmaq_f32(k, j, k);
    }
    let g = vandq_u32(vclezq_f32(n), vdupq_n_u32(0x8200_0000));
    let s1 = vreinterpretq_f32_u32(vaddq_u32(g, vdupq_n_u32(0x7f00_0000)));
    let s2 = vreinterpretq_f32_u32(vsubq_u32(e, g));
    let huge = vcagtq_f32(n, vdupq_n_f32(192.0));
    vbslq_f32(
        huge,
        vmulq_f32(s1, s1),
        vbslq_f32(big, vmulq_f32(vfmaq_f32(s2, s2, j), s1), vfmaq_f32(k, k, j)),
    )
}

/// # Safety
/// `gate` and `up` point to `n` values.
#[target_feature(enable = "neon")]
unsafe fn swiglu_neon(n: usize, gate: *mut f32, up: *const f32) {
    // The scalar twin uses ggml's `expf` for the first `n & !7` values (ggml's AVX2 steps of
    // eight), libm's for the rest.
    let nv = n & !7;
    let one = vdupq_n_f32(1.0);
    let mut i = 0;
    while i < nv {
        // SAFETY: i + 4 <= n; loads and stores need only 4-byte alignment, which f32 has.
        unsafe {
            let x = vld1q_f32(gate.add(i));
            let silu = vdivq_f32(x, vaddq_f32(one, expf4(vsubq_f32(vdupq_n_f32(0.0), x))));
            vst1q_f32(gate.add(i), vmulq_f32(silu, vld1q_f32(up.add(i))));
        }
        i += 4;
    }
    for k in nv..n {
        // SAFETY: k < n.
        unsafe {
            let x = *gate.add(k);
            *gate.add(k) = (x / (1.0 + (-x).exp())) * *up.add(k);
        }
    }
}

/// The GELU of four lanes by `vec::gelu_one`'s rules, before the last step: returns `v`, which
/// holds `x` in the lanes at or above 10 and the table's GELU in all others, and the mask of the
/// lanes at or below -10 (all ones there), which the caller turns to +0.0 after any product.
///
/// The table's GELU of a lane is `f32(table[f16(x)])`: the four lanes round to f16 at once
/// (`fcvtn`, nearest even as `f16::from_f32`), the table is read lane by lane (NEON has no
/// gather), and the entries widen at once (`fcvtl`). Lanes outside (-10, 10) are looked up too
/// (every sixteen-bit index is in the table) and their results discarded; NaN lanes fail both
/// comparisons and keep the table's value, as in the scalar twin.
#[inline]
#[target_feature(enable = "neon")]
fn gelu_parts4(table: &[u16; GELU_TABLE_LEN], x: float32x4_t) -> (float32x4_t, uint32x4_t) {
    let mut index = [0u16; 4];
    // SAFETY: `index` has room for the four values stored; `vst1_u16` needs 2-byte alignment,
    // which u16 has.
    unsafe { vst1_u16(index.as_mut_ptr(), narrow(x)) };
    let entries = index.map(|h| table[usize::from(h)]);
    // SAFETY: `entries` holds four values; 2-byte alignment as above.
    let gelu = widen(unsafe { vld1_u16(entries.as_ptr()) });
    let high = vcgeq_f32(x, vdupq_n_f32(10.0));
    let low = vcleq_f32(x, vdupq_n_f32(-10.0));
    (vbslq_f32(high, x, gelu), low)
}

/// # Safety
/// `x` points to `n` values.
#[target_feature(enable = "neon")]
unsafe fn gelu_neon(n: usize, x: *mut f32) {
    let table = gelu_table();
    let nv = n & !3;
    let mut i = 0;
    while i < nv {
        // SAFETY: i + 4 <= n; loads and stores need only 4-byte alignment, which f32 has.
        unsafe {
            let (v, low) = gelu_parts4(table, vld1q_f32(x.add(i)));
            let y = vbicq_u32(vreinterpretq_u32_f32(v), low);
            vst1q_f32(x.add(i), vreinterpretq_f32_u32(y));
        }
        i += 4;
    }
    for k in nv..n {
        // SAFETY: k < n.
        unsafe { *x.add(k) = gelu_one(table, *x.add(k)) };
    }
}

/// # Safety
/// `gate` and `up` point to `n` values.
#[target_feature(enable = "neon")]
unsafe fn geglu_neon(n: usize, gate: *mut f32, up: *const f32) {
    let table = gelu_table();
    let nv = n & !3;
    let mut i = 0;
    while i < nv {
        // SAFETY: i + 4 <= n; loads and stores need only 4-byte alignment, which f32 has.
        unsafe {
            let (v, low) = gelu_parts4(table, vld1q_f32(gate.add(i)));
            // One product per lane, as the scalar twin; then +0.0 at or below -10.
            let y = vmulq_f32(v, vld1q_f32(up.add(i)));
            let y = vbicq_u32(vreinterpretq_u32_f32(y), low);
            vst1q_f32(gate.add(i), vreinterpretq_f32_u32(y));
        }
        i += 4;
    }
    for k in nv..n {
        // SAFETY: k < n.
        unsafe { *gate.add(k) = geglu_one(table, *gate.add(k), *up.add(k)) };
    }
}

/// `c += a·b` (row-major `m × k` times `k × n`), every element one chain of fused
/// multiply-adds over `k` in order, as `vec::gemm_f32`: blocks of four rows by sixteen columns
/// (sixteen accumulators), then four columns, then one at a time; leftover rows one by one.
///
/// # Safety
/// `c`, `a` and `b` point to `m * n`, `m * k` and `k * n` values.
#[target_feature(enable = "neon")]
unsafe fn gemm_f32_neon(m: usize, k: usize, n: usize, c: *mut f32, a: *const f32, b: *const f32) {
    let mut i = 0;
    while i + 4 <= m {
        // SAFETY: rows i..i + 4 of `c` and `a` are in bounds (caller).
        unsafe { gemm_rows::<4>(k, n, c.add(i * n), a.add(i * k), b) };
        i += 4;
    }
    while i < m {
        // SAFETY: row i of `c` and `a` is in bounds (caller).
        unsafe { gemm_rows::<1>(k, n, c.add(i * n), a.add(i * k), b) };
        i += 1;
    }
}

/// [`gemm_f32_neon`] for `R` rows.
///
/// # Safety
/// `c`, `a` and `b` point to `R * n`, `R * k` and `k * n` values.
#[inline]
#[target_feature(enable = "neon")]
unsafe fn gemm_rows<const R: usize>(k: usize, n: usize, c: *mut f32, a: *const f32, b: *const f32) {
    let mut j = 0;
    while j + 16 <= n {
        // SAFETY: columns j..j + 16 of the R rows of `c` and of the k rows of `b`, and the
        // R * k values of `a`, are in bounds (caller); loads and stores need only 4-byte
        // alignment, which f32 has.
        unsafe {
            let mut acc = [[vdupq_n_f32(0.0); 4]; R];
            for (r, acc) in acc.iter_mut().enumerate() {
                for (q, acc) in acc.iter_mut().enumerate() {
                    *acc = vld1q_f32(c.add(r * n + j + 4 * q));
                }
            }
            for l in 0..k {
                let bl = [0, 1, 2, 3].map(|q| vld1q_f32(b.add(l * n + j + 4 * q)));
                for (r, acc) in acc.iter_mut().enumerate() {
                    let x = vdupq_n_f32(*a.add(r * k + l));
                    for (acc, &bq) in acc.iter_mut().zip(&bl) {
                        *acc = vfmaq_f32(*acc, x, bq);
                    }
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                for (q, acc) in acc.iter().enumerate() {
                    vst1q_f32(c.add(r * n + j + 4 * q), *acc);
                }
            }
        }
        j += 16;
    }
    while j + 4 <= n {
        // SAFETY: as above, for columns j..j + 4.
        unsafe {
            let mut acc = [vdupq_n_f32(0.0); R];
            for (r, acc) in acc.iter_mut().enumerate() {
                *acc = vld1q_f32(c.add(r * n + j));
            }
            for l in 0..k {
                let bl = vld1q_f32(b.add(l * n + j));
                for (r, acc) in acc.iter_mut().enumerate() {
                    *acc = vfmaq_f32(*acc, vdupq_n_f32(*a.add(r * k + l)), bl);
                }
            }
            for (r, acc) in acc.iter().enumerate() {
                vst1q_f32(c.add(r * n + j), *acc);
            }
        }
        j += 4;
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

/// `x[i] = expf(x[i] - max)` and their sum, as `vec::soft_max_f32`: ggml's `expf` four lanes
/// at a time over the first `n & !7` values, each eight (two vectors) summed in the AVX2
/// order (lanes `i` and `i + 4`, then `i` and `i + 2`, then the two halves) and added in f64;
/// the tail with libm's.
///
/// # Safety
/// `x` points to `n` values.
#[target_feature(enable = "neon")]
unsafe fn soft_max_f32_neon(n: usize, x: *mut f32, max: f32) -> f64 {
    let nv = n & !7;
    let vmax = vdupq_n_f32(max);
    let mut sum = 0f64;
    let mut i = 0;
    while i < nv {
        // SAFETY: i + 8 <= n; loads and stores need only 4-byte alignment, which f32 has.
        unsafe {
            let lo = expf4(vsubq_f32(vld1q_f32(x.add(i)), vmax));
            let hi = expf4(vsubq_f32(vld1q_f32(x.add(i + 4)), vmax));
            vst1q_f32(x.add(i), lo);
            vst1q_f32(x.add(i + 4), hi);
            let s = vaddq_f32(lo, hi);
            let pair = (vgetq_lane_f32::<0>(s) + vgetq_lane_f32::<2>(s))
                + (vgetq_lane_f32::<1>(s) + vgetq_lane_f32::<3>(s));
            sum += f64::from(pair);
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
