//! The one error type of this crate.

use std::path::{Path, PathBuf};

/// What can go wrong while checking a destination, writing a temporary file or putting it in
/// place. The messages are those the gguf tools print.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Another error, in the file at `path`.
    #[error("{}: {error}", path.display())]
    File {
        /// The file being written (the destination as the caller named it).
        path: PathBuf,
        /// What went wrong in it (not a `source()`: the message already includes it).
        error: Box<Error>,
    },

    /// The operating system refused a read, write, lock or rename.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// The caller named something that cannot be written (a path without a file name), or a
    /// destination changed while it was written.
    #[error("invalid input: {0}")]
    Invalid(String),

    /// A write refused to put its output where something is in the way (see
    /// [`crate::WriteMode`]), or where an input of the command is ([`crate::refuse_inputs`]).
    #[error("{} {reason}; refusing to write over it", path.display())]
    Refused {
        /// The destination, as the caller named it.
        path: PathBuf,
        /// What is in the way.
        reason: Refusal,
    },
}

/// Why a write refused its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// Something is there and the write was to create a new file.
    #[error("already exists")]
    Exists,
    /// A regular file without its owner's write permission, and the write did not force it.
    #[error("is read-only")]
    ReadOnly,
    /// Not a regular file (a FIFO, socket, device or directory): never replaced. The text
    /// names the kind ("a FIFO").
    #[error("is {0}, not a regular file")]
    NotRegular(&'static str),
    /// A symbolic link whose target does not exist.
    #[error("is a symbolic link to a file that does not exist")]
    DanglingSymlink,
    /// The same file as one the command reads.
    #[error("is an input of this command")]
    Input,
}

impl Error {
    /// Why the destination was refused, when this is a refusal ([`Error::Refused`]).
    pub fn refusal(&self) -> Option<Refusal> {
        match self {
            Error::Refused { reason, .. } => Some(*reason),
            _ => None,
        }
    }

    /// The file this error names, if it names one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Error::File { path, .. } | Error::Refused { path, .. } => Some(path),
            _ => None,
        }
    }

    /// Wraps `self` with the file it came from, unless it already names one (as this crate's
    /// own errors do for the destination a write was given).
    pub fn in_file(self, path: impl Into<PathBuf>) -> Error {
        match self {
            Error::File { .. } | Error::Refused { .. } => self,
            other => Error::File {
                path: path.into(),
                error: Box::new(other),
            },
        }
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
