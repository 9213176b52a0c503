//! BERT on a real model: all-MiniLM-L6-v2 (f16) against the reference embeddings of
//! `tests/data/minilm_embeddings.json`, from llama.cpp's `llama-embedding` and from
//! sentence-transformers (made by `tests/data/minilm_embeddings.py`; its `source` field says
//! how). Skipped when the GGUF is missing, except with `GGUF_REQUIRE_MODELS=1` (CI), where a
//! missing file fails.

use std::path::PathBuf;

use gguf_model::{EmbeddingOptions, Model, ModelError, Normalize, Pooling, SessionOptions};

/// The all-MiniLM-L6-v2 f16 GGUF under test: `$GGUF_MINILM` when set (it must exist then),
/// else `all-MiniLM-L6-v2.f16.gguf` in the model cache (where the conversion of the cached
/// checkpoint, `gguf_test_support::hf_checkpoint("all-MiniLM-L6-v2")`, is to be written).
/// `None`, after a note on stderr, when it is missing and models are not required.
fn minilm_gguf() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("GGUF_MINILM") {
        let path = PathBuf::from(path);
        assert!(
            path.exists(),
            "GGUF_MINILM={} does not exist",
            path.display()
        );
        return Some(path);
    }
    gguf_test_support::real_model("all-MiniLM-L6-v2.f16")
}

struct Reference {
    text: String,
    ids: Vec<u32>,
    llama_cpp: Vec<f32>,
    sentence_transformers: Vec<f32>,
}

fn references() -> Vec<Reference> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/minilm_embeddings.json"
    );
    let doc: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let floats = |v: &serde_json::Value| -> Vec<f32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap() as f32)
            .collect()
    };
    doc["sentences"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| Reference {
            text: s["text"].as_str().unwrap().to_string(),
            ids: gguf_test_support::token_ids(&s["llama_cpp_token_ids"]),
            llama_cpp: floats(&s["llama_cpp"]),
            sentence_transformers: floats(&s["sentence_transformers"]),
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| f64::from(x) * f64::from(y))
        .sum();
    let norm = |v: &[f32]| {
        v.iter()
            .map(|&x| f64::from(x) * f64::from(x))
            .sum::<f64>()
            .sqrt()
    };
    dot / (norm(a) * norm(b))
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn session_options(threads: usize) -> SessionOptions {
    SessionOptions {
        threads,
        ..SessionOptions::default()
    }
}

#[test]
fn minilm_hyperparameters_and_token_ids_are_llama_cpps() {
    let Some(path) = minilm_gguf() else { return };
    let model = Model::load(&path).unwrap();
    let hp = model.hparams();
    assert_eq!(hp.arch, "bert");
    assert_eq!((hp.n_embd, hp.n_layer, hp.n_head), (384, 6, 12));
    assert_eq!((hp.n_ctx_train, hp.n_vocab), (512, 30522));
    assert!(!hp.causal);
    assert_eq!(hp.pooling, Pooling::Mean);
    for r in references() {
        let ids = model.tokenizer().encode(
            r.text.as_bytes(),
            gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
        );
        assert_eq!(ids, r.ids, "{:?}", r.text);
    }
}

#[test]
fn minilm_embeddings_match_llama_cpp_and_sentence_transformers() {
    let Some(path) = minilm_gguf() else { return };
    let model = Model::load(&path).unwrap();
    let mut session = model.session(session_options(0)).unwrap();
    let (mut min_llama, mut min_st, mut max_diff) = (1f64, 1f64, 0f32);
    for r in references() {
        let v = session.embed(&r.text).unwrap().into_flat();
        assert_eq!(v.len(), 384);
        let (c_llama, c_st) = (
            cosine(&v, &r.llama_cpp),
            cosine(&v, &r.sentence_transformers),
        );
        let diff = max_abs_diff(&v, &r.llama_cpp);
        eprintln!(
            "{} tokens: cosine {c_llama:.9} vs llama.cpp (max |diff| {diff:.2e}), \
             {c_st:.9} vs sentence-transformers: {:?}",
            r.ids.len(),
            r.text
        );
        assert!(
            c_llama >= 0.9999,
            "{:?}: cosine {c_llama} vs llama.cpp",
            r.text
        );
        assert!(
            c_st >= 0.9999,
            "{:?}: cosine {c_st} vs sentence-transformers",
            r.text
        );
        min_llama = min_llama.min(c_llama);
        min_st = min_st.min(c_st);
        max_diff = max_diff.max(diff);
    }
    eprintln!(
        "minimum cosine: {min_llama:.9} vs llama.cpp, {min_st:.9} vs sentence-transformers; \
         max |diff| vs llama.cpp {max_diff:.2e}"
    );
}

#[test]
fn minilm_pooling_choices_agree_and_attention_sees_later_tokens() {
    let Some(path) = minilm_gguf() else { return };
    let model = Model::load(&path).unwrap();
    let mut session = model.session(session_options(2)).unwrap();
    let text = "Café au lait — naïve résumé";
    let ids = model.tokenizer().encode(
        text.as_bytes(),
        gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
    );
    let d = model.hparams().n_embd;
    let raw = |pooling| EmbeddingOptions {
        pooling: Some(pooling),
        normalize: Normalize::None,
    };
    let rows = session
        .embed_tokens_with(&ids, &raw(Pooling::None))
        .unwrap()
        .into_flat();
    assert_eq!(rows.len(), ids.len() * d);
    let mut mean = Pooling::Mean.apply(&rows, d).unwrap();
    Normalize::L2.apply(&mut mean);
    assert_eq!(session.embed(text).unwrap().into_flat(), mean);
    let cls = session
        .embed_tokens_with(&ids, &raw(Pooling::Cls))
        .unwrap()
        .into_flat();
    assert_eq!(cls, rows[..d]);
    let last = session
        .embed_tokens_with(&ids, &raw(Pooling::Last))
        .unwrap()
        .into_flat();
    assert_eq!(last, rows[rows.len() - d..]);
    // The same numbers on one thread, and after other inputs.
    let mut one = model.session(session_options(1)).unwrap();
    one.embed("something else first").unwrap().into_flat();
    assert_eq!(
        one.embed_tokens_with(&ids, &raw(Pooling::None))
            .unwrap()
            .into_flat(),
        rows
    );
    // Bidirectional: changing the last word changes the [CLS] row.
    let other = model.tokenizer().encode(
        b"Cafe au lait - naive cafe",
        gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
    );
    let cls_other = session
        .embed_tokens_with(&other, &raw(Pooling::Cls))
        .unwrap()
        .into_flat();
    assert_ne!(cls, cls_other);
}

#[test]
fn minilm_refuses_inputs_longer_than_its_context() {
    let Some(path) = minilm_gguf() else { return };
    let model = Model::load(&path).unwrap();
    let mut session = model.session(session_options(1)).unwrap();
    let long = "word ".repeat(600);
    let err = session.embed(&long).unwrap_err();
    assert!(
        matches!(&err, ModelError::Request(m) if m.contains("602 tokens") && m.contains("512")),
        "{err}"
    );
    // Next-token logits are not what an encoder computes.
    let err = session.eval(&[101, 102]).unwrap_err();
    assert!(err.to_string().contains("encoder"), "{err}");
    // Rank pooling is refused before anything runs.
    let rank = EmbeddingOptions {
        pooling: Some(Pooling::Rank),
        ..EmbeddingOptions::default()
    };
    assert!(session.embed_with("hello", &rank).is_err());
}
