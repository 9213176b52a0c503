//! Hyperparameters: the ones every architecture has ([`Hparams`]), and [`Reader`], which
//! reads `{arch}.*` keys with the spec's defaults and the checks that keep a file from
//! computing NaN (an architecture reads its own extra keys with it).

use gguf_format::GgufFile;

use crate::embed::Pooling;
use crate::error::{ModelError, Result};

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
    /// YaRN. llama.cpp reads only these two keys: the file's `rope.scaling.yarn_ext_factor`,
    /// `yarn_attn_factor` and `yarn_beta_fast/slow` are written by its converter but never
    /// read by its loader, which takes 1, its own magnitude correction, 32 and 1 (see
    /// `ops::Rope::for_model`); so do we.
    Yarn {
        /// `rope.scaling.factor`.
        factor: f32,
        /// `rope.scaling.original_context_length`.
        original_context: usize,
    },
}

/// The hyperparameters every architecture has; each architecture keeps its own extras.
#[derive(Debug, Clone, PartialEq)]
pub struct Hparams {
    /// `general.architecture`.
    pub arch: &'static str,
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
    /// Epsilon of the normalisations (RMSNorm or LayerNorm, as the architecture uses).
    pub norm_eps: f32,
    /// RoPE base frequency (of the global-attention layers where they differ).
    pub rope_freq_base: f32,
    /// Dimensions of each head that RoPE rotates.
    pub n_rot: usize,
    /// RoPE scaling.
    pub rope_scaling: RopeScaling,
    /// The attention window of the sliding-window layers, if any.
    pub sliding_window: Option<usize>,
    /// Per layer: its attention window (`None`: it attends to the whole context). Its KV
    /// cache keeps only the window.
    pub layer_windows: Vec<Option<usize>>,
    /// Whether attention is causal: true for the decoders, BERT's `attention.causal` (false in
    /// BERT files: every token also sees the tokens after it; llama.cpp's default is true).
    pub causal: bool,
    /// How [`Session::embed`](crate::Session::embed) pools token embeddings by default
    /// (`pooling_type`; without the key [`Pooling::None`], as llama.cpp).
    pub pooling: Pooling,
}

impl Hparams {
    /// Key and value widths of one position in the KV cache.
    pub(crate) fn kv_widths(&self) -> (usize, usize) {
        (
            self.n_head_kv * self.head_dim_k,
            self.n_head_kv * self.head_dim_v,
        )
    }
}

/// Reads `{arch}.*` keys of a file named `name` in errors.
pub(crate) struct Reader<'f, 'a> {
    pub file: &'f GgufFile<'a>,
    pub name: &'f str,
    pub arch: &'static str,
}

impl Reader<'_, '_> {
    /// An error about the hyperparameters of this file.
    pub fn error(&self, message: impl Into<String>) -> ModelError {
        ModelError::Hyperparameters {
            file: self.name.to_string(),
            message: message.into(),
        }
    }

    /// `{arch}.{suffix}`.
    pub fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    /// A required unsigned key.
    pub fn usize(&self, suffix: &str) -> Result<usize> {
        Ok(self.file.get_usize(&self.key(suffix))?)
    }

    /// A required size: above zero and at most `max` (bounds that stop absurd values from
    /// driving allocations).
    pub fn size(&self, suffix: &str, max: usize) -> Result<usize> {
        let n = self.usize(suffix)?;
        if n == 0 || n > max {
            return Err(self.error(format!(
                "{} is {n}; it must be 1 to {max}",
                self.key(suffix)
            )));
        }
        Ok(n)
    }

    /// An optional unsigned key.
    pub fn opt_usize(&self, suffix: &str) -> Result<Option<usize>> {
        let key = self.key(suffix);
        match self.file.value(&key) {
            None => Ok(None),
            Some(_) => Ok(Some(self.file.get_usize(&key)?)),
        }
    }

    /// An optional boolean key.
    pub fn opt_bool(&self, suffix: &str) -> Result<Option<bool>> {
        Ok(self.file.get_opt::<bool>(&self.key(suffix))?)
    }

    /// An optional float key.
    pub fn opt_f32(&self, suffix: &str) -> Result<Option<f32>> {
        Ok(self.file.get_opt::<f32>(&self.key(suffix))?)
    }

    /// `value`, if it is finite and above zero: a NaN, zero or negative epsilon, base or
    /// factor turns every logit into NaN (or divides by zero), which would generate nothing.
    pub fn positive(&self, suffix: &str, value: f32) -> Result<f32> {
        if value.is_finite() && value > 0.0 {
            Ok(value)
        } else {
            Err(self.error(format!(
                "{} is {value}; it must be a finite number above zero",
                self.key(suffix)
            )))
        }
    }

    /// An optional float key that must be [`Reader::positive`], or `default`.
    pub fn positive_or(&self, suffix: &str, default: f32) -> Result<f32> {
        self.positive(suffix, self.opt_f32(suffix)?.unwrap_or(default))
    }

    /// An optional float key that must be finite, or `default`.
    pub fn finite_or(&self, suffix: &str, default: f32) -> Result<f32> {
        let value = self.opt_f32(suffix)?.unwrap_or(default);
        if value.is_finite() {
            Ok(value)
        } else {
            Err(self.error(format!(
                "{} is {value}; it must be a finite number",
                self.key(suffix)
            )))
        }
    }

    /// A required float key that must be [`Reader::positive`].
    pub fn required_positive(&self, suffix: &str) -> Result<f32> {
        let value = self
            .opt_f32(suffix)?
            .ok_or_else(|| self.error(format!("{} is missing", self.key(suffix))))?;
        self.positive(suffix, value)
    }

    /// The hyperparameters every architecture has, with the spec's defaults: heads of
    /// `n_embd / n_head` dimensions, `n_head_kv = n_head`, RoPE over the whole head at base
    /// 10,000, no sliding window. `norm_eps_key` is `attention.layer_norm_rms_epsilon` or
    /// `attention.layer_norm_epsilon`.
    pub fn common(&self, norm_eps_key: &str) -> Result<Hparams> {
        // Generous bounds: they only stop absurd values from driving allocations.
        let n_embd = self.size("embedding_length", 1 << 16)?;
        let n_layer = self.size("block_count", 1 << 10)?;
        let n_head = self.size("attention.head_count", 1 << 10)?;
        let n_head_kv = match self.opt_usize("attention.head_count_kv")? {
            None => n_head,
            Some(_) => self.size("attention.head_count_kv", 1 << 10)?,
        };
        let n_ff = self.size("feed_forward_length", 1 << 20)?;
        let n_ctx_train = self.usize("context_length")?;
        if n_ctx_train == 0 {
            return Err(self.error(format!("{} is 0", self.key("context_length"))));
        }
        if n_head % n_head_kv != 0 {
            return Err(self.error(format!(
                "{} {n_head} is not a multiple of {} {n_head_kv}",
                self.key("attention.head_count"),
                self.key("attention.head_count_kv"),
            )));
        }
        let head_dim = |suffix: &str| -> Result<usize> {
            let given = self.opt_usize(suffix)?;
            let dim = given.unwrap_or(n_embd / n_head);
            if dim == 0 || dim > 1024 {
                let derived = match given {
                    Some(_) => String::new(),
                    None => format!(
                        " ({} {n_embd} / {} {n_head})",
                        self.key("embedding_length"),
                        self.key("attention.head_count")
                    ),
                };
                return Err(self.error(format!(
                    "{} is {dim}{derived}; it must be 1 to 1024",
                    self.key(suffix)
                )));
            }
            Ok(dim)
        };
        let head_dim_k = head_dim("attention.key_length")?;
        let head_dim_v = head_dim("attention.value_length")?;
        let n_rot = self
            .opt_usize("rope.dimension_count")?
            .unwrap_or(head_dim_k);
        if n_rot == 0 || n_rot > head_dim_k || n_rot % 2 != 0 {
            return Err(self.error(format!(
                "{} {n_rot} must be even, positive and at most the head dimension {head_dim_k}",
                self.key("rope.dimension_count")
            )));
        }
        let norm_eps = self.required_positive(norm_eps_key)?;
        let rope_freq_base = self.positive_or("rope.freq_base", 10_000.0)?;
        Ok(Hparams {
            arch: self.arch,
            n_embd,
            n_layer,
            n_head,
            n_head_kv,
            head_dim_k,
            head_dim_v,
            n_ff,
            n_vocab: 0,
            n_ctx_train,
            norm_eps,
            rope_freq_base,
            n_rot,
            rope_scaling: self.rope_scaling(n_ctx_train)?,
            sliding_window: None,
            layer_windows: vec![None; n_layer],
            causal: true,
            pooling: self.pooling()?,
        })
    }

    /// `pooling_type`, llama.cpp's `enum llama_pooling_type` (0 none, 1 mean, 2 CLS, 3 last,
    /// 4 rank); [`Pooling::None`] without the key or for a negative value (llama.cpp's -1,
    /// "unspecified").
    fn pooling(&self) -> Result<Pooling> {
        let key = self.key("pooling_type");
        let Some(raw) = self.file.value(&key) else {
            return Ok(Pooling::None);
        };
        let value = raw.as_integer().ok_or_else(|| {
            self.error(format!(
                "{key} is a {}, not an integer",
                raw.value_type().name()
            ))
        })?;
        if value < 0 {
            return Ok(Pooling::None);
        }
        Pooling::from_id(i64::try_from(value).unwrap_or(i64::MAX)).ok_or_else(|| {
            self.error(format!(
                "{} is {value}; llama.cpp's pooling types are 0 (none), 1 (mean), 2 (cls), \
                 3 (last) and 4 (rank)",
                self.key("pooling_type")
            ))
        })
    }

    /// `rope.scaling.*`.
    fn rope_scaling(&self, n_ctx_train: usize) -> Result<RopeScaling> {
        let factor = self
            .opt_f32("rope.scaling.factor")?
            .map(|f| self.positive("rope.scaling.factor", f))
            .transpose()?;
        let scaling_type = self.file.get_opt::<&str>(&self.key("rope.scaling.type"))?;
        Ok(match (scaling_type, factor) {
            (None | Some("none"), _) => RopeScaling::None,
            (Some("linear" | "yarn"), None) => {
                return Err(
                    self.error("rope.scaling.type is set but rope.scaling.factor is missing")
                )
            }
            (Some("linear"), Some(factor)) => RopeScaling::Linear { factor },
            (Some("yarn"), Some(factor)) => RopeScaling::Yarn {
                factor,
                original_context: match self.opt_usize("rope.scaling.original_context_length")? {
                    None => n_ctx_train,
                    Some(0) => {
                        return Err(self.error(format!(
                            "{} is 0; it must be positive",
                            self.key("rope.scaling.original_context_length")
                        )))
                    }
                    Some(n) => n,
                },
            },
            (Some(other), _) => {
                return Err(self.error(format!(
                    "rope.scaling.type `{other}` is not supported (none, linear, yarn)"
                )))
            }
        })
    }

    /// Per layer, whether it uses the sliding window: `attention.sliding_window_pattern` as an
    /// array of bools, or as a period `n` (each `n`-th layer global, the others local), or
    /// `default_period` without the key, as llama.cpp's `set_swa_pattern`.
    pub fn swa_layers(&self, n_layer: usize, default_period: usize) -> Result<Vec<bool>> {
        let key = self.key("attention.sliding_window_pattern");
        if let Some(gguf_format::Value::Array(a)) = self.file.value(&key) {
            let flags: Vec<bool> = self.file.get_array::<bool>(&key)?.collect();
            if flags.len() != n_layer {
                return Err(self.error(format!(
                    "{key} has {} entries for {n_layer} layers",
                    a.len()
                )));
            }
            return Ok(flags);
        }
        let period = self
            .opt_usize("attention.sliding_window_pattern")?
            .unwrap_or(default_period);
        Ok((0..n_layer)
            .map(|il| period == 0 || il % period < period - 1)
            .collect())
    }

    /// `attention.sliding_window`, if set and above zero.
    pub fn sliding_window(&self) -> Result<Option<usize>> {
        Ok(self
            .opt_usize("attention.sliding_window")?
            .filter(|&w| w > 0))
    }
}
