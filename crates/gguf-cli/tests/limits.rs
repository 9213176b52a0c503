//! The `gguf` binary under resource limits: memory the KV caches cannot have is refused with
//! one line, not an abort.

mod common;

use common::{gguf, refused};
use gguf_test_support::{fixture, run_ok};

/// The tiny llama fixture with a training context of 2^31 positions, in `dir`.
fn huge_context_model(dir: &std::path::Path) -> std::path::PathBuf {
    let out = dir.join("huge-context.gguf");
    run_ok(
        gguf()
            .arg("edit")
            .arg(fixture("model-llama.gguf"))
            .arg("-o")
            .arg(&out)
            .args(["--set", "llama.context_length=2147483648"]),
    );
    out
}

/// `gguf serve --parallel 256` with caches far beyond the machine's memory, and `generate`
/// with one cache beyond an address-space limit (`ulimit -v`, which the check of available
/// memory does not see: the allocation itself fails, and is an error).
#[test]
fn kv_caches_beyond_memory_are_refused_with_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let model = huge_context_model(dir.path());
    let (code, stderr) = refused(
        gguf()
            .arg("serve")
            .arg(&model)
            .args(["--port", "0", "--parallel", "256", "-c", "2147483648"])
            .args(["--kv-type", "f32"]),
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("the KV caches of 256 sequences of 8388608 positions (f32) would take")
            && stderr.contains("GiB of memory, but only"),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    // 4 GiB of cache under a 3 GiB address-space limit.
    let exe = env!("CARGO_BIN_EXE_gguf");
    let script = format!(
        "ulimit -v 3000000; exec '{exe}' generate '{}' -p hi -n 1 -c 16777216 --kv-type f32",
        model.display()
    );
    let (code, stderr) = refused(std::process::Command::new("sh").args(["-c", &script]));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(
        stderr.contains("a KV cache of 16777216 positions would take")
            && stderr.contains("the system refused to allocate it"),
        "{stderr}"
    );
}
