//! The server's `--parallel` engine in-process on 127.0.0.1:0 with the tiny llama fixture:
//! concurrent greedy requests generate what lone sessions generate, `/metrics` counts what
//! happened (prefix reuse included), a client that leaves cancels its generation, and a long
//! prompt is taken in chunks between the other streams' tokens.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::task::Poll;
use std::time::{Duration, Instant};

use gguf_model::{SamplerConfig, SessionOptions, StopReason};
use serde_json::{json, Value};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;
use tokio::sync::OwnedMutexGuard;

mod common;
use common::{
    config, get, metrics, model, open_post, parse_metrics, pooled_model, post, send,
    session_options, sse_data, start_model, start_with, Reply, Running, N_CTX,
};

/// What a lone session generates greedily for `prompt`: the text, why it stopped, and the
/// count of tokens generated.
fn alone(prompt: &str, max_tokens: usize) -> (String, StopReason, usize) {
    let (text, stop, pieces) = alone_with(session_options(), prompt, max_tokens);
    (text, stop, pieces.len())
}

/// What a lone session with `options` generates greedily for `prompt`: the text, why it
/// stopped, and each token's piece of the text.
fn alone_with(
    options: SessionOptions,
    prompt: &str,
    max_tokens: usize,
) -> (String, StopReason, Vec<String>) {
    let model = model();
    let mut session = model.session(options).unwrap();
    let mut generation = session
        .generate(prompt, &SamplerConfig::greedy(), max_tokens)
        .unwrap();
    let mut pieces = Vec::new();
    for token in &mut generation {
        pieces.push(token.unwrap().text);
    }
    let text = generation.text().to_string();
    (text, generation.stop_reason().unwrap(), pieces)
}

/// OpenAI's `finish_reason` for a lone session's stop.
fn finish_reason(stop: StopReason) -> &'static str {
    match stop {
        StopReason::MaxTokens | StopReason::ContextFull => "length",
        _ => "stop",
    }
}

/// The chunks of a streamed response (after checking it ends with `[DONE]`).
fn chunks(reply: &Reply) -> Vec<Value> {
    assert_eq!(reply.status, 200, "{}", reply.text());
    assert!(reply
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let events = sse_data(&reply.body);
    assert_eq!(events.last().map(String::as_str), Some("[DONE]"));
    events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect()
}

/// `/metrics` until `ready` holds of it (at most 5 s, every 20 ms); the last one read.
async fn metrics_when(
    addr: SocketAddr,
    ready: impl Fn(&HashMap<String, f64>) -> bool,
) -> HashMap<String, f64> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let m = metrics(addr).await;
        if ready(&m) || Instant::now() > deadline {
            return m;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_greedy_requests_equal_lone_sessions() {
    let mut config = config();
    config.parallel = 4;
    // Each slot has the lone session's context.
    config.session.n_ctx = 4 * N_CTX;
    // Held until all six are in, so that four start together and two wait for a slot.
    let mut server = start_with(config, true).await;
    let prompts = [
        "Once upon a time",
        "The little dog ran",
        "Hello world, said the",
        "In the morning, Lily went to the park and",
        "Tom had a red ball.",
        "One day a bird",
    ];
    let max_tokens = 24;
    let requests: Vec<_> = prompts
        .iter()
        .enumerate()
        .map(|(i, &prompt)| {
            let stream = i % 2 == 1;
            let mut body = json!({"model": "tiny", "prompt": prompt, "temperature": 0, "max_tokens": max_tokens});
            if stream {
                body["stream"] = json!(true);
                body["stream_options"] = json!({"include_usage": true});
            }
            let addr = server.addr;
            tokio::spawn(async move { post(addr, "/v1/completions", &body).await })
        })
        .collect();
    let m = metrics_when(server.addr, |m| m["gguf_queue_depth"] == 6.0).await;
    assert_eq!(m["gguf_queue_depth"], 6.0, "{m:?}");
    assert_eq!(m["gguf_steps_total"], 0.0);
    drop(server.hold.take());
    let mut generated = 0;
    for (i, (request, prompt)) in requests.into_iter().zip(prompts).enumerate() {
        let reply = request.await.unwrap();
        let (expected, stop, tokens) = alone(prompt, max_tokens);
        assert!(!expected.is_empty(), "{prompt:?}");
        let prompt_tokens = model()
            .tokenizer()
            .encode(
                prompt.as_bytes(),
                gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
            )
            .len();
        let (text, finish, usage) = if i % 2 == 1 {
            let chunks = chunks(&reply);
            for c in &chunks {
                assert_eq!(c["object"], "text_completion");
                assert_eq!(c["id"], chunks[0]["id"]);
            }
            let text: String = chunks
                .iter()
                .filter_map(|c| c["choices"][0]["text"].as_str())
                .collect();
            // The finish reason, then the usage in a chunk of no choices.
            let n = chunks.len();
            assert_eq!(chunks[n - 1]["choices"], json!([]), "{prompt:?}");
            (
                text,
                chunks[n - 2]["choices"][0]["finish_reason"].clone(),
                chunks[n - 1]["usage"].clone(),
            )
        } else {
            let v = reply.ok_json();
            assert_eq!(v["object"], "text_completion");
            (
                v["choices"][0]["text"].as_str().unwrap().to_string(),
                v["choices"][0]["finish_reason"].clone(),
                v["usage"].clone(),
            )
        };
        assert_eq!(text, expected, "{prompt:?} (stream: {})", i % 2 == 1);
        assert_eq!(finish, finish_reason(stop), "{prompt:?}");
        assert_eq!(
            usage,
            json!({
                "prompt_tokens": prompt_tokens,
                "completion_tokens": tokens,
                "total_tokens": prompt_tokens + tokens,
            }),
            "{prompt:?}"
        );
        generated += tokens;
    }
    // They were generated together: fewer forward passes than one per token generated (what
    // one request after the other takes).
    let m = metrics_when(server.addr, |m| m["gguf_queue_depth"] == 0.0).await;
    assert_eq!(m["gguf_requests_total"], 6.0);
    assert_eq!(m["gguf_completion_tokens_total"], generated as f64);
    let steps = m["gguf_steps_total"];
    assert!(
        steps < generated as f64,
        "{steps} steps for {generated} tokens"
    );
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_requests_tokens_and_prefix_reuse() {
    let server = start_with(config(), false).await;
    let reply = get(server.addr, "/metrics").await;
    assert_eq!(reply.status, 200);
    assert!(
        reply
            .header("content-type")
            .unwrap()
            .starts_with("text/plain"),
        "{:?}",
        reply.header("content-type")
    );
    let before = parse_metrics(&reply.text());
    assert_eq!(before["gguf_requests_total"], 0.0);
    assert_eq!(before["gguf_slots"], 2.0);

    let mut messages = json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello there, how are you?"},
    ]);
    let first = post(
        server.addr,
        "/v1/chat/completions",
        &json!({"messages": messages, "temperature": 0, "max_tokens": 8}),
    )
    .await;
    let first = first.ok_json();
    // The conversation goes on: its prompt begins with the first one and its reply.
    let list = messages.as_array_mut().unwrap();
    list.push(first["choices"][0]["message"].clone());
    list.push(json!({"role": "user", "content": "And what did you do today?"}));
    let second = post(
        server.addr,
        "/v1/chat/completions",
        &json!({"messages": messages, "temperature": 0, "max_tokens": 8}),
    )
    .await;
    let second = second.ok_json();
    let usage = |key: &str| {
        (first["usage"][key].as_u64().unwrap() + second["usage"][key].as_u64().unwrap()) as f64
    };

    // The engine empties the slot just after sending the reply's end (its queue place and
    // tokens are given back and counted before): wait until the gauges say so.
    let after = metrics_when(server.addr, |m| {
        m["gguf_queue_depth"] == 0.0 && m["gguf_requests_active"] == 0.0
    })
    .await;
    let rose = |name: &str| after[name] - before[name];
    assert_eq!(rose("gguf_requests_total"), 2.0);
    assert_eq!(
        rose("gguf_completion_tokens_total"),
        usage("completion_tokens")
    );
    assert_eq!(rose("gguf_prompt_tokens_total"), usage("prompt_tokens"));
    // The second request took the first one's slot and evaluated only what was new.
    let cached = rose("gguf_prompt_tokens_cached_total");
    assert!(cached > 0.0, "{after:?}");
    assert!(
        cached < second["usage"]["prompt_tokens"].as_f64().unwrap(),
        "{after:?}"
    );
    assert_eq!(rose("gguf_requests_cancelled_total"), 0.0, "{after:?}");
    assert_eq!(rose("gguf_requests_rejected_total"), 0.0);
    assert!(rose("gguf_steps_total") > 0.0);
    assert_eq!(after["gguf_slots"], 2.0);
    assert_eq!(after["gguf_queue_depth"], 0.0);
    assert_eq!(after["gguf_requests_active"], 0.0);
    assert_eq!(after["gguf_requests_waiting"], 0.0);

    // Every sample has its HELP and TYPE lines, just before it.
    let text = get(server.addr, "/metrics").await.text();
    let lines: Vec<&str> = text.lines().collect();
    let mut samples = 0;
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with('#') {
            continue;
        }
        let name = line.split(' ').next().unwrap();
        assert!(name.starts_with("gguf_"), "{line}");
        assert!(i >= 2, "{line}");
        assert!(
            lines[i - 2].starts_with(&format!("# HELP {name} ")),
            "{text}"
        );
        let kind = lines[i - 1]
            .strip_prefix(&format!("# TYPE {name} "))
            .unwrap_or_else(|| panic!("no TYPE for {name}: {text}"));
        assert!(["counter", "gauge"].contains(&kind), "{line}: {kind}");
        // Counters end in `_total`, as Prometheus names them.
        assert_eq!(kind == "counter", name.ends_with("_total"), "{name}");
        samples += 1;
    }
    assert_eq!(samples, after.len());
    server.shut_down().await;

    // With a key, /metrics needs it too.
    let mut config = config();
    config.api_keys = vec!["k".into()];
    let server = start_with(config, false).await;
    let reply = get(server.addr, "/metrics").await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.json()["error"]["code"], "invalid_api_key");
    let reply = send(
        server.addr,
        "GET",
        "/metrics",
        &[("Authorization", "Bearer k")],
        b"",
    )
    .await;
    assert_eq!(reply.status, 200);
    assert!(parse_metrics(&reply.text()).contains_key("gguf_requests_total"));
    server.shut_down().await;
}

/// The engine held by a test and let run one forward pass at a time. The engine takes the
/// gate for each step and tokio's mutex is fair: released while the engine waits for it, the
/// gate goes to the engine, and the test's next lock waits for that step to end.
struct Stepper {
    addr: SocketAddr,
    gate: Option<OwnedMutexGuard<()>>,
}

impl Stepper {
    /// The engine of `server`, started held.
    fn new(server: &mut Running) -> Stepper {
        Stepper {
            addr: server.addr,
            gate: Some(server.hold.take().expect("started with the engine held")),
        }
    }

    /// Lets the engine take the gate if it waits for it, and takes it back: the metrics after
    /// that (a step, or none when the engine was not waiting).
    async fn cycle(&mut self) -> HashMap<String, f64> {
        let gate = self.gate.take().expect("held");
        let mutex = OwnedMutexGuard::mutex(&gate).clone();
        // In the gate's queue (behind the engine, if it waits) before the gate is let go, so
        // that the engine runs one step however late this task runs again.
        let mut next = Box::pin(mutex.lock_owned());
        std::future::poll_fn(|cx| {
            assert!(next.as_mut().poll(cx).is_pending());
            Poll::Ready(())
        })
        .await;
        drop(gate);
        self.gate = Some(next.await);
        metrics(self.addr).await
    }

    /// Lets the engine run exactly one step: the metrics after it.
    async fn step(&mut self) -> HashMap<String, f64> {
        let before = metrics(self.addr).await["gguf_steps_total"];
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let m = self.cycle().await;
            match m["gguf_steps_total"] - before {
                0.0 => {
                    assert!(Instant::now() < deadline, "the engine took no step: {m:?}");
                    // Not waiting for the gate yet: give it a moment to.
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
                1.0 => return m,
                n => panic!("{n} steps at once"),
            }
        }
    }

    /// Cycles until nothing is admitted any more (at most 5 s): the metrics then.
    async fn until_idle(&mut self) -> HashMap<String, f64> {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let m = self.cycle().await;
            if m["gguf_queue_depth"] == 0.0 || Instant::now() > deadline {
                return m;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Lets the engine run freely.
    fn release(&mut self) {
        self.gate = None;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_a_non_streamed_request_cancels_it() {
    let mut config = config();
    config.parallel = 1;
    config.session.n_ctx = N_CTX;
    // The fixture generates 200 tokens in a few milliseconds: the engine is held and stepped
    // by the test, so that the client leaves in the middle.
    let mut server = start_with(config, true).await;
    let mut engine = Stepper::new(&mut server);
    let prompt = "Once upon a time, in a small house at the edge of a big forest, there lived \
                  a little girl named Lily who loved to play outside with her dog.";
    let max_tokens = 200;
    let body = json!({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0});
    let mut stream = open_post(server.addr, "/v1/completions", &body).await;
    let m = metrics_when(server.addr, |m| m["gguf_requests_active"] == 1.0).await;
    assert_eq!(m["gguf_requests_active"], 1.0, "{m:?}");
    for generated in 1..=3 {
        let m = engine.step().await;
        assert_eq!(m["gguf_completion_tokens_total"], generated as f64);
    }
    // Nothing yet: the whole response comes at the end.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let mut byte = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(1), stream.read(&mut byte)).await;
    assert!(early.is_err(), "an answer already: {early:?}");
    drop(stream);
    // The engine let go of it (its slot free) within a few steps: the server noticed the
    // client leave and dropped the handler, closing the generation's channel.
    let m = engine.until_idle().await;
    engine.release();
    assert_eq!(m["gguf_queue_depth"], 0.0, "{m:?}");
    let generated = m["gguf_completion_tokens_total"];
    assert!(generated < max_tokens as f64, "{m:?}");
    assert_eq!(
        m["gguf_requests_cancelled_total"], 1.0,
        "the generation ended after {generated} tokens but was not counted as cancelled: {m:?}"
    );
    // The engine is free again.
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": "Once", "max_tokens": 3}),
    )
    .await;
    assert_eq!(reply.status, 200);
    let m = metrics_when(server.addr, |m| m["gguf_queue_depth"] == 0.0).await;
    assert_eq!(m["gguf_requests_cancelled_total"], 1.0, "{m:?}");
    server.shut_down().await;
}

/// The `data:` payloads of a streamed completion as they arrive.
struct Events {
    stream: TcpStream,
    buffer: Vec<u8>,
    head: bool,
}

impl Events {
    async fn open(addr: SocketAddr, body: &Value) -> Events {
        let stream = open_post(addr, "/v1/completions", body).await;
        Events {
            stream,
            buffer: Vec::new(),
            head: false,
        }
    }

    /// Nothing arrives within `wait`.
    async fn quiet(&mut self, wait: Duration) -> bool {
        let mut data = [0u8; 4096];
        match tokio::time::timeout(wait, self.stream.read(&mut data)).await {
            Err(_) => true,
            Ok(read) => {
                let n = read.unwrap();
                self.buffer.extend_from_slice(&data[..n]);
                false
            }
        }
    }

    /// The next event's payload, `None` at the end of the response.
    async fn next(&mut self) -> Option<String> {
        loop {
            if !self.head {
                if let Some(end) = self.buffer.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&self.buffer[..end]).into_owned();
                    if !head.starts_with("HTTP/1.1 200") {
                        let _ = self.stream.read_to_end(&mut self.buffer).await;
                        panic!("{}", String::from_utf8_lossy(&self.buffer));
                    }
                    assert!(head.to_ascii_lowercase().contains("chunked"), "{head}");
                    self.buffer.drain(..end + 4);
                    self.head = true;
                }
            }
            // The chunked body's framing, around one event's `data: ...\n\n` a chunk.
            if self.head {
                if let Some(eol) = self.buffer.windows(2).position(|w| w == b"\r\n") {
                    let size_text = std::str::from_utf8(&self.buffer[..eol]).unwrap();
                    let size = usize::from_str_radix(size_text.trim(), 16).unwrap();
                    if size == 0 {
                        return None;
                    }
                    if self.buffer.len() >= eol + 2 + size + 2 {
                        let chunk = self.buffer[eol + 2..eol + 2 + size].to_vec();
                        self.buffer.drain(..eol + 2 + size + 2);
                        let events = sse_data(&chunk);
                        assert_eq!(events.len(), 1, "one event a chunk: {events:?}");
                        return events.into_iter().next();
                    }
                }
            }
            let mut data = [0u8; 4096];
            let n = tokio::time::timeout(Duration::from_secs(30), self.stream.read(&mut data))
                .await
                .expect("more of the stream in time")
                .unwrap();
            if n == 0 {
                return None;
            }
            self.buffer.extend_from_slice(&data[..n]);
        }
    }

    /// The text of the next event (`None` for `[DONE]` or the end), and its finish reason.
    async fn next_text(&mut self) -> Option<(String, Value)> {
        let event = self.next().await?;
        if event == "[DONE]" {
            return None;
        }
        let v: Value = serde_json::from_str(&event).unwrap();
        let choice = &v["choices"][0];
        Some((
            choice["text"].as_str().unwrap().to_string(),
            choice["finish_reason"].clone(),
        ))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_prompt_does_not_stall_other_streams() {
    let n_batch = 16;
    let mut config = config();
    // A long prompt takes several steps.
    config.session.n_batch = n_batch;
    let slot_options = SessionOptions {
        n_batch,
        ..session_options()
    };
    // Stepped by the test: the fixture is too fast to watch otherwise.
    let mut server = start_with(config, true).await;
    let mut engine = Stepper::new(&mut server);
    let token_count = |text: &str| {
        model()
            .tokenizer()
            .encode(
                text.as_bytes(),
                gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
            )
            .len()
    };

    // A streams 40 tokens.
    let (a_prompt, a_max) = ("Once upon a time", 40);
    let (a_expected, a_stop, a_pieces) = alone_with(slot_options, a_prompt, a_max);
    assert_eq!(a_stop, StopReason::MaxTokens, "{a_expected:?}");
    let mut a = Events::open(
        server.addr,
        &json!({"prompt": a_prompt, "max_tokens": a_max, "temperature": 0, "stream": true}),
    )
    .await;
    let m = metrics_when(server.addr, |m| m["gguf_requests_active"] == 1.0).await;
    assert_eq!(m["gguf_requests_active"], 1.0, "{m:?}");
    // A's prompt in the first step; then B arrives, a prompt of several batches.
    let m = engine.step().await;
    let (mut evaluated, mut generated) = (
        m["gguf_tokens_evaluated_total"],
        m["gguf_completion_tokens_total"],
    );
    assert_eq!(evaluated, token_count(a_prompt) as f64);
    assert_eq!(generated, 1.0);
    let b_prompt = "Once upon a time there was a little girl named Lily. She liked to play in the \
                    park with her friends. One day she saw a big red ball under a tree and ran \
                    to get it, but a dog was there first. The dog wagged its tail and";
    let b_tokens = token_count(b_prompt);
    assert!(b_tokens > 5 * n_batch, "{b_tokens}");
    let mut b = Events::open(
        server.addr,
        &json!({"prompt": b_prompt, "max_tokens": 4, "temperature": 0, "stream": true}),
    )
    .await;

    // Step by step until B's prompt is in: each step evaluates A's next token and a chunk of
    // B's prompt, and A's stream receives its token's text while B's has nothing yet.
    let (mut a_tokens, mut a_text, mut b_prefilled, mut shared_steps) = (1, String::new(), 0, 0);
    while b_prefilled < b_tokens {
        assert!(
            a_tokens < a_max,
            "B's prompt was not taken while A generated"
        );
        let m = engine.step().await;
        let step_evaluated = m["gguf_tokens_evaluated_total"] - evaluated;
        let step_generated = m["gguf_completion_tokens_total"] - generated;
        (evaluated, generated) = (
            m["gguf_tokens_evaluated_total"],
            m["gguf_completion_tokens_total"],
        );
        assert!(step_evaluated <= n_batch as f64, "{step_evaluated}");
        // A's token, and the rest B's.
        let b_part = step_evaluated as usize - 1;
        b_prefilled += b_part;
        a_tokens += 1;
        if b_prefilled >= b_tokens {
            // B's last chunk: A's token and B's first.
            assert!(step_generated >= 1.0, "{m:?}");
            break;
        }
        assert_eq!(step_generated, 1.0, "{m:?}");
        let a_so_far: String = a_pieces[..a_tokens].concat();
        while a_text != a_so_far {
            let (text, _) = a.next_text().await.expect("A's next event");
            a_text.push_str(&text);
            assert!(a_so_far.starts_with(&a_text), "{a_text:?} {a_so_far:?}");
        }
        if b_part > 0 {
            assert!(b.quiet(Duration::from_millis(20)).await, "B answered early");
            shared_steps += 1;
        }
    }
    assert!(
        shared_steps >= 4,
        "B's prompt of {b_tokens} tokens shared only {shared_steps} steps with A's tokens"
    );

    // Both run to their ends: A's text is the lone session's.
    engine.release();
    let mut a_finish = Value::Null;
    while let Some((text, finish)) = a.next_text().await {
        a_text.push_str(&text);
        if !finish.is_null() {
            a_finish = finish;
        }
    }
    assert_eq!(a_text, a_expected);
    assert_eq!(a_finish, "length");
    let mut b_text = String::new();
    while let Some((text, _)) = b.next_text().await {
        b_text.push_str(&text);
    }
    assert!(!b_text.is_empty());
    let m = metrics_when(server.addr, |m| m["gguf_queue_depth"] == 0.0).await;
    assert_eq!(m["gguf_requests_total"], 2.0);
    assert_eq!(m["gguf_requests_cancelled_total"], 0.0);
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prompt_longer_than_the_batch_alone_is_taken_in_chunks() {
    let n_batch = 16;
    let mut config = config();
    config.session.n_batch = n_batch;
    let server = start_with(config, false).await;
    // Alone in the engine: its earlier chunks are the only inputs of their steps.
    let prompt = "Once upon a time there was a little girl named Lily. She liked to play in the \
                  park with her friends.";
    let tokens = model()
        .tokenizer()
        .encode(
            prompt.as_bytes(),
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
        )
        .len();
    assert!(tokens > 2 * n_batch, "{tokens}");
    let options = SessionOptions {
        n_batch,
        ..session_options()
    };
    let (expected, stop, pieces) = alone_with(options, prompt, 8);
    for stream in [false, true] {
        let reply = post(
            server.addr,
            "/v1/completions",
            &json!({"prompt": prompt, "max_tokens": 8, "temperature": 0, "stream": stream}),
        )
        .await;
        let (text, finish, usage) = if stream {
            let chunks = chunks(&reply);
            let text: String = chunks
                .iter()
                .filter_map(|c| c["choices"][0]["text"].as_str())
                .collect();
            let finish = chunks.last().unwrap()["choices"][0]["finish_reason"].clone();
            (text, finish, None)
        } else {
            let v = reply.ok_json();
            (
                v["choices"][0]["text"].as_str().unwrap().to_string(),
                v["choices"][0]["finish_reason"].clone(),
                Some(v["usage"].clone()),
            )
        };
        assert_eq!(text, expected, "stream: {stream}");
        assert_eq!(finish, finish_reason(stop));
        if let Some(usage) = usage {
            assert_eq!(usage["prompt_tokens"], tokens);
            assert_eq!(usage["completion_tokens"], pieces.len());
        }
    }
    server.shut_down().await;
}

/// An embeddings request of many inputs runs one input a step between the generations' steps,
/// is counted in the gauges while it runs, and ends as soon as its client leaves (the audit's
/// abandoned request of 2,048 inputs held the engine for minutes while chats waited).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_share_the_engine_and_end_with_their_client() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = start_model(pooled_model(dir.path()), config(), true).await;
    let mut engine = Stepper::new(&mut server);
    let inputs: Vec<String> = (0..50).map(|i| format!("input number {i}")).collect();
    let embeddings = open_post(server.addr, "/v1/embeddings", &json!({"input": inputs})).await;
    let m = metrics_when(server.addr, |m| m["gguf_requests_active"] == 1.0).await;
    assert_eq!(m["gguf_requests_active"], 1.0, "{m:?}");
    let max_tokens = 5;
    let mut chat = Events::open(
        server.addr,
        &json!({"prompt": "Once upon a time", "max_tokens": max_tokens, "temperature": 0,
                "stream": true}),
    )
    .await;
    // The stream runs to its end in a few steps while the embeddings are still under way.
    let (mut steps, mut m) = (0, HashMap::new());
    while steps < 4 * max_tokens {
        m = engine.step().await;
        steps += 1;
        if m["gguf_completion_tokens_total"] == max_tokens as f64 {
            break;
        }
    }
    assert_eq!(
        m["gguf_completion_tokens_total"], max_tokens as f64,
        "{m:?}"
    );
    assert_eq!(m["gguf_requests_active"], 1.0, "the embeddings: {m:?}");
    assert_eq!(m["gguf_requests_total"], 2.0, "{m:?}");
    let mut text = String::new();
    while let Some((piece, _)) = chat.next_text().await {
        text.push_str(&piece);
    }
    assert!(!text.is_empty());
    // The embeddings client leaves: the request ends at the next turn, with most of its
    // inputs never computed.
    drop(embeddings);
    let m = engine.until_idle().await;
    engine.release();
    assert_eq!(m["gguf_queue_depth"], 0.0, "{m:?}");
    assert_eq!(m["gguf_requests_active"], 0.0, "{m:?}");
    assert_eq!(m["gguf_requests_cancelled_total"], 1.0, "{m:?}");
    assert!(
        m["gguf_steps_total"] < 2.0 * steps as f64 + 5.0,
        "the abandoned embeddings kept running: {m:?}"
    );
    server.shut_down().await;
}
