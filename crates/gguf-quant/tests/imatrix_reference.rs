//! Bit-exactness of the importance-matrix quantizers against ggml itself:
//! `tests/data/imatrix/<TYPE>.ref` is what ggml's `ggml_quantize_chunk` wrote, given an
//! importance matrix, for the rows generated here (see `tests/data/imatrix/README.md`).

use std::path::PathBuf;

use gguf_quant::{quantize_rows, quantize_rows_imatrix, GgmlType, QuantError};
use gguf_test_support::{fnv1a64, Rng};

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
    GgmlType::IQ2_XXS,
    GgmlType::IQ2_XS,
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_S,
    GgmlType::IQ1_M,
];

/// Every type whose ggml quantizer also runs without an importance matrix in a way
/// `quantize_row` does not (`<TYPE>.plain.ref`: `ggml_quantize_chunk` with a NULL imatrix,
/// same shapes and rows), which `quantize_rows` must reproduce.
const PLAIN_TYPES: &[GgmlType] = &[
    GgmlType::IQ2_S,
    GgmlType::IQ3_XXS,
    GgmlType::IQ3_S,
    GgmlType::IQ1_M,
];

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

/// The importance matrix of `n` columns, drawn as the C harness's `gen_imatrix`.
fn draw_imatrix(rng: &mut Rng, n: usize) -> Vec<f32> {
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
    w
}

/// The importance matrix and the rows of a shape, drawn as the C harness draws them.
fn inputs(n: usize, rows: usize, seed: u64) -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(seed);
    let w = draw_imatrix(&mut rng, n);
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

/// Where `ours` first differs from `want`, block by block, as a failure message.
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
            // The inputs must make the imatrix matter, or the test would prove nothing (the
            // types that need an imatrix have no quantizer without one to compare with).
            let mut plain = vec![0u8; len];
            match quantize_rows(ty, &x, &mut plain) {
                Ok(()) => assert_ne!(
                    plain, want,
                    "{ty}, n_per_row {n}: the imatrix changed nothing"
                ),
                Err(QuantError::Unsupported { .. }) => {}
                Err(e) => panic!("{ty}: {e}"),
            }
            failures.extend(first_difference(ty, n, &ours, want));
        }
        assert_eq!(at, expected.len(), "{ty}: reference file length");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// ggml without an importance matrix, for the types in [`PLAIN_TYPES`]: `quantize_rows` must
/// write `<TYPE>.plain.ref`, and the imatrix must matter there too.
#[test]
fn plain_quantization_matches_ggml() {
    let mut failures = Vec::new();
    for &ty in PLAIN_TYPES {
        let expected = reference_file(&format!("{}.plain.ref", ty.name()));
        let imatrix = reference(ty);
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
            assert_ne!(
                &imatrix[at..at + len],
                want,
                "{ty}, n_per_row {n}: the imatrix changed nothing"
            );
            at += len;
            failures.extend(first_difference(ty, n, &ours, want));
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
    // A type without an importance-matrix quantizer (ggml has none for Q8_1 at all).
    let mut dst = vec![0u8; 36 * 32];
    assert_eq!(
        quantize_rows_imatrix(GgmlType::Q8_1, &x[..1024], 512, &w, &mut dst),
        Err(QuantError::Unsupported {
            ty: GgmlType::Q8_1,
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

/// The grid i-quants on whole 2048 x 2048 tensors, timed (wall and this thread's CPU time,
/// best of `GGUF_SPEED_REPS` runs, 1 unless set), to set against the C harness's
/// `ggml_quantize_chunk` on the same tensors (see `data/imatrix/README.md`):
/// `GGUF_SPEED_REPS=3 cargo test --release -p gguf-quant --test imatrix_reference -- --ignored
/// --nocapture`. Each output's FNV-1a is printed, and checked where the harness printed one
/// (IQ2); with `GGUF_IMATRIX_2048=<dir>` holding the harness's `<TYPE>.2048.bin`, the IQ1
/// outputs are compared with ggml's bytes too.
#[test]
#[ignore = "slow: a timing run"]
fn whole_tensor_timing() {
    const N: usize = 2048;
    let reps: usize = std::env::var("GGUF_SPEED_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
        .max(1);
    // The IQ2 tensor: the imatrix, then uniform rows in [-1, 1) (seed 42).
    let iq2 = {
        let mut rng = Rng::new(42);
        let w = draw_imatrix(&mut rng, N);
        let x: Vec<f32> = (0..N * N).map(|_| rng.unit()).collect();
        (w, x)
    };
    let (iq3, iq1) = (inputs(N, N, 9), inputs(N, N, 4));
    // (type, with the importance matrix, tensor, ggml's FNV-1a when the harness printed it)
    let cases = [
        (GgmlType::IQ2_XXS, true, &iq2, Some("a1c56e5da142ca97")),
        (GgmlType::IQ2_XS, true, &iq2, Some("704f874a7abd08bb")),
        (GgmlType::IQ2_S, true, &iq2, Some("b808c4d313f29d3b")),
        (GgmlType::IQ2_S, false, &iq2, Some("dae3e5238b9b1368")),
        (GgmlType::IQ3_S, true, &iq3, None),
        (GgmlType::IQ3_S, false, &iq3, None),
        (GgmlType::IQ3_XXS, true, &iq3, None),
        (GgmlType::IQ3_XXS, false, &iq3, None),
        (GgmlType::IQ1_S, true, &iq1, None),
        (GgmlType::IQ1_M, true, &iq1, None),
    ];
    let mut wrong = Vec::new();
    for (ty, with, (w, x), want) in cases {
        let mut out = vec![0u8; N / 256 * ty.type_size() as usize * N];
        let quantize = |x: &[f32], out: &mut [u8]| {
            if with {
                quantize_rows_imatrix(ty, x, N, w, out).unwrap();
            } else {
                quantize_rows(ty, x, out).unwrap();
            }
        };
        // Build the grid tables outside the timing, as the harness does.
        let row = out.len() / N;
        quantize(&x[..N], &mut out[..row]);
        let (mut wall, mut cpu) = (f64::INFINITY, f64::INFINITY);
        for _ in 0..reps {
            let (t, c) = (std::time::Instant::now(), thread_cpu_seconds());
            quantize(x, &mut out);
            wall = wall.min(t.elapsed().as_secs_f64());
            cpu = cpu.min(thread_cpu_seconds() - c);
        }
        let fnv = fnv1a64(&out);
        let mode = if with { "imatrix" } else { "plain" };
        println!("{ty} {mode} {N}x{N}: {wall:.3} s (cpu {cpu:.3} s, best of {reps}), fnv {fnv}");
        if want.is_some_and(|want| want != fnv) {
            wrong.push(format!("{ty} ({mode}): fnv {fnv}, ggml {want:?}"));
        }
        if let (true, Some(dir)) = (
            ty.name().starts_with("IQ1"),
            std::env::var_os("GGUF_IMATRIX_2048"),
        ) {
            let path = PathBuf::from(dir).join(format!("{}.2048.bin", ty.name()));
            let ggml = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(ggml.len(), out.len(), "{ty}");
            if let Some(d) = first_difference(ty, N, &out, &ggml) {
                wrong.push(format!("{ty}: {d}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The edge rows of `<TYPE>.edge.ref` (512 values, 4 rows, seed 11, after the imatrix): zero
/// blocks of 32 inside non-zero super-blocks, subnormal values, exact ties, one value per block.
fn edge_inputs() -> (Vec<f32>, Vec<f32>) {
    let n = 512;
    let mut rng = Rng::new(11);
    let w = draw_imatrix(&mut rng, n);
    let mut x = Vec::with_capacity(4 * n);
    for r in 0..4 {
        for j in 0..n {
            let u = rng.unit();
            let b = j / 32;
            x.push(match r {
                0 if [1, 2, 6, 9].contains(&b) => 0.0,
                0 => u,
                1 => u * 1e-41,
                2 if j % 3 == 0 => -0.5,
                2 => 0.5,
                _ if j % 32 == b % 32 => u * 10.0,
                _ => 0.0,
            });
        }
    }
    (w, x)
}

/// IQ3 on the edge rows, with the imatrix then without, against ggml. Row 0 has zero blocks of
/// 32 inside its super-blocks, past which ggml's IQ3_S does not advance its index and sign
/// pointers: the later blocks' bytes move up and the tail stays zero.
#[test]
fn iq3_edge_rows_match_ggml() {
    let (w, x) = edge_inputs();
    let n = 512;
    let mut failures = Vec::new();
    for ty in [GgmlType::IQ3_S, GgmlType::IQ3_XXS] {
        let expected = reference_file(&format!("{}.edge.ref", ty.name()));
        let len = n / 256 * ty.type_size() as usize * 4;
        assert_eq!(expected.len(), 2 * len, "{ty}: edge reference file length");
        let mut ours = vec![0u8; len];
        quantize_rows_imatrix(ty, &x, n, &w, &mut ours).unwrap();
        failures.extend(first_difference(ty, n, &ours, &expected[..len]));
        quantize_rows(ty, &x, &mut ours).unwrap();
        failures.extend(first_difference(ty, n, &ours, &expected[len..]));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The case is exercised: three skipped blocks leave the last 24 index bytes of IQ3_S's
    // first super-block zero.
    let s = reference_file("IQ3_S.edge.ref");
    assert!(s[2 + 40..66].iter().all(|&b| b == 0) && s[2..42].iter().any(|&b| b != 0));
}

/// Hostile values never panic: NaN, infinities, huge and subnormal values, with zero, NaN or
/// infinite importance, and without an importance matrix. (ggml aborts on some of these, where a
/// block's scale comes out NaN; here they give bytes.)
#[test]
fn iq3_hostile_values_do_not_panic() {
    let n = 512;
    let specials = [
        f32::NAN,
        -f32::NAN,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        -f32::MAX,
        f32::MIN_POSITIVE,
        1e-45,
        0.0,
        -0.0,
    ];
    let mut rng = Rng::new(5);
    let mut rows = Vec::new();
    for &s in &specials {
        rows.extend(std::iter::repeat_n(s, n));
        // The special value at every seventh place among ordinary ones.
        rows.extend((0..n).map(|j| if j % 7 == 0 { s } else { rng.unit() }));
    }
    let weights = [0.0, 1.0, f32::NAN, f32::INFINITY, 1e-45, f32::MAX];
    for ty in [GgmlType::IQ3_S, GgmlType::IQ3_XXS] {
        let len = rows.len() / 256 * ty.type_size() as usize;
        let mut out = vec![0u8; len];
        quantize_rows(ty, &rows, &mut out).unwrap();
        for &wv in &weights {
            let w = vec![wv; n];
            quantize_rows_imatrix(ty, &rows, n, &w, &mut out).unwrap();
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
