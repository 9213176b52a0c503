//! `gguf serve`: an OpenAI-compatible HTTP server for one model (the gguf-server crate).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};
use clap::Args;
use gguf_server::{Server, ServerConfig};

use crate::habits::GpuOptions;
use crate::models::ModelArg;
use crate::run::{self, RunOptions};

/// `gguf serve`.
#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The address to listen on (127.0.0.1: this machine only; 0.0.0.0: every interface).
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// The port to listen on (0: any free port, printed on stderr).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// An API key clients must send as `Authorization: Bearer KEY` (repeatable).
    #[arg(long = "api-key", value_name = "KEY")]
    pub api_keys: Vec<String>,
    /// A file of API keys, one per line (blank lines ignored).
    #[arg(long, value_name = "F")]
    pub api_key_file: Option<PathBuf>,
    /// Answer browsers from ORIGIN with CORS headers (`*`: any origin; repeatable).
    #[arg(long = "cors", value_name = "ORIGIN")]
    pub cors: Vec<String>,
    /// The largest request body accepted, in bytes.
    #[arg(long, default_value_t = 2 << 20)]
    pub max_body_bytes: usize,
    /// Requests admitted at once, running and waiting; more are answered 503.
    #[arg(long, default_value_t = 16)]
    pub queue: usize,
    /// Sequences generated at once (llama-server's -np): their tokens share each forward
    /// pass. `-c` is divided among them, as llama-server divides it; without `-c` each gets the
    /// model's training context capped at 4096.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub parallel: u16,
    /// The chat template: a built-in (chatml, gemma, llama3, phi3) or a template of the file
    /// (`tokenizer.chat_template.NAME`). Default: the file's own, or for a file without one
    /// the built-in its vocabulary's turn markers call for.
    #[arg(long, value_name = "NAME")]
    pub chat_template: Option<String>,
    /// The model's id in responses (default: the file's name without `.gguf`).
    #[arg(long)]
    pub alias: Option<String>,
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub gpu: GpuOptions,
}

/// The keys of `--api-key` and `--api-key-file`.
fn api_keys(a: &ServeArgs) -> Result<Vec<String>> {
    let mut keys = a.api_keys.clone();
    if let Some(path) = &a.api_key_file {
        let bytes = crate::output::read_input_file(path)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| anyhow!("{}: the key file is not UTF-8 text", path.display()))?;
        keys.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(str::to_string),
        );
        if keys.is_empty() {
            bail!("{}: the key file holds no key", path.display());
        }
    }
    if keys
        .iter()
        .any(|k| k.is_empty() || k.chars().any(char::is_whitespace))
    {
        bail!("an API key must be non-empty and without spaces");
    }
    Ok(keys)
}

/// Runs `gguf serve` until SIGINT or SIGTERM, then stops gracefully (exit status 0).
pub fn serve(a: ServeArgs) -> Result<()> {
    a.gpu.note_ignored();
    let file = a.model.name()?.to_string();
    let keys = api_keys(&a)?;
    let model = run::load(&file)?;
    let model_id = a.alias.clone().unwrap_or_else(|| {
        let stem = Path::new(&file)
            .file_name()
            .map_or_else(|| file.clone(), |n| n.to_string_lossy().into_owned());
        stem.strip_suffix(".gguf").unwrap_or(&stem).to_string()
    });
    let parallel = usize::from(a.parallel);
    let mut session = a.run.session_options();
    if session.n_ctx == 0 {
        session.n_ctx = parallel * model.default_n_ctx();
    }
    let config = ServerConfig {
        model_id,
        session,
        parallel,
        chat_template: a.chat_template.clone(),
        api_keys: keys,
        cors_origins: a.cors.clone(),
        max_body_bytes: a.max_body_bytes,
        max_queue: a.queue,
        ..ServerConfig::default()
    };
    let server = Server::new(Arc::new(model), config).with_context(|| file.clone())?;
    for note in server.notes() {
        eprintln!("note: {note}");
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let listener = tokio::net::TcpListener::bind((a.host.as_str(), a.port))
            .await
            .with_context(|| format!("cannot listen on {}:{}", a.host, a.port))?;
        let addr = listener.local_addr()?;
        // Take the signals before saying the server is up: a client (or test) that stops it
        // as soon as it reads the line must get the graceful shutdown.
        let shutdown = shutdown_signal();
        eprintln!(
            "serving {} on http://{addr} ({parallel} slot{} of {} tokens{}{}); Ctrl-C stops",
            file,
            if parallel == 1 { "" } else { "s" },
            server.n_ctx(),
            if server.embeddings_enabled() {
                ", embeddings"
            } else {
                ""
            },
            if a.api_keys.is_empty() && a.api_key_file.is_none() {
                ""
            } else {
                ", API key required"
            },
        );
        server.serve(listener, shutdown).await?;
        eprintln!("stopped");
        Ok(())
    })
}

/// Completes on the first SIGINT or SIGTERM (a second one ends the program at once). The
/// signal is taken from the moment this is called.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let rx = {
        let (tx, rx) = tokio::sync::oneshot::channel();
        crate::signals::hand_next_signal_to(move |signal| {
            let _ = tx.send(signal);
        });
        rx
    };
    async move {
        #[cfg(unix)]
        if let Ok(signal) = rx.await {
            eprintln!("signal {signal}: finishing the requests under way");
        }
        #[cfg(not(unix))]
        let _ = tokio::signal::ctrl_c().await;
    }
}
