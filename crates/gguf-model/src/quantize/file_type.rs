//! llama-quantize's file types: names, ids and default tensor types.

use gguf_format::GgmlType;

/// A file type (`general.file_type`, llama.cpp's `llama_ftype`), with the names
/// `llama-quantize` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types, missing_docs)]
pub enum FileType {
    AllF32 = 0,
    F16 = 1,
    Q4_0 = 2,
    Q4_1 = 3,
    Q8_0 = 7,
    Q5_0 = 8,
    Q5_1 = 9,
    Q2_K = 10,
    Q3_K_S = 11,
    Q3_K_M = 12,
    Q3_K_L = 13,
    Q4_K_S = 14,
    Q4_K_M = 15,
    Q5_K_S = 16,
    Q5_K_M = 17,
    Q6_K = 18,
    IQ2_XXS = 19,
    IQ2_XS = 20,
    Q2_K_S = 21,
    IQ3_XS = 22,
    IQ3_XXS = 23,
    IQ1_S = 24,
    IQ4_NL = 25,
    IQ3_S = 26,
    IQ3_M = 27,
    IQ2_S = 28,
    IQ2_M = 29,
    IQ4_XS = 30,
    IQ1_M = 31,
    BF16 = 32,
    TQ1_0 = 36,
    TQ2_0 = 37,
    MXFP4_MOE = 38,
    Q1_0 = 40,
    Q2_0 = 41,
}

/// llama-quantize's names, in its order (aliases after the names they stand for).
const NAMES: &[(&str, FileType)] = &[
    ("Q1_0", FileType::Q1_0),
    ("Q2_0", FileType::Q2_0),
    ("Q4_0", FileType::Q4_0),
    ("Q4_1", FileType::Q4_1),
    ("MXFP4_MOE", FileType::MXFP4_MOE),
    ("Q5_0", FileType::Q5_0),
    ("Q5_1", FileType::Q5_1),
    ("IQ2_XXS", FileType::IQ2_XXS),
    ("IQ2_XS", FileType::IQ2_XS),
    ("IQ2_S", FileType::IQ2_S),
    ("IQ2_M", FileType::IQ2_M),
    ("IQ1_S", FileType::IQ1_S),
    ("IQ1_M", FileType::IQ1_M),
    ("TQ1_0", FileType::TQ1_0),
    ("TQ2_0", FileType::TQ2_0),
    ("Q2_K", FileType::Q2_K),
    ("Q2_K_S", FileType::Q2_K_S),
    ("IQ3_XXS", FileType::IQ3_XXS),
    ("IQ3_S", FileType::IQ3_S),
    ("IQ3_M", FileType::IQ3_M),
    ("Q3_K", FileType::Q3_K_M),
    ("IQ3_XS", FileType::IQ3_XS),
    ("Q3_K_S", FileType::Q3_K_S),
    ("Q3_K_M", FileType::Q3_K_M),
    ("Q3_K_L", FileType::Q3_K_L),
    ("IQ4_NL", FileType::IQ4_NL),
    ("IQ4_XS", FileType::IQ4_XS),
    ("Q4_K", FileType::Q4_K_M),
    ("Q4_K_S", FileType::Q4_K_S),
    ("Q4_K_M", FileType::Q4_K_M),
    ("Q5_K", FileType::Q5_K_M),
    ("Q5_K_S", FileType::Q5_K_S),
    ("Q5_K_M", FileType::Q5_K_M),
    ("Q6_K", FileType::Q6_K),
    ("Q8_0", FileType::Q8_0),
    ("F16", FileType::F16),
    ("BF16", FileType::BF16),
    ("F32", FileType::AllF32),
];

impl FileType {
    /// The file type of a llama-quantize name (any case; the aliases `Q3_K`, `Q4_K` and
    /// `Q5_K` are the `_M` mixtures) or of its number.
    pub fn from_name(name: &str) -> Option<FileType> {
        NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|&(_, t)| t)
            .or_else(|| {
                let id: u32 = name.parse().ok()?;
                NAMES.iter().map(|&(_, t)| t).find(|t| t.id() == id)
            })
    }

    /// The canonical name (`Q4_K_M`, `F32`, ...).
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .rev()
            .find(|&&(_, t)| t == self)
            .map_or("?", |&(n, _)| n)
    }

    /// Every name llama-quantize accepts, aliases included.
    pub fn names() -> impl Iterator<Item = &'static str> {
        NAMES.iter().map(|&(n, _)| n)
    }

    /// The number written as `general.file_type`.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// The type of the tensors the mixture's rules do not change.
    pub fn default_type(self) -> GgmlType {
        use FileType as F;
        use GgmlType as G;
        match self {
            F::Q4_0 => G::Q4_0,
            F::Q4_1 => G::Q4_1,
            F::Q5_0 => G::Q5_0,
            F::Q5_1 => G::Q5_1,
            F::Q8_0 => G::Q8_0,
            F::F16 => G::F16,
            F::BF16 => G::BF16,
            F::AllF32 => G::F32,
            F::Q1_0 => G::Q1_0,
            F::Q2_0 => G::Q2_0,
            F::MXFP4_MOE => G::MXFP4,
            F::Q2_K_S | F::Q2_K => G::Q2_K,
            F::IQ3_XS => G::IQ3_S,
            F::Q3_K_S | F::Q3_K_M | F::Q3_K_L => G::Q3_K,
            F::Q4_K_S | F::Q4_K_M => G::Q4_K,
            F::Q5_K_S | F::Q5_K_M => G::Q5_K,
            F::Q6_K => G::Q6_K,
            F::TQ1_0 => G::TQ1_0,
            F::TQ2_0 => G::TQ2_0,
            F::IQ2_XXS => G::IQ2_XXS,
            F::IQ2_XS | F::IQ2_S => G::IQ2_XS,
            F::IQ2_M => G::IQ2_S,
            F::IQ3_XXS => G::IQ3_XXS,
            F::IQ1_S => G::IQ1_S,
            F::IQ1_M => G::IQ1_M,
            F::IQ4_NL => G::IQ4_NL,
            F::IQ4_XS => G::IQ4_XS,
            F::IQ3_S | F::IQ3_M => G::IQ3_S,
        }
    }
}
