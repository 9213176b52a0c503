//! Greedy generation from a raw prompt, streamed to stdout:
//! `cargo run --release -p gguf-model --example generate -- MODEL.gguf "The capital of France is"`.

use std::io::Write;

use gguf_model::{Model, SamplerConfig, SessionOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(prompt)) = (args.next(), args.next()) else {
        eprintln!("usage: generate MODEL.gguf PROMPT");
        std::process::exit(2);
    };
    let model = Model::load(&path)?;
    let mut session = model.session(SessionOptions::default())?;
    print!("{prompt}");
    for token in session.generate(&prompt, &SamplerConfig::greedy(), 32)? {
        print!("{}", token?.text);
        std::io::stdout().flush()?;
    }
    println!();
    Ok(())
}
