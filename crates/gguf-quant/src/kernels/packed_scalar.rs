//! Scalar twins of the packed-layout kernels (`crate::kernels::packed`), in llama.cpp's orders: the
//! SIMD kernels must equal them bit for bit (`packed_tests`). They read the same tiles.
//!
//! For Q4_K, llama.cpp's repacked kernels (`ggml_gemv_q4_K_8x8_q8_K`,
//! `ggml_gemm_q4_K_8x8_q8_K`) compute the same exact integer sums as `vec_dot` and differ in
//! how they are scaled and added in f32. For one output, with `d = d_w · d_a` and
//! `m = dmin_w · d_a` per super-block, `S_g` the scaled integer sum of the 64-value group `g`
//! (`sc[2g]·Σ lo + sc[2g+1]·Σ hi`) and `M_g` its min term
//! (`mn[2g]·bsum[2g] + mn[2g+1]·bsum[2g+1]`):
//! - the GEMV adds, per super-block, `acc = fma(ΣS_g, d, acc)` and `accm = fma(ΣM_g, m, accm)`;
//! - the GEMM adds, per group, `acc = fma(S_g, d, acc)` and `accm = fma(M_g, m, accm)`;
//!
//! and both return `acc - accm`.

use crate::blocks::{BlockQ8K, QK_K};
use crate::fp::f16_to_f32;
use crate::kernels::packed::{
    Q4K_X8_D, Q4K_X8_DMIN, Q4K_X8_MINS, Q4K_X8_QS, Q4K_X8_SCALES, Q4K_X8_TILE,
};

use super::PackedKernels;

/// The scalar twins of the Q4_K layout's products, and the scalar ISA's kernels for it.
pub(crate) const Q4_K_X8: PackedKernels = PackedKernels {
    gemv: q4_k_x8_gemv,
    gemm4: q4_k_x8_gemm4,
};

/// One output: row `r` of the group whose tiles are `w` against the Q8_K row `a`, summed per
/// group of 64 values (GEMM) or per super-block (GEMV).
fn q4_k_x8_one(blocks: usize, w: &[u8], r: usize, a: &[u8], per_group: bool) -> f32 {
    let (mut acc, mut accm) = (0f32, 0f32);
    let a_size = size_of::<BlockQ8K>();
    for i in 0..blocks {
        let tile = &w[i * Q4K_X8_TILE..(i + 1) * Q4K_X8_TILE];
        let blk = &a[i * a_size..(i + 1) * a_size];
        let da = f32::from_le_bytes([blk[0], blk[1], blk[2], blk[3]]);
        let half = |at: usize| f16_to_f32(u16::from_le_bytes([tile[at], tile[at + 1]]));
        let d = half(Q4K_X8_D + 2 * r) * da;
        let m = half(Q4K_X8_DMIN + 2 * r) * da;
        let q8 = |k: usize| i32::from(blk[4 + k] as i8);
        let bsum = |k: usize| i32::from(i16::from_le_bytes([blk[260 + 2 * k], blk[261 + 2 * k]]));
        let (mut isum, mut imin) = (0i32, 0i32);
        for g in 0..QK_K / 64 {
            let (mut lo, mut hi) = (0i32, 0i32);
            for t in 0..8 {
                for b in 0..4 {
                    let q = tile[Q4K_X8_QS + 256 * g + 32 * t + 4 * r + b];
                    lo += i32::from(q & 0x0F) * q8(64 * g + 4 * t + b);
                    hi += i32::from(q >> 4) * q8(64 * g + 32 + 4 * t + b);
                }
            }
            let sc = |j: usize| i32::from(tile[Q4K_X8_SCALES + 8 * j + r]);
            let mn = |h: usize| i32::from(tile[Q4K_X8_MINS + 16 * g + 2 * r + h]);
            let s_g = sc(2 * g) * lo + sc(2 * g + 1) * hi;
            let m_g = mn(0) * (bsum(4 * g) + bsum(4 * g + 1))
                + mn(1) * (bsum(4 * g + 2) + bsum(4 * g + 3));
            if per_group {
                acc = (s_g as f32).mul_add(d, acc); // FMA
                accm = (m_g as f32).mul_add(m, accm); // FMA
            } else {
                isum += s_g;
                imin += m_g;
            }
        }
        if !per_group {
            acc = (isum as f32).mul_add(d, acc); // FMA
            accm = (imin as f32).mul_add(m, accm); // FMA
        }
    }
    acc - accm
}

/// Every output of `out.len() / 8` groups against one activation row `a`.
fn q4_k_x8_rows(n: usize, w: &[u8], a: &[u8], out: &mut [f32], per_group: bool) {
    let blocks = n / QK_K;
    let tiles = blocks * Q4K_X8_TILE;
    for (g, o) in out.chunks_exact_mut(8).enumerate() {
        let w = &w[g * tiles..(g + 1) * tiles];
        for (r, y) in o.iter_mut().enumerate() {
            *y = q4_k_x8_one(blocks, w, r, a, per_group);
        }
    }
}

/// The twin of `ggml_gemv_q4_K_8x8_q8_K`.
fn q4_k_x8_gemv(n: usize, w: &[u8], a: &[u8], out: &mut [f32]) {
    q4_k_x8_rows(n, w, a, out, false);
}

/// The twin of `ggml_gemm_q4_K_8x8_q8_K` (four activation rows).
fn q4_k_x8_gemm4(n: usize, w: &[u8], a: [&[u8]; 4], out: [&mut [f32]; 4]) {
    for (a, out) in a.into_iter().zip(out) {
        q4_k_x8_rows(n, w, a, out, true);
    }
}
