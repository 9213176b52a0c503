//! AVX-512 products on the row-interleaved Q4_K layout (`crate::kernels::packed`): the AVX2
//! kernel's operations (`avx2::packed`, ggml's `q4_K_8x8` order) on two groups of eight rows at
//! once, the first group in the low 256 bits of each vector and the second in the high. Each 32-bit
//! lane is still one row and sees the same operations in the same order, so the results are the
//! AVX2 kernel's bit for bit; a last odd group runs on the AVX2 kernel.

use std::arch::x86_64::*;

use super::avx2::packed as narrow;
use crate::blocks::{BlockQ8K, QK_K};
use crate::kernels::packed::{
    Q4K_X8_D, Q4K_X8_DMIN, Q4K_X8_MINS, Q4K_X8_QS, Q4K_X8_SCALES, Q4K_X8_TILE,
};

/// Bytes of a Q8_K block.
const A_SIZE: usize = size_of::<BlockQ8K>();

/// The GEMV: one activation row against every group of `w`.
pub(super) fn q4_k_x8_gemv(n: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
    let blocks = narrow::checked(n, w, a, out.len());
    let pairs = out.len() / 16;
    for (p, o) in out.chunks_exact_mut(16).enumerate() {
        // SAFETY: the CPU has AVX-512 F/BW/VL and AVX2, FMA, F16C (this module is reached only
        // through the table `kernels()` hands out after checking); `checked` bounds groups
        // `2p` and `2p + 1`'s `blocks` tiles and the activation row's `blocks` blocks.
        let [y] = unsafe {
            q4_k_x16::<1, false>(
                blocks,
                w.as_ptr().add(2 * p * blocks * Q4K_X8_TILE),
                blocks * Q4K_X8_TILE,
                [a.as_ptr()],
            )
        };
        o.copy_from_slice(&y);
    }
    let done = 16 * pairs;
    if done < out.len() {
        narrow::q4_k_x8_gemv(
            n,
            &w[pairs * 2 * blocks * Q4K_X8_TILE..],
            a,
            &mut out[done..],
        );
    }
}

/// The GEMM: four activation rows against every group of `w`.
pub(super) fn q4_k_x8_gemm4(n: usize, w: &[u8], a: [&[u8]; 4], out: [&mut [f32]; 4]) {
    let len = out[0].len();
    let blocks = narrow::checked(n, w, a[0], len);
    for k in 1..4 {
        narrow::checked(n, w, a[k], out[k].len());
        assert_eq!(out[k].len(), len);
    }
    let [o0, o1, o2, o3] = out;
    let pairs = len / 16;
    for p in 0..pairs {
        // SAFETY: as in `q4_k_x8_gemv`, for each of the four activation rows.
        let ys = unsafe {
            q4_k_x16::<4, true>(
                blocks,
                w.as_ptr().add(2 * p * blocks * Q4K_X8_TILE),
                blocks * Q4K_X8_TILE,
                a.map(|a| a.as_ptr()),
            )
        };
        for (o, y) in [&mut *o0, &mut *o1, &mut *o2, &mut *o3].into_iter().zip(ys) {
            o[16 * p..16 * p + 16].copy_from_slice(&y);
        }
    }
    let done = 16 * pairs;
    if done < len {
        narrow::q4_k_x8_gemm4(
            n,
            &w[pairs * 2 * blocks * Q4K_X8_TILE..],
            a,
            [
                &mut o0[done..],
                &mut o1[done..],
                &mut o2[done..],
                &mut o3[done..],
            ],
        );
    }
}

/// 32 bytes at `lo` and 32 at `hi` as one vector, `lo`'s in the low half.
///
/// # Safety
/// Both pointers must point to 32 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn halves(lo: *const u8, hi: *const u8) -> __m512i {
    // SAFETY: the caller guarantees both loads; they are unaligned.
    unsafe {
        _mm512_inserti64x4::<1>(
            _mm512_castsi256_si512(_mm256_loadu_si256(lo.cast())),
            _mm256_loadu_si256(hi.cast()),
        )
    }
}

/// 16 bytes at `lo` and 16 at `hi` as one 256-bit vector, `lo`'s in the low half.
///
/// # Safety
/// Both pointers must point to 16 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
unsafe fn halves128(lo: *const u8, hi: *const u8) -> __m256i {
    // SAFETY: the caller guarantees both loads; they are unaligned.
    unsafe { _mm256_loadu2_m128i(hi.cast(), lo.cast()) }
}

/// The sixteen outputs of two groups of rows (`w` and `w + next`, `blocks` tiles each) for
/// each of the `A` activation rows `a`: `avx2::packed::q4_k_x8` for both groups at once.
///
/// # Safety
/// The CPU has AVX-512 F/BW/VL/VNNI, AVX2, FMA and F16C; `w` and `w + next` point to `blocks`
/// tiles and each of `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
// `g` and `k` index the tile's and activations' offsets as well as the small arrays.
#[allow(clippy::needless_range_loop)]
unsafe fn q4_k_x16<const A: usize, const PER_GROUP: bool>(
    blocks: usize,
    w: *const u8,
    next: usize,
    a: [*const u8; A],
) -> [[f32; 16]; A] {
    let mask = _mm512_set1_epi8(0x0F);
    let mut acc = [_mm512_setzero_ps(); A];
    let mut accm = [_mm512_setzero_ps(); A];
    for i in 0..blocks {
        // SAFETY: tile i of both groups and block i of each activation row are in bounds
        // (caller); every load below stays inside them, as in the AVX2 kernel.
        unsafe {
            let t0 = w.add(i * Q4K_X8_TILE);
            let t1 = t0.add(next);
            let d_w = _mm512_cvtph_ps(halves128(t0.add(Q4K_X8_D), t1.add(Q4K_X8_D)));
            let m_w = _mm512_cvtph_ps(halves128(t0.add(Q4K_X8_DMIN), t1.add(Q4K_X8_DMIN)));
            let mut d = [_mm512_setzero_ps(); A];
            let mut m = [_mm512_setzero_ps(); A];
            let mut qs = [std::ptr::null::<u8>(); A];
            let mut bs = [[0i32; 4]; A];
            for k in 0..A {
                let blk = a[k].add(i * A_SIZE);
                let da = _mm512_set1_ps(blk.cast::<f32>().read_unaligned());
                d[k] = _mm512_mul_ps(d_w, da);
                m[k] = _mm512_mul_ps(m_w, da);
                qs[k] = blk.add(4);
                let sums = _mm_hadd_epi16(
                    _mm_loadu_si128(blk.add(260).cast()),
                    _mm_loadu_si128(blk.add(276).cast()),
                );
                _mm_storeu_si128(bs[k].as_mut_ptr().cast(), sums);
            }
            let mut isum = [_mm512_setzero_si512(); A];
            let mut imin = [_mm512_setzero_si512(); A];
            for g in 0..QK_K / 64 {
                let mut lo = [_mm512_setzero_si512(); A];
                let mut hi = [_mm512_setzero_si512(); A];
                for t in 0..8 {
                    let at = Q4K_X8_QS + 256 * g + 32 * t;
                    let q = halves(t0.add(at), t1.add(at));
                    let q_lo = _mm512_and_si512(q, mask);
                    let q_hi = _mm512_and_si512(_mm512_srli_epi16::<4>(q), mask);
                    for k in 0..A {
                        let at = qs[k].add(64 * g + 4 * t);
                        let y_lo = _mm512_set1_epi32(at.cast::<i32>().read_unaligned());
                        let y_hi = _mm512_set1_epi32(at.add(32).cast::<i32>().read_unaligned());
                        lo[k] = _mm512_add_epi16(lo[k], _mm512_maddubs_epi16(q_lo, y_lo));
                        hi[k] = _mm512_add_epi16(hi[k], _mm512_maddubs_epi16(q_hi, y_hi));
                    }
                }
                // Each row's scale in both bytes of its 16-bit pair, as `avx2::packed` has it.
                let scales = |j: usize| {
                    let at = Q4K_X8_SCALES + 8 * j;
                    let s0 = _mm_loadl_epi64(t0.add(at).cast());
                    let s1 = _mm_loadl_epi64(t1.add(at).cast());
                    _mm512_cvtepu8_epi16(_mm256_set_m128i(
                        _mm_unpacklo_epi8(s1, s1),
                        _mm_unpacklo_epi8(s0, s0),
                    ))
                };
                let (sc_lo, sc_hi) = (scales(2 * g), scales(2 * g + 1));
                let at = Q4K_X8_MINS + 16 * g;
                let mins = _mm512_cvtepu8_epi16(halves128(t0.add(at), t1.add(at)));
                for k in 0..A {
                    let s_g = _mm512_add_epi32(
                        _mm512_madd_epi16(lo[k], sc_lo),
                        _mm512_madd_epi16(hi[k], sc_hi),
                    );
                    let m_g = _mm512_madd_epi16(mins, _mm512_set1_epi32(bs[k][g]));
                    if PER_GROUP {
                        acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s_g), d[k], acc[k]);
                        accm[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m_g), m[k], accm[k]);
                    } else {
                        isum[k] = _mm512_add_epi32(isum[k], s_g);
                        imin[k] = _mm512_add_epi32(imin[k], m_g);
                    }
                }
            }
            if !PER_GROUP {
                for k in 0..A {
                    acc[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[k]), d[k], acc[k]);
                    accm[k] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(imin[k]), m[k], accm[k]);
                }
            }
        }
    }
    let mut out = [[0f32; 16]; A];
    for k in 0..A {
        // SAFETY: `out[k]` holds sixteen floats.
        unsafe { _mm512_storeu_ps(out[k].as_mut_ptr(), _mm512_sub_ps(acc[k], accm[k])) };
    }
    out
}
