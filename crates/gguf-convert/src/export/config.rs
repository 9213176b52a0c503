//! `config.json` from a GGUF file's hyperparameters: the keys `transformers` builds the model
//! from, named so that `convert_hf_to_gguf.py` reads back the same GGUF values.

use gguf_format::tensor_names::TensorName as T;
use gguf_format::{GgufFile, Value as GgufValue};
use serde_json::{json, Map, Value};

use super::{Arch, ExportDtype};
use crate::error::{Error, Result};

/// The hyperparameters an export needs, read once.
#[derive(Debug, Clone)]
pub(crate) struct Hparams {
    pub arch_name: String,
    pub n_embd: usize,
    pub n_layer: usize,
    pub n_ff: usize,
    pub n_head: usize,
    pub n_head_kv: usize,
    /// `attention.key_length`, or `n_embd / n_head`.
    pub head_dim: usize,
    /// Whether the file gives `attention.key_length`.
    pub head_dim_given: bool,
    /// `rope.dimension_count`, or `head_dim`.
    pub n_rot: usize,
    pub n_ctx: usize,
    pub vocab_size: usize,
}

/// A float of the file as the shortest decimal that reads back as the same `f32` (so `1e-5`
/// stored as f32 becomes 1e-05, not 9.999999747378752e-06); `f64` values as they are.
pub(crate) fn float_value(v: GgufValue<'_>) -> Option<f64> {
    match v {
        GgufValue::F32(x) => format!("{x}").parse().ok(),
        GgufValue::F64(x) => Some(x),
        other => other.as_integer().map(|i| i as f64),
    }
}

/// JSON of a float, always as a float (`10000.0`): transformers' configuration classes check
/// that float fields hold floats.
fn num(x: f64) -> Value {
    json!(x)
}

struct Meta<'a, 'f> {
    file: &'a GgufFile<'f>,
    arch: &'a str,
}

impl Meta<'_, '_> {
    fn key(&self, suffix: &str) -> String {
        format!("{}.{suffix}", self.arch)
    }

    fn uint(&self, suffix: &str) -> Result<Option<usize>> {
        let key = self.key(suffix);
        match self.file.value(&key) {
            None => Ok(None),
            Some(v) => v
                .as_integer()
                .and_then(|i| usize::try_from(i).ok())
                .map(Some)
                .ok_or_else(|| {
                    Error::Unsupported(format!(
                        "{key} is a {}, not a non-negative integer (an export needs one value for \
                         every layer)",
                        v.value_type()
                    ))
                }),
        }
    }

    fn required(&self, suffix: &str) -> Result<usize> {
        self.uint(suffix)?
            .ok_or_else(|| Error::Unsupported(format!("{} is missing", self.key(suffix))))
    }

    fn float(&self, suffix: &str) -> Option<f64> {
        self.file.value(&self.key(suffix)).and_then(float_value)
    }

    fn string(&self, suffix: &str) -> Option<&str> {
        self.file.value(&self.key(suffix)).and_then(|v| v.as_str())
    }
}

impl Hparams {
    pub(crate) fn read(file: &GgufFile, arch: Arch) -> Result<Hparams> {
        let arch_name = file.architecture()?.to_string();
        let m = Meta {
            file,
            arch: &arch_name,
        };
        let n_embd = m.required("embedding_length")?;
        let n_layer = m.required("block_count")?;
        let n_ff = m.required("feed_forward_length")?;
        let n_head = m.required("attention.head_count")?;
        let n_head_kv = m.uint("attention.head_count_kv")?.unwrap_or(n_head);
        if n_head == 0 || n_head_kv == 0 || n_embd == 0 {
            return Err(Error::Unsupported(format!(
                "{arch_name}: zero heads or embedding length"
            )));
        }
        let key_length = m.uint("attention.key_length")?;
        let head_dim = key_length.unwrap_or(n_embd / n_head);
        if let Some(v) = m.uint("attention.value_length")? {
            if v != head_dim {
                return Err(Error::Unsupported(format!(
                    "{arch_name}: attention.value_length {v} differs from the key length \
                     {head_dim}, which Hugging Face's {} has no setting for",
                    arch.hf_class()
                )));
            }
        }
        let n_rot = m.uint("rope.dimension_count")?.unwrap_or(head_dim);
        let n_ctx = m.uint("context_length")?.unwrap_or(2048);
        let vocab_size = match file.tensor(T::TokenEmbd.weight()) {
            Some(t) if t.shape().len() == 2 => t.shape()[1] as usize,
            _ => {
                return Err(Error::Unsupported(
                    "the file has no 2-D token_embd.weight".into(),
                ))
            }
        };
        Ok(Hparams {
            arch_name,
            n_embd,
            n_layer,
            n_ff,
            n_head,
            n_head_kv,
            head_dim,
            head_dim_given: key_length.is_some(),
            n_rot,
            n_ctx,
            vocab_size,
        })
    }
}

/// A special token id of the tokenizer metadata.
fn token_id(file: &GgufFile, what: &str) -> Option<u64> {
    file.value(&format!("tokenizer.ggml.{what}_token_id"))
        .and_then(|v| v.as_integer())
        .and_then(|i| u64::try_from(i).ok())
}

/// The values of an F32 tensor (the rope factor tables), if it is one.
fn f32_tensor(file: &GgufFile, name: &str) -> Option<Vec<f64>> {
    let info = file.tensor(name)?;
    let values = gguf_quant::dequantize(
        info.ggml_type,
        file.tensor_data(info),
        info.element_count() as usize,
    )
    .ok()?;
    Some(
        values
            .iter()
            .map(|x| format!("{x}").parse().unwrap_or(f64::from(*x)))
            .collect(),
    )
}

/// The Llama 3 RoPE scaling that gives the factors of `rope_freqs.weight`, if one of the
/// usual settings does (low/high frequency factors 1 and 4, original context 8192, the
/// factor the table's largest value).
fn llama3_rope_scaling(factors: &[f64], theta: f64, n_rot: usize) -> Option<Value> {
    let factor = factors.iter().cloned().fold(f64::MIN, f64::max);
    let (low, high, old_ctx) = (1.0f64, 4.0f64, 8192.0f64);
    let low_wavelen = old_ctx / low;
    let high_wavelen = old_ctx / high;
    if factors.len() * 2 != n_rot {
        return None;
    }
    for (i, &got) in factors.iter().enumerate() {
        let freq = 1.0 / theta.powf((2 * i) as f64 / n_rot as f64);
        let wavelen = 2.0 * std::f64::consts::PI / freq;
        let want = if wavelen < high_wavelen {
            1.0
        } else if wavelen > low_wavelen {
            factor
        } else {
            let smooth = (old_ctx / wavelen - low) / (high - low);
            1.0 / ((1.0 - smooth) / factor + smooth)
        };
        if (want - got).abs() > 1e-3 * want.abs().max(1.0) {
            return None;
        }
    }
    Some(json!({
        "rope_type": "llama3",
        "factor": num(factor),
        "low_freq_factor": num(low),
        "high_freq_factor": num(high),
        "original_max_position_embeddings": old_ctx as i64,
    }))
}

/// `rope_scaling` from `rope.scaling.*` (linear, YaRN); `None` when there is none.
fn rope_scaling_keys(m: &Meta<'_, '_>, warnings: &mut Vec<String>) -> Option<Value> {
    let ty = m.string("rope.scaling.type");
    let factor = m
        .float("rope.scaling.factor")
        .or_else(|| m.float("rope.scale_linear"));
    match (ty, factor) {
        (Some("linear"), Some(f)) | (None, Some(f)) if f != 1.0 => {
            Some(json!({"rope_type": "linear", "factor": num(f)}))
        }
        (Some("yarn"), Some(f)) => {
            let mut o = Map::new();
            o.insert("rope_type".into(), json!("yarn"));
            o.insert("factor".into(), num(f));
            if let Ok(Some(n)) = m.uint("rope.scaling.original_context_length") {
                o.insert("original_max_position_embeddings".into(), json!(n));
            }
            for (key, hf) in [
                ("rope.scaling.yarn_ext_factor", "extrapolation_factor"),
                ("rope.scaling.yarn_attn_factor", "attention_factor"),
                ("rope.scaling.yarn_beta_fast", "beta_fast"),
                ("rope.scaling.yarn_beta_slow", "beta_slow"),
            ] {
                if let Some(v) = m.float(key) {
                    o.insert(hf.into(), num(v));
                }
            }
            Some(Value::Object(o))
        }
        (Some("none"), _) | (None, _) | (Some("linear"), _) => None,
        (Some(other), _) => {
            warnings.push(format!(
                "{}.rope.scaling.type '{other}' is not carried over",
                m.arch
            ));
            None
        }
    }
}

/// `config.json` for the file.
pub(crate) fn config_json(
    file: &GgufFile,
    arch: Arch,
    hp: &Hparams,
    dtype: ExportDtype,
    tied: bool,
    warnings: &mut Vec<String>,
) -> Result<Value> {
    if arch == Arch::Bert {
        return bert_config(file, hp, dtype);
    }
    let m = Meta {
        file,
        arch: &hp.arch_name,
    };
    let mut c = Map::new();
    let mut put = |k: &str, v: Value| {
        c.insert(k.to_string(), v);
    };
    put("architectures", json!([arch.hf_class()]));
    put("model_type", json!(arch.model_type()));
    put("hidden_size", json!(hp.n_embd));
    put("intermediate_size", json!(hp.n_ff));
    put("num_hidden_layers", json!(hp.n_layer));
    put("num_attention_heads", json!(hp.n_head));
    put("num_key_value_heads", json!(hp.n_head_kv));
    let natural_head_dim = hp.n_embd / hp.n_head;
    match arch {
        Arch::Gemma | Arch::Gemma2 | Arch::Gemma3 | Arch::Qwen3 | Arch::Qwen3Moe => {
            put("head_dim", json!(hp.head_dim))
        }
        Arch::Phi3 => {
            if hp.head_dim != natural_head_dim {
                return Err(Error::Unsupported(format!(
                    "phi3: head size {} is not hidden_size / num_attention_heads ({natural_head_dim})",
                    hp.head_dim
                )));
            }
        }
        _ => {
            if hp.head_dim_given || hp.head_dim != natural_head_dim {
                put("head_dim", json!(hp.head_dim));
            }
        }
    }
    if !matches!(arch, Arch::Phi3) && hp.n_rot != hp.head_dim {
        return Err(Error::Unsupported(format!(
            "{}: rope.dimension_count {} differs from the head size {} (partial rotary \
             embeddings are not exported for this architecture)",
            hp.arch_name, hp.n_rot, hp.head_dim
        )));
    }
    put("max_position_embeddings", json!(hp.n_ctx));
    let eps_default = if arch.is_gemma() { 1e-6 } else { 1e-5 };
    put(
        "rms_norm_eps",
        json!(m
            .float("attention.layer_norm_rms_epsilon")
            .unwrap_or(eps_default)),
    );
    let theta_default = if arch == Arch::Gemma3 {
        1_000_000.0
    } else {
        10_000.0
    };
    let theta = m.float("rope.freq_base").unwrap_or(theta_default);
    put("rope_theta", num(theta));
    put("vocab_size", json!(hp.vocab_size));
    for (what, key) in [
        ("bos", "bos_token_id"),
        ("eos", "eos_token_id"),
        ("padding", "pad_token_id"),
    ] {
        // `null` rather than the configuration class's default (Phi-3's pad is 32000).
        let id = token_id(file, what).filter(|&id| id < hp.vocab_size as u64);
        put(key, json!(id));
    }
    put("tie_word_embeddings", json!(tied));
    put("torch_dtype", json!(dtype.torch_name()));
    put("use_cache", json!(true));
    put("initializer_range", json!(0.02));
    put("attention_dropout", json!(0.0));

    let mut rope_scaling = rope_scaling_keys(&m, warnings);
    if let Some(factors) = f32_tensor(file, T::RopeFreqs.weight()) {
        match llama3_rope_scaling(&factors, theta, hp.n_rot) {
            Some(v) => rope_scaling = Some(v),
            None => warnings.push(
                "rope_freqs.weight matches no Llama 3 RoPE scaling with the usual settings: \
                 left out (long contexts will differ)"
                    .into(),
            ),
        }
    }

    match arch {
        Arch::Mixtral => {
            put("hidden_act", json!("silu"));
            put("num_local_experts", json!(m.required("expert_count")?));
            put(
                "num_experts_per_tok",
                json!(m.required("expert_used_count")?),
            );
            put("router_aux_loss_coef", json!(0.02));
            put("output_router_logits", json!(false));
            put("sliding_window", Value::Null);
        }
        Arch::Llama | Arch::Mistral => {
            put("hidden_act", json!("silu"));
            put("attention_bias", json!(false));
            put("mlp_bias", json!(false));
            put("pretraining_tp", json!(1));
            if arch == Arch::Mistral {
                put("sliding_window", json!(m.uint("attention.sliding_window")?));
            } else if m.uint("attention.sliding_window")?.is_some() {
                warnings.push(format!(
                    "{}.attention.sliding_window is not carried over (llama has none)",
                    hp.arch_name
                ));
            }
        }
        Arch::Qwen2 | Arch::Qwen3 => {
            put("hidden_act", json!("silu"));
            if arch == Arch::Qwen3 {
                put("attention_bias", json!(false));
            }
            put("use_sliding_window", json!(false));
            put("sliding_window", Value::Null);
            put("max_window_layers", json!(hp.n_layer));
        }
        Arch::Qwen2Moe | Arch::Qwen3Moe | Arch::Olmoe => {
            put("hidden_act", json!("silu"));
            put("num_experts", json!(m.required("expert_count")?));
            put(
                "num_experts_per_tok",
                json!(m.required("expert_used_count")?),
            );
            // Each expert's width: OLMoE's experts are `intermediate_size` wide.
            let expert_ff = m.uint("expert_feed_forward_length")?;
            if arch == Arch::Olmoe {
                put("intermediate_size", json!(expert_ff.unwrap_or(hp.n_ff)));
                put("clip_qkv", Value::Null);
                put("attention_bias", json!(false));
            } else {
                let expert_ff = match expert_ff {
                    Some(n) => n,
                    // llama.cpp's default for qwen2moe/qwen3moe.
                    None => hp.n_ff / m.required("expert_used_count")?.max(1),
                };
                put("moe_intermediate_size", json!(expert_ff));
                put("decoder_sparse_step", json!(1));
                put("mlp_only_layers", json!([]));
                put("use_sliding_window", json!(false));
                put("sliding_window", Value::Null);
                put("max_window_layers", json!(hp.n_layer));
            }
            if arch == Arch::Qwen2Moe {
                let shared = m.uint("expert_shared_feed_forward_length")?;
                put(
                    "shared_expert_intermediate_size",
                    json!(shared.unwrap_or(0)),
                );
                put(
                    "qkv_bias",
                    json!(file.tensor("blk.0.attn_q.bias").is_some()),
                );
            }
            if arch == Arch::Qwen3Moe {
                put("attention_bias", json!(false));
            }
            // llama.cpp renormalises the chosen weights of Qwen3-MoE only.
            put("norm_topk_prob", json!(arch == Arch::Qwen3Moe));
            put("output_router_logits", json!(false));
            put("router_aux_loss_coef", json!(0.001));
        }
        Arch::Gemma => {
            put("hidden_act", json!("gelu_pytorch_tanh"));
            put("hidden_activation", json!("gelu_pytorch_tanh"));
            put("attention_bias", json!(false));
        }
        Arch::Gemma2 | Arch::Gemma3 => {
            put("hidden_activation", json!("gelu_pytorch_tanh"));
            put("attention_bias", json!(false));
            let gemma2 = arch == Arch::Gemma2;
            // llama.cpp's rule (after gemma_pytorch): the 27B models scale queries by the
            // embedding per head, the others by the head size.
            let is_27b = (gemma2 && hp.n_layer == 46) || (!gemma2 && hp.n_layer == 62);
            put(
                "query_pre_attn_scalar",
                json!(if is_27b {
                    natural_head_dim
                } else {
                    hp.head_dim
                }),
            );
            let window = m.uint("attention.sliding_window")?;
            let window = if gemma2 {
                Some(window.unwrap_or(4096))
            } else {
                window
            };
            let swa = swa_layers(&m, hp.n_layer, if gemma2 { 2 } else { 6 }, window.is_some())?;
            put("sliding_window", json!(window.unwrap_or(hp.n_ctx)));
            if let Some(p) = regular_period(&swa) {
                put("sliding_window_pattern", json!(p));
            }
            put(
                "layer_types",
                json!(swa
                    .iter()
                    .map(|&s| if s {
                        "sliding_attention"
                    } else {
                        "full_attention"
                    })
                    .collect::<Vec<_>>()),
            );
            if gemma2 {
                put(
                    "attn_logit_softcapping",
                    num(m.float("attn_logit_softcapping").unwrap_or(50.0)),
                );
                put(
                    "final_logit_softcapping",
                    num(m.float("final_logit_softcapping").unwrap_or(30.0)),
                );
                put("cache_implementation", json!("hybrid"));
            } else {
                put("attn_logit_softcapping", Value::Null);
                put(
                    "final_logit_softcapping",
                    m.float("final_logit_softcapping")
                        .filter(|v| *v != 0.0)
                        .map_or(Value::Null, num),
                );
                // Left out when the file has no value, so that transformers' default (10,000,
                // llama.cpp's too) applies and a reconversion writes no key the file lacked.
                if let Some(local) = m.float("rope.freq_base_swa") {
                    put("rope_local_base_freq", num(local));
                }
            }
        }
        Arch::Bert => unreachable!("handled above"),
        Arch::Phi3 => {
            put("hidden_act", json!("silu"));
            put("attention_bias", json!(false));
            put("resid_pdrop", json!(0.0));
            put("embd_pdrop", json!(0.0));
            let orig = m
                .uint("rope.scaling.original_context_length")?
                .unwrap_or(hp.n_ctx);
            put("original_max_position_embeddings", json!(orig));
            if hp.n_rot != hp.head_dim {
                put(
                    "partial_rotary_factor",
                    num((hp.n_rot * hp.n_head) as f64 / hp.n_embd as f64),
                );
            }
            let window = m.uint("attention.sliding_window")?.filter(|w| *w > 0);
            put("sliding_window", json!(window));
            let long = f32_tensor(file, T::RopeFactorsLong.weight());
            let short = f32_tensor(file, T::RopeFactorsShort.weight());
            match (long, short) {
                (Some(long), Some(short)) => {
                    rope_scaling = Some(json!({
                        "type": "longrope",
                        "rope_type": "longrope",
                        "long_factor": long.into_iter().map(num).collect::<Vec<_>>(),
                        "short_factor": short.into_iter().map(num).collect::<Vec<_>>(),
                    }));
                }
                (None, None) => {}
                _ => warnings.push(
                    "only one of rope_factors_long/short.weight: RoPE scaling left out".into(),
                ),
            }
        }
    }
    put("rope_scaling", rope_scaling.unwrap_or(Value::Null));
    Ok(Value::Object(c))
}

/// `config.json` of a `BertModel`.
fn bert_config(file: &GgufFile, hp: &Hparams, dtype: ExportDtype) -> Result<Value> {
    let m = Meta {
        file,
        arch: &hp.arch_name,
    };
    if hp.n_head_kv != hp.n_head || hp.head_dim != hp.n_embd / hp.n_head {
        return Err(Error::Unsupported(
            "bert: grouped or resized attention heads have no BertConfig setting".into(),
        ));
    }
    let type_vocab_size = match file.tensor(T::TokenTypes.weight()) {
        Some(t) if t.shape().len() == 2 => t.shape()[1] as usize,
        _ => file
            .value("tokenizer.ggml.token_type_count")
            .and_then(|v| v.as_integer())
            .map_or(2, |n| n as usize),
    };
    let mut c = Map::new();
    let mut put = |k: &str, v: Value| {
        c.insert(k.to_string(), v);
    };
    put("architectures", json!(["BertModel"]));
    put("model_type", json!("bert"));
    put("hidden_size", json!(hp.n_embd));
    put("intermediate_size", json!(hp.n_ff));
    put("num_hidden_layers", json!(hp.n_layer));
    put("num_attention_heads", json!(hp.n_head));
    put("max_position_embeddings", json!(hp.n_ctx));
    put(
        "layer_norm_eps",
        json!(m.float("attention.layer_norm_epsilon").unwrap_or(1e-12)),
    );
    put("vocab_size", json!(hp.vocab_size));
    put("type_vocab_size", json!(type_vocab_size));
    put("hidden_act", json!("gelu"));
    put("position_embedding_type", json!("absolute"));
    put("hidden_dropout_prob", json!(0.1));
    put("attention_probs_dropout_prob", json!(0.1));
    put("initializer_range", json!(0.02));
    let pad = token_id(file, "padding").filter(|&id| id < hp.vocab_size as u64);
    put("pad_token_id", json!(pad.unwrap_or(0)));
    put("torch_dtype", json!(dtype.torch_name()));
    Ok(Value::Object(c))
}

/// sentence-transformers' `modules.json`: the model, then its pooling module.
pub(crate) fn modules_json() -> Value {
    json!([
        {"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
        {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
    ])
}

/// `1_Pooling/config.json` for the file's `pooling_type` (1 mean, 2 CLS, 3 last token);
/// `None` for none or another type.
pub(crate) fn pooling_config(file: &GgufFile, hp: &Hparams) -> Option<Value> {
    let ty = file
        .value(&format!("{}.pooling_type", hp.arch_name))
        .and_then(|v| v.as_integer())?;
    let (mean, cls, last) = match ty {
        1 => (true, false, false),
        2 => (false, true, false),
        3 => (false, false, true),
        _ => return None,
    };
    Some(json!({
        "word_embedding_dimension": hp.n_embd,
        "pooling_mode_cls_token": cls,
        "pooling_mode_mean_tokens": mean,
        "pooling_mode_max_tokens": false,
        "pooling_mode_mean_sqrt_len_tokens": false,
        "pooling_mode_lasttoken": last,
    }))
}

/// Per layer, whether it uses the sliding window: `attention.sliding_window_pattern` as an
/// array of bools or as a period (every `n`-th layer global), or `default_period`; all `false`
/// when the model has no window.
fn swa_layers(
    m: &Meta<'_, '_>,
    n_layer: usize,
    default_period: usize,
    has_window: bool,
) -> Result<Vec<bool>> {
    if !has_window {
        return Ok(vec![false; n_layer]);
    }
    let key = m.key("attention.sliding_window_pattern");
    if let Some(GgufValue::Array(a)) = m.file.value(&key) {
        let flags: Vec<bool> = m.file.get_array::<bool>(&key)?.collect();
        if flags.len() != n_layer {
            return Err(Error::Unsupported(format!(
                "{key} has {} entries for {n_layer} layers",
                a.len()
            )));
        }
        return Ok(flags);
    }
    let period = m
        .uint("attention.sliding_window_pattern")?
        .unwrap_or(default_period);
    Ok((0..n_layer)
        .map(|il| period == 0 || il % period < period - 1)
        .collect())
}

/// The period `p` (every `p`-th layer global) that gives `swa`, if one does.
fn regular_period(swa: &[bool]) -> Option<usize> {
    (1..=swa.len().max(1)).find(|&p| swa.iter().enumerate().all(|(il, &s)| s == (il % p < p - 1)))
}

/// `generation_config.json`: the special ids of `config.json`.
pub(crate) fn generation_config(config: &Value) -> Value {
    let mut g = Map::new();
    for key in ["bos_token_id", "eos_token_id", "pad_token_id"] {
        if let Some(v) = config.get(key) {
            g.insert(key.into(), v.clone());
        }
    }
    Value::Object(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods() {
        assert_eq!(
            regular_period(&[true, true, false, true, true, false]),
            Some(3)
        );
        assert_eq!(regular_period(&[true, false]), Some(2));
        assert_eq!(regular_period(&[false, true]), None);
        assert_eq!(regular_period(&[false, false]), Some(1));
    }

    #[test]
    fn llama3_factors_are_recognised() {
        // Llama 3.2 1B: theta 500000, head 64, factor 32.
        let (theta, n_rot, factor) = (500_000.0f64, 64usize, 32.0f64);
        let factors: Vec<f64> = (0..n_rot / 2)
            .map(|i| {
                let freq = 1.0 / theta.powf((2 * i) as f64 / n_rot as f64);
                let wavelen = 2.0 * std::f64::consts::PI / freq;
                if wavelen < 2048.0 {
                    1.0
                } else if wavelen > 8192.0 {
                    factor
                } else {
                    let smooth = (8192.0 / wavelen - 1.0) / 3.0;
                    1.0 / ((1.0 - smooth) / factor + smooth)
                }
            })
            .collect();
        let v = llama3_rope_scaling(&factors, theta, n_rot).unwrap();
        assert_eq!(v["factor"], 32.0);
        assert_eq!(v["rope_type"], "llama3");
        assert!(
            llama3_rope_scaling(&vec![1.0; 32], theta, n_rot).is_some_and(|v| v["factor"] == 1.0)
        );
        assert!(llama3_rope_scaling(&vec![2.0; 32], theta, n_rot).is_none());
    }
}
