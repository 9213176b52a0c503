//! Fused dot products of a weight row (any ggml type) with an activation row quantized to the
//! type ggml pairs with it ([`vec_dot_type`]), and the mat-vec / mat-mat products built on them.
//!
//! Kernels live in per-ISA modules (`scalar`, `x86_64::avx2`, `aarch64::neon`); the best one the CPU supports is
//! chosen once, on first use, and cached. `GGUF_FORCE_SCALAR=1` forces the scalar kernels.
//! The scalar kernels follow ggml's generic C operation for operation; SIMD kernels sum in
//! another order and are tested against their scalar twins within a stated bound.

/// Defines a safe dot-product wrapper `$name` around an ISA module's
/// `unsafe fn $inner(blocks, w: *const u8, a: *const u8) -> f32` for weights of type `$w`
/// (activations of `vec_dot_type($w)`).
///
/// Each ISA module hands its wrappers out only through its `kernel()`, which returns them only
/// after `available()` confirmed the instruction set; the public entry points checked that `w`
/// and `a` hold exactly the blocks for `n` elements, and the assert below re-checks it.
macro_rules! safe_wrapper {
    ($name:ident, $inner:ident, $w:ident) => {
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            const W: crate::GgmlType = crate::GgmlType::$w;
            const A: crate::GgmlType = crate::kernels::vec_dot_type(W);
            let blocks = n / W.block_size() as usize;
            assert!(
                w.len() >= blocks * W.type_size() as usize
                    && a.len() >= blocks * A.type_size() as usize
            );
            // SAFETY: the CPU has the instruction set (see above), and the assert makes the
            // block count the kernel reads from each pointer a bound check, so even a wrong
            // caller cannot make it read out of bounds.
            unsafe { $inner(blocks, w.as_ptr(), a.as_ptr()) }
        }
    };
    // `$inner` is generic over the number of rows `R` it computes at once:
    // `unsafe fn $inner<const R: usize>(blocks, ws: [*const u8; R], ahead: usize, a) -> [f32; R]`
    // (`ahead`: the prefetch distance in bytes, 0 for none). `$name` computes one row with it;
    // `$rows` (a [`RowsFn`]) any number, `$group` at a time, prefetching the next group.
    ($name:ident, $inner:ident, $w:ident, rows: $rows:ident, group: $group:literal) => {
        fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            const W: crate::GgmlType = crate::GgmlType::$w;
            const A: crate::GgmlType = crate::kernels::vec_dot_type(W);
            let blocks = n / W.block_size() as usize;
            assert!(
                w.len() >= blocks * W.type_size() as usize
                    && a.len() >= blocks * A.type_size() as usize
            );
            // SAFETY: as in the one-row arm above.
            unsafe { $inner::<1>(blocks, [w.as_ptr()], 0, a.as_ptr())[0] }
        }

        fn $rows(n: usize, w: &[u8], row_bytes: usize, a: &[u8], out: &mut [f32]) {
            const W: crate::GgmlType = crate::GgmlType::$w;
            const A: crate::GgmlType = crate::kernels::vec_dot_type(W);
            const G: usize = $group;
            let blocks = n / W.block_size() as usize;
            let used = blocks * W.type_size() as usize;
            assert!(
                row_bytes >= used
                    && w.len() >= out.len().saturating_sub(1) * row_bytes + used
                    && a.len() >= blocks * A.type_size() as usize
            );
            let row = |r: usize| w[r * row_bytes..].as_ptr();
            let groups = out.len() / G;
            for g in 0..groups {
                let rows = std::array::from_fn(|k| row(G * g + k));
                // SAFETY: the CPU has the instruction set; the assert bounds each of the
                // group's rows (`used` bytes from its start) and the activations.
                let ys = unsafe { $inner::<G>(blocks, rows, G * row_bytes, a.as_ptr()) };
                out[G * g..G * g + G].copy_from_slice(&ys);
            }
            for r in groups * G..out.len() {
                // SAFETY: as above, for one of the last rows.
                out[r] = unsafe { $inner::<1>(blocks, [row(r)], 0, a.as_ptr())[0] };
            }
        }
    };
}

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod matmul;
mod scalar;
#[cfg(test)]
mod simd_tests;
#[cfg(target_arch = "x86_64")]
mod x86_64;

use std::sync::OnceLock;

use crate::error::{QuantError, Result};
use crate::{check_lengths, quantize_row, GgmlType};

pub use matmul::{matmul, matmul_on, matvec, matvec_on};

/// A dot-product kernel: `n` elements of weight blocks `w` against activation blocks `a`
/// (lengths checked by the caller).
pub(crate) type DotFn = fn(n: usize, w: &[u8], a: &[u8]) -> f32;

/// A kernel that computes `out.len()` dot products at once: rows `r` of `w`, `row_bytes` apart
/// (`n` elements each), against the activation blocks `a`. Each result equals the [`DotFn`]'s
/// for that row, bit for bit.
pub(crate) type RowsFn = fn(n: usize, w: &[u8], row_bytes: usize, a: &[u8], out: &mut [f32]);

/// The kernels for one weight type: one row at a time, and several when the ISA has that.
#[derive(Clone, Copy)]
struct Kernels {
    dot: DotFn,
    rows: Option<RowsFn>,
}

impl Kernels {
    /// Rows `r` of `w` (`row_bytes` apart) against `a`, into `out[r]`.
    fn rows(&self, n: usize, w: &[u8], row_bytes: usize, a: &[u8], out: &mut [f32]) {
        match self.rows {
            Some(rows) => rows(n, w, row_bytes, a, out),
            None => {
                for (r, o) in out.iter_mut().enumerate() {
                    *o = (self.dot)(n, &w[r * row_bytes..(r + 1) * row_bytes], a);
                }
            }
        }
    }
}

/// The activation type ggml quantizes the other operand to for weights of type `ty`.
pub const fn vec_dot_type(ty: GgmlType) -> GgmlType {
    use GgmlType::*;
    match ty {
        F32 => F32,
        F16 => F16,
        BF16 => BF16,
        Q4_1 | Q5_1 | Q8_1 => Q8_1,
        Q4_0 | Q5_0 | Q8_0 | IQ4_NL | MXFP4 | NVFP4 | Q1_0 | Q2_0 => Q8_0,
        _ => Q8_K,
    }
}

/// The instruction set the dot products run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    /// Portable Rust.
    Scalar,
    /// x86_64 with AVX2, FMA and F16C.
    Avx2,
    /// aarch64 with NEON.
    Neon,
}

impl Isa {
    /// A short name for reports (`"avx2"`, `"scalar"`).
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::Neon => "neon",
        }
    }
}

fn detect() -> Isa {
    if std::env::var("GGUF_FORCE_SCALAR").is_ok_and(|v| v == "1") {
        return Isa::Scalar;
    }
    #[cfg(target_arch = "x86_64")]
    if x86_64::avx2::available() {
        return Isa::Avx2;
    }
    #[cfg(target_arch = "aarch64")]
    if aarch64::neon::available() {
        return Isa::Neon;
    }
    Isa::Scalar
}

/// The instruction set chosen for this process (decided once).
pub fn isa() -> Isa {
    static ISA: OnceLock<Isa> = OnceLock::new();
    *ISA.get_or_init(detect)
}

/// The kernel for weights of type `ty` on `isa`, if there is one.
pub(crate) fn kernel_for(ty: GgmlType, isa: Isa) -> Option<DotFn> {
    let simd = match isa {
        Isa::Scalar => None,
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => x86_64::avx2::kernel(ty),
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2 => None,
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => aarch64::neon::kernel(ty),
        #[cfg(not(target_arch = "aarch64"))]
        Isa::Neon => None,
    };
    simd.or_else(|| scalar::kernel(ty))
}

/// The several-rows kernel for weights of type `ty` on `isa`, if there is one.
fn rows_kernel_for(ty: GgmlType, isa: Isa) -> Option<RowsFn> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => x86_64::avx2::rows_kernel(ty),
        _ => {
            let _ = ty;
            None
        }
    }
}

fn kernel(ty: GgmlType) -> Result<DotFn> {
    kernels(ty).map(|k| k.dot)
}

fn kernels(ty: GgmlType) -> Result<Kernels> {
    static TABLE: OnceLock<Vec<Option<Kernels>>> = OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let isa = isa();
        (0..64u32)
            .map(|id| {
                let ty = GgmlType::from_id_opt(id)?;
                Some(Kernels {
                    dot: kernel_for(ty, isa)?,
                    rows: rows_kernel_for(ty, isa),
                })
            })
            .collect()
    });
    table
        .get(ty.id() as usize)
        .copied()
        .flatten()
        .ok_or(QuantError::Unsupported {
            ty,
            op: "dot product",
        })
}

/// Quantizes activations `x` to `vec_dot_type(weight_type)` into `out` (resized as needed).
pub fn quantize_activations(weight_type: GgmlType, x: &[f32], out: &mut Vec<u8>) -> Result<()> {
    let act = vec_dot_type(weight_type);
    out.resize(crate::row_bytes(act, x.len())?, 0);
    quantize_activation_row(act, x, out)
}

/// Quantizes one activation row to `act` as llama.cpp's matrix products do on this CPU: with
/// AVX2, ggml's x86 `quantize_row_q8_0`/`q8_1` (inverse scale `127 / amax`, ties to even), which
/// differ from the reference quantizer in a few values per thousand; otherwise (and for Q8_K,
/// where ggml uses it everywhere) the reference quantizer, as ggml's generic code does.
fn quantize_activation_row(act: GgmlType, x: &[f32], out: &mut [u8]) -> Result<()> {
    check_lengths(act, x.len(), out.len())?;
    #[cfg(target_arch = "x86_64")]
    if isa() == Isa::Avx2 {
        let done = match act {
            GgmlType::Q8_0 => x86_64::avx2::quantize_q8(x, out, false),
            GgmlType::Q8_1 => x86_64::avx2::quantize_q8(x, out, true),
            GgmlType::Q8_K => x86_64::avx2::quantize_q8_k(x, out),
            _ => false,
        };
        if done {
            return Ok(());
        }
    }
    quantize_row(act, x, out)
}

/// The dot product of `n` weights of type `ty` (`w`, whole blocks) with `n` activations
/// already quantized to [`vec_dot_type`]`(ty)` (`a`).
pub fn vec_dot(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> Result<f32> {
    check_lengths(ty, n, w.len())?;
    check_lengths(vec_dot_type(ty), n, a.len())?;
    Ok(kernel(ty)?(n, w, a))
}
