//! Cross-checks with the reference implementation, the Python `gguf` package: same metadata
//! and tensor table as `gguf.GGUFReader`, our files readable by it, and its files readable
//! (and rewritable byte for byte) by us. Skipped when `python3 -c "import gguf"` fails, unless
//! GGUF_REQUIRE_MODELS=1.

use std::path::{Path, PathBuf};
use std::process::Command;

use gguf_format::{GgufBuilder, GgufFile, Value};
use gguf_test_support::{fixtures, python_gguf_available, real_model};
use serde_json::Value as Json;

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/py")
        .join(name)
}

fn python_dump(path: &Path) -> Json {
    let out = Command::new("python3")
        .arg(script("gguf_dump.py"))
        .arg(path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gguf_dump.py {}: {}",
        path.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Flattens a value the way gguf-py's `contents()` does (nested arrays concatenated).
fn flatten(v: Value<'_>, out: &mut Vec<Json>) {
    match v {
        Value::Array(a) => a.iter().for_each(|item| flatten(item, out)),
        Value::String(s) => out.push(Json::from(std::str::from_utf8(s).expect("utf-8"))),
        Value::Bool(b) => out.push(b.into()),
        other => match (other.as_integer(), other.as_float()) {
            (Some(i), _) => out.push(serde_json::from_str(&i.to_string()).unwrap()),
            (_, Some(f)) => out.push(f.into()),
            _ => unreachable!(),
        },
    }
}

fn element_types(v: Value<'_>, out: &mut Vec<String>) {
    out.push(v.value_type().name().to_string());
    if let Value::Array(a) = v {
        match a.iter().next() {
            Some(first) if a.element_type() == gguf_format::ValueType::Array => {
                element_types(first, out)
            }
            _ => out.push(a.element_type().name().to_string()),
        }
    }
}

fn assert_same_as_reference(path: &Path) {
    let reference = python_dump(path);
    let bytes = std::fs::read(path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    let name = path.display();
    assert_eq!(reference["alignment"], file.alignment(), "{name}");
    assert_eq!(reference["data_offset"], file.data_offset(), "{name}");
    assert_eq!(reference["byte_order"], file.byte_order().name(), "{name}");
    let metadata = reference["metadata"].as_array().unwrap();
    assert_eq!(metadata.len(), file.metadata().len(), "{name}: key count");
    for (r, kv) in metadata.iter().zip(file.metadata()) {
        assert_eq!(r["key"], kv.key, "{name}");
        let mut types = Vec::new();
        element_types(kv.value, &mut types);
        let ref_types: Vec<String> = serde_json::from_value(r["types"].clone()).unwrap();
        // gguf-py records nested arrays' types only down to the first level it parses.
        assert_eq!(ref_types[0], types[0], "{name}: {}", kv.key);
        // ... and records no element type at all for an empty array.
        if ref_types.len() > 1 {
            assert_eq!(ref_types.last(), types.last(), "{name}: {}", kv.key);
        }
        let mut ours = Vec::new();
        flatten(kv.value, &mut ours);
        let expected = match &r["value"] {
            Json::Array(items) => items.clone(),
            one => vec![one.clone()],
        };
        assert!(ours == expected, "{name}: value of {} differs", kv.key);
    }
    let tensors = reference["tensors"].as_array().unwrap();
    assert_eq!(tensors.len(), file.tensors().len(), "{name}: tensor count");
    for (r, t) in tensors.iter().zip(file.tensors()) {
        assert_eq!(r["name"], t.name, "{name}");
        assert_eq!(r["type"], t.ggml_type.name(), "{name}: {}", t.name);
        assert_eq!(
            r["shape"],
            serde_json::json!(t.shape()),
            "{name}: {}",
            t.name
        );
        assert_eq!(r["offset"], t.offset, "{name}: {}", t.name);
        assert_eq!(r["size"], t.size, "{name}: {}", t.name);
    }
}

#[test]
fn fixtures_written_by_us_read_the_same_in_gguf_py() {
    if !python_gguf_available() {
        return;
    }
    for name in [
        "all-types-v3.gguf",
        "all-types-v2.gguf",
        "all-types-be.gguf",
        "align-64.gguf",
        "split-00001-of-00003.gguf",
        "split-00002-of-00003.gguf",
    ] {
        assert_same_as_reference(&fixtures().join(name));
    }
}

#[test]
fn real_models_read_the_same_in_gguf_py() {
    if !python_gguf_available() {
        return;
    }
    for model in ["smollm2-135m", "gemma3-270m"] {
        if let Some(path) = real_model(model) {
            assert_same_as_reference(&path);
        }
    }
}

#[test]
fn files_written_by_gguf_py_read_and_rewrite_byte_for_byte() {
    if !python_gguf_available() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("py.gguf");
    let status = Command::new("python3")
        .arg(script("gguf_write.py"))
        .arg(&path)
        .status()
        .unwrap();
    assert!(status.success());
    assert_same_as_reference(&path);
    let bytes = std::fs::read(&path).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.get::<&str>("t.str").unwrap(), "caf\u{e9} \u{1F600}");
    assert_eq!(file.get::<f32>("t.f32").unwrap(), 0.1);
    assert_eq!(file.tensor("a").unwrap().shape(), &[4, 3]);
    let a = file.tensor_data(file.tensor("a").unwrap());
    let floats: Vec<f32> = a
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(floats, (0..12).map(|i| i as f32).collect::<Vec<_>>());
    let out = GgufBuilder::from_file(&file)
        .write_from(&file, Vec::new(), &mut |_, _| {})
        .unwrap();
    assert!(
        out == bytes,
        "our rewrite of a gguf-py file differs from it"
    );
}
