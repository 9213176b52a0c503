//! Reading a checkpoint's small text files (JSON configs, templates, model cards), bounded in
//! size so that a hostile file cannot make us allocate without limit, and noting every file a
//! conversion reads ([`Reads`]) so that its output is never written over one of them.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use crate::error::{Error, Result};

/// The largest JSON or text file read (`tokenizer.json` files reach tens of MiB).
pub(crate) const MAX_TEXT_BYTES: u64 = 256 << 20;

pub(crate) fn file_error(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Unsupported(format!("{}: {what}", path.display()))
}

/// The files and directories a checkpoint's conversion has read (or mapped), each once, in
/// the order first read: the inputs its output must not be written over. Every read of the
/// checkpoint goes through here (or notes its path here first, for the maps and the
/// SentencePiece model).
#[derive(Debug, Default)]
pub(crate) struct Reads(Mutex<Vec<PathBuf>>);

impl Reads {
    /// Notes `path` as read.
    pub(crate) fn note(&self, path: &Path) {
        let mut list = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !list.iter().any(|p| p == path) {
            list.push(path.to_path_buf());
        }
    }

    /// Everything noted so far.
    pub(crate) fn list(&self) -> Vec<PathBuf> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The UTF-8 text of `path`, or `None` when there is no such file.
    pub(crate) fn text_if_exists(&self, path: &Path) -> Result<Option<String>> {
        if !path.is_file() {
            return Ok(None);
        }
        self.note(path);
        let len = std::fs::metadata(path)
            .map_err(|e| file_error(path, e))?
            .len();
        if len > MAX_TEXT_BYTES {
            return Err(file_error(
                path,
                format!(
                    "{len} bytes is too large for a checkpoint's text file (at most {MAX_TEXT_BYTES})"
                ),
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| file_error(path, e))?;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|e| file_error(path, format!("not UTF-8 text: {e}")))
    }

    /// The JSON in `path`, or `None` when there is no such file.
    pub(crate) fn json_if_exists(&self, path: &Path) -> Result<Option<serde_json::Value>> {
        match self.text_if_exists(path)? {
            None => Ok(None),
            Some(text) => parse_json(path, &text).map(Some),
        }
    }

    /// The JSON in `path`, which must exist.
    pub(crate) fn json(&self, path: &Path) -> Result<serde_json::Value> {
        self.json_if_exists(path)?
            .ok_or_else(|| file_error(path, "no such file"))
    }

    /// The text of the `tokenizer.json` at `path`, or `None` when there is no such file,
    /// checked by `gguf-tokenizer` while it is read
    /// ([`gguf_tokenizer::Tokenizer::check_huggingface_json`]): a malformed merge fails at
    /// once, naming it, before any parse reads millions of merges into memory. Every reader of
    /// `tokenizer.json` goes through here.
    pub(crate) fn tokenizer_json_text(&self, path: &Path) -> Result<Option<String>> {
        let Some(text) = self.text_if_exists(path)? else {
            return Ok(None);
        };
        gguf_tokenizer::Tokenizer::check_huggingface_json(&text)
            .map_err(|e| file_error(path, e))?;
        Ok(Some(text))
    }

    /// The JSON of the `tokenizer.json` at `path` ([`Reads::tokenizer_json_text`]), or `None`.
    pub(crate) fn tokenizer_json(&self, path: &Path) -> Result<Option<serde_json::Value>> {
        match self.tokenizer_json_text(path)? {
            None => Ok(None),
            Some(text) => parse_json(path, &text).map(Some),
        }
    }
}

/// The JSON of `text`, read from `path`: an error names the file and shows the line where
/// the JSON goes wrong (`"rope_theta": NaN` is Python's JSON, not JSON).
pub(crate) fn parse_json(path: &Path, text: &str) -> Result<serde_json::Value> {
    serde_json::from_str(text).map_err(|e| json_error(path, text, &e))
}

/// `path`'s JSON error `e`, with the line it is on.
pub(crate) fn json_error(path: &Path, text: &str, e: &serde_json::Error) -> Error {
    const SHOWN: usize = 80;
    let line = text
        .lines()
        .nth(e.line().saturating_sub(1))
        .map(str::trim)
        .filter(|l| !l.is_empty());
    let shown = match line {
        None => String::new(),
        Some(l) if l.chars().count() > SHOWN => {
            format!(
                " (line {}: `{}...`)",
                e.line(),
                l.chars().take(SHOWN).collect::<String>()
            )
        }
        Some(l) => format!(" (line {}: `{l}`)", e.line()),
    };
    file_error(path, format!("not valid JSON: {e}{shown}"))
}
