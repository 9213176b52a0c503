//! Quantizing a model file as llama-quantize does: the plan checked before anything is
//! written ([`Quantization::prepare`]), then the file streamed tensor by tensor
//! ([`Quantization::write`], [`Quantization::write_to`]).

use std::io::Write;
use std::path::Path;

use gguf_format::tensor_names::TensorName;
use gguf_format::{GgmlType, GgufBuilder, GgufFile, TensorInfo, TensorSpec};
use gguf_fsutil::WriteMode;

use super::file_type::FileType;
use super::imatrix::Imatrix;
use super::layout;
use super::rules::{self, Plan, PlanOptions, TensorDesc, TensorTypeLookup};
use super::slabs;
use crate::error::{ModelError, Result};

/// What to quantize to, and llama-quantize's options.
#[derive(Clone, Copy)]
pub struct QuantizeOptions<'a> {
    /// The file type (`general.file_type`): the mixture of types the rules choose from.
    pub file_type: FileType,
    /// `--output-tensor-type`.
    pub output_tensor_type: Option<GgmlType>,
    /// `--token-embedding-type`.
    pub token_embedding_type: Option<GgmlType>,
    /// `--tensor-type PATTERN=TYPE`, as a lookup (see [`PlanOptions::tensor_type`]).
    pub tensor_type: Option<TensorTypeLookup<'a>>,
    /// `--pure`: no mixture rules, every quantizable tensor to the default type.
    pub pure: bool,
    /// `--leave-output-tensor`: `output.weight` keeps its type.
    pub leave_output_tensor: bool,
    /// `--allow-requantize`: quantized tensors may be quantized again (dequantized first).
    pub allow_requantize: bool,
    /// An importance matrix and the path it was read from (written into the metadata).
    pub imatrix: Option<(&'a Imatrix, &'a Path)>,
}

impl QuantizeOptions<'_> {
    /// To `file_type` with llama-quantize's defaults.
    pub fn new(file_type: FileType) -> QuantizeOptions<'static> {
        QuantizeOptions {
            file_type,
            output_tensor_type: None,
            token_embedding_type: None,
            tensor_type: None,
            pure: false,
            leave_output_tensor: false,
            allow_requantize: false,
            imatrix: None,
        }
    }
}

/// What a quantization reports as it goes, as llama-quantize prints it: the caller shows it
/// (the library prints nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuantizeEvent<'a> {
    /// A tensor's row length is not a multiple of its type's block: it gets another type.
    Fallback {
        /// The tensor.
        tensor: &'a str,
        /// Its row length (`ne[0]`).
        row_length: u64,
        /// The type the rules chose.
        wanted: GgmlType,
        /// The type it gets.
        used: GgmlType,
    },
    /// The importance matrix has no entry for a tensor: it is quantized without one.
    NoImatrixEntry {
        /// The tensor.
        tensor: &'a str,
    },
    /// The token embeddings' entry in the importance matrix does not fit them: they are
    /// quantized without one, as llama-quantize does.
    ImatrixIgnored {
        /// The tensor.
        tensor: &'a str,
        /// The entry's values.
        values: usize,
        /// The values the tensor needs.
        expected: u64,
    },
    /// Some quantized tensors are quantized again: they are dequantized to f32 first.
    Requantizing,
    /// A tensor is being written.
    Tensor {
        /// Its place in the file (0-based).
        index: usize,
        /// The number of tensors.
        count: usize,
        /// Its name.
        name: &'a str,
    },
    /// A tensor has been written.
    TensorDone {
        /// Its place in the file (0-based).
        index: usize,
        /// The number of tensors.
        count: usize,
    },
}

/// A model's quantization, planned and checked: every tensor's type, the output's metadata
/// and layout. Whatever would stop llama-quantize midway has been refused by
/// [`prepare`](Self::prepare), before anything is written.
pub struct Quantization<'a> {
    file: &'a GgufFile<'a>,
    /// The model's name in messages (its path).
    name: String,
    file_type: FileType,
    /// The input's tensors, in llama-quantize's order.
    tensors: Vec<&'a TensorInfo<'a>>,
    /// The output's metadata and tensors (same order).
    builder: GgufBuilder<'a>,
    /// The importance values each tensor is quantized with.
    weights: Vec<Option<&'a [f32]>>,
}

impl<'a> Quantization<'a> {
    /// Plans the quantization of `file` (named `name` in errors) and checks it; `events` gets
    /// the warnings and notes llama-quantize prints.
    pub fn prepare(
        file: &'a GgufFile<'a>,
        name: &str,
        options: &QuantizeOptions<'a>,
        events: &mut dyn FnMut(QuantizeEvent<'_>),
    ) -> Result<Quantization<'a>> {
        let refuse = |message: String| ModelError::Quantize {
            file: name.to_string(),
            message,
        };
        if file.value("split.count").is_some() {
            return Err(refuse(
                "a part of a split set; merge it first (gguf merge)".into(),
            ));
        }
        let facts = layout::model_facts(file, name)?;
        let tensors = in_quantize_order(file);
        let descs: Vec<TensorDesc<'_>> = tensors
            .iter()
            .map(|t| TensorDesc {
                name: t.name,
                ggml_type: t.ggml_type,
                shape: t.shape(),
            })
            .collect();
        let plan_options = PlanOptions {
            output_tensor_type: options.output_tensor_type,
            token_embedding_type: options.token_embedding_type,
            tensor_type: options.tensor_type,
            pure: options.pure,
            leave_output_tensor: options.leave_output_tensor,
            has_imatrix: options.imatrix.is_some(),
        };
        let plan = rules::plan(options.file_type, &facts, &descs, &plan_options)
            .map_err(|e| refuse(e.to_string()))?;
        for &(i, wanted, used) in &plan.fallbacks {
            events(QuantizeEvent::Fallback {
                tensor: tensors[i].name,
                row_length: tensors[i].shape()[0],
                wanted,
                used,
            });
        }
        let weights = check_tensors(&tensors, &plan, options, name, events)?;
        if options.allow_requantize
            && tensors
                .iter()
                .zip(&plan.types)
                .any(|(t, &to)| to != t.ggml_type && t.ggml_type.is_quantized())
        {
            events(QuantizeEvent::Requantizing);
        }
        let mut builder = layout::metadata(file, options.file_type, options.imatrix);
        *builder.tensors_mut() = tensors
            .iter()
            .zip(&plan.types)
            .map(|(t, &ty)| TensorSpec::new(t.name, ty, t.shape()))
            .collect::<gguf_format::Result<Vec<_>>>()?;
        Ok(Quantization {
            file,
            name: name.to_string(),
            file_type: options.file_type,
            tensors,
            builder,
            weights,
        })
    }

    /// The file type quantized to.
    pub fn file_type(&self) -> FileType {
        self.file_type
    }

    /// Each tensor of the input, in the output's order, with what it becomes.
    pub fn tensors(&self) -> impl ExactSizeIterator<Item = (&TensorInfo<'a>, &TensorSpec)> + '_ {
        self.tensors.iter().copied().zip(self.builder.tensors())
    }

    /// Bytes of tensor data in the input.
    pub fn size_in(&self) -> u64 {
        self.tensors.iter().map(|t| t.size).sum()
    }

    /// Bytes of tensor data in the output.
    pub fn size_out(&self) -> u64 {
        self.builder.tensors().iter().map(TensorSpec::size).sum()
    }

    /// The number of weights (at least 1, to divide by).
    pub fn elements(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| t.element_count())
            .sum::<u64>()
            .max(1)
    }

    /// Writes the quantized file to `out`, each tensor converted in slabs of rows on
    /// `threads` threads (0: all CPUs; the bytes do not depend on it); `events` gets
    /// [`QuantizeEvent::Tensor`] and [`QuantizeEvent::TensorDone`] for each tensor.
    pub fn write<W: Write>(
        &self,
        out: W,
        threads: usize,
        events: &mut dyn FnMut(QuantizeEvent<'_>),
    ) -> Result<()> {
        let threads = match threads {
            0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
            t => t,
        };
        let count = self.tensors.len();
        let mut w = self.builder.write(out)?;
        for (index, (t, spec)) in self.tensors().enumerate() {
            events(QuantizeEvent::Tensor {
                index,
                count,
                name: t.name,
            });
            let data = self.file.tensor_data(t);
            if spec.ggml_type() == t.ggml_type {
                w.write_tensor(data)?;
            } else {
                self.write_converted(&mut w, index, t, spec.ggml_type(), threads)?;
            }
            events(QuantizeEvent::TensorDone { index, count });
        }
        w.finish()?;
        Ok(())
    }

    /// Creates or replaces `dest` (as `mode` allows) with the quantized file, through a
    /// temporary file renamed into place when complete (see [`gguf_fsutil::write_atomic`]).
    /// Errors of the container name `dest`.
    pub fn write_to(
        &self,
        dest: &Path,
        mode: WriteMode,
        threads: usize,
        events: &mut dyn FnMut(QuantizeEvent<'_>),
    ) -> Result<()> {
        gguf_fsutil::write_atomic(dest, mode, |out| {
            self.write(out, threads, events).map_err(|e| match e {
                ModelError::Format(e) => ModelError::Format(e.in_file(dest)),
                other => other,
            })
        })
    }

    /// Writes tensor `index` converted to `to`.
    fn write_converted<W: Write>(
        &self,
        w: &mut gguf_format::TensorWriter<W>,
        index: usize,
        t: &TensorInfo<'_>,
        to: GgmlType,
        threads: usize,
    ) -> Result<()> {
        let data = self.file.tensor_data(t);
        // The writer's callback carries only I/O errors: the conversion's own is kept here.
        let mut failed = None;
        let written = w.write_tensor_with(|sink| {
            slabs::convert(&self.name, t, data, to, self.weights[index], threads, sink).map_err(
                |e| {
                    failed = Some(e);
                    std::io::Error::other("quantizing failed")
                },
            )
        });
        match (written, failed) {
            (Ok(()), _) => Ok(()),
            (Err(_), Some(error)) => Err(ModelError::QuantizeTensor {
                tensor: t.name.to_string(),
                error: Box::new(error),
            }),
            (Err(e), None) => Err(e.into()),
        }
    }
}

/// `file`'s tensors in the order llama-quantize writes and counts them.
fn in_quantize_order<'a>(file: &'a GgufFile<'a>) -> Vec<&'a TensorInfo<'a>> {
    let names: Vec<&str> = file.tensors().iter().map(|t| t.name).collect();
    rules::quantize_order(&names)
        .iter()
        .map(|&i| &file.tensors()[i])
        .collect()
}

/// Refuses, before anything is written, every tensor llama-quantize would stop at midway;
/// the importance values of each tensor.
fn check_tensors<'a>(
    tensors: &[&'a TensorInfo<'a>],
    plan: &Plan,
    options: &QuantizeOptions<'a>,
    name: &str,
    events: &mut dyn FnMut(QuantizeEvent<'_>),
) -> Result<Vec<Option<&'a [f32]>>> {
    let refuse = |message: String| ModelError::Quantize {
        file: name.to_string(),
        message,
    };
    let mut weights: Vec<Option<&[f32]>> = vec![None; tensors.len()];
    for (i, t) in tensors.iter().enumerate() {
        let to = plan.types[i];
        if to == t.ggml_type {
            continue;
        }
        if let Some((m, _)) = options.imatrix {
            weights[i] = imatrix_for(m, t, name, events)?;
            if let Some(w) = weights[i] {
                let ne0 = t.shape()[0] as usize;
                let probe = vec![0f32; ne0];
                let mut out = vec![0u8; gguf_quant::row_bytes(to, ne0)?];
                if let Err(e) =
                    gguf_quant::quantize_rows_imatrix(to, &probe, ne0, &w[..ne0], &mut out)
                {
                    return Err(refuse(format!(
                        "{} to {} with an importance matrix: {e}",
                        t.name,
                        to.name()
                    )));
                }
            }
        }
        if plan.requires_imatrix[i] && weights[i].is_none() {
            let missing = if options.imatrix.is_some() {
                "and the importance matrix has no entry for it"
            } else {
                "(--imatrix)"
            };
            return Err(refuse(format!(
                "{} to {} needs an importance matrix {missing}, as llama-quantize requires for this type",
                t.name,
                to.name()
            )));
        }
        if t.ggml_type.is_quantized() && !options.allow_requantize {
            return Err(refuse(format!(
                "tensor {} is already quantized ({}); requantizing to {} needs --allow-requantize (quality suffers: quantize from F32, F16 or BF16 where you can)",
                t.name,
                t.ggml_type.name(),
                to.name()
            )));
        }
        if weights[i].is_none() {
            // The quantizer that will run, tried on one block of zeros.
            let probe = vec![0f32; to.block_size() as usize];
            let mut out = vec![0u8; to.type_size() as usize];
            if let Err(e) = gguf_quant::quantize_rows(to, &probe, &mut out) {
                return Err(refuse(format!(
                    "{} to {} without an importance matrix: {e}",
                    t.name,
                    to.name()
                )));
            }
        }
    }
    Ok(weights)
}

/// The importance values of tensor `t` (`ne0` per expert) as llama-quantize finds them: none
/// when the matrix has no entry for it; an error when the entry's size is not the tensor's
/// (except for the token embeddings, which llama-quantize then quantizes without one).
fn imatrix_for<'m>(
    m: &'m Imatrix,
    t: &TensorInfo<'_>,
    file: &str,
    events: &mut dyn FnMut(QuantizeEvent<'_>),
) -> Result<Option<&'m [f32]>> {
    let Some(values) = m.entries.get(t.name) else {
        events(QuantizeEvent::NoImatrixEntry { tensor: t.name });
        return Ok(None);
    };
    let shape = t.shape();
    let expected = shape[0] * shape.get(2).copied().unwrap_or(1);
    if values.len() as u64 == expected {
        return Ok(Some(values));
    }
    if t.name == TensorName::TokenEmbd.weight() || t.name == TensorName::PerLayerTokenEmbd.weight()
    {
        events(QuantizeEvent::ImatrixIgnored {
            tensor: t.name,
            values: values.len(),
            expected,
        });
        return Ok(None);
    }
    Err(ModelError::Quantize {
        file: file.to_string(),
        message: format!(
            "the importance matrix of {} has {} values, the tensor {expected} columns (× experts): a matrix made for another model?",
            t.name,
            values.len()
        ),
    })
}
