//! `prosevm serve` in real processes, driven over real HTTP (reqwest) on the loopback
//! address: an artifact uploaded, a run started, its events streamed, its outputs read
//! ([`api`]), the events those the JSON trace prints ([`events`]); the token and bad uploads
//! refused; and runs that outlive the server, stopped with SIGTERM or killed with SIGKILL
//! part way and finished by the next server with the outputs an uninterrupted run gives
//! ([`durable`]); runs waiting for a person, answered through the API or the CLI
//! ([`waiting`]); tool calls waiting for a person's approval, answered over HTTP and from
//! the page ([`approvals`]); the web page in headless Chromium ([`page`]); webhooks posted to
//! a receiver on the loopback address as runs end, through failures and restarts
//! ([`webhooks`]); and the library's workflows called as MCP tools by the official SDK's
//! client ([`mcp`]).

#[path = "../support/mod.rs"]
mod support;

#[path = "../../vm/tests/support/provider.rs"]
#[allow(dead_code)]
mod provider;

mod api;
mod approvals;
mod browser;
mod durable;
mod events;
mod gate;
mod limits;
mod mcp;
mod page;
mod queue;
mod receiver;
mod schedules;
mod waiting;
mod webhooks;

use reqwest::blocking::{Client, RequestBuilder, Response};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Five sessions, one after another.
pub const PROGRAM: &str = "input topic: \"what to write about\"
let a = session \"Step one about {topic}\"
let b = session \"Step two\"
  context: a
let c = session \"Step three\"
  context: b
let d = session \"Step four\"
  context: c
output r = session \"Step five\"
  context: d
";

/// `flags` as the `&str`s [`Server::start`] takes.
pub fn strs(flags: &[String]) -> Vec<&str> {
    flags.iter().map(String::as_str).collect()
}

/// A scratch directory holding `prog.prose` built into `prog.pbc`.
pub fn built(name: &str, source: &str) -> PathBuf {
    let dir = support::scratch(name);
    std::fs::write(dir.join("prog.prose"), source).expect("program");
    let (code, _, err) = support::output(support::command("prosec").current_dir(&dir).args([
        "build",
        "prog.prose",
        "-o",
        "prog.pbc",
    ]));
    assert_eq!(code, 0, "{err}");
    dir
}

/// What `prosevm exec` of `dir`'s `prog.pbc` outputs with `inputs` (as JSON), uninterrupted.
pub fn reference(dir: &Path, inputs: &[&str]) -> Value {
    reference_with(dir, inputs, &[])
}

/// [`reference`], with the driver `driver` flags choose (the mock without any).
pub fn reference_with(dir: &Path, inputs: &[&str], driver: &[String]) -> Value {
    let mut cmd = support::command("prosevm");
    cmd.current_dir(dir).args([
        "exec",
        "prog.pbc",
        "--state-dir",
        "reference",
        "--trace",
        "quiet",
        "--format",
        "json",
    ]);
    for i in inputs {
        cmd.args(["--input", i]);
    }
    cmd.args(driver);
    let (code, out, err) = support::output(&mut cmd);
    assert_eq!(code, 0, "{err}");
    support::outputs(&out)
}

/// The longest a server may take to start serving: far more than it needs, even on a loaded
/// machine; only a server that cannot start reaches it.
pub const STARTS_WITHIN: Duration = Duration::from_secs(60);

/// The longest a server may take to exit once signalled (SIGTERM stops its runs first).
pub const EXITS_WITHIN: Duration = Duration::from_secs(120);

/// A `prosevm serve` process, killed with SIGKILL when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Where its stderr goes.
    pub log: PathBuf,
    token: Option<String>,
}

impl Server {
    /// Starts `prosevm serve` in `dir` on a free loopback port, with its state in `state/`
    /// and `extra` flags; waits until it serves (see [`Server::start_env`]).
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        Server::start_with(dir, extra, None)
    }

    /// [`Server::start`], with the token in `token-file` when `token` is given.
    pub fn start_with(dir: &Path, extra: &[&str], token: Option<&str>) -> Server {
        Server::start_env(dir, extra, token, &[])
    }

    /// [`Server::start_with`], with `env` set for the server (a provider's key).
    ///
    /// Returns once the server answers `GET /healthz`, which it does only once it has taken
    /// up the runs an earlier server left (what it says of them is in its log by then):
    /// `listening on` is printed as soon as the address is bound, before that.
    pub fn start_env(
        dir: &Path,
        extra: &[&str],
        token: Option<&str>,
        env: &[(&str, &str)],
    ) -> Server {
        let log = dir.join(format!(
            "serve-{}.log",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let mut cmd = support::command("prosevm");
        cmd.current_dir(dir)
            .args(["serve", "--listen", "127.0.0.1:0", "--state-dir", "state"]);
        if let Some(t) = token {
            private_file(&dir.join("token-file"), &format!("{t}\n"));
            cmd.args(["--token-file", "token-file"]);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).expect("log"))
            .spawn()
            .expect("prosevm serve starts");
        let started = Instant::now();
        let base = loop {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            // Whole lines only: the server writes a line in pieces (`…listening on
            // http://127.0.0.1`, then `:PORT`), and a line read half written names port 80.
            let written = &text[..text.rfind('\n').map_or(0, |end| end + 1)];
            if let Some(addr) = written
                .lines()
                .find_map(|l| l.strip_prefix("prosevm serve: listening on "))
            {
                break addr.trim().to_string();
            }
            assert!(
                started.elapsed() < STARTS_WITHIN,
                "the server did not start: {text}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut server = Server {
            child,
            base,
            log,
            token: token.map(str::to_string),
        };
        server.wait_until_serving(started);
        server
    }

    /// Waits (up to [`STARTS_WITHIN`] from `started`) until the server answers `/healthz`
    /// with 200. A request to the bound address waits in its backlog until the server
    /// accepts it; one that fails is tried again until the limit, unless the server has
    /// exited. The connection is closed once answered.
    fn wait_until_serving(&mut self, started: Instant) {
        let health = client();
        // What each try got, for the message: the first few and the last few.
        let mut tried: Vec<String> = Vec::new();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                panic!(
                    "the server exited ({status}) before it served; it said:\n{}",
                    self.said()
                );
            }
            let at = started.elapsed();
            let answer = health
                .get(format!("{}/healthz", self.base))
                .timeout(Duration::from_secs(10))
                .send();
            let got = match answer {
                Ok(r) if r.status().as_u16() == 200 => return,
                Ok(r) => format!("{}: {}", r.status(), r.text().unwrap_or_default()),
                Err(e) => e.to_string(),
            };
            tried.push(format!("at {at:.1?}: {got}"));
            if tried.len() > 8 {
                tried.remove(3);
            }
            assert!(
                started.elapsed() < STARTS_WITHIN,
                "the server did not answer /healthz with 200 within {STARTS_WITHIN:?}: {tried:#?}\nit said:\n{}",
                self.said()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the server said on stderr.
    pub fn said(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// A request to `path`, bearing the token if the server has one.
    pub fn request(&self, method: reqwest::Method, path: &str) -> RequestBuilder {
        let r = client().request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => r.bearer_auth(t),
            None => r,
        }
    }

    /// `GET path` as JSON, expecting 200.
    pub fn get(&self, path: &str) -> Value {
        let r = self
            .request(reqwest::Method::GET, path)
            .send()
            .expect("GET");
        json(r, 200)
    }

    /// Uploads `dir`'s `prog.pbc`; returns its SHA-256.
    pub fn upload(&self, dir: &Path) -> String {
        self.upload_file(&dir.join("prog.pbc"))
    }

    /// Uploads the artifact `file`; returns its SHA-256.
    pub fn upload_file(&self, file: &Path) -> String {
        let bytes = std::fs::read(file).expect("artifact");
        let r = self
            .request(reqwest::Method::PUT, "/v1/artifacts")
            .body(bytes)
            .send()
            .expect("PUT");
        json(r, 201)["sha256"].as_str().expect("sha256").to_string()
    }

    /// Starts a run of artifact `sha256` with `inputs`; returns its id.
    pub fn start_run(&self, sha256: &str, inputs: Value) -> String {
        let r = self
            .request(reqwest::Method::POST, "/v1/runs")
            .json(&serde_json::json!({"artifact": sha256, "inputs": inputs}))
            .send()
            .expect("POST");
        json(r, 201)["id"].as_str().expect("id").to_string()
    }

    /// Run `id` as listed by `GET /v1/runs` (with the answers its journal holds).
    pub fn listed(&self, id: &str) -> Value {
        self.get("/v1/runs?limit=500")["runs"]
            .as_array()
            .and_then(|runs| runs.iter().find(|r| r["id"] == id).cloned())
            .unwrap_or_else(|| panic!("run {id} is not listed"))
    }

    /// Waits (up to two minutes) until run `id`, as listed, is as `done` says; returns it.
    pub fn wait_listed(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let run = self.listed(id);
            if done(&run) {
                return run;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "run {id} is still listed as {run}; the server said:\n{}",
                self.said()
            );
            std::thread::sleep(Duration::from_millis(30));
        }
    }

    /// Waits (up to two minutes) until run `id` is as `done` says; returns its record.
    pub fn wait_for(&self, id: &str, done: impl Fn(&Value) -> bool) -> Value {
        let started = Instant::now();
        loop {
            let run = self.get(&format!("/v1/runs/{id}"));
            if done(&run) {
                return run;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "run {id} is still {run}; the server said:\n{}",
                self.said()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Sends `signal` to the server and waits (up to [`EXITS_WITHIN`]) for it to exit;
    /// returns its exit code (none when the signal killed it).
    pub fn signal(mut self, signal: i32) -> Option<i32> {
        // SAFETY: kill(2) with the pid of a child this test started and still owns.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
        let sent = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                return status.code();
            }
            assert!(
                sent.elapsed() < EXITS_WITHIN,
                "the server did not exit within {EXITS_WITHIN:?} of signal {signal}; it said:\n{}",
                self.said()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The HTTP client of the tests.
pub fn client() -> Client {
    prose_agent::tls::install_crypto_provider();
    Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .expect("client")
}

/// `r`'s body as JSON, once its status is checked to be `status`.
pub fn json(r: Response, status: u16) -> Value {
    let got = r.status().as_u16();
    let text = r.text().expect("body");
    assert_eq!(got, status, "{text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

/// One server-sent event.
#[derive(Debug)]
pub struct Sse {
    /// Its id.
    pub id: Option<String>,
    /// Its data, as JSON.
    pub data: Value,
}

/// Reads the server-sent events of `r` until the stream ends or `stop` holds for one.
pub fn events(r: Response, stop: impl Fn(&Sse) -> bool) -> Vec<Sse> {
    assert_eq!(r.status().as_u16(), 200);
    let content_type = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let mut out = Vec::new();
    let (mut id, mut data) = (None, String::new());
    for line in BufReader::new(r).lines() {
        let line = line.expect("a line");
        if line.is_empty() {
            if !data.is_empty() {
                let e = Sse {
                    id: id.take(),
                    data: serde_json::from_str(&data).expect("JSON data"),
                };
                data.clear();
                let done = stop(&e);
                out.push(e);
                if done {
                    break;
                }
            }
            continue;
        }
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().to_string());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    out
}

/// Writes `text` to `path`, readable by its owner only (as a token file must be).
pub fn private_file(path: &Path, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, text).expect("file");
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).expect("mode");
}
