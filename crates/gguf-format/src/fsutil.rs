//! Writing files so that a failure, an interruption or a kill at any point leaves every
//! destination as it was, and so that a write never replaces what it should not.
//!
//! Every file this crate (and the `gguf` command) writes goes through here:
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

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::error::{Error, Refusal, Result};

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
/// `write` gets a buffered writer; if it fails, or anything after it fails, the temporary file
/// is removed and `dest` is left as it was. Errors name `dest`. See the [module](self) for
/// what happens to modes, owners, symbolic links and temporary files.
pub fn write_atomic<T>(
    dest: &Path,
    mode: WriteMode,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<T> {
    let mut staged = StagedFiles::new();
    let value = staged.stage(dest, mode, write)?;
    staged.commit()?;
    Ok(value)
}

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

/// Files written to temporary files and put in place together by [`StagedFiles::commit`];
/// dropped without a commit, they are removed and no destination changes (and the directories
/// [`StagedFiles::create_dirs`] made for them are removed again).
///
/// ```
/// use gguf_format::fsutil::{StagedFiles, WriteMode};
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let mut staged = StagedFiles::new();
/// for name in ["a.txt", "b.txt"] {
///     staged.stage(&dir.path().join(name), WriteMode::CreateNew, |out| Ok(out.write_all(b"hi")?))?;
/// }
/// assert!(!dir.path().join("a.txt").exists());
/// staged.commit()?;
/// assert!(dir.path().join("a.txt").exists() && dir.path().join("b.txt").exists());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct StagedFiles {
    files: Vec<Staged>,
    /// The directories [`StagedFiles::create_dirs`] made, in the order made.
    dirs: Vec<PathBuf>,
}

#[derive(Debug)]
struct Staged {
    /// The destination as the caller named it.
    dest: PathBuf,
    mode: WriteMode,
    /// Where the file goes: `dest`, or the final target of the symbolic link at `dest`.
    target: PathBuf,
    temp: TempFile,
}

impl StagedFiles {
    /// No files yet.
    pub fn new() -> StagedFiles {
        StagedFiles::default()
    }

    /// Checks `dest` against `mode` and writes its new content (through `write`) to a
    /// temporary file beside it; nothing at `dest` changes until [`commit`](Self::commit).
    /// On an error the temporary file is removed (the others stay staged). Errors name `dest`.
    pub fn stage<T>(
        &mut self,
        dest: &Path,
        mode: WriteMode,
        write: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
    ) -> Result<T> {
        let (staged, value) = stage_one(dest, mode, write).map_err(|e| e.in_file(dest))?;
        self.files.push(staged);
        Ok(value)
    }

    /// Creates `dir` and whichever of its parents are missing, for files to be staged in it.
    /// What this creates is removed again (each directory only if empty, deepest first) when
    /// the files are dropped without a commit, when the commit fails, or by
    /// [`remove_temp_files`]; a directory that was already there is never removed.
    pub fn create_dirs(&mut self, dir: &Path) -> Result<()> {
        let missing: Vec<&Path> = dir
            .ancestors()
            .filter(|p| !p.as_os_str().is_empty())
            .take_while(|p| {
                matches!(fs::symlink_metadata(p), Err(e) if e.kind() == io::ErrorKind::NotFound)
            })
            .collect();
        for path in missing.into_iter().rev() {
            // Under the registry's lock, so that a signal handler's `remove_temp_files` either
            // sees the directory registered or stops it from being made.
            let mut registry = registry();
            if registry.closed {
                return Err(interrupted());
            }
            match fs::create_dir(path) {
                Ok(()) => {
                    registry.new_dirs.push(path.to_path_buf());
                    self.dirs.push(path.to_path_buf());
                }
                // Made by someone else meanwhile: not ours to remove.
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(Error::Io(e).in_file(path)),
            }
        }
        let meta = fs::metadata(dir).map_err(|e| Error::Io(e).in_file(dir))?;
        if !meta.is_dir() {
            let e = io::Error::new(
                io::ErrorKind::NotADirectory,
                "exists and is not a directory",
            );
            return Err(Error::Io(e).in_file(dir));
        }
        Ok(())
    }

    /// Puts every staged file in place, in the order staged, after checking each destination
    /// against its mode again. If one fails, the files this commit created are removed again
    /// (a file it replaced stays replaced: the old content is gone), every temporary file is
    /// removed, and so are the directories [`create_dirs`](Self::create_dirs) made.
    pub fn commit(mut self) -> Result<()> {
        self.place_all()?;
        // The directories now hold the files: they stay.
        let mut registry = registry();
        registry.new_dirs.retain(|d| !self.dirs.contains(d));
        self.dirs.clear();
        Ok(())
        // `self` drops here: the temporary files' names are removed (for a file put in place,
        // the name is already gone or is a second link to the destination).
    }

    fn place_all(&self) -> Result<()> {
        // Held throughout, so that a signal handler's `remove_temp_files` runs before or after
        // all the renames, never between two of them.
        let registry = registry();
        if registry.closed {
            return Err(interrupted());
        }
        let mut created: Vec<&Path> = Vec::new();
        for staged in &self.files {
            match place(staged) {
                Ok(true) => created.push(&staged.target),
                Ok(false) => {}
                Err(e) => {
                    for path in created {
                        let _ = fs::remove_file(path);
                    }
                    return Err(e.in_file(&staged.dest));
                }
            }
        }
        Ok(())
    }
}

impl Drop for StagedFiles {
    fn drop(&mut self) {
        // The temporary files first (each takes the registry's lock), then the directories
        // made for them, deepest first; one that is not empty is not ours alone and stays.
        self.files.clear();
        if self.dirs.is_empty() {
            return;
        }
        let mut registry = registry();
        for dir in self.dirs.iter().rev() {
            let _ = fs::remove_dir(dir);
        }
        registry.new_dirs.retain(|d| !self.dirs.contains(d));
    }
}

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

/// The part of a temporary file's name between the destination's name and `PID.N`.
const TEMP_MARK: &str = ".gguf-tmp.";

/// Temporary files of this process that exist now.
struct Registry {
    /// Set by [`remove_temp_files`]: no more temporary files, no more renames.
    closed: bool,
    live: Vec<PathBuf>,
    /// Temporary directories ([`TempDir`]).
    live_dirs: Vec<PathBuf>,
    /// Directories made for staged files ([`StagedFiles::create_dirs`]), in the order made.
    new_dirs: Vec<PathBuf>,
}

static REGISTRY: Mutex<Registry> = Mutex::new(Registry {
    closed: false,
    live: Vec::new(),
    live_dirs: Vec::new(),
    new_dirs: Vec::new(),
});

fn registry() -> MutexGuard<'static, Registry> {
    REGISTRY.lock().unwrap_or_else(PoisonError::into_inner)
}

fn interrupted() -> Error {
    Error::Io(io::Error::new(
        io::ErrorKind::Interrupted,
        "interrupted: the temporary files were removed",
    ))
}

/// A registered temporary file; dropping it removes the name (if still there) from the disk
/// and from the registry, then closes the file, which releases its lock.
#[derive(Debug)]
struct TempFile {
    path: PathBuf,
    file: Option<File>,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let mut registry = registry();
        let _ = fs::remove_file(&self.path);
        registry.live.retain(|p| *p != self.path);
    }
}

/// Where a write to `dest` goes, and the regular file there now.
struct Target {
    path: PathBuf,
    existing: Option<Metadata>,
}

fn resolve(dest: &Path, mode: WriteMode) -> Result<Target> {
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
fn same_inode(a: &Metadata, b: &Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    a.dev() == b.dev() && a.ino() == b.ino()
}

#[cfg(not(unix))]
fn same_inode(_: &Metadata, _: &Metadata) -> bool {
    true
}

fn stage_one<T>(
    dest: &Path,
    mode: WriteMode,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T>,
) -> Result<(Staged, T)> {
    let target = resolve(dest, mode)?;
    let mut temp = create_temp(&target.path, target.existing.is_some())?;
    let file = temp.file.take().expect("a new temporary file is open");
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let value = write(&mut out)?;
    let file = out.into_inner().map_err(|e| e.into_error())?;
    if let Some(old) = &target.existing {
        copy_owner_and_mode(&file, old)?;
    }
    file.sync_all()?;
    temp.file = Some(file);
    let staged = Staged {
        dest: dest.to_path_buf(),
        mode,
        target: target.path,
        temp,
    };
    Ok((staged, value))
}

/// Gives the new file the replaced file's owner and group where permitted (only root may give
/// a file away; an owner may still pick another of their groups), then its permission bits.
#[cfg(unix)]
fn copy_owner_and_mode(file: &File, old: &Metadata) -> io::Result<()> {
    use std::os::unix::fs::{fchown, MetadataExt, PermissionsExt};
    let new = file.metadata()?;
    let not_permitted = |e: &io::Error| {
        matches!(
            e.kind(),
            io::ErrorKind::PermissionDenied | io::ErrorKind::Unsupported
        )
    };
    if new.uid() != old.uid() || new.gid() != old.gid() {
        match fchown(file, Some(old.uid()), Some(old.gid())) {
            Ok(()) => {}
            Err(e) if not_permitted(&e) => {
                if new.gid() != old.gid() {
                    match fchown(file, None, Some(old.gid())) {
                        Err(e) if !not_permitted(&e) => return Err(e),
                        _ => {}
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    // After the change of owner, which clears the set-user-ID and set-group-ID bits.
    file.set_permissions(fs::Permissions::from_mode(old.mode() & 0o7777))
}

#[cfg(not(unix))]
fn copy_owner_and_mode(file: &File, old: &Metadata) -> io::Result<()> {
    file.set_permissions(old.permissions())
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

fn create_temp(target: &Path, private: bool) -> Result<TempFile> {
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
    Ok(TempFile {
        path,
        file: Some(file),
    })
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

/// Puts a staged file in place; true if it created the destination (rather than replaced it).
fn place(staged: &Staged) -> Result<bool> {
    let now = resolve(&staged.dest, staged.mode)?;
    if now.path != staged.target {
        return Err(Error::Invalid(format!(
            "{} changed while it was written: it now leads to {}",
            staged.dest.display(),
            now.path.display()
        )));
    }
    let temp = &staged.temp.path;
    match staged.mode {
        WriteMode::CreateNew => {
            // A link fails if the name exists, where a rename would replace it.
            match fs::hard_link(temp, &now.path) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    return Err(Error::Refused {
                        path: staged.dest.clone(),
                        reason: Refusal::Exists,
                    })
                }
                // File systems without hard links.
                Err(_) => fs::rename(temp, &now.path)?,
            }
            let _ = fs::remove_file(temp);
            Ok(true)
        }
        WriteMode::Replace { .. } => {
            fs::rename(temp, &now.path)?;
            Ok(now.existing.is_none())
        }
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
