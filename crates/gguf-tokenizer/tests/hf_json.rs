//! Files whose tokenizer is a Hugging Face `tokenizer.json` in `tokenizer.huggingface.json`
//! (no `tokenizer.ggml.model`) give exactly the ids Hugging Face `tokenizers` gives.
//!
//! The fixtures `fixtures/tokenizer-hf-*.gguf` (written by `cargo xtask fixtures`) embed the
//! tokenizers in `tests/data/hf_json/tokenizers/`, small ones trained with `tokenizers` 0.23.3
//! and given the pipelines of GPT-2, Llama 3, Qwen2, SmolLM, Llama 2 (SentencePiece-style BPE
//! with byte fallback), a Metaspace/Lowercase BPE without byte fallback, and BERT's WordPiece.
//! `tests/data/hf_json/make_reference.py` recorded what `tokenizers` gives for the valid-UTF-8
//! files of the shared corpus and the inputs in `tests/data/hf_json/inputs.json`, in three modes
//! (`add_special_tokens` on and off, and `encode_special_tokens` for `parse_special = false`),
//! and its decoding of the ids.

use std::path::{Path, PathBuf};

use gguf_format::{GgufBuilder, GgufFile};
use gguf_test_support::{fnv1a64, token_ids as ids};
use gguf_tokenizer::{ModelKind, TokenType, Tokenizer, TokenizerError};
use serde_json::Value;

const FIXTURES: &[&str] = &[
    "gpt2",
    "llama3",
    "qwen2",
    "smollm",
    "llama2",
    "metaspace",
    "bert",
    "bytelevel-prefix",
    "spm-always",
    "bert-cased",
];

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn fixture_bytes(name: &str) -> Vec<u8> {
    gguf_test_support::fixture_bytes(&format!("tokenizer-hf-{name}.gguf"))
}

fn load(name: &str) -> Tokenizer {
    let bytes = fixture_bytes(name);
    let file = GgufFile::parse(&bytes).unwrap();
    Tokenizer::from_gguf(&file).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn reference(name: &str) -> Value {
    let path = data().join(format!("hf_json/reference/{name}.json"));
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The text of a sample: `corpus/FILE` or `input/NAME` (from `inputs.json`).
fn sample_text(key: &str, inputs: &Value) -> String {
    if let Some(file) = key.strip_prefix("corpus/") {
        String::from_utf8(std::fs::read(data().join("corpus").join(file)).unwrap()).unwrap()
    } else {
        let name = key.strip_prefix("input/").unwrap();
        inputs[name].as_str().unwrap().to_string()
    }
}

fn inputs() -> Value {
    serde_json::from_slice(&std::fs::read(data().join("hf_json/inputs.json")).unwrap()).unwrap()
}

#[test]
fn fixtures_embed_the_committed_tokenizers() {
    for name in FIXTURES {
        let bytes = fixture_bytes(name);
        let file = GgufFile::parse(&bytes).unwrap();
        let embedded: &str = file.get("tokenizer.huggingface.json").unwrap();
        let committed =
            std::fs::read(data().join(format!("hf_json/tokenizers/{name}.json"))).unwrap();
        assert_eq!(
            embedded.as_bytes(),
            committed,
            "{name}: stale fixture (run `cargo xtask fixtures`)"
        );
        assert!(file.value("tokenizer.ggml.model").is_none());
        let r = reference(name);
        assert_eq!(
            r["tokenizer_json_fnv1a64"].as_str().unwrap(),
            fnv1a64(&committed),
            "{name}: stale reference (run tests/data/hf_json/make_reference.py)"
        );
    }
}

#[test]
fn ids_match_hugging_face_tokenizers() {
    let inputs = inputs();
    let mut failures = Vec::new();
    let mut checked = 0;
    for name in FIXTURES {
        let tok = load(name);
        let r = reference(name);
        assert_eq!(
            tok.vocab_size() as u64,
            r["vocab_size"].as_u64().unwrap(),
            "{name}"
        );
        for (key, sample) in r["samples"].as_object().unwrap() {
            let text = sample_text(key, &inputs);
            for (mode, add_special, parse_special) in [
                ("default", true, true),
                ("no_special", false, true),
                ("no_parse_special", true, false),
            ] {
                let want = ids(&sample[mode]);
                let got = tok.encode(
                    text.as_bytes(),
                    gguf_tokenizer::EncodeOptions {
                        add_special,
                        parse_special,
                    },
                );
                checked += 1;
                if got != want {
                    let at = got.iter().zip(&want).take_while(|(a, b)| a == b).count();
                    failures.push(format!(
                        "{name} {key} {mode}: first difference at {at}: got {:?}, want {:?}",
                        &got[at..(at + 8).min(got.len())],
                        &want[at..(at + 8).min(want.len())],
                    ));
                }
            }
        }
    }
    assert!(checked > 1000, "{checked}");
    assert!(
        failures.is_empty(),
        "{} of {checked} differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Byte-level and SentencePiece-style tokenizers decode their ids back to the input (those
/// that lowercase, or map characters to an unknown token, cannot; nor can gpt2's `<mask>`,
/// which takes the spaces around it).
#[test]
fn decode_round_trips() {
    let inputs = inputs();
    for name in ["gpt2", "llama3", "smollm", "llama2"] {
        let tok = load(name);
        let r = reference(name);
        for key in r["samples"].as_object().unwrap().keys() {
            let text = sample_text(key, &inputs);
            if name == "gpt2" && text.contains("<mask>") {
                continue;
            }
            let ids = tok.encode(
                text.as_bytes(),
                gguf_tokenizer::EncodeOptions::PARSE_SPECIAL,
            );
            // llama2 prepends `▁` to every piece between added tokens (its normalizer runs on
            // each), so text next to an added token gains a space, in `tokenizers` too.
            let added = |&id: &u32| {
                matches!(
                    tok.token_type(id),
                    Some(TokenType::Control | TokenType::UserDefined)
                )
            };
            if name == "llama2" && ids.iter().any(added) {
                continue;
            }
            let back = tok.decode(&ids, gguf_tokenizer::DecodeOptions::UNPARSE_SPECIAL);
            assert_eq!(
                String::from_utf8_lossy(&back),
                text,
                "{name} {key}: decode(encode(x)) != x"
            );
        }
    }
}

/// Decoding gives what `tokenizers`' decoders give, where they undo the same steps. Known
/// difference: an added token with `normalized: true` decodes to its content, where
/// `tokenizers` decodes its normalized form (for llama2's `ABC XYZ`: `▁ABC▁XYZ`, so a space
/// more).
#[test]
fn decode_matches_hugging_face() {
    let inputs = inputs();
    let mut failures = Vec::new();
    for name in ["gpt2", "llama3", "qwen2", "smollm", "llama2"] {
        let tok = load(name);
        let r = reference(name);
        let normalized_added = tok.token_id(b"ABC XYZ");
        for (key, sample) in r["samples"].as_object().unwrap() {
            let text = sample_text(key, &inputs);
            let ids = tok.encode(
                text.as_bytes(),
                gguf_tokenizer::EncodeOptions::PARSE_SPECIAL,
            );
            if name == "llama2" && ids.iter().any(|&id| Some(id) == normalized_added) {
                continue;
            }
            let got = tok.decode(&ids, gguf_tokenizer::DecodeOptions::UNPARSE_SPECIAL);
            let want = sample["decoded"].as_str().unwrap();
            if got != want.as_bytes() {
                failures.push(format!(
                    "{name} {key}: got {:?}, want {want:?}",
                    String::from_utf8_lossy(&got)
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn vocabulary_and_roles() {
    let llama3 = load("llama3");
    assert_eq!(llama3.kind(), ModelKind::Bpe);
    assert_eq!(llama3.pre_tokenizer(), "llama-bpe");
    assert!(llama3.warnings().is_empty(), "{:?}", llama3.warnings());
    let bos = llama3.token_id(b"<|begin_of_text|>").unwrap();
    assert_eq!(llama3.special_ids().bos, Some(bos));
    assert!(llama3.adds_bos());
    assert_eq!(
        llama3.encode(b"", gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL),
        vec![bos]
    );
    assert!(llama3.is_control(bos));
    let eot = llama3.token_id(b"<|eot_id|>").unwrap();
    assert!(llama3.is_end_of_generation(eot));
    assert_eq!(
        llama3.decode(&[bos], gguf_tokenizer::DecodeOptions::REMOVE_SPECIAL),
        b""
    );

    assert_eq!(load("gpt2").pre_tokenizer(), "gpt-2");
    assert_eq!(load("qwen2").pre_tokenizer(), "qwen2");
    assert_eq!(load("smollm").pre_tokenizer(), "starcoder");

    let gpt2 = load("gpt2");
    assert!(!gpt2.adds_bos());
    assert_eq!(
        gpt2.encode(b"hi", gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL),
        gpt2.encode(b"hi", gguf_tokenizer::EncodeOptions::PARSE_SPECIAL)
    );
    let tool = gpt2.token_id(b"<|tool|>").unwrap();
    assert!(!gpt2.is_control(tool));
    assert_eq!(gpt2.token_to_piece(tool, false), b"<|tool|>");

    let llama2 = load("llama2");
    assert_eq!(llama2.kind(), ModelKind::Bpe);
    assert_eq!(llama2.pre_tokenizer(), "");
    assert!(llama2.adds_space_prefix());
    assert_eq!(llama2.special_ids().bos, Some(1));
    assert_eq!(llama2.special_ids().eos, Some(2));
    assert_eq!(llama2.special_ids().unk, Some(0));
    assert_eq!(
        llama2.token_to_piece(llama2.token_id(b"<0x41>").unwrap(), false),
        b"A"
    );

    let metaspace = load("metaspace");
    assert!(metaspace.adds_bos());
    let hello = metaspace.encode(
        b"Hello",
        gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
    );
    assert_eq!(hello.first(), Some(&1));
    assert_eq!(hello.last(), Some(&2));

    let bert = load("bert");
    assert_eq!(bert.kind(), ModelKind::Wpm);
    let cls = bert.token_id(b"[CLS]").unwrap();
    let sep = bert.token_id(b"[SEP]").unwrap();
    let ids = bert.encode(
        b"Hello world",
        gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
    );
    assert_eq!((ids[0], *ids.last().unwrap()), (cls, sep));
    // WordPiece texts are stored in llama.cpp's layout.
    assert!(bert.token_id("\u{2581}hello".as_bytes()).is_some());
    assert_eq!(
        bert.decode(&ids[1..ids.len() - 1], gguf_tokenizer::DecodeOptions::PLAIN),
        b"hello world"
    );
}

// ---------------------------------------------------------------------------------------------
// Files made here: what cannot be represented is an error naming it

fn build(json: &str, extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = GgufBuilder::new();
    b.set("general.architecture", "llama")
        .set("tokenizer.huggingface.json", json);
    for (k, v) in extra {
        b.set(k, *v);
    }
    let mut out = Vec::new();
    b.write(&mut out).unwrap().finish().unwrap();
    out
}

fn try_load(json: &str) -> Result<Tokenizer, TokenizerError> {
    let bytes = build(json, &[]);
    let file = GgufFile::parse(&bytes).unwrap();
    Tokenizer::from_gguf(&file)
}

fn tiny_bpe(normalizer: &str, pre: &str, model_extra: &str) -> String {
    format!(
        r#"{{"version":"1.0","added_tokens":[{{"id":0,"content":"<s>","special":true,"normalized":false,"lstrip":false,"rstrip":false,"single_word":false}}],
        "normalizer":{normalizer},"pre_tokenizer":{pre},"post_processor":null,"decoder":null,
        "model":{{"type":"BPE","vocab":{{"<s>":0,"a":1,"b":2,"ab":3,"Ġ":4,"Ġab":5}},"merges":["a b","Ġ ab"]{model_extra}}}}}"#
    )
}

fn metadata_error(json: &str) -> String {
    match try_load(json) {
        Err(TokenizerError::Metadata(m)) => m,
        Err(e) => panic!("expected a metadata error, got {e}"),
        Ok(_) => panic!("expected an error for {json}"),
    }
}

#[test]
fn a_tiny_tokenizer_json_works() {
    let bytelevel =
        r#"{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}"#;
    let tok = try_load(&tiny_bpe("null", bytelevel, "")).unwrap();
    assert_eq!(
        tok.encode(b"ab ab<s>", gguf_tokenizer::EncodeOptions::PARSE_SPECIAL),
        vec![3, 5, 0]
    );
    assert_eq!(
        tok.encode(b"ab ab<s>", gguf_tokenizer::EncodeOptions::PLAIN),
        vec![3, 5]
    );
    assert_eq!(
        tok.decode(&[3, 5], gguf_tokenizer::DecodeOptions::PLAIN),
        b"ab ab"
    );
    assert!(tok.warnings().is_empty(), "{:?}", tok.warnings());
}

#[test]
fn unrepresentable_parts_are_errors_naming_them() {
    let bytelevel = r#"{"type":"ByteLevel","add_prefix_space":false,"use_regex":true}"#;
    for (json, what) in [
        ("{".to_string(), "invalid JSON"),
        ("[]".to_string(), "not an object"),
        (
            r#"{"model":{"type":"Unigram","vocab":[["a",0.0]],"unk_id":0}}"#.to_string(),
            "model type `Unigram`",
        ),
        (
            r#"{"model":{"type":"WordLevel","vocab":{"a":0},"unk_token":"a"}}"#.to_string(),
            "model type `WordLevel`",
        ),
        (tiny_bpe(r#"{"type":"NFKC"}"#, bytelevel, ""), "normalizer `NFKC`"),
        (
            tiny_bpe(r#"{"type":"Precompiled","precompiled_charsmap":""}"#, bytelevel, ""),
            "normalizer `Precompiled`",
        ),
        (
            tiny_bpe(
                r#"{"type":"Replace","pattern":{"Regex":" {2,}"},"content":" "}"#,
                bytelevel,
                "",
            ),
            "Replace with a regex",
        ),
        (
            tiny_bpe("null", r#"{"type":"UnicodeScripts"}"#, ""),
            "pre-tokenizer `UnicodeScripts`",
        ),
        (
            tiny_bpe(
                "null",
                r#"{"type":"Split","pattern":{"Regex":"a"},"behavior":"Removed","invert":false}"#,
                "",
            ),
            "behavior Removed",
        ),
        (tiny_bpe("null", bytelevel, r#","dropout":0.1"#), "dropout"),
        (
            tiny_bpe("null", bytelevel, r#","end_of_word_suffix":"</w>""#),
            "end_of_word_suffix",
        ),
        (
            tiny_bpe("null", bytelevel, r#","unk_token":"<unk>""#),
            "unk_token \"<unk>\" is not in the vocabulary",
        ),
        (
            r#"{"model":{"type":"BPE","vocab":{"a":0},"merges":["a b"]}}"#.to_string(),
            "\"b\" is not in the vocabulary",
        ),
        (
            r#"{"model":{"type":"BPE","vocab":{"a":0,"b":0},"merges":[]}}"#.to_string(),
            "gives id 0 to both",
        ),
        (
            r#"{"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<x>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}],"special_tokens":{}}}"#.to_string(),
            "TemplateProcessing token `<x>` is unknown",
        ),
    ] {
        let msg = metadata_error(&json);
        assert!(msg.contains(what), "{what:?} not in {msg:?}");
        assert!(msg.contains("tokenizer.huggingface.json") || msg.contains("JSON"), "{msg}");
    }
}

#[test]
fn an_unknown_split_regex_falls_back_with_a_warning() {
    let pre = r#"{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\w+|[^\\w\\s]+"},"behavior":"Isolated","invert":false},{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]}"#;
    let tok = try_load(&tiny_bpe("null", pre, "")).unwrap();
    assert_eq!(tok.pre_tokenizer(), "default");
    assert!(
        tok.warnings().iter().any(|w| w.contains("`default`")),
        "{:?}",
        tok.warnings()
    );
}

#[test]
fn the_ggml_model_wins_over_the_json() {
    let bytes = build(
        &tiny_bpe("null", "null", ""),
        &[("tokenizer.ggml.model", "no-such-model")],
    );
    let file = GgufFile::parse(&bytes).unwrap();
    let e = Tokenizer::from_gguf(&file).unwrap_err().to_string();
    assert!(e.contains("no-such-model"), "{e}");
}
