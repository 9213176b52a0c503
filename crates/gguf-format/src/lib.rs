//! The GGUF container: parse, validate, memory-map, write, edit and split model files of the
//! llama.cpp / ggml ecosystem.
//!
//! * [`GgufFile::parse`] reads a file held in a byte slice without copying: metadata strings,
//!   arrays and tensor data are views into it. [`GgufFile::open`] memory-maps a file first.
//! * GGUF v1, v2 and v3, little- and big-endian, all 13 value types including nested arrays.
//! * Every length, count and offset is checked against the data; a bad file is an [`Error`]
//!   naming the byte offset and what was expected, never a panic, and allocation is bounded by
//!   the number of keys and tensors the data can actually hold.
//! * [`GgufBuilder`] and [`TensorWriter`] write files streaming, tensor by tensor, in the layout
//!   llama.cpp's loader requires; [`edit::edit_metadata`] rewrites metadata atomically;
//!   [`split`] reads, writes and merges multi-part files like `gguf-split`. Files are written
//!   through `gguf_fsutil` (temporary file and rename, refused destinations).
//!
//! ```
//! # let bytes = gguf_format::testing::tiny_file();
//! use gguf_format::{GgufFile, keys};
//! let file = GgufFile::parse(&bytes)?;
//! println!("GGUF v{} ({}-endian)", file.version(), file.byte_order().name());
//! for kv in file.metadata() {
//!     println!("{} = {:?}", kv.key, kv.value);
//! }
//! let vocab = file.get_array::<&[u8]>(keys::tokenizer::TOKENS)?.count();
//! assert_eq!(vocab, 3);
//! # Ok::<(), gguf_format::Error>(())
//! ```

pub mod edit;
mod error;
pub mod keys;
mod mmap;
mod reader;
pub mod split;
pub mod tensor_names;
mod types;
mod value;
mod writer;

#[doc(hidden)]
pub mod testing;

pub use error::{Error, Result};
pub use mmap::{MappedBytes, MappedGguf};
pub use reader::{GgufFile, KeyValue, TensorInfo, DEFAULT_ALIGNMENT, MAGIC, MAX_ARRAY_DEPTH};
pub use types::{GgmlType, TypeIdError};
pub use value::{ArrayIter, ArrayView, ByteOrder, FromValue, Value, ValueType};
pub use writer::{
    GgufBuilder, MetaValue, OwnedArray, OwnedValue, TensorSpec, TensorWriter, MAX_TENSOR_NAME_BYTES,
};
