//! This process's terminal, shared by what draws on it and what asks a person through it:
//! the live progress display registers itself here, and a question for a person hides it
//! while it is asked ([`suspend`]).

use indicatif::{MultiProgress, ProgressDrawTarget};
use std::sync::Mutex;

/// The progress display drawing on this process's stderr, if one is live.
static TERMINAL: Mutex<Option<MultiProgress>> = Mutex::new(None);

/// Registers `display` as the one drawing on stderr (`None`: it stopped); false if the
/// registry cannot be reached.
pub fn register(display: Option<MultiProgress>) -> bool {
    match TERMINAL.lock() {
        Ok(mut t) => {
            *t = display;
            true
        }
        Err(_) => false,
    }
}

/// Runs `f` (which writes to the terminal and reads an answer) with the live progress
/// display, if any, cleared and held still, then lets it draw again.
pub fn suspend<R>(f: impl FnOnce() -> R) -> R {
    let live = TERMINAL.lock().ok().and_then(|t| t.clone());
    let Some(multi) = live else { return f() };
    let _ = multi.clear();
    multi.set_draw_target(ProgressDrawTarget::hidden());
    let r = f();
    multi.set_draw_target(ProgressDrawTarget::stderr());
    r
}

/// The width of the terminal on stderr, in columns (none when stderr is no terminal).
pub fn width() -> Option<u16> {
    // SAFETY: TIOCGWINSZ fills the `winsize` passed; stderr's descriptor stays open.
    let mut size: libc::winsize = unsafe { std::mem::zeroed() };
    let ok = unsafe { libc::ioctl(libc::STDERR_FILENO, libc::TIOCGWINSZ, &mut size) } == 0;
    (ok && size.ws_col > 0).then_some(size.ws_col)
}
