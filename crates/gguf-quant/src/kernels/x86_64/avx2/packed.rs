//! AVX2 products on the row-interleaved Q4_K layout (`crate::kernels::packed`): each 32-bit lane of
//! a vector is one of the eight rows of a tile, as in ggml's `ggml_gemv_q4_K_8x8_q8_K` and
//! `ggml_gemm_q4_K_8x8_q8_K`, whose float orders these follow (see `packed_scalar`, the twins they
//! equal bit for bit).
//!
//! Per 64-value group `g` of a super-block: each 32-byte load of nibbles holds four bytes of
//! each row; `maddubs` against the four matching activation bytes (broadcast) gives each row
//! two 16-bit partial sums, eight loads add up a sub-block's 32 values (at most
//! 16 · 15 · 128 < 2^15 per 16-bit lane: no overflow), and `madd` with the rows' scales
//! (each in both halves of its lane) finishes `S_g` in 32 bits. The min term `M_g` is one
//! `madd` of the rows' two mins against the two sub-blocks' activation sums.

use std::arch::x86_64::*;

use crate::blocks::{BlockQ8K, QK_K};
use crate::kernels::packed::{
    Q4K_X8_D, Q4K_X8_DMIN, Q4K_X8_MINS, Q4K_X8_QS, Q4K_X8_SCALES, Q4K_X8_TILE,
};

/// Bytes of a Q8_K block.
const A_SIZE: usize = size_of::<BlockQ8K>();

/// Checks that `w` holds `out_len / 8` groups of tiles for `n` columns and `a` a Q8_K row of
/// `n`; returns the super-blocks per row.
pub(in crate::kernels::x86_64) fn checked(n: usize, w: &[u8], a: &[u8], out_len: usize) -> usize {
    let blocks = n / QK_K;
    assert!(
        out_len.is_multiple_of(8)
            && w.len() >= out_len / 8 * blocks * Q4K_X8_TILE
            && a.len() >= blocks * A_SIZE
    );
    blocks
}

/// The GEMV: one activation row against every group of `w`.
pub(in crate::kernels::x86_64) fn q4_k_x8_gemv(n: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
    let blocks = checked(n, w, a, out.len());
    for (g, o) in out.chunks_exact_mut(8).enumerate() {
        // SAFETY: the CPU has AVX2, FMA and F16C (this module is reached only through the
        // table `kernels()` hands out after checking); `checked` bounds group `g`'s
        // `blocks` tiles and the activation row's `blocks` blocks.
        let [y] = unsafe {
            q4_k_x8::<1, false>(
                blocks,
                w.as_ptr().add(g * blocks * Q4K_X8_TILE),
                [a.as_ptr()],
            )
        };
        o.copy_from_slice(&y);
    }
}

/// The GEMM: four activation rows against every group of `w`.
pub(in crate::kernels::x86_64) fn q4_k_x8_gemm4(
    n: usize,
    w: &[u8],
    a: [&[u8]; 4],
    out: [&mut [f32]; 4],
) {
    let len = out[0].len();
    let blocks = checked(n, w, a[0], len);
    for k in 1..4 {
        checked(n, w, a[k], out[k].len());
        assert_eq!(out[k].len(), len);
    }
    let [o0, o1, o2, o3] = out;
    for g in 0..len / 8 {
        // SAFETY: as in `q4_k_x8_gemv`, for each of the four activation rows.
        let ys = unsafe {
            q4_k_x8::<4, true>(
                blocks,
                w.as_ptr().add(g * blocks * Q4K_X8_TILE),
                a.map(|a| a.as_ptr()),
            )
        };
        for (o, y) in [&mut *o0, &mut *o1, &mut *o2, &mut *o3].into_iter().zip(ys) {
            o[8 * g..8 * g + 8].copy_from_slice(&y);
        }
    }
}

/// The eight outputs of one group of rows (`w`, its `blocks` tiles) for each of the `A`
/// activation rows `a`, the float terms added per 64-value group (`PER_GROUP`, the GEMM's
/// order) or per super-block (the GEMV's).
///
/// # Safety
/// The CPU has AVX2, FMA and F16C; `w` points to `blocks` tiles and each of `a` to `blocks`
/// Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
// `g` and `k` index the tile's and activations' offsets as well as the small arrays.
#[allow(clippy::needless_range_loop)]
unsafe fn q4_k_x8<const A: usize, const PER_GROUP: bool>(
    blocks: usize,
    w: *const u8,
    a: [*const u8; A],
) -> [[f32; 8]; A] {
    let mask = _mm256_set1_epi8(0x0F);
    let mut acc = [_mm256_setzero_ps(); A];
    let mut accm = [_mm256_setzero_ps(); A];
    for i in 0..blocks {
        // SAFETY: tile i and block i of each activation row are in bounds (caller); every
        // load below stays inside them (the tile's fields at the `Q4K_X8_*` offsets, the
        // Q8_K block's `d` at 0, `qs` at 4..260, `bsums` at 260..292).
        unsafe {
            let tile = w.add(i * Q4K_X8_TILE);
            let d_w = _mm256_cvtph_ps(_mm_loadu_si128(tile.add(Q4K_X8_D).cast()));
            let m_w = _mm256_cvtph_ps(_mm_loadu_si128(tile.add(Q4K_X8_DMIN).cast()));
            let mut d = [_mm256_setzero_ps(); A];
            let mut m = [_mm256_setzero_ps(); A];
            let mut qs = [std::ptr::null::<u8>(); A];
            // Per activation row, the two sub-blocks' sums of each group as one 32-bit lane.
            let mut bs = [[0i32; 4]; A];
            for k in 0..A {
                let blk = a[k].add(i * A_SIZE);
                let da = _mm256_set1_ps(blk.cast::<f32>().read_unaligned());
                d[k] = _mm256_mul_ps(d_w, da);
                m[k] = _mm256_mul_ps(m_w, da);
                qs[k] = blk.add(4);
                let sums = _mm_hadd_epi16(
                    _mm_loadu_si128(blk.add(260).cast()),
                    _mm_loadu_si128(blk.add(276).cast()),
                );
                _mm_storeu_si128(bs[k].as_mut_ptr().cast(), sums);
            }
            let mut isum = [_mm256_setzero_si256(); A];
            let mut imin = [_mm256_setzero_si256(); A];
            for g in 0..QK_K / 64 {
                let mut lo = [_mm256_setzero_si256(); A];
                let mut hi = [_mm256_setzero_si256(); A];
                for t in 0..8 {
                    let q = _mm256_loadu_si256(tile.add(Q4K_X8_QS + 256 * g + 32 * t).cast());
                    let q_lo = _mm256_and_si256(q, mask);
                    let q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                    for k in 0..A {
                        let at = qs[k].add(64 * g + 4 * t);
                        let y_lo = _mm256_set1_epi32(at.cast::<i32>().read_unaligned());
                        let y_hi = _mm256_set1_epi32(at.add(32).cast::<i32>().read_unaligned());
                        lo[k] = _mm256_add_epi16(lo[k], _mm256_maddubs_epi16(q_lo, y_lo));
                        hi[k] = _mm256_add_epi16(hi[k], _mm256_maddubs_epi16(q_hi, y_hi));
                    }
                }
                let scales = |j: usize| {
                    let s = _mm_loadl_epi64(tile.add(Q4K_X8_SCALES + 8 * j).cast());
                    _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(s, s))
                };
                let (sc_lo, sc_hi) = (scales(2 * g), scales(2 * g + 1));
                let mins =
                    _mm256_cvtepu8_epi16(_mm_loadu_si128(tile.add(Q4K_X8_MINS + 16 * g).cast()));
                for k in 0..A {
                    let s_g = _mm256_add_epi32(
                        _mm256_madd_epi16(lo[k], sc_lo),
                        _mm256_madd_epi16(hi[k], sc_hi),
                    );
                    let m_g = _mm256_madd_epi16(mins, _mm256_set1_epi32(bs[k][g]));
                    if PER_GROUP {
                        acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s_g), d[k], acc[k]);
                        accm[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m_g), m[k], accm[k]);
                    } else {
                        isum[k] = _mm256_add_epi32(isum[k], s_g);
                        imin[k] = _mm256_add_epi32(imin[k], m_g);
                    }
                }
            }
            if !PER_GROUP {
                for k in 0..A {
                    acc[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[k]), d[k], acc[k]);
                    accm[k] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(imin[k]), m[k], accm[k]);
                }
            }
        }
    }
    let mut out = [[0f32; 8]; A];
    for k in 0..A {
        // SAFETY: `out[k]` holds eight floats.
        unsafe { _mm256_storeu_ps(out[k].as_mut_ptr(), _mm256_sub_ps(acc[k], accm[k])) };
    }
    out
}
