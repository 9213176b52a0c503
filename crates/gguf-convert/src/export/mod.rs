//! GGUF models back to Hugging Face checkpoints: the reverse of `convert_hf_to_gguf.py`.
//!
//! [`Export::plan`] reads a GGUF file's metadata and tensor table and decides everything an
//! export writes; [`Export::write`] writes it into a directory:
//!
//! - `model.safetensors`: every tensor dequantized (any type `gguf-quant` dequantizes) to one
//!   dtype, under its Hugging Face name, in PyTorch's dimension order (the reverse of GGUF's),
//!   with what the converter did to the values undone: the Q/K row permutation of `llama` and
//!   `mistral` ([`Transform::UnpermuteRope`]) and the `+1` of every Gemma norm
//!   ([`Transform::SubtractOne`]). Tensors are converted one at a time as the file is
//!   written, so memory stays bounded by the largest tensor.
//! - `config.json`: what `transformers` needs to build the model, with the keys
//!   `convert_hf_to_gguf.py` reads back to write the same GGUF hyperparameters.
//! - `tokenizer.json`, `tokenizer_config.json` and, for SentencePiece vocabularies,
//!   `tokenizer.model`, rebuilt from `tokenizer.ggml.*` (see [`tokenizer_json`]'s rules).
//!
//! Architectures: `llama`, `mistral`, `qwen2`, `qwen3`, `gemma`, `gemma2`, `gemma3`, `phi3`,
//! and `bert` (a `BertModel`, with sentence-transformers' `modules.json` and
//! `1_Pooling/config.json` for the file's pooling type). Anything else, and tokenizers other
//! than `gpt2` (byte-level BPE, with the pre-tokenizers listed in [`tokenizer_json`]),
//! `llama` (SentencePiece) and `bert` (WordPiece), is refused with an
//! [`Error::Unsupported`] naming it.
//!
//! The default dtype ([`ExportDtype::for_file`]) is BF16 when the file's `general.file_type`
//! says BF16 (or it holds BF16 tensors), F32 when it says all-F32, F16 otherwise (quantized
//! files included).
//!
//! ```no_run
//! use gguf_convert::export::{Export, ExportOptions};
//! let mapped = gguf_format::GgufFile::open("model.gguf")?;
//! let export = Export::plan(mapped.file(), &ExportOptions::default())?;
//! let input = std::path::Path::new("model.gguf");
//! export.write("model-hf".as_ref(), false, &[input], &mut |done, total| eprint!("\r{done}/{total}"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod config;
mod tensors;
pub mod tokenizer_json;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use gguf_format::{GgmlType, GgufFile};
use gguf_fsutil::{StagedFiles, WriteMode};
use safetensors::tensor::{Metadata, TensorInfo};
use serde_json::Value;

use crate::error::{Error, Result};

pub use tensors::Transform;

/// The dtype of the exported tensors (`--dtype`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportDtype {
    /// float32.
    F32,
    /// float16.
    F16,
    /// bfloat16.
    Bf16,
}

impl ExportDtype {
    /// Parses `f32`, `f16` or `bf16` (any case).
    pub fn parse(s: &str) -> Option<ExportDtype> {
        Some(match s.to_ascii_lowercase().as_str() {
            "f32" | "float32" => ExportDtype::F32,
            "f16" | "float16" => ExportDtype::F16,
            "bf16" | "bfloat16" => ExportDtype::Bf16,
            _ => return None,
        })
    }

    /// `f32`, `f16` or `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            ExportDtype::F32 => "f32",
            ExportDtype::F16 => "f16",
            ExportDtype::Bf16 => "bf16",
        }
    }

    /// PyTorch's name, as `config.json`'s `torch_dtype` gives it.
    pub fn torch_name(self) -> &'static str {
        match self {
            ExportDtype::F32 => "float32",
            ExportDtype::F16 => "float16",
            ExportDtype::Bf16 => "bfloat16",
        }
    }

    /// Bytes per value.
    pub fn size(self) -> usize {
        match self {
            ExportDtype::F32 => 4,
            _ => 2,
        }
    }

    fn safetensors(self) -> safetensors::Dtype {
        match self {
            ExportDtype::F32 => safetensors::Dtype::F32,
            ExportDtype::F16 => safetensors::Dtype::F16,
            ExportDtype::Bf16 => safetensors::Dtype::BF16,
        }
    }

    /// The default for `file`: BF16 when `general.file_type` is 32 (MOSTLY_BF16) or a tensor
    /// is BF16, F32 when `general.file_type` is 0 (ALL_F32), else F16.
    pub fn for_file(file: &GgufFile) -> ExportDtype {
        let file_type = file.value("general.file_type").and_then(|v| v.as_integer());
        if file_type == Some(32) || file.tensors().iter().any(|t| t.ggml_type == GgmlType::BF16) {
            ExportDtype::Bf16
        } else if file_type == Some(0) {
            ExportDtype::F32
        } else {
            ExportDtype::F16
        }
    }
}

/// What an export takes besides the file.
#[derive(Debug, Clone, Default)]
pub struct ExportOptions {
    /// The tensors' dtype; `None`: [`ExportDtype::for_file`].
    pub dtype: Option<ExportDtype>,
}

/// One tensor of `model.safetensors`.
#[derive(Debug, Clone)]
pub struct ExportTensor {
    /// Its Hugging Face name (`model.layers.0.self_attn.q_proj.weight`).
    pub name: String,
    /// The GGUF tensor it comes from (`blk.0.attn_q.weight`).
    pub source: String,
    /// The GGUF tensor's type.
    pub source_type: GgmlType,
    /// Its shape in PyTorch's order (outermost dimension first: GGUF's reversed).
    pub shape: Vec<usize>,
    /// What is done to the values.
    pub transform: Transform,
    /// For one expert's matrix of a stacked expert tensor (`ffn_up_exps`): which expert, whose
    /// rows of the source it takes.
    pub expert: Option<usize>,
}

/// The Hugging Face architecture of a supported GGUF architecture.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arch {
    Llama,
    /// `llama` with experts (`llama.expert_count` above 1).
    Mixtral,
    Mistral,
    Qwen2,
    Qwen3,
    /// The mixtures of experts with Qwen2-MoE's layout (`mlp.experts.{e}.*_proj`).
    Qwen2Moe,
    Qwen3Moe,
    Olmoe,
    Gemma,
    Gemma2,
    Gemma3,
    Phi3,
    Bert,
}

impl Arch {
    fn from_gguf(name: &str) -> Option<Arch> {
        Some(match name {
            "llama" => Arch::Llama,
            "mistral" => Arch::Mistral,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            "qwen2moe" => Arch::Qwen2Moe,
            "qwen3moe" => Arch::Qwen3Moe,
            "olmoe" => Arch::Olmoe,
            "gemma" => Arch::Gemma,
            "gemma2" => Arch::Gemma2,
            "gemma3" => Arch::Gemma3,
            "phi3" => Arch::Phi3,
            "bert" => Arch::Bert,
            _ => return None,
        })
    }

    /// Whether its experts are `mlp.experts.{e}.{gate,up,down}_proj` (Qwen2-MoE's layout).
    pub(crate) fn has_mlp_experts(self) -> bool {
        matches!(self, Arch::Qwen2Moe | Arch::Qwen3Moe | Arch::Olmoe)
    }

    pub(crate) fn is_gemma(self) -> bool {
        matches!(self, Arch::Gemma | Arch::Gemma2 | Arch::Gemma3)
    }

    /// `architectures[0]` of `config.json`.
    pub(crate) fn hf_class(self) -> &'static str {
        match self {
            Arch::Llama => "LlamaForCausalLM",
            Arch::Mixtral => "MixtralForCausalLM",
            Arch::Mistral => "MistralForCausalLM",
            Arch::Qwen2 => "Qwen2ForCausalLM",
            Arch::Qwen3 => "Qwen3ForCausalLM",
            Arch::Qwen2Moe => "Qwen2MoeForCausalLM",
            Arch::Qwen3Moe => "Qwen3MoeForCausalLM",
            Arch::Olmoe => "OlmoeForCausalLM",
            Arch::Gemma => "GemmaForCausalLM",
            Arch::Gemma2 => "Gemma2ForCausalLM",
            Arch::Gemma3 => "Gemma3ForCausalLM",
            Arch::Phi3 => "Phi3ForCausalLM",
            Arch::Bert => "BertModel",
        }
    }

    /// `model_type` of `config.json`.
    pub(crate) fn model_type(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Mixtral => "mixtral",
            Arch::Mistral => "mistral",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
            Arch::Qwen2Moe => "qwen2_moe",
            Arch::Qwen3Moe => "qwen3_moe",
            Arch::Olmoe => "olmoe",
            Arch::Gemma => "gemma",
            Arch::Gemma2 => "gemma2",
            Arch::Gemma3 => "gemma3_text",
            Arch::Phi3 => "phi3",
            Arch::Bert => "bert",
        }
    }
}

/// The tensors' file in the output directory.
const SAFETENSORS: &str = "model.safetensors";

/// The largest header safetensors reads (its `MAX_HEADER_SIZE`).
const MAX_SAFETENSORS_HEADER: usize = 100_000_000;

/// The GGUF architectures [`Export::plan`] exports.
pub const SUPPORTED: &[&str] = &[
    "llama", "mistral", "qwen2", "qwen3", "qwen2moe", "qwen3moe", "olmoe", "gemma", "gemma2",
    "gemma3", "phi3", "bert",
];

/// One file an export writes, with its content (all but `model.safetensors`).
#[derive(Debug, Clone)]
pub struct ExportFile {
    /// Its name in the output directory.
    pub name: &'static str,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// What [`Export::write`] wrote.
#[derive(Debug, Clone)]
pub struct ExportReport {
    /// The files, in the order written.
    pub files: Vec<PathBuf>,
    /// The size of `model.safetensors` in bytes.
    pub safetensors_bytes: u64,
}

/// A GGUF file's export, planned: the tensors with their names, shapes and transformations,
/// `config.json` and the tokenizer files.
pub struct Export<'f> {
    file: &'f GgufFile<'f>,
    arch: Arch,
    gguf_arch: &'static str,
    dtype: ExportDtype,
    tensors: Vec<ExportTensor>,
    /// Index of each exported tensor's source in the file's tensor table.
    sources: Vec<usize>,
    config: Value,
    files: Vec<ExportFile>,
    warnings: Vec<String>,
}

impl std::fmt::Debug for Export<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Export")
            .field("arch", &self.gguf_arch)
            .field("dtype", &self.dtype)
            .field("tensors", &self.tensors.len())
            .finish_non_exhaustive()
    }
}

impl<'f> Export<'f> {
    /// Plans the export of `file`: refuses an unsupported architecture or tokenizer, a tensor
    /// without a Hugging Face name or of a type that cannot be dequantized, and metadata the
    /// configuration needs but lacks.
    pub fn plan(file: &'f GgufFile<'f>, options: &ExportOptions) -> Result<Export<'f>> {
        let name = file.architecture()?;
        let arch = Arch::from_gguf(name).ok_or_else(|| {
            Error::Unsupported(format!(
                "architecture '{name}' cannot be exported (supported: {})",
                SUPPORTED.join(", ")
            ))
        })?;
        let gguf_arch = SUPPORTED
            .iter()
            .copied()
            .find(|a| *a == name)
            .unwrap_or("llama");
        let experts = file.get_opt::<u32>("llama.expert_count").ok().flatten();
        let arch = match (arch, experts) {
            (Arch::Llama, Some(n)) if n > 1 => Arch::Mixtral,
            (arch, _) => arch,
        };
        let dtype = options.dtype.unwrap_or_else(|| ExportDtype::for_file(file));
        let mut warnings = Vec::new();
        let hp = config::Hparams::read(file, arch)?;
        let (tensors, sources) = tensors::plan(file, arch, &hp)?;
        let tied = !tensors.iter().any(|t| t.name == "lm_head.weight");
        let tokenizer = tokenizer_json::TokenizerExport::from_gguf(file, arch, &mut warnings)?;
        let config = config::config_json(file, arch, &hp, dtype, tied, &mut warnings)?;
        let mut files = vec![ExportFile {
            name: "config.json",
            bytes: pretty(&config)?,
        }];
        if let Some(t) = tokenizer {
            files.push(ExportFile {
                name: "tokenizer.json",
                bytes: t.tokenizer_json.into_bytes(),
            });
            files.push(ExportFile {
                name: "tokenizer_config.json",
                bytes: pretty(&t.tokenizer_config)?,
            });
            if let Some(model) = t.sentencepiece_model {
                files.push(ExportFile {
                    name: "tokenizer.model",
                    bytes: model,
                });
            }
        } else {
            warnings.push("the file has no tokenizer.ggml.model: no tokenizer files".into());
        }
        if arch == Arch::Bert {
            // Sentence-transformers' pooling module, where the converter reads the pooling type.
            if let Some(pooling) = config::pooling_config(file, &hp) {
                files.push(ExportFile {
                    name: "modules.json",
                    bytes: pretty(&config::modules_json())?,
                });
                files.push(ExportFile {
                    name: "1_Pooling/config.json",
                    bytes: pretty(&pooling)?,
                });
            }
        } else {
            files.push(ExportFile {
                name: "generation_config.json",
                bytes: pretty(&config::generation_config(&config))?,
            });
        }
        Ok(Export {
            file,
            arch,
            gguf_arch,
            dtype,
            tensors,
            sources,
            config,
            files,
            warnings,
        })
    }

    /// The GGUF architecture (`general.architecture`).
    pub fn architecture(&self) -> &'static str {
        self.gguf_arch
    }

    /// The Hugging Face class (`LlamaForCausalLM`, ...).
    pub fn hf_architecture(&self) -> &'static str {
        self.arch.hf_class()
    }

    /// The tensors' dtype.
    pub fn dtype(&self) -> ExportDtype {
        self.dtype
    }

    /// The tensors of `model.safetensors`, in the file's tensor order.
    pub fn tensors(&self) -> &[ExportTensor] {
        &self.tensors
    }

    /// What could not be carried over exactly (written to stderr by the command).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// `config.json`.
    pub fn config(&self) -> &Value {
        &self.config
    }

    /// The files besides `model.safetensors`, with their contents.
    pub fn files(&self) -> &[ExportFile] {
        &self.files
    }

    /// The content of the file `name` (`tokenizer.json`, ...), if the export writes it.
    pub fn file_bytes(&self, name: &str) -> Option<&[u8]> {
        self.files
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.bytes.as_slice())
    }

    /// The bytes (little-endian values of [`Export::dtype`]) of tensor `index` of
    /// [`Export::tensors`], dequantized and transformed.
    pub fn tensor_bytes(&self, index: usize) -> Result<Vec<u8>> {
        let t = self
            .tensors
            .get(index)
            .ok_or_else(|| Error::Unsupported(format!("no tensor {index} in the export")))?;
        let info = &self.file.tensors()[self.sources[index]];
        tensors::convert(self.file, info, t.transform, t.expert, self.dtype)
    }

    /// Writes the export into `dir`, which must not exist or be empty unless `force` (then
    /// files of the same names in it are replaced).
    ///
    /// Before anything is written, a destination that is one of `inputs` (the file the plan
    /// was made from) under any name, its own, a symbolic link's or a hard link's, is refused
    /// ([`gguf_fsutil::Refusal::Input`]). Every file goes to a temporary file beside its
    /// destination, and all are put in place together once `model.safetensors` is complete:
    /// an error leaves none of them, and removes the directories this made (`dir` itself when
    /// it was not there; never one that was). `progress` gets (bytes of tensor data written,
    /// total).
    pub fn write(
        &self,
        dir: &Path,
        force: bool,
        inputs: &[&Path],
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<ExportReport> {
        let st_path = dir.join(SAFETENSORS);
        let paths: Vec<PathBuf> = std::iter::once(st_path.clone())
            .chain(self.files.iter().map(|f| dir.join(f.name)))
            .collect();
        for path in &paths {
            gguf_fsutil::refuse_inputs(path, inputs)?;
        }
        check_output_dir(dir, force)?;
        let mode = if force {
            WriteMode::Replace { force: true }
        } else {
            WriteMode::CreateNew
        };
        let mut staged = StagedFiles::new();
        staged.create_dirs(dir)?;
        for (f, path) in self.files.iter().zip(&paths[1..]) {
            if let Some(parent) = path.parent() {
                staged.create_dirs(parent)?;
            }
            staged.stage(path, mode, |out| {
                out.write_all(&f.bytes)
                    .map_err(|e| gguf_fsutil::Error::from(e).in_file(path))
            })?;
        }
        // A conversion error is kept as it is; an error of the container names the file.
        let safetensors_bytes = staged.stage(&st_path, mode, |out| {
            self.write_safetensors(out, progress).map_err(|e| match e {
                Error::Format(e) => Error::Format(e.in_file(&st_path)),
                other => other,
            })
        })?;
        staged.commit()?;
        Ok(ExportReport {
            files: paths,
            safetensors_bytes,
        })
    }

    /// Writes `model.safetensors` to `out`, laid out as safetensors' own serializer lays it
    /// out (its `Metadata` header as JSON padded with spaces to 8 bytes, the tensors sorted by
    /// dtype, then name: here one dtype, so by name), each tensor converted when its turn
    /// comes; the number of bytes written.
    fn write_safetensors(
        &self,
        out: &mut dyn Write,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<u64> {
        let mut order: Vec<usize> = (0..self.tensors.len()).collect();
        order.sort_by(|&a, &b| self.tensors[a].name.cmp(&self.tensors[b].name));
        let mut infos = Vec::with_capacity(order.len());
        let mut offset = 0;
        for &i in &order {
            let t = &self.tensors[i];
            let len = t.shape.iter().product::<usize>() * self.dtype.size();
            infos.push((
                t.name.clone(),
                TensorInfo {
                    dtype: self.dtype.safetensors(),
                    shape: t.shape.clone(),
                    data_offsets: (offset, offset + len),
                },
            ));
            offset += len;
        }
        let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
        let header = Metadata::new(Some(metadata), infos)
            .map_err(|e| Error::Unsupported(format!("{SAFETENSORS}: {e}")))?;
        let mut header = serde_json::to_vec(&header)
            .map_err(|e| Error::Unsupported(format!("{SAFETENSORS}: {e}")))?;
        header.resize(header.len().next_multiple_of(8), b' ');
        if header.len() > MAX_SAFETENSORS_HEADER {
            return Err(Error::Unsupported(format!(
                "{SAFETENSORS}: a header of {} bytes is more than safetensors reads",
                header.len()
            )));
        }
        let io = |e: std::io::Error| Error::Format(e.into());
        out.write_all(&(header.len() as u64).to_le_bytes())
            .map_err(io)?;
        out.write_all(&header).map_err(io)?;
        let total = offset as u64;
        let mut done = 0;
        for &i in &order {
            let bytes = self.tensor_bytes(i)?;
            let want = self.tensors[i].shape.iter().product::<usize>() * self.dtype.size();
            if bytes.len() != want {
                return Err(Error::Unsupported(format!(
                    "{}: converted to an unexpected number of bytes",
                    self.tensors[i].source
                )));
            }
            out.write_all(&bytes).map_err(io)?;
            done += bytes.len() as u64;
            progress(done, total);
        }
        Ok(8 + header.len() as u64 + total)
    }
}

/// Refuses an output path that is not a directory, or a non-empty directory without `force`.
fn check_output_dir(dir: &Path, force: bool) -> Result<()> {
    let Ok(meta) = std::fs::metadata(dir) else {
        return Ok(());
    };
    if !meta.is_dir() {
        return Err(Error::Unsupported(format!(
            "{}: exists and is not a directory",
            dir.display()
        )));
    }
    let non_empty = std::fs::read_dir(dir)
        .map_err(|e| io_error(format!("{}", dir.display()), e))?
        .next()
        .is_some();
    if non_empty && !force {
        return Err(Error::Unsupported(format!(
            "{}: exists and is not empty (--force writes into it, replacing files of the same names)",
            dir.display()
        )));
    }
    Ok(())
}

fn io_error(what: String, e: std::io::Error) -> Error {
    Error::Format(gguf_format::Error::Io(std::io::Error::new(
        e.kind(),
        format!("{what}: {e}"),
    )))
}

fn pretty(v: &Value) -> Result<Vec<u8>> {
    let mut s = serde_json::to_vec_pretty(v)
        .map_err(|e| Error::Unsupported(format!("JSON serialization failed: {e}")))?;
    s.push(b'\n');
    Ok(s)
}
