//! Normalized text that remembers, for each character, the input offset it comes from.

use std::ops::Range;

use memchr::memmem;

/// A piece of normalized text: its characters and, for each, the byte offset in the input of
/// the character it comes from (what `tokenizers`' alignments give; `Metaspace` with
/// `prepend_scheme: first` asks whether a piece starts at offset 0).
#[derive(Clone, Debug, Default)]
pub(super) struct Piece {
    pub(super) chars: Vec<char>,
    pub(super) orig: Vec<usize>,
}

impl Piece {
    pub(super) fn new(text: &str, offset: usize) -> Piece {
        let mut p = Piece::default();
        for (i, c) in text.char_indices() {
            p.chars.push(c);
            p.orig.push(offset + i);
        }
        p
    }

    pub(super) fn is_empty(&self) -> bool {
        self.chars.is_empty()
    }

    pub(super) fn slice(&self, r: Range<usize>) -> Piece {
        Piece {
            chars: self.chars[r.clone()].to_vec(),
            orig: self.orig[r].to_vec(),
        }
    }

    pub(super) fn string(&self) -> String {
        self.chars.iter().collect()
    }

    /// Puts `text` in front, aligned with the first character (`NormalizedString::prepend`).
    pub(super) fn prepend(&mut self, text: &str) {
        let Some(&o) = self.orig.first() else { return };
        let n = text.chars().count();
        self.chars.splice(0..0, text.chars());
        self.orig.splice(0..0, std::iter::repeat_n(o, n));
    }

    /// Every character through `f`, each output character aligned with its source.
    pub(super) fn map_chars(&mut self, mut f: impl FnMut(char, &mut Vec<char>)) {
        let mut chars = Vec::with_capacity(self.chars.len());
        let mut orig = Vec::with_capacity(self.orig.len());
        let mut buf = Vec::new();
        for (&c, &o) in self.chars.iter().zip(&self.orig) {
            buf.clear();
            f(c, &mut buf);
            orig.extend(std::iter::repeat_n(o, buf.len()));
            chars.extend_from_slice(&buf);
        }
        self.chars = chars;
        self.orig = orig;
    }

    /// Character index of each byte offset of `self.string()` (plus the end).
    pub(super) fn char_index_of_bytes(&self) -> Vec<usize> {
        let mut idx = Vec::new();
        for (i, c) in self.chars.iter().enumerate() {
            idx.extend(std::iter::repeat_n(i, c.len_utf8()));
        }
        idx.push(self.chars.len());
        idx
    }

    /// The character ranges of `pattern`'s occurrences, leftmost first and not overlapping
    /// (`memchr`'s memmem over the UTF-8 text, whose matches start and end on characters).
    pub(super) fn find_all(&self, pattern: &str) -> Vec<Range<usize>> {
        if pattern.is_empty() {
            return Vec::new();
        }
        let text = self.string();
        let index = self.char_index_of_bytes();
        memmem::find_iter(text.as_bytes(), pattern.as_bytes())
            .map(|b| index[b]..index[b + pattern.len()])
            .collect()
    }
}
