//! Added tokens (`tokenizers`' `AddedVocabulary`): found in the raw or normalized text before
//! the pre-tokenizer runs, honouring `single_word`, `lstrip` and `rstrip`.

use std::ops::Range;

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use aho_corasick::{AhoCorasick, MatchKind};
use rustc_hash::FxHashMap;

use super::err;
use crate::error::Result;
use crate::unicode::cpt_flags;

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

/// The added tokens and their patterns, one automaton for the raw text and one for the
/// normalized text.
#[derive(Clone, Debug, Default)]
pub(super) struct AddedMatcher {
    pub(super) tokens: Vec<AddedToken>,
    pub(super) raw: Patterns,
    pub(super) normalized: Patterns,
}

/// Patterns searched leftmost-longest with `aho-corasick`, as `tokenizers` searches them.
#[derive(Clone, Debug, Default)]
pub(super) struct Patterns {
    automaton: Option<AhoCorasick>,
    /// Pattern index → token index.
    tokens: Vec<usize>,
}

impl Patterns {
    /// `(pattern, token index)` pairs; of equal patterns the last one is kept.
    fn new(pairs: Vec<(&str, usize)>) -> Result<Patterns> {
        let mut last: FxHashMap<&str, usize> = FxHashMap::default();
        for &(pattern, token) in &pairs {
            last.insert(pattern, token);
        }
        let kept: Vec<(&str, usize)> = pairs
            .into_iter()
            .filter(|(pattern, token)| last[pattern] == *token)
            .collect();
        if kept.is_empty() {
            return Ok(Patterns::default());
        }
        let automaton = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(kept.iter().map(|(pattern, _)| pattern))
            .map_err(|e| err(format!("the added tokens cannot be searched for: {e}")))?;
        Ok(Patterns {
            automaton: Some(automaton),
            tokens: kept.into_iter().map(|(_, token)| token).collect(),
        })
    }

    pub(super) fn is_empty(&self) -> bool {
        self.automaton.is_none()
    }

    /// Non-overlapping leftmost-longest matches: (range, token index).
    fn find_iter(&self, text: &str) -> Vec<(Range<usize>, usize)> {
        let Some(automaton) = &self.automaton else {
            return Vec::new();
        };
        automaton
            .find_iter(text)
            .map(|m| (m.range(), self.tokens[m.pattern().as_usize()]))
            .collect()
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
    pub(super) fn new(tokens: &[AddedToken]) -> Result<AddedMatcher> {
        let patterns = |normalized: bool| {
            let pairs = tokens
                .iter()
                .enumerate()
                .filter(|(_, t)| t.normalized == normalized && !t.pattern.is_empty())
                .map(|(i, t)| (t.pattern.as_str(), i))
                .collect();
            Patterns::new(pairs)
        };
        Ok(AddedMatcher {
            tokens: tokens.to_vec(),
            raw: patterns(false)?,
            normalized: patterns(true)?,
        })
    }

    /// `AddedVocabulary::find_matches`: the splits of `sentence`, each an added token's id or
    /// text, covering it.
    pub(super) fn find(
        &self,
        patterns: &Patterns,
        sentence: &str,
        skip_special: bool,
    ) -> Vec<(Option<u32>, Range<usize>)> {
        if patterns.is_empty() || sentence.is_empty() {
            return vec![(None, 0..sentence.len())];
        }
        let mut splits = Vec::new();
        let mut start_offset = 0;
        for (range, k) in patterns.find_iter(sentence) {
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
