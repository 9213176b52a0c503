//! The vocabulary of a byte-level BPE or WordPiece `tokenizer.json`, laid out as
//! `convert_hf_to_gguf.py`'s `get_vocab_base` lays it out, and its pre-tokenizer name found by
//! the same check (`get_vocab_base_pre`): the SHA-256 of the token ids the tokenizer gives for
//! a fixed text, looked up in llama.cpp's table. The tokenizer is run by `gguf-tokenizer`'s
//! port of Hugging Face's `tokenizers`, so no Python is needed.

use std::collections::HashMap;
use std::path::Path;

use gguf_tokenizer::Tokenizer;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::checkpoint::Checkpoint;
use super::json::file_error;
use super::pre_hashes::{CHECK_TEXT, PRE_TOKENIZER_HASHES};
use crate::error::Result;

/// The largest vocabulary accepted: four times the largest real ones, so that a `vocab_size`
/// read from `config.json` cannot make the padding tokens take unbounded memory.
pub(crate) const MAX_VOCAB: usize = 1 << 20;

fn check_vocab_size(n: usize, path: &Path) -> Result<()> {
    if n > MAX_VOCAB {
        return Err(file_error(
            path,
            format!("a vocabulary of {n} tokens is more than the {MAX_VOCAB} accepted (config.json's vocab_size?)"),
        ));
    }
    Ok(())
}

/// gguf's token types.
pub(crate) mod token_type {
    pub const NORMAL: i32 = 1;
    pub const UNUSED: i32 = 5;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
}

/// Tokens, their types and the pre-tokenizer name.
#[derive(Debug)]
pub(crate) struct BaseVocab {
    pub tokens: Vec<String>,
    pub types: Vec<i32>,
    pub pre: String,
}

/// Added tokens whose text marks them as control tokens even when `tokenizer.json` does not
/// call them special (`does_token_look_special`).
pub(crate) fn looks_special(token: &str) -> bool {
    matches!(token, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (token.starts_with("<|") && token.ends_with("|>"))
        || (token.starts_with("<｜") && token.ends_with("｜>"))
        || (token.starts_with("<unused") && token.ends_with('>'))
}

/// The `tokenizer.json` of `dir`: its text, parsed JSON and the tokenizer it describes.
pub(crate) struct HfTokenizer {
    pub json: Value,
    pub tokenizer: Tokenizer,
}

impl HfTokenizer {
    pub(crate) fn load(ckpt: &Checkpoint) -> Result<HfTokenizer> {
        let dir = ckpt.dir();
        let path = dir.join("tokenizer.json");
        let text = ckpt.reads().tokenizer_json_text(&path)?.ok_or_else(|| {
            file_error(
                dir,
                "no tokenizer.json (a BPE or WordPiece tokenizer is read from it)",
            )
        })?;
        let json = super::json::parse_json(&path, &text)?;
        let tokenizer = Tokenizer::from_huggingface_json(&text)
            .map_err(|e| file_error(&path, format!("cannot build its tokenizer: {e}")))?;
        Ok(HfTokenizer { json, tokenizer })
    }

    /// The pre-tokenizer name llama.cpp's table gives this tokenizer, by the hash of the ids
    /// of [`CHECK_TEXT`] (special tokens added, as `tokenizer.encode` adds them).
    pub(crate) fn pre_tokenizer(&self, dir: &Path) -> Result<String> {
        let ids = self.tokenizer.encode(
            CHECK_TEXT.as_bytes(),
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
        );
        let hash = check_hash(&ids);
        PRE_TOKENIZER_HASHES
            .iter()
            .find(|(h, _)| *h == hash)
            .map(|(_, name)| name.to_string())
            .ok_or_else(|| {
                file_error(
                    &dir.join("tokenizer.json"),
                    format!(
                        "its pre-tokenizer is not one llama.cpp knows (check hash {hash}); its \
                         splitting rules are closest to llama.cpp's `{}`: pass --pre NAME to \
                         write a name",
                        self.tokenizer.pre_tokenizer()
                    ),
                )
            })
    }

    /// The vocabulary as `get_vocab_base` lays it out: `vocab_size` entries (`config.json`'s
    /// when it has one), ids without a token as `[PADn]` (unused), added tokens as control
    /// tokens when special or special-looking, else user-defined with `▁` as spaces.
    pub(crate) fn base_vocab(
        &self,
        dir: &Path,
        vocab_size: Option<usize>,
        pre: String,
    ) -> Result<BaseVocab> {
        let path = dir.join("tokenizer.json");
        let model_vocab = self
            .json
            .get("model")
            .and_then(|m| m.get("vocab"))
            .and_then(Value::as_object)
            .ok_or_else(|| file_error(&path, "model.vocab is not a token-to-id object"))?;
        let mut by_id: HashMap<u64, &str> = HashMap::with_capacity(model_vocab.len());
        for (token, id) in model_vocab {
            let id = id
                .as_u64()
                .ok_or_else(|| file_error(&path, format!("token {token:?} has no integer id")))?;
            by_id.insert(id, token);
        }
        // Added tokens: (content, special, normalized) by id.
        let mut added: HashMap<u64, (&str, bool, bool)> = HashMap::new();
        if let Some(list) = self.json.get("added_tokens").and_then(Value::as_array) {
            for t in list {
                let (Some(id), Some(content)) = (
                    t.get("id").and_then(Value::as_u64),
                    t.get("content").and_then(Value::as_str),
                ) else {
                    return Err(file_error(&path, "an added token lacks an id or content"));
                };
                let special = t.get("special").and_then(Value::as_bool).unwrap_or(false);
                let normalized = t
                    .get("normalized")
                    .and_then(Value::as_bool)
                    .unwrap_or(!special);
                added.insert(id, (content, special, normalized));
                by_id.insert(id, content);
            }
        }
        let max_id = by_id.keys().copied().max();
        let n = vocab_size.unwrap_or(by_id.len());
        check_vocab_size(n, &path)?;
        if let Some(max) = max_id.filter(|&m| m >= n as u64) {
            return Err(file_error(
                &path,
                format!("token id {max} is not below the vocabulary size {n} (config.json's vocab_size)"),
            ));
        }
        let mut tokens = Vec::with_capacity(n);
        let mut types = Vec::with_capacity(n);
        for i in 0..n as u64 {
            match (by_id.get(&i), added.get(&i)) {
                (None, _) => {
                    tokens.push(format!("[PAD{i}]"));
                    types.push(token_type::UNUSED);
                }
                (Some(&token), Some(&(_, special, _))) => {
                    if special || looks_special(token) {
                        tokens.push(token.to_string());
                        types.push(token_type::CONTROL);
                    } else {
                        tokens.push(token.replace('\u{2581}', " "));
                        types.push(token_type::USER_DEFINED);
                    }
                }
                (Some(&token), None) => {
                    tokens.push(token.to_string());
                    types.push(token_type::NORMAL);
                }
            }
        }
        Ok(BaseVocab { tokens, types, pre })
    }
}

/// The hash `get_vocab_base_pre` takes: SHA-256 of the ids printed as a Python list.
pub(crate) fn check_hash(ids: &[u32]) -> String {
    let list = format!(
        "[{}]",
        ids.iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    );
    Sha256::digest(list.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_check_hash_is_python_s_list_text_hashed() {
        // python3 -c 'import hashlib; print(hashlib.sha256(str([1, 22, 333]).encode()).hexdigest())'
        assert_eq!(
            check_hash(&[1, 22, 333]),
            "276d8737d9d5a80805e0731e8d5ae18972a8e3ba721f4988f67151c6e9159068"
        );
    }

    #[test]
    fn special_looking_tokens() {
        for t in ["<|im_start|>", "<unused12>", "<pad>", "<｜end｜>"] {
            assert!(looks_special(t), "{t}");
        }
        for t in ["<s>", "hello", "<|x", "[UNK]"] {
            assert!(!looks_special(t), "{t}");
        }
    }
}

/// A SentencePiece vocabulary as `_create_vocab_sentencepiece` lays it out.
#[derive(Debug)]
pub(crate) struct SpmVocab {
    pub tokens: Vec<String>,
    pub scores: Vec<f32>,
    pub types: Vec<i32>,
}

/// gguf's token types for SentencePiece vocabularies.
mod spm_type {
    pub const UNKNOWN: i32 = 2;
    pub const BYTE: i32 = 6;
}

/// Which converter's rules for the tokens added on top of `tokenizer.model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SpmRules {
    /// `_create_vocab_sentencepiece`.
    Standard,
    /// Phi-3's own copy: every added token user-defined unless special, spaces kept as `▁`,
    /// and `tokenizer.json`'s added tokens applied too.
    Phi3,
}

/// `_create_vocab_sentencepiece`: `tokenizer.model`'s pieces (user-defined pieces count as
/// normal there), then `added_tokens.json`, then `tokenizer_config.json`'s
/// `added_tokens_decoder`, padded to `vocab_size`. `None` when there is no `tokenizer.model`.
pub(crate) fn sentencepiece_vocab(
    ckpt: &Checkpoint,
    vocab_size: Option<usize>,
) -> Result<Option<SpmVocab>> {
    sentencepiece_vocab_with(ckpt, vocab_size, SpmRules::Standard)
}

/// [`sentencepiece_vocab`] under `rules`.
pub(crate) fn sentencepiece_vocab_with(
    ckpt: &Checkpoint,
    vocab_size: Option<usize>,
    rules: SpmRules,
) -> Result<Option<SpmVocab>> {
    use crate::sentencepiece::{ModelProto, PieceType};
    let (dir, reads) = (ckpt.dir(), ckpt.reads());
    let path = dir.join("tokenizer.model");
    if !path.is_file() {
        return Ok(None);
    }
    reads.note(&path);
    let len = std::fs::metadata(&path)
        .map_err(|e| file_error(&path, e))?
        .len();
    if len > super::json::MAX_TEXT_BYTES {
        return Err(file_error(
            &path,
            format!("{len} bytes is too large for a tokenizer.model"),
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| file_error(&path, e))?;
    let model = ModelProto::parse(&bytes)
        .map_err(|e| file_error(&path, format!("not a SentencePiece model: {e}")))?;
    let n_pieces = model.pieces.len();
    if n_pieces == 0 {
        // Protobuf reads zero bytes as a model with every field absent; SentencePiece refuses
        // it. Padding tokens alone would make a vocabulary nothing can be tokenized with.
        return Err(file_error(
            &path,
            match bytes.is_empty() {
                true => "is empty, not a SentencePiece model".to_string(),
                false => {
                    "is a SentencePiece model without pieces: it has no vocabulary".to_string()
                }
            },
        ));
    }
    let n = vocab_size.filter(|&n| n > 0).unwrap_or(n_pieces);
    check_vocab_size(n, &path)?;
    let mut tokens: Vec<String> = (0..n).map(|i| format!("[PAD{i}]")).collect();
    let mut scores = vec![-10000.0f32; n];
    let mut types = vec![token_type::UNUSED; n];
    if rules == SpmRules::Phi3 && n < n_pieces {
        return Err(file_error(
            &path,
            format!("{n_pieces} pieces do not fit config.json's vocab_size {n}"),
        ));
    }
    for (id, p) in model.pieces.iter().enumerate().take(n) {
        tokens[id] = p.piece.clone().unwrap_or_default();
        scores[id] = p.score.unwrap_or(0.0);
        types[id] = match p.kind() {
            PieceType::Unknown => spm_type::UNKNOWN,
            PieceType::Control => token_type::CONTROL,
            PieceType::Unused => token_type::UNUSED,
            PieceType::Byte => spm_type::BYTE,
            PieceType::Normal | PieceType::UserDefined => token_type::NORMAL,
        };
    }
    if let Some(added) = reads.json_if_exists(&dir.join("added_tokens.json"))? {
        if let Some(map) = added.as_object() {
            for (text, id) in map {
                let Some(id) = id.as_u64().map(|i| i as usize).filter(|&i| i < n) else {
                    continue;
                };
                tokens[id] = text.clone();
                scores[id] = -1000.0;
                types[id] = token_type::USER_DEFINED;
            }
        }
    }
    let config_path = dir.join("tokenizer_config.json");
    let mut added: Vec<(usize, String, bool, &Path)> = Vec::new();
    if let Some(decoder) = ckpt
        .tokenizer_config()?
        .and_then(|c| c.get("added_tokens_decoder"))
        .and_then(Value::as_object)
    {
        for (id, data) in decoder {
            let id: usize = id.parse().map_err(|_| {
                file_error(
                    &config_path,
                    format!("added_tokens_decoder key {id:?} is not an id"),
                )
            })?;
            let content = data.get("content").and_then(Value::as_str).ok_or_else(|| {
                file_error(&config_path, format!("added token {id} has no content"))
            })?;
            let special = super::special_vocab::truthy(data.get("special"));
            added.push((id, content.to_string(), special, &config_path));
        }
    }
    let tokenizer_path = dir.join("tokenizer.json");
    let tokenizer_json;
    if rules == SpmRules::Phi3 {
        tokenizer_json = reads.tokenizer_json(&tokenizer_path)?;
        if let Some(list) = tokenizer_json
            .as_ref()
            .and_then(|t| t.get("added_tokens"))
            .and_then(Value::as_array)
        {
            for t in list {
                let (Some(id), Some(content)) = (
                    t.get("id").and_then(Value::as_u64),
                    t.get("content").and_then(Value::as_str),
                ) else {
                    return Err(file_error(
                        &tokenizer_path,
                        "an added token lacks an id or content",
                    ));
                };
                let special = super::special_vocab::truthy(t.get("special"));
                added.push((id as usize, content.to_string(), special, &tokenizer_path));
            }
        }
    }
    for (id, content, special, from) in added {
        if id >= n {
            if rules == SpmRules::Phi3 {
                return Err(file_error(
                    from,
                    format!("added token {id} is past the vocabulary ({n})"),
                ));
            }
            continue;
        }
        match rules {
            SpmRules::Standard if special || looks_special(&content) => {
                types[id] = token_type::CONTROL;
                tokens[id] = content;
            }
            SpmRules::Standard => {
                types[id] = token_type::USER_DEFINED;
                tokens[id] = content.replace('\u{2581}', " ");
            }
            SpmRules::Phi3 => {
                types[id] = if special {
                    token_type::CONTROL
                } else {
                    token_type::USER_DEFINED
                };
                tokens[id] = content;
            }
        }
        scores[id] = -1000.0;
    }
    Ok(Some(SpmVocab {
        tokens,
        scores,
        types,
    }))
}

fn vocab_size_of(ctx: &super::arch::Ctx<'_>, keys: &[&str]) -> Option<usize> {
    ctx.hparams
        .find(keys)
        .and_then(Value::as_u64)
        .map(|n| n as usize)
}

fn i32_array(values: &[i32]) -> Result<gguf_format::OwnedValue> {
    use gguf_format::{OwnedArray, OwnedValue, ValueType};
    Ok(OwnedValue::Array(OwnedArray::new(
        ValueType::I32,
        values.iter().map(|&v| OwnedValue::I32(v)).collect(),
    )?))
}

/// `_set_vocab_gpt2`: a byte-level BPE `tokenizer.json` with its merges.
pub(crate) fn write_gpt2(
    ctx: &super::arch::Ctx<'_>,
    b: &mut gguf_format::GgufBuilder<'_>,
) -> Result<()> {
    use super::special_vocab::{string_array, SpecialVocab, DEFAULT_TYPES};
    let dir = ctx.ckpt.dir();
    let tok = HfTokenizer::load(ctx.ckpt)?;
    let pre = match &ctx.pre_override {
        Some(name) => name.clone(),
        None => tok.pre_tokenizer(dir)?,
    };
    let base = tok.base_vocab(dir, vocab_size_of(ctx, &["vocab_size"]), pre)?;
    b.set("tokenizer.ggml.model", "gpt2");
    b.set("tokenizer.ggml.pre", base.pre.as_str());
    b.set("tokenizer.ggml.tokens", string_array(&base.tokens)?);
    b.set("tokenizer.ggml.token_type", i32_array(&base.types)?);
    let special = SpecialVocab::load(ctx.ckpt, true, DEFAULT_TYPES, None)?;
    ctx.warnings
        .borrow_mut()
        .extend(special.warnings.iter().cloned());
    special.add_to_gguf(b)
}

/// `_set_vocab_sentencepiece`; `false` (nothing written) when there is no `tokenizer.model`.
pub(crate) fn write_sentencepiece(
    ctx: &super::arch::Ctx<'_>,
    b: &mut gguf_format::GgufBuilder<'_>,
) -> Result<bool> {
    write_sentencepiece_with(ctx, b, SpmRules::Standard)
}

/// [`write_sentencepiece`] under `rules`.
pub(crate) fn write_sentencepiece_with(
    ctx: &super::arch::Ctx<'_>,
    b: &mut gguf_format::GgufBuilder<'_>,
    rules: SpmRules,
) -> Result<bool> {
    use super::special_vocab::{string_array, SpecialVocab, DEFAULT_TYPES};
    use gguf_format::{OwnedArray, OwnedValue, ValueType};
    let size = match rules {
        SpmRules::Standard => vocab_size_of(ctx, &["vocab_size_per_layer_input", "vocab_size"]),
        SpmRules::Phi3 => vocab_size_of(ctx, &["vocab_size"]),
    };
    let Some(v) = sentencepiece_vocab_with(ctx.ckpt, size, rules)? else {
        return Ok(false);
    };
    b.set("tokenizer.ggml.model", "llama");
    b.set("tokenizer.ggml.pre", "default");
    b.set("tokenizer.ggml.tokens", string_array(&v.tokens)?);
    b.set(
        "tokenizer.ggml.scores",
        OwnedValue::Array(OwnedArray::new(
            ValueType::F32,
            v.scores.iter().map(|&s| OwnedValue::F32(s)).collect(),
        )?),
    );
    b.set("tokenizer.ggml.token_type", i32_array(&v.types)?);
    let special = SpecialVocab::load(ctx.ckpt, false, DEFAULT_TYPES, Some(v.tokens.len()))?;
    ctx.warnings
        .borrow_mut()
        .extend(special.warnings.iter().cloned());
    special.add_to_gguf(b)?;
    Ok(true)
}
