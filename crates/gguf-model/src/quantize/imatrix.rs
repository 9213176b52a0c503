//! Importance matrices for quantizing (`gguf quantize --imatrix`): the files `llama-imatrix` writes, read as
//! llama-quantize reads them (llama.cpp's `common_imatrix_load` and `load_imatrix`).
//!
//! - The GGUF format: tensors `<weight>.in_sum2` (the sums of squared activations, one per
//!   column, per expert) and `<weight>.counts` (how many rows were summed, per expert), both
//!   F32, and the keys `imatrix.datasets`, `imatrix.chunk_count`, `imatrix.chunk_size`, which
//!   llama-quantize requires. Each value becomes `in_sum2 / count`, or 1 where the count is 0.
//! - The legacy `.dat` format: an i32 entry count, then per entry its name (i32 length and
//!   bytes), the number of calls and of values (i32 each) and the values (f32, already divided
//!   by their count and multiplied by the calls); optionally the chunk count and the dataset's
//!   name at the end. Each value becomes `value / calls` (or stays when there were none).
//!
//! Every length read from a file is checked against what the file holds before anything is
//! allocated.

use std::collections::BTreeMap;
use std::path::Path;

use gguf_format::{GgmlType, GgufFile};

use crate::error::{ModelError, Result};

/// What is wrong with a matrix, before the file's name is added.
type Malformed<T> = std::result::Result<T, String>;

/// `Err(message)` unless `cond`.
fn ensure(cond: bool, message: impl FnOnce() -> String) -> Malformed<()> {
    if cond {
        Ok(())
    } else {
        Err(message())
    }
}

/// An importance matrix: the mean squared activation of every column of each weight.
#[derive(Debug, Clone, PartialEq)]
pub struct Imatrix {
    /// Per weight (tensor name): `ne0` values per expert, experts one after another.
    pub entries: BTreeMap<String, Vec<f32>>,
    /// The datasets the matrix was computed on, as the file names them.
    pub datasets: Vec<String>,
    /// The number of chunks it was computed on (0 when the file does not say).
    pub chunk_count: u32,
}

/// The GGUF magic: a file that does not start with it is read as the legacy format, as
/// llama.cpp falls back to it when `gguf_init_from_file` fails.
const GGUF_MAGIC: &[u8; 4] = b"GGUF";

impl Imatrix {
    /// Reads `path`, in either format. Errors ([`ModelError::Imatrix`]) name the file.
    pub fn load(path: &Path) -> Result<Imatrix> {
        let name = path.display().to_string();
        let refuse = |message: String| ModelError::Imatrix {
            file: name.clone(),
            message,
        };
        let io = |e: std::io::Error| refuse(e.to_string());
        let meta = std::fs::metadata(path).map_err(io)?;
        if !meta.is_file() {
            return Err(refuse("not a regular file".into()));
        }
        let mut head = [0u8; 4];
        {
            use std::io::Read;
            let mut f = std::fs::File::open(path).map_err(io)?;
            let n = f.read(&mut head).map_err(io)?;
            if n != 4 {
                return Err(refuse(format!(
                    "too short for an importance matrix ({n} bytes)"
                )));
            }
        }
        let m = if &head == GGUF_MAGIC {
            Self::load_gguf(path)
        } else {
            let bytes = std::fs::read(path).map_err(io)?;
            parse_legacy(&bytes)
        }
        .map_err(|e| refuse(format!("importance matrix: {e}")))?;
        for (weight, values) in &m.entries {
            if let Some(bad) = values.iter().find(|v| !v.is_finite()) {
                return Err(refuse(format!("the importance matrix of {weight} holds a non-finite value ({bad}), as llama-quantize refuses")));
            }
        }
        Ok(m)
    }

    /// The legacy format, from its bytes; `file` names them in errors.
    pub fn parse_legacy(file: &str, bytes: &[u8]) -> Result<Imatrix> {
        parse_legacy(bytes).map_err(|e| ModelError::Imatrix {
            file: file.to_string(),
            message: format!("importance matrix: {e}"),
        })
    }

    fn load_gguf(path: &Path) -> Malformed<Imatrix> {
        let mapped = GgufFile::open(path).map_err(|e| e.to_string())?;
        let file = mapped.file();
        ensure(!file.tensors().is_empty(), || "no data (no tensors)".into())?;
        let datasets = file.value("imatrix.datasets");
        let chunk_count = file.value("imatrix.chunk_count");
        let chunk_size = file.value("imatrix.chunk_size");
        ensure(
            datasets.is_some() && chunk_count.is_some() && chunk_size.is_some(),
            || {
                "missing imatrix metadata (imatrix.datasets, imatrix.chunk_count, imatrix.chunk_size): llama-quantize refuses such a file".into()
            },
        )?;
        let datasets = datasets
            .and_then(|v| v.as_array())
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let chunk_count = chunk_count
            .and_then(|v| v.as_integer())
            .and_then(|v| u32::try_from(v).ok())
            .ok_or("imatrix.chunk_count is not a u32")?;
        let floats = |t: &gguf_format::TensorInfo<'_>| -> Malformed<Vec<f32>> {
            ensure(t.ggml_type == GgmlType::F32, || {
                format!(
                    "{}: sums and counts must be F32, not {}",
                    t.name,
                    t.ggml_type.name()
                )
            })?;
            Ok(file
                .tensor_data(t)
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
        let mut pairs: BTreeMap<&str, (Option<&gguf_format::TensorInfo<'_>>, Option<_>)> =
            BTreeMap::new();
        for t in file.tensors() {
            if let Some(w) = t.name.strip_suffix(".in_sum2") {
                pairs.entry(w).or_default().0 = Some(t);
            } else if let Some(w) = t.name.strip_suffix(".counts") {
                pairs.entry(w).or_default().1 = Some(t);
            }
        }
        let mut entries = BTreeMap::new();
        for (weight, pair) in pairs {
            let (Some(sums), Some(counts)) = pair else {
                return Err(format!("mismatched sums and counts for {weight}"));
            };
            let (sums, counts) = (floats(sums)?, floats(counts)?);
            ensure(!counts.is_empty() && sums.len() % counts.len() == 0, || {
                format!(
                    "{weight}: {} sums do not split into {} experts",
                    sums.len(),
                    counts.len()
                )
            })?;
            let ne0 = sums.len() / counts.len();
            let mut values = Vec::with_capacity(sums.len());
            for (j, &c) in counts.iter().enumerate() {
                // llama.cpp rounds the stored count to an integer, then divides by it as f32.
                let count = c.round() as i64 as f32;
                let row = &sums[j * ne0..(j + 1) * ne0];
                if count > 0.0 {
                    values.extend(row.iter().map(|s| s / count));
                } else {
                    values.extend(std::iter::repeat_n(1.0, ne0));
                }
            }
            entries.insert(weight.to_string(), values);
        }
        Ok(Imatrix {
            entries,
            datasets,
            chunk_count,
        })
    }

    /// Keeps only the weights whose names contain one of `include` (when it is not empty) and
    /// none of `exclude`: llama-quantize's `--include-weights` / `--exclude-weights`, which
    /// match substrings.
    pub fn filter(&mut self, include: &[String], exclude: &[String]) {
        self.entries
            .retain(|name, _| !exclude.iter().any(|e| name.contains(e.as_str())));
        if !include.is_empty() {
            self.entries
                .retain(|name, _| include.iter().any(|i| name.contains(i.as_str())));
        }
    }
}

/// The legacy format, from its bytes.
fn parse_legacy(bytes: &[u8]) -> Malformed<Imatrix> {
    let mut at = 0usize;
    let mut take = |n: usize, what: &str| -> Malformed<&[u8]> {
        let end = at
            .checked_add(n)
            .filter(|&e| e <= bytes.len())
            .ok_or_else(|| {
                format!(
                    "truncated at offset {at}: expected {n} bytes of {what}, {} left",
                    bytes.len() - at
                )
            })?;
        let s = &bytes[at..end];
        at = end;
        Ok(s)
    };
    let i32_at = |b: &[u8]| i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
    let n_entries = i32_at(take(4, "the entry count")?);
    ensure(n_entries >= 1, || {
        format!("no data (entry count {n_entries})")
    })?;
    let mut entries = BTreeMap::new();
    for i in 0..n_entries {
        let len = i32_at(take(4, "a name length")?);
        let len =
            usize::try_from(len).map_err(|_| format!("entry {i}: negative name length {len}"))?;
        let name = take(len, "a name")?;
        // llama.cpp reads the name as a C string: it ends at the first NUL.
        let name = name.split(|&b| b == 0).next().unwrap_or_default();
        let name = String::from_utf8_lossy(name).into_owned();
        let calls = i32_at(take(4, "a call count")?);
        let nval = i32_at(take(4, "a value count")?);
        ensure(nval >= 1, || format!("entry {i} ({name}): {nval} values"))?;
        let values = take(4 * nval as usize, "the values")?;
        let values = values
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        let values = if calls > 0 {
            values.map(|v| v / calls as f32).collect()
        } else {
            values.collect()
        };
        entries.insert(name, values);
    }
    let mut chunk_count = 0;
    let mut datasets = Vec::new();
    if let Ok(b) = take(4, "the chunk count") {
        chunk_count = u32::try_from(i32_at(b)).unwrap_or(0);
        if let Ok(b) = take(4, "the dataset name length") {
            let len = i32_at(b);
            if len > 0 {
                if let Ok(name) = take(len as usize, "the dataset name") {
                    let name = name.split(|&b| b == 0).next().unwrap_or_default();
                    datasets.push(String::from_utf8_lossy(name).into_owned());
                }
            }
        }
    }
    Ok(Imatrix {
        entries,
        datasets,
        chunk_count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn legacy(entries: &[(&str, i32, &[f32])], tail: Option<(i32, &str)>) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend((entries.len() as i32).to_le_bytes());
        for (name, calls, values) in entries {
            b.extend((name.len() as i32).to_le_bytes());
            b.extend(name.as_bytes());
            b.extend(calls.to_le_bytes());
            b.extend((values.len() as i32).to_le_bytes());
            for v in *values {
                b.extend(v.to_le_bytes());
            }
        }
        if let Some((chunks, dataset)) = tail {
            b.extend(chunks.to_le_bytes());
            b.extend((dataset.len() as i32).to_le_bytes());
            b.extend(dataset.as_bytes());
        }
        b
    }

    #[test]
    fn legacy_values_are_divided_by_their_calls() {
        let bytes = legacy(
            &[
                ("blk.0.ffn_up.weight", 4, &[8.0, 2.0]),
                ("output.weight", 0, &[3.0]),
            ],
            Some((12, "wiki.train.raw")),
        );
        let m = Imatrix::parse_legacy("test.dat", &bytes).unwrap();
        assert_eq!(m.entries["blk.0.ffn_up.weight"], vec![2.0, 0.5]);
        assert_eq!(m.entries["output.weight"], vec![3.0]);
        assert_eq!(m.chunk_count, 12);
        assert_eq!(m.datasets, vec!["wiki.train.raw".to_string()]);
        // Without the optional tail.
        let m = Imatrix::parse_legacy("test.dat", &legacy(&[("a", 1, &[1.0])], None)).unwrap();
        assert_eq!((m.chunk_count, m.datasets.len()), (0, 0));
    }

    #[test]
    fn hostile_legacy_files_are_errors_naming_the_offset() {
        for bytes in [
            vec![],
            0i32.to_le_bytes().to_vec(),
            // One entry whose name claims 2 GB.
            [1i32.to_le_bytes(), i32::MAX.to_le_bytes()].concat(),
            // A negative name length.
            [1i32.to_le_bytes(), (-5i32).to_le_bytes()].concat(),
        ] {
            let e = Imatrix::parse_legacy("test.dat", &bytes).expect_err("an error");
            let text = format!("{e:#}");
            assert!(
                text.contains("truncated at offset")
                    || text.contains("no data")
                    || text.contains("negative"),
                "{text}"
            );
        }
        // A value count larger than the file.
        let mut b = legacy(&[("w", 1, &[1.0])], None);
        let at = 4 + 4 + 1 + 4;
        b[at..at + 4].copy_from_slice(&1_000_000i32.to_le_bytes());
        let text = format!("{:#}", Imatrix::parse_legacy("test.dat", &b).unwrap_err());
        assert!(
            text.contains("expected 4000000 bytes of the values"),
            "{text}"
        );
    }

    #[test]
    fn include_and_exclude_match_substrings() {
        let bytes = legacy(
            &[
                ("blk.0.ffn_up.weight", 1, &[1.0]),
                ("blk.0.attn_q.weight", 1, &[1.0]),
                ("output.weight", 1, &[1.0]),
            ],
            None,
        );
        let mut m = Imatrix::parse_legacy("test.dat", &bytes).unwrap();
        m.filter(&[], &["attn".into()]);
        assert_eq!(m.entries.len(), 2);
        m.filter(&["ffn".into()], &[]);
        assert_eq!(
            m.entries.keys().collect::<Vec<_>>(),
            vec!["blk.0.ffn_up.weight"]
        );
    }
}
