//! The engine thread: one [`Session`] owned by one plain thread (never a thread of the async
//! runtime), taking jobs one at a time from a bounded queue. Its KV cache carries over from job
//! to job, so a prompt that starts with the previous one's tokens (a conversation going on)
//! evaluates only what is new.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use gguf_model::{Model, ModelError, SamplerConfig, Session, SessionOptions, StopReason};
use tokio::sync::{mpsc, oneshot, Mutex};

use crate::error::ApiError;

/// What a generation sends back, in order: text pieces, then `Done` or `Error`.
#[derive(Debug)]
pub(crate) enum Event {
    /// More text (never a partial character, never text that may begin a stop string).
    Text(String),
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
    _permit: Permit,
}

struct Permit(Arc<AtomicUsize>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The handle of the engine thread.
pub(crate) struct Engine {
    tx: mpsc::Sender<Queued>,
    admitted: Arc<AtomicUsize>,
    limit: usize,
    shutdown: Arc<AtomicBool>,
    /// Held by the engine while it runs a job; tests hold it to keep the engine waiting.
    gate: Arc<Mutex<()>>,
}

impl Engine {
    /// Starts the thread with a session of `options` on `model`; `limit` jobs at most are
    /// admitted at once (running and waiting). Returns the session's context length.
    pub fn start(
        model: Arc<Model>,
        options: SessionOptions,
        limit: usize,
    ) -> Result<(Engine, usize), ModelError> {
        let limit = limit.max(1);
        let (tx, mut rx) = mpsc::channel::<Queued>(limit);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let shutdown = Arc::new(AtomicBool::new(false));
        let gate = Arc::new(Mutex::new(()));
        let (thread_shutdown, thread_gate) = (shutdown.clone(), gate.clone());
        std::thread::Builder::new()
            .name("gguf-engine".into())
            .spawn(move || {
                let mut session = match model.session(options) {
                    Ok(s) => {
                        let _ = ready_tx.send(Ok(s.n_ctx()));
                        s
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                while let Some(queued) = rx.blocking_recv() {
                    let _running = thread_gate.blocking_lock();
                    run(&mut session, queued.job, &thread_shutdown);
                }
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
            },
            n_ctx,
        ))
    }

    /// Queues `job`, or refuses it with 503 when `limit` jobs are already admitted.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        let admitted = self.admitted.fetch_add(1, Ordering::AcqRel);
        let permit = Permit(self.admitted.clone());
        if admitted >= self.limit || self.shutdown.load(Ordering::Acquire) {
            return Err(ApiError::busy());
        }
        self.tx
            .try_send(Queued {
                job,
                _permit: permit,
            })
            .map_err(|_| ApiError::busy())
    }

    /// Stops every generation at its next token (the server is shutting down).
    pub fn shut_down(&self) {
        self.shutdown.store(true, Ordering::Release);
    }

    /// The lock the engine holds while it runs a job.
    pub fn gate(&self) -> &Arc<Mutex<()>> {
        &self.gate
    }
}

/// Runs one job; a panic in the engine becomes a 500 for this job and a cleared cache, never
/// the end of the thread.
fn run(session: &mut Session<'_>, job: Job, shutdown: &AtomicBool) {
    match job {
        Job::Generate(job) => {
            let events = job.events.clone();
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                // The client has gone (or the server is stopping): no more tokens.
                let stop = || events.is_closed() || shutdown.load(Ordering::Acquire);
                generate(session, job, stop)
            }));
            if outcome.is_err() {
                session.clear();
                let _ = events.send(Event::Error(ApiError::internal(
                    "the engine failed while generating (a bug): the request was abandoned",
                )));
            }
        }
        Job::Embed { inputs, reply } => {
            if reply.is_closed() {
                return;
            }
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                inputs
                    .iter()
                    .map(|ids| session.embed_tokens(ids).map_err(model_error))
                    .collect::<Result<Vec<_>, _>>()
            }));
            let result = outcome.unwrap_or_else(|_| {
                session.clear();
                Err(ApiError::internal(
                    "the engine failed while embedding (a bug): the request was abandoned",
                ))
            });
            let _ = reply.send(result);
        }
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

/// Runs a generation, sending its events; `stop` is asked before it starts and after each
/// token whether to abandon it (then no `Done` is sent).
fn generate(session: &mut Session<'_>, job: GenerateJob, mut stop: impl FnMut() -> bool) {
    let GenerateJob {
        prompt,
        sampler,
        max_tokens,
        stops,
        events,
    } = job;
    if stop() {
        return;
    }
    let mut generation = match session.generate_from(&prompt, &sampler, max_tokens) {
        Ok(g) => g,
        Err(e) => {
            let _ = events.send(Event::Error(model_error(e)));
            return;
        }
    };
    let mut text = String::new();
    // Bytes of `text` sent; what follows may still turn out to begin a stop string.
    let mut sent = 0;
    let mut completion_tokens = 0;
    let mut stopped_by_string = false;
    for token in &mut generation {
        let token = match token {
            Ok(t) => t,
            Err(e) => {
                let _ = events.send(Event::Error(model_error(e)));
                return;
            }
        };
        completion_tokens += 1;
        text.push_str(&token.text);
        if let Some(at) = find_stop(&text[sent..], &stops) {
            send_text(&events, &text[sent..sent + at]);
            stopped_by_string = true;
            break;
        }
        let upto = text.len() - held_back(&text[sent..], &stops);
        if upto > sent {
            if !send_text(&events, &text[sent..upto]) {
                return;
            }
            sent = upto;
        }
        if stop() {
            return;
        }
    }
    let finish_reason = if stopped_by_string {
        "stop"
    } else {
        send_text(&events, &text[sent..]);
        match generation.stop_reason() {
            Some(StopReason::MaxTokens | StopReason::ContextFull) => "length",
            _ => "stop",
        }
    };
    let _ = events.send(Event::Done {
        finish_reason,
        prompt_tokens: prompt.len(),
        completion_tokens,
    });
}

/// Sends non-empty text; false once the client has gone.
fn send_text(events: &mpsc::UnboundedSender<Event>, text: &str) -> bool {
    text.is_empty() || events.send(Event::Text(text.to_string())).is_ok()
}

/// Where the first stop string starts in `text`, if one is there whole.
fn find_stop(text: &str, stops: &[String]) -> Option<usize> {
    stops.iter().filter_map(|s| text.find(s.as_str())).min()
}

/// Bytes at the end of `text` that begin some stop string (held back until it is known whether
/// the stop string follows). A stop string's first byte begins a character, so the text before
/// them ends on a character boundary.
fn held_back(text: &str, stops: &[String]) -> usize {
    let bytes = text.as_bytes();
    stops
        .iter()
        .map(|s| {
            let s = s.as_bytes();
            (1..s.len().min(bytes.len() + 1))
                .rev()
                .find(|&n| bytes.ends_with(&s[..n]))
                .unwrap_or(0)
        })
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stop_strings_are_found_and_held_back() {
        let stops = vec!["END".to_string(), "\n\n".to_string()];
        assert_eq!(find_stop("abc END x", &stops), Some(4));
        assert_eq!(find_stop("a\n\nEND", &stops), Some(1));
        assert_eq!(find_stop("abc", &stops), None);
        assert_eq!(held_back("abcEN", &stops), 2);
        assert_eq!(held_back("abc\n", &stops), 1);
        assert_eq!(held_back("abc", &stops), 0);
        assert_eq!(held_back("", &stops), 0);
        assert_eq!(held_back("E", &stops), 1);
        assert_eq!(held_back("é", &["éa".to_string()]), 2);
    }

    fn job(prompt: Vec<u32>) -> (GenerateJob, mpsc::UnboundedReceiver<Event>) {
        let (events, rx) = mpsc::unbounded_channel();
        let job = GenerateJob {
            prompt,
            sampler: SamplerConfig::greedy(),
            max_tokens: 50,
            stops: Vec::new(),
            events,
        };
        (job, rx)
    }

    fn events(rx: &mut mpsc::UnboundedReceiver<Event>) -> Vec<Event> {
        std::iter::from_fn(|| rx.try_recv().ok()).collect()
    }

    #[test]
    fn an_abandoned_generation_stops_at_the_next_token() {
        let model = Model::load(gguf_test_support::fixture("model-llama.gguf")).unwrap();
        let options = SessionOptions {
            n_ctx: 128,
            threads: 1,
            ..SessionOptions::default()
        };
        let mut session = model.session(options).unwrap();
        let prompt = model.tokenizer().encode(b"Once upon a time", true, true);

        // Abandoned before it starts: nothing is computed.
        let (j, mut rx) = job(prompt.clone());
        generate(&mut session, j, || true);
        assert!(session.tokens().is_empty());
        assert!(events(&mut rx).is_empty());

        // Abandoned after 3 tokens: the third is not evaluated, no `Done`.
        let (j, mut rx) = job(prompt.clone());
        let mut asked = 0;
        generate(&mut session, j, || {
            asked += 1;
            asked > 3
        });
        assert_eq!(session.tokens().len(), prompt.len() + 2);
        let got = events(&mut rx);
        assert!(got.iter().all(|e| matches!(e, Event::Text(_))), "{got:?}");

        // Run to the end: `Done` with the counts.
        let (j, mut rx) = job(prompt.clone());
        generate(&mut session, j, || false);
        match events(&mut rx).last() {
            Some(Event::Done {
                finish_reason,
                prompt_tokens,
                completion_tokens,
            }) => {
                assert_eq!(*prompt_tokens, prompt.len());
                assert!(*completion_tokens <= 50);
                if *completion_tokens == 50 {
                    assert_eq!(*finish_reason, "length");
                }
            }
            other => panic!("{other:?}"),
        }
    }
}
