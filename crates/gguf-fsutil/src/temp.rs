//! Temporary files and directories: their names, the process-wide registry a signal handler
//! empties, their locks, and the removal of those a killed writer left behind.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::check::same_inode;
use crate::error::{Error, Result};

/// Removes every temporary file this process is writing (and the directories made for files
/// not yet in place, when empty), for a signal handler (or anything else) about to end the
/// process. Afterwards every write in this process fails rather than create a temporary file,
/// a directory, or put a file in place.
pub fn remove_temp_files() {
    let mut registry = registry();
    registry.closed = true;
    for path in registry.live.drain(..) {
        let _ = fs::remove_file(&path);
    }
    for path in registry.live_dirs.drain(..) {
        let _ = fs::remove_dir_all(&path);
    }
    for path in registry.new_dirs.drain(..).rev() {
        let _ = fs::remove_dir(&path);
    }
}

/// A working directory for a job that produces `dest` (downloads to unpack, parts to join),
/// with the temporary files' guarantees: named `.NAME.gguf-tmp.PID.N` beside `dest`, listed
/// in the registry so [`remove_temp_files`] deletes it, locked (through a `.lock` file inside)
/// while in use so that one left by a killed process is removed by the next `TempDir` for the
/// same `dest`. Dropping it deletes it with its content.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
    /// Holds the lock that marks the directory as in use.
    _lock: File,
}

impl TempDir {
    /// Creates the working directory for `dest` (which need not exist), first removing
    /// abandoned ones of earlier runs.
    pub fn beside(dest: &Path) -> Result<TempDir> {
        let path = claim_temp_name(dest, |path, registry| {
            match fs::create_dir(path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
                Err(e) => return Err(Error::Io(e).in_file(path)),
            }
            registry.live_dirs.push(path.to_path_buf());
            Ok(Some(()))
        })?
        .0;
        // Dropped on an error below: the directory goes.
        let dir = TempDir {
            _lock: File::create(path.join(DIR_LOCK))?,
            path,
        };
        match dir._lock.lock() {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
            Err(e) => return Err(e.into()),
        }
        Ok(dir)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let mut registry = registry();
        let _ = fs::remove_dir_all(&self.path);
        registry.live_dirs.retain(|p| *p != self.path);
    }
}

/// The file inside a [`TempDir`] whose lock marks it as in use.
const DIR_LOCK: &str = ".lock";

/// The part of a temporary file's name between the destination's name and `PID.N`.
const TEMP_MARK: &str = ".gguf-tmp.";

/// Temporary files of this process that exist now.
pub(crate) struct Registry {
    /// Set by [`remove_temp_files`]: no more temporary files, no more renames.
    pub(crate) closed: bool,
    /// Temporary files ([`TempFile`]).
    pub(crate) live: Vec<PathBuf>,
    /// Temporary directories ([`TempDir`]).
    pub(crate) live_dirs: Vec<PathBuf>,
    /// Directories made for staged files ([`crate::StagedFiles::create_dirs`]), in the order
    /// made.
    pub(crate) new_dirs: Vec<PathBuf>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    closed: false,
    live: Vec::new(),
    live_dirs: Vec::new(),
    new_dirs: Vec::new(),
});

pub(crate) fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

pub(crate) fn interrupted() -> Error {
    Error::Io(io::Error::new(
        io::ErrorKind::Interrupted,
        "interrupted: the temporary files were removed",
    ))
}

/// A registered temporary file; dropping it removes the name (if still there) from the disk
/// and from the registry, then closes the file, which releases its lock.
#[derive(Debug)]
pub(crate) struct TempFile {
    /// Its name.
    pub(crate) path: PathBuf,
    /// The file, once written (closing it releases the lock).
    pub(crate) file: Option<File>,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let mut registry = registry();
        let _ = fs::remove_file(&self.path);
        registry.live.retain(|p| *p != self.path);
    }
}

/// The directory and the name of `target`.
fn dir_and_name(target: &Path) -> Result<(PathBuf, OsString)> {
    let name = target
        .file_name()
        .ok_or_else(|| Error::Invalid(format!("{} does not name a file", target.display())))?;
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((dir, name.to_os_string()))
}

/// `.NAME.gguf-tmp.PID.N`.
fn temp_name(name: &OsStr, pid: u32, n: u64) -> OsString {
    let mut s = OsString::from(".");
    s.push(name);
    s.push(TEMP_MARK);
    s.push(format!("{pid}.{n}"));
    s
}

/// Whether `candidate` is exactly `.NAME.gguf-tmp.PID.N` for this `name`.
fn is_temp_of(candidate: &OsStr, name: &OsStr) -> bool {
    let rest = candidate
        .as_encoded_bytes()
        .strip_prefix(b".")
        .and_then(|r| r.strip_prefix(name.as_encoded_bytes()))
        .and_then(|r| r.strip_prefix(TEMP_MARK.as_bytes()));
    let Some(rest) = rest else {
        return false;
    };
    let number = |f: &[u8]| !f.is_empty() && f.len() <= 20 && f.iter().all(u8::is_ascii_digit);
    let mut fields = rest.split(|&b| b == b'.');
    matches!(
        (fields.next(), fields.next(), fields.next()),
        (Some(pid), Some(n), None) if number(pid) && number(n)
    )
}

/// Removes the temporary files for `name` in `dir` whose writer is gone: those whose lock can
/// be taken. Best effort: whatever cannot be checked is left alone.
fn remove_stale_temps(dir: &Path, name: &OsStr) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        if is_temp_of(&file_name, name) {
            let _ = remove_if_abandoned(&dir.join(file_name));
        }
    }
}

fn remove_if_abandoned(path: &Path) -> io::Result<()> {
    let before = fs::symlink_metadata(path)?;
    if before.is_dir() {
        return remove_dir_if_abandoned(path);
    }
    if !before.is_file() {
        return Ok(());
    }
    let file = File::open(path)?;
    if !same_inode(&before, &file.metadata()?) {
        return Ok(());
    }
    // Held by its writer (this process's included: another open file's lock conflicts), or
    // locks unsupported here: leave it.
    if file.try_lock().is_err() {
        return Ok(());
    }
    if same_inode(&fs::symlink_metadata(path)?, &before) {
        fs::remove_file(path)?;
    }
    Ok(())
}

/// A [`TempDir`] whose lock can be taken: its process is gone. One whose lock file is missing
/// is being created (or its creator died in between); it is left alone.
fn remove_dir_if_abandoned(path: &Path) -> io::Result<()> {
    let lock = File::open(path.join(DIR_LOCK))?;
    if lock.try_lock().is_err() {
        return Ok(());
    }
    fs::remove_dir_all(path)
}

/// Picks the next free `.NAME.gguf-tmp.PID.N` beside `target` (after removing abandoned ones)
/// and has `create` make it, under the registry's lock so that a signal handler's
/// [`remove_temp_files`] either sees what is created and registered there or stops it from
/// being created. `create` returns `None` when the name is taken (the next is tried).
fn claim_temp_name<T>(
    target: &Path,
    mut create: impl FnMut(&Path, &mut Registry) -> Result<Option<T>>,
) -> Result<(PathBuf, T)> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let (dir, name) = dir_and_name(target)?;
    remove_stale_temps(&dir, &name);
    let pid = std::process::id();
    loop {
        let path = dir.join(temp_name(
            &name,
            pid,
            COUNTER.fetch_add(1, Ordering::Relaxed),
        ));
        let mut registry = registry();
        if registry.closed {
            return Err(interrupted());
        }
        if let Some(made) = create(&path, &mut registry)? {
            return Ok((path, made));
        }
    }
}

/// Creates, locks and registers a temporary file for `target`: the registered name (which
/// removes the file when dropped) and the open file to write. `private`: readable by its
/// owner only while written (it replaces a file whose mode is applied at the end).
pub(crate) fn create_temp(target: &Path, private: bool) -> Result<(TempFile, File)> {
    let (path, file) = claim_temp_name(target, |path, registry| {
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            // The content of a file being replaced is readable by no one else while written;
            // the replaced file's mode is applied when it is complete.
            options.mode(if private { 0o600 } else { 0o666 });
        }
        #[cfg(not(unix))]
        let _ = private;
        let file = match options.open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        match lock_new(&file, path) {
            Ok(true) => {
                registry.live.push(path.to_path_buf());
                Ok(Some(file))
            }
            Ok(false) => Ok(None),
            Err(e) => {
                let _ = fs::remove_file(path);
                Err(e.into())
            }
        }
    })?;
    Ok((TempFile { path, file: None }, file))
}

/// Locks a new temporary file; false if another process took it for stale (it locked it
/// between our creating and locking it) and removed it.
fn lock_new(file: &File, path: &Path) -> io::Result<bool> {
    match file.lock() {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
        Err(e) => return Err(e),
    }
    match fs::symlink_metadata(path) {
        Ok(m) => Ok(same_inode(&m, &file.metadata()?)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_names_are_recognised_exactly() {
        let name = OsStr::new("m.gguf");
        let ours = temp_name(name, 123, 4);
        assert_eq!(ours, ".m.gguf.gguf-tmp.123.4");
        assert!(is_temp_of(&ours, name));
        for other in [
            ".m.gguf.gguf-tmp.123.4.x",
            ".m.gguf.gguf-tmp.123.",
            ".m.gguf.gguf-tmp..4",
            ".m.gguf.gguf-tmp.12a.4",
            ".m.gguf.gguf-tmp.123",
            "m.gguf.gguf-tmp.123.4",
            ".n.gguf.gguf-tmp.123.4",
            ".m.gguf.gguf-tmp.5.gguf-tmp.1.2",
            ".m.gguf.123.4.tmp",
        ] {
            assert!(!is_temp_of(OsStr::new(other), name), "{other}");
        }
        // A temp file of a destination whose own name looks like a temp file's.
        assert!(is_temp_of(
            OsStr::new(".m.gguf.gguf-tmp.5.gguf-tmp.1.2"),
            OsStr::new("m.gguf.gguf-tmp.5")
        ));
    }
}
