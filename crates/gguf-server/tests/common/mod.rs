//! What the server's tests share: the tiny llama fixture, the config they run it with, and a
//! server started in-process on 127.0.0.1:0.

// Each test file uses only part of this.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use gguf_model::{Model, SessionOptions};
use gguf_server::{Server, ServerConfig};
use gguf_test_support::fixture;
use tokio::sync::oneshot;

/// The context of the tests' sessions.
pub const N_CTX: usize = 256;

/// The session the tests' servers (and their direct comparisons) generate with.
pub fn session_options() -> SessionOptions {
    SessionOptions {
        n_ctx: N_CTX,
        threads: 1,
        ..SessionOptions::default()
    }
}

/// The tiny llama fixture.
pub fn model() -> Arc<Model> {
    Arc::new(Model::load(fixture("model-llama.gguf")).expect("the fixture loads"))
}

/// The fixture with mean pooling (`llama.pooling_type` 1), written into `dir`: a model
/// `/v1/embeddings` serves (its decoder's pooled hidden states).
pub fn pooled_model(dir: &Path) -> Arc<Model> {
    use gguf_format::edit::{edit_metadata, Edit};
    use gguf_format::fsutil::WriteMode;
    use gguf_format::OwnedValue;
    let path = dir.join("pooled.gguf");
    edit_metadata(
        &fixture("model-llama.gguf"),
        &path,
        WriteMode::CreateNew,
        &[Edit::Set("llama.pooling_type".into(), OwnedValue::U32(1))],
        &mut |_, _| {},
    )
    .unwrap();
    Arc::new(Model::load(&path).unwrap())
}

/// Model id `tiny`, the chatml template, no keys.
pub fn config() -> ServerConfig {
    ServerConfig {
        model_id: "tiny".into(),
        // Two slots of the lone session's context each.
        session: SessionOptions {
            n_ctx: 2 * N_CTX,
            ..session_options()
        },
        parallel: 2,
        chat_template: Some("chatml".into()),
        ..ServerConfig::default()
    }
}

/// A server running on its own port until dropped.
pub struct Running {
    pub addr: SocketAddr,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    /// The engine held (see `Server::hold_engine`) when started so.
    pub hold: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl Running {
    /// Stops it gracefully and waits until it has.
    pub async fn shut_down(mut self) {
        let _ = self.stop.take().expect("running").send(());
        let task = self.task.take().expect("running");
        tokio::time::timeout(std::time::Duration::from_secs(10), task)
            .await
            .expect("shut down in time")
            .expect("the task ends")
            .expect("serve returns Ok");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// The fixture served with `config`, its engine held first when `hold`.
pub async fn start_with(config: ServerConfig, hold: bool) -> Running {
    start_model(model(), config, hold).await
}

/// `model` served with `config`, its engine held first when `hold`.
pub async fn start_model(model: Arc<Model>, config: ServerConfig, hold: bool) -> Running {
    let server = Server::new(model, config).expect("the server starts");
    let hold = if hold { server.hold_engine() } else { None };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(listener, async move {
        let _ = stopped.await;
    }));
    Running {
        addr,
        stop: Some(stop),
        task: Some(task),
        hold,
    }
}

/// The fixture served with [`config`].
pub async fn start() -> Running {
    start_with(config(), false).await
}
