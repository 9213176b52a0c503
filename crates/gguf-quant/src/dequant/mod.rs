//! Blocks to `f32`, for every type.
//!
//! Each kernel takes whole blocks (`src.len() == blocks * type_size`,
//! `dst.len() == blocks * block_size`, checked by the public functions) and computes exactly
//! what ggml's `dequantize_row_*` and the Python `gguf` package compute, operation for operation
//! in `f32` (no fused multiply-add, which would change the last bit).

mod basic;
mod iq;

pub(crate) use basic::k_scale_min;

use rayon::prelude::*;

use crate::error::{QuantError, Result};
use crate::{check_lengths, GgmlType};

/// A dequantization kernel over whole blocks.
pub(crate) type DequantFn = fn(src: &[u8], dst: &mut [f32]);

fn kernel(ty: GgmlType) -> Result<DequantFn> {
    basic::kernel(ty)
        .or_else(|| iq::kernel(ty))
        .ok_or(QuantError::Unsupported {
            ty,
            op: "dequantize",
        })
}

/// Dequantizes `src` (whole blocks of `ty`) into `dst`, whose length is the element count.
///
/// Plain types convert too: F16 and BF16 exactly, F64 and the integer types by rounding to the
/// nearest `f32`.
pub fn dequantize_row(ty: GgmlType, src: &[u8], dst: &mut [f32]) -> Result<()> {
    check_lengths(ty, dst.len(), src.len())?;
    kernel(ty)?(src, dst);
    Ok(())
}

/// Dequantizes a whole tensor of `elements` values, in parallel for large tensors.
pub fn dequantize(ty: GgmlType, src: &[u8], elements: usize) -> Result<Vec<f32>> {
    let blocks = check_lengths(ty, elements, src.len())?;
    let f = kernel(ty)?;
    let mut out = vec![0f32; elements];
    const PARALLEL_FROM: usize = 1 << 16;
    if elements < PARALLEL_FROM {
        f(src, &mut out);
    } else {
        let (bs, ts) = (ty.block_size() as usize, ty.type_size() as usize);
        let per_task = blocks.div_ceil(rayon::current_num_threads() * 8).max(1);
        out.par_chunks_mut(per_task * bs)
            .zip(src.par_chunks(per_task * ts))
            .for_each(|(dst, src)| f(src, dst));
    }
    Ok(out)
}
