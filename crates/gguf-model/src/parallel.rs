//! Several sequences on one model at once, for servers: each sequence has its own KV cache and
//! token history, and one [`ParallelSession::step`] evaluates new tokens of any of them in a
//! single forward pass, so the weights are read once for all of them (continuous batching: the
//! decode steps of every active sequence, and a chunk of a new prompt, share one pass).
//!
//! ```no_run
//! use gguf_model::{Model, SeqInput, SessionOptions};
//!
//! # fn main() -> Result<(), gguf_model::ModelError> {
//! let model = Model::load("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let mut batch = model.parallel_session(SessionOptions::default(), 2)?;
//! let (a, b) = (model.tokenizer().encode(b"Hello", gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL), model.tokenizer().encode(b"Hi", gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL));
//! batch.step(&[SeqInput::new(0, &a), SeqInput::new(1, &b)])?;
//! // Logits by sequence id.
//! let next_a = gguf_model::argmax(batch.logits(0).unwrap());
//! let next_b = gguf_model::argmax(batch.logits(1).unwrap());
//! batch.step(&[SeqInput::new(0, &[next_a]), SeqInput::new(1, &[next_b])])?;
//! # Ok(()) }
//! ```

use std::sync::Arc;

use gguf_quant::ThreadPool;

use crate::error::{ModelError, Result};
use crate::forward::{Ctx, Pass, Scratch, Segment};
use crate::kv_cache::KvCache;
use crate::{session_threads, Model, SessionOptions};

/// New tokens of one sequence for a [`ParallelSession::step`].
#[derive(Debug, Clone, Copy)]
pub struct SeqInput<'a> {
    /// The sequence (`0..n_seq`).
    pub seq: usize,
    /// Tokens to evaluate after the sequence's cached ones.
    pub tokens: &'a [u32],
    /// Whether the next-token logits after them are wanted (a prompt's earlier chunks need
    /// none, which saves the output projection).
    pub logits: bool,
}

impl<'a> SeqInput<'a> {
    /// `tokens` for sequence `seq`, with logits.
    pub fn new(seq: usize, tokens: &'a [u32]) -> SeqInput<'a> {
        SeqInput {
            seq,
            tokens,
            logits: true,
        }
    }
}

/// Sequences sharing one model and thread pool, evaluated together (see the module docs).
pub struct ParallelSession<'m> {
    model: &'m Model,
    parts: Vec<&'m [u8]>,
    caches: Vec<KvCache>,
    /// Each sequence's tokens whose keys and values are in its cache.
    seqs: Vec<Vec<u32>>,
    n_ctx: usize,
    n_batch: usize,
    scratch: Scratch,
    batch_tokens: Vec<u32>,
    segments: Vec<Segment>,
    logits: Vec<f32>,
    /// For each sequence, its row of `logits` after the last step (`None`: it asked for
    /// none, or was not in the step).
    logit_rows: Vec<Option<usize>>,
    pool: Arc<ThreadPool>,
}

impl std::fmt::Debug for ParallelSession<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParallelSession")
            .field("n_seq", &self.seqs.len())
            .field("n_ctx", &self.n_ctx)
            .finish()
    }
}

impl Model {
    /// A session of `n_seq` sequences, each with a KV cache of `options.n_ctx / n_seq`
    /// positions (as llama-server divides `-c` among its `-np` slots; `n_ctx` 0 is
    /// [`Model::default_n_ctx`]). A step holds at most `options.n_batch` tokens in all.
    pub fn parallel_session(
        &self,
        options: SessionOptions,
        n_seq: usize,
    ) -> Result<ParallelSession<'_>> {
        let pool = ThreadPool::new(session_threads(options.threads))?;
        self.parallel_session_on(options, n_seq, Arc::new(pool))
    }

    /// As [`Model::parallel_session`] on an existing thread pool.
    pub fn parallel_session_on(
        &self,
        options: SessionOptions,
        n_seq: usize,
        pool: Arc<ThreadPool>,
    ) -> Result<ParallelSession<'_>> {
        let hp = self.hparams();
        if n_seq == 0 || n_seq > 256 {
            return Err(ModelError::Request(format!(
                "{n_seq} sequences: between 1 and 256 can run at once"
            )));
        }
        let total = match options.n_ctx {
            0 => self.default_n_ctx(),
            n => n,
        };
        let n_ctx = total / n_seq;
        if n_ctx == 0 {
            return Err(ModelError::Request(format!(
                "a context of {total} leaves no position for each of {n_seq} sequences"
            )));
        }
        self.check_n_ctx(n_ctx)?;
        if !hp.causal {
            return Err(ModelError::Request(format!(
                "`{}` is an encoder: it computes embeddings, not sequences of tokens",
                hp.arch
            )));
        }
        let n_batch = options.n_batch.max(1);
        self.check_kv_memory(n_seq, n_ctx, n_batch, options.kv_type)?;
        Ok(ParallelSession {
            model: self,
            parts: self.set.parts().iter().map(|p| p.file().bytes()).collect(),
            caches: (0..n_seq)
                .map(|_| KvCache::new(hp, n_ctx, n_batch, options.kv_type))
                .collect::<Result<_>>()?,
            seqs: vec![Vec::new(); n_seq],
            n_ctx,
            n_batch,
            scratch: Scratch::default(),
            batch_tokens: Vec::new(),
            segments: Vec::new(),
            logits: Vec::new(),
            logit_rows: vec![None; n_seq],
            pool,
        })
    }
}

impl<'m> ParallelSession<'m> {
    /// The model.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// The number of sequences.
    pub fn n_seq(&self) -> usize {
        self.seqs.len()
    }

    /// Each sequence's context length.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// The most tokens one step takes, all sequences together.
    pub fn n_batch(&self) -> usize {
        self.n_batch
    }

    /// Threads the session computes on.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// Bytes held by the KV caches.
    pub fn kv_cache_bytes(&self) -> usize {
        self.caches.iter().map(KvCache::bytes).sum()
    }

    /// The tokens of sequence `seq` in its cache, in order (empty for a sequence out of range).
    pub fn tokens(&self, seq: usize) -> &[u32] {
        self.seqs.get(seq).map_or(&[], |s| s.as_slice())
    }

    /// Keeps the first `len` cached tokens of sequence `seq` and forgets the rest (to reuse a
    /// prefix for a new prompt, or with 0 to empty it).
    pub fn truncate(&mut self, seq: usize, len: usize) {
        if let Some(s) = self.seqs.get_mut(seq) {
            s.truncate(len);
        }
    }

    /// Evaluates each input's tokens after its sequence's cached ones, all in one forward pass
    /// (their rows in the inputs' order). Afterwards [`ParallelSession::logits`] holds the
    /// next-token logits of the inputs that asked for them.
    ///
    /// Refused before anything is computed: no inputs, a sequence out of range or named twice,
    /// an input without tokens, more than [`ParallelSession::n_batch`] tokens in all, a
    /// sequence's context overflowing, a token outside the vocabulary.
    pub fn step(&mut self, inputs: &[SeqInput<'_>]) -> Result<()> {
        self.check(inputs)?;
        self.batch_tokens.clear();
        self.segments.clear();
        self.logit_rows.fill(None);
        let mut rows = 0;
        for input in inputs {
            self.batch_tokens.extend_from_slice(input.tokens);
            self.segments.push(Segment {
                cache: input.seq,
                pos0: self.seqs[input.seq].len(),
                len: input.tokens.len(),
                logits: input.logits,
            });
            self.logit_rows[input.seq] = input.logits.then(|| {
                rows += 1;
                rows - 1
            });
        }
        let result = self.model.arch.forward(&mut Pass {
            ctx: Ctx {
                pool: &self.pool,
                parts: &self.parts,
            },
            caches: &mut self.caches,
            scratch: &mut self.scratch,
            tokens: &self.batch_tokens,
            segments: &self.segments,
            n_ctx: self.n_ctx,
            all_logits: false,
            embeddings: false,
            logits: &mut self.logits,
        });
        if let Err(e) = result {
            self.logit_rows.fill(None);
            return Err(e);
        }
        for input in inputs {
            self.seqs[input.seq].extend_from_slice(input.tokens);
        }
        Ok(())
    }

    fn check(&self, inputs: &[SeqInput<'_>]) -> Result<()> {
        if inputs.is_empty() {
            return Err(ModelError::Request(
                "a step needs at least one input".into(),
            ));
        }
        let mut total = 0usize;
        for (i, input) in inputs.iter().enumerate() {
            let seq = input.seq;
            let Some(cached) = self.seqs.get(seq) else {
                return Err(ModelError::Request(format!(
                    "sequence {seq} does not exist (there are {})",
                    self.seqs.len()
                )));
            };
            // A step names each sequence at most once (a server's few slots: no set needed).
            if inputs[..i].iter().any(|earlier| earlier.seq == seq) {
                return Err(ModelError::Request(format!(
                    "sequence {seq} is given twice in one step"
                )));
            }
            if input.tokens.is_empty() {
                return Err(ModelError::Request(format!(
                    "the input of sequence {seq} has no tokens"
                )));
            }
            self.model
                .check_tokens(cached.len(), input.tokens, self.n_ctx)?;
            total += input.tokens.len();
        }
        if total > self.n_batch {
            return Err(ModelError::Request(format!(
                "a step of {total} tokens exceeds the batch size of {}",
                self.n_batch
            )));
        }
        Ok(())
    }

    /// The next-token logits of sequence `seq` after the last step (`None` if it was not in
    /// that step, asked for none, or the step failed).
    pub fn logits(&self, seq: usize) -> Option<&[f32]> {
        let row = (*self.logit_rows.get(seq)?)?;
        let v = self.model.hparams().n_vocab;
        self.logits.get(row * v..(row + 1) * v)
    }
}
