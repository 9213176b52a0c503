//! The compute kernels and their dispatch: fused dot products of a weight row (any ggml type)
//! with an activation row quantized to the type ggml pairs with it ([`vec_dot_type`]), the
//! activation quantizers, the float kernels of [`vec`], and the mat-vec / mat-mat
//! products built on them (`matmul`).
//!
//! - `scalar`: the portable dot kernels, ggml's generic C operation for operation; they are the
//!   twins every SIMD kernel is tested against.
//! - `x86_64::avx2`, `x86_64::avx512`, `aarch64::neon`: one folder per instruction set holding all its kernels
//!   (dot products, several-rows products, activation quantizers, vector kernels). Each hands
//!   out its [`IsaKernels`] table only when the CPU has the instruction set.
//! - this module: the choice of instruction set (once, on first use, then cached: the widest
//!   this CPU has, or the one `GGUF_FORCE_ISA` names, `scalar`, `avx2`, `avxvnni`, `avx512` or
//!   `neon`; `GGUF_FORCE_SCALAR=1` is `GGUF_FORCE_ISA=scalar`; one this CPU lacks is an error,
//!   [`check_isa`]) and the per-type kernel table;
//!   `matmul`: the products over whole matrices.
//!
//! The scalar kernels follow ggml's generic C operation for operation; SIMD kernels sum in
//! another order and are tested against their scalar twins within a stated bound
//! (`simd_tests`, which walks the tables themselves).

/// Defines a safe dot-product wrapper `$name` around an ISA module's
/// `unsafe fn $inner(blocks, w: *const u8, a: *const u8) -> f32` for weights of type `$w`
/// (activations of `vec_dot_type($w)`).
///
/// The wrappers are `pub(super)`: visible inside their ISA folder only, whose `kernels()` hands
/// them out (in its [`IsaKernels`]) only after `available()` confirmed the instruction set. The
/// public entry points checked that `w` and `a` hold exactly the blocks for `n` elements, and
/// the assert below re-checks it.
macro_rules! safe_wrapper {
    ($name:ident, $inner:ident, $w:ident) => {
        pub(super) fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let blocks = crate::kernels::checked_blocks(crate::GgmlType::$w, n, w, a);
            // SAFETY: the CPU has the instruction set (see above), and `checked_blocks` makes
            // the block count the kernel reads from each pointer a bound check, so even a wrong
            // caller cannot make it read out of bounds.
            unsafe { $inner(blocks, w.as_ptr(), a.as_ptr()) }
        }
    };
    // `$inner` is generic over the number of rows `R` it computes at once:
    // `unsafe fn $inner<const R: usize>(blocks, ws: [*const u8; R], ahead: usize, a) -> [f32; R]`
    // (`ahead`: the prefetch distance in bytes, 0 for none). `$name` computes one row with it;
    // `$rows` (a [`RowsFn`]) any number, `$group` at a time, prefetching the next group.
    ($name:ident, $inner:ident, $w:ident, rows: $rows:ident, group: $group:literal) => {
        pub(super) fn $name(n: usize, w: &[u8], a: &[u8]) -> f32 {
            let blocks = crate::kernels::checked_blocks(crate::GgmlType::$w, n, w, a);
            // SAFETY: as in the one-row arm above.
            unsafe { $inner::<1>(blocks, [w.as_ptr()], 0, a.as_ptr())[0] }
        }

        pub(super) fn $rows(n: usize, w: &[u8], row_bytes: usize, a: &[u8], out: &mut [f32]) {
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

/// Defines an ISA module's `KERNELS`, its table of [`vec`]'s kernels, from its
/// `unsafe fn`s `$dot(n, a, b) -> f32`, `$mad(n, acc, x, s)`, `$scale(n, acc, s)` and
/// `$swiglu(n, gate, up)`, `$gelu(n, x)`, `$geglu(n, gate, up)` and
/// `$soft_max(n, x, max) -> f64` over `n` values behind each pointer, and
/// `$gemm(m, k, n, c, a, b)` over row-major `m × n`, `m × k` and `k × n` values. Like
/// `safe_wrapper!`'s wrappers,
/// the table is visible inside its ISA folder only and handed out by its `kernels()` only after
/// `available()`.
macro_rules! vec_kernels {
    (
        $dot:ident,
        $mad:ident,
        $scale:ident,
        $swiglu:ident,
        $gelu:ident,
        $geglu:ident,
        $gemm:ident,
        $soft_max:ident
    ) => {
        pub(super) const KERNELS: crate::kernels::vec::VecKernels =
            crate::kernels::vec::VecKernels {
                dot_f16: |a, b| {
                    let n = a.len().min(b.len());
                    // SAFETY: the CPU has the instruction set (see above); both slices hold `n`
                    // values.
                    unsafe { $dot(n, a.as_ptr(), b.as_ptr()) }
                },
                mad_f16: |acc, x, s| {
                    let n = acc.len().min(x.len());
                    // SAFETY: as for `dot_f16`.
                    unsafe { $mad(n, acc.as_mut_ptr(), x.as_ptr(), s) }
                },
                scale_f16: |acc, s| {
                    // SAFETY: as for `dot_f16`; the slice holds `acc.len()` values.
                    unsafe { $scale(acc.len(), acc.as_mut_ptr(), s) }
                },
                swiglu: |gate, up| {
                    let n = gate.len().min(up.len());
                    // SAFETY: as for `dot_f16`.
                    unsafe { $swiglu(n, gate.as_mut_ptr(), up.as_ptr()) }
                },
                gelu: |x| {
                    // SAFETY: as for `dot_f16`; the slice holds `x.len()` values.
                    unsafe { $gelu(x.len(), x.as_mut_ptr()) }
                },
                geglu: |gate, up| {
                    let n = gate.len().min(up.len());
                    // SAFETY: as for `dot_f16`.
                    unsafe { $geglu(n, gate.as_mut_ptr(), up.as_ptr()) }
                },
                gemm_f32: |c, a, b, m, k, n| {
                    crate::kernels::vec::check_gemm(c, a, b, m, k, n);
                    // SAFETY: as for `dot_f16`; the check above makes the slices hold `m * n`,
                    // `m * k` and `k * n` values.
                    unsafe { $gemm(m, k, n, c.as_mut_ptr(), a.as_ptr(), b.as_ptr()) }
                },
                soft_max_f32: |x, max| {
                    // SAFETY: as for `dot_f16`; the slice holds `x.len()` values.
                    unsafe { $soft_max(x.len(), x.as_mut_ptr(), max) }
                },
                mad_f16_rows: None,
                dot_f16_rows: None,
                exp_f32: |x| x.iter_mut().for_each(|v| *v = v.exp()),
            };
    };
}

#[cfg(target_arch = "aarch64")]
mod aarch64;
mod activations;
mod kq_gemm;
mod lanes;
mod matmul;
pub(crate) mod packed;
pub(crate) mod packed_scalar;
#[cfg(test)]
mod packed_tests;
mod scalar;
#[cfg(test)]
mod scalar_tests;
#[cfg(test)]
mod simd_tests;
pub mod vec;
#[cfg(target_arch = "x86_64")]
mod x86_64;

use std::ffi::OsString;
use std::sync::OnceLock;

use crate::error::{QuantError, Result};
use crate::kernels::vec::VecKernels;
use crate::quant::QuantFn;
use crate::{check_lengths, GgmlType};

pub use matmul::{matmul, matmul_dots_on, matmul_on, matvec, matvec_on};

/// A dot-product kernel: `n` elements of weight blocks `w` against activation blocks `a`
/// (lengths checked by the caller).
pub(crate) type DotFn = fn(n: usize, w: &[u8], a: &[u8]) -> f32;

/// A kernel that computes `out.len()` dot products at once: rows `r` of `w`, `row_bytes` apart
/// (`n` elements each), against the activation blocks `a`. Each result equals the [`DotFn`]'s
/// for that row, bit for bit.
pub(crate) type RowsFn = fn(n: usize, w: &[u8], row_bytes: usize, a: &[u8], out: &mut [f32]);

/// A kernel for the products of prompt processing: weight rows `r` of `w` (`row_bytes` apart,
/// `n` elements each, `out[b].len()` of them) against every activation row `b` of `a`
/// (`act_row` bytes apart, `out.len()` of them, at least 2), into `out[b][r]`. The kernel tiles
/// the product as it likes (each weight block unpacked once for several activation rows); each
/// result must not depend on the tiling: it is summed in one fixed order per (row, activation)
/// pair, that of llama.cpp's batched product for the type on this ISA (tinyBLAS, a repacked
/// GEMM, or its row-by-row `vec_dot`), so prompts give llama.cpp's numbers.
pub(crate) type GemmFn =
    fn(n: usize, w: &[u8], row_bytes: usize, a: &[u8], act_row: usize, out: &mut [&mut [f32]]);

/// The products of a packed layout (`crate::kernels::packed`): `out.len() / 8` groups of eight
/// interleaved weight rows (`w`, the groups' tiles one after another, `n` elements per row)
/// against one activation row `a` (Q8_K blocks), in llama.cpp's GEMV order for the layout.
pub(crate) type PackedGemvFn = fn(n: usize, w: &[u8], a: &[u8], out: &mut [f32]);

/// As [`PackedGemvFn`] for four activation rows at once (`out[k]` for `a[k]`), in llama.cpp's
/// GEMM order, which sums each output in another order than its GEMV.
pub(crate) type PackedGemmFn = fn(n: usize, w: &[u8], a: [&[u8]; 4], out: [&mut [f32]; 4]);

/// The kernels of one packed layout on one instruction set.
#[derive(Clone, Copy)]
pub(crate) struct PackedKernels {
    /// One activation row (single-token decoding, and the rows of a batch past its last
    /// whole group of four).
    pub(crate) gemv: PackedGemvFn,
    /// Four activation rows.
    pub(crate) gemm4: PackedGemmFn,
}

/// Everything an instruction set's module offers. The module returns it only when the CPU has
/// the instruction set, so every function reachable from it may run.
#[derive(Clone, Copy)]
pub(crate) struct IsaKernels {
    /// The one-row dot kernel for weights of a type, if the ISA has one.
    pub(crate) dot: fn(GgmlType) -> Option<DotFn>,
    /// The several-rows kernel for weights of a type, if the ISA has one.
    pub(crate) rows: fn(GgmlType) -> Option<RowsFn>,
    /// The batched (prompt) product for weights of a type, if the ISA has one; without it a
    /// batch runs as [`RowsFn`] calls, a few weight rows against each activation row.
    pub(crate) gemm: fn(GgmlType) -> Option<GemmFn>,
    /// The quantizer of an activation type, as llama.cpp's matrix products quantize on this
    /// ISA, if the ISA has one (else the reference quantizer runs).
    pub(crate) quantize: fn(GgmlType) -> Option<QuantFn>,
    /// The float kernels of [`vec`], if the ISA has them.
    pub(crate) vec: Option<VecKernels>,
    /// The products on the packed layout of a weight type, if the ISA has them (llama.cpp
    /// repacks that type on this ISA); `crate::kernels::packed` packs only when it does.
    pub(crate) packed: fn(GgmlType) -> Option<PackedKernels>,
}

/// The blocks of `n` weights of type `w`, after asserting that `w` holds them and `a` their
/// activations (so that a kernel reading that many blocks stays in bounds).
#[inline(always)]
pub(crate) fn checked_blocks(w: GgmlType, n: usize, wb: &[u8], a: &[u8]) -> usize {
    let blocks = n / w.block_size() as usize;
    assert!(
        wb.len() >= blocks * w.type_size() as usize
            && a.len() >= blocks * vec_dot_type(w).type_size() as usize
    );
    blocks
}

/// The kernels for one weight type: one row at a time, several when the ISA has that, and the
/// quantizer of its activations.
#[derive(Clone, Copy)]
pub(crate) struct Kernels {
    dot: DotFn,
    rows: Option<RowsFn>,
    gemm: Option<GemmFn>,
    pub(crate) quantize: QuantFn,
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
    /// x86_64 with AVX-VNNI besides AVX2, FMA and F16C (no AVX-512 needed). Its kernels
    /// compute AVX2's numbers bit for bit.
    AvxVnni,
    /// x86_64 with AVX-512 F, BW, VL and VNNI besides AVX2, FMA and F16C. Its kernels compute
    /// AVX2's numbers bit for bit.
    Avx512,
    /// aarch64 with NEON.
    Neon,
}

impl Isa {
    /// A short name for reports (`"avx2"`, `"scalar"`).
    pub const fn name(self) -> &'static str {
        match self {
            Isa::Scalar => "scalar",
            Isa::Avx2 => "avx2",
            Isa::AvxVnni => "avxvnni",
            Isa::Avx512 => "avx512",
            Isa::Neon => "neon",
        }
    }
}

/// The SIMD kernels of `isa`: `None` for [`Isa::Scalar`], for an instruction set of another
/// architecture, and when this CPU lacks it.
pub(crate) fn simd(isa: Isa) -> Option<IsaKernels> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => x86_64::avx2::kernels(),
        #[cfg(target_arch = "x86_64")]
        Isa::AvxVnni => x86_64::avxvnni::kernels(),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 => x86_64::avx512::kernels(),
        #[cfg(target_arch = "aarch64")]
        Isa::Neon => aarch64::neon::kernels(),
        _ => None,
    }
}

impl Isa {
    /// Every instruction set, the widest first.
    pub const ALL: [Isa; 5] = [Isa::Avx512, Isa::AvxVnni, Isa::Avx2, Isa::Neon, Isa::Scalar];

    /// The instruction set called `name` (as [`Isa::name`] writes it).
    pub fn from_name(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|isa| isa.name() == name)
    }

    /// Whether this CPU runs this instruction set's kernels.
    pub fn available(self) -> bool {
        self == Isa::Scalar || simd(self).is_some()
    }
}

/// The instruction sets this CPU runs, the narrowest first (`scalar, avx2`), for messages.
fn available_names() -> String {
    let names: Vec<&str> = Isa::ALL
        .into_iter()
        .rev()
        .filter(|isa| isa.available())
        .map(Isa::name)
        .collect();
    names.join(", ")
}

/// The instruction set for this process given the environment's `GGUF_FORCE_ISA` and
/// `GGUF_FORCE_SCALAR`: the widest this CPU has, unless one is forced (`GGUF_FORCE_ISA` first;
/// `GGUF_FORCE_SCALAR=1` is scalar, other values of it mean nothing). A forced one the CPU
/// lacks, a name that is no instruction set (or not UTF-8) and an empty value are errors,
/// never a silent fallback, so that a test run that asked for one cannot pass on another.
fn choose(force_isa: Option<OsString>, force_scalar: Option<OsString>) -> Result<Isa> {
    let Some(name) = force_isa else {
        if force_scalar.is_some_and(|v| v == "1") {
            return Ok(Isa::Scalar);
        }
        return Ok(Isa::ALL
            .into_iter()
            .find(|isa| isa.available())
            .unwrap_or(Isa::Scalar));
    };
    let value = name.to_string_lossy().into_owned();
    match Isa::from_name(&value) {
        Some(isa) if isa.available() => Ok(isa),
        found => Err(QuantError::ForcedIsa {
            value,
            known: found.is_some(),
            available: available_names(),
        }),
    }
}

/// The instruction set chosen for this process (decided once, on first use): the widest this
/// CPU has, or the one `GGUF_FORCE_ISA` names (`scalar`, `avx2`, `avxvnni`, `avx512`, `neon`;
/// `GGUF_FORCE_SCALAR=1` is `GGUF_FORCE_ISA=scalar`). A forced instruction set this CPU lacks,
/// an unknown name or an empty value is [`QuantError::ForcedIsa`], every time it is asked:
/// another instruction set is never used in its place. `gguf_model::Model::load` and every
/// `gguf` command call this first, so a wrong value is an error before any work.
pub fn check_isa() -> Result<Isa> {
    static CHOICE: OnceLock<Result<Isa>> = OnceLock::new();
    CHOICE
        .get_or_init(|| {
            choose(
                std::env::var_os("GGUF_FORCE_ISA"),
                std::env::var_os("GGUF_FORCE_SCALAR"),
            )
        })
        .clone()
}

/// The instruction set chosen for this process (see [`check_isa`]), for the kernels whose
/// entry points cannot fail ([`crate::vec`]); the fallible entry points ([`matvec`],
/// [`vec_dot`], [`quantize_activations`], [`crate::PackedMatrix::new`], ...) return
/// [`check_isa`]'s error instead.
///
/// # Panics
///
/// When [`check_isa`] is an error (the environment forces an instruction set this process
/// cannot run). Call [`check_isa`] first, as `gguf_model::Model::load` does.
pub fn isa() -> Isa {
    match check_isa() {
        Ok(isa) => isa,
        Err(e) => panic!("{e}"),
    }
}

/// The kernel for weights of type `ty` on `isa`, if there is one: the ISA's, else the portable
/// one in AVX2's order (`lanes`), else ggml's generic one (`scalar`).
pub(crate) fn kernel_for(ty: GgmlType, isa: Isa) -> Option<DotFn> {
    simd(isa)
        .and_then(|k| (k.dot)(ty))
        .or_else(|| lanes::dot(ty))
        .or_else(|| scalar::kernel(ty))
}

/// The batched product for weights of type `ty` on `isa`, if there is one: the ISA's, and on
/// the scalar ISA the portable one in AVX2's order (NEON computes batches with its own
/// several-rows kernels).
fn gemm_for(ty: GgmlType, isa: Isa) -> Option<GemmFn> {
    match simd(isa) {
        Some(k) => (k.gemm)(ty),
        None => lanes::gemm(ty),
    }
}

/// How decoding's products (one activation row) are computed on this CPU, besides its ISA:
/// which kernels pay is measured per CPU, and every choice computes the same numbers (the ISA
/// tables' kernels are bit for bit alike, and a row's sum does not depend on the rows computed
/// beside it), so only the speed depends on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DecodeTuning {
    /// Whether several weight rows go through one call (`RowsFn`, each group prefetching the
    /// next), or one row at a time.
    pub(crate) grouped_rows: bool,
    /// Whether the AVX-512 ISA's one-row products and packed GEMV are AVX2's kernels.
    pub(crate) avx2_one_row: bool,
}

/// [`DecodeTuning`] for this CPU. On an AMD EPYC Zen 4 (2 vCPUs, 2026-12-04; `gguf bench -n 64
/// -t 1` of a Q4_K_M file of OLMoE-1B-7B's dense shapes) grouped rows decode at 55 tokens/s
/// with AVX2's kernels and 48 with AVX-512's, one row at a time at 81 and 61: two interleaved
/// row streams defeat its prefetchers, and its 512-bit operations are split in halves. The
/// CPUs the grouped rows and the AVX-512 kernels were measured on before kept them
/// (docs/performance.md, "History of the kernels"); others are untuned until measured.
pub(crate) fn decode_tuning() -> DecodeTuning {
    static TUNING: OnceLock<DecodeTuning> = OnceLock::new();
    *TUNING.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        let zen4 = x86_64::is_zen4();
        #[cfg(not(target_arch = "x86_64"))]
        let zen4 = false;
        DecodeTuning {
            grouped_rows: !zen4,
            avx2_one_row: zen4,
        }
    })
}

/// The ISA whose one-row kernels decode on `isa` under `tuning`: AVX2 for AVX-512 where
/// AVX2's pay.
fn one_row_isa(isa: Isa, tuning: DecodeTuning) -> Isa {
    match isa {
        Isa::Avx512 if tuning.avx2_one_row => Isa::Avx2,
        isa => isa,
    }
}

/// The packed-layout products for weights of type `ty` on this process's ISA, if it has them
/// (the GEMV that of [`one_row_isa`]). The scalar ISA packs what AVX2 packs, with the portable
/// twins, so that its products follow the same order. An error when the environment forces
/// an ISA this CPU lacks.
pub(crate) fn packed_kernels(ty: GgmlType) -> Result<Option<PackedKernels>> {
    let isa = check_isa()?;
    Ok(match simd(isa) {
        Some(k) => (k.packed)(ty).map(|mut kernels| {
            let gemv_isa = one_row_isa(isa, decode_tuning());
            if let Some(gemv) = simd(gemv_isa).and_then(|k| (k.packed)(ty)) {
                kernels.gemv = gemv.gemv;
            }
            kernels
        }),
        None => (ty == GgmlType::Q4_K).then_some(packed_scalar::Q4_K_X8),
    })
}

/// The quantizer of activation type `act` on `isa`: the ISA's, else the portable one (both
/// write the same bytes, see `activations`).
fn activation_quantizer(act: GgmlType, isa: Isa) -> Option<QuantFn> {
    simd(isa)
        .and_then(|k| (k.quantize)(act))
        .or_else(|| activations::kernel(act))
}

fn kernel(ty: GgmlType) -> Result<DotFn> {
    kernels(ty).map(|k| k.dot)
}

/// The kernels for weights of type `ty` on this process's ISA (looked up once per type); an
/// error when the environment forces an ISA this CPU lacks.
pub(crate) fn kernels(ty: GgmlType) -> Result<Kernels> {
    static TABLE: OnceLock<Vec<Option<Kernels>>> = OnceLock::new();
    let isa = check_isa()?;
    let table = TABLE.get_or_init(|| {
        let tuning = decode_tuning();
        (0..64u32)
            .map(|id| {
                let ty = GgmlType::from_id_opt(id)?;
                Some(Kernels {
                    dot: kernel_for(ty, one_row_isa(isa, tuning))?,
                    rows: simd(isa)
                        .filter(|_| tuning.grouped_rows)
                        .and_then(|k| (k.rows)(ty)),
                    gemm: gemm_for(ty, isa),
                    quantize: activation_quantizer(vec_dot_type(ty), isa)?,
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

/// Quantizes activations `x` to `vec_dot_type(weight_type)` into `out` (resized as needed), as
/// llama.cpp's matrix products do on an x86 machine, whatever this CPU is: Q8_0 and Q8_1 as
/// ggml's x86 `quantize_row_q8_0`/`q8_1` (inverse scale `127 / amax`, ties to even), which
/// differ from the reference quantizer in a few values per thousand; Q8_K with the reference
/// quantizer, which ggml uses everywhere. The bytes do not depend on the instruction set.
pub fn quantize_activations(weight_type: GgmlType, x: &[f32], out: &mut Vec<u8>) -> Result<()> {
    let act = vec_dot_type(weight_type);
    out.resize(crate::row_bytes(act, x.len())?, 0);
    let quantize = activation_quantizer(act, check_isa()?).ok_or(QuantError::Unsupported {
        ty: act,
        op: "quantize",
    })?;
    quantize(x, out);
    Ok(())
}

/// The dot product of `n` weights of type `ty` (`w`, whole blocks) with `n` activations
/// already quantized to [`vec_dot_type`]`(ty)` (`a`).
pub fn vec_dot(ty: GgmlType, n: usize, w: &[u8], a: &[u8]) -> Result<f32> {
    check_lengths(ty, n, w.len())?;
    check_lengths(vec_dot_type(ty), n, a.len())?;
    Ok(kernel(ty)?(n, w, a))
}

#[cfg(test)]
mod choice_tests {
    use super::*;

    fn forced(isa: &str) -> Result<Isa> {
        choose(Some(isa.into()), None)
    }

    #[test]
    fn a_forced_isa_runs_only_if_this_cpu_has_it() {
        let widest = choose(None, None).unwrap();
        assert!(widest.available());
        assert_eq!(Isa::ALL.into_iter().find(|i| i.available()), Some(widest));
        assert_eq!(forced("scalar"), Ok(Isa::Scalar));
        assert_eq!(choose(None, Some("1".into())), Ok(Isa::Scalar));
        // GGUF_FORCE_SCALAR means scalar only as `1`; GGUF_FORCE_ISA comes first.
        assert_eq!(choose(None, Some("0".into())), Ok(widest));
        assert_eq!(
            choose(Some("scalar".into()), Some("0".into())),
            Ok(Isa::Scalar)
        );
        let have = available_names();
        assert!(have.starts_with("scalar"), "{have}");
        for isa in Isa::ALL {
            match forced(isa.name()) {
                Ok(chosen) => assert!(isa.available() && chosen == isa, "{}", isa.name()),
                Err(e) => {
                    assert!(!isa.available(), "{}: {e}", isa.name());
                    assert_eq!(
                        e.to_string(),
                        format!(
                            "GGUF_FORCE_ISA={}: this CPU lacks it; it has {have}",
                            isa.name()
                        )
                    );
                }
            }
        }
        let lacking = if cfg!(target_arch = "x86_64") {
            "neon"
        } else {
            "avx2"
        };
        assert!(forced(lacking).is_err());
    }

    #[test]
    fn unknown_empty_and_non_utf8_names_are_errors() {
        let have = available_names();
        assert_eq!(
            forced("avx3").unwrap_err().to_string(),
            format!(
                "GGUF_FORCE_ISA=avx3: not an instruction set (scalar, avx2, avxvnni, avx512, \
                 neon); this CPU has {have}"
            )
        );
        assert_eq!(
            forced("").unwrap_err().to_string(),
            format!(
                "GGUF_FORCE_ISA=: empty (name one of scalar, avx2, avxvnni, avx512, neon); this \
                 CPU has {have}"
            )
        );
        // Names are exact: no case folding, no spaces.
        for name in ["AVX2", " scalar", "scalar\n"] {
            assert!(forced(name).is_err(), "{name:?}");
        }
        #[cfg(unix)]
        {
            use std::os::unix::ffi::OsStringExt;
            let name = OsString::from_vec(b"sc\xffalar".to_vec());
            assert!(matches!(
                choose(Some(name), None),
                Err(QuantError::ForcedIsa { known: false, .. })
            ));
        }
    }
}

#[cfg(test)]
mod tuning_tests {
    use super::*;

    #[test]
    fn avx512_decodes_with_avx2_one_row_kernels_only_when_tuned_so() {
        let tuned = DecodeTuning {
            grouped_rows: false,
            avx2_one_row: true,
        };
        let untuned = DecodeTuning {
            grouped_rows: true,
            avx2_one_row: false,
        };
        assert_eq!(one_row_isa(Isa::Avx512, tuned), Isa::Avx2);
        assert_eq!(one_row_isa(Isa::Avx512, untuned), Isa::Avx512);
        for isa in [Isa::Scalar, Isa::Avx2, Isa::AvxVnni, Isa::Neon] {
            assert_eq!(one_row_isa(isa, tuned), isa);
        }
    }

    #[test]
    fn the_kernel_table_follows_this_cpus_tuning() {
        let tuning = decode_tuning();
        let k = kernels(GgmlType::Q6_K).unwrap();
        let has_rows = simd(isa()).and_then(|t| (t.rows)(GgmlType::Q6_K)).is_some();
        assert_eq!(k.rows.is_some(), has_rows && tuning.grouped_rows);
        // Whichever kernels the tuning picks, each row's product is the ISA's one-row kernel's.
        let mut rng = gguf_test_support::Rng::new(7);
        let n = 512;
        let w: Vec<u8> = (0..2 * n / 256)
            .flat_map(|_| {
                let mut block = rng.bytes(210);
                // A finite scale (f16 1.0).
                block[208..].copy_from_slice(&[0x00, 0x3c]);
                block
            })
            .collect();
        let x: Vec<f32> = (0..n).map(|_| rng.unit()).collect();
        let mut a = Vec::new();
        quantize_activations(GgmlType::Q6_K, &x, &mut a).unwrap();
        let mut out = [0f32; 2];
        let row_bytes = w.len() / 2;
        k.rows(n, &w, row_bytes, &a, &mut out);
        let one_row = kernel_for(GgmlType::Q6_K, isa()).unwrap();
        for (r, o) in out.iter().enumerate() {
            let want = one_row(n, &w[r * row_bytes..], &a);
            assert_eq!(o.to_bits(), want.to_bits(), "row {r}");
        }
    }
}
