//! The bash tool: output and status, the working directory, caps, and the OS sandbox it runs
//! in: every process dies with the call (on timeout, when the shell exits, when the call is
//! dropped, even one that left its session), the VM is invisible, writes stay in the agent's
//! write paths, the network is reachable only when allowed, and ordinary work (build, test,
//! git status) still runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use prose_runtime::agent::permissions::UserAllow;
use serde_json::json;

use crate::support::scratch;
use crate::{call, err, ok, sandbox};

fn allowed(name: &str) -> (PathBuf, prose_runtime::agent::permissions::Sandbox) {
    let dir = scratch(name);
    let sb = sandbox(&dir, &[("bash", &["allow"])], UserAllow::default());
    (dir, sb)
}

/// The host's processes whose command line is exactly `args` (commands in the sandbox have
/// their own PIDs, so they are found by what they run).
fn host_processes(args: &[&str]) -> Vec<i32> {
    let wanted: Vec<u8> = args
        .iter()
        .flat_map(|a| [a.as_bytes(), b"\0"].concat())
        .collect();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let alive = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                !s.rsplit(')')
                    .next()
                    .unwrap_or("")
                    .trim_start()
                    .starts_with('Z')
            });
            alive && std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == wanted)
        })
        .collect()
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
    // A shell killed by a signal: the sandbox reports it as a shell would, 128 + 15.
    let r = call(&sb, "bash", json!({"command": "kill -TERM $$"})).await;
    assert!(
        err(&r).contains("[exit status 143]"),
        "{}",
        r.output.content
    );
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
async fn a_timeout_kills_everything_the_command_started() {
    let (_, sb) = allowed("agent-bash-timeout");
    let started = Instant::now();
    let r = call(
        &sb,
        "bash",
        json!({"command": "sh -c 'sleep 3101' & sleep 3102", "timeout_s": 1}),
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
    sleeps_gone(&["3101", "3102"]).await.unwrap();
}

#[tokio::test]
async fn background_jobs_die_when_the_shell_exits() {
    let (_, sb) = allowed("agent-bash-background");
    let started = Instant::now();
    let r = call(&sb, "bash", json!({"command": "sleep 3103 & echo started"})).await;
    assert_eq!(ok(&r), "started\n[exit status 0]");
    // Ended with the shell, not by the background sleep (51 minutes).
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "the call took {:?}: it waited for the background job",
        started.elapsed()
    );
    sleeps_gone(&["3103"]).await.unwrap();
}

/// Escape 6 of the attack sweep: `setsid sh -c '…' &` left the process group the tool killed,
/// and outlived the call. In the sandbox's PID namespace nothing does.
#[tokio::test]
async fn processes_that_leave_the_session_die_with_the_call() {
    let (dir, sb) = allowed("agent-bash-setsid");
    let r = call(
        &sb,
        "bash",
        json!({"command": "setsid sh -c 'sleep 3105' & (setsid sleep 3106 &); nohup sleep 3107 >/dev/null 2>&1 & \
                           sh -c 'trap \"\" HUP TERM; setsid sleep 3108 & exit' ; echo left"}),
    )
    .await;
    assert!(ok(&r).starts_with("left\n"), "{}", r.output.content);
    sleeps_gone(&["3105", "3106", "3107", "3108"])
        .await
        .unwrap();
    // A daemon that waits a moment and then writes: it never gets to.
    let r = call(
        &sb,
        "bash",
        json!({"command": "setsid sh -c 'sleep 1; echo late > late.txt' > /dev/null 2>&1 < /dev/null & echo gone"}),
    )
    .await;
    ok(&r);
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert!(
        !dir.join("late.txt").exists(),
        "a process outlived its call"
    );
}

#[tokio::test]
async fn dropping_the_call_kills_the_command() {
    let (dir, sb) = allowed("agent-bash-drop");
    let started = dir.join("started");
    let running = call(
        &sb,
        "bash",
        json!({"command": "sleep 3104 & touch started; wait"}),
    );
    let watcher = async {
        while !started.exists() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        _ = running => panic!("the command should still be running"),
        _ = tokio::time::timeout(Duration::from_secs(20), watcher) => {}
    }
    // The call's future is dropped here, by select!.
    sleeps_gone(&["3104"]).await.unwrap();
}

#[tokio::test]
async fn the_vm_and_other_processes_are_invisible() {
    let (_, sb) = allowed("agent-bash-pidns");
    let me = std::process::id();
    let r = call(
        &sb,
        "bash",
        json!({"command": format!(
            "echo parent=$PPID; ls /proc | grep -c '^[0-9]'; \
             kill -0 {me} 2>/dev/null && echo sees-vm || echo no-vm; \
             cat /proc/{me}/cmdline 2>/dev/null || echo no-cmdline"
        )}),
    )
    .await;
    let out = ok(&r);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "parent=1", "{out}");
    let visible: usize = lines[1].parse().expect("a count");
    assert!(visible <= 6, "{visible} processes visible: {out}");
    assert_eq!(&lines[2..4], ["no-vm", "no-cmdline"], "{out}");
}

#[tokio::test]
async fn writes_stay_inside_the_agents_write_paths() {
    let root = scratch("agent-bash-writes");
    let work = root.join("work");
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::create_dir_all(work.join("notes")).unwrap();
    std::fs::write(work.join("src/lib.txt"), "original\n").unwrap();
    let sb = sandbox(
        &work,
        &[("bash", &["allow"]), ("write", &["out/", "notes/*.md"])],
        UserAllow::default(),
    );
    let host_tmp = format!("/tmp/prosevm-sandbox-probe-{}", std::process::id());
    let r = call(
        &sb,
        "bash",
        json!({"command": format!(
            "touch out/made && echo out-ok; \
             echo changed > src/lib.txt || echo src-refused; touch top.txt || echo top-refused; \
             touch {root}/escaped || echo outside-refused; \
             touch notes/n.md || echo notes-refused; \
             touch {host_tmp} && echo private-tmp; touch $HOME/.prose-probe || echo home-refused",
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
        "private-tmp",
        "home-refused",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
    assert!(work.join("out/made").is_file(), "out/ is writable");
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
    assert!(!Path::new(&host_tmp).exists(), "/tmp is the sandbox's own");
}

/// A working directory under `/tmp` (where `mktemp -d` puts one) is seen as it is, with its
/// files, inside the sandbox's private `/tmp`; the directories around it stay read-only and
/// the rest of `/tmp` stays out of sight.
#[tokio::test]
async fn a_working_directory_under_tmp_is_seen_whole_and_its_ancestors_stay_read_only() {
    let top = PathBuf::from(format!("/tmp/prosevm-tmp-workdir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&top);
    let work = top.join("project/work");
    std::fs::create_dir_all(work.join("src")).unwrap();
    std::fs::write(work.join("src/lib.txt"), "original\n").unwrap();
    let neighbour = PathBuf::from(format!("/tmp/prosevm-tmp-neighbour-{}", std::process::id()));
    std::fs::write(&neighbour, "not yours\n").unwrap();
    let sb = sandbox(
        &work,
        &[("bash", &["allow"]), ("write", &["out/"])],
        UserAllow::default(),
    );
    let r = call(
        &sb,
        "bash",
        json!({"command": format!(
            "cat src/lib.txt; touch out/made && echo out-ok; \
             touch {project}/escaped || echo ancestor-refused; \
             cat {neighbour} || echo neighbour-hidden; \
             touch /tmp/scratch-file && echo private-tmp",
            project = top.join("project").display(),
            neighbour = neighbour.display(),
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
        "private-tmp",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }
    assert!(!out.contains("not yours"), "{out}");
    assert!(work.join("out/made").is_file(), "out/ is writable");
    assert!(!top.join("project/escaped").exists());
    assert!(!Path::new("/tmp/scratch-file").exists());
    let _ = std::fs::remove_dir_all(&top);
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
    let connect = format!(
        "bash -c 'echo hi > /dev/tcp/127.0.0.1/{port}' 2>/dev/null && echo connected || echo unreachable"
    );
    let dir = scratch("agent-bash-net");
    let offline = sandbox(&dir, &[("bash", &["allow"])], UserAllow::default());
    let r = call(&offline, "bash", json!({"command": connect})).await;
    assert!(ok(&r).starts_with("unreachable"), "{}", r.output.content);
    let online = sandbox(
        &dir,
        &[("bash", &["allow"]), ("network", &["allow"])],
        UserAllow::default(),
    );
    let r = call(&online, "bash", json!({"command": connect})).await;
    assert!(ok(&r).starts_with("connected"), "{}", r.output.content);
    let user = UserAllow {
        network: true,
        ..Default::default()
    };
    let by_user = sandbox(&dir, &[("bash", &["allow"])], user);
    let r = call(&by_user, "bash", json!({"command": connect})).await;
    assert!(ok(&r).starts_with("connected"), "{}", r.output.content);
    let asked = sandbox(
        &dir,
        &[("bash", &["allow"]), ("network", &["prompt"])],
        UserAllow::default(),
    );
    let r = call(&asked, "bash", json!({"command": connect})).await;
    assert!(
        ok(&r).starts_with("unreachable"),
        "a command's connections cannot be asked about: {}",
        r.output.content
    );
}

#[tokio::test]
async fn ordinary_work_builds_tests_and_reads_git_inside_the_sandbox() {
    let dir = scratch("agent-bash-work");
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
    let sb = sandbox(&dir, &[("bash", &["allow"])], UserAllow::default());
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
    assert!(out.contains("built\n"), "{out}");
    assert!(out.contains("test result: ok. 1 passed"), "{out}");
    assert!(out.contains(" M src/lib.rs\n"), "{out}");
    assert!(out.contains("\n1\n"), "{out}");
    assert!(dir.join("target").is_dir());
}

/// A write path swapped for a link to the outside while commands start (by another session,
/// say): the sandbox binds what was checked, opened without following links, or does not
/// start; it never makes the link's target writable.
#[tokio::test]
async fn a_write_path_swapped_for_a_link_never_makes_the_outside_writable() {
    let root = scratch("agent-bash-swap");
    let work = root.join("work");
    let outside = root.join("outside");
    std::fs::create_dir_all(work.join("out")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    // Relative, so that it leads outside inside the sandbox's new root too.
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
    let sb = sandbox(
        &work,
        &[("bash", &["allow"]), ("write", &["out/"])],
        UserAllow::default(),
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
        assert!(planted.is_empty(), "wrote outside: {planted:?}");
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
