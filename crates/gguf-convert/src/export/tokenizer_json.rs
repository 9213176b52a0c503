//! Hugging Face tokenizer files rebuilt from a GGUF file's `tokenizer.ggml.*` metadata.
//!
//! **`gpt2` (byte-level BPE)**: a `tokenizer.json` with a BPE model (the vocabulary without
//! llama.cpp's `[PADn]` fillers, the merges as pairs), the pre-tokenizer of
//! `tokenizer.ggml.pre` as `tokenizers` spells it (ByteLevel's GPT-2 regex for `gpt-2`;
//! `Split` regexes then ByteLevel without its regex for `llama-bpe`, `qwen2`, `dbrx`,
//! `default`...; `Digits` then ByteLevel for `smollm`, `starcoder`, `refact`), NFC for the
//! Qwen 2 family as Qwen's own files have it, `ignore_merges` where llama.cpp ignores merges.
//!
//! **`llama` (SentencePiece)**: a BPE model with `byte_fallback` and the merges SentencePiece's
//! scores imply (a merge for every split of a piece into two pieces, ranked by the piece's
//! score, as `transformers`' `GemmaSentencePieceExtractor` makes them), the `▁` normalizer
//! (with a `▁` prepended when `tokenizer.ggml.add_space_prefix` is true, the default), and a
//! `tokenizer.model` (SentencePiece `ModelProto`: pieces with their scores and types, BPE,
//! byte fallback) from which `convert_hf_to_gguf.py`'s `_set_vocab_sentencepiece` rebuilds
//! the same tokens, scores and types.
//!
//! **`bert` (WordPiece)**: the converter's phantom-space layout undone (`▁word` → `word`, a
//! continuation `x` → `##x`), a WordPiece model with `BertNormalizer` (its `lowercase` and
//! `strip_accents` from `tokenizer.ggml.normalizer.*`), `BertPreTokenizer`, `[CLS] A [SEP]`.
//!
//! All: control, user-defined and unknown tokens are `added_tokens` (unnormalized, special
//! unless user-defined) matched in the raw text as llama.cpp matches them; the post-processor
//! adds BOS/EOS as `tokenizer.ggml.add_bos_token`/`add_eos_token` say. `tokenizer_config.json`
//! has the special tokens, the `add_*_token` flags the file has, the chat template(s) and
//! `added_tokens_decoder`, which lists the control and user-defined tokens that
//! `convert_hf_to_gguf.py` reads from it (those whose score it sets, -1000, is theirs).

use std::collections::HashMap;

use gguf_format::GgufFile;
use gguf_tokenizer::hf_json::schema::{
    self, AddedToken, Behavior, BertNormalizer, Bpe, ByteLevel, Decoder, Digits, Model, Normalizer,
    OrderedMap, Pattern, PostProcessor, PreTokenizer, SequenceId, SpecialToken, TemplatePiece,
    TemplateProcessing, TokenizerJson, WordPiece,
};
use gguf_tokenizer::pre_regexes;
use serde_json::{json, Map, Value};

use super::Arch;
use crate::error::{Error, Result};
use crate::sentencepiece::{ModelProto, NormalizerSpec, PieceType, SentencePiece, TrainerSpec};

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
mod ty {
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}

/// The tokenizer files of an export.
#[derive(Debug, Clone)]
pub(crate) struct TokenizerExport {
    /// `tokenizer.json`.
    pub tokenizer_json: String,
    /// `tokenizer_config.json`.
    pub tokenizer_config: Value,
    /// `tokenizer.model`, for SentencePiece vocabularies.
    pub sentencepiece_model: Option<Vec<u8>>,
}

/// The vocabulary as the file has it.
struct Vocab {
    tokens: Vec<String>,
    types: Vec<i32>,
    scores: Vec<f32>,
    /// `(typ, id)` for bos, eos, unk, sep, pad, cls, mask, as the file gives them.
    special: Vec<(&'static str, u32)>,
    add_bos: bool,
    add_eos: bool,
    /// The `add_*_token` keys the file has, as `(typ, value)`.
    add_keys: Vec<(&'static str, bool)>,
    add_space_prefix: Option<bool>,
}

impl Vocab {
    fn read(file: &GgufFile, spm: bool) -> Result<Vocab> {
        let array = file
            .value("tokenizer.ggml.tokens")
            .and_then(|v| v.as_array())
            .ok_or_else(|| Error::Unsupported("tokenizer.ggml.tokens is missing".into()))?;
        let strings = array.strings().ok_or_else(|| {
            Error::Unsupported("tokenizer.ggml.tokens is not an array of strings".into())
        })?;
        let mut tokens = Vec::with_capacity(array.len() as usize);
        for (i, s) in strings.enumerate() {
            tokens.push(String::from_utf8(s.to_vec()).map_err(|_| {
                Error::Unsupported(format!(
                    "token {i} is not UTF-8, which tokenizer.json cannot hold"
                ))
            })?);
        }
        let n = tokens.len();
        let types: Vec<i32> = match file.value("tokenizer.ggml.token_type") {
            Some(_) => file
                .get_array::<i32>("tokenizer.ggml.token_type")?
                .collect(),
            None => vec![ty::NORMAL; n],
        };
        let scores: Vec<f32> = match file.value("tokenizer.ggml.scores") {
            Some(_) => file.get_array::<f32>("tokenizer.ggml.scores")?.collect(),
            None => vec![0.0; n],
        };
        if types.len() != n || scores.len() != n {
            return Err(Error::Unsupported(format!(
                "{n} tokens but {} token types and {} scores",
                types.len(),
                scores.len()
            )));
        }
        let mut special = Vec::new();
        for (typ, key) in [
            ("bos", "bos"),
            ("eos", "eos"),
            ("unk", "unknown"),
            ("sep", "seperator"),
            ("pad", "padding"),
            ("cls", "cls"),
            ("mask", "mask"),
        ] {
            let id = file
                .value(&format!("tokenizer.ggml.{key}_token_id"))
                .and_then(|v| v.as_integer());
            if let Some(id) = id {
                match u32::try_from(id) {
                    Ok(id) if (id as usize) < n => special.push((typ, id)),
                    _ => {}
                }
            }
        }
        let flag = |k: &str| -> Result<Option<bool>> {
            Ok(file.get_opt::<bool>(&format!("tokenizer.ggml.{k}"))?)
        };
        let mut add_keys = Vec::new();
        for typ in ["bos", "eos", "sep"] {
            if let Some(v) = flag(&format!("add_{typ}_token"))? {
                add_keys.push((typ, v));
            }
        }
        let get = |typ: &str| add_keys.iter().find(|(t, _)| *t == typ).map(|(_, v)| *v);
        Ok(Vocab {
            add_bos: get("bos").unwrap_or(spm),
            add_eos: get("eos").unwrap_or(false),
            add_space_prefix: flag("add_space_prefix")?,
            tokens,
            types,
            scores,
            special,
            add_keys,
        })
    }

    fn id_of(&self, typ: &str) -> Option<u32> {
        self.special
            .iter()
            .find(|(t, _)| *t == typ)
            .map(|(_, id)| *id)
    }

    /// Whether token `i` is one of the converter's `[PADi]` fillers.
    fn is_filler(&self, i: usize) -> bool {
        self.types[i] == ty::UNUSED && self.tokens[i] == format!("[PAD{i}]")
    }

    /// Whether token `i` is matched in the raw text (an added token of `tokenizers`).
    fn is_added(&self, i: usize) -> bool {
        matches!(self.types[i], ty::CONTROL | ty::USER_DEFINED | ty::UNKNOWN)
    }
}

/// `does_token_look_special` of `convert_hf_to_gguf.py`.
fn looks_special(t: &str) -> bool {
    matches!(t, "<pad>" | "<mask>" | "<2mass>" | "[@BOS@]")
        || (t.starts_with("<|") && t.ends_with("|>"))
        || (t.starts_with("<｜") && t.ends_with("｜>"))
        || (t.starts_with("<unused") && t.ends_with('>'))
}

/// The pipeline of a byte-level BPE pre-tokenizer type.
struct BpePipeline {
    normalizer: Option<Normalizer>,
    pre_tokenizer: PreTokenizer,
    ignore_merges: bool,
    clean_spaces: bool,
}

/// `tokenizer.ggml.pre` values with a pipeline here.
pub const SUPPORTED_PRE: &[&str] = &[
    "default",
    "gpt-2",
    "phi-2",
    "llama-bpe",
    "llama3",
    "llama-v3",
    "falcon3",
    "pixtral",
    "dbrx",
    "smaug-bpe",
    "qwen2",
    "deepseek-r1-qwen",
    "megrez",
    "qwen35",
    "smollm",
    "starcoder",
    "refact",
];

/// `ByteLevel` as the converters write it: no prefix space, offsets trimmed.
fn byte_level(use_regex: bool) -> ByteLevel {
    ByteLevel {
        add_prefix_space: Some(false),
        trim_offsets: Some(true),
        use_regex: Some(use_regex),
    }
}

/// A `Split` isolating the matches of `regex`.
fn split(regex: String) -> PreTokenizer {
    PreTokenizer::Split(schema::Split {
        pattern: Pattern::Regex(regex),
        behavior: Some(Behavior::Isolated),
        invert: Some(false),
    })
}

/// `Split`s with the regexes of llama.cpp's pre-tokenizer `name` (gguf-tokenizer's table),
/// spelled as `tokenizer.json` files spell them, then `ByteLevel` without its regex.
fn splits(name: &str) -> Result<PreTokenizer> {
    let regexes = pre_regexes::regexes(name)
        .ok_or_else(|| Error::Unsupported(format!("pre-tokenizer '{name}' has no regexes")))?;
    let mut steps: Vec<PreTokenizer> = regexes
        .iter()
        .map(|r| split(pre_regexes::hugging_face_regex(r)))
        .collect();
    steps.push(PreTokenizer::ByteLevel(byte_level(false)));
    Ok(PreTokenizer::Sequence(schema::PreTokenizerSequence {
        pretokenizers: steps,
    }))
}

fn bpe_pipeline(pre: &str) -> Result<BpePipeline> {
    let (normalizer, pre_tokenizer, ignore_merges, clean_spaces) = match pre {
        "gpt-2" | "phi-2" => (None, PreTokenizer::ByteLevel(byte_level(true)), false, true),
        "default" => (None, splits("default")?, false, true),
        "llama-bpe" | "llama3" | "llama-v3" | "falcon3" | "pixtral" => {
            (None, splits("llama-bpe")?, true, true)
        }
        "dbrx" | "smaug-bpe" => (None, splits("llama-bpe")?, false, true),
        "qwen2" | "deepseek-r1-qwen" | "megrez" => {
            (Some(Normalizer::Nfc), splits("qwen2")?, false, false)
        }
        "qwen35" => (Some(Normalizer::Nfc), splits("qwen35")?, false, false),
        "smollm" | "starcoder" | "refact" => (
            None,
            PreTokenizer::Sequence(schema::PreTokenizerSequence {
                pretokenizers: vec![
                    PreTokenizer::Digits(Digits {
                        individual_digits: Some(true),
                    }),
                    PreTokenizer::ByteLevel(byte_level(true)),
                ],
            }),
            false,
            pre != "smollm",
        ),
        other => {
            return Err(Error::Unsupported(format!(
            "tokenizer.ggml.pre '{other}' has no Hugging Face pre-tokenizer here (supported: {})",
            SUPPORTED_PRE.join(", ")
        )))
        }
    };
    Ok(BpePipeline {
        normalizer,
        pre_tokenizer,
        ignore_merges,
        clean_spaces,
    })
}

/// A JSON string literal.
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

/// `tokenizer.json`: `head` as `tokenizers` writes it (its keys in its order), with the model's
/// vocabulary and merges written one entry per line (they can be millions; no `Value` is
/// built for them, `head`'s are empty).
fn write_tokenizer_json(
    head: &TokenizerJson,
    vocab: &[(&str, u32)],
    merges: Option<&[(&str, &str)]>,
) -> Result<String> {
    let json_error = |e: serde_json::Error| Error::Unsupported(format!("tokenizer.json: {e}"));
    let Value::Object(mut head) = serde_json::to_value(head).map_err(json_error)? else {
        return Err(Error::Unsupported("tokenizer.json is not an object".into()));
    };
    let Some(Value::Object(mut model_head)) = head.shift_remove("model") else {
        return Err(Error::Unsupported("tokenizer.json has no model".into()));
    };
    model_head.shift_remove("vocab");
    model_head.shift_remove("merges");
    let mut s = String::with_capacity(vocab.len() * 24 + merges.map_or(0, |m| m.len()) * 24 + 4096);
    s.push_str("{\n");
    for (k, v) in &head {
        let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| "null".into());
        s.push_str(&format!(
            "  {}: {},\n",
            quote(k),
            text.replace('\n', "\n  ")
        ));
    }
    s.push_str("  \"model\": {\n");
    for (k, v) in &model_head {
        let text = serde_json::to_string(v).unwrap_or_else(|_| "null".into());
        s.push_str(&format!("    {}: {},\n", quote(k), text));
    }
    s.push_str("    \"vocab\": {");
    for (i, (text, id)) in vocab.iter().enumerate() {
        s.push_str(if i == 0 { "\n      " } else { ",\n      " });
        s.push_str(&quote(text));
        s.push_str(": ");
        s.push_str(&id.to_string());
    }
    s.push_str("\n    }");
    if let Some(merges) = merges {
        s.push_str(",\n    \"merges\": [");
        for (i, (a, b)) in merges.iter().enumerate() {
            s.push_str(if i == 0 { "\n      [" } else { ",\n      [" });
            s.push_str(&quote(a));
            s.push_str(", ");
            s.push_str(&quote(b));
            s.push(']');
        }
        s.push_str("\n    ]");
    }
    s.push_str("\n  }\n}\n");
    Ok(s)
}

/// A template's special token.
fn special_piece(t: &(String, u32), type_id: u32) -> TemplatePiece {
    TemplatePiece::SpecialToken {
        id: t.0.clone(),
        type_id,
    }
}

/// The `special_tokens` of a template naming `tokens`.
fn special_tokens<'t>(tokens: impl Iterator<Item = &'t (String, u32)>) -> OrderedMap<SpecialToken> {
    let mut specials = OrderedMap::default();
    for t in tokens {
        specials.insert(
            t.0.clone(),
            SpecialToken {
                id: t.0.clone(),
                ids: vec![t.1],
                tokens: vec![t.0.clone()],
            },
        );
    }
    specials
}

/// BERT's post-processor: `[CLS] A [SEP]` (BOS first when `add_bos_token`, SEP, else EOS,
/// last when `add_eos_token`), pairs `[CLS] A [SEP] B [SEP]`.
fn bert_post_processor(v: &Vocab) -> Option<PostProcessor> {
    let token = |id: u32| (v.tokens[id as usize].clone(), id);
    let first = v
        .add_bos
        .then(|| v.id_of("bos").or_else(|| v.id_of("cls")))
        .flatten()
        .map(token);
    let last = v
        .add_eos
        .then(|| v.id_of("sep").or_else(|| v.id_of("eos")))
        .flatten()
        .map(token);
    if first.is_none() && last.is_none() {
        return None;
    }
    let seq = |id, type_id| TemplatePiece::Sequence { id, type_id };
    let mut single = Vec::new();
    let mut pair = Vec::new();
    if let Some(f) = &first {
        single.push(special_piece(f, 0));
        pair.push(special_piece(f, 0));
    }
    single.push(seq(SequenceId::A, 0));
    pair.push(seq(SequenceId::A, 0));
    if let Some(l) = &last {
        single.push(special_piece(l, 0));
        pair.push(special_piece(l, 0));
    }
    pair.push(seq(SequenceId::B, 1));
    if let Some(l) = &last {
        pair.push(special_piece(l, 1));
    }
    Some(PostProcessor::Template(TemplateProcessing {
        single,
        pair,
        special_tokens: special_tokens(first.iter().chain(last.iter())),
    }))
}

/// The post-processor adding BOS/EOS as the file says; `None` when it adds neither.
fn post_processor(v: &Vocab, warnings: &mut Vec<String>) -> Option<PostProcessor> {
    let token = |typ: &str| v.id_of(typ).map(|id| (v.tokens[id as usize].clone(), id));
    let bos = if v.add_bos { token("bos") } else { None };
    let eos = if v.add_eos { token("eos") } else { None };
    if v.add_bos && bos.is_none() {
        warnings.push("add_bos_token is set but there is no BOS token".into());
    }
    if bos.is_none() && eos.is_none() {
        return None;
    }
    let seq = |id, type_id| TemplatePiece::Sequence { id, type_id };
    // Pairs as `[BOS] A B [EOS]`: a token between A and B would make the reference
    // converter write an `add_sep_token` the file may not have.
    let mut single = Vec::new();
    let mut pair = Vec::new();
    if let Some(b) = &bos {
        single.push(special_piece(b, 0));
        pair.push(special_piece(b, 0));
    }
    single.push(seq(SequenceId::A, 0));
    pair.push(seq(SequenceId::A, 0));
    pair.push(seq(SequenceId::B, 1));
    if let Some(e) = &eos {
        single.push(special_piece(e, 0));
        pair.push(special_piece(e, 1));
    }
    Some(PostProcessor::Template(TemplateProcessing {
        single,
        pair,
        special_tokens: special_tokens(bos.iter().chain(eos.iter())),
    }))
}

impl TokenizerExport {
    /// The tokenizer files for `file`; `None` when it has no `tokenizer.ggml.model`.
    pub(crate) fn from_gguf(
        file: &GgufFile,
        arch: Arch,
        warnings: &mut Vec<String>,
    ) -> Result<Option<TokenizerExport>> {
        let Some(model) = file
            .value("tokenizer.ggml.model")
            .map(|v| v.as_str().unwrap_or("(not a string)"))
        else {
            return Ok(None);
        };
        let (spm, wpm) = match model {
            "gpt2" => (false, false),
            "llama" => (true, false),
            "bert" => (false, true),
            other => {
                return Err(Error::Unsupported(format!(
                "tokenizer.ggml.model '{other}' cannot be exported (supported: gpt2, llama, bert)"
            )))
            }
        };
        if file.value("tokenizer.ggml.merges").is_some() && spm {
            warnings.push("tokenizer.ggml.merges of a SentencePiece vocabulary left out".into());
        }
        let mut v = Vocab::read(file, spm || wpm)?;
        if wpm {
            // The converter's phantom-space layout back to WordPiece's: `▁word` is `word`,
            // a continuation `x` is `##x`, control tokens are as they are.
            for (t, &ty) in v.tokens.iter_mut().zip(&v.types) {
                if ty == ty::CONTROL {
                    continue;
                }
                *t = match t.strip_prefix('\u{2581}') {
                    Some(word) => word.to_string(),
                    None => format!("##{t}"),
                };
            }
        }
        for key in [
            "eot", "eom", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep",
        ] {
            if file
                .value(&format!("tokenizer.ggml.{key}_token_id"))
                .is_some()
            {
                warnings.push(format!(
                    "tokenizer.ggml.{key}_token_id has no place in the Hugging Face files: left out"
                ));
            }
        }

        // The vocabulary: first id of each text, the converter's fillers left out.
        let mut ids: HashMap<&str, u32> = HashMap::with_capacity(v.tokens.len());
        let mut vocab: Vec<(&str, u32)> = Vec::with_capacity(v.tokens.len());
        let mut dropped = 0usize;
        // SentencePiece: only the trailing run of fillers goes (the pieces are numbered from 0).
        let spm_end = if spm {
            let mut end = v.tokens.len();
            while end > 0 && v.is_filler(end - 1) {
                end -= 1;
            }
            end
        } else {
            v.tokens.len()
        };
        for (i, t) in v.tokens.iter().enumerate() {
            if i >= spm_end || (!spm && v.is_filler(i)) {
                continue;
            }
            if ids.contains_key(t.as_str()) {
                dropped += 1;
                continue;
            }
            ids.insert(t, i as u32);
            vocab.push((t, i as u32));
        }
        if dropped > 0 {
            warnings.push(format!(
                "{dropped} tokens repeat an earlier token's text: left out of tokenizer.json"
            ));
        }

        let mut added = Vec::new();
        for (i, t) in v.tokens.iter().enumerate() {
            if !v.is_added(i) || ids.get(t.as_str()) != Some(&(i as u32)) {
                continue;
            }
            added.push(AddedToken {
                id: Some(i as u64),
                content: t.clone(),
                single_word: Some(false),
                lstrip: Some(false),
                rstrip: Some(false),
                normalized: Some(false),
                special: Some(v.types[i] != ty::USER_DEFINED),
            });
        }

        let merges_owned: Vec<(String, String)>;
        let merges: Vec<(&str, &str)>;
        let clean_spaces;
        let normalizer;
        let pre_tokenizer;
        let post_processor;
        let decoder;
        let model;
        let add_space_prefix = v.add_space_prefix.unwrap_or(spm);
        if spm {
            let has_bytes = v.types.contains(&ty::BYTE);
            let unk = v
                .types
                .iter()
                .position(|&t| t == ty::UNKNOWN)
                .map(|i| i as u32)
                .or_else(|| v.id_of("unk"));
            let replace_spaces = Normalizer::Replace(schema::Replace {
                pattern: Pattern::String(" ".into()),
                content: "\u{2581}".into(),
            });
            normalizer = Some(if add_space_prefix {
                Normalizer::Sequence(schema::NormalizerSequence {
                    normalizers: vec![
                        Normalizer::Prepend(schema::Prepend {
                            prepend: "\u{2581}".into(),
                        }),
                        replace_spaces,
                    ],
                })
            } else {
                replace_spaces
            });
            // Gemma's own files split at spaces, which the normalizer has already replaced:
            // a no-op kept for fidelity.
            pre_tokenizer = arch.is_gemma().then(|| {
                PreTokenizer::Split(schema::Split {
                    pattern: Pattern::String(" ".into()),
                    behavior: Some(Behavior::MergedWithPrevious),
                    invert: Some(false),
                })
            });
            post_processor = self::post_processor(&v, warnings);
            let mut decoders = vec![
                Decoder::Replace(schema::Replace {
                    pattern: Pattern::String("\u{2581}".into()),
                    content: " ".into(),
                }),
                Decoder::ByteFallback,
                Decoder::Fuse,
            ];
            if add_space_prefix {
                decoders.push(Decoder::Strip(schema::StripDecoder {
                    content: " ".into(),
                    start: 1,
                    stop: 0,
                }));
            }
            decoder = Decoder::Sequence(schema::DecoderSequence { decoders });
            model = Model::Bpe(Bpe {
                dropout: None,
                unk_token: unk.map(|id| v.tokens[id as usize].clone()),
                continuing_subword_prefix: None,
                end_of_word_suffix: None,
                fuse_unk: Some(true),
                byte_fallback: Some(has_bytes),
                ignore_merges: Some(false),
                vocab: OrderedMap::default(),
                merges: Vec::new(),
            });
            merges = spm_merges(&v, &ids, &vocab);
            clean_spaces = false;
        } else if wpm {
            let flag = |k: &str| file.get_opt::<bool>(&format!("tokenizer.ggml.normalizer.{k}"));
            normalizer = Some(Normalizer::Bert(BertNormalizer {
                clean_text: Some(true),
                handle_chinese_chars: Some(true),
                strip_accents: flag("strip_accents")?,
                // Left out when the file has no value: the converter writes the key only if
                // the JSON has it, and tokenizers' default (true) is llama.cpp's.
                lowercase: flag("lowercase")?,
            }));
            pre_tokenizer = Some(PreTokenizer::Bert);
            post_processor = bert_post_processor(&v);
            decoder = Decoder::WordPiece(schema::WordPieceDecoder {
                prefix: Some("##".into()),
                cleanup: Some(true),
            });
            let unk = v
                .id_of("unk")
                .map_or_else(|| "[UNK]".to_string(), |id| v.tokens[id as usize].clone());
            model = Model::WordPiece(WordPiece {
                unk_token: Some(unk),
                continuing_subword_prefix: Some("##".into()),
                max_input_chars_per_word: Some(100),
                vocab: OrderedMap::default(),
            });
            merges = Vec::new();
            clean_spaces = true;
        } else {
            let pre = file
                .value("tokenizer.ggml.pre")
                .and_then(|p| p.as_str())
                .filter(|p| !p.is_empty())
                .unwrap_or("default");
            let p = bpe_pipeline(pre)?;
            normalizer = p.normalizer;
            pre_tokenizer = Some(p.pre_tokenizer);
            post_processor = self::post_processor(&v, warnings);
            decoder = Decoder::ByteLevel(ByteLevel {
                add_prefix_space: Some(true),
                trim_offsets: Some(true),
                use_regex: Some(true),
            });
            model = Model::Bpe(Bpe {
                dropout: None,
                unk_token: None,
                continuing_subword_prefix: None,
                end_of_word_suffix: None,
                fuse_unk: Some(false),
                byte_fallback: Some(false),
                ignore_merges: Some(p.ignore_merges),
                vocab: OrderedMap::default(),
                merges: Vec::new(),
            });
            let raw: Vec<&str> = match file.value("tokenizer.ggml.merges") {
                Some(m) => m
                    .as_array()
                    .and_then(|a| a.strings())
                    .ok_or_else(|| {
                        Error::Unsupported(
                            "tokenizer.ggml.merges is not an array of strings".into(),
                        )
                    })?
                    .map(|b| std::str::from_utf8(b).unwrap_or(""))
                    .collect(),
                None => {
                    warnings.push("the BPE vocabulary has no tokenizer.ggml.merges".into());
                    Vec::new()
                }
            };
            let mut pairs = Vec::with_capacity(raw.len());
            for (i, m) in raw.iter().enumerate() {
                let Some((a, b)) = m.split_once(' ') else {
                    return Err(Error::Unsupported(format!(
                        "merge {i} {m:?} is not two tokens separated by a space"
                    )));
                };
                pairs.push((a.to_string(), b.to_string()));
            }
            merges_owned = pairs;
            merges = merges_owned
                .iter()
                .map(|(a, b)| (a.as_str(), b.as_str()))
                .collect();
            clean_spaces = p.clean_spaces;
        }
        let head = TokenizerJson {
            version: Some("1.0".into()),
            truncation: None,
            padding: None,
            added_tokens: Some(added),
            normalizer,
            pre_tokenizer,
            post_processor,
            decoder: Some(decoder),
            model,
        };
        let tokenizer_json = write_tokenizer_json(&head, &vocab, (!wpm).then_some(&merges[..]))?;

        let tokenizer_config = tokenizer_config(file, arch, &v, spm, &ids, clean_spaces, warnings);
        let sentencepiece_model = if spm {
            sentencepiece_model(&v, spm_end, add_space_prefix, warnings)
        } else {
            None
        };
        Ok(Some(TokenizerExport {
            tokenizer_json,
            tokenizer_config,
            sentencepiece_model,
        }))
    }
}

/// The merges of a SentencePiece BPE vocabulary: for every piece, each split into two pieces
/// of the vocabulary, ranked by the piece's score (highest first), then by its id, then
/// longer left parts first.
fn spm_merges<'v>(
    v: &'v Vocab,
    ids: &HashMap<&str, u32>,
    vocab: &[(&'v str, u32)],
) -> Vec<(&'v str, &'v str)> {
    let mut merges: Vec<(f32, u32, &'v str, &'v str)> = Vec::new();
    for &(piece, id) in vocab {
        for (split, _) in piece.char_indices().skip(1) {
            let (l, r) = piece.split_at(split);
            if ids.contains_key(l) && ids.contains_key(r) {
                merges.push((v.scores[id as usize], id, l, r));
            }
        }
    }
    merges.sort_by(|a, b| {
        b.0.total_cmp(&a.0)
            .then(a.1.cmp(&b.1))
            .then(b.2.len().cmp(&a.2.len()))
    });
    merges.into_iter().map(|(_, _, l, r)| (l, r)).collect()
}

/// `tokenizer_config.json`.
fn tokenizer_config(
    file: &GgufFile,
    arch: Arch,
    v: &Vocab,
    spm: bool,
    ids: &HashMap<&str, u32>,
    clean_spaces: bool,
    warnings: &mut Vec<String>,
) -> Value {
    let mut c = Map::new();
    for (typ, value) in &v.add_keys {
        c.insert(format!("add_{typ}_token"), json!(value));
    }
    if let Some(p) = v.add_space_prefix {
        c.insert("add_prefix_space".into(), json!(p));
    }
    // The tokens the reference converter takes from here: for SentencePiece those whose
    // score it sets (-1000) is theirs and whose type it keeps; for BPE every added token.
    let mut decoder = Map::new();
    for (i, t) in v.tokens.iter().enumerate() {
        if ids.get(t.as_str()) != Some(&(i as u32)) {
            continue;
        }
        let listed = match v.types[i] {
            ty::CONTROL => !spm || v.scores[i] == -1000.0,
            ty::USER_DEFINED => !spm || (v.scores[i] == -1000.0 && !looks_special(t)),
            ty::UNKNOWN => !spm,
            _ => false,
        };
        if listed {
            decoder.insert(
                i.to_string(),
                json!({
                    "content": t,
                    "lstrip": false,
                    "normalized": false,
                    "rstrip": false,
                    "single_word": false,
                    "special": v.types[i] != ty::USER_DEFINED,
                }),
            );
        }
    }
    c.insert("added_tokens_decoder".into(), Value::Object(decoder));
    for (typ, id) in &v.special {
        let i = *id as usize;
        if v.is_added(i) && ids.get(v.tokens[i].as_str()) == Some(id) {
            c.insert(format!("{typ}_token"), json!(v.tokens[i]));
        } else if !matches!(*typ, "bos" | "eos" | "pad") {
            warnings.push(format!(
                "the {typ} token ({id}) is not a control token: only config.json can name it \
                 (and does so for bos, eos and pad only)"
            ));
        }
    }
    let mut named = Vec::new();
    for kv in file.metadata() {
        if let Some(name) = kv.key.strip_prefix("tokenizer.chat_template.") {
            if let Some(t) = kv.value.as_str() {
                named.push(json!({"name": name, "template": t}));
            }
        }
    }
    let default = file
        .value("tokenizer.chat_template")
        .and_then(|t| t.as_str());
    match (default, named.is_empty()) {
        (Some(t), true) => {
            c.insert("chat_template".into(), json!(t));
        }
        (default, false) => {
            let mut all = Vec::new();
            if let Some(t) = default {
                all.push(json!({"name": "default", "template": t}));
            }
            all.extend(named);
            c.insert("chat_template".into(), Value::Array(all));
        }
        (None, true) => {}
    }
    c.insert("clean_up_tokenization_spaces".into(), json!(clean_spaces));
    if let Some(n) = file
        .value(&format!(
            "{}.context_length",
            file.architecture().unwrap_or("")
        ))
        .and_then(|v| v.as_integer())
    {
        c.insert("model_max_length".into(), json!(n));
    }
    // The generic class keeps tokenizer.json's pipeline as it is; Phi-3's converter takes the
    // BPE path only for GPT2Tokenizer.
    let class = if arch == Arch::Phi3 && !spm {
        "GPT2Tokenizer"
    } else {
        "PreTrainedTokenizerFast"
    };
    c.insert("tokenizer_class".into(), json!(class));
    Value::Object(c)
}

/// `tokenizer.model` for ids `0..end`; `None`, with a warning, when SentencePiece would refuse
/// the vocabulary (repeated or empty pieces, no unknown token).
fn sentencepiece_model(
    v: &Vocab,
    end: usize,
    add_space_prefix: bool,
    warnings: &mut Vec<String>,
) -> Option<Vec<u8>> {
    let mut skip = |why: String| {
        warnings.push(format!("no tokenizer.model: {why}"));
        None
    };
    // SentencePiece needs exactly one unknown piece: the unknown token id's when no token is
    // of the unknown type (converters mark `<unk>` as a control token).
    let unknowns = v.types[..end].iter().filter(|&&t| t == ty::UNKNOWN).count();
    let unk_override = match unknowns {
        1 => None,
        0 => match v.id_of("unk") {
            Some(id) if (id as usize) < end => Some(id as usize),
            _ => return skip("the vocabulary has no unknown token".into()),
        },
        n => return skip(format!("{n} unknown tokens")),
    };
    let texts: std::collections::HashSet<&str> =
        v.tokens[..end].iter().map(String::as_str).collect();
    let mut seen = std::collections::HashSet::with_capacity(end);
    let mut pieces = Vec::with_capacity(end);
    for i in 0..end {
        let t = &v.tokens[i];
        let kind = if unk_override == Some(i) {
            PieceType::Unknown
        } else {
            match v.types[i] {
                ty::UNKNOWN => PieceType::Unknown,
                ty::CONTROL => PieceType::Control,
                ty::USER_DEFINED => PieceType::UserDefined,
                ty::UNUSED => PieceType::Unused,
                ty::BYTE => PieceType::Byte,
                _ => PieceType::Normal,
            }
        };
        // The converter turned `▁` into spaces in user-defined tokens: back, unless the
        // result is another piece's text.
        let piece = if kind == PieceType::UserDefined && t.contains(' ') {
            let escaped = t.replace(' ', "\u{2581}");
            if texts.contains(escaped.as_str()) {
                t.clone()
            } else {
                escaped
            }
        } else {
            t.clone()
        };
        if piece.is_empty() {
            return skip(format!("token {i} is empty"));
        }
        if !seen.insert(piece.clone()) {
            return skip(format!("token {i} repeats the text {piece:?}"));
        }
        pieces.push(SentencePiece {
            piece: Some(piece),
            score: Some(v.scores[i]),
            r#type: Some(kind as i32),
        });
    }
    let proto = ModelProto {
        pieces,
        trainer_spec: Some(TrainerSpec {
            model_type: Some(2),
            byte_fallback: Some(v.types.contains(&ty::BYTE)),
        }),
        normalizer_spec: Some(NormalizerSpec {
            name: Some("identity".into()),
            add_dummy_prefix: Some(add_space_prefix),
            remove_extra_whitespaces: Some(false),
            escape_whitespaces: Some(true),
        }),
    };
    Some(proto.to_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_looking_tokens() {
        assert!(looks_special("<|im_start|>"));
        assert!(looks_special("<unused12>"));
        assert!(looks_special("<mask>"));
        assert!(!looks_special("[multimodal]"));
        assert!(!looks_special("\n\n"));
    }

    /// The pre-tokenizers from gguf-tokenizer's table are the regexes `tokenizer.json` files
    /// have, as `tokenizers` writes them.
    #[test]
    fn pre_tokenizer_regexes_are_written_as_hugging_face_writes_them() {
        const GPT2: &str =
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
        const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        const QWEN35: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        let regexes = |pre: &str| -> Vec<String> {
            let p = serde_json::to_value(bpe_pipeline(pre).unwrap().pre_tokenizer).unwrap();
            let steps = p["pretokenizers"].as_array().unwrap();
            assert_eq!(steps.last().unwrap()["type"], "ByteLevel");
            steps[..steps.len() - 1]
                .iter()
                .map(|s| {
                    assert_eq!(s["behavior"], "Isolated");
                    s["pattern"]["Regex"].as_str().unwrap().to_string()
                })
                .collect()
        };
        let default = [r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", r"[0-9][0-9][0-9]"];
        assert_eq!(regexes("default"), default);
        for pre in ["llama-bpe", "llama3", "dbrx", "smaug-bpe", "pixtral"] {
            assert_eq!(regexes(pre), [LLAMA3], "{pre}");
        }
        assert_eq!(regexes("qwen2"), [QWEN2]);
        assert_eq!(regexes("qwen35"), [QWEN35]);
    }

    #[test]
    fn unknown_pre_tokenizers_are_refused() {
        assert!(bpe_pipeline("smollm").is_ok());
        let e = bpe_pipeline("chameleon").err().unwrap().to_string();
        assert!(e.contains("chameleon"), "{e}");
    }
}
