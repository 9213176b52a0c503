//! IQ3_XXS and IQ3_S: ggml's `quantize_row_iq3_xxs_impl` and `quantize_row_iq3_s_impl`, with an
//! importance matrix or without one (`quant_weights == NULL`, what llama-quantize runs for IQ3_S,
//! IQ3_M and IQ3_XS files made without `--imatrix`), ported statement for statement.
//!
//! Both quantize each block of 32 values as eight groups of 4 magnitudes on a 3-bit grid
//! (`iq3xxs_grid`, 256 points; `iq3s_grid`, 512 points) plus signs. Per block, a scale is searched
//! over 31 (IQ3_XXS) or 19 (IQ3_S) candidates; each candidate rounds every group to levels and,
//! when those levels are not a grid point, replaces them with the best of its nearest grid points
//! (ggml's `iq3_find_best_neighbour`, here [`Search::snap`]). The best candidate is refined once more, and the block
//! scales are finally quantized to 4 bits against the super-block's largest.
//!
//! As in imatrix.rs, every float expression keeps ggml's `f32` operation order and no product is
//! fused (`libggml-base` is built without `-march`). ggml aborts where a block's final scale is
//! NaN (`GGML_ASSERT(scale >= 0)`) or where no neighbour beats `FLT_MAX` (all distances NaN);
//! those need NaN, infinite or huge input (whose squares overflow), and here they go on without a panic: the NaN scale is kept
//! and the first neighbour chosen. Every level is clamped to 0..=7 before it is packed, so every
//! table index stays in bounds whatever the input.
//!
//! Neither quantizer sorts anything; the one `qsort` behind them, `iq3xs_init_impl`'s over
//! (distance, grid index) pairs, compares both fields, a total order (see iq_grid.rs).
#![allow(clippy::needless_range_loop)]

use std::sync::OnceLock;

use super::iq_grid::{magnitudes8, tables4, Grid, GridTables, Lookup};
use super::kquants::{nearest_int, store_f16};
use crate::blocks::{BlockIq3S, BlockIq3Xxs, QK_K};

/// ggml's `GROUP_MAX_EPS_IQ3_XXS`: IQ3_XXS blocks whose largest magnitude is below it are zero.
const GROUP_MAX_EPS_IQ3_XXS: f32 = 1e-8;

/// Largest level + 1 (`kMaxQ`): levels 0..=7 stand for the odd positions 1..=15.
const K_MAX_Q: i32 = 8;

/// IQ3_XXS with an importance matrix (`qw`, as long as the row).
pub(super) fn iq3_xxs_imatrix(x: &[f32], qw: &[f32], y: &mut [u8]) {
    iq3_xxs(x, Some(qw), y);
}

/// IQ3_XXS without an importance matrix (whole super-blocks; rows do not matter).
pub(super) fn iq3_xxs_plain(x: &[f32], y: &mut [u8]) {
    iq3_xxs(x, None, y);
}

/// IQ3_S with an importance matrix (`qw`, as long as the row).
pub(super) fn iq3_s_imatrix(x: &[f32], qw: &[f32], y: &mut [u8]) {
    iq3_s(x, Some(qw), y);
}

/// IQ3_S without an importance matrix (whole super-blocks; rows do not matter).
pub(super) fn iq3_s_plain(x: &[f32], y: &mut [u8]) {
    iq3_s(x, None, y);
}

/// `2 * Σ x² / QK_K` over a super-block, in ggml's order.
fn sigma2(xbl: &[f32]) -> f32 {
    let mut sumx2 = 0f32;
    for &v in xbl {
        sumx2 += v * v;
    }
    2.0 * sumx2 / QK_K as f32
}

/// A block's weights: `qw * sqrt(sigma2 + x²)` with an importance matrix, `x²` without; and
/// their square roots (`waux`, what the neighbour search weighs by).
fn block_weights(xb: &[f32], qw: Option<&[f32]>, sigma2: f32) -> ([f32; 32], [f32; 32]) {
    let mut weight = [0f32; 32];
    match qw {
        Some(qw) => {
            for i in 0..32 {
                weight[i] = qw[i] * (sigma2 + xb[i] * xb[i]).sqrt();
            }
        }
        None => {
            for i in 0..32 {
                weight[i] = xb[i] * xb[i];
            }
        }
    }
    let mut waux = [0f32; 32];
    for i in 0..32 {
        waux[i] = weight[i].sqrt();
    }
    (weight, waux)
}

/// The magnitudes of a block (`xb >= 0` keeps the value, anything else, NaN included, is
/// negated) and the sign bits of each group of 8, bit `i` set for a negated value.
fn magnitudes(xb: &[f32]) -> ([f32; 32], [u8; 4]) {
    let mut xval = [0f32; 32];
    let signs = std::array::from_fn(|k| magnitudes8(&xb[8 * k..], &mut xval[8 * k..]));
    (xval, signs)
}

/// C's `MAX` chain `max = xval[0]; max = max > v ? max : v`.
fn largest(xval: &[f32; 32]) -> f32 {
    let mut max = xval[0];
    for &v in &xval[1..] {
        max = if max > v { max } else { v };
    }
    max
}

/// The level of magnitude `v` at inverse scale `id`: `nearest_int(0.5 (id v - 1))` in 0..=7.
#[inline(always)]
fn level(id: f32, v: f32) -> i8 {
    nearest_int(0.5 * (id * v - 1.0)).clamp(0, K_MAX_Q - 1) as i8
}

/// The packed index of a group's four levels (3 bits each, element 0 lowest).
#[inline(always)]
fn pack(l: &[i8]) -> usize {
    let mut u = 0usize;
    for i in 0..4 {
        u |= (l[i] as usize) << (3 * i);
    }
    u
}

/// Neighbours searched side by side.
const LANES: usize = 8;

/// Up to [`LANES`] neighbours of one off-grid index: their positions `2 l + 1` as `f32`,
/// element-major, and their grid numbers (unused lanes repeat the first neighbour and are never read).
#[derive(Clone, Copy)]
struct Chunk {
    q: [[f32; LANES]; 4],
    id: [u16; LANES],
}

/// `Σ_i w_i (scale q_i - x_i)²` of [`LANES`] points at once, each lane in ggml's order. Kept out
/// of line: inlined, the compiler merges it with the scan for the least distance and computes
/// lane by lane. (Positions stored as `i8` and converted here, a third of the memory, measured
/// slower.)
#[inline(never)]
fn distances(q: &[[f32; LANES]; 4], xval: &[f32], w: &[f32], scale: f32) -> [f32; LANES] {
    let mut d2 = [0f32; LANES];
    for i in 0..4 {
        let (wi, xi, q) = (w[i], xval[i], &q[i]);
        for lane in 0..LANES {
            let diff = scale * q[lane] - xi;
            d2[lane] += wi * diff * diff;
        }
    }
    d2
}

/// A grid's tables with its neighbour lists laid out for [`Search::snap`]: the distance sums
/// of [`LANES`] neighbours run side by side, each in ggml's order, so the result is
/// [`GridTables::best_neighbour`]'s bit for bit (the test `snap_is_best_neighbour` holds it).
struct Search {
    t: &'static GridTables<4>,
    /// Per packed index: its first chunk and neighbour count (0 on the grid).
    at: Vec<(u32, u16)>,
    chunks: Vec<Chunk>,
}

impl Search {
    fn get(grid: Grid) -> &'static Search {
        static SEARCH: [OnceLock<Search>; 2] = [const { OnceLock::new() }; 2];
        let slot = usize::from(grid == Grid::Iq3S);
        SEARCH[slot].get_or_init(|| {
            let t = tables4(grid);
            let mut at = vec![(0u32, 0u16); 4096];
            let mut chunks = Vec::new();
            for (u, a) in at.iter_mut().enumerate() {
                if let Lookup::Neighbours(nb) = t.lookup(u) {
                    *a = (chunks.len() as u32, nb.len() as u16);
                    for part in nb.chunks(LANES) {
                        let mut c = Chunk {
                            q: [[0.0; LANES]; 4],
                            id: [part[0]; LANES],
                        };
                        for (lane, &j) in part.iter().enumerate() {
                            c.id[lane] = j;
                        }
                        for (lane, &j) in c.id.iter().enumerate() {
                            for i in 0..4 {
                                c.q[i][lane] = f32::from(t.points[usize::from(j)][i]);
                            }
                        }
                        chunks.push(c);
                    }
                }
            }
            Search { t, at, chunks }
        })
    }

    /// Moves the levels `l` (packed as `u`) onto the grid: nothing when they are a grid point
    /// (returns true), else the levels of the neighbour with the least `Σ w (scale q - x)²`,
    /// the first of equals (ggml's `iq3_find_best_neighbour`; returns false).
    #[inline(always)]
    fn snap(&self, u: usize, xval: &[f32], w: &[f32], scale: f32, l: &mut [i8]) -> bool {
        let (first, n) = self.at[u];
        if n == 0 {
            return true;
        }
        let (first, n) = (first as usize, usize::from(n));
        let chunks = &self.chunks[first..first + n.div_ceil(LANES)];
        let mut best_d2 = f32::MAX;
        let mut best = chunks[0].id[0];
        for (c, chunk) in chunks.iter().enumerate() {
            let d2 = distances(&chunk.q, xval, w, scale);
            for lane in 0..(n - c * LANES).min(LANES) {
                if d2[lane] < best_d2 {
                    best_d2 = d2[lane];
                    best = chunk.id[lane];
                }
            }
        }
        for (l, &q) in l.iter_mut().zip(&self.t.points[usize::from(best)]) {
            *l = (q - 1) / 2;
        }
        false
    }
}

/// `Σ w x q` and `Σ w q²` with `q = 2 l + 1`, in ggml's order.
fn sums(weight: &[f32; 32], xval: &[f32; 32], l: &[i8; 32]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0f32, 0f32);
    for i in 0..32 {
        let w = weight[i];
        let q = (2 * i32::from(l[i]) + 1) as f32;
        sumqx += w * xval[i] * q;
        sumq2 += w * q * q;
    }
    (sumqx, sumq2)
}

/// The scale search of one block (`max` its largest magnitude, not zero): the candidates
/// `id = (15 + 0.2 is) / max` for `is` in `-steps..=steps`, each group rounded and moved onto
/// the grid, the one with the largest `(Σ w x q)² / Σ w q²` kept (the first on ties); then, when
/// a group of it was off the grid and the scale is positive, every group (`refine_all`, IQ3_S)
/// or every off-grid group (IQ3_XXS) rounded again at the kept scale, and the scale refitted.
/// `on_grid_start` is ggml's initial `is_on_grid` (true for IQ3_XXS, false for IQ3_S): what the
/// refinement sees when no candidate was kept. Returns the scale and the levels.
#[allow(clippy::too_many_arguments)]
fn search(
    st: &Search,
    xval: &[f32; 32],
    weight: &[f32; 32],
    waux: &[f32; 32],
    max: f32,
    steps: i32,
    on_grid_start: bool,
    refine_all: bool,
) -> (f32, [i8; 32]) {
    let mut l = [0i8; 32];
    let mut best = 0f32;
    let mut scale = max / (2 * K_MAX_Q - 1) as f32;
    let mut is_on_grid = [on_grid_start; 8];
    let mut laux = [0i8; 32];
    let mut is_on_grid_aux = [true; 8];
    for is in -steps..=steps {
        let id = ((2 * K_MAX_Q - 1) as f32 + is as f32 * 0.2) / max;
        let this_scale = 1.0 / id;
        for k in 0..8 {
            let g = &mut laux[4 * k..4 * k + 4];
            for i in 0..4 {
                g[i] = level(id, xval[4 * k + i]);
            }
            let r = 4 * k..4 * k + 4;
            is_on_grid_aux[k] = st.snap(pack(g), &xval[r.clone()], &waux[r], this_scale, g);
        }
        let (sumqx, sumq2) = sums(weight, xval, &laux);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            scale = sumqx / sumq2;
            best = scale * sumqx;
            l = laux;
            is_on_grid = is_on_grid_aux;
        }
    }
    if is_on_grid.iter().any(|&g| !g) && scale > 0.0 {
        let id = 1.0 / scale;
        for k in 0..8 {
            if !refine_all && is_on_grid[k] {
                continue;
            }
            let g = &mut l[4 * k..4 * k + 4];
            let mut lv = [0i8; 4];
            for i in 0..4 {
                lv[i] = level(id, xval[4 * k + i]);
            }
            g.copy_from_slice(&lv);
            let r = 4 * k..4 * k + 4;
            st.snap(pack(&lv), &xval[r.clone()], &waux[r], scale, g);
        }
        let (sumqx, sumq2) = sums(weight, xval, &l);
        if sumq2 > 0.0 {
            scale = sumqx / sumq2;
        }
    }
    (scale, l)
}

/// The grid index of a group's levels. They are always a grid point (a grid point's levels or
/// all zero, itself a point of both grids); should that ever fail (ggml aborts), the first
/// neighbour stands in.
fn grid_index(t: &GridTables<4>, l: &[i8]) -> usize {
    match t.lookup(pack(l)) {
        Lookup::OnGrid(i) => i,
        Lookup::Neighbours(nb) => usize::from(nb[0]),
    }
}

/// The 4-bit block scale `nearest_int(0.5 (id s - 1))` in 0..=15.
fn scale_code(id: f32, s: f32) -> u32 {
    nearest_int(0.5 * (id * s - 1.0)).clamp(0, 15) as u32
}

// IQ3_XXS: d, qs[64] (one grid index per group), then per block of 32 a little-endian u32: four
// 7-bit sign patterns (an even number of minus signs; the eighth sign is implied) and the 4-bit
// scale on top.
fn iq3_xxs(x: &[f32], qw: Option<&[f32]>, y: &mut [u8]) {
    let st = Search::get(Grid::Iq3Xxs);
    let t = st.t;
    for (ibl, (xbl, yb)) in x
        .chunks_exact(QK_K)
        .zip(y.chunks_exact_mut(size_of::<BlockIq3Xxs>()))
        .enumerate()
    {
        // `q3`: the 64 grid indices, then the 8 words of signs and scales.
        let mut q3 = [0u8; 64];
        let mut scales_and_signs = [0u32; 8];
        let mut scales = [0f32; QK_K / 32];
        let mut max_scale = 0f32;
        let sigma2 = sigma2(xbl);
        for ib in 0..QK_K / 32 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let qwb = qw.map(|qw| &qw[QK_K * ibl + 32 * ib..QK_K * ibl + 32 * ib + 32]);
            let (weight, waux) = block_weights(xb, qwb, sigma2);
            let (mut xval, mut block_signs) = magnitudes(xb);
            // An odd number of minus signs: the value whose flip costs least, w x², keeps
            // its sign instead (the first of equals).
            for k in 0..4 {
                if block_signs[k].count_ones() % 2 == 1 {
                    let cost = |i: usize| weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
                    let mut imin = 0;
                    let mut min = cost(0);
                    for i in 1..8 {
                        let ax = cost(i);
                        if ax < min {
                            min = ax;
                            imin = i;
                        }
                    }
                    xval[8 * k + imin] = -xval[8 * k + imin];
                    block_signs[k] ^= 1 << imin;
                }
                block_signs[k] &= 127;
            }
            let max = largest(&xval);
            if max < GROUP_MAX_EPS_IQ3_XXS {
                scales[ib] = 0.0;
                continue;
            }
            let (mut scale, l) = search(st, &xval, &weight, &waux, max, 15, true, false);
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s & 127;
                }
            }
            for k in 0..8 {
                q3[8 * ib + k] = grid_index(t, &l[4 * k..4 * k + 4]) as u8;
            }
            scales_and_signs[ib] = u32::from(block_signs[0])
                | (u32::from(block_signs[1]) << 7)
                | (u32::from(block_signs[2]) << 14)
                | (u32::from(block_signs[3]) << 21);
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }

        yb.fill(0);
        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        store_f16(&mut yb[0..2], d * 1.0125);
        let id = 1.0 / d;
        for ib in 0..QK_K / 32 {
            scales_and_signs[ib] |= scale_code(id, scales[ib]) << 28;
        }
        yb[2..66].copy_from_slice(&q3);
        for (o, w) in yb[66..98].chunks_exact_mut(4).zip(scales_and_signs) {
            o.copy_from_slice(&w.to_le_bytes());
        }
    }
}

// IQ3_S: d, qs[64] (low 8 bits of each group's grid index), qh[8] (the ninth bits, one byte per
// block of 32), signs[32] (one byte per group of 8), scales[4] (two 4-bit block scales each).
fn iq3_s(x: &[f32], qw: Option<&[f32]>, y: &mut [u8]) {
    let st = Search::get(Grid::Iq3S);
    let t = st.t;
    for (ibl, (xbl, yb)) in x
        .chunks_exact(QK_K)
        .zip(y.chunks_exact_mut(size_of::<BlockIq3S>()))
        .enumerate()
    {
        yb.fill(0);
        let mut scales = [0f32; QK_K / 32];
        let mut max_scale = 0f32;
        // ggml advances its `qs` and `signs` pointers only past blocks it quantized, not past
        // the all-zero ones it skips: a later block's indices and signs land where the skipped
        // block's would have been, and the tail stays zero. The high bits (`qh`) are placed by
        // block number.
        let (mut qs_at, mut signs_at) = (2usize, 74usize);
        let sigma2 = sigma2(xbl);
        for ib in 0..QK_K / 32 {
            let xb = &xbl[32 * ib..32 * ib + 32];
            let qwb = qw.map(|qw| &qw[QK_K * ibl + 32 * ib..QK_K * ibl + 32 * ib + 32]);
            let (weight, waux) = block_weights(xb, qwb, sigma2);
            let (xval, mut block_signs) = magnitudes(xb);
            let max = largest(&xval);
            if max == 0.0 {
                scales[ib] = 0.0;
                continue;
            }
            let (mut scale, l) = search(st, &xval, &weight, &waux, max, 9, false, true);
            if scale < 0.0 {
                scale = -scale;
                for s in &mut block_signs {
                    *s = !*s;
                }
            }
            for k in 0..8 {
                let g = grid_index(t, &l[4 * k..4 * k + 4]);
                yb[qs_at + k] = g as u8;
                yb[66 + ib] |= ((g >> 8) << k) as u8;
            }
            qs_at += 8;
            yb[signs_at..signs_at + 4].copy_from_slice(&block_signs);
            signs_at += 4;
            scales[ib] = scale;
            max_scale = if max_scale > scale { max_scale } else { scale };
        }

        if max_scale == 0.0 {
            continue;
        }
        let d = max_scale / 31.0;
        store_f16(&mut yb[0..2], d * 1.033);
        let id = 1.0 / d;
        for ib in (0..QK_K / 32).step_by(2) {
            let l1 = scale_code(id, scales[ib]);
            let l2 = scale_code(id, scales[ib + 1]);
            yb[106 + ib / 2] = (l1 | (l2 << 4)) as u8;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// [`Search::snap`] picks what [`GridTables::best_neighbour`] picks, for every off-grid
    /// index of both grids, on ordinary, tied, zero-weight and NaN inputs.
    #[test]
    fn snap_is_best_neighbour() {
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            let r = state.wrapping_mul(0x2545_F491_4F6C_DD1D);
            (r >> 40) as f32 / (1u32 << 23) as f32 - 1.0
        };
        for grid in [Grid::Iq3Xxs, Grid::Iq3S] {
            let st = Search::get(grid);
            for u in 0..4096 {
                let Lookup::Neighbours(nb) = st.t.lookup(u) else {
                    assert!(st.snap(u, &[0.0; 4], &[0.0; 4], 1.0, &mut [0; 4]));
                    continue;
                };
                for case in 0..6 {
                    let mut x: [f32; 4] = std::array::from_fn(|_| 8.0 * (next() + 1.0));
                    let mut w: [f32; 4] = std::array::from_fn(|_| next() + 1.0);
                    let scale = 0.5 + next().abs();
                    match case {
                        1 => w = [0.0; 4],
                        2 => x = x.map(|v| v.round()),
                        3 => x[u % 4] = f32::NAN,
                        4 => w[1] = f32::INFINITY,
                        _ => {}
                    }
                    let (mut a, mut b) = ([0i8; 4], [0i8; 4]);
                    st.t.best_neighbour(nb, &x, &w, scale, &mut a);
                    assert!(!st.snap(u, &x, &w, scale, &mut b));
                    assert_eq!(a, b, "{grid:?} index {u} case {case}");
                }
            }
        }
    }
}
