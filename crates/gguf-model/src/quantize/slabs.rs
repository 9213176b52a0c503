//! One tensor's bytes from its type to another, slab by slab of whole rows: each slab is
//! dequantized to f32, then quantized on several threads (rows are independent, so the bytes
//! do not depend on the split), so memory stays bounded by a slab.

use std::io::Write;

use gguf_format::{GgmlType, TensorInfo};

use crate::error::{ModelError, Result};

/// The most f32 values of one tensor held at once (256 MiB), plus their quantized bytes.
const SLAB_VALUES: usize = 64 << 20;

/// Converts `t`'s bytes `data` (of the model `file`) to `to` and writes them to `sink`, on
/// `threads` threads, with the importance values `weights` when given (`ne0` per expert: row
/// `r` takes those of expert `r / ne1`).
pub(crate) fn convert(
    file: &str,
    t: &TensorInfo<'_>,
    data: &[u8],
    to: GgmlType,
    weights: Option<&[f32]>,
    threads: usize,
    sink: &mut dyn Write,
) -> Result<()> {
    let shape = t.shape();
    let ne0 = shape.first().copied().unwrap_or(1).max(1) as usize;
    let ne1 = shape.get(1).copied().unwrap_or(1).max(1) as usize;
    let rows = (t.element_count() as usize) / ne0;
    let row_in = gguf_quant::row_bytes(t.ggml_type, ne0)?;
    let row_out = gguf_quant::row_bytes(to, ne0)?;
    let slab_rows = (SLAB_VALUES / ne0).clamp(1, rows.max(1));
    // F32 input is quantized straight from the mapped file (aligned, little-endian as the
    // file is): no copy, and no slab of floats to allocate.
    let mapped_f32: Option<&[f32]> =
        if cfg!(target_endian = "little") && t.ggml_type == GgmlType::F32 {
            bytemuck::try_cast_slice(&data[..rows * row_in]).ok()
        } else {
            None
        };
    let mut values = vec![
        0f32;
        if mapped_f32.is_some() {
            0
        } else {
            slab_rows * ne0
        }
    ];
    let mut bytes = vec![0u8; slab_rows * row_out];
    // Rows `first..first + n` (global numbers), in runs that stay within one expert.
    let quantize = |first: usize, src: &[f32], dst: &mut [u8]| -> Result<()> {
        let Some(w) = weights else {
            return Ok(gguf_quant::quantize_rows(to, src, dst)?);
        };
        let n = src.len() / ne0;
        let mut r = 0;
        while r < n {
            let expert = (first + r) / ne1;
            let run = (ne1 - (first + r) % ne1).min(n - r);
            gguf_quant::quantize_rows_imatrix(
                to,
                &src[r * ne0..(r + run) * ne0],
                ne0,
                &w[expert * ne0..(expert + 1) * ne0],
                &mut dst[r * row_out..(r + run) * row_out],
            )?;
            r += run;
        }
        Ok(())
    };
    let mut r = 0;
    while r < rows {
        let n = slab_rows.min(rows - r);
        let bytes = &mut bytes[..n * row_out];
        let values: &[f32] = match mapped_f32 {
            Some(all) => &all[r * ne0..(r + n) * ne0],
            None => {
                let values = &mut values[..n * ne0];
                gguf_quant::dequantize_row(
                    t.ggml_type,
                    &data[r * row_in..(r + n) * row_in],
                    values,
                )?;
                values
            }
        };
        let per_thread = n.div_ceil(threads.max(1));
        let quantize = &quantize;
        std::thread::scope(|s| -> Result<()> {
            let jobs: Vec<_> = values
                .chunks(per_thread * ne0)
                .zip(bytes.chunks_mut(per_thread * row_out))
                .enumerate()
                .map(|(j, (src, dst))| s.spawn(move || quantize(r + j * per_thread, src, dst)))
                .collect();
            for job in jobs {
                job.join().map_err(|_| ModelError::Quantize {
                    file: file.to_string(),
                    message: "a quantizing thread panicked".into(),
                })??;
            }
            Ok(())
        })?;
        sink.write_all(bytes)
            .map_err(|e| ModelError::Format(e.into()))?;
        r += n;
    }
    Ok(())
}
