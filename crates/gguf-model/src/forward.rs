//! What every architecture's forward pass is made of: the batch being run ([`Pass`]), its
//! reusable buffers ([`Scratch`]), and the steps that are the same for all of them (token
//! embeddings, matrix products on the pool, RoPE, attention over the KV cache, the output
//! projection). An architecture's `forward` strings these together with the element-wise ops
//! of [`crate::ops`]. A batch of prompt tokens goes through `matmul` (each weight row read once
//! for the whole batch), a single token through the same call with one row; both on the
//! session's [`ThreadPool`].

use gguf_quant::{matmul_on, ThreadPool};

use crate::attention::{attention, AttnThreads, Mask, Scores};
use crate::error::Result;
use crate::hparams::Hparams;
use crate::kv_cache::KvCache;
use crate::ops::{self, Rope};
use crate::weights::{Matrix, Qkv};

/// Buffers of one forward pass, reused across calls. Architectures use them as they need:
/// `residual` is the residual stream, the others hold intermediate rows.
#[derive(Debug, Default)]
pub(crate) struct Scratch {
    /// The residual stream: one row of `n_embd` values per token of the batch.
    pub residual: Vec<f32>,
    /// The rows of the current sublayer: its normed input, then its output before it is added
    /// to the residual stream.
    pub sublayer: Vec<f32>,
    /// The query, key and value projections of the batch's rows.
    pub queries: Vec<f32>,
    pub keys: Vec<f32>,
    pub values: Vec<f32>,
    pub attn: Vec<f32>,
    pub gate: Vec<f32>,
    pub up: Vec<f32>,
    pub quant: Vec<u8>,
    /// Per RoPE setup of the architecture, the (cos, sin) pairs of each position of the batch.
    pub rope: Vec<Vec<(f32, f32)>>,
    /// The normed rows whose logits are computed.
    pub row: Vec<f32>,
    /// The rows of `residual` whose logits are computed, when they are not one run of it.
    pub picked: Vec<f32>,
    /// One segment's attention output, when the batch has several.
    pub attn_segment: Vec<f32>,
    /// Attention's buffers, one set per pool thread.
    pub attn_threads: AttnThreads,
    /// The routed feed-forward network's buffers (mixtures of experts).
    pub moe: crate::moe::MoeScratch,
    /// One attention head's rows gathered from the batch, and their product with that head's
    /// matrix (latent attention's per-head `attn_k_b`/`attn_v_b`).
    pub head_rows: Vec<f32>,
    pub head_product: Vec<f32>,
}

/// What a pass reads and does not change: the pool and the mapped bytes of each part.
pub(crate) struct Ctx<'a> {
    pub pool: &'a ThreadPool,
    pub parts: &'a [&'a [u8]],
}

impl Ctx<'_> {
    fn data(&self, m: &Matrix) -> &[u8] {
        &self.parts[m.part][m.start..m.start + m.len]
    }

    /// `out[b] = M x[b]` for the batch rows of `x`: on its packed copy if it has one (as
    /// llama.cpp's repacked kernels, GEMM for the rows in groups of four, GEMV for the rest),
    /// else on the mapped bytes.
    pub fn matmul(
        &self,
        m: &Matrix,
        x: &[f32],
        out: &mut Vec<f32>,
        quant: &mut Vec<u8>,
    ) -> Result<()> {
        self.product(m, x, out, quant, Rows::Batched)
    }

    /// [`Ctx::matmul`] of an expert's matrix as ggml's `mul_mat_id` computes it: one row at a
    /// time, never a GEMM: on its packed copy through the packed GEMV (llama.cpp repacks the
    /// same types, and its repacked `mul_mat_id` runs every row through the GEMV), else with
    /// the type's dot kernel.
    pub fn matmul_expert(
        &self,
        m: &Matrix,
        x: &[f32],
        out: &mut Vec<f32>,
        quant: &mut Vec<u8>,
    ) -> Result<()> {
        self.product(m, x, out, quant, Rows::OneByOne)
    }

    fn product(
        &self,
        m: &Matrix,
        x: &[f32],
        out: &mut Vec<f32>,
        quant: &mut Vec<u8>,
        rows: Rows,
    ) -> Result<()> {
        let batch = x.len() / m.cols;
        out.resize(batch * m.rows, 0.0);
        if batch == 0 {
            // No rows (a step whose sequences all skip their logits).
            return Ok(());
        }
        let (pool, data) = (self.pool, self.data(m));
        match (&m.packed, rows) {
            (Some(p), Rows::Batched) => p.matmul_on(pool, x, batch, out, quant)?,
            (Some(p), Rows::OneByOne) => p.matmul_gemv_on(pool, x, batch, out, quant)?,
            (None, Rows::Batched) => matmul_on(pool, m.ty, data, m.cols, x, batch, out, quant)?,
            (None, Rows::OneByOne) => {
                gguf_quant::matmul_dots_on(pool, m.ty, data, m.cols, x, batch, out, quant)?
            }
        }
        Ok(())
    }

    /// The rows of `embd` for `tokens`, dequantized into `out`.
    pub fn embed(&self, embd: &Matrix, tokens: &[u32], out: &mut Vec<f32>) -> Result<()> {
        let (d, rb) = (embd.cols, embd.row_bytes());
        out.resize(tokens.len() * d, 0.0);
        let data = self.data(embd);
        for (i, &t) in tokens.iter().enumerate() {
            let row = &data[t as usize * rb..(t as usize + 1) * rb];
            gguf_quant::dequantize_row(embd.ty, row, &mut out[i * d..(i + 1) * d])?;
        }
        Ok(())
    }
}

/// How a product computes a batch of activation rows: with the GEMM kernels where the type
/// has them, or each row alone (ggml's `mul_mat_id`).
#[derive(Debug, Clone, Copy)]
enum Rows {
    Batched,
    OneByOne,
}

/// One sequence's consecutive tokens in a batch: `len` tokens at positions `pos0..`, whose keys
/// and values go to `caches[cache]` and who attend only to that cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub cache: usize,
    pub pos0: usize,
    pub len: usize,
    /// The logits of the segment's last token are wanted (of each of its tokens with
    /// [`Pass::all_logits`]).
    pub logits: bool,
}

impl Segment {
    /// The whole batch as one sequence in cache 0, its last token's logits wanted.
    pub fn one(pos0: usize, len: usize) -> Segment {
        Segment {
            cache: 0,
            pos0,
            len,
            logits: true,
        }
    }
}

/// One batch: `tokens`, made of the consecutive runs `segments` describe (one per sequence),
/// through the model, into the caches; into `logits`, one row for the last token of each
/// segment that wants logits (or for each of its tokens, with `all_logits`), in order.
/// Apart from attention, which each segment does over its own cache, every step takes the
/// rows of all segments at once (a matrix's rows read once for the whole batch).
pub(crate) struct Pass<'a> {
    pub ctx: Ctx<'a>,
    pub caches: &'a mut [KvCache],
    pub scratch: &'a mut Scratch,
    pub tokens: &'a [u32],
    pub segments: &'a [Segment],
    /// The context length of each sequence (Phi-3 picks its RoPE factors by it, as llama.cpp
    /// does by its `n_ctx_seq`).
    pub n_ctx: usize,
    pub all_logits: bool,
    /// Instead of logits, write the rows the output matrix would multiply (after the final
    /// norm: the hidden states llama.cpp's embeddings read) to `logits`; an encoder writes
    /// every row of the batch.
    pub embeddings: bool,
    pub logits: &'a mut Vec<f32>,
}

/// The shape of an attention layer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Heads {
    pub n_head: usize,
    pub n_head_kv: usize,
    pub head_dim_k: usize,
    pub head_dim_v: usize,
}

impl Heads {
    /// The heads `hp` describes.
    pub fn of(hp: &Hparams) -> Heads {
        Heads {
            n_head: hp.n_head,
            n_head_kv: hp.n_head_kv,
            head_dim_k: hp.head_dim_k,
            head_dim_v: hp.head_dim_v,
        }
    }
}

/// One layer's self-attention up to its output projection, the part every architecture shares:
/// Q, K and V projected from the normed rows (with their biases), Q and K normed per head
/// when the architecture does, rotated, Q scaled when the architecture scales it before
/// attention (then `scores` has scale 1), K and V stored, and attention over the cache.
pub(crate) struct SelfAttention<'a> {
    pub qkv: &'a Qkv,
    /// RMSNorm weights of each Q head and each K head (Qwen 3, Gemma 3).
    pub qk_norm: Option<(&'a [f32], &'a [f32])>,
    pub eps: f32,
    pub rope: &'a Rope,
    /// Which of [`Scratch::rope`]'s caches `rope` filled.
    pub rope_cache: usize,
    pub query_scale: Option<f32>,
    pub heads: Heads,
    pub window: Option<usize>,
    pub scores: Scores,
    /// Each query head's sink logit (gpt-oss' `attn_sinks`; see [`crate::attention`]).
    pub sinks: Option<&'a [f32]>,
}

impl SelfAttention<'_> {
    /// From the normed rows in `s.sublayer` to attention's output rows in `s.attn`, storing each
    /// segment's keys and values in layer `il` of its cache.
    pub fn run(
        &self,
        ctx: &Ctx<'_>,
        caches: &mut [KvCache],
        segments: &[Segment],
        s: &mut Scratch,
        il: usize,
    ) -> Result<()> {
        let qkv = self.qkv;
        ctx.matmul(&qkv.wq, &s.sublayer, &mut s.queries, &mut s.quant)?;
        ctx.matmul(&qkv.wk, &s.sublayer, &mut s.keys, &mut s.quant)?;
        ctx.matmul(&qkv.wv, &s.sublayer, &mut s.values, &mut s.quant)?;
        qkv.add_biases(&mut s.queries, &mut s.keys, &mut s.values);
        if let Some((qn, kn)) = self.qk_norm {
            rms_norm_each(&mut s.queries, qn, self.eps);
            rms_norm_each(&mut s.keys, kn, self.eps);
        }
        let dk = self.heads.head_dim_k;
        let rope_cache = &s.rope[self.rope_cache];
        apply_rope(self.rope, rope_cache, &mut s.queries, dk);
        apply_rope(self.rope, rope_cache, &mut s.keys, dk);
        if let Some(scale) = self.query_scale {
            ops::scale(&mut s.queries, scale);
        }
        CachedAttention {
            heads: self.heads,
            window: self.window,
            scores: self.scores,
            sinks: self.sinks,
        }
        .run(ctx, caches, segments, s, il);
        Ok(())
    }
}

/// Attention over the cache once the batch's queries, keys and values are in `s.queries`,
/// `s.keys` and `s.values` (rotated and scaled as the architecture wants them): the part of
/// [`SelfAttention`] after its projections, which latent attention (DeepSeek 2) shares.
pub(crate) struct CachedAttention<'a> {
    pub heads: Heads,
    pub window: Option<usize>,
    pub scores: Scores,
    pub sinks: Option<&'a [f32]>,
}

impl CachedAttention<'_> {
    /// Stores each segment's keys and values in layer `il` of its cache and writes
    /// attention's output rows to `s.attn`.
    pub fn run(
        &self,
        ctx: &Ctx<'_>,
        caches: &mut [KvCache],
        segments: &[Segment],
        s: &mut Scratch,
        il: usize,
    ) {
        let Heads {
            n_head: hq,
            n_head_kv: hkv,
            head_dim_k: dk,
            head_dim_v: dv,
        } = self.heads;
        let (qw, kw, vw, ow) = (hq * dk, hkv * dk, hkv * dv, hq * dv);
        // One segment writes straight into `attn`; several each into `attn_segment`, copied
        // to their rows.
        let single = segments.len() == 1;
        if !single {
            let n: usize = segments.iter().map(|seg| seg.len).sum();
            s.attn.resize(n * ow, 0.0);
        }
        let mut row = 0;
        for seg in segments {
            let rows = row..row + seg.len;
            let cache = &mut caches[seg.cache];
            let (k, v) = (
                &s.keys[rows.start * kw..rows.end * kw],
                &s.values[rows.start * vw..rows.end * vw],
            );
            cache.store(il, seg.pos0, k, v);
            let q = &s.queries[rows.start * qw..rows.end * qw];
            let out = if single {
                &mut s.attn
            } else {
                &mut s.attn_segment
            };
            let (mask, threads) = (Mask::Causal(self.window), &mut s.attn_threads);
            attention(
                ctx.pool,
                cache,
                il,
                q,
                seg.pos0,
                self.heads,
                mask,
                self.scores,
                self.sinks,
                threads,
                out,
            );
            if !single {
                s.attn[rows.start * ow..rows.end * ow].copy_from_slice(&s.attn_segment);
            }
            row = rows.end;
        }
    }
}

/// The gated feed-forward network's activation.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Gate {
    /// SwiGLU (llama, Phi-3).
    Silu,
    /// GeGLU with ggml's tanh GELU (Gemma).
    Gelu,
    /// gpt-oss' clamped SwiGLU ([`ops::swiglu_oai`]).
    SwigluOai,
}

impl Gate {
    /// `gate[i] = act(gate[i]) * up[i]` (each activation's own form of it).
    pub fn apply(self, gate: &mut [f32], up: &[f32]) {
        match self {
            Gate::Silu => gguf_quant::vec::swiglu(gate, up),
            Gate::Gelu => ops::geglu(gate, up),
            Gate::SwigluOai => ops::swiglu_oai(gate, up),
        }
    }
}

/// `down(act(gate(h)) * up(h))` from the normed rows in `s.sublayer`, into `s.sublayer`.
pub(crate) fn gated_ffn(
    ctx: &Ctx<'_>,
    s: &mut Scratch,
    gate: &Matrix,
    up: &Matrix,
    down: &Matrix,
    act: Gate,
) -> Result<()> {
    ctx.matmul(gate, &s.sublayer, &mut s.gate, &mut s.quant)?;
    ctx.matmul(up, &s.sublayer, &mut s.up, &mut s.quant)?;
    act.apply(&mut s.gate, &s.up);
    ctx.matmul(down, &s.gate, &mut s.sublayer, &mut s.quant)
}

impl Scratch {
    /// Fills [`Scratch::rope`] with each of `ropes`' (cos, sin) pairs for the positions of
    /// every token of the segments: computed once per pass, shared by every layer.
    pub fn fill_rope(&mut self, ropes: &[Rope], segments: &[Segment]) {
        self.rope.resize_with(ropes.len(), Vec::new);
        for (cache, rope) in self.rope.iter_mut().zip(ropes) {
            cache.clear();
            for p in positions(segments) {
                rope.cache(p as i64, cache);
            }
        }
    }

    /// As [`Scratch::fill_rope`] for one RoPE setup with frequency factors (see
    /// [`Rope::cache_with_factors`]).
    pub fn fill_rope_with_factors(
        &mut self,
        rope: &Rope,
        factors: Option<&[f32]>,
        segments: &[Segment],
    ) {
        self.rope.resize_with(1, Vec::new);
        let cache = &mut self.rope[0];
        cache.clear();
        for p in positions(segments) {
            rope.cache_with_factors(p as i64, factors, cache);
        }
    }
}

/// The position of each token of the segments, in batch order.
fn positions(segments: &[Segment]) -> impl Iterator<Item = usize> + '_ {
    segments.iter().flat_map(|seg| seg.pos0..seg.pos0 + seg.len)
}

/// `out` = RMSNorm of each `d`-wide row of `x`, times `w`.
pub(crate) fn rms_norm_rows(x: &[f32], w: &[f32], eps: f32, out: &mut Vec<f32>) {
    let d = w.len();
    out.resize(x.len(), 0.0);
    for (row, o) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        ops::rms_norm(row, w, eps, o);
    }
}

/// `out` = LayerNorm of each `d`-wide row of `x`, times `w`, plus `b` (see [`ops::layer_norm`]).
pub(crate) fn layer_norm_rows(x: &[f32], w: &[f32], b: &[f32], eps: f32, out: &mut Vec<f32>) {
    let d = w.len();
    out.resize(x.len(), 0.0);
    for (row, o) in x.chunks_exact(d).zip(out.chunks_exact_mut(d)) {
        ops::layer_norm(row, w, b, eps, o);
    }
}

/// RMSNorm of every `w.len()`-wide piece of `rows`, in place: each head (Qwen 3's and Gemma
/// 3's Q/K norms) or each row.
pub(crate) fn rms_norm_each(rows: &mut [f32], w: &[f32], eps: f32) {
    for head in rows.chunks_exact_mut(w.len()) {
        ops::rms_norm_in_place(head, w, eps);
    }
}

/// Rotates every `head_dim`-wide head of each token's row of `rows` with that token's
/// `cache` entries (from [`Scratch::fill_rope`]).
pub(crate) fn apply_rope(rope: &Rope, cache: &[(f32, f32)], rows: &mut [f32], head_dim: usize) {
    let n = cache.len() / (rope.n_dims / 2);
    if n == 0 {
        return;
    }
    let row_len = rows.len() / n;
    for (row, pos_cache) in rows
        .chunks_exact_mut(row_len)
        .zip(cache.chunks_exact(rope.n_dims / 2))
    {
        for head in row.chunks_exact_mut(head_dim) {
            rope.apply(head, pos_cache);
        }
    }
}

/// With `embeddings` (see [`Pass::embeddings`]), copies the normed output `rows` to `out`
/// and returns true: the pass ends there, without the output matrix.
pub(crate) fn wrote_hidden_states(embeddings: bool, rows: &[f32], out: &mut Vec<f32>) -> bool {
    if embeddings {
        out.clear();
        out.extend_from_slice(rows);
    }
    embeddings
}

/// The `d`-wide rows of `x` (the batch's residual stream) that get logits: the last of each
/// segment that wants them, or all of its rows with `all_logits`. One run of `x` when the
/// batch is one segment, else gathered into `picked`.
pub(crate) fn output_rows<'x>(
    x: &'x [f32],
    d: usize,
    segments: &[Segment],
    all_logits: bool,
    picked: &'x mut Vec<f32>,
) -> &'x [f32] {
    let wanted = |row0: usize, seg: &Segment| match (seg.logits, all_logits) {
        (false, _) => row0..row0,
        (true, true) => row0..row0 + seg.len,
        (true, false) => row0 + seg.len - 1..row0 + seg.len,
    };
    if let [seg] = segments {
        let rows = wanted(0, seg);
        return &x[rows.start * d..rows.end * d];
    }
    picked.clear();
    let mut row0 = 0;
    for seg in segments {
        let rows = wanted(row0, seg);
        picked.extend_from_slice(&x[rows.start * d..rows.end * d]);
        row0 += seg.len;
    }
    picked
}
