//! A process that must end at once (a second Ctrl-C) kills the process groups of the
//! commands still running first ([`prose_agent::group::kill_all`]): exiting drops nothing,
//! and a command's group of its own would outlive it. In a test binary of its own, as it
//! kills every group this process holds.

use prose_machine::protocol::{Ask, InputAsk, Request, Site};
use prose_runtime::driver::command::CommandDriver;
use prose_runtime::driver::{Driver, Live};
use std::time::{Duration, Instant};

/// Whether process group `pgid` still has a member.
fn group_alive(pgid: i32) -> bool {
    // SAFETY: signal 0 only checks that the group exists.
    unsafe { libc::killpg(pgid, 0) == 0 }
}

#[test]
fn ending_at_once_kills_the_command_drivers_groups() {
    let dir = std::env::temp_dir().join(format!("prose-groups-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("dir");
    let group = dir.join("group");
    // The command leaves a grandchild in its group and waits for it.
    let driver = CommandDriver::new(
        format!(
            "cut -d' ' -f5 /proc/$$/stat > {}.tmp; mv {0}.tmp {0}; sleep 300 & wait",
            group.display()
        ),
        Duration::from_secs(600),
    );
    let req = Request {
        id: "0:0".parse().expect("id"),
        site: Site {
            module: 0,
            line: 1,
            program: "test".into(),
        },
        ask: Ask::Input(InputAsk {
            name: "x".into(),
            question: "?".into(),
        }),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let asked = rt.spawn(async move { driver.answer(&req, &Live::default()).await });
    let started = Instant::now();
    while !group.exists() {
        assert!(started.elapsed() < Duration::from_secs(20), "never asked");
        std::thread::sleep(Duration::from_millis(10));
    }
    let pgid: i32 = std::fs::read_to_string(&group)
        .expect("group")
        .trim()
        .parse()
        .expect("pgid");
    assert!(group_alive(pgid));
    prose_agent::group::kill_all();
    let deadline = Instant::now() + Duration::from_secs(5);
    while group_alive(pgid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!group_alive(pgid), "the command's group outlived kill_all");
    // The request in flight sees its command killed.
    let served = rt.block_on(asked).expect("served");
    let failure = served.outcome.expect_err("a killed command is no answer");
    assert!(failure.0.contains("exited with a signal"), "{}", failure.0);
}
