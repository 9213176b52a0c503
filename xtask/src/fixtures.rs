//! `cargo xtask fixtures`: small deterministic GGUF files for tests, written to `fixtures/`.
//!
//! Valid files are built with `gguf-format`'s own writer; corrupt ones with a raw byte
//! builder, so each carries exactly one defect at a known place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use gguf_format::split::{write_split, SplitLimit};
use gguf_format::{ByteOrder, GgmlType, GgufBuilder, OwnedArray, OwnedValue, ValueType};

/// Deterministic tensor bytes: a simple pattern seeded by the tensor's index.
fn pattern(len: u64, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn all_types_builder() -> Result<GgufBuilder<'static>> {
    let mut b = GgufBuilder::new();
    b.set("general.architecture", "llama")
        .set("general.name", "all value types")
        .set("test.u8", 200u8)
        .set("test.i8", -100i8)
        .set("test.u16", 60000u16)
        .set("test.i16", -30000i16)
        .set("test.u32", 4_000_000_000u32)
        .set("test.i32", -2_000_000_000i32)
        .set("test.f32", 1.5f32)
        .set("test.bool", true)
        .set("test.string", "h\u{e9}llo \u{2713}")
        .set("test.u64", (1u64 << 63) + 5)
        .set("test.i64", -(1i64 << 62))
        .set("test.f64", -0.125f64)
        .set("test.array.u8", vec![1u8, 2, 3])
        .set("test.array.i16", vec![-1i16, 0, 1])
        .set("test.array.f32", vec![0.5f32, -2.0, 1e-5])
        .set("test.array.bool", vec![true, false, true])
        .set("test.array.string", vec!["a", "", "\u{fc}"])
        .set("test.array.u64", vec![u64::MAX, 0])
        .set("test.array.f64", vec![3.25f64])
        .set("test.array.empty", OwnedArray::new(ValueType::U32, vec![])?)
        .set(
            "test.array.nested",
            OwnedArray::new(
                ValueType::Array,
                vec![
                    OwnedValue::from(vec![1i32, 2]),
                    OwnedValue::from(vec![3i32]),
                ],
            )?,
        )
        .set("tokenizer.ggml.seperator_token_id", 7u32)
        .set("llama.block_count", 1u32);
    b.add_tensor("f32", GgmlType::F32, &[4, 2])?
        .add_tensor("f16", GgmlType::F16, &[8])?
        .add_tensor("q8_0", GgmlType::Q8_0, &[64, 2])?
        .add_tensor("q4_k", GgmlType::Q4_K, &[256])?
        .add_tensor("i8", GgmlType::I8, &[3, 1, 1, 2])?
        .add_tensor("empty", GgmlType::F32, &[0, 4])?;
    Ok(b)
}

fn write_with_pattern(b: &GgufBuilder<'_>) -> Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut w = b.write(&mut out)?;
    for (i, t) in b.tensors().iter().enumerate() {
        w.write_tensor(&pattern(t.size(), i as u64 + 1))?;
    }
    w.finish()?;
    Ok(out)
}

/// A byte builder for hand-made (mostly broken) files: little-endian, GGUF v3.
#[derive(Default)]
struct Raw(Vec<u8>);

impl Raw {
    fn header(tensors: u64, kvs: u64) -> Raw {
        let mut r = Raw::default();
        r.bytes(b"GGUF").u32(3).u64(tensors).u64(kvs);
        r
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.0.extend_from_slice(b);
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.bytes(&v.to_le_bytes())
    }
    fn string(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64).bytes(s)
    }
    fn kv_u32(&mut self, key: &str, v: u32) -> &mut Self {
        self.string(key.as_bytes()).u32(ValueType::U32.id()).u32(v)
    }
    fn tensor(&mut self, name: &str, shape: &[u64], ty: u32, offset: u64) -> &mut Self {
        self.string(name.as_bytes()).u32(shape.len() as u32);
        for &d in shape {
            self.u64(d);
        }
        self.u32(ty).u64(offset)
    }
    fn pad(&mut self, align: usize) -> &mut Self {
        while !self.0.len().is_multiple_of(align) {
            self.0.push(0);
        }
        self
    }
    fn zeros(&mut self, n: usize) -> &mut Self {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    fn done(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.0)
    }
}

/// Files with exactly one defect each; tests assert the error each must give.
fn corrupt_files() -> Vec<(&'static str, Vec<u8>)> {
    let one_tensor = |name: &str, shape: &[u64], ty: u32, offset: u64, data: usize| {
        let mut r = Raw::header(1, 0);
        r.tensor(name, shape, ty, offset).pad(32).zeros(data);
        r.done()
    };
    let mut nested = Raw::header(0, 1);
    nested.string(b"deep").u32(ValueType::Array.id());
    for _ in 0..40 {
        nested.u32(ValueType::Array.id()).u64(1);
    }
    nested.u32(ValueType::U8.id()).u64(0);
    vec![
        (
            "bad-magic.gguf",
            Raw::default().bytes(b"GGUX").u32(3).u64(0).u64(0).done(),
        ),
        (
            "legacy-ggjt.gguf",
            Raw::default().bytes(b"tjgg").u32(3).done(),
        ),
        (
            "truncated-header.gguf",
            Raw::default().bytes(b"GGUF").u32(3).u32(0).done(),
        ),
        (
            "bad-version.gguf",
            Raw::default().bytes(b"GGUF").u32(4).u64(0).u64(0).done(),
        ),
        ("huge-kv-count.gguf", Raw::header(0, 1 << 62).done()),
        (
            "huge-string-length.gguf",
            Raw::header(0, 1).u64(u64::MAX).bytes(b"key").done(),
        ),
        (
            "unknown-value-type.gguf",
            Raw::header(0, 1).string(b"k").u32(13).u32(0).done(),
        ),
        (
            "invalid-bool.gguf",
            Raw::header(0, 1).string(b"flag").u32(7).bytes(&[2]).done(),
        ),
        (
            "invalid-utf8-key.gguf",
            Raw::header(0, 1).string(b"k\xff").u32(0).bytes(&[1]).done(),
        ),
        (
            "duplicate-key.gguf",
            Raw::header(0, 2).kv_u32("a.b", 1).kv_u32("a.b", 2).done(),
        ),
        (
            "bad-alignment.gguf",
            Raw::header(0, 1).kv_u32("general.alignment", 48).done(),
        ),
        (
            "alignment-wrong-type.gguf",
            Raw::header(0, 1)
                .string(b"general.alignment")
                .u32(ValueType::U64.id())
                .u64(32)
                .done(),
        ),
        (
            "huge-array-length.gguf",
            Raw::header(0, 1)
                .string(b"arr")
                .u32(9)
                .u32(4)
                .u64(1 << 60)
                .done(),
        ),
        ("deep-nested-array.gguf", nested.done()),
        (
            "too-many-dims.gguf",
            one_tensor("t", &[1, 1, 1, 1, 1], 0, 0, 4),
        ),
        ("unknown-ggml-type.gguf", one_tensor("t", &[4], 99, 0, 64)),
        ("retired-ggml-type.gguf", one_tensor("t", &[32], 31, 0, 64)),
        (
            "bad-block-shape.gguf",
            one_tensor("t", &[33], GgmlType::Q8_0.id(), 0, 64),
        ),
        ("misaligned-tensor.gguf", one_tensor("t", &[4], 0, 8, 64)),
        (
            "tensor-out-of-bounds.gguf",
            one_tensor("t", &[64], 0, 0, 16),
        ),
        (
            "shape-overflow.gguf",
            one_tensor("t", &[u64::MAX / 2, 4], 0, 0, 16),
        ),
        (
            "overlapping-tensors.gguf",
            Raw::header(2, 0)
                .tensor("a", &[16], 0, 0)
                .tensor("b", &[16], 0, 32)
                .pad(32)
                .zeros(128)
                .done(),
        ),
        (
            "duplicate-tensor.gguf",
            Raw::header(2, 0)
                .tensor("a", &[8], 0, 0)
                .tensor("a", &[8], 0, 32)
                .pad(32)
                .zeros(64)
                .done(),
        ),
    ]
}

/// Small llama files in the formats before GGUF, from the published layouts
/// (`legacy_fixtures`): one per container version with a tensor of every type
/// it holds, GGJT v3's K-quants, and a vocabulary-only GGJT v1 file like llama.cpp's old
/// `models/ggml-vocab.bin`.
fn legacy_files() -> Vec<(String, Vec<u8>)> {
    use crate::legacy_fixtures::{fixture, types_of, vocab_only_ggjt};
    use gguf_convert::legacy::Container;
    let mut files = Vec::new();
    for (i, (name, container)) in [
        ("ggml-llama.bin", Container::Ggml),
        ("ggmf-llama.bin", Container::Ggmf),
        ("ggjt-v1-llama.bin", Container::Ggjt(1)),
        ("ggjt-v2-llama.bin", Container::Ggjt(2)),
        ("ggjt-v3-llama.bin", Container::Ggjt(3)),
    ]
    .into_iter()
    .enumerate()
    {
        let bytes = fixture(container, types_of(container), 32, 300, i as u64 + 1);
        files.push((format!("legacy/{name}"), bytes));
    }
    let kquants = fixture(Container::Ggjt(3), &[10, 11, 12, 13, 14], 256, 8, 9);
    files.push(("legacy/ggjt-v3-kquants.bin".to_string(), kquants));
    files.push((
        "legacy/ggjt-v1-vocab-only.bin".to_string(),
        vocab_only_ggjt(1),
    ));
    files
}

/// Every fixture, by path relative to `fixtures/`.
pub fn generate() -> Result<BTreeMap<String, Vec<u8>>> {
    let mut files = BTreeMap::new();
    let base = all_types_builder()?;
    files.insert("all-types-v3.gguf".to_string(), write_with_pattern(&base)?);
    for version in [1, 2] {
        let mut b = base.clone();
        b.version(version)?;
        files.insert(
            format!("all-types-v{version}.gguf"),
            write_with_pattern(&b)?,
        );
    }
    let mut be = base.clone();
    be.byte_order(ByteOrder::Big);
    files.insert("all-types-be.gguf".to_string(), write_with_pattern(&be)?);
    let mut aligned = base.clone();
    aligned.set("general.alignment", 64u32);
    files.insert("align-64.gguf".to_string(), write_with_pattern(&aligned)?);
    let mut empty = GgufBuilder::new();
    empty.set("general.architecture", "none");
    files.insert("no-tensors.gguf".to_string(), write_with_pattern(&empty)?);

    // A split set of the v3 file, made by the library's own splitter in a scratch directory.
    let scratch = std::env::temp_dir().join(format!("gguf-fixtures-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let source = scratch.join("source.gguf");
    std::fs::write(&source, &files["all-types-v3.gguf"])?;
    let prefix = scratch.join("split").to_string_lossy().into_owned();
    let parts = write_split(
        &source,
        &prefix,
        SplitLimit::MaxTensors(2),
        false,
        &mut |_, _| {},
    )?;
    for p in parts {
        let name = p
            .file_name()
            .context("part name")?
            .to_string_lossy()
            .into_owned();
        files.insert(name, std::fs::read(&p)?);
    }
    std::fs::remove_dir_all(&scratch)?;

    files.extend(legacy_files());
    files.extend(crate::tokenizer_fixtures::files()?);
    files.extend(crate::model_fixtures::files()?);
    files.extend(crate::hf_json_fixtures::files()?);
    files.extend(crate::hf_fixtures::files()?);
    for (name, bytes) in corrupt_files() {
        files.insert(format!("corrupt/{name}"), bytes);
    }
    Ok(files)
}

/// Writes the fixtures, or with `check` fails if the files on disk differ.
pub fn run(root: &Path, check: bool) -> Result<()> {
    let dir = root.join("fixtures");
    let files = generate()?;
    let mut stale = Vec::new();
    for (name, bytes) in &files {
        let path: PathBuf = dir.join(name);
        let on_disk = std::fs::read(&path).ok();
        if on_disk.as_deref() == Some(bytes.as_slice()) {
            continue;
        }
        if check {
            stale.push(name.clone());
        } else {
            std::fs::create_dir_all(path.parent().context("fixture dir")?)?;
            std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))?;
            println!("wrote {}", path.display());
        }
    }
    if !stale.is_empty() {
        bail!(
            "fixtures are stale or missing: {}; run `cargo xtask fixtures`",
            stale.join(", ")
        );
    }
    if check {
        println!("fixtures: {} files up to date", files.len());
    }
    Ok(())
}
