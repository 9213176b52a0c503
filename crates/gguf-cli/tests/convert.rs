//! `gguf convert`: every legacy fixture converts, and the engine loads and runs the result;
//! `--json` reports what happened to each tensor; foreign files and directories are errors.

mod common;

use common::gguf;
use gguf_test_support::{fixture, run_ok};
use serde_json::Value;

#[test]
fn converted_legacy_models_load_and_generate() {
    let dir = tempfile::tempdir().unwrap();
    for name in [
        "ggml-llama.bin",
        "ggmf-llama.bin",
        "ggjt-v1-llama.bin",
        "ggjt-v2-llama.bin",
        "ggjt-v3-llama.bin",
        "ggjt-v3-kquants.bin",
    ] {
        let out = dir.path().join(format!("{name}.gguf"));
        let report = run_ok(
            gguf()
                .arg("convert")
                .arg(fixture(&format!("legacy/{name}")))
                .arg(&out)
                .arg("--json"),
        );
        let report: Value = serde_json::from_slice(&report.stdout).unwrap();
        assert_eq!(report["tensors"].as_array().unwrap().len(), 12, "{name}");
        let generated = run_ok(gguf().arg("generate").arg(&out).args([
            "-p",
            "hello world",
            "-n",
            "4",
            "--temp",
            "0",
        ]));
        assert!(!generated.stdout.is_empty(), "{name}");
    }
}

#[test]
fn the_report_says_how_each_tensor_was_made() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.gguf");
    let report = run_ok(
        gguf()
            .arg("convert")
            .arg(fixture("legacy/ggjt-v2-llama.bin"))
            .arg(&out)
            .arg("--json"),
    );
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["container"], "GGJTv2");
    let how = |name: &str| {
        report["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .map(|t| (t["type"].clone(), t["how"].clone()))
            .unwrap()
    };
    // Q4_0 with f16-valued scales is repacked; output.weight's (Q4_1) f32 scales are off the
    // f16 grid, so it becomes F32; GGJT v2's Q5_0 and F32 are today's.
    assert_eq!(how("token_embd.weight"), ("Q4_0".into(), "repacked".into()));
    assert_eq!(
        how("output.weight"),
        ("F32".into(), "dequantized to F32".into())
    );
    assert_eq!(how("blk.0.attn_q.weight"), ("Q5_0".into(), "copied".into()));
    assert_eq!(
        how("blk.0.attn_output.weight"),
        ("F32".into(), "copied".into())
    );
    // Refuses to overwrite without --force.
    let again = gguf()
        .arg("convert")
        .arg(fixture("legacy/ggjt-v2-llama.bin"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(!again.status.success());
}

#[test]
fn foreign_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.gguf");
    let e = gguf()
        .arg("convert")
        .arg(fixture("model-llama.gguf"))
        .arg(&out)
        .output()
        .unwrap();
    assert!(!e.status.success());
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(msg.contains("already GGUF"), "{msg}");
    assert!(!out.exists());
    let e = gguf()
        .arg("convert")
        .arg(dir.path())
        .arg(&out)
        .output()
        .unwrap();
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(msg.contains("no config.json"), "{msg}");
}

/// A Hugging Face checkpoint is read (so checked) and named; converting it is still to come.
#[test]
fn a_checkpoint_directory_is_named() {
    let Some(dir) = gguf_test_support::hf_checkpoint("all-MiniLM-L6-v2") else {
        return;
    };
    let out = tempfile::tempdir().unwrap();
    let e = gguf()
        .arg("convert")
        .arg(&dir)
        .arg(out.path().join("x.gguf"))
        .output()
        .unwrap();
    assert!(!e.status.success());
    let msg = String::from_utf8_lossy(&e.stderr);
    assert!(
        msg.contains("model_type 'bert' (BertModel), 104 tensors in 1 safetensors file"),
        "{msg}"
    );
}
