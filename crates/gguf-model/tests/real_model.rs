//! SmolLM2 135M (llama architecture, Q4_1 + Q8_0) against llama.cpp 0c1e57098's own outputs on
//! the same file (`tests/data/README.md` says how they were made): greedy completions token
//! for token, the first step's logits, perplexity within 1%, and peak memory.

use std::path::{Path, PathBuf};

use gguf_model::{Model, SamplerConfig, SessionOptions};
use gguf_test_support::{real_model, token_ids as ids};
use serde_json::Value;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

fn json(name: &str) -> Value {
    serde_json::from_slice(&std::fs::read(data(name)).unwrap()).unwrap()
}

/// Below this gap between llama.cpp's two best logits, a step is a near-tie: our logits differ
/// from llama.cpp's by float rounding that this model amplifies (llama.cpp's own f16 and f32
/// KV-cache runs differ by 0.58 in the mean logit and pick different tokens at such steps), so
/// ids are compared up to the first near-tie of each prompt.
const NEAR_TIE: f64 = 0.1;

#[test]
fn greedy_completions_equal_llama_cpp() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let reference = json("greedy.json");
    let mut session = model
        .session(SessionOptions {
            n_ctx: 512,
            threads: 2,
            ..SessionOptions::default()
        })
        .unwrap();
    let results = reference["results"].as_array().unwrap();
    assert!(results.len() >= 6);
    let mut compared = 0;
    let mut whole = 0;
    for r in results {
        let prompt = r["prompt"].as_str().unwrap();
        let prompt_ids = model.tokenizer().encode(prompt.as_bytes(), true, true);
        assert_eq!(prompt_ids, ids(&r["prompt_ids"]), "{prompt:?}: prompt ids");
        let expected = ids(&r["generated_ids"]);
        let generated: Vec<u32> = session
            .generate_from(&prompt_ids, &SamplerConfig::greedy(), 32)
            .unwrap()
            .map(|t| t.unwrap().id)
            .collect();
        let margins = r["top1_margin"].as_array().unwrap();
        let until = margins
            .iter()
            .position(|m| m.as_f64().unwrap() < NEAR_TIE)
            .unwrap_or(expected.len());
        assert_eq!(
            generated[..until],
            expected[..until],
            "{prompt:?}: the first {until} tokens (up to the first near-tie)"
        );
        compared += until;
        if generated == expected {
            whole += 1;
        }
        session.clear();
    }
    eprintln!(
        "{compared} tokens compared; {whole} of {} completions whole",
        results.len()
    );
    // Six of the seven completions match all 32 tokens; the seventh diverges at a near-tie.
    assert!(whole >= 6, "{whole} whole completions");
}

#[test]
fn first_logits_are_close_to_llama_cpp() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let bytes = std::fs::read(data("first_logits_france.f32")).unwrap();
    let expected: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    let mut session = model
        .session(SessionOptions {
            n_ctx: 64,
            threads: 1,
            ..SessionOptions::default()
        })
        .unwrap();
    let prompt = model
        .tokenizer()
        .encode(b"The capital of France is", true, true);
    session.eval(&prompt).unwrap();
    let logits = session.logits();
    assert_eq!(logits.len(), expected.len());
    // KL(llama.cpp || ours) of the next-token distributions. llama.cpp's own f16 and f32
    // KV-cache configurations differ by 0.0016 on this step.
    let lse = |v: &[f32]| {
        let m = v.iter().copied().fold(f32::MIN, f32::max);
        f64::from(m) + v.iter().map(|&x| f64::from(x - m).exp()).sum::<f64>().ln()
    };
    let (ours, theirs) = (lse(logits), lse(&expected));
    let kl: f64 = expected
        .iter()
        .zip(logits)
        .map(|(&b, &a)| {
            let lb = f64::from(b) - theirs;
            lb.exp() * (lb - (f64::from(a) - ours))
        })
        .sum();
    eprintln!("KL(llama.cpp || ours) = {kl:.6}");
    assert!(kl < 0.005, "KL {kl}");
    assert_eq!(gguf_model::argmax(logits), gguf_model::argmax(&expected));
}

#[test]
fn perplexity_is_within_one_percent_of_llama_cpp() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let reference = json("perplexity.json");
    let text = std::fs::read(data("ppl_text.txt")).unwrap();
    let mut session = model
        .session(SessionOptions {
            n_ctx: 128,
            threads: 2,
            n_batch: 128,
            ..SessionOptions::default()
        })
        .unwrap();
    // The first 12 chunks keep the test short; llama-perplexity's running value after them
    // is the reference.
    let chunks = 12;
    let result = gguf_model::perplexity(&mut session, &text, chunks, |_, _, _| {}).unwrap();
    let expected = reference["running_ppl"][chunks - 1].as_f64().unwrap();
    let rel = (result.ppl / expected - 1.0).abs();
    eprintln!(
        "PPL {:.4} vs llama.cpp {expected:.4} ({:.3}%)",
        result.ppl,
        rel * 100.0
    );
    assert!(rel < 0.01, "PPL {} vs {expected}", result.ppl);
    assert_eq!(result.chunk_ppl.len(), chunks);
    assert_eq!(result.scored, chunks * 63);
}

/// Peak resident memory of a 32-token generation, measured in a child process (this test
/// binary re-run with an environment variable), stays below the file size + the KV cache +
/// 64 MB.
#[test]
fn peak_memory_of_a_generation_is_bounded() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    if let Ok(which) = std::env::var("GGUF_MODEL_MEMORY_CHILD") {
        let model = Model::load(&which).unwrap();
        let mut session = model
            .session(SessionOptions {
                n_ctx: 256,
                threads: 2,
                ..SessionOptions::default()
            })
            .unwrap();
        let n = session
            .generate("Once upon a time", &SamplerConfig::greedy(), 32)
            .unwrap()
            .count();
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let hwm = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .map(|v| {
                v.trim()
                    .trim_end_matches(" kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap()
                    * 1024
            })
            .unwrap();
        println!(
            "MEMORY {hwm} {} {} {n}",
            model.file_size(),
            session.kv_cache_bytes()
        );
        return;
    }
    if !cfg!(target_os = "linux") {
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "peak_memory_of_a_generation_is_bounded",
            "--nocapture",
        ])
        .env("GGUF_MODEL_MEMORY_CHILD", &path)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("MEMORY "))
        .unwrap_or_else(|| {
            panic!(
                "child said: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    let v: Vec<u64> = line.split(' ').map(|x| x.parse().unwrap()).collect();
    let (hwm, file, kv) = (v[0], v[1], v[2]);
    let bound = file + kv + (64 << 20);
    eprintln!(
        "peak RSS {} MB; file {} MB + KV {} MB + 64 MB = {} MB",
        hwm >> 20,
        file >> 20,
        kv >> 20,
        bound >> 20
    );
    assert!(hwm < bound, "peak RSS {hwm} exceeds {bound}");
}

/// A session reuses the cached prefix it shares with a new prompt, and the result equals a
/// fresh session's; running past the context is an error, not a panic.
#[test]
fn prefix_reuse_gives_the_same_tokens_and_the_context_is_bounded() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let model = Model::load(&path).unwrap();
    let options = SessionOptions {
        n_ctx: 64,
        threads: 1,
        ..SessionOptions::default()
    };
    let run = |session: &mut gguf_model::Session<'_>, prompt: &str| -> Vec<u32> {
        session
            .generate(prompt, &SamplerConfig::greedy(), 8)
            .unwrap()
            .map(|t| t.unwrap().id)
            .collect()
    };
    let mut reused = model.session(options.clone()).unwrap();
    run(&mut reused, "The capital of France is");
    let shared = reused.tokens().len();
    let second = run(
        &mut reused,
        "The capital of France is Paris. The capital of Spain is",
    );
    let mut fresh = model.session(options).unwrap();
    let expected = run(
        &mut fresh,
        "The capital of France is Paris. The capital of Spain is",
    );
    assert_eq!(second, expected);
    assert!(shared > 4);

    // 64 positions: a long prompt does not fit.
    let long = "word ".repeat(100);
    let err = reused
        .generate(&long, &SamplerConfig::greedy(), 8)
        .err()
        .expect("context overflow");
    assert!(
        matches!(err, gguf_model::ModelError::ContextFull { .. }),
        "{err}"
    );
}

/// SmolLM2 split into three parts (as `llama-gguf-split` cuts it) runs from the parts' maps,
/// without merging, and generates exactly what the single file generates.
#[test]
fn a_split_model_generates_what_the_merged_file_generates() {
    let Some(path) = real_model("smollm2-135m") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("smollm2");
    let parts = gguf_format::split::write_split(
        &path,
        prefix.to_str().unwrap(),
        gguf_format::split::SplitLimit::MaxTensors(100),
        false,
        &mut |_, _| {},
    )
    .unwrap();
    assert_eq!(parts.len(), 3);
    let greedy = |file: &Path| {
        let model = Model::load(file).unwrap();
        let mut session = model
            .session(SessionOptions {
                threads: 2,
                ..SessionOptions::default()
            })
            .unwrap();
        let ids: Vec<u32> = session
            .generate("The capital of France is", &SamplerConfig::greedy(), 24)
            .unwrap()
            .map(|t| t.unwrap().id)
            .collect();
        (ids, model.file_size())
    };
    let (whole, whole_size) = greedy(&path);
    let (split, split_size) = greedy(&parts[0]);
    assert_eq!(split, whole);
    assert_eq!(whole.len(), 24);
    // Three maps, each with its own header.
    assert!(split_size > whole_size, "{split_size} vs {whole_size}");
}
