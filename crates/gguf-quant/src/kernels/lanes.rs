//! The products of the legacy 32-element types in the arithmetic of llama.cpp's AVX2 code, in
//! portable code: each output computed on its own, with the eight accumulator lanes spelled
//! out, in the order that code uses (see `x86_64::avx2::{legacy, gemm}`):
//! - Q8_0, Q4_0, Q5_0 (one row and tinyBLAS), IQ4_NL (tinyBLAS): lane `k` of the accumulator
//!   takes, block after block, `fma(d_w * d_a, s_k, acc_k)`, where `s_k` is the exact sum of
//!   the products of elements `4k..4k + 4`; the lanes are then summed as ggml's `hsum` does.
//! - IQ4_NL's one-row `vec_dot`: the same lanes in two accumulators, even blocks and odd
//!   blocks, added lane by lane before the `hsum`.
//! - Q4_1, Q5_1 (`vec_dot`, which llama.cpp's batches also run): the same lanes, with the min
//!   terms summed with FMA beside them, `mins = fma(m_w, s_a, mins)`, and added last.
//! - Q2_K..Q6_K, IQ4_XS (`vec_dot`): per super-block, eight exact i32 lanes of scaled
//!   sub-block sums, then `acc_k = fma(d_w · d_a, lane_k, acc_k)`, the min terms in lanes
//!   beside them (see `k_row`). Their batches: llama.cpp's tiled order from [`MIN_BATCH`] rows
//!   up (`kq_gemm`), these kernels below.
//!
//! These are the kernels of every instruction set without its own for the type (the scalar
//! ISA, and aarch64 for the types NEON has no kernel for), so a machine without AVX2 computes
//! an AVX2 machine's numbers, bit for bit: ggml's generic order (`scalar`) sums each block's
//! integers first and moves SmolLM2's next-token distribution by a KL divergence of 0.009. They
//! are also the twins the AVX2 kernels are tested against, bit for bit (`simd_tests`).
//!
//! The integer sums are exact. AVX2's byte products saturate one pair sum only when an
//! activation byte is -128, which the activation quantizers write only for a NaN or infinite
//! input; there the two may differ.

use super::kq_gemm::{tiled_twin, unpacker, MIN_BATCH};
use super::{DotFn, GemmFn};
use crate::blocks::*;
use crate::fp::f16_at;
use crate::grids::KVALUES_IQ4NL;
use crate::GgmlType;

/// The one-row kernel for weights of type `ty`, if there is one.
pub(super) fn dot(ty: GgmlType) -> Option<DotFn> {
    use GgmlType::*;
    Some(match ty {
        Q8_0 => |n, w, a| row(Q8_0, n, w, a, q8_0),
        Q4_0 => |n, w, a| row(Q4_0, n, w, a, q4_0),
        Q5_0 => |n, w, a| row(Q5_0, n, w, a, q5_0),
        IQ4_NL => |n, w, a| row(IQ4_NL, n, w, a, iq4_nl),
        Q4_1 => |n, w, a| row(Q4_1, n, w, a, q4_1),
        Q5_1 => |n, w, a| row(Q5_1, n, w, a, q5_1),
        Q6_K => |n, w, a| k_row(Q6_K, n, w, a),
        Q5_K => |n, w, a| k_row(Q5_K, n, w, a),
        Q4_K => |n, w, a| k_row(Q4_K, n, w, a),
        Q3_K => |n, w, a| k_row(Q3_K, n, w, a),
        Q2_K => |n, w, a| k_row(Q2_K, n, w, a),
        IQ4_XS => |n, w, a| k_row(IQ4_XS, n, w, a),
        _ => return None,
    })
}

/// The batched (prompt) product for weights of type `ty`, if there is one.
pub(super) fn gemm(ty: GgmlType) -> Option<GemmFn> {
    use GgmlType::*;
    Some(match ty {
        Q8_0 => |n, w, rb, a, ar, out| batch(Q8_0, n, w, rb, a, ar, out, q8_0),
        Q4_0 => |n, w, rb, a, ar, out| batch(Q4_0, n, w, rb, a, ar, out, q4_0),
        Q5_0 => |n, w, rb, a, ar, out| batch(Q5_0, n, w, rb, a, ar, out, q5_0),
        IQ4_NL => |n, w, rb, a, ar, out| batch(IQ4_NL, n, w, rb, a, ar, out, iq4_nl),
        Q4_1 => |n, w, rb, a, ar, out| batch(Q4_1, n, w, rb, a, ar, out, q4_1),
        Q5_1 => |n, w, rb, a, ar, out| batch(Q5_1, n, w, rb, a, ar, out, q5_1),
        Q6_K | Q5_K | Q4_K | Q3_K | Q2_K | IQ4_XS => return k_batch(ty),
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
/// comes first and, for Q8_1, `s` next), `blocks` blocks; with `paired`, odd blocks go to a
/// second accumulator.
fn output(
    ty: GgmlType,
    blocks: usize,
    w: &[u8],
    a: &[u8],
    unpack: fn(&[u8]) -> Unpacked,
    paired: bool,
) -> f32 {
    let (w_size, act) = (ty.type_size() as usize, super::vec_dot_type(ty));
    let a_size = act.type_size() as usize;
    let qs = a_size - 32;
    let mut acc = [[0f32; 8]; 2];
    let mut mins = 0f32;
    for l in 0..blocks {
        let x = unpack(&w[l * w_size..(l + 1) * w_size]);
        let y = &a[l * a_size..(l + 1) * a_size];
        let d = x.d * f16_at(&y[..2]);
        if let Some(m) = x.m {
            mins = m.mul_add(f16_at(&y[2..4]), mins);
        }
        let acc = &mut acc[usize::from(paired && l % 2 == 1)];
        for (k, lane) in acc.iter_mut().enumerate() {
            let s: i32 = (4 * k..4 * k + 4)
                .map(|e| x.q[e] * i32::from(y[qs + e] as i8))
                .sum();
            *lane = d.mul_add(s as f32, *lane);
        }
    }
    let lanes = if paired {
        std::array::from_fn(|k| acc[0][k] + acc[1][k])
    } else {
        acc[0]
    };
    match ty {
        GgmlType::Q4_1 | GgmlType::Q5_1 => hsum(lanes) + mins,
        _ => hsum(lanes),
    }
}

/// A [`DotFn`] from the per-block `unpack` of weight type `ty`, in the order of ggml's AVX2
/// `vec_dot` (paired accumulators for IQ4_NL).
fn row(ty: GgmlType, n: usize, w: &[u8], a: &[u8], unpack: fn(&[u8]) -> Unpacked) -> f32 {
    let blocks = n / ty.block_size() as usize;
    output(ty, blocks, w, a, unpack, ty == GgmlType::IQ4_NL)
}

/// A [`GemmFn`] from the per-block `unpack` of weight type `ty`: every output on its own, in
/// tinyBLAS's order (one accumulator, IQ4_NL too).
#[allow(clippy::too_many_arguments)]
fn batch(
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
            *y = output(
                ty,
                blocks,
                &w[r * row_bytes..],
                &a[b * act_row..],
                unpack,
                false,
            );
        }
    }
}

/// ggml's AVX `hsum` of four lanes: lanes 0 + 2 and 1 + 3, then those two.
fn hsum4(v: [f32; 4]) -> f32 {
    (v[0] + v[2]) + (v[1] + v[3])
}

/// The Q8_K block `y`: its scale, its 256 values and its 16 sums of 16 values.
fn q8_k(y: &[u8]) -> (f32, &[u8], [i32; 16]) {
    let d = &y[field!(BlockQ8K.d)];
    let bsums = &y[field!(BlockQ8K.bsums)];
    (
        f32::from_le_bytes([d[0], d[1], d[2], d[3]]),
        &y[field!(BlockQ8K.qs)],
        std::array::from_fn(|j| i32::from(i16::from_le_bytes([bsums[2 * j], bsums[2 * j + 1]]))),
    )
}

/// A K-quant (or IQ4_XS) row against Q8_K in the order of its AVX2 `vec_dot`. Per super-block,
/// eight exact i32 lanes:
/// - Q2_K..Q6_K: lane `k` sums `scale · v · y` over elements `4k..4k + 4` of each of the eight
///   groups of 32 (`scale` that of the element's 16); Q6_K's kernel multiplies the stored
///   `v + 32` and takes `32 · (s_2k · bsum_2k + s_2k+1 · bsum_2k+1)` off lane `k` instead.
/// - IQ4_XS: lanes 0..4 take the even sub-blocks of 32, lanes 4..8 the odd ones; lane `k`
///   holds their elements `4(k mod 4) + 0..4` and the same plus 16.
///
/// Then `acc_k = fma(d_w · d_a, lane_k, acc_k)`. The min terms: Q4_K and Q5_K in four lanes
/// (`m_2j · Σy_2j + m_2j+1 · Σy_2j+1` over sub-blocks of 32), Q2_K in eight (pairs of
/// 16-value sub-blocks), each `fma(dmin_w · d_a, ·, ·)`, subtracted after both `hsum`s.
fn k_row(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> f32 {
    use GgmlType::*;
    let unpack = unpacker(ty).expect("a K-quant");
    let (ws, as_) = (ty.type_size() as usize, size_of::<BlockQ8K>());
    let mut acc = [0f32; 8];
    let mut mins = [0f32; 8];
    for i in 0..n / QK_K {
        let u = unpack(&w[i * ws..(i + 1) * ws]);
        let (da, ys, bsums) = q8_k(&a[i * as_..(i + 1) * as_]);
        let y = |e: usize| i32::from(ys[e] as i8);
        let term = |e: usize| {
            let v = if ty == Q6_K { u.v[e] + 32 } else { u.v[e] };
            u.scale[e / 16] * v * y(e)
        };
        let lanes: [i32; 8] = std::array::from_fn(|k| match ty {
            IQ4_XS => {
                let (b0, odd) = (4 * (k % 4), k / 4);
                (0..4)
                    .map(|p| {
                        let base = 32 * (2 * p + odd) + b0;
                        (base..base + 4)
                            .chain(base + 16..base + 20)
                            .map(term)
                            .sum::<i32>()
                    })
                    .sum()
            }
            _ => {
                let sum: i32 = (0..8)
                    .map(|g| (32 * g + 4 * k..32 * g + 4 * k + 4).map(term).sum::<i32>())
                    .sum();
                if ty == Q6_K {
                    let s = |j: usize| u.scale[j] * bsums[j];
                    sum - 32 * (s(2 * k) + s(2 * k + 1))
                } else {
                    sum
                }
            }
        });
        let d = da * u.d;
        for (lane, &v) in acc.iter_mut().zip(&lanes) {
            *lane = d.mul_add(v as f32, *lane);
        }
        let dmin = da * u.dmin;
        match ty {
            Q4_K | Q5_K => {
                // Sub-block k of 32: its min (both halves hold it) and Q8_K's two sums.
                let m = |k: usize| u.min[2 * k] * (bsums[2 * k] + bsums[2 * k + 1]);
                for (j, lane) in mins[..4].iter_mut().enumerate() {
                    *lane = dmin.mul_add((m(2 * j) + m(2 * j + 1)) as f32, *lane);
                }
            }
            Q2_K => {
                let m = |j: usize| u.min[j] * bsums[j];
                for (k, lane) in mins.iter_mut().enumerate() {
                    *lane = dmin.mul_add((m(2 * k) + m(2 * k + 1)) as f32, *lane);
                }
            }
            _ => {}
        }
    }
    match ty {
        Q4_K | Q5_K => hsum(acc) - hsum4([mins[0], mins[1], mins[2], mins[3]]),
        Q2_K => hsum(acc) - hsum(mins),
        _ => hsum(acc),
    }
}

/// The batched product of a K-quant as llama.cpp's x86 build computes it: its tiled order from
/// [`MIN_BATCH`] activation rows up (`kq_gemm`), the one-row kernel above below.
fn k_batch(ty: GgmlType) -> Option<GemmFn> {
    use GgmlType::*;
    Some(match ty {
        Q6_K => |n, w, rb, a, ar, out| k_rows(Q6_K, n, w, rb, a, ar, out),
        Q5_K => |n, w, rb, a, ar, out| k_rows(Q5_K, n, w, rb, a, ar, out),
        Q4_K => |n, w, rb, a, ar, out| k_rows(Q4_K, n, w, rb, a, ar, out),
        Q3_K => |n, w, rb, a, ar, out| k_rows(Q3_K, n, w, rb, a, ar, out),
        Q2_K => |n, w, rb, a, ar, out| k_rows(Q2_K, n, w, rb, a, ar, out),
        IQ4_XS => |n, w, rb, a, ar, out| k_rows(IQ4_XS, n, w, rb, a, ar, out),
        _ => return None,
    })
}

fn k_rows(
    ty: GgmlType,
    n: usize,
    w: &[u8],
    row_bytes: usize,
    a: &[u8],
    act_row: usize,
    out: &mut [&mut [f32]],
) {
    if out.len() >= MIN_BATCH {
        let tiled = tiled_twin(ty).expect("a tiled order for every K-quant here");
        return tiled(n, w, row_bytes, a, act_row, out);
    }
    let used = crate::row_bytes(ty, n).expect("whole blocks");
    let act_used = crate::row_bytes(super::vec_dot_type(ty), n).expect("whole blocks");
    for (b, o) in out.iter_mut().enumerate() {
        let ab = &a[b * act_row..b * act_row + act_used];
        for (r, y) in o.iter_mut().enumerate() {
            *y = k_row(ty, n, &w[r * row_bytes..r * row_bytes + used], ab);
        }
    }
}
