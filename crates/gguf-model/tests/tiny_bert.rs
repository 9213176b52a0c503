//! BERT on a tiny random model made here (2 blocks of 64, 4 heads, f16 matrices, the WordPiece
//! vocabulary of `fixtures/tokenizer-bert.gguf`): its embeddings against llama.cpp's
//! `llama-embedding` on the same bytes (`tests/data/tiny_bert_embeddings.json`, made by
//! `tests/data/minilm_embeddings.py tiny`), and the encoder's properties (bidirectional
//! attention, pooling, thread counts, the tiled attention path). Runs everywhere: no real model.

use gguf_format::{GgmlType, GgufBuilder, GgufFile};
use gguf_model::{EmbeddingOptions, EncodeOptions, Model, Normalize, Pooling, SessionOptions};
use gguf_test_support::{fixture_bytes, fnv1a64, Rng};

const D: usize = 64;
const FF: usize = 128;
const LAYERS: usize = 2;
const HEADS: u32 = 4;
const CTX: usize = 512;

/// The tiny BERT's file: deterministic bytes (their FNV-1a is in the reference file).
fn tiny_bert() -> Vec<u8> {
    let vocab = fixture_bytes("tokenizer-bert.gguf");
    let vocab = GgufFile::parse(&vocab).unwrap();
    let n_vocab = vocab
        .get_array::<&str>("tokenizer.ggml.tokens")
        .unwrap()
        .count();
    let mut b = GgufBuilder::from_file(&vocab);
    b.set("general.name", "tiny random bert")
        .set("bert.block_count", LAYERS as u32)
        .set("bert.context_length", CTX as u32)
        .set("bert.embedding_length", D as u32)
        .set("bert.feed_forward_length", FF as u32)
        .set("bert.attention.head_count", HEADS)
        .set("bert.attention.layer_norm_epsilon", 1e-12f32)
        .set("bert.attention.causal", false)
        .set("bert.pooling_type", 1u32)
        .set("tokenizer.ggml.bos_token_id", 101u32)
        .set("tokenizer.ggml.eos_token_id", 102u32)
        .set("tokenizer.ggml.add_bos_token", true)
        .set("tokenizer.ggml.add_eos_token", true);
    let mut rng = Rng::new(64);
    let mut tensors: Vec<(String, GgmlType, Vec<u64>, Vec<f32>)> = Vec::new();
    let mut fill = |name: String, ty: GgmlType, shape: &[usize], mean: f32, std: f32| {
        let n: usize = shape.iter().product();
        let a = std * 3f32.sqrt();
        let values = (0..n).map(|_| mean + a * rng.unit()).collect();
        let shape = shape.iter().map(|&d| d as u64).collect();
        tensors.push((name, ty, shape, values));
    };
    use GgmlType::{F16, F32};
    let mat = |cols: usize, gain: f32| gain / (cols as f32).sqrt();
    fill("token_embd.weight".into(), F16, &[D, n_vocab], 0.0, 1.0);
    fill("token_types.weight".into(), F32, &[D, 2], 0.0, 0.3);
    fill("position_embd.weight".into(), F32, &[D, CTX], 0.0, 0.3);
    fill("token_embd_norm.weight".into(), F32, &[D], 1.0, 0.2);
    fill("token_embd_norm.bias".into(), F32, &[D], 0.0, 0.1);
    for i in 0..LAYERS {
        let t = |s: &str| format!("blk.{i}.{s}");
        for (m, gain) in [("attn_q", 2.0), ("attn_k", 2.0), ("attn_v", 1.0)] {
            fill(t(&format!("{m}.weight")), F16, &[D, D], 0.0, mat(D, gain));
            fill(t(&format!("{m}.bias")), F32, &[D], 0.0, 0.2);
        }
        fill(t("attn_output.weight"), F16, &[D, D], 0.0, mat(D, 1.0));
        fill(t("attn_output.bias"), F32, &[D], 0.0, 0.1);
        fill(t("attn_output_norm.weight"), F32, &[D], 1.0, 0.2);
        fill(t("attn_output_norm.bias"), F32, &[D], 0.0, 0.1);
        fill(t("ffn_up.weight"), F16, &[D, FF], 0.0, mat(D, 1.5));
        fill(t("ffn_up.bias"), F32, &[FF], 0.0, 0.3);
        fill(t("ffn_down.weight"), F16, &[FF, D], 0.0, mat(FF, 1.0));
        fill(t("ffn_down.bias"), F32, &[D], 0.0, 0.1);
        fill(t("layer_output_norm.weight"), F32, &[D], 1.0, 0.2);
        fill(t("layer_output_norm.bias"), F32, &[D], 0.0, 0.1);
    }
    for (name, ty, shape, _) in &tensors {
        b.add_tensor(name, *ty, shape).unwrap();
    }
    let mut out = Vec::new();
    let mut w = b.write(&mut out).unwrap();
    for (_, ty, shape, values) in &tensors {
        let mut bytes = vec![0u8; ty.tensor_size(shape).unwrap() as usize];
        gguf_quant::quantize_row(*ty, values, &mut bytes).unwrap();
        w.write_tensor(&bytes).unwrap();
    }
    w.finish().unwrap();
    out
}

/// The tiny BERT written to a temporary directory (and, with `$GGUF_TINY_BERT_OUT`, there too,
/// for making the reference).
fn tiny_bert_file() -> (tempfile::TempDir, std::path::PathBuf, String) {
    let bytes = tiny_bert();
    if let Some(out) = std::env::var_os("GGUF_TINY_BERT_OUT") {
        std::fs::write(out, &bytes).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-bert.gguf");
    std::fs::write(&path, &bytes).unwrap();
    (dir, path, fnv1a64(&bytes))
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum();
    let norm = |v: &[f32]| v.iter().map(|&x| f64::from(x).powi(2)).sum::<f64>().sqrt();
    dot / (norm(a) * norm(b))
}

fn raw(pooling: Pooling) -> EmbeddingOptions {
    EmbeddingOptions {
        pooling: Some(pooling),
        normalize: Normalize::None,
    }
}

#[test]
fn tiny_bert_matches_llama_embedding() {
    let (_dir, path, hash) = tiny_bert_file();
    let reference = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/tiny_bert_embeddings.json"
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&std::fs::read(reference).unwrap()).unwrap();
    assert_eq!(
        doc["model_fnv1a64"], hash,
        "the tiny model changed: make the reference again (tests/data/minilm_embeddings.py)"
    );
    let model = Model::load(&path).unwrap();
    let mut session = model
        .session(SessionOptions {
            threads: 2,
            ..SessionOptions::default()
        })
        .unwrap();
    for s in doc["sentences"].as_array().unwrap() {
        let text = s["text"].as_str().unwrap();
        let ids = model
            .tokenizer()
            .encode(text.as_bytes(), EncodeOptions::ADD_AND_PARSE_SPECIAL);
        assert_eq!(
            ids,
            gguf_test_support::token_ids(&s["llama_cpp_token_ids"]),
            "{text:?}"
        );
        let expected: Vec<f32> = s["llama_cpp"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect();
        let v = session.embed(text).unwrap().into_flat();
        let c = cosine(&v, &expected);
        let diff = v
            .iter()
            .zip(&expected)
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        eprintln!("{} tokens: cosine {c:.9}, max |diff| {diff:.2e}", ids.len());
        assert!(c >= 0.999_999, "{text:?}: cosine {c}");
        assert!(diff < 1e-4, "{text:?}: max |diff| {diff}");
    }
}

#[test]
fn tiny_bert_attends_both_ways_and_pools_its_rows() {
    let (_dir, path, _) = tiny_bert_file();
    let model = Model::load(&path).unwrap();
    let hp = model.hparams();
    assert_eq!(
        (hp.arch, hp.causal, hp.pooling),
        ("bert", false, Pooling::Mean)
    );
    let mut two = model
        .session(SessionOptions {
            threads: 2,
            ..SessionOptions::default()
        })
        .unwrap();
    let mut one = model
        .session(SessionOptions {
            threads: 1,
            ..SessionOptions::default()
        })
        .unwrap();
    // A short input (one query at a time) and one of 64 tokens or more (the tiled path).
    for text in [
        "hello world",
        &"the play of the token is a test . ".repeat(9),
    ] {
        let ids = model
            .tokenizer()
            .encode(text.as_bytes(), EncodeOptions::ADD_AND_PARSE_SPECIAL);
        let rows = two
            .embed_tokens_with(&ids, &raw(Pooling::None))
            .unwrap()
            .into_flat();
        assert_eq!(rows.len(), ids.len() * D);
        assert_eq!(
            one.embed_tokens_with(&ids, &raw(Pooling::None))
                .unwrap()
                .into_flat(),
            rows
        );
        let mut mean = Pooling::Mean.apply(&rows, D).unwrap();
        Normalize::L2.apply(&mut mean);
        assert_eq!(two.embed(text).unwrap().into_flat(), mean);
        assert_eq!(
            two.embed_tokens_with(&ids, &raw(Pooling::Cls))
                .unwrap()
                .into_flat(),
            rows[..D]
        );
        // Changing the second-to-last token changes the first token's row: attention sees
        // later tokens.
        let mut changed = ids.clone();
        let k = changed.len() - 2;
        changed[k] = if changed[k] == 185 { 186 } else { 185 };
        let other = two
            .embed_tokens_with(&changed, &raw(Pooling::None))
            .unwrap()
            .into_flat();
        assert_ne!(other[..D], rows[..D]);
        // ... but not the token embeddings' count or the rows of an unchanged input.
        assert_eq!(
            two.embed_tokens_with(&ids, &raw(Pooling::None))
                .unwrap()
                .into_flat(),
            rows
        );
    }
    // An encoder computes no logits, and refuses more tokens than its context holds.
    assert!(two.eval(&[101, 102]).is_err());
    let mut small = model
        .session(SessionOptions {
            n_ctx: 8,
            ..SessionOptions::default()
        })
        .unwrap();
    assert!(small
        .embed("hello world hello world hello world hello")
        .is_err());
    assert!(small.embed_tokens(&[]).is_err());
    assert_eq!(small.embed("hello").unwrap().into_flat().len(), D);
}
