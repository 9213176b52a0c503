//! The SIMD activation quantizers against their twins, byte for byte.

use super::{all_types, simd_isas, Rng};
use crate::kernels::Isa;
use crate::quant::QuantFn;
use crate::GgmlType;

/// The scalar twin of `isa`'s quantizer of activation type `act`. Panics for a quantizer
/// without one, so that it cannot ship untested.
fn quantizer_twin(isa: Isa, act: GgmlType) -> QuantFn {
    match (isa, act) {
        (Isa::Avx2 | Isa::AvxVnni | Isa::Avx512, GgmlType::Q8_0 | GgmlType::Q8_1)
        | (_, GgmlType::Q8_K) => {
            crate::kernels::activations::kernel(act).expect("portable activation quantizer")
        }
        _ => panic!("{}: a {act} quantizer without a scalar twin", isa.name()),
    }
}

/// Rows of 4096 activations that exercise an activation quantizer: several magnitudes
/// (subnormal to large), ties between +m and -m (the first sets the sign), values at exactly
/// half a step, zeros, a constant, and NaN and infinities.
fn activation_test_rows(rng: &mut Rng) -> Vec<Vec<f32>> {
    let mut rows: Vec<Vec<f32>> = [1.0f32, 1e-3, 300.0, 3e4, 1e-40, 1e-38]
        .into_iter()
        .map(|scale| (0..4096).map(|_| rng.unit() * scale).collect())
        .collect();
    let mut ties: Vec<f32> = (0..4096).map(|_| rng.unit()).collect();
    ties[7] = -3.0;
    ties[9] = 3.0;
    ties[300] = 3.0;
    ties[301] = -3.0;
    rows.push(ties);
    rows.push(
        (0..4096)
            .map(|i| ((i % 255) as f32 - 127.0) * 0.5)
            .collect(),
    );
    rows.push(vec![0.0; 4096]);
    rows.push(vec![-2.5; 4096]);
    let mut special: Vec<f32> = (0..4096).map(|_| rng.unit()).collect();
    special[5] = f32::NAN;
    special[100] = f32::INFINITY;
    special[200] = f32::NEG_INFINITY;
    special[600] = f32::INFINITY;
    special[1200] = f32::NEG_INFINITY;
    rows.push(special);
    rows
}

/// Every SIMD activation quantizer writes its twin's bytes (the reference quantizer's for Q8_K;
/// ggml's x86 code for Q8_0 and Q8_1, which `tests/activation_quant.rs` also checks against
/// libggml-cpu's output). The first differing block and byte are named.
#[test]
fn simd_activation_quantizers_match_their_twins_byte_for_byte() {
    let mut rng = Rng(0xACE1_2345_6789_0001);
    let rows = activation_test_rows(&mut rng);
    for (isa, k) in simd_isas() {
        for act in all_types() {
            let Some(simd) = (k.quantize)(act) else {
                continue;
            };
            let twin = quantizer_twin(isa, act);
            let size = act.type_size() as usize;
            for x in &rows {
                let bytes = crate::row_bytes(act, x.len()).unwrap();
                let (mut ours, mut theirs) = (vec![0u8; bytes], vec![0u8; bytes]);
                simd(x, &mut ours);
                twin(x, &mut theirs);
                if let Some(at) = (0..bytes).find(|&i| ours[i] != theirs[i]) {
                    let b = at / size;
                    let per = act.block_size() as usize;
                    panic!(
                        "{} {act}: block {b}, byte {}: ours {} twin {} (input {:?})",
                        isa.name(),
                        at % size,
                        ours[at],
                        theirs[at],
                        &x[b * per..(b + 1) * per]
                    );
                }
            }
        }
    }
}
