//! Opening files: a read-only memory map plus the parse that borrows from it.

use std::path::{Path, PathBuf};

use memmap2::Mmap;

use crate::error::Result;
use crate::reader::GgufFile;

/// A GGUF file mapped into memory and parsed; [`MappedGguf::file`] borrows from the map.
///
/// ```no_run
/// let mapped = gguf_format::GgufFile::open("model.gguf")?;
/// let file = mapped.file();
/// println!("{} tensors", file.tensors().len());
/// # Ok::<(), gguf_format::Error>(())
/// ```
pub struct MappedGguf {
    // Declared before `map` so it is dropped first: it borrows from the map.
    file: GgufFile<'static>,
    map: Mmap,
    path: PathBuf,
}

impl std::fmt::Debug for MappedGguf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedGguf")
            .field("path", &self.path)
            .field("len", &self.map.len())
            .finish_non_exhaustive()
    }
}

impl MappedGguf {
    /// Maps and parses the file at `path`; errors name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<MappedGguf> {
        let path = path.as_ref();
        Self::open_inner(path).map_err(|e| e.in_file(path))
    }

    fn open_inner(path: &Path) -> Result<MappedGguf> {
        let handle = gguf_fsutil::open_regular(path)?;
        // SAFETY: the map is read-only and private to this process. Another process that
        // truncates or rewrites the file while it is mapped would change bytes under us; that is
        // the documented caveat of every mmap-based model loader (llama.cpp's included), and
        // this crate's own tools never write over a file they read (they write a new file and
        // rename it).
        let map = unsafe { Mmap::map(&handle)? };
        // SAFETY: the slice points into the mapping, whose address does not change when
        // `MappedGguf` moves and which lives until `MappedGguf` is dropped, after `file`
        // (field order). `file` is only handed out through `file()`, which shortens its
        // lifetime to the borrow of `self`, so no reference into the map outlives it.
        let bytes: &'static [u8] = unsafe { std::slice::from_raw_parts(map.as_ptr(), map.len()) };
        let file = GgufFile::parse(bytes)?;
        Ok(MappedGguf {
            file,
            map,
            path: path.to_path_buf(),
        })
    }

    /// The parsed file, borrowing from the map.
    pub fn file(&self) -> &GgufFile<'_> {
        &self.file
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The size of the file in bytes.
    pub fn len(&self) -> u64 {
        self.map.len() as u64
    }

    /// Whether the file is empty (never true for a file that parsed).
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

impl GgufFile<'static> {
    /// Memory-maps the file at `path` and parses it without copying.
    ///
    /// Returns the owner of the map; call [`MappedGguf::file`] to read it. Errors start with
    /// the file's path.
    pub fn open(path: impl AsRef<Path>) -> Result<MappedGguf> {
        MappedGguf::open(path)
    }
}

/// Any file mapped read-only into memory, for formats other than GGUF (the legacy GGML files
/// and safetensors checkpoints converters read).
///
/// ```no_run
/// let mapped = gguf_format::MappedBytes::open("model.bin")?;
/// println!("{} bytes", mapped.bytes().len());
/// # Ok::<(), gguf_format::Error>(())
/// ```
pub struct MappedBytes {
    map: Mmap,
    path: PathBuf,
}

impl std::fmt::Debug for MappedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MappedBytes")
            .field("path", &self.path)
            .field("len", &self.map.len())
            .finish()
    }
}

impl MappedBytes {
    /// Maps the regular file at `path`; errors name the file.
    pub fn open(path: impl AsRef<Path>) -> Result<MappedBytes> {
        let path = path.as_ref();
        let open = || -> Result<Mmap> {
            let handle = gguf_fsutil::open_regular(path)?;
            // SAFETY: read-only and private, with the caveat `MappedGguf::open` states: another
            // process rewriting the file while it is mapped would change bytes under us.
            Ok(unsafe { Mmap::map(&handle)? })
        };
        let map = open().map_err(|e| e.in_file(path))?;
        Ok(MappedBytes {
            map,
            path: path.to_path_buf(),
        })
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
