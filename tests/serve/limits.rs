//! The server's limits: `--max-concurrency` holds over every run it drives (requests in
//! flight at once, counted as `exec` counts them within one run), `--max-runs` runs are
//! driven at once while the others wait their turn, and `--max-requests` HTTP requests are
//! handled at once over the whole API while the others wait theirs. A body counts for
//! nothing until it has come: clients that start uploads and send nothing hold no place, are
//! cut off with 408, and `/healthz` answers throughout; each client holds only so many
//! connections.

use super::{built, client, events, Server, PROGRAM};
use reqwest::Method;
use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Three sessions at once.
const FANOUT: &str = "parallel:
  a = session \"One\"
  b = session \"Two\"
  c = session \"Three\"
output r = session \"Join\"
  context: { a, b, c }
";

#[test]
fn requests_in_flight_are_limited_over_all_runs_and_runs_wait_their_turn() {
    let dir = built("serve-limits", FANOUT);
    // A driver command that notices company: it holds a directory while it answers.
    let lock = dir.join("in-flight");
    let overlaps = dir.join("overlaps");
    let served = dir.join("served");
    let command = format!(
        "mkdir {lock} 2>/dev/null || echo overlap >> {overlaps}; sleep 0.15; rmdir {lock} 2>/dev/null; echo \"$PROSE_REQUEST_ID\" >> {served}; echo answered",
        lock = lock.display(),
        overlaps = overlaps.display(),
        served = served.display(),
    );
    let server = Server::start(
        &dir,
        &[
            "--driver",
            "command",
            "--command",
            &command,
            "--max-concurrency",
            "1",
            "--max-runs",
            "2",
        ],
    );
    let sha = server.upload(&dir);
    let runs: Vec<String> = (0..2).map(|_| server.start_run(&sha, json!({}))).collect();
    for id in &runs {
        let run = server.wait_for(id, |r| r["status"] == "finished");
        assert_eq!(run["outputs"]["r"], "answered");
    }
    let lines = std::fs::read_to_string(&served).unwrap_or_default();
    assert_eq!(lines.lines().count(), 8, "{lines}");
    assert!(
        !overlaps.exists(),
        "two requests were in flight at once: {}",
        std::fs::read_to_string(&overlaps).unwrap_or_default()
    );
    drop(server);

    // One run at a time: the second answers nothing until the first has ended.
    let server = Server::start(
        &dir,
        &[
            "--driver",
            "command",
            "--command",
            &command,
            "--max-runs",
            "1",
        ],
    );
    let first = server.start_run(&sha, json!({}));
    let second = server.start_run(&sha, json!({}));
    let started = Instant::now();
    loop {
        // The second run first: had it been answered while the first had not finished (as
        // read after), it went ahead of its turn. Read the other way round, the first could
        // finish in between and the second start.
        let b = server.listed(&second);
        let a = server.get(&format!("/v1/runs/{first}"));
        if a["status"] == "finished" {
            break;
        }
        assert_eq!(
            b["answered"], 0,
            "the second run went ahead of its turn: {b}"
        );
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the first run did not finish: {a}"
        );
        std::thread::sleep(Duration::from_millis(30));
    }
    server.wait_for(&second, |r| r["status"] == "finished");
}

/// How long a test waits for the server to answer on a connection of its own: far more than
/// it needs. A server that never answers fails the test with a message, not a hang.
const ANSWERS_WITHIN: Duration = Duration::from_secs(60);

/// A connection to `addr` whose reads give up after [`ANSWERS_WITHIN`].
fn connect(addr: &str) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(ANSWERS_WITHIN)).expect("timeout");
    s
}

/// Whether the server has said anything on `s` yet (an answer, or closing it), without
/// waiting for it.
fn answered(s: &TcpStream) -> bool {
    s.set_nonblocking(true).expect("nonblocking");
    let said = match s.peek(&mut [0u8; 1]) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => false,
        Err(_) => true,
    };
    s.set_nonblocking(false).expect("blocking");
    said
}

/// Reads an HTTP response's status line and headers from `r` (a connection from
/// [`connect`]); returns its status.
fn response_head(r: &mut impl BufRead) -> u16 {
    let mut status = String::new();
    r.read_line(&mut status)
        .unwrap_or_else(|e| panic!("no status line within {ANSWERS_WITHIN:?}: {e}"));
    loop {
        let mut line = String::new();
        let read = r
            .read_line(&mut line)
            .unwrap_or_else(|e| panic!("no header within {ANSWERS_WITHIN:?}: {e}"));
        if read == 0 || line == "\r\n" {
            break;
        }
    }
    status
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a status line: {status:?}"))
}

/// Starts `n` uploads on `addr` that declare a megabyte and send three bytes.
fn stalled_uploads(addr: &str, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|_| {
            let mut s = connect(addr);
            write!(
                s,
                "PUT /v1/artifacts HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\n\r\nabc"
            )
            .expect("write");
            s
        })
        .collect()
}

/// `n` connections to `addr`, each an upload the server has taken up (it answered `100
/// Continue`) and that sends nothing more. A connection the server closes instead (a place
/// still held by one that closed a moment ago, such as the one that saw it start) is tried
/// again, all of them anew, until all `n` are held at once.
fn held_connections(addr: &str, n: usize) -> Vec<TcpStream> {
    let started = Instant::now();
    loop {
        let held: Vec<TcpStream> = (0..n)
            .map(|_| {
                let mut s = connect(addr);
                let _ = write!(
                    s,
                    "PUT /v1/artifacts HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000000\r\nExpect: 100-continue\r\n\r\n"
                );
                s
            })
            .collect();
        let taken = held.iter().all(|s| {
            let mut line = String::new();
            BufReader::new(s).read_line(&mut line).is_ok() && line.contains(" 100 ")
        });
        if taken {
            return held;
        }
        assert!(
            started.elapsed() < ANSWERS_WITHIN,
            "the server never took {n} connections at once"
        );
        drop(held);
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn stalled_uploads_hold_no_place_and_are_cut_off() {
    let dir = built("serve-slow-uploads", PROGRAM);
    let server = Server::start(&dir, &["--body-timeout", "10"]);
    let addr = server.base.trim_start_matches("http://").to_string();
    let uploads = stalled_uploads(&addr, 64);
    // Meanwhile health and the API answer, before any upload is cut off: had the uploads
    // held the places the API's requests need (64 of them, as many as there are), the API
    // would have answered only once they were cut off, 10 s on.
    for path in ["/healthz", "/v1/runs"] {
        let r = client()
            .get(format!("{}{path}", server.base))
            .send()
            .unwrap_or_else(|e| panic!("{path} did not answer: {e}"));
        assert_eq!(r.status().as_u16(), 200, "{path}");
    }
    let cut = uploads.iter().filter(|u| answered(u)).count();
    assert_eq!(
        cut, 0,
        "{cut} stalled upload(s) were cut off before the API answered: it waited for them"
    );
    // Each stalled upload is refused once its body stops coming.
    for upload in uploads {
        assert_eq!(response_head(&mut BufReader::new(upload)), 408);
    }
    // One client holds only so many connections: one more is closed unanswered.
    let server = Server::start(&dir, &["--max-client-connections", "4"]);
    let addr = server.base.trim_start_matches("http://").to_string();
    let held = held_connections(&addr, 4);
    let mut extra = connect(&addr);
    let _ = write!(extra, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    let mut answer = String::new();
    let read = BufReader::new(extra).read_line(&mut answer);
    assert!(
        matches!(read, Ok(0) | Err(_)),
        "a fifth connection was answered: {answer:?}"
    );
    drop(held);
    // Once they close, the client connects again.
    let deadline = Instant::now() + Duration::from_secs(60);
    while client()
        .get(format!("{}/healthz", server.base))
        .send()
        .is_err()
    {
        assert!(
            Instant::now() < deadline,
            "the connections were not given back"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn max_requests_holds_over_every_route_while_a_request_is_handled() {
    let dir = built("serve-max-requests", PROGRAM);
    let go = dir.join("go");
    // A driver that answers once the test says so: the run stays live until then.
    let command = format!(
        "while [ ! -e {go} ]; do sleep 0.05; done; echo answered",
        go = go.display()
    );
    let server = Server::start(
        &dir,
        &[
            "--max-requests",
            "1",
            "--driver",
            "command",
            "--command",
            &command,
        ],
    );
    let addr = server.base.trim_start_matches("http://").to_string();

    // An upload whose body has not come yet: the server answers `100 Continue` and reads
    // it, but it is not handled until it has come, so it holds no place: the one place
    // `--max-requests 1` gives is free for another route meanwhile.
    let mut upload = connect(&addr);
    write!(
        upload,
        "PUT /v1/artifacts HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/octet-stream\r\nContent-Length: 16\r\nExpect: 100-continue\r\n\r\n"
    )
    .expect("write");
    let mut answers = BufReader::new(upload.try_clone().expect("clone"));
    assert_eq!(response_head(&mut answers), 100);
    assert_eq!(server.get("/v1/runs")["runs"], json!([]));
    // As many bodies are read at once as requests are handled: a second body waits.
    let (tx, rx) = mpsc::channel();
    let base = server.base.clone();
    std::thread::spawn(move || {
        let r = client()
            .post(format!("{base}/v1/runs"))
            .json(&json!({"artifact": "ab".repeat(32)}))
            .send();
        let _ = tx.send(r.map(|r| r.status().as_u16()));
    });
    assert!(
        rx.recv_timeout(Duration::from_secs(2)).is_err(),
        "a second body was read while the upload's was"
    );
    // The upload ends (refused: no artifact), and then the other is read and answered.
    upload.write_all(b"not an artifact!").expect("write");
    assert_eq!(response_head(&mut answers), 422);
    let status = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("answered once the upload ended")
        .expect("POST");
    assert_eq!(status, 404);

    // An event stream counts only until it starts: a client following a live run holds no
    // place from the others.
    let sha = server.upload(&dir);
    let id = server.start_run(&sha, json!({"topic": "tides"}));
    let stream = server
        .request(Method::GET, &format!("/v1/runs/{id}/events"))
        .send()
        .expect("events");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let all = events(stream, |e| e.data["event"] == "end");
        let _ = tx.send(all.len());
    });
    let run = server.get(&format!("/v1/runs/{id}"));
    assert_eq!(
        (&run["status"], &run["live"]),
        (&json!("running"), &json!(true))
    );
    std::fs::write(&go, "").expect("go");
    let seen = rx
        .recv_timeout(Duration::from_secs(120))
        .expect("the stream ends with the run");
    assert!(seen > 5, "{seen} events");
    server.wait_for(&id, |r| r["status"] == "finished");
}
