//! `gguf inspect`: a readable summary, or one JSON object for scripts.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Result;
use clap::Args;
use gguf_format::{ArrayView, GgmlType, GgufFile, TensorInfo, Value};
use indicatif::ProgressBar;
use serde_json::{json, Map, Number, Value as Json};

use crate::models;
use crate::output::{out, outln};
use crate::tensors::{self, Stats};

/// `gguf inspect`.
#[derive(Args)]
pub struct InspectArgs {
    /// A .gguf path or a known model name (see `gguf pull --list`).
    file: String,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Show whole arrays and strings instead of the first elements.
    #[arg(long)]
    full: bool,
    /// Show only the tensor table.
    #[arg(long)]
    tensors: bool,
    /// Add per-tensor min, max, mean and RMS of the dequantized values.
    #[arg(long)]
    stats: bool,
}

/// Prints the file's summary (or JSON), with per-tensor statistics when asked.
pub fn inspect(a: InspectArgs) -> Result<()> {
    let path = models::resolve(&a.file)?;
    let mapped = GgufFile::open(&path)?;
    let file = mapped.file();
    let stats = if a.stats {
        let bar = ProgressBar::new(file.tensors().len() as u64);
        let stats = file
            .tensors()
            .iter()
            .map(|t| {
                bar.inc(1);
                tensors::stats(file, t)
            })
            .collect::<Result<Vec<_>>>()?;
        bar.finish_and_clear();
        Some(stats)
    } else {
        None
    };
    let view = View {
        full: a.full,
        tensors_only: a.tensors,
        stats: stats.as_deref(),
    };
    if a.json {
        outln!("{}", file_json(file, view))?;
    } else {
        out!("{}", file_text(file, &path.display().to_string(), view))?;
    }
    Ok(())
}

/// How many array elements `inspect` shows without `--full`.
pub const ARRAY_PREVIEW: usize = 16;

/// A float as JSON: the shortest decimal that reads back to the same `f32`/`f64`; non-finite
/// values as the strings `"NaN"`, `"inf"`, `"-inf"`.
pub fn float_json(v: f64, shortest: String) -> Json {
    if v.is_finite() {
        shortest
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map_or(Json::Null, Json::Number)
    } else if v.is_nan() {
        Json::from("NaN")
    } else if v > 0.0 {
        Json::from("inf")
    } else {
        Json::from("-inf")
    }
}

/// A string as JSON text, or `{"hex": ...}` when its bytes are not UTF-8.
fn string_json(bytes: &[u8]) -> Json {
    match std::str::from_utf8(bytes) {
        Ok(s) => Json::from(s),
        Err(_) => json!({ "hex": bytes.iter().map(|b| format!("{b:02x}")).collect::<String>() }),
    }
}

/// One value as JSON; arrays show at most `limit` elements.
pub fn value_json(value: &Value<'_>, limit: Option<usize>) -> Json {
    if let Some(i) = value.as_integer() {
        // Every integer type of GGUF fits a u64 or an i64, JSON's two integer kinds.
        return u64::try_from(i).map_or_else(|_| Json::from(i as i64), Json::from);
    }
    match *value {
        Value::F32(v) => float_json(v.into(), v.to_string()),
        Value::F64(v) => float_json(v, v.to_string()),
        Value::Bool(v) => v.into(),
        Value::String(s) => string_json(s),
        Value::Array(a) => Json::Array(array_items(&a, limit)),
        _ => unreachable!("integers are converted above"),
    }
}

fn array_items(a: &ArrayView<'_>, limit: Option<usize>) -> Vec<Json> {
    let n = limit.unwrap_or(usize::MAX);
    a.iter().take(n).map(|v| value_json(&v, limit)).collect()
}

/// Options of `gguf inspect`.
#[derive(Debug, Clone, Copy, Default)]
pub struct View<'s> {
    /// Whole arrays and strings.
    pub full: bool,
    /// Only the tensor table (no metadata).
    pub tensors_only: bool,
    /// Per-tensor statistics, in tensor order.
    pub stats: Option<&'s [Stats]>,
}

fn stats_json(s: &Stats) -> Json {
    json!({
        "min": float_json(s.min.into(), s.min.to_string()),
        "max": float_json(s.max.into(), s.max.to_string()),
        "mean": float_json(s.mean, s.mean.to_string()),
        "rms": float_json(s.rms, s.rms.to_string()),
    })
}

/// The `--json` object for a file.
pub fn file_json(file: &GgufFile<'_>, view: View<'_>) -> Json {
    let full = view.full;
    let limit = (!full).then_some(ARRAY_PREVIEW);
    let metadata: Vec<Json> = file
        .metadata()
        .iter()
        .map(|kv| {
            let mut m = Map::new();
            m.insert("key".into(), kv.key.into());
            m.insert("type".into(), kv.value.value_type().name().into());
            if let Value::Array(a) = kv.value {
                m.insert("element_type".into(), a.element_type().name().into());
                m.insert("len".into(), a.len().into());
            }
            m.insert("value".into(), value_json(&kv.value, limit));
            Json::Object(m)
        })
        .collect();
    let tensors: Vec<Json> = file
        .tensors()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let mut j = json!({
                "name": t.name,
                "type": t.ggml_type.name(),
                "shape": t.shape(),
                "offset": t.offset,
                "size": t.size,
            });
            if let Some(s) = view.stats.and_then(|s| s.get(i)) {
                j["stats"] = stats_json(s);
            }
            j
        })
        .collect();
    let mut out = json!({
        "version": file.version(),
        "byte_order": file.byte_order().name(),
        "alignment": file.alignment(),
        "data_offset": file.data_offset(),
        "tensor_count": file.tensors().len(),
        "metadata": metadata,
        "tensors": tensors,
    });
    if view.tensors_only {
        if let Some(o) = out.as_object_mut() {
            o.shift_remove("metadata");
        }
    }
    out
}

/// Bytes in binary units, e.g. `93.8 MiB`.
pub fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// A short one-line rendering of a value for the text table.
pub fn value_text(value: &Value<'_>, full: bool) -> String {
    const MAX_STRING: usize = 80;
    match *value {
        Value::String(s) => {
            let text = String::from_utf8_lossy(s);
            let escaped: String = text.escape_debug().collect();
            if !full && escaped.chars().count() > MAX_STRING {
                let cut: String = escaped.chars().take(MAX_STRING).collect();
                format!("\"{cut}\"... ({} bytes)", s.len())
            } else {
                format!("\"{escaped}\"")
            }
        }
        Value::Array(a) => {
            let n = if full { usize::MAX } else { 8 };
            let items: Vec<String> = a.iter().take(n).map(|v| value_text(&v, false)).collect();
            let more = if (a.len() as usize) > items.len() {
                ", ..."
            } else {
                ""
            };
            format!(
                "[{} x {}] [{}{more}]",
                a.len(),
                a.element_type(),
                items.join(", ")
            )
        }
        other => value_json(&other, None).to_string(),
    }
}

fn shape_text(t: &TensorInfo<'_>) -> String {
    let dims: Vec<String> = t.shape().iter().map(u64::to_string).collect();
    format!("[{}]", dims.join(", "))
}

/// The widest a key or tensor name is shown in the text table; longer names are cut (they
/// are whole in `--json`). Files may hold names of any length, and `format!` refuses widths
/// above 65,535.
const NAME_CELL_CHARS: usize = 64;

/// The width of a name column: its longest name, at most [`NAME_CELL_CHARS`].
fn column_width<'a>(names: impl Iterator<Item = &'a str>) -> usize {
    names
        .map(|n| n.chars().count().min(NAME_CELL_CHARS))
        .max()
        .unwrap_or(0)
}

/// `name` as a table cell: cut to [`NAME_CELL_CHARS`] characters, the cut marked with `…`.
fn name_cell(name: &str) -> std::borrow::Cow<'_, str> {
    match name.char_indices().nth(NAME_CELL_CHARS) {
        None => name.into(),
        Some(_) => {
            let keep: String = name.chars().take(NAME_CELL_CHARS - 1).collect();
            format!("{keep}…").into()
        }
    }
}

/// The readable summary.
pub fn file_text(file: &GgufFile<'_>, name: &str, view: View<'_>) -> String {
    let full = view.full;
    let mut out = String::new();
    let arch = file.architecture().unwrap_or("(none)");
    let data_bytes: u64 = file.tensors().iter().map(|t| t.size).sum();
    let params: u64 = file.tensors().iter().map(|t| t.element_count()).sum();
    let _ = writeln!(out, "{name}");
    let _ = writeln!(
        out,
        "  GGUF v{}, {}-endian, alignment {}, data at byte {}",
        file.version(),
        file.byte_order().name(),
        file.alignment(),
        file.data_offset()
    );
    let _ = writeln!(
        out,
        "  architecture {arch}; {} metadata keys; {} tensors, {} parameters, {} of tensor data",
        file.metadata().len(),
        file.tensors().len(),
        params,
        human_bytes(data_bytes)
    );
    if !view.tensors_only {
        let _ = writeln!(out, "\nMetadata:");
    }
    let width = column_width(file.metadata().iter().map(|kv| kv.key));
    for kv in file.metadata().iter().filter(|_| !view.tensors_only) {
        let _ = writeln!(
            out,
            "  {:width$}  {:6}  {}",
            name_cell(kv.key),
            kv.value.value_type().name(),
            value_text(&kv.value, full)
        );
    }
    let _ = writeln!(out, "\nTensors:");
    let width = column_width(file.tensors().iter().map(|t| t.name));
    for (i, t) in file.tensors().iter().enumerate() {
        let _ = write!(
            out,
            "  {:width$}  {:7}  {:24}  {:>10}",
            name_cell(t.name),
            t.ggml_type.name(),
            shape_text(t),
            human_bytes(t.size)
        );
        if let Some(s) = view.stats.and_then(|s| s.get(i)) {
            let _ = write!(
                out,
                "  min {:>11.4e}  max {:>11.4e}  mean {:>11.4e}  rms {:>11.4e}",
                s.min, s.max, s.mean, s.rms
            );
        }
        let _ = writeln!(out);
    }
    let mut by_type: BTreeMap<GgmlType, (usize, u64)> = BTreeMap::new();
    for t in file.tensors() {
        let e = by_type.entry(t.ggml_type).or_default();
        e.0 += 1;
        e.1 += t.size;
    }
    let _ = writeln!(out, "\nBy type:");
    for (t, (count, bytes)) in by_type {
        let share = if data_bytes > 0 {
            bytes as f64 * 100.0 / data_bytes as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "  {:7}  {count:5} tensors  {:>10}  {share:5.1}%",
            t.name(),
            human_bytes(bytes)
        );
    }
    out
}
