//! Reference quantizers of the plain floats, the legacy quants, the ternary types, FP4 and
//! Q1_0/Q2_0, each following ggml's `quantize_row_*_ref` statement for statement.

use super::QuantFn;
use crate::blocks::QK_K;
use crate::fp::{e8m0_to_fp32_half, f16_bytes, ue4m3_to_fp32_half, KVALUES_FP4};
use crate::GgmlType;

pub(super) fn kernel(ty: GgmlType) -> Option<QuantFn> {
    use GgmlType::*;
    Some(match ty {
        F32 => f32_,
        F16 => f16_,
        BF16 => bf16_,
        Q4_0 => q4_0,
        Q4_1 => q4_1,
        Q5_0 => q5_0,
        Q5_1 => q5_1,
        Q8_0 => q8_0,
        Q8_1 => q8_1,
        TQ1_0 => tq1_0,
        TQ2_0 => tq2_0,
        MXFP4 => mxfp4,
        NVFP4 => nvfp4,
        Q1_0 => q1_0,
        Q2_0 => q2_0,
        _ => return None,
    })
}

fn f32_(src: &[f32], dst: &mut [u8]) {
    for (x, out) in src.iter().zip(dst.chunks_exact_mut(4)) {
        out.copy_from_slice(&x.to_le_bytes());
    }
}

fn f16_(src: &[f32], dst: &mut [u8]) {
    for (&x, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&f16_bytes(x));
    }
}

/// ggml's `ggml_compute_fp32_to_bf16`: NaNs become quiet NaNs, the rest round to nearest even.
fn fp32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    ((u + (0x7fff + ((u >> 16) & 1))) >> 16) as u16
}

fn bf16_(src: &[f32], dst: &mut [u8]) {
    for (&x, out) in src.iter().zip(dst.chunks_exact_mut(2)) {
        out.copy_from_slice(&fp32_to_bf16(x).to_le_bytes());
    }
}

/// The value of largest magnitude (the first one on ties), as ggml's Q4_0/Q5_0 pick it.
fn signed_absmax(x: &[f32]) -> f32 {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

/// C's float-to-integer conversion as x86 compiles it (`cvttss2si`): truncation toward zero,
/// and `i32::MIN` for NaN and out-of-range values. ggml and numpy both rely on it when a
/// subnormal scale makes the inverse scale infinite, so matching it keeps those blocks exact.
#[inline(always)]
pub(crate) fn cvtt(x: f32) -> i32 {
    if x.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

/// C's `roundf` (halfway cases away from zero), without the libm call `f32::round` becomes on
/// x86_64 baseline targets (no SSE4.1): quantizing activations calls it once per value.
#[inline(always)]
pub(crate) fn roundf(x: f32) -> f32 {
    if x.is_nan() || x.abs() >= 8_388_608.0 {
        return x; // integers already (|x| >= 2^23), infinities and NaN
    }
    let t = (x as i32 as f32).copysign(x); // exact truncation in this range, sign of zero kept
                                           // One away from zero when the (exact) fraction is at least a half: a select, not a branch,
                                           // since quantized values fall on either side at random (the branch mispredicted half the
                                           // time and made Q8_0 quantization 2x slower than llama-quantize's).
    let step = f32::from(u8::from((x - t).abs() >= 0.5)).copysign(x);
    t + step
}

fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

fn q4_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(18)) {
        let d = signed_absmax(x) / -8.0;
        let id = inverse(d);
        y[..2].copy_from_slice(&f16_bytes(d));
        for j in 0..16 {
            let xi0 = (cvtt(x[j] * id + 8.5) as i8).min(15) as u8;
            let xi1 = (cvtt(x[j + 16] * id + 8.5) as i8).min(15) as u8;
            y[2 + j] = xi0 | (xi1 << 4);
        }
    }
}

fn q4_1(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(20)) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        y[..2].copy_from_slice(&f16_bytes(d));
        y[2..4].copy_from_slice(&f16_bytes(min));
        for j in 0..16 {
            let xi0 = (cvtt((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let xi1 = (cvtt((x[j + 16] - min) * id + 0.5) as i8).min(15) as u8;
            y[4 + j] = xi0 | (xi1 << 4);
        }
    }
}

/// Packs 32 five-bit values: low nibbles into `qs`, fifth bits into the little-endian `qh`.
pub(super) fn pack_q5(q: &[u8; 32], qh: &mut [u8], qs: &mut [u8]) {
    let mut bits = 0u32;
    for j in 0..16 {
        qs[j] = (q[j] & 0x0F) | ((q[j + 16] & 0x0F) << 4);
        bits |= u32::from((q[j] & 0x10) >> 4) << j;
        bits |= u32::from((q[j + 16] & 0x10) >> 4) << (j + 16);
    }
    qh.copy_from_slice(&bits.to_le_bytes());
}

fn q5_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(22)) {
        let d = signed_absmax(x) / -16.0;
        let id = inverse(d);
        y[..2].copy_from_slice(&f16_bytes(d));
        let mut q = [0u8; 32];
        for (q, &v) in q.iter_mut().zip(x) {
            *q = (cvtt(v * id + 16.5) as i8).min(31) as u8;
        }
        let (qh, qs) = y[2..].split_at_mut(4);
        pack_q5(&q, qh, qs);
    }
}

fn q5_1(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(24)) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        y[..2].copy_from_slice(&f16_bytes(d));
        y[2..4].copy_from_slice(&f16_bytes(min));
        let mut q = [0u8; 32];
        for (q, &v) in q.iter_mut().zip(x) {
            // No clamp here in ggml either: the value cannot exceed 31.
            *q = cvtt((v - min) * id + 0.5) as u8;
        }
        let (qh, qs) = y[4..].split_at_mut(4);
        pack_q5(&q, qh, qs);
    }
}

/// `amax = MAX(amax, fabsf(v))` with C's `MAX(a, b) = a > b ? a : b`: unlike `f32::max`, a NaN
/// input resets the running maximum, and ggml's outputs depend on that.
fn c_max_abs(x: &[f32]) -> f32 {
    x.iter()
        .fold(0f32, |amax, v| if amax > v.abs() { amax } else { v.abs() })
}

/// Q8_0's scale and its inverse: `max|x| / 127`.
fn q8_scale(x: &[f32]) -> (f32, f32) {
    let amax = c_max_abs(x);
    let d = amax / 127.0;
    (d, inverse(d))
}

fn q8_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(34)) {
        let (d, id) = q8_scale(x);
        y[..2].copy_from_slice(&f16_bytes(d));
        for (q, &v) in y[2..].iter_mut().zip(x) {
            *q = cvtt(roundf(v * id)) as u8;
        }
    }
}

fn q8_1(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(36)) {
        let (d, id) = q8_scale(x);
        y[..2].copy_from_slice(&f16_bytes(d));
        let mut sum = 0i32;
        for (q, &v) in y[4..].iter_mut().zip(x) {
            let qi = cvtt(roundf(v * id)) as i8;
            sum += i32::from(qi);
            *q = qi as u8;
        }
        y[2..4].copy_from_slice(&f16_bytes(sum as f32 * d));
    }
}

/// `max|x|` and its inverse, the scale of the ternary types.
fn ternary_scale(x: &[f32]) -> (f32, f32) {
    let amax = c_max_abs(x);
    (amax, inverse(amax))
}

fn tq1_0(src: &[f32], dst: &mut [u8]) {
    // Trits (0, 1 or 2) combine base 3, most significant first, in u8 arithmetic as numpy does;
    // the byte is then scaled so that multiplying by 3^n and keeping the top bits recovers trit n.
    const POW3: [u8; 5] = [81, 27, 9, 3, 1];
    fn pack(trits: impl Iterator<Item = u8>) -> u8 {
        let q = trits
            .zip(POW3)
            .fold(0u8, |acc, (t, p)| acc.wrapping_add(t.wrapping_mul(p)));
        ((u16::from(q) * 256).div_ceil(243)) as u8
    }
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(54)) {
        let (d, id) = ternary_scale(x);
        let t = |j: usize| (cvtt(roundf(x[j] * id)) as i8).wrapping_add(1) as u8;
        let (qs, rest) = y.split_at_mut(48);
        for (l, q) in qs.iter_mut().enumerate() {
            *q = if l < 32 {
                pack((0..5).map(|n| t(n * 32 + l)))
            } else {
                pack((0..5).map(|n| t(160 + n * 16 + (l - 32))))
            };
        }
        // The last 16 values: four trits per byte (the fifth position stays zero).
        for (l, q) in rest[..4].iter_mut().enumerate() {
            *q = pack((0..4).map(|n| t(240 + n * 4 + l)));
        }
        rest[4..6].copy_from_slice(&f16_bytes(d));
    }
}

fn tq2_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(66)) {
        let (d, id) = ternary_scale(x);
        for (j, out) in y[..64].iter_mut().enumerate() {
            let mut q = 0u8;
            for n in 0..4 {
                let v = x[(j / 32) * 128 + n * 32 + j % 32];
                q |= ((cvtt(roundf(v * id)) as i8).wrapping_add(1) as u8) << (2 * n);
            }
            *out = q;
        }
        y[64..66].copy_from_slice(&f16_bytes(d));
    }
}

/// The FP4 code whose (doubled) value times `scale` is closest to `x`; the first on ties.
fn best_index_fp4(x: f32, scale: f32) -> u8 {
    let mut best = 0;
    let mut best_err = (f32::from(KVALUES_FP4[0]) * scale - x).abs();
    for (i, &k) in KVALUES_FP4.iter().enumerate().skip(1) {
        let err = (f32::from(k) * scale - x).abs();
        if err < best_err {
            best = i as u8;
            best_err = err;
        }
    }
    best
}

fn absmax(x: &[f32]) -> f32 {
    let mut amax = 0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
        }
    }
    amax
}

fn mxfp4(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(17)) {
        let amax = absmax(x);
        // As ggml: floor(log2f(amax)) - 2 + 127 converted through int, as x86 does for C's
        // out-of-range float-to-uint8 conversion on subnormal maxima.
        let e = if amax > 0.0 {
            cvtt(amax.log2().floor() - 2.0 + 127.0) as u8
        } else {
            0
        };
        let d = e8m0_to_fp32_half(e);
        y[0] = e;
        for j in 0..16 {
            y[1 + j] = best_index_fp4(x[j], d) | (best_index_fp4(x[j + 16], d) << 4);
        }
    }
}

/// ggml's `ggml_fp32_to_ue4m3`: unsigned E4M3 (bias 7), rounding half up, saturating at 448.
fn fp32_to_ue4m3(x: f32) -> u8 {
    if x.is_nan() || x <= 0.0 {
        return 0;
    }
    let x = x.min(448.0);
    let bits = x.to_bits();
    let fp32_exp = ((bits >> 23) & 0xFF) as i32 - 127;
    let fp32_man = ((bits >> 20) & 0x7) as i32;
    let exp = fp32_exp + 7;
    if exp <= 0 {
        let man = cvtt(x * 512.0 + 0.5).min(7);
        return if man < 1 { 0 } else { man as u8 };
    }
    if exp >= 15 {
        return 0x7E;
    }
    let mut man = fp32_man + ((bits >> 19) & 1) as i32;
    let mut exp = exp;
    if man > 7 {
        man = 0;
        exp += 1;
    }
    if exp >= 15 {
        return 0x7E;
    }
    ((exp << 3) | man) as u8
}

fn nvfp4(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(64).zip(dst.chunks_exact_mut(36)) {
        for s in 0..4 {
            let xb = &x[s * 16..s * 16 + 16];
            let ue = fp32_to_ue4m3(absmax(xb) / 6.0);
            y[s] = ue;
            let d = ue4m3_to_fp32_half(ue);
            for j in 0..8 {
                y[4 + s * 8 + j] = best_index_fp4(xb[j], d) | (best_index_fp4(xb[8 + j], d) << 4);
            }
        }
    }
}

fn q1_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(128).zip(dst.chunks_exact_mut(18)) {
        let mut sum_abs = 0f32;
        for &v in x {
            sum_abs += v.abs();
        }
        y[..2].copy_from_slice(&f16_bytes(sum_abs / 128.0));
        y[2..].fill(0);
        for (j, &v) in x.iter().enumerate() {
            if v >= 0.0 {
                y[2 + j / 8] |= 1 << (j % 8);
            }
        }
    }
}

fn q2_0(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(64).zip(dst.chunks_exact_mut(18)) {
        let mut amax = 0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
            }
        }
        let id = if amax > 0.0 { 1.0 / amax } else { 0.0 };
        y[..2].copy_from_slice(&f16_bytes(amax));
        y[2..].fill(0);
        for (j, &v) in x.iter().enumerate() {
            let q = cvtt(roundf(v * id)).wrapping_add(1).clamp(0, 3) as u8;
            y[2 + j / 4] |= q << (2 * (j % 4));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::f16;

    #[test]
    fn bf16_rounds_to_nearest_even_and_quiets_nan() {
        assert_eq!(fp32_to_bf16(1.0), 0x3F80);
        assert_eq!(fp32_to_bf16(f32::from_bits(0x3F80_8000)), 0x3F80); // tie to even
        assert_eq!(fp32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82); // tie to even
        assert_eq!(fp32_to_bf16(f32::from_bits(0x7F80_0001)), 0x7FC0);
        assert_eq!(fp32_to_bf16(f32::INFINITY), 0x7F80);
        assert_eq!(f16::from_f32(1.0).to_bits(), 0x3C00);
    }

    #[test]
    fn roundf_matches_the_library_round() {
        let mut x = 0x9E37_79B9u32;
        let specials = [
            0.5f32,
            -0.5,
            1.5,
            -1.5,
            2.5,
            -2.5,
            0.49999997,
            -0.49999997,
            8_388_607.5,
            -8_388_607.5,
            8_388_608.0,
            1e30,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MIN_POSITIVE,
            1e-45,
        ];
        for v in specials.into_iter().chain((0..200_000).map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            f32::from_bits(x)
        })) {
            let (a, b) = (roundf(v), v.round());
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{v:e}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn q8_scale_follows_c_max_through_nan() {
        // ggml's MAX(amax, fabsf(v)) lets a NaN reset the running maximum: only the values
        // after it (here 2.0) count.
        let mut x = [0f32; 32];
        x[0] = 5.0;
        x[2] = f32::NAN;
        x[3] = 2.0;
        let mut y = [0u8; 34];
        q8_0(&x, &mut y);
        assert_eq!(y[..2], f16_bytes(2.0 / 127.0));
    }

    #[test]
    fn ue4m3_round_trip_of_representable_values() {
        // Below exponent 15; ggml's encoder saturates every value with exponent 15 to 0x7E.
        for code in 1u8..0x78 {
            let v = ue4m3_to_fp32_half(code) * 2.0;
            assert_eq!(fp32_to_ue4m3(v), code, "{code:#x} ({v})");
        }
        assert_eq!(fp32_to_ue4m3(256.0), 0x7E);
        assert_eq!(fp32_to_ue4m3(1e9), 0x7E);
        assert_eq!(fp32_to_ue4m3(-1.0), 0);
    }
}
