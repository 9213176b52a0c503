//! The activation quantizers of the matrix products, in portable code: Q8_0 and Q8_1 as
//! ggml's x86 `quantize_row_q8_0`/`q8_1` quantize them (inverse scale `127 / amax`, ties to
//! even), on every instruction set.
//!
//! llama.cpp quantizes activations three ways: its x86 code as here, its NEON code with the
//! inverse scale `1 / d`, and its generic code (`quantize_row_q8_0_ref`) with `1 / d` and ties
//! away from zero. They disagree in a few values per thousand, which moves a 135M model's
//! next-token distribution by a KL divergence of 0.002 and Gemma 3 270M's by 0.01 (more than
//! llama.cpp's own f16 and f32 KV caches differ by). One rule everywhere keeps the engine's
//! answers from depending on the CPU; the x86 one is the rule of the machines most files are
//! checked on. Q8_K has one quantizer in ggml, the reference one.

use crate::quant::QuantFn;
use crate::GgmlType;

/// The quantizer of activation type `act`: Q8_0 and Q8_1 by ggml's x86 rule, everything else
/// by its reference quantizer.
pub(crate) fn kernel(act: GgmlType) -> Option<QuantFn> {
    match act {
        GgmlType::Q8_0 => Some(quantize_q8_0),
        GgmlType::Q8_1 => Some(quantize_q8_1),
        _ => crate::quant::kernel(act),
    }
}

/// Q8_0 as ggml's x86 `quantize_row_q8_0` writes it.
pub(crate) fn quantize_q8_0(x: &[f32], out: &mut [u8]) {
    x86_q8(x, out, false);
}

/// Q8_1 as ggml's x86 `quantize_row_q8_1` writes it: [`quantize_q8_0`]'s values, and the
/// block also stores `d * Σq`.
pub(crate) fn quantize_q8_1(x: &[f32], out: &mut [u8]) {
    x86_q8(x, out, true);
}

/// ggml's x86 code lane for lane. `maxps` returns its second operand unless the first is
/// greater (so NaN wins only from the right), and the lanes' maxima meet in its order; the
/// conversion rounds to nearest even and turns NaN and out-of-range values into `i32::MIN`;
/// the packs saturate to i8; Q8_1's sum adds the unsaturated values with wrapping.
fn x86_q8(x: &[f32], out: &mut [u8], with_sum: bool) {
    let maxps = |a: f32, b: f32| if a > b { a } else { b };
    let size = if with_sum { 36 } else { 34 };
    for (xb, yb) in x.chunks_exact(32).zip(out.chunks_exact_mut(size)) {
        let lanes: [f32; 8] =
            std::array::from_fn(|l| (1..4).fold(xb[l].abs(), |m, k| maxps(m, xb[8 * k + l].abs())));
        let m: [f32; 4] = std::array::from_fn(|j| maxps(lanes[4 + j], lanes[j]));
        let amax = maxps(maxps(m[0], m[2]), maxps(m[1], m[3]));
        let d = amax / 127.0;
        let id = if amax != 0.0 { 127.0 / amax } else { 0.0 };
        let q: [i32; 32] = std::array::from_fn(|j| {
            let r = (xb[j] * id).round_ties_even();
            if (-2_147_483_648.0..2_147_483_648.0).contains(&r) {
                r as i32
            } else {
                i32::MIN
            }
        });
        yb[..2].copy_from_slice(&crate::fp::f16_bytes(d));
        if with_sum {
            let sum = q.iter().fold(0i32, |s, &v| s.wrapping_add(v));
            yb[2..4].copy_from_slice(&crate::fp::f16_bytes(d * sum as f32));
        }
        for (y, &v) in yb[size - 32..].iter_mut().zip(&q) {
            *y = v.clamp(-128, 127) as i8 as u8;
        }
    }
}
