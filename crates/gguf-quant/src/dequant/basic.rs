//! Plain types, the legacy quants, the K-quants, the ternary types and FP4.

use super::DequantFn;
use crate::blocks::{field, BlockQ4K, BlockQ5K, QK_K};
use crate::fp::{e8m0_to_fp32_half, f16_at, ue4m3_to_fp32_half, KVALUES_FP4};
use crate::GgmlType;

pub(super) fn kernel(ty: GgmlType) -> Option<DequantFn> {
    use GgmlType::*;
    Some(match ty {
        F32 => f32_,
        F16 => f16_,
        BF16 => bf16_,
        F64 => f64_,
        I8 => i8_,
        I16 => i16_,
        I32 => i32_,
        I64 => i64_,
        Q4_0 => q4_0,
        Q4_1 => q4_1,
        Q5_0 => q5_0,
        Q5_1 => q5_1,
        Q8_0 => q8_0,
        Q8_1 => q8_1,
        Q2_K => q2_k,
        Q3_K => q3_k,
        Q4_K => q4_k,
        Q5_K => q5_k,
        Q6_K => q6_k,
        Q8_K => q8_k,
        TQ1_0 => tq1_0,
        TQ2_0 => tq2_0,
        MXFP4 => mxfp4,
        NVFP4 => nvfp4,
        Q1_0 => q1_0,
        Q2_0 => q2_0,
        _ => return None,
    })
}

macro_rules! plain {
    ($name:ident, $n:expr, |$b:ident| $conv:expr) => {
        fn $name(src: &[u8], dst: &mut [f32]) {
            for (y, $b) in dst.iter_mut().zip(src.chunks_exact($n)) {
                *y = $conv;
            }
        }
    };
}

plain!(f32_, 4, |b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
plain!(f16_, 2, |b| f16_at(b));
plain!(bf16_, 2, |b| f32::from_bits(
    u32::from(u16::from_le_bytes([b[0], b[1]])) << 16
));
plain!(
    f64_,
    8,
    |b| f64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f32
);
plain!(i8_, 1, |b| f32::from(b[0] as i8));
plain!(i16_, 2, |b| f32::from(i16::from_le_bytes([b[0], b[1]])));
plain!(i32_, 4, |b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])
    as f32);
plain!(
    i64_,
    8,
    |b| i64::from_le_bytes(b.try_into().unwrap_or([0; 8])) as f32
);

fn q4_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(18).zip(dst.chunks_exact_mut(32)) {
        let d = f16_at(b);
        let qs = &b[2..18];
        for j in 0..16 {
            y[j] = d * f32::from((qs[j] & 0x0F) as i8 - 8);
            y[j + 16] = d * f32::from((qs[j] >> 4) as i8 - 8);
        }
    }
}

fn q4_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(20).zip(dst.chunks_exact_mut(32)) {
        let (d, m) = (f16_at(b), f16_at(&b[2..]));
        let qs = &b[4..20];
        for j in 0..16 {
            y[j] = d * f32::from(qs[j] & 0x0F) + m;
            y[j + 16] = d * f32::from(qs[j] >> 4) + m;
        }
    }
}

fn q5_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(22).zip(dst.chunks_exact_mut(32)) {
        let d = f16_at(b);
        let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
        let (lo, hi) = y.split_at_mut(16);
        for (j, &q) in b[6..22].iter().enumerate() {
            let h0 = (((qh >> j) & 1) << 4) as u8;
            let h1 = (((qh >> (j + 16)) & 1) << 4) as u8;
            lo[j] = d * f32::from(((q & 0x0F) | h0) as i8 - 16);
            hi[j] = d * f32::from(((q >> 4) | h1) as i8 - 16);
        }
    }
}

fn q5_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(24).zip(dst.chunks_exact_mut(32)) {
        let (d, m) = (f16_at(b), f16_at(&b[2..]));
        let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let (lo, hi) = y.split_at_mut(16);
        for (j, &q) in b[8..24].iter().enumerate() {
            let h0 = (((qh >> j) & 1) << 4) as u8;
            let h1 = (((qh >> (j + 16)) & 1) << 4) as u8;
            lo[j] = d * f32::from((q & 0x0F) | h0) + m;
            hi[j] = d * f32::from((q >> 4) | h1) + m;
        }
    }
}

fn q8_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(34).zip(dst.chunks_exact_mut(32)) {
        let d = f16_at(b);
        for (y, &q) in y.iter_mut().zip(&b[2..34]) {
            *y = f32::from(q as i8) * d;
        }
    }
}

fn q8_1(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(36).zip(dst.chunks_exact_mut(32)) {
        let d = f16_at(b);
        for (y, &q) in y.iter_mut().zip(&b[4..36]) {
            *y = f32::from(q as i8) * d;
        }
    }
}

fn q2_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(84).zip(dst.chunks_exact_mut(QK_K)) {
        let (scales, qs) = (&b[0..16], &b[16..80]);
        let (d, dmin) = (f16_at(&b[80..]), f16_at(&b[82..]));
        // Element 128h + 32s + l is bits 2s..2s+2 of qs[32h + l]; sub-blocks are 16 long.
        for (sub, y) in y.chunks_exact_mut(16).enumerate() {
            let (h, s, half) = (sub / 8, (sub / 2) % 4, sub % 2);
            let dl = d * f32::from(scales[sub] & 0x0F);
            let ml = dmin * f32::from(scales[sub] >> 4);
            let q = &qs[32 * h + 16 * half..32 * h + 16 * half + 16];
            for (y, &q) in y.iter_mut().zip(q) {
                *y = dl * f32::from((q >> (2 * s)) & 3) - ml;
            }
        }
    }
}

fn q3_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(110).zip(dst.chunks_exact_mut(QK_K)) {
        let (hmask, qs, sc, d) = (&b[0..32], &b[32..96], &b[96..108], f16_at(&b[108..]));
        for (sub, y) in y.chunks_exact_mut(16).enumerate() {
            let low = if sub < 8 {
                sc[sub] & 0x0F
            } else {
                sc[sub - 8] >> 4
            };
            let high = (sc[8 + sub % 4] >> (2 * (sub / 4))) & 3;
            let dl = d * f32::from((low | (high << 4)) as i8 - 32);
            // Element e = 128h + 32s + l: low bits from qs[32h + l] >> 2s, high bit e/32 of hmask[l].
            let (h, s, half) = (sub / 8, (sub / 2) % 4, sub % 2);
            let bit = sub / 2;
            for (i, y) in y.iter_mut().enumerate() {
                let l = 16 * half + i;
                let lowq = ((qs[32 * h + l] >> (2 * s)) & 3) as i8;
                let hbit = (hmask[l] >> bit) & 1;
                *y = dl * f32::from(lowq - (((hbit ^ 1) << 2) as i8));
            }
        }
    }
}

/// The eight 6-bit (scale, min) pairs of a Q4_K/Q5_K block.
#[inline(always)]
pub(crate) fn k_scale_min(s: &[u8]) -> ([u8; 8], [u8; 8]) {
    // A 32-bit word at a time: four scales (or mins) per word, in byte order.
    let word = |i: usize| u32::from_le_bytes([s[i], s[i + 1], s[i + 2], s[i + 3]]);
    let (w0, w1, w2) = (word(0), word(4), word(8));
    let sc_lo = w0 & 0x3F3F_3F3F;
    let mn_lo = w1 & 0x3F3F_3F3F;
    let sc_hi = (w2 & 0x0F0F_0F0F) | ((w0 >> 2) & 0x3030_3030);
    let mn_hi = ((w2 >> 4) & 0x0F0F_0F0F) | ((w1 >> 2) & 0x3030_3030);
    let join = |lo: u32, hi: u32| (u64::from(lo) | (u64::from(hi) << 32)).to_le_bytes();
    (join(sc_lo, sc_hi), join(mn_lo, mn_hi))
}

/// Q4_K and Q5_K (`d`, `dmin`, 12 bytes of packed scales and mins, then `qs` at `qs_at`): byte
/// `qs[32c + l]` holds element `64c + l` (low nibble) and `64c + 32 + l` (high nibble), and
/// `high(b, l, c)` gives the bits above the nibble of the low (`c = 2c'`) and high
/// (`c = 2c' + 1`) element of byte `l` (Q5_K's fifth bits; none for Q4_K).
#[inline(always)]
fn k45(
    src: &[u8],
    dst: &mut [f32],
    size: usize,
    qs_at: usize,
    high: impl Fn(&[u8], usize, usize) -> u8,
) {
    for (b, y) in src.chunks_exact(size).zip(dst.chunks_exact_mut(QK_K)) {
        let (d, dmin) = (f16_at(b), f16_at(&b[2..]));
        let (sc, mn) = k_scale_min(&b[4..16]);
        for (c, (q, y)) in b[qs_at..qs_at + 128]
            .chunks_exact(32)
            .zip(y.chunks_exact_mut(64))
            .enumerate()
        {
            let (d0, m0) = (d * f32::from(sc[2 * c]), dmin * f32::from(mn[2 * c]));
            let (d1, m1) = (
                d * f32::from(sc[2 * c + 1]),
                dmin * f32::from(mn[2 * c + 1]),
            );
            let (lo, hi) = y.split_at_mut(32);
            for (l, (&q, (lo, hi))) in q.iter().zip(lo.iter_mut().zip(hi)).enumerate() {
                *lo = d0 * f32::from((q & 0x0F) | high(b, l, 2 * c)) - m0;
                *hi = d1 * f32::from((q >> 4) | high(b, l, 2 * c + 1)) - m1;
            }
        }
    }
}

fn q4_k(src: &[u8], dst: &mut [f32]) {
    let qs = field!(BlockQ4K.qs).start;
    k45(src, dst, size_of::<BlockQ4K>(), qs, |_, _, _| 0);
}

fn q5_k(src: &[u8], dst: &mut [f32]) {
    // The fifth bit of element 32k + l is bit k of qh[l].
    let (qs, qh) = (field!(BlockQ5K.qs).start, field!(BlockQ5K.qh).start);
    k45(src, dst, size_of::<BlockQ5K>(), qs, |b, l, k| {
        ((b[qh + l] >> k) & 1) << 4
    });
}

fn q6_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(210).zip(dst.chunks_exact_mut(QK_K)) {
        let (ql, qh, scales, d) = (&b[0..128], &b[128..192], &b[192..208], f16_at(&b[208..]));
        let mut ds = [0f32; 16];
        for (ds, &s) in ds.iter_mut().zip(scales) {
            *ds = d * f32::from(s as i8);
        }
        // Half h, position l < 32: four elements 128h + 32g + l, g = 0..4.
        for (h, y) in y.chunks_exact_mut(128).enumerate() {
            let (ql, qh) = (&ql[64 * h..64 * h + 64], &qh[32 * h..32 * h + 32]);
            for l in 0..32 {
                let q = [
                    (ql[l] & 0x0F) | ((qh[l] & 3) << 4),
                    (ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4),
                    (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4),
                    (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4),
                ];
                for (g, q) in q.into_iter().enumerate() {
                    let e = 32 * g + l;
                    y[e] = ds[8 * h + e / 16] * f32::from(q as i8 - 32);
                }
            }
        }
    }
}

fn q8_k(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(292).zip(dst.chunks_exact_mut(QK_K)) {
        let d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        for (y, &q) in y.iter_mut().zip(&b[4..260]) {
            *y = d * f32::from(q as i8);
        }
    }
}

fn tq1_0(src: &[u8], dst: &mut [f32]) {
    const POW3: [u8; 5] = [1, 3, 9, 27, 81];
    // A trit packed at position n of a base-3 byte, recovered as ggml does.
    let trit = |byte: u8, n: usize| -> f32 {
        let shifted = byte.wrapping_mul(POW3[n]);
        f32::from(((u16::from(shifted) * 3) >> 8) as i8 - 1)
    };
    for (b, y) in src.chunks_exact(54).zip(dst.chunks_exact_mut(QK_K)) {
        let (qs, qh, d) = (&b[0..48], &b[48..52], f16_at(&b[52..]));
        for n in 0..5 {
            for l in 0..32 {
                y[n * 32 + l] = d * trit(qs[l], n);
            }
            for l in 0..16 {
                y[160 + n * 16 + l] = d * trit(qs[32 + l], n);
            }
        }
        for n in 0..4 {
            for l in 0..4 {
                y[240 + n * 4 + l] = d * trit(qh[l], n);
            }
        }
    }
}

fn tq2_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(66).zip(dst.chunks_exact_mut(QK_K)) {
        let (qs, d) = (&b[0..64], f16_at(&b[64..]));
        for (e, y) in y.iter_mut().enumerate() {
            let q = (qs[(e / 128) * 32 + e % 32] >> (2 * ((e / 32) % 4))) & 3;
            *y = d * f32::from(q as i8 - 1);
        }
    }
}

fn mxfp4(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(17).zip(dst.chunks_exact_mut(32)) {
        let d = e8m0_to_fp32_half(b[0]);
        for l in 0..16 {
            y[l] = d * f32::from(KVALUES_FP4[(b[1 + l] & 0x0F) as usize]);
            y[l + 16] = d * f32::from(KVALUES_FP4[(b[1 + l] >> 4) as usize]);
        }
    }
}

fn nvfp4(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(36).zip(dst.chunks_exact_mut(64)) {
        for s in 0..4 {
            let d = ue4m3_to_fp32_half(b[s]);
            let qs = &b[4 + s * 8..4 + s * 8 + 8];
            for l in 0..8 {
                y[s * 16 + l] = d * f32::from(KVALUES_FP4[(qs[l] & 0x0F) as usize]);
                y[s * 16 + l + 8] = d * f32::from(KVALUES_FP4[(qs[l] >> 4) as usize]);
            }
        }
    }
}

fn q1_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(18).zip(dst.chunks_exact_mut(128)) {
        let d = f16_at(b);
        for (j, y) in y.iter_mut().enumerate() {
            *y = if (b[2 + j / 8] >> (j % 8)) & 1 == 1 {
                d
            } else {
                -d
            };
        }
    }
}

fn q2_0(src: &[u8], dst: &mut [f32]) {
    for (b, y) in src.chunks_exact(18).zip(dst.chunks_exact_mut(64)) {
        let d = f16_at(b);
        for (j, y) in y.iter_mut().enumerate() {
            let q = (b[2 + j / 4] >> (2 * (j % 4))) & 3;
            *y = f32::from(q as i8 - 1) * d;
        }
    }
}
