//! The command driver: runs a program once per request (through `sh -c`), with the request
//! as text on its stdin and its reply read from stdout. The environment says what is asked:
//! `PROSE_REQUEST_KIND` (session, evaluate, choose, input, convert), `PROSE_REQUEST_ID`,
//! `PROSE_MODEL`, `PROSE_SYSTEM` and `PROSE_OPTIONS` (a choice's labels, one per line); for
//! a session also what its agent may do, so a command that is itself an agent can enforce the
//! same rules as the VM: `PROSE_TOOLS` (tool names, one per line), `PROSE_SKILLS` (one per
//! line) and `PROSE_PERMISSIONS` (the `permissions:` rules as JSON). A non-zero exit status is
//! the request's failure, carrying the program's stderr.

use super::{render, unanswerable, Driver, Live, Served};
use prose_agent::group::ProcessGroup;
use prose_machine::convert;
use prose_machine::protocol::{Answer, Ask, Failure, Request};
use prose_machine::value::Value;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

/// Most of a failing command's stderr quoted in its error.
const STDERR_QUOTED: usize = 2000;

/// Runs a shell command per request.
pub struct CommandDriver {
    command: String,
    timeout: Duration,
    /// Where the command runs (none: the working directory).
    dir: Option<PathBuf>,
}

impl CommandDriver {
    /// A driver running `command` (a shell command line), giving each request `timeout`.
    pub fn new(command: String, timeout: Duration) -> CommandDriver {
        CommandDriver {
            command,
            timeout,
            dir: None,
        }
    }

    /// This driver, running its command in `dir` (none: the working directory).
    pub fn in_dir(self, dir: Option<PathBuf>) -> CommandDriver {
        CommandDriver { dir, ..self }
    }

    /// Runs the command for `req` with `input` on stdin and `env` set; returns its stdout.
    async fn ask(
        &self,
        req: &Request,
        input: String,
        env: &[(&str, &str)],
    ) -> Result<String, Failure> {
        let mut cmd = tokio::process::Command::new("sh");
        cmd.arg("-c")
            .arg(&self.command)
            .env("PROSE_REQUEST_KIND", req.kind().as_str())
            .env("PROSE_REQUEST_ID", req.id.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Its own process group, so a timeout stops whatever the command started too.
            .process_group(0)
            .kill_on_drop(true);
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| Failure(format!("cannot run the driver command: {e}")))?;
        // Dropped before the command ends (the run stopped, or the request was withdrawn):
        // its whole process group goes with it.
        let mut group = ProcessGroup::led_by(child.id());
        let stdin = child.stdin.take();
        let run = async move {
            let write = async move {
                if let Some(mut s) = stdin {
                    // A command that does not read its input is not an error.
                    let _ = s.write_all(input.as_bytes()).await;
                }
            };
            let (_, out) = tokio::join!(write, child.wait_with_output());
            out
        };
        let out = tokio::time::timeout(self.timeout, run)
            .await
            .map_err(|_| {
                // The guard kills the process group as this returns.
                Failure(format!(
                    "the driver command timed out after {} s",
                    self.timeout.as_secs_f64()
                ))
            })?
            .map_err(|e| Failure(format!("the driver command: {e}")))?;
        group.disarm();
        if !out.status.success() {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let mut stderr = stderr.trim().to_string();
            if stderr.len() > STDERR_QUOTED {
                let mut cut = STDERR_QUOTED;
                while !stderr.is_char_boundary(cut) {
                    cut -= 1;
                }
                stderr.truncate(cut);
                stderr.push_str(" ...");
            }
            let status = out
                .status
                .code()
                .map_or("a signal".to_string(), |c| format!("status {c}"));
            return Err(Failure(if stderr.is_empty() {
                format!("the driver command exited with {status}")
            } else {
                format!("the driver command exited with {status}: {stderr}")
            }));
        }
        String::from_utf8(out.stdout)
            .map(|s| s.trim_end_matches(['\n', '\r']).to_string())
            .map_err(|_| Failure("the driver command's reply is not UTF-8".into()))
    }
}

impl CommandDriver {
    /// The answer to `req`, from the command's reply.
    async fn serve(&self, req: &Request) -> Result<Answer, Failure> {
        let excerpt = |r: &str| r.chars().take(80).collect::<String>();
        Ok(match &req.ask {
            Ask::Session(s) => {
                let model = s.model.clone().unwrap_or_default();
                let system = s.system.clone().unwrap_or_default();
                let tools = s.tools.join("\n");
                let skills = s.skills.join("\n");
                let permissions = serde_json::to_string(&s.permissions).unwrap_or_default();
                let text = self
                    .ask(
                        req,
                        render::session(s),
                        &[
                            ("PROSE_MODEL", &model),
                            ("PROSE_SYSTEM", &system),
                            ("PROSE_TOOLS", &tools),
                            ("PROSE_SKILLS", &skills),
                            ("PROSE_PERMISSIONS", &permissions),
                        ],
                    )
                    .await?;
                Answer::Session(render::answer(&req.id, s, text))
            }
            Ask::Evaluate(e) => {
                let reply = self.ask(req, render::evaluate(e), &[]).await?;
                Answer::Evaluate(render::verdict(&reply).ok_or_else(|| {
                    Failure(format!(
                        "the driver command's verdict on **{}** must start with yes or no, not {:?}",
                        e.condition,
                        excerpt(&reply)
                    ))
                })?)
            }
            Ask::Choose(c) => {
                let labels = c.options.join("\n");
                let reply = self
                    .ask(req, render::choose(c), &[("PROSE_OPTIONS", &labels)])
                    .await?;
                Answer::Choose(render::choice(&reply, &c.options).ok_or_else(|| {
                    Failure(format!(
                        "the driver command chose {:?}, which is neither an option's label nor a number from 1 to {}",
                        excerpt(&reply),
                        c.options.len()
                    ))
                })?)
            }
            Ask::Turn(_) | Ask::Tool(_) | Ask::Permission(_) => {
                return Err(unanswerable("command", req.kind()))
            }
            Ask::Input(i) => {
                Answer::Input(Value::text(self.ask(req, render::input(i), &[]).await?))
            }
            Ask::Convert(c) => {
                let reply = self.ask(req, render::convert(c), &[]).await?;
                Answer::Convert(
                    convert::local(&Value::text(reply.as_str()), c.shape).ok_or_else(|| {
                        Failure(format!(
                            "the driver command's conversion is not {}: {:?}",
                            prose_machine::protocol::shape_name::name(c.shape),
                            excerpt(&reply)
                        ))
                    })?,
                )
            }
        })
    }
}

impl Driver for CommandDriver {
    fn name(&self) -> &str {
        "command"
    }

    async fn answer(&self, req: &Request, _live: &Live) -> Served {
        self.serve(req).await.into()
    }
}
