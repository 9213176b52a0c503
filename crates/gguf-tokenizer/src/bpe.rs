//! Byte-level BPE (`tokenizer.ggml.model = gpt2`) as llama.cpp runs it: the pre-tokenizer cuts
//! the text into words; each word's UTF-8 bytes are mapped to GPT-2's byte characters; then the
//! adjacent pair with the lowest merge rank (the position in `tokenizer.ggml.merges`) is merged,
//! leftmost first on ties, until no ranked pair is left.

use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use crate::pretok::PreTokenizer;
use crate::unicode::{byte_to_bpe_char, cpt_to_utf8, utf8_to_cpts};
use crate::vocab::Vocab;

/// A merge's two sides as texts.
type TextPair = (Box<[u8]>, Box<[u8]>);

/// The merges, by the token ids of their two sides where both are tokens (always, in real
/// vocabularies), else by their texts.
#[derive(Debug, Clone, Default)]
pub(crate) struct Merges {
    /// (left id, right id) → (rank, id of the merged text if it is a token).
    by_id: FxHashMap<(u32, u32), (u32, Option<u32>)>,
    /// (left text, right text) → rank, for merges with a side that is not a token.
    by_text: FxHashMap<TextPair, u32>,
}

impl Merges {
    /// Reads `tokenizer.ggml.merges` entries `"left right"` (split at the first space after the
    /// first byte, as llama.cpp does; the first of duplicate pairs keeps its rank).
    pub(crate) fn new<'a>(vocab: &Vocab, merges: impl Iterator<Item = &'a [u8]>) -> Merges {
        let mut out = Merges::default();
        let mut joined = Vec::new();
        for (rank, merge) in merges.enumerate() {
            let rank = rank as u32;
            let (left, right) = match merge.iter().skip(1).position(|&b| b == b' ') {
                Some(p) => (&merge[..p + 1], &merge[p + 2..]),
                None => (&b""[..], &b""[..]),
            };
            match (vocab.id(left), vocab.id(right)) {
                (Some(l), Some(r)) => {
                    joined.clear();
                    joined.extend_from_slice(left);
                    joined.extend_from_slice(right);
                    out.by_id.entry((l, r)).or_insert((rank, vocab.id(&joined)));
                }
                _ => {
                    out.by_text
                        .entry((left.into(), right.into()))
                        .or_insert(rank);
                }
            }
        }
        out
    }
}

/// Flags llama.cpp sets per `tokenizer.ggml.pre` name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BpeOptions {
    /// A word that is a token as a whole is that token, whatever the merges say.
    pub ignore_merges: bool,
    /// Decoding tidies spaces before punctuation and around apostrophes.
    pub clean_spaces: bool,
}

impl BpeOptions {
    pub(crate) fn for_pre(pre: &str) -> BpeOptions {
        let ignore_merges = matches!(
            pre,
            "minicpm5"
                | "llama3"
                | "llama-v3"
                | "llama-bpe"
                | "falcon3"
                | "falcon-h1"
                | "pixtral"
                | "midm-2.0"
                | "lfm2"
                | "jina-v5-nano"
                | "youtu"
                | "glm4"
                | "glm5"
                | "tekken"
                | "granite-embed-multi-97m"
        );
        let clean_spaces = !matches!(
            pre,
            "deepseek-llm"
                | "deepseek-coder"
                | "deepseek-v3"
                | "spark2_5"
                | "youtu"
                | "sarvam-moe"
                | "command-r"
                | "qwen2"
                | "deepseek-r1-qwen"
                | "kormo"
                | "f2llmv2"
                | "qwen35"
                | "poro-chat"
                | "viking"
                | "tekken"
                | "smollm"
                | "chameleon"
                | "gpt-4o"
                | "llama4"
                | "kanana2"
                | "talkie"
                | "granite-embed-multi-97m"
                | "tiny_aya"
                | "cohere2moe"
                | "superbpe"
                | "trillion"
                | "granite-docling"
                | "ufakzeka"
                | "grok-2"
                | "afmoe"
                | "laguna"
                | "minimax-m2"
                | "solar-open"
        );
        BpeOptions {
            ignore_merges,
            clean_spaces,
        }
    }
}

#[derive(Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    id: Option<u32>,
    prev: Option<usize>,
    next: Option<usize>,
}

/// Reused buffers of one tokenization.
#[derive(Default)]
pub(crate) struct Scratch {
    word: Vec<u8>,
    utf8: Vec<u8>,
    symbols: Vec<Symbol>,
    queue: BinaryHeap<std::cmp::Reverse<u64>>,
}

/// Tokenizes one raw fragment into `out`.
pub(crate) fn tokenize(
    vocab: &Vocab,
    merges: &Merges,
    pre: PreTokenizer,
    options: BpeOptions,
    text: &[u8],
    scratch: &mut Scratch,
    out: &mut Vec<u32>,
) {
    let cpts = utf8_to_cpts(text);
    for range in pre.split_cpts(&cpts) {
        // The word's bytes, each as GPT-2's byte character (UTF-8).
        scratch.utf8.clear();
        for &c in &cpts[range] {
            // llama.cpp aborts on code points above U+10FFFF (only reachable from invalid
            // 4-byte sequences); U+FFFD stands in for them here.
            if cpt_to_utf8(c, &mut scratch.utf8).is_none() {
                cpt_to_utf8(0xFFFD, &mut scratch.utf8);
            }
        }
        scratch.word.clear();
        if pre.byte_encode() {
            let mut buf = [0u8; 4];
            for &b in &scratch.utf8 {
                scratch
                    .word
                    .extend_from_slice(byte_to_bpe_char(b).encode_utf8(&mut buf).as_bytes());
            }
        } else {
            scratch.word.extend_from_slice(&scratch.utf8);
        }
        tokenize_word(vocab, merges, pre, options, scratch, out);
    }
}

fn tokenize_word(
    vocab: &Vocab,
    merges: &Merges,
    pre: PreTokenizer,
    options: BpeOptions,
    scratch: &mut Scratch,
    out: &mut Vec<u32>,
) {
    let word = &scratch.word;
    if word.is_empty() {
        return;
    }
    // Whole-word tokens: with `ignore_merges`, and Gemma 4's runs of newlines.
    if options.ignore_merges || (pre == PreTokenizer::Gemma4 && word.iter().all(|&b| b == b'\n')) {
        if let Some(id) = vocab.id(word) {
            out.push(id);
            return;
        }
    }
    let symbols = &mut scratch.symbols;
    symbols.clear();
    let mut offset = 0;
    while offset < word.len() {
        let len = crate::unicode::utf8_len(word[offset]).min(word.len() - offset);
        let index = symbols.len();
        symbols.push(Symbol {
            start: offset,
            len,
            id: vocab.id(&word[offset..offset + len]),
            prev: index.checked_sub(1),
            next: (offset + len < word.len()).then_some(index + 1),
        });
        offset += len;
    }

    // (Symbol indices fit in 32 bits: a word would need 4 GiB of text otherwise.)
    // The queue holds `rank << 32 | left` keys, smallest first: lowest rank, then leftmost, as
    // llama.cpp's `llm_bigram_bpe::comparator`. A popped key is current if the pair now starting
    // at `left` still has that rank: a rank names one (left text, right text) pair, so an equal
    // rank means neither symbol changed (llama.cpp compares the pair's text instead).
    let queue = &mut scratch.queue;
    let rank_of = |symbols: &[Symbol], left: usize| -> Option<(u32, Option<u32>)> {
        let l = symbols[left];
        let r = symbols[l.next?];
        match (l.id, r.id) {
            (Some(a), Some(b)) => merges.by_id.get(&(a, b)).copied(),
            _ if merges.by_text.is_empty() => None,
            _ => {
                let lt: Box<[u8]> = word[l.start..l.start + l.len].into();
                let rt: Box<[u8]> = word[r.start..r.start + r.len].into();
                merges
                    .by_text
                    .get(&(lt, rt))
                    .map(|&rank| (rank, vocab.id(&word[l.start..r.start + r.len])))
            }
        }
    };
    let key = |rank: u32, left: usize| std::cmp::Reverse((u64::from(rank) << 32) | left as u64);
    // The first pairs are heapified at once (linear), not pushed one by one.
    let mut initial = std::mem::take(queue).into_vec();
    initial.clear();
    initial.extend(
        (0..symbols.len().saturating_sub(1))
            .filter_map(|left| rank_of(symbols, left).map(|(rank, _)| key(rank, left))),
    );
    *queue = BinaryHeap::from(initial);
    while let Some(std::cmp::Reverse(k)) = queue.pop() {
        let (rank, left) = ((k >> 32) as u32, (k & 0xFFFF_FFFF) as usize);
        if symbols[left].len == 0 {
            continue;
        }
        let Some((current, merged)) = rank_of(symbols, left) else {
            continue;
        };
        if current != rank {
            continue;
        }
        let right = symbols[left]
            .next
            .expect("a ranked pair has a right symbol");
        let r = symbols[right];
        symbols[left].len += r.len;
        symbols[left].id = merged;
        symbols[left].next = r.next;
        symbols[right].len = 0;
        if let Some(next) = r.next {
            symbols[next].prev = Some(left);
        }
        if let Some(prev) = symbols[left].prev {
            if let Some((rank, _)) = rank_of(symbols, prev) {
                queue.push(key(rank, prev));
            }
        }
        if let Some((rank, _)) = rank_of(symbols, left) {
            queue.push(key(rank, left));
        }
    }

    let mut i = Some(0);
    while let Some(index) = i {
        let s = symbols[index];
        match s.id {
            Some(id) => out.push(id),
            // As llama.cpp: each byte of the text as a one-byte token (byte-level models) or
            // as its `<0xNN>` token (the others), where one exists; the rest are dropped.
            None => out.extend(word[s.start..s.start + s.len].iter().filter_map(|&b| {
                if pre.byte_encode() {
                    vocab.id(&[b])
                } else {
                    vocab.id(format!("<0x{b:02X}>").as_bytes())
                }
            })),
        }
        i = s.next;
    }
}

/// The bytes a byte-level token text stands for (llama.cpp's `llama_decode_text`): each
/// character back to its byte; a character outside GPT-2's byte alphabet becomes
/// `[UNK_BYTE_0x<its UTF-8 in hex><the whole text>]`, as llama.cpp writes it.
pub(crate) fn decode_text(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut utf8 = Vec::new();
    for cpt in utf8_to_cpts(text) {
        match char::from_u32(cpt).and_then(crate::unicode::bpe_char_to_byte) {
            Some(b) => out.push(b),
            None => {
                utf8.clear();
                if cpt_to_utf8(cpt, &mut utf8).is_none() {
                    continue;
                }
                out.extend_from_slice(b"[UNK_BYTE_0x");
                for b in &utf8 {
                    out.extend_from_slice(format!("{b:02x}").as_bytes());
                }
                out.extend_from_slice(text);
                out.push(b']');
            }
        }
    }
    out
}

/// llama.cpp's `clean_spaces` pass over decoded text (BPE models whose pre-tokenizer asks for
/// it): drops the space before `?`, `!`, `.` and `,`, the spaces around a lone `'`, and the
/// space before `'s`, `'m`, `'re` and `'ve`. Ported pass for pass, in place, because each pass
/// reads bytes the same pass has already rewritten.
pub(crate) fn clean_spaces(text: &mut Vec<u8>) {
    let t = text;
    // First pass: " ?", " !", " .", " ,".
    let n = t.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && matches!(x, b'?' | b'!' | b'.' | b',') {
            total -= 1;
        }
        t[total] = x;
        total += 1;
    }
    t.truncate(total);
    // Second pass: " ' " → "'".
    let n = t.len();
    let mut total = usize::from(n > 0);
    let mut i = 1;
    while i < n {
        let x = t[i];
        if x == b'\'' && i + 1 < n && t[i - 1] == b' ' && t[i + 1] == b' ' {
            total -= 1;
            i += 1;
            t[i] = 0;
        }
        t[total] = x;
        total += 1;
        i += 1;
    }
    t.truncate(total);
    // Third pass: " 's", " 'm", " 're", " 've" lose their space.
    let n = t.len();
    let mut total = usize::from(n > 0);
    for i in 1..n {
        let x = t[i];
        if t[i - 1] == b' ' && x == b'\'' && i + 1 < n {
            let x1 = t[i + 1];
            if matches!(x1, b's' | b'm') {
                total -= 1;
            } else if i + 2 < n {
                let x2 = t[i + 2];
                if (x1 == b'r' || x1 == b'v') && x2 == b'e' {
                    total -= 1;
                }
            }
        }
        t[total] = x;
        total += 1;
    }
    t.truncate(total);
}
