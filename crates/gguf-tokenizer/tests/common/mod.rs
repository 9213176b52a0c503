//! Shared by the tests that use the real models.

// The workspace's lookup of a cached real model (skipped when missing, unless
// GGUF_REQUIRE_MODELS=1), kept under this name so the tests' imports stay as they are.
pub use gguf_test_support::real_model;
