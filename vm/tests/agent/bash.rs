//! The bash tool: output and status, the working directory, caps, and process groups killed
//! on timeout, when the shell exits, and when the call is dropped.

use std::time::{Duration, Instant};

use prosevm::agent::permissions::UserAllow;
use serde_json::json;

use crate::support::scratch;
use crate::{call, err, ok, sandbox};

fn allowed(name: &str) -> (std::path::PathBuf, prosevm::agent::permissions::Sandbox) {
    let dir = scratch(name);
    let sb = sandbox(&dir, &[("bash", &["allow"])], UserAllow::default());
    (dir, sb)
}

/// Whether process `pid` is gone (or a zombie nobody waited for yet).
fn gone(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid, 0) } != 0 {
        return true;
    }
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit(')')
                .next()
                .unwrap_or("")
                .trim_start()
                .starts_with('Z')
        })
        .unwrap_or(true)
}

async fn wait_gone(pid: i32) -> bool {
    for _ in 0..50 {
        if gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    false
}

#[tokio::test]
async fn output_status_and_working_directory() {
    let (dir, sb) = allowed("agent-bash-basic");
    let r = call(
        &sb,
        "bash",
        json!({"command": "echo out; echo err >&2; pwd; echo -n made > f.txt"}),
    )
    .await;
    let out = ok(&r);
    let canonical = dir.canonicalize().unwrap();
    assert_eq!(
        out,
        format!("out\nerr\n{}\n[exit status 0]", canonical.display())
    );
    assert_eq!(std::fs::read_to_string(dir.join("f.txt")).unwrap(), "made");

    let r = call(&sb, "bash", json!({"command": "echo failing; exit 3"})).await;
    assert_eq!(err(&r), "failing\n[exit status 3]");
    let r = call(&sb, "bash", json!({"command": "true"})).await;
    assert_eq!(ok(&r), "(no output)\n[exit status 0]");
    let r = call(&sb, "bash", json!({"command": "kill -TERM $$"})).await;
    assert!(err(&r).contains("[killed by signal 15]"));
    let r = call(&sb, "bash", json!({"command": "   "})).await;
    assert!(err(&r).contains("`command` is empty"));
}

#[tokio::test]
async fn output_is_capped_in_the_middle() {
    let (_, sb) = allowed("agent-bash-cap");
    let r = call(
        &sb,
        "bash",
        json!({"command": "echo first; head -c 200000 /dev/zero | tr '\\0' x; echo; echo last"}),
    )
    .await;
    let out = ok(&r);
    assert!(out.starts_with("first\nxxx"));
    assert!(out.ends_with("xxx\nlast\n[exit status 0]"));
    assert!(out.contains("bytes of output cut"));
    assert!(out.len() < 31_000, "{}", out.len());
}

#[tokio::test]
async fn a_timeout_kills_the_whole_process_group() {
    let (_, sb) = allowed("agent-bash-timeout");
    let started = Instant::now();
    let r = call(
        &sb,
        "bash",
        json!({"command": "sh -c 'sleep 300' & echo $!; sleep 300", "timeout_s": 1}),
    )
    .await;
    let out = err(&r);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.contains("[killed after the timeout of 1 s]"), "{out}");
    let grandchild: i32 = out.lines().next().unwrap().trim().parse().expect("a pid");
    assert!(
        wait_gone(grandchild).await,
        "background process {grandchild} survived"
    );
}

#[tokio::test]
async fn background_jobs_are_stopped_when_the_shell_exits() {
    let (_, sb) = allowed("agent-bash-background");
    let started = Instant::now();
    let r = call(&sb, "bash", json!({"command": "sleep 300 & echo $!"})).await;
    let out = ok(&r);
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(out.contains("stopped"), "{out}");
    let pid: i32 = out.lines().next().unwrap().trim().parse().expect("a pid");
    assert!(wait_gone(pid).await, "background process {pid} survived");
}

#[tokio::test]
async fn dropping_the_call_kills_the_command() {
    let (dir, sb) = allowed("agent-bash-drop");
    let pid_file = dir.join("pid");
    let running = call(
        &sb,
        "bash",
        json!({"command": "sleep 300 & echo $! > pid.tmp; mv pid.tmp pid; wait"}),
    );
    let watcher = async {
        while !pid_file.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = running => panic!("the command should still be running"),
        _ = tokio::time::timeout(Duration::from_secs(20), watcher) => {}
    }
    // The call's future is dropped here, by select!.
    let pid: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        wait_gone(pid).await,
        "process {pid} survived its dropped call"
    );
}
