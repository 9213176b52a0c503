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
mod embed;
mod error;
mod eval;
mod forward;
mod hparams;
mod kv_cache;
mod memory;
mod ops;
mod parallel;
mod sampling;
mod stops;
mod weights;

pub use arch::SUPPORTED;
pub use embed::{EmbeddingOptions, Normalize, Pooling};
pub use error::{ModelError, Result};
pub use eval::{bench, perplexity, BenchKind, BenchTest, PerplexityResult, Throughput};
pub use gguf_quant::ThreadPool;
pub use gguf_tokenizer::Tokenizer;
pub use hparams::{Hparams, RopeScaling};
pub use kv_cache::KvType;
pub use parallel::{ParallelSession, SeqInput};
pub use sampling::{argmax, Sampler, SamplerConfig};
pub use stops::StopText;
pub use weights::PlanTensor;

use std::path::Path;
use std::sync::Arc;

use gguf_format::split::SplitSet;
use gguf_tokenizer::chat::{ChatMessage, ChatTemplate, RenderLimits, RenderOptions};
use gguf_tokenizer::chat_builtin::{self, Origin};

use arch::Architecture;
use forward::{Ctx, Pass, Scratch, Segment};
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

/// The number of physical cores (logical CPUs on machines where that cannot be told).
pub fn physical_cores() -> usize {
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    #[cfg(target_os = "linux")]
    if let Ok(info) = std::fs::read_to_string("/proc/cpuinfo") {
        let mut cores = std::collections::HashSet::new();
        let (mut phys, mut core) = (None, None);
        for line in info.lines() {
            if let Some(v) = line.strip_prefix("physical id") {
                phys = v.trim_start_matches([' ', '\t', ':']).parse::<u32>().ok();
            } else if let Some(v) = line.strip_prefix("core id") {
                core = v.trim_start_matches([' ', '\t', ':']).parse::<u32>().ok();
            } else if line.trim().is_empty() {
                if let (Some(p), Some(c)) = (phys, core) {
                    cores.insert((p, c));
                }
                phys = None;
                core = None;
            }
        }
        if !cores.is_empty() {
            return cores.len().min(logical);
        }
    }
    logical
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

    /// A session: a KV cache and buffers for generating with this model.
    pub fn session(&self, options: SessionOptions) -> Result<Session<'_>> {
        let pool = ThreadPool::new(session_threads(options.threads))?;
        self.session_on(options, Arc::new(pool))
    }

    /// A session running on an existing thread pool (several sessions can share one).
    pub fn session_on(
        &self,
        options: SessionOptions,
        pool: Arc<ThreadPool>,
    ) -> Result<Session<'_>> {
        let hp = self.hparams();
        let n_ctx = match options.n_ctx {
            0 => self.default_n_ctx(),
            n => n,
        };
        if n_ctx == 0 {
            return Err(ModelError::Request(
                "the context length must be positive".into(),
            ));
        }
        self.check_n_ctx(n_ctx)?;
        let n_batch = options.n_batch.max(1);
        self.check_kv_memory(1, n_ctx, n_batch, options.kv_type)?;
        Ok(Session {
            model: self,
            parts: self.set.parts().iter().map(|p| p.file().bytes()).collect(),
            cache: KvCache::new(hp, n_ctx, n_batch, options.kv_type)?,
            n_ctx,
            n_batch,
            tokens: Vec::new(),
            scratch: Scratch::default(),
            logits: Vec::new(),
            pool,
        })
    }
}

/// A generated token.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedToken {
    /// Its id.
    pub id: u32,
    /// The text it completes (whole characters only; may be empty while a character spans
    /// several tokens).
    pub text: String,
}

/// A conversation with a model: the KV cache of the tokens so far, reused across calls when a
/// new prompt starts with them.
pub struct Session<'m> {
    model: &'m Model,
    /// The mapped bytes of each part of the model's file.
    parts: Vec<&'m [u8]>,
    cache: KvCache,
    n_ctx: usize,
    n_batch: usize,
    /// Tokens whose keys and values are in the cache, in order.
    tokens: Vec<u32>,
    scratch: Scratch,
    logits: Vec<f32>,
    pool: Arc<ThreadPool>,
}

impl std::fmt::Debug for Session<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("n_ctx", &self.n_ctx)
            .field("n_past", &self.tokens.len())
            .finish()
    }
}

impl<'m> Session<'m> {
    /// The model.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// Threads the session computes on.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// Context length.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Tokens currently in the cache.
    pub fn tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// Bytes held by the KV cache.
    pub fn kv_cache_bytes(&self) -> usize {
        self.cache.bytes()
    }

    /// Forgets every cached token.
    pub fn clear(&mut self) {
        self.tokens.clear();
    }

    /// The logits after the last evaluated token.
    pub fn logits(&self) -> &[f32] {
        &self.logits
    }

    /// Refuses, before anything is computed, tokens that would overflow the context or are
    /// not in the vocabulary (rather than finding out after evaluating the batches before).
    fn check_request(&self, tokens: &[u32]) -> Result<()> {
        let needed = self.tokens.len() + tokens.len();
        if needed > self.n_ctx {
            return Err(ModelError::ContextFull {
                needed,
                n_ctx: self.n_ctx,
            });
        }
        let n_vocab = self.model.hparams().n_vocab;
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(ModelError::Request(format!(
                "token id {bad} is out of range (the vocabulary has {n_vocab} tokens)"
            )));
        }
        Ok(())
    }

    /// Evaluates `tokens` after the cached ones (in batches of `n_batch`); afterwards
    /// [`Session::logits`] holds the next-token logits.
    pub fn eval(&mut self, tokens: &[u32]) -> Result<()> {
        self.check_request(tokens)?;
        for chunk in tokens.chunks(self.n_batch) {
            self.run(chunk, false, false)?;
        }
        Ok(())
    }

    /// One batch through the model, after the cached tokens (checked by `check_request`), into
    /// [`Session::logits`]: the logits (of each token with `all_logits`), or with `embeddings`
    /// the hidden states they are computed from (see [`Pass::embeddings`]).
    pub(crate) fn run(&mut self, chunk: &[u32], all_logits: bool, embeddings: bool) -> Result<()> {
        self.model.arch.forward(&mut Pass {
            ctx: Ctx {
                pool: &self.pool,
                parts: &self.parts,
            },
            caches: std::slice::from_mut(&mut self.cache),
            s: &mut self.scratch,
            tokens: chunk,
            segments: &[Segment::one(self.tokens.len(), chunk.len())],
            n_ctx: self.n_ctx,
            all_logits,
            embeddings,
            logits: &mut self.logits,
        })?;
        self.tokens.extend_from_slice(chunk);
        Ok(())
    }

    /// Evaluates `tokens` after the cached ones and returns the logits of every one of them
    /// (`tokens.len()` rows of the vocabulary size), for scoring text (perplexity).
    pub fn eval_all_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.check_request(tokens)?;
        let v = self.model.hparams().n_vocab;
        let mut all = Vec::with_capacity(tokens.len() * v);
        for chunk in tokens.chunks(self.n_batch) {
            self.run(chunk, true, false)?;
            all.extend_from_slice(&self.logits);
        }
        let n = self.logits.len();
        if n >= v {
            self.logits.drain(..n - v);
        }
        Ok(all)
    }

    /// Makes the cache hold exactly `prompt` and leaves its next-token logits in
    /// [`Session::logits`], reusing the cached prefix shared with it.
    pub fn prefill(&mut self, prompt: &[u32]) -> Result<()> {
        if prompt.is_empty() {
            return Err(ModelError::Request("the prompt has no tokens".into()));
        }
        let common = self
            .tokens
            .iter()
            .zip(prompt)
            .take_while(|(a, b)| a == b)
            .count();
        // At least the last prompt token is evaluated, for its logits.
        let keep = common.min(prompt.len() - 1);
        self.tokens.truncate(keep);
        self.eval(&prompt[keep..])
    }

    /// Generates up to `max_tokens` tokens after the raw text `prompt` (tokenized with the
    /// file's BOS settings, special-token text parsed), stopping at an end-of-generation token.
    pub fn generate(
        &mut self,
        prompt: &str,
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        let ids = self.model.tokenizer.encode(prompt.as_bytes(), true, true);
        self.generate_from(&ids, sampler, max_tokens)
    }

    /// As [`Session::generate`] from prompt token ids.
    pub fn generate_from(
        &mut self,
        prompt: &[u32],
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        sampler.check()?;
        self.prefill(prompt)?;
        let tokenizer = &self.model.tokenizer;
        Ok(Generation {
            decoder: tokenizer.stream_decoder(false),
            session: self,
            sampler: Sampler::new(sampler.clone()),
            remaining: max_tokens,
            text: StopText::default(),
            stop: None,
            pending: None,
        })
    }

    /// Renders `messages` with the model's chat template ([`Model::chat_template`] without a
    /// choice: the file's, or the built-in its vocabulary calls for), with the assistant prompt
    /// appended, and generates the reply.
    pub fn chat(
        &mut self,
        messages: &[ChatMessage],
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        let prompt = self.model.chat_prompt(messages, self.n_ctx)?;
        self.generate_chat_prompt(&prompt, sampler, max_tokens)
    }

    /// As [`Session::chat`] with a given template (see [`Model::chat_template`]).
    pub fn chat_with(
        &mut self,
        template: &ChatTemplate,
        messages: &[ChatMessage],
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        let prompt = self.model.render_chat(template, messages, self.n_ctx)?;
        self.generate_chat_prompt(&prompt, sampler, max_tokens)
    }

    fn generate_chat_prompt(
        &mut self,
        prompt: &str,
        sampler: &SamplerConfig,
        max_tokens: usize,
    ) -> Result<Generation<'_, 'm>> {
        let ids = self.model.tokenize_chat_prompt(prompt);
        self.generate_from(&ids, sampler, max_tokens)
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
        tokenizer.encode(prompt.as_bytes(), !starts_with_bos, true)
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

/// Why a [`Generation`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token (not returned).
    EndOfGeneration,
    /// `max_tokens` tokens were generated.
    MaxTokens,
    /// The text reached one of the [`Generation::stop_at`] strings.
    StopString,
    /// The context is full: the last token returned could not be evaluated for another.
    /// llama.cpp stops there too (it shifts the context only when asked to).
    ContextFull,
    /// An error was returned.
    Error,
}

impl StopReason {
    /// A short name for reports: `eog`, `length`, `stop`, `context_full`, `error`.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::EndOfGeneration => "eog",
            StopReason::MaxTokens => "length",
            StopReason::StopString => "stop",
            StopReason::ContextFull => "context_full",
            StopReason::Error => "error",
        }
    }
}

/// Tokens as they are generated: an iterator of `Result<GeneratedToken>`.
pub struct Generation<'s, 'm> {
    session: &'s mut Session<'m>,
    sampler: Sampler,
    decoder: gguf_tokenizer::StreamDecoder<'m>,
    remaining: usize,
    text: StopText,
    stop: Option<StopReason>,
    pending: Option<u32>,
}

impl Generation<'_, '_> {
    /// Also stop once the generated text contains any of `stops` (the token that completes
    /// one is still returned).
    pub fn stop_at(mut self, stops: &[&str]) -> Self {
        self.text = StopText::new(stops);
        self
    }

    /// The text generated so far.
    pub fn text(&self) -> &str {
        self.text.text()
    }

    /// Why generation ended, once it has (`None` while tokens may still come).
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.stop
    }

    fn end(&mut self, reason: StopReason) {
        self.stop = Some(reason);
    }
}

impl Iterator for Generation<'_, '_> {
    type Item = Result<GeneratedToken>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.stop.is_some() {
            return None;
        }
        if self.remaining == 0 {
            self.end(StopReason::MaxTokens);
            return None;
        }
        // The previous token is evaluated lazily, so the last one costs no forward pass.
        if let Some(prev) = self.pending.take() {
            if self.session.tokens.len() >= self.session.n_ctx {
                self.end(StopReason::ContextFull);
                return None;
            }
            if let Err(e) = self.session.eval(&[prev]) {
                self.end(StopReason::Error);
                return Some(Err(e));
            }
        }
        let logits = &self.session.logits;
        if logits.iter().any(|l| l.is_nan()) {
            self.end(StopReason::Error);
            return Some(Err(ModelError::NotANumber {
                position: self.session.tokens.len(),
            }));
        }
        let id = self.sampler.sample(logits, &self.session.tokens);
        self.remaining -= 1;
        let tokenizer = &self.session.model.tokenizer;
        if tokenizer.is_end_of_generation(id) {
            self.end(StopReason::EndOfGeneration);
            return None;
        }
        let text = self.decoder.push(id);
        self.text.push(&text);
        if self.text.stopped() {
            self.end(StopReason::StopString);
        }
        self.pending = Some(id);
        Some(Ok(GeneratedToken { id, text }))
    }
}
