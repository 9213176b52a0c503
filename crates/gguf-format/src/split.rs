//! Multi-part ("split") models: reading a set as one model, splitting and merging in the
//! layout and naming of llama.cpp's `gguf-split`, so files move between the two tools.
//!
//! Part `i` (0-based) of `n` is named `{prefix}-{i+1:05}-of-{n:05}.gguf`. The first part holds
//! all metadata followed by `split.no` (u16), `split.tensors.count` (i32) and `split.count`
//! (u16); the other parts hold only those three keys. A merged file keeps the first part's
//! keys with `split.count` set to 0 and moved to the end, as `gguf-split --merge` leaves it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use gguf_fsutil::{check_destination, refuse_inputs, write_atomic, StagedFiles, WriteMode};

use crate::error::{Error, Result};
use crate::keys;
use crate::mmap::MappedGguf;
use crate::reader::{GgufFile, TensorInfo};
use crate::value::Value;
use crate::writer::{GgufBuilder, TensorSpec};

/// The path of part `index` (0-based) of `count` for `prefix`.
///
/// ```
/// assert_eq!(gguf_format::split::split_path("model", 0, 3), "model-00001-of-00003.gguf");
/// ```
pub fn split_path(prefix: &str, index: u32, count: u32) -> String {
    format!("{prefix}-{:05}-of-{:05}.gguf", index + 1, count)
}

/// Splits a part's path into (prefix, 0-based index, count), if it follows the naming scheme.
///
/// ```
/// use gguf_format::split::parse_split_path;
/// assert_eq!(parse_split_path("dir/m-00002-of-00003.gguf"), Some(("dir/m".into(), 1, 3)));
/// assert_eq!(parse_split_path("m.gguf"), None);
/// ```
pub fn parse_split_path(path: &str) -> Option<(String, u32, u32)> {
    let stem = path.strip_suffix(".gguf")?;
    let (rest, count) = stem.rsplit_once("-of-")?;
    let (prefix, number) = rest.rsplit_once('-')?;
    if prefix.is_empty() || number.len() < 5 || count.len() < 5 {
        return None;
    }
    let number: u32 = number.parse().ok()?;
    let count: u32 = count.parse().ok()?;
    (number >= 1 && number <= count).then(|| (prefix.to_string(), number - 1, count))
}

fn split_count_of(file: &GgufFile<'_>) -> Result<u32> {
    match file.value(keys::split::COUNT) {
        None => Ok(0),
        Some(v) => v
            .as_integer()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| Error::wrong_type(keys::split::COUNT, "u16", v.value_type())),
    }
}

/// A model stored in one file or in a split set, read as one.
#[derive(Debug)]
pub struct SplitSet {
    parts: Vec<MappedGguf>,
    /// Tensor name to (part, index within the part).
    index: HashMap<String, (usize, usize)>,
}

impl SplitSet {
    /// Opens `path` and, if its `split.count` is above 1, every other part of its set (found by
    /// the naming scheme from any one part's path). Checks that each part has the right
    /// `split.no` and `split.count`, that no tensor name repeats, and that the set holds
    /// `split.tensors.count` tensors.
    pub fn open(path: impl AsRef<Path>) -> Result<SplitSet> {
        let path = path.as_ref();
        let first = MappedGguf::open(path)?;
        let count = split_count_of(first.file()).map_err(|e| e.in_file(path))?;
        let mut parts = Vec::new();
        if count <= 1 {
            parts.push(first);
        } else {
            let text = path.to_string_lossy();
            let (prefix, _, named_count) = parse_split_path(&text).ok_or_else(|| {
                Error::Split(format!(
                    "{} has split.count {count} but its name does not end in -NNNNN-of-NNNNN.gguf, so the other parts cannot be found",
                    path.display()
                ))
            })?;
            if named_count != count {
                return Err(Error::Split(format!(
                    "{} is named as one of {named_count} parts but its split.count is {count}",
                    path.display()
                )));
            }
            let mut first = Some(first);
            for i in 0..count {
                let part_path = PathBuf::from(split_path(&prefix, i, count));
                let part = match first.take_if(|f| f.path() == part_path) {
                    Some(f) => f,
                    None => MappedGguf::open(&part_path)?,
                };
                let file = part.file();
                let no = file.value(keys::split::NO).and_then(|v| v.as_integer());
                let part_count = split_count_of(file).map_err(|e| e.in_file(&part_path))?;
                if no != Some(i.into()) || part_count != count {
                    return Err(Error::Split(format!(
                        "{} should be part {} of {count} but has split.no {} and split.count {part_count}",
                        part_path.display(),
                        i,
                        no.map_or("missing".into(), |n| n.to_string()),
                    )));
                }
                parts.push(part);
            }
        }
        let mut index = HashMap::new();
        for (p, part) in parts.iter().enumerate() {
            for (t, info) in part.file().tensors().iter().enumerate() {
                if let Some((q, _)) = index.insert(info.name.to_string(), (p, t)) {
                    return Err(Error::Split(format!(
                        "tensor '{}' is in both {} and {}",
                        info.name,
                        parts[q].path().display(),
                        part.path().display()
                    )));
                }
            }
        }
        if count > 1 {
            let expected = parts[0].file().value(keys::split::TENSORS_COUNT);
            if let Some(n) = expected.and_then(|v| v.as_integer()) {
                if n != index.len() as i128 {
                    return Err(Error::Split(format!(
                        "{} promises {n} tensors in the set but its {count} parts hold {}",
                        parts[0].path().display(),
                        index.len()
                    )));
                }
            }
        }
        Ok(SplitSet { parts, index })
    }

    /// The parts, in order (one for an unsplit file).
    pub fn parts(&self) -> &[MappedGguf] {
        &self.parts
    }

    /// The model's metadata: the first part's.
    pub fn metadata(&self) -> &GgufFile<'_> {
        self.parts[0].file()
    }

    /// Every tensor in order, with the index of the part that holds it.
    pub fn tensors(&self) -> impl Iterator<Item = (usize, &TensorInfo<'_>)> {
        self.parts
            .iter()
            .enumerate()
            .flat_map(|(p, part)| part.file().tensors().iter().map(move |t| (p, t)))
    }

    /// The number of tensors in the whole set.
    pub fn tensor_count(&self) -> usize {
        self.index.len()
    }

    /// A tensor's info and bytes, from whichever part holds it.
    pub fn tensor(&self, name: &str) -> Option<(&TensorInfo<'_>, &[u8])> {
        self.tensor_in_part(name)
            .map(|(_, info, data)| (info, data))
    }

    /// As [`SplitSet::tensor`], with the index of the part that holds it.
    pub fn tensor_in_part(&self, name: &str) -> Option<(usize, &TensorInfo<'_>, &[u8])> {
        let &(p, t) = self.index.get(name)?;
        let file = self.parts[p].file();
        let info = &file.tensors()[t];
        Some((p, info, file.tensor_data(info)))
    }
}

/// How to cut a model into parts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitLimit {
    /// At most this many tensors per part (`gguf-split --split-max-tensors`, default 128).
    MaxTensors(usize),
    /// At most this many bytes of (padded) tensor data per part (`--split-max-size`); a
    /// tensor larger than the limit gets a part of its own.
    MaxBytes(u64),
}

/// Which tensors (indices into `file.tensors()`) go into which part.
///
/// With `no_tensor_first_split`, the first part holds only metadata.
pub fn plan_split(
    file: &GgufFile<'_>,
    limit: SplitLimit,
    no_tensor_first_split: bool,
) -> Result<Vec<Vec<usize>>> {
    let alignment = file.alignment();
    let mut parts: Vec<Vec<usize>> = vec![Vec::new()];
    if no_tensor_first_split {
        parts.push(Vec::new());
    }
    let mut bytes_in_part = 0u64;
    for (i, t) in file.tensors().iter().enumerate() {
        let padded = t.size.next_multiple_of(alignment);
        let current = parts.last().map_or(0, Vec::len);
        let start_new = current > 0
            && match limit {
                SplitLimit::MaxTensors(0) | SplitLimit::MaxBytes(0) => {
                    return Err(Error::Invalid("the split limit must be above zero".into()))
                }
                SplitLimit::MaxTensors(n) => current >= n,
                SplitLimit::MaxBytes(max) => bytes_in_part.saturating_add(padded) > max,
            };
        if start_new {
            parts.push(Vec::new());
            bytes_in_part = 0;
        }
        bytes_in_part += padded;
        parts.last_mut().expect("parts is never empty").push(i);
    }
    if parts.len() > u16::MAX as usize {
        return Err(Error::Invalid(format!(
            "{} parts exceed the 65535 that split.count (u16) can hold",
            parts.len()
        )));
    }
    Ok(parts)
}

fn is_split_key(key: &str) -> bool {
    key == keys::split::NO || key == keys::split::COUNT || key == keys::split::TENSORS_COUNT
}

/// Refuses `path` if it is one of `inputs` or exists at all.
fn refuse_existing(path: &Path, inputs: &[&Path]) -> Result<()> {
    refuse_inputs(path, inputs)?;
    Ok(check_destination(path, WriteMode::CreateNew)?)
}

/// Writes `input` as a split set named from `output_prefix`; returns the paths written.
///
/// Refuses to write over any existing file. Every part is written to a temporary file first,
/// and they are renamed into place together only when all are complete: a failure or an
/// interruption at any point leaves no part behind. `progress` gets (bytes of tensor data
/// copied, total).
pub fn write_split(
    input: &Path,
    output_prefix: &str,
    limit: SplitLimit,
    no_tensor_first_split: bool,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<PathBuf>> {
    let mapped = MappedGguf::open(input)?;
    let file = mapped.file();
    let plan = plan_split(file, limit, no_tensor_first_split).map_err(|e| e.in_file(input))?;
    let count = plan.len() as u32;
    let paths: Vec<PathBuf> = (0..count)
        .map(|i| PathBuf::from(split_path(output_prefix, i, count)))
        .collect();
    for p in &paths {
        refuse_existing(p, &[input])?;
    }
    let total: u64 = file.tensors().iter().map(|t| t.size).sum();
    let mut done = 0;
    let mut staged = StagedFiles::new();
    for (i, (tensor_ids, path)) in plan.iter().zip(&paths).enumerate() {
        let mut builder = GgufBuilder::new();
        builder.byte_order(file.byte_order());
        if i == 0 {
            for kv in file.metadata().iter().filter(|kv| !is_split_key(kv.key)) {
                builder.set_value(kv.key, kv.value);
            }
        }
        builder.set(keys::split::NO, i as u16);
        builder.set(keys::split::TENSORS_COUNT, file.tensors().len() as i32);
        builder.set(keys::split::COUNT, count as u16);
        for &t in tensor_ids {
            let info = &file.tensors()[t];
            builder.push_tensor(
                TensorSpec::new(info.name, info.ggml_type, info.shape())?.with_trimmed_shape(),
            )?;
        }
        staged.stage(path, WriteMode::CreateNew, |out| {
            let write = || -> Result<()> {
                let mut w = builder.write(out)?;
                for &t in tensor_ids {
                    let info = &file.tensors()[t];
                    w.write_tensor(file.tensor_data(info))?;
                    done += info.size;
                    progress(done, total);
                }
                w.finish()?;
                Ok(())
            };
            write().map_err(|e| e.in_file(path))
        })?;
    }
    staged.commit()?;
    Ok(paths)
}

/// Merges the split set that `first_part` belongs to into one file at `output`.
///
/// Refuses to write over an existing file or any part. `progress` gets (bytes copied, total).
pub fn merge(first_part: &Path, output: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<()> {
    let set = SplitSet::open(first_part)?;
    if split_count_of(set.metadata()).unwrap_or(0) < 1 {
        return Err(Error::Split(format!(
            "{} is not part of a split set (it has no split.count)",
            first_part.display()
        )));
    }
    let inputs: Vec<&Path> = set.parts().iter().map(|p| p.path()).collect();
    refuse_existing(output, &inputs)?;
    let meta = set.metadata();
    let mut builder = GgufBuilder::new();
    builder.byte_order(meta.byte_order());
    for kv in meta
        .metadata()
        .iter()
        .filter(|kv| kv.key != keys::split::COUNT)
    {
        builder.set_value(kv.key, kv.value);
    }
    builder.set_value(keys::split::COUNT, Value::U16(0));
    for (_, info) in set.tensors() {
        builder.push_tensor(
            TensorSpec::new(info.name, info.ggml_type, info.shape())?.with_trimmed_shape(),
        )?;
    }
    let total: u64 = set.tensors().map(|(_, t)| t.size).sum();
    write_atomic(output, WriteMode::CreateNew, |out| {
        let write = || -> Result<()> {
            let mut w = builder.write(out)?;
            let mut done = 0;
            for (p, info) in set.tensors() {
                w.write_tensor(set.parts()[p].file().tensor_data(info))?;
                done += info.size;
                progress(done, total);
            }
            w.finish()?;
            Ok(())
        };
        write().map_err(|e| e.in_file(output))
    })
}
