//! Reading a checkpoint's small text files (JSON configs, templates, model cards), bounded in
//! size so that a hostile file cannot make us allocate without limit.

use std::path::Path;

use crate::error::{Error, Result};

/// The largest JSON or text file read (`tokenizer.json` files reach tens of MiB).
pub(crate) const MAX_TEXT_BYTES: u64 = 256 << 20;

pub(crate) fn file_error(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Unsupported(format!("{}: {what}", path.display()))
}

/// The UTF-8 text of `path`, or `None` when there is no such file.
pub(crate) fn read_text_if_exists(path: &Path) -> Result<Option<String>> {
    if !path.is_file() {
        return Ok(None);
    }
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

/// The JSON in `path`, or `None` when there is no such file.
pub(crate) fn read_json_if_exists(path: &Path) -> Result<Option<serde_json::Value>> {
    match read_text_if_exists(path)? {
        None => Ok(None),
        Some(text) => parse_json(path, &text).map(Some),
    }
}

/// The text of the `tokenizer.json` at `path`, or `None` when there is no such file, checked
/// by `gguf-tokenizer` while it is read ([`gguf_tokenizer::Tokenizer::check_huggingface_json`]):
/// a malformed merge fails at once, naming it, before any parse reads millions of merges into
/// memory. Every reader of `tokenizer.json` goes through here.
pub(crate) fn read_tokenizer_json_text(path: &Path) -> Result<Option<String>> {
    let Some(text) = read_text_if_exists(path)? else {
        return Ok(None);
    };
    gguf_tokenizer::Tokenizer::check_huggingface_json(&text).map_err(|e| file_error(path, e))?;
    Ok(Some(text))
}

/// The JSON of the `tokenizer.json` at `path` ([`read_tokenizer_json_text`]), or `None`.
pub(crate) fn read_tokenizer_json(path: &Path) -> Result<Option<serde_json::Value>> {
    match read_tokenizer_json_text(path)? {
        None => Ok(None),
        Some(text) => parse_json(path, &text).map(Some),
    }
}

/// The JSON in `path`, which must exist.
pub(crate) fn read_json(path: &Path) -> Result<serde_json::Value> {
    read_json_if_exists(path)?.ok_or_else(|| file_error(path, "no such file"))
}
