//! The tensors of a model, found by name and checked against the hyperparameters. Matrices stay
//! in the file (the mmap) in their stored type; only small vectors (norms, biases) are copied
//! out as f32.

use gguf_format::{GgmlType, GgufFile};

use crate::config::{Arch, Hparams};
use crate::error::{ModelError, Result};

/// A matrix in the mapped file: `rows` rows of `cols` elements of `ty`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Matrix {
    pub ty: GgmlType,
    pub cols: usize,
    pub rows: usize,
    /// Byte range in the mapped file.
    pub start: usize,
    pub len: usize,
}

impl Matrix {
    /// Bytes of one row.
    pub fn row_bytes(&self) -> usize {
        self.len / self.rows.max(1)
    }
}

/// One transformer block.
#[derive(Debug, Clone)]
pub(crate) struct Layer {
    pub attn_norm: Vec<f32>,
    pub wq: Matrix,
    pub wk: Matrix,
    pub wv: Matrix,
    pub wo: Matrix,
    pub bq: Option<Vec<f32>>,
    pub bk: Option<Vec<f32>>,
    pub bv: Option<Vec<f32>>,
    pub q_norm: Option<Vec<f32>>,
    pub k_norm: Option<Vec<f32>>,
    pub ffn_norm: Vec<f32>,
    pub w_gate: Matrix,
    pub w_up: Matrix,
    pub w_down: Matrix,
}

/// All the tensors.
#[derive(Debug, Clone)]
pub(crate) struct Weights {
    pub token_embd: Matrix,
    pub layers: Vec<Layer>,
    pub output_norm: Vec<f32>,
    /// `output.weight`, or `token_embd` when the model ties them.
    pub output: Matrix,
}

struct Loader<'f, 'a> {
    file: &'f GgufFile<'a>,
    name: &'f str,
}

impl Loader<'_, '_> {
    fn shape_error(&self, tensor: &str, expected: &[u64], found: &[u64]) -> ModelError {
        ModelError::TensorShape {
            file: self.name.to_string(),
            name: tensor.to_string(),
            expected: expected.to_vec(),
            found: found.to_vec(),
        }
    }

    fn find(&self, tensor: &str) -> Result<&gguf_format::TensorInfo<'_>> {
        self.file
            .tensor(tensor)
            .ok_or_else(|| ModelError::MissingTensor {
                file: self.name.to_string(),
                name: tensor.to_string(),
            })
    }

    /// A matrix of `rows` rows of `cols`.
    fn matrix(&self, tensor: &str, cols: usize, rows: usize) -> Result<Matrix> {
        let info = self.find(tensor)?;
        let expected = [cols as u64, rows as u64];
        let shape = info.shape();
        let fits = shape.len() >= 2
            && shape[0] == expected[0]
            && shape[1] == expected[1]
            && shape[2..].iter().all(|&d| d == 1);
        if !fits {
            return Err(self.shape_error(tensor, &expected, shape));
        }
        let data = self.file.tensor_data(info);
        let base = self.file.bytes().as_ptr() as usize;
        Ok(Matrix {
            ty: info.ggml_type,
            cols,
            rows,
            start: data.as_ptr() as usize - base,
            len: data.len(),
        })
    }

    /// A vector of `n` values, as f32 (any float type).
    fn vector(&self, tensor: &str, n: usize) -> Result<Vec<f32>> {
        let info = self.find(tensor)?;
        let shape = info.shape();
        if shape.first() != Some(&(n as u64)) || shape[1..].iter().any(|&d| d != 1) {
            return Err(self.shape_error(tensor, &[n as u64], shape));
        }
        let mut out = vec![0f32; n];
        gguf_quant::dequantize_row(info.ggml_type, self.file.tensor_data(info), &mut out)?;
        Ok(out)
    }

    fn optional_vector(&self, tensor: &str, n: usize) -> Result<Option<Vec<f32>>> {
        if self.file.tensor(tensor).is_none() {
            return Ok(None);
        }
        self.vector(tensor, n).map(Some)
    }
}

impl Weights {
    /// Finds and checks every tensor `hp` needs; fills in `hp.n_vocab` from `token_embd`.
    pub(crate) fn load(file: &GgufFile, name: &str, hp: &mut Hparams) -> Result<Weights> {
        let l = Loader { file, name };
        let embd = l.find("token_embd.weight")?;
        let n_vocab = match embd.shape() {
            [cols, rows] if *cols == hp.n_embd as u64 && *rows > 0 => *rows as usize,
            other => return Err(l.shape_error("token_embd.weight", &[hp.n_embd as u64, 0], other)),
        };
        hp.n_vocab = n_vocab;
        let token_embd = l.matrix("token_embd.weight", hp.n_embd, n_vocab)?;
        let (q_out, k_out, v_out) = (
            hp.n_head * hp.head_dim_k,
            hp.n_head_kv * hp.head_dim_k,
            hp.n_head_kv * hp.head_dim_v,
        );
        let mut layers = Vec::with_capacity(hp.n_layer);
        for i in 0..hp.n_layer {
            let t = |s: &str| format!("blk.{i}.{s}");
            let (bq, bk, bv) = match hp.arch {
                Arch::Qwen2 => (
                    Some(l.vector(&t("attn_q.bias"), q_out)?),
                    Some(l.vector(&t("attn_k.bias"), k_out)?),
                    Some(l.vector(&t("attn_v.bias"), v_out)?),
                ),
                _ => (
                    l.optional_vector(&t("attn_q.bias"), q_out)?,
                    l.optional_vector(&t("attn_k.bias"), k_out)?,
                    l.optional_vector(&t("attn_v.bias"), v_out)?,
                ),
            };
            let (q_norm, k_norm) = match hp.arch {
                Arch::Qwen3 => (
                    Some(l.vector(&t("attn_q_norm.weight"), hp.head_dim_k)?),
                    Some(l.vector(&t("attn_k_norm.weight"), hp.head_dim_k)?),
                ),
                _ => (None, None),
            };
            layers.push(Layer {
                attn_norm: l.vector(&t("attn_norm.weight"), hp.n_embd)?,
                wq: l.matrix(&t("attn_q.weight"), hp.n_embd, q_out)?,
                wk: l.matrix(&t("attn_k.weight"), hp.n_embd, k_out)?,
                wv: l.matrix(&t("attn_v.weight"), hp.n_embd, v_out)?,
                wo: l.matrix(
                    &t("attn_output.weight"),
                    hp.n_head * hp.head_dim_v,
                    hp.n_embd,
                )?,
                bq,
                bk,
                bv,
                q_norm,
                k_norm,
                ffn_norm: l.vector(&t("ffn_norm.weight"), hp.n_embd)?,
                w_gate: l.matrix(&t("ffn_gate.weight"), hp.n_embd, hp.n_ff)?,
                w_up: l.matrix(&t("ffn_up.weight"), hp.n_embd, hp.n_ff)?,
                w_down: l.matrix(&t("ffn_down.weight"), hp.n_ff, hp.n_embd)?,
            });
        }
        let output = if file.tensor("output.weight").is_some() {
            l.matrix("output.weight", hp.n_embd, n_vocab)?
        } else {
            token_embd
        };
        Ok(Weights {
            token_embd,
            layers,
            output_norm: l.vector("output_norm.weight", hp.n_embd)?,
            output,
        })
    }
}
