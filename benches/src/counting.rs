//! An allocator that counts, for tests that measure what the toolchain allocates: a test
//! binary installs it with `#[global_allocator] static GLOBAL: Counting = Counting;` and
//! reads [`live`] around the work it measures, or runs the work in [`largest_in`] for the
//! largest single allocation it made.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicIsize, Ordering};

/// The system allocator, counting.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

thread_local! {
    /// The largest single allocation made on this thread since [`largest_in`] began.
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// Bytes allocated through [`Counting`] and not freed yet.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// Runs `f` and returns what it gives with the largest single allocation it made on this
/// thread, in bytes (a reallocation counts as an allocation of its new size). Other threads'
/// allocations, as other tests in the binary make, are not counted.
pub fn largest_in<T>(f: impl FnOnce() -> T) -> (T, usize) {
    LARGEST.with(|c| c.set(0));
    let out = f();
    (out, LARGEST.with(Cell::get))
}

/// Notes an allocation of `size` bytes.
fn note(size: usize) {
    LIVE.fetch_add(size as isize, Ordering::Relaxed);
    // A thread being torn down has no counter left: nothing is noted for it.
    let _ = LARGEST.try_with(|c| c.set(c.get().max(size)));
}

// SAFETY: every call is forwarded to the system allocator unchanged; only counters are kept
// besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarding to the system allocator with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}
