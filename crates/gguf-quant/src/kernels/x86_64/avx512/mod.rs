//! AVX-512 kernels (F, BW, VL and VNNI, besides AVX2, FMA and F16C), for the products where
//! 512-bit vectors pay; every other entry of this ISA's table is AVX2's kernel.
//!
//! They compute the numbers of their AVX2 counterparts bit for bit, so that the engine's
//! tokens do not depend on the machine: integer parts are exact whatever the instruction, and
//! every float operation is the AVX2 kernel's, lane for lane, in the same order. A 512-bit
//! vector here holds what two AVX2 vectors held (two groups of interleaved rows, or two
//! blocks), never a reordered sum. `simd_tests` and `packed_tests` check each against the
//! portable twins the AVX2 kernels equal.
//!
//! - `packed`: the GEMV and GEMM of the row-interleaved Q4_K layout, two groups of eight rows
//!   per 512-bit vector.
//! - `legacy`: the one-row and eight-row dot products of Q8_0, Q5_0, Q4_0 and Q4_1 (decoding),
//!   two blocks per `vpdpbusd`;
//! - `kquants`: the one-row dot products of Q6_K (also several rows per call) and Q5_K,
//!   two 32-value groups per `vpmaddubsw` + `vpdpwssd`;
//! - `vec`: the f16 dot product and multiply-add of attention, 16 lanes at a time;
//! - `gemm`: the batched products of Q8_0, Q4_0 and Q5_0 (tinyBLAS's order) and of Q4_1 (its
//!   one-row kernel's order), a block of two weight rows per `vpdpbusd`;
//! - `kq_gemm`: the batched products of Q6_K, Q5_K, Q3_K and Q2_K (llama.cpp's tiled K-quant
//!   order), two 32-value chunks per `vpmaddubsw`.
//!
//! Every safe function of these modules runs AVX-512 code: they are reachable from outside
//! only through [`kernels`], which hands them out only after [`available`] confirmed the CPU
//! has every instruction set they use.
//!
//! The kernels use intrinsics of those features only (AVX-512 DQ, for one, is not among them).

mod gemm;
mod kq_gemm;
pub(super) mod kquants;
mod legacy;
mod packed;
mod unpack;
mod vec;

use super::avx2;
use crate::kernels::{DotFn, GemmFn, IsaKernels, PackedKernels, RowsFn};
use crate::quant::QuantFn;
use crate::GgmlType;

/// Whether this CPU runs these kernels (and AVX2's, which this table hands out too).
fn available() -> bool {
    avx2::kernels().is_some()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni")
}

/// This module's kernels, if this CPU has AVX-512 F/BW/VL/VNNI (and AVX2, FMA, F16C).
pub(crate) fn kernels() -> Option<IsaKernels> {
    let base = avx2::kernels()?;
    available().then_some(IsaKernels {
        dot,
        rows,
        gemm,
        quantize,
        vec: base.vec.map(vec::kernels),
        packed: packed_kernels,
    })
}

/// The one-row kernels: Q8_0, Q5_0, Q4_0, Q4_1, Q6_K and Q5_K here, AVX2's for the others.
fn dot(ty: GgmlType) -> Option<DotFn> {
    match ty {
        GgmlType::Q8_0 => Some(legacy::q8_0_q8_0),
        GgmlType::Q5_0 => Some(legacy::q5_0_q8_0),
        GgmlType::Q4_0 => Some(legacy::q4_0_q8_0),
        GgmlType::Q4_1 => Some(legacy::q4_1_q8_1),
        GgmlType::Q6_K => Some(kquants::q6_k_q8_k),
        GgmlType::Q5_K => Some(kquants::q5_k_q8_k),
        _ => avx2::dot(ty),
    }
}

/// The several-rows kernels: Q8_0, Q5_0, Q4_0, Q4_1 and Q6_K here, AVX2's for the others.
fn rows(ty: GgmlType) -> Option<RowsFn> {
    match ty {
        GgmlType::Q8_0 => Some(legacy::q8_0_q8_0_rows),
        GgmlType::Q5_0 => Some(legacy::q5_0_q8_0_rows),
        GgmlType::Q4_0 => Some(legacy::q4_0_q8_0_rows),
        GgmlType::Q4_1 => Some(legacy::q4_1_q8_1_rows),
        GgmlType::Q6_K => Some(kquants::q6_k_q8_k_rows),
        _ => avx2::rows(ty),
    }
}

/// The batched products: Q8_0, Q4_0, Q5_0, Q4_1, Q6_K, Q5_K, Q3_K and Q2_K here, AVX2's for
/// the others.
fn gemm(ty: GgmlType) -> Option<GemmFn> {
    match ty {
        GgmlType::Q8_0 => Some(gemm::q8_0_gemm),
        GgmlType::Q4_0 => Some(gemm::q4_0_gemm),
        GgmlType::Q5_0 => Some(gemm::q5_0_gemm),
        GgmlType::Q4_1 => Some(gemm::q4_1_gemm),
        GgmlType::Q6_K => Some(kq_gemm::q6_k_gemm),
        GgmlType::Q5_K => Some(kq_gemm::q5_k_gemm),
        GgmlType::Q3_K => Some(kq_gemm::q3_k_gemm),
        GgmlType::Q2_K => Some(kq_gemm::q2_k_gemm),
        _ => avx2::gemm(ty),
    }
}

/// AVX2's activation quantizers.
fn quantize(act: GgmlType) -> Option<QuantFn> {
    avx2::quantize(act)
}

/// The packed-layout products: Q4_K's, two groups of rows at a time.
fn packed_kernels(ty: GgmlType) -> Option<PackedKernels> {
    match ty {
        GgmlType::Q4_K => Some(PackedKernels {
            gemv: packed::q4_k_x8_gemv,
            gemm4: packed::q4_k_x8_gemm4,
        }),
        _ => None,
    }
}
