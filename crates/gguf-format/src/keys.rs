//! Names of the standard metadata keys of the GGUF spec and llama.cpp.
//!
//! Keys under [`llm`], [`attention`] and [`rope`] are suffixes that follow the architecture
//! name: use them with [`crate::GgufFile::arch_get`] (`file.arch_get::<u32>(llm::BLOCK_COUNT)`
//! reads `llama.block_count` in a llama file).

/// `general.*` keys.
pub mod general {
    /// Architecture name, e.g. `llama`.
    pub const ARCHITECTURE: &str = "general.architecture";
    /// Version of the quantization format (u32).
    pub const QUANTIZATION_VERSION: &str = "general.quantization_version";
    /// Data section alignment (u32, power of two, default 32).
    pub const ALIGNMENT: &str = "general.alignment";
    /// llama.cpp's `llama_ftype` of the file (u32).
    pub const FILE_TYPE: &str = "general.file_type";
    /// `model`, `adapter`, ...
    pub const TYPE: &str = "general.type";
    /// Human-readable model name.
    pub const NAME: &str = "general.name";
    /// Author.
    pub const AUTHOR: &str = "general.author";
    /// Model version.
    pub const VERSION: &str = "general.version";
    /// Organization.
    pub const ORGANIZATION: &str = "general.organization";
    /// Base name without size or fine-tune.
    pub const BASENAME: &str = "general.basename";
    /// Fine-tune label.
    pub const FINETUNE: &str = "general.finetune";
    /// Free-text description.
    pub const DESCRIPTION: &str = "general.description";
    /// Who quantized the file.
    pub const QUANTIZED_BY: &str = "general.quantized_by";
    /// Size label such as `135M`.
    pub const SIZE_LABEL: &str = "general.size_label";
    /// License identifier.
    pub const LICENSE: &str = "general.license";
    /// Model home page.
    pub const URL: &str = "general.url";
    /// Source repository.
    pub const REPO_URL: &str = "general.repo_url";
    /// Tags (array of strings).
    pub const TAGS: &str = "general.tags";
    /// Languages (array of strings).
    pub const LANGUAGES: &str = "general.languages";
}

/// Per-architecture model hyperparameters (suffixes of `{arch}.`).
pub mod llm {
    /// Vocabulary size.
    pub const VOCAB_SIZE: &str = "vocab_size";
    /// Training context length.
    pub const CONTEXT_LENGTH: &str = "context_length";
    /// Embedding width.
    pub const EMBEDDING_LENGTH: &str = "embedding_length";
    /// Number of transformer blocks.
    pub const BLOCK_COUNT: &str = "block_count";
    /// Feed-forward width.
    pub const FEED_FORWARD_LENGTH: &str = "feed_forward_length";
    /// Number of experts (MoE).
    pub const EXPERT_COUNT: &str = "expert_count";
    /// Experts used per token (MoE).
    pub const EXPERT_USED_COUNT: &str = "expert_used_count";
    /// Whether attention and feed-forward run in parallel.
    pub const USE_PARALLEL_RESIDUAL: &str = "use_parallel_residual";
    /// Final logit soft-capping (Gemma 2).
    pub const FINAL_LOGIT_SOFTCAPPING: &str = "final_logit_softcapping";
    /// Attention logit soft-capping (Gemma 2).
    pub const ATTN_LOGIT_SOFTCAPPING: &str = "attn_logit_softcapping";
}

/// Attention hyperparameters (suffixes of `{arch}.`).
pub mod attention {
    /// Query heads.
    pub const HEAD_COUNT: &str = "attention.head_count";
    /// Key/value heads (grouped-query attention).
    pub const HEAD_COUNT_KV: &str = "attention.head_count_kv";
    /// Key head width.
    pub const KEY_LENGTH: &str = "attention.key_length";
    /// Value head width.
    pub const VALUE_LENGTH: &str = "attention.value_length";
    /// LayerNorm epsilon.
    pub const LAYERNORM_EPSILON: &str = "attention.layer_norm_epsilon";
    /// RMSNorm epsilon.
    pub const LAYERNORM_RMS_EPSILON: &str = "attention.layer_norm_rms_epsilon";
    /// Sliding-window size.
    pub const SLIDING_WINDOW: &str = "attention.sliding_window";
    /// Whether attention is causal.
    pub const CAUSAL: &str = "attention.causal";
}

/// Rotary embedding hyperparameters (suffixes of `{arch}.`).
pub mod rope {
    /// Rotated dimensions per head.
    pub const DIMENSION_COUNT: &str = "rope.dimension_count";
    /// Base frequency.
    pub const FREQ_BASE: &str = "rope.freq_base";
    /// `none`, `linear`, `yarn`, ...
    pub const SCALING_TYPE: &str = "rope.scaling.type";
    /// Scaling factor.
    pub const SCALING_FACTOR: &str = "rope.scaling.factor";
    /// Original context length before scaling.
    pub const SCALING_ORIGINAL_CONTEXT_LENGTH: &str = "rope.scaling.original_context_length";
    /// YaRN attention factor.
    pub const SCALING_ATTN_FACTOR: &str = "rope.scaling.attn_factor";
}

/// `tokenizer.*` keys.
pub mod tokenizer {
    /// Tokenizer model: `gpt2`, `llama`, `bert`, `t5`, ...
    pub const MODEL: &str = "tokenizer.ggml.model";
    /// Pre-tokenizer name.
    pub const PRE: &str = "tokenizer.ggml.pre";
    /// Token texts (array of strings).
    pub const TOKENS: &str = "tokenizer.ggml.tokens";
    /// Token types (array of i32).
    pub const TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
    /// Token scores (array of f32).
    pub const SCORES: &str = "tokenizer.ggml.scores";
    /// BPE merges (array of strings).
    pub const MERGES: &str = "tokenizer.ggml.merges";
    /// Beginning-of-sequence id.
    pub const BOS_ID: &str = "tokenizer.ggml.bos_token_id";
    /// End-of-sequence id.
    pub const EOS_ID: &str = "tokenizer.ggml.eos_token_id";
    /// End-of-turn id.
    pub const EOT_ID: &str = "tokenizer.ggml.eot_token_id";
    /// End-of-message id.
    pub const EOM_ID: &str = "tokenizer.ggml.eom_token_id";
    /// Unknown-token id.
    pub const UNK_ID: &str = "tokenizer.ggml.unknown_token_id";
    /// Separator id. The misspelling is the key real files carry.
    pub const SEPARATOR_ID: &str = "tokenizer.ggml.seperator_token_id";
    /// Padding id.
    pub const PAD_ID: &str = "tokenizer.ggml.padding_token_id";
    /// Mask id.
    pub const MASK_ID: &str = "tokenizer.ggml.mask_token_id";
    /// Whether to add BOS.
    pub const ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
    /// Whether to add EOS.
    pub const ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
    /// Whether to prefix a space (SentencePiece).
    pub const ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
    /// Whether to collapse extra whitespace.
    pub const REMOVE_EXTRA_WHITESPACES: &str = "tokenizer.ggml.remove_extra_whitespaces";
    /// SentencePiece normalizer data.
    pub const PRECOMPILED_CHARSMAP: &str = "tokenizer.ggml.precompiled_charsmap";
    /// A whole Hugging Face `tokenizer.json`.
    pub const HF_JSON: &str = "tokenizer.huggingface.json";
    /// Default Jinja chat template.
    pub const CHAT_TEMPLATE: &str = "tokenizer.chat_template";
    /// Fill-in-the-middle prefix id.
    pub const FIM_PRE_ID: &str = "tokenizer.ggml.fim_pre_token_id";
    /// Fill-in-the-middle suffix id.
    pub const FIM_SUF_ID: &str = "tokenizer.ggml.fim_suf_token_id";
    /// Fill-in-the-middle middle id.
    pub const FIM_MID_ID: &str = "tokenizer.ggml.fim_mid_token_id";
}

/// Keys of multi-part (split) files, as `gguf-split` writes them.
pub mod split {
    /// Zero-based index of this part (u16).
    pub const NO: &str = "split.no";
    /// Number of parts (u16; 0 in a merged file).
    pub const COUNT: &str = "split.count";
    /// Tensors in the whole set (i32).
    pub const TENSORS_COUNT: &str = "split.tensors.count";
}
