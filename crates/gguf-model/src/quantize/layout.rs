//! The file llama-quantize writes: what its rules read of the model's metadata, its tensor
//! order, and its metadata (the input's keys in order, the quantization version and the file
//! type set last, the split keys removed, the importance matrix's keys after them).

use std::path::Path;

use gguf_format::{GgufBuilder, GgufFile, OwnedValue, Value};

use super::file_type::FileType;
use super::imatrix::Imatrix;
use super::rules::ModelFacts;
use crate::error::{ModelError, Result};

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

/// The value of a count that may be per layer (then the first layer's).
fn first_u32(v: Option<Value<'_>>) -> Option<u32> {
    match v? {
        Value::Array(a) => a.get(0)?.as_integer()?.try_into().ok(),
        v => v.as_integer()?.try_into().ok(),
    }
}

/// What the rules need of the model in `file` (named `name` in errors).
pub fn model_facts(file: &GgufFile<'_>, name: &str) -> Result<ModelFacts> {
    let arch = file
        .architecture()
        .map_err(|e| e.in_file(name))?
        .to_string();
    let key = |suffix: &str| file.value(&format!("{arch}.{suffix}"));
    let n_layer = first_u32(key("block_count")).ok_or_else(|| ModelError::Hyperparameters {
        file: name.to_string(),
        message: format!("{arch}.block_count is missing or not a count"),
    })?;
    let n_head = first_u32(key("attention.head_count")).unwrap_or(0);
    Ok(ModelFacts {
        n_layer,
        n_head,
        n_head_kv: first_u32(key("attention.head_count_kv")).unwrap_or(n_head),
        n_expert: first_u32(key("expert_count")).unwrap_or(0),
        arch,
    })
}

/// A builder holding llama-quantize's metadata for `file` quantized as `ft`, with `imatrix`
/// (read from `imatrix_path`) when one is used; no tensors yet.
pub(crate) fn metadata<'a>(
    file: &GgufFile<'a>,
    ft: FileType,
    imatrix: Option<(&Imatrix, &Path)>,
) -> GgufBuilder<'a> {
    let mut builder = GgufBuilder::from_file(file);
    builder.byte_order(gguf_format::ByteOrder::Little);
    builder.remove(QUANTIZATION_VERSION);
    builder.set(QUANTIZATION_VERSION, GGML_QNT_VERSION);
    builder.remove(FILE_TYPE);
    builder.set(FILE_TYPE, ft.id());
    for key in SPLIT_KEYS {
        builder.remove(key);
    }
    if let Some((m, path)) = imatrix {
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
    builder
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with(keys: &[(&str, u32)], arch: Option<&str>) -> Vec<u8> {
        let mut b = GgufBuilder::new();
        if let Some(arch) = arch {
            b.set("general.architecture", arch);
        }
        for &(k, v) in keys {
            b.set(k, v);
        }
        let mut out = Vec::new();
        b.write(&mut out).unwrap().finish().unwrap();
        out
    }

    #[test]
    fn facts_come_from_the_architecture_keys() {
        let bytes = file_with(
            &[
                ("llama.block_count", 3),
                ("llama.attention.head_count", 8),
                ("llama.attention.head_count_kv", 2),
            ],
            Some("llama"),
        );
        let facts = model_facts(&GgufFile::parse(&bytes).unwrap(), "m.gguf").unwrap();
        assert_eq!(
            (
                facts.arch.as_str(),
                facts.n_layer,
                facts.n_head,
                facts.n_head_kv,
                facts.n_expert
            ),
            ("llama", 3, 8, 2, 0)
        );
    }

    #[test]
    fn missing_keys_name_the_model() {
        let no_arch = file_with(&[("llama.block_count", 3)], None);
        let e = model_facts(&GgufFile::parse(&no_arch).unwrap(), "m.gguf").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("m.gguf") && text.contains("general.architecture"),
            "{text}"
        );

        let no_blocks = file_with(&[], Some("llama"));
        let e = model_facts(&GgufFile::parse(&no_blocks).unwrap(), "m.gguf").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("m.gguf") && text.contains("llama.block_count"),
            "{text}"
        );
    }
}
