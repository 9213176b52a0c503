//! Python's `str` semantics, once for the whole workspace: the character classes
//! (`isspace`, `isalpha`, `isdecimal`, cased letters, line boundaries) and the methods built on
//! them (`title`, `capitalize`, `swapcase`, `islower`, `strip`, `split`, `splitlines`, ...).
//!
//! Chat templates call these methods on strings (`gguf_tokenizer::chat`), and `gguf-convert`
//! reads model cards as gguf-py's Python reads them (`id_to_title`, the YAML scalars); both
//! take them from here so that they agree with Python and with each other.
//!
//! Known differences from CPython, on text no template or model card holds: a capital sigma
//! lowercased one character at a time (in `title`, `capitalize`, `swapcase`) is `σ` where
//! Python's context rule may give a final `ς`, and the character data are Rust's Unicode
//! version rather than the one of a given Python release.
//!
//! ```
//! use gguf_tokenizer::pystr;
//!
//! assert_eq!(pystr::title("hello wORLD"), "Hello World");
//! assert_eq!(pystr::title("ǆemal"), "ǅemal");
//! assert_eq!(pystr::split_whitespace(" a  b c ", Some(1)), ["a", "b c "]);
//! ```

use unicode_properties::{GeneralCategory, GeneralCategoryGroup, UnicodeGeneralCategory};

/// `str.isspace()` for one character: Unicode white space and the separators `\x1c`..`\x1f`
/// (what `str.split()` and `str.strip()` remove).
pub fn isspace(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// `str.isalpha()` for one character: a letter (general category `L*`).
pub fn isalpha(c: char) -> bool {
    c.general_category_group() == GeneralCategoryGroup::Letter
}

/// `str.isdecimal()` for one character: a decimal digit (general category `Nd`).
pub fn isdecimal(c: char) -> bool {
    c.general_category() == GeneralCategory::DecimalNumber
}

/// The value of a decimal digit (`unicodedata.decimal`), `None` for any other character.
/// Unicode encodes every decimal digit in a run of ten from its zero.
pub fn decimal_value(c: char) -> Option<u32> {
    if !isdecimal(c) {
        return None;
    }
    let mut run = 0u32;
    let mut cp = c as u32;
    while cp > 0 {
        match char::from_u32(cp - 1) {
            Some(p) if isdecimal(p) => {
                run += 1;
                cp -= 1;
            }
            _ => break,
        }
    }
    Some(run % 10)
}

/// A titlecase letter (general category `Lt`: `ǅ`, `ᾈ`, ...), which is neither upper nor lower case.
pub fn is_titlecase(c: char) -> bool {
    c.general_category() == GeneralCategory::TitlecaseLetter
}

/// A cased character, as Python's `str.title()` and `str.istitle()` decide where words begin.
pub fn is_cased(c: char) -> bool {
    c.is_lowercase() || c.is_uppercase() || is_titlecase(c)
}

/// Python's line boundaries (`str.splitlines`).
pub fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\x0b'
            | '\x0c'
            | '\x1c'
            | '\x1d'
            | '\x1e'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// `str.upper()`.
pub fn upper(s: &str) -> String {
    s.to_uppercase()
}

/// `str.lower()` (and, approximately, `str.casefold()`, which also folds `ß` and a few more).
pub fn lower(s: &str) -> String {
    s.to_lowercase()
}

/// Appends the titlecase of `c` (Unicode's titlecase mapping, with its special casing), as
/// Python's `str.title()` and `str.capitalize()` map the first letter of a word. Rust has only
/// upper case: the titlecase is the uppercase's first character with the rest in lower case
/// (`ß` → `Ss`, `ﬁ` → `Fi`), but for the characters listed here, whose titlecase differs.
fn push_titlecase(out: &mut String, c: char) {
    let special: Option<&str> = match c {
        'ŉ' => Some("\u{2bc}N"),
        '\u{1fb2}' => Some("\u{1fba}\u{345}"),
        '\u{1fb4}' => Some("\u{386}\u{345}"),
        '\u{1fb7}' => Some("\u{391}\u{342}\u{345}"),
        '\u{1fc2}' => Some("\u{1fca}\u{345}"),
        '\u{1fc4}' => Some("\u{389}\u{345}"),
        '\u{1fc7}' => Some("\u{397}\u{342}\u{345}"),
        '\u{1ff2}' => Some("\u{1ffa}\u{345}"),
        '\u{1ff4}' => Some("\u{38f}\u{345}"),
        '\u{1ff7}' => Some("\u{3a9}\u{342}\u{345}"),
        _ => None,
    };
    if let Some(text) = special {
        out.push_str(text);
        return;
    }
    let single = match c {
        // The digraphs: DŽ, Dž, dž all have the titlecase Dž (and so for LJ, NJ, DZ).
        '\u{1c4}'..='\u{1c6}' => Some('\u{1c5}'),
        '\u{1c7}'..='\u{1c9}' => Some('\u{1c8}'),
        '\u{1ca}'..='\u{1cc}' => Some('\u{1cb}'),
        '\u{1f1}'..='\u{1f3}' => Some('\u{1f2}'),
        // Georgian Mkhedruli letters are their own titlecase (their uppercase is Mtavruli).
        '\u{10d0}'..='\u{10fa}' | '\u{10fd}'..='\u{10ff}' => Some(c),
        // Greek with a subscript iota (ypogegrammeni): the titlecase keeps it as one letter.
        '\u{1f80}'..='\u{1faf}' => char::from_u32(c as u32 | 0x8),
        '\u{1fb3}' | '\u{1fbc}' => Some('\u{1fbc}'),
        '\u{1fc3}' | '\u{1fcc}' => Some('\u{1fcc}'),
        '\u{1ff3}' | '\u{1ffc}' => Some('\u{1ffc}'),
        _ => None,
    };
    if let Some(t) = single {
        out.push(t);
        return;
    }
    let mut upper = c.to_uppercase();
    if let Some(first) = upper.next() {
        out.push(first);
        for rest in upper {
            out.extend(rest.to_lowercase());
        }
    }
}

/// `str.title()`: each cased character after an uncased one in titlecase, the others in
/// lower case.
///
/// ```
/// assert_eq!(gguf_tokenizer::pystr::title("ǆ"), "\u{1c5}");
/// assert_eq!(gguf_tokenizer::pystr::title("they're ßig"), "They'Re Ssig");
/// ```
pub fn title(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut previous_cased = false;
    for c in s.chars() {
        if previous_cased {
            out.extend(c.to_lowercase());
        } else {
            push_titlecase(&mut out, c);
        }
        previous_cased = is_cased(c);
    }
    out
}

/// `str.capitalize()` (Python 3.8 and later): the first character in titlecase, the rest in
/// lower case.
pub fn capitalize(s: &str) -> String {
    let mut chars = s.chars();
    let mut out = String::with_capacity(s.len());
    if let Some(first) = chars.next() {
        push_titlecase(&mut out, first);
    }
    out.extend(chars.flat_map(char::to_lowercase));
    out
}

/// `str.swapcase()`: upper case to lower and lower to upper; titlecase letters and uncased
/// characters unchanged.
pub fn swapcase(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_uppercase() {
            out.extend(c.to_lowercase());
        } else if c.is_lowercase() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// `str.islower()`: at least one cased character, and none in upper case or titlecase.
pub fn islower(s: &str) -> bool {
    let mut cased = false;
    for c in s.chars() {
        if c.is_uppercase() || is_titlecase(c) {
            return false;
        }
        cased |= c.is_lowercase();
    }
    cased
}

/// `str.isupper()`: at least one cased character, and none in lower case or titlecase.
pub fn isupper(s: &str) -> bool {
    let mut cased = false;
    for c in s.chars() {
        if c.is_lowercase() || is_titlecase(c) {
            return false;
        }
        cased |= c.is_uppercase();
    }
    cased
}

/// `str.istitle()`: at least one cased character; upper and titlecase characters only after
/// uncased ones, lower case ones only after cased ones.
pub fn istitle(s: &str) -> bool {
    let (mut cased, mut previous_cased) = (false, false);
    for c in s.chars() {
        if c.is_uppercase() || is_titlecase(c) {
            if previous_cased {
                return false;
            }
            previous_cased = true;
            cased = true;
        } else if c.is_lowercase() {
            if !previous_cased {
                return false;
            }
            previous_cased = true;
            cased = true;
        } else {
            previous_cased = false;
        }
    }
    cased
}

/// Whether `c` is stripped by `strip(chars)`: one of `chars`, or white space without them.
fn stripped(chars: Option<&str>) -> impl Fn(char) -> bool + '_ {
    move |c| match chars {
        Some(set) => set.contains(c),
        None => isspace(c),
    }
}

/// `str.strip(chars)`: `s` without the leading and trailing characters in `chars` (white
/// space when `None`).
pub fn strip<'s>(s: &'s str, chars: Option<&str>) -> &'s str {
    s.trim_matches(stripped(chars))
}

/// `str.lstrip(chars)`: as [`strip`], at the start only.
pub fn lstrip<'s>(s: &'s str, chars: Option<&str>) -> &'s str {
    s.trim_start_matches(stripped(chars))
}

/// `str.rstrip(chars)`: as [`strip`], at the end only.
pub fn rstrip<'s>(s: &'s str, chars: Option<&str>) -> &'s str {
    s.trim_end_matches(stripped(chars))
}

/// The byte ranges of the words of `s`: its runs of characters that are not white space.
fn word_ranges(s: &str) -> Vec<std::ops::Range<usize>> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in s.char_indices() {
        match (isspace(c), start) {
            (true, Some(b)) => {
                words.push(b..i);
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    words.extend(start.map(|b| b..s.len()));
    words
}

/// `str.split(None, maxsplit)`: the words of `s` (runs of white space separate them); with a
/// `maxsplit` of `Some(k)`, after `k` splits the rest of the text from the next word on is the
/// last part as it stands.
pub fn split_whitespace(s: &str, maxsplit: Option<usize>) -> Vec<&str> {
    let words = word_ranges(s);
    match maxsplit {
        Some(k) if words.len() > k => words[..k]
            .iter()
            .map(|r| &s[r.clone()])
            .chain(std::iter::once(&s[words[k].start..]))
            .collect(),
        _ => words.iter().map(|r| &s[r.clone()]).collect(),
    }
}

/// `str.rsplit(None, maxsplit)`: as [`split_whitespace`], the splits counted from the right,
/// so that the rest of the text is the first part.
pub fn rsplit_whitespace(s: &str, maxsplit: Option<usize>) -> Vec<&str> {
    let words = word_ranges(s);
    let n = words.len();
    match maxsplit {
        Some(k) if n > k => std::iter::once(&s[..words[n - k - 1].end])
            .chain(words[n - k..].iter().map(|r| &s[r.clone()]))
            .collect(),
        _ => words.iter().map(|r| &s[r.clone()]).collect(),
    }
}

/// `str.split(sep, maxsplit)` with a separator (not empty: Python raises `ValueError`).
pub fn split<'s>(s: &'s str, sep: &str, maxsplit: Option<usize>) -> Vec<&'s str> {
    match maxsplit {
        Some(n) => s.splitn(n + 1, sep).collect(),
        None => s.split(sep).collect(),
    }
}

/// `str.rsplit(sep, maxsplit)` with a separator: as [`split`], the splits counted from the right.
pub fn rsplit<'s>(s: &'s str, sep: &str, maxsplit: Option<usize>) -> Vec<&'s str> {
    match maxsplit {
        Some(n) => {
            let mut parts: Vec<&str> = s.rsplitn(n + 1, sep).collect();
            parts.reverse();
            parts
        }
        None => s.split(sep).collect(),
    }
}

/// `str.splitlines(keepends)`: the lines of `s`, split at Python's line boundaries (`\r\n` as
/// one), without their ends unless `keepends`; no empty last line after a final break.
///
/// ```
/// use gguf_tokenizer::pystr::splitlines;
///
/// assert_eq!(splitlines("a\r\nb\u{2028}c\n", false), ["a", "b", "c"]);
/// assert_eq!(splitlines("a\r\nb", true), ["a\r\n", "b"]);
/// ```
pub fn splitlines(s: &str, keepends: bool) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut iter = s.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        if is_line_break(c) {
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some(&(j, '\n')) = iter.peek() {
                    end = j + 1;
                    iter.next();
                }
            }
            lines.push(if keepends {
                &s[start..end]
            } else {
                &s[start..i]
            });
            start = end;
        }
    }
    if start < s.len() {
        lines.push(&s[start..]);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values are CPython 3.11's.
    #[test]
    fn title_uses_the_titlecase_mapping() {
        assert_eq!(title("ǆ"), "\u{1c5}");
        assert_eq!(title("Ǆ"), "\u{1c5}");
        assert_eq!(title("ǉubljana ǌ"), "ǈubljana ǋ");
        assert_eq!(title("ßa"), "Ssa");
        assert_eq!(title("ﬁne"), "Fine");
        assert_eq!(title("ŉ"), "\u{2bc}N");
        assert_eq!(title("ᾳ"), "\u{1fbc}");
        assert_eq!(title("ᾀ"), "\u{1f88}");
        assert_eq!(title("ᾷ"), "\u{391}\u{342}\u{345}");
        assert_eq!(title("ა"), "ა");
        assert_eq!(title("o'neil 2nd-place"), "O'Neil 2Nd-Place");
        assert_eq!(capitalize("ǆEMAL"), "ǅemal");
        assert_eq!(capitalize(""), "");
    }

    #[test]
    fn case_predicates_count_titlecase_letters() {
        assert!(!islower("ǅ") && !isupper("ǅ") && istitle("ǅ"));
        assert!(!islower("aǅ") && !isupper("Aǅ"));
        assert!(istitle("Hello World") && !istitle("HeLlo") && !istitle("123"));
        assert!(islower("abc1") && isupper("ABC1") && !islower("123"));
        assert_eq!(swapcase("aBǅ"), "Abǅ");
    }

    #[test]
    fn splits_as_python() {
        assert_eq!(split_whitespace("\x1ca b\u{3000}c", None), ["a", "b", "c"]);
        assert_eq!(rsplit_whitespace(" a b  c ", Some(1)), [" a b", "c"]);
        assert_eq!(split("a,b,c", ",", Some(1)), ["a", "b,c"]);
        assert_eq!(rsplit("a,b,c", ",", Some(1)), ["a,b", "c"]);
        assert_eq!(strip("\x1f ab \n", None), "ab");
        assert_eq!(lstrip("xxaxx", Some("x")), "axx");
        assert_eq!(rstrip("xxaxx", Some("x")), "xxa");
        assert_eq!(decimal_value('٣'), Some(3));
        assert_eq!(decimal_value('a'), None);
    }
}
