//! The one error type of this crate.

/// What can go wrong building a tokenizer or rendering a chat template.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TokenizerError {
    /// The file's tokenizer metadata is missing, of the wrong type or inconsistent.
    #[error("tokenizer metadata: {0}")]
    Metadata(String),
    /// Reading the metadata failed in the container layer.
    #[error(transparent)]
    Format(#[from] gguf_format::Error),
    /// A chat template failed to parse or render.
    #[error("chat template{}: {message}", name.as_deref().map(|n| format!(" `{n}`")).unwrap_or_default())]
    Template {
        /// The template's name (`tokenizer.chat_template.NAME`), if not the default one.
        name: Option<String>,
        /// What went wrong, with the line where it did.
        message: String,
    },
}

/// This crate's result type.
pub type Result<T> = std::result::Result<T, TokenizerError>;
