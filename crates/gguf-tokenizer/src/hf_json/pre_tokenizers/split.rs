//! The splitting of the native pre-tokenizer steps, as `NormalizedString::split` does.

use std::ops::Range;

use super::super::piece::Piece;
use super::{Behavior, CharClass, PreStep, PrependScheme};

/// Splits `p` at `matches` (one character each for a class) as `NormalizedString::split`
/// does with `behavior`.
pub(in crate::hf_json) fn split_matches(
    p: &Piece,
    matches: &[(Range<usize>, bool)],
    behavior: Behavior,
) -> Vec<Piece> {
    let mut spans: Vec<(Range<usize>, bool)> = Vec::new();
    match behavior {
        Behavior::Isolated => spans = matches.iter().map(|(r, _)| (r.clone(), false)).collect(),
        Behavior::Removed => spans = matches.to_vec(),
        Behavior::Contiguous => {
            let mut previous = false;
            for (r, m) in matches {
                match spans.last_mut() {
                    Some((last, _)) if *m == previous => last.end = r.end,
                    _ => spans.push((r.clone(), false)),
                }
                previous = *m;
            }
        }
        Behavior::MergedWithPrevious => {
            let mut previous = false;
            for (r, m) in matches {
                match spans.last_mut() {
                    Some((last, _)) if *m && !previous => last.end = r.end,
                    _ => spans.push((r.clone(), false)),
                }
                previous = *m;
            }
        }
        Behavior::MergedWithNext => {
            let mut previous = false;
            for (r, m) in matches.iter().rev() {
                match spans.last_mut() {
                    Some((last, _)) if *m && !previous => last.start = r.start,
                    _ => spans.push((r.clone(), false)),
                }
                previous = *m;
            }
            spans.reverse();
        }
    }
    spans
        .into_iter()
        .filter(|(r, remove)| !remove && !r.is_empty())
        .map(|(r, _)| p.slice(r))
        .collect()
}

/// The match/non-match spans of a character predicate (`Pattern for Fn(char) -> bool`).
pub(in crate::hf_json) fn char_matches(p: &Piece, class: &CharClass) -> Vec<(Range<usize>, bool)> {
    let mut out = Vec::new();
    let mut last = 0;
    for (i, &c) in p.chars.iter().enumerate() {
        if class.test(c) {
            if last < i {
                out.push((last..i, false));
            }
            out.push((i..i + 1, true));
            last = i + 1;
        }
    }
    if last < p.chars.len() {
        out.push((last..p.chars.len(), false));
    }
    out
}

/// The match/non-match spans of a literal string, leftmost non-overlapping.
pub(in crate::hf_json) fn literal_matches(p: &Piece, pattern: &str) -> Vec<(Range<usize>, bool)> {
    let mut out = Vec::new();
    let mut last = 0;
    for found in p.find_all(pattern) {
        if last < found.start {
            out.push((last..found.start, false));
        }
        last = found.end;
        out.push((found, true));
    }
    if last < p.chars.len() {
        out.push((last..p.chars.len(), false));
    }
    out
}

impl PreStep {
    pub(in crate::hf_json) fn apply(&self, p: Piece, out: &mut Vec<Piece>) {
        match self {
            PreStep::Regex(ty) => {
                let cpts: Vec<u32> = p.chars.iter().map(|&c| c as u32).collect();
                out.extend(ty.split_cpts(&cpts).into_iter().map(|r| p.slice(r)));
            }
            PreStep::PrefixSpace => {
                let mut p = p;
                if p.chars.first() != Some(&' ') {
                    p.prepend(" ");
                }
                out.push(p);
            }
            PreStep::Chars(class, behavior) => {
                out.extend(split_matches(&p, &char_matches(&p, class), *behavior))
            }
            PreStep::Literal(pattern, behavior) => {
                out.extend(split_matches(&p, &literal_matches(&p, pattern), *behavior))
            }
            PreStep::Metaspace {
                replacement,
                prepend,
                split,
            } => {
                let mut p = p;
                for c in &mut p.chars {
                    if *c == ' ' {
                        *c = *replacement;
                    }
                }
                let add = match prepend {
                    PrependScheme::Always => true,
                    PrependScheme::First => p.orig.first() == Some(&0),
                    PrependScheme::Never => false,
                };
                if add && p.chars.first() != Some(replacement) {
                    p.prepend(&replacement.to_string());
                }
                if *split {
                    let m = char_matches(&p, &CharClass::Char(*replacement));
                    out.extend(split_matches(&p, &m, Behavior::MergedWithNext));
                } else {
                    out.push(p);
                }
            }
        }
    }
}
