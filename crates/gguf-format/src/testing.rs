//! Small files for examples and tests (not part of the stable API).

use crate::{GgmlType, GgufBuilder, OwnedValue};

/// A tiny llama-like file: a few keys, a three-token vocabulary, two F32 tensors.
pub fn tiny_file() -> Vec<u8> {
    let mut b = GgufBuilder::new();
    b.set("general.architecture", "llama")
        .set("general.name", "tiny")
        .set("llama.block_count", 2u32)
        .set("llama.context_length", 64u32)
        .set(
            "tokenizer.ggml.tokens",
            OwnedValue::from(vec!["<s>", "hello", "world"]),
        )
        .set(
            "tokenizer.ggml.scores",
            OwnedValue::from(vec![0.0f32, -1.0, -2.0]),
        );
    b.add_tensor("token_embd.weight", GgmlType::F32, &[8, 3])
        .and_then(|b| b.add_tensor("output_norm.weight", GgmlType::F32, &[8]))
        .expect("valid tensors");
    let mut out = Vec::new();
    let mut w = b.write(&mut out).expect("in-memory write");
    let embd: Vec<u8> = (0..24u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
    w.write_tensor(&embd).expect("size matches");
    w.write_tensor(&[0u8; 32]).expect("size matches");
    w.finish().expect("all tensors written");
    out
}
