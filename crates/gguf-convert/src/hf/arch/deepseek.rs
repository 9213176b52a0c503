//! DeepSeek-V2 and V3 (`deepseek2`; V3's sigmoid scores, score bias and expert groups come
//! through the shared keys): multi-head latent attention written as llama.cpp absorbs it, each
//! layer's `kv_b_proj` split into the per-head key part (transposed, `attn_k_b`) and value part
//! (`attn_v_b`); one KV head (the latent is shared); the leading dense layers, shared experts and
//! routing keys of the reference's `DeepseekV2Model`; the experts stacked as Qwen2-MoE's; a
//! GPT-2 vocabulary.

use gguf_format::GgufBuilder;
use serde_json::Value;

use super::{expert_matrix, map_decoder, Ctx, ExpertSlice, HfArch, Mapped, Transform, MLP_EXPERTS};
use crate::error::Result;
use crate::hf::vocab::write_gpt2;

/// DeepSeek-V2.
pub(crate) struct Deepseek2;

pub(crate) const DEEPSEEK2: Deepseek2 = Deepseek2;

/// Whether layer `bid` is past `num_hidden_layers`: DeepSeek-V3's multi-token-prediction
/// layers, which the reference leaves out (`skip_mtp`).
fn is_next_token_layer(ctx: &Ctx<'_>, bid: Option<u32>) -> bool {
    bid.is_some_and(|b| b >= ctx.block_count)
}

impl HfArch for Deepseek2 {
    fn gguf_arch(&self) -> &'static str {
        "deepseek2"
    }

    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        let k = |key: &str| format!("deepseek2.{key}");
        let h = &ctx.hparams;
        // The latent is one KV head: the reference sets num_key_value_heads to 1 before the
        // shared keys are written, so the key keeps its place.
        b.set(&k("attention.head_count_kv"), 1u32);
        let experts = h.find_u32(&["n_routed_experts"])?;
        let dense_default = if experts.is_some() {
            0
        } else {
            ctx.block_count
        };
        b.set(
            &k("leading_dense_block_count"),
            h.find_u32(&["first_k_dense_replace"])?
                .unwrap_or(dense_default),
        );
        b.set(&k("vocab_size"), h.require_u32(&["vocab_size"])?);
        if let Some(rank) = h.find_u32(&["q_lora_rank"])? {
            b.set(&k("attention.q_lora_rank"), rank);
        }
        let kv_lora_rank = h.find_u32(&["kv_lora_rank"])?.unwrap_or(512);
        let rope = h.require_u32(&["qk_rope_head_dim"])?;
        let nope = h.require_u32(&["qk_nope_head_dim"])?;
        let value = h.require_u32(&["v_head_dim"])?;
        b.set(&k("attention.kv_lora_rank"), kv_lora_rank);
        b.set(&k("attention.key_length"), kv_lora_rank + rope);
        b.set(&k("attention.value_length"), kv_lora_rank);
        b.set(&k("attention.key_length_mla"), nope + rope);
        b.set(&k("attention.value_length_mla"), value);
        b.set(
            &k("expert_feed_forward_length"),
            h.require_u32(&["moe_intermediate_size", "intermediate_size"])?,
        );
        if let Some(n) = experts {
            b.set(&k("expert_count"), n);
        }
        b.set(
            &k("expert_shared_count"),
            h.find_u32(&["n_shared_experts"])?.unwrap_or(0),
        );
        if let Some(scale) = h.get("routed_scaling_factor").and_then(Value::as_f64) {
            b.set(&k("expert_weights_scale"), scale as f32);
        }
        if h.get("norm_topk_prob") == Some(&Value::Bool(true)) {
            b.set(&k("expert_weights_norm"), true);
        }
        b.set(&k("rope.dimension_count"), rope);
        if let Some(mscale) = h.rope().get("mscale_all_dim").and_then(Value::as_f64) {
            // As the script writes it (0.1 · mscale_all_dim, in f64 before the f32 key).
            b.set(
                &k("rope.scaling.yarn_log_multiplier"),
                (0.1 * mscale) as f32,
            );
        }
        Ok(())
    }

    fn vocab(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        write_gpt2(ctx, b)
    }

    fn converts_experts(&self) -> bool {
        true
    }

    fn expert_slice(
        &self,
        ctx: &Ctx<'_>,
        name: &str,
        bid: Option<u32>,
    ) -> Result<Option<ExpertSlice>> {
        if is_next_token_layer(ctx, bid) {
            return Ok(None);
        }
        let layout = super::ExpertLayout {
            count_keys: &["n_routed_experts"],
            ..MLP_EXPERTS
        };
        expert_matrix(ctx, name, bid, &layout)
    }

    fn map(&self, ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>> {
        if is_next_token_layer(ctx, bid) {
            return Ok(Vec::new());
        }
        let tied = ctx.hparams.get("tie_word_embeddings") == Some(&Value::Bool(true));
        if tied && matches!(name, "lm_head.weight" | "model.lm_head.weight") {
            return Ok(Vec::new());
        }
        if let (Some(b), Some(_)) = (bid, name.strip_suffix("self_attn.kv_b_proj.weight")) {
            // Split per KV head of the checkpoint (before the latent's one head).
            let nope = ctx.hparams.require_u32(&["qk_nope_head_dim"])? as usize;
            let value = ctx.hparams.require_u32(&["v_head_dim"])? as usize;
            let part = |stem: &str, first, n, transpose| -> Result<Mapped> {
                Ok(Mapped {
                    name: map_decoder(
                        "deepseek2",
                        &format!("model.layers.{b}.self_attn.{stem}.weight"),
                        bid,
                    )?,
                    transform: Transform::HeadRows {
                        period: nope + value,
                        first,
                        n,
                        transpose,
                    },
                })
            };
            return Ok(vec![
                part("k_b_proj", 0, nope, true)?,
                part("v_b_proj", nope, value, false)?,
            ]);
        }
        Ok(vec![Mapped {
            name: map_decoder("deepseek2", name, bid)?,
            transform: Transform::None,
        }])
    }
}
