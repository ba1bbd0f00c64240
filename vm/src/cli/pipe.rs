//! A reader of the output that goes away (`prosevm runs | head`) ends this process quietly,
//! as it does any Unix tool, instead of a panic on the failed write; a child that goes away
//! (a driver command that does not read its input, a stdio host or MCP server that exited)
//! is only a failed write, which its caller handles.
//!
//! Both arrive as SIGPIPE, which names no descriptor: the handler looks at stdout and stderr
//! and, when one of them is a pipe nobody reads any more, ends the process by SIGPIPE as the
//! default disposition would. Otherwise the write that raised it returns `EPIPE`.

/// Installs the handler; called first thing in `main`, before any thread starts.
pub fn end_quietly_when_the_reader_goes() {
    // SAFETY: sigaction(2) with a handler that only calls async-signal-safe functions
    // (poll, signal, raise); the struct is zeroed (a valid value) and then filled in.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigpipe as extern "C" fn(libc::c_int) as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGPIPE, &action, std::ptr::null_mut());
    }
}

extern "C" fn on_sigpipe(_: libc::c_int) {
    let mut fds = [1, 2].map(|fd| libc::pollfd {
        fd,
        events: 0,
        revents: 0,
    });
    // SAFETY: poll(2) on an array this frame owns; the write end of a pipe whose readers are
    // gone reports POLLERR. signal(2) and raise(3) are async-signal-safe.
    unsafe {
        let ready = libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0);
        if ready > 0 && fds.iter().any(|p| p.revents & libc::POLLERR != 0) {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            libc::raise(libc::SIGPIPE);
        }
    }
}
