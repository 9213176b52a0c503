//! Every ggml block type: layouts ([`blocks`]), dequantization to `f32` ([`dequantize_row`],
//! [`dequantize`]) and reference quantization ([`quantize_row`]), bit-exact with ggml and the
//! Python `gguf` package.
//!
//! ```
//! use gguf_quant::{dequantize_row, quantize_row, GgmlType};
//! let x: Vec<f32> = (0..32).map(|i| i as f32 - 16.0).collect();
//! let mut q = vec![0u8; 34];
//! quantize_row(GgmlType::Q8_0, &x, &mut q)?;
//! let mut y = vec![0f32; 32];
//! dequantize_row(GgmlType::Q8_0, &q, &mut y)?;
//! assert!(x.iter().zip(&y).all(|(a, b)| (a - b).abs() < 0.07));
//! # Ok::<(), gguf_quant::QuantError>(())
//! ```
#![deny(missing_docs)]
#![warn(clippy::undocumented_unsafe_blocks)]

pub mod blocks;
mod dequant;
mod error;
mod fp;
mod grids;
mod kernels;
mod pool;
mod quant;

pub use dequant::{dequantize, dequantize_row};
pub use error::{QuantError, Result};
pub use gguf_format::GgmlType;
pub use kernels::packed::PackedMatrix;
pub use kernels::vec;
pub use kernels::{
    check_isa, isa, matmul, matmul_dots_on, matmul_on, matvec, matvec_on, quantize_activations,
    vec_dot, vec_dot_type, Isa,
};
pub use pool::ThreadPool;
pub use quant::{quantize_row, quantize_rows, quantize_rows_imatrix};

/// Bytes of `elements` values of `ty`; an error unless they are a whole number of blocks.
pub fn row_bytes(ty: GgmlType, elements: usize) -> Result<usize> {
    let block_size = ty.block_size() as usize;
    if !elements.is_multiple_of(block_size) {
        return Err(QuantError::PartialBlock {
            ty,
            elements,
            block_size,
        });
    }
    Ok(elements / block_size * ty.type_size() as usize)
}

/// Checks that `bytes` holds exactly the blocks of `elements` values of `ty`; returns the
/// number of blocks.
pub fn check_lengths(ty: GgmlType, elements: usize, bytes: usize) -> Result<usize> {
    let expected = row_bytes(ty, elements)?;
    if bytes != expected {
        return Err(QuantError::WrongLength {
            ty,
            elements,
            expected,
            found: bytes,
        });
    }
    Ok(elements / ty.block_size() as usize)
}
