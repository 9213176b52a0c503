//! The batching example (`examples/batch.rs`) generates what one-at-a-time generation does.

#[path = "../examples/batch.rs"]
mod example;

use gguf_model::Model;

#[test]
fn the_batching_example_equals_one_at_a_time_generation() {
    let model = Model::load(gguf_test_support::fixture("model-llama.gguf")).unwrap();
    let prompts = [
        "Once upon a time",
        "The cat sat on",
        "A very long prompt that takes more than one chunk of the batch, or at least more tokens than the others",
        "Hi",
    ];
    let together = example::batched(&model, &prompts, 24).unwrap();
    let alone = example::one_at_a_time(&model, &prompts, 24).unwrap();
    assert_eq!(together, alone);
    // Text came out, and not the same for every prompt.
    assert!(together.iter().all(|t| !t.is_empty()));
    assert_ne!(together[0], together[1]);
}
