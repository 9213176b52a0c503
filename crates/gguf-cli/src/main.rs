//! The `gguf` command: parses the command line and hands each subcommand to the module of
//! its family.

// Output goes through `out!`/`outln!` (see `output`), never `print!`, which panics when the
// reader of stdout has gone (`gguf inspect M | head -1`).
#![deny(clippy::print_stdout)]

mod convert;
mod diff;
mod edit;
mod embed;
mod export;
mod habits;
mod inspect;
mod models;
mod output;
mod quantize;
mod run;
mod serve;
#[cfg(unix)]
mod signals;
mod tensors;
mod tokens;
mod validate;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

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
    Inspect(inspect::InspectArgs),
    /// Write one tensor, dequantized to float32, as a .npy file.
    Dequantize(tensors::DequantizeArgs),
    /// Check a file (or split set) and report whether llama.cpp can load it.
    Validate(validate::ValidateArgs),
    /// Fetch a known real model into the cache.
    Pull(models::PullArgs),
    /// Change metadata keys, writing a new file atomically.
    Edit(edit::EditArgs),
    /// Cut a model into parts like llama.cpp's gguf-split.
    Split(edit::SplitArgs),
    /// Join a split set back into one file like `gguf-split --merge`.
    Merge(edit::MergeArgs),
    /// Quantize a model to a file type, as llama-quantize does (byte for byte).
    Quantize(quantize::QuantizeArgs),
    /// Convert a legacy GGML/GGMF/GGJT llama file to GGUF.
    Convert(convert::ConvertArgs),
    /// What differs between two files: header, metadata, tensors, and with --values how far
    /// apart their values are (exit status 0 equal, 1 different, 2 error, as diff's).
    Diff(diff::DiffArgs),
    /// Tokenize text with the file's tokenizer (the ids llama.cpp's llama-tokenize prints).
    Tokenize(tokens::TokenizeArgs),
    /// Turn token ids back into text.
    Detokenize(tokens::DetokenizeArgs),
    /// Render the file's chat template for a conversation, as Hugging Face transformers does.
    ChatTemplate(tokens::ChatTemplateArgs),
    /// Generate text from a raw prompt, streamed to stdout.
    Generate(run::GenerateArgs),
    /// Chat interactively with the file's chat template.
    Chat(run::ChatArgs),
    /// Perplexity of a text, as llama-perplexity computes it.
    Perplexity(run::PerplexityArgs),
    /// Prompt-processing and generation speed, like llama-bench.
    Bench(run::BenchArgs),
    /// Sentence embeddings (BERT and other models), as llama.cpp's llama-embedding computes them.
    Embed(embed::EmbedArgs),
    /// Serve the model over HTTP with OpenAI's API (chat, completions, embeddings).
    Serve(serve::ServeArgs),
    /// Write a Hugging Face checkpoint (safetensors, config, tokenizer) from a GGUF model.
    Export(export::ExportArgs),
}

fn main() -> ExitCode {
    #[cfg(unix)]
    signals::remove_temp_files_on_signals();
    let cli = Cli::parse_from(habits::rewrite_multi_letter_options(std::env::args_os()));
    // A wrong GGUF_FORCE_ISA is a wrong command line in effect: refused before any work, with
    // clap's exit code for those.
    if let Err(e) = gguf_quant::check_isa() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    if let Command::Diff(a) = cli.command {
        return match diff::diff(a) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e:#}");
                ExitCode::from(2)
            }
        };
    }
    let result = match cli.command {
        Command::Inspect(a) => inspect::inspect(a),
        Command::Validate(a) => validate::validate(a),
        Command::Dequantize(a) => tensors::dequantize(a),
        Command::Pull(a) => models::pull(a),
        Command::Edit(a) => edit::edit(a),
        Command::Split(a) => edit::split(a),
        Command::Merge(a) => edit::merge(a),
        Command::Tokenize(a) => tokens::tokenize(a),
        Command::Detokenize(a) => tokens::detokenize(a),
        Command::ChatTemplate(a) => tokens::chat_template(a),
        Command::Generate(a) => run::generate(a),
        Command::Chat(a) => run::chat(a),
        Command::Perplexity(a) => run::perplexity(a),
        Command::Bench(a) => run::bench(a),
        Command::Embed(a) => embed::embed(a),
        Command::Serve(a) => serve::serve(a),
        Command::Export(a) => export::export(a),
        Command::Quantize(a) => quantize::quantize(a),
        Command::Convert(a) => convert::convert(a),
        Command::Diff(_) => unreachable!("handled above"),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of our output has gone (`gguf inspect M | head -1`): end quietly, as
        // ripgrep does (`cat` dies of SIGPIPE; an exit status of 0 keeps `pipefail` scripts
        // working too).
        Err(e) if output::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            if e.downcast_ref::<models::UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
