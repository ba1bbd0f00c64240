//! Whole-process start to first request: spawns `prosevm exec ARTIFACT --driver stdio`
//! ROUNDS times and measures how long until the first request line appears on its stdout,
//! after the protocol's greeting (then kills it). Prints the median and the fastest.
//!
//! `cargo build --release -p prosevm && cargo run --release -p prose-benches --example
//! first_request -- target/release/prosevm [ROUNDS]` (the artifact is `examples/hello.prose`
//! compiled to a temporary file).

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn main() {
    let mut args = std::env::args().skip(1);
    let vm = args
        .next()
        .unwrap_or_else(|| "target/release/prosevm".into());
    let rounds: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(50);
    let examples = prose_benches::example_artifacts();
    let (_, hello) = examples
        .iter()
        .find(|(n, _)| n == "hello.prose")
        .expect("examples/hello.prose");
    let dir = std::env::temp_dir().join(format!("prose-first-request-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let artifact = dir.join("hello.pbc");
    std::fs::write(&artifact, hello).expect("artifact");
    let mut times: Vec<Duration> = (0..rounds)
        .map(|_| {
            let started = Instant::now();
            let mut child = Command::new(&vm)
                .arg("exec")
                .arg(&artifact)
                .args(["--driver", "stdio", "--trace", "quiet", "--state-dir"])
                .arg(dir.join("state"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawns");
            // The protocol's greeting comes first, then the first request (it has an id).
            let mut out = BufReader::new(child.stdout.take().expect("stdout"));
            let mut line = String::new();
            while !line.contains("\"id\"") {
                line.clear();
                let read = out.read_line(&mut line).expect("reads");
                assert!(read > 0, "the VM ended before asking anything");
            }
            let took = started.elapsed();
            let _ = child.kill();
            let _ = child.wait();
            took
        })
        .collect();
    times.sort();
    println!(
        "start to first request: median {:.2} ms, fastest {:.2} ms ({rounds} runs)",
        times[rounds / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}
