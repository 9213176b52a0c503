//! Hostile input: every truncation and thousands of mutations must give `Ok` or a clean `Err`.

use gguf_format::{ArrayView, GgufFile, Value};
use gguf_test_support::{fixture_bytes, real_model, Rng};

/// Touches everything a reader would, so lazy views are exercised too.
fn walk(file: &GgufFile<'_>) -> usize {
    let mut n = 0;
    fn visit(v: Value<'_>, n: &mut usize) {
        *n += 1;
        if let Value::Array(a) = v {
            for item in a.iter() {
                visit(item, n);
            }
            let _ = a.get(a.len().saturating_sub(1));
        }
    }
    for kv in file.metadata() {
        visit(kv.value, &mut n);
    }
    for t in file.tensors() {
        n += file.tensor_data(t).len();
    }
    n
}

const VALID: &[&str] = &[
    "all-types-v1.gguf",
    "all-types-v2.gguf",
    "all-types-v3.gguf",
    "all-types-be.gguf",
    "align-64.gguf",
    "split-00001-of-00003.gguf",
];

#[test]
fn every_truncation_fails_cleanly() {
    for name in VALID {
        let bytes = fixture_bytes(name);
        let file = GgufFile::parse(&bytes).unwrap();
        let data_end = file
            .tensors()
            .iter()
            .map(|t| file.data_offset() + t.offset + t.size)
            .max()
            .unwrap_or(0);
        for len in 0..bytes.len() {
            match GgufFile::parse(&bytes[..len]) {
                Ok(f) => {
                    // Only padding may be cut off without error.
                    assert!(len as u64 >= data_end, "{name}: truncated to {len} parsed");
                    walk(&f);
                }
                Err(e) => assert!(!e.to_string().is_empty()),
            }
        }
    }
}

#[test]
fn random_mutations_never_panic() {
    let mut rng = Rng(0x5EED_1234_ABCD_0001);
    for name in VALID {
        let original = fixture_bytes(name);
        let mut bytes = original.clone();
        for _ in 0..3000 {
            let edits = 1 + rng.below(4);
            let mut touched = Vec::new();
            for _ in 0..edits {
                let at = rng.below(bytes.len() as u64) as usize;
                touched.push(at);
                bytes[at] = match rng.below(4) {
                    0 => 0xFF,
                    1 => 0,
                    2 => bytes[at] ^ (1 << rng.below(8)),
                    _ => rng.next() as u8,
                };
            }
            if let Ok(file) = GgufFile::parse(&bytes) {
                walk(&file);
            }
            for at in touched {
                bytes[at] = original[at];
            }
        }
    }
}

#[test]
fn mutations_of_a_real_model_header_never_panic() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let original = std::fs::read(path).unwrap();
    let header_len = GgufFile::parse(&original).unwrap().data_offset() as usize;
    let mut bytes = original.clone();
    let mut rng = Rng(42);
    for _ in 0..300 {
        let at = rng.below(header_len as u64) as usize;
        bytes[at] = rng.next() as u8;
        if let Ok(file) = GgufFile::parse(&bytes) {
            walk(&file);
        }
        bytes[at] = original[at];
    }
}

mod roundtrip {
    use gguf_format::{
        ByteOrder, GgmlType, GgufBuilder, GgufFile, OwnedArray, OwnedValue, ValueType,
    };
    use proptest::prelude::*;

    fn scalar() -> impl Strategy<Value = OwnedValue> + Clone {
        prop_oneof![
            any::<u8>().prop_map(OwnedValue::U8),
            any::<i8>().prop_map(OwnedValue::I8),
            any::<u16>().prop_map(OwnedValue::U16),
            any::<i16>().prop_map(OwnedValue::I16),
            any::<u32>().prop_map(OwnedValue::U32),
            any::<i32>().prop_map(OwnedValue::I32),
            (-1e30f32..1e30).prop_map(OwnedValue::F32),
            any::<bool>().prop_map(OwnedValue::Bool),
            proptest::collection::vec(any::<u8>(), 0..24).prop_map(OwnedValue::String),
            any::<u64>().prop_map(OwnedValue::U64),
            any::<i64>().prop_map(OwnedValue::I64),
            (-1e300f64..1e300).prop_map(OwnedValue::F64),
        ]
    }

    fn array_of(
        elem: impl Strategy<Value = OwnedValue> + Clone,
    ) -> impl Strategy<Value = OwnedValue> + Clone {
        proptest::collection::vec(elem, 1..6).prop_filter_map("one element type", |items| {
            let ty = items[0].value_type();
            OwnedArray::new(
                ty,
                items.into_iter().filter(|v| v.value_type() == ty).collect(),
            )
            .ok()
            .map(OwnedValue::Array)
        })
    }

    fn value() -> impl Strategy<Value = OwnedValue> {
        prop_oneof![
            4 => scalar(),
            1 => array_of(scalar()),
            1 => array_of(array_of(scalar())),
            1 => Just(OwnedValue::Array(OwnedArray::new(ValueType::String, vec![]).unwrap())),
        ]
    }

    fn tensor() -> impl Strategy<Value = (GgmlType, Vec<u64>)> {
        (
            0..GgmlType::ALL.len(),
            proptest::collection::vec(1u64..4, 0..4),
            1u64..3,
        )
            .prop_map(|(t, mut rest, blocks)| {
                let ty = GgmlType::ALL[t];
                rest.insert(0, ty.block_size() * blocks);
                (ty, rest)
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]
        #[test]
        fn write_read_write_is_identity(
            kvs in proptest::collection::vec(("[a-z]{1,6}(\\.[a-z]{1,6}){0,2}", value()), 0..12),
            tensors in proptest::collection::vec(tensor(), 0..6),
            version in 1u32..=3,
            big in any::<bool>(),
            align_pow in proptest::option::of(0u32..8),
        ) {
            let mut b = GgufBuilder::new();
            b.version(version).unwrap();
            b.byte_order(if big { ByteOrder::Big } else { ByteOrder::Little });
            let mut expected = Vec::new();
            for (k, v) in kvs {
                if expected.iter().any(|(e, _): &(String, OwnedValue)| *e == k) || k == "general.alignment" { continue; }
                b.set(&k, v.clone());
                expected.push((k, v));
            }
            if let Some(p) = align_pow {
                b.set("general.alignment", 1u32 << p);
                expected.push(("general.alignment".into(), OwnedValue::U32(1 << p)));
            }
            for (i, (ty, shape)) in tensors.iter().enumerate() {
                b.add_tensor(&format!("t{i}"), *ty, shape).unwrap();
            }
            let mut out = Vec::new();
            let mut w = b.write(&mut out).unwrap();
            let mut datas = Vec::new();
            for (i, t) in b.tensors().iter().enumerate() {
                let data: Vec<u8> = (0..t.size()).map(|j| (j as u8).wrapping_mul(31).wrapping_add(i as u8)).collect();
                w.write_tensor(&data).unwrap();
                datas.push(data);
            }
            w.finish().unwrap();

            let file = GgufFile::parse(&out).unwrap();
            prop_assert_eq!(file.version(), version);
            prop_assert_eq!(file.metadata().len(), expected.len());
            for (kv, (k, v)) in file.metadata().iter().zip(&expected) {
                prop_assert_eq!(kv.key, k.as_str());
                prop_assert_eq!(&OwnedValue::from_value(kv.value), v);
            }
            for ((t, (ty, shape)), data) in file.tensors().iter().zip(&tensors).zip(&datas) {
                prop_assert_eq!(t.ggml_type, *ty);
                prop_assert_eq!(t.shape(), shape.as_slice());
                prop_assert_eq!(file.tensor_data(t), data.as_slice());
            }
            prop_assert!(file.has_canonical_layout());

            let mut again = Vec::new();
            let mut b2 = GgufBuilder::from_file(&file);
            b2.version(version).unwrap();
            let mut w = b2.write(&mut again).unwrap();
            for t in file.tensors() { w.write_tensor(file.tensor_data(t)).unwrap(); }
            w.finish().unwrap();
            prop_assert!(again == out);

            // Converting to little-endian v3 keeps every value and tensor.
            let mut b3 = GgufBuilder::from_file(&file);
            b3.version(3).unwrap();
            b3.byte_order(ByteOrder::Little);
            let v3 = b3.write_from(&file, Vec::new(), &mut |_, _| {}).unwrap();
            let converted = GgufFile::parse(&v3).unwrap();
            prop_assert_eq!(converted.metadata().len(), file.metadata().len());
            for (a, b) in converted.metadata().iter().zip(file.metadata()) {
                prop_assert_eq!(a.key, b.key);
                prop_assert_eq!(a.value, b.value);
            }
            for (a, b) in converted.tensors().iter().zip(file.tensors()) {
                prop_assert_eq!(converted.tensor_data(a), file.tensor_data(b));
            }
        }
    }
}

#[test]
fn array_views_from_hostile_bytes_stay_bounded() {
    // A valid array whose declared length is large but honest: iteration ends at the data.
    let bytes = fixture_bytes("all-types-v3.gguf");
    let file = GgufFile::parse(&bytes).unwrap();
    let a: ArrayView = file.get("test.array.string").unwrap();
    assert_eq!(a.iter().count(), 3);
    assert_eq!(a.iter().nth(10), None);
}
