//! `f32` to blocks: ggml's reference quantizers (`quantize_row_*_ref`, no importance matrix)
//! and its row quantizers with an importance matrix (`quantize_row_*_impl`), reproduced bit for
//! bit.

mod basic;
mod imatrix;
mod iq1;
mod iq2;
mod iq3;
mod iq_grid;
mod kquants;

use crate::error::{QuantError, Result};
use crate::{check_lengths, row_bytes, GgmlType};

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
/// searches 15 scales where its reference one tries one, and the grid i-quants whose
/// importance-matrix quantizer also runs without one (`quantize_row_iq*_impl` with a NULL
/// matrix), which [`quantize_row`] does not offer: IQ1_M, IQ2_S, IQ3_XXS and IQ3_S.
pub fn quantize_rows(ty: GgmlType, src: &[f32], dst: &mut [u8]) -> Result<()> {
    let rows: Option<QuantFn> = match ty {
        GgmlType::IQ4_NL => Some(kquants::iq4_nl_rows),
        GgmlType::IQ3_XXS => Some(iq3::iq3_xxs_plain),
        GgmlType::IQ3_S => Some(iq3::iq3_s_plain),
        GgmlType::IQ2_S => Some(|src, dst| iq2::iq2_s(src, None, dst)),
        GgmlType::IQ1_M => Some(|src, dst| iq1::iq1_m(src, None, dst)),
        _ => None,
    };
    if let Some(f) = rows {
        check_lengths(ty, src.len(), dst.len())?;
        f(src, dst);
        return Ok(());
    }
    quantize_row(ty, src, dst)
}

/// Quantizes whole rows `src` (`src.len() / n_per_row` rows) into `dst` as ggml's
/// `ggml_quantize_chunk` does with an importance matrix `imatrix` (`n_per_row` values, one per
/// column), which is what llama-quantize writes with `--imatrix`.
///
/// Implemented for Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS,
/// IQ1_S, IQ1_M, IQ2_XXS, IQ2_XS, IQ2_S, IQ3_XXS and IQ3_S.
/// The types whose ggml quantizer ignores the importance matrix (the plain floats, Q8_0, Q1_0,
/// Q2_0, MXFP4, NVFP4, TQ1_0, TQ2_0) quantize as [`quantize_rows`] does. Every other type gives
/// [`QuantError::Unsupported`].
///
/// Errors, never panics, when `n_per_row` is zero or not a whole number of blocks, when `src`
/// is not a whole number of rows, when `imatrix` does not hold `n_per_row` values, or when
/// `dst` does not hold exactly the quantized rows.
pub fn quantize_rows_imatrix(
    ty: GgmlType,
    src: &[f32],
    n_per_row: usize,
    imatrix: &[f32],
    dst: &mut [u8],
) -> Result<()> {
    use GgmlType::*;
    check_lengths(ty, src.len(), dst.len())?;
    if n_per_row == 0 || !src.len().is_multiple_of(n_per_row) {
        return Err(QuantError::Shape(format!(
            "{} values are not a whole number of rows of {n_per_row}",
            src.len()
        )));
    }
    // A whole number of blocks per row, so that rows and blocks line up.
    let row_size = row_bytes(ty, n_per_row)?;
    if imatrix.len() != n_per_row {
        return Err(QuantError::Shape(format!(
            "the importance matrix has {} values for rows of {n_per_row}",
            imatrix.len()
        )));
    }
    if matches!(
        ty,
        F32 | F16 | BF16 | Q8_0 | Q1_0 | Q2_0 | MXFP4 | NVFP4 | TQ1_0 | TQ2_0
    ) {
        // ggml's quantizers of these types take the imatrix and do not read it.
        return quantize_rows(ty, src, dst);
    }
    let f = imatrix::kernel(ty).ok_or(QuantError::Unsupported {
        ty,
        op: "quantize with an importance matrix",
    })?;
    for (x, y) in src
        .chunks_exact(n_per_row)
        .zip(dst.chunks_exact_mut(row_size))
    {
        f(x, imatrix, y);
    }
    Ok(())
}

/// The reference quantizer of `ty`, if ggml has one without an importance matrix.
pub(crate) fn kernel(ty: GgmlType) -> Option<QuantFn> {
    basic::kernel(ty).or_else(|| kquants::kernel(ty))
}
