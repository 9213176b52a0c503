//! AVX-512 dot products of Q6_K (one row or several per call, see `safe_wrapper!`) and Q5_K
//! weights against Q8_K activations, with AVX2's bits (`avx2::kquants`, ggml's AVX2
//! `vec_dot`): per block, AVX2 sums eight i32 lanes of scaled byte products, converts them
//! and adds `d · lanes` into one eight-lane accumulator. Here a 512-bit vector takes two of
//! AVX2's 32-value groups at once (lanes 0..8 the first's, 8..16 the second's), `vpdpwssd`
//! weighs `vpmaddubsw`'s pair sums by their scales straight into the block's sums, and the two
//! halves are added before the conversion: every lane holds AVX2's integer (the sums are exact
//! in i32 whatever their order), so the float steps, and the result, are AVX2's.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::avx2::common::{hsum, hsum4, q8k_scale};
use super::avx2::kq_gemm::rows_of;
use super::avx2::kquants::{k_block_head, q6_k_rows_with, q8k_sums32, Q6kHead};
use crate::blocks::{BlockQ5K, BlockQ8K};

safe_wrapper!(q6_k_q8_k, q6_k_q8_k_avx512, Q6_K, rows: q6_k_q8_k_rows, group: 4);
safe_wrapper!(q5_k_q8_k, q5_k_q8_k_avx512, Q5_K);

/// The i16 lane picks of `vpermw` that spread sub-block scales `first`, `first + 1`, ... over
/// 32 i16 pair sums, eight each (`per` = 8), or `first` then `first + 1`, sixteen each
/// (`per` = 16).
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn scale_picks(first: u16, per: u16) -> __m512i {
    let picks: [u16; 32] = std::array::from_fn(|k| first + k as u16 / per);
    // SAFETY: `picks` holds 64 bytes; the load is unaligned.
    unsafe { _mm512_loadu_si512(picks.as_ptr().cast()) }
}

/// The low and high 256-bit halves of `v` added as i32 lanes: AVX2's lane sums from two of its
/// groups.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn fold(v: __m512i) -> __m256i {
    _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64::<1>(v))
}

/// # Safety
/// Each of `ws` points to `blocks` Q6_K blocks and `a` to `blocks` Q8_K blocks. `ahead`: see
/// `avx2::common::prefetch`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q6_k_q8_k_avx512<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let m4 = _mm512_set1_epi8(0x0F);
    // The high bits of AVX2's groups 2g + 1 sit two bits above those of groups 2g.
    let high_shift = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(2));
    // Groups (0, 1) of half h take scales 8h..8h + 4, groups (2, 3) the next four.
    let picks = [0, 4, 8, 12].map(|first| scale_picks(first, 8));
    // SAFETY: the caller's guarantee; `q6_k_rows_with` passes a block's head and its Q8_K
    // values, whose fields the loads stay within (unaligned).
    let codes = |head: &Q6kHead, ys: *const u8| unsafe {
        let Q6kHead { ql, qh, sc16, .. } = *head;
        let scales = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(sc16));
        let mut sumi = _mm512_setzero_si512();
        for h in 0..2 {
            // AVX2's l1 | l2, and its high bits for groups (0 | 1), (2 | 3).
            let l = _mm512_loadu_si512(ql.add(64 * h).cast());
            let hb = _mm256_loadu_si256(qh.add(32 * h).cast());
            let hb = _mm512_srlv_epi16(_mm512_broadcast_i64x4(hb), high_shift);
            let g01 = _mm512_or_si512(
                _mm512_and_si512(l, m4),
                _mm512_slli_epi16::<4>(_mm512_and_si512(hb, _mm512_set1_epi8(0x03))),
            );
            let g23 = _mm512_or_si512(
                _mm512_and_si512(_mm512_srli_epi16::<4>(l), m4),
                _mm512_and_si512(hb, _mm512_set1_epi8(0x30)),
            );
            let y01 = _mm512_loadu_si512(ys.add(128 * h).cast());
            let y23 = _mm512_loadu_si512(ys.add(128 * h + 64).cast());
            // q < 64: the pair sums (<= 2 · 63 · 128) are exact in i16.
            let s01 = _mm512_permutexvar_epi16(picks[2 * h], scales);
            let s23 = _mm512_permutexvar_epi16(picks[2 * h + 1], scales);
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(g01, y01), s01);
            sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(g23, y23), s23);
        }
        fold(sumi)
    };
    // SAFETY: the caller's guarantee; this function enables every instruction set used.
    unsafe { q6_k_rows_with(blocks, ws, ahead, a, codes) }
}

/// # Safety
/// `w` points to `blocks` Q5_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn q5_k_q8_k_avx512(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_mins = _mm_setzero_ps();
    let mask = _mm512_set1_epi8(0x0F);
    let one = _mm512_set1_epi8(1);
    // AVX2's q_lo | q_hi: the low nibbles, then the high ones; their fifth bits one apart.
    let nibble_shift = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(4));
    let high_shift = _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(1));
    // Step k weighs sub-block 2k's sums (low half) and 2k + 1's (high half).
    let picks = [0, 2, 4, 6].map(|first| scale_picks(first, 16));
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and stay
        // within the block's fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ5K>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let da = _mm256_set1_ps(q8k_scale(ba));
            let (d, scales, mins) = k_block_head(bw, da, q8k_sums32(ba), acc_mins);
            acc_mins = mins;
            // The eight scales as i16 in lanes 0..8.
            let scales = _mm512_castsi256_si512(scales);
            let (qs, ys) = (
                bw.add(offset_of!(BlockQ5K, qs)),
                ba.add(offset_of!(BlockQ8K, qs)),
            );
            // As AVX2's: bits 0 and 1 of each byte hold step k's fifth bits after 2k shifts.
            let hb = _mm256_loadu_si256(bw.add(offset_of!(BlockQ5K, qh)).cast());
            let mut hb = _mm512_srlv_epi16(_mm512_broadcast_i64x4(hb), high_shift);
            let mut sumi = _mm512_setzero_si512();
            for (k, pick) in picks.iter().enumerate() {
                let q = _mm512_broadcast_i64x4(_mm256_loadu_si256(qs.add(32 * k).cast()));
                let q = _mm512_or_si512(
                    _mm512_and_si512(_mm512_srlv_epi16(q, nibble_shift), mask),
                    _mm512_slli_epi16::<4>(_mm512_and_si512(hb, one)),
                );
                hb = _mm512_srli_epi16::<2>(hb);
                let y = _mm512_loadu_si512(ys.add(64 * k).cast());
                // q < 32: the pair sums are exact in i16, their products with 6-bit scales in
                // i32.
                let s = _mm512_permutexvar_epi16(*pick, scales);
                sumi = _mm512_dpwssd_epi32(sumi, _mm512_maddubs_epi16(q, y), s);
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(fold(sumi)), acc);
        }
    }
    hsum(acc) - hsum4(acc_mins)
}

// Q5_K's several-rows kernel (as the K-quant GEMM takes it for small batches): the one-row
// kernel on each row.
rows_of!(q5_k_q8_k_rows, q5_k_q8_k);
