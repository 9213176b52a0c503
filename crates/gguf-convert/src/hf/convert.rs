//! Planning and writing the GGUF of a Hugging Face checkpoint, as `convert_hf_to_gguf.py`
//! does: the metadata in its key order, the tensors in the checkpoint's order with its type
//! choices, values converted exactly as numpy converts them. Tensors are read from the mapped
//! shards one at a time, so memory stays bounded by the largest tensor (as f32).

use gguf_format::tensor_names::TensorName as T;
use std::io::Write;

use gguf_format::{GgmlType, GgufBuilder, TensorSpec};
use half::f16;
use serde_json::Value;

use super::arch::{self, Ctx, ExpertSlice, HfArch, Transform};
use super::checkpoint::{Checkpoint, Dtype, HfTensor};
use super::params::{text_model_parameters, Hparams, BLOCK_COUNT_KEYS, EXPERT_COUNT_KEYS};
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
        let (file_type, matrix_type) = options.outtype.resolve(first_matrix);
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
                });
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
                    let mut shape = t.shape.to_vec();
                    if let Transform::FirstRows { rows } = m.transform {
                        if let Some(first) = shape.first_mut() {
                            *first = (*first).min(rows);
                        }
                    }
                    if let Transform::SliceRows { period, first, n } = m.transform {
                        let fused = shape.len().checked_sub(2).map(|d| &mut shape[d]);
                        match fused {
                            Some(dim) if *dim == period && first + n <= period => *dim = n,
                            _ => {
                                return Err(Error::Unsupported(format!(
                                    "tensor '{name}' of shape {:?} has no dimension of {period} \
                                     rows to split",
                                    t.shape
                                )))
                            }
                        }
                    }
                    if let Transform::HeadRows {
                        period,
                        first,
                        n,
                        transpose,
                    } = m.transform
                    {
                        shape = match t.shape {
                            [rows, columns]
                                if period > 0 && rows % period == 0 && first + n <= period =>
                            {
                                let heads = rows / period;
                                match transpose {
                                    true => vec![heads, *columns, n],
                                    false => vec![heads, n, *columns],
                                }
                            }
                            _ => {
                                return Err(Error::Unsupported(format!(
                                    "tensor '{name}' of shape {:?} is not a matrix of heads of \
                                     {period} rows",
                                    t.shape
                                )))
                            }
                        };
                    }
                    tensors.push(PlannedTensor {
                        ty: choose(&m.name, bid, &shape),
                        name: m.name,
                        source: Some(t.name.to_string()),
                        source_dtype: t.dtype,
                        shape: shape.iter().rev().map(|&d| d as u64).collect(),
                        transform: m.transform,
                        slices: Vec::new(),
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
                    if !t.slices.is_empty() {
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
                    | Transform::HeadRows { .. } = t.transform
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
            },
            torch_shape,
        });
    }
    Ok(out)
}

/// Elements converted at a time when a tensor is streamed.
const STREAM_ELEMENTS: usize = 1 << 20;

/// Converts and writes a tensor whose transformation works element by element (none, plus
/// one, first rows) a slab of whole rows at a time, so no copy of the whole tensor is made.
fn stream_tensor(source: &HfTensor<'_>, t: &PlannedTensor, out: &mut dyn Write) -> Result<()> {
    let len = match t.transform {
        Transform::FirstRows { rows } => {
            let outer: usize = source.shape.iter().skip(1).product();
            source.len().min(rows.saturating_mul(outer))
        }
        _ => source.len(),
    };
    let row_len = (t.shape.first().copied().unwrap_or(1) as usize).max(1);
    let step = row_len * (STREAM_ELEMENTS / row_len).max(1);
    let mut start = 0;
    while start < len {
        let end = (start + step).min(len);
        let mut values = source.values_f32(start..end)?;
        if t.transform == Transform::AddOne {
            add_one(&mut values, source.dtype);
        }
        out.write_all(&encode(&values, t.ty, row_len)?)
            .map_err(|e| Error::Unsupported(format!("writing '{}': {e}", t.name)))?;
        start = end;
    }
    Ok(())
}

/// Gemma's norm offset: plus one, in the tensor's own type as torch adds (an f16 sum is
/// rounded to f16).
fn add_one(values: &mut [f32], dtype: Dtype) {
    for v in values {
        *v += 1.0;
        if dtype == Dtype::F16 {
            *v = f16::from_f32(*v).to_f32();
        }
    }
}

/// One tensor's output bytes, converted whole.
fn convert_tensor(source: &HfTensor<'_>, t: &PlannedTensor) -> Result<Vec<u8>> {
    let mut values = source.to_f32()?;
    match t.transform {
        Transform::None => {}
        Transform::AddOne => add_one(&mut values, source.dtype),
        Transform::FirstRows { rows } => {
            let row_len: usize = source.shape.iter().skip(1).product();
            values.truncate(rows.saturating_mul(row_len));
        }
        Transform::SliceRows { period, first, n } => {
            let row_len = source.shape.last().copied().unwrap_or(1).max(1);
            values = values
                .chunks_exact(period * row_len)
                .flat_map(|group| &group[first * row_len..(first + n) * row_len])
                .copied()
                .collect();
        }
        Transform::HeadRows {
            period,
            first,
            n,
            transpose,
        } => {
            let columns = source.shape.last().copied().unwrap_or(1).max(1);
            let mut out = Vec::with_capacity(values.len() / period.max(1) * n);
            for head in values.chunks_exact(period * columns) {
                let kept = &head[first * columns..(first + n) * columns];
                if transpose {
                    for c in 0..columns {
                        out.extend((0..n).map(|r| kept[r * columns + c]));
                    }
                } else {
                    out.extend_from_slice(kept);
                }
            }
            values = out;
        }
        Transform::PermuteRows { heads } => {
            values = permute_rows(&values, source.shape, heads).ok_or_else(|| {
                Error::Unsupported(format!(
                    "tensor '{}' of shape {:?} cannot be split into {heads} heads of row pairs",
                    source.name, source.shape
                ))
            })?;
        }
    }
    encode(
        &values,
        t.ty,
        t.shape.first().copied().unwrap_or(1) as usize,
    )
}

/// llama's Q/K permutation: within each head, rows `[first half; second half]` become
/// interleaved pairs (`reshape(heads, 2, dim/heads/2, ...).swapaxes(1, 2)`).
pub(crate) fn permute_rows(values: &[f32], shape: &[usize], heads: usize) -> Option<Vec<f32>> {
    let rows = *shape.first()?;
    let row_len = if shape.len() > 1 {
        shape[1..].iter().product()
    } else {
        1
    };
    if heads == 0 || rows % (heads * 2) != 0 || values.len() != rows * row_len {
        return None;
    }
    let half = rows / heads / 2;
    let mut out = vec![0.0; values.len()];
    for h in 0..heads {
        for i in 0..half {
            for j in 0..2 {
                let dst = h * 2 * half + i * 2 + j;
                let src = h * 2 * half + j * half + i;
                out[dst * row_len..(dst + 1) * row_len]
                    .copy_from_slice(&values[src * row_len..(src + 1) * row_len]);
            }
        }
    }
    Some(out)
}

/// `values` in `ty`, as numpy and gguf-py's quantizers produce them.
fn encode(values: &[f32], ty: GgmlType, row_len: usize) -> Result<Vec<u8>> {
    Ok(match ty {
        GgmlType::F32 => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        GgmlType::F16 => values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect(),
        GgmlType::BF16 => values
            .iter()
            .flat_map(|&v| f32_to_bf16(v).to_le_bytes())
            .collect(),
        GgmlType::Q8_0 => {
            let rows = values.len() / row_len.max(1);
            let mut out = vec![0u8; rows * (row_len / 32) * 34];
            gguf_quant::quantize_rows(GgmlType::Q8_0, values, &mut out)
                .map_err(|e| Error::Unsupported(format!("Q8_0: {e}")))?;
            out
        }
        other => {
            return Err(Error::Unsupported(format!(
                "cannot write {} tensors",
                other.name()
            )))
        }
    })
}

/// ggml's (and gguf-py's) f32 → bf16: round to nearest even, NaNs made quiet.
pub(crate) fn f32_to_bf16(v: f32) -> u16 {
    let mut n = v.to_bits();
    if n & 0x7fff_ffff > 0x7f80_0000 {
        n = (n & 0xffff_0000) | (64 << 16);
    }
    ((u64::from(n) + 0x7fff + u64::from((n >> 16) & 1)) >> 16) as u16
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_permuted_per_head_into_pairs() {
        // Two heads of four rows (one value each): [a0 a1 b0 b1] per head → [a0 b0 a1 b1].
        let v: Vec<f32> = (0..8).map(|i| i as f32).collect();
        let p = permute_rows(&v, &[8, 1], 2).unwrap();
        assert_eq!(p, [0.0, 2.0, 1.0, 3.0, 4.0, 6.0, 5.0, 7.0]);
        assert!(permute_rows(&v, &[8, 1], 3).is_none());
    }

    #[test]
    fn bf16_rounds_to_nearest_even_and_quiets_nans() {
        assert_eq!(f32_to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway: ties to even (down); 1 + 3*2^-8 ties up.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f80_8000)), 0x3f80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3f81_8000)), 0x3f82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7f80_0001)), 0x7fc0);
        assert_eq!(f32_to_bf16(f32::INFINITY), 0x7f80);
    }

    #[test]
    fn block_ids_are_the_first_number() {
        assert_eq!(block_id("model.layers.12.mlp.up_proj.weight"), Some(12));
        assert_eq!(block_id("encoder.layer.3.output.dense.bias"), Some(3));
        assert_eq!(block_id("embeddings.word_embeddings.weight"), None);
    }
}
