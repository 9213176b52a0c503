//! NEON dot products. Work in progress: no kernels yet.

use super::super::DotFn;
use crate::GgmlType;

/// Whether this CPU runs these kernels (NEON is part of every aarch64 Linux target).
pub(crate) fn available() -> bool {
    std::arch::is_aarch64_feature_detected!("neon")
}

/// The NEON kernel for weights of type `ty`, if there is one.
pub(crate) fn kernel(_ty: GgmlType) -> Option<DotFn> {
    None
}
