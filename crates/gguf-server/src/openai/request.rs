//! Request bodies: UTF-8, then JSON (serde_json's parser, with its nesting limit of 128), then
//! a typed struct per endpoint, then each field checked for its type and range, every refusal
//! a 400 naming the field.
//!
//! Each struct holds exactly the fields its endpoint accepts (`#[serde(deny_unknown_fields)]`):
//! a field the endpoint does not have is refused with `code` `unknown_parameter`, as OpenAI
//! refuses an unrecognized argument (a misspelt `max_token` must not be silently ignored);
//! fields that change nothing here (`user`, `store`, ...) are accepted and ignored; fields this
//! server cannot honour are accepted only to be refused with their own message.
//!
//! A field is a [`Field`]: absent (or `null`), a value of its type, or a value of another
//! type, kept so that the checks, run in a fixed order, refuse it with the message that names
//! the field (serde's own errors name neither the field nor what it should be in OpenAI's
//! words). Deserializing a struct therefore fails only on an unknown field, and that is
//! checked first, against the struct's own field names.

use gguf_model::SamplerConfig;
use gguf_tokenizer::chat::ChatMessage;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value};

use crate::error::ApiError;

/// A body parsed as a JSON object (400 for anything but a UTF-8 JSON object).
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

/// The body as the request `T`: a JSON object with no field `T` does not have.
pub(crate) fn parse<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let object = json_object(body)?;
    let known = field_names::<T>();
    if let Some(name) = object.keys().find(|k| !known.contains(&k.as_str())) {
        let mut e = ApiError::invalid(name, format!("unrecognized request argument `{name}`"));
        e.code = Some("unknown_parameter");
        return Err(e);
    }
    // Every field takes any JSON value (see `Field`): this fails only for a field `T` does
    // not name, refused above.
    T::deserialize(Value::Object(object))
        .map_err(|e| ApiError::bad_request(format!("the request body was refused: {e}")))
}

/// The field names of the struct `T` (as `#[derive(Deserialize)]` hands them to
/// `deserialize_struct`), so that an unknown field is refused naming it.
fn field_names<T: DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::value::Error;
    use serde::de::{Error as _, Visitor};

    /// A deserializer that only notes the fields it is asked for.
    struct Names<'a>(&'a mut &'static [&'static str]);

    impl<'de> Deserializer<'de> for Names<'_> {
        type Error = Error;

        fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
            Err(Error::custom("not a struct"))
        }

        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Error> {
            *self.0 = fields;
            Err(Error::custom("only the field names were asked for"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Names(&mut fields));
    fields
}

/// A request field as sent.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) enum Field<T> {
    /// Missing, or `null`.
    #[default]
    Absent,
    /// A value of its type.
    Given(T),
    /// A value of another type, refused by the field's check.
    Wrong(Value),
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Field<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        if value.is_null() {
            return Ok(Field::Absent);
        }
        Ok(match T::deserialize(&value) {
            Ok(v) => Field::Given(v),
            Err(_) => Field::Wrong(value),
        })
    }
}

impl<T> Field<T> {
    /// The value, `None` when absent; a value of another type is refused as `expected` (`must
    /// be a boolean`, ...).
    fn typed(&self, name: &str, expected: &str) -> Result<Option<&T>, ApiError> {
        match self {
            Field::Absent => Ok(None),
            Field::Given(v) => Ok(Some(v)),
            Field::Wrong(_) => Err(ApiError::invalid(name, format!("`{name}` {expected}"))),
        }
    }
}

impl Field<bool> {
    /// A boolean.
    pub fn boolean(&self, name: &str) -> Result<Option<bool>, ApiError> {
        Ok(self.typed(name, "must be a boolean")?.copied())
    }
}

impl Field<String> {
    /// A string.
    pub fn string(&self, name: &str) -> Result<Option<&str>, ApiError> {
        Ok(self.typed(name, "must be a string")?.map(String::as_str))
    }
}

impl Field<f64> {
    /// A finite number within `[lo, hi]`.
    pub fn number(&self, name: &str, lo: f64, hi: f64) -> Result<Option<f32>, ApiError> {
        let x = match self {
            Field::Absent => return Ok(None),
            Field::Given(x) if x.is_finite() => *x,
            _ => {
                return Err(ApiError::invalid(
                    name,
                    format!("`{name}` must be a number"),
                ))
            }
        };
        if !(lo..=hi).contains(&x) {
            return Err(ApiError::invalid(
                name,
                format!("`{name}` must be between {lo} and {hi}, not {x}"),
            ));
        }
        Ok(Some(x as f32))
    }
}

impl Field<Integer> {
    /// An integer within `[lo, hi]`.
    pub fn integer(&self, name: &str, lo: i64, hi: i64) -> Result<Option<i64>, ApiError> {
        let Some(&Integer(n)) = self.typed(name, "must be an integer")? else {
            return Ok(None);
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

/// A JSON integer that fits an `i64`, written with or without a fraction (`3.0` is 3); 2^63
/// and up are out of range either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Integer(pub i64);

impl<'de> Deserialize<'de> for Integer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::{Error, Unexpected, Visitor};

        struct IntegerVisitor;

        impl Visitor<'_> for IntegerVisitor {
            type Value = Integer;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("an integer")
            }

            fn visit_i64<E: Error>(self, n: i64) -> Result<Integer, E> {
                Ok(Integer(n))
            }

            fn visit_u64<E: Error>(self, n: u64) -> Result<Integer, E> {
                i64::try_from(n)
                    .map(Integer)
                    .map_err(|_| E::invalid_value(Unexpected::Unsigned(n), &self))
            }

            fn visit_f64<E: Error>(self, x: f64) -> Result<Integer, E> {
                if x.fract() == 0.0 && x.abs() < 9.2e18 {
                    Ok(Integer(x as i64))
                } else {
                    Err(E::invalid_value(Unexpected::Float(x), &self))
                }
            }
        }

        deserializer.deserialize_any(IntegerVisitor)
    }
}

/// A JSON object as `T`: never an array (which `#[derive(Deserialize)]` structs would also
/// take, field by field).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Object<T>(pub T);

impl<'de, T: DeserializeOwned> Deserialize<'de> for Object<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let map = Map::deserialize(deserializer)?;
        T::deserialize(Value::Object(map))
            .map(Object)
            .map_err(serde::de::Error::custom)
    }
}

/// A string or a list of strings (`stop`, `prompt`, `input`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum StringOrList {
    /// One string.
    One(String),
    /// A list of them.
    Many(Vec<String>),
}

/// A field accepted and ignored: it changes nothing here.
type Ignored = Option<IgnoredAny>;

/// A field accepted only to be refused unless it asks for nothing (see [`refuse_truthy`]).
type Refused = Option<Value>;

/// `stream_options`: only `include_usage` is read; other keys are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct StreamOptions {
    /// A last chunk with the usage.
    pub include_usage: Field<bool>,
}

/// Declares the body of a completion endpoint: the sampling and output fields chat and text
/// completions share (OpenAI's, and llama-server's `top_k`, `min_p`, `repeat_penalty`), then
/// the endpoint's own; and `sampling`, which borrows the shared ones. (A macro rather than a
/// `#[serde(flatten)]` struct: serde refuses `deny_unknown_fields` beside `flatten`.)
macro_rules! completion_request {
    ($(#[$meta:meta])* struct $name:ident { $($field:ident: $ty:ty,)* }) => {
        $(#[$meta])*
        #[derive(Debug, Default, Deserialize)]
        #[serde(default, deny_unknown_fields)]
        #[allow(
            dead_code,
            reason = "the fields of type `Ignored` are accepted and never read"
        )]
        pub(crate) struct $name {
            model: Field<String>,
            max_tokens: Field<Integer>,
            temperature: Field<f64>,
            top_p: Field<f64>,
            top_k: Field<Integer>,
            min_p: Field<f64>,
            seed: Field<Integer>,
            stop: Field<StringOrList>,
            presence_penalty: Field<f64>,
            frequency_penalty: Field<f64>,
            repeat_penalty: Field<f64>,
            n: Field<Integer>,
            stream: Field<bool>,
            stream_options: Field<Object<StreamOptions>>,
            logit_bias: Refused,
            user: Ignored,
            $($field: $ty,)*
        }

        impl $name {
            /// The shared sampling and length fields, with the fields that set the token
            /// limit (`max_tokens` and the endpoint's others, the last given winning).
            fn sampling<'a>(
                &'a self,
                max_tokens: &'a [(&'a str, &'a Field<Integer>)],
            ) -> Sampling<'a> {
                Sampling {
                    temperature: &self.temperature,
                    top_p: &self.top_p,
                    top_k: &self.top_k,
                    min_p: &self.min_p,
                    presence_penalty: &self.presence_penalty,
                    frequency_penalty: &self.frequency_penalty,
                    repeat_penalty: &self.repeat_penalty,
                    seed: &self.seed,
                    max_tokens,
                    stop: &self.stop,
                    stream: &self.stream,
                    stream_options: &self.stream_options,
                }
            }
        }
    };
}

completion_request! {
    /// The body of `/v1/chat/completions`.
    struct ChatRequest {
        logprobs: Field<bool>,
        messages: Field<Vec<Field<Object<Message>>>>,
        max_completion_tokens: Field<Integer>,
        top_logprobs: Field<Integer>,
        tools: Refused,
        tool_choice: Refused,
        parallel_tool_calls: Ignored,
        functions: Refused,
        function_call: Ignored,
        response_format: Refused,
        modalities: Refused,
        audio: Refused,
        prediction: Refused,
        reasoning_effort: Ignored,
        verbosity: Ignored,
        web_search_options: Ignored,
        store: Ignored,
        metadata: Ignored,
        service_tier: Ignored,
        prompt_cache_key: Ignored,
        safety_identifier: Ignored,
    }
}

completion_request! {
    /// The body of `/v1/completions`.
    struct CompletionRequest {
        logprobs: Field<Integer>,
        prompt: Field<StringOrList>,
        best_of: Field<Integer>,
        echo: Refused,
        suffix: Refused,
    }
}

/// The body of `/v1/embeddings`.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(
    dead_code,
    reason = "the fields of type `Ignored` are accepted and never read"
)]
pub(crate) struct EmbeddingRequest {
    input: Field<StringOrList>,
    model: Field<String>,
    encoding_format: Field<String>,
    dimensions: Ignored,
    user: Ignored,
}

/// The body of `/tokenize` (llama-server's).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct TokenizeRequest {
    content: Field<String>,
    add_special: Field<bool>,
    parse_special: Field<bool>,
    with_pieces: Field<bool>,
}

/// The body of `/detokenize` (llama-server's).
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub(crate) struct DetokenizeRequest {
    tokens: Field<Vec<Field<u64>>>,
}

/// One of chat's `messages`; keys other than these (`name`, ...) are ignored.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Message {
    role: Field<String>,
    content: Field<Content>,
    tool_calls: Ignored,
}

/// A message's `content`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
enum Content {
    Text(String),
    Parts(Vec<Field<Object<ContentPart>>>),
}

/// A part of a message's content: only `{"type": "text", "text"}` is supported.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ContentPart {
    #[serde(rename = "type")]
    kind: Field<String>,
    text: Field<String>,
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

/// `model`: any string (the server has one model).
fn check_model(model: &Field<String>) -> Result<(), ApiError> {
    match model {
        Field::Wrong(_) => Err(ApiError::invalid("model", "`model` must be a string")),
        _ => Ok(()),
    }
}

/// Refuses each of `fields` set to anything that asks for something (anything but `false`,
/// `0`, an empty list or an empty object), saying what it would ask for.
fn refuse_truthy(fields: &[(&str, &Refused, &str)]) -> Result<(), ApiError> {
    let truthy = |value: &Value| match value {
        Value::Null | Value::Bool(false) => false,
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        Value::Number(n) => n.as_f64() != Some(0.0),
        _ => true,
    };
    for &(name, value, what) in fields {
        if value.as_ref().is_some_and(truthy) {
            return Err(ApiError::unsupported(name, what));
        }
    }
    Ok(())
}

/// The refusal of `n` other than 1.
const ONE_CHOICE: &str = "`n`: only one choice per request (n = 1) is supported";

/// `n` or `best_of`: an integer, and only 1 (else `refusal`).
fn check_one(field: &Field<Integer>, name: &str, refusal: &str) -> Result<(), ApiError> {
    if field
        .integer(name, i64::MIN, i64::MAX)?
        .is_some_and(|n| n != 1)
    {
        return Err(ApiError::invalid(name, refusal));
    }
    Ok(())
}

/// The sampling and length fields chat and text completions share, borrowed from either.
struct Sampling<'a> {
    temperature: &'a Field<f64>,
    top_p: &'a Field<f64>,
    top_k: &'a Field<Integer>,
    min_p: &'a Field<f64>,
    presence_penalty: &'a Field<f64>,
    frequency_penalty: &'a Field<f64>,
    repeat_penalty: &'a Field<f64>,
    seed: &'a Field<Integer>,
    /// The fields that set the token limit, by name, the last given winning.
    max_tokens: &'a [(&'a str, &'a Field<Integer>)],
    stop: &'a Field<StringOrList>,
    stream: &'a Field<bool>,
    stream_options: &'a Field<Object<StreamOptions>>,
}

impl Sampling<'_> {
    /// The checked parameters, with `logprobs` (checked by the caller, which has its own
    /// field for it). The defaults are llama.cpp's (as llama-server has them), with a fresh
    /// seed per request unless `seed` is given.
    fn params(&self, logprobs: Option<usize>) -> Result<GenerationParams, ApiError> {
        let mut sampler = SamplerConfig {
            seed: fresh_seed(),
            ..SamplerConfig::default()
        };
        if let Some(t) = self.temperature.number("temperature", 0.0, 2.0)? {
            sampler.temperature = t;
        }
        if let Some(p) = self.top_p.number("top_p", 0.0, 1.0)? {
            if p <= 0.0 {
                return Err(ApiError::invalid(
                    "top_p",
                    "`top_p` must be greater than 0 and at most 1",
                ));
            }
            sampler.top_p = p;
        }
        if let Some(k) = self.top_k.integer("top_k", 0, u32::MAX as i64)? {
            sampler.top_k = k as usize;
        }
        if let Some(p) = self.min_p.number("min_p", 0.0, 1.0)? {
            sampler.min_p = p;
        }
        if let Some(p) = self
            .presence_penalty
            .number("presence_penalty", -2.0, 2.0)?
        {
            sampler.presence_penalty = p;
        }
        if let Some(p) = self
            .frequency_penalty
            .number("frequency_penalty", -2.0, 2.0)?
        {
            sampler.frequency_penalty = p;
        }
        if let Some(p) = self.repeat_penalty.number("repeat_penalty", 0.0, 10.0)? {
            if p <= 0.0 {
                return Err(ApiError::invalid(
                    "repeat_penalty",
                    "`repeat_penalty` must be positive (1 is off)",
                ));
            }
            sampler.repeat_penalty = p;
        }
        if let Some(seed) = self.seed.integer("seed", i64::MIN, i64::MAX)? {
            sampler.seed = seed as u64;
        }
        let mut max_tokens = None;
        for &(name, field) in self.max_tokens {
            if let Some(n) = field.integer(name, 1, u32::MAX as i64)? {
                max_tokens = Some(n as usize);
            }
        }
        let not_strings =
            || ApiError::invalid("stop", "`stop` must be a string or a list of strings");
        let too_many = || ApiError::invalid("stop", "`stop`: at most 16 strings");
        let stops = match self.stop {
            Field::Absent => Vec::new(),
            Field::Given(StringOrList::One(s)) => vec![s.clone()],
            Field::Given(StringOrList::Many(list)) if list.len() > 16 => return Err(too_many()),
            Field::Given(StringOrList::Many(list)) => list.clone(),
            // The count is checked before the strings.
            Field::Wrong(Value::Array(list)) if list.len() > 16 => return Err(too_many()),
            Field::Wrong(_) => return Err(not_strings()),
        };
        let stops = stops.into_iter().filter(|s| !s.is_empty()).collect();
        let stream = self.stream.boolean("stream")?.unwrap_or(false);
        let include_usage = match self.stream_options {
            Field::Absent => false,
            Field::Given(Object(options)) => options
                .include_usage
                .boolean("stream_options.include_usage")?
                .unwrap_or(false),
            Field::Wrong(_) => {
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

impl ChatRequest {
    /// The checked request: its generation parameters and its messages (roles `system`,
    /// `developer` (rendered as `system`), `user` and `assistant`; content a string or a list
    /// of text parts).
    pub fn check(&self) -> Result<(GenerationParams, Vec<ChatMessage>), ApiError> {
        check_model(&self.model)?;
        refuse_truthy(&[
            ("logit_bias", &self.logit_bias, "biasing logits"),
            ("tools", &self.tools, "tool calling"),
            ("functions", &self.functions, "function calling"),
            ("audio", &self.audio, "audio output"),
            ("prediction", &self.prediction, "predicted outputs"),
        ])?;
        if let Some(choice) = &self.tool_choice {
            if choice != "none" && choice != "auto" {
                return Err(ApiError::unsupported("tool_choice", "tool calling"));
            }
        }
        if let Some(format) = &self.response_format {
            if format.get("type").and_then(Value::as_str) != Some("text") {
                return Err(ApiError::unsupported(
                    "response_format",
                    "a response format other than {\"type\": \"text\"}",
                ));
            }
        }
        if let Some(modalities) = &self.modalities {
            if modalities
                .as_array()
                .is_none_or(|m| m.len() != 1 || m[0] != "text")
            {
                return Err(ApiError::unsupported(
                    "modalities",
                    "output other than text",
                ));
            }
        }
        check_one(&self.n, "n", ONE_CHOICE)?;
        let top = self.top_logprobs.integer("top_logprobs", 0, 20)?;
        let logprobs = match (self.logprobs.boolean("logprobs")?, top) {
            (Some(true), top) => Some(top.unwrap_or(0) as usize),
            (_, Some(_)) => {
                return Err(ApiError::invalid(
                    "top_logprobs",
                    "`top_logprobs` needs `logprobs: true`",
                ))
            }
            _ => None,
        };
        let params = self
            .sampling(&[
                ("max_tokens", &self.max_tokens),
                ("max_completion_tokens", &self.max_completion_tokens),
            ])
            .params(logprobs)?;
        Ok((params, self.messages()?))
    }

    fn messages(&self) -> Result<Vec<ChatMessage>, ApiError> {
        let list = match &self.messages {
            Field::Absent => return Err(ApiError::invalid("messages", "`messages` is required")),
            Field::Given(list) => list,
            Field::Wrong(_) => {
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
            .map(|(i, m)| match m {
                Field::Given(Object(m)) => m.check(i),
                _ => Err(ApiError::invalid(
                    format!("messages[{i}]"),
                    format!("`messages[{i}]` must be an object"),
                )),
            })
            .collect()
    }
}

impl Message {
    /// The message `messages[i]`, checked.
    fn check(&self, i: usize) -> Result<ChatMessage, ApiError> {
        let role_field = format!("messages[{i}].role");
        let role = match &self.role {
            Field::Given(r) => r.as_str(),
            Field::Wrong(_) => {
                return Err(ApiError::invalid(
                    &role_field,
                    format!("`{role_field}` must be a string"),
                ))
            }
            Field::Absent => {
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
        let content = match &self.content {
            Field::Absent if role == "assistant" => String::new(),
            Field::Absent => {
                return Err(ApiError::invalid(
                    &content_field,
                    format!("`{content_field}` is required"),
                ))
            }
            Field::Given(Content::Text(s)) => s.clone(),
            Field::Given(Content::Parts(parts)) => {
                let mut text = String::new();
                for (j, part) in parts.iter().enumerate() {
                    let part_field = format!("{content_field}[{j}]");
                    let (kind, t) = match part {
                        Field::Given(Object(part)) => (&part.kind, &part.text),
                        _ => (&Field::Absent, &Field::Absent),
                    };
                    match (kind, t) {
                        (Field::Given(k), Field::Given(t)) if k == "text" => text.push_str(t),
                        (Field::Given(k), _) if k == "text" => {
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
            Field::Wrong(_) => {
                return Err(ApiError::invalid(
                    &content_field,
                    format!("`{content_field}` must be a string or a list of text parts"),
                ))
            }
        };
        if self.tool_calls.is_some() {
            return Err(ApiError::unsupported(
                &format!("messages[{i}].tool_calls"),
                "tool calling",
            ));
        }
        Ok(ChatMessage::new(role, content))
    }
}

impl CompletionRequest {
    /// The checked request: its generation parameters and its prompt (a string, or a list of
    /// one).
    pub fn check(&self) -> Result<(GenerationParams, &str), ApiError> {
        check_model(&self.model)?;
        refuse_truthy(&[
            ("logit_bias", &self.logit_bias, "biasing logits"),
            ("echo", &self.echo, "echoing the prompt"),
            ("suffix", &self.suffix, "a suffix (fill-in-the-middle)"),
        ])?;
        check_one(&self.n, "n", ONE_CHOICE)?;
        check_one(
            &self.best_of,
            "best_of",
            "`best_of`: only best_of = 1 is supported",
        )?;
        let logprobs = self
            .logprobs
            .integer("logprobs", 0, 20)?
            .map(|k| k as usize);
        let params = self
            .sampling(&[("max_tokens", &self.max_tokens)])
            .params(logprobs)?;
        let prompt = match &self.prompt {
            Field::Given(StringOrList::One(s)) => s.as_str(),
            Field::Given(StringOrList::Many(list)) if list.len() == 1 => list[0].as_str(),
            Field::Given(StringOrList::Many(_)) | Field::Wrong(Value::Array(_)) => {
                return Err(ApiError::invalid(
                    "prompt",
                    "`prompt`: one string per request is supported (not several, nor token ids)",
                ))
            }
            Field::Wrong(_) => {
                return Err(ApiError::invalid("prompt", "`prompt` must be a string"))
            }
            Field::Absent => return Err(ApiError::invalid("prompt", "`prompt` is required")),
        };
        Ok((params, prompt))
    }
}

impl EmbeddingRequest {
    /// The checked request: its inputs (a string or up to 2048 strings) and whether the
    /// vectors are asked for as base64 (`encoding_format`).
    pub fn check(&self) -> Result<(Vec<&str>, bool), ApiError> {
        check_model(&self.model)?;
        let base64 = match self.encoding_format.string("encoding_format")? {
            None | Some("float") => false,
            // What OpenAI's Python client asks for unless told otherwise.
            Some("base64") => true,
            Some(other) => {
                return Err(ApiError::invalid(
                    "encoding_format",
                    format!("`encoding_format` must be \"float\" or \"base64\", not {other:?}"),
                ))
            }
        };
        if self.dimensions.is_some() {
            return Err(ApiError::unsupported("dimensions", "shortening embeddings"));
        }
        let count = || ApiError::invalid("input", "`input` must hold between 1 and 2048 strings");
        let texts = match &self.input {
            Field::Given(StringOrList::One(s)) => vec![s.as_str()],
            Field::Given(StringOrList::Many(list)) if (1..=2048).contains(&list.len()) => {
                list.iter().map(String::as_str).collect()
            }
            Field::Given(StringOrList::Many(_)) => return Err(count()),
            Field::Wrong(Value::Array(list)) if (1..=2048).contains(&list.len()) => {
                return Err(ApiError::invalid(
                    "input",
                    "`input` must be a string or a list of strings (token ids are not supported)",
                ))
            }
            Field::Wrong(Value::Array(_)) => return Err(count()),
            Field::Wrong(_) => {
                return Err(ApiError::invalid(
                    "input",
                    "`input` must be a string or a list of strings",
                ))
            }
            Field::Absent => return Err(ApiError::invalid("input", "`input` is required")),
        };
        Ok((texts, base64))
    }
}

impl TokenizeRequest {
    /// The checked request: `content`, `add_special` (default false) and `parse_special`
    /// (default true).
    pub fn check(&self) -> Result<(&str, bool, bool), ApiError> {
        let content = self
            .content
            .string("content")?
            .ok_or_else(|| ApiError::invalid("content", "`content` is required"))?;
        let add_special = self.add_special.boolean("add_special")?.unwrap_or(false);
        let parse_special = self.parse_special.boolean("parse_special")?.unwrap_or(true);
        if self.with_pieces.boolean("with_pieces")?.unwrap_or(false) {
            return Err(ApiError::unsupported("with_pieces", "returning pieces"));
        }
        Ok((content, add_special, parse_special))
    }
}

impl DetokenizeRequest {
    /// The checked token ids, each below `n_vocab`.
    pub fn check(&self, n_vocab: usize) -> Result<Vec<u32>, ApiError> {
        let name = "tokens";
        let Field::Given(list) = &self.tokens else {
            return Err(ApiError::invalid(
                name,
                format!("`{name}` must be a list of token ids"),
            ));
        };
        list.iter()
            .map(|id| match id {
                Field::Given(id) if (*id as usize) < n_vocab => Ok(*id as u32),
                Field::Given(id) => Err(ApiError::invalid(
                    name,
                    format!(
                        "`{name}`: token id {id} is out of range (the vocabulary has {n_vocab} tokens)"
                    ),
                )),
                _ => Err(ApiError::invalid(
                    name,
                    format!("`{name}` must be a list of non-negative integers"),
                )),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
