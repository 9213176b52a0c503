//! `gguf embed` end to end, on the tiny llama fixture (a decoder, embedded with the pooling
//! asked for; BERT's numbers are `gguf-model`'s `real_bert` test).

mod common;

use common::{gguf, refused};
use gguf_test_support::{fixture, run_ok};

const D: usize = 64;

fn embeddings(stdout: &[u8]) -> Vec<Vec<f32>> {
    let v: serde_json::Value = serde_json::from_slice(stdout).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(keys, ["embeddings"]);
    v["embeddings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            e.as_array()
                .unwrap()
                .iter()
                .map(|x| x.as_f64().unwrap() as f32)
                .collect()
        })
        .collect()
}

fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|&x| f64::from(x) * f64::from(x))
        .sum::<f64>()
        .sqrt()
}

#[test]
fn embed_json_has_one_unit_vector_per_text() {
    let out = run_ok(
        gguf()
            .args(["embed", "--json", "--pooling", "mean", "-t", "2"])
            .arg(fixture("model-llama.gguf"))
            .args(["hello world", "the tiny model", "Café 🍕"]),
    );
    let e = embeddings(&out.stdout);
    assert_eq!(e.len(), 3);
    for v in &e {
        assert_eq!(v.len(), D);
        assert!((norm(v) - 1.0).abs() < 1e-5, "{}", norm(v));
    }
    assert_ne!(e[0], e[1]);
    // The lines of plain output are the same numbers.
    let plain = run_ok(
        gguf()
            .args(["embed", "--pooling", "mean", "-t", "1"])
            .arg(fixture("model-llama.gguf"))
            .args(["hello world", "the tiny model", "Café 🍕"]),
    );
    let text = String::from_utf8(plain.stdout).unwrap();
    let lines: Vec<Vec<f32>> = text
        .lines()
        .map(|l| l.split(' ').map(|x| x.parse().unwrap()).collect())
        .collect();
    assert_eq!(lines, e);
}

#[test]
fn embed_reads_a_file_and_obeys_pooling_and_normalize() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("texts.txt");
    std::fs::write(&path, "hello world\r\nthe tiny model\n").unwrap();
    let from_file = run_ok(
        gguf()
            .args(["embed", "--json", "--pooling", "last", "--file"])
            .arg(&path)
            .arg(fixture("model-llama.gguf")),
    );
    let from_args = run_ok(
        gguf()
            .args(["embed", "--json", "--pooling", "last"])
            .arg(fixture("model-llama.gguf"))
            .args(["hello world", "the tiny model"]),
    );
    assert_eq!(embeddings(&from_file.stdout).len(), 2);
    assert_eq!(from_file.stdout, from_args.stdout);
    // Without normalisation the vectors are the model's rows as they are.
    let raw = run_ok(
        gguf()
            .args([
                "embed",
                "--json",
                "--normalize",
                "none",
                "--pooling",
                "last",
            ])
            .arg(fixture("model-llama.gguf"))
            .args(["hello world", "the tiny model"]),
    );
    let (raw, unit) = (embeddings(&raw.stdout), embeddings(&from_args.stdout));
    for (r, u) in raw.iter().zip(&unit) {
        let n = norm(r);
        assert!((n - 1.0).abs() > 1e-3, "{n}");
        for (a, b) in r.iter().zip(u) {
            assert!((f64::from(*a) / n - f64::from(*b)).abs() < 1e-6);
        }
    }
    // No pooling (the fixture has no pooling_type): one vector per token, <s> included.
    let tokens = run_ok(
        gguf()
            .args(["embed", "--json"])
            .arg(fixture("model-llama.gguf"))
            .arg("hello world"),
    );
    let rows = embeddings(&tokens.stdout);
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[2], unit[0]);
}

#[test]
fn embed_refuses_missing_or_conflicting_input() {
    let model = fixture("model-llama.gguf");
    refused(gguf().arg("embed").arg(&model));
    refused(
        gguf()
            .args(["embed", "--file", "x.txt"])
            .arg(&model)
            .arg("text"),
    );
    refused(
        gguf()
            .args(["embed", "--pooling", "rank"])
            .arg(&model)
            .arg("text"),
    );
}
