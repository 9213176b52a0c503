//! AVX2 dot products of the K-quants against Q8_K: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K (Q4_K and Q6_K
//! also as several-rows kernels), and the helpers their blocks share.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::common::{f16_splat, hsum, hsum4, prefetch, q8k_scale, scale_pair};
use crate::blocks::{BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K, K_SCALE_SIZE};
use crate::dequant::k_scale_min;

safe_wrapper!(q4_k_q8_k, q4_k_q8_k_avx2, Q4_K, rows: q4_k_q8_k_rows, group: 1);
safe_wrapper!(q6_k_q8_k, q6_k_q8_k_avx2, Q6_K, rows: q6_k_q8_k_rows, group: 2);
safe_wrapper!(q5_k_q8_k, q5_k_q8_k_avx2, Q5_K);
safe_wrapper!(q3_k_q8_k, q3_k_q8_k_avx2, Q3_K);
safe_wrapper!(q2_k_q8_k, q2_k_q8_k_avx2, Q2_K);

/// The eight 6-bit sub-block scales of a K-quant block as i16, in both 128-bit lanes, for
/// [`scaled_sub_blocks`].
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k_scales(sc: [u8; 8]) -> __m256i {
    _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_cvtsi64_si128(i64::from_le_bytes(sc))))
}

/// Sub-blocks `2k` (unsigned `q0` < 128 times signed `y0`) and `2k + 1` (`q1`, `y1`) of 32
/// values, each sum weighted by its scale from [`k_scales`], as eight i32 lane sums (the inner
/// step of Q4_K and Q5_K).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scaled_sub_blocks(
    q0: __m256i,
    y0: __m256i,
    q1: __m256i,
    y1: __m256i,
    scales: __m256i,
    k: usize,
) -> __m256i {
    // Scale j in every i16 lane: one byte shuffle.
    let scale = |j: usize| {
        let (lo, hi) = ((2 * j) as u8, (2 * j + 1) as u8);
        let pick = i64::from_le_bytes([lo, hi, lo, hi, lo, hi, lo, hi]);
        _mm256_shuffle_epi8(scales, _mm256_set1_epi64x(pick))
    };
    let p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(q0, y0), scale(2 * k));
    let p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(q1, y1), scale(2 * k + 1));
    _mm256_add_epi32(p0, p1)
}

/// The eight sums of 32 consecutive values of a Q8_K block (pairs of its 16-value `bsums`), as
/// i16 (|sum| <= 32 * 128).
///
/// # Safety
/// `q8k` must point to a Q8_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn q8k_sums32(q8k: *const u8) -> __m128i {
    // SAFETY: the block holds its 16 bsums (caller); the load is unaligned.
    let bsums = unsafe { _mm256_loadu_si256(q8k.add(offset_of!(BlockQ8K, bsums)).cast()) };
    _mm_hadd_epi16(
        _mm256_castsi256_si128(bsums),
        _mm256_extracti128_si256::<1>(bsums),
    )
}

/// Σ_j m_j * sums32[j] (the K-quant min correction) in four i32 lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn k_min_products(mn: [u8; 8], sums32: __m128i) -> __m128i {
    _mm_madd_epi16(
        _mm_cvtepu8_epi16(_mm_cvtsi64_si128(i64::from_le_bytes(mn))),
        sums32,
    )
}

/// What Q4_K and Q5_K blocks share against a Q8_K block with scale `da`: `d * da` for the
/// sub-block sums, the eight 6-bit scales as i16 ([`k_scales`]), and `acc_mins` plus the min
/// correction `dmin * da * Σ_j m_j * sums32[j]` (kept in four lanes until the end).
///
/// # Safety
/// `bw` must point to a Q4_K or Q5_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn k_block_head(
    bw: *const u8,
    da: __m256,
    sums32: __m128i,
    acc_mins: __m128,
) -> (__m256, __m256i, __m128) {
    // SAFETY: the caller guarantees the block, whose `d`, `dmin` and `scales` lie where
    // Q4_K's do (asserted below).
    let (d, dmin, (sc, mn)) = unsafe {
        let scales = bw.add(offset_of!(BlockQ4K, scales));
        (
            _mm256_mul_ps(da, f16_splat(bw.add(offset_of!(BlockQ4K, d)))),
            _mm256_mul_ps(da, f16_splat(bw.add(offset_of!(BlockQ4K, dmin)))),
            k_scale_min(std::slice::from_raw_parts(scales, K_SCALE_SIZE)),
        )
    };
    let mins = _mm_fmadd_ps(
        _mm256_castps256_ps128(dmin),
        _mm_cvtepi32_ps(k_min_products(mn, sums32)),
        acc_mins,
    );
    (d, k_scales(sc), mins)
}

// `k_block_head` reads Q5_K blocks with Q4_K's offsets.
const _: () = assert!(
    offset_of!(BlockQ4K, d) == offset_of!(BlockQ5K, d)
        && offset_of!(BlockQ4K, dmin) == offset_of!(BlockQ5K, dmin)
        && offset_of!(BlockQ4K, scales) == offset_of!(BlockQ5K, scales)
);

/// # Safety
/// Each of `ws` points to `blocks` Q4_K blocks and `a` to `blocks` Q8_K blocks. `ahead`: see
/// [`prefetch`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q4_k_q8_k_avx2<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    _ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    let mut acc_mins = [_mm_setzero_ps(); R];
    let mask = _mm256_set1_epi8(0x0F);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the block's fields.
        unsafe {
            let ba = a.add(i * size_of::<BlockQ8K>());
            let da = _mm256_set1_ps(q8k_scale(ba));
            let ys = ba.add(offset_of!(BlockQ8K, qs));
            let sums32 = q8k_sums32(ba);
            for r in 0..R {
                let bw = ws[r].add(i * size_of::<BlockQ4K>());
                let (d, scales, mins) = k_block_head(bw, da, sums32, acc_mins[r]);
                acc_mins[r] = mins;
                let qs = bw.add(offset_of!(BlockQ4K, qs));
                let mut sumi = _mm256_setzero_si256();
                for k in 0..4 {
                    let q = _mm256_loadu_si256(qs.add(32 * k).cast());
                    let y_lo = _mm256_loadu_si256(ys.add(64 * k).cast());
                    let y_hi = _mm256_loadu_si256(ys.add(64 * k + 32).cast());
                    let q_lo = _mm256_and_si256(q, mask);
                    let q_hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), mask);
                    let p = scaled_sub_blocks(q_lo, y_lo, q_hi, y_hi, scales, k);
                    sumi = _mm256_add_epi32(sumi, p);
                }
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc[r]);
            }
        }
    }
    let mut sums = [0f32; R];
    for r in 0..R {
        sums[r] = hsum(acc[r]) - hsum4(acc_mins[r]);
    }
    sums
}

/// What a Q6_K block's product with a Q8_K block needs besides its codes (shared with
/// `avx512::kquants`).
#[derive(Clone, Copy)]
pub(in crate::kernels::x86_64) struct Q6kHead {
    /// The low four bits of the codes.
    pub(in crate::kernels::x86_64) ql: *const u8,
    /// Their two high bits.
    pub(in crate::kernels::x86_64) qh: *const u8,
    /// `d_w · d_a` in eight lanes.
    pub(in crate::kernels::x86_64) d: __m256,
    /// The sixteen signed sub-block scales.
    pub(in crate::kernels::x86_64) sc16: __m128i,
    /// `32 Σ s_j b_j` in eight i32 lanes: the stored q is the value plus 32, so
    /// `Σ s_j (q - 32) y = Σ s_j q y - 32 Σ s_j b_j` over the 16-value sums `b_j` of y (Q8_K's
    /// bsums), one `madd` for the block.
    pub(in crate::kernels::x86_64) offset: __m256i,
}

/// The [`Q6kHead`] of the Q6_K block at `bw` against the Q8_K block at `ba` (whose bsums are
/// `bsums`), asking for the block `ahead` bytes on (see [`prefetch`]).
///
/// # Safety
/// `bw` points to a Q6_K block and `ba` to a Q8_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn q6k_block_head(
    bw: *const u8,
    ba: *const u8,
    bsums: __m256i,
    ahead: usize,
) -> Q6kHead {
    // A Q6_K block spans four cache lines.
    for line in 0..4 {
        prefetch(bw.wrapping_add(64 * line), ahead);
    }
    // SAFETY: the fields lie within the blocks (caller); the loads are unaligned.
    unsafe {
        let d = _mm256_mul_ps(
            _mm256_set1_ps(q8k_scale(ba)),
            f16_splat(bw.add(offset_of!(BlockQ6K, d))),
        );
        let sc16 = _mm_loadu_si128(bw.add(offset_of!(BlockQ6K, scales)).cast());
        Q6kHead {
            ql: bw.add(offset_of!(BlockQ6K, ql)),
            qh: bw.add(offset_of!(BlockQ6K, qh)),
            d,
            sc16,
            offset: _mm256_slli_epi32(_mm256_madd_epi16(bsums, _mm256_cvtepi8_epi16(sc16)), 5),
        }
    }
}

/// # Safety
/// Each of `ws` points to `blocks` Q6_K blocks and `a` to `blocks` Q8_K blocks. `ahead`: see [`prefetch`].
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q6_k_q8_k_avx2<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let m4 = _mm256_set1_epi8(0x0F);
    // SAFETY: the caller's guarantee; `q6_k_rows_with` passes a block's head and its Q8_K
    // values, whose fields the loads stay within (unaligned).
    let codes = |head: &Q6kHead, ys: *const u8| unsafe {
        let Q6kHead { ql, qh, sc16, .. } = *head;
        let sc = _mm256_broadcastsi128_si256(sc16);
        let mut sumi = _mm256_setzero_si256();
        for h in 0..2 {
            let l1 = _mm256_loadu_si256(ql.add(64 * h).cast());
            let l2 = _mm256_loadu_si256(ql.add(64 * h + 32).cast());
            let hb = _mm256_loadu_si256(qh.add(32 * h).cast());
            // Six-bit values of the four 32-value groups: low nibble | two high bits.
            let groups = [
                _mm256_or_si256(
                    _mm256_and_si256(l1, m4),
                    _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x03)), 4),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(l2, m4),
                    _mm256_slli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0x0C)), 2),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                    _mm256_and_si256(hb, _mm256_set1_epi8(0x30)),
                ),
                _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(l2, 4), m4),
                    _mm256_srli_epi16(_mm256_and_si256(hb, _mm256_set1_epi8(0xC0u8 as i8)), 2),
                ),
            ];
            let mut p = [_mm256_setzero_si256(); 4];
            for (g, q) in groups.into_iter().enumerate() {
                let y = _mm256_loadu_si256(ys.add(128 * h + 32 * g).cast());
                // [s(2j) x 8, s(2j+1) x 8] as i16, j = 4h + g: each scale byte picked into
                // the high byte of every i16 of its lane, then shifted down with its sign.
                // (A 128-bit pick widened by `vpmovsxbw` is what ggml does, but LLVM turns
                // that pick into three shuffles.)
                let j = (4 * h + g) as u8;
                let (lo, hi) = (2 * j, 2 * j + 1);
                let pick = _mm256_set_epi64x(
                    i64::from_le_bytes([0x80, hi, 0x80, hi, 0x80, hi, 0x80, hi]),
                    i64::from_le_bytes([0x80, hi, 0x80, hi, 0x80, hi, 0x80, hi]),
                    i64::from_le_bytes([0x80, lo, 0x80, lo, 0x80, lo, 0x80, lo]),
                    i64::from_le_bytes([0x80, lo, 0x80, lo, 0x80, lo, 0x80, lo]),
                );
                let sv = _mm256_srai_epi16(_mm256_shuffle_epi8(sc, pick), 8);
                p[g] = _mm256_madd_epi16(_mm256_maddubs_epi16(q, y), sv);
            }
            sumi = _mm256_add_epi32(
                sumi,
                _mm256_add_epi32(_mm256_add_epi32(p[0], p[1]), _mm256_add_epi32(p[2], p[3])),
            );
        }
        sumi
    };
    // SAFETY: the caller's guarantee; this function enables AVX2, FMA and F16C.
    unsafe { q6_k_rows_with(blocks, ws, ahead, a, codes) }
}

/// The Q6_K dot products' driver (AVX2's and AVX-512's, ggml's AVX2 order): per block and
/// row the [`Q6kHead`], the block's eight i32 lane sums of scaled code products
/// `codes(head, q8k_values)`, less the head's offset correction, into
/// `acc = fma(d, lanes, acc)`; each row's lanes summed at the end.
///
/// # Safety
/// Always inlined into a kernel whose target features include AVX2, FMA, F16C and what
/// `codes` uses, which the CPU has; each of `ws` points to `blocks` Q6_K blocks and `a` to
/// `blocks` Q8_K blocks. `ahead`: see [`prefetch`].
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q6_k_rows_with<const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
    codes: impl Fn(&Q6kHead, *const u8) -> __m256i,
) -> [f32; R] {
    // SAFETY: the CPU has AVX (caller).
    let mut acc = [unsafe { _mm256_setzero_ps() }; R];
    for i in 0..blocks {
        // SAFETY: the instruction sets (caller); block i of each operand is in bounds
        // (caller), and the loads are unaligned.
        unsafe {
            let ba = a.add(i * size_of::<BlockQ8K>());
            let ys = ba.add(offset_of!(BlockQ8K, qs));
            let bsums = _mm256_loadu_si256(ba.add(offset_of!(BlockQ8K, bsums)).cast());
            for (r, acc) in acc.iter_mut().enumerate() {
                let bw = ws[r].add(i * size_of::<BlockQ6K>());
                let head = q6k_block_head(bw, ba, bsums, ahead);
                let sumi = _mm256_sub_epi32(codes(&head, ys), head.offset);
                *acc = _mm256_fmadd_ps(head.d, _mm256_cvtepi32_ps(sumi), *acc);
            }
        }
    }
    // SAFETY: the CPU has AVX2 (caller).
    acc.map(|acc| unsafe { hsum(acc) })
}

/// # Safety
/// `w` points to `blocks` Q5_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_k_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_mins = _mm_setzero_ps();
    let mask = _mm256_set1_epi8(0x0F);
    let one = _mm256_set1_epi8(1);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the block's fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ5K>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let da = _mm256_set1_ps(q8k_scale(ba));
            let (d, scales, mins) = k_block_head(bw, da, q8k_sums32(ba), acc_mins);
            acc_mins = mins;
            let (qs, ys) = (
                bw.add(offset_of!(BlockQ5K, qs)),
                ba.add(offset_of!(BlockQ8K, qs)),
            );
            // Bits 2k and 2k+1 of qh[l] are the fifth bits of elements 64k + l and 64k + 32 + l;
            // shifting the whole vector right by 2 per step keeps them at bits 0 and 1 of each
            // byte (at most 7 bits of shift, so no bit of the next byte reaches them).
            let mut hb = _mm256_loadu_si256(bw.add(offset_of!(BlockQ5K, qh)).cast());
            let mut sumi = _mm256_setzero_si256();
            for k in 0..4 {
                let q = _mm256_loadu_si256(qs.add(32 * k).cast());
                let y_lo = _mm256_loadu_si256(ys.add(64 * k).cast());
                let y_hi = _mm256_loadu_si256(ys.add(64 * k + 32).cast());
                // q in 0..32, so the maddubs pair sums (<= 2 * 31 * 128) and their products
                // with 6-bit scales cannot overflow.
                let q_lo = _mm256_or_si256(
                    _mm256_and_si256(q, mask),
                    _mm256_slli_epi16(_mm256_and_si256(hb, one), 4),
                );
                let q_hi = _mm256_or_si256(
                    _mm256_and_si256(_mm256_srli_epi16(q, 4), mask),
                    _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 1), one), 4),
                );
                hb = _mm256_srli_epi16(hb, 2);
                let p = scaled_sub_blocks(q_lo, y_lo, q_hi, y_hi, scales, k);
                sumi = _mm256_add_epi32(sumi, p);
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc) - hsum4(acc_mins)
}

/// # Safety
/// `w` points to `blocks` Q3_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q3_k_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    const KMASK1: u32 = 0x0303_0303;
    const KMASK2: u32 = 0x0f0f_0f0f;
    let mut acc = _mm256_setzero_ps();
    let m3 = _mm256_set1_epi8(3);
    let one = _mm256_set1_epi8(1);
    let four = _mm256_set1_epi8(4);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ3K>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let d = _mm256_mul_ps(
                f16_splat(bw.add(offset_of!(BlockQ3K, d))),
                _mm256_set1_ps(q8k_scale(ba)),
            );
            // The sixteen 6-bit scales, unpacked a word at a time, minus 32 (as i8).
            let sc = bw.add(offset_of!(BlockQ3K, scales));
            let a0 = sc.cast::<u32>().read_unaligned().to_le();
            let a1 = sc.add(4).cast::<u32>().read_unaligned().to_le();
            let tmp = sc.add(8).cast::<u32>().read_unaligned().to_le();
            let sc16 = _mm_sub_epi8(
                _mm_set_epi32(
                    (((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4)) as i32,
                    (((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4)) as i32,
                    ((a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4)) as i32,
                    ((a0 & KMASK2) | ((tmp & KMASK1) << 4)) as i32,
                ),
                _mm_set1_epi8(32),
            );
            // Bit 4h + s of hmask[l] is the high bit of element 128h + 32s + l; shifting right
            // by one per step keeps it at bit 0 of each byte (at most 7 bits of shift).
            let mut hb = _mm256_loadu_si256(bw.add(offset_of!(BlockQ3K, hmask)).cast());
            let ys = ba.add(offset_of!(BlockQ8K, qs));
            let mut sumi = _mm256_setzero_si256();
            for h in 0..2 {
                let mut q = _mm256_loadu_si256(bw.add(offset_of!(BlockQ3K, qs) + 32 * h).cast());
                for s in 0..4 {
                    // Value q2 - 4 * !hbit = (q2 | hbit << 2) - 4, computed as
                    // (q2 | hbit << 2) * y - 4 * y with the unsigned part (0..8) in maddubs; both
                    // pair sums and their difference fit in i16 (|.| <= 2 * 7 * 128).
                    let u = _mm256_or_si256(
                        _mm256_and_si256(q, m3),
                        _mm256_slli_epi16(_mm256_and_si256(hb, one), 2),
                    );
                    q = _mm256_srli_epi16(q, 2);
                    hb = _mm256_srli_epi16(hb, 1);
                    let y = _mm256_loadu_si256(ys.add(128 * h + 32 * s).cast());
                    let p =
                        _mm256_sub_epi16(_mm256_maddubs_epi16(u, y), _mm256_maddubs_epi16(four, y));
                    let sv = scale_pair(sc16, 8 * h + 2 * s);
                    sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(p, sv));
                }
            }
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc)
}

/// # Safety
/// `w` points to `blocks` Q2_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q2_k_q8_k_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mut acc = _mm256_setzero_ps();
    let mut acc_mins = _mm256_setzero_ps();
    let m3 = _mm256_set1_epi8(3);
    let m4 = _mm_set1_epi8(0x0F);
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ2K>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let da = q8k_scale(ba);
            let dall = _mm256_mul_ps(
                _mm256_set1_ps(da),
                f16_splat(bw.add(offset_of!(BlockQ2K, d))),
            );
            let dmin = _mm256_mul_ps(
                _mm256_set1_ps(da),
                f16_splat(bw.add(offset_of!(BlockQ2K, dmin))),
            );
            let sc = _mm_loadu_si128(bw.add(offset_of!(BlockQ2K, scales)).cast());
            // Σ_j bsums[j] * (sc[j] >> 4): |bsum| <= 16 * 128 and mins < 16, exact in i32.
            let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
            let bsums = _mm256_loadu_si256(ba.add(offset_of!(BlockQ8K, bsums)).cast());
            acc_mins = _mm256_fmadd_ps(
                dmin,
                _mm256_cvtepi32_ps(_mm256_madd_epi16(bsums, mins)),
                acc_mins,
            );
            let scales = _mm_and_si128(sc, m4);
            let ys = ba.add(offset_of!(BlockQ8K, qs));
            let mut sumi = _mm256_setzero_si256();
            for k in 0..2 {
                // Bits 2s of q2[32k + l] are element 128k + 32s + l; shifting right by two per
                // step keeps them at bits 0 and 1 of each byte (at most 6 bits of shift).
                let mut q = _mm256_loadu_si256(bw.add(offset_of!(BlockQ2K, qs) + 32 * k).cast());
                for s in 0..4 {
                    let x = _mm256_and_si256(q, m3);
                    q = _mm256_srli_epi16(q, 2);
                    let y = _mm256_loadu_si256(ys.add(128 * k + 32 * s).cast());
                    let sv = scale_pair(scales, 8 * k + 2 * s);
                    sumi =
                        _mm256_add_epi32(sumi, _mm256_madd_epi16(_mm256_maddubs_epi16(x, y), sv));
                }
            }
            acc = _mm256_fmadd_ps(dall, _mm256_cvtepi32_ps(sumi), acc);
        }
    }
    hsum(acc) - hsum(acc_mins)
}
