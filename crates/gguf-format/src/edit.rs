//! Rewriting a file with changed metadata, atomically.

use std::path::Path;

use gguf_fsutil::{write_atomic, WriteMode};

use crate::error::{Error, Result};
use crate::mmap::MappedGguf;
use crate::writer::{GgufBuilder, OwnedValue};

/// One change to a file's metadata.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Set a key (replace in place, or append).
    Set(String, OwnedValue),
    /// Remove a key; an error if it is absent.
    Remove(String),
    /// Rename a key, keeping its value and position.
    Rename(String, String),
}

impl Edit {
    /// Applies the edit to a builder.
    pub fn apply(&self, builder: &mut GgufBuilder<'_>) -> Result<()> {
        match self {
            Edit::Set(k, v) => {
                builder.set(k, v.clone());
            }
            Edit::Remove(k) => {
                if !builder.remove(k) {
                    return Err(Error::MissingKey { key: k.clone() });
                }
            }
            Edit::Rename(from, to) => {
                builder.rename(from, to)?;
            }
        }
        Ok(())
    }
}

/// Writes `output` as a copy of `input` with `edits` applied to its metadata.
///
/// The new file goes to a temporary file beside `output` and is renamed into place only when
/// complete, so a failure at any point leaves `output` as it was; `mode` says whether `output`
/// may exist (see [`gguf_fsutil`]: a replaced file keeps its mode and owner, a symbolic link
/// is followed, a read-only file needs `force`). `output` may be `input` itself, with
/// [`WriteMode::Replace`] (an in-place edit). Tensor data is copied unchanged, laid out as
/// llama.cpp expects. `progress` is called with (bytes of tensor data copied, total).
pub fn edit_metadata(
    input: &Path,
    output: &Path,
    mode: WriteMode,
    edits: &[Edit],
    progress: &mut dyn FnMut(u64, u64),
) -> Result<()> {
    let mapped = MappedGguf::open(input)?;
    let file = mapped.file();
    let mut builder = GgufBuilder::from_file(file);
    for edit in edits {
        edit.apply(&mut builder).map_err(|e| e.in_file(input))?;
    }
    write_atomic(output, mode, |out| {
        builder
            .write_from(file, out, progress)
            .map(drop)
            .map_err(|e| e.in_file(output))
    })
}
