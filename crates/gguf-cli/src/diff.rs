//! `gguf diff A B`: what differs between two GGUF files — header, metadata keys (added, removed,
//! changed), tensors (added, removed, changed in type, shape or bytes) and, with `--values`,
//! how far apart the dequantized values of the tensors both files hold are. The exit status is
//! that of `diff`: 0 when the files are equal, 1 when they differ, 2 on error.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use anyhow::{Context, Result};
use clap::Args;
use gguf_format::{GgufFile, TensorInfo, Value};
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value as Json};

use crate::inspect::{float_json, value_json, value_text, ARRAY_PREVIEW};
use crate::models;
use crate::output::out;
use crate::tensors::for_each_chunk;

/// `gguf diff`.
#[derive(Args)]
pub struct DiffArgs {
    /// The first file (a .gguf path or a known model name).
    a: String,
    /// The second file.
    b: String,
    /// Also compare the dequantized values of the tensors both files hold with the same shape:
    /// max |a - b|, RMS of a - b, relative error ||a - b|| / ||a|| and cosine similarity.
    #[arg(long)]
    values: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
    /// Threads for `--values` (default: all CPUs).
    #[arg(short, long, default_value_t = 0)]
    threads: usize,
}

/// A metadata key whose value differs.
struct Changed<'a> {
    key: &'a str,
    a: Value<'a>,
    b: Value<'a>,
}

/// How two same-named tensors differ.
struct TensorChange<'a> {
    a: &'a TensorInfo<'a>,
    b: &'a TensorInfo<'a>,
    /// Type or shape differ.
    layout: bool,
    /// Same type and shape, different bytes.
    data: bool,
}

/// The numeric comparison of two tensors' dequantized values.
#[derive(Debug, Clone, Copy, Default)]
struct Numbers {
    max_abs: f64,
    /// Root mean square of `a - b`.
    rms: f64,
    /// `||a - b|| / ||a||` (0 when both are zero; infinite when only `a` is).
    relative: f64,
    /// `a·b / (||a|| ||b||)` (1 when the values are equal, zeros included).
    cosine: f64,
    /// Positions where exactly one side is NaN, or both are but differ from each other.
    nan_mismatches: u64,
}

/// Compares the two files; prints the differences; `Ok(true)` when they are equal.
pub fn diff(args: DiffArgs) -> Result<bool> {
    let (path_a, path_b) = (models::resolve(&args.a)?, models::resolve(&args.b)?);
    let mapped_a = GgufFile::open(&path_a)?;
    let mapped_b = GgufFile::open(&path_b)?;
    let (fa, fb) = (mapped_a.file(), mapped_b.file());

    let header = header_changes(fa, fb);
    let mut removed_keys = Vec::new();
    let mut changed_keys = Vec::new();
    for kv in fa.metadata().iter() {
        match fb.value(kv.key) {
            None => removed_keys.push((kv.key, kv.value)),
            Some(b) if b != kv.value => changed_keys.push(Changed {
                key: kv.key,
                a: kv.value,
                b,
            }),
            Some(_) => {}
        }
    }
    let added_keys: Vec<_> = fb
        .metadata()
        .iter()
        .filter(|kv| fa.value(kv.key).is_none())
        .map(|kv| (kv.key, kv.value))
        .collect();

    let removed_tensors: Vec<&TensorInfo<'_>> = fa
        .tensors()
        .iter()
        .filter(|t| fb.tensor(t.name).is_none())
        .collect();
    let added_tensors: Vec<&TensorInfo<'_>> = fb
        .tensors()
        .iter()
        .filter(|t| fa.tensor(t.name).is_none())
        .collect();
    let mut changed_tensors = Vec::new();
    // Tensors both files hold with the same shape: the ones `--values` compares.
    let mut comparable = Vec::new();
    for a in fa.tensors() {
        let Some(b) = fb.tensor(a.name) else { continue };
        let layout = a.ggml_type != b.ggml_type || a.shape() != b.shape();
        let data = !layout && fa.tensor_data(a) != fb.tensor_data(b);
        if layout || data {
            changed_tensors.push(TensorChange { a, b, layout, data });
        }
        if a.shape() == b.shape() {
            comparable.push((a, b));
        }
    }

    let numbers = if args.values {
        Some(compare_values(fa, fb, &comparable, args.threads)?)
    } else {
        None
    };
    let equal = header.is_empty()
        && removed_keys.is_empty()
        && added_keys.is_empty()
        && changed_keys.is_empty()
        && removed_tensors.is_empty()
        && added_tensors.is_empty()
        && changed_tensors.is_empty();
    // Tensor order is part of the file: the same tensors in another order are a difference.
    let order_differs = equal
        && fa
            .tensors()
            .iter()
            .map(|t| t.name)
            .ne(fb.tensors().iter().map(|t| t.name));
    let key_order_differs = equal
        && fa
            .metadata()
            .iter()
            .map(|kv| kv.key)
            .ne(fb.metadata().iter().map(|kv| kv.key));
    let equal = equal && !order_differs && !key_order_differs;

    let report = Report {
        a: path_a.display().to_string(),
        b: path_b.display().to_string(),
        header,
        added_keys,
        removed_keys,
        changed_keys,
        added_tensors,
        removed_tensors,
        changed_tensors,
        numbers,
        order_differs,
        key_order_differs,
        equal,
    };
    if args.json {
        out!("{}\n", report.json())?;
    } else {
        out!("{}", report.text())?;
    }
    Ok(equal)
}

/// `(field, a, b)` for each header field that differs.
fn header_changes(fa: &GgufFile<'_>, fb: &GgufFile<'_>) -> Vec<(&'static str, Json, Json)> {
    let fields = [
        ("version", json!(fa.version()), json!(fb.version())),
        (
            "byte_order",
            json!(fa.byte_order().name()),
            json!(fb.byte_order().name()),
        ),
        ("alignment", json!(fa.alignment()), json!(fb.alignment())),
    ];
    fields.into_iter().filter(|(_, a, b)| a != b).collect()
}

/// Compares the dequantized values of each pair, in parallel over tensors (each streamed in
/// pieces of whole rows, so memory stays bounded by a few pieces per thread).
fn compare_values<'f>(
    fa: &GgufFile<'f>,
    fb: &GgufFile<'f>,
    pairs: &[(&TensorInfo<'f>, &TensorInfo<'f>)],
    threads: usize,
) -> Result<Vec<(String, Numbers)>> {
    let threads = match threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        t => t,
    }
    .clamp(1, pairs.len().max(1));
    let bar = ProgressBar::new(pairs.len() as u64);
    bar.set_style(
        ProgressStyle::with_template("comparing tensors {bar:30} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<Numbers>>>> =
        Mutex::new((0..pairs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(a, b)) = pairs.get(i) else { return };
                let r = compare_tensor(fa, a, fb, b);
                bar.inc(1);
                results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
            });
        }
    });
    bar.finish_and_clear();
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    pairs
        .iter()
        .zip(results)
        .map(|(&(a, _), r)| {
            let n = r.context("a comparison did not run")??;
            Ok((a.name.to_string(), n))
        })
        .collect()
}

/// The numbers for one pair of tensors of the same shape (any types).
fn compare_tensor(
    fa: &GgufFile<'_>,
    a: &TensorInfo<'_>,
    fb: &GgufFile<'_>,
    b: &TensorInfo<'_>,
) -> Result<Numbers> {
    // Both sides stream in step: a piece of `a` (whole rows) and the same rows of `b`, which
    // has the same shape, so memory stays bounded by two pieces.
    let mut acc = Accumulator::default();
    let mut rows_of_b = PieceReader::new(fb, b);
    let mut b_values = Vec::new();
    for_each_chunk(fa, a, |va| {
        rows_of_b.next(&mut b_values, va.len())?;
        acc.add(va, &b_values);
        Ok(())
    })
    .with_context(|| format!("tensor '{}'", a.name))?;
    Ok(acc.finish())
}

/// Dequantizes a tensor piece by piece on demand (the rows after those already read).
struct PieceReader<'r, 'f> {
    file: &'r GgufFile<'f>,
    tensor: &'r TensorInfo<'f>,
    next_row: usize,
}

impl<'r, 'f> PieceReader<'r, 'f> {
    fn new(file: &'r GgufFile<'f>, tensor: &'r TensorInfo<'f>) -> Self {
        PieceReader {
            file,
            tensor,
            next_row: 0,
        }
    }

    /// The next `count` values (whole rows) into `buf`.
    fn next(&mut self, buf: &mut Vec<f32>, count: usize) -> Result<()> {
        let t = self.tensor;
        let ne0 = t.shape().first().copied().unwrap_or(1).max(1) as usize;
        let rows = count / ne0;
        let row_bytes = gguf_quant::row_bytes(t.ggml_type, ne0)?;
        let data = self.file.tensor_data(t);
        let bytes = data
            .get(self.next_row * row_bytes..(self.next_row + rows) * row_bytes)
            .with_context(|| {
                format!("tensor '{}' of the second file: rows past its data", t.name)
            })?;
        buf.resize(count, 0.0);
        gguf_quant::dequantize_row(t.ggml_type, bytes, buf)
            .with_context(|| format!("tensor '{}' of the second file", t.name))?;
        self.next_row += rows;
        Ok(())
    }
}

/// Running sums of a comparison, in f64.
#[derive(Default)]
struct Accumulator {
    n: u64,
    max_abs: f64,
    diff_sq: f64,
    a_sq: f64,
    b_sq: f64,
    ab: f64,
    nan_mismatches: u64,
}

impl Accumulator {
    fn add(&mut self, a: &[f32], b: &[f32]) {
        for (&x, &y) in a.iter().zip(b) {
            if x.is_nan() || y.is_nan() {
                if x.to_bits() != y.to_bits() {
                    self.nan_mismatches += 1;
                }
                continue;
            }
            let (x, y) = (f64::from(x), f64::from(y));
            let d = x - y;
            self.n += 1;
            self.max_abs = self.max_abs.max(d.abs());
            self.diff_sq += d * d;
            self.a_sq += x * x;
            self.b_sq += y * y;
            self.ab += x * y;
        }
    }

    fn finish(&self) -> Numbers {
        let n = self.n.max(1) as f64;
        let relative = if self.diff_sq == 0.0 {
            0.0
        } else if self.a_sq == 0.0 {
            f64::INFINITY
        } else {
            (self.diff_sq / self.a_sq).sqrt()
        };
        let cosine = match (self.a_sq, self.b_sq) {
            // Equal values: exactly 1, not 1 within the rounding of the products below.
            _ if self.diff_sq == 0.0 => 1.0,
            (a, b) if a == 0.0 || b == 0.0 => 0.0,
            (a, b) => (self.ab / (a.sqrt() * b.sqrt())).clamp(-1.0, 1.0),
        };
        Numbers {
            max_abs: self.max_abs,
            rms: (self.diff_sq / n).sqrt(),
            relative,
            cosine,
            nan_mismatches: self.nan_mismatches,
        }
    }
}

/// Everything found, for printing.
struct Report<'a> {
    a: String,
    b: String,
    header: Vec<(&'static str, Json, Json)>,
    added_keys: Vec<(&'a str, Value<'a>)>,
    removed_keys: Vec<(&'a str, Value<'a>)>,
    changed_keys: Vec<Changed<'a>>,
    added_tensors: Vec<&'a TensorInfo<'a>>,
    removed_tensors: Vec<&'a TensorInfo<'a>>,
    changed_tensors: Vec<TensorChange<'a>>,
    numbers: Option<Vec<(String, Numbers)>>,
    order_differs: bool,
    key_order_differs: bool,
    equal: bool,
}

/// Where two arrays first differ, for a changed array value: `(index, a, b)`; `None` when one
/// is a prefix of the other or they are not both arrays.
fn first_difference<'v>(a: &Value<'v>, b: &Value<'v>) -> Option<(u64, Value<'v>, Value<'v>)> {
    let (a, b) = (a.as_array()?, b.as_array()?);
    a.iter()
        .zip(b.iter())
        .enumerate()
        .find(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| (i as u64, x, y))
}

fn tensor_text(t: &TensorInfo<'_>) -> String {
    let dims: Vec<String> = t.shape().iter().map(u64::to_string).collect();
    format!("{} [{}]", t.ggml_type.name(), dims.join(", "))
}

fn tensor_json(t: &TensorInfo<'_>) -> Json {
    json!({ "type": t.ggml_type.name(), "shape": t.shape() })
}

/// An f64 as JSON, non-finite values as strings (as `inspect --json` writes them).
fn float(v: f64) -> Json {
    float_json(v, v.to_string())
}

impl Report<'_> {
    fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "--- {}\n+++ {}", self.a, self.b);
        for (field, a, b) in &self.header {
            let _ = writeln!(s, "~ header {field}: {a} -> {b}");
        }
        for (key, v) in &self.removed_keys {
            let _ = writeln!(s, "- key {key} = {}", value_text(v, false));
        }
        for (key, v) in &self.added_keys {
            let _ = writeln!(s, "+ key {key} = {}", value_text(v, false));
        }
        for c in &self.changed_keys {
            let _ = writeln!(
                s,
                "~ key {}: {} -> {}",
                c.key,
                value_text(&c.a, false),
                value_text(&c.b, false)
            );
            if let Some((i, x, y)) = first_difference(&c.a, &c.b) {
                let _ = writeln!(
                    s,
                    "    first difference at index {i}: {} -> {}",
                    value_text(&x, false),
                    value_text(&y, false)
                );
            }
        }
        if self.key_order_differs {
            let _ = writeln!(s, "~ the same metadata keys in another order");
        }
        for t in &self.removed_tensors {
            let _ = writeln!(s, "- tensor {} {}", t.name, tensor_text(t));
        }
        for t in &self.added_tensors {
            let _ = writeln!(s, "+ tensor {} {}", t.name, tensor_text(t));
        }
        for c in &self.changed_tensors {
            if c.layout {
                let _ = writeln!(
                    s,
                    "~ tensor {}: {} -> {}",
                    c.a.name,
                    tensor_text(c.a),
                    tensor_text(c.b)
                );
            } else if c.data {
                let _ = writeln!(s, "~ tensor {}: data differs", c.a.name);
            }
        }
        if self.order_differs {
            let _ = writeln!(s, "~ the same tensors in another order");
        }
        if let Some(numbers) = &self.numbers {
            let _ = writeln!(
                s,
                "\nValues ({} tensors of the same shape in both):",
                numbers.len()
            );
            let width = numbers
                .iter()
                .map(|(n, _)| n.chars().count().min(64))
                .max()
                .unwrap_or(0);
            for (name, n) in numbers {
                let name: String = name.chars().take(64).collect();
                let _ = write!(
                    s,
                    "  {name:width$}  max|d| {:>10.4e}  rms {:>10.4e}  rel {:>10.4e}  cos {:.8}",
                    n.max_abs, n.rms, n.relative, n.cosine
                );
                if n.nan_mismatches > 0 {
                    let _ = write!(s, "  NaN mismatches {}", n.nan_mismatches);
                }
                let _ = writeln!(s);
            }
        }
        let _ = writeln!(
            s,
            "{}",
            if self.equal {
                "the files are equal".to_string()
            } else {
                format!(
                    "{} header fields, {} metadata keys and {} tensors differ",
                    self.header.len(),
                    self.removed_keys.len() + self.added_keys.len() + self.changed_keys.len(),
                    self.removed_tensors.len()
                        + self.added_tensors.len()
                        + self.changed_tensors.len()
                )
            }
        );
        s
    }

    fn json(&self) -> Json {
        let limit = Some(ARRAY_PREVIEW);
        let keys = |list: &[(&str, Value<'_>)]| -> Vec<Json> {
            list.iter()
                .map(|(k, v)| {
                    json!({ "key": k, "type": v.value_type().name(), "value": value_json(v, limit) })
                })
                .collect()
        };
        let changed: Vec<Json> = self
            .changed_keys
            .iter()
            .map(|c| {
                let mut j = json!({
                    "key": c.key,
                    "a": { "type": c.a.value_type().name(), "value": value_json(&c.a, limit) },
                    "b": { "type": c.b.value_type().name(), "value": value_json(&c.b, limit) },
                });
                if let Some((i, x, y)) = first_difference(&c.a, &c.b) {
                    j["first_difference"] = json!({
                        "index": i, "a": value_json(&x, limit), "b": value_json(&y, limit),
                    });
                }
                j
            })
            .collect();
        let tensors = |list: &[&TensorInfo<'_>]| -> Vec<Json> {
            list.iter()
                .map(|t| json!({ "name": t.name, "type": t.ggml_type.name(), "shape": t.shape() }))
                .collect()
        };
        let changed_tensors: Vec<Json> = self
            .changed_tensors
            .iter()
            .map(|c| {
                json!({
                    "name": c.a.name,
                    "a": tensor_json(c.a),
                    "b": tensor_json(c.b),
                    "data_differs": c.data,
                })
            })
            .collect();
        let mut j = json!({
            "a": self.a,
            "b": self.b,
            "equal": self.equal,
            "header": self.header.iter().map(|(f, a, b)| json!({ "field": f, "a": a, "b": b })).collect::<Vec<_>>(),
            "metadata": {
                "removed": keys(&self.removed_keys),
                "added": keys(&self.added_keys),
                "changed": changed,
                "order_differs": self.key_order_differs,
            },
            "tensors": {
                "removed": tensors(&self.removed_tensors),
                "added": tensors(&self.added_tensors),
                "changed": changed_tensors,
                "order_differs": self.order_differs,
            },
        });
        if let Some(numbers) = &self.numbers {
            j["values"] = numbers
                .iter()
                .map(|(name, n)| {
                    json!({
                        "name": name,
                        "max_abs": float(n.max_abs),
                        "rms": float(n.rms),
                        "relative": float(n.relative),
                        "cosine": float(n.cosine),
                        "nan_mismatches": n.nan_mismatches,
                    })
                })
                .collect();
        }
        j
    }
}
