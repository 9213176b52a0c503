//! The schema of a Hugging Face `tokenizer.json`, as serde types: what the crate's reader
//! ([`crate::Tokenizer::from_huggingface_json`]) reads and what `gguf export` writes.
//!
//! Laid out as `tokenizers` lays it out: one enum per pipeline stage ([`Normalizer`],
//! [`PreTokenizer`], [`Model`], [`PostProcessor`], [`Decoder`]), each internally tagged by its
//! `"type"` (as `#[serde(tag = "type")]` writes it), one struct per variant whose fields are in
//! `tokenizers`' order, so that serializing (with `serde_json`'s `preserve_order`) writes the
//! keys as `tokenizers` writes them. Every type `tokenizers` 0.23 knows is here, including those
//! the reader refuses (Unigram, NFKC, ...), so that a refusal can name them.
//!
//! Optional fields are `Option`s and `null` reads as absent, as `tokenizers` takes it; the
//! defaults are the reader's. Unknown fields are ignored, as `tokenizers` ignores them.
//!
//! [`from_value`] reads any of these types from a [`serde_json::Value`] with errors that name
//! where they are (``at `pre_tokenizer.pretokenizers[1].invert`: invalid type: ...``), nested
//! stages included; plain `serde_json::from_str` works too, with serde's own messages.
//!
//! ```
//! use gguf_tokenizer::hf_json::schema::{self, Normalizer, TokenizerJson};
//! let json = r#"{"normalizer": {"type": "NFC"}, "model": {"type": "WordPiece",
//!     "vocab": {"[UNK]": 0}}}"#;
//! let t: TokenizerJson = schema::from_value(serde_json::from_str(json)?)?;
//! assert_eq!(t.normalizer, Some(Normalizer::Nfc));
//! let e = schema::from_value::<TokenizerJson>(serde_json::from_str(
//!     r#"{"normalizer": {"type": "Strip", "strip_left": 1}, "model": {"merges": [], "vocab": {}}}"#,
//! )?)
//! .unwrap_err();
//! assert!(e.to_string().starts_with("at `normalizer.strip_left`: invalid type"), "{e}");
//! # Ok::<(), serde_json::Error>(())
//! ```

use std::fmt;

use serde::de::{
    self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor,
};
use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Deserialize, Serialize, Serializer};
use serde_json::{Map, Value};

// ---------------------------------------------------------------------------------------------
// The file

/// A whole `tokenizer.json`, its keys in `tokenizers`' order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TokenizerJson {
    /// The format version (`"1.0"`).
    #[serde(default)]
    pub version: Option<String>,
    /// Truncation settings; not interpreted.
    #[serde(default)]
    pub truncation: Option<Value>,
    /// Padding settings; not interpreted.
    #[serde(default)]
    pub padding: Option<Value>,
    /// Tokens matched in the text before the normalizer and pre-tokenizer run.
    #[serde(default)]
    pub added_tokens: Option<Vec<AddedToken>>,
    /// The normalizer (a [`Normalizer::Sequence`] for several).
    #[serde(default)]
    pub normalizer: Option<Normalizer>,
    /// The pre-tokenizer (a [`PreTokenizer::Sequence`] for several).
    #[serde(default)]
    pub pre_tokenizer: Option<PreTokenizer>,
    /// The post-processor (a [`PostProcessor::Sequence`] for several).
    #[serde(default)]
    pub post_processor: Option<PostProcessor>,
    /// The decoder (a [`Decoder::Sequence`] for several).
    #[serde(default)]
    pub decoder: Option<Decoder>,
    /// The model.
    pub model: Model,
}

/// One entry of `added_tokens`; the flags' defaults (absent or `null`) are `false`, and
/// `normalized` is `!special`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AddedToken {
    /// The id the file gives it (`tokenizers` gives its own on loading).
    #[serde(default)]
    pub id: Option<u64>,
    /// The token's text.
    pub content: String,
    /// Matches only as a whole word.
    #[serde(default)]
    pub single_word: Option<bool>,
    /// Takes the whitespace on its left.
    #[serde(default)]
    pub lstrip: Option<bool>,
    /// Takes the whitespace on its right.
    #[serde(default)]
    pub rstrip: Option<bool>,
    /// Matched in the normalized text rather than the raw text.
    #[serde(default)]
    pub normalized: Option<bool>,
    /// A special (control) token.
    #[serde(default)]
    pub special: Option<bool>,
}

// ---------------------------------------------------------------------------------------------
// Shared parts

/// A pattern of `Replace` and `Split`: a literal string or a regex, written
/// `{"String": "..."}` or `{"Regex": "..."}`. Reading a map that has both takes `String`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Pattern {
    /// A literal string.
    String(String),
    /// A regex (Oniguruma syntax).
    Regex(String),
}

impl<'de> Deserialize<'de> for Pattern {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Pattern, D::Error> {
        let mut map = Map::<String, Value>::deserialize(d)?;
        let text = |v: Value, key: &str| match v {
            Value::String(s) => Ok(s),
            other => Err(de::Error::custom(format!(
                "at `{key}`: invalid type: {}, expected a string",
                kind(&other)
            ))),
        };
        if let Some(s) = map.remove("String") {
            return text(s, "String").map(Pattern::String);
        }
        if let Some(r) = map.remove("Regex") {
            return text(r, "Regex").map(Pattern::Regex);
        }
        Err(de::Error::custom(
            "the pattern has neither `String` nor `Regex`",
        ))
    }
}

/// `SplitDelimiterBehavior`: what becomes of a match when a piece is split at it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Behavior {
    /// The match is dropped.
    Removed,
    /// The match is a piece of its own.
    Isolated,
    /// The match joins the piece before it.
    MergedWithPrevious,
    /// The match joins the piece after it.
    MergedWithNext,
    /// Consecutive matches form one piece.
    Contiguous,
}

/// `Metaspace`'s `prepend_scheme`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PrependScheme {
    /// Only before the first piece of the input.
    First,
    /// Never.
    Never,
    /// Before every piece.
    Always,
}

/// A JSON object whose keys keep their order (`tokenizers` writes vocabularies and special
/// tokens as objects).
#[derive(Clone, Debug, PartialEq)]
pub struct OrderedMap<V>(pub Vec<(String, V)>);

impl<V> Default for OrderedMap<V> {
    fn default() -> OrderedMap<V> {
        OrderedMap(Vec::new())
    }
}

impl<V> OrderedMap<V> {
    /// The value of `key` (the first, should the list repeat it).
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// Sets `key` to `value`: in its place if it is there, else at the end.
    pub fn insert(&mut self, key: String, value: V) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
    }
}

impl<V: Serialize> Serialize for OrderedMap<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for OrderedMap<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OrderedMap<V>, D::Error> {
        struct Entries<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for Entries<V> {
            type Value = OrderedMap<V>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedMap<V>, A::Error> {
                // Grown as entries arrive: no capacity is taken from the input.
                let mut out = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    out.push(entry);
                }
                Ok(OrderedMap(out))
            }
        }
        d.deserialize_map(Entries(std::marker::PhantomData))
    }
}

// ---------------------------------------------------------------------------------------------
// Tagged enums

/// Declares a stage enum: serialized as `#[serde(tag = "type")]`, read through [`tagged`] so
/// that errors inside a variant name its field.
macro_rules! stage {
    (
        $(#[$meta:meta])*
        pub enum $name:ident ($stage:literal) {
            $( $(#[$vmeta:meta])* $tag:literal => $variant:ident $(($ty:ty))?, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, PartialEq, Serialize)]
        #[serde(tag = "type")]
        pub enum $name {
            $( $(#[$vmeta])* #[serde(rename = $tag)] $variant $(($ty))?, )*
        }

        impl $name {
            /// The `"type"` of every variant, in declaration order.
            pub const TYPES: &'static [&'static str] = &[$($tag),*];

            /// This value's `"type"`.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $( stage!(@pattern $name $variant $(($ty))?) => $tag, )*
                }
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<$name, D::Error> {
                let (tag, fields) = tagged::<D>(d)?;
                match tag.as_str() {
                    $( $tag => stage!(@read $name $variant fields $(($ty))?), )*
                    other => Err(de::Error::custom(format!(
                        "unknown {} type `{other}` (known: {})",
                        $stage,
                        $name::TYPES.join(", ")
                    ))),
                }
            }
        }
    };
    (@pattern $name:ident $variant:ident ($ty:ty)) => { $name::$variant(_) };
    (@pattern $name:ident $variant:ident) => { $name::$variant };
    (@read $name:ident $variant:ident $fields:ident ($ty:ty)) => {
        from_value::<$ty>(Value::Object($fields))
            .map($name::$variant)
            .map_err(de::Error::custom)
    };
    (@read $name:ident $variant:ident $fields:ident) => {{
        let _ = $fields;
        Ok($name::$variant)
    }};
}

/// An internally tagged value: its `"type"` and its other fields.
fn tagged<'de, D: Deserializer<'de>>(d: D) -> Result<(String, Map<String, Value>), D::Error> {
    let mut fields = Map::<String, Value>::deserialize(d)?;
    match fields.remove("type") {
        Some(Value::String(tag)) => Ok((tag, fields)),
        Some(other) => Err(de::Error::custom(format!(
            "at `type`: invalid type: {}, expected a string",
            kind(&other)
        ))),
        None => Err(de::Error::missing_field("type")),
    }
}

/// What a value is, as serde's messages name it.
fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "sequence",
        Value::Object(_) => "map",
    }
}

// ---------------------------------------------------------------------------------------------
// Normalizers

stage! {
    /// A normalizer (`tokenizers`' `NormalizerWrapper`).
    pub enum Normalizer ("normalizer") {
        /// `BertNormalizer`.
        "BertNormalizer" => Bert(BertNormalizer),
        /// `Strip`.
        "Strip" => Strip(Strip),
        /// `StripAccents`: removes combining marks.
        "StripAccents" => StripAccents,
        /// Unicode NFC.
        "NFC" => Nfc,
        /// Unicode NFD.
        "NFD" => Nfd,
        /// Unicode NFKC.
        "NFKC" => Nfkc,
        /// Unicode NFKD.
        "NFKD" => Nfkd,
        /// Several normalizers, in order.
        "Sequence" => Sequence(NormalizerSequence),
        /// `Lowercase`.
        "Lowercase" => Lowercase,
        /// `Nmt`: SentencePiece's NMT clean-up.
        "Nmt" => Nmt,
        /// `Precompiled`: a SentencePiece charsmap.
        "Precompiled" => Precompiled(Precompiled),
        /// `Replace`.
        "Replace" => Replace(Replace),
        /// `Prepend`.
        "Prepend" => Prepend(Prepend),
        /// `ByteLevel`: text to its byte-level characters.
        "ByteLevel" => ByteLevel,
    }
}

/// `BertNormalizer`'s fields (defaults: `true`, `strip_accents` as `lowercase`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BertNormalizer {
    /// Removes control characters and makes whitespace spaces.
    #[serde(default)]
    pub clean_text: Option<bool>,
    /// Puts spaces around CJK characters.
    #[serde(default)]
    pub handle_chinese_chars: Option<bool>,
    /// Removes accents (`null`: as `lowercase`).
    #[serde(default)]
    pub strip_accents: Option<bool>,
    /// Lowercases; left out when writing `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lowercase: Option<bool>,
}

/// `Strip`'s fields (defaults: `true`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Strip {
    /// Strips leading whitespace.
    #[serde(default)]
    pub strip_left: Option<bool>,
    /// Strips trailing whitespace.
    #[serde(default)]
    pub strip_right: Option<bool>,
}

/// A `Sequence` of normalizers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NormalizerSequence {
    /// The normalizers, in order.
    pub normalizers: Vec<Normalizer>,
}

/// `Precompiled`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Precompiled {
    /// The charsmap, base64.
    #[serde(default)]
    pub precompiled_charsmap: Option<String>,
}

/// `Replace`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Replace {
    /// What is replaced.
    pub pattern: Pattern,
    /// What replaces it.
    pub content: String,
}

/// `Prepend`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prepend {
    /// The text put before the input.
    pub prepend: String,
}

// ---------------------------------------------------------------------------------------------
// Pre-tokenizers

stage! {
    /// A pre-tokenizer (`tokenizers`' `PreTokenizerWrapper`).
    pub enum PreTokenizer ("pre-tokenizer") {
        /// `BertPreTokenizer`: splits at whitespace and isolates punctuation.
        "BertPreTokenizer" => Bert,
        /// `ByteLevel`.
        "ByteLevel" => ByteLevel(ByteLevel),
        /// `CharDelimiterSplit`.
        "CharDelimiterSplit" => CharDelimiterSplit(CharDelimiterSplit),
        /// `Metaspace`.
        "Metaspace" => Metaspace(Metaspace),
        /// `Whitespace`: `\w+|[^\w\s]+`.
        "Whitespace" => Whitespace,
        /// Several pre-tokenizers, in order.
        "Sequence" => Sequence(PreTokenizerSequence),
        /// `Split`.
        "Split" => Split(Split),
        /// `Punctuation`.
        "Punctuation" => Punctuation(Punctuation),
        /// `WhitespaceSplit`: splits at whitespace.
        "WhitespaceSplit" => WhitespaceSplit,
        /// `Digits`.
        "Digits" => Digits(Digits),
        /// `UnicodeScripts`.
        "UnicodeScripts" => UnicodeScripts,
        /// `FixedLength`.
        "FixedLength" => FixedLength(FixedLength),
    }
}

/// `ByteLevel`'s fields, as pre-tokenizer, post-processor and decoder (defaults: `true`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ByteLevel {
    /// Puts a space before the first word.
    #[serde(default)]
    pub add_prefix_space: Option<bool>,
    /// Trims offsets of the whitespace (offsets only).
    #[serde(default)]
    pub trim_offsets: Option<bool>,
    /// Splits with GPT-2's regex first.
    #[serde(default)]
    pub use_regex: Option<bool>,
}

/// `CharDelimiterSplit`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CharDelimiterSplit {
    /// The delimiter, one character.
    pub delimiter: String,
}

/// `Metaspace`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Metaspace {
    /// What spaces become, one character.
    pub replacement: String,
    /// When a replacement goes before a piece (`null`: from `add_prefix_space`).
    #[serde(default)]
    pub prepend_scheme: Option<PrependScheme>,
    /// Splits before each replacement (default `true`).
    #[serde(default)]
    pub split: Option<bool>,
    /// The field older files have instead of `prepend_scheme` (default `true`: always).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_prefix_space: Option<bool>,
}

/// A `Sequence` of pre-tokenizers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PreTokenizerSequence {
    /// The pre-tokenizers, in order.
    pub pretokenizers: Vec<PreTokenizer>,
}

/// `Split`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Split {
    /// Where to split.
    pub pattern: Pattern,
    /// What becomes of the matches (default `Removed`).
    #[serde(default)]
    pub behavior: Option<Behavior>,
    /// Whether the pattern gives the pieces rather than the delimiters (default `false`).
    #[serde(default)]
    pub invert: Option<bool>,
}

/// `Punctuation`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Punctuation {
    /// What becomes of the punctuation (default `Isolated`).
    #[serde(default)]
    pub behavior: Option<Behavior>,
}

/// `Digits`' fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Digits {
    /// Each digit alone (default `false`: runs of digits).
    #[serde(default)]
    pub individual_digits: Option<bool>,
}

/// `FixedLength`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FixedLength {
    /// The length of a piece, in characters.
    #[serde(default)]
    pub length: Option<u64>,
}

// ---------------------------------------------------------------------------------------------
// Models

/// A model (`tokenizers`' `ModelWrapper`), tagged by `"type"`; a model without one is read as
/// BPE if it has `merges` and as WordPiece if it has `max_input_chars_per_word`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "type")]
pub enum Model {
    /// `BPE`.
    #[serde(rename = "BPE")]
    Bpe(Bpe),
    /// `WordPiece`.
    WordPiece(WordPiece),
    /// `Unigram`.
    Unigram(Unigram),
    /// `WordLevel`.
    WordLevel(WordLevel),
}

impl Model {
    /// The `"type"` of every variant.
    pub const TYPES: &'static [&'static str] = &["BPE", "WordPiece", "Unigram", "WordLevel"];

    /// This model's `"type"`.
    pub fn type_name(&self) -> &'static str {
        match self {
            Model::Bpe(_) => "BPE",
            Model::WordPiece(_) => "WordPiece",
            Model::Unigram(_) => "Unigram",
            Model::WordLevel(_) => "WordLevel",
        }
    }
}

impl<'de> Deserialize<'de> for Model {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Model, D::Error> {
        let mut fields = Map::<String, Value>::deserialize(d)?;
        let tag = match fields.remove("type") {
            Some(Value::String(tag)) => tag,
            None if fields.contains_key("merges") => "BPE".into(),
            None if fields.contains_key("max_input_chars_per_word") => "WordPiece".into(),
            _ => return Err(de::Error::custom("at `type`: missing or not a string")),
        };
        let fields = Value::Object(fields);
        match tag.as_str() {
            "BPE" => from_value(fields).map(Model::Bpe),
            "WordPiece" => from_value(fields).map(Model::WordPiece),
            "Unigram" => from_value(fields).map(Model::Unigram),
            "WordLevel" => from_value(fields).map(Model::WordLevel),
            other => {
                return Err(de::Error::custom(format!(
                    "unknown model type `{other}` (known: {})",
                    Model::TYPES.join(", ")
                )))
            }
        }
        .map_err(de::Error::custom)
    }
}

/// `BPE`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bpe {
    /// Merge dropout (training only).
    #[serde(default)]
    pub dropout: Option<f64>,
    /// The unknown token's text.
    #[serde(default)]
    pub unk_token: Option<String>,
    /// The prefix of a piece that continues a word.
    #[serde(default)]
    pub continuing_subword_prefix: Option<String>,
    /// The suffix of a piece that ends a word.
    #[serde(default)]
    pub end_of_word_suffix: Option<String>,
    /// Consecutive unknown characters become one unknown token (default `false`).
    #[serde(default)]
    pub fuse_unk: Option<bool>,
    /// Unknown characters become `<0xNN>` byte tokens (default `false`).
    #[serde(default)]
    pub byte_fallback: Option<bool>,
    /// A word in the vocabulary is one token, whatever the merges (default `false`).
    #[serde(default)]
    pub ignore_merges: Option<bool>,
    /// Text to id.
    pub vocab: OrderedMap<u64>,
    /// The merges, highest priority first.
    pub merges: Vec<Merge>,
}

/// One merge of `BPE.merges`: `"a b"` (or a `#version` line) or `["a", "b"]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Merge {
    /// Written as text, two tokens separated by a space (unchecked).
    Text(String),
    /// Written as a pair.
    Pair(String, String),
}

impl Serialize for Merge {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Merge::Text(t) => s.serialize_str(t),
            Merge::Pair(a, b) => {
                let mut seq = s.serialize_seq(Some(2))?;
                seq.serialize_element(a)?;
                seq.serialize_element(b)?;
                seq.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Merge {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Merge, D::Error> {
        struct MergeVisitor;
        impl<'de> Visitor<'de> for MergeVisitor {
            type Value = Merge;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string or a pair of strings")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Merge, E> {
                Ok(Merge::Text(s.to_string()))
            }
            fn visit_string<E: de::Error>(self, s: String) -> Result<Merge, E> {
                Ok(Merge::Text(s))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Merge, A::Error> {
                let not_a_pair = || de::Error::custom("not a pair of strings");
                let mut next = || -> Result<String, A::Error> {
                    match seq.next_element::<Value>()? {
                        Some(Value::String(s)) => Ok(s),
                        _ => Err(not_a_pair()),
                    }
                };
                let (a, b) = (next()?, next()?);
                match seq.next_element::<de::IgnoredAny>()? {
                    None => Ok(Merge::Pair(a, b)),
                    Some(_) => Err(not_a_pair()),
                }
            }
        }
        d.deserialize_any(MergeVisitor)
    }
}

/// `WordPiece`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WordPiece {
    /// The unknown token's text (default `[UNK]`).
    #[serde(default)]
    pub unk_token: Option<String>,
    /// The prefix of a piece that continues a word (default `##`).
    #[serde(default)]
    pub continuing_subword_prefix: Option<String>,
    /// Longer words are the unknown token (default 100).
    #[serde(default)]
    pub max_input_chars_per_word: Option<u64>,
    /// Text to id.
    pub vocab: OrderedMap<u64>,
}

/// `Unigram`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Unigram {
    /// The unknown token's id.
    #[serde(default)]
    pub unk_id: Option<u64>,
    /// Pieces and their scores, by id.
    #[serde(default)]
    pub vocab: Vec<(String, f64)>,
    /// Unknown characters become `<0xNN>` byte tokens.
    #[serde(default)]
    pub byte_fallback: Option<bool>,
}

/// `WordLevel`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WordLevel {
    /// Text to id.
    #[serde(default)]
    pub vocab: OrderedMap<u64>,
    /// The unknown token's text.
    #[serde(default)]
    pub unk_token: Option<String>,
}

// ---------------------------------------------------------------------------------------------
// Post-processors

stage! {
    /// A post-processor (`tokenizers`' `PostProcessorWrapper`).
    pub enum PostProcessor ("post-processor") {
        /// `RobertaProcessing`.
        "RobertaProcessing" => Roberta(RobertaProcessing),
        /// `BertProcessing`.
        "BertProcessing" => Bert(BertProcessing),
        /// `ByteLevel` (offsets only).
        "ByteLevel" => ByteLevel(ByteLevel),
        /// `TemplateProcessing`.
        "TemplateProcessing" => Template(TemplateProcessing),
        /// Several post-processors, in order.
        "Sequence" => Sequence(PostProcessorSequence),
    }
}

/// `BertProcessing`'s fields: `[CLS] A [SEP]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BertProcessing {
    /// `[text, id]` of the token after the sequence.
    pub sep: (String, u64),
    /// `[text, id]` of the token before the sequence.
    pub cls: (String, u64),
}

/// `RobertaProcessing`'s fields: `<s> A </s>`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RobertaProcessing {
    /// `[text, id]` of the token after the sequence.
    pub sep: (String, u64),
    /// `[text, id]` of the token before the sequence.
    pub cls: (String, u64),
    /// Offsets only.
    #[serde(default)]
    pub trim_offsets: Option<bool>,
    /// Offsets only.
    #[serde(default)]
    pub add_prefix_space: Option<bool>,
}

/// `TemplateProcessing`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TemplateProcessing {
    /// The template of one sequence.
    pub single: Vec<TemplatePiece>,
    /// The template of a pair of sequences.
    #[serde(default)]
    pub pair: Vec<TemplatePiece>,
    /// The special tokens the templates name, by name.
    #[serde(default)]
    pub special_tokens: OrderedMap<SpecialToken>,
}

/// One piece of a template: `{"Sequence": {...}}` or `{"SpecialToken": {...}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum TemplatePiece {
    /// An input sequence.
    Sequence {
        /// Which sequence.
        id: SequenceId,
        /// Its type id.
        #[serde(default)]
        type_id: u32,
    },
    /// A special token, by its name in `special_tokens` (else its text).
    SpecialToken {
        /// The name.
        id: String,
        /// Its type id.
        #[serde(default)]
        type_id: u32,
    },
}

/// The sequences of a template.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SequenceId {
    /// The first.
    A,
    /// The second.
    B,
}

/// An entry of `TemplateProcessing.special_tokens`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpecialToken {
    /// Its name.
    #[serde(default)]
    pub id: String,
    /// The ids it stands for.
    pub ids: Vec<u32>,
    /// Their texts.
    #[serde(default)]
    pub tokens: Vec<String>,
}

/// A `Sequence` of post-processors.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PostProcessorSequence {
    /// The post-processors, in order.
    pub processors: Vec<PostProcessor>,
}

// ---------------------------------------------------------------------------------------------
// Decoders

stage! {
    /// A decoder (`tokenizers`' `DecoderWrapper`). The crate's reader does not use it: decoding
    /// is the crate's own.
    pub enum Decoder ("decoder") {
        /// `BPEDecoder`.
        "BPEDecoder" => Bpe(BpeDecoder),
        /// `ByteLevel`.
        "ByteLevel" => ByteLevel(ByteLevel),
        /// `WordPiece`.
        "WordPiece" => WordPiece(WordPieceDecoder),
        /// `Metaspace`.
        "Metaspace" => Metaspace(Metaspace),
        /// `CTC`.
        "CTC" => Ctc(Ctc),
        /// Several decoders, in order.
        "Sequence" => Sequence(DecoderSequence),
        /// `Replace`.
        "Replace" => Replace(Replace),
        /// `Fuse`: joins the pieces.
        "Fuse" => Fuse,
        /// `Strip`.
        "Strip" => Strip(StripDecoder),
        /// `ByteFallback`: `<0xNN>` tokens to bytes.
        "ByteFallback" => ByteFallback,
    }
}

/// `BPEDecoder`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BpeDecoder {
    /// The end-of-word suffix to turn into spaces.
    #[serde(default)]
    pub suffix: Option<String>,
}

/// The `WordPiece` decoder's fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WordPieceDecoder {
    /// The continuation prefix to remove.
    #[serde(default)]
    pub prefix: Option<String>,
    /// Cleans up spaces before punctuation.
    #[serde(default)]
    pub cleanup: Option<bool>,
}

/// `CTC`'s fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ctc {
    /// The padding token.
    #[serde(default)]
    pub pad_token: Option<String>,
    /// The word delimiter token.
    #[serde(default)]
    pub word_delimiter_token: Option<String>,
    /// Cleans up spaces.
    #[serde(default)]
    pub cleanup: Option<bool>,
}

/// The `Strip` decoder's fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StripDecoder {
    /// The character stripped.
    pub content: String,
    /// How many from the start.
    #[serde(default)]
    pub start: u64,
    /// How many from the end.
    #[serde(default)]
    pub stop: u64,
}

/// A `Sequence` of decoders.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecoderSequence {
    /// The decoders, in order.
    pub decoders: Vec<Decoder>,
}

mod paths;
pub use paths::from_value;
#[allow(unused_imports)]
use paths::*;

#[cfg(test)]
mod tests;
