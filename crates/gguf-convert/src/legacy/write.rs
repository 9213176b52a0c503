//! Writing a parsed legacy model as GGUF: the tensor plan (today's names, repacked or widened
//! blocks), the metadata `convert_llama_ggml_to_gguf.py` writes, and the streamed write.

use std::io::Write;

use gguf_format::tensor_names::TensorName as T;
use gguf_format::{GgmlType, GgufBuilder, OwnedArray, OwnedValue, TensorSpec, ValueType};

use super::blocks::{Block, Era, OldQuant, ScalePolicy};
use super::{
    ftype_name, legacy_type_name, Action, LegacyModel, Options, Report, TensorPlan, FIRST_W1,
};
use crate::check::{check_plan, Origins};
use crate::error::{Error, Result};

impl<'a> LegacyModel<'a> {
    /// How each tensor will be written with `policy`: its GGUF name, type and shape, and how
    /// its data is made.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a tensor name that is not llama's.
    pub fn plan(&self, policy: ScalePolicy) -> Result<Vec<TensorPlan>> {
        let era = self.container.era();
        self.tensors
            .iter()
            .map(|t| {
                let name = gguf_name(t.name).ok_or_else(|| {
                    Error::Unsupported(format!(
                        "tensor '{}' (at byte {}) is not a llama tensor this converter knows \
                         (tok_embeddings, norm, output, layers.N.attention.wq/wk/wv/wo, \
                         layers.N.attention_norm, layers.N.feed_forward.w1/w2/w3, layers.N.ffn_norm)",
                        t.name, t.offset
                    ))
                })?;
                let action = match (t.type_id, OldQuant::from_id(t.type_id)) {
                    (0 | 1, _) | (10..=14, _) => {
                        let ty = GgmlType::from_id_opt(t.type_id).expect("checked when parsed");
                        Action::Copy(ty)
                    }
                    (_, Some(q)) if q.unchanged_in(era) => {
                        Action::Copy(q.today().expect("unchanged types exist today"))
                    }
                    (_, Some(q)) => match q.today() {
                        Some(ty) if policy == ScalePolicy::Round || all_fit_f16(q, era, t.data) => {
                            Action::Repack(q, ty)
                        }
                        _ => Action::Dequantize(q),
                    },
                    (id, None) => unreachable!("type {id} was checked when parsed"),
                };
                let ty = match action {
                    Action::Copy(ty) | Action::Repack(_, ty) => ty,
                    Action::Dequantize(_) => GgmlType::F32,
                };
                Ok(TensorPlan {
                    legacy_name: t.name.to_string(),
                    name,
                    legacy_type: legacy_type_name(t.type_id),
                    ty,
                    shape: t.dims.clone(),
                    action,
                })
            })
            .collect()
    }

    /// Plans the conversion with `options` and checks it, before anything is written: the
    /// metadata and tensor table, and the engine's load check on them (what `gguf validate`
    /// runs on the output), unless `options.vocab_only`.
    ///
    /// # Errors
    /// As [`LegacyModel::plan`]; [`Error::Invalid`] for options that do not fit the model
    /// (`gqa` not dividing the heads); [`Error::Unsupported`] for a file without tensors
    /// unless `options.vocab_only` (a vocabulary file, or a model cut after its vocabulary);
    /// [`Error::WouldNotLoad`] for a model whose converted file would not load, naming the key
    /// or tensor and the header field or legacy tensor it comes from.
    pub fn prepare(&self, options: &Options) -> Result<LegacyConversion<'_, 'a>> {
        if !options.vocab_only && self.tensors.is_empty() {
            return Err(Error::Unsupported(
                "the file has no tensors after its vocabulary: a vocabulary file (as llama.cpp's \
                 old models/ggml-vocab.bin) or a model cut short; convert it as vocabulary only \
                 (--vocab-only) to write its vocabulary alone"
                    .into(),
            ));
        }
        let plans = if options.vocab_only {
            Vec::new()
        } else {
            self.plan(options.scales)?
        };
        let mut builder = self.builder(options, &plans)?;
        if !options.vocab_only {
            let mut origins: Origins = [
                ("llama.embedding_length", "n_embd"),
                ("llama.block_count", "n_layer"),
                ("llama.attention.head_count", "n_head"),
                ("llama.rope.dimension_count", "n_embd / n_head"),
            ]
            .iter()
            .map(|(key, field)| (key.to_string(), format!("the header's {field}")))
            .chain([
                (
                    "llama.attention.head_count_kv".to_string(),
                    "the header's n_head / the gqa option".to_string(),
                ),
                (
                    "llama.context_length".to_string(),
                    "the context length option".to_string(),
                ),
                (
                    "llama.attention.layer_norm_rms_epsilon".to_string(),
                    "the eps option".to_string(),
                ),
            ])
            .collect();
            let ff = match self.tensors.iter().any(|t| t.name == FIRST_W1) {
                true => format!("the rows of {FIRST_W1}"),
                false => "the header's n_embd and n_mult".to_string(),
            };
            origins.push(("llama.feed_forward_length".into(), ff));
            origins.extend(
                plans
                    .iter()
                    .map(|p| (p.name.clone(), format!("the file's {}", p.legacy_name))),
            );
            check_plan("", &mut builder, &[], &origins)?;
        }
        Ok(LegacyConversion {
            model: self,
            plans,
            builder,
        })
    }

    /// Writes the GGUF file to `out` ([`LegacyModel::prepare`], then
    /// [`LegacyConversion::write`]).
    ///
    /// # Errors
    /// As [`LegacyModel::prepare`] and [`LegacyConversion::write`].
    pub fn write_gguf<W: Write>(
        &self,
        options: &Options,
        out: W,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Report> {
        self.prepare(options)?.write(out, progress)
    }

    /// The GGUF builder: the script's keys in its order, then the tensors.
    fn builder(&self, o: &Options, plans: &[TensorPlan]) -> Result<GgufBuilder<'static>> {
        let hp = self.hparams;
        if o.gqa == 0 || !hp.n_head.is_multiple_of(o.gqa) {
            return Err(Error::Invalid {
                offset: 0,
                what: format!(
                    "--gqa {} does not divide the model's {} attention heads",
                    o.gqa, hp.n_head
                ),
            });
        }
        if !(o.eps.is_finite() && o.eps > 0.0) {
            return Err(Error::Invalid {
                offset: 0,
                what: format!("the RMS norm epsilon {} is not a positive number", o.eps),
            });
        }
        if o.context_length == 0 {
            return Err(Error::Invalid {
                offset: 0,
                what: "the context length is 0".into(),
            });
        }
        if self.vocab.len() < 3 {
            return Err(Error::Unsupported(format!(
                "a vocabulary of {} tokens has no room for <unk>, <s> and </s>",
                self.vocab.len()
            )));
        }
        let mut b = GgufBuilder::new();
        let description = o.description.clone().unwrap_or_else(|| {
            format!(
                "converted from legacy {} {} format",
                self.container.name(),
                ftype_name(hp.ftype).unwrap_or("unknown")
            )
        });
        b.set("general.architecture", "llama");
        if let Some(name) = &o.name {
            b.set("general.name", name.as_str());
        }
        b.set("general.description", description);
        // Types 5 and 6 (Q4_2, Q4_3) no longer exist; their numbers mean nothing today.
        if !matches!(hp.ftype, 5 | 6) {
            b.set("general.file_type", hp.ftype);
        }
        b.set("llama.context_length", o.context_length)
            .set("llama.embedding_length", hp.n_embd)
            .set("llama.block_count", hp.n_layer)
            .set(
                "llama.feed_forward_length",
                u32::try_from(self.feed_forward_length()).map_err(|_| Error::Invalid {
                    offset: 0,
                    what: "the feed-forward width does not fit 32 bits".into(),
                })?,
            )
            .set("llama.rope.dimension_count", hp.n_embd / hp.n_head)
            .set("llama.attention.head_count", hp.n_head)
            .set("llama.attention.head_count_kv", hp.n_head / o.gqa)
            .set("llama.attention.layer_norm_rms_epsilon", o.eps)
            .set("tokenizer.ggml.model", "llama")
            .set("tokenizer.ggml.pre", "default");
        let (tokens, scores, types) = self.gguf_vocab();
        b.set(
            "tokenizer.ggml.tokens",
            OwnedArray::new(
                ValueType::String,
                tokens.into_iter().map(OwnedValue::String).collect(),
            )?,
        )
        .set(
            "tokenizer.ggml.scores",
            OwnedArray::new(
                ValueType::F32,
                scores.into_iter().map(OwnedValue::F32).collect(),
            )?,
        )
        .set(
            "tokenizer.ggml.token_type",
            OwnedArray::new(
                ValueType::I32,
                types.into_iter().map(OwnedValue::I32).collect(),
            )?,
        )
        .set("tokenizer.ggml.unknown_token_id", 0u32)
        .set("tokenizer.ggml.bos_token_id", 1u32)
        .set("tokenizer.ggml.eos_token_id", 2u32);
        for p in plans {
            b.push_tensor(TensorSpec::new(p.name.clone(), p.ty, &p.shape)?)?;
        }
        Ok(b)
    }

    /// The token texts, scores and types as the script writes them: ids 0, 1, 2 are `<unk>`
    /// (unknown), `<s>`, `</s>` (control); an empty token is control; a one-byte token among
    /// ids 3..=258 is the byte token `<0xXX>`; any other has its spaces as `▁` (normal).
    fn gguf_vocab(&self) -> (Vec<Vec<u8>>, Vec<f32>, Vec<i32>) {
        const NORMAL: i32 = 1;
        const UNKNOWN: i32 = 2;
        const CONTROL: i32 = 3;
        const BYTE: i32 = 6;
        let mut tokens = Vec::with_capacity(self.vocab.len());
        let mut types = Vec::with_capacity(self.vocab.len());
        for (id, t) in self.vocab.iter().enumerate() {
            let (text, ty) = match id {
                0 => (b"<unk>".to_vec(), UNKNOWN),
                1 => (b"<s>".to_vec(), CONTROL),
                2 => (b"</s>".to_vec(), CONTROL),
                _ if t.text.is_empty() => (Vec::new(), CONTROL),
                3..=258 if t.text.len() == 1 => {
                    (format!("<0x{:02X}>", t.text[0]).into_bytes(), BYTE)
                }
                _ => (replace_spaces(t.text), NORMAL),
            };
            tokens.push(text);
            types.push(ty);
        }
        let scores = self.vocab.iter().map(|t| t.score).collect();
        (tokens, scores, types)
    }
}

/// A legacy model's conversion, planned and checked ([`LegacyModel::prepare`]): nothing is
/// written until [`LegacyConversion::write`].
#[derive(Debug)]
pub struct LegacyConversion<'m, 'a> {
    model: &'m LegacyModel<'a>,
    plans: Vec<TensorPlan>,
    builder: GgufBuilder<'static>,
}

impl LegacyConversion<'_, '_> {
    /// How each tensor will be written, in order (none for a vocabulary-only conversion).
    pub fn tensors(&self) -> &[TensorPlan] {
        &self.plans
    }

    /// Writes the GGUF file to `out`: metadata, then the tensors one at a time (each repacked
    /// in chunks, so memory stays bounded by a chunk), calling `progress(bytes done, total)`
    /// after each tensor.
    ///
    /// # Errors
    /// [`Error::Format`] if writing fails.
    pub fn write<W: Write>(self, out: W, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
        let LegacyConversion {
            model,
            plans,
            builder,
        } = self;
        let total: u64 = builder.tensors().iter().map(TensorSpec::size).sum();
        let mut w = builder.write(out)?;
        let era = model.container.era();
        let mut done = 0;
        let mut rounded_blocks = 0u64;
        for ((plan, t), spec) in plans.iter().zip(&model.tensors).zip(builder.tensors()) {
            w.write_tensor_with(|w| match plan.action {
                Action::Copy(_) => w.write_all(t.data),
                Action::Repack(q, _) => {
                    let size = q.block_bytes(era);
                    let mut buf = Vec::new();
                    for chunk in t.data.chunks(size * 4096) {
                        buf.clear();
                        for b in chunk.chunks_exact(size) {
                            let block = Block::decode(q, era, b);
                            rounded_blocks += u64::from(!block.fits_f16());
                            block.encode_today(q, &mut buf);
                        }
                        w.write_all(&buf)?;
                    }
                    Ok(())
                }
                Action::Dequantize(q) => {
                    let size = q.block_bytes(era);
                    let mut values = [0f32; 32];
                    let mut buf = Vec::new();
                    for chunk in t.data.chunks(size * 4096) {
                        buf.clear();
                        for b in chunk.chunks_exact(size) {
                            let block = Block::decode(q, era, b);
                            block.values(q, &mut values[..block.len]);
                            for v in &values[..block.len] {
                                buf.extend_from_slice(&v.to_le_bytes());
                            }
                        }
                        w.write_all(&buf)?;
                    }
                    Ok(())
                }
            })?;
            done += spec.size();
            progress(done, total);
        }
        w.finish()?;
        Ok(Report {
            container: model.container,
            tensors: plans,
            rounded_blocks,
        })
    }
}

/// `text` with each space as U+2581 (`▁`), SentencePiece's space.
fn replace_spaces(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for &b in text {
        if b == b' ' {
            out.extend_from_slice("\u{2581}".as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}

/// Whether every block of `data` has f16 scales.
fn all_fit_f16(q: OldQuant, era: Era, data: &[u8]) -> bool {
    data.chunks_exact(q.block_bytes(era))
        .all(|b| Block::decode(q, era, b).fits_f16())
}

/// Today's GGUF name of a legacy llama tensor, if it is one.
pub fn gguf_name(legacy: &str) -> Option<String> {
    let whole_model = match legacy {
        "tok_embeddings.weight" => Some(T::TokenEmbd),
        "norm.weight" => Some(T::OutputNorm),
        "output.weight" => Some(T::Output),
        _ => None,
    };
    if let Some(name) = whole_model {
        return Some(name.weight().to_string());
    }
    let rest = legacy.strip_prefix("layers.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: u32 = layer.parse().ok().filter(|_| !layer.starts_with('+'))?;
    let name = match part {
        "attention.wq.weight" => T::AttnQ,
        "attention.wk.weight" => T::AttnK,
        "attention.wv.weight" => T::AttnV,
        "attention.wo.weight" => T::AttnOut,
        "attention_norm.weight" => T::AttnNorm,
        "feed_forward.w1.weight" => T::FfnGate,
        "feed_forward.w2.weight" => T::FfnDown,
        "feed_forward.w3.weight" => T::FfnUp,
        "ffn_norm.weight" => T::FfnNorm,
        _ => return None,
    };
    Some(name.block_weight(layer))
}
