//! The Python methods of `str`, `list` and `dict` that templates call (`.strip()`,
//! `.split()`, `.startswith()`, `.items()`, `.get()`, ...), with Python's rules.

use minijinja::value::ValueKind;
use minijinja::{Error, ErrorKind, State, Value};

use super::budget::{charge, charge_value, check_tree};
use super::python::{int_arg, py_args, py_repr_string, py_type, required, str_arg, type_error};
use crate::pystr;

/// The part of `s` a Python slice `[start:end]` of character indices selects, with the
/// character index it starts at; `None` when `start` is past the end (Python then finds nothing).
pub(super) fn char_window<'s>(
    method: &str,
    s: &'s str,
    start: &Option<Value>,
    end: &Option<Value>,
) -> Result<Option<(&'s str, usize)>, Error> {
    let len = s.chars().count() as i64;
    let norm = |i: i64| if i < 0 { (i + len).max(0) } else { i };
    let start = match start {
        Some(v) => norm(int_arg(method, v)?),
        None => 0,
    };
    let end = match end {
        Some(v) => norm(int_arg(method, v)?).min(len),
        None => len,
    };
    if start > len {
        return Ok(None);
    }
    let byte = |ci: i64| {
        s.char_indices()
            .nth(ci as usize)
            .map(|(b, _)| b)
            .unwrap_or(s.len())
    };
    let (bs, be) = (byte(start), byte(end.max(start)));
    Ok(Some((&s[bs..be], start as usize)))
}

pub(super) fn py_method(
    _state: &State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    let out = match value.kind() {
        ValueKind::String => str_method(value.as_str().unwrap_or_default(), method, args),
        ValueKind::Map => map_method(value, method, args),
        ValueKind::Seq => seq_method(value, method, args),
        _ => Err(Error::from(ErrorKind::UnknownMethod)),
    }?;
    charge_value(&out)?;
    check_tree(&out)?;
    Ok(out)
}

/// The length of `s` with (at most `limit` of) the `old` in it replaced by `new`, as Python's
/// `str.replace` counts them (an empty `old` matches before every character and at the end).
pub(super) fn replaced_len(s: &str, old: &str, new: &str, limit: usize) -> usize {
    let found = if old.is_empty() {
        s.chars().count().saturating_add(1)
    } else {
        s.matches(old).count()
    }
    .min(limit);
    s.len()
        .saturating_add(found.saturating_mul(new.len()))
        .saturating_sub(found.saturating_mul(old.len()))
}

pub(super) fn str_method(s: &str, method: &str, args: &[Value]) -> Result<Value, Error> {
    let predicate = |f: &dyn Fn(char) -> bool| {
        py_args(method, args, [])?;
        Ok(Value::from(!s.is_empty() && s.chars().all(f)))
    };
    match method {
        "upper" | "lower" | "casefold" | "swapcase" | "title" | "capitalize" => {
            py_args(method, args, [])?;
            Ok(Value::from(match method {
                "upper" => pystr::upper(s),
                "lower" | "casefold" => pystr::lower(s),
                "title" => pystr::title(s),
                "capitalize" => pystr::capitalize(s),
                _ => pystr::swapcase(s),
            }))
        }
        "strip" | "lstrip" | "rstrip" => {
            let [chars] = py_args(method, args, ["chars"])?;
            let chars = chars.map(|c| str_arg(method, &c)).transpose()?;
            let chars = chars.as_deref();
            Ok(Value::from(match method {
                "strip" => pystr::strip(s, chars),
                "lstrip" => pystr::lstrip(s, chars),
                _ => pystr::rstrip(s, chars),
            }))
        }
        "split" | "rsplit" => {
            let [sep, maxsplit] = py_args(method, args, ["sep", "maxsplit"])?;
            let maxsplit = match maxsplit {
                Some(m) => int_arg(method, &m)?,
                None => -1,
            };
            // A negative maxsplit is Python's "no limit".
            let limit = usize::try_from(maxsplit).ok();
            let parts = match sep {
                Some(sep) => {
                    let sep = str_arg(method, &sep)?;
                    if sep.is_empty() {
                        return Err(type_error("empty separator".into()));
                    }
                    if method == "split" {
                        pystr::split(s, &sep, limit)
                    } else {
                        pystr::rsplit(s, &sep, limit)
                    }
                }
                None if method == "split" => pystr::split_whitespace(s, limit),
                None => pystr::rsplit_whitespace(s, limit),
            };
            Ok(Value::from(
                parts.into_iter().map(Value::from).collect::<Vec<_>>(),
            ))
        }
        "splitlines" => {
            let [keepends] = py_args(method, args, ["keepends"])?;
            let keepends = keepends.is_some_and(|k| k.is_true());
            let lines: Vec<Value> = pystr::splitlines(s, keepends)
                .into_iter()
                .map(Value::from)
                .collect();
            Ok(Value::from(lines))
        }
        "startswith" | "endswith" => {
            let [affix, start, end] = py_args(method, args, ["prefix", "start", "end"])?;
            let affix = required(method, affix)?;
            let Some((window, _)) = char_window(method, s, &start, &end)? else {
                return Ok(Value::from(false));
            };
            let test = |a: &str| {
                if method == "startswith" {
                    window.starts_with(a)
                } else {
                    window.ends_with(a)
                }
            };
            if let Some(a) = affix.as_str() {
                return Ok(Value::from(test(a)));
            }
            if matches!(affix.kind(), ValueKind::Seq | ValueKind::Iterable) {
                for a in affix.try_iter()? {
                    let a = a.as_str().ok_or_else(|| {
                        type_error(format!(
                            "tuple for {method} must only contain str, not {}",
                            py_type(&a)
                        ))
                    })?;
                    if test(a) {
                        return Ok(Value::from(true));
                    }
                }
                return Ok(Value::from(false));
            }
            Err(type_error(format!(
                "{method} first arg must be str or a tuple of str, not {}",
                py_type(&affix)
            )))
        }
        "find" | "rfind" | "index" | "rindex" | "count" => {
            let [sub, start, end] = py_args(method, args, ["sub", "start", "end"])?;
            let sub = str_arg(method, &required(method, sub)?)?;
            let window = char_window(method, s, &start, &end)?;
            if method == "count" {
                return Ok(Value::from(match window {
                    None => 0,
                    Some((w, _)) if sub.is_empty() => w.chars().count() + 1,
                    Some((w, _)) => w.matches(sub.as_str()).count(),
                }));
            }
            let found = window.and_then(|(w, offset)| {
                let at = if method.starts_with('r') {
                    w.rfind(sub.as_str())
                } else {
                    w.find(sub.as_str())
                };
                at.map(|b| (offset + w[..b].chars().count()) as i64)
            });
            match (found, method) {
                (Some(i), _) => Ok(Value::from(i)),
                (None, "find" | "rfind") => Ok(Value::from(-1)),
                (None, _) => Err(Error::new(
                    ErrorKind::InvalidOperation,
                    "substring not found",
                )),
            }
        }
        "replace" => {
            let [old, new, count] = py_args(method, args, ["old", "new", "count"])?;
            let old = str_arg(method, &required(method, old)?)?;
            let new = str_arg(method, &required(method, new)?)?;
            let count = match count {
                Some(c) => int_arg(method, &c)?,
                None => -1,
            };
            let limit = usize::try_from(count).unwrap_or(usize::MAX);
            charge(replaced_len(s, &old, &new, limit))?;
            Ok(Value::from(match usize::try_from(count) {
                Ok(n) => s.replacen(old.as_str(), &new, n),
                Err(_) => s.replace(old.as_str(), &new),
            }))
        }
        "join" => {
            let [items] = py_args(method, args, ["iterable"])?;
            let items = required(method, items)?;
            let mut out = String::new();
            let items: Vec<Value> = match items.as_str() {
                Some(text) => text.chars().map(Value::from).collect(),
                None => items.try_iter()?.collect(),
            };
            for (i, item) in items.iter().enumerate() {
                let Some(text) = item.as_str() else {
                    return Err(type_error(format!(
                        "sequence item {i}: expected str instance, {} found",
                        py_type(item)
                    )));
                };
                charge(out.len().saturating_add(s.len()).saturating_add(text.len()))?;
                if i > 0 {
                    out.push_str(s);
                }
                out.push_str(text);
            }
            Ok(Value::from(out))
        }
        "removeprefix" | "removesuffix" => {
            let [affix] = py_args(method, args, ["affix"])?;
            let affix = str_arg(method, &required(method, affix)?)?;
            Ok(Value::from(if method == "removeprefix" {
                s.strip_prefix(affix.as_str()).unwrap_or(s)
            } else {
                s.strip_suffix(affix.as_str()).unwrap_or(s)
            }))
        }
        "partition" | "rpartition" => {
            let [sep] = py_args(method, args, ["sep"])?;
            let sep = str_arg(method, &required(method, sep)?)?;
            if sep.is_empty() {
                return Err(type_error("empty separator".into()));
            }
            let found = if method == "partition" {
                s.find(sep.as_str())
            } else {
                s.rfind(sep.as_str())
            };
            let parts = match (found, method) {
                (Some(i), _) => [&s[..i], sep.as_str(), &s[i + sep.len()..]],
                (None, "partition") => [s, "", ""],
                (None, _) => ["", "", s],
            };
            Ok(Value::from(
                parts.iter().map(|p| Value::from(*p)).collect::<Vec<_>>(),
            ))
        }
        "center" | "ljust" | "rjust" | "zfill" => {
            let [width, fill] = py_args(method, args, ["width", "fillchar"])?;
            let width = usize::try_from(int_arg(method, &required(method, width)?)?).unwrap_or(0);
            let fill = match fill {
                Some(f) => {
                    let f = str_arg(method, &f)?;
                    let mut chars = f.chars();
                    match (chars.next(), chars.next()) {
                        (Some(c), None) => c,
                        _ => {
                            return Err(type_error(
                                "The fill character must be exactly one character long".into(),
                            ))
                        }
                    }
                }
                None => ' ',
            };
            let len = s.chars().count();
            if width <= len {
                return Ok(Value::from(s));
            }
            let pad = width - len;
            charge(s.len().saturating_add(pad.saturating_mul(fill.len_utf8())))?;
            let (left, right) = match method {
                "ljust" => (0, pad),
                "rjust" => (pad, 0),
                "zfill" => (pad, 0),
                _ => {
                    let left = pad / 2 + (pad & width & 1);
                    (left, pad - left)
                }
            };
            let mut out = String::new();
            if method == "zfill" {
                let (sign, digits) = match s.chars().next() {
                    Some(c @ ('+' | '-')) => (Some(c), &s[1..]),
                    _ => (None, s),
                };
                out.extend(sign);
                out.extend(std::iter::repeat_n('0', pad));
                out.push_str(digits);
            } else {
                out.extend(std::iter::repeat_n(fill, left));
                out.push_str(s);
                out.extend(std::iter::repeat_n(fill, right));
            }
            Ok(Value::from(out))
        }
        "format" => {
            minijinja::format_filter(minijinja::FormatStyle::StrFormat, s, args).map(Value::from)
        }
        // Rust has no Numeric_Type: digits and numerics are approximated by categories N*.
        "isdigit" | "isnumeric" => predicate(&|c: char| c.is_numeric()),
        "isdecimal" => predicate(&pystr::isdecimal),
        "isalpha" => predicate(&pystr::isalpha),
        "isalnum" => predicate(&|c: char| c.is_alphanumeric()),
        "isspace" => predicate(&pystr::isspace),
        "isascii" => {
            py_args(method, args, [])?;
            Ok(Value::from(s.is_ascii()))
        }
        "islower" | "isupper" | "istitle" => {
            py_args(method, args, [])?;
            Ok(Value::from(match method {
                "islower" => pystr::islower(s),
                "isupper" => pystr::isupper(s),
                _ => pystr::istitle(s),
            }))
        }
        _ => Err(Error::from(ErrorKind::UnknownMethod)),
    }
}

pub(super) fn map_method(value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    let Some(obj) = value.as_object() else {
        return Err(Error::from(ErrorKind::UnknownMethod));
    };
    let pairs = || -> Vec<(Value, Value)> {
        obj.try_iter_pairs()
            .map(|p| p.collect())
            .unwrap_or_default()
    };
    match method {
        "get" => {
            let [key, default] = py_args(method, args, ["key", "default"])?;
            let key = required(method, key)?;
            Ok(match obj.get_value(&key) {
                Some(v) => v,
                None => default.unwrap_or(Value::from(())),
            })
        }
        "items" => {
            py_args(method, args, [])?;
            Ok(Value::from(
                pairs()
                    .into_iter()
                    .map(|(k, v)| Value::from(vec![k, v]))
                    .collect::<Vec<_>>(),
            ))
        }
        "keys" => {
            py_args(method, args, [])?;
            Ok(Value::from(
                pairs().into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
            ))
        }
        "values" => {
            py_args(method, args, [])?;
            Ok(Value::from(
                pairs().into_iter().map(|(_, v)| v).collect::<Vec<_>>(),
            ))
        }
        "copy" => {
            py_args(method, args, [])?;
            Ok(pairs().into_iter().collect())
        }
        _ => Err(Error::from(ErrorKind::UnknownMethod)),
    }
}

pub(super) fn seq_method(value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    match method {
        "count" => {
            let [x] = py_args(method, args, ["value"])?;
            let x = x.unwrap_or(Value::from(()));
            Ok(Value::from(value.try_iter()?.filter(|v| *v == x).count()))
        }
        "index" => {
            let [x] = py_args(method, args, ["value"])?;
            let x = x.unwrap_or(Value::from(()));
            match value.try_iter()?.position(|v| v == x) {
                Some(i) => Ok(Value::from(i)),
                None => Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("{} is not in list", py_repr_string(&x)),
                )),
            }
        }
        "copy" => {
            py_args(method, args, [])?;
            Ok(Value::from(value.try_iter()?.collect::<Vec<_>>()))
        }
        _ => Err(Error::from(ErrorKind::UnknownMethod)),
    }
}
