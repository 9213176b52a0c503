//! The vocabulary as llama.cpp loads it from `tokenizer.ggml.*`: token texts, scores, types
//! (turned into attributes), the special ids with each model kind's defaults, and the
//! add-BOS/EOS flags.

use std::collections::HashMap;

use gguf_format::GgufFile;

use crate::error::{Result, TokenizerError};

/// `tokenizer.ggml.token_type` values (llama.cpp's `llama_token_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum TokenType {
    /// Not given (or an unknown value).
    Undefined = 0,
    /// An ordinary piece of text.
    Normal = 1,
    /// The unknown token.
    Unknown = 2,
    /// A control token (BOS, EOS, chat markers): rendered only on request, matched in the
    /// input only when parsing special tokens.
    Control = 3,
    /// A user-defined token: always matched in the input as a whole.
    UserDefined = 4,
    /// Reserved, never produced.
    Unused = 5,
    /// A byte-fallback token `<0xNN>`.
    Byte = 6,
}

impl TokenType {
    fn from_i32(v: i32) -> TokenType {
        match v {
            1 => TokenType::Normal,
            2 => TokenType::Unknown,
            3 => TokenType::Control,
            4 => TokenType::UserDefined,
            5 => TokenType::Unused,
            6 => TokenType::Byte,
            _ => TokenType::Undefined,
        }
    }
}

/// The tokenizer model a file names in `tokenizer.ggml.model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// `llama`: SentencePiece BPE over scores, `▁` for spaces, byte fallback.
    Spm,
    /// `gpt2`: byte-level BPE over ranked merges, after a pre-tokenizer.
    Bpe,
}

/// One vocabulary entry.
#[derive(Debug, Clone)]
pub(crate) struct TokenData {
    pub text: Box<[u8]>,
    pub score: f32,
    pub ty: TokenType,
}

/// Ids of the tokens with a role (`None`: the file has no such token).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpecialIds {
    /// Beginning of sequence.
    pub bos: Option<u32>,
    /// End of sequence.
    pub eos: Option<u32>,
    /// End of turn (chat).
    pub eot: Option<u32>,
    /// Unknown.
    pub unk: Option<u32>,
    /// Separator.
    pub sep: Option<u32>,
    /// Padding.
    pub pad: Option<u32>,
}

/// The loaded vocabulary.
#[derive(Debug, Clone)]
pub(crate) struct Vocab {
    pub kind: ModelKind,
    pub tokens: Vec<TokenData>,
    pub ids: HashMap<Box<[u8]>, u32>,
    pub special: SpecialIds,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    /// `tokenizer.ggml.pre` (BPE only; empty when absent).
    pub pre: String,
    /// Ids of control, user-defined and unknown tokens, longest text first: the order in
    /// which llama.cpp looks for them in the input.
    pub special_cache: Vec<u32>,
}

fn meta(msg: impl Into<String>) -> TokenizerError {
    TokenizerError::Metadata(msg.into())
}

impl Vocab {
    pub(crate) fn from_gguf(file: &GgufFile) -> Result<Vocab> {
        let model: &str = file.get("tokenizer.ggml.model")?;
        let (kind, defaults, mut add_bos, add_eos, mut add_space_prefix) = match model {
            "llama" => (
                ModelKind::Spm,
                SpecialIds {
                    bos: Some(1),
                    eos: Some(2),
                    unk: Some(0),
                    ..SpecialIds::default()
                },
                true,
                false,
                true,
            ),
            "gpt2" => (
                ModelKind::Bpe,
                SpecialIds {
                    bos: Some(11),
                    eos: Some(11),
                    ..SpecialIds::default()
                },
                false,
                false,
                false,
            ),
            other => {
                return Err(meta(format!(
                    "tokenizer.ggml.model `{other}` is not supported (supported: llama, gpt2)"
                )))
            }
        };
        let pre = match kind {
            ModelKind::Bpe => file
                .get_opt::<&str>("tokenizer.ggml.pre")?
                .unwrap_or("")
                .to_string(),
            ModelKind::Spm => String::new(),
        };

        let texts = file.get_array::<&[u8]>("tokenizer.ggml.tokens")?;
        let n = file
            .get::<gguf_format::ArrayView>("tokenizer.ggml.tokens")?
            .len();
        let n = usize::try_from(n).map_err(|_| meta("tokenizer.ggml.tokens is too long"))?;
        let scores: Option<Vec<f32>> = match file.value("tokenizer.ggml.scores") {
            None => None,
            Some(_) => {
                let arr: gguf_format::ArrayView = file.get("tokenizer.ggml.scores")?;
                let v: Vec<f32> = if let Some(it) = arr.typed::<f32>() {
                    it.collect()
                } else if let Some(it) = arr.typed::<i32>() {
                    it.map(|s| s as f32).collect()
                } else {
                    return Err(meta("tokenizer.ggml.scores must be an array of f32 or i32"));
                };
                if v.len() < n {
                    return Err(meta(format!(
                        "tokenizer.ggml.scores has {} entries for {n} tokens",
                        v.len()
                    )));
                }
                Some(v)
            }
        };
        let types: Option<Vec<i32>> = match file.value("tokenizer.ggml.token_type") {
            None => None,
            Some(_) => {
                let v: Vec<i32> = file
                    .get_array::<i32>("tokenizer.ggml.token_type")?
                    .collect();
                if v.len() < n {
                    return Err(meta(format!(
                        "tokenizer.ggml.token_type has {} entries for {n} tokens",
                        v.len()
                    )));
                }
                Some(v)
            }
        };

        let mut tokens = Vec::with_capacity(n);
        let mut ids = HashMap::with_capacity(n);
        for (i, text) in texts.enumerate() {
            // llama.cpp renames empty tokens so every text stays unique.
            let text: Box<[u8]> = if text.is_empty() {
                format!("[EMPTY_{i}]").into_bytes().into()
            } else {
                text.into()
            };
            // A later duplicate wins the text-to-id map, as in llama.cpp.
            ids.insert(text.clone(), i as u32);
            tokens.push(TokenData {
                text,
                score: scores.as_ref().map_or(0.0, |s| s[i]),
                ty: types
                    .as_ref()
                    .map_or(TokenType::Normal, |t| TokenType::from_i32(t[i])),
            });
        }

        let id_key = |key: &str, default: Option<u32>| -> Result<Option<u32>> {
            let id = match file.value(key) {
                None => default,
                Some(v) => Some(
                    v.as_integer()
                        .and_then(|i| u32::try_from(i).ok())
                        .ok_or_else(|| meta(format!("{key} must be a token id")))?,
                ),
            };
            // Out-of-range ids are disabled, as llama.cpp does.
            Ok(id.filter(|&id| (id as usize) < tokens.len()))
        };
        let special = SpecialIds {
            bos: id_key("tokenizer.ggml.bos_token_id", defaults.bos)?,
            eos: id_key("tokenizer.ggml.eos_token_id", defaults.eos)?,
            eot: id_key("tokenizer.ggml.eot_token_id", None)?,
            unk: id_key("tokenizer.ggml.unknown_token_id", defaults.unk)?,
            sep: id_key("tokenizer.ggml.seperator_token_id", defaults.sep)?,
            pad: id_key("tokenizer.ggml.padding_token_id", defaults.pad)?,
        };
        if let Some(v) = file.get_opt::<bool>("tokenizer.ggml.add_bos_token")? {
            add_bos = v;
        }
        let add_eos = file
            .get_opt::<bool>("tokenizer.ggml.add_eos_token")?
            .unwrap_or(add_eos);
        if let Some(v) = file.get_opt::<bool>("tokenizer.ggml.add_space_prefix")? {
            add_space_prefix = v;
        }
        if add_bos && special.bos.is_none() {
            return Err(meta("add_bos_token is set but there is no BOS token"));
        }
        if add_eos && special.eos.is_none() {
            return Err(meta("add_eos_token is set but there is no EOS token"));
        }

        let mut special_cache: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&id| {
                matches!(
                    tokens[id as usize].ty,
                    TokenType::Control | TokenType::UserDefined | TokenType::Unknown
                )
            })
            .collect();
        // Longest first; llama.cpp's unstable sort leaves equal lengths in an unspecified
        // order, ids ascending here.
        special_cache.sort_by(|&a, &b| {
            tokens[b as usize]
                .text
                .len()
                .cmp(&tokens[a as usize].text.len())
                .then(a.cmp(&b))
        });

        Ok(Vocab {
            kind,
            tokens,
            ids,
            special,
            add_bos,
            add_eos,
            add_space_prefix,
            pre,
            special_cache,
        })
    }

    /// The id of the token whose text is exactly `text`.
    #[inline]
    pub(crate) fn id(&self, text: &[u8]) -> Option<u32> {
        self.ids.get(text).copied()
    }
}
