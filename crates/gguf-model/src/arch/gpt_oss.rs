//! OpenAI's gpt-oss (`gpt-oss`; llama.cpp's `LLM_ARCH_OPENAI_MOE`), as llama.cpp computes it:
//! pre-norm blocks (RMSNorm, attention, RMSNorm named `post_attention_norm`, a mixture of
//! experts) where
//!
//! - Q, K and V carry biases and the head dimension is `rope.dimension_count` (NeoX RoPE with
//!   the file's YaRN scaling on every layer); the attention output has a bias;
//! - every head has a learned sink (`attn_sinks`), a logit that joins each softmax of
//!   attention without a value ([`crate::attention`]);
//! - layers alternate a sliding window (`attention.sliding_window`, standard: a key `k` is
//!   seen from `q` when `q - k < window`) and full attention, the even layers local by default
//!   (`attention.sliding_window_pattern`, period 2); the local layers may have their own RoPE
//!   base (`rope.freq_base_swa`);
//! - the router has a bias, the raw logits choose the experts and the weights are a softmax
//!   over the chosen ones' logits; each expert's gate, up and down products have biases, and
//!   the activation is the clamped SwiGLU ([`crate::ops::swiglu_oai`]). The experts are
//!   usually MXFP4, as the model is published.

use super::Architecture;
use crate::attention::Scores;
use crate::error::Result;
use crate::forward::{
    output_rows, rms_norm_rows, wrote_hidden_states, Gate, Heads, Pass, SelfAttention,
};
use crate::hparams::{Hparams, Reader};
use crate::moe::{ExpertBiases, Gating, MoeFfn, Routing};
use crate::ops::{add_assign, add_bias, Rope};
use crate::weights::{Biases, Loader, Matrix, Qkv};
use gguf_format::tensor_names::TensorName as T;

/// One block's tensors.
struct Layer {
    attn_norm: Vec<f32>,
    qkv: Qkv,
    wo: Matrix,
    wo_b: Vec<f32>,
    sinks: Vec<f32>,
    post_attn_norm: Vec<f32>,
    moe: MoeFfn,
}

struct GptOss {
    hp: Hparams,
    token_embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    output: Matrix,
    /// The full-attention layers' RoPE, then the sliding-window layers'.
    ropes: [Rope; 2],
    scores: Scores,
}

pub(super) fn load(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>> {
    let r = Reader {
        file: l.metadata(),
        name: l.name,
        arch,
    };
    let mut hp = r.common("attention.layer_norm_rms_epsilon")?;
    // llama.cpp sizes Q, K and V by `n_rot` heads.
    if hp.head_dim_k != hp.n_rot || hp.head_dim_v != hp.n_rot {
        return Err(r.error(format!(
            "gpt-oss rotates whole heads: {} {} must equal the key and value head \
             dimensions ({} and {})",
            r.key("rope.dimension_count"),
            hp.n_rot,
            hp.head_dim_k,
            hp.head_dim_v
        )));
    }
    let window = r.size("attention.sliding_window", 1 << 24)?;
    let swa = r.swa_layers(hp.n_layer, 2)?;
    hp.sliding_window = Some(window);
    hp.layer_windows = swa.iter().map(|&s| s.then_some(window)).collect();
    let mut routing = Routing::read(&r, false)?;
    routing.gating = Gating::SoftmaxOfChosen;
    let n_ff_exp = r.size("expert_feed_forward_length", 1 << 20)?;

    let d = hp.n_embd;
    hp.n_vocab = l.rows_of(T::TokenEmbd.weight(), d)?;
    let token_embd = l.plain_matrix(T::TokenEmbd.weight(), d, hp.n_vocab)?;
    let output_norm = l.vector(T::OutputNorm.weight(), d)?;
    let output = l.matrix(T::Output.weight(), d, hp.n_vocab)?;
    let (q_out, kv_out) = (hp.n_head * hp.n_rot, hp.n_head_kv * hp.n_rot);
    let ne = routing.n_expert;
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        let attn_norm = l.vector(&T::AttnNorm.block_weight(i), d)?;
        let post_attn_norm = l.vector(&T::AttnPostNorm.block_weight(i), d)?;
        let qkv = l.qkv(i, d, (q_out, kv_out, kv_out), Biases::Optional)?;
        let wo = l.matrix(&T::AttnOut.block_weight(i), q_out, d)?;
        let sinks = l.vector(&T::AttnSinks.block_weight(i), hp.n_head)?;
        let mut moe = MoeFfn::load(l, i, d, n_ff_exp, routing)?;
        moe.act = Gate::SwigluOai;
        let wo_b = l.vector(&T::AttnOut.block_bias(i), d)?;
        moe.router_bias = Some(l.vector(&T::FfnGateInp.block_bias(i), ne)?);
        moe.biases = Some(ExpertBiases::load(l, i, d, n_ff_exp, ne)?);
        layers.push(Layer {
            attn_norm,
            qkv,
            wo,
            wo_b,
            sinks,
            post_attn_norm,
            moe,
        });
    }
    let rope = |base| Rope::for_model(hp.n_rot, true, base, hp.rope_scaling, hp.n_ctx_train);
    let base_swa = r.positive_or("rope.freq_base_swa", hp.rope_freq_base)?;
    let ropes = [rope(hp.rope_freq_base), rope(base_swa)];
    let scores = Scores::new(1.0 / (hp.n_rot as f32).sqrt(), 0.0);
    Ok(Box::new(GptOss {
        hp,
        token_embd,
        layers,
        output_norm,
        output,
        ropes,
        scores,
    }))
}

impl Architecture for GptOss {
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
        ctx.embed(&self.token_embd, tokens, &mut s.residual)?;
        s.fill_rope(&self.ropes, segments);
        for (il, l) in self.layers.iter().enumerate() {
            let window = hp.layer_windows[il];
            let r = usize::from(window.is_some());
            rms_norm_rows(&s.residual, &l.attn_norm, eps, &mut s.sublayer);
            SelfAttention {
                qkv: &l.qkv,
                qk_norm: None,
                eps,
                rope: &self.ropes[r],
                rope_cache: r,
                query_scale: None,
                heads: Heads::of(hp),
                window,
                scores: self.scores,
                sinks: Some(&l.sinks),
            }
            .run(ctx, caches, segments, s, il)?;
            ctx.matmul(&l.wo, &s.attn, &mut s.sublayer, &mut s.quant)?;
            add_bias(&mut s.sublayer, &l.wo_b);
            add_assign(&mut s.residual, &s.sublayer);
            rms_norm_rows(&s.residual, &l.post_attn_norm, eps, &mut s.sublayer);
            l.moe.run(ctx, s)?;
            add_assign(&mut s.residual, &s.sublayer);
        }
        let rows = output_rows(&s.residual, hp.n_embd, segments, *all_logits, &mut s.picked);
        rms_norm_rows(rows, &self.output_norm, eps, &mut s.row);
        if wrote_hidden_states(*embeddings, &s.row, logits) {
            return Ok(());
        }
        ctx.matmul(&self.output, &s.row, logits, &mut s.quant)
    }
}
