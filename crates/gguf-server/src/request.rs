//! Reading request bodies: UTF-8, JSON, then each field checked for its type and range, every
//! refusal a 400 naming the field. Fields this server cannot honour are refused rather than
//! ignored; fields that change nothing here (`user`, `store`, ...) are accepted; a field the
//! endpoint does not have at all is refused, as OpenAI refuses an unrecognized argument (a
//! misspelt `max_token` must not be silently ignored).

use gguf_model::SamplerConfig;
use gguf_tokenizer::chat::ChatMessage;
use serde_json::{Map, Value};

use crate::error::ApiError;

/// A body parsed as a JSON object.
pub(crate) fn json_object(body: &[u8]) -> Result<Map<String, Value>, ApiError> {
    let text = std::str::from_utf8(body).map_err(|e| {
        ApiError::bad_request(format!(
            "the request body is not valid UTF-8 (at byte {})",
            e.valid_up_to()
        ))
    })?;
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::bad_request(
            "the request body must be a JSON object",
        )),
        Err(e) => Err(ApiError::bad_request(format!(
            "the request body is not valid JSON: {e}"
        ))),
    }
}

/// The sampling and output fields chat and text completions share (OpenAI's, and
/// llama-server's `top_k`, `min_p`, `repeat_penalty`); those this server cannot honour are
/// refused by [`generation_params`] with their own message.
const GENERATION_FIELDS: &[&str] = &[
    "model",
    "max_tokens",
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "seed",
    "stop",
    "presence_penalty",
    "frequency_penalty",
    "repeat_penalty",
    "n",
    "stream",
    "stream_options",
    "logprobs",
    "logit_bias",
    "user",
];

/// The fields of `/v1/chat/completions` besides [`GENERATION_FIELDS`].
const CHAT_ONLY_FIELDS: &[&str] = &[
    "messages",
    "max_completion_tokens",
    "top_logprobs",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "functions",
    "function_call",
    "response_format",
    "modalities",
    "audio",
    "prediction",
    "reasoning_effort",
    "verbosity",
    "web_search_options",
    "store",
    "metadata",
    "service_tier",
    "prompt_cache_key",
    "safety_identifier",
];

/// The fields of `/v1/chat/completions`.
pub(crate) const CHAT_FIELDS: &[&[&str]] = &[GENERATION_FIELDS, CHAT_ONLY_FIELDS];

/// The fields of `/v1/completions`.
pub(crate) const COMPLETION_FIELDS: &[&[&str]] =
    &[GENERATION_FIELDS, &["prompt", "best_of", "echo", "suffix"]];

/// The fields of `/v1/embeddings`.
pub(crate) const EMBEDDING_FIELDS: &[&[&str]] =
    &[&["input", "model", "encoding_format", "dimensions", "user"]];

/// The fields of `/tokenize` and `/detokenize`.
pub(crate) const TOKENIZE_FIELDS: &[&[&str]] =
    &[&["content", "add_special", "parse_special", "with_pieces"]];
pub(crate) const DETOKENIZE_FIELDS: &[&[&str]] = &[&["tokens"]];

/// Refuses a field that is in none of the `known` lists (400 naming it, `code`
/// `unknown_parameter`).
pub(crate) fn check_known(f: &Fields<'_>, known: &[&[&str]]) -> Result<(), ApiError> {
    let is_known = |k: &str| known.iter().any(|list| list.contains(&k));
    match f.0.keys().find(|k| !is_known(k)) {
        None => Ok(()),
        Some(name) => {
            let mut e = ApiError::invalid(name, format!("unrecognized request argument `{name}`"));
            e.code = Some("unknown_parameter");
            Err(e)
        }
    }
}

/// Typed access to the fields of a request object.
pub(crate) struct Fields<'a>(pub &'a Map<String, Value>);

impl Fields<'_> {
    /// The field, absent when missing or `null`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name).filter(|v| !v.is_null())
    }

    pub fn bool(&self, name: &str) -> Result<Option<bool>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err(ApiError::invalid(
                name,
                format!("`{name}` must be a boolean"),
            )),
        }
    }

    pub fn string(&self, name: &str) -> Result<Option<&str>, ApiError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(ApiError::invalid(
                name,
                format!("`{name}` must be a string"),
            )),
        }
    }

    /// A finite number within `[lo, hi]`.
    pub fn number(&self, name: &str, lo: f64, hi: f64) -> Result<Option<f32>, ApiError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let Some(x) = v.as_f64().filter(|x| x.is_finite()) else {
            return Err(ApiError::invalid(
                name,
                format!("`{name}` must be a number"),
            ));
        };
        if !(lo..=hi).contains(&x) {
            return Err(ApiError::invalid(
                name,
                format!("`{name}` must be between {lo} and {hi}, not {x}"),
            ));
        }
        Ok(Some(x as f32))
    }

    /// An integer within `[lo, hi]`.
    pub fn integer(&self, name: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
        let Some(v) = self.get(name) else {
            return Ok(None);
        };
        let n = match v {
            Value::Number(n) => n.as_i64().or_else(|| {
                // 3.0 is an integer; 2^63 and up are out of range either way.
                n.as_f64()
                    .filter(|x| x.fract() == 0.0 && x.abs() < 9.2e18)
                    .map(|x| x as i64)
            }),
            _ => None,
        };
        let Some(n) = n else {
            return Err(ApiError::invalid(
                name,
                format!("`{name}` must be an integer"),
            ));
        };
        if !(lo..=hi).contains(&n) {
            return Err(ApiError::invalid(
                name,
                format!("`{name}` must be between {lo} and {hi}, not {n}"),
            ));
        }
        Ok(Some(n))
    }
}

/// What a generation request asks for, once checked.
#[derive(Debug, Clone)]
pub(crate) struct GenerationParams {
    pub sampler: SamplerConfig,
    /// `None`: until the context is full.
    pub max_tokens: Option<usize>,
    pub stops: Vec<String>,
    pub stream: bool,
    /// `stream_options.include_usage`: a last chunk with the usage.
    pub include_usage: bool,
    /// `Some(k)`: each token's log-probability with the `k` most likely alternatives (chat's
    /// `logprobs: true` and `top_logprobs: k`, or the text completion's `logprobs: k`).
    pub logprobs: Option<usize>,
}

/// Fields refused when set to anything but their default, with what they would ask for.
fn refuse_unsupported(f: &Fields<'_>) -> Result<(), ApiError> {
    let truthy = |name: &str| match f.get(name) {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(_) => true,
    };
    for (name, what) in [
        ("logit_bias", "biasing logits"),
        ("tools", "tool calling"),
        ("functions", "function calling"),
        ("echo", "echoing the prompt"),
        ("suffix", "a suffix (fill-in-the-middle)"),
        ("audio", "audio output"),
        ("prediction", "predicted outputs"),
    ] {
        if truthy(name) {
            return Err(ApiError::unsupported(name, what));
        }
    }
    if let Some(choice) = f.get("tool_choice") {
        if choice != "none" && choice != "auto" {
            return Err(ApiError::unsupported("tool_choice", "tool calling"));
        }
    }
    if let Some(format) = f.get("response_format") {
        if format.get("type").and_then(Value::as_str) != Some("text") {
            return Err(ApiError::unsupported(
                "response_format",
                "a response format other than {\"type\": \"text\"}",
            ));
        }
    }
    if let Some(modalities) = f.get("modalities") {
        if modalities != &serde_json::json!(["text"]) {
            return Err(ApiError::unsupported(
                "modalities",
                "output other than text",
            ));
        }
    }
    if f.integer("n", i64::MIN, i64::MAX)?.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid(
            "n",
            "`n`: only one choice per request (n = 1) is supported",
        ));
    }
    if f.integer("best_of", i64::MIN, i64::MAX)?
        .is_some_and(|n| n != 1)
    {
        return Err(ApiError::invalid(
            "best_of",
            "`best_of`: only best_of = 1 is supported",
        ));
    }
    Ok(())
}

/// The sampling and length fields common to chat and text completions. The defaults are
/// llama.cpp's (as llama-server has them), with a fresh seed per request unless `seed` is given.
pub(crate) fn generation_params(
    f: &Fields<'_>,
    max_tokens_fields: &[&str],
    chat: bool,
) -> Result<GenerationParams, ApiError> {
    refuse_unsupported(f)?;
    let logprobs = if chat {
        let top = f.integer("top_logprobs", 0, 20)?;
        match (f.bool("logprobs")?, top) {
            (Some(true), top) => Some(top.unwrap_or(0) as usize),
            (_, Some(_)) => {
                return Err(ApiError::invalid(
                    "top_logprobs",
                    "`top_logprobs` needs `logprobs: true`",
                ))
            }
            _ => None,
        }
    } else {
        f.integer("logprobs", 0, 20)?.map(|k| k as usize)
    };
    let mut sampler = SamplerConfig {
        seed: fresh_seed(),
        ..SamplerConfig::default()
    };
    if let Some(t) = f.number("temperature", 0.0, 2.0)? {
        sampler.temperature = t;
    }
    if let Some(p) = f.number("top_p", 0.0, 1.0)? {
        if p <= 0.0 {
            return Err(ApiError::invalid(
                "top_p",
                "`top_p` must be greater than 0 and at most 1",
            ));
        }
        sampler.top_p = p;
    }
    if let Some(k) = f.integer("top_k", 0, u32::MAX as i64)? {
        sampler.top_k = k as usize;
    }
    if let Some(p) = f.number("min_p", 0.0, 1.0)? {
        sampler.min_p = p;
    }
    if let Some(p) = f.number("presence_penalty", -2.0, 2.0)? {
        sampler.presence_penalty = p;
    }
    if let Some(p) = f.number("frequency_penalty", -2.0, 2.0)? {
        sampler.frequency_penalty = p;
    }
    if let Some(p) = f.number("repeat_penalty", 0.0, 10.0)? {
        if p <= 0.0 {
            return Err(ApiError::invalid(
                "repeat_penalty",
                "`repeat_penalty` must be positive (1 is off)",
            ));
        }
        sampler.repeat_penalty = p;
    }
    if let Some(seed) = f.integer("seed", i64::MIN, i64::MAX)? {
        sampler.seed = seed as u64;
    }
    let mut max_tokens = None;
    for &name in max_tokens_fields {
        if let Some(n) = f.integer(name, 1, u32::MAX as i64)? {
            max_tokens = Some(n as usize);
        }
    }
    let stops = match f.get("stop") {
        None => Vec::new(),
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(list)) => {
            if list.len() > 16 {
                return Err(ApiError::invalid("stop", "`stop`: at most 16 strings"));
            }
            list.iter()
                .map(|s| {
                    s.as_str().map(str::to_string).ok_or_else(|| {
                        ApiError::invalid("stop", "`stop` must be a string or a list of strings")
                    })
                })
                .collect::<Result<_, _>>()?
        }
        Some(_) => {
            return Err(ApiError::invalid(
                "stop",
                "`stop` must be a string or a list of strings",
            ))
        }
    };
    let stops = stops.into_iter().filter(|s| !s.is_empty()).collect();
    let stream = f.bool("stream")?.unwrap_or(false);
    let include_usage = match f.get("stream_options") {
        None => false,
        Some(Value::Object(o)) => Fields(o)
            .bool("include_usage")
            .map_err(|_| {
                ApiError::invalid(
                    "stream_options.include_usage",
                    "`stream_options.include_usage` must be a boolean",
                )
            })?
            .unwrap_or(false),
        Some(_) => {
            return Err(ApiError::invalid(
                "stream_options",
                "`stream_options` must be an object",
            ))
        }
    };
    sampler
        .check()
        .map_err(|e| ApiError::bad_request(e.to_string()))?;
    Ok(GenerationParams {
        sampler,
        max_tokens,
        stops,
        stream,
        include_usage,
        logprobs,
    })
}

/// A seed for a request without one.
fn fresh_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    nanos
        ^ COUNTER
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The `messages` of a chat request: roles `system`, `developer` (rendered as `system`),
/// `user` and `assistant`; content a string or a list of text parts.
pub(crate) fn messages(f: &Fields<'_>) -> Result<Vec<ChatMessage>, ApiError> {
    let list = match f.get("messages") {
        None => return Err(ApiError::invalid("messages", "`messages` is required")),
        Some(Value::Array(list)) => list,
        Some(_) => {
            return Err(ApiError::invalid(
                "messages",
                "`messages` must be a list of messages",
            ))
        }
    };
    if list.is_empty() {
        return Err(ApiError::invalid(
            "messages",
            "`messages` must not be empty",
        ));
    }
    list.iter()
        .enumerate()
        .map(|(i, m)| {
            let Value::Object(m) = m else {
                return Err(ApiError::invalid(
                    format!("messages[{i}]"),
                    format!("`messages[{i}]` must be an object"),
                ));
            };
            let m = Fields(m);
            let role_field = format!("messages[{i}].role");
            let role = match m.get("role") {
                Some(Value::String(r)) => r.as_str(),
                Some(_) => {
                    return Err(ApiError::invalid(
                        &role_field,
                        format!("`{role_field}` must be a string"),
                    ))
                }
                None => {
                    return Err(ApiError::invalid(
                        &role_field,
                        format!("`{role_field}` is required"),
                    ))
                }
            };
            let role = match role {
                "system" | "developer" => "system",
                "user" => "user",
                "assistant" => "assistant",
                other => {
                    return Err(ApiError::invalid(
                        &role_field,
                        format!(
                            "`{role_field}`: unknown or unsupported role {other:?} (system, \
                             developer, user and assistant are supported)"
                        ),
                    ))
                }
            };
            let content_field = format!("messages[{i}].content");
            let content = match m.get("content") {
                None if role == "assistant" => String::new(),
                None => {
                    return Err(ApiError::invalid(
                        &content_field,
                        format!("`{content_field}` is required"),
                    ))
                }
                Some(Value::String(s)) => s.clone(),
                Some(Value::Array(parts)) => {
                    let mut text = String::new();
                    for (j, part) in parts.iter().enumerate() {
                        let part_field = format!("{content_field}[{j}]");
                        match (
                            part.get("type").and_then(Value::as_str),
                            part.get("text").and_then(Value::as_str),
                        ) {
                            (Some("text"), Some(t)) => text.push_str(t),
                            (Some("text"), None) => {
                                return Err(ApiError::invalid(
                                    &part_field,
                                    format!("`{part_field}.text` must be a string"),
                                ))
                            }
                            _ => {
                                return Err(ApiError::unsupported(
                                    &part_field,
                                    "content other than text parts",
                                ))
                            }
                        }
                    }
                    text
                }
                Some(_) => {
                    return Err(ApiError::invalid(
                        &content_field,
                        format!("`{content_field}` must be a string or a list of text parts"),
                    ))
                }
            };
            if m.get("tool_calls").is_some() {
                return Err(ApiError::unsupported(
                    &format!("messages[{i}].tool_calls"),
                    "tool calling",
                ));
            }
            Ok(ChatMessage::new(role, content))
        })
        .collect()
}

/// A list of token ids (`tokens` of `/detokenize`).
pub(crate) fn token_ids(f: &Fields<'_>, name: &str, n_vocab: usize) -> Result<Vec<u32>, ApiError> {
    let Some(Value::Array(list)) = f.get(name) else {
        return Err(ApiError::invalid(
            name,
            format!("`{name}` must be a list of token ids"),
        ));
    };
    list.iter()
        .map(|v| match v.as_u64() {
            Some(id) if (id as usize) < n_vocab => Ok(id as u32),
            Some(id) => Err(ApiError::invalid(
                name,
                format!(
                    "`{name}`: token id {id} is out of range (the vocabulary has {n_vocab} tokens)"
                ),
            )),
            None => Err(ApiError::invalid(
                name,
                format!("`{name}` must be a list of non-negative integers"),
            )),
        })
        .collect()
}
