//! gguf-py's `Metadata.get_model_id_components` and `Metadata.id_to_title`: an organisation,
//! base name, fine-tune, version and size label read from a model id such as
//! `meta-llama/Llama-2-7b-chat-hf`.

use gguf_tokenizer::pystr;
use regex::Regex;
use std::sync::LazyLock;

use super::yaml::py_float;

/// What gguf-py reads from a model id such as `meta-llama/Llama-2-7b-chat-hf`.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Components {
    pub(super) full: String,
    pub(super) org: Option<String>,
    pub(super) basename: Option<String>,
    pub(super) finetune: Option<String>,
    pub(super) version: Option<String>,
    pub(super) size_label: Option<String>,
}

pub(super) const VERSION: u8 = 1;
pub(super) const TYPE: u8 = 2;
pub(super) const SIZE: u8 = 4;
pub(super) const FINETUNE: u8 = 8;
pub(super) const BASENAME: u8 = 16;

pub(super) static VERSION_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(?:(?:v|iter)?\d+(?:[.]\d+)*)$").expect("valid regex"));
pub(super) static TYPE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(?:i?q\d(?:_\w)*|b?fp?(?:16|32))$").expect("valid regex"));
pub(super) static SIZE_RE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:(?:[A]|\d+[x])?\d+(?:[._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl)$")
        .expect("valid regex")
});
pub(super) static FINETUNE_RE: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?i)^(?:chat|instruct|vision|lora)$").expect("valid regex"));

/// `Metadata.get_model_id_components(model_id, total_params)` for a string id.
pub(super) fn model_id_components(model_id: &str, total: i128) -> Components {
    if model_id.contains(' ') {
        // A sentence, not an id.
        return Components {
            full: model_id.to_string(),
            ..Components::default()
        };
    }
    let (mut org, full) = match model_id.split_once('/') {
        Some((org, full)) => (Some(org), full),
        None => (None, model_id),
    };
    if org.is_some_and(|o| o.starts_with('.')) {
        org = None;
    }
    let mut parts: Vec<String> = full
        .split('-')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    let mut types = vec![0u8; parts.len()];

    for i in 0..parts.len() {
        let part = parts[i].clone();
        if VERSION_RE.is_match(&part) {
            types[i] |= VERSION;
        } else if TYPE_RE.is_match(&part) {
            types[i] |= TYPE;
            parts[i] = part.to_uppercase();
        } else if i > 0 && SIZE_RE.is_match(&part) {
            let mut p: Vec<char> = part.replace('_', ".").chars().collect();
            let n = p.len();
            // bloom-7b1's notation: 7.1B.
            if n >= 2 && pystr::isdecimal(p[n - 1]) {
                let (a, b) = (p[n - 2], p[n - 1]);
                p.truncate(n - 2);
                p.extend(['.', b, a]);
            }
            let n = p.len();
            if n > 1 && pystr::isdecimal(p[n - 2]) && matches!(p[n - 1], 'k' | 'm' | 'b' | 't') {
                p[n - 1] = p[n - 1].to_ascii_uppercase();
            }
            let mut part: String = p.iter().collect();
            if total != 0 {
                let number: String = p[..n - 1].iter().collect();
                if let Some(x) = py_float(&number) {
                    let scale = match " KMBT".find(p[n - 1]) {
                        Some(k) => 1000f64.powi(k as i32),
                        None => 0.001,
                    };
                    let label = x * scale;
                    // Not the model's size when far from it: a context length (4k, 128k).
                    let context = (total < 0 && label < ((-total) / 8) as f64)
                        || (total > 0 && (label - total as f64).abs() > (7 * total / 8) as f64);
                    if context {
                        types[i] |= FINETUNE;
                        part = p[..n - 1].iter().collect::<String>()
                            + &p[n - 1].to_lowercase().to_string();
                    }
                }
            }
            if types[i] == 0 {
                types[i] |= SIZE;
            }
            parts[i] = part;
        } else if i > 0 && FINETUNE_RE.is_match(&part) {
            if total < 0 && part.to_lowercase() == "lora" {
                types[i] |= TYPE;
            } else {
                types[i] |= FINETUNE;
            }
        }
    }

    // Word sizes (small, xl) give way to a number-based one.
    let numeric_size = parts
        .iter()
        .zip(&types)
        .any(|(p, t)| t & SIZE != 0 && p.chars().any(pystr::isdecimal));
    if numeric_size {
        for (p, t) in parts.iter().zip(types.iter_mut()) {
            if *t & SIZE != 0 && p.chars().all(pystr::isalpha) {
                *t &= !SIZE;
            }
        }
    }

    let mut at_start = true;
    for (p, t) in parts.iter().zip(types.iter_mut()) {
        let first_alpha = p.chars().next().is_some_and(pystr::isalpha);
        if at_start && ((*t == 0 && first_alpha) || *t & VERSION != 0) {
            *t |= BASENAME;
        } else {
            at_start = false;
            if *t == 0 {
                *t |= FINETUNE;
            }
        }
    }
    for t in types.iter_mut().rev() {
        if *t & BASENAME != 0 && *t != BASENAME {
            *t &= !BASENAME;
        } else {
            break;
        }
    }

    let join = |want: u8, unless: u8| {
        let picked: Vec<&str> = parts
            .iter()
            .zip(&types)
            .filter(|(_, t)| **t & want != 0 && **t & unless == 0)
            .map(|(p, _)| p.as_str())
            .collect();
        (!picked.is_empty()).then(|| picked.join("-"))
    };
    let mut basename = join(BASENAME, 0);
    let mut sizes: Vec<&str> = Vec::new();
    for (p, t) in parts.iter().zip(&types) {
        if t & SIZE != 0 && !sizes.contains(&p.as_str()) {
            sizes.push(p);
        }
    }
    let size_label = (!sizes.is_empty()).then(|| sizes.join("-"));
    let finetune = join(FINETUNE, 0);
    let version = join(VERSION, BASENAME);
    if size_label.is_none() && finetune.is_none() && version.is_none() {
        // Too ambiguous.
        basename = None;
    }
    Components {
        full: full.to_string(),
        org: org.map(String::from),
        basename,
        finetune,
        version,
        size_label,
    }
}

/// `Metadata.id_to_title`: words title-cased unless they hold capitals or are versions or
/// numbers; `-` is a space.
pub(super) fn id_to_title(s: &str) -> String {
    static KEEP: LazyLock<Regex> =
        LazyLock::new(|| Regex::new(r"^(?:v\d+(?:\.\d+)*|\d.*)$").expect("valid regex"));
    pystr::split_whitespace(&s.replace('-', " "), None)
        .into_iter()
        .map(|w| {
            if pystr::islower(w) && !KEEP.is_match(w) {
                pystr::title(w)
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}
