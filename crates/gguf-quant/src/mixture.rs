//! The file types of `llama-quantize` (`Q4_K_M`, `IQ4_XS`, `F16`, ...) and the type each tensor
//! of a model gets under one: llama.cpp's rules (`llama_tensor_get_type` in its
//! `llama-quant.cpp`), reproduced decision for decision so that a plan made here names the same
//! type for every tensor as llama-quantize does.
//!
//! A plan is made over the tensors in the order llama-quantize walks them ([`quantize_order`]:
//! the tensors outside the blocks by name, then block by block, by name within a block),
//! because some mixtures count the `attn_v` and `ffn_down` tensors they have seen.
//!
//! ```
//! use gguf_quant::mixture::{plan, FileType, ModelFacts, PlanOptions, TensorDesc};
//! use gguf_quant::GgmlType;
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

use crate::error::{QuantError, Result};
use crate::GgmlType;

/// A file type (`general.file_type`, llama.cpp's `llama_ftype`), with the names
/// `llama-quantize` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types, missing_docs)]
pub enum FileType {
    AllF32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q8_0 = 7,
    Q5_0 = 8,
    Q5_1 = 9,
    Q2_K = 10,
    Q3_K_S = 11,
    Q3_K_M = 12,
    Q3_K_L = 13,
    Q4_K_S = 14,
    Q4_K_M = 15,
    Q5_K_S = 16,
    Q5_K_M = 17,
    Q6_K = 18,
    IQ2_XXS = 19,
    IQ2_XS = 20,
    Q2_K_S = 21,
    IQ3_XS = 22,
    IQ3_XXS = 23,
    IQ1_S = 24,
    IQ4_NL = 25,
    IQ3_S = 26,
    IQ3_M = 27,
    IQ2_S = 28,
    IQ2_M = 29,
    IQ4_XS = 30,
    IQ1_M = 31,
    BF16 = 32,
    TQ1_0 = 36,
    TQ2_0 = 37,
    MXFP4_MOE = 38,
    Q1_0 = 40,
    Q2_0 = 41,
}

/// llama-quantize's names, in its order (aliases after the names they stand for).
const NAMES: &[(&str, FileType)] = &[
    ("Q1_0", FileType::Q1_0),
    ("Q2_0", FileType::Q2_0),
    ("Q4_0", FileType::Q4_0),
    ("Q4_1", FileType::Q4_1),
    ("MXFP4_MOE", FileType::MXFP4_MOE),
    ("Q5_0", FileType::Q5_0),
    ("Q5_1", FileType::Q5_1),
    ("IQ2_XXS", FileType::IQ2_XXS),
    ("IQ2_XS", FileType::IQ2_XS),
    ("IQ2_S", FileType::IQ2_S),
    ("IQ2_M", FileType::IQ2_M),
    ("IQ1_S", FileType::IQ1_S),
    ("IQ1_M", FileType::IQ1_M),
    ("TQ1_0", FileType::TQ1_0),
    ("TQ2_0", FileType::TQ2_0),
    ("Q2_K", FileType::Q2_K),
    ("Q2_K_S", FileType::Q2_K_S),
    ("IQ3_XXS", FileType::IQ3_XXS),
    ("IQ3_S", FileType::IQ3_S),
    ("IQ3_M", FileType::IQ3_M),
    ("Q3_K", FileType::Q3_K_M),
    ("IQ3_XS", FileType::IQ3_XS),
    ("Q3_K_S", FileType::Q3_K_S),
    ("Q3_K_M", FileType::Q3_K_M),
    ("Q3_K_L", FileType::Q3_K_L),
    ("IQ4_NL", FileType::IQ4_NL),
    ("IQ4_XS", FileType::IQ4_XS),
    ("Q4_K", FileType::Q4_K_M),
    ("Q4_K_S", FileType::Q4_K_S),
    ("Q4_K_M", FileType::Q4_K_M),
    ("Q5_K", FileType::Q5_K_M),
    ("Q5_K_S", FileType::Q5_K_S),
    ("Q5_K_M", FileType::Q5_K_M),
    ("Q6_K", FileType::Q6_K),
    ("Q8_0", FileType::Q8_0),
    ("F16", FileType::F16),
    ("BF16", FileType::BF16),
    ("F32", FileType::AllF32),
];

impl FileType {
    /// The file type of a llama-quantize name (any case; the aliases `Q3_K`, `Q4_K` and
    /// `Q5_K` are the `_M` mixtures) or of its number.
    pub fn from_name(name: &str) -> Option<FileType> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, t)| t)
            .or_else(|| {
                let id: u32 = name.parse().ok()?;
                NAMES.iter().map(|&(_, t)| t).find(|t| t.id() == id)
            })
    }

    /// The canonical name (`Q4_K_M`, `F32`, ...).
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .rev()
            .find(|&&(_, t)| t == self)
            .map_or("?", |&(n, _)| n)
    }

    /// Every name llama-quantize accepts, aliases included.
    pub fn names() -> impl Iterator<Item = &'static str> {
        NAMES.iter().map(|&(n, _)| n)
    }

    /// The number written as `general.file_type`.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The type of the tensors the mixture's rules do not change.
    pub fn default_type(self) -> GgmlType {
        use FileType as F;
        use GgmlType as G;
        match self {
            F::Q4_0 => G::Q4_0,
            F::Q4_1 => G::Q4_1,
            F::Q5_0 => G::Q5_0,
            F::Q5_1 => G::Q5_1,
            F::Q8_0 => G::Q8_0,
            F::F16 => G::F16,
            F::BF16 => G::BF16,
            F::AllF32 => G::F32,
            F::Q1_0 => G::Q1_0,
            F::Q2_0 => G::Q2_0,
            F::MXFP4_MOE => G::MXFP4,
            F::Q2_K_S | F::Q2_K => G::Q2_K,
            F::IQ3_XS => G::IQ3_S,
            F::Q3_K_S | F::Q3_K_M | F::Q3_K_L => G::Q3_K,
            F::Q4_K_S | F::Q4_K_M => G::Q4_K,
            F::Q5_K_S | F::Q5_K_M => G::Q5_K,
            F::Q6_K => G::Q6_K,
            F::TQ1_0 => G::TQ1_0,
            F::TQ2_0 => G::TQ2_0,
            F::IQ2_XXS => G::IQ2_XXS,
            F::IQ2_XS | F::IQ2_S => G::IQ2_XS,
            F::IQ2_M => G::IQ2_S,
            F::IQ3_XXS => G::IQ3_XXS,
            F::IQ1_S => G::IQ1_S,
            F::IQ1_M => G::IQ1_M,
            F::IQ4_NL => G::IQ4_NL,
            F::IQ4_XS => G::IQ4_XS,
            F::IQ3_S | F::IQ3_M => G::IQ3_S,
        }
    }
}

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
        let Some(rest) = name.strip_prefix("blk.") else {
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
    name == "token_embd.weight" || name == "per_layer_token_embd.weight"
}

fn category(name: &str) -> Category {
    use Category as C;
    if name == "output.weight" {
        return C::Output;
    }
    if is_token_embd(name) {
        return C::TokenEmbd;
    }
    let table = [
        ("attn_qkv.weight", C::AttnQkv),
        ("attn_kv_b.weight", C::AttnKvB),
        ("attn_v.weight", C::AttnV),
        ("attn_k.weight", C::AttnK),
        ("attn_q.weight", C::AttnQ),
        ("attn_output.weight", C::AttnOutput),
        ("ffn_up", C::FfnUp),
        ("ffn_gate", C::FfnGate),
        ("ffn_down", C::FfnDown),
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
    if leave_output_tensor && name == "output.weight" {
        return false;
    }
    const NEVER: &[&str] = &[
        "ffn_gate_inp.weight",
        "ffn_gate_tid2eid.weight",
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
        "attn_rel_b.weight",
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
    if name == "position_embd.weight" || name == "token_types.weight" {
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
            "attn_kv_a_mqa.weight",
            "attn_k_b.weight",
            "attn_v_b.weight",
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

fn is_quantized(ty: GgmlType) -> bool {
    !matches!(
        ty,
        GgmlType::F32
            | GgmlType::F16
            | GgmlType::BF16
            | GgmlType::F64
            | GgmlType::I8
            | GgmlType::I16
            | GgmlType::I32
            | GgmlType::I64
    )
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
    if !is_quantized(default) {
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
            return Err(QuantError::Shape(format!(
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
        let bad = || QuantError::Shape(format!("cannot tell the layer of tensor '{}'", t.name));
        let rest = t.name.strip_prefix("blk.").ok_or_else(bad)?;
        let n: u32 = rest
            .split('.')
            .next()
            .and_then(|d| d.parse().ok())
            .ok_or_else(bad)?;
        if n >= f.n_layer {
            return Err(QuantError::Shape(format!(
                "tensor '{}' is in layer {n}, past the {} layers",
                t.name, f.n_layer
            )));
        }
        Ok((n, f.n_layer))
    };
    let name = t.name;

    if arch == "glm5-next"
        && (name.contains("attn_q_a")
            || name.contains("attn_q_b")
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
mod tests {
    use super::*;

    fn facts(n_layer: u32, n_head: u32, n_head_kv: u32) -> ModelFacts {
        ModelFacts {
            arch: "llama".into(),
            n_layer,
            n_head,
            n_head_kv,
            n_expert: 0,
        }
    }

    #[test]
    fn names_and_ids_round_trip() {
        for name in FileType::names() {
            let ft = FileType::from_name(name).unwrap();
            assert_eq!(FileType::from_name(&ft.id().to_string()), Some(ft));
            assert_eq!(FileType::from_name(&name.to_lowercase()), Some(ft));
        }
        assert_eq!(FileType::from_name("Q4_K"), Some(FileType::Q4_K_M));
        assert_eq!(FileType::Q4_K_M.name(), "Q4_K_M");
        assert_eq!(FileType::AllF32.name(), "F32");
        assert_eq!(FileType::from_name("15"), Some(FileType::Q4_K_M));
        assert_eq!(FileType::from_name("Q4_2"), None);
    }

    #[test]
    fn the_order_is_outside_blocks_first_then_by_block_number() {
        let names = [
            "blk.10.attn_q.weight",
            "output.weight",
            "blk.2.ffn_up.weight",
            "blk.2.attn_k.weight",
            "token_embd.weight",
        ];
        let order: Vec<&str> = quantize_order(&names).iter().map(|&i| names[i]).collect();
        assert_eq!(
            order,
            [
                "output.weight",
                "token_embd.weight",
                "blk.2.attn_k.weight",
                "blk.2.ffn_up.weight",
                "blk.10.attn_q.weight"
            ]
        );
    }

    /// Q4_K_M on a 30-layer GQA-3 model with rows of 512: attn_v and ffn_down get Q6_K on the layers
    /// `use_more_bits` picks (the first and last eighth, then every third).
    #[test]
    fn q4_k_m_raises_the_layers_use_more_bits_picks() {
        let shape = [512u64, 512];
        let names: Vec<String> = (0..30)
            .flat_map(|l| {
                ["attn_v.weight", "ffn_down.weight", "attn_q.weight"]
                    .map(|s| format!("blk.{l}.{s}"))
            })
            .collect();
        let tensors: Vec<TensorDesc<'_>> = names
            .iter()
            .map(|n| TensorDesc {
                name: n,
                ggml_type: GgmlType::F32,
                shape: &shape,
            })
            .collect();
        let p = plan(
            FileType::Q4_K_M,
            &facts(30, 9, 3),
            &tensors,
            &PlanOptions::default(),
        )
        .unwrap();
        let raised: Vec<u32> = (0..30)
            .filter(|&l| p.types[3 * l as usize] == GgmlType::Q6_K)
            .collect();
        // n/8 = 3, 7n/8 = 26: layers 0-2, 26-29, and (i - 3) % 3 == 2 → 5, 8, ..., 23.
        assert_eq!(raised, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]);
        for l in 0..30 {
            assert_eq!(p.types[3 * l + 1], p.types[3 * l], "ffn_down of layer {l}");
            assert_eq!(p.types[3 * l + 2], GgmlType::Q4_K);
        }
    }

    #[test]
    fn the_two_bit_i_quants_need_an_importance_matrix_except_for_the_embeddings() {
        let shape = [512u64, 512];
        let t = |name| TensorDesc {
            name,
            ggml_type: GgmlType::F16,
            shape: &shape,
        };
        let tensors = [
            t("output.weight"),
            t("token_embd.weight"),
            t("blk.0.attn_q.weight"),
        ];
        let p = plan(
            FileType::IQ2_XXS,
            &facts(1, 8, 8),
            &tensors,
            &PlanOptions::default(),
        )
        .unwrap();
        assert_eq!(p.types, [GgmlType::Q5_K, GgmlType::Q2_K, GgmlType::IQ2_XXS]);
        assert_eq!(p.requires_imatrix, [false, false, true]);
        // Q2_K needs one only in a Q2_K_S file.
        let p = plan(
            FileType::Q2_K_S,
            &facts(1, 8, 8),
            &tensors[2..],
            &PlanOptions::default(),
        )
        .unwrap();
        assert_eq!((p.types[0], p.requires_imatrix[0]), (GgmlType::Q2_K, true));
        let p = plan(
            FileType::Q2_K,
            &facts(1, 8, 8),
            &tensors[2..],
            &PlanOptions::default(),
        )
        .unwrap();
        assert_eq!((p.types[0], p.requires_imatrix[0]), (GgmlType::Q2_K, false));
    }

    #[test]
    fn rows_that_do_not_fit_fall_back() {
        let odd = [96u64, 8];
        let t = [TensorDesc {
            name: "blk.0.attn_q.weight",
            ggml_type: GgmlType::F32,
            shape: &odd,
        }];
        let p = plan(
            FileType::Q4_K_S,
            &facts(1, 1, 1),
            &t,
            &PlanOptions::default(),
        )
        .unwrap();
        assert_eq!(p.types, [GgmlType::Q5_0]);
        assert_eq!(p.fallbacks, [(0, GgmlType::Q4_K, GgmlType::Q5_0)]);
        let odd = [40u64, 8];
        let t = [TensorDesc {
            name: "blk.0.attn_q.weight",
            ggml_type: GgmlType::F32,
            shape: &odd,
        }];
        let p = plan(FileType::Q6_K, &facts(1, 1, 1), &t, &PlanOptions::default()).unwrap();
        assert_eq!(p.types, [GgmlType::F16]);
    }
}
