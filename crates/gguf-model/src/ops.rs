//! The element-wise pieces of the forward pass, each written to give the numbers ggml's CPU
//! backend gives (x86_64, AVX2+FMA build) operation for operation: RMSNorm with a double sum,
//! RoPE through ggml's YaRN cache, and attention as
//! `ggml_flash_attn_ext` computes one query against an f16 cache.

use gguf_quant::vec;

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
    /// `ggml_rope_ext` for a model. For YaRN that is `ext_factor` 1, betas 32 and 1, and the
    /// attention factor of `llama_context`: `m · (1 / m)` with `m = 1 + 0.1 ln(factor)`
    /// (`get_mscale` and the cancellation of ggml's own `m`, unfused in libllama; not always
    /// exactly 1), which ggml's `rope_yarn` multiplies by its `m` again.
    pub(crate) fn for_model(
        n_dims: usize,
        neox: bool,
        freq_base: f32,
        scaling: RopeScaling,
        n_ctx_train: usize,
    ) -> Rope {
        let (freq_scale, ext_factor, attn_factor, n_ctx_orig) = match scaling {
            RopeScaling::None => (1.0, 0.0, 1.0, n_ctx_train),
            RopeScaling::Linear { factor } => (1.0 / factor, 0.0, 1.0, n_ctx_train),
            RopeScaling::Yarn {
                factor,
                original_context,
            } => {
                let freq_scale = 1.0 / factor;
                // llama_context's `factor`: the reciprocal of the reciprocal.
                let factor = 1.0 / freq_scale;
                let mscale = if factor <= 1.0 {
                    1.0
                } else {
                    0.1 * factor.ln() + 1.0
                };
                let cancel = 1.0 / (1.0 + 0.1 * factor.ln());
                (freq_scale, 1.0, mscale * cancel, original_context)
            }
        };
        Rope::new(
            n_dims,
            neox,
            freq_base,
            freq_scale,
            ext_factor,
            attn_factor,
            32.0,
            1.0,
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

/// gpt-oss' SwiGLU (`ggml_swiglu_oai` with llama.cpp's alpha 1.702 and limit 7):
/// `x = min(gate, 7)`, `y = clamp(up, -7, 7)`, `gate = x / (1 + e^(-1.702 x)) · (y + 1)`,
/// each step rounded as ggml's scalar loop rounds it.
pub(crate) fn swiglu_oai(gate: &mut [f32], up: &[f32]) {
    const ALPHA: f32 = 1.702;
    const LIMIT: f32 = 7.0;
    for (g, &u) in gate.iter_mut().zip(up) {
        let x = g.min(LIMIT);
        let y = u.clamp(-LIMIT, LIMIT);
        let glu = x / (1.0 + (ALPHA * -x).exp());
        *g = glu * (y + 1.0);
    }
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
}
