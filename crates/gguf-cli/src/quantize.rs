//! `gguf quantize IN OUT TYPE`: llama-quantize's tool. The type of each tensor comes from
//! `gguf_quant::mixture` (llama.cpp's rules), the bytes from gguf-quant's reference quantizers
//! (ggml's, bit for bit), and the file is laid out as llama-quantize lays it out (its tensor
//! order, its metadata with `general.quantization_version` and `general.file_type` moved to the
//! end), so that the output equals llama-quantize's byte for byte. Tensors stream through in
//! slabs of rows, each slab quantized on all threads, so memory stays bounded by a slab.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use gguf_format::fsutil::{self, WriteMode};
use gguf_format::{GgmlType, GgufBuilder, GgufFile, OwnedValue, TensorInfo, TensorSpec, Value};
use gguf_quant::mixture::{self, FileType, ModelFacts, PlanOptions, TensorDesc};
use indicatif::{ProgressBar, ProgressStyle};

use crate::edit::with_force_hint;
use crate::imatrix::Imatrix;
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

/// Metadata keys llama-quantize sets last (moving them to the end) and removes.
const QUANTIZATION_VERSION: &str = "general.quantization_version";
const FILE_TYPE: &str = "general.file_type";
const SPLIT_KEYS: [&str; 3] = ["split.no", "split.count", "split.tensors.count"];
/// `GGML_QNT_VERSION`.
const GGML_QNT_VERSION: u32 = 2;
/// The keys llama-quantize writes when it uses an importance matrix.
const IMATRIX_FILE: &str = "quantize.imatrix.file";
const IMATRIX_DATASET: &str = "quantize.imatrix.dataset";
const IMATRIX_ENTRIES: &str = "quantize.imatrix.entries_count";
const IMATRIX_CHUNKS: &str = "quantize.imatrix.chunks_count";

/// The most f32 values of one tensor held at once (256 MiB), plus their quantized bytes.
const SLAB_VALUES: usize = 64 << 20;

/// A ggml type by its name, any case (`q8_0`, `Q6_K`, `f16`).
fn ggml_type_named(name: &str) -> Result<GgmlType> {
    GgmlType::from_name(name).with_context(|| format!("unknown ggml type '{name}'"))
}

/// The value of a count that may be per layer (then the first layer's).
fn first_u32(v: Option<Value<'_>>) -> Option<u32> {
    match v? {
        Value::Array(a) => a.get(0)?.as_integer()?.try_into().ok(),
        v => v.as_integer()?.try_into().ok(),
    }
}

fn facts(file: &GgufFile<'_>) -> Result<ModelFacts> {
    let arch = file.architecture()?.to_string();
    let key = |suffix: &str| file.value(&format!("{arch}.{suffix}"));
    let n_layer = first_u32(key("block_count"))
        .with_context(|| format!("{arch}.block_count is missing or not a count"))?;
    let n_head = first_u32(key("attention.head_count")).unwrap_or(0);
    Ok(ModelFacts {
        n_layer,
        n_head,
        n_head_kv: first_u32(key("attention.head_count_kv")).unwrap_or(n_head),
        n_expert: first_u32(key("expert_count")).unwrap_or(0),
        arch,
    })
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
    let imatrix = match &a.imatrix {
        Some(path) => {
            let mut m = Imatrix::load(path)?;
            m.filter(&a.include_weights, &a.exclude_weights);
            eprintln!(
                "{}: {} importance matrix entries, computed on {} chunks",
                path.display(),
                m.entries.len(),
                m.chunk_count
            );
            // As llama-quantize: a matrix left empty by the filters is no matrix.
            (!m.entries.is_empty()).then_some(m)
        }
        None => {
            if !a.include_weights.is_empty() || !a.exclude_weights.is_empty() {
                bail!("--include-weights and --exclude-weights need --imatrix");
            }
            None
        }
    };
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
        fsutil::refuse_inputs(&output, &inputs)?;
        fsutil::check_destination(&output, mode).map_err(with_force_hint)?;
    }
    let mapped = GgufFile::open(&input)?;
    let file = mapped.file();
    let name = input.display().to_string();
    if file.value("split.count").is_some() {
        bail!("{name}: a part of a split set; merge it first (gguf merge)");
    }
    let facts = facts(file).with_context(|| name.clone())?;

    let names: Vec<&str> = file.tensors().iter().map(|t| t.name).collect();
    let order = mixture::quantize_order(&names);
    let tensors: Vec<&TensorInfo<'_>> = order.iter().map(|&i| &file.tensors()[i]).collect();
    let descs: Vec<TensorDesc<'_>> = tensors
        .iter()
        .map(|t| TensorDesc {
            name: t.name,
            ggml_type: t.ggml_type,
            shape: t.shape(),
        })
        .collect();
    let patterns = a
        .tensor_type
        .iter()
        .map(|p| {
            let (pattern, ty) = p
                .split_once('=')
                .with_context(|| format!("--tensor-type '{p}': expected PATTERN=TYPE"))?;
            anyhow::ensure!(
                !pattern.is_empty(),
                "--tensor-type '{p}': missing tensor name"
            );
            // llama-quantize lowercases the pattern.
            let re = regex::Regex::new(&pattern.to_lowercase())
                .with_context(|| format!("--tensor-type '{p}'"))?;
            Ok((re, ggml_type_named(ty)?))
        })
        .collect::<Result<Vec<_>>>()?;
    let lookup = |tensor: &str| {
        patterns
            .iter()
            .find(|(re, _)| re.is_match(tensor))
            .map(|&(_, ty)| ty)
    };
    let options = PlanOptions {
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
        has_imatrix: imatrix.is_some(),
    };
    let plan = mixture::plan(ft, &facts, &descs, &options).with_context(|| name.clone())?;
    for &(i, wanted, used) in &plan.fallbacks {
        eprintln!(
            "warning: {}: row length {} is not a multiple of {}'s block of {}; using {}",
            tensors[i].name,
            tensors[i].shape()[0],
            wanted.name(),
            wanted.block_size(),
            used.name()
        );
    }
    // Everything that would stop llama-quantize midway is refused before anything is written.
    let mut weights: Vec<Option<&[f32]>> = vec![None; tensors.len()];
    for (i, t) in tensors.iter().enumerate() {
        let to = plan.types[i];
        if to == t.ggml_type {
            continue;
        }
        if let Some(m) = &imatrix {
            weights[i] = imatrix_for(m, t, &name)?;
            if let Some(w) = weights[i] {
                let ne0 = t.shape()[0] as usize;
                let probe = vec![0f32; ne0];
                let mut out = vec![0u8; gguf_quant::row_bytes(to, ne0)?];
                if let Err(e) =
                    gguf_quant::quantize_rows_imatrix(to, &probe, ne0, &w[..ne0], &mut out)
                {
                    bail!(
                        "{name}: {} to {} with an importance matrix: {e}",
                        t.name,
                        to.name()
                    );
                }
            }
        }
        if plan.requires_imatrix[i] && weights[i].is_none() {
            let missing = if imatrix.is_some() {
                "and the importance matrix has no entry for it"
            } else {
                "(--imatrix)"
            };
            bail!(
                "{name}: {} to {} needs an importance matrix {missing}, as llama-quantize requires for this type",
                t.name,
                to.name()
            );
        }
        if t.ggml_type.is_quantized() && !a.allow_requantize {
            bail!(
                "{name}: tensor {} is already quantized ({}); requantizing to {} needs --allow-requantize (quality suffers: quantize from F32, F16 or BF16 where you can)",
                t.name,
                t.ggml_type.name(),
                to.name()
            );
        }
        if weights[i].is_none() {
            // The quantizer that will run, tried on one block of zeros.
            let probe = vec![0f32; to.block_size() as usize];
            let mut out = vec![0u8; to.type_size() as usize];
            if let Err(e) = gguf_quant::quantize_rows(to, &probe, &mut out) {
                bail!(
                    "{name}: {} to {} without an importance matrix: {e}",
                    t.name,
                    to.name()
                );
            }
        }
    }
    if a.allow_requantize
        && tensors
            .iter()
            .zip(&plan.types)
            .any(|(t, &to)| to != t.ggml_type && t.ggml_type.is_quantized())
    {
        eprintln!("note: requantizing: quantized tensors are dequantized to f32 first");
    }

    // llama-quantize's metadata: the input's keys in order, the quantization version and the
    // file type set last (ggml's setters move a key to the end), the split keys removed.
    let mut builder = GgufBuilder::from_file(file);
    builder.byte_order(gguf_format::ByteOrder::Little);
    builder.remove(QUANTIZATION_VERSION);
    builder.set(QUANTIZATION_VERSION, GGML_QNT_VERSION);
    builder.remove(FILE_TYPE);
    builder.set(FILE_TYPE, ft.id());
    for key in SPLIT_KEYS {
        builder.remove(key);
    }
    if let (Some(m), Some(path)) = (&imatrix, &a.imatrix) {
        // llama-quantize's keys, after the file type: strings cut to 127 bytes (`strncpy`),
        // counts as u32.
        let cut = |s: &[u8]| s[..s.len().min(127)].to_vec();
        let file = path.as_os_str().as_encoded_bytes();
        builder.set(IMATRIX_FILE, OwnedValue::String(cut(file)));
        if let Some(dataset) = m.datasets.first() {
            builder.set(IMATRIX_DATASET, OwnedValue::String(cut(dataset.as_bytes())));
        }
        builder.set(IMATRIX_ENTRIES, m.entries.len() as u32);
        if m.chunk_count > 0 {
            builder.set(IMATRIX_CHUNKS, m.chunk_count);
        }
    }
    let specs = tensors
        .iter()
        .zip(&plan.types)
        .map(|(t, &ty)| TensorSpec::new(t.name, ty, t.shape()))
        .collect::<gguf_format::Result<Vec<_>>>()?;
    *builder.tensors_mut() = specs;

    let size_in: u64 = tensors.iter().map(|t| t.size).sum();
    let size_out: u64 = builder.tensors().iter().map(TensorSpec::size).sum();
    let elements: u64 = tensors
        .iter()
        .map(|t| t.element_count())
        .sum::<u64>()
        .max(1);
    if a.dry_run {
        for (t, spec) in tensors.iter().zip(builder.tensors()) {
            eprintln!(
                "{:40} {:7} -> {:7} {:>10} -> {:>10}",
                t.name,
                t.ggml_type.name(),
                spec.ggml_type().name(),
                crate::inspect::human_bytes(t.size),
                crate::inspect::human_bytes(spec.size())
            );
        }
    }
    eprintln!(
        "{}: {} ({:.2} bits per weight) -> {} as {} ({:.2} bits per weight)",
        name,
        crate::inspect::human_bytes(size_in),
        size_in as f64 * 8.0 / elements as f64,
        crate::inspect::human_bytes(size_out),
        ft.name(),
        size_out as f64 * 8.0 / elements as f64,
    );
    if a.dry_run {
        return Ok(());
    }

    let threads = match a.nthreads.unwrap_or(a.threads) {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        t => t,
    };
    let bar = ProgressBar::new(tensors.len() as u64).with_style(
        ProgressStyle::with_template("quantizing [{bar:30}] {pos}/{len} {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    fsutil::write_atomic(&output, mode, |out| {
        let mut w = builder.write(out)?;
        for (i, (t, spec)) in tensors.iter().zip(builder.tensors()).enumerate() {
            bar.set_message(t.name.to_string());
            let data = file.tensor_data(t);
            if spec.ggml_type() == t.ggml_type {
                w.write_tensor(data)?;
            } else {
                w.write_tensor_with(|sink| {
                    convert(t, data, spec.ggml_type(), weights[i], threads, sink)
                        .map_err(|e| std::io::Error::other(format!("tensor '{}': {e:#}", t.name)))
                })?;
            }
            bar.inc(1);
        }
        w.finish()?;
        Ok(())
    })
    .map_err(with_force_hint)?;
    bar.finish_and_clear();
    eprintln!("wrote {}", output.display());
    Ok(())
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

/// The importance values of tensor `t` (`ne0` per expert) as llama-quantize finds them: none
/// when the matrix has no entry for it; an error when the entry's size is not the tensor's
/// (except for the token embeddings, which llama-quantize then quantizes without one).
fn imatrix_for<'m>(m: &'m Imatrix, t: &TensorInfo<'_>, file: &str) -> Result<Option<&'m [f32]>> {
    let Some(values) = m.entries.get(t.name) else {
        eprintln!("note: no importance matrix entry for {}", t.name);
        return Ok(None);
    };
    let shape = t.shape();
    let expected = shape[0] * shape.get(2).copied().unwrap_or(1);
    if values.len() as u64 == expected {
        return Ok(Some(values));
    }
    if matches!(t.name, "token_embd.weight" | "per_layer_token_embd.weight") {
        eprintln!(
            "warning: the importance matrix of {} has {} values, not {expected}; quantizing it without",
            t.name,
            values.len()
        );
        return Ok(None);
    }
    bail!(
        "{file}: the importance matrix of {} has {} values, the tensor {expected} columns (× experts): a matrix made for another model?",
        t.name,
        values.len()
    )
}

/// Converts one tensor's bytes from its type to `to`, slab by slab of whole rows: each slab is
/// dequantized to f32, then quantized on `threads` threads (rows are independent, so the
/// bytes do not depend on the split), with the importance values `weights` when given (`ne0`
/// per expert: row `r` takes those of expert `r / ne1`), and written.
fn convert(
    t: &TensorInfo<'_>,
    data: &[u8],
    to: GgmlType,
    weights: Option<&[f32]>,
    threads: usize,
    sink: &mut dyn Write,
) -> Result<()> {
    let shape = t.shape();
    let ne0 = shape.first().copied().unwrap_or(1).max(1) as usize;
    let ne1 = shape.get(1).copied().unwrap_or(1).max(1) as usize;
    let rows = (t.element_count() as usize) / ne0;
    let row_in = gguf_quant::row_bytes(t.ggml_type, ne0)?;
    let row_out = gguf_quant::row_bytes(to, ne0)?;
    let slab_rows = (SLAB_VALUES / ne0).clamp(1, rows.max(1));
    // F32 input is quantized straight from the mapped file (aligned, little-endian as the
    // file is): no copy, and no slab of floats to allocate.
    let mapped_f32: Option<&[f32]> =
        if cfg!(target_endian = "little") && t.ggml_type == GgmlType::F32 {
            bytemuck::try_cast_slice(&data[..rows * row_in]).ok()
        } else {
            None
        };
    let mut values = vec![
        0f32;
        if mapped_f32.is_some() {
            0
        } else {
            slab_rows * ne0
        }
    ];
    let mut bytes = vec![0u8; slab_rows * row_out];
    // Rows `first..first + n` (global numbers), in runs that stay within one expert.
    let quantize = |first: usize, src: &[f32], dst: &mut [u8]| -> Result<()> {
        let Some(w) = weights else {
            return Ok(gguf_quant::quantize_rows(to, src, dst)?);
        };
        let n = src.len() / ne0;
        let mut r = 0;
        while r < n {
            let expert = (first + r) / ne1;
            let run = (ne1 - (first + r) % ne1).min(n - r);
            gguf_quant::quantize_rows_imatrix(
                to,
                &src[r * ne0..(r + run) * ne0],
                ne0,
                &w[expert * ne0..(expert + 1) * ne0],
                &mut dst[r * row_out..(r + run) * row_out],
            )?;
            r += run;
        }
        Ok(())
    };
    let mut r = 0;
    while r < rows {
        let n = slab_rows.min(rows - r);
        let bytes = &mut bytes[..n * row_out];
        let values: &[f32] = match mapped_f32 {
            Some(all) => &all[r * ne0..(r + n) * ne0],
            None => {
                let values = &mut values[..n * ne0];
                gguf_quant::dequantize_row(
                    t.ggml_type,
                    &data[r * row_in..(r + n) * row_in],
                    values,
                )?;
                values
            }
        };
        let per_thread = n.div_ceil(threads.max(1));
        let quantize = &quantize;
        std::thread::scope(|s| -> Result<()> {
            let jobs: Vec<_> = values
                .chunks(per_thread * ne0)
                .zip(bytes.chunks_mut(per_thread * row_out))
                .enumerate()
                .map(|(j, (src, dst))| s.spawn(move || quantize(r + j * per_thread, src, dst)))
                .collect();
            for job in jobs {
                job.join()
                    .map_err(|_| anyhow::anyhow!("a quantizing thread panicked"))??;
            }
            Ok(())
        })?;
        sink.write_all(bytes)?;
        r += n;
    }
    Ok(())
}
