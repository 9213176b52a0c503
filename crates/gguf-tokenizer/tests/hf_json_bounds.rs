//! A `tokenizer.json` of a million merges whose first is malformed fails at that merge, naming
//! it, without the merges after it being read into memory (issue 24: 10^7 merges took 6.7 s
//! and 2.1 GB before the error).

use gguf_test_support::alloc::{measure, Counting};
use gguf_tokenizer::Tokenizer;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// A BPE `tokenizer.json` whose `model.merges` is `first` then a million `"a b"`.
fn huge_merges(first: &str) -> String {
    let mut json = String::from(
        r#"{"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["#,
    );
    json.push_str(first);
    for _ in 0..1_000_000 {
        json.push_str(r#", "a b""#);
    }
    json.push_str("]}}");
    json
}

#[test]
fn a_malformed_first_merge_fails_before_the_rest_is_read_into_memory() {
    for (first, wanted) in [
        (
            r#""a b c""#,
            r#"`model.merges[0]` "a b c" is not two tokens separated by a space"#,
        ),
        (
            r#""ab""#,
            r#"`model.merges[0]` "ab" is not two tokens separated by a space"#,
        ),
        ("5", "`model.merges[0]` is not a string or pair"),
        (r#"["a"]"#, "`model.merges[0]` is not a pair of strings"),
        (r#"["a", 7]"#, "`model.merges[0]` is not a pair of strings"),
        (
            r#"["a", "b", "c"]"#,
            "`model.merges[0]` is not a pair of strings",
        ),
    ] {
        let json = huge_merges(first);
        let (_, bytes, result) = measure(|| Tokenizer::from_huggingface_json(&json));
        let e = result.unwrap_err().to_string();
        assert!(e.contains(wanted), "{first}: {e}");
        // Reading the merges into a JSON value takes tens of megabytes for these 7 MB; the
        // check keeps none of them.
        assert!(bytes < 1 << 20, "{first}: {bytes} bytes allocated");
        let (_, bytes, result) = measure(|| Tokenizer::check_huggingface_json(&json));
        assert!(result.unwrap_err().to_string().contains(wanted), "{first}");
        assert!(
            bytes < 1 << 16,
            "{first}: the check alone allocated {bytes} bytes"
        );
    }
    // A later malformed merge is named by its index too; well-formed ones pass the check.
    let mut json = huge_merges(r#""a b""#);
    json.truncate(json.len() - 3);
    json.push_str(r#", "x"]}}"#);
    let e = Tokenizer::check_huggingface_json(&json)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`model.merges[1000001]` \"x\""), "{e}");
    let json = huge_merges(r##""#version: 0.2""##);
    Tokenizer::check_huggingface_json(&json).unwrap();
    let tok = Tokenizer::from_huggingface_json(&json).unwrap();
    assert_eq!(tok.encode(b"ab", gguf_tokenizer::EncodeOptions::PLAIN), [2]);
}
