//! Project automation: `cargo xtask fixtures [--check]`, `cargo xtask models`, `cargo xtask ci`,
//! `cargo xtask bench-vs-llamacpp`, `cargo xtask load-test`, `cargo xtask synth-model`.

mod bench_vs_llamacpp;
mod cache_files;
mod fixtures;
mod hf_fixtures;
mod hf_json_fixtures;
mod legacy_fixtures;
mod load_test;
mod model_fixtures;
mod synth_model;
mod tokenizer_fixtures;
mod vocab_checkpoints;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

/// Project automation for the workspace.
#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
struct Cli {
    #[command(subcommand)]
    command: Task,
}

#[derive(Subcommand)]
enum Task {
    /// Write the test files in fixtures/ (or fail if they are stale)
    Fixtures {
        /// Write nothing: fail if a file in fixtures/ is stale or missing
        #[arg(long)]
        check: bool,
    },
    /// Fetch the real models (and legacy GGML files, a BERT checkpoint) into the cache
    /// ($GGUF_CACHE or ~/.cache/gguf), and derive from SmolLM2 the tiny mixture-of-experts
    /// checkpoints with its vocabulary
    Models,
    /// Everything CI checks: fixtures, fmt, clippy, tests, benches in test mode, and the NEON
    /// kernels under qemu when the aarch64 cross tools are installed
    Ci,
    /// gguf bench and llama-bench interleaved on the same files: the ratio table
    BenchVsLlamacpp(bench_vs_llamacpp::Args),
    /// A random-weight model of a real model's shapes (a mixture of experts, or its dense
    /// twin), written straight as quantized blocks
    SynthModel(synth_model::Args),
    /// Concurrent streaming chat clients against gguf serve (and llama-server): aggregate
    /// tokens/s, time to first token p50/p99, errors
    LoadTest(load_test::Args),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Task::Fixtures { check } => fixtures::run(&root(), check),
        Task::Models => models(),
        Task::Ci => ci(),
        Task::BenchVsLlamacpp(args) => bench_vs_llamacpp::run(&root(), args),
        Task::LoadTest(args) => load_test::run(&root(), args),
        Task::SynthModel(args) => synth_model::run(args),
    }
}

/// Fetches every known model (verifying cached copies again) and the real legacy files, its
/// steps on stderr; the extraction's progress is left out, as CI logs would only fill with it.
fn models() -> Result<()> {
    for m in gguf_hub::MODELS {
        let p = gguf_hub::pull(m, true, &mut |event| {
            if !matches!(event, gguf_hub::PullEvent::Extracting { .. }) {
                eprintln!("{event}");
            }
        })?;
        println!("{}: {}", m.name, p.display());
    }
    cache_files::fetch()?;
    vocab_checkpoints::derive()
}

fn run(step: &str, cmd: &mut Command) -> Result<()> {
    eprintln!("==> {step}");
    let status = cmd
        .current_dir(root())
        .status()
        .with_context(|| format!("starting {step}"))?;
    if !status.success() {
        bail!("{step} failed ({status})");
    }
    Ok(())
}

fn cargo() -> Command {
    Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

fn ci() -> Result<()> {
    eprintln!("==> real models");
    models()?;
    eprintln!("==> fixtures --check");
    fixtures::run(&root(), true)?;
    run(
        "cargo fmt --check",
        cargo().args(["fmt", "--all", "--", "--check"]),
    )?;
    run(
        "cargo clippy",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    run(
        "cargo doc (broken links are errors)",
        cargo()
            .args(["doc", "--workspace", "--no-deps"])
            .env("RUSTDOCFLAGS", "-D warnings"),
    )?;
    run("cargo test", cargo().args(["test", "--workspace"]))?;
    run(
        "benches in test mode",
        cargo().args(["test", "--workspace", "--benches"]),
    )?;
    // Again on the scalar kernels, the fallback every CPU has.
    forced_isa_tests("scalar")?;
    // Each narrower x86 instruction set this CPU has besides the widest one, which the plain
    // run above used: on an AVX-512 machine the AVX2 path runs too, and must give the same
    // logits (on an AVX2 machine the AVX-512 kernels cannot run, and say so).
    let widest = gguf_quant::isa();
    for isa in [
        gguf_quant::Isa::Avx512,
        gguf_quant::Isa::AvxVnni,
        gguf_quant::Isa::Avx2,
    ] {
        if isa == widest {
            continue;
        }
        if isa.available() {
            forced_isa_tests(isa.name())?;
        } else {
            eprintln!("==> skipping the {} kernels: not on this CPU", isa.name());
        }
    }
    aarch64_tests()
}

/// The kernels' crate with the process told to use instruction set `isa` (`GGUF_FORCE_ISA`):
/// the dispatch, products and pool on that path (every SIMD table this CPU has is still
/// tested against its twins). Then the models: every ISA keeps the AVX2 order, so the tiny
/// models' and the real models' first logits must again be llama.cpp's AVX2 logits exactly.
/// (The greedy completions and perplexities agree too, but take 12 minutes on the scalar path
/// in the test profile; the first logits already compare every logit.)
fn forced_isa_tests(isa: &str) -> Result<()> {
    let forced = |step: &str, args: &[&str]| {
        run(
            &format!("{step} with GGUF_FORCE_ISA={isa}"),
            cargo()
                .args(["test", "-p"])
                .args(args)
                .env("GGUF_FORCE_ISA", isa),
        )
    };
    forced("gguf-quant", &["gguf-quant"])?;
    forced(
        "tiny models' logits",
        &["gguf-model", "--test", "tiny_models"],
    )?;
    forced(
        "real models' first logits",
        &["gguf-model", "--test", "real_model", "--", "first_logits"],
    )?;
    forced(
        "sequences batched together equal lone sessions",
        &["gguf-model", "--test", "parallel"],
    )
}

/// The NEON kernels, built for aarch64 and run under qemu. Runs when the cross tools are there
/// (`.ci/run` installs them); on CI their absence is an error, elsewhere a skip.
fn aarch64_tests() -> Result<()> {
    let have = |cmd: &str| {
        Command::new(cmd)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    let target_installed = Command::new("rustup")
        .args(["target", "list", "--installed"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("aarch64-unknown-linux-gnu"));
    if !(have("aarch64-linux-gnu-gcc") && have("qemu-aarch64") && target_installed) {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            bail!("aarch64 cross tools missing on CI (gcc-aarch64-linux-gnu, qemu-user, rustup target aarch64-unknown-linux-gnu)");
        }
        eprintln!("==> skipping aarch64 (NEON) tests: install gcc-aarch64-linux-gnu and qemu-user, and `rustup target add aarch64-unknown-linux-gnu`");
        return Ok(());
    }
    run(
        "gguf-quant on aarch64 under qemu (NEON kernels)",
        cargo()
            .args(["test", "-p", "gguf-quant", "--lib", "--test", "matvec"])
            .args(["--target", "aarch64-unknown-linux-gnu"])
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER",
                "aarch64-linux-gnu-gcc",
            )
            .env(
                "CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER",
                "qemu-aarch64 -L /usr/aarch64-linux-gnu",
            ),
    )
}
