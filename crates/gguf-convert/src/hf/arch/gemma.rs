//! Gemma, Gemma 2 and Gemma 3 decoders: their RMS norm weights are stored as offsets from one
//! and written plus one; Gemma and Gemma 2 drop `lm_head` (the head is the embedding); Gemma 3
//! cuts its embedding to the real vocabulary.

use gguf_format::GgufBuilder;
use serde_json::Value;

use super::{map_decoder, Ctx, HfArch, Mapped, Transform};
use crate::error::{Error, Result};
use crate::hf::special_vocab::SpecialVocab;
use crate::hf::vocab::{sentencepiece_vocab, write_gpt2, write_sentencepiece};

/// One of the Gemma generations.
pub(crate) struct Gemma {
    arch: &'static str,
}

pub(crate) const GEMMA: Gemma = Gemma { arch: "gemma" };
pub(crate) const GEMMA2: Gemma = Gemma { arch: "gemma2" };
pub(crate) const GEMMA3: Gemma = Gemma { arch: "gemma3" };

fn required<'a>(ctx: &'a Ctx<'_>, key: &str) -> Result<&'a Value> {
    ctx.hparams
        .get(key)
        .ok_or_else(|| Error::Unsupported(format!("config.json: {key} is missing")))
}

fn as_u32(v: &Value, key: &str) -> Result<u32> {
    v.as_u64()
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| Error::Unsupported(format!("config.json: {key} is {v}, not a count")))
}

fn as_f32(v: &Value, key: &str) -> Result<f32> {
    v.as_f64()
        .map(|x| x as f32)
        .ok_or_else(|| Error::Unsupported(format!("config.json: {key} is {v}, not a number")))
}

fn req_u32(ctx: &Ctx<'_>, key: &str) -> Result<u32> {
    as_u32(required(ctx, key)?, key)
}

impl HfArch for Gemma {
    fn gguf_arch(&self) -> &'static str {
        self.arch
    }

    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        let a = self.arch;
        let k = |name: &str| format!("{a}.{name}");
        let h = &ctx.hparams;
        if a == "gemma3" {
            // After the shared keys (already written), some are set again with defaults.
            let get_u32 = |key: &str, default: u32| -> Result<u32> {
                match h.get(key) {
                    None => Ok(default),
                    Some(v) => as_u32(v, key),
                }
            };
            b.set(
                &k("context_length"),
                get_u32("max_position_embeddings", 131072)?,
            );
            b.set(
                &k("attention.head_count"),
                get_u32("num_attention_heads", 8)?,
            );
            let eps = match h.get("rms_norm_eps") {
                None => 1e-6,
                Some(v) => as_f32(v, "rms_norm_eps")?,
            };
            b.set(&k("attention.layer_norm_rms_epsilon"), eps);
            let head_dim = get_u32("head_dim", 256)?;
            b.set(&k("attention.key_length"), head_dim);
            b.set(&k("attention.value_length"), head_dim);
            let rope = h.rope();
            let params = match rope.get("full_attention") {
                Some(Value::Object(o)) => o,
                _ => rope,
            };
            let theta = match params.get("rope_theta") {
                None => 1_000_000.0,
                Some(v) => as_f32(v, "rope_theta")?,
            };
            b.set(&k("rope.freq_base"), theta);
            if h.get("attn_logit_softcapping")
                .is_some_and(|v| !v.is_null())
            {
                return Err(Error::Unsupported(
                    "config.json: Gemma 3 with attn_logit_softcapping is not converted".into(),
                ));
            }
            if let Some(cap) = h
                .get("final_logit_softcapping")
                .filter(|v| crate::hf::special_vocab::truthy(Some(v)))
            {
                b.set(
                    &k("final_logit_softcapping"),
                    as_f32(cap, "final_logit_softcapping")?,
                );
            }
            if h.get("sliding_window_pattern") != Some(&Value::from(1)) {
                b.set(
                    &k("attention.sliding_window"),
                    req_u32(ctx, "sliding_window")?,
                );
            }
            b.set(
                &k("attention.head_count_kv"),
                get_u32("num_key_value_heads", 4)?,
            );
            return Ok(());
        }
        // Gemma and Gemma 2 write their own keys instead of the shared ones: the caller
        // skipped those.
        b.set(
            &k("context_length"),
            req_u32(ctx, "max_position_embeddings")?,
        );
        b.set(&k("embedding_length"), req_u32(ctx, "hidden_size")?);
        b.set(&k("block_count"), ctx.block_count);
        b.set(
            &k("feed_forward_length"),
            req_u32(ctx, "intermediate_size")?,
        );
        let heads = req_u32(ctx, "num_attention_heads")?;
        b.set(&k("attention.head_count"), heads);
        let kv = match h.get("num_key_value_heads") {
            Some(v) => as_u32(v, "num_key_value_heads")?,
            None => heads,
        };
        b.set(&k("attention.head_count_kv"), kv);
        b.set(
            &k("attention.layer_norm_rms_epsilon"),
            as_f32(required(ctx, "rms_norm_eps")?, "rms_norm_eps")?,
        );
        let head_dim = req_u32(ctx, "head_dim")?;
        b.set(&k("attention.key_length"), head_dim);
        b.set(&k("attention.value_length"), head_dim);
        b.set("general.file_type", ctx.file_type);
        if a == "gemma2" {
            for key in ["attn_logit_softcapping", "final_logit_softcapping"] {
                b.set(&k(key), as_f32(required(ctx, key)?, key)?);
            }
            b.set(
                &k("attention.sliding_window"),
                req_u32(ctx, "sliding_window")?,
            );
        }
        Ok(())
    }

    fn vocab(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        let dir = ctx.ckpt.dir();
        if self.arch == "gemma3" && !dir.join("tokenizer.model").is_file() {
            return write_gpt2(ctx, b);
        }
        if !write_sentencepiece(ctx, b)? {
            return Err(Error::Unsupported(format!(
                "{}: no tokenizer.model (Gemma's SentencePiece vocabulary is read from it)",
                dir.display()
            )));
        }
        if self.arch == "gemma" {
            let mut special = SpecialVocab::load(
                ctx.ckpt,
                false,
                &["prefix", "suffix", "middle", "fsep", "eot"],
                None,
            )?;
            for (typ, id) in [
                ("prefix", 67),
                ("suffix", 69),
                ("middle", 68),
                ("fsep", 70),
                ("eot", 107),
            ] {
                special.set_special_token(typ, Some(&Value::from(id)))?;
            }
            special.chat_template = None;
            special.add_to_gguf(b)?;
        }
        b.set("tokenizer.ggml.add_space_prefix", false);
        Ok(())
    }

    fn filter(&self, name: &str) -> Option<String> {
        (self.arch == "gemma3" || name != "lm_head.weight").then(|| name.to_string())
    }

    fn map(&self, ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>> {
        let mut transform = Transform::None;
        if self.arch == "gemma3" && name.contains("embed_tokens.weight") {
            let dir = ctx.ckpt.dir();
            let rows = if dir.join("tokenizer.model").is_file() {
                let size = ctx
                    .hparams
                    .find(&["vocab_size_per_layer_input", "vocab_size"])
                    .and_then(Value::as_u64)
                    .map(|n| n as usize);
                sentencepiece_vocab(ctx.ckpt, size)?
                    .map(|v| v.tokens.len())
                    .unwrap_or(usize::MAX)
            } else {
                let path = dir.join("tokenizer.json");
                let json = ctx
                    .ckpt
                    .reads()
                    .tokenizer_json(&path)?
                    .ok_or_else(|| crate::hf::json::file_error(&path, "no such file"))?;
                let n = |v: Option<&Value>| match v {
                    Some(Value::Object(o)) => o.len(),
                    Some(Value::Array(a)) => a.len(),
                    _ => 0,
                };
                n(json.get("model").and_then(|m| m.get("vocab"))) + n(json.get("added_tokens"))
            };
            transform = Transform::FirstRows { rows };
        }
        if name.ends_with("norm.weight") {
            transform = Transform::AddOne;
        }
        Ok(vec![Mapped {
            name: map_decoder(self.arch, name, bid)?,
            transform,
        }])
    }

    fn uses_shared_parameters(&self) -> bool {
        self.arch == "gemma3"
    }
}
