//! Ctrl-C and SIGTERM stop a run cleanly: what is in flight is withdrawn (a command
//! driver's whole process group killed), answers already given stay journaled, the run is
//! marked interrupted and resumes to the end.

use crate::support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn vm(dir: &Path) -> Command {
    let mut cmd = support::prosevm();
    cmd.current_dir(dir).stdin(Stdio::null());
    cmd
}

/// Whether process group `pgid` still has a member.
fn group_alive(pgid: i32) -> bool {
    // SAFETY: kill(2) with signal 0 only checks that the group exists.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

fn status_of(dir: &Path) -> (String, String) {
    let run = std::fs::read_dir(dir.join(".prose/runs"))
        .expect("runs")
        .flatten()
        .find(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .expect("a run");
    let record: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.path().join("run.json")).expect("run.json"),
    )
    .expect("json");
    (
        run.file_name().to_string_lossy().into_owned(),
        record["status"].as_str().unwrap_or_default().to_string(),
    )
}

#[test]
fn sigint_and_sigterm_interrupt_a_run_which_then_resumes() {
    for signal in [libc::SIGINT, libc::SIGTERM] {
        let dir = support::scratch(&format!("signal-{signal}"));
        std::fs::write(
            dir.join("prog.prose"),
            "let a = session \"First\"\noutput b = session \"Second\"\n  context: a\n",
        )
        .expect("program");
        // The first request answers at once; the second leaves a grandchild and waits.
        std::fs::write(
            dir.join("ask.sh"),
            "cat > /dev/null\nif [ \"$PROSE_REQUEST_ID\" = 0:0 ]; then echo one; exit 0; fi\nif [ -e fast ]; then echo two; exit 0; fi\ncut -d\" \" -f5 /proc/$$/stat > group\nsleep 300 &\nwait\n",
        )
        .expect("script");
        let child = vm(&dir)
            .args([
                "run",
                "prog.prose",
                "--driver",
                "command",
                "--command",
                "sh ask.sh",
            ])
            .args(["--trace", "quiet"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let started = Instant::now();
        while !dir.join("group").exists() {
            assert!(started.elapsed() < Duration::from_secs(20), "never asked");
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(100));
        let pgid: i32 = std::fs::read_to_string(dir.join("group"))
            .expect("group")
            .trim()
            .parse()
            .expect("pid");
        assert!(group_alive(pgid));
        // SAFETY: sending a signal to the child we spawned.
        unsafe {
            libc::kill(child.id() as i32, signal);
        }
        let out = child.wait_with_output().expect("wait");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{err}");
        assert!(
            err.contains("interrupted; continue it with: prosevm resume"),
            "{err}"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while group_alive(pgid) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(
            !group_alive(pgid),
            "the command's process group outlived the run"
        );
        let (id, status) = status_of(&dir);
        assert_eq!(status, "interrupted");
        // Resumed, the first answer is replayed and the second asked again.
        std::fs::write(dir.join("fast"), "").expect("fast");
        std::fs::write(dir.join("calls"), "").expect("calls");
        let (code, out, err) = support::output(vm(&dir).args(["resume", &id, "--trace", "quiet"]));
        assert_eq!(code, 0, "{err}");
        assert_eq!(out, "b: two\n");
        assert_eq!(status_of(&dir).1, "finished");
    }
}

#[test]
fn a_second_ctrl_c_forces_the_stop_and_the_run_still_resumes() {
    let dir = support::scratch("signal-twice");
    std::fs::write(
        dir.join("prog.prose"),
        "let a = session \"First\"\noutput b = session \"Second\"\n  context: a\n",
    )
    .expect("program");
    std::fs::write(
        dir.join("ask.sh"),
        "cat > /dev/null\nif [ \"$PROSE_REQUEST_ID\" = 0:0 ]; then echo one; exit 0; fi\nif [ -e fast ]; then echo two; exit 0; fi\ncut -d\" \" -f5 /proc/$$/stat > group\nsleep 300 &\ntouch waiting\nwait\n",
    )
    .expect("script");
    let child = vm(&dir)
        .args(["run", "prog.prose", "--driver", "command"])
        .args(["--command", "sh ask.sh", "--trace", "quiet"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let started = Instant::now();
    while !dir.join("waiting").exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "never asked");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Two signals back to back: whichever of the clean stop and the forced one wins, the
    // process ends with 130 and what was journaled stays usable.
    for _ in 0..2 {
        // SAFETY: sending a signal to the child we spawned.
        unsafe {
            libc::kill(child.id() as i32, libc::SIGINT);
        }
    }
    let pgid: i32 = std::fs::read_to_string(dir.join("group"))
        .expect("group")
        .trim()
        .parse()
        .expect("pid");
    let out = child.wait_with_output().expect("wait");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("prosevm: stopping"), "{err}");
    // However the stop went, the command's process group went with it.
    let deadline = Instant::now() + Duration::from_secs(5);
    while group_alive(pgid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !group_alive(pgid),
        "the command's process group outlived a forced stop"
    );
    let (id, status) = status_of(&dir);
    assert!(
        status == "interrupted" || status == "running",
        "{status}: {err}"
    );
    std::fs::write(dir.join("fast"), "").expect("fast");
    let (code, out, err) = support::output(vm(&dir).args(["resume", &id, "--trace", "quiet"]));
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "b: two\n");
    assert_eq!(status_of(&dir).1, "finished");
}
