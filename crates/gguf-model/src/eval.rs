//! Perplexity as `llama-perplexity` computes it, and a `llama-bench`-style throughput test.

use std::time::Instant;

use crate::error::{ModelError, Result};
use crate::Session;

/// The result of [`perplexity`].
#[derive(Debug, Clone, PartialEq)]
pub struct PerplexityResult {
    /// The final perplexity.
    pub ppl: f64,
    /// The running estimate after each chunk, as llama-perplexity prints it.
    pub chunk_ppl: Vec<f64>,
    /// Tokens scored.
    pub scored: usize,
}

/// `log p(token)` under `logits` (log-softmax with the sum in f64, as llama-perplexity).
fn log_prob(logits: &[f32], token: u32) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum_exp: f64 = logits.iter().map(|&l| f64::from((l - max).exp())).sum();
    f64::from(logits[token as usize] - max) - sum_exp.ln()
}

/// Perplexity of `text` as `llama-perplexity -c n_ctx` computes it: the whole text is
/// tokenized (with BOS if the model adds one), cut into chunks of the session's context
/// length; each chunk is evaluated from an empty cache with its first token replaced by BOS
/// when the model adds BOS, and only the second half of each chunk is scored (every token
/// there has at least `n_ctx / 2` tokens of context). `progress(done, total, running_ppl)` is
/// called after each chunk. `max_chunks` 0 scores every whole chunk.
pub fn perplexity(
    session: &mut Session<'_>,
    text: &[u8],
    max_chunks: usize,
    mut progress: impl FnMut(usize, usize, f64),
) -> Result<PerplexityResult> {
    let model = session.model();
    let tokenizer = model.tokenizer();
    let n_ctx = session.n_ctx();
    let add_bos = tokenizer.adds_bos();
    let tokens = tokenizer.encode(text, gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL);
    let mut n_chunk = tokens.len() / n_ctx;
    if max_chunks > 0 {
        n_chunk = n_chunk.min(max_chunks);
    }
    if n_chunk == 0 || n_ctx < 4 {
        return Err(ModelError::Request(format!(
            "the text has {} tokens: at least {} (two chunks' worth of context halves) are needed \
             for a context of {n_ctx}",
            tokens.len(),
            n_ctx.max(4)
        )));
    }
    let n_vocab = model.hparams().n_vocab;
    let first = n_ctx / 2;
    let (mut nll, mut count) = (0f64, 0usize);
    let mut chunk_ppl = Vec::with_capacity(n_chunk);
    let mut chunk = Vec::with_capacity(n_ctx);
    for i in 0..n_chunk {
        let start = i * n_ctx;
        chunk.clear();
        chunk.extend_from_slice(&tokens[start..start + n_ctx]);
        if add_bos {
            if let Some(bos) = tokenizer.special_ids().bos {
                chunk[0] = bos;
            }
        }
        session.clear();
        let logits = session.eval_all_logits(&chunk)?;
        for j in first..n_ctx - 1 {
            let row = &logits[j * n_vocab..(j + 1) * n_vocab];
            nll -= log_prob(row, tokens[start + j + 1]);
            count += 1;
        }
        let ppl = (nll / count as f64).exp();
        chunk_ppl.push(ppl);
        progress(i + 1, n_chunk, ppl);
    }
    session.clear();
    Ok(PerplexityResult {
        ppl: (nll / count as f64).exp(),
        chunk_ppl,
        scored: count,
    })
}

/// Mean and standard deviation of a rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Throughput {
    /// Mean tokens per second.
    pub mean: f64,
    /// Sample standard deviation.
    pub sd: f64,
}

/// One `llama-bench` test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BenchTest {
    /// Prompt processing (one batch of `n` tokens, in `n_batch` pieces) or generation (`n`
    /// tokens one at a time).
    pub kind: BenchKind,
    /// Tokens processed or generated.
    pub n: usize,
    /// Tokens already in the cache when the timing starts (`llama-bench -d`).
    pub depth: usize,
}

/// What a [`BenchTest`] times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchKind {
    /// `ppN`: prompt processing.
    Prompt,
    /// `tgN`: token generation.
    Generation,
}

impl BenchTest {
    /// Positions the test needs: the depth and the tokens it adds.
    pub fn positions(&self) -> usize {
        self.depth + self.n
    }

    /// `llama-bench`'s name for the test: `pp512`, `tg64`, `tg64 @ d1024`.
    pub fn name(&self) -> String {
        let kind = match self.kind {
            BenchKind::Prompt => "pp",
            BenchKind::Generation => "tg",
        };
        match self.depth {
            0 => format!("{kind}{}", self.n),
            d => format!("{kind}{} @ d{d}", self.n),
        }
    }
}

/// A deterministic pseudo-random token (llama-bench feeds random tokens).
fn token(state: &mut u64, n_vocab: usize) -> u32 {
    *state = state
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    ((*state >> 33) % n_vocab as u64) as u32
}

fn throughput(rates: &[f64]) -> Throughput {
    let n = rates.len() as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let var = if rates.len() > 1 {
        rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    Throughput {
        mean,
        sd: var.sqrt(),
    }
}

/// Measures `test` as `llama-bench` does: each of `repetitions` runs (after one warm-up run)
/// starts from an empty cache, fills it with `depth` random tokens (BOS first) untimed, then
/// times either the evaluation of `n` random tokens (in the session's batches) or the
/// generation of `n` tokens one at a time (each feeding a random token). The session's context
/// must hold `test.positions()`.
pub fn bench(
    session: &mut Session<'_>,
    test: &BenchTest,
    repetitions: usize,
) -> Result<Throughput> {
    if test.n == 0 {
        return Err(ModelError::Request(
            "a bench test needs at least one token".into(),
        ));
    }
    if test.positions() > session.n_ctx() {
        return Err(ModelError::ContextFull {
            needed: test.positions(),
            n_ctx: session.n_ctx(),
        });
    }
    let n_vocab = session.model().hparams().n_vocab;
    let bos = session.model().tokenizer().special_ids().bos.unwrap_or(0);
    let mut state = 42u64;
    let random = |n: usize, state: &mut u64| -> Vec<u32> {
        (0..n).map(|_| token(state, n_vocab)).collect::<Vec<u32>>()
    };
    let mut rates = Vec::with_capacity(repetitions);
    for rep in 0..=repetitions {
        session.clear();
        if test.depth > 0 {
            let mut context = random(test.depth, &mut state);
            context[0] = bos;
            session.eval(&context)?;
        }
        let secs = match test.kind {
            BenchKind::Prompt => {
                let mut tokens = random(test.n, &mut state);
                if test.depth == 0 {
                    tokens[0] = bos;
                }
                let t = Instant::now();
                session.eval(&tokens)?;
                t.elapsed().as_secs_f64()
            }
            BenchKind::Generation => {
                let mut next = if test.depth == 0 {
                    bos
                } else {
                    token(&mut state, n_vocab)
                };
                let t = Instant::now();
                for _ in 0..test.n {
                    session.eval(&[next])?;
                    next = token(&mut state, n_vocab);
                }
                t.elapsed().as_secs_f64()
            }
        };
        if rep > 0 {
            rates.push(test.n as f64 / secs);
        }
    }
    session.clear();
    Ok(throughput(&rates))
}
