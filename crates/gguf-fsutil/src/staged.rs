//! Files written to temporary files and put in place together.

use std::fs::{self, File, Metadata};
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};

use crate::check::resolve;
use crate::error::{Error, Refusal, Result};
use crate::temp::{create_temp, interrupted, registry, TempFile};
use crate::WriteMode;

/// Files written to temporary files and put in place together by [`StagedFiles::commit`];
/// dropped without a commit, they are removed and no destination changes (and the directories
/// [`StagedFiles::create_dirs`] made for them are removed again).
///
/// ```
/// use gguf_fsutil::{Error, StagedFiles, WriteMode};
/// use std::io::Write;
/// let dir = tempfile::tempdir()?;
/// let mut staged = StagedFiles::new();
/// for name in ["a.txt", "b.txt"] {
///     let dest = dir.path().join(name);
///     staged.stage(&dest, WriteMode::CreateNew, |out| Ok::<_, Error>(out.write_all(b"hi")?))?;
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
    /// On an error the temporary file is removed (the others stay staged). An error of
    /// `write` is returned unchanged; this crate's own errors name `dest`.
    pub fn stage<T, E: From<Error>>(
        &mut self,
        dest: &Path,
        mode: WriteMode,
        write: impl FnOnce(&mut BufWriter<File>) -> Result<T, E>,
    ) -> Result<T, E> {
        let (staged, value) = stage_one(dest, mode, write)?;
        self.files.push(staged);
        Ok(value)
    }

    /// Creates `dir` and whichever of its parents are missing, for files to be staged in it.
    /// What this creates is removed again (each directory only if empty, deepest first) when
    /// the files are dropped without a commit, when the commit fails, or by
    /// [`remove_temp_files`](crate::remove_temp_files); a directory that was already there is never removed.
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

/// Writes the temporary file of one staged file: `write`'s errors as they are, the others
/// naming `dest`.
fn stage_one<T, E: From<Error>>(
    dest: &Path,
    mode: WriteMode,
    write: impl FnOnce(&mut BufWriter<File>) -> Result<T, E>,
) -> Result<(Staged, T), E> {
    let in_dest = |e: Error| E::from(e.in_file(dest));
    let target = resolve(dest, mode).map_err(in_dest)?;
    let (mut temp, file) = create_temp(&target.path, target.existing.is_some()).map_err(in_dest)?;
    let mut out = BufWriter::with_capacity(1 << 20, file);
    let value = write(&mut out)?;
    let finish = || -> Result<File> {
        let file = out.into_inner().map_err(|e| e.into_error())?;
        if let Some(old) = &target.existing {
            copy_owner_and_mode(&file, old)?;
        }
        file.sync_all()?;
        Ok(file)
    };
    temp.file = Some(finish().map_err(in_dest)?);
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
