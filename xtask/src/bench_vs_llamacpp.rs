//! `cargo xtask bench-vs-llamacpp`: `gguf bench` and llama.cpp's `llama-bench` on the same
//! files, interleaved over several rounds, as a table of ratios (ours / llama.cpp, the median
//! over rounds) with the CPU it ran on, and the same as JSON. Besides llama-bench's tests, two
//! rows time a whole `gguf generate -n 1` against `llama-completion -n 1` (same prompt, context
//! and threads): wall time from start to exit (load to first token) and the peak RSS of the
//! process (`wait4`'s `ru_maxrss`).
//!
//! llama-bench and llama-completion are built once from the `llama-cpp-python` sdist (its `vendor/llama.cpp`: Release,
//! `GGML_NATIVE=ON`) into the cache beside the models, outside git; `--llama-bench PATH` uses
//! another build. Ours is `cargo build --release -p gguf-cli`, a plain release build with no
//! `target-cpu`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{ensure, Context, Result};
use serde_json::{json, Value};

/// The sdist llama-bench is built from: the llama.cpp of the project's other references.
const LLAMA_CPP_PYTHON: &str = "0.3.36";

/// The tests of the issue's table: (name, llama-bench and gguf bench arguments).
const TESTS: &[(&str, &[&str])] = &[
    ("pp", &["-p", "128,512", "-n", "0"]),
    ("tg", &["-p", "0", "-n", "64"]),
    ("tg @ d1024", &["-p", "0", "-n", "64", "-d", "1024"]),
];

/// The prompt and context of the load-to-first-token rows.
const LOAD_PROMPT: &str = "The capital of France is";
const LOAD_CTX: &str = "4096";
/// The names of those rows; lower is better for both.
const LOAD_TIME: &str = "load to 1st token (s)";
const PEAK_RSS: &str = "peak RSS (MiB)";

/// A row of the table: model, threads, test.
type Row = (String, usize, String);

/// The per-round rates of a row: ours, llama.cpp's.
type Rates = (Vec<f64>, Vec<f64>);

/// The options of `cargo xtask bench-vs-llamacpp`.
#[derive(clap::Args)]
pub struct Args {
    /// The models, known names or paths
    #[arg(long, value_delimiter = ',', value_name = "A,B", default_values = ["smollm2-135m", "gemma3-270m"])]
    models: Vec<String>,
    /// The thread counts, each run in turn
    #[arg(long, value_delimiter = ',', value_name = "1,2", default_values_t = [1, 2])]
    threads: Vec<usize>,
    /// The rounds, ours and llama.cpp's interleaved (the table shows the median)
    #[arg(long, value_name = "N", default_value_t = 3)]
    rounds: usize,
    /// The repetitions of each test in a round (`-r` of both benches; the load rows run as
    /// many times)
    #[arg(long, value_name = "N", default_value_t = 3)]
    repetitions: usize,
    /// Another build of llama-bench (llama-completion beside it), instead of building one
    #[arg(long, value_name = "PATH")]
    llama_bench: Option<PathBuf>,
    /// Where the JSON goes [default: target/bench-vs-llamacpp.json]
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub fn run(root: &Path, o: Args) -> Result<()> {
    ensure!(
        o.rounds > 0 && o.repetitions > 0,
        "--rounds and --repetitions must be positive"
    );
    let out = o
        .out
        .clone()
        .unwrap_or_else(|| root.join("target/bench-vs-llamacpp.json"));
    let llama_bench = match &o.llama_bench {
        Some(p) => p.clone(),
        None => build_llama_cpp()?,
    };
    let llama_completion = llama_bench.with_file_name("llama-completion");
    ensure!(
        llama_completion.is_file(),
        "{} is missing (it is built beside llama-bench)",
        llama_completion.display()
    );
    eprintln!("==> cargo build --release -p gguf-cli");
    let status = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
        .args(["build", "--release", "-p", "gguf-cli"])
        .current_dir(root)
        .status()?;
    ensure!(status.success(), "building gguf-cli failed");
    let gguf = root.join("target/release/gguf");
    let models: Vec<(String, PathBuf)> = o
        .models
        .iter()
        .map(|m| Ok((m.clone(), model_path(m)?)))
        .collect::<Result<_>>()?;

    let mut rates: BTreeMap<Row, Rates> = BTreeMap::new();
    for round in 0..o.rounds {
        for (name, path) in &models {
            for &t in &o.threads {
                for (_, args) in TESTS {
                    // Alternate who goes first, so neither always meets a warm or cold machine.
                    let ours_first = round % 2 == 0;
                    for ours in [ours_first, !ours_first] {
                        let results = if ours {
                            run_ours(&gguf, path, t, o.repetitions, args)?
                        } else {
                            run_theirs(&llama_bench, path, t, o.repetitions, args)?
                        };
                        for (test, rate) in results {
                            let entry = rates.entry((name.clone(), t, test)).or_default();
                            if ours {
                                entry.0.push(rate);
                            } else {
                                entry.1.push(rate);
                            }
                        }
                    }
                }
                let ours_first = round % 2 == 0;
                for ours in [ours_first, !ours_first] {
                    for _ in 0..o.repetitions {
                        let (secs, rss) = if ours {
                            load_ours(&gguf, path, t)?
                        } else {
                            load_theirs(&llama_completion, path, t)?
                        };
                        for (test, value) in [(LOAD_TIME, secs), (PEAK_RSS, rss)] {
                            let entry = rates.entry((name.clone(), t, test.into())).or_default();
                            if ours {
                                entry.0.push(value);
                            } else {
                                entry.1.push(value);
                            }
                        }
                    }
                }
                eprintln!("round {}/{}: {name} -t {t} done", round + 1, o.rounds);
            }
        }
    }

    let cpu = cpu_description();
    println!("{cpu}");
    println!(
        "ratio: gguf / llama.cpp for tokens per second, llama.cpp / gguf for time and memory \
         (above 1: gguf ahead)"
    );
    println!("| model | threads | test | gguf | llama.cpp | ratio (median) |");
    println!("|---|---|---|---|---|---|");
    let mut rows = Vec::new();
    for ((model, threads, test), (ours, theirs)) in &rates {
        let lower_is_better = test == LOAD_TIME || test == PEAK_RSS;
        let ratios: Vec<f64> = ours
            .iter()
            .zip(theirs)
            .map(|(a, b)| if lower_is_better { b / a } else { a / b })
            .collect();
        let (ours_m, theirs_m, ratio) = (median(ours), median(theirs), median(&ratios));
        println!("| {model} | {threads} | {test} | {ours_m:.2} | {theirs_m:.2} | {ratio:.2} |");
        let unit = match test.as_str() {
            LOAD_TIME => "s",
            PEAK_RSS => "MiB",
            _ => "tokens_per_s",
        };
        rows.push(json!({
            "model": model, "threads": threads, "test": test, "unit": unit,
            "gguf": ours, "llama_cpp": theirs,
            "ratio_median": ratio, "ratio_is": if lower_is_better { "llama_cpp / gguf" } else { "gguf / llama_cpp" },
        }));
    }
    let report = json!({
        "cpu": cpu,
        "date": command_output("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"]).unwrap_or_default(),
        "rounds": o.rounds,
        "repetitions": o.repetitions,
        "llama_bench": llama_bench.display().to_string(),
        "rows": rows,
    });
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&out, serde_json::to_string_pretty(&report)?)?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// A known model's cached path (fetched if missing), or a path as given.
pub(crate) fn model_path(name: &str) -> Result<PathBuf> {
    if let Some(m) = gguf_hub::find(name) {
        return Ok(gguf_hub::pull(m, false, &mut |e| eprintln!("{e}"))?);
    }
    let p = PathBuf::from(name);
    ensure!(p.is_file(), "{name}: neither a known model nor a file");
    Ok(p)
}

/// llama-bench's name for one of its result rows.
fn test_name(n_prompt: u64, n_gen: u64, depth: u64) -> String {
    let base = if n_prompt > 0 {
        format!("pp{n_prompt}")
    } else {
        format!("tg{n_gen}")
    };
    match depth {
        0 => base,
        d => format!("{base} @ d{d}"),
    }
}

/// The JSON a benchmark run printed, or why there is none.
fn json_output(out: std::io::Result<std::process::Output>, what: &str) -> Result<Value> {
    let out = out.with_context(|| format!("running {what}"))?;
    ensure!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).with_context(|| format!("{what} printed no JSON"))
}

fn run_ours(
    gguf: &Path,
    model: &Path,
    threads: usize,
    reps: usize,
    args: &[&str],
) -> Result<Vec<(String, f64)>> {
    let out = Command::new(gguf)
        .arg("bench")
        .arg(model)
        .args(args)
        .args([
            "-t",
            &threads.to_string(),
            "-r",
            &reps.to_string(),
            "--json",
        ])
        .output();
    json_output(out, "gguf bench")?["results"]
        .as_array()
        .context("gguf bench --json has no results")?
        .iter()
        .map(|r| {
            Ok((
                r["test"].as_str().context("test")?.to_string(),
                r["tokens_per_s"].as_f64().context("tokens_per_s")?,
            ))
        })
        .collect()
}

fn run_theirs(
    llama_bench: &Path,
    model: &Path,
    threads: usize,
    reps: usize,
    args: &[&str],
) -> Result<Vec<(String, f64)>> {
    let out = Command::new(llama_bench)
        .arg("-m")
        .arg(model)
        .args(args)
        .args([
            "-t",
            &threads.to_string(),
            "-r",
            &reps.to_string(),
            "-o",
            "json",
        ])
        .output();
    json_output(out, "llama-bench")?
        .as_array()
        .context("llama-bench -o json printed no array")?
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap_or(0);
            Ok((
                test_name(n("n_prompt"), n("n_gen"), n("n_depth")),
                r["avg_ts"].as_f64().context("avg_ts")?,
            ))
        })
        .collect()
}

/// The arguments both tools share for the load rows: one greedy token after the prompt.
fn load_args(threads: usize) -> Vec<String> {
    let mut args: Vec<String> = ["-p", LOAD_PROMPT, "-n", "1", "--temp", "0", "-c", LOAD_CTX]
        .map(String::from)
        .to_vec();
    args.extend(["-t".to_string(), threads.to_string()]);
    args
}

/// `gguf generate -n 1` on `model`: (seconds from start to exit, peak RSS in MiB).
fn load_ours(gguf: &Path, model: &Path, threads: usize) -> Result<(f64, f64)> {
    let mut cmd = Command::new(gguf);
    cmd.arg("generate").arg(model).args(load_args(threads));
    measure(cmd, "gguf generate")
}

/// `llama-completion -n 1` on `model`, as [`load_ours`] (not in conversation mode).
fn load_theirs(llama_completion: &Path, model: &Path, threads: usize) -> Result<(f64, f64)> {
    let mut cmd = Command::new(llama_completion);
    cmd.arg("-m")
        .arg(model)
        .args(load_args(threads))
        .arg("-no-cnv");
    measure(cmd, "llama-completion")
}

/// Runs `cmd` with its output discarded: (wall seconds to exit, peak RSS in MiB).
fn measure(mut cmd: Command, what: &str) -> Result<(f64, f64)> {
    use std::process::Stdio;
    let start = std::time::Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("starting {what}"))?;
    let pid = libc::pid_t::try_from(child.id()).context("pid")?;
    let mut status = 0;
    // SAFETY: an all-zero `rusage` is a valid value of that plain C struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, not yet waited for (`child` is never waited on, so std
    // does not reap it twice); `status` and `usage` are valid for writes for the call.
    let reaped = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = start.elapsed().as_secs_f64();
    ensure!(
        reaped == pid,
        "waiting for {what}: {}",
        std::io::Error::last_os_error()
    );
    ensure!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "{what} failed (wait status {status})"
    );
    // Linux reports ru_maxrss in KiB.
    Ok((secs, usage.ru_maxrss as f64 / 1024.0))
}

fn median(xs: &[f64]) -> f64 {
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn command_output(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The CPU's model name and the SIMD flags that matter to the kernels.
pub(crate) fn cpu_description() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |name: &str| {
        info.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default()
    };
    let flags = field("flags");
    let simd: Vec<&str> = flags
        .split_whitespace()
        .filter(|f| {
            f.starts_with("avx") || f.starts_with("fma") || f.starts_with("f16c") || *f == "sse4_2"
        })
        .collect();
    format!(
        "CPU: {} ({} logical CPUs); SIMD flags: {}",
        field("model name"),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        simd.join(" ")
    )
}

/// `llama-bench` (and `llama-completion` beside it), built once into
/// `$GGUF_CACHE/llama.cpp-<version>/` from the sdist; returns llama-bench's path.
fn build_llama_cpp() -> Result<PathBuf> {
    let dir = gguf_hub::cache_dir().join(format!("llama.cpp-{LLAMA_CPP_PYTHON}"));
    let src = dir
        .join(format!("llama_cpp_python-{LLAMA_CPP_PYTHON}"))
        .join("vendor/llama.cpp");
    let bin = src.join("build/bin/llama-bench");
    if bin.is_file() && bin.with_file_name("llama-completion").is_file() {
        return Ok(bin);
    }
    std::fs::create_dir_all(&dir)?;
    let python = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
    let step = |what: &str, cmd: &mut Command| -> Result<()> {
        eprintln!("==> {what}");
        let status = cmd.status().with_context(|| format!("starting: {what}"))?;
        ensure!(status.success(), "{what} failed ({status})");
        Ok(())
    };
    if !src.is_dir() {
        step(
            "pip download the llama-cpp-python sdist",
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--no-binary",
                    "llama-cpp-python",
                ])
                .arg(format!("llama-cpp-python=={LLAMA_CPP_PYTHON}"))
                .arg("-d")
                .arg(&dir),
        )?;
        step(
            "unpack the sdist",
            Command::new("tar")
                .arg("xzf")
                .arg(dir.join(format!("llama_cpp_python-{LLAMA_CPP_PYTHON}.tar.gz")))
                .arg("-C")
                .arg(&dir),
        )?;
    }
    let have = |c: &str| {
        Command::new(c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !(have("cmake") && have("ninja")) {
        step(
            "pip install cmake ninja",
            Command::new(&python).args(["-m", "pip", "install", "--quiet", "cmake", "ninja"]),
        )?;
    }
    step(
        "configure llama.cpp (Release, GGML_NATIVE=ON)",
        Command::new("cmake")
            .arg("-S")
            .arg(&src)
            .arg("-B")
            .arg(src.join("build"))
            .args([
                "-G",
                "Ninja",
                "-DCMAKE_BUILD_TYPE=Release",
                "-DGGML_NATIVE=ON",
                "-DLLAMA_CURL=OFF",
                "-DLLAMA_BUILD_TESTS=OFF",
            ]),
    )?;
    step(
        "build llama-bench and llama-completion (several minutes)",
        Command::new("cmake")
            .arg("--build")
            .arg(src.join("build"))
            .args(["--target", "llama-bench", "llama-completion"]),
    )?;
    ensure!(bin.is_file(), "{} was not built", bin.display());
    Ok(bin)
}
