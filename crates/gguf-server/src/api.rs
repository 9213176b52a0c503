//! The handlers: each reads its body, checks every field, hands the work to the engine and
//! answers in OpenAI's (or llama-server's) shape.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::BytesRejection;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode, Uri};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gguf_model::{GenerateRequest, ModelError, TokenLogprob};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};

use crate::error::ApiError;
use crate::openai::request::{
    self, ChatRequest, CompletionRequest, DetokenizeRequest, EmbeddingRequest, GenerationParams,
    TokenizeRequest,
};
use crate::openai::response::{
    AssistantMessage, ChatChoice, ChatChunkChoice, Completion, Delta, Detokenized, EmbeddingData,
    EmbeddingList, EmbeddingUsage, Health, Logprobs, ModelCard, ModelList, TextChoice, Tokens,
    Usage, Vector, Widened,
};
use crate::worker::{Event, GenerateJob, Job};
use crate::Shared;

type AppState = State<Arc<Shared>>;

/// `body` as JSON, answered 200 (500 in the impossible case that it cannot be written).
fn ok(body: &impl Serialize) -> Response {
    match serde_json::to_string(body) {
        Ok(text) => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            text,
        )
            .into_response(),
        Err(e) => {
            ApiError::internal(format!("the response could not be written: {e}")).into_response()
        }
    }
}

/// The body (read whole, within its limits, by [`read_body_in_time`]) as the request `T`: a
/// UTF-8 JSON object with no field `T` does not have (400 otherwise; its fields are checked
/// by `T`'s own `check`).
fn read_request<T: DeserializeOwned>(body: Result<Bytes, BytesRejection>) -> Result<T, ApiError> {
    let body = body.map_err(|rejection| {
        ApiError::bad_request(format!("the request body could not be read: {rejection}"))
    })?;
    request::parse(&body)
}

/// Checks the bearer key when keys are set; `/health` needs none.
pub(crate) async fn authenticate(
    State(shared): AppState,
    request: Request,
    next: Next,
) -> Response {
    if shared.api_keys.is_empty() || request.uri().path() == "/health" {
        return next.run(request).await;
    }
    // The scheme is case-insensitive (RFC 7235): `bearer KEY` is `Bearer KEY`.
    let given = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim_start().split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, key)| key.trim());
    let known = given.is_some_and(|given| {
        shared
            .api_keys
            .iter()
            .any(|key| constant_time_eq(key.as_bytes(), given.as_bytes()))
    });
    if known {
        next.run(request).await
    } else {
        ApiError::unauthorized().into_response()
    }
}

/// Reads the whole body within the body timeout (else 408) and up to the body limit
/// (else 413), so that no handler waits on a client that sends its body slowly or never.
pub(crate) async fn read_body_in_time(
    State(shared): AppState,
    request: Request,
    next: Next,
) -> Response {
    // A body announced longer than the limit is refused at once: before any of it is read,
    // and so before `Expect: 100-continue` is answered (hyper sends `100 Continue` only when
    // the body is first read).
    let announced = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|n| n > shared.max_body_bytes as u64) {
        return ApiError::too_large(shared.max_body_bytes).into_response();
    }
    let (parts, body) = request.into_parts();
    let read = axum::body::to_bytes(body, shared.max_body_bytes);
    let bytes = match tokio::time::timeout(shared.body_timeout, read).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) => {
            let too_large = std::error::Error::source(&e)
                .is_some_and(|s| s.is::<http_body_util::LengthLimitError>());
            return if too_large {
                ApiError::too_large(shared.max_body_bytes).into_response()
            } else {
                ApiError::bad_request(format!("the request body could not be read: {e}"))
                    .into_response()
            };
        }
        Err(_) => return ApiError::body_timeout(shared.body_timeout).into_response(),
    };
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

/// Compares without stopping at the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) async fn not_found(method: Method, uri: Uri) -> Response {
    ApiError::not_found(method.as_str(), uri.path()).into_response()
}

pub(crate) async fn method_not_allowed(method: Method, uri: Uri) -> Response {
    ApiError::method_not_allowed(method.as_str(), uri.path()).into_response()
}

pub(crate) async fn health() -> Response {
    ok(&Health { status: "ok" })
}

/// Prometheus' text exposition of the engine's counters.
pub(crate) async fn metrics(State(shared): AppState) -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        shared.metrics.render(shared.engine.admitted()),
    )
        .into_response()
}

pub(crate) async fn models(State(shared): AppState) -> Response {
    ok(&ModelList {
        object: "list",
        data: vec![ModelCard {
            id: &shared.model_id,
            object: "model",
            created: shared.started,
            owned_by: "gguf",
        }],
    })
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A response id: `prefix-` and a number unique within this process.
fn response_id(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{prefix}-{:x}{:06x}",
        now(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Chat or text completion: what differs between their responses.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Chat,
    Text,
}

/// What every response of one request shares.
struct Meta {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
}

impl Meta {
    fn new(kind: Kind, model: &str) -> Meta {
        Meta {
            kind,
            id: response_id(match kind {
                Kind::Chat => "chatcmpl",
                Kind::Text => "cmpl",
            }),
            created: now(),
            model: model.to_string(),
        }
    }

    /// The response around `choices`: whole (`object` `chat.completion`, `text_completion`)
    /// or a chunk of a stream.
    fn completion<C>(
        &self,
        chunk: bool,
        choices: Vec<C>,
        usage: Option<Usage>,
    ) -> Completion<'_, C> {
        Completion {
            id: &self.id,
            object: match (self.kind, chunk) {
                (Kind::Chat, false) => "chat.completion",
                (Kind::Chat, true) => "chat.completion.chunk",
                (Kind::Text, _) => "text_completion",
            },
            created: self.created,
            model: &self.model,
            choices,
            usage,
        }
    }

    /// The `logprobs` of a choice: `None` (`null`) unless asked for; chat's
    /// `{"content": [...]}` or the text completion's `{"tokens", "token_logprobs",
    /// "top_logprobs", "text_offset"}`.
    fn logprobs<'a>(&self, asked: bool, tokens: &'a [TokenLogprob]) -> Option<Logprobs<'a>> {
        if !asked {
            return None;
        }
        Some(match self.kind {
            Kind::Chat => Logprobs::chat(tokens),
            Kind::Text => Logprobs::text(tokens),
        })
    }

    /// The whole response.
    fn complete(
        &self,
        text: &str,
        finish: &'static str,
        usage: Usage,
        logprobs: Option<Logprobs<'_>>,
    ) -> Response {
        match self.kind {
            Kind::Chat => ok(&self.completion(
                false,
                vec![ChatChoice {
                    index: 0,
                    message: AssistantMessage {
                        role: "assistant",
                        content: text,
                    },
                    logprobs,
                    finish_reason: finish,
                }],
                Some(usage),
            )),
            Kind::Text => ok(&self.completion(
                false,
                vec![TextChoice {
                    index: 0,
                    text,
                    logprobs,
                    finish_reason: Some(finish),
                }],
                Some(usage),
            )),
        }
    }

    /// One streamed chunk: `delta` text (chat: with the role on the first chunk), or the
    /// finish reason.
    fn chunk(
        &self,
        text: Option<&str>,
        role: bool,
        finish: Option<&'static str>,
        logprobs: Option<Logprobs<'_>>,
    ) -> Bytes {
        match self.kind {
            Kind::Chat => sse(&self.completion(
                true,
                vec![ChatChunkChoice {
                    index: 0,
                    delta: Delta {
                        role: role.then_some("assistant"),
                        content: text,
                    },
                    logprobs,
                    finish_reason: finish,
                }],
                None,
            )),
            Kind::Text => sse(&self.completion(
                true,
                vec![TextChoice {
                    index: 0,
                    text: text.unwrap_or(""),
                    logprobs,
                    finish_reason: finish,
                }],
                None,
            )),
        }
    }

    /// The chunk of no choices holding the usage (`stream_options.include_usage`).
    fn usage_chunk(&self, usage: Usage) -> Bytes {
        sse(&self.completion::<TextChoice<'_>>(true, Vec::new(), Some(usage)))
    }
}

/// One server-sent event holding `data` as JSON.
fn sse(data: &impl Serialize) -> Bytes {
    let json = serde_json::to_string(data).unwrap_or_else(|e| {
        let e = ApiError::internal(format!("the chunk could not be written: {e}"));
        serde_json::to_string(&e.wire()).unwrap_or_default()
    });
    Bytes::from(format!("data: {json}\n\n"))
}

/// The state of a streamed response.
struct Stream {
    meta: Meta,
    rx: mpsc::UnboundedReceiver<Event>,
    include_usage: bool,
    logprobs: bool,
    /// Chunks ready to send before the next event.
    ready: std::collections::VecDeque<Bytes>,
    done: bool,
}

impl Stream {
    /// The chunks for one event.
    fn push(&mut self, event: Event) {
        match event {
            Event::Text { text, logprobs } => {
                let logprobs = self.meta.logprobs(self.logprobs, &logprobs);
                let chunk = self.meta.chunk(Some(&text), false, None, logprobs);
                self.ready.push_back(chunk);
            }
            Event::Done {
                finish_reason,
                prompt_tokens,
                completion_tokens,
            } => {
                let text = match self.meta.kind {
                    Kind::Chat => None,
                    Kind::Text => Some(""),
                };
                let chunk = self.meta.chunk(text, false, Some(finish_reason), None);
                self.ready.push_back(chunk);
                if self.include_usage {
                    let usage = Usage::new(prompt_tokens, completion_tokens);
                    self.ready.push_back(self.meta.usage_chunk(usage));
                }
                self.ready
                    .push_back(Bytes::from_static(b"data: [DONE]\n\n"));
                self.done = true;
            }
            Event::Error(e) => {
                self.ready.push_back(sse(&e.wire()));
                self.done = true;
            }
        }
    }
}

/// Runs a generation: a streamed response (its status decided by the first event, so an error
/// before any text is still an HTTP error), or the whole response at the end.
async fn run_generation(
    shared: &Shared,
    meta: Meta,
    prompt: Vec<u32>,
    params: GenerationParams,
) -> Result<Response, ApiError> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    shared.engine.submit(Job::Generate(GenerateJob {
        request: GenerateRequest {
            prompt,
            sampler: params.sampler,
            max_tokens: params.max_tokens.unwrap_or(shared.n_ctx),
            stops: params.stops,
            logprobs: params.logprobs,
        },
        events: tx,
    }))?;
    let stopped = || ApiError::internal("the generation was stopped: the server is shutting down");
    if !params.stream {
        let mut text = String::new();
        let mut tokens = Vec::new();
        loop {
            match rx.recv().await.ok_or_else(stopped)? {
                Event::Text { text: t, logprobs } => {
                    text.push_str(&t);
                    tokens.extend(logprobs);
                }
                Event::Done {
                    finish_reason,
                    prompt_tokens,
                    completion_tokens,
                } => {
                    let logprobs = meta.logprobs(params.logprobs.is_some(), &tokens);
                    return Ok(meta.complete(
                        &text,
                        finish_reason,
                        Usage::new(prompt_tokens, completion_tokens),
                        logprobs,
                    ));
                }
                Event::Error(e) => return Err(e),
            }
        }
    }
    let first = rx.recv().await.ok_or_else(stopped)?;
    if let Event::Error(e) = first {
        return Err(e);
    }
    let mut stream = Stream {
        meta,
        rx,
        include_usage: params.include_usage,
        logprobs: params.logprobs.is_some(),
        ready: Default::default(),
        done: false,
    };
    if stream.meta.kind == Kind::Chat {
        let chunk = stream.meta.chunk(Some(""), true, None, None);
        stream.ready.push_back(chunk);
    }
    stream.push(first);
    let body = futures_util::stream::unfold(stream, |mut s| async move {
        loop {
            if let Some(bytes) = s.ready.pop_front() {
                return Some((Ok::<_, Infallible>(bytes), s));
            }
            if s.done {
                return None;
            }
            // `None`: the engine stopped (the server is shutting down); the stream ends.
            let event = s.rx.recv().await?;
            s.push(event);
        }
    });
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(body),
    )
        .into_response())
}

/// Refuses generation from an encoder (BERT makes embeddings only).
fn check_generates(shared: &Shared) -> Result<(), ApiError> {
    if !shared.model.hparams().causal {
        return Err(ApiError::bad_request(format!(
            "`{}` is an encoder model: it makes embeddings (/v1/embeddings), not text",
            shared.model_id
        )));
    }
    Ok(())
}

/// Refuses a prompt the engine would refuse ([`gguf_model::Model::check_prompt`]), before it
/// is queued, naming the request's `field`.
fn check_prompt(shared: &Shared, prompt: &[u32], field: &str) -> Result<(), ApiError> {
    match shared.model.check_prompt(prompt, shared.n_ctx) {
        Ok(()) => Ok(()),
        Err(ModelError::EmptyPrompt) => Err(ApiError::invalid(
            field,
            format!("`{field}` gives no tokens"),
        )),
        Err(ModelError::ContextFull { needed, n_ctx }) => {
            let mut e = ApiError::invalid(
                field,
                format!("the prompt has {needed} tokens, more than the context of {n_ctx}"),
            );
            e.code = Some("context_length_exceeded");
            Err(e)
        }
        Err(e) => Err(ApiError::invalid(field, e.to_string())),
    }
}

pub(crate) async fn chat_completions(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let shared = &*shared;
    let (params, messages) = read_request::<ChatRequest>(body)?.check()?;
    check_generates(shared)?;
    let template = shared
        .template
        .as_ref()
        .map_err(|why| ApiError::bad_request(why.clone()))?;
    let prompt = shared
        .model
        .render_chat(template, &messages, shared.n_ctx)
        .map_err(|e| {
            ApiError::invalid(
                "messages",
                format!("the chat template refused the messages: {e}"),
            )
        })?;
    let ids = shared.model.tokenize_chat_prompt(&prompt);
    check_prompt(shared, &ids, "messages")?;
    run_generation(shared, Meta::new(Kind::Chat, &shared.model_id), ids, params).await
}

pub(crate) async fn completions(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let shared = &*shared;
    let request = read_request::<CompletionRequest>(body)?;
    let (params, prompt) = request.check()?;
    check_generates(shared)?;
    let ids = shared.model.tokenizer().encode(
        prompt.as_bytes(),
        gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
    );
    check_prompt(shared, &ids, "prompt")?;
    run_generation(shared, Meta::new(Kind::Text, &shared.model_id), ids, params).await
}

pub(crate) async fn embeddings(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let shared = &*shared;
    let request = read_request::<EmbeddingRequest>(body)?;
    let (texts, base64) = request.check()?;
    if !crate::embeddings_enabled(&shared.model) {
        return Err(ApiError::bad_request(format!(
            "`{}` is not an embedding model: its pooling type (`pooling_type`) is {}, and \
             OpenAI's embeddings need one vector per input",
            shared.model_id,
            shared.model.hparams().pooling.name()
        )));
    }
    let tokenizer = shared.model.tokenizer();
    let inputs: Vec<Vec<u32>> = texts
        .iter()
        .map(|t| {
            tokenizer.encode(
                t.as_bytes(),
                gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
            )
        })
        .collect();
    for (i, ids) in inputs.iter().enumerate() {
        if ids.is_empty() || ids.len() > shared.n_ctx {
            return Err(ApiError::invalid(
                "input",
                format!(
                    "`input[{i}]` has {} tokens; between 1 and the context of {} are accepted",
                    ids.len(),
                    shared.n_ctx
                ),
            ));
        }
    }
    let prompt_tokens: usize = inputs.iter().map(Vec::len).sum();
    let (reply, rx) = oneshot::channel();
    shared.engine.submit(Job::Embed { inputs, reply })?;
    let vectors = rx.await.map_err(|_| {
        ApiError::internal("the embeddings were not computed: the server is shutting down")
    })??;
    let data = vectors
        .iter()
        .enumerate()
        .map(|(index, v)| EmbeddingData {
            object: "embedding",
            index,
            embedding: if base64 {
                // OpenAI's base64: the little-endian f32 bytes of the vector.
                use base64::Engine;
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                Vector::Base64(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                Vector::Float(Widened(v))
            },
        })
        .collect();
    Ok(ok(&EmbeddingList {
        object: "list",
        data,
        model: &shared.model_id,
        usage: EmbeddingUsage {
            prompt_tokens,
            total_tokens: prompt_tokens,
        },
    }))
}

pub(crate) async fn tokenize(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request = read_request::<TokenizeRequest>(body)?;
    let (content, add_special, parse_special) = request.check()?;
    let tokens = shared.model.tokenizer().encode(
        content.as_bytes(),
        gguf_tokenizer::EncodeOptions {
            add_special,
            parse_special,
        },
    );
    Ok(ok(&Tokens { tokens }))
}

pub(crate) async fn detokenize(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let request = read_request::<DetokenizeRequest>(body)?;
    let tokenizer = shared.model.tokenizer();
    let ids = request.check(tokenizer.vocab_size())?;
    let text = tokenizer.decode(&ids, gguf_tokenizer::DecodeOptions::PLAIN);
    Ok(ok(&Detokenized {
        content: &String::from_utf8_lossy(&text),
    }))
}
