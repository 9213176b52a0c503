//! Hostile use of the `gguf` binary: every subcommand, over a corpus of malformed, mutated and
//! non-regular files, with its stdout closed, must end with a status (0, or 1 or 2 with an
//! error), never a panic (101), a signal or a hang. Then one test per class of failure that
//! an audit found.
//!
//! The subcommands are read from `gguf --help`, so a new one is covered without a change here:
//! it runs as `gguf SUB FILE` over the corpus, and [`ARGS`] gives it better arguments.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

mod common;

use common::gguf;
use gguf_test_support::fixture;

/// Longer than any run over the tiny corpus takes; a run past it is a hang.
const HANG: Duration = Duration::from_secs(60);

/// What one run did.
struct Run {
    status: ExitStatus,
    stdout: Vec<u8>,
    stderr: String,
}

/// How the child's stdout is treated.
#[derive(Clone, Copy, PartialEq)]
enum Stdout {
    /// Captured whole.
    Read,
    /// Closed before the child writes anything: every write fails with a broken pipe.
    Closed,
    /// One byte read, then closed (`| head -c1`).
    OneByte,
}

/// Runs `cmd` with `stdin` fed to it; panics if it outlives [`HANG`].
fn run(mut cmd: Command, stdin: &[u8], stdout: Stdout) -> Run {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out_pipe = child.stdout.take().unwrap();
    let mut err_pipe = child.stderr.take().unwrap();
    let stderr = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = err_pipe.read_to_end(&mut s);
        String::from_utf8_lossy(&s).into_owned()
    });
    let stdout_reader = match stdout {
        Stdout::Closed => {
            drop(out_pipe);
            None
        }
        Stdout::OneByte => Some(std::thread::spawn(move || {
            let mut byte = [0u8; 1];
            let _ = out_pipe.read(&mut byte);
            drop(out_pipe);
            byte.to_vec()
        })),
        Stdout::Read => Some(std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = out_pipe.read_to_end(&mut s);
            s
        })),
    };
    let mut input = child.stdin.take().unwrap();
    let _ = input.write_all(stdin);
    drop(input);
    let status = wait_or_kill(&mut child, &format!("{cmd:?}"));
    Run {
        status,
        stdout: stdout_reader.map_or_else(Vec::new, |r| r.join().unwrap()),
        stderr: stderr.join().unwrap(),
    }
}

/// The child's exit status; past [`HANG`], kills it and fails naming `what`.
fn wait_or_kill(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > HANG {
            let _ = child.kill();
            let _ = child.wait();
            panic!("hang: {what} ran for over {HANG:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Fails unless the run ended by itself with a status other than a panic's.
fn assert_no_crash(cmd: &str, r: &Run) {
    match r.status.code() {
        Some(101) | None => panic!("{cmd}: {:?}\n{}", r.status, r.stderr),
        Some(_) => assert!(!r.stderr.contains("panicked"), "{cmd}: {}", r.stderr),
    }
}

/// The subcommands `gguf --help` lists.
fn subcommands() -> Vec<String> {
    let help = gguf().arg("--help").output().unwrap();
    let text = String::from_utf8(help.stdout).unwrap();
    let list = text
        .split("Commands:\n")
        .nth(1)
        .expect("a Commands section")
        .split("\n\n")
        .next()
        .unwrap();
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|&c| c != "help")
        .map(str::to_string)
        .collect()
}

/// Arguments each subcommand runs with besides the bare `SUB FILE`. `FILE` is the hostile
/// file, `OUT` a path in a fresh directory, `TEXT` a text file, `MESSAGES` a conversation.
const ARGS: &[(&str, &[&[&str]])] = &[
    (
        "inspect",
        &[
            &["FILE", "--json", "--full"],
            &["FILE", "--tensors", "--stats"],
        ],
    ),
    ("dequantize", &[&["FILE", "token_embd.weight", "-o", "OUT"]]),
    ("validate", &[&["FILE", "--json"]]),
    ("pull", &[&["--list"]]),
    ("edit", &[&["FILE", "-o", "OUT", "--set", "general.name=x"]]),
    ("split", &[&["FILE", "OUT", "--max-tensors", "3"]]),
    ("merge", &[&["FILE", "OUT"]]),
    (
        "export",
        &[
            &["FILE", "OUT"],
            &["FILE", "OUT", "--dtype", "bf16", "--json"],
        ],
    ),
    (
        "quantize",
        &[
            &["FILE", "OUT", "Q4_K_M", "--allow-requantize", "-t", "2"],
            &["FILE", "OUT", "F16", "--dry-run"],
        ],
    ),
    (
        "diff",
        &[
            &["FILE", "FILE", "--values"],
            &["FILE", "FILE", "--json", "-t", "2"],
        ],
    ),
    (
        "tokenize",
        &[&["FILE", "héllo <s> world"], &["FILE", "--file", "TEXT"]],
    ),
    ("detokenize", &[&["FILE", "1", "2", "3", "300"]]),
    (
        "chat-template",
        &[
            &["FILE", "--messages", "MESSAGES", "--add-generation-prompt"],
            &["FILE", "--list"],
        ],
    ),
    (
        "generate",
        &[&["FILE", "-p", "hello", "-n", "4", "-t", "1", "-c", "64"]],
    ),
    (
        "chat",
        &[
            &["FILE", "-n", "4", "-t", "1", "-c", "64"],
            &[
                "FILE",
                "--chat-template",
                "chatml",
                "--history",
                "MESSAGES",
                "-n",
                "4",
                "-t",
                "1",
                "-c",
                "64",
            ],
        ],
    ),
    (
        "perplexity",
        &[&["FILE", "-f", "TEXT", "-c", "16", "-t", "1", "--chunks", "2"]],
    ),
    (
        "bench",
        &[&["FILE", "-p", "8", "-n", "4", "-r", "1", "-t", "1"]],
    ),
    (
        "embed",
        &[
            &["FILE", "hello", "world", "--json", "-t", "1", "-c", "64"],
            &["FILE", "--file", "TEXT", "--pooling", "mean", "-t", "1"],
        ],
    ),
];

/// The hostile corpus: every corrupt fixture, the valid ones, mutants of a tiny model (header
/// bytes overwritten at spread positions, hyperparameters that compute NaN), and paths that are
/// not regular files.
fn corpus(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture("corrupt"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for name in [
        "all-types-v3.gguf",
        "all-types-be.gguf",
        "split-00001-of-00003.gguf",
        "tokenizer-hf-gpt2.gguf",
        "model-llama.gguf",
        "model-qwen3.gguf",
    ] {
        files.push(fixture(name));
    }
    let model = std::fs::read(fixture("model-llama.gguf")).unwrap();
    let header = 10_000.min(model.len());
    for i in 0..24usize {
        let mut bytes = model.clone();
        let at = 8 + (i * 409) % (header - 8);
        bytes[at] = [0xFF, 0x00, 0x7F, 0x80][i % 4];
        let path = dir.join(format!("mutant-{i}.gguf"));
        std::fs::write(&path, bytes).unwrap();
        files.push(path);
    }
    for (i, set) in [
        "llama.attention.layer_norm_rms_epsilon:f32=nan",
        "llama.rope.freq_base:f32=0",
        "llama.context_length:u32=0",
        "llama.block_count:u32=4000000000",
    ]
    .iter()
    .enumerate()
    {
        let path = dir.join(format!("hparam-{i}.gguf"));
        let out = gguf()
            .arg("edit")
            .arg(fixture("model-llama.gguf"))
            .arg("-o")
            .arg(&path)
            .args(["--set", set])
            .output()
            .unwrap();
        assert!(out.status.success(), "{set}: {out:?}");
        files.push(path);
    }
    std::fs::write(dir.join("empty.gguf"), b"").unwrap();
    files.push(dir.join("empty.gguf"));
    files.push(dir.join("no-such-file.gguf"));
    files.push(dir.to_path_buf());
    #[cfg(unix)]
    {
        let fifo = dir.join("fifo.gguf");
        let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        files.push(fifo);
        files.push(PathBuf::from("/dev/zero"));
    }
    files
}

#[test]
fn every_subcommand_survives_the_hostile_corpus_with_a_closed_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let files = corpus(dir.path());
    let text = dir.path().join("text.txt");
    std::fs::write(&text, "The quick brown fox. ".repeat(40)).unwrap();
    let messages = dir.path().join("messages.json");
    std::fs::write(&messages, r#"[{"role": "user", "content": "hi"}]"#).unwrap();

    let subcommands = subcommands();
    assert!(subcommands.len() >= 14, "{subcommands:?}");
    let mut jobs: Vec<(String, Vec<String>)> = Vec::new();
    for sub in &subcommands {
        if sub == "serve" {
            // A server runs until stopped: `serve_survives_the_hostile_corpus` below.
            continue;
        }
        let extra = ARGS
            .iter()
            .find(|(name, _)| name == sub)
            .map_or(&[][..], |(_, args)| *args);
        let mut variants: Vec<&[&str]> = vec![&["FILE"]];
        variants.extend_from_slice(extra);
        for file in &files {
            for args in &variants {
                let args = args
                    .iter()
                    .map(|&a| match a {
                        "FILE" => file.display().to_string(),
                        "TEXT" => text.display().to_string(),
                        "MESSAGES" => messages.display().to_string(),
                        other => other.to_string(),
                    })
                    .collect();
                jobs.push((sub.clone(), args));
            }
        }
    }
    // The scope joins both workers and re-raises a panic of either, so when it returns every
    // job has run without one.
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for worker in 0..2 {
            let (jobs, next, dir) = (&jobs, &next, dir.path());
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((sub, args)) = jobs.get(i) else {
                    return;
                };
                // Outputs go to a fresh directory each time, so no run sees another's.
                let out_dir = dir.join(format!("out-{worker}-{i}"));
                std::fs::create_dir(&out_dir).unwrap();
                let args: Vec<String> = args
                    .iter()
                    .map(|a| match a.as_str() {
                        "OUT" => out_dir.join("out").display().to_string(),
                        _ => a.clone(),
                    })
                    .collect();
                let mut cmd = gguf();
                cmd.arg(sub).args(&args);
                let r = run(cmd, b"hello\n", Stdout::Closed);
                assert_no_crash(&format!("gguf {sub} {}", args.join(" ")), &r);
                std::fs::remove_dir_all(&out_dir).unwrap();
            });
        }
    });
}

/// `gguf serve` over the hostile corpus: each file is refused with an error status, or served
/// (its address on stderr) until SIGTERM, which ends it with status 0. Never a panic or a hang.
#[cfg(unix)]
#[test]
fn serve_survives_the_hostile_corpus() {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let mut served = 0;
    for file in corpus(dir.path()) {
        let cmd = format!("gguf serve {}", file.display());
        let mut child = gguf()
            .arg("serve")
            .arg(&file)
            .args(["--port", "0", "-t", "1", "-c", "64"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut text = String::new();
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if line.starts_with("serving ") {
                    let _ = tx.send(true);
                }
                text.push_str(&line);
                text.push('\n');
            }
            let _ = tx.send(false);
            text
        });
        let serving = rx.recv_timeout(HANG).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("{cmd}: neither served nor ended within {HANG:?}");
        });
        if serving {
            served += 1;
            let pid = child.id().to_string();
            assert!(Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success());
        }
        let status = wait_or_kill(&mut child, &format!("{cmd} (serving: {serving})"));
        let stderr = reader.join().unwrap();
        if serving {
            assert_eq!(
                status.code(),
                Some(0),
                "{cmd}: SIGTERM should stop it cleanly\n{stderr}"
            );
        } else {
            assert_no_crash(
                &cmd,
                &Run {
                    status,
                    stdout: Vec::new(),
                    stderr,
                },
            );
            assert!(!status.success(), "{cmd}: ended by itself with success");
        }
    }
    // The valid models at least were served.
    assert!(served >= 2, "{served}");
}

/// A file with a metadata key and a tensor name of 70,000 bytes. GGUF allows any length (our
/// writer refuses tensor names over ggml's 63 bytes, so the bytes are laid out here).
fn long_names_file(dir: &Path) -> (PathBuf, String, String) {
    let key = format!("test.{}", "k".repeat(70_000));
    let tensor = format!("t{}", "n".repeat(70_000));
    let string = |out: &mut Vec<u8>, s: &str| {
        out.extend_from_slice(&(s.len() as u64).to_le_bytes());
        out.extend_from_slice(s.as_bytes());
    };
    let mut bytes = b"GGUF".to_vec();
    bytes.extend_from_slice(&3u32.to_le_bytes());
    bytes.extend_from_slice(&1u64.to_le_bytes()); // tensors
    bytes.extend_from_slice(&2u64.to_le_bytes()); // keys
    string(&mut bytes, "general.architecture");
    bytes.extend_from_slice(&8u32.to_le_bytes()); // string
    string(&mut bytes, "test");
    string(&mut bytes, &key);
    bytes.extend_from_slice(&4u32.to_le_bytes()); // u32
    bytes.extend_from_slice(&7u32.to_le_bytes());
    string(&mut bytes, &tensor);
    bytes.extend_from_slice(&1u32.to_le_bytes()); // dims
    bytes.extend_from_slice(&4u64.to_le_bytes());
    bytes.extend_from_slice(&0u32.to_le_bytes()); // F32
    bytes.extend_from_slice(&0u64.to_le_bytes()); // offset
    bytes.resize(bytes.len().next_multiple_of(32) + 16, 0);
    let path = dir.join("long-names.gguf");
    std::fs::write(&path, bytes).unwrap();
    (path, key, tensor)
}

#[test]
fn names_longer_than_a_format_width_print() {
    let dir = tempfile::tempdir().unwrap();
    let (path, key, tensor) = long_names_file(dir.path());
    for flags in [&[][..], &["--tensors"], &["--full"]] {
        let mut cmd = gguf();
        cmd.arg("inspect").arg(&path).args(flags);
        let r = run(cmd, b"", Stdout::Read);
        assert!(r.status.success(), "{flags:?}: {}", r.stderr);
        let text = String::from_utf8(r.stdout).unwrap();
        // Cut for the table, with the cut marked.
        assert!(text.contains(&format!("t{}…", "n".repeat(62))), "{flags:?}");
        assert!(!text.contains(&tensor));
        if flags.is_empty() {
            assert!(text.contains(&format!("test.{}…", "k".repeat(58))));
        }
    }
    let mut cmd = gguf();
    cmd.args(["inspect", "--json"]).arg(&path);
    let r = run(cmd, b"", Stdout::Read);
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["metadata"][1]["key"], key.as_str());
    assert_eq!(v["tensors"][0]["name"], tensor.as_str());
    // `edit --set` writes such a key, and the result inspects too.
    let edited = dir.path().join("edited.gguf");
    let out = gguf()
        .arg("edit")
        .arg(&path)
        .arg("-o")
        .arg(&edited)
        .arg("--set")
        .arg(format!("other.{}:u8=1", "x".repeat(70_000)))
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut cmd = gguf();
    cmd.arg("inspect").arg(&edited);
    assert!(run(cmd, b"", Stdout::Read).status.success());
}

#[test]
fn a_reader_that_goes_away_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    // Output far beyond a pipe's buffer, so the writer sees the reader go.
    let mut b = gguf_format::GgufBuilder::new();
    let words: Vec<String> = (0..100_000).map(|i| format!("word{i}")).collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    b.set("general.architecture", "test")
        .set("test.words", gguf_format::OwnedValue::from(words));
    let big = dir.path().join("big.gguf");
    std::fs::write(&big, b.write(Vec::new()).unwrap().finish().unwrap()).unwrap();
    let text = dir.path().join("big.txt");
    std::fs::write(&text, "Lorem ipsum dolor sit amet. ".repeat(50_000)).unwrap();
    let runs: [&[&str]; 4] = [
        &["inspect", "BIG", "--json", "--full"],
        &["inspect", "BIG", "--full"],
        &["tokenize", "MODEL", "--file", "TEXT"],
        &["detokenize", "MODEL", "5", "6", "7"],
    ];
    for args in runs {
        for mode in [Stdout::OneByte, Stdout::Closed] {
            let mut cmd = gguf();
            for a in args {
                match *a {
                    "BIG" => cmd.arg(&big),
                    "MODEL" => cmd.arg(fixture("model-llama.gguf")),
                    "TEXT" => cmd.arg(&text),
                    other => cmd.arg(other),
                };
            }
            let r = run(cmd, b"", mode);
            assert_eq!(r.status.code(), Some(0), "{args:?}: {}", r.stderr);
            assert!(r.stderr.is_empty(), "{args:?}: {}", r.stderr);
        }
    }
}

fn generate(args: &[&str]) -> Run {
    let mut cmd = gguf();
    cmd.arg("generate")
        .arg(fixture("model-llama.gguf"))
        .args(args);
    run(cmd, b"", Stdout::Read)
}

#[test]
fn thread_counts_beyond_the_cpus_are_clamped_with_a_warning() {
    let cpus = std::thread::available_parallelism().unwrap().get();
    for t in ["1000", "100000"] {
        let r = generate(&["-p", "hello", "-n", "2", "-t", t, "--json"]);
        assert!(r.status.success(), "-t {t}: {}", r.stderr);
        assert!(
            r.stderr.contains(&format!(
                "-t {t} is more than the {cpus} CPUs available; using {cpus}"
            )),
            "{}",
            r.stderr
        );
    }
    let r = generate(&["-p", "hello", "-n", "2", "-t", "1"]);
    assert!(!r.stderr.contains("warning"), "{}", r.stderr);
}

#[cfg(unix)]
#[test]
fn paths_that_are_not_regular_files_are_refused_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("model.gguf");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let model = fixture("model-llama.gguf");
    let cases: Vec<(Vec<&std::ffi::OsStr>, &str)> = vec![
        (
            vec![
                "generate".as_ref(),
                fifo.as_os_str(),
                "-p".as_ref(),
                "hi".as_ref(),
            ],
            "is a FIFO, not a regular file",
        ),
        (vec!["inspect".as_ref(), fifo.as_os_str()], "is a FIFO"),
        (
            vec!["validate".as_ref(), dir.path().as_os_str()],
            "is a directory",
        ),
        (
            vec![
                "tokenize".as_ref(),
                model.as_os_str(),
                "--file".as_ref(),
                "/dev/zero".as_ref(),
            ],
            "/dev/zero: is a character device, not a regular file",
        ),
        (
            vec![
                "tokenize".as_ref(),
                model.as_os_str(),
                "--file".as_ref(),
                fifo.as_os_str(),
            ],
            "is a FIFO",
        ),
        (
            vec![
                "perplexity".as_ref(),
                model.as_os_str(),
                "-f".as_ref(),
                fifo.as_os_str(),
            ],
            "is a FIFO",
        ),
    ];
    for (args, expected) in cases {
        let mut cmd = gguf();
        cmd.args(&args);
        let r = run(cmd, b"", Stdout::Read);
        assert_eq!(r.status.code(), Some(1), "{args:?}");
        assert!(r.stderr.contains(expected), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn a_prompt_beyond_the_context_is_refused_and_generation_stops_at_its_end() {
    // The tiny model's vocabulary is bytes, so this prompt is about 2,000 tokens.
    let long = "a".repeat(2_000);
    let r = generate(&["-p", &long, "-c", "64", "-n", "4"]);
    assert_eq!(r.status.code(), Some(1));
    assert!(
        r.stderr.contains("more than the context of 64"),
        "{}",
        r.stderr
    );
    // -n beyond the room left: every position is used, then a note and a clean exit.
    let r = generate(&[
        "-p", "hello", "-c", "16", "-n", "100", "--temp", "0", "--json",
    ]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(
        r.stderr.contains("the context of 16 tokens is full"),
        "{}",
        r.stderr
    );
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    assert_eq!(v["stop_reason"], "context_full");
    let prompt = v["prompt_ids"].as_array().unwrap().len();
    let generated = v["ids"].as_array().unwrap().len();
    assert_eq!(prompt + generated, 17, "{v}");
}

#[test]
fn hyperparameters_that_compute_nan_fail_to_load_and_validate() {
    let dir = tempfile::tempdir().unwrap();
    for (i, set) in [
        "llama.attention.layer_norm_rms_epsilon=nan",
        "llama.attention.layer_norm_rms_epsilon=0",
        "llama.attention.layer_norm_rms_epsilon=-1",
        "llama.rope.freq_base=0",
        "llama.rope.freq_base=-5",
        "llama.rope.freq_base=inf",
        "llama.rope.scaling.factor:f32=nan",
    ]
    .iter()
    .enumerate()
    {
        let path = dir.path().join(format!("m{i}.gguf"));
        let mut cmd = gguf();
        cmd.arg("edit")
            .arg(fixture("model-llama.gguf"))
            .arg("-o")
            .arg(&path)
            .args(["--set", set]);
        if set.contains("scaling") {
            cmd.args(["--set", "llama.rope.scaling.type:string=linear"]);
        }
        assert!(run(cmd, b"", Stdout::Read).status.success());
        let key = set.split([':', '=']).next().unwrap();
        let mut cmd = gguf();
        cmd.arg("generate").arg(&path).args(["-p", "hi", "-n", "2"]);
        let r = run(cmd, b"", Stdout::Read);
        assert_eq!(r.status.code(), Some(1), "{set}");
        assert!(r.stderr.contains(key), "{set}: {}", r.stderr);
        let mut cmd = gguf();
        cmd.args(["validate", "--json"]).arg(&path);
        let r = run(cmd, b"", Stdout::Read);
        assert_eq!(r.status.code(), Some(1), "{set}");
        let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
        assert_eq!(v["valid"], false, "{set}");
        assert!(v["errors"][0].as_str().unwrap().contains(key), "{v}");
    }
    let mut cmd = gguf();
    cmd.args(["validate", "--json"])
        .arg(fixture("model-llama.gguf"));
    let r = run(cmd, b"", Stdout::Read);
    assert!(r.status.success(), "{}", r.stderr);
}

#[test]
fn meaningless_sampler_values_are_refused() {
    for (flag, value, field) in [
        ("--temp", "nan", "temperature"),
        ("--temp", "inf", "temperature"),
        ("--top-p", "nan", "top_p"),
        ("--min-p", "-inf", "min_p"),
        ("--repeat-penalty", "-1", "repeat_penalty"),
        ("--repeat-penalty", "0", "repeat_penalty"),
        ("--presence-penalty", "nan", "presence_penalty"),
        ("--frequency-penalty", "inf", "frequency_penalty"),
    ] {
        let r = generate(&["-p", "hi", "-n", "2", flag, value]);
        assert_eq!(r.status.code(), Some(1), "{flag} {value}: {}", r.stderr);
        assert!(r.stderr.contains(field), "{flag} {value}: {}", r.stderr);
    }
    // llama.cpp's meaningful habits stay: greedy at 0 or below, cuts switched off.
    for args in [
        &["--temp", "0"][..],
        &["--temp", "-1"],
        &["--top-p", "1", "--top-k", "0", "--min-p", "0"],
    ] {
        let r = generate(&[&["-p", "hi", "-n", "2"][..], args].concat());
        assert!(r.status.success(), "{args:?}: {}", r.stderr);
    }
}

#[test]
fn a_forced_isa_this_cpu_lacks_is_refused_by_every_command() {
    let lacking = if cfg!(target_arch = "x86_64") {
        "neon"
    } else {
        "avx2"
    };
    let names: Vec<&str> = gguf_quant::Isa::ALL
        .into_iter()
        .rev()
        .filter(|isa| isa.available())
        .map(gguf_quant::Isa::name)
        .collect();
    let have = format!(" has {}\n", names.join(", "));
    let model = fixture("model-llama.gguf");
    let model = model.to_str().unwrap();
    let commands: [&[&str]; 5] = [
        &["generate", model, "-p", "hi", "-n", "2"],
        &["serve", model, "--port", "0"],
        &["chat", model, "--chat-template", "chatml"],
        &["inspect", model],
        &["tokenize", model, "hi"],
    ];
    for value in [lacking, "avx3", ""] {
        for args in commands {
            let mut cmd = gguf();
            cmd.args(args).env("GGUF_FORCE_ISA", value);
            let r = run(cmd, b"hello\n", Stdout::Read);
            let what = format!("GGUF_FORCE_ISA={value:?} gguf {}", args[0]);
            assert_eq!(r.status.code(), Some(2), "{what}: {}", r.stderr);
            let prefix = format!("error: GGUF_FORCE_ISA={value}: ");
            assert!(r.stderr.starts_with(&prefix), "{what}: {}", r.stderr);
            assert!(r.stderr.ends_with(&have), "{what}: {}", r.stderr);
            assert_eq!(r.stderr.lines().count(), 1, "{what}: {}", r.stderr);
            assert!(r.stdout.is_empty(), "{what}");
        }
    }
    // What the CPU has still runs, GGUF_FORCE_SCALAR=1 as scalar.
    for (variable, value) in [("GGUF_FORCE_ISA", "scalar"), ("GGUF_FORCE_SCALAR", "1")] {
        let mut cmd = gguf();
        cmd.args(["generate", model, "-p", "hi", "-n", "2"])
            .env_remove("GGUF_FORCE_ISA")
            .env(variable, value);
        let r = run(cmd, b"", Stdout::Read);
        assert!(r.status.success(), "{variable}={value}: {}", r.stderr);
    }
}
