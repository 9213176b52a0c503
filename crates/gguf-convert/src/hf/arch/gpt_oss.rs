//! gpt-oss (`gpt-oss`): the experts as its checkpoints ship them, MXFP4 blocks, repacked into
//! ggml's `block_mxfp4` without requantizing (the fused gate/up rows split: gate even, up odd),
//! as the reference's `GptOssModel` writes them before the other tensors; attention sinks, the
//! router's and experts' biases, the sliding window; a GPT-2 vocabulary.

use gguf_format::GgufBuilder;

use super::{map_decoder, Ctx, HfArch, Mapped, Packed, Transform};
use crate::error::{Error, Result};
use crate::hf::vocab::write_gpt2;

/// gpt-oss.
pub(crate) struct GptOss;

pub(crate) const GPT_OSS: GptOss = GptOss;

impl HfArch for GptOss {
    fn gguf_arch(&self) -> &'static str {
        "gpt-oss"
    }

    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        b.set(
            "gpt-oss.attention.sliding_window",
            ctx.hparams.require_u32(&["sliding_window"])?,
        );
        b.set(
            "gpt-oss.expert_feed_forward_length",
            ctx.hparams.require_u32(&["intermediate_size"])?,
        );
        Ok(())
    }

    fn vocab(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        write_gpt2(ctx, b)
    }

    fn filter(&self, name: &str) -> Option<String> {
        Some(match name.contains("sinks") {
            true => format!("{name}.weight"),
            false => name.to_string(),
        })
    }

    fn converts_experts(&self) -> bool {
        true
    }

    /// At each `_scales` tensor, the MXFP4 matrices it and its `_blocks` make.
    fn packed(&self, _ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Packed>> {
        let Some(stem) = name.strip_suffix("_scales") else {
            return Ok(Vec::new());
        };
        let blocks = format!("{stem}_blocks");
        let one = |to: &str, period, first| -> Result<Packed> {
            Ok(Packed {
                name: map_decoder("gpt-oss", &format!("{to}.weight"), bid)?,
                blocks: blocks.clone(),
                scales: name.to_string(),
                period,
                first,
            })
        };
        if let Some(base) = stem.strip_suffix("gate_up_proj") {
            Ok(vec![
                one(&format!("{base}gate_proj"), 2, 0)?,
                one(&format!("{base}up_proj"), 2, 1)?,
            ])
        } else {
            Ok(vec![one(stem, 1, 0)?])
        }
    }

    fn map(&self, _ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>> {
        if name.ends_with("_blocks") || name.ends_with("_scales") {
            // Written by `packed`.
            return Ok(Vec::new());
        }
        let plain = |n: String| -> Result<Vec<Mapped>> {
            Ok(vec![Mapped {
                name: map_decoder("gpt-oss", &n, bid)?,
                transform: Transform::None,
            }])
        };
        if let Some(stem) = name.strip_suffix("gate_up_proj_bias") {
            // Gate and up interleaved: even and odd columns.
            let half = |to: &str, first| -> Result<Mapped> {
                Ok(Mapped {
                    name: map_decoder("gpt-oss", &format!("{stem}{to}.bias"), bid)?,
                    transform: Transform::EveryOther { first },
                })
            };
            return Ok(vec![half("gate_proj", 0)?, half("up_proj", 1)?]);
        }
        if let Some(stem) = name.strip_suffix("down_proj_bias") {
            return plain(format!("{stem}down_proj.bias"));
        }
        if name.ends_with("experts.gate_up_proj") || name.ends_with("experts.down_proj") {
            return Err(Error::Unsupported(format!(
                "tensor '{name}': gpt-oss experts that are not MXFP4 blocks (a dequantized \
                 checkpoint) are not converted yet"
            )));
        }
        plain(name.to_string())
    }
}
