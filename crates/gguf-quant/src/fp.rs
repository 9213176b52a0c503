//! Small float formats: f16/bf16 (via `half`) and the FP4 family's scale encodings.

use half::f16;

/// The exact f32 bits of an f16 (subnormals, infinities and NaN payloads included; a
/// signalling NaN stays signalling, as in numpy's `astype(np.float32)`).
const fn f16_bits_to_f32_bits(h: u16) -> u32 {
    let sign = ((h & 0x8000) as u32) << 16;
    let exp = ((h >> 10) & 0x1F) as u32;
    let man = (h & 0x3FF) as u32;
    if exp == 0x1F {
        return sign | 0x7F80_0000 | (man << 13);
    }
    if exp != 0 {
        return sign | ((exp + 112) << 23) | (man << 13);
    }
    if man == 0 {
        return sign;
    }
    // Subnormal: shift the leading one into the implicit bit.
    let (mut e, mut m) = (113u32, man);
    while m & 0x400 == 0 {
        m <<= 1;
        e -= 1;
    }
    sign | (e << 23) | ((m & 0x3FF) << 13)
}

const fn build_f16_table() -> [f32; 65536] {
    let mut t = [0f32; 65536];
    let mut i = 0;
    while i < 65536 {
        t[i] = f32::from_bits(f16_bits_to_f32_bits(i as u16));
        i += 1;
    }
    t
}

/// Every f16 as f32, computed at compile time: a lookup is faster than converting in software
/// and, unlike F16C instructions, needs no CPU feature (ggml keeps the same table).
static F16_TO_F32: [f32; 65536] = build_f16_table();

/// An f16 (as raw bits) as f32, exactly.
#[inline(always)]
pub(crate) fn f16_to_f32(bits: u16) -> f32 {
    F16_TO_F32[bits as usize]
}

/// Reads a little-endian f16 at `b[0..2]` as f32 (exact).
#[inline(always)]
pub(crate) fn f16_at(b: &[u8]) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[0], b[1]]))
}

/// Rounds an f32 to the nearest f16 (ties to even), as ggml's `GGML_FP32_TO_FP16` and numpy's
/// `astype(np.float16)` do; returns its little-endian bytes.
#[inline(always)]
pub(crate) fn f16_bytes(x: f32) -> [u8; 2] {
    f16::from_f32(x).to_bits().to_le_bytes()
}

/// `ggml_e8m0_to_fp32_half`: 2^(e - 127) / 2, with the subnormal cases exact.
#[inline(always)]
pub(crate) fn e8m0_to_fp32_half(e: u8) -> f32 {
    let bits = if e < 2 {
        0x0020_0000u32 << e
    } else {
        (u32::from(e) - 1) << 23
    };
    f32::from_bits(bits)
}

/// `ggml_ue4m3_to_fp32` halved (the FP4 values are stored doubled): unsigned E4M3, bias 7;
/// 0 and 0x7F (NaN) decode to 0.
#[inline(always)]
pub(crate) fn ue4m3_to_fp32_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = i32::from((x >> 3) & 0xF);
    let man = f32::from(x & 0x7);
    let raw = if exp == 0 {
        man * (1.0 / 512.0)
    } else {
        (1.0 + man / 8.0) * f32::powi(2.0, exp - 7)
    };
    raw * 0.5
}

/// The E2M1 values of MXFP4 and NVFP4, doubled.
pub(crate) const KVALUES_FP4: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_table_matches_half_for_every_value() {
        for bits in 0..=u16::MAX {
            let ours = f16_to_f32(bits);
            let theirs = f16::from_bits(bits).to_f32();
            if theirs.is_nan() {
                // Signalling NaNs keep their payload unquieted, as numpy's conversion does
                // (`half` sets the quiet bit).
                assert!(ours.is_nan());
                assert_eq!(
                    ours.to_bits() | 0x0040_0000,
                    theirs.to_bits(),
                    "{bits:#06x}"
                );
            } else {
                assert_eq!(ours.to_bits(), theirs.to_bits(), "{bits:#06x}");
            }
        }
    }

    #[test]
    fn e8m0_matches_powers_of_two() {
        assert_eq!(e8m0_to_fp32_half(127), 0.5);
        assert_eq!(e8m0_to_fp32_half(128), 1.0);
        assert_eq!(e8m0_to_fp32_half(0), f32::from_bits(0x0020_0000));
        assert_eq!(e8m0_to_fp32_half(1), f32::from_bits(0x0040_0000));
        assert_eq!(e8m0_to_fp32_half(2), f32::from_bits(1 << 23));
    }

    #[test]
    fn ue4m3_known_values() {
        assert_eq!(ue4m3_to_fp32_half(0x38), 0.5); // exponent 7, mantissa 0: 1.0, halved
        assert_eq!(ue4m3_to_fp32_half(0x01), 0.5 / 512.0);
        assert_eq!(ue4m3_to_fp32_half(0x7E), 448.0 * 0.5);
        assert_eq!(ue4m3_to_fp32_half(0x7F), 0.0);
    }
}
