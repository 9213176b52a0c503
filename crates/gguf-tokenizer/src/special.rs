//! Splitting the input at special-token texts, with llama.cpp's precedence
//! (`tokenizer_st_partition`): special tokens are taken one at a time, longest text first, and
//! each splits the raw-text fragments left by the longer ones at every non-overlapping
//! occurrence, left to right.
//!
//! llama.cpp scans the whole text once per special token (thousands for Gemma); here one pass
//! over the text finds every occurrence of every special text (looking only at bytes that can
//! start one), and the precedence is replayed on those occurrences alone.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use crate::vocab::{TokenType, Vocab};

/// A piece of the partitioned input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fragment {
    /// Raw text to tokenize normally.
    Text(Range<usize>),
    /// A special token found in the input.
    Token(u32),
}

/// Special texts of one length → their ids.
type TextsOfLength = HashMap<Box<[u8]>, u32>;

/// Finds special tokens in text: for each text length, the texts of that length.
#[derive(Debug, Clone)]
pub(crate) struct SpecialMatcher {
    /// Bytes that start some special text.
    first_bytes: [bool; 256],
    /// (length, texts of that length → id), longest first.
    by_len: Vec<(usize, TextsOfLength)>,
}

impl SpecialMatcher {
    pub(crate) fn new(vocab: &Vocab) -> SpecialMatcher {
        let mut first_bytes = [false; 256];
        let mut by_len: BTreeMap<usize, TextsOfLength> = BTreeMap::new();
        // In cache order, so the first id of duplicate texts wins, as in llama.cpp's scan.
        for &id in &vocab.special_cache {
            let text = &vocab.tokens[id as usize].text;
            if text.is_empty() {
                continue;
            }
            first_bytes[text[0] as usize] = true;
            by_len
                .entry(text.len())
                .or_default()
                .entry(text.clone())
                .or_insert(id);
        }
        SpecialMatcher {
            first_bytes,
            by_len: by_len.into_iter().rev().collect(),
        }
    }

    /// Splits `text` into raw fragments and special tokens. With `parse_special == false`,
    /// control and unknown tokens are not looked for (user-defined ones still are).
    pub(crate) fn partition(
        &self,
        vocab: &Vocab,
        text: &[u8],
        parse_special: bool,
    ) -> Vec<Fragment> {
        if text.is_empty() {
            return Vec::new();
        }
        let wanted = |id: u32| {
            parse_special
                || !matches!(
                    vocab.tokens[id as usize].ty,
                    TokenType::Control | TokenType::Unknown
                )
        };
        // Every occurrence of every wanted special text: (id, start).
        let mut occurrences: Vec<(u32, usize)> = Vec::new();
        for (p, &b) in text.iter().enumerate() {
            if !self.first_bytes[b as usize] {
                continue;
            }
            for (len, texts) in &self.by_len {
                if let Some(candidate) = text.get(p..p + len) {
                    if let Some(&id) = texts.get(candidate) {
                        if wanted(id) {
                            occurrences.push((id, p));
                        }
                    }
                }
            }
        }
        if occurrences.is_empty() {
            return vec![Fragment::Text(0..text.len())];
        }
        // Replay llama.cpp's order: tokens longest text first (ties by id, see `Vocab`),
        // each token's occurrences left to right.
        let rank: HashMap<u32, usize> = vocab
            .special_cache
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i))
            .collect();
        occurrences.sort_by_key(|&(id, p)| (rank[&id], p));

        // Raw fragments (start → end) and placed tokens (start → id).
        let mut raw: BTreeMap<usize, usize> = BTreeMap::from([(0, text.len())]);
        let mut placed: BTreeMap<usize, u32> = BTreeMap::new();
        for (id, p) in occurrences {
            let len = vocab.tokens[id as usize].text.len();
            let Some((&start, &end)) = raw.range(..=p).next_back() else {
                continue;
            };
            if p + len > end {
                continue;
            }
            raw.remove(&start);
            if p > start {
                raw.insert(start, p);
            }
            if p + len < end {
                raw.insert(p + len, end);
            }
            placed.insert(p, id);
        }
        let mut out: Vec<(usize, Fragment)> = raw
            .into_iter()
            .map(|(s, e)| (s, Fragment::Text(s..e)))
            .chain(placed.into_iter().map(|(s, id)| (s, Fragment::Token(id))))
            .collect();
        out.sort_by_key(|(s, _)| *s);
        out.into_iter().map(|(_, f)| f).collect()
    }
}
