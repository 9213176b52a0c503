//! Splitting the input at special-token texts, with llama.cpp's precedence
//! (`tokenizer_st_partition`): special tokens are taken one at a time, longest text first, and
//! each splits the raw-text fragments left by the longer ones at every non-overlapping
//! occurrence, left to right.
//!
//! llama.cpp searches the whole text once per special token (about 6,000 for Gemma). Here a
//! byte trie of the special texts first finds which of them occur at all, in one pass that stops
//! descending wherever every token below has already been seen (so a megabyte of spaces, which
//! Gemma's whitespace tokens match at every position, costs one step per byte), recording where
//! each occurs. Only those tokens are then replayed in llama.cpp's order, each taking its
//! recorded positions that still lie in raw text (or, for a token found at very many places,
//! searching the raw text the earlier ones left with KMP, in linear time).

use std::ops::Range;

use crate::vocab::{Attr, Vocab};
use memchr::memmem;
use rustc_hash::FxHashMap;

/// A piece of the partitioned input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Fragment {
    /// Raw text to tokenize normally.
    Text(Range<usize>),
    /// A special token found in the input.
    Token(u32),
}

#[derive(Debug, Clone, Default)]
struct Node {
    /// (byte, child), sorted by byte.
    children: Vec<(u8, u32)>,
    /// The special tokens whose text ends here, in llama.cpp's processing order.
    tokens: Vec<u32>,
    /// How many texts end in this node's subtree (this node included).
    texts_below: u32,
}

/// The special texts in a byte trie, with llama.cpp's processing order.
#[derive(Debug, Clone)]
pub(crate) struct SpecialMatcher {
    nodes: Vec<Node>,
    /// Processing rank (position in `Vocab::special_cache`) by token id, for special tokens.
    rank: FxHashMap<u32, u32>,
}

/// Start positions recorded per token; a token found more often is searched for instead.
const MAX_POSITIONS: usize = 1 << 14;

impl SpecialMatcher {
    pub(crate) fn new(vocab: &Vocab) -> SpecialMatcher {
        let mut nodes = vec![Node::default()];
        let mut rank =
            FxHashMap::with_capacity_and_hasher(vocab.special_cache.len(), Default::default());
        for (r, &id) in vocab.special_cache.iter().enumerate() {
            rank.insert(id, r as u32);
            let text = &vocab.tokens[id as usize].text;
            if text.is_empty() {
                continue;
            }
            let mut node = 0usize;
            let mut path = vec![0usize];
            for &b in text.iter() {
                node = match nodes[node].children.binary_search_by_key(&b, |&(c, _)| c) {
                    Ok(i) => nodes[node].children[i].1 as usize,
                    Err(i) => {
                        let child = nodes.len();
                        nodes.push(Node::default());
                        nodes[node].children.insert(i, (b, child as u32));
                        child
                    }
                };
                path.push(node);
            }
            if nodes[node].tokens.is_empty() {
                for &n in &path {
                    nodes[n].texts_below += 1;
                }
            }
            nodes[node].tokens.push(id);
        }
        SpecialMatcher { nodes, rank }
    }

    fn child(&self, node: usize, b: u8) -> Option<usize> {
        let children = &self.nodes[node].children;
        children
            .binary_search_by_key(&b, |&(c, _)| c)
            .ok()
            .map(|i| children[i].1 as usize)
    }

    /// The first token at `node` that is looked for.
    fn token_at(&self, vocab: &Vocab, node: usize, parse_special: bool) -> Option<u32> {
        self.nodes[node]
            .tokens
            .iter()
            .copied()
            .find(|&id| wanted(vocab, id, parse_special))
    }

    /// The special tokens that occur in `text` (unordered), each with its start positions
    /// (ascending), or `None` for a token found at more than [`MAX_POSITIONS`] places.
    fn occurring(
        &self,
        vocab: &Vocab,
        text: &[u8],
        parse_special: bool,
    ) -> Vec<(u32, Option<Vec<usize>>)> {
        let mut found: FxHashMap<u32, Option<Vec<usize>>> = FxHashMap::default();
        // Texts below each node whose positions are still being recorded; a walk stops where
        // none is left, so dense matches (runs of whitespace) cost one step per byte.
        let mut open: Vec<u32> = self.nodes.iter().map(|n| n.texts_below).collect();
        let mut path = Vec::new();
        for start in 0..text.len() {
            let mut node = 0;
            path.clear();
            path.push(0);
            for &b in &text[start..] {
                match self.child(node, b) {
                    Some(c) => node = c,
                    None => break,
                }
                if open[node] == 0 {
                    break;
                }
                path.push(node);
                if self.nodes[node].tokens.is_empty() {
                    continue;
                }
                let dense = match self.token_at(vocab, node, parse_special) {
                    Some(id) => {
                        let entry = found.entry(id).or_insert_with(|| Some(Vec::new()));
                        match entry {
                            Some(positions) if positions.len() < MAX_POSITIONS => {
                                positions.push(start);
                                false
                            }
                            Some(_) => {
                                *entry = None;
                                true
                            }
                            None => false,
                        }
                    }
                    // Nothing to look for here: never record.
                    None => true,
                };
                if dense {
                    for &n in &path {
                        open[n] -= 1;
                    }
                }
            }
        }
        found.into_iter().collect()
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
        let mut tokens = self.occurring(vocab, text, parse_special);
        let mut fragments = vec![Fragment::Text(0..text.len())];
        if tokens.is_empty() {
            return fragments;
        }
        tokens.sort_by_key(|(id, _)| self.rank[id]);
        let mut next = Vec::new();
        for (id, positions) in tokens {
            let token = &vocab.tokens[id as usize];
            let pattern = &token.text[..];
            // Too many places to have recorded them: searched for again in each fragment.
            let finder = positions.is_none().then(|| memmem::Finder::new(pattern));
            let mut cursor = 0; // into `positions`
            next.clear();
            for fragment in fragments.drain(..) {
                let Fragment::Text(range) = fragment else {
                    next.push(fragment);
                    continue;
                };
                // llama.cpp's loop: find the next occurrence in what is left of the fragment,
                // emit the (stripped) text before it and the token, go on after it.
                let (mut from, end) = (range.start, range.end);
                loop {
                    let found = match &positions {
                        None => finder
                            .as_ref()
                            .and_then(|f| f.find(&text[from..end]))
                            .map(|p| from + p),
                        Some(positions) => {
                            while cursor < positions.len() && positions[cursor] < from {
                                cursor += 1;
                            }
                            positions
                                .get(cursor)
                                .copied()
                                .filter(|&p| p + pattern.len() <= end)
                        }
                    };
                    let Some(p) = found else { break };
                    let mut left_end = p;
                    if token.attr.contains(Attr::LSTRIP) {
                        while left_end > from && is_c_space(text[left_end - 1]) {
                            left_end -= 1;
                        }
                    }
                    if left_end > from {
                        next.push(Fragment::Text(from..left_end));
                    }
                    next.push(Fragment::Token(id));
                    from = p + pattern.len();
                    if token.attr.contains(Attr::RSTRIP) {
                        while from < end && is_c_space(text[from]) {
                            from += 1;
                        }
                    }
                }
                if from < end {
                    next.push(Fragment::Text(from..end));
                }
            }
            std::mem::swap(&mut fragments, &mut next);
        }
        fragments
    }
}

/// Whether token `id` is looked for in the input.
fn wanted(vocab: &Vocab, id: u32, parse_special: bool) -> bool {
    parse_special
        || !vocab.tokens[id as usize]
            .attr
            .intersects(Attr::CONTROL | Attr::UNKNOWN)
}

fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}
