//! The `gguf` binary end to end.

mod common;

use common::gguf;
use gguf_test_support::{fixture, run_ok};

#[test]
fn inspect_json_has_the_documented_shape() {
    let out = run_ok(
        gguf()
            .args(["inspect", "--json"])
            .arg(fixture("all-types-be.gguf")),
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "version",
            "byte_order",
            "alignment",
            "data_offset",
            "tensor_count",
            "metadata",
            "tensors"
        ]
    );
    assert_eq!(v["byte_order"], "big");
    assert_eq!(v["version"], 3);
    assert_eq!(v["tensor_count"], 6);
    let meta = v["metadata"].as_array().unwrap();
    let find = |k: &str| meta.iter().find(|m| m["key"] == k).unwrap().clone();
    assert_eq!(
        find("test.u64"),
        serde_json::json!({"key": "test.u64", "type": "u64", "value": 9223372036854775813u64})
    );
    assert_eq!(find("test.f32")["value"], 1.5);
    assert_eq!(
        find("test.array.f32")["value"],
        serde_json::json!([0.5, -2.0, 1e-5])
    );
    assert_eq!(
        find("test.array.string"),
        serde_json::json!({"key": "test.array.string", "type": "array", "element_type": "string", "len": 3, "value": ["a", "", "\u{fc}"]})
    );
    assert_eq!(
        find("test.array.nested")["value"],
        serde_json::json!([[1, 2], [3]])
    );
    let t = &v["tensors"][2];
    assert_eq!(
        *t,
        serde_json::json!({"name": "q8_0", "type": "Q8_0", "shape": [64, 2], "offset": 64, "size": 136})
    );
}

#[test]
fn inspect_text_summarises() {
    let out = gguf()
        .arg("inspect")
        .arg(fixture("all-types-v1.gguf"))
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("GGUF v1, little-endian, alignment 32"),
        "{text}"
    );
    assert!(text.contains("test.array.string"));
    assert!(text.contains("Q4_K"));
    assert!(text.contains("By type:"));
}

#[test]
fn errors_go_to_stderr_without_a_panic() {
    let out = gguf()
        .arg("inspect")
        .arg(fixture("corrupt/tensor-out-of-bounds.gguf"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("tensor-out-of-bounds.gguf: at byte 24: tensor 't' needs bytes 64..320"),
        "{err}"
    );
    assert!(!err.contains("panicked"));
    assert!(out.stdout.is_empty());
    let out = gguf()
        .args(["inspect", "no-such-model-or-file"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("not a known model name (known: smollm2-135m, gemma3-270m)"));
}

#[test]
fn edit_split_merge_through_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let edited = dir.path().join("edited.gguf");
    run_ok(
        gguf()
            .arg("edit")
            .arg(fixture("all-types-v3.gguf"))
            .arg("-o")
            .arg(&edited)
            .args([
                "--set",
                "general.name=renamed",
                "--set",
                "new.key:u16=9",
                "--remove",
                "test.u8",
                "--rename",
                "test.i8=test.signed",
            ]),
    );
    let json = gguf()
        .args(["inspect", "--json"])
        .arg(&edited)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let keys: Vec<&str> = v["metadata"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["key"].as_str().unwrap())
        .collect();
    assert_eq!(
        &keys[..3],
        ["general.architecture", "general.name", "test.signed"]
    );
    assert_eq!(keys.last(), Some(&"new.key"));
    assert_eq!(v["metadata"][1]["value"], "renamed");
    // Editing refuses to overwrite without --force, and a failed edit leaves the output alone.
    let before = std::fs::read(&edited).unwrap();
    let out = gguf()
        .arg("edit")
        .arg(fixture("all-types-v3.gguf"))
        .arg("-o")
        .arg(&edited)
        .args(["--remove", "x"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let out = gguf()
        .arg("edit")
        .arg(&edited)
        .arg("--in-place")
        .args(["--remove", "no.such.key"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("'no.such.key' is missing"));
    assert_eq!(std::fs::read(&edited).unwrap(), before);
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary file left behind"
    );

    let prefix = dir.path().join("part");
    run_ok(
        gguf()
            .arg("split")
            .arg(&edited)
            .arg(&prefix)
            .args(["--max-tensors", "4"]),
    );
    let first = dir.path().join("part-00001-of-00002.gguf");
    let v = gguf()
        .args(["validate", "--json"])
        .arg(&first)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&v.stdout).unwrap();
    assert_eq!(
        (v["parts"].as_u64(), v["tensors"].as_u64()),
        (Some(2), Some(6))
    );
    let merged = dir.path().join("merged.gguf");
    run_ok(gguf().arg("merge").arg(&first).arg(&merged));
    let out = gguf()
        .arg("merge")
        .arg(&first)
        .arg(&first)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stderr).contains("refusing to write over it"));
}

#[test]
fn dequantize_writes_npy_and_stats_describe_tensors() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("q8.npy");
    run_ok(
        gguf()
            .arg("dequantize")
            .arg(fixture("all-types-v3.gguf"))
            .args(["q8_0", "-o"])
            .arg(&npy),
    );
    let bytes = std::fs::read(&npy).unwrap();
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
    assert_eq!((10 + header_len) % 64, 0);
    assert!(
        header.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 64), }"),
        "{header}"
    );
    let values: Vec<f32> = bytes[10 + header_len..]
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(values.len(), 128);
    // The same values as the library's dequantization of the tensor's bytes.
    let file_bytes = std::fs::read(fixture("all-types-v3.gguf")).unwrap();
    let file = gguf_format::GgufFile::parse(&file_bytes).unwrap();
    let t = file.tensor("q8_0").unwrap();
    let expected = gguf_quant::dequantize(t.ggml_type, file.tensor_data(t), 128).unwrap();
    assert_eq!(values, expected);

    let out = gguf()
        .args(["inspect", "--tensors", "--stats", "--json"])
        .arg(fixture("all-types-v3.gguf"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v.get("metadata").is_none());
    let f32_tensor = &v["tensors"][0];
    let raw = file.tensor_data(file.tensor("f32").unwrap());
    let xs: Vec<f32> = raw
        .chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let min = xs.iter().copied().fold(f32::INFINITY, f32::min);
    let max = xs.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    assert_eq!(f32_tensor["stats"]["min"].as_f64().unwrap() as f32, min);
    assert_eq!(f32_tensor["stats"]["max"].as_f64().unwrap() as f32, max);
    let missing = gguf()
        .arg("dequantize")
        .arg(fixture("all-types-v3.gguf"))
        .args(["nope", "-o"])
        .arg(&npy)
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no tensor named 'nope'"));
}

/// How `edit`, `split`, `merge` and `dequantize` treat what is already on disk.
#[cfg(unix)]
mod files {
    use std::fs;
    use std::os::unix::fs::{symlink, FileTypeExt, MetadataExt, PermissionsExt};
    use std::path::{Path, PathBuf};
    use std::process::{Command, Output, Stdio};
    use std::time::{Duration, Instant};

    use super::common::gguf;
    use gguf_test_support::{fixture, listing};

    fn mode(path: &Path) -> u32 {
        fs::metadata(path).unwrap().permissions().mode() & 0o7777
    }

    fn set_mode(path: &Path, mode: u32) {
        fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    }

    fn copy_fixture(dir: &Path, name: &str) -> PathBuf {
        let path = dir.join(name);
        fs::copy(fixture("all-types-v3.gguf"), &path).unwrap();
        path
    }

    fn run(cmd: &mut Command) -> Output {
        cmd.stdin(Stdio::null()).output().unwrap()
    }

    fn stderr(out: &Output) -> String {
        String::from_utf8_lossy(&out.stderr).into_owned()
    }

    fn edit(input: &Path, extra: &[&str]) -> Output {
        run(gguf()
            .arg("edit")
            .arg(input)
            .args(extra)
            .args(["--set", "new.key:u32=7"]))
    }

    fn edit_to(input: &Path, output: &Path, extra: &[&str]) -> Output {
        run(gguf()
            .arg("edit")
            .arg(input)
            .arg("-o")
            .arg(output)
            .args(extra)
            .args(["--set", "new.key:u32=7"]))
    }

    fn has_new_key(path: &Path) -> bool {
        let bytes = fs::read(path).unwrap();
        let file = gguf_format::GgufFile::parse(&bytes).unwrap();
        file.get::<u32>("new.key").ok() == Some(7)
    }

    #[test]
    fn edit_keeps_the_mode_and_owner_of_the_file_it_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let private = copy_fixture(dir.path(), "private.gguf");
        set_mode(&private, 0o600);
        // As root the owner and group are kept too (anyone else cannot give a file away).
        let root = fs::metadata(dir.path()).unwrap().uid() == 0;
        if root {
            std::os::unix::fs::chown(&private, Some(4321), Some(4322)).unwrap();
        }
        let out = edit(&private, &["--in-place"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(has_new_key(&private));
        assert_eq!(mode(&private), 0o600, "an in-place edit keeps the mode");
        if root {
            let meta = fs::metadata(&private).unwrap();
            assert_eq!((meta.uid(), meta.gid()), (4321, 4322));
        }

        // An output that replaces an existing file keeps that file's mode ...
        let shared = copy_fixture(dir.path(), "shared.gguf");
        set_mode(&shared, 0o640);
        let out = edit_to(&fixture("all-types-v3.gguf"), &shared, &["--force"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(has_new_key(&shared));
        assert_eq!(mode(&shared), 0o640);

        // ... and a new output gets the mode any new file gets (the umask's).
        let probe = dir.path().join("probe");
        fs::File::create(&probe).unwrap();
        let new = dir.path().join("new.gguf");
        let out = edit_to(&fixture("all-types-v3.gguf"), &new, &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(mode(&new), mode(&probe));
    }

    #[test]
    fn edit_through_a_symlink_edits_its_target_and_keeps_the_link() {
        let dir = tempfile::tempdir().unwrap();
        fs::create_dir(dir.path().join("real")).unwrap();
        let target = copy_fixture(&dir.path().join("real"), "model.gguf");
        let link = dir.path().join("link.gguf");
        symlink("real/model.gguf", &link).unwrap();

        let out = edit(&link, &["--in-place"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(fs::read_link(&link).unwrap(), Path::new("real/model.gguf"));
        assert!(has_new_key(&target));
        assert_eq!(listing(dir.path()), ["link.gguf", "real"]);
        assert_eq!(listing(&dir.path().join("real")), ["model.gguf"]);

        // The same through -o LINK --force.
        let out = run(gguf()
            .arg("edit")
            .arg(fixture("all-types-v3.gguf"))
            .arg("-o")
            .arg(&link)
            .args(["--force", "--set", "other.key:u8=1"]));
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink());
        let bytes = fs::read(&target).unwrap();
        let file = gguf_format::GgufFile::parse(&bytes).unwrap();
        assert_eq!(file.get::<u8>("other.key").unwrap(), 1);
        assert_eq!(listing(&dir.path().join("real")), ["model.gguf"]);
    }

    #[test]
    fn read_only_files_are_replaced_only_with_force() {
        let dir = tempfile::tempdir().unwrap();
        let ro = copy_fixture(dir.path(), "ro.gguf");
        set_mode(&ro, 0o444);
        let before = fs::read(&ro).unwrap();

        let out = edit(&ro, &["--in-place"]);
        assert!(!out.status.success());
        let err = stderr(&out);
        assert!(
            err.contains("read-only") && err.contains("--force"),
            "{err}"
        );
        assert_eq!(fs::read(&ro).unwrap(), before);
        let out = edit_to(&fixture("all-types-v3.gguf"), &ro, &[]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
        assert_eq!(fs::read(&ro).unwrap(), before);

        let out = edit(&ro, &["--in-place", "--force"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(has_new_key(&ro));
        assert_eq!(mode(&ro), 0o444, "still read-only");
        assert_eq!(listing(dir.path()), ["ro.gguf"]);
    }

    #[test]
    fn force_overwrites_regular_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let status = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(status.success());
        let out = edit_to(&fixture("all-types-v3.gguf"), &fifo, &["--force"]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains("is a FIFO"), "{}", stderr(&out));
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());

        let subdir = dir.path().join("subdir");
        fs::create_dir(&subdir).unwrap();
        let out = edit_to(&fixture("all-types-v3.gguf"), &subdir, &["--force"]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));
        assert!(subdir.is_dir());

        // A symlink is followed, and what it leads to must be a regular file too.
        let null_link = dir.path().join("null.gguf");
        symlink("/dev/null", &null_link).unwrap();
        let out = edit_to(&fixture("all-types-v3.gguf"), &null_link, &["--force"]);
        assert!(!out.status.success());
        assert!(
            stderr(&out).contains("is a character device"),
            "{}",
            stderr(&out)
        );
        assert!(fs::symlink_metadata(&null_link)
            .unwrap()
            .file_type()
            .is_symlink());

        // dequantize replaces an existing .npy, but not a FIFO.
        let out = run(gguf()
            .arg("dequantize")
            .arg(fixture("all-types-v3.gguf"))
            .args(["q8_0", "-o"])
            .arg(&fifo));
        assert!(!out.status.success());
        assert!(stderr(&out).contains("is a FIFO"), "{}", stderr(&out));
        assert!(fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo());
        assert_eq!(listing(dir.path()), ["fifo", "null.gguf", "subdir"]);
    }

    #[test]
    fn stale_temp_files_of_a_killed_write_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        // What a writer killed with SIGKILL leaves: a temp file of ours, unlocked.
        let stale = [".out.gguf.gguf-tmp.4000000.0", ".out.gguf.gguf-tmp.17.3"];
        // Named like ours for another destination, or not quite like ours: kept.
        let unrelated = [
            ".out.gguf.gguf-tmp.4000000.0.bak",
            ".out.gguf.gguf-tmp.x.0",
            ".out.gguf.gguf-tmp.4000000.",
            ".other.gguf.gguf-tmp.4000000.0",
            "out.gguf.gguf-tmp.4000000.0",
            ".out.gguf.4000000.0.tmp",
        ];
        for name in stale.iter().chain(&unrelated) {
            fs::write(d.join(name), b"partial").unwrap();
        }
        // One whose writer is still at work (it holds the lock): kept.
        let live = d.join(".out.gguf.gguf-tmp.4000001.0");
        let live_file = fs::File::create(&live).unwrap();
        live_file.lock().unwrap();

        let out = edit_to(&fixture("all-types-v3.gguf"), &d.join("out.gguf"), &[]);
        assert!(out.status.success(), "{}", stderr(&out));
        let mut expected: Vec<String> = unrelated.iter().map(|s| s.to_string()).collect();
        expected.push(".out.gguf.gguf-tmp.4000001.0".into());
        expected.push("out.gguf".into());
        expected.sort();
        assert_eq!(listing(d), expected);
        drop(live_file);
    }

    /// A model of `tensors` F32 tensors of `mb` MB each, of zeros.
    fn big_model(path: &Path, tensors: usize, mb: u64) {
        let mut b = gguf_format::GgufBuilder::new();
        b.set("general.architecture", "llama");
        for i in 0..tensors {
            b.add_tensor(&format!("t{i}"), gguf_format::GgmlType::F32, &[mb << 18])
                .unwrap();
        }
        let out = std::io::BufWriter::new(fs::File::create(path).unwrap());
        let mut w = b.write(out).unwrap();
        let zeros = vec![0u8; (mb << 20) as usize];
        for _ in 0..tensors {
            w.write_tensor(&zeros).unwrap();
        }
        w.finish().unwrap();
    }

    fn hidden(dir: &Path) -> Vec<String> {
        listing(dir)
            .into_iter()
            .filter(|n| n.starts_with('.'))
            .collect()
    }

    /// Runs `cmd` until a temporary file appears in `watch`, sends it `signal` and returns
    /// whether the signal ended it (false: it finished first, so the caller tries again).
    fn interrupt(mut cmd: Command, watch: &Path, signal: (&str, i32)) -> bool {
        use std::os::unix::process::ExitStatusExt;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "{status}");
                return false;
            }
            if !hidden(watch).is_empty() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "no temporary file"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        let status = Command::new("kill")
            .arg(format!("-{}", signal.0))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let status = child.wait().unwrap();
        if status.success() {
            return false;
        }
        assert!(
            status.signal() == Some(signal.1) || status.code() == Some(128 + signal.1),
            "{status}: expected death by SIG{}",
            signal.0
        );
        assert_eq!(
            hidden(watch),
            Vec::<String>::new(),
            "SIG{} left temporary files",
            signal.0
        );
        true
    }

    /// Whether this test process was started with `signal` ignored (a background job of a
    /// shell without job control ignores SIGINT, `nohup` SIGHUP): the `gguf` it starts then
    /// keeps ignoring it, as it should.
    fn ignored_here(signal: i32) -> bool {
        let status = fs::read_to_string("/proc/self/status").unwrap_or_default();
        status
            .lines()
            .find_map(|l| l.strip_prefix("SigIgn:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .is_some_and(|mask| mask & (1 << (signal - 1)) != 0)
    }

    const SIGHUP: (&str, i32) = ("HUP", 1);
    const SIGINT: (&str, i32) = ("INT", 2);
    const SIGTERM: (&str, i32) = ("TERM", 15);

    #[test]
    fn a_signal_during_a_write_removes_the_temporary_files() {
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.gguf");
        big_model(&big, 4, 40);
        let parts = dir.path().join("parts");
        fs::create_dir(&parts).unwrap();
        let out = run(gguf()
            .arg("split")
            .arg(&big)
            .arg(parts.join("p"))
            .args(["--max-tensors", "1"]));
        assert!(out.status.success(), "{}", stderr(&out));
        let first_part = parts.join("p-00001-of-00004.gguf");

        // A case sets up `gguf` in a directory of its own and returns whether its destination
        // is untouched after the signal (asserting that it is at least not half-written).
        type Case<'a> = &'a dyn Fn(&Path, &mut Command) -> Box<dyn Fn() -> bool>;
        let mut n = 0;
        let mut attempt = |what: &str, signal: (&str, i32), case: Case<'_>| {
            if ignored_here(signal.1) {
                eprintln!("skipping {what} with SIG{}: ignored here", signal.0);
                return;
            }
            for _ in 0..10 {
                n += 1;
                let sub = dir.path().join(format!("case{n}"));
                fs::create_dir(&sub).unwrap();
                let mut cmd = gguf();
                let untouched = case(&sub, &mut cmd);
                eprintln!("{what} SIG{}: attempt {n}", signal.0);
                // The signal may also arrive just after the rename, when the output is
                // complete: then try again.
                if interrupt(cmd, &sub, signal) && untouched() {
                    return;
                }
            }
            panic!("{what}: finished every time before the signal arrived");
        };

        // An in-place edit: the file stays the same file (a hard link to the big model).
        attempt("edit --in-place", SIGINT, &|sub, cmd| {
            let target = sub.join("model.gguf");
            fs::hard_link(&big, &target).unwrap();
            cmd.arg("edit")
                .arg(&target)
                .args(["--in-place", "--set", "general.architecture=x"]);
            let ino = fs::metadata(&big).unwrap().ino();
            Box::new(move || fs::metadata(&target).unwrap().ino() == ino)
        });
        // Nothing, or everything.
        let nothing_or = |sub: &Path, complete: usize| {
            let sub = sub.to_path_buf();
            Box::new(move || {
                let names = listing(&sub);
                assert!(
                    names.is_empty() || names.len() == complete,
                    "half-written: {names:?}"
                );
                names.is_empty()
            })
        };
        for signal in [SIGINT, SIGTERM] {
            attempt("edit -o", signal, &|sub, cmd| {
                cmd.arg("edit")
                    .arg(&big)
                    .arg("-o")
                    .arg(sub.join("out.gguf"))
                    .args(["--set", "general.architecture=x"]);
                nothing_or(sub, 1)
            });
            attempt("split", signal, &|sub, cmd| {
                cmd.arg("split")
                    .arg(&big)
                    .arg(sub.join("p"))
                    .args(["--max-tensors", "1"]);
                nothing_or(sub, 4)
            });
        }
        for signal in [SIGTERM, SIGHUP] {
            attempt("merge", signal, &|sub, cmd| {
                cmd.arg("merge")
                    .arg(&first_part)
                    .arg(sub.join("merged.gguf"));
                nothing_or(sub, 1)
            });
        }
    }

    /// Interrupting `gguf chat` while it waits for a line still just ends it.
    #[test]
    fn ctrl_c_ends_chat() {
        use std::os::unix::process::ExitStatusExt;
        if ignored_here(2) {
            eprintln!("skipping: SIGINT is ignored in this process");
            return;
        }
        let mut child = gguf()
            .arg("chat")
            .arg(fixture("model-llama.gguf"))
            // The fixture has no chat template (nor turn markers): name one to reach the prompt.
            .args(["--chat-template", "chatml"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut prompt = [0u8; 2];
        std::io::Read::read_exact(&mut stdout, &mut prompt).unwrap();
        assert_eq!(&prompt, b"> ");
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        let start = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > Duration::from_secs(30) {
                child.kill().unwrap();
                panic!("gguf chat still runs 30 s after SIGINT");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        assert!(
            status.signal() == Some(2) || status.code() == Some(130),
            "{status}"
        );
    }

    /// `gguf chat` on the tiny model, greedy, with the lines of `stdin` (then its end): stdout.
    fn chat_transcript(stdin: &[u8], history: Option<&Path>) -> String {
        let mut cmd = gguf();
        cmd.arg("chat")
            .arg(fixture("model-llama.gguf"))
            .args(CHAT_ARGS);
        if let Some(history) = history {
            cmd.arg("--history").arg(history);
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::io::Write::write_all(&mut child.stdin.take().unwrap(), stdin).unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{}", out.status);
        String::from_utf8(out.stdout).unwrap()
    }

    /// Greedy, and token by token (`-b 1`): a conversation's cache then holds the same bits
    /// whether its tokens were generated or read as a prompt, so a chat that goes on after an
    /// interrupted reply answers exactly as one started from that conversation.
    const CHAT_ARGS: [&str; 10] = [
        "--chat-template",
        "chatml",
        "--temp",
        "0",
        "-n",
        "200",
        "-t",
        "1",
        "-b",
        "1",
    ];

    /// Ctrl-C during a reply stops the reply, not the chat: the prompt comes back, the partial
    /// reply stays in the conversation, the next line is answered, and the end of input ends
    /// the chat with status 0.
    ///
    /// No timing is relied on: the chat's stdout is a pipe this test has filled but for
    /// [`ROOM`] bytes, so the first reply blocks in a write until the test reads, and the
    /// SIGINT goes once the reply has begun (the catch is armed before its first token).
    #[test]
    fn ctrl_c_during_a_reply_stops_it_and_the_chat_goes_on() {
        use std::io::{Read, Write};
        use std::os::fd::AsRawFd;
        /// Bytes the chat may write before it blocks: its prompt and the first tokens.
        const ROOM: usize = 2 + 64;
        if ignored_here(2) {
            eprintln!("skipping: SIGINT is ignored in this process");
            return;
        }
        let whole = chat_transcript(b"hello\n", None);
        let reply = whole
            .strip_prefix("> ")
            .and_then(|r| r.strip_suffix("\n> \n"))
            .unwrap_or_else(|| panic!("{whole:?}"));
        assert!(
            reply.len() > 2 * ROOM,
            "the reply must outlast the room: {reply:?}"
        );

        let (mut stdout, mut filled) = std::io::pipe().unwrap();
        // SAFETY: F_GETPIPE_SZ reads the capacity of the pipe the descriptor belongs to.
        let capacity = unsafe { libc::fcntl(stdout.as_raw_fd(), libc::F_GETPIPE_SZ) };
        assert!(capacity as usize > ROOM, "{capacity}");
        let filler = capacity as usize - ROOM;
        filled.write_all(&vec![b'#'; filler]).unwrap();
        let mut child = gguf()
            .arg("chat")
            .arg(fixture("model-llama.gguf"))
            .args(CHAT_ARGS)
            .stdin(Stdio::piped())
            .stdout(filled)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // Both lines and the end at once: the chat reads the second at its next prompt.
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"hello\nagain\n")
            .unwrap();
        let mut stderr_pipe = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr_pipe.read_to_string(&mut s);
            s
        });
        let queued = || {
            let mut n: libc::c_int = 0;
            // SAFETY: FIONREAD writes the bytes queued in the pipe to `n`.
            let r = unsafe { libc::ioctl(stdout.as_raw_fd(), libc::FIONREAD, &mut n) };
            assert_eq!(r, 0);
            n as usize
        };
        let start = Instant::now();
        while queued() <= filler + 2 {
            assert!(child.try_wait().unwrap().is_none(), "the chat ended");
            assert!(start.elapsed() < Duration::from_secs(60), "no reply");
            std::thread::sleep(Duration::from_millis(1));
        }
        let status = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
        // The handler has run (it runs as the signal is delivered); a pause in case the
        // machine is slow to deliver it.
        std::thread::sleep(Duration::from_millis(200));
        let mut out = Vec::new();
        stdout.read_to_end(&mut out).unwrap();
        let status = child.wait().unwrap();
        let stderr = stderr.join().unwrap();
        assert!(status.success(), "{status}: {stderr}");
        assert!(out[..filler].iter().all(|&b| b == b'#'));
        let out = String::from_utf8(out[filler..].to_vec()).unwrap();
        // `> ` PARTIAL `\n> ` ANSWER `\n> \n`, PARTIAL a beginning of the whole reply.
        let rest = out.strip_prefix("> ").unwrap_or_else(|| panic!("{out:?}"));
        let cut = (1..reply.len())
            .filter(|&k| reply.is_char_boundary(k))
            .find(|&k| rest.starts_with(&reply[..k]) && rest[k..].starts_with("\n> "))
            .unwrap_or_else(|| panic!("no partial reply then a prompt in {out:?}"));
        let partial = &reply[..cut];
        let answer = rest[cut + 3..]
            .strip_suffix("\n> \n")
            .unwrap_or_else(|| panic!("{out:?}"));
        assert!(!answer.is_empty(), "{out:?}");
        assert!(
            stderr.contains("note: reply interrupted after "),
            "{stderr}"
        );
        // The answer is the one to a conversation holding the partial reply.
        let dir = tempfile::tempdir().unwrap();
        let history = dir.path().join("history.json");
        let conversation = serde_json::json!([
            {"role": "user", "content": "hello"},
            {"role": "assistant", "content": partial},
        ]);
        fs::write(&history, conversation.to_string()).unwrap();
        let expected = chat_transcript(b"again\n", Some(&history));
        assert_eq!(expected, format!("> {answer}\n> \n"));
    }
}

/// llama.cpp's command-line habits, which its users bring along.
mod llama_cpp_habits {
    use std::process::Output;

    use super::common::{gguf, refused};
    use gguf_test_support::{fixture, run_ok};

    fn model() -> String {
        fixture("model-llama.gguf").display().to_string()
    }

    /// `gguf ARGS` (which must succeed), its stdout as JSON.
    fn json(args: &[&str]) -> serde_json::Value {
        let out = run_ok(gguf().args(args));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The tokens `gguf generate ARGS --json` generates, with its stderr.
    fn generated(args: &[&str]) -> (serde_json::Value, String) {
        let out: Output = run_ok(gguf().arg("generate").args(args).arg("--json"));
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (
            serde_json::json!({"prompt_ids": v["prompt_ids"], "ids": v["ids"], "text": v["text"]}),
            String::from_utf8(out.stderr).unwrap(),
        )
    }

    #[test]
    fn dash_m_names_the_model_as_in_llama_cpp() {
        let m = model();
        let greedy = ["-p", "hello", "-n", "6", "--temp", "0"];
        let (positional, _) = generated(&[&[m.as_str()][..], &greedy].concat());
        assert_eq!(
            positional["ids"].as_array().unwrap().len(),
            6,
            "{positional}"
        );
        for model_args in [["-m", m.as_str()], ["--model", m.as_str()]] {
            let (by_option, _) = generated(&[&model_args[..], &greedy].concat());
            assert_eq!(by_option, positional);
        }
        // Both, naming the same model, is fine; two models are refused as a usage error.
        let (both, _) = generated(&[&[m.as_str(), "-m", m.as_str()][..], &greedy].concat());
        assert_eq!(both, positional);
        let other = fixture("model-qwen2.gguf").display().to_string();
        let (code, stderr) = refused(gguf().args(["generate", &other, "-m", &m, "-p", "hi"]));
        assert_eq!(code, Some(2));
        assert_eq!(
            stderr,
            format!("error: two models given, {other} and -m {m}: give one\n")
        );
        let (code, stderr) = refused(gguf().args(["generate", "-p", "hi"]));
        assert_eq!(code, Some(2));
        assert!(stderr.contains("<MODEL>"), "{stderr}");

        // The other commands that take one model, with and without -m, print the same.
        let dir = tempfile::tempdir().unwrap();
        let text = dir.path().join("text.txt");
        std::fs::write(
            &text,
            "The quick brown fox jumps over the lazy dog. ".repeat(8),
        )
        .unwrap();
        let text = text.display().to_string();
        let same = [
            vec!["tokenize", "MODEL", "hello world", "--ids"],
            vec!["detokenize", "MODEL", "72", "105", "33"],
            vec!["embed", "MODEL", "hello", "world", "--json", "-c", "64"],
            vec![
                "perplexity",
                "MODEL",
                "-f",
                &text,
                "-c",
                "16",
                "--chunks",
                "2",
                "--json",
            ],
        ];
        for args in same {
            let with = |model: &[&str]| -> Vec<String> {
                let mut all: Vec<String> = vec![args[0].to_string()];
                all.extend(model.iter().map(|s| s.to_string()));
                all.extend(args[2..].iter().map(|s| s.to_string()));
                all
            };
            let positional = run_ok(gguf().args(with(&[&m]))).stdout;
            let by_option = run_ok(gguf().args(with(&["-m", &m]))).stdout;
            assert!(positional.len() > 2, "{args:?}");
            assert_eq!(by_option, positional, "{args:?}");
        }
        let ids = json(&["tokenize", "-m", &m, "hello", "--ids"]);
        assert_eq!(ids, json(&["tokenize", &m, "hello", "--ids"]));
        let bench = json(&["bench", "-m", &m, "-p", "8", "-n", "2", "-r", "1", "--json"]);
        assert_eq!(bench["model"], m.as_str());
        let chat = run_ok(
            gguf()
                .args(["chat", "-m", &m, "--chat-template", "chatml", "-n", "3"])
                .args(["--temp", "0"]),
        );
        assert_eq!(
            chat.stdout, b"> \n",
            "no line read: the prompt, then the end"
        );
    }

    #[test]
    fn gpu_options_are_accepted_and_ignored_with_a_note() {
        let m = model();
        let greedy = [m.as_str(), "-p", "hello", "-n", "6", "--temp", "0"];
        let (plain, stderr) = generated(&greedy);
        assert!(!stderr.contains("note:"), "{stderr}");
        let (with_gpu, stderr) = generated(
            &[
                &greedy[..],
                &["-ngl", "99", "-sm", "row", "-mg", "0", "-ts", "3,1"],
            ]
            .concat(),
        );
        assert_eq!(with_gpu, plain, "-ngl is not -n gl");
        assert!(
            stderr.contains(
                "note: this build runs on the CPU; ignoring -ngl 99, -sm row, -mg 0, -ts 3,1\n"
            ),
            "{stderr}"
        );
        for args in [
            &["--n-gpu-layers", "99"][..],
            &["--gpu-layers", "99"],
            &["-ngl=99"],
        ] {
            let (again, stderr) = generated(&[&greedy[..], args].concat());
            assert_eq!(again, plain, "{args:?}");
            assert!(
                stderr.contains("note: this build runs on the CPU; ignoring -ngl 99\n"),
                "{args:?}: {stderr}"
            );
        }
        // `-n` stays bench's generation length next to -ngl.
        let bench = json(&[
            "bench", &m, "-ngl", "99", "-p", "0", "-n", "3", "-r", "1", "--json",
        ]);
        assert_eq!(bench["results"][0]["test"], "tg3", "{bench}");
    }

    #[test]
    fn generate_reads_the_prompt_from_a_file() {
        let m = model();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prompt.txt");
        // One final newline is dropped, as llama.cpp's -f drops it; the rest is the prompt.
        std::fs::write(&file, "Once upon\na time\n").unwrap();
        let file = file.display().to_string();
        let (from_text, _) = generated(&[&m, "-p", "Once upon\na time", "-n", "5", "--temp", "0"]);
        for flag in ["-f", "--file"] {
            let (from_file, _) = generated(&[&m, flag, &file, "-n", "5", "--temp", "0"]);
            assert_eq!(from_file, from_text, "{flag}");
        }
        let streamed = run_ok(gguf().args(["generate", &m, "-f", &file, "-n", "5", "--temp", "0"]));
        let expected = format!("Once upon\na time{}\n", from_text["text"].as_str().unwrap());
        assert_eq!(String::from_utf8(streamed.stdout).unwrap(), expected);
        // Not both; not a device (the check every input file of the CLI gets).
        let (code, stderr) = refused(gguf().args(["generate", &m, "-f", &file, "-p", "x"]));
        assert_eq!(code, Some(2), "{stderr}");
        assert!(stderr.contains("cannot be used with"), "{stderr}");
        let (code, stderr) = refused(gguf().args(["generate", &m, "-f", "/dev/zero"]));
        assert_eq!(code, Some(1));
        assert!(
            stderr.starts_with("error: /dev/zero: ")
                && stderr.ends_with("is a character device, not a regular file\n")
                && stderr.lines().count() == 1,
            "{stderr}"
        );
    }

    #[test]
    fn dash_b_sets_the_prompt_batch() {
        let m = model();
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("prompt.txt");
        std::fs::write(&file, "The quick brown fox jumps over the lazy dog").unwrap();
        let file = file.display().to_string();
        let (default, _) = generated(&[&m, "-f", &file, "-n", "1", "--temp", "0"]);
        for args in [["-b", "1"], ["-b", "7"], ["--batch-size", "4096"]] {
            let (batched, _) =
                generated(&[&[m.as_str(), "-f", &file, "-n", "1"][..], &args].concat());
            assert_eq!(batched["prompt_ids"], default["prompt_ids"], "{args:?}");
            assert_eq!(batched["ids"].as_array().unwrap().len(), 1, "{args:?}");
        }
        let (code, stderr) = refused(gguf().args(["generate", &m, "-p", "hi", "-b", "0"]));
        assert_eq!(code, Some(2));
        assert!(
            stderr.contains("invalid value '0' for '--batch-size"),
            "{stderr}"
        );
    }

    #[test]
    fn a_negative_temperature_is_greedy_with_a_note() {
        let m = model();
        let args = [m.as_str(), "-p", "hello", "-n", "8"];
        let (greedy, stderr) = generated(&[&args[..], &["--temp", "0"]].concat());
        assert!(!stderr.contains("note:"), "{stderr}");
        for (value, note) in [("-1", "-1"), ("-0.5", "-0.5")] {
            let (negative, stderr) = generated(&[&args[..], &["--temp", value]].concat());
            assert_eq!(negative, greedy, "--temp {value}");
            assert!(
                stderr.contains(&format!(
                    "note: --temp {note} means greedy sampling, as in llama.cpp\n"
                )),
                "{stderr}"
            );
        }
    }
}
