//! Llama-family decoders: Llama 1-3, Mistral and Mixtral (`llama`, with the Q/K rows permuted
//! from Hugging Face's rotary layout back to GGML's; Mixtral's experts stacked per layer as
//! the reference's `LlamaModel` stacks them), Qwen 2 and Qwen 3 (`qwen2`, `qwen3`, as they
//! are).

use gguf_format::tensor_names::TensorName as T;
use gguf_format::GgufBuilder;
use serde_json::Value;

use super::{
    expert_matrix, map_decoder, pooling_type, Ctx, ExpertLayout, ExpertSlice, Generated, HfArch,
    Mapped, Transform, BLOCK_SPARSE_EXPERTS,
};
use crate::error::{Error, Result};
use crate::hf::special_vocab::SpecialVocab;
use crate::hf::vocab::{write_gpt2, write_sentencepiece};

/// A llama-like architecture.
pub(crate) struct LlamaLike {
    arch: &'static str,
}

pub(crate) const LLAMA: LlamaLike = LlamaLike { arch: "llama" };
pub(crate) const QWEN2: LlamaLike = LlamaLike { arch: "qwen2" };
pub(crate) const QWEN3: LlamaLike = LlamaLike { arch: "qwen3" };
pub(crate) const GRANITE: LlamaLike = LlamaLike { arch: "granite" };
pub(crate) const GRANITE_MOE: LlamaLike = LlamaLike { arch: "granitemoe" };

impl LlamaLike {
    /// The reference's `LlamaModel` and its subclasses (Granite's): Q/K permuted, the
    /// vocabulary and RoPE keys of llama.
    fn llama_based(&self) -> bool {
        matches!(self.arch, "llama" | "granite" | "granitemoe")
    }
}

fn count(ctx: &Ctx<'_>, keys: &[&str]) -> Result<u32> {
    ctx.hparams.require_u32(keys)
}

/// Whether `tokenizer.json` is the byte-fallback BPE of Llama 2 style checkpoints without a
/// `tokenizer.model` (the reference's `LlamaHfVocab` path, not written here).
fn is_llama_hf_tokenizer(ctx: &Ctx<'_>) -> Result<bool> {
    let Some(json) = ctx
        .ckpt
        .reads()
        .tokenizer_json(&ctx.ckpt.dir().join("tokenizer.json"))?
    else {
        return Ok(false);
    };
    let model = json.get("model");
    let is_bpe = model.and_then(|m| m.get("type")).and_then(Value::as_str) == Some("BPE");
    let byte_fallback = model
        .and_then(|m| m.get("byte_fallback"))
        .and_then(Value::as_bool);
    let ignore_merges = model
        .and_then(|m| m.get("ignore_merges"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let is_llama3 = is_bpe && ignore_merges && !byte_fallback.unwrap_or(true);
    let sequence_decoder = json
        .get("decoder")
        .and_then(|d| d.get("type"))
        .and_then(Value::as_str)
        == Some("Sequence");
    Ok(!is_llama3 && is_bpe && byte_fallback == Some(true) && sequence_decoder)
}

impl HfArch for LlamaLike {
    fn gguf_arch(&self) -> &'static str {
        self.arch
    }

    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        if self.llama_based() {
            let k = |key: &str| format!("{}.{key}", self.arch);
            b.set(&k("vocab_size"), count(ctx, &["vocab_size"])?);
            let rope_dim = match ctx.hparams.get("head_dim").filter(|v| !v.is_null()) {
                Some(_) => count(ctx, &["head_dim"])?,
                None => {
                    let heads = count(ctx, &["num_attention_heads"])?;
                    if heads == 0 {
                        return Err(Error::Unsupported(
                            "config.json: num_attention_heads is 0".into(),
                        ));
                    }
                    count(ctx, &["hidden_size"])? / heads
                }
            };
            b.set(&k("rope.dimension_count"), rope_dim);
            if self.arch != "llama" {
                // GraniteModel's multipliers, as `_scale` keys, when set and not zero.
                for (json, key) in [
                    ("attention_multiplier", "attention.scale"),
                    ("embedding_multiplier", "embedding_scale"),
                    ("residual_multiplier", "residual_scale"),
                    ("logits_scaling", "logit_scale"),
                ] {
                    if let Some(v) = ctx
                        .hparams
                        .get(json)
                        .and_then(Value::as_f64)
                        .filter(|v| *v != 0.0)
                    {
                        b.set(&k(key), v as f32);
                    }
                }
            }
            if self.arch == "granitemoe" {
                let shared = ctx
                    .hparams
                    .get("shared_intermediate_size")
                    .and_then(Value::as_u64);
                if let Some(n) = shared.filter(|&n| n != 0) {
                    let n = u32::try_from(n).map_err(|_| {
                        Error::Unsupported(
                            "config.json: shared_intermediate_size is too large".into(),
                        )
                    })?;
                    b.set(&k("expert_shared_feed_forward_length"), n);
                }
            }
        } else if let Some(pooling) = pooling_type(ctx)? {
            b.set(&format!("{}.pooling_type", self.arch), pooling);
        }
        Ok(())
    }

    fn vocab(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        if !self.llama_based() {
            if !write_sentencepiece(ctx, b)? {
                write_gpt2(ctx, b)?;
            }
            return Ok(());
        }
        if let Some(config) = ctx.ckpt.tokenizer_config()? {
            if let Some(Value::Bool(add)) = config.get("add_prefix_space") {
                b.set("tokenizer.ggml.add_space_prefix", *add);
            }
        }
        if !write_sentencepiece(ctx, b)? {
            if is_llama_hf_tokenizer(ctx)? {
                return Err(Error::Unsupported(format!(
                    "{}: a byte-fallback BPE tokenizer.json without tokenizer.model (Llama 2 \
                     style) is not converted yet; add the checkpoint's tokenizer.model",
                    ctx.ckpt.dir().display()
                )));
            }
            write_gpt2(ctx, b)?;
        }
        let vocab_size = ctx.hparams.get("vocab_size").and_then(Value::as_u64);
        match vocab_size.unwrap_or(32000) {
            // CodeLlama's infill tokens.
            32016 => {
                let mut special = SpecialVocab::load(
                    ctx.ckpt,
                    false,
                    &["prefix", "suffix", "middle", "eot"],
                    None,
                )?;
                for (typ, id) in [
                    ("prefix", 32007),
                    ("suffix", 32008),
                    ("middle", 32009),
                    ("eot", 32010),
                ] {
                    special.set_special_token(typ, Some(&Value::from(id)))?;
                }
                special.add_to_gguf(b)?;
            }
            // Granite's small models (and SmolLM's vocabulary size).
            49152 => {
                b.set("tokenizer.ggml.add_bos_token", false);
            }
            _ => {}
        }
        Ok(())
    }

    fn filter(&self, name: &str) -> Option<String> {
        Some(if self.llama_based() {
            name.replace("text_model.", "")
        } else {
            name.to_string()
        })
    }

    fn generated(&self, ctx: &Ctx<'_>, _b: &mut GgufBuilder<'_>) -> Result<Vec<Generated>> {
        if !self.llama_based() {
            return Ok(Vec::new());
        }
        let rope = ctx.hparams.rope();
        let params = match rope.get("full_attention") {
            Some(Value::Object(o)) => o,
            _ => rope,
        };
        let is_llama3 = params
            .get("rope_type")
            .and_then(Value::as_str)
            .is_some_and(|t| t.eq_ignore_ascii_case("llama3"));
        if !is_llama3 {
            return Ok(Vec::new());
        }
        let num = |k: &str, default: f64| params.get(k).and_then(Value::as_f64).unwrap_or(default);
        let dim = match ctx.hparams.get("head_dim").filter(|v| !v.is_null()) {
            Some(_) => count(ctx, &["head_dim"])?,
            None => count(ctx, &["hidden_size"])? / count(ctx, &["num_attention_heads"])?.max(1),
        };
        if dim > 1 << 16 {
            return Err(Error::Unsupported(format!(
                "config.json: a head dimension of {dim} is not a real model's"
            )));
        }
        let scaling = [
            ("factor", 8.0),
            ("low_freq_factor", 1.0),
            ("high_freq_factor", 4.0),
            ("original_max_position_embeddings", 8192.0),
        ]
        .map(|(key, default)| (key, num(key, default)));
        // Each divides a wavelength or a frequency: a zero or negative one makes the factors
        // zero, negative or infinite (the engine refuses such a `rope_freqs`; this names the key).
        if let Some((key, value)) = scaling.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
            return Err(Error::Unsupported(format!(
                "config.json: {}.{key} is {value}; Llama 3 RoPE scaling needs a finite number \
                 above zero",
                ctx.hparams.rope_key()
            )));
        }
        let [factor, low_freq_factor, high_freq_factor, original] = scaling.map(|(_, v)| v);
        Ok(vec![Generated {
            name: T::RopeFreqs.weight().into(),
            values: llama3_rope_factors(
                num("rope_theta", 10000.0),
                dim as usize,
                factor,
                low_freq_factor,
                high_freq_factor,
                original,
            ),
        }])
    }

    fn converts_experts(&self) -> bool {
        matches!(self.arch, "llama" | "granitemoe")
    }

    /// Mixtral's `model.layers.{bid}.block_sparse_moe.experts.{e}.{w1,w2,w3}.weight`, stacked
    /// into `layers.{bid}.feed_forward.experts.{w}.weight` in the order w1, w2, w3.
    fn expert_slice(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        bid: Option<u32>,
    ) -> Result<Option<ExpertSlice>> {
        if self.arch != "llama" {
            return Ok(None);
        }
        let name = match ctx.hf_arch {
            "LlamaModel" => format!("model.{name}"),
            _ => name.to_string(),
        };
        // LlamaModel counts the experts by `num_local_experts` only.
        let layout = ExpertLayout {
            count_keys: &["num_local_experts"],
            stacked: |b, w| format!("layers.{b}.feed_forward.experts.{w}.weight"),
            ..BLOCK_SPARSE_EXPERTS
        };
        expert_matrix(ctx, &name, bid, &layout)
    }

    fn map(&self, ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>> {
        let mut name = name.to_string();
        if matches!(ctx.hf_arch, "LlamaModel" | "Qwen2Model") && !name.starts_with("layers.") {
            name = format!("model.{name}");
        }
        if let (Some(b), "granitemoe") = (bid, self.arch) {
            if let Some(split) = granite_fused_split(ctx, &name, b)? {
                return Ok(split);
            }
        }
        let mut transform = Transform::None;
        if self.llama_based() {
            let heads = count(ctx, &["n_heads", "num_attention_heads"])? as usize;
            let kv_heads = count(ctx, &["n_kv_heads", "num_key_value_heads"])? as usize;
            if name.ends_with("q_proj.weight") || name.ends_with("q_proj.bias") {
                transform = Transform::PermuteRows { heads };
            } else if name.ends_with("k_proj.weight") || name.ends_with("k_proj.bias") {
                transform = Transform::PermuteRows { heads: kv_heads };
            }
        }
        Ok(vec![Mapped {
            name: map_decoder(self.arch, &name, bid)?,
            transform,
        }])
    }
}

/// Granite-MoE's fused gate-and-up tensors of block `b`, split as `GraniteMoeModel` splits them
/// (`data.split(ffn_dim, dim=-2)`: the gate first): the experts' `input_linear` into
/// `ffn_gate_exps` and `ffn_up_exps`, the shared MLP's into `ffn_{gate,up}_shexp` (or the dense
/// `ffn_gate`/`ffn_up` without experts).
fn granite_fused_split(ctx: &Ctx<'_>, name: &str, b: u32) -> Result<Option<Vec<Mapped>>> {
    let has_experts = ctx
        .hparams
        .get("num_local_experts")
        .and_then(Value::as_u64)
        .is_some_and(|n| n != 0);
    let (width_key, gate, up) = if name
        == format!("model.layers.{b}.block_sparse_moe.input_linear.weight")
    {
        ("intermediate_size", T::FfnGateExps, T::FfnUpExps)
    } else if name == format!("model.layers.{b}.shared_mlp.input_linear.weight") {
        match has_experts {
            true => ("shared_intermediate_size", T::FfnGateShexp, T::FfnUpShexp),
            false => ("shared_intermediate_size", T::FfnGate, T::FfnUp),
        }
    } else if !has_experts && name == format!("model.layers.{b}.shared_mlp.output_linear.weight") {
        let (name, transform) = (T::FfnDown.block_weight(b), Transform::None);
        return Ok(Some(vec![Mapped { name, transform }]));
    } else {
        return Ok(None);
    };
    let n = count(ctx, &[width_key])? as usize;
    let half = |t: T, first| Mapped {
        name: t.block_weight(b),
        transform: Transform::SliceRows {
            period: 2 * n,
            first,
            n,
        },
    };
    Ok(Some(vec![half(gate, 0), half(up, n)]))
}

/// Llama 3's per-frequency RoPE scaling factors (`rope_freqs.weight`), in f32 arithmetic as
/// the reference computes them with torch.
fn llama3_rope_factors(
    base: f64,
    dim: usize,
    factor: f64,
    low_freq_factor: f64,
    high_freq_factor: f64,
    old_context_len: f64,
) -> Vec<f32> {
    let low_freq_wavelen = old_context_len / low_freq_factor;
    let high_freq_wavelen = old_context_len / high_freq_factor;
    (0..dim)
        .step_by(2)
        .map(|i| {
            let exponent = i as f32 / dim as f32;
            let freq = 1.0f32 / (base as f32).powf(exponent);
            let wavelen = (2.0 * std::f64::consts::PI) as f32 / freq;
            if (wavelen as f64) < high_freq_wavelen {
                1.0
            } else if (wavelen as f64) > low_freq_wavelen {
                factor as f32
            } else {
                let smooth = ((old_context_len as f32) / wavelen - low_freq_factor as f32)
                    / (high_freq_factor - low_freq_factor) as f32;
                1.0 / ((1.0 - smooth) / factor as f32 + smooth)
            }
        })
        .collect()
}
