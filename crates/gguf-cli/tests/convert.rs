//! `gguf convert`: every legacy fixture converts, and the engine loads and runs the result;
//! `--json` reports what happened to each tensor; foreign files and directories are errors;
//! Hugging Face checkpoint directories convert and run.

mod common;

use common::{gguf, refused};
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
    refused(
        gguf()
            .arg("convert")
            .arg(fixture("legacy/ggjt-v2-llama.bin"))
            .arg(&out),
    );
}

#[test]
fn foreign_inputs_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.gguf");
    let (_, msg) = refused(
        gguf()
            .arg("convert")
            .arg(fixture("model-llama.gguf"))
            .arg(&out),
    );
    assert!(msg.contains("already GGUF"), "{msg}");
    assert!(!out.exists());
    let (_, msg) = refused(gguf().arg("convert").arg(dir.path()).arg(&out));
    assert!(msg.contains("no config.json"), "{msg}");
}

/// A Hugging Face checkpoint directory converts (`--outtype`, `--json`) and the result runs.
#[test]
fn checkpoint_directories_convert_and_run() {
    let dir = tempfile::tempdir().unwrap();
    for (name, outtype) in [
        ("tiny-llama", "q8_0"),
        ("tiny-gemma3", "bf16"),
        ("tiny-phi3", "f16"),
    ] {
        let out = dir.path().join(format!("{name}.gguf"));
        let report = run_ok(
            gguf()
                .arg("convert")
                .arg(fixture(&format!("hf/{name}")))
                .arg(&out)
                .args(["--outtype", outtype, "--json"]),
        );
        let report: Value = serde_json::from_slice(&report.stdout).unwrap();
        let tensors = report["tensors"].as_array().unwrap();
        assert!(tensors.len() > 10, "{name}");
        let want = outtype.to_uppercase();
        assert!(
            tensors.iter().any(|t| t["type"] == want.as_str()),
            "{name}: no {want} tensor in {report}"
        );
        let generated = run_ok(
            gguf()
                .arg("generate")
                .arg(&out)
                .args(["-p", "the", "-n", "4", "--temp", "0"]),
        );
        assert!(!generated.stdout.is_empty(), "{name}");
    }
    // A bad --outtype is refused before anything is read.
    let (_, err) = refused(
        gguf()
            .arg("convert")
            .arg(fixture("hf/tiny-llama"))
            .arg(dir.path().join("x.gguf"))
            .args(["--outtype", "q4_0"]),
    );
    assert!(err.contains("f32, f16, bf16, q8_0, auto"), "{err}");
}

/// all-MiniLM-L6-v2 converted by `gguf convert` embeds like sentence-transformers does.
#[test]
fn a_converted_minilm_embeds_like_sentence_transformers() {
    let Some(ckpt) = gguf_test_support::hf_checkpoint("all-MiniLM-L6-v2") else {
        return;
    };
    let data: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../gguf-model/tests/data/minilm_embeddings.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("minilm.gguf");
    run_ok(gguf().arg("convert").arg(&ckpt).arg(&out));
    let sentences = data["sentences"].as_array().unwrap();
    let mut cmd = gguf();
    cmd.arg("embed").arg(&out).arg("--json");
    for s in sentences {
        cmd.arg(s["text"].as_str().unwrap());
    }
    let got: Value = serde_json::from_slice(&run_ok(&mut cmd).stdout).unwrap();
    let got = got["embeddings"].as_array().unwrap();
    assert_eq!(got.len(), sentences.len());
    for (s, e) in sentences.iter().zip(got) {
        let v = |x: &Value| -> Vec<f64> {
            x.as_array()
                .unwrap()
                .iter()
                .map(|f| f.as_f64().unwrap())
                .collect()
        };
        let (a, b) = (v(e), v(&s["sentence_transformers"]));
        let dot: f64 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        let norm = |x: &[f64]| x.iter().map(|t| t * t).sum::<f64>().sqrt();
        let cosine = dot / (norm(&a) * norm(&b));
        assert!(cosine >= 0.9999, "{}: cosine {cosine}", s["text"]);
    }
}
