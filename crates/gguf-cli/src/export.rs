//! `gguf export`: a GGUF model back to a Hugging Face checkpoint directory (safetensors,
//! config.json, tokenizer files).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use gguf_convert::export::{Export, ExportDtype, ExportOptions};
use gguf_format::GgufFile;

use crate::output::{bytes_bar, outln};

#[derive(Args)]
pub struct ExportArgs {
    /// The GGUF model to export (llama, mistral, qwen2, qwen3, qwen2moe, qwen3moe, olmoe,
    /// gemma, gemma2, gemma3, phi3, bert).
    input: PathBuf,
    /// The directory to write: model.safetensors, config.json, generation_config.json,
    /// tokenizer.json, tokenizer_config.json (and tokenizer.model for SentencePiece
    /// vocabularies, modules.json and 1_Pooling/config.json for BERT). It must not exist, or
    /// be empty; none of these may be IN (by any name: a link to IN is refused too).
    output: PathBuf,
    /// The tensors' dtype (default: bf16 for a BF16 file, f32 for an all-F32 one, else f16).
    #[arg(long, value_parser = parse_dtype)]
    dtype: Option<ExportDtype>,
    /// Write into OUT_DIR even if it is not empty, replacing files of the same names.
    #[arg(short, long)]
    force: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
}

fn parse_dtype(s: &str) -> Result<ExportDtype, String> {
    ExportDtype::parse(s).ok_or_else(|| format!("'{s}' is not one of f32, f16, bf16"))
}

pub fn export(a: ExportArgs) -> Result<()> {
    let input_name = a.input.display().to_string();
    let mapped = GgufFile::open(&a.input)?;
    let file = mapped.file();
    let options = ExportOptions { dtype: a.dtype };
    let plan = Export::plan(file, &options).with_context(|| input_name.clone())?;
    for w in plan.warnings() {
        eprintln!("warning: {w}");
    }
    let bar = bytes_bar("exporting");
    let inputs = [a.input.as_path()];
    let report = plan.write(&a.output, a.force, &inputs, &mut |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    })?;
    bar.finish_and_clear();
    if a.json {
        let tensors: Vec<_> = plan
            .tensors()
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "source": t.source,
                    "source_type": t.source_type.name(),
                    "shape": t.shape,
                    "transform": format!("{:?}", t.transform),
                })
            })
            .collect();
        let json = serde_json::json!({
            "input": input_name,
            "output": a.output.display().to_string(),
            "architecture": plan.architecture(),
            "hf_architecture": plan.hf_architecture(),
            "dtype": plan.dtype().name(),
            "files": report.files.iter().map(|p| p.display().to_string()).collect::<Vec<_>>(),
            "tensors": tensors,
            "warnings": plan.warnings(),
        });
        outln!("{}", serde_json::to_string_pretty(&json)?)?;
        return Ok(());
    }
    eprintln!(
        "{input_name}: {} -> {} ({} tensors as {}, {:.1} MiB)",
        plan.architecture(),
        plan.hf_architecture(),
        plan.tensors().len(),
        plan.dtype().name(),
        report.safetensors_bytes as f64 / (1024.0 * 1024.0)
    );
    for f in &report.files {
        eprintln!("wrote {}", f.display());
    }
    Ok(())
}
