//! Attention over the KV cache, as ggml's CPU flash attention computes it: the one-query path
//! (a batch of fewer than [`TILE_Q`] tokens; [`attend_f16`], [`attend_f32`]) and the tiled
//! path ([`Tiled`]), spread over the pool by [`attention`]; each output the same whatever the
//! number of threads.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use gguf_quant::{vec, ThreadPool};
use half::f16;

use crate::forward::Heads;
use crate::kv_cache::{KvCache, LayerCache};

/// Buffers of each thread's attention.
#[derive(Debug, Default)]
pub(crate) struct AttnThreads(Vec<Mutex<AttnScratch>>);

/// Buffers of one thread's attention.
#[derive(Debug, Default)]
struct AttnScratch {
    one: AttendScratch,
    acc32: Vec<f32>,
    tiled: Tiled,
}

/// The most query rows' inputs and outputs (`rows * (dk + dv)` f32) one tile of the tiled
/// attention holds, so that they stay in a core's L2 cache next to the key and value tiles.
const TILE_ROWS_BYTES: usize = 128 << 10;

/// Which positions each query of a batch attends to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mask {
    /// A decoder's: the token at position `p` sees `p - window + 1 ..= p`, the whole prefix
    /// `0..=p` without a window.
    Causal(Option<usize>),
    /// An encoder's (BERT; llama.cpp's `attention.causal = false`): every token of the batch
    /// sees every position from 0 to the batch's last, later ones included.
    Full,
}

/// One KV head's cached keys and values: position `p` at row `p % capacity`, rows
/// `key_stride` (`value_stride`) elements apart (the heads of one position are interleaved).
#[derive(Clone, Copy)]
pub(crate) struct KvHead<'a, T> {
    pub keys: &'a [T],
    pub values: &'a [T],
    pub key_stride: usize,
    pub value_stride: usize,
    pub capacity: usize,
}

impl<T> KvHead<'_, T> {
    fn key(&self, slot: usize, dk: usize) -> &[T] {
        &self.keys[slot * self.key_stride..slot * self.key_stride + dk]
    }

    fn value(&self, slot: usize, dv: usize) -> &[T] {
        &self.values[slot * self.value_stride..slot * self.value_stride + dv]
    }
}

/// How attention turns `q·k` into a logit: times `scale`, then, with a soft cap `c` (Gemma 2),
/// `c * tanh(q·k * scale / c)`, computed as ggml does (the scale divided by the cap first).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scores {
    scale: f32,
    softcap: f32,
}

impl Scores {
    /// `softcap` 0 means none.
    pub(crate) fn new(scale: f32, softcap: f32) -> Scores {
        let scale = if softcap != 0.0 {
            scale / softcap
        } else {
            scale
        };
        Scores { scale, softcap }
    }

    fn logit(&self, dot: f32) -> f32 {
        let s = dot * self.scale;
        if self.softcap != 0.0 {
            self.softcap * s.tanh()
        } else {
            s
        }
    }
}

/// The online softmax of ggml's flash attention over positions `first..=last` of a ring of
/// `capacity` slots: `score(slot)` is the position's logit; `update(slot, rescale, weight)`
/// multiplies the accumulated values by `rescale` (when a new maximum appears) and adds the
/// position's value times `weight`. The weight sum is updated with a fused multiply-add, as
/// GCC compiles ggml's one-query path. Returns the final maximum and the weight sum.
fn online_softmax(
    first: usize,
    last: usize,
    capacity: usize,
    mut score: impl FnMut(usize) -> f32,
    mut update: impl FnMut(usize, Option<f32>, f32),
) -> (f32, f32) {
    let mut sum = 0f32;
    let mut max = f32::NEG_INFINITY;
    let mut slot = first % capacity;
    for _ in first..=last {
        let s = score(slot);
        let (rescale, weight) = if s > max {
            let old = max;
            max = s;
            (Some((old - max).exp()), 1.0)
        } else {
            (None, (s - max).exp())
        };
        update(slot, rescale, weight);
        // `sum · 1 + weight` fused is the plain sum; the plain add spares the call to `fmaf`
        // that `mul_add` is without a target feature.
        sum = match rescale {
            Some(ms) => sum.mul_add(ms, weight),
            None => sum + weight,
        };
        slot += 1;
        if slot == capacity {
            slot = 0;
        }
    }
    (max, sum)
}

/// The end of ggml's softmax for one query with the running maximum `max` and weight sum
/// `sum`: a sink's logit `s` (gpt-oss' `attn_sinks`, one per head) joins the softmax with no
/// value, so above the maximum it rescales the accumulated values by `e^(max - s)` and adds
/// 1 to the rescaled sum, else it adds `e^(s - max)` (the sum updated by a fused
/// multiply-add, as in the loop over positions). Returns the values' rescale, if any, and the
/// reciprocal of the sum (0 when it is 0), by which ggml multiplies them in turn.
fn finish_softmax(max: f32, sum: f32, sink: Option<f32>) -> (Option<f32>, f32) {
    let (rescale, sum) = match sink {
        Some(s) if s > max => {
            let ms = (max - s).exp();
            (Some(ms), sum.mul_add(ms, 1.0))
        }
        Some(s) => (None, sum + (s - max).exp()),
        None => (None, sum),
    };
    (rescale, if sum == 0.0 { 0.0 } else { 1.0 / sum })
}

/// `acc · rescale · inv` as ggml scales an output row: by the sink's rescale first, then by
/// the reciprocal sum, each a rounding of its own.
fn scaled(acc: f32, rescale: Option<f32>, inv: f32) -> f32 {
    match rescale {
        Some(ms) => (acc * ms) * inv,
        None => acc * inv,
    }
}

/// Query heads that share a KV head against its cached positions `first..=last` (positions
/// before `first` masked, for sliding windows), each as `ggml_flash_attn_ext` computes it
/// (one-chunk path, f16 K and V): the query rounded to f16, online softmax in f32, the
/// weighted values accumulated in f16. `q` holds the heads' queries back to back (`dk` values
/// each) and `out` their outputs (`dv` each); each head's numbers are those it has alone.
///
/// The work runs in three passes with the same numbers as one: every position's logit for
/// every head (they do not depend on the softmax's running state; [`vec::dot_f16_rows`] reads
/// each key once for all the heads), each head's softmax rescales and weights, then the value
/// rows in order ([`vec::mad_f16_rows`], which an instruction set may run with the
/// accumulators in registers, the heads' chains of dependent steps side by side). The dot
/// products run back to back instead of each waiting on the previous position's exponential
/// and value update.
///
/// # Panics
/// If `heads` is 0 or does not divide the lengths of `q` and `out`, or `sinks` (one per head,
/// see [`finish_softmax`]) is not `heads` long.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend_f16(
    q: &[f32],
    heads: usize,
    kv: KvHead<'_, f16>,
    positions: (usize, usize),
    scores: Scores,
    sinks: Option<&[f32]>,
    scratch: &mut AttendScratch,
    out: &mut [f32],
) {
    let (first, last) = positions;
    let dv = out.len() / heads;
    let AttendScratch {
        q16,
        acc,
        logits,
        weights,
        rescales,
        raises_max,
        maxima,
        inverses,
    } = scratch;
    q16.resize(q.len(), f16::ZERO);
    vec::f32_to_f16(q, q16);
    acc.clear();
    acc.resize(heads * dv, f16::ZERO);
    // The scores, row by row with the heads side by side, in runs of consecutive cache slots
    // (the ring wraps at most once).
    let (start, count) = (first % kv.capacity, last + 1 - first);
    let run = count.min(kv.capacity - start);
    logits.clear();
    logits.resize(count * heads, 0.0);
    let keys = |slot: usize| &kv.keys[slot * kv.key_stride..];
    let (before, after) = logits.split_at_mut(run * heads);
    vec::dot_f16_rows(before, keys(start), kv.key_stride, q16, heads);
    vec::dot_f16_rows(after, keys(0), kv.key_stride, q16, heads);
    for l in logits.iter_mut() {
        *l = scores.logit(*l);
    }
    // The softmax pass: each head's rescale and weight at each position, laid out as the
    // logits, with `online_softmax`'s numbers. The running maxima come first: a position
    // that raises its head's maximum rescales by e^(old - new) and weighs 1, any other weighs
    // e^(s - max), so every exponent is known before any exponential is taken, and one
    // batched `exp_f32` takes them all.
    weights.clear();
    weights.resize(count * heads, 0.0);
    raises_max.clear();
    raises_max.resize(count * heads, false);
    maxima.clear();
    for h in 0..heads {
        let mut max = f32::NEG_INFINITY;
        for i in (h..count * heads).step_by(heads) {
            let s = logits[i];
            if s > max {
                // The exponential becomes this position's rescale below.
                raises_max[i] = true;
                weights[i] = max - s;
                max = s;
            } else {
                weights[i] = s - max;
            }
        }
        maxima.push(max);
    }
    vec::exp_f32(weights);
    inverses.clear();
    rescales.clear();
    rescales.resize(count * heads, None);
    for h in 0..heads {
        let mut sum = 0f32;
        for i in (h..count * heads).step_by(heads) {
            if raises_max[i] {
                let ms = weights[i];
                (rescales[i], weights[i]) = (Some(ms), 1.0);
                sum = sum.mul_add(ms, 1.0);
            } else {
                // `sum · 1 + weight` fused is the plain sum.
                sum += weights[i];
            }
        }
        inverses.push(finish_softmax(maxima[h], sum, sinks.map(|s| s[h])));
    }
    // The values, in the same runs.
    let values = |slot: usize| &kv.values[slot * kv.value_stride..];
    let stride = kv.value_stride;
    let (early, late) = (..run * heads, run * heads..);
    vec::mad_f16_rows(
        acc,
        heads,
        values(start),
        stride,
        &rescales[early],
        &weights[early],
    );
    vec::mad_f16_rows(
        acc,
        heads,
        values(0),
        stride,
        &rescales[late.clone()],
        &weights[late],
    );
    for ((out, acc), &(rescale, inv)) in out
        .chunks_exact_mut(dv)
        .zip(acc.chunks_exact(dv))
        .zip(&*inverses)
    {
        for (o, a) in out.iter_mut().zip(acc) {
            *o = scaled(a.to_f32(), rescale, inv);
        }
    }
}

/// The buffers of [`attend_f16`], kept between calls.
#[derive(Debug, Default)]
pub(crate) struct AttendScratch {
    q16: Vec<f16>,
    acc: Vec<f16>,
    logits: Vec<f32>,
    weights: Vec<f32>,
    rescales: Vec<Option<f32>>,
    /// Whether each position raises its head's running maximum (laid out as the logits).
    raises_max: Vec<bool>,
    /// Each head's final maximum.
    maxima: Vec<f32>,
    /// Each head's sink rescale and reciprocal weight sum ([`finish_softmax`]).
    inverses: Vec<(Option<f32>, f32)>,
}

/// ggml's tile sizes for flash attention over a batch of queries (`GGML_FA_TILE_Q`,
/// `GGML_FA_TILE_KV`): a batch of at least `TILE_Q` tokens takes the tiled path, whose keys
/// come in tiles of `TILE_KV` cache cells counted from cell 0.
pub(crate) const TILE_Q: usize = 64;
/// See [`TILE_Q`].
pub(crate) const TILE_KV: usize = 64;

/// A KV cache element that widens to f32 exactly.
pub(crate) trait CacheValue: Copy {
    /// `dst[i] = f32(src[i])`.
    fn widen(src: &[Self], dst: &mut [f32]);
}

impl CacheValue for f16 {
    fn widen(src: &[f16], dst: &mut [f32]) {
        vec::f16_to_f32(src, dst);
    }
}

impl CacheValue for f32 {
    fn widen(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }
}

/// Which queries a [`Tiled::attend`] call computes: `heads` query heads of one KV head, each
/// for the `tokens` batch tokens at positions `pos0..pos0 + tokens`; row `r` of the tile is
/// head `r / tokens`, token `r % tokens`. Each token at position `p` attends to positions
/// `p - window + 1 ..= p` (from 0 without a window), or with `full_end` to every position
/// `0..=full_end` (an encoder's attention, later tokens included); all of them are in the cache.
#[derive(Debug, Clone, Copy)]
pub(crate) struct QueryTile {
    pub pos0: usize,
    pub tokens: usize,
    pub heads: usize,
    pub window: Option<usize>,
    /// The last position every row sees, for attention without a causal mask (`None`: each
    /// row sees up to its own position).
    pub full_end: Option<usize>,
}

/// One thread's buffers for ggml's tiled flash attention (`ggml_compute_forward_flash_attn_ext_tiled`),
/// which computes each query row as follows, over f32 queries and keys and values widened
/// from the cache (no f16 rounding anywhere):
///
/// for each tile of [`TILE_KV`] positions `t0..t0 + 64` (`t0` a multiple of 64) that holds a
/// position the row sees, in order:
/// 1. `s[j] = q·k[t0 + j]`, one fused multiply-add chain over the head dimension in order
///    (ggml's `simd_gemm`, [`vec::gemm_f32`]), times the scale, soft-capped (`cap · tanh`) when
///    the model caps; `-inf` at the positions the row does not see;
/// 2. `M' = max(M, max_j s[j])`; when `M' > M`, the accumulator and the sum `S` are multiplied
///    by libm's `expf(M - M')`;
/// 3. `s[j] = expf(s[j] - M')` with ggml's vectorised `expf`, and `S = f32(S + Σ s[j])`, the
///    sum as `ggml_vec_soft_max_f32` forms it (in f64 over groups of eight, [`vec::soft_max_f32`]);
/// 4. `acc[d] += Σ_j s[j] · v[t0 + j][d]`, one fused multiply-add chain over the 64 positions in
///    order, continuing from `acc[d]` (masked positions add `0 · v`, which changes nothing);
///
/// and at the end, with a sink, its step ([`finish_softmax`]), then `out = acc · (1 / S)` (0
/// when `S` is 0).
///
/// A row's result depends only on its own query and positions, not on which rows share its
/// tile, so it is the same for any grouping of rows and any number of threads. The tiles are
/// counted from position 0, where ggml counts them from cache cell 0: the two agree while
/// position `p` is in cell `p`, as in one sequence decoded from an empty cache (llama-bench,
/// llama-perplexity, any prompt that has not wrapped a sliding-window ring); llama.cpp's cells
/// after a ring wraps are not ours to know, and keeping positions makes our result independent
/// of where the ring stands.
#[derive(Debug, Default)]
pub(crate) struct Tiled {
    /// Query rows, `dk` each.
    q: Vec<f32>,
    /// Scores, then softmax weights: `TILE_KV` per row.
    kq: Vec<f32>,
    /// Weighted sums of values: `dv` per row.
    acc: Vec<f32>,
    /// The key tile, transposed: row `d` holds element `d` of the `TILE_KV` keys.
    keys: Vec<f32>,
    /// The value tile: `TILE_KV` rows of `dv`.
    values: Vec<f32>,
    /// One key, widened.
    key: Vec<f32>,
    /// Per row: the running maximum `M` and sum `S`.
    max: Vec<f32>,
    sum: Vec<f32>,
}

impl Tiled {
    /// The buffer of `rows` query rows of `dk`, for the caller to fill before [`Tiled::attend`].
    pub(crate) fn queries(&mut self, rows: usize, dk: usize) -> &mut [f32] {
        self.q.resize(rows * dk, 0.0);
        &mut self.q[..rows * dk]
    }

    /// Attention of the query rows last put in [`Tiled::queries`] (`tile.heads * tile.tokens`
    /// rows) over the KV head `kv`: the rows' outputs, `dv` each (see [`Tiled`] for the order).
    /// `sinks` holds a sink logit for each of the tile's heads ([`finish_softmax`]).
    pub(crate) fn attend<T: CacheValue>(
        &mut self,
        kv: KvHead<'_, T>,
        tile: QueryTile,
        scores: Scores,
        sinks: Option<&[f32]>,
        dk: usize,
        dv: usize,
    ) -> &[f32] {
        let rows = tile.heads * tile.tokens;
        assert!(tile.tokens > 0 && self.q.len() >= rows * dk);
        let first_of = |p: usize| tile.window.map_or(0, |w| (p + 1).saturating_sub(w));
        let last_of = |p: usize| tile.full_end.unwrap_or(p);
        let last = last_of(tile.pos0 + tile.tokens - 1);
        // The positions some row sees; the cache holds each of them in its own slot.
        let lo = first_of(tile.pos0);
        self.kq.resize(rows * TILE_KV, 0.0);
        self.acc.clear();
        self.acc.resize(rows * dv, 0.0);
        self.keys.resize(dk * TILE_KV, 0.0);
        self.values.resize(TILE_KV * dv, 0.0);
        self.key.resize(dk, 0.0);
        self.max.clear();
        self.max.resize(rows, f32::NEG_INFINITY);
        self.sum.clear();
        self.sum.resize(rows, 0.0);
        for t0 in (lo / TILE_KV * TILE_KV..=last).step_by(TILE_KV) {
            self.load_tile(kv, t0, lo..=last, dk, dv);
            let kq = &mut self.kq[..rows * TILE_KV];
            kq.fill(0.0);
            vec::gemm_f32(kq, &self.q, &self.keys, rows, dk, TILE_KV);
            for (r, s) in kq.chunks_exact_mut(TILE_KV).enumerate() {
                let p = tile.pos0 + r % tile.tokens;
                let first = first_of(p);
                let mut tile_max = f32::NEG_INFINITY;
                for (j, x) in s.iter_mut().enumerate() {
                    let q = t0 + j;
                    *x = if q < first || q > last_of(p) {
                        f32::NEG_INFINITY
                    } else {
                        scores.logit(*x)
                    };
                    if *x > tile_max {
                        tile_max = *x;
                    }
                }
                if tile_max == f32::NEG_INFINITY {
                    // Nothing seen here: the row's weights are zero, its state unchanged.
                    s.fill(0.0);
                    continue;
                }
                let old = self.max[r];
                let new = old.max(tile_max);
                if new > old {
                    let ms = (old - new).exp();
                    self.acc[r * dv..(r + 1) * dv]
                        .iter_mut()
                        .for_each(|a| *a *= ms);
                    self.sum[r] *= ms;
                }
                self.max[r] = new;
                self.sum[r] = (f64::from(self.sum[r]) + vec::soft_max_f32(s, new)) as f32;
            }
            vec::gemm_f32(&mut self.acc, kq, &self.values, rows, TILE_KV, dv);
        }
        for (r, a) in self.acc.chunks_exact_mut(dv).enumerate() {
            let sink = sinks.map(|s| s[r / tile.tokens]);
            let (rescale, inv) = finish_softmax(self.max[r], self.sum[r], sink);
            a.iter_mut().for_each(|x| *x = scaled(*x, rescale, inv));
        }
        &self.acc[..rows * dv]
    }

    /// Widens the keys (transposed) and values of positions `t0..t0 + TILE_KV` into the tile
    /// buffers: those in `seen`, from their slots; zeros for the others, which no row sees
    /// (their weights are 0, and a zero value keeps `0 · v` zero whatever the slot holds).
    fn load_tile<T: CacheValue>(
        &mut self,
        kv: KvHead<'_, T>,
        t0: usize,
        seen: std::ops::RangeInclusive<usize>,
        dk: usize,
        dv: usize,
    ) {
        for j in 0..TILE_KV {
            let value = &mut self.values[j * dv..(j + 1) * dv];
            if !seen.contains(&(t0 + j)) {
                value.fill(0.0);
                for d in 0..dk {
                    self.keys[d * TILE_KV + j] = 0.0;
                }
                continue;
            }
            let slot = (t0 + j) % kv.capacity;
            T::widen(kv.value(slot, dv), value);
            T::widen(kv.key(slot, dk), &mut self.key);
            for (d, &k) in self.key.iter().enumerate() {
                self.keys[d * TILE_KV + j] = k;
            }
        }
    }
}

/// `Σ a[i] * b[i]` in eight interleaved partial sums (vectorisable; ggml's one-query path over
/// an f32 cache sums in its own order, which this does not follow).
fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let (ca, cb) = (a.chunks_exact(8), b.chunks_exact(8));
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for l in 0..8 {
            acc[l] += x[l] * y[l];
        }
    }
    let mut sum = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (x, y) in ra.iter().zip(rb) {
        sum += x * y;
    }
    sum
}

/// As [`attend_f16`] for an f32 cache (values accumulated in f32), one head with its `sink`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attend_f32(
    q: &[f32],
    kv: KvHead<'_, f32>,
    first: usize,
    last: usize,
    scores: Scores,
    sink: Option<f32>,
    acc: &mut Vec<f32>,
    out: &mut [f32],
) {
    let (dk, dv) = (q.len(), out.len());
    acc.clear();
    acc.resize(dv, 0.0);
    let (max, sum) = online_softmax(
        first,
        last,
        kv.capacity,
        |slot| scores.logit(dot_f32(kv.key(slot, dk), q)),
        |slot, rescale, weight| {
            if let Some(ms) = rescale {
                acc.iter_mut().for_each(|a| *a *= ms);
            }
            for (a, &x) in acc.iter_mut().zip(kv.value(slot, dv)) {
                *a = x.mul_add(weight, *a);
            }
        },
    );
    let (rescale, inv) = finish_softmax(max, sum, sink);
    for (o, &a) in out.iter_mut().zip(acc.iter()) {
        *o = scaled(a, rescale, inv);
    }
}

/// Attention of the batch's queries `q` (one row of `n_head` heads per token) over layer
/// `il`'s cache, where the batch's keys and values are already stored: each token at position
/// `p` attends to the positions `mask` gives it (see [`Mask`]). The result is one row of
/// `n_head * head_dim_v` per token in `out`.
///
/// As ggml's flash attention chooses: a batch of [`TILE_Q`] tokens or more takes the tiled
/// path ([`tiled_attention`]); a smaller one the one-query path, each thread of the pool taking
/// a contiguous share of the (token, head) pairs. Either way each output is the same whatever
/// the number of threads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    pool: &ThreadPool,
    cache: &KvCache,
    il: usize,
    q: &[f32],
    pos0: usize,
    heads: Heads,
    mask: Mask,
    scores: Scores,
    sinks: Option<&[f32]>,
    threads_scratch: &mut AttnThreads,
    out: &mut Vec<f32>,
) {
    let Heads {
        n_head: hq,
        n_head_kv: hkv,
        head_dim_k: dk,
        head_dim_v: dv,
    } = heads;
    let n = q.len() / (hq * dk);
    let group = hq / hkv;
    // Without a causal mask every row sees up to the batch's last position, as ggml's mask
    // of a non-causal batch (all zeros) lets it.
    let (window, full_end) = match mask {
        Mask::Causal(window) => (window, None),
        Mask::Full => (None, (pos0 + n).checked_sub(1)),
    };
    let threads = pool.threads();
    let scratches = &mut threads_scratch.0;
    while scratches.len() < threads {
        scratches.push(Mutex::new(AttnScratch::default()));
    }
    let scratches = &*scratches;
    out.resize(n * hq * dv, 0.0);
    if n >= TILE_Q {
        match &cache.layers[il] {
            LayerCache::F16 { k, v } => tiled_attention(
                pool, cache, il, k, v, q, pos0, heads, window, full_end, scores, sinks, scratches,
                out,
            ),
            LayerCache::F32 { k, v } => tiled_attention(
                pool, cache, il, k, v, q, pos0, heads, window, full_end, scores, sinks, scratches,
                out,
            ),
        }
        return;
    }
    let units = n * hq;
    let share = units.div_ceil(threads);
    let outs: Vec<Mutex<&mut [f32]>> = out.chunks_mut(share * dv).map(Mutex::new).collect();
    let (key_stride, value_stride) = cache.widths;
    let capacity = cache.capacity[il];
    let layer = &cache.layers[il];
    pool.run(|t, _| {
        let Some(out) = outs.get(t) else { return };
        let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
        let mut a = scratches[t].lock().unwrap_or_else(|e| e.into_inner());
        let a = &mut *a;
        // The thread's (token, head) units in runs of heads that share a token and a KV head,
        // which an f16 cache attends together (each key and value row read once for the run).
        let units = out.len() / dv;
        let mut j = 0;
        while j < units {
            let u = t * share + j;
            let (i, h) = (u / hq, u % hq);
            let p = pos0 + i;
            let first = window.map_or(0, |w| (p + 1).saturating_sub(w));
            let last = full_end.unwrap_or(p);
            let kvh = h / group;
            match layer {
                LayerCache::F16 { k, v } => {
                    let heads = (units - j).min((kvh + 1) * group - h);
                    let kv = KvHead {
                        keys: &k[kvh * dk..],
                        values: &v[kvh * dv..],
                        key_stride,
                        value_stride,
                        capacity,
                    };
                    let q = &q[u * dk..(u + heads) * dk];
                    let o = &mut out[j * dv..(j + heads) * dv];
                    let sinks = sinks.map(|s| &s[h..h + heads]);
                    attend_f16(q, heads, kv, (first, last), scores, sinks, &mut a.one, o);
                    j += heads;
                }
                LayerCache::F32 { k, v } => {
                    let kv = KvHead {
                        keys: &k[kvh * dk..],
                        values: &v[kvh * dv..],
                        key_stride,
                        value_stride,
                        capacity,
                    };
                    let q = &q[u * dk..(u + 1) * dk];
                    let o = &mut out[j * dv..(j + 1) * dv];
                    let sink = sinks.map(|s| s[h]);
                    attend_f32(q, kv, first, last, scores, sink, &mut a.acc32, o);
                    j += 1;
                }
            }
        }
    });
}

/// The tiled path of [`attention`] (see [`Tiled`] for what each output is). The work is cut
/// into tiles of up to [`TILE_Q`] consecutive tokens times the query heads of one KV head
/// (as many of them as [`TILE_ROWS_BYTES`] allows), so that each key and value tile, widened
/// once, serves every head that shares it. The threads take tiles from a shared counter, the
/// costliest (latest tokens, which see the most keys) first.
#[allow(clippy::too_many_arguments)]
fn tiled_attention<T: CacheValue + Send + Sync>(
    pool: &ThreadPool,
    cache: &KvCache,
    il: usize,
    keys: &[T],
    values: &[T],
    q: &[f32],
    pos0: usize,
    heads: Heads,
    window: Option<usize>,
    full_end: Option<usize>,
    scores: Scores,
    sinks: Option<&[f32]>,
    scratches: &[Mutex<AttnScratch>],
    out: &mut [f32],
) {
    let Heads {
        n_head: hq,
        n_head_kv: hkv,
        head_dim_k: dk,
        head_dim_v: dv,
    } = heads;
    let n = q.len() / (hq * dk);
    let group = hq / hkv;
    let (key_stride, value_stride) = cache.widths;
    let capacity = cache.capacity[il];
    let heads_per_tile = (TILE_ROWS_BYTES / (TILE_Q * (dk + dv) * 4)).clamp(1, group);
    // (KV head, first query head of the group, first token), costliest first: later tokens
    // see more key tiles.
    let mut tiles = Vec::new();
    for i0 in (0..n).step_by(TILE_Q).rev() {
        for kvh in 0..hkv {
            for h0 in (0..group).step_by(heads_per_tile) {
                tiles.push((kvh, h0, i0));
            }
        }
    }
    let next = AtomicUsize::new(0);
    let out = Mutex::new(out);
    pool.run(|t, _| {
        let mut a = scratches[t].lock().unwrap_or_else(|e| e.into_inner());
        let tiled = &mut a.tiled;
        while let Some(&(kvh, h0, i0)) = tiles.get(next.fetch_add(1, Ordering::Relaxed)) {
            let tile = QueryTile {
                pos0: pos0 + i0,
                tokens: TILE_Q.min(n - i0),
                heads: heads_per_tile.min(group - h0),
                window,
                full_end,
            };
            let first_head = kvh * group + h0;
            let rows = tiled.queries(tile.heads * tile.tokens, dk);
            for (r, row) in rows.chunks_exact_mut(dk).enumerate() {
                let (h, i) = (first_head + r / tile.tokens, i0 + r % tile.tokens);
                row.copy_from_slice(&q[(i * hq + h) * dk..(i * hq + h + 1) * dk]);
            }
            let kv = KvHead {
                keys: &keys[kvh * dk..],
                values: &values[kvh * dv..],
                key_stride,
                value_stride,
                capacity,
            };
            let sinks = sinks.map(|s| &s[first_head..first_head + tile.heads]);
            let result = tiled.attend(kv, tile, scores, sinks, dk, dv);
            let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
            for (r, row) in result.chunks_exact(dv).enumerate() {
                let (h, i) = (first_head + r / tile.tokens, i0 + r % tile.tokens);
                out[(i * hq + h) * dv..(i * hq + h + 1) * dv].copy_from_slice(row);
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kv_cache::KvCache;
    use half::f16;

    /// A layer of `positions` random keys and values (f16, in `[-1, 1)` times `amp` for the
    /// keys) for `hkv` KV heads, in a ring of `capacity` slots, and queries for `n` tokens.
    fn setup(
        heads: Heads,
        positions: usize,
        capacity: usize,
        n: usize,
        amp: f32,
    ) -> (KvCache, Vec<f32>) {
        let mut seed = 0x1234_5678_9ABC_DEF1u64;
        let mut rand = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        };
        let (kw, vw) = (
            heads.n_head_kv * heads.head_dim_k,
            heads.n_head_kv * heads.head_dim_v,
        );
        let mut cache = KvCache {
            layers: vec![LayerCache::F16 {
                k: vec![f16::ZERO; capacity * kw],
                v: vec![f16::ZERO; capacity * vw],
            }],
            capacity: vec![capacity],
            widths: (kw, vw),
        };
        for p in 0..positions {
            let k: Vec<f32> = (0..kw).map(|_| rand() * amp).collect();
            let v: Vec<f32> = (0..vw).map(|_| rand()).collect();
            cache.store(0, p, &k, &v);
        }
        let q = (0..n * heads.n_head * heads.head_dim_k)
            .map(|_| rand())
            .collect();
        (cache, q)
    }

    #[allow(clippy::too_many_arguments)]
    fn run(
        threads: usize,
        cache: &KvCache,
        q: &[f32],
        pos0: usize,
        heads: Heads,
        window: Option<usize>,
        scores: Scores,
        sinks: Option<&[f32]>,
    ) -> Vec<f32> {
        let pool = ThreadPool::new(threads).unwrap();
        let mut scratch = AttnThreads::default();
        let mut out = Vec::new();
        attention(
            &pool,
            cache,
            0,
            q,
            pos0,
            heads,
            Mask::Causal(window),
            scores,
            sinks,
            &mut scratch,
            &mut out,
        );
        out
    }

    /// Plain softmax attention in f64 over the cache's (f16) keys and values, each head's
    /// sink (if any) one more term of the softmax's sum.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        cache: &KvCache,
        q: &[f32],
        pos0: usize,
        heads: Heads,
        window: Option<usize>,
        scale: f64,
        softcap: f64,
        sinks: Option<&[f32]>,
    ) -> Vec<f64> {
        let Heads {
            n_head: hq,
            n_head_kv: hkv,
            head_dim_k: dk,
            head_dim_v: dv,
        } = heads;
        let LayerCache::F16 { k, v } = &cache.layers[0] else {
            unreachable!()
        };
        let (kw, vw) = cache.widths;
        let cap = cache.capacity[0];
        let n = q.len() / (hq * dk);
        let mut out = vec![0f64; n * hq * dv];
        for i in 0..n {
            let p = pos0 + i;
            let first = window.map_or(0, |w| (p + 1).saturating_sub(w));
            for h in 0..hq {
                let kvh = h / (hq / hkv);
                let qr = &q[(i * hq + h) * dk..][..dk];
                let logits: Vec<f64> = (first..=p)
                    .map(|pp| {
                        let key = &k[(pp % cap) * kw + kvh * dk..][..dk];
                        let dot: f64 = qr
                            .iter()
                            .zip(key)
                            .map(|(&a, b)| f64::from(a) * f64::from(b.to_f32()))
                            .sum();
                        if softcap != 0.0 {
                            softcap * (dot * scale / softcap).tanh()
                        } else {
                            dot * scale
                        }
                    })
                    .collect();
                let sink = sinks.map(|s| f64::from(s[h]));
                let max = logits
                    .iter()
                    .chain(&sink)
                    .cloned()
                    .fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = logits.iter().map(|l| (l - max).exp()).collect();
                let total = w.iter().sum::<f64>() + sink.map_or(0.0, |s| (s - max).exp());
                let o = &mut out[(i * hq + h) * dv..][..dv];
                for (pp, wt) in (first..=p).zip(&w) {
                    let val = &v[(pp % cap) * vw + kvh * dv..][..dv];
                    for (o, x) in o.iter_mut().zip(val) {
                        *o += wt / total * f64::from(x.to_f32());
                    }
                }
            }
        }
        out
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// The tiled path (batches of 64 tokens or more) against plain f64 attention: within
    /// 2e-6 of it (values in [-1, 1); f32 accumulation over up to 300 positions, the weights
    /// from ggml's expf, good to about an ulp), with GQA, head dims of 64 and 256, sliding
    /// windows, a ring that wraps, soft-capping and sinks (above and below the logits); and
    /// bit for bit the same for 1, 2 and 3
    /// threads and for the batch cut at other tile remainders (the last 90 of 100 tokens, or
    /// 64 of 66, evaluated as a batch of their own, whose tiles hold other rows).
    #[test]
    fn tiled_attention_matches_f64_reference_and_is_independent_of_threads_and_tiling() {
        let cases = [
            // (heads, kv heads, dk, dv, past positions, batch, window, ring capacity, softcap,
            // sinks)
            (9, 3, 64, 64, 0, 100, None, 256, 0.0, false),
            (9, 3, 64, 64, 130, 64, None, 256, 0.0, true),
            (4, 1, 256, 256, 70, 100, None, 256, 0.0, false),
            (4, 2, 32, 48, 150, 100, Some(80), 179, 0.0, true),
            (2, 2, 16, 16, 200, 66, Some(64), 129, 50.0, false),
        ];
        let all_sinks = [6.0f32, -1.0, 0.5, 2.0, -3.0, 9.0, 0.0, 1.5, -0.5];
        for (hq, hkv, dk, dv, past, n, window, cap, softcap, with_sinks) in cases {
            let sinks = with_sinks.then_some(&all_sinks[..hq]);
            let heads = Heads {
                n_head: hq,
                n_head_kv: hkv,
                head_dim_k: dk,
                head_dim_v: dv,
            };
            let (cache, q) = setup(heads, past + n, cap, n, 3.0);
            let scale = 1.0 / (dk as f32).sqrt();
            let scores = Scores::new(scale, softcap);
            let one = run(1, &cache, &q, past, heads, window, scores, sinks);
            let expected = reference(
                &cache,
                &q,
                past,
                heads,
                window,
                f64::from(scale),
                f64::from(softcap),
                sinks,
            );
            for (i, (&a, &e)) in one.iter().zip(&expected).enumerate() {
                assert!(
                    (f64::from(a) - e).abs() < 2e-6,
                    "case {hq}/{hkv}/{dk}/{dv}/{past}/{n}: output {i}: {a} vs {e}"
                );
            }
            for threads in [2, 3] {
                let other = run(threads, &cache, &q, past, heads, window, scores, sinks);
                assert_eq!(bits(&one), bits(&other), "{threads} threads");
            }
            // The last 64 or more tokens as a batch of their own (their earlier keys stay in
            // the cache): each row's tile mates change.
            let skip = (n - TILE_Q).min(10);
            if skip > 0 {
                let (w, o) = (hq * dk, hq * dv);
                let tail = run(
                    2,
                    &cache,
                    &q[skip * w..],
                    past + skip,
                    heads,
                    window,
                    scores,
                    sinks,
                );
                assert_eq!(bits(&one[skip * o..]), bits(&tail));
            }
        }
    }

    /// The tiled path equals ggml's tiled flash-attention kernel bit for bit: outputs of
    /// `ggml_flash_attn_ext` (llama.cpp 0c1e57098, AVX2 build; `tests/data/reference_flash_attn.c`)
    /// for 100 queries at positions 100..199 over 200 cached positions, with the inputs made
    /// again here by the same generator. Two shapes: 3 query heads on one KV head of 64, and 4
    /// heads on 2 KV heads of 32 with a window of 64 and a soft-cap of 50. (With 2 threads in
    /// ggml and here, and with other shapes, head dim 256 among them, the outputs were equal
    /// too when this was written.)
    #[test]
    fn tiled_attention_equals_ggml_bit_for_bit() {
        for (file, dk, hq, hkv, window, softcap) in [
            ("flash_attn_tiled_gqa.f32", 64, 3, 1, None, 0.0),
            (
                "flash_attn_tiled_window_softcap.f32",
                32,
                4,
                2,
                Some(64),
                50.0,
            ),
        ] {
            let path = format!("{}/tests/data/{file}", env!("CARGO_MANIFEST_DIR"));
            let expected: Vec<u32> = std::fs::read(&path)
                .unwrap()
                .chunks_exact(4)
                .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
                .collect();
            let mut seed = 0x1234_5678_90AB_CDEFu64;
            let mut rand = move || {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 40) as f32 / (1u32 << 23) as f32 - 1.0
            };
            let (positions, n, pos0, w) = (200, 100, 100, dk * hkv);
            let keys: Vec<f32> = (0..positions * w).map(|_| rand() * 3.0).collect();
            let values: Vec<f32> = (0..positions * w).map(|_| rand()).collect();
            let q: Vec<f32> = (0..n * hq * dk).map(|_| rand()).collect();
            let mut cache = KvCache {
                layers: vec![LayerCache::F16 {
                    k: vec![f16::ZERO; 256 * w],
                    v: vec![f16::ZERO; 256 * w],
                }],
                capacity: vec![256],
                widths: (w, w),
            };
            cache.store(0, 0, &keys, &values);
            let heads = Heads {
                n_head: hq,
                n_head_kv: hkv,
                head_dim_k: dk,
                head_dim_v: dk,
            };
            let scores = Scores::new(1.0 / (dk as f32).sqrt(), softcap);
            for threads in [1, 2] {
                let out = run(threads, &cache, &q, pos0, heads, window, scores, None);
                assert_eq!(bits(&out), expected, "{file}, {threads} threads");
            }
        }
    }

    /// `attend_f16` for several heads at once equals ggml's one-query flash attention computed
    /// the plain way, one head and one position at a time (`online_softmax` with libm's
    /// `expf`, `scale_f16` and `mad_f16` row by row), bit for bit: over a ring that wraps,
    /// with a window, with logits far apart (so that maxima change and rescales happen), a
    /// soft cap, and sinks (one above every logit, the others among them) applied as ggml's
    /// `ggml_compute_forward_flash_attn_ext_f16_one_chunk` does after the positions.
    #[test]
    fn attention_of_several_heads_equals_one_position_at_a_time() {
        let (dk, dv, capacity, heads) = (64usize, 64usize, 50usize, 3usize);
        let mut state = 0x1234_5678_9abc_def0u64;
        let mut unit = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        let (key_stride, value_stride) = (2 * dk + 8, 2 * dv);
        let keys: Vec<f16> = (0..capacity * key_stride)
            .map(|i| f16::from_f32(unit() * if i % 5 == 0 { 6.0 } else { 1.0 }))
            .collect();
        let values: Vec<f16> = (0..capacity * value_stride)
            .map(|_| f16::from_f32(unit()))
            .collect();
        let q: Vec<f32> = (0..heads * dk).map(|_| unit() * 3.0).collect();
        let sink_cases = [None, Some([40.0f32, -2.0, 0.7])];
        let cases = [(0, 40, 0.0), (30, 75, 0.0), (61, 99, 30.0)];
        for ((first, last, softcap), sinks) in
            cases.into_iter().flat_map(|c| sink_cases.map(|s| (c, s)))
        {
            let sinks = sinks.as_ref().map(|s| &s[..]);
            let kv = KvHead {
                keys: &keys[dk..],
                values: &values[dv..],
                key_stride,
                value_stride,
                capacity,
            };
            let scores = Scores::new(0.125, softcap);
            let mut ours = vec![0f32; heads * dv];
            let mut scratch = AttendScratch::default();
            attend_f16(
                &q,
                heads,
                kv,
                (first, last),
                scores,
                sinks,
                &mut scratch,
                &mut ours,
            );
            for h in 0..heads {
                let q16: Vec<f16> = q[h * dk..(h + 1) * dk]
                    .iter()
                    .map(|&v| f16::from_f32(v))
                    .collect();
                let mut acc = vec![f16::ZERO; dv];
                let (max, mut sum) = online_softmax(
                    first,
                    last,
                    capacity,
                    |slot| scores.logit(vec::dot_f16(kv.key(slot, dk), &q16)),
                    |slot, rescale, weight| {
                        if let Some(s) = rescale {
                            vec::scale_f16(&mut acc, s);
                        }
                        vec::mad_f16(&mut acc, kv.value(slot, dv), weight);
                    },
                );
                let mut theirs: Vec<f32> = acc.iter().map(|a| a.to_f32()).collect();
                if let Some(s) = sinks.map(|s| s[h]) {
                    if s > max {
                        let ms = (max - s).exp();
                        theirs.iter_mut().for_each(|v| *v *= ms);
                        sum = sum.mul_add(ms, 1.0);
                    } else {
                        sum = sum.mul_add(1.0, (s - max).exp());
                    }
                }
                let inv = if sum == 0.0 { 0.0 } else { 1.0 / sum };
                theirs.iter_mut().for_each(|v| *v *= inv);
                let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&ours[h * dv..(h + 1) * dv]),
                    bits(&theirs),
                    "head {h} of positions {first}..={last}"
                );
            }
        }
    }

    #[test]
    fn attention_of_one_key_returns_its_value() {
        let dk = 8;
        let keys: Vec<f16> = (0..dk).map(|i| f16::from_f32(i as f32)).collect();
        let values: Vec<f16> = (0..dk).map(|i| f16::from_f32(1.0 + i as f32)).collect();
        let q = vec![0.5f32; dk];
        let mut out = vec![0f32; dk];
        let kv = KvHead {
            keys: &keys,
            values: &values,
            key_stride: dk,
            value_stride: dk,
            capacity: 1,
        };
        let mut scratch = AttendScratch::default();
        attend_f16(
            &q,
            1,
            kv,
            (0, 0),
            Scores::new(0.3, 0.0),
            None,
            &mut scratch,
            &mut out,
        );
        let expected: Vec<f32> = (0..dk).map(|i| 1.0 + i as f32).collect();
        assert_eq!(out, expected);
    }
}
