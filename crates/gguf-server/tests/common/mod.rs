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
use tokio::net::TcpStream;
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
    use gguf_format::OwnedValue;
    edited_model(dir, "pooled.gguf", "llama.pooling_type", OwnedValue::U32(1))
}

/// The fixture with `tokenizer.chat_template` set to `template`, written into `dir`.
pub fn model_with_template(dir: &Path, template: &str) -> Arc<Model> {
    use gguf_format::OwnedValue;
    let value = OwnedValue::String(template.as_bytes().to_vec());
    edited_model(dir, "templated.gguf", "tokenizer.chat_template", value)
}

/// The fixture with metadata `key` set to `value`, written into `dir` as `name`.
fn edited_model(dir: &Path, name: &str, key: &str, value: gguf_format::OwnedValue) -> Arc<Model> {
    use gguf_format::edit::{edit_metadata, Edit};
    use gguf_fsutil::WriteMode;
    let path = dir.join(name);
    edit_metadata(
        &fixture("model-llama.gguf"),
        &path,
        WriteMode::CreateNew,
        &[Edit::Set(key.into(), value)],
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

// Raw HTTP/1.1 over a TcpStream (the copies in api.rs predate these).

/// A response: status, headers (names lower-cased), body (de-chunked).
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Reply {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body of a 200 as JSON (failing with the body otherwise).
    pub fn ok_json(&self) -> serde_json::Value {
        assert_eq!(self.status, 200, "{}", self.text());
        self.json()
    }

    /// The `param` of an error response, after checking its shape.
    pub fn error_param(&self) -> Option<String> {
        let v = self.json();
        let e = &v["error"];
        assert!(e["message"].is_string(), "{v}");
        assert!(e["type"].is_string(), "{v}");
        assert!(e.get("param").is_some() && e.get("code").is_some(), "{v}");
        e["param"].as_str().map(str::to_string)
    }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let Some(eol) = data.windows(2).position(|w| w == b"\r\n") else {
            return out;
        };
        let size_text = std::str::from_utf8(&data[..eol]).unwrap();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&data[eol + 2..eol + 2 + size]);
        data = &data[eol + 2 + size + 2..];
    }
}

/// A whole response as read until the server closed the connection.
pub fn parse_reply(raw: &[u8]) -> Reply {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let body = &raw[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.contains("chunked"));
    Reply {
        status,
        body: if chunked {
            dechunk(body)
        } else {
            body.to_vec()
        },
        headers,
    }
}

/// The request's bytes: a head with `Connection: close` and the body.
pub fn raw_request(method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends one request on a new connection and reads the response to the connection's end.
pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Reply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut read, mut write) = stream.split();
    let request = raw_request(method, path, headers, body);
    // Written while reading: a server may answer (413) before it has read everything.
    let writing = async move {
        let _ = write.write_all(&request).await;
    };
    let mut raw = Vec::new();
    let reading = read.read_to_end(&mut raw);
    let ((), result) = tokio::time::timeout(std::time::Duration::from_secs(60), async {
        tokio::join!(writing, reading)
    })
    .await
    .expect("an answer in time");
    if let Err(e) = result {
        // A reset after a complete answer (the server closed while we still wrote).
        assert!(!raw.is_empty(), "no answer: {e}");
    }
    parse_reply(&raw)
}

pub async fn post(addr: SocketAddr, path: &str, body: &serde_json::Value) -> Reply {
    send(addr, "POST", path, &[], body.to_string().as_bytes()).await
}

pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    send(addr, "GET", path, &[], b"").await
}

/// The `data:` payloads of a server-sent-events body.
pub fn sse_data(body: &[u8]) -> Vec<String> {
    let text = std::str::from_utf8(body).unwrap();
    text.split("\n\n")
        .filter(|e| !e.trim().is_empty())
        .map(|e| {
            e.strip_prefix("data: ")
                .unwrap_or_else(|| panic!("not a data event: {e:?}"))
                .to_string()
        })
        .collect()
}

/// The samples of a Prometheus text exposition (`name value` lines; no labels), by name.
pub fn parse_metrics(text: &str) -> std::collections::HashMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (name, value) = l
                .split_once(' ')
                .unwrap_or_else(|| panic!("not a sample: {l:?}"));
            let value = value
                .trim()
                .parse()
                .unwrap_or_else(|e| panic!("not a number ({e}): {l:?}"));
            (name.to_string(), value)
        })
        .collect()
}

/// `GET /metrics`, parsed (after checking the status).
pub async fn metrics(addr: SocketAddr) -> std::collections::HashMap<String, f64> {
    let reply = get(addr, "/metrics").await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    parse_metrics(&reply.text())
}

/// A connection with a POST of `body` to `path` sent on it, its answer not read yet.
pub async fn open_post(addr: SocketAddr, path: &str, body: &serde_json::Value) -> TcpStream {
    use tokio::io::AsyncWriteExt;

    let mut stream = TcpStream::connect(addr).await.unwrap();
    let request = raw_request("POST", path, &[], body.to_string().as_bytes());
    stream.write_all(&request).await.unwrap();
    stream
}
