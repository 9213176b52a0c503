//! Tokenizers described by `tokenizer.huggingface.json` (a Hugging Face `tokenizer.json`) in a
//! file without `tokenizer.ggml.model`.
//!
//! llama.cpp does not read this key; the reference is Hugging Face's `tokenizers` library, whose
//! pipeline is reproduced step by step:
//!
//! The layout follows `tokenizers`': `added_vocabulary`, `normalizers`, `pre_tokenizers`,
//! `models`, `processors`, on `piece`'s offset-keeping text; `vocab` lays the
//! vocabulary out as llama.cpp's for the crate's decoder. Unicode data: NFC/NFD from
//! `unicode-normalization` and `\p{Mn}`/`\p{Nd}` from `unicode-properties`, as `tokenizers`
//! takes them from the unicode-rs crates; the other categories are the crate's (llama.cpp's).
//!
//! 1. **Added tokens** with `normalized: false` are found in the raw text, leftmost-longest
//!    first, honouring `single_word`, `lstrip` and `rstrip`. With `parse_special = false`
//!    special ones are skipped (`encode_special_tokens`).
//! 2. Each piece between them is **normalized** (`NFC`, `NFD`, `Lowercase`, `Prepend`,
//!    `Replace` with a string pattern, `Strip`, `StripAccents`, `BertNormalizer`, `Sequence`),
//!    then added tokens with `normalized: true` are found in it (their content normalized too).
//! 3. The **pre-tokenizer** cuts the pieces into words: `ByteLevel` (with or without its GPT-2
//!    regex, with `add_prefix_space`), `Split` with a regex, `Digits`, `Metaspace` (every
//!    `prepend_scheme`, with or without `split`), `Split` with a string, `WhitespaceSplit`,
//!    `CharDelimiterSplit`, `Punctuation`, `BertPreTokenizer`, `Sequence`. A run of regex
//!    splits is matched against the regex lists llama.cpp gives its pre-tokenizer types and
//!    then runs through that type's splitter (`crate::pretok`); an unknown regex falls back to
//!    llama.cpp's `default` type, with a warning.
//! 4. The **model** tokenizes each word: `BPE` (a port of `tokenizers`' own merge loop, so its
//!    `byte_fallback`, `unk_token`/`fuse_unk`, `ignore_merges` and duplicate-merge rules are
//!    exact) or `WordPiece`.
//! 5. With `add_special`, the **post-processor**'s tokens go around the ids
//!    (`TemplateProcessing`, `BertProcessing`, `RobertaProcessing`, `ByteLevel`, `Sequence`).
//!
//! Anything else (Unigram and WordLevel models, `Precompiled` or NFKC normalizers, regex
//! `Replace`, BPE dropout or subword affixes, ...) is a [`TokenizerError::Metadata`] naming it.
//!
//! Decoding uses the crate's decoder: byte-level tokens back to their bytes (ByteLevel), `▁` to
//! spaces otherwise, `<0xNN>` byte tokens as their byte, added special tokens as control tokens
//! and the others as user-defined tokens. WordPiece texts are stored as llama.cpp stores them
//! (`▁word`, continuation `##x` as `x`), so [`Tokenizer::token_text`] gives those.

mod added_vocabulary;
mod models;
mod normalizers;
mod piece;
mod pre_tokenizers;
mod processors;
pub mod schema;
mod vocab;

use gguf_format::GgufFile;
use serde_json::Value;

use crate::error::{Result, TokenizerError};
use crate::special::SpecialMatcher;
use crate::unicode::byte_to_bpe_char;
use crate::vocab::SpecialIds;
use crate::Tokenizer;
use rustc_hash::FxHashMap;

use added_vocabulary::{AddedMatcher, AddedToken};
use models::Model;
use normalizers::{normalize, parse_normalizer, Normalizer};
use piece::Piece;
use pre_tokenizers::{PreStep, PreTokenizerSpec};
use processors::PostProcessor;
use vocab::build_vocab;

/// The metadata key holding the JSON.
pub(crate) const KEY: &str = "tokenizer.huggingface.json";

fn err(msg: impl std::fmt::Display) -> TokenizerError {
    TokenizerError::Metadata(format!("{KEY}: {msg}"))
}

/// Whether `file` is to be read through its `tokenizer.huggingface.json`: it has that key and
/// no `tokenizer.ggml.model`.
pub(crate) fn applies(file: &GgufFile) -> bool {
    file.value("tokenizer.ggml.model").is_none() && file.value(KEY).is_some()
}

/// Builds the tokenizer from `file`'s `tokenizer.huggingface.json`.
pub(crate) fn tokenizer_from_gguf(file: &GgufFile) -> Result<Tokenizer> {
    let json: &str = file.get(KEY)?;
    let mut overrides = SpecialIds::default();
    for (key, slot) in [
        ("tokenizer.ggml.bos_token_id", &mut overrides.bos),
        ("tokenizer.ggml.eos_token_id", &mut overrides.eos),
        ("tokenizer.ggml.eot_token_id", &mut overrides.eot),
        ("tokenizer.ggml.unknown_token_id", &mut overrides.unk),
        ("tokenizer.ggml.padding_token_id", &mut overrides.pad),
    ] {
        if let Some(v) = file.value(key) {
            *slot = Some(
                v.as_integer()
                    .and_then(|i| u32::try_from(i).ok())
                    .ok_or_else(|| TokenizerError::Metadata(format!("{key} must be a token id")))?,
            );
        }
    }
    from_json(json, overrides)
}

/// Checks the large arrays of a `tokenizer.json` text while reading it, before anything is
/// built from it: the first malformed element of `model.merges` is an error naming it, without
/// the rest being read into memory.
pub(crate) fn check_structure(json: &str) -> Result<()> {
    models::bpe::check_merges(json)
}

/// Builds the tokenizer a `tokenizer.json` text describes; `overrides` are special ids given
/// elsewhere (the file's `tokenizer.ggml.*_token_id`).
pub(crate) fn from_json(json: &str, overrides: SpecialIds) -> Result<Tokenizer> {
    check_structure(json)?;
    let root: Value = serde_json::from_str(json).map_err(|e| err(format!("invalid JSON: {e}")))?;
    let Value::Object(mut root) = root else {
        return Err(err("the JSON is not an object"));
    };
    let mut warnings = Vec::new();
    // The decoder is not used (decoding is the crate's own, see `vocab`), so one that is not
    // `tokenizers`' does not stop loading.
    if let Some(decoder) = root.remove("decoder").filter(|v| !v.is_null()) {
        if let Err(e) = schema::from_value::<schema::Decoder>(decoder) {
            warnings.push(format!(
                "{KEY}: `decoder` is not one that `tokenizers` reads ({e}); it is not used"
            ));
        }
    }
    let root: schema::TokenizerJson = schema::from_value(Value::Object(root)).map_err(err)?;

    if let Some(t) = root.truncation.as_ref().filter(|v| !v.is_null()) {
        warnings.push(format!(
            "{KEY}: `truncation` ({t}) is ignored: encode returns every token"
        ));
    }
    if let Some(p) = root.padding.as_ref().filter(|v| !v.is_null()) {
        warnings.push(format!("{KEY}: `padding` ({p}) is ignored"));
    }

    let mut model = Model::parse(root.model)?;
    let normalizer = match root.normalizer {
        None => Vec::new(),
        Some(n) => parse_normalizer(n)?,
    };
    let pre = match root.pre_tokenizer {
        None => PreTokenizerSpec::default(),
        Some(p) => PreTokenizerSpec::parse(p, &mut warnings)?,
    };
    if let Model::Bpe(bpe) = &mut model {
        bpe.byte_level = pre.byte_level;
    }

    // Added tokens get the ids `tokenizers` gives them: the model's id for their content, else
    // the next id after the model vocabulary (the JSON's `id` is only checked).
    let model_ids = model.vocab();
    let model_size = model_ids.len() as u32;
    let mut added: Vec<AddedToken> = Vec::new();
    let mut added_by_content: FxHashMap<String, usize> = FxHashMap::default();
    let mut next_id = model_size;
    for entry in root.added_tokens.into_iter().flatten() {
        if entry.content.is_empty() {
            continue;
        }
        let special = entry.special.unwrap_or(false);
        let token = AddedToken {
            id: 0,
            single_word: entry.single_word.unwrap_or(false),
            lstrip: entry.lstrip.unwrap_or(false),
            rstrip: entry.rstrip.unwrap_or(false),
            normalized: entry.normalized.unwrap_or(!special),
            special,
            pattern: String::new(),
            content: entry.content,
        };
        let id = if let Some(&k) = added_by_content.get(&token.content) {
            added[k].id
        } else if let Some(&id) = model_ids.get(token.content.as_str()) {
            id
        } else {
            // `tokenizers` (loading adds all of them in one call): the vocabulary size,
            // counting up.
            let id = next_id;
            next_id += 1;
            id
        };
        if let Some(given) = entry.id {
            if given != u64::from(id) {
                warnings.push(format!(
                    "{KEY}: added token `{}` has id {given} in the JSON but {id} as \
                     `tokenizers` loads it; {id} is used",
                    token.content
                ));
            }
        }
        match added_by_content.get(&token.content) {
            Some(&k) => added[k] = AddedToken { id, ..token },
            None => {
                added_by_content.insert(token.content.clone(), added.len());
                added.push(AddedToken { id, ..token });
            }
        }
    }
    // Normalized added tokens match their normalized content.
    for t in &mut added {
        t.pattern = if t.normalized && !normalizer.is_empty() {
            let piece = normalize(&normalizer, Piece::new(&t.content, 0));
            piece.chars.iter().collect()
        } else {
            t.content.clone()
        };
    }

    let post = match root.post_processor {
        None => PostProcessor::default(),
        Some(p) => PostProcessor::parse(p, &|text: &str| {
            added_by_content
                .get(text)
                .map(|&k| added[k].id)
                .or_else(|| model_ids.get(text).copied())
        })?,
    };

    let vocab = build_vocab(
        &model,
        &added,
        &normalizer,
        &pre,
        &post,
        overrides,
        &mut warnings,
    )?;
    let matcher = AddedMatcher::new(&added)?;
    let pipeline = HfPipeline {
        normalizer,
        pre: pre.steps,
        byte_level: pre.byte_level,
        model,
        added: matcher,
        prefix: post.prefix,
        suffix: post.suffix,
    };
    let special = SpecialMatcher::new(&vocab);
    Ok(Tokenizer {
        vocab,
        special,
        model: crate::Model::HuggingFace(Box::new(pipeline)),
        warnings,
    })
}

// ---------------------------------------------------------------------------------------------
// JSON helpers

/// A single character given as a string (`Metaspace.replacement`, `CharDelimiterSplit`).
fn one_char(s: &str, what: &str) -> Result<char> {
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(err(format!("`{what}` must be one character, not {s:?}"))),
    }
}

// ---------------------------------------------------------------------------------------------
// Encoding

/// Everything of a `tokenizer.json` that encoding needs beyond the vocabulary.
#[derive(Clone, Debug)]
pub(crate) struct HfPipeline {
    normalizer: Vec<Normalizer>,
    pre: Vec<PreStep>,
    byte_level: bool,
    model: Model,
    added: AddedMatcher,
    prefix: Vec<u32>,
    suffix: Vec<u32>,
}

impl HfPipeline {
    /// `Tokenizer.encode(text, add_special_tokens)` of `tokenizers`, with
    /// `encode_special_tokens = !parse_special`. Invalid UTF-8 is decoded lossily first (each
    /// maximal invalid sequence becomes U+FFFD), as `tokenizers` only takes strings.
    pub(crate) fn encode(&self, text: &[u8], add_special: bool, parse_special: bool) -> Vec<u32> {
        let text = String::from_utf8_lossy(text);
        let skip_special = !parse_special;
        let mut out = Vec::with_capacity(text.len() / 3 + 4);
        if add_special {
            out.extend_from_slice(&self.prefix);
        }
        for (id, range) in self.added.find(&self.added.raw, &text, skip_special) {
            if let Some(id) = id {
                out.push(id);
                continue;
            }
            if range.is_empty() {
                continue;
            }
            let piece = normalize(
                &self.normalizer,
                Piece::new(&text[range.clone()], range.start),
            );
            if piece.is_empty() {
                continue;
            }
            if self.added.normalized.is_empty() {
                self.pre_tokenize_and_model(piece, &mut out);
                continue;
            }
            let s = piece.string();
            let index = piece.char_index_of_bytes();
            for (id, r) in self.added.find(&self.added.normalized, &s, skip_special) {
                match id {
                    Some(id) => out.push(id),
                    None if r.is_empty() => {}
                    None => self.pre_tokenize_and_model(
                        piece.slice(index[r.start]..index[r.end]),
                        &mut out,
                    ),
                }
            }
        }
        if add_special {
            out.extend_from_slice(&self.suffix);
        }
        out
    }

    fn pre_tokenize_and_model(&self, piece: Piece, out: &mut Vec<u32>) {
        let mut pieces = vec![piece];
        let mut next = Vec::new();
        for step in &self.pre {
            next.clear();
            for p in pieces.drain(..) {
                step.apply(p, &mut next);
            }
            next.retain(|p| !p.is_empty());
            std::mem::swap(&mut pieces, &mut next);
        }
        let mut word = String::new();
        for p in &pieces {
            word.clear();
            if self.byte_level {
                let mut buf = [0u8; 4];
                for c in &p.chars {
                    for &b in c.encode_utf8(&mut buf).as_bytes() {
                        word.push(byte_to_bpe_char(b));
                    }
                }
            } else {
                word.extend(p.chars.iter());
            }
            self.model.tokenize(&word, out);
        }
    }
}
