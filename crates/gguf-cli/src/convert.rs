//! `gguf convert`: legacy GGML/GGMF/GGJT llama files and Hugging Face checkpoints to GGUF.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions, OutType};
use gguf_convert::legacy::{Action, LegacyModel, OldQuant, Options, ScalePolicy};
use gguf_format::MappedBytes;
use gguf_fsutil::WriteMode;
use indicatif::{ProgressBar, ProgressStyle};

use crate::edit::with_force_hint;
use crate::output::outln;

#[derive(Args)]
pub struct ConvertArgs {
    /// A legacy model file (GGML 'lmgg', GGMF 'fmgg' or GGJT 'tjgg'), or a Hugging Face
    /// checkpoint directory (config.json, tokenizer.json, *.safetensors).
    input: PathBuf,
    /// The GGUF file to write.
    output: PathBuf,
    /// Write the metadata and vocabulary only, no tensors.
    #[arg(long)]
    vocab_only: bool,
    /// general.name (default: the input file's name, as llama.cpp's script writes it).
    #[arg(long)]
    name: Option<String>,
    /// general.description (default: "converted from legacy GGJTv3 MOSTLY_Q4_0 format").
    #[arg(long)]
    desc: Option<String>,
    /// llama.context_length: the legacy file does not record it (LLaMA 1: 2048, LLaMA 2: 4096).
    #[arg(short = 'c', long, default_value_t = 2048)]
    context_length: u32,
    /// RMS norm epsilon: 1e-6 for LLaMA 1 and OpenLLaMA, 1e-5 for LLaMA 2.
    #[arg(long, default_value_t = 5e-6)]
    eps: f32,
    /// Grouped-query attention factor (8 for LLaMA 2 70B).
    #[arg(long, default_value_t = 1)]
    gqa: u32,
    /// Round f32 block scales (GGJT v2 and older) that no f16 holds to the nearest f16,
    /// keeping the quantized type, instead of writing such tensors as exact F32.
    #[arg(long)]
    round_scales: bool,
    /// Checkpoints: the type of the matrices (f32, f16, bf16, q8_0, or auto: bf16 when the
    /// checkpoint's first matrix is bf16, else f16, as llama.cpp's script defaults to);
    /// vectors and norms stay f32, as llama.cpp writes them.
    #[arg(long, default_value = "auto", value_parser = parse_outtype)]
    outtype: OutType,
    /// Checkpoints: the tokenizer.ggml.pre name to write when llama.cpp's table does not
    /// know the tokenizer.
    #[arg(long)]
    pre: Option<String>,
    /// Replace OUT if it exists.
    #[arg(short, long)]
    force: bool,
    /// Print what was done as JSON.
    #[arg(long)]
    json: bool,
}

pub fn convert(a: ConvertArgs) -> Result<()> {
    if a.input.is_dir() {
        return convert_checkpoint(a);
    }
    let mode = write_mode(a.force);
    gguf_fsutil::refuse_inputs(&a.output, &[a.input.as_path()])?;
    gguf_fsutil::check_destination(&a.output, mode).map_err(with_force_hint)?;
    let input_name = a.input.display().to_string();
    let mapped = MappedBytes::open(&a.input)?;
    let model = LegacyModel::parse(mapped.bytes()).with_context(|| input_name.clone())?;
    let file_name = a
        .input
        .file_name()
        .map(|n| n.to_string_lossy().into_owned());
    let options = Options {
        name: a.name.clone().or(file_name),
        description: a.desc.clone(),
        context_length: a.context_length,
        eps: a.eps,
        gqa: a.gqa,
        vocab_only: a.vocab_only,
        scales: if a.round_scales {
            ScalePolicy::Round
        } else {
            ScalePolicy::Exact
        },
    };
    // Planned and checked (the engine's load check) before the output is created.
    let conversion = model
        .prepare(&options)
        .with_context(|| input_name.clone())?;
    let bar = progress_bar();
    let report = gguf_fsutil::write_atomic(&a.output, mode, |out| {
        conversion
            .write(out, &mut |done, total| {
                bar.set_length(total);
                bar.set_position(done);
            })
            .map_err(|e| in_output(e, &a.output))
    })
    .map_err(with_force_hint)
    .with_context(|| input_name.clone())?;
    bar.finish_and_clear();

    let hp = model.hparams();
    if a.json {
        let tensors: Vec<_> = report
            .tensors
            .iter()
            .map(|t| {
                serde_json::json!({
                    "legacy_name": t.legacy_name,
                    "name": t.name,
                    "legacy_type": t.legacy_type,
                    "type": t.ty.name(),
                    "shape": t.shape,
                    "how": t.how(),
                })
            })
            .collect();
        let json = serde_json::json!({
            "input": input_name,
            "output": a.output.display().to_string(),
            "container": report.container.name(),
            "n_vocab": hp.n_vocab,
            "n_layer": hp.n_layer,
            "tensors": tensors,
            "rounded_blocks": report.rounded_blocks,
        });
        outln!("{}", serde_json::to_string_pretty(&json)?)?;
        return Ok(());
    }
    eprintln!(
        "{input_name}: {} llama model, {} tokens, {} layers, {} tensors",
        report.container.name(),
        hp.n_vocab,
        hp.n_layer,
        model.tensors().len()
    );
    for t in &report.tensors {
        let what = match t.action {
            Action::Copy(_) => continue,
            Action::Repack(..) => "repacked into today's layout".to_string(),
            Action::Dequantize(OldQuant::Q4_2 | OldQuant::Q4_3) => {
                "written as F32 (the type no longer exists)".to_string()
            }
            Action::Dequantize(_) => format!(
                "written as F32 (its f32 scales are not f16 values; --round-scales keeps {})",
                t.legacy_type
            ),
        };
        eprintln!("  {} ({}): {} {what}", t.name, t.legacy_name, t.legacy_type);
    }
    if report.rounded_blocks > 0 {
        eprintln!(
            "  {} blocks had their f32 scales rounded to f16 (--round-scales)",
            report.rounded_blocks
        );
    }
    if a.vocab_only && !model.tensors().is_empty() {
        eprintln!("  --vocab-only: {} tensors left out", model.tensors().len());
    }
    eprintln!("wrote {}", a.output.display());
    Ok(())
}

/// A conversion error of writing `output`: one of the container or of the file system names
/// the output (as the atomic writer's own errors do); the others say what in the input is
/// wrong and stay as they are.
fn in_output(e: gguf_convert::Error, output: &Path) -> gguf_convert::Error {
    match e {
        gguf_convert::Error::Format(e) => gguf_convert::Error::Format(e.in_file(output)),
        gguf_convert::Error::Fs(e) => gguf_convert::Error::Fs(e.in_file(output)),
        other => other,
    }
}

fn parse_outtype(s: &str) -> Result<OutType, String> {
    OutType::parse(s).ok_or_else(|| format!("'{s}' is not one of f32, f16, bf16, q8_0, auto"))
}

fn write_mode(force: bool) -> WriteMode {
    if force {
        WriteMode::Replace { force: true }
    } else {
        WriteMode::CreateNew
    }
}

fn progress_bar() -> ProgressBar {
    ProgressBar::new(0).with_style(
        ProgressStyle::with_template("converting [{bar:30}] {bytes}/{total_bytes}")
            .expect("valid template")
            .progress_chars("=> "),
    )
}

/// A Hugging Face checkpoint directory to GGUF.
fn convert_checkpoint(a: ConvertArgs) -> Result<()> {
    let mode = write_mode(a.force);
    let input_name = a.input.display().to_string();
    let ckpt = Checkpoint::open(&a.input)?;
    let options = HfOptions {
        outtype: a.outtype,
        vocab_only: a.vocab_only,
        pre_tokenizer: a.pre.clone(),
    };
    let plan = HfConversion::plan(&ckpt, &options)?;
    // Every file the conversion reads is known now (writing reads only the mapped shards);
    // refused as the output first, so that --force is not suggested for one of them.
    gguf_fsutil::refuse_inputs(&a.output, &plan.inputs())?;
    gguf_fsutil::check_destination(&a.output, mode).map_err(with_force_hint)?;
    for w in plan.warnings() {
        eprintln!("warning: {w}");
    }
    let bar = progress_bar();
    gguf_fsutil::write_atomic(&a.output, mode, |out| {
        plan.write(out, &mut |done, total| {
            bar.set_length(total);
            bar.set_position(done);
        })
        .map(|_| ())
        .map_err(|e| in_output(e, &a.output))
    })
    .map_err(with_force_hint)
    .with_context(|| input_name.clone())?;
    bar.finish_and_clear();
    if a.json {
        let tensors: Vec<_> = plan
            .tensors()
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name,
                    "source": t.source.as_deref().unwrap_or("(computed)"),
                    "source_dtype": format!("{:?}", t.source_dtype),
                    "type": t.ty.name(),
                    "shape": t.shape,
                })
            })
            .collect();
        let json = serde_json::json!({
            "input": input_name,
            "output": a.output.display().to_string(),
            "architecture": plan.architecture(),
            "tensors": tensors,
            "warnings": plan.warnings(),
        });
        outln!("{}", serde_json::to_string_pretty(&json)?)?;
        return Ok(());
    }
    eprintln!(
        "{input_name}: {} -> {} ({} tensors)",
        ckpt.summary(),
        plan.architecture(),
        plan.tensors().len()
    );
    eprintln!("wrote {}", a.output.display());
    Ok(())
}
