//! Planning and writing the GGUF of a Hugging Face checkpoint, as `convert_hf_to_gguf.py`
//! does: the metadata in its key order, the tensors in the checkpoint's order with its type
//! choices, values converted exactly as numpy converts them. Tensors are read from the mapped
//! shards one at a time, so memory stays bounded by the largest tensor (as f32).

use gguf_format::tensor_names::TensorName as T;
use std::io::Write;

use gguf_format::{GgmlType, GgufBuilder, TensorSpec};
use serde_json::Value;

use super::arch::{self, Ctx, ExpertSlice, HfArch, Transform};
use super::checkpoint::{Checkpoint, Dtype, HfTensor};
use super::params::{text_model_parameters, Hparams, BLOCK_COUNT_KEYS, EXPERT_COUNT_KEYS};
use super::tensor_data::{convert_tensor, encode, output_shape, repack_mxfp4, stream_tensor};
use crate::check::{check_plan, Origins};
use crate::error::{Error, Result};

/// The type of the converted matrices (`--outtype`); vectors, norms and a few small tables
/// are always F32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutType {
    /// float32.
    F32,
    /// float16.
    F16,
    /// bfloat16.
    Bf16,
    /// 8-bit blocks; a tensor whose rows are not whole blocks falls back to F16.
    Q8_0,
    /// F16 or BF16, whichever the checkpoint's first matrix is (F16 when neither): the
    /// default, as in llama.cpp's script.
    #[default]
    Auto,
}

impl OutType {
    /// Parses `f32`, `f16`, `bf16`, `q8_0` or `auto`.
    pub fn parse(s: &str) -> Option<OutType> {
        Some(match s.to_ascii_lowercase().as_str() {
            "f32" => OutType::F32,
            "f16" => OutType::F16,
            "bf16" => OutType::Bf16,
            "q8_0" => OutType::Q8_0,
            "auto" => OutType::Auto,
            _ => return None,
        })
    }

    /// `general.file_type` and the matrices' type.
    fn resolve(self, first_matrix: Option<Dtype>) -> (u32, GgmlType) {
        match self {
            OutType::F32 => (0, GgmlType::F32),
            OutType::F16 => (1, GgmlType::F16),
            OutType::Bf16 => (32, GgmlType::BF16),
            OutType::Q8_0 => (7, GgmlType::Q8_0),
            OutType::Auto => match first_matrix {
                Some(Dtype::BF16) => (32, GgmlType::BF16),
                _ => (1, GgmlType::F16),
            },
        }
    }
}

/// What a conversion takes besides the checkpoint.
#[derive(Debug, Clone, Default)]
pub struct HfOptions {
    /// The matrices' type.
    pub outtype: OutType,
    /// Write the metadata and vocabulary only.
    pub vocab_only: bool,
    /// The pre-tokenizer name to write when llama.cpp's table does not know the tokenizer.
    pub pre_tokenizer: Option<String>,
}

/// One tensor of the output.
#[derive(Debug, Clone)]
pub struct PlannedTensor {
    /// Its GGUF name.
    pub name: String,
    /// The checkpoint tensor it comes from, or `None` for one computed from the
    /// hyperparameters (RoPE factor tables).
    pub source: Option<String>,
    /// The checkpoint tensor's dtype (F32 for a computed one).
    pub source_dtype: Dtype,
    /// Its GGUF type.
    pub ty: GgmlType,
    /// Its shape, innermost dimension first (GGML's order).
    pub shape: Vec<u64>,
    /// What is done to the values.
    pub transform: Transform,
    /// For a tensor stacked from the experts' matrices, the checkpoint tensors of its slices
    /// in order (`source` is the first); empty otherwise.
    pub slices: Vec<String>,
    /// For a tensor of the checkpoint's own MXFP4 blocks (`source`), the checkpoint tensor of
    /// their scales.
    pub scales: Option<String>,
}

/// A checkpoint's conversion, planned: the metadata to write and each tensor's name, type
/// and source.
pub struct HfConversion<'c> {
    ckpt: &'c Checkpoint,
    builder: GgufBuilder<'static>,
    tensors: Vec<PlannedTensor>,
    /// The values of computed tensors, by their index in `tensors`.
    generated: Vec<(usize, Vec<f32>)>,
    arch: &'static str,
    warnings: Vec<String>,
}

impl std::fmt::Debug for HfConversion<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HfConversion")
            .field("arch", &self.arch)
            .field("tensors", &self.tensors.len())
            .finish_non_exhaustive()
    }
}

/// The first decimal part of a dotted name (`model.layers.12.mlp` → 12): the layer.
fn block_id(name: &str) -> Option<u32> {
    name.split('.')
        .find(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|p| p.parse().ok())
}

/// Names the converter leaves out of every model: multimodal towers and a few buffers
/// (`TextModel.filter_tensors`, `ModelBase.filter_tensors` and `prepare_tensors`).
fn common_filter(name: &str) -> Option<String> {
    const PREFIXES: &[&str] = &[
        "mlp",
        "vit.",
        "vpm.",
        "siglip2.",
        "conformer.",
        "merger.",
        "resampler.",
        "sound_encoder.",
        "sound_projection.",
        "speech_embeddings.",
    ];
    const PARTS: &[&str] = &[
        "visual.",
        "vision.",
        "audio.",
        "talker.",
        "vision_",
        "audio_",
        "token2wav.",
        "code2wav.",
        "projector.",
        "pre_mm_projector_norm",
        "image_newline",
        "view_seperator",
        "patch_embed",
        "patch_embedding",
        "patch_merger.",
        "patch_merge_mlp.",
        "model.connector.",
    ];
    if PREFIXES.iter().any(|p| name.starts_with(p)) || PARTS.iter().any(|p| name.contains(p)) {
        return None;
    }
    let mut name = name.to_string();
    if name.ends_with("e_score_correction_bias") {
        name = name.replace("e_score_correction_bias", "e_score_correction.bias");
    }
    if name.contains("language_model.") {
        name = name.replace("language_model.", "");
    }
    Some(name)
}

/// `general.file_type` of a file whose experts are MXFP4 (llama.cpp's `LLAMA_FTYPE_MOSTLY_MXFP4_MOE`).
const MOSTLY_MXFP4_MOE: u32 = 38;

/// Tensors kept in F32 whatever the output type (besides vectors and norms), among those
/// this converter writes.
fn forced_f32(name: &str, bid: Option<u32>) -> bool {
    match bid {
        None => name == T::PosEmbd.weight() || name == T::TokenTypes.weight(),
        Some(b) => {
            name == T::FfnGateInp.block_weight(b) || name == T::FfnGateInpShexp.block_weight(b)
        }
    }
}

impl<'c> HfConversion<'c> {
    /// Plans the conversion of `ckpt` and, unless `options.vocab_only`, runs the engine's load
    /// check (the one `gguf validate` runs) on the plan: nothing is written before it passes.
    ///
    /// # Errors
    /// An architecture this converter does not write (the message lists those it does),
    /// a missing or malformed hyperparameter, tokenizer file or tensor, a tensor it cannot
    /// map, each naming the file; [`Error::WouldNotLoad`] for a plan whose file would not load,
    /// naming the key or tensor and the `config.json` key or checkpoint tensor it comes from.
    pub fn plan(ckpt: &'c Checkpoint, options: &HfOptions) -> Result<HfConversion<'c>> {
        let config = ckpt.config();
        let hf_arch = config
            .get("architectures")
            .and_then(|a| a.get(0))
            .and_then(Value::as_str)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "{}: config.json has no \"architectures\" list naming the model class",
                    ckpt.dir().display()
                ))
            })?;
        let entry = arch::find(hf_arch).ok_or_else(|| {
            Error::Unsupported(format!(
                "{}: model class {hf_arch} (model_type '{}') is not supported; supported: {}",
                ckpt.dir().display(),
                ckpt.model_type().unwrap_or("?"),
                arch::supported().join(", ")
            ))
        })?;
        let hparams = Hparams::new(config)?;
        let block_count = hparams.require_u32(BLOCK_COUNT_KEYS)?;
        let a = entry.arch;
        if !a.converts_experts() && hparams.find(EXPERT_COUNT_KEYS).is_some() {
            return Err(Error::Unsupported(format!(
                "{}: config.json describes a mixture of experts, which this converter does not \
                 write for {hf_arch} yet",
                ckpt.dir().display()
            )));
        }

        // The tensors, filtered and renamed, in the checkpoint's order.
        let mut sources: Vec<(String, HfTensor<'_>)> = Vec::new();
        let mut position: std::collections::HashMap<String, usize> = Default::default();
        for t in ckpt.tensors() {
            let Some(name) = a.filter(t.name).and_then(|n| common_filter(&n)) else {
                continue;
            };
            if name.ends_with(".attention.masked_bias")
                || name.ends_with(".attention.bias")
                || name.ends_with(".rotary_emb.inv_freq")
            {
                continue;
            }
            // A later tensor of the same name replaces the earlier in place, as in the
            // converter's dict.
            match position.entry(name) {
                std::collections::hash_map::Entry::Occupied(e) => sources[*e.get()].1 = t,
                std::collections::hash_map::Entry::Vacant(e) => {
                    sources.push((e.key().clone(), t));
                    e.insert(sources.len() - 1);
                }
            }
        }
        let first_matrix = sources
            .iter()
            .find(|(_, t)| t.shape.len() >= 2)
            .map(|(_, t)| t.dtype);
        let (mut file_type, matrix_type) = options.outtype.resolve(first_matrix);
        let quant_method = config
            .get("quantization_config")
            .and_then(|q| q.get("quant_method"))
            .and_then(Value::as_str);
        // A checkpoint of MXFP4 blocks keeps them: the script's MOSTLY_MXFP4_MOE file type for
        // the float output types.
        if quant_method == Some("mxfp4") && matches!(file_type, 0 | 1 | 32) {
            file_type = MOSTLY_MXFP4_MOE;
        }
        let ctx = Ctx {
            ckpt,
            hf_arch,
            hparams,
            block_count,
            file_type,
            pre_override: options.pre_tokenizer.clone(),
            warnings: Default::default(),
        };

        let mut b = GgufBuilder::new();
        b.set("general.architecture", a.gguf_arch());
        let mut tensors = Vec::new();
        let mut generated = Vec::new();
        let extra = a.generated(&ctx, &mut b)?;
        let choose = |name: &str, bid: Option<u32>, shape: &[usize]| -> GgmlType {
            if shape.len() <= 1
                || name.ends_with("_norm.weight")
                || forced_f32(name, bid)
                || !name.ends_with(".weight")
            {
                GgmlType::F32
            } else if matrix_type == GgmlType::Q8_0 && shape.last().is_some_and(|&n| n % 32 != 0) {
                ctx.warnings.borrow_mut().push(format!(
                    "{name}: rows of {} values are not whole Q8_0 blocks: written as F16",
                    shape.last().copied().unwrap_or(0)
                ));
                GgmlType::F16
            } else {
                matrix_type
            }
        };
        if !options.vocab_only {
            for g in extra {
                generated.push((tensors.len(), g.values.clone()));
                tensors.push(PlannedTensor {
                    ty: choose(&g.name, None, &[g.values.len()]),
                    name: g.name,
                    source: None,
                    source_dtype: Dtype::F32,
                    shape: vec![g.values.len() as u64],
                    transform: Transform::None,
                    slices: Vec::new(),
                    scales: None,
                });
            }
            // The checkpoint's own quantized blocks, first, as the reference's
            // `generate_extra_tensors` writes them.
            for (name, _) in &sources {
                for p in a.packed(&ctx, name, block_id(name))? {
                    tensors.push(plan_packed(&sources, &position, p)?);
                }
            }
            // Each layer's expert slices, until the layer has them all.
            let mut pending: std::collections::BTreeMap<u32, Vec<(ExpertSlice, &HfTensor<'_>)>> =
                Default::default();
            for (name, t) in &sources {
                let bid = block_id(name);
                if let Some(slice) = a.expert_slice(&ctx, name, bid)? {
                    let Some(layer) = bid else {
                        return Err(Error::Unsupported(format!(
                            "tensor '{name}': an expert's matrix outside a layer"
                        )));
                    };
                    let wanted = slice.kinds * slice.n_expert;
                    let parts = pending.entry(layer).or_default();
                    parts.push((slice, t));
                    if parts.len() >= wanted {
                        let parts = pending.remove(&layer).unwrap_or_default();
                        for planned in stack_experts(&ctx, a, layer, parts)? {
                            tensors.push(PlannedTensor {
                                ty: choose(&planned.name, bid, &planned.torch_shape),
                                ..planned.tensor
                            });
                        }
                    }
                    continue;
                }
                for m in a.map(&ctx, name, bid)? {
                    let shape = output_shape(m.transform, name, t.shape)?;
                    tensors.push(PlannedTensor {
                        ty: choose(&m.name, bid, &shape),
                        name: m.name,
                        source: Some(t.name.to_string()),
                        source_dtype: t.dtype,
                        shape: shape.iter().rev().map(|&d| d as u64).collect(),
                        transform: m.transform,
                        slices: Vec::new(),
                        scales: None,
                    });
                }
            }
            if let Some((layer, parts)) = pending.into_iter().next() {
                let (slice, t) = &parts[0];
                return Err(Error::Unsupported(format!(
                    "{}: layer {layer} has {} of the {} expert matrices its stacked tensors need \
                     (first: '{}'); the checkpoint is incomplete",
                    ckpt.dir().display(),
                    parts.len(),
                    slice.kinds * slice.n_expert,
                    t.name
                )));
            }
        }

        b.set("general.type", "model");
        let params = crate::model_card::count_params(
            tensors
                .iter()
                .map(|t| (t.name.as_str(), t.shape.as_slice())),
        );
        let card = crate::model_card::checkpoint_metadata(ckpt, &params)?;
        for (key, value) in card {
            b.set(&key, value);
        }
        let mut origins = Origins::new();
        if a.uses_shared_parameters() {
            text_model_parameters(
                &mut b,
                a.gguf_arch(),
                &ctx.hparams,
                block_count,
                file_type,
                &mut origins,
            )?;
        }
        a.parameters(&ctx, &mut b)?;
        b.set("general.quantization_version", 2u32);
        a.vocab(&ctx, &mut b)?;
        for t in &tensors {
            b.push_tensor(TensorSpec::new(t.name.clone(), t.ty, &t.shape)?)?;
        }
        if !options.vocab_only {
            // The engine's load check, before anything is written. The computed tensors
            // (RoPE factor tables) are checked with their values.
            let data = generated
                .iter()
                .map(|(i, values)| {
                    let t = &tensors[*i];
                    encode(values, t.ty, t.shape.first().copied().unwrap_or(1) as usize)
                        .map(|bytes| (*i, bytes))
                })
                .collect::<Result<Vec<_>>>()?;
            let rope_key = ctx.hparams.rope_key();
            origins.extend(tensors.iter().map(|t| {
                let from = match &t.source {
                    Some(source) => format!("the checkpoint's {source}"),
                    None => format!("config.json's {rope_key}"),
                };
                (t.name.clone(), from)
            }));
            check_plan(&ckpt.dir().display().to_string(), &mut b, &data, &origins)?;
        }
        let warnings = ctx.warnings.into_inner();
        Ok(HfConversion {
            ckpt,
            builder: b,
            tensors,
            generated,
            arch: a.gguf_arch(),
            warnings,
        })
    }

    /// `general.architecture` of the output.
    pub fn architecture(&self) -> &'static str {
        self.arch
    }

    /// The tensors to write, in order.
    pub fn tensors(&self) -> &[PlannedTensor] {
        &self.tensors
    }

    /// The metadata and tensor table to write.
    pub fn builder(&self) -> &GgufBuilder<'static> {
        &self.builder
    }

    /// What was odd but did not stop the conversion.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Every file and directory of the checkpoint that opening it and planning this
    /// conversion read, in the order first read: the directory, `config.json`, the index,
    /// the shards (mapped; [`write`](Self::write) reads the tensors from them and nothing
    /// else), and whichever tokenizer files, templates, model card and generation settings
    /// the architecture read. The output must not be written over any of them (see
    /// `gguf_fsutil::refuse_inputs`).
    pub fn inputs(&self) -> Vec<std::path::PathBuf> {
        self.ckpt.reads().list()
    }

    /// Writes the GGUF to `out`, one tensor at a time; `progress` gets (bytes of tensor data
    /// written, total).
    pub fn write<W: Write>(&self, out: W, progress: &mut dyn FnMut(u64, u64)) -> Result<W> {
        if self.tensors.is_empty() {
            // A vocabulary-only file: gguf-py writes no padding after the metadata.
            return Ok(self.builder.write_without_data(out)?);
        }
        let total: u64 = self.builder.tensors().iter().map(TensorSpec::size).sum();
        let mut done = 0;
        let mut w = self.builder.write(out)?;
        for (i, (t, spec)) in self.tensors.iter().zip(self.builder.tensors()).enumerate() {
            match &t.source {
                None => {
                    let values = self
                        .generated
                        .iter()
                        .find(|(j, _)| *j == i)
                        .map(|(_, v)| v.as_slice())
                        .unwrap_or_default();
                    let row_len = t.shape.first().copied().unwrap_or(1) as usize;
                    w.write_tensor(&encode(values, t.ty, row_len)?)?;
                }
                Some(name) => {
                    let source = self.ckpt.tensor(name).ok_or_else(|| {
                        Error::Unsupported(format!("tensor '{name}' vanished from the checkpoint"))
                    })?;
                    if let Some(scales) = &t.scales {
                        let scales = self.ckpt.tensor(scales).ok_or_else(|| {
                            Error::Unsupported(format!(
                                "tensor '{scales}' vanished from the checkpoint"
                            ))
                        })?;
                        w.write_tensor(&repack_mxfp4(&source, &scales, t)?)?;
                    } else if !t.slices.is_empty() {
                        let mut slices = Vec::with_capacity(t.slices.len());
                        for s in &t.slices {
                            let slice = self.ckpt.tensor(s).ok_or_else(|| {
                                Error::Unsupported(format!(
                                    "tensor '{s}' vanished from the checkpoint"
                                ))
                            })?;
                            slice.values_f32(0..0)?;
                            slices.push(slice);
                        }
                        // One expert after another: the stacked tensor's bytes.
                        w.write_tensor_with(|out| {
                            slices.iter().try_for_each(|slice| {
                                stream_tensor(slice, t, out)
                                    .map_err(|e| std::io::Error::other(e.to_string()))
                            })
                        })?;
                    } else if let Transform::PermuteRows { .. }
                    | Transform::SliceRows { .. }
                    | Transform::HeadRows { .. }
                    | Transform::EveryOther { .. } = t.transform
                    {
                        // Rows move across the whole tensor (Q and K are small).
                        w.write_tensor(&convert_tensor(&source, t)?)?;
                    } else {
                        // Check the dtype before streaming, for a clear error.
                        source.values_f32(0..0)?;
                        w.write_tensor_with(|out| {
                            stream_tensor(&source, t, out)
                                .map_err(|e| std::io::Error::other(e.to_string()))
                        })?;
                    }
                }
            }
            done += spec.size();
            progress(done, total);
        }
        Ok(w.finish()?)
    }
}

/// The plan of a tensor of the checkpoint's own MXFP4 blocks: `[experts, rows, blocks, 16]`
/// bytes with `[experts, rows, blocks]` scales, every `period`-th row from `first` kept.
fn plan_packed(
    sources: &[(String, HfTensor<'_>)],
    position: &std::collections::HashMap<String, usize>,
    p: arch::Packed,
) -> Result<PlannedTensor> {
    let find = |name: &str| {
        position.get(name).map(|&i| &sources[i].1).ok_or_else(|| {
            Error::Unsupported(format!(
                "tensor '{name}' is missing: '{}' needs it for its MXFP4 blocks",
                p.name
            ))
        })
    };
    let (blocks, scales) = (find(&p.blocks)?, find(&p.scales)?);
    let bad = |what: &str| {
        Error::Unsupported(format!(
            "tensors '{}' {:?} ({:?}) and '{}' {:?} ({:?}) are not MXFP4 blocks and scales: {what}",
            blocks.name, blocks.shape, blocks.dtype, scales.name, scales.shape, scales.dtype
        ))
    };
    if blocks.dtype != Dtype::U8 || scales.dtype != Dtype::U8 {
        return Err(bad("both must be U8"));
    }
    let [experts, rows, n_blocks, 16] = *blocks.shape else {
        return Err(bad("the blocks must be [experts, rows, blocks, 16]"));
    };
    if scales.shape != [experts, rows, n_blocks] {
        return Err(bad("the scales must be [experts, rows, blocks]"));
    }
    if p.period == 0 || rows % p.period != 0 || p.first >= p.period {
        return Err(bad(&format!("{rows} rows do not split in {}", p.period)));
    }
    Ok(PlannedTensor {
        name: p.name,
        source: Some(blocks.name.to_string()),
        source_dtype: Dtype::U8,
        ty: GgmlType::MXFP4,
        shape: vec![
            (n_blocks * 32) as u64,
            (rows / p.period) as u64,
            experts as u64,
        ],
        transform: Transform::Mxfp4 {
            period: p.period,
            first: p.first,
        },
        slices: Vec::new(),
        scales: Some(scales.name.to_string()),
    })
}

/// A stacked expert tensor, planned but for its type.
struct StackedPlan {
    name: String,
    /// PyTorch's order, outermost first (the experts).
    torch_shape: Vec<usize>,
    tensor: PlannedTensor,
}

/// The stacked tensors of one layer from all of its expert slices, in the reference's order
/// (by kind, each stacking the experts in order), each mapped as the architecture maps the
/// stacked name.
fn stack_experts(
    ctx: &Ctx<'_>,
    a: &dyn HfArch,
    layer: u32,
    mut parts: Vec<(ExpertSlice, &HfTensor<'_>)>,
) -> Result<Vec<StackedPlan>> {
    parts.sort_by_key(|(s, _)| (s.kind, s.expert));
    let mut out = Vec::new();
    for group in parts.chunk_by(|(x, _), (y, _)| x.kind == y.kind) {
        let (first, t0) = &group[0];
        let in_order = group.iter().enumerate().all(|(i, (s, _))| s.expert == i);
        if group.len() != first.n_expert || !in_order {
            return Err(Error::Unsupported(format!(
                "tensor '{}': layer {layer} does not have each of its {} experts' matrices \
                 once for '{}'",
                t0.name, first.n_expert, first.stacked
            )));
        }
        if let Some((_, odd)) = group
            .iter()
            .find(|(_, t)| t.shape != t0.shape || t.dtype != t0.dtype)
        {
            return Err(Error::Unsupported(format!(
                "tensor '{}' has shape {:?} ({:?}) where '{}' has {:?} ({:?}): experts' \
                 matrices must match to be stacked",
                odd.name, odd.shape, odd.dtype, t0.name, t0.shape, t0.dtype
            )));
        }
        let mapped = a.map(ctx, &first.stacked, Some(layer))?;
        let [m] = mapped.as_slice() else {
            return Err(Error::Unsupported(format!(
                "cannot map the stacked tensor '{}'",
                first.stacked
            )));
        };
        let mut torch_shape = vec![group.len()];
        torch_shape.extend_from_slice(t0.shape);
        out.push(StackedPlan {
            name: m.name.clone(),
            tensor: PlannedTensor {
                name: m.name.clone(),
                source: Some(t0.name.to_string()),
                source_dtype: t0.dtype,
                ty: GgmlType::F32,
                shape: torch_shape.iter().rev().map(|&d| d as u64).collect(),
                transform: Transform::None,
                slices: group.iter().map(|(_, t)| t.name.to_string()).collect(),
                scales: None,
            },
            torch_shape,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_ids_are_the_first_number() {
        assert_eq!(block_id("model.layers.12.mlp.up_proj.weight"), Some(12));
        assert_eq!(block_id("encoder.layer.3.output.dense.bias"), Some(3));
        assert_eq!(block_id("embeddings.word_embeddings.weight"), None);
    }
}
