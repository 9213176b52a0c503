//! The machinery every pass runs on: a piece of text ([`Seg`]) with its code points' flags,
//! the character classes of the regexes, and the passes ([`Pass`]) that cut a piece.

use std::cell::Cell;

use super::fast::{afmoe_digits, gpt2_fast, kimi_k2_fast, llama3_fast};
use crate::unicode::CptFlags;

pub(super) const OUT: u32 = u32::MAX;

/// One piece of the text that a pass cuts further: code points `start..end`. Reads past `end`
/// give [`OUT`] and [`CptFlags::NONE`], as in llama.cpp.
pub(super) struct Seg<'a> {
    pub(super) cpts: &'a [u32],
    pub(super) flags: &'a [CptFlags],
    pub(super) start: usize,
    pub(super) end: usize,
    /// The last whitespace run looked at, `(from, run_end, last_crlf + 1 or 0)`, so that
    /// attempts at successive positions of one long run do not rescan it (which would be
    /// quadratic: jais2 eats a run 512 code points at a time).
    pub(super) ws_cache: Cell<(usize, usize, usize)>,
}

impl<'a> Seg<'a> {
    pub(super) fn new(cpts: &'a [u32], flags: &'a [CptFlags], start: usize, end: usize) -> Seg<'a> {
        Seg {
            cpts,
            flags,
            start,
            end,
            ws_cache: Cell::new((1, 0, 0)),
        }
    }

    #[inline]
    pub(super) fn cpt(&self, i: usize) -> u32 {
        if i < self.end {
            self.cpts[i]
        } else {
            OUT
        }
    }

    #[inline]
    pub(super) fn fl(&self, i: usize) -> CptFlags {
        if i < self.end {
            self.flags[i]
        } else {
            CptFlags::NONE
        }
    }

    /// Whether there is a code point at `i` and it is in the class.
    #[inline]
    pub(super) fn is(&self, i: usize, class: Class) -> bool {
        i < self.end && class(self.cpts[i], self.flags[i])
    }

    /// The end of the run of `class` starting at `i` (`i` if there is none).
    #[inline]
    pub(super) fn run(&self, mut i: usize, class: Class) -> usize {
        while self.is(i, class) {
            i += 1;
        }
        i
    }

    /// `(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])`
    pub(super) fn contraction(&self, p: usize) -> Option<usize> {
        if self.cpt(p) != '\'' as u32 {
            return None;
        }
        let lower = |c: u32| {
            if (0x41..=0x5A).contains(&c) {
                c + 0x20
            } else {
                c
            }
        };
        let (a, b) = (lower(self.cpt(p + 1)), lower(self.cpt(p + 2)));
        match char::from_u32(a) {
            Some('s' | 't' | 'm' | 'd') => Some(p + 2),
            Some('r' | 'v') if b == 'e' as u32 => Some(p + 3),
            Some('l') if b == 'l' as u32 => Some(p + 3),
            _ => None,
        }
    }

    /// `PRE?BODY+` where PRE is a single optional code point: greedy, then backtracking.
    pub(super) fn opt_then_run(&self, p: usize, pre: Class, body: Class) -> Option<usize> {
        if self.is(p, pre) && self.is(p + 1, body) {
            return Some(self.run(p + 1, body));
        }
        if self.is(p, body) {
            return Some(self.run(p, body));
        }
        None
    }

    /// ` ?BODY+`
    pub(super) fn space_then_run(&self, p: usize, body: Class) -> Option<usize> {
        if self.cpt(p) == ' ' as u32 && self.is(p + 1, body) {
            return Some(self.run(p + 1, body));
        }
        if self.is(p, body) {
            return Some(self.run(p, body));
        }
        None
    }

    /// The whitespace run starting at `p` (which must be whitespace): its end, and the index
    /// of its last `\r` or `\n` if any.
    pub(super) fn ws_run(&self, p: usize) -> (usize, Option<usize>) {
        let (from, run_end, crlf) = self.ws_cache.get();
        if from <= p && p < run_end {
            return (run_end, if crlf > p { Some(crlf - 1) } else { None });
        }
        let mut i = p;
        let mut last = 0;
        while self.is(i, ws) {
            if crlf_(self.cpts[i], self.flags[i]) {
                last = i + 1;
            }
            i += 1;
        }
        self.ws_cache.set((p, i, last));
        (i, if last > 0 { Some(last - 1) } else { None })
    }

    /// `\s*[\r\n]+` (and `\s*[\r\n]`, which ends at the same place)
    pub(super) fn ws_to_last_newline(&self, p: usize) -> Option<usize> {
        if !self.is(p, ws) {
            return None;
        }
        self.ws_run(p).1.map(|last| last + 1)
    }

    /// `\s+(?!\S)`
    pub(super) fn ws_not_before_text(&self, p: usize) -> Option<usize> {
        if !self.is(p, ws) {
            return None;
        }
        let q = self.ws_run(p).0;
        if q == self.end {
            Some(q)
        } else if q - p >= 2 {
            Some(q - 1)
        } else {
            None
        }
    }

    /// `\s+`
    pub(super) fn ws_all(&self, p: usize) -> Option<usize> {
        if !self.is(p, ws) {
            return None;
        }
        Some(self.ws_run(p).0)
    }
}

/// A character class, over a code point and its flags. For classes of the collapsed regexes
/// the flags decide (a non-ASCII code point is only its category, or only `\s`); for classes of
/// the regexes run on code points, non-ASCII whitespace is U+000B and so in no listed range.
pub(super) type Class = fn(u32, CptFlags) -> bool;

pub(super) fn ws(_: u32, f: CptFlags) -> bool {
    f.is_whitespace()
}
pub(super) fn not_ws(_: u32, f: CptFlags) -> bool {
    !f.is_whitespace()
}
pub(super) fn letter(_: u32, f: CptFlags) -> bool {
    f.is_letter()
}
pub(super) fn number(_: u32, f: CptFlags) -> bool {
    f.is_number()
}
pub(super) fn punct(_: u32, f: CptFlags) -> bool {
    f.is_punctuation()
}
pub(super) fn letter_or_mark(_: u32, f: CptFlags) -> bool {
    f.is_letter() || f.is_accent_mark()
}
pub(super) fn crlf_(c: u32, _: CptFlags) -> bool {
    c == '\r' as u32 || c == '\n' as u32
}
pub(super) fn crlf_slash(c: u32, _: CptFlags) -> bool {
    c == '\r' as u32 || c == '\n' as u32 || c == '/' as u32
}
/// `[^\r\n\p{L}\p{N}]`
pub(super) fn not_crlf_letter_number(c: u32, f: CptFlags) -> bool {
    !crlf_(c, f) && !f.is_letter() && !f.is_number()
}
/// `[^\r\n\p{L}\p{P}\p{S}]`
pub(super) fn not_crlf_letter_punct_symbol(c: u32, f: CptFlags) -> bool {
    !crlf_(c, f) && !f.is_letter() && !f.is_punctuation() && !f.is_symbol()
}
/// `[^\s\p{L}\p{N}]`
pub(super) fn not_ws_letter_number(_: u32, f: CptFlags) -> bool {
    !f.is_whitespace() && !f.is_letter() && !f.is_number()
}
/// `[\p{P}\p{S}]`
pub(super) fn punct_symbol(_: u32, f: CptFlags) -> bool {
    f.is_punctuation() || f.is_symbol()
}
pub(super) fn ascii_digit(c: u32, _: CptFlags) -> bool {
    (0x30..=0x39).contains(&c)
}
pub(super) fn ascii_letter(c: u32, _: CptFlags) -> bool {
    (0x41..=0x5A).contains(&c) || (0x61..=0x7A).contains(&c)
}
/// ``[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~]``
pub(super) fn ascii_punct(c: u32, _: CptFlags) -> bool {
    c < 0x80 && (c as u8).is_ascii_punctuation()
}
/// `(?=[\p{L}])([^a-z])`, as collapsed: a letter, but not an ASCII lowercase one
pub(super) fn letter_not_lower(c: u32, f: CptFlags) -> bool {
    f.is_letter() && !(0x61..=0x7A).contains(&c)
}
/// `(?=[\p{L}])([^A-Z])`
pub(super) fn letter_not_upper(c: u32, f: CptFlags) -> bool {
    f.is_letter() && !(0x41..=0x5A).contains(&c)
}
/// `(?=[\p{L}\p{M}])([^a-z])`
pub(super) fn letter_mark_not_lower(c: u32, f: CptFlags) -> bool {
    letter_or_mark(c, f) && !(0x61..=0x7A).contains(&c)
}
/// `(?=[\p{L}\p{M}])([^A-Z])`
pub(super) fn letter_mark_not_upper(c: u32, f: CptFlags) -> bool {
    letter_or_mark(c, f) && !(0x41..=0x5A).contains(&c)
}

#[inline]
pub(super) fn in_ranges(c: u32, ranges: &[(u32, u32)]) -> bool {
    let i = ranges.partition_point(|&(first, _)| first <= c);
    i > 0 && c <= ranges[i - 1].1
}

/// One regex of a list.
#[derive(Clone, Copy)]
pub(super) enum Pass {
    /// llama.cpp's `unicode_regex_split_custom_gpt2`:
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
    Gpt2Fast,
    /// `unicode_regex_split_custom_llama3`:
    /// `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
    Llama3Fast,
    /// `unicode_regex_split_custom_qwen2`: the llama3 pattern with `\p{N}` for `\p{N}{1,3}`
    Qwen2Fast,
    /// `unicode_regex_split_custom_qwen35`: qwen2 with `[\p{L}\p{M}]+` letter runs
    Qwen35Fast,
    /// `unicode_regex_split_custom_kimi_k2`
    KimiK2Fast,
    /// `unicode_regex_split_custom_afmoe` (afmoe's digit pass, also tiny_aya's)
    AfmoeDigits,
    /// `[^\n]+|[\n]+`
    Newlines,
    /// `\s+$`
    TrailingSpaces,
    /// `(?=(\d{3})+(?!\d))`: empty matches, i.e. cuts before each group of three digits that
    /// ends a digit run
    DigitTriplesAhead,
    /// Any other regex: the leftmost match at or after a position, given by a matcher that
    /// returns where a match starting at `p` ends (always after `p`), if one does.
    Match(fn(&Seg, usize) -> Option<usize>),
}

/// Append `end` to the boundaries if it is past the last one.
#[inline]
pub(super) fn push(out: &mut Vec<usize>, end: usize) {
    if out.last().is_none_or(|&last| end > last) {
        out.push(end);
    }
}

impl Pass {
    /// Cut `s` and append its boundaries after `s.start` (the last one `s.end`).
    pub(super) fn run(self, s: &Seg, out: &mut Vec<usize>) {
        match self {
            Pass::Gpt2Fast => gpt2_fast(s, out),
            Pass::Llama3Fast => llama3_fast(s, out, 3, false),
            Pass::Qwen2Fast => llama3_fast(s, out, 1, false),
            Pass::Qwen35Fast => llama3_fast(s, out, 1, true),
            Pass::KimiK2Fast => kimi_k2_fast(s, out),
            Pass::AfmoeDigits => afmoe_digits(s, out),
            Pass::Newlines => {
                let mut p = s.start;
                while p < s.end {
                    let nl = s.cpts[p] == '\n' as u32;
                    while p < s.end && (s.cpts[p] == '\n' as u32) == nl {
                        p += 1;
                    }
                    push(out, p);
                }
            }
            Pass::TrailingSpaces => {
                let mut t = s.end;
                while t > s.start && s.flags[t - 1].is_whitespace() {
                    t -= 1;
                }
                push(out, t);
            }
            Pass::DigitTriplesAhead => {
                let mut p = s.start;
                while p < s.end {
                    if !s.is(p, ascii_digit) {
                        p += 1;
                        continue;
                    }
                    let run_end = s.run(p, ascii_digit);
                    let mut cut = p + (run_end - p) % 3;
                    while cut < run_end {
                        push(out, cut);
                        cut += 3;
                    }
                    p = run_end;
                }
            }
            Pass::Match(matcher) => {
                let mut p = s.start;
                while p < s.end {
                    match matcher(s, p) {
                        Some(e) => {
                            debug_assert!(p < e && e <= s.end);
                            push(out, p); // the unmatched stretch before, if any
                            push(out, e);
                            p = e;
                        }
                        None => p += 1,
                    }
                }
            }
        }
        push(out, s.end);
    }
}
