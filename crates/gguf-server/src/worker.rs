//! The engine thread. One plain thread (never a thread of the async runtime) owns the model's
//! [`Batcher`] (gguf-model's continuous batching of `--parallel` slots) and runs it: this
//! module only moves requests in from the handlers, events out to them, and ends the requests
//! whose clients have gone. All of them, running and waiting, count against the bounded queue.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use gguf_model::{
    Batcher, EmbeddingOptions, Embeddings, Event as BatchEvent, Finished, GenerateRequest, Model,
    ModelError, Output, RequestId, SessionOptions, StopReason, TokenLogprob,
};
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::error::ApiError;
use crate::metrics::Metrics;

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
    pub request: GenerateRequest,
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
    step_lock: Arc<Mutex<()>>,
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
        let step_lock = Arc::new(Mutex::new(()));
        let (thread_shutdown, thread_lock, thread_metrics) =
            (shutdown.clone(), step_lock.clone(), metrics.clone());
        std::thread::Builder::new()
            .name("gguf-engine".into())
            .spawn(move || {
                let parallel = config.parallel.max(1);
                let batcher = match model.batcher(config.session.clone(), parallel) {
                    Ok(b) => {
                        let _ = ready_tx.send(Ok(b.n_ctx()));
                        b
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                thread_metrics.slots.store(parallel, Ordering::Relaxed);
                let mut engine = EngineLoop {
                    batcher,
                    routes: HashMap::new(),
                    metrics: thread_metrics,
                };
                engine.run(rx, &thread_shutdown, &thread_lock);
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
                step_lock,
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
    pub fn step_lock(&self) -> &Arc<Mutex<()>> {
        &self.step_lock
    }
}

/// Where a request's events go, and its place in the queue (given back before its last event
/// is sent, so that a client that sends its next request on reading the answer finds the
/// place free).
enum Route {
    Generate {
        events: mpsc::UnboundedSender<Event>,
        permit: Permit,
    },
    Embed {
        reply: oneshot::Sender<Result<Vec<Vec<f32>>, ApiError>>,
        permit: Permit,
    },
}

impl Route {
    fn is_closed(&self) -> bool {
        match self {
            Route::Generate { events, .. } => events.is_closed(),
            Route::Embed { reply, .. } => reply.is_closed(),
        }
    }
}

/// The engine thread's state: the batcher and where each of its requests' events go.
struct EngineLoop<'m> {
    batcher: Batcher<'m>,
    routes: HashMap<RequestId, Route>,
    metrics: Arc<Metrics>,
}

impl EngineLoop<'_> {
    /// Takes jobs and steps until the queue's sender is gone.
    fn run(
        &mut self,
        mut rx: mpsc::Receiver<Queued>,
        shutdown: &AtomicBool,
        step_lock: &Arc<Mutex<()>>,
    ) {
        loop {
            let next = if self.batcher.is_idle() {
                match rx.blocking_recv() {
                    Some(q) => Some(q),
                    None => return,
                }
            } else {
                rx.try_recv().ok()
            };
            if let Some(queued) = next {
                self.accept(queued);
                // Take what else has arrived before stepping, so it joins this step.
                while let Ok(queued) = rx.try_recv() {
                    self.accept(queued);
                }
            }
            self.drop_gone(shutdown);
            self.publish();
            if !self.batcher.is_idle() {
                let _running = step_lock.blocking_lock();
                let outputs = self.batcher.step();
                // Counted before anything is sent, so that a client reading `/metrics` on its
                // answer finds its tokens there.
                self.metrics.record(&self.batcher.stats());
                self.deliver(outputs);
                // The step may have ended requests: the gauges say so before the engine waits
                // for the next job.
                self.publish();
            }
        }
    }

    fn accept(&mut self, queued: Queued) {
        let Queued { job, permit } = queued;
        self.metrics.requests.fetch_add(1, Ordering::Relaxed);
        match job {
            Job::Generate(GenerateJob { request, events }) => match self.batcher.submit(request) {
                Ok(id) => {
                    self.routes.insert(id, Route::Generate { events, permit });
                }
                Err(e) => {
                    drop(permit);
                    let _ = events.send(Event::Error(model_error(e)));
                }
            },
            Job::Embed { inputs, reply } => {
                let id = self
                    .batcher
                    .submit_embeddings(inputs, EmbeddingOptions::default());
                self.routes.insert(id, Route::Embed { reply, permit });
            }
        }
    }

    /// Ends the requests whose clients have gone, and all of them when the server is shutting
    /// down: a generation under way then ends as a cut reply does in llama-server (its text
    /// so far, `finish_reason` `length`, and for a stream `[DONE]`), so that its client can
    /// tell it from a lost connection; a request not started yet is answered 503.
    fn drop_gone(&mut self, shutdown: &AtomicBool) {
        if shutdown.load(Ordering::Acquire) {
            for (id, finished) in self.batcher.cancel_all() {
                let Some(route) = self.routes.remove(&id) else {
                    continue;
                };
                self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
                match (route, finished) {
                    (Route::Generate { events, permit }, Some(end)) => {
                        finish(&events, permit, end);
                    }
                    (Route::Generate { events, permit }, None) => {
                        drop(permit);
                        let _ = events.send(Event::Error(ApiError::shutting_down()));
                    }
                    (Route::Embed { reply, permit }, _) => {
                        drop(permit);
                        let _ = reply.send(Err(ApiError::shutting_down()));
                    }
                }
            }
            return;
        }
        let gone: Vec<RequestId> = self
            .routes
            .iter()
            .filter(|(_, route)| route.is_closed())
            .map(|(&id, _)| id)
            .collect();
        self.cancel(&gone);
    }

    /// Cancels requests whose clients have gone.
    fn cancel(&mut self, gone: &[RequestId]) {
        for id in gone {
            self.batcher.cancel(*id);
            self.routes.remove(id);
            self.metrics.cancelled.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The gauges: requests waiting, and running.
    fn publish(&self) {
        let m = &self.metrics;
        m.waiting.store(self.batcher.waiting(), Ordering::Relaxed);
        m.active.store(self.batcher.running(), Ordering::Relaxed);
    }

    /// Sends a step's events to their clients; those that have gone are cancelled.
    fn deliver(&mut self, outputs: Vec<Output>) {
        let mut gone = Vec::new();
        for Output { request, event } in outputs {
            match event {
                BatchEvent::Token { shown, logprob, .. } => {
                    let Some(Route::Generate { events, .. }) = self.routes.get(&request) else {
                        continue;
                    };
                    if !send_text(events, shown, logprob.into_iter().collect()) {
                        gone.push(request);
                    }
                }
                BatchEvent::Done(end) => {
                    if let Some(Route::Generate { events, permit }) = self.routes.remove(&request) {
                        finish(&events, permit, end);
                    }
                }
                BatchEvent::Embeddings(vectors) => {
                    if let Some(Route::Embed { reply, permit }) = self.routes.remove(&request) {
                        drop(permit);
                        let vectors = vectors.into_iter().map(Embeddings::into_flat).collect();
                        let _ = reply.send(Ok(vectors));
                    }
                }
                BatchEvent::Error(e) => match self.routes.remove(&request) {
                    Some(Route::Generate { events, permit }) => {
                        drop(permit);
                        let _ = events.send(Event::Error(model_error(e)));
                    }
                    Some(Route::Embed { reply, permit }) => {
                        drop(permit);
                        let _ = reply.send(Err(model_error(e)));
                    }
                    None => {}
                },
            }
        }
        self.cancel(&gone);
    }
}

/// Sends released text and the tokens' log-probabilities (nothing when both are empty); false
/// once the client has gone.
fn send_text(
    events: &mpsc::UnboundedSender<Event>,
    text: String,
    logprobs: Vec<TokenLogprob>,
) -> bool {
    if text.is_empty() && logprobs.is_empty() {
        return true;
    }
    events.send(Event::Text { text, logprobs }).is_ok()
}

/// Sends the text held back (none after a stop string) and `Done`, giving the queue place back
/// first.
fn finish(events: &mpsc::UnboundedSender<Event>, permit: Permit, end: Finished) {
    send_text(events, end.tail, Vec::new());
    drop(permit);
    let _ = events.send(Event::Done {
        finish_reason: finish_reason(end.reason),
        prompt_tokens: end.prompt_tokens,
        completion_tokens: end.completion_tokens,
    });
}

/// OpenAI's `finish_reason` for why a generation ended: `stop` at an end-of-generation token
/// or a stop string, `length` when cut (its token limit, the context's end, or the server
/// stopping).
fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::EndOfGeneration | StopReason::StopString | StopReason::Error => "stop",
        StopReason::MaxTokens | StopReason::ContextFull | StopReason::Cancelled => "length",
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
        ModelError::EmptyPrompt => ApiError::bad_request(e.to_string()),
        e => ApiError::internal(e.to_string()),
    }
}
