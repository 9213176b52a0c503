//! Library side of the `gguf` command: the registry of real models it can fetch, the
//! rendering of `gguf inspect`, and the tensor commands. The binary in `main.rs` is a thin layer of argument parsing.

// Everything written to stdout goes through `out!`/`outln!`, which return the write's error:
// `print!` panics when the reader has gone (`gguf inspect M | head -1`).
#![deny(clippy::print_stdout)]

pub mod inspect;
pub mod models;
pub mod run;
pub mod tensors;

/// `print!` that returns the `io::Result` of the write instead of panicking, so a closed pipe
/// reaches `main` as an error (which ends the command quietly).
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `println!` that returns the `io::Result` of the write; see [`out!`].
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// Whether `error` (or any error it wraps) is a write to a pipe whose reader has gone.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The most bytes an input file other than a model (text to tokenize or score, a conversation)
/// may have: more than any tokenizer run or chat needs, and a bound on what is read into
/// memory.
pub const MAX_INPUT_BYTES: u64 = 1 << 30;

/// Reads an input file whole: a regular file of at most [`MAX_INPUT_BYTES`]. A FIFO, device
/// (`/dev/zero`) or directory is refused before it is read, with an error naming the path.
pub fn read_input_file(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    use anyhow::Context as _;
    use std::io::Read as _;
    let file = gguf_format::open_regular(path).with_context(|| format!("{}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        anyhow::bail!(
            "{}: larger than the {} GiB this command reads",
            path.display(),
            MAX_INPUT_BYTES >> 30
        );
    }
    Ok(bytes)
}
