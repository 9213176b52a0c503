//! AVX-512 GEMM kernels for Q8_0, Q4_0 and Q5_0 weights against Q8_0 activations, in
//! tinyBLAS's order as `avx2::gemm`'s (see there): per output, one eight-lane accumulator takes
//! `fma(d_w * d_a, lanes, acc)` block after block, `lanes` the eight exact i32 sums of four
//! consecutive byte products. Here two consecutive blocks of a row share one 512-bit vector:
//! one `vpdpbusd` gives both blocks' sixteen lane sums (the same integers AVX2's
//! `maddubs` + `madd` give), and the two halves then go into the accumulator one after the
//! other, so every output is AVX2's bit for bit. The tiles, scales and shapes are `avx2::gemm`'s.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::avx2::common::hsum;
use super::avx2::gemm::{
    checked_tiles, for_each_tile, gemm_wrapper, scale_products, store, tile_shapes, unpack_q4_0,
    unpack_q5_0, Scales, TileScales, CHUNK, MR, NR,
};
use crate::blocks::{BlockQ4_0, BlockQ5_0, BlockQ8_0};
use crate::GgmlType;

gemm_wrapper!(q8_0_gemm, q8_0_tile, Q8_0);
gemm_wrapper!(q4_0_gemm, q4_0_tile, Q4_0);
gemm_wrapper!(q5_0_gemm, q5_0_tile, Q5_0);

/// Two 256-bit vectors as one, `lo` in the low half.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// The i32 lane sums of the byte products of `x` and `y` (any signed bytes, `y` never -128
/// where `x` is negative), four consecutive products per lane: `|x|` times `y` with `x`'s sign
/// moved onto it, as AVX2's `dot_i8` computes them (`maddubs` + `madd`; every pair sum is
/// exact in i16 there, so the sums are the same).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn lane_sums(abs_x: __m512i, x_negative: __mmask64, y: __m512i) -> __m512i {
    let signed_y = _mm512_mask_sub_epi8(y, x_negative, _mm512_setzero_si512(), y);
    _mm512_dpbusd_epi32(_mm512_setzero_si512(), abs_x, signed_y)
}

/// As [`lane_sums`] for one block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn lane_sums256(abs_x: __m256i, x_negative: __mmask32, y: __m256i) -> __m256i {
    let signed_y = _mm256_mask_sub_epi8(y, x_negative, _mm256_setzero_si256(), y);
    _mm256_dpbusd_epi32(_mm256_setzero_si256(), abs_x, signed_y)
}

/// The tile of a type whose blocks hold 32 signed values (`unpack(block)`) against Q8_0
/// activations: `avx2::gemm::q0_tile`'s outputs. With `ABS_ACTS` the activations give the
/// magnitudes and the weights the signs (weights in -127..=127), otherwise the other way
/// round (Q8_0 weights may hold -128; activations never do), as there.
///
/// # Safety
/// Weight rows `w + i * row_bytes` (`i < RM`) hold `blocks` blocks of `w_size` bytes, and
/// activation rows `a + j * act_row` (`j < RN`) `blocks` Q8_0 blocks; `s` holds their scales.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[allow(clippy::too_many_arguments)]
unsafe fn q0_tile<const RM: usize, const RN: usize, const ABS_ACTS: bool>(
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
    const QS: usize = offset_of!(BlockQ8_0, qs);
    let mut acc = [[_mm256_setzero_ps(); RM]; RN];
    let mut d = [[[0f32; 4]; RN]; CHUNK];
    // SAFETY: block l of weight row i is in bounds (caller).
    let weights = |i: usize, l: usize| unpack(unsafe { w.add(i * row_bytes + l * w_size) });
    // SAFETY: block l of activation row j is in bounds (caller); the load is unaligned.
    let acts =
        |j: usize, l: usize| unsafe { _mm256_loadu_si256(a.add(j * act_row + l * A + QS).cast()) };
    for l0 in (0..blocks).step_by(CHUNK) {
        let len = CHUNK.min(blocks - l0);
        scale_products(&mut d[..len], s, l0);
        let mut l = 0;
        while l + 2 <= len {
            let b = l0 + l;
            let x: [__m512i; RM] = std::array::from_fn(|i| join(weights(i, b), weights(i, b + 1)));
            // The magnitudes' operand and the sign mask of the other, per weight row.
            let (mag_x, neg_x): ([__m512i; RM], [__mmask64; RM]) = (
                std::array::from_fn(|i| _mm512_abs_epi8(x[i])),
                std::array::from_fn(|i| _mm512_movepi8_mask(x[i])),
            );
            for (j, acc) in acc.iter_mut().enumerate() {
                let y = join(acts(j, b), acts(j, b + 1));
                let (mag_y, neg_y) = (_mm512_abs_epi8(y), _mm512_movepi8_mask(y));
                for i in 0..RM {
                    let sums = if ABS_ACTS {
                        lane_sums(mag_y, neg_y, x[i])
                    } else {
                        lane_sums(mag_x[i], neg_x[i], y)
                    };
                    let lanes = _mm512_cvtepi32_ps(sums);
                    let first = _mm512_castps512_ps256(lanes);
                    let second =
                        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(lanes)));
                    acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d[l][j][i]), first, acc[i]);
                    acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d[l + 1][j][i]), second, acc[i]);
                }
            }
            l += 2;
        }
        if l < len {
            let b = l0 + l;
            let x: [__m256i; RM] = std::array::from_fn(|i| weights(i, b));
            for (j, acc) in acc.iter_mut().enumerate() {
                let y = acts(j, b);
                for i in 0..RM {
                    let sums = if ABS_ACTS {
                        lane_sums256(_mm256_abs_epi8(y), _mm256_movepi8_mask(y), x[i])
                    } else {
                        lane_sums256(_mm256_abs_epi8(x[i]), _mm256_movepi8_mask(x[i]), y)
                    };
                    let lanes = _mm256_cvtepi32_ps(sums);
                    acc[i] = _mm256_fmadd_ps(_mm256_set1_ps(d[l][j][i]), lanes, acc[i]);
                }
            }
        }
    }
    acc.map(|row| row.map(|v| hsum(v)))
}

/// # Safety
/// As [`q0_tile`]'s, for Q8_0 weights.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q8_0_tile<const RM: usize, const RN: usize>(
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
    unsafe { q0_tile::<RM, RN, false>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}

/// # Safety
/// As [`q0_tile`]'s, for Q4_0 weights.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q4_0_tile<const RM: usize, const RN: usize>(
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
    unsafe { q0_tile::<RM, RN, true>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}

/// # Safety
/// As [`q0_tile`]'s, for Q5_0 weights.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q5_0_tile<const RM: usize, const RN: usize>(
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
    unsafe { q0_tile::<RM, RN, true>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
}
