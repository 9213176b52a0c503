//! The tiny random-weight models of `fixtures/model-*.gguf` (written by `cargo xtask fixtures`)
//! against llama.cpp's logits for the same tokens (`tests/data/tiny/*.json`, made by
//! `tests/data/tiny/make_reference.sh`): every logit of every position, the argmax at every
//! position, and an 8-token greedy continuation.
//!
//! The references come from one batch of 20 tokens, one thread, llama.cpp's default context of
//! 512 (256 for Phi-3's second reference, whose RoPE factors depend on it; our sessions use each
//! reference's context), f16 KV cache, flash attention "auto", which resolves to enabled on the
//! CPU. llama.cpp has no `mistral` architecture; its reference is the same weights loaded as
//! `llama` with the sliding window emulated (see `tests/data/tiny/README.md`).

use std::path::PathBuf;

use gguf_format::{GgufBuilder, GgufFile};
use gguf_model::{argmax, KvType, Model, ModelError, SessionOptions, SUPPORTED};
use gguf_test_support::fixture;
use serde_json::Value;

/// Largest |ours - llama.cpp| accepted over all logits. The differences left are those of float
/// operations done in another order (llama.cpp's x86 build runs Q8_0 batches through llamafile's
/// sgemm, Q4_0 and Q4_K through repacked kernels, and compiles RoPE with contracted FMAs): a few
/// 1e-6 on logits of magnitude up to ~30. Where such a difference makes a quantized activation or its block scale round the
/// other way the logits move by 1e-2 or more, so this bound tells "every rounding went the same
/// way" from "one did not". The fixtures' seeds keep every such rounding at least 8 float ulps
/// from its boundary in llama.cpp's run (the references' `conditioning`, checked below).
const TOLERANCE: f32 = 1e-4;

/// Smallest distance (float ulps) from a rounding boundary a reference may have for quantized
/// activations and their block scales (see `reference_logits.c`).
const MIN_CONDITIONING_ULPS: f64 = 8.0;

struct Reference {
    tokens: Vec<u32>,
    greedy: Vec<u32>,
    /// Row-major: one row of `n_vocab` logits per token.
    logits: Vec<f32>,
    n_vocab: usize,
    json: Value,
}

fn reference(name: &str) -> Reference {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/tiny")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let json: Value = serde_json::from_str(&text).unwrap();
    let ids = |key: &str| -> Vec<u32> {
        json[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap() as u32)
            .collect()
    };
    let n_vocab = json["n_vocab"].as_u64().unwrap() as usize;
    let logits: Vec<f32> = json["logits"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|row| {
            let row = row.as_array().unwrap();
            assert_eq!(row.len(), n_vocab);
            row.iter()
                .map(|v| v.as_f64().unwrap() as f32)
                .collect::<Vec<_>>()
        })
        .collect();
    let r = Reference {
        tokens: ids("tokens"),
        greedy: ids("greedy"),
        logits,
        n_vocab,
        json,
    };
    assert_eq!(r.logits.len(), r.tokens.len() * n_vocab);
    assert_eq!(r.json["n_threads"], 1);
    assert_eq!(r.json["kv_cache_type"], "f16");
    assert_eq!(r.json["flash_attn"], "auto, resolved to enabled");
    r
}

/// Our logits for every position of the reference's tokens and our greedy continuation, in a
/// session of the reference's context length.
fn run(model: &Model, r: &Reference) -> (Vec<f32>, Vec<u32>) {
    let mut session = model
        .session(SessionOptions {
            threads: 1,
            n_ctx: r.json["n_ctx"].as_u64().unwrap() as usize,
            ..SessionOptions::default()
        })
        .unwrap();
    let logits = session.eval_all_logits(&r.tokens).unwrap();
    let mut greedy = Vec::new();
    let mut next = argmax(&logits[logits.len() - r.n_vocab..]);
    for step in 0..r.greedy.len() {
        greedy.push(next);
        if step + 1 < r.greedy.len() {
            session.eval(&[next]).unwrap();
            next = argmax(session.logits());
        }
    }
    (logits, greedy)
}

/// Max |a - b| over the rows `rows`.
fn max_diff(a: &[f32], b: &[f32], n_vocab: usize, rows: std::ops::Range<usize>) -> f32 {
    let span = rows.start * n_vocab..rows.end * n_vocab;
    a[span.clone()]
        .iter()
        .zip(&b[span])
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Loads `file`, checks it against `reference`, and returns the largest logit difference.
fn check(file: &str, reference_json: &str) -> f32 {
    let model = Model::load(fixture(file)).unwrap();
    let r = reference(reference_json);
    for kind in ["q8_values", "q8_scales", "q8_sums"] {
        // null: the run rounds nothing of this kind (no Q8_1 activations, for q8_sums).
        let Some(ulps) = r.json["conditioning"][kind]["min_ulps"].as_f64() else {
            assert_eq!(
                r.json["conditioning"][kind]["values"], 0,
                "{reference_json}: {kind}"
            );
            continue;
        };
        assert!(
            ulps >= MIN_CONDITIONING_ULPS,
            "{reference_json}: a {kind} rounding is {ulps} ulps from its boundary: pick another seed"
        );
    }
    assert_eq!(
        model.hparams().n_vocab,
        r.n_vocab,
        "{file}: vocabulary size"
    );
    let (ours, greedy) = run(&model, &r);
    assert_eq!(ours.len(), r.logits.len());
    let diff = max_diff(&ours, &r.logits, r.n_vocab, 0..r.tokens.len());
    eprintln!(
        "{file}: max |ours - llama.cpp| over {} logits = {diff:.3e}",
        ours.len()
    );
    assert!(
        diff <= TOLERANCE,
        "{file}: max logit difference {diff} exceeds {TOLERANCE}"
    );
    if gguf_quant::isa() != gguf_quant::Isa::Neon {
        // AVX2, and the scalar kernels that keep its order: llama.cpp's x86 logits exactly.
        assert_eq!(diff, 0.0, "{file}: logits that differ from llama.cpp's");
    }
    for (pos, (a, b)) in ours
        .chunks(r.n_vocab)
        .zip(r.logits.chunks(r.n_vocab))
        .enumerate()
    {
        assert_eq!(argmax(a), argmax(b), "{file}: argmax at position {pos}");
    }
    assert_eq!(greedy, r.greedy, "{file}: greedy continuation");
    diff
}

#[test]
fn llama_with_gqa_and_output_weight_matches_llama_cpp() {
    let model = Model::load(fixture("model-llama.gguf")).unwrap();
    let hp = model.hparams();
    assert_eq!((hp.n_head, hp.n_head_kv, hp.head_dim_k), (4, 2, 16));
    assert!(model.file().tensor("output.weight").is_some());
    // The file has llama.attention.sliding_window = 8, which llama.cpp never reads for
    // `llama` (it attends to the whole context): neither may we.
    assert!(model
        .file()
        .value("llama.attention.sliding_window")
        .is_some());
    assert_eq!(hp.sliding_window, None);
    check("model-llama.gguf", "model-llama.json");
}

#[test]
fn qwen2_with_qkv_biases_matches_llama_cpp() {
    let model = Model::load(fixture("model-qwen2.gguf")).unwrap();
    assert!(model.file().tensor("blk.0.attn_q.bias").is_some());
    assert!(model.file().tensor("output.weight").is_none());
    check("model-qwen2.gguf", "model-qwen2.json");
}

#[test]
fn qwen3_with_qk_norms_and_wide_heads_matches_llama_cpp() {
    let model = Model::load(fixture("model-qwen3.gguf")).unwrap();
    let hp = model.hparams();
    assert_eq!(
        (hp.n_head, hp.n_head_kv, hp.head_dim_k, hp.n_embd),
        (4, 2, 32, 64)
    );
    assert!(model.file().tensor("blk.0.attn_q_norm.weight").is_some());
    check("model-qwen3.gguf", "model-qwen3.json");
}

/// Mixtral is `llama` with `llama.expert_count`: the stacked `ffn_*_exps` instead of the dense
/// feed-forward tensors, a softmax router and the two chosen experts' weights normalised.
#[test]
fn mixtral_llama_with_experts_matches_llama_cpp() {
    let model = Model::load(fixture("model-mixtral.gguf")).unwrap();
    assert_eq!(model.hparams().arch, "llama");
    assert!(model.file().tensor("blk.0.ffn_up_exps.weight").is_some());
    assert!(model.file().tensor("blk.0.ffn_up.weight").is_none());
    check("model-mixtral.gguf", "model-mixtral.json");
}

/// Qwen2-MoE: Qwen2's attention, four experts (two used, weights not normalised) of 64 and a
/// shared expert of 160 scaled by the sigmoid of its own gate.
#[test]
fn qwen2moe_with_a_gated_shared_expert_matches_llama_cpp() {
    let model = Model::load(fixture("model-qwen2moe.gguf")).unwrap();
    assert!(model
        .file()
        .tensor("blk.1.ffn_gate_inp_shexp.weight")
        .is_some());
    check("model-qwen2moe.gguf", "model-qwen2moe.json");
}

/// Qwen3-MoE: per-head Q/K norms, eight experts of which three are used, normalised, and a
/// tied output.
#[test]
fn qwen3moe_with_normalised_expert_weights_matches_llama_cpp() {
    let model = Model::load(fixture("model-qwen3moe.gguf")).unwrap();
    assert!(model.file().tensor("output.weight").is_none());
    check("model-qwen3moe.gguf", "model-qwen3moe.json");
}

/// OLMoE: Q and K normed over their whole rows (as many K heads as Q heads), five experts.
#[test]
fn olmoe_with_whole_row_qk_norms_matches_llama_cpp() {
    let model = Model::load(fixture("model-olmoe.gguf")).unwrap();
    let hp = model.hparams();
    assert_eq!((hp.n_head, hp.n_head_kv), (4, 4));
    check("model-olmoe.gguf", "model-olmoe.json");
}

/// gpt-oss: attention sinks, alternating sliding-window (8) and full layers, YaRN, biases on
/// Q/K/V, the attention output, the router and every expert product, the weights a softmax of
/// the chosen experts' logits, the clamped SwiGLU, MXFP4 experts.
#[test]
fn gpt_oss_with_sinks_yarn_and_mxfp4_experts_matches_llama_cpp() {
    let model = Model::load(fixture("model-gpt-oss.gguf")).unwrap();
    let hp = model.hparams();
    assert_eq!(hp.layer_windows, [Some(8), None]);
    assert!(matches!(
        hp.rope_scaling,
        gguf_model::RopeScaling::Yarn { factor, original_context: 128 } if factor == 4.0
    ));
    let experts = model.file().tensor("blk.0.ffn_up_exps.weight").unwrap();
    assert_eq!(experts.ggml_type, gguf_format::GgmlType::MXFP4);
    check("model-gpt-oss.gguf", "model-gpt-oss.json");
}

/// DeepSeek 2 in the shape of DeepSeek-V3: latent attention (a compressed query, one cached
/// latent key and value per token, the per-head absorption and expansion), YaRN with DeepSeek's
/// log multiplier, a dense first block, then sigmoid routing with a selection bias, 3 of 8
/// experts from the 2 best of 4 groups, normalised and scaled, and a shared expert.
#[test]
fn deepseek2_with_latent_attention_and_grouped_sigmoid_routing_matches_llama_cpp() {
    let model = Model::load(fixture("model-deepseek2.gguf")).unwrap();
    let hp = model.hparams();
    // The cache holds one key of latent + rope and one value of latent per token.
    assert_eq!(
        (hp.n_head, hp.n_head_kv, hp.head_dim_k, hp.head_dim_v),
        (4, 1, 80, 64)
    );
    assert!(model.file().tensor("blk.0.ffn_up.weight").is_some());
    assert!(model.file().tensor("blk.1.exp_probs_b.bias").is_some());
    check("model-deepseek2.gguf", "model-deepseek2.json");
}

/// Granite: llama with its four multipliers (embeddings × 2, each sublayer's output × 0.6,
/// attention scale 0.2, logits / 1.5) and a tied output.
#[test]
fn granite_with_its_multipliers_matches_llama_cpp() {
    let model = Model::load(fixture("model-granite.gguf")).unwrap();
    assert!(model.file().value("granite.logit_scale").is_some());
    check("model-granite.gguf", "model-granite.json");
}

/// Granite-MoE: Granite's multipliers, four experts and an ungated shared expert of 96.
#[test]
fn granitemoe_with_an_ungated_shared_expert_matches_llama_cpp() {
    let model = Model::load(fixture("model-granitemoe.gguf")).unwrap();
    assert!(model.file().tensor("blk.0.ffn_up_shexp.weight").is_some());
    assert!(model
        .file()
        .tensor("blk.0.ffn_gate_inp_shexp.weight")
        .is_none());
    check("model-granitemoe.gguf", "model-granitemoe.json");
}

/// PhiMoE: Phi-3's graph with separate biased Q/K/V, RMSNorms plus biases (as llama.cpp), an
/// attention output bias, an output bias and four experts.
#[test]
fn phimoe_with_norm_biases_matches_llama_cpp() {
    let model = Model::load(fixture("model-phimoe.gguf")).unwrap();
    assert!(model.file().tensor("blk.0.ffn_norm.bias").is_some());
    check("model-phimoe.gguf", "model-phimoe.json");
}

/// A mixture of experts' file whose counts or expert tensors are wrong is refused, naming the
/// key or tensor.
#[test]
fn bad_expert_counts_and_shapes_are_named() {
    for (name, edit, expected) in [
        (
            "used-beyond-count.gguf",
            ("qwen3moe.expert_used_count", 9u32),
            "qwen3moe.expert_used_count is 9; it must be 1 to 8",
        ),
        (
            "no-experts.gguf",
            ("qwen3moe.expert_count", 0),
            "qwen3moe.expert_count is 0",
        ),
    ] {
        let path = edited_copy_of("model-qwen3moe.gguf", name, |b| {
            b.set(edit.0, edit.1);
        });
        let err = Model::load(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains(expected), "{name}: {err}");
    }
    let path = edited_copy_of("model-mixtral.gguf", "fewer-experts.gguf", |b| {
        b.set("llama.expert_count", 5u32);
    });
    let err = Model::load(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(&err, ModelError::TensorShape { name, expected, found, .. }
            if name == "blk.0.ffn_gate_inp.weight" && expected == &[64, 5] && found == &[64, 6]),
        "{err:?}"
    );
}

/// DeepSeek 2 files llama.cpp's latent attention cannot read, and routing it cannot compute,
/// are refused with the key that says why.
#[test]
fn deepseek2_without_split_latent_or_with_impossible_groups_is_refused() {
    let legacy = edited_copy_of("model-deepseek2.gguf", "ds-legacy.gguf", |b| {
        b.remove("deepseek2.attention.key_length_mla");
    });
    let err = Model::load(&legacy).unwrap_err().to_string();
    std::fs::remove_file(&legacy).unwrap();
    assert!(err.contains("predates the split of attn_kv_b"), "{err}");
    for (name, key, value, expected) in [
        (
            "ds-groups.gguf",
            "deepseek2.expert_group_count",
            3u32,
            "do not split 8 experts into groups",
        ),
        (
            "ds-group-used.gguf",
            "deepseek2.expert_group_used_count",
            1,
            "3 experts cannot be chosen from 1 groups of 2",
        ),
        (
            "ds-gating.gguf",
            "deepseek2.expert_gating_func",
            3,
            "not a gating function of DeepSeek 2",
        ),
    ] {
        let path = edited_copy_of("model-deepseek2.gguf", name, |b| {
            b.set(key, value);
        });
        let err = Model::load(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains(expected), "{name}: {err}");
    }
}

/// llama.cpp refuses `general.architecture = mistral` (Mistral's own GGUFs say `llama`, and
/// llama.cpp gives `llama` full attention whatever `sliding_window` says). We run `mistral`
/// files with the sliding window; the reference is llama.cpp computing the same weights as
/// `llama` with every key older than the window taken out of the sequence's cache.
#[test]
fn mistral_sliding_window_matches_llama_cpp_with_the_window_emulated() {
    let model = Model::load(fixture("model-mistral.gguf")).unwrap();
    assert_eq!(model.hparams().sliding_window, Some(8));
    let swa = reference("model-mistral.json");
    assert!(swa.json["original_load_error"]
        .as_str()
        .unwrap()
        .contains("unknown model architecture: 'mistral'"));
    check("model-mistral.gguf", "model-mistral.json");

    // Against llama.cpp's full attention: equal while the window holds every position
    // (p < 8), far apart once it does not.
    let full = reference("model-mistral-full.json");
    let (ours, _) = run(&model, &full);
    let inside = max_diff(&ours, &full.logits, full.n_vocab, 0..8);
    let beyond = max_diff(&ours, &full.logits, full.n_vocab, 8..full.tokens.len());
    eprintln!(
        "model-mistral.gguf vs full attention: positions 0-7 {inside:.3e}, 8-19 {beyond:.3e}"
    );
    assert!(
        inside <= TOLERANCE,
        "positions inside the window differ by {inside}"
    );
    assert!(beyond > 0.5, "the window changed nothing ({beyond})");
}

#[test]
fn gemma_matches_llama_cpp() {
    let model = Model::load(fixture("model-gemma.gguf")).unwrap();
    let hp = model.hparams();
    assert_eq!((hp.n_head, hp.n_head_kv, hp.head_dim_k), (4, 2, 16));
    assert!(model.file().tensor("output.weight").is_none());
    check("model-gemma.gguf", "model-gemma.json");
}

#[test]
fn gemma2_soft_caps_and_sliding_window_match_llama_cpp() {
    let model = Model::load(fixture("model-gemma2.gguf")).unwrap();
    // The default pattern (2): layer 0 slides over 8 positions, layer 1 sees everything.
    assert_eq!(model.hparams().layer_windows, [Some(8), None]);
    assert!(model.file().tensor("blk.0.post_ffw_norm.weight").is_some());
    check("model-gemma2.gguf", "model-gemma2.json");
}

#[test]
fn gemma3_local_and_global_layers_match_llama_cpp() {
    let model = Model::load(fixture("model-gemma3.gguf")).unwrap();
    let hp = model.hparams();
    // The pattern is a bool array here: layer 0 global, layer 1 local.
    assert_eq!(hp.layer_windows, [None, Some(8)]);
    assert_eq!((hp.head_dim_k, hp.rope_freq_base), (32, 1e6));
    assert!(model.file().tensor("blk.1.attn_k_norm.weight").is_some());
    check("model-gemma3.gguf", "model-gemma3.json");
}

#[test]
fn phi2_parallel_blocks_with_layer_norms_and_biases_match_llama_cpp() {
    let model = Model::load(fixture("model-phi2.gguf")).unwrap();
    let hp = model.hparams();
    assert_eq!((hp.n_rot, hp.head_dim_k), (8, 16));
    assert!(model.file().tensor("blk.0.attn_qkv.bias").is_some());
    assert!(model.file().tensor("output.bias").is_some());
    check("model-phi2.gguf", "model-phi2.json");
}

/// Phi-3 with LongRoPE: llama.cpp's default context (512) is longer than the original context
/// (256), so it takes `rope_factors_long`; a context of 256 takes `rope_factors_short`. Each
/// must match, and they must differ from each other.
#[test]
fn phi3_fused_tensors_and_longrope_factors_match_llama_cpp() {
    let model = Model::load(fixture("model-phi3.gguf")).unwrap();
    let hp = model.hparams();
    assert_eq!((hp.n_rot, hp.head_dim_k, hp.n_ff), (12, 16, 128));
    assert!(model.file().tensor("blk.0.attn_qkv.weight").is_some());
    assert!(model.file().tensor("rope_factors_long.weight").is_some());
    // phi3.attention.sliding_window = 8 is in the file; llama.cpp switches Phi's window off.
    assert!(model
        .file()
        .value("phi3.attention.sliding_window")
        .is_some());
    assert_eq!(hp.sliding_window, None);
    assert_eq!(hp.layer_windows, [None, None]);
    check("model-phi3.gguf", "model-phi3.json");
    check("model-phi3.gguf", "model-phi3-short.json");
    let (long, short) = (
        reference("model-phi3.json"),
        reference("model-phi3-short.json"),
    );
    assert_eq!(
        (long.json["n_ctx"].as_u64(), short.json["n_ctx"].as_u64()),
        (Some(512), Some(256))
    );
    // Position 0 rotates nothing; beyond it the two factor sets give other logits.
    let n = long.n_vocab;
    assert!(max_diff(&long.logits, &short.logits, n, 0..1) == 0.0);
    assert!(max_diff(&long.logits, &short.logits, n, 1..long.tokens.len()) > 1e-2);
}

/// A copy of `src` whose Q/K/V projections (and biases) are fused into `attn_qkv` (`fuse`) or
/// split out of it, tensor bytes unchanged: rows of Q, then K, then V, as llama.cpp reads a fused
/// tensor. All three must have one type to fuse.
fn refused_qkv(src: &str, fuse: bool) -> PathBuf {
    let bytes = std::fs::read(fixture(src)).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let hp = Model::load(fixture(src)).unwrap().hparams().clone();
    let q = (hp.n_head * hp.head_dim_k) as u64;
    let k = (hp.n_head_kv * hp.head_dim_k) as u64;
    let v = (hp.n_head_kv * hp.head_dim_v) as u64;
    let mut b = GgufBuilder::from_file(&file);
    b.tensors_mut().clear();
    let mut data: Vec<Vec<u8>> = Vec::new();
    let mut add = |b: &mut GgufBuilder<'_>,
                   name: String,
                   ty: gguf_format::GgmlType,
                   shape: &[u64],
                   bytes: Vec<u8>| {
        b.add_tensor(&name, ty, shape).unwrap();
        data.push(bytes);
    };
    for t in file.tensors() {
        let bytes = file.tensor_data(t).to_vec();
        let (stem, kind) = t.name.rsplit_once('.').unwrap();
        let matrix = t.shape().len() == 2;
        if fuse && stem.ends_with("attn_q") {
            let block = stem.trim_end_matches("attn_q");
            let part = |p: &str| file.tensor(&format!("{block}{p}.{kind}")).unwrap();
            let (tk, tv) = (part("attn_k"), part("attn_v"));
            assert!(tk.ggml_type == t.ggml_type && tv.ggml_type == t.ggml_type);
            let mut all = bytes;
            all.extend_from_slice(file.tensor_data(tk));
            all.extend_from_slice(file.tensor_data(tv));
            let shape: Vec<u64> = if matrix {
                vec![t.shape()[0], q + k + v]
            } else {
                vec![q + k + v]
            };
            add(
                &mut b,
                format!("{block}attn_qkv.{kind}"),
                t.ggml_type,
                &shape,
                all,
            );
        } else if fuse && (stem.ends_with("attn_k") || stem.ends_with("attn_v")) {
            // Fused with attn_q above.
        } else if !fuse && stem.ends_with("attn_qkv") {
            let block = stem.trim_end_matches("attn_qkv");
            let row = bytes.len() as u64 / (q + k + v);
            let mut first = 0;
            for (name, rows) in [("attn_q", q), ("attn_k", k), ("attn_v", v)] {
                let shape: Vec<u64> = if matrix {
                    vec![t.shape()[0], rows]
                } else {
                    vec![rows]
                };
                let part = bytes[(first * row) as usize..((first + rows) * row) as usize].to_vec();
                add(
                    &mut b,
                    format!("{block}{name}.{kind}"),
                    t.ggml_type,
                    &shape,
                    part,
                );
                first += rows;
            }
        } else {
            add(&mut b, t.name.to_string(), t.ggml_type, t.shape(), bytes);
        }
    }
    let mut out = Vec::new();
    let mut w = b.write(&mut out).unwrap();
    for d in &data {
        w.write_tensor(d).unwrap();
    }
    w.finish().unwrap();
    let path = temp_path(&format!("{}-{src}", if fuse { "fused" } else { "split" }));
    std::fs::write(&path, out).unwrap();
    path
}

/// Every architecture takes Q, K and V fused or separate (as llama.cpp's `create_tensor_qkv`),
/// with the same numbers: a product per view of a fused tensor is the fused product.
#[test]
fn fused_and_separate_qkv_give_the_same_logits() {
    let tokens: Vec<u32> = (0..20).map(|i| 3 + (i * 37) % 250).collect();
    let logits = |path: &std::path::Path| {
        let model = Model::load(path).unwrap();
        let mut session = tiny_session(&model, 64);
        session.eval_all_logits(&tokens).unwrap()
    };
    for (src, fuse, tensor) in [
        ("model-qwen2.gguf", true, "blk.0.attn_qkv.bias"),
        ("model-gemma3.gguf", true, "blk.1.attn_qkv.weight"),
        ("model-phi2.gguf", false, "blk.0.attn_v.bias"),
        ("model-phi3.gguf", false, "blk.1.attn_k.weight"),
    ] {
        let path = refused_qkv(src, fuse);
        let file = std::fs::read(&path).unwrap();
        assert!(
            GgufFile::parse(&file).unwrap().tensor(tensor).is_some(),
            "{src}: {tensor}"
        );
        let (ours, theirs) = (logits(&fixture(src)), logits(&path));
        std::fs::remove_file(&path).unwrap();
        assert_eq!(ours, theirs, "{src}");
    }
}

fn temp_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("gguf-model-tiny-{}-{name}", std::process::id()))
}

/// A copy of `model-llama.gguf` with `edit` applied to its builder.
fn edited_copy(name: &str, edit: impl FnOnce(&mut GgufBuilder<'_>)) -> PathBuf {
    edited_copy_of("model-llama.gguf", name, edit)
}

/// A copy of the fixture `src` with `edit` applied to its builder (tensor data copied by name).
fn edited_copy_of(src: &str, name: &str, edit: impl FnOnce(&mut GgufBuilder<'_>)) -> PathBuf {
    let bytes = std::fs::read(fixture(src)).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let mut b = GgufBuilder::from_file(&file);
    edit(&mut b);
    let out = b.write_from(&file, Vec::new(), &mut |_, _| {}).unwrap();
    let path = temp_path(name);
    std::fs::write(&path, out).unwrap();
    path
}

#[test]
fn unsupported_architecture_is_named_with_the_supported_ones() {
    let path = edited_copy("gptneox.gguf", |b| {
        b.set("general.architecture", "gptneox");
    });
    let err = Model::load(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(&err, ModelError::UnsupportedArchitecture { arch, .. } if arch == "gptneox"),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("`gptneox`"), "{msg}");
    for arch in SUPPORTED {
        assert!(msg.contains(arch), "{msg} does not list {arch}");
    }
    assert_eq!(
        SUPPORTED,
        [
            "llama",
            "mistral",
            "qwen2",
            "qwen3",
            "qwen2moe",
            "qwen3moe",
            "olmoe",
            "granite",
            "granitemoe",
            "gemma",
            "gemma2",
            "gemma3",
            "phi2",
            "phi3",
            "phimoe",
            "gpt-oss",
            "deepseek2",
            "bert"
        ]
    );
}

#[test]
fn wrong_tensor_shape_is_named() {
    // blk.1.attn_k.weight stored as [32, 64] instead of [64, 32]: the same bytes, transposed.
    let path = edited_copy("bad-shape.gguf", |b| {
        let t = b
            .tensors_mut()
            .iter_mut()
            .find(|t| t.name() == "blk.1.attn_k.weight")
            .unwrap();
        *t = gguf_format::TensorSpec::new(t.name(), t.ggml_type(), &[32, 64]).unwrap();
    });
    let err = Model::load(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    match &err {
        ModelError::TensorShape {
            name,
            expected,
            found,
            ..
        } => {
            assert_eq!(name, "blk.1.attn_k.weight");
            assert_eq!(expected, &[64, 32]);
            assert_eq!(found, &[32, 64]);
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    assert!(err.to_string().contains("blk.1.attn_k.weight"), "{err}");
}

#[test]
fn hyperparameters_that_compute_nothing_are_refused_naming_the_key() {
    let eps = "llama.attention.layer_norm_rms_epsilon";
    let base = "llama.rope.freq_base";
    let mut cases: Vec<(&str, f32)> = Vec::new();
    for v in [f32::NAN, 0.0, -1e-5, f32::INFINITY] {
        cases.push((eps, v));
    }
    for v in [0.0, -10_000.0, f32::NAN, f32::INFINITY, f32::NEG_INFINITY] {
        cases.push((base, v));
    }
    for (i, (key, value)) in cases.into_iter().enumerate() {
        let path = edited_copy(&format!("bad-hparam-{i}.gguf"), |b| {
            b.set(key, value);
        });
        let err = Model::load(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(
            matches!(err, ModelError::Hyperparameters { .. }),
            "{key}={value}: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains(key) && msg.contains(&value.to_string()),
            "{msg}"
        );
    }
    for (i, factor) in [0.0f32, f32::NAN, -2.0].into_iter().enumerate() {
        let path = edited_copy(&format!("bad-rope-scale-{i}.gguf"), |b| {
            b.set("llama.rope.scaling.type", "linear");
            b.set("llama.rope.scaling.factor", factor);
        });
        let err = Model::load(&path).unwrap_err().to_string();
        std::fs::remove_file(&path).unwrap();
        assert!(err.contains("llama.rope.scaling.factor"), "{err}");
    }
}

/// What the Phi loaders refuse, each error naming the tensor or key.
#[test]
fn phi_files_that_cannot_run_are_refused_naming_the_tensor() {
    let load_err = |src: &str, name: &str, edit: &dyn Fn(&mut GgufBuilder<'_>)| {
        let path = edited_copy_of(src, name, edit);
        let err = Model::load(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        err
    };
    // Phi-2's output has a bias it cannot do without.
    let err = load_err("model-phi2.gguf", "phi2-no-output-bias.gguf", &|b| {
        b.tensors_mut().retain(|t| t.name() != "output.bias");
    });
    assert!(
        matches!(&err, ModelError::MissingTensor { name, .. } if name == "output.bias"),
        "{err:?}"
    );
    // Phi-3's gate-and-up tensor must be 2 * n_ff rows (the same bytes read as 256 x 64).
    let err = load_err("model-phi3.gguf", "phi3-bad-up.gguf", &|b| {
        let t = b
            .tensors_mut()
            .iter_mut()
            .find(|t| t.name() == "blk.1.ffn_up.weight")
            .unwrap();
        *t = gguf_format::TensorSpec::new(t.name(), t.ggml_type(), &[256, 64]).unwrap();
    });
    match &err {
        ModelError::TensorShape {
            name,
            expected,
            found,
            ..
        } => {
            assert_eq!(name, "blk.1.ffn_up.weight");
            assert_eq!(
                (expected.as_slice(), found.as_slice()),
                (&[64, 256][..], &[256, 64][..])
            );
        }
        other => panic!("expected a shape error, got {other:?}"),
    }
    // Heads that do not tile the embedding (Phi's Q and output are n_embd wide).
    let err = load_err("model-phi3.gguf", "phi3-bad-heads.gguf", &|b| {
        b.set("phi3.attention.key_length", 32u32);
        b.set("phi3.attention.value_length", 32u32);
    });
    assert!(matches!(err, ModelError::Hyperparameters { .. }), "{err:?}");
    assert!(
        err.to_string().contains("phi3.attention.key_length"),
        "{err}"
    );
    // A LongRoPE factor of zero would turn its angles infinite.
    let mut bytes = std::fs::read(fixture("model-phi3.gguf")).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let t = file.tensor("rope_factors_short.weight").unwrap();
    let start = (file.data_offset() + t.offset) as usize;
    drop(file);
    bytes[start..start + 4].copy_from_slice(&0f32.to_le_bytes());
    let path = temp_path("phi3-zero-factor.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let err = Model::load(&path).unwrap_err().to_string();
    std::fs::remove_file(&path).unwrap();
    assert!(err.contains("rope_factors_short.weight"), "{err}");
}

fn tiny_session(model: &Model, n_ctx: usize) -> gguf_model::Session<'_> {
    model
        .session(SessionOptions {
            n_ctx,
            n_batch: 4,
            threads: 1,
            ..SessionOptions::default()
        })
        .unwrap()
}

#[test]
fn a_request_beyond_the_context_is_refused_before_any_work() {
    let model = Model::load(fixture("model-llama.gguf")).unwrap();
    let mut session = tiny_session(&model, 16);
    let tokens: Vec<u32> = (3..23).collect();
    let err = session.eval(&tokens).unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::ContextFull {
                needed: 20,
                n_ctx: 16
            }
        ),
        "{err:?}"
    );
    // Nothing was evaluated: before, the first four batches were computed first.
    assert!(session.tokens().is_empty());
    // An out-of-range id in a later batch is found before the first batch is computed.
    let mut bad: Vec<u32> = (3..12).collect();
    bad.push(10_000);
    let err = session.eval(&bad).unwrap_err();
    assert!(err.to_string().contains("token id 10000"), "{err}");
    assert!(session.tokens().is_empty());
    assert!(session
        .generate_from(&tokens, &gguf_model::SamplerConfig::greedy(), 4)
        .is_err());
    assert!(session.tokens().is_empty());
}

#[test]
fn generation_stops_cleanly_at_the_end_of_the_context() {
    let model = Model::load(fixture("model-llama.gguf")).unwrap();
    let mut session = tiny_session(&model, 16);
    let prompt: Vec<u32> = (3..13).collect();
    let mut generation = session
        .generate_from(&prompt, &gguf_model::SamplerConfig::greedy(), 100)
        .unwrap();
    let ids: Vec<u32> = (&mut generation).map(|t| t.unwrap().id).collect();
    assert_eq!(
        generation.stop_reason(),
        Some(gguf_model::StopReason::ContextFull)
    );
    // 10 prompt tokens and 6 generated ones fill the 16 positions; the 7th generated token
    // comes from the logits of the 16th and is returned, but cannot be evaluated.
    assert_eq!(ids.len(), 7);
    drop(generation);
    assert_eq!(session.tokens().len(), 16);
    // max_tokens reached first.
    let mut generation = session
        .generate_from(&prompt, &gguf_model::SamplerConfig::greedy(), 3)
        .unwrap();
    assert_eq!((&mut generation).count(), 3);
    assert_eq!(
        generation.stop_reason(),
        Some(gguf_model::StopReason::MaxTokens)
    );
}

#[test]
fn meaningless_sampler_settings_are_refused_before_any_work() {
    let model = Model::load(fixture("model-llama.gguf")).unwrap();
    let mut session = tiny_session(&model, 16);
    let sampler = gguf_model::SamplerConfig {
        top_p: f32::NAN,
        ..gguf_model::SamplerConfig::default()
    };
    let Err(err) = session.generate_from(&[3, 4, 5], &sampler, 4) else {
        panic!("a NaN top_p was accepted")
    };
    assert!(err.to_string().contains("top_p"), "{err}");
    assert!(session.tokens().is_empty());
}

#[test]
fn nan_logits_are_an_error_rather_than_token_zero() {
    // A NaN in a norm weight (a corrupted file) makes every logit NaN; sampling would have
    // returned token 0 at every step.
    let mut bytes = std::fs::read(fixture("model-llama.gguf")).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let t = file.tensor("blk.0.attn_norm.weight").unwrap();
    let start = (file.data_offset() + t.offset) as usize;
    let end = start + t.size as usize;
    drop(file);
    for chunk in bytes[start..end].chunks_mut(4) {
        chunk.copy_from_slice(&f32::NAN.to_le_bytes());
    }
    let path = temp_path("nan-weights.gguf");
    std::fs::write(&path, &bytes).unwrap();
    let model = Model::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let mut session = tiny_session(&model, 16);
    let mut generation = session
        .generate_from(&[1, 3, 4], &gguf_model::SamplerConfig::greedy(), 4)
        .unwrap();
    let first = generation.next().unwrap();
    assert!(
        matches!(first, Err(ModelError::NotANumber { position: 3 })),
        "{first:?}"
    );
    assert!(generation.next().is_none());
}

/// A sliding-window layer keeps only its window (plus one batch) in a ring: evaluated one token
/// at a time, the ring of the mistral model wraps twice over 20 tokens, and every position's
/// logits are the same as with a cache that holds every position.
#[test]
fn a_sliding_window_ring_cache_gives_the_full_caches_logits() {
    let model = Model::load(fixture("model-mistral.gguf")).unwrap();
    let window = model.hparams().sliding_window.unwrap();
    let tokens: Vec<u32> = (0..20).map(|i| 3 + (i * 37) % 300).collect();
    let logits_of = |n_batch: usize| {
        let mut session = model
            .session(SessionOptions {
                n_ctx: 64,
                n_batch,
                threads: 1,
                ..SessionOptions::default()
            })
            .unwrap();
        let bytes = session.kv_cache_bytes();
        let mut all = Vec::new();
        for &t in &tokens {
            session.eval(&[t]).unwrap();
            all.extend_from_slice(session.logits());
        }
        (all, bytes)
    };
    let (ring, ring_bytes) = logits_of(1);
    let (full, full_bytes) = logits_of(64);
    assert_eq!(ring, full);
    // 8 slots (the window) per layer instead of 64.
    assert_eq!(ring_bytes * 64, full_bytes * window);
}

/// A KV cache that cannot fit in the memory the machine has available is refused before it is
/// allocated, for one session and for the sequences of a parallel session alike (`gguf serve
/// --parallel 256` reserved ~24 GB for a 135M model and aborted).
#[test]
fn a_kv_cache_beyond_the_available_memory_is_refused_before_allocating() {
    let path = edited_copy("huge-context.gguf", |b| {
        b.set("llama.context_length", 1u32 << 31);
    });
    let model = Model::load(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    let options = |n_ctx| SessionOptions {
        n_ctx,
        threads: 1,
        kv_type: KvType::F32,
        ..SessionOptions::default()
    };
    // One session of two billion positions: hundreds of gigabytes.
    let huge = 1usize << 31;
    assert!(model.kv_cache_bytes(huge, 512, KvType::F32) > 1 << 38);
    let err = model.session(options(huge)).unwrap_err();
    assert!(
        matches!(
            err,
            ModelError::OutOfMemory {
                available: Some(_),
                ..
            }
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("a KV cache of {huge} positions (f32) would take ")),
        "{msg}"
    );
    assert!(msg.contains("GiB of memory, but only"), "{msg}");
    // 256 sequences that share a context of the same size.
    let err = model.parallel_session(options(huge), 256).unwrap_err();
    assert!(
        err.to_string().starts_with(&format!(
            "the KV caches of 256 sequences of {} positions (f32) would take ",
            huge / 256
        )),
        "{err}"
    );
    // What fits is allocated as before.
    assert!(model.session(options(64)).is_ok());
}

/// A copy of `model-llama.gguf` with an F32 `rope_freqs.weight` of `values` (Llama 3's RoPE
/// frequency factors, one per rotated pair).
fn llama_with_rope_freqs(name: &str, values: &[f32]) -> PathBuf {
    let bytes = std::fs::read(fixture("model-llama.gguf")).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let mut b = GgufBuilder::from_file(&file);
    b.add_tensor(
        "rope_freqs.weight",
        gguf_format::GgmlType::F32,
        &[values.len() as u64],
    )
    .unwrap();
    let mut out = Vec::new();
    let mut w = b.write(&mut out).unwrap();
    for t in file.tensors() {
        w.write_tensor(file.tensor_data(t)).unwrap();
    }
    let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    w.write_tensor(&data).unwrap();
    w.finish().unwrap();
    let path = temp_path(name);
    std::fs::write(&path, out).unwrap();
    path
}

/// The logits of a prompt of 12 tokens at positions 0..12, from `path` (removed).
fn prompt_logits(path: &PathBuf) -> Vec<f32> {
    let model = Model::load(path).unwrap();
    let logits = tiny_session(&model, 64)
        .eval_all_logits(&[1, 50, 70, 90, 110, 130, 150, 170, 190, 210, 230, 250])
        .unwrap();
    std::fs::remove_file(path).unwrap();
    logits
}

/// Llama 3's `rope_freqs.weight` divides each rotated pair's angle, as llama.cpp's
/// `ggml_rope_ext` does with it: factors of one change nothing, others change the logits; a
/// factor that is zero, negative, NaN or infinite (whose angles would be NaN or infinite) is
/// refused naming the tensor, as is a table of the wrong length.
#[test]
fn llama_rope_freqs_are_applied_and_checked() {
    let plain = prompt_logits(&edited_copy("no-rope-freqs.gguf", |_| {}));
    let ones = prompt_logits(&llama_with_rope_freqs("rope-freqs-ones.gguf", &[1.0; 8]));
    assert_eq!(plain, ones);
    let scaled = prompt_logits(&llama_with_rope_freqs(
        "rope-freqs-scaled.gguf",
        &[1.0, 1.0, 1.5, 4.0, 8.0, 8.0, 8.0, 8.0],
    ));
    let moved = plain
        .iter()
        .zip(&scaled)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    assert!(
        moved > 1e-3,
        "the factors changed the logits by only {moved}"
    );
    assert_eq!(
        plain[..356],
        scaled[..356],
        "position 0 has no rotation to scale"
    );

    for (i, bad) in [0.0f32, -2.0, f32::NAN, f32::INFINITY]
        .into_iter()
        .enumerate()
    {
        let mut values = [1.0f32; 8];
        values[5] = bad;
        let path = llama_with_rope_freqs(&format!("rope-freqs-bad-{i}.gguf"), &values);
        let err = Model::load(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(err, ModelError::Hyperparameters { .. }), "{err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("rope_freqs.weight") && msg.contains(&bad.to_string()),
            "{msg}"
        );
    }
    let path = llama_with_rope_freqs("rope-freqs-long.gguf", &[1.0; 16]);
    let err = Model::load(&path).unwrap_err();
    std::fs::remove_file(&path).unwrap();
    assert!(
        matches!(&err, ModelError::TensorShape { name, expected, .. }
            if name == "rope_freqs.weight" && expected == &[8]),
        "{err:?}"
    );
}

/// Sizes and head counts out of range or inconsistent are refused with the key named, and
/// the value.
#[test]
fn sizes_out_of_range_are_refused_naming_the_key() {
    for (i, (key, value)) in [
        ("llama.block_count", 0u32),
        ("llama.block_count", 1_000_000),
        ("llama.embedding_length", 0),
        ("llama.embedding_length", 1 << 20),
        ("llama.attention.head_count", 0),
        ("llama.attention.head_count_kv", 0),
        ("llama.attention.head_count_kv", 3),
        ("llama.feed_forward_length", 0),
        ("llama.feed_forward_length", u32::MAX),
        ("llama.attention.key_length", 0),
        ("llama.attention.value_length", 4096),
        ("llama.rope.dimension_count", 15),
    ]
    .into_iter()
    .enumerate()
    {
        let path = edited_copy(&format!("bad-size-{i}.gguf"), |b| {
            b.set(key, value);
        });
        let err = Model::load(&path).unwrap_err();
        std::fs::remove_file(&path).unwrap();
        assert!(
            matches!(err, ModelError::Hyperparameters { .. }),
            "{key}={value}: {err:?}"
        );
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("{key} {value}")) || msg.contains(&format!("{key} is {value}")),
            "{key}={value}: {msg}"
        );
    }
}
