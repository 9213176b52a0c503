//! Open + walk every key and tensor of the real models (and a fixture, so the bench always has
//! something to measure). `cargo bench -p gguf-format`.

// `criterion_group!` defines a public function it cannot document.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use gguf_format::{GgufFile, Value};
use gguf_test_support::{fixture, real_model};

/// Visits every metadata value (every array element included) and every tensor's data slice.
fn walk(file: &GgufFile<'_>) -> u64 {
    fn visit(v: Value<'_>) -> u64 {
        match v {
            Value::Array(a) => a.iter().map(visit).sum(),
            Value::String(s) => s.len() as u64,
            _ => 1,
        }
    }
    let meta: u64 = file.metadata().iter().map(|kv| visit(kv.value)).sum();
    let tensors: u64 = file
        .tensors()
        .iter()
        .map(|t| file.tensor_data(t).len() as u64)
        .sum();
    meta + tensors
}

fn bench_open(c: &mut Criterion) {
    let fixture = fixture("all-types-v3.gguf");
    let mut targets = vec![("fixture".to_string(), fixture)];
    for name in ["smollm2-135m", "gemma3-270m"] {
        match real_model(name) {
            Some(p) => targets.push((name.to_string(), p)),
            None => eprintln!("{name} not cached; run `cargo xtask models` to bench it"),
        }
    }
    let mut group = c.benchmark_group("open_and_walk");
    for (name, path) in &targets {
        group.bench_function(name, |b| {
            b.iter(|| {
                let mapped = GgufFile::open(black_box(path)).unwrap();
                black_box(walk(mapped.file()))
            })
        });
        let bytes = std::fs::read(path).unwrap();
        group.bench_function(format!("{name}/parse_only"), |b| {
            b.iter(|| black_box(GgufFile::parse(black_box(&bytes)).unwrap().tensors().len()))
        });
    }
    group.finish();
}

criterion_group!(benches, bench_open);
criterion_main!(benches);
