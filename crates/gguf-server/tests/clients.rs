//! Real clients against the server in-process on 127.0.0.1:0 with the tiny llama fixture:
//! OpenAI's own Python package (`openai`) for models, chat (whole and streamed), completions,
//! embeddings and its error classes, and every `curl` example of docs/serve.md as written.
//! Each is skipped when its tool is missing, except with `CI=true` (CI installs both).

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use gguf_model::{Model, SamplerConfig};
use gguf_tokenizer::chat::ChatMessage;
use serde_json::{json, Value};

mod common;
use common::{config, model, pooled_model, session_options, start_model};

/// Whether `program args` runs and succeeds; if not, a skip note, or with `CI=true` a panic.
fn tool_available(program: &str, args: &[&str], what: &str) -> bool {
    let ok = std::process::Command::new(program)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "{what} is missing and CI=true (CI installs it)"
        );
        eprintln!("skipping: {what} is missing");
    }
    ok
}

/// Runs `command` to its end (killed after `limit`), with no proxy for the local server.
async fn run(mut command: tokio::process::Command, limit: Duration) -> std::process::Output {
    command
        .env("NO_PROXY", "127.0.0.1,localhost")
        .env("no_proxy", "127.0.0.1,localhost")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(limit, command.output())
        .await
        .expect("the client finishes in time")
        .expect("the client starts")
}

const MESSAGES: &[(&str, &str)] = &[
    ("system", "You are terse."),
    ("user", "Hello there, how are you?"),
];

const PROMPT: &str = "Once upon a time";

const EMBED_INPUTS: &[&str] = &["Hello world", "Once upon a time there was"];

/// What the engine itself generates greedily for `MESSAGES` (chatml, as the server is
/// configured) or for a raw prompt.
fn direct(model: &Model, chat: bool, max_tokens: usize) -> String {
    let mut session = model.session(session_options()).unwrap();
    let greedy = SamplerConfig::greedy();
    let mut generation = if chat {
        let (template, _) = model.chat_template(Some("chatml")).unwrap();
        let messages: Vec<ChatMessage> = MESSAGES
            .iter()
            .map(|&(role, content)| ChatMessage::new(role, content))
            .collect();
        session
            .chat_with(&template, &messages, &greedy, max_tokens)
            .unwrap()
    } else {
        session.generate(PROMPT, &greedy, max_tokens).unwrap()
    };
    for token in &mut generation {
        token.unwrap();
    }
    generation.text().to_string()
}

/// A JSON array of numbers as `f32`s.
fn f32s(v: &Value) -> Vec<f32> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap() as f32)
        .collect()
}

/// Speaks to the server through `openai.OpenAI`, checks what only Python sees (types,
/// exception classes) and prints a JSON summary for the Rust side.
const OPENAI_SCRIPT: &str = r#"
import json
import os

import openai

base_url = os.environ["GGUF_BASE_URL"]
api_key = os.environ["GGUF_API_KEY"]
model = os.environ["GGUF_MODEL_ID"]
messages = json.loads(os.environ["GGUF_MESSAGES"])
prompt = os.environ["GGUF_PROMPT"]
embed_inputs = json.loads(os.environ["GGUF_EMBED_INPUTS"])

client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=120)
out = {}

# Models.
models = client.models.list()
out["model_ids"] = [m.id for m in models.data]
out["model_object"] = models.data[0].object

# Chat, whole.
chat = client.chat.completions.create(
    model=model, messages=messages, temperature=0, max_tokens=16
)
choice = chat.choices[0]
assert isinstance(choice.message.content, str) and choice.message.content, chat
assert choice.finish_reason in ("stop", "length"), chat
assert chat.usage.prompt_tokens > 0, chat
out["chat"] = {
    "object": chat.object,
    "model": chat.model,
    "id": chat.id,
    "role": choice.message.role,
    "content": choice.message.content,
    "finish_reason": choice.finish_reason,
    "usage": chat.usage.model_dump(exclude_none=True),
}

# Chat, streamed, with the usage chunk.
stream = client.chat.completions.create(
    model=model,
    messages=messages,
    temperature=0,
    max_tokens=16,
    stream=True,
    stream_options={"include_usage": True},
)
parts = []
finish_reason = None
usage = None
chunks = 0
first_role = None
usage_chunk_choices = None
for chunk in stream:
    chunks += 1
    if chunk.choices:
        delta = chunk.choices[0].delta
        if first_role is None:
            first_role = delta.role
        if delta.content:
            parts.append(delta.content)
        if chunk.choices[0].finish_reason is not None:
            finish_reason = chunk.choices[0].finish_reason
    if chunk.usage is not None:
        usage = chunk.usage.model_dump(exclude_none=True)
        usage_chunk_choices = len(chunk.choices)
out["stream"] = {
    "content": "".join(parts),
    "finish_reason": finish_reason,
    "usage": usage,
    "chunks": chunks,
    "first_role": first_role,
    "usage_chunk_choices": usage_chunk_choices,
}

# Completions.
completion = client.completions.create(
    model=model, prompt=prompt, max_tokens=8, temperature=0
)
assert isinstance(completion.choices[0].text, str) and completion.choices[0].text
out["completion"] = {
    "object": completion.object,
    "text": completion.choices[0].text,
    "finish_reason": completion.choices[0].finish_reason,
    "usage": completion.usage.model_dump(exclude_none=True),
}

# Embeddings, as floats.
embeddings = client.embeddings.create(
    model=model, input=embed_inputs, encoding_format="float"
)
out["embeddings"] = {
    "object": embeddings.object,
    "indices": [d.index for d in embeddings.data],
    "vectors": [d.embedding for d in embeddings.data],
    "usage": embeddings.usage.model_dump(exclude_none=True),
}
# Without `encoding_format` the client asks for base64 (and decodes it itself).
try:
    default = client.embeddings.create(model=model, input=embed_inputs)
    out["default_embeddings"] = {"vectors": [d.embedding for d in default.data]}
except openai.BadRequestError as e:
    out["default_embeddings"] = {"status": e.status_code, "param": e.param}

# Errors, as the client's own exception classes.
wrong = openai.OpenAI(base_url=base_url, api_key="sk-wrong", max_retries=0, timeout=120)
try:
    wrong.chat.completions.create(model=model, messages=messages, max_tokens=2)
    out["wrong_key"] = None
except openai.AuthenticationError as e:
    out["wrong_key"] = {"status": e.status_code, "code": e.code}
try:
    client.chat.completions.create(model=model, messages=messages, max_tokens=2, n=2)
    out["n2"] = None
except openai.BadRequestError as e:
    out["n2"] = {"status": e.status_code, "code": e.code, "param": e.param}

print(json.dumps(out))
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_python_client_does_chat_streaming_completions_and_models() {
    if !tool_available(
        "python3",
        &["-c", "import openai"],
        "python3 with the openai package (pip install openai)",
    ) {
        return;
    }
    // The fixture with a pooling type, so that embeddings are served too; generation is the
    // same as without.
    let dir = tempfile::tempdir().unwrap();
    let model = pooled_model(dir.path());
    let mut config = config();
    config.api_keys = vec!["sk-test".into()];
    let server = start_model(model.clone(), config, false).await;

    let mut script = tempfile::Builder::new().suffix(".py").tempfile().unwrap();
    script.write_all(OPENAI_SCRIPT.as_bytes()).unwrap();
    script.flush().unwrap();
    let messages: Vec<Value> = MESSAGES
        .iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut python = tokio::process::Command::new("python3");
    python
        .arg(script.path())
        .env("GGUF_BASE_URL", format!("http://{}/v1", server.addr))
        .env("GGUF_API_KEY", "sk-test")
        .env("GGUF_MODEL_ID", "tiny")
        .env("GGUF_MESSAGES", Value::from(messages).to_string())
        .env("GGUF_PROMPT", PROMPT)
        .env("GGUF_EMBED_INPUTS", json!(EMBED_INPUTS).to_string())
        // The key must come from the argument, not the environment.
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL");
    let output = run(python, Duration::from_secs(300)).await;
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the script failed ({}):\n{stderr}\n{stdout}",
        output.status
    );
    let out: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("not JSON ({e}): {stdout:?}\n{stderr}"));

    // What the engine gives for the same greedy requests (blocking work, off the runtime).
    let engine = model.clone();
    let (expected_chat, expected_completion, expected_embeddings) =
        tokio::task::spawn_blocking(move || {
            let mut session = engine.session(session_options()).unwrap();
            let embeddings: Vec<Vec<f32>> = EMBED_INPUTS
                .iter()
                .map(|text| session.embed(text).unwrap().into_flat())
                .collect();
            (
                direct(&engine, true, 16),
                direct(&engine, false, 8),
                embeddings,
            )
        })
        .await
        .unwrap();

    assert_eq!(out["model_ids"], json!(["tiny"]));
    assert_eq!(out["model_object"], "model");

    let chat = &out["chat"];
    assert_eq!(chat["object"], "chat.completion");
    assert_eq!(chat["model"], "tiny");
    assert!(chat["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(chat["role"], "assistant");
    assert!(!expected_chat.is_empty());
    assert_eq!(chat["content"], expected_chat.as_str());
    let finish = chat["finish_reason"].as_str().unwrap();
    assert!(finish == "stop" || finish == "length", "{finish}");
    let usage = &chat["usage"];
    let prompt_tokens = usage["prompt_tokens"].as_u64().unwrap();
    let completion_tokens = usage["completion_tokens"].as_u64().unwrap();
    assert!(prompt_tokens > 0);
    assert!((1..=16).contains(&completion_tokens), "{usage}");
    if finish == "length" {
        assert_eq!(completion_tokens, 16);
    }
    assert_eq!(usage["total_tokens"], prompt_tokens + completion_tokens);

    // Streamed: the deltas concatenate to the whole reply (both greedy), then the usage.
    let stream = &out["stream"];
    assert_eq!(stream["content"], chat["content"]);
    assert_eq!(stream["finish_reason"], chat["finish_reason"]);
    assert_eq!(stream["first_role"], "assistant");
    assert!(stream["chunks"].as_u64().unwrap() >= 3, "{stream}");
    assert_eq!(stream["usage_chunk_choices"], 0);
    assert_eq!(stream["usage"], chat["usage"]);

    let completion = &out["completion"];
    assert_eq!(completion["object"], "text_completion");
    assert_eq!(completion["text"], expected_completion.as_str());
    assert_eq!(completion["finish_reason"], "length", "{completion}");
    let prompt_tokens = model
        .tokenizer()
        .encode(
            PROMPT.as_bytes(),
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
        )
        .len();
    assert_eq!(completion["usage"]["prompt_tokens"], prompt_tokens);
    assert_eq!(completion["usage"]["completion_tokens"], 8);

    let embeddings = &out["embeddings"];
    assert_eq!(embeddings["object"], "list");
    assert_eq!(embeddings["indices"], json!([0, 1]));
    for (i, expected) in expected_embeddings.iter().enumerate() {
        assert_eq!(&f32s(&embeddings["vectors"][i]), expected, "input {i}");
    }
    let tokens: usize = EMBED_INPUTS
        .iter()
        .map(|t| {
            model
                .tokenizer()
                .encode(
                    t.as_bytes(),
                    gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
                )
                .len()
        })
        .sum();
    assert_eq!(embeddings["usage"]["prompt_tokens"], tokens);
    // The client's default, base64 (decoded by the client): the same vectors.
    let default = &out["default_embeddings"];
    for (i, expected) in expected_embeddings.iter().enumerate() {
        assert_eq!(
            &f32s(&default["vectors"][i]),
            expected,
            "input {i}: {default}"
        );
    }

    assert_eq!(
        out["wrong_key"],
        json!({"status": 401, "code": "invalid_api_key"})
    );
    assert_eq!(out["n2"]["status"], 400, "{}", out["n2"]);
    assert_eq!(out["n2"]["param"], "n");
    server.shut_down().await;
}

/// The `curl` commands of the ```sh blocks of `markdown`, each on one line (its
/// backslash-continued lines joined).
fn curl_commands(markdown: &str) -> Vec<String> {
    let mut commands = Vec::new();
    let mut in_sh = false;
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        let trimmed = line.trim();
        if !in_sh {
            in_sh = trimmed == "```sh";
            continue;
        }
        if trimmed == "```" {
            assert!(current.is_none(), "a continuation runs past its block");
            in_sh = false;
            continue;
        }
        let (text, continues) = match trimmed.strip_suffix('\\') {
            Some(text) => (text.trim_end(), true),
            None => (trimmed, false),
        };
        let command = match current.take() {
            Some(mut command) => {
                command.push(' ');
                command.push_str(text);
                command
            }
            None => text.to_string(),
        };
        if continues {
            current = Some(command);
        } else if command.starts_with("curl ") {
            commands.push(command);
        }
    }
    assert!(!in_sh, "an unclosed ```sh block");
    commands
}

#[test]
fn curl_commands_are_joined_across_continuations() {
    let doc = "text\n```sh\ncurl -s a \\\n  -d '{}'\n\ncurl b\ngguf serve x\n```\n\
               ```\ncurl not-sh\n```\n```sh\n  curl c \\\n -H x\n```\n";
    assert_eq!(
        curl_commands(doc),
        ["curl -s a -d '{}'", "curl b", "curl c -H x"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_examples_in_docs_serve_md_run() {
    if !tool_available("curl", &["--version"], "curl") {
        return;
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/serve.md");
    let doc = std::fs::read_to_string(path).unwrap();
    let commands = curl_commands(&doc);
    assert!(
        commands.len() >= 5,
        "only {} curl commands in docs/serve.md: {commands:?}",
        commands.len()
    );
    // As the examples' own `gguf serve smollm2-135m --api-key sk-local` would answer.
    let mut config = config();
    config.model_id = "smollm2-135m".into();
    config.api_keys = vec!["sk-local".into()];
    let server = start_model(model(), config, false).await;
    let base = format!("http://{}", server.addr);
    for command in &commands {
        assert!(
            command.contains("http://127.0.0.1:8080/"),
            "an example for another address: {command}"
        );
        let command = format!(
            "{} --max-time 120 -w '\\n%{{http_code}}'",
            command.replace("http://127.0.0.1:8080", &base)
        );
        let mut bash = tokio::process::Command::new("bash");
        bash.arg("-c").arg(&command);
        let output = run(bash, Duration::from_secs(180)).await;
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{command}: {}\n{stdout}\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
        let (body, status) = stdout
            .rsplit_once('\n')
            .unwrap_or_else(|| panic!("{command}: no status in {stdout:?}"));
        assert_eq!(status, "200", "{command}: {body}");
        if command.contains("\"stream\": true") {
            let events: Vec<&str> = body
                .split("\n\n")
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(|e| {
                    e.strip_prefix("data: ")
                        .unwrap_or_else(|| panic!("{command}: not a data event: {e:?}"))
                })
                .collect();
            assert!(events.len() > 2, "{command}: {body}");
            assert_eq!(events.last(), Some(&"[DONE]"), "{command}");
            for event in &events[..events.len() - 1] {
                let chunk: Value = serde_json::from_str(event)
                    .unwrap_or_else(|e| panic!("{command}: not JSON ({e}): {event:?}"));
                assert_eq!(chunk["model"], "smollm2-135m");
            }
        } else {
            let v: Value = serde_json::from_str(body)
                .unwrap_or_else(|e| panic!("{command}: not JSON ({e}): {body:?}"));
            assert!(v.get("error").is_none(), "{command}: {v}");
        }
    }
    server.shut_down().await;
}
