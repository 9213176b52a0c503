//! The K-quants' tiled GEMMs against their scalar twins (`kq_gemm`) and the row-by-row
//! kernels, bit for bit.

use super::{activations, all_types, simd_isas, weights, Rng};
use crate::kernels::{kq_gemm, lanes, vec_dot_type, GemmFn, Isa};
use crate::GgmlType;

/// The scalar twin of `isa`'s GEMM kernel for weights of `ty`, and the batch from which the
/// kernel follows it (below, it equals the ISA's row-by-row kernels). Panics for a kernel
/// without one, so that it cannot ship untested.
fn gemm_twin(isa: Isa, ty: GgmlType) -> (GemmFn, usize) {
    match (isa, kq_gemm::tiled_twin(ty)) {
        (Isa::Avx2 | Isa::AvxVnni | Isa::Avx512, Some(twin)) => (twin, kq_gemm::MIN_BATCH),
        _ => panic!("{}: a {ty} GEMM kernel without a scalar twin", isa.name()),
    }
}

/// Weight rows `rows` of `w` against every activation row of `a` (`act_row` bytes each) with
/// `gemm`, as `matmul` calls it: `out[b][r]`.
fn run_gemm(
    gemm: GemmFn,
    n: usize,
    w: &[u8],
    row_bytes: usize,
    rows: std::ops::Range<usize>,
    a: &[u8],
    act_row: usize,
) -> Vec<Vec<f32>> {
    let batch = a.len() / act_row;
    let mut out = vec![vec![f32::NAN; rows.len()]; batch];
    let mut views: Vec<&mut [f32]> = out.iter_mut().map(|o| o.as_mut_slice()).collect();
    gemm(
        n,
        &w[rows.start * row_bytes..],
        row_bytes,
        a,
        act_row,
        &mut views,
    );
    out
}

/// Every K-quant GEMM kernel equals its scalar twin bit for bit from the twin's batch floor up,
/// and the ISA's row-by-row kernels below it (AVX2's: the portable batched product at every
/// batch), on random shapes: batches of 2 to 20 activation
/// rows, weight rows that fill no tile evenly; and each result is the same whatever rows are
/// computed with it (so the thread split cannot change it).
#[test]
fn simd_gemm_kernels_equal_their_twins_bit_for_bit() {
    let mut rng = Rng(0x6E33_0000_7117_ED00);
    for (isa, k) in simd_isas() {
        for ty in all_types() {
            let Some(gemm) = (k.gemm)(ty) else { continue };
            if kq_gemm::tiled_twin(ty).is_none() {
                continue; // the legacy types' test (`legacy_gemm`)
            }
            let (twin, floor) = gemm_twin(isa, ty);
            // The scalar ISA's batched product, which must give the same bits at every batch.
            let portable =
                lanes::gemm(ty).unwrap_or_else(|| panic!("{ty}: no portable batched product"));
            let per = ty.block_size() as usize;
            let act = vec_dot_type(ty);
            for (blocks, rows) in [(1, 1), (3, 5), (2, 17), (1, 35), (4, 9)] {
                let n = blocks * per.max(256);
                let row_bytes = crate::row_bytes(ty, n).unwrap();
                let act_row = crate::row_bytes(act, n).unwrap();
                let w = weights(ty, n * rows, &mut rng);
                for batch in 2..=20 {
                    let a: Vec<u8> = (0..batch)
                        .flat_map(|_| activations(ty, n, &mut rng))
                        .collect();
                    let ours = run_gemm(gemm, n, &w, row_bytes, 0..rows, &a, act_row);
                    let theirs: Vec<Vec<f32>> = if batch >= floor {
                        run_gemm(twin, n, &w, row_bytes, 0..rows, &a, act_row)
                    } else {
                        (0..batch)
                            .map(|b| {
                                let mut o = vec![0f32; rows];
                                let ab = &a[b * act_row..(b + 1) * act_row];
                                match (k.rows)(ty) {
                                    Some(f) => f(n, &w, row_bytes, ab, &mut o),
                                    None => {
                                        let dot = (k.dot)(ty).unwrap();
                                        for (r, y) in o.iter_mut().enumerate() {
                                            *y = dot(n, &w[r * row_bytes..(r + 1) * row_bytes], ab);
                                        }
                                    }
                                }
                                o
                            })
                            .collect()
                    };
                    let bits = |v: &[Vec<f32>]| -> Vec<Vec<u32>> {
                        v.iter()
                            .map(|o| o.iter().map(|x| x.to_bits()).collect())
                            .collect()
                    };
                    assert_eq!(
                        bits(&ours),
                        bits(&theirs),
                        "{} {ty}: {rows} rows of {n} x batch {batch}",
                        isa.name()
                    );
                    if matches!(isa, Isa::Avx2 | Isa::AvxVnni | Isa::Avx512) {
                        let scalar = run_gemm(portable, n, &w, row_bytes, 0..rows, &a, act_row);
                        assert_eq!(bits(&ours), bits(&scalar), "{ty}: portable, batch {batch}");
                    }
                    // The rows from 1 on, computed without row 0, give the same bits.
                    if rows > 1 {
                        let rest = run_gemm(gemm, n, &w, row_bytes, 1..rows, &a, act_row);
                        for (o, r) in ours.iter().zip(&rest) {
                            let (o, r) = (&o[1..], r.as_slice());
                            assert!(
                                o.iter().zip(r).all(|(x, y)| x.to_bits() == y.to_bits()),
                                "{ty}: split"
                            );
                        }
                    }
                }
            }
        }
    }
}
