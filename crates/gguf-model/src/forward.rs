//! The forward pass: token embeddings, transformer blocks over a KV cache, final norm and
//! output projection. A batch of prompt tokens goes through `matmul` (each weight row read
//! once for the whole batch), a single token through `matvec`; both on the session's
//! [`ThreadPool`](gguf_quant::ThreadPool).

use gguf_quant::{matmul_on, ThreadPool};
use half::f16;

use crate::config::{Hparams, RopeScaling};
use crate::error::{ModelError, Result};
use crate::ops::{self, Rope};
use crate::weights::{Matrix, Weights};

/// How the KV cache stores keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvType {
    /// Half precision, as llama.cpp does by default.
    #[default]
    F16,
    /// Single precision.
    F32,
}

/// Keys and values of every layer for positions `0..n_ctx`.
#[derive(Debug, Clone)]
pub(crate) enum KvCache {
    F16 { k: Vec<Vec<f16>>, v: Vec<Vec<f16>> },
    F32 { k: Vec<Vec<f32>>, v: Vec<Vec<f32>> },
}

impl KvCache {
    pub(crate) fn new(hp: &Hparams, n_ctx: usize, ty: KvType) -> KvCache {
        let kd = n_ctx * hp.n_head_kv * hp.head_dim_k;
        let vd = n_ctx * hp.n_head_kv * hp.head_dim_v;
        match ty {
            KvType::F16 => KvCache::F16 {
                k: (0..hp.n_layer).map(|_| vec![f16::ZERO; kd]).collect(),
                v: (0..hp.n_layer).map(|_| vec![f16::ZERO; vd]).collect(),
            },
            KvType::F32 => KvCache::F32 {
                k: (0..hp.n_layer).map(|_| vec![0.0; kd]).collect(),
                v: (0..hp.n_layer).map(|_| vec![0.0; vd]).collect(),
            },
        }
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        match self {
            KvCache::F16 { k, v } => (k.iter().chain(v).map(Vec::len).sum::<usize>()) * 2,
            KvCache::F32 { k, v } => (k.iter().chain(v).map(Vec::len).sum::<usize>()) * 4,
        }
    }
}

/// Buffers of one forward pass, reused across calls.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    quant: Vec<u8>,
    rope: Vec<(f32, f32)>,
    row: Vec<f32>,
    /// One per pool thread.
    attn_scratch: Vec<std::sync::Mutex<AttnScratch>>,
}

/// Buffers of one thread's attention.
#[derive(Debug, Default)]
struct AttnScratch {
    q16: Vec<f16>,
    acc16: Vec<f16>,
    acc32: Vec<f32>,
    row: Vec<f32>,
}

/// Batches of at least this many tokens attend in f32, as ggml's tiled flash attention does
/// (`GGML_FA_TILE_Q`); smaller ones in f16, as its one-query path does.
const WIDE_ATTENTION_BATCH: usize = 64;

/// Everything a forward pass reads that does not change.
pub(crate) struct Forward<'m> {
    pub hp: &'m Hparams,
    pub w: &'m Weights,
    pub bytes: &'m [u8],
    pub rope: Rope,
}

/// The RoPE setup `hp` asks for.
pub(crate) fn rope_for(hp: &Hparams) -> Rope {
    let (freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, n_ctx_orig) =
        match hp.rope_scaling {
            RopeScaling::None => (1.0, 0.0, 1.0, 32.0, 1.0, hp.n_ctx_train),
            RopeScaling::Linear { factor } => (1.0 / factor, 0.0, 1.0, 32.0, 1.0, hp.n_ctx_train),
            RopeScaling::Yarn {
                factor,
                original_context,
                ext_factor,
                attn_factor,
                beta_fast,
                beta_slow,
            } => (
                1.0 / factor,
                ext_factor,
                attn_factor,
                beta_fast,
                beta_slow,
                original_context,
            ),
        };
    Rope::new(
        hp.n_rot,
        hp.arch.rope_neox(),
        hp.rope_freq_base,
        freq_scale,
        ext_factor,
        attn_factor,
        beta_fast,
        beta_slow,
        n_ctx_orig,
    )
}

impl Forward<'_> {
    fn data(&self, m: &Matrix) -> &[u8] {
        &self.bytes[m.start..m.start + m.len]
    }

    /// `out[b] = M x[b]` for the batch rows of `x`.
    fn matmul(
        &self,
        pool: &ThreadPool,
        m: &Matrix,
        x: &[f32],
        out: &mut Vec<f32>,
        quant: &mut Vec<u8>,
    ) -> Result<()> {
        let batch = x.len() / m.cols;
        out.resize(batch * m.rows, 0.0);
        matmul_on(pool, m.ty, self.data(m), m.cols, x, batch, out, quant)?;
        Ok(())
    }

    /// Runs `tokens` at positions `pos0..` through the model, filling the cache; writes into
    /// `logits` the logits of every token with `all_logits`, else of the last token only.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn run(
        &self,
        pool: &ThreadPool,
        cache: &mut KvCache,
        n_ctx: usize,
        tokens: &[u32],
        pos0: usize,
        all_logits: bool,
        s: &mut Scratch,
        logits: &mut Vec<f32>,
    ) -> Result<()> {
        let hp = self.hp;
        let n = tokens.len();
        if n == 0 {
            return Ok(());
        }
        if pos0 + n > n_ctx {
            return Err(ModelError::ContextFull {
                needed: pos0 + n,
                n_ctx,
            });
        }
        if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= hp.n_vocab) {
            return Err(ModelError::Request(format!(
                "token id {bad} is out of range (the vocabulary has {} tokens)",
                hp.n_vocab
            )));
        }
        let d = hp.n_embd;
        // Embeddings: each token's row dequantized.
        s.x.resize(n * d, 0.0);
        let embd = &self.w.token_embd;
        let rb = embd.row_bytes();
        for (i, &t) in tokens.iter().enumerate() {
            let row = &self.data(embd)[t as usize * rb..(t as usize + 1) * rb];
            gguf_quant::dequantize_row(embd.ty, row, &mut s.x[i * d..(i + 1) * d])?;
        }
        let (hq, hkv, dk, dv) = (hp.n_head, hp.n_head_kv, hp.head_dim_k, hp.head_dim_v);
        let group = hq / hkv;
        let kq_scale = 1.0 / (dk as f32).sqrt();
        s.h.resize(n * d, 0.0);
        s.attn.resize(n * hq * dv, 0.0);
        // RoPE's cos/sin per position, shared by every layer.
        let half_rot = hp.n_rot / 2;
        s.rope.clear();
        for i in 0..n {
            self.rope.cache((pos0 + i) as i64, &mut s.rope);
        }
        for (il, layer) in self.w.layers.iter().enumerate() {
            for i in 0..n {
                ops::rms_norm(
                    &s.x[i * d..(i + 1) * d],
                    &layer.attn_norm,
                    hp.rms_eps,
                    &mut s.h[i * d..(i + 1) * d],
                );
            }
            self.matmul(pool, &layer.wq, &s.h, &mut s.q, &mut s.quant)?;
            self.matmul(pool, &layer.wk, &s.h, &mut s.k, &mut s.quant)?;
            self.matmul(pool, &layer.wv, &s.h, &mut s.v, &mut s.quant)?;
            for (buf, bias) in [
                (&mut s.q, &layer.bq),
                (&mut s.k, &layer.bk),
                (&mut s.v, &layer.bv),
            ] {
                if let Some(b) = bias {
                    for row in buf.chunks_exact_mut(b.len()) {
                        for (x, &y) in row.iter_mut().zip(b) {
                            *x += y;
                        }
                    }
                }
            }
            if let Some(w) = &layer.q_norm {
                for head in s.q.chunks_exact_mut(dk) {
                    ops::rms_norm_in_place(head, w, hp.rms_eps);
                }
            }
            if let Some(w) = &layer.k_norm {
                for head in s.k.chunks_exact_mut(dk) {
                    ops::rms_norm_in_place(head, w, hp.rms_eps);
                }
            }
            for (i, rope) in s.rope.chunks_exact(half_rot).enumerate() {
                for head in s.q[i * hq * dk..(i + 1) * hq * dk].chunks_exact_mut(dk) {
                    self.rope.apply(head, rope);
                }
                for head in s.k[i * hkv * dk..(i + 1) * hkv * dk].chunks_exact_mut(dk) {
                    self.rope.apply(head, rope);
                }
            }
            // Store K and V, then attend.
            let (kw, vw) = (hkv * dk, hkv * dv);
            match cache {
                KvCache::F16 { k, v } => {
                    for i in 0..n {
                        let p = pos0 + i;
                        let (ks, vs) = (&s.k[i * kw..(i + 1) * kw], &s.v[i * vw..(i + 1) * vw]);
                        gguf_quant::vec::f32_to_f16(ks, &mut k[il][p * kw..(p + 1) * kw]);
                        gguf_quant::vec::f32_to_f16(vs, &mut v[il][p * vw..(p + 1) * vw]);
                    }
                }
                KvCache::F32 { k, v } => {
                    for i in 0..n {
                        let p = pos0 + i;
                        k[il][p * kw..(p + 1) * kw].copy_from_slice(&s.k[i * kw..(i + 1) * kw]);
                        v[il][p * vw..(p + 1) * vw].copy_from_slice(&s.v[i * vw..(i + 1) * vw]);
                    }
                }
            }
            // Attention: each thread takes a contiguous share of the (token, head) pairs.
            let threads = pool.threads();
            while s.attn_scratch.len() < threads {
                s.attn_scratch
                    .push(std::sync::Mutex::new(AttnScratch::default()));
            }
            let units = n * hq;
            let share = units.div_ceil(threads);
            let outs: Vec<std::sync::Mutex<&mut [f32]>> = s
                .attn
                .chunks_mut(share * dv)
                .map(std::sync::Mutex::new)
                .collect();
            let (q_all, scratches, cache_ref) = (&s.q, &s.attn_scratch, &*cache);
            pool.run(|t, _| {
                let Some(out) = outs.get(t) else { return };
                let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
                let mut a = scratches[t].lock().unwrap_or_else(|e| e.into_inner());
                let a = &mut *a;
                for (j, o) in out.chunks_exact_mut(dv).enumerate() {
                    let u = t * share + j;
                    let (i, h) = (u / hq, u % hq);
                    let p = pos0 + i;
                    let first = hp.sliding_window.map_or(0, |w| (p + 1).saturating_sub(w));
                    let kvh = h / group;
                    let q = &q_all[u * dk..(u + 1) * dk];
                    match cache_ref {
                        KvCache::F16 { k, v } if n >= WIDE_ATTENTION_BATCH => ops::attend_f16_wide(
                            q,
                            &k[il][kvh * dk..],
                            &v[il][kvh * dv..],
                            kw,
                            first,
                            p,
                            kq_scale,
                            &mut a.row,
                            &mut a.acc32,
                            o,
                        ),
                        KvCache::F16 { k, v } => ops::attend_f16(
                            q,
                            &k[il][kvh * dk..],
                            &v[il][kvh * dv..],
                            kw,
                            first,
                            p,
                            kq_scale,
                            &mut a.q16,
                            &mut a.acc16,
                            o,
                        ),
                        KvCache::F32 { k, v } => ops::attend_f32(
                            q,
                            &k[il][kvh * dk..],
                            &v[il][kvh * dv..],
                            kw,
                            first,
                            p,
                            kq_scale,
                            &mut a.acc32,
                            o,
                        ),
                    }
                }
            });
            drop(outs);
            self.matmul(pool, &layer.wo, &s.attn, &mut s.h, &mut s.quant)?;
            for (x, &y) in s.x.iter_mut().zip(&s.h) {
                *x += y;
            }
            // Feed-forward.
            s.h.resize(n * d, 0.0);
            for i in 0..n {
                ops::rms_norm(
                    &s.x[i * d..(i + 1) * d],
                    &layer.ffn_norm,
                    hp.rms_eps,
                    &mut s.h[i * d..(i + 1) * d],
                );
            }
            self.matmul(pool, &layer.w_gate, &s.h, &mut s.gate, &mut s.quant)?;
            self.matmul(pool, &layer.w_up, &s.h, &mut s.up, &mut s.quant)?;
            gguf_quant::vec::swiglu(&mut s.gate, &s.up);
            self.matmul(pool, &layer.w_down, &s.gate, &mut s.h, &mut s.quant)?;
            for (x, &y) in s.x.iter_mut().zip(&s.h) {
                *x += y;
            }
            s.h.resize(n * d, 0.0);
        }
        // Output: the last row only, unless every row's logits are asked for.
        let rows = if all_logits { 0..n } else { n - 1..n };
        s.row.resize(rows.len() * d, 0.0);
        for (j, i) in rows.clone().enumerate() {
            ops::rms_norm(
                &s.x[i * d..(i + 1) * d],
                &self.w.output_norm,
                hp.rms_eps,
                &mut s.row[j * d..(j + 1) * d],
            );
        }
        self.matmul(pool, &self.w.output, &s.row, logits, &mut s.quant)?;
        Ok(())
    }
}
