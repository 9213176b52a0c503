//! The element-wise pieces of the forward pass, each written to give the numbers ggml's CPU
//! backend gives (x86_64, AVX2+FMA build) operation for operation: RMSNorm with a double sum,
//! RoPE through ggml's YaRN cache, and attention as
//! `ggml_flash_attn_ext` computes one query against an f16 cache.

use gguf_quant::vec;
use half::f16;

use crate::hparams::RopeScaling;

/// `x * 1/sqrt(mean(x²) + eps) * w`, as `ggml_rms_norm` followed by `ggml_mul`: the sum of
/// squares in f64, the mean and scale in f32.
pub(crate) fn rms_norm(x: &[f32], w: &[f32], eps: f32, out: &mut [f32]) {
    let scale = rms_scale(x, eps);
    for ((o, &v), &g) in out.iter_mut().zip(x).zip(w) {
        *o = (v * scale) * g;
    }
}

/// RMSNorm in place (see [`rms_norm`]).
pub(crate) fn rms_norm_in_place(x: &mut [f32], w: &[f32], eps: f32) {
    let scale = rms_scale(x, eps);
    for (v, &g) in x.iter_mut().zip(w) {
        *v = (*v * scale) * g;
    }
}

/// `1/sqrt(mean(x²) + eps)` as `ggml_rms_norm`: the sum of squares in f64, the rest in f32.
fn rms_scale(x: &[f32], eps: f32) -> f32 {
    let sum: f64 = x.iter().map(|&v| f64::from(v * v)).sum();
    let mean = (sum / x.len() as f64) as f32;
    1.0 / (mean + eps).sqrt()
}

/// RoPE parameters shared by every position.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Rope {
    pub n_dims: usize,
    pub neox: bool,
    pub freq_base: f32,
    pub freq_scale: f32,
    pub ext_factor: f32,
    pub attn_factor: f32,
    pub corr_dims: [f32; 2],
}

impl Rope {
    /// ggml's RoPE parameters (`ggml_rope_ext`'s arguments), with the YaRN correction range.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        n_dims: usize,
        neox: bool,
        freq_base: f32,
        freq_scale: f32,
        ext_factor: f32,
        attn_factor: f32,
        beta_fast: f32,
        beta_slow: f32,
        n_ctx_orig: usize,
    ) -> Rope {
        // ggml_rope_yarn_corr_dims
        let corr_dim = |n_rot: f32| {
            n_dims as f32 * (n_ctx_orig as f32 / (n_rot * 2.0 * std::f32::consts::PI)).ln()
                / (2.0 * freq_base.ln())
        };
        let start = corr_dim(beta_fast).floor();
        let end = corr_dim(beta_slow).ceil();
        Rope {
            n_dims,
            neox,
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            corr_dims: [start.max(0.0), end.min(n_dims as f32 - 1.0)],
        }
    }

    /// The RoPE of `n_dims` dimensions at base `freq_base` with `scaling` (`n_ctx_train` is
    /// the original context when the scaling does not name one), as llama.cpp sets up
    /// `ggml_rope_ext` for a model.
    pub(crate) fn for_model(
        n_dims: usize,
        neox: bool,
        freq_base: f32,
        scaling: RopeScaling,
        n_ctx_train: usize,
    ) -> Rope {
        let (freq_scale, ext_factor, attn_factor, beta_fast, beta_slow, n_ctx_orig) = match scaling
        {
            RopeScaling::None => (1.0, 0.0, 1.0, 32.0, 1.0, n_ctx_train),
            RopeScaling::Linear { factor } => (1.0 / factor, 0.0, 1.0, 32.0, 1.0, n_ctx_train),
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
            n_dims,
            neox,
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            beta_fast,
            beta_slow,
            n_ctx_orig,
        )
    }

    /// Appends the `n_dims / 2` (cos, sin) pairs for position `pos` to `out`, as
    /// `ggml_rope_cache_init`.
    pub(crate) fn cache(&self, pos: i64, out: &mut Vec<(f32, f32)>) {
        self.cache_with_factors(pos, None, out);
    }

    /// As [`Rope::cache`], with `ggml_rope_ext`'s frequency factors (LongRoPE's
    /// `rope_factors_long/short`, one per rotated pair): pair `i`'s angle is divided by
    /// `factors[i]` before YaRN's interpolation, and the running angle is left as it was.
    pub(crate) fn cache_with_factors(
        &self,
        pos: i64,
        factors: Option<&[f32]>,
        out: &mut Vec<(f32, f32)>,
    ) {
        let theta_scale = self.freq_base.powf(-2.0 / self.n_dims as f32);
        let mut theta = pos as f32;
        for i0 in (0..self.n_dims).step_by(2) {
            // rope_yarn
            let theta_extrap = match factors {
                Some(f) => theta / f.get(i0 / 2).copied().unwrap_or(1.0),
                None => theta,
            };
            let theta_interp = self.freq_scale * theta_extrap;
            let mut th = theta_interp;
            let mut mscale = self.attn_factor;
            if self.ext_factor != 0.0 {
                let y = ((i0 / 2) as f32 - self.corr_dims[0])
                    / (self.corr_dims[1] - self.corr_dims[0]).max(0.001);
                let ramp_mix = (1.0 - y.clamp(0.0, 1.0)) * self.ext_factor;
                th = theta_interp * (1.0 - ramp_mix) + theta_extrap * ramp_mix;
                mscale *= 1.0 + 0.1 * (1.0 / self.freq_scale).ln();
            }
            out.push((th.cos() * mscale, th.sin() * mscale));
            theta *= theta_scale;
        }
    }

    /// Rotates one head in place with a cache from [`Rope::cache`]. GCC contracts ggml's
    /// `x0*cos - x1*sin` and `x0*sin + x1*cos` into fused multiply-adds (the first product
    /// fused), so they are written that way here.
    pub(crate) fn apply(&self, head: &mut [f32], cache: &[(f32, f32)]) {
        let rotate =
            |x0: f32, x1: f32, c: f32, s: f32| (x0.mul_add(c, -(x1 * s)), x0.mul_add(s, x1 * c));
        if self.neox {
            let half = self.n_dims / 2;
            for (i, &(c, s)) in cache.iter().enumerate() {
                (head[i], head[i + half]) = rotate(head[i], head[i + half], c, s);
            }
        } else {
            for (i, &(c, s)) in cache.iter().enumerate() {
                (head[2 * i], head[2 * i + 1]) = rotate(head[2 * i], head[2 * i + 1], c, s);
            }
        }
    }
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
/// GCC compiles ggml's one-query path. Returns the reciprocal of the weight sum (0 when
/// nothing was attended).
fn online_softmax(
    first: usize,
    last: usize,
    capacity: usize,
    mut score: impl FnMut(usize) -> f32,
    mut update: impl FnMut(usize, Option<f32>, f32),
) -> f32 {
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
    if sum == 0.0 {
        0.0
    } else {
        1.0 / sum
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
/// If `heads` is 0 or does not divide the lengths of `q` and `out`.
pub(crate) fn attend_f16(
    q: &[f32],
    heads: usize,
    kv: KvHead<'_, f16>,
    positions: (usize, usize),
    scores: Scores,
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
        inverses.push(if sum == 0.0 { 0.0 } else { 1.0 / sum });
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
    for ((out, acc), &inv) in out
        .chunks_exact_mut(dv)
        .zip(acc.chunks_exact(dv))
        .zip(&*inverses)
    {
        for (o, a) in out.iter_mut().zip(acc) {
            *o = a.to_f32() * inv;
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
    /// Each head's reciprocal weight sum.
    inverses: Vec<f32>,
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
/// and at the end `out = acc · (1 / S)` (0 when `S` is 0).
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
    pub(crate) fn attend<T: CacheValue>(
        &mut self,
        kv: KvHead<'_, T>,
        tile: QueryTile,
        scores: Scores,
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
        for (a, &s) in self.acc.chunks_exact_mut(dv).zip(&self.sum) {
            let inv = if s == 0.0 { 0.0 } else { 1.0 / s };
            a.iter_mut().for_each(|x| *x *= inv);
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

/// As [`attend_f16`] for an f32 cache (values accumulated in f32).
pub(crate) fn attend_f32(
    q: &[f32],
    kv: KvHead<'_, f32>,
    first: usize,
    last: usize,
    scores: Scores,
    acc: &mut Vec<f32>,
    out: &mut [f32],
) {
    let (dk, dv) = (q.len(), out.len());
    acc.clear();
    acc.resize(dv, 0.0);
    let inv = online_softmax(
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
    for (o, a) in out.iter_mut().zip(acc.iter()) {
        *o = a * inv;
    }
}

/// `x[i] *= factor`, as `ggml_scale`.
pub(crate) fn scale(x: &mut [f32], factor: f32) {
    for v in x {
        *v *= factor;
    }
}

/// `cap * tanh(x / cap)` of every value, as llama.cpp soft-caps logits: `ggml_scale` by
/// `1/cap`, `ggml_tanh`, `ggml_scale` by `cap`.
pub(crate) fn softcap(x: &mut [f32], cap: f32) {
    let inv = 1.0 / cap;
    for v in x {
        *v = (*v * inv).tanh() * cap;
    }
}

/// `x[i] = gelu(x[i])`, as ggml's CPU backend computes `ggml_gelu` (`ggml_vec_gelu_f32` with
/// `GGML_GELU_FP16`): see [`gguf_quant::vec::gelu`].
pub(crate) fn gelu(x: &mut [f32]) {
    vec::gelu(x);
}

/// LayerNorm of one row, `(x - mean) / sqrt(var + eps) * w + b`, as `ggml_norm` followed by
/// `ggml_mul` and `ggml_add` on x86 with AVX2: the mean from a sum in f64 rounded to f32; the
/// variance as `ggml_vec_cvar_f32` takes it, each group of eight squared deviations summed in
/// f32 as the AVX2 horizontal add pairs them (lanes `i` and `i + 4`, then `i` and `i + 2`,
/// then the two halves) and the group sums accumulated in f64, the tail one by one in f64;
/// then one f32 scale, the weight and the bias as separate roundings.
pub(crate) fn layer_norm(x: &[f32], w: &[f32], b: &[f32], eps: f32, out: &mut [f32]) {
    let n = x.len();
    let sum: f64 = x.iter().map(|&v| f64::from(v)).sum();
    let mean = (sum as f32) / n as f32;
    let mut var = 0f64;
    let groups = x.chunks_exact(8);
    let tail = groups.remainder();
    for g in groups {
        let sq: [f32; 8] = std::array::from_fn(|i| {
            let d = g[i] - mean;
            d * d
        });
        let lanes = [sq[0] + sq[4], sq[1] + sq[5], sq[2] + sq[6], sq[3] + sq[7]];
        let group = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3]);
        var += f64::from(group);
    }
    for &v in tail {
        let d = v - mean;
        var += f64::from(d * d);
    }
    let variance = (var / n as f64) as f32;
    let scale = 1.0 / (variance + eps).sqrt();
    for (((o, &v), &g), &c) in out.iter_mut().zip(x).zip(w).zip(b) {
        *o = ((v - mean) * scale) * g + c;
    }
}

/// `gate[i] = gelu(gate[i]) * up[i]`, GeGLU as ggml's CPU backend computes it
/// (`ggml_vec_geglu_f32` with `GGML_GELU_FP16`): see [`gguf_quant::vec::geglu`].
pub(crate) fn geglu(gate: &mut [f32], up: &[f32]) {
    vec::geglu(gate, up);
}

/// `x[i] += y[i]`: the residual connections.
pub(crate) fn add_assign(x: &mut [f32], y: &[f32]) {
    for (a, &b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// Adds `bias` to every row of `rows` (a bias after a matrix product).
pub(crate) fn add_bias(rows: &mut [f32], bias: &[f32]) {
    for row in rows.chunks_exact_mut(bias.len()) {
        add_assign(row, bias);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `attend_f16` for several heads at once equals ggml's one-query flash attention computed
    /// the plain way, one head and one position at a time (`online_softmax` with libm's
    /// `expf`, `scale_f16` and `mad_f16` row by row), bit for bit: over a ring that wraps,
    /// with a window, with logits far apart (so that maxima change and rescales happen) and a
    /// soft cap.
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
        for (first, last, softcap) in [(0, 40, 0.0), (30, 75, 0.0), (61, 99, 30.0)] {
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
                &mut scratch,
                &mut ours,
            );
            for h in 0..heads {
                let q16: Vec<f16> = q[h * dk..(h + 1) * dk]
                    .iter()
                    .map(|&v| f16::from_f32(v))
                    .collect();
                let mut acc = vec![f16::ZERO; dv];
                let inv = online_softmax(
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
                let theirs: Vec<f32> = acc.iter().map(|a| a.to_f32() * inv).collect();
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
    fn rms_norm_of_constant_is_one() {
        let x = [3.0f32; 64];
        let mut out = [0f32; 64];
        rms_norm(&x, &[1.0; 64], 0.0, &mut out);
        assert!(out.iter().all(|&v| (v - 1.0).abs() < 1e-6));
    }

    #[test]
    fn rope_at_position_zero_is_identity_and_preserves_norm() {
        let rope = Rope::new(64, false, 10_000.0, 1.0, 0.0, 1.0, 32.0, 1.0, 4096);
        let mut cache = Vec::new();
        rope.cache(0, &mut cache);
        let orig: Vec<f32> = (0..64).map(|i| i as f32 * 0.1 - 3.0).collect();
        let mut head = orig.clone();
        rope.apply(&mut head, &cache);
        assert_eq!(head, orig);
        cache.clear();
        rope.cache(1234, &mut cache);
        rope.apply(&mut head, &cache);
        let norm = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>();
        assert!((norm(&head) - norm(&orig)).abs() / norm(&orig) < 1e-5);
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
            &mut scratch,
            &mut out,
        );
        let expected: Vec<f32> = (0..dk).map(|i| 1.0 + i as f32).collect();
        assert_eq!(out, expected);
    }
}
