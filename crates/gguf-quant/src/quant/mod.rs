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

/// Quantizes whole rows `src` (each a whole number of blocks of `ty`) into `dst` as ggml's
/// `ggml_quantize_chunk` does without an importance matrix: what llama-quantize writes. That is
/// [`quantize_row`]'s reference quantizer for every type but IQ4_NL, whose row quantizer
/// searches 15 scales where its reference one tries one.
pub fn quantize_rows(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    if ty == GgmlType::IQ4_NL {
        check_lengths(ty, src.len(), dst.len())?;
        kquants::iq4_nl_rows(src, dst);
        return Ok(());
    }
    quantize_row(ty, src, dst)
}

/// The reference quantizer of `ty`, if ggml has one without an importance matrix.
pub(crate) fn kernel(ty: GgmlType) -> Option<QuantFn> {
    basic::kernel(ty).or_else(|| kquants::kernel(ty))
}
