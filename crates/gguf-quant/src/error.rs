//! The one error type of this crate.

use gguf_format::GgmlType;

/// What can go wrong converting between ggml blocks and floats.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuantError {
    /// The element count is not a whole number of the type's blocks.
    #[error("{ty}: {elements} elements is not a multiple of the block size {block_size}")]
    PartialBlock {
        /// The type.
        ty: GgmlType,
        /// The element count asked for.
        elements: usize,
        /// The type's block size.
        block_size: usize,
    },
    /// A byte slice does not hold exactly the blocks for the element count.
    #[error("{ty}: {elements} elements take {expected} bytes, but the slice has {found}")]
    WrongLength {
        /// The type.
        ty: GgmlType,
        /// The element count.
        elements: usize,
        /// Bytes needed.
        expected: usize,
        /// Bytes given.
        found: usize,
    },
    /// Matrix and vector lengths do not agree.
    #[error("shape mismatch: {0}")]
    Shape(String),
    /// The operation has no implementation for this type (e.g. quantizing to an i-quant,
    /// which needs an importance matrix in ggml too).
    #[error("{op} is not available for {ty}")]
    Unsupported {
        /// The type.
        ty: GgmlType,
        /// What was asked: "dequantize", "quantize", ...
        op: &'static str,
    },
    /// The operating system refused to start a thread of a [`crate::ThreadPool`].
    #[error("could not start thread {started} of {threads}: {message}")]
    ThreadSpawn {
        /// Threads asked for.
        threads: usize,
        /// Threads running when the refusal came (the caller counts as one).
        started: usize,
        /// The operating system's reason.
        message: String,
    },
    /// `GGUF_FORCE_ISA` names an instruction set this CPU lacks, or none at all (an unknown
    /// name, an empty value). The kernels never run another one in its place: a test run that
    /// forced one must not pass on another.
    #[error(
        "GGUF_FORCE_ISA={value}: {}",
        forced_isa_problem(.value, *.known, .available)
    )]
    ForcedIsa {
        /// The variable's value (lossily decoded if it is not UTF-8).
        value: String,
        /// Whether the value is the name of an instruction set (of another CPU).
        known: bool,
        /// The instruction sets this CPU has, comma-separated, narrowest first.
        available: String,
    },
}

/// What is wrong with a [`QuantError::ForcedIsa`] value (not on this CPU, unknown, empty), and
/// what this CPU has.
fn forced_isa_problem(value: &str, known: bool, available: &str) -> String {
    const NAMES: &str = "scalar, avx2, avxvnni, avx512, neon";
    match (known, value.is_empty()) {
        (true, _) => format!("this CPU lacks it; it has {available}"),
        (false, true) => format!("empty (name one of {NAMES}); this CPU has {available}"),
        (false, false) => format!("not an instruction set ({NAMES}); this CPU has {available}"),
    }
}

/// Result alias for this crate.
pub type Result<T, E = QuantError> = std::result::Result<T, E>;
