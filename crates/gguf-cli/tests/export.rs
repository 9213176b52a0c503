//! `gguf export`: a fixture model to a Hugging Face checkpoint directory and back through
//! `gguf convert DIR`, which the engine runs; `--json` reports every tensor; refusals (another
//! architecture, a non-empty directory without `--force`, a bad `--dtype`) are errors that say
//! why, with nothing written; a failed export leaves no directory it created.

mod common;

use common::{gguf, refused};
use gguf_test_support::{fixture, listing, run_ok};
use serde_json::Value;

#[test]
fn exported_fixture_converts_back_and_runs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("qwen3-hf");
    let report = run_ok(
        gguf()
            .arg("export")
            .arg(fixture("model-qwen3.gguf"))
            .arg(&out)
            .args(["--dtype", "bf16", "--json"]),
    );
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["hf_architecture"], "Qwen3ForCausalLM");
    assert_eq!(report["dtype"], "bf16");
    let tensors = report["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), 25);
    assert!(tensors
        .iter()
        .any(|t| t["name"] == "model.layers.1.self_attn.q_norm.weight"
            && t["source"] == "blk.1.attn_q_norm.weight"));
    assert_eq!(
        listing(&out),
        [
            "config.json",
            "generation_config.json",
            "model.safetensors",
            "tokenizer.json",
            "tokenizer_config.json"
        ]
    );
    let config: Value =
        serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["torch_dtype"], "bfloat16");

    let back = dir.path().join("back.gguf");
    run_ok(
        gguf()
            .arg("convert")
            .arg(&out)
            .arg(&back)
            .args(["--pre", "qwen2"]),
    );
    let generated = run_ok(gguf().arg("generate").arg(&back).args([
        "-p",
        "hello world",
        "-n",
        "4",
        "--temp",
        "0",
    ]));
    assert!(!generated.stdout.is_empty());
    // The tokenizer survived: the same ids for a text.
    let ids = |file: &std::path::Path| {
        run_ok(
            gguf()
                .arg("tokenize")
                .arg(file)
                .args(["--ids", "Hello world, the end"]),
        )
        .stdout
    };
    assert_eq!(ids(&back), ids(&fixture("model-qwen3.gguf")));
}

#[test]
fn refusals_say_why_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let (code, err) = refused(
        gguf()
            .arg("export")
            .arg(fixture("model-phi2.gguf"))
            .arg(&out),
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains("architecture 'phi2' cannot be exported"),
        "{err}"
    );
    assert!(!out.exists());

    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("keep.txt"), "x").unwrap();
    let (code, err) = refused(
        gguf()
            .arg("export")
            .arg(fixture("model-gemma.gguf"))
            .arg(&out),
    );
    assert_eq!(code, Some(1));
    assert!(
        err.contains("not empty") && err.contains("--force"),
        "{err}"
    );
    assert_eq!(listing(&out), ["keep.txt"]);
    run_ok(
        gguf()
            .arg("export")
            .arg(fixture("model-gemma.gguf"))
            .arg(&out)
            .arg("--force"),
    );
    assert!(out.join("tokenizer.model").exists() && out.join("keep.txt").exists());

    let (code, err) = refused(
        gguf()
            .arg("export")
            .arg(fixture("model-gemma.gguf"))
            .arg(dir.path().join("x"))
            .args(["--dtype", "q4_0"]),
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("not one of f32, f16, bf16"), "{err}");
}

/// An export that fails partway leaves what it did not make as it was and removes what it
/// made: the directories it created go (a directory that was there stays, with its files).
/// The write fails as on a full disk, with an error (EFBIG) from the file size limit of
/// `ulimit -f` (with SIGXFSZ ignored, as a signal ignored across `exec` stays ignored): 100
/// blocks of 512 bytes hold the small files, not model.safetensors.
#[cfg(unix)]
#[test]
fn a_failed_export_removes_the_directories_it_created_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let limited = |out: &std::path::Path, extra: &[&str]| {
        let mut cmd = std::process::Command::new("sh");
        cmd.arg("-c")
            .arg(r#"trap "" XFSZ; ulimit -f 100; exec "$@""#)
            .arg("sh")
            .arg(env!("CARGO_BIN_EXE_gguf"))
            .arg("export")
            .arg(fixture("model-qwen3.gguf"))
            .arg(out)
            .args(extra);
        let (code, err) = refused(&mut cmd);
        assert_eq!(code, Some(1), "{err}");
        assert!(
            err.contains("model.safetensors") && err.contains("File too large"),
            "{err}"
        );
    };

    // Two levels of new directories: both go.
    let new = dir.path().join("new").join("hf");
    limited(&new, &[]);
    assert_eq!(listing(dir.path()), Vec::<String>::new());

    // An empty directory that was there stays.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    limited(&empty, &[]);
    assert_eq!(listing(&empty), Vec::<String>::new());

    // With --force into a directory of files: they stay as they were.
    let mine = dir.path().join("mine");
    std::fs::create_dir(&mine).unwrap();
    std::fs::write(mine.join("notes.txt"), "keep").unwrap();
    std::fs::write(mine.join("model.safetensors"), "old").unwrap();
    std::fs::write(mine.join("config.json"), "{}").unwrap();
    limited(&mine, &["--force"]);
    assert_eq!(
        listing(&mine),
        ["config.json", "model.safetensors", "notes.txt"]
    );
    assert_eq!(
        std::fs::read(mine.join("model.safetensors")).unwrap(),
        b"old"
    );
    assert_eq!(std::fs::read(mine.join("config.json")).unwrap(), b"{}");
    assert_eq!(listing(dir.path()), ["empty", "mine"]);

    // Without the limit the same export succeeds: the limit is what failed it.
    run_ok(
        gguf()
            .arg("export")
            .arg(fixture("model-qwen3.gguf"))
            .arg(&new),
    );
    assert!(new.join("model.safetensors").is_file());
}
