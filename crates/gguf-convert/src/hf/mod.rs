//! Hugging Face checkpoints to GGUF, as llama.cpp's `convert_hf_to_gguf.py` converts them,
//! without Python.
//!
//! - [`Checkpoint`]: a directory with `config.json` and safetensors weights (one
//!   `model.safetensors`, or shards listed by `model.safetensors.index.json`), read through
//!   memory maps.
//! - [`HfConversion`]: the plan (metadata in the reference's key order, tensors with its names,
//!   types and transformations) and the streaming writer.
//!
//! ```no_run
//! use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions};
//! let ckpt = Checkpoint::open("all-MiniLM-L6-v2".as_ref())?;
//! let plan = HfConversion::plan(&ckpt, &HfOptions::default())?;
//! let out = std::fs::File::create("minilm.gguf")?;
//! plan.write(std::io::BufWriter::new(out), &mut |done, total| eprint!("\r{done}/{total}"))?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod arch;
mod checkpoint;
mod convert;
pub(crate) mod json;
mod params;
mod pre_hashes;
mod special_vocab;
mod tensor_data;
mod vocab;

pub use arch::{supported, Transform};
pub use checkpoint::{Checkpoint, Dtype, HfTensor};
pub use convert::{HfConversion, HfOptions, OutType, PlannedTensor};
