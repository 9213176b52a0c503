//! The one error type of this crate.

use std::path::PathBuf;

use crate::value::ValueType;

/// Everything that can go wrong while reading, validating or writing GGUF data.
///
/// Errors found while parsing carry the byte `offset` (from the start of the file) where the
/// problem was found; errors from [`crate::GgufFile::open`] and the other path-taking functions
/// are wrapped in [`Error::File`], so their message starts with the file's path.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another error, in the file at `path`.
    #[error("{}: {error}", path.display())]
    File {
        /// The file being read or written.
        path: PathBuf,
        /// What went wrong in it (not a `source()`: the message already includes it).
        error: Box<Error>,
    },

    /// The operating system refused a read, write, map or rename.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// The data ends before an item that the header or a length field promised.
    #[error("at byte {offset}: file is truncated: {what} needs {needed} bytes but only {available} remain")]
    Truncated {
        /// Where the item starts.
        offset: u64,
        /// What was being read.
        what: String,
        /// Bytes the item needs.
        needed: u64,
        /// Bytes left in the file from `offset`.
        available: u64,
    },

    /// The first four bytes are not `GGUF`.
    #[error("at byte 0: not a GGUF file: expected magic \"GGUF\", found \"{}\"{hint}", found.escape_ascii())]
    BadMagic {
        /// The bytes found.
        found: Vec<u8>,
        /// A hint when the bytes name a known legacy format.
        hint: &'static str,
    },

    /// The version field holds a version this crate does not know.
    #[error("at byte 4: unsupported GGUF version {version} (expected 1, 2 or 3)")]
    UnsupportedVersion {
        /// The version as read (little-endian).
        version: u32,
    },

    /// A metadata value or array element carries a type id outside the 13 the spec defines.
    #[error("at byte {offset}: {what} has unknown value type id {type_id} (expected 0..=12)")]
    UnknownValueType {
        /// Where the type id is.
        offset: u64,
        /// Which value.
        what: String,
        /// The id found.
        type_id: u32,
    },

    /// A bool value is neither 0 nor 1.
    #[error("at byte {offset}: {what} is a bool but holds {byte} (expected 0 or 1)")]
    InvalidBool {
        /// Where the byte is.
        offset: u64,
        /// Which value.
        what: String,
        /// The byte found.
        byte: u8,
    },

    /// A key or tensor name is not valid UTF-8.
    #[error("at byte {offset}: {what} is not valid UTF-8")]
    InvalidUtf8 {
        /// Where the string's bytes start (0 when not from a file).
        offset: u64,
        /// Which string.
        what: String,
    },

    /// Arrays nested deeper than [`crate::MAX_ARRAY_DEPTH`].
    #[error("at byte {offset}: {what} nests arrays deeper than {max} levels")]
    ArrayTooDeep {
        /// Where the innermost array starts.
        offset: u64,
        /// Which value.
        what: String,
        /// The limit.
        max: u32,
    },

    /// The same key appears twice.
    #[error("at byte {offset}: duplicate metadata key '{key}' (first defined at byte {first})")]
    DuplicateKey {
        /// Where the second copy starts.
        offset: u64,
        /// The key.
        key: String,
        /// Where the first copy starts.
        first: u64,
    },

    /// The same tensor name appears twice.
    #[error("at byte {offset}: duplicate tensor name '{name}' (first defined at byte {first})")]
    DuplicateTensor {
        /// Where the second tensor info starts.
        offset: u64,
        /// The name.
        name: String,
        /// Where the first tensor info starts.
        first: u64,
    },

    /// `general.alignment` is zero, not a power of two, or not a `u32`.
    #[error("at byte {offset}: general.alignment is {found}; expected a non-zero power of two of type u32")]
    BadAlignment {
        /// Where the value is.
        offset: u64,
        /// The value (or its type) as found.
        found: String,
    },

    /// A tensor has more dimensions than ggml supports.
    #[error("at byte {offset}: tensor '{name}' has {n_dims} dimensions (expected at most 4)")]
    TooManyDims {
        /// Where the count is.
        offset: u64,
        /// The tensor.
        name: String,
        /// The count found.
        n_dims: u32,
    },

    /// A tensor's shape does not fit its type (row not a whole number of blocks, or too large).
    #[error("at byte {offset}: tensor '{name}' of type {ggml_type} has invalid shape {shape:?}: {reason}")]
    BadShape {
        /// Where the tensor info starts (0 when not from a file).
        offset: u64,
        /// The tensor.
        name: String,
        /// Its type's name.
        ggml_type: &'static str,
        /// The shape, ggml order.
        shape: Vec<u64>,
        /// Why it is invalid.
        reason: String,
    },

    /// A tensor type id that ggml never had.
    #[error("at byte {offset}: tensor '{name}' has unknown ggml type id {type_id}")]
    UnknownGgmlType {
        /// Where the id is.
        offset: u64,
        /// The tensor.
        name: String,
        /// The id.
        type_id: u32,
    },

    /// A tensor type id that ggml retired.
    #[error("at byte {offset}: tensor '{name}' has ggml type id {type_id} ({type_name}), which was removed from ggml; {replacement}")]
    RetiredGgmlType {
        /// Where the id is.
        offset: u64,
        /// The tensor.
        name: String,
        /// The id.
        type_id: u32,
        /// The type's former name.
        type_name: &'static str,
        /// What replaced it.
        replacement: &'static str,
    },

    /// A tensor's data offset is not a multiple of the alignment.
    #[error("at byte {offset}: tensor '{name}' has data offset {data_offset}, not a multiple of the alignment {alignment}")]
    MisalignedTensor {
        /// Where the tensor info starts.
        offset: u64,
        /// The tensor.
        name: String,
        /// Its offset within the data section.
        data_offset: u64,
        /// The file's alignment.
        alignment: u64,
    },

    /// A tensor's data lies (partly) past the end of the file.
    #[error("at byte {offset}: tensor '{name}' needs bytes {start}..{end} of the file but the file has {file_size} bytes")]
    TensorOutOfBounds {
        /// Where the tensor info starts.
        offset: u64,
        /// The tensor.
        name: String,
        /// First byte of its data (absolute, saturating).
        start: u64,
        /// One past its last byte (absolute, saturating).
        end: u64,
        /// The file's size.
        file_size: u64,
    },

    /// Two tensors share bytes.
    #[error("at byte {offset}: tensor '{second}' (from data byte {second_start}) overlaps tensor '{first}' (data bytes {first_start}..{first_end})")]
    OverlappingTensors {
        /// Where the info of the tensor that starts inside the other one is.
        offset: u64,
        /// The tensor that starts first.
        first: String,
        /// Its start within the data section.
        first_start: u64,
        /// Its end within the data section.
        first_end: u64,
        /// The tensor that starts inside it.
        second: String,
        /// Its start within the data section.
        second_start: u64,
    },

    /// A metadata key that was asked for is absent.
    #[error("metadata key '{key}' is missing")]
    MissingKey {
        /// The key.
        key: String,
    },

    /// A metadata value has another type than the caller asked for.
    #[error("metadata key '{key}' has type {found}, expected {expected}")]
    WrongType {
        /// The key.
        key: String,
        /// The type asked for.
        expected: String,
        /// The type found.
        found: String,
    },

    /// A string value is not valid UTF-8 where text was asked for.
    #[error("metadata key '{key}' holds a string that is not valid UTF-8")]
    ValueNotUtf8 {
        /// The key.
        key: String,
    },

    /// A tensor that was asked for is absent.
    #[error("tensor '{name}' not found")]
    MissingTensor {
        /// The name.
        name: String,
    },

    /// The caller built something the format cannot hold (writer and editor).
    #[error("invalid input: {0}")]
    Invalid(String),

    /// Parts of a split set do not fit together.
    #[error("split set: {0}")]
    Split(String),

    /// Writing the file failed, or its destination was refused (see
    /// [`gguf_fsutil::WriteMode`] and [`gguf_fsutil::refuse_inputs`]).
    #[error(transparent)]
    Fs(#[from] gguf_fsutil::Error),
}

impl Error {
    /// Wraps `self` with the file it came from, unless it already names one.
    pub fn in_file(self, path: impl Into<PathBuf>) -> Error {
        match self {
            Error::File { .. } => self,
            Error::Fs(ref e) if e.path().is_some() => self,
            other => Error::File {
                path: path.into(),
                error: Box::new(other),
            },
        }
    }

    pub(crate) fn wrong_type(key: &str, expected: impl ToString, found: ValueType) -> Error {
        Error::WrongType {
            key: key.to_string(),
            expected: expected.to_string(),
            found: found.name().to_string(),
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
