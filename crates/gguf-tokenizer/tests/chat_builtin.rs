//! The built-in chat templates render what llama.cpp's built-in formatter renders
//! (`tests/data/chat_builtin/expected.json`, made by `regenerate.sh` there), and files without a
//! template get the built-in their vocabulary's turn markers call for.

use std::path::Path;

use gguf_format::{GgufBuilder, GgufFile, MappedGguf};
use gguf_tokenizer::chat::{ChatMessage, RenderOptions};
use gguf_tokenizer::chat_builtin::{self, Origin, BUILTINS};
use gguf_tokenizer::TokenizerError;

fn expected() -> serde_json::Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chat_builtin/expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

#[test]
fn builtins_render_what_llama_cpp_renders() {
    let reference = expected();
    let cases = reference["cases"].as_array().unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for case in cases {
        let name = case["template"].as_str().unwrap();
        seen.insert(name);
        let template = chat_builtin::builtin(name).unwrap().template().unwrap();
        let messages: Vec<ChatMessage> = case["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| ChatMessage::new(m["role"].as_str().unwrap(), m["content"].as_str().unwrap()))
            .collect();
        let options = RenderOptions {
            add_generation_prompt: case["add_generation_prompt"].as_bool().unwrap(),
            ..RenderOptions::default()
        };
        let rendered = template.render(&messages, &options).unwrap();
        assert_eq!(
            rendered,
            case["expected"].as_str().unwrap(),
            "{name}, case {}, add_generation_prompt {}",
            case["name"],
            options.add_generation_prompt
        );
    }
    // Every built-in is covered by the reference.
    assert_eq!(seen.len(), BUILTINS.len(), "{seen:?}");
}

fn file_with(tokens: &[&str], extra: &[(&str, &str)]) -> Vec<u8> {
    let mut b = GgufBuilder::new();
    b.set("general.architecture", "llama");
    b.set("tokenizer.ggml.tokens", tokens.to_vec());
    b.set("tokenizer.ggml.bos_token_id", 1u32);
    b.set("tokenizer.ggml.eos_token_id", 2u32);
    for (k, v) in extra {
        b.set(k, *v);
    }
    let mut out = Vec::new();
    b.write(&mut out).unwrap().finish().unwrap();
    out
}

#[test]
fn a_file_without_a_template_gets_the_builtin_of_its_turn_markers() {
    let hi = [ChatMessage::new("user", "hi")];
    let gen = RenderOptions {
        add_generation_prompt: true,
        ..RenderOptions::default()
    };
    let gemma = file_with(
        &[
            "<pad>",
            "<bos>",
            "<eos>",
            "<start_of_turn>",
            "<end_of_turn>",
        ],
        &[],
    );
    let file = GgufFile::parse(&gemma).unwrap();
    let (template, origin) = chat_builtin::for_file(&file, None).unwrap();
    assert_eq!(origin, Origin::Detected("gemma"));
    assert_eq!(
        template.render(&hi, &gen).unwrap(),
        "<start_of_turn>user\nhi<end_of_turn>\n<start_of_turn>model\n"
    );
    // The file's special tokens are there for templates that use them.
    assert!(template
        .special_tokens()
        .contains(&("bos_token".to_string(), "<bos>".to_string())));

    let chatml = file_with(&["<unk>", "<s>", "</s>", "<|im_start|>", "<|im_end|>"], &[]);
    let file = GgufFile::parse(&chatml).unwrap();
    assert_eq!(
        chat_builtin::for_file(&file, None).unwrap().1,
        Origin::Detected("chatml")
    );

    // No markers: an error naming the built-ins, not a guess.
    let plain = file_with(&["<unk>", "<s>", "</s>"], &[]);
    let file = GgufFile::parse(&plain).unwrap();
    let err = chat_builtin::for_file(&file, None).unwrap_err();
    assert!(matches!(err, TokenizerError::Metadata(_)), "{err:?}");
    assert!(
        err.to_string().contains("chatml, phi3, gemma, llama3"),
        "{err}"
    );
    // A name picks a built-in whatever the vocabulary.
    let (template, origin) = chat_builtin::for_file(&file, Some("gemma")).unwrap();
    assert_eq!(origin, Origin::Builtin("gemma"));
    assert!(template
        .render(&hi, &gen)
        .unwrap()
        .starts_with("<start_of_turn>user"));
    let err = chat_builtin::for_file(&file, Some("nonesuch")).unwrap_err();
    assert!(
        err.to_string().contains("no chat template `nonesuch`"),
        "{err}"
    );
}

#[test]
fn the_file_template_comes_first_and_names_reach_named_templates() {
    let bytes = file_with(
        &["<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>"],
        &[
            ("tokenizer.chat_template", "{{ bos_token }}file"),
            ("tokenizer.chat_template.rag", "rag"),
        ],
    );
    let file = GgufFile::parse(&bytes).unwrap();
    let hi = [ChatMessage::new("user", "hi")];
    let (template, origin) = chat_builtin::for_file(&file, None).unwrap();
    assert_eq!(origin, Origin::File);
    assert_eq!(
        template.render(&hi, &RenderOptions::default()).unwrap(),
        "<s>file"
    );
    let (template, origin) = chat_builtin::for_file(&file, Some("rag")).unwrap();
    assert_eq!(origin, Origin::Named("rag".into()));
    assert_eq!(
        template.render(&hi, &RenderOptions::default()).unwrap(),
        "rag"
    );
    let err = chat_builtin::for_file(&file, Some("tool_use")).unwrap_err();
    assert!(err.to_string().contains("named templates: rag"), "{err}");
}

/// Gemma 3 270M carries no chat template: it gets `gemma`, as its turn markers are tokens.
#[test]
fn gemma3_270m_gets_the_gemma_template() {
    let Some(path) = gguf_test_support::real_model("gemma3-270m") else {
        return;
    };
    let mapped = MappedGguf::open(&path).unwrap();
    let file = mapped.file();
    assert!(file.value(gguf_tokenizer::chat::TEMPLATE_KEY).is_none());
    let (_, origin) = chat_builtin::for_file(file, None).unwrap();
    assert_eq!(origin, Origin::Detected("gemma"));
}
