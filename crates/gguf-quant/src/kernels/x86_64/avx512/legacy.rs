//! AVX-512 dot products of Q8_0, Q5_0 and Q4_0 weights against Q8_0 activations, and of Q4_1
//! against Q8_1 (one row, or eight per call, see `safe_wrapper!`), in the order of AVX2's
//! (`avx2::legacy`, ggml's AVX2 `vec_dot`): per row one eight-lane accumulator takes
//! `fma(d_w * d_a, lanes, acc)` block after block (Q4_1: and its minimum terms
//! `fma(m_w, s_a, mins)` beside it), then its lanes are summed. Two consecutive blocks share a 512-bit vector: one
//! `vpdpbusd` gives both blocks' exact lane sums, which go into the accumulator one after the
//! other, so each result is AVX2's bit for bit.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::avx2::common::{hsum, nibbles, prefetch};
use super::avx2::legacy::{f16_pair, min_terms};
use super::gemm::{excess, join, lane_sums, lane_sums256, low_high, widen};
use super::unpack;
use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ8_0, BlockQ8_1};

safe_wrapper!(q8_0_q8_0, q8_0_q8_0_avx512, Q8_0, rows: q8_0_q8_0_rows, group: 8);
safe_wrapper!(q5_0_q8_0, q5_0_q8_0_avx512, Q5_0, rows: q5_0_q8_0_rows, group: 8);
safe_wrapper!(q4_0_q8_0, q4_0_q8_0_avx512, Q4_0, rows: q4_0_q8_0_rows, group: 8);
safe_wrapper!(q4_1_q8_1, q4_1_q8_1_avx512, Q4_1, rows: q4_1_q8_1_rows, group: 8);

/// Bytes of a Q8_0 block, and where its values start.
const A: usize = size_of::<BlockQ8_0>();
const A_QS: usize = offset_of!(BlockQ8_0, qs);

/// The f16 scales at `p0` and `p1` as f32, eight lanes of each (`p0`'s low).
///
/// # Safety
/// Both pointers must point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn scale_pair(p0: *const u8, p1: *const u8) -> __m512 {
    // SAFETY: the caller's guarantee; the reads are unaligned.
    let (s0, s1) = unsafe {
        (
            p0.cast::<i16>().read_unaligned(),
            p1.cast::<i16>().read_unaligned(),
        )
    };
    _mm512_cvtph_ps(_mm256_set_m128i(_mm_set1_epi16(s1), _mm_set1_epi16(s0)))
}

/// The dot products of `R` rows of 32-value blocks (`w_size` bytes, f16 scale first, signed
/// values from `unpack`) with one row of Q8_0 activations, in `avx2::common::one_accumulator`'s
/// order.
///
/// # Safety
/// Each of `ws` points to `blocks` weight blocks and `a` to `blocks` Q8_0 blocks. `ahead`: see
/// [`prefetch`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q0_rows<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    w_size: usize,
    ahead: usize,
    a: *const u8,
    pair: impl Fn(*const u8) -> __m512i,
    one: impl Fn(*const u8) -> __m256i,
) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    let mut i = 0;
    while i + 2 <= blocks {
        // SAFETY: blocks i and i + 1 of each operand are in bounds (caller); loads are
        // unaligned.
        unsafe {
            let ba = a.add(i * A);
            let y = join(
                _mm256_loadu_si256(ba.add(A_QS).cast()),
                _mm256_loadu_si256(ba.add(A + A_QS).cast()),
            );
            let e = excess(y);
            let da = scale_pair(ba, ba.add(A));
            for r in 0..R {
                let bw = ws[r].add(i * w_size);
                prefetch(bw, ahead);
                prefetch(bw.add(w_size), ahead);
                let x = pair(bw);
                let sums = lane_sums(x, e, y);
                let d = _mm512_mul_ps(scale_pair(bw, bw.add(w_size)), da);
                let (d0, d1) = low_high(d);
                let (v0, v1) = low_high(_mm512_cvtepi32_ps(sums));
                acc[r] = _mm256_fmadd_ps(d0, v0, acc[r]);
                acc[r] = _mm256_fmadd_ps(d1, v1, acc[r]);
            }
        }
        i += 2;
    }
    if i < blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned.
        unsafe {
            let ba = a.add(i * A);
            let y = _mm256_loadu_si256(ba.add(A_QS).cast());
            let e = _mm512_castsi512_si256(excess(widen(y)));
            for r in 0..R {
                let bw = ws[r].add(i * w_size);
                let x = one(bw);
                let sums = lane_sums256(x, e, y);
                let (d, _) = low_high(_mm512_mul_ps(scale_pair(bw, bw), scale_pair(ba, ba)));
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sums), acc[r]);
            }
        }
    }
    acc.map(|v| hsum(v))
}

/// Defines `$kernel`, the rows kernel of `$block` weights, from `unpack`'s `$pair` and `$one`.
macro_rules! q0_rows_of {
    ($kernel:ident, $block:ty, $pair:ident, $one:ident) => {
        /// # Safety
        /// As [`q0_rows`]'s, for these weights.
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
        unsafe fn $kernel<const R: usize>(
            blocks: usize,
            ws: [*const u8; R],
            ahead: usize,
            a: *const u8,
        ) -> [f32; R] {
            // SAFETY: `q0_rows` passes the start of two consecutive blocks in bounds (caller's
            // guarantee).
            let pair = |b: *const u8| unsafe { unpack::$pair(b, b.add(size_of::<$block>())) };
            // SAFETY: `q0_rows` passes the start of a block in bounds (caller's guarantee).
            let one = |b: *const u8| unsafe { unpack::$one(b) };
            const _: () = assert!(offset_of!($block, d) == 0);
            // SAFETY: the caller's guarantee.
            unsafe { q0_rows(blocks, ws, size_of::<$block>(), ahead, a, pair, one) }
        }
    };
}

q0_rows_of!(q8_0_q8_0_avx512, BlockQ8_0, q8_0_pair, q8_0_one);
q0_rows_of!(q5_0_q8_0_avx512, BlockQ5_0, q5_0_pair, q5_0_one);
q0_rows_of!(q4_0_q8_0_avx512, BlockQ4_0, q4_0_pair, q4_0_one);

/// `avx2::legacy::q4_1_q8_1_avx2` with two blocks per `vpdpbusd` (the nibbles are unsigned, so
/// the lane sums are `maddubs` + `madd`'s integers with no offset), their halves going into
/// the accumulator one after the other, and the minimum terms in AVX2's own steps.
///
/// # Safety
/// Each of `ws` points to `blocks` Q4_1 blocks and `a` to `blocks` Q8_1 blocks. `ahead`: see
/// `prefetch`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q4_1_q8_1_avx512<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    const W: usize = size_of::<BlockQ4_1>();
    const Y: usize = size_of::<BlockQ8_1>();
    const W_QS: usize = offset_of!(BlockQ4_1, qs);
    const Y_QS: usize = offset_of!(BlockQ8_1, qs);
    let mut acc = [_mm256_setzero_ps(); R];
    // Lane 1: the min terms (see `min_terms`).
    let mut mins = [_mm_setzero_ps(); R];
    // One block's step for row r: its minimum term, then `fma(d_w * d_a, lanes, acc)`.
    let step = |acc: &mut __m256, mins: &mut __m128, wdm: __m128, ads: __m128, lanes: __m256| {
        *mins = _mm_fmadd_ps(wdm, ads, *mins);
        let d = _mm256_broadcastss_ps(_mm_mul_ps(wdm, ads));
        *acc = _mm256_fmadd_ps(d, lanes, *acc);
    };
    let mut i = 0;
    while i + 2 <= blocks {
        // SAFETY: blocks i and i + 1 of each operand are in bounds (caller); loads are
        // unaligned.
        unsafe {
            let ba = a.add(i * Y);
            let (ads0, ads1) = (f16_pair(ba), f16_pair(ba.add(Y)));
            let y = join(
                _mm256_loadu_si256(ba.add(Y_QS).cast()),
                _mm256_loadu_si256(ba.add(Y + Y_QS).cast()),
            );
            for r in 0..R {
                let bw = ws[r].add(i * W);
                prefetch(bw, ahead);
                prefetch(bw.add(W), ahead);
                let q = unpack::nibbles_pair(bw.add(W_QS), bw.add(W + W_QS));
                let sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), q, y);
                let (v0, v1) = low_high(_mm512_cvtepi32_ps(sums));
                step(&mut acc[r], &mut mins[r], f16_pair(bw), ads0, v0);
                step(&mut acc[r], &mut mins[r], f16_pair(bw.add(W)), ads1, v1);
            }
        }
        i += 2;
    }
    if i < blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned.
        unsafe {
            let ba = a.add(i * Y);
            let ads = f16_pair(ba);
            let y = _mm256_loadu_si256(ba.add(Y_QS).cast());
            for r in 0..R {
                let bw = ws[r].add(i * W);
                let q = nibbles(_mm_loadu_si128(bw.add(W_QS).cast()));
                let sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), q, y);
                step(
                    &mut acc[r],
                    &mut mins[r],
                    f16_pair(bw),
                    ads,
                    _mm256_cvtepi32_ps(sums),
                );
            }
        }
    }
    std::array::from_fn(|r| hsum(acc[r]) + min_terms(mins[r]))
}
