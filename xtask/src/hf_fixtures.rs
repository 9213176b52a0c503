//! Tiny random Hugging Face checkpoints, one per decoder family the converter writes
//! (`fixtures/hf/<name>/`): `config.json`, seeded random weights in safetensors (F32, F16 or
//! BF16; one checkpoint sharded with an index), a small SentencePiece `tokenizer.model` (byte
//! fallback pieces, a user-defined piece, scores) and a `tokenizer_config.json` with a chat
//! template and added tokens. llama.cpp's `convert_hf_to_gguf.py` converts them too (no
//! pre-tokenizer hash is needed for SentencePiece vocabularies), which is how the converter's
//! output is checked against the reference.

use std::collections::BTreeMap;

use anyhow::Result;
use gguf_convert::sentencepiece::{
    ModelProto, NormalizerSpec, PieceType, SentencePiece, TrainerSpec,
};
use gguf_test_support::Rng;
use half::{bf16, f16};
use safetensors::tensor::TensorView;
use safetensors::Dtype;
use serde_json::{json, Value};

pub(crate) const HIDDEN: usize = 64;
pub(crate) const HEADS: usize = 4;
pub(crate) const HEAD_DIM: usize = 16;
const FF: usize = 128;
pub(crate) const LAYERS: usize = 2;
/// Mixtral's experts per layer (two of them used per token).
const MIXTRAL_EXPERTS: usize = 3;
/// PhiMoE's experts per layer (two of them used per token).
const PHIMOE_EXPERTS: usize = 5;
/// Granite-MoE's experts per layer (three of them used per token).
const GRANITE_EXPERTS: usize = 4;

/// The SentencePiece vocabulary: unknown, BOS, EOS, 256 byte pieces, a user-defined piece and
/// some ordinary ones with falling scores.
fn sentencepiece_model() -> ModelProto {
    let piece = |text: &str, score: f32, kind: PieceType| SentencePiece {
        piece: Some(text.to_string()),
        score: Some(score),
        r#type: Some(kind as i32),
    };
    let mut pieces = vec![
        piece("<unk>", 0.0, PieceType::Unknown),
        piece("<s>", 0.0, PieceType::Control),
        piece("</s>", 0.0, PieceType::Control),
    ];
    for b in 0..=255u8 {
        pieces.push(piece(&format!("<0x{b:02X}>"), 0.0, PieceType::Byte));
    }
    pieces.push(piece("<start_of_turn>", 0.0, PieceType::UserDefined));
    let words = [
        "▁t", "he", "▁the", "▁a", "in", "▁in", "er", "on", "▁o", "re", "at", "en", "▁s", "▁w",
        "is", "▁is", "or", "it", "▁of", "an", "▁and", "▁to", "ed", "ing", "▁b", "▁c", "▁f", "▁h",
        "e", "t", "a", "o", "i", "n", "s", "r", "h", "l", "d", "▁",
    ];
    for (i, w) in words.iter().enumerate() {
        pieces.push(piece(w, -(i as f32) - 0.25, PieceType::Normal));
    }
    ModelProto {
        pieces,
        trainer_spec: Some(TrainerSpec {
            model_type: Some(2),
            byte_fallback: Some(true),
        }),
        normalizer_spec: Some(NormalizerSpec {
            name: Some("identity".into()),
            add_dummy_prefix: Some(true),
            remove_extra_whitespaces: Some(false),
            escape_whitespaces: Some(true),
        }),
    }
}

/// One checkpoint to write.
pub(crate) struct Spec {
    pub dir: &'static str,
    pub config: Value,
    pub dtype: Dtype,
    /// Tensors: (name, PyTorch shape).
    pub tensors: Vec<(String, Vec<usize>)>,
    /// U8 tensors (packed quantized blocks and scales), after the others: (name, shape).
    pub bytes: Vec<(String, Vec<usize>)>,
    pub shards: usize,
}

/// A layer's separate Q, K and V projections, each followed by its bias with `bias`.
pub(crate) fn push_qkv(
    t: &mut Vec<(String, Vec<usize>)>,
    p: &dyn Fn(&str) -> String,
    kv_heads: usize,
    bias: bool,
) {
    for (x, rows) in [("q", HEADS), ("k", kv_heads), ("v", kv_heads)] {
        t.push((
            p(&format!("self_attn.{x}_proj.weight")),
            vec![rows * HEAD_DIM, HIDDEN],
        ));
        if bias {
            t.push((
                p(&format!("self_attn.{x}_proj.bias")),
                vec![rows * HEAD_DIM],
            ));
        }
    }
}

/// Mixtral's (and PhiMoE's) router and per-expert `w1`, `w2`, `w3` of a layer.
fn push_block_sparse_moe(
    t: &mut Vec<(String, Vec<usize>)>,
    p: &dyn Fn(&str) -> String,
    n_expert: usize,
) {
    t.push((p("block_sparse_moe.gate.weight"), vec![n_expert, HIDDEN]));
    for e in 0..n_expert {
        let x = |w: &str| p(&format!("block_sparse_moe.experts.{e}.{w}.weight"));
        t.push((x("w1"), vec![FF, HIDDEN]));
        t.push((x("w2"), vec![HIDDEN, FF]));
        t.push((x("w3"), vec![FF, HIDDEN]));
    }
}

fn layer_tensors(arch: &str, kv_heads: usize) -> Vec<(String, Vec<usize>)> {
    let mut t = Vec::new();
    for l in 0..LAYERS {
        let p = |s: &str| format!("model.layers.{l}.{s}");
        t.push((p("input_layernorm.weight"), vec![HIDDEN]));
        if arch == "phi3" {
            t.push((
                p("self_attn.qkv_proj.weight"),
                vec![(HEADS + 2 * kv_heads) * HEAD_DIM, HIDDEN],
            ));
            t.push((p("mlp.gate_up_proj.weight"), vec![2 * FF, HIDDEN]));
        } else if arch == "phimoe" {
            push_qkv(&mut t, &p, kv_heads, true);
            t.push((p("self_attn.o_proj.bias"), vec![HIDDEN]));
            t.push((p("input_layernorm.bias"), vec![HIDDEN]));
            t.push((p("post_attention_layernorm.bias"), vec![HIDDEN]));
            push_block_sparse_moe(&mut t, &p, PHIMOE_EXPERTS);
        } else if arch == "granitemoe" {
            push_qkv(&mut t, &p, kv_heads, false);
            t.push((
                p("block_sparse_moe.router.layer.weight"),
                vec![GRANITE_EXPERTS, HIDDEN],
            ));
            t.push((
                p("block_sparse_moe.input_linear.weight"),
                vec![GRANITE_EXPERTS, 2 * FF, HIDDEN],
            ));
            t.push((
                p("block_sparse_moe.output_linear.weight"),
                vec![GRANITE_EXPERTS, HIDDEN, FF],
            ));
        } else if arch == "mixtral" {
            push_qkv(&mut t, &p, kv_heads, false);
            push_block_sparse_moe(&mut t, &p, MIXTRAL_EXPERTS);
        } else {
            t.push((p("self_attn.q_proj.weight"), vec![HEADS * HEAD_DIM, HIDDEN]));
            t.push((
                p("self_attn.k_proj.weight"),
                vec![kv_heads * HEAD_DIM, HIDDEN],
            ));
            t.push((
                p("self_attn.v_proj.weight"),
                vec![kv_heads * HEAD_DIM, HIDDEN],
            ));
            t.push((p("mlp.gate_proj.weight"), vec![FF, HIDDEN]));
            t.push((p("mlp.up_proj.weight"), vec![FF, HIDDEN]));
        }
        if arch == "qwen2" {
            t.push((p("self_attn.q_proj.bias"), vec![HEADS * HEAD_DIM]));
            t.push((p("self_attn.k_proj.bias"), vec![kv_heads * HEAD_DIM]));
            t.push((p("self_attn.v_proj.bias"), vec![kv_heads * HEAD_DIM]));
        }
        if matches!(arch, "qwen3" | "gemma3") {
            t.push((p("self_attn.q_norm.weight"), vec![HEAD_DIM]));
            t.push((p("self_attn.k_norm.weight"), vec![HEAD_DIM]));
        }
        t.push((p("self_attn.o_proj.weight"), vec![HIDDEN, HEADS * HEAD_DIM]));
        if !matches!(arch, "mixtral" | "phimoe" | "granitemoe") {
            t.push((p("mlp.down_proj.weight"), vec![HIDDEN, FF]));
        }
        t.push((p("post_attention_layernorm.weight"), vec![HIDDEN]));
        if matches!(arch, "gemma2" | "gemma3") {
            t.push((p("pre_feedforward_layernorm.weight"), vec![HIDDEN]));
            t.push((p("post_feedforward_layernorm.weight"), vec![HIDDEN]));
        }
    }
    t
}

fn specs(vocab: usize) -> Vec<Spec> {
    let base = |arch: &str, class: &str, kv: usize| -> Value {
        json!({
            "architectures": [class],
            "model_type": arch,
            "hidden_size": HIDDEN,
            "intermediate_size": FF,
            "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS,
            "num_key_value_heads": kv,
            "max_position_embeddings": 256,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "vocab_size": vocab,
            "bos_token_id": 1,
            "eos_token_id": 2,
            "pad_token_id": 0,
            "hidden_act": "silu",
            "torch_dtype": "float32",
        })
    };
    let with = |mut v: Value, extra: Value| {
        for (k, x) in extra.as_object().expect("object") {
            v[k] = x.clone();
        }
        v
    };
    let tensors = |arch: &str, kv: usize, lm_head: bool| {
        let mut t = vec![("model.embed_tokens.weight".to_string(), vec![vocab, HIDDEN])];
        t.extend(layer_tensors(arch, kv));
        t.push(("model.norm.weight".to_string(), vec![HIDDEN]));
        if lm_head {
            t.push(("lm_head.weight".to_string(), vec![vocab, HIDDEN]));
        }
        t
    };
    vec![
        Spec {
            dir: "tiny-llama",
            config: with(
                base("llama", "LlamaForCausalLM", 2),
                json!({"rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 64}, "tie_word_embeddings": false}),
            ),
            dtype: Dtype::F32,
            tensors: tensors("llama", 2, true),
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-mistral",
            config: with(
                base("mistral", "MistralForCausalLM", 1),
                json!({"rope_theta": 1000000.0, "sliding_window": null, "head_dim": HEAD_DIM}),
            ),
            dtype: Dtype::BF16,
            tensors: tensors("mistral", 1, true),
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-qwen2",
            config: with(
                base("qwen2", "Qwen2ForCausalLM", 2),
                json!({"tie_word_embeddings": true, "torch_dtype": "float16"}),
            ),
            dtype: Dtype::F16,
            tensors: tensors("qwen2", 2, false),
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-qwen3",
            config: with(
                base("qwen3", "Qwen3ForCausalLM", 2),
                json!({"head_dim": HEAD_DIM}),
            ),
            dtype: Dtype::F32,
            tensors: tensors("qwen3", 2, true),
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-gemma",
            config: with(
                base("gemma", "GemmaForCausalLM", 1),
                json!({"head_dim": HEAD_DIM, "hidden_act": "gelu_pytorch_tanh"}),
            ),
            dtype: Dtype::F32,
            tensors: tensors("gemma", 1, false),
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-gemma2",
            config: with(
                base("gemma2", "Gemma2ForCausalLM", 2),
                json!({"head_dim": HEAD_DIM, "attn_logit_softcapping": 50.0,
                    "final_logit_softcapping": 30.0, "sliding_window": 128,
                    "query_pre_attn_scalar": HEAD_DIM, "hidden_activation": "gelu_pytorch_tanh"}),
            ),
            dtype: Dtype::F16,
            tensors: tensors("gemma2", 2, false),
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-gemma3",
            config: with(
                base("gemma3_text", "Gemma3ForCausalLM", 1),
                json!({"head_dim": HEAD_DIM, "rope_theta": 1000000.0,
                    "rope_local_base_freq": 10000.0, "sliding_window": 128,
                    "sliding_window_pattern": 6, "query_pre_attn_scalar": HEAD_DIM,
                    "final_logit_softcapping": null, "attn_logit_softcapping": null,
                    "torch_dtype": "bfloat16"}),
            ),
            dtype: Dtype::BF16,
            tensors: tensors("gemma3", 1, false),
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-phi3",
            config: with(
                base("phi3", "Phi3ForCausalLM", 2),
                json!({"original_max_position_embeddings": 256, "rope_scaling": null,
                    "sliding_window": 255, "tie_word_embeddings": false}),
            ),
            dtype: Dtype::F32,
            tensors: tensors("phi3", 2, true),
            bytes: Vec::new(),
            shards: 2,
        },
        // Last: the checkpoints share one generator, so a new one goes after the others.
        Spec {
            dir: "tiny-mixtral",
            config: with(
                base("mixtral", "MixtralForCausalLM", 2),
                json!({"num_local_experts": MIXTRAL_EXPERTS, "num_experts_per_tok": 2,
                    "rope_theta": 1000000.0, "sliding_window": null,
                    "router_aux_loss_coef": 0.02, "output_router_logits": false,
                    "tie_word_embeddings": false}),
            ),
            dtype: Dtype::F32,
            tensors: tensors("mixtral", 2, true),
            bytes: Vec::new(),
            shards: 2,
        },
        Spec {
            dir: "tiny-phimoe",
            config: with(
                base("phimoe", "PhiMoEForCausalLM", 2),
                json!({"num_local_experts": PHIMOE_EXPERTS, "num_experts_per_tok": 2,
                    "original_max_position_embeddings": 256, "rope_scaling": null,
                    "sliding_window": null, "attention_bias": true, "lm_head_bias": true,
                    "router_jitter_noise": 0.0, "input_jitter_noise": 0.0,
                    "router_aux_loss_coef": 0.0, "output_router_logits": false,
                    "tie_word_embeddings": false}),
            ),
            dtype: Dtype::F32,
            tensors: {
                let mut t = tensors("phimoe", 2, true);
                t.push(("model.norm.bias".to_string(), vec![HIDDEN]));
                t.push(("lm_head.bias".to_string(), vec![vocab]));
                t
            },
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-granite",
            config: with(
                base("granite", "GraniteForCausalLM", 2),
                with(
                    json!({"attention_multiplier": 0.2, "embedding_multiplier": 2.0,
                    "residual_multiplier": 0.6, "logits_scaling": 1.5, "attention_bias": false,
                    "mlp_bias": false}),
                    json!({"tie_word_embeddings": false}),
                ),
            ),
            dtype: Dtype::BF16,
            tensors: tensors("granite", 2, true),
            bytes: Vec::new(),
            shards: 1,
        },
        Spec {
            dir: "tiny-granitemoe",
            config: with(
                base("granitemoe", "GraniteMoeForCausalLM", 2),
                with(
                    json!({"attention_multiplier": 0.2, "embedding_multiplier": 2.0,
                    "residual_multiplier": 0.6, "logits_scaling": 1.5, "attention_bias": false,
                    "mlp_bias": false}),
                    json!({"num_local_experts": GRANITE_EXPERTS, "num_experts_per_tok": 3,
                        "output_router_logits": false, "router_aux_loss_coef": 0.0,
                        "tie_word_embeddings": true}),
                ),
            ),
            dtype: Dtype::F32,
            tensors: tensors("granitemoe", 2, false),
            bytes: Vec::new(),
            shards: 1,
        },
    ]
}

/// A tensor's seeded values for the committed checkpoints. `Rng::unit` is already in
/// [-1, 1), so these lie in [-0.375, 0.125) (norm weights in [0.25, 1.25)), off centre; kept so
/// that the checkpoints' bytes, and the reference digests pinned from them, stay.
fn skewed_values(rng: &mut Rng, name: &str, len: usize) -> Vec<f32> {
    (0..len)
        .map(|_| {
            let u = rng.unit() * 2.0 - 1.0;
            if name.contains("norm") {
                1.0 + 0.25 * u
            } else {
                0.125 * u
            }
        })
        .collect()
}

/// `values` in `dtype`'s bytes.
fn encode(values: &[f32], dtype: Dtype) -> Vec<u8> {
    match dtype {
        Dtype::F16 => values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect(),
        Dtype::BF16 => values
            .iter()
            .flat_map(|&v| bf16::from_f32(v).to_le_bytes())
            .collect(),
        _ => values.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }
}

/// How a checkpoint's tensor values are drawn: (generator, tensor name, count).
pub(crate) type Draw = dyn Fn(&mut Rng, &str, usize) -> Vec<f32>;

/// How a checkpoint's U8 tensors' bytes are drawn: (generator, tensor name, count).
pub(crate) type DrawBytes = dyn Fn(&mut Rng, &str, usize) -> Vec<u8>;

/// For checkpoints without U8 tensors.
fn no_bytes(_: &mut Rng, name: &str, _: usize) -> Vec<u8> {
    unreachable!("{name}: the committed checkpoints have no U8 tensors")
}

pub(crate) fn json_bytes(v: &Value) -> Result<Vec<u8>> {
    let mut text = serde_json::to_string_pretty(v)?;
    text.push('\n');
    Ok(text.into_bytes())
}

/// A checkpoint's weights (safetensors, sharded with an index when asked) and `config.json`,
/// by file name, drawn by `draw` (and `draw_bytes` for the U8 ones) from `rng`.
pub(crate) fn checkpoint_files(
    spec: &Spec,
    rng: &mut Rng,
    draw: &Draw,
    draw_bytes: &DrawBytes,
) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    let mut datas: Vec<(String, Vec<usize>, Dtype, Vec<u8>)> = spec
        .tensors
        .iter()
        .map(|(name, shape)| {
            let bytes = encode(&draw(rng, name, shape.iter().product()), spec.dtype);
            (name.clone(), shape.clone(), spec.dtype, bytes)
        })
        .collect();
    for (name, shape) in &spec.bytes {
        let bytes = draw_bytes(rng, name, shape.iter().product());
        datas.push((name.clone(), shape.clone(), Dtype::U8, bytes));
    }
    let per_shard = datas.len().div_ceil(spec.shards);
    let mut weight_map = serde_json::Map::new();
    for (s, chunk) in datas.chunks(per_shard).enumerate() {
        let file = if spec.shards == 1 {
            "model.safetensors".to_string()
        } else {
            format!("model-{:05}-of-{:05}.safetensors", s + 1, spec.shards)
        };
        let views = chunk
            .iter()
            .map(|(name, shape, dtype, bytes)| {
                Ok((name.clone(), TensorView::new(*dtype, shape.clone(), bytes)?))
            })
            .collect::<Result<Vec<_>>>()?;
        for (name, _, _, _) in chunk {
            weight_map.insert(name.clone(), Value::from(file.clone()));
        }
        let metadata = Some(std::collections::HashMap::from([(
            "format".to_string(),
            "pt".to_string(),
        )]));
        files.insert(file, safetensors::serialize(views, metadata)?);
    }
    if spec.shards > 1 {
        let total: usize = datas.iter().map(|(_, _, _, b)| b.len()).sum();
        files.insert(
            "model.safetensors.index.json".to_string(),
            json_bytes(&json!({"metadata": {"total_size": total}, "weight_map": weight_map}))?,
        );
    }
    files.insert("config.json".to_string(), json_bytes(&spec.config)?);
    Ok(files)
}

/// The checkpoints, by path relative to `fixtures/`.
pub(crate) fn files() -> Result<BTreeMap<String, Vec<u8>>> {
    let sp = sentencepiece_model();
    let vocab = sp.pieces.len() + 2;
    let tokenizer_model = sp.to_bytes();
    let mut files = BTreeMap::new();
    for (i, spec) in specs(vocab).into_iter().enumerate() {
        let dir = format!("hf/{}", spec.dir);
        let mut rng = Rng::new(0x6866_0000 + i as u64);
        for (file, bytes) in checkpoint_files(&spec, &mut rng, &skewed_values, &no_bytes)? {
            files.insert(format!("{dir}/{file}"), bytes);
        }
        files.insert(format!("{dir}/tokenizer.model"), tokenizer_model.clone());
        let mut added = serde_json::Map::new();
        for (id, content, special) in [
            (0, "<unk>", true),
            (1, "<s>", true),
            (2, "</s>", true),
            (vocab - 2, "<|im_start|>", false),
            (vocab - 1, "\u{2581}tool\u{2581}call", false),
        ] {
            added.insert(
                id.to_string(),
                json!({"content": content, "special": special}),
            );
        }
        let tokenizer_config = json!({
            "tokenizer_class": "LlamaTokenizer",
            "add_bos_token": true,
            "add_eos_token": false,
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
            "added_tokens_decoder": added,
            "chat_template": "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}</s>\n{% endfor %}",
        });
        files.insert(
            format!("{dir}/tokenizer_config.json"),
            json_bytes(&tokenizer_config)?,
        );
    }
    Ok(files)
}
