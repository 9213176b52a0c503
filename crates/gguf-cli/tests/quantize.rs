//! `gguf quantize` against llama-quantize: the SHA-256 of llama-quantize's outputs
//! (`data/quantize.json`, made by `data/regenerate_quantize.sh` with the reference build) for
//! the tiny fixtures at every file type, and for the real models.

mod common;

use std::path::{Path, PathBuf};

use common::gguf;
use gguf_test_support::{fixture, real_model, run_ok};
use serde_json::Value;

fn reference() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/quantize.json");
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

fn sha256(path: &Path) -> String {
    gguf_hub::sha256_file(path).unwrap()
}

/// Quantizes `input` to `ty` into `dir`, returning the output's path.
fn quantize(input: &Path, dir: &Path, ty: &str, extra: &[&str]) -> PathBuf {
    let out = dir.join(format!("{ty}.gguf"));
    run_ok(
        gguf()
            .arg("quantize")
            .arg(input)
            .arg(&out)
            .arg(ty)
            .args(["--force"])
            .args(extra),
    );
    out
}

#[test]
fn tiny_models_at_every_file_type_equal_llama_quantize() {
    let r = reference();
    let dir = tempfile::tempdir().unwrap();
    let mut compared = 0;
    for (model, types) in r["tiny"].as_object().unwrap() {
        for (ty, expected) in types.as_object().unwrap() {
            let out = quantize(
                &fixture(model),
                dir.path(),
                ty,
                &["--allow-requantize", "-t", "2"],
            );
            assert_eq!(sha256(&out), expected.as_str().unwrap(), "{model} {ty}");
            compared += 1;
        }
    }
    // The eight dense fixtures and the seven with experts or Granite's multipliers.
    assert!(compared >= 15 * 18, "{compared}");
}

#[test]
fn the_thread_count_changes_no_byte() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("model-llama.gguf");
    let one = quantize(
        &input,
        dir.path(),
        "Q4_K_M",
        &["--allow-requantize", "-t", "1"],
    );
    let one = std::fs::read(one).unwrap();
    // Three threads as llama-quantize takes them: the last positional argument.
    let three = quantize(&input, dir.path(), "Q4_K_M", &["--allow-requantize", "3"]);
    assert_eq!(one, std::fs::read(three).unwrap());
}

#[test]
fn refusals_name_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let input = fixture("model-llama.gguf");
    let run = |args: &[&str]| {
        let out = gguf()
            .arg("quantize")
            .arg(&input)
            .arg(dir.path().join("out.gguf"))
            .args(args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        String::from_utf8(out.stderr).unwrap()
    };
    assert!(run(&["Q4_K_M"]).contains("--allow-requantize"));
    assert!(run(&["Q4_2"]).contains("unknown file type 'Q4_2'"));
    assert!(
        run(&["Q8_0", "--allow-requantize", "--tensor-type", "attn_q"]).contains("PATTERN=TYPE")
    );
    // Importance matrices: one made for another model, a hostile one, filters without one.
    let other = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/smollm2.imatrix.gguf");
    let other = other.to_str().unwrap();
    assert!(run(&["Q4_K_M", "--allow-requantize", "--imatrix", other])
        .contains("a matrix made for another model"));
    let bad = dir.path().join("bad.dat");
    std::fs::write(&bad, [1, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0x7F]).unwrap();
    let text = run(&[
        "Q4_K_M",
        "--allow-requantize",
        "--imatrix",
        bad.to_str().unwrap(),
    ]);
    assert!(text.contains("truncated at offset 8"), "{text}");
    assert!(
        run(&["Q8_0", "--allow-requantize", "--include-weights", "ffn"]).contains("need --imatrix")
    );
    assert!(
        !dir.path().join("out.gguf").exists(),
        "a refused run writes nothing"
    );
    std::fs::write(dir.path().join("out.gguf"), b"keep me").unwrap();
    assert!(run(&["Q8_0", "--allow-requantize"]).contains("--force"));
    assert_eq!(
        std::fs::read(dir.path().join("out.gguf")).unwrap(),
        b"keep me"
    );
}

#[test]
fn overrides_choose_the_types_of_the_tensors_they_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = quantize(
        &fixture("model-llama.gguf"),
        dir.path(),
        "Q8_0",
        &[
            "--allow-requantize",
            "--tensor-type",
            "ATTN_[QK]=q5_1",
            "--output-tensor-type",
            "f16",
            "--token-embedding-type",
            "q4_0",
        ],
    );
    let json = run_ok(gguf().args(["inspect", "--json"]).arg(&out));
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let ty = |name: &str| {
        v["tensors"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["name"] == name)
            .unwrap()["type"]
            .clone()
    };
    assert_eq!(ty("blk.0.attn_q.weight"), "Q5_1");
    assert_eq!(ty("blk.1.attn_k.weight"), "Q5_1");
    assert_eq!(ty("blk.0.attn_v.weight"), "Q8_0");
    assert_eq!(ty("output.weight"), "F16");
    assert_eq!(ty("token_embd.weight"), "Q4_0");
    assert_eq!(ty("output_norm.weight"), "F32");
    let meta = v["metadata"].as_array().unwrap();
    let n = meta.len();
    // llama-quantize's order: the quantization version and the file type set last.
    assert_eq!(meta[n - 2]["key"], "general.quantization_version");
    assert_eq!(meta[n - 1]["key"], "general.file_type");
    assert_eq!(meta[n - 1]["value"], 7);
}

/// SmolLM2 (Q4_1) requantized to F32, then every file type llama-quantize makes without an
/// importance matrix from that F32 and from its F16, each byte for byte what llama-quantize
/// writes (`data/quantize.json`).
#[test]
fn smollm2_equals_llama_quantize() {
    let Some(model) = real_model("smollm2-135m") else {
        return;
    };
    let r = reference();
    let dir = tempfile::tempdir().unwrap();
    let f32_dir = dir.path().join("f32");
    std::fs::create_dir(&f32_dir).unwrap();
    let f32 = quantize(&model, &f32_dir, "F32", &["--allow-requantize"]);
    assert_eq!(sha256(&f32), r["smollm2_f32"].as_str().unwrap(), "F32");
    let f16 = quantize(&f32, &f32_dir, "F16", &[]);
    let (mut compared, mut differ) = (0, Vec::new());
    for (input, from) in [(&f32, "smollm2_from_f32"), (&f16, "smollm2_from_f16")] {
        for (ty, expected) in r[from].as_object().unwrap() {
            let out = quantize(input, dir.path(), ty, &[]);
            if sha256(&out) != expected.as_str().unwrap() {
                differ.push(format!("{ty} ({from})"));
            }
            std::fs::remove_file(out).unwrap();
            compared += 1;
        }
    }
    assert!(differ.is_empty(), "not llama-quantize's bytes: {differ:?}");
    assert!(compared >= 50, "{compared}");
}

/// Gemma 3 (Q4_K_M) requantized with --allow-requantize.
#[test]
fn gemma3_requantized_equals_llama_quantize() {
    let Some(model) = real_model("gemma3-270m") else {
        return;
    };
    let r = reference();
    let dir = tempfile::tempdir().unwrap();
    for ty in ["Q8_0", "Q4_K_M"] {
        let out = quantize(&model, dir.path(), ty, &["--allow-requantize"]);
        assert_eq!(sha256(&out), r["gemma3"][ty].as_str().unwrap(), "{ty}");
    }
}

/// SmolLM2's F32 with the importance matrices llama-imatrix made (`data/smollm2.imatrix.*`, in
/// both of its formats): llama-quantize's bytes (`data/quantize_imatrix.json`, made by
/// `data/regenerate_quantize_imatrix.sh`), the `quantize.imatrix.*` keys included, and with
/// `--exclude-weights` too.
#[test]
fn smollm2_with_an_importance_matrix_equals_llama_quantize() {
    let Some(model) = real_model("smollm2-135m") else {
        return;
    };
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let r: Value =
        serde_json::from_slice(&std::fs::read(data.join("quantize_imatrix.json")).unwrap())
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let f32_dir = dir.path().join("f32");
    std::fs::create_dir(&f32_dir).unwrap();
    let f32 = quantize(&model, &f32_dir, "F32", &["--allow-requantize"]);
    // llama-quantize writes the matrix's name as given: run where it lies, name it relatively.
    let with = |file: &str, ty: &str, extra: &[&str]| {
        let out = dir.path().join(format!("{ty}.gguf"));
        run_ok(
            gguf()
                .current_dir(&data)
                .arg("quantize")
                .arg(&f32)
                .arg(&out)
                .arg(ty)
                .args(["--imatrix", file, "--force", "-t", "2"])
                .args(extra),
        );
        sha256(&out)
    };
    let (mut compared, mut differ) = (0, Vec::new());
    for (format, file) in [
        ("gguf", "smollm2.imatrix.gguf"),
        ("dat", "smollm2.imatrix.dat"),
    ] {
        for (ty, expected) in r[format].as_object().unwrap() {
            if with(file, ty, &[]) != expected.as_str().unwrap() {
                differ.push(format!("{format} {ty}"));
            }
            compared += 1;
        }
    }
    assert!(differ.is_empty(), "not llama-quantize's bytes: {differ:?}");
    // Without the matrix, the types whose quantizer needs one are refused before anything is
    // written, as llama-quantize refuses them tensor by tensor.
    let refused = dir.path().join("refused.gguf");
    let out = gguf()
        .arg("quantize")
        .arg(&f32)
        .arg(&refused)
        .arg("IQ2_XS")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        text.contains("ffn_down.weight to IQ2_XS needs an importance matrix (--imatrix)"),
        "{text}"
    );
    assert!(!refused.exists());
    // Q4_K_M, IQ4_XS and IQ2_XS, named by the issue, and the other families.
    assert!(compared >= 18, "{compared}");
    assert_eq!(
        with(
            "smollm2.imatrix.gguf",
            "Q4_K_M",
            &["--exclude-weights", "ffn_down"]
        ),
        r["gguf_exclude_ffn_down_Q4_K_M"].as_str().unwrap(),
        "--exclude-weights ffn_down"
    );
}
