//! The i-quants: IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS, IQ3_S, IQ1_S, IQ1_M, IQ4_NL and IQ4_XS.
//!
//! Each kernel follows ggml's `dequantize_row_iq*` (`ggml-quants.c`) for the bit layout and the
//! Python `gguf` package (`gguf/quants.py`) for the arithmetic, which is bit-exact with it: every
//! value is computed in `f32` with the same operations in the same order. For these nine types
//! the two references agree on the order:
//!
//! - IQ2_*, IQ3_XXS: `db = d * (0.5 + scale) * q` (q = 0.25, or 0.5 for IQ3_XXS), then
//!   `(db * grid) * sign` with `sign` = ±1.0;
//! - IQ3_S: `db = d * (1 + 2 * scale)` (an exact integer), then `(db * grid) * sign`;
//! - IQ1_S, IQ1_M: `dl = d * (2 * scale + 1)`, then `dl * (grid + delta)`;
//! - IQ4_NL, IQ4_XS: `d * kvalue`, resp. `dl = d * (scale - 32)` then `dl * kvalue`.
//!
//! The grid entries pack 4 or 8 values, element `j` in byte `j` (see [`crate::grids`]).

use super::DequantFn;
use crate::fp::f16_at;
use crate::grids::{
    IQ1M_DELTA, IQ1S_DELTA, IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID,
    KMASK_IQ2XS, KSIGNS_IQ2XS, KVALUES_IQ4NL,
};
use crate::GgmlType;

pub(super) fn kernel(ty: GgmlType) -> Option<DequantFn> {
    Some(match ty {
        GgmlType::IQ2_XXS => iq2_xxs,
        GgmlType::IQ2_XS => iq2_xs,
        GgmlType::IQ2_S => iq2_s,
        GgmlType::IQ3_XXS => iq3_xxs,
        GgmlType::IQ3_S => iq3_s,
        GgmlType::IQ1_S => iq1_s,
        GgmlType::IQ1_M => iq1_m,
        GgmlType::IQ4_NL => iq4_nl,
        GgmlType::IQ4_XS => iq4_xs,
        _ => return None,
    })
}

/// Elements per super-block.
const QK_K: usize = 256;
/// Elements per IQ4_NL block.
const QK4_NL: usize = 32;

const fn type_size(ty: GgmlType) -> usize {
    ty.type_size() as usize
}

#[inline(always)]
fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

#[inline(always)]
fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The factor ggml and gguf-py multiply by: -1 where bit `j` of `signs` is set, else 1.
#[inline(always)]
fn sign(signs: u8, j: usize) -> f32 {
    if signs & KMASK_IQ2XS[j] != 0 {
        -1.0
    } else {
        1.0
    }
}

/// 8 values `(db * grid[j]) * sign(j)` of a 2-bit grid entry (IQ2_XXS, IQ2_XS, IQ2_S).
#[inline(always)]
fn grid8(y: &mut [f32], db: f32, grid: u64, signs: u8) {
    for (j, (y, g)) in y.iter_mut().zip(grid.to_le_bytes()).enumerate() {
        *y = db * f32::from(g) * sign(signs, j);
    }
}

/// 8 values from two 4-value grid entries of the 3-bit grids (IQ3_XXS, IQ3_S).
#[inline(always)]
fn grid4x2(y: &mut [f32], db: f32, grid1: u32, grid2: u32, signs: u8) {
    let (y1, y2) = y.split_at_mut(4);
    for (j, (y, g)) in y1.iter_mut().zip(grid1.to_le_bytes()).enumerate() {
        *y = db * f32::from(g) * sign(signs, j);
    }
    for (j, (y, g)) in y2.iter_mut().zip(grid2.to_le_bytes()).enumerate() {
        *y = db * f32::from(g) * sign(signs, j + 4);
    }
}

/// 8 values `dl * (grid[j] + delta)` of a ternary IQ1 grid entry.
#[inline(always)]
fn grid1(y: &mut [f32], dl: f32, grid: u64, delta: f32) {
    for (y, g) in y.iter_mut().zip(grid.to_le_bytes()) {
        *y = dl * (f32::from(g as i8) + delta);
    }
}

/// 66 bytes: d, then per 32 values two LE u32: four 8-bit grid indices; four 7-bit sign
/// indices (into `ksigns_iq2xs`) and a 4-bit scale on top.
fn iq2_xxs(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ2_XXS);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b);
        for (q, y) in b[2..].chunks_exact(8).zip(y.chunks_exact_mut(32)) {
            let aux = u32_at(q, 4);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.25;
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                grid8(y, db, IQ2XXS_GRID[usize::from(q[l])], signs);
            }
        }
    }
}

/// 74 bytes: d, 32 LE u16 (9-bit grid index, 7-bit sign index), 8 bytes of two 4-bit scales
/// (one per 16 values).
fn iq2_xs(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ2_XS);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b);
        let (qs, scales) = (&b[2..66], &b[66..74]);
        for ((q, &sc), y) in qs.chunks_exact(8).zip(scales).zip(y.chunks_exact_mut(32)) {
            let db = [
                d * (0.5 + f32::from(sc & 0xf)) * 0.25,
                d * (0.5 + f32::from(sc >> 4)) * 0.25,
            ];
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let v = u16_at(q, 2 * l);
                let signs = KSIGNS_IQ2XS[usize::from(v >> 9)];
                grid8(y, db[l / 2], IQ2XS_GRID[usize::from(v & 511)], signs);
            }
        }
    }
}

/// 82 bytes: d, 32 low index bytes, 32 sign bytes, 8 bytes of 2-bit high index bits, 8 bytes of
/// two 4-bit scales.
fn iq2_s(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ2_S);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b);
        let (qs, signs, qh, scales) = (&b[2..34], &b[34..66], &b[66..74], &b[74..82]);
        let sub = qs
            .chunks_exact(4)
            .zip(signs.chunks_exact(4))
            .zip(qh.iter().zip(scales));
        for (((q, s), (&h, &sc)), y) in sub.zip(y.chunks_exact_mut(32)) {
            let db = [
                d * (0.5 + f32::from(sc & 0xf)) * 0.25,
                d * (0.5 + f32::from(sc >> 4)) * 0.25,
            ];
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let idx = usize::from(q[l]) | (usize::from((h >> (2 * l)) & 3) << 8);
                grid8(y, db[l / 2], IQ2S_GRID[idx], s[l]);
            }
        }
    }
}

/// 98 bytes: d, 64 grid indices (one per 4 values), then per 32 values an LE u32 of four 7-bit
/// sign indices and a 4-bit scale.
fn iq3_xxs(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ3_XXS);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b);
        let (qs, sas) = (&b[2..66], &b[66..98]);
        for ((q, s), y) in qs
            .chunks_exact(8)
            .zip(sas.chunks_exact(4))
            .zip(y.chunks_exact_mut(32))
        {
            let aux = u32_at(s, 0);
            let db = d * (0.5 + (aux >> 28) as f32) * 0.5;
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let signs = KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize];
                let g1 = IQ3XXS_GRID[usize::from(q[2 * l])];
                let g2 = IQ3XXS_GRID[usize::from(q[2 * l + 1])];
                grid4x2(y, db, g1, g2, signs);
            }
        }
    }
}

/// 110 bytes: d, 64 low index bytes, 8 bytes of high index bits (one per index), 32 sign bytes,
/// 4 bytes of two 4-bit scales.
fn iq3_s(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ3_S);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b);
        let (qs, qh, signs, scales) = (&b[2..66], &b[66..74], &b[74..106], &b[106..110]);
        let sub = qs.chunks_exact(8).zip(qh).zip(signs.chunks_exact(4));
        for (ib, (((q, &h), s), y)) in sub.zip(y.chunks_exact_mut(32)).enumerate() {
            let sc = (scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
            // gguf-py: `d * (1 + 2 * scales)` with the integer exact in f32 (at most 31).
            let db = d * f32::from(1 + 2 * sc);
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let i1 = usize::from(q[2 * l]) | (usize::from((h >> (2 * l)) & 1) << 8);
                let i2 = usize::from(q[2 * l + 1]) | (usize::from((h >> (2 * l + 1)) & 1) << 8);
                grid4x2(y, db, IQ3S_GRID[i1], IQ3S_GRID[i2], s[l]);
            }
        }
    }
}

/// 50 bytes: d, 32 low index bytes, then per 32 values an LE u16: four 3-bit high index parts,
/// a 3-bit scale and the delta sign (bit 15).
fn iq1_s(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ1_S);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b);
        let (qs, qh) = (&b[2..34], &b[34..50]);
        for ((q, h), y) in qs
            .chunks_exact(4)
            .zip(qh.chunks_exact(2))
            .zip(y.chunks_exact_mut(32))
        {
            let h = u16_at(h, 0);
            let dl = d * f32::from(2 * ((h >> 12) & 7) + 1);
            let delta = if h & 0x8000 != 0 {
                -IQ1S_DELTA
            } else {
                IQ1S_DELTA
            };
            for (l, y) in y.chunks_exact_mut(8).enumerate() {
                let idx = usize::from(q[l]) | (usize::from((h >> (3 * l)) & 7) << 8);
                grid1(y, dl, IQ1S_GRID[idx], delta);
            }
        }
    }
}

/// 56 bytes: 32 low index bytes, 16 bytes of two nibbles (3-bit high index part, delta sign),
/// 8 bytes as four LE u16 of four 3-bit scales each (one per 16 values), with the f16
/// super-scale in their top nibbles (lowest nibble of the f16 in the first).
fn iq1_m(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ1_M);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK_K)) {
        let (qs, qh) = (&b[0..32], &b[32..48]);
        let sc = [u16_at(b, 48), u16_at(b, 50), u16_at(b, 52), u16_at(b, 54)];
        let d_bits =
            (sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) | ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000);
        let d = f16_at(&d_bits.to_le_bytes());
        let sub = qs.chunks_exact(4).zip(qh.chunks_exact(2));
        for (ib, ((q, h), y)) in sub.zip(y.chunks_exact_mut(32)).enumerate() {
            let s = sc[ib / 2] >> (6 * (ib % 2));
            let dl = [
                d * f32::from(2 * (s & 7) + 1),
                d * f32::from(2 * ((s >> 3) & 7) + 1),
            ];
            // One nibble per 8 values: bits 0-2 extend the index, bit 3 negates the delta.
            let nibbles = [h[0] & 0xf, h[0] >> 4, h[1] & 0xf, h[1] >> 4];
            for (l, (y, n)) in y.chunks_exact_mut(8).zip(nibbles).enumerate() {
                let idx = usize::from(q[l]) | (usize::from(n & 7) << 8);
                let delta = if n & 8 != 0 { -IQ1M_DELTA } else { IQ1M_DELTA };
                grid1(y, dl[l / 2], IQ1S_GRID[idx], delta);
            }
        }
    }
}

/// `d * kvalue` for 32 values: low nibbles of `qs` are elements 0..16, high nibbles 16..32.
#[inline(always)]
fn nl32(y: &mut [f32], d: f32, qs: &[u8]) {
    let (lo, hi) = y.split_at_mut(QK4_NL / 2);
    for ((lo, hi), &q) in lo.iter_mut().zip(hi).zip(qs) {
        *lo = d * f32::from(KVALUES_IQ4NL[usize::from(q & 0xf)]);
        *hi = d * f32::from(KVALUES_IQ4NL[usize::from(q >> 4)]);
    }
}

/// 18 bytes: d, 16 bytes of nibbles.
fn iq4_nl(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ4_NL);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK4_NL)) {
        nl32(y, f16_at(b), &b[2..18]);
    }
}

/// 136 bytes: d, LE u16 of the high 2 bits of the eight 6-bit scales, 4 bytes of their low
/// nibbles, 128 bytes of nibbles (16 per 32 values).
fn iq4_xs(src: &[u8], dst: &mut [f32]) {
    const TS: usize = type_size(GgmlType::IQ4_XS);
    for (b, y) in src.chunks_exact(TS).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f16_at(b);
        let scales_h = u16_at(b, 2);
        let scales_l = &b[4..8];
        for (ib, (q, y)) in b[8..136]
            .chunks_exact(16)
            .zip(y.chunks_exact_mut(32))
            .enumerate()
        {
            let lo = (scales_l[ib / 2] >> (4 * (ib % 2))) & 0xf;
            let hi = ((scales_h >> (2 * ib)) & 3) as u8;
            // gguf-py: `(scales_l | scales_h << 4).astype(int8) - int8(32)`, then to f32.
            let ls = i16::from(lo | (hi << 4)) - 32;
            let dl = d * f32::from(ls);
            nl32(y, dl, q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: [GgmlType; 9] = [
        GgmlType::IQ2_XXS,
        GgmlType::IQ2_XS,
        GgmlType::IQ2_S,
        GgmlType::IQ3_XXS,
        GgmlType::IQ3_S,
        GgmlType::IQ1_S,
        GgmlType::IQ1_M,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
    ];

    fn run(ty: GgmlType, src: &[u8]) -> Vec<f32> {
        let n = src.len() / ty.type_size() as usize * ty.block_size() as usize;
        let mut out = vec![f32::NAN; n];
        kernel(ty).expect("kernel")(src, &mut out);
        out
    }

    #[test]
    fn covers_exactly_the_iquants() {
        for ty in TYPES {
            assert!(kernel(ty).is_some(), "{ty:?}");
        }
        for ty in [
            GgmlType::F32,
            GgmlType::Q4_0,
            GgmlType::Q6_K,
            GgmlType::TQ1_0,
        ] {
            assert!(kernel(ty).is_none(), "{ty:?}");
        }
    }

    #[test]
    fn zero_scale_gives_zeros_and_every_output_is_written() {
        for ty in TYPES {
            // All index bits set, scale fields zero.
            let mut src = vec![0xffu8; 3 * ty.type_size() as usize];
            for blk in src.chunks_exact_mut(ty.type_size() as usize) {
                match ty {
                    GgmlType::IQ1_M => blk[48..56].iter_mut().for_each(|b| *b &= 0x0f),
                    _ => blk[..2].fill(0),
                }
            }
            let out = run(ty, &src);
            assert!(out.iter().all(|v| *v == 0.0), "{ty:?}");
        }
    }

    #[test]
    fn hand_computed_values() {
        // IQ4_NL, d = 1: nibble i -> kvalues[i]; element j from the low nibble of qs[j].
        let mut b = vec![0x00, 0x3c];
        b.extend((0..16u8).map(|i| i | ((15 - i) << 4)));
        let out = run(GgmlType::IQ4_NL, &b);
        assert_eq!(out[0], -127.0);
        assert_eq!(out[15], 113.0);
        assert_eq!(out[16], 113.0);
        assert_eq!(out[31], -127.0);

        // IQ2_XXS, d = 1, zero scale nibble: db = 0.125; index 0 = all 8s, no signs.
        let mut b = vec![0u8; 66];
        b[1] = 0x3c;
        let out = run(GgmlType::IQ2_XXS, &b);
        assert!(out.iter().all(|v| *v == 1.0));
        // Sign index 1 (ksigns 129): elements 0 and 7 negative in the first group.
        b[2 + 4] = 1;
        let out = run(GgmlType::IQ2_XXS, &b);
        assert_eq!(&out[..8], &[-1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1.0]);

        // IQ1_S, d = 2, scale 0 (dl = 2), delta +0.125, index 0 = all -1.
        let mut b = vec![0u8; 50];
        b[1] = 0x40;
        let out = run(GgmlType::IQ1_S, &b);
        assert!(out.iter().all(|v| *v == 2.0 * (-1.0 + 0.125)));

        // IQ1_M with d = 1.0 (0x3c00) spread over the top nibbles: 0, 0, 0xc, 0x3.
        let mut b = vec![0u8; 56];
        b[53] = 0xc0;
        b[55] = 0x30;
        b[32] = 0x08; // first 8 values: delta negated
        let out = run(GgmlType::IQ1_M, &b);
        assert_eq!(out[0], -1.0 - 0.125);
        assert_eq!(out[8], -1.0 + 0.125);

        // IQ4_XS, d = 1, scale 0 -> ls - 32 = -32.
        let mut b = vec![0u8; 136];
        b[1] = 0x3c;
        let out = run(GgmlType::IQ4_XS, &b);
        assert!(out.iter().all(|v| *v == -32.0 * -127.0));
    }
}
