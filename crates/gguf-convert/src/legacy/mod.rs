//! Legacy llama files to GGUF: unversioned GGML (`lmgg`), GGMF v1 (`fmgg`) and GGJT v1-v3
//! (`tjgg`), the formats llama.cpp wrote before GGUF (March to August 2023).
//!
//! A legacy file is a magic (and a version, but for GGML), seven u32 hyperparameters
//! (`n_vocab, n_embd, n_mult, n_head, n_layer, n_rot, ftype`), `n_vocab` tokens (a u32 length,
//! the bytes, and but for GGML an f32 score), then tensors to the end of the file: `n_dims`,
//! name length, type, `n_dims` u32 dimensions (row length first), the name, in GGJT padding to
//! a multiple of 32 bytes from the file's start, and the data.
//!
//! [`LegacyModel::write_gguf`] writes what llama.cpp's `convert_llama_ggml_to_gguf.py` writes
//! (the same keys in the same order, the same token texts and types, today's tensor names),
//! and does better where that script cannot:
//! - a file without tensors (a vocabulary such as llama.cpp's old `models/ggml-vocab.bin`)
//!   converts; `feed_forward_length` then comes from `n_mult` as llama.cpp computed it;
//! - quantized tensors from before GGJT v3 are repacked into today's block layouts with the
//!   same values ([`blocks`](self) explains the eras), or written as F32 where a block's f32
//!   scale is not an f16 value (see [`ScalePolicy`]);
//! - F16 and F32 tensors keep their shapes (the script's shapes are wrong for them).
//!
//! Files that are not llama-layout (whisper.cpp's `lmgg` files, LoRA adapters, session
//! files) are refused with an error that says what they are. Every length and count read from
//! the file is checked against the bytes that remain before anything is allocated.

mod blocks;

use std::io::Write;

use gguf_format::{GgmlType, GgufBuilder, OwnedArray, OwnedValue, TensorSpec, ValueType};

use blocks::{Block, Era};
pub use blocks::{OldQuant, ScalePolicy};

use crate::check::{check_plan, Origins};
use crate::error::{Error, Result};

/// `lmgg` as a little-endian u32: unversioned GGML.
pub const MAGIC_GGML: u32 = 0x6767_6d6c;
/// `fmgg`: GGMF, versioned (v1 only).
pub const MAGIC_GGMF: u32 = 0x6767_6d66;
/// `tjgg`: GGJT, versioned (v1-v3), tensor data aligned to 32 bytes.
pub const MAGIC_GGJT: u32 = 0x6767_6a74;
/// `algg`: a llama.cpp LoRA adapter.
const MAGIC_GGLA: u32 = 0x6767_6c61;
/// `nsgg`: a llama.cpp session file.
const MAGIC_GGSN: u32 = 0x6767_736e;

/// Layer 0's gate, whose rows give the feed-forward width.
const FIRST_W1: &str = "layers.0.feed_forward.w1.weight";

/// The alignment of GGJT tensor data.
const GGJT_ALIGNMENT: usize = 32;

/// The container a legacy file is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Container {
    /// Unversioned GGML (`lmgg`): no token scores, no alignment.
    Ggml,
    /// GGMF v1 (`fmgg`): token scores, no alignment.
    Ggmf,
    /// GGJT (`tjgg`) of this version (1-3): token scores, tensor data aligned to 32 bytes.
    Ggjt(u32),
}

impl Container {
    /// The name `convert_llama_ggml_to_gguf.py` gives it (`GGMLv1`, `GGMFv1`, `GGJTv3`).
    pub fn name(self) -> String {
        match self {
            Container::Ggml => "GGMLv1".to_string(),
            Container::Ggmf => "GGMFv1".to_string(),
            Container::Ggjt(v) => format!("GGJTv{v}"),
        }
    }

    fn era(self) -> Era {
        match self {
            Container::Ggjt(3) => Era::Current,
            Container::Ggjt(2) => Era::F32Scales,
            _ => Era::Shuffled,
        }
    }

    fn has_scores(self) -> bool {
        self != Container::Ggml
    }
}

/// The seven hyperparameters of a legacy llama file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hparams {
    /// Tokens in the vocabulary.
    pub n_vocab: u32,
    /// Embedding width.
    pub n_embd: u32,
    /// The multiple the feed-forward width was rounded up to.
    pub n_mult: u32,
    /// Attention heads.
    pub n_head: u32,
    /// Layers.
    pub n_layer: u32,
    /// Rotary dimensions per head.
    pub n_rot: u32,
    /// The file type (llama.cpp's `llama_ftype`: 0 all F32, 1 mostly F16, 2 mostly Q4_0, ...).
    pub ftype: u32,
}

/// The names of the legacy file types, as the conversion script prints them.
fn ftype_name(ftype: u32) -> Option<&'static str> {
    Some(match ftype {
        0 => "ALL_F32",
        1 => "MOSTLY_F16",
        2 => "MOSTLY_Q4_0",
        3 => "MOSTLY_Q4_1",
        4 => "MOSTLY_Q4_1_SOME_F16",
        5 => "MOSTLY_Q4_2",
        6 => "MOSTLY_Q4_3",
        7 => "MOSTLY_Q8_0",
        8 => "MOSTLY_Q5_0",
        9 => "MOSTLY_Q5_1",
        10 => "MOSTLY_Q2_K",
        11 => "MOSTLY_Q3_K_S",
        12 => "MOSTLY_Q3_K_M",
        13 => "MOSTLY_Q3_K_L",
        14 => "MOSTLY_Q4_K_S",
        15 => "MOSTLY_Q4_K_M",
        16 => "MOSTLY_Q5_K_S",
        17 => "MOSTLY_Q5_K_M",
        18 => "MOSTLY_Q6_K",
        _ => return None,
    })
}

/// A vocabulary entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Token<'a> {
    /// The token's bytes as stored (spaces as spaces, single bytes as themselves).
    pub text: &'a [u8],
    /// Its score (0 in unversioned GGML, which has none).
    pub score: f32,
}

/// A tensor of a legacy file.
#[derive(Debug, Clone, PartialEq)]
pub struct LegacyTensor<'a> {
    /// Its legacy name (`layers.0.attention.wq.weight`).
    pub name: &'a str,
    /// Its dimensions, row length first.
    pub dims: Vec<u64>,
    /// Its legacy type id (0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 4 Q4_2, 5 Q4_3, 6 Q5_0, 7 Q5_1,
    /// 8 Q8_0, 10-14 the K-quants).
    pub type_id: u32,
    /// Where its data starts in the file.
    pub offset: u64,
    /// Its data.
    pub data: &'a [u8],
}

/// A parsed legacy llama file, borrowing its bytes.
#[derive(Debug, Clone)]
pub struct LegacyModel<'a> {
    container: Container,
    hparams: Hparams,
    vocab: Vec<Token<'a>>,
    tensors: Vec<LegacyTensor<'a>>,
}

/// Reads little-endian fields with bounds checks, naming the offset in errors.
struct Cursor<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Truncated {
                offset: self.pos as u64,
                what: what.to_string(),
                needed: n as u64,
                available: self.remaining() as u64,
            });
        }
        let bytes = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        let b = self.take(4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn f32(&mut self, what: &str) -> Result<f32> {
        Ok(f32::from_bits(self.u32(what)?))
    }

    fn invalid(&self, at: usize, what: String) -> Error {
        Error::Invalid {
            offset: at as u64,
            what,
        }
    }
}

/// The element count and data bytes of a tensor of `type_id` with `dims` in `era`, or why
/// there are none.
fn tensor_bytes(type_id: u32, dims: &[u64], era: Era) -> std::result::Result<u64, String> {
    let elements = dims
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .ok_or_else(|| format!("dimensions {dims:?} overflow 64 bits"))?;
    let (block, bytes) = match type_id {
        0 => (1, 4),
        1 => (1, 2),
        10..=14 if era == Era::Current => {
            let t = GgmlType::from_id_opt(type_id).ok_or("unknown type")?;
            (t.block_size(), t.type_size())
        }
        _ => match OldQuant::from_id(type_id).filter(|q| q.exists_in(era)) {
            Some(q) => (q.block_len() as u64, q.block_bytes(era) as u64),
            None => {
                return Err(format!(
                    "type id {type_id} is not a tensor type of this format version \
                     (expected 0 F32, 1 F16, 2 Q4_0, 3 Q4_1, 6 Q5_0, 7 Q5_1, 8 Q8_0{}{})",
                    if era == Era::Shuffled {
                        ", 4 Q4_2, 5 Q4_3"
                    } else {
                        ""
                    },
                    if era == Era::Current {
                        ", 10-14 Q2_K-Q6_K"
                    } else {
                        ""
                    }
                ))
            }
        },
    };
    if dims.first().is_some_and(|&row| row % block != 0) {
        return Err(format!(
            "rows of {} elements are not whole blocks of {block}",
            dims[0]
        ));
    }
    (elements / block)
        .checked_mul(bytes)
        .ok_or_else(|| format!("dimensions {dims:?} overflow 64 bits"))
}

impl<'a> LegacyModel<'a> {
    /// Parses a legacy llama file.
    ///
    /// # Errors
    /// [`Error::Truncated`] or [`Error::Invalid`] (with the offset) for a damaged file,
    /// [`Error::NotLlama`] for a GGML-family file of another layout (whisper.cpp's, a LoRA
    /// adapter, a session), [`Error::Unsupported`] for a GGUF file.
    pub fn parse(data: &'a [u8]) -> Result<LegacyModel<'a>> {
        let mut c = Cursor { data, pos: 0 };
        if data.starts_with(b"GGUF") {
            return Err(Error::Unsupported(
                "this file is already GGUF; there is nothing to convert".into(),
            ));
        }
        let magic = c.u32("the magic")?;
        let container = match magic {
            MAGIC_GGML => Container::Ggml,
            MAGIC_GGMF | MAGIC_GGJT => {
                let at = c.pos;
                let version = c.u32("the format version")?;
                match (magic, version) {
                    (MAGIC_GGMF, 1) => Container::Ggmf,
                    (MAGIC_GGJT, 1..=3) => Container::Ggjt(version),
                    _ => {
                        let what = if magic == MAGIC_GGMF {
                            format!("GGMF version {version}: only version 1 exists")
                        } else {
                            format!("GGJT version {version}: versions 1 to 3 exist")
                        };
                        return Err(c.invalid(at, what));
                    }
                }
            }
            MAGIC_GGLA => {
                return Err(Error::NotLlama(
                    "this is a llama.cpp LoRA adapter ('ggla'), not a model: adapters are not converted".into(),
                ))
            }
            MAGIC_GGSN => {
                return Err(Error::NotLlama(
                    "this is a llama.cpp session file ('ggsn'), not a model".into(),
                ))
            }
            _ => {
                return Err(c.invalid(
                    0,
                    format!(
                        "magic {:?} is not a GGML-family file's (expected 'lmgg', 'fmgg' or 'tjgg')",
                        String::from_utf8_lossy(&data[..4])
                    ),
                ))
            }
        };
        let hparams_at = c.pos;
        if container == Container::Ggml {
            refuse_whisper(&data[hparams_at..])?;
        }
        let mut hp = [0u32; 7];
        for (v, what) in hp.iter_mut().zip([
            "n_vocab", "n_embd", "n_mult", "n_head", "n_layer", "n_rot", "ftype",
        ]) {
            *v = c.u32(what)?;
        }
        let hparams = Hparams {
            n_vocab: hp[0],
            n_embd: hp[1],
            n_mult: hp[2],
            n_head: hp[3],
            n_layer: hp[4],
            n_rot: hp[5],
            ftype: hp[6],
        };
        check_llama(&hparams, container)?;

        // Every token takes at least its 4-byte length.
        if hparams.n_vocab as usize > c.remaining() / 4 {
            return Err(Error::Truncated {
                offset: c.pos as u64,
                what: format!("a vocabulary of {} tokens", hparams.n_vocab),
                needed: u64::from(hparams.n_vocab) * 4,
                available: c.remaining() as u64,
            });
        }
        let mut vocab = Vec::with_capacity(hparams.n_vocab as usize);
        for id in 0..hparams.n_vocab {
            let len = c.u32("a token's length")? as usize;
            let text = c.take(len, &format!("token {id}'s {len} bytes"))?;
            let score = if container.has_scores() {
                c.f32("a token's score")?
            } else {
                0.0
            };
            vocab.push(Token { text, score });
        }

        let mut tensors = Vec::new();
        while c.remaining() > 0 {
            tensors.push(read_tensor(&mut c, container)?);
        }
        check_complete(&tensors, &hparams, data.len())?;
        Ok(LegacyModel {
            container,
            hparams,
            vocab,
            tensors,
        })
    }

    /// The container the file is in.
    pub fn container(&self) -> Container {
        self.container
    }

    /// The hyperparameters.
    pub fn hparams(&self) -> Hparams {
        self.hparams
    }

    /// The vocabulary.
    pub fn vocab(&self) -> &[Token<'a>] {
        &self.vocab
    }

    /// The tensors, in file order.
    pub fn tensors(&self) -> &[LegacyTensor<'a>] {
        &self.tensors
    }

    /// The feed-forward width: layer 0's `w1` rows if the file has it, else what llama.cpp
    /// computed from `n_mult` (`2 · 4 · n_embd / 3` rounded up to a multiple of `n_mult`).
    pub fn feed_forward_length(&self) -> u64 {
        if let Some(w1) = self.tensors.iter().find(|t| t.name == FIRST_W1) {
            if let Some(&rows) = w1.dims.get(1) {
                return rows;
            }
        }
        let (n_embd, n_mult) = (
            u64::from(self.hparams.n_embd),
            u64::from(self.hparams.n_mult),
        );
        (2 * (4 * n_embd) / 3).div_ceil(n_mult) * n_mult
    }

    /// How each tensor will be written with `policy`: its GGUF name, type and shape, and how
    /// its data is made.
    ///
    /// # Errors
    /// [`Error::Unsupported`] for a tensor name that is not llama's.
    pub fn plan(&self, policy: ScalePolicy) -> Result<Vec<TensorPlan>> {
        let era = self.container.era();
        self.tensors
            .iter()
            .map(|t| {
                let name = gguf_name(t.name).ok_or_else(|| {
                    Error::Unsupported(format!(
                        "tensor '{}' (at byte {}) is not a llama tensor this converter knows \
                         (tok_embeddings, norm, output, layers.N.attention.wq/wk/wv/wo, \
                         layers.N.attention_norm, layers.N.feed_forward.w1/w2/w3, layers.N.ffn_norm)",
                        t.name, t.offset
                    ))
                })?;
                let action = match (t.type_id, OldQuant::from_id(t.type_id)) {
                    (0 | 1, _) | (10..=14, _) => {
                        let ty = GgmlType::from_id_opt(t.type_id).expect("checked when parsed");
                        Action::Copy(ty)
                    }
                    (_, Some(q)) if q.unchanged_in(era) => {
                        Action::Copy(q.today().expect("unchanged types exist today"))
                    }
                    (_, Some(q)) => match q.today() {
                        Some(ty) if policy == ScalePolicy::Round || all_fit_f16(q, era, t.data) => {
                            Action::Repack(q, ty)
                        }
                        _ => Action::Dequantize(q),
                    },
                    (id, None) => unreachable!("type {id} was checked when parsed"),
                };
                let ty = match action {
                    Action::Copy(ty) | Action::Repack(_, ty) => ty,
                    Action::Dequantize(_) => GgmlType::F32,
                };
                Ok(TensorPlan {
                    legacy_name: t.name.to_string(),
                    name,
                    legacy_type: legacy_type_name(t.type_id),
                    ty,
                    shape: t.dims.clone(),
                    action,
                })
            })
            .collect()
    }

    /// Plans the conversion with `options` and checks it, before anything is written: the
    /// metadata and tensor table, and the engine's load check on them (what `gguf validate`
    /// runs on the output), unless `options.vocab_only`.
    ///
    /// # Errors
    /// As [`LegacyModel::plan`]; [`Error::Invalid`] for options that do not fit the model
    /// (`gqa` not dividing the heads); [`Error::Unsupported`] for a file without tensors
    /// unless `options.vocab_only` (a vocabulary file, or a model cut after its vocabulary);
    /// [`Error::WouldNotLoad`] for a model whose converted file would not load, naming the key
    /// or tensor and the header field or legacy tensor it comes from.
    pub fn prepare(&self, options: &Options) -> Result<LegacyConversion<'_, 'a>> {
        if !options.vocab_only && self.tensors.is_empty() {
            return Err(Error::Unsupported(
                "the file has no tensors after its vocabulary: a vocabulary file (as llama.cpp's \
                 old models/ggml-vocab.bin) or a model cut short; convert it as vocabulary only \
                 (--vocab-only) to write its vocabulary alone"
                    .into(),
            ));
        }
        let plans = if options.vocab_only {
            Vec::new()
        } else {
            self.plan(options.scales)?
        };
        let mut builder = self.builder(options, &plans)?;
        if !options.vocab_only {
            let mut origins: Origins = [
                ("llama.embedding_length", "n_embd"),
                ("llama.block_count", "n_layer"),
                ("llama.attention.head_count", "n_head"),
                ("llama.rope.dimension_count", "n_embd / n_head"),
            ]
            .iter()
            .map(|(key, field)| (key.to_string(), format!("the header's {field}")))
            .chain([
                (
                    "llama.attention.head_count_kv".to_string(),
                    "the header's n_head / the gqa option".to_string(),
                ),
                (
                    "llama.context_length".to_string(),
                    "the context length option".to_string(),
                ),
                (
                    "llama.attention.layer_norm_rms_epsilon".to_string(),
                    "the eps option".to_string(),
                ),
            ])
            .collect();
            let ff = match self.tensors.iter().any(|t| t.name == FIRST_W1) {
                true => format!("the rows of {FIRST_W1}"),
                false => "the header's n_embd and n_mult".to_string(),
            };
            origins.push(("llama.feed_forward_length".into(), ff));
            origins.extend(
                plans
                    .iter()
                    .map(|p| (p.name.clone(), format!("the file's {}", p.legacy_name))),
            );
            check_plan("", &mut builder, &[], &origins)?;
        }
        Ok(LegacyConversion {
            model: self,
            plans,
            builder,
        })
    }

    /// Writes the GGUF file to `out` ([`LegacyModel::prepare`], then
    /// [`LegacyConversion::write`]).
    ///
    /// # Errors
    /// As [`LegacyModel::prepare`] and [`LegacyConversion::write`].
    pub fn write_gguf<W: Write>(
        &self,
        options: &Options,
        out: W,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Report> {
        self.prepare(options)?.write(out, progress)
    }

    /// The GGUF builder: the script's keys in its order, then the tensors.
    fn builder(&self, o: &Options, plans: &[TensorPlan]) -> Result<GgufBuilder<'static>> {
        let hp = self.hparams;
        if o.gqa == 0 || !hp.n_head.is_multiple_of(o.gqa) {
            return Err(Error::Invalid {
                offset: 0,
                what: format!(
                    "--gqa {} does not divide the model's {} attention heads",
                    o.gqa, hp.n_head
                ),
            });
        }
        if !(o.eps.is_finite() && o.eps > 0.0) {
            return Err(Error::Invalid {
                offset: 0,
                what: format!("the RMS norm epsilon {} is not a positive number", o.eps),
            });
        }
        if o.context_length == 0 {
            return Err(Error::Invalid {
                offset: 0,
                what: "the context length is 0".into(),
            });
        }
        if self.vocab.len() < 3 {
            return Err(Error::Unsupported(format!(
                "a vocabulary of {} tokens has no room for <unk>, <s> and </s>",
                self.vocab.len()
            )));
        }
        let mut b = GgufBuilder::new();
        let description = o.description.clone().unwrap_or_else(|| {
            format!(
                "converted from legacy {} {} format",
                self.container.name(),
                ftype_name(hp.ftype).unwrap_or("unknown")
            )
        });
        b.set("general.architecture", "llama");
        if let Some(name) = &o.name {
            b.set("general.name", name.as_str());
        }
        b.set("general.description", description);
        // Types 5 and 6 (Q4_2, Q4_3) no longer exist; their numbers mean nothing today.
        if !matches!(hp.ftype, 5 | 6) {
            b.set("general.file_type", hp.ftype);
        }
        b.set("llama.context_length", o.context_length)
            .set("llama.embedding_length", hp.n_embd)
            .set("llama.block_count", hp.n_layer)
            .set(
                "llama.feed_forward_length",
                u32::try_from(self.feed_forward_length()).map_err(|_| Error::Invalid {
                    offset: 0,
                    what: "the feed-forward width does not fit 32 bits".into(),
                })?,
            )
            .set("llama.rope.dimension_count", hp.n_embd / hp.n_head)
            .set("llama.attention.head_count", hp.n_head)
            .set("llama.attention.head_count_kv", hp.n_head / o.gqa)
            .set("llama.attention.layer_norm_rms_epsilon", o.eps)
            .set("tokenizer.ggml.model", "llama")
            .set("tokenizer.ggml.pre", "default");
        let (tokens, scores, types) = self.gguf_vocab();
        b.set(
            "tokenizer.ggml.tokens",
            OwnedArray::new(
                ValueType::String,
                tokens.into_iter().map(OwnedValue::String).collect(),
            )?,
        )
        .set(
            "tokenizer.ggml.scores",
            OwnedArray::new(
                ValueType::F32,
                scores.into_iter().map(OwnedValue::F32).collect(),
            )?,
        )
        .set(
            "tokenizer.ggml.token_type",
            OwnedArray::new(
                ValueType::I32,
                types.into_iter().map(OwnedValue::I32).collect(),
            )?,
        )
        .set("tokenizer.ggml.unknown_token_id", 0u32)
        .set("tokenizer.ggml.bos_token_id", 1u32)
        .set("tokenizer.ggml.eos_token_id", 2u32);
        for p in plans {
            b.push_tensor(TensorSpec::new(p.name.clone(), p.ty, &p.shape)?)?;
        }
        Ok(b)
    }

    /// The token texts, scores and types as the script writes them: ids 0, 1, 2 are `<unk>`
    /// (unknown), `<s>`, `</s>` (control); an empty token is control; a one-byte token among
    /// ids 3..=258 is the byte token `<0xXX>`; any other has its spaces as `▁` (normal).
    fn gguf_vocab(&self) -> (Vec<Vec<u8>>, Vec<f32>, Vec<i32>) {
        const NORMAL: i32 = 1;
        const UNKNOWN: i32 = 2;
        const CONTROL: i32 = 3;
        const BYTE: i32 = 6;
        let mut tokens = Vec::with_capacity(self.vocab.len());
        let mut types = Vec::with_capacity(self.vocab.len());
        for (id, t) in self.vocab.iter().enumerate() {
            let (text, ty) = match id {
                0 => (b"<unk>".to_vec(), UNKNOWN),
                1 => (b"<s>".to_vec(), CONTROL),
                2 => (b"</s>".to_vec(), CONTROL),
                _ if t.text.is_empty() => (Vec::new(), CONTROL),
                3..=258 if t.text.len() == 1 => {
                    (format!("<0x{:02X}>", t.text[0]).into_bytes(), BYTE)
                }
                _ => (replace_spaces(t.text), NORMAL),
            };
            tokens.push(text);
            types.push(ty);
        }
        let scores = self.vocab.iter().map(|t| t.score).collect();
        (tokens, scores, types)
    }
}

/// A legacy model's conversion, planned and checked ([`LegacyModel::prepare`]): nothing is
/// written until [`LegacyConversion::write`].
#[derive(Debug)]
pub struct LegacyConversion<'m, 'a> {
    model: &'m LegacyModel<'a>,
    plans: Vec<TensorPlan>,
    builder: GgufBuilder<'static>,
}

impl LegacyConversion<'_, '_> {
    /// How each tensor will be written, in order (none for a vocabulary-only conversion).
    pub fn tensors(&self) -> &[TensorPlan] {
        &self.plans
    }

    /// Writes the GGUF file to `out`: metadata, then the tensors one at a time (each repacked
    /// in chunks, so memory stays bounded by a chunk), calling `progress(bytes done, total)`
    /// after each tensor.
    ///
    /// # Errors
    /// [`Error::Format`] if writing fails.
    pub fn write<W: Write>(self, out: W, progress: &mut dyn FnMut(u64, u64)) -> Result<Report> {
        let LegacyConversion {
            model,
            plans,
            builder,
        } = self;
        let total: u64 = builder.tensors().iter().map(TensorSpec::size).sum();
        let mut w = builder.write(out)?;
        let era = model.container.era();
        let mut done = 0;
        let mut rounded_blocks = 0u64;
        for ((plan, t), spec) in plans.iter().zip(&model.tensors).zip(builder.tensors()) {
            w.write_tensor_with(|w| match plan.action {
                Action::Copy(_) => w.write_all(t.data),
                Action::Repack(q, _) => {
                    let size = q.block_bytes(era);
                    let mut buf = Vec::new();
                    for chunk in t.data.chunks(size * 4096) {
                        buf.clear();
                        for b in chunk.chunks_exact(size) {
                            let block = Block::decode(q, era, b);
                            rounded_blocks += u64::from(!block.fits_f16());
                            block.encode_today(q, &mut buf);
                        }
                        w.write_all(&buf)?;
                    }
                    Ok(())
                }
                Action::Dequantize(q) => {
                    let size = q.block_bytes(era);
                    let mut values = [0f32; 32];
                    let mut buf = Vec::new();
                    for chunk in t.data.chunks(size * 4096) {
                        buf.clear();
                        for b in chunk.chunks_exact(size) {
                            let block = Block::decode(q, era, b);
                            block.values(q, &mut values[..block.len]);
                            for v in &values[..block.len] {
                                buf.extend_from_slice(&v.to_le_bytes());
                            }
                        }
                        w.write_all(&buf)?;
                    }
                    Ok(())
                }
            })?;
            done += spec.size();
            progress(done, total);
        }
        w.finish()?;
        Ok(Report {
            container: model.container,
            tensors: plans,
            rounded_blocks,
        })
    }
}

/// `text` with each space as U+2581 (`▁`), SentencePiece's space.
fn replace_spaces(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    for &b in text {
        if b == b' ' {
            out.extend_from_slice("\u{2581}".as_bytes());
        } else {
            out.push(b);
        }
    }
    out
}

/// Whether every block of `data` has f16 scales.
fn all_fit_f16(q: OldQuant, era: Era, data: &[u8]) -> bool {
    data.chunks_exact(q.block_bytes(era))
        .all(|b| Block::decode(q, era, b).fits_f16())
}

/// The legacy type's name (`Q4_2` for the types that no longer exist).
fn legacy_type_name(type_id: u32) -> &'static str {
    match type_id {
        4 => "Q4_2",
        5 => "Q4_3",
        id => GgmlType::from_id_opt(id).map_or("unknown", GgmlType::name),
    }
}

/// Reads one tensor's header and locates its data.
fn read_tensor<'a>(c: &mut Cursor<'a>, container: Container) -> Result<LegacyTensor<'a>> {
    let start = c.pos;
    let n_dims = c.u32("a tensor's dimension count")?;
    if !(1..=4).contains(&n_dims) {
        return Err(c.invalid(
            start,
            format!("a tensor with {n_dims} dimensions (expected 1 to 4)"),
        ));
    }
    let name_len = c.u32("a tensor's name length")? as usize;
    let type_at = c.pos;
    let type_id = c.u32("a tensor's type")?;
    let mut dims = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        dims.push(u64::from(c.u32("a tensor dimension")?));
    }
    let name_at = c.pos;
    let name = c.take(name_len, "a tensor's name")?;
    let name = std::str::from_utf8(name)
        .map_err(|_| c.invalid(name_at, "a tensor name that is not UTF-8".into()))?;
    if let Container::Ggjt(_) = container {
        let pad = c.pos.next_multiple_of(GGJT_ALIGNMENT) - c.pos;
        c.take(pad, "the padding before a tensor's data")?;
    }
    let bytes = tensor_bytes(type_id, &dims, container.era())
        .map_err(|e| c.invalid(type_at, format!("tensor '{name}': {e}")))?;
    let offset = c.pos as u64;
    let len = usize::try_from(bytes).unwrap_or(usize::MAX);
    let data = c.take(len, &format!("tensor '{name}''s data"))?;
    Ok(LegacyTensor {
        name,
        dims,
        type_id,
        offset,
        data,
    })
}

/// Refuses a tensor list that is not a whole llama model (a file without tensors, a
/// vocabulary, is fine): the format has no tensor count, so a file cut between two tensors
/// reads as a model with fewer, and this is where that shows.
fn check_complete(tensors: &[LegacyTensor<'_>], hp: &Hparams, file_len: usize) -> Result<()> {
    if tensors.is_empty() {
        return Ok(());
    }
    let mut seen = std::collections::HashSet::new();
    for t in tensors {
        if !seen.insert(t.name) {
            return Err(Error::Invalid {
                offset: t.offset,
                what: format!("tensor '{}' appears twice", t.name),
            });
        }
    }
    let per_layer = [
        "attention.wq.weight",
        "attention.wk.weight",
        "attention.wv.weight",
        "attention.wo.weight",
        "attention_norm.weight",
        "feed_forward.w1.weight",
        "feed_forward.w2.weight",
        "feed_forward.w3.weight",
        "ffn_norm.weight",
    ];
    let mut expected: Vec<String> = ["tok_embeddings.weight", "norm.weight", "output.weight"]
        .map(String::from)
        .to_vec();
    // Checked one at a time, so a huge n_layer costs nothing before the first gap.
    for layer in 0..hp.n_layer {
        if let Some(missing) = expected.iter().find(|n| !seen.contains(n.as_str())) {
            return Err(missing_tensor(missing, tensors.len(), file_len));
        }
        expected = per_layer
            .iter()
            .map(|p| format!("layers.{layer}.{p}"))
            .collect();
    }
    match expected.iter().find(|n| !seen.contains(n.as_str())) {
        Some(missing) => Err(missing_tensor(missing, tensors.len(), file_len)),
        None => Ok(()),
    }
}

fn missing_tensor(name: &str, count: usize, file_len: usize) -> Error {
    Error::Invalid {
        offset: file_len as u64,
        what: format!(
            "the file ends after {count} tensors without '{name}': truncated, or not a whole \
             llama model"
        ),
    }
}

/// Refuses whisper.cpp's models, which share the unversioned `lmgg` magic: eleven u32
/// hyperparameters with the audio context (1500) second and the mel bins (80 or 128) tenth.
fn refuse_whisper(hparams: &[u8]) -> Result<()> {
    let word = |i: usize| {
        hparams
            .get(4 * i..4 * i + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    if let (Some(1500), Some(n_mels @ (80 | 128))) = (word(1), word(9)) {
        let n_vocab = word(0).unwrap_or(0);
        let n_text_layer = word(8).unwrap_or(0);
        return Err(Error::NotLlama(format!(
            "this is a whisper.cpp speech model (GGML 'lmgg' with audio hyperparameters: \
             n_audio_ctx 1500, {n_mels} mel bins, {n_vocab} tokens, {n_text_layer} text layers), \
             not a llama-layout model; only llama models are converted"
        )));
    }
    Ok(())
}

/// Refuses hyperparameters that are not a llama model's.
fn check_llama(hp: &Hparams, container: Container) -> Result<()> {
    let problem = if hp.n_head == 0 || hp.n_embd == 0 || !hp.n_embd.is_multiple_of(hp.n_head) {
        Some(format!(
            "n_embd {} is not a positive multiple of n_head {}",
            hp.n_embd, hp.n_head
        ))
    } else if hp.n_rot != hp.n_embd / hp.n_head {
        Some(format!(
            "n_rot {} is not n_embd / n_head = {}",
            hp.n_rot,
            hp.n_embd / hp.n_head
        ))
    } else if hp.n_mult == 0 {
        Some("n_mult is 0".to_string())
    } else if ftype_name(hp.ftype).is_none() {
        Some(format!(
            "file type {} is not one llama.cpp wrote (0 to 18)",
            hp.ftype
        ))
    } else {
        None
    };
    match problem {
        Some(p) => Err(Error::NotLlama(format!(
            "this {} file's hyperparameters are not a llama model's ({p}); only llama-layout \
             files (n_vocab, n_embd, n_mult, n_head, n_layer, n_rot, ftype) are converted",
            container.name()
        ))),
        None => Ok(()),
    }
}

/// Today's GGUF name of a legacy llama tensor, if it is one.
pub fn gguf_name(legacy: &str) -> Option<String> {
    let fixed = match legacy {
        "tok_embeddings.weight" => Some("token_embd.weight"),
        "norm.weight" => Some("output_norm.weight"),
        "output.weight" => Some("output.weight"),
        _ => None,
    };
    if let Some(name) = fixed {
        return Some(name.to_string());
    }
    let rest = legacy.strip_prefix("layers.")?;
    let (layer, part) = rest.split_once('.')?;
    let layer: u32 = layer.parse().ok().filter(|_| !layer.starts_with('+'))?;
    let part = match part {
        "attention.wq.weight" => "attn_q.weight",
        "attention.wk.weight" => "attn_k.weight",
        "attention.wv.weight" => "attn_v.weight",
        "attention.wo.weight" => "attn_output.weight",
        "attention_norm.weight" => "attn_norm.weight",
        "feed_forward.w1.weight" => "ffn_gate.weight",
        "feed_forward.w2.weight" => "ffn_down.weight",
        "feed_forward.w3.weight" => "ffn_up.weight",
        "ffn_norm.weight" => "ffn_norm.weight",
        _ => return None,
    };
    Some(format!("blk.{layer}.{part}"))
}

/// What [`LegacyModel::write_gguf`] takes besides the model: the script's options.
#[derive(Debug, Clone, PartialEq)]
pub struct Options {
    /// `general.name` (the script uses the input file's name); `None` writes none.
    pub name: Option<String>,
    /// `general.description`; `None` writes "converted from legacy GGJTv3 MOSTLY_Q4_0 format".
    pub description: Option<String>,
    /// `llama.context_length` (the file does not say; 2048, LLaMA 1's).
    pub context_length: u32,
    /// `llama.attention.layer_norm_rms_epsilon` (5e-6: use 1e-6 for LLaMA 1, 1e-5 for 2).
    pub eps: f32,
    /// Query heads per KV head (8 for LLaMA 2 70B).
    pub gqa: u32,
    /// Write the metadata and vocabulary only.
    pub vocab_only: bool,
    /// What to do with f32 scales that are not f16 values.
    pub scales: ScalePolicy,
}

impl Options {
    /// The script's defaults, with `general.name` set to `name`.
    pub fn new(name: impl Into<String>) -> Options {
        Options {
            name: Some(name.into()),
            description: None,
            context_length: 2048,
            eps: 5e-6,
            gqa: 1,
            vocab_only: false,
            scales: ScalePolicy::Exact,
        }
    }
}

/// How one tensor's data is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Copied byte for byte (the layout is today's), as this type.
    Copy(GgmlType),
    /// Each block of the legacy type reordered into today's layout of the type, its scales
    /// narrowed to f16.
    Repack(OldQuant, GgmlType),
    /// Written as F32, each value exactly the legacy block's.
    Dequantize(OldQuant),
}

/// What happens to one tensor.
#[derive(Debug, Clone, PartialEq)]
pub struct TensorPlan {
    /// Its legacy name.
    pub legacy_name: String,
    /// Its GGUF name.
    pub name: String,
    /// Its legacy type's name.
    pub legacy_type: &'static str,
    /// Its GGUF type.
    pub ty: GgmlType,
    /// Its shape, row length first.
    pub shape: Vec<u64>,
    /// How its data is made.
    pub action: Action,
}

impl TensorPlan {
    /// `copied`, `repacked` or `dequantized to F32`.
    pub fn how(&self) -> &'static str {
        match self.action {
            Action::Copy(_) => "copied",
            Action::Repack(..) => "repacked",
            Action::Dequantize(_) => "dequantized to F32",
        }
    }
}

/// What a conversion did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The input's container.
    pub container: Container,
    /// Each tensor, in order.
    pub tensors: Vec<TensorPlan>,
    /// Blocks whose scales were rounded to f16 ([`ScalePolicy::Round`]).
    pub rounded_blocks: u64,
}
