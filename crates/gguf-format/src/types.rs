//! ggml's tensor types: ids, names, block sizes and bytes per block.
//!
//! The numbers are the ones ggml and the `gguf` Python package use; a tensor's byte size is
//! `elements / block_size * type_size`, and each row (`ne[0]` elements) must be a whole number of
//! blocks.

use std::fmt;

macro_rules! ggml_types {
    ($( $(#[$doc:meta])* $variant:ident = $id:literal, $name:literal, $block:literal, $size:literal; )*) => {
        /// A ggml tensor type as stored in a GGUF tensor info.
        ///
        /// ```
        /// use gguf_format::GgmlType;
        /// let t = GgmlType::from_id(12).unwrap();
        /// assert_eq!(t, GgmlType::Q4_K);
        /// assert_eq!((t.name(), t.block_size(), t.type_size()), ("Q4_K", 256, 144));
        /// assert_eq!(t.row_size(4096), Some(4096 / 256 * 144));
        /// ```
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u32)]
        pub enum GgmlType {
            $( $(#[$doc])* $variant = $id, )*
        }

        impl GgmlType {
            /// Every type ggml currently defines, in id order.
            pub const ALL: &'static [GgmlType] = &[ $( GgmlType::$variant, )* ];

            /// The type for a live id; `None` for ids never defined or retired
            /// (see [`GgmlType::from_id`] for the reason).
            pub const fn from_id_opt(id: u32) -> Option<GgmlType> {
                match id {
                    $( $id => Some(GgmlType::$variant), )*
                    _ => None,
                }
            }

            /// ggml's name for the type (`"Q4_K"`, `"F32"`, ...).
            pub const fn name(self) -> &'static str {
                match self { $( GgmlType::$variant => $name, )* }
            }

            /// Elements per block (1 for plain types).
            pub const fn block_size(self) -> u64 {
                match self { $( GgmlType::$variant => $block, )* }
            }

            /// Bytes per block.
            pub const fn type_size(self) -> u64 {
                match self { $( GgmlType::$variant => $size, )* }
            }
        }
    };
}

ggml_types! {
    /// 32-bit IEEE float.
    F32 = 0, "F32", 1, 4;
    /// 16-bit IEEE float.
    F16 = 1, "F16", 1, 2;
    /// 4-bit, 32 per block, f16 scale.
    Q4_0 = 2, "Q4_0", 32, 18;
    /// 4-bit, 32 per block, f16 scale and min.
    Q4_1 = 3, "Q4_1", 32, 20;
    /// 5-bit, 32 per block, f16 scale.
    Q5_0 = 6, "Q5_0", 32, 22;
    /// 5-bit, 32 per block, f16 scale and min.
    Q5_1 = 7, "Q5_1", 32, 24;
    /// 8-bit, 32 per block, f16 scale.
    Q8_0 = 8, "Q8_0", 32, 34;
    /// 8-bit, 32 per block, f16 scale and f16 sum (activations).
    Q8_1 = 9, "Q8_1", 32, 36;
    /// 2-bit K-quant, 256 per super-block.
    Q2_K = 10, "Q2_K", 256, 84;
    /// 3-bit K-quant.
    Q3_K = 11, "Q3_K", 256, 110;
    /// 4-bit K-quant.
    Q4_K = 12, "Q4_K", 256, 144;
    /// 5-bit K-quant.
    Q5_K = 13, "Q5_K", 256, 176;
    /// 6-bit K-quant.
    Q6_K = 14, "Q6_K", 256, 210;
    /// 8-bit K-quant (activations of K-quant dot products).
    Q8_K = 15, "Q8_K", 256, 292;
    /// 2.06 bpw i-quant.
    IQ2_XXS = 16, "IQ2_XXS", 256, 66;
    /// 2.31 bpw i-quant.
    IQ2_XS = 17, "IQ2_XS", 256, 74;
    /// 3.06 bpw i-quant.
    IQ3_XXS = 18, "IQ3_XXS", 256, 98;
    /// 1.56 bpw i-quant.
    IQ1_S = 19, "IQ1_S", 256, 50;
    /// 4-bit non-linear, 32 per block.
    IQ4_NL = 20, "IQ4_NL", 32, 18;
    /// 3.44 bpw i-quant.
    IQ3_S = 21, "IQ3_S", 256, 110;
    /// 2.5 bpw i-quant.
    IQ2_S = 22, "IQ2_S", 256, 82;
    /// 4.25 bpw non-linear.
    IQ4_XS = 23, "IQ4_XS", 256, 136;
    /// 8-bit integer.
    I8 = 24, "I8", 1, 1;
    /// 16-bit integer.
    I16 = 25, "I16", 1, 2;
    /// 32-bit integer.
    I32 = 26, "I32", 1, 4;
    /// 64-bit integer.
    I64 = 27, "I64", 1, 8;
    /// 64-bit IEEE float.
    F64 = 28, "F64", 1, 8;
    /// 1.75 bpw i-quant.
    IQ1_M = 29, "IQ1_M", 256, 56;
    /// bfloat16.
    BF16 = 30, "BF16", 1, 2;
    /// Ternary, 1.69 bpw.
    TQ1_0 = 34, "TQ1_0", 256, 54;
    /// Ternary, 2.06 bpw.
    TQ2_0 = 35, "TQ2_0", 256, 66;
    /// Microscaling FP4 (E2M1 values, E8M0 scale), 32 per block.
    MXFP4 = 39, "MXFP4", 32, 17;
    /// NVIDIA FP4 (E2M1 values, four E4M3 scales), 64 per block.
    NVFP4 = 40, "NVFP4", 64, 36;
    /// 1-bit, 128 per block, f16 scale.
    Q1_0 = 41, "Q1_0", 128, 18;
    /// 2-bit, 64 per block, f16 scale.
    Q2_0 = 42, "Q2_0", 64, 18;
}

/// Why an id is not a live [`GgmlType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeIdError {
    /// ggml never defined this id.
    Unknown,
    /// ggml defined this id once and removed it.
    Retired {
        /// Its former name.
        name: &'static str,
        /// What to use instead.
        replacement: &'static str,
    },
}

impl GgmlType {
    /// The type for `id`, or why there is none.
    ///
    /// ```
    /// use gguf_format::{GgmlType, TypeIdError};
    /// assert!(matches!(GgmlType::from_id(31), Err(TypeIdError::Retired { name: "Q4_0_4_4", .. })));
    /// assert_eq!(GgmlType::from_id(1000), Err(TypeIdError::Unknown));
    /// ```
    pub const fn from_id(id: u32) -> Result<GgmlType, TypeIdError> {
        if let Some(t) = GgmlType::from_id_opt(id) {
            return Ok(t);
        }
        const REPACKED: &str = "ggml now repacks Q4_0 at load time: requantize the model to Q4_0";
        const REPACKED_NL: &str =
            "ggml now repacks IQ4_NL at load time: requantize the model to IQ4_NL";
        const Q4_2_3: &str =
            "it was dropped in 2023 (ggml quantization version 2): requantize from the original weights";
        match id {
            4 => Err(TypeIdError::Retired {
                name: "Q4_2",
                replacement: Q4_2_3,
            }),
            5 => Err(TypeIdError::Retired {
                name: "Q4_3",
                replacement: Q4_2_3,
            }),
            31 => Err(TypeIdError::Retired {
                name: "Q4_0_4_4",
                replacement: REPACKED,
            }),
            32 => Err(TypeIdError::Retired {
                name: "Q4_0_4_8",
                replacement: REPACKED,
            }),
            33 => Err(TypeIdError::Retired {
                name: "Q4_0_8_8",
                replacement: REPACKED,
            }),
            36 => Err(TypeIdError::Retired {
                name: "IQ4_NL_4_4",
                replacement: REPACKED_NL,
            }),
            37 => Err(TypeIdError::Retired {
                name: "IQ4_NL_4_8",
                replacement: REPACKED_NL,
            }),
            38 => Err(TypeIdError::Retired {
                name: "IQ4_NL_8_8",
                replacement: REPACKED_NL,
            }),
            _ => Err(TypeIdError::Unknown),
        }
    }

    /// The id stored in files.
    pub const fn id(self) -> u32 {
        self as u32
    }

    /// Looks a type up by its ggml name, ignoring ASCII case (`"q4_k"` finds `Q4_K`).
    pub fn from_name(name: &str) -> Option<GgmlType> {
        GgmlType::ALL
            .iter()
            .copied()
            .find(|t| t.name().eq_ignore_ascii_case(name))
    }

    /// Whether the type packs values in blocks with scales (everything but plain floats and ints).
    pub const fn is_quantized(self) -> bool {
        self.block_size() > 1
    }

    /// Bytes of one row of `ne0` elements; `None` when `ne0` is not a whole number of blocks
    /// or the size overflows.
    pub const fn row_size(self, ne0: u64) -> Option<u64> {
        if !ne0.is_multiple_of(self.block_size()) {
            return None;
        }
        (ne0 / self.block_size()).checked_mul(self.type_size())
    }

    /// Bytes of a tensor of `shape` (ggml order, `ne[0]` first); `None` when a row is not a
    /// whole number of blocks or the size overflows `u64`.
    ///
    /// ```
    /// use gguf_format::GgmlType;
    /// assert_eq!(GgmlType::Q8_0.tensor_size(&[64, 3]), Some(2 * 34 * 3));
    /// assert_eq!(GgmlType::Q8_0.tensor_size(&[33, 3]), None);
    /// ```
    pub fn tensor_size(self, shape: &[u64]) -> Option<u64> {
        let ne0 = shape.first().copied().unwrap_or(1);
        let mut size = self.row_size(ne0)?;
        for &n in shape.iter().skip(1) {
            size = size.checked_mul(n)?;
        }
        Some(size)
    }
}

impl fmt::Display for GgmlType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_are_sorted() {
        let mut last = None;
        for &t in GgmlType::ALL {
            assert_eq!(GgmlType::from_id(t.id()), Ok(t));
            assert_eq!(GgmlType::from_name(t.name()), Some(t));
            assert!(last < Some(t.id()));
            last = Some(t.id());
        }
        assert_eq!(GgmlType::ALL.len(), 35);
    }

    #[test]
    fn sizes_match_ggml() {
        // (type, block size, bytes) as in ggml's type traits.
        let expected = [
            (GgmlType::Q4_0, 32, 18),
            (GgmlType::Q5_1, 32, 24),
            (GgmlType::Q8_1, 32, 36),
            (GgmlType::Q2_K, 256, 84),
            (GgmlType::Q3_K, 256, 110),
            (GgmlType::Q6_K, 256, 210),
            (GgmlType::Q8_K, 256, 292),
            (GgmlType::IQ1_S, 256, 50),
            (GgmlType::IQ1_M, 256, 56),
            (GgmlType::IQ4_XS, 256, 136),
            (GgmlType::TQ1_0, 256, 54),
            (GgmlType::MXFP4, 32, 17),
            (GgmlType::NVFP4, 64, 36),
            (GgmlType::Q1_0, 128, 18),
            (GgmlType::Q2_0, 64, 18),
        ];
        for (t, b, s) in expected {
            assert_eq!((t.block_size(), t.type_size()), (b, s), "{t}");
        }
    }

    #[test]
    fn retired_and_unknown_ids() {
        for id in [4, 5, 31, 32, 33, 36, 37, 38] {
            assert!(
                matches!(GgmlType::from_id(id), Err(TypeIdError::Retired { .. })),
                "{id}"
            );
        }
        for id in [43, 100, u32::MAX] {
            assert_eq!(GgmlType::from_id(id), Err(TypeIdError::Unknown));
        }
    }

    #[test]
    fn tensor_size_overflow_is_none() {
        assert_eq!(GgmlType::F32.tensor_size(&[u64::MAX, 2]), None);
        assert_eq!(GgmlType::F32.tensor_size(&[2, u64::MAX]), None);
        assert_eq!(GgmlType::F32.tensor_size(&[]), Some(4));
        assert_eq!(GgmlType::F16.tensor_size(&[0, 7]), Some(0));
    }
}
