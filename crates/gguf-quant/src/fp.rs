//! Small float formats: f16/bf16 (via `half`) and the FP4 family's scale encodings.

use half::f16;

/// Reads a little-endian f16 at `b[0..2]` as f32 (exact).
#[inline(always)]
pub(crate) fn f16_at(b: &[u8]) -> f32 {
    f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32()
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
