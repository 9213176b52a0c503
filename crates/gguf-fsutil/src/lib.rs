//! Writing files so that a failure, an interruption or a kill at any point leaves every
//! destination as it was, and so that a write never replaces what it should not.
//!
//! Every file the gguf crates (and the `gguf` command) write goes through here:
//!
//! * The new file is written to a temporary file beside its destination and renamed into place
//!   only when complete ([`write_atomic`] for one file, [`StagedFiles`] for several that appear
//!   together or not at all).
//! * The caller states what may be at the destination ([`WriteMode`]): nothing, or a regular
//!   file to replace. Anything else (a FIFO, socket, device or directory) is never replaced; a
//!   read-only file only when forced. A replaced file keeps its permission bits and, where the
//!   system permits, its owner and group. A symbolic link is followed: its final target is
//!   replaced (the temporary file goes beside the target) and the link stays.
//! * Temporary files are named `.NAME.gguf-tmp.PID.N` beside their destination `NAME`, hold an
//!   exclusive advisory lock while they are written, and are listed in a process-wide
//!   registry, so that a signal handler can remove them ([`remove_temp_files`]). One left by a
//!   writer killed outright (SIGKILL, a power cut) is unlocked, and the next write to the same
//!   destination removes it; nothing not named exactly so is touched.
//! * A write never replaces a file the command reads: [`refuse_inputs`] compares the
//!   destination with every input by device and inode, after following symbolic links, so the
//!   input's own name, a symbolic link to it and a hard link to it are all refused.
//! * Directories made for the files ([`StagedFiles::create_dirs`]) are removed again, if still
//!   empty, when the files are not put in place; a directory that was there is never removed.

mod check;
mod error;
mod staged;
mod temp;

use std::fs::File;
use std::io::BufWriter;
use std::path::Path;

pub use check::{check_destination, open_regular, refuse_inputs, same_file};
pub use error::{Error, Refusal, Result};
pub use staged::StagedFiles;
pub use temp::{remove_temp_files, TempDir};

/// What a write may find at its destination.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// Nothing may be there: an existing file, directory or symbolic link (even a dangling
    /// one) is refused ([`Refusal::Exists`]), also if it appears while the file is written.
    CreateNew,
    /// A regular file there is replaced: through symbolic links, keeping its permission bits
    /// and (where permitted) owner and group. A file without its owner's write permission is
    /// replaced only with `force` ([`Refusal::ReadOnly`]); what is not a regular file never
    /// is ([`Refusal::NotRegular`]). Nothing there: the file is created.
    Replace {
        /// Replace a read-only file too (it stays read-only).
        force: bool,
    },
}

/// Creates or replaces `dest` (as `mode` allows) by writing a temporary file beside it and
/// renaming it into place.
///
/// `write` gets a buffered writer and returns the caller's own error type `E`, which is
/// returned unchanged; this crate's errors (which name `dest`) become an `E` through `From`.
/// If `write` fails, or anything after it fails, the temporary file is removed and `dest` is
/// left as it was. See the [crate] documentation for what happens to modes, owners,
/// symbolic links and temporary files.
///
/// ```
/// use gguf_fsutil::{write_atomic, WriteMode};
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let dest = dir.path().join("out.txt");
/// let n = write_atomic(&dest, WriteMode::CreateNew, |out| {
///     out.write_all(b"hello")?;
///     Ok::<_, gguf_fsutil::Error>(5)
/// })?;
/// assert_eq!((n, std::fs::read(&dest)?), (5, b"hello".to_vec()));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_atomic<T, E: From<Error>>(
    dest: &Path,
    mode: WriteMode,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T, E>,
) -> Result<T, E> {
    let mut staged = StagedFiles::new();
    let value = staged.stage(dest, mode, write)?;
    staged.commit()?;
    Ok(value)
}
