//! The legacy types' GEMM tiles against their scalar twins (`lanes`), bit for bit.

use super::{activations, all_types, simd_isas, weights, Rng};
use crate::kernels::{kq_gemm, lanes, vec_dot_type, GemmFn};
use crate::GgmlType;

/// Whether each output of llama.cpp's batched product of `ty` on this ISA is what its one-row
/// `vec_dot` gives, so that a GEMM kernel for it must equal the ISA's one-row kernel: Q4_1 and
/// Q5_1 (no tinyBLAS for them), and Q4_0, Q5_0 and Q8_0, whose AVX2 `vec_dot` sums in
/// tinyBLAS's order (one accumulator, the same lane sum). Not IQ4_NL, whose `vec_dot` pairs
/// its blocks into two accumulators.
fn batch_follows_vec_dot(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0
    )
}

/// `rows` random weight rows of `n` values of `ty` and `batch` activation rows, each row
/// followed by `pad` unused bytes: (weights, row stride, activations, activation stride).
fn gemm_operands(
    ty: GgmlType,
    n: usize,
    rows: usize,
    batch: usize,
    pad: usize,
    rng: &mut Rng,
) -> (Vec<u8>, usize, Vec<u8>, usize) {
    let row_bytes = crate::row_bytes(ty, n).unwrap() + pad;
    let act_row = crate::row_bytes(vec_dot_type(ty), n).unwrap() + pad;
    let mut w = Vec::with_capacity(rows * row_bytes);
    for _ in 0..rows {
        w.extend(weights(ty, n, rng));
        w.extend((0..pad).map(|_| rng.next() as u8));
    }
    let mut a = Vec::with_capacity(batch * act_row);
    for _ in 0..batch {
        a.extend(activations(ty, n, rng));
        a.extend((0..pad).map(|_| rng.next() as u8));
    }
    (w, row_bytes, a, act_row)
}

/// Runs a [`GemmFn`] into `batch` output rows of `rows` values.
fn run_gemm_legacy(
    gemm: GemmFn,
    n: usize,
    (w, row_bytes, a, act_row): (&[u8], usize, &[u8], usize),
    rows: usize,
    batch: usize,
) -> Vec<Vec<f32>> {
    let mut out = vec![vec![f32::NAN; rows]; batch];
    let mut slices: Vec<&mut [f32]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
    gemm(n, w, row_bytes, a, act_row, &mut slices);
    out
}

/// Every SIMD GEMM kernel equals its scalar twin (`lanes`) bit for bit on random shapes:
/// 1 to 18 blocks per row, batches of 2 to 9 activation rows, row counts that do not fill the
/// kernels' tiles, rows with and without padding. Its outputs do not depend on the tiling
/// either: the product of a few of the weight rows with two of the activation rows gives the
/// same bits. Where llama.cpp's batched products run its one-row `vec_dot`
/// ([`batch_follows_vec_dot`]), each output also equals the ISA's one-row kernel.
#[test]
fn simd_legacy_gemm_kernels_equal_their_twins_bit_for_bit() {
    let mut rng = Rng(0x6E33_0000_5EED_0001);
    for (isa, k) in simd_isas() {
        let name = isa.name();
        for ty in all_types() {
            let Some(gemm) = (k.gemm)(ty) else { continue };
            if kq_gemm::tiled_twin(ty).is_some() {
                continue; // the K-quants' test (`kquant_gemm`)
            }
            let twin = lanes::gemm(ty)
                .unwrap_or_else(|| panic!("{name}: a {ty} GEMM kernel without a scalar twin"));
            let shapes = [
                (1, 2),
                (3, 3),
                (5, 2),
                (7, 5),
                (4, 7),
                (13, 9),
                (8, 4),
                (9, 6),
            ];
            for blocks in [1, 2, 3, 7, 18] {
                let n = blocks * ty.block_size() as usize;
                for (case, &(rows, batch)) in shapes.iter().enumerate() {
                    let pad = if case % 2 == 1 { 6 } else { 0 };
                    let (w, rb, a, ar) = gemm_operands(ty, n, rows, batch, pad, &mut rng);
                    let ours = run_gemm_legacy(gemm, n, (&w, rb, &a, ar), rows, batch);
                    let theirs = run_gemm_legacy(twin, n, (&w, rb, &a, ar), rows, batch);
                    let bits = |o: &[Vec<f32>]| -> Vec<Vec<u32>> {
                        o.iter()
                            .map(|r| r.iter().map(|v| v.to_bits()).collect())
                            .collect()
                    };
                    assert_eq!(
                        bits(&ours),
                        bits(&theirs),
                        "{name} {ty}: {rows} rows x {batch}, {blocks} blocks: {ours:?} vs twin {theirs:?}"
                    );
                    // Weight rows r0.. (another tile alignment) against activation rows b and
                    // b0 (another batch).
                    let (r0, b0) = (rows / 2, batch - 1);
                    for b in 0..batch - 1 {
                        let mut pair = a[b * ar..(b + 1) * ar].to_vec();
                        pair.extend_from_slice(&a[b0 * ar..(b0 + 1) * ar]);
                        let part =
                            run_gemm_legacy(gemm, n, (&w[r0 * rb..], rb, &pair, ar), rows - r0, 2);
                        for (got, want) in part.iter().zip([&ours[b], &ours[b0]]) {
                            assert_eq!(
                                bits(std::slice::from_ref(got)),
                                bits(std::slice::from_ref(&want[r0..].to_vec())),
                                "{name} {ty}: rows {r0}.. with activation rows {b} and {b0}"
                            );
                        }
                    }
                    if batch_follows_vec_dot(ty) {
                        let dot = (k.dot)(ty).expect("a GEMM kernel without a one-row kernel");
                        for (b, o) in ours.iter().enumerate() {
                            for (r, y) in o.iter().enumerate() {
                                let one = dot(
                                    n,
                                    &w[r * rb..r * rb + rb - pad],
                                    &a[b * ar..b * ar + ar - pad],
                                );
                                assert_eq!(
                                    y.to_bits(),
                                    one.to_bits(),
                                    "{name} {ty}: row {r} x activation {b}: {y} vs one-row {one}"
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}
