//! ggml's generic dot-product kernels (`scalar`) against ggml's own: for every weight type, 64 rows of
//! pseudo-random weight blocks and ggml-quantized activations, with the results of ggml's
//! `ggml_vec_dot_*_generic` kernels, in `tests/data/dot/` (see the README there). The quantized
//! types must match bit for bit.
//!
//! F32, F16 and BF16 are the exception: the reference build's `ggml_vec_dot_f32/f16/bf16` are
//! its AVX2/FMA kernels (it has no scalar ones to call), which sum in another order. Our kernels
//! follow ggml's scalar path (f32 products summed in f64), so they are checked against the exact
//! sum within the error of that path, and ggml's SIMD results within the error of theirs.

use std::path::PathBuf;

use super::{scalar, vec_dot_type};
use crate::GgmlType;

/// ggml's generic kernel for weights of `ty`.
fn generic(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    scalar::kernel(ty).expect("a generic kernel")(n, w, a)
}

/// Types whose scalar kernel must reproduce ggml's generic kernel bit for bit.
const EXACT: [GgmlType; 25] = [
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q8_0,
    GgmlType::Q1_0,
    GgmlType::Q2_0,
    GgmlType::MXFP4,
    GgmlType::NVFP4,
    GgmlType::IQ4_NL,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
    GgmlType::IQ4_XS,
    GgmlType::TQ1_0,
    GgmlType::TQ2_0,
];

/// Plain float types, checked within a bound.
const FLOAT: [GgmlType; 3] = [GgmlType::F32, GgmlType::F16, GgmlType::BF16];

/// One reference file: `rows` weight rows and activation rows of `n` elements, and ggml's dots.
struct Case {
    n: usize,
    w: Vec<u8>,
    a: Vec<u8>,
    w_row: usize,
    a_row: usize,
    expected: Vec<f32>,
}

impl Case {
    fn rows(&self) -> usize {
        self.expected.len()
    }
    fn w(&self, r: usize) -> &[u8] {
        &self.w[r * self.w_row..(r + 1) * self.w_row]
    }
    fn a(&self, r: usize) -> &[u8] {
        &self.a[r * self.a_row..(r + 1) * self.a_row]
    }
}

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap())
}

/// Reads `tests/data/dot/<TYPE>.bin`: header `"GDOT"`, type id, n, rows (u32 LE), then the
/// weight rows, the activation rows and the expected f32 results.
fn load(ty: GgmlType) -> Case {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/dot")
        .join(format!("{}.bin", ty.name()));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..4], b"GDOT", "{}", path.display());
    assert_eq!(u32_at(&bytes, 1), ty.id(), "{}", path.display());
    let (n, rows) = (u32_at(&bytes, 2) as usize, u32_at(&bytes, 3) as usize);
    let w_row = ty.row_size(n as u64).unwrap() as usize;
    let a_row = vec_dot_type(ty).row_size(n as u64).unwrap() as usize;
    let body = &bytes[16..];
    assert_eq!(
        body.len(),
        rows * (w_row + a_row + 4),
        "{}: size",
        path.display()
    );
    let (w, rest) = body.split_at(rows * w_row);
    let (a, out) = rest.split_at(rows * a_row);
    let expected = out
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    Case {
        n,
        w: w.to_vec(),
        a: a.to_vec(),
        w_row,
        a_row,
        expected,
    }
}

/// Element `i` of a row of `ty` (F32, F16 or BF16) as f32.
fn float_at(ty: GgmlType, row: &[u8], i: usize) -> f32 {
    match ty {
        GgmlType::F32 => f32::from_le_bytes(row[4 * i..4 * i + 4].try_into().unwrap()),
        GgmlType::F16 => half::f16::from_le_bytes([row[2 * i], row[2 * i + 1]]).to_f32(),
        _ => f32::from_bits(u32::from(u16::from_le_bytes([row[2 * i], row[2 * i + 1]])) << 16),
    }
}

#[test]
fn generic_dot_products_match_ggml() {
    let mut failures = Vec::new();
    for ty in EXACT {
        let case = load(ty);
        let mut bad = 0;
        for r in 0..case.rows() {
            let got = generic(ty, case.n, case.w(r), case.a(r));
            let want = case.expected[r];
            if got.to_bits() != want.to_bits() {
                if bad < 3 {
                    failures.push(format!(
                        "{} row {r}: got {got:e} ({:#010x}), ggml {want:e} ({:#010x})",
                        ty.name(),
                        got.to_bits(),
                        want.to_bits()
                    ));
                }
                bad += 1;
            }
        }
        if bad > 0 {
            failures.push(format!(
                "{}: {bad} of {} rows differ",
                ty.name(),
                case.rows()
            ));
        }
    }

    for ty in FLOAT {
        let case = load(ty);
        for r in 0..case.rows() {
            let (w, a) = (case.w(r), case.a(r));
            // The exact dot (f32 × f32 products are exact in f64; the f64 sum's own error is
            // negligible next to the bounds) and the sum of |products|.
            let (mut exact, mut abs) = (0f64, 0f64);
            for i in 0..case.n {
                let p = f64::from(float_at(ty, w, i)) * f64::from(float_at(ty, a, i));
                exact += p;
                abs += p.abs();
            }
            let eps = f64::from(f32::EPSILON);
            let got = f64::from(generic(ty, case.n, w, a));
            // Ours: each product rounded to f32 (≤ eps/2 relative), the f64 sum, one final
            // rounding to f32 (≤ eps/2 of |result| ≤ abs).
            let ours = eps * abs;
            // ggml's AVX2 kernel: f32 FMA chains of n/32 steps in 32 lanes plus a reduction
            // tree (F16, BF16 widen exactly): at most (n/32 + 8) roundings of partial sums.
            let simd = (case.n as f64 / 32.0 + 8.0) * eps / 2.0 * abs + ours;
            let ggml = f64::from(case.expected[r]);
            if (got - exact).abs() > ours {
                failures.push(format!(
                    "{} row {r}: got {got:e}, exact {exact:e}, bound {ours:e}",
                    ty.name()
                ));
            }
            if (got - ggml).abs() > simd {
                failures.push(format!(
                    "{} row {r}: got {got:e}, ggml (AVX2) {ggml:e}, bound {simd:e}",
                    ty.name()
                ));
            }
        }
    }

    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
