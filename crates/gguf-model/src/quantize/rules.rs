//! The type each tensor of a model gets under one of llama-quantize's file types: llama.cpp's
//! rules (`llama_tensor_get_type` in its `llama-quant.cpp`), reproduced decision for decision
//! so that a plan made here names the same type for every tensor as llama-quantize does.
//!
//! A plan is made over the tensors in the order llama-quantize walks them ([`quantize_order`]:
//! the tensors outside the blocks by name, then block by block, by name within a block),
//! because some mixtures count the `attn_v` and `ffn_down` tensors they have seen.
//!
//! ```
//! use gguf_model::quantize::{plan, FileType, ModelFacts, PlanOptions, TensorDesc};
//! use gguf_format::GgmlType;
//!
//! let facts = ModelFacts { arch: "llama".into(), n_layer: 1, n_head: 8, n_head_kv: 8, n_expert: 0 };
//! let tensors = [
//!     TensorDesc { name: "token_embd.weight", ggml_type: GgmlType::F32, shape: &[256, 100] },
//!     TensorDesc { name: "blk.0.attn_norm.weight", ggml_type: GgmlType::F32, shape: &[256] },
//!     TensorDesc { name: "blk.0.ffn_down.weight", ggml_type: GgmlType::F32, shape: &[256, 256] },
//! ];
//! let ft = FileType::from_name("Q4_K_M").unwrap();
//! let p = plan(ft, &facts, &tensors, &PlanOptions::default()).unwrap();
//! // Tied embeddings take the output's type; norms stay F32; the one ffn_down gets more bits.
//! assert_eq!(p.types, [GgmlType::Q6_K, GgmlType::F32, GgmlType::Q6_K]);
//! ```

use gguf_format::tensor_names::{self, TensorName};
use gguf_format::GgmlType;

use super::file_type::FileType;
use crate::error::{ModelError, Result};

/// What the rules need to know of the model (from its metadata).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelFacts {
    /// `general.architecture`.
    pub arch: String,
    /// `{arch}.block_count`.
    pub n_layer: u32,
    /// `{arch}.attention.head_count` (of the first layer when per layer).
    pub n_head: u32,
    /// `{arch}.attention.head_count_kv` (of the first layer; `n_head` when absent).
    pub n_head_kv: u32,
    /// `{arch}.expert_count` (0 when absent).
    pub n_expert: u32,
}

impl ModelFacts {
    fn n_gqa(&self) -> u32 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }

    /// llama.cpp's `LLM_TYPE_70B`, for the architectures that name a model that size.
    fn is_70b(&self) -> bool {
        self.n_layer == 80
            && match self.arch.as_str() {
                "llama" => self.n_head != self.n_head_kv,
                "deci" | "olmo" | "qwen2" => true,
                _ => false,
            }
    }
}

/// One tensor as the rules see it.
#[derive(Debug, Clone, Copy)]
pub struct TensorDesc<'a> {
    /// Its name.
    pub name: &'a str,
    /// Its type in the input file.
    pub ggml_type: GgmlType,
    /// Its shape, `ne[0]` first.
    pub shape: &'a [u64],
}

/// A `--tensor-type` lookup: the type the patterns give a tensor name, if any.
pub type TensorTypeLookup<'a> = &'a dyn Fn(&str) -> Option<GgmlType>;

/// llama-quantize's options that change the plan.
#[derive(Default)]
pub struct PlanOptions<'a> {
    /// `--output-tensor-type`.
    pub output_tensor_type: Option<GgmlType>,
    /// `--token-embedding-type`.
    pub token_embedding_type: Option<GgmlType>,
    /// `--tensor-type PATTERN=TYPE`, as a lookup: the type of the first pattern found in the
    /// name (the caller matches the patterns; llama.cpp searches them as regular expressions).
    pub tensor_type: Option<TensorTypeLookup<'a>>,
    /// `--pure`: no mixture rules, every quantizable tensor to the default type.
    pub pure: bool,
    /// `--leave-output-tensor`: `output.weight` keeps its type.
    pub leave_output_tensor: bool,
    /// An importance matrix is given (some rules differ with one).
    pub has_imatrix: bool,
}

/// The type of each tensor, with what llama-quantize would say about the choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The output type of each tensor, in the order given.
    pub types: Vec<GgmlType>,
    /// Whether each tensor needs an importance matrix at its type.
    pub requires_imatrix: Vec<bool>,
    /// Tensors whose row length did not fit their type: (index, wanted, used).
    pub fallbacks: Vec<(usize, GgmlType, GgmlType)>,
}

/// The order llama-quantize writes and counts tensors in: names that do not start with
/// `blk.N.` first (as block -1), then by block number, by name within a block (byte order).
pub fn quantize_order(names: &[&str]) -> Vec<usize> {
    let block = |name: &str| -> i64 {
        // C's sscanf("blk.%d."): optional sign and digits, then the dot.
        let Some(rest) = name.strip_prefix(tensor_names::BLOCK_PREFIX) else {
            return -1;
        };
        let digits_end = rest
            .char_indices()
            .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
            .map_or(rest.len(), |(i, _)| i);
        rest[..digits_end].parse::<i32>().map_or(-1, i64::from)
    };
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| {
        block(names[a])
            .cmp(&block(names[b]))
            .then_with(|| names[a].as_bytes().cmp(names[b].as_bytes()))
    });
    order
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    TokenEmbd,
    AttnQ,
    AttnV,
    AttnK,
    AttnQkv,
    AttnKvB,
    AttnOutput,
    FfnUp,
    FfnGate,
    FfnDown,
    Output,
    Other,
}

fn is_token_embd(name: &str) -> bool {
    name == TensorName::TokenEmbd.weight() || name == TensorName::PerLayerTokenEmbd.weight()
}

fn category(name: &str) -> Category {
    use Category as C;
    if name == TensorName::Output.weight() {
        return C::Output;
    }
    if is_token_embd(name) {
        return C::TokenEmbd;
    }
    let table = [
        (TensorName::AttnQkv.weight(), C::AttnQkv),
        (TensorName::AttnKvB.weight(), C::AttnKvB),
        (TensorName::AttnV.weight(), C::AttnV),
        (TensorName::AttnK.weight(), C::AttnK),
        (TensorName::AttnQ.weight(), C::AttnQ),
        (TensorName::AttnOut.weight(), C::AttnOutput),
        // Without the suffix, as llama-quantize matches them: the experts' stacked
        // `ffn_up_exps` count as `ffn_up`.
        (TensorName::FfnUp.as_str(), C::FfnUp),
        (TensorName::FfnGate.as_str(), C::FfnGate),
        (TensorName::FfnDown.as_str(), C::FfnDown),
    ];
    table
        .iter()
        .find(|(part, _)| name.contains(part))
        .map_or(C::Other, |&(_, c)| c)
}

fn is_attn_v_like(c: Category) -> bool {
    matches!(c, Category::AttnV | Category::AttnQkv | Category::AttnKvB)
}

/// Whether llama-quantize quantizes a tensor at all (`tensor_allows_quantization`): 2-D and
/// larger tensors whose name ends in `weight`, except norms, expert routers, positional and
/// token-type embeddings, and the small tensors of a few architectures.
pub fn allows_quantization(arch: &str, t: &TensorDesc<'_>, leave_output_tensor: bool) -> bool {
    let dims = t.shape.iter().rposition(|&d| d != 1).map_or(1, |i| i + 1);
    if dims < 2 {
        return false;
    }
    let name = t.name;
    if !name.ends_with("weight") || name.contains("_norm.weight") {
        return false;
    }
    if leave_output_tensor && name == TensorName::Output.weight() {
        return false;
    }
    // llama-quantize's own substrings: the tensors of the table, then those of architectures
    // gguf-model does not run, matched as llama.cpp matches them.
    const NEVER: &[&str] = &[
        TensorName::FfnGateInp.weight(),
        TensorName::FfnGateTid2Eid.weight(),
        TensorName::AttnRelB.weight(),
        "altup",
        "laurel",
        "per_layer_model_proj",
        "ssm_conv1d",
        "shortconv.conv.weight",
        "indexer.k_proj.weight",
        "indexer.q_proj.weight",
        "time_mix_first.weight",
        "time_mix_w0.weight",
        "time_mix_w1.weight",
        "time_mix_w2.weight",
        "time_mix_v0.weight",
        "time_mix_v1.weight",
        "time_mix_v2.weight",
        "time_mix_a0.weight",
        "time_mix_a1.weight",
        "time_mix_a2.weight",
        "time_mix_g1.weight",
        "time_mix_g2.weight",
        "time_mix_decay_w1.weight",
        "time_mix_decay_w2.weight",
        "time_mix_lerp_fused.weight",
        ".position_embd",
        "sam.pos_embd",
        "sam.neck.",
        "sam.net_",
        ".rel_pos",
        ".patch_embd",
        ".patch_merger",
        "a.rvq.codebook",
        "mm.a.code_embd",
    ];
    if NEVER.iter().any(|p| name.contains(p)) {
        return false;
    }
    // LLM_TENSOR_POS_EMBD and LLM_TENSOR_TOKEN_TYPES, whose names are the same for every
    // architecture.
    if name == TensorName::PosEmbd.weight() || name == TensorName::TokenTypes.weight() {
        return false;
    }
    if arch == "glm5-next" {
        const GLM5: &[&str] = &[
            "hc_",
            "indexer.attn_q_b",
            "indexer.attn_k",
            "indexer.proj",
            "indexer_compressor_gate",
            "indexer_compressor_ape",
            "ssm_f_a.weight",
            "ssm_f_b.weight",
            "ssm_g_a.weight",
            "ssm_g_b.weight",
            "ssm_beta.weight",
            TensorName::AttnKvAMqa.weight(),
            TensorName::AttnKB.weight(),
            TensorName::AttnVB.weight(),
        ];
        if GLM5.iter().any(|p| name.contains(p)) {
            return false;
        }
    }
    true
}

/// Whether a tensor at `ty` needs an importance matrix (`tensor_requires_imatrix`).
fn requires_imatrix(name: &str, ty: GgmlType, ft: FileType) -> bool {
    use GgmlType as G;
    if is_token_embd(name) || name == "output.weight" {
        return false;
    }
    match ty {
        G::IQ3_XXS | G::IQ2_XXS | G::IQ2_XS | G::IQ2_S | G::IQ1_M | G::IQ1_S => true,
        G::Q2_K => ft == FileType::Q2_K_S,
        _ => false,
    }
}

/// The counters the mixture rules keep while walking the tensors.
struct State<'f> {
    ft: FileType,
    facts: &'f ModelFacts,
    has_imatrix: bool,
    tied_embeddings: bool,
    n_attention_wv: u32,
    i_attention_wv: u32,
    i_ffn_down: u32,
    i_ffn_gate: u32,
    i_ffn_up: u32,
}

/// Makes the plan for `tensors`, given in llama-quantize's order ([`quantize_order`]).
pub fn plan(
    ft: FileType,
    facts: &ModelFacts,
    tensors: &[TensorDesc<'_>],
    options: &PlanOptions<'_>,
) -> Result<Plan> {
    let mut s = State {
        ft,
        facts,
        has_imatrix: options.has_imatrix,
        tied_embeddings: !tensors.iter().any(|t| t.name == "output.weight"),
        n_attention_wv: tensors
            .iter()
            .filter(|t| is_attn_v_like(category(t.name)))
            .count() as u32,
        i_attention_wv: 0,
        i_ffn_down: 0,
        i_ffn_gate: 0,
        i_ffn_up: 0,
    };
    let default = ft.default_type();
    let mut p = Plan {
        types: Vec::with_capacity(tensors.len()),
        requires_imatrix: Vec::with_capacity(tensors.len()),
        fallbacks: Vec::new(),
    };
    for (i, t) in tensors.iter().enumerate() {
        let cat = category(t.name);
        let ty = if !allows_quantization(&facts.arch, t, options.leave_output_tensor) {
            t.ggml_type
        } else if let (Some(ty), Category::TokenEmbd) = (options.token_embedding_type, cat) {
            // An explicit --tensor-type naming the per-layer table wins over this option.
            match (t.name, options.tensor_type.and_then(|f| f(t.name))) {
                ("per_layer_token_embd.weight", Some(_)) => {
                    choose(&mut s, &mut p, i, t, cat, default, options)?
                }
                _ => ty,
            }
        } else if let (Some(ty), Category::Output) = (options.output_tensor_type, cat) {
            ty
        } else {
            choose(&mut s, &mut p, i, t, cat, default, options)?
        };
        p.requires_imatrix.push(requires_imatrix(t.name, ty, ft));
        p.types.push(ty);
    }
    Ok(p)
}

/// The mixture's choice for a quantizable tensor, then the fallback for its row length.
fn choose(
    s: &mut State<'_>,
    p: &mut Plan,
    index: usize,
    t: &TensorDesc<'_>,
    cat: Category,
    default: GgmlType,
    options: &PlanOptions<'_>,
) -> Result<GgmlType> {
    if !default.is_quantized() {
        return Ok(default);
    }
    let manual = options.tensor_type.and_then(|f| f(t.name));
    let mut ty = manual.unwrap_or(default);
    if manual.is_none() && !options.pure {
        ty = mixture_type(s, ty, t, cat, options)?;
    }
    let fitted = fallback(t, ty)?;
    if fitted != ty {
        p.fallbacks.push((index, ty, fitted));
    }
    Ok(fitted)
}

/// `tensor_type_fallback`: a type whose block fits the row length.
fn fallback(t: &TensorDesc<'_>, ty: GgmlType) -> Result<GgmlType> {
    use GgmlType as G;
    let ncols = t.shape.first().copied().unwrap_or(1);
    let block = ty.block_size();
    if ncols % block == 0 {
        return Ok(ty);
    }
    let mut to = match ty {
        G::IQ1_S | G::IQ1_M | G::IQ2_XXS | G::IQ2_XS | G::IQ2_S | G::IQ3_XXS | G::IQ3_S
        | G::IQ4_XS => G::IQ4_NL,
        G::Q2_0 | G::Q2_K | G::Q3_K | G::TQ1_0 | G::TQ2_0 => G::Q4_0,
        G::Q4_K => G::Q5_0,
        G::Q5_K => G::Q5_1,
        G::Q6_K => G::Q8_0,
        _ if block <= 32 => ty,
        _ => {
            return Err(ModelError::QuantizeRule(format!(
                "tensor '{}': no fallback type is defined for {} when the row length {ncols} is not a multiple of {block}",
                t.name,
                ty.name()
            )))
        }
    };
    if ncols % to.block_size() != 0 {
        to = G::F16;
    }
    Ok(to)
}

/// `llama_tensor_get_type_impl`: the mixture's type for one tensor.
fn mixture_type(
    s: &mut State<'_>,
    mut ty: GgmlType,
    t: &TensorDesc<'_>,
    cat: Category,
    options: &PlanOptions<'_>,
) -> Result<GgmlType> {
    use Category as C;
    use FileType as F;
    use GgmlType as G;
    let ft = s.ft;
    let f = s.facts;
    let arch = f.arch.as_str();
    let falcon = arch == "falcon";
    let use_more_bits = |i: u32, n: u32| -> bool {
        let (i, n) = (i64::from(i), i64::from(n));
        i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
    };
    // The layer of a tensor: its counter, or for mixtures of experts its name (experts are not
    // consecutive in the file).
    let layer = |counter: u32| -> Result<(u32, u32)> {
        if f.n_expert <= 1 {
            return Ok((counter, f.n_layer));
        }
        let bad =
            || ModelError::QuantizeRule(format!("cannot tell the layer of tensor '{}'", t.name));
        let rest = t
            .name
            .strip_prefix(tensor_names::BLOCK_PREFIX)
            .ok_or_else(bad)?;
        let n: u32 = rest
            .split('.')
            .next()
            .and_then(|d| d.parse().ok())
            .ok_or_else(bad)?;
        if n >= f.n_layer {
            return Err(ModelError::QuantizeRule(format!(
                "tensor '{}' is in layer {n}, past the {} layers",
                t.name, f.n_layer
            )));
        }
        Ok((n, f.n_layer))
    };
    let name = t.name;

    if arch == "glm5-next"
        && (name.contains(TensorName::AttnQA.as_str())
            || name.contains(TensorName::AttnQB.as_str())
            || name.contains("nextn.eh_proj"))
        && !matches!(ty, G::F32 | G::BF16 | G::F16)
    {
        return Ok(G::Q8_0);
    }
    let very_low_bits = matches!(
        ft,
        F::IQ2_XXS | F::IQ2_XS | F::IQ1_S | F::IQ2_S | F::IQ2_M | F::IQ1_M
    );

    if cat == C::Output || (s.tied_embeddings && cat == C::TokenEmbd) {
        if let Some(out) = options.output_tensor_type {
            ty = out;
        } else {
            let nx = t.shape.first().copied().unwrap_or(1);
            if ft == F::MXFP4_MOE || falcon || nx % ty.block_size() != 0 {
                ty = G::Q8_0;
            } else if very_low_bits || ft == F::IQ3_XXS {
                ty = G::Q5_K;
            } else if ty != G::Q8_0 {
                ty = G::Q6_K;
            }
        }
    } else if ft == F::MXFP4_MOE {
        let expert_role = matches!(cat, C::FfnUp | C::FfnGate | C::FfnDown);
        let experts = t.shape.get(2).copied().unwrap_or(1) > 1;
        ty = if experts && (arch != "bailingmoe3" || expert_role) {
            G::MXFP4
        } else {
            G::Q8_0
        };
    } else if cat == C::TokenEmbd {
        if let Some(e) = options.token_embedding_type {
            ty = e;
        } else if matches!(ft, F::IQ2_XXS | F::IQ2_XS | F::IQ1_S | F::IQ1_M) {
            ty = G::Q2_K;
        } else if matches!(ft, F::IQ2_S | F::IQ2_M | F::IQ3_XXS) {
            ty = G::IQ3_S;
        } else if matches!(ft, F::TQ1_0 | F::TQ2_0 | F::Q2_0) {
            ty = G::Q4_K;
        }
    } else if very_low_bits {
        let s_or_m = matches!(ft, F::IQ2_S | F::IQ2_M);
        if is_attn_v_like(cat) {
            ty = if f.n_gqa() >= 4 || f.n_expert >= 4 {
                G::Q4_K
            } else if s_or_m {
                G::IQ3_S
            } else {
                G::Q2_K
            };
            s.i_attention_wv += 1;
        } else if f.n_expert == 8 && cat == C::AttnK {
            ty = G::Q4_K;
        } else if cat == C::FfnDown {
            if s.i_ffn_down < f.n_layer / 8 {
                ty = if s_or_m { G::IQ3_S } else { G::Q2_K };
            }
            s.i_ffn_down += 1;
        } else if cat == C::AttnOutput {
            if f.n_expert == 8 {
                ty = G::Q5_K;
            } else if matches!(ft, F::IQ1_S | F::IQ1_M) {
                ty = G::IQ2_XXS;
            } else if s_or_m {
                ty = G::IQ3_S;
            }
        }
    } else if is_attn_v_like(cat) {
        let gqa4 = f.n_gqa() >= 4;
        match ft {
            F::Q2_K => ty = if gqa4 { G::Q4_K } else { G::Q3_K },
            F::Q2_K_S if gqa4 => ty = G::Q4_K,
            F::IQ3_XXS => {
                ty = if gqa4 {
                    G::Q4_K
                } else if !s.has_imatrix {
                    G::IQ3_S
                } else {
                    G::IQ3_XXS
                }
            }
            F::IQ3_XS | F::IQ3_S if gqa4 => ty = G::Q4_K,
            F::IQ3_M => ty = G::Q4_K,
            F::Q3_K_M => {
                ty = if s.i_attention_wv < 2 {
                    G::Q5_K
                } else {
                    G::Q4_K
                }
            }
            F::Q3_K_L => ty = G::Q5_K,
            F::IQ4_NL | F::IQ4_XS if gqa4 => ty = G::Q5_K,
            F::Q4_K_M | F::Q5_K_M if use_more_bits(s.i_attention_wv, s.n_attention_wv) => {
                ty = G::Q6_K
            }
            F::Q4_K_S if s.i_attention_wv < 4 => ty = G::Q5_K,
            _ => {}
        }
        if f.is_70b() && matches!(ty, G::Q3_K | G::Q4_K) {
            ty = G::Q5_K;
        }
        if f.n_expert == 8 {
            ty = G::Q8_0;
        }
        s.i_attention_wv += 1;
    } else if cat == C::AttnK {
        if f.n_expert == 8 {
            ty = G::Q8_0;
        } else if ft == F::IQ3_XS {
            ty = G::IQ3_XXS;
        } else if ft == F::IQ3_XXS {
            ty = G::IQ2_S;
        }
    } else if cat == C::AttnQ {
        if ft == F::IQ3_XS {
            ty = G::IQ3_XXS;
        } else if ft == F::IQ3_XXS {
            ty = G::IQ2_S;
        }
    } else if cat == C::FfnDown {
        let (i, n) = layer(s.i_ffn_down)?;
        match ft {
            F::Q2_K => ty = G::Q3_K,
            F::Q2_K_S if i < n / 8 => ty = G::Q4_K,
            F::Q2_K_S => {}
            F::IQ3_XXS if !s.has_imatrix => ty = if i < n / 8 { G::Q4_K } else { G::Q3_K },
            F::Q3_K_M => {
                ty = if i < n / 16 {
                    G::Q5_K
                } else if !falcon || use_more_bits(i, n) {
                    G::Q4_K
                } else {
                    G::Q3_K
                }
            }
            F::IQ3_M if i < n / 8 || (f.n_expert == 8 && use_more_bits(i, n)) => ty = G::Q4_K,
            F::Q3_K_L => ty = if falcon { G::Q4_K } else { G::Q5_K },
            F::Q4_K_M => {
                if falcon {
                    ty = if i < n / 16 {
                        G::Q6_K
                    } else if use_more_bits(i, n) {
                        G::Q5_K
                    } else {
                        G::Q4_K
                    };
                } else if use_more_bits(i, n) {
                    ty = G::Q6_K;
                }
            }
            F::IQ4_NL | F::IQ4_XS if i < n / 8 && !s.has_imatrix => ty = G::Q5_K,
            F::Q5_K_M if use_more_bits(i, n) => ty = G::Q6_K,
            F::Q4_K_S if !falcon && i < n / 8 => ty = G::Q5_K,
            F::Q4_0 | F::Q5_0 if s.has_imatrix && i < n / 8 => {
                ty = if ft == F::Q4_0 { G::Q4_1 } else { G::Q5_1 }
            }
            _ => {}
        }
        s.i_ffn_down += 1;
    } else if cat == C::AttnOutput {
        if !falcon {
            if f.n_expert == 8 {
                if matches!(
                    ft,
                    F::Q2_K
                        | F::IQ3_XS
                        | F::IQ3_XXS
                        | F::Q3_K_S
                        | F::Q3_K_M
                        | F::IQ4_NL
                        | F::Q4_K_S
                        | F::Q4_K_M
                        | F::IQ3_S
                        | F::IQ3_M
                        | F::IQ4_XS
                ) {
                    ty = G::Q5_K;
                }
            } else {
                match ft {
                    F::Q2_K => ty = G::Q3_K,
                    F::IQ3_XXS => ty = G::IQ3_S,
                    F::Q3_K_M | F::IQ3_M => ty = G::Q4_K,
                    F::Q3_K_L => ty = G::Q5_K,
                    _ => {}
                }
            }
        } else if ft == F::Q3_K_L {
            ty = G::Q4_K;
        }
    } else if cat == C::AttnQkv {
        // Unreachable in llama.cpp too: fused QKV is attn_v-like and handled above.
        match ft {
            F::Q3_K_M | F::Q3_K_L | F::IQ3_M => ty = G::Q4_K,
            F::Q4_K_M => ty = G::Q5_K,
            F::Q5_K_M => ty = G::Q6_K,
            _ => {}
        }
    } else if cat == C::FfnGate || cat == C::FfnUp {
        let counter = if cat == C::FfnGate {
            s.i_ffn_gate
        } else {
            s.i_ffn_up
        };
        let (i, n) = layer(counter)?;
        if ft == F::IQ3_XS && i >= n / 8 && i < 7 * n / 8 {
            ty = G::IQ3_XXS;
        }
        if cat == C::FfnGate {
            s.i_ffn_gate += 1;
        } else {
            s.i_ffn_up += 1;
        }
    }
    Ok(ty)
}

#[cfg(test)]
mod tests;
