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

/// Chat templates that grow without end (the audit's doubling namespace, which aborted
/// `gguf serve` and took `gguf chat-template` to 5.3 GB, loops over the messages, a namespace
/// inside itself, nesting deep enough to overflow the stack, a tag of thousands of operators,
/// loops of ten billion steps).
const HOSTILE_TEMPLATES: [&str; 6] = [
    "{% set ns = namespace(s='xx') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}\
     {% endfor %}{{ ns.s }}",
    "{% for a in messages %}{% for b in messages %}{% for c in messages %}{{ a.content }}\
     {{ b.content }}{{ c.content }}{% endfor %}{% endfor %}{% endfor %}",
    "{% set ns = namespace() %}{% set ns.x = [ns] %}{{ ns ~ '' }}{{ ns == ns }}",
    "{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = [ns.l] %}\
     {% endfor %}{{ ns.l | length }}",
    "{% for i in range(100000) %}{% for j in range(100000) %}{{ i }}{% endfor %}{% endfor %}",
    "{% set ns = namespace(big='x' * 1000000, l=[]) %}{% for i in range(1000) %}\
     {% set ns.l = ns.l + [ns.big[i:]] %}{% endfor %}",
];

/// The hostile corpus: every corrupt fixture, the valid ones, mutants of a tiny model (header
/// bytes overwritten at spread positions, hyperparameters that compute NaN, hostile chat
/// templates), and paths that are not regular files.
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
    for (i, template) in HOSTILE_TEMPLATES.iter().enumerate() {
        let path = dir.join(format!("template-{i}.gguf"));
        let out = gguf()
            .arg("edit")
            .arg(fixture("model-llama.gguf"))
            .arg("-o")
            .arg(&path)
            .arg("--set")
            .arg(format!("tokenizer.chat_template:str={template}"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{template}: {out:?}");
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
                    let _ = tx.send(Some(line.clone()));
                }
                text.push_str(&line);
                text.push('\n');
            }
            let _ = tx.send(None);
            text
        });
        let serving_line = rx.recv_timeout(HANG).unwrap_or_else(|_| {
            let _ = child.kill();
            panic!("{cmd}: neither served nor ended within {HANG:?}");
        });
        let serving = serving_line.is_some();
        if let Some(line) = serving_line {
            served += 1;
            // A chat of 200 messages: answered (200, or 400 for a template that would build
            // without end), never a dropped connection or a dead server.
            let status = chat_status(&line, 200);
            assert!(
                matches!(status, Some(200 | 400)),
                "{cmd}: chat answered {status:?}"
            );
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

/// The status `gguf serve` answers a chat of `messages` short messages with, its address
/// read from its `serving ... on http://ADDR ...` line; `None` when the connection fails.
fn chat_status(serving_line: &str, messages: usize) -> Option<u16> {
    let addr = serving_line
        .split("http://")
        .nth(1)?
        .split_whitespace()
        .next()?;
    let list: Vec<serde_json::Value> = (0..messages)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": "hi"})
        })
        .collect();
    let body = serde_json::json!({"messages": list, "max_tokens": 2}).to_string();
    let mut stream = std::net::TcpStream::connect(addr).ok()?;
    stream.set_read_timeout(Some(HANG)).ok()?;
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).ok()?;
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).ok()?;
    std::str::from_utf8(&head[9..12]).ok()?.parse().ok()
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

/// A copy of `fixtures/NAME` (a checkpoint directory) in a new directory of `dir` with `edit`
/// applied to its `config.json` text, or its `tokenizer.model` emptied when `edit` is `None`.
fn hostile_checkpoint(dir: &Path, name: &str, edit: Option<(&str, &str)>) -> PathBuf {
    static MADE: AtomicUsize = AtomicUsize::new(0);
    let src = fixture(name);
    let n = MADE.fetch_add(1, Ordering::Relaxed);
    let ckpt = dir.join(format!("{}-{n}", name.replace('/', "-")));
    std::fs::create_dir_all(&ckpt).unwrap();
    for entry in std::fs::read_dir(&src).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), ckpt.join(entry.file_name())).unwrap();
    }
    match edit {
        Some((from, to)) => {
            let config = std::fs::read_to_string(ckpt.join("config.json")).unwrap();
            assert!(config.contains(from), "{name}: no {from}");
            std::fs::write(ckpt.join("config.json"), config.replacen(from, to, 1)).unwrap();
        }
        None => std::fs::write(ckpt.join("tokenizer.model"), b"").unwrap(),
    }
    ckpt
}

/// Inputs `gguf convert` used to turn into files that `gguf validate` then rejected (or that
/// computed NaN): Hugging Face configs with a layer count the tensors do not have, a RoPE base
/// of -1, 0 or NaN, a RoPE scaling factor of 0, an empty `tokenizer.model`; legacy files with
/// no layers or cut after their vocabulary. Each conversion fails naming the key (the engine's
/// load check runs on the plan), and neither the output nor a temporary file is left.
#[test]
fn conversions_whose_output_would_not_load_fail_naming_the_key_and_write_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs");
    let out_dir = dir.path().join("out");
    std::fs::create_dir_all(&out_dir).unwrap();
    let layers = ("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1000000");
    let cases: Vec<(PathBuf, &[&str])> = vec![
        (
            hostile_checkpoint(&inputs, "hf/tiny-llama", Some(layers)),
            &[
                "llama.block_count is 1000000",
                "config.json's num_hidden_layers",
            ],
        ),
        (
            hostile_checkpoint(
                &inputs,
                "hf/tiny-qwen2",
                Some(("\"num_hidden_layers\": 2", "\"num_hidden_layers\": 3")),
            ),
            &["blk.2.", "config.json's num_hidden_layers"],
        ),
        (
            hostile_checkpoint(
                &inputs,
                "hf/tiny-mistral",
                Some(("\"rope_theta\": 1000000.0", "\"rope_theta\": -1")),
            ),
            &["llama.rope.freq_base is -1", "config.json's rope_theta"],
        ),
        (
            hostile_checkpoint(
                &inputs,
                "hf/tiny-qwen3",
                Some(("\"rope_theta\": 10000.0", "\"rope_theta\": 0")),
            ),
            &["qwen3.rope.freq_base is 0", "config.json's rope_theta"],
        ),
        (
            hostile_checkpoint(
                &inputs,
                "hf/tiny-gemma3",
                Some(("\"rope_theta\": 1000000.0", "\"rope_theta\": NaN")),
            ),
            &["config.json: not valid JSON", "\"rope_theta\": NaN"],
        ),
        (
            hostile_checkpoint(
                &inputs,
                "hf/tiny-llama",
                Some(("\"factor\": 8.0", "\"factor\": 0")),
            ),
            &["rope_scaling.factor is 0"],
        ),
        (
            hostile_checkpoint(&inputs, "hf/tiny-gemma", None),
            &["tokenizer.model: is empty"],
        ),
    ];
    let legacy = std::fs::read(fixture("legacy/ggjt-v3-llama.bin")).unwrap();
    let mut no_layers = legacy.clone();
    no_layers[24..28].copy_from_slice(&0u32.to_le_bytes());
    std::fs::write(inputs.join("no-layers.bin"), &no_layers).unwrap();
    // 8 header bytes, 7 hyperparameters, then each token's length, bytes and score.
    let n_vocab = u32::from_le_bytes(legacy[8..12].try_into().unwrap());
    let mut end = 36;
    for _ in 0..n_vocab {
        end += 4 + u32::from_le_bytes(legacy[end..end + 4].try_into().unwrap()) as usize + 4;
    }
    std::fs::write(inputs.join("cut.bin"), &legacy[..end]).unwrap();
    let mut cases = cases;
    cases.push((
        inputs.join("no-layers.bin"),
        &["llama.block_count is 0", "the header's n_layer"],
    ));
    cases.push((
        inputs.join("cut.bin"),
        &["no tensors after its vocabulary", "--vocab-only"],
    ));
    for (input, wanted) in &cases {
        let out = out_dir.join("out.gguf");
        let mut cmd = gguf();
        cmd.arg("convert").arg(input).arg(&out);
        let r = run(cmd, b"", Stdout::Read);
        let what = input.display();
        assert_eq!(r.status.code(), Some(1), "{what}: {}", r.stderr);
        for w in *wanted {
            assert!(r.stderr.contains(w), "{what}: {:?} lacks {w:?}", r.stderr);
        }
        assert_eq!(r.stderr.lines().count(), 1, "{what}: {}", r.stderr);
        assert!(
            std::fs::read_dir(&out_dir).unwrap().next().is_none(),
            "{what}: left {:?}",
            gguf_test_support::listing(&out_dir)
        );
    }
}

/// A `rope_freqs.weight` (Llama 3's per-pair RoPE frequency factors) with a zero, negative,
/// NaN or infinite factor: `gguf validate` rejects the file naming the tensor, and the engine
/// refuses to load it (it would compute infinite or NaN angles).
#[test]
fn rope_frequencies_that_are_not_finite_and_positive_fail_validate_and_load() {
    use gguf_format::{GgmlType, GgufBuilder, GgufFile};
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(fixture("model-llama.gguf")).unwrap();
    let file = GgufFile::parse(&bytes).unwrap();
    for (i, bad) in [0.0f32, -1.0, f32::NAN, f32::INFINITY]
        .into_iter()
        .enumerate()
    {
        let mut b = GgufBuilder::from_file(&file);
        b.add_tensor("rope_freqs.weight", GgmlType::F32, &[8])
            .unwrap();
        let mut out = Vec::new();
        let mut w = b.write(&mut out).unwrap();
        for t in file.tensors() {
            w.write_tensor(file.tensor_data(t)).unwrap();
        }
        let mut factors = [1.0f32; 8];
        factors[7] = bad;
        let data: Vec<u8> = factors.iter().flat_map(|v| v.to_le_bytes()).collect();
        w.write_tensor(&data).unwrap();
        w.finish().unwrap();
        let path = dir.path().join(format!("rope-freqs-{i}.gguf"));
        std::fs::write(&path, out).unwrap();

        let mut cmd = gguf();
        cmd.args(["validate", "--json"]).arg(&path);
        let r = run(cmd, b"", Stdout::Read);
        assert_eq!(r.status.code(), Some(1), "{bad}: {}", r.stderr);
        let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
        assert_eq!(v["valid"], false, "{bad}: {v}");
        let e = v["errors"][0].as_str().unwrap();
        assert!(
            e.contains("rope_freqs.weight") && e.contains(&bad.to_string()),
            "{e}"
        );
        let mut cmd = gguf();
        cmd.arg("generate").arg(&path).args(["-p", "hi", "-n", "2"]);
        let r = run(cmd, b"", Stdout::Read);
        assert_eq!(r.status.code(), Some(1), "{bad}");
        assert!(
            r.stderr.contains("rope_freqs.weight"),
            "{bad}: {}",
            r.stderr
        );
    }
}

/// One attempt to make a command write over a file it reads.
#[cfg(unix)]
struct Overwrite {
    /// The command line after `gguf`.
    args: Vec<std::ffi::OsString>,
    /// Every file the command reads: their bytes must be unchanged after it.
    inputs: Vec<PathBuf>,
    /// What stderr must say (each).
    says: Vec<String>,
}

/// The refusal of an output that is one of the command's inputs.
#[cfg(unix)]
fn input_refusal(dest: &Path) -> String {
    format!(
        "{} is an input of this command; refusing to write over it",
        dest.display()
    )
}

/// A new empty directory under `dir` for one case, so that no case sees another's files.
#[cfg(unix)]
fn fresh(dir: &Path) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let d = dir.join(format!("case-{}", NEXT.fetch_add(1, Ordering::Relaxed)));
    std::fs::create_dir(&d).unwrap();
    d
}

/// A copy of `from` at `to`; `to`.
#[cfg(unix)]
fn copied(from: &Path, to: PathBuf) -> PathBuf {
    if from.is_dir() {
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(from).unwrap() {
            let e = e.unwrap();
            copied(&e.path(), to.join(e.file_name()));
        }
    } else {
        std::fs::copy(from, &to).unwrap();
    }
    to
}

/// How an output names one of the command's inputs.
#[cfg(unix)]
#[derive(Clone, Copy)]
enum Alias {
    /// By the input's own path.
    Itself,
    /// Through a symbolic link to it.
    Symlink,
    /// Through a hard link to it.
    HardLink,
}

#[cfg(unix)]
const ALIASES: [Alias; 3] = [Alias::Itself, Alias::Symlink, Alias::HardLink];

/// `file` under another name, `at` (made now), or itself.
#[cfg(unix)]
fn alias(file: &Path, how: Alias, at: PathBuf) -> PathBuf {
    match how {
        Alias::Itself => return file.to_path_buf(),
        Alias::Symlink => std::os::unix::fs::symlink(std::fs::canonicalize(file).unwrap(), &at),
        Alias::HardLink => std::fs::hard_link(file, &at),
    }
    .unwrap();
    at
}

/// The ways to make subcommand `sub` write over one of its inputs (each case in a directory of
/// its own under `dir`), or none when it writes no file at all; `None` for a subcommand this
/// table does not know yet.
#[cfg(unix)]
fn overwrites(sub: &str, dir: &Path) -> Option<Vec<Overwrite>> {
    use std::ffi::OsString;
    let os = |items: &[&dyn AsRef<std::ffi::OsStr>]| -> Vec<OsString> {
        items.iter().map(|s| s.as_ref().to_os_string()).collect()
    };
    let mut cases = Vec::new();
    match sub {
        // They write to stdout only (`pull` writes the cache, from what it downloads).
        "inspect" | "validate" | "pull" | "diff" | "tokenize" | "detokenize" | "chat-template"
        | "generate" | "chat" | "perplexity" | "bench" | "embed" | "serve" => {}
        "edit" | "dequantize" => {
            for how in ALIASES {
                let d = fresh(dir);
                let input = copied(&fixture("all-types-v3.gguf"), d.join("a.gguf"));
                let out = alias(&input, how, d.join("out.gguf"));
                let (args, mut says) = if sub == "edit" {
                    let args = os(&[
                        &"edit", &input, &"-o", &out, &"--force", &"--set", &"k:u8=1",
                    ]);
                    (args, vec!["--in-place".to_string()])
                } else {
                    (os(&[&"dequantize", &input, &"q8_0", &"-o", &out]), vec![])
                };
                says.push(input_refusal(&out));
                cases.push(Overwrite {
                    args,
                    inputs: vec![input],
                    says,
                });
            }
        }
        "quantize" => {
            for imatrix_out in [false, true] {
                for how in ALIASES {
                    let d = fresh(dir);
                    let model = copied(&fixture("model-llama.gguf"), d.join("m.gguf"));
                    // A legacy .dat importance matrix of one entry.
                    let imatrix = d.join("imatrix.dat");
                    let mut dat = 1i32.to_le_bytes().to_vec();
                    dat.extend(1i32.to_le_bytes());
                    dat.push(b'x');
                    dat.extend(1i32.to_le_bytes());
                    dat.extend(1i32.to_le_bytes());
                    dat.extend(1f32.to_le_bytes());
                    std::fs::write(&imatrix, dat).unwrap();
                    let target = if imatrix_out { &imatrix } else { &model };
                    let out = alias(target, how, d.join("out.gguf"));
                    cases.push(Overwrite {
                        args: os(&[
                            &"quantize",
                            &model,
                            &out,
                            &"Q8_0",
                            &"--allow-requantize",
                            &"--imatrix",
                            &imatrix,
                            &"--force",
                        ]),
                        inputs: vec![model, imatrix],
                        says: vec![input_refusal(&out)],
                    });
                }
            }
        }
        "split" => {
            // The one part of a split into one part would be named as the input is.
            for how in ALIASES {
                let d = fresh(dir);
                let input = copied(
                    &fixture("all-types-v3.gguf"),
                    d.join("s-00001-of-00001.gguf"),
                );
                let out = alias(&input, how, d.join("o-00001-of-00001.gguf"));
                let prefix = out
                    .to_str()
                    .unwrap()
                    .strip_suffix("-00001-of-00001.gguf")
                    .unwrap();
                cases.push(Overwrite {
                    args: os(&[&"split", &input, &prefix, &"--max-tensors", &"1000"]),
                    inputs: vec![input.clone()],
                    says: vec![input_refusal(&out)],
                });
            }
        }
        "merge" => {
            for how in ALIASES {
                let d = fresh(dir);
                let parts: Vec<PathBuf> = (1..=3)
                    .map(|i| {
                        let name = format!("split-{i:05}-of-00003.gguf");
                        copied(&fixture(&name), d.join(name))
                    })
                    .collect();
                let out = alias(&parts[1], how, d.join("out.gguf"));
                cases.push(Overwrite {
                    args: os(&[&"merge", &parts[0], &out]),
                    inputs: parts,
                    says: vec![input_refusal(&out)],
                });
            }
        }
        "convert" => {
            // A legacy file.
            for how in ALIASES {
                let d = fresh(dir);
                let input = copied(&fixture("legacy/ggjt-v3-llama.bin"), d.join("old.bin"));
                let out = alias(&input, how, d.join("out.gguf"));
                cases.push(Overwrite {
                    args: os(&[&"convert", &input, &out, &"--force"]),
                    inputs: vec![input],
                    says: vec![input_refusal(&out)],
                });
            }
            // A checkpoint directory (with a model card and generation settings): each file
            // the conversion reads, and the directory itself.
            let checkpoint = |fixture_dir: &str| {
                let d = fresh(dir);
                let ckpt = copied(&fixture(fixture_dir), d.join("ckpt"));
                std::fs::write(ckpt.join("README.md"), "# Tiny\n\nA test model.\n").unwrap();
                std::fs::write(ckpt.join("generation_config.json"), "{\"top_k\": 5}\n").unwrap();
                let inputs: Vec<PathBuf> = std::fs::read_dir(&ckpt)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .collect();
                (d, ckpt, inputs)
            };
            for (fixture_dir, names) in [
                (
                    "hf/tiny-llama",
                    &[
                        "model.safetensors",
                        "config.json",
                        "tokenizer.model",
                        "tokenizer_config.json",
                        "generation_config.json",
                        "README.md",
                    ][..],
                ),
                (
                    "hf/tiny-phi3",
                    &[
                        "model-00001-of-00002.safetensors",
                        "model-00002-of-00002.safetensors",
                        "model.safetensors.index.json",
                    ],
                ),
            ] {
                for name in names {
                    for how in ALIASES {
                        let (d, ckpt, inputs) = checkpoint(fixture_dir);
                        let out = alias(&ckpt.join(name), how, d.join("out.gguf"));
                        cases.push(Overwrite {
                            args: os(&[&"convert", &ckpt, &out, &"--force"]),
                            inputs,
                            says: vec![input_refusal(&out)],
                        });
                    }
                }
            }
            let (_, ckpt, inputs) = checkpoint("hf/tiny-llama");
            cases.push(Overwrite {
                args: os(&[&"convert", &ckpt, &ckpt, &"--force"]),
                inputs,
                says: vec![input_refusal(&ckpt)],
            });
        }
        "export" => {
            // One of the files written is the input under another name ...
            for (name, how) in [
                ("model.safetensors", "hard"),
                ("model.safetensors", "symbolic"),
                ("tokenizer.json", "symbolic"),
                ("config.json", "hard"),
            ] {
                let d = fresh(dir);
                let input = copied(&fixture("model-qwen3.gguf"), d.join("m.gguf"));
                let out_dir = d.join("hf");
                std::fs::create_dir(&out_dir).unwrap();
                let out = out_dir.join(name);
                if how == "hard" {
                    std::fs::hard_link(&input, &out).unwrap();
                } else {
                    std::os::unix::fs::symlink(&input, &out).unwrap();
                }
                cases.push(Overwrite {
                    args: os(&[&"export", &input, &out_dir, &"--force"]),
                    inputs: vec![input],
                    says: vec![input_refusal(&out)],
                });
            }
            // ... or the input itself is named as one of them.
            for name in ["model.safetensors", "tokenizer_config.json"] {
                let d = fresh(dir);
                let input = copied(&fixture("model-qwen3.gguf"), d.join(name));
                cases.push(Overwrite {
                    args: os(&[&"export", &input, &d, &"--force"]),
                    inputs: vec![input.clone()],
                    says: vec![input_refusal(&input)],
                });
            }
        }
        _ => return None,
    }
    Some(cases)
}

/// "A command never writes over a file it reads": every subcommand `gguf --help` lists is
/// either known to write no file, or is made to name each of its inputs as its output, by
/// that input's own name, through a symbolic link and through a hard link. Each such run must
/// be refused (status 1, the refusal naming the output) with every input's bytes unchanged.
/// All the cases run before the verdict, which lists every one that failed.
#[cfg(unix)]
#[test]
fn no_subcommand_writes_over_a_file_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut count = 0;
    for sub in subcommands() {
        let cases = overwrites(&sub, dir.path()).unwrap_or_else(|| {
            panic!("`gguf {sub}` is new: list what it writes in `overwrites`, or that it writes nothing")
        });
        for case in cases {
            count += 1;
            let line = format!(
                "gguf {}",
                case.args
                    .iter()
                    .map(|a| a.to_string_lossy())
                    .collect::<Vec<_>>()
                    .join(" ")
            );
            let before: Vec<Vec<u8>> = case
                .inputs
                .iter()
                .map(|p| std::fs::read(p).unwrap())
                .collect();
            let mut cmd = gguf();
            cmd.args(&case.args);
            let r = run(cmd, b"", Stdout::Read);
            assert_no_crash(&line, &r);
            if r.status.code() != Some(1) {
                failures.push(format!(
                    "{line}: exit status {:?}\n  {}",
                    r.status,
                    r.stderr.trim()
                ));
            }
            for says in &case.says {
                if !r.stderr.contains(says.as_str()) {
                    failures.push(format!(
                        "{line}: stderr lacks {says:?}\n  {}",
                        r.stderr.trim()
                    ));
                }
            }
            for (path, bytes) in case.inputs.iter().zip(&before) {
                if std::fs::read(path).ok().as_ref() != Some(bytes) {
                    failures.push(format!("{line}: {} was changed", path.display()));
                }
            }
        }
    }
    assert!(count >= 40, "{count} cases");
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `GGUF_FORCE_ISA` naming an instruction set this CPU lacks, an unknown one or nothing: one
/// line naming the variable, its value and what the CPU has, exit status 2, from every command.
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
