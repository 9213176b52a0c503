//! SentencePiece BPE (`tokenizer.ggml.model = llama`) as llama.cpp runs it: start from UTF-8
//! characters, repeatedly merge the adjacent pair whose concatenation is a token with the
//! highest score (leftmost on ties), then emit each piece's token or, failing that, its
//! bytes as `<0xNN>` tokens.

use std::collections::BinaryHeap;

use crate::vocab::Vocab;

/// A run of the input: `start..start + len` bytes, linked to its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// A candidate merge of symbols `left` and `right` into a token of `score`.
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for Bigram {}
impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Bigram {
    /// Highest score first, then leftmost (llama.cpp's `llm_bigram_spm::comparator`).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(other.left.cmp(&self.left))
    }
}

/// UTF-8 sequence length announced by a lead byte (1 for continuation or invalid bytes), as
/// llama.cpp's `unicode_len_utf8`.
#[inline]
pub(crate) fn utf8_len(lead: u8) -> usize {
    const LOOKUP: [usize; 16] = [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4];
    LOOKUP[(lead >> 4) as usize]
}

/// Tokenizes `text` (spaces already escaped to `▁`) into `out`.
pub(crate) fn tokenize(vocab: &Vocab, text: &[u8], out: &mut Vec<u32>) {
    if text.is_empty() {
        return;
    }
    let mut symbols = Vec::with_capacity(text.len());
    let mut offset = 0;
    while offset < text.len() {
        let len = utf8_len(text[offset]).min(text.len() - offset);
        let index = symbols.len();
        symbols.push(Symbol {
            start: offset,
            len,
            prev: index.checked_sub(1),
            next: (offset + len < text.len()).then_some(index + 1),
        });
        offset += len;
    }

    let mut queue = BinaryHeap::new();
    let try_add = |symbols: &[Symbol],
                   queue: &mut BinaryHeap<Bigram>,
                   left: Option<usize>,
                   right: Option<usize>| {
        let (Some(left), Some(right)) = (left, right) else {
            return;
        };
        let (l, r) = (symbols[left], symbols[right]);
        let piece = &text[l.start..r.start + r.len];
        if let Some(id) = vocab.id(piece) {
            queue.push(Bigram {
                score: vocab.tokens[id as usize].score,
                left,
                right,
                size: piece.len(),
            });
        }
    };
    for i in 1..symbols.len() {
        try_add(&symbols, &mut queue, Some(i - 1), Some(i));
    }
    while let Some(bigram) = queue.pop() {
        let (l, r) = (symbols[bigram.left], symbols[bigram.right]);
        // Skip pairs whose symbols changed since the pair was queued.
        if l.len == 0 || r.len == 0 || l.len + r.len != bigram.size {
            continue;
        }
        symbols[bigram.left].len += r.len;
        symbols[bigram.right].len = 0;
        symbols[bigram.left].next = r.next;
        if let Some(next) = r.next {
            symbols[next].prev = Some(bigram.left);
        }
        let merged = symbols[bigram.left];
        try_add(&symbols, &mut queue, merged.prev, Some(bigram.left));
        try_add(&symbols, &mut queue, Some(bigram.left), merged.next);
    }

    let mut i = Some(0);
    while let Some(index) = i {
        let s = symbols[index];
        let piece = &text[s.start..s.start + s.len];
        match vocab.id(piece) {
            Some(id) => out.push(id),
            // Only single characters can miss (merges always form tokens): their bytes.
            None => out.extend(piece.iter().filter_map(|&b| byte_to_token(vocab, b))),
        }
        i = s.next;
    }
}

/// The token of one byte: `<0xNN>`, else the byte itself as a token (llama.cpp's
/// `byte_to_token`; where llama.cpp throws because neither exists, the unknown token).
pub(crate) fn byte_to_token(vocab: &Vocab, byte: u8) -> Option<u32> {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let name = [
        b'<',
        b'0',
        b'x',
        HEX[(byte >> 4) as usize],
        HEX[(byte & 15) as usize],
        b'>',
    ];
    vocab
        .id(&name)
        .or_else(|| vocab.id(&[byte]))
        .or(vocab.special.unk)
}
