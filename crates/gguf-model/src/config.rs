//! Hyperparameters from `{arch}.*` metadata, with the GGUF spec's and llama.cpp's defaults.

use gguf_format::GgufFile;

use crate::error::{ModelError, Result, SUPPORTED};

/// The architectures this crate runs, and what sets them apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arch {
    /// Llama 1/2/3, SmolLM2, TinyLlama.
    Llama,
    /// Mistral: llama with sliding-window attention.
    Mistral,
    /// Qwen2: biases on Q, K and V; NeoX RoPE.
    Qwen2,
    /// Qwen3: RMS norms on each head of Q and K; NeoX RoPE.
    Qwen3,
}

impl Arch {
    fn from_name(name: &str) -> Option<Arch> {
        Some(match name {
            "llama" => Arch::Llama,
            "mistral" => Arch::Mistral,
            "qwen2" => Arch::Qwen2,
            "qwen3" => Arch::Qwen3,
            _ => return None,
        })
    }

    /// The name in `general.architecture`.
    pub fn name(self) -> &'static str {
        match self {
            Arch::Llama => "llama",
            Arch::Mistral => "mistral",
            Arch::Qwen2 => "qwen2",
            Arch::Qwen3 => "qwen3",
        }
    }

    /// Whether RoPE rotates the halves of each head (NeoX) rather than adjacent pairs.
    pub fn rope_neox(self) -> bool {
        matches!(self, Arch::Qwen2 | Arch::Qwen3)
    }
}

/// How RoPE positions are scaled (`{arch}.rope.scaling.type`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RopeScaling {
    /// No scaling.
    None,
    /// Positions divided by `factor`.
    Linear {
        /// `rope.scaling.factor`.
        factor: f32,
    },
    /// YaRN.
    Yarn {
        /// `rope.scaling.factor`.
        factor: f32,
        /// `rope.scaling.original_context_length`.
        original_context: usize,
        /// `rope.scaling.yarn_ext_factor` (default 1 for YaRN? llama.cpp: -1 → 1).
        ext_factor: f32,
        /// `rope.scaling.yarn_attn_factor`.
        attn_factor: f32,
        /// `rope.scaling.yarn_beta_fast`.
        beta_fast: f32,
        /// `rope.scaling.yarn_beta_slow`.
        beta_slow: f32,
    },
}

/// The hyperparameters of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Hparams {
    /// The architecture.
    pub arch: Arch,
    /// Width of the residual stream.
    pub n_embd: usize,
    /// Transformer blocks.
    pub n_layer: usize,
    /// Query heads.
    pub n_head: usize,
    /// Key/value heads (grouped-query attention when fewer than `n_head`).
    pub n_head_kv: usize,
    /// Dimension of each key head.
    pub head_dim_k: usize,
    /// Dimension of each value head.
    pub head_dim_v: usize,
    /// Hidden width of the feed-forward block.
    pub n_ff: usize,
    /// Vocabulary size (rows of `token_embd`).
    pub n_vocab: usize,
    /// The context the model was trained for.
    pub n_ctx_train: usize,
    /// RMSNorm epsilon.
    pub rms_eps: f32,
    /// RoPE base frequency.
    pub rope_freq_base: f32,
    /// Dimensions of each head that RoPE rotates.
    pub n_rot: usize,
    /// RoPE scaling.
    pub rope_scaling: RopeScaling,
    /// Sliding attention window (Mistral), if any.
    pub sliding_window: Option<usize>,
}

fn bad(file: &str, message: impl Into<String>) -> ModelError {
    ModelError::Hyperparameters {
        file: file.to_string(),
        message: message.into(),
    }
}

impl Hparams {
    /// Reads and checks the hyperparameters of `file` (named `name` in errors).
    pub fn from_gguf(file: &GgufFile, name: &str) -> Result<Hparams> {
        let arch_name = file.architecture()?;
        let arch =
            Arch::from_name(arch_name).ok_or_else(|| ModelError::UnsupportedArchitecture {
                file: name.to_string(),
                arch: arch_name.to_string(),
            })?;
        debug_assert!(SUPPORTED.contains(&arch.name()));
        let key = |suffix: &str| format!("{arch_name}.{suffix}");
        let usize_key = |suffix: &str| -> Result<usize> { Ok(file.get_usize(&key(suffix))?) };
        let opt_usize = |suffix: &str| -> Result<Option<usize>> {
            match file.value(&key(suffix)) {
                None => Ok(None),
                Some(_) => Ok(Some(file.get_usize(&key(suffix))?)),
            }
        };
        let opt_f32 =
            |suffix: &str| -> Result<Option<f32>> { Ok(file.get_opt::<f32>(&key(suffix))?) };

        let n_embd = usize_key("embedding_length")?;
        let n_layer = usize_key("block_count")?;
        let n_head = usize_key("attention.head_count")?;
        let n_head_kv = opt_usize("attention.head_count_kv")?.unwrap_or(n_head);
        let n_ff = usize_key("feed_forward_length")?;
        let n_ctx_train = usize_key("context_length")?;
        if n_embd == 0 || n_layer == 0 || n_head == 0 || n_head_kv == 0 || n_ff == 0 {
            return Err(bad(name, "embedding length, block count, head counts and feed-forward length must be positive"));
        }
        if n_head % n_head_kv != 0 {
            return Err(bad(
                name,
                format!("{n_head} query heads are not a multiple of {n_head_kv} key/value heads"),
            ));
        }
        // Generous bounds: they only stop absurd values from driving allocations.
        if n_embd > 1 << 16 || n_layer > 1 << 10 || n_head > 1 << 10 || n_ff > 1 << 20 {
            return Err(bad(name, "hyperparameters out of range"));
        }
        let head_dim_k = opt_usize("attention.key_length")?.unwrap_or(n_embd / n_head);
        let head_dim_v = opt_usize("attention.value_length")?.unwrap_or(n_embd / n_head);
        if head_dim_k == 0 || head_dim_v == 0 || head_dim_k > 1024 || head_dim_v > 1024 {
            return Err(bad(
                name,
                format!("head dimensions {head_dim_k}/{head_dim_v} are out of range"),
            ));
        }
        let n_rot = opt_usize("rope.dimension_count")?.unwrap_or(head_dim_k);
        if n_rot == 0 || n_rot > head_dim_k || n_rot % 2 != 0 {
            return Err(bad(name, format!("rope.dimension_count {n_rot} must be even, positive and at most the head dimension {head_dim_k}")));
        }
        // Float hyperparameters that must be finite and above zero: a NaN, zero or negative
        // one turns every logit into NaN (or divides by zero), which would generate nothing.
        let positive = |suffix: &str, value: f32| -> Result<f32> {
            if value.is_finite() && value > 0.0 {
                Ok(value)
            } else {
                Err(bad(
                    name,
                    format!(
                        "{} is {value}; it must be a finite number above zero",
                        key(suffix)
                    ),
                ))
            }
        };
        let finite = |suffix: &str, value: f32| -> Result<f32> {
            if value.is_finite() {
                Ok(value)
            } else {
                Err(bad(
                    name,
                    format!("{} is {value}; it must be a finite number", key(suffix)),
                ))
            }
        };
        let rms_eps = opt_f32("attention.layer_norm_rms_epsilon")?.ok_or_else(|| {
            bad(
                name,
                format!("{} is missing", key("attention.layer_norm_rms_epsilon")),
            )
        })?;
        let rms_eps = positive("attention.layer_norm_rms_epsilon", rms_eps)?;
        let rope_freq_base = positive(
            "rope.freq_base",
            opt_f32("rope.freq_base")?.unwrap_or(10_000.0),
        )?;
        let factor = opt_f32("rope.scaling.factor")?
            .map(|f| positive("rope.scaling.factor", f))
            .transpose()?;
        let scaling_type = file.get_opt::<&str>(&key("rope.scaling.type"))?;
        let rope_scaling = match (scaling_type, factor) {
            (None | Some("none"), _) | (_, None) => match (scaling_type, factor) {
                (Some("linear"), None) | (Some("yarn"), None) => {
                    return Err(bad(
                        name,
                        "rope.scaling.type is set but rope.scaling.factor is missing",
                    ))
                }
                _ => RopeScaling::None,
            },
            (Some("linear"), Some(f)) => RopeScaling::Linear { factor: f },
            (Some("yarn"), Some(f)) => RopeScaling::Yarn {
                factor: f,
                original_context: match opt_usize("rope.scaling.original_context_length")? {
                    None => n_ctx_train,
                    Some(0) => {
                        return Err(bad(
                            name,
                            format!(
                                "{} is 0; it must be positive",
                                key("rope.scaling.original_context_length")
                            ),
                        ))
                    }
                    Some(n) => n,
                },
                ext_factor: finite(
                    "rope.scaling.yarn_ext_factor",
                    opt_f32("rope.scaling.yarn_ext_factor")?.unwrap_or(1.0),
                )?,
                attn_factor: positive(
                    "rope.scaling.yarn_attn_factor",
                    opt_f32("rope.scaling.yarn_attn_factor")?.unwrap_or(1.0),
                )?,
                beta_fast: positive(
                    "rope.scaling.yarn_beta_fast",
                    opt_f32("rope.scaling.yarn_beta_fast")?.unwrap_or(32.0),
                )?,
                beta_slow: positive(
                    "rope.scaling.yarn_beta_slow",
                    opt_f32("rope.scaling.yarn_beta_slow")?.unwrap_or(1.0),
                )?,
            },
            (Some(other), _) => {
                return Err(bad(
                    name,
                    format!("rope.scaling.type `{other}` is not supported (none, linear, yarn)"),
                ))
            }
        };
        let sliding_window = match arch {
            Arch::Mistral => opt_usize("attention.sliding_window")?.filter(|&w| w > 0),
            _ => None,
        };
        Ok(Hparams {
            arch,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_ff,
            n_vocab: 0,
            n_ctx_train,
            rms_eps,
            rope_freq_base,
            n_rot,
            rope_scaling,
            sliding_window,
        })
    }
}
