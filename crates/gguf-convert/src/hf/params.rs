//! `config.json`'s hyperparameters and the `{arch}.*` keys every text model gets from them
//! (`TextModel.set_gguf_parameters` of `convert_hf_to_gguf.py`).

use gguf_format::{GgufBuilder, OwnedArray, OwnedValue, ValueType};
use serde_json::{Map, Value};

use crate::check::Origins;
use crate::error::{Error, Result};

/// The hyperparameters: `config.json` with its `text_config` (multimodal checkpoints) merged in
/// at the top, as the converter merges it.
#[derive(Debug, Clone)]
pub(crate) struct Hparams {
    map: Map<String, Value>,
    /// `rope_parameters` (or `rope_scaling`), completed from the top-level rope keys.
    rope: Map<String, Value>,
}

fn bad(key: &str, what: &str) -> Error {
    Error::Unsupported(format!("config.json: {key} {what}"))
}

/// A default of a Hugging Face config class.
#[derive(Debug, Clone, Copy)]
enum Default {
    Int(i64),
    Float(f64),
    Bool(bool),
    Null,
}

/// The defaults `transformers`' config classes (5.x) give the keys the converter reads, by
/// `model_type`: the reference reads `AutoConfig.from_pretrained(dir).to_dict()`, so a key
/// missing from `config.json` has its class default there (generated from
/// `CONFIG_MAPPING[model_type]().to_dict()`).
const DEFAULTS: &[(&str, &[(&str, Default)])] = &[
    (
        "llama",
        &[
            ("max_position_embeddings", Default::Int(2048)),
            ("hidden_size", Default::Int(4096)),
            ("intermediate_size", Default::Int(11008)),
            ("num_hidden_layers", Default::Int(32)),
            ("num_attention_heads", Default::Int(32)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("vocab_size", Default::Int(32000)),
            ("rope_theta", Default::Float(10000.0)),
        ],
    ),
    (
        "mistral",
        &[
            ("max_position_embeddings", Default::Int(131072)),
            ("hidden_size", Default::Int(4096)),
            ("intermediate_size", Default::Int(14336)),
            ("num_hidden_layers", Default::Int(32)),
            ("num_attention_heads", Default::Int(32)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("sliding_window", Default::Int(4096)),
            ("vocab_size", Default::Int(32000)),
            ("rope_theta", Default::Float(10000.0)),
        ],
    ),
    (
        "qwen2",
        &[
            ("max_position_embeddings", Default::Int(32768)),
            ("hidden_size", Default::Int(4096)),
            ("intermediate_size", Default::Int(22016)),
            ("num_hidden_layers", Default::Int(32)),
            ("num_attention_heads", Default::Int(32)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("sliding_window", Default::Null),
            ("vocab_size", Default::Int(151936)),
            ("rope_theta", Default::Float(10000.0)),
        ],
    ),
    (
        "qwen3",
        &[
            ("max_position_embeddings", Default::Int(32768)),
            ("hidden_size", Default::Int(4096)),
            ("intermediate_size", Default::Int(22016)),
            ("num_hidden_layers", Default::Int(32)),
            ("num_attention_heads", Default::Int(32)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("sliding_window", Default::Null),
            ("vocab_size", Default::Int(151936)),
            ("rope_theta", Default::Float(10000.0)),
        ],
    ),
    (
        "gemma",
        &[
            ("max_position_embeddings", Default::Int(8192)),
            ("hidden_size", Default::Int(3072)),
            ("intermediate_size", Default::Int(24576)),
            ("num_hidden_layers", Default::Int(28)),
            ("num_attention_heads", Default::Int(16)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("vocab_size", Default::Int(256000)),
            ("rope_theta", Default::Float(10000.0)),
        ],
    ),
    (
        "gemma2",
        &[
            ("max_position_embeddings", Default::Int(8192)),
            ("hidden_size", Default::Int(2304)),
            ("intermediate_size", Default::Int(9216)),
            ("num_hidden_layers", Default::Int(26)),
            ("num_attention_heads", Default::Int(8)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("sliding_window", Default::Int(4096)),
            ("final_logit_softcapping", Default::Float(30.0)),
            ("attn_logit_softcapping", Default::Float(50.0)),
            ("vocab_size", Default::Int(256000)),
            ("rope_theta", Default::Float(10000.0)),
        ],
    ),
    (
        "gemma3_text",
        &[
            ("max_position_embeddings", Default::Int(131072)),
            ("hidden_size", Default::Int(2304)),
            ("intermediate_size", Default::Int(9216)),
            ("num_hidden_layers", Default::Int(26)),
            ("num_attention_heads", Default::Int(8)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("sliding_window", Default::Int(4096)),
            ("final_logit_softcapping", Default::Null),
            ("attn_logit_softcapping", Default::Null),
            ("vocab_size", Default::Int(262208)),
            ("rope_theta", Default::Float(1000000.0)),
            ("rope_local_base_freq", Default::Float(10000.0)),
        ],
    ),
    (
        "phi3",
        &[
            ("max_position_embeddings", Default::Int(4096)),
            ("hidden_size", Default::Int(3072)),
            ("intermediate_size", Default::Int(8192)),
            ("num_hidden_layers", Default::Int(32)),
            ("num_attention_heads", Default::Int(32)),
            ("rms_norm_eps", Default::Float(1e-05)),
            ("sliding_window", Default::Null),
            ("vocab_size", Default::Int(32064)),
            ("original_max_position_embeddings", Default::Int(4096)),
            ("rope_theta", Default::Float(10000.0)),
        ],
    ),
    (
        "deepseek_v2",
        &[
            ("vocab_size", Default::Int(32000)),
            ("max_position_embeddings", Default::Int(2048)),
            ("hidden_size", Default::Int(4096)),
            ("intermediate_size", Default::Int(11008)),
            ("num_hidden_layers", Default::Int(32)),
            ("num_attention_heads", Default::Int(32)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("rope_theta", Default::Float(10000.0)),
            ("rope_scaling", Default::Null),
            ("first_k_dense_replace", Default::Int(0)),
            ("kv_lora_rank", Default::Int(512)),
            ("q_lora_rank", Default::Int(1536)),
            ("n_group", Default::Null),
            ("n_routed_experts", Default::Int(64)),
            ("n_shared_experts", Default::Int(2)),
            ("qk_nope_head_dim", Default::Int(128)),
            ("qk_rope_head_dim", Default::Int(64)),
            ("routed_scaling_factor", Default::Float(1.0)),
            ("topk_group", Default::Null),
            ("v_head_dim", Default::Int(128)),
            ("num_experts_per_tok", Default::Null),
            ("norm_topk_prob", Default::Bool(false)),
            ("moe_intermediate_size", Default::Int(1407)),
        ],
    ),
    (
        "deepseek_v3",
        &[
            ("vocab_size", Default::Int(129280)),
            ("max_position_embeddings", Default::Int(4096)),
            ("hidden_size", Default::Int(7168)),
            ("intermediate_size", Default::Int(18432)),
            ("moe_intermediate_size", Default::Int(2048)),
            ("num_hidden_layers", Default::Int(61)),
            ("num_attention_heads", Default::Int(128)),
            ("n_shared_experts", Default::Int(1)),
            ("n_routed_experts", Default::Int(256)),
            ("routed_scaling_factor", Default::Float(2.5)),
            ("kv_lora_rank", Default::Int(512)),
            ("q_lora_rank", Default::Int(1536)),
            ("qk_rope_head_dim", Default::Int(64)),
            ("v_head_dim", Default::Int(128)),
            ("qk_nope_head_dim", Default::Int(128)),
            ("n_group", Default::Int(8)),
            ("topk_group", Default::Int(4)),
            ("num_experts_per_tok", Default::Int(8)),
            ("first_k_dense_replace", Default::Int(3)),
            ("norm_topk_prob", Default::Bool(true)),
            ("rms_norm_eps", Default::Float(1e-06)),
            ("rope_theta", Default::Float(10000.0)),
            ("rope_scaling", Default::Null),
        ],
    ),
    (
        "bert",
        &[
            ("max_position_embeddings", Default::Int(512)),
            ("hidden_size", Default::Int(768)),
            ("intermediate_size", Default::Int(3072)),
            ("num_hidden_layers", Default::Int(12)),
            ("num_attention_heads", Default::Int(12)),
            ("layer_norm_eps", Default::Float(1e-12)),
            ("vocab_size", Default::Int(30522)),
            ("type_vocab_size", Default::Int(2)),
        ],
    ),
];

/// Fills in what `transformers` would: the class defaults, and the values its config classes
/// compute from others (`num_key_value_heads` from the heads, `head_dim` from the width).
fn complete_with_defaults(map: &mut Map<String, Value>) {
    let model_type = map
        .get("model_type")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let missing = |m: &Map<String, Value>, k: &str| m.get(k).is_none_or(Value::is_null);
    if let Some((_, defaults)) = DEFAULTS.iter().find(|(t, _)| *t == model_type) {
        for (key, default) in *defaults {
            if map.contains_key(*key) {
                continue;
            }
            // The rope bases live in the rope parameters when the config has them there.
            if matches!(*key, "rope_theta" | "rope_local_base_freq")
                && ["rope_parameters", "rope_scaling"].iter().any(|r| {
                    map.get(*r)
                        .and_then(|p| p.get("rope_theta").or_else(|| p.get("full_attention")))
                        .is_some()
                })
            {
                continue;
            }
            let v = match default {
                Default::Int(i) => Value::from(*i),
                Default::Float(f) => Value::from(*f),
                Default::Bool(b) => Value::from(*b),
                Default::Null => Value::Null,
            };
            map.insert(key.to_string(), v);
        }
    }
    let int = |m: &Map<String, Value>, k: &str| m.get(k).and_then(Value::as_u64);
    if matches!(
        model_type.as_str(),
        "llama" | "mistral" | "phi3" | "deepseek_v2" | "deepseek_v3"
    ) && missing(map, "num_key_value_heads")
    {
        if let Some(h) = int(map, "num_attention_heads") {
            map.insert("num_key_value_heads".into(), Value::from(h));
        }
    }
    if missing(map, "head_dim") {
        let head_dim = match model_type.as_str() {
            "llama" | "mistral" => match (int(map, "hidden_size"), int(map, "num_attention_heads"))
            {
                (Some(w), Some(h)) if h > 0 => Some(w / h),
                _ => None,
            },
            "qwen3" => Some(128),
            // DeepSeek's configs' head_dim is their rotary part.
            "deepseek_v2" | "deepseek_v3" => int(map, "qk_rope_head_dim"),
            "gemma" | "gemma2" | "gemma3_text" => Some(256),
            _ => None,
        };
        if let Some(d) = head_dim {
            map.insert("head_dim".into(), Value::from(d));
        }
    }
}

impl Hparams {
    pub(crate) fn new(config: &Value) -> Result<Hparams> {
        let mut map = config
            .as_object()
            .cloned()
            .ok_or_else(|| Error::Unsupported("config.json is not a JSON object".into()))?;
        if let Some(Value::Object(text)) = map.get("text_config").cloned() {
            for (k, v) in text {
                map.insert(k, v);
            }
        }
        complete_with_defaults(&mut map);
        let mut h = Hparams {
            map,
            rope: Map::new(),
        };
        let mut rope = match h.get("rope_parameters").or_else(|| h.get("rope_scaling")) {
            Some(Value::Object(o)) => o.clone(),
            _ => Map::new(),
        };
        let theta = h.find(&[
            "global_rope_theta",
            "rope_global_theta",
            "rope_theta_global",
            "rope_theta",
            "rotary_emb_base",
        ]);
        let local_theta = h.find(&[
            "local_rope_theta",
            "rope_local_theta",
            "rope_theta_local",
            "swa_rope_theta",
            "rope_local_base_freq",
        ]);
        let partial = h.find(&["partial_rotary_factor", "rope_pct", "rope_percent"]);
        let orig_max = h.find(&["original_max_position_embeddings"]);
        if !rope.contains_key("full_attention") && !rope.contains_key("sliding_attention") {
            if let Some(t) = local_theta {
                let mut o = Map::new();
                o.insert("rope_theta".into(), t.clone());
                rope.insert("sliding_attention".into(), Value::Object(o));
            }
            let ty = rope.get("type").cloned();
            for (k, v) in [
                ("rope_theta", theta),
                ("rope_type", ty.as_ref()),
                ("partial_rotary_factor", partial),
                ("original_max_position_embeddings", orig_max),
            ] {
                if let Some(v) = v {
                    if !rope.contains_key(k) {
                        rope.insert(k.into(), v.clone());
                    }
                }
            }
        }
        h.rope = rope;
        Ok(h)
    }

    /// The value of `key`, null included (as `hparams.get` gives it).
    pub(crate) fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key)
    }

    /// `find_hparam(keys, optional=True)`: the value of the first key present (`None` when it
    /// is null).
    pub(crate) fn find(&self, keys: &[&str]) -> Option<&Value> {
        keys.iter()
            .find_map(|k| self.map.get(*k))
            .filter(|v| !v.is_null())
    }

    /// The first of `keys` present and not null, with its value.
    fn find_entry<'k>(&self, keys: &[&'k str]) -> Option<(&'k str, &Value)> {
        keys.iter()
            .find_map(|k| self.map.get(*k).map(|v| (*k, v)))
            .filter(|(_, v)| !v.is_null())
    }

    /// The first of `keys` present and not null: the key a value is read from.
    pub(crate) fn present<'k>(&self, keys: &[&'k str]) -> Option<&'k str> {
        self.find_entry(keys).map(|(k, _)| k)
    }

    /// The key the rope parameters come from (`rope_parameters`, else `rope_scaling`).
    pub(crate) fn rope_key(&self) -> &'static str {
        match self.get("rope_parameters") {
            Some(Value::Object(_)) => "rope_parameters",
            _ => "rope_scaling",
        }
    }

    /// `find_hparam(keys)` for a count.
    pub(crate) fn require_u32(&self, keys: &[&str]) -> Result<u32> {
        self.find_u32(keys)?.ok_or_else(|| {
            bad(
                keys[0],
                &format!("is missing (looked for {})", keys.join(", ")),
            )
        })
    }

    /// An optional count.
    pub(crate) fn find_u32(&self, keys: &[&str]) -> Result<Option<u32>> {
        self.find_entry(keys)
            .map(|(k, v)| as_u32(v).ok_or_else(|| bad(k, &format!("is {v}, not a count"))))
            .transpose()
    }

    /// An optional number.
    pub(crate) fn find_f64(&self, keys: &[&str]) -> Result<Option<f64>> {
        self.find_entry(keys)
            .map(|(k, v)| {
                v.as_f64()
                    .ok_or_else(|| bad(k, &format!("is {v}, not a number")))
            })
            .transpose()
    }

    /// The completed rope parameters.
    pub(crate) fn rope(&self) -> &Map<String, Value> {
        &self.rope
    }
}

fn as_u32(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|n| u32::try_from(n).ok())
}

/// A count or a per-layer list of counts, as `add_head_count` and friends write it.
fn count_or_list(v: &Value, key: &str) -> Result<OwnedValue> {
    if let Some(n) = as_u32(v) {
        return Ok(OwnedValue::U32(n));
    }
    let list = v
        .as_array()
        .ok_or_else(|| bad(key, &format!("is {v}, not a count or a list of counts")))?;
    let items = list
        .iter()
        .map(|x| as_u32(x).map(OwnedValue::U32))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| bad(key, "has an entry that is not a count"))?;
    Ok(OwnedValue::Array(OwnedArray::new(ValueType::U32, items)?))
}

/// The keys a model's layer count is read from (`block_count`).
/// The `config.json` keys of an expert count, in the reference's order.
pub(crate) const EXPERT_COUNT_KEYS: &[&str] =
    &["num_local_experts", "num_experts", "n_routed_experts"];

pub(crate) const BLOCK_COUNT_KEYS: &[&str] =
    &["n_layers", "num_hidden_layers", "n_layer", "num_layers"];

/// Writes the keys `TextModel.set_gguf_parameters` writes, in its order, ending with
/// `general.file_type`; `origins` gets the `config.json` key each comes from.
pub(crate) fn text_model_parameters(
    b: &mut GgufBuilder<'_>,
    arch: &str,
    h: &Hparams,
    block_count: u32,
    file_type: u32,
    origins: &mut Origins,
) -> Result<()> {
    let k = |name: &str| format!("{arch}.{name}");
    let mut from = |name: &str, keys: &[&str]| {
        if let Some(key) = h.present(keys) {
            origins.push((k(name), format!("config.json's {key}")));
        }
    };
    let ctx_keys = [
        "max_position_embeddings",
        "n_ctx",
        "n_positions",
        "max_length",
        "max_sequence_length",
        "model_max_length",
    ];
    let ff_keys = [
        "prefix_dense_intermediate_size",
        "dense_intermediate_size",
        "intermediate_size",
        "n_inner",
        "hidden_dim",
    ];
    let head_keys = ["num_attention_heads", "n_head", "n_heads"];
    let kv_head_keys = ["num_key_value_heads", "n_kv_heads"];
    let rms_eps_keys = ["rms_norm_eps", "norm_eps"];
    let eps_keys = ["layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"];
    from("block_count", BLOCK_COUNT_KEYS);
    from("context_length", &ctx_keys);
    from("embedding_length", &["hidden_size", "n_embd", "dim"]);
    from("feed_forward_length", &ff_keys);
    from("attention.head_count", &head_keys);
    from("attention.head_count_kv", &kv_head_keys);
    from("attention.layer_norm_rms_epsilon", &rms_eps_keys);
    from("attention.layer_norm_epsilon", &eps_keys);
    from("attention.key_length", &["head_dim"]);
    from("attention.value_length", &["head_dim"]);
    let rope_key = h.rope_key();
    origins.push((k("rope.freq_base"), "config.json's rope_theta".into()));
    for scaling in ["factor", "original_context_length"] {
        origins.push((
            k(&format!("rope.scaling.{scaling}")),
            format!("config.json's {rope_key}"),
        ));
    }

    b.set(&k("block_count"), block_count);
    if let Some(n) = h.find_u32(&ctx_keys)? {
        b.set(&k("context_length"), n);
    }
    if let Some(n) = h.find_u32(&["hidden_size", "n_embd", "dim"])? {
        b.set(&k("embedding_length"), n);
    }
    if let Some(v) = h.find(&ff_keys) {
        b.set(
            &k("feed_forward_length"),
            count_or_list(v, "intermediate_size")?,
        );
    }
    if let Some(v) = h.find(&head_keys) {
        b.set(
            &k("attention.head_count"),
            count_or_list(v, "num_attention_heads")?,
        );
    }
    if let Some(v) = h.find(&kv_head_keys) {
        b.set(
            &k("attention.head_count_kv"),
            count_or_list(v, "num_key_value_heads")?,
        );
    }
    if h.get("is_causal") == Some(&Value::Bool(false)) {
        b.set(&k("attention.causal"), false);
    }

    let rope = h.rope();
    let params = match rope.get("full_attention") {
        Some(Value::Object(o)) => o,
        _ => rope,
    };
    if let Some(rope_type) = params.get("rope_type").and_then(Value::as_str) {
        let factor = params.get("factor").and_then(Value::as_f64);
        match (rope_type, factor) {
            ("linear", Some(f)) => {
                b.set(&k("rope.scaling.type"), "linear");
                b.set(&k("rope.scaling.factor"), f as f32);
            }
            ("yarn", Some(f)) => {
                b.set(&k("rope.scaling.type"), "yarn");
                b.set(&k("rope.scaling.factor"), f as f32);
                let orig = params
                    .get("original_max_position_embeddings")
                    .and_then(as_u32)
                    .ok_or_else(|| {
                        bad(
                            "rope_scaling",
                            "is yarn without original_max_position_embeddings",
                        )
                    })?;
                b.set(&k("rope.scaling.original_context_length"), orig);
                for (json, key) in [
                    ("extrapolation_factor", "rope.scaling.yarn_ext_factor"),
                    ("attention_factor", "rope.scaling.yarn_attn_factor"),
                    ("beta_fast", "rope.scaling.yarn_beta_fast"),
                    ("beta_slow", "rope.scaling.yarn_beta_slow"),
                ] {
                    let v = params.get(json).or_else(|| {
                        (json == "attention_factor")
                            .then(|| params.get("attn_factor"))
                            .flatten()
                    });
                    if let Some(v) = v.and_then(Value::as_f64) {
                        b.set(&k(key), v as f32);
                    }
                }
            }
            ("su" | "longrope", _) => {
                b.set(&k("rope.scaling.type"), "longrope");
            }
            _ => {}
        }
    }
    if let Some(Value::Array(sections)) = rope.get("mrope_section") {
        let mut s: Vec<OwnedValue> = sections
            .iter()
            .map(|v| as_u32(v).map(|n| OwnedValue::I32(n as i32)))
            .collect::<Option<_>>()
            .ok_or_else(|| bad("mrope_section", "has an entry that is not a count"))?;
        s.resize(4.max(s.len()), OwnedValue::I32(0));
        s.truncate(4);
        b.set(
            &k("rope.dimension_sections"),
            OwnedValue::Array(OwnedArray::new(ValueType::I32, s)?),
        );
    }
    if let Some(theta) = params.get("rope_theta").and_then(Value::as_f64) {
        b.set(&k("rope.freq_base"), theta as f32);
    }
    if let Some(theta) = rope
        .get("sliding_attention")
        .and_then(|s| s.get("rope_theta"))
        .and_then(Value::as_f64)
    {
        b.set(&k("rope.freq_base_swa"), theta as f32);
    }
    if let Some(eps) = h.find_f64(&rms_eps_keys)? {
        b.set(&k("attention.layer_norm_rms_epsilon"), eps as f32);
    }
    if let Some(eps) = h.find_f64(&eps_keys)? {
        b.set(&k("attention.layer_norm_epsilon"), eps as f32);
    }
    if let Some(n) = h.find_u32(EXPERT_COUNT_KEYS)? {
        b.set(&k("expert_count"), n);
    }
    let used_keys = [
        "num_experts_per_tok",
        "num_experts_per_token",
        "top_k_experts",
    ];
    if let Some(n) = h.find_u32(&used_keys)? {
        b.set(&k("expert_used_count"), n);
    }
    if let Some(n) = h.find_u32(&["n_group"])? {
        b.set(&k("expert_group_count"), n);
    }
    if let Some(n) = h.find_u32(&["topk_group"])? {
        b.set(&k("expert_group_used_count"), n);
    }
    let score_keys = [
        "score_function",
        "scoring_func",
        "score_func",
        "moe_router_activation",
        "moe_router_activation_func",
        "expert_selection_fn",
    ];
    if let Some(v) = h.find(&score_keys) {
        // gguf-py's ExpertGatingFuncType.
        let id = match v.as_str() {
            Some("softmax") => 1u32,
            Some("sigmoid") => 2,
            Some("sqrtsoftplus") => 4,
            _ => {
                return Err(bad(
                    h.present(&score_keys).unwrap_or("score_function"),
                    "is not softmax, sigmoid or sqrtsoftplus",
                ))
            }
        };
        b.set(&k("expert_gating_func"), id);
    }
    if let Some(head_dim) = h.get("head_dim").filter(|v| !v.is_null()) {
        let n = as_u32(head_dim).ok_or_else(|| bad("head_dim", "is not a count"))?;
        b.set(&k("attention.key_length"), n);
        b.set(&k("attention.value_length"), n);
    }
    b.set("general.file_type", file_type);
    Ok(())
}
