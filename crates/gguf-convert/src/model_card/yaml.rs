//! YAML as PyYAML's `safe_load` types it: the values of a model card's front matter (`Py`),
//! built from `saphyr-parser`'s events with SafeLoader's resolvers and constructors (YAML 1.1
//! booleans, sexagesimal and octal integers, timestamps, merge keys), and Python's `int()` and
//! `float()` of the scalars.

use gguf_tokenizer::pystr;
use regex::Regex;
use saphyr_parser::{Event, Parser, ScalarStyle};
use std::collections::{HashMap, HashSet};
use std::rc::Rc;
use std::sync::LazyLock;

use super::{MAX_MERGED_PAIRS, MAX_YAML_DEPTH};

// Python values, as PyYAML builds them.

/// A value of the front matter, with what gguf-py's code can tell of it.
#[derive(Debug, Clone)]
pub(super) enum Py {
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
    pub(super) fn str(s: &str) -> Py {
        Py::Str(Rc::from(s))
    }

    /// Python's `bool(value)`.
    pub(super) fn truthy(&self) -> bool {
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
    pub(super) fn type_name(&self) -> &'static str {
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

    pub(super) fn hashable(&self) -> bool {
        !matches!(
            self,
            Py::List(_) | Py::Dict(_) | Py::Set { .. } | Py::Recursive
        )
    }
}

/// `dict.get(key)` for a string key.
pub(super) fn get<'a>(pairs: &'a [(Py, Py)], key: &str) -> Option<&'a Py> {
    pairs.iter().rev().find_map(|(k, v)| match k {
        Py::Str(s) if &**s == key => Some(v),
        _ => None,
    })
}

// ---------------------------------------------------------------------------------------------
// YAML as PyYAML's SafeLoader loads it.

/// PyYAML's Reader refuses these characters.
pub(super) fn printable(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | ' '..='~' | '\u{85}' | '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..)
}

pub(super) enum Frame {
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

pub(super) const CORE: &str = "tag:yaml.org,2002:";

/// `yaml.safe_load(text)`: `None` for an empty stream.
pub(super) fn load_yaml(text: &str) -> std::result::Result<Option<Py>, String> {
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
pub(super) fn value_node(v: Py) -> std::result::Result<Py, String> {
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

pub(super) fn construct_seq(items: Vec<Py>, tag: Option<&str>) -> std::result::Result<Py, String> {
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
pub(super) fn construct_map(
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

pub(super) static BOOL_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$")
        .expect("valid regex")
});
pub(super) static FLOAT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?",
        r"|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?",
        r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*",
        r"|[-+]?\.(?:inf|Inf|INF)",
        r"|\.(?:nan|NaN|NAN))$"
    ))
    .expect("valid regex")
});
pub(super) static INT_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[-+]?0b[0-1_]+",
        r"|[-+]?0[0-7_]+",
        r"|[-+]?(?:0|[1-9][0-9_]*)",
        r"|[-+]?0x[0-9a-fA-F_]+",
        r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"
    ))
    .expect("valid regex")
});
pub(super) static NULL_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?:~|null|Null|NULL|)$").expect("valid regex"));
pub(super) static TIMESTAMP_RE: LazyLock<Regex> = LazyLock::new(|| {
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
pub(super) static TIMESTAMP_PARTS_RE: LazyLock<Regex> = LazyLock::new(|| {
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
pub(super) fn resolve(value: &str) -> &'static str {
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

pub(super) fn construct_scalar(
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

/// The ASCII form Python's `int()`/`float()` parse a string in: Unicode digits as ASCII digits,
/// surrounding whitespace stripped.
pub(super) fn py_number_text(s: &str) -> String {
    s.chars()
        .map(|c| match pystr::decimal_value(c) {
            Some(d) if !c.is_ascii() => char::from_digit(d, 10).unwrap_or(c),
            _ => c,
        })
        .collect::<String>()
        .trim_matches(pystr::isspace)
        .to_string()
}

/// Python's `int(s, base)` (underscores already removed): `Err` for invalid text, `Ok(None)`
/// for a value beyond `i128`.
pub(super) fn py_int(s: &str, base: u32) -> std::result::Result<Option<i128>, String> {
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
pub(super) fn py_float(s: &str) -> Option<f64> {
    let t = py_number_text(s);
    // Rust's grammar is Python's, but for underscores between digits (removed before here).
    if t.contains('_') {
        return None;
    }
    t.parse::<f64>().ok()
}

/// SafeConstructor's `construct_yaml_int`.
pub(super) fn construct_int(value: &str) -> std::result::Result<Py, String> {
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
pub(super) fn construct_float(value: &str) -> std::result::Result<f64, String> {
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
pub(super) fn construct_binary(value: &str) -> std::result::Result<Py, String> {
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
pub(super) fn construct_timestamp(value: &str) -> std::result::Result<Py, String> {
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
