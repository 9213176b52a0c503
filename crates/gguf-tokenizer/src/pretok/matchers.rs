//! Matchers of the single regexes llama.cpp runs through `std::regex` (each gives where a
//! match starting at a position ends), and the code point ranges they read.

use super::seg::*;
use crate::unicode::CptFlags;

// matchers for the regexes llama.cpp runs through std::regex

/// `[\p{P}\$\+<=>\^~\|]+`
pub(super) fn m_default_punct(s: &Seg, p: usize) -> Option<usize> {
    fn class(c: u32, f: CptFlags) -> bool {
        f.is_punctuation()
            || matches!(
                char::from_u32(c),
                Some('$' | '+' | '<' | '=' | '>' | '^' | '~' | '|')
            )
    }
    s.is(p, class).then(|| s.run(p, class))
}

/// ``[\p{P}\$\+<=>\^~\|`]+``
pub(super) fn m_falcon_punct(s: &Seg, p: usize) -> Option<usize> {
    fn class(c: u32, f: CptFlags) -> bool {
        f.is_punctuation()
            || matches!(
                char::from_u32(c),
                Some('$' | '+' | '<' | '=' | '>' | '^' | '~' | '|' | '`')
            )
    }
    s.is(p, class).then(|| s.run(p, class))
}

/// `\p{N}+`
pub(super) fn m_numbers(s: &Seg, p: usize) -> Option<usize> {
    s.is(p, number).then(|| s.run(p, number))
}

/// `\p{N}`
pub(super) fn m_number(s: &Seg, p: usize) -> Option<usize> {
    s.is(p, number).then_some(p + 1)
}

/// `\p{N}{1,3}`
pub(super) fn m_numbers_upto3(s: &Seg, p: usize) -> Option<usize> {
    if !s.is(p, number) {
        return None;
    }
    let mut e = p + 1;
    while e < p + 3 && s.is(e, number) {
        e += 1;
    }
    Some(e)
}

/// `[0-9][0-9][0-9]`
pub(super) fn m_ascii_digit_triple(s: &Seg, p: usize) -> Option<usize> {
    (s.is(p, ascii_digit) && s.is(p + 1, ascii_digit) && s.is(p + 2, ascii_digit)).then_some(p + 3)
}

/// `[\r\n]`
pub(super) fn m_crlf(s: &Seg, p: usize) -> Option<usize> {
    s.is(p, crlf_).then_some(p + 1)
}

/// `\S+`
pub(super) fn m_non_space(s: &Seg, p: usize) -> Option<usize> {
    s.is(p, not_ws).then(|| s.run(p, not_ws))
}

/// deepseek-llm's letters: `\s?[A-Za-zµÀ-ÖØ-öø-ƺ...]+` (run on code points)
pub(super) fn m_ds_llm_letters(s: &Seg, p: usize) -> Option<usize> {
    s.opt_then_run(p, ws, ds_llm_letter)
}

/// deepseek-llm's punctuation: `\s?[!-/:-~！-／：-～‘-‟　-。]+` (run on code points)
pub(super) fn m_ds_llm_punct(s: &Seg, p: usize) -> Option<usize> {
    s.opt_then_run(p, ws, ds_llm_punct)
}

/// `[一-龥ࠀ-一가-퟿]+` (deepseek-llm and deepseek-coder; note U+0800..U+4E00 is one range)
pub(super) fn m_ds_llm_cjk(s: &Seg, p: usize) -> Option<usize> {
    s.is(p, ds_llm_cjk).then(|| s.run(p, ds_llm_cjk))
}

/// `\s?\p{L}+`
pub(super) fn m_ds_coder_letters(s: &Seg, p: usize) -> Option<usize> {
    s.opt_then_run(p, ws, letter)
}

/// `\s?\p{P}+`
pub(super) fn m_ds_coder_punct(s: &Seg, p: usize) -> Option<usize> {
    s.opt_then_run(p, ws, punct)
}

/// `[一-龥぀-ゟ゠-ヿ]+`
pub(super) fn m_cjk_kana(s: &Seg, p: usize) -> Option<usize> {
    s.is(p, cjk_kana).then(|| s.run(p, cjk_kana))
}

/// youtu's first regex: `[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+`
pub(super) fn m_youtu_scripts(s: &Seg, p: usize) -> Option<usize> {
    for class in [youtu_hangul as Class, youtu_punct, youtu_bopomofo, cjk_kana] {
        if s.is(p, class) {
            return Some(s.run(p, class));
        }
    }
    None
}

/// afmoe's scripts: `[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]+`. In llama.cpp's
/// source the third range starts at U+8C48 (the NFC form of U+F900) and the Thai one at U+0E40.
pub(super) fn m_afmoe_scripts(s: &Seg, p: usize) -> Option<usize> {
    s.is(p, afmoe_script).then(|| s.run(p, afmoe_script))
}

/// bloom/poro/gpt3-finnish/viking: ` ?[^(\s|.,!?…。，、।۔،)]+` (run on code points)
pub(super) fn m_poro(s: &Seg, p: usize) -> Option<usize> {
    fn class(c: u32, f: CptFlags) -> bool {
        !f.is_whitespace()
            && !matches!(
                c,
                0x28 | 0x29
                    | 0x7C
                    | 0x2E
                    | 0x2C
                    | 0x21
                    | 0x3F
                    | 0x2026
                    | 0x3002
                    | 0xFF0C
                    | 0x3001
                    | 0x0964
                    | 0x06D4
                    | 0x060C
            )
    }
    s.space_then_run(p, class)
}

/// chameleon: `<sentinel:[0-9]+>`
pub(super) fn m_sentinel(s: &Seg, p: usize) -> Option<usize> {
    let prefix = "<sentinel:";
    for (i, b) in prefix.bytes().enumerate() {
        if s.cpt(p + i) != b as u32 {
            return None;
        }
    }
    let digits = p + prefix.len();
    let end = s.run(digits, ascii_digit);
    (end > digits && s.cpt(end) == '>' as u32).then_some(end + 1)
}

/// chameleon: `(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z`
pub(super) fn m_image_tokens(s: &Seg, p: usize) -> Option<usize> {
    for (i, b) in "IMGIMG".bytes().enumerate() {
        if s.cpt(p + i) != b as u32 {
            return None;
        }
    }
    let start = p + 6;
    let mut end = start;
    while end < start + 4 && (0x41..=0x49).contains(&s.cpt(end)) {
        end += 1;
    }
    // backtracking to fewer letters would leave one of A..I, never Z, before the Z
    (end > start && s.cpt(end) == 'Z' as u32).then_some(end + 1)
}

/// chameleon: `([\t\n]|    |  )`
pub(super) fn m_tab_newline_spaces(s: &Seg, p: usize) -> Option<usize> {
    let c = s.cpt(p);
    if c == '\t' as u32 || c == '\n' as u32 {
        return Some(p + 1);
    }
    let spaces = (0..4).take_while(|&i| s.cpt(p + i) == ' ' as u32).count();
    match spaces {
        4 => Some(p + 4),
        2 | 3 => Some(p + 2),
        _ => None,
    }
}

/// chameleon: ``[\p{P}!-/:-@\[-`{-~]``
pub(super) fn m_chameleon_punct(s: &Seg, p: usize) -> Option<usize> {
    fn class(c: u32, f: CptFlags) -> bool {
        f.is_punctuation() || matches!(c, 0x21..=0x2F | 0x3A..=0x40 | 0x5B..=0x60 | 0x7B..=0x7E)
    }
    s.is(p, class).then_some(p + 1)
}

/// `fn NAME(c, f)`: a code point of `TABLE`'s ranges that is not whitespace, for each
/// `NAME: TABLE`.
macro_rules! range_classes {
    ($($name:ident: $table:ident,)*) => {$(
        fn $name(c: u32, f: CptFlags) -> bool {
            !f.is_whitespace() && in_ranges(c, $table)
        }
    )*};
}

range_classes! {
    ds_llm_letter: DS_LLM_LETTERS,
    ds_llm_punct: DS_LLM_PUNCT,
    ds_llm_cjk: DS_LLM_CJK,
    cjk_kana: CJK_KANA,
    youtu_hangul: YOUTU_HANGUL,
    youtu_punct: YOUTU_PUNCT,
    youtu_bopomofo: YOUTU_BOPOMOFO,
    afmoe_script: AFMOE_SCRIPTS,
}

// -------------------------------------------------------------------------------------------------
// code point ranges of the regexes llama.cpp runs on code points, sorted and merged, read out of
// src/llama-vocab.cpp

#[rustfmt::skip]
pub(super) const DS_LLM_LETTERS: &[(u32, u32)] = &[
    (0x0041, 0x005A), (0x0061, 0x007A), (0x00B5, 0x00B5), (0x00C0, 0x00D6), (0x00D8, 0x00F6), (0x00F8, 0x01BA),
    (0x01BC, 0x01BF), (0x01C4, 0x0293), (0x0295, 0x02AF), (0x0370, 0x0373), (0x0376, 0x0377), (0x037B, 0x037D),
    (0x037F, 0x037F), (0x0386, 0x0386), (0x0388, 0x038A), (0x038C, 0x038C), (0x038E, 0x03A1), (0x03A3, 0x03F5),
    (0x03F7, 0x0481), (0x048A, 0x052F), (0x0531, 0x0556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD),
    (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15),
    (0x1F18, 0x1F1D), (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4),
    (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC),
    (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124),
    (0x2126, 0x2126), (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F),
    (0x2145, 0x2149), (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E),
    (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F),
    (0x104B0, 0x104D3), (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
];

#[rustfmt::skip]
pub(super) const DS_LLM_PUNCT: &[(u32, u32)] = &[
    (0x0021, 0x002F), (0x003A, 0x007E), (0x2018, 0x201F), (0x3000, 0x3002), (0xFF01, 0xFF0F), (0xFF1A, 0xFF5E),
];

#[rustfmt::skip]
pub(super) const DS_LLM_CJK: &[(u32, u32)] = &[
    (0x0800, 0x9FA5), (0xAC00, 0xD7FF),
];

#[rustfmt::skip]
pub(super) const CJK_KANA: &[(u32, u32)] = &[
    (0x3040, 0x30FF), (0x4E00, 0x9FA5),
];

#[rustfmt::skip]
pub(super) const YOUTU_HANGUL: &[(u32, u32)] = &[
    (0x3131, 0x318E), (0xAC00, 0xD7A3),
];

#[rustfmt::skip]
pub(super) const YOUTU_PUNCT: &[(u32, u32)] = &[
    (0x2014, 0x2014), (0x2018, 0x2019), (0x201C, 0x201D), (0x2026, 0x2026), (0x3001, 0x303F), (0xFE30, 0xFE4F),
    (0xFF01, 0xFF01), (0xFF0C, 0xFF0C), (0xFF1A, 0xFF1B),
];

#[rustfmt::skip]
pub(super) const YOUTU_BOPOMOFO: &[(u32, u32)] = &[
    (0x3105, 0x312F),
];

#[rustfmt::skip]
pub(super) const AFMOE_SCRIPTS: &[(u32, u32)] = &[
    (0x0E40, 0x0EFF), (0x1000, 0x109F), (0x1100, 0x11FF), (0x1780, 0x17FF), (0x2F00, 0x2FDF), (0x3040, 0x30FF),
    (0x3400, 0x4DBF), (0x4E00, 0xFAFF), (0xFF65, 0xFF9F),
];
