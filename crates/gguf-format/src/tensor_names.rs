//! The names of a model's tensors in a GGUF file, in one table, as llama.cpp's `LLM_TENSOR_*`
//! names them (`llama-arch.cpp`): the whole model's (`token_embd.weight`) and each block's
//! (`blk.{i}.attn_q.weight`, formatted by [`block`] only).
//!
//! ```
//! use gguf_format::tensor_names::{self, TensorName};
//!
//! assert_eq!(TensorName::TokenEmbd.weight(), "token_embd.weight");
//! assert_eq!(TensorName::AttnQ.block_weight(3), "blk.3.attn_q.weight");
//! assert_eq!(tensor_names::split_block("blk.3.attn_q.weight"), Some((3, "attn_q.weight")));
//! assert_eq!(TensorName::parse("ffn_up"), Some(TensorName::FfnUp));
//! ```

use std::fmt::Display;

/// What every block tensor's name begins with.
pub const BLOCK_PREFIX: &str = "blk.";

/// What follows the last `.` of a weight tensor's name.
pub const WEIGHT: &str = "weight";

/// What follows the last `.` of a bias tensor's name.
pub const BIAS: &str = "bias";

macro_rules! tensor_names {
    ($($(#[$doc:meta])* $variant:ident = $name:literal,)*) => {
        /// A tensor of a model as llama.cpp names it (its `LLM_TENSOR_*`), without the block
        /// prefix and the `.weight`/`.bias` suffix.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum TensorName {
            $($(#[$doc])* $variant,)*
        }

        impl TensorName {
            /// Every name of the table.
            pub const ALL: &'static [TensorName] = &[$(TensorName::$variant,)*];

            /// The name (`attn_q`).
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(TensorName::$variant => $name,)*
                }
            }

            /// The name of the whole model's weight tensor (`token_embd.weight`).
            pub const fn weight(self) -> &'static str {
                match self {
                    $(TensorName::$variant => concat!($name, ".weight"),)*
                }
            }

            /// The name of the whole model's bias tensor (`output.bias`).
            pub const fn bias(self) -> &'static str {
                match self {
                    $(TensorName::$variant => concat!($name, ".bias"),)*
                }
            }
        }
    };
}

tensor_names! {
    /// `LLM_TENSOR_TOKEN_EMBD`: the token embeddings.
    TokenEmbd = "token_embd",
    /// `LLM_TENSOR_TOKEN_EMBD_NORM`: the norm after the embeddings (BERT).
    TokenEmbdNorm = "token_embd_norm",
    /// `LLM_TENSOR_TOKEN_TYPES`: the token-type embeddings (BERT).
    TokenTypes = "token_types",
    /// `LLM_TENSOR_POS_EMBD`: learned position embeddings (BERT).
    PosEmbd = "position_embd",
    /// `LLM_TENSOR_PER_LAYER_TOKEN_EMBD`: Gemma 3n's per-layer embeddings.
    PerLayerTokenEmbd = "per_layer_token_embd",
    /// `LLM_TENSOR_OUTPUT`: the output projection (absent when tied to the embeddings).
    Output = "output",
    /// `LLM_TENSOR_OUTPUT_NORM`: the final norm.
    OutputNorm = "output_norm",
    /// `LLM_TENSOR_ROPE_FREQS`: RoPE frequency factors (Llama 3).
    RopeFreqs = "rope_freqs",
    /// `LLM_TENSOR_ROPE_FACTORS_LONG`: LongRoPE's long factors (Phi-3).
    RopeFactorsLong = "rope_factors_long",
    /// `LLM_TENSOR_ROPE_FACTORS_SHORT`: LongRoPE's short factors (Phi-3).
    RopeFactorsShort = "rope_factors_short",
    /// `LLM_TENSOR_CLS`: a classifier head's first projection.
    Cls = "cls",
    /// `LLM_TENSOR_CLS_OUT`: a classifier head's output projection.
    ClsOut = "cls.output",
    /// `LLM_TENSOR_ATTN_NORM`: a block's norm before attention.
    AttnNorm = "attn_norm",
    /// `LLM_TENSOR_ATTN_Q`: the query projection.
    AttnQ = "attn_q",
    /// `LLM_TENSOR_ATTN_K`: the key projection.
    AttnK = "attn_k",
    /// `LLM_TENSOR_ATTN_V`: the value projection.
    AttnV = "attn_v",
    /// `LLM_TENSOR_ATTN_QKV`: the fused query, key and value projection.
    AttnQkv = "attn_qkv",
    /// `LLM_TENSOR_ATTN_OUT`: the attention output projection.
    AttnOut = "attn_output",
    /// `LLM_TENSOR_ATTN_Q_A`: latent attention's query compression (DeepSeek 2).
    AttnQA = "attn_q_a",
    /// `LLM_TENSOR_ATTN_Q_B`: latent attention's query expansion (DeepSeek 2).
    AttnQB = "attn_q_b",
    /// `LLM_TENSOR_ATTN_Q_A_NORM`: the norm of latent attention's compressed query (DeepSeek 2).
    AttnQANorm = "attn_q_a_norm",
    /// `LLM_TENSOR_ATTN_KV_A_NORM`: the norm of latent attention's compressed key-value
    /// (DeepSeek 2).
    AttnKvANorm = "attn_kv_a_norm",
    /// `LLM_TENSOR_ATTN_KV_A_MQA`: multi-head latent attention's compressed key-value
    /// projection (DeepSeek 2).
    AttnKvAMqa = "attn_kv_a_mqa",
    /// `LLM_TENSOR_ATTN_KV_B`: latent attention's key-value expansion (DeepSeek 2).
    AttnKvB = "attn_kv_b",
    /// `LLM_TENSOR_ATTN_K_B`: latent attention's key expansion, split (DeepSeek 2).
    AttnKB = "attn_k_b",
    /// `LLM_TENSOR_ATTN_V_B`: latent attention's value expansion, split (DeepSeek 2).
    AttnVB = "attn_v_b",
    /// `LLM_TENSOR_ATTN_REL_B`: relative attention bias (T5).
    AttnRelB = "attn_rel_b",
    /// `LLM_TENSOR_ATTN_SINKS`: one learned logit per query head that joins every softmax
    /// of attention without a value (gpt-oss).
    AttnSinks = "attn_sinks",
    /// `LLM_TENSOR_ATTN_Q_NORM`: the per-head query norm.
    AttnQNorm = "attn_q_norm",
    /// `LLM_TENSOR_ATTN_K_NORM`: the per-head key norm.
    AttnKNorm = "attn_k_norm",
    /// `LLM_TENSOR_ATTN_OUT_NORM`: the norm after attention's residual (BERT).
    AttnOutNorm = "attn_output_norm",
    /// `LLM_TENSOR_ATTN_POST_NORM`: the norm of attention's output (Gemma 2 and 3).
    AttnPostNorm = "post_attention_norm",
    /// `LLM_TENSOR_FFN_NORM`: a block's norm before the feed-forward network.
    FfnNorm = "ffn_norm",
    /// `LLM_TENSOR_FFN_POST_NORM`: the norm of the feed-forward output (Gemma 2 and 3).
    FfnPostNorm = "post_ffw_norm",
    /// `LLM_TENSOR_FFN_GATE`: the feed-forward gate projection.
    FfnGate = "ffn_gate",
    /// `LLM_TENSOR_FFN_UP`: the feed-forward up projection.
    FfnUp = "ffn_up",
    /// `LLM_TENSOR_FFN_DOWN`: the feed-forward down projection.
    FfnDown = "ffn_down",
    /// `LLM_TENSOR_FFN_GATE_INP`: a mixture of experts' router.
    FfnGateInp = "ffn_gate_inp",
    /// `LLM_TENSOR_FFN_GATE_TID2EID`: a token-id-to-expert table.
    FfnGateTid2Eid = "ffn_gate_tid2eid",
    /// `LLM_TENSOR_FFN_GATE_EXPS`: the experts' gate projections, stacked.
    FfnGateExps = "ffn_gate_exps",
    /// `LLM_TENSOR_FFN_UP_EXPS`: the experts' up projections, stacked.
    FfnUpExps = "ffn_up_exps",
    /// `LLM_TENSOR_FFN_DOWN_EXPS`: the experts' down projections, stacked.
    FfnDownExps = "ffn_down_exps",
    /// `LLM_TENSOR_FFN_GATE_INP_SHEXP`: the shared expert's gate, one logit per token
    /// (Qwen2-MoE).
    FfnGateInpShexp = "ffn_gate_inp_shexp",
    /// `LLM_TENSOR_FFN_GATE_SHEXP`: the shared experts' gate projection.
    FfnGateShexp = "ffn_gate_shexp",
    /// `LLM_TENSOR_FFN_UP_SHEXP`: the shared experts' up projection.
    FfnUpShexp = "ffn_up_shexp",
    /// `LLM_TENSOR_FFN_DOWN_SHEXP`: the shared experts' down projection.
    FfnDownShexp = "ffn_down_shexp",
    /// `LLM_TENSOR_FFN_EXP_PROBS_B`: the bias added to expert scores for their selection only
    /// (DeepSeek-V3).
    FfnExpProbsB = "exp_probs_b",
    /// `LLM_TENSOR_LAYER_OUT_NORM`: the norm after the feed-forward residual (BERT).
    LayerOutNorm = "layer_output_norm",
}

impl TensorName {
    /// The table's entry named `name` (`attn_q`, without prefix or suffix).
    pub fn parse(name: &str) -> Option<TensorName> {
        TensorName::ALL.iter().copied().find(|t| t.as_str() == name)
    }

    /// Block `i`'s tensor of this name, without suffix (`blk.{i}.attn_q`).
    pub fn block(self, i: impl Display) -> String {
        block(i, self.as_str())
    }

    /// Block `i`'s weight tensor (`blk.{i}.attn_q.weight`).
    pub fn block_weight(self, i: impl Display) -> String {
        block(i, self.weight())
    }

    /// Block `i`'s bias tensor (`blk.{i}.attn_q.bias`).
    pub fn block_bias(self, i: impl Display) -> String {
        block(i, self.bias())
    }
}

impl Display for TensorName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The name of block `i`'s tensor `rest` (`blk.{i}.{rest}`): the one place block names are
/// formatted. `rest` is a name of the table with or without its suffix, or another name.
pub fn block(i: impl Display, rest: &str) -> String {
    format!("{BLOCK_PREFIX}{i}.{rest}")
}

/// A block tensor's name split into the block number and the rest (`blk.3.attn_q.weight` →
/// `(3, "attn_q.weight")`), the number as Rust parses it; `None` for any other name.
pub fn split_block(name: &str) -> Option<(usize, &str)> {
    let rest = name.strip_prefix(BLOCK_PREFIX)?;
    let (number, rest) = rest.split_once('.')?;
    Some((number.parse().ok()?, rest))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_round_trip() {
        for (i, t) in TensorName::ALL.iter().enumerate() {
            assert_eq!(TensorName::parse(t.as_str()), Some(*t));
            assert_eq!(t.weight(), format!("{t}.{WEIGHT}"));
            assert_eq!(t.bias(), format!("{t}.{BIAS}"));
            assert!(TensorName::ALL[..i]
                .iter()
                .all(|o| o.as_str() != t.as_str()));
        }
        assert_eq!(
            TensorName::AttnOut.block_bias(11),
            "blk.11.attn_output.bias"
        );
        assert_eq!(split_block("blk.x.attn_q"), None);
        assert_eq!(split_block("token_embd.weight"), None);
    }
}
