//! The vocabulary as llama.cpp loads it from `tokenizer.ggml.*`: token texts, scores, types
//! (turned into attributes), the special ids with each model kind's defaults, and the
//! add-BOS/EOS flags.

use memchr::memmem;
use rustc_hash::FxHashMap;

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

bitflags::bitflags! {
    /// llama.cpp's token attributes (`llama_token_attr`), bit flags. They start from the token
    /// type and are then adjusted by the loader's rules (chat markers forced to control, and so
    /// on); behaviour follows them, not the stored type.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    pub(crate) struct Attr: u32 {
        const UNKNOWN = 1 << 0;
        const UNUSED = 1 << 1;
        const NORMAL = 1 << 2;
        const CONTROL = 1 << 3;
        const USER_DEFINED = 1 << 4;
        const BYTE = 1 << 5;
        const LSTRIP = 1 << 7;
        const RSTRIP = 1 << 8;
    }
}

impl TokenType {
    /// The attributes a token of this stored type starts with.
    pub(crate) fn attr(self) -> Attr {
        match self {
            TokenType::Undefined => Attr::empty(),
            TokenType::Normal => Attr::NORMAL,
            TokenType::Unknown => Attr::UNKNOWN,
            TokenType::Control => Attr::CONTROL,
            TokenType::UserDefined => Attr::USER_DEFINED,
            TokenType::Unused => Attr::UNUSED,
            TokenType::Byte => Attr::BYTE,
        }
    }
}

/// Texts llama.cpp takes for end-of-turn when no `eot_token_id` is given.
const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "<end_of_utterance>",
];

/// Texts of tokens that end generation (llama.cpp's `special_eog_ids` rule).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "[e~[",
];

/// Fill-in-the-middle roles: metadata key suffix and the texts llama.cpp looks for.
const FIM_ROLES: &[(&str, &[&str])] = &[
    (
        "fim_pre_token_id",
        &[
            "<|fim_prefix|>",
            "<fim-prefix>",
            "<fim_prefix>",
            "<\u{ff5c}fim\u{2581}begin\u{ff5c}>",
            "<PRE>",
            "\u{2581}<PRE>",
            "<|code_prefix|>",
            "<|prefix|>",
        ],
    ),
    (
        "fim_suf_token_id",
        &[
            "<|fim_suffix|>",
            "<fim-suffix>",
            "<fim_suffix>",
            "<\u{ff5c}fim\u{2581}hole\u{ff5c}>",
            "<SUF>",
            "\u{2581}<SUF>",
            "<|code_suffix|>",
            "<|suffix|>",
        ],
    ),
    (
        "fim_mid_token_id",
        &[
            "<|fim_middle|>",
            "<fim-middle>",
            "<fim_middle>",
            "<\u{ff5c}fim\u{2581}end\u{ff5c}>",
            "<MID>",
            "\u{2581}<MID>",
            "<|code_middle|>",
            "<|middle|>",
        ],
    ),
    (
        "fim_pad_token_id",
        &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"],
    ),
    (
        "fim_rep_token_id",
        &[
            "<|fim_repo|>",
            "<|repo_name|>",
            "<fim-repo>",
            "<REPO>",
            "<reponame>",
        ],
    ),
    ("fim_sep_token_id", &["<|file_sep|>"]),
];

/// The tokenizer model a file names in `tokenizer.ggml.model`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// `llama`: SentencePiece BPE over scores, `▁` for spaces, byte fallback.
    Spm,
    /// `gpt2`: byte-level BPE over ranked merges, after a pre-tokenizer.
    Bpe,
    /// `bert`: WordPiece, greedy longest match over lowercased, accent-stripped words.
    Wpm,
    /// `t5`: Unigram, Viterbi over scores after the precompiled-charsmap normaliser.
    Ugm,
}

/// One vocabulary entry.
#[derive(Debug, Clone)]
pub(crate) struct TokenData {
    pub text: Box<[u8]>,
    pub score: f32,
    /// The stored type.
    pub ty: TokenType,
    /// llama.cpp's attributes after its loader's rules ([`Attr`]).
    pub attr: Attr,
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
    /// End of message (tool call).
    pub eom: Option<u32>,
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
    pub ids: FxHashMap<Box<[u8]>, u32>,
    pub special: SpecialIds,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    /// `tokenizer.ggml.pre` (BPE only; empty when absent).
    pub pre: String,
    /// Ids of control, user-defined and unknown tokens, longest text first: the order in
    /// which llama.cpp looks for them in the input.
    pub special_cache: Vec<u32>,
    /// Tokens that end generation, ascending.
    pub eog: Vec<u32>,
    /// `tokenizer.ggml.add_sep_token` (default: WordPiece only).
    pub add_sep: bool,
    /// BertNormalizer options (WordPiece): `tokenizer.ggml.normalizer.lowercase` (default
    /// true) and `.strip_accents` (default: as `lowercase`).
    pub lowercase: bool,
    pub strip_accents: bool,
    /// `tokenizer.ggml.remove_extra_whitespaces` (Unigram).
    pub remove_extra_whitespaces: bool,
    /// Spaces become `▁` (Unigram; and BPE for the few pre-tokenizers that ask for it). Not
    /// stored in the file.
    pub escape_whitespaces: bool,
    /// The `▁` goes after words instead of before (Unigram). Never set by llama.cpp's loader.
    pub treat_whitespace_as_suffix: bool,
    /// `tokenizer.ggml.precompiled_charsmap` (Unigram), unparsed.
    pub precompiled_charsmap: Option<Box<[u8]>>,
    /// The longest token text, in bytes.
    pub max_token_len: usize,
}

/// The parts of a vocabulary that [`Vocab::from_parts`] takes (`tokenizer.huggingface.json`).
pub(crate) struct VocabParts {
    pub kind: ModelKind,
    /// Texts, scores, stored types and final attributes, by id; texts unique.
    pub tokens: Vec<TokenData>,
    pub special: SpecialIds,
    pub add_bos: bool,
    pub add_eos: bool,
    pub add_space_prefix: bool,
    pub pre: String,
    pub escape_whitespaces: bool,
}

/// The options of the text handling a model kind reads from its own keys (WordPiece's
/// normalizer, Unigram's whitespace and charsmap); all off for `tokenizer.huggingface.json`.
#[derive(Default)]
struct TextOptions {
    add_sep: bool,
    lowercase: bool,
    strip_accents: bool,
    remove_extra_whitespaces: bool,
    precompiled_charsmap: Option<Box<[u8]>>,
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
            "bert" => (
                ModelKind::Wpm,
                SpecialIds {
                    bos: Some(101),
                    unk: Some(100),
                    sep: Some(102),
                    pad: Some(0),
                    ..SpecialIds::default()
                },
                true,
                false,
                false,
            ),
            "t5" => (
                ModelKind::Ugm,
                SpecialIds {
                    eos: Some(1),
                    unk: Some(2),
                    pad: Some(0),
                    ..SpecialIds::default()
                },
                false,
                true,
                false,
            ),
            other => {
                return Err(meta(format!(
                    "tokenizer.ggml.model `{other}` is not supported \
                     (supported: llama, gpt2, bert, t5)"
                )))
            }
        };
        let pre = match kind {
            ModelKind::Bpe => file
                .get_opt::<&str>("tokenizer.ggml.pre")?
                .unwrap_or("")
                .to_string(),
            ModelKind::Spm | ModelKind::Wpm | ModelKind::Ugm => String::new(),
        };
        // Unigram: SentencePiece's normaliser table, checked when the model is built.
        let precompiled_charsmap = match kind {
            ModelKind::Ugm => match file.value("tokenizer.ggml.precompiled_charsmap") {
                None => None,
                Some(gguf_format::Value::Array(arr))
                    if matches!(
                        arr.element_type(),
                        gguf_format::ValueType::U8 | gguf_format::ValueType::I8
                    ) =>
                {
                    Some(arr.raw_bytes().into())
                }
                Some(_) => {
                    return Err(meta(
                        "tokenizer.ggml.precompiled_charsmap must be an array of u8 or i8",
                    ))
                }
            },
            _ => None,
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
        let mut ids = FxHashMap::with_capacity_and_hasher(n, Default::default());
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
                attr: Attr::NORMAL,
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
            eom: id_key("tokenizer.ggml.eom_token_id", None)?,
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
        // `add_sep` only informs callers (llama.cpp's tokenizer never reads it: its WordPiece
        // path appends SEP whenever it adds BOS); BertNormalizer options; Unigram whitespace.
        let add_sep = file
            .get_opt::<bool>("tokenizer.ggml.add_sep_token")?
            .unwrap_or(match kind {
                ModelKind::Wpm => true,
                ModelKind::Bpe => matches!(
                    file.get_opt::<&str>("tokenizer.ggml.pre")?,
                    Some("jina-v1-en" | "jina-v2-code" | "roberta-bpe")
                ),
                _ => false,
            });
        let lowercase = file
            .get_opt::<bool>("tokenizer.ggml.normalizer.lowercase")?
            .unwrap_or(true);
        let strip_accents = file
            .get_opt::<bool>("tokenizer.ggml.normalizer.strip_accents")?
            .unwrap_or(lowercase);
        let remove_extra_whitespaces = file
            .get_opt::<bool>("tokenizer.ggml.remove_extra_whitespaces")?
            .unwrap_or(false);
        let escape_whitespaces = match kind {
            ModelKind::Bpe => matches!(
                file.get_opt::<&str>("tokenizer.ggml.pre")?,
                Some("gemma4" | "granite-embed-multi-311m" | "sarvam-moe")
            ),
            _ => true,
        };
        if add_bos && special.bos.is_none() {
            return Err(meta("add_bos_token is set but there is no BOS token"));
        }
        if add_eos && special.eos.is_none() {
            return Err(meta("add_eos_token is set but there is no EOS token"));
        }

        for t in &mut tokens {
            t.attr = if types.is_some() {
                t.ty.attr()
            } else {
                Attr::NORMAL
            };
        }
        let mut special = special;
        let fim_ids = adjust_attributes(file, &mut tokens, &ids, &mut special)?;
        let eog = end_of_generation(&mut tokens, &ids, &special, &fim_ids);

        let parts = VocabParts {
            kind,
            tokens,
            special,
            add_bos,
            add_eos,
            add_space_prefix,
            pre,
            escape_whitespaces,
        };
        let text = TextOptions {
            add_sep,
            lowercase,
            strip_accents,
            remove_extra_whitespaces,
            precompiled_charsmap,
        };
        Ok(Vocab::assemble(parts, ids, eog, text))
    }

    /// Builds a vocabulary that another description than `tokenizer.ggml.*` gave (a Hugging
    /// Face `tokenizer.json`), already parsed. Token attributes are taken as given: llama.cpp's
    /// loader rules, which change attributes by token text, are not applied. End of generation
    /// is EOS, EOT and EOM plus the control tokens whose text llama.cpp takes as an end; EOT and
    /// EOM, when not given, are the control tokens with llama.cpp's texts for them.
    pub(crate) fn from_parts(mut parts: VocabParts) -> Result<Vocab> {
        let (tokens, special) = (&parts.tokens, &mut parts.special);
        let mut ids = FxHashMap::with_capacity_and_hasher(tokens.len(), Default::default());
        for (i, t) in tokens.iter().enumerate() {
            ids.insert(t.text.clone(), i as u32);
        }
        let in_range = |id: Option<u32>| id.filter(|&id| (id as usize) < tokens.len());
        *special = SpecialIds {
            bos: in_range(special.bos),
            eos: in_range(special.eos),
            eot: in_range(special.eot),
            eom: in_range(special.eom),
            unk: in_range(special.unk),
            sep: in_range(special.sep),
            pad: in_range(special.pad),
        };
        if parts.add_bos && special.bos.is_none() {
            return Err(meta("add_bos_token is set but there is no BOS token"));
        }
        if parts.add_eos && special.eos.is_none() {
            return Err(meta("add_eos_token is set but there is no EOS token"));
        }
        let control_with_text = |texts: &[&str]| {
            texts
                .iter()
                .filter_map(|t| ids.get(t.as_bytes()).copied())
                .filter(|&id| tokens[id as usize].attr.contains(Attr::CONTROL))
                .min()
        };
        special.eot = special.eot.or_else(|| control_with_text(EOT_TEXTS));
        special.eom = special.eom.or_else(|| control_with_text(&["<|eom_id|>"]));
        let mut eog: Vec<u32> = EOG_TEXTS
            .iter()
            .filter_map(|t| ids.get(t.as_bytes()).copied())
            .filter(|&id| tokens[id as usize].attr.contains(Attr::CONTROL))
            .chain(
                [special.eos, special.eot, special.eom]
                    .into_iter()
                    .flatten(),
            )
            .collect();
        eog.sort_unstable();
        eog.dedup();
        let text = TextOptions {
            add_sep: parts.kind == ModelKind::Wpm,
            ..TextOptions::default()
        };
        Ok(Vocab::assemble(parts, ids, eog, text))
    }

    /// The vocabulary of `parts`, with the lookups built from its tokens.
    fn assemble(
        parts: VocabParts,
        ids: FxHashMap<Box<[u8]>, u32>,
        eog: Vec<u32>,
        text: TextOptions,
    ) -> Vocab {
        Vocab {
            special_cache: special_cache(&parts.tokens),
            max_token_len: parts.tokens.iter().map(|t| t.text.len()).max().unwrap_or(0),
            kind: parts.kind,
            tokens: parts.tokens,
            ids,
            special: parts.special,
            add_bos: parts.add_bos,
            add_eos: parts.add_eos,
            add_space_prefix: parts.add_space_prefix,
            pre: parts.pre,
            eog,
            add_sep: text.add_sep,
            lowercase: text.lowercase,
            strip_accents: text.strip_accents,
            remove_extra_whitespaces: text.remove_extra_whitespaces,
            escape_whitespaces: parts.escape_whitespaces,
            treat_whitespace_as_suffix: false,
            precompiled_charsmap: text.precompiled_charsmap,
        }
    }

    /// The id of the token whose text is exactly `text`.
    #[inline]
    pub(crate) fn id(&self, text: &[u8]) -> Option<u32> {
        self.ids.get(text).copied()
    }
}

/// Ids of control, user-defined and unknown tokens, longest text first (llama.cpp's unstable
/// sort leaves equal lengths in an unspecified order; ids ascending here).
fn special_cache(tokens: &[TokenData]) -> Vec<u32> {
    let mut cache: Vec<u32> = (0..tokens.len() as u32)
        .filter(|&id| {
            tokens[id as usize]
                .attr
                .intersects(Attr::CONTROL | Attr::USER_DEFINED | Attr::UNKNOWN)
        })
        .collect();
    cache.sort_by(|&a, &b| {
        tokens[b as usize]
            .text
            .len()
            .cmp(&tokens[a as usize].text.len())
            .then(a.cmp(&b))
    });
    cache
}

/// The id of the first token (by id) whose text is one of `texts`.
fn find_text(ids: &FxHashMap<Box<[u8]>, u32>, texts: &[&str]) -> Option<u32> {
    texts
        .iter()
        .filter_map(|t| ids.get(t.as_bytes()).copied())
        .min()
}

/// llama.cpp's loader rules that change attributes: end-of-turn, end-of-message and
/// fill-in-the-middle tokens found by their text (when the metadata names none) become
/// control tokens; control tokens named "unused" are unused; some models' special tokens
/// strip the whitespace beside them. Returns the fill-in-the-middle ids (pad, rep, sep end
/// generation).
///
/// llama.cpp walks an unordered map, so when a vocabulary has several candidate texts for one
/// role, which one it takes is unspecified; the lowest id is taken here.
fn adjust_attributes(
    file: &GgufFile,
    tokens: &mut [TokenData],
    ids: &FxHashMap<Box<[u8]>, u32>,
    special: &mut SpecialIds,
) -> Result<Vec<Option<u32>>> {
    fn force_control(tokens: &mut [TokenData], id: Option<u32>) {
        if let Some(id) = id {
            tokens[id as usize].attr |= Attr::CONTROL;
        }
    }
    if special.eot.is_none() {
        special.eot = find_text(ids, EOT_TEXTS);
        force_control(tokens, special.eot);
    }
    if special.eom.is_none() {
        special.eom = find_text(ids, &["<|eom_id|>"]);
        force_control(tokens, special.eom);
    }
    let mut fim = Vec::new();
    for (key, texts) in FIM_ROLES {
        let given = match file.value(&format!("tokenizer.ggml.{key}")) {
            Some(v) => v
                .as_integer()
                .and_then(|i| u32::try_from(i).ok())
                .filter(|&i| (i as usize) < tokens.len()),
            None => None,
        };
        let id = match given {
            Some(id) => Some(id),
            None => {
                let found = find_text(ids, texts);
                force_control(tokens, found);
                found
            }
        };
        fim.push(id);
    }
    for t in tokens.iter_mut() {
        if t.attr.contains(Attr::CONTROL) && memmem::find(&t.text, b"unused").is_some() {
            t.attr |= Attr::UNUSED;
        }
    }

    // Whitespace stripping by model, tokenizer or architecture name.
    let name = file
        .get_opt::<&str>("general.name")?
        .unwrap_or("")
        .to_lowercase();
    let pre = file.get_opt::<&str>("tokenizer.ggml.pre")?.unwrap_or("");
    let arch = file.get_opt::<&str>("general.architecture")?.unwrap_or("");
    let contains_any = |s: &str, subs: &[&str]| subs.iter().any(|x| s.contains(x));
    let set = |tokens: &mut [TokenData], text: &str, flag: Attr, on: bool| {
        if let Some(&id) = ids.get(text.as_bytes()) {
            tokens[id as usize].attr.set(flag, on);
        }
    };
    if contains_any(pre, &["jina-v2-de", "jina-v2-es", "jina-v2-code"])
        || contains_any(arch, &["nomic-bert-moe", "jina-bert-v3"])
    {
        set(tokens, "<mask>", Attr::LSTRIP, true);
    } else if contains_any(&name, &["phi-3", "phi3"]) {
        for t in tokens.iter_mut() {
            if t.attr
                .intersects(Attr::CONTROL | Attr::USER_DEFINED | Attr::UNKNOWN)
            {
                t.attr |= Attr::RSTRIP;
            }
        }
        set(tokens, "</s>", Attr::RSTRIP, true);
        for text in ["<unk>", "<s>", "<|endoftext|>"] {
            set(tokens, text, Attr::RSTRIP, false);
        }
    } else if contains_any(&name, &["modern-bert"]) {
        set(tokens, "[MASK]", Attr::LSTRIP, true);
    }
    Ok(fim)
}

/// The end-of-generation set, as llama.cpp builds it (forcing those tokens to control).
fn end_of_generation(
    tokens: &mut [TokenData],
    ids: &FxHashMap<Box<[u8]>, u32>,
    special: &SpecialIds,
    fim: &[Option<u32>],
) -> Vec<u32> {
    let mut eog: Vec<u32> = fim[3..].iter().flatten().copied().collect();
    for text in EOG_TEXTS {
        if let Some(&id) = ids.get(text.as_bytes()) {
            eog.push(id);
            tokens[id as usize].attr |= Attr::CONTROL;
        }
    }
    // gpt-oss: these render always.
    for text in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
        if let Some(&id) = ids.get(text.as_bytes()) {
            tokens[id as usize].attr = Attr::USER_DEFINED;
        }
    }
    eog.extend(
        [special.eos, special.eot, special.eom]
            .into_iter()
            .flatten(),
    );
    eog.sort_unstable();
    eog.dedup();
    let id_of = |tokens: &[TokenData], eog: &[u32], t: &str| {
        eog.iter()
            .copied()
            .find(|&id| &*tokens[id as usize].text == t.as_bytes())
    };
    let has = |tokens: &[TokenData], eog: &[u32], t: &str| id_of(tokens, eog, t).is_some();
    // o200k_harmony and solar-open: `<|end|>` is not the end there.
    let call = has(tokens, &eog, "<|call|>") || has(tokens, &eog, "<|calls|>");
    if call && (has(tokens, &eog, "<|return|>") || has(tokens, &eog, "<|flush|>")) {
        if let Some(end) = id_of(tokens, &eog, "<|end|>") {
            eog.retain(|&id| id != end);
            tokens[end as usize].attr = Attr::USER_DEFINED;
        }
    }
    // gemma4 and plamo have an ordinary `</s>`.
    if has(tokens, &eog, "<|tool_response>") || has(tokens, &eog, "<|plamo:eos|>") {
        if let Some(s) = id_of(tokens, &eog, "</s>") {
            eog.retain(|&id| id != s);
            tokens[s as usize].attr = Attr::NORMAL;
        }
    }
    eog
}
