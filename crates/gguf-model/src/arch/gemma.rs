//! The Gemma family, as llama.cpp computes it:
//!
//! - `gemma`: token embeddings scaled by `sqrt(n_embd)`; pre-norm blocks (RMSNorm with the
//!   weights as the GGUF conversion stores them, already `1 + w`); GeGLU (tanh GELU)
//!   feed-forward; the output tied to `token_embd`.
//! - `gemma2`: adds an RMSNorm after attention and after the feed-forward, soft-capped
//!   attention logits (`attn_logit_softcapping`, 50 by default) and final logits
//!   (`final_logit_softcapping`, 30 by default), and sliding-window layers alternating with
//!   global ones (`attention.sliding_window`, 4096 by default; pattern 2).
//! - `gemma3`: Gemma 2 without attention soft-capping, plus an RMSNorm on each Q and K head;
//!   the sliding-window pattern from `attention.sliding_window_pattern` (every 6th layer
//!   global by default), local layers with their own RoPE base (`rope.freq_base_swa`, 10,000)
//!   and no position scaling.
//!
//! Queries are scaled before attention (`1/sqrt(head_dim)`, or `1/sqrt(n_embd / n_head)` for
//! the 27B models, as llama.cpp picks by layer count), then rounded to f16 by flash attention.

use gguf_format::tensor_names::{self, TensorName as T};

use super::Architecture;
use crate::attention::Scores;
use crate::error::Result;
use crate::forward::{
    gated_ffn, output_rows, rms_norm_each, rms_norm_rows, wrote_hidden_states, Gate, Heads, Pass,
    SelfAttention,
};
use crate::hparams::{Hparams, Reader, RopeScaling};
use crate::ops::{self, add_assign, Rope};
use crate::weights::{Biases, Loader, Matrix, Qkv};

/// Which member of the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Generation {
    Gemma,
    Gemma2,
    Gemma3,
}

/// One block's tensors.
struct Layer {
    attn_norm: Vec<f32>,
    qkv: Qkv,
    wo: Matrix,
    /// Gemma 3.
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    /// Gemma 2 and 3.
    post_attn_norm: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    w_gate: Matrix,
    w_up: Matrix,
    w_down: Matrix,
    /// Gemma 2 and 3.
    post_ffn_norm: Option<Vec<f32>>,
}

struct Gemma {
    hp: Hparams,
    token_embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    output: Matrix,
    /// `ropes[0]` for global layers, `ropes[1]` for sliding-window ones.
    ropes: [Rope; 2],
    /// What queries are multiplied by before attention.
    query_scale: f32,
    attn_softcap: f32,
    final_softcap: f32,
}

pub(super) fn load(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>> {
    let name = l.name;
    let generation = match arch {
        "gemma2" => Generation::Gemma2,
        "gemma3" => Generation::Gemma3,
        _ => Generation::Gemma,
    };
    let r = Reader {
        file: l.metadata(),
        name,
        arch,
    };
    let mut hp = r.common("attention.layer_norm_rms_epsilon")?;
    let window = match generation {
        Generation::Gemma => None,
        Generation::Gemma2 => Some(r.sliding_window()?.unwrap_or(4096)),
        Generation::Gemma3 => r.sliding_window()?,
    };
    if let Some(w) = window {
        let period = if generation == Generation::Gemma2 {
            2
        } else {
            6
        };
        let swa = r.swa_layers(hp.n_layer, period)?;
        hp.sliding_window = Some(w);
        hp.layer_windows = swa.iter().map(|&s| s.then_some(w)).collect();
    }
    let (attn_softcap, final_softcap) = match generation {
        Generation::Gemma => (0.0, 0.0),
        Generation::Gemma2 => (
            r.positive_or("attn_logit_softcapping", 50.0)?,
            r.positive_or("final_logit_softcapping", 30.0)?,
        ),
        Generation::Gemma3 => (0.0, r.finite_or("final_logit_softcapping", 0.0)?),
    };
    // llama.cpp's rule (after gemma_pytorch): the 27B models scale by the embedding per head.
    let is_27b = matches!(
        (generation, hp.n_layer),
        (Generation::Gemma2, 46) | (Generation::Gemma3, 62)
    );
    let query_scale = if is_27b {
        1.0 / ((hp.n_embd / hp.n_head) as f32).sqrt()
    } else {
        1.0 / (hp.head_dim_k as f32).sqrt()
    };

    hp.n_vocab = l.rows_of(T::TokenEmbd.weight(), hp.n_embd)?;
    let token_embd = l.plain_matrix(T::TokenEmbd.weight(), hp.n_embd, hp.n_vocab)?;
    let (q_out, k_out, v_out) = (
        hp.n_head * hp.head_dim_k,
        hp.n_head_kv * hp.head_dim_k,
        hp.n_head_kv * hp.head_dim_v,
    );
    let post_norms = generation != Generation::Gemma;
    let qk_norm = generation == Generation::Gemma3;
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        let t = |s: &str| tensor_names::block(i, s);
        let norm = |needed: bool, s: &str, n| needed.then(|| l.vector(&t(s), n)).transpose();
        layers.push(Layer {
            attn_norm: l.vector(&T::AttnNorm.block_weight(i), hp.n_embd)?,
            qkv: l.qkv(i, hp.n_embd, (q_out, k_out, v_out), Biases::Optional)?,
            wo: l.matrix(&T::AttnOut.block_weight(i), q_out, hp.n_embd)?,
            q_norm: norm(qk_norm, T::AttnQNorm.weight(), hp.head_dim_k)?,
            k_norm: norm(qk_norm, T::AttnKNorm.weight(), hp.head_dim_k)?,
            post_attn_norm: norm(post_norms, T::AttnPostNorm.weight(), hp.n_embd)?,
            ffn_norm: l.vector(&T::FfnNorm.block_weight(i), hp.n_embd)?,
            w_gate: l.matrix(&T::FfnGate.block_weight(i), hp.n_embd, hp.n_ff)?,
            w_up: l.matrix(&T::FfnUp.block_weight(i), hp.n_embd, hp.n_ff)?,
            w_down: l.matrix(&T::FfnDown.block_weight(i), hp.n_ff, hp.n_embd)?,
            post_ffn_norm: norm(post_norms, T::FfnPostNorm.weight(), hp.n_embd)?,
        });
    }
    // Gemma ties the output to the embeddings; Gemma 3 may carry its own.
    let output = match generation {
        Generation::Gemma3 => l.optional_matrix(T::Output.weight(), hp.n_embd, hp.n_vocab)?,
        _ => None,
    }
    .map_or_else(|| l.packed(token_embd.clone()), Ok)?;
    let output_norm = l.vector(T::OutputNorm.weight(), hp.n_embd)?;

    let global = Rope::for_model(
        hp.n_rot,
        true,
        hp.rope_freq_base,
        hp.rope_scaling,
        hp.n_ctx_train,
    );
    let local = match generation {
        // Local layers: their own base, no position scaling.
        Generation::Gemma3 => Rope::for_model(
            hp.n_rot,
            true,
            r.positive_or("rope.freq_base_swa", 10_000.0)?,
            RopeScaling::None,
            hp.n_ctx_train,
        ),
        // Gemma 2 reads `rope.freq_base_swa` too, defaulting to the global base.
        Generation::Gemma2 => Rope::for_model(
            hp.n_rot,
            true,
            r.positive_or("rope.freq_base_swa", hp.rope_freq_base)?,
            hp.rope_scaling,
            hp.n_ctx_train,
        ),
        Generation::Gemma => global,
    };
    Ok(Box::new(Gemma {
        hp,
        token_embd,
        layers,
        output_norm,
        output,
        ropes: [global, local],
        query_scale,
        attn_softcap,
        final_softcap,
    }))
}

impl Architecture for Gemma {
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
        let (eps, d) = (hp.norm_eps, hp.n_embd);
        let heads = Heads::of(hp);
        ctx.embed(&self.token_embd, tokens, &mut s.residual)?;
        ops::scale(&mut s.residual, (d as f32).sqrt());
        s.fill_rope(&self.ropes, segments);
        let scores = Scores::new(1.0, self.attn_softcap);
        for (il, l) in self.layers.iter().enumerate() {
            let window = hp.layer_windows[il];
            // Global layers use the first RoPE setup, sliding-window ones the second.
            let r = usize::from(window.is_some());
            rms_norm_rows(&s.residual, &l.attn_norm, eps, &mut s.sublayer);
            SelfAttention {
                qkv: &l.qkv,
                qk_norm: l.q_norm.as_deref().zip(l.k_norm.as_deref()),
                eps,
                rope: &self.ropes[r],
                rope_cache: r,
                query_scale: Some(self.query_scale),
                heads,
                window,
                scores,
                sinks: None,
            }
            .run(ctx, caches, segments, s, il)?;
            ctx.matmul(&l.wo, &s.attn, &mut s.sublayer, &mut s.quant)?;
            if let Some(w) = &l.post_attn_norm {
                rms_norm_each(&mut s.sublayer, w, eps);
            }
            add_assign(&mut s.residual, &s.sublayer);
            rms_norm_rows(&s.residual, &l.ffn_norm, eps, &mut s.sublayer);
            gated_ffn(ctx, s, &l.w_gate, &l.w_up, &l.w_down, Gate::Gelu)?;
            if let Some(w) = &l.post_ffn_norm {
                rms_norm_each(&mut s.sublayer, w, eps);
            }
            add_assign(&mut s.residual, &s.sublayer);
        }
        let rows = output_rows(&s.residual, d, segments, *all_logits, &mut s.picked);
        rms_norm_rows(rows, &self.output_norm, eps, &mut s.row);
        if wrote_hidden_states(*embeddings, &s.row, logits) {
            return Ok(());
        }
        ctx.matmul(&self.output, &s.row, logits, &mut s.quant)?;
        if self.final_softcap != 0.0 {
            ops::softcap(logits, self.final_softcap);
        }
        Ok(())
    }
}
