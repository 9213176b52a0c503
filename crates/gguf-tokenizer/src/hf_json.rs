//! Tokenizers described by `tokenizer.huggingface.json` (a Hugging Face `tokenizer.json`) in a
//! file without `tokenizer.ggml.model`.
//!
//! llama.cpp does not read this key; the reference is Hugging Face's `tokenizers` library, whose
//! pipeline is reproduced step by step:
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
//!    then runs through that type's splitter (`pretok.rs`); an unknown regex falls back to
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

mod tables;

use std::collections::BinaryHeap;
use std::ops::Range;
use std::sync::OnceLock;

use gguf_format::GgufFile;
use serde_json::{Map, Value};

use crate::error::{Result, TokenizerError};
use crate::fasthash::FastMap;
use crate::pretok::PreTokenizer;
use crate::special::SpecialMatcher;
use crate::unicode::{byte_to_bpe_char, cpt_flags};
use crate::vocab::{ModelKind, SpecialIds, TokenData, TokenType, Vocab, VocabParts};
use crate::Tokenizer;

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

/// Builds the tokenizer a `tokenizer.json` text describes; `overrides` are special ids given
/// elsewhere (the file's `tokenizer.ggml.*_token_id`).
pub(crate) fn from_json(json: &str, overrides: SpecialIds) -> Result<Tokenizer> {
    let root: Value = serde_json::from_str(json).map_err(|e| err(format!("invalid JSON: {e}")))?;
    let root = root
        .as_object()
        .ok_or_else(|| err("the JSON is not an object"))?;
    let mut warnings = Vec::new();

    if let Some(t) = root.get("truncation").filter(|v| !v.is_null()) {
        warnings.push(format!(
            "{KEY}: `truncation` ({t}) is ignored: encode returns every token"
        ));
    }
    if let Some(p) = root.get("padding").filter(|v| !v.is_null()) {
        warnings.push(format!("{KEY}: `padding` ({p}) is ignored"));
    }

    let model_json = obj(root.get("model").ok_or_else(|| err("no `model`"))?, "model")?;
    let mut model = Model::parse(model_json)?;
    let normalizer = match root.get("normalizer") {
        None | Some(Value::Null) => Vec::new(),
        Some(v) => parse_normalizer(v)?,
    };
    let pre = match root.get("pre_tokenizer") {
        None | Some(Value::Null) => PreTokenizerSpec::default(),
        Some(v) => PreTokenizerSpec::parse(v, &mut warnings)?,
    };
    if let Model::Bpe(bpe) = &mut model {
        bpe.byte_level = pre.byte_level;
    }

    // Added tokens get the ids `tokenizers` gives them: the model's id for their content, else
    // the next id after the model vocabulary (the JSON's `id` is only checked).
    let model_ids = model.vocab();
    let model_size = model_ids.len() as u32;
    let mut added: Vec<AddedToken> = Vec::new();
    let mut added_by_content: FastMap<String, usize> = FastMap::default();
    if let Some(list) = root.get("added_tokens").filter(|v| !v.is_null()) {
        let list = list
            .as_array()
            .ok_or_else(|| err("`added_tokens` is not an array"))?;
        let mut next_id = model_size;
        for (i, entry) in list.iter().enumerate() {
            let entry = obj(entry, &format!("added_tokens[{i}]"))?;
            let content = str_field(entry, "content", &format!("added_tokens[{i}]"))?.to_string();
            if content.is_empty() {
                continue;
            }
            let flag = |name: &str, default: bool| -> Result<bool> {
                match entry.get(name) {
                    None | Some(Value::Null) => Ok(default),
                    Some(Value::Bool(b)) => Ok(*b),
                    Some(_) => Err(err(format!("added_tokens[{i}].{name} is not a boolean"))),
                }
            };
            let special = flag("special", false)?;
            let token = AddedToken {
                id: 0,
                single_word: flag("single_word", false)?,
                lstrip: flag("lstrip", false)?,
                rstrip: flag("rstrip", false)?,
                normalized: flag("normalized", !special)?,
                special,
                pattern: String::new(),
                content,
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
            if let Some(given) = entry.get("id").and_then(Value::as_u64) {
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

    let post = match root.get("post_processor") {
        None | Some(Value::Null) => PostProcessor::default(),
        Some(v) => PostProcessor::parse(v, &|text: &str| {
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
    let matcher = AddedMatcher::new(&added);
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

fn obj<'a>(v: &'a Value, what: &str) -> Result<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| err(format!("`{what}` is not an object")))
}

fn str_field<'a>(o: &'a Map<String, Value>, name: &str, what: &str) -> Result<&'a str> {
    o.get(name)
        .and_then(Value::as_str)
        .ok_or_else(|| err(format!("`{what}.{name}` is missing or not a string")))
}

fn bool_field(o: &Map<String, Value>, name: &str, default: bool, what: &str) -> Result<bool> {
    match o.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(err(format!("`{what}.{name}` is not a boolean"))),
    }
}

fn type_of<'a>(o: &'a Map<String, Value>, what: &str) -> Result<&'a str> {
    str_field(o, "type", what)
}

/// A single character given as a string (`Metaspace.replacement`, `CharDelimiterSplit`).
fn one_char(o: &Map<String, Value>, name: &str, what: &str) -> Result<char> {
    let s = str_field(o, name, what)?;
    let mut chars = s.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) => Ok(c),
        _ => Err(err(format!(
            "`{what}.{name}` must be one character, not {s:?}"
        ))),
    }
}

// ---------------------------------------------------------------------------------------------
// Text with original offsets

/// A piece of normalized text: its characters and, for each, the byte offset in the input of
/// the character it comes from (what `tokenizers`' alignments give; `Metaspace` with
/// `prepend_scheme: first` asks whether a piece starts at offset 0).
#[derive(Clone, Debug, Default)]
struct Piece {
    chars: Vec<char>,
    orig: Vec<usize>,
}

impl Piece {
    fn new(text: &str, offset: usize) -> Piece {
        let mut p = Piece::default();
        for (i, c) in text.char_indices() {
            p.chars.push(c);
            p.orig.push(offset + i);
        }
        p
    }

    fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    fn slice(&self, r: Range<usize>) -> Piece {
        Piece {
            chars: self.chars[r.clone()].to_vec(),
            orig: self.orig[r].to_vec(),
        }
    }

    fn string(&self) -> String {
        self.chars.iter().collect()
    }

    /// Puts `text` in front, aligned with the first character (`NormalizedString::prepend`).
    fn prepend(&mut self, text: &str) {
        let Some(&o) = self.orig.first() else { return };
        let n = text.chars().count();
        self.chars.splice(0..0, text.chars());
        self.orig.splice(0..0, std::iter::repeat_n(o, n));
    }

    /// Every character through `f`, each output character aligned with its source.
    fn map_chars(&mut self, mut f: impl FnMut(char, &mut Vec<char>)) {
        let mut chars = Vec::with_capacity(self.chars.len());
        let mut orig = Vec::with_capacity(self.orig.len());
        let mut buf = Vec::new();
        for (&c, &o) in self.chars.iter().zip(&self.orig) {
            buf.clear();
            f(c, &mut buf);
            orig.extend(std::iter::repeat_n(o, buf.len()));
            chars.extend_from_slice(&buf);
        }
        self.chars = chars;
        self.orig = orig;
    }

    /// Character index of each byte offset of `self.string()` (plus the end).
    fn char_index_of_bytes(&self) -> Vec<usize> {
        let mut idx = Vec::new();
        for (i, c) in self.chars.iter().enumerate() {
            idx.extend(std::iter::repeat_n(i, c.len_utf8()));
        }
        idx.push(self.chars.len());
        idx
    }
}

// ---------------------------------------------------------------------------------------------
// Normalizers

#[derive(Clone, Debug)]
enum Normalizer {
    Nfc,
    Nfd,
    Lowercase,
    Prepend(String),
    Replace {
        pattern: Vec<char>,
        content: String,
    },
    Strip {
        left: bool,
        right: bool,
    },
    /// `StripAccents`: removes marks (`\p{M}`).
    StripAccents,
    Bert {
        clean_text: bool,
        chinese_chars: bool,
        strip_accents: bool,
        lowercase: bool,
    },
}

fn parse_normalizer(v: &Value) -> Result<Vec<Normalizer>> {
    let o = obj(v, "normalizer")?;
    let ty = type_of(o, "normalizer")?;
    let what = format!("normalizer {ty}");
    Ok(match ty {
        "Sequence" => {
            let list = o
                .get("normalizers")
                .and_then(Value::as_array)
                .ok_or_else(|| err("`normalizer.normalizers` is missing"))?;
            let mut out = Vec::new();
            for n in list {
                out.extend(parse_normalizer(n)?);
            }
            out
        }
        "NFC" => vec![Normalizer::Nfc],
        "NFD" => vec![Normalizer::Nfd],
        "Lowercase" => vec![Normalizer::Lowercase],
        "StripAccents" => vec![Normalizer::StripAccents],
        "Prepend" => vec![Normalizer::Prepend(
            str_field(o, "prepend", &what)?.to_string(),
        )],
        "Strip" => vec![Normalizer::Strip {
            left: bool_field(o, "strip_left", true, &what)?,
            right: bool_field(o, "strip_right", true, &what)?,
        }],
        "Replace" => {
            let pattern = obj(
                o.get("pattern")
                    .ok_or_else(|| err("Replace has no pattern"))?,
                "Replace.pattern",
            )?;
            let content = str_field(o, "content", &what)?.to_string();
            match (pattern.get("String"), pattern.get("Regex")) {
                // An empty pattern matches nothing in `tokenizers`.
                (Some(Value::String(s)), _) if s.is_empty() => Vec::new(),
                (Some(Value::String(s)), _) => vec![Normalizer::Replace {
                    pattern: s.chars().collect(),
                    content,
                }],
                (_, Some(Value::String(r))) => {
                    return Err(err(format!(
                        "normalizer Replace with a regex pattern ({r:?}) is not supported"
                    )))
                }
                _ => return Err(err("normalizer Replace has no String or Regex pattern")),
            }
        }
        "BertNormalizer" => {
            let lowercase = bool_field(o, "lowercase", true, &what)?;
            vec![Normalizer::Bert {
                clean_text: bool_field(o, "clean_text", true, &what)?,
                chinese_chars: bool_field(o, "handle_chinese_chars", true, &what)?,
                strip_accents: bool_field(o, "strip_accents", lowercase, &what)?,
                lowercase,
            }]
        }
        other => {
            return Err(err(format!(
                "normalizer `{other}` is not supported (supported: NFC, NFD, Lowercase, \
                 Prepend, Replace with a string, Strip, StripAccents, BertNormalizer, Sequence)"
            )))
        }
    })
}

fn normalize(normalizers: &[Normalizer], mut p: Piece) -> Piece {
    for n in normalizers {
        match n {
            Normalizer::Nfc => p = unorm::nfc(&p),
            Normalizer::Nfd => p = unorm::nfd(&p),
            Normalizer::Lowercase => p.map_chars(|c, out| out.extend(c.to_lowercase())),
            Normalizer::Prepend(s) => p.prepend(s),
            Normalizer::Replace { pattern, content } => p = replace(&p, pattern, content),
            Normalizer::Strip { left, right } => {
                let n = p.chars.len();
                let start = if *left {
                    p.chars.iter().take_while(|c| c.is_whitespace()).count()
                } else {
                    0
                };
                let end = if *right {
                    n - p.chars[start..]
                        .iter()
                        .rev()
                        .take_while(|c| c.is_whitespace())
                        .count()
                } else {
                    n
                };
                p = p.slice(start..end);
            }
            Normalizer::StripAccents => p.map_chars(|c, out| {
                if !cpt_flags(c as u32).is_accent_mark() {
                    out.push(c)
                }
            }),
            Normalizer::Bert {
                clean_text,
                chinese_chars,
                strip_accents,
                lowercase,
            } => {
                if *clean_text {
                    p.map_chars(|c, out| {
                        let f = cpt_flags(c as u32);
                        let control = !matches!(c, '\t' | '\n' | '\r')
                            && (f.is_control() || f.is_undefined());
                        if c == '\0' || c == '\u{FFFD}' || control {
                            return;
                        }
                        out.push(if matches!(c, '\t' | '\n' | '\r') || c.is_whitespace() {
                            ' '
                        } else {
                            c
                        });
                    });
                }
                if *chinese_chars {
                    p.map_chars(|c, out| {
                        if crate::unicode::is_chinese_char(c as u32) {
                            out.extend([' ', c, ' ']);
                        } else {
                            out.push(c);
                        }
                    });
                }
                if *strip_accents {
                    p = unorm::nfd(&p);
                    p.map_chars(|c, out| {
                        if !unorm::is_nonspacing_mark(c) {
                            out.push(c)
                        }
                    });
                }
                if *lowercase {
                    p.map_chars(|c, out| out.extend(c.to_lowercase()));
                }
            }
        }
    }
    p
}

/// Every non-overlapping occurrence of `pattern`, leftmost first, replaced by `content`
/// (aligned with the first character of the occurrence).
fn replace(p: &Piece, pattern: &[char], content: &str) -> Piece {
    let mut out = Piece::default();
    let mut i = 0;
    while i < p.chars.len() {
        if p.chars[i..].starts_with(pattern) {
            for c in content.chars() {
                out.chars.push(c);
                out.orig.push(p.orig[i]);
            }
            i += pattern.len();
        } else {
            out.chars.push(p.chars[i]);
            out.orig.push(p.orig[i]);
            i += 1;
        }
    }
    out
}

/// NFC and NFD (`tokenizers` uses `unicode-normalization`), from the tables in `tables.rs`.
mod unorm {
    use super::{tables, FastMap, OnceLock, Piece};

    const S_BASE: u32 = 0xAC00;
    const L_BASE: u32 = 0x1100;
    const V_BASE: u32 = 0x1161;
    const T_BASE: u32 = 0x11A7;
    const L_COUNT: u32 = 19;
    const V_COUNT: u32 = 21;
    const T_COUNT: u32 = 28;
    const N_COUNT: u32 = V_COUNT * T_COUNT;
    const S_COUNT: u32 = L_COUNT * N_COUNT;

    pub(super) fn combining_class(c: char) -> u8 {
        let c = c as u32;
        if c < 0x300 {
            return 0;
        }
        let t = tables::COMBINING_CLASS;
        let i = t.partition_point(|&(first, _, _)| first <= c);
        match i.checked_sub(1).map(|i| t[i]) {
            Some((_, last, class)) if c <= last => class,
            _ => 0,
        }
    }

    pub(super) fn is_nonspacing_mark(c: char) -> bool {
        let c = c as u32;
        if c < 0x300 {
            return false;
        }
        let t = tables::NONSPACING_MARK;
        let i = t.partition_point(|&(first, _)| first <= c);
        i.checked_sub(1).is_some_and(|i| c <= t[i].1)
    }

    pub(super) fn is_decimal_digit(c: char) -> bool {
        if c.is_ascii() {
            return c.is_ascii_digit();
        }
        let (c, t) = (c as u32, tables::DECIMAL_NUMBER);
        let i = t.partition_point(|&(first, _)| first <= c);
        i.checked_sub(1).is_some_and(|i| c <= t[i].1)
    }

    fn decompose(c: char, o: usize, out: &mut Piece) {
        let cp = c as u32;
        if (S_BASE..S_BASE + S_COUNT).contains(&cp) {
            let s = cp - S_BASE;
            let l = L_BASE + s / N_COUNT;
            let v = V_BASE + (s % N_COUNT) / T_COUNT;
            let t = T_BASE + s % T_COUNT;
            for x in [l, v] {
                out.chars.push(char::from_u32(x).expect("jamo"));
                out.orig.push(o);
            }
            if t != T_BASE {
                out.chars.push(char::from_u32(t).expect("jamo"));
                out.orig.push(o);
            }
            return;
        }
        if cp >= 0xC0 {
            let t = tables::DECOMPOSITION;
            if let Ok(i) = t.binary_search_by_key(&cp, |e| e.0) {
                let (_, a, b, _) = t[i];
                if let Some(a) = char::from_u32(a) {
                    decompose(a, o, out);
                }
                if let Some(b) = char::from_u32(b).filter(|_| b != 0) {
                    decompose(b, o, out);
                }
                return;
            }
        }
        out.chars.push(c);
        out.orig.push(o);
    }

    pub(super) fn nfd(p: &Piece) -> Piece {
        let mut out = Piece::default();
        for (&c, &o) in p.chars.iter().zip(&p.orig) {
            decompose(c, o, &mut out);
        }
        // Canonical ordering: stable sort of each run of non-starters by combining class.
        let n = out.chars.len();
        let mut i = 0;
        while i < n {
            if combining_class(out.chars[i]) == 0 {
                i += 1;
                continue;
            }
            let start = i;
            while i < n && combining_class(out.chars[i]) != 0 {
                i += 1;
            }
            if i - start > 1 {
                let mut run: Vec<(char, usize)> = out.chars[start..i]
                    .iter()
                    .copied()
                    .zip(out.orig[start..i].iter().copied())
                    .collect();
                run.sort_by_key(|&(c, _)| combining_class(c));
                for (k, (c, o)) in run.into_iter().enumerate() {
                    out.chars[start + k] = c;
                    out.orig[start + k] = o;
                }
            }
        }
        out
    }

    fn compositions() -> &'static FastMap<(u32, u32), u32> {
        static MAP: OnceLock<FastMap<(u32, u32), u32>> = OnceLock::new();
        MAP.get_or_init(|| {
            tables::DECOMPOSITION
                .iter()
                .filter(|e| e.3)
                .map(|&(c, a, b, _)| ((a, b), c))
                .collect()
        })
    }

    fn compose(a: char, b: char) -> Option<char> {
        let (a, b) = (a as u32, b as u32);
        if (L_BASE..L_BASE + L_COUNT).contains(&a) && (V_BASE..V_BASE + V_COUNT).contains(&b) {
            return char::from_u32(S_BASE + ((a - L_BASE) * V_COUNT + (b - V_BASE)) * T_COUNT);
        }
        if (S_BASE..S_BASE + S_COUNT).contains(&a)
            && (a - S_BASE).is_multiple_of(T_COUNT)
            && (T_BASE + 1..T_BASE + T_COUNT).contains(&b)
        {
            return char::from_u32(a + (b - T_BASE));
        }
        compositions().get(&(a, b)).and_then(|&c| char::from_u32(c))
    }

    pub(super) fn nfc(p: &Piece) -> Piece {
        let d = nfd(p);
        let mut out = Piece::default();
        let mut starter: Option<usize> = None;
        // Combining class of the last character kept after the starter (None: none yet).
        let mut last: Option<u8> = None;
        for (&c, &o) in d.chars.iter().zip(&d.orig) {
            let class = combining_class(c);
            if let Some(s) = starter {
                let blocked = last.is_some_and(|l| l == 0 || l >= class);
                if !blocked {
                    if let Some(composed) = compose(out.chars[s], c) {
                        out.chars[s] = composed;
                        continue;
                    }
                }
            }
            if class == 0 {
                starter = Some(out.chars.len());
                last = None;
            } else {
                last = Some(class);
            }
            out.chars.push(c);
            out.orig.push(o);
        }
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Added tokens

#[derive(Clone, Debug)]
struct AddedToken {
    id: u32,
    content: String,
    /// What is searched for: the content, normalized if `normalized`.
    pattern: String,
    single_word: bool,
    lstrip: bool,
    rstrip: bool,
    normalized: bool,
    special: bool,
}

/// A byte trie of the added tokens' patterns, one for the raw text and one for normalized
/// text, searched leftmost-longest as `tokenizers`' Aho-Corasick automaton is.
#[derive(Clone, Debug, Default)]
struct AddedMatcher {
    tokens: Vec<AddedToken>,
    raw: Trie,
    normalized: Trie,
}

#[derive(Clone, Debug, Default)]
struct Trie {
    /// (node, byte) → child node; node 0 is the root.
    edges: FastMap<(u32, u8), u32>,
    /// node → token index, where a pattern ends.
    ends: FastMap<u32, usize>,
    nodes: u32,
}

impl Trie {
    fn insert(&mut self, pattern: &str, value: usize) {
        let mut node = 0;
        for &b in pattern.as_bytes() {
            node = match self.edges.get(&(node, b)) {
                Some(&n) => n,
                None => {
                    self.nodes += 1;
                    self.edges.insert((node, b), self.nodes);
                    self.nodes
                }
            };
        }
        self.ends.insert(node, value);
    }

    fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The longest pattern starting at `text[at..]`: (end, token index).
    fn longest_at(&self, text: &[u8], at: usize) -> Option<(usize, usize)> {
        let mut node = 0;
        let mut best = None;
        for (i, &b) in text[at..].iter().enumerate() {
            match self.edges.get(&(node, b)) {
                Some(&n) => node = n,
                None => break,
            }
            if let Some(&v) = self.ends.get(&node) {
                best = Some((at + i + 1, v));
            }
        }
        best
    }

    /// Non-overlapping leftmost-longest matches: (range, token index).
    fn find_iter(&self, text: &str) -> Vec<(Range<usize>, usize)> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            match self.longest_at(bytes, at) {
                Some((end, v)) => {
                    out.push((at..end, v));
                    at = end;
                }
                None => at += 1,
            }
        }
        out
    }
}

/// `\w` as the `regex` crate has it (Alphabetic, marks, decimal digits, connector
/// punctuation, joiners), for `single_word`.
fn is_word_char(c: char) -> bool {
    c.is_alphabetic()
        || cpt_flags(c as u32).is_accent_mark()
        || unorm::is_decimal_digit(c)
        || matches!(
            c,
            '_' | '\u{200C}' | '\u{200D}' | '\u{203F}' | '\u{2040}' | '\u{2054}'
        )
        || matches!(
            c,
            '\u{FE33}' | '\u{FE34}' | '\u{FE4D}'..='\u{FE4F}' | '\u{FF3F}'
        )
}

impl AddedMatcher {
    fn new(tokens: &[AddedToken]) -> AddedMatcher {
        let mut m = AddedMatcher {
            tokens: tokens.to_vec(),
            ..AddedMatcher::default()
        };
        for (i, t) in tokens.iter().enumerate() {
            if t.pattern.is_empty() {
                continue;
            }
            if t.normalized {
                m.normalized.insert(&t.pattern, i);
            } else {
                m.raw.insert(&t.pattern, i);
            }
        }
        m
    }

    /// `AddedVocabulary::find_matches`: the splits of `sentence`, each an added token's id or
    /// text, covering it.
    fn find(
        &self,
        trie: &Trie,
        sentence: &str,
        skip_special: bool,
    ) -> Vec<(Option<u32>, Range<usize>)> {
        if trie.is_empty() || sentence.is_empty() {
            return vec![(None, 0..sentence.len())];
        }
        let mut splits = Vec::new();
        let mut start_offset = 0;
        for (range, k) in trie.find_iter(sentence) {
            let token = &self.tokens[k];
            let (mut start, mut stop) = (range.start, range.end);
            if skip_special && token.special {
                continue;
            }
            if token.single_word {
                let start_space = start == 0
                    || !sentence[..start]
                        .chars()
                        .next_back()
                        .is_some_and(is_word_char);
                let stop_space = stop == sentence.len()
                    || !sentence[stop..].chars().next().is_some_and(is_word_char);
                if !start_space || !stop_space {
                    continue;
                }
            }
            if token.lstrip {
                let trimmed = sentence[..start]
                    .trim_end_matches(char::is_whitespace)
                    .len();
                start = trimmed.max(start_offset);
            }
            if token.rstrip {
                stop += sentence[stop..].len()
                    - sentence[stop..]
                        .trim_start_matches(char::is_whitespace)
                        .len();
            }
            if start_offset < start {
                splits.push((None, start_offset..start));
            }
            splits.push((Some(token.id), start..stop));
            start_offset = stop;
        }
        if start_offset != sentence.len() {
            splits.push((None, start_offset..sentence.len()));
        }
        splits
    }
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers

/// `SplitDelimiterBehavior`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behavior {
    Removed,
    Isolated,
    MergedWithPrevious,
    MergedWithNext,
    Contiguous,
}

impl Behavior {
    fn parse(o: &Map<String, Value>, default: Behavior, what: &str) -> Result<Behavior> {
        Ok(match o.get("behavior") {
            None | Some(Value::Null) => default,
            Some(Value::String(s)) => match s.as_str() {
                "Removed" => Behavior::Removed,
                "Isolated" => Behavior::Isolated,
                "MergedWithPrevious" => Behavior::MergedWithPrevious,
                "MergedWithNext" => Behavior::MergedWithNext,
                "Contiguous" => Behavior::Contiguous,
                other => return Err(err(format!("`{what}.behavior` `{other}` is unknown"))),
            },
            Some(_) => return Err(err(format!("`{what}.behavior` is not a string"))),
        })
    }
}

/// What a character predicate selects, for the native splitters.
#[derive(Clone, Debug, PartialEq, Eq)]
enum CharClass {
    Whitespace,
    Numeric,
    /// `BertPreTokenizer`'s and `Punctuation`'s: ASCII punctuation or `\p{P}`.
    Punctuation,
    Char(char),
}

impl CharClass {
    fn test(&self, c: char) -> bool {
        match self {
            CharClass::Whitespace => c.is_whitespace(),
            CharClass::Numeric => c.is_numeric(),
            CharClass::Punctuation => {
                c.is_ascii_punctuation() || cpt_flags(c as u32).is_punctuation()
            }
            CharClass::Char(x) => c == *x,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PrependScheme {
    First,
    Never,
    Always,
}

#[derive(Clone, Debug)]
enum PreStep {
    /// A run of regexes, as llama.cpp's pre-tokenizer type splits with them.
    Regex(PreTokenizer),
    /// `ByteLevel.add_prefix_space`.
    PrefixSpace,
    /// Every character of the class is a match.
    Chars(CharClass, Behavior),
    /// Occurrences of a literal string are the matches.
    Literal(Vec<char>, Behavior),
    Metaspace {
        replacement: char,
        prepend: PrependScheme,
        split: bool,
    },
}

/// One entry of the JSON's pre-tokenizer list, before regex runs are grouped.
enum RawStep {
    Regex(String),
    Digits(bool),
    Step(PreStep),
}

#[derive(Clone, Debug, Default)]
struct PreTokenizerSpec {
    steps: Vec<PreStep>,
    /// A `ByteLevel` step ends the list: words are byte-level encoded for the model.
    byte_level: bool,
    /// The llama.cpp type the (first) regex run mapped onto, for `pre_tokenizer()` (empty
    /// when none did).
    mapped_name: String,
}

/// Hugging Face's `ByteLevel` regex (GPT-2's).
const GPT2_REGEX: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+";

/// Pre-tokenizer types whose splitting is known to be Hugging Face's for their regexes (the
/// fast paths of llama.cpp, with real Unicode categories); the others follow llama.cpp's
/// approximation of the regex, which can differ on some non-ASCII text.
const EXACT_TYPES: &[&str] = &["gpt-2", "llama-bpe", "qwen2", "qwen35", "starcoder"];

impl PreTokenizerSpec {
    fn parse(v: &Value, warnings: &mut Vec<String>) -> Result<PreTokenizerSpec> {
        let mut raw = Vec::new();
        let mut byte_level = false;
        flatten_pre(v, &mut raw, &mut byte_level)?;
        let mut spec = PreTokenizerSpec {
            byte_level,
            ..PreTokenizerSpec::default()
        };
        let mut i = 0;
        while i < raw.len() {
            let regexes: Vec<String> = raw[i..]
                .iter()
                .map_while(|s| match s {
                    RawStep::Regex(r) => Some(canonical_regex(r)),
                    RawStep::Digits(true) => Some(r"\p{N}".to_string()),
                    RawStep::Digits(false) => Some(r"\p{N}+".to_string()),
                    RawStep::Step(_) => None,
                })
                .collect();
            if regexes.is_empty() {
                if let RawStep::Step(step) = &raw[i] {
                    spec.steps.push(step.clone());
                }
                i += 1;
                continue;
            }
            // The longest run from here that is the regex list of a llama.cpp type.
            let found = (1..=regexes.len())
                .rev()
                .find_map(|n| type_for_regexes(&regexes[..n]).map(|name| (n, name)));
            match found {
                Some((n, name)) => {
                    let ty = PreTokenizer::from_name(name)
                        .ok_or_else(|| err(format!("internal: pre-tokenizer `{name}`")))?;
                    if !EXACT_TYPES.contains(&name) {
                        warnings.push(format!(
                            "{KEY}: the pre-tokenizer regexes are llama.cpp's `{name}` type, \
                             which splits as llama.cpp does; its approximation of the regex may \
                             differ from Hugging Face's on some non-ASCII text"
                        ));
                    }
                    if spec.mapped_name.is_empty() {
                        spec.mapped_name = name.to_string();
                    }
                    spec.steps.push(PreStep::Regex(ty));
                    i += n;
                }
                None => {
                    match &raw[i] {
                        RawStep::Digits(individual) => spec.steps.push(PreStep::Chars(
                            CharClass::Numeric,
                            if *individual {
                                Behavior::Isolated
                            } else {
                                Behavior::Contiguous
                            },
                        )),
                        _ => {
                            warnings.push(format!(
                                "{KEY}: the pre-tokenizer regex {:?} is none that llama.cpp \
                                 knows: using llama.cpp's `default` pre-tokenizer instead; \
                                 tokens may differ from Hugging Face's",
                                regexes[0]
                            ));
                            if spec.mapped_name.is_empty() {
                                spec.mapped_name = "default".to_string();
                            }
                            spec.steps.push(PreStep::Regex(PreTokenizer::FALLBACK));
                        }
                    }
                    i += 1;
                }
            }
        }
        Ok(spec)
    }
}

fn flatten_pre(v: &Value, out: &mut Vec<RawStep>, byte_level: &mut bool) -> Result<()> {
    let o = obj(v, "pre_tokenizer")?;
    let ty = type_of(o, "pre_tokenizer")?;
    let what = format!("pre_tokenizer {ty}");
    if *byte_level {
        return Err(err(format!(
            "pre-tokenizer `{ty}` after ByteLevel is not supported (it would see byte-level text)"
        )));
    }
    match ty {
        "Sequence" => {
            let list = o
                .get("pretokenizers")
                .and_then(Value::as_array)
                .ok_or_else(|| err("`pre_tokenizer.pretokenizers` is missing"))?;
            for p in list {
                flatten_pre(p, out, byte_level)?;
            }
        }
        "ByteLevel" => {
            if bool_field(o, "add_prefix_space", true, &what)? {
                out.push(RawStep::Step(PreStep::PrefixSpace));
            }
            if bool_field(o, "use_regex", true, &what)? {
                out.push(RawStep::Regex(GPT2_REGEX.to_string()));
            }
            *byte_level = true;
        }
        "Split" => {
            if bool_field(o, "invert", false, &what)? {
                return Err(err(
                    "pre-tokenizer Split with `invert: true` is not supported",
                ));
            }
            let behavior = Behavior::parse(o, Behavior::Removed, &what)?;
            let pattern = obj(
                o.get("pattern")
                    .ok_or_else(|| err("Split has no pattern"))?,
                "Split.pattern",
            )?;
            match (pattern.get("String"), pattern.get("Regex")) {
                (Some(Value::String(s)), _) => out.push(RawStep::Step(PreStep::Literal(
                    s.chars().collect(),
                    behavior,
                ))),
                (_, Some(Value::String(r))) => {
                    if behavior != Behavior::Isolated {
                        return Err(err(format!(
                            "pre-tokenizer Split with a regex and behavior {behavior:?} is not \
                             supported (only Isolated, which llama.cpp's splitting is)"
                        )));
                    }
                    out.push(RawStep::Regex(r.clone()));
                }
                _ => return Err(err("pre-tokenizer Split has no String or Regex pattern")),
            }
        }
        "Digits" => out.push(RawStep::Digits(bool_field(
            o,
            "individual_digits",
            false,
            &what,
        )?)),
        "Metaspace" => {
            let replacement = one_char(o, "replacement", &what)?;
            let prepend = match o.get("prepend_scheme") {
                None | Some(Value::Null) => {
                    if bool_field(o, "add_prefix_space", true, &what)? {
                        PrependScheme::Always
                    } else {
                        PrependScheme::Never
                    }
                }
                Some(Value::String(s)) => match s.as_str() {
                    "first" => PrependScheme::First,
                    "never" => PrependScheme::Never,
                    "always" => PrependScheme::Always,
                    other => return Err(err(format!("Metaspace prepend_scheme `{other}`"))),
                },
                Some(_) => return Err(err("Metaspace prepend_scheme is not a string")),
            };
            out.push(RawStep::Step(PreStep::Metaspace {
                replacement,
                prepend,
                split: bool_field(o, "split", true, &what)?,
            }));
        }
        "WhitespaceSplit" => out.push(RawStep::Step(PreStep::Chars(
            CharClass::Whitespace,
            Behavior::Removed,
        ))),
        "CharDelimiterSplit" => out.push(RawStep::Step(PreStep::Chars(
            CharClass::Char(one_char(o, "delimiter", &what)?),
            Behavior::Removed,
        ))),
        "Punctuation" => out.push(RawStep::Step(PreStep::Chars(
            CharClass::Punctuation,
            Behavior::parse(o, Behavior::Isolated, &what)?,
        ))),
        "BertPreTokenizer" => {
            out.push(RawStep::Step(PreStep::Chars(
                CharClass::Whitespace,
                Behavior::Removed,
            )));
            out.push(RawStep::Step(PreStep::Chars(
                CharClass::Punctuation,
                Behavior::Isolated,
            )));
        }
        other => {
            return Err(err(format!(
                "pre-tokenizer `{other}` is not supported (supported: ByteLevel, Split, Digits, \
                 Metaspace, WhitespaceSplit, CharDelimiterSplit, Punctuation, BertPreTokenizer, \
                 Sequence)"
            )))
        }
    }
    Ok(())
}

/// A regex in the form the table below uses: `\r`/`\n` escapes for those characters, Llama 3's
/// case-insensitive contractions spelled out as llama.cpp does, and GPT-2's trailing `|\s+`
/// (which changes no split) dropped.
fn canonical_regex(r: &str) -> String {
    let mut s = r.replace('\r', r"\r").replace('\n', r"\n").replace(
        r"(?i:'s|'t|'re|'ve|'m|'ll|'d)",
        r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])",
    );
    if s.starts_with(r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+") && s.ends_with(r"\s+(?!\S)|\s+") {
        s.truncate(s.len() - r"|\s+".len());
    }
    s
}

/// The llama.cpp pre-tokenizer name whose regex list is exactly `regexes` (canonical).
fn type_for_regexes(regexes: &[String]) -> Option<&'static str> {
    PRE_REGEXES.iter().find_map(|(name, alternatives)| {
        alternatives
            .iter()
            .any(|list| {
                list.len() == regexes.len() && list.iter().zip(regexes).all(|(a, b)| a == b)
            })
            .then_some(*name)
    })
}

/// Splits `p` at the matches of `is_match` (one character each) as `NormalizedString::split`
/// does with `behavior`.
fn split_matches(p: &Piece, matches: &[(Range<usize>, bool)], behavior: Behavior) -> Vec<Piece> {
    let mut spans: Vec<(Range<usize>, bool)> = Vec::new();
    match behavior {
        Behavior::Isolated => spans = matches.iter().map(|(r, _)| (r.clone(), false)).collect(),
        Behavior::Removed => spans = matches.to_vec(),
        Behavior::Contiguous => {
            let mut previous = false;
            for (r, m) in matches {
                match spans.last_mut() {
                    Some((last, _)) if *m == previous => last.end = r.end,
                    _ => spans.push((r.clone(), false)),
                }
                previous = *m;
            }
        }
        Behavior::MergedWithPrevious => {
            let mut previous = false;
            for (r, m) in matches {
                match spans.last_mut() {
                    Some((last, _)) if *m && !previous => last.end = r.end,
                    _ => spans.push((r.clone(), false)),
                }
                previous = *m;
            }
        }
        Behavior::MergedWithNext => {
            let mut previous = false;
            for (r, m) in matches.iter().rev() {
                match spans.last_mut() {
                    Some((last, _)) if *m && !previous => last.start = r.start,
                    _ => spans.push((r.clone(), false)),
                }
                previous = *m;
            }
            spans.reverse();
        }
    }
    spans
        .into_iter()
        .filter(|(r, remove)| !remove && !r.is_empty())
        .map(|(r, _)| p.slice(r))
        .collect()
}

/// The match/non-match spans of a character predicate (`Pattern for Fn(char) -> bool`).
fn char_matches(p: &Piece, class: &CharClass) -> Vec<(Range<usize>, bool)> {
    let mut out = Vec::new();
    let mut last = 0;
    for (i, &c) in p.chars.iter().enumerate() {
        if class.test(c) {
            if last < i {
                out.push((last..i, false));
            }
            out.push((i..i + 1, true));
            last = i + 1;
        }
    }
    if last < p.chars.len() {
        out.push((last..p.chars.len(), false));
    }
    out
}

/// The match/non-match spans of a literal string, leftmost non-overlapping.
fn literal_matches(p: &Piece, pattern: &[char]) -> Vec<(Range<usize>, bool)> {
    if pattern.is_empty() {
        return vec![(0..p.chars.len(), false)];
    }
    let mut out = Vec::new();
    let (mut i, mut last) = (0, 0);
    while i + pattern.len() <= p.chars.len() {
        if p.chars[i..].starts_with(pattern) {
            if last < i {
                out.push((last..i, false));
            }
            out.push((i..i + pattern.len(), true));
            i += pattern.len();
            last = i;
        } else {
            i += 1;
        }
    }
    if last < p.chars.len() {
        out.push((last..p.chars.len(), false));
    }
    out
}

impl PreStep {
    fn apply(&self, p: Piece, out: &mut Vec<Piece>) {
        match self {
            PreStep::Regex(ty) => {
                let cpts: Vec<u32> = p.chars.iter().map(|&c| c as u32).collect();
                out.extend(ty.split_cpts(&cpts).into_iter().map(|r| p.slice(r)));
            }
            PreStep::PrefixSpace => {
                let mut p = p;
                if p.chars.first() != Some(&' ') {
                    p.prepend(" ");
                }
                out.push(p);
            }
            PreStep::Chars(class, behavior) => {
                out.extend(split_matches(&p, &char_matches(&p, class), *behavior))
            }
            PreStep::Literal(pattern, behavior) => {
                out.extend(split_matches(&p, &literal_matches(&p, pattern), *behavior))
            }
            PreStep::Metaspace {
                replacement,
                prepend,
                split,
            } => {
                let mut p = p;
                for c in &mut p.chars {
                    if *c == ' ' {
                        *c = *replacement;
                    }
                }
                let add = match prepend {
                    PrependScheme::Always => true,
                    PrependScheme::First => p.orig.first() == Some(&0),
                    PrependScheme::Never => false,
                };
                if add && p.chars.first() != Some(replacement) {
                    p.prepend(&replacement.to_string());
                }
                if *split {
                    let m = char_matches(&p, &CharClass::Char(*replacement));
                    out.extend(split_matches(&p, &m, Behavior::MergedWithNext));
                } else {
                    out.push(p);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Models

#[derive(Clone, Debug)]
enum Model {
    Bpe(BpeHf),
    WordPiece(WordPieceHf),
}

/// `tokenizers`' BPE model.
#[derive(Clone, Debug)]
struct BpeHf {
    vocab: FastMap<String, u32>,
    /// (left id, right id) → (rank, merged id); a later duplicate pair wins, as in `tokenizers`.
    merges: FastMap<(u32, u32), (u32, u32)>,
    unk: Option<u32>,
    fuse_unk: bool,
    byte_fallback: bool,
    ignore_merges: bool,
    /// Words are byte-level encoded first (a `ByteLevel` pre-tokenizer).
    byte_level: bool,
    /// `<0xNN>` token ids, for `byte_fallback`.
    byte_ids: Vec<Option<u32>>,
}

/// `tokenizers`' WordPiece model.
#[derive(Clone, Debug)]
struct WordPieceHf {
    vocab: FastMap<String, u32>,
    unk: u32,
    prefix: String,
    max_chars: usize,
}

fn parse_vocab_map(o: &Map<String, Value>) -> Result<FastMap<String, u32>> {
    let vocab = o
        .get("vocab")
        .and_then(Value::as_object)
        .ok_or_else(|| err("`model.vocab` is missing or not an object"))?;
    let mut map = FastMap::with_capacity_and_hasher(vocab.len(), Default::default());
    let mut seen = FastMap::<u32, &str>::default();
    for (text, id) in vocab {
        let id = id
            .as_u64()
            .and_then(|i| u32::try_from(i).ok())
            .filter(|&i| i < u32::MAX / 2)
            .ok_or_else(|| err(format!("`model.vocab` id of {text:?} is not a token id")))?;
        if let Some(other) = seen.insert(id, text) {
            return Err(err(format!(
                "`model.vocab` gives id {id} to both {other:?} and {text:?}"
            )));
        }
        map.insert(text.clone(), id);
    }
    Ok(map)
}

impl Model {
    fn parse(o: &Map<String, Value>) -> Result<Model> {
        let ty = match o.get("type") {
            Some(Value::String(s)) => s.as_str(),
            None if o.contains_key("merges") => "BPE",
            None if o.contains_key("max_input_chars_per_word") => "WordPiece",
            _ => return Err(err("`model.type` is missing")),
        };
        match ty {
            "BPE" => BpeHf::parse(o).map(Model::Bpe),
            "WordPiece" => WordPieceHf::parse(o).map(Model::WordPiece),
            other => Err(err(format!(
                "model type `{other}` is not supported (supported: BPE, WordPiece)"
            ))),
        }
    }

    fn vocab(&self) -> &FastMap<String, u32> {
        match self {
            Model::Bpe(m) => &m.vocab,
            Model::WordPiece(m) => &m.vocab,
        }
    }

    fn tokenize(&self, word: &str, out: &mut Vec<u32>) {
        match self {
            Model::Bpe(m) => m.tokenize(word, out),
            Model::WordPiece(m) => m.tokenize(word, out),
        }
    }
}

impl BpeHf {
    fn parse(o: &Map<String, Value>) -> Result<BpeHf> {
        const WHAT: &str = "model";
        match o.get("dropout") {
            None | Some(Value::Null) => {}
            Some(v) if v.as_f64() == Some(0.0) => {}
            Some(v) => return Err(err(format!("BPE dropout ({v}) is not supported"))),
        }
        for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
            match o.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s.is_empty() => {}
                Some(v) => return Err(err(format!("BPE `{key}` ({v}) is not supported"))),
            }
        }
        let vocab = parse_vocab_map(o)?;
        let merges_json = o
            .get("merges")
            .and_then(Value::as_array)
            .ok_or_else(|| err("`model.merges` is missing or not an array"))?;
        let mut merges = FastMap::with_capacity_and_hasher(merges_json.len(), Default::default());
        let mut rank = 0u32;
        for (i, m) in merges_json.iter().enumerate() {
            let (a, b) = match m {
                Value::String(s) => {
                    if s.starts_with("#version") {
                        continue;
                    }
                    let parts: Vec<&str> = s.split(' ').collect();
                    if parts.len() != 2 {
                        return Err(err(format!(
                            "`model.merges[{i}]` {s:?} is not two tokens separated by a space"
                        )));
                    }
                    (parts[0].to_string(), parts[1].to_string())
                }
                Value::Array(pair) => match pair.as_slice() {
                    [Value::String(a), Value::String(b)] => (a.clone(), b.clone()),
                    _ => return Err(err(format!("`model.merges[{i}]` is not a pair of strings"))),
                },
                _ => return Err(err(format!("`model.merges[{i}]` is not a string or pair"))),
            };
            let id = |t: &str| {
                vocab.get(t).copied().ok_or_else(|| {
                    err(format!(
                        "`model.merges[{i}]`: {t:?} is not in the vocabulary"
                    ))
                })
            };
            let pair = (id(&a)?, id(&b)?);
            merges.insert(pair, (rank, id(&format!("{a}{b}"))?));
            rank += 1;
        }
        let unk = match o.get("unk_token") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                vocab
                    .get(s.as_str())
                    .copied()
                    .ok_or_else(|| err(format!("BPE unk_token {s:?} is not in the vocabulary")))?,
            ),
            Some(_) => return Err(err("BPE unk_token is not a string")),
        };
        let byte_ids = (0..=255u8)
            .map(|b| vocab.get(format!("<0x{b:02X}>").as_str()).copied())
            .collect();
        Ok(BpeHf {
            unk,
            fuse_unk: bool_field(o, "fuse_unk", false, WHAT)?,
            byte_fallback: bool_field(o, "byte_fallback", false, WHAT)?,
            ignore_merges: bool_field(o, "ignore_merges", false, WHAT)?,
            byte_level: false,
            byte_ids,
            vocab,
            merges,
        })
    }

    /// `BPE::tokenize` of one word: `merge_word` then `Word::merge_all`.
    fn tokenize(&self, word: &str, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if self.ignore_merges {
            if let Some(&id) = self.vocab.get(word) {
                out.push(id);
                return;
            }
        }
        let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
        let add = |symbols: &mut Vec<Symbol>, c: u32, len: usize| {
            let n = symbols.len() as isize;
            if let Some(last) = symbols.last_mut() {
                last.next = n;
            }
            symbols.push(Symbol {
                c,
                prev: n - 1,
                next: -1,
                len,
            });
        };
        let mut unk: Option<(u32, usize)> = None;
        let mut buf = [0u8; 4];
        for ch in word.chars() {
            let s: &str = ch.encode_utf8(&mut buf);
            let len = s.len();
            if let Some(&id) = self.vocab.get(s) {
                if let Some((u, l)) = unk.take() {
                    add(&mut symbols, u, l);
                }
                add(&mut symbols, id, len);
                continue;
            }
            if self.byte_fallback {
                let ids: Option<Vec<u32>> = s.bytes().map(|b| self.byte_ids[b as usize]).collect();
                if let Some(ids) = ids {
                    for id in ids {
                        add(&mut symbols, id, 1);
                    }
                    continue;
                }
            }
            if let Some(unk_id) = self.unk {
                unk = match (unk, self.fuse_unk) {
                    (Some((u, l)), true) => Some((u, l + len)),
                    (Some((u, l)), false) => {
                        add(&mut symbols, u, l);
                        Some((unk_id, len))
                    }
                    (None, _) => Some((unk_id, len)),
                };
            }
        }
        if let Some((u, l)) = unk {
            add(&mut symbols, u, l);
        }
        self.merge_all(&mut symbols);
        out.extend(symbols.iter().filter(|s| s.len != 0).map(|s| s.c));
    }

    /// `Word::merge_all` without dropout.
    fn merge_all(&self, symbols: &mut [Symbol]) {
        let mut queue: BinaryHeap<MergeItem> = symbols
            .windows(2)
            .enumerate()
            .filter_map(|(pos, w)| {
                self.merges
                    .get(&(w[0].c, w[1].c))
                    .map(|&(rank, new_id)| MergeItem { rank, pos, new_id })
            })
            .collect();
        while let Some(top) = queue.pop() {
            if symbols[top.pos].len == 0 || symbols[top.pos].next == -1 {
                continue;
            }
            let next_pos = symbols[top.pos].next as usize;
            let right = symbols[next_pos];
            let pair = (symbols[top.pos].c, right.c);
            if self
                .merges
                .get(&pair)
                .is_none_or(|&(_, id)| id != top.new_id)
            {
                continue;
            }
            let current = &mut symbols[top.pos];
            current.c = top.new_id;
            current.len += right.len;
            current.next = right.next;
            symbols[next_pos].len = 0;
            if right.next > -1 && (right.next as usize) < symbols.len() {
                symbols[right.next as usize].prev = top.pos as isize;
            }
            let current = symbols[top.pos];
            if current.prev >= 0 {
                let prev = current.prev as usize;
                if let Some(&(rank, new_id)) = self.merges.get(&(symbols[prev].c, current.c)) {
                    queue.push(MergeItem {
                        rank,
                        pos: prev,
                        new_id,
                    });
                }
            }
            let next = current.next;
            if next >= 0 && (next as usize) < symbols.len() {
                if let Some(&(rank, new_id)) =
                    self.merges.get(&(current.c, symbols[next as usize].c))
                {
                    queue.push(MergeItem {
                        rank,
                        pos: top.pos,
                        new_id,
                    });
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Symbol {
    c: u32,
    prev: isize,
    next: isize,
    len: usize,
}

#[derive(PartialEq, Eq)]
struct MergeItem {
    rank: u32,
    pos: usize,
    new_id: u32,
}

impl Ord for MergeItem {
    /// Lowest rank first, then leftmost (a max-heap of the reversed order).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.pos.cmp(&self.pos))
    }
}

impl PartialOrd for MergeItem {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl WordPieceHf {
    fn parse(o: &Map<String, Value>) -> Result<WordPieceHf> {
        let vocab = parse_vocab_map(o)?;
        let unk_text = match o.get("unk_token") {
            None | Some(Value::Null) => "[UNK]",
            Some(Value::String(s)) => s.as_str(),
            Some(_) => return Err(err("WordPiece unk_token is not a string")),
        };
        let unk = vocab.get(unk_text).copied().ok_or_else(|| {
            err(format!(
                "WordPiece unk_token {unk_text:?} is not in the vocabulary"
            ))
        })?;
        let prefix = match o.get("continuing_subword_prefix") {
            None | Some(Value::Null) => "##".to_string(),
            Some(Value::String(s)) => s.clone(),
            Some(_) => return Err(err("WordPiece continuing_subword_prefix is not a string")),
        };
        let max_chars = match o.get("max_input_chars_per_word") {
            None | Some(Value::Null) => 100,
            Some(v) => v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| err("WordPiece max_input_chars_per_word is not a number"))?,
        };
        Ok(WordPieceHf {
            vocab,
            unk,
            prefix,
            max_chars,
        })
    }

    /// `WordPiece::tokenize`: greedy longest match; a word with an unmatchable part, or longer
    /// than `max_input_chars_per_word` characters, is the unknown token.
    fn tokenize(&self, word: &str, out: &mut Vec<u32>) {
        if word.chars().count() > self.max_chars {
            out.push(self.unk);
            return;
        }
        let mark = out.len();
        let mut start = 0;
        let mut candidate = String::new();
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while start < end {
                candidate.clear();
                if start > 0 {
                    candidate.push_str(&self.prefix);
                }
                candidate.push_str(&word[start..end]);
                if let Some(&id) = self.vocab.get(candidate.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= candidate.chars().next_back().map_or(1, char::len_utf8);
            }
            match found {
                Some(id) => out.push(id),
                None => {
                    out.truncate(mark);
                    out.push(self.unk);
                    return;
                }
            }
            start = end;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Post-processors

/// The tokens `add_special` puts around the ids.
#[derive(Clone, Debug, Default)]
struct PostProcessor {
    prefix: Vec<u32>,
    suffix: Vec<u32>,
}

impl PostProcessor {
    fn parse(v: &Value, id_of: &dyn Fn(&str) -> Option<u32>) -> Result<PostProcessor> {
        let o = obj(v, "post_processor")?;
        let ty = type_of(o, "post_processor")?;
        let token_pair = |name: &str| -> Result<u32> {
            match o.get(name).and_then(Value::as_array).map(Vec::as_slice) {
                Some([Value::String(_), id]) => id
                    .as_u64()
                    .and_then(|i| u32::try_from(i).ok())
                    .ok_or_else(|| err(format!("post_processor {ty}.{name} has no token id"))),
                _ => Err(err(format!("post_processor {ty}.{name} is not [text, id]"))),
            }
        };
        Ok(match ty {
            "ByteLevel" => PostProcessor::default(),
            "BertProcessing" | "RobertaProcessing" => PostProcessor {
                prefix: vec![token_pair("cls")?],
                suffix: vec![token_pair("sep")?],
            },
            "Sequence" => {
                let list = o
                    .get("processors")
                    .and_then(Value::as_array)
                    .ok_or_else(|| err("`post_processor.processors` is missing"))?;
                let mut out = PostProcessor::default();
                for p in list {
                    let inner = PostProcessor::parse(p, id_of)?;
                    out.prefix.splice(0..0, inner.prefix);
                    out.suffix.extend(inner.suffix);
                }
                out
            }
            "TemplateProcessing" => {
                let single = o
                    .get("single")
                    .and_then(Value::as_array)
                    .ok_or_else(|| err("TemplateProcessing has no `single` template"))?;
                let specials = o.get("special_tokens").and_then(Value::as_object);
                let mut out = PostProcessor::default();
                let mut seen_a = false;
                for piece in single {
                    let piece = obj(piece, "TemplateProcessing.single[]")?;
                    if let Some(seq) = piece.get("Sequence") {
                        if seq.get("id").and_then(Value::as_str) != Some("A") || seen_a {
                            return Err(err(
                                "TemplateProcessing `single` must hold sequence A once",
                            ));
                        }
                        seen_a = true;
                    } else if let Some(tok) = piece.get("SpecialToken") {
                        let name = tok
                            .get("id")
                            .and_then(Value::as_str)
                            .ok_or_else(|| err("TemplateProcessing special token has no id"))?;
                        let ids: Vec<u32> = match specials.and_then(|s| s.get(name)) {
                            Some(entry) => entry
                                .get("ids")
                                .and_then(Value::as_array)
                                .ok_or_else(|| {
                                    err(format!("TemplateProcessing `{name}` has no ids"))
                                })?
                                .iter()
                                .map(|i| {
                                    i.as_u64().and_then(|i| u32::try_from(i).ok()).ok_or_else(
                                        || err(format!("TemplateProcessing `{name}`: bad id")),
                                    )
                                })
                                .collect::<Result<_>>()?,
                            None => vec![id_of(name).ok_or_else(|| {
                                err(format!("TemplateProcessing token `{name}` is unknown"))
                            })?],
                        };
                        if seen_a {
                            out.suffix.extend(ids);
                        } else {
                            out.prefix.extend(ids);
                        }
                    } else {
                        return Err(err(
                            "TemplateProcessing piece is neither Sequence nor SpecialToken",
                        ));
                    }
                }
                if !seen_a {
                    return Err(err("TemplateProcessing `single` has no sequence A"));
                }
                out
            }
            other => {
                return Err(err(format!(
                    "post-processor `{other}` is not supported (supported: TemplateProcessing, \
                     BertProcessing, RobertaProcessing, ByteLevel, Sequence)"
                )))
            }
        })
    }
}

// ---------------------------------------------------------------------------------------------
// The vocabulary

fn build_vocab(
    model: &Model,
    added: &[AddedToken],
    normalizer: &[Normalizer],
    pre: &PreTokenizerSpec,
    post: &PostProcessor,
    overrides: SpecialIds,
    warnings: &mut Vec<String>,
) -> Result<Vocab> {
    let model_vocab = model.vocab();
    let size = model_vocab
        .values()
        .chain(added.iter().map(|t| &t.id))
        .map(|&id| id as usize + 1)
        .max()
        .unwrap_or(0);
    // Ids are dense in real vocabularies; a few holes become placeholders, not billions.
    if size > model_vocab.len() + added.len() + 1_000_000 {
        return Err(err(format!(
            "token ids go up to {} for {} tokens",
            size - 1,
            model_vocab.len() + added.len()
        )));
    }
    if let Some(id) = post
        .prefix
        .iter()
        .chain(&post.suffix)
        .find(|&&id| id as usize >= size)
    {
        return Err(err(format!(
            "the post-processor adds token id {id}, past the vocabulary ({size} tokens)"
        )));
    }
    let mut texts: Vec<Option<String>> = vec![None; size];
    let mut types = vec![TokenType::Normal; size];
    for (text, &id) in model_vocab {
        let text = match model {
            // llama.cpp's WordPiece layout: `▁word`, continuation pieces without their prefix.
            Model::WordPiece(wp) => match text.strip_prefix(wp.prefix.as_str()) {
                Some(rest) if !wp.prefix.is_empty() && !rest.is_empty() => rest.to_string(),
                _ => format!("\u{2581}{text}"),
            },
            Model::Bpe(_) => text.clone(),
        };
        texts[id as usize] = Some(text);
    }
    if let Model::Bpe(bpe) = model {
        if bpe.byte_fallback {
            for id in bpe.byte_ids.iter().flatten() {
                types[*id as usize] = TokenType::Byte;
            }
        }
        if let Some(unk) = bpe.unk {
            types[unk as usize] = TokenType::Unknown;
        }
    }
    if let Model::WordPiece(wp) = model {
        types[wp.unk as usize] = TokenType::Unknown;
    }
    for t in added {
        texts[t.id as usize] = Some(t.content.clone());
        types[t.id as usize] = if t.special {
            TokenType::Control
        } else {
            TokenType::UserDefined
        };
    }
    let holes = texts.iter().filter(|t| t.is_none()).count();
    if holes > 0 {
        warnings.push(format!(
            "{KEY}: {holes} ids below {size} have no token; they are unused placeholders"
        ));
    }
    let tokens: Vec<TokenData> = texts
        .into_iter()
        .zip(types)
        .enumerate()
        .map(|(i, (text, ty))| {
            let (text, ty) = match text {
                Some(t) => (t, ty),
                None => (format!("[HF_UNUSED_{i}]"), TokenType::Unused),
            };
            TokenData {
                text: text.into_bytes().into(),
                score: 0.0,
                ty,
                attr: ty.attr(),
            }
        })
        .collect();

    let find = |texts: &[&str]| {
        texts.iter().find_map(|t| {
            added
                .iter()
                .find(|a| a.special && a.content == *t)
                .map(|a| a.id)
        })
    };
    let single = |ids: &[u32]| match ids {
        [id] => Some(*id),
        _ => None,
    };
    let bos = overrides.bos.or(single(&post.prefix)).or_else(|| {
        find(&[
            "<s>",
            "<|begin_of_text|>",
            "<bos>",
            "<|startoftext|>",
            "[CLS]",
        ])
    });
    let eos = overrides.eos.or(single(&post.suffix)).or_else(|| {
        find(&[
            "</s>",
            "<|end_of_text|>",
            "<|endoftext|>",
            "<eos>",
            "<|im_end|>",
            "[SEP]",
        ])
    });
    let unk = overrides.unk.or(match model {
        Model::Bpe(m) => m.unk,
        Model::WordPiece(m) => Some(m.unk),
    });
    let special = SpecialIds {
        bos,
        eos,
        eot: overrides.eot,
        eom: None,
        unk,
        sep: match model {
            Model::WordPiece(_) => single(&post.suffix).or_else(|| find(&["[SEP]"])),
            Model::Bpe(_) => None,
        },
        pad: overrides
            .pad
            .or_else(|| find(&["<pad>", "[PAD]", "<|pad|>", "<|finetune_right_pad_id|>"])),
    };
    let add_bos = !post.prefix.is_empty() && bos.is_some() && post.prefix == [bos.unwrap_or(0)];
    let add_eos = !post.suffix.is_empty() && eos.is_some() && post.suffix == [eos.unwrap_or(0)];
    let prepends_space = pre.steps.iter().any(|s| {
        matches!(
            s,
            PreStep::Metaspace { prepend, .. } if *prepend != PrependScheme::Never
        )
    }) || normalizer
        .iter()
        .any(|n| matches!(n, Normalizer::Prepend(s) if s == "\u{2581}" || s == " "));
    let (kind, byte_level) = match model {
        Model::Bpe(m) => (ModelKind::Bpe, m.byte_level),
        Model::WordPiece(_) => (ModelKind::Wpm, false),
    };
    Vocab::from_parts(VocabParts {
        kind,
        tokens,
        special,
        add_bos,
        add_eos,
        add_space_prefix: prepends_space || kind == ModelKind::Wpm,
        pre: if byte_level {
            pre.mapped_name.clone()
        } else {
            String::new()
        },
        escape_whitespaces: kind == ModelKind::Bpe && !byte_level,
    })
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

// ---------------------------------------------------------------------------------------------
// llama.cpp's regexes per pre-tokenizer type

/// For each llama.cpp pre-tokenizer type (by one of its names), the regex lists that select it:
/// the list `llm_tokenizer_bpe` gives the type (llama.cpp commit 0c1e57098,
/// `src/llama-vocab.cpp`), and the original `tokenizer.json` list where llama.cpp records a
/// different one, in [`canonical_regex`] form. Types whose regex is llama.cpp's own device
/// (kimi-k2's, afmoe's digits, gemma4's and whitespace's raw-UTF-8 splitting) are left out.
#[rustfmt::skip]
const PRE_REGEXES: &[(&str, &[&[&str]])] = &[
    ("llama-bpe", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("jais-2", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|\s{128}(?!\S)|\s{64}(?!\S)|\s{32}(?!\S)|\s{16}(?!\S)|\s{8}(?!\S)|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}",
        ],
    ]),
    ("dbrx", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("deepseek-llm", &[
        &[
            r"[\r\n]",
            r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-ώᾀ-ᾴᾶ-ᾼιῂ-ῄῆ-ῌῐ-ΐῖ-Ίῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤΩℨK-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
            r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
            r"\s+$",
            r"[一-龥ࠀ-一가-퟿]+",
            r"\p{N}+",
        ],
    ]),
    ("deepseek-v3", &[
        &[
            r"\p{N}{1,3}",
            r"[一-龥぀-ゟ゠-ヿ]+",
            r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
        ],
    ]),
    ("spark2_5", &[
        &[
            r"\p{N}{1,3}",
            r"[一-龥぀-ゟ゠-ヿ]+",
            r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+"##,
            r"\p{N}",
        ],
    ]),
    ("youtu", &[
        &[
            r"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("deepseek-coder", &[
        &[
            r"[\r\n]",
            r"\s?\p{L}+",
            r"\s?\p{P}+",
            r"[一-龥ࠀ-一가-퟿]+",
            r"\p{N}",
        ],
    ]),
    ("falcon", &[
        &[
            r"[\p{P}\$\+<=>\^~\|`]+",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
            r"[0-9][0-9][0-9]",
        ],
    ]),
    ("starcoder", &[
        &[
            r"\p{N}",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
        ],
    ]),
    ("gpt-2", &[
        &[
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
        ],
    ]),
    ("qwen2", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("qwen35", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("poro-chat", &[
        &[
            r" ?[^(\s|.,!?…。，、।۔،)]+",
        ],
    ]),
    ("chatglm-bpe", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("viking", &[
        &[
            r" ?[^(\s|.,!?…。，、।۔،)]+",
            r"\p{N}",
        ],
    ]),
    ("tekken", &[
        &[
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        &[
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("chameleon", &[
        &[
            r"<sentinel:[0-9]+>",
            r"(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
            r"([\t\n]|    |  )",
            r"\p{N}",
            r"[\p{P}!-/:-@\[-`{-~]",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
        ],
    ]),
    ("gpt-4o", &[
        &[
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
        &[
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("granite-embed-multi-97m", &[
        &[
            r"[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))*((?=[\p{L}\p{M}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}\p{M}])([^a-z]))+((?=[\p{L}\p{M}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("tiny_aya", &[
        &[
            r"\d{1,3}(?=(?:\d{3})*\b)",
            r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("superbpe", &[
        &[
            r"\p{N}+",
            r"(?=(\d{3})+(?!\d))",
        ],
    ]),
    ("bailingmoe", &[
        &[
            r"'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
        &[
            r"'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
    ]),
    ("seed-coder", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("ufakzeka", &[
        &[
            r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("grok-2", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("laguna", &[
        &[
            r"[^\n]+|[\n]+",
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("exaone-moe", &[
        &[
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+",
        ],
    ]),
    ("minicpm5", &[
        &[
            r"\p{N}{1,3}",
            r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
        ],
    ]),
    ("default", &[
        &[
            r"[\p{P}\$\+<=>\^~\|]+",
            r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
            r"\p{N}+",
            r"[0-9][0-9][0-9]",
        ],
    ]),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn nfc(s: &str) -> String {
        unorm::nfc(&Piece::new(s, 0)).string()
    }

    fn nfd(s: &str) -> String {
        unorm::nfd(&Piece::new(s, 0)).string()
    }

    #[test]
    fn nfc_and_nfd() {
        assert_eq!(nfc("e\u{301}"), "\u{e9}");
        assert_eq!(nfd("\u{e9}"), "e\u{301}");
        // Singletons and composition exclusions do not come back.
        assert_eq!(nfc("\u{212b}"), "\u{c5}");
        assert_eq!(nfc("\u{2126}"), "\u{3a9}");
        assert_eq!(nfc("\u{344}"), "\u{308}\u{301}");
        // Canonical reordering, then composition past a mark of another class.
        assert_eq!(nfd("a\u{301}\u{323}"), "a\u{323}\u{301}");
        assert_eq!(nfc("a\u{323}\u{302}"), "\u{1ead}");
        assert_eq!(nfc("\u{1ead}"), "\u{1ead}");
        // Blocked: a mark of the same class in between.
        assert_eq!(nfc("a\u{301}\u{301}"), "\u{e1}\u{301}");
        // Hangul, algorithmically.
        assert_eq!(nfc("\u{1100}\u{1161}\u{11a8}"), "\u{ac01}");
        assert_eq!(nfd("\u{ac01}"), "\u{1100}\u{1161}\u{11a8}");
        assert_eq!(nfc("\u{ac00}\u{11a8}"), "\u{ac01}");
        // Origins follow the characters.
        let p = unorm::nfc(&Piece::new("xe\u{301}", 10));
        assert_eq!(p.orig, vec![10, 11]);
    }

    #[test]
    fn hugging_face_regexes_map_onto_llama_cpp_types() {
        let llama3 = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
        assert_eq!(
            type_for_regexes(&[canonical_regex(llama3)]),
            Some("llama-bpe")
        );
        assert_eq!(
            type_for_regexes(&[canonical_regex(GPT2_REGEX)]),
            Some("gpt-2")
        );
        let coder = [
            "[\r\n]",
            r"\s?\p{L}+",
            r"\s?\p{P}+",
            "[一-龥ࠀ-一가-퟿]+",
            r"\p{N}",
        ];
        let coder: Vec<String> = coder.iter().map(|r| canonical_regex(r)).collect();
        assert_eq!(type_for_regexes(&coder), Some("deepseek-coder"));
        // Every table entry names a type llama.cpp knows.
        for (name, _) in PRE_REGEXES {
            assert!(PreTokenizer::from_name(name).is_some(), "{name}");
        }
    }

    #[test]
    fn a_deepseek_coder_sequence_is_mapped_with_a_warning() {
        let json = r#"{"type":"Sequence","pretokenizers":[
            {"type":"Split","pattern":{"Regex":"[\r\n]"},"behavior":"Isolated","invert":false},
            {"type":"Split","pattern":{"Regex":"\\s?\\p{L}+"},"behavior":"Isolated","invert":false},
            {"type":"Split","pattern":{"Regex":"\\s?\\p{P}+"},"behavior":"Isolated","invert":false},
            {"type":"Split","pattern":{"Regex":"[一-龥ࠀ-一가-퟿]+"},"behavior":"Isolated","invert":false},
            {"type":"Digits","individual_digits":true},
            {"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}]}"#;
        let v: Value = serde_json::from_str(json).unwrap();
        let mut warnings = Vec::new();
        let spec = PreTokenizerSpec::parse(&v, &mut warnings).unwrap();
        assert_eq!(spec.mapped_name, "deepseek-coder");
        assert!(spec.byte_level);
        assert_eq!(spec.steps.len(), 1);
        assert!(warnings[0].contains("`deepseek-coder`"), "{warnings:?}");
    }

    #[test]
    fn metaspace_splits_before_each_replacement() {
        let step = PreStep::Metaspace {
            replacement: '\u{2581}',
            prepend: PrependScheme::First,
            split: true,
        };
        let mut out = Vec::new();
        step.apply(Piece::new("a  b", 0), &mut out);
        let words: Vec<String> = out.iter().map(Piece::string).collect();
        assert_eq!(words, ["\u{2581}a", "\u{2581}", "\u{2581}b"]);
        out.clear();
        step.apply(Piece::new("a b", 5), &mut out);
        let words: Vec<String> = out.iter().map(Piece::string).collect();
        assert_eq!(words, ["a", "\u{2581}b"]);
    }
}
