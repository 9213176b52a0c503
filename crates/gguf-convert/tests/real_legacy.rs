//! Real legacy files (`cargo xtask models` fetches them from pinned PyPI source
//! distributions): llama.cpp's old `models/ggml-vocab.bin` as GGMF v1 (llama-cpp-python 0.1.9)
//! and as GGJT v1 (0.1.48) converts to the same vocabulary, token for token, score for score
//! and type for type, as the GGUF v1 vocabulary llama.cpp itself made from the same tokenizer
//! (`models/ggml-vocab-llama.gguf`, 0.1.79); a whisper.cpp model is refused by name.

use gguf_convert::legacy::{LegacyModel, Options};
use gguf_convert::Error;
use gguf_format::{GgufFile, Value};
use gguf_test_support::legacy_file;

fn array<'a>(file: &GgufFile<'a>, key: &str) -> Vec<Value<'a>> {
    match file.value(key) {
        Some(Value::Array(a)) => a.iter().collect(),
        other => panic!("{key}: {other:?}"),
    }
}

#[test]
fn old_vocab_files_convert_to_llama_cpps_own_gguf_vocabulary() {
    let Some(reference) = legacy_file("ggml-vocab-llama-gguf-v1.gguf") else {
        return;
    };
    let reference = std::fs::read(reference).unwrap();
    let reference = GgufFile::parse(&reference).unwrap();
    for name in ["ggml-vocab-ggmf-v1.bin", "ggml-vocab-ggjt-v1.bin"] {
        let Some(path) = legacy_file(name) else {
            return;
        };
        let bytes = std::fs::read(&path).unwrap();
        let model = LegacyModel::parse(&bytes).unwrap();
        assert!(model.tensors().is_empty(), "{name}: a vocabulary only");
        assert_eq!(model.vocab().len(), 32000, "{name}");
        let mut options = Options::new("ggml-vocab.bin");
        options.vocab_only = true;
        let mut out = Vec::new();
        model
            .write_gguf(&options, &mut out, &mut |_, _| {})
            .unwrap();
        let ours = GgufFile::parse(&out).unwrap();
        for key in [
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.scores",
            "tokenizer.ggml.token_type",
        ] {
            let (a, b) = (array(&ours, key), array(&reference, key));
            assert_eq!(a.len(), 32000, "{name} {key}");
            for (i, (x, y)) in a.iter().zip(&b).enumerate() {
                assert_eq!(x, y, "{name} {key}[{i}]");
            }
        }
        for key in [
            "tokenizer.ggml.model",
            "llama.embedding_length",
            "llama.feed_forward_length",
            "llama.attention.head_count",
            "llama.block_count",
            "llama.rope.dimension_count",
        ] {
            assert_eq!(ours.value(key), reference.value(key), "{name} {key}");
        }
    }
}

#[test]
fn a_whisper_model_is_refused_by_name() {
    let Some(path) = legacy_file("whisper-for-tests-ggml-tiny.bin") else {
        return;
    };
    let bytes = std::fs::read(path).unwrap();
    let e = LegacyModel::parse(&bytes).unwrap_err();
    assert!(matches!(e, Error::NotLlama(_)), "{e}");
    assert!(e.to_string().contains("whisper.cpp"), "{e}");
}
