//! Secrets the VM reads from its environment (the model providers' keys, the Postgres store's
//! URL, which may carry a password), taken out of the environment once at start-up so that no
//! child process can see them.
//!
//! Removing a variable with `unsetenv` is not enough: the kernel shows a process's original
//! environment block in `/proc/PID/environ`, which any process of the same user (a tool's
//! command reading `/proc/$PPID/environ`, say) can read, and `unsetenv` leaves that block
//! untouched. [`take`] therefore overwrites the values in place before removing the
//! variables; what `/proc/PID/environ` shows afterwards is the name followed by NUL bytes.
//!
//! `prosevm`'s `main` calls [`take`] right after parsing its arguments, while the process
//! still has a single thread. A program using this library without calling it keeps its
//! environment, and [`get`] reads the variable from there.

use std::ffi::{c_char, CStr};
use std::sync::OnceLock;

/// The environment variables holding secrets.
pub const SECRET_VARS: &[&str] = &["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "PROSE_STORE"];

/// The secrets taken by [`take`], by variable.
static TAKEN: OnceLock<Vec<(&'static str, String)>> = OnceLock::new();

extern "C" {
    /// The C library's environment: NUL-terminated `NAME=value` strings, then a null pointer.
    static mut environ: *mut *mut c_char;
}

/// Takes every variable of [`SECRET_VARS`] out of the process environment: keeps its value
/// for [`get`], overwrites it with NUL bytes where it is stored, and removes the variable.
/// Only the first call does anything.
///
/// Call it while the process has a single thread (before any runtime or thread is started):
/// changing the environment while another thread reads it is undefined behaviour in C.
pub fn take() {
    TAKEN.get_or_init(|| {
        let mut taken = Vec::new();
        for &var in SECRET_VARS {
            let Some(value) = std::env::var_os(var) else {
                continue;
            };
            if let Some(text) = value.to_str() {
                taken.push((var, text.to_string()));
            }
            overwrite(var);
            // SAFETY (the function is safe in edition 2021, not in 2024): the caller runs
            // this while the process has a single thread, so nothing reads the environment
            // concurrently.
            std::env::remove_var(var);
        }
        taken
    });
}

/// Overwrites the value of every `var=value` entry of the environment with NUL bytes.
fn overwrite(var: &str) {
    let prefix = format!("{var}=");
    // SAFETY: `environ` is the C library's array of pointers to NUL-terminated strings,
    // ended by a null pointer; it is only read here, while the process has one thread (see
    // `take`), and each string is written only within its own length, keeping its
    // terminating NUL, so it stays a valid (shorter) C string.
    unsafe {
        let mut entry = environ;
        if entry.is_null() {
            return;
        }
        while !(*entry).is_null() {
            let text = CStr::from_ptr(*entry).to_bytes();
            if text.starts_with(prefix.as_bytes()) {
                let value = (*entry).add(prefix.len());
                std::ptr::write_bytes(value, 0, text.len() - prefix.len());
            }
            entry = entry.add(1);
        }
    }
}

/// The value of secret `var` (one of [`SECRET_VARS`]): as taken at start-up, or, in a
/// process that did not call [`take`], from the environment. An empty value is none.
pub fn get(var: &str) -> Option<String> {
    let value = match TAKEN.get() {
        Some(taken) => taken
            .iter()
            .find(|(name, _)| *name == var)
            .map(|(_, v)| v.clone()),
        None => std::env::var(var).ok(),
    };
    value.filter(|v| !v.is_empty())
}
