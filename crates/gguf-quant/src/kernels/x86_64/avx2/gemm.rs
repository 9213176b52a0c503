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

use super::common::{f16_splat, hsum, nibbles};
use super::iq::iq4nl_table;
use super::legacy::bit_bytes;
use crate::blocks::{BlockIq4Nl, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::GgmlType;

/// Weight rows per tile.
const MR: usize = 4;
/// Activation rows per tile.
const NR: usize = 3;

/// Defines the [`GemmFn`](crate::kernels::GemmFn) `$name` for weights of type `$w` from the
/// tile kernel `$tile`:
/// `unsafe fn $tile<const RM: usize, const RN: usize>(blocks, w, row_bytes, a, act_row)
/// -> [[f32; RM]; RN]`, the products of weight rows `w + i * row_bytes` (`i < RM`) with
/// activation rows `a + j * act_row` (`j < RN`), `blocks` blocks each, into `[j][i]`.
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
            let blocks = checked_tiles(GgmlType::$w, n, w, row_bytes, a, act_row, out);
            let (w, a) = (w.as_ptr(), a.as_ptr());
            for_each_tile(out, |r0, b0, rm, rn, out| {
                // SAFETY: the CPU has the instruction set (see above); `checked_tiles` asserted
                // that every weight row `< out[0].len()` and activation row `< out.len()` holds
                // `blocks` blocks, and the tile's rows `r0..r0 + rm`, `b0..b0 + rn` are among
                // them (`for_each_tile`).
                unsafe {
                    let (w, a) = (w.add(r0 * row_bytes), a.add(b0 * act_row));
                    tile_shapes!(
                        $tile,
                        rm,
                        rn,
                        out,
                        r0,
                        b0,
                        (blocks, w, row_bytes, a, act_row)
                    )
                }
            });
        }
    };
}

/// Calls `$tile::<rm, rn>$args` for the run-time shape (`rm <= MR`, `rn <= NR`) and stores its
/// results into `$out[b0 + j][r0 + i]`.
macro_rules! tile_shapes {
    ($tile:ident, $rm:expr, $rn:expr, $out:expr, $r0:expr, $b0:expr, $args:tt) => {
        match ($rm, $rn) {
            (4, 3) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 3, $args)),
            (4, 2) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 2, $args)),
            (4, 1) => store($out, $r0, $b0, tile_shapes!(@call $tile, 4, 1, $args)),
            (3, 3) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 3, $args)),
            (3, 2) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 2, $args)),
            (3, 1) => store($out, $r0, $b0, tile_shapes!(@call $tile, 3, 1, $args)),
            (2, 3) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 3, $args)),
            (2, 2) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 2, $args)),
            (2, 1) => store($out, $r0, $b0, tile_shapes!(@call $tile, 2, 1, $args)),
            (1, 3) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 3, $args)),
            (1, 2) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 2, $args)),
            (1, 1) => store($out, $r0, $b0, tile_shapes!(@call $tile, 1, 1, $args)),
            _ => unreachable!("tile {}x{} beyond {MR}x{NR}", $rm, $rn),
        }
    };
    (@call $tile:ident, $m:literal, $n:literal, ($($arg:expr),*)) => {
        $tile::<$m, $n>($($arg),*)
    };
}

gemm_wrapper!(q8_0_gemm, q8_0_tile, Q8_0);
gemm_wrapper!(q4_0_gemm, q4_0_tile, Q4_0);
gemm_wrapper!(q5_0_gemm, q5_0_tile, Q5_0);
gemm_wrapper!(iq4_nl_gemm, iq4_nl_tile, IQ4_NL);
gemm_wrapper!(q4_1_gemm, q4_1_tile, Q4_1);
gemm_wrapper!(q5_1_gemm, q5_1_tile, Q5_1);

/// The blocks per row, after asserting that `w` holds `out[0].len()` weight rows of `n`
/// elements of type `ty` (`row_bytes` apart) and `a` holds `out.len()` activation rows
/// (`act_row` apart), and that every output row is as long as the first.
fn checked_tiles(
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
/// activation rows `0..out.len()`, `MR` x `NR` where they fit: each group of `MR` weight rows
/// runs against the whole batch before the next.
#[inline(always)]
fn for_each_tile(
    out: &mut [&mut [f32]],
    mut tile: impl FnMut(usize, usize, usize, usize, &mut [&mut [f32]]),
) {
    let (rows, batch) = (out.first().map_or(0, |o| o.len()), out.len());
    for r0 in (0..rows).step_by(MR) {
        for b0 in (0..batch).step_by(NR) {
            tile(r0, b0, MR.min(rows - r0), NR.min(batch - b0), out);
        }
    }
}

/// Stores a tile's results `y[j][i]` into `out[b0 + j][r0 + i]`.
#[inline(always)]
fn store<const RM: usize, const RN: usize>(
    out: &mut [&mut [f32]],
    r0: usize,
    b0: usize,
    y: [[f32; RM]; RN],
) {
    for (o, yj) in out[b0..b0 + RN].iter_mut().zip(y) {
        o[r0..r0 + RM].copy_from_slice(&yj);
    }
}

/// The tile of a type whose blocks start with their f16 scale and hold 32 signed values
/// (`unpack(block)`, each in -127..=127 or, for Q8_0, -128..=127), against Q8_0 activations,
/// in tinyBLAS's order (see the module's documentation).
///
/// # Safety
/// Weight rows `w + i * row_bytes` (`i < RM`) hold `blocks` blocks of `w_size` bytes, and
/// activation rows `a + j * act_row` (`j < RN`) `blocks` Q8_0 blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q0_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    w_size: usize,
    a: *const u8,
    act_row: usize,
    unpack: impl Fn(*const u8) -> __m256i,
) -> [[f32; RM]; RN] {
    const A: usize = size_of::<BlockQ8_0>();
    const _: () = assert!(offset_of!(BlockQ8_0, d) == 0);
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); RM]; RN];
    for l in 0..blocks {
        let mut x = [_mm256_setzero_si256(); RM];
        let mut dw = [_mm256_setzero_ps(); RM];
        for i in 0..RM {
            // SAFETY: block l of weight row i is in bounds (caller) and starts with its scale.
            unsafe {
                let b = w.add(i * row_bytes + l * w_size);
                x[i] = unpack(b);
                dw[i] = f16_splat(b);
            }
        }
        // |x| as unsigned bytes for maddubs; x's signs move onto the activations. An
        // activation is never -128 (ggml's quantizers round into -127..=127), so the products
        // and their pair sums (at most 2 * 128 * 127) are exact.
        let ax: [__m256i; RM] = std::array::from_fn(|i| _mm256_sign_epi8(x[i], x[i]));
        for (j, acc) in acc.iter_mut().enumerate() {
            // SAFETY: block l of activation row j is in bounds (caller); loads are unaligned.
            let (y, da) = unsafe {
                let b = a.add(j * act_row + l * A);
                (
                    _mm256_loadu_si256(b.add(offset_of!(BlockQ8_0, qs)).cast()),
                    f16_splat(b),
                )
            };
            for i in 0..RM {
                let pairs = _mm256_maddubs_epi16(ax[i], _mm256_sign_epi8(y, x[i]));
                let lanes = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                acc[i] = _mm256_fmadd_ps(_mm256_mul_ps(dw[i], da), lanes, acc[i]);
            }
        }
    }
    acc.map(|row| row.map(|v| hsum(v)))
}

/// # Safety
/// As [`q0_tile`]'s, for Q8_0 weights.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q8_0_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
) -> [[f32; RM]; RN] {
    const _: () = assert!(offset_of!(BlockQ8_0, d) == 0);
    // SAFETY: `q0_tile` passes the start of a Q8_0 block in bounds (caller's guarantee).
    let unpack =
        |b: *const u8| unsafe { _mm256_loadu_si256(b.add(offset_of!(BlockQ8_0, qs)).cast()) };
    // SAFETY: the caller's guarantee.
    unsafe {
        q0_tile(
            blocks,
            w,
            row_bytes,
            size_of::<BlockQ8_0>(),
            a,
            act_row,
            unpack,
        )
    }
}

/// # Safety
/// As [`q0_tile`]'s, for Q4_0 weights.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_0_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
) -> [[f32; RM]; RN] {
    const _: () = assert!(offset_of!(BlockQ4_0, d) == 0);
    let eight = _mm256_set1_epi8(8);
    // SAFETY: `q0_tile` passes the start of a Q4_0 block in bounds (caller's guarantee).
    let unpack = |b: *const u8| unsafe {
        let q = _mm_loadu_si128(b.add(offset_of!(BlockQ4_0, qs)).cast());
        _mm256_sub_epi8(nibbles(q), eight)
    };
    // SAFETY: the caller's guarantee.
    unsafe {
        q0_tile(
            blocks,
            w,
            row_bytes,
            size_of::<BlockQ4_0>(),
            a,
            act_row,
            unpack,
        )
    }
}

/// # Safety
/// As [`q0_tile`]'s, for Q5_0 weights.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_0_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
) -> [[f32; RM]; RN] {
    const _: () = assert!(offset_of!(BlockQ5_0, d) == 0);
    let high = _mm256_set1_epi8(0xF0u8 as i8);
    // SAFETY: `q0_tile` passes the start of a Q5_0 block in bounds (caller's guarantee).
    let unpack = |b: *const u8| unsafe {
        let qh = b
            .add(offset_of!(BlockQ5_0, qh))
            .cast::<u32>()
            .read_unaligned()
            .to_le();
        // q - 16: the nibble with the top four bits set where the fifth bit is clear.
        let q = _mm_loadu_si128(b.add(offset_of!(BlockQ5_0, qs)).cast());
        _mm256_or_si256(nibbles(q), _mm256_andnot_si256(bit_bytes(qh), high))
    };
    // SAFETY: the caller's guarantee.
    unsafe {
        q0_tile(
            blocks,
            w,
            row_bytes,
            size_of::<BlockQ5_0>(),
            a,
            act_row,
            unpack,
        )
    }
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
) -> [[f32; RM]; RN] {
    const _: () = assert!(offset_of!(BlockIq4Nl, d) == 0);
    let table = iq4nl_table();
    // SAFETY: `q0_tile` passes the start of an IQ4_NL block in bounds (caller's guarantee).
    let unpack = |b: *const u8| unsafe {
        let q = _mm_loadu_si128(b.add(offset_of!(BlockIq4Nl, qs)).cast());
        _mm256_shuffle_epi8(table, nibbles(q))
    };
    // SAFETY: the caller's guarantee.
    unsafe {
        q0_tile(
            blocks,
            w,
            row_bytes,
            size_of::<BlockIq4Nl>(),
            a,
            act_row,
            unpack,
        )
    }
}

/// The f16 at `p + k * stride` for `k < RM` as f32 in lanes `k` of the result (the others 0).
///
/// # Safety
/// Each of those addresses must hold 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_lanes<const RM: usize>(p: *const u8, stride: usize) -> __m128 {
    let mut bits = 0u64;
    for k in 0..RM {
        // SAFETY: the caller's guarantee; the read is unaligned.
        let x = unsafe { p.add(k * stride).cast::<u16>().read_unaligned() };
        bits |= u64::from(u16::from_le(x)) << (16 * k);
    }
    _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64))
}

/// The tile of a type with a minimum (`d * q + m`, blocks starting with the f16 `d` and `m`, 32
/// unsigned values `q < 32` from `unpack(block)`) against Q8_1 activations, in the order of the
/// one-row kernels (`legacy::q4_1_q8_1_avx2`): per output, `fma(d_w * d_a, lanes, acc)` block
/// after block and `mins = fma(m_w, s_a, mins)` beside it, then `hsum(acc) + mins`.
///
/// # Safety
/// Weight rows `w + i * row_bytes` (`i < RM`) hold `blocks` blocks of `w_size` bytes, and
/// activation rows `a + j * act_row` (`j < RN`) `blocks` Q8_1 blocks.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q1_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    w_size: usize,
    a: *const u8,
    act_row: usize,
    unpack: impl Fn(*const u8) -> __m256i,
) -> [[f32; RM]; RN] {
    const A: usize = size_of::<BlockQ8_1>();
    const _: () = assert!(offset_of!(BlockQ8_1, d) == 0 && offset_of!(BlockQ8_1, s) == 2);
    const { assert!(RM <= 4) };
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); RM]; RN];
    // Lane i of mins[j]: the min terms of weight row i against activation row j, each lane
    // summed on its own as the one-row kernel sums them.
    let mut mins = [_mm_setzero_ps(); RN];
    for l in 0..blocks {
        let mut q = [_mm256_setzero_si256(); RM];
        let mut dw = [_mm256_setzero_ps(); RM];
        for i in 0..RM {
            // SAFETY: block l of weight row i is in bounds (caller) and starts with its scale.
            unsafe {
                let b = w.add(i * row_bytes + l * w_size);
                q[i] = unpack(b);
                dw[i] = f16_splat(b);
            }
        }
        // SAFETY: the minimum follows the scale in each weight block (asserted by the callers).
        let m = unsafe { f16_lanes::<RM>(w.add(l * w_size + 2), row_bytes) };
        for j in 0..RN {
            // SAFETY: block l of activation row j is in bounds (caller); loads are unaligned.
            let (y, da, sa) = unsafe {
                let b = a.add(j * act_row + l * A);
                (
                    _mm256_loadu_si256(b.add(offset_of!(BlockQ8_1, qs)).cast()),
                    f16_splat(b),
                    _mm256_castps256_ps128(f16_splat(b.add(offset_of!(BlockQ8_1, s)))),
                )
            };
            mins[j] = _mm_fmadd_ps(m, sa, mins[j]);
            for i in 0..RM {
                // q < 32 and |y| <= 127: the pair sums are exact in i16.
                let pairs = _mm256_maddubs_epi16(q[i], y);
                let lanes = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs, ones));
                acc[j][i] = _mm256_fmadd_ps(_mm256_mul_ps(dw[i], da), lanes, acc[j][i]);
            }
        }
    }
    let mut y = [[0f32; RM]; RN];
    for j in 0..RN {
        let mut m = [0f32; 4];
        // SAFETY: `m` holds four f32; the store is unaligned.
        unsafe { _mm_storeu_ps(m.as_mut_ptr(), mins[j]) };
        for i in 0..RM {
            y[j][i] = hsum(acc[j][i]) + m[i];
        }
    }
    y
}

/// # Safety
/// As [`q1_tile`]'s, for Q4_1 weights.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_1_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
) -> [[f32; RM]; RN] {
    const _: () = assert!(offset_of!(BlockQ4_1, d) == 0 && offset_of!(BlockQ4_1, m) == 2);
    // SAFETY: `q1_tile` passes the start of a Q4_1 block in bounds (caller's guarantee).
    let unpack =
        |b: *const u8| unsafe { nibbles(_mm_loadu_si128(b.add(offset_of!(BlockQ4_1, qs)).cast())) };
    // SAFETY: the caller's guarantee.
    unsafe {
        q1_tile(
            blocks,
            w,
            row_bytes,
            size_of::<BlockQ4_1>(),
            a,
            act_row,
            unpack,
        )
    }
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
) -> [[f32; RM]; RN] {
    const _: () = assert!(offset_of!(BlockQ5_1, d) == 0 && offset_of!(BlockQ5_1, m) == 2);
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
    // SAFETY: the caller's guarantee.
    unsafe {
        q1_tile(
            blocks,
            w,
            row_bytes,
            size_of::<BlockQ5_1>(),
            a,
            act_row,
            unpack,
        )
    }
}
