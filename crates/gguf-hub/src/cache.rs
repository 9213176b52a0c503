//! Where fetched models are kept.

use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use crate::KnownModel;

/// Where fetched models live: `$GGUF_CACHE` when set and not empty, else `~/.cache/gguf`
/// (relative to the working directory when `$HOME` is unset too).
pub fn cache_dir() -> PathBuf {
    cache_dir_from(std::env::var_os("GGUF_CACHE"), std::env::var_os("HOME"))
}

/// [`cache_dir`] given the two variables it reads, so the rule is testable without changing
/// the process's environment (which other threads read).
fn cache_dir_from(gguf_cache: Option<OsString>, home: Option<OsString>) -> PathBuf {
    if let Some(dir) = gguf_cache.filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = home.map(PathBuf::from).unwrap_or_else(|| ".".into());
    home.join(".cache").join("gguf")
}

impl KnownModel {
    /// The model's path in the cache (present or not).
    pub fn cached_path(&self) -> PathBuf {
        cache_dir().join(format!("{}.gguf", self.name))
    }

    /// The cached path if the file is there with the right size. Only a verified file is ever
    /// renamed into the cache, so the size check guards against a file put there by hand, not
    /// against a half-written one.
    pub fn cached(&self) -> Option<PathBuf> {
        let p = self.cached_path();
        has_size(&p, self.size).then_some(p)
    }
}

/// Whether `path` is a file of `size` bytes.
pub(crate) fn has_size(path: &Path, size: u64) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == size)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_cache_wins_unless_empty() {
        let home = Some(OsString::from("/home/u"));
        assert_eq!(
            cache_dir_from(Some("/models".into()), home.clone()),
            PathBuf::from("/models")
        );
        assert_eq!(
            cache_dir_from(Some("".into()), home.clone()),
            PathBuf::from("/home/u/.cache/gguf")
        );
        assert_eq!(
            cache_dir_from(None, home),
            PathBuf::from("/home/u/.cache/gguf")
        );
        assert_eq!(cache_dir_from(None, None), PathBuf::from("./.cache/gguf"));
    }
}
