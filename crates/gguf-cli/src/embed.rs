//! `gguf embed`: sentence embeddings, as llama.cpp's `llama-embedding` computes them.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::Args;
use gguf_model::{EmbeddingOptions, Normalize, Pooling};

use crate::habits::GpuOptions;
use crate::models::{ModelArg, UsageError};
use crate::output::{outln, read_input_file};
use crate::run::{self, RunOptions};

/// `gguf embed`.
#[derive(Args, Debug)]
pub struct EmbedArgs {
    #[command(flatten)]
    pub model: ModelArg,
    /// The texts to embed, one embedding each (with -m MODEL, every positional argument is a
    /// text).
    pub texts: Vec<String>,
    /// Read the texts from a file, one per line (a final newline ends the last line; other
    /// empty lines are empty texts).
    #[arg(long = "file", value_name = "F")]
    pub input: Option<PathBuf>,
    /// Print `{"embeddings": [[...], ...]}` instead of one line of values per embedding.
    #[arg(long)]
    pub json: bool,
    /// Normalisation of each embedding.
    #[arg(long, default_value = "l2", value_parser = ["l2", "none"])]
    pub normalize: String,
    /// Pooling of the token embeddings (default: the file's `pooling_type`, none without it).
    /// With `none` every token gets its own embedding, text after text.
    #[arg(long, value_parser = ["none", "mean", "cls", "last"])]
    pub pooling: Option<String>,
    #[command(flatten)]
    pub run: RunOptions,
    #[command(flatten)]
    pub gpu: GpuOptions,
}

/// The texts as bytes: the arguments, or the lines of `--file`.
fn texts(a: &EmbedArgs, args: &[String]) -> Result<Vec<Vec<u8>>> {
    let Some(path) = &a.input else {
        if args.is_empty() {
            return Err(UsageError("nothing to embed: give TEXT... or --file F".into()).into());
        }
        return Ok(args.iter().map(|t| t.as_bytes().to_vec()).collect());
    };
    if !args.is_empty() {
        return Err(UsageError("give the texts as arguments or --file F, not both".into()).into());
    }
    let bytes = read_input_file(path)?;
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    if body.is_empty() {
        bail!("{}: no lines to embed", path.display());
    }
    Ok(body
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line).to_vec())
        .collect())
}

/// Runs `gguf embed`.
pub fn embed(a: EmbedArgs) -> Result<()> {
    a.gpu.note_ignored();
    let (file, args) = a.model.with_rest(&a.texts, |t| Ok(t.to_string()))?;
    let texts = texts(&a, &args)?;
    let model = run::load(file)?;
    let options = EmbeddingOptions {
        pooling: a.pooling.as_deref().and_then(Pooling::from_name),
        normalize: Normalize::from_name(&a.normalize).unwrap_or_default(),
    };
    let mut session = model.session(a.run.session_options())?;
    let mut embeddings: Vec<Vec<f32>> = Vec::new();
    for (i, text) in texts.iter().enumerate() {
        let ids = model
            .tokenizer()
            .encode(text, gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL);
        let values = session.embed_tokens_with(&ids, &options).map_err(|e| {
            anyhow!(
                "text {} ({:?}): {e}",
                i + 1,
                String::from_utf8_lossy(&text[..text.len().min(40)])
            )
        })?;
        embeddings.extend(values.rows().map(<[f32]>::to_vec));
    }
    if a.json {
        // Serialized as f32 (the shortest text that reads back to the same f32), not widened
        // to f64 as `json!` would.
        let report = std::collections::BTreeMap::from([("embeddings", &embeddings)]);
        outln!("{}", serde_json::to_string(&report)?)?;
    } else {
        for v in &embeddings {
            let line: Vec<String> = v.iter().map(f32::to_string).collect();
            outln!("{}", line.join(" "))?;
        }
    }
    Ok(())
}
