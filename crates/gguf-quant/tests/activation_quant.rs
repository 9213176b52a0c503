//! The activation quantizers the matrix products use give the bytes llama.cpp's x86
//! `quantize_row_q8_0` and `quantize_row_q8_1` give (vectors from libggml-cpu of llama.cpp
//! 0c1e57098, made by `tests/data/ggml_activation_quant.c`), including ties, zeros, huge, tiny,
//! subnormal, NaN and infinite inputs), on every instruction set: with `GGUF_FORCE_SCALAR=1`
//! and on aarch64 this checks the portable quantizers.

use gguf_quant::{quantize_activations, GgmlType};

#[test]
fn activation_quantization_equals_ggml_x86_on_every_isa() {
    let data = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/ggml_activation_quant.bin"),
    )
    .unwrap();
    let mut rest = &data[..];
    let mut take = |n: usize| {
        let (s, r) = rest.split_at(n);
        rest = r;
        s
    };
    let mut rows = 0;
    let mut out = Vec::new();
    for _ in 0..227 {
        let n = u32::from_le_bytes(take(4).try_into().unwrap()) as usize;
        let x: Vec<f32> = take(4 * n)
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
            .collect();
        let q8_0 = take(n / 32 * 34).to_vec();
        let q8_1 = take(n / 32 * 36).to_vec();
        quantize_activations(GgmlType::Q4_0, &x, &mut out).unwrap();
        assert_eq!(out, q8_0, "Q8_0, row {rows}");
        quantize_activations(GgmlType::Q4_1, &x, &mut out).unwrap();
        assert_eq!(out, q8_1, "Q8_1, row {rows}");
        rows += 1;
    }
    assert_eq!(rows, 227);
    assert!(rest.is_empty(), "{} trailing bytes", rest.len());
}
