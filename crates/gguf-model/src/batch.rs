//! Continuous batching of many requests on one model, for servers and apps alike: requests in,
//! events out, nothing of any transport. A [`Batcher`] owns a [`ParallelSession`] of `n_seq`
//! sequences (slots) and each [`Batcher::step`] evaluates, in one forward pass, the next token
//! of every slot that is generating and as much of waiting prompts as the batch has room for,
//! so a long prompt is taken in chunks between the others' tokens and never stalls them for
//! more than a step. A new request takes the free slot whose cached tokens share the longest
//! prefix with its prompt, so a conversation's next turn evaluates only what is new. Requests
//! beyond the slots wait in order. Embeddings requests run one input per step, beside the
//! generations.
//!
//! Every sequence advances by the same per-token step as [`crate::Generation`], so a request
//! generates here exactly what it generates alone in a [`Session`].
//!
//! ```no_run
//! use gguf_model::{EncodeOptions, Event, GenerateRequest, Model, SamplerConfig, SessionOptions};
//!
//! # fn main() -> Result<(), gguf_model::ModelError> {
//! let model = Model::load("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! let mut batcher = model.batcher(SessionOptions::default(), 2)?;
//! let mut texts = vec![String::new(); 2];
//! for (i, prompt) in ["The capital of France is", "Water boils at"].iter().enumerate() {
//!     let ids = model.tokenizer().encode(prompt.as_bytes(), EncodeOptions::ADD_AND_PARSE_SPECIAL);
//!     let id = batcher.submit(GenerateRequest::new(ids, SamplerConfig::greedy(), 16))?;
//!     assert_eq!(id.index(), i as u64);
//! }
//! while !batcher.is_idle() {
//!     for out in batcher.step() {
//!         if let Event::Token { token, .. } = out.event {
//!             texts[out.request.index() as usize].push_str(&token.text);
//!         }
//!     }
//! }
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gguf_quant::ThreadPool;

use crate::embed::{EmbeddingOptions, Embeddings};
use crate::error::{ModelError, Result};
use crate::parallel::{ParallelSession, SeqInput};
use crate::sampling::SamplerConfig;
use crate::sequence::{Advance, Decoding, GeneratedToken, StopReason, TokenLogprob};
use crate::session::Session;
use crate::{session_threads, Model, SessionOptions};

/// The most prompt tokens a step takes while some slot is generating (the batch size
/// otherwise): on SmolLM2 with 2 threads (955 prompt tokens/s, `docs/performance.md`) such a
/// step takes about 0.13 s.
const PROMPT_TOKENS_BESIDE_DECODING: usize = 128;

/// A request's handle, given by [`Batcher::submit`]: requests are numbered from 0 in the order
/// they were submitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RequestId(u64);

impl RequestId {
    /// Its number.
    pub fn index(self) -> u64 {
        self.0
    }
}

/// A generation to run: a prompt's tokens and how to continue it.
#[derive(Debug, Clone)]
pub struct GenerateRequest {
    /// The prompt's tokens.
    pub prompt: Vec<u32>,
    /// How each token is picked.
    pub sampler: SamplerConfig,
    /// Tokens to generate at most.
    pub max_tokens: usize,
    /// Stop once the text contains any of these (the token that completes one is the last).
    pub stops: Vec<String>,
    /// `Some(k)`: report each token's log-probability and the `k` most likely alternatives.
    pub logprobs: Option<usize>,
}

impl GenerateRequest {
    /// Up to `max_tokens` tokens after `prompt`, sampled by `sampler`, with no stop strings
    /// and no log-probabilities.
    pub fn new(prompt: Vec<u32>, sampler: SamplerConfig, max_tokens: usize) -> GenerateRequest {
        GenerateRequest {
            prompt,
            sampler,
            max_tokens,
            stops: Vec::new(),
            logprobs: None,
        }
    }
}

/// What a step reports of one request.
#[derive(Debug)]
pub enum Event {
    /// A generated token.
    Token {
        /// Its id and text.
        token: GeneratedToken,
        /// The text a stream can show now: up to a stop string once one appears, never an
        /// ending that may still become one (released later, or in [`Finished::tail`]).
        shown: String,
        /// Its log-probability, when the request asked for them.
        logprob: Option<TokenLogprob>,
    },
    /// The generation ended; no more events come for it.
    Done(Finished),
    /// The embeddings of every input of an embeddings request, in order.
    Embeddings(Vec<Embeddings>),
    /// The request failed; no more events come for it.
    Error(ModelError),
}

/// An event and the request it belongs to.
#[derive(Debug)]
pub struct Output {
    /// The request.
    pub request: RequestId,
    /// What happened.
    pub event: Event,
}

/// The end of a generation.
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    /// Why it ended.
    pub reason: StopReason,
    /// Text held back (it might have begun a stop string) and shown only now; empty after a
    /// stop string.
    pub tail: String,
    /// The prompt's tokens.
    pub prompt_tokens: usize,
    /// Tokens generated (an end-of-generation token is not counted).
    pub completion_tokens: usize,
}

/// Counts since the batcher was made.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BatchStats {
    /// Steps that computed anything.
    pub steps: usize,
    /// Tokens evaluated (prompts, generated tokens, embeddings inputs).
    pub tokens_evaluated: usize,
    /// Time spent in those steps.
    pub busy: Duration,
    /// Prompt tokens of the generations given a slot.
    pub prompt_tokens: usize,
    /// Of those, the tokens found in the slot's cache (not evaluated again).
    pub prompt_tokens_cached: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
}

/// A generation in a slot.
struct Running<'m> {
    id: RequestId,
    prompt: Vec<u32>,
    decoding: Decoding<'m>,
    /// Prompt tokens in the slot's cache.
    prefilled: usize,
    /// The sampled token to evaluate next (once the prompt is in).
    next: Option<u32>,
}

impl Running<'_> {
    fn finished(&mut self, reason: StopReason) -> Finished {
        Finished {
            reason,
            tail: self.decoding.finish(),
            prompt_tokens: self.prompt.len(),
            completion_tokens: self.decoding.generated(),
        }
    }
}

/// An embeddings request: its inputs and the vectors computed so far.
struct EmbedWork {
    id: RequestId,
    inputs: Vec<Vec<u32>>,
    options: EmbeddingOptions,
    done: Vec<Embeddings>,
}

/// Requests batched on one model (see the module docs).
pub struct Batcher<'m> {
    model: &'m Model,
    /// `None` for an encoder (embeddings only).
    session: Option<ParallelSession<'m>>,
    slots: Vec<Option<Running<'m>>>,
    waiting: VecDeque<(RequestId, GenerateRequest)>,
    /// Embeddings requests in order; the first is the one under way.
    embeds: VecDeque<EmbedWork>,
    /// The session embeddings are computed in (made on first use for a decoder).
    embedder: Option<Session<'m>>,
    embed_options: SessionOptions,
    pool: Arc<ThreadPool>,
    n_ctx: usize,
    next_id: u64,
    stats: BatchStats,
}

impl std::fmt::Debug for Batcher<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batcher")
            .field("n_seq", &self.slots.len())
            .field("n_ctx", &self.n_ctx)
            .field("running", &self.running())
            .field("waiting", &self.waiting())
            .finish()
    }
}

impl Model {
    /// A batcher of `n_seq` sequences, each with a KV cache of `options.n_ctx / n_seq`
    /// positions (as [`Model::parallel_session`] divides the context). An encoder (BERT) gets
    /// one session of the whole context and takes embeddings requests only.
    pub fn batcher(&self, options: SessionOptions, n_seq: usize) -> Result<Batcher<'_>> {
        let pool = ThreadPool::new(session_threads(options.threads))?;
        self.batcher_on(options, n_seq, Arc::new(pool))
    }

    /// As [`Model::batcher`] on an existing thread pool.
    pub fn batcher_on(
        &self,
        options: SessionOptions,
        n_seq: usize,
        pool: Arc<ThreadPool>,
    ) -> Result<Batcher<'_>> {
        let n_seq = n_seq.max(1);
        let mut embed_options = options.clone();
        let (session, embedder, n_ctx) = if self.hparams().causal {
            let batch = self.parallel_session_on(options, n_seq, pool.clone())?;
            embed_options.n_ctx = batch.n_ctx();
            let n_ctx = batch.n_ctx();
            (Some(batch), None, n_ctx)
        } else {
            let session = self.session_on(options, pool.clone())?;
            let n_ctx = session.n_ctx();
            (None, Some(session), n_ctx)
        };
        Ok(Batcher {
            model: self,
            session,
            slots: (0..n_seq).map(|_| None).collect(),
            waiting: VecDeque::new(),
            embeds: VecDeque::new(),
            embedder,
            embed_options,
            pool,
            n_ctx,
            next_id: 0,
            stats: BatchStats::default(),
        })
    }
}

impl<'m> Batcher<'m> {
    /// The model.
    pub fn model(&self) -> &'m Model {
        self.model
    }

    /// The number of slots.
    pub fn n_seq(&self) -> usize {
        self.slots.len()
    }

    /// Each sequence's context length: a prompt may have this many tokens at most.
    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Threads the batcher computes on.
    pub fn threads(&self) -> usize {
        self.pool.threads()
    }

    /// Generations in a slot, and the embeddings request under way.
    pub fn running(&self) -> usize {
        self.slots.iter().filter(|s| s.is_some()).count() + usize::from(!self.embeds.is_empty())
    }

    /// Requests waiting: generations without a slot, embeddings requests after the first.
    pub fn waiting(&self) -> usize {
        self.waiting.len() + self.embeds.len().saturating_sub(1)
    }

    /// Whether no request is running or waiting (a step would do nothing).
    pub fn is_idle(&self) -> bool {
        self.running() == 0 && self.waiting.is_empty()
    }

    /// Counts since the batcher was made.
    pub fn stats(&self) -> BatchStats {
        self.stats
    }

    /// The tokens cached in slot `seq` (empty for an encoder or a slot out of range).
    pub fn cached_tokens(&self, seq: usize) -> &[u32] {
        self.session.as_ref().map_or(&[], |s| s.tokens(seq))
    }

    fn next_id(&mut self) -> RequestId {
        self.next_id += 1;
        RequestId(self.next_id - 1)
    }

    /// Queues a generation; it takes a slot at once if one is free. Refused before anything is
    /// queued: an encoder, a bad sampler, a prompt [`Model::check_prompt`] refuses for this
    /// batcher's [`Batcher::n_ctx`].
    pub fn submit(&mut self, request: GenerateRequest) -> Result<RequestId> {
        if self.session.is_none() {
            return Err(ModelError::Request(format!(
                "`{}` is an encoder: it computes embeddings, not text",
                self.model.hparams().arch
            )));
        }
        request.sampler.check()?;
        self.model.check_prompt(&request.prompt, self.n_ctx)?;
        let id = self.next_id();
        self.waiting.push_back((id, request));
        self.admit();
        Ok(id)
    }

    /// Queues an embeddings request: its inputs' embeddings come in one
    /// [`Event::Embeddings`], computed one input per step.
    pub fn submit_embeddings(
        &mut self,
        inputs: Vec<Vec<u32>>,
        options: EmbeddingOptions,
    ) -> RequestId {
        let id = self.next_id();
        self.embeds.push_back(EmbedWork {
            id,
            done: Vec::with_capacity(inputs.len()),
            inputs,
            options,
        });
        id
    }

    /// Ends request `id` now: a generation in a slot gives its end ([`StopReason::Cancelled`],
    /// the text held back and the counts) and frees the slot, whose cache stays for the next
    /// prompt that shares it; a waiting request or an embeddings request is dropped (`None`),
    /// as is an unknown or finished one.
    pub fn cancel(&mut self, id: RequestId) -> Option<Finished> {
        let finished = self.remove(id);
        self.admit();
        finished
    }

    /// Ends every request as [`Batcher::cancel`] does, none taking a freed slot: each with
    /// its end if it was in a slot, `None` if it was waiting or an embeddings request.
    pub fn cancel_all(&mut self) -> Vec<(RequestId, Option<Finished>)> {
        let mut ended = Vec::new();
        for slot in &mut self.slots {
            if let Some(mut r) = slot.take() {
                ended.push((r.id, Some(r.finished(StopReason::Cancelled))));
            }
        }
        ended.extend(self.waiting.drain(..).map(|(id, _)| (id, None)));
        ended.extend(self.embeds.drain(..).map(|e| (e.id, None)));
        ended
    }

    fn remove(&mut self, id: RequestId) -> Option<Finished> {
        for slot in &mut self.slots {
            if slot.as_ref().is_some_and(|r| r.id == id) {
                return slot.take().map(|mut r| r.finished(StopReason::Cancelled));
            }
        }
        self.waiting.retain(|(w, _)| *w != id);
        self.embeds.retain(|e| e.id != id);
        None
    }

    /// Gives waiting generations the free slots, each the one whose cache shares the longest
    /// prefix with its prompt.
    fn admit(&mut self) {
        let Some(batch) = self.session.as_mut() else {
            return;
        };
        while let Some(free) = self.slots.iter().position(Option::is_none) {
            let Some((id, request)) = self.waiting.pop_front() else {
                break;
            };
            let shared = |seq: usize| {
                batch
                    .tokens(seq)
                    .iter()
                    .zip(&request.prompt)
                    .take_while(|(a, b)| a == b)
                    .count()
            };
            let seq = (free..self.slots.len())
                .filter(|&s| self.slots[s].is_none())
                .max_by_key(|&s| (shared(s), std::cmp::Reverse(s)))
                .unwrap_or(free);
            // At least the last prompt token is evaluated, for its logits.
            let keep = shared(seq).min(request.prompt.len() - 1);
            batch.truncate(seq, keep);
            self.stats.prompt_tokens += request.prompt.len();
            self.stats.prompt_tokens_cached += keep;
            let decoding = Decoding::new(
                self.model,
                &request.sampler,
                request.max_tokens,
                &request.stops,
                request.logprobs,
            );
            self.slots[seq] = Some(Running {
                id,
                prompt: request.prompt,
                decoding,
                prefilled: keep,
                next: None,
            });
        }
    }

    /// One step: the next input of the embeddings request under way, then one forward pass
    /// for every slot with work and each slot's next token. Returns what happened, in order;
    /// nothing when idle.
    pub fn step(&mut self) -> Vec<Output> {
        let started = Instant::now();
        let mut out = Vec::new();
        let mut evaluated = self.embed_step(&mut out);
        evaluated += self.generate_step(&mut out);
        self.admit();
        if evaluated > 0 {
            self.stats.steps += 1;
            self.stats.tokens_evaluated += evaluated;
            self.stats.busy += started.elapsed();
        }
        out
    }

    /// Embeds the next input of the embeddings request under way, and reports the request
    /// once it has them all (or an error). Returns the tokens evaluated.
    fn embed_step(&mut self, out: &mut Vec<Output>) -> usize {
        let Some(work) = self.embeds.front_mut() else {
            return 0;
        };
        let Some(ids) = work.inputs.get(work.done.len()) else {
            let work = self.embeds.pop_front().expect("checked above");
            out.push(Output {
                request: work.id,
                event: Event::Embeddings(work.done),
            });
            return 0;
        };
        let (model, pool, options) = (self.model, &self.pool, &self.embed_options);
        let embedder = &mut self.embedder;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if embedder.is_none() {
                *embedder = Some(model.session_on(options.clone(), pool.clone())?);
            }
            let session = embedder.as_mut().expect("made above");
            session.embed_tokens_with(ids, &work.options)
        }));
        let evaluated = ids.len();
        let failure = match outcome {
            Ok(Ok(vectors)) => {
                work.done.push(vectors);
                if work.done.len() < work.inputs.len() {
                    return evaluated;
                }
                None
            }
            Ok(Err(e)) => Some(e),
            Err(_) => {
                self.embedder = None;
                Some(ModelError::Engine(
                    "the engine failed while embedding (a bug): the request was abandoned".into(),
                ))
            }
        };
        let work = self.embeds.pop_front().expect("under way");
        out.push(Output {
            request: work.id,
            event: match failure {
                None => Event::Embeddings(work.done),
                Some(e) => Event::Error(e),
            },
        });
        evaluated
    }

    /// The slots' inputs for the next pass: decoding slots first (one token each), then
    /// prompt chunks in slot order while the batch has room.
    fn plan(&self, n_batch: usize) -> Vec<(usize, std::ops::Range<usize>)> {
        let mut budget = n_batch;
        let mut plan = Vec::new();
        for (seq, slot) in self.slots.iter().enumerate() {
            if let Some(Running { next: Some(_), .. }) = slot {
                plan.push((seq, 0..1));
                budget -= 1;
            }
            if budget == 0 {
                break;
            }
        }
        // While others are generating, prompts take a smaller share of each step, so that a
        // long prompt delays the others' next tokens by a short step at a time.
        if !plan.is_empty() {
            budget = budget.min(PROMPT_TOKENS_BESIDE_DECODING);
        }
        for (seq, slot) in self.slots.iter().enumerate() {
            if budget == 0 {
                break;
            }
            if let Some(r) = slot {
                if r.next.is_none() && r.prefilled < r.prompt.len() {
                    let n = (r.prompt.len() - r.prefilled).min(budget);
                    plan.push((seq, r.prefilled..r.prefilled + n));
                    budget -= n;
                }
            }
        }
        plan
    }

    /// One forward pass for every slot with work, then each slot's token. Returns the tokens
    /// evaluated.
    fn generate_step(&mut self, out: &mut Vec<Output>) -> usize {
        let Some(n_batch) = self.session.as_ref().map(ParallelSession::n_batch) else {
            return 0;
        };
        let plan = self.plan(n_batch);
        if plan.is_empty() {
            return 0;
        }
        let batch = self.session.as_mut().expect("checked above");
        let inputs: Vec<SeqInput<'_>> = plan
            .iter()
            .map(|(seq, range)| {
                let r = self.slots[*seq].as_ref().expect("planned slots run");
                match &r.next {
                    Some(token) => SeqInput::new(*seq, std::slice::from_ref(token)),
                    None => SeqInput {
                        seq: *seq,
                        tokens: &r.prompt[range.clone()],
                        logits: range.end == r.prompt.len(),
                    },
                }
            })
            .collect();
        let evaluated = inputs.iter().map(|i| i.tokens.len()).sum();
        let failure = match catch_unwind(AssertUnwindSafe(|| batch.step(&inputs))) {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(format!(
                "the engine failed while generating: {e}: the request was abandoned"
            )),
            Err(_) => {
                Some("the engine failed while generating (a bug): the request was abandoned".into())
            }
        };
        if let Some(message) = failure {
            for (seq, _) in &plan {
                if let Some(r) = self.slots[*seq].take() {
                    out.push(Output {
                        request: r.id,
                        event: Event::Error(ModelError::Engine(message.clone())),
                    });
                }
                batch.truncate(*seq, 0);
            }
            return evaluated;
        }
        for (seq, range) in &plan {
            let Some(r) = self.slots[*seq].as_mut() else {
                continue;
            };
            if r.next.is_none() {
                r.prefilled = range.end;
            }
            let Some(logits) = batch.logits(*seq) else {
                continue;
            };
            let (history, n_ctx) = (batch.tokens(*seq), batch.n_ctx());
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                r.decoding.advance(logits, history, n_ctx)
            }));
            r.next = None;
            let request = r.id;
            // Events go straight to `out`: no list of its own per sequence and token.
            let mut emit = |event| out.push(Output { request, event });
            let ended = match outcome {
                Ok(Ok(Advance { token, stop })) => {
                    if let Some(t) = token {
                        self.stats.completion_tokens += 1;
                        if stop.is_none() {
                            r.next = Some(t.token.id);
                        }
                        emit(Event::Token {
                            token: t.token,
                            shown: t.shown,
                            logprob: t.logprob,
                        });
                    }
                    if let Some(reason) = stop {
                        emit(Event::Done(r.finished(reason)));
                    }
                    stop.is_some()
                }
                Ok(Err(e)) => {
                    emit(Event::Error(e));
                    true
                }
                Err(_) => {
                    batch.truncate(*seq, 0);
                    emit(Event::Error(ModelError::Engine(
                        "the engine failed while sampling (a bug): the request was abandoned"
                            .into(),
                    )));
                    true
                }
            };
            if ended {
                self.slots[*seq] = None;
            }
        }
        evaluated
    }
}

#[cfg(test)]
mod tests;
