//! What a hostile checkpoint can make the converter allocate: a `tokenizer.json` of a million
//! merges whose first is malformed fails at that merge, naming it, having read the file's text
//! and nothing of the merges after it (issue 24: 10^7 merges took 6.7 s and 2.1 GB before the
//! error).

use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions};
use gguf_test_support::alloc::{measure, Counting};
use gguf_test_support::fixture;

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn a_huge_tokenizer_json_with_a_malformed_first_merge_fails_at_once() {
    let mut json = String::from(
        r#"{"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "byte_fallback": false, "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b c""#,
    );
    for _ in 0..1_000_000 {
        json.push_str(r#", "a b""#);
    }
    json.push_str("]}}");
    // llama reads tokenizer.json first to tell a Llama 2 BPE from a byte-level one, qwen2 for
    // its vocabulary: each reader checks it.
    for name in ["tiny-llama", "tiny-qwen2"] {
        let dir = tempfile::tempdir().unwrap();
        for entry in std::fs::read_dir(fixture(&format!("hf/{name}"))).unwrap() {
            let entry = entry.unwrap();
            if entry.file_name() != "tokenizer.model" {
                std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
            }
        }
        std::fs::write(dir.path().join("tokenizer.json"), &json).unwrap();
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        let (_, bytes, plan) = measure(|| HfConversion::plan(&ckpt, &HfOptions::default()));
        let e = plan.unwrap_err().to_string();
        assert!(
            e.contains("tokenizer.json")
                && e.contains(
                    r#"`model.merges[0]` "a b c" is not two tokens separated by a space"#
                ),
            "{name}: {e}"
        );
        // The file's text (7 MB) and the rest of the plan; read into a JSON value, the merges
        // alone take tens of megabytes.
        assert!(
            bytes < json.len() + (2 << 20),
            "{name}: {bytes} bytes allocated for a {}-byte tokenizer.json",
            json.len()
        );
    }
}
