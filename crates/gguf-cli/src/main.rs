//! The `gguf` command.

// Output goes through `out!`/`outln!` (see the library), never `print!`.
#![deny(clippy::print_stdout)]

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use gguf_cli::{inspect, models, out, outln, run};
use gguf_format::edit::{edit_metadata, Edit};
use gguf_format::fsutil::{self, WriteMode};
use gguf_format::split::{self, SplitLimit, SplitSet};
use gguf_format::{GgufFile, OwnedValue, Refusal, Value, ValueType};
use indicatif::{ProgressBar, ProgressStyle};

#[derive(Parser)]
#[command(
    name = "gguf",
    version,
    about = "Inspect, validate, edit, split and fetch GGUF model files"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a file's header, metadata and tensor table.
    Inspect(InspectArgs),
    /// Write one tensor, dequantized to float32, as a .npy file.
    Dequantize(DequantizeArgs),
    /// Check a file (or split set) and report whether llama.cpp can load it.
    Validate(ValidateArgs),
    /// Fetch a known real model into the cache.
    Pull(PullArgs),
    /// Change metadata keys, writing a new file atomically.
    Edit(EditArgs),
    /// Cut a model into parts like llama.cpp's gguf-split.
    Split(SplitArgs),
    /// Join a split set back into one file like `gguf-split --merge`.
    Merge(MergeArgs),
    /// Tokenize text with the file's tokenizer (the ids llama.cpp's llama-tokenize prints).
    Tokenize(TokenizeArgs),
    /// Turn token ids back into text.
    Detokenize(DetokenizeArgs),
    /// Render the file's chat template for a conversation, as Hugging Face transformers does.
    ChatTemplate(ChatTemplateArgs),
    /// Generate text from a raw prompt, streamed to stdout.
    Generate(run::GenerateArgs),
    /// Chat interactively with the file's chat template.
    Chat(run::ChatArgs),
    /// Perplexity of a text, as llama-perplexity computes it.
    Perplexity(run::PerplexityArgs),
    /// Prompt-processing and generation speed, like llama-bench.
    Bench(run::BenchArgs),
}

#[derive(Args)]
struct InspectArgs {
    /// A .gguf path or a known model name (see `gguf pull --list`).
    file: String,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Show whole arrays and strings instead of the first elements.
    #[arg(long)]
    full: bool,
    /// Show only the tensor table.
    #[arg(long)]
    tensors: bool,
    /// Add per-tensor min, max, mean and RMS of the dequantized values.
    #[arg(long)]
    stats: bool,
}

#[derive(Args)]
struct DequantizeArgs {
    /// A .gguf path or a known model name.
    file: String,
    /// The tensor's name.
    tensor: String,
    /// The .npy file to write (float32, shape = ggml shape reversed, as numpy presents it).
    #[arg(short, long)]
    output: PathBuf,
}

#[derive(Args)]
struct ValidateArgs {
    /// A .gguf path (any part of a split set) or a known model name.
    file: String,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct PullArgs {
    /// Model names; `all` for every known model.
    names: Vec<String>,
    /// List the known models and where they are cached.
    #[arg(long)]
    list: bool,
    /// Hash a cached copy again before trusting it.
    #[arg(long)]
    verify: bool,
}

#[derive(Args)]
struct EditArgs {
    /// The file to edit (or a known model name, when writing to -o).
    input: String,
    /// Where to write the result.
    #[arg(
        short,
        long,
        required_unless_present = "in_place",
        conflicts_with = "in_place"
    )]
    output: Option<PathBuf>,
    /// Replace the input (through a temporary file and an atomic rename), keeping its mode
    /// and owner; a symbolic link is followed and kept.
    #[arg(long)]
    in_place: bool,
    /// Overwrite an existing output file (regular files only), or a read-only one.
    #[arg(long)]
    force: bool,
    /// Set a key: `KEY=VALUE` keeps the existing key's type, `KEY:TYPE=VALUE` names it
    /// (u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool string).
    #[arg(long = "set", value_name = "KEY[:TYPE]=VALUE")]
    set: Vec<String>,
    /// Remove a key.
    #[arg(long = "remove", value_name = "KEY")]
    remove: Vec<String>,
    /// Rename a key: `OLD=NEW`.
    #[arg(long = "rename", value_name = "OLD=NEW")]
    rename: Vec<String>,
}

#[derive(Args)]
struct SplitArgs {
    /// The model to split.
    input: String,
    /// Output prefix: parts are PREFIX-00001-of-0000N.gguf.
    output_prefix: String,
    /// At most N tensors per part (the default, 128, as gguf-split).
    #[arg(long, value_name = "N", conflicts_with = "max_size")]
    max_tensors: Option<usize>,
    /// At most this much tensor data per part: a number with M or G (decimal, as gguf-split).
    #[arg(long, value_name = "SIZE")]
    max_size: Option<String>,
    /// Put only metadata in the first part.
    #[arg(long)]
    no_tensor_first_split: bool,
}

#[derive(Args)]
struct TokenizeArgs {
    /// A .gguf path or a known model name.
    file: String,
    /// The text (or use --file).
    #[arg(required_unless_present = "text_file")]
    text: Option<String>,
    /// Read the text from this file, byte for byte.
    #[arg(long = "file", value_name = "PATH", conflicts_with = "text")]
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

#[derive(Args)]
struct DetokenizeArgs {
    /// A .gguf path or a known model name.
    file: String,
    /// Token ids.
    #[arg(required = true)]
    ids: Vec<u32>,
    /// Render control tokens (BOS, chat markers) as their text.
    #[arg(long)]
    special: bool,
}

#[derive(Args)]
struct ChatTemplateArgs {
    /// A .gguf path or a known model name.
    file: String,
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

#[derive(Args)]
struct MergeArgs {
    /// Any part of the split set (normally PREFIX-00001-of-0000N.gguf).
    first_part: PathBuf,
    /// The merged file (must not exist).
    output: PathBuf,
}

fn main() -> ExitCode {
    #[cfg(unix)]
    remove_temp_files_on_signals();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Inspect(a) => cmd_inspect(a),
        Command::Validate(a) => cmd_validate(a),
        Command::Dequantize(a) => cmd_dequantize(a),
        Command::Pull(a) => cmd_pull(a),
        Command::Edit(a) => cmd_edit(a),
        Command::Split(a) => cmd_split(a),
        Command::Merge(a) => cmd_merge(a),
        Command::Tokenize(a) => cmd_tokenize(a),
        Command::Detokenize(a) => cmd_detokenize(a),
        Command::ChatTemplate(a) => cmd_chat_template(a),
        Command::Generate(a) => run::generate(a),
        Command::Chat(a) => run::chat(a),
        Command::Perplexity(a) => run::perplexity(a),
        Command::Bench(a) => run::bench(a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output has gone (`gguf inspect M | head -1`): end quietly, as
        // ripgrep does (`cat` dies of SIGPIPE; an exit status of 0 keeps `pipefail` scripts
        // working too).
        Err(e) if gguf_cli::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// On SIGINT, SIGTERM and SIGHUP: remove the temporary files of the writes under way, then
/// end as the signal would have ended the program (so a shell sees 130, 143 or 129).
///
/// The signals are caught by signal-hook and handled on a thread of their own, so nothing
/// runs in signal context, reads on stdin are restarted rather than interrupted (`gguf chat`),
/// and a signal the program was started with ignored (SIGHUP under `nohup`) stays ignored.
#[cfg(unix)]
fn remove_temp_files_on_signals() {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let wanted: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
        .into_iter()
        .filter(|&s| !ignored_at_start(s))
        .collect();
    let Ok(mut signals) = signal_hook::iterator::Signals::new(&wanted) else {
        return;
    };
    std::thread::spawn(move || {
        if let Some(signal) = signals.forever().next() {
            fsutil::remove_temp_files();
            let _ = signal_hook::low_level::emulate_default_handler(signal);
            std::process::exit(128 + signal);
        }
    });
}

/// Whether `signal` is ignored (as `nohup` leaves SIGHUP): Linux's /proc tells; elsewhere the
/// answer is no.
#[cfg(unix)]
fn ignored_at_start(signal: i32) -> bool {
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .is_some_and(|mask| (1..=64).contains(&signal) && mask & (1 << (signal - 1)) != 0)
}

/// A refused destination, with the flag that would allow it.
fn with_force_hint(e: gguf_format::Error) -> anyhow::Error {
    match &e {
        gguf_format::Error::Refused {
            reason: Refusal::Exists,
            ..
        } => anyhow::anyhow!("{e} (pass --force to replace it)"),
        gguf_format::Error::Refused {
            reason: Refusal::ReadOnly,
            ..
        } => anyhow::anyhow!("{e} (pass --force to replace it all the same; it stays read-only)"),
        _ => e.into(),
    }
}

fn cmd_inspect(a: InspectArgs) -> Result<()> {
    let path = models::resolve(&a.file)?;
    let mapped = GgufFile::open(&path)?;
    let file = mapped.file();
    let stats = if a.stats {
        let bar = ProgressBar::new(file.tensors().len() as u64);
        let stats = file
            .tensors()
            .iter()
            .map(|t| {
                bar.inc(1);
                gguf_cli::tensors::stats(file, t)
            })
            .collect::<Result<Vec<_>>>()?;
        bar.finish_and_clear();
        Some(stats)
    } else {
        None
    };
    let view = inspect::View {
        full: a.full,
        tensors_only: a.tensors,
        stats: stats.as_deref(),
    };
    if a.json {
        outln!("{}", inspect::file_json(file, view))?;
    } else {
        out!(
            "{}",
            inspect::file_text(file, &path.display().to_string(), view)
        )?;
    }
    Ok(())
}

fn cmd_dequantize(a: DequantizeArgs) -> Result<()> {
    let path = models::resolve(&a.file)?;
    let mapped = GgufFile::open(&path)?;
    let file = mapped.file();
    let t = file
        .tensor(&a.tensor)
        .with_context(|| format!("{}: no tensor named '{}'", path.display(), a.tensor))?;
    // An existing regular file is replaced, as before; a FIFO, device or read-only file is not.
    fsutil::write_atomic(&a.output, WriteMode::Replace { force: false }, |out| {
        gguf_cli::tensors::write_npy(file, t, out)
            .map_err(|e| gguf_format::Error::Io(std::io::Error::other(format!("{e:#}"))))
    })?;
    eprintln!("wrote {} ({} x f32)", a.output.display(), t.element_count());
    Ok(())
}

fn cmd_validate(a: ValidateArgs) -> Result<()> {
    let path = models::resolve(&a.file)?;
    let set = SplitSet::open(&path)?;
    let mut warnings = Vec::new();
    for part in set.parts() {
        let f = part.file();
        let name = part.path().display();
        if f.version() < 2 {
            warnings.push(format!("{name}: GGUF v1; llama.cpp reads only v2 and v3"));
        }
        if f.byte_order() == gguf_format::ByteOrder::Big {
            warnings.push(format!(
                "{name}: big-endian; llama.cpp on little-endian machines refuses it"
            ));
        }
        if !f.has_canonical_layout() {
            warnings.push(format!(
                "{name}: tensor offsets are not packed in order; llama.cpp's loader requires each tensor to start where the previous one ends (padded)"
            ));
        }
        for kv in f.metadata() {
            if let Value::Array(arr) = kv.value {
                if arr.element_type() == ValueType::Array {
                    warnings.push(format!(
                        "{name}: key '{}' holds nested arrays, which llama.cpp rejects",
                        kv.key
                    ));
                }
            }
        }
        for t in f.tensors() {
            if t.name.len() > gguf_format::MAX_TENSOR_NAME_BYTES {
                warnings.push(format!(
                    "{name}: tensor name '{}' is longer than ggml's 63 bytes",
                    t.name
                ));
            }
        }
    }
    // The container is sound; for an architecture the engine runs, its hyperparameters must
    // be usable too (a NaN epsilon or a zero RoPE base parses fine but computes nothing), and
    // its tensors there with the right shapes.
    let mut errors = Vec::new();
    match gguf_model::check(&set, &path.display().to_string()) {
        Ok(_) | Err(gguf_model::ModelError::UnsupportedArchitecture { .. }) => {}
        Err(e) => errors.push(e.to_string()),
    }
    if a.json {
        let out = serde_json::json!({
            "valid": errors.is_empty(),
            "parts": set.parts().len(),
            "tensors": set.tensor_count(),
            "llama_cpp_compatible": warnings.is_empty(),
            "errors": errors,
            "warnings": warnings,
        });
        outln!("{out}")?;
    } else {
        let verdict = if errors.is_empty() {
            "valid GGUF"
        } else {
            "a well-formed GGUF that cannot run"
        };
        outln!(
            "{}: {verdict} ({} part(s), {} tensors)",
            path.display(),
            set.parts().len(),
            set.tensor_count()
        )?;
        for e in &errors {
            outln!("error: {e}")?;
        }
        for w in &warnings {
            outln!("warning: {w}")?;
        }
    }
    if !errors.is_empty() {
        bail!("{}: {} error(s)", path.display(), errors.len());
    }
    Ok(())
}

fn cmd_pull(a: PullArgs) -> Result<()> {
    if a.list || a.names.is_empty() {
        for m in models::MODELS {
            let state = if m.cached().is_some() {
                "cached"
            } else {
                "not cached"
            };
            outln!(
                "{:14} {:10} {}  ({})",
                m.name,
                state,
                m.description,
                m.cached_path().display()
            )?;
        }
        return Ok(());
    }
    let wanted: Vec<&models::KnownModel> = if a.names.iter().any(|n| n == "all") {
        models::MODELS.iter().collect()
    } else {
        a.names
            .iter()
            .map(|n| {
                models::find(n)
                    .with_context(|| format!("unknown model '{n}' (see `gguf pull --list`)"))
            })
            .collect::<Result<_>>()?
    };
    for m in wanted {
        let p = models::pull(m, a.verify)?;
        outln!("{}", p.display())?;
    }
    Ok(())
}

fn progress_bar(what: &str) -> ProgressBar {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}

fn parse_typed_value(text: &str, ty: ValueType) -> Result<OwnedValue> {
    let bad = || format!("'{text}' is not a valid {ty}");
    Ok(match ty {
        ValueType::U8 => OwnedValue::U8(text.parse().with_context(bad)?),
        ValueType::I8 => OwnedValue::I8(text.parse().with_context(bad)?),
        ValueType::U16 => OwnedValue::U16(text.parse().with_context(bad)?),
        ValueType::I16 => OwnedValue::I16(text.parse().with_context(bad)?),
        ValueType::U32 => OwnedValue::U32(text.parse().with_context(bad)?),
        ValueType::I32 => OwnedValue::I32(text.parse().with_context(bad)?),
        ValueType::U64 => OwnedValue::U64(text.parse().with_context(bad)?),
        ValueType::I64 => OwnedValue::I64(text.parse().with_context(bad)?),
        ValueType::F32 => OwnedValue::F32(text.parse().with_context(bad)?),
        ValueType::F64 => OwnedValue::F64(text.parse().with_context(bad)?),
        ValueType::Bool => OwnedValue::Bool(text.parse().with_context(bad)?),
        ValueType::String => OwnedValue::from(text),
        ValueType::Array => bail!("--set cannot write arrays; only scalar and string values"),
    })
}

fn value_type_named(name: &str) -> Result<ValueType> {
    (0..13)
        .filter_map(ValueType::from_id)
        .find(|t| t.name() == name || (name == "str" && *t == ValueType::String))
        .with_context(|| format!("unknown value type '{name}'"))
}

fn cmd_edit(a: EditArgs) -> Result<()> {
    let input = models::resolve(&a.input)?;
    if a.in_place && models::find(&a.input).is_some() && !Path::new(&a.input).exists() {
        bail!(
            "refusing to edit the cached model {} in place; write a copy with -o",
            a.input
        );
    }
    let output = a.output.clone().unwrap_or_else(|| input.clone());
    let mode = if a.in_place || a.force {
        WriteMode::Replace { force: a.force }
    } else {
        WriteMode::CreateNew
    };
    // Refuse before the work; the write checks again when it starts and when it ends.
    fsutil::check_destination(&output, mode).map_err(with_force_hint)?;
    let mapped = GgufFile::open(&input)?;
    let file = mapped.file();
    let mut edits = Vec::new();
    for s in &a.set {
        let (lhs, value) = s
            .split_once('=')
            .with_context(|| format!("--set '{s}': expected KEY[:TYPE]=VALUE"))?;
        let (key, ty) = match lhs.rsplit_once(':') {
            Some((k, t)) => (k, value_type_named(t)?),
            None => {
                let existing = file.value(lhs).with_context(|| {
                    format!("--set '{s}': key '{lhs}' is new, so name its type as {lhs}:TYPE=VALUE")
                })?;
                (lhs, existing.value_type())
            }
        };
        edits.push(Edit::Set(key.to_string(), parse_typed_value(value, ty)?));
    }
    for k in &a.remove {
        edits.push(Edit::Remove(k.clone()));
    }
    for r in &a.rename {
        let (from, to) = r
            .split_once('=')
            .with_context(|| format!("--rename '{r}': expected OLD=NEW"))?;
        edits.push(Edit::Rename(from.to_string(), to.to_string()));
    }
    if edits.is_empty() {
        bail!("nothing to do: give --set, --remove or --rename");
    }
    drop(mapped);
    let bar = progress_bar("writing");
    edit_metadata(&input, &output, mode, &edits, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })
    .map_err(with_force_hint)?;
    bar.finish_and_clear();
    eprintln!("wrote {}", output.display());
    Ok(())
}

/// Parses gguf-split's sizes: a number followed by M (10^6) or G (10^9).
fn parse_split_size(text: &str) -> Result<u64> {
    let (digits, unit) = text.split_at(text.len().saturating_sub(1));
    let scale = match unit {
        "M" | "m" => 1_000_000,
        "G" | "g" => 1_000_000_000,
        _ => bail!("--max-size '{text}': expected a number followed by M or G, e.g. 2G"),
    };
    let n: u64 = digits
        .parse()
        .with_context(|| format!("--max-size '{text}': bad number"))?;
    n.checked_mul(scale)
        .filter(|&v| v > 0)
        .context("--max-size must be above zero and fit 64 bits")
}

fn cmd_split(a: SplitArgs) -> Result<()> {
    let input = models::resolve(&a.input)?;
    let limit = match (&a.max_size, a.max_tensors) {
        (Some(s), _) => SplitLimit::MaxBytes(parse_split_size(s)?),
        (None, Some(n)) => SplitLimit::MaxTensors(n),
        (None, None) => SplitLimit::MaxTensors(128),
    };
    let bar = progress_bar("splitting");
    let paths = split::write_split(
        &input,
        &a.output_prefix,
        limit,
        a.no_tensor_first_split,
        &mut |d, t| {
            bar.set_length(t);
            bar.set_position(d);
        },
    )?;
    bar.finish_and_clear();
    for p in paths {
        outln!("{}", p.display())?;
    }
    Ok(())
}

fn cmd_merge(a: MergeArgs) -> Result<()> {
    let bar = progress_bar("merging");
    split::merge(&a.first_part, &a.output, &mut |d, t| {
        bar.set_length(t);
        bar.set_position(d);
    })?;
    bar.finish_and_clear();
    outln!("{}", Path::new(&a.output).display())?;
    Ok(())
}

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

fn cmd_tokenize(a: TokenizeArgs) -> Result<()> {
    let tokenizer = load_tokenizer(&a.file)?;
    let text = match (&a.text, &a.text_file) {
        (_, Some(path)) => gguf_cli::read_input_file(path)?,
        (Some(t), None) => t.clone().into_bytes(),
        (None, None) => unreachable!("clap requires one"),
    };
    let ids = tokenizer.encode(&text, !a.no_bos, !a.no_parse_special);
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

fn cmd_detokenize(a: DetokenizeArgs) -> Result<()> {
    let tokenizer = load_tokenizer(&a.file)?;
    if let Some(bad) = a
        .ids
        .iter()
        .find(|&&id| id as usize >= tokenizer.vocab_size())
    {
        bail!(
            "token id {bad} is out of range (the vocabulary has {} tokens)",
            tokenizer.vocab_size()
        );
    }
    let text = tokenizer.decode(&a.ids, false, a.special);
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(&text)?;
    out.write_all(b"\n")?;
    Ok(())
}

fn cmd_chat_template(a: ChatTemplateArgs) -> Result<()> {
    use gguf_tokenizer::chat::{self, ChatTemplate, RenderOptions, Value};
    let path = models::resolve(&a.file)?;
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
    let json: serde_json::Value =
        serde_json::from_slice(&gguf_cli::read_input_file(messages_path)?)
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
