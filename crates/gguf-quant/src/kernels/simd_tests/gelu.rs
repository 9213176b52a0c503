//! GELU and GeGLU against their scalar twins, bit for bit, on inputs that reach every branch
//! of ggml's rules and every entry of its f16 table.

use half::f16;

use super::Rng;
use crate::kernels::vec::VecKernels;

/// Inputs for GELU that reach every branch of ggml's rules and every case of the f16 rounding
/// before the table: exactly ±10 and their neighbours, values just inside ±10 that round to an
/// f16 of ±10, ±0, f32 subnormals (to f16 zero), f16 subnormals and ties between them, ties
/// between normal f16 values, the largest f16 and values rounding to f16 infinity (beyond ±10,
/// so never looked up), huge values, infinities, NaNs of both signs with several payloads; then
/// every f16 value widened (every table entry, the last included: 0xFFFF is a NaN that the
/// AVX2 gather reads with the padding entry), then random values in [-12, 12).
fn gelu_gates(rng: &mut Rng) -> (Vec<f32>, usize) {
    let ten_down = f32::from_bits(10f32.to_bits() - 1);
    let ten_up = f32::from_bits(10f32.to_bits() + 1);
    let mut specials = vec![
        -10.0,
        10.0,
        ten_down,
        ten_up,
        -ten_down,
        -ten_up,
        9.997,
        -9.997,
        0.0,
        -0.0,
        f32::from_bits(1),
        -f32::from_bits(1),
        1e-40,
        -1e-40,
        f32::MIN_POSITIVE,
        2f32.powi(-25),
        3.0 * 2f32.powi(-25),
        -3.0 * 2f32.powi(-25),
        6.0e-8,
        6.1e-5,
        -6.1e-5,
        1.0 + 2f32.powi(-11),
        1.0 + 3.0 * 2f32.powi(-11),
        -(1.0 + 2f32.powi(-11)),
        0.5,
        -0.5,
        2.5,
        -2.5,
        65504.0,
        -65504.0,
        65519.0,
        65520.0,
        -65520.0,
        1e30,
        -1e30,
        f32::MAX,
        f32::MIN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        f32::from_bits(0x7F80_0001),
        f32::from_bits(0xFFC0_1234),
        f32::from_bits(0x7FBF_FFFF),
    ];
    let n_specials = specials.len();
    specials.extend((0..=u16::MAX).map(|h| f16::from_bits(h).to_f32()));
    specials.extend((0..1003).map(|_| rng.unit() * 12.0));
    (specials, n_specials)
}

/// `up` for [`gelu_gates`]: random in [-2, 2), with zeros, infinities and NaN. Where the gate
/// is NaN, `up` is not: a product of two NaNs may return either payload, as the compiler
/// orders the operands (Rust and C leave it open), so no twin can promise its bits.
fn gelu_ups(gates: &[f32], rng: &mut Rng) -> Vec<f32> {
    gates
        .iter()
        .map(|g| match rng.next() % 16 {
            0 => 0.0,
            1 => -0.0,
            2 => f32::INFINITY,
            3 => f32::NEG_INFINITY,
            4 if !g.is_nan() => f32::NAN,
            _ => rng.unit() * 2.0,
        })
        .collect()
}

/// `gelu` and `geglu` of `simd` equal the twins' bit for bit on [`gelu_gates`]: the whole run
/// (its length leaves a tail), and the special values from every start within a vector for
/// lengths around the vector widths (so each lands in every lane and in tails).
pub(super) fn check_gelu_kernels(name: &str, simd: &VecKernels, twin: &VecKernels, rng: &mut Rng) {
    let (gates, n_specials) = gelu_gates(rng);
    assert_ne!(gates.len() % 8, 0);
    let ups = gelu_ups(&gates, rng);
    let check = |g: &[f32], u: &[f32], what: &str| {
        let (mut ours, mut theirs) = (g.to_vec(), g.to_vec());
        (simd.gelu)(&mut ours);
        (twin.gelu)(&mut theirs);
        if let Some(i) = (0..g.len()).find(|&i| ours[i].to_bits() != theirs[i].to_bits()) {
            panic!(
                "{name} gelu {what}, value {i} ({:#010x}): {:#010x} vs twin {:#010x}",
                g[i].to_bits(),
                ours[i].to_bits(),
                theirs[i].to_bits()
            );
        }
        let (mut ours, mut theirs) = (g.to_vec(), g.to_vec());
        (simd.geglu)(&mut ours, u);
        (twin.geglu)(&mut theirs, u);
        if let Some(i) = (0..g.len()).find(|&i| ours[i].to_bits() != theirs[i].to_bits()) {
            panic!(
                "{name} geglu {what}, value {i} ({:#010x} * {:#010x}): {:#010x} vs twin {:#010x}",
                g[i].to_bits(),
                u[i].to_bits(),
                ours[i].to_bits(),
                theirs[i].to_bits()
            );
        }
    };
    check(&gates, &ups, "all");
    let lengths = [0, 1, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 24, 25];
    for start in 0..8 {
        for len in lengths.into_iter().chain([n_specials - start]) {
            let (g, u) = (&gates[start..start + len], &ups[start..start + len]);
            check(g, u, &format!("specials {start}..{}", start + len));
        }
    }
}
