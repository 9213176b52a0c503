//! Tokenizers built from small synthetic files: metadata errors are clear `Metadata` errors,
//! odd but loadable metadata gives warnings, and hostile inputs stay linear and never panic.

use gguf_format::{GgufBuilder, GgufFile};
use gguf_tokenizer::{Tokenizer, TokenizerError};

/// A byte-level BPE vocabulary: the 256 byte characters plus a few merges.
fn bpe_file(pre: Option<&str>, with_merges: bool) -> Vec<u8> {
    let mut tokens: Vec<String> = (0u8..=255)
        .map(|b| {
            let c = match b {
                b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF => char::from(b),
                _ => {
                    // GPT-2's mapping of the other bytes to U+0100...
                    let rank = (0u8..b)
                        .filter(|&x| !matches!(x, b'!'..=b'~' | 0xA1..=0xAC | 0xAE..=0xFF))
                        .count();
                    char::from_u32(0x100 + rank as u32).unwrap()
                }
            };
            c.to_string()
        })
        .collect();
    tokens.extend(["he", "ll", "hell", "hello", "Ġw", "<|end|>"].map(String::from));
    let mut types = vec![1i32; tokens.len()];
    *types.last_mut().unwrap() = 3;
    let mut b = GgufBuilder::new();
    b.set("general.architecture", "llama");
    b.set("tokenizer.ggml.model", "gpt2");
    if let Some(pre) = pre {
        b.set("tokenizer.ggml.pre", pre);
    }
    b.set("tokenizer.ggml.tokens", tokens);
    b.set("tokenizer.ggml.token_type", types);
    if with_merges {
        b.set(
            "tokenizer.ggml.merges",
            vec!["h e", "l l", "he ll", "hell o", "Ġ w"],
        );
    }
    b.set("tokenizer.ggml.bos_token_id", 261u32);
    b.set("tokenizer.ggml.eos_token_id", 261u32);
    let mut out = Vec::new();
    b.write(&mut out).unwrap().finish().unwrap();
    out
}

#[test]
fn byte_level_bpe_merges_by_rank() {
    let bytes = bpe_file(Some("gpt-2"), true);
    let file = GgufFile::parse(&bytes).unwrap();
    let tok = Tokenizer::from_gguf(&file).unwrap();
    assert!(tok.warnings().is_empty());
    let id = |t: &str| tok.token_id(t.as_bytes()).unwrap();
    assert_eq!(
        tok.encode(
            b"hello world<|end|>",
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL
        ),
        [
            id("hello"),
            id("Ġw"),
            id("o"),
            id("r"),
            id("l"),
            id("d"),
            id("<|end|>")
        ]
    );
    // Literal special text with parse_special off; the decoder restores it byte for byte.
    let ids = tok.encode(b"hello world<|end|>", gguf_tokenizer::EncodeOptions::PLAIN);
    assert!(!ids.contains(&id("<|end|>")));
    assert_eq!(
        tok.decode(&ids, gguf_tokenizer::DecodeOptions::PLAIN),
        b"hello world<|end|>"
    );
    assert!(tok.is_end_of_generation(id("<|end|>")));
}

#[test]
fn unknown_or_missing_pre_tokenizer_is_a_warning() {
    for (pre, needle) in [(Some("no-such-pre"), "unknown"), (None, "missing")] {
        let bytes = bpe_file(pre, true);
        let file = GgufFile::parse(&bytes).unwrap();
        let tok = Tokenizer::from_gguf(&file).unwrap();
        assert_eq!(tok.warnings().len(), 1, "{pre:?}");
        assert!(tok.warnings()[0].contains(needle), "{:?}", tok.warnings());
        assert!(!tok
            .encode(b"hello", gguf_tokenizer::EncodeOptions::PLAIN)
            .is_empty());
    }
}

#[test]
fn metadata_errors_name_the_key() {
    let bytes = bpe_file(Some("gpt-2"), false);
    let file = GgufFile::parse(&bytes).unwrap();
    let err = Tokenizer::from_gguf(&file).unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.merges"), "{err}");

    let mut b = GgufBuilder::new();
    b.set("tokenizer.ggml.model", "rwkv");
    b.set("tokenizer.ggml.tokens", vec!["a"]);
    let mut out = Vec::new();
    b.write(&mut out).unwrap().finish().unwrap();
    let file = GgufFile::parse(&out).unwrap();
    let err = Tokenizer::from_gguf(&file).unwrap_err();
    assert!(matches!(err, TokenizerError::Metadata(_)), "{err:?}");
    assert!(err.to_string().contains("rwkv"), "{err}");

    // Scores shorter than the token list.
    let mut b = GgufBuilder::new();
    b.set("tokenizer.ggml.model", "llama");
    b.set("tokenizer.ggml.tokens", vec!["<unk>", "<s>", "</s>", "a"]);
    b.set("tokenizer.ggml.scores", vec![0.0f32]);
    let mut out = Vec::new();
    b.write(&mut out).unwrap().finish().unwrap();
    let file = GgufFile::parse(&out).unwrap();
    let err = Tokenizer::from_gguf(&file).unwrap_err();
    assert!(err.to_string().contains("tokenizer.ggml.scores"), "{err}");
}

#[test]
fn long_runs_stay_linear() {
    // Not timed: a quadratic step would make this test hang rather than fail.
    let bytes = bpe_file(Some("gpt-2"), true);
    let file = GgufFile::parse(&bytes).unwrap();
    let tok = Tokenizer::from_gguf(&file).unwrap();
    for input in [
        vec![b'l'; 200_000],
        vec![b' '; 200_000],
        b"<|end|>".repeat(20_000),
    ] {
        let ids = tok.encode(&input, gguf_tokenizer::EncodeOptions::PARSE_SPECIAL);
        assert_eq!(
            tok.decode(&ids, gguf_tokenizer::DecodeOptions::UNPARSE_SPECIAL),
            input
        );
    }
}
