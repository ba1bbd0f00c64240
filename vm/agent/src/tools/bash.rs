//! `bash {command, timeout_s?}`: a shell command in the working directory.
//!
//! The command runs as `sh -c COMMAND` (or, granted by an `execute` pattern, as the file
//! itself) inside the session's OS sandbox (`crate::confine`), with stdin empty and
//! stdout and stderr sent to one pipe (so their lines interleave as written), in a process
//! group of its own that is killed when the shell exits, on timeout, and when the call's
//! future is dropped (the session was cancelled). Under bubblewrap the sandbox has its own
//! PID namespace, so the kernel also kills processes that left the group; under Landlock none
//! can leave it. A call leaves no process behind.
//!
//! Where no sandbox can be set up and the user allowed commands without one, the command
//! runs in its own process group instead: when the shell exits, output still arriving is read
//! for a moment, then the group is killed (a process that left the group survives).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use tokio::io::AsyncReadExt;

use super::{BuiltIn, ToolContext};
use crate::confine::{Confinement, Invocation};
use crate::group::ProcessGroup;
use futures_util::future::BoxFuture;
use prose_machine::protocol::ToolOutput;

/// Seconds a command may run when the call gives no `timeout_s`.
pub const DEFAULT_TIMEOUT_S: u64 = 120;

/// The longest `timeout_s` honoured.
pub const MAX_TIMEOUT_S: u64 = 600;

/// Bytes of output returned at most: the first and last halves are kept, the middle is cut.
pub const MAX_OUTPUT_BYTES: usize = 30_000;

/// How long output is still read after the shell exits, while something it started in the
/// background holds the pipe open.
const DRAIN_AFTER_EXIT: Duration = Duration::from_millis(200);

/// `bash {command, timeout_s?}`.
pub struct Bash;

/// `bash`'s arguments, as the model gives them.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    command: String,
    #[schemars(skip)]
    timeout_s: Option<u64>,
}

impl BuiltIn for Bash {
    type Args = BashArgs;
    const NAME: &'static str = "bash";
    const DESCRIPTION: &'static str = "Run a shell command in the working directory.";
    const READ_ONLY: bool = false;

    fn run<'a>(&'a self, args: BashArgs, cx: &'a ToolContext<'a>) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            if args.command.trim().is_empty() {
                return ToolOutput::error("`command` is empty");
            }
            let how = match cx.bash(&args.command).await {
                Ok(how) => how,
                Err(refusal) => return ToolOutput::error(refusal),
            };
            let timeout = args
                .timeout_s
                .unwrap_or(DEFAULT_TIMEOUT_S)
                .clamp(1, MAX_TIMEOUT_S);
            // Held until the command has ended: it keeps what the sandbox set up (the
            // protected paths' placeholders, the command's temporary directory).
            let mut confinement = match cx.sandbox().confinement() {
                Ok(c) => c,
                Err(e) => {
                    return ToolOutput::error(format!("the sandbox could not be set up: {e}"))
                }
            };
            let mut out = run(
                &how,
                confinement.as_ref(),
                cx.sandbox().workdir(),
                Duration::from_secs(timeout),
            )
            .await;
            if let Some(c) = confinement.as_mut() {
                if out.is_error && out.content.contains("Permission denied") {
                    if let Some(room) = c.where_to_write() {
                        out.content.push('\n');
                        out.content.push_str(&room);
                    }
                }
                for line in c.settle() {
                    out.content.push('\n');
                    out.content.push_str(&line);
                }
            }
            out
        })
    }
}

/// Keeps the first and the last `MAX_OUTPUT_BYTES / 2` bytes of a stream.
struct CappedOutput {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: usize,
}

impl CappedOutput {
    const HALF: usize = MAX_OUTPUT_BYTES / 2;

    fn new() -> CappedOutput {
        CappedOutput {
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len();
        let room = Self::HALF - self.head.len();
        if room > 0 {
            let n = room.min(bytes.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= Self::HALF {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - Self::HALF..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(Self::HALF);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    fn render(&self) -> String {
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        let omitted = self.total - self.head.len() - self.tail.len();
        if omitted > 0 {
            text.push_str(&format!("\n… [{omitted} bytes of output cut] …\n"));
        }
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

/// The process that runs `how`: inside `confinement`, or plainly when there is none; either
/// way in a process group of its own, whose id is its process id.
fn command(how: &Invocation, confinement: Option<&Confinement>) -> tokio::process::Command {
    let (program, args): (OsString, Vec<OsString>) = match how {
        Invocation::Shell(command) => ("sh".into(), vec!["-c".into(), command.into()]),
        Invocation::Exec { program, args } => (
            program.clone().into_os_string(),
            args.iter().map(OsString::from).collect(),
        ),
    };
    match confinement {
        Some(c) => c.command(&program, &args),
        None => {
            let mut cmd = tokio::process::Command::new(program);
            cmd.args(args).process_group(0);
            cmd
        }
    }
}

async fn run(
    how: &Invocation,
    confinement: Option<&Confinement>,
    workdir: &Path,
    timeout: Duration,
) -> ToolOutput {
    let spawn_error = |e: std::io::Error| {
        ToolOutput::error(format!(
            "could not start the command{}: {e}",
            if confinement.is_some() {
                " in its sandbox"
            } else {
                ""
            }
        ))
    };
    let (sender, mut reader) = match tokio::net::unix::pipe::pipe() {
        Ok(p) => p,
        Err(e) => return spawn_error(e),
    };
    let (stdout, stderr) = match sender
        .into_blocking_fd()
        .and_then(|fd| Ok((fd.try_clone()?, fd)))
    {
        Ok(p) => p,
        Err(e) => return spawn_error(e),
    };
    let mut cmd = command(how, confinement);
    cmd.current_dir(workdir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .kill_on_drop(true);
    for var in crate::secrets::SECRET_VARS {
        cmd.env_remove(var);
    }
    let spawned = cmd.spawn();
    // The command's copies of the pipe's write end must close, or the read never ends.
    drop(cmd);
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => return spawn_error(e),
    };
    if child.id().is_none() {
        return ToolOutput::error("the command ended before it could be watched");
    }
    let mut killer = ProcessGroup::led_by(child.id());
    let mut output = CappedOutput::new();
    let mut chunk = vec![0u8; 16 * 1024];
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    let mut eof = false;
    let mut timed_out = false;
    let mut left_running = false;
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    while status.is_none() || !eof {
        tokio::select! {
            read = reader.read(&mut chunk), if !eof => match read {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => output.push(&chunk[..n]),
            },
            exited = child.wait(), if status.is_none() => {
                status = Some(exited);
                if !eof {
                    let drain = tokio::time::Instant::now() + DRAIN_AFTER_EXIT;
                    if drain < deadline.deadline() {
                        deadline.as_mut().reset(drain);
                    }
                }
            }
            () = &mut deadline => {
                if status.is_none() {
                    timed_out = true;
                } else {
                    left_running = true;
                }
                break;
            }
        }
    }
    // Whatever is still running in the group (a timed-out command, background jobs) dies here.
    killer.kill();
    if status.is_none() {
        status = tokio::time::timeout(Duration::from_secs(5), child.wait())
            .await
            .ok();
    }
    let mut text = output.render();
    if text.is_empty() {
        text.push_str("(no output)\n");
    } else if !text.ends_with('\n') {
        text.push('\n');
    }
    if timed_out {
        text.push_str(&format!(
            "[killed after the timeout of {} s]",
            timeout.as_secs()
        ));
        return ToolOutput::error(text);
    }
    if left_running {
        text.push_str("[processes the command left running in the background were stopped]\n");
    }
    match status {
        Some(Ok(s)) if s.success() => {
            text.push_str("[exit status 0]");
            ToolOutput::ok(text)
        }
        Some(Ok(s)) => {
            match (s.code(), std::os::unix::process::ExitStatusExt::signal(&s)) {
                (Some(code), _) => text.push_str(&format!("[exit status {code}]")),
                (None, Some(sig)) => text.push_str(&format!("[killed by signal {sig}]")),
                (None, None) => text.push_str("[ended abnormally]"),
            }
            ToolOutput::error(text)
        }
        Some(Err(e)) => {
            text.push_str(&format!("[could not wait for the command: {e}]"));
            ToolOutput::error(text)
        }
        None => {
            text.push_str("[the command did not end after being killed]");
            ToolOutput::error(text)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capped_output_keeps_head_and_tail() {
        let mut out = CappedOutput::new();
        out.push(b"start ");
        let filler = vec![b'x'; MAX_OUTPUT_BYTES * 2];
        out.push(&filler);
        out.push(b" end");
        let text = out.render();
        assert!(text.starts_with("start xxx"));
        assert!(text.ends_with("xxx end"));
        assert!(text.contains(&format!(
            "[{} bytes of output cut]",
            MAX_OUTPUT_BYTES * 2 + 10 - MAX_OUTPUT_BYTES
        )));
        assert!(text.len() < MAX_OUTPUT_BYTES + 100);

        let mut small = CappedOutput::new();
        small.push(b"hello ");
        small.push(b"world");
        assert_eq!(small.render(), "hello world");
    }
}
