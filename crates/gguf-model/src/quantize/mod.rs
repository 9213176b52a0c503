//! Quantizing a model as llama.cpp's `llama-quantize` does, byte for byte: its file types
//! ([`FileType`]), its per-tensor type rules ([`plan`], [`quantize_order`]), importance
//! matrices ([`Imatrix`]), and the file laid out as it lays it out ([`Quantization`]: its
//! tensor order, its metadata with `general.quantization_version` and `general.file_type`
//! moved to the end), tensors streamed in slabs of rows quantized on several threads.
//!
//! The numerics (the block types, the quantizers) are gguf-quant's; what depends on the
//! architecture and the tensors' names is here, as llama.cpp keeps it in libllama rather than
//! ggml. Progress, warnings and notes are reported through [`QuantizeEvent`]s; nothing is
//! printed.
//!
//! ```no_run
//! use gguf_model::quantize::{FileType, QuantizeOptions, Quantization};
//! let mapped = gguf_format::GgufFile::open("model-f16.gguf")?;
//! let options = QuantizeOptions::new(FileType::Q4_K_M);
//! let q = Quantization::prepare(mapped.file(), "model-f16.gguf", &options, &mut |_| {})?;
//! let mode = gguf_fsutil::WriteMode::CreateNew;
//! q.write_to("model-q4_k_m.gguf".as_ref(), mode, 0, &mut |_| {})?;
//! # Ok::<(), gguf_model::ModelError>(())
//! ```

mod file_type;
mod imatrix;
mod layout;
mod pipeline;
mod rules;
mod slabs;

pub use file_type::FileType;
pub use imatrix::Imatrix;
pub use layout::model_facts;
pub use pipeline::{Quantization, QuantizeEvent, QuantizeOptions};
pub use rules::{
    allows_quantization, plan, quantize_order, ModelFacts, Plan, PlanOptions, TensorDesc,
    TensorTypeLookup,
};
