//! Tiny random mixture-of-experts checkpoints with a real GPT-2-style vocabulary, derived into
//! the model cache (`hf/smolvocab-<family>/`) by `cargo xtask models`.
//!
//! The families whose `convert_hf_to_gguf.py` classes read the vocabulary only through
//! `_set_vocab_gpt2` (Qwen2-MoE, Qwen3-MoE, OLMoE, gpt-oss; DeepSeek-V2/V3 first) refuse any tokenizer whose pre-tokenizer
//! hash the script does not know, so a tiny made-up vocabulary cannot be converted by the
//! reference. These checkpoints carry SmolLM2's tokenizer instead, as `gguf export` writes it
//! from the cached real model (the script recognises it as `smollm`), with seeded random
//! weights of odd shapes (more experts than active ones, shared experts, a leading dense layer,
//! latent attention). At 49152 rows the
//! embeddings are too large to commit, and they are derived from a real model anyway, so they
//! live beside it; the converter's tests pin llama.cpp's digests of their conversions.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use gguf_convert::export::{Export, ExportOptions};
use gguf_format::GgufFile;
use gguf_test_support::Rng;
use safetensors::Dtype;
use serde_json::{json, Value};

use crate::hf_fixtures::{checkpoint_files, push_qkv, Spec, HEADS, HEAD_DIM, HIDDEN, LAYERS};

/// SmolLM2's vocabulary size.
const VOCAB: usize = 49152;
/// Experts per layer, of which [`USED`] are chosen per token.
const EXPERTS: usize = 5;
const USED: usize = 2;
/// Each expert's feed-forward width.
const EXPERT_FF: usize = 96;
/// Qwen2-MoE's shared expert's width.
const SHARED_FF: usize = 160;

/// The real model whose tokenizer the checkpoints carry.
const TOKENIZER_MODEL: &str = "smollm2-135m";

/// DeepSeek-V3's experts: three groups of two, of which two groups compete.
const V3_EXPERTS: usize = 6;

/// A layer's router and per-expert `gate_proj`, `up_proj`, `down_proj` (`mlp.experts.{e}`).
fn push_experts(t: &mut Vec<(String, Vec<usize>)>, p: &dyn Fn(&str) -> String, n_expert: usize) {
    t.push((p("mlp.gate.weight"), vec![n_expert, HIDDEN]));
    for e in 0..n_expert {
        let x = |w: &str| p(&format!("mlp.experts.{e}.{w}.weight"));
        t.push((x("gate_proj"), vec![EXPERT_FF, HIDDEN]));
        t.push((x("up_proj"), vec![EXPERT_FF, HIDDEN]));
        t.push((x("down_proj"), vec![HIDDEN, EXPERT_FF]));
    }
}

/// DeepSeek-V2's latent attention: the query through a rank-[`Q_LORA`] compression, one
/// latent of [`KV_LORA`] plus a [`ROPE_DIM`]-wide rotary key per token, per-head key parts of
/// [`NOPE_DIM`] and values of [`HEAD_DIM`].
const Q_LORA: usize = 48;
const KV_LORA: usize = 32;
const ROPE_DIM: usize = 8;
const NOPE_DIM: usize = 16;

fn push_latent_attention(t: &mut Vec<(String, Vec<usize>)>, p: &dyn Fn(&str) -> String) {
    t.push((p("self_attn.q_a_proj.weight"), vec![Q_LORA, HIDDEN]));
    t.push((p("self_attn.q_a_layernorm.weight"), vec![Q_LORA]));
    t.push((
        p("self_attn.q_b_proj.weight"),
        vec![HEADS * (NOPE_DIM + ROPE_DIM), Q_LORA],
    ));
    t.push((
        p("self_attn.kv_a_proj_with_mqa.weight"),
        vec![KV_LORA + ROPE_DIM, HIDDEN],
    ));
    t.push((p("self_attn.kv_a_layernorm.weight"), vec![KV_LORA]));
    t.push((
        p("self_attn.kv_b_proj.weight"),
        vec![HEADS * (NOPE_DIM + HEAD_DIM), KV_LORA],
    ));
}

/// gpt-oss' expert width (MXFP4 rows are whole blocks of 32).
const GPT_OSS_FF: usize = 64;

/// gpt-oss' layers but for the experts' packed MXFP4 matrices ([`gpt_oss_blocks`]): attention
/// with biases and sinks, the router with its bias, the experts' biases.
fn gpt_oss_tensors() -> Vec<(String, Vec<usize>)> {
    let mut t = vec![("model.embed_tokens.weight".to_string(), vec![VOCAB, HIDDEN])];
    for l in 0..LAYERS {
        let p = |s: &str| format!("model.layers.{l}.{s}");
        t.push((p("input_layernorm.weight"), vec![HIDDEN]));
        push_qkv(&mut t, &p, 2, true);
        t.push((p("self_attn.o_proj.weight"), vec![HIDDEN, HEADS * HEAD_DIM]));
        t.push((p("self_attn.o_proj.bias"), vec![HIDDEN]));
        t.push((p("self_attn.sinks"), vec![HEADS]));
        t.push((p("post_attention_layernorm.weight"), vec![HIDDEN]));
        t.push((p("mlp.router.weight"), vec![EXPERTS, HIDDEN]));
        t.push((p("mlp.router.bias"), vec![EXPERTS]));
        t.push((
            p("mlp.experts.gate_up_proj_bias"),
            vec![EXPERTS, 2 * GPT_OSS_FF],
        ));
        t.push((p("mlp.experts.down_proj_bias"), vec![EXPERTS, HIDDEN]));
    }
    t.push(("model.norm.weight".to_string(), vec![HIDDEN]));
    t.push(("lm_head.weight".to_string(), vec![VOCAB, HIDDEN]));
    t
}

/// gpt-oss' experts as its checkpoints ship them: MXFP4 blocks of 32 values (16 bytes, two
/// values a byte, the even one low) with one E8M0 scale each, the fused gate/up rows
/// interleaved (gate even, up odd).
fn gpt_oss_blocks() -> Vec<(String, Vec<usize>)> {
    let mut t = Vec::new();
    for l in 0..LAYERS {
        let p = |s: &str| format!("model.layers.{l}.mlp.experts.{s}");
        let (gate_up, down) = (
            [EXPERTS, 2 * GPT_OSS_FF, HIDDEN / 32],
            [EXPERTS, HIDDEN, GPT_OSS_FF / 32],
        );
        t.push((p("gate_up_proj_blocks"), [&gate_up[..], &[16]].concat()));
        t.push((p("gate_up_proj_scales"), gate_up.to_vec()));
        t.push((p("down_proj_blocks"), [&down[..], &[16]].concat()));
        t.push((p("down_proj_scales"), down.to_vec()));
    }
    t
}

/// MXFP4 bytes: any nibbles, and scales of 2^-6 to 2^-4 (so values stay under 0.4).
fn mxfp4_bytes(rng: &mut Rng, name: &str, len: usize) -> Vec<u8> {
    if name.ends_with("_scales") {
        (0..len).map(|_| 121 + (rng.next() % 3) as u8).collect()
    } else {
        rng.bytes(len)
    }
}

fn tensors(family: &str, kv_heads: usize, lm_head: bool) -> Vec<(String, Vec<usize>)> {
    let mut t = vec![("model.embed_tokens.weight".to_string(), vec![VOCAB, HIDDEN])];
    let deepseek = family.starts_with("deepseek");
    let n_expert = if family == "deepseek3" {
        V3_EXPERTS
    } else {
        EXPERTS
    };
    for l in 0..LAYERS {
        let p = |s: &str| format!("model.layers.{l}.{s}");
        t.push((p("input_layernorm.weight"), vec![HIDDEN]));
        if deepseek {
            push_latent_attention(&mut t, &p);
        } else {
            push_qkv(&mut t, &p, kv_heads, family == "qwen2moe");
        }
        t.push((p("self_attn.o_proj.weight"), vec![HIDDEN, HEADS * HEAD_DIM]));
        match family {
            "qwen3moe" => {
                t.push((p("self_attn.q_norm.weight"), vec![HEAD_DIM]));
                t.push((p("self_attn.k_norm.weight"), vec![HEAD_DIM]));
            }
            // OLMoE normalises the whole projections (llama.cpp needs as many KV heads as
            // query heads for its K norm).
            "olmoe" => {
                t.push((p("self_attn.q_norm.weight"), vec![HEADS * HEAD_DIM]));
                t.push((p("self_attn.k_norm.weight"), vec![kv_heads * HEAD_DIM]));
            }
            _ => {}
        }
        t.push((p("post_attention_layernorm.weight"), vec![HIDDEN]));
        if deepseek && l == 0 {
            // The leading dense layer.
            t.push((p("mlp.gate_proj.weight"), vec![128, HIDDEN]));
            t.push((p("mlp.up_proj.weight"), vec![128, HIDDEN]));
            t.push((p("mlp.down_proj.weight"), vec![HIDDEN, 128]));
            continue;
        }
        push_experts(&mut t, &p, n_expert);
        if family == "deepseek3" {
            t.push((p("mlp.gate.e_score_correction_bias"), vec![V3_EXPERTS]));
        }
        if deepseek {
            for (w, shape) in [
                ("gate_proj", [EXPERT_FF, HIDDEN]),
                ("up_proj", [EXPERT_FF, HIDDEN]),
                ("down_proj", [HIDDEN, EXPERT_FF]),
            ] {
                t.push((p(&format!("mlp.shared_experts.{w}.weight")), shape.to_vec()));
            }
        }
        if family == "qwen2moe" {
            for (w, shape) in [
                ("gate_proj", [SHARED_FF, HIDDEN]),
                ("up_proj", [SHARED_FF, HIDDEN]),
                ("down_proj", [HIDDEN, SHARED_FF]),
            ] {
                t.push((p(&format!("mlp.shared_expert.{w}.weight")), shape.to_vec()));
            }
            t.push((p("mlp.shared_expert_gate.weight"), vec![1, HIDDEN]));
        }
    }
    if family == "deepseek3" {
        // A multi-token-prediction layer past num_hidden_layers, which conversions leave out.
        let p = |s: &str| format!("model.layers.{LAYERS}.{s}");
        t.push((p("enorm.weight"), vec![HIDDEN]));
        t.push((p("hnorm.weight"), vec![HIDDEN]));
        t.push((p("eh_proj.weight"), vec![HIDDEN, 2 * HIDDEN]));
        t.push((p("input_layernorm.weight"), vec![HIDDEN]));
        push_experts(&mut t, &p, V3_EXPERTS);
    }
    t.push(("model.norm.weight".to_string(), vec![HIDDEN]));
    if lm_head {
        t.push(("lm_head.weight".to_string(), vec![VOCAB, HIDDEN]));
    }
    t
}

fn config(class: &str, model_type: &str, kv_heads: usize, extra: Value) -> Value {
    let mut config = json!({
        "architectures": [class],
        "model_type": model_type,
        "hidden_size": HIDDEN,
        "intermediate_size": 128,
        "num_experts_per_tok": USED,
        "num_hidden_layers": LAYERS,
        "num_attention_heads": HEADS,
        "num_key_value_heads": kv_heads,
        "max_position_embeddings": 256,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "vocab_size": VOCAB,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "hidden_act": "silu",
        "output_router_logits": false,
        "router_aux_loss_coef": 0.0,
    });
    for (k, v) in extra.as_object().expect("object") {
        config[k] = v.clone();
    }
    config
}

/// A DeepSeek `config.json`: latent attention of the dimensions above, a dense first layer,
/// one shared expert, YaRN with `mscale` = `mscale_all_dim` = `mscale`, and the routing keys in
/// `routing`.
fn deepseek_config(class: &str, model_type: &str, routing: Value, mscale: f64) -> Value {
    let mut extra = json!({"n_shared_experts": 1, "moe_intermediate_size": EXPERT_FF,
        "first_k_dense_replace": 1, "moe_layer_freq": 1,
        "q_lora_rank": Q_LORA, "kv_lora_rank": KV_LORA,
        "qk_nope_head_dim": NOPE_DIM, "qk_rope_head_dim": ROPE_DIM,
        "v_head_dim": HEAD_DIM, "attention_bias": false,
        "rope_scaling": {"type": "yarn", "factor": 4.0,
            "original_max_position_embeddings": 64, "beta_fast": 32,
            "beta_slow": 1, "mscale": mscale, "mscale_all_dim": mscale},
        "tie_word_embeddings": false, "torch_dtype": "bfloat16"});
    for (k, v) in routing.as_object().expect("object") {
        extra[k] = v.clone();
    }
    config(class, model_type, HEADS, extra)
}

/// The checkpoints: (directory, spec, seed). Their output matrices are their own, as
/// llama.cpp's loader requires for `qwen2moe` and `olmoe`. Each has its own seed, so one added or changed
/// leaves the others' bytes alone.
fn specs() -> Vec<(Spec, u64)> {
    vec![
        (
            Spec {
                dir: "smolvocab-qwen2moe",
                config: config(
                    "Qwen2MoeForCausalLM",
                    "qwen2_moe",
                    2,
                    json!({"num_experts": EXPERTS, "moe_intermediate_size": EXPERT_FF,
                        "shared_expert_intermediate_size": SHARED_FF, "norm_topk_prob": false,
                        "decoder_sparse_step": 1, "mlp_only_layers": [], "qkv_bias": true,
                        "tie_word_embeddings": false, "torch_dtype": "bfloat16"}),
                ),
                dtype: Dtype::BF16,
                tensors: tensors("qwen2moe", 2, true),
                bytes: Vec::new(),
                shards: 1,
            },
            0x766f_6361_0001,
        ),
        (
            Spec {
                dir: "smolvocab-qwen3moe",
                config: config(
                    "Qwen3MoeForCausalLM",
                    "qwen3_moe",
                    2,
                    // llama.cpp renormalises Qwen3-MoE's chosen weights always, as the real
                    // models ask.
                    json!({"num_experts": EXPERTS, "moe_intermediate_size": EXPERT_FF,
                        "head_dim": HEAD_DIM,
                        "norm_topk_prob": true, "attention_bias": false,
                        "decoder_sparse_step": 1, "mlp_only_layers": [],
                        "tie_word_embeddings": false, "torch_dtype": "float32"}),
                ),
                dtype: Dtype::F32,
                tensors: tensors("qwen3moe", 2, true),
                bytes: Vec::new(),
                shards: 2,
            },
            0x766f_6361_0002,
        ),
        (
            Spec {
                dir: "smolvocab-olmoe",
                config: config(
                    "OlmoeForCausalLM",
                    "olmoe",
                    HEADS,
                    // OLMoE's experts are `intermediate_size` wide.
                    json!({"num_experts": EXPERTS, "intermediate_size": EXPERT_FF,
                        "norm_topk_prob": false, "clip_qkv": null, "attention_bias": false,
                        "rms_norm_eps": 1e-5, "pad_token_id": 0,
                        "tie_word_embeddings": false, "torch_dtype": "float16"}),
                ),
                dtype: Dtype::F16,
                tensors: tensors("olmoe", HEADS, true),
                bytes: Vec::new(),
                shards: 1,
            },
            0x766f_6361_0003,
        ),
        (
            Spec {
                dir: "smolvocab-deepseek2",
                config: deepseek_config(
                    "DeepseekV2ForCausalLM",
                    "deepseek_v2",
                    json!({"n_routed_experts": EXPERTS, "topk_method": "greedy", "n_group": null,
                        "topk_group": null, "norm_topk_prob": false,
                        "routed_scaling_factor": 1.5, "scoring_func": "softmax"}),
                    0.707,
                ),
                dtype: Dtype::BF16,
                tensors: tensors("deepseek2", HEADS, true),
                bytes: Vec::new(),
                shards: 1,
            },
            0x766f_6361_0004,
        ),
        (
            Spec {
                dir: "smolvocab-gpt-oss",
                config: config(
                    "GptOssForCausalLM",
                    "gpt_oss",
                    2,
                    json!({"num_local_experts": EXPERTS, "intermediate_size": GPT_OSS_FF,
                        "head_dim": HEAD_DIM, "attention_bias": true, "rms_norm_eps": 1e-5,
                        "rope_theta": 150000.0, "sliding_window": 4,
                        "layer_types": ["sliding_attention", "full_attention"],
                        // `truncate` as ggml's YaRN rounds the correction range (the released
                        // models say false, where transformers and llama.cpp part ways).
                        "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "beta_fast": 32.0,
                            "beta_slow": 1.0, "truncate": true,
                            "original_max_position_embeddings": 64},
                        "swiglu_limit": 7.0, "pad_token_id": 0,
                        "quantization_config": {"quant_method": "mxfp4",
                            "modules_to_not_convert": ["model.layers.*.self_attn",
                                "model.layers.*.mlp.router", "model.embed_tokens", "lm_head"]},
                        "tie_word_embeddings": false, "torch_dtype": "bfloat16"}),
                ),
                dtype: Dtype::BF16,
                tensors: gpt_oss_tensors(),
                bytes: gpt_oss_blocks(),
                shards: 1,
            },
            0x766f_6361_0005,
        ),
        (
            Spec {
                dir: "smolvocab-deepseek3",
                config: deepseek_config(
                    "DeepseekV3ForCausalLM",
                    "deepseek_v3",
                    json!({"n_routed_experts": V3_EXPERTS, "topk_method": "noaux_tc",
                        "n_group": 3, "topk_group": 2, "norm_topk_prob": true,
                        "routed_scaling_factor": 2.5, "scoring_func": "sigmoid",
                        "num_nextn_predict_layers": 1, "rope_interleave": true}),
                    1.0,
                ),
                dtype: Dtype::BF16,
                tensors: tensors("deepseek3", HEADS, true),
                bytes: Vec::new(),
                shards: 2,
            },
            0x766f_6361_0006,
        ),
    ]
}

/// A tensor's seeded values: norm weights in [0.75, 1.25), the others in [-0.125, 0.125), so
/// that each layer's output depends on its input tokens.
fn centred_values(rng: &mut Rng, name: &str, len: usize) -> Vec<f32> {
    let (centre, scale) = if name.contains("norm") {
        (1.0, 0.25)
    } else {
        (0.0, 0.125)
    };
    (0..len).map(|_| centre + scale * rng.unit()).collect()
}

/// The checkpoints' files, by path relative to the cache's `hf/`, with the tokenizer of the
/// model at `tokenizer_model`.
pub(crate) fn files(tokenizer_model: &Path) -> Result<BTreeMap<String, Vec<u8>>> {
    let mapped = GgufFile::open(tokenizer_model)
        .with_context(|| format!("opening {}", tokenizer_model.display()))?;
    let export = Export::plan(mapped.file(), &ExportOptions::default())?;
    let tokenizer: Vec<(&str, Vec<u8>)> = ["tokenizer.json", "tokenizer_config.json"]
        .into_iter()
        .map(|name| {
            let bytes = export
                .file_bytes(name)
                .with_context(|| format!("the export of {} has no {name}", TOKENIZER_MODEL))?;
            Ok((name, bytes.to_vec()))
        })
        .collect::<Result<_>>()?;
    let mut files = BTreeMap::new();
    for (spec, seed) in specs() {
        let mut rng = Rng::new(seed);
        for (name, bytes) in checkpoint_files(&spec, &mut rng, &centred_values, &mxfp4_bytes)? {
            files.insert(format!("{}/{name}", spec.dir), bytes);
        }
        for (name, bytes) in &tokenizer {
            files.insert(format!("{}/{name}", spec.dir), bytes.clone());
        }
    }
    Ok(files)
}

/// Writes the checkpoints into the cache's `hf/` (each file only when its bytes changed), from
/// the cached SmolLM2.
pub fn derive() -> Result<()> {
    let cache = gguf_hub::cache_dir();
    let model = cache.join(format!("{TOKENIZER_MODEL}.gguf"));
    let hf = cache.join("hf");
    let mut written = 0;
    for (name, bytes) in files(&model)? {
        let path = hf.join(&name);
        if std::fs::read(&path).is_ok_and(|old| old == bytes) {
            continue;
        }
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let tmp = path.with_extension("part");
        std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
        std::fs::rename(&tmp, &path)?;
        written += 1;
    }
    let dirs: Vec<&str> = specs().iter().map(|(s, _)| s.dir).collect();
    println!(
        "{}: {} in {} ({written} files written)",
        TOKENIZER_MODEL,
        dirs.join(", "),
        hf.display()
    );
    Ok(())
}
