//! `generation_config.json`'s recommended sampler settings, written as gguf-py writes
//! `general.sampling.*`.

use crate::error::Result;
use crate::hf::json::Reads;
use gguf_format::OwnedValue;
use serde_json::Value as Json;
use std::path::Path;

use super::{file_error, json_type, read_bounded, utf8, MAX_CONFIG_BYTES};

/// The gguf-py writers of the sampling settings, in writing order.
#[derive(Clone, Copy)]
pub(super) enum Sampling {
    Str,
    I32,
    F32,
}

pub(super) const SAMPLING: [(&str, &[&str], Sampling); 12] = [
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
pub(super) fn load_sampling(reads: &Reads, path: &Path) -> Result<Vec<(String, OwnedValue)>> {
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
pub(super) fn py_f32(x: f64) -> Option<f32> {
    if x.is_nan() {
        let bits = x.to_bits();
        let sign = ((bits >> 63) as u32) << 31;
        let payload = ((bits >> 29) as u32 & 0x007f_ffff) | 0x0040_0000;
        return Some(f32::from_bits(sign | 0x7f80_0000 | payload));
    }
    let f = x as f32;
    (x.is_infinite() || f.is_finite()).then_some(f)
}

pub(super) fn json_truthy(v: &Json) -> bool {
    match v {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64() != Some(0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(o) => !o.is_empty(),
    }
}
