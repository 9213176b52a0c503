//! `cargo xtask load-test`: concurrent streaming chat clients against `gguf serve` and, with
//! `--llama-server PATH`, against llama.cpp's `llama-server` on the same model, threads, slots
//! and context. For each server and each concurrency level it reports the requests, errors,
//! completion tokens, wall time, aggregate tokens per second (all completion tokens over the
//! level's wall time) and time to first token (p50, p99); with both servers, the ratio of
//! aggregate tokens per second (ours / llama-server's).
//!
//! The client is plain HTTP/1.1 over `std::net::TcpStream`, one OS thread per client: each
//! sends its requests in sequence (`Connection: close`), streamed (`"stream": true` with
//! `stream_options.include_usage`), greedy, with prompts distinct per client, per request and
//! per level, the same set for both servers. A request is an error when it cannot connect,
//! answers other than 200, sends a chunk that is not JSON or holds an `error`, or ends without
//! `data: [DONE]`. The command fails when any request failed.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

/// The options, for `--help` and for an unknown option's error.
const USAGE: &str = "[--model PATH] [--gguf PATH] [--llama-server PATH] [--clients 1,4,16] \
     [--requests-per-client N] [--max-tokens N] [--threads T] [--parallel N] [--ctx C] [--json]";

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

fn parse(args: &[String], root: &Path) -> Result<Options> {
    let mut model = None;
    let mut o = Options {
        model: PathBuf::new(),
        gguf: root.join("target/release/gguf"),
        llama_server: None,
        clients: vec![1, 4, 16],
        requests_per_client: 4,
        max_tokens: 64,
        threads: 2,
        parallel: 4,
        ctx: 4096,
        json: false,
    };
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .with_context(|| format!("{flag} needs a value"))
                .cloned()
        };
        let positive = |v: String| -> Result<usize> {
            let n: usize = v.parse().with_context(|| format!("{flag} {v}"))?;
            ensure!(n > 0, "{flag} must be positive");
            Ok(n)
        };
        match flag.as_str() {
            "--model" => model = Some(value()?),
            "--gguf" => o.gguf = value()?.into(),
            "--llama-server" => o.llama_server = Some(value()?.into()),
            "--clients" => {
                o.clients = value()?
                    .split(',')
                    .map(|c| positive(c.to_string()))
                    .collect::<Result<_>>()?
            }
            "--requests-per-client" => o.requests_per_client = positive(value()?)?,
            "--max-tokens" => o.max_tokens = positive(value()?)?,
            "--threads" => o.threads = positive(value()?)?,
            "--parallel" => o.parallel = positive(value()?)?,
            "--ctx" => o.ctx = positive(value()?)?,
            "--json" => o.json = true,
            "--help" | "-h" => {
                println!("cargo xtask load-test {USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown option {other} ({USAGE})"),
        }
    }
    ensure!(!o.clients.is_empty(), "--clients needs at least one level");
    // A known model's name or a path; by default SmolLM2 from the cache (fetched if missing).
    o.model = crate::bench_vs_llamacpp::model_path(model.as_deref().unwrap_or("smollm2-135m"))?;
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

pub fn run(root: &Path, args: &[String]) -> Result<()> {
    let o = parse(args, root)?;
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
        let server = ServerProcess::start(launch, &o)?;
        eprintln!("{name} is up on {}; warming up", server.addr);
        let warm = request(
            server.addr,
            &body(&model_id, "Say hello.", o.max_tokens),
            Instant::now(),
        );
        if let Some(e) = &warm.error {
            bail!("{name}: the warm-up request failed: {e}{}", server.tail());
        }
        // Prompt numbers go on across levels, so no level meets the prompts (and cached
        // prefixes) of another; both servers get the same numbers.
        let mut first_prompt = 0;
        for &clients in &o.clients {
            let level = run_level(name, server.addr, &model_id, clients, first_prompt, &o);
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
    report(&o, &levels)?;
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

/// `clients` threads, each sending its requests in sequence; prompts from `first_prompt` on.
fn run_level(
    server: &'static str,
    addr: SocketAddr,
    model_id: &str,
    clients: usize,
    first_prompt: usize,
    o: &Options,
) -> Level {
    let per_client = o.requests_per_client;
    let start = Instant::now();
    let results: Vec<Outcome> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|c| {
                s.spawn(move || {
                    (0..per_client)
                        .map(|i| {
                            let k = first_prompt + c * per_client + i;
                            request(
                                addr,
                                &body(model_id, &prompt(k), o.max_tokens),
                                Instant::now(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join().unwrap_or_else(|_| {
                    vec![Outcome::failed("the client thread panicked".into()); per_client]
                })
            })
            .collect()
    });
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
fn request(addr: SocketAddr, body: &str, start: Instant) -> Outcome {
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
    ) {
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

fn stream(
    addr: SocketAddr,
    body: &str,
    start: Instant,
    ttft: &mut Option<Duration>,
    content_chunks: &mut u64,
    usage: &mut Option<u64>,
) -> Result<()> {
    let response = post(addr, "/v1/chat/completions", body)?;
    if response.status != 200 {
        let mut text = String::new();
        let _ = response.body.take(4096).read_to_string(&mut text);
        bail!("HTTP {}: {}", response.status, text.trim());
    }
    let mut lines = BufReader::new(response.body);
    let mut line = String::new();
    loop {
        line.clear();
        if lines.read_line(&mut line).context("reading the stream")? == 0 {
            bail!("the stream ended without data: [DONE]");
        }
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
}

/// A response's status and its body as it comes, unframed.
struct Response {
    status: u16,
    body: Body,
}

/// `GET path`, the body discarded: the status.
fn get_status(addr: SocketAddr, path: &str) -> Result<u16> {
    let mut stream = connect(addr)?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )?;
    Ok(read_head(stream)?.status)
}

fn post(addr: SocketAddr, path: &str, body: &str) -> Result<Response> {
    let mut stream = connect(addr)?;
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Accept: text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(body.as_bytes())?;
    stream.flush()?;
    read_head(stream)
}

fn connect(addr: SocketAddr) -> Result<TcpStream> {
    let stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT)
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Reads the status line and headers; the body is framed by them.
fn read_head(stream: TcpStream) -> Result<Response> {
    let mut r = BufReader::new(stream);
    let mut line = String::new();
    r.read_line(&mut line).context("reading the status line")?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("not an HTTP status line: {:?}", line.trim_end()))?;
    let mut framing = Framing::UntilClose;
    loop {
        line.clear();
        ensure!(
            r.read_line(&mut line).context("reading the headers")? > 0,
            "the connection closed in the headers"
        );
        let header = line.trim_end_matches(['\r', '\n']);
        if header.is_empty() {
            break;
        }
        let Some((name, value)) = header.split_once(':') else {
            bail!("a malformed header: {header:?}");
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
        {
            framing = Framing::Chunked { left: 0 };
        } else if name.eq_ignore_ascii_case("content-length")
            && !matches!(framing, Framing::Chunked { .. })
        {
            framing = Framing::Length(value.parse().context("Content-Length")?);
        }
    }
    Ok(Response {
        status,
        body: Body { inner: r, framing },
    })
}

/// How a body ends.
enum Framing {
    /// `Transfer-Encoding: chunked`, with `left` bytes of the current chunk to read.
    Chunked { left: u64 },
    /// `Content-Length`, that many bytes left.
    Length(u64),
    /// Neither: the body runs to the end of the connection.
    UntilClose,
    /// The chunked body's last chunk is read.
    Done,
}

/// A response body as plain bytes, without its chunked framing.
struct Body {
    inner: BufReader<TcpStream>,
    framing: Framing,
}

impl Body {
    fn line(&mut self) -> std::io::Result<String> {
        let mut line = String::new();
        if self.inner.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        Ok(line.trim_end_matches(['\r', '\n']).to_string())
    }
}

impl Read for Body {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let bad = |msg: String| std::io::Error::new(std::io::ErrorKind::InvalidData, msg);
        loop {
            match &mut self.framing {
                Framing::Done | Framing::Length(0) => return Ok(0),
                Framing::UntilClose => return self.inner.read(buf),
                Framing::Length(left) => {
                    let want = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                    let n = self.inner.read(&mut buf[..want])?;
                    if n == 0 && want > 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                    *left -= n as u64;
                    return Ok(n);
                }
                Framing::Chunked { left: 0 } => {
                    let size_line = self.line()?;
                    let size = size_line.split(';').next().unwrap_or("").trim();
                    let size = u64::from_str_radix(size, 16)
                        .map_err(|_| bad(format!("a bad chunk size line: {size_line:?}")))?;
                    if size == 0 {
                        // Trailers, up to the blank line.
                        while !self.line()?.is_empty() {}
                        self.framing = Framing::Done;
                    } else {
                        self.framing = Framing::Chunked { left: size };
                    }
                }
                Framing::Chunked { left } => {
                    let want = buf.len().min(usize::try_from(*left).unwrap_or(usize::MAX));
                    let n = self.inner.read(&mut buf[..want])?;
                    if n == 0 && want > 0 {
                        return Err(std::io::ErrorKind::UnexpectedEof.into());
                    }
                    *left -= n as u64;
                    if *left == 0 && !self.line()?.is_empty() {
                        return Err(bad("a chunk not followed by CRLF".into()));
                    }
                    return Ok(n);
                }
            }
        }
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
    fn start(launch: &Launch, o: &Options) -> Result<ServerProcess> {
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
            if server.addr.port() != 0 && get_status(server.addr, "/health").ok() == Some(200) {
                return Ok(server);
            }
            std::thread::sleep(Duration::from_millis(100));
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
    use super::*;

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
        let r = request(addr, "{}", Instant::now());
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
        let r = request(addr, "{}", Instant::now());
        server.join().unwrap();
        assert!(r.error.unwrap().contains("[DONE]"));
        assert_eq!(r.completion_tokens, 1);
    }
}
