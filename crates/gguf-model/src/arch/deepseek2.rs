//! DeepSeek-V2/V3 (`deepseek2`; also the shape of DeepSeek-R1, Kimi-K2 and Moonlight), as
//! llama.cpp computes the files its converter writes today: multi-head latent attention in
//! its absorbed form, and a mixture of experts after `leading_dense_block_count` dense blocks.
//!
//! Attention of block `i`, for `n_head` heads of `nope + rope` query/key dimensions
//! (`attention.key_length_mla`, `rope.dimension_count`) and `v` value dimensions
//! (`attention.value_length_mla`), through a latent of `kv_lora_rank`:
//! - the query: `attn_q_b · norm(attn_q_a · h)` when the file has `attention.q_lora_rank`, else
//!   `attn_q · h`; per head its `nope` part is absorbed into the latent (`attn_k_b`, one matrix
//!   per head: `kv_lora_rank` rows of `nope`) and its `rope` part rotated (normal pairs, YaRN as
//!   llama.cpp reads it for DeepSeek);
//! - one shared key and value per token (MQA): `attn_kv_a_mqa · h` is the latent, normed
//!   (`attn_kv_a_norm`), then the rotated `rope` part; the value is the normed latent;
//! - attention over the cache with the scale `mscale² / √(nope + rope)`, then each head's output
//!   expanded by its `attn_v_b` (`v` rows of `kv_lora_rank`) and projected by `attn_output`.
//!
//! The experts: a router gated by softmax or sigmoid (`expert_gating_func`), the selection bias
//! `exp_probs_b`, group-limited choice (`expert_group_count`, `expert_group_used_count`),
//! optional normalisation (`expert_weights_norm`) and `expert_weights_scale`; plus
//! `expert_shared_count` ungated shared experts of `expert_feed_forward_length` each.
//!
//! Files from before the split of `attn_kv_b` (no `attention.key_length_mla`) are refused with
//! a message; they need converting again.

use gguf_format::tensor_names::TensorName as T;

use super::Architecture;
use crate::attention::Scores;
use crate::error::Result;
use crate::forward::{
    output_rows, rms_norm_each, rms_norm_rows, wrote_hidden_states, CachedAttention, Ctx, Heads,
    Pass, Scratch,
};
use crate::hparams::{Hparams, Reader, RopeScaling};
use crate::moe::{ExpertGroups, Ffn, Gating, MoeFfn, Routing, SharedExpert};
use crate::ops::{add_assign, rms_norm, Rope};
use crate::weights::{Loader, Matrix};

/// Latent attention's sizes.
#[derive(Debug, Clone, Copy)]
struct Dims {
    n_head: usize,
    /// Query/key dimensions without RoPE (`key_length_mla - rope`).
    nope: usize,
    /// Rotated dimensions (`rope.dimension_count`).
    rope: usize,
    kv_lora: usize,
    /// Value dimensions of each head after expansion (`value_length_mla`).
    v: usize,
}

/// Where the query comes from.
enum Query {
    /// `attn_q` (the lite models).
    Direct(Matrix),
    /// `attn_q_b · norm(attn_q_a · h)`.
    Compressed {
        a: Matrix,
        norm: Vec<f32>,
        b: Matrix,
    },
}

/// One block's tensors.
struct Layer {
    attn_norm: Vec<f32>,
    q: Query,
    kv_a: Matrix,
    kv_a_norm: Vec<f32>,
    /// Per head: the absorption of the query's `nope` part into the latent.
    k_b: Vec<Matrix>,
    /// Per head: the expansion of the attended latent to the head's values.
    v_b: Vec<Matrix>,
    wo: Matrix,
    ffn_norm: Vec<f32>,
    ffn: Ffn,
}

struct DeepSeek2 {
    hp: Hparams,
    dims: Dims,
    token_embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    output: Matrix,
    rope: Rope,
    scores: Scores,
}

/// The expert gating function: `expert_gating_func` (1 softmax, 2 sigmoid), softmax when the
/// file does not say (llama.cpp's default for DeepSeek-V2 files).
fn gating(r: &Reader<'_, '_>) -> Result<Gating> {
    match r.opt_usize("expert_gating_func")? {
        None | Some(0) => Ok(Gating::Softmax),
        Some(id) => match Gating::from_id(id as u64) {
            Some(g @ (Gating::Softmax | Gating::Sigmoid)) => Ok(g),
            _ => Err(r.error(format!(
                "{} {id} is not a gating function of DeepSeek 2 (1 softmax, 2 sigmoid)",
                r.key("expert_gating_func")
            ))),
        },
    }
}

/// The routing of the expert blocks.
fn routing(r: &Reader<'_, '_>) -> Result<Routing> {
    let normalize = r.opt_bool("expert_weights_norm")?.unwrap_or(false);
    let mut routing = Routing::read(r, normalize)?;
    routing.scale = r.finite_or("expert_weights_scale", 0.0)?;
    routing.gating = gating(r)?;
    let count = r.opt_usize("expert_group_count")?.unwrap_or(0);
    if count > 1 {
        let used = r.opt_usize("expert_group_used_count")?.unwrap_or(0);
        let n = routing.n_expert;
        if n % count != 0 || count >= n || used == 0 || used >= count {
            return Err(r.error(format!(
                "{} {count} and {} {used} do not split {n} experts into groups (the count must \
                 divide the experts, the used count be between 1 and the count)",
                r.key("expert_group_count"),
                r.key("expert_group_used_count")
            )));
        }
        if routing.n_used > used * (n / count) {
            return Err(r.error(format!(
                "{} {} experts cannot be chosen from {used} groups of {}",
                r.key("expert_used_count"),
                routing.n_used,
                n / count
            )));
        }
        routing.groups = Some(ExpertGroups { count, used });
    }
    Ok(routing)
}

pub(super) fn load(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>> {
    let r = Reader {
        file: l.metadata(),
        name: l.name,
        arch,
    };
    let mut hp = r.common("attention.layer_norm_rms_epsilon")?;
    if r.opt_usize("attention.key_length_mla")?.is_none() {
        return Err(r.error(
            "this DeepSeek 2 file has no attention.key_length_mla: it predates the split of \
             attn_kv_b into attn_k_b and attn_v_b that llama.cpp's latent attention reads; \
             convert the model again",
        ));
    }
    let k_mla = r.size("attention.key_length_mla", 1 << 12)?;
    let v = r.size("attention.value_length_mla", 1 << 12)?;
    let kv_lora = r.size("attention.kv_lora_rank", 1 << 14)?;
    let rope = hp.n_rot;
    if k_mla <= rope {
        return Err(r.error(format!(
            "{} {k_mla} must exceed {} {rope}",
            r.key("attention.key_length_mla"),
            r.key("rope.dimension_count")
        )));
    }
    // The cache holds one key of latent + rope and one value of latent per token.
    if (hp.n_head_kv, hp.head_dim_k, hp.head_dim_v) != (1, kv_lora + rope, kv_lora) {
        return Err(r.error(format!(
            "latent attention caches one head: {} must be 1, {} kv_lora_rank + rope ({}) and \
             {} kv_lora_rank ({kv_lora}); the file has {}, {} and {}",
            r.key("attention.head_count_kv"),
            r.key("attention.key_length"),
            kv_lora + rope,
            r.key("attention.value_length"),
            hp.n_head_kv,
            hp.head_dim_k,
            hp.head_dim_v
        )));
    }
    let dims = Dims {
        n_head: hp.n_head,
        nope: k_mla - rope,
        rope,
        kv_lora,
        v,
    };
    let q_lora = match r.opt_usize("attention.q_lora_rank")? {
        None | Some(0) => None,
        Some(_) => Some(r.size("attention.q_lora_rank", 1 << 16)?),
    };
    let n_dense = r.opt_usize("leading_dense_block_count")?.unwrap_or(0);
    let routing = (n_dense < hp.n_layer).then(|| routing(&r)).transpose()?;
    let n_ff_exp = r.size("expert_feed_forward_length", 1 << 20)?;
    let n_shared = r.opt_usize("expert_shared_count")?.unwrap_or(0);

    let d = hp.n_embd;
    hp.n_vocab = l.rows_of(T::TokenEmbd.weight(), d)?;
    let token_embd = l.plain_matrix(T::TokenEmbd.weight(), d, hp.n_vocab)?;
    let output_norm = l.vector(T::OutputNorm.weight(), d)?;
    let output = l
        .optional_matrix(T::Output.weight(), d, hp.n_vocab)?
        .map_or_else(|| l.packed(token_embd.clone()), Ok)?;
    let q_out = dims.n_head * k_mla;
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        let attn_norm = l.vector(&T::AttnNorm.block_weight(i), d)?;
        let q = match q_lora {
            Some(rank) => Query::Compressed {
                norm: l.vector(&T::AttnQANorm.block_weight(i), rank)?,
                a: l.matrix(&T::AttnQA.block_weight(i), d, rank)?,
                b: l.matrix(&T::AttnQB.block_weight(i), rank, q_out)?,
            },
            None => Query::Direct(l.matrix(&T::AttnQ.block_weight(i), d, q_out)?),
        };
        let kv_a_norm = l.vector(&T::AttnKvANorm.block_weight(i), kv_lora)?;
        let kv_a = l.matrix(&T::AttnKvAMqa.block_weight(i), d, kv_lora + rope)?;
        let k_b = l.per_head(&T::AttnKB.block_weight(i), dims.nope, kv_lora, dims.n_head)?;
        let v_b = l.per_head(&T::AttnVB.block_weight(i), kv_lora, v, dims.n_head)?;
        let wo = l.matrix(&T::AttnOut.block_weight(i), dims.n_head * v, d)?;
        let ffn_norm = l.vector(&T::FfnNorm.block_weight(i), d)?;
        let ffn = match routing {
            Some(ro) if i >= n_dense => {
                let mut moe = MoeFfn::load(l, i, d, n_ff_exp, ro)?;
                if n_shared > 0 {
                    let width = n_ff_exp * n_shared;
                    moe.shared = Some(SharedExpert::load(l, i, d, width)?);
                }
                Ffn::Routed(Box::new(moe))
            }
            _ => Ffn::Dense {
                gate: l.matrix(&T::FfnGate.block_weight(i), d, hp.n_ff)?,
                up: l.matrix(&T::FfnUp.block_weight(i), d, hp.n_ff)?,
                down: l.matrix(&T::FfnDown.block_weight(i), hp.n_ff, d)?,
            },
        };
        layers.push(Layer {
            attn_norm,
            q,
            kv_a,
            kv_a_norm,
            k_b,
            v_b,
            wo,
            ffn_norm,
            ffn,
        });
    }
    // `rope.scaling.yarn_log_multiplier` is written as 0.1 · mscale_all_dim; llama.cpp divides
    // it back. With it, llama_context's YaRN attention factor is 1 / (1 + 0.1 ln factor)
    // (get_mscale(f, m) / get_mscale(f, m) is exactly 1 for DeepSeek 2).
    let log_mul = r
        .opt_f32("rope.scaling.yarn_log_multiplier")?
        .unwrap_or(0.0)
        / 0.1;
    let mut rope = Rope::for_model(
        rope,
        false,
        hp.rope_freq_base,
        hp.rope_scaling,
        hp.n_ctx_train,
    );
    let yarn = matches!(hp.rope_scaling, RopeScaling::Yarn { .. });
    if yarn && log_mul != 0.0 {
        rope.attn_factor = 1.0 / (1.0 + 0.1 * (1.0 / rope.freq_scale).ln());
    }
    // llm_build_deepseek2's pre-scaled attention: ggml's RoPE multiplies the rotated parts by
    // the magnitude correction, whose square the scale carries for the whole dot product.
    let ln_inv_scale = (1.0 / rope.freq_scale).ln();
    let attn_factor = if yarn { rope.attn_factor } else { 1.0 };
    let original = attn_factor * (1.0 + 0.1 * ln_inv_scale);
    let mscale = original * (1.0 + 0.1 * log_mul * ln_inv_scale);
    let kq_scale = 1.0 * mscale * mscale / (k_mla as f32).sqrt();
    Ok(Box::new(DeepSeek2 {
        hp,
        dims,
        token_embd,
        layers,
        output_norm,
        output,
        rope,
        scores: Scores::new(kq_scale, 0.0),
    }))
}

impl DeepSeek2 {
    /// Latent attention of block `l` from the normed rows in `s.sublayer` to the rows of
    /// `attn_output`'s input in `s.gate`.
    fn attention(
        &self,
        l: &Layer,
        ctx: &Ctx<'_>,
        pass_caches: &mut [crate::kv_cache::KvCache],
        segments: &[crate::forward::Segment],
        s: &mut Scratch,
        il: usize,
    ) -> Result<()> {
        let Dims {
            n_head,
            nope,
            rope,
            kv_lora,
            v,
        } = self.dims;
        let eps = self.hp.norm_eps;
        let k_mla = nope + rope;
        let n = s.sublayer.len() / self.hp.n_embd;
        // The query, in s.gate.
        match &l.q {
            Query::Direct(wq) => ctx.matmul(wq, &s.sublayer, &mut s.gate, &mut s.quant)?,
            Query::Compressed { a, norm, b } => {
                ctx.matmul(a, &s.sublayer, &mut s.up, &mut s.quant)?;
                rms_norm_each(&mut s.up, norm, eps);
                ctx.matmul(b, &s.up, &mut s.gate, &mut s.quant)?;
            }
        }
        // The compressed key-value and its rotated part, in s.up.
        ctx.matmul(&l.kv_a, &s.sublayer, &mut s.up, &mut s.quant)?;
        let cache = &s.rope[0];
        let per_token = rope / 2;
        let rotate = |x: &mut [f32], t: usize| {
            self.rope
                .apply(x, &cache[t * per_token..(t + 1) * per_token]);
        };
        // Keys: the normed latent, then its rotated part; values: the normed latent.
        let w = kv_lora + rope;
        s.keys.resize(n * w, 0.0);
        s.values.resize(n * kv_lora, 0.0);
        for t in 0..n {
            let row = &mut s.up[t * w..(t + 1) * w];
            let (latent, pe) = row.split_at_mut(kv_lora);
            rotate(pe, t);
            let key = &mut s.keys[t * w..(t + 1) * w];
            rms_norm(latent, &l.kv_a_norm, eps, &mut key[..kv_lora]);
            key[kv_lora..].copy_from_slice(pe);
            s.values[t * kv_lora..(t + 1) * kv_lora].copy_from_slice(&key[..kv_lora]);
        }
        // Queries: per head, the absorbed `nope` part, then the rotated part.
        s.queries.resize(n * n_head * w, 0.0);
        for h in 0..n_head {
            s.head_rows.clear();
            for t in 0..n {
                let q = &mut s.gate[(t * n_head + h) * k_mla..(t * n_head + h + 1) * k_mla];
                rotate(&mut q[nope..], t);
                s.head_rows.extend_from_slice(&q[..nope]);
            }
            ctx.matmul(&l.k_b[h], &s.head_rows, &mut s.head_product, &mut s.quant)?;
            for t in 0..n {
                let out = &mut s.queries[(t * n_head + h) * w..(t * n_head + h + 1) * w];
                out[..kv_lora].copy_from_slice(&s.head_product[t * kv_lora..(t + 1) * kv_lora]);
                let q = &s.gate[(t * n_head + h) * k_mla..(t * n_head + h + 1) * k_mla];
                out[kv_lora..].copy_from_slice(&q[nope..]);
            }
        }
        CachedAttention {
            heads: Heads::of(&self.hp),
            window: None,
            scores: self.scores,
            sinks: None,
        }
        .run(ctx, pass_caches, segments, s, il);
        // Each head's attended latent expanded to its values, in s.gate.
        s.gate.resize(n * n_head * v, 0.0);
        for h in 0..n_head {
            s.head_rows.clear();
            for t in 0..n {
                let o = &s.attn[(t * n_head + h) * kv_lora..(t * n_head + h + 1) * kv_lora];
                s.head_rows.extend_from_slice(o);
            }
            ctx.matmul(&l.v_b[h], &s.head_rows, &mut s.head_product, &mut s.quant)?;
            for t in 0..n {
                s.gate[(t * n_head + h) * v..(t * n_head + h + 1) * v]
                    .copy_from_slice(&s.head_product[t * v..(t + 1) * v]);
            }
        }
        Ok(())
    }
}

impl Architecture for DeepSeek2 {
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
        s.fill_rope(std::slice::from_ref(&self.rope), segments);
        for (il, l) in self.layers.iter().enumerate() {
            rms_norm_rows(&s.residual, &l.attn_norm, eps, &mut s.sublayer);
            self.attention(l, ctx, caches, segments, s, il)?;
            ctx.matmul(&l.wo, &s.gate, &mut s.sublayer, &mut s.quant)?;
            add_assign(&mut s.residual, &s.sublayer);
            rms_norm_rows(&s.residual, &l.ffn_norm, eps, &mut s.sublayer);
            l.ffn.run(ctx, s)?;
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
