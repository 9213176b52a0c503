//! Reference quantizers of the K-quants (Q2_K ... Q6_K, Q8_K) and of IQ4_NL/IQ4_XS, ported
//! statement for statement from ggml's `quantize_row_*_ref` (ggml-quants.c, no importance
//! matrix).
//!
//! Every floating-point expression keeps ggml's operation order and `f32` precision (ggml's
//! reference C is built without fast-math and uses no `fmaf`, and Rust never contracts
//! `a * b + c`). `nearest_int` is ggml's float bit trick, which is total: infinities and NaNs
//! (from the infinite inverse scales of subnormal blocks) map to the same integers as in C.
//! C's implicit integer narrowing (`int` to `uint8_t`/`int8_t`) is reproduced with `as`.
//!
//! The loops keep ggml's index form so that they can be checked against the C line by line.
#![allow(clippy::needless_range_loop)]

use super::QuantFn;
use crate::blocks::QK_K;
use crate::fp::{f16_at, f16_bytes};
use crate::grids::KVALUES_IQ4NL;
use crate::GgmlType;

pub(super) fn kernel(ty: GgmlType) -> Option<QuantFn> {
    use GgmlType::*;
    Some(match ty {
        Q2_K => q2_k,
        Q3_K => q3_k,
        Q4_K => q4_k,
        Q5_K => q5_k,
        Q6_K => q6_k,
        Q8_K => q8_k,
        IQ4_NL => iq4_nl,
        IQ4_XS => iq4_xs,
        _ => return None,
    })
}

/// ggml's `GROUP_MAX_EPS`: groups whose largest magnitude is below it count as all zero.
pub(super) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: adds 1.5 * 2^23 and reads the mantissa bits, which rounds to nearest
/// (ties to even) for |x| < 2^22 and gives C's exact results outside that range too.
#[inline(always)]
pub(super) fn nearest_int(fval: f32) -> i32 {
    let val = fval + 12_582_912.0;
    (val.to_bits() as i32 & 0x007f_ffff) - 0x0040_0000
}

/// Writes `v` as an f16 at `out[0..2]` and returns the stored value as f32, as ggml's
/// `GGML_FP16_TO_FP32(y.d = GGML_FP32_TO_FP16(v))`.
#[inline(always)]
pub(super) fn store_f16(out: &mut [u8], v: f32) -> f32 {
    out[..2].copy_from_slice(&f16_bytes(v));
    f16_at(out)
}

/// Packs four 2-bit planes of 32 values each (per 128 values) into `qs`, as Q2_K and Q3_K do.
pub(super) fn pack_2bit(l: &[u8; QK_K], qs: &mut [u8]) {
    for j in (0..QK_K).step_by(128) {
        for i in 0..32 {
            qs[j / 4 + i] =
                l[j + i] | (l[j + i + 32] << 2) | (l[j + i + 64] << 4) | (l[j + i + 96] << 6);
        }
    }
}

/// `make_qx_quants(n, nmax, x, L, rmse_type = 1, qw)`: a symmetric scale searched over 19
/// candidates, weighted by `qw` (an importance matrix's weights) or, without it, by x²; `l` gets
/// the levels offset by `nmax`.
///
/// ggml sums the candidates one after another; here one pass over `x` sums all 19 side by side
/// (each still in element order, so every sum is ggml's), which turns 19 dependent chains of
/// additions into independent ones, and the candidates are then compared in ggml's order.
/// `l` ends as ggml leaves it: the levels of the last candidate that won.
pub(super) fn make_qx_quants(nmax: i32, x: &[f32], l: &mut [u8], qw: Option<&[f32]>) -> f32 {
    const TRIALS: usize = 19;
    let Some(max) = signed_max(x) else {
        l.fill(0);
        return 0.0;
    };
    // Candidate 0 is the plain scale; then is = -9..=9 without 0, in ggml's order.
    let iscales: [f32; TRIALS] = std::array::from_fn(|t| {
        let step = match t {
            0 => return -(nmax as f32) / max,
            1..=9 => t as i32 - 10,
            _ => t as i32 - 9,
        };
        -(nmax as f32 + 0.1 * step as f32) / max
    });
    let level = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    let mut sumlx = [0f32; TRIALS];
    let mut suml2 = [0f32; TRIALS];
    for (i, &v) in x.iter().enumerate() {
        let w = match qw {
            Some(qw) => qw[i],
            None => v * v,
        };
        for t in 0..TRIALS {
            let lf = level(iscales[t], v) as f32;
            sumlx[t] += w * v * lf;
            suml2[t] += w * lf * lf;
        }
    }
    let mut chosen = 0;
    let mut scale = if suml2[0] != 0.0 {
        sumlx[0] / suml2[0]
    } else {
        0.0
    };
    let mut best = scale * sumlx[0];
    for t in 1..TRIALS {
        if suml2[t] > 0.0 && sumlx[t] * sumlx[t] > best * suml2[t] {
            chosen = t;
            scale = sumlx[t] / suml2[t];
            best = scale * sumlx[t];
        }
    }
    for (li, &v) in l.iter_mut().zip(x) {
        *li = (nmax + level(iscales[chosen], v)) as u8;
    }
    scale
}

/// The value of largest magnitude in `x` (the first, with its sign), as `make_qx_quants` and
/// `make_q3_quants` search it; `None` when that magnitude is below `GROUP_MAX_EPS` (then ggml
/// zeroes the levels and returns a zero scale).
pub(super) fn signed_max(x: &[f32]) -> Option<f32> {
    let max = largest(x);
    // `|max|` is never NaN, so this is C's `!(amax < GROUP_MAX_EPS)`.
    (max.abs() >= GROUP_MAX_EPS).then_some(max)
}

/// The first value of largest magnitude in `x`, with its sign (0 if there is none above 0),
/// as ggml's loops `if (ax > amax) { amax = ax; max = x[i]; }` find it.
pub(super) fn largest(x: &[f32]) -> f32 {
    let mut max = 0f32;
    let mut amax = 0f32;
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    max
}

/// `make_q3_quants(n, nmax, x, L, do_rmse = true)`: a symmetric scale refined by moving single
/// levels while that lowers the x²-weighted error; `l` gets the levels offset by `nmax`.
fn make_q3_quants(nmax: i32, x: &[f32], l: &mut [i8]) -> f32 {
    let n = x.len();
    let Some(max) = signed_max(x) else {
        l.fill(0);
        return 0.0;
    };
    let iscale = -(nmax as f32) / max;
    // The levels and the terms of both sums for all values at once (elementwise, so exact),
    // then the sums in ggml's order.
    const MAX_N: usize = 32;
    assert!(n <= MAX_N, "make_q3_quants on {n} values");
    let (mut lx, mut l2) = ([0f32; MAX_N], [0f32; MAX_N]);
    for i in 0..n {
        let li = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l[i] = li as i8;
        let (w, lf) = (x[i] * x[i], li as f32);
        lx[i] = w * x[i] * lf;
        l2[i] = w * lf * lf;
    }
    let (mut sumlx, mut suml2) = (0f32, 0f32);
    for i in 0..n {
        sumlx += lx[i];
        suml2 += l2[i];
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = x[i] * x[i];
            let li = f32::from(l[i]);
            let mut slx = sumlx - w * x[i] * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(x[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != i32::from(l[i]) {
                    let nf = new_l as f32;
                    slx += w * x[i] * nf;
                    sl2 += w * nf * nf;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for v in l.iter_mut() {
        *v += nmax as i8;
    }
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// `make_qkx2_quants`: an asymmetric scale and min (`x ≈ scale * l - the_min`) searched over
/// `nstep + 1` candidates by weighted least squares. Returns `(scale, the_min)`.
#[allow(clippy::too_many_arguments)]
pub(super) fn make_qkx2_quants(
    nmax: i32,
    x: &[f32],
    weights: &[f32],
    l: &mut [u8],
    rmin: f32,
    rdelta: f32,
    nstep: i32,
    use_mad: bool,
) -> (f32, f32) {
    let n = x.len();
    let mut min = x[0];
    let mut max = x[0];
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        let w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l.fill(0);
        return (0.0, -min);
    }
    let iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0f32;
    for i in 0..n {
        let li = nearest_int(iscale * (x[i] - min));
        l[i] = li.clamp(0, nmax) as u8;
        let mut diff = scale * f32::from(l[i]) + min - x[i];
        diff = if use_mad { diff.abs() } else { diff * diff };
        let w = weights[i];
        best_error += w * diff;
    }
    if nstep < 1 {
        return (scale, -min);
    }
    // ggml tries the candidate scales one after another, and a winner's min moves the levels
    // of every candidate after it, so candidates are tried in turn here too. Within one, the
    // levels and the per-value products are computed for all values at once (vectorized;
    // elementwise, so exact), and only the sums are added one value after another, in ggml's
    // order.
    const MAX_N: usize = 32;
    assert!(n <= MAX_N, "make_qkx2_quants on {n} values");
    let (x, weights) = (&x[..n], &weights[..n]);
    let mut levels = [0f32; MAX_N];
    let (mut wl, mut wll, mut wlx, mut err) =
        ([0f32; MAX_N], [0f32; MAX_N], [0f32; MAX_N], [0f32; MAX_N]);
    for is in 0..=nstep {
        let iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
        for (lf, &v) in levels.iter_mut().zip(x) {
            *lf = nearest_int(iscale * (v - min)).clamp(0, nmax) as f32;
        }
        for i in 0..n {
            wl[i] = weights[i] * levels[i];
            wll[i] = wl[i] * levels[i];
            wlx[i] = wl[i] * x[i];
        }
        // Three independent chains in one loop, so that they overlap.
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for i in 0..n {
            sum_l += wl[i];
            sum_l2 += wll[i];
            sum_xl += wlx[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            for i in 0..n {
                let diff = this_scale * levels[i] + this_min - x[i];
                err[i] = weights[i] * if use_mad { diff.abs() } else { diff * diff };
            }
            let mad = err[..n].iter().fold(0f32, |s, &e| s + e);
            if mad < best_error {
                for (li, &lf) in l.iter_mut().zip(&levels) {
                    *li = lf as u8;
                }
                best_error = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// `get_scale_min_k4`: the 6-bit scale and min of sub-block `j` of Q4_K/Q5_K.
#[inline(always)]
pub(super) fn get_scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        (
            (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
            (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
        )
    }
}

// Q2_K: scales[16] (min << 4 | scale), qs[64], d, dmin.
fn q2_k(src: &[f32], dst: &mut [u8]) {
    const Q4SCALE: f32 = 15.0;
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(84)) {
        let mut l = [0u8; QK_K];
        let mut weights = [0f32; 16];
        let mut mins = [0f32; QK_K / 16];
        let mut scales = [0f32; QK_K / 16];

        let mut max_scale = 0f32;
        let mut max_min = 0f32;
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            for i in 0..16 {
                weights[i] = xs[i].abs();
            }
            let (scale, min) = make_qkx2_quants(
                3,
                xs,
                &weights,
                &mut l[16 * j..16 * j + 16],
                -0.5,
                0.1,
                15,
                true,
            );
            scales[j] = scale;
            mins[j] = min;
            if scale > max_scale {
                max_scale = scale;
            }
            if min > max_min {
                max_min = min;
            }
        }

        let (sc, rest) = y.split_at_mut(16);
        let (qs, dd) = rest.split_at_mut(64);
        let d_all = if max_scale > 0.0 {
            let iscale = Q4SCALE / max_scale;
            for j in 0..QK_K / 16 {
                sc[j] = nearest_int(iscale * scales[j]) as u8;
            }
            store_f16(&mut dd[0..2], max_scale / Q4SCALE)
        } else {
            sc.fill(0);
            store_f16(&mut dd[0..2], 0.0)
        };
        let dmin_all = if max_min > 0.0 {
            let iscale = Q4SCALE / max_min;
            for j in 0..QK_K / 16 {
                let lm = nearest_int(iscale * mins[j]);
                sc[j] |= (lm << 4) as u8;
            }
            store_f16(&mut dd[2..4], max_min / Q4SCALE)
        } else {
            store_f16(&mut dd[2..4], 0.0)
        };
        for j in 0..QK_K / 16 {
            let d = d_all * f32::from(sc[j] & 0xF);
            if d == 0.0 {
                continue;
            }
            let dm = dmin_all * f32::from(sc[j] >> 4);
            for ii in 0..16 {
                let li = nearest_int((x[16 * j + ii] + dm) / d);
                l[16 * j + ii] = li.clamp(0, 3) as u8;
            }
        }
        pack_2bit(&l, qs);
    }
}

// Q3_K: hmask[32], qs[64], scales[12] (6-bit, packed), d.
fn q3_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(110)) {
        let mut l = [0i8; QK_K];
        let mut scales = [0f32; QK_K / 16];

        for j in 0..QK_K / 16 {
            scales[j] = make_q3_quants(4, &x[16 * j..16 * j + 16], &mut l[16 * j..16 * j + 16]);
        }
        let max_scale = largest(&scales);

        let (hmask, rest) = y.split_at_mut(32);
        let (qs, rest) = rest.split_at_mut(64);
        let (sc, dd) = rest.split_at_mut(12);
        sc.fill(0);
        let d_all = if max_scale != 0.0 {
            let iscale = -32.0 / max_scale;
            for j in 0..QK_K / 16 {
                let mut ls = nearest_int(iscale * scales[j]) as i8;
                ls = ls.clamp(-32, 31) + 32;
                if j < 8 {
                    sc[j] = (ls & 0xF) as u8;
                } else {
                    sc[j - 8] |= ((ls & 0xF) << 4) as u8;
                }
                ls >>= 4;
                sc[j % 4 + 8] |= (ls << (2 * (j / 4))) as u8;
            }
            store_f16(dd, 1.0 / iscale)
        } else {
            store_f16(dd, 0.0)
        };

        for j in 0..QK_K / 16 {
            let low = if j < 8 { sc[j] & 0xF } else { sc[j - 8] >> 4 };
            let s = i32::from(low | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            let d = d_all * s as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let li = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
                l[16 * j + ii] = (li + 4) as i8;
            }
        }

        // Level bit 2 goes to the high-bit mask, without a branch (it is a coin flip).
        hmask.fill(0);
        let mut lu = [0u8; QK_K];
        for m in 0..QK_K / 32 {
            for i in 0..32 {
                let v = l[32 * m + i] as u8;
                let high = u8::from(v > 3);
                hmask[i] |= high << m;
                lu[32 * m + i] = v - 4 * high;
            }
        }
        pack_2bit(&lu, qs);
    }
}

/// The six-bit scales and mins of Q4_K/Q5_K: sub-block scales and mins from
/// `make_qkx2_quants`, quantized against their maxima; writes d, dmin and scales[12] to
/// `head` and returns the rounded levels in `l`.
fn q45_k_levels(x: &[f32], head: &mut [u8], l: &mut [u8; QK_K], nmax: i32, rmin: f32, nstep: i32) {
    let mut weights = [0f32; 32];
    let mut mins = [0f32; QK_K / 32];
    let mut scales = [0f32; QK_K / 32];

    let mut max_scale = 0f32;
    let mut max_min = 0f32;
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let mut sum_x2 = 0f32;
        for i in 0..32 {
            sum_x2 += xs[i] * xs[i];
        }
        let av_x = (sum_x2 / 32.0).sqrt();
        for i in 0..32 {
            weights[i] = av_x + xs[i].abs();
        }
        let (scale, min) = make_qkx2_quants(
            nmax,
            xs,
            &weights,
            &mut l[32 * j..32 * j + 32],
            rmin,
            0.1,
            nstep,
            false,
        );
        scales[j] = scale;
        mins[j] = min;
        if scale > max_scale {
            max_scale = scale;
        }
        if min > max_min {
            max_min = min;
        }
    }

    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    let (dd, sc) = head.split_at_mut(4);
    for j in 0..QK_K / 32 {
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            sc[j] = ls;
            sc[j + 4] = lm;
        } else {
            sc[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
            sc[j - 4] |= (ls >> 4) << 6;
            sc[j] |= (lm >> 4) << 6;
        }
    }
    let d_all = store_f16(&mut dd[0..2], max_scale / 63.0);
    let dmin_all = store_f16(&mut dd[2..4], max_min / 63.0);

    for j in 0..QK_K / 32 {
        let (s, m) = get_scale_min_k4(j, sc);
        let d = d_all * f32::from(s);
        if d == 0.0 {
            continue;
        }
        let dm = dmin_all * f32::from(m);
        for ii in 0..32 {
            let li = nearest_int((x[32 * j + ii] + dm) / d);
            l[32 * j + ii] = li.clamp(0, nmax) as u8;
        }
    }
}

// Q4_K: d, dmin, scales[12], qs[128].
fn q4_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(144)) {
        let mut l = [0u8; QK_K];
        let (head, qs) = y.split_at_mut(16);
        q45_k_levels(x, head, &mut l, 15, -1.0, 20);
        for (j, q) in (0..QK_K).step_by(64).zip(qs.chunks_exact_mut(32)) {
            for i in 0..32 {
                q[i] = l[j + i] | (l[j + i + 32] << 4);
            }
        }
    }
}

/// Packs Q5_K's 256 levels (0..32) into `rest` (the block after its 16-byte head): the fifth
/// bits into `qh[32]`, two per 64 values, and the low four into the nibbles of `qs[128]`.
pub(super) fn pack_q5_k(l: &[u8; QK_K], rest: &mut [u8]) {
    let (qh, ql) = rest.split_at_mut(32);
    qh.fill(0);
    let mut m1 = 1u8;
    let mut m2 = 2u8;
    for (n, ql) in (0..QK_K).step_by(64).zip(ql.chunks_exact_mut(32)) {
        for j in 0..32 {
            let mut l1 = l[n + j];
            if l1 > 15 {
                l1 -= 16;
                qh[j] |= m1;
            }
            let mut l2 = l[n + j + 32];
            if l2 > 15 {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = l1 | (l2 << 4);
        }
        m1 <<= 2;
        m2 <<= 2;
    }
}

// Q5_K: d, dmin, scales[12], qh[32], qs[128].
fn q5_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(176)) {
        let mut l = [0u8; QK_K];
        let (head, rest) = y.split_at_mut(16);
        q45_k_levels(x, head, &mut l, 31, -0.5, 15);
        pack_q5_k(&l, rest);
    }
}

// Q6_K: ql[128], qh[64], scales[16] (i8), d.
fn q6_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(210)) {
        let mut l = [0u8; QK_K];
        let mut scales = [0f32; QK_K / 16];

        for ib in 0..QK_K / 16 {
            let (xs, ls) = (&x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
            scales[ib] = make_qx_quants(32, xs, ls, None);
        }
        q6_k_finish(x, &scales, &mut l, y);
    }
}

/// The rest of a Q6_K super-block once its sub-block scales are known (with or without an
/// importance matrix): the scales quantized to i8, the levels chosen again, and the packing.
pub(super) fn q6_k_finish(x: &[f32], scales: &[f32; QK_K / 16], l: &mut [u8; QK_K], y: &mut [u8]) {
    let Some(max_scale) = signed_max(scales) else {
        y.fill(0);
        return;
    };

    let (ql, rest) = y.split_at_mut(128);
    let (qh, rest) = rest.split_at_mut(64);
    let (sc, dd) = rest.split_at_mut(16);
    let iscale = -128.0 / max_scale;
    let d_all = store_f16(dd, 1.0 / iscale);
    for ib in 0..QK_K / 16 {
        sc[ib] = nearest_int(iscale * scales[ib]).min(127) as u8;
    }

    for j in 0..QK_K / 16 {
        let d = d_all * f32::from(sc[j] as i8);
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let li = nearest_int(x[16 * j + ii] / d).clamp(-32, 31);
            l[16 * j + ii] = (li + 32) as u8;
        }
    }

    for ((j, ql), qh) in (0..QK_K)
        .step_by(128)
        .zip(ql.chunks_exact_mut(64))
        .zip(qh.chunks_exact_mut(32))
    {
        for i in 0..32 {
            let q1 = l[j + i] & 0xF;
            let q2 = l[j + i + 32] & 0xF;
            let q3 = l[j + i + 64] & 0xF;
            let q4 = l[j + i + 96] & 0xF;
            ql[i] = q1 | (q3 << 4);
            ql[i + 32] = q2 | (q4 << 4);
            qh[i] = (l[j + i] >> 4)
                | ((l[j + i + 32] >> 4) << 2)
                | ((l[j + i + 64] >> 4) << 4)
                | ((l[j + i + 96] >> 4) << 6);
        }
    }
}

// Q8_K: d (f32), qs[256] (i8), bsums[16] (i16).
fn q8_k(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(292)) {
        let max = largest(x);
        let (dd, rest) = y.split_at_mut(4);
        let (qs, bsums) = rest.split_at_mut(QK_K);
        if max == 0.0 {
            // ggml leaves bsums untouched here; they are the sums of the zero quants.
            y.fill(0);
            continue;
        }
        let iscale = -127.0 / max;
        for (q, &v) in qs.iter_mut().zip(x) {
            *q = nearest_int(iscale * v).min(127) as u8;
        }
        for (q, s) in qs.chunks_exact(16).zip(bsums.chunks_exact_mut(2)) {
            let sum: i32 = q.iter().map(|&b| i32::from(b as i8)).sum();
            s.copy_from_slice(&(sum as i16).to_le_bytes());
        }
        dd.copy_from_slice(&(1.0 / iscale).to_le_bytes());
    }
}

/// ggml's `best_index_int8` over `kvalues_iq4nl`: the nearest level (the upper one on ties).
#[inline(always)]
pub(super) fn best_index_int8(x: f32) -> u8 {
    let val = &KVALUES_IQ4NL;
    if x <= f32::from(val[0]) {
        return 0;
    }
    if x >= f32::from(val[15]) {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < f32::from(val[mav]) {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - f32::from(val[mu - 1]) < f32::from(val[mu]) - x {
        (mu - 1) as u8
    } else {
        mu as u8
    }
}

/// The weights of `quantize_row_iq4_nl_impl` without an importance matrix: x².
fn squares(xb: &[f32]) -> [f32; 32] {
    let mut weight = [0f32; 32];
    for j in 0..32 {
        weight[j] = xb[j] * xb[j];
    }
    weight
}

/// The per-32-values part of ggml's `quantize_row_iq4_nl_impl`: the scale of `xb` searched over
/// `2 * ntry + 1` candidates under `weight`, levels in `lb`. `None` (and `lb` untouched) for an
/// all-zero group.
pub(super) fn iq4_group(xb: &[f32], weight: &[f32], lb: &mut [u8], ntry: i32) -> Option<f32> {
    let values = &KVALUES_IQ4NL;
    let max = signed_max(xb)?;
    let v0 = f32::from(values[0]);
    let mut d = if ntry > 0 { -max / v0 } else { max / v0 };
    let mut id = 1.0 / d;
    let mut sumqx = 0f32;
    let mut sumq2 = 0f32;
    for j in 0..32 {
        let al = id * xb[j];
        let l = best_index_int8(al);
        lb[j] = l;
        let q = f32::from(values[usize::from(l)]);
        let w = weight[j];
        sumqx += w * q * xb[j];
        sumq2 += w * q * q;
    }
    d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -ntry..=ntry {
        id = (itry + i32::from(values[0])) as f32 / max;
        sumqx = 0.0;
        sumq2 = 0.0;
        for j in 0..32 {
            let al = id * xb[j];
            let l = best_index_int8(al);
            let q = f32::from(values[usize::from(l)]);
            let w = weight[j];
            sumqx += w * q * xb[j];
            sumq2 += w * q * q;
        }
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    Some(d)
}

/// Packs 32 four-bit levels per 16 bytes: low nibbles the first 16, high nibbles the next 16.
pub(super) fn pack_iq4(l: &[u8], q4: &mut [u8]) {
    for (lb, q) in l.chunks_exact(32).zip(q4.chunks_exact_mut(16)) {
        for j in 0..16 {
            q[j] = lb[j] | (lb[16 + j] << 4);
        }
    }
}

// IQ4_NL: d, qs[16]. `quantize_row_iq4_nl_ref` uses ntry = -1: one candidate scale.
fn iq4_nl(src: &[f32], dst: &mut [u8]) {
    // As in ggml, the levels live across blocks: an all-zero block (d = 0) keeps the levels of
    // the block before it (ggml's are uninitialized before the first block; ours are zeros).
    let mut l = [0u8; 32];
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(18)) {
        let d = iq4_group(x, &squares(x), &mut l, -1).unwrap_or(0.0);
        let (dh, q4) = y.split_at_mut(2);
        store_f16(dh, d);
        pack_iq4(&l, q4);
    }
}

/// IQ4_NL as ggml's `quantize_iq4_nl` quantizes whole rows (what `ggml_quantize_chunk`, and so
/// llama-quantize, writes): 15 candidate scales (ntry = 7), then every level chosen again with
/// the scale kept. The reference `quantize_row_iq4_nl_ref` above tries one.
pub(super) fn iq4_nl_rows(src: &[f32], dst: &mut [u8]) {
    let mut l = [0u8; 32];
    for (x, y) in src.chunks_exact(32).zip(dst.chunks_exact_mut(18)) {
        let d = iq4_group(x, &squares(x), &mut l, 7).unwrap_or(0.0);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for (lj, &xj) in l.iter_mut().zip(x) {
            *lj = best_index_int8(id * xj);
        }
        let (dh, q4) = y.split_at_mut(2);
        store_f16(dh, d);
        pack_iq4(&l, q4);
    }
}

// IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]. ntry = 7.
fn iq4_xs(src: &[f32], dst: &mut [u8]) {
    for (x, y) in src.chunks_exact(QK_K).zip(dst.chunks_exact_mut(136)) {
        iq4_xs_block(x, y, |_, xb| squares(xb));
    }
}

/// One IQ4_XS super-block: `weights(ib, xb)` gives the weights of its 32-value group `ib`.
pub(super) fn iq4_xs_block(x: &[f32], y: &mut [u8], weights: impl Fn(usize, &[f32]) -> [f32; 32]) {
    let mut l = [0u8; QK_K];
    let mut scales = [0f32; QK_K / 32];
    for ib in 0..QK_K / 32 {
        let lb = &mut l[32 * ib..32 * ib + 32];
        let xb = &x[32 * ib..32 * ib + 32];
        scales[ib] = iq4_group(xb, &weights(ib, xb), lb, 7).unwrap_or(0.0);
    }
    let max_scale = largest(&scales);

    let (dh, rest) = y.split_at_mut(2);
    let (sh, rest) = rest.split_at_mut(2);
    let (scales_l, q4) = rest.split_at_mut(4);
    let mut scales_h = 0u16;
    let d = -max_scale / 32.0;
    store_f16(dh, d);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    for ib in 0..QK_K / 32 {
        let mut ls = nearest_int(id * scales[ib]).clamp(-32, 31);
        let dl = d * ls as f32;
        let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
        for j in 0..32 {
            l[32 * ib + j] = best_index_int8(idl * x[32 * ib + j]);
        }
        ls += 32;
        let l_l = (ls & 0xf) as u8;
        let l_h = (ls >> 4) as u16;
        if ib % 2 == 0 {
            scales_l[ib / 2] = l_l;
        } else {
            scales_l[ib / 2] |= l_l << 4;
        }
        scales_h |= l_h << (2 * (ib % 8));
    }
    sh.copy_from_slice(&scales_h.to_le_bytes());
    pack_iq4(&l, q4);
}
