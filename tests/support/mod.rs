//! Helpers of the end-to-end tests: the toolchain's binaries, scratch directories, and a
//! throwaway PostgreSQL (the VM's own test helper).
#![allow(dead_code)]

#[path = "../../vm/tests/support/pg.rs"]
pub mod pg;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The binary `name` (`prosec`, `prosevm`) of this build: beside the directory holding
/// this test. `cargo test --workspace` builds it; alone, `cargo build --bins` first.
pub fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test is in target/<profile>/deps");
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --bins` (cargo test --workspace builds it)",
        path.display()
    );
    path
}

/// A command running binary `name`.
pub fn command(name: &str) -> Command {
    let mut c = Command::new(bin(name));
    c.env_remove("PROSE_STORE");
    c
}

/// A fresh, empty directory `name` under cargo's temporary directory for this target.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// Runs `cmd` to the end; returns its exit code (-1 for a signal), stdout and stderr.
pub fn output(cmd: &mut Command) -> (i32, String, String) {
    let out = cmd.output().expect("runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A store under test, as `--store` names it.
#[derive(Clone, Debug)]
pub struct Kind {
    /// `file`, `sqlite` or `postgres`.
    pub name: &'static str,
    /// The `--store` value.
    pub store: String,
    /// For PostgreSQL, the database's URL (to make time pass for a lease).
    pub url: Option<String>,
}

/// The three stores for test `test`, kept under `dir` (PostgreSQL: a new database, when a
/// server can be had).
pub fn kinds(test: &str, dir: &Path) -> Vec<Kind> {
    let mut kinds = vec![
        Kind {
            name: "file",
            store: format!("file:{}", dir.join("state").display()),
            url: None,
        },
        Kind {
            name: "sqlite",
            store: format!("sqlite:{}", dir.join("runs.db").display()),
            url: None,
        },
    ];
    if let Some(url) = pg::database(test) {
        kinds.push(Kind {
            name: "postgres",
            store: url.clone(),
            url: Some(url),
        });
    }
    kinds
}

/// The lease of a run held in the Postgres store ends now, as it does when its holder dies
/// and the lease runs out.
pub fn expire_leases(kind: &Kind) {
    if let Some(url) = &kind.url {
        pg::query(url, "UPDATE prose_runs SET lease_until = now()");
    }
}

/// The outputs in what `prosevm run|exec|resume --format json` printed for a finished run
/// (`{"run", "status", "outputs"}`); the whole document when it holds none (a failure).
pub fn outputs(stdout: &str) -> serde_json::Value {
    let doc: serde_json::Value =
        serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {stdout}"));
    match doc.get("outputs") {
        Some(o) => o.clone(),
        None => doc,
    }
}
