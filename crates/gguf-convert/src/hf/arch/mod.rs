//! The architectures this converter writes, one module each, and the registry that picks one
//! by `config.json`'s `architectures[0]`, as `convert_hf_to_gguf.py` picks its model class.
//!
//! An architecture says what its `{arch}.*` keys are beyond the shared ones
//! ([`super::params::text_model_parameters`]), how its vocabulary is written, which checkpoint
//! tensors it drops or renames, and how each remaining tensor maps to GGUF names (with the
//! transformations llama.cpp applies, such as the Q/K row permutation of llama).

mod bert;
mod deepseek;
mod gemma;
mod gpt_oss;
mod llama;
mod phi3;
mod qwen_moe;

use gguf_format::tensor_names::TensorName as T;
use gguf_format::GgufBuilder;

use super::checkpoint::Checkpoint;
use super::params::Hparams;
use crate::error::Result;

/// What an architecture sees while planning.
pub(crate) struct Ctx<'a> {
    pub ckpt: &'a Checkpoint,
    /// `config.json`'s `architectures[0]`.
    pub hf_arch: &'a str,
    pub hparams: Hparams,
    pub block_count: u32,
    /// `general.file_type`.
    pub file_type: u32,
    /// `--pre`: the pre-tokenizer name to write when the check finds none.
    pub pre_override: Option<String>,
    /// Problems that do not stop the conversion.
    pub warnings: std::cell::RefCell<Vec<String>>,
}

/// How a checkpoint tensor's values become a GGUF tensor's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// As they are.
    None,
    /// llama's Q/K rows reordered from Hugging Face's rotary layout (halves) to GGML's
    /// (interleaved pairs), over `heads` heads.
    PermuteRows {
        /// Heads the rows are in.
        heads: usize,
    },
    /// Plus one (Gemma's RMS norm weights, stored as offsets from one).
    AddOne,
    /// Only the first rows (Gemma 3's embeddings cut to the real vocabulary).
    FirstRows {
        /// Rows kept.
        rows: usize,
    },
    /// Of every `period` consecutive rows (the second-innermost dimension), rows
    /// `first..first + n`: one half of a fused gate-and-up tensor (Granite-MoE's
    /// `input_linear`, split as `data.split(n, dim=-2)`).
    SliceRows {
        /// The fused dimension.
        period: usize,
        /// The first row kept of each period.
        first: usize,
        /// Rows kept of each period.
        n: usize,
    },
    /// A `[heads · period, columns]` matrix viewed as `[heads, period, columns]`: of each head,
    /// rows `first..first + n`, as `[heads, n, columns]`, or with `transpose` each head's
    /// block transposed, as `[heads, columns, n]` (latent attention's `kv_b_proj` split into
    /// its key and value parts, the key part transposed for the absorbed product).
    HeadRows {
        /// Rows per head.
        period: usize,
        /// The first row kept of each head.
        first: usize,
        /// Rows kept of each head.
        n: usize,
        /// Whether each head's kept block is transposed.
        transpose: bool,
    },
    /// Of the innermost dimension, every other element from `first` (one half of gpt-oss'
    /// interleaved gate-and-up biases, `data[..., first::2]`).
    EveryOther {
        /// 0 or 1.
        first: usize,
    },
    /// The checkpoint's MXFP4 blocks (`[experts, rows, blocks, 16]` bytes, two values a byte,
    /// the even one low) with their E8M0 scales (`[experts, rows, blocks]`), repacked into
    /// ggml's `block_mxfp4` (the scale, then value `j` low and `j + 16` high); of the rows,
    /// every `period`-th from `first`.
    Mxfp4 {
        /// 1, or 2 for one half of interleaved gate-and-up rows.
        period: usize,
        /// The first row kept.
        first: usize,
    },
}

/// A GGUF tensor made of a checkpoint's own quantized blocks (gpt-oss' MXFP4 experts), which the
/// reference writes before the other tensors.
#[derive(Debug, Clone)]
pub(crate) struct Packed {
    /// Its GGUF name.
    pub name: String,
    /// The checkpoint tensors of its blocks and its scales.
    pub blocks: String,
    pub scales: String,
    /// Of the rows, every `period`-th from `first`.
    pub period: usize,
    pub first: usize,
}

/// A tensor an architecture computes rather than reads (`generate_extra_tensors`).
#[derive(Debug, Clone)]
pub(crate) struct Generated {
    pub name: String,
    pub values: Vec<f32>,
}

/// One GGUF tensor from a checkpoint tensor.
#[derive(Debug, Clone)]
pub(crate) struct Mapped {
    /// Its GGUF name.
    pub name: String,
    pub transform: Transform,
}

/// One expert's matrix of a tensor the reference stacks (`torch.stack` over the experts), as
/// an architecture names it.
#[derive(Debug, Clone)]
pub(crate) struct ExpertSlice {
    /// The checkpoint-style name of the stacked tensor, which [`HfArch::map`] then maps
    /// (Mixtral's `layers.0.feed_forward.experts.w1.weight`).
    pub stacked: String,
    /// Which of the layer's stacked tensors this is, in the order the reference writes them
    /// once it has every expert's matrices of the layer.
    pub kind: usize,
    /// How many stacked tensors a layer has.
    pub kinds: usize,
    pub expert: usize,
    pub n_expert: usize,
}

/// Where a checkpoint keeps its experts' separate matrices:
/// `model.layers.{b}.{experts}.{e}.{matrix}.weight`.
pub(crate) struct ExpertLayout {
    /// The experts' module in a layer (`block_sparse_moe.experts`).
    pub experts: &'static str,
    /// Each expert's matrices, in the order the reference stacks them.
    pub matrices: &'static [&'static str],
    /// The `config.json` keys of the expert count, in the reference's order.
    pub count_keys: &'static [&'static str],
    /// The checkpoint-style name of layer `b`'s stacked `matrix`, which [`HfArch::map`] maps.
    pub stacked: fn(u32, &str) -> String,
}

/// Mixtral's and PhiMoE's `block_sparse_moe.experts.{e}.{w1,w2,w3}` (PhiMoE's stacked names;
/// Mixtral's `LlamaModel` names its own).
pub(crate) const BLOCK_SPARSE_EXPERTS: ExpertLayout = ExpertLayout {
    experts: "block_sparse_moe.experts",
    matrices: &["w1", "w2", "w3"],
    count_keys: &["num_local_experts", "num_experts"],
    stacked: |b, w| format!("model.layers.{b}.block_sparse_moe.experts.{w}.weight"),
};

/// Qwen2-MoE's, Qwen3-MoE's and OLMoE's `mlp.experts.{e}.{down,gate,up}_proj`, stacked in that
/// order.
pub(crate) const MLP_EXPERTS: ExpertLayout = ExpertLayout {
    experts: "mlp.experts",
    matrices: &["down_proj", "gate_proj", "up_proj"],
    count_keys: &["num_local_experts", "num_experts"],
    stacked: |b, w| format!("model.layers.{b}.mlp.experts.{w}.weight"),
};

/// The slice an expert's matrix in `layout` is of (`None` for any other tensor): stacked as
/// `layout.stacked(b, matrix)`, the layer's stacks written in `layout`'s order.
pub(crate) fn expert_matrix(
    ctx: &Ctx<'_>,
    name: &str,
    bid: Option<u32>,
    layout: &ExpertLayout,
) -> Result<Option<ExpertSlice>> {
    let Some(b) = bid else {
        return Ok(None);
    };
    let prefix = format!("model.layers.{b}.{}.", layout.experts);
    let Some(rest) = name.strip_prefix(&prefix) else {
        return Ok(None);
    };
    let parsed = rest.split_once('.').and_then(|(e, w)| {
        let kind = layout
            .matrices
            .iter()
            .position(|m| w.strip_suffix(".weight") == Some(*m))?;
        Some((e.parse::<usize>().ok()?, kind))
    });
    let Some((expert, kind)) = parsed else {
        return Err(crate::Error::Unsupported(format!(
            "tensor '{name}': not an expert's {} weight",
            layout.matrices.join(", ")
        )));
    };
    let n_expert = ctx.hparams.require_u32(layout.count_keys)? as usize;
    if expert >= n_expert {
        return Err(crate::Error::Unsupported(format!(
            "tensor '{name}': expert {expert} of a model with {} {n_expert}",
            layout.count_keys[0]
        )));
    }
    Ok(Some(ExpertSlice {
        stacked: (layout.stacked)(b, layout.matrices[kind]),
        kind,
        kinds: layout.matrices.len(),
        expert,
        n_expert,
    }))
}

/// One architecture.
pub(crate) trait HfArch: Sync {
    /// `general.architecture`.
    fn gguf_arch(&self) -> &'static str;

    /// Whether the shared `{arch}.*` keys ([`super::params::text_model_parameters`]) come
    /// first; architectures that write all their keys themselves say no.
    fn uses_shared_parameters(&self) -> bool {
        true
    }

    /// The `{arch}.*` keys after the shared ones (`set_gguf_parameters`'s own part).
    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()>;

    /// The `tokenizer.*` keys.
    fn vocab(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()>;

    /// The checkpoint name a tensor goes by, or `None` to leave it out (`filter_tensors`); by
    /// default its own.
    fn filter(&self, name: &str) -> Option<String> {
        Some(name.to_string())
    }

    /// Tensors computed from the hyperparameters, written before the checkpoint's; keys they
    /// bring are set on `b` here, before any other but `general.architecture`, as the
    /// reference sets them while it prepares its tensors.
    fn generated(&self, _ctx: &Ctx<'_>, _b: &mut GgufBuilder<'_>) -> Result<Vec<Generated>> {
        Ok(Vec::new())
    }

    /// The GGUF tensors a (filtered) checkpoint tensor becomes; `bid` is its layer.
    fn map(&self, ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>>;

    /// Whether the architecture converts mixtures of experts (a `config.json` with an expert
    /// count is refused otherwise).
    fn converts_experts(&self) -> bool {
        false
    }

    /// The tensors of the checkpoint's own quantized blocks that a (filtered) checkpoint tensor
    /// completes, written before all others in the checkpoint's order.
    fn packed(&self, _ctx: &Ctx<'_>, _name: &str, _bid: Option<u32>) -> Result<Vec<Packed>> {
        Ok(Vec::new())
    }

    /// The stacked tensor a (filtered) checkpoint tensor is one expert's slice of, if it is.
    fn expert_slice(
        &self,
        _ctx: &Ctx<'_>,
        _name: &str,
        _bid: Option<u32>,
    ) -> Result<Option<ExpertSlice>> {
        Ok(None)
    }
}

/// One registered architecture: the `architectures[0]` values that select it.
pub(crate) struct Entry {
    pub hf_names: &'static [&'static str],
    pub arch: &'static dyn HfArch,
}

/// Every architecture, in the order they are listed in errors.
pub(crate) const ARCHITECTURES: &[Entry] = &[
    Entry {
        hf_names: &[
            "LlamaForCausalLM",
            "LLaMAForCausalLM",
            "MistralForCausalLM",
            "MixtralForCausalLM",
            "LlamaModel",
        ],
        arch: &llama::LLAMA,
    },
    Entry {
        hf_names: &["GraniteForCausalLM"],
        arch: &llama::GRANITE,
    },
    Entry {
        hf_names: &["GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM"],
        arch: &llama::GRANITE_MOE,
    },
    Entry {
        hf_names: &["Qwen2ForCausalLM", "Qwen2Model"],
        arch: &llama::QWEN2,
    },
    Entry {
        hf_names: &["Qwen3ForCausalLM"],
        arch: &llama::QWEN3,
    },
    Entry {
        hf_names: &["Qwen2MoeForCausalLM"],
        arch: &qwen_moe::QWEN2MOE,
    },
    Entry {
        hf_names: &["Qwen3MoeForCausalLM"],
        arch: &qwen_moe::QWEN3MOE,
    },
    Entry {
        hf_names: &["OlmoeForCausalLM"],
        arch: &qwen_moe::OLMOE,
    },
    Entry {
        hf_names: &["DeepseekV2ForCausalLM", "DeepseekV3ForCausalLM"],
        arch: &deepseek::DEEPSEEK2,
    },
    Entry {
        hf_names: &["GptOssForCausalLM"],
        arch: &gpt_oss::GPT_OSS,
    },
    Entry {
        hf_names: &["GemmaForCausalLM"],
        arch: &gemma::GEMMA,
    },
    Entry {
        hf_names: &["Gemma2ForCausalLM"],
        arch: &gemma::GEMMA2,
    },
    Entry {
        hf_names: &["Gemma3ForCausalLM"],
        arch: &gemma::GEMMA3,
    },
    Entry {
        hf_names: &["Phi3ForCausalLM"],
        arch: &phi3::PHI3,
    },
    Entry {
        // The class the published checkpoints name (llama.cpp's), and transformers' own.
        hf_names: &["PhiMoEForCausalLM", "PhimoeForCausalLM"],
        arch: &phi3::PHIMOE,
    },
    Entry {
        hf_names: &["BertModel", "BertForMaskedLM"],
        arch: &bert::Bert,
    },
];

/// The registry's entry for `hf_arch`.
pub(crate) fn find(hf_arch: &str) -> Option<&'static Entry> {
    ARCHITECTURES.iter().find(|e| e.hf_names.contains(&hf_arch))
}

/// `architectures[0]` values supported, for messages.
pub fn supported() -> Vec<&'static str> {
    ARCHITECTURES
        .iter()
        .flat_map(|e| e.hf_names.iter().copied())
        .collect()
}

/// Maps `name` (with `.weight`/`.bias` or no suffix) by a table of (Hugging Face stem, GGUF
/// name) where `{bid}` stands for the layer (and makes the GGUF name the block's): `gguf-py`'s `TensorNameMap.get_name`.
pub(crate) fn map_by_table(name: &str, bid: Option<u32>, table: &[(&str, T)]) -> Option<String> {
    for suffix in [".weight", ".bias", ""] {
        let Some(stem) = name.strip_suffix(suffix) else {
            continue;
        };
        for (hf, gguf) in table {
            let (hf, gguf) = match bid {
                Some(b) if hf.contains("{bid}") => {
                    (hf.replace("{bid}", &b.to_string()), gguf.block(b))
                }
                None if !hf.contains("{bid}") => (hf.to_string(), gguf.as_str().to_string()),
                _ => continue,
            };
            if stem == hf {
                return Some(format!("{gguf}{suffix}"));
            }
        }
    }
    None
}

/// The Hugging Face stems of the decoder families' tensors, to GGUF stems (gguf-py's
/// `TensorNameMap` for llama, qwen2/3, gemma 1-3 and phi3, with the per-architecture choices
/// noted).
pub(crate) fn decoder_table(arch: &str) -> Vec<(&'static str, T)> {
    let mut t = vec![
        ("model.embed_tokens", T::TokenEmbd),
        ("model.norm", T::OutputNorm),
        ("model.layers.{bid}.input_layernorm", T::AttnNorm),
        ("model.layers.{bid}.self_attn.q_proj", T::AttnQ),
        ("model.layers.{bid}.self_attn.k_proj", T::AttnK),
        ("model.layers.{bid}.self_attn.v_proj", T::AttnV),
        ("model.layers.{bid}.self_attn.o_proj", T::AttnOut),
        ("model.layers.{bid}.mlp.up_proj", T::FfnUp),
        ("model.layers.{bid}.mlp.down_proj", T::FfnDown),
        ("model.layers.{bid}.self_attn.qkv_proj", T::AttnQkv),
        ("model.layers.{bid}.mlp.gate_up_proj", T::FfnUp),
    ];
    // Gemma and Gemma 2 have no output matrix in llama.cpp (their head is the embedding).
    if !matches!(arch, "gemma" | "gemma2") {
        t.push(("lm_head", T::Output));
    }
    if arch == "phimoe" {
        // PhiMoE's router and its stacked experts (`PhiMoeModel`'s merged names).
        t.push(("model.layers.{bid}.block_sparse_moe.gate", T::FfnGateInp));
        t.push((
            "model.layers.{bid}.block_sparse_moe.experts.w1",
            T::FfnGateExps,
        ));
        t.push((
            "model.layers.{bid}.block_sparse_moe.experts.w2",
            T::FfnDownExps,
        ));
        t.push((
            "model.layers.{bid}.block_sparse_moe.experts.w3",
            T::FfnUpExps,
        ));
    }
    if arch == "granitemoe" {
        // Granite-MoE's router and its experts' down projections, stacked already (the gate
        // and up halves are split from `input_linear` in `llama.rs`).
        t.push((
            "model.layers.{bid}.block_sparse_moe.router.layer",
            T::FfnGateInp,
        ));
        t.push((
            "model.layers.{bid}.block_sparse_moe.output_linear",
            T::FfnDownExps,
        ));
        t.push((
            "model.layers.{bid}.shared_mlp.output_linear",
            T::FfnDownShexp,
        ));
    }
    if arch == "llama" {
        // Mixtral's router and its stacked experts (`LlamaModel`'s merged names).
        t.push(("model.layers.{bid}.block_sparse_moe.gate", T::FfnGateInp));
        t.push(("layers.{bid}.feed_forward.experts.w1", T::FfnGateExps));
        t.push(("layers.{bid}.feed_forward.experts.w2", T::FfnDownExps));
        t.push(("layers.{bid}.feed_forward.experts.w3", T::FfnUpExps));
    }
    if matches!(arch, "qwen2moe" | "qwen3moe" | "olmoe" | "gpt-oss") {
        // The stacked experts (`Qwen2MoeModel`'s merged names, gpt-oss' own).
        t.push(("model.layers.{bid}.mlp.experts.gate_proj", T::FfnGateExps));
        t.push(("model.layers.{bid}.mlp.experts.up_proj", T::FfnUpExps));
        t.push(("model.layers.{bid}.mlp.experts.down_proj", T::FfnDownExps));
    }
    if matches!(arch, "qwen2moe" | "qwen3moe" | "olmoe") {
        t.push(("model.layers.{bid}.mlp.gate", T::FfnGateInp));
    }
    if arch == "gpt-oss" {
        // The router, with its bias, and the attention sinks (`sinks.weight` after `filter`).
        t.push(("model.layers.{bid}.mlp.router", T::FfnGateInp));
        t.push(("model.layers.{bid}.self_attn.sinks", T::AttnSinks));
    }
    if arch == "deepseek2" {
        // Latent attention (the key and value parts of `kv_b_proj` are split in
        // `deepseek.rs`), the router with its score bias, the shared experts.
        for (hf, gguf) in [
            ("model.layers.{bid}.self_attn.q_a_proj", T::AttnQA),
            ("model.layers.{bid}.self_attn.q_a_layernorm", T::AttnQANorm),
            ("model.layers.{bid}.self_attn.q_b_proj", T::AttnQB),
            (
                "model.layers.{bid}.self_attn.kv_a_proj_with_mqa",
                T::AttnKvAMqa,
            ),
            (
                "model.layers.{bid}.self_attn.kv_a_layernorm",
                T::AttnKvANorm,
            ),
            ("model.layers.{bid}.self_attn.k_b_proj", T::AttnKB),
            ("model.layers.{bid}.self_attn.v_b_proj", T::AttnVB),
            ("model.layers.{bid}.mlp.gate", T::FfnGateInp),
            (
                "model.layers.{bid}.mlp.gate.e_score_correction",
                T::FfnExpProbsB,
            ),
            ("model.layers.{bid}.mlp.experts.gate_proj", T::FfnGateExps),
            ("model.layers.{bid}.mlp.experts.up_proj", T::FfnUpExps),
            ("model.layers.{bid}.mlp.experts.down_proj", T::FfnDownExps),
            (
                "model.layers.{bid}.mlp.shared_experts.gate_proj",
                T::FfnGateShexp,
            ),
            (
                "model.layers.{bid}.mlp.shared_experts.up_proj",
                T::FfnUpShexp,
            ),
            (
                "model.layers.{bid}.mlp.shared_experts.down_proj",
                T::FfnDownShexp,
            ),
        ] {
            t.push((hf, gguf));
        }
    }
    if arch == "qwen2moe" {
        t.push((
            "model.layers.{bid}.mlp.shared_expert_gate",
            T::FfnGateInpShexp,
        ));
        t.push((
            "model.layers.{bid}.mlp.shared_expert.gate_proj",
            T::FfnGateShexp,
        ));
        t.push((
            "model.layers.{bid}.mlp.shared_expert.up_proj",
            T::FfnUpShexp,
        ));
        t.push((
            "model.layers.{bid}.mlp.shared_expert.down_proj",
            T::FfnDownShexp,
        ));
    }
    // Phi-3 has no separate gate.
    if arch != "phi3" {
        t.push(("model.layers.{bid}.mlp.gate_proj", T::FfnGate));
    }
    if matches!(arch, "qwen3" | "gemma3" | "qwen3moe" | "olmoe") {
        t.push(("model.layers.{bid}.self_attn.q_norm", T::AttnQNorm));
        t.push(("model.layers.{bid}.self_attn.k_norm", T::AttnKNorm));
    }
    if matches!(arch, "gemma2" | "gemma3") {
        // Norms around both blocks: the post-attention norm is its own tensor.
        t.push((
            "model.layers.{bid}.post_attention_layernorm",
            T::AttnPostNorm,
        ));
        t.push(("model.layers.{bid}.pre_feedforward_layernorm", T::FfnNorm));
        t.push((
            "model.layers.{bid}.post_feedforward_layernorm",
            T::FfnPostNorm,
        ));
    } else if arch == "gpt-oss" {
        // gpt-oss' norm before its experts is llama.cpp's post-attention norm.
        t.push((
            "model.layers.{bid}.post_attention_layernorm",
            T::AttnPostNorm,
        ));
    } else {
        t.push(("model.layers.{bid}.post_attention_layernorm", T::FfnNorm));
    }
    t
}

/// Maps a decoder tensor name or fails naming it.
pub(crate) fn map_decoder(arch: &str, name: &str, bid: Option<u32>) -> Result<String> {
    map_by_table(name, bid, &decoder_table(arch)).ok_or_else(|| {
        crate::Error::Unsupported(format!("cannot map tensor '{name}' of a {arch} model"))
    })
}

/// The pooling of a sentence-transformers checkpoint (`modules.json` naming a `Pooling`
/// module whose `config.json` says which): `_try_set_pooling_type`.
pub(crate) fn pooling_type(ctx: &Ctx<'_>) -> Result<Option<u32>> {
    use crate::Error;
    use serde_json::Value;
    const MEAN: u32 = 1;
    const CLS: u32 = 2;
    const LAST: u32 = 3;
    let dir = ctx.ckpt.dir();
    let reads = ctx.ckpt.reads();
    let Some(modules) = reads.json_if_exists(&dir.join("modules.json"))? else {
        return Ok(None);
    };
    let path = modules.as_array().and_then(|list| {
        list.iter().find_map(|m| {
            m.get("type")
                .and_then(Value::as_str)
                .filter(|t| t.ends_with("Pooling"))
                .and_then(|_| m.get("path").and_then(Value::as_str))
        })
    });
    let Some(path) = path else {
        return Ok(None);
    };
    if path.contains("..") || path.starts_with('/') {
        return Err(Error::Unsupported(format!(
            "{}: the pooling module's path '{path}' leaves the checkpoint",
            dir.join("modules.json").display()
        )));
    }
    let config_path = dir.join(path).join("config.json");
    let pooling = reads
        .json_if_exists(&config_path)?
        .ok_or_else(|| Error::Unsupported(format!("{}: no such file", config_path.display())))?;
    let on = |k: &str| super::special_vocab::truthy(pooling.get(k));
    let ty = if on("pooling_mode_mean_tokens") {
        MEAN
    } else if on("pooling_mode_cls_token") {
        CLS
    } else if on("pooling_mode_lasttoken") {
        LAST
    } else {
        match pooling.get("pooling_mode").and_then(Value::as_str) {
            Some("mean") => MEAN,
            Some("cls") => CLS,
            Some("lasttoken") => LAST,
            _ => {
                return Err(Error::Unsupported(format!(
                    "{}: only mean, CLS and last-token pooling are supported",
                    config_path.display()
                )))
            }
        }
    };
    Ok(Some(ty))
}
