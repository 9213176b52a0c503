//! The search tables of the grid i-quants (IQ1_S/IQ1_M, IQ2_XXS/XS/S, IQ3_XXS/S): ggml's
//! `iq2xs_init_impl` and `iq3xs_init_impl`, built once per grid on first use.
//!
//! A quantizer rounds each group of 4 or 8 scaled values to levels `l` (2 or 3 bits each) and
//! packs them into an index. When that index is a grid point it is stored as it is; otherwise
//! it is replaced by the best of the grid points nearest to it. [`GridTables::lookup`] answers
//! both questions; each quantizer then picks among the neighbours with ggml's
//! weighted error, in ggml's operation order.
//!
//! ggml builds its grids from compact level codes (`kgrid_2bit_256` ...); the same grids are
//! recovered here from the dequantization tables in `grids.rs`, whose entries are those codes
//! mapped to magnitudes. The neighbour lists equal ggml's: for each index off the grid, every
//! grid point at the `nwant` smallest squared distances, ordered by distance then grid index
//! (ggml's `qsort` with a total order on `(distance, index)`). The test below pins both
//! tables to checksums of ggml's own.

use std::sync::OnceLock;

use crate::grids::{IQ1S_GRID, IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};

/// The grids with search tables, each named after the ggml grid it is built from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Grid {
    /// `iq2xxs_grid` (256 points of 8), for IQ2_XXS.
    Iq2Xxs,
    /// `iq2xs_grid` (512 points of 8), for IQ2_XS.
    Iq2Xs,
    /// `iq2s_grid` (1024 points of 8), for IQ2_S.
    Iq2S,
    /// `iq1s_grid` (2048 points of 8), for IQ1_S and IQ1_M.
    Iq1S,
    /// `iq3xxs_grid` (256 points of 4), for IQ3_XXS.
    Iq3Xxs,
    /// `iq3s_grid` (512 points of 4), for IQ3_S.
    Iq3S,
}

/// One grid's points and search tables.
pub(crate) struct GridTables<const N: usize> {
    /// Each grid point as odd positions `2 l + 1` (ggml's `kgrid_q2xs`/`kgrid_q3xs`).
    pub points: Vec<[i8; N]>,
    /// Per packed level index: the grid point's number, or `-(offset + 1)` of its neighbour
    /// list in `neighbours` (ggml's `kmap_q2xs`).
    map: Vec<i32>,
    /// Neighbour lists, each a count followed by that many grid point numbers.
    neighbours: Vec<u16>,
}

/// What a packed level index is.
pub(crate) enum Lookup<'a> {
    /// A grid point: its number.
    OnGrid(usize),
    /// Off the grid: the numbers of its nearest grid points (never empty).
    Neighbours(&'a [u16]),
}

impl<const N: usize> GridTables<N> {
    /// The grid point or neighbours of `index` (levels packed `BITS` bits each, element 0
    /// lowest). `index` comes from levels the caller clamped, so it is always in the map.
    pub fn lookup(&self, index: usize) -> Lookup<'_> {
        let m = self.map[index];
        if m >= 0 {
            return Lookup::OnGrid(m as usize);
        }
        let at = (-(m + 1)) as usize;
        let n = usize::from(self.neighbours[at]);
        Lookup::Neighbours(&self.neighbours[at + 1..at + 1 + n])
    }

    /// ggml's `iq2_find_best_neighbour` / `iq3_find_best_neighbour`, the reference twin the
    /// tests hold the quantizers' faster searches to: the neighbour with the least weighted
    /// squared error `Σ w (scale q - x)²` (first one on ties), with its levels
    /// `(q - 1) / 2` written to `levels`.
    #[cfg(test)]
    pub fn best_neighbour(
        &self,
        neighbours: &[u16],
        xval: &[f32],
        weight: &[f32],
        scale: f32,
        levels: &mut [i8],
    ) -> usize {
        let mut best_d2 = f32::MAX;
        let mut best = usize::from(neighbours[0]);
        for &j in neighbours {
            let pg = &self.points[usize::from(j)];
            let mut d2 = 0f32;
            for i in 0..N {
                let diff = scale * f32::from(pg[i]) - xval[i];
                d2 += weight[i] * diff * diff;
            }
            if d2 < best_d2 {
                best_d2 = d2;
                best = usize::from(j);
            }
        }
        for (l, &q) in levels.iter_mut().zip(&self.points[best]) {
            *l = (q - 1) / 2;
        }
        best
    }
}

/// The magnitudes of a group of 8 values into `xval` (`v >= 0` keeps the value; anything
/// else, NaN included, is negated, as ggml's `xb[i] >= 0 ? xb[i] : -xb[i]`) and its sign
/// bits, bit `i` set for a negated value.
#[inline(always)]
pub(crate) fn magnitudes8(xb: &[f32], xval: &mut [f32]) -> u8 {
    let mut signs = 0u8;
    for i in 0..8 {
        if xb[i] >= 0.0 {
            xval[i] = xb[i];
        } else {
            xval[i] = -xb[i];
            signs |= 1 << i;
        }
    }
    signs
}

/// The tables of an 8-value grid (IQ1/IQ2), built on first use.
pub(crate) fn tables8(grid: Grid) -> &'static GridTables<8> {
    static TABLES: [OnceLock<GridTables<8>>; 4] = [const { OnceLock::new() }; 4];
    let (slot, nwant) = match grid {
        Grid::Iq2Xxs => (0, 2),
        Grid::Iq2Xs => (1, 2),
        Grid::Iq2S => (2, 1),
        Grid::Iq1S => (3, 3),
        Grid::Iq3Xxs | Grid::Iq3S => unreachable!("4-value grid {grid:?} asked for as 8-value"),
    };
    TABLES[slot].get_or_init(|| {
        let points: Vec<[i8; 8]> = match grid {
            Grid::Iq2Xxs => IQ2XXS_GRID.iter().map(|&g| iq2_points(g)).collect(),
            Grid::Iq2Xs => IQ2XS_GRID.iter().map(|&g| iq2_points(g)).collect(),
            Grid::Iq2S => IQ2S_GRID.iter().map(|&g| iq2_points(g)).collect(),
            _ => IQ1S_GRID.iter().map(|&g| iq1_points(g)).collect(),
        };
        // ggml's `kmap_size`: every index whose eight 2-bit levels are at most 0b10 fits.
        build(points, 2, 43692, nwant)
    })
}

/// The tables of a 4-value grid (IQ3), built on first use.
pub(crate) fn tables4(grid: Grid) -> &'static GridTables<4> {
    static TABLES: [OnceLock<GridTables<4>>; 2] = [const { OnceLock::new() }; 2];
    let (slot, nwant) = match grid {
        Grid::Iq3Xxs => (0, 2),
        Grid::Iq3S => (1, 3),
        _ => unreachable!("8-value grid {grid:?} asked for as 4-value"),
    };
    TABLES[slot].get_or_init(|| {
        let points: Vec<[i8; 4]> = match grid {
            Grid::Iq3Xxs => IQ3XXS_GRID.iter().map(|&g| iq3xxs_points(g)).collect(),
            _ => IQ3S_GRID
                .iter()
                .map(|&g| g.to_le_bytes().map(|b| b as i8))
                .collect(),
        };
        build(points, 3, 4096, nwant)
    })
}

/// An IQ2 grid point's magnitudes {8, 25, 43} as positions {1, 3, 5}.
fn iq2_points(g: u64) -> [i8; 8] {
    g.to_le_bytes().map(|b| match b {
        0x08 => 1,
        0x19 => 3,
        0x2b => 5,
        _ => unreachable!("IQ2 grid magnitude {b:#x}"),
    })
}

/// An IQ1_S grid point's values {-1, 0, 1} as positions {1, 3, 5}.
fn iq1_points(g: u64) -> [i8; 8] {
    g.to_le_bytes().map(|b| 2 * (b as i8 + 1) + 1)
}

/// An IQ3_XXS grid point's magnitudes {4, 12, ..., 52, 62} as positions {1, 3, ..., 15}.
fn iq3xxs_points(g: u32) -> [i8; 4] {
    g.to_le_bytes().map(|b| match b {
        62 => 15,
        _ => (b / 8 * 2 + 1) as i8,
    })
}

/// `iq*xs_init_impl`'s map and neighbour lists for `points`, levels `bits` wide.
fn build<const N: usize>(
    points: Vec<[i8; N]>,
    bits: u32,
    map_size: usize,
    nwant: usize,
) -> GridTables<N> {
    let mask = (1usize << bits) - 1;
    let mut map = vec![-1i32; map_size];
    for (i, p) in points.iter().enumerate() {
        let index = p.iter().enumerate().fold(0usize, |acc, (k, &q)| {
            acc | ((q as usize - 1) / 2) << (bits as usize * k)
        });
        map[index] = i as i32;
    }
    // Squared distances between odd positions of at most 2^bits levels stay small, so the
    // `nwant` smallest distinct distances are found by counting, and listing the points at
    // or below the last of them by distance, then number, is ggml's sorted order.
    let max_d2 = N * (2 * mask) * (2 * mask);
    let mut neighbours = Vec::new();
    let mut d2 = vec![0usize; points.len()];
    let mut seen = vec![false; max_d2 + 1];
    for (index, entry) in map.iter_mut().enumerate() {
        if *entry >= 0 {
            continue;
        }
        let pos: [i8; N] =
            std::array::from_fn(|k| (2 * ((index >> (bits as usize * k)) & mask) + 1) as i8);
        seen.fill(false);
        for (d, p) in d2.iter_mut().zip(&points) {
            *d = (0..N)
                .map(|k| {
                    let diff = i32::from(p[k]) - i32::from(pos[k]);
                    (diff * diff) as usize
                })
                .sum();
            seen[*d] = true;
        }
        let distances: Vec<usize> = (0..=max_d2).filter(|&d| seen[d]).take(nwant).collect();
        *entry = -(neighbours.len() as i32 + 1);
        let count_at = neighbours.len();
        neighbours.push(0);
        for &want in &distances {
            for (j, &d) in d2.iter().enumerate() {
                if d == want {
                    neighbours.push(j as u16);
                }
            }
        }
        neighbours[count_at] = (neighbours.len() - count_at - 1) as u16;
    }
    GridTables {
        points,
        map,
        neighbours,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a over the little-endian bytes of a table.
    fn fnv(bytes: impl IntoIterator<Item = u8>) -> u64 {
        bytes.into_iter().fold(0xcbf29ce484222325, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
        })
    }

    fn digest<const N: usize>(t: &GridTables<N>) -> (usize, u64, u64, u64) {
        (
            t.neighbours.len(),
            fnv(t.points.iter().flatten().map(|&q| q as u8)),
            fnv(t.map.iter().flat_map(|m| m.to_le_bytes())),
            fnv(t.neighbours.iter().flat_map(|n| n.to_le_bytes())),
        )
    }

    /// Lengths and FNV-1a checksums of ggml's `kgrid_q2xs`, `kmap_q2xs` and `kneighbors_q2xs`
    /// (and their IQ3 twins) after `iq2xs_init_impl`/`iq3xs_init_impl`, read from
    /// `libggml-base` of llama.cpp 0c1e57098 by a C program that included `ggml-quants.c`.
    #[test]
    fn tables_equal_ggml() {
        let cases: [(Grid, (usize, u64, u64, u64)); 6] = [
            (
                Grid::Iq2Xxs,
                (
                    417400,
                    0x2e7a6071bba80155,
                    0xc9aaccb2f398af07,
                    0xa75bd9e2420d5d13,
                ),
            ),
            (
                Grid::Iq2Xs,
                (
                    551722,
                    0x7c14724affc4cc7d,
                    0xb38ddb443a8784b1,
                    0xa7d0f454a49b36e7,
                ),
            ),
            (
                Grid::Iq2S,
                (
                    209100,
                    0x785c45bdf95d1b49,
                    0x6197b6f9100d06db,
                    0x663036b82366cac0,
                ),
            ),
            (
                Grid::Iq1S,
                (
                    1375339,
                    0x5f11afdd44abc217,
                    0xd020080b4c7cb7af,
                    0x3582afeead46ff16,
                ),
            ),
            (
                Grid::Iq3Xxs,
                (
                    22825,
                    0xf8b60c7104d88565,
                    0x5afe25277bd41621,
                    0xfea2e545887d7895,
                ),
            ),
            (
                Grid::Iq3S,
                (
                    28317,
                    0xfa37020c25b44829,
                    0x827445d94b656904,
                    0x03e5db6098dd264e,
                ),
            ),
        ];
        for (grid, want) in cases {
            let got = match grid {
                Grid::Iq3Xxs | Grid::Iq3S => digest(tables4(grid)),
                _ => digest(tables8(grid)),
            };
            assert_eq!(got, want, "{grid:?}");
        }
    }
}
