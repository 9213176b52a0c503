//! Tokenizer-only GGUF files for `gguf-tokenizer`'s WordPiece (`bert`) and Unigram (`t5`)
//! models: small vocabularies laid out as llama.cpp's converters write them, which llama.cpp's
//! `llama-tokenize` loads (it reads only the vocabulary, so no tensors or hyperparameters are
//! needed; `general.architecture` just has to be one llama.cpp knows).
//!
//! * `tokenizer-bert.gguf`: an uncased BERT vocabulary in llama.cpp's form (`[PAD]`,
//!   `[unused0..98]`, `[UNK]` 100, `[CLS]` 101, `[SEP]` 102, `[MASK]` 103, word-initial pieces
//!   as `▁piece`, `##piece` continuations as `piece`), special ids written as a conversion does.
//! * `tokenizer-bert-cased.gguf`: the same tokens, `normalizer.lowercase = false` with
//!   `strip_accents = true`, special ids left to llama.cpp's defaults.
//! * `tokenizer-t5.gguf`: a Unigram vocabulary with log-probability scores, `<pad>`/`</s>`/
//!   `<unk>`, user-defined and unused tokens, `add_space_prefix` and `remove_extra_whitespaces`
//!   as T5 sets them, and a precompiled charsmap built here (see [`charsmap`]).
//! * `tokenizer-t5-plain.gguf`: the same tokens without charsmap, space prefix or whitespace
//!   merging (every flag at llama.cpp's default).

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use anyhow::{ensure, Result};
use gguf_format::GgufBuilder;

/// `tokenizer.ggml.token_type` values.
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const USER_DEFINED: i32 = 4;
const UNUSED: i32 = 5;

/// Every tokenizer fixture, by file name.
pub fn files() -> Result<Vec<(String, Vec<u8>)>> {
    Ok(vec![
        ("tokenizer-bert.gguf".into(), bert(true)?),
        ("tokenizer-bert-cased.gguf".into(), bert(false)?),
        ("tokenizer-t5.gguf".into(), t5(true)?),
        ("tokenizer-t5-plain.gguf".into(), t5(false)?),
    ])
}

fn finish(b: &GgufBuilder<'_>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    b.write(&mut out)?.finish()?;
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// WordPiece

/// Word-initial pieces (written with `▁` in front).
const BERT_WORDS: &[&str] = &[
    // punctuation and ASCII symbols: each is a word of its own
    "!", "\"", "#", "$", "%", "&", "'", "(", ")", "*", "+", ",", "-", ".", "/", ":", ";", "<", "=",
    ">", "?", "@", "[", "\\", "]", "^", "_", "`", "{", "|", "}", "~", "¡", "¿", "«", "»", "“", "”",
    "‘", "’", "–", "—", "…", "、", "。", "「", "」", "・", "！", "？",
    // digits and letters
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f", "g", "h", "i",
    "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z",
    // words
    "the", "of", "and", "to", "in", "is", "it", "this", "that", "hello", "world", "play", "un",
    "test", "token", "cafe", "naive", "uber", "resume", "fiance", "cls", "sep", "unk", "mask",
    "pad", "unused", "http", "www", "com", "html", "20", "19", "100", "2024", "one", "two",
    // cased-only pieces (unreachable in the uncased file: input is lowercased first)
    "Hello", "World", "The", "I", "A", "Ca", "This",
    // other scripts: CJK characters are single-character words, kana and Cyrillic are not
    "中", "文", "日", "本", "語", "国", "人", "大", "こ", "に", "は", "при", "мир", "α", "β", "π",
    "é",
];

/// Continuation pieces (`##piece` in the original vocabulary).
const BERT_CONTINUATIONS: &[&str] = &[
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "b", "c", "d", "e", "f", "g", "h", "i",
    "j", "k", "l", "m", "n", "o", "p", "q", "r", "s", "t", "u", "v", "w", "x", "y", "z", "ing",
    "ed", "er", "able", "ly", "izer", "ization", "ness", "fe", "lo", "ld", "##", "ん", "に", "ち",
    "は", "вет", "ир", "е", "т", "ó", "ü", "D", "E", "L", "O",
];

fn bert(uncased: bool) -> Result<Vec<u8>> {
    let mut tokens: Vec<String> = vec!["[PAD]".into()];
    let mut types = vec![CONTROL];
    for i in 0..99 {
        tokens.push(format!("\u{2581}[unused{i}]"));
        types.push(NORMAL);
    }
    for t in ["[UNK]", "[CLS]", "[SEP]", "[MASK]"] {
        tokens.push(t.into());
        types.push(CONTROL);
    }
    for w in BERT_WORDS {
        tokens.push(format!("\u{2581}{w}"));
        types.push(NORMAL);
    }
    for c in BERT_CONTINUATIONS {
        tokens.push(c.to_string());
        types.push(NORMAL);
    }
    let unique: BTreeSet<&String> = tokens.iter().collect();
    ensure!(unique.len() == tokens.len(), "duplicate BERT token");

    let mut b = GgufBuilder::new();
    b.set("general.architecture", "bert")
        .set("general.name", "tiny wordpiece test vocabulary")
        .set("bert.context_length", 512u32)
        .set("tokenizer.ggml.model", "bert")
        .set("tokenizer.ggml.pre", "bert-bge")
        .set("tokenizer.ggml.tokens", tokens)
        .set("tokenizer.ggml.token_type", types)
        .set("tokenizer.ggml.token_type_count", 2u32);
    if uncased {
        b.set("tokenizer.ggml.unknown_token_id", 100u32)
            .set("tokenizer.ggml.seperator_token_id", 102u32)
            .set("tokenizer.ggml.padding_token_id", 0u32)
            .set("tokenizer.ggml.cls_token_id", 101u32)
            .set("tokenizer.ggml.mask_token_id", 103u32);
    } else {
        b.set("tokenizer.ggml.normalizer.lowercase", false)
            .set("tokenizer.ggml.normalizer.strip_accents", true);
    }
    finish(&b)
}

// ---------------------------------------------------------------------------------------------
// Unigram

/// Normal pieces, most probable first (scores fall with the position).
const T5_PIECES: &[&str] = &[
    "\u{2581}",
    ".",
    ",",
    "s",
    "\u{2581}the",
    "\u{2581}to",
    "\u{2581}and",
    "\u{2581}a",
    "\u{2581}of",
    "\u{2581}in",
    "\u{2581}is",
    "\u{2581}I",
    "\u{2581}it",
    "'",
    "\u{2581}that",
    "\u{2581}for",
    "\u{2581}you",
    "ing",
    "ed",
    "\u{2581}The",
    "-",
    "\u{2581}on",
    "\u{2581}with",
    "\u{2581}be",
    "\u{2581}was",
    "t",
    "\u{2581}(",
    ")",
    "\u{2581}\"",
    "\"",
    "e",
    "a",
    "i",
    "o",
    "n",
    "r",
    "l",
    "d",
    "c",
    "u",
    "m",
    "h",
    "p",
    "g",
    "y",
    "f",
    "w",
    "b",
    "k",
    "v",
    "x",
    "j",
    "z",
    "q",
    "A",
    "B",
    "C",
    "D",
    "E",
    "H",
    "I",
    "L",
    "M",
    "O",
    "S",
    "T",
    "W",
    "0",
    "1",
    "2",
    "3",
    "4",
    "5",
    "6",
    "7",
    "8",
    "9",
    "\u{2581}1",
    "\u{2581}2",
    "00",
    "\u{2581}20",
    "\u{2581}Hello",
    "\u{2581}hello",
    "\u{2581}world",
    "\u{2581}World",
    "\u{2581}hel",
    "lo",
    "\u{2581}wor",
    "ld",
    "!",
    "?",
    ":",
    ";",
    "\u{2581}-",
    "\u{2581}'",
    "/",
    "\u{2581}$",
    "%",
    "&",
    "<",
    ">",
    "|",
    "=",
    "_",
    "[",
    "]",
    "\u{2581}un",
    "\u{2581}unit",
    "ited",
    "\u{2581}united",
    "\u{2581}test",
    "\u{2581}token",
    "izer",
    "\u{2581}café",
    "é",
    "è",
    "ä",
    "ö",
    "ü",
    "ñ",
    "ç",
    "É",
    "Å",
    "μ",
    "\u{2581}über",
    "\u{2581}na",
    "ï",
    "ve",
    "\u{2581}fi",
    "fi",
    "\u{2581}fin",
    "al",
    "fl",
    "TM",
    "\u{2044}",
    "...",
    "..",
    "中",
    "文",
    "\u{2581}中",
    "国",
    "日",
    "本",
    "語",
    "\u{2581}日本",
    "カ",
    "ガ",
    "ハ",
    "パ",
    "タ",
    "\u{3099}",
    "。",
    "、",
    "こ",
    "ん",
    "に",
    "ち",
    "は",
    "\u{2581}こんにちは",
    "\u{2581}при",
    "вет",
    "\u{2581}мир",
    "｜",
    "<｜",
    "\u{2581}<",
    "\u{2581}extra",
    "_id",
    "\u{2581}Straße",
    "\u{2581}http",
    "://",
    "www",
    ".com",
    "\u{2581}\u{2581}",
];

/// User-defined tokens: T5's sentinels, and one with a fullwidth bar (as DeepSeek's markers
/// have), whose prefix `<｜` escapes the charsmap in llama.cpp's normaliser.
const T5_USER_DEFINED: &[&str] = &["<extra_id_0>", "<extra_id_1>", "<｜sep｜>"];

fn t5(full: bool) -> Result<Vec<u8>> {
    let mut tokens: Vec<String> = vec!["<pad>".into(), "</s>".into(), "<unk>".into()];
    let mut scores = vec![0.0f32, 0.0, 0.0];
    let mut types = vec![CONTROL, CONTROL, UNKNOWN];
    for (i, p) in T5_PIECES.iter().enumerate() {
        tokens.push(p.to_string());
        // Log-probability-like, in steps of 1/8 so the values are exact in f32.
        scores.push(-2.0 - i as f32 * 0.125);
        types.push(NORMAL);
    }
    for u in T5_USER_DEFINED {
        tokens.push(u.to_string());
        scores.push(-1000.0);
        types.push(USER_DEFINED);
    }
    // Padding entries a conversion adds up to the model's vocabulary size: unused, yet
    // matched by llama.cpp's Unigram (at a prohibitive score).
    for _ in 0..2 {
        tokens.push(format!("[PAD{}]", tokens.len()));
        scores.push(-10000.0);
        types.push(UNUSED);
    }
    let unique: BTreeSet<&String> = tokens.iter().collect();
    ensure!(unique.len() == tokens.len(), "duplicate T5 token");

    let mut b = GgufBuilder::new();
    b.set("general.architecture", "t5")
        .set("general.name", "tiny unigram test vocabulary")
        .set("t5.context_length", 512u32)
        .set("tokenizer.ggml.model", "t5")
        .set("tokenizer.ggml.pre", "default")
        .set("tokenizer.ggml.tokens", tokens)
        .set("tokenizer.ggml.scores", scores)
        .set("tokenizer.ggml.token_type", types);
    if full {
        b.set("tokenizer.ggml.add_space_prefix", true)
            .set("tokenizer.ggml.remove_extra_whitespaces", true)
            .set("tokenizer.ggml.precompiled_charsmap", charsmap()?)
            .set("tokenizer.ggml.eos_token_id", 1u32)
            .set("tokenizer.ggml.unknown_token_id", 2u32)
            .set("tokenizer.ggml.padding_token_id", 0u32)
            .set("tokenizer.ggml.add_bos_token", false)
            .set("tokenizer.ggml.add_eos_token", true);
    }
    finish(&b)
}

// ---------------------------------------------------------------------------------------------
// The precompiled charsmap

/// A slice of SentencePiece's `nmt_nfkc` rules: fullwidth ASCII and ideographic space to ASCII,
/// compatibility characters (ligatures, ™, ½, superscripts, circled and Roman numerals, µ, Å)
/// to their NFKC forms, halfwidth katakana to fullwidth (with the voiced-mark pairs ｶﾞ → ガ, a
/// key whose prefix is a key too), base letter + combining accent to the precomposed letter (a
/// key whose prefix is no key), whitespace controls to a space, other controls, soft hyphen,
/// zero-width space and BOM to nothing.
fn charsmap_rules() -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    let mut add = |k: &str, v: &str| {
        m.insert(k.to_string(), v.to_string());
    };
    for c in 0xFF01..=0xFF5Eu32 {
        let k = char::from_u32(c).unwrap().to_string();
        let v = char::from_u32(c - 0xFF01 + 0x21).unwrap().to_string();
        add(&k, &v);
    }
    for k in [
        "\u{3000}", "\u{a0}", "\u{2003}", "\u{2009}", "\t", "\n", "\r", "\u{b}", "\u{c}",
    ] {
        add(k, " ");
    }
    for c in (1..=8u32).chain(0xE..=0x1F).chain([0x7F]) {
        add(&char::from_u32(c).unwrap().to_string(), "");
    }
    for k in ["\u{ad}", "\u{200b}", "\u{feff}"] {
        add(k, "");
    }
    for (k, v) in [
        ("\u{2026}", "..."),
        ("\u{fb01}", "fi"),
        ("\u{fb02}", "fl"),
        ("\u{2122}", "TM"),
        ("\u{bd}", "1\u{2044}2"),
        ("\u{b2}", "2"),
        ("\u{b3}", "3"),
        ("\u{b9}", "1"),
        ("\u{b5}", "\u{3bc}"),
        ("\u{212b}", "\u{c5}"),
        ("\u{2160}", "I"),
        ("\u{2161}", "II"),
        ("\u{2163}", "IV"),
        ("\u{ff61}", "\u{3002}"),
        ("\u{ff64}", "\u{3001}"),
        ("\u{ff76}", "\u{30ab}"),
        ("\u{ff76}\u{ff9e}", "\u{30ac}"),
        ("\u{ff8a}", "\u{30cf}"),
        ("\u{ff8a}\u{ff9f}", "\u{30d1}"),
        ("\u{ff80}", "\u{30bf}"),
        ("\u{ff9e}", "\u{3099}"),
        ("e\u{301}", "\u{e9}"),
        ("e\u{300}", "\u{e8}"),
        ("E\u{301}", "\u{c9}"),
        ("a\u{308}", "\u{e4}"),
        ("o\u{308}", "\u{f6}"),
        ("u\u{308}", "\u{fc}"),
        ("n\u{303}", "\u{f1}"),
        ("c\u{327}", "\u{e7}"),
        ("i\u{308}", "\u{ef}"),
    ] {
        add(k, v);
    }
    for (i, c) in (0x2460..=0x2468u32).enumerate() {
        add(
            &char::from_u32(c).unwrap().to_string(),
            &(i + 1).to_string(),
        );
    }
    m
}

/// SentencePiece's precompiled charsmap for [`charsmap_rules`]: the `u32` little-endian size of
/// the double array, the array, then the NUL-terminated replacements.
fn charsmap() -> Result<Vec<u8>> {
    let rules = charsmap_rules();
    // Replacement strings, each once, in key order of first use.
    let mut strings: Vec<u8> = Vec::new();
    let mut offsets: BTreeMap<&str, u32> = BTreeMap::new();
    let mut keys: BTreeMap<&[u8], u32> = BTreeMap::new();
    for (k, v) in &rules {
        let offset = *offsets.entry(v.as_str()).or_insert_with(|| {
            let at = strings.len() as u32;
            strings.extend_from_slice(v.as_bytes());
            strings.push(0);
            at
        });
        keys.insert(k.as_bytes(), offset);
    }
    let units = double_array(&keys)?;
    let mut blob = ((units.len() * 4) as u32).to_le_bytes().to_vec();
    for u in &units {
        blob.extend_from_slice(&u.to_le_bytes());
    }
    blob.extend_from_slice(&strings);
    Ok(blob)
}

/// A trie node while building.
#[derive(Default)]
struct Node {
    children: BTreeMap<u8, Node>,
    value: Option<u32>,
}

/// Darts-clone's XOR-compressed double array for `keys` (non-empty, no NUL byte) → values, as
/// llama.cpp's `xcda_array_view` reads it: a unit is `base << 10 | has_leaf << 8 | label`; a
/// node at index `i` has its children at `(i ^ base) ^ label`, and when it ends a key its value
/// unit (bit 31 set, so it matches no label) at `i ^ base`. Every node gets its own child offset
/// and the array is a whole number of 256-unit blocks, so a walk with any byte stays inside.
fn double_array(keys: &BTreeMap<&[u8], u32>) -> Result<Vec<u32>> {
    let mut root = Node::default();
    for (&key, &value) in keys {
        ensure!(!key.is_empty() && !key.contains(&0), "bad charsmap key");
        let mut node = &mut root;
        for &b in key {
            node = node.children.entry(b).or_default();
        }
        node.value = Some(value);
    }

    let mut units: Vec<u32> = Vec::new();
    let mut used: Vec<bool> = vec![true]; // the root's slot
    let mut offsets = BTreeSet::new();
    let mut todo: VecDeque<(&Node, u32)> = VecDeque::from([(&root, 0)]);
    let slot = |v: &mut Vec<bool>, i: u32| {
        if v.len() <= i as usize {
            v.resize(i as usize + 1, false);
        }
    };
    while let Some((node, index)) = todo.pop_front() {
        let mut labels: Vec<u8> = node.children.keys().copied().collect();
        if node.value.is_some() {
            labels.push(0);
        }
        if labels.is_empty() {
            continue;
        }
        // The lowest free offset whose slots for these labels are all free.
        let mut offset = 1u32;
        loop {
            let free = !offsets.contains(&offset)
                && labels.iter().all(|&l| {
                    let i = (offset ^ l as u32) as usize;
                    i >= used.len() || !used[i]
                });
            if free {
                break;
            }
            offset += 1;
        }
        offsets.insert(offset);
        let relative = index ^ offset;
        ensure!(relative < 1 << 21, "charsmap double array too large");
        for &l in &labels {
            let i = offset ^ l as u32;
            slot(&mut used, i);
            used[i as usize] = true;
        }
        let needed = (offset | 0xFF) as usize + 1;
        if units.len() < needed {
            units.resize(needed, 0);
        }
        units[index as usize] |= relative << 10;
        if let Some(value) = node.value {
            units[index as usize] |= 1 << 8;
            ensure!(value < 1 << 31, "charsmap value too large");
            units[offset as usize] = (1 << 31) | value;
        }
        for (&label, child) in &node.children {
            let i = offset ^ label as u32;
            units[i as usize] |= label as u32;
            todo.push_back((child, i));
        }
    }
    Ok(units)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reading side, exactly as llama.cpp's `normalize_prefix` walks the array.
    fn longest(units: &[u32], text: &[u8]) -> Option<(usize, u32)> {
        let base = |u: u32| (u >> 10) << ((u & (1 << 9)) >> 6);
        let mut node = base(units[0]);
        let mut best = None;
        for (i, &c) in text.iter().enumerate() {
            if c == 0 {
                break;
            }
            node ^= c as u32;
            let u = units[node as usize];
            if u & ((1 << 31) | 0xFF) != c as u32 {
                break;
            }
            node ^= base(u);
            if (u >> 8) & 1 == 1 {
                best = Some((i + 1, units[node as usize] & ((1 << 31) - 1)));
            }
        }
        best
    }

    #[test]
    fn double_array_finds_the_longest_key() {
        let keys: BTreeMap<&[u8], u32> = BTreeMap::from([
            (&b"a"[..], 1),
            (&b"ab"[..], 2),
            (&b"b"[..], 3),
            (&b"bcd"[..], 4),
        ]);
        let units = double_array(&keys).unwrap();
        assert_eq!(units.len() % 256, 0);
        assert_eq!(longest(&units, b"abc"), Some((2, 2)));
        assert_eq!(longest(&units, b"ax"), Some((1, 1)));
        assert_eq!(longest(&units, b"bc"), Some((1, 3)));
        assert_eq!(longest(&units, b"bcde"), Some((3, 4)));
        assert_eq!(longest(&units, b"c"), None);
        // Every byte from every state stays inside the array.
        for text in [&b"a"[..], b"b", b"bc", b"ab", b""] {
            for c in 1..=255u8 {
                let mut t = text.to_vec();
                t.push(c);
                let _ = longest(&units, &t);
            }
        }
    }

    #[test]
    fn fixtures_build() {
        // Each file is a GGUF whose tokenizer model is the one its name says.
        for (name, bytes) in files().unwrap() {
            let file = gguf_format::GgufFile::parse(&bytes).unwrap();
            let model: &str = file.get("tokenizer.ggml.model").unwrap();
            assert!(
                name.starts_with(&format!("tokenizer-{model}")),
                "{name}: {model}"
            );
        }
        let blob = charsmap().unwrap();
        let n = u32::from_le_bytes(blob[..4].try_into().unwrap()) as usize;
        assert!(n + 4 < blob.len());
    }
}
