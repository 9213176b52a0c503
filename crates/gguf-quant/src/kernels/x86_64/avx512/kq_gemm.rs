//! AVX-512 tiles of the K-quant prompt products (`avx2::kq_gemm`, whose driver, unpacking and
//! float steps they share): the integer part takes two 32-value chunks of a super-block per
//! 512-bit vector. Its sums are exact (the same pair sums, scaled and added in i32, only in
//! another order of exact additions), and every float step is AVX2's, so each output is
//! AVX2's bit for bit.

use std::arch::x86_64::*;

use super::avx2::kq_gemm::{
    bsums, finish_row, gemm, group_blocks, group_scales, q2_k_rows, q3_k_rows, Format, Unpacked,
    GROUP, Q2K, Q3K, Q5K, Q6K, Q8K_QS, TILE_ROWS,
};
use super::kquants;
use crate::blocks::QK_K;

/// `avx2::kq_gemm::tile_block` with 512-bit integer steps (see the module's comment).
///
/// # Safety
/// As `avx2::kq_gemm::tile_block`'s, on a CPU with AVX-512 F/BW/VL besides AVX2, FMA and
/// F16C; `F` is not a signed format.
#[allow(clippy::too_many_arguments)]
#[inline]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
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
    const { assert!(!F::SIGNED) };
    for (r, u) in tiles.iter_mut().enumerate().take(rows) {
        // SAFETY: row r holds block b (caller); the CPU has AVX2, FMA and F16C.
        unsafe { F::unpack(w.add(r * row_bytes + b * F::SIZE), u) };
    }
    for g in (0..batch).step_by(GROUP) {
        // SAFETY: the caller's guarantee for block b of every activation row.
        let ys = unsafe { group_blocks(a, act_row, b, g, batch) };
        // SAFETY: each of `ys` is a whole Q8_K block (above), `acc` holds this group's lanes
        // of every row (caller); `Unpacked`'s arrays hold the 64-byte runs read (unaligned).
        unsafe {
            let dy = group_scales(&ys);
            for (r, u) in tiles.iter().enumerate().take(rows) {
                let mut s = [_mm512_setzero_si512(); GROUP];
                if F::BIASED {
                    let corr = _mm256_load_si256(u.corr.as_ptr().cast());
                    for (t, s) in s.iter_mut().enumerate() {
                        *s = _mm512_zextsi256_si512(_mm256_madd_epi16(corr, bsums(&ys, t)));
                    }
                }
                for c in 0..QK_K / 64 {
                    let wq = _mm512_loadu_si512(u.codes.as_ptr().add(64 * c).cast());
                    let sc = _mm512_loadu_si512(u.scales.as_ptr().add(32 * c).cast());
                    for (t, s) in s.iter_mut().enumerate() {
                        let y = _mm512_loadu_si512(ys[t].add(Q8K_QS + 64 * c).cast());
                        *s = _mm512_add_epi32(
                            *s,
                            _mm512_madd_epi16(_mm512_maddubs_epi16(wq, y), sc),
                        );
                    }
                }
                let s = s.map(|s| {
                    _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64::<1>(s))
                });
                finish_row::<F>(u, s, &ys, dy, acc.add(r * stride + g));
            }
        }
    }
}

/// All blocks of one tile, in order (an `avx2::kq_gemm::TileFn`).
///
/// # Safety
/// As [`tile_block`], for every block `b < blocks`.
#[allow(clippy::too_many_arguments)]
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
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
            // SAFETY: this ISA's table hands this kernel out only on a CPU with AVX-512
            // F/BW/VL/VNNI, AVX2, FMA and F16C, which `tile` needs; it computes AVX2's tile's
            // numbers (the module's comment).
            unsafe { gemm::<$format>(n, w, rb, a, ar, out, $rows, tile::<$format>) }
        }
    };
}
kq_gemm!(q6_k_gemm, Q6K, kquants::q6_k_q8_k_rows);
kq_gemm!(q5_k_gemm, Q5K, kquants::q5_k_q8_k_rows);
kq_gemm!(q3_k_gemm, Q3K, q3_k_rows);
kq_gemm!(q2_k_gemm, Q2K, q2_k_rows);
