//! Tokenizer-only GGUF files whose tokenizer is a Hugging Face `tokenizer.json` in
//! `tokenizer.huggingface.json`, with no `tokenizer.ggml.*` model: `tokenizer-hf-NAME.gguf` for
//! each `crates/gguf-tokenizer/tests/data/hf_json/tokenizers/NAME.json` (small tokenizers
//! trained with Hugging Face `tokenizers` by that folder's `make_reference.py`). The JSON is
//! embedded byte for byte, so the files change only when the JSON does.

use anyhow::Result;
use gguf_format::GgufBuilder;

/// `(name, tokenizers/NAME.json)`.
macro_rules! tokenizer {
    ($name:literal) => {
        (
            $name,
            include_str!(concat!(
                "../../crates/gguf-tokenizer/tests/data/hf_json/tokenizers/",
                $name,
                ".json"
            )),
        )
    };
}

/// The committed tokenizer.json files, by fixture name.
const TOKENIZERS: &[(&str, &str)] = &[
    tokenizer!("bert"),
    tokenizer!("bert-cased"),
    tokenizer!("bytelevel-prefix"),
    tokenizer!("gpt2"),
    tokenizer!("llama2"),
    tokenizer!("llama3"),
    tokenizer!("metaspace"),
    tokenizer!("qwen2"),
    tokenizer!("smollm"),
    tokenizer!("spm-always"),
];

/// Every `tokenizer-hf-*.gguf` fixture, by file name.
pub fn files() -> Result<Vec<(String, Vec<u8>)>> {
    TOKENIZERS
        .iter()
        .map(|(name, json)| {
            let mut b = GgufBuilder::new();
            b.set("general.architecture", "llama")
                .set("general.name", format!("hf-json {name}").as_str())
                .set("tokenizer.huggingface.json", *json);
            let mut out = Vec::new();
            b.write(&mut out)?.finish()?;
            Ok((format!("tokenizer-hf-{name}.gguf"), out))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_tokenizer_is_valid_json_with_a_model() {
        for (name, json) in super::TOKENIZERS {
            assert!(json.contains("\"model\""), "{name}");
        }
        // Each file is a GGUF that embeds its tokenizer.json byte for byte, under its name.
        for ((name, json), (file_name, bytes)) in
            super::TOKENIZERS.iter().zip(super::files().unwrap())
        {
            assert_eq!(file_name, format!("tokenizer-hf-{name}.gguf"));
            let file = gguf_format::GgufFile::parse(&bytes).unwrap();
            assert_eq!(
                file.get::<&str>("tokenizer.huggingface.json").unwrap(),
                *json
            );
        }
    }
}
