//! Chat templates: a file's `tokenizer.chat_template` (or a named `tokenizer.chat_template.NAME`)
//! rendered into a prompt the way Hugging Face `transformers`' `apply_chat_template` renders it.
//!
//! The template sees what `transformers` gives it: `messages` (keys whose value is none dropped,
//! `reasoning_content` / `thinking` / `reasoning` copied to one another as `transformers` does),
//! `tools` and `documents` (none unless given), `add_generation_prompt`, the special tokens
//! (`bos_token`, `eos_token`, `unk_token`, `pad_token`, ... as text, from the file), any extra
//! keyword variables, and the functions `raise_exception(msg)` and `strftime_now(fmt)`.
//!
//! The engine is [`minijinja`], configured like `transformers`' Jinja2 environment: `trim_blocks`,
//! `lstrip_blocks`, no trailing newline kept, no auto-escaping, loop controls, Jinja2's lenient
//! undefined values, and `transformers`' `tojson` (`json.dumps` with `ensure_ascii=False`,
//! `indent`, `separators`, `sort_keys`). On top of that this module makes the output Python's:
//! lists, dicts, floats and none print as Python prints them, the Python string, list and dict
//! methods templates call (`.strip()`, `.split()`, `.startswith()`, `.items()`, `.get()`, ...)
//! follow Python's rules, and the `{% generation %}` tag of `transformers` is accepted. None and
//! undefined values behave as in Jinja2: none is not iterable (`{% for %}`, `in`, `list`, `join`,
//! `first`, ... refuse it, and `none is iterable` is false), while an undefined value iterates as
//! empty, has length 0 and no items, and refuses `int` and `float`.
//!
//! ```
//! use gguf_tokenizer::chat::{ChatMessage, ChatTemplate, RenderOptions};
//! let template = ChatTemplate::new(
//!     "{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}\n{% endfor %}\
//!      {% if add_generation_prompt %}<|assistant|>{% endif %}",
//! )?;
//! let prompt = template.render(
//!     &[ChatMessage::new("system", "Be brief."), ChatMessage::new("user", " Hi! ")],
//!     &RenderOptions { add_generation_prompt: true, ..RenderOptions::default() },
//! )?;
//! assert_eq!(prompt, "<|system|>Be brief.\n<|user|>Hi!\n<|assistant|>");
//! # Ok::<(), gguf_tokenizer::TokenizerError>(())
//! ```
//!
//! Messages with nested data (tool calls, multimodal content) can be built as [`Value`]s, for
//! instance with [`Value::from_serialize`] from a `serde_json::Value`, and rendered with
//! [`ChatTemplate::render_value`].

mod budget;
mod datetime;
mod environment;
mod filters;
mod guard;
mod methods;
mod python;
mod source;
mod tojson;

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::panic::{catch_unwind, AssertUnwindSafe};

use gguf_format::{keys, ArrayView, GgufFile};
use minijinja::value::ValueKind;
use minijinja::{Environment, Error};

use crate::{Result, TokenizerError};

use budget::SpendGuard;
pub use budget::{RenderLimits, DEFAULT_MAX_INSTRUCTIONS};
use datetime::ClockGuard;
pub use datetime::DateTime;
use environment::environment;
use guard::{check_tag_sizes, guard_operations};
use python::py_repr_string;
use source::{accept_generation_tags, guard_for_loops};

/// A value as templates see it: a string, number, bool, none, list or map, possibly nested.
///
/// Build one from any `serde::Serialize` data with [`Value::from_serialize`], or from Rust values
/// with `Value::from` and `collect()`.
pub use minijinja::Value;

/// The key of a file's default chat template.
pub const TEMPLATE_KEY: &str = keys::tokenizer::CHAT_TEMPLATE;

/// The prefix of named chat templates: `tokenizer.chat_template.NAME`.
pub const NAMED_TEMPLATE_PREFIX: &str = "tokenizer.chat_template.";

/// The name the template has inside the engine.
const ENGINE_NAME: &str = "chat_template";

/// Nesting beyond which printing and `tojson` give up (a namespace can contain itself).
const MAX_DEPTH: usize = 200;

/// How many values printing or `tojson` visit at most (a namespace holding itself twice would
/// otherwise take exponential time).
const MAX_NODES: usize = 100_000;

/// The special tokens `transformers` passes to every template, and the GGUF keys of their ids.
const SPECIAL_TOKENS: [(&str, &str); 7] = [
    ("bos_token", keys::tokenizer::BOS_ID),
    ("eos_token", keys::tokenizer::EOS_ID),
    ("unk_token", keys::tokenizer::UNK_ID),
    ("sep_token", keys::tokenizer::SEPARATOR_ID),
    ("pad_token", keys::tokenizer::PAD_ID),
    ("cls_token", "tokenizer.ggml.cls_token_id"),
    ("mask_token", keys::tokenizer::MASK_ID),
];

/// Variables the renderer sets itself; extra variables may not use these names.
const RESERVED: [&str; 4] = ["messages", "tools", "documents", "add_generation_prompt"];

/// One message of a conversation: `role`, `content` and any other fields (`tool_calls`, `name`,
/// `tool_call_id`, `reasoning_content`, ...).
///
/// The template sees it as a map `{role, content, fields...}` in that order. A field (or
/// `content`) whose value is none is left out, as `transformers` leaves out `None` values.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatMessage {
    /// `system`, `user`, `assistant`, `tool`, ...
    pub role: String,
    /// Usually a string; a list of parts for multimodal templates; none to leave it out.
    pub content: Value,
    /// Further fields, in order.
    pub fields: Vec<(String, Value)>,
}

impl ChatMessage {
    /// A message with a role and content and no other field.
    pub fn new(role: impl Into<String>, content: impl Into<Value>) -> ChatMessage {
        ChatMessage {
            role: role.into(),
            content: content.into(),
            fields: Vec::new(),
        }
    }

    /// This message with one more field, e.g. `.with("tool_call_id", "call_1")`.
    pub fn with(mut self, key: impl Into<String>, value: impl Into<Value>) -> ChatMessage {
        self.fields.push((key.into(), value.into()));
        self
    }

    /// The message as the map the template sees (before none values are dropped).
    pub fn to_value(&self) -> Value {
        let mut pairs = Vec::with_capacity(2 + self.fields.len());
        pairs.push((Value::from("role"), Value::from(self.role.as_str())));
        pairs.push((Value::from("content"), self.content.clone()));
        for (k, v) in &self.fields {
            pairs.push((Value::from(k.as_str()), v.clone()));
        }
        pairs.into_iter().collect()
    }
}

/// What a render passes to the template besides the messages.
#[derive(Clone, Debug, Default)]
pub struct RenderOptions {
    /// Whether to end with the header of the assistant's next turn (`add_generation_prompt`).
    pub add_generation_prompt: bool,
    /// `bos_token` as text, replacing the one the template took from the file.
    pub bos_token: Option<String>,
    /// `eos_token` as text, replacing the one the template took from the file.
    pub eos_token: Option<String>,
    /// `tools`: a list of JSON schemas (OpenAI style `{"type": "function", "function": {...}}`).
    /// Without it templates see `tools` defined but none, as `transformers` passes it.
    pub tools: Option<Value>,
    /// `documents` for retrieval-augmented templates; none when absent, as for `tools`.
    pub documents: Option<Value>,
    /// Further keyword variables (`enable_thinking`, `date_string`, ...). They replace special
    /// tokens of the same name; `messages`, `tools`, `documents` and `add_generation_prompt`
    /// are set with the fields above and are an error here.
    pub extra: BTreeMap<String, Value>,
    /// The clock `strftime_now` reads; the system clock (UTC) when `None`.
    pub now: Option<DateTime>,
    /// How long the prompt may be, how much the template may build and how many instructions
    /// it may run on the way; a render past them is an error.
    pub limits: RenderLimits,
}

/// A parsed chat template, ready to render conversations.
#[derive(Clone)]
pub struct ChatTemplate {
    env: Environment<'static>,
    name: Option<String>,
    source: String,
    special_tokens: Vec<(String, String)>,
}

impl fmt::Debug for ChatTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChatTemplate")
            .field("name", &self.name)
            .field("source_len", &self.source.len())
            .field("special_tokens", &self.special_tokens)
            .finish()
    }
}

impl ChatTemplate {
    /// Parses a template; a syntax error is [`TokenizerError::Template`] naming the line.
    pub fn new(source: &str) -> Result<ChatTemplate> {
        ChatTemplate::with_name(None, source)
    }

    /// Parses a template known by `name` (`tokenizer.chat_template.NAME`), which errors name.
    pub fn with_name(name: Option<&str>, source: &str) -> Result<ChatTemplate> {
        let name = name.map(str::to_string);
        let refuse = |message: String| TokenizerError::Template {
            name: name.clone(),
            message,
        };
        check_tag_sizes(source).map_err(refuse)?;
        let guarded_source = guard_operations(guard_for_loops(accept_generation_tags(source)))
            .map_err(|why| refuse(format!("cannot bound the template's work: {why}")))?;
        let env = guarded(&name, || {
            let mut env = environment();
            env.add_template_owned(ENGINE_NAME, guarded_source)?;
            Ok(env)
        })?;
        Ok(ChatTemplate {
            env,
            name,
            source: source.to_string(),
            special_tokens: Vec::new(),
        })
    }

    /// The file's default template (`name` `None`) or `tokenizer.chat_template.NAME`, with the
    /// special tokens (`bos_token`, `eos_token`, `unk_token`, `sep_token`, `pad_token`,
    /// `cls_token`, `mask_token`) as the texts of their ids in `tokenizer.ggml.tokens`.
    ///
    /// The name `default` falls back to the default template when the file has no template of
    /// that name. A missing template is [`TokenizerError::Metadata`] listing the names there are.
    pub fn from_gguf(file: &GgufFile<'_>, name: Option<&str>) -> Result<ChatTemplate> {
        let key = match name {
            Some("default")
                if file
                    .value(&format!("{NAMED_TEMPLATE_PREFIX}default"))
                    .is_none() =>
            {
                TEMPLATE_KEY.to_string()
            }
            Some(n) => format!("{NAMED_TEMPLATE_PREFIX}{n}"),
            None => TEMPLATE_KEY.to_string(),
        };
        let Some(source) = file.get_opt::<&str>(&key)? else {
            let mut names = template_names(file);
            if file.value(TEMPLATE_KEY).is_some() {
                names.insert(0, "(default)".to_string());
            }
            let available = if names.is_empty() {
                "the file has no chat template".to_string()
            } else {
                format!("the file has: {}", names.join(", "))
            };
            return Err(TokenizerError::Metadata(format!(
                "no chat template `{key}`: {available}"
            )));
        };
        let label = if key == TEMPLATE_KEY { None } else { name };
        let mut template = ChatTemplate::with_name(label, source)?;
        template.special_tokens = special_tokens(file)?;
        Ok(template)
    }

    /// The template's name, `None` for a file's default template.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }

    /// The template's source text.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The special tokens every render passes (`("bos_token", "<s>")`, ...), in the order
    /// `transformers` lists them.
    pub fn special_tokens(&self) -> &[(String, String)] {
        &self.special_tokens
    }

    /// Sets (or replaces) a special token every render passes, e.g. `("eos_token", "</s>")`.
    pub fn set_special_token(&mut self, name: &str, text: impl Into<String>) {
        let text = text.into();
        match self.special_tokens.iter_mut().find(|(n, _)| n == name) {
            Some(entry) => entry.1 = text,
            None => self.special_tokens.push((name.to_string(), text)),
        }
    }

    /// Renders a conversation of simple messages.
    pub fn render(&self, messages: &[ChatMessage], opts: &RenderOptions) -> Result<String> {
        let messages: Value = messages.iter().map(ChatMessage::to_value).collect();
        self.render_value(&messages, opts)
    }

    /// Renders a conversation given as a list of maps, as `transformers` takes it: each message
    /// a map with `role`, `content` and whatever else the template reads (`tool_calls`, ...).
    ///
    /// Like `transformers`, an empty conversation is an error, keys whose value is none are
    /// dropped from each message, and a message's `reasoning_content`, `thinking` or
    /// `reasoning` is copied to both `reasoning_content` and `thinking`.
    pub fn render_value(&self, messages: &Value, opts: &RenderOptions) -> Result<String> {
        let messages = self.normalize_messages(messages)?;
        let ctx = self.context(messages, opts)?;
        let _clock = ClockGuard::set(opts.now);
        let spend = SpendGuard::start(opts.limits);
        let mut out = BoundedOutput::new(opts.limits.max_output_bytes);
        // The fuel is the environment's: another limit than the default needs a copy of it
        // (cheap: it shares the compiled template).
        let custom;
        let env = if opts.limits.max_instructions == DEFAULT_MAX_INSTRUCTIONS {
            &self.env
        } else {
            let mut env = self.env.clone();
            env.set_fuel(Some(opts.limits.max_instructions));
            custom = env;
            &custom
        };
        let rendered = guarded(&self.name, || {
            env.get_template(ENGINE_NAME)?
                .render_captured_to(ctx, &mut out)
                .map_err(|e| match e.kind() {
                    minijinja::ErrorKind::OutOfFuel => Error::new(
                        minijinja::ErrorKind::InvalidOperation,
                        format!(
                            "the template ran more than {} instructions (a loop that does not \
                             end?)",
                            opts.limits.max_instructions
                        ),
                    ),
                    _ => e,
                })?;
            // A value cut short where it could not fail (Python's str() of a long list).
            spend.exceeded().map_or(Ok(()), Err)
        });
        match rendered {
            Ok(()) => String::from_utf8(out.bytes)
                .map_err(|_| self.error("the template wrote text that is not UTF-8".into())),
            Err(_) if out.overflowed => Err(self.error(format!(
                "the rendered prompt is longer than {} bytes",
                opts.limits.max_output_bytes
            ))),
            Err(e) => Err(e),
        }
    }

    fn error(&self, message: String) -> TokenizerError {
        TokenizerError::Template {
            name: self.name.clone(),
            message,
        }
    }

    /// `transformers`' `_normalize_chat_messages` and `_alias_reasoning_fields`.
    fn normalize_messages(&self, messages: &Value) -> Result<Value> {
        if !matches!(messages.kind(), ValueKind::Seq | ValueKind::Iterable) {
            return Err(self.error(format!(
                "the messages must be a list of maps, not {}",
                messages.kind()
            )));
        }
        let iter = messages
            .try_iter()
            .map_err(|e| self.error(format!("the messages cannot be read: {e}")))?;
        let mut out = Vec::new();
        for message in iter {
            let pairs = match message
                .as_object()
                .filter(|_| message.kind() == ValueKind::Map)
            {
                Some(obj) => obj.try_iter_pairs(),
                None => None,
            };
            let Some(pairs) = pairs else {
                return Err(self.error(format!(
                    "chat messages must be maps, but got {}",
                    py_repr_string(&message)
                )));
            };
            let pairs: Vec<(Value, Value)> = pairs
                .filter(|(_, v)| !v.is_none() && !v.is_undefined())
                .collect();
            let reasoning = ["reasoning_content", "thinking", "reasoning"]
                .iter()
                .find_map(|field| {
                    pairs
                        .iter()
                        .find(|(k, _)| k.as_str() == Some(field))
                        .map(|(_, v)| v.clone())
                });
            let message: Value = match reasoning {
                // {"thinking": r, **message, "reasoning_content": r}
                Some(r) => std::iter::once((Value::from("thinking"), r.clone()))
                    .chain(pairs)
                    .chain(std::iter::once((Value::from("reasoning_content"), r)))
                    .collect(),
                None => pairs.into_iter().collect(),
            };
            out.push(message);
        }
        if out.is_empty() {
            return Err(
                self.error("cannot apply a chat template to an empty conversation".to_string())
            );
        }
        Ok(Value::from(out))
    }

    fn context(&self, messages: Value, opts: &RenderOptions) -> Result<Value> {
        let mut vars: BTreeMap<String, Value> = BTreeMap::new();
        for (name, text) in &self.special_tokens {
            vars.insert(name.clone(), Value::from(text.as_str()));
        }
        if let Some(bos) = &opts.bos_token {
            vars.insert("bos_token".into(), Value::from(bos.as_str()));
        }
        if let Some(eos) = &opts.eos_token {
            vars.insert("eos_token".into(), Value::from(eos.as_str()));
        }
        for (name, value) in &opts.extra {
            if RESERVED.contains(&name.as_str()) || budget::names::ALL.contains(&name.as_str()) {
                return Err(self.error(format!(
                    "the extra variable `{name}` clashes with the one the renderer sets; \
                     use the field of RenderOptions or the messages instead"
                )));
            }
            vars.insert(name.clone(), value.clone());
        }
        vars.insert("messages".into(), messages);
        vars.insert(
            "tools".into(),
            opts.tools.clone().unwrap_or(Value::from(())),
        );
        vars.insert(
            "documents".into(),
            opts.documents.clone().unwrap_or(Value::from(())),
        );
        vars.insert(
            "add_generation_prompt".into(),
            Value::from(opts.add_generation_prompt),
        );
        Ok(vars.into_iter().collect())
    }
}

/// The names of a file's named templates (`tokenizer.chat_template.NAME`), in file order. The
/// default template (`tokenizer.chat_template`) is not among them: it is the one without a name.
pub fn template_names(file: &GgufFile<'_>) -> Vec<String> {
    file.metadata()
        .iter()
        .filter_map(|kv| kv.key.strip_prefix(NAMED_TEMPLATE_PREFIX))
        .filter(|name| !name.is_empty())
        .map(str::to_string)
        .collect()
}

/// The texts of the file's special tokens. A bad BOS or EOS id is an error; the other tokens
/// are left out when their id is unusable, as templates rarely read them.
fn special_tokens(file: &GgufFile<'_>) -> Result<Vec<(String, String)>> {
    let tokens: Option<ArrayView<'_>> = file.get_opt(keys::tokenizer::TOKENS)?;
    let mut out = Vec::new();
    for (name, key) in SPECIAL_TOKENS {
        if file.value(key).is_none() {
            continue;
        }
        let essential = matches!(name, "bos_token" | "eos_token");
        let text = file
            .get_usize(key)
            .map_err(TokenizerError::from)
            .and_then(|id| {
                let tokens = tokens.as_ref().ok_or_else(|| {
                    TokenizerError::Metadata(format!(
                        "`{key}` is set but `{}` is missing",
                        keys::tokenizer::TOKENS
                    ))
                })?;
                let value = tokens.get(id as u64).ok_or_else(|| {
                    TokenizerError::Metadata(format!(
                        "`{key}` = {id} is past the end of `{}` ({} tokens)",
                        keys::tokenizer::TOKENS,
                        tokens.len()
                    ))
                })?;
                value.as_str().map(str::to_string).ok_or_else(|| {
                    TokenizerError::Metadata(format!(
                        "token {id} (`{key}`) of `{}` is not UTF-8 text",
                        keys::tokenizer::TOKENS
                    ))
                })
            });
        match text {
            Ok(text) => out.push((name.to_string(), text)),
            Err(e) if essential => return Err(e),
            Err(_) => {}
        }
    }
    Ok(out)
}

/// Runs the engine, turning its errors, and any panic in it, into [`TokenizerError::Template`].
fn guarded<T>(
    name: &Option<String>,
    f: impl FnOnce() -> std::result::Result<T, Error>,
) -> Result<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(e)) => Err(TokenizerError::Template {
            name: name.clone(),
            message: describe_error(&e),
        }),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(TokenizerError::Template {
                name: name.clone(),
                message: format!("internal error of the template engine: {what}"),
            })
        }
    }
}

/// The rendered prompt, refusing to grow past its limit.
struct BoundedOutput {
    bytes: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

impl BoundedOutput {
    fn new(limit: usize) -> BoundedOutput {
        BoundedOutput {
            bytes: Vec::new(),
            limit,
            overflowed: false,
        }
    }
}

impl std::io::Write for BoundedOutput {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if buf.len() > self.limit - self.bytes.len() {
            self.overflowed = true;
            return Err(std::io::Error::other("the prompt is too long"));
        }
        self.bytes.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The message of an engine error: what went wrong and the line where it did.
fn describe_error(e: &Error) -> String {
    let mut chain: Vec<&(dyn std::error::Error + 'static)> = Vec::new();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        chain.push(s);
        source = s.source();
    }
    let raised = chain.iter().find_map(|s| s.downcast_ref::<Raised>());
    let mut msg = match raised {
        Some(r) => format!("raise_exception: {}", r.0),
        None => match e.detail() {
            Some(detail) => format!("{}: {detail}", e.kind()),
            None => e.kind().to_string(),
        },
    };
    if raised.is_none() {
        for s in &chain {
            let text = match s.downcast_ref::<Error>() {
                Some(inner) => match inner.detail() {
                    Some(d) => format!("{}: {d}", inner.kind()),
                    None => inner.kind().to_string(),
                },
                None => s.to_string(),
            };
            if !msg.contains(&text) {
                msg.push_str(": ");
                msg.push_str(&text);
            }
        }
    }
    if let Some(line) = e.line() {
        let _ = write!(msg, " (line {line})");
    }
    msg
}

/// The error `raise_exception(msg)` raises, recognised in [`describe_error`].
#[derive(Debug)]
struct Raised(String);

impl fmt::Display for Raised {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Raised {}
