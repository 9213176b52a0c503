//! Speed of the slow importance-matrix quantizers on a whole 2048 × 2048 tensor, against
//! ggml's figures from the C harness that made the references (`ggml_quantize_chunk` on the
//! same tensor, one call, timed with `clock_gettime`). Ignored by default:
//! `GGUF_SPEED_REPS=3 cargo test --release -p gguf-quant --test imatrix_speed -- --ignored
//! --nocapture`, beside `harness out 3` of the C harness.
//! The bytes are checked too, by their FNV-1a against the harness's.

use std::time::Instant;

use gguf_quant::{quantize_rows, quantize_rows_imatrix, GgmlType};
use gguf_test_support::{fnv1a64, Rng};

const N: usize = 2048;

/// The harness's bench tensor: the importance matrix drawn as in `imatrix_reference.rs`, then
/// 2048 rows of uniform [-1, 1) values, seed 42.
fn tensor() -> (Vec<f32>, Vec<f32>) {
    let mut rng = Rng::new(42);
    let mut w: Vec<f32> = (0..N)
        .map(|j| {
            let u = rng.unit() + 1.0;
            if j % 7 == 3 {
                0.0
            } else {
                u * u * u * u * 10.0 + 0.001
            }
        })
        .collect();
    w[64..96].fill(0.0);
    let x = (0..N * N).map(|_| rng.unit()).collect();
    (w, x)
}

#[test]
#[ignore = "slow: a timing run"]
fn iq2_whole_tensor_speed() {
    let (w, x) = tensor();
    // Best of `GGUF_SPEED_REPS` runs (1 unless set), as the harness's best of its second
    // argument.
    let reps: usize = std::env::var("GGUF_SPEED_REPS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(1)
        .max(1);
    // (type, with the imatrix, ggml's FNV-1a of the tensor)
    let cases = [
        (GgmlType::IQ2_XXS, true, "a1c56e5da142ca97"),
        (GgmlType::IQ2_XS, true, "704f874a7abd08bb"),
        (GgmlType::IQ2_S, true, "b808c4d313f29d3b"),
        (GgmlType::IQ2_S, false, "dae3e5238b9b1368"),
    ];
    let mut wrong = Vec::new();
    for (ty, with, want) in cases {
        let mut out = vec![0u8; N / 256 * ty.type_size() as usize * N];
        // Build the grid tables outside the timing, as the harness does.
        let row = out.len() / N;
        quantize_rows_imatrix(ty, &x[..N], N, &w, &mut out[..row]).unwrap();
        let mut dt = f64::INFINITY;
        for _ in 0..reps {
            let t0 = Instant::now();
            if with {
                quantize_rows_imatrix(ty, &x, N, &w, &mut out).unwrap();
            } else {
                quantize_rows(ty, &x, &mut out).unwrap();
            }
            dt = dt.min(t0.elapsed().as_secs_f64());
        }
        let got = fnv1a64(&out);
        println!(
            "{ty}{} 2048x2048: {dt:.3} s (best of {reps}), fnv {got}",
            if with { "" } else { " (no imatrix)" }
        );
        if got != want {
            wrong.push(format!("{ty} (imatrix {with}): fnv {got}, ggml {want}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
