//! The threads work is shared among.

use std::sync::OnceLock;

/// Threads for checking files (and rendering diagnostics) side by side, with stacks deep
/// enough for the deepest program the nesting limits allow. As many as the machine has
/// cores, or `RAYON_NUM_THREADS`.
pub fn pool() -> &'static rayon::ThreadPool {
    static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .stack_size(16 << 20)
            .thread_name(|i| format!("prosec-{i}"))
            .build()
            .unwrap_or_else(|_| {
                rayon::ThreadPoolBuilder::new()
                    .num_threads(1)
                    .build()
                    .expect("a thread pool of one thread")
            })
    })
}
