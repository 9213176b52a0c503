//! Finding tensors by name and checking their shapes. Matrices stay in the file (the maps of
//! the file or of every part of a split set) in their stored type; only small vectors (norms,
//! biases) are copied out as f32. Each architecture lists its tensors through a [`Loader`].

use gguf_format::split::SplitSet;
use gguf_format::GgmlType;

use crate::error::{ModelError, Result};

/// A matrix in a mapped file: `rows` rows of `cols` elements of `ty`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Matrix {
    pub ty: GgmlType,
    pub cols: usize,
    pub rows: usize,
    /// The part of the split set (0 for a single file) and the byte range in its map.
    pub part: usize,
    pub start: usize,
    pub len: usize,
}

impl Matrix {
    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.len / self.rows.max(1)
    }
}

/// Reads an architecture's tensors from a file or split set named `name` in errors.
pub(crate) struct Loader<'s> {
    pub set: &'s SplitSet,
    pub name: &'s str,
}

impl Loader<'_> {
    fn shape_error(&self, tensor: &str, expected: &[u64], found: &[u64]) -> ModelError {
        ModelError::TensorShape {
            file: self.name.to_string(),
            name: tensor.to_string(),
            expected: expected.to_vec(),
            found: found.to_vec(),
        }
    }

    /// Whether the file has `tensor`.
    pub fn has(&self, tensor: &str) -> bool {
        self.set.tensor(tensor).is_some()
    }

    fn find(&self, tensor: &str) -> Result<(usize, &gguf_format::TensorInfo<'_>, &[u8])> {
        self.set
            .tensor_in_part(tensor)
            .ok_or_else(|| ModelError::MissingTensor {
                file: self.name.to_string(),
                name: tensor.to_string(),
            })
    }

    /// The row count of a matrix of `cols` columns (the vocabulary of `token_embd`).
    pub fn rows_of(&self, tensor: &str, cols: usize) -> Result<usize> {
        let (_, info, _) = self.find(tensor)?;
        match info.shape() {
            [c, rows] if *c == cols as u64 && *rows > 0 => Ok(*rows as usize),
            other => Err(self.shape_error(tensor, &[cols as u64, 0], other)),
        }
    }

    /// A matrix of `rows` rows of `cols`.
    pub fn matrix(&self, tensor: &str, cols: usize, rows: usize) -> Result<Matrix> {
        let (part, info, data) = self.find(tensor)?;
        let expected = [cols as u64, rows as u64];
        let shape = info.shape();
        let fits = shape.len() >= 2
            && shape[0] == expected[0]
            && shape[1] == expected[1]
            && shape[2..].iter().all(|&d| d == 1);
        if !fits {
            return Err(self.shape_error(tensor, &expected, shape));
        }
        let base = self.set.parts()[part].file().bytes().as_ptr() as usize;
        Ok(Matrix {
            ty: info.ggml_type,
            cols,
            rows,
            part,
            start: data.as_ptr() as usize - base,
            len: data.len(),
        })
    }

    /// A matrix if the file has it.
    pub fn optional_matrix(
        &self,
        tensor: &str,
        cols: usize,
        rows: usize,
    ) -> Result<Option<Matrix>> {
        if !self.has(tensor) {
            return Ok(None);
        }
        self.matrix(tensor, cols, rows).map(Some)
    }

    /// A vector of `n` values, as f32 (any float type).
    pub fn vector(&self, tensor: &str, n: usize) -> Result<Vec<f32>> {
        let (_, info, data) = self.find(tensor)?;
        let shape = info.shape();
        if shape.first() != Some(&(n as u64)) || shape[1..].iter().any(|&d| d != 1) {
            return Err(self.shape_error(tensor, &[n as u64], shape));
        }
        let mut out = vec![0f32; n];
        gguf_quant::dequantize_row(info.ggml_type, data, &mut out)?;
        Ok(out)
    }

    /// A vector if the file has it.
    pub fn optional_vector(&self, tensor: &str, n: usize) -> Result<Option<Vec<f32>>> {
        if !self.has(tensor) {
            return Ok(None);
        }
        self.vector(tensor, n).map(Some)
    }
}
