//! The engine thread and its scheduler. One plain thread (never a thread of the async runtime)
//! owns a [`ParallelSession`] of `--parallel` sequences (slots) and runs continuous batching:
//! each step evaluates, in one forward pass, the next token of every slot that is generating
//! and as much of waiting prompts as the batch has room for, so a long prompt is taken in
//! chunks between the others' tokens and never stalls them for more than a step. A new job
//! takes the free slot whose cached tokens share the longest prefix with its prompt, so a
//! conversation's next turn evaluates only what is new. Jobs beyond the slots wait in order;
//! all of them, running and waiting, count against the bounded queue.

use std::collections::VecDeque;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use gguf_model::{
    Model, ModelError, ParallelSession, Sampler, SamplerConfig, SeqInput, Session, SessionOptions,
    StopText, ThreadPool,
};
use gguf_tokenizer::StreamDecoder;
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::error::ApiError;
use crate::metrics::Metrics;

/// A token's log-probability and the most likely alternatives, for `logprobs`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TokenLogprob {
    /// The token's text (its bytes, lossily as UTF-8).
    pub token: String,
    pub bytes: Vec<u8>,
    pub logprob: f32,
    /// The `top_logprobs` most likely tokens at that step, most likely first (ties: lower id
    /// first).
    pub top: Vec<(String, Vec<u8>, f32)>,
}

/// What a generation sends back, in order: text pieces, then `Done` or `Error`.
#[derive(Debug)]
pub(crate) enum Event {
    /// More text (never a partial character, never text that may begin a stop string), and
    /// with `logprobs` the tokens generated since the last event.
    Text {
        text: String,
        logprobs: Vec<TokenLogprob>,
    },
    /// The end: OpenAI's `finish_reason` and the token counts.
    Done {
        finish_reason: &'static str,
        prompt_tokens: usize,
        completion_tokens: usize,
    },
    /// The generation failed.
    Error(ApiError),
}

/// A generation to run.
pub(crate) struct GenerateJob {
    pub prompt: Vec<u32>,
    pub sampler: SamplerConfig,
    pub max_tokens: usize,
    pub stops: Vec<String>,
    /// `Some(k)`: report each token's log-probability and the `k` most likely alternatives.
    pub logprobs: Option<usize>,
    /// Closed when the client has gone: the generation then stops at the next token.
    pub events: mpsc::UnboundedSender<Event>,
}

/// Work for the engine thread.
pub(crate) enum Job {
    Generate(GenerateJob),
    /// Embeddings of tokenized inputs, one vector each.
    Embed {
        inputs: Vec<Vec<u32>>,
        reply: oneshot::Sender<Result<Vec<Vec<f32>>, ApiError>>,
    },
}

/// A queued job and its place in the count of admitted jobs (given back when dropped).
struct Queued {
    job: Job,
    permit: Permit,
}

struct Permit(Arc<AtomicUsize>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// How the engine runs.
#[derive(Debug, Clone)]
pub(crate) struct EngineConfig {
    /// The session's options; `n_ctx` is the total, divided among the slots.
    pub session: SessionOptions,
    /// Sequences generated at once.
    pub parallel: usize,
    /// Jobs admitted at once, running and waiting.
    pub limit: usize,
}

/// The handle of the engine thread.
pub(crate) struct Engine {
    tx: mpsc::Sender<Queued>,
    admitted: Arc<AtomicUsize>,
    limit: usize,
    shutdown: Arc<AtomicBool>,
    /// Held by the engine while it runs a step; tests hold it to keep the engine waiting.
    gate: Arc<Mutex<()>>,
    metrics: Arc<Metrics>,
}

impl Engine {
    /// Starts the thread for `model`. Returns the context length of each sequence.
    pub fn start(
        model: Arc<Model>,
        config: EngineConfig,
        metrics: Arc<Metrics>,
    ) -> Result<(Engine, usize), ModelError> {
        let limit = config.limit.max(1);
        let (tx, rx) = mpsc::channel::<Queued>(limit);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let shutdown = Arc::new(AtomicBool::new(false));
        let gate = Arc::new(Mutex::new(()));
        let (thread_shutdown, thread_gate, thread_metrics) =
            (shutdown.clone(), gate.clone(), metrics.clone());
        std::thread::Builder::new()
            .name("gguf-engine".into())
            .spawn(move || {
                let mut scheduler = match Scheduler::new(&model, &config, thread_metrics) {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(s.n_ctx));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                scheduler.run(rx, &thread_shutdown, &thread_gate);
            })
            .map_err(|e| ModelError::Request(format!("cannot start the engine thread: {e}")))?;
        let n_ctx = ready_rx.recv().map_err(|_| {
            ModelError::Request("the engine thread ended before its session was made".into())
        })??;
        Ok((
            Engine {
                tx,
                admitted: Arc::new(AtomicUsize::new(0)),
                limit,
                shutdown,
                gate,
                metrics,
            },
            n_ctx,
        ))
    }

    /// Queues `job`, or refuses it with 503 when `limit` jobs are already admitted.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        let admitted = self.admitted.fetch_add(1, Ordering::AcqRel);
        let permit = Permit(self.admitted.clone());
        if admitted >= self.limit || self.shutdown.load(Ordering::Acquire) {
            self.metrics.rejected.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::busy());
        }
        self.tx.try_send(Queued { job, permit }).map_err(|_| {
            self.metrics.rejected.fetch_add(1, Ordering::Relaxed);
            ApiError::busy()
        })
    }

    /// Jobs admitted (running and waiting).
    pub fn admitted(&self) -> usize {
        self.admitted.load(Ordering::Acquire)
    }

    /// Stops every generation at its next token (the server is shutting down).
    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::Release);
    }

    /// The lock the engine holds while it runs a step.
    pub fn gate(&self) -> &Arc<Mutex<()>> {
        &self.gate
    }
}

/// The most prompt tokens a step takes while some slot is generating (the batch size
/// otherwise): on SmolLM2 with 2 threads (955 prompt tokens/s, `docs/performance.md`) such a
/// step takes about 0.13 s.
const PROMPT_TOKENS_BESIDE_DECODING: usize = 128;

/// A generation in a slot.
struct Active<'m> {
    job: GenerateJob,
    /// Its place in the queue, given back before its last event is sent (so that a client
    /// that sends its next request on reading the answer finds the place free).
    permit: Option<Permit>,
    sampler: Sampler,
    decoder: StreamDecoder<'m>,
    text: StopText,
    /// Prompt tokens in the slot's cache.
    prefilled: usize,
    /// The sampled token to evaluate next (once the prompt is in).
    next: Option<u32>,
    completion_tokens: usize,
    logprobs: Vec<TokenLogprob>,
    /// A send failed: the client left while the step ran. (A channel closed after `Done` is
    /// not that, hence a flag rather than asking the channel.)
    gone: bool,
}

/// An embeddings request under way. Its inputs are embedded one per turn of the engine's
/// loop, between the generations' steps, so that neither waits for the other long, and it is
/// dropped at the next turn once its client has gone.
struct EmbedJob {
    inputs: Vec<Vec<u32>>,
    done: Vec<Vec<f32>>,
    reply: oneshot::Sender<Result<Vec<Vec<f32>>, ApiError>>,
    /// Its place in the queue, given back before the reply is sent.
    permit: Option<Permit>,
}

/// The engine's state: the slots' session and generations, and the jobs waiting for a slot.
struct Scheduler<'m> {
    model: &'m Model,
    /// `None` for an encoder (embeddings only).
    batch: Option<ParallelSession<'m>>,
    slots: Vec<Option<Active<'m>>>,
    waiting: VecDeque<(GenerateJob, Permit)>,
    /// Embeddings requests in order; the first is the one under way.
    embeds: VecDeque<EmbedJob>,
    /// The session embeddings are computed in, made on first use.
    embedder: Option<Session<'m>>,
    embed_options: SessionOptions,
    pool: Arc<ThreadPool>,
    n_ctx: usize,
    metrics: Arc<Metrics>,
}

impl<'m> Scheduler<'m> {
    fn new(
        model: &'m Model,
        config: &EngineConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Scheduler<'m>, ModelError> {
        let threads = gguf_model::session_threads(config.session.threads);
        let pool = Arc::new(ThreadPool::new(threads)?);
        let parallel = config.parallel.max(1);
        let (batch, embedder, n_ctx);
        let mut embed_options = config.session.clone();
        if model.hparams().causal {
            let b = model.parallel_session_on(config.session.clone(), parallel, pool.clone())?;
            n_ctx = b.n_ctx();
            batch = Some(b);
            embed_options.n_ctx = n_ctx;
            embedder = None;
        } else {
            let s = model.session_on(config.session.clone(), pool.clone())?;
            n_ctx = s.n_ctx();
            embedder = Some(s);
            batch = None;
        }
        metrics.slots.store(parallel, Ordering::Relaxed);
        Ok(Scheduler {
            model,
            batch,
            slots: (0..parallel).map(|_| None).collect(),
            waiting: VecDeque::new(),
            embeds: VecDeque::new(),
            embedder,
            embed_options,
            pool,
            n_ctx,
            metrics,
        })
    }

    /// Takes jobs and steps until the queue's sender is gone.
    fn run(
        &mut self,
        mut rx: mpsc::Receiver<Queued>,
        shutdown: &AtomicBool,
        gate: &Arc<Mutex<()>>,
    ) {
        loop {
            let busy = !self.waiting.is_empty()
                || !self.embeds.is_empty()
                || self.slots.iter().any(Option::is_some);
            let next = if busy {
                rx.try_recv().ok()
            } else {
                match rx.blocking_recv() {
                    Some(q) => Some(q),
                    None => return,
                }
            };
            if let Some(queued) = next {
                self.accept(queued);
                // Drain what else has arrived before stepping, so it joins this step.
                while let Ok(queued) = rx.try_recv() {
                    self.accept(queued);
                }
            }
            self.drop_gone(shutdown);
            self.assign_slots();
            self.publish();
            if !self.embeds.is_empty() {
                let _running = gate.blocking_lock();
                self.embed_step();
                self.publish();
            }
            if self.slots.iter().any(Option::is_some) {
                let _running = gate.blocking_lock();
                self.step();
                // The step may have ended generations: the gauges say so before the engine
                // waits for the next job.
                self.publish();
            }
        }
    }

    fn accept(&mut self, queued: Queued) {
        match queued.job {
            Job::Generate(job) => {
                self.metrics.requests.fetch_add(1, Ordering::Relaxed);
                self.waiting.push_back((job, queued.permit));
            }
            Job::Embed { inputs, reply } => {
                self.metrics.requests.fetch_add(1, Ordering::Relaxed);
                self.embeds.push_back(EmbedJob {
                    done: Vec::with_capacity(inputs.len()),
                    inputs,
                    reply,
                    permit: Some(queued.permit),
                });
            }
        }
    }

    /// Embeds the next input of the embeddings request under way, and replies once it has
    /// them all (or an error).
    fn embed_step(&mut self) {
        let Some(job) = self.embeds.front_mut() else {
            return;
        };
        let Some(ids) = job.inputs.get(job.done.len()) else {
            self.finish_embed(Ok(()));
            return;
        };
        let started = Instant::now();
        let (model, pool, options) = (self.model, &self.pool, &self.embed_options);
        let embedder = &mut self.embedder;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            if embedder.is_none() {
                *embedder = Some(
                    model
                        .session_on(options.clone(), pool.clone())
                        .map_err(model_error)?,
                );
            }
            let session = embedder.as_mut().expect("made above");
            session.embed_tokens(ids).map_err(model_error)
        }));
        self.metrics.step(started.elapsed(), ids.len());
        let result = match outcome {
            Ok(Ok(vector)) => {
                job.done.push(vector);
                if job.done.len() < job.inputs.len() {
                    return;
                }
                Ok(())
            }
            Ok(Err(e)) => Err(e),
            Err(_) => {
                self.embedder = None;
                Err(ApiError::internal(
                    "the engine failed while embedding (a bug): the request was abandoned",
                ))
            }
        };
        self.finish_embed(result);
    }

    /// Replies to the embeddings request under way and takes it off the queue.
    fn finish_embed(&mut self, result: Result<(), ApiError>) {
        let Some(mut job) = self.embeds.pop_front() else {
            return;
        };
        job.permit = None;
        let _ = job.reply.send(result.map(|()| job.done));
    }

    /// Ends the requests whose clients have gone, and all of them when the server is shutting
    /// down: a generation under way then ends as a cut reply does in llama-server (its text
    /// so far, `finish_reason` `length`, and for a stream `[DONE]`), so that its client can
    /// tell it from a lost connection; a request not started yet is answered 503.
    fn drop_gone(&mut self, shutdown: &AtomicBool) {
        let stopping = shutdown.load(Ordering::Acquire);
        for slot in &mut self.slots {
            let Some(a) = slot.as_mut() else {
                continue;
            };
            if a.job.events.is_closed() {
                *slot = None;
            } else if stopping {
                finish(a, "length");
                *slot = None;
            } else {
                continue;
            }
            self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
        }
        let before = self.waiting.len() + self.embeds.len();
        if stopping {
            for (job, permit) in self.waiting.drain(..) {
                drop(permit);
                let _ = job.events.send(Event::Error(ApiError::shutting_down()));
            }
            for mut job in self.embeds.drain(..) {
                job.permit = None;
                let _ = job.reply.send(Err(ApiError::shutting_down()));
            }
        }
        self.waiting.retain(|(job, _)| !job.events.is_closed());
        self.embeds.retain(|job| !job.reply.is_closed());
        let gone = before - self.waiting.len() - self.embeds.len();
        self.metrics.cancelled.fetch_add(gone, Ordering::Relaxed);
    }

    /// Gives waiting jobs the free slots, each the one whose cache shares the longest prefix
    /// with its prompt.
    fn assign_slots(&mut self) {
        let Some(batch) = self.batch.as_mut() else {
            // An encoder generates nothing (the handlers refuse it before queueing).
            for (job, permit) in self.waiting.drain(..) {
                drop(permit);
                let _ = job.events.send(Event::Error(ApiError::bad_request(
                    "this model makes embeddings, not text",
                )));
            }
            return;
        };
        while let Some(free) = self.slots.iter().position(Option::is_none) {
            let Some((job, permit)) = self.waiting.pop_front() else {
                break;
            };
            let shared = |seq: usize| {
                batch
                    .tokens(seq)
                    .iter()
                    .zip(&job.prompt)
                    .take_while(|(a, b)| a == b)
                    .count()
            };
            let seq = (free..self.slots.len())
                .filter(|&s| self.slots[s].is_none())
                .max_by_key(|&s| (shared(s), std::cmp::Reverse(s)))
                .unwrap_or(free);
            if let Err(e) = check_job(&job, batch) {
                drop(permit);
                let _ = job.events.send(Event::Error(e));
                continue;
            }
            // At least the last prompt token is evaluated, for its logits.
            let keep = shared(seq).min(job.prompt.len() - 1);
            batch.truncate(seq, keep);
            self.metrics
                .prompt_tokens
                .fetch_add(job.prompt.len(), Ordering::Relaxed);
            self.metrics
                .prompt_tokens_cached
                .fetch_add(keep, Ordering::Relaxed);
            let tokenizer = self.model.tokenizer();
            self.slots[seq] = Some(Active {
                sampler: Sampler::new(job.sampler.clone()),
                decoder: tokenizer.stream_decoder(false),
                text: StopText::new(&job.stops),
                prefilled: keep,
                next: None,
                completion_tokens: 0,
                logprobs: Vec::new(),
                gone: false,
                job,
                permit: Some(permit),
            });
        }
    }

    /// The gauges: generations waiting and in a slot; of the embeddings requests, the one
    /// under way is active and the rest wait.
    fn publish(&self) {
        let m = &self.metrics;
        let embedding = usize::from(!self.embeds.is_empty());
        m.waiting.store(
            self.waiting.len() + self.embeds.len() - embedding,
            Ordering::Relaxed,
        );
        let active = self.slots.iter().filter(|s| s.is_some()).count();
        m.active.store(active + embedding, Ordering::Relaxed);
    }

    /// One forward pass for every slot with work, then each slot's token.
    fn step(&mut self) {
        let Some(batch) = self.batch.as_mut() else {
            return;
        };
        // The slots' inputs: decoding slots first (one token each), then prompt chunks in
        // slot order while the batch has room.
        let mut budget = batch.n_batch();
        let mut plan: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        for (seq, slot) in self.slots.iter().enumerate() {
            if let Some(Active { next: Some(_), .. }) = slot {
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
            if let Some(a) = slot {
                if a.next.is_none() && a.prefilled < a.job.prompt.len() {
                    let n = (a.job.prompt.len() - a.prefilled).min(budget);
                    plan.push((seq, a.prefilled..a.prefilled + n));
                    budget -= n;
                }
            }
        }
        if plan.is_empty() {
            return;
        }
        let inputs: Vec<SeqInput<'_>> = plan
            .iter()
            .map(|(seq, range)| {
                let a = self.slots[*seq].as_ref().expect("planned slots are active");
                match &a.next {
                    Some(token) => SeqInput::new(*seq, std::slice::from_ref(token)),
                    None => SeqInput {
                        seq: *seq,
                        tokens: &a.job.prompt[range.clone()],
                        logits: range.end == a.job.prompt.len(),
                    },
                }
            })
            .collect();
        let started = Instant::now();
        let outcome = catch_unwind(AssertUnwindSafe(|| batch.step(&inputs)));
        let evaluated: usize = inputs.iter().map(|i| i.tokens.len()).sum();
        let failure = match outcome {
            Ok(Ok(())) => None,
            Ok(Err(e)) => Some(model_error(e)),
            Err(_) => Some(ApiError::internal(
                "the engine failed while generating (a bug): the request was abandoned",
            )),
        };
        self.metrics.step(started.elapsed(), evaluated);
        if let Some(error) = failure {
            for (seq, _) in &plan {
                if let Some(a) = self.slots[*seq].take() {
                    let Active { job, permit, .. } = a;
                    drop(permit);
                    let _ = job.events.send(Event::Error(error.clone()));
                }
                batch.truncate(*seq, 0);
            }
            return;
        }
        for (i, (seq, range)) in plan.iter().enumerate() {
            let Some(a) = self.slots[*seq].as_mut() else {
                continue;
            };
            if a.next.is_none() {
                a.prefilled = range.end;
            }
            let Some(logits) = batch.logits(i) else {
                continue;
            };
            let metrics = &self.metrics;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                sample(
                    self.model,
                    a,
                    logits,
                    batch.tokens(*seq),
                    batch.n_ctx(),
                    metrics,
                )
            }));
            let finished = match outcome {
                Ok(finished) => finished,
                Err(_) => {
                    a.permit = None;
                    let _ = a.job.events.send(Event::Error(ApiError::internal(
                        "the engine failed while sampling (a bug): the request was abandoned",
                    )));
                    batch.truncate(*seq, 0);
                    true
                }
            };
            if finished {
                if a.gone {
                    self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                }
                self.slots[*seq] = None;
            }
        }
    }
}

/// Refuses a job whose prompt cannot fit its slot (the handlers check the same against the
/// context; this is the engine's own guard).
fn check_job(job: &GenerateJob, batch: &ParallelSession<'_>) -> Result<(), ApiError> {
    if job.prompt.is_empty() {
        return Err(ApiError::bad_request("the prompt has no tokens"));
    }
    if job.prompt.len() > batch.n_ctx() {
        return Err(model_error(ModelError::ContextFull {
            needed: job.prompt.len(),
            n_ctx: batch.n_ctx(),
        }));
    }
    Ok(())
}

/// Picks the slot's next token from `logits` (after its cached `history`) and sends what it
/// releases; true when the generation has ended (its `Done` or error sent). The token is
/// counted in `metrics` before anything is sent, so a client reading `/metrics` on its answer
/// finds it there.
fn sample(
    model: &Model,
    a: &mut Active<'_>,
    logits: &[f32],
    history: &[u32],
    n_ctx: usize,
    metrics: &Metrics,
) -> bool {
    a.next = None;
    if logits.iter().any(|l| l.is_nan()) {
        let e = ModelError::NotANumber {
            position: history.len(),
        };
        a.permit = None;
        let _ = a.job.events.send(Event::Error(model_error(e)));
        return true;
    }
    let id = a.sampler.sample(logits, history);
    let tokenizer = model.tokenizer();
    if tokenizer.is_end_of_generation(id) {
        return finish(a, "stop");
    }
    a.completion_tokens += 1;
    metrics.completion_tokens.fetch_add(1, Ordering::Relaxed);
    if let Some(k) = a.job.logprobs {
        a.logprobs.push(token_logprob(model, logits, id, k));
    }
    let piece = a.decoder.push(id);
    let released = a.text.push(&piece).to_string();
    if a.text.stopped() {
        send_text(a, released);
        return finish(a, "stop");
    }
    if !send_text(a, released) {
        a.gone = true;
        return true;
    }
    if a.completion_tokens >= a.job.max_tokens || history.len() >= n_ctx {
        // At `max_tokens`, or the context is full: the token just sampled could not be
        // evaluated for another (llama.cpp stops there too).
        return finish(a, "length");
    }
    a.next = Some(id);
    false
}

/// Sends released text (and the tokens' log-probabilities); false once the client has gone.
fn send_text(a: &mut Active<'_>, text: String) -> bool {
    if text.is_empty() && a.logprobs.is_empty() {
        return true;
    }
    let logprobs = std::mem::take(&mut a.logprobs);
    a.job.events.send(Event::Text { text, logprobs }).is_ok()
}

/// Sends the text held back (none after a stop string) and `Done`.
fn finish(a: &mut Active<'_>, finish_reason: &'static str) -> bool {
    let rest = a.text.finish().to_string();
    send_text(a, rest);
    a.permit = None;
    let _ = a.job.events.send(Event::Done {
        finish_reason,
        prompt_tokens: a.job.prompt.len(),
        completion_tokens: a.completion_tokens,
    });
    true
}

/// The log-probability of `id` under `logits` (softmax of the raw logits, before any
/// sampling setting, as OpenAI reports them) and the `k` most likely tokens'.
fn token_logprob(model: &Model, logits: &[f32], id: u32, k: usize) -> TokenLogprob {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
    let log_sum = sum.ln() as f32;
    let logprob = |t: usize| logits[t] - max - log_sum;
    let piece = |t: u32| {
        let bytes = model.tokenizer().token_to_piece(t, false);
        (String::from_utf8_lossy(&bytes).into_owned(), bytes)
    };
    // The k best (logit descending, then id ascending) in one pass over the logits, kept in a
    // sorted list of at most k: no allocation of the vocabulary's size per token.
    let mut top: Vec<usize> = Vec::with_capacity(k + 1);
    for (t, &l) in logits.iter().enumerate() {
        if top.len() == k && top.last().is_none_or(|&w| l <= logits[w]) {
            continue;
        }
        let at = top.partition_point(|&o| logits[o] >= l);
        top.insert(at, t);
        top.truncate(k);
    }
    let (token, bytes) = piece(id);
    TokenLogprob {
        token,
        bytes,
        logprob: logprob(id as usize),
        top: top
            .into_iter()
            .map(|t| {
                let (text, bytes) = piece(t as u32);
                (text, bytes, logprob(t))
            })
            .collect(),
    }
}

/// An engine error as the client sees it: the request's fault (400) or the server's (500).
pub(crate) fn model_error(e: ModelError) -> ApiError {
    match e {
        ModelError::ContextFull { .. } => {
            let mut err = ApiError::bad_request(e.to_string());
            err.code = Some("context_length_exceeded");
            err
        }
        ModelError::Request(m) => ApiError::bad_request(m),
        e => ApiError::internal(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn events(rx: &mut mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    fn job(prompt: &[u32], max_tokens: usize) -> (Queued, mpsc::UnboundedReceiver<Event>) {
        let (events, rx) = mpsc::unbounded_channel();
        let job = GenerateJob {
            prompt: prompt.to_vec(),
            sampler: SamplerConfig::greedy(),
            max_tokens,
            stops: Vec::new(),
            logprobs: Some(2),
            events,
        };
        let permit = Permit(Arc::new(AtomicUsize::new(1)));
        (
            Queued {
                job: Job::Generate(job),
                permit,
            },
            rx,
        )
    }

    fn text_of(events: &[Event]) -> String {
        events
            .iter()
            .filter_map(|e| match e {
                Event::Text { text, .. } => Some(text.as_str()),
                _ => None,
            })
            .collect()
    }

    /// The top log-probabilities: the k best by logit, ties to the lower id, each the log of
    /// its softmax share; none for k = 0; all of them for k past the vocabulary.
    #[test]
    fn top_logprobs_are_the_best_logits_ties_to_the_lower_id() {
        let model = Model::load(gguf_test_support::fixture("model-llama.gguf")).unwrap();
        let n = model.hparams().n_vocab;
        let mut logits = vec![0.0f32; n];
        for (t, l) in [(7, 3.0), (2, 5.0), (9, 5.0), (4, 1.0)] {
            logits[t] = l;
        }
        let ids = |l: &TokenLogprob| -> Vec<f32> { l.top.iter().map(|t| t.2).collect() };
        let got = token_logprob(&model, &logits, 9, 3);
        let total: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
        let lp = |l: f32| (f64::from(l) - total.ln()) as f32;
        assert!((got.logprob - lp(5.0)).abs() < 1e-6);
        let expected = [2, 9, 7].map(|t| model.tokenizer().token_to_piece(t, false));
        let pieces: Vec<Vec<u8>> = got.top.iter().map(|t| t.1.clone()).collect();
        assert_eq!(pieces, expected);
        for (got, want) in ids(&got).iter().zip([5.0, 5.0, 3.0]) {
            assert!((got - lp(want)).abs() < 1e-6);
        }
        assert!(token_logprob(&model, &logits, 9, 0).top.is_empty());
        // Past the four raised logits, the zeros in id order.
        let five = token_logprob(&model, &logits, 9, 5);
        assert_eq!(five.top[4].1, model.tokenizer().token_to_piece(0, false));
        assert_eq!(token_logprob(&model, &logits, 9, n + 3).top.len(), n);
    }

    /// Two jobs in two slots, stepped together, each generate what a lone `Session` generates;
    /// a third waits for a slot and takes the one whose cache holds its prompt's prefix; a job
    /// whose client has gone is dropped at the next step.
    #[test]
    fn slots_generate_together_reuse_prefixes_and_drop_gone_clients() {
        let model = Model::load(gguf_test_support::fixture("model-llama.gguf")).unwrap();
        let config = EngineConfig {
            session: SessionOptions {
                n_ctx: 256,
                threads: 1,
                ..SessionOptions::default()
            },
            parallel: 2,
            limit: 8,
        };
        let metrics = Arc::new(Metrics::default());
        let mut s = Scheduler::new(&model, &config, metrics.clone()).unwrap();
        assert_eq!(s.n_ctx, 128);
        let encode = |t: &str| model.tokenizer().encode(t.as_bytes(), true, true);
        let (a, b) = (encode("Once upon a time"), encode("The cat sat"));
        // What a lone session generates, greedy, for `max_tokens` tokens.
        let alone = |prompt: &[u32], max_tokens: usize| {
            let options = SessionOptions {
                n_ctx: 128,
                threads: 1,
                ..SessionOptions::default()
            };
            let mut session = model.session(options).unwrap();
            let mut g = session
                .generate_from(prompt, &SamplerConfig::greedy(), max_tokens)
                .unwrap();
            for t in &mut g {
                t.unwrap();
            }
            g.text().to_string()
        };
        let shutdown = AtomicBool::new(false);
        let (qa, mut ra) = job(&a, 12);
        let (qb, mut rb) = job(&b, 12);
        s.accept(qa);
        s.accept(qb);
        s.assign_slots();
        while s.slots.iter().any(Option::is_some) {
            s.drop_gone(&shutdown);
            s.step();
        }
        let (ea, eb) = (events(&mut ra), events(&mut rb));
        assert_eq!(text_of(&ea), alone(&a, 12));
        assert_eq!(text_of(&eb), alone(&b, 12));
        for e in [&ea, &eb] {
            let logprobs: Vec<&TokenLogprob> = e
                .iter()
                .flat_map(|e| match e {
                    Event::Text { logprobs, .. } => logprobs.iter().collect(),
                    _ => Vec::new(),
                })
                .collect();
            let Some(Event::Done {
                completion_tokens, ..
            }) = e.last()
            else {
                panic!("{e:?}")
            };
            assert_eq!(logprobs.len(), *completion_tokens);
            for l in logprobs {
                // Greedy: the token is the most likely one, listed first.
                assert_eq!(l.top.len(), 2);
                assert_eq!(l.top[0].2, l.logprob);
                assert!(l.logprob <= 0.0 && l.top[1].2 <= l.logprob);
            }
        }
        // Both slots hold their conversations; a prompt continuing `b` takes `b`'s slot.
        let seq_b = (0..2)
            .find(|&q| s.batch.as_ref().unwrap().tokens(q).starts_with(&b))
            .unwrap();
        let mut longer = b.clone();
        longer.extend(encode(" on the mat").iter().skip(1));
        let (qc, mut rc) = job(&longer, 4);
        let cached_before = metrics.prompt_tokens_cached.load(Ordering::Relaxed);
        s.accept(qc);
        s.assign_slots();
        assert!(s.slots[seq_b].is_some());
        assert_eq!(
            metrics.prompt_tokens_cached.load(Ordering::Relaxed) - cached_before,
            b.len()
        );
        while s.slots.iter().any(Option::is_some) {
            s.step();
        }
        assert_eq!(text_of(&events(&mut rc)), alone(&longer, 4));
        // A client gone after two steps: dropped, no `Done`, counted as cancelled.
        let (qd, rd) = job(&a, 50);
        s.accept(qd);
        s.assign_slots();
        s.step();
        s.step();
        drop(rd);
        s.drop_gone(&shutdown);
        assert!(s.slots.iter().all(Option::is_none));
        assert_eq!(metrics.cancelled.load(Ordering::Relaxed), 1);
    }
}
