//! Normalizers (`tokenizers`' `normalizers/`): NFC, NFD, Lowercase, Prepend, Replace with a
//! string, Strip, StripAccents, BertNormalizer and Sequence.

use unicode_normalization::char::{canonical_combining_class, compose, decompose_canonical};
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use super::err;
use super::piece::Piece;
use super::schema::{self, Pattern};
use crate::error::Result;
use crate::unicode::{cpt_flags, is_chinese_char};

#[derive(Clone, Debug)]
pub(super) enum Normalizer {
    Nfc,
    Nfd,
    Lowercase,
    Prepend(String),
    Replace {
        pattern: String,
        content: String,
    },
    Strip {
        left: bool,
        right: bool,
    },
    /// `StripAccents`: removes marks (`\p{M}`).
    StripAccents,
    Bert {
        clean_text: bool,
        chinese_chars: bool,
        strip_accents: bool,
        lowercase: bool,
    },
}

/// The normalizer steps of the JSON's `normalizer` (a `Sequence` flattened).
pub(super) fn parse_normalizer(n: schema::Normalizer) -> Result<Vec<Normalizer>> {
    use schema::Normalizer as N;
    Ok(match n {
        N::Sequence(seq) => {
            let mut out = Vec::new();
            for n in seq.normalizers {
                out.extend(parse_normalizer(n)?);
            }
            out
        }
        N::Nfc => vec![Normalizer::Nfc],
        N::Nfd => vec![Normalizer::Nfd],
        N::Lowercase => vec![Normalizer::Lowercase],
        N::StripAccents => vec![Normalizer::StripAccents],
        N::Prepend(p) => vec![Normalizer::Prepend(p.prepend)],
        N::Strip(s) => vec![Normalizer::Strip {
            left: s.strip_left.unwrap_or(true),
            right: s.strip_right.unwrap_or(true),
        }],
        N::Replace(r) => match r.pattern {
            // An empty pattern matches nothing in `tokenizers`.
            Pattern::String(s) if s.is_empty() => Vec::new(),
            Pattern::String(pattern) => vec![Normalizer::Replace {
                pattern,
                content: r.content,
            }],
            Pattern::Regex(r) => {
                return Err(err(format!(
                    "normalizer Replace with a regex pattern ({r:?}) is not supported"
                )))
            }
        },
        N::Bert(b) => {
            let lowercase = b.lowercase.unwrap_or(true);
            vec![Normalizer::Bert {
                clean_text: b.clean_text.unwrap_or(true),
                chinese_chars: b.handle_chinese_chars.unwrap_or(true),
                strip_accents: b.strip_accents.unwrap_or(lowercase),
                lowercase,
            }]
        }
        other @ (N::Nfkc | N::Nfkd | N::Nmt | N::Precompiled(_) | N::ByteLevel) => {
            return Err(err(format!(
                "normalizer `{}` is not supported (supported: NFC, NFD, Lowercase, \
                 Prepend, Replace with a string, Strip, StripAccents, BertNormalizer, Sequence)",
                other.type_name()
            )))
        }
    })
}

pub(super) fn normalize(normalizers: &[Normalizer], mut p: Piece) -> Piece {
    for n in normalizers {
        match n {
            Normalizer::Nfc => p = nfc(&p),
            Normalizer::Nfd => p = nfd(&p),
            Normalizer::Lowercase => p.map_chars(|c, out| out.extend(c.to_lowercase())),
            Normalizer::Prepend(s) => p.prepend(s),
            Normalizer::Replace { pattern, content } => p = replace(&p, pattern, content),
            Normalizer::Strip { left, right } => {
                let n = p.chars.len();
                let start = if *left {
                    p.chars.iter().take_while(|c| c.is_whitespace()).count()
                } else {
                    0
                };
                let end = if *right {
                    n - p.chars[start..]
                        .iter()
                        .rev()
                        .take_while(|c| c.is_whitespace())
                        .count()
                } else {
                    n
                };
                p = p.slice(start..end);
            }
            Normalizer::StripAccents => p.map_chars(|c, out| {
                if !cpt_flags(c as u32).is_accent_mark() {
                    out.push(c)
                }
            }),
            Normalizer::Bert {
                clean_text,
                chinese_chars,
                strip_accents,
                lowercase,
            } => {
                if *clean_text {
                    p.map_chars(|c, out| {
                        let f = cpt_flags(c as u32);
                        let control = !matches!(c, '\t' | '\n' | '\r')
                            && (f.is_control() || f.is_undefined());
                        if c == '\0' || c == '\u{FFFD}' || control {
                            return;
                        }
                        out.push(if matches!(c, '\t' | '\n' | '\r') || c.is_whitespace() {
                            ' '
                        } else {
                            c
                        });
                    });
                }
                if *chinese_chars {
                    p.map_chars(|c, out| {
                        if is_chinese_char(c as u32) {
                            out.extend([' ', c, ' ']);
                        } else {
                            out.push(c);
                        }
                    });
                }
                if *strip_accents {
                    p = nfd(&p);
                    p.map_chars(|c, out| {
                        if !is_nonspacing_mark(c) {
                            out.push(c)
                        }
                    });
                }
                if *lowercase {
                    p.map_chars(|c, out| out.extend(c.to_lowercase()));
                }
            }
        }
    }
    p
}

/// Every non-overlapping occurrence of `pattern`, leftmost first, replaced by `content`
/// (aligned with the first character of the occurrence).
fn replace(p: &Piece, pattern: &str, content: &str) -> Piece {
    let mut out = Piece::default();
    let keep = |out: &mut Piece, kept: std::ops::Range<usize>| {
        out.chars.extend_from_slice(&p.chars[kept.clone()]);
        out.orig.extend_from_slice(&p.orig[kept]);
    };
    let mut copied = 0;
    for found in p.find_all(pattern) {
        keep(&mut out, copied..found.start);
        out.chars.extend(content.chars());
        out.orig.extend(std::iter::repeat_n(
            p.orig[found.start],
            content.chars().count(),
        ));
        copied = found.end;
    }
    keep(&mut out, copied..p.chars.len());
    out
}

/// NFD as `tokenizers` computes it (`unicode-normalization`'s canonical decomposition and
/// ordering), each character keeping the offset of the one it comes from.
fn nfd(p: &Piece) -> Piece {
    let mut out = Piece::default();
    for (&c, &o) in p.chars.iter().zip(&p.orig) {
        decompose_canonical(c, |d| {
            out.chars.push(d);
            out.orig.push(o);
        });
    }
    // Canonical ordering: stable sort of each run of non-starters by combining class.
    let n = out.chars.len();
    let mut i = 0;
    while i < n {
        if canonical_combining_class(out.chars[i]) == 0 {
            i += 1;
            continue;
        }
        let start = i;
        while i < n && canonical_combining_class(out.chars[i]) != 0 {
            i += 1;
        }
        if i - start > 1 {
            let mut run: Vec<(char, usize)> = out.chars[start..i]
                .iter()
                .copied()
                .zip(out.orig[start..i].iter().copied())
                .collect();
            run.sort_by_key(|&(c, _)| canonical_combining_class(c));
            for (k, (c, o)) in run.into_iter().enumerate() {
                out.chars[start + k] = c;
                out.orig[start + k] = o;
            }
        }
    }
    out
}

/// NFC: [`nfd`], then canonical composition (`unicode-normalization`'s pairs); a composed
/// character keeps the offset of its starter.
fn nfc(p: &Piece) -> Piece {
    let d = nfd(p);
    let mut out = Piece::default();
    let mut starter: Option<usize> = None;
    // Combining class of the last character kept after the starter (None: none yet).
    let mut last: Option<u8> = None;
    for (&c, &o) in d.chars.iter().zip(&d.orig) {
        let class = canonical_combining_class(c);
        if let Some(s) = starter {
            let blocked = last.is_some_and(|l| l == 0 || l >= class);
            if !blocked {
                if let Some(composed) = compose(out.chars[s], c) {
                    out.chars[s] = composed;
                    continue;
                }
            }
        }
        if class == 0 {
            starter = Some(out.chars.len());
            last = None;
        } else {
            last = Some(class);
        }
        out.chars.push(c);
        out.orig.push(o);
    }
    out
}

/// `\p{Mn}`, what BertNormalizer's `strip_accents` removes after NFD.
fn is_nonspacing_mark(c: char) -> bool {
    c.general_category() == GeneralCategory::NonspacingMark
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    fn nfc(s: &str) -> String {
        super::nfc(&Piece::new(s, 0)).string()
    }

    fn nfd(s: &str) -> String {
        super::nfd(&Piece::new(s, 0)).string()
    }

    #[test]
    fn nfc_and_nfd() {
        assert_eq!(nfc("e\u{301}"), "\u{e9}");
        assert_eq!(nfd("\u{e9}"), "e\u{301}");
        // Singletons and composition exclusions do not come back.
        assert_eq!(nfc("\u{212b}"), "\u{c5}");
        assert_eq!(nfc("\u{2126}"), "\u{3a9}");
        assert_eq!(nfc("\u{344}"), "\u{308}\u{301}");
        // Canonical reordering, then composition past a mark of another class.
        assert_eq!(nfd("a\u{301}\u{323}"), "a\u{323}\u{301}");
        assert_eq!(nfc("a\u{323}\u{302}"), "\u{1ead}");
        assert_eq!(nfc("\u{1ead}"), "\u{1ead}");
        // Blocked: a mark of the same class in between.
        assert_eq!(nfc("a\u{301}\u{301}"), "\u{e1}\u{301}");
        // Hangul, algorithmically.
        assert_eq!(nfc("\u{1100}\u{1161}\u{11a8}"), "\u{ac01}");
        assert_eq!(nfd("\u{ac01}"), "\u{1100}\u{1161}\u{11a8}");
        assert_eq!(nfc("\u{ac00}\u{11a8}"), "\u{ac01}");
        // Origins follow the characters.
        let p = super::nfc(&Piece::new("xe\u{301}", 10));
        assert_eq!(p.orig, vec![10, 11]);
    }
}
