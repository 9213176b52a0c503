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
mod read;
mod write;

use gguf_format::GgmlType;

use blocks::Era;
pub use blocks::{OldQuant, ScalePolicy};
pub use write::{gguf_name, LegacyConversion};

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

/// The legacy type's name (`Q4_2` for the types that no longer exist).
fn legacy_type_name(type_id: u32) -> &'static str {
    match type_id {
        4 => "Q4_2",
        5 => "Q4_3",
        id => GgmlType::from_id_opt(id).map_or("unknown", GgmlType::name),
    }
}

impl<'a> LegacyModel<'a> {
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
