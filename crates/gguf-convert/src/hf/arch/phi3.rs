//! Phi-3 decoders: fused `qkv_proj` and `gate_up_proj` written as they are, their own key
//! order, a SentencePiece vocabulary with Phi-3's rules for added tokens (or a GPT-2 one), and
//! for long-context models the RoPE factor tables as tensors. PhiMoE (`phimoe`) is the same
//! conversion with separate Q/K/V, biases, and its experts stacked per layer (w1, w2, w3) as
//! the reference's `PhiMoeModel` stacks them.

use gguf_format::tensor_names::TensorName as T;
use gguf_format::GgufBuilder;
use serde_json::Value;

use super::{
    expert_matrix, map_decoder, Ctx, ExpertSlice, Generated, HfArch, Mapped, Transform,
    BLOCK_SPARSE_EXPERTS,
};
use crate::error::{Error, Result};
use crate::hf::vocab::{write_gpt2, write_sentencepiece_with, SpmRules};

/// Phi-3 or PhiMoE.
pub(crate) struct Phi3 {
    arch: &'static str,
}

pub(crate) const PHI3: Phi3 = Phi3 { arch: "phi3" };
pub(crate) const PHIMOE: Phi3 = Phi3 { arch: "phimoe" };

fn rope_number(ctx: &Ctx<'_>, key: &str) -> Result<f64> {
    let rope = ctx.hparams.rope();
    let params = match rope.get("full_attention") {
        Some(Value::Object(o)) => o,
        _ => rope,
    };
    params
        .get(key)
        .or_else(|| rope.get(key))
        .and_then(Value::as_f64)
        .ok_or_else(|| Error::Unsupported(format!("config.json: {key} is missing for Phi-3")))
}

/// (embedding length, heads, rotary dimensions).
fn dims(ctx: &Ctx<'_>) -> Result<(u32, u32, u32)> {
    let h = &ctx.hparams;
    let n_embd = h.require_u32(&["hidden_size", "n_embd"])?;
    let n_head = h.require_u32(&["num_attention_heads", "n_head"])?;
    if n_head == 0 {
        return Err(Error::Unsupported(
            "config.json: num_attention_heads is 0".into(),
        ));
    }
    let pct = h
        .rope()
        .get("partial_rotary_factor")
        .and_then(Value::as_f64)
        .unwrap_or(1.0);
    Ok((n_embd, n_head, ((pct * n_embd as f64) as u32) / n_head))
}

impl HfArch for Phi3 {
    fn gguf_arch(&self) -> &'static str {
        self.arch
    }

    fn converts_experts(&self) -> bool {
        self.arch == "phimoe"
    }

    /// `model.layers.{bid}.block_sparse_moe.experts.{e}.{w1,w2,w3}.weight`, stacked into
    /// `model.layers.{bid}.block_sparse_moe.experts.{w}.weight` in the order w1, w2, w3.
    fn expert_slice(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        bid: Option<u32>,
    ) -> Result<Option<ExpertSlice>> {
        if self.arch != "phimoe" {
            return Ok(None);
        }
        expert_matrix(ctx, name, bid, &BLOCK_SPARSE_EXPERTS)
    }

    fn uses_shared_parameters(&self) -> bool {
        false
    }

    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        let k = |key: &str| format!("{}.{key}", self.arch);
        let h = &ctx.hparams;
        let (n_embd, n_head, rope_dims) = dims(ctx)?;
        b.set(
            &k("context_length"),
            h.require_u32(&["n_positions", "max_position_embeddings"])?,
        );
        b.set(
            &k("rope.scaling.original_context_length"),
            rope_number(ctx, "original_max_position_embeddings")? as u32,
        );
        b.set(&k("embedding_length"), n_embd);
        b.set(
            &k("feed_forward_length"),
            h.require_u32(&["intermediate_size"])?,
        );
        b.set(&k("block_count"), ctx.block_count);
        b.set(&k("attention.head_count"), n_head);
        b.set(
            &k("attention.head_count_kv"),
            h.require_u32(&["num_key_value_heads", "n_head_kv"])?,
        );
        let eps = h
            .find_f64(&["rms_norm_eps"])?
            .ok_or_else(|| Error::Unsupported("config.json: rms_norm_eps is missing".into()))?;
        b.set(&k("attention.layer_norm_rms_epsilon"), eps as f32);
        b.set(&k("rope.dimension_count"), rope_dims);
        b.set(&k("rope.freq_base"), rope_number(ctx, "rope_theta")? as f32);
        b.set("general.file_type", ctx.file_type);
        let window = match h.get("sliding_window") {
            None | Some(Value::Null) => 0,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    Error::Unsupported(format!("config.json: sliding_window is {v}, not a count"))
                })?,
        };
        b.set(&k("attention.sliding_window"), window);
        if self.arch == "phimoe" {
            let used = ["num_experts_per_tok", "num_experts_per_token"];
            b.set("phimoe.expert_used_count", h.require_u32(&used)?);
            let count = ["num_local_experts", "num_experts"];
            b.set("phimoe.expert_count", h.require_u32(&count)?);
        }
        Ok(())
    }

    fn vocab(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        if let Some(config) = ctx.ckpt.tokenizer_config()? {
            if config.get("tokenizer_class").and_then(Value::as_str) == Some("GPT2Tokenizer") {
                return write_gpt2(ctx, b);
            }
        }
        if !write_sentencepiece_with(ctx, b, SpmRules::Phi3)? {
            return Err(Error::Unsupported(format!(
                "{}: no tokenizer.model (Phi-3's SentencePiece vocabulary is read from it)",
                ctx.ckpt.dir().display()
            )));
        }
        Ok(())
    }

    fn generated(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<Vec<Generated>> {
        let k = |key: &str| format!("{}.{key}", self.arch);
        let rope = ctx.hparams.rope();
        let factors = |k: &str| -> Result<Option<Vec<f32>>> {
            match rope.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::Array(a)) if a.is_empty() => Ok(None),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|v| v.as_f64().map(|x| x as f32))
                    .collect::<Option<Vec<_>>>()
                    .map(Some)
                    .ok_or_else(|| {
                        Error::Unsupported(format!(
                            "config.json: rope_scaling.{k} has a non-number"
                        ))
                    }),
                Some(v) => Err(Error::Unsupported(format!(
                    "config.json: rope_scaling.{k} is {v}"
                ))),
            }
        };
        let Some(long) = factors("long_factor")? else {
            return Ok(Vec::new());
        };
        let (_, _, rope_dims) = dims(ctx)?;
        let max_pos = ctx
            .hparams
            .require_u32(&["n_positions", "max_position_embeddings"])? as f64;
        let orig = rope_number(ctx, "original_max_position_embeddings")?;
        let scale = max_pos / orig;
        let kind = rope
            .get("rope_type")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_ascii_lowercase();
        let attn_factor = match kind.as_str() {
            "su" | "longrope" if scale > 1.0 => (1.0 + scale.ln() / orig.ln()).sqrt(),
            "yarn" if scale > 1.0 => 0.1 * scale.ln() + 1.0,
            "su" | "longrope" | "yarn" => 1.0,
            "" => {
                return Err(Error::Unsupported(
                    "config.json: rope_scaling has long_factor but no type".into(),
                ))
            }
            other => {
                return Err(Error::Unsupported(format!(
                    "config.json: rope scaling type {other} is not supported"
                )))
            }
        };
        b.set(&k("rope.scaling.attn_factor"), attn_factor as f32);
        let short = factors("short_factor")?.ok_or_else(|| {
            Error::Unsupported(
                "config.json: rope_scaling has long_factor but no short_factor".into(),
            )
        })?;
        if long.len() != short.len() || long.len() * 2 != rope_dims as usize {
            return Err(Error::Unsupported(format!(
                "config.json: rope long and short factors must have {} entries each, not {} and {}",
                rope_dims / 2,
                long.len(),
                short.len()
            )));
        }
        Ok(vec![
            Generated {
                name: T::RopeFactorsLong.weight().into(),
                values: long,
            },
            Generated {
                name: T::RopeFactorsShort.weight().into(),
                values: short,
            },
        ])
    }

    fn map(&self, _ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>> {
        Ok(vec![Mapped {
            name: map_decoder(self.arch, name, bid)?,
            transform: Transform::None,
        }])
    }
}
