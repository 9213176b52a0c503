//! K-quant reference quantizers. Work in progress: no kernels yet.

use super::QuantFn;
use crate::GgmlType;

pub(super) fn kernel(_ty: GgmlType) -> Option<QuantFn> {
    None
}
