//! `tokenizers`' BPE model, its own merge loop: unlike llama.cpp's (`crate::bpe`), merges are
//! pairs of ids where a later duplicate wins, and characters missing from the vocabulary
//! become byte-fallback tokens or one (possibly fused) unknown token before merging.

use std::collections::BinaryHeap;

use serde_json::{Map, Value};

use super::parse_vocab_map;
use crate::error::Result;
use crate::hf_json::{bool_field, err};
use rustc_hash::FxHashMap;

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
    pub(in crate::hf_json) fn parse(o: &Map<String, Value>) -> Result<BpeHf> {
        const WHAT: &str = "model";
        match o.get("dropout") {
            None | Some(Value::Null) => {}
            Some(v) if v.as_f64() == Some(0.0) => {}
            Some(v) => return Err(err(format!("BPE dropout ({v}) is not supported"))),
        }
        for key in ["continuing_subword_prefix", "end_of_word_suffix"] {
            match o.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::String(s)) if s.is_empty() => {}
                Some(v) => return Err(err(format!("BPE `{key}` ({v}) is not supported"))),
            }
        }
        let vocab = parse_vocab_map(o)?;
        let merges_json = o
            .get("merges")
            .and_then(Value::as_array)
            .ok_or_else(|| err("`model.merges` is missing or not an array"))?;
        let mut merges = FxHashMap::with_capacity_and_hasher(merges_json.len(), Default::default());
        let mut rank = 0u32;
        for (i, m) in merges_json.iter().enumerate() {
            let (a, b) = match m {
                Value::String(s) => {
                    if s.starts_with("#version") {
                        continue;
                    }
                    let parts: Vec<&str> = s.split(' ').collect();
                    if parts.len() != 2 {
                        return Err(err(format!(
                            "`model.merges[{i}]` {s:?} is not two tokens separated by a space"
                        )));
                    }
                    (parts[0].to_string(), parts[1].to_string())
                }
                Value::Array(pair) => match pair.as_slice() {
                    [Value::String(a), Value::String(b)] => (a.clone(), b.clone()),
                    _ => return Err(err(format!("`model.merges[{i}]` is not a pair of strings"))),
                },
                _ => return Err(err(format!("`model.merges[{i}]` is not a string or pair"))),
            };
            let id = |t: &str| {
                vocab.get(t).copied().ok_or_else(|| {
                    err(format!(
                        "`model.merges[{i}]`: {t:?} is not in the vocabulary"
                    ))
                })
            };
            let pair = (id(&a)?, id(&b)?);
            merges.insert(pair, (rank, id(&format!("{a}{b}"))?));
            rank += 1;
        }
        let unk = match o.get("unk_token") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(
                vocab
                    .get(s.as_str())
                    .copied()
                    .ok_or_else(|| err(format!("BPE unk_token {s:?} is not in the vocabulary")))?,
            ),
            Some(_) => return Err(err("BPE unk_token is not a string")),
        };
        let byte_ids = (0..=255u8)
            .map(|b| vocab.get(format!("<0x{b:02X}>").as_str()).copied())
            .collect();
        Ok(BpeHf {
            unk,
            fuse_unk: bool_field(o, "fuse_unk", false, WHAT)?,
            byte_fallback: bool_field(o, "byte_fallback", false, WHAT)?,
            ignore_merges: bool_field(o, "ignore_merges", false, WHAT)?,
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
