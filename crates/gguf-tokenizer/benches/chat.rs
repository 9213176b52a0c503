//! `cargo bench -p gguf-tokenizer --bench chat`: the time to render a conversation of 200
//! messages with real templates (the tests' copies of Qwen2.5 with tools, Llama 3.2 with tools,
//! SmolLM2, Gemma 3), which includes the render's bounds (every `~`, `+` and slice a call that
//! charges the budget, every byte written charged by the formatter).

// `criterion_group!` defines a public function it cannot document.
#![allow(missing_docs)]

use std::path::Path;

use criterion::{criterion_group, criterion_main, Criterion};
use gguf_tokenizer::chat::{ChatMessage, ChatTemplate, RenderOptions};

fn bench(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/chat/templates");
    let messages: Vec<ChatMessage> = (0..200)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            ChatMessage::new(role, format!("message number {i}, a line of text or two"))
        })
        .collect();
    let opts = RenderOptions {
        add_generation_prompt: true,
        ..RenderOptions::default()
    };
    let mut group = c.benchmark_group("render_200_messages");
    group.sample_size(20);
    for name in ["qwen2.5-tools", "llama3.2-tools", "smollm2-135m", "gemma3"] {
        let source = std::fs::read_to_string(dir.join(format!("{name}.jinja"))).unwrap();
        let template = ChatTemplate::new(&source).unwrap();
        template.render(&messages, &opts).unwrap();
        group.bench_function(name, |b| {
            b.iter(|| {
                template
                    .render(std::hint::black_box(&messages), &opts)
                    .unwrap()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
