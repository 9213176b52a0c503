//! The order of llama.cpp's tiled K-quant matrix product (ggml-cpu's `tiled/`), which its x86
//! builds use for the batched products of Q6_K, Q5_K, Q4_K, Q3_K, Q2_K and IQ4_XS weights (not
//! repacked ones) against at least [`MIN_BATCH`] activation rows; below that they run the
//! row-by-row `vec_dot`. Here: the floor, and the scalar twins of the AVX2 GEMM kernels (which
//! the scalar ISA runs for Q6_K and Q4_K, see `lanes`).
//!
//! For one output (weight row, activation row) the tiled kernel keeps one f32 accumulator,
//! starting at 0, and adds one term per super-block, in order:
//!
//! - `s1 = Σ_s scale_s · Σ_{e∈s} v_e·y_e`, exact in i32 (`v` the block's integer values,
//!   `y` the Q8_K values, `s` its sub-blocks of 16 or 32);
//! - for the types with mins (Q5_K, Q4_K, Q2_K) `s2 = Σ_s min_s · Σ_{e∈s} y_e` from Q8_K's
//!   `bsums`, exact in i32;
//! - `res = d·f32(s1)`, then for the types with mins `res = fma(-dmin, f32(s2), res)`, where
//!   `d` and `dmin` are the block's f16 super-scales widened;
//! - `acc = fma(res, d_y, acc)` with `d_y` the Q8_K block's scale.
//!
//! The stored result is `acc`. The kernel's tile sizes, its narrow path for batches of at most
//! 16 rows and its thread split change where this runs, never this order, so results do not
//! depend on them.

use super::GemmFn;
use crate::blocks::field;
use crate::blocks::{BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, QK_K};
use crate::dequant::k_scale_min;
use crate::fp::f16_at;
use crate::grids::KVALUES_IQ4NL;
use crate::GgmlType;

/// The smallest batch (activation rows) llama.cpp's tiled product takes
/// (`ggml_tiled_min_batch`); smaller batches run its row-by-row `vec_dot`.
pub(crate) const MIN_BATCH: usize = 8;

/// One weight super-block as the tiled kernel multiplies it: the 256 integer values in element
/// order, the scale and min of each group of 16 values (a sub-block of 32 gives both its
/// halves the same), and the widened super-scales.
pub(crate) struct Unpacked {
    pub(crate) v: [i32; QK_K],
    pub(crate) scale: [i32; 16],
    pub(crate) min: [i32; 16],
    pub(crate) d: f32,
    pub(crate) dmin: f32,
}

impl Unpacked {
    fn new(d: f32, dmin: f32) -> Self {
        Unpacked {
            v: [0; QK_K],
            scale: [0; 16],
            min: [0; 16],
            d,
            dmin,
        }
    }
}

fn unpack_q6_k(x: &[u8]) -> Unpacked {
    let mut u = Unpacked::new(f16_at(&x[field!(BlockQ6K.d)]), 0.0);
    let (ql, qh) = (&x[field!(BlockQ6K.ql)], &x[field!(BlockQ6K.qh)]);
    for h in 0..2 {
        let (q4, hb) = (&ql[64 * h..64 * h + 64], &qh[32 * h..32 * h + 32]);
        for l in 0..32 {
            let v = |q: u8, shift: u32| i32::from(q | ((hb[l] >> shift) & 3) << 4) - 32;
            u.v[128 * h + l] = v(q4[l] & 0x0F, 0);
            u.v[128 * h + l + 32] = v(q4[l + 32] & 0x0F, 2);
            u.v[128 * h + l + 64] = v(q4[l] >> 4, 4);
            u.v[128 * h + l + 96] = v(q4[l + 32] >> 4, 6);
        }
    }
    for (s, &b) in u.scale.iter_mut().zip(&x[field!(BlockQ6K.scales)]) {
        *s = i32::from(b as i8);
    }
    u
}

/// Q4_K and Q5_K: `d`, `dmin`, the 6-bit scales and mins of the eight sub-blocks of 32, and
/// the values from `value(e)`.
fn unpack_q45_k(x: &[u8], value: impl Fn(usize) -> i32) -> Unpacked {
    let mut u = Unpacked::new(
        f16_at(&x[field!(BlockQ4K.d)]),
        f16_at(&x[field!(BlockQ4K.dmin)]),
    );
    let (sc, mn) = k_scale_min(&x[field!(BlockQ4K.scales)]);
    for j in 0..16 {
        u.scale[j] = i32::from(sc[j / 2]);
        u.min[j] = i32::from(mn[j / 2]);
    }
    for (e, v) in u.v.iter_mut().enumerate() {
        *v = value(e);
    }
    u
}

fn unpack_q4_k(x: &[u8]) -> Unpacked {
    let qs = &x[field!(BlockQ4K.qs)];
    // Byte 32c + l holds element 64c + l (low nibble) and 64c + 32 + l (high nibble).
    unpack_q45_k(x, |e| {
        let q = qs[32 * (e / 64) + e % 32];
        i32::from(if e % 64 < 32 { q & 0x0F } else { q >> 4 })
    })
}

fn unpack_q5_k(x: &[u8]) -> Unpacked {
    const _: () = assert!(
        field!(BlockQ4K.d).start == field!(BlockQ5K.d).start
            && field!(BlockQ4K.dmin).start == field!(BlockQ5K.dmin).start
            && field!(BlockQ4K.scales).start == field!(BlockQ5K.scales).start
    );
    let (qs, qh) = (&x[field!(BlockQ5K.qs)], &x[field!(BlockQ5K.qh)]);
    // As Q4_K, plus bit e / 32 of qh[e % 32] as the fifth bit.
    unpack_q45_k(x, |e| {
        let q = qs[32 * (e / 64) + e % 32];
        let low = if e % 64 < 32 { q & 0x0F } else { q >> 4 };
        i32::from(low | ((qh[e % 32] >> (e / 32)) & 1) << 4)
    })
}

fn unpack_q3_k(x: &[u8]) -> Unpacked {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let mut u = Unpacked::new(f16_at(&x[field!(BlockQ3K.d)]), 0.0);
    let (hm, qs) = (&x[field!(BlockQ3K.hmask)], &x[field!(BlockQ3K.qs)]);
    // Element 128h + 32s + l: bits 2s of qs[32h + l], minus 4 unless bit 4h + s of hmask[l].
    for (e, v) in u.v.iter_mut().enumerate() {
        let (h, s, l) = (e / 128, e % 128 / 32, e % 32);
        let low = i32::from((qs[32 * h + l] >> (2 * s)) & 3);
        let high = hm[l] >> (4 * h + s) & 1;
        *v = low - if high != 0 { 0 } else { 4 };
    }
    let sc = &x[field!(BlockQ3K.scales)];
    let word = |i: usize| u32::from_le_bytes([sc[i], sc[i + 1], sc[i + 2], sc[i + 3]]);
    let (a0, a1, tmp) = (word(0), word(4), word(8));
    let auxs = [
        (a0 & KMASK2) | ((tmp & KMASK1) << 4),
        (a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4),
        ((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4),
        ((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4),
    ];
    for (j, s) in u.scale.iter_mut().enumerate() {
        *s = i32::from((auxs[j / 4] >> (8 * (j % 4))) as u8 as i8) - 32;
    }
    u
}

fn unpack_q2_k(x: &[u8]) -> Unpacked {
    let mut u = Unpacked::new(
        f16_at(&x[field!(BlockQ2K.d)]),
        f16_at(&x[field!(BlockQ2K.dmin)]),
    );
    let qs = &x[field!(BlockQ2K.qs)];
    // Element 128k + 32s + l: bits 2s of qs[32k + l].
    for (e, v) in u.v.iter_mut().enumerate() {
        *v = i32::from((qs[32 * (e / 128) + e % 32] >> (2 * (e % 128 / 32))) & 3);
    }
    for (j, &b) in x[field!(BlockQ2K.scales)].iter().enumerate() {
        u.scale[j] = i32::from(b & 0x0F);
        u.min[j] = i32::from(b >> 4);
    }
    u
}

fn unpack_iq4_xs(x: &[u8]) -> Unpacked {
    let mut u = Unpacked::new(f16_at(&x[field!(BlockIq4Xs.d)]), 0.0);
    let qs = &x[field!(BlockIq4Xs.qs)];
    // Element 32ib + j: the low (j < 16) or high nibble of qs[16ib + j % 16].
    for (e, v) in u.v.iter_mut().enumerate() {
        let q = qs[16 * (e / 32) + e % 16];
        let nibble = if e % 32 < 16 { q & 0x0F } else { q >> 4 };
        *v = i32::from(KVALUES_IQ4NL[usize::from(nibble)]);
    }
    let sl = &x[field!(BlockIq4Xs.scales_l)];
    let sh = u16::from_le_bytes([
        x[field!(BlockIq4Xs.scales_h)][0],
        x[field!(BlockIq4Xs.scales_h)][1],
    ]);
    for ib in 0..8 {
        let low = (sl[ib / 2] >> (4 * (ib % 2))) & 0x0F;
        let ls = i32::from(low) | i32::from((sh >> (2 * ib)) & 3) << 4;
        u.scale[2 * ib] = ls - 32;
        u.scale[2 * ib + 1] = ls - 32;
    }
    u
}

/// The unpacker of a K-quant super-block (and IQ4_XS's), which `lanes` also builds on.
pub(crate) fn unpacker(ty: GgmlType) -> Option<fn(&[u8]) -> Unpacked> {
    use GgmlType::*;
    Some(match ty {
        Q6_K => unpack_q6_k,
        Q5_K => unpack_q5_k,
        Q4_K => unpack_q4_k,
        Q3_K => unpack_q3_k,
        Q2_K => unpack_q2_k,
        IQ4_XS => unpack_iq4_xs,
        _ => return None,
    })
}

/// One output of the tiled product: weight row `w` (`blocks` super-blocks of `size` bytes)
/// against the Q8_K row `a`, in the order of the module comment.
fn tiled_dot(
    blocks: usize,
    w: &[u8],
    size: usize,
    a: &[u8],
    unpack: fn(&[u8]) -> Unpacked,
    has_min: bool,
) -> f32 {
    const Q8K: usize = size_of::<BlockQ8K>();
    let mut acc = 0f32;
    for b in 0..blocks {
        let u = unpack(&w[b * size..(b + 1) * size]);
        let y = &a[b * Q8K..(b + 1) * Q8K];
        let dy = f32::from_le_bytes(y[field!(BlockQ8K.d)].try_into().unwrap());
        let qs = &y[field!(BlockQ8K.qs)];
        let bsums = &y[field!(BlockQ8K.bsums)];
        let bsum = |j: usize| i32::from(i16::from_le_bytes([bsums[2 * j], bsums[2 * j + 1]]));
        let mut s1 = 0i32;
        let mut s2 = 0i32;
        for j in 0..16 {
            let dot: i32 = (16 * j..16 * j + 16)
                .map(|e| u.v[e] * i32::from(qs[e] as i8))
                .sum();
            s1 += u.scale[j] * dot;
            s2 += u.min[j] * bsum(j);
        }
        let mut res = u.d * s1 as f32;
        if has_min {
            res = (-u.dmin).mul_add(s2 as f32, res);
        }
        acc = res.mul_add(dy, acc);
    }
    acc
}

/// The tiled product for every batch size (the AVX2 kernels run it from [`MIN_BATCH`] rows
/// up): `out[b][r]` = weight row `r` against activation row `b`, as [`GemmFn`].
#[allow(clippy::too_many_arguments)]
fn tiled(
    n: usize,
    w: &[u8],
    row_bytes: usize,
    a: &[u8],
    act_row: usize,
    out: &mut [&mut [f32]],
    ty: GgmlType,
    unpack: fn(&[u8]) -> Unpacked,
    has_min: bool,
) {
    let blocks = n / QK_K;
    let size = ty.type_size() as usize;
    for (b, o) in out.iter_mut().enumerate() {
        let ab = &a[b * act_row..];
        for (r, y) in o.iter_mut().enumerate() {
            *y = tiled_dot(blocks, &w[r * row_bytes..], size, ab, unpack, has_min);
        }
    }
}

/// The scalar twin of the AVX2 GEMM kernel of `ty` in llama.cpp's tiled order (for any batch
/// size; the kernels themselves take it from [`MIN_BATCH`] rows up), if `ty` has one.
pub(crate) fn tiled_twin(ty: GgmlType) -> Option<GemmFn> {
    use GgmlType::*;
    Some(match ty {
        Q6_K => |n, w, rb, a, ar, out| tiled(n, w, rb, a, ar, out, Q6_K, unpack_q6_k, false),
        Q5_K => |n, w, rb, a, ar, out| tiled(n, w, rb, a, ar, out, Q5_K, unpack_q5_k, true),
        Q4_K => |n, w, rb, a, ar, out| tiled(n, w, rb, a, ar, out, Q4_K, unpack_q4_k, true),
        Q3_K => |n, w, rb, a, ar, out| tiled(n, w, rb, a, ar, out, Q3_K, unpack_q3_k, false),
        Q2_K => |n, w, rb, a, ar, out| tiled(n, w, rb, a, ar, out, Q2_K, unpack_q2_k, true),
        IQ4_XS => |n, w, rb, a, ar, out| tiled(n, w, rb, a, ar, out, IQ4_XS, unpack_iq4_xs, false),
        _ => return None,
    })
}
