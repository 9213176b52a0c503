//! `gguf_convert::export`: GGUF models back to Hugging Face checkpoints.
//!
//! The tiny fixtures (`fixtures/model-*.gguf`) are rewritten with F32 tensors of known values
//! and exported as F32, so names, shapes, the inverse Q/K permutation and the Gemma norm
//! offsets are checked exactly, against the converter's permutation written here as numpy
//! does it. The tokenizer files are parsed back (with `gguf_tokenizer`'s `tokenizer.json`
//! reader and Python's view of the safetensors format, the `safetensors` crate) and must
//! encode like the GGUF's own tokenizer. The real SmolLM2 model (skipped when not cached,
//! required with `GGUF_REQUIRE_MODELS=1`) checks `config.json` and the tokenizer at scale.

use std::collections::HashMap;

use gguf_convert::export::{Export, ExportDtype, ExportOptions, Transform};
use gguf_format::{GgmlType, GgufBuilder, GgufFile, TensorSpec};
use gguf_test_support::{fixture_bytes, real_model};
use gguf_tokenizer::Tokenizer;
use serde_json::Value;

/// The value of element `i` of the tensor at position `t` of the file: distinct, exact in f32.
fn known(t: usize, i: usize) -> f32 {
    (t * 10_000 + i) as f32 * 0.25
}

/// The fixture `name` with every tensor F32 and element `i` of tensor `t` `known(t, i)`.
fn f32_copy(name: &str) -> Vec<u8> {
    let bytes = fixture_bytes(name);
    let file = GgufFile::parse(&bytes).unwrap();
    let mut b = GgufBuilder::from_file(&file);
    let specs: Vec<TensorSpec> = b
        .tensors()
        .iter()
        .map(|s| TensorSpec::new(s.name(), GgmlType::F32, s.shape()).unwrap())
        .collect();
    *b.tensors_mut() = specs;
    let counts: Vec<usize> = b
        .tensors()
        .iter()
        .map(|s| s.shape().iter().product::<u64>() as usize)
        .collect();
    let mut out = Vec::new();
    let mut w = b.write(&mut out).unwrap();
    for (t, n) in counts.iter().enumerate() {
        let data: Vec<u8> = (0..*n).flat_map(|i| known(t, i).to_le_bytes()).collect();
        w.write_tensor(&data).unwrap();
    }
    w.finish().unwrap();
    out
}

fn f32_options() -> ExportOptions {
    ExportOptions {
        dtype: Some(ExportDtype::F32),
    }
}

/// The exported tensors by Hugging Face name: (shape, values) — F32 exports only.
fn exported(export: &Export) -> HashMap<String, (Vec<usize>, Vec<f32>)> {
    assert_eq!(export.dtype(), ExportDtype::F32);
    export
        .tensors()
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let bytes = export.tensor_bytes(i).unwrap();
            let values = bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect();
            (t.name.clone(), (t.shape.clone(), values))
        })
        .collect()
}

/// The GGUF tensor `name`'s values and shape (ggml order), for an F32 file.
fn gguf_values(file: &GgufFile, name: &str) -> (Vec<u64>, Vec<f32>) {
    let info = file.tensor(name).unwrap();
    let values = file
        .tensor_data(info)
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    (info.shape().to_vec(), values)
}

/// `convert_hf_to_gguf.py`'s `LlamaModel.permute` on a row-major `[rows, cols]` matrix (or a
/// vector, `cols` = 1): `w.reshape(n_head, 2, rows // n_head // 2, cols).swapaxes(1, 2)`.
fn permute(w: &[f32], rows: usize, cols: usize, n_head: usize) -> Vec<f32> {
    let half = rows / n_head / 2;
    let mut out = vec![0.0; w.len()];
    for h in 0..n_head {
        for j in 0..2 {
            for i in 0..half {
                let src = h * 2 * half + j * half + i;
                let dst = h * 2 * half + i * 2 + j;
                out[dst * cols..(dst + 1) * cols].copy_from_slice(&w[src * cols..(src + 1) * cols]);
            }
        }
    }
    out
}

/// Texts for the tokenizer comparisons.
const TEXTS: &[&str] = &[
    "Hello world",
    "Hello, world! How are you?",
    "  leading spaces and trailing   ",
    "multiple    spaces\n\n\nand newlines\n",
    "café naïve résumé Ångström",
    "日本語のテキスト 中文 한국어",
    "emoji 🚀🦙😶\u{200d}🌫️ ✅",
    "def f(x):\n    return x ** 2  # comment\n",
    "numbers 3 33 333 3333 1234567 3.14",
    "<|im_start|>user\nhi<|im_end|>\n",
    "<start_of_turn>user\nHello<end_of_turn>\n",
    "tabs\tand\t\ttabs",
    "I've been 'told he's there, 'RE you sure?",
    " ",
    "",
    "Ζωή και Привет мир",
];

/// The export's tokenizer.json, read by `gguf_tokenizer`, encodes every text as the GGUF's
/// tokenizer does (with and without special tokens).
fn assert_same_tokenizer(file: &GgufFile, export: &Export) {
    let ours = Tokenizer::from_gguf(file).unwrap();
    let json = std::str::from_utf8(export.file_bytes("tokenizer.json").unwrap()).unwrap();
    let hf = Tokenizer::from_huggingface_json(json).unwrap();
    for text in TEXTS {
        for add_special in [true, false] {
            assert_eq!(
                hf.encode(
                    text.as_bytes(),
                    gguf_tokenizer::EncodeOptions {
                        add_special,
                        parse_special: true
                    }
                ),
                ours.encode(
                    text.as_bytes(),
                    gguf_tokenizer::EncodeOptions {
                        add_special,
                        parse_special: true
                    }
                ),
                "{text:?} (add_special {add_special})"
            );
        }
    }
}

fn json_file(export: &Export, name: &str) -> Value {
    serde_json::from_slice(export.file_bytes(name).unwrap()).unwrap()
}

#[test]
fn llama_names_shapes_and_inverse_permutation() {
    let bytes = f32_copy("model-llama.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &f32_options()).unwrap();
    assert_eq!(export.hf_architecture(), "LlamaForCausalLM");
    let t = exported(&export);
    let mut names: Vec<&str> = t.keys().map(String::as_str).collect();
    names.sort_unstable();
    let mut want = vec![
        "lm_head.weight",
        "model.embed_tokens.weight",
        "model.norm.weight",
    ];
    let per_layer = [
        "input_layernorm.weight",
        "mlp.down_proj.weight",
        "mlp.gate_proj.weight",
        "mlp.up_proj.weight",
        "post_attention_layernorm.weight",
        "self_attn.k_proj.weight",
        "self_attn.o_proj.weight",
        "self_attn.q_proj.weight",
        "self_attn.v_proj.weight",
    ];
    let layer_names: Vec<String> = (0..2)
        .flat_map(|l| {
            per_layer
                .iter()
                .map(move |p| format!("model.layers.{l}.{p}"))
        })
        .collect();
    want.extend(layer_names.iter().map(String::as_str));
    want.sort_unstable();
    assert_eq!(names, want);

    // Shapes are GGUF's reversed; untouched tensors are the GGUF values as they are.
    let (shape, embd) = &t["model.embed_tokens.weight"];
    assert_eq!(shape, &[356, 64]);
    assert_eq!(embd, &gguf_values(&file, "token_embd.weight").1);
    assert_eq!(t["model.layers.1.mlp.down_proj.weight"].0, [64, 128]);
    assert_eq!(t["model.layers.0.mlp.gate_proj.weight"].0, [128, 64]);
    let (_, v) = gguf_values(&file, "blk.0.attn_v.weight");
    assert_eq!(t["model.layers.0.self_attn.v_proj.weight"].1, v);

    // Q (4 heads) and K (2 KV heads): the converter's permutation of the export gives the
    // GGUF tensor back, and the export is not the GGUF tensor itself.
    for (layer, gguf, hf, rows, heads) in [
        (0, "attn_q", "q_proj", 64, 4),
        (1, "attn_k", "k_proj", 32, 2),
    ] {
        let (shape, values) = &t[&format!("model.layers.{layer}.self_attn.{hf}.weight")];
        assert_eq!(shape, &[rows, 64]);
        let (_, original) = gguf_values(&file, &format!("blk.{layer}.{gguf}.weight"));
        assert_ne!(values, &original);
        assert_eq!(permute(values, rows, 64, heads), original);
    }
    // Row 1 of head 0 of HF's Q is the GGUF's row 2 (the second of the interleaved pairs).
    let (_, original) = gguf_values(&file, "blk.0.attn_q.weight");
    let q = &t["model.layers.0.self_attn.q_proj.weight"].1;
    assert_eq!(q[64..128], original[2 * 64..3 * 64]);
    assert_eq!(q[8 * 64..9 * 64], original[64..128]);

    let kinds: Vec<Transform> = export
        .tensors()
        .iter()
        .filter(|t| t.source.starts_with("blk.0."))
        .map(|t| t.transform)
        .collect();
    assert!(kinds.contains(&Transform::UnpermuteRope { n_head: 4 }));
    assert!(kinds.contains(&Transform::UnpermuteRope { n_head: 2 }));

    let c = export.config();
    assert_eq!(c["architectures"][0], "LlamaForCausalLM");
    assert_eq!(c["num_attention_heads"], 4);
    assert_eq!(c["num_key_value_heads"], 2);
    assert_eq!(c["hidden_size"], 64);
    assert_eq!(c["intermediate_size"], 128);
    assert_eq!(c["vocab_size"], 356);
    assert_eq!(c["tie_word_embeddings"], false);
    assert_eq!(c["rms_norm_eps"], 1e-5);
    assert_eq!(c["rope_theta"], 10000.0);
    assert_eq!(c["torch_dtype"], "float32");
    assert!(c.get("head_dim").is_none());
    assert!(export
        .warnings()
        .iter()
        .any(|w| w.contains("sliding_window")));
}

#[test]
fn mistral_is_unpermuted_and_keeps_its_window() {
    let bytes = f32_copy("model-mistral.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &f32_options()).unwrap();
    let t = exported(&export);
    let (_, original) = gguf_values(&file, "blk.1.attn_k.weight");
    assert_eq!(
        permute(&t["model.layers.1.self_attn.k_proj.weight"].1, 32, 64, 2),
        original
    );
    let c = export.config();
    assert_eq!(c["model_type"], "mistral");
    assert_eq!(c["sliding_window"], 8);
    // No output.weight: tied, no lm_head.
    assert_eq!(c["tie_word_embeddings"], true);
    assert!(!t.contains_key("lm_head.weight"));
}

/// Mixtral (`llama` with experts) exports as `MixtralForCausalLM`: each stacked expert tensor
/// becomes one matrix per expert (`block_sparse_moe.experts.E.w1/w2/w3`, the rows of expert E),
/// the router `block_sparse_moe.gate`, and the expert counts go to `config.json`.
#[test]
fn mixtral_unstacks_its_experts() {
    let bytes = f32_copy("model-mixtral.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &f32_options()).unwrap();
    let t = exported(&export);
    let c = export.config();
    assert_eq!(c["architectures"][0], "MixtralForCausalLM");
    assert_eq!(c["model_type"], "mixtral");
    assert_eq!(
        (
            c["num_local_experts"].as_u64(),
            c["num_experts_per_tok"].as_u64()
        ),
        (Some(6), Some(2))
    );
    for (gguf, w) in [
        ("ffn_gate_exps", "w1"),
        ("ffn_down_exps", "w2"),
        ("ffn_up_exps", "w3"),
    ] {
        let (shape, all) = gguf_values(&file, &format!("blk.1.{gguf}.weight"));
        let (cols, rows, n) = (shape[0] as usize, shape[1] as usize, shape[2] as usize);
        assert_eq!(n, 6);
        for e in 0..n {
            let (hf_shape, values) =
                &t[&format!("model.layers.1.block_sparse_moe.experts.{e}.{w}.weight")];
            assert_eq!(hf_shape, &[rows, cols]);
            assert_eq!(
                values,
                &all[e * rows * cols..(e + 1) * rows * cols],
                "expert {e} {w}"
            );
        }
        assert!(!t.contains_key(&format!(
            "model.layers.1.block_sparse_moe.experts.6.{w}.weight"
        )));
    }
    let (_, router) = gguf_values(&file, "blk.0.ffn_gate_inp.weight");
    assert_eq!(
        t["model.layers.0.block_sparse_moe.gate.weight"],
        (vec![6, 64], router)
    );
    // Q and K are unpermuted as for llama.
    let (_, original) = gguf_values(&file, "blk.1.attn_q.weight");
    assert_eq!(
        permute(&t["model.layers.1.self_attn.q_proj.weight"].1, 64, 64, 4),
        original
    );
}

#[test]
fn qwen2_biases_are_copied_and_not_permuted() {
    let bytes = f32_copy("model-qwen2.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &f32_options()).unwrap();
    let t = exported(&export);
    for (gguf, hf) in [
        ("attn_q", "q_proj"),
        ("attn_k", "k_proj"),
        ("attn_v", "v_proj"),
    ] {
        for suffix in ["weight", "bias"] {
            let (_, v) = gguf_values(&file, &format!("blk.1.{gguf}.{suffix}"));
            assert_eq!(t[&format!("model.layers.1.self_attn.{hf}.{suffix}")].1, v);
        }
    }
    assert_eq!(t["model.layers.0.self_attn.k_proj.bias"].0, [32]);
    assert!(export
        .tensors()
        .iter()
        .all(|t| t.transform == Transform::Copy));
    let c = export.config();
    assert_eq!(c["architectures"][0], "Qwen2ForCausalLM");
    assert_eq!(c["tie_word_embeddings"], true);
    assert_eq!(c["bos_token_id"], 386);
    assert_eq!(c["pad_token_id"], 386);
    assert_eq!(c["rope_theta"], 1e6);
    assert_same_tokenizer(&file, &export);
    let tj = json_file(&export, "tokenizer.json");
    assert_eq!(tj["normalizer"]["type"], "NFC");
    assert_eq!(tj["model"]["merges"][0], serde_json::json!(["Ġ", "t"]));
    assert_eq!(tj["model"]["merges"].as_array().unwrap().len(), 130);
    assert!(export.file_bytes("tokenizer.model").is_none());
}

#[test]
fn gemma3_norms_lose_the_converters_one() {
    let bytes = f32_copy("model-gemma3.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &f32_options()).unwrap();
    let t = exported(&export);
    let norms = [
        ("output_norm.weight", "model.norm.weight".to_string()),
        (
            "blk.1.attn_norm.weight",
            "model.layers.1.input_layernorm.weight".into(),
        ),
        (
            "blk.1.attn_q_norm.weight",
            "model.layers.1.self_attn.q_norm.weight".into(),
        ),
        (
            "blk.1.attn_k_norm.weight",
            "model.layers.1.self_attn.k_norm.weight".into(),
        ),
        (
            "blk.0.post_attention_norm.weight",
            "model.layers.0.post_attention_layernorm.weight".into(),
        ),
        (
            "blk.0.ffn_norm.weight",
            "model.layers.0.pre_feedforward_layernorm.weight".into(),
        ),
        (
            "blk.0.post_ffw_norm.weight",
            "model.layers.0.post_feedforward_layernorm.weight".into(),
        ),
    ];
    for (gguf, hf) in &norms {
        let (shape, v) = gguf_values(&file, gguf);
        let (hf_shape, got) = &t[hf];
        assert_eq!(hf_shape, &[shape[0] as usize], "{hf}");
        let want: Vec<f32> = v.iter().map(|x| x - 1.0).collect();
        assert_eq!(got, &want, "{hf}");
    }
    // Matrices are untouched (Gemma's rope needs no permutation).
    let (_, q) = gguf_values(&file, "blk.0.attn_q.weight");
    assert_eq!(t["model.layers.0.self_attn.q_proj.weight"].1, q);
    assert_eq!(t.len(), 28);

    let c = export.config();
    assert_eq!(c["architectures"][0], "Gemma3ForCausalLM");
    assert_eq!(c["model_type"], "gemma3_text");
    assert_eq!(c["head_dim"], 32);
    assert_eq!(c["query_pre_attn_scalar"], 32);
    assert_eq!(c["sliding_window"], 8);
    assert_eq!(
        c["layer_types"],
        serde_json::json!(["full_attention", "sliding_attention"])
    );
    assert_eq!(c["rope_local_base_freq"], 10000.0);
    assert_eq!(c["rope_theta"], 1e6);
    assert_eq!(c["tie_word_embeddings"], true);
    assert_same_tokenizer(&file, &export);
}

#[test]
fn gemma2_config_has_softcaps_and_alternating_windows() {
    let bytes = fixture_bytes("model-gemma2.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &ExportOptions::default()).unwrap();
    // A quantized file without general.file_type: F16.
    assert_eq!(export.dtype(), ExportDtype::F16);
    let c = export.config();
    assert_eq!(c["attn_logit_softcapping"], 4.0);
    assert_eq!(c["final_logit_softcapping"], 10.0);
    assert_eq!(c["sliding_window_pattern"], 2);
    assert_eq!(
        c["layer_types"],
        serde_json::json!(["sliding_attention", "full_attention"])
    );
    assert!(export
        .tensors()
        .iter()
        .filter(|t| t.name.ends_with("norm.weight"))
        .all(|t| t.transform == Transform::SubtractOne));
    assert_same_tokenizer(&file, &export);
}

#[test]
fn phi3_keeps_its_fused_tensors_and_longrope() {
    let bytes = f32_copy("model-phi3.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &f32_options()).unwrap();
    let t = exported(&export);
    let (_, qkv) = gguf_values(&file, "blk.0.attn_qkv.weight");
    assert_eq!(
        t["model.layers.0.self_attn.qkv_proj.weight"],
        (vec![128, 64], qkv)
    );
    let (_, up) = gguf_values(&file, "blk.1.ffn_up.weight");
    assert_eq!(
        t["model.layers.1.mlp.gate_up_proj.weight"],
        (vec![256, 64], up)
    );
    assert!(!t.keys().any(|n| n.contains("rope_factors")));
    let c = export.config();
    assert_eq!(c["partial_rotary_factor"], 0.75);
    assert_eq!(c["original_max_position_embeddings"], 256);
    assert_eq!(c["pad_token_id"], Value::Null);
    let (_, long) = gguf_values(&file, "rope_factors_long.weight");
    let want: Vec<Value> = long
        .iter()
        .map(|&x| serde_json::json!(f64::from(x)))
        .collect();
    assert_eq!(c["rope_scaling"]["rope_type"], "longrope");
    assert_eq!(c["rope_scaling"]["long_factor"], Value::Array(want));
    assert_same_tokenizer(&file, &export);
}

#[test]
fn every_fixture_writes_a_readable_checkpoint() {
    for name in [
        "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "mixtral",
        "qwen2moe", "qwen3moe", "olmoe",
    ] {
        let bytes = fixture_bytes(&format!("model-{name}.gguf"));
        let file = GgufFile::parse(&bytes).unwrap();
        let export = Export::plan(&file, &ExportOptions::default()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("hf");
        let mut calls = 0;
        let report = export
            .write(&out, false, &[], &mut |done, total| {
                calls += 1;
                assert!(done <= total);
            })
            .unwrap();
        assert_eq!(calls, export.tensors().len(), "{name}");
        assert!(report.files.iter().all(|f| f.exists()));
        let st = std::fs::read(out.join("model.safetensors")).unwrap();
        let tensors = safetensors::SafeTensors::deserialize(&st).unwrap();
        assert_eq!(tensors.len(), export.tensors().len(), "{name}");
        for (i, t) in export.tensors().iter().enumerate() {
            let view = tensors.tensor(&t.name).unwrap();
            assert_eq!(view.shape(), t.shape.as_slice(), "{name} {}", t.name);
            assert_eq!(view.dtype(), safetensors::Dtype::F16);
            assert_eq!(view.data(), export.tensor_bytes(i).unwrap().as_slice());
        }
        for f in ["config.json", "tokenizer.json", "tokenizer_config.json"] {
            let _: Value = serde_json::from_slice(&std::fs::read(out.join(f)).unwrap()).unwrap();
        }
        // SentencePiece vocabularies get a tokenizer.model.
        let spm = file.value("tokenizer.ggml.model").unwrap().as_str() == Some("llama");
        assert_eq!(out.join("tokenizer.model").exists(), spm, "{name}");
        assert_same_tokenizer(&file, &export);
    }
}

#[test]
fn quantized_values_round_to_the_dtype() {
    let bytes = fixture_bytes("model-llama.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    for dtype in [ExportDtype::F16, ExportDtype::Bf16] {
        let export = Export::plan(&file, &ExportOptions { dtype: Some(dtype) }).unwrap();
        let i = export
            .tensors()
            .iter()
            .position(|t| t.source == "blk.0.ffn_up.weight")
            .unwrap();
        let info = file.tensor("blk.0.ffn_up.weight").unwrap();
        let values =
            gguf_quant::dequantize(info.ggml_type, file.tensor_data(info), 64 * 128).unwrap();
        let want: Vec<u8> = values
            .iter()
            .flat_map(|&v| match dtype {
                ExportDtype::F16 => half::f16::from_f32(v).to_le_bytes(),
                _ => half::bf16::from_f32(v).to_le_bytes(),
            })
            .collect();
        assert_eq!(export.tensor_bytes(i).unwrap(), want);
    }
}

#[test]
fn refusals_are_errors_not_panics() {
    // Another architecture.
    let bytes = fixture_bytes("model-phi2.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let e = Export::plan(&file, &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("'phi2'") && e.contains("gemma3"), "{e}");

    // A tokenizer model without an exporter, a pre-tokenizer without a pipeline.
    let base = fixture_bytes("model-qwen2.gguf");
    let base_file = GgufFile::parse(&base).unwrap();
    for (key, value, needle) in [
        ("tokenizer.ggml.model", "t5", "'t5'"),
        ("tokenizer.ggml.pre", "chameleon", "'chameleon'"),
    ] {
        let mut b = GgufBuilder::from_file(&base_file);
        b.set(key, value);
        let mut out = Vec::new();
        b.write_from(&base_file, &mut out, &mut |_, _| {}).unwrap();
        let file = GgufFile::parse(&out).unwrap();
        let e = Export::plan(&file, &ExportOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains(needle), "{e}");
    }

    // A tensor the architecture does not have: Phi-3's fused QKV in a `llama` file.
    let phi3 = fixture_bytes("model-phi3.gguf");
    let phi3_file = GgufFile::parse(&phi3).unwrap();
    let mut b = GgufBuilder::from_file(&phi3_file);
    b.set("general.architecture", "llama");
    for kv in phi3_file.metadata() {
        if let Some(suffix) = kv.key.strip_prefix("phi3.") {
            b.set_value(&format!("llama.{suffix}"), kv.value);
        }
    }
    let mut out = Vec::new();
    b.write_from(&phi3_file, &mut out, &mut |_, _| {}).unwrap();
    let file = GgufFile::parse(&out).unwrap();
    let e = Export::plan(&file, &ExportOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("blk.0.attn_qkv.weight") && e.contains("LlamaForCausalLM"),
        "{e}"
    );

    // The output directory: not empty without --force, a file.
    let bytes = fixture_bytes("model-qwen3.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &ExportOptions::default()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "x").unwrap();
    let e = export
        .write(dir.path(), false, &[], &mut |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("not empty") && e.contains("--force"), "{e}");
    assert_eq!(gguf_test_support::listing(dir.path()), ["notes.txt"]);
    export.write(dir.path(), true, &[], &mut |_, _| {}).unwrap();
    export.write(dir.path(), true, &[], &mut |_, _| {}).unwrap();
    assert!(dir.path().join("model.safetensors").exists());
    let file_path = dir.path().join("notes.txt");
    let e = export
        .write(&file_path, true, &[], &mut |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a directory"), "{e}");
    // An empty directory is fine without --force.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    export.write(&empty, false, &[], &mut |_, _| {}).unwrap();
}

/// `model.safetensors` is, byte for byte, what safetensors' own serializer makes of the same
/// tensors (the export streams it to its temporary file, one tensor at a time, instead).
#[test]
fn model_safetensors_is_what_the_safetensors_serializer_writes() {
    for (name, dtype) in [("qwen3", ExportDtype::Bf16), ("gemma", ExportDtype::F32)] {
        let bytes = fixture_bytes(&format!("model-{name}.gguf"));
        let file = GgufFile::parse(&bytes).unwrap();
        let export = Export::plan(&file, &ExportOptions { dtype: Some(dtype) }).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let report = export
            .write(dir.path(), false, &[], &mut |_, _| {})
            .unwrap();
        let ours = std::fs::read(dir.path().join("model.safetensors")).unwrap();
        assert_eq!(report.safetensors_bytes, ours.len() as u64, "{name}");
        let data: Vec<Vec<u8>> = (0..export.tensors().len())
            .map(|i| export.tensor_bytes(i).unwrap())
            .collect();
        let st_dtype = match dtype {
            ExportDtype::F32 => safetensors::Dtype::F32,
            ExportDtype::F16 => safetensors::Dtype::F16,
            ExportDtype::Bf16 => safetensors::Dtype::BF16,
        };
        let views: Vec<(String, safetensors::tensor::TensorView<'_>)> = export
            .tensors()
            .iter()
            .zip(&data)
            .map(|(t, d)| {
                let view = safetensors::tensor::TensorView::new(st_dtype, t.shape.clone(), d);
                (t.name.clone(), view.unwrap())
            })
            .collect();
        let metadata = HashMap::from([("format".to_string(), "pt".to_string())]);
        let theirs = safetensors::serialize(views, Some(metadata)).unwrap();
        assert!(ours == theirs, "{name}: the bytes differ");
    }
}

/// The file an export is made from is refused as any of its outputs, by any name, before
/// anything is written; another file of the same bytes is not the input.
#[cfg(unix)]
#[test]
fn an_export_refuses_to_write_over_its_input() {
    let bytes = fixture_bytes("model-qwen3.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let export = Export::plan(&file, &ExportOptions::default()).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("m.gguf");
    std::fs::write(&input, &bytes).unwrap();
    for (name, hard) in [("model.safetensors", true), ("tokenizer.json", false)] {
        let dir = tmp.path().join(format!("hf-{name}"));
        std::fs::create_dir(&dir).unwrap();
        let out = dir.join(name);
        if hard {
            std::fs::hard_link(&input, &out).unwrap();
        } else {
            std::os::unix::fs::symlink(&input, &out).unwrap();
        }
        let e = export
            .write(&dir, true, &[&input], &mut |_, _| {})
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            format!(
                "{} is an input of this command; refusing to write over it",
                out.display()
            )
        );
        assert_eq!(gguf_test_support::listing(&dir), [name]);
        assert_eq!(std::fs::read(&input).unwrap(), bytes);
        // A copy is another file.
        std::fs::remove_file(&out).unwrap();
        std::fs::write(&out, &bytes).unwrap();
        export.write(&dir, true, &[&input], &mut |_, _| {}).unwrap();
        assert_ne!(std::fs::read(&out).unwrap(), bytes);
    }
}

/// SmolLM2 135M (llama, Q4_1/Q8_0, GPT-2 BPE with the `smollm` pre-tokenizer).
#[test]
fn smollm2_exports_its_config_and_tokenizer() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let mapped = GgufFile::open(&path).unwrap();
    let file = mapped.file();
    let export = Export::plan(file, &ExportOptions::default()).unwrap();
    assert!(export.warnings().is_empty(), "{:?}", export.warnings());
    assert_eq!(export.dtype(), ExportDtype::F16);
    let c = export.config();
    for (key, want) in [
        ("hidden_size", Value::from(576)),
        ("intermediate_size", Value::from(1536)),
        ("num_hidden_layers", Value::from(30)),
        ("num_attention_heads", Value::from(9)),
        ("num_key_value_heads", Value::from(3)),
        ("max_position_embeddings", Value::from(8192)),
        ("vocab_size", Value::from(49152)),
        ("rope_theta", Value::from(100000.0)),
        ("rms_norm_eps", Value::from(1e-5)),
        ("bos_token_id", Value::from(1)),
        ("eos_token_id", Value::from(2)),
        ("pad_token_id", Value::from(2)),
        ("tie_word_embeddings", Value::from(true)),
        ("model_type", Value::from("llama")),
    ] {
        assert_eq!(c[key], want, "{key}");
    }
    assert_eq!(export.tensors().len(), 272);
    assert!(!export.tensors().iter().any(|t| t.name == "lm_head.weight"));

    let tc = json_file(&export, "tokenizer_config.json");
    assert_eq!(tc["bos_token"], "<|im_start|>");
    assert_eq!(tc["eos_token"], "<|im_end|>");
    assert_eq!(tc["unk_token"], "<|endoftext|>");
    assert_eq!(tc["add_bos_token"], false);
    assert_eq!(
        tc["chat_template"].as_str(),
        file.value("tokenizer.chat_template").unwrap().as_str()
    );
    assert_eq!(tc["added_tokens_decoder"]["2"]["content"], "<|im_end|>");
    let tj = json_file(&export, "tokenizer.json");
    assert_eq!(tj["model"]["vocab"].as_object().unwrap().len(), 49152);
    assert_eq!(tj["model"]["merges"].as_array().unwrap().len(), 48900);
    assert_eq!(tj["pre_tokenizer"]["pretokenizers"][0]["type"], "Digits");
    assert_same_tokenizer(file, &export);

    // Converted back (vocabulary only), the tokenizer is recognised as `smollm` by llama.cpp's
    // hash of its tokens, and every tokenizer key comes back as it was.
    use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions};
    let dir = tempfile::tempdir().unwrap();
    export
        .write(dir.path(), false, &[], &mut |_, _| {})
        .unwrap();
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let options = HfOptions {
        vocab_only: true,
        ..HfOptions::default()
    };
    let back = HfConversion::plan(&ckpt, &options)
        .unwrap()
        .write(Vec::new(), &mut |_, _| {})
        .unwrap();
    let back = GgufFile::parse(&back).unwrap();
    for kv in file.metadata() {
        if kv.key.starts_with("tokenizer.") {
            assert_eq!(back.value(kv.key), Some(kv.value), "{}", kv.key);
        }
    }
    assert_eq!(
        back.value("tokenizer.ggml.pre").and_then(|v| v.as_str()),
        Some("smollm")
    );
}

/// The real Gemma 3 (SentencePiece vocabulary of 262,144 pieces) when cached: its
/// tokenizer.json, merges made from the scores, encodes like the GGUF's tokenizer.
#[test]
fn gemma3_tokenizer_json_encodes_like_the_gguf() {
    let Some(path) = real_model("gemma3-270m") else {
        return;
    };
    let mapped = GgufFile::open(&path).unwrap();
    let file = mapped.file();
    let export = Export::plan(file, &ExportOptions::default()).unwrap();
    let c = export.config();
    assert_eq!(c["sliding_window"], 512);
    assert_eq!(c["layer_types"][5], "full_attention");
    assert_eq!(c["layer_types"][4], "sliding_attention");
    assert!(c.get("rope_local_base_freq").is_none());
    let tc = json_file(&export, "tokenizer_config.json");
    assert_eq!(tc["add_bos_token"], true);
    assert_eq!(
        tc["added_tokens_decoder"]["106"]["content"],
        "<end_of_turn>"
    );
    assert_eq!(tc["added_tokens_decoder"]["138"]["content"], "  ");
    assert_eq!(tc["added_tokens_decoder"]["138"]["special"], false);
    assert!(export.file_bytes("tokenizer.model").is_some());
    assert_same_tokenizer(file, &export);
}

/// Metadata keys a reconversion writes differently from the fixture, for reasons outside the
/// export: the converters' own choices (Gemma writes `add_space_prefix` and no vocabulary
/// size or RoPE base, CodeGemma's EOT id, Phi-3's attention factor from f64), AutoConfig's
/// `head_dim` default (key/value lengths), and what the reference converter never writes
/// (`llama`'s ignored sliding window, Gemma 3's pattern array).
fn reconversion_may_differ(arch: &str, key: &str) -> bool {
    let suffix = key.strip_prefix(&format!("{arch}.")).unwrap_or(key);
    key.starts_with("general.")
        || matches!(
            suffix,
            "attention.key_length"
                | "attention.value_length"
                | "vocab_size"
                | "rope.freq_base"
                | "attention.sliding_window"
                | "attention.sliding_window_pattern"
                | "rope.scaling.attn_factor"
        )
        || (arch.starts_with("gemma")
            && matches!(
                key,
                "tokenizer.ggml.add_space_prefix" | "tokenizer.ggml.eot_token_id"
            ))
}

/// Every fixture exported as F32 and converted back by this crate's Hugging Face converter
/// (which writes what llama.cpp's convert_hf_to_gguf.py writes): the same tokenizer metadata
/// and hyperparameters, the same tensor table and the same values (F32 holds the dequantized
/// values exactly).
#[test]
fn fixtures_survive_export_and_reconversion() {
    use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions, OutType};
    for name in [
        "llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3", "phi3", "mixtral",
        "qwen2moe", "qwen3moe", "olmoe",
    ] {
        let bytes = fixture_bytes(&format!("model-{name}.gguf"));
        let file = GgufFile::parse(&bytes).unwrap();
        let export = Export::plan(&file, &f32_options()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        export
            .write(dir.path(), false, &[], &mut |_, _| {})
            .unwrap();
        let ckpt = Checkpoint::open(dir.path()).unwrap();
        // The fixtures' tiny vocabularies are not in llama.cpp's table of tokenizer hashes.
        let pre = file
            .value("tokenizer.ggml.pre")
            .and_then(|v| v.as_str())
            .map(String::from);
        let options = HfOptions {
            outtype: OutType::F32,
            vocab_only: false,
            pre_tokenizer: pre,
        };
        let plan = HfConversion::plan(&ckpt, &options).unwrap();
        let back = plan.write(Vec::new(), &mut |_, _| {}).unwrap();
        let back = GgufFile::parse(&back).unwrap();

        // llama.cpp has no `mistral` conversion: it comes back as `llama`.
        let arch = file.architecture().unwrap();
        let back_arch = back.architecture().unwrap();
        assert_eq!(back_arch, if arch == "mistral" { "llama" } else { arch });
        for kv in file.metadata() {
            let key = kv.key.replacen(arch, back_arch, 1);
            if reconversion_may_differ(arch, kv.key) {
                continue;
            }
            // Phi-3's converter makes every added token a -1000 control token: the fixture's
            // `<unk>` (unknown, score 0) and `<s>`, `</s>` (score 0) come back so.
            if arch == "phi3"
                && matches!(
                    kv.key,
                    "tokenizer.ggml.scores" | "tokenizer.ggml.token_type"
                )
            {
                continue;
            }
            assert_eq!(back.value(&key), Some(kv.value), "{name}: {key}");
        }
        for key in [
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id",
            "tokenizer.ggml.model",
            "tokenizer.ggml.pre",
        ] {
            assert!(back.value(key).is_some(), "{name}: {key}");
        }
        // Nothing new but the keys above may differ by.
        for kv in back.metadata() {
            let key = kv.key.replacen(back_arch, arch, 1);
            if !reconversion_may_differ(arch, &key) {
                assert!(file.value(&key).is_some(), "{name}: {} is new", kv.key);
            }
        }

        let names = |f: &GgufFile| {
            let mut v: Vec<String> = f.tensors().iter().map(|t| t.name.to_string()).collect();
            v.sort();
            v
        };
        assert_eq!(names(&back), names(&file), "{name}");
        for info in file.tensors() {
            let b = back.tensor(info.name).unwrap();
            assert_eq!(b.shape(), info.shape(), "{name} {}", info.name);
            let n = info.element_count() as usize;
            let want = gguf_quant::dequantize(info.ggml_type, file.tensor_data(info), n).unwrap();
            let got = gguf_quant::dequantize(b.ggml_type, back.tensor_data(b), n).unwrap();
            // Bit for bit: -0.0 stays -0.0.
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{name} {}", info.name);
        }
    }
}

/// all-MiniLM-L6-v2 (BERT, when cached): converted to an F32 GGUF by this crate and exported
/// again, every tensor equals the checkpoint's (the pooler aside, which the converter drops),
/// the tokenizer.json tokenizes as the original one does, and a reconversion writes the same
/// metadata and tensors as the conversion of the original.
#[test]
fn minilm_comes_back_as_it_was() {
    use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions, OutType};
    let Some(original_dir) = gguf_test_support::hf_checkpoint("all-MiniLM-L6-v2") else {
        return;
    };
    let options = HfOptions {
        outtype: OutType::F32,
        ..HfOptions::default()
    };
    let to_gguf = |dir: &std::path::Path| {
        let ckpt = Checkpoint::open(dir).unwrap();
        let plan = HfConversion::plan(&ckpt, &options).unwrap();
        plan.write(Vec::new(), &mut |_, _| {}).unwrap()
    };
    let gguf = to_gguf(&original_dir);
    let file = GgufFile::parse(&gguf).unwrap();
    let export = Export::plan(&file, &ExportOptions::default()).unwrap();
    assert_eq!(export.dtype(), ExportDtype::F32);
    assert_eq!(export.hf_architecture(), "BertModel");
    let dir = tempfile::tempdir().unwrap();
    export
        .write(dir.path(), false, &[], &mut |_, _| {})
        .unwrap();

    let original = Checkpoint::open(&original_dir).unwrap();
    let exported = Checkpoint::open(dir.path()).unwrap();
    let mut compared = 0;
    for t in original.tensors() {
        let Some(e) = exported.tensor(t.name) else {
            assert!(
                t.name.starts_with("pooler.") || t.name.ends_with("position_ids"),
                "{}",
                t.name
            );
            continue;
        };
        assert_eq!(e.shape, t.shape, "{}", t.name);
        assert_eq!(e.to_f32().unwrap(), t.to_f32().unwrap(), "{}", t.name);
        compared += 1;
    }
    assert_eq!(compared, exported.len());
    assert_eq!(compared, 101);
    let c = export.config();
    for key in [
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "max_position_embeddings",
        "type_vocab_size",
        "vocab_size",
        "layer_norm_eps",
        "pad_token_id",
    ] {
        assert_eq!(c[key], original.config()[key], "{key}");
    }
    let pooling: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("1_Pooling/config.json")).unwrap())
            .unwrap();
    assert_eq!(pooling["pooling_mode_mean_tokens"], true);

    let ours = std::fs::read_to_string(dir.path().join("tokenizer.json")).unwrap();
    let theirs = std::fs::read_to_string(original_dir.join("tokenizer.json")).unwrap();
    let (ours, theirs) = (
        Tokenizer::from_huggingface_json(&ours).unwrap(),
        Tokenizer::from_huggingface_json(&theirs).unwrap(),
    );
    for text in TEXTS
        .iter()
        .chain(&["[CLS] a [SEP] b [MASK]", "##ing unaffable 한국어"])
    {
        for add_special in [true, false] {
            assert_eq!(
                ours.encode(
                    text.as_bytes(),
                    gguf_tokenizer::EncodeOptions {
                        add_special,
                        parse_special: true
                    }
                ),
                theirs.encode(
                    text.as_bytes(),
                    gguf_tokenizer::EncodeOptions {
                        add_special,
                        parse_special: true
                    }
                ),
                "{text:?}"
            );
        }
    }

    let back = to_gguf(dir.path());
    let back = GgufFile::parse(&back).unwrap();
    for kv in file.metadata() {
        if !kv.key.starts_with("general.") {
            assert_eq!(back.value(kv.key), Some(kv.value), "{}", kv.key);
        }
    }
    assert_eq!(
        back.metadata()
            .iter()
            .filter(|kv| !kv.key.starts_with("general."))
            .count(),
        file.metadata()
            .iter()
            .filter(|kv| !kv.key.starts_with("general."))
            .count()
    );
    for info in file.tensors() {
        let b = back.tensor(info.name).unwrap();
        let (x, y) = (back.tensor_data(b), file.tensor_data(info));
        let first = x.iter().zip(y).position(|(a, b)| a != b);
        assert!(
            x.len() == y.len() && first.is_none(),
            "{}: {} vs {} bytes, first difference at {first:?} ({:?} vs {:?})",
            info.name,
            x.len(),
            y.len(),
            first.map(|i| &x[i / 4 * 4..i / 4 * 4 + 4]),
            first.map(|i| &y[i / 4 * 4..i / 4 * 4 + 4]),
        );
    }
}

/// The proof, pinned: the real SmolLM2 and Gemma 3 exported (default F16), their
/// `tokenizer.json` encoding like the GGUF in Python's `tokenizers`, and converted back with `gguf_convert::hf` give the very bytes llama.cpp's
/// `convert_hf_to_gguf.py --outtype f16` writes for the same exported directories (llama.cpp
/// 0c1e57098, transformers 5.24; SmolLM2's GPT-2 vocabulary recognised as `smollm` by the
/// pre-tokenizer hash, Gemma 3 through its exported `tokenizer.model`).
#[test]
fn real_models_export_and_reconvert_to_llama_cpps_bytes() {
    use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions};
    use sha2::{Digest, Sha256};
    // The directory names are the reference run's: the model card's name comes from them.
    for (model, dir_name, digest) in [
        (
            "smollm2-135m",
            "exp-smol",
            "0fd05041ff37319c18d503cb95905b60586390259ce6265113d3ab1a0c660925",
        ),
        (
            "gemma3-270m",
            "exp-gemma3",
            "60701811e4e057d3c79048d1ead2a6029f92328706b6144931ba60c88e5c17f0",
        ),
    ] {
        let Some(path) = real_model(model) else {
            return;
        };
        let mapped = GgufFile::open(&path).unwrap();
        let export = Export::plan(mapped.file(), &ExportOptions::default()).unwrap();
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join(dir_name);
        export.write(&dir, false, &[], &mut |_, _| {}).unwrap();
        python_tokenizers_encode_like_the_gguf(mapped.file(), &dir.join("tokenizer.json"), model);
        let ckpt = Checkpoint::open(&dir).unwrap();
        let plan = HfConversion::plan(&ckpt, &HfOptions::default()).unwrap();
        let mut hasher = Sha256::new();
        plan.write(HashWriter(&mut hasher), &mut |_, _| {}).unwrap();
        let got: String = hasher
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(got, digest, "{model}");
    }
}

/// Hugging Face's own `tokenizers` (Python) loads the exported `tokenizer.json` and encodes
/// like the GGUF's tokenizer (special tokens added and parsed, as `tokenizer.encode` does).
/// Skipped without the package, except in CI (`GGUF_REQUIRE_MODELS=1`), which installs it.
fn python_tokenizers_encode_like_the_gguf(file: &GgufFile, json: &std::path::Path, model: &str) {
    let probe = std::process::Command::new("python3")
        .args(["-c", "import tokenizers"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        assert!(
            !gguf_test_support::required(),
            "python3 with the `tokenizers` package is needed (pip install tokenizers)"
        );
        eprintln!("skipping the tokenizers (Python) check: package not installed");
        return;
    }
    let script = "import json, sys\nfrom tokenizers import Tokenizer\n\
        tok = Tokenizer.from_file(sys.argv[1])\n\
        texts = json.load(sys.stdin)\n\
        print(json.dumps([tok.encode(t, add_special_tokens=True).ids for t in texts]))\n";
    let mut child = std::process::Command::new("python3")
        .args(["-c", script])
        .arg(json)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(serde_json::to_string(TEXTS).unwrap().as_bytes())
            .unwrap();
    }
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{model}: python tokenizers failed");
    let theirs: Vec<Vec<u32>> = serde_json::from_slice(&out.stdout).unwrap();
    let tok = Tokenizer::from_gguf(file).unwrap();
    for (text, ids) in TEXTS.iter().zip(theirs) {
        assert_eq!(
            tok.encode(
                text.as_bytes(),
                gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL
            ),
            ids,
            "{model}: {text:?}"
        );
    }
}

/// Hashes what is written, so a converted model need not be held in memory.
struct HashWriter<'a>(&'a mut sha2::Sha256);

impl std::io::Write for HashWriter<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        sha2::Digest::update(self.0, buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
