//! `cargo xtask load-test`: concurrent streaming chat clients against `gguf serve` and, with
//! `--llama-server PATH`, against llama.cpp's `llama-server` on the same model, threads, slots
//! and context. For each server and each concurrency level it reports the requests, errors,
//! completion tokens, wall time, aggregate tokens per second (all completion tokens over the
//! level's wall time) and time to first token (p50, p99); with both servers, the ratio of
//! aggregate tokens per second (ours / llama-server's).
//!
//! The client is hyper's HTTP/1.1 client on a tokio runtime, one task per client: each sends
//! its requests in sequence (a connection each, `Connection: close`), streamed (`"stream":
//! true` with `stream_options.include_usage`), greedy, with prompts distinct per client, per
//! request and per level, the same set for both servers. A request is an error when it cannot connect,
//! answers other than 200, sends a chunk that is not JSON or holds an `error`, or ends without
//! `data: [DONE]`. The command fails when any request failed.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCEPT, CONNECTION, CONTENT_TYPE, HOST};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpStream;

/// How long a server may take from start to answering `/health` with 200.
const STARTUP_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a request may wait for its next bytes (a queued request waits for the others).
const READ_TIMEOUT: Duration = Duration::from_secs(600);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// The lines of a server's stderr kept to explain its failure.
const STDERR_TAIL: usize = 40;
/// The error messages kept per level (the count covers all).
const ERROR_SAMPLES: usize = 5;

/// What the prompts are about: prompt `k` is about `THINGS[k % len]`, numbered `k`.
const THINGS: &[&str] = &[
    "lighthouse",
    "dragon",
    "robot",
    "garden",
    "violin",
    "submarine",
    "mountain",
    "library",
    "comet",
    "bakery",
    "fox",
    "train",
    "island",
    "clock",
    "desert",
    "river",
    "castle",
];

/// The options of `cargo xtask load-test`.
#[derive(clap::Args)]
pub struct Args {
    /// A .gguf path or a known model name [default: smollm2-135m, from the cache]
    #[arg(long, value_name = "PATH")]
    model: Option<String>,
    /// Our binary [default: target/release/gguf]
    #[arg(long, value_name = "PATH")]
    gguf: Option<PathBuf>,
    /// Also run the same load against this llama-server
    #[arg(long, value_name = "PATH")]
    llama_server: Option<PathBuf>,
    /// The concurrency levels, each run in turn
    #[arg(long, value_name = "1,4,16", value_delimiter = ',', value_parser = positive, default_values_t = [1, 4, 16])]
    clients: Vec<usize>,
    /// Each client's requests, sent one after another
    #[arg(long, value_name = "N", value_parser = positive, default_value_t = 4)]
    requests_per_client: usize,
    /// The `max_tokens` of each request
    #[arg(long, value_name = "N", value_parser = positive, default_value_t = 64)]
    max_tokens: usize,
    /// `-t` of both servers
    #[arg(long, value_name = "T", value_parser = positive, default_value_t = 2)]
    threads: usize,
    /// `--parallel` of gguf serve (left out when 1), `-np` of llama-server
    #[arg(long, value_name = "N", value_parser = positive, default_value_t = 4)]
    parallel: usize,
    /// `-c` of both servers (llama-server's total context)
    #[arg(long, value_name = "C", value_parser = positive, default_value_t = 4096)]
    ctx: usize,
    /// The results as JSON instead of the table
    #[arg(long)]
    json: bool,
}

/// A count that must be positive.
fn positive(v: &str) -> Result<usize, String> {
    match v.parse::<usize>() {
        Ok(0) => Err("must be positive".into()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// The options, with the model and the binaries found.
struct Options {
    model: PathBuf,
    gguf: PathBuf,
    llama_server: Option<PathBuf>,
    clients: Vec<usize>,
    requests_per_client: usize,
    max_tokens: usize,
    threads: usize,
    parallel: usize,
    ctx: usize,
    json: bool,
}

fn resolve(args: Args, root: &Path) -> Result<Options> {
    ensure!(
        !args.clients.is_empty(),
        "--clients needs at least one level"
    );
    // A known model's name or a path; by default SmolLM2 from the cache (fetched if missing).
    let model =
        crate::bench_vs_llamacpp::model_path(args.model.as_deref().unwrap_or("smollm2-135m"))?;
    let o = Options {
        model,
        gguf: args
            .gguf
            .unwrap_or_else(|| root.join("target/release/gguf")),
        llama_server: args.llama_server,
        clients: args.clients,
        requests_per_client: args.requests_per_client,
        max_tokens: args.max_tokens,
        threads: args.threads,
        parallel: args.parallel,
        ctx: args.ctx,
        json: args.json,
    };
    ensure!(
        o.gguf.is_file(),
        "{} is missing: run `cargo build --release -p gguf-cli` (or pass --gguf PATH)",
        o.gguf.display()
    );
    if let Some(p) = &o.llama_server {
        ensure!(p.is_file(), "{}: no such llama-server", p.display());
    }
    Ok(o)
}

pub fn run(root: &Path, args: Args) -> Result<()> {
    let o = resolve(args, root)?;
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?
        .block_on(load_test(&o))
}

/// Each server started in turn and driven at each level; the report; an error if any request
/// failed.
async fn load_test(o: &Options) -> Result<()> {
    let model_id = o
        .model
        .file_stem()
        .map_or_else(|| "model".into(), |s| s.to_string_lossy().into_owned());
    let mut servers: Vec<(&str, Launch)> = vec![("gguf", Launch::Gguf(o.gguf.clone()))];
    if let Some(p) = &o.llama_server {
        servers.push(("llama-server", Launch::LlamaServer(p.clone())));
    }
    let mut levels = Vec::new();
    for (name, launch) in &servers {
        eprintln!("==> starting {name}");
        let server = ServerProcess::start(launch, o).await?;
        eprintln!("{name} is up on {}; warming up", server.addr);
        let warm = request(
            server.addr,
            &body(&model_id, "Say hello.", o.max_tokens),
            Instant::now(),
        )
        .await;
        if let Some(e) = &warm.error {
            bail!("{name}: the warm-up request failed: {e}{}", server.tail());
        }
        // Prompt numbers go on across levels, so no level meets the prompts (and cached
        // prefixes) of another; both servers get the same numbers.
        let mut first_prompt = 0;
        for &clients in &o.clients {
            let level = run_level(name, server.addr, &model_id, clients, first_prompt, o).await;
            first_prompt += clients * o.requests_per_client;
            eprintln!(
                "{name}: {clients} client(s): {:.1} tok/s, {} error(s)",
                level.tokens_per_s(),
                level.errors
            );
            for e in &level.error_samples {
                eprintln!("  error: {e}");
            }
            levels.push(level);
        }
        drop(server);
    }
    report(o, &levels)?;
    let errors: usize = levels.iter().map(|l| l.errors).sum();
    let requests: usize = levels.iter().map(|l| l.requests).sum();
    ensure!(errors == 0, "{errors} of {requests} requests failed");
    Ok(())
}

/// The table (or JSON) on stdout, one row per server and level, the levels side by side.
fn report(o: &Options, levels: &[Level]) -> Result<()> {
    let theirs = |clients: usize| {
        levels
            .iter()
            .find(|l| l.server == "llama-server" && l.clients == clients)
    };
    let ratio = |l: &Level| {
        (l.server == "gguf")
            .then(|| theirs(l.clients))
            .flatten()
            .map(|t| l.tokens_per_s() / t.tokens_per_s())
    };
    let mut rows: Vec<&Level> = levels.iter().collect();
    rows.sort_by_key(|l| (l.clients, l.server != "gguf"));
    if o.json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|l| {
                json!({
                    "server": l.server,
                    "clients": l.clients,
                    "requests": l.requests,
                    "errors": l.errors,
                    "error_samples": l.error_samples,
                    "completion_tokens": l.completion_tokens,
                    "wall_s": l.wall_s,
                    "tokens_per_s": l.tokens_per_s(),
                    "ttft_p50_ms": percentile(&l.ttft_ms, 50.0),
                    "ttft_p99_ms": percentile(&l.ttft_ms, 99.0),
                    "ratio_vs_llama_server": ratio(l),
                })
            })
            .collect();
        let out = json!({
            "cpu": crate::bench_vs_llamacpp::cpu_description(),
            "model": o.model.display().to_string(),
            "threads": o.threads,
            "parallel": o.parallel,
            "ctx": o.ctx,
            "max_tokens": o.max_tokens,
            "requests_per_client": o.requests_per_client,
            "llama_server": o.llama_server.as_ref().map(|p| p.display().to_string()),
            "rows": rows,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!("{}", crate::bench_vs_llamacpp::cpu_description());
    println!(
        "{}: {} thread(s), {} slot(s), context {}, max_tokens {}, {} request(s) per client",
        o.model.display(),
        o.threads,
        o.parallel,
        o.ctx,
        o.max_tokens,
        o.requests_per_client
    );
    let both = o.llama_server.is_some();
    println!(
        "| server | clients | requests | errors | completion tokens | wall s | tok/s | TTFT p50 ms | TTFT p99 ms |{}",
        if both { " ratio |" } else { "" }
    );
    println!(
        "|---|---|---|---|---|---|---|---|---|{}",
        if both { "---|" } else { "" }
    );
    let ms = |v: Option<f64>| v.map_or_else(|| "-".into(), |v| format!("{v:.0}"));
    for l in rows {
        let ratio = if both {
            format!(
                " {} |",
                ratio(l).map_or_else(String::new, |r| format!("{r:.2}"))
            )
        } else {
            String::new()
        };
        println!(
            "| {} | {} | {} | {} | {} | {:.2} | {:.1} | {} | {} |{ratio}",
            l.server,
            l.clients,
            l.requests,
            l.errors,
            l.completion_tokens,
            l.wall_s,
            l.tokens_per_s(),
            ms(percentile(&l.ttft_ms, 50.0)),
            ms(percentile(&l.ttft_ms, 99.0)),
        );
    }
    Ok(())
}

/// The nearest-rank percentile `p` of `xs` (none for no values).
fn percentile(xs: &[f64], p: f64) -> Option<f64> {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((p / 100.0 * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1));
    v.get(rank - 1).copied()
}

/// One server's results at one concurrency level.
struct Level {
    server: &'static str,
    clients: usize,
    requests: usize,
    errors: usize,
    error_samples: Vec<String>,
    completion_tokens: u64,
    wall_s: f64,
    /// The time to first token of each request that had one.
    ttft_ms: Vec<f64>,
}

impl Level {
    fn tokens_per_s(&self) -> f64 {
        self.completion_tokens as f64 / self.wall_s
    }
}

/// The chat request of prompt `prompt`: streamed, greedy, plain OpenAI fields only.
fn body(model_id: &str, prompt: &str, max_tokens: usize) -> String {
    json!({
        "model": model_id,
        "messages": [{"role": "user", "content": prompt}],
        "stream": true,
        "stream_options": {"include_usage": true},
        "max_tokens": max_tokens,
        "temperature": 0,
    })
    .to_string()
}

fn prompt(k: usize) -> String {
    format!(
        "Write a short story about a {} number {k}.",
        THINGS[k % THINGS.len()]
    )
}

/// `clients` tasks, each sending its requests in sequence; prompts from `first_prompt` on.
async fn run_level(
    server: &'static str,
    addr: SocketAddr,
    model_id: &str,
    clients: usize,
    first_prompt: usize,
    o: &Options,
) -> Level {
    let (per_client, max_tokens) = (o.requests_per_client, o.max_tokens);
    let start = Instant::now();
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            let model_id = model_id.to_string();
            tokio::spawn(async move {
                let mut outcomes = Vec::with_capacity(per_client);
                for i in 0..per_client {
                    let k = first_prompt + c * per_client + i;
                    let body = body(&model_id, &prompt(k), max_tokens);
                    outcomes.push(request(addr, &body, Instant::now()).await);
                }
                outcomes
            })
        })
        .collect();
    let mut results: Vec<Outcome> = Vec::with_capacity(clients * per_client);
    for task in tasks {
        match task.await {
            Ok(outcomes) => results.extend(outcomes),
            Err(_) => results.extend(vec![
                Outcome::failed("the client task panicked".into());
                per_client
            ]),
        }
    }
    let wall_s = start.elapsed().as_secs_f64();
    let failed: Vec<&String> = results.iter().filter_map(|r| r.error.as_ref()).collect();
    Level {
        server,
        clients,
        requests: results.len(),
        errors: failed.len(),
        error_samples: failed.into_iter().take(ERROR_SAMPLES).cloned().collect(),
        completion_tokens: results.iter().map(|r| r.completion_tokens).sum(),
        wall_s,
        ttft_ms: results
            .iter()
            .filter_map(|r| r.ttft.map(|t| t.as_secs_f64() * 1e3))
            .collect(),
    }
}

/// What one request came to.
#[derive(Clone)]
struct Outcome {
    /// From before connecting to the first chunk with non-empty `delta.content`.
    ttft: Option<Duration>,
    /// `usage.completion_tokens`, or without usage the chunks of content.
    completion_tokens: u64,
    error: Option<String>,
}

impl Outcome {
    fn failed(error: String) -> Outcome {
        Outcome {
            ttft: None,
            completion_tokens: 0,
            error: Some(error),
        }
    }
}

/// One streamed chat completion, timed from `start`.
async fn request(addr: SocketAddr, body: &str, start: Instant) -> Outcome {
    let mut ttft = None;
    let mut content_chunks = 0;
    let mut usage = None;
    match stream(
        addr,
        body,
        start,
        &mut ttft,
        &mut content_chunks,
        &mut usage,
    )
    .await
    {
        Ok(()) => Outcome {
            ttft,
            completion_tokens: usage.unwrap_or(content_chunks),
            error: None,
        },
        Err(e) => Outcome {
            ttft,
            completion_tokens: usage.unwrap_or(content_chunks),
            error: Some(format!("{e:#}")),
        },
    }
}

async fn stream(
    addr: SocketAddr,
    body: &str,
    start: Instant,
    ttft: &mut Option<Duration>,
    content_chunks: &mut u64,
    usage: &mut Option<u64>,
) -> Result<()> {
    let request = Request::post("/v1/chat/completions")
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "text/event-stream")
        .body(Full::new(Bytes::copy_from_slice(body.as_bytes())))?;
    let response = send(addr, request).await?;
    let status = response.status();
    let mut lines = Lines::new(response.into_body());
    if status != StatusCode::OK {
        let text = lines.prefix(4096).await;
        bail!("HTTP {}: {}", status.as_u16(), text.trim());
    }
    while let Some(line) = lines.next_line().await.context("reading the stream")? {
        let Some(data) = line.trim_end_matches(['\r', '\n']).strip_prefix("data:") else {
            continue; // blank lines between events, comments, `event:` lines
        };
        let data = data.trim_start();
        if data == "[DONE]" {
            return Ok(());
        }
        let chunk: Value = serde_json::from_str(data)
            .with_context(|| format!("a chunk that is not JSON: {data}"))?;
        if let Some(e) = chunk.get("error") {
            bail!("an error in the stream: {e}");
        }
        let content = chunk["choices"][0]["delta"]["content"].as_str();
        if content.is_some_and(|c| !c.is_empty()) {
            *content_chunks += 1;
            ttft.get_or_insert_with(|| start.elapsed());
        }
        if let Some(n) = chunk["usage"]["completion_tokens"].as_u64() {
            *usage = Some(n);
        }
    }
    bail!("the stream ended without data: [DONE]")
}

/// `GET path`, the body discarded: the status.
async fn get_status(addr: SocketAddr, path: &str) -> Result<u16> {
    let request = Request::get(path).body(Full::new(Bytes::new()))?;
    Ok(send(addr, request).await?.status().as_u16())
}

/// `request` on a new HTTP/1.1 connection to `addr` (`Connection: close`, with its `Host`):
/// the response's head, its body to be read as it comes.
async fn send(addr: SocketAddr, mut request: Request<Full<Bytes>>) -> Result<Response<Incoming>> {
    let headers = request.headers_mut();
    headers.insert(HOST, HeaderValue::try_from(addr.to_string())?);
    headers.insert(CONNECTION, HeaderValue::from_static("close"));
    let tcp = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(addr))
        .await
        .map_err(|_| anyhow!("connecting to {addr}: no answer in {CONNECT_TIMEOUT:?}"))?
        .with_context(|| format!("connecting to {addr}"))?;
    tcp.set_nodelay(true)?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
        .await
        .with_context(|| format!("connecting to {addr}"))?;
    // The connection's I/O runs beside the request; its errors reach the response or the body.
    tokio::spawn(connection);
    tokio::time::timeout(READ_TIMEOUT, sender.send_request(request))
        .await
        .map_err(|_| anyhow!("no response head in {READ_TIMEOUT:?}"))?
        .context("reading the response head")
}

/// A response body's lines as they arrive, each with its line ending (the last one, if the
/// body ends without a newline, without).
struct Lines {
    body: Incoming,
    /// Bytes received and not yet returned.
    pending: Vec<u8>,
    /// The body has ended.
    ended: bool,
}

impl Lines {
    fn new(body: Incoming) -> Lines {
        Lines {
            body,
            pending: Vec::new(),
            ended: false,
        }
    }

    /// The next line, or none at the end of the body. An error when the body breaks off, is
    /// not UTF-8, or sends nothing for [`READ_TIMEOUT`].
    async fn next_line(&mut self) -> Result<Option<String>> {
        loop {
            let end = match self.pending.iter().position(|&b| b == b'\n') {
                Some(i) => i + 1,
                None if self.ended && !self.pending.is_empty() => self.pending.len(),
                None if self.ended => return Ok(None),
                None => {
                    self.fill().await?;
                    continue;
                }
            };
            let line: Vec<u8> = self.pending.drain(..end).collect();
            return Ok(Some(
                String::from_utf8(line).context("a line that is not UTF-8")?,
            ));
        }
    }

    /// Waits for the body's next bytes (trailers are skipped).
    async fn fill(&mut self) -> Result<()> {
        match tokio::time::timeout(READ_TIMEOUT, self.body.frame()).await {
            Err(_) => bail!("no bytes in {READ_TIMEOUT:?}"),
            Ok(None) => self.ended = true,
            Ok(Some(frame)) => {
                if let Ok(data) = frame?.into_data() {
                    self.pending.extend_from_slice(&data);
                }
            }
        }
        Ok(())
    }

    /// Up to `limit` bytes of the rest of the body, as text (for an error message; a read
    /// error ends it early).
    async fn prefix(&mut self, limit: usize) -> String {
        while !self.ended && self.pending.len() < limit && self.fill().await.is_ok() {}
        self.pending.truncate(limit);
        String::from_utf8_lossy(&self.pending).into_owned()
    }
}

/// How to start a server.
enum Launch {
    Gguf(PathBuf),
    LlamaServer(PathBuf),
}

/// A server child process, stopped when dropped (SIGTERM, then SIGKILL after a while).
struct ServerProcess {
    child: Child,
    addr: SocketAddr,
    /// The last lines of its stderr (and stdout), for errors.
    tail: Arc<Mutex<VecDeque<String>>>,
}

impl ServerProcess {
    async fn start(launch: &Launch, o: &Options) -> Result<ServerProcess> {
        let (t, c, np) = (
            o.threads.to_string(),
            o.ctx.to_string(),
            o.parallel.to_string(),
        );
        let (mut cmd, port) = match launch {
            Launch::Gguf(bin) => {
                let mut cmd = Command::new(bin);
                cmd.arg("serve").arg(&o.model).args([
                    "--host",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "-t",
                    &t,
                    "-c",
                    &c,
                ]);
                // Admit every client at once, as llama-server does (its default 16 would do
                // for 16 clients, with nothing to spare).
                let queue = o.clients.iter().max().copied().unwrap_or(1) * 2;
                cmd.args(["--queue", &queue.max(16).to_string()]);
                // Left out for one slot: builds from before `--parallel` take the rest.
                if o.parallel != 1 {
                    cmd.args(["--parallel", &np]);
                }
                (cmd, None)
            }
            Launch::LlamaServer(bin) => {
                let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
                let mut cmd = Command::new(bin);
                cmd.arg("-m")
                    .arg(&o.model)
                    .args(["--host", "127.0.0.1", "--port", &port.to_string()])
                    .args(["-t", &t, "-np", &np, "-c", &c]);
                (cmd, Some(port))
            }
        };
        let what = format!("{cmd:?}");
        eprintln!("{what}");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {what}"))?;
        let tail = Arc::new(Mutex::new(VecDeque::new()));
        // Both pipes are read to their end, or a chatty server would block on a full pipe.
        let (addr_tx, addr_rx) = mpsc::channel();
        for pipe in [
            child
                .stdout
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
            child
                .stderr
                .take()
                .map(|p| Box::new(p) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let (tail, addr_tx) = (tail.clone(), addr_tx.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                    // gguf serve: "serving FILE on http://ADDR (N slots of ...".
                    if let Some(rest) = line.split(" on http://").nth(1) {
                        if let Some(Ok(addr)) = rest.split([' ', '/']).next().map(str::parse) {
                            let _ = addr_tx.send(addr);
                        }
                    }
                    let mut tail = tail.lock().unwrap_or_else(|e| e.into_inner());
                    if tail.len() == STDERR_TAIL {
                        tail.pop_front();
                    }
                    tail.push_back(line);
                }
            });
        }
        let mut server = ServerProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port.unwrap_or(0))),
            tail,
        };
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = server.child.try_wait()? {
                let tail = server.tail();
                let hint = if tail.contains("unexpected argument '--parallel'") {
                    "\n(this gguf has no --parallel yet: rebuild it, or pass --parallel 1)"
                } else {
                    ""
                };
                bail!("{what} exited ({status}) before serving{tail}{hint}");
            }
            ensure!(
                Instant::now() < deadline,
                "{what} did not come up in {STARTUP_TIMEOUT:?}{}",
                server.tail()
            );
            if server.addr.port() == 0 {
                if let Ok(addr) = addr_rx.try_recv() {
                    server.addr = addr;
                }
            }
            if server.addr.port() != 0 && get_status(server.addr, "/health").await.ok() == Some(200)
            {
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The server's last output lines, as the end of an error message.
    fn tail(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(|e| e.into_inner());
        if tail.is_empty() {
            return String::new();
        }
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        format!("; its last output:\n{}", lines.join("\n"))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) on our own child's pid, which is not yet reaped (we hold `child`
            // and have not waited for it successfully), so the pid is not reused.
            unsafe { libc::kill(pid, libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::io::Write;
    use std::net::TcpStream;

    use super::*;

    /// `f` run to its end on a runtime of its own.
    fn block_on<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(f)
    }

    /// Accepts a connection and reads its request up to the end of its `{}` body.
    fn accept_request(listener: &TcpListener) -> TcpStream {
        let (mut s, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buf = [0; 4096];
        while !request.ends_with(b"\r\n\r\n{}") {
            let n = s.read(&mut buf).unwrap();
            assert!(n > 0, "the client closed mid-request");
            request.extend_from_slice(&buf[..n]);
        }
        s
    }

    #[test]
    fn percentiles_by_nearest_rank() {
        let xs: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&xs, 50.0), Some(50.0));
        assert_eq!(percentile(&xs, 99.0), Some(99.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 99.0), Some(3.0));
        assert_eq!(percentile(&[3.0, 1.0, 2.0], 50.0), Some(2.0));
        assert_eq!(percentile(&[], 50.0), None);
    }

    /// A chunked SSE response, split at awkward places, served by a thread.
    #[test]
    fn chunked_stream_is_parsed() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut s = accept_request(&listener);
            let events = concat!(
                "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\n\n",
                "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n",
                "data: {\"choices\":[{\"delta\":{\"content\":\" there\"}}]}\n\n",
                "data: {\"choices\":[],\"usage\":{\"completion_tokens\":3}}\n\n",
                "data: [DONE]\n\n",
            );
            let mut out = String::from("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
            for piece in events.as_bytes().chunks(17) {
                out += &format!("{:x};ext=1\r\n", piece.len());
                out += std::str::from_utf8(piece).unwrap();
                out += "\r\n";
            }
            out += "0\r\n\r\n";
            s.write_all(out.as_bytes()).unwrap();
        });
        let r = block_on(request(addr, "{}", Instant::now()));
        server.join().unwrap();
        assert_eq!(r.error, None);
        assert_eq!(r.completion_tokens, 3);
        assert!(r.ttft.is_some());
    }

    #[test]
    fn stream_without_done_is_an_error() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut s = accept_request(&listener);
            let body = "data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n";
            let out = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            s.write_all(out.as_bytes()).unwrap();
        });
        let r = block_on(request(addr, "{}", Instant::now()));
        server.join().unwrap();
        assert!(r.error.unwrap().contains("[DONE]"));
        assert_eq!(r.completion_tokens, 1);
    }
}
