//! `gguf quantize IN OUT TYPE`: llama-quantize's tool. The options, the messages and the
//! progress bar; the quantization itself (llama.cpp's rules, importance matrices, the file laid
//! out as llama-quantize lays it out, byte for byte) is `gguf_model::quantize`'s.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use gguf_format::{GgmlType, GgufFile};
use gguf_fsutil::WriteMode;
use gguf_model::quantize::{FileType, Imatrix, Quantization, QuantizeEvent, QuantizeOptions};
use indicatif::{ProgressBar, ProgressStyle};

use crate::edit::with_force_hint;
use crate::models;

/// `gguf quantize`.
#[derive(Args)]
pub struct QuantizeArgs {
    /// The model to quantize (a .gguf path or a known model name).
    #[arg(required_unless_present = "list")]
    input: Option<String>,
    /// The file to write.
    #[arg(required_unless_present = "list")]
    output: Option<PathBuf>,
    /// The file type, by llama-quantize's name (Q4_K_M, Q8_0, IQ4_XS, F16, ...; `--list`).
    #[arg(required_unless_present = "list")]
    file_type: Option<String>,
    /// Threads, as llama-quantize's last argument takes them (same as `--threads`).
    #[arg(value_name = "NTHREADS", conflicts_with = "threads")]
    nthreads: Option<usize>,
    /// Threads (default: all CPUs).
    #[arg(short, long, default_value_t = 0)]
    threads: usize,
    /// Use this type for output.weight.
    #[arg(long, value_name = "TYPE")]
    output_tensor_type: Option<String>,
    /// Use this type for the token embeddings.
    #[arg(long, value_name = "TYPE")]
    token_embedding_type: Option<String>,
    /// Quantize the tensors whose names a regular expression finds to a type:
    /// `PATTERN=TYPE` (the first match wins; may be repeated).
    #[arg(long, value_name = "PATTERN=TYPE")]
    tensor_type: Vec<String>,
    /// No mixture rules: every quantizable tensor to the file type's default type.
    #[arg(long)]
    pure: bool,
    /// Keep output.weight as it is.
    #[arg(long)]
    leave_output_tensor: bool,
    /// Allow quantizing tensors that are already quantized (they are dequantized first).
    #[arg(long)]
    allow_requantize: bool,
    /// An importance matrix (llama-imatrix's output, GGUF or the legacy .dat format).
    #[arg(long, value_name = "FILE")]
    imatrix: Option<PathBuf>,
    /// Use the importance matrix only for the weights whose names contain this (repeatable).
    #[arg(long, value_name = "NAME", conflicts_with = "exclude_weights")]
    include_weights: Vec<String>,
    /// Do not use the importance matrix for the weights whose names contain this (repeatable).
    #[arg(long, value_name = "NAME")]
    exclude_weights: Vec<String>,
    /// Show the plan (each tensor's type and the sizes) without writing anything.
    #[arg(long)]
    dry_run: bool,
    /// Overwrite an existing output file.
    #[arg(long)]
    force: bool,
    /// List the file types and exit.
    #[arg(long)]
    list: bool,
}

/// A ggml type by its name, any case (`q8_0`, `Q6_K`, `f16`).
fn ggml_type_named(name: &str) -> Result<GgmlType> {
    GgmlType::from_name(name).with_context(|| format!("unknown ggml type '{name}'"))
}

/// Runs `gguf quantize`.
pub fn quantize(a: QuantizeArgs) -> Result<()> {
    if a.list {
        for name in FileType::names() {
            let ft = FileType::from_name(name).expect("a listed name");
            println_list(name, ft)?;
        }
        return Ok(());
    }
    let type_name = a.file_type.as_deref().unwrap_or_default();
    let ft = FileType::from_name(type_name).with_context(|| {
        format!(
            "unknown file type '{type_name}' (one of: {})",
            FileType::names().collect::<Vec<_>>().join(", ")
        )
    })?;
    let imatrix = load_imatrix(&a)?;
    let (Some(input), Some(output)) = (a.input.as_deref(), a.output.clone()) else {
        bail!("quantize needs IN, OUT and TYPE");
    };
    let input = models::resolve(input)?;
    let mode = if a.force {
        WriteMode::Replace { force: true }
    } else {
        WriteMode::CreateNew
    };
    if !a.dry_run {
        // Every file read: the model and the importance matrix.
        let inputs: Vec<&Path> = std::iter::once(input.as_path())
            .chain(a.imatrix.as_deref())
            .collect();
        gguf_fsutil::refuse_inputs(&output, &inputs)?;
        gguf_fsutil::check_destination(&output, mode).map_err(with_force_hint)?;
    }
    let mapped = GgufFile::open(&input)?;
    let name = input.display().to_string();
    let patterns = tensor_type_patterns(&a.tensor_type)?;
    let lookup = |tensor: &str| {
        patterns
            .iter()
            .find(|(re, _)| re.is_match(tensor))
            .map(|&(_, ty)| ty)
    };
    let options = QuantizeOptions {
        file_type: ft,
        output_tensor_type: a
            .output_tensor_type
            .as_deref()
            .map(ggml_type_named)
            .transpose()?,
        token_embedding_type: a
            .token_embedding_type
            .as_deref()
            .map(ggml_type_named)
            .transpose()?,
        tensor_type: (!patterns.is_empty()).then_some(&lookup as &dyn Fn(&str) -> Option<GgmlType>),
        pure: a.pure,
        leave_output_tensor: a.leave_output_tensor,
        allow_requantize: a.allow_requantize,
        imatrix: imatrix.as_ref().zip(a.imatrix.as_deref()),
    };
    let q = Quantization::prepare(mapped.file(), &name, &options, &mut print_event)?;
    print_plan(&q, &name, a.dry_run);
    if a.dry_run {
        return Ok(());
    }

    let bar = ProgressBar::new(q.tensors().len() as u64).with_style(
        ProgressStyle::with_template("quantizing [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    let threads = a.nthreads.unwrap_or(a.threads);
    q.write_to(&output, mode, threads, &mut |event| match event {
        QuantizeEvent::Tensor { name, .. } => bar.set_message(name.to_string()),
        QuantizeEvent::TensorDone { .. } => bar.inc(1),
        other => print_event(other),
    })
    .map_err(with_force_hint)?;
    bar.finish_and_clear();
    eprintln!("wrote {}", output.display());
    Ok(())
}

/// The importance matrix of `--imatrix`, filtered by `--include-weights` and
/// `--exclude-weights`; none when the filters leave it empty, as llama-quantize has it.
fn load_imatrix(a: &QuantizeArgs) -> Result<Option<Imatrix>> {
    let Some(path) = &a.imatrix else {
        if !a.include_weights.is_empty() || !a.exclude_weights.is_empty() {
            bail!("--include-weights and --exclude-weights need --imatrix");
        }
        return Ok(None);
    };
    let mut m = Imatrix::load(path)?;
    m.filter(&a.include_weights, &a.exclude_weights);
    eprintln!(
        "{}: {} importance matrix entries, computed on {} chunks",
        path.display(),
        m.entries.len(),
        m.chunk_count
    );
    Ok((!m.entries.is_empty()).then_some(m))
}

/// `--tensor-type PATTERN=TYPE`s: llama-quantize lowercases the pattern and searches names
/// with it as a regular expression.
fn tensor_type_patterns(args: &[String]) -> Result<Vec<(regex::Regex, GgmlType)>> {
    args.iter()
        .map(|p| {
            let (pattern, ty) = p
                .split_once('=')
                .with_context(|| format!("--tensor-type '{p}': expected PATTERN=TYPE"))?;
            anyhow::ensure!(
                !pattern.is_empty(),
                "--tensor-type '{p}': missing tensor name"
            );
            let re = regex::Regex::new(&pattern.to_lowercase())
                .with_context(|| format!("--tensor-type '{p}'"))?;
            Ok((re, ggml_type_named(ty)?))
        })
        .collect()
}

/// The warnings and notes of a quantization, as llama-quantize prints them.
fn print_event(event: QuantizeEvent<'_>) {
    match event {
        QuantizeEvent::Fallback {
            tensor,
            row_length,
            wanted,
            used,
        } => eprintln!(
            "warning: {tensor}: row length {row_length} is not a multiple of {}'s block of {}; using {}",
            wanted.name(),
            wanted.block_size(),
            used.name()
        ),
        QuantizeEvent::NoImatrixEntry { tensor } => {
            eprintln!("note: no importance matrix entry for {tensor}")
        }
        QuantizeEvent::ImatrixIgnored {
            tensor,
            values,
            expected,
        } => eprintln!(
            "warning: the importance matrix of {tensor} has {values} values, not {expected}; quantizing it without"
        ),
        QuantizeEvent::Requantizing => {
            eprintln!("note: requantizing: quantized tensors are dequantized to f32 first")
        }
        _ => {}
    }
}

/// The sizes before and after; with `--dry-run`, every tensor's type first.
fn print_plan(q: &Quantization<'_>, name: &str, dry_run: bool) {
    use crate::inspect::human_bytes;
    if dry_run {
        for (t, spec) in q.tensors() {
            eprintln!(
                "{:40} {:7} -> {:7} {:>10} -> {:>10}",
                t.name,
                t.ggml_type.name(),
                spec.ggml_type().name(),
                human_bytes(t.size),
                human_bytes(spec.size())
            );
        }
    }
    let (size_in, size_out, elements) = (q.size_in(), q.size_out(), q.elements());
    eprintln!(
        "{}: {} ({:.2} bits per weight) -> {} as {} ({:.2} bits per weight)",
        name,
        human_bytes(size_in),
        size_in as f64 * 8.0 / elements as f64,
        human_bytes(size_out),
        q.file_type().name(),
        size_out as f64 * 8.0 / elements as f64,
    );
}

fn println_list(name: &str, ft: FileType) -> Result<()> {
    use crate::output::outln;
    outln!(
        "{name:10} {:>2}  default tensor type {}",
        ft.id(),
        ft.default_type().name()
    )?;
    Ok(())
}
