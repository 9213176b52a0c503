//! Added tokens (`tokenizers`' `AddedVocabulary`): found in the raw or normalized text before
//! the pre-tokenizer runs, honouring `single_word`, `lstrip` and `rstrip`.

use std::ops::Range;

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use crate::unicode::cpt_flags;
use rustc_hash::FxHashMap;

#[derive(Clone, Debug)]
pub(super) struct AddedToken {
    pub(super) id: u32,
    pub(super) content: String,
    /// What is searched for: the content, normalized if `normalized`.
    pub(super) pattern: String,
    pub(super) single_word: bool,
    pub(super) lstrip: bool,
    pub(super) rstrip: bool,
    pub(super) normalized: bool,
    pub(super) special: bool,
}

/// A byte trie of the added tokens' patterns, one for the raw text and one for normalized
/// text, searched leftmost-longest as `tokenizers`' Aho-Corasick automaton is.
#[derive(Clone, Debug, Default)]
pub(super) struct AddedMatcher {
    pub(super) tokens: Vec<AddedToken>,
    pub(super) raw: Trie,
    pub(super) normalized: Trie,
}

#[derive(Clone, Debug, Default)]
pub(super) struct Trie {
    /// (node, byte) → child node; node 0 is the root.
    pub(super) edges: FxHashMap<(u32, u8), u32>,
    /// node → token index, where a pattern ends.
    pub(super) ends: FxHashMap<u32, usize>,
    pub(super) nodes: u32,
}

impl Trie {
    pub(super) fn insert(&mut self, pattern: &str, value: usize) {
        let mut node = 0;
        for &b in pattern.as_bytes() {
            node = match self.edges.get(&(node, b)) {
                Some(&n) => n,
                None => {
                    self.nodes += 1;
                    self.edges.insert((node, b), self.nodes);
                    self.nodes
                }
            };
        }
        self.ends.insert(node, value);
    }

    pub(super) fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The longest pattern starting at `text[at..]`: (end, token index).
    pub(super) fn longest_at(&self, text: &[u8], at: usize) -> Option<(usize, usize)> {
        let mut node = 0;
        let mut best = None;
        for (i, &b) in text[at..].iter().enumerate() {
            match self.edges.get(&(node, b)) {
                Some(&n) => node = n,
                None => break,
            }
            if let Some(&v) = self.ends.get(&node) {
                best = Some((at + i + 1, v));
            }
        }
        best
    }

    /// Non-overlapping leftmost-longest matches: (range, token index).
    pub(super) fn find_iter(&self, text: &str) -> Vec<(Range<usize>, usize)> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            match self.longest_at(bytes, at) {
                Some((end, v)) => {
                    out.push((at..end, v));
                    at = end;
                }
                None => at += 1,
            }
        }
        out
    }
}

/// `\w` as the `regex` crate has it (Alphabetic, marks, decimal digits, connector
/// punctuation, joiners), for `single_word`.
pub(super) fn is_word_char(c: char) -> bool {
    c.is_alphabetic()
        || cpt_flags(c as u32).is_accent_mark()
        || c.general_category() == GeneralCategory::DecimalNumber
        || matches!(
            c,
            '_' | '\u{200C}' | '\u{200D}' | '\u{203F}' | '\u{2040}' | '\u{2054}'
        )
        || matches!(
            c,
            '\u{FE33}' | '\u{FE34}' | '\u{FE4D}'..='\u{FE4F}' | '\u{FF3F}'
        )
}

impl AddedMatcher {
    pub(super) fn new(tokens: &[AddedToken]) -> AddedMatcher {
        let mut m = AddedMatcher {
            tokens: tokens.to_vec(),
            ..AddedMatcher::default()
        };
        for (i, t) in tokens.iter().enumerate() {
            if t.pattern.is_empty() {
                continue;
            }
            if t.normalized {
                m.normalized.insert(&t.pattern, i);
            } else {
                m.raw.insert(&t.pattern, i);
            }
        }
        m
    }

    /// `AddedVocabulary::find_matches`: the splits of `sentence`, each an added token's id or
    /// text, covering it.
    pub(super) fn find(
        &self,
        trie: &Trie,
        sentence: &str,
        skip_special: bool,
    ) -> Vec<(Option<u32>, Range<usize>)> {
        if trie.is_empty() || sentence.is_empty() {
            return vec![(None, 0..sentence.len())];
        }
        let mut splits = Vec::new();
        let mut start_offset = 0;
        for (range, k) in trie.find_iter(sentence) {
            let token = &self.tokens[k];
            let (mut start, mut stop) = (range.start, range.end);
            if skip_special && token.special {
                continue;
            }
            if token.single_word {
                let start_space = start == 0
                    || !sentence[..start]
                        .chars()
                        .next_back()
                        .is_some_and(is_word_char);
                let stop_space = stop == sentence.len()
                    || !sentence[stop..].chars().next().is_some_and(is_word_char);
                if !start_space || !stop_space {
                    continue;
                }
            }
            if token.lstrip {
                let trimmed = sentence[..start]
                    .trim_end_matches(char::is_whitespace)
                    .len();
                start = trimmed.max(start_offset);
            }
            if token.rstrip {
                stop += sentence[stop..].len()
                    - sentence[stop..]
                        .trim_start_matches(char::is_whitespace)
                        .len();
            }
            if start_offset < start {
                splits.push((None, start_offset..start));
            }
            splits.push((Some(token.id), start..stop));
            start_offset = stop;
        }
        if start_offset != sentence.len() {
            splits.push((None, start_offset..sentence.len()));
        }
        splits
    }
}
