//! Python's `str()` and `repr()` of template values, its type names and errors, and the
//! binding of a Python call's arguments.

use std::fmt::Write as _;

use minijinja::value::{Kwargs, ValueKind};
use minijinja::{Error, ErrorKind, Value};

use super::budget::{mark_too_long, value_cap};
use super::{MAX_DEPTH, MAX_NODES};

/// Python's `str(value)`; undefined is empty, as Jinja2's `Undefined` is.
pub(super) fn py_str(value: &Value) -> String {
    match value.kind() {
        ValueKind::Undefined => String::new(),
        ValueKind::String => value.as_str().unwrap_or_default().to_string(),
        _ => py_repr_string(value),
    }
}

pub(super) fn py_repr_string(value: &Value) -> String {
    let mut out = String::new();
    let mut budget = MAX_NODES;
    py_repr(value, &mut out, 0, &mut budget);
    out
}

/// Python's `repr(value)`. Past [`MAX_DEPTH`] levels or [`MAX_NODES`] values it writes `...`,
/// as Python does for a container inside itself. Past the longest value a render may build it
/// stops, and the render fails ([`mark_too_long`]).
pub(super) fn py_repr(value: &Value, out: &mut String, depth: usize, budget: &mut usize) {
    if out.len() > value_cap() {
        mark_too_long();
        return;
    }
    if depth > MAX_DEPTH || *budget == 0 {
        out.push_str("...");
        return;
    }
    *budget -= 1;
    match value.kind() {
        ValueKind::Undefined => out.push_str("Undefined"),
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => match number(value) {
            Number::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Number::Float(f) => out.push_str(&py_float_repr(f)),
        },
        ValueKind::String => py_str_repr(value.as_str().unwrap_or_default(), out),
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            if let Ok(iter) = value.try_iter() {
                for (i, item) in iter.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    py_repr(&item, out, depth + 1, budget);
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            if let Some(pairs) = value.as_object().and_then(|o| o.try_iter_pairs()) {
                for (i, (k, v)) in pairs.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    py_repr(&k, out, depth + 1, budget);
                    out.push_str(": ");
                    py_repr(&v, out, depth + 1, budget);
                }
            }
            out.push('}');
        }
        _ => {
            let _ = write!(out, "{value}");
        }
    }
}

/// Python's `repr()` of a string: single quotes unless it holds a `'` and no `"`.
pub(super) fn py_str_repr(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if py_printable(c) => out.push(c),
            c if (c as u32) < 0x100 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if (c as u32) < 0x10000 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\U{:08x}", c as u32);
            }
        }
    }
    out.push(quote);
}

/// Python's `str.isprintable` for one character, without Unicode's full category tables:
/// controls, separators other than the space, format characters and private use are not.
pub(super) fn py_printable(c: char) -> bool {
    let u = c as u32;
    !(c.is_control()
        || matches!(u,
            0xa0 | 0xad | 0x600..=0x605 | 0x61c | 0x6dd | 0x70f | 0x1680 | 0x180e
            | 0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x2064 | 0x2066..=0x206f
            | 0x3000 | 0xd800..=0xf8ff | 0xfeff | 0xfff9..=0xfffb | 0xe0001 | 0xe0020..=0xe007f
            | 0xf0000..)
        || (u & 0xfffe) == 0xfffe)
}

/// Python's `repr(float)`: the shortest digits that round-trip, in fixed notation for
/// exponents from -5 to 15 and scientific notation (`1e-05`, `1.5e+16`) beyond.
pub(super) fn py_float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf" } else { "-inf" }.into();
    }
    let sci = format!("{f:e}"); // shortest round-trip digits, e.g. "-1.2345e-7"
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let mut out = String::from(sign);
    if (-4..16).contains(&exp) {
        let point = exp + 1; // digits before the decimal point
        if point <= 0 {
            out.push_str("0.");
            out.extend(std::iter::repeat_n('0', (-point) as usize));
            out.push_str(&digits);
        } else {
            let point = point as usize;
            if digits.len() <= point {
                out.push_str(&digits);
                out.extend(std::iter::repeat_n('0', point - digits.len()));
                out.push_str(".0");
            } else {
                out.push_str(&digits[..point]);
                out.push('.');
                out.push_str(&digits[point..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        let _ = write!(
            out,
            "e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.unsigned_abs()
        );
    }
    out
}

pub(super) enum Number {
    Int(i128),
    Float(f64),
}

pub(super) fn number(value: &Value) -> Number {
    if value.is_integer() {
        if let Ok(i) = i128::try_from(value.clone()) {
            return Number::Int(i);
        }
        if let Ok(u) = u128::try_from(value.clone()) {
            return Number::Float(u as f64);
        }
    }
    Number::Float(f64::try_from(value.clone()).unwrap_or(f64::NAN))
}

/// Python's name of a value's type, for error messages.
pub(super) fn py_type(value: &Value) -> &'static str {
    match value.kind() {
        ValueKind::Undefined => "Undefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if value.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq => "list",
        ValueKind::Map => "dict",
        ValueKind::Iterable => "generator",
        _ => "object",
    }
}

pub(super) fn type_error(message: String) -> Error {
    Error::new(ErrorKind::InvalidOperation, message)
}

/// Binds a method's arguments (positional, then keywords) to its parameter names; a none
/// argument counts as absent, as every parameter here defaults to `None` in Python.
pub(super) fn py_args<const N: usize>(
    method: &str,
    args: &[Value],
    names: [&str; N],
) -> Result<[Option<Value>; N], Error> {
    let (positional, kwargs) = match args.split_last() {
        Some((last, rest)) if last.is_kwargs() => (rest, Some(Kwargs::try_from(last.clone())?)),
        _ => (args, None),
    };
    if positional.len() > N {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            format!(
                "{method}() takes at most {N} arguments ({} given)",
                positional.len()
            ),
        ));
    }
    let mut out: [Option<Value>; N] = std::array::from_fn(|i| positional.get(i).cloned());
    if let Some(kwargs) = kwargs {
        for key in kwargs.args() {
            let Some(i) = names.iter().position(|n| *n == key) else {
                return Err(Error::new(
                    ErrorKind::TooManyArguments,
                    format!("{method}() got an unexpected keyword argument '{key}'"),
                ));
            };
            if out[i].is_some() {
                return Err(Error::new(
                    ErrorKind::TooManyArguments,
                    format!("{method}() got multiple values for argument '{key}'"),
                ));
            }
            out[i] = Some(kwargs.peek::<Value>(key)?);
        }
    }
    for slot in &mut out {
        if slot
            .as_ref()
            .is_some_and(|v| v.is_none() || v.is_undefined())
        {
            *slot = None;
        }
    }
    Ok(out)
}

pub(super) fn required(method: &str, arg: Option<Value>) -> Result<Value, Error> {
    arg.ok_or_else(|| {
        Error::new(
            ErrorKind::MissingArgument,
            format!("{method}() is missing a required argument"),
        )
    })
}

pub(super) fn str_arg(method: &str, arg: &Value) -> Result<String, Error> {
    arg.as_str().map(str::to_string).ok_or_else(|| {
        type_error(format!(
            "{method}() argument must be str, not {}",
            py_type(arg)
        ))
    })
}

pub(super) fn int_arg(method: &str, arg: &Value) -> Result<i64, Error> {
    if arg.is_integer() || arg.kind() == ValueKind::Bool {
        i64::try_from(arg.clone()).or(Ok(i64::from(arg.is_true())))
    } else {
        Err(type_error(format!(
            "{method}() argument must be int, not {}",
            py_type(arg)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        let cases = [
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (1.0, "1.0"),
            (0.1, "0.1"),
            (0.30000000000000004, "0.30000000000000004"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1.5e16, "1.5e+16"),
            (1e16, "1e+16"),
            (1e15, "1000000000000000.0"),
            (123456789.125, "123456789.125"),
            (1e22, "1e+22"),
            (-2.5e-7, "-2.5e-07"),
            (1.7976931348623157e308, "1.7976931348623157e+308"),
            (5e-324, "5e-324"),
        ];
        for (f, want) in cases {
            assert_eq!(py_float_repr(f), want, "{f:e}");
        }
    }
}
