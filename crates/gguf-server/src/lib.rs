//! An OpenAI-compatible HTTP server for one GGUF model: the library behind `gguf serve`.
//!
//! [`Server::new`] starts the engine thread (one [`gguf_model::Session`], one generation at a
//! time, jobs queued in a bounded queue) and [`Server::serve`] answers on a listener until
//! the shutdown future completes:
//!
//! | route | what |
//! |---|---|
//! | `POST /v1/chat/completions` | a reply to `messages`, rendered with the model's chat template; `stream: true` as server-sent `chat.completion.chunk` events |
//! | `POST /v1/completions` | a continuation of a raw `prompt` |
//! | `POST /v1/embeddings` | embeddings, for a model with a pooling type |
//! | `GET /v1/models` | the one model |
//! | `POST /tokenize`, `POST /detokenize` | llama-server's shapes |
//! | `GET /health` | `{"status": "ok"}` (no API key needed) |
//!
//! Errors are OpenAI's error objects (see [`ApiError`]).
//!
//! ```no_run
//! use std::sync::Arc;
//! use gguf_server::{Server, ServerConfig};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let model = Arc::new(gguf_model::Model::load("model.gguf")?);
//! let server = Server::new(model, ServerConfig::default())?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! server.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

mod api;
mod error;
mod metrics;
mod openai;
mod worker;

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue, Method};
use axum::routing::{get, post};
use axum::Router;
use gguf_model::{Model, ModelError, Pooling, SessionOptions};
use gguf_tokenizer::chat::ChatTemplate;
use gguf_tokenizer::chat_builtin::Origin;

pub use error::ApiError;

use metrics::Metrics;
use worker::{Engine, EngineConfig};

/// The default [`ServerConfig::header_timeout`].
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The default [`ServerConfig::body_timeout`].
pub const BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// Settings of a [`Server`].
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The model's id in responses and `/v1/models`.
    pub model_id: String,
    /// The session the engine generates with (threads, KV cache type, batch size; `n_ctx` is
    /// the context of all sequences together, divided among them as llama-server divides its
    /// `-c` among `-np` slots).
    pub session: SessionOptions,
    /// Sequences generated at once (llama-server's `--parallel`): their decode steps and
    /// prompt chunks share each forward pass.
    pub parallel: usize,
    /// A chat template by name (a built-in, or the file's `tokenizer.chat_template.NAME`);
    /// `None`: the file's own, or the built-in its vocabulary calls for.
    pub chat_template: Option<String>,
    /// Accepted bearer keys; empty: no key needed.
    pub api_keys: Vec<String>,
    /// Origins allowed by CORS (`*` for any); empty: no CORS headers.
    pub cors_origins: Vec<String>,
    /// The largest request body accepted, in bytes (larger: 413).
    pub max_body_bytes: usize,
    /// Jobs admitted at once, running and waiting (more: 503 with `Retry-After`).
    pub max_queue: usize,
    /// How long a client may take to send a request's headers (from the connection, or from
    /// the previous response on a kept-alive one); then the connection is closed.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body once its headers are in; then the
    /// request is answered 408.
    pub body_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            model_id: "model".into(),
            session: SessionOptions::default(),
            parallel: 4,
            chat_template: None,
            api_keys: Vec::new(),
            cors_origins: Vec::new(),
            max_body_bytes: 2 << 20,
            max_queue: 16,
            header_timeout: HEADER_TIMEOUT,
            body_timeout: BODY_TIMEOUT,
        }
    }
}

/// Why a [`Server`] could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The engine could not start (the session's options do not fit the model).
    #[error(transparent)]
    Model(#[from] ModelError),
    /// A setting is wrong.
    #[error("{0}")]
    Config(String),
}

/// What the handlers share.
pub(crate) struct Shared {
    pub model: Arc<Model>,
    pub model_id: String,
    pub n_ctx: usize,
    /// The chat template, or why there is none.
    pub template: Result<ChatTemplate, String>,
    pub engine: Engine,
    pub metrics: Arc<Metrics>,
    pub api_keys: Vec<String>,
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
    /// When the server started (Unix seconds), `created` of the model.
    pub started: u64,
}

/// The server: a model, its engine thread and the router.
pub struct Server {
    shared: Arc<Shared>,
    cors_origins: Vec<String>,
    header_timeout: Duration,
    notes: Vec<String>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("model_id", &self.shared.model_id)
            .field("n_ctx", &self.shared.n_ctx)
            .finish()
    }
}

impl Server {
    /// Starts the engine thread for `model` and prepares the routes.
    pub fn new(model: Arc<Model>, config: ServerConfig) -> Result<Server, ServerError> {
        let mut notes = Vec::new();
        let template = match &config.chat_template {
            Some(name) => Ok(model
                .chat_template(Some(name))
                .map_err(|e| ServerError::Config(format!("--chat-template {name}: {e}")))?
                .0),
            None => match model.chat_template(None) {
                Ok((t, Origin::Detected(name))) => {
                    notes.push(format!(
                        "the model has no chat template; using the built-in `{name}` template, \
                         whose turn markers are tokens of its vocabulary"
                    ));
                    Ok(t)
                }
                Ok((t, _)) => Ok(t),
                Err(e) => {
                    let why = format!(
                        "{e}; start the server with --chat-template NAME for chat completions"
                    );
                    notes.push(format!("/v1/chat/completions is off: {why}"));
                    Err(why)
                }
            },
        };
        for origin in &config.cors_origins {
            if origin != "*" && HeaderValue::from_str(origin).is_err() {
                return Err(ServerError::Config(format!(
                    "--cors {origin:?} is not a valid origin"
                )));
            }
        }
        let metrics = Arc::new(Metrics::default());
        let engine_config = EngineConfig {
            session: config.session,
            parallel: config.parallel,
            limit: config.max_queue,
        };
        let (engine, n_ctx) = Engine::start(model.clone(), engine_config, metrics.clone())?;
        let started = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Ok(Server {
            shared: Arc::new(Shared {
                model,
                model_id: config.model_id,
                n_ctx,
                template,
                engine,
                metrics,
                api_keys: config.api_keys,
                max_body_bytes: config.max_body_bytes,
                body_timeout: config.body_timeout,
                started,
            }),
            cors_origins: config.cors_origins,
            header_timeout: config.header_timeout,
            notes,
        })
    }

    /// Notes for the operator about the setup (a missing chat template, ...).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The context length of each sequence.
    pub fn n_ctx(&self) -> usize {
        self.shared.n_ctx
    }

    /// Whether `/v1/embeddings` is served: the model has a pooling type (mean, CLS, last).
    pub fn embeddings_enabled(&self) -> bool {
        embeddings_enabled(&self.shared.model)
    }

    /// The routes, ready to be served.
    pub fn router(&self) -> Router {
        let shared = self.shared.clone();
        let router = Router::new()
            .route("/health", get(api::health))
            .route("/metrics", get(api::metrics))
            .route("/v1/models", get(api::models))
            .route("/v1/chat/completions", post(api::chat_completions))
            .route("/v1/completions", post(api::completions))
            .route("/v1/embeddings", post(api::embeddings))
            .route("/tokenize", post(api::tokenize))
            .route("/detokenize", post(api::detokenize))
            .fallback(api::not_found)
            .method_not_allowed_fallback(api::method_not_allowed)
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                api::read_body_in_time,
            ))
            .layer(axum::middleware::from_fn_with_state(
                shared.clone(),
                api::authenticate,
            ))
            // `read_body_in_time` enforces `max_body_bytes` (413) before any handler runs.
            .layer(DefaultBodyLimit::disable())
            .with_state(shared);
        if self.cors_origins.is_empty() {
            return router;
        }
        use tower_http::cors::{AllowOrigin, CorsLayer};
        let origins = if self.cors_origins.iter().any(|o| o == "*") {
            AllowOrigin::any()
        } else {
            AllowOrigin::list(
                self.cors_origins
                    .iter()
                    .filter_map(|o| HeaderValue::from_str(o).ok()),
            )
        };
        router.layer(
            CorsLayer::new()
                .allow_origin(origins)
                .allow_methods([Method::GET, Method::POST, Method::OPTIONS])
                .allow_headers([header::AUTHORIZATION, header::CONTENT_TYPE]),
        )
    }

    /// Answers on `listener` until `shutdown` completes; then generations under way stop at
    /// their next token, their responses end, and this returns once every connection has
    /// closed.
    ///
    /// Each connection is HTTP/1.1 (keep-alive) with deadlines against clients that hold it
    /// without finishing a request (slowloris): [`ServerConfig::header_timeout`] for a
    /// request's headers, [`ServerConfig::body_timeout`] for its body.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        use hyper_util::rt::{TokioIo, TokioTimer};
        use hyper_util::service::TowerToHyperService;

        let router = self.router();
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let mut shutdown = std::pin::pin!(shutdown);
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    // Out of descriptors, a connection reset before it was taken, ...: the
                    // listener itself is fine; wait a moment rather than spin.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                () = &mut shutdown => break,
            };
            let service = TowerToHyperService::new(router.clone());
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(self.header_timeout)
                .serve_connection(TokioIo::new(stream), service);
            let connection = graceful.watch(connection);
            tokio::spawn(async move {
                let _ = connection.await;
            });
        }
        drop(listener);
        self.shared.engine.shut_down();
        graceful.shutdown().await;
        Ok(())
    }

    /// Holds the engine: while the guard lives, the engine runs no job (it waits before its
    /// next one). `None` while it runs one. For tests of the queue.
    #[doc(hidden)]
    pub fn hold_engine(&self) -> Option<tokio::sync::OwnedMutexGuard<()>> {
        self.shared.engine.step_lock().clone().try_lock_owned().ok()
    }
}

/// Whether `model` makes embeddings for `/v1/embeddings` (OpenAI's endpoint needs one vector
/// per input, so a pooling type other than none).
pub(crate) fn embeddings_enabled(model: &Model) -> bool {
    matches!(
        model.hparams().pooling,
        Pooling::Mean | Pooling::Cls | Pooling::Last
    )
}
