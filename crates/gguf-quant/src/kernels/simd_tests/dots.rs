//! The one-row dot kernels against their scalar twins (within the reordering bound) and, on
//! x86, against the portable kernels in AVX2's order (bit for bit); the several-rows kernels
//! against their ISA's one-row kernel.

use super::{activations, all_types, assert_within_reordering_bound, for_random_rows, simd_isas};
use super::{weights, Rng};
use crate::kernels::{lanes, simd, Isa};
use crate::GgmlType;

/// Every SIMD dot kernel against its scalar twin (see [`assert_within_reordering_bound`]).
#[test]
fn simd_dot_kernels_match_scalar_within_reordering_bound() {
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    for (isa, k) in simd_isas() {
        let types: Vec<GgmlType> = all_types().filter(|&ty| (k.dot)(ty).is_some()).collect();
        assert!(!types.is_empty(), "{}: no dot kernels", isa.name());
        for ty in types {
            let simd = (k.dot)(ty).unwrap();
            for_random_rows(ty, &mut rng, |n, w, a| {
                assert_within_reordering_bound(ty, n, w, a, simd(n, w, a), isa);
            });
        }
    }
}

/// The x86 dot kernels (AVX2's, and the AVX-512 table's) equal the portable kernels in AVX2's
/// order (`lanes`, which the scalar ISA runs) bit for bit, so a machine without AVX2, or with
/// AVX-512, computes the same numbers for these types. (NEON's kernels keep their own order,
/// within the bound above.)
#[test]
fn x86_dot_kernels_equal_the_portable_ones_bit_for_bit() {
    let mut rng = Rng(0x1A2E_5000_0000_0001);
    for isa in [Isa::Avx2, Isa::AvxVnni, Isa::Avx512] {
        let Some(k) = simd(isa) else {
            eprintln!("skipping {}: not on this CPU", isa.name());
            continue;
        };
        let mut checked = 0;
        for ty in all_types() {
            let (Some(simd), Some(portable)) = ((k.dot)(ty), lanes::dot(ty)) else {
                continue;
            };
            for_random_rows(ty, &mut rng, |n, w, a| {
                let (s, p) = (simd(n, w, a), portable(n, w, a));
                assert_eq!(
                    s.to_bits(),
                    p.to_bits(),
                    "{ty} n={n}: {} {s} vs portable {p}",
                    isa.name()
                );
            });
            checked += 1;
        }
        assert_eq!(
            checked,
            12,
            "{}: Q8_0, Q4_0, Q5_0, Q4_1, Q5_1, IQ4_NL, Q2_K..Q6_K and IQ4_XS",
            isa.name()
        );
    }
}

/// Every several-rows kernel equals its ISA's one-row kernel bit for bit, row by row, for
/// counts of rows that fill the kernels' groups and leave a remainder.
#[test]
fn simd_rows_kernels_equal_their_one_row_kernels_bit_for_bit() {
    let mut rng = Rng(0x0BAD_5EED_1234_5678);
    for (isa, k) in simd_isas() {
        for ty in all_types() {
            let Some(rows) = (k.rows)(ty) else { continue };
            let dot = (k.dot)(ty).expect("a rows kernel without a one-row kernel");
            let n = 3 * ty.block_size() as usize;
            let row_bytes = crate::row_bytes(ty, n).unwrap();
            for count in [1, 3, 4, 9] {
                let w = weights(ty, n * count, &mut rng);
                let a = activations(ty, n, &mut rng);
                let mut out = vec![0f32; count];
                rows(n, &w, row_bytes, &a, &mut out);
                for (r, &y) in out.iter().enumerate() {
                    let one = dot(n, &w[r * row_bytes..(r + 1) * row_bytes], &a);
                    assert_eq!(
                        y.to_bits(),
                        one.to_bits(),
                        "{} {ty}: row {r} of {count}: {y} vs {one}",
                        isa.name()
                    );
                }
            }
        }
    }
}
