//! BERT encoders (`BertModel`, `BertForMaskedLM`): sentence embedders such as
//! all-MiniLM-L6-v2, written as llama.cpp's `bert` architecture with a WordPiece vocabulary.

use gguf_format::tensor_names::TensorName as T;
use gguf_format::{GgufBuilder, OwnedArray, OwnedValue, ValueType};
use serde_json::Value;

use super::{map_by_table, pooling_type, Ctx, HfArch, Mapped, Transform};
use crate::error::{Error, Result};
use crate::hf::special_vocab::{string_array, SpecialVocab, DEFAULT_TYPES};
use crate::hf::vocab::{token_type, HfTokenizer};

pub(crate) struct Bert;

/// Hugging Face stems to GGUF names (a block's where the stem has `{bid}`).
const TENSORS: &[(&str, T)] = &[
    ("embeddings.word_embeddings", T::TokenEmbd),
    ("embeddings.token_type_embeddings", T::TokenTypes),
    ("embeddings.position_embeddings", T::PosEmbd),
    ("embeddings.LayerNorm", T::TokenEmbdNorm),
    ("encoder.layer.{bid}.attention.self.query", T::AttnQ),
    ("encoder.layer.{bid}.attention.self.key", T::AttnK),
    ("encoder.layer.{bid}.attention.self.value", T::AttnV),
    ("encoder.layer.{bid}.attention.output.dense", T::AttnOut),
    (
        "encoder.layer.{bid}.attention.output.LayerNorm",
        T::AttnOutNorm,
    ),
    ("encoder.layer.{bid}.intermediate.dense", T::FfnUp),
    ("encoder.layer.{bid}.output.dense", T::FfnDown),
    ("encoder.layer.{bid}.output.LayerNorm", T::LayerOutNorm),
];

impl HfArch for Bert {
    fn gguf_arch(&self) -> &'static str {
        "bert"
    }

    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        b.set("bert.attention.causal", false);
        if let Some(pooling) = pooling_type(ctx)? {
            b.set("bert.pooling_type", pooling);
        }
        Ok(())
    }

    fn vocab(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()> {
        let dir = ctx.ckpt.dir();
        let tok = HfTokenizer::load(ctx.ckpt)?;
        let pre = match (&ctx.pre_override, tok.pre_tokenizer(dir)) {
            (Some(name), _) => name.clone(),
            (None, found) => found?,
        };
        let vocab_size = ctx
            .hparams
            .get("vocab_size")
            .and_then(Value::as_u64)
            .map(|n| n as usize);
        let base = tok.base_vocab(dir, vocab_size, pre)?;
        let type_count = match ctx.hparams.get("type_vocab_size") {
            None | Some(Value::Null) => 1,
            Some(v) => v
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| {
                    Error::Unsupported(format!("config.json: type_vocab_size is {v}, not a count"))
                })?,
        };
        b.set("tokenizer.ggml.token_type_count", type_count);
        // llama.cpp's WordPiece layout: a word-start token carries a leading U+2581 (its
        // "phantom space"); a continuation loses its `##`; control tokens stay as they are.
        let tokens: Vec<String> = base
            .tokens
            .iter()
            .zip(&base.types)
            .map(|(t, &ty)| {
                if ty == token_type::CONTROL {
                    t.clone()
                } else if let Some(rest) = t.strip_prefix("##") {
                    rest.to_string()
                } else {
                    format!("\u{2581}{t}")
                }
            })
            .collect();
        b.set("tokenizer.ggml.model", "bert");
        b.set("tokenizer.ggml.pre", base.pre.as_str());
        b.set("tokenizer.ggml.tokens", string_array(&tokens)?);
        b.set(
            "tokenizer.ggml.token_type",
            OwnedValue::Array(OwnedArray::new(
                ValueType::I32,
                base.types.iter().map(|&t| OwnedValue::I32(t)).collect(),
            )?),
        );
        let special = SpecialVocab::load(ctx.ckpt, false, DEFAULT_TYPES, Some(tokens.len()))?;
        ctx.warnings
            .borrow_mut()
            .extend(special.warnings.iter().cloned());
        special.add_to_gguf(b)
    }

    fn filter(&self, name: &str) -> Option<String> {
        let mut name = name.strip_prefix("bert.").unwrap_or(name).to_string();
        if let Some(stem) = name.strip_suffix(".gamma") {
            name = format!("{stem}.weight");
        }
        if let Some(stem) = name.strip_suffix(".beta") {
            name = format!("{stem}.bias");
        }
        // Only the embeddings are wanted: no pooler or pre-training heads.
        if matches!(
            name.as_str(),
            "embeddings.position_ids" | "pooler.dense.weight" | "pooler.dense.bias"
        ) || name.starts_with("cls.predictions")
            || name.starts_with("cls.seq_relationship")
        {
            return None;
        }
        Some(name)
    }

    fn map(&self, _ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>> {
        let mapped = map_by_table(name, bid, TENSORS).ok_or_else(|| {
            Error::Unsupported(format!("cannot map tensor '{name}' of a BERT model"))
        })?;
        Ok(vec![Mapped {
            name: mapped,
            transform: Transform::None,
        }])
    }
}
