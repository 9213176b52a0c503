use super::*;

fn sorted(names: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    v.sort();
    v
}

/// The fields each endpoint accepts, as they were listed before the structs held them.
#[test]
fn each_endpoint_accepts_its_fields() {
    let generation = [
        "model",
        "max_tokens",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "repeat_penalty",
        "n",
        "stream",
        "stream_options",
        "logprobs",
        "logit_bias",
        "user",
    ];
    let chat: Vec<&str> = generation
        .iter()
        .copied()
        .chain([
            "messages",
            "max_completion_tokens",
            "top_logprobs",
            "tools",
            "tool_choice",
            "parallel_tool_calls",
            "functions",
            "function_call",
            "response_format",
            "modalities",
            "audio",
            "prediction",
            "reasoning_effort",
            "verbosity",
            "web_search_options",
            "store",
            "metadata",
            "service_tier",
            "prompt_cache_key",
            "safety_identifier",
        ])
        .collect();
    let completion: Vec<&str> = generation
        .iter()
        .copied()
        .chain(["prompt", "best_of", "echo", "suffix"])
        .collect();
    let cases: [(&[&str], &[&str]); 5] = [
        (field_names::<ChatRequest>(), &chat),
        (field_names::<CompletionRequest>(), &completion),
        (
            field_names::<EmbeddingRequest>(),
            &["input", "model", "encoding_format", "dimensions", "user"],
        ),
        (
            field_names::<TokenizeRequest>(),
            &["content", "add_special", "parse_special", "with_pieces"],
        ),
        (field_names::<DetokenizeRequest>(), &["tokens"]),
    ];
    for (names, expected) in cases {
        assert_eq!(sorted(names), sorted(expected));
    }
}

#[test]
fn fields_keep_what_is_not_of_their_type() {
    let f: Field<Integer> = serde_json::from_str("3.0").unwrap();
    assert_eq!(f, Field::Given(Integer(3)));
    let f: Field<Integer> = serde_json::from_str("9223372036854775808").unwrap();
    assert!(matches!(f, Field::Wrong(_)));
    let f: Field<Integer> = serde_json::from_str("1.5").unwrap();
    assert!(matches!(f, Field::Wrong(_)));
    let f: Field<bool> = serde_json::from_str("null").unwrap();
    assert_eq!(f, Field::Absent);
    let f: Field<Object<StreamOptions>> = serde_json::from_str("[true]").unwrap();
    assert!(matches!(f, Field::Wrong(_)));
    let f: Field<StringOrList> = serde_json::from_str(r#"["a", 1]"#).unwrap();
    assert_eq!(f, Field::Wrong(serde_json::json!(["a", 1])));
}

#[test]
fn an_unknown_field_is_named() {
    let e = parse::<ChatRequest>(br#"{"temperature": "hot", "max_token": 5}"#).unwrap_err();
    assert_eq!(e.param.as_deref(), Some("max_token"));
    assert_eq!(e.code, Some("unknown_parameter"));
    assert_eq!(e.message, "unrecognized request argument `max_token`");
}
