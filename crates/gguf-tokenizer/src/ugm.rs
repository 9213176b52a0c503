//! Unigram (`tokenizer.ggml.model = t5`) as llama.cpp runs it (`llm_tokenizer_ugm` and
//! `llm_tokenizer_ugm_session`), itself a port of SentencePiece's.
//!
//! 1. *Normalisation*, one prefix of the input at a time: a prefix that walks the trie of
//!    user-defined token texts is kept as it is (llama.cpp takes the deepest walk, even where no
//!    token ends, so `<extra_id_` of an input `<extra_id_9>` escapes normalisation); else the
//!    longest prefix the precompiled charsmap knows is replaced by its replacement; else one
//!    character is copied (an invalid UTF-8 byte becomes U+FFFD). Spaces in the result become `▁`;
//!    with `remove_extra_whitespaces` runs of spaces shrink to one `▁` in front of each word
//!    (leading and trailing ones vanish); with `add_space_prefix` a `▁` goes in front of the first
//!    word.
//! 2. *Viterbi* over the normalised bytes, one character at a time: every vocabulary text
//!    (normal, user-defined and unused tokens) starting at the character extends the best
//!    segmentation ending there, scoring the token's score (0 for user-defined tokens) in `f64`;
//!    a character no single token covers may also be the unknown token, scoring the lowest normal
//!    score minus 10. Ties keep the first candidate found. Adjacent unknown tokens of the best
//!    path collapse into one.
//!
//! The precompiled charsmap is SentencePiece's: a little-endian `u32` byte count, that many
//! bytes of XOR-compressed double array (Darts-clone units), then NUL-terminated replacement
//! strings the array's leaves point into. llama.cpp checks only the header at load and throws
//! from inside `llama_tokenize` when a walk leaves the array; here the whole reachable array is
//! checked once, so such a file is refused at load and tokenizing can never fail.

use std::collections::{HashMap, HashSet};

use crate::error::{Result, TokenizerError};
use crate::unicode::{cpt_from_utf8, utf8_len};
use crate::vocab::{Attr, Vocab};

/// What llama.cpp subtracts from the lowest normal score to score an unknown character.
const UNKNOWN_PENALTY: f32 = 10.0;

fn meta(msg: String) -> TokenizerError {
    TokenizerError::Metadata(format!("tokenizer.ggml.precompiled_charsmap: {msg}"))
}

/// A byte trie, frozen into sorted edge lists (llama.cpp's `naive_trie`).
#[derive(Debug, Clone, Default)]
struct Trie {
    /// Node `n`'s edges are `labels[first[n]..first[n + 1]]` (sorted) → `targets[..]`.
    first: Vec<u32>,
    labels: Vec<u8>,
    targets: Vec<u32>,
    /// The token id ending at each node; `u32::MAX` for none.
    values: Vec<u32>,
}

impl Trie {
    const ROOT: u32 = 0;

    /// Inserts every `(text, id)`; a later duplicate text replaces the earlier id, as in
    /// llama.cpp.
    fn build<'a>(entries: impl Iterator<Item = (&'a [u8], u32)>) -> Trie {
        let mut edges: HashMap<(u32, u8), u32> = HashMap::new();
        let mut values = vec![u32::MAX];
        for (text, id) in entries {
            let mut node = Self::ROOT;
            for &b in text {
                let next = values.len() as u32;
                node = *edges.entry((node, b)).or_insert_with(|| {
                    values.push(u32::MAX);
                    next
                });
            }
            values[node as usize] = id;
        }
        let mut sorted: Vec<((u32, u8), u32)> = edges.into_iter().collect();
        sorted.sort_unstable();
        let mut first = Vec::with_capacity(values.len() + 1);
        let mut e = 0;
        for node in 0..values.len() as u32 {
            first.push(e as u32);
            while e < sorted.len() && sorted[e].0 .0 == node {
                e += 1;
            }
        }
        first.push(e as u32);
        Trie {
            first,
            labels: sorted.iter().map(|&((_, b), _)| b).collect(),
            targets: sorted.iter().map(|&(_, t)| t).collect(),
            values,
        }
    }

    #[inline]
    fn child(&self, node: u32, b: u8) -> Option<u32> {
        let (lo, hi) = (
            self.first[node as usize] as usize,
            self.first[node as usize + 1] as usize,
        );
        let labels = &self.labels[lo..hi];
        labels.binary_search(&b).ok().map(|i| self.targets[lo + i])
    }

    #[inline]
    fn value(&self, node: u32) -> Option<u32> {
        Some(self.values[node as usize]).filter(|&v| v != u32::MAX)
    }

    /// How many leading bytes of `text` the trie has a path for, token or not
    /// (`naive_trie::get_longest_prefix`).
    fn path_len(&self, text: &[u8]) -> usize {
        let mut node = Self::ROOT;
        for (i, &b) in text.iter().enumerate() {
            match self.child(node, b) {
                Some(n) => node = n,
                None => return i,
            }
        }
        text.len()
    }
}

/// One Darts-clone unit's fields, as llama.cpp's `xcda_array_view` decodes them.
mod unit {
    /// Where the node's children are, relative (XOR) to the node's own index.
    #[inline]
    pub fn base(u: u32) -> u32 {
        (u >> 10) << ((u & (1 << 9)) >> 6)
    }
    /// The label of the edge into this node (value units have bit 31 set, so never match).
    #[inline]
    pub fn lcheck(u: u32) -> u32 {
        u & ((1 << 31) | 0xFF)
    }
    /// Whether the node ends a key: its value is in the unit at `index ^ base`.
    #[inline]
    pub fn leaf(u: u32) -> bool {
        (u >> 8) & 1 != 0
    }
    /// A value unit's value: an offset into the replacement strings.
    #[inline]
    pub fn value(u: u32) -> u32 {
        u & ((1 << 31) - 1)
    }
}

/// The precompiled charsmap: prefix → replacement.
#[derive(Debug, Clone)]
struct CharsMap {
    xcda: Vec<u32>,
    replacements: Box<[u8]>,
}

impl CharsMap {
    /// Parses and checks the blob: the header as llama.cpp does at load, then every state a walk
    /// can reach, so that no input can make a walk leave the array or point past the strings.
    fn parse(blob: &[u8]) -> Result<CharsMap> {
        let Some(header) = blob.first_chunk::<4>() else {
            return Err(meta(format!(
                "{} bytes, too few for the 4-byte size of the double array",
                blob.len()
            )));
        };
        let xcda_bytes = u32::from_le_bytes(*header) as u64;
        // llama.cpp wants at least one byte of replacement strings after the array.
        if xcda_bytes + 4 >= blob.len() as u64 {
            return Err(meta(format!(
                "its header announces a {xcda_bytes}-byte double array, which with the header \
                 leaves no replacement strings in its {} bytes",
                blob.len()
            )));
        }
        let end = 4 + xcda_bytes as usize;
        let xcda: Vec<u32> = blob[4..end]
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        let map = CharsMap {
            xcda,
            replacements: blob[end..].into(),
        };
        map.check()?;
        Ok(map)
    }

    /// Walks every reachable state (a child offset) with every byte 1..=255.
    fn check(&self) -> Result<()> {
        let Some(&root) = self.xcda.first() else {
            return Ok(()); // llama.cpp does not walk an empty array
        };
        let n = self.xcda.len();
        let root = unit::base(root);
        let mut seen = HashSet::from([root]);
        let mut todo = vec![root];
        while let Some(state) = todo.pop() {
            for c in 1..=255u32 {
                let index = state ^ c;
                let Some(&u) = self.xcda.get(index as usize) else {
                    return Err(meta(format!(
                        "a walk reaches entry {index} of its {n}-entry double array"
                    )));
                };
                if unit::lcheck(u) != c {
                    continue;
                }
                let next = index ^ unit::base(u);
                if unit::leaf(u) {
                    let Some(&v) = self.xcda.get(next as usize) else {
                        return Err(meta(format!(
                            "a leaf's value is at entry {next} of its {n}-entry double array"
                        )));
                    };
                    let offset = unit::value(v) as usize;
                    match self.replacements.get(offset..) {
                        Some(rest) if !rest.is_empty() => {
                            if !rest.contains(&0) {
                                return Err(meta(format!(
                                    "the replacement at offset {offset} is not NUL-terminated"
                                )));
                            }
                        }
                        _ => {
                            return Err(meta(format!(
                                "a replacement offset {offset} is past its {} bytes of strings",
                                self.replacements.len()
                            )))
                        }
                    }
                }
                if seen.insert(next) {
                    todo.push(next);
                }
            }
        }
        Ok(())
    }

    /// The longest prefix of `text` with a replacement: (its length, the replacement).
    fn longest_match(&self, text: &[u8]) -> Option<(usize, &[u8])> {
        let root = *self.xcda.first()?;
        let mut node = unit::base(root);
        let mut best = None;
        for (i, &c) in text.iter().enumerate() {
            if c == 0 {
                break;
            }
            node ^= c as u32;
            // `check` proved these lookups in range; a miss just ends the walk.
            let Some(&u) = self.xcda.get(node as usize) else {
                break;
            };
            if unit::lcheck(u) != c as u32 {
                break;
            }
            node ^= unit::base(u);
            if unit::leaf(u) {
                let Some(&v) = self.xcda.get(node as usize) else {
                    break;
                };
                best = Some((i + 1, unit::value(v) as usize));
            }
        }
        let (len, offset) = best?;
        let rest = self.replacements.get(offset..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some((len, &rest[..end]))
    }
}

/// What a Unigram vocabulary adds to the tokens: the tries and the normaliser.
#[derive(Debug, Clone)]
pub(crate) struct UgmModel {
    charsmap: Option<CharsMap>,
    /// Normal, user-defined and unused tokens.
    tokens: Trie,
    user_defined: Trie,
    unknown_score: f32,
}

impl UgmModel {
    /// llama.cpp builds its tries from the token types as stored, before the loader's rules
    /// change any attribute; so does this.
    pub(crate) fn new(vocab: &Vocab) -> Result<UgmModel> {
        let charsmap = vocab
            .precompiled_charsmap
            .as_deref()
            .map(CharsMap::parse)
            .transpose()?;
        let stored = |id: usize| vocab.tokens[id].ty.attr();
        let mut min_score = f32::MAX;
        for (id, t) in vocab.tokens.iter().enumerate() {
            if stored(id).contains(Attr::NORMAL) {
                min_score = min_score.min(t.score);
            }
        }
        let tokens = Trie::build(
            vocab
                .tokens
                .iter()
                .enumerate()
                .filter(|&(id, _)| {
                    stored(id).intersects(Attr::NORMAL | Attr::USER_DEFINED | Attr::UNUSED)
                })
                .map(|(id, t)| (&*t.text, id as u32)),
        );
        let user_defined = Trie::build(
            vocab
                .tokens
                .iter()
                .enumerate()
                .filter(|&(id, _)| stored(id).contains(Attr::USER_DEFINED))
                .map(|(id, t)| (&*t.text, id as u32)),
        );
        Ok(UgmModel {
            charsmap,
            tokens,
            user_defined,
            unknown_score: min_score - UNKNOWN_PENALTY,
        })
    }

    /// Tokenizes one raw-text fragment into `out`.
    pub(crate) fn tokenize(&self, vocab: &Vocab, text: &[u8], out: &mut Vec<u32>) {
        let normalized = self.normalize(vocab, text);
        let len = normalized.len();
        if len == 0 {
            return;
        }
        let unk = vocab.special.unk;

        /// The best segmentation of the text up to a position: its last token, where that
        /// token starts, and its score.
        #[derive(Clone, Copy)]
        struct Best {
            id: Option<u32>,
            start: usize,
            score: f64,
        }
        let mut best = vec![
            Best {
                id: unk,
                start: 0,
                score: -f64::MAX,
            };
            len + 1
        ];
        best[0].score = 0.0;

        let mut offset = 0;
        while offset < len {
            let char_len = utf8_len(normalized[offset]).min(len - offset);
            let current = best[offset];
            let mut whole_char_token = false;
            let mut end = offset + 1;
            let mut node = self.tokens.child(Trie::ROOT, normalized[offset]);
            while let Some(n) = node {
                if let Some(id) = self.tokens.value(n) {
                    if end - offset == char_len {
                        whole_char_token = true;
                    }
                    let token = &vocab.tokens[id as usize];
                    let score = if token.attr.contains(Attr::USER_DEFINED) {
                        0.0
                    } else {
                        token.score as f64
                    };
                    let challenger = current.score + score;
                    if challenger > best[end].score {
                        best[end] = Best {
                            id: Some(id),
                            start: offset,
                            score: challenger,
                        };
                    }
                }
                node = normalized.get(end).and_then(|&b| self.tokens.child(n, b));
                end += 1;
            }
            if !whole_char_token {
                let challenger = current.score + self.unknown_score as f64;
                let end = offset + char_len;
                if challenger > best[end].score {
                    best[end] = Best {
                        id: unk,
                        start: offset,
                        score: challenger,
                    };
                }
            }
            offset += char_len;
        }

        // Back from the end; runs of unknown tokens become one. (Where the vocabulary has no
        // unknown token llama.cpp emits -1; nothing is emitted here.)
        let first = out.len();
        let mut prev_unknown = false;
        let mut at = len;
        loop {
            let b = best[at];
            let unknown = b.id == unk;
            if !(prev_unknown && unknown) {
                out.extend(b.id);
            }
            if b.start == 0 {
                break;
            }
            prev_unknown = unknown;
            at = b.start;
        }
        out[first..].reverse();
    }

    /// llama.cpp's `normalize`.
    fn normalize(&self, vocab: &Vocab, input: &[u8]) -> Vec<u8> {
        let space: &[u8] = if vocab.escape_whitespaces {
            crate::ESCAPED_SPACE
        } else {
            b" "
        };
        let prepend = !vocab.treat_whitespace_as_suffix && vocab.add_space_prefix;
        let append = vocab.treat_whitespace_as_suffix && vocab.add_space_prefix;
        let merge = vocab.remove_extra_whitespaces;

        let mut out = Vec::with_capacity(input.len() * 3);
        let mut space_prepended = false;
        let mut in_word = false;
        let mut offset = 0;
        while offset < input.len() {
            let (piece, consumed) = self.normalize_prefix(input, offset);
            for &c in piece {
                if c != b' ' {
                    if !in_word {
                        in_word = true;
                        if (prepend && !space_prepended) || merge {
                            out.extend_from_slice(space);
                            space_prepended = true;
                        }
                    }
                    out.push(c);
                } else {
                    in_word = false;
                    if !merge {
                        out.extend_from_slice(space);
                    }
                }
            }
            offset += consumed;
        }
        if append {
            out.extend_from_slice(space);
        }
        out
    }

    /// The normalised form of the prefix of `input[offset..]` and how many bytes it consumes
    /// (at least one).
    fn normalize_prefix<'a>(&'a self, input: &'a [u8], offset: usize) -> (&'a [u8], usize) {
        let rest = &input[offset..];
        let kept = self.user_defined.path_len(rest);
        if kept > 0 {
            return (&rest[..kept], kept);
        }
        if let Some((len, replacement)) = self.charsmap.as_ref().and_then(|m| m.longest_match(rest))
        {
            return (replacement, len);
        }
        let mut end = offset;
        match cpt_from_utf8(input, &mut end) {
            Some(_) => (&input[offset..end], end - offset),
            None => ("\u{FFFD}".as_bytes(), 1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hand-built double array for {"a" → "A", "ab" → "X", "b\u{0}" unreachable}: root at 0
    /// with children at offset 256.
    fn tiny_blob() -> Vec<u8> {
        // Units: root (index 0) → children offset 256: relative base 0 ^ 256 = 256.
        let mut units = vec![0u32; 512 + 256];
        let pack = |base: u32, label: u32, leaf: bool| (base << 10) | label | ((leaf as u32) << 8);
        units[0] = pack(256, 0, false);
        // "a" at 256 ^ 'a' = 256 + 97; it is a leaf; its children at offset 512.
        let a = 256 ^ 97;
        units[a] = pack(a as u32 ^ 512, 97, true);
        // value of "a" at 512 ^ 0 = 512: replacement offset 0.
        units[512] = 1 << 31;
        // "ab" at 512 ^ 'b'; leaf; children at 512 + 256 = 768? Use offset 256 + 0x100 block: put
        // its value in the spare block starting at 512 + 256 - 256 = 512 block: value unit must
        // be at (index ^ base); choose base so that it lands on 600.
        let ab = 512 ^ 98;
        units[ab] = pack(ab as u32 ^ 600, 98, true);
        units[600] = (1 << 31) | 2;
        let mut blob = ((units.len() * 4) as u32).to_le_bytes().to_vec();
        for u in &units {
            blob.extend_from_slice(&u.to_le_bytes());
        }
        blob.extend_from_slice(b"A\0X\0");
        blob
    }

    #[test]
    fn longest_prefix_wins() {
        let map = CharsMap::parse(&tiny_blob()).unwrap();
        assert_eq!(map.longest_match(b"abc"), Some((2, &b"X"[..])));
        assert_eq!(map.longest_match(b"ac"), Some((1, &b"A"[..])));
        assert_eq!(map.longest_match(b"b"), None);
        assert_eq!(map.longest_match(b"\0a"), None);
    }

    #[test]
    fn hostile_blobs_are_refused() {
        let good = tiny_blob();
        // Header too short, announcing too much, leaving no strings.
        assert!(CharsMap::parse(&good[..3]).is_err());
        let mut big = good.clone();
        big[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(CharsMap::parse(&big).is_err());
        let n = good.len() as u32 - 4;
        let mut none_left = good.clone();
        none_left[..4].copy_from_slice(&n.to_le_bytes());
        assert!(CharsMap::parse(&none_left).is_err());
        // A truncated array: walks from the children at 512.. leave it.
        let mut short = good[..4 + 520 * 4].to_vec();
        short[..4].copy_from_slice(&(520u32 * 4).to_le_bytes());
        short.extend_from_slice(b"A\0X\0");
        assert!(CharsMap::parse(&short).is_err());
        // A replacement offset past the strings, and one not terminated.
        for (value, strings) in [(50u32, &b"A\0X\0"[..]), (2, &b"A\0X"[..])] {
            let mut blob = good[..good.len() - 4].to_vec();
            blob.extend_from_slice(strings);
            let at = 4 + 600 * 4;
            blob[at..at + 4].copy_from_slice(&((1u32 << 31) | value).to_le_bytes());
            let err = CharsMap::parse(&blob).unwrap_err().to_string();
            assert!(err.contains("precompiled_charsmap"), "{err}");
        }
    }

    #[test]
    fn trie_paths_and_values() {
        let t = Trie::build([(&b"ab"[..], 1), (&b"abc"[..], 2), (&b"ab"[..], 3)].into_iter());
        let a = t.child(Trie::ROOT, b'a').unwrap();
        let ab = t.child(a, b'b').unwrap();
        assert_eq!(t.value(a), None);
        assert_eq!(t.value(ab), Some(3));
        assert_eq!(t.path_len(b"abx"), 2);
        assert_eq!(t.path_len(b"abcd"), 3);
        assert_eq!(t.path_len(b"x"), 0);
    }
}
