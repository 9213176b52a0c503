//! Bit-exactness of the importance-matrix quantizers against ggml itself:
//! `tests/data/imatrix/<TYPE>.ref` is what ggml's `ggml_quantize_chunk` wrote, given an
//! importance matrix, for the rows generated here (see `tests/data/imatrix/README.md`).

use std::path::PathBuf;

use gguf_quant::{quantize_rows, quantize_rows_imatrix, GgmlType, QuantError};
use gguf_test_support::Rng;

/// Every type with a committed ggml reference output.
const TYPES: &[GgmlType] = &[
    GgmlType::Q4_0,
    GgmlType::Q4_1,
    GgmlType::Q5_0,
    GgmlType::Q5_1,
    GgmlType::Q2_K,
    GgmlType::Q3_K,
    GgmlType::Q4_K,
    GgmlType::Q5_K,
    GgmlType::Q6_K,
    GgmlType::IQ4_NL,
    GgmlType::IQ4_XS,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
];

/// The types of `TYPES` whose ggml quantizer also runs without an importance matrix and has a
/// committed output of that (`<TYPE>.plain.ref`), which `quantize_rows` must reproduce.
const PLAIN_TYPES: &[GgmlType] = &[GgmlType::IQ1_M];

/// `(n_per_row, rows, seed)` of each shape, in the order of the reference files; a type whose
/// blocks do not divide `n_per_row` skips the shape.
const SHAPES: &[(usize, usize, u64)] = &[(512, 8, 1), (1536, 4, 2), (576, 4, 3)];

/// What row `r` holds (`r % 8`).
const ROW_KINDS: &[&str] = &[
    "uniform [-1, 1)",
    "uniform x1000",
    "uniform x1e-3",
    "uniform x0.1 with one outlier per 32",
    "product of two uniforms x20",
    "256 zeros, then uniform",
    "uniform x1e-20",
    "multiples of 0.5 in [-8, 8]",
];

/// The importance matrix and the rows of a shape, drawn as the C harness draws them.
fn inputs(n: usize, rows: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(seed);
    let mut w: Vec<f32> = (0..n)
        .map(|j| {
            let u = rng.unit() + 1.0;
            if j % 7 == 3 {
                0.0
            } else {
                u * u * u * u * 10.0 + 0.001
            }
        })
        .collect();
    // One whole block of 32 columns without importance.
    w[64..96].fill(0.0);
    let mut x = Vec::with_capacity(n * rows);
    for r in 0..rows {
        let start = x.len();
        for j in 0..n {
            let u = rng.unit();
            x.push(match r % 8 {
                0 => u,
                1 => u * 1000.0,
                2 => u * 0.001,
                3 => u * 0.1,
                4 => u * rng.unit() * 20.0,
                5 if j < 256 => 0.0,
                5 => u,
                6 => u * 1e-20,
                _ => ((rng.next() % 33) as i32 - 16) as f32 * 0.5,
            });
        }
        if r % 8 == 3 {
            for b in 0..n / 32 {
                let at = (rng.next() % 32) as usize;
                let sign = if rng.unit() > 0.0 { 1.0 } else { -1.0 };
                let mag = 50.0 + 450.0 * (rng.unit() + 1.0) * 0.5;
                x[start + 32 * b + at] = sign * mag;
            }
        }
    }
    (w, x)
}

fn reference(ty: GgmlType) -> Vec<u8> {
    reference_file(&format!("{}.ref", ty.name()))
}

fn reference_file(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/imatrix")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn imatrix_quantization_matches_ggml() {
    let mut failures = Vec::new();
    for &ty in TYPES {
        let expected = reference(ty);
        let (bs, ts) = (ty.block_size() as usize, ty.type_size() as usize);
        let mut at = 0;
        for &(n, rows, seed) in SHAPES {
            if n % bs != 0 {
                continue;
            }
            let (w, x) = inputs(n, rows, seed);
            let len = n / bs * ts * rows;
            let mut ours = vec![0u8; len];
            quantize_rows_imatrix(ty, &x, n, &w, &mut ours).unwrap();
            let want = expected
                .get(at..at + len)
                .unwrap_or_else(|| panic!("{ty}: reference file too short"));
            at += len;
            // The inputs must make the imatrix matter, or the test would prove nothing
            // (IQ1_S has no quantizer without an imatrix to compare with).
            let mut plain = vec![0u8; len];
            match quantize_rows(ty, &x, &mut plain) {
                Ok(()) => assert_ne!(
                    plain, want,
                    "{ty}, n_per_row {n}: the imatrix changed nothing"
                ),
                Err(e) => assert!(matches!(e, QuantError::Unsupported { .. }), "{ty}: {e}"),
            }
            if let Some(f) = first_difference(ty, n, &ours, want) {
                failures.push(f);
            }
        }
        assert_eq!(at, expected.len(), "{ty}: reference file length");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Where `ours` first differs from `want` (rows of `n` values of `ty`), described.
fn first_difference(ty: GgmlType, n: usize, ours: &[u8], want: &[u8]) -> Option<String> {
    let (bs, ts) = (ty.block_size() as usize, ty.type_size() as usize);
    let b = ours
        .chunks_exact(ts)
        .zip(want.chunks_exact(ts))
        .position(|(a, b)| a != b)?;
    let (row, block) = (b / (n / bs), b % (n / bs));
    Some(format!(
        "{ty}, n_per_row {n}: first differing block {b} (row {row} \"{}\", block {block})\n  ours {:02x?}\n  ggml {:02x?}",
        ROW_KINDS[row % 8],
        &ours[b * ts..(b + 1) * ts],
        &want[b * ts..(b + 1) * ts],
    ))
}

/// The types ggml also quantizes without an importance matrix, through `quantize_rows`, against
/// `ggml_quantize_chunk(..., NULL)` on the same rows.
#[test]
fn plain_quantization_matches_ggml() {
    let mut failures = Vec::new();
    for &ty in PLAIN_TYPES {
        let expected = reference_file(&format!("{}.plain.ref", ty.name()));
        let (bs, ts) = (ty.block_size() as usize, ty.type_size() as usize);
        let mut at = 0;
        for &(n, rows, seed) in SHAPES {
            if n % bs != 0 {
                continue;
            }
            let (_, x) = inputs(n, rows, seed);
            let len = n / bs * ts * rows;
            let mut ours = vec![0u8; len];
            quantize_rows(ty, &x, &mut ours).unwrap();
            let want = expected
                .get(at..at + len)
                .unwrap_or_else(|| panic!("{ty}: plain reference file too short"));
            at += len;
            if let Some(f) = first_difference(ty, n, &ours, want) {
                failures.push(f);
            }
        }
        assert_eq!(at, expected.len(), "{ty}: plain reference file length");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn types_that_ignore_the_imatrix_quantize_as_without_it() {
    let (w, x) = inputs(512, 2, 7);
    for ty in [GgmlType::Q8_0, GgmlType::F16, GgmlType::BF16, GgmlType::F32] {
        let len = 512 / ty.block_size() as usize * ty.type_size() as usize * 2;
        let (mut a, mut b) = (vec![0u8; len], vec![0u8; len]);
        quantize_rows_imatrix(ty, &x, 512, &w, &mut a).unwrap();
        quantize_rows(ty, &x, &mut b).unwrap();
        assert_eq!(a, b, "{ty}");
    }
}

#[test]
fn unsupported_types_and_wrong_lengths_are_errors() {
    let (w, x) = inputs(512, 2, 7);
    let q4k = |src: &[f32], n: usize, w: &[f32], dst_len: usize| {
        quantize_rows_imatrix(GgmlType::Q4_K, src, n, w, &mut vec![0u8; dst_len])
    };
    let good = 2 * 2 * 144;
    assert!(q4k(&x, 512, &w, good).is_ok());
    // dst one byte short or long.
    assert!(matches!(
        q4k(&x, 512, &w, good - 1),
        Err(QuantError::WrongLength { .. })
    ));
    assert!(matches!(
        q4k(&x, 512, &w, good + 1),
        Err(QuantError::WrongLength { .. })
    ));
    // src not a whole number of blocks.
    assert!(matches!(
        q4k(&x[..500], 512, &w, good),
        Err(QuantError::PartialBlock { .. })
    ));
    // src a whole number of blocks but not of rows.
    assert!(matches!(
        q4k(&x[..768], 512, &w, 3 * 144),
        Err(QuantError::Shape(_))
    ));
    // rows that are not whole blocks, and empty rows.
    assert!(matches!(
        q4k(&x, 128, &w[..128], good),
        Err(QuantError::PartialBlock { .. })
    ));
    assert!(matches!(q4k(&x, 0, &[], good), Err(QuantError::Shape(_))));
    // imatrix of the wrong length.
    assert!(matches!(
        q4k(&x, 512, &w[..511], good),
        Err(QuantError::Shape(_))
    ));
    assert!(matches!(q4k(&x, 256, &w, good), Err(QuantError::Shape(_))));
    // Empty input is fine.
    assert!(q4k(&[], 512, &w, 0).is_ok());
    // A type without an importance-matrix quantizer.
    let mut dst = vec![0u8; 66 * 4];
    assert_eq!(
        quantize_rows_imatrix(GgmlType::IQ2_XXS, &x[..1024], 512, &w, &mut dst),
        Err(QuantError::Unsupported {
            ty: GgmlType::IQ2_XXS,
            op: "quantize with an importance matrix"
        })
    );
}

/// The generated inputs are those the C harness fed ggml, checked against its dump when it is
/// at hand (`GGUF_IMATRIX_INPUTS=<dir of input_<n>.f32>`; see the README).
#[test]
fn inputs_match_the_harness_dump() {
    let Some(dir) = std::env::var_os("GGUF_IMATRIX_INPUTS") else {
        return;
    };
    for &(n, rows, seed) in SHAPES {
        let (w, x) = inputs(n, rows, seed);
        let bytes = std::fs::read(PathBuf::from(&dir).join(format!("input_{n}.f32"))).unwrap();
        let dumped: Vec<f32> = bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
            .collect();
        let ours: Vec<f32> = w.iter().chain(&x).copied().collect();
        assert_eq!(ours.len(), dumped.len(), "n_per_row {n}");
        for (i, (a, b)) in ours.iter().zip(&dumped).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "n_per_row {n}: value {i}");
        }
    }
}

/// Times one whole 2048 x 2048 tensor per type with an importance matrix, the rows of every kind
/// (seed 4), as the C harness times `ggml_quantize_chunk` on the same input:
/// `cargo test --release -p gguf-quant --test imatrix_reference -- --ignored --nocapture`.
/// With `GGUF_IMATRIX_2048=<dir>` holding the harness's `<TYPE>.2048.bin` (ggml's bytes for
/// that tensor), the output is compared with them too.
#[test]
#[ignore]
fn timing_2048_by_2048() {
    let (w, x) = inputs(2048, 2048, 4);
    for ty in [GgmlType::IQ1_S, GgmlType::IQ1_M] {
        let mut out = vec![0u8; 2048 / 256 * ty.type_size() as usize * 2048];
        // Build the search tables first, as the harness does.
        let head = out.len() / 256;
        quantize_rows_imatrix(ty, &x[..2048 * 8], 2048, &w, &mut out[..head]).unwrap();
        for _ in 0..3 {
            let (t, cpu) = (std::time::Instant::now(), thread_cpu_seconds());
            quantize_rows_imatrix(ty, &x, 2048, &w, &mut out).unwrap();
            println!(
                "{ty} 2048x2048 imatrix: {:.3} s (cpu {:.3} s)",
                t.elapsed().as_secs_f64(),
                thread_cpu_seconds() - cpu
            );
        }
        if let Some(dir) = std::env::var_os("GGUF_IMATRIX_2048") {
            let path = PathBuf::from(dir).join(format!("{}.2048.bin", ty.name()));
            let want = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(want.len(), out.len(), "{ty}");
            assert!(
                first_difference(ty, 2048, &out, &want).is_none(),
                "{ty}: {}",
                first_difference(ty, 2048, &out, &want).unwrap_or_default()
            );
            println!("{ty} 2048x2048: equal to ggml's bytes");
        }
    }
}

/// This thread's time on a CPU (Linux `schedstat`; 0 elsewhere), which a loaded machine
/// disturbs less than the wall clock.
fn thread_cpu_seconds() -> f64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u64>().ok())
        .map_or(0.0, |ns| ns as f64 * 1e-9)
}
