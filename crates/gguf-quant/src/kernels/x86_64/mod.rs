//! x86_64 kernels: `avx2` (AVX2 + FMA + F16C, the base every x86_64 SIMD path needs),
//! `avxvnni` (AVX2's legacy-type products with AVX-VNNI's `vpdpbusd`, for CPUs without
//! AVX-512) and `avx512` (AVX-512 F/BW/VL + VNNI on top of AVX2, for the products where the
//! wider vectors pay). Both hand out AVX2's kernels for everything else, and all three compute
//! the same numbers.

pub(crate) mod avx2;
pub(crate) mod avx512;
pub(crate) mod avxvnni;

/// Whether this CPU is an AMD Zen 4 (vendor `AuthenticAMD`, family 19h, with AVX-512): there
/// decoding's one-row products run fastest as AVX2's kernels, one weight row at a time (see
/// `super::DecodeTuning`).
pub(crate) fn is_zen4() -> bool {
    use std::arch::x86_64::__cpuid;
    // CPUID leaves 0 (vendor) and 1 (family) exist on every x86_64 CPU.
    let vendor = __cpuid(0);
    let amd = [vendor.ebx, vendor.edx, vendor.ecx] == [0x6874_7541, 0x6974_6e65, 0x444d_4163];
    let eax = __cpuid(1).eax;
    let base = (eax >> 8) & 0xF;
    let family = if base == 0xF {
        base + ((eax >> 20) & 0xFF)
    } else {
        base
    };
    amd && family == 0x19 && is_x86_feature_detected!("avx512f")
}
