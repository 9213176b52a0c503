//! Both real models give exactly llama.cpp's ids on the committed corpus, in llama-tokenize's
//! three modes (defaults, `--no-parse-special`, `--no-bos`); see `tests/data/README.md` for how
//! the reference was made. Decoding gives every valid-UTF-8 sample back.

use std::path::Path;

mod common;

use common::real_model;
use gguf_format::GgufFile;
use gguf_tokenizer::Tokenizer;
use serde_json::Value;

fn ids(v: &Value) -> Option<Vec<u32>> {
    v.as_array()
        .map(|a| a.iter().map(|x| x.as_u64().unwrap() as u32).collect())
}

fn check_model(name: &str) {
    let Some(path) = real_model(name) else {
        return;
    };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let reference: Value = serde_json::from_slice(
        &std::fs::read(data.join(format!("reference/{name}.json"))).unwrap(),
    )
    .unwrap();
    let mapped = GgufFile::open(&path).unwrap();
    let tokenizer = Tokenizer::from_gguf(mapped.file()).unwrap();
    assert!(
        tokenizer.warnings().is_empty(),
        "{:?}",
        tokenizer.warnings()
    );
    let samples = reference["samples"].as_object().unwrap();
    assert!(samples.len() >= 39);
    let mut failures = Vec::new();
    let mut checked = 0;
    for (file, modes) in samples {
        let text = std::fs::read(data.join("corpus").join(file)).unwrap();
        for (mode, add_special, parse_special) in [
            ("default", true, true),
            ("no_parse_special", true, false),
            ("no_special", false, true),
        ] {
            // `null`: llama-tokenize crashed on this input (see the README).
            let Some(expected) = ids(&modes[mode]) else {
                continue;
            };
            checked += 1;
            let got = tokenizer.encode(
                &text,
                gguf_tokenizer::EncodeOptions {
                    add_special,
                    parse_special,
                },
            );
            if got != expected {
                let first = got.iter().zip(&expected).position(|(a, b)| a != b);
                failures.push(format!(
                    "{file} {mode}: {} ids vs llama.cpp's {}, first difference at {first:?}",
                    got.len(),
                    expected.len()
                ));
            }
        }
        if std::str::from_utf8(&text).is_ok() {
            let ids = tokenizer.encode(&text, gguf_tokenizer::EncodeOptions::PARSE_SPECIAL);
            let back = tokenizer.decode(&ids, gguf_tokenizer::DecodeOptions::UNPARSE_SPECIAL);
            // SmolLM2's decoder tidies " ," and friends (llama.cpp's clean_spaces) unless the
            // model turns it off; both real models keep the text as it was.
            assert_eq!(
                String::from_utf8_lossy(&back),
                String::from_utf8_lossy(&text),
                "{name} {file}: decode(encode(x)) != x"
            );
            // Streaming, token by token: the same text, and never a replacement character
            // (which would mean a split character was emitted early).
            let mut stream = tokenizer.stream_decoder(true);
            let mut streamed = String::new();
            for &id in &ids {
                streamed.push_str(&stream.push(id));
            }
            streamed.push_str(&stream.finish());
            assert_eq!(
                streamed.as_bytes(),
                &text[..],
                "{name} {file}: streamed text"
            );
        }
    }
    assert!(failures.is_empty(), "{name}:\n{}", failures.join("\n"));
    assert!(checked > 100, "{name}: only {checked} comparisons");
}

#[test]
fn smollm2_ids_equal_llama_cpp_on_the_corpus() {
    check_model("smollm2-135m");
}

#[test]
fn gemma3_ids_equal_llama_cpp_on_the_corpus() {
    check_model("gemma3-270m");
}
