//! `cargo xtask synth-model`: a random-weight model of a real model's shapes, for speed
//! measurements at scale (`bench-vs-llamacpp`), written straight as quantized blocks: each
//! block's bytes random, its scales set to small valid f16 values, so no f32 or f16 copy of
//! the weights is ever made. Tensor types follow llama-quantize's rules for the file type
//! (`gguf_model::quantize::plan`), so a "Q4_K_M" file has the mixture a real one has.
//!
//! Shapes are the preset's (`--preset qwen3-30b-a3b`, `olmoe-1b-7b`) with `--layers` blocks;
//! `--dense` writes the dense model with the same active parameters per token (the experts a
//! token uses as one feed-forward network of `n_used * n_ff_exp`), the other side of "a MoE
//! token costs its active parameters".

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, ensure, Context, Result};
use gguf_format::tensor_names::TensorName as T;
use gguf_format::{GgmlType, GgufBuilder};
use gguf_model::quantize::{plan, FileType, ModelFacts, PlanOptions, TensorDesc};
use gguf_test_support::Rng;
use half::f16;

/// The options of `cargo xtask synth-model`.
#[derive(clap::Args)]
pub struct Args {
    /// The shapes: qwen3-30b-a3b or olmoe-1b-7b
    #[arg(long, default_value = "olmoe-1b-7b")]
    preset: String,
    /// Transformer blocks (the real models' 48 and 16 do not fit a small machine)
    #[arg(long, default_value_t = 4)]
    layers: usize,
    /// The dense model with the same active parameters instead of the mixture
    #[arg(long)]
    dense: bool,
    /// llama-quantize's file type whose tensor types the file takes
    #[arg(long, default_value = "Q4_K_M")]
    ftype: String,
    /// The file to write
    out: PathBuf,
}

/// A preset's shapes.
struct Shape {
    arch: &'static str,
    n_embd: usize,
    n_head: usize,
    n_head_kv: usize,
    head_dim: usize,
    n_ff_exp: usize,
    n_expert: usize,
    n_used: usize,
    n_vocab: usize,
    /// Per-head Q/K norms (Qwen 3) or whole-row ones (OLMoE).
    qk_norm_whole_rows: bool,
}

fn preset(name: &str) -> Result<Shape> {
    Ok(match name {
        "qwen3-30b-a3b" => Shape {
            arch: "qwen3moe",
            n_embd: 2048,
            n_head: 32,
            n_head_kv: 4,
            head_dim: 128,
            n_ff_exp: 768,
            n_expert: 128,
            n_used: 8,
            n_vocab: 151_936,
            qk_norm_whole_rows: false,
        },
        "olmoe-1b-7b" => Shape {
            arch: "olmoe",
            n_embd: 2048,
            n_head: 16,
            n_head_kv: 16,
            head_dim: 128,
            n_ff_exp: 1024,
            n_expert: 64,
            n_used: 8,
            n_vocab: 50_304,
            qk_norm_whole_rows: true,
        },
        other => bail!("unknown preset {other:?} (qwen3-30b-a3b, olmoe-1b-7b)"),
    })
}

/// One tensor: name, shape, and whether it is a norm (kept F32, filled near 1).
struct Planned {
    name: String,
    shape: Vec<u64>,
    norm: bool,
}

pub fn run(args: Args) -> Result<()> {
    let s = preset(&args.preset)?;
    let ft = FileType::from_name(&args.ftype)
        .with_context(|| format!("unknown file type {:?}", args.ftype))?;
    // The dense twin: qwen3 (per-head norms) for Qwen3-MoE; llama-shaped OLMoE has no dense
    // architecture of its own here, so its twin is qwen3 with whole-row norms dropped.
    let arch = match args.dense {
        true => "qwen3",
        false => s.arch,
    };
    let (d, hd, layers) = (s.n_embd as u64, s.head_dim as u64, args.layers);
    let (q, kv) = (s.n_head as u64 * hd, s.n_head_kv as u64 * hd);
    let mut tensors = vec![Planned {
        name: T::TokenEmbd.weight().into(),
        shape: vec![d, s.n_vocab as u64],
        norm: false,
    }];
    let mut push = |name: String, shape: &[u64], norm: bool| {
        tensors.push(Planned {
            name,
            shape: shape.to_vec(),
            norm,
        })
    };
    for i in 0..layers {
        push(T::AttnNorm.block_weight(i), &[d], true);
        push(T::AttnQ.block_weight(i), &[d, q], false);
        push(T::AttnK.block_weight(i), &[d, kv], false);
        push(T::AttnV.block_weight(i), &[d, kv], false);
        let (qn, kn) = match s.qk_norm_whole_rows && !args.dense {
            true => (q, kv),
            false => (hd, hd),
        };
        push(T::AttnQNorm.block_weight(i), &[qn], true);
        push(T::AttnKNorm.block_weight(i), &[kn], true);
        push(T::AttnOut.block_weight(i), &[q, d], false);
        push(T::FfnNorm.block_weight(i), &[d], true);
        let (ne, fe) = (s.n_expert as u64, s.n_ff_exp as u64);
        if args.dense {
            let ff = fe * s.n_used as u64;
            push(T::FfnGate.block_weight(i), &[d, ff], false);
            push(T::FfnUp.block_weight(i), &[d, ff], false);
            push(T::FfnDown.block_weight(i), &[ff, d], false);
        } else {
            // The router is F32 in real files (llama-quantize leaves it).
            push(T::FfnGateInp.block_weight(i), &[d, ne], true);
            push(T::FfnGateExps.block_weight(i), &[d, fe, ne], false);
            push(T::FfnUpExps.block_weight(i), &[d, fe, ne], false);
            push(T::FfnDownExps.block_weight(i), &[fe, d, ne], false);
        }
    }
    push(T::OutputNorm.weight().into(), &[d], true);
    push(T::Output.weight().into(), &[d, s.n_vocab as u64], false);

    let facts = ModelFacts {
        arch: arch.to_string(),
        n_layer: layers as u32,
        n_head: s.n_head as u32,
        n_head_kv: s.n_head_kv as u32,
        n_expert: if args.dense { 0 } else { s.n_expert as u32 },
    };
    let descs: Vec<TensorDesc<'_>> = tensors
        .iter()
        .map(|t| TensorDesc {
            name: &t.name,
            ggml_type: GgmlType::F32,
            shape: &t.shape,
        })
        .collect();
    let types = plan(ft, &facts, &descs, &PlanOptions::default())?.types;

    let mut b = GgufBuilder::new();
    let k = |suffix: &str| format!("{arch}.{suffix}");
    b.set("general.architecture", arch)
        .set(
            "general.name",
            format!("synthetic {} ({layers} layers)", args.preset),
        )
        .set("general.file_type", ft.id())
        .set("general.quantization_version", 2u32)
        .set(&k("context_length"), 4096u32)
        .set(&k("embedding_length"), s.n_embd as u32)
        .set(&k("block_count"), layers as u32)
        .set(&k("attention.head_count"), s.n_head as u32)
        .set(&k("attention.head_count_kv"), s.n_head_kv as u32)
        .set(&k("attention.key_length"), s.head_dim as u32)
        .set(&k("attention.value_length"), s.head_dim as u32)
        .set(&k("attention.layer_norm_rms_epsilon"), 1e-6f32)
        .set(&k("rope.freq_base"), 1_000_000f32);
    if args.dense {
        b.set(&k("feed_forward_length"), (s.n_ff_exp * s.n_used) as u32);
    } else {
        b.set(&k("feed_forward_length"), s.n_ff_exp as u32)
            .set(&k("expert_feed_forward_length"), s.n_ff_exp as u32)
            .set(&k("expert_count"), s.n_expert as u32)
            .set(&k("expert_used_count"), s.n_used as u32);
    }
    // A byte-level BPE vocabulary: GPT-2's 256 byte characters, one merge, then filler tokens.
    let mut tokens: Vec<String> = (0..=255u8)
        .map(|c| crate::model_fixtures::byte_char(c).to_string())
        .collect();
    let space = crate::model_fixtures::byte_char(b' ');
    tokens.push(format!("{space}t"));
    tokens.extend((tokens.len()..s.n_vocab).map(|i| format!("tok{i}")));
    b.set("tokenizer.ggml.model", "gpt2")
        .set("tokenizer.ggml.pre", "qwen2")
        .set("tokenizer.ggml.tokens", tokens)
        .set("tokenizer.ggml.token_type", vec![1i32; s.n_vocab])
        .set("tokenizer.ggml.merges", vec![format!("{space} t")])
        .set("tokenizer.ggml.bos_token_id", 0u32)
        .set("tokenizer.ggml.eos_token_id", 1u32);
    for (t, &ty) in tensors.iter().zip(&types) {
        let ty = if t.norm { GgmlType::F32 } else { ty };
        b.add_tensor(&t.name, ty, &t.shape)?;
    }
    let file = std::fs::File::create(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let mut w = b.write(std::io::BufWriter::new(file))?;
    let mut rng = Rng::new(42);
    let mut total = 0u64;
    for (t, &ty) in tensors.iter().zip(&types) {
        let ty = if t.norm { GgmlType::F32 } else { ty };
        let bytes = random_tensor(&mut rng, ty, &t.shape, t.norm)?;
        total += bytes.len() as u64;
        w.write_tensor(&bytes)?;
    }
    w.finish()?.flush()?;
    eprintln!(
        "wrote {} ({arch}, {layers} layers, {:.2} GiB of tensors)",
        args.out.display(),
        total as f64 / f64::from(1u32 << 30)
    );
    Ok(())
}

/// A tensor's bytes: F32 values (near 1 for norms, small otherwise) or random blocks of `ty`
/// with valid scales.
fn random_tensor(rng: &mut Rng, ty: GgmlType, shape: &[u64], norm: bool) -> Result<Vec<u8>> {
    let n: u64 = shape.iter().product();
    if ty == GgmlType::F32 {
        let base = if norm { 1.0 } else { 0.0 };
        return Ok((0..n)
            .flat_map(|_| (base + 0.02 * rng.unit()).to_le_bytes())
            .collect());
    }
    let size = ty
        .tensor_size(shape)
        .with_context(|| format!("{ty} cannot hold {shape:?}"))? as usize;
    let mut bytes = vec![0u8; size];
    for chunk in bytes.chunks_mut(8) {
        chunk.copy_from_slice(&rng.next().to_le_bytes()[..chunk.len()]);
    }
    // Where each block keeps its f16 scales, and their size: small enough that random
    // quants give weights of a few hundredths.
    let (block, scales, d): (usize, &[usize], f32) = match ty {
        GgmlType::Q8_0 => (34, &[0], 2e-4),
        GgmlType::Q4_0 | GgmlType::Q4_1 => (ty.type_size() as usize, &[0], 4e-3),
        GgmlType::Q5_0 | GgmlType::Q5_1 => (ty.type_size() as usize, &[0], 2e-3),
        GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q2_K => {
            (ty.type_size() as usize, &[0, 2], 2e-4)
        }
        GgmlType::Q6_K => (210, &[208], 2e-4),
        GgmlType::Q3_K => (110, &[108], 2e-4),
        other => bail!("synthetic blocks of {other} are not written"),
    };
    ensure!(
        size.is_multiple_of(block),
        "{ty}: {size} bytes are not whole blocks"
    );
    let scale = f16::from_f32(d).to_le_bytes();
    for b in bytes.chunks_exact_mut(block) {
        for &at in scales {
            b[at..at + 2].copy_from_slice(&scale);
        }
    }
    Ok(bytes)
}
