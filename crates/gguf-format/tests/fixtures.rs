//! Known-answer tests on the committed fixtures (`cargo xtask fixtures`).

use gguf_format::split::SplitSet;
use gguf_format::{ArrayView, ByteOrder, Error, GgmlType, GgufBuilder, GgufFile, Value, ValueType};
use gguf_test_support::{fixture_bytes, fixtures};

fn check_metadata(file: &GgufFile<'_>) {
    assert_eq!(file.get::<u8>("test.u8").unwrap(), 200);
    assert_eq!(file.get::<i8>("test.i8").unwrap(), -100);
    assert_eq!(file.get::<u16>("test.u16").unwrap(), 60000);
    assert_eq!(file.get::<i16>("test.i16").unwrap(), -30000);
    assert_eq!(file.get::<u32>("test.u32").unwrap(), 4_000_000_000);
    assert_eq!(file.get::<i32>("test.i32").unwrap(), -2_000_000_000);
    assert_eq!(file.get::<f32>("test.f32").unwrap(), 1.5);
    assert!(file.get::<bool>("test.bool").unwrap());
    assert_eq!(
        file.get::<&str>("test.string").unwrap(),
        "h\u{e9}llo \u{2713}"
    );
    assert_eq!(file.get::<u64>("test.u64").unwrap(), (1 << 63) + 5);
    assert_eq!(file.get::<i64>("test.i64").unwrap(), -(1 << 62));
    assert_eq!(file.get::<f64>("test.f64").unwrap(), -0.125);
    assert_eq!(
        file.get_array::<u8>("test.array.u8")
            .unwrap()
            .collect::<Vec<_>>(),
        [1, 2, 3]
    );
    assert_eq!(
        file.get_array::<i16>("test.array.i16")
            .unwrap()
            .collect::<Vec<_>>(),
        [-1, 0, 1]
    );
    assert_eq!(
        file.get_array::<f32>("test.array.f32")
            .unwrap()
            .collect::<Vec<_>>(),
        [0.5, -2.0, 1e-5]
    );
    assert_eq!(
        file.get_array::<bool>("test.array.bool")
            .unwrap()
            .collect::<Vec<_>>(),
        [true, false, true]
    );
    assert_eq!(
        file.get_array::<&str>("test.array.string")
            .unwrap()
            .collect::<Vec<_>>(),
        ["a", "", "\u{fc}"]
    );
    assert_eq!(
        file.get_array::<u64>("test.array.u64")
            .unwrap()
            .collect::<Vec<_>>(),
        [u64::MAX, 0]
    );
    assert_eq!(
        file.get_array::<f64>("test.array.f64")
            .unwrap()
            .collect::<Vec<_>>(),
        [3.25]
    );
    let empty: ArrayView = file.get("test.array.empty").unwrap();
    assert_eq!((empty.element_type(), empty.len()), (ValueType::U32, 0));
    let nested: Vec<Vec<i32>> = file
        .get_array::<ArrayView>("test.array.nested")
        .unwrap()
        .map(|a| a.typed::<i32>().unwrap().collect())
        .collect();
    assert_eq!(nested, [vec![1, 2], vec![3]]);
    assert_eq!(
        file.get::<u32>(gguf_format::keys::tokenizer::SEPARATOR_ID)
            .unwrap(),
        7
    );
    assert_eq!(file.arch_get::<u32>("block_count").unwrap(), 1);
    assert_eq!(file.get_usize("test.u16").unwrap(), 60000);
}

fn check_all_types(file: &GgufFile<'_>) {
    check_metadata(file);
    let names: Vec<_> = file
        .tensors()
        .iter()
        .map(|t| (t.name, t.ggml_type, t.shape().to_vec()))
        .collect();
    assert_eq!(
        names,
        [
            ("f32", GgmlType::F32, vec![4, 2]),
            ("f16", GgmlType::F16, vec![8]),
            ("q8_0", GgmlType::Q8_0, vec![64, 2]),
            ("q4_k", GgmlType::Q4_K, vec![256]),
            ("i8", GgmlType::I8, vec![3, 1, 1, 2]),
            ("empty", GgmlType::F32, vec![0, 4]),
        ]
    );
    let sizes: Vec<u64> = file.tensors().iter().map(|t| t.size).collect();
    assert_eq!(sizes, [32, 16, 136, 144, 6, 0]);
    for t in file.tensors() {
        assert_eq!(file.tensor_data(t).len() as u64, t.size);
        assert_eq!(t.offset % file.alignment(), 0);
    }
    assert!(file.has_canonical_layout());
}

#[test]
fn all_versions_and_byte_orders_read_the_same() {
    let v3 = fixture_bytes("all-types-v3.gguf");
    let reference = GgufFile::parse(&v3).unwrap();
    for (name, version, order) in [
        ("all-types-v1.gguf", 1, ByteOrder::Little),
        ("all-types-v2.gguf", 2, ByteOrder::Little),
        ("all-types-v3.gguf", 3, ByteOrder::Little),
        ("all-types-be.gguf", 3, ByteOrder::Big),
    ] {
        let bytes = fixture_bytes(name);
        let file = GgufFile::parse(&bytes).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            (file.version(), file.byte_order()),
            (version, order),
            "{name}"
        );
        check_all_types(&file);
        // Same values and the same tensor bytes as the v3 file, whatever the encoding.
        for kv in reference.metadata() {
            assert_eq!(file.value(kv.key), Some(kv.value), "{name}: {}", kv.key);
        }
        for t in reference.tensors() {
            let other = file.tensor(t.name).unwrap();
            assert_eq!(
                file.tensor_data(other),
                reference.tensor_data(t),
                "{name}: {}",
                t.name
            );
        }
    }
}

#[test]
fn typed_access_errors_name_key_and_types() {
    let bytes = fixture_bytes("all-types-v3.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let e = file.get::<u64>("test.u32").unwrap_err();
    assert!(
        matches!(&e, Error::WrongType { key, expected, found } if key == "test.u32" && expected == "u64" && found == "u32"),
        "{e}"
    );
    assert_eq!(
        e.to_string(),
        "metadata key 'test.u32' has type u32, expected u64"
    );
    let e = file.get::<u32>("no.such.key").unwrap_err();
    assert_eq!(e.to_string(), "metadata key 'no.such.key' is missing");
    assert!(file.get_opt::<u32>("no.such.key").unwrap().is_none());
    let e = file.get_array::<u32>("test.array.u8").err().unwrap();
    assert_eq!(
        e.to_string(),
        "metadata key 'test.array.u8' has type u8, expected array of u32"
    );
    assert!(file.get_usize("test.i8").is_err());
}

#[test]
fn array_views_index_and_borrow() {
    let bytes = fixture_bytes("all-types-v3.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let strings: ArrayView = file.get("test.array.string").unwrap();
    assert_eq!(strings.get(2), Some(Value::String("\u{fc}".as_bytes())));
    assert_eq!(strings.get(3), None);
    let floats: ArrayView = file.get("test.array.f32").unwrap();
    assert_eq!(floats.get(1), Some(Value::F32(-2.0)));
    assert_eq!(floats.iter().nth(2), Some(Value::F32(1e-5)));
    // Zero-copy view when the bytes happen to be aligned; identical values either way.
    if let Some(slice) = floats.as_slice::<f32>() {
        assert_eq!(slice, &[0.5, -2.0, 1e-5]);
    }
    let be = fixture_bytes("all-types-be.gguf");
    let be = GgufFile::parse(&be).unwrap();
    assert!(be
        .get::<ArrayView>("test.array.f32")
        .unwrap()
        .as_slice::<f32>()
        .is_none());
}

#[test]
fn alignment_is_honoured() {
    let bytes = fixture_bytes("align-64.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    assert_eq!(file.alignment(), 64);
    assert_eq!(file.data_offset() % 64, 0);
    assert!(file.tensors().iter().all(|t| t.offset.is_multiple_of(64)));
    check_all_types(&file);
    let no_tensors = fixture_bytes("no-tensors.gguf");
    let file = GgufFile::parse(&no_tensors).unwrap();
    assert!(file.tensors().is_empty());
    assert_eq!(file.architecture().unwrap(), "none");
}

#[test]
fn writing_back_reproduces_every_v3_fixture_byte_for_byte() {
    for name in [
        "all-types-v3.gguf",
        "all-types-be.gguf",
        "align-64.gguf",
        "no-tensors.gguf",
        "split-00001-of-00003.gguf",
    ] {
        let bytes = fixture_bytes(name);
        let file = GgufFile::parse(&bytes).unwrap();
        let out = GgufBuilder::from_file(&file)
            .write_from(&file, Vec::new(), &mut |_, _| {})
            .unwrap();
        assert!(out == bytes, "{name}: rewritten file differs");
    }
}

#[test]
fn split_set_reads_as_one_model() {
    let first = fixtures().join("split-00001-of-00003.gguf");
    let set = SplitSet::open(&first).unwrap();
    assert_eq!(set.parts().len(), 3);
    assert_eq!(set.tensor_count(), 6);
    let whole = fixture_bytes("all-types-v3.gguf");
    let whole = GgufFile::parse(&whole).unwrap();
    for t in whole.tensors() {
        let (info, data) = set.tensor(t.name).unwrap();
        assert_eq!(info.ggml_type, t.ggml_type);
        assert_eq!(data, whole.tensor_data(t), "{}", t.name);
    }
    check_metadata(set.metadata());
    // Opening any part finds the whole set.
    let via_last = SplitSet::open(fixtures().join("split-00003-of-00003.gguf")).unwrap();
    assert_eq!(via_last.tensor_count(), 6);
    // Part layout follows gguf-split: split keys last, in its order, on every part.
    let keys: Vec<&str> = set.parts()[1]
        .file()
        .metadata()
        .iter()
        .map(|kv| kv.key)
        .collect();
    assert_eq!(keys, ["split.no", "split.tensors.count", "split.count"]);
    let first_keys: Vec<&str> = set.metadata().metadata().iter().map(|kv| kv.key).collect();
    assert_eq!(
        first_keys[first_keys.len() - 3..],
        ["split.no", "split.tensors.count", "split.count"]
    );
    assert_eq!(set.metadata().get::<u16>("split.count").unwrap(), 3);
    assert_eq!(set.metadata().get::<i32>("split.tensors.count").unwrap(), 6);
    // ggml's writer drops trailing 1-dimensions, and so does our splitter.
    assert_eq!(set.tensor("i8").unwrap().0.shape(), &[3, 1, 1, 2]);
}

#[test]
fn every_corrupt_fixture_fails_with_its_error() {
    let expected: &[(&str, &str)] = &[
        ("bad-magic.gguf", "at byte 0: not a GGUF file: expected magic \"GGUF\", found \"GGUX\""),
        ("legacy-ggjt.gguf", "legacy GGJT file"),
        ("truncated-header.gguf", "at byte 8: file is truncated: tensor count needs 8 bytes but only 4 remain"),
        ("bad-version.gguf", "at byte 4: unsupported GGUF version 4"),
        ("huge-kv-count.gguf", "at byte 24: file is truncated: 4611686018427387904 metadata entries"),
        ("huge-string-length.gguf", "at byte 32: file is truncated: key of metadata entry 0 needs 18446744073709551615 bytes but only 3 remain"),
        ("unknown-value-type.gguf", "at byte 33: value of metadata key 'k' has unknown value type id 13"),
        ("invalid-bool.gguf", "at byte 40: value of metadata key 'flag' is a bool but holds 2"),
        ("invalid-utf8-key.gguf", "at byte 32: key of metadata entry 0 is not valid UTF-8"),
        ("duplicate-key.gguf", "at byte 43: duplicate metadata key 'a.b' (first defined at byte 24)"),
        ("bad-alignment.gguf", "at byte 24: general.alignment is 48; expected a non-zero power of two"),
        ("alignment-wrong-type.gguf", "general.alignment is of type u64"),
        ("huge-array-length.gguf", "1152921504606846976 elements of type u32 in value of metadata key 'arr'"),
        ("deep-nested-array.gguf", "nests arrays deeper than 32 levels"),
        ("too-many-dims.gguf", "at byte 33: tensor 't' has 5 dimensions (expected at most 4)"),
        ("unknown-ggml-type.gguf", "at byte 45: tensor 't' has unknown ggml type id 99"),
        ("retired-ggml-type.gguf", "ggml type id 31 (Q4_0_4_4), which was removed from ggml"),
        ("bad-block-shape.gguf", "tensor 't' of type Q8_0 has invalid shape [33]: ne[0] must be a multiple of the block size 32"),
        ("misaligned-tensor.gguf", "tensor 't' has data offset 8, not a multiple of the alignment 32"),
        ("tensor-out-of-bounds.gguf", "tensor 't' needs bytes 64..320 of the file but the file has 80 bytes"),
        ("shape-overflow.gguf", "overflows 64 bits"),
        ("overlapping-tensors.gguf", "at byte 57: tensor 'b' (from data byte 32) overlaps tensor 'a' (data bytes 0..64)"),
        ("duplicate-tensor.gguf", "at byte 57: duplicate tensor name 'a' (first defined at byte 24)"),
    ];
    let dir = fixtures().join("corrupt");
    let on_disk = std::fs::read_dir(&dir).unwrap().count();
    assert_eq!(
        on_disk,
        expected.len(),
        "every corrupt fixture needs an expected error here"
    );
    for (name, message) in expected {
        let path = dir.join(name);
        let err = GgufFile::open(&path)
            .err()
            .unwrap_or_else(|| panic!("{name} parsed"));
        let text = err.to_string();
        assert!(
            text.starts_with(&path.display().to_string()),
            "{name}: {text}"
        );
        assert!(
            text.contains(message),
            "{name}: got {text:?}, expected {message:?}"
        );
    }
}
