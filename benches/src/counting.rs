//! An allocator that counts the bytes live, for tests that measure what the VM allocates:
//! a test binary installs it with `#[global_allocator] static GLOBAL: Counting = Counting;`
//! and reads [`live`] around the work it measures.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

/// The system allocator, counting.
pub struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

/// Bytes allocated through [`Counting`] and not freed yet.
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

// SAFETY: every call is forwarded to the system allocator unchanged; only a counter is kept
// besides.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarding to the system allocator with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: `ptr` was allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
}
