use super::*;

fn read(json: &str) -> Result<TokenizerJson, String> {
    from_value(serde_json::from_str(json).unwrap()).map_err(|e| e.to_string())
}

#[test]
fn errors_name_their_path() {
    let e = read(
        r#"{"model": {"merges": [], "vocab": {}}, "pre_tokenizer": {"type": "Sequence",
        "pretokenizers": [{"type": "Digits"}, {"type": "Split", "pattern": {"Regex": "a"},
        "invert": 3}]}}"#,
    )
    .unwrap_err();
    assert_eq!(
        e,
        "at `pre_tokenizer.pretokenizers[1].invert`: invalid type: integer `3`, expected a boolean"
    );
    let e = read(r#"{"model": {"type": "BPE", "vocab": {"a": -1}, "merges": []}}"#).unwrap_err();
    assert!(e.starts_with("at `model.vocab.a`: invalid value"), "{e}");
    let e = read(r#"{"model": {"type": "Foo"}}"#).unwrap_err();
    assert!(e.starts_with("at `model`: unknown model type `Foo`"), "{e}");
    let e =
        read(r#"{"model": {"merges": [], "vocab": {}}, "normalizer": {"type": "X"}}"#).unwrap_err();
    assert!(
        e.starts_with("at `normalizer`: unknown normalizer type `X`"),
        "{e}"
    );
    let e = read(r#"{"added_tokens": [{"content": 1}], "model": {"merges": [], "vocab": {}}}"#)
        .unwrap_err();
    assert!(
        e.starts_with("at `added_tokens[0].content`: invalid type"),
        "{e}"
    );
}

#[test]
fn values_are_written_in_tokenizers_order() {
    let n = Normalizer::Sequence(NormalizerSequence {
        normalizers: vec![
            Normalizer::Prepend(Prepend {
                prepend: "\u{2581}".into(),
            }),
            Normalizer::Replace(Replace {
                pattern: Pattern::String(" ".into()),
                content: "\u{2581}".into(),
            }),
        ],
    });
    assert_eq!(
        serde_json::to_string(&n).unwrap(),
        r#"{"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]}"#
    );
    let back: Normalizer = from_value(serde_json::to_value(&n).unwrap()).unwrap();
    assert_eq!(back, n);
    assert_eq!(
        serde_json::to_string(&PreTokenizer::Bert).unwrap(),
        r#"{"type":"BertPreTokenizer"}"#
    );
    let merges: Vec<Merge> = serde_json::from_str(r#"["a b", ["c", "d"]]"#).unwrap();
    assert_eq!(
        merges,
        [
            Merge::Text("a b".into()),
            Merge::Pair("c".into(), "d".into())
        ]
    );
    assert!(serde_json::from_str::<Merge>(r#"["c", 1]"#).is_err());
}
