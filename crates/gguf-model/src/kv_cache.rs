//! The KV cache: per layer, the keys and values of the positions its attention can still see.
//! A layer that attends to the whole context keeps every position; a sliding-window layer keeps
//! a ring of its window plus one batch (the most a batch can need at once), so its memory does
//! not grow with the context.

use half::f16;

use crate::hparams::Hparams;
use crate::{ModelError, Result};

/// How the KV cache stores keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvType {
    /// Half precision, as llama.cpp does by default.
    #[default]
    F16,
    /// Single precision.
    F32,
}

/// Keys and values of one layer: position `p` lives in slot `p % capacity`.
#[derive(Debug, Clone)]
pub(crate) enum LayerCache {
    F16 { k: Vec<f16>, v: Vec<f16> },
    F32 { k: Vec<f32>, v: Vec<f32> },
}

/// The cache of every layer.
#[derive(Debug, Clone)]
pub(crate) struct KvCache {
    pub layers: Vec<LayerCache>,
    /// Slots of each layer.
    pub capacity: Vec<usize>,
    /// Key and value widths of one position.
    pub widths: (usize, usize),
}

impl KvCache {
    /// The slots of each layer of a cache for `n_ctx` positions, evaluated in batches of at
    /// most `n_batch` tokens.
    fn capacity(hp: &Hparams, n_ctx: usize, n_batch: usize) -> Vec<usize> {
        hp.layer_windows
            .iter()
            .map(|w| match w {
                // A batch's first token needs the `window - 1` positions before it, and the
                // whole batch is stored before any of it attends.
                Some(w) => n_ctx.min(w + n_batch.min(n_ctx) - 1),
                None => n_ctx,
            })
            .collect()
    }

    /// The bytes [`KvCache::new`] allocates for these arguments (saturating).
    pub(crate) fn bytes_needed(hp: &Hparams, n_ctx: usize, n_batch: usize, ty: KvType) -> u64 {
        let (kw, vw) = hp.kv_widths();
        let per_slot = ((kw + vw) as u64).saturating_mul(match ty {
            KvType::F16 => 2,
            KvType::F32 => 4,
        });
        KvCache::capacity(hp, n_ctx, n_batch)
            .iter()
            .map(|&slots| per_slot.saturating_mul(slots as u64))
            .fold(0u64, u64::saturating_add)
    }

    /// A cache for `n_ctx` positions, evaluated in batches of at most `n_batch` tokens; an
    /// allocation the system refuses (an address-space limit) is an error, not an abort.
    pub(crate) fn new(hp: &Hparams, n_ctx: usize, n_batch: usize, ty: KvType) -> Result<KvCache> {
        let (kw, vw) = hp.kv_widths();
        let capacity = KvCache::capacity(hp, n_ctx, n_batch);
        let refused = || ModelError::OutOfMemory {
            what: format!("a KV cache of {n_ctx} positions"),
            needed: KvCache::bytes_needed(hp, n_ctx, n_batch, ty),
            available: None,
        };
        fn zeros<T: Clone>(n: usize, zero: T) -> Option<Vec<T>> {
            let mut v = Vec::new();
            v.try_reserve_exact(n).ok()?;
            v.resize(n, zero);
            Some(v)
        }
        let mut layers = Vec::with_capacity(capacity.len());
        for &slots in &capacity {
            let (k, v) = (slots.checked_mul(kw), slots.checked_mul(vw));
            let (Some(k), Some(v)) = (k, v) else {
                return Err(refused());
            };
            layers.push(match ty {
                KvType::F16 => LayerCache::F16 {
                    k: zeros(k, f16::ZERO).ok_or_else(refused)?,
                    v: zeros(v, f16::ZERO).ok_or_else(refused)?,
                },
                KvType::F32 => LayerCache::F32 {
                    k: zeros(k, 0.0).ok_or_else(refused)?,
                    v: zeros(v, 0.0).ok_or_else(refused)?,
                },
            });
        }
        Ok(KvCache {
            layers,
            capacity,
            widths: (kw, vw),
        })
    }

    /// Bytes held.
    pub(crate) fn bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| match l {
                LayerCache::F16 { k, v } => (k.len() + v.len()) * 2,
                LayerCache::F32 { k, v } => (k.len() + v.len()) * 4,
            })
            .sum()
    }

    /// Stores the keys and values of `n` positions from `pos0` (rows of `k` and `v`) in
    /// layer `il`.
    pub(crate) fn store(&mut self, il: usize, pos0: usize, k: &[f32], v: &[f32]) {
        let (kw, vw) = self.widths;
        let cap = self.capacity[il];
        let rows = k.chunks_exact(kw).zip(v.chunks_exact(vw));
        match &mut self.layers[il] {
            LayerCache::F16 { k: kc, v: vc } => {
                for (i, (ks, vs)) in rows.enumerate() {
                    let slot = (pos0 + i) % cap;
                    gguf_quant::vec::f32_to_f16(ks, &mut kc[slot * kw..(slot + 1) * kw]);
                    gguf_quant::vec::f32_to_f16(vs, &mut vc[slot * vw..(slot + 1) * vw]);
                }
            }
            LayerCache::F32 { k: kc, v: vc } => {
                for (i, (ks, vs)) in rows.enumerate() {
                    let slot = (pos0 + i) % cap;
                    kc[slot * kw..(slot + 1) * kw].copy_from_slice(ks);
                    vc[slot * vw..(slot + 1) * vw].copy_from_slice(vs);
                }
            }
        }
    }
}
