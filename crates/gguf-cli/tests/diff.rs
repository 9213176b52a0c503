//! `gguf diff` end to end: exit statuses, what it reports, and its numbers against a direct
//! computation.

mod common;

use common::gguf;
use gguf_format::GgufFile;
use gguf_test_support::{fixture, run_ok};
use serde_json::Value;

fn diff_json(a: &std::path::Path, b: &std::path::Path, extra: &[&str]) -> (i32, Value) {
    let out = gguf()
        .arg("diff")
        .arg(a)
        .arg(b)
        .arg("--json")
        .args(extra)
        .output()
        .unwrap();
    let code = out.status.code().expect("an exit status, not a signal");
    assert!(
        code != 2,
        "gguf diff failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (code, serde_json::from_slice(&out.stdout).unwrap())
}

#[test]
fn a_file_equals_itself_and_an_edit_is_reported_key_by_key() {
    let original = fixture("all-types-v3.gguf");
    let (code, v) = diff_json(&original, &original, &["--values"]);
    assert_eq!(code, 0);
    assert_eq!(v["equal"], true);
    assert!(v["values"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["max_abs"] == 0.0 && t["cosine"] == 1.0));

    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("edited.gguf");
    run_ok(
        gguf()
            .arg("edit")
            .arg(&original)
            .arg("-o")
            .arg(&edited)
            .args([
                "--set",
                "general.name=renamed",
                "--set",
                "new.key:u16=9",
                "--remove",
                "test.u8",
            ]),
    );
    let (code, v) = diff_json(&original, &edited, &[]);
    assert_eq!(code, 1);
    assert_eq!(v["equal"], false);
    let m = &v["metadata"];
    assert_eq!(
        m["added"],
        serde_json::json!([{"key": "new.key", "type": "u16", "value": 9}])
    );
    assert_eq!(m["removed"][0]["key"], "test.u8");
    assert_eq!(m["removed"].as_array().unwrap().len(), 1);
    assert_eq!(m["changed"][0]["key"], "general.name");
    assert_eq!(m["changed"][0]["b"]["value"], "renamed");
    assert_eq!(v["tensors"]["changed"], serde_json::json!([]));

    let text = gguf()
        .arg("diff")
        .arg(&original)
        .arg(&edited)
        .output()
        .unwrap();
    assert_eq!(text.status.code(), Some(1));
    let text = String::from_utf8(text.stdout).unwrap();
    assert!(text.contains("+ key new.key = 9"), "{text}");
    assert!(text.contains("- key test.u8 = "), "{text}");
    assert!(text.contains("~ key general.name: "), "{text}");
}

#[test]
fn errors_exit_with_status_2() {
    let out = gguf()
        .arg("diff")
        .arg(fixture("all-types-v3.gguf"))
        .arg("/nonexistent/file.gguf")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/file.gguf"));
}

/// The dequantized values of `name` in `path`.
fn values(path: &std::path::Path, name: &str) -> Vec<f32> {
    let mapped = GgufFile::open(path).unwrap();
    let file = mapped.file();
    let t = file.tensor(name).unwrap();
    let mut out = vec![0f32; t.element_count() as usize];
    gguf_quant::dequantize_row(t.ggml_type, file.tensor_data(t), &mut out).unwrap();
    out
}

#[test]
fn value_numbers_equal_a_direct_computation() {
    // Two tiny models of the same shapes and different random weights.
    let (a, b) = (fixture("model-llama.gguf"), fixture("model-mistral.gguf"));
    let (code, v) = diff_json(&a, &b, &["--values", "-t", "2"]);
    assert_eq!(code, 1);
    let reported = v["values"].as_array().unwrap();
    assert!(reported.len() > 10);
    for name in [
        "output_norm.weight",
        "blk.0.attn_q.weight",
        "blk.1.ffn_down.weight",
    ] {
        let (x, y) = (values(&a, name), values(&b, name));
        let (mut max_abs, mut dd, mut xx, mut yy, mut xy) = (0f64, 0f64, 0f64, 0f64, 0f64);
        for (&x, &y) in x.iter().zip(&y) {
            let (x, y) = (f64::from(x), f64::from(y));
            max_abs = max_abs.max((x - y).abs());
            dd += (x - y) * (x - y);
            xx += x * x;
            yy += y * y;
            xy += x * y;
        }
        let expected = [
            ("max_abs", max_abs),
            ("rms", (dd / x.len() as f64).sqrt()),
            ("relative", (dd / xx).sqrt()),
            ("cosine", xy / (xx.sqrt() * yy.sqrt())),
        ];
        let row = reported.iter().find(|r| r["name"] == name).unwrap();
        for (field, want) in expected {
            let got = row[field].as_f64().unwrap();
            assert!(
                (got - want).abs() <= 1e-12 * want.abs().max(1.0),
                "{name} {field}: {got} vs {want}"
            );
        }
        assert!(max_abs > 0.0, "{name}: the fixtures should differ");
    }
}
