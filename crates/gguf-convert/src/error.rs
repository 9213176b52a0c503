//! The one error type of this crate.

/// Everything that can go wrong while converting.
///
/// Errors found while parsing carry the byte `offset` (from the start of the input) where the
/// problem was found; the caller, who knows the file, adds its path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input ends before an item that the header or a length field promised.
    #[error("at byte {offset}: file is truncated: {what} needs {needed} bytes but only {available} remain")]
    Truncated {
        /// Where the item starts.
        offset: u64,
        /// What was being read.
        what: String,
        /// Bytes the item needs.
        needed: u64,
        /// Bytes left in the input from `offset`.
        available: u64,
    },

    /// A field holds a value the format does not allow.
    #[error("at byte {offset}: {what}")]
    Invalid {
        /// Where the field starts.
        offset: u64,
        /// What is wrong, and what was expected.
        what: String,
    },

    /// The input is a GGML-family file, but not of the llama layout this converter reads.
    #[error("{0}")]
    NotLlama(String),

    /// Something the input holds that this converter cannot convert (yet).
    #[error("{0}")]
    Unsupported(String),

    /// The file the conversion would write fails the engine's load check, the one `gguf
    /// validate` runs (a key out of range, a tensor missing or of the wrong shape, RoPE
    /// factors that are not finite and positive): nothing was written.
    #[error("{check}{origin}; nothing was written")]
    WouldNotLoad {
        /// The engine's error, naming the key or tensor (boxed: it is large, and rare).
        check: Box<gguf_model::ModelError>,
        /// Where in the input the keys and tensors it names come from (` (from config.json's
        /// num_hidden_layers)`), or empty.
        origin: String,
    },

    /// Writing the GGUF output failed.
    #[error(transparent)]
    Format(#[from] gguf_format::Error),

    /// Writing an output file failed, or its destination was refused (an input of the
    /// conversion, a file in the way): gguf-fsutil's error.
    #[error(transparent)]
    Fs(#[from] gguf_fsutil::Error),
}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, Error>;
