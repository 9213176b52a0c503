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
use super::avx2::common::nibbles;
use super::avx2::gemm::{
    checked_tiles, for_each_tile, gemm_wrapper, min_sums, scale_products, store, tile_shapes,
    with_mins, Scales, TileScales, CHUNK,
};
use super::unpack;
use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ8_0, BlockQ8_1};
use crate::GgmlType;

/// Activation rows per tile: AVX-512's 32 registers hold the 4 x `NR` eight-lane
/// accumulators and a tile step's operands (AVX2's tiles have 3).
const NR: usize = 6;

gemm_wrapper!(q8_0_gemm, q8_0_tile, Q8_0);
gemm_wrapper!(q4_0_gemm, q4_0_tile, Q4_0);
gemm_wrapper!(q5_0_gemm, q5_0_tile, Q5_0);
gemm_wrapper!(q4_1_gemm, q4_1_tile, Q4_1);

/// Two 256-bit vectors as one, `lo` in the low half.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn join(lo: __m256i, hi: __m256i) -> __m512i {
    _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo), hi)
}

/// The two 256-bit halves of `v`, low first.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn low_high(v: __m512) -> (__m256, __m256) {
    // (`_mm512_extractf32x8_ps` would need AVX-512 DQ.)
    let high = _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(v)));
    (_mm512_castps512_ps256(v), high)
}

/// `-128` times the sums of four consecutive signed bytes of `y`, per i32 lane: what the
/// products of offset weights (`unpack`) with `y` exceed the products of the weights themselves by.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn excess(y: __m512i) -> __m512i {
    let zero = _mm512_setzero_si512();
    _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, _mm512_set1_epi8(-128), y))
}

/// The i32 lane sums of the products of signed bytes `x` and `y`, four consecutive products
/// per lane, from `x + 128` (`unpack`'s) and `excess(y)`: `Σ (x + 128) y - 128 Σ y`. Every step is exact
/// in i32 (four products of at most 255 · 128), so these are the integers AVX2's `maddubs` +
/// `madd` give (its pair sums are exact in i16 for every x and every y above -128, which no
/// activation quantizer writes).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn lane_sums(offset_x: __m512i, excess_y: __m512i, y: __m512i) -> __m512i {
    _mm512_dpbusd_epi32(excess_y, offset_x, y)
}

/// As [`lane_sums`] for one block: the low halves of the three operands.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn lane_sums256(offset_x: __m256i, excess_y: __m256i, y: __m256i) -> __m256i {
    _mm256_dpbusd_epi32(excess_y, offset_x, y)
}

/// A 256-bit vector in the low half of a 512-bit one (the high half undefined), for
/// [`excess`] on one block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
pub(super) fn widen(v: __m256i) -> __m512i {
    _mm512_castsi256_si512(v)
}

/// The accumulators of a tile whose weight blocks hold 32 values (`unpack` of a block of two
/// rows, as 32 bytes each) against activation blocks of `A` (Q8_0 or Q8_1), from which
/// [`q0_tile`] and [`q4_1_tile`] finish their outputs. A 512-bit accumulator holds two weight
/// rows' eight-lane accumulators side by side (rows `2p` and `2p + 1`), so that one `vpdpbusd`,
/// one conversion and one fused multiply-add take a block of both rows, with each half's scale:
/// every accumulator still takes its rows' blocks one after another, as AVX2's. `SIGNED`:
/// `unpack` gives signed values offset by 128 (each product then needs `excess(y)`, computed
/// once per activation block); otherwise unsigned ones below 128, whose lane sums are
/// `vpdpbusd`'s own.
///
/// # Safety
/// Weight rows `w + i * row_bytes` (`i < RM <= 4`) hold `blocks` blocks of `w_size` bytes, and
/// activation rows `a + j * act_row` (`j < RN`) `blocks` blocks of `A`, whose 32 values start
/// at byte `A_QS`; `s` holds their scales.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[allow(clippy::too_many_arguments)]
unsafe fn pair_tile<A, const A_QS: usize, const SIGNED: bool, const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    w_size: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
    unpack: impl Fn(*const u8, *const u8) -> __m512i,
) -> [[__m512; 2]; RN] {
    let a_size = size_of::<A>();
    // Row pairs; an odd last row is paired with itself (its second half unused).
    let pairs = RM.div_ceil(2);
    let mut acc = [[_mm512_setzero_ps(); 2]; RN];
    let mut d = [[[0f32; 4]; RN]; CHUNK];
    // SAFETY: block l of weight row i < RM is in bounds (caller).
    let block = |i: usize, l: usize| unsafe { w.add(i.min(RM - 1) * row_bytes + l * w_size) };
    // SAFETY: block l of activation row j is in bounds (caller); the load is unaligned.
    let acts = |j: usize, l: usize| unsafe {
        _mm256_loadu_si256(a.add(j * act_row + l * a_size + A_QS).cast())
    };
    // A pair's scales from a tile step's four: lanes 0..8 its first row's, 8..16 its second's.
    let spread = [
        _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1),
        _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
    ];
    for l0 in (0..blocks).step_by(CHUNK) {
        let len = CHUNK.min(blocks - l0);
        scale_products(&mut d[..len], s, l0);
        for (l, d) in d[..len].iter().enumerate() {
            let b = l0 + l;
            let x: [__m512i; 2] = std::array::from_fn(|p| {
                if p < pairs {
                    unpack(block(2 * p, b), block(2 * p + 1, b))
                } else {
                    _mm512_setzero_si512()
                }
            });
            for (j, (acc, d)) in acc.iter_mut().zip(d).enumerate() {
                let y = _mm512_broadcast_i64x4(acts(j, b));
                // Unsigned values below 128 against |y| <= 127: each lane's four products sum
                // exactly in i32 from zero.
                let base = if SIGNED {
                    excess(y)
                } else {
                    _mm512_setzero_si512()
                };
                // SAFETY: `d` holds four f32; the load is unaligned.
                let d = _mm512_castps128_ps512(unsafe { _mm_loadu_ps(d.as_ptr()) });
                for p in 0..pairs {
                    let lanes = _mm512_cvtepi32_ps(lane_sums(x[p], base, y));
                    acc[p] = _mm512_fmadd_ps(_mm512_permutexvar_ps(spread[p], d), lanes, acc[p]);
                }
            }
        }
    }
    acc
}

/// Output `i` of a tile row's accumulators (see [`pair_tile`]): the lanes of row `i`'s half.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn row_sum(acc: &[__m512; 2], i: usize) -> f32 {
    let (first, second) = low_high(acc[i / 2]);
    hsum(if i.is_multiple_of(2) { first } else { second })
}

/// The tile of a type whose blocks hold 32 signed values (`unpack`, offset by 128) against
/// Q8_0 activations: `avx2::gemm::q0_tile`'s outputs, from [`pair_tile`].
///
/// # Safety
/// Weight rows `w + i * row_bytes` (`i < RM <= 4`) hold `blocks` blocks of `w_size` bytes, and
/// activation rows `a + j * act_row` (`j < RN`) `blocks` Q8_0 blocks; `s` holds their scales.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[allow(clippy::too_many_arguments)]
unsafe fn q0_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    w_size: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
    unpack: impl Fn(*const u8, *const u8) -> __m512i,
) -> [[f32; RM]; RN] {
    const QS: usize = offset_of!(BlockQ8_0, qs);
    // SAFETY: the caller's guarantee.
    let acc = unsafe {
        pair_tile::<BlockQ8_0, QS, true, RM, RN>(
            blocks, w, row_bytes, w_size, a, act_row, s, unpack,
        )
    };
    acc.map(|acc| std::array::from_fn(|i| row_sum(&acc, i)))
}

/// Defines `$tile`, the tile of `$block` weights, from `unpack::$pair`.
macro_rules! q0_tile_of {
    ($tile:ident, $block:ty, $pair:ident) => {
        /// # Safety
        /// As [`q0_tile`]'s, for these weights.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        unsafe fn $tile<const RM: usize, const RN: usize>(
            blocks: usize,
            w: *const u8,
            row_bytes: usize,
            a: *const u8,
            act_row: usize,
            s: TileScales,
        ) -> [[f32; RM]; RN] {
            // SAFETY: `q0_tile` passes the starts of two blocks in bounds (caller's guarantee).
            let unpack = |b0: *const u8, b1: *const u8| unsafe { unpack::$pair(b0, b1) };
            const W: usize = size_of::<$block>();
            // SAFETY: the caller's guarantee.
            unsafe { q0_tile::<RM, RN>(blocks, w, row_bytes, W, a, act_row, s, unpack) }
        }
    };
}

q0_tile_of!(q8_0_tile, BlockQ8_0, q8_0_pair);
q0_tile_of!(q4_0_tile, BlockQ4_0, q4_0_pair);
q0_tile_of!(q5_0_tile, BlockQ5_0, q5_0_pair);

/// The Q4_1 tile against Q8_1 activations: `avx2::gemm::q1_tile`'s outputs. [`pair_tile`]
/// takes the nibbles unsigned (no offset: the lane sums are `maddubs` + `madd`'s integers);
/// the minimums' terms are AVX2's own pass (`min_sums`).
///
/// # Safety
/// Weight rows `w + i * row_bytes` (`i < RM <= 4`) hold `blocks` Q4_1 blocks, and activation
/// rows `a + j * act_row` (`j < RN`) `blocks` Q8_1 blocks; `s` holds their scales and
/// minimums.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q4_1_tile<const RM: usize, const RN: usize>(
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    a: *const u8,
    act_row: usize,
    s: TileScales,
) -> [[f32; RM]; RN] {
    const QS: usize = offset_of!(BlockQ8_1, qs);
    const W: usize = size_of::<BlockQ4_1>();
    let mins = min_sums::<RN>(blocks, s);
    // SAFETY: `pair_tile` passes the starts of two Q4_1 blocks in bounds (caller's guarantee);
    // the loads are unaligned.
    let unpack = |b0: *const u8, b1: *const u8| unsafe {
        let nibbles_at =
            |b: *const u8| nibbles(_mm_loadu_si128(b.add(offset_of!(BlockQ4_1, qs)).cast()));
        join(nibbles_at(b0), nibbles_at(b1))
    };
    // SAFETY: the caller's guarantee.
    let acc = unsafe {
        pair_tile::<BlockQ8_1, QS, false, RM, RN>(blocks, w, row_bytes, W, a, act_row, s, unpack)
    };
    with_mins(mins, |j, i| row_sum(&acc[j], i))
}
