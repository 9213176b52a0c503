//! Property: quantize then dequantize stays within each type's error bound, for ordinary,
//! all-zero, constant, large, tiny and subnormal inputs, and never produces NaN or infinity
//! while the block's scale fits an f16.

use gguf_quant::{dequantize_row, quantize_row, row_bytes, GgmlType};
use proptest::prelude::*;

/// Largest |x - x̂| allowed, as a fraction of the block's value range (max - min), for a type's
/// reference quantizer, plus [`slack`] for scales that underflow.
/// The fractions follow from each format: e.g. Q8_0 rounds to steps of amax/127 (error half a
/// step, plus the f16 rounding of the scale); Q4_0 clamps +amax to 7/8 of it when the largest
/// magnitude is negative, an error of amax/8; ternary and 1-bit types keep only signs/levels.
fn bound(ty: GgmlType) -> f32 {
    use GgmlType::*;
    match ty {
        F32 => 0.0,
        F16 | BF16 => 2f32.powi(-7),
        Q8_0 | Q8_1 | Q8_K => 1.0 / 240.0,
        Q6_K => 1.0 / 20.0,
        Q5_0 | Q5_1 | Q5_K => 1.0 / 12.0,
        Q4_0 | Q4_1 | Q4_K | IQ4_NL | IQ4_XS => 1.0 / 6.0,
        Q3_K => 1.0 / 3.0,
        Q2_K => 1.0 / 1.5,
        MXFP4 | NVFP4 => 0.35,
        TQ1_0 | TQ2_0 | Q2_0 => 0.75,
        Q1_0 => 2.0,
        _ => f32::INFINITY,
    }
}

/// Absolute slack: the smallest magnitude a type's scale can express. NVFP4's unsigned E4M3
/// scale cannot go below 2^-9 (values of amax/6 below that become zero blocks), so blocks with
/// amax under about 6 * 2^-9 quantize to zero; the f16 scales of the others underflow only
/// far below 1e-5.
fn slack(ty: GgmlType) -> f32 {
    if ty == GgmlType::NVFP4 {
        6.0 * 2f32.powi(-9)
    } else {
        1e-5
    }
}

const TYPES: &[GgmlType] = &[
    GgmlType::F16,
    GgmlType::BF16,
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q8_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::Q8_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::Q1_0,
    GgmlType::Q2_0,
];

/// 256 values (a multiple of every block size used here) of one of several kinds.
fn block() -> impl Strategy<Value = Vec<f32>> {
    let scaled = |scale: f32| {
        proptest::collection::vec(-1.0f32..1.0, 256)
            .prop_map(move |v| v.into_iter().map(|x| x * scale).collect::<Vec<_>>())
    };
    prop_oneof![
        scaled(1.0),
        scaled(1e-3),
        scaled(100.0),
        scaled(2e3),
        scaled(1e-40), // subnormal
        Just(vec![0.0; 256]),
        (-50.0f32..50.0).prop_map(|c| vec![c; 256]),
        (
            proptest::collection::vec(-1.0f32..1.0, 256),
            0usize..256,
            -300.0f32..300.0
        )
            .prop_map(|(mut v, i, o)| {
                v[i] = o; // one outlier
                v
            }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn quantize_dequantize_error_is_bounded(x in block()) {
        let min = x.iter().copied().fold(f32::INFINITY, f32::min);
        let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let range = (max - min).max(max.abs()).max(min.abs());
        for &ty in TYPES {
            let mut q = vec![0u8; row_bytes(ty, x.len()).unwrap()];
            quantize_row(ty, &x, &mut q).unwrap();
            let mut y = vec![0f32; x.len()];
            dequantize_row(ty, &q, &mut y).unwrap();
            let limit = bound(ty) * range + slack(ty);
            for (i, (a, b)) in x.iter().zip(&y).enumerate() {
                prop_assert!(b.is_finite(), "{}: element {} dequantized to {}", ty, i, b);
                prop_assert!((a - b).abs() <= limit, "{}: element {}: {} became {} (limit {})", ty, i, a, b, limit);
            }
            if x.iter().all(|&v| v == 0.0) {
                prop_assert!(y.iter().all(|&v| v == 0.0), "{}: zeros must stay zeros", ty);
            }
        }
    }
}
