//! BERT (`bert`: all-MiniLM, BGE, sentence-transformers' BERT models), the encoder llama.cpp
//! runs for embeddings, computed as its `llm_build_bert` graph does.
//!
//! The input rows are the token embedding plus token type 0's row (llama.cpp always takes
//! "sentence A") plus the learned position embedding, then a LayerNorm with bias. Each block is
//! post-norm: attention with biases on Q, K, V and the output projection, over the whole input
//! in both directions when `attention.causal` is false (as BERT files say), scale
//! `1/sqrt(head_dim)`, no RoPE; the block's input added back and a LayerNorm
//! (`attn_output_norm`); the feed-forward `down(gelu(up(x)))` with biases and ggml's f16-table
//! tanh GELU; its input added back and a LayerNorm (`layer_output_norm`). The last block's rows
//! are the token embeddings, which [`crate::Session::embed`] pools. There is no output matrix:
//! the model computes no logits.
//!
//! Keys and values go through the session's KV cache (rounded to f16 there, as llama.cpp casts
//! them to f16 for flash attention), but every input is encoded from position 0 in one pass:
//! nothing is reused between inputs.

use super::phi2::check_heads;
use super::Architecture;
use crate::attention::{attention, Mask, Scores};
use crate::error::{ModelError, Result};
use crate::forward::{layer_norm_rows, Heads, Pass, Segment};
use crate::hparams::{Hparams, Reader};
use crate::ops::{self, add_assign, add_bias};
use crate::weights::{Biases, Loader, Matrix, Qkv};
use gguf_format::tensor_names::TensorName as T;

/// One block's tensors.
struct Layer {
    qkv: Qkv,
    wo: Matrix,
    bo: Option<Vec<f32>>,
    attn_out_norm: Vec<f32>,
    attn_out_norm_b: Vec<f32>,
    w_up: Matrix,
    b_up: Option<Vec<f32>>,
    w_down: Matrix,
    b_down: Option<Vec<f32>>,
    out_norm: Vec<f32>,
    out_norm_b: Vec<f32>,
}

struct Bert {
    hp: Hparams,
    token_embd: Matrix,
    /// Row 0 of `token_types.weight`, if the file has the table (llama.cpp's loader does not
    /// require it).
    token_type: Option<Vec<f32>>,
    /// `position_embd.weight`: one row per position of the training context.
    pos_embd: Matrix,
    embd_norm: Vec<f32>,
    embd_norm_b: Vec<f32>,
    layers: Vec<Layer>,
    scores: Scores,
}

pub(super) fn load(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>> {
    let name = l.name;
    let r = Reader {
        file: l.metadata(),
        name,
        arch,
    };
    let mut hp = r.common("attention.layer_norm_epsilon")?;
    hp.causal = r.opt_bool("attention.causal")?.unwrap_or(true);
    check_heads(&r, &hp)?;
    let d = hp.n_embd;
    hp.n_vocab = l.rows_of(T::TokenEmbd.weight(), d)?;
    let token_embd = l.plain_matrix(T::TokenEmbd.weight(), d, hp.n_vocab)?;
    let token_type = if l.has(T::TokenTypes.weight()) {
        let types = l.rows_of(T::TokenTypes.weight(), d)?;
        let table = l.plain_matrix(T::TokenTypes.weight(), d, types)?;
        Some(l.matrix_row(&table, 0)?)
    } else {
        None
    };
    let pos_embd = l.plain_matrix(T::PosEmbd.weight(), d, hp.n_ctx_train)?;
    let (kv_k, kv_v) = hp.kv_widths();
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        layers.push(Layer {
            qkv: l.qkv(i, d, (d, kv_k, kv_v), Biases::Optional)?,
            wo: l.matrix(&T::AttnOut.block_weight(i), d, d)?,
            bo: l.optional_vector(&T::AttnOut.block_bias(i), d)?,
            attn_out_norm: l.vector(&T::AttnOutNorm.block_weight(i), d)?,
            attn_out_norm_b: l.vector(&T::AttnOutNorm.block_bias(i), d)?,
            w_up: l.matrix(&T::FfnUp.block_weight(i), d, hp.n_ff)?,
            b_up: l.optional_vector(&T::FfnUp.block_bias(i), hp.n_ff)?,
            w_down: l.matrix(&T::FfnDown.block_weight(i), hp.n_ff, d)?,
            b_down: l.optional_vector(&T::FfnDown.block_bias(i), d)?,
            out_norm: l.vector(&T::LayerOutNorm.block_weight(i), d)?,
            out_norm_b: l.vector(&T::LayerOutNorm.block_bias(i), d)?,
        });
    }
    Ok(Box::new(Bert {
        token_embd,
        token_type,
        pos_embd,
        embd_norm: l.vector(T::TokenEmbdNorm.weight(), d)?,
        embd_norm_b: l.vector(T::TokenEmbdNorm.bias(), d)?,
        layers,
        scores: Scores::new(1.0 / (hp.head_dim_k as f32).sqrt(), 0.0),
        hp,
    }))
}

/// Adds `bias` to every row of `rows` when there is one.
fn add_optional_bias(rows: &mut [f32], bias: &Option<Vec<f32>>) {
    if let Some(b) = bias {
        add_bias(rows, b);
    }
}

impl Architecture for Bert {
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
            embeddings,
            logits: out,
            ..
        } = pass;
        if !*embeddings {
            return Err(ModelError::Request(format!(
                "`{}` is an encoder: it computes embeddings (Session::embed), not next-token \
                 logits",
                hp.arch
            )));
        }
        // The session encodes each input whole, from position 0 (see `Session::embed_tokens`).
        let (cache, [Segment { pos0: 0, .. }]) = (&mut caches[0], segments) else {
            return Err(ModelError::Request(
                "an encoder takes its whole input in one pass from position 0".into(),
            ));
        };
        if tokens.is_empty() {
            return Err(ModelError::Request(
                "an encoder takes its whole input in one pass from position 0".into(),
            ));
        }
        let (n, eps) = (tokens.len(), hp.norm_eps);
        let mask = if hp.causal {
            Mask::Causal(None)
        } else {
            Mask::Full
        };
        // Token, type 0 and position embeddings, added in llama.cpp's order.
        ctx.embed(&self.token_embd, tokens, &mut s.residual)?;
        if let Some(row) = &self.token_type {
            add_bias(&mut s.residual, row);
        }
        let positions: Vec<u32> = (0..n as u32).collect();
        ctx.embed(&self.pos_embd, &positions, &mut s.sublayer)?;
        add_assign(&mut s.residual, &s.sublayer);
        layer_norm_rows(
            &s.residual,
            &self.embd_norm,
            &self.embd_norm_b,
            eps,
            &mut s.sublayer,
        );
        std::mem::swap(&mut s.residual, &mut s.sublayer);
        for (il, l) in self.layers.iter().enumerate() {
            // Attention over the whole input; `residual` is the block's input.
            ctx.matmul(&l.qkv.wq, &s.residual, &mut s.queries, &mut s.quant)?;
            ctx.matmul(&l.qkv.wk, &s.residual, &mut s.keys, &mut s.quant)?;
            ctx.matmul(&l.qkv.wv, &s.residual, &mut s.values, &mut s.quant)?;
            l.qkv.add_biases(&mut s.queries, &mut s.keys, &mut s.values);
            cache.store(il, 0, &s.keys, &s.values);
            attention(
                ctx.pool,
                cache,
                il,
                &s.queries,
                0,
                Heads::of(hp),
                mask,
                self.scores,
                None,
                &mut s.attn_threads,
                &mut s.attn,
            );
            ctx.matmul(&l.wo, &s.attn, &mut s.sublayer, &mut s.quant)?;
            add_optional_bias(&mut s.sublayer, &l.bo);
            // Post-norm: (attention + input), normed, feeds the feed-forward and its residual.
            add_assign(&mut s.sublayer, &s.residual);
            layer_norm_rows(
                &s.sublayer,
                &l.attn_out_norm,
                &l.attn_out_norm_b,
                eps,
                &mut s.residual,
            );
            ctx.matmul(&l.w_up, &s.residual, &mut s.up, &mut s.quant)?;
            add_optional_bias(&mut s.up, &l.b_up);
            ops::gelu(&mut s.up);
            ctx.matmul(&l.w_down, &s.up, &mut s.sublayer, &mut s.quant)?;
            add_optional_bias(&mut s.sublayer, &l.b_down);
            add_assign(&mut s.sublayer, &s.residual);
            layer_norm_rows(
                &s.sublayer,
                &l.out_norm,
                &l.out_norm_b,
                eps,
                &mut s.residual,
            );
        }
        out.clear();
        out.extend_from_slice(&s.residual[..n * hp.n_embd]);
        Ok(())
    }
}
