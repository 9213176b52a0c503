//! CPU inference for GGUF models of the architectures in [`SUPPORTED`] (`llama`, `mistral`,
//! `qwen2`, `qwen3`, `gemma`, `gemma2`, `gemma3`, `phi2`, `phi3`, and the `bert` encoder),
//! computed as llama.cpp computes it: weights used in place from the mmap in their stored type,
//! activations quantized to the type ggml pairs with each weight type, an f16 KV cache.
//! Generation below; embeddings (BERT's, or a decoder's pooled hidden states) with
//! [`Session::embed`], as `llama-embedding` computes them.
//!
//! ```no_run
//! use gguf_model::{Model, SamplerConfig, SessionOptions};
//!
//! # fn main() -> Result<(), gguf_model::ModelError> {
//! let model = Model::load("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let mut session = model.session(SessionOptions::default())?;
//! for token in session.generate("The capital of France is", &SamplerConfig::greedy(), 16)? {
//!     print!("{}", token?.text);
//! }
//! # Ok(()) }
//! ```
// The engine needs no `unsafe` of its own: the SIMD kernels are gguf-quant's, behind safe
// wrappers. Forbidding it keeps it that way.
#![forbid(unsafe_code)]

mod arch;
mod attention;
mod batch;
mod embed;
mod error;
mod eval;
mod forward;
mod generation;
mod hparams;
mod kv_cache;
mod memory;
mod moe;
mod ops;
mod parallel;
pub mod quantize;
mod sampling;
mod sequence;
mod session;
mod stops;
mod weights;

pub use arch::SUPPORTED;
pub use batch::{BatchStats, Batcher, Event, Finished, GenerateRequest, Output, RequestId};
pub use embed::{EmbeddingOptions, Embeddings, Normalize, Pooling};
pub use error::{ModelError, Result};
pub use eval::{bench, perplexity, BenchKind, BenchTest, PerplexityResult, Throughput};
pub use generation::{Completion, Generation};
pub use gguf_quant::ThreadPool;
/// The chat types the model's API takes ([`Session::chat`], [`Model::render_chat`]).
pub use gguf_tokenizer::chat::{ChatMessage, ChatTemplate};
pub use gguf_tokenizer::{DecodeOptions, EncodeOptions, Tokenizer};
pub use hparams::{Hparams, RopeScaling};
pub use kv_cache::KvType;
pub use parallel::{ParallelSession, SeqInput};
pub use sampling::{argmax, Sampler, SamplerConfig};
pub use sequence::{GeneratedToken, LogprobEntry, StopReason, TokenLogprob};
pub use session::Session;
pub use stops::StopText;
pub use weights::PlanTensor;

use std::path::Path;

use gguf_format::split::SplitSet;
use gguf_tokenizer::chat::{RenderLimits, RenderOptions};
use gguf_tokenizer::chat_builtin::{self, Origin};

use arch::Architecture;
use kv_cache::KvCache;

/// A loaded model: the mapped file (or every part of a split set), its architecture with its
/// checked tensors, and its tokenizer.
pub struct Model {
    set: SplitSet,
    arch: Box<dyn Architecture>,
    /// Bytes of the repacked copies of matrices (see [`Model::packed_bytes`]).
    packed_bytes: usize,
    tokenizer: Tokenizer,
    /// The bytes of the vocabulary's longest token text (see [`Model::chat_render_limits`]).
    longest_token: usize,
    name: String,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("file", &self.name)
            .field("hparams", self.hparams())
            .finish()
    }
}

/// Options of a [`Session`].
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Context length in tokens (0: [`Model::default_n_ctx`]).
    pub n_ctx: usize,
    /// Threads (0: the number of physical cores, as llama.cpp picks). More than
    /// [`max_threads`] are not started: threads beyond the CPUs only wait for each other.
    pub threads: usize,
    /// KV cache precision.
    pub kv_type: KvType,
    /// Largest batch of prompt tokens per forward pass.
    pub n_batch: usize,
}

impl Default for SessionOptions {
    fn default() -> Self {
        SessionOptions {
            n_ctx: 0,
            threads: 0,
            kv_type: KvType::F16,
            n_batch: 512,
        }
    }
}

/// Checks that this crate can run the model in `set` (named `name` in errors) without loading
/// it: its architecture is supported, its hyperparameters are usable and every tensor it
/// needs is there with the right shape. Returns the hyperparameters.
pub fn check(set: &SplitSet, name: &str) -> Result<Hparams> {
    Ok(arch::load(set, name, false)?.0.hparams().clone())
}

/// [`check`] for a file not yet written: a converter's plan, `metadata` (a GGUF of the
/// planned keys; its own tensors are not looked at) and `tensors` (each one's name, type,
/// shape, and bytes where the planner has them), named `name` in errors. The same checks
/// run as on a written file, so a plan that passes gives a file that `gguf validate`
/// accepts: the architecture's hyperparameters, every tensor it needs with the shape they
/// imply, and the values of the tensors whose bytes are given (RoPE frequency factors).
/// Returns the hyperparameters.
///
/// ```
/// use gguf_model::{check_plan, PlanTensor};
/// let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/model-llama.gguf");
/// let bytes = std::fs::read(path)?;
/// let file = gguf_format::GgufFile::parse(&bytes)?;
/// let tensors: Vec<PlanTensor> = file
///     .tensors()
///     .iter()
///     .map(|t| PlanTensor { name: t.name, ty: t.ggml_type, shape: t.shape(), data: None })
///     .collect();
/// assert_eq!(check_plan(&file, &tensors, "plan")?.arch, "llama");
/// // Without `output_norm.weight`, the file would not load.
/// let fewer: Vec<PlanTensor> =
///     tensors.iter().copied().filter(|t| t.name != "output_norm.weight").collect();
/// let e = check_plan(&file, &fewer, "plan").unwrap_err();
/// assert_eq!(e.to_string(), "plan: tensor `output_norm.weight` is missing");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn check_plan(
    metadata: &gguf_format::GgufFile<'_>,
    tensors: &[PlanTensor<'_>],
    name: &str,
) -> Result<Hparams> {
    let l = weights::Loader::plan(metadata, tensors, name);
    Ok(arch::load_with(&l)?.hparams().clone())
}

/// The most threads a session runs: the CPUs this process may use.
pub fn max_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The threads a session runs for a requested count (0: [`physical_cores`]), at most
/// [`max_threads`].
pub fn session_threads(requested: usize) -> usize {
    match requested {
        0 => physical_cores(),
        n => n.min(max_threads()),
    }
}

/// The number of physical cores (logical CPUs on machines where that cannot be told), at most
/// the CPUs this process may use.
pub fn physical_cores() -> usize {
    num_cpus::get_physical().clamp(1, max_threads())
}

impl Model {
    /// Opens `path`, checks every tensor against the hyperparameters and builds the tokenizer.
    /// `path` may be any part of a split set (`name-00001-of-00003.gguf`): every part is
    /// mapped and the model runs from them as they are, as llama.cpp does. An unsupported
    /// architecture is an error naming it and the supported ones, and so is an instruction
    /// set that `GGUF_FORCE_ISA` forces but this CPU lacks ([`gguf_quant::check_isa`]), before
    /// the file is opened.
    pub fn load(path: impl AsRef<Path>) -> Result<Model> {
        gguf_quant::check_isa()?;
        let path = path.as_ref();
        let name = path.display().to_string();
        let set = SplitSet::open(path)?;
        let (arch, packed_bytes) = arch::load(&set, &name, true)?;
        let tokenizer = Tokenizer::from_gguf(set.metadata())?;
        let n_vocab = arch.hparams().n_vocab;
        if tokenizer.vocab_size() > n_vocab {
            return Err(ModelError::Hyperparameters {
                file: name,
                message: format!(
                    "the tokenizer has {} tokens but token_embd only {n_vocab} rows",
                    tokenizer.vocab_size(),
                ),
            });
        }
        let longest_token = (0..tokenizer.vocab_size())
            .filter_map(|id| tokenizer.token_text(u32::try_from(id).ok()?))
            .map(<[u8]>::len)
            .max()
            .unwrap_or(1)
            .max(1);
        Ok(Model {
            set,
            arch,
            packed_bytes,
            tokenizer,
            longest_token,
            name,
        })
    }

    /// Bytes of the matrices repacked at load for this CPU's packed kernels (as llama.cpp
    /// repacks them: on AVX2, Q4_K matrices whose row count is a multiple of 8). They are
    /// memory of this process on top of the mapped file, whose pages of those matrices are no
    /// longer read after the repacking.
    pub fn packed_bytes(&self) -> usize {
        self.packed_bytes
    }

    /// The hyperparameters.
    pub fn hparams(&self) -> &Hparams {
        self.arch.hparams()
    }

    /// The tokenizer rebuilt from the file.
    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    /// The mapped file (the first part of a split set, which holds the metadata).
    pub fn file(&self) -> &gguf_format::GgufFile<'_> {
        self.set.metadata()
    }

    /// Bytes of the mapped file (every part of a split set).
    pub fn file_size(&self) -> u64 {
        self.set.parts().iter().map(|p| p.len()).sum()
    }

    /// The context a session gets when its options ask for 0: the model's training context,
    /// capped at 4096.
    pub fn default_n_ctx(&self) -> usize {
        self.hparams().n_ctx_train.min(4096)
    }

    /// The bytes of the KV cache of one sequence of `n_ctx` positions evaluated in batches of
    /// `n_batch` tokens (sliding-window layers keep their window and a batch).
    pub fn kv_cache_bytes(&self, n_ctx: usize, n_batch: usize, kv_type: KvType) -> u64 {
        KvCache::bytes_needed(self.hparams(), n_ctx, n_batch, kv_type)
    }

    /// Refuses the KV caches of `n_seq` sequences of `n_ctx` positions when they need more
    /// memory than the machine has available ([`ModelError::OutOfMemory`]), before anything
    /// is allocated.
    fn check_kv_memory(
        &self,
        n_seq: usize,
        n_ctx: usize,
        n_batch: usize,
        ty: KvType,
    ) -> Result<()> {
        let needed = self
            .kv_cache_bytes(n_ctx, n_batch, ty)
            .saturating_mul(n_seq as u64);
        match memory::available_bytes() {
            Some(available) if needed > available => {
                let ty = match ty {
                    KvType::F16 => "f16",
                    KvType::F32 => "f32",
                };
                Err(ModelError::OutOfMemory {
                    what: match n_seq {
                        1 => format!("a KV cache of {n_ctx} positions ({ty})"),
                        n => format!("the KV caches of {n} sequences of {n_ctx} positions ({ty})"),
                    },
                    needed,
                    available: Some(available),
                })
            }
            _ => Ok(()),
        }
    }

    /// Refuses a sequence's context past the model's training context.
    fn check_n_ctx(&self, n_ctx: usize) -> Result<()> {
        let train = self.hparams().n_ctx_train;
        if n_ctx > train {
            return Err(ModelError::Request(format!(
                "a context of {n_ctx} exceeds the model's training context of {train}"
            )));
        }
        Ok(())
    }

    /// Refuses tokens that cannot be evaluated after `cached` ones in a context of `n_ctx`
    /// positions: more than fit ([`ModelError::ContextFull`]) or an id outside the vocabulary.
    pub(crate) fn check_tokens(&self, cached: usize, tokens: &[u32], n_ctx: usize) -> Result<()> {
        let needed = cached + tokens.len();
        if needed > n_ctx {
            return Err(ModelError::ContextFull { needed, n_ctx });
        }
        let n_vocab = self.hparams().n_vocab;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(ModelError::Request(format!(
                "token id {bad} is out of range (the vocabulary has {n_vocab} tokens)"
            )));
        }
        Ok(())
    }

    /// The one check of a prompt before it starts a sequence of `n_ctx` positions: it has
    /// tokens ([`ModelError::EmptyPrompt`]), they fit ([`ModelError::ContextFull`], `needed`
    /// being the prompt's length) and are in the vocabulary. Sessions, the [`Batcher`], the
    /// CLI and the server all refuse prompts with it, each wording the error for its users.
    pub fn check_prompt(&self, prompt: &[u32], n_ctx: usize) -> Result<()> {
        if prompt.is_empty() {
            return Err(ModelError::EmptyPrompt);
        }
        self.check_tokens(0, prompt, n_ctx)
    }
}

impl Model {
    /// The tokens of a rendered chat prompt: special tokens parsed, and BOS added only when
    /// the template did not write it itself (as llama.cpp's chat tools do).
    pub fn tokenize_chat_prompt(&self, prompt: &str) -> Vec<u32> {
        let tokenizer = &self.tokenizer;
        let starts_with_bos = tokenizer
            .special_ids()
            .bos
            .and_then(|b| tokenizer.token_text(b))
            .is_some_and(|t| prompt.as_bytes().starts_with(t));
        tokenizer.encode(
            prompt.as_bytes(),
            EncodeOptions {
                add_special: !starts_with_bos,
                parse_special: true,
            },
        )
    }

    /// The chat template for this model's conversations, and where it comes from:
    /// with `choice` `None`, the file's `tokenizer.chat_template`, or for a file without one
    /// the built-in template whose turn markers are tokens of its vocabulary (Gemma's
    /// `<start_of_turn>`, ChatML's `<|im_start|>`, ...); with `Some(NAME)`, the built-in `NAME`
    /// or the file's `tokenizer.chat_template.NAME`. See
    /// [`gguf_tokenizer::chat_builtin::for_file`]; when nothing fits, the error says so.
    pub fn chat_template(&self, choice: Option<&str>) -> Result<(ChatTemplate, Origin)> {
        Ok(chat_builtin::for_file(self.file(), choice)?)
    }

    /// The prompt the model's chat template ([`Model::chat_template`] without a choice)
    /// renders for `messages`, ending with the assistant's turn, for a context of `n_ctx`
    /// tokens (see [`Model::render_chat`]).
    pub fn chat_prompt(&self, messages: &[ChatMessage], n_ctx: usize) -> Result<String> {
        let (template, _) = self.chat_template(None)?;
        self.render_chat(&template, messages, n_ctx)
    }

    /// `messages` rendered by `template`, ending with the assistant's turn, within
    /// [`Model::chat_render_limits`] for a context of `n_ctx` tokens: a template that writes
    /// far more than the context holds stops there with an error, instead of rendering and
    /// tokenizing it all.
    pub fn render_chat(
        &self,
        template: &ChatTemplate,
        messages: &[ChatMessage],
        n_ctx: usize,
    ) -> Result<String> {
        Ok(template.render(
            messages,
            &RenderOptions {
                add_generation_prompt: true,
                limits: self.chat_render_limits(n_ctx),
                ..RenderOptions::default()
            },
        )?)
    }

    /// The bounds of rendering a chat prompt for a context of `n_ctx` tokens. Every token
    /// stands for at most the longest token text of the vocabulary, so a prompt longer than
    /// `n_ctx` times that cannot fit; the output may be twice that (normalisation may shorten
    /// text before it is tokenized), and at least 64 KiB.
    pub fn chat_render_limits(&self, n_ctx: usize) -> RenderLimits {
        let bytes = n_ctx.saturating_mul(self.longest_token).saturating_mul(2);
        RenderLimits::for_output(bytes.max(64 << 10))
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_default_threads_are_the_physical_cores_within_the_cpus_allowed() {
        let cores = super::physical_cores();
        assert!((1..=super::max_threads()).contains(&cores), "{cores}");
        assert_eq!(super::session_threads(0), cores);
        assert_eq!(super::session_threads(usize::MAX), super::max_threads());
    }
}
