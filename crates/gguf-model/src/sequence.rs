//! The per-token step of one generating sequence, written once: the NaN check, sampling, the
//! end-of-generation token, stream decoding, stop strings, the token limit and the context's
//! end, and log-probabilities. [`crate::Generation`] (one sequence in a [`crate::Session`]) and
//! [`crate::Batcher`] (many in a [`crate::ParallelSession`]) both advance their sequences with
//! it, so they stop for the same reasons at the same tokens.

use gguf_tokenizer::StreamDecoder;

use crate::error::{ModelError, Result};
use crate::sampling::{Sampler, SamplerConfig};
use crate::stops::StopText;
use crate::Model;

/// A generated token.
#[derive(Debug, Clone, PartialEq)]
pub struct GeneratedToken {
    /// Its id.
    pub id: u32,
    /// The text it completes (whole characters only; may be empty while a character spans
    /// several tokens).
    pub text: String,
}

/// Why a generation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// The model produced an end-of-generation token (not returned).
    EndOfGeneration,
    /// `max_tokens` tokens were generated.
    MaxTokens,
    /// The text reached one of its stop strings.
    StopString,
    /// The context is full: the last token returned could not be evaluated for another.
    /// llama.cpp stops there too (it shifts the context only when asked to).
    ContextFull,
    /// The request was cancelled ([`crate::Batcher::cancel`]).
    Cancelled,
    /// An error was returned.
    Error,
}

impl StopReason {
    /// A short name for reports: `eog`, `length`, `stop`, `context_full`, `cancelled`, `error`.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::EndOfGeneration => "eog",
            StopReason::MaxTokens => "length",
            StopReason::StopString => "stop",
            StopReason::ContextFull => "context_full",
            StopReason::Cancelled => "cancelled",
            StopReason::Error => "error",
        }
    }
}

/// One entry of a [`TokenLogprob`]: a token, its bytes and its log-probability.
#[derive(Debug, Clone, PartialEq)]
pub struct LogprobEntry {
    /// The token's text (its bytes, lossily as UTF-8).
    pub token: String,
    /// The token's bytes.
    pub bytes: Vec<u8>,
    /// Its log-probability: the log of its softmax share of the raw logits.
    pub logprob: f32,
}

/// A generated token's log-probability and the most likely alternatives at its step, as
/// OpenAI's `logprobs` reports them: from the raw logits, before any sampling setting.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenLogprob {
    /// The token generated.
    pub chosen: LogprobEntry,
    /// The most likely tokens at that step, most likely first (ties: lower id first).
    pub top: Vec<LogprobEntry>,
}

impl TokenLogprob {
    /// The log-probability of `id` under `logits` and the `k` most likely tokens', pieces
    /// decoded by `model`'s tokenizer.
    pub fn new(model: &Model, logits: &[f32], id: u32, k: usize) -> TokenLogprob {
        let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let sum: f64 = logits.iter().map(|&l| f64::from(l - max).exp()).sum();
        let log_sum = sum.ln() as f32;
        let entry = |t: u32| {
            let bytes = model.tokenizer().token_to_piece(t, false);
            LogprobEntry {
                token: String::from_utf8_lossy(&bytes).into_owned(),
                bytes,
                logprob: logits[t as usize] - max - log_sum,
            }
        };
        // The k best (logit descending, then id ascending) in one pass over the logits, kept
        // in a sorted list of at most k: no allocation of the vocabulary's size per token.
        let mut top: Vec<usize> = Vec::with_capacity(k + 1);
        for (t, &l) in logits.iter().enumerate() {
            if top.len() == k && top.last().is_none_or(|&w| l <= logits[w]) {
                continue;
            }
            let at = top.partition_point(|&o| logits[o] >= l);
            top.insert(at, t);
            top.truncate(k);
        }
        TokenLogprob {
            chosen: entry(id),
            top: top.into_iter().map(|t| entry(t as u32)).collect(),
        }
    }
}

/// What one step of a sequence produced.
#[derive(Debug)]
pub(crate) struct Advance {
    /// The token sampled, unless the sequence ended before one (an end-of-generation token,
    /// or no tokens allowed at all).
    pub token: Option<SampledToken>,
    /// Set when the sequence has ended: the token above (if any) is its last.
    pub stop: Option<StopReason>,
}

/// A sampled token with the text it lets a stream show and its log-probability.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct SampledToken {
    pub token: GeneratedToken,
    /// The text that can be shown now: up to a stop string once one appears, and never an
    /// ending that may still become one (held back until it turns out not to).
    pub shown: String,
    pub logprob: Option<TokenLogprob>,
}

/// The state of one generating sequence (see the module docs).
pub(crate) struct Decoding<'m> {
    model: &'m Model,
    sampler: Sampler,
    decoder: StreamDecoder<'m>,
    text: StopText,
    max_tokens: usize,
    generated: usize,
    /// `Some(k)`: each token's log-probability and the `k` most likely alternatives.
    logprobs: Option<usize>,
}

impl<'m> Decoding<'m> {
    /// A sequence sampled by `sampler`, at most `max_tokens` tokens long, stopping at `stops`.
    pub fn new(
        model: &'m Model,
        sampler: &SamplerConfig,
        max_tokens: usize,
        stops: &[String],
        logprobs: Option<usize>,
    ) -> Decoding<'m> {
        Decoding {
            model,
            sampler: Sampler::new(sampler.clone()),
            decoder: model.tokenizer().stream_decoder(false),
            text: StopText::new(stops),
            max_tokens,
            generated: 0,
            logprobs,
        }
    }

    /// Replaces the stop strings (before the first step).
    pub fn set_stops(&mut self, stops: &[&str]) {
        self.text = StopText::new(stops);
    }

    /// All the text generated, stop strings and what follows them included.
    pub fn text(&self) -> &str {
        self.text.text()
    }

    /// Tokens generated so far.
    pub fn generated(&self) -> usize {
        self.generated
    }

    /// The text held back at the end of a sequence that did not end at a stop string.
    pub fn finish(&mut self) -> String {
        self.text.finish().to_string()
    }

    /// Picks the next token from `logits`, computed after the cached `history` in a context
    /// of `n_ctx` positions. Err: the logits are NaN.
    pub fn advance(&mut self, logits: &[f32], history: &[u32], n_ctx: usize) -> Result<Advance> {
        if self.generated >= self.max_tokens {
            return Ok(Advance {
                token: None,
                stop: Some(StopReason::MaxTokens),
            });
        }
        if logits.iter().any(|l| l.is_nan()) {
            return Err(ModelError::NotANumber {
                position: history.len(),
            });
        }
        let id = self.sampler.sample(logits, history);
        if self.model.tokenizer().is_end_of_generation(id) {
            return Ok(Advance {
                token: None,
                stop: Some(StopReason::EndOfGeneration),
            });
        }
        self.generated += 1;
        let logprob = self
            .logprobs
            .map(|k| TokenLogprob::new(self.model, logits, id, k));
        let text = self.decoder.push(id);
        let shown = self.text.push(&text).to_string();
        let stop = if self.text.stopped() {
            Some(StopReason::StopString)
        } else if self.generated >= self.max_tokens {
            Some(StopReason::MaxTokens)
        } else if history.len() >= n_ctx {
            // The token just sampled cannot be evaluated for another.
            Some(StopReason::ContextFull)
        } else {
            None
        };
        Ok(Advance {
            token: Some(SampledToken {
                token: GeneratedToken { id, text },
                shown,
                logprob,
            }),
            stop,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The top log-probabilities: the k best by logit, ties to the lower id, each the log of
    /// its softmax share; none for k = 0; all of them for k past the vocabulary.
    #[test]
    fn top_logprobs_are_the_best_logits_ties_to_the_lower_id() {
        let model = Model::load(gguf_test_support::fixture("model-llama.gguf")).unwrap();
        let n = model.hparams().n_vocab;
        let mut logits = vec![0.0f32; n];
        for (t, l) in [(7, 3.0), (2, 5.0), (9, 5.0), (4, 1.0)] {
            logits[t] = l;
        }
        let values = |l: &TokenLogprob| -> Vec<f32> { l.top.iter().map(|t| t.logprob).collect() };
        let got = TokenLogprob::new(&model, &logits, 9, 3);
        let total: f64 = logits.iter().map(|&l| f64::from(l).exp()).sum();
        let lp = |l: f32| (f64::from(l) - total.ln()) as f32;
        assert!((got.chosen.logprob - lp(5.0)).abs() < 1e-6);
        let expected = [2, 9, 7].map(|t| model.tokenizer().token_to_piece(t, false));
        let pieces: Vec<Vec<u8>> = got.top.iter().map(|t| t.bytes.clone()).collect();
        assert_eq!(pieces, expected);
        for (got, want) in values(&got).iter().zip([5.0, 5.0, 3.0]) {
            assert!((got - lp(want)).abs() < 1e-6);
        }
        assert!(TokenLogprob::new(&model, &logits, 9, 0).top.is_empty());
        // Past the four raised logits, the zeros in id order.
        let five = TokenLogprob::new(&model, &logits, 9, 5);
        assert_eq!(
            five.top[4].bytes,
            model.tokenizer().token_to_piece(0, false)
        );
        assert_eq!(TokenLogprob::new(&model, &logits, 9, n + 3).top.len(), n);
    }
}
