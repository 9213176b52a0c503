//! The legacy (pre-GGUF) fixtures, written from the published layouts: [`write()`] lays out a
//! container, [`blocks`] makes deterministic blocks of a type in an era's layout, and
//! [`fixture`] builds the small llama files `fixtures/legacy/` holds.

use gguf_convert::legacy::{Container, Hparams, OldQuant, MAGIC_GGJT, MAGIC_GGMF, MAGIC_GGML};
use gguf_test_support::Rng;
use half::f16;

/// The alignment of GGJT tensor data.
const GGJT_ALIGNMENT: usize = 32;

/// Elements per block of a legacy quantized type.
fn quant_block_len(q: OldQuant) -> u32 {
    match q {
        OldQuant::Q4_2 | OldQuant::Q4_3 => 16,
        _ => 32,
    }
}

/// A tensor to write: its legacy name, dimensions (row length first), type id and data.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct TensorData {
    /// The legacy name (`layers.0.attention.wq.weight`).
    pub(crate) name: String,
    /// Dimensions, row length first.
    pub(crate) dims: Vec<u32>,
    /// The legacy type id.
    pub(crate) type_id: u32,
    /// The data, in the container's layout for the type.
    pub(crate) data: Vec<u8>,
}

/// A legacy file: magic, version, hyperparameters, vocabulary (scores but for GGML), tensors
/// (their data aligned to 32 bytes in GGJT).
pub(crate) fn write(
    container: Container,
    hp: &Hparams,
    vocab: &[(Vec<u8>, f32)],
    tensors: &[TensorData],
) -> Vec<u8> {
    let mut out = Vec::new();
    let u32le = |out: &mut Vec<u8>, v: u32| out.extend_from_slice(&v.to_le_bytes());
    match container {
        Container::Ggml => u32le(&mut out, MAGIC_GGML),
        Container::Ggmf => {
            u32le(&mut out, MAGIC_GGMF);
            u32le(&mut out, 1);
        }
        Container::Ggjt(v) => {
            u32le(&mut out, MAGIC_GGJT);
            u32le(&mut out, v);
        }
    }
    for v in [
        hp.n_vocab, hp.n_embd, hp.n_mult, hp.n_head, hp.n_layer, hp.n_rot, hp.ftype,
    ] {
        u32le(&mut out, v);
    }
    for (text, score) in vocab {
        u32le(&mut out, text.len() as u32);
        out.extend_from_slice(text);
        if container != Container::Ggml {
            out.extend_from_slice(&score.to_le_bytes());
        }
    }
    for t in tensors {
        u32le(&mut out, t.dims.len() as u32);
        u32le(&mut out, t.name.len() as u32);
        u32le(&mut out, t.type_id);
        for &d in &t.dims {
            u32le(&mut out, d);
        }
        out.extend_from_slice(t.name.as_bytes());
        if let Container::Ggjt(_) = container {
            out.resize(out.len().next_multiple_of(GGJT_ALIGNMENT), 0);
        }
        out.extend_from_slice(&t.data);
    }
    out
}

/// A random f16 scale in about ±(2^-10 .. 2^-3), as f32.
fn random_scale(rng: &mut Rng) -> f32 {
    let x = (rng.next() >> 40) as f32 / (1u64 << 24) as f32;
    let sign = if rng.next() & 1 == 0 { 1.0 } else { -1.0 };
    f16::from_f32(sign * (0.001 + 0.1 * x)).to_f32()
}

/// `count` blocks of `type_id` in `container`'s layout from `rng`. F32 and F16 get finite
/// values in ±1; quantized types random codes with f16 scales, which are stored as f32 in the
/// eras that have f32 scales; with `inexact_scales` those are nudged off the f16 grid, so
/// that no f16 holds them. The K-quants (ids 10-14) get random bytes with finite f16 scales.
pub(crate) fn blocks(
    type_id: u32,
    container: Container,
    count: usize,
    inexact_scales: bool,
    rng: &mut Rng,
) -> Vec<u8> {
    let mut out = Vec::new();
    let scale = |rng: &mut Rng, out: &mut Vec<u8>, f32_scale: bool| {
        let s = random_scale(rng);
        if f32_scale {
            let s = if inexact_scales {
                s * (1.0 + f32::EPSILON * 64.0)
            } else {
                s
            };
            out.extend_from_slice(&s.to_le_bytes());
        } else {
            out.extend_from_slice(&f16::from_f32(s).to_le_bytes());
        }
    };
    let bytes = |rng: &mut Rng, out: &mut Vec<u8>, n: usize| out.extend(rng.bytes(n));
    for _ in 0..count {
        match type_id {
            0 => out.extend_from_slice(&rng.unit().to_le_bytes()),
            1 => out.extend_from_slice(&f16::from_f32(rng.unit()).to_le_bytes()),
            10..=14 => {
                let ty = gguf_format::GgmlType::from_id_opt(type_id).expect("a K-quant");
                let start = out.len();
                bytes(rng, &mut out, ty.type_size() as usize);
                // The f16 scales (d, and dmin but for Q3_K and Q6_K) sit at the block's end
                // (Q2_K, Q3_K, Q6_K) or start (Q4_K, Q5_K).
                let at: &[usize] = match type_id {
                    10 => &[80, 82],
                    11 => &[108],
                    12 | 13 => &[0, 2],
                    _ => &[208],
                };
                for &a in at {
                    let s = f16::from_f32(random_scale(rng)).to_le_bytes();
                    out[start + a..start + a + 2].copy_from_slice(&s);
                }
            }
            _ => {
                let q = OldQuant::from_id(type_id).expect("a legacy quantized type");
                let f32_scales = container != Container::Ggjt(3);
                match q {
                    OldQuant::Q4_0 => {
                        scale(rng, &mut out, f32_scales);
                        bytes(rng, &mut out, 16);
                    }
                    OldQuant::Q4_1 => {
                        scale(rng, &mut out, f32_scales);
                        scale(rng, &mut out, f32_scales);
                        bytes(rng, &mut out, 16);
                    }
                    OldQuant::Q8_0 => {
                        scale(rng, &mut out, f32_scales);
                        bytes(rng, &mut out, 32);
                    }
                    OldQuant::Q4_2 => {
                        scale(rng, &mut out, false);
                        bytes(rng, &mut out, 8);
                    }
                    OldQuant::Q4_3 => {
                        scale(rng, &mut out, false);
                        scale(rng, &mut out, false);
                        bytes(rng, &mut out, 8);
                    }
                    OldQuant::Q5_0 => {
                        scale(rng, &mut out, false);
                        bytes(rng, &mut out, 20);
                    }
                    OldQuant::Q5_1 => {
                        scale(rng, &mut out, false);
                        scale(rng, &mut out, false);
                        bytes(rng, &mut out, 20);
                    }
                }
            }
        }
    }
    out
}

/// A vocabulary of `n` tokens like llama's: three specials, the 256 single bytes, then words
/// with spaces, an empty token, a non-ASCII one; scores falling with the id.
pub(crate) fn vocab(n: u32) -> Vec<(Vec<u8>, f32)> {
    let words: [&[u8]; 6] = [
        b" the",
        b"hello world",
        b"",
        "\u{e9}t\u{e9}".as_bytes(),
        b" ",
        b"ab",
    ];
    (0..n)
        .map(|id| {
            let text = match id {
                0 => b" \xe2\x81\x87 ".to_vec(),
                1 | 2 => Vec::new(),
                3..=258 => vec![(id - 3) as u8],
                _ => {
                    let mut w = words[id as usize % words.len()].to_vec();
                    if !w.is_empty() {
                        w.extend_from_slice(id.to_string().as_bytes());
                    }
                    w
                }
            };
            (text, -(id as f32) / 8.0)
        })
        .collect()
}

/// The types of every tensor type `container` holds (2D tensors cycle through them).
pub(crate) fn types_of(container: Container) -> &'static [u32] {
    match container {
        Container::Ggml | Container::Ggmf => &[0, 1, 2, 3],
        Container::Ggjt(1) => &[0, 1, 2, 3, 4, 5, 6, 7, 8],
        Container::Ggjt(2) => &[0, 1, 2, 3, 6, 7, 8],
        Container::Ggjt(_) => &[0, 1, 2, 3, 6, 7, 8],
    }
}

/// The tensors of [`fixture`] whose f32 scales (in the eras that store f32 scales) are off the
/// f16 grid, so that they convert to F32: between them and the containers, each of Q4_0, Q4_1
/// and Q8_0 is among them somewhere, and each is also elsewhere with f16-valued scales.
pub(crate) const INEXACT: [&str; 3] = [
    "output.weight",
    "layers.0.attention.wv.weight",
    "layers.0.feed_forward.w2.weight",
];

/// A one-layer llama file in `container` whose 2D tensors cycle through `types` from the
/// third (norms F32), with `n_embd` = `width` (a multiple of the types' block length), 4 heads
/// and a vocabulary of `n_vocab`. The [`INEXACT`] tensors get f32 scales off the f16 grid;
/// every other tensor's scales are f16 values.
pub(crate) fn fixture(
    container: Container,
    types: &[u32],
    width: u32,
    n_vocab: u32,
    seed: u64,
) -> Vec<u8> {
    let hp = Hparams {
        n_vocab,
        n_embd: width,
        n_mult: 32,
        n_head: 4,
        n_layer: 1,
        n_rot: width / 4,
        ftype: 1,
    };
    // Twice the width (not what n_mult says, so tests see that w1's rows win), but for the
    // 256-wide K-quant fixture, kept small.
    let n_ff = if width < 256 { width * 2 } else { width };
    let mut rng = Rng::new(seed);
    let two_d: [(&str, [u32; 2]); 9] = [
        ("tok_embeddings.weight", [width, n_vocab]),
        ("output.weight", [width, n_vocab]),
        ("layers.0.attention.wq.weight", [width, width]),
        ("layers.0.attention.wk.weight", [width, width]),
        ("layers.0.attention.wv.weight", [width, width]),
        ("layers.0.attention.wo.weight", [width, width]),
        ("layers.0.feed_forward.w1.weight", [width, n_ff]),
        ("layers.0.feed_forward.w2.weight", [n_ff, width]),
        ("layers.0.feed_forward.w3.weight", [width, n_ff]),
    ];
    let mut tensors = Vec::new();
    let block_len = |id: u32| match id {
        0 | 1 => 1,
        10..=14 => 256,
        _ => OldQuant::from_id(id).map_or(1, quant_block_len),
    };
    for (i, (name, dims)) in two_d.iter().enumerate() {
        // From the third type on, so that the first tensors are quantized in every container.
        let type_id = types[(i + 2) % types.len()];
        let count = (dims[0] / block_len(type_id) * dims[1]) as usize;
        let inexact = INEXACT.contains(name);
        tensors.push(TensorData {
            name: name.to_string(),
            dims: dims.to_vec(),
            type_id,
            data: blocks(type_id, container, count, inexact, &mut rng),
        });
    }
    for name in [
        "norm.weight",
        "layers.0.attention_norm.weight",
        "layers.0.ffn_norm.weight",
    ] {
        tensors.push(TensorData {
            name: name.to_string(),
            dims: vec![width],
            type_id: 0,
            data: blocks(0, container, width as usize, false, &mut rng),
        });
    }
    write(container, &hp, &vocab(n_vocab), &tensors)
}

/// A vocabulary-only GGJT file of this version, as llama.cpp's old `models/ggml-vocab.bin`:
/// LLaMA 7B's hyperparameters and a 300-token vocabulary.
pub(crate) fn vocab_only_ggjt(version: u32) -> Vec<u8> {
    let hp = Hparams {
        n_vocab: 300,
        n_embd: 4096,
        n_mult: 256,
        n_head: 32,
        n_layer: 32,
        n_rot: 128,
        ftype: 1,
    };
    write(Container::Ggjt(version), &hp, &vocab(300), &[])
}
