//! Sends arbitrary requests to `prosevm serve`'s HTTP API: one server, started once in this
//! process on a loopback port over a file store and the mock driver, holding one uploaded
//! artifact and one run that waits for a person. The first byte of the input picks an
//! endpoint (artifact upload, run start, an answer to the waiting run, run listing with a
//! query, schedules, a run's record or events by a fuzzed id); the rest is the body, query
//! or id. The server must answer every request with a status, never a 500, and no handler
//! may panic (a panic aborts the process, where libFuzzer sees it).
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

/// The server, and what the inputs can name.
struct Served {
    addr: SocketAddr,
    /// The artifact uploaded (its sha256).
    artifact: String,
    /// The run waiting for an input.
    run: String,
    /// Keeps the server's runtime alive.
    _runtime: tokio::runtime::Runtime,
}

/// A program whose runs wait for a person after one session.
const WAITS: &str = "let a = session \"Draft\"\ninput audience: \"Who reads it\"\noutput r = session \"Rewrite for {audience}\"\n  context: a\n";

fn served() -> &'static Served {
    static SERVED: OnceLock<Served> = OnceLock::new();
    SERVED.get_or_init(|| {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            hook(info);
            std::process::abort();
        }));
        let dir = std::env::temp_dir().join(format!("prose-fuzz-api-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("listen");
        let addr = listener.local_addr().expect("address");
        let state = dir.join("state");
        let store = runtime
            .block_on(prose_store::Locator::File(Some(state.clone())).open(Some(&state), 4))
            .expect("store");
        let options = prosevm::serve::Options {
            store: std::sync::Arc::from(store),
            dir: state.join("serve"),
            driver: prose_runtime::driver::settings::DriverSettings::Mock(Default::default()),
            options: Default::default(),
            place: prosevm::run::Place {
                state_dir: Some(state),
                ..Default::default()
            },
            token: None,
            trust: Vec::new(),
            max_runs: 2,
            max_requests: 16,
            body_timeout: std::time::Duration::from_secs(5),
            max_client_connections: 64,
            queue: None,
            webhooks: None,
            mcp: None,
        };
        runtime.spawn(prosevm::serve::serve(
            listener,
            options,
            prose_runtime::runner::StopSignal::default(),
        ));
        let mut c = prosec::compile::Compilation::new(Default::default());
        let root = c.add_source(std::path::Path::new("waits.prose"), WAITS);
        let (pbc, _) = prosec::codegen::build_bytes(&c, root).expect("builds");
        let (status, body) = request(addr, "PUT", "/v1/artifacts", &pbc);
        assert_eq!(status, 201, "{body}");
        let artifact = json(&body)["sha256"].as_str().expect("sha256").to_string();
        let new = format!(r#"{{"artifact": "{artifact}", "inputs": {{}}}}"#);
        let (status, body) = request(addr, "POST", "/v1/runs", new.as_bytes());
        assert_eq!(status, 201, "{body}");
        let run = json(&body)["id"].as_str().expect("id").to_string();
        Served {
            addr,
            artifact,
            run,
            _runtime: runtime,
        }
    })
}

fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_default()
}

/// Sends one request over a fresh connection; its status and body.
fn request(addr: SocketAddr, method: &str, path: &str, body: &[u8]) -> (u16, String) {
    // Closed connections linger a while (TIME_WAIT): when the ports run out, wait for one.
    let mut tries = 0;
    let mut s = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            Err(e) if tries < 6000 => {
                tries += 1;
                let _ = e;
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("cannot connect for a minute: {e}"),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).expect("write");
    s.write_all(body).expect("write");
    let mut answer = Vec::new();
    s.read_to_end(&mut answer).expect("the server answers");
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line: {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    (status, body)
}

/// Text fit for a path segment or query: percent-encoded.
fn encoded(data: &[u8]) -> String {
    data.iter()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'=' | b'&' => {
                (*b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&pick, rest)) = data.split_first() else {
        return;
    };
    let s = served();
    let (method, path, body): (&str, String, &[u8]) = match pick % 8 {
        0 => ("PUT", "/v1/artifacts".into(), rest),
        1 => ("POST", "/v1/runs".into(), rest),
        2 => ("POST", format!("/v1/runs/{}/input", s.run), rest),
        3 => ("GET", format!("/v1/runs?{}", encoded(rest)), &[]),
        4 => ("POST", "/v1/schedules".into(), rest),
        5 => ("GET", format!("/v1/runs/{}", encoded(rest)), &[]),
        6 => ("POST", format!("/v1/runs/{}/resume", encoded(rest)), &[]),
        _ => {
            // A run of the uploaded artifact with fuzzed inputs.
            let inputs = String::from_utf8_lossy(rest);
            let new = format!(r#"{{"artifact": "{}", "inputs": {inputs}}}"#, s.artifact);
            let (status, body) = request(s.addr, "POST", "/v1/runs", new.as_bytes());
            assert!(status < 500, "POST /v1/runs {new:?}: {status} {body}");
            return;
        }
    };
    let (status, answer) = request(s.addr, method, &path, body);
    assert!(status < 500, "{method} {path}: {status} {answer}");
});
