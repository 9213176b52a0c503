//! Scalar twins of the SIMD GEMM kernels ([`GemmFn`]): each output computed on its own, with
//! the eight accumulator lanes of llama.cpp's AVX2 code spelled out, in the order that code
//! uses (see `x86_64::avx2::gemm`):
//! - Q8_0, Q4_0, Q5_0, IQ4_NL (tinyBLAS): lane `k` of the accumulator takes, block after block,
//!   `fma(d_w * d_a, s_k, acc_k)`, where `s_k` is the exact sum of the products of elements
//!   `4k..4k + 4`; the lanes are then summed as ggml's `hsum` does.
//! - Q4_1, Q5_1 (llama.cpp's AVX2 `vec_dot`): the same lanes, with the min terms summed with
//!   FMA beside them, `mins = fma(m_w, s_a, mins)`, and added to the lanes' sum last.
//!
//! They exist for the tests (`simd_tests`): the scalar ISA has no GEMM kernel, since ggml's
//! generic build computes batches with its one-row `vec_dot`, as the scalar dot kernels do.

use super::GemmFn;
use crate::blocks::*;
use crate::fp::f16_at;
use crate::grids::KVALUES_IQ4NL;
use crate::GgmlType;

/// The twin of the GEMM kernel for weights of type `ty`, if there is one.
pub(super) fn twin(ty: GgmlType) -> Option<GemmFn> {
    use GgmlType::*;
    Some(match ty {
        Q8_0 => |n, w, rb, a, ar, out| gemm(Q8_0, n, w, rb, a, ar, out, q8_0),
        Q4_0 => |n, w, rb, a, ar, out| gemm(Q4_0, n, w, rb, a, ar, out, q4_0),
        Q5_0 => |n, w, rb, a, ar, out| gemm(Q5_0, n, w, rb, a, ar, out, q5_0),
        IQ4_NL => |n, w, rb, a, ar, out| gemm(IQ4_NL, n, w, rb, a, ar, out, iq4_nl),
        Q4_1 => |n, w, rb, a, ar, out| gemm(Q4_1, n, w, rb, a, ar, out, q4_1),
        Q5_1 => |n, w, rb, a, ar, out| gemm(Q5_1, n, w, rb, a, ar, out, q5_1),
        _ => return None,
    })
}

/// What one weight block contributes to a product: its scale, its minimum (0.0 for the
/// symmetric types, which have none), and its 32 integer values in element order.
struct Unpacked {
    d: f32,
    m: Option<f32>,
    q: [i32; 32],
}

/// The 32 values of the nibbles `qs`: element `j` in the low nibble of byte `j`, element
/// `j + 16` in the high one, each mapped by `f`.
fn nibble_values(qs: &[u8], f: impl Fn(u8) -> i32) -> [i32; 32] {
    std::array::from_fn(|e| {
        f(if e < 16 {
            qs[e] & 0x0F
        } else {
            qs[e - 16] >> 4
        })
    })
}

/// The fifth bits of a Q5 block: bit `e` of the little-endian `qh`, as 16 or 0.
fn fifth_bits(qh: &[u8]) -> [i32; 32] {
    let bits = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
    std::array::from_fn(|e| (((bits >> e) & 1) << 4) as i32)
}

fn q8_0(b: &[u8]) -> Unpacked {
    let qs = &b[field!(BlockQ8_0.qs)];
    Unpacked {
        d: f16_at(&b[field!(BlockQ8_0.d)]),
        m: None,
        q: std::array::from_fn(|e| i32::from(qs[e] as i8)),
    }
}

fn q4_0(b: &[u8]) -> Unpacked {
    Unpacked {
        d: f16_at(&b[field!(BlockQ4_0.d)]),
        m: None,
        q: nibble_values(&b[field!(BlockQ4_0.qs)], |v| i32::from(v) - 8),
    }
}

fn q5_0(b: &[u8]) -> Unpacked {
    let high = fifth_bits(&b[field!(BlockQ5_0.qh)]);
    let low = nibble_values(&b[field!(BlockQ5_0.qs)], i32::from);
    Unpacked {
        d: f16_at(&b[field!(BlockQ5_0.d)]),
        m: None,
        q: std::array::from_fn(|e| (low[e] | high[e]) - 16),
    }
}

fn iq4_nl(b: &[u8]) -> Unpacked {
    Unpacked {
        d: f16_at(&b[field!(BlockIq4Nl.d)]),
        m: None,
        q: nibble_values(&b[field!(BlockIq4Nl.qs)], |v| {
            i32::from(KVALUES_IQ4NL[usize::from(v)])
        }),
    }
}

fn q4_1(b: &[u8]) -> Unpacked {
    Unpacked {
        d: f16_at(&b[field!(BlockQ4_1.d)]),
        m: Some(f16_at(&b[field!(BlockQ4_1.m)])),
        q: nibble_values(&b[field!(BlockQ4_1.qs)], i32::from),
    }
}

fn q5_1(b: &[u8]) -> Unpacked {
    let high = fifth_bits(&b[field!(BlockQ5_1.qh)]);
    let low = nibble_values(&b[field!(BlockQ5_1.qs)], i32::from);
    Unpacked {
        d: f16_at(&b[field!(BlockQ5_1.d)]),
        m: Some(f16_at(&b[field!(BlockQ5_1.m)])),
        q: std::array::from_fn(|e| low[e] | high[e]),
    }
}

/// ggml's AVX `hsum` of eight lanes: the two halves added lane by lane, then lanes 0 + 2 and
/// 1 + 3, then those two.
fn hsum(v: [f32; 8]) -> f32 {
    let s: [f32; 4] = std::array::from_fn(|k| v[k] + v[k + 4]);
    (s[0] + s[2]) + (s[1] + s[3])
}

/// One output: weight row `w` against activation row `a` (Q8_0 or Q8_1 blocks, whose scale
/// comes first and, for Q8_1, `s` next), `blocks` blocks.
fn output(ty: GgmlType, blocks: usize, w: &[u8], a: &[u8], unpack: fn(&[u8]) -> Unpacked) -> f32 {
    let (w_size, act) = (ty.type_size() as usize, super::vec_dot_type(ty));
    let a_size = act.type_size() as usize;
    let qs = a_size - 32;
    let mut acc = [0f32; 8];
    let mut mins = 0f32;
    for l in 0..blocks {
        let x = unpack(&w[l * w_size..(l + 1) * w_size]);
        let y = &a[l * a_size..(l + 1) * a_size];
        let d = x.d * f16_at(&y[..2]);
        if let Some(m) = x.m {
            mins = m.mul_add(f16_at(&y[2..4]), mins);
        }
        for (k, lane) in acc.iter_mut().enumerate() {
            let s: i32 = (4 * k..4 * k + 4)
                .map(|e| x.q[e] * i32::from(y[qs + e] as i8))
                .sum();
            *lane = d.mul_add(s as f32, *lane);
        }
    }
    match ty {
        GgmlType::Q4_1 | GgmlType::Q5_1 => hsum(acc) + mins,
        _ => hsum(acc),
    }
}

/// A [`GemmFn`] from the per-output `unpack` of weight type `ty`: every output on its own.
#[allow(clippy::too_many_arguments)]
fn gemm(
    ty: GgmlType,
    n: usize,
    w: &[u8],
    row_bytes: usize,
    a: &[u8],
    act_row: usize,
    out: &mut [&mut [f32]],
    unpack: fn(&[u8]) -> Unpacked,
) {
    let blocks = n / ty.block_size() as usize;
    for (b, o) in out.iter_mut().enumerate() {
        for (r, y) in o.iter_mut().enumerate() {
            *y = output(ty, blocks, &w[r * row_bytes..], &a[b * act_row..], unpack);
        }
    }
}
