//! Tokenizers rebuilt from a GGUF file's `tokenizer.*` metadata alone, producing the same ids
//! as llama.cpp for the same file, and chat templates rendered as Hugging Face does.
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let model = gguf_format::GgufFile::open("model.gguf")?;
//! let tokenizer = gguf_tokenizer::Tokenizer::from_gguf(model.file())?;
//! use gguf_tokenizer::{DecodeOptions, EncodeOptions};
//! let ids = tokenizer.encode(b"Hello world", EncodeOptions::ADD_AND_PARSE_SPECIAL);
//! assert_eq!(tokenizer.decode(&ids, DecodeOptions::REMOVE_SPECIAL), b"Hello world");
//! # Ok(()) }
//! ```
// Tokenization needs no `unsafe`; forbidding it keeps it that way.
#![forbid(unsafe_code)]

mod bpe;
pub mod chat;
pub mod chat_builtin;
mod error;
pub mod hf_json;
pub mod pre_regexes;
mod pretok;
pub mod pystr;
mod special;
mod spm;
mod stream;
mod ugm;
mod unicode;
mod vocab;
mod wpm;

pub use error::{Result, TokenizerError};
pub use stream::StreamDecoder;
pub use vocab::{ModelKind, SpecialIds, TokenType};

/// How [`Tokenizer::encode`] treats special tokens: llama.cpp's `add_special` and
/// `parse_special`. The constants name the four combinations; `Default` is [`Self::PLAIN`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EncodeOptions {
    /// Adds BOS/EOS as the file's metadata asks. WordPiece (`bert`) models, as in llama.cpp,
    /// add BOS and SEP whenever it is set.
    pub add_special: bool,
    /// Turns control-token texts in the input into their ids (user-defined tokens are always
    /// matched).
    pub parse_special: bool,
}

impl EncodeOptions {
    /// Neither: no BOS/EOS added, control-token texts stay text.
    pub const PLAIN: EncodeOptions = EncodeOptions {
        add_special: false,
        parse_special: false,
    };
    /// BOS/EOS added, control-token texts stay text (`llama-tokenize --no-parse-special`).
    pub const ADD_SPECIAL: EncodeOptions = EncodeOptions {
        add_special: true,
        parse_special: false,
    };
    /// No BOS/EOS added, control-token texts become their ids (`llama-tokenize --no-bos`).
    pub const PARSE_SPECIAL: EncodeOptions = EncodeOptions {
        add_special: false,
        parse_special: true,
    };
    /// Both, as a prompt is tokenized (`llama-tokenize`'s defaults).
    pub const ADD_AND_PARSE_SPECIAL: EncodeOptions = EncodeOptions {
        add_special: true,
        parse_special: true,
    };
}

/// How [`Tokenizer::decode`] treats special tokens: llama.cpp's `remove_special` and
/// `unparse_special`. The constants name the four combinations; `Default` is [`Self::PLAIN`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct DecodeOptions {
    /// Drops a leading BOS and a trailing EOS that the model adds itself.
    pub remove_special: bool,
    /// Renders control tokens' texts (else they give nothing).
    pub unparse_special: bool,
}

impl DecodeOptions {
    /// Neither: every token kept, control tokens give nothing.
    pub const PLAIN: DecodeOptions = DecodeOptions {
        remove_special: false,
        unparse_special: false,
    };
    /// The BOS/EOS the model adds dropped, control tokens give nothing.
    pub const REMOVE_SPECIAL: DecodeOptions = DecodeOptions {
        remove_special: true,
        unparse_special: false,
    };
    /// Every token kept, control tokens as their texts.
    pub const UNPARSE_SPECIAL: DecodeOptions = DecodeOptions {
        remove_special: false,
        unparse_special: true,
    };
    /// The BOS/EOS the model adds dropped, other control tokens as their texts.
    pub const REMOVE_AND_UNPARSE_SPECIAL: DecodeOptions = DecodeOptions {
        remove_special: true,
        unparse_special: true,
    };
}

use gguf_format::GgufFile;

use special::{Fragment, SpecialMatcher};
use vocab::{Attr, Vocab};

/// `▁` (U+2581), SentencePiece's visible space.
const ESCAPED_SPACE: &[u8] = "\u{2581}".as_bytes();

/// A tokenizer rebuilt from a GGUF file's metadata.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    special: SpecialMatcher,
    model: Model,
    warnings: Vec<String>,
}

/// What encoding needs beyond the vocabulary, one variant per way of encoding.
#[derive(Debug, Clone)]
enum Model {
    /// SentencePiece: the vocabulary's scores are the model.
    Spm,
    /// WordPiece: the vocabulary is the model.
    Wpm,
    Bpe(BpeModel),
    Ugm(ugm::UgmModel),
    /// The pipeline of a `tokenizer.huggingface.json` file (its vocabulary is a BPE or
    /// WordPiece one, which decoding follows).
    HuggingFace(Box<hf_json::HfPipeline>),
}

/// What a byte-level BPE model adds to the vocabulary.
#[derive(Debug, Clone)]
struct BpeModel {
    merges: bpe::Merges,
    pre: pretok::PreTokenizer,
    options: bpe::BpeOptions,
}

impl Tokenizer {
    /// Builds the tokenizer `file`'s `tokenizer.ggml.*` metadata describes; a file without
    /// `tokenizer.ggml.model` but with `tokenizer.huggingface.json` gets the Hugging Face
    /// tokenizer that JSON describes.
    pub fn from_gguf(file: &GgufFile) -> Result<Tokenizer> {
        if hf_json::applies(file) {
            return hf_json::tokenizer_from_gguf(file);
        }
        let vocab = Vocab::from_gguf(file)?;
        let mut warnings = Vec::new();
        let model = match vocab.kind {
            ModelKind::Spm => Model::Spm,
            ModelKind::Wpm => Model::Wpm,
            ModelKind::Ugm => Model::Ugm(ugm::UgmModel::new(&vocab)?),
            ModelKind::Bpe => {
                let merges =
                    bpe::Merges::new(&vocab, file.get_array::<&[u8]>("tokenizer.ggml.merges")?);
                let pre = if vocab.pre.is_empty() {
                    warnings.push(
                        "tokenizer.ggml.pre is missing: using llama.cpp's `default` pre-tokenizer, \
                         as llama.cpp does; generation quality may suffer"
                            .to_string(),
                    );
                    pretok::PreTokenizer::FALLBACK
                } else {
                    pretok::PreTokenizer::from_name(&vocab.pre).unwrap_or_else(|| {
                        warnings.push(format!(
                            "tokenizer.ggml.pre `{}` is unknown: using llama.cpp's `default` \
                             pre-tokenizer (llama.cpp refuses such a file)",
                            vocab.pre
                        ));
                        pretok::PreTokenizer::FALLBACK
                    })
                };
                Model::Bpe(BpeModel {
                    merges,
                    pre,
                    options: bpe::BpeOptions::for_pre(&vocab.pre),
                })
            }
        };
        let special = SpecialMatcher::new(&vocab);
        Ok(Tokenizer {
            vocab,
            special,
            model,
            warnings,
        })
    }

    /// Builds the tokenizer a Hugging Face `tokenizer.json` text describes, as `tokenizers`
    /// runs it (the pipeline of a file's `tokenizer.huggingface.json`).
    ///
    /// ```
    /// let json = r###"{"model": {"type": "WordPiece", "unk_token": "[UNK]",
    ///     "vocab": {"[UNK]": 0, "hello": 1, "##s": 2}},
    ///     "pre_tokenizer": {"type": "BertPreTokenizer"}}"###;
    /// let tok = gguf_tokenizer::Tokenizer::from_huggingface_json(json)?;
    /// assert_eq!(tok.encode(b"hellos", gguf_tokenizer::EncodeOptions::PLAIN), [1, 2]);
    /// # Ok::<(), gguf_tokenizer::TokenizerError>(())
    /// ```
    pub fn from_huggingface_json(json: &str) -> Result<Tokenizer> {
        hf_json::from_json(json, vocab::SpecialIds::default())
    }

    /// Checks a Hugging Face `tokenizer.json` text as far as it can be checked while it is
    /// read, building and keeping nothing: the first malformed merge of `model.merges` (not
    /// `"a b"` nor `["a", "b"]`) is an error naming it (`model.merges[0]`), found without
    /// reading the merges after it into memory. [`Tokenizer::from_huggingface_json`] runs it
    /// first; a reader that parses the JSON for other purposes runs it before that parse.
    ///
    /// ```
    /// use gguf_tokenizer::Tokenizer;
    /// let json = r#"{"model": {"type": "BPE", "vocab": {}, "merges": ["a b c", "a b"]}}"#;
    /// let e = Tokenizer::check_huggingface_json(json).unwrap_err();
    /// assert!(e.to_string().contains("`model.merges[0]`"), "{e}");
    /// assert!(Tokenizer::check_huggingface_json(r#"{"model": {"merges": [["a", "b"]]}}"#).is_ok());
    /// # Ok::<(), gguf_tokenizer::TokenizerError>(())
    /// ```
    pub fn check_huggingface_json(json: &str) -> Result<()> {
        hf_json::check_structure(json)
    }

    /// What was odd about the metadata but did not stop loading (e.g. an unknown
    /// `tokenizer.ggml.pre`, replaced by the default pre-tokenizer).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
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

    /// `tokenizer.ggml.add_sep_token` (default: true for WordPiece), llama.cpp's
    /// `llama_vocab_get_add_sep`: whether a pair of texts is joined with SEP. Tokenizing does
    /// not read it (WordPiece always ends with SEP when adding special tokens).
    pub fn adds_sep(&self) -> bool {
        self.vocab.add_sep
    }

    /// The stored text of token `id` (`None` out of range).
    pub fn token_text(&self, id: u32) -> Option<&[u8]> {
        self.vocab.tokens.get(id as usize).map(|t| &*t.text)
    }

    /// A decoder for tokens as they are generated (see [`StreamDecoder`]); `special` renders
    /// control tokens.
    pub fn stream_decoder(&self, special: bool) -> StreamDecoder<'_> {
        StreamDecoder::new(self, special)
    }

    /// Whether the model puts a space before the text (SentencePiece's `add_space_prefix`).
    pub fn adds_space_prefix(&self) -> bool {
        self.vocab.add_space_prefix
    }

    /// Whether generation stops at token `id` (EOS, EOT, EOM and the chat markers llama.cpp
    /// recognises by their text).
    pub fn is_end_of_generation(&self, id: u32) -> bool {
        self.vocab.eog.binary_search(&id).is_ok()
    }

    /// The tokens that end generation, ascending.
    pub fn end_of_generation_ids(&self) -> &[u32] {
        &self.vocab.eog
    }

    /// Whether token `id` is a control token (BOS, EOS, chat markers) after llama.cpp's loader
    /// rules, which mark some tokens stored as normal or user-defined as control.
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab
            .tokens
            .get(id as usize)
            .is_some_and(|t| t.attr.contains(Attr::CONTROL))
    }

    /// The stored type of token `id` (`None` out of range).
    pub fn token_type(&self, id: u32) -> Option<TokenType> {
        self.vocab.tokens.get(id as usize).map(|t| t.ty)
    }

    /// The id of the token whose stored text is exactly `text`.
    pub fn token_id(&self, text: &[u8]) -> Option<u32> {
        self.vocab.id(text)
    }

    /// Tokenizes `text` as `llama_tokenize` does, with special tokens as `options` says
    /// ([`EncodeOptions`]). Any bytes are accepted.
    pub fn encode(&self, text: &[u8], options: EncodeOptions) -> Vec<u32> {
        let EncodeOptions {
            add_special,
            parse_special,
        } = options;
        let vocab = &self.vocab;
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        if add_special && (vocab.add_bos || vocab.kind == ModelKind::Wpm) {
            out.extend(vocab.special.bos);
        }
        let fragments = || self.special.partition(vocab, text, parse_special);
        match &self.model {
            // Its own added-token matching, normalizers and post-processor.
            Model::HuggingFace(hf) => return hf.encode(text, add_special, parse_special),
            Model::Spm => {
                let mut prev_special = true;
                let mut buf = Vec::new();
                for fragment in fragments() {
                    match fragment {
                        Fragment::Text(range) => {
                            buf.clear();
                            if vocab.add_space_prefix && prev_special {
                                buf.extend_from_slice(ESCAPED_SPACE);
                            }
                            escape_spaces_into(&text[range], &mut buf);
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
            Model::Bpe(model) => {
                let mut scratch = bpe::Scratch::default();
                let mut escaped = Vec::new();
                for fragment in fragments() {
                    match fragment {
                        Fragment::Text(range) => {
                            let raw = if vocab.escape_whitespaces {
                                escaped.clear();
                                escape_spaces_into(&text[range], &mut escaped);
                                &escaped[..]
                            } else {
                                &text[range]
                            };
                            bpe::tokenize(
                                vocab,
                                &model.merges,
                                model.pre,
                                model.options,
                                raw,
                                &mut scratch,
                                &mut out,
                            )
                        }
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            Model::Wpm => {
                for fragment in fragments() {
                    match fragment {
                        Fragment::Text(range) => wpm::tokenize(vocab, &text[range], &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
            Model::Ugm(model) => {
                for fragment in fragments() {
                    match fragment {
                        Fragment::Text(range) => model.tokenize(vocab, &text[range], &mut out),
                        Fragment::Token(id) => out.push(id),
                    }
                }
            }
        }
        if add_special && vocab.kind == ModelKind::Wpm {
            out.extend(vocab.special.sep);
        } else if add_special && vocab.add_eos {
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
        let a = token.attr;
        if a.intersects(Attr::CONTROL | Attr::UNKNOWN) && !special {
            Vec::new()
        } else if a.intersects(Attr::CONTROL | Attr::UNKNOWN | Attr::USER_DEFINED) {
            token.text.to_vec()
        } else if a.contains(Attr::NORMAL) {
            if self.vocab.kind == ModelKind::Bpe && !self.vocab.escape_whitespaces {
                bpe::decode_text(&token.text)
            } else {
                unescape_spaces(&token.text)
            }
        } else if a.contains(Attr::BYTE) {
            byte_token_value(&token.text).map_or(Vec::new(), |b| vec![b])
        } else {
            // Unused and undefined tokens render as nothing, like control tokens.
            Vec::new()
        }
    }

    /// The text of `ids`, as llama.cpp's `llama_detokenize`, with special tokens as `options`
    /// says ([`DecodeOptions`]). When the model adds a space prefix, the first piece loses one
    /// leading space (unless a BOS was removed).
    pub fn decode(&self, ids: &[u32], options: DecodeOptions) -> Vec<u8> {
        let DecodeOptions {
            remove_special,
            unparse_special,
        } = options;
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
        let clean_spaces = match &self.model {
            Model::Bpe(b) => b.options.clean_spaces,
            _ => vocab.kind == ModelKind::Wpm,
        };
        if clean_spaces {
            bpe::clean_spaces(&mut out);
        }
        out
    }
}

/// ` ` to `▁`, appended to `out`.
fn escape_spaces_into(text: &[u8], out: &mut Vec<u8>) {
    for &b in text {
        if b == b' ' {
            out.extend_from_slice(ESCAPED_SPACE);
        } else {
            out.push(b);
        }
    }
}

/// `▁` back to ` `.
fn unescape_spaces(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut copied = 0;
    for at in memchr::memmem::find_iter(text, ESCAPED_SPACE) {
        out.extend_from_slice(&text[copied..at]);
        out.push(b' ');
        copied = at + ESCAPED_SPACE.len();
    }
    out.extend_from_slice(&text[copied..]);
    out
}

/// The byte of a `<0xNN>` token.
fn byte_token_value(text: &[u8]) -> Option<u8> {
    let hex = text.strip_prefix(b"<0x")?.strip_suffix(b">")?;
    u8::from_str_radix(std::str::from_utf8(hex).ok()?, 16).ok()
}
