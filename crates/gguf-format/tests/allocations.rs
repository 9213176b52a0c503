//! Allocation bounds, measured with a counting allocator: opening a model allocates in
//! proportion to its number of keys and tensors (not to its vocabulary), and no input, however
//! hostile, makes the parser allocate more than a small multiple of its size.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use gguf_format::GgufFile;
use gguf_test_support::{fixture_bytes, fixtures, real_model, Rng};

struct Counting;

thread_local! {
    // Per thread, so tests running in parallel do not see each other's allocations.
    static COUNT: Cell<usize> = const { Cell::new(0) };
    static BYTES: Cell<usize> = const { Cell::new(0) };
}

// SAFETY: every call is forwarded unchanged to the system allocator; the counters are
// thread-local `Cell`s with const initialisers, which never allocate themselves.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        let _ = BYTES.try_with(|b| b.set(b.get() + layout.size()));
        // SAFETY: same contract as our caller's.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as our caller's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let _ = COUNT.try_with(|c| c.set(c.get() + 1));
        let _ = BYTES.try_with(|b| b.set(b.get() + new_size));
        // SAFETY: same contract as our caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// (allocations, bytes requested) while running `f` on this thread.
fn measure<T>(f: impl FnOnce() -> T) -> (usize, usize, T) {
    let (c0, b0) = (COUNT.with(Cell::get), BYTES.with(Cell::get));
    let out = f();
    (COUNT.with(Cell::get) - c0, BYTES.with(Cell::get) - b0, out)
}

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
