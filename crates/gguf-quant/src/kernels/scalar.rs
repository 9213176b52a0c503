//! Scalar dot products, one per weight type: ggml's generic C kernels
//! (`ggml_vec_dot_<w>_<a>_generic` in `ggml-cpu/quants.c`; the scalar paths of
//! `ggml_vec_dot_f32`/`f16`/`bf16` in `ggml-cpu/vec.cpp`) operation for operation.
//!
//! Integer partial sums are exact, so they are formed in whatever order is convenient; every
//! floating-point operation is the one ggml performs, in ggml's order, so the results are
//! bit-identical (checked by `scalar_tests.rs`).
//!
//! Fused multiply-adds: ggml is built with `-march=native` and GCC's default
//! `-ffp-contract=fast`, and on an FMA machine GCC fuses some `a * b + c` of these kernels into
//! one FMA, which rounds once instead of twice. The reference build (GCC 12, x86_64 with FMA)
//! fuses exactly the expressions marked `FMA` below (read off its disassembly); they use
//! `f32::mul_add`, every other product and sum rounds separately. A ggml built without FMA
//! contraction (`-ffp-contract=off`, or a target without FMA) rounds those separately too and
//! can differ from these kernels in the last bit for Q4_1, Q5_1, Q2_K, Q4_K, Q5_K, IQ1_S, IQ1_M.

use super::DotFn;
use crate::blocks::*;
use crate::dequant::k_scale_min;
use crate::fp::{e8m0_to_fp32_half, f16_at, ue4m3_to_fp32_half, KVALUES_FP4};
use crate::grids::{
    IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID,
    KSIGNS_IQ2XS, KVALUES_IQ4NL,
};
use crate::GgmlType;

pub(super) fn kernel(ty: GgmlType) -> Option<DotFn> {
    use GgmlType::*;
    let f: DotFn = match ty {
        F32 => f32_f32,
        F16 => f16_f16,
        BF16 => bf16_bf16,
        Q1_0 => q1_0,
        Q2_0 => q2_0,
        Q4_0 => q4_0,
        Q4_1 => q4_1,
        Q5_0 => q5_0,
        Q5_1 => q5_1,
        Q8_0 => q8_0,
        MXFP4 => mxfp4,
        NVFP4 => nvfp4,
        IQ4_NL => iq4_nl,
        Q2_K => q2_k,
        Q3_K => q3_k,
        Q4_K => q4_k,
        Q5_K => q5_k,
        Q6_K => q6_k,
        IQ2_XXS => iq2_xxs,
        IQ2_XS => iq2_xs,
        IQ2_S => iq2_s,
        IQ3_XXS => iq3_xxs,
        IQ3_S => iq3_s,
        IQ1_S => iq1_s,
        IQ1_M => iq1_m,
        IQ4_XS => iq4_xs,
        TQ1_0 => tq1_0,
        TQ2_0 => tq2_0,
        _ => return None,
    };
    Some(f)
}

// ---------------------------------------------------------------------------------------------
// Helpers. Block sizes and field ranges come from `crate::blocks` (`size_of`, `field!`).

/// Each weight block `W` of an `n`-element row with the bytes of the activation blocks `A` it
/// is dotted with (one, or as many as cover its elements).
#[inline(always)]
fn blocks<'a, W: Block, A: Block>(
    n: usize,
    w: &'a [u8],
    a: &'a [u8],
) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
    w.chunks_exact(size_of::<W>())
        .zip(a.chunks_exact(W::ELEMENTS / A::ELEMENTS * size_of::<A>()))
        .take(n / W::ELEMENTS)
}

#[inline(always)]
fn f32_at(b: &[u8]) -> f32 {
    f32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

#[inline(always)]
fn u16_at(b: &[u8]) -> u16 {
    u16::from_le_bytes([b[0], b[1]])
}

#[inline(always)]
fn u32_at(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// A Q8_K block split into its scale, its 256 values and its 16 sums of 16.
struct Q8K<'a> {
    d: f32,
    qs: &'a [u8],
    bsums: &'a [u8],
}

impl<'a> Q8K<'a> {
    #[inline(always)]
    fn new(b: &'a [u8]) -> Self {
        Q8K {
            d: f32_at(&b[field!(BlockQ8K.d)]),
            qs: &b[field!(BlockQ8K.qs)],
            bsums: &b[field!(BlockQ8K.bsums)],
        }
    }

    /// Value `i` (0..256).
    #[inline(always)]
    fn q(&self, i: usize) -> i32 {
        i32::from(self.qs[i] as i8)
    }

    /// `bsums[j]` (0..16).
    #[inline(always)]
    fn bsum(&self, j: usize) -> i32 {
        i32::from(i16::from_le_bytes([
            self.bsums[2 * j],
            self.bsums[2 * j + 1],
        ]))
    }
}

/// `Σ q8[j] * v[j]` over a group of values whose magnitudes are the bytes of `grid` and whose
/// signs are the bits of `signs` (set = negative), as the i-quant kernels compute it.
#[inline(always)]
fn signed_grid_dot(grid: &[u8], signs: u8, q8: &[u8]) -> i32 {
    grid.iter()
        .zip(q8)
        .enumerate()
        .map(|(j, (&g, &q))| {
            let p = i32::from(g) * i32::from(q as i8);
            if signs >> j & 1 != 0 {
                -p
            } else {
                p
            }
        })
        .sum()
}

// ---------------------------------------------------------------------------------------------
// Plain float types: ggml's scalar path, f32 products summed in f64 (`ggml_float`).

fn f32_f32(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f64;
    for (x, y) in w.chunks_exact(4).zip(a.chunks_exact(4)).take(n) {
        sumf += f64::from(f32_at(x) * f32_at(y));
    }
    sumf as f32
}

fn f16_f16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f64;
    for (x, y) in w.chunks_exact(2).zip(a.chunks_exact(2)).take(n) {
        sumf += f64::from(f16_at(x) * f16_at(y));
    }
    sumf as f32
}

fn bf16_bf16(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let bf16 = |b: &[u8]| f32::from_bits(u32::from(u16_at(b)) << 16);
    let mut sumf = 0f64;
    for (x, y) in w.chunks_exact(2).zip(a.chunks_exact(2)).take(n) {
        sumf += f64::from(bf16(x) * bf16(y));
    }
    sumf as f32
}

// ---------------------------------------------------------------------------------------------
// Types paired with Q8_0 / Q8_1.

/// `ggml_vec_dot_q1_0_q8_0_generic`: 128 weights `±d` against four Q8_0 blocks.
fn q1_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ1_0, BlockQ8_0>(n, w, a) {
        let d0 = f16_at(&x[field!(BlockQ1_0.d)]);
        let mut sumi = 0f32;
        let qs = &x[field!(BlockQ1_0.qs)];
        for (bits, yb) in qs
            .chunks_exact(4)
            .zip(y.chunks_exact(size_of::<BlockQ8_0>()))
        {
            let d1 = f16_at(&yb[field!(BlockQ8_0.d)]);
            let mut sumi_block = 0i32;
            for (&mask, qy) in bits.iter().zip(yb[field!(BlockQ8_0.qs)].chunks_exact(8)) {
                for (k, &q) in qy.iter().enumerate() {
                    let q = i32::from(q as i8);
                    sumi_block += if mask >> k & 1 != 0 { q } else { -q };
                }
            }
            sumi += d1 * sumi_block as f32;
        }
        sumf += d0 * sumi;
    }
    sumf
}

/// `ggml_vec_dot_q2_0_q8_0_generic`: 64 weights `d * (q - 1)` against two Q8_0 blocks.
fn q2_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ2_0, BlockQ8_0>(n, w, a) {
        let d0 = f16_at(&x[field!(BlockQ2_0.d)]);
        let mut sumi = 0f32;
        let qs = &x[field!(BlockQ2_0.qs)];
        for (qs, yb) in qs
            .chunks_exact(8)
            .zip(y.chunks_exact(size_of::<BlockQ8_0>()))
        {
            let d1 = f16_at(&yb[field!(BlockQ8_0.d)]);
            let mut sumi_block = 0i32;
            for (&byte, qy) in qs.iter().zip(yb[field!(BlockQ8_0.qs)].chunks_exact(4)) {
                for (k, &q) in qy.iter().enumerate() {
                    sumi_block += (i32::from(byte >> (2 * k) & 3) - 1) * i32::from(q as i8);
                }
            }
            sumi += d1 * sumi_block as f32;
        }
        sumf += d0 * sumi;
    }
    sumf
}

/// `Σ lo(qs[j]) * q8[j] + hi(qs[j]) * q8[j + 16]` for a block of 32 packed nibbles mapped
/// through `f`.
#[inline(always)]
fn nibble_dot(qs: &[u8], q8: &[u8], f: impl Fn(u8) -> i32) -> i32 {
    qs.iter()
        .zip(&q8[..16])
        .zip(&q8[16..32])
        .map(|((&b, &y0), &y1)| f(b & 0x0f) * i32::from(y0 as i8) + f(b >> 4) * i32::from(y1 as i8))
        .sum()
}

/// `ggml_vec_dot_q4_0_q8_0_generic`.
fn q4_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ4_0, BlockQ8_0>(n, w, a) {
        let (qs, q8) = (&x[field!(BlockQ4_0.qs)], &y[field!(BlockQ8_0.qs)]);
        let sumi = nibble_dot(qs, q8, |q| i32::from(q) - 8);
        sumf += sumi as f32 * f16_at(&x[field!(BlockQ4_0.d)]) * f16_at(&y[field!(BlockQ8_0.d)]);
    }
    sumf
}

/// `ggml_vec_dot_q4_1_q8_1_generic`.
fn q4_1(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ4_1, BlockQ8_1>(n, w, a) {
        let sumi = nibble_dot(
            &x[field!(BlockQ4_1.qs)],
            &y[field!(BlockQ8_1.qs)],
            i32::from,
        );
        let d = f16_at(&x[field!(BlockQ4_1.d)]) * f16_at(&y[field!(BlockQ8_1.d)]);
        let m = f16_at(&x[field!(BlockQ4_1.m)]) * f16_at(&y[field!(BlockQ8_1.s)]);
        sumf += d.mul_add(sumi as f32, m); // FMA
    }
    sumf
}

/// Q5 values of a Q5_0/Q5_1 block: `Σ q[j] * q8[j]` with the fifth bits from `qh`, minus
/// `offset`.
#[inline(always)]
fn q5_dot(qh: u32, qs: &[u8], q8: &[u8], offset: i32) -> i32 {
    let mut sumi = 0i32;
    for (j, ((&b, &y0), &y1)) in qs.iter().zip(&q8[..16]).zip(&q8[16..32]).enumerate() {
        let x0 = i32::from(b & 0x0f) | (((qh >> j) & 1) << 4) as i32;
        let x1 = i32::from(b >> 4) | (((qh >> (j + 16)) & 1) << 4) as i32;
        sumi += (x0 - offset) * i32::from(y0 as i8) + (x1 - offset) * i32::from(y1 as i8);
    }
    sumi
}

/// `ggml_vec_dot_q5_0_q8_0_generic`.
fn q5_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ5_0, BlockQ8_0>(n, w, a) {
        let qh = u32_at(&x[field!(BlockQ5_0.qh)]);
        let sumi = q5_dot(qh, &x[field!(BlockQ5_0.qs)], &y[field!(BlockQ8_0.qs)], 16);
        let d = f16_at(&x[field!(BlockQ5_0.d)]) * f16_at(&y[field!(BlockQ8_0.d)]);
        sumf += d * sumi as f32;
    }
    sumf
}

/// `ggml_vec_dot_q5_1_q8_1_generic`.
fn q5_1(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ5_1, BlockQ8_1>(n, w, a) {
        let qh = u32_at(&x[field!(BlockQ5_1.qh)]);
        let sumi = q5_dot(qh, &x[field!(BlockQ5_1.qs)], &y[field!(BlockQ8_1.qs)], 0);
        let d = f16_at(&x[field!(BlockQ5_1.d)]) * f16_at(&y[field!(BlockQ8_1.d)]);
        let m = f16_at(&x[field!(BlockQ5_1.m)]) * f16_at(&y[field!(BlockQ8_1.s)]);
        sumf += d.mul_add(sumi as f32, m); // FMA
    }
    sumf
}

/// `ggml_vec_dot_q8_0_q8_0_generic`.
fn q8_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ8_0, BlockQ8_0>(n, w, a) {
        let sumi: i32 = x[field!(BlockQ8_0.qs)]
            .iter()
            .zip(&y[field!(BlockQ8_0.qs)])
            .map(|(&p, &q)| i32::from(p as i8) * i32::from(q as i8))
            .sum();
        let (dx, dy) = (&x[field!(BlockQ8_0.d)], &y[field!(BlockQ8_0.d)]);
        sumf += sumi as f32 * (f16_at(dx) * f16_at(dy));
    }
    sumf
}

/// `ggml_vec_dot_mxfp4_q8_0_generic`.
fn mxfp4(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockMxfp4, BlockQ8_0>(n, w, a) {
        let e = x[field!(BlockMxfp4.e)][0];
        let d = f16_at(&y[field!(BlockQ8_0.d)]) * e8m0_to_fp32_half(e);
        let (qs, q8) = (&x[field!(BlockMxfp4.qs)], &y[field!(BlockQ8_0.qs)]);
        let sumi = nibble_dot(qs, q8, |q| i32::from(KVALUES_FP4[usize::from(q)]));
        sumf += d * sumi as f32;
    }
    sumf
}

/// `ggml_vec_dot_nvfp4_q8_0_generic`: 64 values in four sub-blocks of 16 against two Q8_0
/// blocks.
fn nvfp4(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockNvfp4, BlockQ8_0>(n, w, a) {
        let scales = &x[field!(BlockNvfp4.d)];
        for (s, qs) in x[field!(BlockNvfp4.qs)].chunks_exact(8).enumerate() {
            let d = ue4m3_to_fp32_half(scales[s]);
            let yb = &y[s / 2 * size_of::<BlockQ8_0>()..][..size_of::<BlockQ8_0>()];
            let dy = f16_at(&yb[field!(BlockQ8_0.d)]);
            let q8 = &yb[field!(BlockQ8_0.qs)][(s % 2) * 16..][..16];
            let sumi: i32 = qs
                .iter()
                .zip(&q8[..8])
                .zip(&q8[8..16])
                .map(|((&b, &lo), &hi)| {
                    i32::from(lo as i8) * i32::from(KVALUES_FP4[usize::from(b & 0x0f)])
                        + i32::from(hi as i8) * i32::from(KVALUES_FP4[usize::from(b >> 4)])
                })
                .sum();
            sumf += dy * d * sumi as f32;
        }
    }
    sumf
}

/// `ggml_vec_dot_iq4_nl_q8_0_generic`.
fn iq4_nl(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq4Nl, BlockQ8_0>(n, w, a) {
        let d = f16_at(&y[field!(BlockQ8_0.d)]) * f16_at(&x[field!(BlockIq4Nl.d)]);
        let (qs, q8) = (&x[field!(BlockIq4Nl.qs)], &y[field!(BlockQ8_0.qs)]);
        let sumi = nibble_dot(qs, q8, |q| i32::from(KVALUES_IQ4NL[usize::from(q)]));
        sumf += d * sumi as f32;
    }
    sumf
}

// ---------------------------------------------------------------------------------------------
// K-quants (against Q8_K).

/// The 8 per-lane integer sums ggml's Q3_K..Q6_K kernels keep (`aux32[l]`, lane = element
/// index mod 8): `Σ scale(sub-block) * q8[i] * a[i]`, over sub-blocks of `sub` elements.
#[inline(always)]
fn lane_sums(a: &[i8; QK_K], q8: &[u8], sub: usize, scale: impl Fn(usize) -> i32) -> [i32; 8] {
    let mut aux32 = [0i32; 8];
    for (j, (av, qv)) in a.chunks_exact(sub).zip(q8.chunks_exact(sub)).enumerate() {
        let s = scale(j);
        for (x8, y8) in av.chunks_exact(8).zip(qv.chunks_exact(8)) {
            for (acc, (&x, &y)) in aux32.iter_mut().zip(x8.iter().zip(y8)) {
                *acc += s * (i32::from(x) * i32::from(y as i8));
            }
        }
    }
    aux32
}

/// `ggml_vec_dot_q2_K_q8_K_generic`.
fn q2_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ2K, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let sc = &x[field!(BlockQ2K.scales)];
        let summs: i32 = (0..16).map(|j| y.bsum(j) * i32::from(sc[j] >> 4)).sum();
        let dall = y.d * f16_at(&x[field!(BlockQ2K.d)]);
        let dmin = y.d * f16_at(&x[field!(BlockQ2K.dmin)]);
        let mut isum = 0i32;
        // Sub-block `is` (16 values) of half `k`: bits `2 * shift` of q2[k * 32 + l].
        for (k, q2) in x[field!(BlockQ2K.qs)].chunks_exact(32).enumerate() {
            for shift in 0..4 {
                for half in 0..2 {
                    let is = k * 8 + shift * 2 + half;
                    let base = k * 128 + shift * 32 + half * 16;
                    let isuml: i32 = (0..16)
                        .map(|l| y.q(base + l) * i32::from(q2[half * 16 + l] >> (2 * shift) & 3))
                        .sum();
                    isum += i32::from(sc[is] & 0x0f) * isuml;
                }
            }
        }
        sumf += dall.mul_add(isum as f32, -(dmin * summs as f32)); // FMA
    }
    sumf
}

/// `ggml_vec_dot_q3_K_q8_K_generic`.
fn q3_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let mut sums = [0f32; 8];
    for (x, y) in blocks::<BlockQ3K, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let hm = &x[field!(BlockQ3K.hmask)];
        let (qs, sc) = (&x[field!(BlockQ3K.qs)], &x[field!(BlockQ3K.scales)]);
        let mut aux8 = [0i8; QK_K];
        for (j, out) in aux8.chunks_exact_mut(128).enumerate() {
            let q3 = &qs[j * 32..j * 32 + 32];
            for (s, o) in out.chunks_exact_mut(32).enumerate() {
                let m = 1u8 << (j * 4 + s);
                for ((o, &q), &h) in o.iter_mut().zip(q3).zip(hm) {
                    *o = (q >> (2 * s) & 3) as i8 - if h & m != 0 { 0 } else { 4 };
                }
            }
        }
        let (a0, a1, tmp) = (u32_at(sc), u32_at(&sc[4..]), u32_at(&sc[8..]));
        let auxs = [
            (a0 & KMASK2) | ((tmp & KMASK1) << 4),
            (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
            ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
            ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
        ];
        let scale = |j: usize| i32::from((auxs[j / 4] >> (8 * (j % 4))) as u8 as i8) - 32;
        let aux32 = lane_sums(&aux8, y.qs, 16, scale);
        let d = f16_at(&x[field!(BlockQ3K.d)]) * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux32) {
            *s += d * v as f32;
        }
    }
    let mut sumf = 0f32;
    for s in sums {
        sumf += s;
    }
    sumf
}

/// The tail shared by Q4_K and Q5_K (whose `d`, `dmin` and `scales` lie where Q4_K's do):
/// `aux8` holds the 256 unsigned values.
#[inline(always)]
fn q45_k_block(x: &[u8], y: &Q8K, aux8: &[i8; QK_K], sums: &mut [f32; 8], sumf: &mut f32) {
    const _: () = assert!(
        field!(BlockQ4K.d).start == field!(BlockQ5K.d).start
            && field!(BlockQ4K.dmin).start == field!(BlockQ5K.dmin).start
            && field!(BlockQ4K.scales).start == field!(BlockQ5K.scales).start
    );
    let (scales, mins) = k_scale_min(&x[field!(BlockQ4K.scales)]);
    let sumi: i32 = (0..16).map(|j| y.bsum(j) * i32::from(mins[j / 2])).sum();
    let aux32 = lane_sums(aux8, y.qs, 32, |j| i32::from(scales[j]));
    let d = f16_at(&x[field!(BlockQ4K.d)]) * y.d;
    for (s, &v) in sums.iter_mut().zip(&aux32) {
        *s = d.mul_add(v as f32, *s); // FMA
    }
    let dmin = f16_at(&x[field!(BlockQ4K.dmin)]) * y.d;
    *sumf = (-dmin).mul_add(sumi as f32, *sumf); // FMA: sumf -= dmin * sumi
}

/// `ggml_vec_dot_q4_K_q8_K_generic`.
fn q4_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sums = [0f32; 8];
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ4K, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let mut aux8 = [0i8; QK_K];
        let qs = &x[field!(BlockQ4K.qs)];
        for (out, q4) in aux8.chunks_exact_mut(64).zip(qs.chunks_exact(32)) {
            let (lo, hi) = out.split_at_mut(32);
            for ((l, h), &q) in lo.iter_mut().zip(hi).zip(q4) {
                *l = (q & 0x0f) as i8;
                *h = (q >> 4) as i8;
            }
        }
        q45_k_block(x, &y, &aux8, &mut sums, &mut sumf);
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// `ggml_vec_dot_q5_K_q8_K_generic`.
fn q5_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sums = [0f32; 8];
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockQ5K, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let hm = &x[field!(BlockQ5K.qh)];
        let mut aux8 = [0i8; QK_K];
        for (j, (out, q4)) in aux8
            .chunks_exact_mut(64)
            .zip(x[field!(BlockQ5K.qs)].chunks_exact(32))
            .enumerate()
        {
            let (m0, m1) = (1u8 << (2 * j), 1u8 << (2 * j + 1));
            let (lo, hi) = out.split_at_mut(32);
            for (((l, h), &q), &b) in lo.iter_mut().zip(hi).zip(q4).zip(hm) {
                *l = (q & 0x0f) as i8 + if b & m0 != 0 { 16 } else { 0 };
                *h = (q >> 4) as i8 + if b & m1 != 0 { 16 } else { 0 };
            }
        }
        q45_k_block(x, &y, &aux8, &mut sums, &mut sumf);
    }
    for s in sums {
        sumf += s;
    }
    sumf
}

/// `ggml_vec_dot_q6_K_q8_K_generic`.
fn q6_k(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sums = [0f32; 8];
    for (x, y) in blocks::<BlockQ6K, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let (ql, qh) = (&x[field!(BlockQ6K.ql)], &x[field!(BlockQ6K.qh)]);
        let sc = &x[field!(BlockQ6K.scales)];
        let mut aux8 = [0i8; QK_K];
        for (j, out) in aux8.chunks_exact_mut(128).enumerate() {
            let (q4, h) = (&ql[j * 64..j * 64 + 64], &qh[j * 32..j * 32 + 32]);
            for l in 0..32 {
                let v = |q: u8, shift: u32| ((q | ((h[l] >> shift) & 3) << 4) as i8) - 32;
                out[l] = v(q4[l] & 0x0f, 0);
                out[l + 32] = v(q4[l + 32] & 0x0f, 2);
                out[l + 64] = v(q4[l] >> 4, 4);
                out[l + 96] = v(q4[l + 32] >> 4, 6);
            }
        }
        let aux32 = lane_sums(&aux8, y.qs, 16, |j| i32::from(sc[j] as i8));
        let d = f16_at(&x[field!(BlockQ6K.d)]) * y.d;
        for (s, &v) in sums.iter_mut().zip(&aux32) {
            *s += d * v as f32;
        }
    }
    let mut sumf = 0f32;
    for s in sums {
        sumf += s;
    }
    sumf
}

// ---------------------------------------------------------------------------------------------
// I-quants (against Q8_K).

/// `ggml_vec_dot_iq2_xxs_q8_K_generic`.
fn iq2_xxs(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq2Xxs, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let d = f16_at(&x[field!(BlockIq2Xxs.d)]) * y.d;
        let mut bsum = 0i32;
        let qs = &x[field!(BlockIq2Xxs.qs)];
        for (q2, q8) in qs.chunks_exact(8).zip(y.qs.chunks_exact(32)) {
            let aux1 = u32_at(&q2[4..]);
            let ls = (2 * (aux1 >> 28) + 1) as i32;
            let mut sumi = 0i32;
            for (l, q8) in q8.chunks_exact(8).enumerate() {
                let grid = IQ2XXS_GRID[usize::from(q2[l])].to_le_bytes();
                let signs = KSIGNS_IQ2XS[((aux1 >> (7 * l)) & 127) as usize];
                sumi += signed_grid_dot(&grid, signs, q8);
            }
            bsum += sumi * ls;
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}

/// `ggml_vec_dot_iq2_xs_q8_K_generic`.
fn iq2_xs(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq2Xs, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let d = f16_at(&x[field!(BlockIq2Xs.d)]) * y.d;
        let sc = &x[field!(BlockIq2Xs.scales)];
        let mut bsum = 0i32;
        for (ib32, (q2, q8)) in x[field!(BlockIq2Xs.qs)]
            .chunks_exact(8)
            .zip(y.qs.chunks_exact(32))
            .enumerate()
        {
            let ls = [
                i32::from(sc[ib32] & 0xf) * 2 + 1,
                i32::from(sc[ib32] >> 4) * 2 + 1,
            ];
            for (half, (q2, q8)) in q2.chunks_exact(4).zip(q8.chunks_exact(16)).enumerate() {
                let mut sumi = 0i32;
                for (g, q8) in q2.chunks_exact(2).zip(q8.chunks_exact(8)) {
                    let v = u16_at(g);
                    let grid = IQ2XS_GRID[usize::from(v & 511)].to_le_bytes();
                    sumi += signed_grid_dot(&grid, KSIGNS_IQ2XS[usize::from(v >> 9)], q8);
                }
                bsum += sumi * ls[half];
            }
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}

/// `ggml_vec_dot_iq2_s_q8_K_generic`.
fn iq2_s(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq2S, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let d = f16_at(&x[field!(BlockIq2S.d)]) * y.d;
        let (qs, signs) = x[field!(BlockIq2S.qs)].split_at(QK_K / 8);
        let (qh, sc) = (&x[field!(BlockIq2S.qh)], &x[field!(BlockIq2S.scales)]);
        let mut bsum = 0i32;
        for (ib32, q8) in y.qs.chunks_exact(32).enumerate() {
            let ls1 = 1 + 2 * i32::from(sc[ib32] & 0xf);
            let ls2 = 1 + 2 * i32::from(sc[ib32] >> 4);
            let mut sumi = [0i32; 2];
            for (l, q8) in q8.chunks_exact(8).enumerate() {
                let idx =
                    usize::from(qs[4 * ib32 + l]) | (usize::from(qh[ib32]) << (8 - 2 * l) & 0x300);
                let grid = IQ2S_GRID[idx].to_le_bytes();
                sumi[l / 2] += signed_grid_dot(&grid, signs[4 * ib32 + l], q8);
            }
            bsum += ls1 * sumi[0] + ls2 * sumi[1];
        }
        sumf += d * bsum as f32;
    }
    0.125 * sumf
}

/// `ggml_vec_dot_iq3_xxs_q8_K_generic`.
fn iq3_xxs(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq3Xxs, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let d = f16_at(&x[field!(BlockIq3Xxs.d)]) * y.d;
        let (q3, gas) = x[field!(BlockIq3Xxs.qs)].split_at(QK_K / 4);
        let mut bsum = 0i32;
        for ((q3, g), q8) in q3
            .chunks_exact(8)
            .zip(gas.chunks_exact(4))
            .zip(y.qs.chunks_exact(32))
        {
            let aux32 = u32_at(g);
            let ls = (2 * (aux32 >> 28) + 1) as i32;
            let mut sumi = 0i32;
            for (l, q8) in q8.chunks_exact(8).enumerate() {
                let g1 = IQ3XXS_GRID[usize::from(q3[2 * l])].to_le_bytes();
                let g2 = IQ3XXS_GRID[usize::from(q3[2 * l + 1])].to_le_bytes();
                let signs = KSIGNS_IQ2XS[((aux32 >> (7 * l)) & 127) as usize];
                sumi += signed_grid_dot(&g1, signs, &q8[..4])
                    + signed_grid_dot(&g2, signs >> 4, &q8[4..]);
            }
            bsum += sumi * ls;
        }
        sumf += d * bsum as f32;
    }
    0.25 * sumf
}

/// `ggml_vec_dot_iq3_s_q8_K_generic`.
fn iq3_s(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq3S, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let d = f16_at(&x[field!(BlockIq3S.d)]) * y.d;
        let (qs, qh) = (&x[field!(BlockIq3S.qs)], &x[field!(BlockIq3S.qh)]);
        let (signs, sc) = (&x[field!(BlockIq3S.signs)], &x[field!(BlockIq3S.scales)]);
        let mut bsum = 0i32;
        for (ib32, q8) in y.qs.chunks_exact(32).enumerate() {
            let ls = if ib32 % 2 == 0 {
                sc[ib32 / 2] & 0xf
            } else {
                sc[ib32 / 2] >> 4
            };
            let ls = 2 * i32::from(ls) + 1;
            let h = usize::from(qh[ib32]);
            let mut sumi = 0i32;
            for (l, q8) in q8.chunks_exact(8).enumerate() {
                let i1 = usize::from(qs[8 * ib32 + 2 * l]) | ((h << (8 - 2 * l)) & 256);
                let i2 = usize::from(qs[8 * ib32 + 2 * l + 1]) | ((h << (7 - 2 * l)) & 256);
                let s = signs[4 * ib32 + l];
                sumi += signed_grid_dot(&IQ3S_GRID[i1].to_le_bytes(), s, &q8[..4])
                    + signed_grid_dot(&IQ3S_GRID[i2].to_le_bytes(), s >> 4, &q8[4..]);
            }
            bsum += sumi * ls;
        }
        sumf += d * bsum as f32;
    }
    sumf
}

/// `Σ q8[j] * grid[j]` for an IQ1 grid entry (bytes are i8 in {-1, 0, 1}).
#[inline(always)]
fn iq1_grid_dot(idx: usize, q8: &[u8]) -> i32 {
    IQ1S_GRID[idx]
        .to_le_bytes()
        .iter()
        .zip(q8)
        .map(|(&g, &q)| i32::from(q as i8) * i32::from(g as i8))
        .sum()
}

/// `ggml_vec_dot_iq1_s_q8_K_generic`.
fn iq1_s(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq1S, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let (qs, qh) = (&x[field!(BlockIq1S.qs)], &x[field!(BlockIq1S.qh)]);
        let (mut sumi, mut sumi1) = (0i32, 0i32);
        for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
            let h = usize::from(u16_at(&qh[2 * ib..]));
            let ls = 2 * ((h >> 12) & 7) as i32 + 1;
            let delta = if h & 0x8000 != 0 { -1 } else { 1 };
            let mut lsum = 0i32;
            for (l, q8) in q8.chunks_exact(8).enumerate() {
                lsum += iq1_grid_dot(
                    usize::from(qs[4 * ib + l]) | (((h >> (3 * l)) & 7) << 8),
                    q8,
                );
            }
            sumi += ls * lsum;
            sumi1 += ls * delta * (y.bsum(2 * ib) + y.bsum(2 * ib + 1));
        }
        // ggml fuses `sumi + IQ1S_DELTA * sumi1` too; the product is exact, so the unfused sum
        // rounds identically.
        let v = sumi as f32 + IQ1S_DELTA * sumi1 as f32;
        sumf = (f16_at(&x[field!(BlockIq1S.d)]) * y.d).mul_add(v, sumf); // FMA
    }
    sumf
}

/// `ggml_vec_dot_iq1_m_q8_K_generic`.
fn iq1_m(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq1M, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let (qs, qh) = (&x[field!(BlockIq1M.qs)], &x[field!(BlockIq1M.qh)]);
        let scales = &x[field!(BlockIq1M.scales)];
        let sc: [u16; 4] = std::array::from_fn(|k| u16_at(&scales[2 * k..]));
        let scale =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        let (mut sumi1, mut sumi2) = (0i32, 0i32);
        for (ib, q8) in y.qs.chunks_exact(32).enumerate() {
            let (h0, h1) = (qh[2 * ib], qh[2 * ib + 1]);
            let sign = |b: u8, m: u8| if b & m != 0 { -1 } else { 1 };
            let delta = [
                sign(h0, 0x08),
                sign(h0, 0x80),
                sign(h1, 0x08),
                sign(h1, 0x80),
            ];
            let (mut sum1, mut sum2) = ([0i32; 2], [0i32; 2]);
            for (l, q8) in q8.chunks_exact(8).enumerate() {
                let h = usize::from(qh[2 * ib + l / 2]);
                let idx = usize::from(qs[4 * ib + l]) | ((h << (8 - 4 * (l % 2))) & 0x700);
                let lsum2: i32 = q8.iter().map(|&q| i32::from(q as i8)).sum();
                sum1[l / 2] += iq1_grid_dot(idx, q8);
                sum2[l / 2] += lsum2 * delta[l];
            }
            let s = sc[ib / 2] >> (6 * (ib % 2));
            let ls1 = 2 * i32::from(s & 7) + 1;
            let ls2 = 2 * i32::from((s >> 3) & 7) + 1;
            sumi1 += sum1[0] * ls1 + sum1[1] * ls2;
            sumi2 += sum2[0] * ls1 + sum2[1] * ls2;
        }
        // As in IQ1_S, the fused inner `sumi1 + IQ1M_DELTA * sumi2` rounds like the unfused one.
        let v = sumi1 as f32 + IQ1M_DELTA * sumi2 as f32;
        let d = crate::fp::f16_to_f32(scale);
        sumf = (d * y.d).mul_add(v, sumf); // FMA
    }
    sumf
}

/// `ggml_vec_dot_iq4_xs_q8_K_generic`.
fn iq4_xs(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockIq4Xs, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let d4d8 = f16_at(&x[field!(BlockIq4Xs.d)]) * y.d;
        let h = u16_at(&x[field!(BlockIq4Xs.scales_h)]);
        let scales_l = &x[field!(BlockIq4Xs.scales_l)];
        for (ib, (qs, q8)) in x[field!(BlockIq4Xs.qs)]
            .chunks_exact(16)
            .zip(y.qs.chunks_exact(32))
            .enumerate()
        {
            let low = if ib % 2 == 0 {
                scales_l[ib / 2] & 0xf
            } else {
                scales_l[ib / 2] >> 4
            };
            let ls = i32::from(low) | i32::from((h >> (2 * ib)) & 3) << 4;
            let dl = d4d8 * (ls - 32) as f32;
            let sumi = nibble_dot(qs, q8, |q| i32::from(KVALUES_IQ4NL[usize::from(q)]));
            sumf += dl * sumi as f32;
        }
    }
    sumf
}

// ---------------------------------------------------------------------------------------------
// Ternary types (against Q8_K).

/// `ggml_vec_dot_tq1_0_q8_K_generic`.
fn tq1_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    const POW3: [u8; 6] = [1, 3, 9, 27, 81, 243];
    let trit = |b: u8, l: usize| ((i32::from(b.wrapping_mul(POW3[l])) * 3) >> 8) - 1;
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockTq1_0, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let (qs, qh) = (&x[field!(BlockTq1_0.qs)], &x[field!(BlockTq1_0.qh)]);
        let mut sum = 0i32;
        // Bytes 0..32: five trits each, trit l of byte m is value l * 32 + m.
        for l in 0..5 {
            for (m, &b) in qs[..32].iter().enumerate() {
                sum += trit(b, l) * y.q(l * 32 + m);
            }
        }
        // Bytes 32..48: trit l of byte 32 + m is value 160 + l * 16 + m.
        for l in 0..5 {
            for (m, &b) in qs[32..].iter().enumerate() {
                sum += trit(b, l) * y.q(160 + l * 16 + m);
            }
        }
        // qh: four trits each, trit l of byte j is value 240 + l * 4 + j.
        for l in 0..4 {
            for (j, &b) in qh.iter().enumerate() {
                sum += trit(b, l) * y.q(240 + l * 4 + j);
            }
        }
        sumf += sum as f32 * (f16_at(&x[field!(BlockTq1_0.d)]) * y.d);
    }
    sumf
}

/// `ggml_vec_dot_tq2_0_q8_K_generic`.
fn tq2_0(n: usize, w: &[u8], a: &[u8]) -> f32 {
    let mut sumf = 0f32;
    for (x, y) in blocks::<BlockTq2_0, BlockQ8K>(n, w, a) {
        let y = Q8K::new(y);
        let mut sumi = 0i32;
        for (j, qs) in x[field!(BlockTq2_0.qs)].chunks_exact(32).enumerate() {
            for l in 0..4 {
                for (k, &b) in qs.iter().enumerate() {
                    sumi += y.q(j * 128 + l * 32 + k) * (i32::from(b >> (2 * l) & 3) - 1);
                }
            }
        }
        let d = y.d * f16_at(&x[field!(BlockTq2_0.d)]);
        sumf += sumi as f32 * d;
    }
    sumf
}
