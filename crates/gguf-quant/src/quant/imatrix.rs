//! Quantizers with an importance matrix: ggml's `quantize_row_<type>_impl` as
//! `ggml_quantize_chunk` calls them when `imatrix != NULL`, ported statement for statement.
//!
//! The importance matrix holds one weight per column; every row of a tensor is quantized with
//! the same weights. Most types weigh value `x` by `qw * sqrt(sigma2 + x²)`, where `sigma2` is
//! a mean square: over the whole row for the legacy quants, over each super-block for the
//! K-quants and IQ4_XS, over each block of 32 for IQ4_NL, and doubled for all but the legacy
//! quants and Q2_K. Q6_K uses the imatrix as it is.
//!
//! As in kquants.rs, every floating-point expression keeps ggml's operation order and `f32`
//! precision. No product is fused: the reference `libggml-base.so` (where ggml-quants.c lives)
//! is built without `-march`, so its baseline x86_64 code has no FMA instructions to contract
//! into, whatever `GGML_NATIVE` does to the CPU backend. C's implicit narrowing of `int` levels
//! to `uint8_t` is reproduced with `as u8`, including for the out-of-range levels
//! `make_qp_quants` can store.
#![allow(clippy::needless_range_loop)]

use super::basic::pack_q5;
use super::kquants::{
    best_index_int8, get_scale_min_k4, iq4_group, iq4_xs_block, make_qx_quants, nearest_int,
    pack_2bit, pack_iq4, pack_q5_k, store_f16, GROUP_MAX_EPS,
};
use crate::blocks::QK_K;
use crate::GgmlType;

/// A row quantizer: `(row, imatrix, out)`, the imatrix as long as the row.
type RowFn = fn(x: &[f32], qw: &[f32], y: &mut [u8]);

/// The row quantizer of `ty` with an importance matrix, if implemented.
pub(super) fn kernel(ty: GgmlType) -> Option<RowFn> {
    use GgmlType::*;
    Some(match ty {
        Q4_0 => q4_0,
        Q4_1 => q4_1,
        Q5_0 => q5_0,
        Q5_1 => q5_1,
        Q2_K => q2_k,
        Q3_K => q3_k,
        Q4_K => q4_k,
        Q5_K => q5_k,
        Q6_K => q6_k,
        IQ4_NL => iq4_nl,
        IQ4_XS => iq4_xs,
        IQ2_XXS => super::iq2::iq2_xxs,
        IQ2_XS => super::iq2::iq2_xs,
        IQ2_S => super::iq2::iq2_s_imatrix,
        IQ3_XXS => super::iq3::iq3_xxs_imatrix,
        IQ3_S => super::iq3::iq3_s_imatrix,
        IQ1_S => super::iq1::iq1_s,
        IQ1_M => |x, qw, y| super::iq1::iq1_m(x, Some(qw), y),
        _ => return None,
    })
}

/// `Σ x²` in ggml's order.
fn sum_squares(x: &[f32]) -> f32 {
    let mut sum = 0f32;
    for &v in x {
        sum += v * v;
    }
    sum
}

/// The weights `qw[l] * sqrtf(sigma2 + x[l]²)` of a group.
fn weights<const N: usize>(x: &[f32], qw: &[f32], sigma2: f32) -> [f32; N] {
    let mut w = [0f32; N];
    for l in 0..N {
        w[l] = qw[l] * (sigma2 + x[l] * x[l]).sqrt();
    }
    w
}

/// `Σ w` in ggml's order.
fn sum(w: &[f32]) -> f32 {
    let mut s = 0f32;
    for &v in w {
        s += v;
    }
    s
}

/// `make_qkx3_quants(n, nmax, x, weights, ...)` with weights, which is `make_qkx2_quants`
/// statement for statement: the two differ only in qkx3 falling back to x² weights without an
/// importance matrix, and in the empty-range test (`max <= min` against `max == min`, the same
/// since `min <= max` always holds and both are false for NaN).
use super::kquants::make_qkx2_quants as make_qkx3_quants;

/// `make_qp_quants(n, nmax, x, L, quant_weights)`: a non-negative scale for non-negative `x`
/// (the sub-block scales or mins of a super-block), tried at 9 candidates and refined by moving
/// single levels. `l` is C's `uint8_t L[]`: a negative level (from a negative `x`) wraps.
pub(super) fn make_qp_quants(nmax: i32, x: &[f32], l: &mut [u8], quant_weights: &[f32]) -> f32 {
    let n = x.len();
    let mut max = 0f32;
    for i in 0..n {
        max = if max > x[i] { max } else { x[i] }; // C's MAX
    }
    if max < GROUP_MAX_EPS {
        l.fill(0);
        return 0.0;
    }
    let mut iscale = nmax as f32 / max;
    for i in 0..n {
        l[i] = nearest_int(iscale * x[i]) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0f32;
    for i in 0..n {
        let diff = x[i] - scale * f32::from(l[i]);
        let w = quant_weights[i];
        best_mse += w * diff * diff;
    }
    for is in -4i32..=4 {
        if is == 0 {
            continue;
        }
        let iscale_is = (0.1 * is as f32 + nmax as f32) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0f32;
        for i in 0..n {
            let li = nearest_int(iscale_is * x[i]).min(nmax);
            let diff = x[i] - scale_is * li as f32;
            let w = quant_weights[i];
            mse += w * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    // The sums use the int levels; `l` keeps them narrowed, and the refinement reads those.
    let mut sumlx = 0f32;
    let mut suml2 = 0f32;
    for i in 0..n {
        let li = nearest_int(iscale * x[i]).min(nmax);
        l[i] = li as u8;
        let w = quant_weights[i];
        let lf = li as f32;
        sumlx += w * x[i] * lf;
        suml2 += w * lf * lf;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = quant_weights[i];
            let li = f32::from(l[i]);
            let mut slx = sumlx - w * x[i] * li;
            let mut sl2 = suml2 - w * li * li;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(x[i] * sl2 / slx).min(nmax);
                if new_l != i32::from(l[i]) {
                    let nf = new_l as f32;
                    slx += w * x[i] * nf;
                    sl2 += w * nf * nf;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as u8;
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
    if suml2 > 0.0 {
        sumlx / suml2
    } else {
        0.0
    }
}

/// `sum_x2 / n_per_row`, the legacy quants' `sigma2` over the whole row.
fn row_sigma2(x: &[f32]) -> f32 {
    sum_squares(x) / x.len() as f32
}

// Q4_0: d, qs[16].
fn q4_0(x: &[f32], qw: &[f32], y: &mut [u8]) {
    let sigma2 = row_sigma2(x);
    for ((xb, qw), y) in x
        .chunks_exact(32)
        .zip(qw.chunks_exact(32))
        .zip(y.chunks_exact_mut(18))
    {
        let weight: [f32; 32] = weights(xb, qw, sigma2);
        let mut l = [0u8; 32];
        let d = make_qx_quants(8, xb, &mut l, Some(&weight));
        store_f16(y, d);
        for j in 0..16 {
            y[2 + j] = l[j] | (l[j + 16] << 4);
        }
    }
}

// Q4_1: d, m, qs[16].
fn q4_1(x: &[f32], qw: &[f32], y: &mut [u8]) {
    let sigma2 = row_sigma2(x);
    for ((xb, qw), y) in x
        .chunks_exact(32)
        .zip(qw.chunks_exact(32))
        .zip(y.chunks_exact_mut(20))
    {
        let weight: [f32; 32] = weights(xb, qw, sigma2);
        let mut l = [0u8; 32];
        let (d, min) = make_qkx3_quants(15, xb, &weight, &mut l, -0.9, 0.05, 36, false);
        store_f16(&mut y[0..2], d);
        store_f16(&mut y[2..4], -min);
        for j in 0..16 {
            y[4 + j] = l[j] | (l[j + 16] << 4);
        }
    }
}

// Q5_0: d, qh (u32), qs[16].
fn q5_0(x: &[f32], qw: &[f32], y: &mut [u8]) {
    let sigma2 = row_sigma2(x);
    for ((xb, qw), y) in x
        .chunks_exact(32)
        .zip(qw.chunks_exact(32))
        .zip(y.chunks_exact_mut(22))
    {
        let weight: [f32; 32] = weights(xb, qw, sigma2);
        let mut l = [0u8; 32];
        let d = make_qx_quants(16, xb, &mut l, Some(&weight));
        store_f16(y, d);
        let (qh, qs) = y[2..].split_at_mut(4);
        pack_q5(&l, qh, qs);
    }
}

// Q5_1: d, m, qh (u32), qs[16].
fn q5_1(x: &[f32], qw: &[f32], y: &mut [u8]) {
    let sigma2 = row_sigma2(x);
    for ((xb, qw), y) in x
        .chunks_exact(32)
        .zip(qw.chunks_exact(32))
        .zip(y.chunks_exact_mut(24))
    {
        let weight: [f32; 32] = weights(xb, qw, sigma2);
        let mut l = [0u8; 32];
        let (d, min) = make_qkx3_quants(31, xb, &weight, &mut l, -0.9, 0.05, 36, false);
        store_f16(&mut y[0..2], d);
        store_f16(&mut y[2..4], -min);
        let (qh, qs) = y[4..].split_at_mut(4);
        pack_q5(&l, qh, qs);
    }
}

// Q2_K: scales[16] (min << 4 | scale), qs[64], d, dmin.
fn q2_k(x: &[f32], qw: &[f32], y: &mut [u8]) {
    for ((x, qw), y) in x
        .chunks_exact(QK_K)
        .zip(qw.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(84))
    {
        let mut l = [0u8; QK_K];
        let mut mins = [0f32; QK_K / 16];
        let mut scales = [0f32; QK_K / 16];
        let mut sw = [0f32; QK_K / 16];
        let sigma2 = sum_squares(x) / QK_K as f32;
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            let weight: [f32; 16] = weights(xs, &qw[16 * j..], sigma2);
            sw[j] = sum(&weight);
            let ls = &mut l[16 * j..16 * j + 16];
            (scales[j], mins[j]) = make_qkx3_quants(3, xs, &weight, ls, -0.9, 0.05, 36, false);
        }
        let (mut ls, mut lm) = ([0u8; QK_K / 16], [0u8; QK_K / 16]);
        let dm = make_qp_quants(15, &scales, &mut ls, &sw);
        let mm = make_qp_quants(15, &mins, &mut lm, &sw);

        let (sc, rest) = y.split_at_mut(16);
        let (qs, dd) = rest.split_at_mut(64);
        let dm = store_f16(&mut dd[0..2], dm);
        let mm = store_f16(&mut dd[2..4], mm);
        for j in 0..QK_K / 16 {
            sc[j] = ls[j] | (lm[j] << 4);
        }
        for j in 0..QK_K / 16 {
            let d = dm * f32::from(sc[j] & 0xF);
            if d == 0.0 {
                continue;
            }
            let m = mm * f32::from(sc[j] >> 4);
            for ii in 0..16 {
                let li = nearest_int((x[16 * j + ii] + m) / d);
                l[16 * j + ii] = li.clamp(0, 3) as u8;
            }
        }
        pack_2bit(&l, qs);
    }
}

// Q3_K: hmask[32], qs[64], scales[12] (6-bit, packed), d.
fn q3_k(x: &[f32], qw: &[f32], y: &mut [u8]) {
    for ((x, qw), y) in x
        .chunks_exact(QK_K)
        .zip(qw.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(110))
    {
        let mut l = [0u8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        let mut sw = [0f32; QK_K / 16];
        let sigma2 = 2.0 * sum_squares(x) / QK_K as f32;
        for j in 0..QK_K / 16 {
            let xs = &x[16 * j..16 * j + 16];
            let weight: [f32; 16] = weights(xs, &qw[16 * j..], sigma2);
            sw[j] = sum(&weight);
            scales[j] = make_qx_quants(4, xs, &mut l[16 * j..16 * j + 16], Some(&weight));
        }

        let (hmask, rest) = y.split_at_mut(32);
        let (qs, rest) = rest.split_at_mut(64);
        let (sc, dd) = rest.split_at_mut(12);
        sc.fill(0);
        let mut ls = [0u8; QK_K / 16];
        let d_block = make_qx_quants(32, &scales, &mut ls, Some(&sw));
        for j in 0..QK_K / 16 {
            let mut lj = ls[j];
            if j < 8 {
                sc[j] = lj & 0xF;
            } else {
                sc[j - 8] |= (lj & 0xF) << 4;
            }
            lj >>= 4;
            sc[j % 4 + 8] |= lj << (2 * (j / 4));
        }
        let d_all = store_f16(dd, d_block);

        for j in 0..QK_K / 16 {
            let low = if j < 8 { sc[j] & 0xF } else { sc[j - 8] >> 4 };
            let s = i32::from(low | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
            let d = d_all * s as f32;
            if d == 0.0 {
                continue;
            }
            for ii in 0..16 {
                let li = nearest_int(x[16 * j + ii] / d).clamp(-4, 3);
                l[16 * j + ii] = (li + 4) as u8;
            }
        }

        hmask.fill(0);
        for j in 0..QK_K {
            if l[j] > 3 {
                hmask[j % 32] |= 1 << (j / 32);
                l[j] -= 4;
            }
        }
        pack_2bit(&l, qs);
    }
}

/// The scales and mins of a Q4_K/Q5_K super-block with an importance matrix: sub-block scales
/// and mins from `make_qkx3_quants`, then quantized to six bits by `make_qp_quants` (weighted by
/// the sub-blocks' total weights). Writes d, dmin and scales[12] to `head` and returns the
/// rounded levels in `l`. Q5_K clamps the six-bit values to 63 (`clamp_63`); Q4_K does not.
fn q45_k_levels(
    x: &[f32],
    qw: &[f32],
    head: &mut [u8],
    l: &mut [u8; QK_K],
    nmax: i32,
    clamp_63: bool,
) {
    let mut mins = [0f32; QK_K / 32];
    let mut scales = [0f32; QK_K / 32];
    let mut sw = [0f32; QK_K / 32];
    let sigma2 = 2.0 * sum_squares(x) / QK_K as f32;
    for j in 0..QK_K / 32 {
        let xs = &x[32 * j..32 * j + 32];
        let weight: [f32; 32] = weights(xs, &qw[32 * j..], sigma2);
        sw[j] = sum(&weight);
        let ls = &mut l[32 * j..32 * j + 32];
        (scales[j], mins[j]) = make_qkx3_quants(nmax, xs, &weight, ls, -0.9, 0.05, 36, false);
    }
    let (mut ls, mut lm) = ([0u8; QK_K / 32], [0u8; QK_K / 32]);
    let d_block = make_qp_quants(63, &scales, &mut ls, &sw);
    let m_block = make_qp_quants(63, &mins, &mut lm, &sw);

    let (dd, sc) = head.split_at_mut(4);
    for j in 0..QK_K / 32 {
        let (mut lsj, mut lmj) = (ls[j], lm[j]);
        if clamp_63 {
            lsj = lsj.min(63);
            lmj = lmj.min(63);
        }
        if j < 4 {
            sc[j] = lsj;
            sc[j + 4] = lmj;
        } else {
            sc[j + 4] = (lsj & 0xF) | ((lmj & 0xF) << 4);
            sc[j - 4] |= (lsj >> 4) << 6;
            sc[j] |= (lmj >> 4) << 6;
        }
    }
    let d_all = store_f16(&mut dd[0..2], d_block);
    let dmin_all = store_f16(&mut dd[2..4], m_block);

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
fn q4_k(x: &[f32], qw: &[f32], y: &mut [u8]) {
    for ((x, qw), y) in x
        .chunks_exact(QK_K)
        .zip(qw.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(144))
    {
        let mut l = [0u8; QK_K];
        let (head, qs) = y.split_at_mut(16);
        q45_k_levels(x, qw, head, &mut l, 15, false);
        for (j, q) in (0..QK_K).step_by(64).zip(qs.chunks_exact_mut(32)) {
            for i in 0..32 {
                q[i] = l[j + i] | (l[j + i + 32] << 4);
            }
        }
    }
}

// Q5_K: d, dmin, scales[12], qh[32], qs[128].
fn q5_k(x: &[f32], qw: &[f32], y: &mut [u8]) {
    for ((x, qw), y) in x
        .chunks_exact(QK_K)
        .zip(qw.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(176))
    {
        let mut l = [0u8; QK_K];
        let (head, rest) = y.split_at_mut(16);
        q45_k_levels(x, qw, head, &mut l, 31, true);
        pack_q5_k(&l, rest);
    }
}

// Q6_K: ql[128], qh[64], scales[16] (i8), d. The imatrix weights the sub-block scale searches
// directly (ggml's `sigma2` weighting is commented out there).
fn q6_k(x: &[f32], qw: &[f32], y: &mut [u8]) {
    for ((x, qw), y) in x
        .chunks_exact(QK_K)
        .zip(qw.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(210))
    {
        let mut l = [0u8; QK_K];
        let mut scales = [0f32; QK_K / 16];
        for ib in 0..QK_K / 16 {
            let (xs, ls) = (&x[16 * ib..16 * ib + 16], &mut l[16 * ib..16 * ib + 16]);
            scales[ib] = make_qx_quants(32, xs, ls, Some(&qw[16 * ib..16 * ib + 16]));
        }
        super::kquants::q6_k_finish(x, &scales, &mut l, y);
    }
}

// IQ4_NL: d, qs[16]; each block of 32 is its own super-block, `sigma2` over its 32 values.
fn iq4_nl(x: &[f32], qw: &[f32], y: &mut [u8]) {
    let mut l = [0u8; 32];
    for ((xb, qw), y) in x
        .chunks_exact(32)
        .zip(qw.chunks_exact(32))
        .zip(y.chunks_exact_mut(18))
    {
        let sigma2 = sum_squares(xb) * (2.0 / 32.0);
        let weight: [f32; 32] = weights(xb, qw, sigma2);
        let d = iq4_group(xb, &weight, &mut l, 7).unwrap_or(0.0);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        for (lj, &xj) in l.iter_mut().zip(xb) {
            *lj = best_index_int8(id * xj);
        }
        let (dh, q4) = y.split_at_mut(2);
        store_f16(dh, d);
        pack_iq4(&l, q4);
    }
}

// IQ4_XS: d, scales_h (u16), scales_l[4], qs[128]; `sigma2` over the super-block.
fn iq4_xs(x: &[f32], qw: &[f32], y: &mut [u8]) {
    for ((x, qw), y) in x
        .chunks_exact(QK_K)
        .zip(qw.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(136))
    {
        let sigma2 = sum_squares(x) * (2.0 / QK_K as f32);
        iq4_xs_block(x, y, |ib, xb| weights(xb, &qw[32 * ib..], sigma2));
    }
}
