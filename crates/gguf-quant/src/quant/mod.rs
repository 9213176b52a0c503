//! `f32` to blocks: ggml's reference quantizers (`quantize_row_*_ref`, no importance matrix),
//! reproduced bit for bit.

mod basic;
mod kquants;

use crate::error::{QuantError, Result};
use crate::{check_lengths, GgmlType};

/// A quantization kernel over whole blocks.
pub(crate) type QuantFn = fn(src: &[f32], dst: &mut [u8]);

/// Quantizes `src` (a whole number of blocks of `ty`) into `dst`.
///
/// Available for the plain float types and every type ggml has a reference quantizer for
/// without an importance matrix; the i-quants other than IQ4_NL/IQ4_XS give
/// [`QuantError::Unsupported`].
pub fn quantize_row(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    check_lengths(ty, src.len(), dst.len())?;
    let f = kernel(ty).ok_or(QuantError::Unsupported { ty, op: "quantize" })?;
    f(src, dst);
    Ok(())
}

/// The reference quantizer of `ty`, if ggml has one without an importance matrix.
pub(crate) fn kernel(ty: GgmlType) -> Option<QuantFn> {
    basic::kernel(ty).or_else(|| kquants::kernel(ty))
}
