//! A fast non-cryptographic hasher for the token and merge maps (the Fx hash of rustc: a
//! rotate, xor and multiply per 8 bytes). The keys come from the model file, not from the text
//! being tokenized, so hash flooding through the input is not a concern; std's SipHash made
//! the lookups the largest cost of encoding.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A `HashMap` with [`FxHasher`].
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<FxHasher>>;

const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;

/// The Fx hash.
#[derive(Default, Clone, Copy)]
pub(crate) struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(SEED);
    }
}

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut buf = [0u8; 8];
            buf[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(buf));
        }
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.add(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.hash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinguishes_keys_and_lengths() {
        let mut m: FastMap<Box<[u8]>, u32> = FastMap::default();
        for (i, k) in [
            &b""[..],
            b"\0",
            b"\0\0",
            b"a",
            b"ab",
            b"abcdefgh",
            b"abcdefghi",
        ]
        .iter()
        .enumerate()
        {
            m.insert((*k).into(), i as u32);
        }
        assert_eq!(m.len(), 7);
        assert_eq!(m[&b"abcdefghi"[..]], 6);
        assert_eq!(m[&b"\0\0"[..]], 2);
    }
}
