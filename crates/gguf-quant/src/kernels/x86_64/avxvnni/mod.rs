//! AVX-VNNI kernels: AVX2's, with the byte products of the legacy types' dot products and
//! GEMM tiles (Q8_0, Q4_0, Q5_0, Q4_1) summed by one VEX-encoded `vpdpbusd` instead of
//! `vpmaddubsw` + `vpmaddwd`, for the CPUs that have AVX-VNNI without AVX-512 (Intel's Alder
//! Lake and later client cores, for one). The kernels are AVX2's own code, generic over the
//! byte products (`avx2::common::ByteDot`) and compiled here with AVX-VNNI enabled: the i32
//! lane sums are the same integers, so every result is AVX2's bit for bit. Every other entry
//! of this table is AVX2's kernel.
//!
//! Every safe function of these modules runs AVX-VNNI code: they are reachable from outside
//! only through [`kernels`], which hands them out only after [`available`] confirmed the CPU
//! has every instruction set they use.

use super::avx2;
use crate::kernels::{DotFn, GemmFn, IsaKernels, RowsFn};
use crate::GgmlType;

/// The dot products (one row and several).
mod legacy {
    use super::avx2::common::AvxVnni;
    use super::avx2::legacy::{self, legacy_entries};

    legacy_entries!("avx2,fma,f16c,avxvnni", AvxVnni);
}

/// The batched products, in AVX2's tiles.
mod gemm {
    use super::avx2::common::AvxVnni;
    use super::avx2::gemm::{
        self, checked_tiles, for_each_tile, gemm_wrapper, legacy_gemms, store, tile_shapes, Scales,
        TileScales,
    };
    use crate::GgmlType;

    /// Activation rows per tile: AVX2's (the same sixteen registers).
    const NR: usize = 3;

    legacy_gemms!("avx2,fma,f16c,avxvnni", AvxVnni);
}

/// Whether this CPU runs these kernels (and AVX2's, which this table hands out too).
fn available() -> bool {
    avx2::kernels().is_some() && is_x86_feature_detected!("avxvnni")
}

/// This module's kernels, if this CPU has AVX-VNNI (and AVX2, FMA, F16C).
pub(crate) fn kernels() -> Option<IsaKernels> {
    let base = avx2::kernels()?;
    available().then_some(IsaKernels {
        dot,
        rows,
        gemm,
        ..base
    })
}

/// The one-row kernels: Q8_0, Q5_0, Q4_0 and Q4_1 here, AVX2's for the others.
fn dot(ty: GgmlType) -> Option<DotFn> {
    match ty {
        GgmlType::Q8_0 => Some(legacy::q8_0_q8_0),
        GgmlType::Q5_0 => Some(legacy::q5_0_q8_0),
        GgmlType::Q4_0 => Some(legacy::q4_0_q8_0),
        GgmlType::Q4_1 => Some(legacy::q4_1_q8_1),
        _ => avx2::dot(ty),
    }
}

/// The several-rows kernels: Q8_0, Q4_0 and Q4_1 here, AVX2's for the others.
fn rows(ty: GgmlType) -> Option<RowsFn> {
    match ty {
        GgmlType::Q8_0 => Some(legacy::q8_0_q8_0_rows),
        GgmlType::Q4_0 => Some(legacy::q4_0_q8_0_rows),
        GgmlType::Q4_1 => Some(legacy::q4_1_q8_1_rows),
        _ => avx2::rows(ty),
    }
}

/// The batched products: Q8_0, Q4_0, Q5_0 and Q4_1 here, AVX2's for the others.
fn gemm(ty: GgmlType) -> Option<GemmFn> {
    match ty {
        GgmlType::Q8_0 => Some(gemm::q8_0_gemm),
        GgmlType::Q4_0 => Some(gemm::q4_0_gemm),
        GgmlType::Q5_0 => Some(gemm::q5_0_gemm),
        GgmlType::Q4_1 => Some(gemm::q4_1_gemm),
        _ => avx2::gemm(ty),
    }
}
