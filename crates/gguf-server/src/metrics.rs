//! Counters of the engine for `GET /metrics`, in Prometheus' text format (version 0.0.4).

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use gguf_model::BatchStats;

/// What the engine has done so far; updated by the engine thread and the handlers, read by
/// `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct Metrics {
    /// Requests the engine took (generations and embeddings).
    pub requests: AtomicUsize,
    /// Requests refused because the queue was full.
    pub rejected: AtomicUsize,
    /// Requests ended because their client left (or the server stopped).
    pub cancelled: AtomicUsize,
    /// Prompt tokens of the generations started, and of those the ones found in a slot's cache.
    pub prompt_tokens: AtomicUsize,
    pub prompt_tokens_cached: AtomicUsize,
    /// Tokens generated.
    pub completion_tokens: AtomicUsize,
    /// Requests waiting for the engine (generations for a slot, embeddings behind the one
    /// under way), and running.
    pub waiting: AtomicUsize,
    pub active: AtomicUsize,
    /// The slots (`--parallel`).
    pub slots: AtomicUsize,
    /// Engine steps, the tokens they evaluated, and the time they took.
    pub steps: AtomicUsize,
    pub tokens_evaluated: AtomicUsize,
    pub busy_micros: AtomicU64,
}

impl Metrics {
    /// Takes the engine's counts: its steps, the tokens they evaluated and the time they
    /// took, the prompt tokens admitted (and found cached) and the tokens generated.
    pub fn record(&self, stats: &BatchStats) {
        self.steps.store(stats.steps, Ordering::Relaxed);
        self.tokens_evaluated
            .store(stats.tokens_evaluated, Ordering::Relaxed);
        let micros = u64::try_from(stats.busy.as_micros()).unwrap_or(u64::MAX);
        self.busy_micros.store(micros, Ordering::Relaxed);
        self.prompt_tokens
            .store(stats.prompt_tokens, Ordering::Relaxed);
        self.prompt_tokens_cached
            .store(stats.prompt_tokens_cached, Ordering::Relaxed);
        self.completion_tokens
            .store(stats.completion_tokens, Ordering::Relaxed);
    }

    /// The exposition text; `admitted` is the count of jobs admitted (running and queued).
    pub fn render(&self, admitted: usize) -> String {
        let get = |a: &AtomicUsize| a.load(Ordering::Relaxed) as f64;
        let busy = self.busy_micros.load(Ordering::Relaxed) as f64 / 1e6;
        let per_second = |n: f64| if busy > 0.0 { n / busy } else { 0.0 };
        let rows: [(&str, &str, &str, f64); 15] = [
            (
                "requests_total",
                "counter",
                "Requests started (generations and embeddings).",
                get(&self.requests),
            ),
            (
                "requests_rejected_total",
                "counter",
                "Requests refused with 503 because the queue was full.",
                get(&self.rejected),
            ),
            (
                "requests_cancelled_total",
                "counter",
                "Requests ended early because the client left or the server stopped.",
                get(&self.cancelled),
            ),
            (
                "prompt_tokens_total",
                "counter",
                "Prompt tokens of the generations started.",
                get(&self.prompt_tokens),
            ),
            (
                "prompt_tokens_cached_total",
                "counter",
                "Prompt tokens found in a slot's KV cache (not evaluated again).",
                get(&self.prompt_tokens_cached),
            ),
            (
                "completion_tokens_total",
                "counter",
                "Tokens generated.",
                get(&self.completion_tokens),
            ),
            (
                "tokens_evaluated_total",
                "counter",
                "Tokens evaluated by forward passes (prompts and generated tokens).",
                get(&self.tokens_evaluated),
            ),
            (
                "steps_total",
                "counter",
                "Forward passes (each batches every active sequence).",
                get(&self.steps),
            ),
            (
                "busy_seconds_total",
                "counter",
                "Seconds spent in forward passes.",
                busy,
            ),
            (
                "queue_depth",
                "gauge",
                "Requests admitted and not finished (running and waiting).",
                admitted as f64,
            ),
            (
                "requests_waiting",
                "gauge",
                "Requests waiting: generations for a free slot, embeddings behind the one under way.",
                get(&self.waiting),
            ),
            (
                "requests_active",
                "gauge",
                "Requests running: generations in a slot, and the embeddings under way.",
                get(&self.active),
            ),
            (
                "slots",
                "gauge",
                "Sequences generated at once (--parallel).",
                get(&self.slots),
            ),
            (
                "tokens_evaluated_per_second",
                "gauge",
                "Tokens evaluated per second of forward passes, on average.",
                per_second(get(&self.tokens_evaluated)),
            ),
            (
                "completion_tokens_per_second",
                "gauge",
                "Tokens generated per second of forward passes, on average.",
                per_second(get(&self.completion_tokens)),
            ),
        ];
        let mut out = String::new();
        for (name, kind, help, value) in rows {
            let _ = writeln!(out, "# HELP gguf_{name} {help}");
            let _ = writeln!(out, "# TYPE gguf_{name} {kind}");
            let _ = writeln!(out, "gguf_{name} {value}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_metric_has_help_type_and_a_value() {
        let m = Metrics::default();
        m.record(&BatchStats {
            steps: 2,
            tokens_evaluated: 42,
            busy: std::time::Duration::from_millis(2000),
            completion_tokens: 30,
            ..BatchStats::default()
        });
        let text = m.render(3);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 15 * 3);
        for chunk in lines.chunks(3) {
            let name = chunk[2].split(' ').next().unwrap();
            assert!(chunk[0].starts_with(&format!("# HELP {name} ")));
            assert!(chunk[1].starts_with(&format!("# TYPE {name} ")));
            let value: f64 = chunk[2].split(' ').nth(1).unwrap().parse().unwrap();
            assert!(value.is_finite());
        }
        assert!(text.contains("\ngguf_steps_total 2\n"));
        assert!(text.contains("\ngguf_tokens_evaluated_total 42\n"));
        assert!(text.contains("\ngguf_busy_seconds_total 2\n"));
        assert!(text.contains("\ngguf_completion_tokens_per_second 15\n"));
        assert!(text.contains("\ngguf_tokens_evaluated_per_second 21\n"));
        assert!(text.contains("\ngguf_queue_depth 3\n"));
    }
}
