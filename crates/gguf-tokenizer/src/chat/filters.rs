//! Jinja2's filters and tests where minijinja's differ: those that convert with `str()`, and
//! none and undefined as Jinja2 has them.

use minijinja::value::{Kwargs, Rest, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State, Value};

use super::budget::add_charged_filter;

use super::budget::{charge, charge_items};
use super::methods::replaced_len;
use super::python::{
    int_arg, number, py_args, py_repr_string, py_str, py_type, required, str_arg, type_error,
    Number,
};
use crate::pystr;

// Filters whose Jinja2 versions convert with str()

pub(super) fn join_filter(value: &Value, args: &[Value]) -> Result<String, Error> {
    let [sep, attribute] = py_args("join", args, ["d", "attribute"])?;
    let sep = sep.map(|s| py_str(&s)).unwrap_or_default();
    if value.is_undefined() {
        return Ok(String::new());
    }
    not_none(value)?;
    let mut out = String::new();
    let items: Vec<Value> = match value.as_str() {
        Some(s) => s.chars().map(Value::from).collect(),
        None => value.try_iter()?.collect(),
    };
    for (i, item) in items.iter().enumerate() {
        let text = match &attribute {
            Some(attr) => {
                let mut v = item.clone();
                for part in py_str(attr).split('.') {
                    v = match part.parse::<i64>() {
                        Ok(idx) => v.get_item(&Value::from(idx))?,
                        Err(_) => v.get_attr(part)?,
                    };
                }
                py_str(&v)
            }
            None => py_str(item),
        };
        charge(
            out.len()
                .saturating_add(sep.len())
                .saturating_add(text.len()),
        )?;
        if i > 0 {
            out.push_str(&sep);
        }
        out.push_str(&text);
    }
    Ok(out)
}

pub(super) fn trim_filter(value: &Value, args: &[Value]) -> Result<String, Error> {
    let [chars] = py_args("trim", args, ["chars"])?;
    let s = py_str(value);
    let chars = chars.map(|c| py_str(&c));
    Ok(pystr::strip(&s, chars.as_deref()).to_string())
}

/// Jinja2's `length`: `len()`, and 0 for undefined.
pub(super) fn length_filter(value: &Value) -> Result<usize, Error> {
    if value.is_undefined() {
        return Ok(0);
    }
    minijinja::filters::length(value)
}

/// Jinja2's `replace(s, old, new, count=None)`.
pub(super) fn replace_filter(value: &Value, args: &[Value]) -> Result<String, Error> {
    let [old, new, count] = py_args("replace", args, ["old", "new", "count"])?;
    let old = str_arg("replace", &required("replace", old)?)?;
    let new = str_arg("replace", &required("replace", new)?)?;
    let s = py_str(value);
    let count = count.map(|c| int_arg("replace", &c)).transpose()?;
    let limit = count.and_then(|n| usize::try_from(n).ok());
    charge(replaced_len(&s, &old, &new, limit.unwrap_or(usize::MAX)))?;
    Ok(match limit {
        Some(n) => s.replacen(old.as_str(), &new, n),
        None => s.replace(old.as_str(), &new),
    })
}

/// Jinja2's `int(value, default=0, base=10)`: a string is parsed as an int, else as a float;
/// what does not convert gives `default`.
pub(super) fn int_filter(value: &Value, args: &[Value]) -> Result<Value, Error> {
    let [default, base] = py_args("int", args, ["default", "base"])?;
    undefined_refuses(value)?;
    let default = default.unwrap_or(Value::from(0));
    let base = match base {
        Some(b) => int_arg("int", &b)?,
        None => 10,
    };
    Ok(match value.kind() {
        ValueKind::Bool => Value::from(i64::from(value.is_true())),
        ValueKind::Number => match number(value) {
            Number::Int(i) => Value::from(i),
            Number::Float(f) if f.is_finite() => Value::from(f.trunc() as i128),
            Number::Float(_) => default,
        },
        ValueKind::String => {
            let s = numeral(value);
            let radix = u32::try_from(base).ok().filter(|b| (2..=36).contains(b));
            let parsed = radix.and_then(|r| i128::from_str_radix(&s, r).ok());
            match parsed {
                Some(i) => Value::from(i),
                None => match s.parse::<f64>() {
                    Ok(f) if f.is_finite() && base == 10 => Value::from(f.trunc() as i128),
                    _ => default,
                },
            }
        }
        _ => default,
    })
}

/// Jinja2's `float(value, default=0.0)`.
pub(super) fn float_filter(value: &Value, args: &[Value]) -> Result<Value, Error> {
    let [default] = py_args("float", args, ["default"])?;
    undefined_refuses(value)?;
    let default = default.unwrap_or(Value::from(0.0));
    Ok(match value.kind() {
        ValueKind::Bool => Value::from(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => match number(value) {
            Number::Int(i) => Value::from(i as f64),
            Number::Float(f) => Value::from(f),
        },
        ValueKind::String => numeral(value)
            .parse::<f64>()
            .map(Value::from)
            .unwrap_or(default),
        _ => default,
    })
}

/// A string as Python's `int()` and `float()` read it: without surrounding whitespace and
/// with `_` digit separators dropped.
fn numeral(value: &Value) -> String {
    value
        .as_str()
        .unwrap_or_default()
        .trim_matches(pystr::isspace)
        .replace('_', "")
}

/// Jinja2's `title` filter: a capital after spaces, `-`, `(`, `{`, `[` and `<`.
pub(super) fn jinja_title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut begin = true;
    for c in s.chars() {
        if pystr::isspace(c) || matches!(c, '-' | '(' | '{' | '[' | '<') {
            out.extend(c.to_uppercase());
            begin = true;
        } else if begin {
            out.extend(c.to_uppercase());
            begin = false;
        } else {
            out.extend(c.to_lowercase());
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// None and undefined as Jinja2 has them. minijinja iterates none as an empty sequence; in Jinja2
// (Python) none is not iterable, while an undefined value is: it iterates as empty.

/// The error of Python's `iter(None)`.
pub(super) fn not_none(value: &Value) -> Result<(), Error> {
    if value.is_none() {
        return Err(type_error("'NoneType' object is not iterable".into()));
    }
    Ok(())
}

/// Jinja2's `Undefined` raises on `int()`, `float()` and arithmetic.
pub(super) fn undefined_refuses(value: &Value) -> Result<(), Error> {
    if value.is_undefined() {
        return Err(Error::from(ErrorKind::UndefinedError));
    }
    Ok(())
}

/// What `{% for %}` iterates: anything but none (see [`guard_for_loops`]).
pub(super) fn for_iterable(value: Value) -> Result<Value, Error> {
    not_none(&value)?;
    Ok(value)
}

/// Jinja2's `iterable` test, `iter(value)` succeeding: false for none, true for undefined.
pub(super) fn iterable_test(value: &Value) -> bool {
    !value.is_none() && value.try_iter().is_ok()
}

/// Jinja2's `in` test, Python's `value in container`: none holds nothing and is an error, and a
/// string holds only strings.
pub(super) fn in_test(state: &State, value: &Value, container: &Value) -> Result<bool, Error> {
    if container.is_none() {
        return Err(type_error(
            "argument of type 'NoneType' is not iterable".into(),
        ));
    }
    if container.kind() == ValueKind::String && value.kind() != ValueKind::String {
        return Err(type_error(format!(
            "'in <string>' requires string as left operand, not {}",
            py_type(value)
        )));
    }
    minijinja::tests::is_in(state, value, container)
}

/// Jinja2's `items`: an undefined value has no items.
pub(super) fn items_filter(value: &Value) -> Result<Value, Error> {
    if value.is_undefined() {
        return Ok(Value::from(Vec::<Value>::new()));
    }
    minijinja::filters::items(value)
}

/// Jinja2's `first`: undefined for an undefined value.
pub(super) fn first_filter(value: &Value) -> Result<Value, Error> {
    if value.is_undefined() {
        return Ok(Value::UNDEFINED);
    }
    not_none(value)?;
    minijinja::filters::first(value)
}

/// Jinja2's `last`: undefined for an undefined value.
pub(super) fn last_filter(value: Value) -> Result<Value, Error> {
    if value.is_undefined() {
        return Ok(Value::UNDEFINED);
    }
    not_none(&value)?;
    minijinja::filters::last(value)
}

/// minijinja's filters that iterate their input, each behind [`not_none`] as Jinja2's refuse
/// none, and [`add_refusing_none`] to register them under minijinja's names.
macro_rules! refusing_none {
    (
        with_state: $($sname:ident($svalue:ident: $svty:ty $(, $sarg:ident: $sty:ty)*)),* ;
        without_state: $($name:ident($value:ident: $vty:ty $(, $arg:ident: $ty:ty)*)),* ;
    ) => {
        $(
            fn $sname(state: &State, $svalue: $svty $(, $sarg: $sty)*) -> Result<Value, Error> {
                not_none(&$svalue)?;
                minijinja::filters::$sname(state, $svalue $(, $sarg)*)
            }
        )*
        $(
            fn $name($value: $vty $(, $arg: $ty)*) -> Result<Value, Error> {
                not_none(&$value)?;
                minijinja::filters::$name($value $(, $arg)*)
            }
        )*

        /// Registers minijinja's iterating filters behind [`not_none`], their results charged
        /// to the render.
        pub(super) fn add_refusing_none(env: &mut Environment<'static>) {
            $(add_charged_filter(env, stringify!($sname), $sname);)*
            $(add_charged_filter(env, stringify!($name), $name);)*
            add_charged_filter(env, "list", list);
            add_charged_filter(env, "batch", batch);
            add_charged_filter(env, "slice", slice);
        }
    };
}

refusing_none! {
    with_state:
        sort(value: Value, kwargs: Kwargs),
        unique(value: Value, kwargs: Kwargs),
        sum(value: Value),
        min(value: Value),
        max(value: Value);
    without_state:
        reverse(value: &Value),
        groupby(value: Value, attribute: Option<&str>, kwargs: Kwargs);
}

/// minijinja's `list`; a string's characters are charged before they become a list.
fn list(state: &State, value: Value) -> Result<Value, Error> {
    not_none(&value)?;
    if let Some(s) = value.as_str() {
        charge_items(s.len())?;
    }
    minijinja::filters::list(state, value)
}

/// The check of a filter that splits `value` into lists sized by `count` (`batch` fills the
/// last one up to `count`, `slice` makes `count` of them): not none, and the lists charged
/// before they are built.
fn check_split(value: &Value, count: usize) -> Result<(), Error> {
    not_none(value)?;
    charge_items(value.len().unwrap_or(0).saturating_add(count))
}

/// minijinja's `batch`, behind [`check_split`].
fn batch(state: &State, value: Value, count: usize, fill: Option<Value>) -> Result<Value, Error> {
    check_split(&value, count)?;
    minijinja::filters::batch(state, value, count, fill)
}

/// minijinja's `slice`, behind [`check_split`].
fn slice(state: &State, value: Value, count: usize, fill: Option<Value>) -> Result<Value, Error> {
    check_split(&value, count)?;
    minijinja::filters::slice(state, value, count, fill)
}

/// Jinja2's `indent(s, width=4, first=False, blank=False)`: `width` spaces (or the string
/// `width`) before each line but the first, blank lines left alone unless `blank`; the lines
/// split as Python's `str.splitlines` splits them. Charged before it is built.
pub(super) fn indent_filter(value: &Value, args: &[Value]) -> Result<String, Error> {
    let [width, first, blank] = py_args("indent", args, ["width", "first", "blank"])?;
    let indention = match width {
        None => "    ".to_string(),
        Some(w) if w.kind() == ValueKind::String => w.as_str().unwrap_or_default().to_string(),
        Some(w) => {
            let n = usize::try_from(int_arg("indent", &w)?).unwrap_or(0);
            charge(n)?;
            " ".repeat(n)
        }
    };
    let (first, blank) = (
        first.is_some_and(|v| v.is_true()),
        blank.is_some_and(|v| v.is_true()),
    );
    let mut s = py_str(value);
    s.push('\n');
    let lines = pystr::splitlines(&s, false);
    charge(
        s.len().saturating_add(
            lines
                .len()
                .saturating_add(1)
                .saturating_mul(indention.len() + 1),
        ),
    )?;
    let mut out = String::new();
    if first {
        out.push_str(&indention);
    }
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            out.push('\n');
            if blank || !line.is_empty() {
                out.push_str(&indention);
            }
        }
        out.push_str(line);
    }
    Ok(out)
}

/// minijinja's `format` (printf style); the widths and precisions its conversions ask for are
/// charged before it pads to them.
pub(super) fn format_filter(
    state: &State,
    format: &Value,
    args: Rest<Value>,
) -> Result<Value, Error> {
    if let Some(f) = format.as_str() {
        charge(printf_padding(f))?;
    }
    minijinja::filters::format(state, format, args)
}

/// The sum of the widths and precisions of a printf format's conversions (`%10s`, `%.3f`).
fn printf_padding(format: &str) -> usize {
    let mut total = 0usize;
    let mut rest = format;
    while let Some(at) = rest.find('%') {
        rest = &rest[at + 1..];
        let spec_len = rest
            .find(|c: char| !matches!(c, '-' | '+' | ' ' | '#' | '.' | '0'..='9'))
            .unwrap_or(rest.len());
        for number in rest[..spec_len].split(|c: char| !c.is_ascii_digit()) {
            total = total.saturating_add(number.parse::<usize>().unwrap_or(if number.is_empty() {
                0
            } else {
                usize::MAX
            }));
        }
        rest = &rest[spec_len..];
        // `%%` is a literal percent sign, not the start of the next conversion.
        rest = rest.strip_prefix('%').unwrap_or(rest);
    }
    total
}

/// Jinja2's `pprint`: Python's `repr` (without `pformat`'s line wrapping of long values).
pub(super) fn pprint_filter(value: &Value) -> String {
    py_repr_string(value)
}
