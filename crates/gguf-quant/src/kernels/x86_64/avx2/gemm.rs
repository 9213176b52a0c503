//! AVX2 GEMM kernels (the [`GemmFn`](crate::kernels::GemmFn)s of prompt processing) for the
//! legacy 32-element types, in the order llama.cpp computes each output of a batched product on
//! an AVX2 machine:
//! - Q8_0, Q4_0, Q5_0, IQ4_NL: llamafile's tinyBLAS (`tinyBLAS_Q0_AVX`). Per output, one
//!   eight-lane accumulator takes, block after block, `fma(d_w * d_a, lanes, acc)`, where
//!   `d_w * d_a` is the f32 product of the two f16 scales and `lanes` the eight i32 sums of four
//!   consecutive products each (exact); then the eight lanes are summed as [`hsum`] does. The
//!   order depends on neither the tile nor the thread split, so ours can tile as it likes.
//! - Q4_1, Q5_1: llama.cpp has no tinyBLAS for them and runs its one-row `vec_dot` for every
//!   output, so each output here equals the one-row kernel of `legacy` bit for bit: the same
//!   accumulator updates, the min terms `m_w * s_a` summed with FMA beside it, added last.
//!
//! Each kernel computes tiles of [`MR`] weight rows by [`NR`] activation rows: a weight block is
//! unpacked once per tile step and multiplied into every activation row of the tile, and an
//! activation block is loaded once for every weight row. The tiles of one group of weight rows
//! run over the whole batch before the next group, so the group's rows stay in L1.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::common::{hsum, nibbles, ByteDot, Maddubs};
use super::iq::iq4nl_table;
use super::legacy::bit_bytes;
use crate::blocks::{BlockIq4Nl, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::fp::f16_at;
use crate::GgmlType;

/// Weight rows per tile.
pub(in crate::kernels::x86_64) const MR: usize = 4;
/// Activation rows per tile.
const NR: usize = 3;

/// Defines the [`GemmFn`](crate::kernels::GemmFn) `$name` for weights of type `$w` from the
/// tile kernel `$tile`:
/// `unsafe fn $tile<const RM: usize, const RN: usize>(blocks, w, row_bytes, a, act_row, s)
/// -> [[f32; RM]; RN]`, the products of weight rows `w + i * row_bytes` (`i < RM`) with
/// activation rows `a + j * act_row` (`j < RN`), `blocks` blocks each, into `[j][i]`, given
/// their scales `s` (a [`TileScales`]).
///
/// Like `safe_wrapper!`'s wrappers, `$name` is visible inside this folder only and handed out
/// by `kernels()` only after `available()` confirmed the instruction set.
macro_rules! gemm_wrapper {
    ($name:ident, $tile:ident, $w:ident) => {
        pub(super) fn $name(
            n: usize,
            w: &[u8],
            row_bytes: usize,
            a: &[u8],
            act_row: usize,
            out: &mut [&mut [f32]],
        ) {
            const W: GgmlType = GgmlType::$w;
            let blocks = checked_tiles(W, n, w, row_bytes, a, act_row, out);
            let mut scales = Scales::new(W, blocks, a, act_row, out.len());
            for_each_tile::<NR>(out, |r0, b0, rm, rn, out| {
                if b0 == 0 {
                    scales.weight_rows(W, &w[r0 * row_bytes..], row_bytes, rm);
                }
                let s = scales.tile(b0);
                // SAFETY: the CPU has the instruction set (see above); `checked_tiles` asserted
                // that every weight row `< out[0].len()` and activation row `< out.len()` holds
                // `blocks` blocks, and the tile's rows `r0..r0 + rm`, `b0..b0 + rn` are among
                // them (`for_each_tile`); `s` holds the scales of all of those blocks.
                unsafe {
                    let (w, a) = (w.as_ptr().add(r0 * row_bytes), a.as_ptr().add(b0 * act_row));
                    tile_shapes!(
                        $tile,
                        rm,
                        rn,
                        out,
                        r0,
                        b0,
                        (blocks, w, row_bytes, a, act_row, s)
                    )
                }
            });
        }
    };
}

pub(in crate::kernels::x86_64) use gemm_wrapper;

/// The f32 scales (and minimums) of a product's blocks, converted once: those of the activation
/// rows for the whole product, those of the current group of weight rows for its tiles.
pub(in crate::kernels::x86_64) struct Scales {
    blocks: usize,
    /// `d` of activation row `b`, block `l`, at `b * blocks + l`.
    act_d: Vec<f32>,
    /// Q8_1's `s` (`d * Σq`), likewise; empty for Q8_0.
    act_s: Vec<f32>,
    /// Per block, `d` of the group's weight rows in lanes `0..rm` (the others 0).
    w_d: Vec<[f32; 4]>,
    /// Per block, the group's `m` likewise; empty for the types without a minimum.
    w_m: Vec<[f32; 4]>,
}

/// The scales a tile reads: its weight rows' (lane `i` of block `l` at `w_d[l]`) and its
/// activation rows' (row `j`, block `l` at `act_d[j * stride + l]`).
#[derive(Clone, Copy)]
pub(in crate::kernels::x86_64) struct TileScales<'s> {
    w_d: &'s [[f32; 4]],
    w_m: &'s [[f32; 4]],
    act_d: &'s [f32],
    act_s: &'s [f32],
    stride: usize,
}

impl Scales {
    /// The activation scales of `batch` rows of `blocks` blocks (`act_row` bytes apart) for
    /// weights of type `ty`.
    pub(in crate::kernels::x86_64) fn new(
        ty: GgmlType,
        blocks: usize,
        a: &[u8],
        act_row: usize,
        batch: usize,
    ) -> Self {
        let act = crate::kernels::vec_dot_type(ty);
        let size = act.type_size() as usize;
        let field = |at: usize| -> Vec<f32> {
            (0..batch * blocks)
                .map(|k| {
                    let p = (k / blocks) * act_row + (k % blocks) * size + at;
                    f16_at(&a[p..p + 2])
                })
                .collect()
        };
        let with_s = act == GgmlType::Q8_1;
        const _: () = assert!(offset_of!(BlockQ8_0, d) == 0 && offset_of!(BlockQ8_1, d) == 0);
        Scales {
            blocks,
            act_d: field(0),
            act_s: if with_s {
                field(offset_of!(BlockQ8_1, s))
            } else {
                Vec::new()
            },
            w_d: Vec::with_capacity(blocks),
            w_m: Vec::with_capacity(if with_s { blocks } else { 0 }),
        }
    }

    /// Converts the scales of `rm <= 4` weight rows of type `ty` (`row_bytes` apart from the
    /// start of `w`), the group the next tiles compute.
    pub(in crate::kernels::x86_64) fn weight_rows(
        &mut self,
        ty: GgmlType,
        w: &[u8],
        row_bytes: usize,
        rm: usize,
    ) {
        let size = ty.type_size() as usize;
        const _: () = assert!(offset_of!(BlockQ4_1, m) == 2 && offset_of!(BlockQ5_1, m) == 2);
        fill_lanes(&mut self.w_d, w, row_bytes, rm, size, self.blocks, 0);
        if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
            fill_lanes(&mut self.w_m, w, row_bytes, rm, size, self.blocks, 2);
        }
    }

    /// The scales of the tiles of the current weight group whose activation rows start at
    /// `b0`.
    pub(in crate::kernels::x86_64) fn tile(&self, b0: usize) -> TileScales<'_> {
        let from = b0 * self.blocks;
        TileScales {
            w_d: &self.w_d,
            w_m: &self.w_m,
            act_d: &self.act_d[from..],
            act_s: self.act_s.get(from..).unwrap_or(&[]),
            stride: self.blocks,
        }
    }
}

/// Per block `l`, the f16 at byte `at` of block `l` of each of the `rm` rows (`row_bytes`
/// apart) of `w`, as f32 in lanes `0..rm` of `out[l]` (the other lanes 0). A plain loop over
/// each row's blocks: this runs once per group of weight rows, as often as a one-row product
/// reads the same scales, so it must cost no more than those reads.
fn fill_lanes(
    out: &mut Vec<[f32; 4]>,
    w: &[u8],
    row_bytes: usize,
    rm: usize,
    size: usize,
    blocks: usize,
    at: usize,
) {
    out.clear();
    out.resize(blocks, [0.0; 4]);
    for i in 0..rm.min(4) {
        let row = &w[i * row_bytes..][..blocks * size];
        for (lanes, block) in out.iter_mut().zip(row.chunks_exact(size)) {
            lanes[i] = f16_at(&block[at..at + 2]);
        }
    }
}

/// Calls `$tile::<rm, rn>$args` for the run-time shape (`rm <= 4`, `rn <= 6`: `MR` and the
/// `NR` of the module that calls it, this one's or `avx512::gemm`'s) and stores its results
/// into `$out[b0 + j][r0 + i]`.
macro_rules! tile_shapes {
    ($tile:ident, $rm:expr, $rn:expr, $out:expr, $r0:expr, $b0:expr, $args:tt) => {
        match ($rm, $rn) {
            (4, 6) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 6, $args)),
            (3, 6) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 6, $args)),
            (2, 6) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 6, $args)),
            (1, 6) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 6, $args)),
            (4, 5) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 5, $args)),
            (3, 5) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 5, $args)),
            (2, 5) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 5, $args)),
            (1, 5) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 5, $args)),
            (4, 4) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 4, $args)),
            (3, 4) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 4, $args)),
            (2, 4) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 4, $args)),
            (1, 4) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 4, $args)),
            (4, 3) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 3, $args)),
            (3, 3) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 3, $args)),
            (2, 3) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 3, $args)),
            (1, 3) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 3, $args)),
            (4, 2) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 2, $args)),
            (3, 2) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 2, $args)),
            (2, 2) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 2, $args)),
            (1, 2) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 2, $args)),
            (4, 1) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 1, $args)),
            (3, 1) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 1, $args)),
            (2, 1) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 1, $args)),
            (1, 1) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 1, $args)),
            _ => unreachable!("tile {}x{} beyond 4x6", $rm, $rn),
        }
    };
    (@call $tile:ident, $m:literal, $n:literal, ($($arg:expr),*)) => {
        $tile::<$m, $n>($($arg),*)
    };
}
pub(in crate::kernels::x86_64) use tile_shapes;

/// Defines the GEMMs of Q8_0, Q4_0, Q5_0 and Q4_1 for one instruction set: their tiles
/// (`*_tile_with`) compiled with `$features` and `$dot`'s byte products (AVX2's here;
/// AVX-VNNI's in `avxvnni`, with the same integers and so the same outputs).
macro_rules! legacy_gemms {
    ($features:literal, $dot:ty) => {
        legacy_gemms!(@tile $features, $dot, q8_0_tile, q8_0_tile_with);
        legacy_gemms!(@tile $features, $dot, q4_0_tile, q4_0_tile_with);
        legacy_gemms!(@tile $features, $dot, q5_0_tile, q5_0_tile_with);
        legacy_gemms!(@tile $features, $dot, q4_1_tile, q4_1_tile_with);
        gemm_wrapper!(q8_0_gemm, q8_0_tile, Q8_0);
        gemm_wrapper!(q4_0_gemm, q4_0_tile, Q4_0);
        gemm_wrapper!(q5_0_gemm, q5_0_tile, Q5_0);
        gemm_wrapper!(q4_1_gemm, q4_1_tile, Q4_1);
    };
    (@tile $features:literal, $dot:ty, $tile:ident, $with:ident) => {
        /// # Safety
        /// As the generic tile's, on a CPU with these features.
        #[target_feature(enable = $features)]
        unsafe fn $tile<const RM: usize, const RN: usize>(
            blocks: usize,
            w: *const u8,
            row_bytes: usize,
            a: *const u8,
            act_row: usize,
            s: TileScales,
        ) -> [[f32; RM]; RN] {
            // SAFETY: the caller's guarantee.
            unsafe { gemm::$with::<$dot, RM, RN>(blocks, w, row_bytes, a, act_row, s) }
        }
    };
}
pub(in crate::kernels::x86_64) use legacy_gemms;

use super::gemm;
legacy_gemms!("avx2,fma,f16c", Maddubs);
gemm_wrapper!(iq4_nl_gemm, iq4_nl_tile, IQ4_NL);
gemm_wrapper!(q5_1_gemm, q5_1_tile, Q5_1);

/// The blocks per row, after asserting that `w` holds `out[0].len()` weight rows of `n`
/// elements of type `ty` (`row_bytes` apart) and `a` holds `out.len()` activation rows
/// (`act_row` apart), and that every output row is as long as the first.
pub(in crate::kernels::x86_64) fn checked_tiles(
    ty: GgmlType,
    n: usize,
    w: &[u8],
    row_bytes: usize,
    a: &[u8],
    act_row: usize,
    out: &[&mut [f32]],
) -> usize {
    let act = crate::kernels::vec_dot_type(ty);
    let blocks = n / ty.block_size() as usize;
    let (w_used, a_used) = (
        blocks * ty.type_size() as usize,
        blocks * act.type_size() as usize,
    );
    let rows = out.first().map_or(0, |o| o.len());
    assert!(
        row_bytes >= w_used
            && act_row >= a_used
            && out.iter().all(|o| o.len() == rows)
            && (rows == 0 || w.len() >= (rows - 1) * row_bytes + w_used)
            && (out.is_empty() || a.len() >= (out.len() - 1) * act_row + a_used)
    );
    blocks
}

/// Calls `tile(r0, b0, rm, rn, out)` for tiles covering weight rows `0..out[0].len()` and
/// activation rows `0..out.len()`, `MR` x `N` where they fit: each group of `MR` weight rows
/// runs against the whole batch before the next, starting with `b0 == 0`.
#[inline(always)]
pub(in crate::kernels::x86_64) fn for_each_tile<const N: usize>(
    out: &mut [&mut [f32]],
    mut tile: impl FnMut(usize, usize, usize, usize, &mut [&mut [f32]]),
) {
    let (rows, batch) = (out.first().map_or(0, |o| o.len()), out.len());
    for r0 in (0..rows).step_by(MR) {
        for b0 in (0..batch).step_by(N) {
            tile(r0, b0, MR.min(rows - r0), N.min(batch - b0), out);
        }
    }
}

/// Stores a tile's results `y[j][i]` into `out[b0 + j][r0 + i]`.
#[inline(always)]
pub(in crate::kernels::x86_64) fn store<const RM: usize, const RN: usize>(
    out: &mut [&mut [f32]],
    r0: usize,
    b0: usize,
    y: [[f32; RM]; RN],
) {
    for (o, yj) in out[b0..b0 + RN].iter_mut().zip(y) {
        o[r0..r0 + RM].copy_from_slice(&yj);
    }
}

/// The tile of a type whose blocks hold 32 signed values (`unpack(block)`) against Q8_0
/// activations, in tinyBLAS's order (see the module's documentation).
///
/// The byte products go through `maddubs`, which multiplies unsigned by signed bytes: one
/// operand's magnitudes by the other's values with the first one's signs moved onto them. An
/// activation is never -128 (ggml's quantizers round into -127..=127), so with `ABS_ACTS` the
/// activations give the magnitudes (computed once per activation block, and each weight row
/// needs one register); that needs weights in -127..=127 too. Otherwise, for Q8_0's -128, the
/// weights give them, as tinyBLAS does. Either way every product and pair sum (at most
/// 2 * 128 * 127) is exact, so the lanes are the same.
///
/// # Safety
/// Weight rows `w + i * row_bytes` (`i < RM`) hold `blocks` blocks of `w_size` bytes, and
/// activation rows `a + j * act_row` (`j < RN`) `blocks` Q8_0 blocks; `s` holds their scales.
///
/// Generic over the byte products `D` and always inlined into a kernel whose target features
/// include AVX2, FMA, F16C and `D`'s instruction set, which the caller guarantees the CPU has.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn q0_tile<D: ByteDot, const RM: usize, const RN: usize, const ABS_ACTS: bool>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    w_size: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
    unpack: impl Fn(*const u8) -> __m256i,
) -> [[f32; RM]; RN] {
    const A: usize = size_of::<BlockQ8_0>();
    let mut acc = [[_mm256_setzero_ps(); RM]; RN];
    let mut d = [[[0f32; 4]; RN]; CHUNK];
    for l0 in (0..blocks).step_by(CHUNK) {
        let len = CHUNK.min(blocks - l0);
        scale_products(&mut d[..len], s, l0);
        for (l, d) in d[..len].iter().enumerate() {
            let l = l0 + l;
            // SAFETY: block l of weight row i is in bounds (caller).
            let x: [__m256i; RM] =
                std::array::from_fn(|i| unpack(unsafe { w.add(i * row_bytes + l * w_size) }));
            let ax: [__m256i; RM] = std::array::from_fn(|i| {
                // SAFETY: the CPU has AVX2 (caller).
                unsafe { _mm256_sign_epi8(x[i], x[i]) }
            });
            for (j, acc) in acc.iter_mut().enumerate() {
                // SAFETY: block l of activation row j is in bounds (caller); the load is
                // unaligned.
                let y = unsafe {
                    let b = a.add(j * act_row + l * A + offset_of!(BlockQ8_0, qs));
                    _mm256_loadu_si256(b.cast())
                };
                // SAFETY: AVX2, FMA and `D`'s instruction set (caller).
                unsafe {
                    let ay = _mm256_sign_epi8(y, y);
                    for i in 0..RM {
                        let sums = if ABS_ACTS {
                            D::sum4(ay, _mm256_sign_epi8(x[i], y))
                        } else {
                            D::sum4(ax[i], _mm256_sign_epi8(y, x[i]))
                        };
                        let lanes = _mm256_cvtepi32_ps(sums);
                        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d[j][i]), lanes, acc[i]);
                    }
                }
            }
        }
    }
    acc.map(|row| row.map(|v| hsum(v)))
}

/// Blocks per pass of a tile: the scale products of that many blocks are computed ahead. Their
/// buffer is zeroed at each tile's start, so it is kept small (at 32 the zeroing took 6% of a
/// prompt's time on Gemma 3, whose rows are 20 blocks).
pub(in crate::kernels::x86_64) const CHUNK: usize = 8;

/// The scale products `d_w * d_a` of blocks `l0..l0 + d.len()`: `d[l][j][i]` for the tile's
/// weight row `i` and activation row `j`. The tiles broadcast them from memory, which costs a
/// load where a product of broadcast scales would cost an instruction per output.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) fn scale_products<const RN: usize>(
    d: &mut [[[f32; 4]; RN]],
    s: TileScales,
    l0: usize,
) {
    for (l, d) in (l0..).zip(d.iter_mut()) {
        let dw = load4(&s.w_d[l]);
        for (j, d) in d.iter_mut().enumerate() {
            let p = _mm_mul_ps(dw, _mm_set1_ps(s.act_d[j * s.stride + l]));
            // SAFETY: `d` holds four f32; the store is unaligned.
            unsafe { _mm_storeu_ps(d.as_mut_ptr(), p) };
        }
    }
}

/// Four f32 as a vector.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn load4(v: &[f32; 4]) -> __m128 {
    // SAFETY: `v` holds four f32; the load is unaligned.
    unsafe { _mm_loadu_ps(v.as_ptr()) }
}

/// # Safety
/// As [`q0_tile`]'s, for Q8_0 weights.
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q8_0_tile_with<
    D: ByteDot,
    const RM: usize,
    const RN: usize,
>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
) -> [[f32; RM]; RN] {
    // SAFETY: `q0_tile` passes the start of a Q8_0 block in bounds (caller's guarantee).
    let unpack =
        |b: *const u8| unsafe { _mm256_loadu_si256(b.add(offset_of!(BlockQ8_0, qs)).cast()) };
    const W: usize = size_of::<BlockQ8_0>();
    // SAFETY: the caller's guarantee.
    unsafe { q0_tile::<D, RM, RN, false>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}

/// # Safety
/// As [`q0_tile`]'s, for Q4_0 weights.
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q4_0_tile_with<
    D: ByteDot,
    const RM: usize,
    const RN: usize,
>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
) -> [[f32; RM]; RN] {
    // SAFETY: `q0_tile` passes the start of a Q4_0 block in bounds (caller's guarantee).
    let unpack = |b: *const u8| unsafe { unpack_q4_0(b) };
    const W: usize = size_of::<BlockQ4_0>();
    // SAFETY: the caller's guarantee.
    unsafe { q0_tile::<D, RM, RN, true>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}

/// # Safety
/// As [`q0_tile`]'s, for Q5_0 weights.
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q5_0_tile_with<
    D: ByteDot,
    const RM: usize,
    const RN: usize,
>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
) -> [[f32; RM]; RN] {
    // SAFETY: `q0_tile` passes the start of a Q5_0 block in bounds (caller's guarantee).
    let unpack = |b: *const u8| unsafe { unpack_q5_0(b) };
    const W: usize = size_of::<BlockQ5_0>();
    // SAFETY: the caller's guarantee.
    unsafe { q0_tile::<D, RM, RN, true>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}

/// # Safety
/// As [`q0_tile`]'s, for IQ4_NL weights.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn iq4_nl_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
) -> [[f32; RM]; RN] {
    let table = iq4nl_table();
    // SAFETY: `q0_tile` passes the start of an IQ4_NL block in bounds (caller's guarantee).
    let unpack = |b: *const u8| unsafe {
        let q = _mm_loadu_si128(b.add(offset_of!(BlockIq4Nl, qs)).cast());
        _mm256_shuffle_epi8(table, nibbles(q))
    };
    const W: usize = size_of::<BlockIq4Nl>();
    // SAFETY: the caller's guarantee.
    unsafe { q0_tile::<Maddubs, RM, RN, true>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}

/// The tile of a type with a minimum (`d * q + m`, 32 unsigned values `q < 32` from
/// `unpack(block)`) against Q8_1 activations, in the order of the one-row kernels
/// (`legacy::q4_1_q8_1_avx2`): per output, `fma(d_w * d_a, lanes, acc)` block after block and
/// `mins = fma(m_w, s_a, mins)` beside it, then `hsum(acc) + mins`.
///
/// # Safety
/// Weight rows `w + i * row_bytes` (`i < RM`) hold `blocks` blocks of `w_size` bytes, and
/// activation rows `a + j * act_row` (`j < RN`) `blocks` Q8_1 blocks; `s` holds their scales
/// and minimums.
///
/// Generic over the byte products `D`, as [`q0_tile`].
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn q1_tile<D: ByteDot, const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    w_size: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
    unpack: impl Fn(*const u8) -> __m256i,
) -> [[f32; RM]; RN] {
    const A: usize = size_of::<BlockQ8_1>();
    let mut acc = [[_mm256_setzero_ps(); RM]; RN];
    let mins = min_sums::<RN>(blocks, s);
    let mut d = [[[0f32; 4]; RN]; CHUNK];
    for l0 in (0..blocks).step_by(CHUNK) {
        let len = CHUNK.min(blocks - l0);
        scale_products(&mut d[..len], s, l0);
        for (l, d) in d[..len].iter().enumerate() {
            let l = l0 + l;
            // SAFETY: block l of weight row i is in bounds (caller).
            let q: [__m256i; RM] =
                std::array::from_fn(|i| unpack(unsafe { w.add(i * row_bytes + l * w_size) }));
            for (j, acc) in acc.iter_mut().enumerate() {
                // SAFETY: block l of activation row j is in bounds (caller); the load is
                // unaligned.
                let y = unsafe {
                    let b = a.add(j * act_row + l * A + offset_of!(BlockQ8_1, qs));
                    _mm256_loadu_si256(b.cast())
                };
                for i in 0..RM {
                    // q < 32 and |y| <= 127: the pair sums are exact in i16.
                    // SAFETY: AVX2, FMA and `D`'s instruction set (caller).
                    unsafe {
                        let lanes = _mm256_cvtepi32_ps(D::sum4(q[i], y));
                        acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d[j][i]), lanes, acc[i]);
                    }
                }
            }
        }
    }
    with_mins(mins, |j, i| hsum(acc[j][i]))
}

/// Lane `i` of entry `j`: the min terms `m_w · s_a` of a tile's weight row `i` against its
/// activation row `j`, block after block in one fused multiply-add chain per lane, as the
/// one-row kernels sum them. They do not depend on the scaled sums, so they take a pass of
/// their own and a tile's main loop keeps its registers.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) fn min_sums<const RN: usize>(
    blocks: usize,
    s: TileScales,
) -> [__m128; RN] {
    let mut mins = [_mm_setzero_ps(); RN];
    for (l, m) in s.w_m[..blocks].iter().enumerate() {
        let m = load4(m);
        for (j, mins) in mins.iter_mut().enumerate() {
            *mins = _mm_fmadd_ps(m, _mm_set1_ps(s.act_s[j * s.stride + l]), *mins);
        }
    }
    mins
}

/// A tile's outputs with minimums: `sum(j, i) + ` lane `i` of `mins[j]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) fn with_mins<const RM: usize, const RN: usize>(
    mins: [__m128; RN],
    sum: impl Fn(usize, usize) -> f32,
) -> [[f32; RM]; RN] {
    std::array::from_fn(|j| {
        let mut m = [0f32; 4];
        // SAFETY: `m` holds four f32; the store is unaligned.
        unsafe { _mm_storeu_ps(m.as_mut_ptr(), mins[j]) };
        std::array::from_fn(|i| sum(j, i) + m[i])
    })
}

/// # Safety
/// As [`q1_tile`]'s, for Q4_1 weights.
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q4_1_tile_with<
    D: ByteDot,
    const RM: usize,
    const RN: usize,
>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
) -> [[f32; RM]; RN] {
    // SAFETY: `q1_tile` passes the start of a Q4_1 block in bounds (caller's guarantee).
    let unpack =
        |b: *const u8| unsafe { nibbles(_mm_loadu_si128(b.add(offset_of!(BlockQ4_1, qs)).cast())) };
    const W: usize = size_of::<BlockQ4_1>();
    // SAFETY: the caller's guarantee.
    unsafe { q1_tile::<D, RM, RN>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}

/// # Safety
/// As [`q1_tile`]'s, for Q5_1 weights.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_1_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
) -> [[f32; RM]; RN] {
    let fifth = _mm256_set1_epi8(0x10);
    // SAFETY: `q1_tile` passes the start of a Q5_1 block in bounds (caller's guarantee).
    let unpack = |b: *const u8| unsafe {
        let qh = b
            .add(offset_of!(BlockQ5_1, qh))
            .cast::<u32>()
            .read_unaligned()
            .to_le();
        let q = _mm_loadu_si128(b.add(offset_of!(BlockQ5_1, qs)).cast());
        _mm256_or_si256(nibbles(q), _mm256_and_si256(bit_bytes(qh), fifth))
    };
    const W: usize = size_of::<BlockQ5_1>();
    // SAFETY: the caller's guarantee.
    unsafe { q1_tile::<Maddubs, RM, RN>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}

/// The 32 values `q - 8` of the Q4_0 block at `b`, as signed bytes.
///
/// # Safety
/// `b` must point to a whole Q4_0 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn unpack_q4_0(b: *const u8) -> __m256i {
    // SAFETY: the caller's guarantee; the load is unaligned.
    let q = unsafe { _mm_loadu_si128(b.add(offset_of!(BlockQ4_0, qs)).cast()) };
    _mm256_sub_epi8(nibbles(q), _mm256_set1_epi8(8))
}

/// The 32 values `q - 16` of the Q5_0 block at `b`, as signed bytes.
///
/// # Safety
/// `b` must point to a whole Q5_0 block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn unpack_q5_0(b: *const u8) -> __m256i {
    // SAFETY: the caller's guarantee; the loads are unaligned.
    let (qh, q) = unsafe {
        (
            b.add(offset_of!(BlockQ5_0, qh))
                .cast::<u32>()
                .read_unaligned()
                .to_le(),
            _mm_loadu_si128(b.add(offset_of!(BlockQ5_0, qs)).cast()),
        )
    };
    // q - 16: the nibble with the top four bits set where the fifth bit is clear.
    let high = _mm256_set1_epi8(0xF0u8 as i8);
    _mm256_or_si256(nibbles(q), _mm256_andnot_si256(bit_bytes(qh), high))
}
