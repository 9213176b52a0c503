//! The tokenizer's commands: `gguf tokenize`, `detokenize` and `chat-template`.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use gguf_format::GgufFile;

use crate::models::{self, ModelArg, UsageError};
use crate::output::{out, outln, read_input_file};

/// `gguf tokenize`.
#[derive(Args)]
pub struct TokenizeArgs {
    #[command(flatten)]
    model: ModelArg,
    /// The text (or use --file; with -m MODEL, the only positional argument).
    text: Option<String>,
    /// Read the text from this file, byte for byte.
    #[arg(long = "file", value_name = "PATH")]
    text_file: Option<PathBuf>,
    /// Print only the ids, as one JSON array on one line.
    #[arg(long)]
    ids: bool,
    /// Add no BOS/EOS (by default they follow the file's metadata, as in llama.cpp).
    #[arg(long)]
    no_bos: bool,
    /// Treat special-token text (e.g. `<|im_start|>`) as plain text.
    #[arg(long)]
    no_parse_special: bool,
}

/// `gguf detokenize`.
#[derive(Args)]
pub struct DetokenizeArgs {
    #[command(flatten)]
    model: ModelArg,
    /// Token ids (with -m MODEL, every positional argument).
    ids: Vec<u32>,
    /// Render control tokens (BOS, chat markers) as their text.
    #[arg(long)]
    special: bool,
}

/// `gguf chat-template`.
#[derive(Args)]
pub struct ChatTemplateArgs {
    #[command(flatten)]
    model: ModelArg,
    /// A JSON file holding the conversation: `[{"role": "user", "content": "..."}, ...]`
    /// (extra fields such as `tool_calls` are passed through), or an object with `messages`
    /// and optionally `tools`.
    #[arg(long, required_unless_present = "list")]
    messages: Option<PathBuf>,
    /// End with the prompt for the assistant's reply.
    #[arg(long)]
    add_generation_prompt: bool,
    /// Use the named template `tokenizer.chat_template.NAME` instead of the default.
    #[arg(long)]
    name: Option<String>,
    /// List the file's templates instead.
    #[arg(long)]
    list: bool,
}

/// The tokenizer of a model argument, its build warnings on stderr.
fn load_tokenizer(arg: &str) -> Result<gguf_tokenizer::Tokenizer> {
    let path = models::resolve(arg)?;
    let mapped = GgufFile::open(&path)?;
    let tokenizer = gguf_tokenizer::Tokenizer::from_gguf(mapped.file())
        .with_context(|| format!("{}: building the tokenizer", path.display()))?;
    for w in tokenizer.warnings() {
        eprintln!("warning: {}: {w}", path.display());
    }
    Ok(tokenizer)
}

/// Prints the ids (and pieces) of a text.
pub fn tokenize(a: TokenizeArgs) -> Result<()> {
    let (file, texts) = a
        .model
        .with_rest(&a.text.iter().cloned().collect::<Vec<_>>(), |t| {
            Ok(t.to_string())
        })?;
    let text = match (texts.as_slice(), &a.text_file) {
        ([], Some(path)) => read_input_file(path)?,
        ([text], None) => text.clone().into_bytes(),
        ([], None) => return Err(UsageError("no text: give TEXT or --file PATH".into()).into()),
        ([_], Some(_)) => {
            return Err(UsageError("give the text as TEXT or --file PATH, not both".into()).into())
        }
        _ => return Err(UsageError("one text at a time: quote it".into()).into()),
    };
    let tokenizer = load_tokenizer(file)?;
    let ids = tokenizer.encode(
        &text,
        gguf_tokenizer::EncodeOptions {
            add_special: !a.no_bos,
            parse_special: !a.no_parse_special,
        },
    );
    if a.ids {
        outln!("{}", serde_json::to_string(&ids)?)?;
        return Ok(());
    }
    for id in ids {
        let piece = tokenizer.token_to_piece(id, true);
        outln!("{id:>7} -> {:?}", String::from_utf8_lossy(&piece))?;
    }
    Ok(())
}

/// Prints the text of token ids.
pub fn detokenize(a: DetokenizeArgs) -> Result<()> {
    let (file, ids) = a.model.with_rest(&a.ids, |id| {
        id.parse()
            .map_err(|_| UsageError(format!("invalid token id '{id}'")).into())
    })?;
    if ids.is_empty() {
        return Err(UsageError("no token ids given".into()).into());
    }
    let tokenizer = load_tokenizer(file)?;
    if let Some(bad) = ids
        .iter()
        .find(|&&id| id as usize >= tokenizer.vocab_size())
    {
        bail!(
            "token id {bad} is out of range (the vocabulary has {} tokens)",
            tokenizer.vocab_size()
        );
    }
    let text = tokenizer.decode(
        &ids,
        gguf_tokenizer::DecodeOptions {
            remove_special: false,
            unparse_special: a.special,
        },
    );
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(&text)?;
    out.write_all(b"\n")?;
    Ok(())
}

/// Renders a conversation with the file's chat template, or lists its templates.
pub fn chat_template(a: ChatTemplateArgs) -> Result<()> {
    use gguf_tokenizer::chat::{self, ChatTemplate, RenderOptions, Value};
    let path = models::resolve(a.model.name()?)?;
    let mapped = GgufFile::open(&path)?;
    let file = mapped.file();
    if a.list {
        if file.value(chat::TEMPLATE_KEY).is_some() {
            outln!("default")?;
        }
        for name in chat::template_names(file) {
            outln!("{name}")?;
        }
        return Ok(());
    }
    let messages_path = a.messages.as_ref().expect("clap requires --messages");
    let json: serde_json::Value = serde_json::from_slice(&read_input_file(messages_path)?)
        .with_context(|| format!("{}: not JSON", messages_path.display()))?;
    let (messages, tools) = match json {
        serde_json::Value::Array(_) => (json, None),
        serde_json::Value::Object(mut o) => {
            let messages = o.remove("messages").ok_or_else(|| {
                anyhow::anyhow!("{}: the object has no `messages`", messages_path.display())
            })?;
            (messages, o.remove("tools"))
        }
        _ => bail!(
            "{}: expected a list of messages or an object with `messages`",
            messages_path.display()
        ),
    };
    let template = ChatTemplate::from_gguf(file, a.name.as_deref())
        .with_context(|| format!("{}", path.display()))?;
    let options = RenderOptions {
        add_generation_prompt: a.add_generation_prompt,
        tools: tools.map(|t| Value::from_serialize(&t)),
        ..RenderOptions::default()
    };
    let prompt = template.render_value(&Value::from_serialize(&messages), &options)?;
    out!("{prompt}")?;
    Ok(())
}
