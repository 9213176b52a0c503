//! x86_64 kernels: `avx2` (AVX2 + FMA + F16C, the base every x86_64 SIMD path needs),
//! `avxvnni` (AVX2's legacy-type products with AVX-VNNI's `vpdpbusd`, for CPUs without
//! AVX-512) and `avx512` (AVX-512 F/BW/VL + VNNI on top of AVX2, for the products where the
//! wider vectors pay). Both hand out AVX2's kernels for everything else, and all three compute
//! the same numbers.

pub(crate) mod avx2;
pub(crate) mod avx512;
pub(crate) mod avxvnni;
