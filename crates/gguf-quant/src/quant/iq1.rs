//! IQ1_S and IQ1_M: ggml's `quantize_row_iq1_s_impl` and `quantize_row_iq1_m_impl` (with
//! their neighbour search `iq1_find_best_neighbour2`), ported statement for statement.
//!
//! Both quantize a super-block of 256 values in blocks (32 values for IQ1_S, 16 for IQ1_M) to
//! the ternary levels {-1, 0, 1} shifted by ±delta. A block's best split of its sorted values
//! into three groups is found exhaustively from prefix sums; each group of 8 levels is then a
//! point of the 2048-point `iq1s_grid`, or is replaced by the best of its neighbours
//! (`tables8(Grid::Iq1S)`). The block scales become 3-bit multiples of one super-block scale.
//!
//! As in imatrix.rs, every float expression keeps ggml's operation order in `f32` with no
//! fused multiply-add (ggml-quants.c lives in `libggml-base`, built without `-march`).
//!
//! ggml's `iq1_find_best_neighbour` (the sumqx/sumq2 variant with its 1.05 fudge factor) is
//! not called anywhere in ggml, so it has no counterpart here.
//!
//! Where ggml aborts we do not panic. ggml asserts that a neighbour was found and that a scale
//! is non-negative. The search fails only when every neighbour's weighted error is NaN or at
//! least `f32::MAX`; ggml then tries the whole grid, comparing with `xval[i]` for grid number
//! `i` (out of the group's bounds, a bug), and aborts if that fails too. Here the first
//! neighbour is kept and a NaN scale flows on, so those bytes are ours alone. Probed against
//! ggml: an infinite importance aborts it; NaN or infinite values, NaN, zero or negative
//! importance and values up to 1e30 give bytes, which ours equal (the tests below).
#![allow(clippy::needless_range_loop)]

use super::iq_grid::{tables8, Grid, GridTables, Lookup};
use super::kquants::{nearest_int, store_f16};
use crate::blocks::{BlockIq1M, BlockIq1S, QK_K};
use crate::grids::{IQ1M_DELTA, IQ1S_DELTA};

/// `GROUP_MAX_EPS_IQ1_S`: a block whose largest magnitude is below it is left at zero.
const GROUP_MAX_EPS_IQ1_S: f32 = 1e-12;
/// `GROUP_MAX_EPS_IQ1_M`.
const GROUP_MAX_EPS_IQ1_M: f32 = 1e-7;

/// C's `MAX(a, b)`: `a > b ? a : b` (so a NaN `b` wins, a NaN `a` loses).
#[inline(always)]
fn c_max(a: f32, b: f32) -> f32 {
    if a > b {
        a
    } else {
        b
    }
}

/// `Σ x²` over a super-block and ggml's `sigma2 = 2 * sumx2 / QK_K`.
fn sigma2(xbl: &[f32]) -> f32 {
    let mut sumx2 = 0f32;
    for &v in xbl {
        sumx2 += v * v;
    }
    2.0 * sumx2 / QK_K as f32
}

/// The largest magnitude of a block, folded with C's `MAX` from `|xb[0]|`.
fn block_max(xb: &[f32]) -> f32 {
    let mut max = xb[0].abs();
    for &v in &xb[1..] {
        max = c_max(max, v.abs());
    }
    max
}

/// The block's values with their positions, sorted by value as ggml's
/// `qsort(pairs, n, 2 * sizeof(float), iq1_sort_helper)` leaves them.
///
/// The comparator looks at the value only, so the order of equal values (and everything once
/// a NaN is compared) is up to the C library. The reference's glibc (2.36) sorts arrays under
/// 1 KiB (ours are 32 or 16 pairs of 8 bytes) with its merge sort `msort_with_tmp` on a stack
/// buffer: split at `n / 2`, sort both halves, merge taking the left element unless the
/// comparator says it is greater. That is reproduced exactly, so ties keep their positions
/// (a stable sort, which the tests rely on: IQ1_M's rows of exact ties change otherwise) and
/// NaN inputs give glibc's permutation too.
fn sort_pairs<const N: usize>(xb: &[f32]) -> [(f32, u8); N] {
    let mut pairs: [(f32, u8); N] = std::array::from_fn(|j| (xb[j], j as u8));
    let mut tmp = [(0f32, 0u8); N];
    msort(&mut pairs, &mut tmp);
    pairs
}

/// glibc's `msort_with_tmp` with `iq1_sort_helper` (`l < r ? -1 : l > r ? 1 : 0`).
fn msort(b: &mut [(f32, u8)], tmp: &mut [(f32, u8)]) {
    let n = b.len();
    if n <= 1 {
        return;
    }
    let n1 = n / 2;
    msort(&mut b[..n1], tmp);
    msort(&mut b[n1..], tmp);
    let (mut i, mut j, mut t) = (0, n1, 0);
    while i < n1 && j < n {
        // `cmp(left, right) <= 0` takes the left one: not greater, NaN included.
        if b[i].0.partial_cmp(&b[j].0) != Some(std::cmp::Ordering::Greater) {
            tmp[t] = b[i];
            i += 1;
        } else {
            tmp[t] = b[j];
            j += 1;
        }
        t += 1;
    }
    // What is left of the right half is already in place.
    while i < n1 {
        tmp[t] = b[i];
        i += 1;
        t += 1;
    }
    b[..t].copy_from_slice(&tmp[..t]);
}

/// ggml's `iq1_find_best_neighbour2`: the neighbour of least `Σ w (scale xg[level] - x)²`
/// (first on ties), its levels written to `levels`. When no error is below `f32::MAX` (NaN or
/// overflowing errors, where ggml aborts) the first neighbour is taken.
fn best_neighbour2(
    grid: &GridTables<8>,
    neighbours: &[u16],
    xval: &[f32],
    weight: &[f32],
    scale: f32,
    xg: &[f32; 3],
    levels: &mut [i8],
) -> u16 {
    let mut best_score = f32::MAX;
    let mut best = neighbours[0];
    for &n in neighbours {
        let pg = &grid.points[usize::from(n)];
        let mut d2 = 0f32;
        for i in 0..8 {
            let q = xg[((pg[i] - 1) / 2) as usize];
            let w = weight[i];
            let diff = scale * q - xval[i];
            d2 += w * diff * diff;
        }
        if d2 < best_score {
            best_score = d2;
            best = n;
        }
    }
    for (l, &q) in levels.iter_mut().zip(&grid.points[usize::from(best)]) {
        *l = (q - 1) / 2;
    }
    best
}

/// Looks up each group of 8 levels of a block (the levels `l`, replaced by the chosen
/// neighbour's where off the grid) and returns whether all were grid points. `xx(k)` is the
/// shifted level set of group `k`.
fn grid_indices(
    grid: &GridTables<8>,
    xb: &[f32],
    weight: &[f32],
    scale: f32,
    xx: impl Fn(usize) -> &'static [f32; 3],
    l: &mut [i8],
    index: &mut [u16],
) -> bool {
    let mut all_on_grid = true;
    for k in 0..index.len() {
        let mut u = 0usize;
        for j in 0..8 {
            u |= (l[8 * k + j] as usize) << (2 * j);
        }
        index[k] = match grid.lookup(u) {
            Lookup::OnGrid(i) => i as u16,
            Lookup::Neighbours(neighbours) => {
                all_on_grid = false;
                best_neighbour2(
                    grid,
                    neighbours,
                    &xb[8 * k..8 * k + 8],
                    &weight[8 * k..8 * k + 8],
                    scale,
                    xx(k),
                    &mut l[8 * k..8 * k + 8],
                )
            }
        };
    }
    all_on_grid
}

/// The least-squares scale of the chosen grid points, when the search moved some group off
/// its levels: `Σ w q x / Σ w q²` if both sums are positive, else `scale` unchanged.
fn refit_scale(
    grid: &GridTables<8>,
    xb: &[f32],
    weight: &[f32],
    xx: impl Fn(usize) -> &'static [f32; 3],
    index: &[u16],
    scale: f32,
) -> f32 {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for k in 0..index.len() {
        let pg = &grid.points[usize::from(index[k])];
        let xg = xx(k);
        for j in 0..8 {
            let w = weight[8 * k + j];
            let q = xg[((pg[j] - 1) / 2) as usize];
            sumqx += w * q * xb[8 * k + j];
            sumq2 += w * q * q;
        }
    }
    if sumqx > 0.0 && sumq2 > 0.0 {
        sumqx / sumq2
    } else {
        scale
    }
}

/// Sets the levels of a block from its split of the sorted values: the first `i1` sorted
/// values 0, up to `i2` 1, the rest 2.
fn split_levels(pairs: &[(f32, u8)], i1: usize, i2: usize, l: &mut [i8]) {
    for (j, &(_, i)) in pairs.iter().enumerate() {
        l[usize::from(i)] = if j < i1 {
            0
        } else if j < i2 {
            1
        } else {
            2
        };
    }
}

static IQ1S_P: [f32; 3] = [-1.0 + IQ1S_DELTA, IQ1S_DELTA, 1.0 + IQ1S_DELTA];
static IQ1S_M: [f32; 3] = [-1.0 - IQ1S_DELTA, -IQ1S_DELTA, 1.0 - IQ1S_DELTA];
static IQ1M_P: [f32; 3] = [-1.0 + IQ1M_DELTA, IQ1M_DELTA, 1.0 + IQ1M_DELTA];
static IQ1M_M: [f32; 3] = [-1.0 - IQ1M_DELTA, -IQ1M_DELTA, 1.0 - IQ1M_DELTA];

/// IQ1_S with an importance matrix (`quantize_row_iq1_s_impl`): `d` (f16), `qs[32]` (low 8
/// bits of the 32 grid indices), `qh[8]` (u16 per block of 32: the high 3 bits of its four
/// indices, its 3-bit scale at bit 12 and the delta's sign at bit 15).
pub(super) fn iq1_s(x: &[f32], quant_weights: &[f32], y: &mut [u8]) {
    const BS: usize = 32;
    let grid = tables8(Grid::Iq1S);
    let (x_p, x_m) = (&IQ1S_P, &IQ1S_M);
    let mut scales = [0f32; QK_K / BS];
    let mut shifts = [0i8; QK_K / BS];
    let mut weight = [0f32; BS];
    let mut sumx = [0f32; BS + 1];
    let mut sumw = [0f32; BS + 1];
    let mut l = [0i8; BS];
    let mut index = [0u16; BS / 8];
    for ((xbl, qwbl), y) in x
        .chunks_exact(QK_K)
        .zip(quant_weights.chunks_exact(QK_K))
        .zip(y.chunks_exact_mut(size_of::<BlockIq1S>()))
    {
        y.fill(0);
        let mut max_scale = 0f32;
        let sigma2 = sigma2(xbl);
        for ib in 0..QK_K / BS {
            let xb = &xbl[BS * ib..BS * ib + BS];
            let qw = &qwbl[BS * ib..BS * ib + BS];
            for i in 0..BS {
                weight[i] = qw[i] * (sigma2 + xb[i] * xb[i]).sqrt();
            }
            let max = block_max(xb);
            if max < GROUP_MAX_EPS_IQ1_S {
                scales[ib] = 0.0;
                shifts[ib] = 1;
                continue;
            }
            let pairs = sort_pairs::<BS>(xb);
            sumx[0] = 0.0;
            sumw[0] = 0.0;
            for (j, &(_, i)) in pairs.iter().enumerate() {
                let i = usize::from(i);
                sumx[j + 1] = sumx[j] + weight[i] * xb[i];
                sumw[j + 1] = sumw[j] + weight[i];
            }
            let mut best_score = -f32::MAX;
            let mut scale = max;
            let (mut besti1, mut besti2, mut best_shift) = (usize::MAX, usize::MAX, 0i8);
            // Per `i1`, the candidates' sums for every `i2` first (independent, so they
            // vectorize; each is the same f32 expression as ggml's), then ggml's scan over
            // them in its order (`i2` ascending, `x_p` before `x_m`).
            let (mut qxp, mut q2p, mut qxm, mut q2m) = (
                [0f32; BS + 1],
                [0f32; BS + 1],
                [0f32; BS + 1],
                [0f32; BS + 1],
            );
            for i1 in 0..=BS {
                let (a, wa) = (sumx[i1] - sumx[0], sumw[i1] - sumw[0]);
                let (x1, w1, xt, wt) = (sumx[i1], sumw[i1], sumx[BS], sumw[BS]);
                for (((((&sx, &sw), qxp), q2p), qxm), q2m) in sumx[i1..]
                    .iter()
                    .zip(&sumw[i1..])
                    .zip(&mut qxp[i1..])
                    .zip(&mut q2p[i1..])
                    .zip(&mut qxm[i1..])
                    .zip(&mut q2m[i1..])
                {
                    let (b, c) = (sx - x1, xt - sx);
                    let (wb, wc) = (sw - w1, wt - sw);
                    *qxp = a * x_p[0] + b * x_p[1] + c * x_p[2];
                    *q2p = wa * x_p[0] * x_p[0] + wb * x_p[1] * x_p[1] + wc * x_p[2] * x_p[2];
                    *qxm = a * x_m[0] + b * x_m[1] + c * x_m[2];
                    *q2m = wa * x_m[0] * x_m[0] + wb * x_m[1] * x_m[1] + wc * x_m[2] * x_m[2];
                }
                for i2 in i1..=BS {
                    for (shift, sumqx, sumq2) in [(1i8, qxp[i2], q2p[i2]), (-1, qxm[i2], q2m[i2])] {
                        if sumq2 > 0.0 && sumqx * sumqx > best_score * sumq2 {
                            scale = sumqx / sumq2;
                            best_score = scale * sumqx;
                            besti1 = i1;
                            besti2 = i2;
                            best_shift = shift;
                        }
                    }
                }
            }
            if besti1 == usize::MAX || best_shift == 0 {
                scales[ib] = 0.0;
                shifts[ib] = 1;
                continue;
            }
            split_levels(&pairs, besti1, besti2, &mut l);
            if scale < 0.0 {
                for v in l.iter_mut() {
                    *v = 2 - *v;
                }
                scale = -scale;
                best_shift = -best_shift;
            }
            let xx: &'static [f32; 3] = if best_shift == 1 { &IQ1S_P } else { &IQ1S_M };
            let all_on_grid = grid_indices(grid, xb, &weight, scale, |_| xx, &mut l, &mut index);
            if !all_on_grid {
                scale = refit_scale(grid, xb, &weight, |_| xx, &index, scale);
            }
            let mut h = 0u16;
            for k in 0..BS / 8 {
                y[2 + (BS / 8) * ib + k] = index[k] as u8;
                h |= (index[k] >> 8) << (3 * k);
            }
            y[34 + 2 * ib..36 + 2 * ib].copy_from_slice(&h.to_le_bytes());
            scales[ib] = scale;
            shifts[ib] = best_shift;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 15.0;
        store_f16(&mut y[..2], d * 1.125);
        let id = 1.0 / d;
        for ib in 0..QK_K / BS {
            let mut l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7) as u16;
            if shifts[ib] == -1 {
                l |= 8;
            }
            let at = 34 + 2 * ib;
            let h = u16::from_le_bytes([y[at], y[at + 1]]) | (l << 12);
            y[at..at + 2].copy_from_slice(&h.to_le_bytes());
        }
    }
}

/// IQ1_M (`quantize_row_iq1_m_impl`), with an importance matrix or, as ggml allows for this
/// type, without one (`quant_weights` NULL: the weights are `x²`). Block layout: `qs[32]` (low
/// 8 bits of the 32 grid indices), `qh[16]` (per block of 16: the high 3 bits of its two
/// indices in each nibble, bit 3 of a nibble the delta's sign of that group of 8), `scales[8]`
/// (four u16: 3-bit block scales, and the f16 super-block scale in their top nibbles).
pub(super) fn iq1_m(x: &[f32], quant_weights: Option<&[f32]>, y: &mut [u8]) {
    const BS: usize = 16;
    const MASKS: [u8; 4] = [0x00, 0x80, 0x08, 0x88];
    let grid = tables8(Grid::Iq1S);
    let (x_p, x_m) = (&IQ1M_P, &IQ1M_M);
    // The level set of group `k` of a block whose delta signs are `shift` (0: +,+; 1: +,-;
    // 2: -,+; 3: -,-).
    let group_xx = |shift: u8| {
        move |k: usize| -> &'static [f32; 3] {
            let plus = if k == 0 {
                shift < 2
            } else {
                shift.is_multiple_of(2)
            };
            if plus {
                &IQ1M_P
            } else {
                &IQ1M_M
            }
        }
    };
    let mut scales = [0f32; QK_K / BS];
    let mut shifts = [0u8; QK_K / BS];
    let mut weight = [0f32; BS];
    let mut l = [0i8; BS];
    let mut index = [0u16; BS / 8];
    let mut px = [[0f32; BS + 1]; 2];
    let mut pw = [[0f32; BS + 1]; 2];
    for (ibl, (xbl, y)) in x
        .chunks_exact(QK_K)
        .zip(y.chunks_exact_mut(size_of::<BlockIq1M>()))
        .enumerate()
    {
        y.fill(0);
        let mut max_scale = 0f32;
        let sigma2 = sigma2(xbl);
        let block_weights = |ib: usize, weight: &mut [f32; BS]| {
            let xb = &xbl[BS * ib..BS * ib + BS];
            match quant_weights {
                Some(qw) => {
                    let qw = &qw[QK_K * ibl + BS * ib..QK_K * ibl + BS * ib + BS];
                    for i in 0..BS {
                        weight[i] = qw[i] * (sigma2 + xb[i] * xb[i]).sqrt();
                    }
                }
                None => {
                    for i in 0..BS {
                        weight[i] = xb[i] * xb[i];
                    }
                }
            }
        };
        for ib in 0..QK_K / BS {
            let xb = &xbl[BS * ib..BS * ib + BS];
            block_weights(ib, &mut weight);
            let max = block_max(xb);
            if max < GROUP_MAX_EPS_IQ1_M {
                scales[ib] = 0.0;
                shifts[ib] = 0;
                continue;
            }
            let pairs = sort_pairs::<BS>(xb);
            // Prefix sums per half of the block (each half has its own delta sign).
            px[0][0] = 0.0;
            px[1][0] = 0.0;
            pw[0][0] = 0.0;
            pw[1][0] = 0.0;
            for (j, &(_, i)) in pairs.iter().enumerate() {
                let i = usize::from(i);
                let h = usize::from(i >= BS / 2);
                px[h][j + 1] = px[h][j] + weight[i] * xb[i];
                px[1 - h][j + 1] = px[1 - h][j];
                pw[h][j + 1] = pw[h][j] + weight[i];
                pw[1 - h][j + 1] = pw[1 - h][j];
            }
            let txs = [px[0][BS], px[1][BS]];
            let tws = [pw[0][BS], pw[1][BS]];
            let (p2, m2) = (x_p[2], x_m[2]);
            let cp1 = x_p[0] * x_p[0] - x_p[1] * x_p[1];
            let cp2 = x_p[1] * x_p[1] - x_p[2] * x_p[2];
            let cm1 = x_m[0] * x_m[0] - x_m[1] * x_m[1];
            let cm2 = x_m[1] * x_m[1] - x_m[2] * x_m[2];
            let mut best_score = -f32::MAX;
            let mut scale = max;
            let (mut besti1, mut best_k) = (usize::MAX, usize::MAX);
            let mut besti2 = usize::MAX;
            for i1 in 0..=BS {
                for i2 in i1..=BS {
                    let (mut qx_p, mut qx_m, mut q2_p, mut q2_m) =
                        ([0f32; 2], [0f32; 2], [0f32; 2], [0f32; 2]);
                    for h in 0..2 {
                        let sx = px[h][i1] + px[h][i2];
                        qx_p[h] = txs[h] * p2 - sx;
                        qx_m[h] = txs[h] * m2 - sx;
                        q2_p[h] = tws[h] * p2 * p2 + pw[h][i1] * cp1 + pw[h][i2] * cp2;
                        q2_m[h] = tws[h] * m2 * m2 + pw[h][i1] * cm1 + pw[h][i2] * cm2;
                    }
                    let sumqx = [
                        qx_p[0] + qx_p[1],
                        qx_p[0] + qx_m[1],
                        qx_m[0] + qx_p[1],
                        qx_m[0] + qx_m[1],
                    ];
                    let sumq2 = [
                        q2_p[0] + q2_p[1],
                        q2_p[0] + q2_m[1],
                        q2_m[0] + q2_p[1],
                        q2_m[0] + q2_m[1],
                    ];
                    for k in 0..4 {
                        if sumq2[k] > 0.0 && sumqx[k] * sumqx[k] > best_score * sumq2[k] {
                            scale = sumqx[k] / sumq2[k];
                            best_score = scale * sumqx[k];
                            besti1 = i1;
                            besti2 = i2;
                            best_k = k;
                        }
                    }
                }
            }
            if besti1 == usize::MAX {
                scales[ib] = 0.0;
                shifts[ib] = 0;
                continue;
            }
            split_levels(&pairs, besti1, besti2, &mut l);
            let mut best_k = best_k as u8;
            if scale < 0.0 {
                for v in l.iter_mut() {
                    *v = 2 - *v;
                }
                scale = -scale;
                best_k = 3 - best_k;
            }
            let xx = group_xx(best_k);
            let all_on_grid = grid_indices(grid, xb, &weight, scale, xx, &mut l, &mut index);
            if !all_on_grid {
                scale = refit_scale(grid, xb, &weight, xx, &index, scale);
            }
            y[2 * ib] = index[0] as u8;
            y[2 * ib + 1] = index[1] as u8;
            y[32 + ib] = ((index[0] >> 8) | ((index[1] >> 8) << 4)) as u8;
            scales[ib] = scale;
            shifts[ib] = best_k;
            max_scale = c_max(max_scale, scale);
        }
        if max_scale == 0.0 {
            continue;
        }
        let mut sc = [0u16; 4];
        let mut d = max_scale / 15.0;
        let id = 1.0 / d;
        let (mut sumqx, mut sumq2) = (0f32, 0f32);
        for ib in 0..QK_K / BS {
            let l = nearest_int(0.5 * (id * scales[ib] - 1.0)).clamp(0, 7);
            sc[ib / 4] |= (l as u16) << (3 * (ib % 4));
            y[32 + ib] |= MASKS[usize::from(shifts[ib])];
            let xb = &xbl[BS * ib..BS * ib + BS];
            block_weights(ib, &mut weight);
            let xx = group_xx(shifts[ib]);
            let qh = usize::from(y[32 + ib]);
            for k in 0..BS / 8 {
                let g = usize::from(y[2 * ib + k]) + ((qh << (8 - 4 * k)) & 0x700);
                let pg = &grid.points[g];
                let xg = xx(k);
                for j in 0..8 {
                    let w = weight[8 * k + j];
                    let q = xg[((pg[j] - 1) / 2) as usize] * (2 * l + 1) as f32;
                    sumqx += w * q * xb[8 * k + j];
                    sumq2 += w * q * q;
                }
            }
        }
        if sumq2 > 0.0 {
            d = sumqx / sumq2;
        }
        let s = crate::fp::f16_bytes(d * 1.1125);
        let s = u16::from_le_bytes(s);
        sc[0] |= (s & 0x000f) << 12;
        sc[1] |= (s & 0x00f0) << 8;
        sc[2] |= (s & 0x0f00) << 4;
        sc[3] |= s & 0xf000;
        for (i, v) in sc.iter().enumerate() {
            y[48 + 2 * i..50 + 2 * i].copy_from_slice(&v.to_le_bytes());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One super-block of hostile input per case, against what ggml's `ggml_quantize_chunk`
    /// wrote for it (`None`: ggml aborts, on a failed `GGML_ASSERT`; ours must not panic). Made
    /// by a throwaway C program linked against the reference `libggml-base`: the row is
    /// `((37 j) % 101 - 50) / 50`, the importance `1 + j % 5`, then the case's change.
    #[test]
    fn hostile_inputs_match_ggml_or_do_not_panic() {
        let zero_s = Some("00".repeat(50));
        let zero_m = Some("00".repeat(56));
        type Case = (
            &'static str,
            fn(&mut [f32], &mut [f32]),
            Option<String>,
            Option<String>,
        );
        let cases: [Case; 9] = [
            ("NaN value", |x, _| x[37] = f32::NAN, zero_s.clone(), zero_m.clone()),
            ("infinite value", |x, _| x[37] = f32::INFINITY, zero_s.clone(), zero_m.clone()),
            (
                "values x1e13",
                |x, _| x.iter_mut().for_each(|v| *v *= 1e13),
                Some("007cffffffff000000000000000000000000ffffffff000000000000000000000000ff2f0090009000e0ff0f008000e000f0".into()),
                Some("0000ffff0000ffffffff0000ffff0000ffff0000ffff000000000000ffff0000887788777788778877887788888877887d07110800c0597e".into()),
            ),
            ("values x1e19", |x, _| x.iter_mut().for_each(|v| *v *= 1e19), zero_s.clone(), zero_m.clone()),
            ("values x1e30", |x, _| x.iter_mut().for_each(|v| *v *= 1e30), zero_s.clone(), zero_m.clone()),
            (
                "NaN importance",
                |_, w| w[37] = f32::NAN,
                Some("e32a348cc90d00000000fb94949a7722343546c90d0b0d0d2e949494772234353546837a0000b0fdfef6537592fcb6ffdbf6".into()),
                Some("3435c90d000004fbfb94949a7734343546c90d050d0dfb949494773434353546bb52000260ee3ebb23a5aa60ee3eb3bb3feef7fdf7aff72f".into()),
            ),
            ("infinite importance", |_, w| w[37] = f32::INFINITY, None, None),
            ("negative importance", |_, w| w.iter_mut().for_each(|v| *v = -*v), zero_s.clone(), zero_m.clone()),
            ("zero importance", |_, w| w.fill(0.0), zero_s, zero_m),
        ];
        let hex = |b: &[u8]| b.iter().map(|v| format!("{v:02x}")).collect::<String>();
        for (name, change, want_s, want_m) in cases {
            let mut x: Vec<f32> = (0..256)
                .map(|j| ((j * 37) % 101 - 50) as f32 / 50.0)
                .collect();
            let mut w: Vec<f32> = (0..256).map(|j| (1 + j % 5) as f32).collect();
            change(&mut x, &mut w);
            let (mut s, mut m) = ([0u8; 50], [0u8; 56]);
            iq1_s(&x, &w, &mut s);
            iq1_m(&x, Some(&w), &mut m);
            if let Some(want) = want_s {
                assert_eq!(hex(&s), want, "IQ1_S, {name}");
            }
            if let Some(want) = want_m {
                assert_eq!(hex(&m), want, "IQ1_M, {name}");
            }
        }
        // Without an importance matrix (IQ1_M only): zero importance is not read then.
        let x: Vec<f32> = (0..256)
            .map(|j| ((j * 37) % 101 - 50) as f32 / 50.0)
            .collect();
        let mut m = [0u8; 56];
        iq1_m(&x, None, &mut m);
        assert_eq!(
            hex(&m),
            "3435c90d0b0b04fb2e94947777343434c9464545040dfb949494bb34224e35c9bb52a2026a6e3e6bb2a2a260ee3d3f2bbf2fff7ff7bfff2f"
        );
        // Every value NaN or infinite, with NaN and infinite importance: no panic.
        for v in [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN_POSITIVE,
        ] {
            for q in [f32::NAN, f32::INFINITY, 1.0, -1.0, 0.0] {
                let (x, w) = ([v; 256], [q; 256]);
                iq1_s(&x, &w, &mut [0u8; 50]);
                iq1_m(&x, Some(&w), &mut [0u8; 56]);
                iq1_m(&x, None, &mut [0u8; 56]);
            }
        }
    }
}
