//! Finding tensors by name and checking their shapes. Matrices stay in the file (the maps of
//! the file or of every part of a split set) in their stored type, except those this CPU has
//! packed kernels for, which are repacked at load as llama.cpp repacks them
//! ([`Loader::packed`]); only small vectors (norms, biases) are copied out as f32. Each
//! architecture lists its tensors through a [`Loader`].

use std::cell::Cell;
use std::sync::Arc;

use gguf_format::split::SplitSet;
use gguf_format::GgmlType;
use gguf_quant::PackedMatrix;

use crate::error::{ModelError, Result};

/// A matrix in a mapped file: `rows` rows of `cols` elements of `ty`.
#[derive(Debug, Clone)]
pub(crate) struct Matrix {
    pub ty: GgmlType,
    pub cols: usize,
    pub rows: usize,
    /// The part of the split set (0 for a single file) and the byte range in its map.
    pub part: usize,
    pub start: usize,
    pub len: usize,
    /// Its repacked copy, which products use instead of the mapped bytes, if it has one.
    pub packed: Option<Arc<PackedMatrix>>,
}

impl Matrix {
    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.len / self.rows.max(1)
    }

    /// Rows `first..first + n` of this matrix: a view of the same mapped bytes, no copy.
    /// Fused tensors (`attn_qkv`, Phi-3's gate-and-up `ffn_up`) are used through views: each
    /// output element is one weight row times the (quantized) input, so a product per view
    /// gives the numbers of one product over the whole tensor. `None` if the rows are not all
    /// in the matrix. A view is not packed (the loader packs what it returns).
    pub fn rows(&self, first: usize, n: usize) -> Option<Matrix> {
        if n == 0 || first.checked_add(n)? > self.rows {
            return None;
        }
        let rb = self.row_bytes();
        Some(Matrix {
            rows: n,
            start: self.start + first * rb,
            len: n * rb,
            packed: None,
            ..*self
        })
    }
}

/// The Q, K and V projections of one block and their biases, from separate `attn_q`/`attn_k`/
/// `attn_v` tensors or from one fused `attn_qkv` (rows of Q, then K, then V), as llama.cpp's
/// `create_tensor_qkv` accepts them.
pub(crate) struct Qkv {
    pub wq: Matrix,
    pub wk: Matrix,
    pub wv: Matrix,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
}

impl Qkv {
    /// Adds the biases there are to the rows of `q`, `k` and `v` (after their products).
    pub fn add_biases(&self, q: &mut [f32], k: &mut [f32], v: &mut [f32]) {
        for (rows, bias) in [(q, &self.bq), (k, &self.bk), (v, &self.bv)] {
            if let Some(b) = bias {
                crate::ops::add_bias(rows, b);
            }
        }
    }
}

/// Whether a block's Q, K and V biases must be in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Biases {
    /// Used when present (llama.cpp's rule for every architecture that loads them).
    Optional,
    /// Missing biases are an error naming the tensor (Qwen 2 always has them).
    Required,
}

/// Reads an architecture's tensors from a file or split set named `name` in errors.
pub(crate) struct Loader<'s> {
    pub set: &'s SplitSet,
    pub name: &'s str,
    /// Whether matrices are repacked for this CPU's packed kernels ([`Loader::packed`]).
    pack: bool,
    /// Bytes of the packed copies made so far.
    packed_bytes: Cell<usize>,
}

impl<'s> Loader<'s> {
    /// A loader of `set`; with `pack`, it repacks the matrices it can ([`Loader::packed`]).
    pub fn new(set: &'s SplitSet, name: &'s str, pack: bool) -> Loader<'s> {
        Loader {
            set,
            name,
            pack,
            packed_bytes: Cell::new(0),
        }
    }

    /// Bytes of the packed copies made so far.
    pub fn packed_bytes(&self) -> usize {
        self.packed_bytes.get()
    }

    /// `m` with a repacked copy when this CPU has packed kernels for its type and shape, as
    /// llama.cpp repacks weights on the same CPU (on AVX2: Q4_K with a multiple of 8 rows);
    /// products then run on the copy, in the orders of llama.cpp's repacked kernels.
    pub fn packed(&self, mut m: Matrix) -> Result<Matrix> {
        if !self.pack || m.packed.is_some() {
            return Ok(m);
        }
        let bytes = &self.set.parts()[m.part].file().bytes()[m.start..m.start + m.len];
        if let Some(p) = PackedMatrix::new(m.ty, bytes, m.rows, m.cols)? {
            self.packed_bytes.set(self.packed_bytes.get() + p.bytes());
            m.packed = Some(Arc::new(p));
        }
        Ok(m)
    }

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

    /// A matrix of `rows` rows of `cols`, for products: repacked if it can be
    /// ([`Loader::packed`]).
    pub fn matrix(&self, tensor: &str, cols: usize, rows: usize) -> Result<Matrix> {
        let m = self.plain_matrix(tensor, cols, rows)?;
        self.packed(m)
    }

    /// A matrix of `rows` rows of `cols` as it is in the file: the token embeddings, whose
    /// rows are looked up (llama.cpp keeps them unpacked too; a tied output gets its own
    /// packed copy through [`Loader::packed`]).
    pub fn plain_matrix(&self, tensor: &str, cols: usize, rows: usize) -> Result<Matrix> {
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
            packed: None,
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

    /// Row `row` of `m` (a matrix of this loader's file), dequantized: one row of a table that
    /// is added whole, as BERT's token-type row 0.
    pub fn matrix_row(&self, m: &Matrix, row: usize) -> Result<Vec<f32>> {
        let rb = m.row_bytes();
        let start = m.start + row * rb;
        let bytes = &self.set.parts()[m.part].file().bytes()[start..start + rb];
        let mut out = vec![0f32; m.cols];
        gguf_quant::dequantize_row(m.ty, bytes, &mut out)?;
        Ok(out)
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

    /// Block `block`'s Q, K and V projections from `n_embd` inputs to `q_out`, `k_out` and
    /// `v_out` outputs, with their biases. A fused `blk.N.attn_qkv.weight` is taken when the file
    /// has one (its rows split into views); its bias is `attn_qkv.bias`, or else the separate
    /// `attn_q/k/v.bias` when all three are there: llama.cpp adds separate biases to a fused
    /// product only as a set, and ignores an incomplete one. Without a fused tensor each of the
    /// separate biases is used on its own.
    pub fn qkv(
        &self,
        block: usize,
        n_embd: usize,
        (q_out, k_out, v_out): (usize, usize, usize),
        biases: Biases,
    ) -> Result<Qkv> {
        let t = |s: &str| format!("blk.{block}.{s}");
        let bias = |s: &str, n| match biases {
            Biases::Required => self.vector(&t(s), n).map(Some),
            Biases::Optional => self.optional_vector(&t(s), n),
        };
        let fused = t("attn_qkv.weight");
        if !self.has(&fused) {
            return Ok(Qkv {
                wq: self.matrix(&t("attn_q.weight"), n_embd, q_out)?,
                wk: self.matrix(&t("attn_k.weight"), n_embd, k_out)?,
                wv: self.matrix(&t("attn_v.weight"), n_embd, v_out)?,
                bq: bias("attn_q.bias", q_out)?,
                bk: bias("attn_k.bias", k_out)?,
                bv: bias("attn_v.bias", v_out)?,
            });
        }
        let total = q_out + k_out + v_out;
        let w = self.matrix(&fused, n_embd, total)?;
        // In range: the shape check above made the matrix `total` rows tall.
        let view = |first, n| {
            w.rows(first, n)
                .ok_or_else(|| self.shape_error(&fused, &[n_embd as u64, total as u64], &[]))
        };
        let (wq, wk, wv) = (
            view(0, q_out)?,
            view(q_out, k_out)?,
            view(q_out + k_out, v_out)?,
        );
        let (bq, bk, bv) = match self.optional_vector(&t("attn_qkv.bias"), total)? {
            Some(b) => (
                Some(b[..q_out].to_vec()),
                Some(b[q_out..q_out + k_out].to_vec()),
                Some(b[q_out + k_out..].to_vec()),
            ),
            None => match (
                bias("attn_q.bias", q_out)?,
                bias("attn_k.bias", k_out)?,
                bias("attn_v.bias", v_out)?,
            ) {
                (Some(q), Some(k), Some(v)) => (Some(q), Some(k), Some(v)),
                _ => (None, None, None),
            },
        };
        Ok(Qkv {
            wq,
            wk,
            wv,
            bq,
            bk,
            bv,
        })
    }

    /// A vector if the file has it.
    pub fn optional_vector(&self, tensor: &str, n: usize) -> Result<Option<Vec<f32>>> {
        if !self.has(tensor) {
            return Ok(None);
        }
        self.vector(tensor, n).map(Some)
    }
}
