//! The CLI over each store, in real processes: a run is started, listed, inspected and
//! reported; a run held by a live process is refused, naming it; a run whose process was
//! killed with SIGKILL part way is resumed to the outputs an uninterrupted run gives,
//! without asking again what its journal holds.

use super::{expire_leases, kinds, support, Kind};
use serde_json::Value;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Five sessions, one after another.
const PROGRAM: &str = "input topic: \"what to write about\"
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

fn prosevm(dir: &Path) -> Command {
    let mut c = support::command("prosevm");
    c.current_dir(dir);
    c
}

/// `prosevm run` of the program in `kind`'s store, with `extra` flags.
fn run(dir: &Path, kind: &Kind, extra: &[&str]) -> Command {
    let mut c = prosevm(dir);
    c.args([
        "run",
        "prog.prose",
        "--store",
        &kind.store,
        "--input",
        "topic=tides",
    ])
    .args(["--trace", "quiet", "--format", "json"])
    .args(extra);
    c
}

/// The runs `kind`'s store lists.
fn listing(dir: &Path, kind: &Kind) -> Vec<Value> {
    let (code, out, err) =
        support::output(prosevm(dir).args(["runs", "--json", "--store", &kind.store]));
    assert_eq!(code, 0, "{}: {err}", kind.name);
    serde_json::from_str::<Vec<Value>>(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// Waits (up to a minute) for `kind`'s store to list a run for which `ready` holds.
fn wait_for_run(dir: &Path, kind: &Kind, ready: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        if let Some(r) = listing(dir, kind).into_iter().find(|r| ready(r)) {
            return r;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "{}: no such run: {:?}",
            kind.name,
            listing(dir, kind)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A run started in the background, killed with SIGKILL when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(mut cmd: Command) -> Running {
    Running(
        cmd.stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starts"),
    )
}

fn setup(name: &str) -> std::path::PathBuf {
    let dir = support::scratch(name);
    std::fs::write(dir.join("prog.prose"), PROGRAM).expect("program");
    dir
}

#[test]
fn a_run_is_listed_inspected_and_reported_in_every_store() {
    let dir = setup("stores-read");
    for kind in kinds("cli_read", &dir) {
        let name = kind.name;
        let (code, out, err) = support::output(&mut run(&dir, &kind, &[]));
        assert_eq!(code, 0, "{name}: {err}");
        let outputs = support::outputs(&out);
        assert!(
            outputs["r"]
                .as_str()
                .is_some_and(|r| r.contains("Step five")),
            "{name}: {out}"
        );
        let rows = listing(&dir, &kind);
        assert_eq!(rows.len(), 1, "{name}: {rows:?}");
        let id = rows[0]["id"].as_str().expect("id").to_string();
        assert_eq!(
            (&rows[0]["status"], &rows[0]["answered"], &rows[0]["live"]),
            (
                &Value::from("finished"),
                &Value::from(5),
                &Value::from(false)
            ),
            "{name}"
        );
        // Filtered by status, as a table too.
        let (code, out, _) = support::output(prosevm(&dir).args([
            "runs",
            "--store",
            &kind.store,
            "--status",
            "failed",
        ]));
        assert_eq!((code, out.lines().count()), (0, 1), "{name}: {out}");
        let (code, out, err) =
            support::output(prosevm(&dir).args(["inspect", &id, "--json", "--store", &kind.store]));
        assert_eq!(code, 0, "{name}: {err}");
        let view: Value = serde_json::from_str(&out).expect("inspect");
        assert_eq!(view["id"], id.as_str(), "{name}");
        assert_eq!(view["answered"], 5, "{name}");
        assert_eq!(
            view["bindings"]["r"]
                .as_str()
                .map(|r| r.contains("Step five")),
            Some(true),
            "{name}: {view}"
        );
        let (code, out, err) = support::output(prosevm(&dir).args([
            "inspect",
            &id,
            "--session",
            "0:4",
            "--store",
            &kind.store,
        ]));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(
            out.contains("Step five") && out.contains("\"0:4\""),
            "{name}: {out}"
        );
        let (code, page, err) =
            support::output(prosevm(&dir).args(["report", &id, "--store", &kind.store]));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(
            page.contains("<html") && page.contains("Step three"),
            "{name}"
        );
        let (code, _, err) =
            support::output(prosevm(&dir).args(["inspect", "nope", "--store", &kind.store]));
        assert_eq!(code, 2, "{name}: {err}");
        assert!(err.contains("no run `nope`"), "{name}: {err}");
        // Resumed again, a finished run says so and prints its outputs.
        let (code, again, err) = support::output(prosevm(&dir).args([
            "resume",
            &id,
            "--store",
            &kind.store,
            "--format",
            "json",
        ]));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(err.contains("already finished"), "{name}: {err}");
        assert_eq!(support::outputs(&again), outputs, "{name}");
    }
}

#[test]
fn a_run_is_forked_from_a_request_and_compared_in_every_store() {
    let dir = setup("stores-fork");
    for kind in kinds("cli_fork", &dir) {
        let name = kind.name;
        let (code, _, err) = support::output(&mut run(&dir, &kind, &[]));
        assert_eq!(code, 0, "{name}: {err}");
        let id = listing(&dir, &kind)[0]["id"]
            .as_str()
            .expect("id")
            .to_string();
        // Forked before the third session, with another driver: only the last three
        // sessions are asked of it.
        let asked = dir.join(format!("asked-{name}.log"));
        let _ = std::fs::remove_file(&asked);
        let command = format!("echo x >> {}; echo other", asked.display());
        let (code, out, err) = support::output(prosevm(&dir).args([
            "fork",
            &id,
            "--from",
            "0:2",
            "--store",
            &kind.store,
            "--driver",
            "command",
            "--command",
            &command,
            "--trace",
            "quiet",
            "--format",
            "json",
        ]));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(err.contains("2 answer(s) reused"), "{name}: {err}");
        let outputs = support::outputs(&out);
        assert_eq!(outputs["r"], "other", "{name}");
        let asked = std::fs::read_to_string(&asked).expect("the driver was asked");
        assert_eq!(
            asked.lines().count(),
            3,
            "{name}: only what follows the cut"
        );
        let rows = listing(&dir, &kind);
        assert_eq!(rows.len(), 2, "{name}: the forked run is only read");
        let fork_id = rows
            .iter()
            .map(|r| r["id"].as_str().expect("id"))
            .find(|r| *r != id)
            .expect("the fork")
            .to_string();
        let (code, out, err) = support::output(prosevm(&dir).args([
            "diff",
            &id,
            &fork_id,
            "--store",
            &kind.store,
            "--json",
        ]));
        assert_eq!(code, 1, "{name}: they differ: {err}");
        let c: Value = serde_json::from_str(&out).expect("comparison");
        assert_eq!(c["same"], 2, "{name}: {c}");
        let differ: Vec<&str> = c["differ"]
            .as_array()
            .expect("differ")
            .iter()
            .map(|d| d["id"].as_str().expect("id"))
            .collect();
        assert_eq!(differ, ["0:2", "0:3", "0:4"], "{name}");
        assert_eq!(c["outputs"][0]["id"], "r", "{name}");
        assert_eq!(c["outputs"][0]["b"], "other", "{name}");
        let (code, text, _) =
            support::output(prosevm(&dir).args(["diff", &id, &fork_id, "--store", &kind.store]));
        assert_eq!(code, 1, "{name}");
        assert!(
            text.contains("0:3 (session)\n- ") && text.contains("\n+ other\n"),
            "{name}: {text}"
        );
        // A fork reusing every answer asks nothing and ends the same.
        let (code, _, err) = support::output(prosevm(&dir).args([
            "fork",
            &id,
            "--store",
            &kind.store,
            "--trace",
            "quiet",
        ]));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(err.contains("5 answer(s) reused"), "{name}: {err}");
        let again = listing(&dir, &kind)
            .iter()
            .map(|r| r["id"].as_str().expect("id").to_string())
            .find(|r| *r != id && *r != fork_id)
            .expect("the second fork");
        let (code, _, err) =
            support::output(prosevm(&dir).args(["diff", &id, &again, "--store", &kind.store]));
        assert_eq!(code, 0, "{name}: the same answers: {err}");
        // A request the run never asked is refused, listing those it did.
        let (code, _, err) = support::output(prosevm(&dir).args([
            "fork",
            &id,
            "--from",
            "0:9",
            "--store",
            &kind.store,
        ]));
        assert_eq!(code, 1, "{name}: {err}");
        assert!(
            err.contains("request 0:9 was never asked; its requests are: 0:0, 0:1"),
            "{name}: {err}"
        );
    }
}

#[test]
fn a_run_held_by_a_live_process_is_refused_naming_it_in_every_store() {
    let dir = setup("stores-held");
    for kind in kinds("cli_held", &dir) {
        let name = kind.name;
        let child = spawn(run(&dir, &kind, &["--mock-latency", "3000"]));
        let pid = child.0.id();
        let row = wait_for_run(&dir, &kind, |r| r["live"] == true);
        let id = row["id"].as_str().expect("id");
        let (code, _, err) =
            support::output(prosevm(&dir).args(["resume", id, "--store", &kind.store]));
        assert_eq!(code, 1, "{name}: {err}");
        assert!(
            err.contains("being run by") && err.contains(&pid.to_string()),
            "{name}: {err}"
        );
        // Pruning keeps it too.
        let (code, out, err) = support::output(prosevm(&dir).args([
            "runs",
            "prune",
            "--store",
            &kind.store,
            "--status",
            "running",
        ]));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(out.contains(&format!("kept {id}")), "{name}: {out}");
        drop(child);
    }
}

#[test]
fn a_run_killed_part_way_resumes_to_the_same_outputs_in_every_store() {
    let dir = setup("stores-crash");
    for kind in kinds("cli_crash", &dir) {
        let name = kind.name;
        let reference = {
            let (code, out, err) = support::output(&mut run(&dir, &kind, &[]));
            assert_eq!(code, 0, "{name}: {err}");
            out
        };
        let log = dir.join(format!("{name}.log"));
        let log_arg = log.display().to_string();
        let child = spawn(run(
            &dir,
            &kind,
            &["--mock-latency", "300", "--mock-log", &log_arg],
        ));
        // Killed once its journal holds two answers.
        let row = wait_for_run(&dir, &kind, |r| {
            r["answered"].as_u64().is_some_and(|n| n >= 2) && r["status"] == "running"
        });
        let id = row["id"].as_str().expect("id").to_string();
        drop(child);
        // The holder is gone: the run is listed as not live (a lease has to run out first).
        expire_leases(&kind);
        let row = wait_for_run(&dir, &kind, |r| r["id"] == id.as_str());
        assert_eq!(
            (&row["status"], &row["live"]),
            (&Value::from("running"), &Value::from(false)),
            "{name}: {row}"
        );
        let (code, out, err) = support::output(prosevm(&dir).args([
            "resume",
            &id,
            "--store",
            &kind.store,
            "--trace",
            "quiet",
            "--format",
            "json",
            "--mock-latency",
            "0",
            "--mock-log",
            &log_arg,
        ]));
        assert_eq!(code, 0, "{name}: {err}");
        assert_eq!(
            support::outputs(&out),
            support::outputs(&reference),
            "{name}"
        );
        // What the journal held was not asked again: only the request in flight at the kill
        // was asked twice.
        let served = std::fs::read_to_string(&log).expect("log");
        let mut ids: Vec<&str> = served.lines().collect();
        let asked = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert!(asked - ids.len() <= 1, "{name}: {served}");
        assert_eq!(ids.len(), 5, "{name}: {served}");
        let row = wait_for_run(&dir, &kind, |r| r["id"] == id.as_str());
        assert_eq!(
            (&row["status"], &row["answered"]),
            (&Value::from("finished"), &Value::from(5)),
            "{name}"
        );
    }
}

/// A mid-program input after two sessions.
const ASKS: &str = "let a = session \"Draft\"
input audience: \"Who reads it\"
output r = session \"Rewrite for {audience}\"
  context: a
";

#[test]
fn a_waiting_run_is_answered_and_goes_on_in_every_store() {
    let dir = setup("stores-waiting");
    std::fs::write(dir.join("asks.prose"), ASKS).expect("program");
    for kind in kinds("cli_waiting", &dir) {
        let name = kind.name;
        let (code, _, err) = support::output(prosevm(&dir).args([
            "run",
            "asks.prose",
            "--store",
            &kind.store,
            "--trace",
            "quiet",
        ]));
        assert_eq!(code, 3, "{name}: {err}");
        let row = wait_for_run(&dir, &kind, |r| r["status"] == "waiting");
        let id = row["id"].as_str().expect("id").to_string();
        assert_eq!(
            (&row["answered"], &row["live"]),
            (&Value::from(1), &Value::from(false)),
            "{name}"
        );
        let (code, _, err) = support::output(prosevm(&dir).args([
            "answer",
            &id,
            "audience=sailors",
            "--store",
            &kind.store,
        ]));
        assert_eq!(code, 0, "{name}: {err}");
        // Still waiting until resumed, and its record holds the answer.
        let (code, out, err) =
            support::output(prosevm(&dir).args(["inspect", &id, "--json", "--store", &kind.store]));
        assert_eq!(code, 0, "{name}: {err}");
        let view: Value = serde_json::from_str(&out).expect("inspect");
        assert_eq!(view["status"], "waiting", "{name}: {view}");
        assert_eq!(view["inputs"]["audience"], "sailors", "{name}");
        let (code, out, err) = support::output(prosevm(&dir).args([
            "resume",
            &id,
            "--store",
            &kind.store,
            "--trace",
            "quiet",
            "--format",
            "json",
        ]));
        assert_eq!(code, 0, "{name}: {err}");
        let outputs = support::outputs(&out);
        assert_eq!(outputs["r"], "[mock] Rewrite for sailors", "{name}");
        let row = wait_for_run(&dir, &kind, |r| r["id"] == id.as_str());
        assert_eq!(
            (&row["status"], &row["answered"]),
            (&Value::from("finished"), &Value::from(2)),
            "{name}"
        );
    }
}

#[test]
fn an_edited_program_resumes_with_force_in_every_store() {
    const FIRST: &str = "let a = session \"Gather facts\"\nlet b = session \"Draft the text\"\n  context: a\noutput c = session \"Polish it\"\n  context: b\n";
    // Every line moved down, the second session's prompt rewritten.
    const EDITED: &str = "# reviewed\nlet a = session \"Gather facts\"\nlet b = session \"Draft the text for experts\"\n  context: a\noutput c = session \"Polish it\"\n  context: b\n";
    let dir = support::scratch("stores-edit");
    // The third session fails: each run stops after two answers.
    std::fs::write(
        dir.join("script.json"),
        r#"[{"prompt": "Polish", "fail": "the provider is down"}]"#,
    )
    .expect("script");
    for kind in kinds("cli_edit", &dir) {
        let name = kind.name;
        std::fs::write(dir.join("prog.prose"), FIRST).expect("program");
        let (code, _, err) = support::output(prosevm(&dir).args([
            "run",
            "prog.prose",
            "--store",
            &kind.store,
            "--mock-script",
            "script.json",
            "--trace",
            "quiet",
        ]));
        assert_eq!(code, 1, "{name}: {err}");
        let id = listing(&dir, &kind)[0]["id"]
            .as_str()
            .expect("id")
            .to_string();
        std::fs::write(dir.join("prog.prose"), EDITED).expect("edit");
        let resume = |extra: &[&str]| {
            support::output(
                prosevm(&dir)
                    .args(["resume", &id, "--store", &kind.store, "--trace", "quiet"])
                    .args(extra),
            )
        };
        let (code, _, err) = resume(&[]);
        assert_eq!(code, 1, "{name}: {err}");
        assert!(
            err.contains("has changed") && err.contains("--force"),
            "{name}: {err}"
        );
        let log = dir.join(format!("second-{name}.log"));
        let (code, out, err) = resume(&[
            "--force",
            "--driver",
            "mock",
            "--mock-log",
            log.to_str().expect("path"),
        ]);
        assert_eq!(code, 0, "{name}: {err}");
        assert!(
            err.contains("1 answer(s) will be asked again:\n  0:1 at prog:3: let b = session \"Draft the text for experts\""),
            "{name}: {err}"
        );
        assert_eq!(out, "c: [mock] Polish it\n", "{name}");
        // The unchanged first session was not asked again; the edited and the failed were.
        assert_eq!(
            std::fs::read_to_string(&log).expect("log"),
            "0:1\n0:2\n",
            "{name}"
        );
        // The store keeps the edited program and a journal a later resume agrees with.
        let (code, out, err) = resume(&[]);
        assert_eq!(code, 0, "{name}: {err}");
        assert_eq!(out, "c: [mock] Polish it\n", "{name}");
        let (code, out, err) =
            support::output(prosevm(&dir).args(["report", &id, "--store", &kind.store]));
        assert_eq!(code, 0, "{name}: {err}");
        assert!(
            out.contains("for experts"),
            "{name}: the report shows the old program"
        );
        let rows = listing(&dir, &kind);
        assert_eq!(rows[0]["status"], "finished", "{name}");
        assert_eq!(rows[0]["answered"], 3, "{name}: {rows:?}");
    }
}

/// Runs `sql` (with `?1`/`$1` placeholders given as literals already) on `kind`'s database.
fn tamper(dir: &Path, kind: &Kind, sql: &str) {
    match kind.name {
        "sqlite" => {
            let conn = rusqlite::Connection::open(dir.join("runs.db")).expect("opens");
            conn.execute_batch(sql).expect("tampers");
        }
        "postgres" => {
            support::pg::query(kind.url.as_deref().expect("url"), sql);
        }
        other => unreachable!("{other} is no database"),
    }
}

/// Every file under `dir`, relative, except the stores' own.
fn files_outside_the_stores(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let rel = e.path().strip_prefix(dir).unwrap().display().to_string();
            if rel.starts_with(".prose") || rel.starts_with("runs.db") || rel.starts_with("state") {
                continue;
            }
            if e.path().is_dir() {
                stack.push(e.path());
            }
            found.push(rel);
        }
    }
    found.sort();
    found
}

#[test]
fn ids_a_database_holds_are_checked_before_they_name_files_in_every_store() {
    // A store can be shared (a Postgres database many workers use, a SQLite file someone
    // sends): a row whose id is a path must never become one.
    let dir = setup("stores-hostile-ids");
    let outside = dir.join("outside");
    let absolute = format!("{}/PWNED", outside.display());
    for kind in kinds("cli_hostile_ids", &dir)
        .into_iter()
        .filter(|k| k.name != "file")
    {
        let name = kind.name;
        for hostile in ["../../x/PWNED", absolute.as_str()] {
            let (code, out, err) = support::output(&mut run(&dir, &kind, &[]));
            assert_eq!(code, 0, "{name}: {err}");
            let id = serde_json::from_str::<Value>(&out).expect("json")["run"]
                .as_str()
                .expect("id")
                .to_string();
            let before = files_outside_the_stores(&dir);
            // The row's id and the record's own id both become the path, and the run looks
            // unfinished, so that resume and prune would act on it.
            let cast = if name == "postgres" { "::jsonb" } else { "" };
            let text = if name == "postgres" {
                "record::text"
            } else {
                "record"
            };
            tamper(
                &dir,
                &kind,
                &format!(
                    "DELETE FROM prose_journal WHERE run_id = '{id}';
                     UPDATE prose_runs SET id = '{hostile}', status = 'interrupted',
                        record = replace({text}, '{id}', '{hostile}'){cast}
                      WHERE id = '{id}';"
                ),
            );
            let (code, _, err) = support::output(prosevm(&dir).args([
                "resume",
                hostile,
                "--store",
                &kind.store,
                "--trace",
                "quiet",
            ]));
            assert_ne!(code, 0, "{name}: resuming {hostile} must be refused: {err}");
            assert!(err.contains("is not a run id"), "{name}: {err}");
            let listed = listing(&dir, &kind);
            let row = listed
                .iter()
                .find(|r| r["id"] == hostile)
                .unwrap_or_else(|| panic!("{name}: listed: {listed:?}"));
            assert!(
                row["status"].is_null(),
                "{name}: listed as unreadable: {row}"
            );
            let (code, _, err) = support::output(prosevm(&dir).args([
                "runs",
                "prune",
                "--status",
                "interrupted",
                "--store",
                &kind.store,
            ]));
            assert_eq!(code, 0, "{name}: {err}");
            assert_eq!(
                files_outside_the_stores(&dir),
                before,
                "{name}: {hostile} named files"
            );
            assert!(!outside.exists() && !dir.join("x").exists(), "{name}");
        }
        // A worker claiming a queued row whose id is a path sets it aside as failed.
        if let Some(url) = &kind.url {
            let (code, _, err) =
                support::output(support::command("prosec").current_dir(&dir).args([
                    "build",
                    "prog.prose",
                    "-o",
                    "prog.pbc",
                ]));
            assert_eq!(code, 0, "{err}");
            let (code, out, err) = support::output(prosevm(&dir).args([
                "submit",
                "prog.pbc",
                "--store",
                url,
                "--input",
                "topic=tides",
            ]));
            assert_eq!(code, 0, "{err}");
            let id = out.trim().to_string();
            let hostile = "../../x/QUEUED";
            tamper(
                &dir,
                &kind,
                &format!(
                    "UPDATE prose_runs SET id = '{hostile}',
                        record = replace(record::text, '{id}', '{hostile}')::jsonb
                      WHERE id = '{id}';"
                ),
            );
            let (_, _, err) =
                support::output(prosevm(&dir).args(["worker", "--store", url, "--exit-when-idle"]));
            let status = support::pg::query(
                url,
                &format!("SELECT status FROM prose_runs WHERE id = '{hostile}'"),
            );
            assert_eq!(status, [["failed"]], "{err}");
            assert!(err.contains("is not a run id"), "{err}");
            assert!(!dir.join("x").exists());
        }
    }
}
