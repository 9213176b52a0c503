//! The packed layouts' kernels: each SIMD table's against its scalar twin bit for bit, and
//! [`PackedMatrix`]'s products against llama.cpp's rule (GEMM for the first `batch - batch % 4`
//! rows, GEMV for the rest) and, within the reordering bound, against plain `vec_dot`.

use super::simd_tests::{assert_within_reordering_bound, weights, Rng};
use super::{packed_scalar, simd, Isa, PackedKernels};
use crate::kernels::packed::{pack_q4_k, PackedMatrix};
use crate::GgmlType;

/// The packed types and their scalar twins.
const TWINS: [(GgmlType, PackedKernels); 1] = [(GgmlType::Q4_K, packed_scalar::Q4_K_X8)];

/// Random f32 activations, `n` values in [-4, 4).
fn floats(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.unit() * 4.0).collect()
}

/// Quantized activation rows (Q8_K) of `x`, `cols` values each.
fn q8_rows(ty: GgmlType, x: &[f32], cols: usize) -> Vec<Vec<u8>> {
    x.chunks_exact(cols)
        .map(|row| {
            let mut q = Vec::new();
            crate::quantize_activations(ty, row, &mut q).unwrap();
            q
        })
        .collect()
}

/// Random shapes: rows multiples of 8 (1 to 6 groups), 1 to 6 super-blocks of columns.
fn shapes(rng: &mut Rng) -> Vec<(usize, usize)> {
    (0..12)
        .map(|_| {
            let rows = 8 * (1 + rng.next() as usize % 6);
            let cols = 256 * (1 + rng.next() as usize % 6);
            (rows, cols)
        })
        .collect()
}

/// The outputs by llama.cpp's rule, computed with `k`: `y[b * rows + r]`.
fn by_rule(
    k: &PackedKernels,
    packed: &[u8],
    cols: usize,
    acts: &[Vec<u8>],
    rows: usize,
) -> Vec<f32> {
    let batch = acts.len();
    let mut y = vec![0f32; batch * rows];
    let whole = batch - batch % 4;
    let mut outs: Vec<&mut [f32]> = y.chunks_mut(rows).collect();
    for b in (0..whole).step_by(4) {
        let [o0, o1, o2, o3] = &mut outs[b..b + 4] else {
            unreachable!()
        };
        (k.gemm4)(
            cols,
            packed,
            [&acts[b], &acts[b + 1], &acts[b + 2], &acts[b + 3]],
            [o0, o1, o2, o3],
        );
    }
    for b in whole..batch {
        (k.gemv)(cols, packed, &acts[b], outs[b]);
    }
    y
}

#[test]
fn simd_packed_kernels_equal_their_scalar_twins_bit_for_bit() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut tested = 0;
    for isa in Isa::ALL {
        let Some(table) = simd(isa) else { continue };
        for id in 0..64u32 {
            let Some(ty) = GgmlType::from_id_opt(id) else {
                continue;
            };
            let Some(k) = (table.packed)(ty) else {
                continue;
            };
            let twin = TWINS
                .iter()
                .find(|(t, _)| *t == ty)
                .unwrap_or_else(|| panic!("{ty}: a packed kernel without a scalar twin"))
                .1;
            for (rows, cols) in shapes(&mut rng) {
                let w = weights(ty, rows * cols, &mut rng);
                let packed = pack_q4_k(&w, rows, cols);
                for batch in 1..=9 {
                    let acts = q8_rows(ty, &floats(batch * cols, &mut rng), cols);
                    let simd = by_rule(&k, &packed, cols, &acts, rows);
                    let scalar = by_rule(&twin, &packed, cols, &acts, rows);
                    for (i, (s, t)) in simd.iter().zip(&scalar).enumerate() {
                        assert_eq!(
                            s.to_bits(),
                            t.to_bits(),
                            "{ty} {} {rows}x{cols} batch {batch} output {i}: {s} vs {t}",
                            isa.name()
                        );
                    }
                    tested += 1;
                }
            }
        }
    }
    // Packed kernels were tested exactly when one of this CPU's tables has them (AVX2 and AVX-512: Q4_K),
    // whichever instruction set the process itself was told to use.
    let any_table_packs = Isa::ALL
        .into_iter()
        .filter_map(simd)
        .any(|table| (table.packed)(GgmlType::Q4_K).is_some());
    assert_eq!(
        tested > 0,
        any_table_packs,
        "{tested} packed kernels tested"
    );
}

#[test]
fn packed_products_follow_llama_cpp_and_stay_near_vec_dot() {
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let pool = crate::ThreadPool::new(3).unwrap();
    let ty = GgmlType::Q4_K;
    for (rows, cols) in shapes(&mut rng) {
        let w = weights(ty, rows * cols, &mut rng);
        let Some(p) = PackedMatrix::new(ty, &w, rows, cols).unwrap() else {
            // No packed kernels on this CPU: the caller keeps the plain path.
            assert!(super::packed_kernels(ty).unwrap().is_none());
            return;
        };
        assert_eq!(p.bytes(), rows / 8 * cols / 256 * 1184);
        let k = super::packed_kernels(ty).unwrap().unwrap();
        let packed = pack_q4_k(&w, rows, cols);
        let row_bytes = cols / 256 * 144;
        for batch in 1..=9 {
            let x = floats(batch * cols, &mut rng);
            let acts = q8_rows(ty, &x, cols);
            let expected = by_rule(&k, &packed, cols, &acts, rows);
            let (mut y1, mut y2) = (vec![0f32; batch * rows], vec![0f32; batch * rows]);
            let mut scratch = Vec::new();
            p.matmul_on(&pool, &x, batch, &mut y1, &mut scratch)
                .unwrap();
            p.matmul(&x, batch, &mut y2, &mut scratch).unwrap();
            // Every row through the GEMV (llama.cpp's repacked mul_mat_id): each row's products
            // are the GEMV's of that row alone.
            let mut y3 = vec![0f32; batch * rows];
            p.matmul_gemv_on(&pool, &x, batch, &mut y3, &mut scratch)
                .unwrap();
            for (b, row) in y3.chunks_exact(rows).enumerate() {
                let alone = by_rule(&k, &packed, cols, &acts[b..b + 1], rows);
                assert!(row
                    .iter()
                    .zip(&alone)
                    .all(|(a, e)| a.to_bits() == e.to_bits()));
            }
            for i in 0..batch * rows {
                assert_eq!(y1[i].to_bits(), expected[i].to_bits(), "matmul_on {i}");
                assert_eq!(y2[i].to_bits(), expected[i].to_bits(), "matmul {i}");
                let (b, r) = (i / rows, i % rows);
                let wr = &w[r * row_bytes..(r + 1) * row_bytes];
                // `vec_dot` sums the same terms in another order: within the reordering bound
                // (1e-4 of Σ|wᵢ·aᵢ|, see `simd_tests`).
                assert_within_reordering_bound(ty, cols, wr, &acts[b], y1[i], Isa::Avx2);
            }
        }
    }
}

#[test]
fn packing_declines_what_llama_cpp_does_not_repack() {
    let mut rng = Rng(7);
    let w = weights(GgmlType::Q4_K, 12 * 256, &mut rng);
    // 12 rows: not a multiple of 8.
    assert!(PackedMatrix::new(GgmlType::Q4_K, &w, 12, 256)
        .unwrap()
        .is_none());
    // A type without packed kernels.
    let q8 = weights(GgmlType::Q8_0, 8 * 256, &mut rng);
    assert!(PackedMatrix::new(GgmlType::Q8_0, &q8, 8, 256)
        .unwrap()
        .is_none());
    // Wrong lengths are an error, not a silent plain path.
    assert!(PackedMatrix::new(GgmlType::Q4_K, &w[1..], 12, 256).is_err());
}
