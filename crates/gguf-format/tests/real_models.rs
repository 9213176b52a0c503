//! Tests on the real models (`cargo xtask models` fetches them; CI requires them).

use gguf_format::split::{merge, write_split, SplitLimit, SplitSet};
use gguf_format::{keys, ArrayView, GgmlType, GgufBuilder, GgufFile};
use gguf_test_support::real_model;

fn rewrite(file: &GgufFile<'_>) -> Vec<u8> {
    let out = Vec::with_capacity(file.bytes().len());
    GgufBuilder::from_file(file)
        .write_from(file, out, &mut |_, _| {})
        .unwrap()
}

#[test]
fn smollm2_known_answers_and_byte_exact_round_trip() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let mapped = GgufFile::open(&path).unwrap();
    let f = mapped.file();
    assert_eq!(
        (f.version(), f.alignment(), f.data_offset()),
        (3, 32, 1_785_664)
    );
    assert_eq!((f.metadata().len(), f.tensors().len()), (33, 272));
    assert_eq!(f.architecture().unwrap(), "llama");
    assert_eq!(f.arch_get::<u32>(keys::llm::BLOCK_COUNT).unwrap(), 30);
    assert_eq!(f.arch_get::<u32>(keys::llm::EMBEDDING_LENGTH).unwrap(), 576);
    assert_eq!(
        f.arch_get::<u32>(keys::attention::HEAD_COUNT_KV).unwrap(),
        3
    );
    assert_eq!(f.arch_get::<f32>(keys::rope::FREQ_BASE).unwrap(), 100000.0);
    assert_eq!(f.get::<&str>(keys::tokenizer::MODEL).unwrap(), "gpt2");
    assert_eq!(f.get::<&str>(keys::tokenizer::PRE).unwrap(), "smollm");
    let tokens: ArrayView = f.get(keys::tokenizer::TOKENS).unwrap();
    assert_eq!(tokens.len(), 49152);
    assert_eq!(tokens.strings().unwrap().next().unwrap(), b"<|endoftext|>");
    assert_eq!(tokens.get(49151).unwrap().as_str(), Some("ectable"));
    assert_eq!(
        f.get::<ArrayView>(keys::tokenizer::MERGES)
            .unwrap()
            .get(0)
            .unwrap()
            .as_str(),
        Some("\u{120} t")
    );
    let embd = f.tensor("token_embd.weight").unwrap();
    assert_eq!(
        (embd.ggml_type, embd.shape()),
        (GgmlType::Q8_0, &[576u64, 49152][..])
    );
    let q = f.tensor("blk.0.attn_q.weight").unwrap();
    assert_eq!(
        (q.ggml_type, q.shape(), q.size),
        (GgmlType::Q4_1, &[576u64, 576][..], 207_360)
    );
    assert!(f.has_canonical_layout());
    assert!(rewrite(f) == f.bytes(), "rewrite differs from the original");
}

#[test]
fn gemma3_known_answers_and_byte_exact_round_trip() {
    let Some(path) = real_model("gemma3-270m") else {
        return;
    };
    let mapped = GgufFile::open(&path).unwrap();
    let f = mapped.file();
    assert_eq!(f.architecture().unwrap(), "gemma3");
    assert_eq!(f.get::<&str>(keys::tokenizer::MODEL).unwrap(), "llama");
    assert_eq!(f.tensors().len(), 236);
    let mut counts = std::collections::BTreeMap::new();
    for t in f.tensors() {
        *counts.entry(t.ggml_type.name()).or_insert(0) += 1;
    }
    assert_eq!(
        counts.into_iter().collect::<Vec<_>>(),
        [
            ("F32", 109),
            ("Q4_K", 27),
            ("Q5_0", 81),
            ("Q6_K", 9),
            ("Q8_0", 10)
        ]
    );
    assert!(rewrite(f) == f.bytes(), "rewrite differs from the original");
}

#[test]
fn smollm2_split_and_merge_round_trip() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("smol").to_string_lossy().into_owned();
    let parts = write_split(
        &path,
        &prefix,
        SplitLimit::MaxBytes(40_000_000),
        false,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(parts.len(), 3);
    assert!(parts[0]
        .to_string_lossy()
        .ends_with("smol-00001-of-00003.gguf"));
    let original = GgufFile::open(&path).unwrap();
    let set = SplitSet::open(&parts[1]).unwrap();
    assert_eq!(set.tensor_count(), 272);
    for t in original.file().tensors() {
        assert_eq!(
            set.tensor(t.name).unwrap().1,
            original.file().tensor_data(t),
            "{}",
            t.name
        );
    }
    // No part may exceed the limit unless it holds a single tensor.
    for p in set.parts() {
        let data: u64 = p
            .file()
            .tensors()
            .iter()
            .map(|t| t.size.next_multiple_of(32))
            .sum();
        assert!(data <= 40_000_000 || p.file().tensors().len() == 1);
    }
    let merged = dir.path().join("merged.gguf");
    merge(&parts[0], &merged, &mut |_, _| {}).unwrap();
    let err = merge(&parts[0], &merged, &mut |_, _| {}).unwrap_err();
    assert!(err.to_string().contains("already exists"), "{err}");
    let merged = GgufFile::open(&merged).unwrap();
    let m = merged.file();
    assert_eq!(m.get::<u16>("split.count").unwrap(), 0);
    assert_eq!(m.metadata().len(), original.file().metadata().len() + 3);
    for kv in original.file().metadata() {
        assert_eq!(m.value(kv.key), Some(kv.value), "{}", kv.key);
    }
    for t in original.file().tensors() {
        let mt = m.tensor(t.name).unwrap();
        assert_eq!(m.tensor_data(mt), original.file().tensor_data(t));
    }
}

fn sha256(path: &std::path::Path) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(std::fs::read(path).unwrap());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// SHA-256 of the files llama.cpp's own `llama-gguf-split` (llama.cpp 0c1e57098, from the
/// llama-cpp-python 0.3.36 sdist) wrote for the same inputs and options; our splitter and
/// merger must produce the very same bytes.
#[test]
fn split_and_merge_are_byte_identical_to_llama_cpp_gguf_split() {
    struct Case {
        model: &'static str,
        limit: SplitLimit,
        no_tensor_first_split: bool,
        parts: &'static [&'static str],
        merged: Option<&'static str>,
    }
    // `llama-gguf-split --split --split-max-size 40M`, then `--merge` of its parts.
    let smol_40m = Case {
        model: "smollm2-135m",
        limit: SplitLimit::MaxBytes(40_000_000),
        no_tensor_first_split: false,
        parts: &[
            "3f5ab9ffa02a0f8eb50435b7929dbbb5e5ecff012bd90426ccc5eb6b90f02e49",
            "248ceca2b27c2b7eced896a10a3ddb7114b4da82d4e6c4b40272b459993fd369",
            "4b40b6cdaa9b35a97fd697b3ca413ac89c1df12347da6916d72bc8cc56fa7bc9",
        ],
        merged: Some("2c7349e55c33f7982bfc974ab310c9a6c7de876027d7cbe0dd50a945e7ac7269"),
    };
    // `--split --split-max-tensors 100 --no-tensor-first-split`; merging gives the same file.
    let smol_100 = Case {
        model: "smollm2-135m",
        limit: SplitLimit::MaxTensors(100),
        no_tensor_first_split: true,
        parts: &[
            "39bb81fc7ff866014dfa33d6192961a4ae742ef812674adfe7d2f4405dfdaac3",
            "e1a5d56d466df06163b486c746d0faeb067ce14c96af453b0379272ebf5e470e",
            "73775f2a3239eadf6406bf5f4b18a43e1a37c5f2c5796f43125565002f84e711",
            "39fe9475b8bb501caf659edda605a7ebc44a80d517255564188219b31c82ad60",
        ],
        merged: Some("2c7349e55c33f7982bfc974ab310c9a6c7de876027d7cbe0dd50a945e7ac7269"),
    };
    // `--split --split-max-size 100M` of Gemma 3.
    let gemma_100m = Case {
        model: "gemma3-270m",
        limit: SplitLimit::MaxBytes(100_000_000),
        no_tensor_first_split: false,
        parts: &[
            "0b9bbdd59c6ef08fc45b9803c39a802808cdbf8cf634238060a0dc6986bcf731",
            "0d82191d4e97c6eb24d49823aa18dd635272ed1399de6e5842762864aba80747",
            "0ea5235dea318b29073235edf1439ae8c5362270d4addf091aebefb6df3a7dae",
        ],
        merged: None,
    };
    for case in [smol_40m, smol_100, gemma_100m] {
        let Some(path) = real_model(case.model) else {
            continue;
        };
        let dir = tempfile::tempdir().unwrap();
        let prefix = dir.path().join("p").to_string_lossy().into_owned();
        let parts = write_split(
            &path,
            &prefix,
            case.limit,
            case.no_tensor_first_split,
            &mut |_, _| {},
        )
        .unwrap();
        let hashes: Vec<String> = parts.iter().map(|p| sha256(p)).collect();
        assert_eq!(hashes, case.parts, "{} {:?}", case.model, case.limit);
        if let Some(expected) = case.merged {
            let merged = dir.path().join("merged.gguf");
            merge(&parts[0], &merged, &mut |_, _| {}).unwrap();
            assert_eq!(sha256(&merged), expected, "{} merged", case.model);
        }
    }
}
