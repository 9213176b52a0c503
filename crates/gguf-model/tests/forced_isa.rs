//! An instruction set that `GGUF_FORCE_ISA` forces but this CPU lacks (or a name that is none)
//! is an error from `Model::load`, not a panic in the first product.
//!
//! The kernels read the variable once per process, so each case runs this test binary again in
//! a child process with the variable set.

use std::process::Command;

use gguf_model::{Model, ModelError};
use gguf_quant::QuantError;
use gguf_test_support::fixture;

const CHILD: &str = "GGUF_FORCED_ISA_CHILD";

/// An instruction set this CPU cannot run: another architecture's.
const LACKING: &str = if cfg!(target_arch = "x86_64") {
    "neon"
} else {
    "avx2"
};

#[test]
fn loading_with_a_forced_isa_this_cpu_lacks_is_an_error() {
    if let Some(value) = std::env::var_os(CHILD) {
        let value = value.to_string_lossy().into_owned();
        match Model::load(fixture("model-llama.gguf")) {
            Err(ModelError::Quant(QuantError::ForcedIsa {
                value: found,
                known,
                ..
            })) => {
                assert_eq!(found, value);
                assert_eq!(known, value == LACKING);
            }
            Err(other) => panic!("expected ForcedIsa, got {other}"),
            Ok(_) => panic!("GGUF_FORCE_ISA={value} loaded the model"),
        }
        println!("child: refused GGUF_FORCE_ISA={value}");
        return;
    }
    let exe = std::env::current_exe().unwrap();
    for value in [LACKING, "avx3", ""] {
        let out = Command::new(&exe)
            .args([
                "--exact",
                "loading_with_a_forced_isa_this_cpu_lacks_is_an_error",
                "--nocapture",
            ])
            .env(CHILD, value)
            .env("GGUF_FORCE_ISA", value)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success()
                && stdout.contains(&format!("child: refused GGUF_FORCE_ISA={value}\n")),
            "GGUF_FORCE_ISA={value:?}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
