//! Conversion to GGUF without Python.
//!
//! - [`legacy`]: llama models in the formats before GGUF (unversioned GGML `lmgg`, GGMF v1
//!   `fmgg`, GGJT v1-v3 `tjgg`): hyperparameters, vocabulary and tensors to a GGUF with the
//!   metadata llama.cpp's `convert_llama_ggml_to_gguf.py` writes, the old quantized block
//!   layouts repacked into today's with the same dequantized values.
//! - [`hf`]: Hugging Face checkpoints (`config.json` and safetensors weights, sharded or not),
//!   read through memory maps; their conversion is the next step.
//!
//! ```no_run
//! use gguf_convert::legacy::{LegacyModel, Options};
//! let bytes = std::fs::read("ggml-vocab.bin")?;
//! let model = LegacyModel::parse(&bytes)?;
//! println!("{}", model.container().name()); // GGJTv1
//! let mut out = Vec::new();
//! let mut options = Options::new("ggml-vocab.bin");
//! options.vocab_only = true; // the file has no tensors: it is a vocabulary
//! let report = model.write_gguf(&options, &mut out, &mut |_, _| {})?;
//! let file = gguf_format::GgufFile::parse(&out)?;
//! assert_eq!(file.value("general.architecture").and_then(|v| v.as_str()), Some("llama"));
//! println!("{} tensors", report.tensors.len());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod check;
mod error;
pub mod export;
pub mod hf;
pub mod legacy;
pub mod model_card;
pub mod sentencepiece;

pub use error::{Error, Result};
