//! Finding tensors by name and checking their shapes. Matrices stay in the file (the maps of
//! the file or of every part of a split set) in their stored type, except those this CPU has
//! packed kernels for, which are repacked at load as llama.cpp repacks them
//! ([`Loader::packed`]); only small vectors (norms, biases) are copied out as f32. Each
//! architecture lists its tensors through a [`Loader`], which reads them from a file or, for
//! a check only, from the plan of a file not yet written ([`PlanTensor`]).

use gguf_format::tensor_names::{self, TensorName as T};
use std::cell::Cell;
use std::collections::HashMap;
use std::sync::Arc;

use gguf_format::split::SplitSet;
use gguf_format::{GgmlType, GgufFile};
use gguf_quant::PackedMatrix;

use crate::error::{ModelError, Result};

/// One tensor of a model file not yet written, as a converter plans it: what
/// [`check_plan`](crate::check_plan) checks.
#[derive(Debug, Clone, Copy)]
pub struct PlanTensor<'a> {
    /// Its GGUF name.
    pub name: &'a str,
    /// Its type.
    pub ty: GgmlType,
    /// Its shape, ggml order (the row length first).
    pub shape: &'a [u64],
    /// Its bytes, when the planner has them (the tables a converter computes, such as RoPE
    /// frequency factors). The checks of values run on these; a tensor without them has its
    /// name, type and shape checked only.
    pub data: Option<&'a [u8]>,
}

/// Where a [`Loader`] finds tensors.
enum Source<'s> {
    /// A mapped file, or every part of a split set.
    Set(&'s SplitSet),
    /// A planned file: its metadata and its tensors by name. It is only checked, never run.
    Plan {
        metadata: &'s GgufFile<'s>,
        tensors: HashMap<&'s str, &'s PlanTensor<'s>>,
    },
}

/// A tensor found by name.
struct Found<'s> {
    /// The part of the split set (0 for a single file or a plan).
    part: usize,
    ty: GgmlType,
    shape: &'s [u64],
    /// Where its bytes start in the part's map (0 in a plan) and how many there are.
    start: usize,
    len: usize,
    /// Its bytes: always in a file, in a plan when the planner gave them.
    data: Option<&'s [u8]>,
}

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

/// Reads an architecture's tensors from a file or split set (or a plan) named `name` in errors.
pub(crate) struct Loader<'s> {
    source: Source<'s>,
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
            source: Source::Set(set),
            name,
            pack,
            packed_bytes: Cell::new(0),
        }
    }

    /// A loader of a planned file, for a check: its matrices are descriptions without bytes,
    /// and its vectors are zeros unless the plan gives their bytes (nothing is ever computed
    /// with them).
    pub fn plan(
        metadata: &'s GgufFile<'s>,
        tensors: &'s [PlanTensor<'s>],
        name: &'s str,
    ) -> Loader<'s> {
        Loader {
            source: Source::Plan {
                metadata,
                tensors: tensors.iter().map(|t| (t.name, t)).collect(),
            },
            name,
            pack: false,
            packed_bytes: Cell::new(0),
        }
    }

    /// The metadata (the first part's, for a split set).
    pub fn metadata(&self) -> &'s GgufFile<'s> {
        match &self.source {
            Source::Set(set) => set.metadata(),
            Source::Plan { metadata, .. } => metadata,
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
        let Source::Set(set) = &self.source else {
            return Ok(m);
        };
        if !self.pack || m.packed.is_some() {
            return Ok(m);
        }
        let bytes = &set.parts()[m.part].file().bytes()[m.start..m.start + m.len];
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
        match &self.source {
            Source::Set(set) => set.tensor(tensor).is_some(),
            Source::Plan { tensors, .. } => tensors.contains_key(tensor),
        }
    }

    fn find(&self, tensor: &str) -> Result<Found<'s>> {
        let missing = || ModelError::MissingTensor {
            file: self.name.to_string(),
            name: tensor.to_string(),
        };
        match &self.source {
            Source::Set(set) => {
                let (part, info, data) = set.tensor_in_part(tensor).ok_or_else(missing)?;
                let base = set.parts()[part].file().bytes().as_ptr() as usize;
                Ok(Found {
                    part,
                    ty: info.ggml_type,
                    shape: info.shape(),
                    start: data.as_ptr() as usize - base,
                    len: data.len(),
                    data: Some(data),
                })
            }
            Source::Plan { tensors, .. } => {
                let t = tensors.get(tensor).ok_or_else(missing)?;
                let len =
                    t.ty.tensor_size(t.shape)
                        .ok_or_else(|| self.shape_error(tensor, &[], t.shape))?;
                Ok(Found {
                    part: 0,
                    ty: t.ty,
                    shape: t.shape,
                    start: 0,
                    len: usize::try_from(len).unwrap_or(usize::MAX),
                    data: t.data,
                })
            }
        }
    }

    /// The row count of a matrix of `cols` columns (the vocabulary of `token_embd`).
    pub fn rows_of(&self, tensor: &str, cols: usize) -> Result<usize> {
        match self.find(tensor)?.shape {
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
        let found = self.find(tensor)?;
        let expected = [cols as u64, rows as u64];
        let shape = found.shape;
        // A one-row matrix may be stored as a vector (Qwen2-MoE's `ffn_gate_inp_shexp`).
        let fits = shape.first() == Some(&expected[0])
            && shape.get(1).copied().unwrap_or(1) == expected[1]
            && shape.iter().skip(2).all(|&d| d == 1);
        if !fits {
            return Err(self.shape_error(tensor, &expected, shape));
        }
        Ok(Matrix {
            ty: found.ty,
            cols,
            rows,
            part: found.part,
            start: found.start,
            len: found.len,
            packed: None,
        })
    }

    /// The `n_expert` matrices of `rows` rows of `cols` stacked in a mixture of experts'
    /// tensor (`ffn_up_exps`, shape `[cols, rows, n_expert]`), each a view of its rows in the
    /// map, so a token reads only its experts' bytes; repacked where the loader packs and
    /// llama.cpp repacks the type (Q4_K), as llama.cpp repacks the whole stacked tensor.
    pub fn experts(
        &self,
        tensor: &str,
        cols: usize,
        rows: usize,
        n_expert: usize,
    ) -> Result<Vec<Matrix>> {
        self.stacked(tensor, cols, rows, n_expert, true)
    }

    /// The `n` matrices of `rows` rows of `cols` stacked in a 3-D tensor multiplied slice by
    /// slice (latent attention's per-head `attn_k_b`, `attn_v_b`), as views; never repacked,
    /// as ggml repacks only 2-D `mul_mat` weights and stacked `mul_mat_id` ones.
    pub fn per_head(
        &self,
        tensor: &str,
        cols: usize,
        rows: usize,
        n: usize,
    ) -> Result<Vec<Matrix>> {
        self.stacked(tensor, cols, rows, n, false)
    }

    fn stacked(
        &self,
        tensor: &str,
        cols: usize,
        rows: usize,
        n_expert: usize,
        pack: bool,
    ) -> Result<Vec<Matrix>> {
        let found = self.find(tensor)?;
        let expected = [cols as u64, rows as u64, n_expert as u64];
        let shape = found.shape;
        if shape.len() < 3 || shape[..3] != expected || shape[3..].iter().any(|&d| d != 1) {
            return Err(self.shape_error(tensor, &expected, shape));
        }
        let all = Matrix {
            ty: found.ty,
            cols,
            rows: rows * n_expert,
            part: found.part,
            start: found.start,
            len: found.len,
            packed: None,
        };
        (0..n_expert)
            .map(|e| {
                let view = all
                    .rows(e * rows, rows)
                    .ok_or_else(|| self.shape_error(tensor, &expected, shape))?;
                match pack {
                    true => self.packed(view),
                    false => Ok(view),
                }
            })
            .collect()
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
    /// is added whole, as BERT's token-type row 0 (zeros in a plan).
    pub fn matrix_row(&self, m: &Matrix, row: usize) -> Result<Vec<f32>> {
        let mut out = vec![0f32; m.cols];
        if let Source::Set(set) = &self.source {
            let rb = m.row_bytes();
            let start = m.start + row * rb;
            let bytes = &set.parts()[m.part].file().bytes()[start..start + rb];
            gguf_quant::dequantize_row(m.ty, bytes, &mut out)?;
        }
        Ok(out)
    }

    /// A vector of `n` values, as f32 (any float type); zeros for a planned tensor without
    /// bytes.
    pub fn vector(&self, tensor: &str, n: usize) -> Result<Vec<f32>> {
        Ok(self.known_vector(tensor, n)?.1)
    }

    /// A table of `rows` rows of `cols` values (shape `[cols, rows]`), as f32, row after row:
    /// per-expert biases. Zeros for a planned tensor without bytes.
    pub fn table(&self, tensor: &str, cols: usize, rows: usize) -> Result<Vec<f32>> {
        let found = self.find(tensor)?;
        let expected = [cols as u64, rows as u64];
        let shape = found.shape;
        if shape.len() < 2 || shape[..2] != expected || shape[2..].iter().any(|&d| d != 1) {
            return Err(self.shape_error(tensor, &expected, shape));
        }
        let mut out = vec![0f32; cols * rows];
        if let Some(data) = found.data {
            gguf_quant::dequantize_row(found.ty, data, &mut out)?;
        }
        Ok(out)
    }

    /// [`Loader::vector`], and whether its values are known (false for a planned tensor
    /// without bytes, whose values read as zeros).
    fn known_vector(&self, tensor: &str, n: usize) -> Result<(bool, Vec<f32>)> {
        let found = self.find(tensor)?;
        let shape = found.shape;
        if shape.first() != Some(&(n as u64)) || shape[1..].iter().any(|&d| d != 1) {
            return Err(self.shape_error(tensor, &[n as u64], shape));
        }
        let mut out = vec![0f32; n];
        let Some(data) = found.data else {
            return Ok((false, out));
        };
        gguf_quant::dequantize_row(found.ty, data, &mut out)?;
        Ok((true, out))
    }

    /// An optional table of `n` RoPE frequency factors (`ggml_rope_ext`'s: llama's
    /// `rope_freqs`, Phi-3's `rope_factors_long/short`), each dividing an angle: every one
    /// must be finite and above zero, or the rotations are NaN or infinite. In a plan the
    /// values are checked when the planner gives them.
    pub fn rope_factors(&self, tensor: &str, n: usize) -> Result<Option<Vec<f32>>> {
        if !self.has(tensor) {
            return Ok(None);
        }
        let (known, factors) = self.known_vector(tensor, n)?;
        if let Some(bad) = factors
            .iter()
            .find(|v| known && !(v.is_finite() && **v > 0.0))
        {
            return Err(ModelError::Hyperparameters {
                file: self.name.to_string(),
                message: format!(
                    "tensor `{tensor}` holds {bad}; RoPE frequency factors must be finite and \
                     above zero"
                ),
            });
        }
        Ok(Some(factors))
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
        let t = |s: &str| tensor_names::block(block, s);
        let bias = |s: &str, n| match biases {
            Biases::Required => self.vector(&t(s), n).map(Some),
            Biases::Optional => self.optional_vector(&t(s), n),
        };
        let fused = T::AttnQkv.block_weight(block);
        if !self.has(&fused) {
            return Ok(Qkv {
                wq: self.matrix(&T::AttnQ.block_weight(block), n_embd, q_out)?,
                wk: self.matrix(&T::AttnK.block_weight(block), n_embd, k_out)?,
                wv: self.matrix(&T::AttnV.block_weight(block), n_embd, v_out)?,
                bq: bias(T::AttnQ.bias(), q_out)?,
                bk: bias(T::AttnK.bias(), k_out)?,
                bv: bias(T::AttnV.bias(), v_out)?,
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
        let (bq, bk, bv) = match self.optional_vector(&T::AttnQkv.block_bias(block), total)? {
            Some(b) => (
                Some(b[..q_out].to_vec()),
                Some(b[q_out..q_out + k_out].to_vec()),
                Some(b[q_out + k_out..].to_vec()),
            ),
            None => match (
                bias(T::AttnQ.bias(), q_out)?,
                bias(T::AttnK.bias(), k_out)?,
                bias(T::AttnV.bias(), v_out)?,
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
