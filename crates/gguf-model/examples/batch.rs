//! Generates for several prompts at once with the library alone: a [`Batcher`] runs them in
//! its slots, one forward pass per step for all of them, and each comes out exactly as it
//! does when generated on its own, which this example checks by generating them again one at
//! a time:
//! `cargo run --release -p gguf-model --example batch -- MODEL.gguf "The capital of France is" "Water boils at"`.

use gguf_model::{
    Batcher, EncodeOptions, Event, GenerateRequest, Model, ModelError, SamplerConfig,
    SessionOptions,
};

/// The context of each sequence.
pub const CONTEXT: usize = 256;

/// Greedy completions of `prompts`, all generated together in one [`Batcher`].
pub fn batched(
    model: &Model,
    prompts: &[&str],
    max_tokens: usize,
) -> Result<Vec<String>, ModelError> {
    let options = SessionOptions {
        n_ctx: CONTEXT * prompts.len(),
        ..SessionOptions::default()
    };
    let mut batcher: Batcher<'_> = model.batcher(options, prompts.len())?;
    let mut requests = Vec::new();
    for prompt in prompts {
        let ids = model
            .tokenizer()
            .encode(prompt.as_bytes(), EncodeOptions::ADD_AND_PARSE_SPECIAL);
        let request = GenerateRequest::new(ids, SamplerConfig::greedy(), max_tokens);
        requests.push(batcher.submit(request)?);
    }
    let mut texts = vec![String::new(); prompts.len()];
    while !batcher.is_idle() {
        for output in batcher.step() {
            let i = requests
                .iter()
                .position(|&r| r == output.request)
                .expect("every event is for a request submitted above");
            match output.event {
                Event::Token { token, .. } => texts[i].push_str(&token.text),
                Event::Error(e) => return Err(e),
                Event::Done(_) | Event::Embeddings(_) => {}
            }
        }
    }
    Ok(texts)
}

/// Greedy completions of `prompts`, one after another in one session.
pub fn one_at_a_time(
    model: &Model,
    prompts: &[&str],
    max_tokens: usize,
) -> Result<Vec<String>, ModelError> {
    let options = SessionOptions {
        n_ctx: CONTEXT,
        ..SessionOptions::default()
    };
    let mut session = model.session(options)?;
    prompts
        .iter()
        .map(|prompt| {
            let generation = session.generate(prompt, &SamplerConfig::greedy(), max_tokens)?;
            Ok(generation.complete()?.text)
        })
        .collect()
}

#[allow(dead_code)] // tests/batch_example.rs includes this file for the two functions above
fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((path, prompts)) = args.split_first().filter(|(_, p)| !p.is_empty()) else {
        eprintln!("usage: batch MODEL.gguf PROMPT [PROMPT...]");
        std::process::exit(2);
    };
    let prompts: Vec<&str> = prompts.iter().map(String::as_str).collect();
    let model = Model::load(path)?;
    let together = batched(&model, &prompts, 32)?;
    for (prompt, text) in prompts.iter().zip(&together) {
        println!("{prompt}{text}\n");
    }
    let alone = one_at_a_time(&model, &prompts, 32)?;
    if together != alone {
        eprintln!("the batched completions differ from the ones generated alone");
        std::process::exit(1);
    }
    eprintln!("the same as generated one at a time");
    Ok(())
}
