//! The engine's load check, the one `gguf validate` runs, on a conversion's plan before
//! anything is written: a conversion whose file would not load is an error naming the key or
//! tensor (and where in the input it comes from), not a file that fails later.

use gguf_format::tensor_names;
use gguf_format::{GgufBuilder, GgufFile};
use gguf_model::{ModelError, PlanTensor};

use crate::error::{Error, Result};

/// Where a planned key or tensor comes from in the input: (its GGUF name, a phrase such as
/// `config.json's num_hidden_layers`).
pub(crate) type Origins = Vec<(String, String)>;

/// Runs [`gguf_model::check_plan`] on the metadata and tensors of `builder`. `data` gives the
/// bytes of the tensors the conversion computes (by index in the builder's tensors), whose
/// values are checked too; `what` says what is converted (the input's name, or empty when the
/// caller adds it). An architecture the engine does not run is not checked, as `gguf validate`
/// does not check it.
pub(crate) fn check_plan(
    what: &str,
    builder: &mut GgufBuilder<'_>,
    data: &[(usize, Vec<u8>)],
    origins: &Origins,
) -> Result<()> {
    // The metadata alone, as a GGUF the engine's readers take.
    let tensors = std::mem::take(builder.tensors_mut());
    let metadata = builder.write_without_data(Vec::new());
    *builder.tensors_mut() = tensors;
    let metadata = metadata?;
    let file = GgufFile::parse(&metadata)?;
    let planned: Vec<PlanTensor<'_>> = builder
        .tensors()
        .iter()
        .enumerate()
        .map(|(i, t)| PlanTensor {
            name: t.name(),
            ty: t.ggml_type(),
            shape: t.shape(),
            data: data
                .iter()
                .find(|(j, _)| *j == i)
                .map(|(_, d)| d.as_slice()),
        })
        .collect();
    let name = match what {
        "" => "the converted model would fail `gguf validate`".to_string(),
        _ => format!("{what}: the converted model would fail `gguf validate`"),
    };
    match gguf_model::check_plan(&file, &planned, &name) {
        Ok(_) | Err(ModelError::UnsupportedArchitecture { .. }) => Ok(()),
        Err(check) => {
            let origin = origin(&check, &planned, &file, origins);
            Err(Error::WouldNotLoad {
                check: Box::new(check),
                origin,
            })
        }
    }
}

/// ` (from ...)` for the keys and tensors `check` names that the input has an origin for;
/// for a block's missing tensor when the plan has no tensor of that block at all, how many
/// blocks it has against the block count.
fn origin(
    check: &ModelError,
    planned: &[PlanTensor<'_>],
    file: &GgufFile<'_>,
    origins: &Origins,
) -> String {
    let message = check.to_string();
    let mut notes: Vec<String> = Vec::new();
    if let ModelError::MissingTensor { name, .. } = check {
        if let Some(block) = block_of(name) {
            if !planned.iter().any(|t| block_of(t.name) == Some(block)) {
                let blocks = planned.iter().filter_map(|t| block_of(t.name)).max();
                let key = file
                    .arch_key("block_count")
                    .unwrap_or_else(|_| "block_count".into());
                let count = file
                    .get_usize(&key)
                    .map_or_else(|_| "?".to_string(), |n| n.to_string());
                let have = match blocks {
                    None => "no block".to_string(),
                    Some(b) => format!("tensors for {} blocks", b + 1),
                };
                notes.push(format!("{key} is {count} but the input has {have}"));
                if let Some((_, from)) = origins.iter().find(|(k, _)| *k == key) {
                    notes.push(format!("from {from}"));
                }
            }
        }
    }
    for (name, from) in origins {
        if mentions(&message, name) && !notes.iter().any(|n| n.ends_with(from.as_str())) {
            notes.push(format!("{name} from {from}"));
        }
    }
    match notes.is_empty() {
        true => String::new(),
        false => format!(" ({})", notes.join("; ")),
    }
}

/// The block of a tensor named `blk.N.*`.
fn block_of(name: &str) -> Option<usize> {
    name.strip_prefix(tensor_names::BLOCK_PREFIX)?
        .split('.')
        .next()?
        .parse()
        .ok()
}

/// Whether `message` names `name` as a whole (not as the start of a longer key, as
/// `head_count` of `head_count_kv`).
fn mentions(message: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    message.match_indices(name).any(|(i, _)| {
        let before = message[..i].chars().next_back();
        let mut after = message[i + name.len()..].chars();
        let continues = match after.next() {
            Some(c) if word(c) => true,
            Some('.') => after.next().is_some_and(word),
            _ => false,
        };
        !before.is_some_and(|c| word(c) || c == '.') && !continues
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_mentioned_only_whole() {
        let m =
            "x: llama.attention.head_count 4 is not a multiple of llama.attention.head_count_kv 3";
        assert!(mentions(m, "llama.attention.head_count"));
        assert!(mentions(m, "llama.attention.head_count_kv"));
        assert!(!mentions(
            "x: llama.attention.head_count_kv 3",
            "llama.attention.head_count"
        ));
        assert!(mentions(
            "tensor `blk.0.ffn_up.weight` has",
            "blk.0.ffn_up.weight"
        ));
        assert!(mentions("llama.block_count is 0.", "llama.block_count"));
        assert!(!mentions("xllama.block_count", "llama.block_count"));
        assert_eq!(block_of("blk.12.attn_q.weight"), Some(12));
        assert_eq!(block_of("token_embd.weight"), None);
    }
}
