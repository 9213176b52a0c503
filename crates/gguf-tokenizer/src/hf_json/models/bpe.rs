//! `tokenizers`' BPE model, its own merge loop: unlike llama.cpp's (`crate::bpe`), merges are
//! pairs of ids where a later duplicate wins, and characters missing from the vocabulary
//! become byte-fallback tokens or one (possibly fused) unknown token before merging.

use std::cell::RefCell;
use std::collections::BinaryHeap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use super::parse_vocab_map;
use crate::error::Result;
use crate::hf_json::err;
use crate::hf_json::schema::{self, Merge};
use rustc_hash::FxHashMap;

/// What is wrong with a merge. `tokenizers` writes each as `"a b"` (two tokens separated by one
/// space) or `["a", "b"]`; old files start with a `#version` line.
#[derive(Debug, Clone, PartialEq)]
enum BadMerge {
    /// A string that is not two tokens separated by a space.
    Text(String),
    /// An array that is not two strings.
    NotAPair,
    /// Neither a string nor an array.
    NotAStringOrPair,
}

impl BadMerge {
    /// The error for merge `i`.
    fn error(self, i: usize) -> crate::TokenizerError {
        err(match self {
            BadMerge::Text(s) => {
                format!("`model.merges[{i}]` {s:?} is not two tokens separated by a space")
            }
            BadMerge::NotAPair => format!("`model.merges[{i}]` is not a pair of strings"),
            BadMerge::NotAStringOrPair => format!("`model.merges[{i}]` is not a string or pair"),
        })
    }
}

/// A merge written as text: its two tokens, or `None` for a `#version` line.
fn merge_text(s: &str) -> std::result::Result<Option<(&str, &str)>, BadMerge> {
    if s.starts_with("#version") {
        return Ok(None);
    }
    let mut parts = s.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(a), Some(b), None) => Ok(Some((a, b))),
        _ => Err(BadMerge::Text(s.to_string())),
    }
}

/// Checks the form of every element of `model.merges` in the JSON text while reading it, and
/// stops at the first malformed one: nothing is built or kept, so a file of millions of merges
/// whose first is wrong fails at once rather than after all were read into memory. Anything
/// else (invalid JSON, the rest of the structure) is left to the parse that follows.
pub(in crate::hf_json) fn check_merges(json: &str) -> Result<()> {
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(json);
    // Any error but a malformed merge is the full parse's to report.
    let _ = Walk {
        found: &found,
        depth: Depth::Root,
    }
    .deserialize(&mut de);
    match found.into_inner() {
        Some((i, bad)) => Err(BadMerge::error(bad, i)),
        None => Ok(()),
    }
}

/// Where [`Walk`] is in the document.
#[derive(Clone, Copy)]
enum Depth {
    /// The root object, whose `model` is walked.
    Root,
    /// `model`, whose `merges` is checked.
    Model,
}

/// Walks the root object to `model.merges` (every other value skipped, nothing kept),
/// recording the first malformed merge in `found`.
struct Walk<'f> {
    found: &'f RefCell<Option<(usize, BadMerge)>>,
    depth: Depth,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<(), A::Error> {
        while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
            match (self.depth, key.as_ref()) {
                (Depth::Root, "model") => map.next_value_seed(Walk {
                    found: self.found,
                    depth: Depth::Model,
                })?,
                (Depth::Model, "merges") => map.next_value_seed(Merges { found: self.found })?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// `model.merges`: each element checked as it is read.
struct Merges<'f> {
    found: &'f RefCell<Option<(usize, BadMerge)>>,
}

impl<'de> DeserializeSeed<'de> for Merges<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Merges<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array of merges")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        let mut i = 0;
        while seq
            .next_element_seed(OneMerge {
                found: self.found,
                index: i,
            })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }
}

/// Merge `index` of `model.merges`.
struct OneMerge<'f> {
    found: &'f RefCell<Option<(usize, BadMerge)>>,
    index: usize,
}

impl OneMerge<'_> {
    /// Records `bad` and stops the walk.
    fn refuse<E: de::Error>(&self, bad: BadMerge) -> E {
        *self.found.borrow_mut() = Some((self.index, bad));
        E::custom("a malformed merge")
    }
}

impl<'de> DeserializeSeed<'de> for OneMerge<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for OneMerge<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a merge")
    }
    fn visit_str<E: de::Error>(self, s: &str) -> std::result::Result<(), E> {
        merge_text(s).map(|_| ()).map_err(|bad| self.refuse(bad))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<(), A::Error> {
        for _ in 0..2 {
            if seq.next_element_seed(IsString)? != Some(true) {
                return Err(self.refuse(BadMerge::NotAPair));
            }
        }
        match seq.next_element::<IgnoredAny>()? {
            None => Ok(()),
            Some(_) => Err(self.refuse(BadMerge::NotAPair)),
        }
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<(), E> {
        Err(self.refuse(BadMerge::NotAStringOrPair))
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<(), E> {
        Err(self.refuse(BadMerge::NotAStringOrPair))
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<(), E> {
        Err(self.refuse(BadMerge::NotAStringOrPair))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<(), E> {
        Err(self.refuse(BadMerge::NotAStringOrPair))
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<(), E> {
        Err(self.refuse(BadMerge::NotAStringOrPair))
    }
    fn visit_map<A: MapAccess<'de>>(self, _: A) -> std::result::Result<(), A::Error> {
        Err(self.refuse(BadMerge::NotAStringOrPair))
    }
}

/// Whether a value is a string (skipping it either way).
struct IsString;

impl<'de> DeserializeSeed<'de> for IsString {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> std::result::Result<bool, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for IsString {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_str<E: de::Error>(self, _: &str) -> std::result::Result<bool, E> {
        Ok(true)
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> std::result::Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> std::result::Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> std::result::Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> std::result::Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E: de::Error>(self) -> std::result::Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> std::result::Result<bool, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> std::result::Result<bool, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(false)
    }
}

/// `tokenizers`' BPE model.
#[derive(Clone, Debug)]
pub(in crate::hf_json) struct BpeHf {
    pub(in crate::hf_json) vocab: FxHashMap<String, u32>,
    /// (left id, right id) → (rank, merged id); a later duplicate pair wins, as in `tokenizers`.
    pub(in crate::hf_json) merges: FxHashMap<(u32, u32), (u32, u32)>,
    pub(in crate::hf_json) unk: Option<u32>,
    pub(in crate::hf_json) fuse_unk: bool,
    pub(in crate::hf_json) byte_fallback: bool,
    pub(in crate::hf_json) ignore_merges: bool,
    /// Words are byte-level encoded first (a `ByteLevel` pre-tokenizer).
    pub(in crate::hf_json) byte_level: bool,
    /// `<0xNN>` token ids, for `byte_fallback`.
    pub(in crate::hf_json) byte_ids: Vec<Option<u32>>,
}

impl BpeHf {
    pub(in crate::hf_json) fn parse(bpe: schema::Bpe) -> Result<BpeHf> {
        match bpe.dropout {
            None | Some(0.0) => {}
            Some(d) => return Err(err(format!("BPE dropout ({d}) is not supported"))),
        }
        for (key, value) in [
            ("continuing_subword_prefix", &bpe.continuing_subword_prefix),
            ("end_of_word_suffix", &bpe.end_of_word_suffix),
        ] {
            match value {
                None => {}
                Some(s) if s.is_empty() => {}
                Some(s) => {
                    let v = Value::from(s.as_str());
                    return Err(err(format!("BPE `{key}` ({v}) is not supported")));
                }
            }
        }
        let vocab = parse_vocab_map(&bpe.vocab)?;
        let mut merges = FxHashMap::with_capacity_and_hasher(bpe.merges.len(), Default::default());
        let mut rank = 0u32;
        for (i, m) in bpe.merges.iter().enumerate() {
            let (a, b) = match m {
                Merge::Text(s) => match merge_text(s).map_err(|bad| bad.error(i))? {
                    None => continue,
                    Some(pair) => pair,
                },
                Merge::Pair(a, b) => (a.as_str(), b.as_str()),
            };
            let id = |t: &str| {
                vocab.get(t).copied().ok_or_else(|| {
                    err(format!(
                        "`model.merges[{i}]`: {t:?} is not in the vocabulary"
                    ))
                })
            };
            let pair = (id(a)?, id(b)?);
            merges.insert(pair, (rank, id(&format!("{a}{b}"))?));
            rank += 1;
        }
        let unk = match &bpe.unk_token {
            None => None,
            Some(s) => Some(
                vocab
                    .get(s.as_str())
                    .copied()
                    .ok_or_else(|| err(format!("BPE unk_token {s:?} is not in the vocabulary")))?,
            ),
        };
        let byte_ids = (0..=255u8)
            .map(|b| vocab.get(format!("<0x{b:02X}>").as_str()).copied())
            .collect();
        Ok(BpeHf {
            unk,
            fuse_unk: bpe.fuse_unk.unwrap_or(false),
            byte_fallback: bpe.byte_fallback.unwrap_or(false),
            ignore_merges: bpe.ignore_merges.unwrap_or(false),
            byte_level: false,
            byte_ids,
            vocab,
            merges,
        })
    }

    /// `BPE::tokenize` of one word: `merge_word` then `Word::merge_all`.
    pub(in crate::hf_json) fn tokenize(&self, word: &str, out: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if self.ignore_merges {
            if let Some(&id) = self.vocab.get(word) {
                out.push(id);
                return;
            }
        }
        let mut symbols: Vec<Symbol> = Vec::with_capacity(word.len());
        let add = |symbols: &mut Vec<Symbol>, c: u32, len: usize| {
            let n = symbols.len() as isize;
            if let Some(last) = symbols.last_mut() {
                last.next = n;
            }
            symbols.push(Symbol {
                c,
                prev: n - 1,
                next: -1,
                len,
            });
        };
        let mut unk: Option<(u32, usize)> = None;
        let mut buf = [0u8; 4];
        for ch in word.chars() {
            let s: &str = ch.encode_utf8(&mut buf);
            let len = s.len();
            if let Some(&id) = self.vocab.get(s) {
                if let Some((u, l)) = unk.take() {
                    add(&mut symbols, u, l);
                }
                add(&mut symbols, id, len);
                continue;
            }
            if self.byte_fallback {
                let ids: Option<Vec<u32>> = s.bytes().map(|b| self.byte_ids[b as usize]).collect();
                if let Some(ids) = ids {
                    for id in ids {
                        add(&mut symbols, id, 1);
                    }
                    continue;
                }
            }
            if let Some(unk_id) = self.unk {
                unk = match (unk, self.fuse_unk) {
                    (Some((u, l)), true) => Some((u, l + len)),
                    (Some((u, l)), false) => {
                        add(&mut symbols, u, l);
                        Some((unk_id, len))
                    }
                    (None, _) => Some((unk_id, len)),
                };
            }
        }
        if let Some((u, l)) = unk {
            add(&mut symbols, u, l);
        }
        self.merge_all(&mut symbols);
        out.extend(symbols.iter().filter(|s| s.len != 0).map(|s| s.c));
    }

    /// `Word::merge_all` without dropout.
    pub(in crate::hf_json) fn merge_all(&self, symbols: &mut [Symbol]) {
        let mut queue: BinaryHeap<MergeItem> = symbols
            .windows(2)
            .enumerate()
            .filter_map(|(pos, w)| {
                self.merges
                    .get(&(w[0].c, w[1].c))
                    .map(|&(rank, new_id)| MergeItem { rank, pos, new_id })
            })
            .collect();
        while let Some(top) = queue.pop() {
            if symbols[top.pos].len == 0 || symbols[top.pos].next == -1 {
                continue;
            }
            let next_pos = symbols[top.pos].next as usize;
            let right = symbols[next_pos];
            let pair = (symbols[top.pos].c, right.c);
            if self
                .merges
                .get(&pair)
                .is_none_or(|&(_, id)| id != top.new_id)
            {
                continue;
            }
            let current = &mut symbols[top.pos];
            current.c = top.new_id;
            current.len += right.len;
            current.next = right.next;
            symbols[next_pos].len = 0;
            if right.next > -1 && (right.next as usize) < symbols.len() {
                symbols[right.next as usize].prev = top.pos as isize;
            }
            let current = symbols[top.pos];
            if current.prev >= 0 {
                let prev = current.prev as usize;
                if let Some(&(rank, new_id)) = self.merges.get(&(symbols[prev].c, current.c)) {
                    queue.push(MergeItem {
                        rank,
                        pos: prev,
                        new_id,
                    });
                }
            }
            let next = current.next;
            if next >= 0 && (next as usize) < symbols.len() {
                if let Some(&(rank, new_id)) =
                    self.merges.get(&(current.c, symbols[next as usize].c))
                {
                    queue.push(MergeItem {
                        rank,
                        pos: top.pos,
                        new_id,
                    });
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub(in crate::hf_json) struct Symbol {
    pub(in crate::hf_json) c: u32,
    pub(in crate::hf_json) prev: isize,
    pub(in crate::hf_json) next: isize,
    pub(in crate::hf_json) len: usize,
}

#[derive(PartialEq, Eq)]
pub(in crate::hf_json) struct MergeItem {
    pub(in crate::hf_json) rank: u32,
    pub(in crate::hf_json) pos: usize,
    pub(in crate::hf_json) new_id: u32,
}

impl Ord for MergeItem {
    /// Lowest rank first, then leftmost (a max-heap of the reversed order).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        other
            .rank
            .cmp(&self.rank)
            .then_with(|| other.pos.cmp(&self.pos))
    }
}

impl PartialOrd for MergeItem {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
