//! The llama family: `llama` (Llama 1-3, SmolLM2, TinyLlama), `mistral` (llama with a sliding
//! attention window), `qwen2` (biases on Q, K and V; NeoX RoPE) and `qwen3` (an RMSNorm on
//! each head of Q and K; NeoX RoPE). Pre-norm blocks: RMSNorm, attention with RoPE, RMSNorm,
//! SwiGLU feed-forward. Llama 3's RoPE scaling comes as a `rope_freqs.weight` table of
//! per-pair frequency factors, applied as llama.cpp applies it.

use super::Architecture;
use crate::error::Result;
use crate::forward::{
    gated_ffn, output_rows, rms_norm_rows, wrote_hidden_states, Gate, Heads, Pass, SelfAttention,
};
use crate::hparams::{Hparams, Reader};
use crate::ops::{add_assign, Rope, Scores};
use crate::weights::{Biases, Loader, Matrix, Qkv};
use gguf_format::tensor_names::{self, TensorName as T};

/// What sets the family's members apart.
#[derive(Debug, Clone, Copy)]
struct Variant {
    /// RoPE rotates the two halves of each head rather than adjacent pairs.
    neox: bool,
    /// Q, K and V must have biases (optional elsewhere). Each family member also takes a fused
    /// `attn_qkv` instead of the three tensors, as llama.cpp does.
    qkv_bias: bool,
    /// Q and K heads are RMS-normed.
    qk_norm: bool,
    /// `attention.sliding_window` applies to every layer.
    sliding_window: bool,
}

impl Variant {
    fn of(arch: &str) -> Variant {
        let plain = Variant {
            neox: false,
            qkv_bias: false,
            qk_norm: false,
            sliding_window: false,
        };
        match arch {
            "mistral" => Variant {
                sliding_window: true,
                ..plain
            },
            "qwen2" => Variant {
                neox: true,
                qkv_bias: true,
                ..plain
            },
            "qwen3" => Variant {
                neox: true,
                qk_norm: true,
                ..plain
            },
            _ => plain,
        }
    }
}

/// One block's tensors.
struct Layer {
    attn_norm: Vec<f32>,
    qkv: Qkv,
    wo: Matrix,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    w_gate: Matrix,
    w_up: Matrix,
    w_down: Matrix,
}

struct Llama {
    hp: Hparams,
    token_embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    /// `output.weight`, or `token_embd` when the model ties them.
    output: Matrix,
    rope: Rope,
    /// `rope_freqs.weight` (Llama 3's RoPE scaling), one factor per rotated pair, if the file
    /// has it: as llama.cpp, every layer's angles are divided by them (`ggml_rope_ext`'s
    /// frequency factors).
    rope_freqs: Option<Vec<f32>>,
    scores: Scores,
}

pub(super) fn load(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>> {
    let name = l.name;
    let variant = Variant::of(arch);
    let r = Reader {
        file: l.metadata(),
        name,
        arch,
    };
    let mut hp = r.common("attention.layer_norm_rms_epsilon")?;
    if variant.sliding_window {
        hp.sliding_window = r.sliding_window()?;
        hp.layer_windows = vec![hp.sliding_window; hp.n_layer];
    }
    hp.n_vocab = l.rows_of(T::TokenEmbd.weight(), hp.n_embd)?;
    let token_embd = l.plain_matrix(T::TokenEmbd.weight(), hp.n_embd, hp.n_vocab)?;
    let (q_out, k_out, v_out) = (
        hp.n_head * hp.head_dim_k,
        hp.n_head_kv * hp.head_dim_k,
        hp.n_head_kv * hp.head_dim_v,
    );
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        let t = |s: &str| tensor_names::block(i, s);
        let biases = if variant.qkv_bias {
            Biases::Required
        } else {
            Biases::Optional
        };
        let norm = |s: &str| {
            variant
                .qk_norm
                .then(|| l.vector(&t(s), hp.head_dim_k))
                .transpose()
        };
        layers.push(Layer {
            attn_norm: l.vector(&T::AttnNorm.block_weight(i), hp.n_embd)?,
            qkv: l.qkv(i, hp.n_embd, (q_out, k_out, v_out), biases)?,
            wo: l.matrix(
                &T::AttnOut.block_weight(i),
                hp.n_head * hp.head_dim_v,
                hp.n_embd,
            )?,
            q_norm: norm(T::AttnQNorm.weight())?,
            k_norm: norm(T::AttnKNorm.weight())?,
            ffn_norm: l.vector(&T::FfnNorm.block_weight(i), hp.n_embd)?,
            w_gate: l.matrix(&T::FfnGate.block_weight(i), hp.n_embd, hp.n_ff)?,
            w_up: l.matrix(&T::FfnUp.block_weight(i), hp.n_embd, hp.n_ff)?,
            w_down: l.matrix(&T::FfnDown.block_weight(i), hp.n_ff, hp.n_embd)?,
        });
    }
    let output = l
        .optional_matrix(T::Output.weight(), hp.n_embd, hp.n_vocab)?
        .map_or_else(|| l.packed(token_embd.clone()), Ok)?;
    let output_norm = l.vector(T::OutputNorm.weight(), hp.n_embd)?;
    let rope_freqs = l.rope_factors(T::RopeFreqs.weight(), hp.n_rot / 2)?;
    let rope = Rope::for_model(
        hp.n_rot,
        variant.neox,
        hp.rope_freq_base,
        hp.rope_scaling,
        hp.n_ctx_train,
    );
    let scores = Scores::new(1.0 / (hp.head_dim_k as f32).sqrt(), 0.0);
    Ok(Box::new(Llama {
        hp,
        token_embd,
        layers,
        output_norm,
        output,
        rope,
        rope_freqs,
        scores,
    }))
}

impl Architecture for Llama {
    fn hparams(&self) -> &Hparams {
        &self.hp
    }

    fn forward(&self, pass: &mut Pass<'_>) -> Result<()> {
        let hp = &self.hp;
        let Pass {
            ctx,
            caches,
            scratch: s,
            tokens,
            segments,
            all_logits,
            embeddings,
            logits,
            ..
        } = pass;
        let eps = hp.norm_eps;
        let heads = Heads::of(hp);
        ctx.embed(&self.token_embd, tokens, &mut s.residual)?;
        s.fill_rope_with_factors(&self.rope, self.rope_freqs.as_deref(), segments);
        for (il, l) in self.layers.iter().enumerate() {
            rms_norm_rows(&s.residual, &l.attn_norm, eps, &mut s.sublayer);
            SelfAttention {
                qkv: &l.qkv,
                qk_norm: l.q_norm.as_deref().zip(l.k_norm.as_deref()),
                eps,
                rope: &self.rope,
                rope_cache: 0,
                query_scale: None,
                heads,
                window: hp.layer_windows[il],
                scores: self.scores,
            }
            .run(ctx, caches, segments, s, il)?;
            ctx.matmul(&l.wo, &s.attn, &mut s.sublayer, &mut s.quant)?;
            add_assign(&mut s.residual, &s.sublayer);
            rms_norm_rows(&s.residual, &l.ffn_norm, eps, &mut s.sublayer);
            gated_ffn(ctx, s, &l.w_gate, &l.w_up, &l.w_down, Gate::Silu)?;
            add_assign(&mut s.residual, &s.sublayer);
        }
        let d = hp.n_embd;
        let rows = output_rows(&s.residual, d, segments, *all_logits, &mut s.picked);
        rms_norm_rows(rows, &self.output_norm, eps, &mut s.row);
        if wrote_hidden_states(*embeddings, &s.row, logits) {
            return Ok(());
        }
        ctx.matmul(&self.output, &s.row, logits, &mut s.quant)?;
        Ok(())
    }
}
