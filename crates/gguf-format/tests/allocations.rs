//! Allocation bounds, measured with a counting allocator: opening a model allocates in
//! proportion to its number of keys and tensors (not to its vocabulary), and no input, however
//! hostile, makes the parser allocate more than a small multiple of its size.

use gguf_format::GgufFile;
use gguf_test_support::alloc::{measure, Counting};
use gguf_test_support::{fixture_bytes, fixtures, real_model, Rng};

#[global_allocator]
static ALLOCATOR: Counting = Counting;

#[test]
fn opening_a_model_does_not_allocate_per_vocabulary_entry() {
    for name in ["smollm2-135m", "gemma3-270m"] {
        let Some(path) = real_model(name) else {
            continue;
        };
        let bytes = std::fs::read(&path).unwrap();
        let (count, size, file) = measure(|| GgufFile::parse(&bytes).unwrap());
        let vocab = file
            .get::<gguf_format::ArrayView>("tokenizer.ggml.tokens")
            .unwrap()
            .len();
        let items = file.metadata().len() + file.tensors().len();
        assert!(vocab > 40_000);
        // A vector and a hash map each for keys and tensors, and one buffer for the overlap check.
        assert!(count <= 5, "{name}: {count} allocations to open");
        assert!(
            size <= 400 * items,
            "{name}: {size} bytes for {items} keys and tensors"
        );
        drop(file);
        let (count, _, mapped) = measure(|| GgufFile::open(&path).unwrap());
        assert!(
            count <= 12,
            "{name}: {count} allocations to open through mmap"
        );
        drop(mapped);
    }
}

#[test]
fn hostile_input_allocates_at_most_a_small_multiple_of_its_size() {
    let mut inputs: Vec<Vec<u8>> = std::fs::read_dir(fixtures().join("corrupt"))
        .unwrap()
        .map(|e| std::fs::read(e.unwrap().path()).unwrap())
        .collect();
    let mut rng = Rng(7);
    let base = fixture_bytes("all-types-v3.gguf");
    for _ in 0..2000 {
        let mut m = base.clone();
        for _ in 0..1 + rng.below(3) {
            let at = rng.below(m.len() as u64) as usize;
            m[at] = rng.next() as u8;
        }
        inputs.push(m);
    }
    for input in &inputs {
        let (_, size, _) = measure(|| {
            let _ = GgufFile::parse(input);
        });
        // Error messages allocate a little; the parser itself never more than the data can hold.
        assert!(
            size <= 64 * input.len() + 16 * 1024,
            "{size} bytes allocated for a {}-byte input",
            input.len()
        );
    }
}
