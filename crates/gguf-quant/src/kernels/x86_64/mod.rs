//! x86_64 kernels: `avx2` (AVX2 + FMA + F16C, the base every x86_64 SIMD path needs) and
//! `avx512` (AVX-512 F/BW/VL + VNNI on top of it, for the products where the wider vectors
//! pay; it hands out AVX2's kernels for everything else).

pub(crate) mod avx2;
pub(crate) mod avx512;
