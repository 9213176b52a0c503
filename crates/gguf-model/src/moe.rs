//! The feed-forward network of a mixture of experts, written once for every family that has
//! one, as llama.cpp's `build_moe_ffn` computes it on the CPU:
//!
//! 1. the router's logits (`ffn_gate_inp`), one per expert;
//!    plus the router's bias where it has one (gpt-oss);
//! 2. the gating function: a softmax over the experts (as `ggml_soft_max`), or none for
//!    gpt-oss, whose weights are a softmax over the chosen experts' logits (step 4);
//! 3. the `n_used` experts of the highest scores (the scores plus `exp_probs_b` where the
//!    file has that selection bias), in descending order, a tie to the lower index;
//! 4. their weights: the unbiased scores of the chosen experts (gpt-oss: their softmax),
//!    divided by their sum when the family normalises them (the sum in f64, clamped below at
//!    f16's smallest normal), times the family's scale when it has one;
//! 5. each chosen expert's gated feed-forward (`ffn_{gate,up,down}_exps`, each product plus
//!    the expert's bias where there are biases, gpt-oss' being `ggml_add_id`), times its
//!    weight, summed in the order of choice;
//! 6. a shared expert where the family has one, added (Qwen2-MoE's with a sigmoid gate of its
//!    own, `ffn_gate_inp_shexp`).
//!
//! A batch's tokens are grouped by expert: each expert's rows go through one product for all
//! the tokens that chose it (llama.cpp's `mul_mat_id`), and a token reads the bytes of its
//! experts only, straight from the map.

use gguf_format::tensor_names::TensorName as T;

use crate::error::Result;
use crate::forward::{gated_ffn, Ctx, Gate, Scratch};
use crate::hparams::Reader;
use crate::weights::{Loader, Matrix};

/// The most experts a layer may have (llama.cpp's `LLAMA_MAX_EXPERTS`).
const MAX_EXPERTS: usize = 1024;

/// The smallest sum of weights normalisation divides by: f16's smallest normal, as llama.cpp
/// clamps it.
const MIN_WEIGHT_SUM: f32 = 6.103_515_6e-5;

/// How router logits become the chosen experts' weights (llama.cpp's
/// `llama_expert_gating_func_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Gating {
    /// A softmax over all the experts, the weights the chosen ones' scores (`SOFTMAX`).
    Softmax,
    /// The raw logits choose; the weights are a softmax over the chosen ones' logits
    /// (`SOFTMAX_WEIGHT`, gpt-oss).
    SoftmaxOfChosen,
    /// Each expert's score is the sigmoid of its logit (`SIGMOID`, DeepSeek-V3).
    Sigmoid,
}

impl Gating {
    /// llama.cpp's `{arch}.expert_gating_func` value (`llama_expert_gating_func_type`), for
    /// the functions this crate computes.
    pub fn from_id(id: u64) -> Option<Gating> {
        match id {
            1 => Some(Gating::Softmax),
            2 => Some(Gating::Sigmoid),
            3 => Some(Gating::SoftmaxOfChosen),
            _ => None,
        }
    }
}

/// Group-limited routing (DeepSeek-V3's `n_group`/`topk_group`): the experts form `count`
/// equal groups, each scored by the sum of its two best selection scores, and only the
/// experts of the `used` best groups may be chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ExpertGroups {
    pub count: usize,
    pub used: usize,
}

/// How a family routes tokens to experts (llama.cpp's arguments to `build_moe_ffn`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Routing {
    /// Experts per layer (`{arch}.expert_count`).
    pub n_expert: usize,
    /// Experts each token uses (`{arch}.expert_used_count`).
    pub n_used: usize,
    /// The chosen experts' weights are divided by their sum.
    pub normalize: bool,
    /// The weights' factor (`{arch}.expert_weights_scale`; 0 and 1 leave them).
    pub scale: f32,
    pub gating: Gating,
    pub groups: Option<ExpertGroups>,
}

impl Routing {
    /// The expert counts of a family that has experts (both keys required, as llama.cpp's
    /// loaders of these families require them); every family here gates by a softmax.
    pub fn read(r: &Reader<'_, '_>, normalize: bool) -> Result<Routing> {
        let n_expert = r.size("expert_count", MAX_EXPERTS)?;
        let n_used = r.size("expert_used_count", n_expert)?;
        Ok(Routing {
            n_expert,
            n_used,
            normalize,
            scale: 0.0,
            gating: Gating::Softmax,
            groups: None,
        })
    }

    /// The expert counts if the file has `{arch}.expert_count` above 1 (llama with experts:
    /// Mixtral), else `None` (a dense model).
    pub fn read_optional(r: &Reader<'_, '_>, normalize: bool) -> Result<Option<Routing>> {
        match r.opt_usize("expert_count")? {
            None | Some(0 | 1) => Ok(None),
            Some(_) => Routing::read(r, normalize).map(Some),
        }
    }

    /// Turns one token's router logits into scores, in place, by the gating function.
    fn scores(&self, logits: &mut [f32]) {
        match self.gating {
            Gating::Softmax => soft_max(logits),
            Gating::SoftmaxOfChosen => {}
            // ggml_sigmoid: 1 / (1 + expf(-x)).
            Gating::Sigmoid => logits
                .iter_mut()
                .for_each(|x| *x = 1.0 / (1.0 + (-*x).exp())),
        }
    }

    /// Appends the `n_used` experts chosen from one token's `scores` (by `scores + bias` if
    /// there is a bias, within the best groups if experts are grouped) to `chosen` and their
    /// weights to `weights`.
    fn choose(
        &self,
        scores: &[f32],
        bias: Option<&[f32]>,
        scratch: &mut Choice,
        chosen: &mut Vec<usize>,
        weights: &mut Vec<f32>,
    ) {
        let Choice {
            keys,
            order,
            group_scores,
            group_order,
        } = scratch;
        keys.clear();
        keys.extend((0..scores.len()).map(|e| bias.map_or(scores[e], |b| scores[e] + b[e])));
        if let Some(groups) = self.groups {
            // Each group's two best keys, summed as ggml_sum_rows sums (in f64), then the
            // `used` best groups; the other groups' keys become -inf.
            let per = keys.len() / groups.count;
            group_scores.clear();
            for g in keys.chunks_exact(per) {
                descending(order, g.len(), |e| g[e]);
                let top2 = f64::from(g[order[0]]) + order.get(1).map_or(0.0, |&e| f64::from(g[e]));
                group_scores.push(top2 as f32);
            }
            descending(group_order, groups.count, |g| group_scores[g]);
            for &g in &group_order[groups.used..] {
                keys[g * per..(g + 1) * per].fill(f32::NEG_INFINITY);
            }
        }
        descending(order, keys.len(), |e| keys[e]);
        let first = weights.len();
        for &e in &order[..self.n_used] {
            chosen.push(e);
            weights.push(scores[e]);
        }
        let mine = &mut weights[first..];
        if self.gating == Gating::SoftmaxOfChosen {
            soft_max(mine);
        }
        if self.normalize {
            // ggml_sum_rows (an f64 sum rounded to f32), ggml_clamp, ggml_div.
            let sum = mine.iter().map(|&w| f64::from(w)).sum::<f64>() as f32;
            let sum = sum.max(MIN_WEIGHT_SUM);
            for w in mine.iter_mut() {
                *w /= sum;
            }
        }
        if self.scale != 0.0 && self.scale != 1.0 {
            for w in mine.iter_mut() {
                *w *= self.scale;
            }
        }
    }
}

/// The buffers of [`Routing::choose`].
#[derive(Debug, Default)]
struct Choice {
    /// The selection keys of one token's experts.
    keys: Vec<f32>,
    order: Vec<usize>,
    group_scores: Vec<f32>,
    group_order: Vec<usize>,
}

/// `0..n` ordered by `key`, descending, as `ggml_argsort` orders them: a stable sort breaks
/// ties by index, as libstdc++'s std::sort does for up to 16 values (an insertion sort); NaN
/// keys compare equal.
fn descending(order: &mut Vec<usize>, n: usize, key: impl Fn(usize) -> f32) {
    order.clear();
    order.extend(0..n);
    order.sort_by(|&a, &b| {
        key(b)
            .partial_cmp(&key(a))
            .unwrap_or(std::cmp::Ordering::Equal)
    });
}

/// `ggml_soft_max` of one row, in place: its maximum, `expf` and f64 sum
/// (`ggml_vec_soft_max_f32`), then a scale by the reciprocal, computed in f64 and rounded to
/// f32.
fn soft_max(row: &mut [f32]) {
    let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum = gguf_quant::vec::soft_max_f32(row, max);
    let inv = (1.0 / sum) as f32;
    for v in row.iter_mut() {
        *v *= inv;
    }
}

/// A dense feed-forward network beside the routed experts, which every token goes through.
pub(crate) struct SharedExpert {
    pub gate: Matrix,
    pub up: Matrix,
    pub down: Matrix,
    /// Qwen2-MoE's gate: one logit per token, whose sigmoid scales the shared output.
    pub gate_inp: Option<Matrix>,
}

impl SharedExpert {
    /// Granite-MoE's shared expert of block `i`: `n_ff` wide, ungated.
    pub fn load(l: &Loader<'_>, i: usize, n_embd: usize, n_ff: usize) -> Result<Self> {
        Ok(SharedExpert {
            gate: l.matrix(&T::FfnGateShexp.block_weight(i), n_embd, n_ff)?,
            up: l.matrix(&T::FfnUpShexp.block_weight(i), n_embd, n_ff)?,
            down: l.matrix(&T::FfnDownShexp.block_weight(i), n_ff, n_embd)?,
            gate_inp: None,
        })
    }

    /// Qwen2-MoE's shared expert of block `i`: `n_ff` wide, with its sigmoid gate.
    pub fn load_gated(l: &Loader<'_>, i: usize, n_embd: usize, n_ff: usize) -> Result<Self> {
        Ok(SharedExpert {
            gate_inp: Some(l.plain_matrix(&T::FfnGateInpShexp.block_weight(i), n_embd, 1)?),
            ..SharedExpert::load(l, i, n_embd, n_ff)?
        })
    }
}

/// A block's SwiGLU feed-forward network: dense, or a mixture of experts (the llama and Phi-3
/// families have both).
pub(crate) enum Ffn {
    Dense {
        gate: Matrix,
        up: Matrix,
        down: Matrix,
    },
    Routed(Box<MoeFfn>),
}

impl Ffn {
    /// From the normed rows in `s.sublayer` to the network's output rows, in `s.sublayer`.
    pub fn run(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Result<()> {
        match self {
            Ffn::Dense { gate, up, down } => gated_ffn(ctx, s, gate, up, down, Gate::Silu),
            Ffn::Routed(moe) => moe.run(ctx, s),
        }
    }
}

/// Each expert's biases of its gate, up and down products (gpt-oss' `ffn_{gate,up,down}_exps.bias`):
/// expert `e`'s are rows `e` of these tables.
pub(crate) struct ExpertBiases {
    pub gate: Vec<f32>,
    pub up: Vec<f32>,
    pub down: Vec<f32>,
}

impl ExpertBiases {
    /// Block `i`'s expert biases, for `n_expert` experts of `n_ff` from and to `n_embd`.
    pub fn load(
        l: &Loader<'_>,
        i: usize,
        n_embd: usize,
        n_ff: usize,
        n_expert: usize,
    ) -> Result<ExpertBiases> {
        Ok(ExpertBiases {
            gate: l.table(&T::FfnGateExps.block_bias(i), n_ff, n_expert)?,
            up: l.table(&T::FfnUpExps.block_bias(i), n_ff, n_expert)?,
            down: l.table(&T::FfnDownExps.block_bias(i), n_embd, n_expert)?,
        })
    }
}

/// Adds row `e` of `table` (rows of `width`) to every row of `rows`, as `ggml_add_id`.
fn add_expert_bias(rows: &mut [f32], table: &[f32], e: usize, width: usize) {
    crate::ops::add_bias(rows, &table[e * width..(e + 1) * width]);
}

/// One layer's routed feed-forward network.
pub(crate) struct MoeFfn {
    pub routing: Routing,
    /// `ffn_gate_inp`: one row of logits per expert.
    pub router: Matrix,
    /// `ffn_gate_inp.bias`, added to the logits (gpt-oss).
    pub router_bias: Option<Vec<f32>>,
    /// The experts' product biases (gpt-oss).
    pub biases: Option<ExpertBiases>,
    /// `exp_probs_b`: added to the scores for the choice only.
    pub selection_bias: Option<Vec<f32>>,
    /// Each expert's gate, up and down projections: views of the stacked tensors.
    pub gate: Vec<Matrix>,
    pub up: Vec<Matrix>,
    pub down: Vec<Matrix>,
    pub act: Gate,
    pub shared: Option<SharedExpert>,
}

/// The buffers of the routed feed-forward network, reused across layers and passes.
#[derive(Debug, Default)]
pub(crate) struct MoeScratch {
    /// The router's logits, then scores: one row of `n_expert` per token.
    scores: Vec<f32>,
    choice: Choice,
    /// Per token, its chosen experts and their weights (`n_used` each, in order of choice).
    chosen: Vec<usize>,
    weights: Vec<f32>,
    /// Per expert, the slots (`token * n_used + k`) that chose it.
    by_expert: Vec<Vec<usize>>,
    /// One expert's input rows, its gate and up rows, its output rows.
    rows: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    down: Vec<f32>,
    /// Every slot's weighted expert output (`n_tokens * n_used` rows of `n_embd`).
    slots: Vec<f32>,
    /// The summed expert outputs (one row per token).
    sum: Vec<f32>,
    /// The shared expert's gate logits.
    shared_gate: Vec<f32>,
}

impl MoeFfn {
    /// Block `i`'s routed network: its router and its `n_expert` experts of `n_ff` (the
    /// stacked `ffn_{gate,up,down}_exps`), with SwiGLU and no shared expert.
    pub fn load(
        l: &Loader<'_>,
        i: usize,
        n_embd: usize,
        n_ff: usize,
        routing: Routing,
    ) -> Result<MoeFfn> {
        let ne = routing.n_expert;
        Ok(MoeFfn {
            routing,
            router: l.matrix(&T::FfnGateInp.block_weight(i), n_embd, ne)?,
            router_bias: None,
            biases: None,
            selection_bias: l.optional_vector(&T::FfnExpProbsB.block_bias(i), ne)?,
            gate: l.experts(&T::FfnGateExps.block_weight(i), n_embd, n_ff, ne)?,
            up: l.experts(&T::FfnUpExps.block_weight(i), n_embd, n_ff, ne)?,
            down: l.experts(&T::FfnDownExps.block_weight(i), n_ff, n_embd, ne)?,
            act: Gate::Silu,
            shared: None,
        })
    }

    /// From the normed rows in `s.sublayer` to the network's output rows, in `s.sublayer`.
    pub fn run(&self, ctx: &Ctx<'_>, s: &mut Scratch) -> Result<()> {
        let d = self.router.cols;
        let (ne, k) = (self.routing.n_expert, self.routing.n_used);
        let n_tokens = s.sublayer.len() / d;
        let m = &mut s.moe;
        ctx.matmul(&self.router, &s.sublayer, &mut m.scores, &mut s.quant)?;
        if let Some(b) = &self.router_bias {
            crate::ops::add_bias(&mut m.scores, b);
        }
        m.chosen.clear();
        m.weights.clear();
        let bias = self.selection_bias.as_deref();
        for row in m.scores.chunks_exact_mut(ne) {
            self.routing.scores(row);
            let r = &self.routing;
            r.choose(row, bias, &mut m.choice, &mut m.chosen, &mut m.weights);
        }
        m.by_expert.resize_with(ne, Vec::new);
        for slots in &mut m.by_expert {
            slots.clear();
        }
        for (slot, &e) in m.chosen.iter().enumerate() {
            m.by_expert[e].push(slot);
        }
        m.slots.resize(n_tokens * k * d, 0.0);
        for (e, slots) in m.by_expert.iter().enumerate() {
            if slots.is_empty() {
                continue;
            }
            m.rows.clear();
            for &slot in slots {
                let t = slot / k;
                m.rows.extend_from_slice(&s.sublayer[t * d..(t + 1) * d]);
            }
            ctx.matmul_expert(&self.gate[e], &m.rows, &mut m.gate, &mut s.quant)?;
            ctx.matmul_expert(&self.up[e], &m.rows, &mut m.up, &mut s.quant)?;
            let n_ff = self.gate[e].rows;
            if let Some(b) = &self.biases {
                add_expert_bias(&mut m.up, &b.up, e, n_ff);
                add_expert_bias(&mut m.gate, &b.gate, e, n_ff);
            }
            // Row by row, as ggml applies the activation to each row of its tensor.
            for (g, u) in m.gate.chunks_exact_mut(n_ff).zip(m.up.chunks_exact(n_ff)) {
                self.act.apply(g, u);
            }
            ctx.matmul_expert(&self.down[e], &m.gate, &mut m.down, &mut s.quant)?;
            if let Some(b) = &self.biases {
                add_expert_bias(&mut m.down, &b.down, e, d);
            }
            for (&slot, out) in slots.iter().zip(m.down.chunks_exact(d)) {
                let w = m.weights[slot];
                for (o, &x) in m.slots[slot * d..(slot + 1) * d].iter_mut().zip(out) {
                    *o = x * w;
                }
            }
        }
        // The weighted outputs summed in the order the experts were chosen.
        m.sum.clear();
        for token in m.slots.chunks_exact(k * d) {
            let start = m.sum.len();
            m.sum.extend_from_slice(&token[..d]);
            for next in token[d..].chunks_exact(d) {
                for (acc, &x) in m.sum[start..].iter_mut().zip(next) {
                    *acc += x;
                }
            }
        }
        let Some(shared) = &self.shared else {
            std::mem::swap(&mut s.sublayer, &mut s.moe.sum);
            return Ok(());
        };
        if let Some(gate_inp) = &shared.gate_inp {
            ctx.matmul(gate_inp, &s.sublayer, &mut m.shared_gate, &mut s.quant)?;
        }
        gated_ffn(ctx, s, &shared.gate, &shared.up, &shared.down, Gate::Silu)?;
        let m = &mut s.moe;
        for (t, (out, moe)) in s
            .sublayer
            .chunks_exact_mut(d)
            .zip(m.sum.chunks_exact(d))
            .enumerate()
        {
            // llama.cpp's sigmoid here: silu(x) / x (ggml_silu's scalar x / (1 + expf(-x))).
            let gate = shared.gate_inp.as_ref().map(|_| {
                let x = m.shared_gate[t];
                (x / (1.0 + (-x).exp())) / x
            });
            for (o, &y) in out.iter_mut().zip(moe) {
                let shared_out = gate.map_or(*o, |g| *o * g);
                *o = y + shared_out;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn routing(n_expert: usize, n_used: usize, normalize: bool) -> Routing {
        Routing {
            n_expert,
            n_used,
            normalize,
            scale: 0.0,
            gating: Gating::Softmax,
            groups: None,
        }
    }

    fn choose(r: &Routing, scores: &[f32], bias: Option<&[f32]>) -> (Vec<usize>, Vec<f32>) {
        let (mut choice, mut chosen, mut weights) = (Choice::default(), Vec::new(), Vec::new());
        r.choose(scores, bias, &mut choice, &mut chosen, &mut weights);
        (chosen, weights)
    }

    #[test]
    fn softmax_scores_sum_to_one_and_keep_the_order() {
        let r = routing(5, 2, false);
        let mut x = [1.0f32, 3.0, -2.0, 3.5, 0.0];
        r.scores(&mut x);
        let sum: f32 = x.iter().sum();
        assert!((sum - 1.0).abs() < 1e-6, "{sum}");
        let exact: Vec<f64> = [1.0f64, 3.0, -2.0, 3.5, 0.0]
            .iter()
            .map(|v| (v - 3.5).exp())
            .collect();
        let total: f64 = exact.iter().sum();
        for (got, e) in x.iter().zip(&exact) {
            assert!((f64::from(*got) - e / total).abs() < 1e-7);
        }
        let (chosen, weights) = choose(&r, &x, None);
        assert_eq!(chosen, [3, 1]);
        assert_eq!(weights, [x[3], x[1]]);
    }

    #[test]
    fn ties_go_to_the_lower_expert_and_a_bias_moves_only_the_choice() {
        let r = routing(4, 2, false);
        let scores = [0.5f32, 0.7, 0.7, 0.1];
        assert_eq!(choose(&r, &scores, None).0, [1, 2]);
        let bias = [0.0f32, 0.0, 0.0, 1.0];
        let (chosen, weights) = choose(&r, &scores, Some(&bias));
        assert_eq!(chosen, [3, 1]);
        // The weights are the unbiased scores.
        assert_eq!(weights, [0.1, 0.7]);
    }

    #[test]
    fn groups_limit_the_choice_to_the_experts_of_the_best_groups() {
        let mut r = routing(9, 3, false);
        // Groups of three, scored by their two best: 1.5, 1.0 (though it holds the best
        // expert), 1.2.
        let scores = [0.8f32, 0.1, 0.7, 0.95, 0.05, 0.05, 0.6, 0.6, 0.55];
        assert_eq!(choose(&r, &scores, None).0, [3, 0, 2]);
        r.groups = Some(ExpertGroups { count: 3, used: 2 });
        let (chosen, weights) = choose(&r, &scores, None);
        // Groups 0 and 2; the tie between experts 6 and 7 goes to the lower.
        assert_eq!(chosen, [0, 2, 6]);
        assert_eq!(weights, [0.8, 0.7, 0.6]);
        // The bias counts in the groups' scores and the choice, not in the weights.
        let bias = [0.0f32, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0];
        let (chosen, weights) = choose(&r, &scores, Some(&bias));
        assert_eq!(chosen, [4, 3, 0]);
        assert_eq!(weights, [0.05, 0.95, 0.8]);
    }

    #[test]
    fn sigmoid_scores_are_ggml_sigmoid_of_each_logit() {
        let mut r = routing(3, 2, true);
        r.gating = Gating::Sigmoid;
        let mut x = [0.0f32, 2.0, -1.5];
        r.scores(&mut x);
        assert_eq!(x[0], 0.5);
        assert_eq!(x[1], 1.0 / (1.0 + (-2.0f32).exp()));
        assert_eq!(x[2], 1.0 / (1.0 + 1.5f32.exp()));
        let (chosen, weights) = choose(&r, &x, None);
        assert_eq!(chosen, [1, 0]);
        let sum = (f64::from(x[1]) + f64::from(x[0])) as f32;
        assert_eq!(weights, [x[1] / sum, x[0] / sum]);
    }

    #[test]
    fn normalised_weights_sum_to_one_then_scale() {
        let mut r = routing(3, 2, true);
        let (_, w) = choose(&r, &[0.2, 0.6, 0.1], None);
        assert_eq!(w, [0.6 / 0.8f32, 0.2 / 0.8f32]);
        r.scale = 2.5;
        let (_, w) = choose(&r, &[0.2, 0.6, 0.1], None);
        assert_eq!(w, [0.6 / 0.8f32 * 2.5, 0.2 / 0.8f32 * 2.5]);
        // A sum of zero is clamped, not divided by.
        let (_, w) = choose(&r, &[0.0, 0.0, 0.0], None);
        assert_eq!(w, [0.0, 0.0]);
    }
}
