//! Tensor names (GGUF's back to Hugging Face's, after gguf-py's `tensor_mapping.py`), shapes,
//! and the values: dequantized, with the converter's transformations undone, as the export's
//! dtype.

use gguf_format::tensor_names::{self, TensorName as T, BIAS, WEIGHT};
use gguf_format::{GgufFile, TensorInfo};
use half::{bf16, f16};

use super::config::Hparams;
use super::{Arch, ExportDtype, ExportTensor};
use crate::error::{Error, Result};

/// What is done to a tensor's values besides the dtype conversion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// Nothing.
    Copy,
    /// The inverse of `convert_hf_to_gguf.py`'s `LlamaModel.permute` (for `llama`/`mistral`
    /// Q and K): GGUF's rows are, per head, the interleaved halves
    /// `w.reshape(n_head, 2, rows / n_head / 2, ...).swapaxes(1, 2)` of Hugging Face's; the
    /// export puts each row back. `n_head` is the number of heads (KV heads for K).
    UnpermuteRope {
        /// Heads the rows are grouped in.
        n_head: usize,
    },
    /// The inverse of the Gemma converters' `+ 1` on every `*norm.weight`.
    SubtractOne,
}

/// The Hugging Face row of GGUF row `row` of a permuted Q/K tensor of `rows` rows.
pub(crate) fn unpermuted_row(row: usize, rows: usize, n_head: usize) -> usize {
    let per_head = rows / n_head;
    let half = per_head / 2;
    let (head, rem) = (row / per_head, row % per_head);
    head * per_head + (rem % 2) * half + rem / 2
}

/// The Hugging Face name of GGUF tensor `name`, `None` for the tensors `config.json` carries
/// instead (RoPE factor tables), or an error for a tensor the architecture does not have.
fn hf_name(arch: Arch, name: &str) -> Result<Option<String>> {
    let unknown = || {
        Error::Unsupported(format!(
            "tensor {name}: no Hugging Face name for a {} model",
            arch.hf_class()
        ))
    };
    if arch == Arch::Bert {
        return bert_name(name).map(Some).ok_or_else(unknown);
    }
    let (stem, suffix) = name.rsplit_once('.').ok_or_else(unknown)?;
    if let Some(whole_model) = T::parse(stem) {
        return match (whole_model, suffix) {
            (T::TokenEmbd, WEIGHT) => Ok(Some("model.embed_tokens.weight".into())),
            (T::OutputNorm, WEIGHT) => Ok(Some("model.norm.weight".into())),
            (T::Output, WEIGHT) => Ok(Some("lm_head.weight".into())),
            // Computed from config.json's rope_scaling when the checkpoint is loaded.
            (T::RopeFreqs, WEIGHT)
                if matches!(arch, Arch::Llama | Arch::Mistral | Arch::Mixtral) =>
            {
                Ok(None)
            }
            (T::RopeFactorsLong | T::RopeFactorsShort, WEIGHT) if arch == Arch::Phi3 => Ok(None),
            _ => Err(unknown()),
        };
    }
    let (layer, rest) = tensor_names::split_block(name).ok_or_else(unknown)?;
    let (stem, suffix) = rest.rsplit_once('.').ok_or_else(unknown)?;
    if suffix != WEIGHT && suffix != BIAS {
        return Err(unknown());
    }
    let gemma23 = matches!(arch, Arch::Gemma2 | Arch::Gemma3);
    let qk_norms = matches!(
        arch,
        Arch::Qwen3 | Arch::Gemma3 | Arch::Qwen3Moe | Arch::Olmoe
    );
    let hf = match T::parse(stem).ok_or_else(unknown)? {
        T::AttnNorm => "input_layernorm",
        T::AttnQ if arch != Arch::Phi3 => "self_attn.q_proj",
        T::AttnK if arch != Arch::Phi3 => "self_attn.k_proj",
        T::AttnV if arch != Arch::Phi3 => "self_attn.v_proj",
        T::AttnQkv if arch == Arch::Phi3 => "self_attn.qkv_proj",
        T::AttnOut => "self_attn.o_proj",
        T::AttnQNorm if qk_norms => "self_attn.q_norm",
        T::AttnKNorm if qk_norms => "self_attn.k_norm",
        T::FfnNorm if gemma23 => "pre_feedforward_layernorm",
        T::FfnNorm => "post_attention_layernorm",
        T::AttnPostNorm if gemma23 => "post_attention_layernorm",
        T::FfnPostNorm if gemma23 => "post_feedforward_layernorm",
        T::FfnGate if !matches!(arch, Arch::Phi3 | Arch::Mixtral) => "mlp.gate_proj",
        T::FfnUp if arch == Arch::Phi3 => "mlp.gate_up_proj",
        T::FfnUp if arch != Arch::Mixtral => "mlp.up_proj",
        T::FfnDown if arch != Arch::Mixtral => "mlp.down_proj",
        T::FfnGateInp if arch == Arch::Mixtral => "block_sparse_moe.gate",
        T::FfnGateInp if arch.has_mlp_experts() => "mlp.gate",
        T::FfnGateInpShexp if arch == Arch::Qwen2Moe => "mlp.shared_expert_gate",
        T::FfnGateShexp if arch == Arch::Qwen2Moe => "mlp.shared_expert.gate_proj",
        T::FfnUpShexp if arch == Arch::Qwen2Moe => "mlp.shared_expert.up_proj",
        T::FfnDownShexp if arch == Arch::Qwen2Moe => "mlp.shared_expert.down_proj",
        _ => return Err(unknown()),
    };
    Ok(Some(format!("model.layers.{layer}.{hf}.{suffix}")))
}

/// For a stacked `blk.N.ffn_{gate,down,up}_exps.weight`, the prefix of expert `e`'s matrix
/// name (to which `{e}.{matrix}.weight` is added) and the matrix, as the converter reads them:
/// Mixtral's `block_sparse_moe.experts.{e}.w1/w2/w3`, Qwen2-MoE's
/// `mlp.experts.{e}.gate_proj/down_proj/up_proj`; `None` for any other tensor or architecture.
fn expert_name(arch: Arch, name: &str) -> Option<(String, &'static str)> {
    let (layer, rest) = tensor_names::split_block(name)?;
    let (stem, suffix) = rest.rsplit_once('.')?;
    let kind = match (T::parse(stem)?, suffix) {
        (T::FfnGateExps, WEIGHT) => 0,
        (T::FfnDownExps, WEIGHT) => 1,
        (T::FfnUpExps, WEIGHT) => 2,
        _ => return None,
    };
    let (experts, matrices) = match arch {
        Arch::Mixtral => ("block_sparse_moe.experts", ["w1", "w2", "w3"]),
        a if a.has_mlp_experts() => ("mlp.experts", ["gate_proj", "down_proj", "up_proj"]),
        _ => return None,
    };
    Some((format!("model.layers.{layer}.{experts}."), matrices[kind]))
}

/// A `bert` tensor's `BertModel` name (gguf-py's mapping for BERT, reversed).
fn bert_name(name: &str) -> Option<String> {
    let (stem, suffix) = name.rsplit_once('.')?;
    if let Some(whole_model) = T::parse(stem) {
        let hf = match (whole_model, suffix) {
            (T::TokenEmbd, WEIGHT) => "embeddings.word_embeddings",
            (T::PosEmbd, WEIGHT) => "embeddings.position_embeddings",
            (T::TokenTypes, WEIGHT) => "embeddings.token_type_embeddings",
            (T::TokenEmbdNorm, WEIGHT | BIAS) => "embeddings.LayerNorm",
            _ => return None,
        };
        return Some(format!("{hf}.{suffix}"));
    }
    let (layer, rest) = tensor_names::split_block(name)?;
    let (stem, suffix) = rest.rsplit_once('.')?;
    if suffix != WEIGHT && suffix != BIAS {
        return None;
    }
    let hf = match T::parse(stem)? {
        T::AttnQ => "attention.self.query",
        T::AttnK => "attention.self.key",
        T::AttnV => "attention.self.value",
        T::AttnOut => "attention.output.dense",
        T::AttnOutNorm => "attention.output.LayerNorm",
        T::FfnUp => "intermediate.dense",
        T::FfnDown => "output.dense",
        T::LayerOutNorm => "output.LayerNorm",
        _ => return None,
    };
    Some(format!("encoder.layer.{layer}.{hf}.{suffix}"))
}

/// The export's tensors, in the file's order, and the index of each one's source.
pub(crate) fn plan(
    file: &GgufFile,
    arch: Arch,
    hp: &Hparams,
) -> Result<(Vec<ExportTensor>, Vec<usize>)> {
    let mut tensors = Vec::new();
    let mut sources = Vec::new();
    for (index, info) in file.tensors().iter().enumerate() {
        if let Some((prefix, w)) = expert_name(arch, info.name) {
            // One Hugging Face matrix per expert, the stacked tensor's rows in turn.
            let [cols, rows, n_expert] = info.shape() else {
                return Err(Error::Unsupported(format!(
                    "{}: a stacked expert tensor of shape {:?}, not 3-D",
                    info.name,
                    info.shape()
                )));
            };
            check_dequantizable(file, info)?;
            for e in 0..*n_expert as usize {
                tensors.push(ExportTensor {
                    name: format!("{prefix}{e}.{w}.weight"),
                    source: info.name.to_string(),
                    source_type: info.ggml_type,
                    shape: vec![*rows as usize, *cols as usize],
                    transform: Transform::Copy,
                    expert: Some(e),
                });
                sources.push(index);
            }
            continue;
        }
        let Some(name) = hf_name(arch, info.name)? else {
            continue;
        };
        let shape: Vec<usize> = info.shape().iter().rev().map(|&d| d as usize).collect();
        let transform = transform_for(arch, info.name, &name, hp);
        if let Transform::UnpermuteRope { n_head } = transform {
            let rows = shape.first().copied().unwrap_or(1);
            if shape.len() > 2 {
                return Err(Error::Unsupported(format!(
                    "{}: a Q/K tensor of {} dimensions",
                    info.name,
                    shape.len()
                )));
            }
            if !rows.is_multiple_of(2 * n_head) {
                return Err(Error::Unsupported(format!(
                    "{}: {rows} rows are not whole pairs per head for {n_head} heads",
                    info.name
                )));
            }
        }
        check_dequantizable(file, info)?;
        tensors.push(ExportTensor {
            name,
            source: info.name.to_string(),
            source_type: info.ggml_type,
            shape,
            transform,
            expert: None,
        });
        sources.push(index);
    }
    if !tensors.iter().any(|t| t.source == T::TokenEmbd.weight()) {
        return Err(Error::Unsupported(format!(
            "the file has no {}",
            T::TokenEmbd.weight()
        )));
    }
    Ok((tensors, sources))
}

fn transform_for(arch: Arch, gguf_name: &str, hf_name: &str, hp: &Hparams) -> Transform {
    if arch.is_gemma() && hf_name.ends_with("norm.weight") {
        return Transform::SubtractOne;
    }
    if matches!(arch, Arch::Llama | Arch::Mistral | Arch::Mixtral) {
        let block_tensor = tensor_names::split_block(gguf_name)
            .and_then(|(_, rest)| rest.rsplit_once('.'))
            .and_then(|(stem, _)| T::parse(stem));
        match block_tensor {
            Some(T::AttnQ) => return Transform::UnpermuteRope { n_head: hp.n_head },
            Some(T::AttnK) => {
                return Transform::UnpermuteRope {
                    n_head: hp.n_head_kv,
                }
            }
            _ => {}
        }
    }
    Transform::Copy
}

/// Fails unless the tensor's type can be dequantized and its rows are whole blocks (tried on
/// its first row, which costs nothing).
fn check_dequantizable(file: &GgufFile, info: &TensorInfo) -> Result<()> {
    let cols = info.shape().first().copied().unwrap_or(1) as usize;
    let fail = |e: gguf_quant::QuantError| {
        Error::Unsupported(format!(
            "tensor {} ({}): cannot be dequantized: {e}",
            info.name,
            info.ggml_type.name()
        ))
    };
    if info.element_count() == 0 {
        return Ok(());
    }
    let row_bytes = gguf_quant::row_bytes(info.ggml_type, cols).map_err(fail)?;
    let data = file.tensor_data(info);
    let first = data.get(..row_bytes).ok_or_else(|| {
        Error::Unsupported(format!("tensor {}: data shorter than one row", info.name))
    })?;
    gguf_quant::dequantize(info.ggml_type, first, cols).map_err(fail)?;
    Ok(())
}

/// Elements dequantized at a time (about 4 MiB of f32).
const CHUNK_ELEMENTS: usize = 1 << 20;

/// The tensor's values (with `expert`, that expert's rows of a stacked expert tensor only),
/// dequantized, transformed, in PyTorch's layout, as `dtype` bytes.
pub(crate) fn convert(
    file: &GgufFile,
    info: &TensorInfo,
    transform: Transform,
    expert: Option<usize>,
    dtype: ExportDtype,
) -> Result<Vec<u8>> {
    let shape = info.shape();
    let all = info.element_count() as usize;
    let esize = dtype.size();
    if all == 0 {
        return Ok(Vec::new());
    }
    let cols = shape.first().copied().unwrap_or(1).max(1) as usize;
    let all_rows = all / cols;
    let (first_row, rows) = match expert {
        Some(e) => {
            let per = all_rows / shape.get(2).copied().unwrap_or(1).max(1) as usize;
            (e * per, per)
        }
        None => (0, all_rows),
    };
    let total = rows * cols;
    let mut out = vec![0u8; total * esize];
    let fail = |e: gguf_quant::QuantError| Error::Unsupported(format!("tensor {}: {e}", info.name));
    let row_bytes = gguf_quant::row_bytes(info.ggml_type, cols).map_err(fail)?;
    let data = file.tensor_data(info);
    // The unit the permutation moves: a row of a matrix, one value of a vector (a bias).
    let (unit, units) = if shape.len() == 1 {
        (1, total)
    } else {
        (cols, rows)
    };
    let rows_per_chunk = (CHUNK_ELEMENTS / cols).max(1);
    let mut r0 = 0;
    while r0 < rows {
        let r1 = (r0 + rows_per_chunk).min(rows);
        let (b0, b1) = ((first_row + r0) * row_bytes, (first_row + r1) * row_bytes);
        let bytes = data.get(b0..b1).ok_or_else(|| {
            Error::Unsupported(format!("tensor {}: data is truncated", info.name))
        })?;
        let values =
            gguf_quant::dequantize(info.ggml_type, bytes, (r1 - r0) * cols).map_err(fail)?;
        let base = r0 * cols;
        match transform {
            Transform::Copy => put_run(&mut out[base * esize..], &values, dtype, 0.0),
            Transform::SubtractOne => put_run(&mut out[base * esize..], &values, dtype, -1.0),
            Transform::UnpermuteRope { n_head } => {
                for (k, chunk) in values.chunks(unit).enumerate() {
                    let u = base / unit + k;
                    let dest = unpermuted_row(u, units, n_head) * unit;
                    put_run(&mut out[dest * esize..], chunk, dtype, 0.0);
                }
            }
        }
        r0 = r1;
    }
    Ok(out)
}

/// Writes `values + offset` as `dtype` at the start of `out`; an offset of zero leaves the
/// values as they are (adding `+0.0` would turn `-0.0` into `+0.0`).
fn put_run(out: &mut [u8], values: &[f32], dtype: ExportDtype, offset: f32) {
    if offset == 0.0 {
        return put_exact(out, values, dtype);
    }
    match dtype {
        ExportDtype::F32 => {
            for (dst, &v) in out.chunks_exact_mut(4).zip(values) {
                dst.copy_from_slice(&(v + offset).to_le_bytes());
            }
        }
        ExportDtype::F16 => {
            for (dst, &v) in out.chunks_exact_mut(2).zip(values) {
                dst.copy_from_slice(&f16::from_f32(v + offset).to_le_bytes());
            }
        }
        ExportDtype::Bf16 => {
            for (dst, &v) in out.chunks_exact_mut(2).zip(values) {
                dst.copy_from_slice(&bf16::from_f32(v + offset).to_le_bytes());
            }
        }
    }
}

/// Writes `values` as `dtype` at the start of `out`.
fn put_exact(out: &mut [u8], values: &[f32], dtype: ExportDtype) {
    match dtype {
        ExportDtype::F32 => {
            for (dst, &v) in out.chunks_exact_mut(4).zip(values) {
                dst.copy_from_slice(&v.to_le_bytes());
            }
        }
        ExportDtype::F16 => {
            for (dst, &v) in out.chunks_exact_mut(2).zip(values) {
                dst.copy_from_slice(&f16::from_f32(v).to_le_bytes());
            }
        }
        ExportDtype::Bf16 => {
            for (dst, &v) in out.chunks_exact_mut(2).zip(values) {
                dst.copy_from_slice(&bf16::from_f32(v).to_le_bytes());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The converter's permutation, written as numpy's reshape/swapaxes does it.
    fn permute(rows: usize, n_head: usize) -> Vec<usize> {
        // out[h][i][j] = in[h][j][i] for shape (n_head, 2, rows/n_head/2) swapped to
        // (n_head, rows/n_head/2, 2): out row index → in row index.
        let half = rows / n_head / 2;
        let mut map = vec![0; rows];
        for h in 0..n_head {
            for i in 0..half {
                for j in 0..2 {
                    map[h * 2 * half + i * 2 + j] = h * 2 * half + j * half + i;
                }
            }
        }
        map
    }

    #[test]
    fn unpermute_inverts_the_converter() {
        for (rows, heads) in [(8, 1), (12, 3), (64, 4), (32, 2), (576, 9)] {
            let forward = permute(rows, heads);
            for (gguf_row, &hf_row) in forward.iter().enumerate() {
                assert_eq!(unpermuted_row(gguf_row, rows, heads), hf_row);
            }
        }
    }

    #[test]
    fn names() {
        let n = |a, s| hf_name(a, s).unwrap();
        assert_eq!(
            n(Arch::Llama, "blk.3.attn_q.weight").as_deref(),
            Some("model.layers.3.self_attn.q_proj.weight")
        );
        assert_eq!(
            n(Arch::Gemma3, "blk.0.ffn_norm.weight").as_deref(),
            Some("model.layers.0.pre_feedforward_layernorm.weight")
        );
        assert_eq!(
            n(Arch::Gemma, "blk.0.ffn_norm.weight").as_deref(),
            Some("model.layers.0.post_attention_layernorm.weight")
        );
        assert_eq!(
            n(Arch::Phi3, "blk.1.ffn_up.weight").as_deref(),
            Some("model.layers.1.mlp.gate_up_proj.weight")
        );
        assert_eq!(n(Arch::Llama, "rope_freqs.weight"), None);
        assert!(hf_name(Arch::Llama, "blk.0.attn_qkv.weight").is_err());
        assert!(hf_name(Arch::Qwen2, "blk.x.attn_q.weight").is_err());
        assert!(hf_name(Arch::Qwen2, "mystery").is_err());
    }
}
