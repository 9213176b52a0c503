//! The server in-process on 127.0.0.1:0 with the tiny llama fixture, spoken to over raw
//! HTTP/1.1: greedy replies equal the engine's own, streaming, usage, errors and limits.

use gguf_model::{SamplerConfig, StopReason};
use gguf_server::Server;
use gguf_tokenizer::chat::ChatMessage;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

mod common;
use common::{
    config, get, model, model_with_template, open_post, pooled_model, post, send, session_options,
    sse_data, start, start_model, start_with,
};

fn messages() -> Vec<ChatMessage> {
    vec![
        ChatMessage::new("system", "You are terse."),
        ChatMessage::new("user", "Hello there, how are you?"),
    ]
}

fn messages_json() -> Value {
    json!([
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello there, how are you?"},
    ])
}

/// What the engine itself generates, greedily, for the chat or for a raw prompt, and the
/// prompt's token count.
fn direct(chat: bool, prompt: &str, max_tokens: usize) -> (String, Option<StopReason>, usize) {
    let model = model();
    let mut session = model.session(session_options()).unwrap();
    let greedy = SamplerConfig::greedy();
    let (template, _) = model.chat_template(Some("chatml")).unwrap();
    let mut generation = if chat {
        session
            .chat_with(&template, &messages(), &greedy, max_tokens)
            .unwrap()
    } else {
        session.generate(prompt, &greedy, max_tokens).unwrap()
    };
    for token in &mut generation {
        token.unwrap();
    }
    let text = generation.text().to_string();
    let stop = generation.stop_reason();
    drop(generation);
    (text, stop, session.tokens().len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_chat_equals_the_engine() {
    let server = start().await;
    let (expected, stop, _) = direct(true, "", 24);
    assert!(!expected.is_empty());
    let reply = post(
        server.addr,
        "/v1/chat/completions",
        &json!({"model": "tiny", "messages": messages_json(), "temperature": 0, "max_tokens": 24}),
    )
    .await;
    let v = reply.ok_json();
    assert_eq!(v["object"], "chat.completion");
    assert_eq!(v["model"], "tiny");
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert!(v["created"].is_u64());
    let choice = &v["choices"][0];
    assert_eq!(choice["message"]["role"], "assistant");
    assert_eq!(choice["message"]["content"], expected.as_str());
    let finish = if stop == Some(StopReason::MaxTokens) {
        "length"
    } else {
        "stop"
    };
    assert_eq!(choice["finish_reason"], finish);
    // The prompt's tokens: what chatml renders, with BOS.
    let model = model();
    let (template, _) = model.chat_template(Some("chatml")).unwrap();
    let prompt = model.render_chat(&template, &messages(), 4096).unwrap();
    let prompt_tokens = model
        .tokenizer()
        .encode(
            prompt.as_bytes(),
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
        )
        .len();
    let usage = &v["usage"];
    assert_eq!(usage["prompt_tokens"], prompt_tokens);
    if finish == "length" {
        assert_eq!(usage["completion_tokens"], 24);
    }
    assert_eq!(
        usage["total_tokens"].as_u64().unwrap(),
        usage["prompt_tokens"].as_u64().unwrap() + usage["completion_tokens"].as_u64().unwrap()
    );

    // The same again reuses the cache and gives the same reply.
    let again = post(
        server.addr,
        "/v1/chat/completions",
        &json!({"messages": messages_json(), "temperature": 0, "max_tokens": 24}),
    )
    .await;
    assert_eq!(again.json()["choices"][0]["message"], choice["message"]);
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn greedy_completion_equals_the_engine_and_stops_at_a_stop_string() {
    let server = start().await;
    let prompt = "Once upon a time";
    let (expected, stop, _) = direct(false, prompt, 20);
    assert_eq!(
        stop,
        Some(StopReason::MaxTokens),
        "the fixture rambles: {expected:?}"
    );
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"model": "tiny", "prompt": prompt, "temperature": 0.0, "max_tokens": 20}),
    )
    .await;
    let v = reply.ok_json();
    assert_eq!(v["object"], "text_completion");
    assert_eq!(v["choices"][0]["text"], expected.as_str());
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    let prompt_tokens = model()
        .tokenizer()
        .encode(
            prompt.as_bytes(),
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
        )
        .len();
    assert_eq!(v["usage"]["prompt_tokens"], prompt_tokens);
    assert_eq!(v["usage"]["completion_tokens"], 20);
    assert_eq!(v["usage"]["total_tokens"], prompt_tokens + 20);

    // A stop string from the middle of that text: the reply ends before it, finish "stop".
    let chars: Vec<char> = expected.chars().collect();
    let stop: String = chars[chars.len() / 2..chars.len() / 2 + 2].iter().collect();
    let cut = &expected[..expected.find(&stop).unwrap()];
    for stream in [false, true] {
        let reply = post(
            server.addr,
            "/v1/completions",
            &json!({"prompt": prompt, "temperature": 0, "max_tokens": 20, "stop": [stop], "stream": stream}),
        )
        .await;
        assert_eq!(reply.status, 200);
        if stream {
            let events = sse_data(&reply.body);
            assert_eq!(events.last().unwrap(), "[DONE]");
            let chunks: Vec<Value> = events[..events.len() - 1]
                .iter()
                .map(|e| serde_json::from_str(e).unwrap())
                .collect();
            let text: String = chunks
                .iter()
                .map(|c| c["choices"][0]["text"].as_str().unwrap())
                .collect();
            assert_eq!(text, cut);
            assert_eq!(
                chunks.last().unwrap()["choices"][0]["finish_reason"],
                "stop"
            );
        } else {
            let v = reply.json();
            assert_eq!(v["choices"][0]["text"], cut);
            assert_eq!(v["choices"][0]["finish_reason"], "stop");
        }
    }
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_chat_concatenates_to_the_whole_reply() {
    let server = start().await;
    let body = json!({"messages": messages_json(), "temperature": 0, "max_completion_tokens": 30});
    let whole = post(server.addr, "/v1/chat/completions", &body)
        .await
        .json();
    let mut streamed = body.clone();
    streamed["stream"] = json!(true);
    streamed["stream_options"] = json!({"include_usage": true});
    let reply = post(server.addr, "/v1/chat/completions", &streamed).await;
    assert_eq!(reply.status, 200);
    assert!(reply
        .header("content-type")
        .unwrap()
        .starts_with("text/event-stream"));
    let events = sse_data(&reply.body);
    assert_eq!(events.last().unwrap(), "[DONE]");
    let chunks: Vec<Value> = events[..events.len() - 1]
        .iter()
        .map(|e| serde_json::from_str(e).unwrap())
        .collect();
    assert!(chunks.len() > 3);
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
        assert_eq!(c["model"], "tiny");
        assert_eq!(c["id"], chunks[0]["id"]);
    }
    assert_eq!(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    let text: String = chunks
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["content"].as_str())
        .collect();
    assert_eq!(
        text,
        whole["choices"][0]["message"]["content"].as_str().unwrap()
    );
    // The finish reason, then the usage in a chunk of no choices.
    let n = chunks.len();
    assert_eq!(
        chunks[n - 2]["choices"][0]["finish_reason"],
        whole["choices"][0]["finish_reason"]
    );
    assert_eq!(chunks[n - 1]["choices"], json!([]));
    assert_eq!(chunks[n - 1]["usage"], whole["usage"]);
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn models_health_tokenize_detokenize() {
    let server = start().await;
    let health = get(server.addr, "/health").await;
    assert_eq!(
        (health.status, health.json()),
        (200, json!({"status": "ok"}))
    );
    let models = get(server.addr, "/v1/models").await.json();
    assert_eq!(models["object"], "list");
    assert_eq!(models["data"][0]["id"], "tiny");
    assert_eq!(models["data"][0]["object"], "model");
    assert_eq!(models["data"].as_array().unwrap().len(), 1);

    let text = "Hello world, once upon a time";
    let tokens = post(server.addr, "/tokenize", &json!({"content": text}))
        .await
        .json();
    let ids: Vec<u32> = serde_json::from_value(tokens["tokens"].clone()).unwrap();
    assert_eq!(
        ids,
        model().tokenizer().encode(
            text.as_bytes(),
            gguf_tokenizer::EncodeOptions::PARSE_SPECIAL
        )
    );
    let with_bos = post(
        server.addr,
        "/tokenize",
        &json!({"content": text, "add_special": true}),
    )
    .await
    .json();
    assert_eq!(with_bos["tokens"][0], 1);
    let back = post(server.addr, "/detokenize", &json!({"tokens": ids}))
        .await
        .json();
    assert_eq!(back["content"], text);
    let out_of_range = post(server.addr, "/detokenize", &json!({"tokens": [1, 99999]})).await;
    assert_eq!(out_of_range.status, 400);
    assert_eq!(out_of_range.error_param().as_deref(), Some("tokens"));
    // The fixture has no pooling type: not an embedding model.
    let embeddings = post(server.addr, "/v1/embeddings", &json!({"input": "hi"})).await;
    assert_eq!(embeddings.status, 400);
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_bodies_are_refused_naming_the_field() {
    let mut config = config();
    config.max_body_bytes = 4096;
    let server = start_with(config, false).await;
    let chat = |extra: Value| {
        let mut body = json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2});
        for (k, v) in extra.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let cases: Vec<(Value, Option<&str>)> = vec![
        (chat(json!({"max_tokens": -1})), Some("max_tokens")),
        (chat(json!({"max_tokens": 0})), Some("max_tokens")),
        (chat(json!({"max_tokens": 1.5})), Some("max_tokens")),
        (chat(json!({"max_tokens": "10"})), Some("max_tokens")),
        (
            chat(json!({"max_completion_tokens": -5})),
            Some("max_completion_tokens"),
        ),
        (chat(json!({"temperature": -0.5})), Some("temperature")),
        (chat(json!({"temperature": 7})), Some("temperature")),
        (chat(json!({"temperature": "hot"})), Some("temperature")),
        (chat(json!({"top_p": 0})), Some("top_p")),
        (chat(json!({"top_p": 1.5})), Some("top_p")),
        (chat(json!({"top_k": -1})), Some("top_k")),
        (chat(json!({"min_p": 2})), Some("min_p")),
        (
            chat(json!({"presence_penalty": 9})),
            Some("presence_penalty"),
        ),
        (chat(json!({"repeat_penalty": 0})), Some("repeat_penalty")),
        (chat(json!({"seed": "x"})), Some("seed")),
        (chat(json!({"n": 2})), Some("n")),
        (chat(json!({"max_token": 5})), Some("max_token")),
        (chat(json!({"cache_prompt": true})), Some("cache_prompt")),
        (chat(json!({"top_logprobs": 2})), Some("top_logprobs")),
        (
            chat(json!({"logprobs": true, "top_logprobs": 21})),
            Some("top_logprobs"),
        ),
        (chat(json!({"logprobs": 3})), Some("logprobs")),
        (
            chat(json!({"tools": [{"type": "function"}]})),
            Some("tools"),
        ),
        (
            chat(json!({"response_format": {"type": "json_object"}})),
            Some("response_format"),
        ),
        (chat(json!({"stop": 5})), Some("stop")),
        (chat(json!({"stop": ["a", 1]})), Some("stop")),
        (chat(json!({"stream": "yes"})), Some("stream")),
        (chat(json!({"model": 5})), Some("model")),
        (json!({"messages": []}), Some("messages")),
        (json!({"messages": "hi"}), Some("messages")),
        (json!({}), Some("messages")),
        (
            json!({"messages": [{"role": "wizard", "content": "hi"}]}),
            Some("messages[0].role"),
        ),
        (
            json!({"messages": [{"content": "hi"}]}),
            Some("messages[0].role"),
        ),
        (
            json!({"messages": [{"role": "user", "content": 5}]}),
            Some("messages[0].content"),
        ),
        (
            json!({"messages": [{"role": "user"}]}),
            Some("messages[0].content"),
        ),
        (
            json!({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}),
            Some("messages[0].content[0]"),
        ),
        (json!([1, 2]), None),
    ];
    for (body, param) in &cases {
        let reply = post(server.addr, "/v1/chat/completions", body).await;
        assert_eq!(
            reply.status,
            400,
            "{body}: {:?}",
            String::from_utf8_lossy(&reply.body)
        );
        assert_eq!(reply.error_param().as_deref(), *param, "{body}");
        assert_eq!(reply.json()["error"]["type"], "invalid_request_error");
    }
    let completions: Vec<(Value, &str)> = vec![
        (json!({}), "prompt"),
        (json!({"prompt": 5}), "prompt"),
        (json!({"prompt": ["a", "b"]}), "prompt"),
        (json!({"prompt": "a", "max_tokens": -3}), "max_tokens"),
        (json!({"prompt": "a", "echo": true}), "echo"),
        (json!({"prompt": "a", "best_of": 3}), "best_of"),
    ];
    for (body, param) in &completions {
        let reply = post(server.addr, "/v1/completions", body).await;
        assert_eq!(reply.status, 400, "{body}");
        assert_eq!(reply.error_param().as_deref(), Some(*param), "{body}");
    }
    // Not JSON, NaN (not JSON either), invalid UTF-8, a prompt longer than the context.
    let raw_bodies: Vec<Vec<u8>> = vec![
        b"{\"messages\": [".to_vec(),
        b"{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"temperature\": NaN}"
            .to_vec(),
        b"{\"messages\": [{\"role\": \"user\", \"content\": \"\xff\xfe\"}]}".to_vec(),
        b"".to_vec(),
    ];
    for body in &raw_bodies {
        let reply = send(server.addr, "POST", "/v1/chat/completions", &[], body).await;
        assert_eq!(reply.status, 400, "{:?}", String::from_utf8_lossy(body));
        assert_eq!(reply.error_param(), None);
    }
    let long = "word ".repeat(600);
    let reply = post(server.addr, "/v1/completions", &json!({"prompt": long})).await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.json()["error"]["code"], "context_length_exceeded");
    // Over the body limit.
    let huge = json!({"prompt": "x".repeat(64 * 1024)});
    let reply = post(server.addr, "/v1/completions", &huge).await;
    assert_eq!(reply.status, 413);
    assert_eq!(reply.error_param(), None);
    // Unknown routes and methods.
    let reply = get(server.addr, "/v1/nothing").await;
    assert_eq!(reply.status, 404);
    reply.error_param();
    let reply = get(server.addr, "/v1/chat/completions").await;
    assert_eq!(reply.status, 405);
    // Still serving.
    assert_eq!(get(server.addr, "/health").await.status, 200);
    let fine = post(
        server.addr,
        "/v1/chat/completions",
        &json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    )
    .await;
    assert_eq!(fine.status, 200);
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn api_keys_are_required_when_set() {
    let mut config = config();
    config.api_keys = vec!["k1".into(), "secret-2".into()];
    let server = start_with(config, false).await;
    let body = json!({"prompt": "a", "max_tokens": 1}).to_string();
    let no_key = send(server.addr, "POST", "/v1/completions", &[], body.as_bytes()).await;
    assert_eq!(no_key.status, 401);
    assert_eq!(no_key.json()["error"]["code"], "invalid_api_key");
    let wrong = [("Authorization", "Bearer nope")];
    let reply = send(
        server.addr,
        "POST",
        "/v1/completions",
        &wrong,
        body.as_bytes(),
    )
    .await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        send(server.addr, "GET", "/v1/models", &[], b"")
            .await
            .status,
        401
    );
    let other_scheme = [("Authorization", "Basic k1")];
    let reply = send(
        server.addr,
        "POST",
        "/v1/completions",
        &other_scheme,
        body.as_bytes(),
    )
    .await;
    assert_eq!(reply.status, 401);
    // The scheme is case-insensitive (RFC 7235).
    for key in [
        "Bearer k1",
        "Bearer secret-2",
        "bearer k1",
        "BEARER  secret-2",
    ] {
        let auth = [("Authorization", key)];
        let reply = send(
            server.addr,
            "POST",
            "/v1/completions",
            &auth,
            body.as_bytes(),
        )
        .await;
        assert_eq!(reply.status, 200, "{key}");
    }
    // /health needs no key.
    assert_eq!(get(server.addr, "/health").await.status, 200);
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_queue_is_answered_503_with_retry_after() {
    let mut config = config();
    config.max_queue = 1;
    let mut server = start_with(config, true).await;
    assert!(server.hold.is_some());
    let body = json!({"prompt": "a", "max_tokens": 2, "temperature": 0});
    let addr = server.addr;
    let mut a = tokio::spawn(async move { post(addr, "/v1/completions", &body).await });
    let body = json!({"prompt": "b", "max_tokens": 2, "temperature": 0});
    let mut b = tokio::spawn(async move { post(addr, "/v1/completions", &body).await });
    // One of them is admitted and waits for the held engine; the other is refused.
    let (first, other) = tokio::select! {
        r = &mut a => (r.unwrap(), b),
        r = &mut b => (r.unwrap(), a),
    };
    assert_eq!(first.status, 503);
    assert_eq!(first.header("retry-after"), Some("1"));
    assert_eq!(first.json()["error"]["code"], "server_busy");
    drop(server.hold.take());
    let other = other.await.unwrap();
    assert_eq!(
        other.status,
        200,
        "{:?}",
        String::from_utf8_lossy(&other.body)
    );
    // The engine free again: requests go through.
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": "c", "max_tokens": 1}),
    )
    .await;
    assert_eq!(reply.status, 200);
    server.shut_down().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_leaving_a_stream_frees_the_engine() {
    let server = start().await;
    let body = json!({"prompt": "Once", "max_tokens": 200, "stream": true, "temperature": 0});
    let mut stream = open_post(server.addr, "/v1/completions", &body).await;
    let mut first = [0u8; 64];
    let n = stream.read(&mut first).await.unwrap();
    assert!(first[..n].starts_with(b"HTTP/1.1 200"));
    drop(stream);
    // The next request is served (the engine is not stuck on the abandoned one).
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": "Once", "max_tokens": 3}),
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(get(server.addr, "/health").await.status, 200);
    server.shut_down().await;
}

/// SIGTERM (a graceful shutdown) during a stream: it ends as a cut reply ends in
/// llama-server, with a final chunk whose `finish_reason` is `length` and `data: [DONE]`, so
/// that the client can tell it from a lost connection; shutting down completes although the
/// client still holds its connection open.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_ends_a_stream_under_way_with_a_final_chunk() {
    // Held, the engine generates nothing until the shutdown has begun.
    let mut server = start_with(config(), true).await;
    let hold = server.hold.take().expect("held");
    let body = json!({"prompt": "Once", "max_tokens": 250, "stream": true});
    let mut stream = open_post(server.addr, "/v1/completions", &body).await;
    // In a slot (the engine waits for the gate before its first step).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while common::metrics(server.addr).await["gguf_requests_active"] != 1.0 {
        assert!(std::time::Instant::now() < deadline, "never started");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let stopped = tokio::spawn(server.shut_down());
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    drop(hold);
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    stopped.await.unwrap();
    let reply = common::parse_reply(&raw);
    assert_eq!(reply.status, 200, "{}", reply.text());
    let events = sse_data(&reply.body);
    assert_eq!(
        events.last().map(String::as_str),
        Some("[DONE]"),
        "{events:?}"
    );
    let last: Value = serde_json::from_str(&events[events.len() - 2]).unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "length", "{events:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn embeddings_equal_the_engine_for_a_model_with_a_pooling_type() {
    // The fixture with mean pooling: the decoder's pooled hidden states.
    let dir = tempfile::tempdir().unwrap();
    let model = pooled_model(dir.path());
    let server = Server::new(model.clone(), config()).unwrap();
    assert!(server.embeddings_enabled());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(listener, async move {
        let _ = stopped.await;
    }));
    let inputs = ["Hello world", "Once upon a time there was"];
    let reply = post(
        addr,
        "/v1/embeddings",
        &json!({"model": "tiny", "input": inputs}),
    )
    .await;
    let v = reply.ok_json();
    assert_eq!(v["object"], "list");
    assert_eq!(v["model"], "tiny");
    let mut session = model.session(session_options()).unwrap();
    let mut tokens = 0;
    for (i, text) in inputs.iter().enumerate() {
        let expected = session.embed(text).unwrap().into_flat();
        let item = &v["data"][i];
        assert_eq!(item["object"], "embedding");
        assert_eq!(item["index"], i);
        let got: Vec<f32> = item["embedding"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        assert_eq!(got, expected, "input {i}");
        tokens += model
            .tokenizer()
            .encode(
                text.as_bytes(),
                gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
            )
            .len();
    }
    assert_eq!(v["usage"]["prompt_tokens"], tokens);
    assert_eq!(v["usage"]["total_tokens"], tokens);
    // One string, and the refusals.
    let one = post(addr, "/v1/embeddings", &json!({"input": "Hello world"}))
        .await
        .json();
    assert_eq!(one["data"].as_array().unwrap().len(), 1);
    assert_eq!(one["data"][0]["embedding"], v["data"][0]["embedding"]);
    // base64: the little-endian f32 bytes of the same vector.
    let b64 = post(
        addr,
        "/v1/embeddings",
        &json!({"input": "Hello world", "encoding_format": "base64"}),
    )
    .await
    .json();
    let bytes = {
        use base64::Engine;
        let text = b64["data"][0]["embedding"].as_str().unwrap();
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap()
    };
    let decoded: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    let listed: Vec<f32> = one["data"][0]["embedding"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect();
    assert_eq!(decoded, listed);
    for (body, param) in [
        (json!({}), "input"),
        (json!({"input": []}), "input"),
        (json!({"input": [1, 2, 3]}), "input"),
        (
            json!({"input": "x", "encoding_format": "int8"}),
            "encoding_format",
        ),
    ] {
        let reply = post(addr, "/v1/embeddings", &body).await;
        assert_eq!(reply.status, 400, "{body}");
        assert_eq!(reply.error_param().as_deref(), Some(param), "{body}");
    }
    // Generation still works afterwards (the embedding cleared the cache).
    let reply = post(
        addr,
        "/v1/completions",
        &json!({"prompt": "Once", "max_tokens": 3}),
    )
    .await;
    assert_eq!(reply.status, 200);
    let _ = stop.send(());
    task.await.unwrap().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cors_headers_only_when_asked() {
    let origin = [("Origin", "https://example.com")];
    let plain = start().await;
    let reply = send(plain.addr, "GET", "/v1/models", &origin, b"").await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.header("access-control-allow-origin"), None);
    plain.shut_down().await;

    let mut config = config();
    config.cors_origins = vec!["https://example.com".into()];
    config.api_keys = vec!["k".into()];
    let server = start_with(config, false).await;
    // A preflight needs no key.
    let preflight = [
        ("Origin", "https://example.com"),
        ("Access-Control-Request-Method", "POST"),
        (
            "Access-Control-Request-Headers",
            "authorization, content-type",
        ),
    ];
    let reply = send(
        server.addr,
        "OPTIONS",
        "/v1/chat/completions",
        &preflight,
        b"",
    )
    .await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://example.com")
    );
    let auth = [
        ("Origin", "https://example.com"),
        ("Authorization", "Bearer k"),
    ];
    let reply = send(server.addr, "GET", "/v1/models", &auth, b"").await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.header("access-control-allow-origin"),
        Some("https://example.com")
    );
    let other = [("Origin", "https://elsewhere.example")];
    let reply = send(server.addr, "GET", "/health", &other, b"").await;
    assert_eq!(reply.header("access-control-allow-origin"), None);
    server.shut_down().await;
}

/// Slowloris: headers that never end close their connection after the header deadline, a body
/// that stops short of its length gets 408 after the body deadline, and other clients are
/// served meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off_and_others_served() {
    use std::time::Duration;

    let mut config = config();
    config.header_timeout = Duration::from_millis(300);
    config.body_timeout = Duration::from_millis(300);
    let server = start_with(config, false).await;
    let mut slow_headers = TcpStream::connect(server.addr).await.unwrap();
    slow_headers
        .write_all(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut slow_body = TcpStream::connect(server.addr).await.unwrap();
    slow_body
        .write_all(
            b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"prompt\": ",
        )
        .await
        .unwrap();
    let reply = post(
        server.addr,
        "/v1/completions",
        &json!({"prompt": "Once", "max_tokens": 2}),
    )
    .await;
    assert_eq!(reply.status, 200);
    let read_all = |mut s: TcpStream| async move {
        let mut buf = Vec::new();
        // A reset after the server closes is fine: what was read before counts.
        let _ = s.read_to_end(&mut buf).await;
        String::from_utf8_lossy(&buf).into_owned()
    };
    let body_reply = tokio::time::timeout(Duration::from_secs(10), read_all(slow_body))
        .await
        .expect("a body that never arrives is cut off");
    assert!(body_reply.starts_with("HTTP/1.1 408"), "{body_reply}");
    assert!(body_reply.contains("request_timeout"), "{body_reply}");
    let header_reply = tokio::time::timeout(Duration::from_secs(10), read_all(slow_headers))
        .await
        .expect("headers that never end are cut off");
    assert!(
        header_reply.is_empty() || header_reply.starts_with("HTTP/1.1 408"),
        "{header_reply}"
    );
    assert_eq!(get(server.addr, "/health").await.status, 200);
    server.shut_down().await;
}

/// The hostile audit's templates: one that doubles a string forty times (it aborted the
/// server), and one that loops three times over a request of 200 messages (800 MB of prompt,
/// then tokenized: 21 GB). Each request ends in a 400 naming the bound, and the server goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_chat_templates_end_in_400() {
    let cases = [
        (
            "{% set ns = namespace(s='xx') %}{% for i in range(40) %}\
             {% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
            1,
            "string or list of more than",
        ),
        (
            "{% for a in messages %}{% for b in messages %}{% for c in messages %}\
             {{ a.content }}{{ b.content }}{{ c.content }}{% endfor %}{% endfor %}{% endfor %}",
            200,
            "the rendered prompt is longer than",
        ),
    ];
    for (template, n, want) in cases {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config();
        config.chat_template = None;
        let server = start_model(model_with_template(dir.path(), template), config, false).await;
        let messages: Vec<Value> = (0..n)
            .map(
                |i| json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": "hi"}),
            )
            .collect();
        let body = json!({"messages": messages, "max_tokens": 2});
        let reply = post(server.addr, "/v1/chat/completions", &body).await;
        assert_eq!(reply.status, 400, "{}", reply.text());
        let message = reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(message.contains(want), "{message}");
        assert_eq!(get(server.addr, "/health").await.status, 200);
        server.shut_down().await;
    }
}

/// A body announced longer than the limit is refused with 413 at once: with `Expect:
/// 100-continue` the client is told not to send it (no `100 Continue` first), and without it
/// the server does not wait for the body (it used to answer after the 30 s body deadline).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_announced_over_the_limit_is_refused_at_once() {
    let mut config = config();
    config.max_body_bytes = 4096;
    let server = start_with(config, false).await;
    for expect in ["Expect: 100-continue\r\n", ""] {
        let mut stream = TcpStream::connect(server.addr).await.unwrap();
        let head = format!(
            "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
             Content-Length: 1000000000\r\n{expect}\r\n"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 12];
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            stream.read_exact(&mut answer),
        )
        .await
        .expect("an answer before the body deadline")
        .unwrap();
        assert_eq!(
            &answer,
            b"HTTP/1.1 413",
            "{expect:?}: {:?}",
            String::from_utf8_lossy(&answer)
        );
    }
    assert_eq!(get(server.addr, "/health").await.status, 200);
    server.shut_down().await;
}
