//! A session: one sequence's KV cache and buffers, and evaluating tokens into it.

use std::sync::Arc;

use gguf_quant::ThreadPool;

use crate::error::{ModelError, Result};
use crate::forward::{Ctx, Pass, Scratch, Segment};
use crate::kv_cache::KvCache;
use crate::{session_threads, Model, SessionOptions};

impl Model {
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

/// A conversation with a model: the KV cache of the tokens so far, reused across calls when a
/// new prompt starts with them.
pub struct Session<'m> {
    pub(crate) model: &'m Model,
    /// The mapped bytes of each part of the model's file.
    pub(crate) parts: Vec<&'m [u8]>,
    pub(crate) cache: KvCache,
    pub(crate) n_ctx: usize,
    pub(crate) n_batch: usize,
    /// Tokens whose keys and values are in the cache, in order.
    pub(crate) tokens: Vec<u32>,
    pub(crate) scratch: Scratch,
    pub(crate) logits: Vec<f32>,
    pub(crate) pool: Arc<ThreadPool>,
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
    pub(crate) fn check_request(&self, tokens: &[u32]) -> Result<()> {
        self.model
            .check_tokens(self.tokens.len(), tokens, self.n_ctx)
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
            scratch: &mut self.scratch,
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
            return Err(ModelError::EmptyPrompt);
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
}
