//! Phi-2 (`phi2`), as llama.cpp computes it. Each block normalises its input once (LayerNorm
//! with weight and bias) and feeds it to attention and to the feed-forward network side by
//! side; the block's output is `(attention + feed-forward) + input`. Everything has a bias: Q,
//! K and V (one fused `attn_qkv` or three tensors), the attention output, both feed-forward
//! matrices, the final norm and the separate output matrix. The feed-forward is
//! `down(gelu(up(x)))` with ggml's f16-table GELU. RoPE is NeoX-style over the first
//! `rope.dimension_count` dimensions of each head (Phi-2 rotates 32 of 80); queries are
//! scaled by `1/sqrt(head_dim)` before attention, then rounded to f16 by flash attention.

use super::Architecture;
use crate::error::Result;
use crate::forward::{hidden_states, layer_norm_rows, output_rows, Heads, Pass, SelfAttention};
use crate::hparams::{Hparams, Reader};
use crate::ops::{self, add_assign, add_bias, Rope, Scores};
use crate::weights::{Biases, Loader, Matrix, Qkv};

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
    hp.n_vocab = l.rows_of("token_embd.weight", d)?;
    let token_embd = l.plain_matrix("token_embd.weight", d, hp.n_vocab)?;
    let (kv_k, kv_v) = hp.kv_widths();
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        let t = |s: &str| format!("blk.{i}.{s}");
        layers.push(Layer {
            attn_norm: l.vector(&t("attn_norm.weight"), d)?,
            attn_norm_b: l.vector(&t("attn_norm.bias"), d)?,
            qkv: l.qkv(i, d, (d, kv_k, kv_v), Biases::Optional)?,
            wo: l.matrix(&t("attn_output.weight"), d, d)?,
            bo: l.vector(&t("attn_output.bias"), d)?,
            w_up: l.matrix(&t("ffn_up.weight"), d, hp.n_ff)?,
            b_up: l.vector(&t("ffn_up.bias"), hp.n_ff)?,
            w_down: l.matrix(&t("ffn_down.weight"), hp.n_ff, d)?,
            b_down: l.vector(&t("ffn_down.bias"), d)?,
        });
    }
    let output_norm = l.vector("output_norm.weight", d)?;
    let output_norm_b = l.vector("output_norm.bias", d)?;
    let output = l.matrix("output.weight", d, hp.n_vocab)?;
    let output_b = l.vector("output.bias", hp.n_vocab)?;
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
            s,
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
        ctx.embed(&self.token_embd, tokens, &mut s.x)?;
        s.fill_rope(std::slice::from_ref(&self.rope), segments);
        for (il, l) in self.layers.iter().enumerate() {
            // `h` feeds both attention and the feed-forward network.
            layer_norm_rows(&s.x, &l.attn_norm, &l.attn_norm_b, eps, &mut s.h);
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
            }
            .run(ctx, caches, segments, s, il)?;
            // Attention's output goes to `q` (no longer needed), the feed-forward's to `v`.
            ctx.matmul(&l.wo, &s.attn, &mut s.q, &mut s.quant)?;
            add_bias(&mut s.q, &l.bo);
            ctx.matmul(&l.w_up, &s.h, &mut s.up, &mut s.quant)?;
            add_bias(&mut s.up, &l.b_up);
            ops::gelu(&mut s.up);
            ctx.matmul(&l.w_down, &s.up, &mut s.v, &mut s.quant)?;
            add_bias(&mut s.v, &l.b_down);
            // (attention + feed-forward) + input, in llama.cpp's order.
            add_assign(&mut s.q, &s.v);
            add_assign(&mut s.x, &s.q);
        }
        let rows = output_rows(&s.x, d, segments, *all_logits, &mut s.picked);
        layer_norm_rows(
            rows,
            &self.output_norm,
            &self.output_norm_b,
            eps,
            &mut s.row,
        );
        if hidden_states(*embeddings, &s.row, logits) {
            return Ok(());
        }
        ctx.matmul(&self.output, &s.row, logits, &mut s.quant)?;
        add_bias(logits, &self.output_b);
        Ok(())
    }
}
