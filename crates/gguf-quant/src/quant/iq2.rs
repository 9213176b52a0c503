//! The 2-bit grid i-quants IQ2_XXS, IQ2_XS and IQ2_S: ggml's `quantize_row_iq2_xxs_impl`,
//! `quantize_row_iq2_xs_impl` and `quantize_row_iq2_s_impl`, as `ggml_quantize_chunk` runs them.
//!
//! Every group of 8 values is stored as magnitudes from a grid (levels 0..=2 per value, packed
//! two bits each into an index of [`tables8`]) and signs. IQ2_XXS and IQ2_XS keep 7 sign bits
//! per group and make the eighth implied by an even number of negatives: when the count is odd,
//! the value of least weighted square has its sign flipped. A sub-block (32 values for IQ2_XXS,
//! 16 for the others) searches a handful of scales; levels off the grid are replaced by the
//! best neighbouring grid point. The sub-block scales are finally quantized to 4 bits against
//! the super-block's `d`.
//!
//! As in imatrix.rs, every float operation keeps ggml's order and `f32` precision, and no
//! product is fused (ggml-quants.c is in `libggml-base`, built without FMA). ggml asserts an
//! importance matrix for IQ2_XXS and IQ2_XS; IQ2_S also has a path without one. These
//! quantizers sort nothing: the only sort in ggml's code path is the neighbour lists' in
//! `iq2xs_init_impl`, reproduced in iq_grid.rs.
//!
//! ggml aborts (`GGML_ASSERT`, "Oops: found point not on grid") when a NaN makes the search end
//! without a grid point; only NaN or infinite inputs can do that. Here such groups take the
//! nearest clamped levels' first grid neighbour instead, so hostile values give some blocks and
//! never a panic: every index is built from levels clamped to 0..=2, which the map covers.
#![allow(clippy::needless_range_loop)]

use super::imatrix::make_qp_quants;
use super::iq_grid::{magnitudes8, tables8, Grid, GridTables, Lookup};
use super::kquants::{nearest_int, store_f16, GROUP_MAX_EPS};
use crate::blocks::{BlockIq2S, BlockIq2Xs, BlockIq2Xxs, QK_K};

/// ggml's `kMaxQ`: three levels per value.
const KMAXQ: i32 = 3;
/// ggml's `GROUP_MAX_EPS_IQ2_S`.
const GROUP_MAX_EPS_IQ2_S: f32 = 1e-8;

type Tables = GridTables<8>;

/// C's `MAX(a, b)`: `a > b ? a : b` (so `b` when either is NaN).
#[inline(always)]
fn cmax(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// The level of `x` at inverse scale `id`: `nearest_int(0.5 (id x - 1))` clamped to 0..=2.
#[inline(always)]
fn level(id: f32, x: f32) -> i8 {
    nearest_int(0.5 * (id * x - 1.0)).clamp(0, KMAXQ - 1) as i8
}

/// The grid map index of 8 levels (each clamped to 0..=2, a no-op for the levels ggml packs).
#[inline(always)]
fn pack(l: &[i8]) -> usize {
    let mut u = 0usize;
    for i in 0..8 {
        u |= (l[i].clamp(0, 2) as usize) << (2 * i);
    }
    u
}

/// Rounds 8 values (`xval`) at inverse scale `id` to levels in `l`; when they are off the grid,
/// `l` becomes the neighbour of least `waux`-weighted error at `scale`. Returns whether the
/// rounded levels were on the grid.
#[inline(always)]
fn round_to_grid(
    t: &Tables,
    xval: &[f32],
    waux: &[f32],
    id: f32,
    scale: f32,
    l: &mut [i8],
) -> bool {
    for i in 0..8 {
        l[i] = level(id, xval[i]);
    }
    match t.lookup(pack(l)) {
        Lookup::OnGrid(_) => true,
        Lookup::Neighbours(n) => {
            best_neighbour(t, n, xval, waux, scale, l);
            false
        }
    }
}

/// [`GridTables::best_neighbour`] (ggml's `iq2_find_best_neighbour`), faster and bit for bit
/// the same: each neighbour's error `Σ w (scale q - x)²` adds, in ggml's order from 0, terms
/// `w[i] * diff * diff` that depend only on the position `i` and the level of `q` (three
/// levels), so the 24 possible terms are computed once, each with ggml's operations, and
/// looked up per neighbour. The least error wins, the first on ties, as there.
#[inline(always)]
fn best_neighbour(
    t: &Tables,
    neighbours: &[u16],
    xval: &[f32],
    weight: &[f32],
    scale: f32,
    l: &mut [i8],
) {
    // A fourth, unused level per row keeps every `& 3` index in bounds.
    let mut terms = [[0f32; 4]; 8];
    for i in 0..8 {
        for k in 0..3 {
            let diff = scale * (2 * k + 1) as f32 - xval[i];
            terms[i][k] = weight[i] * diff * diff;
        }
    }
    let mut best_d2 = f32::MAX;
    let mut best = usize::from(neighbours[0]);
    for &j in neighbours {
        let pg = &t.points[usize::from(j)];
        let mut d2 = 0f32;
        for i in 0..8 {
            // Grid positions are 1, 3 or 5; `>> 1` is the level.
            d2 += terms[i][((pg[i] >> 1) & 3) as usize];
        }
        if d2 < best_d2 {
            best_d2 = d2;
            best = usize::from(j);
        }
    }
    for (li, &q) in l.iter_mut().zip(&t.points[best]) {
        *li = (q - 1) / 2;
    }
}

/// The grid point of the final levels. ggml aborts when they are off the grid, which only NaN
/// or infinite values can cause; the first neighbour stands in for it here.
#[inline(always)]
fn grid_index(t: &Tables, l: &[i8]) -> usize {
    match t.lookup(pack(l)) {
        Lookup::OnGrid(i) => i,
        Lookup::Neighbours(n) => usize::from(n[0]),
    }
}

/// `Σ w x q` and `Σ w q²` with `q = 2 l + 1`, in ggml's order.
#[inline(always)]
fn sums(weight: &[f32], xval: &[f32], l: &[i8]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for i in 0..weight.len() {
        let w = weight[i];
        let q = f32::from(2 * l[i] + 1);
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The magnitudes of a group of 8 in `xval` with an even number of negatives: when `xb` has an
/// odd number, the value of least `weight x²` (first on ties) is kept negative. Returns the 7
/// stored sign bits.
#[inline(always)]
fn even_signs(xb: &[f32], weight: &[f32], xval: &mut [f32]) -> u8 {
    let mut s = magnitudes8(xb, xval);
    if s.count_ones() % 2 == 1 {
        let mut imin = 0;
        let mut min = weight[0] * xb[0] * xb[0];
        for i in 1..8 {
            let ax = weight[i] * xb[i] * xb[i];
            if ax < min {
                min = ax;
                imin = i;
            }
        }
        xval[imin] = -xval[imin];
        s ^= 1 << imin;
    }
    s & 127
}

/// `Σ x²` over a super-block, in ggml's order.
fn sum_squares(x: &[f32]) -> f32 {
    let mut sum = 0f32;
    for &v in x {
        sum += v * v;
    }
    sum
}

/// The importance weights `qw * sqrtf(sigma2 + x²)` of a sub-block, and their square roots.
#[inline(always)]
fn weights_with(xb: &[f32], qw: &[f32], sigma2: f32, weight: &mut [f32], waux: &mut [f32]) {
    for i in 0..weight.len() {
        weight[i] = qw[i] * (sigma2 + xb[i] * xb[i]).sqrt();
    }
    for i in 0..weight.len() {
        waux[i] = weight[i].sqrt();
    }
}

/// The 4-bit code of a sub-block scale against the inverse super-block scale `id`.
#[inline(always)]
fn scale_code(id: f32, scale: f32) -> u8 {
    nearest_int(0.5 * (id * scale - 1.0)).clamp(0, 15) as u8
}

/// IQ2_XXS with an importance matrix, one row: blocks of `d` (f16) and `qs` (8 × 2 u32 per
/// block: four grid indices of 8 bits; four 7-bit signs and the 4-bit scale on top).
pub(super) fn iq2_xxs(x: &[f32], qw: &[f32], y: &mut [u8]) {
    let t = tables8(Grid::Iq2Xxs);
    for ((xbl, qwbl), y) in x
        .chunks_exact(QK_K)
        .zip(qw.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(size_of::<BlockIq2Xxs>()))
    {
        iq2_xxs_block(t, xbl, qwbl, y);
    }
}

fn iq2_xxs_block(t: &Tables, xbl: &[f32], qw: &[f32], y: &mut [u8]) {
    let mut scales = [0f32; QK_K / 32];
    let mut weight = [0f32; 32];
    let mut waux = [0f32; 32];
    let mut xval = [0f32; 32];
    let mut l = [0i8; 32];
    let mut laux = [0i8; 32];
    let mut signs = [0u8; 4];
    let mut q2 = [0u32; QK_K / 16];
    let mut max_scale = 0f32;

    let sigma2 = sum_squares(xbl) / QK_K as f32;
    for ib in 0..QK_K / 32 {
        let xb = &xbl[32 * ib..32 * ib + 32];
        weights_with(xb, &qw[32 * ib..], sigma2, &mut weight, &mut waux);
        for k in 0..4 {
            let r = 8 * k..8 * k + 8;
            signs[k] = even_signs(&xb[r.clone()], &weight[r.clone()], &mut xval[r]);
        }
        let mut max = xval[0];
        for i in 1..32 {
            max = cmax(max, xval[i]);
        }
        if max < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            continue;
        }
        let mut lq = [0u8; 32];
        let mut scale = make_qp_quants(KMAXQ + 1, &xval, &mut lq, &weight);
        for i in 0..32 {
            l[i] = lq[i] as i8;
        }
        let eff_max = scale * KMAXQ as f32;
        if eff_max <= 0.0 {
            scales[ib] = 0.0;
            continue;
        }
        let mut best = 0f32;
        for is in -6i32..=6 {
            let id = (5.0 + is as f32 * 0.1) / eff_max;
            let this_scale = 1.0 / id;
            for k in 0..4 {
                let r = 8 * k..8 * k + 8;
                round_to_grid(
                    t,
                    &xval[r.clone()],
                    &waux[r.clone()],
                    id,
                    this_scale,
                    &mut laux[r],
                );
            }
            let (sumqx, sumq2) = sums(&weight, &xval, &laux);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                scale = sumqx / sumq2;
                best = scale * sumqx;
                l = laux;
            }
        }
        if scale > 0.0 {
            let id = 1.0 / scale;
            for k in 0..4 {
                let r = 8 * k..8 * k + 8;
                round_to_grid(t, &xval[r.clone()], &waux[r.clone()], id, scale, &mut l[r]);
            }
            let (sumqx, sumq2) = sums(&weight, &xval, &l);
            if sumq2 > 0.0 {
                scale = sumqx / sumq2;
            }
        }
        if scale < 0.0 {
            // ggml's guard: a negative scale flips every stored sign.
            scale = -scale;
            for s in &mut signs {
                *s = !*s & 127;
            }
        }
        for k in 0..4 {
            let gi = grid_index(t, &l[8 * k..8 * k + 8]) as u32;
            q2[2 * ib] |= gi << (8 * k);
            q2[2 * ib + 1] |= u32::from(signs[k]) << (7 * k);
        }
        scales[ib] = scale;
        max_scale = cmax(max_scale, scale);
    }

    let (dh, qs) = y.split_at_mut(2);
    if max_scale == 0.0 {
        store_f16(dh, 0.0);
        qs.fill(0);
        return;
    }
    let d = max_scale / 31.0;
    store_f16(dh, d);
    let id = 1.0 / d;
    for ib in 0..QK_K / 32 {
        q2[2 * ib + 1] |= u32::from(scale_code(id, scales[ib])) << 28;
    }
    for (o, v) in qs.chunks_exact_mut(4).zip(q2) {
        o.copy_from_slice(&v.to_le_bytes());
    }
}

/// The search IQ2_XS and IQ2_S share for a sub-block of 16: levels in `l` and the scale.
/// `weight`/`waux` are the error weights and their roots, `xval` the magnitudes, `max` their
/// largest (at least the group threshold).
fn search16(
    t: &Tables,
    weight: &[f32; 16],
    waux: &[f32; 16],
    xval: &[f32; 16],
    max: f32,
    l: &mut [i8; 16],
) -> f32 {
    let mut laux = [0i8; 16];
    let mut best = 0f32;
    let mut scale = max / (2 * KMAXQ - 1) as f32;
    let mut on_grid = [true; 2];
    let mut on_grid_aux = [true; 2];
    for is in -9i32..=9 {
        let id = (5.0 + is as f32 * 0.1) / max;
        let this_scale = 1.0 / id;
        for k in 0..2 {
            let r = 8 * k..8 * k + 8;
            on_grid_aux[k] = round_to_grid(
                t,
                &xval[r.clone()],
                &waux[r.clone()],
                id,
                this_scale,
                &mut laux[r],
            );
        }
        let (sumqx, sumq2) = sums(weight, xval, &laux);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            *l = laux;
            on_grid = on_grid_aux;
        }
    }
    if on_grid.contains(&false) && scale > 0.0 {
        let id = 1.0 / scale;
        for k in 0..2 {
            if on_grid[k] {
                continue;
            }
            let r = 8 * k..8 * k + 8;
            round_to_grid(t, &xval[r.clone()], &waux[r.clone()], id, scale, &mut l[r]);
        }
        let (sumqx, sumq2) = sums(weight, xval, l);
        if sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    scale
}

/// IQ2_XS with an importance matrix, one row: blocks of `d` (f16), `qs` (16 × 2 u16: a 9-bit
/// grid index and 7 sign bits) and `scales` (4 bits per 16 values).
pub(super) fn iq2_xs(x: &[f32], qw: &[f32], y: &mut [u8]) {
    let t = tables8(Grid::Iq2Xs);
    for ((xbl, qwbl), y) in x
        .chunks_exact(QK_K)
        .zip(qw.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(size_of::<BlockIq2Xs>()))
    {
        iq2_xs_block(t, xbl, qwbl, y);
    }
}

fn iq2_xs_block(t: &Tables, xbl: &[f32], qw: &[f32], y: &mut [u8]) {
    let mut scales = [0f32; QK_K / 16];
    let mut weight = [0f32; 16];
    let mut waux = [0f32; 16];
    let mut xval = [0f32; 16];
    let mut signs = [0u8; 2];
    let mut q2 = [0u16; QK_K / 8];
    let mut max_scale = 0f32;

    let sigma2 = sum_squares(xbl) / QK_K as f32;
    for ib in 0..QK_K / 16 {
        let xb = &xbl[16 * ib..16 * ib + 16];
        weights_with(xb, &qw[16 * ib..], sigma2, &mut weight, &mut waux);
        for k in 0..2 {
            let r = 8 * k..8 * k + 8;
            signs[k] = even_signs(&xb[r.clone()], &weight[r.clone()], &mut xval[r]);
        }
        let mut max = xval[0];
        for i in 1..16 {
            max = cmax(max, xval[i]);
        }
        let mut l = [0i8; 16];
        if max < GROUP_MAX_EPS {
            scales[ib] = 0.0;
            continue;
        }
        let mut scale = search16(t, &weight, &waux, &xval, max, &mut l);
        if scale < 0.0 {
            scale = -scale;
            for s in &mut signs {
                *s = !*s & 127;
            }
        }
        for k in 0..2 {
            let gi = grid_index(t, &l[8 * k..8 * k + 8]) as u16;
            q2[2 * ib + k] = gi | (u16::from(signs[k]) << 9);
        }
        scales[ib] = scale;
        max_scale = cmax(max_scale, scale);
    }

    let (dh, rest) = y.split_at_mut(2);
    let (qs, sc) = rest.split_at_mut(QK_K / 4);
    sc.fill(0);
    if max_scale == 0.0 {
        store_f16(dh, 0.0);
        qs.fill(0);
        return;
    }
    let d = max_scale / 31.0;
    store_f16(dh, d);
    let id = 1.0 / d;
    for ib in 0..QK_K / 16 {
        sc[ib / 2] |= scale_code(id, scales[ib]) << (4 * (ib % 2));
    }
    for (o, v) in qs.chunks_exact_mut(2).zip(q2) {
        o.copy_from_slice(&v.to_le_bytes());
    }
}

/// IQ2_S with an importance matrix, one row.
pub(super) fn iq2_s_imatrix(x: &[f32], qw: &[f32], y: &mut [u8]) {
    iq2_s(x, Some(qw), y);
}

/// IQ2_S, blocks of `d` (f16), `qs` (32 low bytes of 10-bit grid indices, then 32 bytes of 8
/// signs), `qh` (the indices' high 2 bits) and `scales` (4 bits per 16 values). Without an
/// importance matrix (`qw` `None`) the weights are `sigma2 / 4 + x²`; with one, `qw` covers the
/// rows of `x` and is as long.
pub(super) fn iq2_s(x: &[f32], qw: Option<&[f32]>, y: &mut [u8]) {
    let t = tables8(Grid::Iq2S);
    for (ibl, (xbl, y)) in x
        .chunks_exact(QK_K)
        .zip(y.chunks_exact_mut(size_of::<BlockIq2S>()))
        .enumerate()
    {
        iq2_s_block(t, xbl, qw.map(|w| &w[QK_K * ibl..QK_K * ibl + QK_K]), y);
    }
}

fn iq2_s_block(t: &Tables, xbl: &[f32], qw: Option<&[f32]>, y: &mut [u8]) {
    let mut scales = [0f32; QK_K / 16];
    let mut weight = [0f32; 16];
    let mut waux = [0f32; 16];
    let mut xval = [0f32; 16];
    let mut signs = [0u8; 2];
    let mut max_scale = 0f32;

    y.fill(0);
    let (dh, rest) = y.split_at_mut(2);
    let (qs, rest) = rest.split_at_mut(QK_K / 4);
    let (qh, sc) = rest.split_at_mut(QK_K / 32);

    let sigma2 = 2.0 * sum_squares(xbl) / QK_K as f32;
    for ib in 0..QK_K / 16 {
        let xb = &xbl[16 * ib..16 * ib + 16];
        match qw {
            Some(qw) => weights_with(xb, &qw[16 * ib..], sigma2, &mut weight, &mut waux),
            None => {
                for i in 0..16 {
                    weight[i] = 0.25 * sigma2 + xb[i] * xb[i];
                }
                for i in 0..16 {
                    waux[i] = weight[i].sqrt();
                }
            }
        }
        for k in 0..2 {
            signs[k] = magnitudes8(&xb[8 * k..], &mut xval[8 * k..]);
        }
        let mut max = xval[0];
        for i in 1..16 {
            max = cmax(max, xval[i]);
        }
        let mut l = [0i8; 16];
        if max < GROUP_MAX_EPS_IQ2_S {
            scales[ib] = 0.0;
            continue;
        }
        let mut scale = search16(t, &weight, &waux, &xval, max, &mut l);
        if scale < 0.0 {
            scale = -scale;
            for s in &mut signs {
                *s = !*s;
            }
        }
        for k in 0..2 {
            let gi = grid_index(t, &l[8 * k..8 * k + 8]);
            let i8 = 2 * ib + k;
            qs[i8] = gi as u8;
            qh[i8 / 4] |= ((gi >> 8) as u8) << (2 * (i8 % 4));
            qs[QK_K / 8 + i8] = signs[k];
        }
        scales[ib] = scale;
        max_scale = cmax(max_scale, scale);
    }

    if max_scale == 0.0 {
        return;
    }
    let d = max_scale / 31.0;
    store_f16(dh, d * 0.9875);
    let id = 1.0 / d;
    for ib in 0..QK_K / 16 {
        sc[ib / 2] |= scale_code(id, scales[ib]) << (4 * (ib % 2));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Super-blocks of hostile values, each quantized by the three types with ordinary, zero,
    /// NaN and infinite importance weights (and IQ2_S without any): no panic, whatever ggml
    /// would do (it aborts on NaN).
    #[test]
    fn hostile_values_never_panic() {
        let ordinary: Vec<f32> = (0..QK_K).map(|i| (i as f32 * 0.37).sin()).collect();
        let mut rows: Vec<Vec<f32>> = vec![
            vec![0.0; QK_K],
            vec![-0.0; QK_K],
            vec![f32::NAN; QK_K],
            vec![f32::INFINITY; QK_K],
            vec![f32::NEG_INFINITY; QK_K],
            vec![f32::MAX; QK_K],
            vec![-f32::MAX; QK_K],
            vec![f32::MIN_POSITIVE / 4.0; QK_K],
            vec![1e-9; QK_K],
            (0..QK_K)
                .map(|i| if i % 2 == 0 { 3e38 } else { -3e38 })
                .collect(),
        ];
        for special in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, 1e30, -1e-30] {
            for at in [0, 7, 100] {
                let mut x = ordinary.clone();
                x[at] = special;
                rows.push(x);
            }
        }
        rows.push(ordinary);
        let weights: Vec<Vec<f32>> = [0.0, 1.0, f32::NAN, f32::INFINITY, -1.0, 1e-30]
            .iter()
            .map(|&w| vec![w; QK_K])
            .collect();
        for x in &rows {
            for qw in &weights {
                iq2_xxs(x, qw, &mut [0xAA; 66]);
                iq2_xs(x, qw, &mut [0xAA; 74]);
                iq2_s(x, Some(qw), &mut [0xAA; 82]);
            }
            iq2_s(x, None, &mut [0xAA; 82]);
        }
    }

    /// The tabulated neighbour search picks what ggml's does (`GridTables::best_neighbour`),
    /// on every off-grid index of each grid, at scales and weights that make ties and near-ties.
    #[test]
    fn best_neighbour_equals_the_plain_search() {
        let mut seed = 0x1234_5678_u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed
        };
        for grid in [Grid::Iq2Xxs, Grid::Iq2Xs, Grid::Iq2S] {
            let t = tables8(grid);
            for index in (0..43692).step_by(7) {
                let levels: [i8; 8] = std::array::from_fn(|i| ((index >> (2 * i)) & 3) as i8);
                if levels.iter().any(|&v| v > 2) {
                    continue;
                }
                let Lookup::Neighbours(n) = t.lookup(index) else {
                    continue;
                };
                let r = next();
                let xval: [f32; 8] = std::array::from_fn(|i| match r % 3 {
                    0 => (2 * levels[i] + 1) as f32 * 0.25,
                    1 => (next() % 1000) as f32 * 1e-3,
                    _ => (next() % 7) as f32 * 0.5 - 0.5,
                });
                let weight: [f32; 8] = std::array::from_fn(|_| (next() % 4) as f32 * 0.5);
                let scale = [0.25, 0.1, 0.3333, 7.0][(r / 3 % 4) as usize];
                let (mut a, mut b) = ([0i8; 8], [0i8; 8]);
                let want = t.best_neighbour(n, &xval, &weight, scale, &mut a);
                best_neighbour(t, n, &xval, &weight, scale, &mut b);
                assert_eq!(a, b, "{grid:?} index {index}");
                assert_eq!(pack(&b), pack(&t.points[want].map(|q| (q - 1) / 2)));
            }
        }
    }

    /// The all-zero level index is a point of each grid (so a sub-block whose search never
    /// improves on its starting levels stores grid point 0, as in ggml).
    #[test]
    fn zero_levels_are_on_every_grid() {
        for grid in [Grid::Iq2Xxs, Grid::Iq2Xs, Grid::Iq2S] {
            assert!(
                matches!(tables8(grid).lookup(0), Lookup::OnGrid(0)),
                "{grid:?}"
            );
        }
    }
}
