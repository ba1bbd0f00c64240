//! A headless Chromium driven over the DevTools protocol on a pipe (`--remote-debugging-pipe`:
//! JSON messages, each ended by a NUL byte, on the browser's descriptors 3 and 4): pages
//! are opened, scripts evaluated in them, and every console message, script exception and
//! failed load collected. Chromium is `$CHROMIUM` or `/usr/bin/chromium`; required on CI
//! (`.ci/run` installs it), skipped elsewhere when missing, saying so.

use serde_json::{json, Value};
use std::io::{Read, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The Chromium to test with; missing, it fails the test on CI and skips it elsewhere.
pub fn chromium() -> Option<PathBuf> {
    let path = std::env::var_os("CHROMIUM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/chromium"));
    if path.is_file() {
        return Some(path);
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "Chromium is required on CI ({} is missing; .ci/run installs it)",
        path.display()
    );
    eprintln!(
        "SKIPPED: the web page's browser test needs Chromium ({} is missing; `apt-get install chromium`)",
        path.display()
    );
    None
}

/// A pipe's two ends: (read, write).
fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // SAFETY: pipe(2) fills both descriptors, which are then owned here alone.
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    assert_eq!(rc, 0, "pipe");
    // SAFETY: both descriptors were just created and are owned by nothing else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// A browser with one page, attached.
pub struct Browser {
    child: Child,
    to: std::fs::File,
    from: Receiver<Value>,
    next: u64,
    session: String,
    /// Console messages, exceptions and failed loads, as they came.
    pub complaints: Vec<String>,
}

impl Browser {
    /// Starts `chromium` headless with its profile in `profile`, and opens a blank page.
    pub fn start(chromium: &Path, profile: &Path) -> Browser {
        let (child_reads, we_write) = pipe();
        let (we_read, child_writes) = pipe();
        let (r, w) = (
            std::os::fd::AsRawFd::as_raw_fd(&child_reads),
            std::os::fd::AsRawFd::as_raw_fd(&child_writes),
        );
        let mut cmd = Command::new(chromium);
        cmd.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--remote-debugging-pipe",
            "--window-size=1280,900",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        // SAFETY: between fork and exec only dup2(2), which is async-signal-safe, is called:
        // the browser reads commands on descriptor 3 and writes on 4.
        unsafe {
            cmd.pre_exec(move || {
                if libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().expect("chromium starts");
        drop((child_reads, child_writes));
        let (tx, from) = channel();
        let mut reader = std::fs::File::from(we_read);
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 65536];
            loop {
                let n = match reader.read(&mut chunk) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                buf.extend_from_slice(&chunk[..n]);
                while let Some(end) = buf.iter().position(|b| *b == 0) {
                    let message: Vec<u8> = buf.drain(..=end).collect();
                    if let Ok(v) = serde_json::from_slice(&message[..end]) {
                        if tx.send(v).is_err() {
                            return;
                        }
                    }
                }
            }
        });
        let mut b = Browser {
            child,
            to: std::fs::File::from(we_write),
            from,
            next: 0,
            session: String::new(),
            complaints: Vec::new(),
        };
        let target = b.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().expect("a target").to_string();
        let attached = b.call(
            None,
            "Target.attachToTarget",
            json!({"targetId": target, "flatten": true}),
        );
        b.session = attached["sessionId"]
            .as_str()
            .expect("a session")
            .to_string();
        for domain in ["Runtime.enable", "Log.enable", "Page.enable"] {
            b.page(domain, json!({}));
        }
        b
    }

    /// Sends `method` (to the page's session, or the browser's) and waits for its result;
    /// events that come meanwhile are looked through for complaints.
    fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            message["sessionId"] = json!(s);
        }
        let mut bytes = serde_json::to_vec(&message).expect("JSON");
        bytes.push(0);
        self.to.write_all(&bytes).expect("the browser reads");
        let started = Instant::now();
        loop {
            let left = Duration::from_secs(60).saturating_sub(started.elapsed());
            match self.from.recv_timeout(left) {
                Ok(m) if m["id"] == id => {
                    assert!(m.get("error").is_none(), "{method}: {m}");
                    return m["result"].clone();
                }
                Ok(m) => self.look(&m),
                Err(RecvTimeoutError::Timeout) => panic!("{method}: no answer in a minute"),
                Err(RecvTimeoutError::Disconnected) => panic!("{method}: the browser is gone"),
            }
        }
    }

    /// Sends `method` to the page.
    fn page(&mut self, method: &str, params: Value) -> Value {
        let session = self.session.clone();
        self.call(Some(&session), method, params)
    }

    fn look(&mut self, m: &Value) {
        let p = &m["params"];
        match m["method"].as_str() {
            Some("Runtime.consoleAPICalled") => self.complaints.push(format!(
                "console.{}: {}",
                p["type"].as_str().unwrap_or("?"),
                p["args"]
            )),
            Some("Runtime.exceptionThrown") => self
                .complaints
                .push(format!("exception: {}", p["exceptionDetails"])),
            Some("Log.entryAdded") => self.complaints.push(format!(
                "log {}: {}",
                p["entry"]["level"].as_str().unwrap_or("?"),
                p["entry"]["text"]
            )),
            _ => {}
        }
    }

    /// Opens `url` in the page.
    pub fn open(&mut self, url: &str) {
        let r = self.page("Page.navigate", json!({"url": url}));
        assert!(r.get("errorText").is_none(), "{url}: {r}");
    }

    /// The value of `expression` in the page (JSON-able).
    pub fn eval(&mut self, expression: &str) -> Value {
        let r = self.page(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {r}");
        r["result"]["value"].clone()
    }

    /// Waits (up to two minutes) until `expression` is true in the page; every value it had
    /// on the way, in order, without repeats.
    pub fn wait_until(&mut self, expression: &str, watch: &str) -> Vec<Value> {
        let started = Instant::now();
        let mut seen: Vec<Value> = Vec::new();
        loop {
            let v = self.eval(watch);
            if seen.last() != Some(&v) {
                seen.push(v);
            }
            if self.eval(expression) == json!(true) {
                return seen;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "{expression} never held; {watch} went {seen:?}"
            );
            std::thread::sleep(Duration::from_millis(40));
        }
    }

    /// A PNG of the page as it shows now.
    pub fn screenshot(&mut self) -> Vec<u8> {
        use base64::Engine;
        let r = self.page("Page.captureScreenshot", json!({"format": "png"}));
        base64::engine::general_purpose::STANDARD
            .decode(r["data"].as_str().expect("data"))
            .expect("base64")
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
