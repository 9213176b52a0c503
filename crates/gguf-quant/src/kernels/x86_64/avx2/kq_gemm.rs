//! AVX2 GEMM kernels (prompt products) of Q6_K, Q5_K, Q4_K, Q3_K, Q2_K and IQ4_XS against
//! Q8_K, summed in the order of llama.cpp's tiled K-quant product (`kernels::kq_gemm`, whose
//! scalar twins they equal bit for bit) from its batch floor up, and by the row-by-row dot
//! kernels below it, as llama.cpp does.
//!
//! A tile is up to [`TILE_ROWS`] weight rows. For each super-block, the tile's blocks are
//! unpacked once (one byte per value, the scales as the i16 lanes `madd` wants, the mins and
//! bias corrections), then every group of eight activation rows runs against each unpacked row
//! from L1: per 32 values one `maddubs` and one scale `madd` per activation row, the eight i32
//! lane sums reduced together, and one f32 step per output (`res = d·s1 [- dmin·s2]`,
//! `acc = fma(res, d_y, acc)`) into the tile's accumulators.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::common::scale_pair;
use super::{iq, kquants};
use crate::blocks::{BlockIq4Xs, BlockQ2K, BlockQ3K, BlockQ4K, BlockQ5K, BlockQ6K, BlockQ8K};
use crate::blocks::{K_SCALE_SIZE, QK_K};
use crate::dequant::k_scale_min;
use crate::fp::f16_to_f32;
use crate::grids::KVALUES_IQ4NL;
use crate::kernels::kq_gemm::MIN_BATCH;
use crate::kernels::RowsFn;

/// Weight rows per tile: their unpacked blocks (`TILE_ROWS` × 864 bytes) stay in L1 while every
/// activation row runs against them.
pub(in crate::kernels::x86_64) const TILE_ROWS: usize = 16;
/// Activation rows computed together: one lane each of the reduced sums and accumulators.
pub(in crate::kernels::x86_64) const GROUP: usize = 8;
const Q8K: usize = size_of::<BlockQ8K>();
pub(in crate::kernels::x86_64) const Q8K_QS: usize = offset_of!(BlockQ8K, qs);
const Q8K_BSUMS: usize = offset_of!(BlockQ8K, bsums);

/// A Q8_K block of zeros, read in place of the missing activation rows of the last group.
static ZERO_Q8K: [u8; Q8K] = [0; Q8K];

/// One weight super-block, unpacked for the product.
#[repr(C, align(32))]
pub(in crate::kernels::x86_64) struct Unpacked {
    /// The 256 values as unsigned bytes: the value plus the format's bias (Q6_K 32, Q3_K 4,
    /// else 0); IQ4_XS: the magnitude of the value.
    pub(in crate::kernels::x86_64) codes: [u8; QK_K],
    /// Per 32 values, the scales of their two groups of 16 as 16 i16 lanes (8 each), matching
    /// `maddubs`'s pair sums.
    pub(in crate::kernels::x86_64) scales: [i16; QK_K / 2],
    /// Per group of 16, `-bias · scale` (the bias correction, times Q8_K's `bsums`).
    pub(in crate::kernels::x86_64) corr: [i16; 16],
    /// Per group of 16, its min (the formats with mins).
    pub(in crate::kernels::x86_64) mins: [i16; 16],
    /// IQ4_XS: the values, whose signs go onto the activations.
    pub(in crate::kernels::x86_64) signs: [i8; QK_K],
    pub(in crate::kernels::x86_64) d: f32,
    pub(in crate::kernels::x86_64) dmin: f32,
}

const _: () = assert!(size_of::<Unpacked>() == 864);

const EMPTY: Unpacked = Unpacked {
    codes: [0; QK_K],
    scales: [0; QK_K / 2],
    corr: [0; 16],
    mins: [0; 16],
    signs: [0; QK_K],
    d: 0.0,
    dmin: 0.0,
};

/// A weight format as the tiled product reads it.
pub(in crate::kernels::x86_64) trait Format {
    /// Bytes per block.
    const SIZE: usize;
    /// Whether blocks have mins (`s2`, subtracted with `dmin`).
    const HAS_MIN: bool;
    /// Whether `codes` carry a bias (`corr` applies).
    const BIASED: bool;
    /// Whether the values are signed (IQ4_XS: `codes` holds magnitudes, `signs` the values).
    const SIGNED: bool;

    /// Unpacks the block at `x` into `u`.
    ///
    /// # Safety
    /// `x` must point to one block of the format; the CPU must have AVX2, FMA and F16C.
    unsafe fn unpack(x: *const u8, u: &mut Unpacked);
}

/// The f16 at `p`, widened.
///
/// # Safety
/// `p` must point to 2 readable bytes.
#[inline(always)]
unsafe fn f16_field(p: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes; the read is unaligned.
    f16_to_f32(unsafe { p.cast::<u16>().read_unaligned() }.to_le())
}

/// Fills `scales` and `corr` from the 16 group scales `g` (signed bytes, group j = values
/// 16j..16j+16), with the format's `bias`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn set_scales(u: &mut Unpacked, g: __m128i, bias: i16) {
    for c in 0..8 {
        // SAFETY: `scales` holds 8 runs of 16 i16, 32-byte aligned (the struct's alignment
        // and 256-byte offset).
        unsafe {
            _mm256_store_si256(
                u.scales.as_mut_ptr().add(16 * c).cast(),
                scale_pair(g, 2 * c),
            )
        };
    }
    if bias != 0 {
        let corr = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(g), _mm256_set1_epi16(-bias));
        // SAFETY: `corr` is 16 i16 at a 32-byte aligned offset.
        unsafe { _mm256_store_si256(u.corr.as_mut_ptr().cast(), corr) };
    }
}

/// Stores 32 codes at `codes[at..at + 32]`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn store_codes(u: &mut Unpacked, at: usize, v: __m256i) {
    assert!(at + 32 <= QK_K);
    // SAFETY: in bounds (asserted), and `at` is a multiple of 32 in every caller, so aligned.
    unsafe { _mm256_storeu_si256(u.codes.as_mut_ptr().add(at).cast(), v) };
}

pub(in crate::kernels::x86_64) struct Q6K;
impl Format for Q6K {
    const SIZE: usize = size_of::<BlockQ6K>();
    const HAS_MIN: bool = false;
    const BIASED: bool = true;
    const SIGNED: bool = false;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn unpack(x: *const u8, u: &mut Unpacked) {
        let m4 = _mm256_set1_epi8(0x0F);
        let m2 = _mm256_set1_epi8(0x03);
        // SAFETY: `x` is one Q6_K block (caller); the loads stay within its fields.
        unsafe {
            let (ql, qh) = (
                x.add(offset_of!(BlockQ6K, ql)),
                x.add(offset_of!(BlockQ6K, qh)),
            );
            for h in 0..2 {
                let l1 = _mm256_loadu_si256(ql.add(64 * h).cast());
                let l2 = _mm256_loadu_si256(ql.add(64 * h + 32).cast());
                let hb = _mm256_loadu_si256(qh.add(32 * h).cast());
                // Value 128h + 32s + l: a nibble of ql (low: s = 0, 1; high: 2, 3) and bits
                // 2s of qh[32h + l] above it.
                let high = |s: i32| {
                    let bits = match s {
                        0 => hb,
                        1 => _mm256_srli_epi16(hb, 2),
                        2 => _mm256_srli_epi16(hb, 4),
                        _ => _mm256_srli_epi16(hb, 6),
                    };
                    _mm256_slli_epi16(_mm256_and_si256(bits, m2), 4)
                };
                let lo = |v: __m256i| _mm256_and_si256(v, m4);
                let hi = |v: __m256i| _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
                store_codes(u, 128 * h, _mm256_or_si256(lo(l1), high(0)));
                store_codes(u, 128 * h + 32, _mm256_or_si256(lo(l2), high(1)));
                store_codes(u, 128 * h + 64, _mm256_or_si256(hi(l1), high(2)));
                store_codes(u, 128 * h + 96, _mm256_or_si256(hi(l2), high(3)));
            }
            let g = _mm_loadu_si128(x.add(offset_of!(BlockQ6K, scales)).cast());
            set_scales(u, g, 32);
            u.d = f16_field(x.add(offset_of!(BlockQ6K, d)));
        }
    }
}

/// The Q4_K/Q5_K head (`d`, `dmin`, scales and mins, at Q4_K's offsets in both).
///
/// # Safety
/// `x` must point to a Q4_K or Q5_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q45_head(x: *const u8, u: &mut Unpacked) {
    const _: () = assert!(
        offset_of!(BlockQ4K, d) == offset_of!(BlockQ5K, d)
            && offset_of!(BlockQ4K, dmin) == offset_of!(BlockQ5K, dmin)
            && offset_of!(BlockQ4K, scales) == offset_of!(BlockQ5K, scales)
    );
    // SAFETY: the caller guarantees the block; the fields lie where Q4_K's do (asserted).
    let (sc, mn) = unsafe {
        u.d = f16_field(x.add(offset_of!(BlockQ4K, d)));
        u.dmin = f16_field(x.add(offset_of!(BlockQ4K, dmin)));
        let s = std::slice::from_raw_parts(x.add(offset_of!(BlockQ4K, scales)), K_SCALE_SIZE);
        k_scale_min(s)
    };
    // Each scale and min of a sub-block of 32 for both its groups of 16.
    let twice = |v: [u8; 8]| -> [u8; 16] { std::array::from_fn(|j| v[j / 2]) };
    set_scales(u, _mm_loadu_si128(twice(sc).as_ptr().cast()), 0);
    let mins = _mm256_cvtepu8_epi16(_mm_loadu_si128(twice(mn).as_ptr().cast()));
    // SAFETY: `mins` is 16 i16 at a 32-byte aligned offset.
    unsafe { _mm256_store_si256(u.mins.as_mut_ptr().cast(), mins) };
}

pub(in crate::kernels::x86_64) struct Q5K;
impl Format for Q5K {
    const SIZE: usize = size_of::<BlockQ5K>();
    const HAS_MIN: bool = true;
    const BIASED: bool = false;
    const SIGNED: bool = false;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn unpack(x: *const u8, u: &mut Unpacked) {
        let m4 = _mm256_set1_epi8(0x0F);
        let one = _mm256_set1_epi8(1);
        // SAFETY: `x` is one Q5_K block (caller); the loads stay within its fields.
        unsafe {
            q45_head(x, u);
            let qs = x.add(offset_of!(BlockQ5K, qs));
            let hb = _mm256_loadu_si256(x.add(offset_of!(BlockQ5K, qh)).cast());
            for k in 0..4 {
                let q = _mm256_loadu_si256(qs.add(32 * k).cast());
                // Bits 2k and 2k + 1 of qh[l]: the fifth bits of values 64k + l and 64k + 32 + l.
                let bit = |s: i32| {
                    let v = _mm256_srl_epi16(hb, _mm_cvtsi32_si128(s));
                    _mm256_slli_epi16(_mm256_and_si256(v, one), 4)
                };
                let (s0, s1) = (2 * k as i32, 2 * k as i32 + 1);
                let lo = _mm256_or_si256(_mm256_and_si256(q, m4), bit(s0));
                let hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(q, 4), m4), bit(s1));
                store_codes(u, 64 * k, lo);
                store_codes(u, 64 * k + 32, hi);
            }
        }
    }
}

pub(in crate::kernels::x86_64) struct Q4K;
impl Format for Q4K {
    const SIZE: usize = size_of::<BlockQ4K>();
    const HAS_MIN: bool = true;
    const BIASED: bool = false;
    const SIGNED: bool = false;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn unpack(x: *const u8, u: &mut Unpacked) {
        let m4 = _mm256_set1_epi8(0x0F);
        // SAFETY: `x` is one Q4_K block (caller); the loads stay within its fields.
        unsafe {
            q45_head(x, u);
            let qs = x.add(offset_of!(BlockQ4K, qs));
            for k in 0..4 {
                let q = _mm256_loadu_si256(qs.add(32 * k).cast());
                store_codes(u, 64 * k, _mm256_and_si256(q, m4));
                store_codes(
                    u,
                    64 * k + 32,
                    _mm256_and_si256(_mm256_srli_epi16(q, 4), m4),
                );
            }
        }
    }
}

pub(in crate::kernels::x86_64) struct Q3K;
impl Format for Q3K {
    const SIZE: usize = size_of::<BlockQ3K>();
    const HAS_MIN: bool = false;
    const BIASED: bool = true;
    const SIGNED: bool = false;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn unpack(x: *const u8, u: &mut Unpacked) {
        const KMASK1: u32 = 0x0303_0303;
        const KMASK2: u32 = 0x0f0f_0f0f;
        let m3 = _mm256_set1_epi8(3);
        let one = _mm256_set1_epi8(1);
        // SAFETY: `x` is one Q3_K block (caller); the loads stay within its fields.
        unsafe {
            // Value 128h + 32s + l: bits 2s of qs[32h + l], and bit 4h + s of hmask[l] above
            // them (the code is the value plus 4).
            let mut hb = _mm256_loadu_si256(x.add(offset_of!(BlockQ3K, hmask)).cast());
            for h in 0..2 {
                let mut q = _mm256_loadu_si256(x.add(offset_of!(BlockQ3K, qs) + 32 * h).cast());
                for s in 0..4 {
                    let code = _mm256_or_si256(
                        _mm256_and_si256(q, m3),
                        _mm256_slli_epi16(_mm256_and_si256(hb, one), 2),
                    );
                    store_codes(u, 128 * h + 32 * s, code);
                    q = _mm256_srli_epi16(q, 2);
                    hb = _mm256_srli_epi16(hb, 1);
                }
            }
            let sc = x.add(offset_of!(BlockQ3K, scales));
            let a0 = sc.cast::<u32>().read_unaligned().to_le();
            let a1 = sc.add(4).cast::<u32>().read_unaligned().to_le();
            let tmp = sc.add(8).cast::<u32>().read_unaligned().to_le();
            let g = _mm_sub_epi8(
                _mm_set_epi32(
                    (((a1 >> 4) & KMASK2) | (((tmp >> 6) & KMASK1) << 4)) as i32,
                    (((a0 >> 4) & KMASK2) | (((tmp >> 4) & KMASK1) << 4)) as i32,
                    ((a1 & KMASK2) | (((tmp >> 2) & KMASK1) << 4)) as i32,
                    ((a0 & KMASK2) | ((tmp & KMASK1) << 4)) as i32,
                ),
                _mm_set1_epi8(32),
            );
            set_scales(u, g, 4);
            u.d = f16_field(x.add(offset_of!(BlockQ3K, d)));
        }
    }
}

pub(in crate::kernels::x86_64) struct Q2K;
impl Format for Q2K {
    const SIZE: usize = size_of::<BlockQ2K>();
    const HAS_MIN: bool = true;
    const BIASED: bool = false;
    const SIGNED: bool = false;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn unpack(x: *const u8, u: &mut Unpacked) {
        let m3 = _mm256_set1_epi8(3);
        let m4 = _mm_set1_epi8(0x0F);
        // SAFETY: `x` is one Q2_K block (caller); the loads stay within its fields.
        unsafe {
            for k in 0..2 {
                // Value 128k + 32s + l: bits 2s of qs[32k + l].
                let mut q = _mm256_loadu_si256(x.add(offset_of!(BlockQ2K, qs) + 32 * k).cast());
                for s in 0..4 {
                    store_codes(u, 128 * k + 32 * s, _mm256_and_si256(q, m3));
                    q = _mm256_srli_epi16(q, 2);
                }
            }
            let sc = _mm_loadu_si128(x.add(offset_of!(BlockQ2K, scales)).cast());
            set_scales(u, _mm_and_si128(sc, m4), 0);
            let mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sc, 4), m4));
            _mm256_store_si256(u.mins.as_mut_ptr().cast(), mins);
            u.d = f16_field(x.add(offset_of!(BlockQ2K, d)));
            u.dmin = f16_field(x.add(offset_of!(BlockQ2K, dmin)));
        }
    }
}

pub(in crate::kernels::x86_64) struct Iq4Xs;
impl Format for Iq4Xs {
    const SIZE: usize = size_of::<BlockIq4Xs>();
    const HAS_MIN: bool = false;
    const BIASED: bool = false;
    const SIGNED: bool = true;

    #[inline]
    #[target_feature(enable = "avx2,fma,f16c")]
    unsafe fn unpack(x: *const u8, u: &mut Unpacked) {
        let m4 = _mm256_set1_epi8(0x0F);
        // SAFETY: `x` is one IQ4_XS block (caller); the loads stay within its fields and the
        // table (16 bytes).
        unsafe {
            let table = _mm256_broadcastsi128_si256(_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()));
            let qs = x.add(offset_of!(BlockIq4Xs, qs));
            for p in 0..4 {
                // Sub-blocks 2p and 2p + 1: value 32ib + j is the low (j < 16) or high nibble
                // of qs[16ib + j % 16].
                let q = _mm256_loadu_si256(qs.add(32 * p).cast());
                let lo = _mm256_shuffle_epi8(table, _mm256_and_si256(q, m4));
                let hi = _mm256_shuffle_epi8(table, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
                for (half, v) in [
                    _mm256_permute2x128_si256::<0x20>(lo, hi),
                    _mm256_permute2x128_si256::<0x31>(lo, hi),
                ]
                .into_iter()
                .enumerate()
                {
                    let at = 64 * p + 32 * half;
                    store_codes(u, at, _mm256_sign_epi8(v, v));
                    _mm256_storeu_si256(u.signs.as_mut_ptr().add(at).cast(), v);
                }
            }
            let sl = x.add(offset_of!(BlockIq4Xs, scales_l));
            let sh = x
                .add(offset_of!(BlockIq4Xs, scales_h))
                .cast::<u16>()
                .read_unaligned();
            let sh = u16::from_le(sh);
            let mut g = [0u8; 16];
            for ib in 0..8 {
                let low = (*sl.add(ib / 2) >> (4 * (ib % 2))) & 0x0F;
                let ls = low | (((sh >> (2 * ib)) & 3) as u8) << 4;
                g[2 * ib] = ls.wrapping_sub(32);
                g[2 * ib + 1] = ls.wrapping_sub(32);
            }
            set_scales(u, _mm_loadu_si128(g.as_ptr().cast()), 0);
            u.d = f16_field(x.add(offset_of!(BlockIq4Xs, d)));
        }
    }
}

/// The lane sums of each of eight vectors: lane t of the result is the sum of `v[t]`'s lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn reduce8(v: [__m256i; GROUP]) -> __m256i {
    let h01 = _mm256_hadd_epi32(v[0], v[1]);
    let h23 = _mm256_hadd_epi32(v[2], v[3]);
    let h45 = _mm256_hadd_epi32(v[4], v[5]);
    let h67 = _mm256_hadd_epi32(v[6], v[7]);
    // Lane t (t < 4) of q0: v[t]'s low 128-bit half summed; lane 4 + t: its high half.
    let q0 = _mm256_hadd_epi32(h01, h23);
    let q1 = _mm256_hadd_epi32(h45, h67);
    _mm256_add_epi32(
        _mm256_permute2x128_si256::<0x20>(q0, q1),
        _mm256_permute2x128_si256::<0x31>(q0, q1),
    )
}

/// One super-block `b` of a tile: weight rows `w + r·row_bytes` (r < `rows`) against the
/// `batch` activation rows `a + j·act_row`, accumulated into `acc[r·stride + j]`.
///
/// # Safety
/// Each weight row holds block `b` of format `F` at `b·F::SIZE`, each activation row its Q8_K
/// block `b` at `b·Q8K`; `acc` holds `rows` runs of `stride >= batch.next_multiple_of(8)`
/// floats; `rows <= TILE_ROWS`; the CPU has AVX2, FMA and F16C.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile_block<F: Format>(
    tiles: &mut [Unpacked; TILE_ROWS],
    b: usize,
    w: *const u8,
    row_bytes: usize,
    rows: usize,
    a: *const u8,
    act_row: usize,
    batch: usize,
    acc: *mut f32,
    stride: usize,
) {
    for (r, u) in tiles.iter_mut().enumerate().take(rows) {
        // SAFETY: row r holds block b (caller).
        unsafe { F::unpack(w.add(r * row_bytes + b * F::SIZE), u) };
    }
    for g in (0..batch).step_by(GROUP) {
        // SAFETY: the caller's guarantee for block b of every activation row.
        let ys = unsafe { group_blocks(a, act_row, b, g, batch) };
        // SAFETY: each of `ys` is a whole Q8_K block (above), `acc` holds this group's lanes
        // of every row (caller); `Unpacked`'s arrays are 32-byte aligned at 32-byte offsets.
        unsafe {
            let dy = group_scales(&ys);
            for (r, u) in tiles.iter().enumerate().take(rows) {
                let mut s = [_mm256_setzero_si256(); GROUP];
                if F::BIASED {
                    let corr = _mm256_load_si256(u.corr.as_ptr().cast());
                    for (t, s) in s.iter_mut().enumerate() {
                        *s = _mm256_madd_epi16(corr, bsums(&ys, t));
                    }
                }
                for c in 0..QK_K / 32 {
                    let wq = _mm256_load_si256(u.codes.as_ptr().add(32 * c).cast());
                    let sc = _mm256_load_si256(u.scales.as_ptr().add(16 * c).cast());
                    let sg = if F::SIGNED {
                        _mm256_load_si256(u.signs.as_ptr().add(32 * c).cast())
                    } else {
                        wq
                    };
                    for (t, s) in s.iter_mut().enumerate() {
                        let mut y = _mm256_loadu_si256(ys[t].add(Q8K_QS + 32 * c).cast());
                        if F::SIGNED {
                            y = _mm256_sign_epi8(y, sg);
                        }
                        *s = _mm256_add_epi32(
                            *s,
                            _mm256_madd_epi16(_mm256_maddubs_epi16(wq, y), sc),
                        );
                    }
                }
                finish_row::<F>(u, s, &ys, dy, acc.add(r * stride + g));
            }
        }
    }
}

/// The Q8_K blocks `b` of activation rows `g..g + GROUP`, [`ZERO_Q8K`] in place of rows past
/// `batch`.
///
/// # Safety
/// Each activation row `a + j·act_row` (`j < batch`) holds block `b` at `b·Q8K`.
#[inline]
pub(in crate::kernels::x86_64) unsafe fn group_blocks(
    a: *const u8,
    act_row: usize,
    b: usize,
    g: usize,
    batch: usize,
) -> [*const u8; GROUP] {
    std::array::from_fn(|t| {
        if g + t < batch {
            // SAFETY: activation row g + t holds block b (caller).
            unsafe { a.add((g + t) * act_row + b * Q8K) }
        } else {
            ZERO_Q8K.as_ptr()
        }
    })
}

/// The scales `d` of a group's blocks, one per lane.
///
/// # Safety
/// Each of `ys` is a whole Q8_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn group_scales(ys: &[*const u8; GROUP]) -> __m256 {
    // SAFETY: the caller's guarantee; `d` is the block's first field, read unaligned.
    let d = |t: usize| unsafe { ys[t].cast::<f32>().read_unaligned() };
    _mm256_setr_ps(d(0), d(1), d(2), d(3), d(4), d(5), d(6), d(7))
}

/// The `bsums` of block `ys[t]`.
///
/// # Safety
/// `ys[t]` is a whole Q8_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn bsums(ys: &[*const u8; GROUP], t: usize) -> __m256i {
    // SAFETY: the caller's guarantee; the load is unaligned.
    unsafe { _mm256_loadu_si256(ys[t].add(Q8K_BSUMS).cast()) }
}

/// One weight row's float step for a group of activation rows, from its integer lane sums `s`
/// (one vector per activation row): `res = d·Σs [- dmin·Σ(mins·bsums)]`, then
/// `acc = fma(res, d_y, acc)` into the group's eight accumulators at `acc`.
///
/// # Safety
/// Each of `ys` is a whole Q8_K block; `acc` points to eight floats.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn finish_row<F: Format>(
    u: &Unpacked,
    s: [__m256i; GROUP],
    ys: &[*const u8; GROUP],
    dy: __m256,
    acc: *mut f32,
) {
    let mut res = _mm256_mul_ps(_mm256_set1_ps(u.d), _mm256_cvtepi32_ps(reduce8(s)));
    if F::HAS_MIN {
        // SAFETY: `mins` is 16 i16 at a 32-byte aligned offset; `ys` are blocks (caller).
        let mins = unsafe { _mm256_load_si256(u.mins.as_ptr().cast()) };
        // SAFETY: as above.
        let m = std::array::from_fn(|t| _mm256_madd_epi16(mins, unsafe { bsums(ys, t) }));
        res = _mm256_fnmadd_ps(_mm256_set1_ps(u.dmin), _mm256_cvtepi32_ps(reduce8(m)), res);
    }
    // SAFETY: eight floats at `acc` (caller); the load and the store are unaligned.
    unsafe { _mm256_storeu_ps(acc, _mm256_fmadd_ps(res, dy, _mm256_loadu_ps(acc))) };
}

/// All blocks of one tile, in order.
///
/// # Safety
/// As [`tile_block`], for every block `b < blocks`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn tile<F: Format>(
    tiles: &mut [Unpacked; TILE_ROWS],
    blocks: usize,
    w: *const u8,
    row_bytes: usize,
    rows: usize,
    a: *const u8,
    act_row: usize,
    batch: usize,
    acc: *mut f32,
    stride: usize,
) {
    for b in 0..blocks {
        // SAFETY: the caller's guarantee for block b.
        unsafe { tile_block::<F>(tiles, b, w, row_bytes, rows, a, act_row, batch, acc, stride) };
    }
}

/// A tile of the tiled product, all its blocks in order: [`tile`]'s arguments and guarantees.
pub(in crate::kernels::x86_64) type TileFn = unsafe fn(
    &mut [Unpacked; TILE_ROWS],
    usize,
    *const u8,
    usize,
    usize,
    *const u8,
    usize,
    usize,
    *mut f32,
    usize,
);

/// The [`crate::kernels::GemmFn`] of format `F`: the tiled order from [`MIN_BATCH`] activation
/// rows up, with `tile` (an ISA's [`tile`] for `F`), and `row_by_row` (the ISA's several-rows
/// kernel) below.
///
/// # Safety
/// `tile` runs on this CPU and computes [`tile`]'s numbers.
#[allow(clippy::too_many_arguments)]
pub(in crate::kernels::x86_64) unsafe fn gemm<F: Format>(
    n: usize,
    w: &[u8],
    row_bytes: usize,
    a: &[u8],
    act_row: usize,
    out: &mut [&mut [f32]],
    row_by_row: RowsFn,
    tile: TileFn,
) {
    let batch = out.len();
    if batch < MIN_BATCH {
        for (b, o) in out.iter_mut().enumerate() {
            row_by_row(n, w, row_bytes, &a[b * act_row..], o);
        }
        return;
    }
    let rows = out[0].len();
    let blocks = n / QK_K;
    let used = blocks * F::SIZE;
    assert!(
        out.iter().all(|o| o.len() == rows)
            && (rows == 0 || (row_bytes >= used && w.len() >= (rows - 1) * row_bytes + used))
            && act_row >= blocks * Q8K
            && a.len() >= (batch - 1) * act_row + blocks * Q8K
    );
    let stride = batch.next_multiple_of(GROUP);
    let mut acc = vec![0f32; TILE_ROWS * stride];
    let mut tiles = Box::new([EMPTY; TILE_ROWS]);
    for r0 in (0..rows).step_by(TILE_ROWS) {
        let count = TILE_ROWS.min(rows - r0);
        acc.fill(0.0);
        // SAFETY: `tile` runs on this CPU (caller); the assert bounds every block of the tile's
        // rows (the last `used` bytes from its start) and of every activation row; `acc` holds
        // TILE_ROWS runs of `stride` floats.
        unsafe {
            tile(
                &mut tiles,
                blocks,
                w.as_ptr().add(r0 * row_bytes),
                row_bytes,
                count,
                a.as_ptr(),
                act_row,
                batch,
                acc.as_mut_ptr(),
                stride,
            )
        };
        for (j, o) in out.iter_mut().enumerate() {
            for (r, y) in o[r0..r0 + count].iter_mut().enumerate() {
                *y = acc[r * stride + j];
            }
        }
    }
}

/// Defines a [`RowsFn`] that runs a one-row dot kernel on each row (as `matmul` does for types
/// without a several-rows kernel).
macro_rules! rows_of {
    ($name:ident, $dot:path) => {
        pub(in crate::kernels::x86_64) fn $name(
            n: usize,
            w: &[u8],
            row_bytes: usize,
            a: &[u8],
            out: &mut [f32],
        ) {
            for (r, o) in out.iter_mut().enumerate() {
                *o = $dot(n, &w[r * row_bytes..], a);
            }
        }
    };
}
pub(in crate::kernels::x86_64) use rows_of;

/// Q6_K's several-rows kernel, as the AVX-512 tiles' driver takes it.
pub(in crate::kernels::x86_64) fn q6_k_rows(
    n: usize,
    w: &[u8],
    rb: usize,
    a: &[u8],
    out: &mut [f32],
) {
    kquants::q6_k_q8_k_rows(n, w, rb, a, out)
}
rows_of!(q5_k_rows, kquants::q5_k_q8_k);
rows_of!(q3_k_rows, kquants::q3_k_q8_k);
rows_of!(q2_k_rows, kquants::q2_k_q8_k);
rows_of!(iq4_xs_rows, iq::iq4_xs_q8_k);

/// Defines the [`GemmFn`](crate::kernels::GemmFn) `$name` for the format `$format`, whose
/// batches below the tiled floor run `$rows`.
macro_rules! kq_gemm {
    ($name:ident, $format:ty, $rows:path) => {
        pub(super) fn $name(
            n: usize,
            w: &[u8],
            rb: usize,
            a: &[u8],
            ar: usize,
            out: &mut [&mut [f32]],
        ) {
            // SAFETY: this ISA's table hands this kernel out only on a CPU with AVX2, FMA and
            // F16C, which `tile` needs.
            unsafe { gemm::<$format>(n, w, rb, a, ar, out, $rows, tile::<$format>) }
        }
    };
}
kq_gemm!(q6_k_gemm, Q6K, q6_k_rows);
kq_gemm!(q5_k_gemm, Q5K, q5_k_rows);
kq_gemm!(q4_k_gemm, Q4K, kquants::q4_k_q8_k_rows);
kq_gemm!(q3_k_gemm, Q3K, q3_k_rows);
kq_gemm!(q2_k_gemm, Q2K, q2_k_rows);
kq_gemm!(iq4_xs_gemm, Iq4Xs, iq4_xs_rows);
