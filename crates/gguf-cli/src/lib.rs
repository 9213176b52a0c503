//! Library side of the `gguf` command: the registry of real models it can fetch, the
//! rendering of `gguf inspect`, and the tensor commands. The binary in `main.rs` is a thin layer of argument parsing.

pub mod inspect;
pub mod models;
pub mod run;
pub mod tensors;
