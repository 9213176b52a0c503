//! The llama family: `llama` (Llama 1-3, SmolLM2, TinyLlama; with experts, Mixtral),
//! `mistral` (llama with a sliding attention window), `qwen2` (biases on Q, K and V; NeoX
//! RoPE), `qwen3` (an RMSNorm on each head of Q and K; NeoX RoPE), and their mixtures of
//! experts: `qwen2moe` (Qwen2's attention, a shared expert with its own sigmoid gate),
//! `qwen3moe` (Qwen3's attention, normalised expert weights) and `olmoe` (an RMSNorm over the
//! whole Q and K rows; NeoX RoPE); and IBM's `granite` and `granitemoe` (llama with four
//! multipliers: of the embeddings, of each sublayer's output before the residual add, the
//! attention scale, and a divisor of the logits; an optional attention output bias; the MoE
//! with an ungated shared expert when `expert_shared_feed_forward_length` is set). Pre-norm blocks: RMSNorm, attention with RoPE, RMSNorm,
//! SwiGLU feed-forward (dense, or routed: [`crate::moe`]). Llama 3's RoPE scaling comes as a
//! `rope_freqs.weight` table of per-pair frequency factors, applied as llama.cpp applies it.

use super::Architecture;
use crate::attention::Scores;
use crate::error::Result;
use crate::forward::{output_rows, rms_norm_rows, wrote_hidden_states, Heads, Pass, SelfAttention};
use crate::hparams::{Hparams, Reader};
use crate::moe::{Ffn, MoeFfn, Routing, SharedExpert};
use crate::ops::{add_assign, add_bias, scale, Rope};
use crate::weights::{Biases, Loader, Matrix, Qkv};
use gguf_format::tensor_names::{self, TensorName as T};

/// What sets the family's members apart.
#[derive(Debug, Clone, Copy)]
struct Variant {
    /// RoPE rotates the two halves of each head rather than adjacent pairs.
    neox: bool,
    /// Q, K and V must have biases (optional elsewhere). Each family member also takes a fused
    /// `attn_qkv` instead of the three tensors, as llama.cpp does.
    qkv_bias: bool,
    /// Q and K are RMS-normed.
    qk_norm: QkNorm,
    /// `attention.sliding_window` applies to every layer.
    sliding_window: bool,
    /// Whether the feed-forward networks are mixtures of experts.
    experts: Experts,
    /// Granite's multipliers.
    granite: bool,
}

/// Granite's multipliers (`{arch}.embedding_scale`, `residual_scale`, `attention.scale`,
/// `logit_scale`), as llama.cpp applies them; 0 (or absent) leaves the first three out.
#[derive(Debug, Clone, Copy)]
struct GraniteScales {
    embedding: f32,
    residual: f32,
    /// The inverse of `logit_scale`, computed in f32 as llama.cpp does.
    inv_logit: f32,
}

impl GraniteScales {
    /// Every other family's: nothing scaled (a scale by 1 changes no bit, so it is skipped).
    const NONE: GraniteScales = GraniteScales {
        embedding: 0.0,
        residual: 0.0,
        inv_logit: 1.0,
    };
}

/// Which RMSNorm Q and K get before RoPE.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum QkNorm {
    None,
    /// One norm of `head_dim` weights for each head (Qwen 3).
    PerHead,
    /// One norm over the whole Q row and one over the whole K row (OLMoE).
    WholeRow,
}

/// The feed-forward networks of a family member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Experts {
    /// Dense in every block.
    Never,
    /// Routed when the file has `{arch}.expert_count` above 1 (llama: Mixtral).
    WhenCounted,
    /// Routed in every block; `shared`: with Qwen2-MoE's gated shared expert.
    Always { shared: bool },
}

impl Variant {
    fn of(arch: &str) -> Variant {
        let plain = Variant {
            neox: false,
            qkv_bias: false,
            qk_norm: QkNorm::None,
            sliding_window: false,
            experts: Experts::Never,
            granite: false,
        };
        match arch {
            "llama" => Variant {
                experts: Experts::WhenCounted,
                ..plain
            },
            "mistral" => Variant {
                sliding_window: true,
                ..plain
            },
            "qwen2" => Variant {
                neox: true,
                qkv_bias: true,
                ..plain
            },
            "qwen3" => Variant {
                neox: true,
                qk_norm: QkNorm::PerHead,
                ..plain
            },
            "qwen2moe" => Variant {
                neox: true,
                experts: Experts::Always { shared: true },
                ..plain
            },
            "qwen3moe" => Variant {
                neox: true,
                qk_norm: QkNorm::PerHead,
                experts: Experts::Always { shared: false },
                ..plain
            },
            "granite" => Variant {
                experts: Experts::WhenCounted,
                granite: true,
                ..plain
            },
            "granitemoe" => Variant {
                experts: Experts::Always { shared: false },
                granite: true,
                ..plain
            },
            "olmoe" => Variant {
                neox: true,
                qk_norm: QkNorm::WholeRow,
                experts: Experts::Always { shared: false },
                ..plain
            },
            _ => plain,
        }
    }
}

/// One block's tensors.
struct Layer {
    attn_norm: Vec<f32>,
    qkv: Qkv,
    wo: Matrix,
    q_norm: Option<Vec<f32>>,
    k_norm: Option<Vec<f32>>,
    /// `attn_output.bias` (Granite's, optional).
    wo_b: Option<Vec<f32>>,
    ffn_norm: Vec<f32>,
    ffn: Ffn,
}

/// How the family member routes its experts, from its metadata: `None` for a dense model.
/// As llama.cpp: Mixtral, Qwen3-MoE normalise the chosen weights, Qwen2-MoE and OLMoE do not;
/// all use a softmax.
fn routing(r: &Reader<'_, '_>, arch: &str, experts: Experts) -> Result<Option<Routing>> {
    let normalize = matches!(arch, "llama" | "qwen3moe" | "granite" | "granitemoe");
    match experts {
        Experts::Never => Ok(None),
        Experts::WhenCounted => Routing::read_optional(r, normalize),
        Experts::Always { .. } => Routing::read(r, normalize).map(Some),
    }
}

struct Llama {
    hp: Hparams,
    token_embd: Matrix,
    layers: Vec<Layer>,
    output_norm: Vec<f32>,
    /// `output.weight`, or `token_embd` when the model ties them.
    output: Matrix,
    rope: Rope,
    /// `rope_freqs.weight` (Llama 3's RoPE scaling), one factor per rotated pair, if the file
    /// has it: as llama.cpp, every layer's angles are divided by them (`ggml_rope_ext`'s
    /// frequency factors).
    rope_freqs: Option<Vec<f32>>,
    scores: Scores,
    granite: GraniteScales,
}

pub(super) fn load(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>> {
    let name = l.name;
    let variant = Variant::of(arch);
    let r = Reader {
        file: l.metadata(),
        name,
        arch,
    };
    let mut hp = r.common("attention.layer_norm_rms_epsilon")?;
    if variant.sliding_window {
        hp.sliding_window = r.sliding_window()?;
        hp.layer_windows = vec![hp.sliding_window; hp.n_layer];
    }
    hp.n_vocab = l.rows_of(T::TokenEmbd.weight(), hp.n_embd)?;
    let token_embd = l.plain_matrix(T::TokenEmbd.weight(), hp.n_embd, hp.n_vocab)?;
    let (q_out, k_out, v_out) = (
        hp.n_head * hp.head_dim_k,
        hp.n_head_kv * hp.head_dim_k,
        hp.n_head_kv * hp.head_dim_v,
    );
    let routing = routing(&r, arch, variant.experts)?;
    // Each expert's width, as llama.cpp reads it: `feed_forward_length` for llama (Mixtral)
    // and OLMoE; for the Qwens `expert_feed_forward_length`, else `feed_forward_length`
    // divided among the used experts.
    let n_ff_exp = match routing {
        None => 0,
        Some(_) if matches!(arch, "llama" | "olmoe" | "granite" | "granitemoe") => hp.n_ff,
        Some(ro) => match r.opt_usize("expert_feed_forward_length")? {
            Some(_) => r.size("expert_feed_forward_length", 1 << 20)?,
            None => hp.n_ff / ro.n_used,
        },
    };
    let n_ff_shared_given = r.opt_usize("expert_shared_feed_forward_length")? > Some(0);
    let n_ff_shared = match n_ff_shared_given {
        true => r.size("expert_shared_feed_forward_length", 1 << 20)?,
        false => hp.n_ff,
    };
    if variant.granite && routing.is_none() && l.has(&T::FfnUp.block_bias(0)) {
        return Err(r.error("Granite's feed-forward biases are not supported yet"));
    }
    let mut layers = Vec::with_capacity(hp.n_layer);
    for i in 0..hp.n_layer {
        let t = |s: &str| tensor_names::block(i, s);
        let biases = if variant.qkv_bias {
            Biases::Required
        } else {
            Biases::Optional
        };
        let norm = |s: &str, heads: usize| match variant.qk_norm {
            QkNorm::None => Ok(None),
            QkNorm::PerHead => l.vector(&t(s), hp.head_dim_k).map(Some),
            QkNorm::WholeRow => l.vector(&t(s), heads * hp.head_dim_k).map(Some),
        };
        // Loaded after the attention tensors, so that a missing tensor is reported in the
        // order llama.cpp's loader creates them.
        let ffn = || -> Result<Ffn> {
            Ok(match routing {
                None => Ffn::Dense {
                    gate: l.matrix(&T::FfnGate.block_weight(i), hp.n_embd, hp.n_ff)?,
                    up: l.matrix(&T::FfnUp.block_weight(i), hp.n_embd, hp.n_ff)?,
                    down: l.matrix(&T::FfnDown.block_weight(i), hp.n_ff, hp.n_embd)?,
                },
                Some(ro) => {
                    let mut moe = MoeFfn::load(l, i, hp.n_embd, n_ff_exp, ro)?;
                    if variant.experts == (Experts::Always { shared: true }) {
                        moe.shared = Some(SharedExpert::load_gated(l, i, hp.n_embd, n_ff_shared)?);
                    } else if variant.granite && n_ff_shared_given {
                        moe.shared = Some(SharedExpert::load(l, i, hp.n_embd, n_ff_shared)?);
                    }
                    Ffn::Routed(Box::new(moe))
                }
            })
        };
        layers.push(Layer {
            attn_norm: l.vector(&T::AttnNorm.block_weight(i), hp.n_embd)?,
            qkv: l.qkv(i, hp.n_embd, (q_out, k_out, v_out), biases)?,
            wo: l.matrix(
                &T::AttnOut.block_weight(i),
                hp.n_head * hp.head_dim_v,
                hp.n_embd,
            )?,
            q_norm: norm(T::AttnQNorm.weight(), hp.n_head)?,
            k_norm: norm(T::AttnKNorm.weight(), hp.n_head_kv)?,
            wo_b: match variant.granite {
                true => l.optional_vector(&T::AttnOut.block_bias(i), hp.n_embd)?,
                false => None,
            },
            ffn_norm: l.vector(&T::FfnNorm.block_weight(i), hp.n_embd)?,
            ffn: ffn()?,
        });
    }
    let output = l
        .optional_matrix(T::Output.weight(), hp.n_embd, hp.n_vocab)?
        .map_or_else(|| l.packed(token_embd.clone()), Ok)?;
    let output_norm = l.vector(T::OutputNorm.weight(), hp.n_embd)?;
    let rope_freqs = l.rope_factors(T::RopeFreqs.weight(), hp.n_rot / 2)?;
    let rope = Rope::for_model(
        hp.n_rot,
        variant.neox,
        hp.rope_freq_base,
        hp.rope_scaling,
        hp.n_ctx_train,
    );
    let granite = match variant.granite {
        true => GraniteScales {
            embedding: r.finite_or("embedding_scale", 0.0)?,
            residual: r.finite_or("residual_scale", 0.0)?,
            inv_logit: 1.0 / r.required_positive("logit_scale")?,
        },
        false => GraniteScales::NONE,
    };
    // Granite reads `rope.scaling.finetuned` as a switch that turns RoPE off when false.
    if arch == "granite" && r.opt_bool("rope.scaling.finetuned")? == Some(false) {
        return Err(
            r.error("granite.rope.scaling.finetuned = false (no RoPE) is not supported yet")
        );
    }
    let attention_scale = match variant.granite {
        true => r.finite_or("attention.scale", 0.0)?,
        false => 0.0,
    };
    let kq_scale = match attention_scale {
        0.0 => 1.0 / (hp.head_dim_k as f32).sqrt(),
        s => s,
    };
    let scores = Scores::new(kq_scale, 0.0);
    Ok(Box::new(Llama {
        hp,
        token_embd,
        layers,
        output_norm,
        output,
        rope,
        rope_freqs,
        scores,
        granite,
    }))
}

impl Architecture for Llama {
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
        let heads = Heads::of(hp);
        ctx.embed(&self.token_embd, tokens, &mut s.residual)?;
        let granite = self.granite;
        if granite.embedding != 0.0 {
            scale(&mut s.residual, granite.embedding);
        }
        s.fill_rope_with_factors(&self.rope, self.rope_freqs.as_deref(), segments);
        for (il, l) in self.layers.iter().enumerate() {
            rms_norm_rows(&s.residual, &l.attn_norm, eps, &mut s.sublayer);
            SelfAttention {
                qkv: &l.qkv,
                qk_norm: l.q_norm.as_deref().zip(l.k_norm.as_deref()),
                eps,
                rope: &self.rope,
                rope_cache: 0,
                query_scale: None,
                heads,
                window: hp.layer_windows[il],
                scores: self.scores,
                sinks: None,
            }
            .run(ctx, caches, segments, s, il)?;
            ctx.matmul(&l.wo, &s.attn, &mut s.sublayer, &mut s.quant)?;
            if let Some(b) = &l.wo_b {
                add_bias(&mut s.sublayer, b);
            }
            if granite.residual != 0.0 {
                scale(&mut s.sublayer, granite.residual);
            }
            add_assign(&mut s.residual, &s.sublayer);
            rms_norm_rows(&s.residual, &l.ffn_norm, eps, &mut s.sublayer);
            l.ffn.run(ctx, s)?;
            if granite.residual != 0.0 {
                scale(&mut s.sublayer, granite.residual);
            }
            add_assign(&mut s.residual, &s.sublayer);
        }
        let d = hp.n_embd;
        let rows = output_rows(&s.residual, d, segments, *all_logits, &mut s.picked);
        rms_norm_rows(rows, &self.output_norm, eps, &mut s.row);
        if wrote_hidden_states(*embeddings, &s.row, logits) {
            return Ok(());
        }
        ctx.matmul(&self.output, &s.row, logits, &mut s.quant)?;
        if granite.inv_logit != 1.0 {
            scale(logits, granite.inv_logit);
        }
        Ok(())
    }
}
