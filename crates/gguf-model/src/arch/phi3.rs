//! Phi-3 and Phi-4 (`phi3`), as llama.cpp computes them: pre-norm blocks (RMSNorm,
//! attention, RMSNorm, SwiGLU feed-forward) whose Q, K and V usually come from one fused
//! `attn_qkv` and whose gate and up projections are the two halves of one `ffn_up`
//! (`2 * n_ff` rows, gate first); both are used as views of the mapped tensor. RoPE is
//! NeoX-style over the first `rope.dimension_count` dimensions of each head (Phi-4-mini rotates
//! 96 of 128), with LongRoPE's frequency factors when the file has them: `rope_factors_long`
//! when the context is longer than `rope.scaling.original_context_length`, else
//! `rope_factors_short`, and every rotation scaled by `rope.scaling.attn_factor`. Queries are
//! scaled by `1/sqrt(head_dim)` before attention. The output matrix is `output.weight` (or
//! `token_embd`), plus `output.bias` when there is one.
//!
//! `attention.sliding_window` is read by llama.cpp and then switched off ("Phi SWA is currently
//! disabled"; the converters write windows that do not match how the models were trained), so
//! every layer attends to the whole context here too.
//!
//! PhiMoE (`phimoe`) is the same graph in llama.cpp with a mixture of experts for the
//! feed-forward network (softmax router, the chosen weights normalised), separate Q, K and V,
//! and biases: each RMSNorm's result plus a bias (llama.cpp's `build_norm` with a bias, though
//! the Hugging Face model uses LayerNorm), on the attention output projection and on the
//! output.

use super::phi2::check_heads;
use super::Architecture;
use crate::attention::Scores;
use crate::error::{ModelError, Result};
use crate::forward::{output_rows, rms_norm_rows, wrote_hidden_states, Heads, Pass, SelfAttention};
use crate::hparams::{Hparams, Reader};
use crate::moe::{Ffn, MoeFfn, Routing};
use crate::ops::{add_assign, add_bias, Rope};
use crate::weights::{Biases, Loader, Matrix, Qkv};
use gguf_format::tensor_names::TensorName as T;

/// llama.cpp rounds every context up to a multiple of this (`GGML_PAD(n_ctx, 256)`) before it
/// compares it with the original context to pick the RoPE factors.
const CTX_PAD: usize = 256;

/// One block's tensors.
struct Layer {
    attn_norm: Vec<f32>,
    attn_norm_b: Option<Vec<f32>>,
    qkv: Qkv,
    wo: Matrix,
    wo_b: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    ffn_norm_b: Option<Vec<f32>>,
    ffn: Ffn,
}

/// RMSNorm of each row, times `w`, plus `b` if there is one (llama.cpp's `build_norm`).
fn norm_rows(x: &[f32], w: &[f32], b: Option<&[f32]>, eps: f32, out: &mut Vec<f32>) {
    rms_norm_rows(x, w, eps, out);
    if let Some(b) = b {
        add_bias(out, b);
    }
}

struct Phi3 {
    hp: Hparams,
    token_embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    output_norm_b: Option<Vec<f32>>,
    output: Matrix,
    output_b: Option<Vec<f32>>,
    rope: Rope,
    /// `rope_factors_long.weight` and `rope_factors_short.weight`, one per rotated pair.
    factors_long: Option<Vec<f32>>,
    factors_short: Option<Vec<f32>>,
    /// Contexts longer than this (after llama.cpp's padding) use the long factors.
    n_ctx_orig: usize,
    query_scale: f32,
}

pub(super) fn load(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>> {
    let name = l.name;
    let r = Reader {
        file: l.metadata(),
        name,
        arch,
    };
    let mut hp = r.common("attention.layer_norm_rms_epsilon")?;
    check_heads(&r, &hp)?;
    // As llama.cpp: 0 or absent means the training context.
    let n_ctx_orig = match r.opt_usize("rope.scaling.original_context_length")? {
        None | Some(0) => hp.n_ctx_train,
        Some(n) => n,
    };
    let attn_factor = r.positive_or("rope.scaling.attn_factor", 1.0)?;
    let moe = arch == "phimoe";
    let routing = moe.then(|| Routing::read(&r, true)).transpose()?;
    // PhiMoE's biases are required, as llama.cpp's loader requires them.
    let bias = |tensor: &str, n: usize| match moe {
        true => l.vector(tensor, n).map(Some),
        false => Ok(None),
    };

    let (d, ff) = (hp.n_embd, hp.n_ff);
    hp.n_vocab = l.rows_of(T::TokenEmbd.weight(), d)?;
    let token_embd = l.plain_matrix(T::TokenEmbd.weight(), d, hp.n_vocab)?;
    let (kv_k, kv_v) = hp.kv_widths();
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        let ffn = match routing {
            Some(ro) => Ffn::Routed(Box::new(MoeFfn::load(l, i, d, ff, ro)?)),
            None => dense_ffn(l, i, d, ff)?,
        };
        layers.push(Layer {
            attn_norm: l.vector(&T::AttnNorm.block_weight(i), d)?,
            attn_norm_b: bias(&T::AttnNorm.block_bias(i), d)?,
            qkv: l.qkv(i, d, (d, kv_k, kv_v), Biases::Optional)?,
            wo: l.matrix(&T::AttnOut.block_weight(i), d, d)?,
            wo_b: bias(&T::AttnOut.block_bias(i), d)?,
            ffn_norm: l.vector(&T::FfnNorm.block_weight(i), d)?,
            ffn_norm_b: bias(&T::FfnNorm.block_bias(i), d)?,
            ffn,
        });
    }
    let output_norm = l.vector(T::OutputNorm.weight(), d)?;
    let output_norm_b = bias(T::OutputNorm.bias(), d)?;
    let output = match moe {
        true => l.matrix(T::Output.weight(), d, hp.n_vocab)?,
        false => l
            .optional_matrix(T::Output.weight(), d, hp.n_vocab)?
            .map_or_else(|| l.packed(token_embd.clone()), Ok)?,
    };
    let output_b = match moe {
        true => bias(T::Output.bias(), hp.n_vocab)?,
        false => l.optional_vector(T::Output.bias(), hp.n_vocab)?,
    };
    let factors_long = l.rope_factors(T::RopeFactorsLong.weight(), hp.n_rot / 2)?;
    let factors_short = l.rope_factors(T::RopeFactorsShort.weight(), hp.n_rot / 2)?;
    let mut rope = Rope::for_model(
        hp.n_rot,
        true,
        hp.rope_freq_base,
        hp.rope_scaling,
        hp.n_ctx_train,
    );
    // llama.cpp multiplies the attention factor of every architecture by this key; LongRoPE
    // conversions set it to sqrt(1 + ln(scale) / ln(original context)).
    rope.attn_factor *= attn_factor;
    let query_scale = 1.0 / (hp.head_dim_k as f32).sqrt();
    Ok(Box::new(Phi3 {
        hp,
        token_embd,
        layers,
        output_norm,
        output_norm_b,
        output,
        output_b,
        rope,
        factors_long,
        factors_short,
        n_ctx_orig,
        query_scale,
    }))
}

/// Phi-3's feed-forward tensors of block `i`: the two halves of the fused `ffn_up` and
/// `ffn_down`.
fn dense_ffn(l: &Loader<'_>, i: usize, d: usize, ff: usize) -> Result<Ffn> {
    let up_name = T::FfnUp.block_weight(i);
    let gate_up = l.matrix(&up_name, d, 2 * ff)?;
    // Both in range: the shape check made `gate_up` 2 * ff rows tall.
    let half = |first| {
        gate_up
            .rows(first, ff)
            .ok_or_else(|| ModelError::TensorShape {
                file: l.name.to_string(),
                name: up_name.clone(),
                expected: vec![d as u64, 2 * ff as u64],
                found: vec![d as u64, gate_up.rows as u64],
            })
    };
    Ok(Ffn::Dense {
        gate: half(0)?,
        up: half(ff)?,
        down: l.matrix(&T::FfnDown.block_weight(i), ff, d)?,
    })
}

impl Phi3 {
    /// The RoPE factors for a session of `n_ctx` positions, as llama.cpp's `get_rope_factors`
    /// picks them for the context it would create (`n_ctx` padded to 256).
    fn factors(&self, n_ctx: usize) -> Option<&[f32]> {
        if n_ctx.div_ceil(CTX_PAD).saturating_mul(CTX_PAD) > self.n_ctx_orig {
            self.factors_long.as_deref()
        } else {
            self.factors_short.as_deref()
        }
    }
}

impl Architecture for Phi3 {
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
            n_ctx,
            all_logits,
            embeddings,
            logits,
        } = pass;
        let (eps, d) = (hp.norm_eps, hp.n_embd);
        let heads = Heads::of(hp);
        // The query is scaled beforehand, so attention's own scale is 1.
        let scores = Scores::new(1.0, 0.0);
        ctx.embed(&self.token_embd, tokens, &mut s.residual)?;
        s.fill_rope_with_factors(&self.rope, self.factors(*n_ctx), segments);
        for (il, l) in self.layers.iter().enumerate() {
            norm_rows(
                &s.residual,
                &l.attn_norm,
                l.attn_norm_b.as_deref(),
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
            ctx.matmul(&l.wo, &s.attn, &mut s.sublayer, &mut s.quant)?;
            if let Some(b) = &l.wo_b {
                add_bias(&mut s.sublayer, b);
            }
            add_assign(&mut s.residual, &s.sublayer);
            norm_rows(
                &s.residual,
                &l.ffn_norm,
                l.ffn_norm_b.as_deref(),
                eps,
                &mut s.sublayer,
            );
            l.ffn.run(ctx, s)?;
            add_assign(&mut s.residual, &s.sublayer);
        }
        let rows = output_rows(&s.residual, d, segments, *all_logits, &mut s.picked);
        norm_rows(
            rows,
            &self.output_norm,
            self.output_norm_b.as_deref(),
            eps,
            &mut s.row,
        );
        if wrote_hidden_states(*embeddings, &s.row, logits) {
            return Ok(());
        }
        ctx.matmul(&self.output, &s.row, logits, &mut s.quant)?;
        if let Some(b) = &self.output_b {
            add_bias(logits, b);
        }
        Ok(())
    }
}
