//! WordPiece (`bert`) and Unigram (`t5`) give exactly llama.cpp's ids.
//!
//! The vocabularies are the fixtures `cargo xtask fixtures` writes (`fixtures/tokenizer-*.gguf`);
//! the reference ids come from llama.cpp's `llama-tokenize` (commit 0c1e57098) on those files,
//! in its three modes, for the inputs in `tests/data/wpm_ugm/inputs/` and the shared corpus in
//! `tests/data/corpus/`; `tests/data/wpm_ugm/make_reference.py` makes them. Decoding is checked
//! against what llama.cpp's `llama_detokenize` gives (recorded by the same script).

use std::path::{Path, PathBuf};

use gguf_format::{GgufBuilder, GgufFile};
use gguf_test_support::{fixture_bytes, fnv1a64};
use gguf_tokenizer::{ModelKind, Tokenizer, TokenizerError};
use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn load(fixture: &str) -> Tokenizer {
    let bytes = fixture_bytes(&format!("{fixture}.gguf"));
    let file = GgufFile::parse(&bytes).unwrap();
    Tokenizer::from_gguf(&file).unwrap()
}

fn reference(fixture: &str) -> Value {
    let path = data().join(format!("wpm_ugm/reference/{fixture}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn ids(v: &Value) -> Option<Vec<u32>> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap() as u32).collect())
}

/// The bytes a reference string stands for: a string, or `{"hex": ...}` for non-UTF-8 bytes.
fn text_value(v: &Value) -> Vec<u8> {
    match v {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Object(o) => {
            let hex = o["hex"].as_str().unwrap();
            (0..hex.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
                .collect()
        }
        other => panic!("unexpected {other}"),
    }
}

/// Every sample of the fixture's reference, in the three modes, and (where recorded) the
/// decoded texts.
fn check(fixture: &str, kind: ModelKind) {
    let tokenizer = load(fixture);
    assert_eq!(tokenizer.kind(), kind);
    assert!(
        tokenizer.warnings().is_empty(),
        "{:?}",
        tokenizer.warnings()
    );
    let reference = reference(fixture);
    let fixture_bytes =
        std::fs::read(root().join("fixtures").join(format!("{fixture}.gguf"))).unwrap();
    let samples = reference["samples"].as_object().unwrap();
    assert!(samples.len() >= 59, "{fixture}: {} samples", samples.len());
    let mut failures = Vec::new();
    let mut compared = 0;
    for (key, entry) in samples {
        // `inputs/..` are this test's own, `corpus/..` the shared corpus.
        let path = match key.strip_prefix("inputs/") {
            Some(name) => data().join("wpm_ugm/inputs").join(name),
            None => data().join(key),
        };
        let text = std::fs::read(path).unwrap();
        assert_eq!(
            (text.len() as u64, fnv1a64(&text).as_str()),
            (
                entry["len"].as_u64().unwrap(),
                entry["fnv1a64"].as_str().unwrap()
            ),
            "{key} is not the input the reference was made from; rerun make_reference.py"
        );
        for (mode, add_special, parse_special) in [
            ("default", tokenizer.adds_bos(), true),
            ("no_parse_special", tokenizer.adds_bos(), false),
            ("no_special", false, true),
        ] {
            // `null`: llama-tokenize failed on this input (see `notes`).
            let Some(expected) = ids(&entry[mode]) else {
                continue;
            };
            compared += 1;
            let got = tokenizer.encode(
                &text,
                gguf_tokenizer::EncodeOptions {
                    add_special,
                    parse_special,
                },
            );
            if got != expected {
                failures.push(format!(
                    "{key} {mode}:\n   ours {got:?}\n  llama {expected:?}"
                ));
            }
        }
        if let Some(decoded) = entry.get("decoded").and_then(Value::as_object) {
            let default_ids = ids(&entry["default"]).unwrap();
            for (flags, want) in decoded {
                let (remove_special, unparse_special) = match flags.as_str() {
                    "plain" => (false, false),
                    "remove_special" => (true, false),
                    "unparse_special" => (false, true),
                    "both" => (true, true),
                    other => panic!("unknown decode flags {other}"),
                };
                let got = tokenizer.decode(
                    &default_ids,
                    gguf_tokenizer::DecodeOptions {
                        remove_special,
                        unparse_special,
                    },
                );
                let want = text_value(want);
                if got != want {
                    failures.push(format!(
                        "{key} decode {flags}:\n   ours {:?}\n  llama {:?}",
                        String::from_utf8_lossy(&got),
                        String::from_utf8_lossy(&want)
                    ));
                }
                compared += 1;
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{fixture} ({} of {compared} differ; fixture sha256 in reference: {}, {} bytes now):\n{}",
        failures.len(),
        reference["fixture_sha256"],
        fixture_bytes.len(),
        failures.join("\n")
    );
    assert!(compared > 150, "{fixture}: only {compared} comparisons");
}

#[test]
fn bert_uncased_ids_equal_llama_cpp() {
    check("tokenizer-bert", ModelKind::Wpm);
}

#[test]
fn bert_cased_ids_equal_llama_cpp() {
    check("tokenizer-bert-cased", ModelKind::Wpm);
}

#[test]
fn t5_ids_equal_llama_cpp() {
    check("tokenizer-t5", ModelKind::Ugm);
}

#[test]
fn t5_without_charsmap_ids_equal_llama_cpp() {
    check("tokenizer-t5-plain", ModelKind::Ugm);
}

#[test]
fn bert_adds_cls_and_sep() {
    let t = load("tokenizer-bert");
    let s = t.special_ids();
    assert_eq!(
        (s.bos, s.unk, s.sep, s.pad),
        (Some(101), Some(100), Some(102), Some(0))
    );
    assert!(t.adds_bos() && t.adds_sep());
    let ids = t.encode(
        b"hello world",
        gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
    );
    assert_eq!(ids.first(), Some(&101));
    assert_eq!(ids.last(), Some(&102));
    assert_eq!(
        t.encode(b"", gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL),
        [101, 102]
    );
    assert_eq!(
        t.encode(b"", gguf_tokenizer::EncodeOptions::PARSE_SPECIAL),
        Vec::<u32>::new()
    );
    // Decoding: the pieces' `▁` are spaces, nothing strips the first one (no space prefix),
    // and llama.cpp's clean-up joins " ," and " !".
    assert_eq!(
        t.decode(&ids, gguf_tokenizer::DecodeOptions::REMOVE_SPECIAL),
        b" hello world"
    );
    let ids = t.encode(
        b"Hello, World! It's un-playable.",
        gguf_tokenizer::EncodeOptions::PARSE_SPECIAL,
    );
    assert_eq!(
        t.decode(&ids, gguf_tokenizer::DecodeOptions::PLAIN),
        b" hello, world! it's un - playable."
    );
}

#[test]
fn bert_defaults_without_special_id_keys() {
    // The cased fixture writes no special ids: llama.cpp's bert defaults apply.
    let t = load("tokenizer-bert-cased");
    let s = t.special_ids();
    assert_eq!(
        (s.bos, s.eos, s.unk, s.sep, s.pad),
        (Some(101), None, Some(100), Some(102), Some(0))
    );
    assert_eq!(t.token_text(101), Some(&b"[CLS]"[..]));
}

#[test]
fn t5_adds_eos_only() {
    let t = load("tokenizer-t5");
    let s = t.special_ids();
    assert_eq!(
        (s.bos, s.eos, s.unk, s.pad),
        (None, Some(1), Some(2), Some(0))
    );
    assert!(!t.adds_bos());
    // llama-tokenize passes add_special = add_bos (false): the reference has no EOS; the
    // library call with add_special = true appends it, as llama_tokenize does.
    let plain = t.encode(b"hello world", gguf_tokenizer::EncodeOptions::PARSE_SPECIAL);
    let mut with_eos = plain.clone();
    with_eos.push(1);
    assert_eq!(
        t.encode(
            b"hello world",
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL
        ),
        with_eos
    );
    assert_eq!(
        t.encode(b"", gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL),
        [1]
    );
    // Decoding drops the space the normaliser put in front, and the EOS when asked.
    assert_eq!(
        t.decode(&with_eos, gguf_tokenizer::DecodeOptions::REMOVE_SPECIAL),
        b"hello world"
    );
    assert_eq!(
        t.decode(&with_eos, gguf_tokenizer::DecodeOptions::UNPARSE_SPECIAL),
        b"hello world</s>"
    );
}

#[test]
fn t5_round_trips_normalised_text() {
    let t = load("tokenizer-t5");
    // Text the charsmap leaves alone, with single spaces, and no unknown characters.
    for text in [
        "hello world",
        "The united test, of the token-izer!",
        "café über naïve",
        "中文 日本 こんにちは",
        "Hello World: 100% (20) & <｜",
    ] {
        let ids = t.encode(
            text.as_bytes(),
            gguf_tokenizer::EncodeOptions::PARSE_SPECIAL,
        );
        assert!(!ids.contains(&2), "{text}: {ids:?}");
        assert_eq!(
            String::from_utf8(t.decode(&ids, gguf_tokenizer::DecodeOptions::PLAIN)).unwrap(),
            text,
            "{ids:?}"
        );
    }
    // What the charsmap and the whitespace rules change.
    let ids = t.encode(
        "  ＨＥＬＬＯ\u{3000}ｗｏｒｌｄ！\t\tﬁ ½  ".as_bytes(),
        gguf_tokenizer::EncodeOptions::PARSE_SPECIAL,
    );
    assert_eq!(
        String::from_utf8(t.decode(&ids, gguf_tokenizer::DecodeOptions::PLAIN)).unwrap(),
        "HELLO world! fi 1\u{2044}2"
    );
}

#[test]
fn t5_plain_round_trips_exactly() {
    let t = load("tokenizer-t5-plain");
    for text in ["hello world", "  two  spaces ", "café über", "a.b,c"] {
        let ids = t.encode(
            text.as_bytes(),
            gguf_tokenizer::EncodeOptions::PARSE_SPECIAL,
        );
        assert!(!ids.contains(&2), "{text}: {ids:?}");
        assert_eq!(
            String::from_utf8(t.decode(&ids, gguf_tokenizer::DecodeOptions::PLAIN)).unwrap(),
            text
        );
    }
}

/// A copy of the T5 fixture with `key` set to `value`.
fn t5_with(key: &str, value: impl Into<gguf_format::OwnedValue>) -> Vec<u8> {
    let bytes = std::fs::read(root().join("fixtures/tokenizer-t5.gguf")).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let mut b = GgufBuilder::from_file(&file);
    b.set(key, value);
    let mut out = Vec::new();
    b.write(&mut out).unwrap().finish().unwrap();
    out
}

fn load_error(bytes: &[u8]) -> String {
    let file = GgufFile::parse(bytes).unwrap();
    match Tokenizer::from_gguf(&file) {
        Err(e @ TokenizerError::Metadata(_)) => e.to_string(),
        Err(e) => panic!("not a metadata error: {e}"),
        Ok(_) => panic!("loaded"),
    }
}

#[test]
fn hostile_charsmaps_are_metadata_errors() {
    let key = "tokenizer.ggml.precompiled_charsmap";
    let good = {
        let bytes = std::fs::read(root().join("fixtures/tokenizer-t5.gguf")).unwrap();
        let file = GgufFile::parse(&bytes).unwrap();
        let arr: gguf_format::ArrayView = file.get(key).unwrap();
        arr.raw_bytes().to_vec()
    };
    let n = u32::from_le_bytes(good[..4].try_into().unwrap());
    let with_header = |size: u32| {
        let mut b = good.clone();
        b[..4].copy_from_slice(&size.to_le_bytes());
        b
    };
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("three bytes", good[..3].to_vec()),
        ("size past the end", with_header(u32::MAX)),
        ("size leaves no strings", with_header(good.len() as u32 - 4)),
        ("array cut short", {
            // Announce (and keep) only the first 300 units: walks leave the array.
            let mut b = with_header(300 * 4);
            b.drain(4 + 300 * 4..4 + n as usize);
            b
        }),
        ("strings cut short", good[..4 + n as usize + 2].to_vec()),
    ];
    for (what, blob) in cases {
        let err = load_error(&t5_with(key, blob));
        assert!(err.contains("precompiled_charsmap"), "{what}: {err}");
    }
    // A charsmap of another element type.
    for err in [
        load_error(&t5_with(key, vec![1u32, 2, 3])),
        load_error(&t5_with(key, "not an array")),
    ] {
        assert!(err.contains("u8 or i8"), "{err}");
    }
    // Every single-byte corruption of the array either loads or is refused, never panics,
    // and whatever loads tokenizes anything.
    let text = "ＨＥＬＬＯ ｶﾞ e\u{301} ﬁ ½ \u{200b}\t\u{7f}x".as_bytes();
    for at in (4..4 + n as usize).step_by(7) {
        for flip in [0x01u8, 0x80, 0xFF] {
            let mut blob = good.clone();
            blob[at] ^= flip;
            let bytes = t5_with(key, blob);
            let file = GgufFile::parse(&bytes).unwrap();
            if let Ok(t) = Tokenizer::from_gguf(&file) {
                let _ = t.encode(text, gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL);
            }
        }
    }
}

#[test]
fn wordpiece_without_unknown_token_drops_unknown_words() {
    // A vocabulary too small for the default ids: BOS, UNK and SEP are disabled.
    let mut b = GgufBuilder::new();
    b.set("general.architecture", "bert")
        .set("tokenizer.ggml.model", "bert")
        .set("tokenizer.ggml.add_bos_token", false)
        .set(
            "tokenizer.ggml.tokens",
            vec!["[PAD]", "\u{2581}hi", "\u{2581}h", "i", "\u{2581}."],
        );
    let mut bytes = Vec::new();
    b.write(&mut bytes).unwrap().finish().unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let t = Tokenizer::from_gguf(&file).unwrap();
    assert_eq!(t.kind(), ModelKind::Wpm);
    assert_eq!(t.special_ids().unk, None);
    // llama.cpp would emit -1 for "xyz"; nothing here.
    assert_eq!(
        t.encode(
            b"Hi. xyz hii",
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL
        ),
        [1, 4, 1, 3]
    );
}
