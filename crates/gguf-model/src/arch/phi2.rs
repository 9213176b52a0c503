//! Phi-2 (`phi2`), as llama.cpp computes it. Each block normalises its input once (LayerNorm
//! with weight and bias) and feeds it to attention and to the feed-forward network side by
//! side; the block's output is `(attention + feed-forward) + input`. Everything has a bias: Q,
//! K and V (one fused `attn_qkv` or three tensors), the attention output, both feed-forward
//! matrices, the final norm and the separate output matrix. The feed-forward is
//! `down(gelu(up(x)))` with ggml's f16-table GELU. RoPE is NeoX-style over the first
//! `rope.dimension_count` dimensions of each head (Phi-2 rotates 32 of 80); queries are
//! scaled by `1/sqrt(head_dim)` before attention, then rounded to f16 by flash attention.

use super::Architecture;
use crate::attention::Scores;
use crate::error::Result;
use crate::forward::{
    layer_norm_rows, output_rows, wrote_hidden_states, Heads, Pass, SelfAttention,
};
use crate::hparams::{Hparams, Reader};
use crate::ops::{self, add_assign, add_bias, Rope};
use crate::weights::{Biases, Loader, Matrix, Qkv};
use gguf_format::tensor_names::TensorName as T;

/// One block's tensors.
struct Layer {
    attn_norm: Vec<f32>,
    attn_norm_b: Vec<f32>,
    qkv: Qkv,
    wo: Matrix,
    bo: Vec<f32>,
    w_up: Matrix,
    b_up: Vec<f32>,
    w_down: Matrix,
    b_down: Vec<f32>,
}

struct Phi2 {
    hp: Hparams,
    token_embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    output_norm_b: Vec<f32>,
    output: Matrix,
    output_b: Vec<f32>,
    rope: Rope,
    query_scale: f32,
}

/// Checks what Phi's graphs assume: Q and the attention output are `n_embd` wide, and keys
/// and values have one head size (llama.cpp asserts it; its tensor shapes imply the rest).
pub(super) fn check_heads(r: &Reader<'_, '_>, hp: &Hparams) -> Result<()> {
    if hp.head_dim_k != hp.head_dim_v || hp.n_head * hp.head_dim_k != hp.n_embd {
        return Err(r.error(format!(
            "{} and {} are {} and {}; {} needs both to be the embedding length / head count \
             ({} / {})",
            r.key("attention.key_length"),
            r.key("attention.value_length"),
            hp.head_dim_k,
            hp.head_dim_v,
            r.arch,
            hp.n_embd,
            hp.n_head
        )));
    }
    Ok(())
}

pub(super) fn load(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>> {
    let name = l.name;
    let r = Reader {
        file: l.metadata(),
        name,
        arch,
    };
    let mut hp = r.common("attention.layer_norm_epsilon")?;
    check_heads(&r, &hp)?;
    let d = hp.n_embd;
    hp.n_vocab = l.rows_of(T::TokenEmbd.weight(), d)?;
    let token_embd = l.plain_matrix(T::TokenEmbd.weight(), d, hp.n_vocab)?;
    let (kv_k, kv_v) = hp.kv_widths();
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        layers.push(Layer {
            attn_norm: l.vector(&T::AttnNorm.block_weight(i), d)?,
            attn_norm_b: l.vector(&T::AttnNorm.block_bias(i), d)?,
            qkv: l.qkv(i, d, (d, kv_k, kv_v), Biases::Optional)?,
            wo: l.matrix(&T::AttnOut.block_weight(i), d, d)?,
            bo: l.vector(&T::AttnOut.block_bias(i), d)?,
            w_up: l.matrix(&T::FfnUp.block_weight(i), d, hp.n_ff)?,
            b_up: l.vector(&T::FfnUp.block_bias(i), hp.n_ff)?,
            w_down: l.matrix(&T::FfnDown.block_weight(i), hp.n_ff, d)?,
            b_down: l.vector(&T::FfnDown.block_bias(i), d)?,
        });
    }
    let output_norm = l.vector(T::OutputNorm.weight(), d)?;
    let output_norm_b = l.vector(T::OutputNorm.bias(), d)?;
    let output = l.matrix(T::Output.weight(), d, hp.n_vocab)?;
    let output_b = l.vector(T::Output.bias(), hp.n_vocab)?;
    let rope = Rope::for_model(
        hp.n_rot,
        true,
        hp.rope_freq_base,
        hp.rope_scaling,
        hp.n_ctx_train,
    );
    let query_scale = 1.0 / (hp.head_dim_k as f32).sqrt();
    Ok(Box::new(Phi2 {
        hp,
        token_embd,
        layers,
        output_norm,
        output_norm_b,
        output,
        output_b,
        rope,
        query_scale,
    }))
}

impl Architecture for Phi2 {
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
        // The query is scaled beforehand, so attention's own scale is 1.
        let scores = Scores::new(1.0, 0.0);
        ctx.embed(&self.token_embd, tokens, &mut s.residual)?;
        s.fill_rope(std::slice::from_ref(&self.rope), segments);
        for (il, l) in self.layers.iter().enumerate() {
            // `sublayer` feeds both attention and the feed-forward network.
            layer_norm_rows(
                &s.residual,
                &l.attn_norm,
                &l.attn_norm_b,
                eps,
                &mut s.sublayer,
            );
            SelfAttention {
                qkv: &l.qkv,
                qk_norm: None,
                eps,
                rope: &self.rope,
                rope_cache: 0,
                query_scale: Some(self.query_scale),
                heads,
                window: None,
                scores,
                sinks: None,
            }
            .run(ctx, caches, segments, s, il)?;
            // Attention's output goes to `queries` (no longer needed), the feed-forward's to `values`.
            ctx.matmul(&l.wo, &s.attn, &mut s.queries, &mut s.quant)?;
            add_bias(&mut s.queries, &l.bo);
            ctx.matmul(&l.w_up, &s.sublayer, &mut s.up, &mut s.quant)?;
            add_bias(&mut s.up, &l.b_up);
            ops::gelu(&mut s.up);
            ctx.matmul(&l.w_down, &s.up, &mut s.values, &mut s.quant)?;
            add_bias(&mut s.values, &l.b_down);
            // (attention + feed-forward) + input, in llama.cpp's order.
            add_assign(&mut s.queries, &s.values);
            add_assign(&mut s.residual, &s.queries);
        }
        let rows = output_rows(&s.residual, d, segments, *all_logits, &mut s.picked);
        layer_norm_rows(
            rows,
            &self.output_norm,
            &self.output_norm_b,
            eps,
            &mut s.row,
        );
        if wrote_hidden_states(*embeddings, &s.row, logits) {
            return Ok(());
        }
        ctx.matmul(&self.output, &s.row, logits, &mut s.quant)?;
        add_bias(logits, &self.output_b);
        Ok(())
    }
}
