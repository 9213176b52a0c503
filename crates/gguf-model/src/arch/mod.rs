//! The architectures, one module each, and the registry that names them.
//!
//! An architecture owns its hyperparameters (read from `{arch}.*` with the spec's defaults),
//! its tensor table (names and shapes, checked at load with errors naming the tensor) and its
//! forward pass, built from the shared steps of [`crate::forward`] and [`crate::ops`].
//! Adding one means a module here, a line in [`ARCHITECTURES`], and its tests.

mod bert;
mod deepseek2;
mod gemma;
mod gpt_oss;
mod llama;
mod phi2;
mod phi3;

use gguf_format::split::SplitSet;

use crate::error::{ModelError, Result};
use crate::forward::Pass;
use crate::hparams::Hparams;
use crate::weights::Loader;

/// A loaded architecture: its hyperparameters and tensors, and how it computes a batch.
pub(crate) trait Architecture: Send + Sync {
    /// The hyperparameters every architecture has.
    fn hparams(&self) -> &Hparams;

    /// Runs one batch (see [`Pass`]).
    fn forward(&self, pass: &mut Pass<'_>) -> Result<()>;
}

/// Reads an architecture's hyperparameters and tensors from a file (or split set) named
/// `name` in errors; `arch` is the name it is registered under.
type LoadFn = fn(l: &Loader<'_>, arch: &'static str) -> Result<Box<dyn Architecture>>;

/// One registered architecture.
pub(crate) struct Entry {
    /// `general.architecture`.
    pub name: &'static str,
    pub load: LoadFn,
}

/// Every architecture this crate runs.
pub(crate) const ARCHITECTURES: &[Entry] = &[
    Entry {
        name: "llama",
        load: llama::load,
    },
    Entry {
        name: "mistral",
        load: llama::load,
    },
    Entry {
        name: "qwen2",
        load: llama::load,
    },
    Entry {
        name: "qwen3",
        load: llama::load,
    },
    Entry {
        name: "qwen2moe",
        load: llama::load,
    },
    Entry {
        name: "qwen3moe",
        load: llama::load,
    },
    Entry {
        name: "olmoe",
        load: llama::load,
    },
    Entry {
        name: "granite",
        load: llama::load,
    },
    Entry {
        name: "granitemoe",
        load: llama::load,
    },
    Entry {
        name: "gemma",
        load: gemma::load,
    },
    Entry {
        name: "gemma2",
        load: gemma::load,
    },
    Entry {
        name: "gemma3",
        load: gemma::load,
    },
    Entry {
        name: "phi2",
        load: phi2::load,
    },
    Entry {
        name: "phi3",
        load: phi3::load,
    },
    Entry {
        name: "phimoe",
        load: phi3::load,
    },
    Entry {
        name: "gpt-oss",
        load: gpt_oss::load,
    },
    Entry {
        name: "deepseek2",
        load: deepseek2::load,
    },
    Entry {
        name: "bert",
        load: bert::load,
    },
];

/// The architectures this crate runs (`general.architecture` values), in registry order.
pub const SUPPORTED: &[&str] = &names::<{ ARCHITECTURES.len() }>();

const fn names<const N: usize>() -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = ARCHITECTURES[i].name;
        i += 1;
    }
    out
}

/// The architecture `set`'s metadata names, loaded; with `pack`, its matrices of a type this
/// CPU has packed kernels for are repacked (see [`Loader::packed`]), and the second value is
/// the bytes the packed copies take.
pub(crate) fn load(
    set: &SplitSet,
    name: &str,
    pack: bool,
) -> Result<(Box<dyn Architecture>, usize)> {
    let l = Loader::new(set, name, pack);
    let loaded = load_with(&l)?;
    Ok((loaded, l.packed_bytes()))
}

/// The architecture the loader's metadata names, loaded through it: from a file, or from a
/// plan for a check.
pub(crate) fn load_with(l: &Loader<'_>) -> Result<Box<dyn Architecture>> {
    let arch = l.metadata().architecture()?;
    let entry = ARCHITECTURES
        .iter()
        .find(|e| e.name == arch)
        .ok_or_else(|| ModelError::UnsupportedArchitecture {
            file: l.name.to_string(),
            arch: arch.to_string(),
        })?;
    (entry.load)(l, entry.name)
}
