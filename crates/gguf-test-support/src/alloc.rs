//! A counting allocator, for tests that bound what an input makes a reader allocate. A test
//! binary installs it and measures a call:
//!
//! ```
//! use gguf_test_support::alloc::{measure, Counting};
//!
//! #[global_allocator]
//! static ALLOCATOR: Counting = Counting;
//!
//! fn main() {
//!     let (allocations, bytes, v) = measure(|| vec![0u8; 100]);
//!     assert_eq!((allocations, bytes, v.len()), (1, 100, 100));
//! }
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

/// The system allocator, counting on each thread the allocations made and the bytes they
/// request (reallocations count as new ones of their new size; nothing is subtracted when
/// memory is freed).
pub struct Counting;

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

/// (allocations, bytes requested, `f`'s value) while running `f` on this thread, in a binary
/// whose global allocator is [`Counting`] (without it both counts are 0).
pub fn measure<T>(f: impl FnOnce() -> T) -> (usize, usize, T) {
    let (c0, b0) = (COUNT.with(Cell::get), BYTES.with(Cell::get));
    let out = f();
    (COUNT.with(Cell::get) - c0, BYTES.with(Cell::get) - b0, out)
}
