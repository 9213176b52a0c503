//! Hugging Face checkpoints: single files and sharded ones read back exactly; damaged or
//! hostile ones are errors that name the file.

use std::collections::HashMap;
use std::path::Path;

use gguf_convert::hf::{Checkpoint, Dtype};
use safetensors::tensor::TensorView;

/// Writes `tensors` (name, dtype, shape, bytes) as the safetensors file `path`.
fn write_safetensors(path: &Path, tensors: &[(&str, Dtype, Vec<usize>, Vec<u8>)]) {
    let views: Vec<(String, TensorView<'_>)> = tensors
        .iter()
        .map(|(n, d, s, b)| (n.to_string(), TensorView::new(*d, s.clone(), b).unwrap()))
        .collect();
    safetensors::serialize_to_file(views, None, path).unwrap();
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn config(dir: &Path) {
    std::fs::write(
        dir.join("config.json"),
        r#"{"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 4}"#,
    )
    .unwrap();
}

#[test]
fn a_single_file_reads_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path());
    let w: Vec<f32> = (0..12).map(|i| i as f32 * 0.25 - 1.0).collect();
    let h: Vec<u8> = [1.5f32, -2.0, 65504.0]
        .iter()
        .flat_map(|&x| half::f16::from_f32(x).to_le_bytes())
        .collect();
    let b: Vec<u8> = [0.1f32, 3.0]
        .iter()
        .flat_map(|&x| half::bf16::from_f32(x).to_le_bytes())
        .collect();
    write_safetensors(
        &dir.path().join("model.safetensors"),
        &[
            ("w", Dtype::F32, vec![3, 4], f32_bytes(&w)),
            ("h", Dtype::F16, vec![3], h),
            ("b", Dtype::BF16, vec![2], b),
            ("i", Dtype::I64, vec![1], 7i64.to_le_bytes().to_vec()),
        ],
    );
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    assert_eq!(ckpt.model_type(), Some("llama"));
    assert_eq!(ckpt.architectures(), ["LlamaForCausalLM"]);
    assert_eq!((ckpt.len(), ckpt.shard_count()), (4, 1));
    let t = ckpt.tensor("w").unwrap();
    assert_eq!((t.dtype, t.shape), (Dtype::F32, &[3usize, 4][..]));
    assert_eq!(t.to_f32().unwrap(), w);
    assert_eq!(
        ckpt.tensor("h").unwrap().to_f32().unwrap(),
        [1.5, -2.0, 65504.0]
    );
    assert_eq!(
        ckpt.tensor("b").unwrap().to_f32().unwrap(),
        [half::bf16::from_f32(0.1).to_f32(), 3.0]
    );
    let e = ckpt.tensor("i").unwrap().to_f32().unwrap_err();
    assert!(e.to_string().contains("tensor 'i' is I64"), "{e}");
    assert!(ckpt.tensor("nope").is_none());
    assert!(ckpt.summary().contains("4 tensors in 1 safetensors file"));
}

#[test]
fn shards_follow_the_index() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path());
    write_safetensors(
        &dir.path().join("model-00001-of-00002.safetensors"),
        &[
            ("a", Dtype::F32, vec![2], f32_bytes(&[1.0, 2.0])),
            // Not this shard's according to the index: ignored.
            ("stray", Dtype::F32, vec![1], f32_bytes(&[9.0])),
        ],
    );
    write_safetensors(
        &dir.path().join("model-00002-of-00002.safetensors"),
        &[("b", Dtype::F32, vec![1], f32_bytes(&[3.0]))],
    );
    let index = r#"{"metadata": {"total_size": 12}, "weight_map": {
        "a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}"#;
    std::fs::write(dir.path().join("model.safetensors.index.json"), index).unwrap();
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    assert_eq!((ckpt.len(), ckpt.shard_count()), (2, 2));
    let names: Vec<&str> = ckpt.tensors().map(|t| t.name).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!(ckpt.tensor("b").unwrap().to_f32().unwrap(), [3.0]);
    assert!(ckpt
        .tensor("b")
        .unwrap()
        .file
        .ends_with("model-00002-of-00002.safetensors"));
}

fn open_err(setup: impl FnOnce(&Path)) -> String {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    Checkpoint::open(dir.path()).unwrap_err().to_string()
}

#[test]
fn damaged_and_hostile_checkpoints_are_errors_naming_the_file() {
    let e = open_err(|_| {});
    assert!(e.contains("no config.json"), "{e}");
    let e = open_err(|d| std::fs::write(d.join("config.json"), "{nope").unwrap());
    assert!(e.contains("config.json: not valid JSON"), "{e}");
    let e = open_err(|d| std::fs::write(d.join("config.json"), "[1]").unwrap());
    assert!(e.contains("not a JSON object"), "{e}");
    let e = open_err(config);
    assert!(e.contains("no safetensors weights"), "{e}");
    // An index that points outside the directory.
    let e = open_err(|d| {
        config(d);
        std::fs::write(
            d.join("model.safetensors.index.json"),
            r#"{"weight_map": {"a": "../../etc/passwd"}}"#,
        )
        .unwrap();
    });
    assert!(
        e.contains("is not a file name in the checkpoint's directory"),
        "{e}"
    );
    // An index naming a shard that is not there.
    let e = open_err(|d| {
        config(d);
        std::fs::write(
            d.join("model.safetensors.index.json"),
            r#"{"weight_map": {"a": "model-1.safetensors"}}"#,
        )
        .unwrap();
    });
    assert!(e.contains("model-1.safetensors"), "{e}");
    // A tensor the index puts in a shard that lacks it.
    let e = open_err(|d| {
        config(d);
        write_safetensors(
            &d.join("s.safetensors"),
            &[("a", Dtype::F32, vec![1], f32_bytes(&[1.0]))],
        );
        std::fs::write(
            d.join("model.safetensors.index.json"),
            r#"{"weight_map": {"a": "s.safetensors", "b": "s.safetensors"}}"#,
        )
        .unwrap();
    });
    assert!(e.contains("lacks tensor 'b'"), "{e}");
    // The same tensor in two files.
    let e = open_err(|d| {
        config(d);
        for f in ["a.safetensors", "b.safetensors"] {
            write_safetensors(&d.join(f), &[("x", Dtype::F32, vec![1], f32_bytes(&[1.0]))]);
        }
    });
    assert!(e.contains("also in an earlier shard"), "{e}");
    // Every truncation of a safetensors file, and a header length past the file.
    let dir = tempfile::tempdir().unwrap();
    config(dir.path());
    let path = dir.path().join("model.safetensors");
    write_safetensors(
        &path,
        &[("w", Dtype::F32, vec![4, 4], f32_bytes(&[0.5; 16]))],
    );
    let whole = std::fs::read(&path).unwrap();
    for len in 0..whole.len() {
        std::fs::write(&path, &whole[..len]).unwrap();
        let e = Checkpoint::open(dir.path()).unwrap_err().to_string();
        assert!(e.contains("model.safetensors"), "cut at {len}: {e}");
    }
    let mut huge = whole.clone();
    huge[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    std::fs::write(&path, &huge).unwrap();
    assert!(Checkpoint::open(dir.path()).is_err());
}

/// Tensors with the same bytes in F16 and BF16 widen as `half` defines them, for every bit
/// pattern.
#[test]
fn every_half_pattern_widens_like_half() {
    let dir = tempfile::tempdir().unwrap();
    config(dir.path());
    let bytes: Vec<u8> = (0..=u16::MAX).flat_map(|b| b.to_le_bytes()).collect();
    write_safetensors(
        &dir.path().join("model.safetensors"),
        &[
            ("h", Dtype::F16, vec![65536], bytes.clone()),
            ("b", Dtype::BF16, vec![65536], bytes),
        ],
    );
    let ckpt = Checkpoint::open(dir.path()).unwrap();
    let h = ckpt.tensor("h").unwrap().to_f32().unwrap();
    let b = ckpt.tensor("b").unwrap().to_f32().unwrap();
    let mut seen = HashMap::new();
    for bits in 0..=u16::MAX {
        let (x, y) = (h[bits as usize], b[bits as usize]);
        assert_eq!(x.to_bits(), half::f16::from_bits(bits).to_f32().to_bits());
        assert_eq!(y.to_bits(), half::bf16::from_bits(bits).to_f32().to_bits());
        *seen.entry(x.is_nan()).or_insert(0) += 1;
    }
    assert_eq!(seen[&true], 2046, "f16 NaN patterns");
}
