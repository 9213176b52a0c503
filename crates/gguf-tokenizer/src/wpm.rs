//! WordPiece (`tokenizer.ggml.model = bert`) as llama.cpp runs it (`llm_tokenizer_wpm_session`).
//!
//! The GGUF vocabulary is not Hugging Face's: the converter writes word-initial pieces with a
//! `▁` in front (`hello` → `▁hello`), continuation pieces without their `##` (`##ing` → `ing`) and
//! control tokens (`[CLS]`) unchanged. Tokenizing then goes:
//!
//! 1. *Pre-processing* (`preprocess`): the bytes are decoded with llama.cpp's lax decoder (invalid
//!    bytes become U+FFFD); with `strip_accents`, every code point is replaced by the first code
//!    point of its canonical decomposition and marks (`\p{M}`) are dropped; NUL, U+FFFD and
//!    `\p{C}` are dropped; White_Space separates words; punctuation (`\p{P}`), ASCII symbols and
//!    "Chinese characters" are words of their own; with `lowercase` the simple lowercase mapping
//!    is applied. Nothing else is normalised (no NFC, no full NFD: "é" loses its accent only
//!    because its decomposition starts with "e").
//! 2. *Greedy longest match* over the bytes of `▁` + word: at each position the longest vocabulary
//!    text (any token, control ones included) starting there is taken; if some position has none,
//!    the whole word becomes the unknown token.

use crate::unicode::{cpt_flags, cpt_to_utf8, is_chinese_char, nfd_first, tolower, utf8_to_cpts};
use crate::vocab::Vocab;

/// Tokenizes one raw-text fragment into `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &[u8], out: &mut Vec<u32>) {
    let mut word = crate::ESCAPED_SPACE.to_vec();
    let prefix = word.len();
    preprocess(
        vocab.lowercase,
        vocab.strip_accents,
        text,
        &mut word,
        prefix,
        |w| tokenize_word(vocab, w, out),
    );
}

/// Splits `text` into words (see the module documentation); calls `emit` with each non-empty
/// word, as `buf[..prefix]` followed by the word's bytes. `buf[..prefix]` is kept intact.
fn preprocess(
    lowercase: bool,
    strip_accents: bool,
    text: &[u8],
    buf: &mut Vec<u8>,
    prefix: usize,
    mut emit: impl FnMut(&[u8]),
) {
    let mut flush = |buf: &mut Vec<u8>| {
        if buf.len() > prefix {
            emit(buf);
            buf.truncate(prefix);
        }
    };
    for cpt in utf8_to_cpts(text) {
        let cpt = if strip_accents { nfd_first(cpt) } else { cpt };
        let flags = cpt_flags(cpt);
        if flags.is_whitespace() {
            flush(buf);
            continue;
        }
        if cpt == 0 || cpt == 0xFFFD || flags.is_control() {
            continue;
        }
        if strip_accents && flags.is_accent_mark() {
            continue;
        }
        let single =
            flags.is_punctuation() || (cpt < 0x7F && flags.is_symbol()) || is_chinese_char(cpt);
        if single {
            flush(buf);
        }
        let mapped = if lowercase { tolower(cpt) } else { cpt };
        // Above U+10FFFF (only from overlong or out-of-range input bytes) llama.cpp throws
        // "invalid codepoint" and the whole call fails; the code point is dropped here.
        if cpt_to_utf8(mapped, buf).is_none() {
            continue;
        }
        if single {
            flush(buf);
        }
    }
    flush(buf);
}

/// Greedy longest-match of `word` (which starts with `▁`), all or nothing.
fn tokenize_word(vocab: &Vocab, word: &[u8], out: &mut Vec<u32>) {
    let start = out.len();
    longest_pieces(
        word.len(),
        vocab.max_token_len + 1,
        |i, j| vocab.id(&word[i..j]),
        out,
    );
    if out.len() == start {
        out.extend(vocab.special.unk);
    }
}

/// WordPiece's greedy longest match over a word of `len` bytes: from each position on, the
/// longest piece `piece(start, end)` has an id for (ends tried from `start + max_piece` down),
/// until the word is covered. Where no piece fits, what was pushed is taken back and it
/// returns false. Shared with `tokenizers`' WordPiece (`hf_json`), whose pieces are looked up
/// with their continuation prefix.
pub(crate) fn longest_pieces(
    len: usize,
    max_piece: usize,
    mut piece: impl FnMut(usize, usize) -> Option<u32>,
    out: &mut Vec<u32>,
) -> bool {
    let start = out.len();
    let mut i = 0;
    while i < len {
        let longest = (i + 1..=len.min(i + max_piece))
            .rev()
            .find_map(|j| piece(i, j).map(|id| (id, j)));
        match longest {
            Some((id, j)) => {
                out.push(id);
                i = j;
            }
            None => {
                out.truncate(start);
                return false;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(lowercase: bool, strip: bool, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        preprocess(lowercase, strip, text.as_bytes(), &mut buf, 0, |w| {
            out.push(String::from_utf8(w.to_vec()).unwrap())
        });
        out
    }

    #[test]
    fn preprocessing_splits_like_llama_cpp() {
        assert_eq!(
            words(true, true, "Héllo, WORLD!  naïve\tcafé中文x"),
            ["hello", ",", "world", "!", "naive", "cafe", "中", "文", "x"]
        );
        // Cased: case and accents stay; `$` is an ASCII symbol, `€` (U+20AC) is not split off.
        assert_eq!(
            words(false, false, "Héllo $5 5€"),
            ["Héllo", "$", "5", "5€"]
        );
        // Controls, NUL and replacement characters vanish without splitting.
        assert_eq!(words(true, true, "a\u{0}b\u{200d}c\u{fffd}d"), ["abcd"]);
        assert_eq!(words(true, true, "   "), Vec::<String>::new());
    }

    #[test]
    fn invalid_utf8_is_dropped() {
        let mut out = Vec::new();
        let mut buf = Vec::new();
        preprocess(true, true, b"a\xffb \xf4\x90\x80\x80c", &mut buf, 0, |w| {
            out.push(w.to_vec())
        });
        assert_eq!(out, [b"ab".to_vec(), b"c".to_vec()]);
    }
}
