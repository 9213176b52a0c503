//! Tokenizers rebuilt from a GGUF file's `tokenizer.*` metadata alone, producing the same ids
//! as llama.cpp for the same file, and chat templates rendered as Hugging Face does.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = gguf_format::GgufFile::open("model.gguf")?;
//! let tokenizer = gguf_tokenizer::Tokenizer::from_gguf(model.file())?;
//! let ids = tokenizer.encode(b"Hello world", true, true);
//! assert_eq!(tokenizer.decode(&ids, true, false), b"Hello world");
//! # Ok(()) }
//! ```

pub mod chat;
mod error;
mod pretok;
mod special;
mod spm;
mod unicode;
mod vocab;

pub use error::{Result, TokenizerError};
pub use vocab::{ModelKind, SpecialIds, TokenType};

use gguf_format::GgufFile;

use special::{Fragment, SpecialMatcher};
use vocab::Vocab;

/// `▁` (U+2581), SentencePiece's visible space.
const ESCAPED_SPACE: &[u8] = "\u{2581}".as_bytes();

/// A tokenizer rebuilt from a GGUF file's metadata.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    special: SpecialMatcher,
}

impl Tokenizer {
    /// Builds the tokenizer `file`'s `tokenizer.ggml.*` metadata describes.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer> {
        let vocab = Vocab::from_gguf(file)?;
        if vocab.kind == ModelKind::Bpe {
            return Err(TokenizerError::Metadata(
                "tokenizer.ggml.model `gpt2` (byte-level BPE) is not supported yet".into(),
            ));
        }
        let special = SpecialMatcher::new(&vocab);
        Ok(Tokenizer { vocab, special })
    }

    /// `tokenizer.ggml.pre`, the pre-tokenizer a byte-level BPE model names (empty for
    /// other models or when absent).
    pub fn pre_tokenizer(&self) -> &str {
        &self.vocab.pre
    }

    /// The tokenizer model.
    pub fn kind(&self) -> ModelKind {
        self.vocab.kind
    }

    /// Number of tokens in the vocabulary.
    pub fn vocab_size(&self) -> usize {
        self.vocab.tokens.len()
    }

    /// The ids of the tokens with a role.
    pub fn special_ids(&self) -> SpecialIds {
        self.vocab.special
    }

    /// Whether `encode(.., add_special = true, ..)` starts with BOS (and ends with EOS).
    pub fn adds_bos(&self) -> bool {
        self.vocab.add_bos
    }

    /// The stored text of token `id` (`None` out of range).
    pub fn token_text(&self, id: u32) -> Option<&[u8]> {
        self.vocab.tokens.get(id as usize).map(|t| &*t.text)
    }

    /// The type of token `id` (`None` out of range).
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.vocab.tokens.get(id as usize).map(|t| t.ty)
    }

    /// The id of the token whose stored text is exactly `text`.
    pub fn token_id(&self, text: &[u8]) -> Option<u32> {
        self.vocab.id(text)
    }

    /// Tokenizes `text` as `llama_tokenize` does. `add_special` adds BOS/EOS as the file's
    /// metadata asks; `parse_special` turns control-token texts in the input into their ids
    /// (user-defined tokens are always matched). Any bytes are accepted.
    pub fn encode(&self, text: &[u8], add_special: bool, parse_special: bool) -> Vec<u32> {
        let vocab = &self.vocab;
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && vocab.add_bos {
            out.extend(vocab.special.bos);
        }
        let fragments = self.special.partition(vocab, text, parse_special);
        match vocab.kind {
            ModelKind::Spm => {
                let mut prev_special = true;
                let mut buf = Vec::new();
                for fragment in fragments {
                    match fragment {
                        Fragment::Text(range) => {
                            buf.clear();
                            if vocab.add_space_prefix && prev_special {
                                buf.extend_from_slice(ESCAPED_SPACE);
                            }
                            for &b in &text[range] {
                                if b == b' ' {
                                    buf.extend_from_slice(ESCAPED_SPACE);
                                } else {
                                    buf.push(b);
                                }
                            }
                            spm::tokenize(vocab, &buf, &mut out);
                            prev_special = false;
                        }
                        Fragment::Token(id) => {
                            out.push(id);
                            prev_special = true;
                        }
                    }
                }
            }
            ModelKind::Bpe => unreachable!("rejected in from_gguf"),
        }
        if add_special && vocab.add_eos {
            out.extend(vocab.special.eos);
        }
        out
    }

    /// The bytes token `id` stands for, as llama.cpp's `token_to_piece`: control and unknown
    /// tokens only when `special` is set; `▁` back to spaces; byte tokens as their byte.
    /// Out-of-range ids give nothing.
    pub fn token_to_piece(&self, id: u32, special: bool) -> Vec<u8> {
        let Some(token) = self.vocab.tokens.get(id as usize) else {
            return Vec::new();
        };
        match token.ty {
            TokenType::Control | TokenType::Unknown if !special => Vec::new(),
            TokenType::Control | TokenType::Unknown | TokenType::UserDefined => token.text.to_vec(),
            TokenType::Normal => unescape_spaces(&token.text),
            TokenType::Byte => byte_token_value(&token.text).map_or(Vec::new(), |b| vec![b]),
            TokenType::Unused | TokenType::Undefined => Vec::new(),
        }
    }

    /// The text of `ids`, as llama.cpp's `llama_detokenize`: `remove_special` drops a leading
    /// BOS and a trailing EOS that the model adds itself; `unparse_special` renders control
    /// tokens' texts. When the model adds a space prefix, the first piece loses one leading
    /// space (unless a BOS was removed).
    pub fn decode(&self, ids: &[u32], remove_special: bool, unparse_special: bool) -> Vec<u8> {
        let vocab = &self.vocab;
        let mut ids = ids;
        let mut remove_space = vocab.add_space_prefix;
        if remove_special && vocab.add_bos && ids.first() == vocab.special.bos.as_ref() {
            remove_space = false;
            ids = &ids[1..];
        }
        if remove_special && vocab.add_eos && ids.last() == vocab.special.eos.as_ref() {
            ids = &ids[..ids.len() - 1];
        }
        let mut out = Vec::new();
        for &id in ids {
            let piece = self.token_to_piece(id, unparse_special);
            match piece.strip_prefix(b" ") {
                Some(rest) if remove_space => out.extend_from_slice(rest),
                _ => out.extend_from_slice(&piece),
            }
            remove_space = false;
        }
        out
    }
}

/// `▁` back to ` `.
fn unescape_spaces(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        if text[i..].starts_with(ESCAPED_SPACE) {
            out.push(b' ');
            i += ESCAPED_SPACE.len();
        } else {
            out.push(text[i]);
            i += 1;
        }
    }
    out
}

/// The byte of a `<0xNN>` token.
fn byte_token_value(text: &[u8]) -> Option<u8> {
    let hex = text.strip_prefix(b"<0x")?.strip_suffix(b">")?;
    u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}
