//! A throwaway PostgreSQL for the tests of the Postgres store: `PROSE_TEST_PG_URL` if set
//! (a server the tests may create databases on), else a cluster of Debian's PostgreSQL 15
//! binaries started once per test process: `initdb` into a temporary directory (as the
//! `postgres` user when running as root), `pg_ctl start` on a free loopback port with its
//! socket in that directory. A watcher stops the cluster and removes its directory once the
//! test process is gone. Under `CI=true` a test that cannot get a server fails; elsewhere it
//! is skipped, saying why.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// Where Debian installs the PostgreSQL 15 server (another version there is used if 15 is
/// not).
const BIN: &str = "/usr/lib/postgresql/15/bin";

/// The server binaries: PostgreSQL 15's, else the newest other version Debian installed.
fn bin_dir() -> Option<PathBuf> {
    if Path::new(BIN).join("initdb").is_file() {
        return Some(PathBuf::from(BIN));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("bin"))
        .filter(|b| b.join("initdb").is_file())
        .collect();
    found.sort();
    found.pop()
}

/// The server: a base URL without a database name (`postgres://user@host:port`).
static SERVER: OnceLock<Result<String, String>> = OnceLock::new();

/// A URL for a new, empty database for the test `test`; `None` (having said why) when no
/// server can be had off CI. Panics under `CI=true` when no server can be had. A cluster
/// started here for tests does not sync (fsync off): it is thrown away.
pub fn database(test: &str) -> Option<String> {
    database_on(test, false)
}

/// Like [`database`], on a cluster started with PostgreSQL's default durability (fsync and
/// synchronous commit on), for measurements. Whichever of the two is asked first in a
/// process decides how its cluster runs.
pub fn durable_database(test: &str) -> Option<String> {
    database_on(test, true)
}

fn database_on(test: &str, durable: bool) -> Option<String> {
    let server = SERVER.get_or_init(|| server(durable));
    let base = match server {
        Ok(b) => b.clone(),
        Err(why) => {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("the Postgres tests need a server on CI: {why}");
            }
            eprintln!("skipping {test}: no PostgreSQL server: {why}");
            return None;
        }
    };
    let name = format!(
        "prose_{}_{}",
        test.replace(|c: char| !c.is_ascii_alphanumeric(), "_"),
        std::process::id()
    );
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) =
            tokio_postgres::connect(&format!("{base}/postgres"), tokio_postgres::NoTls)
                .await
                .unwrap_or_else(|e| panic!("cannot connect to {base}: {e}"));
        tokio::spawn(conn);
        // One statement each: CREATE DATABASE cannot run in a transaction block.
        for sql in [
            format!("DROP DATABASE IF EXISTS {name}"),
            format!("CREATE DATABASE {name}"),
        ] {
            client
                .batch_execute(&sql)
                .await
                .unwrap_or_else(|e| panic!("{sql}: {e:?}"));
        }
    });
    Some(format!("{base}/{name}"))
}

/// Runs `sql` on the database at `url`; returns the rows as text (nulls empty).
pub fn query(url: &str, sql: &str) -> Vec<Vec<String>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .expect("connects");
        tokio::spawn(conn);
        client
            .simple_query(sql)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => Some(
                    (0..r.len())
                        .map(|i| r.get(i).unwrap_or_default().to_string())
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    })
}

/// The server to use: `PROSE_TEST_PG_URL`, else a cluster started here.
fn server(durable: bool) -> Result<String, String> {
    if let Ok(url) = std::env::var("PROSE_TEST_PG_URL") {
        let url = url.trim_end_matches('/');
        // A URL naming a database: the tests' databases go beside it.
        let base = match url.rsplit_once('/') {
            Some((b, db)) if !b.ends_with('/') && !db.contains('@') => b,
            _ => url,
        };
        return Ok(base.to_string());
    }
    start_cluster(durable)
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and touches no memory.
    unsafe { libc::geteuid() == 0 }
}

/// `program` with `args`, as the `postgres` user when running as root.
fn as_postgres(program: &Path, args: &[&str]) -> Command {
    if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program).args(args);
        c
    } else {
        let mut c = Command::new(program);
        c.args(args);
        c
    }
}

fn run(mut cmd: Command, what: &str) -> Result<(), String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what} failed ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn start_cluster(durable: bool) -> Result<String, String> {
    let Some(bin) = bin_dir() else {
        return Err(format!(
            "{BIN}/initdb not found (install postgresql-15, or set PROSE_TEST_PG_URL)"
        ));
    };
    let bin = bin.as_path();
    let dir = PathBuf::from(format!(
        "/tmp/prose-pg-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    if is_root() {
        run(
            {
                let mut c = Command::new("chown");
                c.arg("postgres:postgres").arg(&dir);
                c
            },
            "chown",
        )?;
    }
    let data = dir.join("data");
    let data_s = data.to_string_lossy().into_owned();
    let dir_s = dir.to_string_lossy().into_owned();
    run(
        as_postgres(
            &bin.join("initdb"),
            &[
                "-D",
                &data_s,
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
            ],
        ),
        "initdb",
    )?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free port: {e}"))?
        .port();
    let sync = if durable {
        ""
    } else {
        " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    };
    let opts =
        format!("-p {port} -k {dir_s} -c listen_addresses=127.0.0.1 -c max_connections=300{sync}");
    let log = dir.join("server.log").to_string_lossy().into_owned();
    run(
        as_postgres(
            &bin.join("pg_ctl"),
            &[
                "-D", &data_s, "-l", &log, "-o", &opts, "-w", "-t", "30", "start",
            ],
        ),
        "pg_ctl start",
    )
    .map_err(|e| {
        let server_log = std::fs::read_to_string(&log).unwrap_or_default();
        format!("{e}\n{server_log}")
    })?;
    // Once this process is gone, the cluster is stopped and its directory removed.
    let pg_ctl = bin.join("pg_ctl");
    let pg_ctl = pg_ctl.display();
    let stop = if is_root() {
        format!("runuser -u postgres -- {pg_ctl} -D {data_s} -m immediate stop")
    } else {
        format!("{pg_ctl} -D {data_s} -m immediate stop")
    };
    let watcher = format!(
        "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop} >/dev/null 2>&1; rm -rf {dir_s}",
        pid = std::process::id()
    );
    use std::os::unix::process::CommandExt;
    Command::new("sh")
        .arg("-c")
        .arg(watcher)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the cluster's watcher: {e}"))?;
    Ok(format!("postgres://postgres@127.0.0.1:{port}"))
}
