//! Tensor-level commands: `gguf dequantize` (to .npy) and the statistics of `inspect --stats`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use gguf_format::{GgufFile, TensorInfo};
use gguf_fsutil::WriteMode;

use crate::models;

/// `gguf dequantize`.
#[derive(Args)]
pub struct DequantizeArgs {
    /// A .gguf path or a known model name.
    file: String,
    /// The tensor's name.
    tensor: String,
    /// The .npy file to write (float32, shape = ggml shape reversed, as numpy presents it).
    #[arg(short, long)]
    output: PathBuf,
}

/// Writes one tensor, dequantized to float32, as a `.npy` file.
pub fn dequantize(a: DequantizeArgs) -> Result<()> {
    let path = models::resolve(&a.file)?;
    let mapped = GgufFile::open(&path)?;
    let file = mapped.file();
    let t = file
        .tensor(&a.tensor)
        .with_context(|| format!("{}: no tensor named '{}'", path.display(), a.tensor))?;
    // An existing regular file is replaced, as before; a FIFO, device or read-only file is not,
    // nor the model read.
    gguf_fsutil::refuse_inputs(&a.output, &[path.as_path()])?;
    gguf_fsutil::write_atomic(&a.output, WriteMode::Replace { force: false }, |out| {
        write_npy(file, t, out).with_context(|| a.output.display().to_string())
    })?;
    eprintln!("wrote {} ({} x f32)", a.output.display(), t.element_count());
    Ok(())
}

/// Rows dequantized per step when streaming a tensor, to bound memory on huge tensors.
const CHUNK_ELEMENTS: usize = 1 << 20;

/// Calls `f` with the tensor's values, dequantized in pieces of whole rows.
pub fn for_each_chunk(
    file: &GgufFile<'_>,
    t: &TensorInfo<'_>,
    mut f: impl FnMut(&[f32]) -> Result<()>,
) -> Result<()> {
    let data = file.tensor_data(t);
    let ne0 = t.shape().first().copied().unwrap_or(1) as usize;
    let rows = (t.element_count() as usize).checked_div(ne0).unwrap_or(0);
    let row_bytes = gguf_quant::row_bytes(t.ggml_type, ne0)?;
    let rows_per_chunk = (CHUNK_ELEMENTS / ne0.max(1)).max(1);
    let mut buf = vec![0f32; rows_per_chunk.min(rows) * ne0];
    let mut r = 0;
    while r < rows {
        let n = rows_per_chunk.min(rows - r);
        let out = &mut buf[..n * ne0];
        gguf_quant::dequantize_row(t.ggml_type, &data[r * row_bytes..(r + n) * row_bytes], out)
            .with_context(|| format!("tensor '{}'", t.name))?;
        f(out)?;
        r += n;
    }
    Ok(())
}

/// min, max, mean and root-mean-square of a tensor's values.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// Smallest value.
    pub min: f32,
    /// Largest value.
    pub max: f32,
    /// Mean.
    pub mean: f64,
    /// Root mean square.
    pub rms: f64,
}

/// The statistics of one tensor (NaNs are skipped by min/max and propagate into mean/RMS).
pub fn stats(file: &GgufFile<'_>, t: &TensorInfo<'_>) -> Result<Stats> {
    let (mut min, mut max, mut sum, mut sq, mut n) =
        (f32::INFINITY, f32::NEG_INFINITY, 0f64, 0f64, 0u64);
    for_each_chunk(file, t, |values| {
        for &v in values {
            min = min.min(v);
            max = max.max(v);
            sum += f64::from(v);
            sq += f64::from(v) * f64::from(v);
        }
        n += values.len() as u64;
        Ok(())
    })?;
    let count = n.max(1) as f64;
    Ok(Stats {
        min,
        max,
        mean: sum / count,
        rms: (sq / count).sqrt(),
    })
}

/// Writes the header of a little-endian float32 `.npy` array of `shape` (numpy order).
pub fn write_npy_header(out: &mut impl Write, shape: &[u64]) -> Result<()> {
    let dims: Vec<String> = shape.iter().map(u64::to_string).collect();
    let shape_text = match dims.len() {
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.join(", ")),
    };
    let mut header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape_text}, }}");
    // Magic (6) + version (2) + length (2) + header, padded with spaces to a multiple of 64
    // and ended by a newline, as numpy writes it.
    let total = (10 + header.len() + 1).next_multiple_of(64);
    while 10 + header.len() + 1 < total {
        header.push(' ');
    }
    header.push('\n');
    out.write_all(b"\x93NUMPY\x01\x00")?;
    out.write_all(&(header.len() as u16).to_le_bytes())?;
    out.write_all(header.as_bytes())?;
    Ok(())
}

/// Writes tensor `t` as a float32 `.npy` whose shape is the ggml shape reversed (as the
/// Python `gguf` package presents tensors).
pub fn write_npy(file: &GgufFile<'_>, t: &TensorInfo<'_>, out: &mut impl Write) -> Result<()> {
    let shape: Vec<u64> = t.shape().iter().rev().copied().collect();
    write_npy_header(out, &shape)?;
    for_each_chunk(file, t, |values| {
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        out.write_all(&bytes)?;
        Ok(())
    })
}
