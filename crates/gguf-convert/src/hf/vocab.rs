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

use super::json::{file_error, read_text_if_exists};
use super::pre_hashes::{CHECK_TEXT, PRE_TOKENIZER_HASHES};
use crate::error::Result;

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
    pub(crate) fn load(dir: &Path) -> Result<HfTokenizer> {
        let path = dir.join("tokenizer.json");
        let text = read_text_if_exists(&path)?.ok_or_else(|| {
            file_error(
                dir,
                "no tokenizer.json (a BPE or WordPiece tokenizer is read from it)",
            )
        })?;
        let json: Value = serde_json::from_str(&text)
            .map_err(|e| file_error(&path, format!("not valid JSON: {e}")))?;
        let tokenizer = Tokenizer::from_huggingface_json(&text)
            .map_err(|e| file_error(&path, format!("cannot build its tokenizer: {e}")))?;
        Ok(HfTokenizer { json, tokenizer })
    }

    /// The pre-tokenizer name llama.cpp's table gives this tokenizer, by the hash of the ids
    /// of [`CHECK_TEXT`] (special tokens added, as `tokenizer.encode` adds them).
    pub(crate) fn pre_tokenizer(&self, dir: &Path) -> Result<String> {
        let ids = self.tokenizer.encode(CHECK_TEXT.as_bytes(), true, true);
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
