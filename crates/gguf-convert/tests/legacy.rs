//! Legacy files to GGUF: the fixtures of every container version and tensor type convert
//! with the same values (against an independent dequantizer written from the old ggml
//! sources, and today's dequantizers of `gguf-quant`), the metadata is the conversion script's,
//! and damaged or foreign files are errors, never panics.

use std::path::PathBuf;

use gguf_convert::legacy::{Container, LegacyModel, Options, ScalePolicy};
use gguf_convert::Error;
use gguf_format::{GgmlType, GgufFile, Value};
use half::f16;

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/legacy")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The tensors of the fixtures whose f32 scales (in the eras that store f32 scales) are off
/// the f16 grid (`xtask`'s `legacy_fixtures::INEXACT`).
const INEXACT: [&str; 3] = [
    "output.weight",
    "layers.0.attention.wv.weight",
    "layers.0.feed_forward.w2.weight",
];

/// The tensor types each container holds, every one of which its fixture has.
fn types_of(container: Container) -> &'static [u32] {
    match container {
        Container::Ggml | Container::Ggmf => &[0, 1, 2, 3],
        Container::Ggjt(1) => &[0, 1, 2, 3, 4, 5, 6, 7, 8],
        _ => &[0, 1, 2, 3, 6, 7, 8],
    }
}

/// Every legacy fixture, with its container.
fn fixtures() -> Vec<(&'static str, Container)> {
    vec![
        ("ggml-llama.bin", Container::Ggml),
        ("ggmf-llama.bin", Container::Ggmf),
        ("ggjt-v1-llama.bin", Container::Ggjt(1)),
        ("ggjt-v2-llama.bin", Container::Ggjt(2)),
        ("ggjt-v3-llama.bin", Container::Ggjt(3)),
        ("ggjt-v3-kquants.bin", Container::Ggjt(3)),
    ]
}

fn convert(bytes: &[u8], options: &Options) -> Vec<u8> {
    let model = LegacyModel::parse(bytes).expect("parses");
    let mut out = Vec::new();
    model
        .write_gguf(options, &mut out, &mut |_, _| {})
        .expect("converts");
    out
}

fn f32_le(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

fn f16_le(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The values of a legacy tensor as the ggml of its container computed them (the
/// `dequantize_row_*` of llama-cpp-python 0.1.9's, 0.1.48's, 0.1.52's and 0.1.78's ggml.c).
fn old_values(type_id: u32, container: Container, data: &[u8]) -> Vec<f32> {
    let shuffled = matches!(
        container,
        Container::Ggml | Container::Ggmf | Container::Ggjt(1)
    );
    let f32_scales = container != Container::Ggjt(3);
    let mut y = Vec::new();
    // The element order of 2n nibbles in `qs` (and the index of each in `qh`).
    let order = |n: usize| -> Vec<(usize, bool)> {
        // (byte, high nibble) for element i.
        (0..2 * n)
            .map(|i| {
                if shuffled {
                    (i / 2, i % 2 == 1)
                } else {
                    (i % n, i >= n)
                }
            })
            .collect()
    };
    let nib = |qs: &[u8], (byte, high): (usize, bool)| {
        if high {
            qs[byte] >> 4
        } else {
            qs[byte] & 0x0F
        }
    };
    match type_id {
        0 => y.extend(data.chunks_exact(4).map(|b| f32_le(b, 0))),
        1 => y.extend(data.chunks_exact(2).map(|b| f16_le(b, 0))),
        2 | 3 => {
            let with_min = type_id == 3;
            let (scale, size) = if f32_scales { (4, 4) } else { (2, 2) };
            let block = size * (1 + usize::from(with_min)) + 16;
            for b in data.chunks_exact(block) {
                let get = |at| {
                    if scale == 4 {
                        f32_le(b, at)
                    } else {
                        f16_le(b, at)
                    }
                };
                let d = get(0);
                let m = if with_min { get(size) } else { 0.0 };
                let qs = &b[block - 16..];
                for e in order(16) {
                    let q = nib(qs, e);
                    y.push(if with_min {
                        f32::from(q) * d + m
                    } else {
                        f32::from(q as i8 - 8) * d
                    });
                }
            }
        }
        4 | 5 => {
            let with_min = type_id == 5;
            let block = if with_min { 12 } else { 10 };
            for b in data.chunks_exact(block) {
                let d = f16_le(b, 0);
                let qs = &b[block - 8..];
                for i in 0..16 {
                    let q = nib(qs, (i / 2, i % 2 == 1));
                    y.push(if with_min {
                        f32::from(q) * d + f16_le(b, 2)
                    } else {
                        f32::from(q as i8 - 8) * d
                    });
                }
            }
        }
        6 | 7 => {
            let with_min = type_id == 7;
            let at = if with_min { 4 } else { 2 };
            for b in data.chunks_exact(at + 20) {
                let d = f16_le(b, 0);
                let qh = u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
                let qs = &b[at + 4..];
                for (i, e) in order(16).into_iter().enumerate() {
                    let q = nib(qs, e) | ((((qh >> i) & 1) << 4) as u8);
                    y.push(if with_min {
                        f32::from(q) * d + f16_le(b, 2)
                    } else {
                        f32::from(q as i8 - 16) * d
                    });
                }
            }
        }
        8 => {
            let size = if f32_scales { 4 } else { 2 };
            for b in data.chunks_exact(size + 32) {
                let d = if f32_scales {
                    f32_le(b, 0)
                } else {
                    f16_le(b, 0)
                };
                y.extend(b[size..].iter().map(|&q| f32::from(q as i8) * d));
            }
        }
        id => panic!("no old dequantizer for type {id}"),
    }
    y
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// Every tensor of every fixture: today's name and shape, and today's dequantized values
/// equal to the old ones bit for bit (K-quants, F32 and F16: the same bytes).
#[test]
fn every_fixture_converts_with_the_same_values() {
    let mut seen_types = std::collections::BTreeSet::new();
    // The f32-scale types seen with scales off the f16 grid, and with f16-valued ones.
    let (mut dequantized, mut repacked) = (
        std::collections::BTreeSet::new(),
        std::collections::BTreeSet::new(),
    );
    for (name, container) in fixtures() {
        let bytes = fixture(name);
        let model = LegacyModel::parse(&bytes).unwrap();
        assert_eq!(model.container(), container, "{name}");
        let out = convert(&bytes, &Options::new(name));
        let file = GgufFile::parse(&out).unwrap();
        assert_eq!(file.tensors().len(), model.tensors().len(), "{name}");
        for (old, new) in model.tensors().iter().zip(file.tensors()) {
            seen_types.insert((container.name(), old.type_id));
            assert_eq!(
                new.name,
                gguf_convert::legacy::gguf_name(old.name).unwrap(),
                "{name}"
            );
            assert_eq!(new.shape(), old.dims.as_slice(), "{name} {}", old.name);
            let data = file.tensor_data(new);
            if matches!(old.type_id, 10..=14) {
                assert_eq!(new.ggml_type.id(), old.type_id);
                assert_eq!(data, old.data, "{name} {}", old.name);
                continue;
            }
            let elements = old.dims.iter().product::<u64>() as usize;
            let want = old_values(old.type_id, container, old.data);
            let got = gguf_quant::dequantize(new.ggml_type, data, elements).unwrap();
            assert_eq!(bits(&got), bits(&want), "{name} {}", old.name);
            // Scales off the f16 grid (the INEXACT tensors in the f32-scale eras) make F32;
            // every other quantized tensor keeps its type.
            let f32_era = !matches!(container, Container::Ggjt(3));
            let expected = match old.type_id {
                4 | 5 => GgmlType::F32,
                2 | 3 | 8 if f32_era && INEXACT.contains(&old.name) => {
                    dequantized.insert(old.type_id);
                    GgmlType::F32
                }
                id => {
                    if f32_era && matches!(id, 2 | 3 | 8) {
                        repacked.insert(id);
                    }
                    GgmlType::from_id_opt(id).unwrap()
                }
            };
            assert_eq!(new.ggml_type, expected, "{name} {}", old.name);
        }
    }
    // Every type of every container appears.
    for (name, container) in fixtures() {
        if name.contains("kquants") {
            continue;
        }
        for &t in types_of(container) {
            assert!(
                seen_types.contains(&(container.name(), t)),
                "{name}: no tensor of type {t}"
            );
        }
    }
    for t in 10..=14 {
        assert!(seen_types.contains(&("GGJTv3".to_string(), t)));
    }
    assert_eq!(dequantized.into_iter().collect::<Vec<_>>(), [2, 3, 8]);
    assert_eq!(repacked.into_iter().collect::<Vec<_>>(), [2, 3, 8]);
}

fn str_value(file: &GgufFile<'_>, key: &str) -> String {
    file.value(key)
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("{key}"))
}

fn u32_value(file: &GgufFile<'_>, key: &str) -> u32 {
    match file.value(key) {
        Some(Value::U32(v)) => v,
        other => panic!("{key}: {other:?}"),
    }
}

/// The keys of `convert_llama_ggml_to_gguf.py`, in its order, with its values.
#[test]
fn metadata_is_the_conversion_scripts() {
    let bytes = fixture("ggjt-v3-llama.bin");
    let out = convert(&bytes, &Options::new("ggjt-v3-llama.bin"));
    let file = GgufFile::parse(&out).unwrap();
    let keys: Vec<&str> = file.metadata().iter().map(|kv| kv.key).collect();
    assert_eq!(
        keys,
        [
            "general.architecture",
            "general.name",
            "general.description",
            "general.file_type",
            "llama.context_length",
            "llama.embedding_length",
            "llama.block_count",
            "llama.feed_forward_length",
            "llama.rope.dimension_count",
            "llama.attention.head_count",
            "llama.attention.head_count_kv",
            "llama.attention.layer_norm_rms_epsilon",
            "tokenizer.ggml.model",
            "tokenizer.ggml.pre",
            "tokenizer.ggml.tokens",
            "tokenizer.ggml.scores",
            "tokenizer.ggml.token_type",
            "tokenizer.ggml.unknown_token_id",
            "tokenizer.ggml.bos_token_id",
            "tokenizer.ggml.eos_token_id",
        ]
    );
    assert_eq!(str_value(&file, "general.name"), "ggjt-v3-llama.bin");
    assert_eq!(
        str_value(&file, "general.description"),
        "converted from legacy GGJTv3 MOSTLY_F16 format"
    );
    assert_eq!(u32_value(&file, "llama.context_length"), 2048);
    assert_eq!(u32_value(&file, "llama.embedding_length"), 32);
    // From layer 0's w1, whose rows are 64 (n_mult would say 96).
    assert_eq!(u32_value(&file, "llama.feed_forward_length"), 64);
    assert_eq!(u32_value(&file, "llama.rope.dimension_count"), 8);
    assert_eq!(u32_value(&file, "llama.attention.head_count_kv"), 4);
    let tokens: Vec<Vec<u8>> = match file.value("tokenizer.ggml.tokens") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::String(s) => s.to_vec(),
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    let types: Vec<i32> = match file.value("tokenizer.ggml.token_type") {
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| match v {
                Value::I32(t) => t,
                other => panic!("{other:?}"),
            })
            .collect(),
        other => panic!("{other:?}"),
    };
    assert_eq!(tokens[0], b"<unk>");
    assert_eq!((tokens[1].as_slice(), types[1]), (&b"<s>"[..], 3));
    assert_eq!((tokens[2].as_slice(), types[2]), (&b"</s>"[..], 3));
    assert_eq!(types[0], 2);
    // Single bytes among ids 3..=258 are byte tokens.
    assert_eq!((tokens[3].as_slice(), types[3]), (&b"<0x00>"[..], 6));
    assert_eq!((tokens[258].as_slice(), types[258]), (&b"<0xFF>"[..], 6));
    // Spaces become U+2581; an empty token is a control token.
    let model = LegacyModel::parse(&bytes).unwrap();
    let vocab = model.vocab();
    assert!(vocab[259..].iter().any(|t| t.text.is_empty()));
    assert!(vocab[259..].iter().any(|t| t.text.contains(&b' ')));
    for id in 259..300 {
        let want: Vec<u8> = String::from_utf8_lossy(vocab[id].text)
            .replace(' ', "\u{2581}")
            .into_bytes();
        assert_eq!(tokens[id], want, "token {id}");
        let ty = if vocab[id].text.is_empty() { 3 } else { 1 };
        assert_eq!(types[id], ty, "token {id}");
    }
}

/// A vocabulary-only GGJT v1 file (as llama.cpp's old models/ggml-vocab.bin) converts as
/// vocabulary only: the script refuses it ("Missing layer 0 FF tensor"). Without
/// `vocab_only` it is refused, as a model cut after its vocabulary is: a file without tensors
/// is not a model `gguf validate` accepts.
#[test]
fn a_vocabulary_only_file_converts() {
    let bytes = fixture("ggjt-v1-vocab-only.bin");
    let e = LegacyModel::parse(&bytes)
        .unwrap()
        .write_gguf(&Options::new("ggml-vocab.bin"), Vec::new(), &mut |_, _| {})
        .unwrap_err();
    assert!(
        matches!(e, Error::Unsupported(_))
            && e.to_string().contains("no tensors after its vocabulary"),
        "{e}"
    );
    let mut o = Options::new("ggml-vocab.bin");
    o.vocab_only = true;
    let out = convert(&bytes, &o);
    let file = GgufFile::parse(&out).unwrap();
    assert!(file.tensors().is_empty());
    // LLaMA 7B's feed-forward width from n_embd 4096 and n_mult 256.
    assert_eq!(u32_value(&file, "llama.feed_forward_length"), 11008);
    assert_eq!(u32_value(&file, "llama.rope.dimension_count"), 128);
}

/// `--vocab-only` leaves the tensors out of a model.
#[test]
fn vocab_only_leaves_the_tensors_out() {
    let bytes = fixture("ggjt-v2-llama.bin");
    let mut o = Options::new("m");
    o.vocab_only = true;
    let file_bytes = convert(&bytes, &o);
    let file = GgufFile::parse(&file_bytes).unwrap();
    assert!(file.tensors().is_empty());
    assert_eq!(u32_value(&file, "llama.feed_forward_length"), 64);
}

/// With rounded scales, every quantized tensor keeps its type and each value moves by at most
/// the scale's rounding.
#[test]
fn rounded_scales_keep_the_type() {
    let mut checked = 0;
    for (name, container) in fixtures() {
        if matches!(container, Container::Ggjt(3)) {
            continue;
        }
        let bytes = fixture(name);
        let model = LegacyModel::parse(&bytes).unwrap();
        let mut o = Options::new(name);
        o.scales = ScalePolicy::Round;
        let mut out = Vec::new();
        let report = model.write_gguf(&o, &mut out, &mut |_, _| {}).unwrap();
        let file = GgufFile::parse(&out).unwrap();
        for (old, new) in model.tensors().iter().zip(file.tensors()) {
            if !(INEXACT.contains(&old.name) && matches!(old.type_id, 2 | 3 | 8)) {
                continue;
            }
            assert_eq!(new.ggml_type.id(), old.type_id, "{name}");
            assert!(report.rounded_blocks > 0, "{name}");
            let n = old.dims.iter().product::<u64>() as usize;
            let want = old_values(old.type_id, container, old.data);
            let got = gguf_quant::dequantize(new.ggml_type, file.tensor_data(new), n).unwrap();
            for (g, w) in got.iter().zip(&want) {
                assert!((g - w).abs() <= w.abs() * 1e-3 + 1e-6, "{name}: {g} vs {w}");
            }
            checked += 1;
        }
    }
    assert!(checked >= 4, "{checked} tensors with rounded scales");
}

/// Every truncation of a fixture, and every single-byte change in its headers, is an error
/// or a conversion, never a panic; a truncation is always an error.
#[test]
fn damaged_files_are_errors_not_panics() {
    for (name, _) in fixtures() {
        let bytes = fixture(name);
        let step = (bytes.len() / 2000).max(1);
        for len in (0..bytes.len()).step_by(step) {
            let cut = &bytes[..len];
            assert!(LegacyModel::parse(cut).is_err(), "{name} cut at {len}");
        }
        let header = bytes.len().min(2048);
        for at in (0..header).step_by(3) {
            for v in [0u8, 0xFF, bytes[at] ^ 0x80] {
                let mut b = bytes.clone();
                b[at] = v;
                if let Ok(m) = LegacyModel::parse(&b) {
                    let _ = m.write_gguf(&Options::new("x"), &mut Vec::new(), &mut |_, _| {});
                }
            }
        }
    }
}

#[test]
fn foreign_files_say_what_they_are() {
    // whisper.cpp: 'lmgg', then n_vocab, n_audio_ctx 1500, ..., n_mels 80, ftype.
    let mut whisper = 0x6767_6d6cu32.to_le_bytes().to_vec();
    for v in [51864u32, 1500, 384, 6, 4, 448, 384, 6, 4, 80, 1] {
        whisper.extend_from_slice(&v.to_le_bytes());
    }
    let e = LegacyModel::parse(&whisper).unwrap_err();
    assert!(matches!(e, Error::NotLlama(_)), "{e}");
    assert!(e.to_string().contains("whisper.cpp"), "{e}");

    // GPT-2 from ggml's examples: n_vocab, n_ctx, n_embd, n_head, n_layer, ftype.
    let mut gpt2 = 0x6767_6d6cu32.to_le_bytes().to_vec();
    for v in [50257u32, 1024, 768, 12, 12, 1, 0] {
        gpt2.extend_from_slice(&v.to_le_bytes());
    }
    let e = LegacyModel::parse(&gpt2).unwrap_err();
    assert!(matches!(e, Error::NotLlama(_)), "{e}");

    let e = LegacyModel::parse(b"GGUF\x03\0\0\0").unwrap_err();
    assert!(e.to_string().contains("already GGUF"), "{e}");
    let e = LegacyModel::parse(b"PK\x03\x04zip").unwrap_err();
    assert!(e.to_string().starts_with("at byte 0:"), "{e}");
    let e = LegacyModel::parse(b"tjgg\x04\0\0\0").unwrap_err();
    assert!(e.to_string().contains("GGJT version 4"), "{e}");
}

/// A huge vocabulary count is refused before anything is allocated for it.
#[test]
fn lengths_from_the_file_are_bounded_by_the_file() {
    let mut b = fixture("ggjt-v1-vocab-only.bin");
    b[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = LegacyModel::parse(&b).unwrap_err();
    assert!(matches!(e, Error::Truncated { .. }), "{e}");
}

/// Options that would write a broken file are refused.
#[test]
fn nonsense_options_are_errors() {
    let bytes = fixture("ggjt-v3-llama.bin");
    let model = LegacyModel::parse(&bytes).unwrap();
    for change in [
        (|o: &mut Options| o.gqa = 0) as fn(&mut Options),
        |o| o.gqa = 3,
        |o| o.eps = f32::NAN,
        |o| o.eps = -1e-5,
        |o| o.context_length = 0,
    ] {
        let mut o = Options::new("m");
        change(&mut o);
        let e = model
            .write_gguf(&o, &mut Vec::new(), &mut |_, _| {})
            .unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }), "{e}");
    }
}

/// Where the vocabulary of a legacy file ends: the magic (and version), the seven
/// hyperparameters, each token's length and bytes (and score).
fn vocab_end(bytes: &[u8], container: Container) -> usize {
    let model = LegacyModel::parse(bytes).unwrap();
    let header = if container == Container::Ggml { 4 } else { 8 } + 28;
    let score = if container == Container::Ggml { 0 } else { 4 };
    header
        + model
            .vocab()
            .iter()
            .map(|t| 4 + t.text.len() + score)
            .sum::<usize>()
}

/// The legacy survey of issue 24: each hyperparameter of each fixture set to 0, 1, 2, one off,
/// double, 4096, 2^20 and the largest and "negative" u32s, and each fixture cut at every tensor
/// boundary (and right after its vocabulary). Each mutant is refused, or it converts to a file
/// the engine's load check (`gguf validate`'s) accepts; the classes that used to convert to
/// files that check refused are refused naming why, with nothing written.
#[test]
fn every_header_mutant_is_refused_or_converts_to_a_file_that_loads() {
    let dir = tempfile::tempdir().unwrap();
    let mut converted = 0;
    for (name, container) in fixtures() {
        let bytes = fixture(name);
        let model = LegacyModel::parse(&bytes).unwrap();
        let hp_at = if container == Container::Ggml { 4 } else { 8 };
        let mut mutants: Vec<(String, Vec<u8>)> = Vec::new();
        for field in 0..7 {
            let at = hp_at + 4 * field;
            let old = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
            for v in [
                0,
                1,
                2,
                old.wrapping_add(1),
                old.saturating_sub(1),
                old.wrapping_mul(2),
                4096,
                1 << 20,
                u32::MAX,
                0x7fff_ffff,
                0x8000_0000,
            ] {
                let mut b = bytes.clone();
                b[at..at + 4].copy_from_slice(&v.to_le_bytes());
                mutants.push((format!("field {field} = {v}"), b));
            }
        }
        let mut cuts = vec![vocab_end(&bytes, container)];
        cuts.extend(
            model
                .tensors()
                .iter()
                .map(|t| t.offset as usize + t.data.len()),
        );
        for cut in cuts.into_iter().filter(|&c| c < bytes.len()) {
            mutants.push((format!("cut at {cut}"), bytes[..cut].to_vec()));
        }
        for (what, b) in mutants {
            let Ok(m) = LegacyModel::parse(&b) else {
                continue;
            };
            let mut out = Vec::new();
            match m.write_gguf(&Options::new("x"), &mut out, &mut |_, _| {}) {
                Err(e) => assert!(
                    out.is_empty(),
                    "{name}, {what}: {e}, yet bytes were written"
                ),
                Ok(_) => {
                    let path = dir.path().join("out.gguf");
                    std::fs::write(&path, &out).unwrap();
                    let set = gguf_format::split::SplitSet::open(&path).unwrap();
                    if let Err(e) = gguf_model::check(&set, "out.gguf") {
                        panic!("{name}, {what}: converted to a file that does not load: {e}");
                    }
                    converted += 1;
                }
            }
        }
    }
    // Mutations that leave a model (a different n_mult with w1 present, another ftype...).
    assert!(converted >= 60, "only {converted} mutants converted");

    // The classes that converted to unloadable files before: each refused, naming why.
    let refusal = |bytes: &[u8]| {
        let mut out = Vec::new();
        let e = LegacyModel::parse(bytes)
            .unwrap()
            .write_gguf(&Options::new("x"), &mut out, &mut |_, _| {})
            .unwrap_err();
        assert!(out.is_empty(), "{e}: bytes were written");
        e
    };
    for (name, container) in fixtures() {
        let bytes = fixture(name);
        let hp_at = if container == Container::Ggml { 4 } else { 8 };
        let mut b = bytes.clone();
        b[hp_at + 16..hp_at + 20].copy_from_slice(&0u32.to_le_bytes()); // n_layer
        let e = refusal(&b);
        assert!(matches!(e, Error::WouldNotLoad { .. }), "{name}: {e:?}");
        assert_eq!(
            e.to_string(),
            "the converted model would fail `gguf validate`: llama.block_count is 0; it must be \
             1 to 1024 (llama.block_count from the header's n_layer); nothing was written",
            "{name}"
        );
        let e = refusal(&bytes[..vocab_end(&bytes, container)]);
        assert!(
            matches!(e, Error::Unsupported(_))
                && e.to_string().contains("no tensors after its vocabulary"),
            "{name}: {e}"
        );
    }
    // An option that does not fit the tensors (--gqa 2 for K and V of every head).
    let bytes = fixture("ggjt-v3-llama.bin");
    let mut o = Options::new("x");
    o.gqa = 2;
    let e = LegacyModel::parse(&bytes)
        .unwrap()
        .write_gguf(&o, Vec::new(), &mut |_, _| {})
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("tensor `blk.0.attn_k.weight` has shape [32, 32], but the hyperparameters need [32, 16]")
            && e.contains("the file's layers.0.attention.wk.weight"),
        "{e}"
    );
}
