//! The one error type of this crate.

/// What can go wrong loading a model or running it.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// The container layer failed (I/O, a malformed file, a missing or mistyped key).
    #[error(transparent)]
    Format(#[from] gguf_format::Error),
    /// A quantized kernel refused its input.
    #[error(transparent)]
    Quant(#[from] gguf_quant::QuantError),
    /// The tokenizer could not be built or a template failed.
    #[error(transparent)]
    Tokenizer(#[from] gguf_tokenizer::TokenizerError),
    /// Writing a file failed, or its destination was refused (a quantized model's output).
    #[error(transparent)]
    Fs(#[from] gguf_fsutil::Error),
    /// `general.architecture` names a model this crate does not run.
    #[error("{file}: architecture `{arch}` is not supported (supported: {})", crate::SUPPORTED.join(", "))]
    UnsupportedArchitecture {
        /// The file.
        file: String,
        /// Its architecture.
        arch: String,
    },
    /// A tensor the architecture needs is missing.
    #[error("{file}: tensor `{name}` is missing")]
    MissingTensor {
        /// The file.
        file: String,
        /// The tensor's name.
        name: String,
    },
    /// A tensor's shape does not fit the hyperparameters.
    #[error(
        "{file}: tensor `{name}` has shape {found:?}, but the hyperparameters need {expected:?}"
    )]
    TensorShape {
        /// The file.
        file: String,
        /// The tensor's name.
        name: String,
        /// The shape the hyperparameters imply (ggml order).
        expected: Vec<u64>,
        /// The stored shape.
        found: Vec<u64>,
    },
    /// Hyperparameters are missing, inconsistent or out of range.
    #[error("{file}: {message}")]
    Hyperparameters {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
    /// The context would overflow.
    #[error("the context is full: {needed} positions needed, the session holds {n_ctx}")]
    ContextFull {
        /// Positions the request needs.
        needed: usize,
        /// The session's context length.
        n_ctx: usize,
    },
    /// The forward pass produced NaN logits: corrupted weights, or hyperparameters that the
    /// load-time checks do not cover. Sampling from them would pick token 0 for every step.
    #[error("the model computed NaN logits at position {position} (corrupted weights?)")]
    NotANumber {
        /// The position whose logits were NaN.
        position: usize,
    },
    /// A prompt without tokens.
    #[error("the prompt has no tokens")]
    EmptyPrompt,
    /// A request was malformed (an out-of-range token id, a sequence out of range...).
    #[error("{0}")]
    Request(String),
    /// The engine failed while running a [`crate::Batcher`] step for the request (a bug: a
    /// panic in it, or an error of the forward pass that every sequence of the step shares),
    /// and the request was abandoned; the batcher goes on with the others.
    #[error("{0}")]
    Engine(String),
    /// The memory a session needs (its KV cache) is more than the machine has available, or
    /// the system refused to allocate it.
    #[error("{what} would take {} of memory, but {}", crate::memory::human(*needed), match available {
        Some(a) => format!("only {} is available (fewer sequences or a shorter context fit)", crate::memory::human(*a)),
        None => "the system refused to allocate it".to_string(),
    })]
    OutOfMemory {
        /// What needs it, e.g. `the KV caches of 256 sequences of 4096 positions (f16)`.
        what: String,
        /// Bytes needed.
        needed: u64,
        /// Bytes available, when the refusal came from the check before allocating.
        available: Option<u64>,
    },
    /// An importance matrix (`llama-imatrix`'s output) could not be read or is malformed.
    #[error("{file}: {message}")]
    Imatrix {
        /// The matrix's file.
        file: String,
        /// What is wrong, as llama-quantize would refuse it.
        message: String,
    },
    /// A model cannot be quantized as asked (a tensor already quantized, a type that needs an
    /// importance matrix without one, a matrix made for another model, a part of a split
    /// set...): refused before anything is written.
    #[error("{file}: {message}")]
    Quantize {
        /// The model.
        file: String,
        /// What stops the quantization.
        message: String,
    },
    /// llama-quantize's rules cannot give a tensor a type: no fallback type fits its row
    /// length, or its layer cannot be told.
    #[error("shape mismatch: {0}")]
    QuantizeRule(String),
    /// Quantizing a tensor's data failed while the file was written.
    #[error("tensor '{tensor}': {error}")]
    QuantizeTensor {
        /// The tensor.
        tensor: String,
        /// What went wrong (not a `source()`: the message already includes it).
        error: Box<ModelError>,
    },
}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, ModelError>;
