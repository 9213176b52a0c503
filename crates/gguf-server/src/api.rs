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
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};

use crate::error::ApiError;
use crate::request::{self, Fields, GenerationParams};
use crate::worker::{Event, GenerateJob, Job, TokenLogprob};
use crate::Shared;

type AppState = State<Arc<Shared>>;

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn ok(body: &Value) -> Response {
    json_response(StatusCode::OK, body)
}

/// The body (read whole, within its limits, by [`read_body_in_time`]) as a JSON object (400
/// for anything but a UTF-8 JSON object) with no field outside `known` and, if it names a
/// `model`, a string there (any string: the server has one model).
fn request_object(
    body: Result<Bytes, BytesRejection>,
    known: &[&[&str]],
) -> Result<serde_json::Map<String, Value>, ApiError> {
    let body = body.map_err(|rejection| {
        ApiError::bad_request(format!("the request body could not be read: {rejection}"))
    })?;
    let object = request::json_object(&body)?;
    let f = Fields(&object);
    request::check_known(&f, known)?;
    if f.get("model").is_some_and(|m| !m.is_string()) {
        return Err(ApiError::invalid("model", "`model` must be a string"));
    }
    Ok(object)
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
    ok(&json!({"status": "ok"}))
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
    ok(&json!({
        "object": "list",
        "data": [{
            "id": shared.model_id,
            "object": "model",
            "created": shared.started,
            "owned_by": "gguf",
        }],
    }))
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

    fn usage(prompt_tokens: usize, completion_tokens: usize) -> Value {
        json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        })
    }

    /// The `logprobs` of a choice: `null` unless asked for; chat's `{"content": [...]}` or the
    /// text completion's `{"tokens", "token_logprobs", "top_logprobs", "text_offset"}`.
    fn logprobs(&self, asked: bool, tokens: &[TokenLogprob]) -> Value {
        if !asked {
            return Value::Null;
        }
        match self.kind {
            Kind::Chat => {
                let entry = |token: &str, bytes: &[u8], logprob: f32| json!({"token": token, "logprob": logprob, "bytes": bytes});
                let content: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        let mut e = entry(&t.token, &t.bytes, t.logprob);
                        e["top_logprobs"] = t.top.iter().map(|(s, b, l)| entry(s, b, *l)).collect();
                        e
                    })
                    .collect();
                json!({"content": content, "refusal": null})
            }
            Kind::Text => {
                let mut offset = 0;
                let offsets: Vec<usize> = tokens
                    .iter()
                    .map(|t| {
                        let at = offset;
                        offset += t.token.chars().count();
                        at
                    })
                    .collect();
                let top: Vec<Value> = tokens
                    .iter()
                    .map(|t| {
                        let map: serde_json::Map<String, Value> = t
                            .top
                            .iter()
                            .map(|(s, _, l)| (s.clone(), json!(l)))
                            .collect();
                        Value::Object(map)
                    })
                    .collect();
                json!({
                    "tokens": tokens.iter().map(|t| t.token.as_str()).collect::<Vec<_>>(),
                    "token_logprobs": tokens.iter().map(|t| t.logprob).collect::<Vec<_>>(),
                    "top_logprobs": top,
                    "text_offset": offsets,
                })
            }
        }
    }

    /// The whole response.
    fn complete(&self, text: &str, finish: &str, usage: (usize, usize), logprobs: Value) -> Value {
        let (prompt, completion) = usage;
        let choice = match self.kind {
            Kind::Chat => json!({
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
            Kind::Text => json!({
                "index": 0,
                "text": text,
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
        };
        json!({
            "id": self.id,
            "object": match self.kind { Kind::Chat => "chat.completion", Kind::Text => "text_completion" },
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": Meta::usage(prompt, completion),
        })
    }

    /// One streamed chunk: `delta` text (chat: with the role on the first chunk), or the
    /// finish reason.
    fn chunk(
        &self,
        text: Option<&str>,
        role: bool,
        finish: Option<&str>,
        logprobs: Value,
    ) -> Value {
        let choice = match self.kind {
            Kind::Chat => {
                let mut delta = serde_json::Map::new();
                if role {
                    delta.insert("role".into(), json!("assistant"));
                }
                if let Some(text) = text {
                    delta.insert("content".into(), json!(text));
                }
                json!({"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish})
            }
            Kind::Text => json!({
                "index": 0,
                "text": text.unwrap_or(""),
                "logprobs": logprobs,
                "finish_reason": finish,
            }),
        };
        self.with_choices(json!([choice]))
    }

    fn with_choices(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": match self.kind { Kind::Chat => "chat.completion.chunk", Kind::Text => "text_completion" },
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }
}

fn sse(data: &Value) -> Bytes {
    Bytes::from(format!("data: {data}\n\n"))
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
                self.ready.push_back(sse(&chunk));
            }
            Event::Done {
                finish_reason,
                prompt_tokens,
                completion_tokens,
            } => {
                let chunk = match self.meta.kind {
                    Kind::Chat => self
                        .meta
                        .chunk(None, false, Some(finish_reason), Value::Null),
                    Kind::Text => {
                        self.meta
                            .chunk(Some(""), false, Some(finish_reason), Value::Null)
                    }
                };
                self.ready.push_back(sse(&chunk));
                if self.include_usage {
                    let mut chunk = self.meta.with_choices(json!([]));
                    chunk["usage"] = Meta::usage(prompt_tokens, completion_tokens);
                    self.ready.push_back(sse(&chunk));
                }
                self.ready
                    .push_back(Bytes::from_static(b"data: [DONE]\n\n"));
                self.done = true;
            }
            Event::Error(e) => {
                self.ready.push_back(sse(&e.body()));
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
        prompt,
        sampler: params.sampler,
        max_tokens: params.max_tokens.unwrap_or(shared.n_ctx),
        stops: params.stops,
        logprobs: params.logprobs,
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
                    return Ok(ok(&meta.complete(
                        &text,
                        finish_reason,
                        (prompt_tokens, completion_tokens),
                        logprobs,
                    )));
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
        let chunk = stream.meta.chunk(Some(""), true, None, Value::Null);
        stream.ready.push_back(sse(&chunk));
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

/// Refuses a prompt longer than the context, before it is queued.
fn check_prompt(shared: &Shared, prompt: &[u32], field: &str) -> Result<(), ApiError> {
    if prompt.is_empty() {
        return Err(ApiError::invalid(
            field,
            format!("`{field}` gives no tokens"),
        ));
    }
    if prompt.len() > shared.n_ctx {
        let mut e = ApiError::invalid(
            field,
            format!(
                "the prompt has {} tokens, more than the context of {}",
                prompt.len(),
                shared.n_ctx
            ),
        );
        e.code = Some("context_length_exceeded");
        return Err(e);
    }
    Ok(())
}

pub(crate) async fn chat_completions(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let shared = &*shared;
    let object = request_object(body, request::CHAT_FIELDS)?;
    let f = Fields(&object);
    let params = request::generation_params(&f, &["max_tokens", "max_completion_tokens"], true)?;
    let messages = request::messages(&f)?;
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
    let object = request_object(body, request::COMPLETION_FIELDS)?;
    let f = Fields(&object);
    let params = request::generation_params(&f, &["max_tokens"], false)?;
    let prompt = match f.get("prompt") {
        Some(Value::String(s)) => s.as_str(),
        Some(Value::Array(list)) if list.len() == 1 && list[0].is_string() => {
            list[0].as_str().unwrap_or_default()
        }
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                "prompt",
                "`prompt`: one string per request is supported (not several, nor token ids)",
            ))
        }
        Some(_) => return Err(ApiError::invalid("prompt", "`prompt` must be a string")),
        None => return Err(ApiError::invalid("prompt", "`prompt` is required")),
    };
    check_generates(shared)?;
    let ids = shared
        .model
        .tokenizer()
        .encode(prompt.as_bytes(), true, true);
    check_prompt(shared, &ids, "prompt")?;
    run_generation(shared, Meta::new(Kind::Text, &shared.model_id), ids, params).await
}

pub(crate) async fn embeddings(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let shared = &*shared;
    let object = request_object(body, request::EMBEDDING_FIELDS)?;
    let f = Fields(&object);
    let base64 = match f.string("encoding_format")? {
        None | Some("float") => false,
        // What OpenAI's Python client asks for unless told otherwise.
        Some("base64") => true,
        Some(other) => {
            return Err(ApiError::invalid(
                "encoding_format",
                format!("`encoding_format` must be \"float\" or \"base64\", not {other:?}"),
            ))
        }
    };
    if f.get("dimensions").is_some() {
        return Err(ApiError::unsupported("dimensions", "shortening embeddings"));
    }
    let texts: Vec<&str> = match f.get("input") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(list)) if !list.is_empty() && list.len() <= 2048 => list
            .iter()
            .map(|v| {
                v.as_str().ok_or_else(|| {
                    ApiError::invalid(
                        "input",
                        "`input` must be a string or a list of strings (token ids are not supported)",
                    )
                })
            })
            .collect::<Result<_, _>>()?,
        Some(Value::Array(_)) => {
            return Err(ApiError::invalid(
                "input",
                "`input` must hold between 1 and 2048 strings",
            ))
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "input",
                "`input` must be a string or a list of strings",
            ))
        }
        None => return Err(ApiError::invalid("input", "`input` is required")),
    };
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
        .map(|t| tokenizer.encode(t.as_bytes(), true, true))
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
    let data: Vec<Value> = vectors
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            let embedding = if base64 {
                // OpenAI's base64: the little-endian f32 bytes of the vector.
                use base64::Engine;
                let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
                json!(base64::engine::general_purpose::STANDARD.encode(bytes))
            } else {
                json!(v)
            };
            json!({"object": "embedding", "index": i, "embedding": embedding})
        })
        .collect();
    Ok(ok(&json!({
        "object": "list",
        "data": data,
        "model": shared.model_id,
        "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
    })))
}

pub(crate) async fn tokenize(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let object = request_object(body, request::TOKENIZE_FIELDS)?;
    let f = Fields(&object);
    let content = f
        .string("content")?
        .ok_or_else(|| ApiError::invalid("content", "`content` is required"))?;
    let add_special = f.bool("add_special")?.unwrap_or(false);
    let parse_special = f.bool("parse_special")?.unwrap_or(true);
    if f.bool("with_pieces")?.unwrap_or(false) {
        return Err(ApiError::unsupported("with_pieces", "returning pieces"));
    }
    let tokens = shared
        .model
        .tokenizer()
        .encode(content.as_bytes(), add_special, parse_special);
    Ok(ok(&json!({ "tokens": tokens })))
}

pub(crate) async fn detokenize(
    State(shared): AppState,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let object = request_object(body, request::DETOKENIZE_FIELDS)?;
    let f = Fields(&object);
    let tokenizer = shared.model.tokenizer();
    let ids = request::token_ids(&f, "tokens", tokenizer.vocab_size())?;
    let text = tokenizer.decode(&ids, false, false);
    Ok(ok(&json!({ "content": String::from_utf8_lossy(&text) })))
}
