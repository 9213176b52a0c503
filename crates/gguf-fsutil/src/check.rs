//! What a write may replace, and whether two paths are one file: the checks every write makes
//! before it creates anything, and again before it renames.

use std::fs::{self, File, Metadata};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::{Error, Refusal, Result};
use crate::WriteMode;

/// Checks, without writing anything, that a write to `dest` with `mode` would be allowed now:
/// for a command that writes several files, to refuse before the first one is written.
pub fn check_destination(dest: &Path, mode: WriteMode) -> Result<()> {
    resolve(dest, mode).map(drop)
}

/// Refuses `dest` if it is the same file (or directory) as one of `inputs`
/// ([`Refusal::Input`]): by device and inode, after following symbolic links (see
/// [`same_file`]), so a symbolic or hard link to an input is refused as the input itself is. A
/// `dest` that does not exist is no input. Every command that writes calls this with every
/// file it reads.
pub fn refuse_inputs<P: AsRef<Path>>(dest: &Path, inputs: &[P]) -> Result<()> {
    if inputs.iter().any(|input| same_file(input.as_ref(), dest)) {
        return Err(Error::Refused {
            path: dest.to_path_buf(),
            reason: Refusal::Input,
        });
    }
    Ok(())
}

/// Whether `a` and `b` name the same existing file or directory: the same device and inode
/// on Unix once symbolic links are followed, so a hard link or a symbolic link to a file is
/// that file. False when either does not exist.
pub fn same_file(a: &Path, b: &Path) -> bool {
    #[cfg(unix)]
    {
        match (fs::metadata(a), fs::metadata(b)) {
            (Ok(x), Ok(y)) => same_inode(&x, &y),
            _ => false,
        }
    }
    #[cfg(not(unix))]
    {
        match (fs::canonicalize(a), fs::canonicalize(b)) {
            (Ok(x), Ok(y)) => x == y,
            _ => false,
        }
    }
}

/// Where a write to `dest` goes, and the regular file there now.
pub(crate) struct Target {
    /// `dest`, or the final target of the symbolic link at `dest`.
    pub(crate) path: PathBuf,
    /// The regular file there now, if any.
    pub(crate) existing: Option<Metadata>,
}

/// Checks `dest` against `mode` and finds where the write goes.
pub(crate) fn resolve(dest: &Path, mode: WriteMode) -> Result<Target> {
    let refuse = |reason| Error::Refused {
        path: dest.to_path_buf(),
        reason,
    };
    let here = match fs::symlink_metadata(dest) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(Target {
                path: dest.to_path_buf(),
                existing: None,
            })
        }
        Err(e) => return Err(Error::Io(e).in_file(dest)),
    };
    let WriteMode::Replace { force } = mode else {
        return Err(refuse(Refusal::Exists));
    };
    let (path, meta) = if here.file_type().is_symlink() {
        let path = match fs::canonicalize(dest) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(refuse(Refusal::DanglingSymlink))
            }
            Err(e) => return Err(Error::Io(e).in_file(dest)),
        };
        let meta = fs::metadata(&path).map_err(|e| Error::Io(e).in_file(&path))?;
        (path, meta)
    } else {
        (dest.to_path_buf(), here)
    };
    if !meta.is_file() {
        return Err(refuse(Refusal::NotRegular(kind_of(&meta))));
    }
    if !force && read_only(&meta) {
        return Err(refuse(Refusal::ReadOnly));
    }
    Ok(Target {
        path,
        existing: Some(meta),
    })
}

/// Opens `path` for reading if it is a regular file (symlinks followed); anything else (a
/// directory, FIFO, socket or device) is an `InvalidInput` error saying what it is, returned
/// before the path is opened: opening a FIFO blocks until a writer comes, and a device such
/// as `/dev/zero` never ends.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let refuse = |meta: &Metadata| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("is {}, not a regular file", kind_of(meta)),
        )
    };
    let meta = fs::metadata(path)?;
    if !meta.is_file() {
        return Err(refuse(&meta));
    }
    let handle = File::open(path)?;
    // The path could have been replaced between the two looks.
    let meta = handle.metadata()?;
    if !meta.is_file() {
        return Err(refuse(&meta));
    }
    Ok(handle)
}

/// What a file that is not a regular file is, for messages ("a FIFO").
fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO";
        }
        if t.is_socket() {
            return "a socket";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
    }
    "a special file"
}

/// Read-only: the owner may not write (even where the caller, e.g. root, still could).
fn read_only(meta: &Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        meta.permissions().mode() & 0o200 == 0
    }
    #[cfg(not(unix))]
    {
        meta.permissions().readonly()
    }
}

#[cfg(unix)]
pub(crate) fn same_inode(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
pub(crate) fn same_inode(_: &Metadata, _: &Metadata) -> bool {
    true
}
