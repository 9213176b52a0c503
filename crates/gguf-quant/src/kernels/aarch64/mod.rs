//! aarch64 kernels.

pub(crate) mod neon;
