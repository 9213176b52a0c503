//! What every command shares for its input and output: stdout writes that report a closed
//! pipe instead of panicking, the bounded reading of input files, and progress bars.

use std::io::Read as _;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use indicatif::{ProgressBar, ProgressStyle};

/// `print!` that returns the `io::Result` of the write instead of panicking, so a closed pipe
/// reaches `main` as an error (which ends the command quietly).
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use out;

/// `println!` that returns the `io::Result` of the write; see [`out!`].
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}
pub(crate) use outln;

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
pub fn read_input_file(path: &Path) -> Result<Vec<u8>> {
    let file = gguf_fsutil::open_regular(path).with_context(|| format!("{}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("reading {}", path.display()))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        bail!(
            "{}: larger than the {} GiB this command reads",
            path.display(),
            MAX_INPUT_BYTES >> 30
        );
    }
    Ok(bytes)
}

/// A bar for a job measured in bytes, labelled `what`; its length is set as the job reports.
pub fn bytes_bar(what: &str) -> ProgressBar {
    let bar = ProgressBar::new(0).with_style(
        ProgressStyle::with_template("{msg} [{bar:30}] {bytes}/{total_bytes} {eta}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_message(what.to_string());
    bar
}
