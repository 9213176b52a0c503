//! The quantized block layouts of the legacy formats, and how they become today's.
//!
//! Three eras, read from the ggml sources each container shipped with:
//! - **GGML, GGMF and GGJT v1** ("shuffled"): Q4_0 `{f32 d; u8 qs[16]}`, Q4_1
//!   `{f32 d; f32 m; u8 qs[16]}`, Q8_0 `{f32 d; i8 qs[32]}`, and with f16 scales Q5_0
//!   `{f16 d; u8 qh[4]; u8 qs[16]}`, Q5_1 `{f16 d; f16 m; u8 qh[4]; u8 qs[16]}`, and the
//!   16-value Q4_2 `{f16 d; u8 qs[8]}` and Q4_3 `{f16 d; f16 m; u8 qs[8]}`. Byte `j` of `qs`
//!   holds elements `2j` (low nibble) and `2j + 1` (high nibble).
//! - **GGJT v2** (ggml's "remove bit shuffling"): byte `j` holds elements `j` and `j + 16`, as
//!   today; Q4_0, Q4_1 and Q8_0 keep their f32 scales; Q4_2 and Q4_3 are gone.
//! - **GGJT v3**: today's layouts (f16 scales everywhere), K-quants added.
//!
//! In every era bit `i` of Q5's `qh` is the fifth bit of element `i`, and an element's value is
//! `d · (q - offset)` or `d · q + m`: the formulas of today's dequantizers. So a block converts
//! exactly when its scales are f16 values: its codes are reordered into today's nibble order
//! and its scales narrowed. A block whose f32 scale is not an f16 cannot keep its type without
//! changing its values; its tensor is then written as F32 (every value exact), unless the
//! caller asks for the scales to be rounded ([`ScalePolicy::Round`]).

use half::f16;

/// A legacy container's era of block layouts (see the module's comment).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Era {
    /// GGML, GGMF, GGJT v1.
    Shuffled,
    /// GGJT v2.
    F32Scales,
    /// GGJT v3.
    Current,
}

/// What to do with an f32 scale that is not an f16 value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ScalePolicy {
    /// Write the tensor as F32, every value exactly the old block's (the default).
    #[default]
    Exact,
    /// Round the scale to the nearest f16 and keep the quantized type (smaller; values change
    /// by the scale's rounding, at most 2^-11 relative).
    Round,
}

/// A quantized type of the legacy formats (whose block layout depends on the era).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OldQuant {
    /// 32 values, `d · (q - 8)`.
    Q4_0,
    /// 32 values, `d · q + m`.
    Q4_1,
    /// 16 values, `d · (q - 8)` (GGJT v1 only).
    Q4_2,
    /// 16 values, `d · q + m` (GGJT v1 only).
    Q4_3,
    /// 32 values, `d · (q - 16)` with a fifth bit.
    Q5_0,
    /// 32 values, `d · q + m` with a fifth bit.
    Q5_1,
    /// 32 values, `d · q`.
    Q8_0,
}

impl OldQuant {
    /// The quantized type of a legacy type id (2 Q4_0, 3 Q4_1, 4 Q4_2, 5 Q4_3, 6 Q5_0, 7 Q5_1,
    /// 8 Q8_0), if it is one of these.
    pub fn from_id(id: u32) -> Option<OldQuant> {
        Some(match id {
            2 => OldQuant::Q4_0,
            3 => OldQuant::Q4_1,
            4 => OldQuant::Q4_2,
            5 => OldQuant::Q4_3,
            6 => OldQuant::Q5_0,
            7 => OldQuant::Q5_1,
            8 => OldQuant::Q8_0,
            _ => return None,
        })
    }

    /// Elements per block.
    pub(crate) fn block_len(self) -> usize {
        match self {
            OldQuant::Q4_2 | OldQuant::Q4_3 => 16,
            _ => 32,
        }
    }

    /// Bytes per block in `era`.
    pub(crate) fn block_bytes(self, era: Era) -> usize {
        let f32_scales = era != Era::Current;
        match self {
            OldQuant::Q4_0 if f32_scales => 4 + 16,
            OldQuant::Q4_0 => 2 + 16,
            OldQuant::Q4_1 if f32_scales => 8 + 16,
            OldQuant::Q4_1 => 4 + 16,
            OldQuant::Q8_0 if f32_scales => 4 + 32,
            OldQuant::Q8_0 => 2 + 32,
            OldQuant::Q4_2 => 2 + 8,
            OldQuant::Q4_3 => 4 + 8,
            OldQuant::Q5_0 => 2 + 4 + 16,
            OldQuant::Q5_1 => 4 + 4 + 16,
        }
    }

    /// Whether `era`'s files hold this type.
    pub(crate) fn exists_in(self, era: Era) -> bool {
        match self {
            OldQuant::Q4_2 | OldQuant::Q4_3 => era == Era::Shuffled,
            _ => true,
        }
    }

    /// Today's type with this type's values, if it still exists.
    pub(crate) fn today(self) -> Option<gguf_format::GgmlType> {
        use gguf_format::GgmlType as T;
        Some(match self {
            OldQuant::Q4_0 => T::Q4_0,
            OldQuant::Q4_1 => T::Q4_1,
            OldQuant::Q5_0 => T::Q5_0,
            OldQuant::Q5_1 => T::Q5_1,
            OldQuant::Q8_0 => T::Q8_0,
            OldQuant::Q4_2 | OldQuant::Q4_3 => return None,
        })
    }

    /// Whether `era`'s blocks of this type are today's byte for byte.
    pub(crate) fn unchanged_in(self, era: Era) -> bool {
        match era {
            Era::Current => true,
            Era::F32Scales => matches!(self, OldQuant::Q5_0 | OldQuant::Q5_1),
            Era::Shuffled => false,
        }
    }
}

/// One legacy block, decoded: the element codes in element order, the scale and the minimum
/// (for the types with one); the value of element `i` is `d · (codes[i] - offset)`, or
/// `d · codes[i] + m`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Block {
    pub(crate) codes: [u8; 32],
    pub(crate) len: usize,
    pub(crate) d: f32,
    pub(crate) m: Option<f32>,
}

fn f32_at(b: &[u8], at: usize) -> f32 {
    f32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn f16_at(b: &[u8], at: usize) -> f32 {
    f16::from_le_bytes([b[at], b[at + 1]]).to_f32()
}

/// The nibbles of `qs` in element order: interleaved (`shuffled`: byte j holds elements 2j,
/// 2j + 1) or split (byte j holds j and j + n/2), into `codes[..2 * qs.len()]`.
fn unpack_nibbles(qs: &[u8], shuffled: bool, codes: &mut [u8; 32]) {
    let half = qs.len();
    for (j, &q) in qs.iter().enumerate() {
        let (lo, hi) = (q & 0x0F, q >> 4);
        if shuffled {
            codes[2 * j] = lo;
            codes[2 * j + 1] = hi;
        } else {
            codes[j] = lo;
            codes[j + half] = hi;
        }
    }
}

impl Block {
    /// Decodes the block `b` (exactly `ty.block_bytes(era)` bytes) of type `ty` in `era`.
    pub(crate) fn decode(ty: OldQuant, era: Era, b: &[u8]) -> Block {
        let shuffled = era == Era::Shuffled;
        let f32_scales = era != Era::Current;
        let mut codes = [0u8; 32];
        let (len, d, m) = match ty {
            OldQuant::Q4_0 | OldQuant::Q4_1 => {
                let (d, m, qs) = match (ty, f32_scales) {
                    (OldQuant::Q4_0, true) => (f32_at(b, 0), None, &b[4..20]),
                    (OldQuant::Q4_0, false) => (f16_at(b, 0), None, &b[2..18]),
                    (_, true) => (f32_at(b, 0), Some(f32_at(b, 4)), &b[8..24]),
                    (_, false) => (f16_at(b, 0), Some(f16_at(b, 2)), &b[4..20]),
                };
                unpack_nibbles(qs, shuffled, &mut codes);
                (32, d, m)
            }
            OldQuant::Q4_2 => {
                unpack_nibbles(&b[2..10], true, &mut codes);
                (16, f16_at(b, 0), None)
            }
            OldQuant::Q4_3 => {
                unpack_nibbles(&b[4..12], true, &mut codes);
                (16, f16_at(b, 0), Some(f16_at(b, 2)))
            }
            OldQuant::Q5_0 | OldQuant::Q5_1 => {
                let (d, m, at) = if ty == OldQuant::Q5_0 {
                    (f16_at(b, 0), None, 2)
                } else {
                    (f16_at(b, 0), Some(f16_at(b, 2)), 4)
                };
                let qh = u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
                unpack_nibbles(&b[at + 4..at + 20], shuffled, &mut codes);
                for (i, c) in codes.iter_mut().enumerate() {
                    *c |= (((qh >> i) & 1) << 4) as u8;
                }
                (32, d, m)
            }
            OldQuant::Q8_0 => {
                let (d, qs) = if f32_scales {
                    (f32_at(b, 0), &b[4..36])
                } else {
                    (f16_at(b, 0), &b[2..34])
                };
                codes.copy_from_slice(qs);
                (32, d, None)
            }
        };
        Block { codes, len, d, m }
    }

    /// The value of each element, in f32 as today's dequantizers compute it.
    pub(crate) fn values(&self, ty: OldQuant, out: &mut [f32]) {
        for (y, &c) in out.iter_mut().zip(&self.codes[..self.len]) {
            *y = match (ty, self.m) {
                (OldQuant::Q8_0, _) => f32::from(c as i8) * self.d,
                (_, Some(m)) => self.d * f32::from(c) + m,
                (OldQuant::Q5_0, None) => self.d * f32::from(c as i8 - 16),
                (_, None) => self.d * f32::from(c as i8 - 8),
            };
        }
    }

    /// Whether the scale (and minimum) are f16 values, so that today's block holds them.
    pub(crate) fn fits_f16(&self) -> bool {
        let exact = |x: f32| f16::from_f32(x).to_f32().to_bits() == x.to_bits();
        exact(self.d) && self.m.is_none_or(exact)
    }

    /// Today's block of `ty` (one of the types [`OldQuant::today`] has) into `out`, the scales
    /// rounded to f16.
    pub(crate) fn encode_today(&self, ty: OldQuant, out: &mut Vec<u8>) {
        let h = |x: f32| f16::from_f32(x).to_le_bytes();
        out.extend_from_slice(&h(self.d));
        if let Some(m) = self.m {
            out.extend_from_slice(&h(m));
        }
        let nibbles = |out: &mut Vec<u8>| {
            for j in 0..16 {
                out.push((self.codes[j] & 0x0F) | ((self.codes[j + 16] & 0x0F) << 4));
            }
        };
        match ty {
            OldQuant::Q8_0 => out.extend_from_slice(&self.codes),
            OldQuant::Q5_0 | OldQuant::Q5_1 => {
                let qh = (0..32).fold(0u32, |qh, i| qh | (u32::from(self.codes[i] >> 4) << i));
                out.extend_from_slice(&qh.to_le_bytes());
                nibbles(out);
            }
            _ => nibbles(out),
        }
    }
}
