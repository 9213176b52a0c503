//! `gguf validate`: whether a file (or split set) is sound, and whether llama.cpp can load
//! and this engine can run it.

use anyhow::{bail, Result};
use clap::Args;
use gguf_format::split::SplitSet;
use gguf_format::{Value, ValueType};

use crate::models;
use crate::output::outln;

/// `gguf validate`.
#[derive(Args)]
pub struct ValidateArgs {
    /// A .gguf path (any part of a split set) or a known model name.
    file: String,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Reports whether the file is sound, whether llama.cpp can load it and whether its
/// hyperparameters can run; fails on the last.
pub fn validate(a: ValidateArgs) -> Result<()> {
    let path = models::resolve(&a.file)?;
    let set = SplitSet::open(&path)?;
    let mut warnings = Vec::new();
    for part in set.parts() {
        let f = part.file();
        let name = part.path().display();
        if f.version() < 2 {
            warnings.push(format!("{name}: GGUF v1; llama.cpp reads only v2 and v3"));
        }
        if f.byte_order() == gguf_format::ByteOrder::Big {
            warnings.push(format!(
                "{name}: big-endian; llama.cpp on little-endian machines refuses it"
            ));
        }
        if !f.has_canonical_layout() {
            warnings.push(format!(
                "{name}: tensor offsets are not packed in order; llama.cpp's loader requires each tensor to start where the previous one ends (padded)"
            ));
        }
        for kv in f.metadata() {
            if let Value::Array(arr) = kv.value {
                if arr.element_type() == ValueType::Array {
                    warnings.push(format!(
                        "{name}: key '{}' holds nested arrays, which llama.cpp rejects",
                        kv.key
                    ));
                }
            }
        }
        for t in f.tensors() {
            if t.name.len() > gguf_format::MAX_TENSOR_NAME_BYTES {
                warnings.push(format!(
                    "{name}: tensor name '{}' is longer than ggml's 63 bytes",
                    t.name
                ));
            }
        }
    }
    // The container is sound; for an architecture the engine runs, its hyperparameters must
    // be usable too (a NaN epsilon or a zero RoPE base parses fine but computes nothing), and
    // its tensors there with the right shapes.
    let mut errors = Vec::new();
    match gguf_model::check(&set, &path.display().to_string()) {
        Ok(_) | Err(gguf_model::ModelError::UnsupportedArchitecture { .. }) => {}
        Err(e) => errors.push(e.to_string()),
    }
    if a.json {
        let out = serde_json::json!({
            "valid": errors.is_empty(),
            "parts": set.parts().len(),
            "tensors": set.tensor_count(),
            "llama_cpp_compatible": warnings.is_empty(),
            "errors": errors,
            "warnings": warnings,
        });
        outln!("{out}")?;
    } else {
        let verdict = if errors.is_empty() {
            "valid GGUF"
        } else {
            "a well-formed GGUF that cannot run"
        };
        outln!(
            "{}: {verdict} ({} part(s), {} tensors)",
            path.display(),
            set.parts().len(),
            set.tensor_count()
        )?;
        for e in &errors {
            outln!("error: {e}")?;
        }
        for w in &warnings {
            outln!("warning: {w}")?;
        }
    }
    if !errors.is_empty() {
        bail!("{}: {} error(s)", path.display(), errors.len());
    }
    Ok(())
}
