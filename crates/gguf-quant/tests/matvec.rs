//! `matvec` agrees with row-by-row `vec_dot` and `matmul` with llama.cpp's batched order, on 1 to
//! 3 threads (batches of the K-quants from llama.cpp's tiled floor of 8 rows up sum in its tiled
//! order: the same bits on any number of threads, close to `vec_dot`), and both reject
//! mismatched shapes.

use gguf_quant::{
    isa, matmul, matmul_dots_on, matmul_on, matvec, matvec_on, quantize_activations, quantize_row,
    row_bytes, vec_dot, GgmlType, Isa, QuantError, ThreadPool,
};

fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ((x >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
        })
        .collect()
}

/// Whether a batched product of `ty` computes each output as `vec_dot` does on this CPU. A
/// batch is computed in the order of llama.cpp's batched product for the type: its one-row
/// `vec_dot` for most types; with AVX2, llamafile's tinyBLAS for Q4_0, Q5_0, Q8_0 and IQ4_NL,
/// whose order ggml's AVX2 `vec_dot` shares for all but IQ4_NL.
fn batch_is_row_dots(ty: GgmlType) -> bool {
    !(matches!(isa(), Isa::Avx2 | Isa::AvxVnni | Isa::Avx512) && ty == GgmlType::IQ4_NL)
}

/// `matvec` equals row-by-row `vec_dot` bit for bit. `matmul` of a batch gives the same bits
/// on every number of threads and pool, and for each activation row the same bits as a batch
/// of two holding it; they equal `vec_dot`'s where llama.cpp's batched order is `vec_dot`'s
/// ([`batch_is_row_dots`]) and lie within a reordering bound of them elsewhere.
#[test]
fn matvec_equals_row_dots_and_matmul_its_batched_order() {
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
        GgmlType::Q5_0,
        GgmlType::F32,
    ] {
        let (cols, rows, batch) = (512usize, 37usize, 3usize);
        let mut w = vec![0u8; row_bytes(ty, cols * rows).unwrap()];
        quantize_row(ty, &values(cols * rows, 1), &mut w).unwrap();
        let x = values(cols * batch, 2);
        let rb = row_bytes(ty, cols).unwrap();
        let mut dots = vec![0f32; rows * batch];
        for b in 0..batch {
            let mut a = Vec::new();
            quantize_activations(ty, &x[b * cols..(b + 1) * cols], &mut a).unwrap();
            for r in 0..rows {
                dots[b * rows + r] = vec_dot(ty, cols, &w[r * rb..(r + 1) * rb], &a).unwrap();
            }
        }
        // The batched product, each activation row in a batch of two with the last one.
        let mut batched = vec![0f32; rows * batch];
        let mut scratch = Vec::new();
        for b in 0..batch - 1 {
            let mut pair = x[b * cols..(b + 1) * cols].to_vec();
            pair.extend_from_slice(&x[(batch - 1) * cols..]);
            let mut y = vec![0f32; rows * 2];
            matmul(ty, &w, cols, &pair, 2, &mut y, &mut scratch).unwrap();
            batched[b * rows..(b + 1) * rows].copy_from_slice(&y[..rows]);
            batched[(batch - 1) * rows..].copy_from_slice(&y[rows..]);
        }
        if batch_is_row_dots(ty) {
            assert_eq!(batched, dots, "{ty}: batched products vs vec_dot");
        }
        for (y, d) in batched.iter().zip(&dots) {
            assert!(
                (y - d).abs() <= 1e-5 * (1.0 + d.abs()),
                "{ty}: batched {y} vs vec_dot {d}"
            );
        }
        for threads in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            pool.install(|| {
                let mut scratch = Vec::new();
                let mut y = vec![0f32; rows];
                matvec(ty, &w, cols, &x[..cols], &mut y, &mut scratch).unwrap();
                assert_eq!(y, dots[..rows], "{ty} matvec, {threads} threads");
                let mut y = vec![0f32; rows * batch];
                matmul(ty, &w, cols, &x, batch, &mut y, &mut scratch).unwrap();
                assert_eq!(y, batched, "{ty} matmul, {threads} threads");
            });
            // The spinning pool: one share of rows per thread.
            let pool = ThreadPool::new(threads).unwrap();
            let mut scratch = Vec::new();
            let mut y = vec![0f32; rows];
            matvec_on(&pool, ty, &w, cols, &x[..cols], &mut y, &mut scratch).unwrap();
            assert_eq!(y, dots[..rows], "{ty} matvec_on, {threads} threads");
            let mut y = vec![0f32; rows * batch];
            matmul_on(&pool, ty, &w, cols, &x, batch, &mut y, &mut scratch).unwrap();
            assert_eq!(y, batched, "{ty} matmul_on, {threads} threads");
            // Without the GEMM kernels: each output is the type's dot product, as in ggml's
            // mul_mat_id.
            matmul_dots_on(&pool, ty, &w, cols, &x, batch, &mut y, &mut scratch).unwrap();
            assert_eq!(y, dots, "{ty} matmul_dots_on, {threads} threads");
        }
    }
}

#[test]
fn shape_mismatches_are_errors() {
    let ty = GgmlType::Q8_0;
    let w = vec![0u8; row_bytes(ty, 64 * 4).unwrap()];
    let mut scratch = Vec::new();
    let mut y = vec![0f32; 4];
    assert!(matches!(
        matvec(ty, &w, 64, &[0.0; 63], &mut y, &mut scratch),
        Err(QuantError::Shape(_))
    ));
    assert!(matches!(
        matvec(ty, &w, 48, &[0.0; 48], &mut y, &mut scratch),
        Err(QuantError::PartialBlock { .. })
    ));
    let mut y5 = vec![0f32; 5];
    assert!(matches!(
        matvec(ty, &w, 64, &[0.0; 64], &mut y5, &mut scratch),
        Err(QuantError::WrongLength { .. })
    ));
    assert!(matches!(
        vec_dot(ty, 64, &w[..34], &[0u8; 68]),
        Err(QuantError::WrongLength { .. })
    ));
}

/// Batches from the tiled floor up: the same bits on 1, 2 and 3 threads, on rayon's pool and the
/// spinning one, and within a float-reordering distance of row-by-row `vec_dot`.
#[test]
fn large_kquant_batches_do_not_depend_on_threads() {
    for ty in [
        GgmlType::Q6_K,
        GgmlType::Q5_K,
        GgmlType::Q4_K,
        GgmlType::Q3_K,
        GgmlType::Q2_K,
        GgmlType::IQ4_XS,
    ] {
        let (cols, rows) = (768usize, 37usize);
        let mut w = vec![0u8; row_bytes(ty, cols * rows).unwrap()];
        quantize_row(ty, &values(cols * rows, 3), &mut w).unwrap();
        let rb = row_bytes(ty, cols).unwrap();
        for batch in [8usize, 9, 20] {
            let x = values(cols * batch, 4 + batch as u64);
            let mut first: Option<Vec<f32>> = None;
            let mut check = |y: Vec<f32>, what: String| match &first {
                None => first = Some(y),
                Some(f) => {
                    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                    assert_eq!(bits(&y), bits(f), "{ty} batch {batch}: {what}");
                }
            };
            for threads in [1, 2, 3] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let mut y = vec![0f32; rows * batch];
                pool.install(|| {
                    matmul(ty, &w, cols, &x, batch, &mut y, &mut Vec::new()).unwrap();
                });
                check(y, format!("matmul, {threads} threads"));
                let pool = ThreadPool::new(threads).unwrap();
                let mut y = vec![0f32; rows * batch];
                matmul_on(&pool, ty, &w, cols, &x, batch, &mut y, &mut Vec::new()).unwrap();
                check(y, format!("matmul_on, {threads} threads"));
            }
            let y = first.unwrap();
            for b in 0..batch {
                let mut a = Vec::new();
                quantize_activations(ty, &x[b * cols..(b + 1) * cols], &mut a).unwrap();
                for r in 0..rows {
                    let d = vec_dot(ty, cols, &w[r * rb..(r + 1) * rb], &a).unwrap();
                    let got = y[b * rows + r];
                    assert!(
                        (got - d).abs() <= 1e-4 * d.abs().max(1.0),
                        "{ty} batch {batch}, row {r} of activation {b}: {got} vs vec_dot {d}"
                    );
                }
            }
        }
    }
}
