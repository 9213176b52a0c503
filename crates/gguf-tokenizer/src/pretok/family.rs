//! The llama3-like family: regexes of the shape `CONTRACTIONS?|LETTERS|DIGITS| ?PUNCT+TAIL|SPACES`,
//! one [`Family`] value per pre-tokenizer type that has one.

use super::matchers::{m_number, m_numbers, m_numbers_upto3};
use super::seg::*;

/// How a family pattern matches words.
#[derive(Clone, Copy)]
pub(super) enum Letters {
    /// `[^\r\n\p{L}\p{N}]?\p{L}+`
    Plain,
    /// `PRE?U*W+C?|PRE?U+W*C?`, PRE = `[^\r\n\p{L}\p{N}]`, C = an optional contraction
    Cased {
        upper: Class,
        lower: Class,
        contraction: bool,
    },
    /// ``[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+``
    AsciiPunctWord,
    /// `[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+`
    JoinedWords,
}

#[derive(Clone, Copy)]
pub(super) enum Digits {
    None,
    /// `\p{N}`
    One,
    /// `\p{N}{1,3}`
    UpTo3,
    /// `\p{N}+`
    Run,
}

/// What follows ` ?CLASS+`
#[derive(Clone, Copy)]
pub(super) enum Tail {
    None,
    /// `[\r\n]*`
    Newlines,
    /// `[\r\n/]*`
    NewlinesSlashes,
    /// `[\r\n/]?`
    OneNewlineOrSlash,
}

#[derive(Clone, Copy)]
pub(super) enum Spaces {
    /// `\s*[\r\n]+|\s+(?!\S)|\s+` (or `\s*[\r\n]` first, which ends at the same place)
    Standard,
    /// `[\r\n]|\s+(?!\S)|\s+`
    SingleNewline,
    /// `\s*[\r\n]+|\s{512}(?!\S)|\s{256}(?!\S)|...|\s{4}(?!\S)|\s{1,2}(?!\S)|\s{1}`
    Jais2,
}

/// `CONTRACTIONS?|LETTERS|DIGITS| ?PUNCT+TAIL|SPACES`, the shape of most llama3-derived regexes.
pub(super) struct Family {
    pub(super) contractions: bool,
    pub(super) letters: Letters,
    pub(super) digits: Digits,
    pub(super) punct: Class,
    pub(super) tail: Tail,
    pub(super) spaces: Spaces,
}

impl Family {
    fn match_at(&self, s: &Seg, p: usize) -> Option<usize> {
        if self.contractions {
            if let Some(e) = s.contraction(p) {
                return Some(e);
            }
        }
        if let Some(e) = self.letters(s, p) {
            return Some(e);
        }
        if s.is(p, number) {
            match self.digits {
                Digits::None => {}
                Digits::One => return m_number(s, p),
                Digits::UpTo3 => return m_numbers_upto3(s, p),
                Digits::Run => return m_numbers(s, p),
            }
        }
        if let Some(e) = s.space_then_run(p, self.punct) {
            return Some(match self.tail {
                Tail::None => e,
                Tail::Newlines => s.run(e, crlf_),
                Tail::NewlinesSlashes => s.run(e, crlf_slash),
                Tail::OneNewlineOrSlash => e + s.is(e, crlf_slash) as usize,
            });
        }
        match self.spaces {
            Spaces::Standard => s
                .ws_to_last_newline(p)
                .or_else(|| s.ws_not_before_text(p))
                .or_else(|| s.ws_all(p)),
            Spaces::SingleNewline => {
                if s.is(p, crlf_) {
                    return Some(p + 1);
                }
                s.ws_not_before_text(p).or_else(|| s.ws_all(p))
            }
            Spaces::Jais2 => {
                if let Some(e) = s.ws_to_last_newline(p) {
                    return Some(e);
                }
                if !s.is(p, ws) {
                    return None;
                }
                let run_end = s.ws_run(p).0;
                let (len, at_end) = (run_end - p, run_end == s.end);
                // \s{k}(?!\S): k spaces, then a space or the end of the piece
                let fits = |k: usize| k < len || (k == len && at_end);
                for k in [512, 256, 128, 64, 32, 16, 8, 4, 2, 1] {
                    if fits(k) {
                        return Some(p + k);
                    }
                }
                Some(p + 1) // \s{1}
            }
        }
    }

    fn letters(&self, s: &Seg, p: usize) -> Option<usize> {
        match self.letters {
            Letters::Plain => s.opt_then_run(p, not_crlf_letter_number, letter),
            Letters::AsciiPunctWord => {
                if s.is(p, ascii_punct) && s.is(p + 1, ascii_letter) {
                    return Some(s.run(p + 1, ascii_letter));
                }
                s.opt_then_run(p, not_crlf_letter_punct_symbol, letter_or_mark)
            }
            Letters::JoinedWords => {
                let words = |start: usize| -> Option<usize> {
                    if !s.is(start, letter) {
                        return None;
                    }
                    let mut i = start + 1;
                    loop {
                        if s.is(i, letter_or_mark) {
                            i += 1;
                        } else if s.cpt(i) == ' ' as u32 && s.is(i + 1, letter) {
                            i += 2;
                        } else {
                            return Some(i);
                        }
                    }
                };
                if s.is(p, not_crlf_letter_number) {
                    if let Some(e) = words(p + 1) {
                        return Some(e);
                    }
                }
                words(p)
            }
            Letters::Cased {
                upper,
                lower,
                contraction,
            } => {
                // U*W+: U* takes all it can, then gives back one at a time until W+ matches
                let first = |start: usize| -> Option<usize> {
                    let mut j = s.run(start, upper);
                    loop {
                        if s.is(j, lower) {
                            return Some(s.run(j, lower));
                        }
                        if j == start {
                            return None;
                        }
                        j -= 1;
                    }
                };
                // U+W*
                let second = |start: usize| -> Option<usize> {
                    let u = s.run(start, upper);
                    (u > start).then(|| s.run(u, lower))
                };
                let pre = s.is(p, not_crlf_letter_number);
                let e = (if pre { first(p + 1) } else { None })
                    .or_else(|| first(p))
                    .or_else(|| if pre { second(p + 1) } else { None })
                    .or_else(|| second(p))?;
                Some(if contraction {
                    s.contraction(e).unwrap_or(e)
                } else {
                    e
                })
            }
        }
    }
}

/// The most common family, ufakzeka's:
/// `[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`;
/// the others are written as their differences from it.
const BASE: Family = Family {
    contractions: false,
    letters: Letters::Plain,
    digits: Digits::One,
    punct: not_ws_letter_number,
    tail: Tail::Newlines,
    spaces: Spaces::Standard,
};

/// [`Letters::Cased`].
const fn cased(upper: Class, lower: Class, contraction: bool) -> Letters {
    Letters::Cased {
        upper,
        lower,
        contraction,
    }
}

macro_rules! family {
    ($name:ident, $doc:literal, $family:expr) => {
        #[doc = $doc]
        pub(super) fn $name(s: &Seg, p: usize) -> Option<usize> {
            const FAMILY: Family = $family;
            FAMILY.match_at(s, p)
        }
    };
}

family!(
    m_jais2,
    r"jais-2: `(?:'[sS]|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s{512}(?!\S)|...|\s{1,2}(?!\S)|\s{1}`",
    Family {
        contractions: true,
        digits: Digits::UpTo3,
        spaces: Spaces::Jais2,
        ..BASE
    }
);

family!(
    m_ds3,
    r"deepseek-v3 (and afmoe's last regex): ``[!-/:-@\[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+``",
    Family {
        letters: Letters::AsciiPunctWord,
        digits: Digits::None,
        punct: punct_symbol,
        ..BASE
    }
);

family!(
    m_spark,
    r"spark2_5: ``[!-/:-@\[-`{-~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+|[\r\n]|\s+(?!\S)|\s+``",
    Family {
        letters: Letters::AsciiPunctWord,
        digits: Digits::None,
        punct: punct_symbol,
        tail: Tail::None,
        spaces: Spaces::SingleNewline,
        ..BASE
    }
);

family!(
    m_youtu,
    r"youtu: `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|...)?|...|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`; collapsed, both classes are `[\p{L}\p{M}]`",
    Family {
        letters: cased(letter_or_mark, letter_or_mark, true),
        tail: Tail::NewlinesSlashes,
        ..BASE
    }
);

family!(
    m_tiny_aya,
    r"tiny_aya: youtu's second regex with `\p{N}{1,3}`",
    Family {
        letters: cased(letter_or_mark, letter_or_mark, true),
        digits: Digits::UpTo3,
        tail: Tail::NewlinesSlashes,
        ..BASE
    }
);

family!(
    m_tekken,
    r"tekken: `[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`",
    Family {
        letters: cased(letter_not_lower, letter_not_upper, false),
        tail: Tail::NewlinesSlashes,
        ..BASE
    }
);

family!(
    m_gpt4o,
    r"gpt-4o: tekken's letters each with an optional `(?:'[sS]|...)`, `\p{N}{1,3}`",
    Family {
        letters: cased(letter_not_lower, letter_not_upper, true),
        digits: Digits::UpTo3,
        tail: Tail::NewlinesSlashes,
        ..BASE
    }
);

family!(
    m_granite_multi,
    r"granite-embed-multi-97m: gpt-4o's with `(?=[\p{L}\p{M}])` lookaheads",
    Family {
        letters: cased(letter_mark_not_lower, letter_mark_not_upper, true),
        digits: Digits::UpTo3,
        tail: Tail::NewlinesSlashes,
        ..BASE
    }
);

family!(
    m_bailingmoe,
    r"bailingmoe: `'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+`",
    Family {
        contractions: true,
        ..BASE
    }
);

family!(
    m_seed_coder,
    r"seed-coder: `(?:'[sS]|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+`",
    Family {
        contractions: true,
        tail: Tail::None,
        ..BASE
    }
);

family!(
    m_ufakzeka,
    r"ufakzeka: `[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`",
    BASE
);

family!(
    m_exaone_moe,
    r"exaone-moe: `(?:'[sS]|...)|[^\r\n\p{L}\p{N}]?(?:\p{L}\p{M}*(?: \p{L}\p{M}*)*)+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]?|\s*[\r\n]|\s+(?!\S)|\s+`",
    Family {
        contractions: true,
        letters: Letters::JoinedWords,
        tail: Tail::OneNewlineOrSlash,
        ..BASE
    }
);

family!(
    m_minicpm5,
    r"minicpm5: `(?:'[sS]|...)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}+| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`",
    Family {
        contractions: true,
        digits: Digits::Run,
        ..BASE
    }
);
