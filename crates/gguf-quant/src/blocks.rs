//! The block layouts of every ggml type, field for field as ggml's `ggml-common.h` declares
//! them (`#[repr(C)]`, same order, same sizes, checked at compile time against the type table:
//! `GgmlType::type_size` and `block_size`).
//!
//! They are the crate's one source of layout truth: the dot kernels (scalar and SIMD) and the
//! activation quantizers find every field with `offset_of!` and step over blocks with
//! `size_of`, compile-time constants that cost nothing at run time.
//!
//! `QK_K` = 256 elements per super-block for the K-quants, i-quants and ternary types.

use std::ops::Range;

use bytemuck::{Pod, Zeroable};
use half::f16;

/// Elements per super-block of the K-quants, i-quants and ternary types.
pub const QK_K: usize = 256;
/// Size of the packed 6-bit scales of Q4_K and Q5_K.
pub const K_SCALE_SIZE: usize = 12;

/// A block layout, for kernels generic over the types they read.
pub(crate) trait Block {
    /// Elements per block.
    const ELEMENTS: usize;
}

/// The bytes `offset..offset + size_of::<F>()`, where `F` is the type of the field `_field`
/// selects; see [`field!`](field).
pub(crate) const fn field_bytes<B, F>(offset: usize, _field: fn(&B) -> &F) -> Range<usize> {
    offset..offset + size_of::<F>()
}

/// The byte range of a field within its block: `field!(BlockQ4_0.qs)` is `2..18`, a
/// compile-time constant.
macro_rules! field {
    ($block:ident . $field:ident) => {{
        const BYTES: std::ops::Range<usize> =
            $crate::blocks::field_bytes(std::mem::offset_of!($block, $field), |b: &$block| {
                &b.$field
            });
        BYTES
    }};
}
pub(crate) use field;

macro_rules! block {
    ($(#[$doc:meta])* $name:ident, $ty:ident, $size:expr, $elements:expr, { $($(#[$fdoc:meta])* $field:ident : $fty:ty),* $(,)? }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
        pub struct $name {
            $( $(#[$fdoc])* pub $field: $fty, )*
        }
        const _: () = assert!(std::mem::size_of::<$name>() == $size);
        const _: () = assert!(gguf_format::GgmlType::$ty.type_size() as usize == $size);
        const _: () = assert!(gguf_format::GgmlType::$ty.block_size() as usize == $elements);
        impl $name {
            /// The ggml type stored in blocks of this layout.
            pub const GGML_TYPE: gguf_format::GgmlType = gguf_format::GgmlType::$ty;
            /// Elements per block.
            pub const ELEMENTS: usize = $elements;
        }
        impl Block for $name {
            const ELEMENTS: usize = $elements;
        }
    };
}

block!(
    /// Q4_0: 32 weights `d * (q - 8)`, q in 0..16; `qs[j]` holds element j (low nibble) and
    /// j + 16 (high nibble).
    BlockQ4_0, Q4_0, 18, 32, { /** scale */ d: f16, /** nibbles */ qs: [u8; 16] });
block!(
    /// Q4_1: 32 weights `d * q + m`.
    BlockQ4_1, Q4_1, 20, 32, { /** scale */ d: f16, /** minimum */ m: f16, /** nibbles */ qs: [u8; 16] });
block!(
    /// Q5_0: 32 weights `d * (q - 16)`, q 5-bit: low nibble in `qs`, fifth bit j of `qh` (LE u32).
    BlockQ5_0, Q5_0, 22, 32, { /** scale */ d: f16, /** fifth bits */ qh: [u8; 4], /** nibbles */ qs: [u8; 16] });
block!(
    /// Q5_1: 32 weights `d * q + m`, q 5-bit.
    BlockQ5_1, Q5_1, 24, 32, { /** scale */ d: f16, /** minimum */ m: f16, /** fifth bits */ qh: [u8; 4], /** nibbles */ qs: [u8; 16] });
block!(
    /// Q8_0: 32 weights `d * q`, q an i8.
    BlockQ8_0, Q8_0, 34, 32, { /** scale */ d: f16, /** values */ qs: [i8; 32] });
block!(
    /// Q8_1: Q8_0 plus `s = d * sum(q)`, the activation type of Q4_1/Q5_1 dot products.
    BlockQ8_1, Q8_1, 36, 32, { /** scale */ d: f16, /** d * sum(qs) */ s: f16, /** values */ qs: [i8; 32] });
block!(
    /// Q2_K: 16 sub-blocks of 16, `d * (sc & 15) * q - dmin * (sc >> 4)`, q 2-bit.
    BlockQ2K, Q2_K, 84, QK_K, { /** 4-bit scale and 4-bit min per sub-block */ scales: [u8; 16], /** 2-bit values */ qs: [u8; 64], /** super-scale */ d: f16, /** super-scale of mins */ dmin: f16 });
block!(
    /// Q3_K: 16 sub-blocks of 16, `d * (sc - 32) * (q - 4 * !hbit)`, 6-bit packed scales.
    BlockQ3K, Q3_K, 110, QK_K, { /** high bits */ hmask: [u8; 32], /** low 2 bits */ qs: [u8; 64], /** packed 6-bit scales */ scales: [u8; 12], /** super-scale */ d: f16 });
block!(
    /// Q4_K: 8 sub-blocks of 32, `d * sc * q - dmin * m`, 6-bit scales and mins.
    BlockQ4K, Q4_K, 144, QK_K, { /** super-scale */ d: f16, /** super-scale of mins */ dmin: f16, /** packed scales and mins */ scales: [u8; 12], /** nibbles */ qs: [u8; 128] });
block!(
    /// Q5_K: Q4_K with a fifth bit per value.
    BlockQ5K, Q5_K, 176, QK_K, { /** super-scale */ d: f16, /** super-scale of mins */ dmin: f16, /** packed scales and mins */ scales: [u8; 12], /** fifth bits */ qh: [u8; 32], /** nibbles */ qs: [u8; 128] });
block!(
    /// Q6_K: 16 sub-blocks of 16, `d * sc * (q - 32)`, q 6-bit.
    BlockQ6K, Q6_K, 210, QK_K, { /** low 4 bits */ ql: [u8; 128], /** high 2 bits */ qh: [u8; 64], /** 8-bit scales */ scales: [i8; 16], /** super-scale */ d: f16 });
block!(
    /// Q8_K: 256 i8 values with an f32 scale and per-16 sums, the activation type of K-quant dots.
    BlockQ8K, Q8_K, 292, QK_K, { /** scale */ d: f32, /** values */ qs: [i8; 256], /** sums of each 16 values */ bsums: [i16; 16] });
block!(
    /// IQ2_XXS: 2.06 bits per weight from an E8 lattice grid.
    BlockIq2Xxs, IQ2_XXS, 66, QK_K, { /** scale */ d: f16, /** grid indices, signs and scales */ qs: [u16; 32] });
block!(
    /// IQ2_XS: 2.31 bits per weight.
    BlockIq2Xs, IQ2_XS, 74, QK_K, { /** scale */ d: f16, /** grid indices and signs */ qs: [u16; 32], /** 4-bit scales */ scales: [u8; 8] });
block!(
    /// IQ2_S: 2.5 bits per weight.
    BlockIq2S, IQ2_S, 82, QK_K, { /** scale */ d: f16, /** grid indices (low 8 bits), then signs */ qs: [u8; 64], /** high index bits */ qh: [u8; 8], /** 4-bit scales */ scales: [u8; 8] });
block!(
    /// IQ3_XXS: 3.06 bits per weight.
    BlockIq3Xxs, IQ3_XXS, 98, QK_K, { /** scale */ d: f16, /** grid indices, then signs and scales */ qs: [u8; 96] });
block!(
    /// IQ3_S: 3.44 bits per weight.
    BlockIq3S, IQ3_S, 110, QK_K, { /** scale */ d: f16, /** grid indices (low 8 bits) */ qs: [u8; 64], /** high index bits */ qh: [u8; 8], /** signs */ signs: [u8; 32], /** 4-bit scales */ scales: [u8; 4] });
block!(
    /// IQ1_S: 1.56 bits per weight.
    BlockIq1S, IQ1_S, 50, QK_K, { /** scale */ d: f16, /** grid indices (low 8 bits) */ qs: [u8; 32], /** high index bits, scales and delta signs */ qh: [u16; 8] });
block!(
    /// IQ1_M: 1.75 bits per weight; the f16 scale is spread over the top nibbles of `scales`.
    BlockIq1M, IQ1_M, 56, QK_K, { /** grid indices (low 8 bits) */ qs: [u8; 32], /** high index bits and delta signs */ qh: [u8; 16], /** 3-bit scales and the super-scale */ scales: [u8; 8] });
block!(
    /// IQ4_NL: 32 weights `d * kvalues[q]` on a non-linear 4-bit grid.
    BlockIq4Nl, IQ4_NL, 18, 32, { /** scale */ d: f16, /** nibbles */ qs: [u8; 16] });
block!(
    /// IQ4_XS: IQ4_NL with 6-bit sub-block scales in a 256-element super-block.
    BlockIq4Xs, IQ4_XS, 136, QK_K, { /** super-scale */ d: f16, /** high 2 bits of the scales */ scales_h: u16, /** low 4 bits of the scales */ scales_l: [u8; 4], /** nibbles */ qs: [u8; 128] });
block!(
    /// TQ1_0: ternary, five trits per byte (base-3) plus four per byte in `qh`.
    BlockTq1_0, TQ1_0, 54, QK_K, { /** 5 trits per byte */ qs: [u8; 48], /** 4 trits per byte */ qh: [u8; 4], /** scale */ d: f16 });
block!(
    /// TQ2_0: ternary, 2 bits per value (`q - 1`).
    BlockTq2_0, TQ2_0, 66, QK_K, { /** 2-bit values */ qs: [u8; 64], /** scale */ d: f16 });
block!(
    /// MXFP4: 32 E2M1 values with a shared E8M0 exponent.
    BlockMxfp4, MXFP4, 17, 32, { /** E8M0 exponent */ e: u8, /** nibbles */ qs: [u8; 16] });
block!(
    /// NVFP4: 64 E2M1 values, four sub-blocks of 16 each with an unsigned E4M3 scale.
    BlockNvfp4, NVFP4, 36, 64, { /** UE4M3 scales */ d: [u8; 4], /** nibbles */ qs: [u8; 32] });
block!(
    /// Q1_0: 128 weights `d * (2 * bit - 1)`.
    BlockQ1_0, Q1_0, 18, 128, { /** scale */ d: f16, /** one bit per weight, LSB first */ qs: [u8; 16] });
block!(
    /// Q2_0: 64 weights `d * (q - 1)`, q 2-bit, LSB first.
    BlockQ2_0, Q2_0, 18, 64, { /** scale */ d: f16, /** four 2-bit values per byte */ qs: [u8; 16] });

#[cfg(test)]
mod tests {
    use super::*;

    /// A few field ranges against `docs/quant.md`'s layout table (ggml-common.h).
    #[test]
    fn field_ranges_match_the_documented_layouts() {
        assert_eq!(field!(BlockQ4_0.qs), 2..18);
        assert_eq!(field!(BlockQ5_1.qh), 4..8);
        assert_eq!(field!(BlockQ2K.dmin), 82..84);
        assert_eq!(field!(BlockQ5K.qs), 48..176);
        assert_eq!(field!(BlockQ6K.scales), 192..208);
        assert_eq!(field!(BlockQ8K.bsums), 260..292);
        assert_eq!(field!(BlockIq3S.signs), 74..106);
        assert_eq!(field!(BlockTq1_0.d), 52..54);
        assert_eq!(<BlockNvfp4 as Block>::ELEMENTS, 64);
    }
}
