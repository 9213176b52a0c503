//! Library side of the `gguf` command: the registry of real models it can fetch and the
//! rendering of `gguf inspect`. The binary in `main.rs` is a thin layer of argument parsing.

pub mod inspect;
pub mod models;
