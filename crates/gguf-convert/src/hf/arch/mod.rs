//! The architectures this converter writes, one module each, and the registry that picks one
//! by `config.json`'s `architectures[0]`, as `convert_hf_to_gguf.py` picks its model class.
//!
//! An architecture says what its `{arch}.*` keys are beyond the shared ones
//! ([`super::params::text_model_parameters`]), how its vocabulary is written, which checkpoint
//! tensors it drops or renames, and how each remaining tensor maps to GGUF names (with the
//! transformations llama.cpp applies, such as the Q/K row permutation of llama).

mod bert;

use gguf_format::GgufBuilder;

use super::checkpoint::Checkpoint;
use super::params::Hparams;
use crate::error::Result;

/// What an architecture sees while planning.
pub(crate) struct Ctx<'a> {
    pub ckpt: &'a Checkpoint,
    pub hparams: Hparams,
    #[allow(dead_code)] // for the decoder architectures
    pub block_count: u32,
    /// `--pre`: the pre-tokenizer name to write when the check finds none.
    pub pre_override: Option<String>,
    /// Problems that do not stop the conversion.
    pub warnings: std::cell::RefCell<Vec<String>>,
}

/// How a checkpoint tensor's values become a GGUF tensor's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transform {
    /// As they are.
    None,
    /// llama's Q/K rows reordered from Hugging Face's rotary layout (halves) to GGML's
    /// (interleaved pairs), over `heads` heads.
    PermuteRows {
        /// Heads the rows are in.
        heads: usize,
    },
    /// Plus one (Gemma's RMS norm weights, stored as offsets from one).
    AddOne,
}

/// One GGUF tensor from a checkpoint tensor.
#[derive(Debug, Clone)]
pub(crate) struct Mapped {
    /// Its GGUF name.
    pub name: String,
    pub transform: Transform,
}

/// One architecture.
pub(crate) trait HfArch: Sync {
    /// `general.architecture`.
    fn gguf_arch(&self) -> &'static str;

    /// The `{arch}.*` keys after the shared ones (`set_gguf_parameters`'s own part).
    fn parameters(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()>;

    /// The `tokenizer.*` keys.
    fn vocab(&self, ctx: &Ctx<'_>, b: &mut GgufBuilder<'_>) -> Result<()>;

    /// The checkpoint name a tensor goes by, or `None` to leave it out (`filter_tensors`).
    fn filter(&self, name: &str) -> Option<String>;

    /// The GGUF tensors a (filtered) checkpoint tensor becomes; `bid` is its layer.
    fn map(&self, ctx: &Ctx<'_>, name: &str, bid: Option<u32>) -> Result<Vec<Mapped>>;
}

/// One registered architecture: the `architectures[0]` values that select it.
pub(crate) struct Entry {
    pub hf_names: &'static [&'static str],
    pub arch: &'static dyn HfArch,
}

/// Every architecture, in the order they are listed in errors.
pub(crate) const ARCHITECTURES: &[Entry] = &[Entry {
    hf_names: &["BertModel", "BertForMaskedLM"],
    arch: &bert::Bert,
}];

/// The registry's entry for `hf_arch`.
pub(crate) fn find(hf_arch: &str) -> Option<&'static Entry> {
    ARCHITECTURES.iter().find(|e| e.hf_names.contains(&hf_arch))
}

/// `architectures[0]` values supported, for messages.
pub fn supported() -> Vec<&'static str> {
    ARCHITECTURES
        .iter()
        .flat_map(|e| e.hf_names.iter().copied())
        .collect()
}

/// Maps `name` (with `.weight`/`.bias` or no suffix) by a table of (Hugging Face stem, GGUF
/// stem) where `{bid}` stands for the layer: `gguf-py`'s `TensorNameMap.get_name`.
pub(crate) fn map_by_table(name: &str, bid: Option<u32>, table: &[(&str, &str)]) -> Option<String> {
    for suffix in [".weight", ".bias", ""] {
        let Some(stem) = name.strip_suffix(suffix) else {
            continue;
        };
        for (hf, gguf) in table {
            let (hf, gguf) = match bid {
                Some(b) if hf.contains("{bid}") => (
                    hf.replace("{bid}", &b.to_string()),
                    gguf.replace("{bid}", &b.to_string()),
                ),
                None if !hf.contains("{bid}") => (hf.to_string(), gguf.to_string()),
                _ => continue,
            };
            if stem == hf {
                return Some(format!("{gguf}{suffix}"));
            }
        }
    }
    None
}
