//! Tiny random-weight models of each architecture `gguf-model` runs, laid out as llama.cpp's
//! converters write them, so llama.cpp (`libllama`) loads them and gives reference logits
//! (`crates/gguf-model/tests/data/tiny/`).
//!
//! Every file: 64-wide residual stream, 2 blocks, 4 query heads sharing 2 key/value heads
//! (grouped-query attention), f32 norms and biases, matrices quantized with `gguf-quant`'s
//! reference quantizers, and a real tokenizer (a SentencePiece vocabulary with byte fallback for
//! `llama`/`mistral`/the Gemmas/`phi3`, a byte-level GPT-2 BPE with merges and `pre = qwen2` for
//! the Qwens, the same BPE with `pre = phi-2` for `phi2`). Weights come from a seeded xorshift
//! generator, so the bytes never change. No matrix that multiplies activations is F16 (ggml
//! rounds their inputs to f16 there, a rounding the conditioning report below does not watch).
//!
//! The seeds are not arbitrary: llama.cpp's run of each model (see
//! `crates/gguf-model/tests/data/tiny/reference_logits.c`) keeps every quantized activation and
//! every Q8 block scale at least 8 float ulps from its rounding boundary, so an engine whose sums
//! differ from llama.cpp's in the last bit still rounds them all the same way. Changing a model
//! here means regenerating the references and checking their `conditioning` (the test does).
//!
//! | file | arch | what it exercises |
//! |------|------|-------------------|
//! | `model-llama.gguf` | `llama` | separate `output.weight` (Q8_0), F16 `token_embd`, Q8_0/Q5_0/Q4_0/Q4_1 matrices; `llama.attention.sliding_window = 8`, which llama.cpp ignores for `llama` |
//! | `model-mistral.gguf` | `mistral` | `mistral.attention.sliding_window = 8` (a 20-token prompt crosses it); tied Q8_0 `token_embd`; Q5_1 feed-forward |
//! | `model-qwen2.gguf` | `qwen2` | f32 biases on Q, K and V; NeoX RoPE with base 1e6; tied Q8_0 `token_embd`; Q4_K `ffn_down` (n_ff 256) |
//! | `model-qwen3.gguf` | `qwen3` | per-head Q/K RMS norms; head dimension 32 set by `attention.key_length` (4 heads × 32 = 128 ≠ 64); separate Q4_0 output; Q6_K `ffn_down` |
//! | `model-gemma.gguf` | `gemma` | embeddings scaled by √64; GeGLU; tied Q8_0 `token_embd`; Q5_0 gate/up |
//! | `model-gemma2.gguf` | `gemma2` | post-attention and post-FFN norms; attention and final soft-capping (caps 4 and 10, so they bend the numbers); sliding window 8 on layer 0 (the default pattern 2), global layer 1; Q4_K `ffn_down` |
//! | `model-gemma3.gguf` | `gemma3` | Q/K norms; head dimension 32; `sliding_window_pattern` as a bool array making layer 0 global and layer 1 local (window 8); `rope.freq_base` 1e6 for the global layer, `rope.freq_base_swa` 1e4 for the local one; Q6_K `ffn_down` |
//! | `model-phi2.gguf` | `phi2` | LayerNorms with biases; fused `attn_qkv` with a fused bias; parallel attention and GELU feed-forward; biases on every matrix and a separate output with bias; partial NeoX RoPE (8 of 16 dimensions) |
//! | `model-phi3.gguf` | `phi3` | fused `attn_qkv` and gate-and-up `ffn_up` (Q5_1, 256 rows); partial NeoX RoPE (12 of 16); LongRoPE `rope_factors_long/short` with `original_context_length` 256 (llama.cpp's 512 context takes the long ones) and `rope.scaling.attn_factor`; `phi3.attention.sliding_window = 8`, which llama.cpp switches off |
//! | `model-mixtral.gguf` | `llama` | Mixtral: `llama.expert_count` 6, 2 used, normalised; experts of `feed_forward_length` 96 (Q5_1 gate, Q4_1 up, Q5_0 down), F32 router |
//! | `model-qwen2moe.gguf` | `qwen2moe` | 4 experts of 64 (`expert_feed_forward_length`), 2 used, not normalised; a shared expert of 160 with its sigmoid gate `ffn_gate_inp_shexp`; Q/K/V biases |
//! | `model-qwen3moe.gguf` | `qwen3moe` | 8 experts of 64, 3 used, normalised (8 experts: the softmax's vector path); per-head Q/K norms, head dimension 32; tied output |
//! | `model-olmoe.gguf` | `olmoe` | 5 experts of `feed_forward_length` 64, 2 used; Q/K RMS-normed over whole rows, so 4 KV heads |
//! | `model-granite.gguf` | `granite` | llama with Granite's multipliers: embeddings × 2, sublayer outputs × 0.6, attention scale 0.2, logits / 1.5; tied output |
//! | `model-granitemoe.gguf` | `granitemoe` | the multipliers, 4 experts (2 used, normalised) and an ungated shared expert of 96 |
//! | `model-phimoe.gguf` | `phimoe` | Phi-3's graph with separate biased Q/K/V, each RMSNorm plus a bias, attention-output and output biases; 4 experts, 2 used |

use anyhow::{ensure, Result};
use gguf_format::{GgmlType, GgufBuilder};
// The tests' generator: its stream is pinned by a test there, so the bytes never change.
use gguf_test_support::Rng;

/// `tokenizer.ggml.token_type` values.
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const BYTE: i32 = 6;

/// Which tokenizer a model carries.
#[derive(Clone, Copy)]
enum VocabKind {
    /// SentencePiece (`tokenizer.ggml.model = llama`) with `<0xXX>` byte tokens.
    Spm,
    /// The same with Phi-3's chat tokens appended (`<|endoftext|>` ends the text). llama.cpp
    /// sets attributes of Phi-3's special tokens by name and refuses a `phi3` vocabulary
    /// without `<|endoftext|>`.
    Phi3,
    /// Byte-level BPE (`gpt2`) with `pre = qwen2`.
    Qwen,
    /// The same byte-level BPE with `pre = phi-2` and `<|endoftext|>` as its only special token.
    Phi2,
}

/// How an architecture's tensors are laid out.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// Pre-norm blocks with separate Q/K/V and gate/up (the llama family and the Gemmas).
    PreNorm {
        /// RMSNorms after attention and after the feed-forward (Gemma 2 and 3).
        post_norms: bool,
    },
    /// Phi-2: LayerNorms with biases, fused `attn_qkv` and its bias, biases everywhere.
    Phi2,
    /// Phi-3: fused `attn_qkv`, fused gate-and-up `ffn_up`, LongRoPE factors.
    Phi3,
    /// PhiMoE: Phi-3's graph with separate Q/K/V (with biases), biases on every norm, on the
    /// attention output and on the output, and experts.
    PhiMoe,
    /// gpt-oss: Q/K/V and attention output biases, attention sinks, `post_attention_norm`
    /// before the experts, a router bias and per-expert biases.
    GptOss,
    /// DeepSeek 2: latent attention (compressed query, one cached latent key and value per
    /// token, per-head `attn_k_b`/`attn_v_b`), dense leading blocks, then experts with a
    /// selection bias and an ungated shared expert. The shapes are [`DEEPSEEK2`]'s.
    DeepSeek2,
}

/// The tiny DeepSeek 2's latent attention: four heads of 32 + 16 query/key dimensions and 32
/// value dimensions through a latent of 64, the query through a rank of 96.
struct LatentShape {
    nope: usize,
    rope: usize,
    v: usize,
    kv_lora: usize,
    q_lora: usize,
}

const DEEPSEEK2: LatentShape = LatentShape {
    nope: 32,
    rope: 16,
    v: 32,
    kv_lora: 64,
    q_lora: 96,
};

/// An extra `{arch}.*` key.
enum Meta {
    U32(u32),
    F32(f32),
    Str(&'static str),
    Bool(bool),
    Bools(&'static [bool]),
}

/// One tiny model.
struct Spec {
    file: &'static str,
    arch: &'static str,
    seed: u64,
    layout: Layout,
    n_ff: usize,
    /// Per-head dimension; written as `attention.key_length`/`value_length` when it is not
    /// `n_embd / n_head`.
    head_dim: usize,
    /// `rope.dimension_count` when it differs from the head dimension (partial rotary).
    n_rot: Option<usize>,
    /// The epsilon of the norms (RMS or, for `phi2`, LayerNorm).
    norm_eps: f32,
    rope_base: Option<f32>,
    sliding_window: Option<u32>,
    vocab: VocabKind,
    embd: GgmlType,
    /// Standard deviation of `token_embd` (the Gemmas scale embeddings by √64 and read
    /// smaller ones).
    embd_std: f32,
    /// `output.weight`'s type, or `None` to tie it to `token_embd`.
    output: Option<GgmlType>,
    /// Types of attn_q (or the fused attn_qkv), attn_k, attn_v, attn_output, ffn_gate, ffn_up
    /// (or the fused gate-and-up), ffn_down; the unused ones are ignored.
    mats: [GgmlType; 7],
    qkv_bias: bool,
    qk_norm: bool,
    /// Other `{arch}.*` keys.
    extra: &'static [(&'static str, Meta)],
    /// The feed-forward networks as mixtures of experts (types: `mats`' gate, up, down).
    moe: Option<MoeSpec>,
}

/// A mixture of experts' shape.
#[derive(Clone, Copy)]
struct MoeSpec {
    n_expert: usize,
    n_used: usize,
    /// Each expert's width, written as `expert_feed_forward_length` (Mixtral's is `n_ff`,
    /// which it does not write).
    n_ff_exp: usize,
    write_n_ff_exp: bool,
    /// A shared expert of this width (`expert_shared_feed_forward_length`): gated by
    /// `ffn_gate_inp_shexp` (Qwen2-MoE) or not (Granite-MoE).
    shared: Option<usize>,
    shared_gate: bool,
    /// Q and K normed over whole rows (OLMoE), which needs as many K heads as Q heads.
    whole_row_qk_norm: bool,
}

impl Spec {
    /// Key/value heads: grouped, except for OLMoE's whole-row K norm.
    fn n_head_kv(&self) -> usize {
        match self.moe {
            _ if self.layout == Layout::DeepSeek2 => 1,
            Some(m) if m.whole_row_qk_norm => N_HEAD,
            _ => N_HEAD_KV,
        }
    }
}

const N_EMBD: usize = 64;
const N_LAYER: usize = 2;
const N_HEAD: usize = 4;
const N_HEAD_KV: usize = 2;
const N_CTX_TRAIN: u32 = 512;

/// Phi-3's chat tokens, after its SentencePiece vocabulary.
const PHI3_SPECIALS: [&str; 5] = [
    "<|endoftext|>",
    "<|assistant|>",
    "<|end|>",
    "<|user|>",
    "<|system|>",
];

/// Phi-3's LongRoPE factors, one per rotated pair (12 rotated dimensions): long ones that
/// slow the low frequencies down a lot, short ones barely.
const PHI3_FACTORS_LONG: [f32; 6] = [1.0, 1.25, 2.0, 3.5, 6.0, 9.0];
const PHI3_FACTORS_SHORT: [f32; 6] = [1.0, 1.0, 1.05, 1.1, 1.25, 1.5];

fn specs() -> Vec<Spec> {
    use GgmlType::*;
    let pre_norm = Layout::PreNorm { post_norms: false };
    vec![
        Spec {
            file: "model-llama.gguf",
            arch: "llama",
            seed: 12,
            layout: pre_norm,
            n_ff: 128,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: Some(8),
            vocab: VocabKind::Spm,
            embd: F16,
            embd_std: 1.0,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q5_0, Q4_0, Q4_0, Q4_1, Q8_0],
            qkv_bias: false,
            qk_norm: false,
            extra: &[],
            moe: None,
        },
        Spec {
            file: "model-mistral.gguf",
            arch: "mistral",
            seed: 109,
            layout: pre_norm,
            n_ff: 128,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: Some(8),
            vocab: VocabKind::Spm,
            embd: Q8_0,
            embd_std: 1.0,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q4_0, Q5_1, Q5_1, Q8_0],
            qkv_bias: false,
            qk_norm: false,
            extra: &[],
            moe: None,
        },
        Spec {
            file: "model-qwen2.gguf",
            arch: "qwen2",
            seed: 286,
            layout: pre_norm,
            n_ff: 256,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-6,
            rope_base: Some(1_000_000.0),
            sliding_window: None,
            vocab: VocabKind::Qwen,
            embd: Q8_0,
            embd_std: 1.0,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q4_0, Q4_0, Q4_0, Q4_K],
            qkv_bias: true,
            qk_norm: false,
            extra: &[],
            moe: None,
        },
        Spec {
            file: "model-qwen3.gguf",
            arch: "qwen3",
            seed: 382,
            layout: pre_norm,
            n_ff: 256,
            head_dim: 32,
            n_rot: None,
            norm_eps: 1e-6,
            rope_base: Some(1_000_000.0),
            sliding_window: None,
            vocab: VocabKind::Qwen,
            embd: F16,
            embd_std: 1.0,
            output: Some(Q4_0),
            mats: [Q8_0, Q8_0, Q8_0, Q8_0, Q5_0, Q5_0, Q6_K],
            qkv_bias: false,
            qk_norm: true,
            extra: &[],
            moe: None,
        },
        Spec {
            file: "model-gemma.gguf",
            arch: "gemma",
            seed: 6,
            layout: pre_norm,
            n_ff: 128,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-6,
            rope_base: Some(10_000.0),
            sliding_window: None,
            vocab: VocabKind::Spm,
            embd: Q8_0,
            embd_std: 0.25,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q4_0, Q5_0, Q5_0, Q8_0],
            qkv_bias: false,
            qk_norm: false,
            extra: &[],
            moe: None,
        },
        Spec {
            file: "model-gemma2.gguf",
            arch: "gemma2",
            seed: 28,
            layout: Layout::PreNorm { post_norms: true },
            n_ff: 256,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-6,
            rope_base: Some(10_000.0),
            sliding_window: Some(8),
            vocab: VocabKind::Spm,
            embd: Q8_0,
            embd_std: 0.25,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q5_0, Q4_1, Q4_1, Q4_K],
            qkv_bias: false,
            qk_norm: false,
            extra: &[
                ("attn_logit_softcapping", Meta::F32(4.0)),
                ("final_logit_softcapping", Meta::F32(10.0)),
            ],
            moe: None,
        },
        Spec {
            file: "model-gemma3.gguf",
            arch: "gemma3",
            seed: 199,
            layout: Layout::PreNorm { post_norms: true },
            n_ff: 256,
            head_dim: 32,
            n_rot: None,
            norm_eps: 1e-6,
            rope_base: Some(1_000_000.0),
            sliding_window: Some(8),
            vocab: VocabKind::Spm,
            embd: Q8_0,
            embd_std: 0.25,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q5_1, Q4_0, Q4_0, Q6_K],
            qkv_bias: false,
            qk_norm: true,
            extra: &[
                (
                    "attention.sliding_window_pattern",
                    Meta::Bools(&[false, true]),
                ),
                ("rope.freq_base_swa", Meta::F32(10_000.0)),
            ],
            moe: None,
        },
        Spec {
            file: "model-phi2.gguf",
            arch: "phi2",
            seed: 52,
            layout: Layout::Phi2,
            n_ff: 256,
            head_dim: 16,
            n_rot: Some(8),
            norm_eps: 1e-5,
            rope_base: None,
            sliding_window: None,
            vocab: VocabKind::Phi2,
            embd: F16,
            embd_std: 1.0,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q8_0, Q5_0, Q8_0, Q4_1, Q4_K],
            qkv_bias: true,
            qk_norm: false,
            extra: &[],
            moe: None,
        },
        Spec {
            file: "model-phi3.gguf",
            arch: "phi3",
            seed: 328,
            layout: Layout::Phi3,
            n_ff: 128,
            head_dim: 16,
            n_rot: Some(12),
            norm_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: Some(8),
            vocab: VocabKind::Phi3,
            embd: Q8_0,
            embd_std: 1.0,
            output: Some(Q4_1),
            mats: [Q8_0, Q8_0, Q8_0, Q4_0, Q5_1, Q5_1, Q8_0],
            qkv_bias: false,
            qk_norm: false,
            extra: &[
                ("rope.scaling.original_context_length", Meta::U32(256)),
                // LongRoPE's sqrt(1 + ln(512 / 256) / ln(256)), as the converter computes it.
                ("rope.scaling.attn_factor", Meta::F32(1.060_660_2)),
            ],
            moe: None,
        },
        Spec {
            file: "model-mixtral.gguf",
            arch: "llama",
            seed: 6,
            layout: pre_norm,
            n_ff: 96,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-5,
            rope_base: Some(1_000_000.0),
            sliding_window: None,
            vocab: VocabKind::Spm,
            embd: Q8_0,
            embd_std: 1.0,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q8_0, Q4_0, Q5_1, Q4_1, Q5_0],
            qkv_bias: false,
            qk_norm: false,
            extra: &[],
            moe: Some(MoeSpec {
                n_expert: 6,
                n_used: 2,
                n_ff_exp: 96,
                write_n_ff_exp: false,
                shared: None,
                shared_gate: false,
                whole_row_qk_norm: false,
            }),
        },
        Spec {
            file: "model-qwen2moe.gguf",
            arch: "qwen2moe",
            seed: 15,
            layout: pre_norm,
            n_ff: 160,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-6,
            rope_base: Some(1_000_000.0),
            sliding_window: None,
            vocab: VocabKind::Qwen,
            embd: Q8_0,
            embd_std: 1.0,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q8_0, Q4_0, Q5_1, Q5_1, Q8_0],
            qkv_bias: true,
            qk_norm: false,
            extra: &[],
            moe: Some(MoeSpec {
                n_expert: 4,
                n_used: 2,
                n_ff_exp: 64,
                write_n_ff_exp: true,
                shared: Some(160),
                shared_gate: true,
                whole_row_qk_norm: false,
            }),
        },
        Spec {
            file: "model-qwen3moe.gguf",
            arch: "qwen3moe",
            seed: 10,
            layout: pre_norm,
            n_ff: 192,
            head_dim: 32,
            n_rot: None,
            norm_eps: 1e-6,
            rope_base: Some(1_000_000.0),
            sliding_window: None,
            vocab: VocabKind::Qwen,
            embd: Q8_0,
            embd_std: 1.0,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q8_0, Q4_1, Q5_0, Q8_0],
            qkv_bias: false,
            qk_norm: true,
            extra: &[],
            moe: Some(MoeSpec {
                n_expert: 8,
                n_used: 3,
                n_ff_exp: 64,
                write_n_ff_exp: true,
                shared: None,
                shared_gate: false,
                whole_row_qk_norm: false,
            }),
        },
        Spec {
            file: "model-granite.gguf",
            arch: "granite",
            seed: 3,
            layout: pre_norm,
            n_ff: 128,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: None,
            vocab: VocabKind::Spm,
            embd: Q8_0,
            embd_std: 0.5,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q5_0, Q5_1, Q4_1, Q8_0],
            qkv_bias: false,
            qk_norm: false,
            extra: &[
                ("embedding_scale", Meta::F32(2.0)),
                ("residual_scale", Meta::F32(0.6)),
                ("attention.scale", Meta::F32(0.2)),
                ("logit_scale", Meta::F32(1.5)),
            ],
            moe: None,
        },
        Spec {
            file: "model-granitemoe.gguf",
            arch: "granitemoe",
            seed: 4,
            layout: pre_norm,
            n_ff: 64,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: None,
            vocab: VocabKind::Spm,
            embd: Q8_0,
            embd_std: 0.5,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q8_0, Q5_0, Q5_1, Q4_1, Q8_0],
            qkv_bias: false,
            qk_norm: false,
            extra: &[
                ("embedding_scale", Meta::F32(2.0)),
                ("residual_scale", Meta::F32(0.6)),
                ("attention.scale", Meta::F32(0.2)),
                ("logit_scale", Meta::F32(1.5)),
            ],
            moe: Some(MoeSpec {
                n_expert: 4,
                n_used: 2,
                n_ff_exp: 64,
                write_n_ff_exp: false,
                shared: Some(96),
                shared_gate: false,
                whole_row_qk_norm: false,
            }),
        },
        Spec {
            file: "model-phimoe.gguf",
            arch: "phimoe",
            seed: 3,
            layout: Layout::PhiMoe,
            n_ff: 64,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: None,
            vocab: VocabKind::Phi3,
            embd: Q8_0,
            embd_std: 1.0,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q8_0, Q5_0, Q5_1, Q4_1, Q8_0],
            qkv_bias: true,
            qk_norm: false,
            extra: &[],
            moe: Some(MoeSpec {
                n_expert: 4,
                n_used: 2,
                n_ff_exp: 64,
                write_n_ff_exp: false,
                shared: None,
                shared_gate: false,
                whole_row_qk_norm: false,
            }),
        },
        Spec {
            file: "model-olmoe.gguf",
            arch: "olmoe",
            seed: 1,
            layout: pre_norm,
            n_ff: 64,
            head_dim: 16,
            n_rot: None,
            norm_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: None,
            vocab: VocabKind::Qwen,
            embd: Q8_0,
            embd_std: 1.0,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q8_0, Q5_0, Q4_1, Q4_1, Q8_0],
            qkv_bias: false,
            qk_norm: true,
            extra: &[],
            moe: Some(MoeSpec {
                n_expert: 5,
                n_used: 2,
                n_ff_exp: 64,
                write_n_ff_exp: false,
                shared: None,
                shared_gate: false,
                whole_row_qk_norm: true,
            }),
        },
        // gpt-oss as its converter writes it: MXFP4 experts, YaRN (factor 4 over an original
        // context of 128, so that the 20-token references see the ramp), a window of 8 on the
        // even layers.
        Spec {
            file: "model-gpt-oss.gguf",
            arch: "gpt-oss",
            seed: 23,
            layout: Layout::GptOss,
            n_ff: 64,
            head_dim: 16,
            n_rot: Some(16),
            norm_eps: 1e-5,
            rope_base: Some(150_000.0),
            sliding_window: Some(8),
            vocab: VocabKind::Qwen,
            embd: Q8_0,
            embd_std: 1.0,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q8_0, Q8_0, MXFP4, MXFP4, MXFP4],
            qkv_bias: true,
            qk_norm: false,
            extra: &[
                ("rope.scaling.type", Meta::Str("yarn")),
                ("rope.scaling.factor", Meta::F32(4.0)),
                ("rope.scaling.original_context_length", Meta::U32(128)),
            ],
            moe: Some(MoeSpec {
                n_expert: 6,
                n_used: 2,
                n_ff_exp: 64,
                write_n_ff_exp: true,
                shared: None,
                shared_gate: false,
                whole_row_qk_norm: false,
            }),
        },
        // DeepSeek-V3's routing (sigmoid scores, a selection bias, 3 of 8 experts from the 2
        // best of 4 groups, normalised and scaled by 2.5, one shared expert) behind a dense
        // first block, latent attention ([`DEEPSEEK2`]), and YaRN with DeepSeek's
        // `yarn_log_multiplier`.
        Spec {
            file: "model-deepseek2.gguf",
            arch: "deepseek2",
            seed: 2,
            layout: Layout::DeepSeek2,
            n_ff: 96,
            head_dim: N_EMBD / N_HEAD,
            n_rot: Some(DEEPSEEK2.rope),
            norm_eps: 1e-6,
            rope_base: Some(10_000.0),
            sliding_window: None,
            vocab: VocabKind::Qwen,
            embd: Q8_0,
            embd_std: 1.0,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q8_0, Q8_0, Q4_0, Q5_0, Q8_0],
            qkv_bias: false,
            qk_norm: false,
            extra: &[
                ("attention.key_length", Meta::U32(80)),
                ("attention.value_length", Meta::U32(64)),
                ("attention.key_length_mla", Meta::U32(48)),
                ("attention.value_length_mla", Meta::U32(32)),
                ("attention.kv_lora_rank", Meta::U32(64)),
                ("attention.q_lora_rank", Meta::U32(96)),
                ("leading_dense_block_count", Meta::U32(1)),
                ("expert_shared_count", Meta::U32(1)),
                ("expert_weights_scale", Meta::F32(2.5)),
                ("expert_weights_norm", Meta::Bool(true)),
                ("expert_gating_func", Meta::U32(2)),
                ("expert_group_count", Meta::U32(4)),
                ("expert_group_used_count", Meta::U32(2)),
                ("rope.scaling.type", Meta::Str("yarn")),
                ("rope.scaling.factor", Meta::F32(4.0)),
                ("rope.scaling.original_context_length", Meta::U32(128)),
                ("rope.scaling.yarn_log_multiplier", Meta::F32(0.0707)),
            ],
            moe: Some(MoeSpec {
                n_expert: 8,
                n_used: 3,
                n_ff_exp: 32,
                write_n_ff_exp: true,
                shared: Some(32),
                shared_gate: false,
                whole_row_qk_norm: false,
            }),
        },
    ]
}

/// Every model fixture, by file name.
pub fn files() -> Result<Vec<(String, Vec<u8>)>> {
    specs()
        .iter()
        .map(|s| Ok((s.file.to_string(), model(s)?)))
        .collect()
}

/// A tensor to write: name, type, shape (ggml order) and f32 values.
struct Tensor {
    name: String,
    ty: GgmlType,
    shape: Vec<u64>,
    values: Vec<f32>,
}

/// The tensors of a model, filled from one generator.
struct Tensors {
    rng: Rng,
    list: Vec<Tensor>,
}

impl Tensors {
    /// Uniform values of standard deviation `std` around `mean`.
    fn fill(&mut self, name: String, ty: GgmlType, shape: &[usize], mean: f32, std: f32) {
        let n: usize = shape.iter().product();
        let a = std * 3f32.sqrt();
        let values = (0..n).map(|_| mean + a * self.rng.unit()).collect();
        self.push(name, ty, shape, values);
    }

    fn push(&mut self, name: String, ty: GgmlType, shape: &[usize], values: Vec<f32>) {
        self.list.push(Tensor {
            name,
            ty,
            shape: shape.iter().map(|&d| d as u64).collect(),
            values,
        });
    }
}

/// Standard deviation of a matrix's entries: `gain / sqrt(cols)`. Gains keep the residual
/// stream O(1), attention neither uniform nor one-hot, and logits spread by a few units so the
/// argmax is clear.
fn mat_std(cols: usize, gain: f32) -> f32 {
    gain / (cols as f32).sqrt()
}

/// Pre-norm blocks: the llama family and the Gemmas.
fn pre_norm_tensors(s: &Spec, ts: &mut Tensors, post_norms: bool) {
    use GgmlType::F32;
    let (d, hd, ff) = (N_EMBD, s.head_dim, s.n_ff);
    let (q_out, kv_out) = (N_HEAD * hd, s.n_head_kv() * hd);
    let [wq, wk, wv, wo, wg, wu, wd] = s.mats;
    for i in 0..N_LAYER {
        let t = |x: &str| format!("blk.{i}.{x}");
        ts.fill(t("attn_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(t("attn_q.weight"), wq, &[d, q_out], 0.0, mat_std(d, 1.6));
        ts.fill(t("attn_k.weight"), wk, &[d, kv_out], 0.0, mat_std(d, 1.6));
        ts.fill(t("attn_v.weight"), wv, &[d, kv_out], 0.0, mat_std(d, 1.0));
        if s.qkv_bias {
            ts.fill(t("attn_q.bias"), F32, &[q_out], 0.0, 0.5);
            ts.fill(t("attn_k.bias"), F32, &[kv_out], 0.0, 0.5);
            ts.fill(t("attn_v.bias"), F32, &[kv_out], 0.0, 0.2);
        }
        if s.qk_norm {
            let (q, k) = match s.moe {
                Some(m) if m.whole_row_qk_norm => (q_out, kv_out),
                _ => (hd, hd),
            };
            ts.fill(t("attn_q_norm.weight"), F32, &[q], 1.2, 0.3);
            ts.fill(t("attn_k_norm.weight"), F32, &[k], 1.2, 0.3);
        }
        let o_std = mat_std(q_out, 1.0);
        ts.fill(t("attn_output.weight"), wo, &[q_out, d], 0.0, o_std);
        if post_norms {
            ts.fill(t("post_attention_norm.weight"), F32, &[d], 1.0, 0.2);
        }
        ts.fill(t("ffn_norm.weight"), F32, &[d], 1.0, 0.2);
        if let Some(m) = s.moe {
            let (ne, fe) = (m.n_expert, m.n_ff_exp);
            // The router stays F32, as llama-quantize leaves it; a wide spread of logits
            // keeps the choice of experts far from a tie.
            ts.fill(
                t("ffn_gate_inp.weight"),
                F32,
                &[d, ne],
                0.0,
                mat_std(d, 4.0),
            );
            ts.fill(
                t("ffn_gate_exps.weight"),
                wg,
                &[d, fe, ne],
                0.0,
                mat_std(d, 1.5),
            );
            ts.fill(
                t("ffn_up_exps.weight"),
                wu,
                &[d, fe, ne],
                0.0,
                mat_std(d, 1.5),
            );
            ts.fill(
                t("ffn_down_exps.weight"),
                wd,
                &[fe, d, ne],
                0.0,
                mat_std(fe, 1.0),
            );
            if let Some(sh) = m.shared {
                if m.shared_gate {
                    ts.fill(
                        t("ffn_gate_inp_shexp.weight"),
                        F32,
                        &[d],
                        0.0,
                        mat_std(d, 2.0),
                    );
                }
                ts.fill(
                    t("ffn_gate_shexp.weight"),
                    wg,
                    &[d, sh],
                    0.0,
                    mat_std(d, 1.5),
                );
                ts.fill(t("ffn_up_shexp.weight"), wu, &[d, sh], 0.0, mat_std(d, 1.5));
                ts.fill(
                    t("ffn_down_shexp.weight"),
                    wd,
                    &[sh, d],
                    0.0,
                    mat_std(sh, 1.0),
                );
            }
        } else {
            ts.fill(t("ffn_gate.weight"), wg, &[d, ff], 0.0, mat_std(d, 1.5));
            ts.fill(t("ffn_up.weight"), wu, &[d, ff], 0.0, mat_std(d, 1.5));
            ts.fill(t("ffn_down.weight"), wd, &[ff, d], 0.0, mat_std(ff, 1.0));
        }
        if post_norms {
            ts.fill(t("post_ffw_norm.weight"), F32, &[d], 1.0, 0.2);
        }
    }
    ts.fill("output_norm.weight".into(), F32, &[d], 1.0, 0.2);
}

/// Phi-2's blocks: LayerNorm (weight and bias), fused Q/K/V with a fused bias, biases on every
/// matrix; the output norm's bias (the output matrix and its bias follow in `model`).
fn phi2_tensors(s: &Spec, ts: &mut Tensors) {
    use GgmlType::F32;
    let (d, ff) = (N_EMBD, s.n_ff);
    let qkv = d + 2 * N_HEAD_KV * s.head_dim;
    let [wqkv, _, _, wo, _, wu, wd] = s.mats;
    for i in 0..N_LAYER {
        let t = |x: &str| format!("blk.{i}.{x}");
        ts.fill(t("attn_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(t("attn_norm.bias"), F32, &[d], 0.0, 0.1);
        ts.fill(t("attn_qkv.weight"), wqkv, &[d, qkv], 0.0, mat_std(d, 1.4));
        ts.fill(t("attn_qkv.bias"), F32, &[qkv], 0.0, 0.3);
        ts.fill(t("attn_output.weight"), wo, &[d, d], 0.0, mat_std(d, 1.0));
        ts.fill(t("attn_output.bias"), F32, &[d], 0.0, 0.1);
        ts.fill(t("ffn_up.weight"), wu, &[d, ff], 0.0, mat_std(d, 1.5));
        ts.fill(t("ffn_up.bias"), F32, &[ff], 0.0, 0.3);
        ts.fill(t("ffn_down.weight"), wd, &[ff, d], 0.0, mat_std(ff, 1.0));
        ts.fill(t("ffn_down.bias"), F32, &[d], 0.0, 0.1);
    }
    ts.fill("output_norm.weight".into(), F32, &[d], 1.0, 0.2);
    ts.fill("output_norm.bias".into(), F32, &[d], 0.0, 0.1);
}

/// Phi-3's blocks: fused Q/K/V, fused gate-and-up; the RoPE factors.
fn phi3_tensors(s: &Spec, ts: &mut Tensors) {
    use GgmlType::F32;
    let (d, ff) = (N_EMBD, s.n_ff);
    let qkv = d + 2 * N_HEAD_KV * s.head_dim;
    let [wqkv, _, _, wo, _, wgu, wd] = s.mats;
    for i in 0..N_LAYER {
        let t = |x: &str| format!("blk.{i}.{x}");
        ts.fill(t("attn_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(t("attn_qkv.weight"), wqkv, &[d, qkv], 0.0, mat_std(d, 1.6));
        ts.fill(t("attn_output.weight"), wo, &[d, d], 0.0, mat_std(d, 1.0));
        ts.fill(t("ffn_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(t("ffn_up.weight"), wgu, &[d, 2 * ff], 0.0, mat_std(d, 1.5));
        ts.fill(t("ffn_down.weight"), wd, &[ff, d], 0.0, mat_std(ff, 1.0));
    }
    ts.fill("output_norm.weight".into(), F32, &[d], 1.0, 0.2);
    let n = PHI3_FACTORS_LONG.len();
    ts.push(
        "rope_factors_long.weight".into(),
        F32,
        &[n],
        PHI3_FACTORS_LONG.to_vec(),
    );
    ts.push(
        "rope_factors_short.weight".into(),
        F32,
        &[n],
        PHI3_FACTORS_SHORT.to_vec(),
    );
}

/// PhiMoE's blocks.
fn phimoe_tensors(s: &Spec, ts: &mut Tensors) {
    use GgmlType::F32;
    let (d, hd) = (N_EMBD, s.head_dim);
    let kv = s.n_head_kv() * hd;
    let [wq, wk, wv, wo, wg, wu, wd] = s.mats;
    let m = s.moe.expect("PhiMoE has experts");
    let (ne, fe) = (m.n_expert, m.n_ff_exp);
    for i in 0..N_LAYER {
        let t = |x: &str| format!("blk.{i}.{x}");
        ts.fill(t("attn_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(t("attn_norm.bias"), F32, &[d], 0.0, 0.1);
        ts.fill(t("attn_q.weight"), wq, &[d, d], 0.0, mat_std(d, 1.6));
        ts.fill(t("attn_k.weight"), wk, &[d, kv], 0.0, mat_std(d, 1.6));
        ts.fill(t("attn_v.weight"), wv, &[d, kv], 0.0, mat_std(d, 1.0));
        ts.fill(t("attn_q.bias"), F32, &[d], 0.0, 0.3);
        ts.fill(t("attn_k.bias"), F32, &[kv], 0.0, 0.3);
        ts.fill(t("attn_v.bias"), F32, &[kv], 0.0, 0.2);
        ts.fill(t("attn_output.weight"), wo, &[d, d], 0.0, mat_std(d, 1.0));
        ts.fill(t("attn_output.bias"), F32, &[d], 0.0, 0.1);
        ts.fill(t("ffn_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(t("ffn_norm.bias"), F32, &[d], 0.0, 0.1);
        ts.fill(
            t("ffn_gate_inp.weight"),
            F32,
            &[d, ne],
            0.0,
            mat_std(d, 4.0),
        );
        ts.fill(
            t("ffn_gate_exps.weight"),
            wg,
            &[d, fe, ne],
            0.0,
            mat_std(d, 1.5),
        );
        ts.fill(
            t("ffn_up_exps.weight"),
            wu,
            &[d, fe, ne],
            0.0,
            mat_std(d, 1.5),
        );
        ts.fill(
            t("ffn_down_exps.weight"),
            wd,
            &[fe, d, ne],
            0.0,
            mat_std(fe, 1.0),
        );
    }
    ts.fill("output_norm.weight".into(), F32, &[d], 1.0, 0.2);
    ts.fill("output_norm.bias".into(), F32, &[d], 0.0, 0.1);
}

/// gpt-oss' blocks. The gate and up products spread wide enough that the clamped SwiGLU's
/// limit (7) is reached, and the sinks lie both above and among the attention logits.
fn gpt_oss_tensors(s: &Spec, ts: &mut Tensors) {
    use GgmlType::F32;
    let (d, hd) = (N_EMBD, s.head_dim);
    let (q_out, kv_out) = (N_HEAD * hd, s.n_head_kv() * hd);
    let [wq, wk, wv, wo, wg, wu, wd] = s.mats;
    let m = s.moe.expect("gpt-oss has experts");
    let (ne, fe) = (m.n_expert, m.n_ff_exp);
    for i in 0..N_LAYER {
        let t = |x: &str| format!("blk.{i}.{x}");
        ts.fill(t("attn_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(t("attn_q.weight"), wq, &[d, q_out], 0.0, mat_std(d, 1.6));
        ts.fill(t("attn_q.bias"), F32, &[q_out], 0.0, 0.3);
        ts.fill(t("attn_k.weight"), wk, &[d, kv_out], 0.0, mat_std(d, 1.6));
        ts.fill(t("attn_k.bias"), F32, &[kv_out], 0.0, 0.3);
        ts.fill(t("attn_v.weight"), wv, &[d, kv_out], 0.0, mat_std(d, 1.0));
        ts.fill(t("attn_v.bias"), F32, &[kv_out], 0.0, 0.2);
        ts.fill(
            t("attn_output.weight"),
            wo,
            &[q_out, d],
            0.0,
            mat_std(q_out, 1.0),
        );
        ts.fill(t("attn_output.bias"), F32, &[d], 0.0, 0.1);
        ts.fill(t("attn_sinks.weight"), F32, &[N_HEAD], 0.5, 2.0);
        ts.fill(t("post_attention_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(
            t("ffn_gate_inp.weight"),
            F32,
            &[d, ne],
            0.0,
            mat_std(d, 4.0),
        );
        ts.fill(t("ffn_gate_inp.bias"), F32, &[ne], 0.0, 0.5);
        ts.fill(
            t("ffn_gate_exps.weight"),
            wg,
            &[d, fe, ne],
            0.0,
            mat_std(d, 4.0),
        );
        ts.fill(t("ffn_gate_exps.bias"), F32, &[fe, ne], 0.0, 1.0);
        ts.fill(
            t("ffn_up_exps.weight"),
            wu,
            &[d, fe, ne],
            0.0,
            mat_std(d, 4.0),
        );
        ts.fill(t("ffn_up_exps.bias"), F32, &[fe, ne], 0.0, 1.0);
        ts.fill(
            t("ffn_down_exps.weight"),
            wd,
            &[fe, d, ne],
            0.0,
            mat_std(fe, 0.1),
        );
        ts.fill(t("ffn_down_exps.bias"), F32, &[d, ne], 0.0, 0.1);
    }
    ts.fill("output_norm.weight".into(), F32, &[d], 1.0, 0.2);
}

/// DeepSeek 2's blocks: block 0 dense, block 1 with experts.
fn deepseek2_tensors(s: &Spec, ts: &mut Tensors) {
    use GgmlType::{F32, Q8_0};
    let d = N_EMBD;
    let LatentShape {
        nope,
        rope,
        v,
        kv_lora,
        q_lora,
    } = DEEPSEEK2;
    let [_, _, _, _, wg, wu, wd] = s.mats;
    let m = s.moe.expect("DeepSeek 2 has experts");
    let (ne, fe) = (m.n_expert, m.n_ff_exp);
    let q_out = N_HEAD * (nope + rope);
    for i in 0..N_LAYER {
        let t = |x: &str| format!("blk.{i}.{x}");
        ts.fill(t("attn_norm.weight"), F32, &[d], 1.0, 0.2);
        ts.fill(t("attn_q_a_norm.weight"), F32, &[q_lora], 1.0, 0.2);
        ts.fill(t("attn_kv_a_norm.weight"), F32, &[kv_lora], 1.0, 0.2);
        ts.fill(
            t("attn_q_a.weight"),
            Q8_0,
            &[d, q_lora],
            0.0,
            mat_std(d, 1.0),
        );
        ts.fill(
            t("attn_q_b.weight"),
            Q8_0,
            &[q_lora, q_out],
            0.0,
            mat_std(q_lora, 1.6),
        );
        let kv_a = kv_lora + rope;
        ts.fill(
            t("attn_kv_a_mqa.weight"),
            Q8_0,
            &[d, kv_a],
            0.0,
            mat_std(d, 1.6),
        );
        ts.fill(
            t("attn_k_b.weight"),
            Q8_0,
            &[nope, kv_lora, N_HEAD],
            0.0,
            mat_std(nope, 1.0),
        );
        ts.fill(
            t("attn_v_b.weight"),
            Q8_0,
            &[kv_lora, v, N_HEAD],
            0.0,
            mat_std(kv_lora, 1.0),
        );
        ts.fill(
            t("attn_output.weight"),
            Q8_0,
            &[N_HEAD * v, d],
            0.0,
            mat_std(N_HEAD * v, 1.0),
        );
        ts.fill(t("ffn_norm.weight"), F32, &[d], 1.0, 0.2);
        if i == 0 {
            let ff = s.n_ff;
            ts.fill(t("ffn_gate.weight"), wg, &[d, ff], 0.0, mat_std(d, 1.5));
            ts.fill(t("ffn_down.weight"), wd, &[ff, d], 0.0, mat_std(ff, 1.0));
            ts.fill(t("ffn_up.weight"), wu, &[d, ff], 0.0, mat_std(d, 1.5));
            continue;
        }
        ts.fill(
            t("ffn_gate_inp.weight"),
            F32,
            &[d, ne],
            0.0,
            mat_std(d, 4.0),
        );
        ts.fill(t("exp_probs_b.bias"), F32, &[ne], 0.0, 0.3);
        ts.fill(
            t("ffn_down_exps.weight"),
            wd,
            &[fe, d, ne],
            0.0,
            mat_std(fe, 1.0),
        );
        ts.fill(
            t("ffn_gate_exps.weight"),
            wg,
            &[d, fe, ne],
            0.0,
            mat_std(d, 1.5),
        );
        ts.fill(
            t("ffn_up_exps.weight"),
            wu,
            &[d, fe, ne],
            0.0,
            mat_std(d, 1.5),
        );
        let sh = m.shared.expect("a shared expert");
        ts.fill(
            t("ffn_gate_shexp.weight"),
            wg,
            &[d, sh],
            0.0,
            mat_std(d, 1.5),
        );
        ts.fill(
            t("ffn_down_shexp.weight"),
            wd,
            &[sh, d],
            0.0,
            mat_std(sh, 1.0),
        );
        ts.fill(t("ffn_up_shexp.weight"), wu, &[d, sh], 0.0, mat_std(d, 1.5));
    }
    ts.fill("output_norm.weight".into(), F32, &[d], 1.0, 0.2);
}

fn model(s: &Spec) -> Result<Vec<u8>> {
    let ((tokens, scores, types), merges) = match s.vocab {
        VocabKind::Spm => (spm_vocab(&[])?, Vec::new()),
        VocabKind::Phi3 => (spm_vocab(&PHI3_SPECIALS)?, Vec::new()),
        VocabKind::Qwen => bpe_vocab(&["<|endoftext|>", "<|im_start|>", "<|im_end|>"])?,
        VocabKind::Phi2 => bpe_vocab(&["<|endoftext|>"])?,
    };
    let n_vocab = tokens.len();
    let mut ts = Tensors {
        rng: Rng::new(s.seed),
        list: Vec::new(),
    };
    let d = N_EMBD;
    ts.fill(
        "token_embd.weight".into(),
        s.embd,
        &[d, n_vocab],
        0.0,
        s.embd_std,
    );
    match s.layout {
        Layout::PreNorm { post_norms } => pre_norm_tensors(s, &mut ts, post_norms),
        Layout::Phi2 => phi2_tensors(s, &mut ts),
        Layout::Phi3 => phi3_tensors(s, &mut ts),
        Layout::PhiMoe => phimoe_tensors(s, &mut ts),
        Layout::GptOss => gpt_oss_tensors(s, &mut ts),
        Layout::DeepSeek2 => deepseek2_tensors(s, &mut ts),
    }
    if let Some(ty) = s.output {
        let std = mat_std(d, 3.0);
        ts.fill("output.weight".into(), ty, &[d, n_vocab], 0.0, std);
        if matches!(s.layout, Layout::Phi2 | Layout::PhiMoe) {
            ts.fill("output.bias".into(), GgmlType::F32, &[n_vocab], 0.0, 0.5);
        }
    }

    let a = s.arch;
    let hd = s.head_dim;
    let k = |suffix: &str| format!("{a}.{suffix}");
    let mut b = GgufBuilder::new();
    let norm_eps_key = if s.layout == Layout::Phi2 {
        "attention.layer_norm_epsilon"
    } else {
        "attention.layer_norm_rms_epsilon"
    };
    b.set("general.architecture", a)
        .set("general.name", format!("tiny random {a}"))
        .set("general.quantization_version", 2u32)
        .set(&k("vocab_size"), n_vocab as u32)
        .set(&k("context_length"), N_CTX_TRAIN)
        .set(&k("embedding_length"), N_EMBD as u32)
        .set(&k("block_count"), N_LAYER as u32)
        .set(&k("feed_forward_length"), s.n_ff as u32)
        .set(&k("attention.head_count"), N_HEAD as u32)
        .set(&k("attention.head_count_kv"), s.n_head_kv() as u32)
        .set(&k(norm_eps_key), s.norm_eps);
    if let Some(base) = s.rope_base {
        b.set(&k("rope.freq_base"), base);
    }
    if hd != N_EMBD / N_HEAD {
        b.set(&k("attention.key_length"), hd as u32)
            .set(&k("attention.value_length"), hd as u32);
    }
    if matches!(a, "llama" | "mistral") {
        b.set(&k("rope.dimension_count"), hd as u32);
    }
    if let Some(n_rot) = s.n_rot {
        b.set(&k("rope.dimension_count"), n_rot as u32);
    }
    if let Some(w) = s.sliding_window {
        b.set(&k("attention.sliding_window"), w);
    }
    if let Some(m) = s.moe {
        b.set(&k("expert_count"), m.n_expert as u32)
            .set(&k("expert_used_count"), m.n_used as u32);
        if m.write_n_ff_exp {
            b.set(&k("expert_feed_forward_length"), m.n_ff_exp as u32);
        }
        // DeepSeek 2 counts its shared experts instead (`expert_shared_count`).
        if let (Some(sh), false) = (m.shared, s.layout == Layout::DeepSeek2) {
            b.set(&k("expert_shared_feed_forward_length"), sh as u32);
        }
    }
    for (key, value) in s.extra {
        match value {
            Meta::U32(v) => b.set(&k(key), *v),
            Meta::F32(v) => b.set(&k(key), *v),
            Meta::Str(v) => b.set(&k(key), *v),
            Meta::Bool(v) => b.set(&k(key), *v),
            Meta::Bools(v) => b.set(&k(key), v.to_vec()),
        };
    }
    let n_tokens = tokens.len();
    let id = |t: &str| tokens.iter().position(|x| x == t).map(|i| i as u32);
    match s.vocab {
        VocabKind::Spm | VocabKind::Phi3 => {
            let eos = match s.vocab {
                VocabKind::Phi3 => id("<|endoftext|>").unwrap_or(2),
                _ => 2,
            };
            b.set("tokenizer.ggml.model", "llama")
                .set("tokenizer.ggml.pre", "default")
                .set("tokenizer.ggml.tokens", tokens)
                .set("tokenizer.ggml.scores", scores)
                .set("tokenizer.ggml.token_type", types)
                .set("tokenizer.ggml.bos_token_id", 1u32)
                .set("tokenizer.ggml.eos_token_id", eos)
                .set("tokenizer.ggml.unknown_token_id", 0u32)
                .set("tokenizer.ggml.add_bos_token", true)
                .set("tokenizer.ggml.add_eos_token", false);
        }
        VocabKind::Qwen => {
            let (Some(eot), Some(im_end)) = (id("<|endoftext|>"), id("<|im_end|>")) else {
                anyhow::bail!("special tokens missing");
            };
            b.set("tokenizer.ggml.model", "gpt2")
                .set("tokenizer.ggml.pre", "qwen2")
                .set("tokenizer.ggml.tokens", tokens)
                .set("tokenizer.ggml.token_type", types)
                .set("tokenizer.ggml.merges", merges)
                .set("tokenizer.ggml.bos_token_id", eot)
                .set("tokenizer.ggml.eos_token_id", im_end)
                .set("tokenizer.ggml.padding_token_id", eot)
                .set("tokenizer.ggml.add_bos_token", false);
        }
        VocabKind::Phi2 => {
            let Some(eot) = id("<|endoftext|>") else {
                anyhow::bail!("special token missing");
            };
            // As the Phi-2 converter writes it: <|endoftext|> begins, ends and pads; no BOS
            // is added.
            b.set("tokenizer.ggml.model", "gpt2")
                .set("tokenizer.ggml.pre", "phi-2")
                .set("tokenizer.ggml.tokens", tokens)
                .set("tokenizer.ggml.token_type", types)
                .set("tokenizer.ggml.merges", merges)
                .set("tokenizer.ggml.bos_token_id", eot)
                .set("tokenizer.ggml.eos_token_id", eot)
                .set("tokenizer.ggml.unknown_token_id", eot)
                .set("tokenizer.ggml.add_bos_token", false);
        }
    }
    ensure!(n_tokens == n_vocab, "vocabulary size mismatch");
    for t in &ts.list {
        b.add_tensor(&t.name, t.ty, &t.shape)?;
    }
    let mut out = Vec::new();
    let mut w = b.write(&mut out)?;
    for t in &ts.list {
        let size = t.ty.tensor_size(&t.shape).expect("valid shape") as usize;
        let mut bytes = vec![0u8; size];
        gguf_quant::quantize_row(t.ty, &t.values, &mut bytes)?;
        w.write_tensor(&bytes)?;
    }
    w.finish()?;
    Ok(out)
}

type VocabLists = (Vec<String>, Vec<f32>, Vec<i32>);

/// Words whose pieces (SentencePiece) or merge chains (BPE) the vocabularies hold.
const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "it", "that", "hello", "world", "model", "token", "tiny",
    "test", "llama", "qwen", "mistral", "random", "weight", "window",
];

/// A SentencePiece vocabulary as llama.cpp's converter writes one: `<unk>`, `<s>`, `</s>`, the
/// 256 byte-fallback tokens `<0xXX>`, then `▁`, the letters, and every `▁`-prefix of each word,
/// scored so that longer pieces merge first, then the `specials` (control tokens).
fn spm_vocab(specials: &[&str]) -> Result<VocabLists> {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![UNKNOWN, CONTROL, CONTROL];
    for byte in 0..=255u8 {
        tokens.push(format!("<0x{byte:02X}>"));
        types.push(BYTE);
    }
    let mut pieces: Vec<String> = vec!["\u{2581}".into()];
    pieces.extend(('a'..='z').map(String::from));
    for w in WORDS {
        let word: Vec<char> = format!("\u{2581}{w}").chars().collect();
        for end in 2..=word.len() {
            let p: String = word[..end].iter().collect();
            if !pieces.contains(&p) {
                pieces.push(p);
            }
        }
    }
    let mut scores = vec![0.0f32; tokens.len()];
    for (i, p) in pieces.into_iter().enumerate() {
        // Longer pieces score higher so whole words win; ties broken by order.
        let len = p.chars().count() as f32;
        scores.push(len - 1e-3 * i as f32 - 100.0);
        tokens.push(p);
        types.push(NORMAL);
    }
    // Added control tokens come last, as the converters append them.
    for &special in specials {
        tokens.push(special.into());
        scores.push(0.0);
        types.push(CONTROL);
    }
    check_unique(&tokens)?;
    Ok((tokens, scores, types))
}

/// GPT-2's byte-to-character map (`bytes_to_unicode`).
pub(crate) fn byte_char(b: u8) -> char {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    if printable(b) {
        return char::from(b);
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).expect("valid char")
}

/// A byte-level BPE vocabulary in Qwen's layout: the 256 byte characters, one token per merge
/// (each word merged left to right, `Ġ`-prefixed and bare), then the `specials` (control
/// tokens).
fn bpe_vocab(specials: &[&str]) -> Result<(VocabLists, Vec<String>)> {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let mut merges: Vec<String> = Vec::new();
    let space = byte_char(b' ');
    for w in WORDS {
        for word in [format!("{space}{w}"), w.to_string()] {
            let chars: Vec<char> = word.chars().collect();
            let mut left = chars[0].to_string();
            for &c in &chars[1..] {
                let merged = format!("{left}{c}");
                if !tokens.contains(&merged) {
                    merges.push(format!("{left} {c}"));
                    tokens.push(merged.clone());
                }
                left = merged;
            }
        }
    }
    let mut types = vec![NORMAL; tokens.len()];
    for &special in specials {
        tokens.push(special.into());
        types.push(CONTROL);
    }
    check_unique(&tokens)?;
    Ok(((tokens, Vec::new(), types), merges))
}

fn check_unique(tokens: &[String]) -> Result<()> {
    let unique: std::collections::BTreeSet<&String> = tokens.iter().collect();
    ensure!(unique.len() == tokens.len(), "duplicate token");
    Ok(())
}
