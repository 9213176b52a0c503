//! `cargo bench -p gguf-quant`: dequantize and dot-product throughput per type (GB/s of weight
//! bytes), quantizing whole rows (values/s, with and without an importance matrix), the
//! feed-forward activations of `gguf_quant::vec` (SwiGLU, GeGLU, GELU) on a row of 2048,
//! mat-vec at real model shapes on 1 and 2 threads, batched products of 128 activation rows
//! (prompt processing) on 1 thread, and a plain memory-read bandwidth figure measured in the
//! same run, so each result can be read as a fraction of it.
//! `GGUF_FORCE_SCALAR=1` runs the scalar kernels instead of the CPU's SIMD ones.

// `criterion_group!` defines a public function it cannot document.
#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BatchSize, BenchmarkId, Criterion, Throughput};
use gguf_quant::{
    dequantize_row, matmul_on, matvec_on, quantize_activations, quantize_row, vec_dot, GgmlType,
};

const TYPES: &[GgmlType] = &[
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q8_0,
    GgmlType::Q4_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::F16,
];

/// Real weight shapes (cols, rows) of SmolLM2 and Gemma 3.
const SHAPES: &[(usize, usize)] = &[
    (576, 576),
    (576, 1536),
    (1536, 576),
    (576, 49152),
    (640, 2048),
];

fn values(n: usize, seed: u32) -> Vec<f32> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x as f32 / u32::MAX as f32 - 0.5) * 2.0
        })
        .collect()
}

/// Weights of `ty` for `n` values: quantized with the reference quantizer where there is one,
/// else random bytes with small f16 scales.
fn weights(ty: GgmlType, n: usize) -> Vec<u8> {
    let mut w = vec![0u8; gguf_quant::row_bytes(ty, n).unwrap()];
    if quantize_row(ty, &values(n, 7), &mut w).is_err() {
        for (i, b) in w.iter_mut().enumerate() {
            *b = (i * 37 % 251) as u8 & 0x3B;
        }
    }
    w
}

/// Read bandwidth of a 256 MiB buffer (sum of u64s), best of 5, in GB/s.
fn memory_bandwidth() -> f64 {
    let buf: Vec<u64> = (0..(256usize << 20) / 8).map(|i| i as u64).collect();
    let mut best = Duration::MAX;
    for _ in 0..5 {
        let t = Instant::now();
        black_box(buf.iter().fold(0u64, |a, &b| a.wrapping_add(b)));
        best = best.min(t.elapsed());
    }
    (buf.len() * 8) as f64 / best.as_secs_f64() / 1e9
}

fn bench(c: &mut Criterion) {
    let test_mode = std::env::args().any(|a| a == "--test");
    let bandwidth = if test_mode { 1.0 } else { memory_bandwidth() };
    eprintln!(
        "memory read bandwidth: {bandwidth:.2} GB/s; dot products run on {}",
        gguf_quant::isa().name()
    );

    let n = 4096 * 64;
    let mut group = c.benchmark_group("dequantize");
    for &ty in TYPES {
        let w = weights(ty, n);
        let mut out = vec![0f32; n];
        group.throughput(Throughput::Bytes(w.len() as u64));
        group.bench_function(ty.name(), |b| {
            b.iter(|| dequantize_row(ty, black_box(&w), &mut out).unwrap())
        });
    }
    group.finish();

    // What `gguf quantize` spends its time in: whole rows as llama-quantize writes them, with
    // an importance matrix for the types whose search uses one.
    let (rows, width) = (16, 4096);
    let x: Vec<f32> = values(rows * width, 5).iter().map(|v| v * 0.05).collect();
    let importance: Vec<f32> = values(width, 9).iter().map(|v| v * v + 0.01).collect();
    let mut group = c.benchmark_group("quantize");
    group.throughput(Throughput::Elements(x.len() as u64));
    for ty in [
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_1,
        GgmlType::Q8_0,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
        GgmlType::IQ4_NL,
        GgmlType::IQ4_XS,
    ] {
        let mut out = vec![0u8; gguf_quant::row_bytes(ty, x.len()).unwrap()];
        group.bench_function(ty.name(), |b| {
            b.iter(|| gguf_quant::quantize_rows(ty, black_box(&x), &mut out).unwrap())
        });
        let name = format!("{}+imatrix", ty.name());
        group.bench_function(name, |b| {
            b.iter(|| {
                gguf_quant::quantize_rows_imatrix(ty, black_box(&x), width, &importance, &mut out)
                    .unwrap()
            })
        });
    }
    group.finish();

    let mut group = c.benchmark_group("vec_dot");
    for &ty in TYPES {
        let w = weights(ty, n);
        let mut a = Vec::new();
        quantize_activations(ty, &values(n, 3), &mut a).unwrap();
        if vec_dot(ty, n, &w, &a).is_err() {
            continue;
        }
        group.throughput(Throughput::Bytes(w.len() as u64));
        group.bench_function(ty.name(), |b| {
            b.iter(|| vec_dot(ty, n, black_box(&w), black_box(&a)).unwrap())
        });
    }
    group.finish();

    // One decode step's attention over 1024 cached positions of an f16 cache (head size 64,
    // SmolLM2's: three KV heads a cache row, three query heads to each), for one query head
    // and for the three that share a KV head: the scores, then the values (a rescale on every
    // 50th row, as new maxima come). Throughput counts (position, head) pairs.
    let (positions, head, stride) = (1024usize, 64usize, 192usize);
    let cache: Vec<half::f16> = values(positions * stride, 17)
        .into_iter()
        .map(half::f16::from_f32)
        .collect();
    let mut group = c.benchmark_group("attention_1024x64");
    for heads in [1usize, 3] {
        let queries: Vec<half::f16> = values(head * heads, 19)
            .into_iter()
            .map(half::f16::from_f32)
            .collect();
        let steps = positions * heads;
        let softmax_weights: Vec<f32> = values(steps, 23).iter().map(|v| v.abs()).collect();
        let rescales: Vec<Option<f32>> = (0..steps)
            .map(|i| (i / heads % 50 == 0).then_some(0.5))
            .collect();
        group.throughput(Throughput::Elements(steps as u64));
        let mut scores = vec![0f32; steps];
        group.bench_function(format!("dot_f16_rows_x{heads}"), |b| {
            b.iter(|| {
                gguf_quant::vec::dot_f16_rows(
                    &mut scores,
                    black_box(&cache),
                    stride,
                    &queries,
                    heads,
                )
            })
        });
        let mut acc = vec![half::f16::ZERO; head * heads];
        group.bench_function(format!("mad_f16_rows_x{heads}"), |b| {
            b.iter(|| {
                let values = black_box(&cache);
                gguf_quant::vec::mad_f16_rows(
                    &mut acc,
                    heads,
                    values,
                    stride,
                    &rescales,
                    &softmax_weights,
                )
            })
        });
    }
    group.finish();

    // The activations work in place, so each run gets a fresh copy of the gate (not timed).
    // Gates in [-6, 6): inside GELU's table range (±10), where a model's activations mostly are.
    let width = 2048;
    let gate: Vec<f32> = values(width, 11).iter().map(|v| v * 6.0).collect();
    let up = values(width, 13);
    let mut group = c.benchmark_group("ffn_2048");
    group.throughput(Throughput::Elements(width as u64));
    group.bench_function("swiglu", |b| {
        b.iter_batched_ref(
            || gate.clone(),
            |g| gguf_quant::vec::swiglu(g, black_box(&up)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("geglu", |b| {
        b.iter_batched_ref(
            || gate.clone(),
            |g| gguf_quant::vec::geglu(g, black_box(&up)),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("gelu", |b| {
        b.iter_batched_ref(
            || gate.clone(),
            |g| gguf_quant::vec::gelu(g),
            BatchSize::SmallInput,
        )
    });
    group.finish();

    let mut summary = Vec::new();
    for threads in [1usize, 2] {
        // The engine's path: a spinning pool, one share of rows per thread.
        let pool = gguf_quant::ThreadPool::new(threads).unwrap();
        let mut group = c.benchmark_group(format!("matvec_{threads}t"));
        for &ty in &[
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q6_K,
        ] {
            for &(cols, rows) in SHAPES {
                if !cols.is_multiple_of(ty.block_size() as usize) {
                    continue;
                }
                let w = weights(ty, cols * rows);
                let x = values(cols, 5);
                let mut y = vec![0f32; rows];
                let mut scratch = Vec::new();
                if matvec_on(&pool, ty, &w, cols, &x, &mut y, &mut scratch).is_err() {
                    continue;
                }
                group.throughput(Throughput::Bytes(w.len() as u64));
                let id = BenchmarkId::new(ty.name(), format!("{cols}x{rows}"));
                group.bench_with_input(id, &(), |b, _| {
                    b.iter(|| matvec_on(&pool, ty, &w, cols, &x, &mut y, &mut scratch).unwrap())
                });
                if !test_mode {
                    // A plain timing for the bandwidth fraction (criterion keeps its own figures).
                    // Long enough for the workers to be spinning, as in a forward pass.
                    let reps = (2_000_000_000 / w.len()).max(200);
                    let t = Instant::now();
                    for _ in 0..reps {
                        matvec_on(&pool, ty, &w, cols, &x, &mut y, &mut scratch).unwrap();
                    }
                    let secs = t.elapsed().as_secs_f64();
                    let gbs = (w.len() * reps) as f64 / secs / 1e9;
                    summary.push(format!(
                        "matvec {threads}t {:5} {cols:>5}x{rows:<6} {gbs:6.2} GB/s = {:4.0}% of memory bandwidth",
                        ty.name(),
                        100.0 * gbs / bandwidth
                    ));
                }
            }
        }
        group.finish();
    }
    for line in summary {
        eprintln!("{line}");
    }

    // Prompt processing: a batch of 128 activation rows against real shapes, on one thread of
    // the spinning pool (the GEMM kernels where the ISA has them). Throughput: multiply-adds.
    let pool = gguf_quant::ThreadPool::new(1).unwrap();
    let batch = 128;
    let mut group = c.benchmark_group("matmul_128_1t");
    for &ty in &[
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        for &(cols, rows) in &[(576usize, 1536usize), (1536, 576), (640, 2048)] {
            if !cols.is_multiple_of(ty.block_size() as usize) {
                continue;
            }
            let w = weights(ty, cols * rows);
            let x = values(cols * batch, 5);
            let mut y = vec![0f32; rows * batch];
            let mut scratch = Vec::new();
            group.throughput(Throughput::Elements((cols * rows * batch) as u64));
            let id = BenchmarkId::new(ty.name(), format!("{cols}x{rows}"));
            group.bench_with_input(id, &(), |b, _| {
                b.iter(|| matmul_on(&pool, ty, &w, cols, &x, batch, &mut y, &mut scratch).unwrap())
            });
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
