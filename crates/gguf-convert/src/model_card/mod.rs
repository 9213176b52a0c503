//! The `general.*` metadata that llama.cpp's `convert_hf_to_gguf.py DIR` writes when it is given
//! no `--metadata` override and no `--model-name`: gguf-py's `Metadata.load`, the fallbacks of
//! `ModelBase.prepare_metadata` and `Metadata.set_gguf_meta_model`, reproduced key for key, in
//! the same order and with the same value types.
//!
//! The sources, in the order gguf-py reads them:
//! - `README.md`: the model card's YAML front matter (the lines between a first line `---` and
//!   the next line `---`), loaded as PyYAML's `safe_load` loads it (YAML 1.1 typing: `yes` is a
//!   boolean, `012` an octal integer, `2024-01-01` a date, `1e5` a string, ...);
//! - `config.json`: its `_name_or_path`, when it holds at most one `/`;
//! - `generation_config.json`: the recommended sampler settings (`general.sampling.*`);
//! - the directory's name (its last component as Python's `pathlib` sees it);
//! - the total parameter count ([`ParamCounts`]), which decides whether a size in a name such
//!   as `4k` is the model's size or a context length, and gives `general.size_label` when no
//!   name holds one.
//!
//! Where gguf-py cannot go on, this module returns [`Error::Unsupported`] naming the file:
//! invalid YAML front matter (PyYAML raises and the converter stops), a `README.md` or
//! `config.json` that is not UTF-8, an invalid `config.json`, and a model-card value that
//! gguf-py's writer cannot write (`version: 1.0` is a float, and `GGUFWriter` fails on a float
//! where it expects a string). What gguf-py ignores is ignored: a missing file, front matter
//! that is not a mapping, an invalid `generation_config.json`.
//!
//! Known differences from gguf-py, all on input no real model card has:
//! - YAML is scanned by `saphyr-parser` (YAML 1.2 syntax), typed here as PyYAML types it. Flow
//!   collections (`[...]`, `{...}`) nest at most 255 deep in it and collections at most
//!   [`MAX_YAML_DEPTH`] deep here, where PyYAML's recursive composer stops near 490 levels.
//!   Duplicate anchor names, which PyYAML refuses, follow the latest definition. A recursive
//!   alias (`&a [*a]`) stands for a truthy, unhashable value that no key can be written from
//!   (PyYAML builds a recursive list, on which the writer fails the same way). `!!binary`
//!   values are checked loosely, and are never written (PyYAML's `bytes` would be).
//! - JSON is parsed by `serde_json`, which refuses `NaN`/`Infinity`, lone surrogate escapes and
//!   nesting past 128 levels, all of which Python's `json` accepts.
//! - Python's `str` methods are `gguf_tokenizer::pystr`'s (see its known differences); the
//!   Unicode details of `re.IGNORECASE`/`\w` (the `regex` crate's simple case folding and word
//!   characters) are approximated; for ASCII model ids the results are the same.
//! - The directory's name must be UTF-8 (Python would carry the bytes as surrogates and fail
//!   when it writes them).

mod heuristics;
mod model_id;
mod sampling;
#[cfg(test)]
mod tests;
mod yaml;

use crate::error::{Error, Result};
use crate::hf::json::Reads;
use crate::hf::Checkpoint;
use gguf_format::OwnedValue;
use gguf_tokenizer::pystr;
use serde_json::Value as Json;
use std::io::Read;
use std::path::Path;
use std::rc::Rc;

use heuristics::{apply_model_card, Meta};
use sampling::load_sampling;
use yaml::{load_yaml, Py};

/// fail where this module would not).
pub const MAX_MODEL_CARD_BYTES: u64 = 16 << 20;

/// The largest `config.json` or `generation_config.json` read; a larger one is an error.
pub const MAX_CONFIG_BYTES: u64 = 64 << 20;

/// The deepest nesting of YAML collections accepted in a model card's front matter. PyYAML's
/// composer recurses twice per level and stops at Python's recursion limit (1000 frames), at
/// about 490 levels less the converter's own frames.
pub const MAX_YAML_DEPTH: usize = 480;

/// The most key/value pairs that YAML merge keys (`<<: *anchor`) may copy in one front matter:
/// merges of merges of aliases grow exponentially (PyYAML copies them too, without a bound).
const MAX_MERGED_PAIRS: usize = 1 << 20;

/// The most values written in `general.tags` or `general.languages`, nested arrays included
/// (aliases can make a short front matter expand exponentially when written).
const MAX_ARRAY_VALUES: usize = 1 << 20;

/// Parameter counts as gguf-py's `GGUFWriter.get_total_parameter_count` returns them.
///
/// It walks every tensor the converter adds to the GGUF (after renaming, merging and skipping;
/// the output's tensors, not the checkpoint's), with its logical shape:
/// - `total` is the sum of every tensor's element count;
/// - a tensor whose name contains `_exps.` and that has at least 3 dimensions is an expert
///   tensor: its expert count is its outermost dimension (the second-outermost when the name
///   contains `.bias`), and `expert` adds its element count divided by that count (the size of
///   one expert);
/// - every other tensor (2-D `_exps.` biases included) adds its element count to `shared`;
/// - `expert_count` is the mean (rounded down) of the expert tensors' expert counts, 0 when
///   there is none.
///
/// LoRA adapters (`.lora_a`/`.lora_b` pairs, counted with a negated total) are not converted
/// by this crate and not modelled. [`count_params`] computes the counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParamCounts {
    /// Elements in all tensors.
    pub total: u64,
    /// Elements in tensors that are not per-expert.
    pub shared: u64,
    /// Elements of one expert, summed over the expert tensors.
    pub expert: u64,
    /// Experts per expert tensor (mean over the expert tensors).
    pub expert_count: u64,
}

/// Counts parameters as gguf-py's `GGUFWriter.get_total_parameter_count` does (see
/// [`ParamCounts`]), from the output tensors' GGUF names and shapes in GGUF order (innermost
/// dimension first, as a GGUF tensor info stores them).
///
/// ```
/// use gguf_convert::model_card::count_params;
/// let p = count_params([
///     ("token_embd.weight", &[64u64, 100][..]),
///     ("blk.0.ffn_up_exps.weight", &[64, 128, 8][..]),
/// ]);
/// assert_eq!((p.total, p.shared, p.expert, p.expert_count), (71936, 6400, 8192, 8));
/// ```
pub fn count_params<'a>(tensors: impl IntoIterator<Item = (&'a str, &'a [u64])>) -> ParamCounts {
    let mut p = ParamCounts::default();
    let (mut expert_sum, mut expert_tensors) = (0u64, 0u64);
    for (name, dims) in tensors {
        let size = dims.iter().fold(1u64, |a, &d| a.saturating_mul(d));
        if name.contains("_exps.") && dims.len() >= 3 {
            // numpy's shape[-3] (shape[-2] for a bias) is dims[2] (dims[1]) in GGUF order.
            let experts = if name.contains(".bias") {
                dims[1]
            } else {
                dims[2]
            };
            p.expert = p
                .expert
                .saturating_add(size.checked_div(experts).unwrap_or(0));
            expert_sum = expert_sum.saturating_add(experts);
            expert_tensors += 1;
        } else {
            p.shared = p.shared.saturating_add(size);
        }
        p.total = p.total.saturating_add(size);
    }
    p.expert_count = expert_sum.checked_div(expert_tensors).unwrap_or(0);
    p
}

/// gguf-py's `size_label(total, shared, expert, expert_count)`: `"23M"`, `"1.5B"`, `"8x7.2B"`.
pub fn size_label(params: &ParamCounts) -> String {
    if params.expert_count > 0 {
        let pretty = rounded_notation(params.shared.saturating_add(params.expert));
        format!("{}x{pretty}", params.expert_count)
    } else {
        rounded_notation(params.total)
    }
}

/// gguf-py's `model_weight_count_rounded_notation(n, min_digits=2)`.
fn rounded_notation(n: u64) -> String {
    let x = n as f64;
    let (scaled, suffix) = if x > 1e12 {
        (x * 1e-12, "T")
    } else if x > 1e9 {
        (x * 1e-9, "B")
    } else if x > 1e6 {
        (x * 1e-6, "M")
    } else {
        (x * 1e-3, "K")
    };
    // len(str(round(scaled)).lstrip('0')); round() is half-to-even, as is Rust's formatting.
    let int_digits = format!("{}", scaled.round_ties_even())
        .trim_start_matches('0')
        .len();
    let fix = 2usize.saturating_sub(int_digits);
    format!("{scaled:.fix$}{suffix}")
}

/// The `general.*` entries that `convert_hf_to_gguf.py` writes for the checkpoint in `dir`, in
/// writing order: `general.sampling.*`, `general.name`, `.author`, `.version`,
/// `.organization`, `.finetune`, `.basename`, `.description`, `.size_label`, `.license`,
/// `.license.name`, `.license.link`, `general.source.*`, `general.base_model.count` and
/// `general.base_model.{i}.*`, `general.dataset.count` and `general.dataset.{i}.*`,
/// `general.tags`, `general.languages` (each only when gguf-py writes it).
///
/// `general.architecture` and `general.type` are not included: the converter writes them
/// first. Strings are `string` values, the counts `u32`, the sampling settings `i32`/`f32` as
/// gguf-py writes them; tags and languages are arrays (of strings, normally).
///
/// `dir` is taken as given, not canonicalized: `convert_hf_to_gguf.py` names the model after
/// `Path(args.model).name` (for `.`, no name at all).
///
/// Errors (see the [module documentation](self)) name the file at fault.
pub fn general_metadata(dir: &Path, params: &ParamCounts) -> Result<Vec<(String, OwnedValue)>> {
    metadata(dir, params, &Reads::default(), None)
}

/// [`general_metadata`] of a checkpoint being converted: its `config.json` as the checkpoint
/// read it (not read again), the other files noted in the checkpoint's reads.
pub(crate) fn checkpoint_metadata(
    ckpt: &Checkpoint,
    params: &ParamCounts,
) -> Result<Vec<(String, OwnedValue)>> {
    metadata(ckpt.dir(), params, ckpt.reads(), Some(ckpt.config()))
}

/// [`general_metadata`] of `dir`, noting in `reads` the files it reads; `config` is
/// `config.json` when the caller has read it already.
fn metadata(
    dir: &Path,
    params: &ParamCounts,
    reads: &Reads,
    config: Option<&Json>,
) -> Result<Vec<(String, OwnedValue)>> {
    let readme = dir.join("README.md");
    let config_path = dir.join("config.json");
    let gen_config = dir.join("generation_config.json");
    let is_dir = dir.is_dir();

    let card = if is_dir {
        load_model_card(reads, &readme)?
    } else {
        Vec::new()
    };
    let loaded;
    let hf_params = match config {
        _ if !is_dir => None,
        Some(config) => Some(config),
        None => {
            loaded = load_config(reads, &config_path)?;
            loaded.as_ref()
        }
    };
    let sampling = if is_dir {
        load_sampling(reads, &gen_config)?
    } else {
        Vec::new()
    };

    let dir_name = python_path_name(dir).ok_or_else(|| {
        Error::Unsupported(format!(
            "{}: the directory's name is not UTF-8, which the GGUF's metadata needs",
            dir.display()
        ))
    })?;
    let total = i128::from(params.total);

    let mut m = Meta::default();
    apply_model_card(&mut m, &card, total);
    if let Some(Json::Object(hf)) = hf_params {
        match hf.get("_name_or_path") {
            None | Some(Json::Null) => {}
            Some(Json::String(id)) => {
                if id.matches('/').count() <= 1 {
                    m.fill_from_id(id, total);
                }
            }
            Some(other) => {
                return Err(file_error(
                    &config_path,
                    format!("_name_or_path is {other}, not a string (gguf-py fails on it too)"),
                ))
            }
        }
    }
    m.fill_from_id(&dir_name, total);

    // ModelBase.prepare_metadata's fallbacks.
    if m.name.is_none() {
        m.name = Some(Py::str(&dir_name));
    }
    if m.size_label.is_none() && params.total > 0 {
        m.size_label = Some(Py::str(&size_label(params)));
    }

    let mut out = sampling;
    m.write(&readme, &mut out)?;
    Ok(out)
}

fn file_error(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Unsupported(format!("{}: {what}", path.display()))
}

/// The bytes of `path` when it is a regular file (symlinks followed), as Python's
/// `Path.is_file()` sees it; `None` when it is not. The file is noted in `reads`.
fn read_bounded(reads: &Reads, path: &Path, max: u64) -> Result<Option<Vec<u8>>> {
    if !path.is_file() {
        return Ok(None);
    }
    reads.note(path);
    let file = gguf_fsutil::open_regular(path).map_err(|e| file_error(path, e))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| file_error(path, e))?;
    if bytes.len() as u64 > max {
        return Err(file_error(
            path,
            format!("larger than the {max} bytes read of such a file"),
        ));
    }
    Ok(Some(bytes))
}

fn utf8(path: &Path, bytes: Vec<u8>) -> Result<String> {
    String::from_utf8(bytes).map_err(|e| file_error(path, format!("not UTF-8 text: {e}")))
}

/// `Path(dir).name` of Python's `pathlib`: the last component, `.` components dropped, `""` for
/// `/` or `.`; `None` when it is not UTF-8.
fn python_path_name(dir: &Path) -> Option<String> {
    let last = dir
        .as_os_str()
        .as_encoded_bytes()
        .split(|&b| b == b'/')
        .rfind(|c| !c.is_empty() && *c != b".")
        .unwrap_or(b"");
    std::str::from_utf8(last).ok().map(String::from)
}

// ---------------------------------------------------------------------------------------------
// The model card: Metadata.load_model_card.

/// The front matter's mapping, or no pairs when gguf-py sees none.
fn load_model_card(reads: &Reads, path: &Path) -> Result<Vec<(Py, Py)>> {
    let Some(bytes) = read_bounded(reads, path, MAX_MODEL_CARD_BYTES)? else {
        return Ok(Vec::new());
    };
    let text = utf8(path, bytes)?;
    let Some(yaml) = front_matter(&text) else {
        return Ok(Vec::new());
    };
    match load_yaml(&yaml) {
        Ok(Some(Py::Dict(pairs))) => Ok(Rc::unwrap_or_clone(pairs)),
        // gguf-py logs "data is <type> instead of dict" and goes on without it.
        Ok(_) => Ok(Vec::new()),
        Err(e) => Err(file_error(
            path,
            format!(
                "invalid YAML front matter (PyYAML refuses it too; lines counted from the one after the first ---): {e}"
            ),
        )),
    }
}

/// The YAML text gguf-py hands to PyYAML, `None` when there is no front matter.
fn front_matter(text: &str) -> Option<String> {
    // Python's `str.splitlines()` (after the universal-newline reading of a text file, which
    // changes nothing for it).
    let lines = pystr::splitlines(text, false);
    if lines.first() != Some(&"---") {
        return None;
    }
    let body: Vec<&str> = lines[1..]
        .iter()
        .copied()
        .take_while(|l| *l != "---")
        .collect();
    let yaml = body.join("\n") + "\n";
    // gguf-py's fixes: the "Norway problem" of list items, and tabs.
    Some(yaml.replace("- no\n", "- \"no\"\n").replace('\t', "  "))
}

/// `Metadata.load_hf_parameters`: `json.load` of `config.json`, whose failures stop the
/// converter.
fn load_config(reads: &Reads, path: &Path) -> Result<Option<Json>> {
    let Some(bytes) = read_bounded(reads, path, MAX_CONFIG_BYTES)? else {
        return Ok(None);
    };
    let text = utf8(path, bytes)?;
    let json: Json =
        serde_json::from_str(&text).map_err(|e| crate::hf::json::json_error(path, &text, &e))?;
    match json {
        Json::Object(_) | Json::Null => Ok(Some(json)),
        other => Err(file_error(
            path,
            format!(
                "is {}, not a JSON object (gguf-py fails on it too)",
                json_type(&other)
            ),
        )),
    }
}

fn json_type(v: &Json) -> &'static str {
    match v {
        Json::Null => "null",
        Json::Bool(_) => "a boolean",
        Json::Number(_) => "a number",
        Json::String(_) => "a string",
        Json::Array(_) => "an array",
        Json::Object(_) => "an object",
    }
}
