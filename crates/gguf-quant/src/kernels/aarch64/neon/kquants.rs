//! NEON dot products of Q4_K and Q6_K against Q8_K, bit for bit as their scalar twins.

use std::arch::aarch64::*;
use std::mem::offset_of;

use super::common::{add_scaled, f16_at, f32_at, load_i8, load_u8, mla_i8};
use crate::blocks::{BlockQ4K, BlockQ6K, BlockQ8K, K_SCALE_SIZE};
use crate::dequant::k_scale_min;

safe_wrapper!(q4_k_q8_k, q4_k_q8_k_neon, Q4_K);
safe_wrapper!(q6_k_q8_k, q6_k_q8_k_neon, Q6_K);

/// # Safety
/// `w` points to `blocks` Q4_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "neon")]
unsafe fn q4_k_q8_k_neon(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let mask = vdupq_n_u8(0x0F);
    let mut sums = [vdupq_n_f32(0.0); 2];
    let mut sumf = 0f32;
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the block's fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ4K>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let packed = bw.add(offset_of!(BlockQ4K, scales));
            let (scales, mins) = k_scale_min(std::slice::from_raw_parts(packed, K_SCALE_SIZE));
            // Σ_j bsums[j] * mins[j / 2]: the pair sums |bsums[2j] + bsums[2j+1]| <= 2 * 16 *
            // 128 fit in i16, their products with 6-bit mins in i32.
            let bsums = ba.add(offset_of!(BlockQ8K, bsums));
            let b0 = vreinterpretq_s16_u8(load_u8(bsums));
            let b1 = vreinterpretq_s16_u8(load_u8(bsums.add(16)));
            let pairs = vpaddq_s16(b0, b1);
            let mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(mins.as_ptr())));
            let min_sums = vmlal_high_s16(
                vmull_s16(vget_low_s16(pairs), vget_low_s16(mins)),
                pairs,
                mins,
            );
            let sumi = vaddvq_s32(min_sums);
            // aux32[l] = Σ_j scale_j * Σ (q * y over the elements of sub-block j with index
            // l mod 8), as ggml's generic C keeps it. Per sub-block, the i16 lane sums hold
            // four products of at most 15 * 128 each.
            let (qs, ys) = (
                bw.add(offset_of!(BlockQ4K, qs)),
                ba.add(offset_of!(BlockQ8K, qs)),
            );
            let mut aux = [vdupq_n_s32(0); 2];
            for k in 0..4 {
                let q0 = load_u8(qs.add(32 * k));
                let q1 = load_u8(qs.add(32 * k + 16));
                let y = ys.add(64 * k);
                // Low nibbles: elements 64k + 0..32 (sub-block 2k); high: 64k + 32..64.
                let lo = mla_i8(
                    vdupq_n_s16(0),
                    vreinterpretq_s8_u8(vandq_u8(q0, mask)),
                    load_i8(y),
                );
                let lo = mla_i8(
                    lo,
                    vreinterpretq_s8_u8(vandq_u8(q1, mask)),
                    load_i8(y.add(16)),
                );
                let hi = mla_i8(
                    vdupq_n_s16(0),
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(q0)),
                    load_i8(y.add(32)),
                );
                let hi = mla_i8(
                    hi,
                    vreinterpretq_s8_u8(vshrq_n_u8::<4>(q1)),
                    load_i8(y.add(48)),
                );
                aux = add_scaled(aux, lo, i16::from(scales[2 * k]));
                aux = add_scaled(aux, hi, i16::from(scales[2 * k + 1]));
            }
            // Scalar: sums[l] = d.mul_add(aux32[l] as f32, sums[l]); sumf -= dmin * sumi (FMA).
            let da = f32_at(ba.add(offset_of!(BlockQ8K, d)));
            let d = vdupq_n_f32(f16_at(bw.add(offset_of!(BlockQ4K, d))) * da);
            sums[0] = vfmaq_f32(sums[0], d, vcvtq_f32_s32(aux[0]));
            sums[1] = vfmaq_f32(sums[1], d, vcvtq_f32_s32(aux[1]));
            let dmin = f16_at(bw.add(offset_of!(BlockQ4K, dmin))) * da;
            sumf = (-dmin).mul_add(sumi as f32, sumf);
        }
    }
    add_lanes_in_order(sumf, sums)
}

/// `start` plus the eight lanes of `v`, one at a time in lane order (as the scalar kernels end).
#[inline]
#[target_feature(enable = "neon")]
fn add_lanes_in_order(start: f32, v: [float32x4_t; 2]) -> f32 {
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` is a local array of eight f32, four written from each vector.
    unsafe {
        vst1q_f32(lanes.as_mut_ptr(), v[0]);
        vst1q_f32(lanes.as_mut_ptr().add(4), v[1]);
    }
    let mut sum = start;
    for x in lanes {
        sum += x;
    }
    sum
}

/// # Safety
/// `w` points to `blocks` Q6_K blocks and `a` to `blocks` Q8_K blocks.
#[target_feature(enable = "neon")]
unsafe fn q6_k_q8_k_neon(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let m4 = vdupq_n_u8(0x0F);
    let m30 = vdupq_n_u8(0x30);
    let k32 = vdupq_n_s8(32);
    let mut sums = [vdupq_n_f32(0.0); 2];
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and
        // stay within the fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ6K>());
            let ba = a.add(i * size_of::<BlockQ8K>());
            let ql = bw.add(offset_of!(BlockQ6K, ql));
            let qh = bw.add(offset_of!(BlockQ6K, qh));
            let scales = bw.add(offset_of!(BlockQ6K, scales));
            let ys = ba.add(offset_of!(BlockQ8K, qs));
            let mut aux = [vdupq_n_s32(0); 2];
            for h in 0..2 {
                let l = [0, 16, 32, 48].map(|o| load_u8(ql.add(64 * h + o)));
                let hb = [0, 16].map(|o| load_u8(qh.add(32 * h + o)));
                for t in 0..2 {
                    // Elements 128h + 32g + 16t + 0..16: the low or high nibbles of ql and
                    // bits 2g, 2g+1 of qh, moved to bits 4 and 5.
                    let groups = [
                        vorrq_u8(vandq_u8(l[t], m4), vandq_u8(vshlq_n_u8::<4>(hb[t]), m30)),
                        vorrq_u8(
                            vandq_u8(l[t + 2], m4),
                            vandq_u8(vshlq_n_u8::<2>(hb[t]), m30),
                        ),
                        vorrq_u8(vshrq_n_u8::<4>(l[t]), vandq_u8(hb[t], m30)),
                        vorrq_u8(
                            vshrq_n_u8::<4>(l[t + 2]),
                            vandq_u8(vshrq_n_u8::<2>(hb[t]), m30),
                        ),
                    ];
                    for (g, q) in groups.into_iter().enumerate() {
                        // q - 32 in -32..32; the i16 lane sums hold two products of at most
                        // 32 * 128 each.
                        let x = vsubq_s8(vreinterpretq_s8_u8(q), k32);
                        let at = 128 * h + 32 * g + 16 * t;
                        let p = mla_i8(vdupq_n_s16(0), x, load_i8(ys.add(at)));
                        let scale = i16::from(scales.add(at / 16).cast::<i8>().read());
                        aux = add_scaled(aux, p, scale);
                    }
                }
            }
            // Scalar: sums[l] += d * aux32[l] as f32 (no FMA).
            let da = f32_at(ba.add(offset_of!(BlockQ8K, d)));
            let d = vdupq_n_f32(f16_at(bw.add(offset_of!(BlockQ6K, d))) * da);
            sums[0] = vaddq_f32(sums[0], vmulq_f32(d, vcvtq_f32_s32(aux[0])));
            sums[1] = vaddq_f32(sums[1], vmulq_f32(d, vcvtq_f32_s32(aux[1])));
        }
    }
    add_lanes_in_order(0.0, sums)
}

#[cfg(test)]
mod tests {
    use crate::kernels::scalar;
    use crate::kernels::simd_tests::{for_random_rows, Rng};
    use crate::GgmlType;

    /// The K-quant kernels keep ggml's generic integer lanes and float operations in order, so
    /// they agree with ggml's generic kernels (`scalar`) bit for bit (beyond the reordering
    /// bound that `simd_tests` checks for every kernel against the portable ones in AVX2's
    /// order, which the scalar ISA runs).
    #[test]
    fn neon_k_quants_match_scalar_bit_for_bit() {
        let neon = super::super::kernels().expect("every aarch64 CPU has NEON");
        let mut rng = Rng(0x0F1E_2D3C_4B5A_6978);
        for ty in [GgmlType::Q4_K, GgmlType::Q6_K] {
            let simd = (neon.dot)(ty).expect("NEON kernel");
            let scalar = scalar::kernel(ty).expect("generic twin");
            for_random_rows(ty, &mut rng, |n, w, a| {
                let (s, v) = (scalar(n, w, a), simd(n, w, a));
                assert_eq!(
                    s.to_bits(),
                    v.to_bits(),
                    "{ty} n={n}: scalar {s} vs neon {v}"
                );
            });
        }
    }
}
