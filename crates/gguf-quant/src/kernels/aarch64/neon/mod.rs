//! NEON kernels, by concern:
//! - `legacy`: dot products of Q8_0, Q4_0, Q4_1;
//! - `kquants`: Q4_K, Q6_K;
//! - `vec`: the float kernels of [`crate::kernels::vec`], bit for bit as their scalar twins;
//! - `common`: what the dot products share.
//!
//! Every other type, the activation quantizers and the several-rows products run the scalar
//! code on aarch64 (activations are quantized by the portable quantizers of
//! `kernels::activations`, which write the bytes of ggml's x86 code).
//!
//! Plain NEON only, which every aarch64 CPU has: signed byte products widen to i16 with
//! `vmull_s8`/`vmlal_s8` and then to i32, so integer parts are exact, as in the scalar kernels.
//! (The `dotprod` extension's `vdotq_s32` would save a few instructions per 16 bytes, but its
//! Rust intrinsic is not stable yet.)
//!
//! Float results:
//! - Q8_0, Q4_0, Q4_1: each block's term is computed with the scalar twin's operations (same
//!   products, same fused multiply-add), but the terms are summed in four lanes, four blocks per
//!   step, and the lanes added at the end; results differ from the scalar twins only by the
//!   order of float additions (`kernels::simd_tests` bounds the difference).
//! - Q4_K, Q6_K: the integer sums land in the same eight lanes (element index mod 8) as in
//!   ggml's generic C, and every float operation is the scalar twin's, in its order, so the
//!   results are bit-identical to the scalar kernels (tested).
//!
//! The kernels walk the blocks through raw pointers, as the AVX2 ones do: with slice iterators
//! the bounds and iterator bookkeeping cost a good part of the throughput on short rows.

mod common;
mod kquants;
mod legacy;
mod vec;

use crate::kernels::{DotFn, IsaKernels};
use crate::GgmlType;

/// Whether this CPU runs these kernels (NEON is part of every aarch64 Linux target).
fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

/// This module's kernels, if this CPU has NEON. Every safe function of this module runs NEON
/// code: they are reachable from outside only through this table.
pub(crate) fn kernels() -> Option<IsaKernels> {
    available().then_some(IsaKernels {
        dot,
        rows: |_| None,
        gemm: |_| None,
        quantize: |_| None,
        vec: Some(vec::KERNELS),
        // llama.cpp repacks for NEON with i8mm/dotprod kernels we do not have yet.
        packed: |_| None,
    })
}

/// The NEON kernel for weights of type `ty`, if there is one.
fn dot(ty: GgmlType) -> Option<DotFn> {
    Some(match ty {
        GgmlType::Q4_0 => legacy::q4_0_q8_0,
        GgmlType::Q4_1 => legacy::q4_1_q8_1,
        GgmlType::Q8_0 => legacy::q8_0_q8_0,
        GgmlType::Q4_K => kquants::q4_k_q8_k,
        GgmlType::Q6_K => kquants::q6_k_q8_k,
        _ => return None,
    })
}
