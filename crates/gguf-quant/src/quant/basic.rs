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
    // ggml keeps the first value of the largest magnitude (NaN never compares larger): the
    // largest magnitude is found eight lanes at a time (any order gives the same maximum),
    // then the first value that has it.
    let mut lanes = [0f32; 8];
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &v) in lanes.iter_mut().zip(c) {
            if *a < v.abs() {
                *a = v.abs();
            }
        }
    }
    let amax = lanes
        .iter()
        .chain(rest.iter())
        .fold(0f32, |a, &v| if a < v.abs() { v.abs() } else { a });
    if amax == 0.0 {
        return 0.0;
    }
    x.iter().copied().find(|v| v.abs() == amax).unwrap_or(0.0)
}

fn min_max(x: &[f32]) -> (f32, f32) {
    // ggml's running `if (v < min) min = v` (NaN skipped) taken eight lanes at a time: every
    // order gives the same extreme value, and equal values have equal bits, except a zero
    // extreme, whose sign depends on which zero came first. That case is redone in order.
    let (mut mins, mut maxs) = ([f32::MAX; 8], [-f32::MAX; 8]);
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for k in 0..8 {
            if c[k] < mins[k] {
                mins[k] = c[k];
            }
            if c[k] > maxs[k] {
                maxs[k] = c[k];
            }
        }
    }
    let (min, max) = min_max_in_order(mins.iter().chain(rest), maxs.iter().chain(rest));
    if min == 0.0 || max == 0.0 {
        return min_max_in_order(x, x);
    }
    (min, max)
}

/// The smallest of `lows` and the largest of `highs`, in ggml's order.
fn min_max_in_order<'a>(
    lows: impl IntoIterator<Item = &'a f32>,
    highs: impl IntoIterator<Item = &'a f32>,
) -> (f32, f32) {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in lows {
        if v < min {
            min = v;
        }
    }
    for &v in highs {
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
    // That instruction itself on x86_64 (SSE is part of the baseline): the portable form below
    // costs a compare and a saturating conversion per value, which made Q5_1 twice as slow as
    // ggml's.
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cvttss_si32, _mm_set_ss};
        // SAFETY: both need only SSE, which every x86_64 CPU has.
        unsafe { _mm_cvttss_si32(_mm_set_ss(x)) }
    }
    #[cfg(not(target_arch = "x86_64"))]
    if x.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&x) {
        i32::MIN
    } else {
        x as i32
    }
}

/// [`cvtt`] of a whole block of 32 values, four at a time on x86_64 (`cvttps2dq`, same results
/// as `cvttss2si` lane by lane), which is how GCC compiles ggml's block loops.
#[inline(always)]
fn cvtt32(v: &[f32; 32]) -> [i32; 32] {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_cvttps_epi32, _mm_loadu_ps, _mm_storeu_si128};
        let mut out = [0i32; 32];
        for (o, c) in out.chunks_exact_mut(4).zip(v.chunks_exact(4)) {
            // SAFETY: SSE2 is part of x86_64's baseline, and both pointers address 4 valid
            // lanes (chunks of exactly 4); the unaligned load and store need no alignment.
            unsafe {
                let q = _mm_cvttps_epi32(_mm_loadu_ps(c.as_ptr()));
                _mm_storeu_si128(o.as_mut_ptr().cast(), q);
            }
        }
        out
    }
    #[cfg(not(target_arch = "x86_64"))]
    v.map(cvtt)
}

/// C's `roundf` (halfway cases away from zero), without the libm call `f32::round` becomes on
/// x86_64 baseline targets (no SSE4.1): quantizing activations calls it once per value.
#[inline(always)]
pub(crate) fn roundf(x: f32) -> f32 {
    if x.is_nan() || x.abs() >= 8_388_608.0 {
        return x; // integers already (|x| >= 2^23), infinities and NaN
    }
    // Exact truncation in this range, sign of zero kept.
    let t = (x as i32 as f32).copysign(x);
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
        let q = cvtt32(&std::array::from_fn(|j| x[j] * id + 8.5));
        for j in 0..16 {
            let xi0 = (q[j] as i8).min(15) as u8;
            let xi1 = (q[j + 16] as i8).min(15) as u8;
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
        let q = cvtt32(&std::array::from_fn(|j| (x[j] - min) * id + 0.5));
        for j in 0..16 {
            let xi0 = (q[j] as i8).min(15) as u8;
            let xi1 = (q[j + 16] as i8).min(15) as u8;
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
        let q = cvtt32(&std::array::from_fn(|j| x[j] * id + 16.5)).map(|q| (q as i8).min(31) as u8);
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
        // No clamp here in ggml either: the value cannot exceed 31.
        let q = cvtt32(&std::array::from_fn(|j| (x[j] - min) * id + 0.5)).map(|q| q as u8);
        let (qh, qs) = y[4..].split_at_mut(4);
        pack_q5(&q, qh, qs);
    }
}

/// `amax = MAX(amax, fabsf(v))` with C's `MAX(a, b) = a > b ? a : b`: unlike `f32::max`, a NaN
/// input resets the running maximum, and ggml's outputs depend on that.
fn c_max_abs(x: &[f32]) -> f32 {
    let in_order = |x: &[f32]| {
        x.iter()
            .fold(0f32, |amax, v| if amax > v.abs() { amax } else { v.abs() })
    };
    // Without NaN the largest magnitude does not depend on the order, so it is found eight
    // lanes at a time; a block with a NaN is redone in order.
    let mut lanes = [0f32; 8];
    let mut nan = false;
    let chunks = x.chunks_exact(8);
    let rest = chunks.remainder();
    for c in chunks {
        for (a, &v) in lanes.iter_mut().zip(c) {
            nan |= v.is_nan();
            *a = if *a > v.abs() { *a } else { v.abs() };
        }
    }
    if nan || rest.iter().any(|v| v.is_nan()) {
        return in_order(x);
    }
    in_order(&lanes).max(in_order(rest))
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
        let q = round_block(&std::array::from_fn(|j| x[j] * id));
        for (y, q) in y[2..].iter_mut().zip(q) {
            *y = q as u8;
        }
    }
}

/// `(int) roundf(v)` of a block, as [`roundf`] and [`cvtt`] give it value by value. When every
/// value is below 2^23 in magnitude (no NaN, no infinity), as a block scaled by its own
/// maximum always is, it takes a few vector instructions: the truncation is exact there, and
/// so is the fraction left.
#[inline(always)]
fn round_block(v: &[f32; 32]) -> [i32; 32] {
    if !v.iter().all(|x| x.abs() < 8_388_608.0) {
        return v.map(|x| cvtt(roundf(x)));
    }
    let t = cvtt32(v);
    std::array::from_fn(|j| {
        let frac = v[j] - t[j] as f32;
        t[j] + i32::from(frac >= 0.5) - i32::from(frac <= -0.5)
    })
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

    /// Blocks of 32 drawn from values that tell the orders apart: signed zeros, NaN, infinities,
    /// equal magnitudes of both signs, subnormals, halves (rounding ties).
    fn special_blocks() -> Vec<[f32; 32]> {
        const POOL: [f32; 14] = [
            0.0,
            -0.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1.0,
            -1.0,
            0.5,
            -0.5,
            2.5,
            -126.5,
            1e-40,
            -1e-40,
            3e9,
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        (0..4000)
            .map(|b| {
                // Some blocks draw from a few pool values only, so that ties are common.
                let span = [2, 3, 5, POOL.len()][b % 4];
                let offset = b % (POOL.len() - span + 1);
                std::array::from_fn(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    POOL[offset + (state % span as u64) as usize]
                })
            })
            .collect()
    }

    #[test]
    fn block_reductions_equal_ggml_order_on_special_values() {
        for x in special_blocks() {
            let (min, max) = min_max(&x);
            let (want_min, want_max) = min_max_in_order(&x, &x);
            assert_eq!(
                (min.to_bits(), max.to_bits()),
                (want_min.to_bits(), want_max.to_bits()),
                "{x:?}"
            );
            let (mut amax, mut first) = (0f32, 0f32);
            for &v in &x {
                if amax < v.abs() {
                    amax = v.abs();
                    first = v;
                }
            }
            assert_eq!(signed_absmax(&x).to_bits(), first.to_bits(), "{x:?}");
            let running = x
                .iter()
                .fold(0f32, |a, v| if a > v.abs() { a } else { v.abs() });
            assert_eq!(c_max_abs(&x).to_bits(), running.to_bits(), "{x:?}");
        }
    }

    #[test]
    fn block_conversions_equal_value_by_value() {
        for x in special_blocks() {
            let portable = |v: f32| {
                if v.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&v) {
                    i32::MIN
                } else {
                    v as i32
                }
            };
            assert_eq!(cvtt32(&x), x.map(portable), "{x:?}");
            assert_eq!(x.map(cvtt), x.map(portable), "{x:?}");
            assert_eq!(round_block(&x), x.map(|v| cvtt(roundf(v))), "{x:?}");
            // The fast path: every value below 2^23.
            let scaled = x.map(|v| if v.abs() < 1e6 { v * 3.0 } else { 0.25 });
            assert_eq!(
                round_block(&scaled),
                scaled.map(|v| cvtt(roundf(v))),
                "{scaled:?}"
            );
        }
    }

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
