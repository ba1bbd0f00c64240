//! A webhook receiver on the loopback address: a plain HTTP/1.1 server on a thread that
//! keeps every request it is sent (headers and body) and answers each as the test says: a
//! status by the request's number, or holding the request until the test lets it go (the
//! server that sent it may be killed meanwhile).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// The longest a test waits for a request to come: far more than a delivery needs (the
/// longest wait between the first tries is seconds).
const COMES_WITHIN: Duration = Duration::from_secs(120);

/// A request received.
#[derive(Clone, Debug)]
pub struct Received {
    /// Its path.
    pub path: String,
    /// Its headers, by lowercase name.
    pub headers: BTreeMap<String, String>,
    /// Its body.
    pub body: Vec<u8>,
    /// The status it was answered with.
    pub status: u16,
}

impl Received {
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).expect("a JSON body")
    }

    /// Header `name`.
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).map(String::as_str).unwrap_or("")
    }
}

/// How the receiver answers request number `n` (from 1): with a status, or held until
/// [`Receiver::release`], then answered with the status.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    /// Answered at once.
    Now(u16),
    /// Answered once released.
    Held(u16),
}

#[derive(Default)]
struct State {
    received: Vec<Received>,
    /// Requests that came, counted as they come (before they are answered).
    came: usize,
    released: bool,
}

/// The receiver.
pub struct Receiver {
    /// Its address, `http://127.0.0.1:PORT`.
    pub base: String,
    shared: Arc<(Mutex<State>, Condvar)>,
}

impl Receiver {
    /// Starts a receiver answering request number `n` (from 1) as `answer(n)` says.
    pub fn start(answer: impl Fn(usize) -> Answer + Send + Sync + 'static) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let shared = Arc::new((Mutex::new(State::default()), Condvar::new()));
        let state = shared.clone();
        let answer = Arc::new(answer);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (state, answer) = (state.clone(), answer.clone());
                std::thread::spawn(move || serve(stream, &state, &*answer));
            }
        });
        Receiver { base, shared }
    }

    /// Every request answered so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.0.lock().expect("lock").received.clone()
    }

    /// Waits until `n` requests have come (answered or held); returns those answered.
    pub fn wait_came(&self, n: usize) -> Vec<Received> {
        self.wait(|s| s.came >= n, &format!("{n} request(s) to come"))
    }

    /// Waits until `n` requests have been answered; returns them.
    pub fn wait_answered(&self, n: usize) -> Vec<Received> {
        self.wait(
            |s| s.received.len() >= n,
            &format!("{n} request(s) answered"),
        )
    }

    /// Waits until `done` holds, for `what`.
    fn wait(&self, done: impl Fn(&State) -> bool, what: &str) -> Vec<Received> {
        let (lock, changed) = &*self.shared;
        let started = Instant::now();
        let mut state = lock.lock().expect("lock");
        while !done(&state) {
            let left = COMES_WITHIN
                .checked_sub(started.elapsed())
                .unwrap_or_else(|| {
                    panic!(
                        "waited {COMES_WITHIN:?} for {what}; got {:#?}",
                        state.received
                    )
                });
            state = changed.wait_timeout(state, left).expect("lock").0;
        }
        state.received.clone()
    }

    /// Lets every held request be answered.
    pub fn release(&self) {
        let (lock, changed) = &*self.shared;
        lock.lock().expect("lock").released = true;
        changed.notify_all();
    }
}

/// Reads one request from `stream`, answers it as `answer` says, and keeps it.
fn serve(stream: TcpStream, shared: &(Mutex<State>, Condvar), answer: &dyn Fn(usize) -> Answer) {
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut line = String::new();
    if reader.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let mut headers = BTreeMap::new();
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_string());
        }
    }
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let (lock, changed) = shared;
    let n = {
        let mut state = lock.lock().expect("lock");
        state.came += 1;
        changed.notify_all();
        state.came
    };
    let status = match answer(n) {
        Answer::Now(status) => status,
        Answer::Held(status) => {
            let mut state = lock.lock().expect("lock");
            while !state.released {
                state = changed.wait(state).expect("lock");
            }
            status
        }
    };
    let mut stream = stream;
    // The sender may be gone (killed while this was held): the answer is lost, as it would be.
    let _ = write!(
        stream,
        "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
    );
    let _ = stream.flush();
    let mut state = lock.lock().expect("lock");
    state.received.push(Received {
        path,
        headers,
        body,
        status,
    });
    changed.notify_all();
}
