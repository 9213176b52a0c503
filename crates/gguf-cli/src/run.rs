//! The commands that run a model: `generate`, `chat`, `perplexity` and `bench`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use gguf_model::{
    EncodeOptions, KvType, Model, ModelError, SamplerConfig, SessionOptions, StopReason,
};
use gguf_tokenizer::chat::{ChatMessage, ChatTemplate};
use gguf_tokenizer::chat_builtin::{self, Origin};
use indicatif::{ProgressBar, ProgressStyle};

use crate::habits::GpuOptions;
use crate::models::{self, ModelArg};
use crate::output::{outln, read_input_file};

/// Options shared by the commands that run a model.
#[derive(Args, Debug, Clone)]
pub struct RunOptions {
    /// Threads (default: the number of physical cores).
    #[arg(short = 't', long, default_value_t = 0)]
    pub threads: usize,
    /// Context length in tokens (default: the model's, at most 4096).
    #[arg(short = 'c', long = "ctx", default_value_t = 0)]
    pub ctx: usize,
    /// KV cache type.
    #[arg(long = "kv-type", default_value = "f16", value_parser = ["f16", "f32"])]
    pub kv_type: String,
}

/// The prompt batch of the commands that generate from one sequence (`generate`, `chat`).
#[derive(Args, Debug, Clone)]
pub struct BatchOption {
    /// Prompt tokens per forward pass, at most (llama.cpp's -b). A batch of several tokens
    /// runs the batched products (llama.cpp's order for them); with `-b 1` a prompt is
    /// evaluated token by token, as generated tokens are, to the same bits.
    #[arg(
        short = 'b',
        long = "batch-size",
        default_value_t = 512,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub batch_size: u32,
}

/// `-t` as the engine will run it: at most the CPUs this process may use, with a warning
/// when that is fewer than asked (threads beyond the CPUs only wait for each other).
fn threads_arg(requested: usize) -> usize {
    let max = gguf_model::max_threads();
    if requested > max {
        eprintln!("warning: -t {requested} is more than the {max} CPUs available; using {max}");
    }
    requested.min(max)
}

impl RunOptions {
    pub(crate) fn session_options(&self) -> SessionOptions {
        SessionOptions {
            n_ctx: self.ctx,
            threads: threads_arg(self.threads),
            kv_type: if self.kv_type == "f32" {
                KvType::F32
            } else {
                KvType::F16
            },
            ..SessionOptions::default()
        }
    }
}

/// Sampling options (llama.cpp's defaults; `--temp 0` is greedy).
#[derive(Args, Debug, Clone)]
pub struct SamplingOptions {
    /// Temperature; 0 picks the most likely token.
    #[arg(long = "temp", default_value_t = 0.8, allow_hyphen_values = true)]
    pub temperature: f32,
    /// Keep the K most likely tokens (0: all).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the most likely tokens up to this total probability.
    #[arg(long, default_value_t = 0.95, allow_hyphen_values = true)]
    pub top_p: f32,
    /// Drop tokens less likely than this fraction of the most likely one.
    #[arg(long, default_value_t = 0.05, allow_hyphen_values = true)]
    pub min_p: f32,
    /// Penalty for repeating recent tokens (1: off).
    #[arg(long, default_value_t = 1.0, allow_hyphen_values = true)]
    pub repeat_penalty: f32,
    /// Presence penalty (0: off).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub presence_penalty: f32,
    /// Frequency penalty (0: off).
    #[arg(long, default_value_t = 0.0, allow_hyphen_values = true)]
    pub frequency_penalty: f32,
    /// Seed of the random draw.
    #[arg(long, short = 's', default_value_t = 0x5EED)]
    pub seed: u64,
}

impl SamplingOptions {
    /// The sampler, checked; a note on stderr when a negative temperature means greedy
    /// sampling (llama.cpp's habit, kept).
    fn sampler(&self) -> Result<SamplerConfig> {
        let config = self.config();
        config.check()?;
        if config.temperature < 0.0 {
            eprintln!(
                "note: --temp {} means greedy sampling, as in llama.cpp",
                config.temperature
            );
        }
        Ok(config)
    }

    fn config(&self) -> SamplerConfig {
        SamplerConfig {
            temperature: self.temperature,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            seed: self.seed,
            ..SamplerConfig::default()
        }
    }
}

/// Loads a model named by path or known name, with the tokenizer's warnings on stderr.
pub(crate) fn load(file: &str) -> Result<Model> {
    let path = models::resolve(file)?;
    // The engine's errors name the file already.
    let model = Model::load(&path)?;
    for w in model.tokenizer().warnings() {
        eprintln!("warning: {}: {w}", path.display());
    }
    Ok(model)
}

/// `gguf generate`.
#[derive(Args, Debug)]
pub struct GenerateArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The prompt (raw text; no chat template).
    #[arg(short, long, required_unless_present = "prompt_file")]
    pub prompt: Option<String>,
    /// Read the prompt from FILE, byte for byte but for one final newline, which is dropped
    /// (as llama.cpp's -f drops it).
    #[arg(
        short = 'f',
        long = "file",
        value_name = "FILE",
        conflicts_with = "prompt"
    )]
    pub prompt_file: Option<PathBuf>,
    /// Tokens to generate at most.
    #[arg(short = 'n', long, default_value_t = 128)]
    pub n_predict: usize,
    #[command(flatten)]
    pub sampling: SamplingOptions,
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub batch: BatchOption,
    /// Print one JSON object (`prompt_ids`, `ids`, `text`, `prompt_tokens_per_s`,
    /// `gen_tokens_per_s`) instead of streaming the text.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub gpu: GpuOptions,
}

/// The prompt of `gguf generate`: `-p`, or the file of `-f` less one final newline.
fn prompt_bytes(a: &GenerateArgs) -> Result<Vec<u8>> {
    match (&a.prompt, &a.prompt_file) {
        (Some(prompt), _) => Ok(prompt.clone().into_bytes()),
        (None, Some(path)) => {
            let mut bytes = read_input_file(path)?;
            if bytes.last() == Some(&b'\n') {
                bytes.pop();
            }
            Ok(bytes)
        }
        (None, None) => bail!("no prompt: give -p PROMPT or -f FILE"),
    }
}

/// Runs `gguf generate`.
pub fn generate(a: GenerateArgs) -> Result<()> {
    a.gpu.note_ignored();
    let sampler = a.sampling.sampler()?;
    let prompt = prompt_bytes(&a)?;
    let model = load(a.model.name()?)?;
    let mut session = model.session(SessionOptions {
        n_batch: a.batch.batch_size as usize,
        ..a.run.session_options()
    })?;
    let prompt_ids = model
        .tokenizer()
        .encode(&prompt, EncodeOptions::ADD_AND_PARSE_SPECIAL);
    check_prompt_fits(&prompt_ids, &session)?;
    let t0 = Instant::now();
    let mut generation = session.generate_from(&prompt_ids, &sampler, a.n_predict)?;
    let prompt_secs = t0.elapsed().as_secs_f64();
    let t1 = Instant::now();
    let mut ids = Vec::new();
    let mut out = std::io::stdout().lock();
    if !a.json {
        out.write_all(&prompt)?;
    }
    for token in &mut generation {
        let token = token?;
        ids.push(token.id);
        if !a.json {
            write!(out, "{}", token.text)?;
            out.flush()?;
        }
    }
    let gen_secs = t1.elapsed().as_secs_f64();
    let text = generation.text().to_string();
    let stop = generation.stop_reason();
    drop(generation);
    if stop == Some(StopReason::ContextFull) {
        note_context_full(ids.len(), session.n_ctx());
    }
    if a.json {
        let report = serde_json::json!({
            "prompt_ids": prompt_ids,
            "ids": ids,
            "text": text,
            "stop_reason": stop.map(StopReason::name),
            "prompt_tokens_per_s": prompt_ids.len() as f64 / prompt_secs,
            "gen_tokens_per_s": if ids.is_empty() { 0.0 } else { ids.len() as f64 / gen_secs },
        });
        writeln!(out, "{report}")?;
    } else {
        writeln!(out)?;
        eprintln!(
            "prompt: {} tokens, {:.1} tokens/s; generated: {} tokens, {:.1} tokens/s",
            prompt_ids.len(),
            prompt_ids.len() as f64 / prompt_secs,
            ids.len(),
            ids.len() as f64 / gen_secs
        );
    }
    Ok(())
}

/// Refuses, before any computing, a prompt the model refuses for the session's context
/// ([`gguf_model::Model::check_prompt`]), in the CLI's words.
fn check_prompt_fits(prompt: &[u32], session: &gguf_model::Session<'_>) -> Result<()> {
    let model = session.model();
    match model.check_prompt(prompt, session.n_ctx()) {
        Ok(()) => Ok(()),
        Err(ModelError::EmptyPrompt) => bail!("the prompt gives no tokens"),
        Err(ModelError::ContextFull { needed, n_ctx }) => bail!(
            "the prompt has {needed} tokens, more than the context of {n_ctx} \
             (-c sets the context, up to the model's {})",
            model.hparams().n_ctx_train
        ),
        Err(e) => Err(e.into()),
    }
}

/// Generation stopped at the end of the context, as llama.cpp stops there: a note, not an error.
fn note_context_full(generated: usize, n_ctx: usize) {
    eprintln!(
        "note: stopped after {generated} tokens: the context of {n_ctx} tokens is full (-c sets it)"
    );
}

/// `gguf chat`.
#[derive(Args, Debug)]
pub struct ChatArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// A system message to start the conversation with.
    #[arg(long)]
    pub system: Option<String>,
    /// A JSON file with the conversation so far, `[{"role": "user", "content": "..."}, ...]`,
    /// which the lines read from stdin continue (after `--system`, if given).
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// Tokens per reply at most.
    #[arg(short = 'n', long, default_value_t = 512)]
    pub n_predict: usize,
    /// The chat template: a built-in (chatml, gemma, llama3, phi3), a template of the file
    /// (`tokenizer.chat_template.NAME`), or a file holding a Jinja template. Default: the
    /// file's own, or for a file without one the built-in its vocabulary's turn markers call for.
    #[arg(long, value_name = "NAME|FILE")]
    pub chat_template: Option<String>,
    #[command(flatten)]
    pub sampling: SamplingOptions,
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub batch: BatchOption,
    #[command(flatten)]
    pub gpu: GpuOptions,
}

/// The template `gguf chat` renders with (see [`ChatArgs::chat_template`]); a note on stderr
/// when it is not the file's own.
fn chat_template(model: &Model, file: &str, choice: Option<&str>) -> Result<ChatTemplate> {
    let (template, origin) = match choice {
        Some(choice) => match model.chat_template(Some(choice)) {
            Ok(found) => found,
            // Not a name: a template file.
            Err(_) if Path::new(choice).exists() => {
                let bytes = crate::output::read_input_file(Path::new(choice))?;
                let source = String::from_utf8(bytes)
                    .map_err(|_| anyhow!("{choice}: the chat template is not UTF-8 text"))?;
                let mut template = ChatTemplate::with_name(Some(choice), &source)?;
                chat_builtin::set_file_special_tokens(&mut template, model.file());
                return Ok(template);
            }
            Err(e) => bail!("{file}: {e}, and there is no file `{choice}`"),
        },
        None => model
            .chat_template(None)
            .map_err(|e| anyhow!("{file}: {e} (--chat-template NAME|FILE chooses one)"))?,
    };
    if let Origin::Detected(name) = origin {
        eprintln!(
            "note: {file} has no chat template; using the built-in `{name}` template, whose turn \
             markers are tokens of its vocabulary (--chat-template chooses another)"
        );
    }
    Ok(template)
}

/// The messages of a `--history` file: a JSON list of `{"role": ..., "content": ...}` objects
/// whose role and content are strings.
fn read_history(path: &Path) -> Result<Vec<ChatMessage>> {
    let json: serde_json::Value = serde_json::from_slice(&crate::output::read_input_file(path)?)
        .map_err(|e| anyhow!("{}: not JSON: {e}", path.display()))?;
    let Some(list) = json.as_array() else {
        bail!("{}: expected a list of messages", path.display());
    };
    list.iter()
        .enumerate()
        .map(|(i, m)| match (m["role"].as_str(), m["content"].as_str()) {
            (Some(role), Some(content)) => Ok(ChatMessage::new(role, content)),
            _ => Err(anyhow!(
                "{}: message {i} needs a string `role` and a string `content`",
                path.display()
            )),
        })
        .collect()
}

/// Where `gguf chat` reads the user's lines: a line editor with history when stdin and stdout
/// are a terminal, else stdin line by line (pipes, tests), as before the editor came.
enum LineReader {
    /// rustyline: editing, and the history of this chat (in memory only: the prompts are not
    /// written to disk).
    Editor(Box<rustyline::DefaultEditor>),
    /// Plain lines from stdin.
    Plain(std::io::Stdin),
}

/// What the user gave at the prompt.
enum Input {
    /// A line, without its line ending.
    Line(String),
    /// End of input (Ctrl-D, or the end of a pipe).
    End,
    /// Ctrl-C at the editor's prompt.
    Interrupted,
}

impl LineReader {
    fn new() -> LineReader {
        use std::io::IsTerminal;
        if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
            if let Ok(editor) = rustyline::DefaultEditor::new() {
                return LineReader::Editor(Box::new(editor));
            }
        }
        LineReader::Plain(std::io::stdin())
    }

    /// Prompts with `> ` and reads a line.
    fn read(&mut self, out: &mut impl Write) -> Result<Input> {
        use rustyline::error::ReadlineError;
        match self {
            LineReader::Editor(editor) => match editor.readline("> ") {
                Ok(line) => {
                    if !line.is_empty() {
                        let _ = editor.add_history_entry(line.as_str());
                    }
                    Ok(Input::Line(line))
                }
                Err(ReadlineError::Eof) => Ok(Input::End),
                Err(ReadlineError::Interrupted) => Ok(Input::Interrupted),
                Err(e) => Err(anyhow!("reading the prompt: {e}")),
            },
            LineReader::Plain(stdin) => {
                write!(out, "> ")?;
                out.flush()?;
                let mut line = String::new();
                if stdin.lock().read_line(&mut line)? == 0 {
                    return Ok(Input::End);
                }
                let trimmed = line.trim_end_matches(['\n', '\r']).len();
                line.truncate(trimmed);
                Ok(Input::Line(line))
            }
        }
    }
}

/// Runs `gguf chat`: reads a line per user turn, streams each reply. Ctrl-C during a reply
/// stops it (the partial reply stays in the conversation, as llama-cli keeps it) and the
/// prompt comes back; Ctrl-C at the prompt, or Ctrl-D, ends the chat.
pub fn chat(a: ChatArgs) -> Result<()> {
    a.gpu.note_ignored();
    let file = a.model.name()?;
    let sampler = a.sampling.sampler()?;
    let model = load(file)?;
    let template = chat_template(&model, file, a.chat_template.as_deref())?;
    let mut session = model.session(SessionOptions {
        n_batch: a.batch.batch_size as usize,
        ..a.run.session_options()
    })?;
    let mut messages = Vec::new();
    if let Some(system) = &a.system {
        messages.push(ChatMessage::new("system", system.as_str()));
    }
    if let Some(path) = &a.history {
        messages.extend(read_history(path)?);
    }
    let mut reader = LineReader::new();
    let mut out = std::io::stdout().lock();
    eprintln!("chatting with {file} (Ctrl-C stops a reply; Ctrl-D ends)");
    loop {
        let line = match reader.read(&mut out)? {
            Input::Line(line) => line,
            Input::End => {
                writeln!(out)?;
                return Ok(());
            }
            // As a SIGINT at a plain prompt ends the program.
            #[cfg(unix)]
            Input::Interrupted => crate::signals::end_as(signal_hook::consts::SIGINT),
            #[cfg(not(unix))]
            Input::Interrupted => return Ok(()),
        };
        if line.is_empty() {
            continue;
        }
        messages.push(ChatMessage::new("user", line));
        let mut reply = String::new();
        let mut reply_tokens = 0;
        // Armed before the prompt is evaluated: a Ctrl-C during that stops the reply after
        // its first token.
        #[cfg(unix)]
        let catch = crate::signals::catch_interrupt();
        let mut interrupted = false;
        let mut generation = session.chat_with(&template, &messages, &sampler, a.n_predict)?;
        for token in &mut generation {
            let token = token?;
            reply_tokens += 1;
            reply.push_str(&token.text);
            write!(out, "{}", token.text)?;
            out.flush()?;
            #[cfg(unix)]
            if catch.interrupted() {
                interrupted = true;
                break;
            }
        }
        let context_full = generation.stop_reason() == Some(StopReason::ContextFull);
        drop(generation);
        #[cfg(unix)]
        drop(catch);
        writeln!(out)?;
        if context_full {
            note_context_full(reply_tokens, session.n_ctx());
            eprintln!("the conversation fills the context; start a new one (or raise -c)");
            return Ok(());
        }
        if interrupted {
            eprintln!(
                "note: reply interrupted after {reply_tokens} tokens (kept in the conversation); \
                 Ctrl-C at the prompt or Ctrl-D ends the chat"
            );
        }
        messages.push(ChatMessage::new("assistant", reply.as_str()));
    }
}

/// `gguf perplexity`.
#[derive(Args, Debug)]
pub struct PerplexityArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The text to score.
    #[arg(short = 'f', long = "file", value_name = "TEXT")]
    pub text: PathBuf,
    /// Chunk length in tokens (the context of each evaluation).
    #[arg(short = 'c', long = "ctx", default_value_t = 512)]
    pub ctx: usize,
    /// Threads (default: the number of physical cores).
    #[arg(short = 't', long, default_value_t = 0)]
    pub threads: usize,
    /// Score at most this many chunks (0: all).
    #[arg(long, default_value_t = 0)]
    pub chunks: usize,
    /// Print one JSON object `{"ppl", "chunks"}` at the end.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub gpu: GpuOptions,
}

/// Runs `gguf perplexity`.
pub fn perplexity(a: PerplexityArgs) -> Result<()> {
    a.gpu.note_ignored();
    let model = load(a.model.name()?)?;
    let text = read_input_file(&a.text)?;
    let options = SessionOptions {
        n_ctx: a.ctx,
        threads: threads_arg(a.threads),
        n_batch: a.ctx,
        ..SessionOptions::default()
    };
    let mut session = model.session(options)?;
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("perplexity [{bar:30}] {pos}/{len} chunks {msg}")
            .expect("valid template"),
    );
    let result = gguf_model::perplexity(&mut session, &text, a.chunks, |done, total, ppl| {
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(format!("PPL {ppl:.4}"));
    })?;
    bar.finish_and_clear();
    if a.json {
        outln!(
            "{}",
            serde_json::json!({"ppl": result.ppl, "chunks": result.chunk_ppl})
        )?;
    } else {
        for (i, p) in result.chunk_ppl.iter().enumerate() {
            outln!("[{}] {p:.4}", i + 1)?;
        }
        outln!(
            "Final estimate: PPL = {:.4} over {} chunks of {} tokens",
            result.ppl,
            result.chunk_ppl.len(),
            a.ctx
        )?;
    }
    Ok(())
}

/// `gguf bench`.
#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// Prompt lengths to time (ppN), comma-separated; 0 for none.
    #[arg(
        short = 'p',
        long = "n-prompt",
        value_delimiter = ',',
        default_value = "512"
    )]
    pub n_prompt: Vec<usize>,
    /// Generation lengths to time (tgN), comma-separated; 0 for none.
    #[arg(
        short = 'n',
        long = "n-gen",
        value_delimiter = ',',
        default_value = "128"
    )]
    pub n_gen: Vec<usize>,
    /// Tokens already in the cache before each test (`llama-bench -d`), comma-separated.
    #[arg(
        short = 'd',
        long = "depth",
        value_delimiter = ',',
        default_value = "0"
    )]
    pub depth: Vec<usize>,
    /// Threads (default: the number of physical cores).
    #[arg(short = 't', long, default_value_t = 0)]
    pub threads: usize,
    /// Largest batch of prompt tokens per forward pass (llama-bench's `-ub`).
    #[arg(short = 'b', long = "ubatch", default_value_t = 512)]
    pub n_batch: usize,
    /// Repetitions.
    #[arg(short = 'r', long, default_value_t = 5)]
    pub repetitions: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub gpu: GpuOptions,
}

/// Runs `gguf bench`, measuring like llama-bench: for each depth, prompt processing of each
/// `-p` length of random tokens and generation of each `-n` length one token at a time, every
/// run from an empty cache (filled to the depth untimed), after a warm-up run; mean and
/// standard deviation over `-r` repetitions.
pub fn bench(a: BenchArgs) -> Result<()> {
    use gguf_model::{BenchKind, BenchTest};
    a.gpu.note_ignored();
    let file = a.model.name()?;
    let mut tests = Vec::new();
    for &depth in &a.depth {
        let prompts = a.n_prompt.iter().map(|&n| (BenchKind::Prompt, n));
        let gens = a.n_gen.iter().map(|&n| (BenchKind::Generation, n));
        for (kind, n) in prompts.chain(gens).filter(|&(_, n)| n > 0) {
            tests.push(BenchTest { kind, n, depth });
        }
    }
    if tests.is_empty() {
        bail!("nothing to time: give a positive -p or -n");
    }
    let model = load(file)?;
    let n_ctx = tests.iter().map(BenchTest::positions).max().unwrap_or(1);
    let options = SessionOptions {
        n_ctx,
        threads: threads_arg(a.threads),
        n_batch: a.n_batch.max(1),
        ..SessionOptions::default()
    };
    let mut session = model.session(options)?;
    let threads = session.threads();
    let repetitions = a.repetitions.max(1);
    if !a.json {
        outln!("| model | threads | test | t/s |")?;
        outln!("|---|---|---|---|")?;
    }
    let mut results = Vec::new();
    for test in &tests {
        let t = gguf_model::bench(&mut session, test, repetitions)?;
        if a.json {
            results.push(serde_json::json!({
                "test": test.name(),
                "kind": match test.kind { BenchKind::Prompt => "pp", BenchKind::Generation => "tg" },
                "n": test.n,
                "depth": test.depth,
                "tokens_per_s": t.mean,
                "sd": t.sd,
            }));
        } else {
            outln!(
                "| {} | {threads} | {} | {:.2} ± {:.2} |",
                file,
                test.name(),
                t.mean,
                t.sd
            )?;
        }
    }
    if a.json {
        outln!(
            "{}",
            serde_json::json!({
                "model": file,
                "threads": threads,
                "n_batch": a.n_batch,
                "repetitions": repetitions,
                "results": results,
            })
        )?;
    }
    Ok(())
}
