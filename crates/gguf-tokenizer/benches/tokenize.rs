//! `cargo bench -p gguf-tokenizer`: encode throughput (MB/s of input) on 1 MB of mixed text
//! (the test corpus's valid-UTF-8 samples, repeated) for both real models, and the time to
//! build each tokenizer from its file. Models missing from the cache are skipped.

// `criterion_group!` defines a public function it cannot document.
#![allow(missing_docs)]

use std::path::Path;
use std::time::Instant;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use gguf_format::GgufFile;
use gguf_test_support::real_model;
use gguf_tokenizer::Tokenizer;

/// About `size` bytes of the corpus's valid-UTF-8 samples, in file order, repeated.
pub fn mixed_text(size: usize) -> Vec<u8> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/corpus");
    let mut names: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    names.sort();
    let samples: Vec<Vec<u8>> = names
        .iter()
        .map(|p| std::fs::read(p).unwrap())
        .filter(|t| std::str::from_utf8(t).is_ok() && !t.is_empty())
        .collect();
    let mut text = Vec::with_capacity(size + 4096);
    while text.len() < size {
        for s in &samples {
            text.extend_from_slice(s);
            text.push(b'\n');
        }
    }
    text
}

fn bench(c: &mut Criterion) {
    let text = mixed_text(1 << 20);
    let mut group = c.benchmark_group("encode_1MB");
    group.throughput(Throughput::Bytes(text.len() as u64));
    group.sample_size(10);
    for name in ["smollm2-135m", "gemma3-270m"] {
        let Some(path) = real_model(name) else {
            eprintln!("skipping {name}: not cached (run `cargo xtask models`)");
            continue;
        };
        let mapped = GgufFile::open(&path).unwrap();
        let t = Instant::now();
        let tokenizer = Tokenizer::from_gguf(mapped.file()).unwrap();
        eprintln!(
            "{name}: tokenizer built in {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        );
        group.bench_function(name, |b| {
            b.iter(|| {
                tokenizer.encode(
                    std::hint::black_box(&text),
                    gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
                )
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
