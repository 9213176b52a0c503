//! Tiny random-weight models of each architecture `gguf-model` runs, laid out as llama.cpp's
//! converters write them, so llama.cpp (`libllama`) loads them and gives reference logits
//! (`crates/gguf-model/tests/data/tiny/`).
//!
//! Every file: 64-wide residual stream, 2 blocks, 4 query heads sharing 2 key/value heads
//! (grouped-query attention), f32 norms, matrices quantized with `gguf-quant`'s reference
//! quantizers, and a real tokenizer (a SentencePiece vocabulary with byte fallback for
//! `llama`/`mistral`, a byte-level GPT-2 BPE with merges and `pre = qwen2` for the Qwens).
//! Weights come from a seeded xorshift generator, so the bytes never change.
//!
//! The seeds are not arbitrary: llama.cpp's run of each model (see
//! `crates/gguf-model/tests/data/tiny/reference_logits.c`) keeps every quantized activation and
//! every Q8 block scale at least 8 float ulps from its rounding boundary, so an engine whose sums
//! differ from llama.cpp's in the last bit still rounds them all the same way. Changing a model
//! here means regenerating the references and checking their `conditioning` (the test does).
//!
//! | file | arch | what it exercises |
//! |------|------|-------------------|
//! | `model-llama.gguf` | `llama` | separate `output.weight` (Q8_0), F16 `token_embd`, Q8_0/Q5_0/Q4_0/Q4_1 matrices; `llama.attention.sliding_window = 8`, which llama.cpp ignores for `llama` |
//! | `model-mistral.gguf` | `mistral` | `mistral.attention.sliding_window = 8` (a 20-token prompt crosses it); tied Q8_0 `token_embd`; Q5_1 feed-forward |
//! | `model-qwen2.gguf` | `qwen2` | f32 biases on Q, K and V; NeoX RoPE with base 1e6; tied Q8_0 `token_embd`; Q4_K `ffn_down` (n_ff 256) |
//! | `model-qwen3.gguf` | `qwen3` | per-head Q/K RMS norms; head dimension 32 set by `attention.key_length` (4 heads × 32 = 128 ≠ 64); separate Q4_0 output; Q6_K `ffn_down` |

use anyhow::{ensure, Result};
use gguf_format::{GgmlType, GgufBuilder};
// The tests' generator: its stream is pinned by a test there, so the bytes never change.
use gguf_test_support::Rng;

/// `tokenizer.ggml.token_type` values.
const NORMAL: i32 = 1;
const UNKNOWN: i32 = 2;
const CONTROL: i32 = 3;
const BYTE: i32 = 6;

/// Which tokenizer a model carries.
#[derive(Clone, Copy)]
enum VocabKind {
    /// SentencePiece (`tokenizer.ggml.model = llama`) with `<0xXX>` byte tokens.
    Spm,
    /// Byte-level BPE (`gpt2`) with `pre = qwen2`.
    Qwen,
}

/// One tiny model.
struct Spec {
    file: &'static str,
    arch: &'static str,
    seed: u64,
    n_ff: usize,
    /// Per-head dimension; written as `attention.key_length`/`value_length` when it is not
    /// `n_embd / n_head`.
    head_dim: usize,
    rms_eps: f32,
    rope_base: Option<f32>,
    sliding_window: Option<u32>,
    vocab: VocabKind,
    embd: GgmlType,
    /// `output.weight`'s type, or `None` to tie it to `token_embd`.
    output: Option<GgmlType>,
    /// Types of attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down.
    mats: [GgmlType; 7],
    qkv_bias: bool,
    qk_norm: bool,
}

const N_EMBD: usize = 64;
const N_LAYER: usize = 2;
const N_HEAD: usize = 4;
const N_HEAD_KV: usize = 2;
const N_CTX_TRAIN: u32 = 512;

fn specs() -> Vec<Spec> {
    use GgmlType::*;
    vec![
        Spec {
            file: "model-llama.gguf",
            arch: "llama",
            seed: 12,
            n_ff: 128,
            head_dim: 16,
            rms_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: Some(8),
            vocab: VocabKind::Spm,
            embd: F16,
            output: Some(Q8_0),
            mats: [Q8_0, Q8_0, Q5_0, Q4_0, Q4_0, Q4_1, Q8_0],
            qkv_bias: false,
            qk_norm: false,
        },
        Spec {
            file: "model-mistral.gguf",
            arch: "mistral",
            seed: 109,
            n_ff: 128,
            head_dim: 16,
            rms_eps: 1e-5,
            rope_base: Some(10_000.0),
            sliding_window: Some(8),
            vocab: VocabKind::Spm,
            embd: Q8_0,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q4_0, Q5_1, Q5_1, Q8_0],
            qkv_bias: false,
            qk_norm: false,
        },
        Spec {
            file: "model-qwen2.gguf",
            arch: "qwen2",
            seed: 286,
            n_ff: 256,
            head_dim: 16,
            rms_eps: 1e-6,
            rope_base: Some(1_000_000.0),
            sliding_window: None,
            vocab: VocabKind::Qwen,
            embd: Q8_0,
            output: None,
            mats: [Q8_0, Q8_0, Q8_0, Q4_0, Q4_0, Q4_0, Q4_K],
            qkv_bias: true,
            qk_norm: false,
        },
        Spec {
            file: "model-qwen3.gguf",
            arch: "qwen3",
            seed: 382,
            n_ff: 256,
            head_dim: 32,
            rms_eps: 1e-6,
            rope_base: Some(1_000_000.0),
            sliding_window: None,
            vocab: VocabKind::Qwen,
            embd: F16,
            output: Some(Q4_0),
            mats: [Q8_0, Q8_0, Q8_0, Q8_0, Q5_0, Q5_0, Q6_K],
            qkv_bias: false,
            qk_norm: true,
        },
    ]
}

/// Every model fixture, by file name.
pub fn files() -> Result<Vec<(String, Vec<u8>)>> {
    specs()
        .iter()
        .map(|s| Ok((s.file.to_string(), model(s)?)))
        .collect()
}

/// A tensor to write: name, type, shape (ggml order) and f32 values.
struct Tensor {
    name: String,
    ty: GgmlType,
    shape: Vec<u64>,
    values: Vec<f32>,
}

fn model(s: &Spec) -> Result<Vec<u8>> {
    let ((tokens, scores, types), merges) = match s.vocab {
        VocabKind::Spm => (spm_vocab()?, Vec::new()),
        VocabKind::Qwen => qwen_vocab()?,
    };
    let n_vocab = tokens.len();
    let mut rng = Rng::new(s.seed);
    let mut tensors = Vec::new();
    // Uniform values of standard deviation `std` around `mean`.
    let mut fill = |name: String, ty: GgmlType, shape: &[usize], mean: f32, std: f32| {
        let n: usize = shape.iter().product();
        let a = std * 3f32.sqrt();
        let values = (0..n).map(|_| mean + a * rng.unit()).collect();
        tensors.push(Tensor {
            name,
            ty,
            shape: shape.iter().map(|&d| d as u64).collect(),
            values,
        });
    };
    let (d, hd, ff) = (N_EMBD, s.head_dim, s.n_ff);
    let (q_out, kv_out) = (N_HEAD * hd, N_HEAD_KV * hd);
    // Gains keep the residual stream O(1), attention neither uniform nor one-hot, and logits
    // spread by a few units so the argmax is clear.
    let mat_std = |cols: usize, gain: f32| gain / (cols as f32).sqrt();
    fill("token_embd.weight".into(), s.embd, &[d, n_vocab], 0.0, 1.0);
    for i in 0..N_LAYER {
        let t = |x: &str| format!("blk.{i}.{x}");
        let [wq, wk, wv, wo, wg, wu, wd] = s.mats;
        fill(t("attn_norm.weight"), GgmlType::F32, &[d], 1.0, 0.2);
        fill(t("attn_q.weight"), wq, &[d, q_out], 0.0, mat_std(d, 1.6));
        fill(t("attn_k.weight"), wk, &[d, kv_out], 0.0, mat_std(d, 1.6));
        fill(t("attn_v.weight"), wv, &[d, kv_out], 0.0, mat_std(d, 1.0));
        if s.qkv_bias {
            fill(t("attn_q.bias"), GgmlType::F32, &[q_out], 0.0, 0.5);
            fill(t("attn_k.bias"), GgmlType::F32, &[kv_out], 0.0, 0.5);
            fill(t("attn_v.bias"), GgmlType::F32, &[kv_out], 0.0, 0.2);
        }
        if s.qk_norm {
            fill(t("attn_q_norm.weight"), GgmlType::F32, &[hd], 1.2, 0.3);
            fill(t("attn_k_norm.weight"), GgmlType::F32, &[hd], 1.2, 0.3);
        }
        fill(
            t("attn_output.weight"),
            wo,
            &[q_out, d],
            0.0,
            mat_std(q_out, 1.0),
        );
        fill(t("ffn_norm.weight"), GgmlType::F32, &[d], 1.0, 0.2);
        fill(t("ffn_gate.weight"), wg, &[d, ff], 0.0, mat_std(d, 1.5));
        fill(t("ffn_up.weight"), wu, &[d, ff], 0.0, mat_std(d, 1.5));
        fill(t("ffn_down.weight"), wd, &[ff, d], 0.0, mat_std(ff, 1.0));
    }
    fill("output_norm.weight".into(), GgmlType::F32, &[d], 1.0, 0.2);
    if let Some(ty) = s.output {
        fill(
            "output.weight".into(),
            ty,
            &[d, n_vocab],
            0.0,
            mat_std(d, 3.0),
        );
    }

    let a = s.arch;
    let k = |suffix: &str| format!("{a}.{suffix}");
    let mut b = GgufBuilder::new();
    b.set("general.architecture", a)
        .set("general.name", format!("tiny random {a}"))
        .set("general.quantization_version", 2u32)
        .set(&k("vocab_size"), n_vocab as u32)
        .set(&k("context_length"), N_CTX_TRAIN)
        .set(&k("embedding_length"), N_EMBD as u32)
        .set(&k("block_count"), N_LAYER as u32)
        .set(&k("feed_forward_length"), s.n_ff as u32)
        .set(&k("attention.head_count"), N_HEAD as u32)
        .set(&k("attention.head_count_kv"), N_HEAD_KV as u32)
        .set(&k("attention.layer_norm_rms_epsilon"), s.rms_eps);
    if let Some(base) = s.rope_base {
        b.set(&k("rope.freq_base"), base);
    }
    if hd != N_EMBD / N_HEAD {
        b.set(&k("attention.key_length"), hd as u32)
            .set(&k("attention.value_length"), hd as u32);
    }
    if matches!(a, "llama" | "mistral") {
        b.set(&k("rope.dimension_count"), hd as u32);
    }
    if let Some(w) = s.sliding_window {
        b.set(&k("attention.sliding_window"), w);
    }
    let n_tokens = tokens.len();
    match s.vocab {
        VocabKind::Spm => {
            b.set("tokenizer.ggml.model", "llama")
                .set("tokenizer.ggml.pre", "default")
                .set("tokenizer.ggml.tokens", tokens)
                .set("tokenizer.ggml.scores", scores)
                .set("tokenizer.ggml.token_type", types)
                .set("tokenizer.ggml.bos_token_id", 1u32)
                .set("tokenizer.ggml.eos_token_id", 2u32)
                .set("tokenizer.ggml.unknown_token_id", 0u32)
                .set("tokenizer.ggml.add_bos_token", true)
                .set("tokenizer.ggml.add_eos_token", false);
        }
        VocabKind::Qwen => {
            let id = |t: &str| tokens.iter().position(|x| x == t).map(|i| i as u32);
            let (Some(eot), Some(im_end)) = (id("<|endoftext|>"), id("<|im_end|>")) else {
                anyhow::bail!("special tokens missing");
            };
            b.set("tokenizer.ggml.model", "gpt2")
                .set("tokenizer.ggml.pre", "qwen2")
                .set("tokenizer.ggml.tokens", tokens)
                .set("tokenizer.ggml.token_type", types)
                .set("tokenizer.ggml.merges", merges)
                .set("tokenizer.ggml.bos_token_id", eot)
                .set("tokenizer.ggml.eos_token_id", im_end)
                .set("tokenizer.ggml.padding_token_id", eot)
                .set("tokenizer.ggml.add_bos_token", false);
        }
    }
    ensure!(n_tokens == n_vocab, "vocabulary size mismatch");
    for t in &tensors {
        b.add_tensor(&t.name, t.ty, &t.shape)?;
    }
    let mut out = Vec::new();
    let mut w = b.write(&mut out)?;
    for t in &tensors {
        let size = t.ty.tensor_size(&t.shape).expect("valid shape") as usize;
        let mut bytes = vec![0u8; size];
        gguf_quant::quantize_row(t.ty, &t.values, &mut bytes)?;
        w.write_tensor(&bytes)?;
    }
    w.finish()?;
    Ok(out)
}

type VocabLists = (Vec<String>, Vec<f32>, Vec<i32>);

/// Words whose pieces (SentencePiece) or merge chains (BPE) the vocabularies hold.
const WORDS: &[&str] = &[
    "the", "of", "and", "to", "in", "is", "it", "that", "hello", "world", "model", "token", "tiny",
    "test", "llama", "qwen", "mistral", "random", "weight", "window",
];

/// A SentencePiece vocabulary as llama.cpp's converter writes one: `<unk>`, `<s>`, `</s>`, the
/// 256 byte-fallback tokens `<0xXX>`, then `▁`, the letters, and every `▁`-prefix of each word,
/// scored so that longer pieces merge first.
fn spm_vocab() -> Result<VocabLists> {
    let mut tokens: Vec<String> = vec!["<unk>".into(), "<s>".into(), "</s>".into()];
    let mut types = vec![UNKNOWN, CONTROL, CONTROL];
    for byte in 0..=255u8 {
        tokens.push(format!("<0x{byte:02X}>"));
        types.push(BYTE);
    }
    let mut pieces: Vec<String> = vec!["\u{2581}".into()];
    pieces.extend(('a'..='z').map(String::from));
    for w in WORDS {
        let word: Vec<char> = format!("\u{2581}{w}").chars().collect();
        for end in 2..=word.len() {
            let p: String = word[..end].iter().collect();
            if !pieces.contains(&p) {
                pieces.push(p);
            }
        }
    }
    let mut scores = vec![0.0f32; tokens.len()];
    for (i, p) in pieces.into_iter().enumerate() {
        // Longer pieces score higher so whole words win; ties broken by order.
        let len = p.chars().count() as f32;
        scores.push(len - 1e-3 * i as f32 - 100.0);
        tokens.push(p);
        types.push(NORMAL);
    }
    check_unique(&tokens)?;
    Ok((tokens, scores, types))
}

/// GPT-2's byte-to-character map (`bytes_to_unicode`).
fn byte_char(b: u8) -> char {
    let printable = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    if printable(b) {
        return char::from(b);
    }
    let n = (0..b).filter(|&x| !printable(x)).count() as u32;
    char::from_u32(256 + n).expect("valid char")
}

/// A byte-level BPE vocabulary in Qwen's layout: the 256 byte characters, one token per merge
/// (each word merged left to right, `Ġ`-prefixed and bare), then the special tokens.
fn qwen_vocab() -> Result<(VocabLists, Vec<String>)> {
    let mut tokens: Vec<String> = (0..=255u8).map(|b| byte_char(b).to_string()).collect();
    let mut merges: Vec<String> = Vec::new();
    let space = byte_char(b' ');
    for w in WORDS {
        for word in [format!("{space}{w}"), w.to_string()] {
            let chars: Vec<char> = word.chars().collect();
            let mut left = chars[0].to_string();
            for &c in &chars[1..] {
                let merged = format!("{left}{c}");
                if !tokens.contains(&merged) {
                    merges.push(format!("{left} {c}"));
                    tokens.push(merged.clone());
                }
                left = merged;
            }
        }
    }
    let mut types = vec![NORMAL; tokens.len()];
    for special in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] {
        tokens.push(special.into());
        types.push(CONTROL);
    }
    check_unique(&tokens)?;
    Ok(((tokens, Vec::new(), types), merges))
}

fn check_unique(tokens: &[String]) -> Result<()> {
    let unique: std::collections::BTreeSet<&String> = tokens.iter().collect();
    ensure!(unique.len() == tokens.len(), "duplicate token");
    Ok(())
}
