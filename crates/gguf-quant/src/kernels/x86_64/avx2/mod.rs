//! AVX2 + FMA + F16C kernels, by concern:
//! - `legacy`: dot products of Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (four rows per call for Q4_0, Q4_1,
//!   Q8_0);
//! - `kquants`: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K;
//! - `kq_gemm`: the prompt products (GEMM) of the K-quants and IQ4_XS, in llama.cpp's tiled order;
//! - `iq`: IQ4_NL, IQ4_XS;
//! - `vec`: the F16 dot product and the float kernels of [`crate::kernels::vec`];
//! - `gemm`: the batched products of the legacy types and IQ4_NL, tiled;
//! - `activations`: ggml's x86 activation quantizers (Q8_0, Q8_1; Q8_K);
//! - `packed`: the GEMV and GEMM of the row-interleaved Q4_K layout (`crate::kernels::packed`);
//! - `common`: what the kernels share.
//!
//! Integer parts are exact, as in the scalar kernels; the float accumulation of the dot
//! products runs in eight lanes and is summed at the end, so results differ from the scalar
//! twins only by the order of float additions (`kernels::simd_tests` bounds the difference).
//! The `vec` kernels follow ggml's AVX2 order and equal their scalar twins bit for bit.
//!
//! The kernels walk the blocks through raw pointers: with slice iterators the bounds and
//! iterator bookkeeping cost up to a third of the throughput on short rows.
//!
//! Every safe function of these modules runs AVX2 code: they are reachable from outside only
//! through [`kernels`], which hands them out only after [`available`] confirmed the CPU has
//! AVX2, FMA and F16C.

mod activations;
pub(super) mod common;
pub(super) mod gemm;
mod iq;
pub(super) mod kq_gemm;
pub(super) mod kquants;
pub(super) mod legacy;
pub(super) mod packed;
pub(super) mod vec;

use crate::kernels::{DotFn, GemmFn, IsaKernels, PackedKernels, RowsFn};
use crate::quant::QuantFn;
use crate::GgmlType;

/// Whether this CPU runs these kernels.
fn available() -> bool {
    is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c")
}

/// This module's kernels, if this CPU has AVX2, FMA and F16C.
pub(crate) fn kernels() -> Option<IsaKernels> {
    available().then_some(IsaKernels {
        dot,
        rows,
        gemm,
        quantize,
        vec: Some(vec::kernels()),
        packed: packed_kernels,
    })
}

/// The products on the packed layout of weight type `ty`: the types llama.cpp repacks for
/// AVX2 (`Q4_K` into eight interleaved rows).
fn packed_kernels(ty: GgmlType) -> Option<PackedKernels> {
    match ty {
        GgmlType::Q4_K => Some(PackedKernels {
            gemv: packed::q4_k_x8_gemv,
            gemm4: packed::q4_k_x8_gemm4,
        }),
        _ => None,
    }
}

/// The kernel for weights of type `ty`, if there is one.
pub(super) fn dot(ty: GgmlType) -> Option<DotFn> {
    Some(match ty {
        GgmlType::Q4_0 => legacy::q4_0_q8_0,
        GgmlType::Q4_1 => legacy::q4_1_q8_1,
        GgmlType::Q5_0 => legacy::q5_0_q8_0,
        GgmlType::Q5_1 => legacy::q5_1_q8_1,
        GgmlType::Q8_0 => legacy::q8_0_q8_0,
        GgmlType::Q2_K => kquants::q2_k_q8_k,
        GgmlType::Q3_K => kquants::q3_k_q8_k,
        GgmlType::Q4_K => kquants::q4_k_q8_k,
        GgmlType::Q5_K => kquants::q5_k_q8_k,
        GgmlType::Q6_K => kquants::q6_k_q8_k,
        GgmlType::IQ4_NL => iq::iq4_nl_q8_0,
        GgmlType::IQ4_XS => iq::iq4_xs_q8_k,
        GgmlType::F16 => vec::f16_f16,
        _ => return None,
    })
}

/// The kernel that computes several rows per call for weights of type `ty`, if there is one.
pub(super) fn rows(ty: GgmlType) -> Option<RowsFn> {
    Some(match ty {
        GgmlType::Q4_0 => legacy::q4_0_q8_0_rows,
        GgmlType::Q4_1 => legacy::q4_1_q8_1_rows,
        GgmlType::Q8_0 => legacy::q8_0_q8_0_rows,
        GgmlType::Q4_K => kquants::q4_k_q8_k_rows,
        GgmlType::Q6_K => kquants::q6_k_q8_k_rows,
        _ => return None,
    })
}

/// The batched (prompt) product for weights of type `ty`, if there is one: the legacy types in
/// the order llama.cpp's batched products take on AVX2 (see `gemm`), the K-quants in that of
/// its tiled K-quant product (see `kq_gemm`).
pub(super) fn gemm(ty: GgmlType) -> Option<GemmFn> {
    Some(match ty {
        GgmlType::Q8_0 => gemm::q8_0_gemm,
        GgmlType::Q4_0 => gemm::q4_0_gemm,
        GgmlType::Q5_0 => gemm::q5_0_gemm,
        GgmlType::IQ4_NL => gemm::iq4_nl_gemm,
        GgmlType::Q4_1 => gemm::q4_1_gemm,
        GgmlType::Q5_1 => gemm::q5_1_gemm,
        GgmlType::Q6_K => kq_gemm::q6_k_gemm,
        GgmlType::Q5_K => kq_gemm::q5_k_gemm,
        GgmlType::Q4_K => kq_gemm::q4_k_gemm,
        GgmlType::Q3_K => kq_gemm::q3_k_gemm,
        GgmlType::Q2_K => kq_gemm::q2_k_gemm,
        GgmlType::IQ4_XS => kq_gemm::iq4_xs_gemm,
        _ => return None,
    })
}

/// The quantizer of activation type `act`, if there is one: Q8_0 and Q8_1 as ggml's x86 code
/// quantizes them, Q8_K with the reference quantizer's bytes.
pub(super) fn quantize(act: GgmlType) -> Option<QuantFn> {
    Some(match act {
        GgmlType::Q8_0 => activations::quantize_q8_0,
        GgmlType::Q8_1 => activations::quantize_q8_1,
        GgmlType::Q8_K => activations::quantize_q8_k,
        _ => return None,
    })
}
