//! Every tensor of both real models dequantizes to exactly what the Python `gguf` package
//! produces (compared by SHA-256 of the float32 bytes).

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use gguf_format::GgufFile;
use gguf_test_support::{python_gguf_available, real_model};
use sha2::{Digest, Sha256};

#[test]
fn every_tensor_of_the_real_models_dequantizes_like_gguf_py() {
    if !python_gguf_available() {
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/py/tensor_hashes.py");
    for model in ["smollm2-135m", "gemma3-270m"] {
        let Some(path) = real_model(model) else {
            continue;
        };
        let out = Command::new("python3")
            .arg(&script)
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let expected: HashMap<String, String> = serde_json::from_slice(&out.stdout).unwrap();
        let mapped = GgufFile::open(&path).unwrap();
        let file = mapped.file();
        assert_eq!(expected.len(), file.tensors().len());
        for t in file.tensors() {
            let values = gguf_quant::dequantize(
                t.ggml_type,
                file.tensor_data(t),
                t.element_count() as usize,
            )
            .unwrap();
            let mut hasher = Sha256::new();
            for v in &values {
                hasher.update(v.to_le_bytes());
            }
            let ours: String = hasher
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            assert_eq!(
                ours, expected[t.name],
                "{model}: {} ({})",
                t.name, t.ggml_type
            );
        }
    }
}
