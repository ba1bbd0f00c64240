//! The bash tool: output and status, the working directory, caps, and the OS sandbox it runs
//! in, every test under each confinement (bubblewrap, then Landlock): every process dies with
//! the call (on timeout, when the shell exits, when the call is dropped, even one that tried
//! to leave its session), the VM is out of reach, writes stay in the agent's write paths, the
//! network is reachable only when allowed, and ordinary work (build, test, git status) still
//! runs. Where the two differ (what Landlock cannot do), the test says so and holds each to
//! what it gives.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use prose_agent::confine::{support, Choice, Kind, Support};
use prose_agent::permissions::{Sandbox, UserAllow};
use serde_json::json;

use super::{call, err, ok, sandbox_in};
use crate::support::{confinements, host_processes, scratch};

/// A scratch directory `name` (for `kind`) with an `out/` subdirectory, and a sandbox there
/// that may run commands.
fn allowed(name: &str, kind: Kind) -> (PathBuf, Sandbox) {
    let dir = scratch(&format!("{name}-{}", kind.name()));
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let sb = sandbox_in(&dir, &[("bash", &["allow"])], UserAllow::default(), kind);
    (dir, sb)
}

/// Waits up to a minute for every process running `sleep SECONDS` to be gone.
async fn sleeps_gone(seconds: &[&str]) -> Result<(), String> {
    // They are killed as the call ends; a minute is for a loaded machine to reap them.
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let left: Vec<(&str, Vec<i32>)> = seconds
            .iter()
            .map(|s| (*s, host_processes(&["sleep", s])))
            .filter(|(_, pids)| !pids.is_empty())
            .collect();
        if left.is_empty() {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "still running: {:?}",
        seconds
            .iter()
            .map(|s| (s, host_processes(&["sleep", s])))
            .collect::<Vec<_>>()
    ))
}

#[tokio::test]
async fn output_status_and_working_directory() {
    for kind in confinements() {
        let (dir, sb) = allowed("agent-bash-basic", kind);
        let r = call(
            &sb,
            "bash",
            json!({"command": "echo out; echo err >&2; pwd; echo -n made > out/f.txt"}),
        )
        .await;
        let out = ok(&r);
        let canonical = dir.canonicalize().unwrap();
        assert_eq!(
            out,
            format!("out\nerr\n{}\n[exit status 0]", canonical.display())
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("out/f.txt")).unwrap(),
            "made"
        );

        let r = call(&sb, "bash", json!({"command": "echo failing; exit 3"})).await;
        assert_eq!(err(&r), "failing\n[exit status 3]");
        let r = call(&sb, "bash", json!({"command": "true"})).await;
        assert_eq!(ok(&r), "(no output)\n[exit status 0]");
        // A shell killed by a signal: bubblewrap, its parent in the sandbox, reports it as a
        // shell would, 128 + 15; under Landlock the VM sees the signal itself.
        let r = call(&sb, "bash", json!({"command": "kill -TERM $$"})).await;
        let ended = match kind {
            Kind::Bubblewrap => "[exit status 143]",
            Kind::Landlock => "[killed by signal 15]",
        };
        assert!(err(&r).ends_with(ended), "{kind:?}: {}", r.output.content);
        let r = call(&sb, "bash", json!({"command": "   "})).await;
        assert!(err(&r).contains("`command` is empty"));
    }
}

#[tokio::test]
async fn output_is_capped_in_the_middle() {
    for kind in confinements() {
        let (_, sb) = allowed("agent-bash-cap", kind);
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
}

#[tokio::test]
async fn a_timeout_kills_everything_the_command_started() {
    for (kind, [one, two]) in confinements()
        .into_iter()
        .zip([["3101", "3102"], ["3111", "3112"]])
    {
        let (_, sb) = allowed("agent-bash-timeout", kind);
        let started = Instant::now();
        let r = call(
            &sb,
            "bash",
            json!({"command": format!("sh -c 'sleep {one}' & sleep {two}"), "timeout_s": 1}),
        )
        .await;
        let out = err(&r);
        // Ended by the timeout, not by the sleeps (51 minutes).
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the call took {:?}: it waited for what the command started",
            started.elapsed()
        );
        assert!(out.contains("[killed after the timeout of 1 s]"), "{out}");
        sleeps_gone(&[one, two]).await.unwrap();
    }
}

#[tokio::test]
async fn background_jobs_die_when_the_shell_exits() {
    for (kind, secs) in confinements().into_iter().zip(["3103", "3113"]) {
        let (_, sb) = allowed("agent-bash-background", kind);
        let started = Instant::now();
        let r = call(
            &sb,
            "bash",
            json!({"command": format!("sleep {secs} & echo started")}),
        )
        .await;
        // bubblewrap's sandbox ends with its shell, taking the job with it; under Landlock the
        // VM stops what the shell left in its process group, and says so.
        let expected = match kind {
            Kind::Bubblewrap => "started\n[exit status 0]",
            Kind::Landlock => {
                "started\n[processes the command left running in the background were stopped]\n\
                 [exit status 0]"
            }
        };
        assert_eq!(ok(&r), expected, "{kind:?}");
        // Ended with the shell, not by the background sleep (51 minutes).
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the call took {:?}: it waited for the background job",
            started.elapsed()
        );
        sleeps_gone(&[secs]).await.unwrap();
    }
}

/// Escape 6 of the attack sweep: `setsid sh -c '…' &` left the process group the tool killed,
/// and outlived the call. In bubblewrap's PID namespace nothing does; under Landlock nothing
/// can leave the group (`setsid` and `setpgid` fail), so nothing gets out to outlive it.
#[tokio::test]
async fn processes_that_leave_the_session_die_with_the_call() {
    for (kind, s) in confinements().into_iter().zip([
        ["3105", "3106", "3107", "3108"],
        ["3115", "3116", "3117", "3118"],
    ]) {
        let (dir, sb) = allowed("agent-bash-setsid", kind);
        let r = call(
            &sb,
            "bash",
            json!({"command": format!(
                "setsid sh -c 'sleep {}' & (setsid sleep {} &); nohup sleep {} >/dev/null 2>&1 & \
                 sh -c 'trap \"\" HUP TERM; setsid sleep {} & exit' ; echo left",
                s[0], s[1], s[2], s[3]
            )}),
        )
        .await;
        let out = ok(&r);
        assert!(out.contains("left\n"), "{out}");
        if kind == Kind::Landlock {
            assert!(out.contains("setsid failed"), "{out}");
        }
        sleeps_gone(&s).await.unwrap();
        // A daemon that waits a moment and then writes: it never gets to.
        let r = call(
            &sb,
            "bash",
            json!({"command": "setsid sh -c 'sleep 1; echo late > out/late.txt' > /dev/null 2>&1 < /dev/null & echo gone"}),
        )
        .await;
        ok(&r);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            !dir.join("out/late.txt").exists(),
            "{kind:?}: a process outlived its call"
        );
        // Nor a new process group of its own, which the kill of the call's would miss.
        let r = call(
            &sb,
            "bash",
            json!({"command": "python3 -c 'import os; os.setpgid(0, 0); print(\"own group\")'"}),
        )
        .await;
        match kind {
            Kind::Bubblewrap => assert!(ok(&r).contains("own group")),
            Kind::Landlock => assert!(err(&r).contains("PermissionError"), "{}", r.output.content),
        }
    }
}

#[tokio::test]
async fn dropping_the_call_kills_the_command() {
    for (kind, secs) in confinements().into_iter().zip(["3104", "3114"]) {
        let (dir, sb) = allowed("agent-bash-drop", kind);
        let started = dir.join("out/started");
        let running = call(
            &sb,
            "bash",
            json!({"command": format!("sleep {secs} & touch out/started; wait")}),
        );
        let watcher = async {
            while !started.exists() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::select! {
            _ = running => panic!("the command should still be running"),
            done = tokio::time::timeout(Duration::from_secs(20), watcher) => {
                done.expect("the command started");
            }
        }
        // The call's future is dropped here, by select!.
        sleeps_gone(&[secs]).await.unwrap();
    }
}

/// Under bubblewrap the VM and every other process are invisible. Landlock has no PID
/// namespace: other processes are seen, with their command lines (and the numbers of their
/// open files), but a command can neither signal them nor read their environment, memory
/// map or open files.
#[tokio::test]
async fn the_vm_is_out_of_reach() {
    let me = std::process::id();
    for kind in confinements() {
        let (_, sb) = allowed("agent-bash-pidns", kind);
        let r = call(
            &sb,
            "bash",
            json!({"command": format!(
                "echo parent=$PPID; ls /proc | grep -c '^[0-9]'; \
                 kill -0 {me} 2>/dev/null && echo sees-vm || echo no-vm; \
                 cat /proc/{me}/cmdline >/dev/null 2>&1 && echo cmdline || echo no-cmdline; \
                 head -c 1 /proc/{me}/environ >/dev/null 2>&1 && echo environ || echo no-environ; \
                 readlink /proc/{me}/fd/0 /proc/{me}/cwd >/dev/null 2>&1 && echo fds || echo no-fds; \
                 head -c 1 /proc/{me}/maps >/dev/null 2>&1 && echo maps || echo no-maps"
            )}),
        )
        .await;
        let out = ok(&r);
        let lines: Vec<&str> = out.lines().collect();
        let visible: usize = lines[1].parse().expect("a count");
        assert_eq!(&lines[4..7], ["no-environ", "no-fds", "no-maps"], "{out}");
        assert_eq!(lines[2], "no-vm", "{out}");
        match kind {
            Kind::Bubblewrap => {
                assert_eq!(lines[0], "parent=1", "{out}");
                assert!(visible <= 6, "{visible} processes visible: {out}");
                assert_eq!(lines[3], "no-cmdline", "{out}");
            }
            Kind::Landlock => {
                assert_eq!(lines[0], format!("parent={me}"), "{out}");
                assert!(visible > 6, "the host's processes are listed: {out}");
                assert_eq!(lines[3], "cmdline", "{out}");
            }
        }
    }
}

#[tokio::test]
async fn writes_stay_inside_the_agents_write_paths() {
    for kind in confinements() {
        let root = scratch(&format!("agent-bash-writes-{}", kind.name()));
        let work = root.join("work");
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::create_dir_all(work.join("notes")).unwrap();
        std::fs::write(work.join("src/lib.txt"), "original\n").unwrap();
        let sb = sandbox_in(
            &work,
            &[("bash", &["allow"]), ("write", &["out/", "notes/*.md"])],
            UserAllow::default(),
            kind,
        );
        let host_tmp = format!("/tmp/prosevm-sandbox-probe-{}", std::process::id());
        let r = call(
            &sb,
            "bash",
            json!({"command": format!(
                "touch out/made && mkdir -p out/deeper/still && echo x > out/deeper/still/f && echo out-ok; \
                 echo changed > src/lib.txt || echo src-refused; touch top.txt || echo top-refused; \
                 touch {root}/escaped || echo outside-refused; \
                 touch notes/n.md || echo notes-refused; \
                 touch {host_tmp} && echo host-tmp; touch ${{TMPDIR:-/tmp}}/prose-own-tmp-probe && echo own-tmp; \
                 touch $HOME/.prose-probe || echo home-refused",
                root = root.display()
            )}),
        )
        .await;
        let out = r.output.content.clone();
        for expected in [
            "out-ok",
            "notes-refused",
            "src-refused",
            "top-refused",
            "outside-refused",
            "own-tmp",
            "home-refused",
        ] {
            assert!(out.contains(expected), "{kind:?} {expected}: {out}");
        }
        // bubblewrap's /tmp is the command's own; under Landlock the real one is not
        // writable, and TMPDIR is the command's own directory.
        assert_eq!(out.contains("host-tmp"), kind == Kind::Bubblewrap, "{out}");
        assert!(work.join("out/made").is_file(), "out/ is writable");
        assert!(work.join("out/deeper/still/f").is_file());
        assert!(
            !work.join("notes/n.md").exists(),
            "a pattern covering some of a directory's files gives commands nothing"
        );
        assert_eq!(
            std::fs::read_to_string(work.join("src/lib.txt")).unwrap(),
            "original\n"
        );
        assert!(!work.join("top.txt").exists());
        assert!(!root.join("escaped").exists());
        assert!(!Path::new(&host_tmp).exists(), "{kind:?}: the host's /tmp");
    }
}

/// A file's metadata outside the write paths: bubblewrap's read-only mounts keep it; Landlock
/// does not govern metadata, so a command can change the mode and times of a file the user
/// owns there, never its contents.
#[tokio::test]
async fn metadata_outside_the_write_paths_is_kept_only_under_bubblewrap() {
    use std::os::unix::fs::PermissionsExt;
    for kind in confinements() {
        let work = scratch(&format!("agent-bash-metadata-{}", kind.name()));
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::write(work.join("src/lib.txt"), "original\n").unwrap();
        std::fs::set_permissions(work.join("src/lib.txt"), PermissionsExt::from_mode(0o644))
            .unwrap();
        let sb = sandbox_in(
            &work,
            &[("bash", &["allow"]), ("write", &["out/"])],
            UserAllow::default(),
            kind,
        );
        let r = call(
            &sb,
            "bash",
            json!({"command": "chmod 600 src/lib.txt && echo mode || echo no-mode; \
                               touch -d 2001-01-01 src/lib.txt && echo times || echo no-times; \
                               echo changed > src/lib.txt || echo no-write"}),
        )
        .await;
        let out = r.output.content.clone();
        let landlock = kind == Kind::Landlock;
        assert_eq!(out.starts_with("mode\n"), landlock, "{kind:?}: {out}");
        assert_eq!(out.contains("\ntimes\n"), landlock, "{kind:?}: {out}");
        assert!(out.contains("no-write"), "{out}");
        let meta = std::fs::metadata(work.join("src/lib.txt")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o777 == 0o600, landlock);
        assert_eq!(
            std::fs::read_to_string(work.join("src/lib.txt")).unwrap(),
            "original\n"
        );
    }
}

/// Under Landlock the working directory is pinned (it holds the protected places: its
/// `.git`, `prose.toml` and `.prose/`): a command changes the files in it and works freely in
/// its subdirectories, but creates, removes or renames nothing directly in it, and the model
/// is told where it can create files. Under bubblewrap, mount points hold the protected
/// places instead, and the rest of the top is writable.
#[tokio::test]
async fn under_landlock_the_top_of_the_working_directory_keeps_its_entries() {
    for kind in confinements() {
        let (dir, sb) = allowed("agent-bash-pinned", kind);
        std::fs::write(dir.join("top.txt"), "before\n").unwrap();
        std::fs::create_dir_all(dir.join(".git/hooks")).unwrap();
        std::fs::write(dir.join(".git/config"), "[core]\n").unwrap();
        let r = call(
            &sb,
            "bash",
            json!({"command": "echo after > top.txt && echo changed; echo y > out/new.txt && echo in-sub; \
                               echo x > new.txt && echo created; mv top.txt moved.txt && echo moved; \
                               echo evil > .git/hooks/pre-commit || echo hooks-refused; \
                               echo evil >> .git/config || echo config-refused; \
                               mkdir made && echo made-dir; exit 1"}),
        )
        .await;
        let out = err(&r);
        assert!(
            out.contains("changed\n") && out.contains("in-sub\n"),
            "{kind:?}: {out}"
        );
        assert!(
            out.contains("hooks-refused") && out.contains("config-refused"),
            "{out}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert!(!dir.join(".git/hooks/pre-commit").exists());
        assert_eq!(
            std::fs::read_to_string(dir.join("out/new.txt")).unwrap(),
            "y\n"
        );
        let landlock = kind == Kind::Landlock;
        for (word, path) in [
            ("created", "new.txt"),
            ("moved", "moved.txt"),
            ("made-dir", "made"),
        ] {
            assert_eq!(
                out.lines().any(|l| l == word),
                !landlock,
                "{kind:?} {word}: {out}"
            );
            assert_eq!(dir.join(path).exists(), !landlock, "{kind:?} {path}");
        }
        assert_eq!(
            out.contains(
                "[the sandbox (Landlock) lets commands create files only in the subdirectories \
                 already in the working directory, `$TMPDIR`"
            ),
            landlock,
            "the model is told where it can create files: {out}"
        );
    }
}

/// A missing `.git` or `prose.toml` in a write path below the working directory: bubblewrap
/// holds it with a read-only placeholder; under Landlock a command can make it while it runs,
/// and when the call ends it is removed, the output saying so.
#[tokio::test]
async fn a_protected_name_made_in_a_write_path_does_not_outlive_the_call() {
    for kind in confinements() {
        let dir = scratch(&format!("agent-bash-planted-{}", kind.name()));
        let sb = sandbox_in(
            &dir,
            &[("bash", &["allow"]), ("write", &["out/"])],
            UserAllow::default(),
            kind,
        );
        let r = call(
            &sb,
            "bash",
            json!({"command": "mkdir -p out/.git/hooks; echo evil > out/.git/hooks/pre-commit; \
                               echo 'allow = [\"network\"]' > out/prose.toml; touch out/kept; echo done"}),
        )
        .await;
        let out = r.output.content.clone();
        assert!(out.contains("done"), "{out}");
        assert!(
            !dir.join("out/.git/hooks/pre-commit").exists(),
            "{kind:?}: {out}"
        );
        assert!(!dir.join("out/prose.toml").exists(), "{kind:?}: {out}");
        assert!(dir.join("out/kept").exists());
        match kind {
            Kind::Bubblewrap => assert!(!out.contains("[removed"), "{out}"),
            Kind::Landlock => {
                assert!(
                    out.contains("[removed `out/.git`, which commands may not make]"),
                    "{out}"
                );
                assert!(
                    out.contains("[removed `out/prose.toml`, which commands may not make]"),
                    "{out}"
                );
            }
        }
        // Empty ones too: an empty `prose.toml` would hide a parent directory's.
        let r = call(
            &sb,
            "bash",
            json!({"command": "true > out/prose.toml; mkdir out/.git; echo done"}),
        )
        .await;
        let out = r.output.content.clone();
        assert!(out.contains("done"), "{out}");
        assert!(!dir.join("out/prose.toml").exists(), "{kind:?}: {out}");
        assert!(!dir.join("out/.git").exists(), "{kind:?}: {out}");
    }
}

/// The state directory: nothing in it can be read or written under either; under Landlock
/// the names in it can be listed (bubblewrap shows it empty).
#[tokio::test]
async fn the_state_directory_is_out_of_reach_and_its_names_listable_only_under_landlock() {
    for kind in confinements() {
        let (dir, sb) = allowed("agent-bash-state", kind);
        std::fs::create_dir_all(dir.join(".prose/runs/r1")).unwrap();
        std::fs::write(dir.join(".prose/runs/r1/journal.log"), "secret answer\n").unwrap();
        let r = call(
            &sb,
            "bash",
            json!({"command": "ls .prose/runs; cat .prose/runs/r1/journal.log; \
                               echo forged > .prose/runs/r1/journal.log; mkdir .prose/runs/fake; \
                               echo end"}),
        )
        .await;
        let out = r.output.content.clone();
        assert!(!out.contains("secret answer"), "{out}");
        assert_eq!(
            std::fs::read_to_string(dir.join(".prose/runs/r1/journal.log")).unwrap(),
            "secret answer\n"
        );
        assert!(!dir.join(".prose/runs/fake").exists());
        assert_eq!(
            out.starts_with("r1\n"),
            kind == Kind::Landlock,
            "{kind:?}: {out}"
        );
    }
}

/// A working directory under `/tmp` (where `mktemp -d` puts one) is seen as it is, with its
/// files; the directories around it stay read-only and the rest of `/tmp` stays out of
/// reach (under bubblewrap out of sight; under Landlock its names can be listed, not read).
#[tokio::test]
async fn a_working_directory_under_tmp_is_seen_whole_and_its_ancestors_stay_read_only() {
    for kind in confinements() {
        let top = PathBuf::from(format!(
            "/tmp/prosevm-tmp-workdir-{}-{}",
            std::process::id(),
            kind.name()
        ));
        let _ = std::fs::remove_dir_all(&top);
        let work = top.join("project/work");
        std::fs::create_dir_all(work.join("src")).unwrap();
        std::fs::write(work.join("src/lib.txt"), "original\n").unwrap();
        let neighbour = PathBuf::from(format!(
            "/tmp/prosevm-tmp-neighbour-{}-{}",
            std::process::id(),
            kind.name()
        ));
        std::fs::write(&neighbour, "not yours\n").unwrap();
        let sb = sandbox_in(
            &work,
            &[("bash", &["allow"]), ("write", &["out/"])],
            UserAllow::default(),
            kind,
        );
        let r = call(
            &sb,
            "bash",
            json!({"command": format!(
                "cat src/lib.txt; touch out/made && echo out-ok; \
                 touch {project}/escaped || echo ancestor-refused; \
                 cat {neighbour} || echo neighbour-hidden; \
                 touch /tmp/scratch-file-{kind} && echo host-tmp; \
                 touch ${{TMPDIR:-/tmp}}/prose-own-tmp-probe && echo own-tmp",
                project = top.join("project").display(),
                neighbour = neighbour.display(),
                kind = kind.name(),
            )}),
        )
        .await;
        let out = r.output.content.clone();
        let _ = std::fs::remove_file(&neighbour);
        for expected in [
            "original",
            "out-ok",
            "ancestor-refused",
            "neighbour-hidden",
            "own-tmp",
        ] {
            assert!(out.contains(expected), "{kind:?} {expected}: {out}");
        }
        assert!(!out.contains("not yours"), "{out}");
        assert_eq!(out.contains("host-tmp"), kind == Kind::Bubblewrap, "{out}");
        assert!(work.join("out/made").is_file(), "out/ is writable");
        assert!(!top.join("project/escaped").exists());
        assert!(!Path::new(&format!("/tmp/scratch-file-{}", kind.name())).exists());
        let _ = std::fs::remove_dir_all(&top);
    }
}

/// The Landlock ABI of this kernel, when commands can run under it.
fn landlock_abi(kind: Kind) -> Option<i32> {
    match support(Choice::Only(kind)) {
        Support::Landlock { abi, .. } => Some(abi),
        _ => None,
    }
}

/// Whether commands under `kind` can make UNIX sockets: under bubblewrap always; under
/// Landlock from ABI 9, which says which named ones they may reach.
fn unix_sockets(kind: Kind) -> bool {
    landlock_abi(kind).is_none_or(|abi| abi >= 9)
}

/// A named UNIX socket in the host's `/tmp` (a tmux server's, an X server's, an ssh-agent's)
/// is out of reach under both: bubblewrap's `/tmp` is the command's own; Landlock before ABI
/// 9 cannot say which named sockets a command may connect to, so no UNIX socket can be made
/// at all, and from ABI 9 only those where the command may read. One in the working
/// directory is reachable wherever UNIX sockets can be made. Under Landlock the names in
/// `/tmp` can be listed, not read.
#[tokio::test]
async fn a_named_socket_in_the_hosts_tmp_is_out_of_reach() {
    let path = format!("/tmp/prosevm-named-{}.sock", std::process::id());
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    let connect = |to: &str, yes: &str| {
        format!(
            "python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"{to}\")' \
             2>/dev/null && echo {yes} || echo no-{yes}"
        )
    };
    for kind in confinements() {
        let (dir, sb) = allowed("agent-bash-named-socket", kind);
        let inside = dir.canonicalize().unwrap().join("out/own.sock");
        let own = std::os::unix::net::UnixListener::bind(&inside).unwrap();
        let r = call(
            &sb,
            "bash",
            json!({"command": format!(
                "{}; {}; ls /tmp >/dev/null 2>&1 && echo lists-tmp || echo no-list; \
                 python3 -c 'import socket; socket.socketpair(); print(\"pair\")'",
                connect(&path, "host"),
                connect(&inside.display().to_string(), "own"),
            )}),
        )
        .await;
        drop(own);
        let out = ok(&r);
        assert!(out.starts_with("no-host\n"), "{kind:?}: {out}");
        assert!(
            out.contains(if unix_sockets(kind) {
                "\nown\n"
            } else {
                "\nno-own\n"
            }),
            "{kind:?}: {out}"
        );
        assert!(
            out.contains("\nlists-tmp\npair\n"),
            "bubblewrap's /tmp is its own and empty; Landlock's names can be listed: {out}"
        );
    }
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn the_network_is_reachable_only_when_allowed() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            drop(stream);
        }
    });
    // An abstract UNIX socket of the host's: bubblewrap's network namespace has its own;
    // Landlock scopes it away.
    let name = format!("prosevm-abstract-{}", std::process::id());
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
    };
    std::thread::spawn(move || {
        for stream in abstract_listener.incoming() {
            drop(stream);
        }
    });
    let connect = format!(
        "bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo connected || echo unreachable; \
         python3 -c 'import socket; socket.socket(socket.AF_UNIX).connect(\"\\0{name}\")' 2>/dev/null \
         && echo abstract || echo no-abstract"
    );
    for kind in confinements() {
        let dir = scratch(&format!("agent-bash-net-{}", kind.name()));
        let offline = sandbox_in(&dir, &[("bash", &["allow"])], UserAllow::default(), kind);
        let r = call(&offline, "bash", json!({"command": connect})).await;
        assert!(
            ok(&r).starts_with("unreachable\nno-abstract\n"),
            "{kind:?}: {}",
            r.output.content
        );
        let online = sandbox_in(
            &dir,
            &[("bash", &["allow"]), ("network", &["allow"])],
            UserAllow::default(),
            kind,
        );
        let r = call(&online, "bash", json!({"command": connect})).await;
        // With the network the host's abstract sockets are reachable, as bubblewrap leaves
        // them, wherever UNIX sockets can be made.
        let expected = if unix_sockets(kind) {
            "connected\nabstract\n"
        } else {
            "connected\nno-abstract\n"
        };
        assert!(
            ok(&r).starts_with(expected),
            "{kind:?}: {}",
            r.output.content
        );
        let user = UserAllow {
            network: true,
            ..Default::default()
        };
        let by_user = sandbox_in(&dir, &[("bash", &["allow"])], user, kind);
        let r = call(&by_user, "bash", json!({"command": connect})).await;
        assert!(ok(&r).starts_with("connected"), "{}", r.output.content);
        let asked = sandbox_in(
            &dir,
            &[("bash", &["allow"]), ("network", &["prompt"])],
            UserAllow::default(),
            kind,
        );
        let r = call(&asked, "bash", json!({"command": connect})).await;
        assert!(
            ok(&r).starts_with("unreachable"),
            "a command's connections cannot be asked about: {}",
            r.output.content
        );
    }
}

/// What the kernel offers beyond files stays shut under both: no capabilities even as root,
/// no new user namespace; under Landlock also the seccomp filter's refusals that bubblewrap's
/// namespaces make moot (the host's System V IPC, the kernel's keyrings, `ptrace`, sockets
/// but UNIX ones without the network), and `clone3` answers ENOSYS so that the C library
/// falls back to `clone`, whose flags the filter reads.
#[tokio::test]
async fn capabilities_namespaces_and_the_kernels_other_doors_stay_shut() {
    // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0), ptrace(PTRACE_TRACEME), clone3.
    #[cfg(target_arch = "x86_64")]
    let (keyctl, ptrace, clone3) = (250, 101, 435);
    #[cfg(target_arch = "aarch64")]
    let (keyctl, ptrace, clone3) = (219, 117, 435);
    let probe = format!(
        "import ctypes, os\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         for name, nr, args in [('keyctl', {keyctl}, (0, -3, 0)), ('ptrace', {ptrace}, (0, 0, 0)), ('clone3', {clone3}, (0, 0, 0))]:\n\
         \x20   r = libc.syscall(nr, *args)\n\
         \x20   print(name, 'errno', ctypes.get_errno() if r < 0 else 0)\n\
         import socket\n\
         try:\n\
         \x20   socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('udp socket')\n\
         except PermissionError: print('no udp socket')\n"
    );
    let script = scratch("agent-bash-doors-probe").join("probe.py");
    std::fs::write(&script, probe).unwrap();
    for kind in confinements() {
        let (_, sb) = allowed("agent-bash-doors", kind);
        let r = call(
            &sb,
            "bash",
            json!({"command": format!(
                "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status; \
                 unshare -U true 2>/dev/null && echo userns || echo no-userns; \
                 ipcmk -M 4096 >/dev/null 2>&1 && echo sysv || echo no-sysv; \
                 python3 {}",
                script.display()
            )}),
        )
        .await;
        let out = ok(&r);
        // The bounding set can only be emptied by a privileged process (root, on CI); without
        // privileges nothing can be gained from it either (no new privileges).
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        for cap in ["CapEff", "CapPrm", "CapBnd", "CapAmb"] {
            if cap == "CapBnd" && !root {
                continue;
            }
            assert!(
                out.contains(&format!("{cap}:\t0000000000000000\n")),
                "{kind:?} {cap}: {out}"
            );
        }
        assert!(out.contains("no-userns\n"), "{kind:?}: {out}");
        let landlock = kind == Kind::Landlock;
        let eperm = format!("errno {}", libc::EPERM);
        assert_eq!(out.contains("no-sysv\n"), landlock, "{kind:?}: {out}");
        assert_eq!(
            out.contains(&format!("keyctl {eperm}\n")),
            landlock,
            "{out}"
        );
        assert_eq!(
            out.contains(&format!("ptrace {eperm}\n")),
            landlock,
            "{out}"
        );
        assert_eq!(
            out.contains(&format!("clone3 errno {}\n", libc::ENOSYS)),
            landlock,
            "{out}"
        );
        assert_eq!(out.contains("no udp socket\n"), landlock, "{out}");
    }
}

#[tokio::test]
async fn ordinary_work_builds_tests_and_reads_git_inside_the_sandbox() {
    for kind in confinements() {
        let dir = scratch(&format!("agent-bash-work-{}", kind.name()));
        let git = |args: &[&str]| {
            let out = Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
                .args(args)
                .current_dir(&dir)
                .output()
                .expect("git");
            assert!(out.status.success(), "{out:?}");
        };
        std::fs::write(
            dir.join("Cargo.toml"),
            "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n[workspace]\n",
        )
        .unwrap();
        // A project as it is kept: its lock file committed, its build directory there (under
        // Landlock nothing new can be made at the top of the working directory).
        std::fs::write(
            dir.join("Cargo.lock"),
            "version = 4\n\n[[package]]\nname = \"tiny\"\nversion = \"0.1.0\"\n",
        )
        .unwrap();
        std::fs::create_dir_all(dir.join("target")).unwrap();
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(
            dir.join("src/lib.rs"),
            "pub fn two() -> u32 { 2 }\n#[test]\nfn adds() { assert_eq!(two(), 2); }\n",
        )
        .unwrap();
        std::fs::write(dir.join(".gitignore"), "target/\n").unwrap();
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&["commit", "-q", "-m", "start"]);
        std::fs::write(
            dir.join("src/lib.rs"),
            "pub fn two() -> u32 { 1 + 1 }\n#[test]\nfn adds() { assert_eq!(two(), 2); }\n",
        )
        .unwrap();
        let sb = sandbox_in(&dir, &[("bash", &["allow"])], UserAllow::default(), kind);
        let r = call(
            &sb,
            "bash",
            json!({"command": "export CARGO_TARGET_DIR=target; cargo build --offline --quiet && echo built; \
                               cargo test --offline --quiet 2>&1 | grep -o 'test result: ok. 1 passed'; \
                               git status --short; git log --oneline | wc -l",
                   "timeout_s": 300}),
        )
        .await;
        let out = ok(&r);
        assert!(out.contains("built\n"), "{kind:?}: {out}");
        assert!(out.contains("test result: ok. 1 passed"), "{out}");
        assert!(out.contains(" M src/lib.rs\n"), "{out}");
        assert!(out.contains("\n1\n"), "{out}");
        assert!(dir.join("target/debug").is_dir());
    }
}

/// A write path swapped for a link to the outside while commands start (by another session,
/// say): the sandbox binds (bubblewrap) or grants (Landlock) what was checked, opened without
/// following links, or does not start; it never makes the link's target writable.
#[tokio::test]
async fn a_write_path_swapped_for_a_link_never_makes_the_outside_writable() {
    for kind in confinements() {
        let root = scratch(&format!("agent-bash-swap-{}", kind.name()));
        let work = root.join("work");
        let outside = root.join("outside");
        std::fs::create_dir_all(work.join("out")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // Relative, so that it leads outside inside bubblewrap's new root too.
        std::os::unix::fs::symlink("../outside", work.join("alt")).unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (work, stop) = (work.clone(), stop.clone());
            std::thread::spawn(move || {
                use std::os::unix::ffi::OsStrExt;
                let c = |p: PathBuf| std::ffi::CString::new(p.as_os_str().as_bytes()).unwrap();
                let (out, alt) = (c(work.join("out")), c(work.join("alt")));
                let mut swaps = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    // SAFETY: two valid C strings naming paths.
                    let done = unsafe {
                        libc::renameat2(
                            libc::AT_FDCWD,
                            out.as_ptr(),
                            libc::AT_FDCWD,
                            alt.as_ptr(),
                            libc::RENAME_EXCHANGE,
                        )
                    };
                    assert_eq!(done, 0, "{}", std::io::Error::last_os_error());
                    swaps += 1;
                }
                swaps
            })
        };
        let sb = sandbox_in(
            &work,
            &[("bash", &["allow"]), ("write", &["out/"])],
            UserAllow::default(),
            kind,
        );
        for i in 0..300 {
            // Most fail (the sandbox does not start, or `out` is the link by the time `touch`
            // runs); none may write outside.
            call(
                &sb,
                "bash",
                json!({"command": format!("touch out/made-{i}")}),
            )
            .await;
            let planted: Vec<_> = std::fs::read_dir(&outside).unwrap().flatten().collect();
            assert!(planted.is_empty(), "{kind:?} wrote outside: {planted:?}");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        assert!(swapper.join().unwrap() > 100);
        if work.join("out").is_symlink() {
            std::fs::rename(work.join("out"), work.join("link")).unwrap();
            std::fs::rename(work.join("alt"), work.join("out")).unwrap();
        }
        let r = call(&sb, "bash", json!({"command": "touch out/after"})).await;
        ok(&r);
        assert!(work.join("out/after").is_file());
    }
}
