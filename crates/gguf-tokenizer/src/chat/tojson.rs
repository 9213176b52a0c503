//! `tojson` as `transformers` defines it: `json.dumps(x, ensure_ascii=False, indent=None,
//! separators=None, sort_keys=False)`.

use std::fmt::Write as _;

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, Value};

use super::budget::check_len;
use super::python::{number, py_args, py_float_repr, py_type, type_error, Number};
use super::{MAX_DEPTH, MAX_NODES};

pub(super) struct JsonStyle {
    ensure_ascii: bool,
    indent: Option<String>,
    item_sep: String,
    key_sep: String,
    sort_keys: bool,
}

pub(super) fn tojson(value: &Value, args: &[Value]) -> Result<String, Error> {
    let [ensure_ascii, indent, separators, sort_keys] = py_args(
        "tojson",
        args,
        ["ensure_ascii", "indent", "separators", "sort_keys"],
    )?;
    let indent = match indent {
        None => None,
        Some(v) if v.kind() == ValueKind::String => {
            Some(v.as_str().unwrap_or_default().to_string())
        }
        Some(v) if v.kind() == ValueKind::Bool || v.is_integer() => {
            let n = i64::try_from(v.clone()).unwrap_or(i64::from(v.is_true()));
            Some(" ".repeat(n.clamp(0, 1024) as usize))
        }
        Some(v) => {
            return Err(type_error(format!(
                "indent must be an int or a string, not {}",
                py_type(&v)
            )))
        }
    };
    let (item_sep, key_sep) = match separators {
        None if indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
        Some(v) => {
            let parts: Vec<Value> = v
                .try_iter()
                .map_err(|_| type_error("separators must be a pair of strings".into()))?
                .collect();
            match parts.as_slice() {
                [a, b] if a.as_str().is_some() && b.as_str().is_some() => (
                    a.as_str().unwrap_or_default().to_string(),
                    b.as_str().unwrap_or_default().to_string(),
                ),
                _ => return Err(type_error("separators must be a pair of strings".into())),
            }
        }
    };
    let style = JsonStyle {
        ensure_ascii: ensure_ascii.is_some_and(|v| v.is_true()),
        indent,
        item_sep,
        key_sep,
        sort_keys: sort_keys.is_some_and(|v| v.is_true()),
    };
    let mut out = String::new();
    let mut budget = MAX_NODES;
    write_json(value, &style, 0, &mut budget, &mut out)?;
    Ok(out)
}

pub(super) fn write_json(
    value: &Value,
    style: &JsonStyle,
    level: usize,
    budget: &mut usize,
    out: &mut String,
) -> Result<(), Error> {
    if level > MAX_DEPTH || *budget == 0 {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "Circular reference detected (or a value too large for tojson)",
        ));
    }
    *budget -= 1;
    // The text is charged once whole (tojson is a charged filter); on the way it may not grow
    // past the longest value.
    check_len(out.len())?;
    match value.kind() {
        ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if value.is_true() { "true" } else { "false" }),
        ValueKind::Number => match number(value) {
            Number::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Number::Float(f) if f.is_nan() => out.push_str("NaN"),
            Number::Float(f) if f.is_infinite() => {
                out.push_str(if f > 0.0 { "Infinity" } else { "-Infinity" })
            }
            Number::Float(f) => out.push_str(&py_float_repr(f)),
        },
        ValueKind::String => json_str(value.as_str().unwrap_or_default(), style.ensure_ascii, out),
        ValueKind::Seq | ValueKind::Iterable => {
            let items: Vec<Value> = value.try_iter()?.collect();
            if items.is_empty() {
                out.push_str("[]");
                return Ok(());
            }
            out.push('[');
            let newline = json_newline(style, level + 1);
            out.push_str(&newline);
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                    out.push_str(&newline);
                }
                write_json(item, style, level + 1, budget, out)?;
            }
            out.push_str(&json_newline(style, level));
            out.push(']');
        }
        ValueKind::Map => {
            let mut pairs: Vec<(Value, Value)> = value
                .as_object()
                .and_then(|o| o.try_iter_pairs())
                .map(|p| p.collect())
                .unwrap_or_default();
            if pairs.is_empty() {
                out.push_str("{}");
                return Ok(());
            }
            if style.sort_keys {
                pairs.sort_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            let newline = json_newline(style, level + 1);
            out.push_str(&newline);
            for (i, (k, v)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push_str(&style.item_sep);
                    out.push_str(&newline);
                }
                let key = match k.kind() {
                    ValueKind::String => k.as_str().unwrap_or_default().to_string(),
                    ValueKind::Bool => (if k.is_true() { "true" } else { "false" }).to_string(),
                    ValueKind::None => "null".to_string(),
                    ValueKind::Number => match number(k) {
                        Number::Int(i) => i.to_string(),
                        Number::Float(f) => py_float_repr(f),
                    },
                    _ => {
                        return Err(type_error(format!(
                            "keys must be str, int, float, bool or None, not {}",
                            py_type(k)
                        )))
                    }
                };
                json_str(&key, style.ensure_ascii, out);
                out.push_str(&style.key_sep);
                write_json(v, style, level + 1, budget, out)?;
            }
            out.push_str(&json_newline(style, level));
            out.push('}');
        }
        _ => {
            return Err(type_error(format!(
                "Object of type {} is not JSON serializable",
                py_type(value)
            )))
        }
    }
    Ok(())
}

pub(super) fn json_newline(style: &JsonStyle, level: usize) -> String {
    match &style.indent {
        Some(indent) => {
            let mut s = String::with_capacity(1 + indent.len() * level);
            s.push('\n');
            for _ in 0..level {
                s.push_str(indent);
            }
            s
        }
        None => String::new(),
    }
}

/// A JSON string as Python's `json` module writes it.
pub(super) fn json_str(s: &str, ensure_ascii: bool, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if ensure_ascii && !(' '..='~').contains(&c) => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    let _ = write!(out, "\\u{unit:04x}");
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
