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
//! - Unicode details of Python's `str.title()` (titlecase of a few ligatures and Greek letters
//!   with a subscript iota) and of `re.IGNORECASE`/`\w` (the `regex` crate's simple case folding
//!   and word characters) are approximated; for ASCII model ids the results are the same.
//! - The directory's name must be UTF-8 (Python would carry the bytes as surrogates and fail
//!   when it writes them).

use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;
use std::rc::Rc;
use std::sync::LazyLock;

use crate::hf::json::Reads;
use gguf_format::{OwnedArray, OwnedValue, ValueType, MAX_ARRAY_DEPTH};
use regex::Regex;
use saphyr_parser::{Event, Parser, ScalarStyle};
use serde_json::Value as Json;
use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

use crate::error::{Error, Result};

/// The largest `README.md` read; a larger one is an error (its front matter is at its start,
/// but gguf-py decodes the whole file, so a file this module has not fully read could make it
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
    general_metadata_noting(dir, params, &Reads::default())
}

/// [`general_metadata`], noting in `reads` the files it reads.
pub(crate) fn general_metadata_noting(
    dir: &Path,
    params: &ParamCounts,
    reads: &Reads,
) -> Result<Vec<(String, OwnedValue)>> {
    let readme = dir.join("README.md");
    let config = dir.join("config.json");
    let gen_config = dir.join("generation_config.json");
    let is_dir = dir.is_dir();

    let card = if is_dir {
        load_model_card(reads, &readme)?
    } else {
        Vec::new()
    };
    let hf_params = if is_dir {
        load_config(reads, &config)?
    } else {
        None
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
    if let Some(Json::Object(hf)) = &hf_params {
        match hf.get("_name_or_path") {
            None | Some(Json::Null) => {}
            Some(Json::String(id)) => {
                if id.matches('/').count() <= 1 {
                    m.fill_from_id(id, total);
                }
            }
            Some(other) => {
                return Err(file_error(
                    &config,
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
    let file = gguf_format::open_regular(path).map_err(|e| file_error(path, e))?;
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
// Python values, as PyYAML builds them.

/// A value of the front matter, with what gguf-py's code can tell of it.
#[derive(Debug, Clone)]
enum Py {
    None,
    Bool(bool),
    Int(i64),
    /// An int beyond `i64` (never zero).
    BigInt,
    Float(f64),
    Str(Rc<str>),
    Bytes {
        empty: bool,
    },
    List(Rc<Vec<Py>>),
    /// Key/value pairs, merges flattened; a later pair wins over an earlier one with its key.
    Dict(Rc<Vec<(Py, Py)>>),
    Date,
    DateTime,
    Set {
        empty: bool,
    },
    /// An `!!omap`/`!!pairs` entry.
    Tuple,
    /// An alias to a collection that is still open (`&a [*a]`).
    Recursive,
    /// `<<` (a merge key), valid only as a mapping key.
    MergeKey,
    /// `=` (YAML 1.1's value key), valid only as a mapping key (where it is the string `=`).
    ValueKey,
}

impl Py {
    fn str(s: &str) -> Py {
        Py::Str(Rc::from(s))
    }

    /// Python's `bool(value)`.
    fn truthy(&self) -> bool {
        match self {
            Py::None => false,
            Py::Bool(b) => *b,
            Py::Int(n) => *n != 0,
            Py::Float(f) => *f != 0.0,
            Py::Str(s) => !s.is_empty(),
            Py::Bytes { empty } | Py::Set { empty } => !empty,
            Py::List(l) => !l.is_empty(),
            Py::Dict(d) => !d.is_empty(),
            Py::BigInt
            | Py::Date
            | Py::DateTime
            | Py::Tuple
            | Py::Recursive
            | Py::MergeKey
            | Py::ValueKey => true,
        }
    }

    /// Python's type name, for messages.
    fn type_name(&self) -> &'static str {
        match self {
            Py::None => "None",
            Py::Bool(_) => "a bool",
            Py::Int(_) | Py::BigInt => "an int",
            Py::Float(_) => "a float",
            Py::Str(_) => "a str",
            Py::Bytes { .. } => "bytes (!!binary)",
            Py::List(_) => "a list",
            Py::Dict(_) => "a dict",
            Py::Date => "a date",
            Py::DateTime => "a datetime",
            Py::Set { .. } => "a set",
            Py::Tuple => "a tuple",
            Py::Recursive => "a recursive alias",
            Py::MergeKey | Py::ValueKey => "a merge key",
        }
    }

    fn hashable(&self) -> bool {
        !matches!(
            self,
            Py::List(_) | Py::Dict(_) | Py::Set { .. } | Py::Recursive
        )
    }
}

/// `dict.get(key)` for a string key.
fn get<'a>(pairs: &'a [(Py, Py)], key: &str) -> Option<&'a Py> {
    pairs.iter().rev().find_map(|(k, v)| match k {
        Py::Str(s) if &**s == key => Some(v),
        _ => None,
    })
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
    let lines = gguf_tokenizer::chat::splitlines(text, false);
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

// ---------------------------------------------------------------------------------------------
// YAML as PyYAML's SafeLoader loads it.

/// PyYAML's Reader refuses these characters.
fn printable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

enum Frame {
    Seq {
        anchor: usize,
        tag: Option<String>,
        items: Vec<Py>,
    },
    Map {
        anchor: usize,
        tag: Option<String>,
        pairs: Vec<(Py, Py)>,
        key: Option<Py>,
    },
}

const CORE: &str = "tag:yaml.org,2002:";

/// `yaml.safe_load(text)`: `None` for an empty stream.
fn load_yaml(text: &str) -> std::result::Result<Option<Py>, String> {
    if let Some((i, c)) = text.char_indices().find(|&(_, c)| !printable(c)) {
        return Err(format!(
            "unacceptable character U+{:04X} at byte {i}: special characters are not allowed",
            c as u32
        ));
    }
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Py> = HashMap::new();
    let mut open: HashSet<usize> = HashSet::new();
    let mut root: Option<Py> = None;
    let mut documents = 0usize;
    let mut merged = 0usize;
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| e.to_string())?;
        let at = || format!("line {} column {}", span.start.line(), span.start.col() + 1);
        let node = match event {
            Event::DocumentStart(_) => {
                documents += 1;
                if documents > 1 {
                    return Err(format!(
                        "expected a single document in the stream, found another at {}",
                        at()
                    ));
                }
                continue;
            }
            Event::Alias(id) => {
                if open.contains(&id) {
                    Py::Recursive
                } else {
                    anchors
                        .get(&id)
                        .cloned()
                        .ok_or_else(|| format!("found undefined alias at {}", at()))?
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                let tag = tag.map(|t| format!("{}{}", t.handle, t.suffix));
                let v = construct_scalar(&value, style, tag.as_deref())
                    .map_err(|e| format!("{e} at {}", at()))?;
                if anchor > 0 {
                    anchors.insert(anchor, v.clone());
                }
                v
            }
            Event::SequenceStart(..) | Event::MappingStart(..) if stack.len() >= MAX_YAML_DEPTH => {
                return Err(format!(
                    "collections nested more than {MAX_YAML_DEPTH} deep at {}",
                    at()
                ));
            }
            Event::SequenceStart(anchor, tag) => {
                if anchor > 0 {
                    open.insert(anchor);
                }
                stack.push(Frame::Seq {
                    anchor,
                    tag: tag.map(|t| format!("{}{}", t.handle, t.suffix)),
                    items: Vec::new(),
                });
                continue;
            }
            Event::MappingStart(anchor, tag) => {
                if anchor > 0 {
                    open.insert(anchor);
                }
                stack.push(Frame::Map {
                    anchor,
                    tag: tag.map(|t| format!("{}{}", t.handle, t.suffix)),
                    pairs: Vec::new(),
                    key: None,
                });
                continue;
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let frame = stack.pop().ok_or("unbalanced collection end")?;
                let (anchor, v) = match frame {
                    Frame::Seq { anchor, tag, items } => {
                        (anchor, construct_seq(items, tag.as_deref()))
                    }
                    Frame::Map {
                        anchor, tag, pairs, ..
                    } => (anchor, construct_map(pairs, tag.as_deref(), &mut merged)),
                };
                let v = v.map_err(|e| format!("{e} at {}", at()))?;
                if anchor > 0 {
                    open.remove(&anchor);
                    anchors.insert(anchor, v.clone());
                }
                v
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => continue,
        };
        match stack.last_mut() {
            None => root = Some(value_node(node).map_err(|e| format!("{e} at {}", at()))?),
            Some(Frame::Seq { items, .. }) => {
                items.push(value_node(node).map_err(|e| format!("{e} at {}", at()))?)
            }
            Some(Frame::Map { pairs, key, .. }) => match key.take() {
                None => *key = Some(node),
                Some(k) => {
                    pairs.push((k, value_node(node).map_err(|e| format!("{e} at {}", at()))?))
                }
            },
        }
    }
    Ok(root)
}

/// A node outside a key position: the merge and value keys have no constructor there.
fn value_node(v: Py) -> std::result::Result<Py, String> {
    match v {
        Py::MergeKey => Err(format!(
            "could not determine a constructor for the tag '{CORE}merge'"
        )),
        Py::ValueKey => Err(format!(
            "could not determine a constructor for the tag '{CORE}value'"
        )),
        v => Ok(v),
    }
}

fn construct_seq(items: Vec<Py>, tag: Option<&str>) -> std::result::Result<Py, String> {
    match tag.map(|t| t.strip_prefix(CORE).unwrap_or(t)) {
        None | Some("!") | Some("seq") => Ok(Py::List(Rc::new(items))),
        Some("omap") | Some("pairs") => {
            for item in &items {
                match item {
                    Py::Dict(d) if d.len() == 1 => {}
                    _ => {
                        return Err(
                            "while constructing an ordered map, expected a single mapping item"
                                .into(),
                        )
                    }
                }
            }
            Ok(Py::List(Rc::new(vec![Py::Tuple; items.len()])))
        }
        Some(_) => Err(format!(
            "expected another node than a sequence for the tag '{}'",
            tag.unwrap_or_default()
        )),
    }
}

/// SafeConstructor's `flatten_mapping` and `construct_mapping`.
fn construct_map(
    pairs: Vec<(Py, Py)>,
    tag: Option<&str>,
    merged: &mut usize,
) -> std::result::Result<Py, String> {
    let mut merge: Vec<(Py, Py)> = Vec::new();
    let mut rest: Vec<(Py, Py)> = Vec::with_capacity(pairs.len());
    let mut count = |n: usize| -> std::result::Result<(), String> {
        *merged += n;
        if *merged > MAX_MERGED_PAIRS {
            Err(format!(
                "merge keys copy more than {MAX_MERGED_PAIRS} pairs"
            ))
        } else {
            Ok(())
        }
    };
    for (k, v) in pairs {
        match k {
            Py::MergeKey => match v {
                Py::Dict(d) => {
                    count(d.len())?;
                    merge.extend(d.iter().cloned());
                }
                Py::List(items) => {
                    let mut maps = Vec::with_capacity(items.len());
                    for item in items.iter() {
                        match item {
                            Py::Dict(d) => maps.push(d.clone()),
                            other => {
                                return Err(format!(
                                    "while constructing a mapping, expected a mapping for merging, but found {}",
                                    other.type_name()
                                ))
                            }
                        }
                    }
                    for d in maps.iter().rev() {
                        count(d.len())?;
                        merge.extend(d.iter().cloned());
                    }
                }
                other => {
                    return Err(format!(
                        "while constructing a mapping, expected a mapping or list of mappings for merging, but found {}",
                        other.type_name()
                    ))
                }
            },
            Py::ValueKey => rest.push((Py::str("="), v)),
            k => rest.push((k, v)),
        }
    }
    merge.extend(rest);
    if let Some((k, _)) = merge.iter().find(|(k, _)| !k.hashable()) {
        return Err(format!(
            "while constructing a mapping, found unhashable key ({})",
            k.type_name()
        ));
    }
    match tag.map(|t| t.strip_prefix(CORE).unwrap_or(t)) {
        None | Some("!") | Some("map") => Ok(Py::Dict(Rc::new(merge))),
        Some("set") => Ok(Py::Set {
            empty: merge.is_empty(),
        }),
        Some(_) => Err(format!(
            "expected another node than a mapping for the tag '{}'",
            tag.unwrap_or_default()
        )),
    }
}

static BOOL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
        .expect("valid regex")
});
static FLOAT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?",
        r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?",
        r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
        r"|[-+]?\.(?:inf|Inf|INF)",
        r"|\.(?:nan|NaN|NAN))$"
    ))
    .expect("valid regex")
});
static INT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[-+]?0b[0-1_]+",
        r"|[-+]?0[0-7_]+",
        r"|[-+]?(?:0|[1-9][0-9_]*)",
        r"|[-+]?0x[0-9a-fA-F_]+",
        r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"
    ))
    .expect("valid regex")
});
static NULL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:~|null|Null|NULL|)$").expect("valid regex"));
static TIMESTAMP_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]",
        r"|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?",
        r"(?:[Tt]|[ \t]+)[0-9][0-9]?",
        r":[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?",
        r"(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$"
    ))
    .expect("valid regex")
});
/// SafeConstructor's `timestamp_regexp`.
static TIMESTAMP_PARTS_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?P<year>[0-9][0-9][0-9][0-9])",
        r"-(?P<month>[0-9][0-9]?)",
        r"-(?P<day>[0-9][0-9]?)",
        r"(?:(?:[Tt]|[ \t]+)",
        r"(?P<hour>[0-9][0-9]?)",
        r":(?P<minute>[0-9][0-9])",
        r":(?P<second>[0-9][0-9])",
        r"(?:\.(?P<fraction>[0-9]*))?",
        r"(?:[ \t]*(?P<tz>Z|(?P<tz_sign>[-+])(?P<tz_hour>[0-9][0-9]?)",
        r"(?::(?P<tz_minute>[0-9][0-9]))?))?)?$"
    ))
    .expect("valid regex")
});

/// PyYAML's implicit resolver for a plain scalar (first characters, then regular expressions
/// in the order they were registered).
fn resolve(value: &str) -> &'static str {
    let Some(first) = value.chars().next() else {
        return "null";
    };
    let candidates: &[(&str, &LazyLock<Regex>)] = match first {
        'y' | 'Y' | 't' | 'T' | 'f' | 'F' | 'o' | 'O' => &[("bool", &BOOL_RE)],
        'n' | 'N' => &[("bool", &BOOL_RE), ("null", &NULL_RE)],
        '-' | '+' => &[("float", &FLOAT_RE), ("int", &INT_RE)],
        '0'..='9' => &[
            ("float", &FLOAT_RE),
            ("int", &INT_RE),
            ("timestamp", &TIMESTAMP_RE),
        ],
        '.' => &[("float", &FLOAT_RE)],
        '~' => &[("null", &NULL_RE)],
        '<' if value == "<<" => return "merge",
        '=' if value == "=" => return "value",
        _ => &[],
    };
    candidates
        .iter()
        .find(|(_, re)| re.is_match(value))
        .map_or("str", |(tag, _)| tag)
}

fn construct_scalar(
    value: &str,
    style: ScalarStyle,
    tag: Option<&str>,
) -> std::result::Result<Py, String> {
    // PyYAML resolves implicitly a plain scalar without a tag, and any scalar tagged `!`.
    let kind = match tag {
        None if style == ScalarStyle::Plain => resolve(value),
        Some("!") => resolve(value),
        None => "str",
        Some(t) => match t.strip_prefix(CORE) {
            Some(kind) => kind,
            None => {
                return Err(format!(
                    "could not determine a constructor for the tag '{t}'"
                ))
            }
        },
    };
    Ok(match kind {
        "null" => Py::None,
        "bool" => match value.to_lowercase().as_str() {
            "yes" | "true" | "on" => Py::Bool(true),
            "no" | "false" | "off" => Py::Bool(false),
            _ => return Err(format!("{value:?} is not a YAML 1.1 boolean")),
        },
        "int" => construct_int(value)?,
        "float" => Py::Float(construct_float(value)?),
        "str" => Py::str(value),
        "binary" => construct_binary(value)?,
        "timestamp" => construct_timestamp(value)?,
        "merge" => Py::MergeKey,
        "value" => Py::ValueKey,
        "seq" | "map" | "set" | "omap" | "pairs" => {
            return Err(format!(
                "expected a collection node for the tag '{CORE}{kind}', but found a scalar"
            ))
        }
        _ => {
            return Err(format!(
                "could not determine a constructor for the tag '{CORE}{kind}'"
            ))
        }
    })
}

/// Python's `str.isspace()` for one character.
fn py_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.isdecimal()` for one character.
fn is_decimal(c: char) -> bool {
    c.general_category() == GeneralCategory::DecimalNumber
}

/// The value of a decimal digit (category Nd), which Unicode encodes in runs of ten from zero.
fn decimal_value(c: char) -> Option<u32> {
    if !is_decimal(c) {
        return None;
    }
    let mut run = 0u32;
    let mut cp = c as u32;
    while cp > 0 {
        match char::from_u32(cp - 1) {
            Some(p) if is_decimal(p) => {
                run += 1;
                cp -= 1;
            }
            _ => break,
        }
    }
    Some(run % 10)
}

/// The ASCII form Python's `int()`/`float()` parse a string in: Unicode digits as ASCII digits,
/// surrounding whitespace stripped.
fn py_number_text(s: &str) -> String {
    s.chars()
        .map(|c| match decimal_value(c) {
            Some(d) if !c.is_ascii() => char::from_digit(d, 10).unwrap_or(c),
            _ => c,
        })
        .collect::<String>()
        .trim_matches(py_space)
        .to_string()
}

/// Python's `int(s, base)` (underscores already removed): `Err` for invalid text, `Ok(None)`
/// for a value beyond `i128`.
fn py_int(s: &str, base: u32) -> std::result::Result<Option<i128>, String> {
    let bad = || format!("invalid literal for int() with base {base}: {s:?}");
    let t = py_number_text(s);
    let (negative, digits) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t.as_str()),
    };
    let prefix = match base {
        2 => ["0b", "0B"],
        8 => ["0o", "0O"],
        16 => ["0x", "0X"],
        _ => ["", ""],
    };
    let digits = if base != 10 {
        prefix
            .iter()
            .find_map(|p| digits.strip_prefix(p))
            .unwrap_or(digits)
    } else {
        digits
    };
    if digits.is_empty() {
        return Err(bad());
    }
    let mut v: Option<i128> = Some(0);
    for c in digits.chars() {
        let d = c.to_digit(base).ok_or_else(bad)?;
        v = v
            .and_then(|v| v.checked_mul(i128::from(base)))
            .and_then(|v| v.checked_add(i128::from(d)));
    }
    Ok(v.map(|v| if negative { -v } else { v }))
}

/// Python's `float(s)`.
fn py_float(s: &str) -> Option<f64> {
    let t = py_number_text(s);
    // Rust's grammar is Python's, but for underscores between digits (removed before here).
    if t.contains('_') {
        return None;
    }
    t.parse::<f64>().ok()
}

/// SafeConstructor's `construct_yaml_int`.
fn construct_int(value: &str) -> std::result::Result<Py, String> {
    let value = value.replace('_', "");
    let (sign, v) = match value.chars().next() {
        None => return Err("an empty string is not an int".into()),
        Some('-') => (-1i128, &value[1..]),
        Some('+') => (1, &value[1..]),
        Some(_) => (1, value.as_str()),
    };
    let n = if v == "0" {
        Some(0)
    } else if let Some(b) = v.strip_prefix("0b") {
        py_int(b, 2)?
    } else if let Some(h) = v.strip_prefix("0x") {
        py_int(h, 16)?
    } else if v.starts_with('0') {
        py_int(v, 8)?
    } else if v.contains(':') {
        let mut total: Option<i128> = Some(0);
        let mut base: Option<i128> = Some(1);
        for part in v.split(':').rev() {
            let d = py_int(part, 10)?;
            total = match (total, d, base) {
                (Some(t), Some(d), Some(b)) => d.checked_mul(b).and_then(|x| x.checked_add(t)),
                _ => None,
            };
            base = base.and_then(|b| b.checked_mul(60));
        }
        total
    } else {
        py_int(v, 10)?
    };
    Ok(match n.and_then(|n| n.checked_mul(sign)) {
        Some(n) => match i64::try_from(n) {
            Ok(n) => Py::Int(n),
            Err(_) => Py::BigInt,
        },
        None => Py::BigInt,
    })
}

/// SafeConstructor's `construct_yaml_float`.
fn construct_float(value: &str) -> std::result::Result<f64, String> {
    let value = value.replace('_', "").to_lowercase();
    let (sign, v) = match value.chars().next() {
        None => return Err("an empty string is not a float".into()),
        Some('-') => (-1.0, &value[1..]),
        Some('+') => (1.0, &value[1..]),
        Some(_) => (1.0, value.as_str()),
    };
    let bad = || format!("could not convert string to float: {v:?}");
    if v == ".inf" {
        Ok(sign * f64::INFINITY)
    } else if v == ".nan" {
        // PyYAML's nan_value, -inf / inf: the x86 default NaN, sign bit set.
        Ok(f64::from_bits(0xfff8_0000_0000_0000))
    } else if v.contains(':') {
        let (mut total, mut base) = (0.0f64, 1.0f64);
        for part in v.split(':').rev() {
            total += py_float(part).ok_or_else(bad)? * base;
            base *= 60.0;
        }
        Ok(sign * total)
    } else {
        Ok(sign * py_float(v).ok_or_else(bad)?)
    }
}

/// SafeConstructor's `construct_yaml_binary`, checked loosely (ASCII, a base64 length).
fn construct_binary(value: &str) -> std::result::Result<Py, String> {
    if !value.is_ascii() {
        return Err("failed to convert base64 data into ascii".into());
    }
    let data = value
        .bytes()
        .filter(|b| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/')
        .count();
    if data % 4 == 1 {
        return Err("failed to decode base64 data".into());
    }
    Ok(Py::Bytes { empty: data < 2 })
}

/// SafeConstructor's `construct_yaml_timestamp`, with the checks of `datetime`.
fn construct_timestamp(value: &str) -> std::result::Result<Py, String> {
    let bad = || format!("{value:?} is not a valid timestamp");
    let c = TIMESTAMP_PARTS_RE.captures(value).ok_or_else(bad)?;
    let num = |name: &str| -> u32 {
        c.name(name)
            .and_then(|m| m.as_str().parse().ok())
            .unwrap_or(0)
    };
    let (year, month, day) = (num("year"), num("month"), num("day"));
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return Err(bad()),
    };
    if year == 0 || day == 0 || day > days {
        return Err(bad());
    }
    if c.name("hour").is_none() {
        return Ok(Py::Date);
    }
    if num("hour") > 23 || num("minute") > 59 || num("second") > 59 {
        return Err(bad());
    }
    if c.name("tz_sign").is_some() && num("tz_hour") * 60 + num("tz_minute") >= 24 * 60 {
        return Err(bad());
    }
    Ok(Py::DateTime)
}

// ---------------------------------------------------------------------------------------------
// config.json and generation_config.json.

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

/// The gguf-py writers of the sampling settings, in writing order.
#[derive(Clone, Copy)]
enum Sampling {
    Str,
    I32,
    F32,
}

const SAMPLING: [(&str, &[&str], Sampling); 12] = [
    ("general.sampling.sequence", &["sequence"], Sampling::Str),
    ("general.sampling.top_k", &["top_k"], Sampling::I32),
    ("general.sampling.top_p", &["top_p"], Sampling::F32),
    ("general.sampling.min_p", &["min_p"], Sampling::F32),
    (
        "general.sampling.xtc_probability",
        &["xtc_probability"],
        Sampling::F32,
    ),
    (
        "general.sampling.xtc_threshold",
        &["xtc_threshold"],
        Sampling::F32,
    ),
    ("general.sampling.temp", &["temperature"], Sampling::F32),
    (
        "general.sampling.penalty_last_n",
        &["penalty_last_n"],
        Sampling::I32,
    ),
    (
        "general.sampling.penalty_repeat",
        &["penalty_repeat", "repetition_penalty"],
        Sampling::F32,
    ),
    ("general.sampling.mirostat", &["mirostat"], Sampling::I32),
    (
        "general.sampling.mirostat_tau",
        &["mirostat_tau"],
        Sampling::F32,
    ),
    (
        "general.sampling.mirostat_eta",
        &["mirostat_eta"],
        Sampling::F32,
    ),
];

/// `Metadata.load_generation_config` and the `general.sampling.*` keys written from it. gguf-py
/// ignores an unreadable or invalid file, but not one that is not UTF-8, nor a value its writer
/// cannot pack.
fn load_sampling(reads: &Reads, path: &Path) -> Result<Vec<(String, OwnedValue)>> {
    let bytes = match read_bounded(reads, path, MAX_CONFIG_BYTES) {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(Vec::new()),
        // An OSError, which gguf-py catches; but not a file too large to read here.
        Err(e) if path.metadata().is_ok_and(|m| m.len() > MAX_CONFIG_BYTES) => return Err(e),
        Err(_) => return Ok(Vec::new()),
    };
    let text = utf8(path, bytes)?;
    let Ok(json) = serde_json::from_str::<Json>(&text) else {
        return Ok(Vec::new());
    };
    let config = match json {
        Json::Object(o) if !o.is_empty() => o,
        Json::Object(_) | Json::Null | Json::Bool(false) => return Ok(Vec::new()),
        Json::Array(a) if a.is_empty() => return Ok(Vec::new()),
        Json::String(s) if s.is_empty() => return Ok(Vec::new()),
        Json::Number(n) if n.as_f64() == Some(0.0) => return Ok(Vec::new()),
        other => {
            return Err(file_error(
                path,
                format!(
                    "is {}, not a JSON object (gguf-py fails on it too)",
                    json_type(&other)
                ),
            ))
        }
    };
    let mut out = Vec::new();
    for (key, names, kind) in SAMPLING {
        // dict.get(name, default): the first name present, null or not.
        let Some(v) = names.iter().find_map(|n| config.get(*n)) else {
            continue;
        };
        let cannot = |what: &str| {
            file_error(
                path,
                format!("{} is {v}: {what} (gguf-py fails on it too)", names[0]),
            )
        };
        let value = match (kind, v) {
            (_, Json::Null) => continue,
            (Sampling::Str, Json::String(s)) if s.is_empty() => continue,
            (Sampling::Str, Json::String(s)) => OwnedValue::from(s.as_str()),
            (Sampling::Str, v) if !json_truthy(v) => continue,
            (Sampling::Str, _) => return Err(cannot("not a string")),
            (Sampling::I32, Json::Bool(b)) => OwnedValue::I32(i32::from(*b)),
            (Sampling::I32, Json::Number(n)) => match n.as_i64().map(i32::try_from) {
                Some(Ok(i)) => OwnedValue::I32(i),
                Some(Err(_)) => return Err(cannot("out of the int32 range")),
                None => return Err(cannot("not an integer")),
            },
            (Sampling::F32, Json::Bool(b)) => OwnedValue::F32(f32::from(u8::from(*b))),
            (Sampling::F32, Json::Number(n)) => OwnedValue::F32(
                n.as_f64()
                    .and_then(py_f32)
                    .ok_or_else(|| cannot("too large for a float32"))?,
            ),
            (_, _) => return Err(cannot("not a number")),
        };
        out.push((key.to_string(), value));
    }
    Ok(out)
}

/// `struct.pack("<f", x)`: the nearest float32 (a NaN keeps its sign and its payload's top
/// bits, as the C conversion does); `None` for a finite value that overflows.
fn py_f32(x: f64) -> Option<f32> {
    if x.is_nan() {
        let bits = x.to_bits();
        let sign = ((bits >> 63) as u32) << 31;
        let payload = ((bits >> 29) as u32 & 0x007f_ffff) | 0x0040_0000;
        return Some(f32::from_bits(sign | 0x7f80_0000 | payload));
    }
    let f = x as f32;
    (x.is_infinite() || f.is_finite()).then_some(f)
}

fn json_truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64() != Some(0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}

// ---------------------------------------------------------------------------------------------
// Metadata.apply_metadata_heuristic.

/// The fields of gguf-py's `Metadata` that `Metadata.load` can set without an override.
/// Values from the model card keep their YAML type (gguf-py does not check it).
#[derive(Default)]
struct Meta {
    name: Option<Py>,
    author: Option<Py>,
    version: Option<Py>,
    organization: Option<Py>,
    finetune: Option<Py>,
    basename: Option<Py>,
    description: Option<Py>,
    size_label: Option<Py>,
    source_url: Option<Py>,
    source_doi: Option<Py>,
    source_uuid: Option<Py>,
    source_repo_url: Option<Py>,
    license: Option<Py>,
    license_name: Option<Py>,
    license_link: Option<Py>,
    base_models: Option<Vec<Vec<(Py, Py)>>>,
    datasets: Option<Vec<Vec<(Py, Py)>>>,
    tags: Option<Vec<Py>>,
    languages: Option<Vec<Py>>,
}

/// `use_model_card_metadata`: the card's value when the field is still None.
fn use_card(field: &mut Option<Py>, card: &[(Py, Py)], key: &str) {
    if field.is_none() {
        if let Some(v) = get(card, key) {
            *field = match v {
                Py::None => None,
                v => Some(v.clone()),
            };
        }
    }
}

/// `use_array_model_card_metadata`: appends a string, extends with a list.
fn use_card_array(field: &mut Option<Vec<Py>>, card: &[(Py, Py)], key: &str) {
    let value = match get(card, key) {
        None | Some(Py::None) => return,
        Some(v) => v,
    };
    let current = field.get_or_insert_with(Vec::new);
    match value {
        Py::Str(_) => current.push(value.clone()),
        Py::List(items) => current.extend(items.iter().cloned()),
        _ => {}
    }
}

/// The base model or dataset entries of `keys` (the first present), as gguf-py builds them.
fn sources(card: &[(Py, Py)], keys: [&str; 3], total: i128) -> Option<Vec<Vec<(Py, Py)>>> {
    let value = keys.iter().find_map(|k| get(card, k))?;
    let ids: Vec<Py> = match value {
        Py::Str(_) => vec![value.clone()],
        Py::List(items) => items.to_vec(),
        _ => Vec::new(),
    };
    static HF_URL: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r"^https?://huggingface.co/([^/]+/[^/]+)$").expect("valid regex")
    });
    let mut entries = Vec::with_capacity(ids.len());
    for id in ids {
        let mut entry: Vec<(Py, Py)> = Vec::new();
        let mut set = |k: &str, v: &str| entry.push((Py::str(k), Py::str(v)));
        match &id {
            Py::Str(s) => {
                let s: &str = s;
                if s.starts_with("http://") || s.starts_with("https://") || s.starts_with("ssh://")
                {
                    set("repo_url", s);
                    if s.contains("huggingface.co") {
                        if let Some(m) = HF_URL.captures(s) {
                            let c = model_id_components(&m[1], total);
                            set("name", &id_to_title(&c.full));
                            if let Some(org) = &c.org {
                                set("organization", &id_to_title(org));
                            }
                            if let Some(v) = &c.version {
                                set("version", v);
                            }
                        }
                    }
                } else {
                    let c = model_id_components(s, total);
                    set("name", &id_to_title(&c.full));
                    if let Some(org) = &c.org {
                        set("organization", &id_to_title(org));
                    }
                    if let Some(v) = &c.version {
                        set("version", v);
                    }
                    if let Some(org) = &c.org {
                        set(
                            "repo_url",
                            &format!("https://huggingface.co/{org}/{}", c.full),
                        );
                    }
                }
            }
            Py::Dict(d) => entry = d.to_vec(),
            // gguf-py logs "not in a known format" and appends an empty entry.
            _ => {}
        }
        entries.push(entry);
    }
    Some(entries)
}

fn apply_model_card(m: &mut Meta, card: &[(Py, Py)], total: i128) {
    // llama.cpp's own keys, then the same with `model_` before them, then others' habits.
    for prefix in ["", "model_"] {
        let key = |k: &str| format!("{prefix}{k}");
        use_card(&mut m.name, card, &key("name"));
        use_card(&mut m.author, card, &key("author"));
        use_card(&mut m.version, card, &key("version"));
        use_card(&mut m.organization, card, &key("organization"));
        use_card(&mut m.description, card, &key("description"));
        use_card(&mut m.finetune, card, &key("finetune"));
        use_card(&mut m.basename, card, &key("basename"));
        use_card(&mut m.size_label, card, &key("size_label"));
        use_card(&mut m.source_url, card, &key("url"));
        use_card(&mut m.source_doi, card, &key("doi"));
        use_card(&mut m.source_uuid, card, &key("uuid"));
        use_card(&mut m.source_repo_url, card, &key("repo_url"));
    }
    use_card(&mut m.name, card, "model_name");
    use_card(&mut m.author, card, "model_creator");
    use_card(&mut m.basename, card, "model_type");

    if let Some(entries) = sources(
        card,
        ["base_model", "base_models", "base_model_sources"],
        total,
    ) {
        m.base_models.get_or_insert_with(Vec::new).extend(entries);
    }
    if let Some(entries) = sources(card, ["datasets", "dataset", "dataset_sources"], total) {
        m.datasets.get_or_insert_with(Vec::new).extend(entries);
    }

    use_card(&mut m.license, card, "license");
    use_card(&mut m.license_name, card, "license_name");
    use_card(&mut m.license_link, card, "license_link");

    use_card_array(&mut m.tags, card, "tags");
    use_card_array(&mut m.tags, card, "pipeline_tag");
    use_card_array(&mut m.languages, card, "languages");
    use_card_array(&mut m.languages, card, "language");
}

impl Meta {
    /// The heuristics on a model id (`config.json`'s `_name_or_path`, the directory's name):
    /// each field that is still None.
    fn fill_from_id(&mut self, id: &str, total: i128) {
        let c = model_id_components(id, total);
        let fill = |field: &mut Option<Py>, v: Option<String>| {
            if field.is_none() {
                if let Some(v) = v {
                    *field = Some(Py::str(&v));
                }
            }
        };
        fill(&mut self.name, Some(id_to_title(&c.full)));
        fill(&mut self.organization, c.org.as_deref().map(id_to_title));
        fill(&mut self.basename, c.basename);
        fill(&mut self.finetune, c.finetune);
        fill(&mut self.version, c.version);
        fill(&mut self.size_label, c.size_label);
    }

    /// `Metadata.set_gguf_meta_model`, through `GGUFWriter`'s `add_string` (which skips a
    /// falsy value), `add_uint32` and `add_array` (which skips an empty list).
    fn write(&self, readme: &Path, out: &mut Vec<(String, OwnedValue)>) -> Result<()> {
        let mut put = |key: String, v: &Option<Py>| -> Result<()> {
            if let Some(v) = v {
                if let Some(s) = string_value(readme, &key, v)? {
                    out.push((key, OwnedValue::from(s)));
                }
            }
            Ok(())
        };
        put("general.name".into(), &self.name)?;
        put("general.author".into(), &self.author)?;
        put("general.version".into(), &self.version)?;
        put("general.organization".into(), &self.organization)?;
        put("general.finetune".into(), &self.finetune)?;
        put("general.basename".into(), &self.basename)?;
        put("general.description".into(), &self.description)?;
        put("general.size_label".into(), &self.size_label)?;
        let license = match &self.license {
            Some(Py::List(items)) => {
                let mut parts = Vec::with_capacity(items.len());
                for item in items.iter() {
                    match item {
                        Py::Str(s) => parts.push(s.to_string()),
                        other => {
                            return Err(file_error(
                                readme,
                                format!(
                                    "license lists {}, not a string (gguf-py fails on it too)",
                                    other.type_name()
                                ),
                            ))
                        }
                    }
                }
                Some(Py::str(&parts.join(",")))
            }
            other => other.clone(),
        };
        put("general.license".into(), &license)?;
        put("general.license.name".into(), &self.license_name)?;
        put("general.license.link".into(), &self.license_link)?;
        put("general.source.url".into(), &self.source_url)?;
        put("general.source.doi".into(), &self.source_doi)?;
        put("general.source.uuid".into(), &self.source_uuid)?;
        put("general.source.repo_url".into(), &self.source_repo_url)?;
        for (group, entries) in [
            ("base_model", &self.base_models),
            ("dataset", &self.datasets),
        ] {
            let Some(entries) = entries else { continue };
            let count = u32::try_from(entries.len())
                .map_err(|_| file_error(readme, format!("too many {group} entries")))?;
            out.push((format!("general.{group}.count"), OwnedValue::U32(count)));
            for (i, entry) in entries.iter().enumerate() {
                for field in [
                    "name",
                    "author",
                    "version",
                    "organization",
                    "description",
                    "url",
                    "doi",
                    "uuid",
                    "repo_url",
                ] {
                    if let Some(v) = get(entry, field) {
                        let key = format!("general.{group}.{i}.{field}");
                        if let Some(s) = string_value(readme, &key, v)? {
                            out.push((key, OwnedValue::from(s)));
                        }
                    }
                }
            }
        }
        for (key, items) in [
            ("general.tags", &self.tags),
            ("general.languages", &self.languages),
        ] {
            let Some(items) = items else { continue };
            if items.is_empty() {
                continue;
            }
            let mut budget = MAX_ARRAY_VALUES;
            let array = array_value(items, 1, &mut budget).map_err(|e| {
                file_error(
                    readme,
                    format!("{key} cannot be written: {e} (gguf-py fails on it too)"),
                )
            })?;
            out.push((key.to_string(), OwnedValue::Array(array)));
        }
        Ok(())
    }
}

/// `add_string(key, value)`: `None` for a falsy value (skipped); an error for a truthy value
/// that is not a string, on which gguf-py's writer fails.
fn string_value(readme: &Path, key: &str, v: &Py) -> Result<Option<String>> {
    match v {
        _ if !v.truthy() => Ok(None),
        Py::Str(s) => Ok(Some(s.to_string())),
        other => Err(file_error(
            readme,
            format!(
                "{key} would be {}, not a string: gguf-py cannot write it either (convert_hf_to_gguf.py fails)",
                other.type_name()
            ),
        )),
    }
}

/// The GGUF array gguf-py's `_pack_val` writes for a list: the element type of its first item
/// (`str` string, `float` f32, `bool` bool, `int` i32, `list` array), which every item must
/// share.
fn array_value(
    items: &[Py],
    depth: u32,
    budget: &mut usize,
) -> std::result::Result<OwnedArray, String> {
    if items.is_empty() {
        return Err("an empty nested list".into());
    }
    if depth > MAX_ARRAY_DEPTH {
        return Err(format!("lists nested more than {MAX_ARRAY_DEPTH} deep"));
    }
    *budget = budget
        .checked_sub(items.len())
        .ok_or_else(|| format!("more than {MAX_ARRAY_VALUES} values"))?;
    let elem = match &items[0] {
        Py::Str(_) => ValueType::String,
        Py::Float(_) => ValueType::F32,
        Py::Bool(_) => ValueType::Bool,
        Py::Int(_) | Py::BigInt => ValueType::I32,
        Py::List(_) => ValueType::Array,
        other => return Err(format!("an item is {}", other.type_name())),
    };
    let mut values = Vec::with_capacity(items.len());
    for item in items {
        let v = match (elem, item) {
            (ValueType::String, Py::Str(s)) => OwnedValue::from(&**s),
            (ValueType::F32, Py::Float(x)) => OwnedValue::F32(
                py_f32(*x).ok_or_else(|| format!("{x} is too large for a float32"))?,
            ),
            (ValueType::Bool, Py::Bool(b)) => OwnedValue::Bool(*b),
            (ValueType::I32, Py::Int(n)) => {
                OwnedValue::I32(i32::try_from(*n).map_err(|_| format!("{n} is not an int32"))?)
            }
            (ValueType::I32, Py::BigInt) => return Err("an int is not an int32".into()),
            (ValueType::Array, Py::List(l)) => {
                OwnedValue::Array(array_value(l, depth + 1, budget)?)
            }
            (_, other) => {
                return Err(format!(
                    "its items are not all of one type ({} among them)",
                    other.type_name()
                ))
            }
        };
        values.push(v);
    }
    OwnedArray::new(elem, values).map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// Metadata.get_model_id_components and Metadata.id_to_title.

/// What gguf-py reads from a model id such as `meta-llama/Llama-2-7b-chat-hf`.
#[derive(Debug, Default, PartialEq)]
struct Components {
    full: String,
    org: Option<String>,
    basename: Option<String>,
    finetune: Option<String>,
    version: Option<String>,
    size_label: Option<String>,
}

const VERSION: u8 = 1;
const TYPE: u8 = 2;
const SIZE: u8 = 4;
const FINETUNE: u8 = 8;
const BASENAME: u8 = 16;

static VERSION_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(?:(?:v|iter)?\d+(?:[.]\d+)*)$").expect("valid regex"));
static TYPE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(?:i?q\d(?:_\w)*|b?fp?(?:16|32))$").expect("valid regex"));
static SIZE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:(?:[A]|\d+[x])?\d+(?:[._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)$")
        .expect("valid regex")
});
static FINETUNE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(?:chat|instruct|vision|lora)$").expect("valid regex"));

/// `Metadata.get_model_id_components(model_id, total_params)` for a string id.
fn model_id_components(model_id: &str, total: i128) -> Components {
    if model_id.contains(' ') {
        // A sentence, not an id.
        return Components {
            full: model_id.to_string(),
            ..Components::default()
        };
    }
    let (mut org, full) = match model_id.split_once('/') {
        Some((org, full)) => (Some(org), full),
        None => (None, model_id),
    };
    if org.is_some_and(|o| o.starts_with('.')) {
        org = None;
    }
    let mut parts: Vec<String> = full
        .split('-')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    let mut types = vec![0u8; parts.len()];

    for i in 0..parts.len() {
        let part = parts[i].clone();
        if VERSION_RE.is_match(&part) {
            types[i] |= VERSION;
        } else if TYPE_RE.is_match(&part) {
            types[i] |= TYPE;
            parts[i] = part.to_uppercase();
        } else if i > 0 && SIZE_RE.is_match(&part) {
            let mut p: Vec<char> = part.replace('_', ".").chars().collect();
            let n = p.len();
            // bloom-7b1's notation: 7.1B.
            if n >= 2 && is_decimal(p[n - 1]) {
                let (a, b) = (p[n - 2], p[n - 1]);
                p.truncate(n - 2);
                p.extend(['.', b, a]);
            }
            let n = p.len();
            if n > 1 && is_decimal(p[n - 2]) && matches!(p[n - 1], 'k' | 'm' | 'b' | 't') {
                p[n - 1] = p[n - 1].to_ascii_uppercase();
            }
            let mut part: String = p.iter().collect();
            if total != 0 {
                let number: String = p[..n - 1].iter().collect();
                if let Some(x) = py_float(&number) {
                    let scale = match " KMBT".find(p[n - 1]) {
                        Some(k) => 1000f64.powi(k as i32),
                        None => 0.001,
                    };
                    let label = x * scale;
                    // Not the model's size when far from it: a context length (4k, 128k).
                    let context = (total < 0 && label < ((-total) / 8) as f64)
                        || (total > 0 && (label - total as f64).abs() > (7 * total / 8) as f64);
                    if context {
                        types[i] |= FINETUNE;
                        part = p[..n - 1].iter().collect::<String>()
                            + &p[n - 1].to_lowercase().to_string();
                    }
                }
            }
            if types[i] == 0 {
                types[i] |= SIZE;
            }
            parts[i] = part;
        } else if i > 0 && FINETUNE_RE.is_match(&part) {
            if total < 0 && part.to_lowercase() == "lora" {
                types[i] |= TYPE;
            } else {
                types[i] |= FINETUNE;
            }
        }
    }

    // Word sizes (small, xl) give way to a number-based one.
    let numeric_size = parts
        .iter()
        .zip(&types)
        .any(|(p, t)| t & SIZE != 0 && p.chars().any(is_decimal));
    if numeric_size {
        for (p, t) in parts.iter().zip(types.iter_mut()) {
            if *t & SIZE != 0 && p.chars().all(is_alpha) {
                *t &= !SIZE;
            }
        }
    }

    let mut at_start = true;
    for (p, t) in parts.iter().zip(types.iter_mut()) {
        let first_alpha = p.chars().next().is_some_and(is_alpha);
        if at_start && ((*t == 0 && first_alpha) || *t & VERSION != 0) {
            *t |= BASENAME;
        } else {
            at_start = false;
            if *t == 0 {
                *t |= FINETUNE;
            }
        }
    }
    for t in types.iter_mut().rev() {
        if *t & BASENAME != 0 && *t != BASENAME {
            *t &= !BASENAME;
        } else {
            break;
        }
    }

    let join = |want: u8, unless: u8| {
        let picked: Vec<&str> = parts
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t & want != 0 && **t & unless == 0)
            .map(|(p, _)| p.as_str())
            .collect();
        (!picked.is_empty()).then(|| picked.join("-"))
    };
    let mut basename = join(BASENAME, 0);
    let mut sizes: Vec<&str> = Vec::new();
    for (p, t) in parts.iter().zip(&types) {
        if t & SIZE != 0 && !sizes.contains(&p.as_str()) {
            sizes.push(p);
        }
    }
    let size_label = (!sizes.is_empty()).then(|| sizes.join("-"));
    let finetune = join(FINETUNE, 0);
    let version = join(VERSION, BASENAME);
    if size_label.is_none() && finetune.is_none() && version.is_none() {
        // Too ambiguous.
        basename = None;
    }
    Components {
        full: full.to_string(),
        org: org.map(String::from),
        basename,
        finetune,
        version,
        size_label,
    }
}

/// Python's `str.isalpha()` for one character.
fn is_alpha(c: char) -> bool {
    c.general_category_group() == GeneralCategoryGroup::Letter
}

fn is_cased(c: char) -> bool {
    c.is_lowercase() || c.is_uppercase() || c.general_category() == GeneralCategory::TitlecaseLetter
}

/// Python's `str.islower()`.
fn py_islower(w: &str) -> bool {
    let mut cased = false;
    for c in w.chars() {
        if c.is_uppercase() || c.general_category() == GeneralCategory::TitlecaseLetter {
            return false;
        }
        cased |= c.is_lowercase();
    }
    cased
}

/// Python's `str.title()`.
fn py_title(w: &str) -> String {
    let mut out = String::with_capacity(w.len());
    let mut previous_cased = false;
    for c in w.chars() {
        if previous_cased {
            out.extend(c.to_lowercase());
        } else {
            match c {
                '\u{1c4}'..='\u{1c6}' => out.push('\u{1c5}'),
                '\u{1c7}'..='\u{1c9}' => out.push('\u{1c8}'),
                '\u{1ca}'..='\u{1cc}' => out.push('\u{1cb}'),
                '\u{1f1}'..='\u{1f3}' => out.push('\u{1f2}'),
                _ => {
                    let mut upper = c.to_uppercase();
                    if let Some(first) = upper.next() {
                        out.push(first);
                        for rest in upper {
                            out.extend(rest.to_lowercase());
                        }
                    }
                }
            }
        }
        previous_cased = is_cased(c);
    }
    out
}

/// `Metadata.id_to_title`: words title-cased unless they hold capitals or are versions or
/// numbers; `-` is a space.
fn id_to_title(s: &str) -> String {
    static KEEP: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(?:v\d+(?:\.\d+)*|\d.*)$").expect("valid regex"));
    s.replace('-', " ")
        .split(py_space)
        .filter(|w| !w.is_empty())
        .map(|w| {
            if py_islower(w) && !KEEP.is_match(w) {
                py_title(w)
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> OwnedValue {
        OwnedValue::from(v)
    }

    fn strings(items: &[&str]) -> OwnedValue {
        OwnedValue::Array(
            OwnedArray::new(ValueType::String, items.iter().map(|v| s(v)).collect()).unwrap(),
        )
    }

    fn kv(entries: &[(&str, OwnedValue)]) -> Vec<(String, OwnedValue)> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    /// A checkpoint directory `parent/name` with these files.
    fn checkpoint(parent: &Path, name: &str, files: &[(&str, &str)]) -> std::path::PathBuf {
        let dir = parent.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for (file, text) in files {
            std::fs::write(dir.join(file), text).unwrap();
        }
        dir
    }

    fn params(total: u64) -> ParamCounts {
        ParamCounts {
            total,
            shared: total,
            expert: 0,
            expert_count: 0,
        }
    }

    #[test]
    fn size_labels_as_gguf_py() {
        // gguf.size_label(t, t, 0, 0) and gguf.size_label(t, s, e, n), gguf-py of llama.cpp
        // vendored in llama_cpp_python 0.3.36.
        for (total, want) in [
            (22_565_376, "23M"),
            (134_515_008, "135M"),
            (494_032_768, "494M"),
            (1_235_814_400, "1.2B"),
            (7_241_732_096, "7.2B"),
            (3_821_079_552, "3.8B"),
            (400, "0.40K"),
            (999_999, "1000K"),
            (1_000_001, "1.0M"),
            (1_250_000, "1.2M"),
            (2_500_000_000_000, "2.5T"),
        ] {
            assert_eq!(size_label(&params(total)), want, "{total}");
        }
        let moe = ParamCounts {
            total: 46_702_792_704,
            shared: 1_604_390_912,
            expert: 5_637_144_576,
            expert_count: 8,
        };
        assert_eq!(size_label(&moe), "8x7.2B");
    }

    #[test]
    fn params_are_counted_as_gguf_py() {
        let p = count_params([
            ("token_embd.weight", &[384u64, 30522][..]),
            ("blk.0.ffn_gate_exps.weight", &[64, 128, 8][..]),
            ("blk.0.ffn_down_exps.bias", &[64, 8, 1][..]),
            ("blk.0.ffn_up_exps.bias", &[64, 8][..]),
            ("output_norm.weight", &[384][..]),
        ]);
        assert_eq!(p.total, 384 * 30522 + 64 * 128 * 8 + 64 * 8 + 64 * 8 + 384);
        assert_eq!(p.shared, 384 * 30522 + 64 * 8 + 384);
        assert_eq!(p.expert, 64 * 128 + 64);
        assert_eq!(p.expert_count, 8);
    }

    #[test]
    fn model_ids_split_as_gguf_py() {
        // (model_id, total_params) -> gguf.Metadata.get_model_id_components(model_id, total_params)
        // and gguf.Metadata.id_to_title(s), printed by
        // PYTHONPATH=/work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py python3 -c '...'
        let c = |full: &str,
                 org: Option<&str>,
                 base: Option<&str>,
                 ft: Option<&str>,
                 ver: Option<&str>,
                 size: Option<&str>| Components {
            full: full.into(),
            org: org.map(Into::into),
            basename: base.map(Into::into),
            finetune: ft.map(Into::into),
            version: ver.map(Into::into),
            size_label: size.map(Into::into),
        };
        let cases = [
            (
                "nreimers/MiniLM-L6-H384-uncased",
                22565376,
                c(
                    "MiniLM-L6-H384-uncased",
                    Some("nreimers"),
                    None,
                    None,
                    None,
                    None,
                ),
            ),
            (
                "all-MiniLM-L6-v2",
                22565376,
                c(
                    "all-MiniLM-L6-v2",
                    None,
                    Some("all-MiniLM-L6"),
                    None,
                    Some("v2"),
                    None,
                ),
            ),
            (
                "microsoft/Phi-3-mini-4k-instruct",
                3821079552,
                c(
                    "Phi-3-mini-4k-instruct",
                    Some("microsoft"),
                    Some("Phi-3"),
                    Some("4k-instruct"),
                    None,
                    Some("mini"),
                ),
            ),
            (
                "microsoft/Phi-3-mini-4k-instruct",
                0,
                c(
                    "Phi-3-mini-4k-instruct",
                    Some("microsoft"),
                    Some("Phi-3-mini"),
                    Some("instruct"),
                    None,
                    Some("4K"),
                ),
            ),
            (
                "bigscience/bloom-7b1",
                7069016064,
                c(
                    "bloom-7b1",
                    Some("bigscience"),
                    Some("bloom"),
                    None,
                    None,
                    Some("7.1B"),
                ),
            ),
            (
                "mistralai/Mixtral-8x7B-Instruct-v0.1",
                46702792704,
                c(
                    "Mixtral-8x7B-Instruct-v0.1",
                    Some("mistralai"),
                    Some("Mixtral"),
                    Some("Instruct"),
                    Some("v0.1"),
                    Some("8x7B"),
                ),
            ),
            (
                "TheBloke/Llama-2-7B-Chat-GGUF-Q4_K_M",
                6738415616,
                c(
                    "Llama-2-7B-Chat-GGUF-Q4_K_M",
                    Some("TheBloke"),
                    Some("Llama-2"),
                    Some("Chat-GGUF"),
                    None,
                    Some("7B"),
                ),
            ),
            (
                "../models/x",
                0,
                c("models/x", None, None, None, None, None),
            ),
            (
                "Qwen/Qwen3-30B-A3B",
                30532122624,
                c(
                    "Qwen3-30B-A3B",
                    Some("Qwen"),
                    Some("Qwen3"),
                    None,
                    None,
                    Some("30B-A3B"),
                ),
            ),
            (
                "a model name",
                0,
                c("a model name", None, None, None, None, None),
            ),
            (
                "HuggingFaceTB/SmolLM2-135M-Instruct",
                134515008,
                c(
                    "SmolLM2-135M-Instruct",
                    Some("HuggingFaceTB"),
                    Some("SmolLM2"),
                    Some("Instruct"),
                    None,
                    Some("135M"),
                ),
            ),
            (
                "google/gemma-3-270m-it",
                268098176,
                c(
                    "gemma-3-270m-it",
                    Some("google"),
                    Some("gemma-3"),
                    Some("it"),
                    None,
                    Some("270M"),
                ),
            ),
            (
                "mistralai/Mistral-7B-Instruct-v0.3",
                7248023552,
                c(
                    "Mistral-7B-Instruct-v0.3",
                    Some("mistralai"),
                    Some("Mistral"),
                    Some("Instruct"),
                    Some("v0.3"),
                    Some("7B"),
                ),
            ),
            (
                "Qwen/Qwen2.5-0.5B-Instruct",
                494032768,
                c(
                    "Qwen2.5-0.5B-Instruct",
                    Some("Qwen"),
                    Some("Qwen2.5"),
                    Some("Instruct"),
                    None,
                    Some("0.5B"),
                ),
            ),
            (
                "meta-llama/Llama-3.2-1B-Instruct-bf16-q8_0",
                1235814400,
                c(
                    "Llama-3.2-1B-Instruct-bf16-q8_0",
                    Some("meta-llama"),
                    Some("Llama-3.2"),
                    Some("Instruct"),
                    None,
                    Some("1B"),
                ),
            ),
            ("/lead", 0, c("lead", Some(""), None, None, None, None)),
            ("org/", 0, c("", Some("org"), None, None, None, None)),
            (
                "x-small-7b-xl",
                7000000000,
                c(
                    "x-small-7b-xl",
                    None,
                    Some("x-small"),
                    Some("xl"),
                    None,
                    Some("7B"),
                ),
            ),
            (
                "deepseek-ai/DeepSeek-V2-Lite-Chat",
                15706484224,
                c(
                    "DeepSeek-V2-Lite-Chat",
                    Some("deepseek-ai"),
                    Some("DeepSeek-V2-Lite"),
                    Some("Chat"),
                    None,
                    None,
                ),
            ),
            (
                "BAAI/bge-small-en-v1.5",
                33360000,
                c(
                    "bge-small-en-v1.5",
                    Some("BAAI"),
                    Some("bge"),
                    Some("en"),
                    Some("v1.5"),
                    Some("small"),
                ),
            ),
            (
                "intfloat/e5-large-v2",
                335000000,
                c(
                    "e5-large-v2",
                    Some("intfloat"),
                    Some("e5"),
                    None,
                    Some("v2"),
                    Some("large"),
                ),
            ),
            (
                "Llama-2-70b-32k-lora",
                70000000000,
                c(
                    "Llama-2-70b-32k-lora",
                    None,
                    Some("Llama-2"),
                    Some("32k-lora"),
                    None,
                    Some("70B"),
                ),
            ),
            (
                "tiiuae/falcon-180B-chat",
                180000000000,
                c(
                    "falcon-180B-chat",
                    Some("tiiuae"),
                    Some("falcon"),
                    Some("chat"),
                    None,
                    Some("180B"),
                ),
            ),
            (
                "EleutherAI/pythia-1b-deduped-v0-iter143000",
                1000000000,
                c(
                    "pythia-1b-deduped-v0-iter143000",
                    Some("EleutherAI"),
                    Some("pythia"),
                    Some("deduped"),
                    Some("v0-iter143000"),
                    Some("1B"),
                ),
            ),
            ("x--y-", 0, c("x--y-", None, None, None, None, None)),
            (
                "Model-8x22b_1-1_5m",
                0,
                c(
                    "Model-8x22b_1-1_5m",
                    None,
                    Some("Model"),
                    Some("8x22b_1"),
                    None,
                    Some("1.5M"),
                ),
            ),
        ];
        for (id, total, want) in cases {
            assert_eq!(model_id_components(id, total), want, "{id} {total}");
        }
        assert_eq!(id_to_title("stackexchange_xml"), "Stackexchange_Xml");
        assert_eq!(id_to_title("flickr30k-captions"), "Flickr30K Captions");
        assert_eq!(
            id_to_title("Qwen2.5-0.5B-Instruct"),
            "Qwen2.5 0.5B Instruct"
        );
        assert_eq!(id_to_title("gemma-3-270m-it"), "Gemma 3 270m It");
        assert_eq!(id_to_title("v0.3 x7b"), "v0.3 X7B");
        assert_eq!(id_to_title("straße ǆx ﬁx"), "Straße ǅx Fix");
        assert_eq!(id_to_title("a\x1cb"), "A B");
        assert_eq!(id_to_title("٣abc"), "٣abc");
    }

    #[test]
    fn front_matter_is_found_as_gguf_py_finds_it() {
        assert_eq!(front_matter(""), None);
        assert_eq!(front_matter("# Title\n---\na: 1\n---\n"), None);
        assert_eq!(front_matter("\u{feff}---\na: 1\n---\n"), None);
        assert_eq!(
            front_matter("---\r\na: 1\r\n---\r\nbody").as_deref(),
            Some("a: 1\n")
        );
        assert_eq!(
            front_matter("---\na: 1\n--- \nb: 2").as_deref(),
            Some("a: 1\n--- \nb: 2\n")
        );
        assert_eq!(
            front_matter("---\nlanguage:\n- en\n- no\n---").as_deref(),
            Some("language:\n- en\n- \"no\"\n")
        );
        assert_eq!(
            front_matter("---\na:\n\t- b\n").as_deref(),
            Some("a:\n  - b\n")
        );
        assert_eq!(front_matter("---").as_deref(), Some("\n"));
    }

    /// What `yaml.safe_load` gives, in the terms gguf-py looks at.
    fn show(v: &Py) -> String {
        match v {
            Py::None => "None".into(),
            Py::Bool(b) => if *b { "True" } else { "False" }.into(),
            Py::Int(n) => n.to_string(),
            Py::BigInt => "bigint".into(),
            Py::Float(f) => format!("{f:?}"),
            Py::Str(s) => format!("{s:?}"),
            Py::Bytes { .. } => "bytes".into(),
            Py::List(l) => format!("[{}]", l.iter().map(show).collect::<Vec<_>>().join(", ")),
            Py::Dict(d) => {
                let mut seen: Vec<String> = Vec::new();
                let mut out: Vec<String> = Vec::new();
                // Python dict order: first insertion, last value.
                for (k, _) in d.iter() {
                    let ks = show(k);
                    if !seen.contains(&ks) {
                        let v = d.iter().rev().find(|(k2, _)| show(k2) == ks).unwrap();
                        out.push(format!("{ks}: {}", show(&v.1)));
                        seen.push(ks);
                    }
                }
                format!("{{{}}}", out.join(", "))
            }
            Py::Date => "date".into(),
            Py::DateTime => "datetime".into(),
            Py::Set { .. } => "set".into(),
            Py::Tuple => "tuple".into(),
            Py::Recursive => "[...]".into(),
            Py::MergeKey | Py::ValueKey => "marker".into(),
        }
    }

    #[test]
    fn yaml_is_typed_as_pyyaml_types_it() {
        // python3 -c 'import yaml; print(yaml.safe_load(TEXT))' (PyYAML 6.0.3).
        let cases = [
            ("license: apache-2.0", r#"{"license": "apache-2.0"}"#),
            (
                "a: [yes, No, on, y, off]",
                r#"{"a": [True, False, True, "y", False]}"#,
            ),
            ("a: 012", r#"{"a": 10}"#),
            ("a: 09", r#"{"a": "09"}"#),
            ("a: 0x1F", r#"{"a": 31}"#),
            ("a: 0b101", r#"{"a": 5}"#),
            ("a: 1:30", r#"{"a": 90}"#),
            ("a: 1_000", r#"{"a": 1000}"#),
            ("a: 1e5", r#"{"a": "1e5"}"#),
            ("a: 1.5e+3", r#"{"a": 1500.0}"#),
            ("a: 1.", r#"{"a": 1.0}"#),
            ("a: .5", r#"{"a": 0.5}"#),
            ("a: -.inf", r#"{"a": -inf}"#),
            ("a: 1:30.5", r#"{"a": 90.5}"#),
            ("a: ~", r#"{"a": None}"#),
            ("a:", r#"{"a": None}"#),
            ("a: Null", r#"{"a": None}"#),
            ("a: 'yes'", r#"{"a": "yes"}"#),
            ("a: ! 5", r#"{"a": 5}"#),
            ("a: ! \"5\"", r#"{"a": 5}"#),
            ("a: !!str 5", r#"{"a": "5"}"#),
            ("a: !!float 1e5", r#"{"a": 100000.0}"#),
            ("a: !!null foo", r#"{"a": None}"#),
            ("a: 2024-01-31", r#"{"a": date}"#),
            ("a: 2024-01-31 10:00:00 +01:00", r#"{"a": datetime}"#),
            ("a: !!timestamp 2024-1-1", r#"{"a": date}"#),
            ("a: 99999999999999999999999", r#"{"a": bigint}"#),
            ("a: |\n  x\n  y\n", r#"{"a": "x\ny\n"}"#),
            ("a: >-\n  x\n  y\n", r#"{"a": "x y"}"#),
            ("=: 1", r#"{"=": 1}"#),
            ("{<<: [{a: 1}, {a: 2, b: 3}], b: 4}", r#"{"a": 1, "b": 4}"#),
            (
                "x: &x {a: 1, b: 2}\ny:\n  <<: *x\n  b: 3",
                r#"{"x": {"a": 1, "b": 2}, "y": {"a": 1, "b": 3}}"#,
            ),
            ("a: &a [*a]", r#"{"a": [[...]]}"#),
            ("a: 1\na: 2", r#"{"a": 2}"#),
            ("a: !!set {x, y}", r#"{"a": set}"#),
            ("a: !!omap [{x: 1}]", r#"{"a": [tuple]}"#),
            ("just text", r#""just text""#),
            ("# only a comment", "None"),
        ];
        for (text, want) in cases {
            let got = load_yaml(&format!("{text}\n")).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(got.as_ref().map_or("None".into(), show), want, "{text}");
        }
        // yaml.safe_load raises on these.
        for text in [
            "a: <<",
            "a: =",
            "a: !!int \" 0x1F \"",
            "a: !!bool Y",
            "a: 2024-13-01",
            "a: 0x_",
            "a: !!str [1]",
            "[a]: 1",
            "? {a: 1}\n: 2",
            "a: !foo bar",
            "a: *nothing",
            "a: 1\n---\nb: 2",
            "a: \u{1}",
            "a: [1",
            "a: b: c",
            "{<<: 1}",
        ] {
            assert!(
                load_yaml(&format!("{text}\n")).is_err(),
                "{text:?} was accepted"
            );
        }
    }

    fn f32_bits(bits: u32) -> OwnedValue {
        OwnedValue::F32(f32::from_bits(bits))
    }

    fn array(elem: ValueType, items: &[OwnedValue]) -> OwnedValue {
        OwnedValue::Array(OwnedArray::new(elem, items.to_vec()).unwrap())
    }

    struct Case {
        test: &'static str,
        dir: &'static str,
        files: &'static [(&'static str, &'static str)],
        params: ParamCounts,
        want: Vec<(&'static str, OwnedValue)>,
    }

    /// Checkpoint directories whose expected keys are gguf-py's, produced by running
    /// `gen_cases.py` (kept out of the tree; it writes each case's files to a fresh directory
    /// and prints its table entry) with
    /// `PYTHONPATH=/work/ref/llama_cpp_python-0.3.36/vendor/llama.cpp/gguf-py python3 gen_cases.py`.
    /// For each directory it runs what `prepare_metadata` runs:
    /// ```text
    /// m = gguf.Metadata.load(None, Path(d), None, total)
    /// if m.name is None: m.name = Path(d).name
    /// if m.size_label is None and total > 0: m.size_label = gguf.size_label(total, shared, expert, count)
    /// w = gguf.GGUFWriter(path=None, arch="llama"); m.set_gguf_meta_model(w)
    /// [(k, v.type, v.value) for k, v in w.kv_data[0].items() if k != "general.architecture"]
    /// ```
    /// (gguf-py of llama.cpp as vendored by llama_cpp_python 0.3.36, PyYAML 6.0.3); f32 values
    /// are the bits of Python's `struct.pack("<f", v)`.
    fn python_cases() -> Vec<Case> {
        vec![
            // Generated by gen_cases.py (see the test's doc comment).
            Case {
                test: "smollm2",
                dir: "SmolLM2-135M-Instruct",
                files: &[
                    ("README.md", "---\nlibrary_name: transformers\nlicense: apache-2.0\nlanguage:\n- en\npipeline_tag: text-generation\ntags:\n- safetensors\n- onnx\n- transformers.js\nbase_model:\n- HuggingFaceTB/SmolLM2-135M\n---\n\n# SmolLM2\n"),
                    ("config.json", "{\"_name_or_path\": \"HuggingFaceTB/SmolLM2-135M-Instruct\"}"),
                    ("generation_config.json", "{\"bos_token_id\": 1, \"eos_token_id\": 2, \"transformers_version\": \"4.42.3\"}"),
                ],
                params: ParamCounts { total: 134515008, shared: 134515008, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.name", s("SmolLM2 135M Instruct")),
                    ("general.organization", s("HuggingFaceTB")),
                    ("general.finetune", s("Instruct")),
                    ("general.basename", s("SmolLM2")),
                    ("general.size_label", s("135M")),
                    ("general.license", s("apache-2.0")),
                    ("general.base_model.count", OwnedValue::U32(1)),
                    ("general.base_model.0.name", s("SmolLM2 135M")),
                    ("general.base_model.0.organization", s("HuggingFaceTB")),
                    ("general.base_model.0.repo_url", s("https://huggingface.co/HuggingFaceTB/SmolLM2-135M")),
                    ("general.tags", strings(&["safetensors", "onnx", "transformers.js", "text-generation"])),
                    ("general.languages", strings(&["en"])),
                ],
            },
            Case {
                test: "gemma3",
                dir: "gemma-3-270m-it",
                files: &[
                    ("README.md", "---\nlicense: gemma\npipeline_tag: text-generation\nextra_gated_heading: Access Gemma on Hugging Face\nextra_gated_prompt: >-\n  To access Gemma on Hugging Face, you're required to review and agree to\n  Google's usage license.\nextra_gated_button_content: Acknowledge license\nbase_model: google/gemma-3-270m\ntags:\n- gemma3\n- gemma\n- google\n---\n"),
                    ("config.json", "{\"_name_or_path\": \"google/gemma-3-270m-it\"}"),
                    ("generation_config.json", "{\"cache_implementation\": \"hybrid\", \"do_sample\": true, \"top_k\": 64, \"top_p\": 0.95}"),
                ],
                params: ParamCounts { total: 268098176, shared: 268098176, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.sampling.top_k", OwnedValue::I32(64)),
                    ("general.sampling.top_p", f32_bits(0x3f733333 /* 0.95 */)),
                    ("general.name", s("Gemma 3 270m It")),
                    ("general.organization", s("Google")),
                    ("general.finetune", s("it")),
                    ("general.basename", s("gemma-3")),
                    ("general.size_label", s("270M")),
                    ("general.license", s("gemma")),
                    ("general.base_model.count", OwnedValue::U32(1)),
                    ("general.base_model.0.name", s("Gemma 3 270m")),
                    ("general.base_model.0.organization", s("Google")),
                    ("general.base_model.0.repo_url", s("https://huggingface.co/google/gemma-3-270m")),
                    ("general.tags", strings(&["gemma3", "gemma", "google", "text-generation"])),
                ],
            },
            Case {
                test: "mistral",
                dir: "Mistral-7B-Instruct-v0.3",
                files: &[
                    ("README.md", "---\nlicense: apache-2.0\nbase_model: mistralai/Mistral-7B-v0.3\nextra_gated_description: >-\n  If you want to learn more about how we process your personal data, please read\n  our <a href=\"https://mistral.ai/terms/\">Privacy Policy</a>.\n---\n\n# Model Card for Mistral-7B-Instruct-v0.3\n"),
                    ("config.json", "{\"_name_or_path\": \"mistralai/Mistral-7B-Instruct-v0.3\"}"),
                ],
                params: ParamCounts { total: 7248023552, shared: 7248023552, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.name", s("Mistral 7B Instruct v0.3")),
                    ("general.version", s("v0.3")),
                    ("general.organization", s("Mistralai")),
                    ("general.finetune", s("Instruct")),
                    ("general.basename", s("Mistral")),
                    ("general.size_label", s("7B")),
                    ("general.license", s("apache-2.0")),
                    ("general.base_model.count", OwnedValue::U32(1)),
                    ("general.base_model.0.name", s("Mistral 7B v0.3")),
                    ("general.base_model.0.version", s("v0.3")),
                    ("general.base_model.0.organization", s("Mistralai")),
                    ("general.base_model.0.repo_url", s("https://huggingface.co/mistralai/Mistral-7B-v0.3")),
                ],
            },
            Case {
                test: "qwen25",
                dir: "Qwen2.5-0.5B-Instruct",
                files: &[
                    ("README.md", "---\nlicense: apache-2.0\nlicense_link: https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/LICENSE\nlanguage:\n- en\npipeline_tag: text-generation\nbase_model: Qwen/Qwen2.5-0.5B\ntags:\n- chat\nlibrary_name: transformers\n---\n\n# Qwen2.5-0.5B-Instruct\n"),
                    ("config.json", "{\"architectures\": [\"Qwen2ForCausalLM\"]}"),
                    ("generation_config.json", "{\n  \"bos_token_id\": 151643,\n  \"pad_token_id\": 151643,\n  \"do_sample\": true,\n  \"eos_token_id\": [151645, 151643],\n  \"repetition_penalty\": 1.1,\n  \"temperature\": 0.7,\n  \"top_p\": 0.8,\n  \"top_k\": 20,\n  \"transformers_version\": \"4.37.0\"\n}\n"),
                ],
                params: ParamCounts { total: 494032768, shared: 494032768, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.sampling.top_k", OwnedValue::I32(20)),
                    ("general.sampling.top_p", f32_bits(0x3f4ccccd /* 0.8 */)),
                    ("general.sampling.temp", f32_bits(0x3f333333 /* 0.7 */)),
                    ("general.sampling.penalty_repeat", f32_bits(0x3f8ccccd /* 1.1 */)),
                    ("general.name", s("Qwen2.5 0.5B Instruct")),
                    ("general.finetune", s("Instruct")),
                    ("general.basename", s("Qwen2.5")),
                    ("general.size_label", s("0.5B")),
                    ("general.license", s("apache-2.0")),
                    ("general.license.link", s("https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/LICENSE")),
                    ("general.base_model.count", OwnedValue::U32(1)),
                    ("general.base_model.0.name", s("Qwen2.5 0.5B")),
                    ("general.base_model.0.organization", s("Qwen")),
                    ("general.base_model.0.repo_url", s("https://huggingface.co/Qwen/Qwen2.5-0.5B")),
                    ("general.tags", strings(&["chat", "text-generation"])),
                    ("general.languages", strings(&["en"])),
                ],
            },
            Case {
                test: "phi3",
                dir: "Phi-3-mini-4k-instruct",
                files: &[
                    ("README.md", "---\nlicense: mit\nlicense_link: https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/resolve/main/LICENSE\nlanguage:\n- en\n- fr\npipeline_tag: text-generation\ntags:\n- nlp\n- code\ninference:\n  parameters:\n    temperature: 0.0\nwidget:\n- messages:\n  - role: user\n    content: Can you provide ways to eat combinations of bananas and dragonfruits?\n---\n"),
                    ("config.json", "{\"_name_or_path\": \"Phi-3-mini-4k-instruct\"}"),
                ],
                params: ParamCounts { total: 3821079552, shared: 3821079552, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.name", s("Phi 3 Mini 4k Instruct")),
                    ("general.finetune", s("4k-instruct")),
                    ("general.basename", s("Phi-3")),
                    ("general.size_label", s("mini")),
                    ("general.license", s("mit")),
                    ("general.license.link", s("https://huggingface.co/microsoft/Phi-3-mini-4k-instruct/resolve/main/LICENSE")),
                    ("general.tags", strings(&["nlp", "code", "text-generation"])),
                    ("general.languages", strings(&["en", "fr"])),
                ],
            },
            Case {
                test: "merge",
                dir: "merged",
                files: &[
                    ("README.md", "---\nmodel_name: Custom Merge\nmodel_creator: someone\nversion: v2\ndescription: A merge of two models.\nurl: https://example.com/paper\ndoi: 10.1234/abcd\nuuid: 0f8fad5b-d9cb-469f-a165-70867728950e\nrepo_url: https://github.com/example/merge\nlicense:\n- mit\n- apache-2.0\nbase_model:\n- mistralai/Mistral-7B-v0.1\n- https://huggingface.co/teknium/OpenHermes-2.5-Mistral-7B\n- https://example.com/some-model\n- name: Custom Base\n  author: me\n  version: \"3\"\n  repo_url: https://example.com/base\n- 42\ndatasets:\n- https://huggingface.co/datasets/HuggingFaceH4/ultrachat_200k\n- HuggingFaceH4/ultrafeedback_binarized\n- {name: Private Set, organization: \"\", description: internal}\ntags: merge\npipeline_tag: text-generation\nlanguage:\n- en\n- no\n- nb\n---\n"),
                    ("config.json", "{\"_name_or_path\": \"/home/me/models/merged\"}"),
                    ("generation_config.json", "{\"sequence\": \"edkypmxt\", \"top_k\": 40, \"top_p\": 0.95, \"min_p\": 0.05, \"xtc_probability\": 0.0, \"xtc_threshold\": 0.1, \"temperature\": 1, \"penalty_last_n\": 64, \"penalty_repeat\": 1.0, \"repetition_penalty\": 1.3, \"mirostat\": true, \"mirostat_tau\": 5.0, \"mirostat_eta\": null}"),
                ],
                params: ParamCounts { total: 7241732096, shared: 7241732096, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.sampling.sequence", s("edkypmxt")),
                    ("general.sampling.top_k", OwnedValue::I32(40)),
                    ("general.sampling.top_p", f32_bits(0x3f733333 /* 0.95 */)),
                    ("general.sampling.min_p", f32_bits(0x3d4ccccd /* 0.05 */)),
                    ("general.sampling.xtc_probability", f32_bits(0x00000000 /* 0.0 */)),
                    ("general.sampling.xtc_threshold", f32_bits(0x3dcccccd /* 0.1 */)),
                    ("general.sampling.temp", f32_bits(0x3f800000 /* 1 */)),
                    ("general.sampling.penalty_last_n", OwnedValue::I32(64)),
                    ("general.sampling.penalty_repeat", f32_bits(0x3f800000 /* 1.0 */)),
                    ("general.sampling.mirostat", OwnedValue::I32(1)),
                    ("general.sampling.mirostat_tau", f32_bits(0x40a00000 /* 5.0 */)),
                    ("general.name", s("Custom Merge")),
                    ("general.author", s("someone")),
                    ("general.version", s("v2")),
                    ("general.description", s("A merge of two models.")),
                    ("general.size_label", s("7.2B")),
                    ("general.license", s("mit,apache-2.0")),
                    ("general.source.url", s("https://example.com/paper")),
                    ("general.source.doi", s("10.1234/abcd")),
                    ("general.source.uuid", s("0f8fad5b-d9cb-469f-a165-70867728950e")),
                    ("general.source.repo_url", s("https://github.com/example/merge")),
                    ("general.base_model.count", OwnedValue::U32(5)),
                    ("general.base_model.0.name", s("Mistral 7B v0.1")),
                    ("general.base_model.0.version", s("v0.1")),
                    ("general.base_model.0.organization", s("Mistralai")),
                    ("general.base_model.0.repo_url", s("https://huggingface.co/mistralai/Mistral-7B-v0.1")),
                    ("general.base_model.1.name", s("OpenHermes 2.5 Mistral 7B")),
                    ("general.base_model.1.organization", s("Teknium")),
                    ("general.base_model.1.repo_url", s("https://huggingface.co/teknium/OpenHermes-2.5-Mistral-7B")),
                    ("general.base_model.2.repo_url", s("https://example.com/some-model")),
                    ("general.base_model.3.name", s("Custom Base")),
                    ("general.base_model.3.author", s("me")),
                    ("general.base_model.3.version", s("3")),
                    ("general.base_model.3.repo_url", s("https://example.com/base")),
                    ("general.dataset.count", OwnedValue::U32(3)),
                    ("general.dataset.0.repo_url", s("https://huggingface.co/datasets/HuggingFaceH4/ultrachat_200k")),
                    ("general.dataset.1.name", s("Ultrafeedback_Binarized")),
                    ("general.dataset.1.organization", s("HuggingFaceH4")),
                    ("general.dataset.1.repo_url", s("https://huggingface.co/HuggingFaceH4/ultrafeedback_binarized")),
                    ("general.dataset.2.name", s("Private Set")),
                    ("general.dataset.2.description", s("internal")),
                    ("general.tags", strings(&["merge", "text-generation"])),
                    ("general.languages", strings(&["en", "no", "nb"])),
                ],
            },
            Case {
                test: "types",
                dir: "tiny-model-v1.5",
                files: &[
                    ("README.md", "---\nname: \"\"\nbase_model:\ndatasets: []\ntags: [1, -2, 0x10]\nlanguage: [true, off]\nlicense: ~\nsize_label: 4x2B\n---\n"),
                    ("config.json", "{\"_name_or_path\": null}"),
                    ("generation_config.json", "{not json"),
                ],
                params: ParamCounts { total: 0, shared: 0, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.version", s("v1.5")),
                    ("general.basename", s("tiny-model")),
                    ("general.size_label", s("4x2B")),
                    ("general.base_model.count", OwnedValue::U32(0)),
                    ("general.dataset.count", OwnedValue::U32(0)),
                    ("general.tags", array(ValueType::I32, &[OwnedValue::I32(1), OwnedValue::I32(-2), OwnedValue::I32(16)])),
                    ("general.languages", array(ValueType::Bool, &[OwnedValue::Bool(true), OwnedValue::Bool(false)])),
                ],
            },
            Case {
                test: "dir_only",
                dir: "my-model-7b-v1.5-q4_0",
                files: &[
                ],
                params: ParamCounts { total: 6738415616, shared: 6738415616, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.name", s("My Model 7b v1.5 Q4_0")),
                    ("general.version", s("v1.5")),
                    ("general.basename", s("my-model")),
                    ("general.size_label", s("7B")),
                ],
            },
            Case {
                test: "dir_moe",
                dir: "mixtral",
                files: &[
                    ("README.md", "no front matter\n---\nlicense: mit\n---\n"),
                    ("config.json", "{\"_name_or_path\": \"./mixtral\"}"),
                ],
                params: ParamCounts { total: 46702792704, shared: 1604390912, expert: 5637144576, expert_count: 8 },
                want: vec![
                    ("general.name", s("Mixtral")),
                    ("general.size_label", s("8x7.2B")),
                ],
            },
            Case {
                test: "not_a_mapping",
                dir: "Some Model Name",
                files: &[
                    ("README.md", "---\njust a sentence\n---\n"),
                    ("config.json", "null"),
                ],
                params: ParamCounts { total: 1000, shared: 1000, expert: 0, expert_count: 0 },
                want: vec![
                    ("general.name", s("Some Model Name")),
                    ("general.size_label", s("1.0K")),
                ],
            },
        ]
    }

    #[test]
    fn checkpoints_match_gguf_py() {
        let parent = tempfile::tempdir().unwrap();
        for case in python_cases() {
            let dir = checkpoint(&parent.path().join(case.test), case.dir, case.files);
            let got = general_metadata(&dir, &case.params)
                .unwrap_or_else(|e| panic!("{}: {e}", case.test));
            let want = kv(&case.want);
            assert_eq!(got, want, "{}", case.test);
        }
    }

    /// Files that make gguf-py fail (`None`) or that it ignores (`Some`: the keys that remain),
    /// from `hostile.py` run as `gen_cases.py` is: the same `ref.run`, total 1000, in a
    /// directory named `model`.
    #[test]
    fn hostile_files_fail_or_are_ignored_as_in_gguf_py() {
        let bomb = {
            let mut y = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
            for i in 0..8u8 {
                let (this, prev) = ((b'b' + i) as char, (b'a' + i) as char);
                let refs = vec![format!("*{prev}"); 10].join(", ");
                y += &format!("{this}: &{this} [{refs}]\n");
            }
            y
        };
        let plain = || {
            Some(vec![
                ("general.name", s("Model")),
                ("general.size_label", s("1.0K")),
            ])
        };
        let with_mit = || {
            let mut v = plain().unwrap();
            v.push(("general.license", s("mit")));
            Some(v)
        };
        type Expected = Option<Vec<(&'static str, OwnedValue)>>;
        let cases: Vec<(&str, &str, Vec<u8>, Expected)> = vec![
            (
                "invalid_yaml",
                "README.md",
                b"---\nlicense: [mit\n---\n".to_vec(),
                None,
            ),
            (
                "not_utf8",
                "README.md",
                b"---\nlicense: mit\n---\n\xff\xfe".to_vec(),
                None,
            ),
            (
                "float_version",
                "README.md",
                b"---\nversion: 1.5\n---\n".to_vec(),
                None,
            ),
            (
                "list_name",
                "README.md",
                b"---\nname: [a]\n---\n".to_vec(),
                None,
            ),
            (
                "int_base_version",
                "README.md",
                b"---\nbase_model:\n- name: x\n  version: 3\n---\n".to_vec(),
                None,
            ),
            (
                "mixed_tags",
                "README.md",
                b"---\ntags: [a, 1]\n---\n".to_vec(),
                None,
            ),
            (
                "license_list_int",
                "README.md",
                b"---\nlicense: [mit, 1]\n---\n".to_vec(),
                None,
            ),
            (
                "top_k_float",
                "generation_config.json",
                br#"{"top_k": 40.5}"#.to_vec(),
                None,
            ),
            (
                "bad_config",
                "config.json",
                br#"{"_name_or_path": "#.to_vec(),
                None,
            ),
            (
                "int_name_or_path",
                "config.json",
                br#"{"_name_or_path": 5}"#.to_vec(),
                None,
            ),
            (
                "nul",
                "README.md",
                b"---\nlicense: mit\x00\n---\n".to_vec(),
                None,
            ),
            (
                "deep",
                "README.md",
                format!("---\nx: {}{}\n---\n", "[".repeat(1000), "]".repeat(1000)).into_bytes(),
                None,
            ),
            (
                "deep_ok",
                "README.md",
                format!(
                    "---\nx: {}{}\nlicense: mit\n---\n",
                    "[".repeat(200),
                    "]".repeat(200)
                )
                .into_bytes(),
                with_mit(),
            ),
            (
                "bomb_unused",
                "README.md",
                format!("---\n{bomb}license: mit\n---\n").into_bytes(),
                with_mit(),
            ),
            (
                "two_docs",
                "README.md",
                b"---\nlicense: mit\n...\n--- \nb: 1\n---\n".to_vec(),
                None,
            ),
            ("empty", "README.md", Vec::new(), plain()),
            ("dashes_only", "README.md", b"---".to_vec(), plain()),
            (
                "zero_name",
                "README.md",
                b"---\nname: 0\nversion: false\nauthor: []\n---\n".to_vec(),
                Some(vec![("general.size_label", s("1.0K"))]),
            ),
            ("gen_list", "generation_config.json", b"[1]".to_vec(), None),
            (
                "gen_bom",
                "generation_config.json",
                "\u{feff}{\"top_k\": 5}".as_bytes().to_vec(),
                plain(),
            ),
            (
                "gen_not_utf8",
                "generation_config.json",
                b"{\"top_k\": 5, \"x\": \"\xff\"}".to_vec(),
                None,
            ),
            (
                "top_k_big",
                "generation_config.json",
                br#"{"top_k": 3000000000}"#.to_vec(),
                None,
            ),
            (
                "temp_huge",
                "generation_config.json",
                br#"{"temperature": 1e39}"#.to_vec(),
                None,
            ),
            (
                "date_tag",
                "README.md",
                b"---\ntags: [2024-01-01]\n---\n".to_vec(),
                None,
            ),
        ];
        let parent = tempfile::tempdir().unwrap();
        for (name, file, bytes, want) in cases {
            let dir = parent.path().join(name).join("model");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join(file), &bytes).unwrap();
            let got = general_metadata(&dir, &params(1000));
            match want {
                None => {
                    let e = got.expect_err(name).to_string();
                    assert!(e.contains(file), "{name}: the error names no file: {e}");
                }
                Some(want) => assert_eq!(got.unwrap(), kv(&want), "{name}"),
            }
        }
    }

    /// Beyond what gguf-py is tested on: bounds of this module, no panic, no stack overflow.
    #[test]
    fn hostile_model_cards_are_bounded() {
        let parent = tempfile::tempdir().unwrap();
        let run = |name: &str, readme: &[u8]| {
            let dir = parent.path().join(name).join("model");
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("README.md"), readme).unwrap();
            general_metadata(&dir, &params(1000))
        };
        // Block mappings nested 3000 deep (PyYAML's composer hits Python's recursion limit):
        // refused at MAX_YAML_DEPTH.
        let mut deep = String::from("---\n");
        for i in 0..3000 {
            deep += &" ".repeat(i);
            deep += "k:\n";
        }
        let e = run("deep_block", deep.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("nested more than"), "{e}");
        // Larger than MAX_MODEL_CARD_BYTES.
        let mut huge = b"---\nlicense: mit\n---\n".to_vec();
        huge.resize(MAX_MODEL_CARD_BYTES as usize + 1, b'x');
        let e = run("huge", &huge).unwrap_err().to_string();
        assert!(e.contains("README.md"), "{e}");
        // An alias bomb written as tags: 10^9 strings, refused by the array budget.
        let mut bomb = String::from("---\na: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8u8 {
            let (this, prev) = ((b'b' + i) as char, (b'a' + i) as char);
            bomb += &format!(
                "{this}: &{this} [{}]\n",
                vec![format!("*{prev}"); 10].join(", ")
            );
        }
        bomb += "tags: *i\n---\n";
        let e = run("bomb_tags", bomb.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("general.tags cannot be written"), "{e}");
        // Merge keys doubling at each level.
        let mut merges = String::from("---\na0: &a0 {k0: 1, k1: 2}\n");
        for i in 1..40 {
            merges += &format!("a{i}: &a{i} {{<<: [*a{}, *a{}]}}\n", i - 1, i - 1);
        }
        merges += "---\n";
        let e = run("merge_bomb", merges.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(e.contains("merge keys copy more than"), "{e}");
        // README.md that is a directory: not a file, ignored as by Path.is_file().
        let dir = parent.path().join("readme_dir").join("model");
        std::fs::create_dir_all(dir.join("README.md")).unwrap();
        assert_eq!(
            general_metadata(&dir, &params(1000)).unwrap(),
            kv(&[
                ("general.name", s("Model")),
                ("general.size_label", s("1.0K"))
            ])
        );
    }

    /// The real all-MiniLM-L6-v2 checkpoint against the GGUF that convert_hf_to_gguf.py made of
    /// it (its tensors hold 22565376 parameters).
    #[test]
    fn minilm_matches_the_reference_gguf() {
        let dir = Path::new("/root/.cache/gguf/hf/all-MiniLM-L6-v2");
        let reference = Path::new("/work/tmp/minilm-f16-ref.gguf");
        if !dir.is_dir() || !reference.is_file() {
            eprintln!(
                "skipped: {} or {} is missing",
                dir.display(),
                reference.display()
            );
            return;
        }
        let bytes = std::fs::read(reference).unwrap();
        let file = gguf_format::GgufFile::parse(&bytes).unwrap();
        let counts = count_params(file.tensors().iter().map(|t| (t.name, t.shape())));
        assert_eq!(counts.total, 22_565_376);
        let want: Vec<(String, OwnedValue)> = file
            .metadata()
            .iter()
            .filter(|kv| {
                kv.key.starts_with("general.")
                    && !matches!(
                        kv.key,
                        "general.architecture"
                            | "general.type"
                            | "general.file_type"
                            | "general.quantization_version"
                    )
            })
            .map(|kv| (kv.key.to_string(), OwnedValue::from_value(kv.value)))
            .collect();
        let got = general_metadata(dir, &counts).unwrap();
        assert_eq!(got, want);
    }
}
