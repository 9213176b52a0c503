//! What the AVX2 kernels share: horizontal sums, byte dot products, nibble unpacking, f16
//! scale loads, prefetching and the block loops that keep two accumulators.

use std::arch::x86_64::*;
use std::mem::offset_of;

use crate::blocks::BlockQ8K;

/// Sum of the eight lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) fn hsum(v: __m256) -> f32 {
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// Sum of the four lanes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) fn hsum4(v: __m128) -> f32 {
    let s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    let s = _mm_add_ss(s, _mm_movehdup_ps(s));
    _mm_cvtss_f32(s)
}

/// How a kernel sums the products of 32 unsigned bytes `u` and 32 signed bytes `s` into eight
/// i32 lanes of four consecutive products each: AVX2's `vpmaddubsw` + `vpmaddwd` ([`Maddubs`])
/// or AVX-VNNI's one `vpdpbusd` ([`AvxVnni`]). Wherever AVX2's pair sums are exact in i16 (every
/// use here: the kernels keep one operand below 128 in magnitude, or away from -128), both give
/// the same integers, so a kernel generic over this computes the same numbers either way.
///
/// The methods are `#[inline(always)]` without target features of their own: they compile in
/// the kernels they are inlined into, whose features must include the implementation's.
pub(in crate::kernels::x86_64) trait ByteDot: Copy {
    /// The eight lane sums of `u · s`.
    ///
    /// # Safety
    /// The CPU has the implementation's instruction set.
    unsafe fn sum4(u: __m256i, s: __m256i) -> __m256i;

    /// The eight lane sums of `(u - k) · s` (`k` in every byte, `u - k` and `k` small enough for
    /// the pair sums of both to be exact in i16), with the `k · s` part shared by the rows that
    /// compute with the same `s`.
    ///
    /// # Safety
    /// As [`ByteDot::sum4`]'s.
    unsafe fn sum4_offset(u: __m256i, k: __m256i, s: __m256i) -> __m256i;
}

/// AVX2's byte products: `vpmaddubsw` into i16 pair sums, `vpmaddwd` by 1 into i32.
#[derive(Clone, Copy)]
pub(in crate::kernels::x86_64) struct Maddubs;

impl ByteDot for Maddubs {
    #[inline(always)]
    unsafe fn sum4(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the CPU has AVX2 (caller).
        unsafe { _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1)) }
    }

    #[inline(always)]
    unsafe fn sum4_offset(u: __m256i, k: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the CPU has AVX2 (caller).
        unsafe {
            let pairs = _mm256_sub_epi16(_mm256_maddubs_epi16(u, s), _mm256_maddubs_epi16(k, s));
            _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
        }
    }
}

/// AVX-VNNI's byte products: one `vpdpbusd` (VEX-encoded, no AVX-512 needed).
#[derive(Clone, Copy)]
pub(in crate::kernels::x86_64) struct AvxVnni;

impl ByteDot for AvxVnni {
    #[inline(always)]
    unsafe fn sum4(u: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the CPU has AVX-VNNI (caller).
        unsafe { _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), u, s) }
    }

    #[inline(always)]
    unsafe fn sum4_offset(u: __m256i, k: __m256i, s: __m256i) -> __m256i {
        // SAFETY: the CPU has AVX-VNNI (caller).
        unsafe {
            let ks = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), k, s);
            _mm256_dpbusd_avx_epi32(_mm256_sub_epi32(_mm256_setzero_si256(), ks), u, s)
        }
    }
}

/// Eight i32 lane sums of the products of 32 signed bytes `x` and `y` (not both -128).
///
/// # Safety
/// The CPU has `D`'s instruction set.
#[inline(always)]
pub(super) unsafe fn dot_i8<D: ByteDot>(x: __m256i, y: __m256i) -> __m256i {
    // The unsigned operand takes x's magnitudes; x's sign moves onto y.
    // SAFETY: AVX2 and `D`'s instruction set (caller).
    unsafe { D::sum4(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x)) }
}

/// The 32 nibbles of 16 bytes, low nibbles (elements 0..16) first.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) fn nibbles(b: __m128i) -> __m256i {
    _mm256_and_si256(
        _mm256_set_m128i(_mm_srli_epi16(b, 4), b),
        _mm256_set1_epi8(0x0F),
    )
}

/// The product of the two little-endian f16 values at `a` and `b`, broadcast to eight lanes.
///
/// Each value is broadcast as f16 and converted in all eight lanes at once (two instructions
/// each), rather than assembled in a register, converted and broadcast after the product.
///
/// # Safety
/// `a` and `b` must each point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f16_product(a: *const u8, b: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 2 readable bytes at each pointer.
    let (x, y) = unsafe {
        (
            a.cast::<i16>().read_unaligned(),
            b.cast::<i16>().read_unaligned(),
        )
    };
    _mm256_mul_ps(
        _mm256_cvtph_ps(_mm_set1_epi16(x)),
        _mm256_cvtph_ps(_mm_set1_epi16(y)),
    )
}

/// One little-endian f16 at `a` as f32.
///
/// Broadcast, then converted: building the vector with `_mm_cvtsi32_si128` lets LLVM insert
/// the value into whatever register is at hand (`vpinsrw`), often an accumulator, which chains
/// every block's conversion to the previous block's sum.
///
/// # Safety
/// `a` must point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn f16_at(a: *const u8) -> f32 {
    // SAFETY: the caller guarantees 2 readable bytes.
    let x = unsafe { a.cast::<i16>().read_unaligned() };
    _mm_cvtss_f32(_mm_cvtph_ps(_mm_set1_epi16(x)))
}

/// The little-endian f16 at `a` as f32, in all eight lanes (a broadcast load and one
/// conversion; using every lane keeps LLVM from narrowing it to `vpinsrw`, see [`f16_at`]).
///
/// # Safety
/// `a` must point to 2 readable bytes.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn f16_splat(a: *const u8) -> __m256 {
    // SAFETY: the caller guarantees 2 readable bytes.
    let x = unsafe { a.cast::<i16>().read_unaligned() };
    _mm256_cvtph_ps(_mm_set1_epi16(x))
}

/// The scales of sub-blocks `j` and `j + 1` (bytes `j`, `j + 1` of `sc16`, signed) as 16 i16
/// lanes: eight of scale `j`, then eight of scale `j + 1`, matching the i16 pair sums of 32
/// values whose first 16 belong to sub-block `j`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn scale_pair(sc16: __m128i, j: usize) -> __m256i {
    let j = j as u8;
    let pick = _mm_set_epi64x(i64::from_ne_bytes([j + 1; 8]), i64::from_ne_bytes([j; 8]));
    _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc16, pick))
}

/// The f32 scale of the Q8_K block at `p`.
///
/// # Safety
/// `p` must point to a Q8_K block.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) unsafe fn q8k_scale(p: *const u8) -> f32 {
    // SAFETY: the block holds its scale (caller); the read is unaligned.
    unsafe {
        p.add(offset_of!(BlockQ8K, d))
            .cast::<f32>()
            .read_unaligned()
    }
}

/// Asks for the cache line `ahead` bytes past `p` (0: none). Kernels that compute a group of
/// rows pass the group's size in bytes, so each block prefetches the same block of the next
/// group, and the rows stream in from L3 or memory while these are computed (Q8_0 mat-vec
/// 576x1536: 21 to 24 GB/s).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(in crate::kernels::x86_64) fn prefetch(p: *const u8, ahead: usize) {
    if ahead != 0 {
        // A prefetch never faults, so the address may lie past the matrix (it does for the
        // last group); `wrapping_add` keeps computing it free of undefined behaviour.
        _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(ahead).cast());
    }
}

/// Sums `d * v` over the blocks of each of `R` rows (`block(row, i)`) into one accumulator per
/// row, block after block, then adds its lanes: the order of ggml's AVX2 `vec_dot` for Q4_0,
/// Q5_0 and Q8_0 (and of tinyBLAS, which llama.cpp's batched products use), so a row's result
/// is llama.cpp's bit for bit. The `R` rows' chains run side by side, which hides the latency
/// of each row's dependent fused multiply-adds. Every row is summed in the same order whatever
/// `R` is, so a row's result does not depend on the rows computed beside it.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn one_accumulator<const R: usize>(
    blocks: usize,
    block: impl Fn(usize, usize) -> (__m256, __m256),
) -> [f32; R] {
    let mut acc = [_mm256_setzero_ps(); R];
    for i in 0..blocks {
        for (r, acc) in acc.iter_mut().enumerate() {
            let (d, v) = block(r, i);
            *acc = _mm256_fmadd_ps(d, v, *acc);
        }
    }
    let mut sums = [0f32; R];
    for r in 0..R {
        sums[r] = hsum(acc[r]);
    }
    sums
}

/// The products `d_w * d_a` of the f16 scales that start four consecutive blocks of each
/// operand (blocks `w_size` and `a_size` bytes long), as four f32 lanes.
///
/// # Safety
/// `w` and `a` must point to four such blocks each.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn f16_products4(w: *const u8, w_size: usize, a: *const u8, a_size: usize) -> __m128 {
    let gather = |p: *const u8, size: usize| {
        let mut bits = 0u64;
        for k in 0..4 {
            // SAFETY: the caller guarantees four blocks, each starting with 2 readable bytes.
            let x = unsafe { p.add(k * size).cast::<u16>().read_unaligned() };
            bits |= u64::from(x) << (16 * k);
        }
        _mm_cvtph_ps(_mm_cvtsi64_si128(bits as i64))
    };
    _mm_mul_ps(gather(w, w_size), gather(a, a_size))
}

/// Sums `d_i * v_i` over the blocks, where `d_i` is the product of the f16 scales that start
/// block i of `w` and `a` and `v_i` the eight i32 lane sums `block(i)`, in the order of ggml's
/// AVX2 `vec_dot` for the type: one accumulator (`PAIRED` false: Q5_0), or, for IQ4_NL
/// (`PAIRED` true), even blocks into one and odd blocks into another, added before the lanes.
/// Four blocks per step share one f16 conversion per operand for their scales (7% faster for
/// Q5_0 than converting each block's pair on its own).
///
/// # Safety
/// `w` and `a` must point to `blocks` blocks of `w_size` and `a_size` bytes, each starting
/// with its f16 scale.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn scaled_blocks<const PAIRED: bool>(
    blocks: usize,
    w: *const u8,
    w_size: usize,
    a: *const u8,
    a_size: usize,
    block: impl Fn(usize) -> __m256i,
) -> f32 {
    let (mut acc0, mut acc1) = (_mm256_setzero_ps(), _mm256_setzero_ps());
    let v = |i: usize| _mm256_cvtepi32_ps(block(i));
    let mut i = 0;
    while i + 4 <= blocks {
        // SAFETY: blocks i..i + 4 of each operand are in bounds (caller).
        let d = unsafe { f16_products4(w.add(i * w_size), w_size, a.add(i * a_size), a_size) };
        let ds = [
            _mm256_broadcastss_ps(d),
            _mm256_broadcastss_ps(_mm_movehdup_ps(d)),
            _mm256_broadcastss_ps(_mm_movehl_ps(d, d)),
            _mm256_broadcastss_ps(_mm_shuffle_ps::<0xFF>(d, d)),
        ];
        for (k, d) in ds.into_iter().enumerate() {
            if PAIRED && k % 2 == 1 {
                acc1 = _mm256_fmadd_ps(d, v(i + k), acc1);
            } else {
                acc0 = _mm256_fmadd_ps(d, v(i + k), acc0);
            }
        }
        i += 4;
    }
    while i < blocks {
        // SAFETY: block i of each operand is in bounds (caller).
        let d = unsafe { f16_product(w.add(i * w_size), a.add(i * a_size)) };
        if PAIRED && i % 2 == 1 {
            acc1 = _mm256_fmadd_ps(d, v(i), acc1);
        } else {
            acc0 = _mm256_fmadd_ps(d, v(i), acc0);
        }
        i += 1;
    }
    if PAIRED {
        hsum(_mm256_add_ps(acc0, acc1))
    } else {
        hsum(acc0)
    }
}
