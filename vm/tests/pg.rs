//! Runs on PostgreSQL: `submit`, `worker`, and `runs`/`inspect`/`resume --store`, against a
//! real server (see support/pg.rs: a throwaway cluster, or `PROSE_TEST_PG_URL`). Workers are
//! separate `prosevm worker` processes, killed with SIGKILL or stopped with SIGTERM; the
//! command driver's own log says who asked what, so a completed request asked twice shows.

use crate::support;
use support::prosevm;

use prose_machine::protocol::{Answer, Reply, RequestId, SessionAnswer};
use prose_store::pg::journal::PgJournal;
use prose_store::pg::lease::{self, WorkerId};
use prose_store::pg::{PgError, PgStore};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};
use support::pg::{database, query};

/// Three sessions in a row, each building on the one before; the input makes every run's
/// requests its own.
const PROGRAM: &str = "input n: \"Which item\"\nlet a = session \"Step one for {n}\"\nlet b = session \"Step two after {a}\"\noutput r = session \"Step three after {b}\"\n";

/// The program compiled to `dir/prog.pbc`.
fn artifact(dir: &Path) -> PathBuf {
    let mut c = prosec::compile::Compilation::new(Default::default());
    let root = c.add_source(Path::new("prog.prose"), PROGRAM);
    assert_eq!(c.error_count(), 0, "{:?}", c.diagnostics);
    let (bytes, _) = prosec::codegen::build_bytes(&c, root).expect("encodes");
    let path = dir.join("prog.pbc");
    std::fs::write(&path, bytes).expect("artifact");
    path
}

/// A command driver line that logs `<its parent's pid> <request id> <first line of the
/// request>` to `log` as it is asked, waits `delay` seconds, then answers `done: <first
/// line>`. Its parent is the process that asked: the worker.
fn logging_command(log: &Path, delay: &str) -> String {
    format!(
        "first=$(head -n 1); printf '%s %s %s\\n' \"$PPID\" \"$PROSE_REQUEST_ID\" \"$first\" >> {}; sleep {delay}; printf 'done: %s\\n' \"$first\"",
        log.display()
    )
}

/// Connects to `url` (a runtime for the library calls, and the store).
fn store(url: &str) -> (tokio::runtime::Runtime, PgStore) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let store = rt.block_on(PgStore::connect(url, 4)).expect("connects");
    (rt, store)
}

fn submit(url: &str, pbc: &Path, n: &str, driver: &[&str]) -> String {
    let (code, out, err) = support::output(
        prosevm()
            .args(["submit"])
            .arg(pbc)
            .args(["--store", url, "--input"])
            .arg(format!("n={n}"))
            .args(driver),
    );
    assert_eq!(code, 0, "{err}");
    out.trim().to_string()
}

/// A worker process, killed (if still running) when dropped: a failing test leaves none
/// behind.
struct Worker(Child);

impl std::ops::Deref for Worker {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Worker {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

fn worker(url: &str, dir: &Path, name: &str, extra: &[&str]) -> Worker {
    let err = std::fs::File::create(dir.join(format!("{name}.err"))).expect("log");
    prosevm()
        .current_dir(dir)
        .args(["worker", "--store", url, "--poll-ms", "50"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(err)
        .spawn()
        .map(Worker)
        .expect("worker starts")
}

fn count(url: &str, sql: &str) -> i64 {
    query(url, sql)[0][0].parse().expect("a number")
}

fn wait_for(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sigterm(child: &Child) {
    // SAFETY: kill(2) on a child this test started and has not reaped.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
}

#[test]
fn a_bad_store_url_or_an_unreachable_server_is_a_clear_error() {
    // Never echoed: a URL may carry a password.
    let (code, _, err) =
        support::output(prosevm().args(["runs", "--store", "mysql://u:hunter2@x/y"]));
    assert_eq!(code, 2);
    assert!(
        err.contains("not a postgres:// or postgresql:// URL"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let (code, _, err) = support::output(prosevm().args([
        "runs",
        "--store",
        "postgres://nobody:hunter2@127.0.0.1:1/none?connect_timeout=2",
    ]));
    assert_eq!(code, 2);
    assert!(
        err.contains("cannot connect to the Postgres store"),
        "{err}"
    );
    assert!(!err.contains("hunter2"), "{err}");
    let (code, _, err) = support::output(prosevm().args(["worker", "--store", "postgres://[bad"]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("the store URL"), "{err}");
    // Nor shown by --help when it comes from PROSE_STORE.
    let (_, help, _) = support::output(
        prosevm()
            .args(["worker", "--help"])
            .env("PROSE_STORE", "postgres://u:hunter2@h/db"),
    );
    assert!(help.contains("--store"), "{help}");
    assert!(!help.contains("hunter2"), "{help}");
}

#[test]
fn a_schema_that_cannot_be_migrated_is_a_clear_error() {
    let Some(url) = database("migrate") else {
        return;
    };
    // A table in the way of the first migration: it fails, saying which and why.
    query(&url, "CREATE TABLE prose_runs (x int)");
    let (code, _, err) = support::output(prosevm().args(["runs", "--store", &url]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot migrate the Postgres store: migration 1"),
        "{err}"
    );
    assert!(err.contains("already exists"), "{err}");
    // Nothing was half applied: the migration is one transaction.
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM pg_tables WHERE tablename = 'prose_artifacts'"
        ),
        0
    );
    // Once out of the way it applies; a schema newer than this binary knows is refused.
    query(&url, "DROP TABLE prose_runs");
    let (code, _, err) = support::output(prosevm().args(["runs", "--store", &url]));
    assert_eq!(code, 0, "{err}");
    query(
        &url,
        "INSERT INTO prose_migrations (version, name) VALUES (99, 'future')",
    );
    let (code, _, err) = support::output(prosevm().args(["runs", "--store", &url]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("newer than this prosevm knows"), "{err}");
}

#[test]
fn a_second_answer_to_one_request_is_refused() {
    let Some(url) = database("duplicate") else {
        return;
    };
    let dir = support::scratch("pg-duplicate");
    let pbc = artifact(&dir);
    let id = submit(&url, &pbc, "x", &["--driver", "mock"]);
    let (rt, store) = store(&url);
    let me = WorkerId::new();
    let claim = rt
        .block_on(lease::claim_next(&store, &me, Duration::from_secs(30)))
        .expect("claims")
        .expect("a run to claim");
    assert_eq!(claim.run.0, id);
    let reply = Reply::answer(
        "0:1".parse::<RequestId>().expect("an id"),
        Answer::Session(SessionAnswer::text("first")),
    );
    let mut journal = PgJournal::new(claim.clone(), 0);
    journal.append(&reply).expect("appends");
    rt.block_on(journal.sync())
        .expect("the first answer is recorded");
    // The same request answered again, even by the worker holding the run: refused.
    let mut again = PgJournal::new(claim, 1);
    again.append(&reply).expect("appends");
    let e = rt
        .block_on(again.sync())
        .expect_err("a second answer is refused");
    assert!(e.to_string().contains("refuses a second record"), "{e}");
    assert_eq!(
        count(
            &url,
            &format!("SELECT count(*) FROM prose_journal WHERE run_id = '{id}'")
        ),
        1
    );
}

#[test]
fn a_worker_whose_lease_was_taken_over_can_write_nothing() {
    let Some(url) = database("stale") else {
        return;
    };
    let dir = support::scratch("pg-stale");
    let pbc = artifact(&dir);
    submit(&url, &pbc, "x", &["--driver", "mock"]);
    let (rt, store) = store(&url);
    let (old, new) = (WorkerId::new(), WorkerId::new());
    let first = rt
        .block_on(lease::claim_next(&store, &old, Duration::from_secs(60)))
        .expect("claims")
        .expect("a run");
    // Another worker may not take a run whose lease holds...
    assert!(rt
        .block_on(lease::claim_next(&store, &new, Duration::from_secs(30)))
        .expect("looks")
        .is_none());
    // ...but once the lease expires (the old worker went silent), it does, with a new epoch.
    // (Its time is made to pass: a short lease could run out before the look above, on a
    // loaded machine.)
    query(&url, "UPDATE prose_runs SET lease_until = now()");
    let second = rt
        .block_on(lease::claim_next(&store, &new, Duration::from_secs(30)))
        .expect("claims")
        .expect("the orphaned run");
    assert_eq!(second.run, first.run);
    assert!(second.epoch > first.epoch);
    let reply = Reply::answer(
        "0:1".parse::<RequestId>().expect("an id"),
        Answer::Session(SessionAnswer::text("late")),
    );
    let mut stale = PgJournal::new(first.clone(), 0);
    stale.append(&reply).expect("appends");
    let e = rt
        .block_on(stale.sync())
        .expect_err("a stale append is refused");
    assert!(matches!(e, PgError::Fenced(_)), "{e}");
    let mut record = first.record.clone();
    record.status = prose_runtime::record::RunStatus::Finished;
    let e = rt
        .block_on(first.write_record(&record))
        .expect_err("a stale finish is refused");
    assert!(matches!(e, PgError::Fenced(_)), "{e}");
    // The stale heartbeat renews nothing.
    let kept = rt
        .block_on(lease::heartbeat(
            &store,
            &old,
            &[(first.run.clone(), first.epoch)],
            Duration::from_secs(30),
        ))
        .expect("beats");
    assert!(kept.is_empty());
    // The new holder writes.
    let mut current = PgJournal::new(second.clone(), 0);
    current.append(&reply).expect("appends");
    rt.block_on(current.sync())
        .expect("the holder's append is recorded");
    let rows = query(
        &url,
        &format!(
            "SELECT status, epoch FROM prose_runs WHERE id = '{}'",
            first.run
        ),
    );
    assert_eq!(
        rows[0],
        vec!["running".to_string(), second.epoch.0.to_string()]
    );
    assert_eq!(
        count(&url, "SELECT count(*) FROM prose_journal"),
        1,
        "only the holder's record"
    );
}

#[test]
fn sigterm_stops_a_worker_cleanly_releasing_its_lease_and_recording_nothing_in_flight() {
    let Some(url) = database("sigterm") else {
        return;
    };
    let dir = support::scratch("pg-sigterm");
    let pbc = artifact(&dir);
    let log = dir.join("calls.log");
    let flag = dir.join("fast");
    // Slow until the flag exists: the first worker is stopped while it waits.
    let command = format!(
        "first=$(head -n 1); printf '%s %s %s\\n' \"$PPID\" \"$PROSE_REQUEST_ID\" \"$first\" >> {log}; [ -f {flag} ] || sleep 60; printf 'done: %s\\n' \"$first\"",
        log = log.display(),
        flag = flag.display()
    );
    let id = submit(
        &url,
        &pbc,
        "x",
        &["--driver", "command", "--command", &command],
    );
    let mut w = worker(&url, &dir, "w1", &["--lease", "30"]);
    wait_for("the request to be asked", Duration::from_secs(60), || {
        std::fs::read_to_string(&log).is_ok_and(|t| !t.is_empty())
    });
    let held = query(&url, "SELECT status, owner IS NOT NULL FROM prose_runs");
    assert_eq!(held[0], vec!["running".to_string(), "t".to_string()]);
    let asked = Instant::now();
    sigterm(&w);
    let status = w.wait().expect("worker exits");
    assert!(status.success(), "{status:?}");
    // Stopped, not drained: well before its command's 60 s were up.
    assert!(
        asked.elapsed() < Duration::from_secs(40),
        "the worker took {:?} to stop: it waited for its command",
        asked.elapsed()
    );
    let rows = query(
        &url,
        &format!(
            "SELECT status, owner IS NULL, lease_until IS NULL FROM prose_runs WHERE id = '{id}'"
        ),
    );
    assert_eq!(
        rows[0],
        vec!["queued".to_string(), "t".to_string(), "t".to_string()],
        "the lease is released and the run queued again"
    );
    assert_eq!(
        count(&url, "SELECT count(*) FROM prose_journal"),
        0,
        "the request in flight was abandoned, not recorded"
    );
    let err = std::fs::read_to_string(dir.join("w1.err")).unwrap_or_default();
    assert!(err.contains("queued again"), "{err}");
    // Another worker takes it up and finishes it.
    std::fs::write(&flag, "").expect("flag");
    let mut w2 = worker(&url, &dir, "w2", &["--exit-when-idle", "--no-views"]);
    assert!(w2.wait().expect("exits").success());
    let rows = query(
        &url,
        &format!("SELECT status, outputs::text FROM prose_runs WHERE id = '{id}'"),
    );
    assert_eq!(rows[0][0], "finished");
    assert!(rows[0][1].contains("done: Step three"), "{:?}", rows[0]);
    // The worker that finished it kept no views (--no-views): no binding of the output.
    let views = dir.join(".prose/pg").join(&id);
    assert!(!views.join("bindings/r.md").exists());
    // Only the abandoned request was asked twice.
    let calls = std::fs::read_to_string(&log).expect("log");
    let mut asked: HashMap<String, usize> = HashMap::new();
    for l in calls.lines() {
        let key = l
            .split_once(' ')
            .map(|(_, k)| k.to_string())
            .unwrap_or_default();
        *asked.entry(key).or_default() += 1;
    }
    let twice: Vec<_> = asked.iter().filter(|(_, n)| **n > 1).collect();
    assert_eq!(twice.len(), 1, "{calls}");
    assert!(twice[0].0.contains("Step one"), "{calls}");
}

#[test]
fn runs_inspect_and_resume_work_against_the_postgres_store() {
    let Some(url) = database("cli") else {
        return;
    };
    let dir = support::scratch("pg-cli");
    let pbc = artifact(&dir);
    let id = submit(&url, &pbc, "tides", &["--driver", "mock"]);
    let (code, out, err) = support::output(prosevm().args(["runs", "--store", &url]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id) && out.contains("queued"), "{out}");
    // PROSE_STORE stands for --store.
    let (code, out, err) =
        support::output(prosevm().args(["runs", "--json"]).env("PROSE_STORE", &url));
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(rows[0]["id"], id.as_str());
    assert_eq!(rows[0]["status"], "queued");
    let (code, out, err) =
        support::output(prosevm().args(["runs", "--store", &url, "--status", "queued", "--json"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&id), "{out}");
    let (code, out, err) = support::output(
        prosevm().args(["runs", "--store", &url, "--status", "finished", "--json"]),
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(out.trim(), "[]");
    // Resumed by hand: claimed and driven here, to the end.
    let (code, out, err) = support::output(
        prosevm()
            .current_dir(&dir)
            .args(["resume", &id, "--store", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("r: "), "{out}");
    // Its views were written here, under the state directory's pg/.
    let views = dir.join(".prose/pg").join(&id);
    let r = std::fs::read_to_string(views.join("bindings/r.md")).expect("binding file");
    assert!(r.contains("Step three"), "{r}");
    assert!(views.join("state.md").is_file());
    let (code, out, err) =
        support::output(prosevm().args(["inspect", &id, "--store", &url, "--json"]));
    assert_eq!(code, 0, "{err}");
    let view: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(view["status"], "finished");
    assert_eq!(view["answered"], 3);
    assert_eq!(view["epoch"], 1);
    assert!(view["outputs"]["r"].is_string(), "{view}");
    assert!(view["worker"].is_null(), "released: {view}");
    // A finished run resumed again says so and prints its outputs, asking nothing.
    let (code, out2, err) = support::output(prosevm().args(["resume", &id, "--store", &url]));
    assert_eq!(code, 0, "{err}");
    assert!(err.contains("already finished"), "{err}");
    assert!(out2.starts_with("r: "), "{out2}");
    // One session's exchange, from the journal.
    let (code, out, err) =
        support::output(prosevm().args(["inspect", &id, "--store", &url, "--session", "0:0"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("\"0:0\""), "{out}");
    // The report, from the store.
    let (code, page, err) = support::output(prosevm().args(["report", &id, "--store", &url]));
    assert_eq!(code, 0, "{err}");
    assert!(
        page.contains("<html") && page.contains("Step three"),
        "{err}"
    );
    let (code, _, err) = support::output(prosevm().args(["inspect", "nope", "--store", &url]));
    assert_eq!(code, 2);
    assert!(err.contains("no run `nope`"), "{err}");
    // Keys never reach the database: driver settings are recorded without them (workers
    // read keys from their own environment).
    let (code, keyed, err) = support::output(
        prosevm()
            .args(["submit"])
            .arg(&pbc)
            .args(["--store", &url, "--input", "n=k", "--driver", "openai"])
            .args(["--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
            .env("OPENAI_API_KEY", "sk-test-never-stored-4242"),
    );
    assert_eq!(code, 0, "{err}");
    let record = query(
        &url,
        &format!(
            "SELECT record::text FROM prose_runs WHERE id = '{}'",
            keyed.trim()
        ),
    );
    assert!(record[0][0].contains("\"openai\""), "{record:?}");
    assert_eq!(
        count(
            &url,
            "SELECT count(*) FROM prose_runs WHERE record::text LIKE '%never-stored%'"
        ),
        0
    );
    // A driver that needs a host on stdin cannot be submitted: a worker has none.
    let (code, _, err) = support::output(
        prosevm()
            .args(["submit"])
            .arg(&pbc)
            .args(["--store", &url, "--input", "n=s", "--driver", "stdio"]),
    );
    assert_eq!(code, 1);
    assert!(err.contains("a worker has none"), "{err}");
}

#[test]
fn runs_prune_removes_ended_runs_with_their_journals_and_keeps_the_rest() {
    let Some(url) = database("prune") else {
        return;
    };
    let dir = support::scratch("pg-prune");
    let pbc = artifact(&dir);
    let done = submit(&url, &pbc, "ended", &["--driver", "mock"]);
    let waiting = submit(&url, &pbc, "waiting", &["--driver", "mock"]);
    let (code, _, err) = support::output(
        prosevm()
            .current_dir(&dir)
            .args(["resume", &done, "--store", &url, "--trace", "quiet"]),
    );
    assert_eq!(code, 0, "{err}");
    // A rule is needed; a dry run removes nothing.
    let (code, _, err) = support::output(prosevm().args(["runs", "prune", "--store", &url]));
    assert_eq!(code, 2, "{err}");
    let (code, out, err) = support::output(prosevm().args([
        "runs",
        "prune",
        "--store",
        &url,
        "--status",
        "finished",
        "--dry-run",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("would remove {done}")), "{out}");
    assert_eq!(count(&url, "SELECT count(*) FROM prose_runs"), 2);
    // Ended runs older than a day: none yet.
    let (code, out, err) = support::output(prosevm().args([
        "runs",
        "prune",
        "--store",
        &url,
        "--status",
        "finished",
        "--older-than",
        "1d",
    ]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("0 run(s) removed"), "{out}");
    let (code, out, err) =
        support::output(prosevm().args(["runs", "prune", "--store", &url, "--status", "finished"]));
    assert_eq!(code, 0, "{err}");
    assert!(out.contains(&format!("removed {done}")), "{out}");
    let left = query(&url, "SELECT id FROM prose_runs");
    assert_eq!(left, vec![vec![waiting.clone()]]);
    assert_eq!(
        count(
            &url,
            &format!("SELECT count(*) FROM prose_journal WHERE run_id = '{done}'")
        ),
        0,
        "its journal went with it"
    );
}

/// 200 runs, 4 worker processes; two are killed with SIGKILL part way and replaced. Every
/// run finishes once with the outputs an uninterrupted run gives, and the command driver's
/// log shows that only requests in flight at a kill were asked again.
#[test]
fn two_hundred_runs_survive_two_workers_killed_mid_way() {
    let Some(url) = database("kill") else {
        return;
    };
    let dir = support::scratch("pg-kill");
    let pbc = artifact(&dir);
    let log = dir.join("calls.log");
    let command = logging_command(&log, "0.15");
    let driver = ["--driver", "command", "--command", command.as_str()];
    // What an uninterrupted run gives (the file store, one process).
    let reference_log = dir.join("reference.log");
    let (code, reference, err) = support::output(
        prosevm()
            .current_dir(&dir)
            .args(["exec", "prog.pbc", "--trace", "quiet", "--format", "json"])
            .args(["--input", "n=item9999", "--driver", "command", "--command"])
            .arg(logging_command(&reference_log, "0")),
    );
    assert_eq!(code, 0, "{err}");
    let reference = support::outputs(&reference);
    let expected = |item: &str| -> serde_json::Value {
        serde_json::from_str(&reference.to_string().replace("item9999", item)).expect("json")
    };
    let started = Instant::now();
    let items: Vec<String> = (0..200).map(|i| format!("item{i:04}")).collect();
    let ids: Vec<String> = items
        .iter()
        .map(|item| submit(&url, &pbc, item, &driver))
        .collect();
    eprintln!("submitted 200 runs in {:?}", started.elapsed());
    // A worker that lives holds its runs: its heartbeat (every third of the lease) must not
    // be late by a whole lease, which on a loaded machine a short lease would risk. The killed
    // workers' runs wait this long to be taken.
    let lease = ["--lease", "5", "--concurrency", "8"];
    let mut workers: Vec<(String, Worker)> = (1..=4)
        .map(|i| {
            let name = format!("w{i}");
            let child = worker(&url, &dir, &name, &lease);
            (name, child)
        })
        .collect();
    let finished = || {
        count(
            &url,
            "SELECT count(*) FROM prose_runs WHERE status = 'finished'",
        )
    };
    wait_for("a third of the runs", Duration::from_secs(180), || {
        finished() >= 60
    });
    // Two workers die without a word: no lease released, requests in flight.
    let mut killed = BTreeSet::new();
    for (name, child) in workers.iter_mut().take(2) {
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        killed.insert(child.id().to_string());
        eprintln!(
            "killed {name} (pid {}) at {} finished",
            child.id(),
            finished()
        );
    }
    // A command a killed worker had just started, whose shell came up after its parent was
    // gone, logs PID 1 as its parent (it was reparented to init): that worker's too.
    killed.insert("1".to_string());
    assert!(finished() < 200, "the kills came mid-way");
    for i in 5..=6 {
        let name = format!("w{i}");
        let child = worker(&url, &dir, &name, &lease);
        workers.push((name, child));
    }
    wait_for("all 200 runs", Duration::from_secs(300), || {
        finished() == 200
    });
    for (_, child) in workers.iter_mut().skip(2) {
        sigterm(child);
        assert!(child.wait().expect("exits").success());
    }
    eprintln!("all done in {:?}", started.elapsed());
    // Every run finished with the outputs of an uninterrupted run.
    let rows = query(
        &url,
        "SELECT id, status, outputs::text, (SELECT count(*) FROM prose_journal j WHERE j.run_id = r.id AND j.answered) FROM prose_runs r ORDER BY id",
    );
    assert_eq!(rows.len(), 200);
    let by_id: BTreeMap<&str, &Vec<String>> = rows.iter().map(|r| (r[0].as_str(), r)).collect();
    for (id, item) in ids.iter().zip(&items) {
        let row = by_id[id.as_str()];
        assert_eq!(row[1], "finished", "{row:?}");
        let outputs: serde_json::Value = serde_json::from_str(&row[2]).expect("outputs");
        assert_eq!(outputs, expected(item), "run {id}");
        assert_eq!(row[3], "3", "run {id}: one answer per request");
    }
    // No run finished twice: no two workers (nor one, twice) said they finished it. (A
    // killed worker may have finished a run and died before saying so.)
    let mut finishes: HashMap<String, usize> = HashMap::new();
    for (name, _) in &workers {
        let err = std::fs::read_to_string(dir.join(format!("{name}.err"))).unwrap_or_default();
        for l in err.lines() {
            if let Some(run) = l
                .strip_prefix("[worker] run ")
                .and_then(|r| r.strip_suffix(" finished"))
            {
                *finishes.entry(run.to_string()).or_default() += 1;
            }
        }
    }
    assert!(finishes.len() <= 200 && finishes.len() >= 200 - 2 * 8);
    assert!(finishes.values().all(|n| *n == 1), "{finishes:?}");
    // The driver's log: every request asked; one asked again only if a killed worker asked
    // it before (it was in flight when that worker died).
    let calls = std::fs::read_to_string(&log).expect("log");
    let mut asks: HashMap<String, Vec<String>> = HashMap::new();
    for l in calls.lines() {
        let (pid, key) = l.split_once(' ').expect("pid and request");
        asks.entry(key.to_string())
            .or_default()
            .push(pid.to_string());
    }
    // A worker killed while writing a request to the command leaves it a cut first line:
    // asked only by killed workers, a prefix of the request asked again in full.
    let cut: Vec<String> = asks
        .iter()
        .filter(|(key, pids)| {
            pids.iter().all(|p| killed.contains(p))
                && asks
                    .keys()
                    .any(|k| k != *key && k.starts_with(key.as_str()))
        })
        .map(|(key, _)| key.clone())
        .collect();
    for key in &cut {
        asks.remove(key);
    }
    let only_killed: Vec<_> = asks
        .iter()
        .filter(|(_, pids)| pids.iter().all(|p| killed.contains(p)))
        .collect();
    assert_eq!(
        asks.len(),
        600,
        "three requests for each of 200 runs; asked only by killed workers: {only_killed:?}"
    );
    let mut again = 0;
    for (key, pids) in &asks {
        // Asks by workers that died, each at most once, then at most one more: by a worker
        // that lived, or by the last one that died (whose answer was recorded in time).
        let (_, before) = pids.split_last().expect("asked");
        for p in before {
            assert!(
                killed.contains(p),
                "{key} was asked by {pids:?}: a completed request was asked again"
            );
        }
        let distinct: BTreeSet<&String> = before.iter().collect();
        assert_eq!(distinct.len(), before.len(), "{key}: {pids:?}");
        again += before.len();
    }
    // Each run asks one request at a time: at most one in flight per run a killed worker
    // held (8 each).
    assert!(again <= 2 * 8, "{again} asked again");
    eprintln!("{again} request(s) in flight at the kills were asked again");
}

#[test]
fn workers_answer_from_the_stores_memo_what_an_earlier_run_asked() {
    let Some(url) = database("memo") else {
        return;
    };
    let dir = support::scratch("pg-memo");
    let pbc = artifact(&dir);
    let fake = support::billing::Fake::new(support::billing::echo(), true);
    let driver = [
        "--driver",
        "openai",
        "--model",
        "gpt-4o-mini",
        "--base-url",
        &fake.url,
        "--memo",
    ];
    let first = submit(&url, &pbc, "tides", &driver);
    let mut w = worker(&url, &dir, "memo-1", &["--exit-when-idle"]);
    assert!(w.wait().expect("exits").success());
    assert_eq!(fake.billed().len(), 3, "the first run asks");
    assert_eq!(
        count(
            &url,
            &format!(
                "SELECT count(*) FROM prose_runs WHERE id = '{first}' AND status = 'finished'"
            )
        ),
        1
    );
    // The same run again, on another worker: the store's memo answers every request.
    let second = submit(&url, &pbc, "tides", &driver);
    let mut w = worker(&url, &dir, "memo-2", &["--exit-when-idle"]);
    assert!(w.wait().expect("exits").success());
    assert_eq!(fake.billed().len(), 3, "nothing asked again");
    let from_memo = query(
        &url,
        &format!("SELECT count(*) FROM prose_journal WHERE run_id = '{second}' AND reply::json->'usage'->>'from_memo' = '1'"),
    );
    assert_eq!(from_memo[0][0], "3");
    let (code, out, err) = support::output(prosevm().args(["memo", "--store", &url]));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("the memo at the table prose_memo of the Postgres store: 3 answer(s), "),
        "{out}"
    );
}

/// The number of the store's tables in the database at `url`.
fn store_tables(url: &str) -> i64 {
    count(
        url,
        "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'prose\\_%'",
    )
}

#[test]
fn verify_full_runs_end_to_end_and_another_ca_is_refused_before_anything_is_written() {
    let Some(url) = database("tls_full") else {
        return;
    };
    let Some(tls) = support::pg::tls() else {
        eprintln!("skipping: the server is not one started here, with TLS");
        return;
    };
    assert!(url.contains("sslmode=verify-full"), "{url}");
    let dir = support::scratch("pg-tls-full");
    let pbc = artifact(&dir);
    // Submit, a worker, runs: all over TLS, the server's certificate checked against the CA
    // and its name (127.0.0.1).
    let id = submit(&url, &pbc, "tls", &["--driver", "mock"]);
    let (code, _, err) = support::output(prosevm().current_dir(&dir).args([
        "worker",
        "--store",
        &url,
        "--exit-when-idle",
        "--poll-ms",
        "50",
    ]));
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = support::output(prosevm().args(["runs", "--json", "--store", &url]));
    assert_eq!(code, 0, "{err}");
    let rows: serde_json::Value = serde_json::from_str(&out).expect("json");
    assert_eq!(rows[0]["id"], id.as_str());
    assert_eq!(rows[0]["status"], "finished");

    // Another CA: refused in the handshake, before the schema is made.
    let other = database("tls_other").expect("a database");
    let other = other.replace(
        &tls.ca.display().to_string(),
        &tls.other_ca.display().to_string(),
    );
    let (code, _, err) = support::output(
        prosevm()
            .arg("submit")
            .arg(&pbc)
            .args(["--store", &other, "--input", "n=x", "--driver", "mock"]),
    );
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot connect to the Postgres store"),
        "{err}"
    );
    assert!(err.contains("invalid peer certificate"), "{err}");
    assert_eq!(store_tables(&other), 0, "something was written");

    // The right CA but another name: verify-full refuses, verify-ca (which checks the chain
    // only) accepts. `hostaddr` connects to 127.0.0.1 while the name checked is `localhost`.
    let named = |mode: &str| {
        let db = database(&format!("tls_{}", mode.replace('-', "_"))).expect("a database");
        let (_, rest) = db.split_once("@127.0.0.1:").expect("a loopback URL");
        let rest = rest.replace("sslmode=verify-full", &format!("sslmode={mode}"));
        format!("postgres://postgres@localhost:{rest}&hostaddr=127.0.0.1")
    };
    let full = named("verify-full");
    let (code, _, err) = support::output(prosevm().args(["runs", "--store", &full]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("certificate"), "{err}");
    assert_eq!(store_tables(&full.replace("localhost", "127.0.0.1")), 0);
    let ca = named("verify-ca");
    let (code, _, err) = support::output(prosevm().args(["runs", "--store", &ca]));
    assert_eq!(code, 0, "{err}");
}

#[test]
fn a_client_certificate_logs_in_where_the_server_asks_for_one() {
    let Some(url) = database("tls_client") else {
        return;
    };
    let Some(tls) = support::pg::tls() else {
        eprintln!("skipping: the server is not one started here, with TLS");
        return;
    };
    let db = url
        .split('?')
        .next()
        .expect("url")
        .rsplit('/')
        .next()
        .expect("db");
    query(&url, &format!("ALTER DATABASE {db} OWNER TO prose_cert"));
    let as_cert = url.replace("postgres://postgres@", "postgres://prose_cert@");
    // Without a certificate the server turns the role away.
    let (code, _, err) = support::output(prosevm().args(["runs", "--store", &as_cert]));
    assert_eq!(code, 2, "{err}");
    assert!(
        err.contains("cannot connect to the Postgres store"),
        "{err}"
    );
    let with_cert = format!(
        "{as_cert}&sslcert={}&sslkey={}",
        tls.client_cert.display(),
        tls.client_key.display()
    );
    let (code, out, err) = support::output(prosevm().args(["runs", "--store", &with_cert]));
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("id"), "{out}");
    assert!(store_tables(&url) > 0, "the schema was made as prose_cert");
    // A key others may read is refused before connecting, as libpq does.
    use std::os::unix::fs::PermissionsExt;
    let dir = support::scratch("pg-tls-client");
    let open_key = dir.join("open.key");
    std::fs::copy(&tls.client_key, &open_key).expect("copy");
    std::fs::set_permissions(&open_key, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    let loose = with_cert.replace(
        &tls.client_key.display().to_string(),
        &open_key.display().to_string(),
    );
    let (code, _, err) = support::output(prosevm().args(["runs", "--store", &loose]));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("others may read it"), "{err}");
}

#[test]
fn sigterm_drains_a_worker_within_its_drain_time_and_a_second_one_stops_it_at_once() {
    let Some(url) = database("drain") else {
        return;
    };
    let dir = support::scratch("pg-drain");
    let pbc = artifact(&dir);
    let log = dir.join("calls.log");
    // Each request takes a second: the run is in progress when the worker is told to stop,
    // and finishes within the drain time.
    let id = submit(
        &url,
        &pbc,
        "drained",
        &[
            "--driver",
            "command",
            "--command",
            &logging_command(&log, "1"),
        ],
    );
    let mut w = worker(&url, &dir, "w1", &["--drain", "30"]);
    wait_for("the request to be asked", Duration::from_secs(60), || {
        std::fs::read_to_string(&log).is_ok_and(|t| !t.is_empty())
    });
    sigterm(&w);
    let status = w.wait().expect("worker exits");
    assert!(status.success(), "{status:?}");
    let rows = query(
        &url,
        &format!("SELECT status, owner IS NULL FROM prose_runs WHERE id = '{id}'"),
    );
    assert_eq!(rows[0], vec!["finished".to_string(), "t".to_string()]);
    let calls = std::fs::read_to_string(&log).expect("log");
    assert_eq!(calls.lines().count(), 3, "each request asked once: {calls}");
    let err = std::fs::read_to_string(dir.join("w1.err")).unwrap_or_default();
    assert!(err.contains("draining"), "{err}");

    // Requests that outlast the drain: interrupted when it is up and queued again, the
    // worker gone within a bounded time.
    let slow_log = dir.join("slow.log");
    let groups = dir.join("groups.log");
    // Each time it is asked, the command also logs its process group.
    let slow_command = format!(
        "cut -d' ' -f5 /proc/$$/stat >> {}; {}",
        groups.display(),
        logging_command(&slow_log, "300")
    );
    let slow = submit(
        &url,
        &pbc,
        "slow",
        &["--driver", "command", "--command", &slow_command],
    );
    let mut w = worker(&url, &dir, "w2", &["--drain", "1"]);
    wait_for(
        "the slow request to be asked",
        Duration::from_secs(60),
        || std::fs::read_to_string(&slow_log).is_ok_and(|t| !t.is_empty()),
    );
    let asked = Instant::now();
    sigterm(&w);
    let status = w.wait().expect("worker exits");
    assert!(status.success(), "{status:?}");
    // Its drain (1 s) up, it interrupted the request: well before the command's 300 s.
    assert!(
        asked.elapsed() < Duration::from_secs(120),
        "the worker took {:?} to stop: it waited for its command",
        asked.elapsed()
    );
    let rows = query(
        &url,
        &format!("SELECT status, owner IS NULL FROM prose_runs WHERE id = '{slow}'"),
    );
    assert_eq!(rows[0], vec!["queued".to_string(), "t".to_string()]);

    // A second signal while draining ends the worker at once, with the command it was
    // running (its whole process group).
    let mut w = worker(&url, &dir, "w3", &["--drain", "300"]);
    wait_for(
        "the slow request to be asked again",
        Duration::from_secs(60),
        || std::fs::read_to_string(&slow_log).is_ok_and(|t| t.lines().count() >= 2),
    );
    let group: i32 = std::fs::read_to_string(&groups)
        .expect("groups")
        .lines()
        .nth(1)
        .and_then(|pgid| pgid.trim().parse().ok())
        .expect("the command's group");
    // SAFETY: signal 0 only checks that the group exists.
    assert_eq!(unsafe { libc::killpg(group, 0) }, 0, "the command runs");
    sigterm(&w);
    wait_for("the worker to drain", Duration::from_secs(60), || {
        std::fs::read_to_string(dir.join("w3.err")).is_ok_and(|t| t.contains("draining"))
    });
    sigterm(&w);
    let status = w.wait().expect("worker exits");
    assert_eq!(status.code(), Some(130), "{status:?}");
    // Killed as the worker exits; gone once reaped (a minute is for a loaded machine).
    let deadline = Instant::now() + Duration::from_secs(60);
    // SAFETY: signal 0 only checks that the group exists.
    while unsafe { libc::killpg(group, 0) } == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: as above.
    assert_ne!(
        unsafe { libc::killpg(group, 0) },
        0,
        "the command outlived the worker"
    );
}

#[test]
fn a_worker_fails_a_run_whose_budget_its_driver_cannot_keep_without_asking_anything() {
    let Some(url) = database("budget") else {
        return;
    };
    let dir = support::scratch("pg-budget");
    let pbc = artifact(&dir);
    // Submitted past the CLI's check (as a run from an older prosevm would be).
    let program = prose_runtime::program::Program::from_bytes(
        std::fs::read(&pbc).expect("artifact"),
        pbc.clone(),
    )
    .expect("loads");
    let options = prose_runtime::record::ExecOptions {
        max_tokens: Some(1000),
        ..Default::default()
    };
    let (rt, store) = store(&url);
    let id = rt
        .block_on(store.submit(
            &program,
            BTreeMap::from([("n".to_string(), prose_machine::value::Value::text("x"))]),
            prose_runtime::driver::settings::DriverSettings::Mock(Default::default()),
            options,
        ))
        .expect("submitted");
    drop(store);
    drop(rt);
    let mut w = worker(&url, &dir, "w", &["--exit-when-idle"]);
    assert!(w.wait().expect("exits").success());
    let rows = query(
        &url,
        &format!(
            "SELECT status, record::json->'error'->>'message' FROM prose_runs WHERE id = '{id}'"
        ),
    );
    assert_eq!(rows[0][0], "failed");
    assert!(
        rows[0][1].contains("the mock driver does not report what its answers use"),
        "{:?}",
        rows[0]
    );
    assert_eq!(count(&url, "SELECT count(*) FROM prose_journal"), 0);
}
