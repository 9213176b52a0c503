//! Project automation: `cargo xtask fixtures [--check]`, `cargo xtask models`, `cargo xtask ci`.

mod fixtures;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives in the workspace root")
        .to_path_buf()
}

fn usage() -> &'static str {
    "usage: cargo xtask <command>\n\
     \n  fixtures [--check]  write the test files in fixtures/ (or fail if they are stale)\
     \n  models              fetch the real models into the cache ($GGUF_CACHE or ~/.cache/gguf)\
     \n  ci                  everything CI checks: fixtures, fmt, clippy, tests, benches in test mode"
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("fixtures") => fixtures::run(&root(), args.iter().any(|a| a == "--check")),
        Some("models") => models(),
        Some("ci") => ci(),
        _ => {
            eprintln!("{}", usage());
            bail!("unknown or missing command")
        }
    }
}

fn models() -> Result<()> {
    for m in gguf_cli::models::MODELS {
        let p = gguf_cli::models::pull(m, true)?;
        println!("{}: {}", m.name, p.display());
    }
    Ok(())
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
    run("cargo test", cargo().args(["test", "--workspace"]))?;
    run(
        "benches in test mode",
        cargo().args(["test", "--workspace", "--benches"]),
    )?;
    Ok(())
}
