//! AVX2 dot products of the legacy 32-element quants against Q8_0/Q8_1: Q4_0, Q4_1 and Q8_0
//! (one or four rows per call, see `safe_wrapper!`), Q5_0 and Q5_1.

use std::arch::x86_64::*;
use std::mem::offset_of;

use super::common::{
    dot_i8, f16_product, hsum, nibbles, one_accumulator, prefetch, scaled_blocks, ByteDot, Maddubs,
};
use crate::blocks::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};

/// Defines the entry points of the legacy dot kernels for one instruction set: each
/// `unsafe fn` below compiled with `$features` and `$dot`'s byte products, wrapped by
/// `safe_wrapper!` (AVX2's here; AVX-VNNI's in `avxvnni`, with the same integers).
macro_rules! legacy_entries {
    ($features:literal, $dot:ty) => {
        /// # Safety
        /// As `q8_0_q8_0_with`'s, on a CPU with these features.
        #[target_feature(enable = $features)]
        unsafe fn q8_0_entry<const R: usize>(
            blocks: usize,
            ws: [*const u8; R],
            ahead: usize,
            a: *const u8,
        ) -> [f32; R] {
            // SAFETY: the caller's guarantee.
            unsafe { legacy::q8_0_q8_0_with::<$dot, R>(blocks, ws, ahead, a) }
        }

        /// # Safety
        /// As `q4_0_q8_0_with`'s, on a CPU with these features.
        #[target_feature(enable = $features)]
        unsafe fn q4_0_entry<const R: usize>(
            blocks: usize,
            ws: [*const u8; R],
            ahead: usize,
            a: *const u8,
        ) -> [f32; R] {
            // SAFETY: the caller's guarantee.
            unsafe { legacy::q4_0_q8_0_with::<$dot, R>(blocks, ws, ahead, a) }
        }

        /// # Safety
        /// As `q4_1_q8_1_with`'s, on a CPU with these features.
        #[target_feature(enable = $features)]
        unsafe fn q4_1_entry<const R: usize>(
            blocks: usize,
            ws: [*const u8; R],
            ahead: usize,
            a: *const u8,
        ) -> [f32; R] {
            // SAFETY: the caller's guarantee.
            unsafe { legacy::q4_1_q8_1_with::<$dot, R>(blocks, ws, ahead, a) }
        }

        /// # Safety
        /// As `q5_0_q8_0_with`'s, on a CPU with these features.
        #[target_feature(enable = $features)]
        unsafe fn q5_0_entry(blocks: usize, w: *const u8, a: *const u8) -> f32 {
            // SAFETY: the caller's guarantee.
            unsafe { legacy::q5_0_q8_0_with::<$dot>(blocks, w, a) }
        }

        safe_wrapper!(q8_0_q8_0, q8_0_entry, Q8_0, rows: q8_0_q8_0_rows, group: 8);
        safe_wrapper!(q4_0_q8_0, q4_0_entry, Q4_0, rows: q4_0_q8_0_rows, group: 8);
        safe_wrapper!(q4_1_q8_1, q4_1_entry, Q4_1, rows: q4_1_q8_1_rows, group: 8);
        safe_wrapper!(q5_0_q8_0, q5_0_entry, Q5_0);
    };
}

pub(in crate::kernels::x86_64) use legacy_entries;

use super::legacy;
legacy_entries!("avx2,fma,f16c", Maddubs);
safe_wrapper!(q5_1_q8_1, q5_1_q8_1_avx2, Q5_1);

/// # Safety
/// The CPU has AVX2, FMA, F16C and `D`'s instruction set. Each of `ws` points to `blocks` Q8_0
/// blocks, and so does `a`. `ahead`: see [`prefetch`].
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q8_0_q8_0_with<D: ByteDot, const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    const SIZE: usize = size_of::<BlockQ8_0>();
    const D: usize = offset_of!(BlockQ8_0, d);
    const QS: usize = offset_of!(BlockQ8_0, qs);
    // SAFETY: `one_accumulator` calls this only for r < R and i < blocks, so block i of each
    // operand is in bounds (caller); loads are unaligned.
    let block = |r: usize, i: usize| unsafe {
        let (bw, ba) = (ws[r].add(i * SIZE), a.add(i * SIZE));
        prefetch(bw, ahead);
        let x = _mm256_loadu_si256(bw.add(QS).cast());
        let y = _mm256_loadu_si256(ba.add(QS).cast());
        (
            f16_product(bw.add(D), ba.add(D)),
            _mm256_cvtepi32_ps(dot_i8::<D>(x, y)),
        )
    };
    // SAFETY: AVX2, FMA and F16C (caller).
    unsafe { one_accumulator(blocks, block) }
}

/// # Safety
/// The CPU has AVX2, FMA, F16C and `D`'s instruction set. Each of `ws` points to `blocks` Q4_0
/// blocks and `a` to `blocks` Q8_0 blocks. `ahead`: see [`prefetch`].
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q4_0_q8_0_with<D: ByteDot, const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let eight = _mm256_set1_epi8(8);
    // SAFETY: `one_accumulator` calls this only for r < R and i < blocks, so block i of each
    // operand is in bounds (caller); loads are unaligned.
    let block = |r: usize, i: usize| unsafe {
        let bw = ws[r].add(i * size_of::<BlockQ4_0>());
        let ba = a.add(i * size_of::<BlockQ8_0>());
        // One prefetch per two blocks (a 64-byte cache line holds 3.6 of them).
        if i.is_multiple_of(2) {
            prefetch(bw, ahead);
        }
        let q = nibbles(_mm_loadu_si128(bw.add(offset_of!(BlockQ4_0, qs)).cast()));
        let y = _mm256_loadu_si256(ba.add(offset_of!(BlockQ8_0, qs)).cast());
        // Pair sums of (q - 8) * y as q * y - 8 * y (each exact in i16: |q y| <= 15 * 128).
        // The 8 * y term depends on the activations only, so rows computed together share
        // it, and no sign juggling is needed since q is unsigned.
        let v = D::sum4_offset(q, eight, y);
        let (dw, da) = (offset_of!(BlockQ4_0, d), offset_of!(BlockQ8_0, d));
        (f16_product(bw.add(dw), ba.add(da)), _mm256_cvtepi32_ps(v))
    };
    // SAFETY: AVX2, FMA and F16C (caller).
    unsafe { one_accumulator(blocks, block) }
}

/// # Safety
/// The CPU has AVX2, FMA, F16C and `D`'s instruction set. Each of `ws` points to `blocks` Q4_1
/// blocks and `a` to `blocks` Q8_1 blocks. `ahead`: see [`prefetch`].
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q4_1_q8_1_with<D: ByteDot, const R: usize>(
    blocks: usize,
    ws: [*const u8; R],
    ahead: usize,
    a: *const u8,
) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    // Lane 1: the min terms (see `min_terms`).
    let mut mins = [_mm_setzero_ps(); R];
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned.
        unsafe {
            let ba = a.add(i * size_of::<BlockQ8_1>());
            let ads = f16_pair(ba.add(offset_of!(BlockQ8_1, d)));
            let y = _mm256_loadu_si256(ba.add(offset_of!(BlockQ8_1, qs)).cast());
            for r in 0..R {
                let bw = ws[r].add(i * size_of::<BlockQ4_1>());
                prefetch(bw, ahead);
                // Lanes 0 and 1: d_w, m_w times d_a, s_a, from one conversion per operand.
                let wdm = f16_pair(bw.add(offset_of!(BlockQ4_1, d)));
                mins[r] = _mm_fmadd_ps(wdm, ads, mins[r]);
                let d = _mm256_broadcastss_ps(_mm_mul_ps(wdm, ads));
                let q = nibbles(_mm_loadu_si128(bw.add(offset_of!(BlockQ4_1, qs)).cast()));
                acc[r] = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(D::sum4(q, y)), acc[r]);
            }
        }
    }
    let mut sums = [0f32; R];
    for r in 0..R {
        // SAFETY: AVX2, FMA and F16C (caller).
        sums[r] = unsafe { hsum(acc[r]) + min_terms(mins[r]) };
    }
    sums
}

/// The sum of the min terms `m_w * s_a` of a Q4_1/Q5_1 dot product from lane 1 of `mins`,
/// where the kernels sum them with `mins = fma(m_w, s_a, mins)` block after block: ggml's AVX2
/// `vec_dot` writes `summs += m * s`, and GCC fuses that into one FMA on FMA machines (the
/// reference build's disassembly has a `vfmadd231ss` there).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) fn min_terms(mins: __m128) -> f32 {
    _mm_cvtss_f32(_mm_movehdup_ps(mins))
}

/// The two consecutive little-endian f16 at `p` (Q4_1's and Q5_1's `d`, `m`; Q8_1's `d`, `s`)
/// as f32 in lanes 0 and 1.
///
/// # Safety
/// `p` must point to 4 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn f16_pair(p: *const u8) -> __m128 {
    // SAFETY: the caller guarantees 4 readable bytes; the load is unaligned.
    _mm_cvtph_ps(_mm_cvtsi32_si128(unsafe {
        p.cast::<i32>().read_unaligned()
    }))
}

// The pairs `f16_pair` reads.
const _: () = assert!(
    offset_of!(BlockQ4_1, m) == offset_of!(BlockQ4_1, d) + 2
        && offset_of!(BlockQ5_1, m) == offset_of!(BlockQ5_1, d) + 2
        && offset_of!(BlockQ8_1, s) == offset_of!(BlockQ8_1, d) + 2
);

/// 0xFF in byte `j` where bit `j` of `bits` is set, else 0 (the fifth bits of Q5_0/Q5_1).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn bit_bytes(bits: u32) -> __m256i {
    // Byte j takes byte j / 8 of `bits`: every dword holds all four, and each 128-bit lane
    // picks bytes 0, 1 (low lane) or 2, 3 (high lane) of its own copy.
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(bits as i32),
        _mm256_set_epi64x(
            0x0303_0303_0303_0303,
            0x0202_0202_0202_0202,
            0x0101_0101_0101_0101,
            0,
        ),
    );
    let select = _mm256_set1_epi64x(0x8040_2010_0804_0201u64 as i64);
    _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select)
}

/// # Safety
/// The CPU has AVX2, FMA, F16C and `D`'s instruction set. `w` points to `blocks` Q5_0 blocks
/// and `a` to `blocks` Q8_0 blocks.
#[inline(always)]
pub(in crate::kernels::x86_64) unsafe fn q5_0_q8_0_with<D: ByteDot>(
    blocks: usize,
    w: *const u8,
    a: *const u8,
) -> f32 {
    let high = _mm256_set1_epi8(0xF0u8 as i8);
    const W: usize = size_of::<BlockQ5_0>();
    const A: usize = size_of::<BlockQ8_0>();
    // SAFETY: `scaled_blocks` calls this only for i < blocks, so block i of each operand is in
    // bounds (caller); loads are unaligned and stay within the fields.
    let block = |i: usize| unsafe {
        let (bw, ba) = (w.add(i * W), a.add(i * A));
        let qh = bw
            .add(offset_of!(BlockQ5_0, qh))
            .cast::<u32>()
            .read_unaligned()
            .to_le();
        // q - 16 in -16..16: the nibble when the fifth bit is set, else nibble - 16, which as
        // an i8 is the nibble with the top four bits set.
        let x = _mm256_or_si256(
            nibbles(_mm_loadu_si128(bw.add(offset_of!(BlockQ5_0, qs)).cast())),
            _mm256_andnot_si256(bit_bytes(qh), high),
        );
        dot_i8::<D>(
            x,
            _mm256_loadu_si256(ba.add(offset_of!(BlockQ8_0, qs)).cast()),
        )
    };
    const _: () = assert!(offset_of!(BlockQ5_0, d) == 0 && offset_of!(BlockQ8_0, d) == 0);
    // SAFETY: the caller's guarantee, and both block types start with their f16 scale.
    unsafe { scaled_blocks::<false>(blocks, w, W, a, A, block) }
}

/// # Safety
/// `w` points to `blocks` Q5_1 blocks and `a` to `blocks` Q8_1 blocks.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn q5_1_q8_1_avx2(blocks: usize, w: *const u8, a: *const u8) -> f32 {
    let fifth = _mm256_set1_epi8(0x10);
    let mut acc = _mm256_setzero_ps();
    // Lane 1: the min terms (see `min_terms`).
    let mut mins = _mm_setzero_ps();
    for i in 0..blocks {
        // SAFETY: block i of each operand is in bounds (caller); loads are unaligned and stay
        // within the fields.
        unsafe {
            let bw = w.add(i * size_of::<BlockQ5_1>());
            let ba = a.add(i * size_of::<BlockQ8_1>());
            // Lanes 0 and 1: d_w, m_w times d_a, s_a, from one conversion per operand.
            let wdm = f16_pair(bw.add(offset_of!(BlockQ5_1, d)));
            let ads = f16_pair(ba.add(offset_of!(BlockQ8_1, d)));
            mins = _mm_fmadd_ps(wdm, ads, mins);
            let d = _mm256_broadcastss_ps(_mm_mul_ps(wdm, ads));
            let qh = bw
                .add(offset_of!(BlockQ5_1, qh))
                .cast::<u32>()
                .read_unaligned()
                .to_le();
            // q in 0..32: the nibble plus 16 where the fifth bit is set.
            let q = _mm256_or_si256(
                nibbles(_mm_loadu_si128(bw.add(offset_of!(BlockQ5_1, qs)).cast())),
                _mm256_and_si256(bit_bytes(qh), fifth),
            );
            let y = _mm256_loadu_si256(ba.add(offset_of!(BlockQ8_1, qs)).cast());
            acc = _mm256_fmadd_ps(d, _mm256_cvtepi32_ps(Maddubs::sum4(q, y)), acc);
        }
    }
    hsum(acc) + min_terms(mins)
}
