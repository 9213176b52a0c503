//! SentencePiece BPE (`tokenizer.ggml.model = llama`) as llama.cpp runs it: start from UTF-8
//! characters, repeatedly merge the adjacent pair whose concatenation is a token with the
//! highest score (leftmost on ties), then emit each piece's token or, failing that, its
//! bytes as `<0xNN>` tokens.

use std::cmp::Reverse;
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

    // Queue entries are (score, descending; left, ascending; pair size), as
    // `llm_bigram_spm::comparator` orders them, packed small. An entry is current while the
    // pair starting at `left` still has that total size: symbols only grow, and `left`'s right
    // neighbour changes only when `left` absorbs it (llama.cpp checks the same sizes).
    let descending = |score: f32| {
        let b = score.to_bits();
        let ascending = if b & 0x8000_0000 != 0 {
            !b
        } else {
            b | 0x8000_0000
        };
        !ascending
    };
    let entry = |symbols: &[Symbol], left: usize| {
        let l = symbols[left];
        let r = symbols[l.next?];
        let piece = &text[l.start..r.start + r.len];
        let id = vocab.id(piece)?;
        let score = vocab.tokens[id as usize].score;
        Some(Reverse((
            descending(score),
            left as u32,
            piece.len() as u32,
        )))
    };
    let initial: Vec<_> = (0..symbols.len().saturating_sub(1))
        .filter_map(|left| entry(&symbols, left))
        .collect();
    let mut queue = BinaryHeap::from(initial);
    while let Some(Reverse((_, left, size))) = queue.pop() {
        let left = left as usize;
        let l = symbols[left];
        let Some(right) = l.next else { continue };
        let r = symbols[right];
        // Skip pairs whose symbols changed since the pair was queued.
        if l.len == 0 || l.len + r.len != size as usize {
            continue;
        }
        symbols[left].len += r.len;
        symbols[right].len = 0;
        symbols[left].next = r.next;
        if let Some(next) = r.next {
            symbols[next].prev = Some(left);
        }
        if let Some(prev) = symbols[left].prev {
            queue.extend(entry(&symbols, prev));
        }
        queue.extend(entry(&symbols, left));
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
