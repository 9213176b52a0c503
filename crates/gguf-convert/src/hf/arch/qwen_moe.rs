//! The mixtures of experts with Qwen2-MoE's layout: Qwen2-MoE (`qwen2moe`, with a shared
//! expert and its sigmoid gate), Qwen3-MoE (`qwen3moe`, per-head Q/K norms) and OLMoE
//! (`olmoe`, whole-projection Q/K norms). Each layer's `mlp.experts.{e}.{down,gate,up}_proj`
//! are stacked as the reference's `Qwen2MoeModel` (and `OlmoeModel`, its copy) stacks them; the
//! vocabulary is GPT-2's only (`_set_vocab_gpt2`).

use gguf_format::GgufBuilder;

use super::{expert_matrix, map_decoder, Ctx, ExpertSlice, HfArch, Mapped, Transform, MLP_EXPERTS};
use crate::error::Result;
use crate::hf::vocab::write_gpt2;

/// One of the three.
pub(crate) struct QwenMoe {
    arch: &'static str,
}

pub(crate) const QWEN2MOE: QwenMoe = QwenMoe { arch: "qwen2moe" };
pub(crate) const QWEN3MOE: QwenMoe = QwenMoe { arch: "qwen3moe" };
pub(crate) const OLMOE: QwenMoe = QwenMoe { arch: "olmoe" };

impl HfArch for QwenMoe {
    fn gguf_arch(&self) -> &'static str {
        self.arch
    }

    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        let k = |key: &str| format!("{}.{key}", self.arch);
        if self.arch == "olmoe" {
            // `OlmoeModel` writes OLMoE's epsilon whatever config.json says.
            b.set(&k("attention.layer_norm_rms_epsilon"), 1e-5f32);
            return Ok(());
        }
        for (json, key) in [
            ("moe_intermediate_size", "expert_feed_forward_length"),
            (
                "shared_expert_intermediate_size",
                "expert_shared_feed_forward_length",
            ),
        ] {
            if let Some(n) = ctx.hparams.find_u32(&[json])? {
                b.set(&k(key), n);
            }
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
        expert_matrix(ctx, name, bid, &MLP_EXPERTS)
    }

    fn map(&self, _ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>> {
        Ok(vec![Mapped {
            name: map_decoder(self.arch, name, bid)?,
            transform: Transform::None,
        }])
    }
}
