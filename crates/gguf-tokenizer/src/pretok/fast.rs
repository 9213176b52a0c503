//! llama.cpp's hand-written fast paths (gpt2, llama3/qwen2/qwen35, kimi-k2, afmoe's digits),
//! step by step as there (each token ends where the previous one did).

use super::seg::*;
use crate::unicode::{is_han, tolower, CptFlags};

pub(super) fn gpt2_fast(s: &Seg, out: &mut Vec<usize>) {
    let mut pos = s.start;
    while pos < s.end {
        let c = s.cpt(pos);
        let f = s.fl(pos);
        // 's|'t|'re|'ve|'m|'ll|'d (case-sensitive)
        if c == '\'' as u32 && pos + 1 < s.end {
            let n = s.cpt(pos + 1);
            if [b's', b't', b'm', b'd'].iter().any(|&x| n == x as u32) {
                pos += 2;
                push(out, pos);
                continue;
            }
            if pos + 2 < s.end {
                let nn = s.cpt(pos + 2);
                if [(b'r', b'e'), (b'v', b'e'), (b'l', b'l')]
                    .iter()
                    .any(|&(x, y)| n == x as u32 && nn == y as u32)
                {
                    pos += 3;
                    push(out, pos);
                    continue;
                }
            }
        }
        let space = c == ' ' as u32;
        let mut f2 = if space { s.fl(pos + 1) } else { f };
        //  ?\p{L}+
        if f2.is_letter() {
            pos += space as usize;
            while s.fl(pos).is_letter() {
                pos += 1;
            }
            push(out, pos);
            continue;
        }
        //  ?\p{N}+
        if f2.is_number() {
            pos += space as usize;
            while s.fl(pos).is_number() {
                pos += 1;
            }
            push(out, pos);
            continue;
        }
        //  ?[^\s\p{L}\p{N}]+
        let other =
            |f: CptFlags| !(f.is_whitespace() || f.is_letter() || f.is_number() || f.is_none());
        if other(f2) {
            pos += space as usize;
            while other(f2) {
                pos += 1;
                f2 = s.fl(pos);
            }
            push(out, pos);
            continue;
        }
        let mut n = 0;
        while s.fl(pos + n).is_whitespace() {
            n += 1;
        }
        // \s+(?!\S)
        if n > 1 && s.cpt(pos + n) != OUT {
            pos += n - 1;
            push(out, pos);
            continue;
        }
        // \s+
        if n > 0 {
            pos += n;
            push(out, pos);
            continue;
        }
        pos += 1;
        push(out, pos);
    }
}

/// llama3 (`max_digits` 3), qwen2 (1) and qwen35 (1, `marks`).
pub(super) fn llama3_fast(s: &Seg, out: &mut Vec<usize>, max_digits: usize, marks: bool) {
    let word = |f: CptFlags| f.is_letter() || (marks && f.is_accent_mark());
    let other = |f: CptFlags| !(f.is_whitespace() || word(f) || f.is_number());
    let mut pos = s.start;
    while pos < s.end {
        let c = s.cpt(pos);
        let f = s.fl(pos);
        // (?i:'s|'t|'re|'ve|'m|'ll|'d)
        if let Some(e) = contraction_ci(s, pos) {
            pos = e;
            push(out, pos);
            continue;
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+  (qwen35: [\p{L}\p{M}])
        if !(c == '\r' as u32 || c == '\n' as u32 || f.is_number())
            && (word(f) || word(s.fl(pos + 1)))
        {
            pos += 1;
            while word(s.fl(pos)) {
                pos += 1;
            }
            push(out, pos);
            continue;
        }
        // \p{N}{1,3} or \p{N}
        if f.is_number() {
            pos = digit_groups(s, pos, max_digits, out);
            push(out, pos);
            continue;
        }
        pos = punct_space_or_one(s, pos, other);
        push(out, pos);
    }
}

/// The fast paths' `(?i:'s|'t|'re|'ve|'m|'ll|'d)` at `pos` (lowercased with llama.cpp's
/// `unicode_tolower`): where it ends.
fn contraction_ci(s: &Seg, pos: usize) -> Option<usize> {
    if s.cpt(pos) != '\'' as u32 || pos + 1 >= s.end {
        return None;
    }
    let n = tolower(s.cpt(pos + 1));
    if [b's', b't', b'm', b'd'].iter().any(|&x| n == x as u32) {
        return Some(pos + 2);
    }
    if pos + 2 < s.end {
        let nn = tolower(s.cpt(pos + 2));
        if [(b'r', b'e'), (b'v', b'e'), (b'l', b'l')]
            .iter()
            .any(|&(x, y)| n == x as u32 && nn == y as u32)
        {
            return Some(pos + 3);
        }
    }
    None
}

/// `\p{N}{1,max}` repeated over the run of numbers at `pos`, each full group's end pushed:
/// where the run ends.
fn digit_groups(s: &Seg, mut pos: usize, max: usize, out: &mut Vec<usize>) -> usize {
    let mut ini = pos;
    while s.fl(pos).is_number() {
        pos += 1;
        if pos - ini >= max {
            push(out, pos);
            ini = pos;
        }
    }
    pos
}

/// Where the last alternatives of the llama3-style fast paths end, matched at `pos`:
/// ` ?OTHER+[\r\n]*` (the first test on the current code point's flags, OTHER by `other`),
/// then `\s*[\r\n]+|\s+(?!\S)|\s+`, else the one code point.
fn punct_space_or_one(s: &Seg, mut pos: usize, other: impl Fn(CptFlags) -> bool) -> usize {
    let f = s.fl(pos);
    let space = s.cpt(pos) == ' ' as u32;
    let mut f2 = if space { s.fl(pos + 1) } else { f };
    if other(f2) && !f.is_none() {
        pos += space as usize;
        while other(f2) && !f2.is_none() {
            pos += 1;
            f2 = s.fl(pos);
        }
        while s.cpt(pos) == '\r' as u32 || s.cpt(pos) == '\n' as u32 {
            pos += 1;
        }
        return pos;
    }
    fast_whitespace(s, pos).unwrap_or(pos + 1)
}

/// The fast paths' `\s*[\r\n]+|\s+(?!\S)|\s+`.
pub(super) fn fast_whitespace(s: &Seg, pos: usize) -> Option<usize> {
    if !s.fl(pos).is_whitespace() {
        return None;
    }
    let (run_end, last_crlf) = s.ws_run(pos);
    if let Some(last) = last_crlf {
        return Some(last + 1);
    }
    let n = run_end - pos;
    if n > 1 && s.cpt(run_end) != OUT {
        return Some(run_end - 1);
    }
    Some(run_end)
}

pub(super) fn kimi_k2_fast(s: &Seg, out: &mut Vec<usize>) {
    let letter_not_han = |i: usize| s.fl(i).is_letter() && !is_han(s.cpt(i));
    let mut pos = s.start;
    while pos < s.end {
        let c = s.cpt(pos);
        let f = s.fl(pos);
        // [\p{Han}]+
        if is_han(c) {
            while is_han(s.cpt(pos)) {
                pos += 1;
            }
            push(out, pos);
            continue;
        }
        // a letter run without Han, after an optional leading code point, with an optional
        // contraction glued on (no upper/lower case distinction is made here)
        let leading = !(c == '\r' as u32 || c == '\n' as u32 || f.is_letter() || f.is_number());
        if (f.is_letter() && !is_han(c)) || (leading && letter_not_han(pos + 1)) {
            if leading {
                pos += 1;
            }
            while letter_not_han(pos) {
                pos += 1;
            }
            pos = contraction_ci(s, pos).unwrap_or(pos);
            push(out, pos);
            continue;
        }
        // \p{N}{1,3}
        if f.is_number() {
            pos = digit_groups(s, pos, 3, out);
            push(out, pos);
            continue;
        }
        //  ?[^\s\p{L}\p{N}]+[\r\n]*, whitespace, or one code point
        let other =
            |f: CptFlags| !(f.is_whitespace() || f.is_letter() || f.is_number() || f.is_none());
        pos = punct_space_or_one(s, pos, other);
        push(out, pos);
    }
}

/// Each run of `\p{N}` is cut into groups of three from its end (1234567 -> 1|234|567). As in
/// llama.cpp, a token only ends after a digit group or at the piece's end, so the text before a
/// number belongs to its first group ("ab12345" -> "ab12" | "345").
pub(super) fn afmoe_digits(s: &Seg, out: &mut Vec<usize>) {
    let mut pos = s.start;
    while pos < s.end {
        if !s.fl(pos).is_number() {
            pos += 1;
            continue;
        }
        let start = pos;
        pos = s.run(pos, number);
        let mut cut = start + (pos - start) % 3;
        if cut == start {
            cut += 3;
        }
        while cut <= pos {
            push(out, cut);
            cut += 3;
        }
    }
}
