//! `ParallelSession`: sequences evaluated together in one forward pass give each sequence the
//! logits a `Session` of its own gives it, on every decoder fixture and on the real models.

use gguf_model::{argmax, Model, ModelError, SeqInput, SessionOptions};
use gguf_test_support::{fixture, real_model};

const PROMPTS: [&str; 3] = [
    "Once upon a time",
    "The quick brown fox jumps over the lazy dog, and then",
    "1, 2, 3,",
];

fn options(n_ctx: usize) -> SessionOptions {
    SessionOptions {
        n_ctx,
        threads: 2,
        ..SessionOptions::default()
    }
}

/// Each prompt alone in a `Session`: greedy, `steps` tokens; the logits of every step.
fn alone(model: &Model, prompt: &[u32], steps: usize) -> Vec<Vec<f32>> {
    let mut session = model.session(options(256)).unwrap();
    session.eval(prompt).unwrap();
    let mut out = vec![session.logits().to_vec()];
    for _ in 1..steps {
        let next = argmax(session.logits());
        session.eval(&[next]).unwrap();
        out.push(session.logits().to_vec());
    }
    out
}

/// How close a batched sequence's logits are to a lone session's.
#[derive(Clone, Copy, PartialEq)]
enum Agreement {
    /// Bit for bit: every kernel computes a row of a batch as it computes the row alone.
    Exact,
    /// The same greedy token at every step, logits within this distance. Products with a Q4_K
    /// matrix repacked for this CPU sum a row in one order in the GEMM (activation rows in
    /// groups of four) and in another in the GEMV (the rest), as llama.cpp's repacked kernels
    /// do (`gguf_quant::packed`), so a row's bits depend on its place in the batch, in
    /// llama-server as here; the model amplifies that rounding.
    Close(f32),
}

/// The prompts prefilled together in one step, then decoded in lockstep (a step with one token
/// of each), with the middle prompt joining late (prefilled in the same step as the others'
/// first decode, as a server's scheduler mixes them): each step's logits agree with the lone
/// session's as `agreement` says.
fn batched_equals_alone(model: &Model, steps: usize, agreement: Agreement) {
    let prompts: Vec<Vec<u32>> = PROMPTS
        .iter()
        .map(|p| {
            model.tokenizer().encode(
                p.as_bytes(),
                gguf_tokenizer::EncodeOptions::ADD_AND_PARSE_SPECIAL,
            )
        })
        .collect();
    let expected: Vec<Vec<Vec<f32>>> = prompts.iter().map(|p| alone(model, p, steps)).collect();
    // Three sequences of 256 positions each (the lone sessions' context, which Phi-3's RoPE
    // factors depend on).
    let mut batch = model.parallel_session(options(3 * 256), 3).unwrap();
    assert_eq!(batch.n_ctx(), 256);
    let mut got: Vec<Vec<Vec<f32>>> = vec![Vec::new(); 3];
    batch
        .step(&[SeqInput::new(0, &prompts[0]), SeqInput::new(2, &prompts[2])])
        .unwrap();
    got[0].push(batch.logits(0).unwrap().to_vec());
    got[2].push(batch.logits(2).unwrap().to_vec());
    // Sequence 1's prompt in two chunks, the first without logits.
    let (head, tail) = prompts[1].split_at(prompts[1].len() / 2);
    let mut first_round = true;
    while got.iter().any(|g| g.len() < steps) {
        let next: Vec<[u32; 1]> = got
            .iter()
            .map(|g| [g.last().map_or(0, |l| argmax(l))])
            .collect();
        let mut inputs = Vec::new();
        let mut owners = Vec::new();
        for seq in [0, 2] {
            if got[seq].len() < steps {
                inputs.push(SeqInput::new(seq, &next[seq]));
                owners.push(seq);
            }
        }
        if first_round {
            inputs.insert(
                1,
                SeqInput {
                    seq: 1,
                    tokens: head,
                    logits: false,
                },
            );
            owners.insert(1, usize::MAX);
        } else if got[1].is_empty() {
            inputs.push(SeqInput::new(1, tail));
            owners.push(1);
        } else if got[1].len() < steps {
            inputs.push(SeqInput::new(1, &next[1]));
            owners.push(1);
        }
        batch.step(&inputs).unwrap();
        for &seq in &owners {
            if seq == usize::MAX {
                // Sequence 1's first chunk asked for no logits.
                assert!(batch.logits(1).is_none());
                continue;
            }
            got[seq].push(batch.logits(seq).unwrap().to_vec());
        }
        first_round = false;
    }
    for (seq, (g, e)) in got.iter().zip(&expected).enumerate() {
        for (step, (a, b)) in g.iter().zip(e).enumerate() {
            let differ = a
                .iter()
                .zip(b)
                .filter(|(x, y)| x.to_bits() != y.to_bits())
                .count();
            let most = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0f32, f32::max);
            let why =
                format!("sequence {seq}, step {step}: {differ} logits differ, by up to {most}");
            match agreement {
                Agreement::Exact => assert_eq!(differ, 0, "{why}"),
                Agreement::Close(bound) => {
                    assert!(most <= bound, "{why}");
                    assert_eq!(argmax(a), argmax(b), "{why}");
                }
            }
        }
        assert_eq!(batch.tokens(seq).len(), prompts[seq].len() + steps - 1);
    }
}

#[test]
fn batched_sequences_equal_lone_sessions_on_every_decoder_fixture() {
    for name in [
        "llama",
        "mistral",
        "qwen2",
        "qwen3",
        "gemma",
        "gemma2",
        "gemma3",
        "phi2",
        "phi3",
        "mixtral",
        "qwen2moe",
        "qwen3moe",
        "olmoe",
        "granite",
        "granitemoe",
        "phimoe",
        "gpt-oss",
        "deepseek2",
    ] {
        let model = Model::load(fixture(&format!("model-{name}.gguf"))).unwrap();
        batched_equals_alone(&model, 6, Agreement::Exact);
    }
}

#[test]
fn batched_sequences_equal_lone_sessions_on_the_real_models() {
    // SmolLM2 (Q4_1, Q8_0) exactly; Gemma 3 (Q4_K_M) closely where its Q4_K matrices are
    // repacked for this CPU (x86), else exactly.
    for name in ["smollm2-135m", "gemma3-270m"] {
        let Some(path) = real_model(name) else {
            return;
        };
        let model = Model::load(&path).unwrap();
        let agreement = if model.packed_bytes() > 0 {
            Agreement::Close(1.5)
        } else {
            Agreement::Exact
        };
        batched_equals_alone(&model, 8, agreement);
    }
}

#[test]
fn steps_are_checked_before_anything_is_computed() {
    let model = Model::load(fixture("model-llama.gguf")).unwrap();
    let mut batch = model.parallel_session(options(64), 2).unwrap();
    assert_eq!(batch.n_ctx(), 32);
    let refused = |r: Result<(), ModelError>, what: &str| {
        let e = r.expect_err(what).to_string();
        assert!(e.contains(what), "{e}");
    };
    refused(batch.step(&[]), "at least one input");
    refused(
        batch.step(&[SeqInput::new(2, &[1])]),
        "sequence 2 does not exist",
    );
    refused(
        batch.step(&[SeqInput::new(0, &[1]), SeqInput::new(0, &[2])]),
        "given twice",
    );
    refused(batch.step(&[SeqInput::new(1, &[])]), "has no tokens");
    refused(batch.step(&[SeqInput::new(0, &[1; 33])]), "context");
    refused(batch.step(&[SeqInput::new(0, &[u32::MAX])]), "out of range");
    assert!(batch.tokens(0).is_empty() && batch.tokens(1).is_empty());
    let mut small = model
        .parallel_session(
            SessionOptions {
                n_batch: 4,
                ..options(64)
            },
            2,
        )
        .unwrap();
    refused(
        small.step(&[SeqInput::new(0, &[1, 2, 3]), SeqInput::new(1, &[1, 2])]),
        "batch size of 4",
    );
    assert!(model.parallel_session(options(64), 0).is_err());
    assert!(model.parallel_session(options(2), 3).is_err());
    // Truncating keeps a prefix for the next prompt.
    batch.step(&[SeqInput::new(1, &[1, 2, 3])]).unwrap();
    batch.truncate(1, 2);
    assert_eq!(batch.tokens(1), &[1, 2]);
}
