//! The float kernels of [`crate::kernels::vec`] against their scalar twins, bit for bit: the
//! f16 dot products and multiply-adds of attention (one row and batched), `expf` against
//! libm, SwiGLU, and the attention GEMM and softmax (GELU and GeGLU: `gelu`).

use half::f16;

use super::gelu::check_gelu_kernels;
use super::{simd_isas, Rng};
use crate::kernels::vec::VecKernels;
use crate::kernels::{simd, Isa};

/// Every table's fused value accumulation (`vec::mad_f16_rows`) equals the scalar twins'
/// `scale_f16` and `mad_f16` called row by row and head by head, bit for bit: rows with and
/// without a rescale (one of them 0, as the first position's is), widths that fill 64-, 16- and
/// 1-value steps, padded rows, one head and several (in groups of four and fewer).
#[test]
fn simd_mad_f16_rows_equal_the_row_by_row_twins_bit_for_bit() {
    let twin = crate::kernels::vec::SCALAR;
    let mut rng = Rng(0x5EED_F00D_0000_0031);
    let mut tested = 0;
    for (isa, k) in simd_isas() {
        let Some(rows_kernel) = k.vec.and_then(|v| v.mad_f16_rows) else {
            continue;
        };
        for n in [1usize, 15, 16, 17, 64, 80, 100, 256] {
            for heads in [1usize, 2, 3, 4, 7] {
                let stride = n + (n % 3);
                let rows = 37;
                let values: Vec<f16> = (0..rows * stride)
                    .map(|_| f16::from_f32(rng.unit() * 2.0))
                    .collect();
                let steps = rows * heads;
                let weights: Vec<f32> = (0..steps).map(|_| rng.unit().abs()).collect();
                let rescales: Vec<Option<f32>> = (0..steps)
                    .map(|i| match (i / heads) % 5 {
                        _ if i < heads => Some(0.0),
                        1 if i % 2 == 0 => Some(rng.unit().abs()),
                        2 if i % 2 == 1 => Some(rng.unit().abs()),
                        _ => None,
                    })
                    .collect();
                let mut acc: Vec<f16> = (0..n * heads).map(|_| f16::from_f32(rng.unit())).collect();
                let mut theirs = acc.clone();
                rows_kernel(&mut acc, heads, &values, stride, &rescales, &weights);
                for (h, theirs) in theirs.chunks_exact_mut(n).enumerate() {
                    for r in 0..rows {
                        if let Some(s) = rescales[r * heads + h] {
                            (twin.scale_f16)(theirs, s);
                        }
                        let row = &values[r * stride..r * stride + n];
                        (twin.mad_f16)(theirs, row, weights[r * heads + h]);
                    }
                }
                let bits = |v: &[f16]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&acc),
                    bits(&theirs),
                    "{} mad_f16_rows {n} x {heads}",
                    isa.name()
                );
                tested += 1;
            }
        }
    }
    // AVX2 and AVX-512 have the kernel; on a CPU without them nothing here runs it.
    assert_eq!(tested > 0, simd(Isa::Avx2).is_some());
}

/// Every table's batched scoring (`vec::dot_f16_rows`) equals the scalar twin's `dot_f16` row
/// by row and head by head, bit for bit: row counts around the batch of 16, lengths with and
/// without a tail of fewer than 32 values, padded rows, one query and several (in groups of
/// four and fewer), and large values among small (where the order of the additions shows).
#[test]
fn simd_dot_f16_rows_equal_the_row_by_row_twin_bit_for_bit() {
    let twin = crate::kernels::vec::SCALAR;
    let mut rng = Rng(0x5EED_F00D_0000_0032);
    let mut tested = 0;
    for (isa, k) in simd_isas() {
        let Some(rows_kernel) = k.vec.and_then(|v| v.dot_f16_rows) else {
            continue;
        };
        for n in [1usize, 31, 32, 64, 100, 128, 256, 512] {
            for (m, heads) in [
                (1usize, 1usize),
                (15, 2),
                (16, 1),
                (17, 3),
                (40, 4),
                (33, 7),
            ] {
                let stride = n + (n % 3) + 8;
                let rows: Vec<f16> = (0..m * stride)
                    .map(|i| f16::from_f32(rng.unit() * if i % 7 == 0 { 300.0 } else { 2.0 }))
                    .collect();
                let queries: Vec<f16> = (0..n * heads)
                    .map(|_| f16::from_f32(rng.unit() * 3.0))
                    .collect();
                let mut ours = vec![f32::NAN; m * heads];
                rows_kernel(&mut ours, &rows, stride, &queries, heads);
                for (i, &o) in ours.iter().enumerate() {
                    let (r, h) = (i / heads, i % heads);
                    let row = &rows[r * stride..r * stride + n];
                    let t = (twin.dot_f16)(row, &queries[h * n..(h + 1) * n]);
                    let name = isa.name();
                    assert_eq!(
                        o.to_bits(),
                        t.to_bits(),
                        "{name} dot_f16_rows {n}: row {r}/{m}, head {h}/{heads}"
                    );
                }
                tested += 1;
            }
        }
    }
    // AVX2 and AVX-512 have the kernel; on a CPU without them nothing here runs it.
    assert_eq!(tested > 0, simd(Isa::Avx2).is_some());
}

/// Every table's `vec::exp_f32` gives libm's `expf` bit for bit (the scalar twin calls it):
/// every 997th f32 from -104 to 0 (where attention's softmax arguments lie), random bit
/// patterns of every exponent, and glibc's special cases and their edges (`|x| >= 88`,
/// underflow to subnormals and to 0, overflow, infinities, NaN, zeros), in vectors of every
/// length around sixteen.
#[test]
fn simd_exp_f32_equals_libm_bit_for_bit() {
    let mut rng = Rng(0x5EED_F00D_0000_0033);
    let mut inputs: Vec<f32> = Vec::new();
    let (low, high) = ((-104f32).to_bits(), 0x8000_0000u32);
    inputs.extend((high..=low).step_by(997).map(f32::from_bits));
    inputs.extend((0..200_000).map(|_| f32::from_bits(rng.next() as u32)));
    for edge in [
        88.0f32, 88.72283, 88.72284, -88.0, -103.27, -103.28, -103.97, -103.98,
    ] {
        for d in -3i32..=3 {
            inputs.push(f32::from_bits(edge.to_bits().wrapping_add_signed(d)));
        }
    }
    inputs.extend([
        0.0,
        -0.0,
        1.0,
        -1.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        1e-40,
    ]);
    let mut tested = 0;
    for (isa, k) in simd_isas() {
        let Some(simd) = k.vec else { continue };
        for len in [1usize, 15, 16, 17, 33] {
            for chunk in inputs
                .chunks(len)
                .take(if len == 16 { usize::MAX } else { 2000 })
            {
                let mut ours = chunk.to_vec();
                (simd.exp_f32)(&mut ours);
                for (&x, &o) in chunk.iter().zip(&ours) {
                    let libm = x.exp();
                    assert!(
                        o.to_bits() == libm.to_bits() || (o.is_nan() && libm.is_nan()),
                        "{} exp_f32({x:e} = {:#x}): {o:e} vs libm {libm:e}",
                        isa.name(),
                        x.to_bits()
                    );
                }
            }
        }
        tested += 1;
    }
    assert!(tested > 0 || simd_isas().is_empty());
}

/// Every SIMD table's `crate::kernels::vec` kernels equal the scalar twins bit for bit.
#[test]
fn simd_vec_kernels_equal_their_scalar_twins_bit_for_bit() {
    let twin = crate::kernels::vec::SCALAR;
    let mut rng = Rng(0x5EED_F00D_0000_0007);
    let mut values = |n: usize| -> Vec<f32> { (0..n).map(|_| rng.unit() * 4.0).collect() };
    let halves = |v: Vec<f32>| -> Vec<f16> { v.into_iter().map(f16::from_f32).collect() };
    for (isa, k) in simd_isas() {
        let Some(simd) = k.vec else { continue };
        let name = isa.name();
        for n in [0usize, 1, 7, 8, 31, 32, 33, 64, 100, 128, 257] {
            let (a, b) = (halves(values(n)), halves(values(n)));
            let (s, t) = ((simd.dot_f16)(&a, &b), (twin.dot_f16)(&a, &b));
            assert_eq!(s.to_bits(), t.to_bits(), "{name} dot_f16 {n}: {s} vs {t}");

            let mut acc = halves(values(n));
            let mut theirs = acc.clone();
            (simd.mad_f16)(&mut acc, &a, 0.37);
            (twin.mad_f16)(&mut theirs, &a, 0.37);
            assert_eq!(acc, theirs, "{name} mad_f16 {n}");
            (simd.scale_f16)(&mut acc, 0.61);
            (twin.scale_f16)(&mut theirs, 0.61);
            assert_eq!(acc, theirs, "{name} scale_f16 {n}");

            let mut gate = values(n);
            for (i, g) in gate.iter_mut().enumerate() {
                match i % 9 {
                    // expf's saturating branches (|x| up to 160)...
                    0 => *g *= 40.0,
                    // ...and its scaled one (expf(-x) near 2^126, where x / (1 + expf(-x))
                    // is still a normal number), from both sides of the switch.
                    4 => *g -= 87.5,
                    _ => {}
                }
            }
            let up = values(n);
            let mut theirs = gate.clone();
            (simd.swiglu)(&mut gate, &up);
            (twin.swiglu)(&mut theirs, &up);
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&gate), bits(&theirs), "{name} swiglu {n}");
        }
        check_gelu_kernels(name, &simd, &twin, &mut Rng(0x6E1F_0000_0000_0011));
        check_attention_kernels(name, &simd, &twin, &mut Rng(0xA77E_0000_0000_0013));
    }
}

/// `gemm_f32` and `soft_max_f32` of `simd` equal the twins' bit for bit: products of every
/// row count around the blockings (1, 4, 6, 8 rows) and column counts around the vector
/// widths and masked tails,
/// accumulating into non-zero `c`; softmax over lengths with and without tails, with `-inf`
/// (masked) entries and differences large enough for `expf`'s saturating branches.
fn check_attention_kernels(name: &str, simd: &VecKernels, twin: &VecKernels, rng: &mut Rng) {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for m in [0usize, 1, 2, 4, 5, 6, 7, 8, 9, 12, 13, 16, 17] {
        for k in [0usize, 1, 3, 8, 64] {
            for n in [0usize, 1, 3, 4, 7, 8, 9, 16, 17, 24, 31, 32, 33, 48, 64, 65] {
                let a: Vec<f32> = (0..m * k).map(|_| rng.unit() * 3.0).collect();
                let b: Vec<f32> = (0..k * n).map(|_| rng.unit() * 3.0).collect();
                let c: Vec<f32> = (0..m * n).map(|_| rng.unit()).collect();
                let (mut ours, mut theirs) = (c.clone(), c);
                (simd.gemm_f32)(&mut ours, &a, &b, m, k, n);
                (twin.gemm_f32)(&mut theirs, &a, &b, m, k, n);
                assert_eq!(bits(&ours), bits(&theirs), "{name} gemm_f32 {m}x{k}x{n}");
            }
        }
    }
    for n in [0usize, 1, 7, 8, 9, 16, 63, 64, 65, 200] {
        let x: Vec<f32> = (0..n)
            .map(|i| match i % 11 {
                3 => f32::NEG_INFINITY,
                5 => -100.0 - rng.unit().abs() * 100.0,
                7 => -86.0 - rng.unit().abs() * 2.0,
                _ => rng.unit() * 8.0,
            })
            .collect();
        let max = x.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v));
        let (mut ours, mut theirs) = (x.clone(), x);
        let (s, t) = (
            (simd.soft_max_f32)(&mut ours, max),
            (twin.soft_max_f32)(&mut theirs, max),
        );
        assert_eq!(
            s.to_bits(),
            t.to_bits(),
            "{name} soft_max_f32 {n}: {s} vs {t}"
        );
        assert_eq!(bits(&ours), bits(&theirs), "{name} soft_max_f32 {n}");
    }
}
